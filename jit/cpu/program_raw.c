/* program_raw.c — the CPU program's raw form (rt_program_vt.run_raw), what a loop's regions run
 * as each iteration: the same steps on data pointers, every value in a slot of one scratch block
 * planned at compile time, so an iteration allocates nothing, counts no references and builds no
 * tensor. A program has a raw form when each of its steps is a generated kernel, an OpenBLAS
 * product, a native scalar branch or loop, or plumbing (params, constants, results of those), no
 * value is a string and nothing has an effect. Outputs produced by a kernel are written straight
 * into the caller's memory (out[k]); the rest are copied there at the end.
 *
 *   scratch:  [ ptr: one pointer per node | bufs: a step's buffer list | value slots ... ]
 */
#include <stdlib.h>
#include <string.h>

#include "jit/cpu/program.h"

#ifdef TJ_HAVE_LLVM

#define ALIGN64(x) (((x) + 63) & ~(size_t)63)

static size_t value_bytes(const ir_node *n) {
    return ALIGN64((size_t)ir_numel(n->rank, n->dims) * ir_dtype_size(n->dtype) + 1);
}

/* scratch layout: the pointer table, the step buffer list, then the value slots */
static size_t head_bytes(const cpu_prog *cp) {
    return ALIGN64((size_t)cp->base.g->n_nodes * sizeof(void *)) +
           ALIGN64((size_t)(cp->max_bufs + 1) * sizeof(void *));
}

tj_status jit_cpu_raw_plan(cpu_prog *cp) {
    const ir_graph *g = cp->base.g;
    cp->raw_bytes = 0;
    if (g->n_effects)
        return TJ_OK;
    for (uint32_t i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].dtype == TJ_STRING)
            return TJ_OK;
    for (uint32_t s = 0; s < cp->n_steps; s++) {
        const step *sp = &cp->steps[s];
        int op = ir_node_get(g, sp->id)->op;
        if (sp->kind == STEP_NODE && op != IR_OP_PARAM && op != IR_OP_CONST && op != IR_OP_GET)
            return TJ_OK; /* a reference kernel, a variable, an effect: only the executor */
    }
    int64_t *off = malloc(((size_t)g->n_nodes + 1) * sizeof *off);
    if (!off)
        return ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory");
    for (uint32_t i = 0; i < g->n_nodes; i++)
        off[i] = RAW_NONE;
    size_t at = head_bytes(cp);
    tj_status st = TJ_OK;
    for (uint32_t s = 0; s < cp->n_steps && !st; s++) {
        step *sp = &cp->steps[s];
        const ir_node *n = ir_node_get(g, sp->id);
        if (sp->kind == STEP_NODE) {
            if (n->op == IR_OP_PARAM)
                off[sp->id] = RAW_PARAM;
            else if (n->op == IR_OP_CONST)
                off[sp->id] = RAW_CONST;
            /* a GET's slot was set by its control-flow node's step */
            else if (off[sp->id] == RAW_NONE)
                st = ir_errorf(TJ_ERR_INVALID, "cpu jit: get %%%u before its node", sp->id);
            continue;
        }
        if (sp->kind == STEP_CF) { /* a slot per result; its GETs read them */
            uint32_t nr = ir_cf_n_results(g, n);
            if (!(sp->raw_res = malloc(((size_t)nr + 1) * sizeof *sp->raw_res))) {
                st = ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory");
                break;
            }
            for (uint32_t k = 0; k < nr; k++) {
                ir_node d;
                if ((st = ir_cf_result(g, n, k, &d)))
                    break;
                sp->raw_res[k] = (int64_t)at;
                at += value_bytes(&d);
            }
            for (uint32_t j = sp->id + 1; j < g->n_nodes && !st; j++) {
                const ir_node *gn = ir_node_get(g, j);
                if (gn->op == IR_OP_GET && ir_inputs(g, gn)[0] == sp->id &&
                    (uint64_t)gn->a.i[0] < nr)
                    off[j] = sp->raw_res[gn->a.i[0]];
            }
            continue;
        }
        const uint32_t *outs = sp->out;
        uint32_t n_out = sp->n_out;
        if (sp->kind == STEP_BLAS && sp->epi) { /* the product itself: a slot too */
            off[sp->id] = (int64_t)at;
            at += ALIGN64(jit_cpu_blas_bytes(sp) + 1);
            outs = sp->epi->outputs;
            n_out = sp->epi->n_outputs;
        }
        for (uint32_t k = 0; k < n_out; k++) {
            off[outs[k]] = (int64_t)at;
            at += value_bytes(ir_node_get(g, outs[k]));
        }
    }
    if (st) {
        free(off);
        return st;
    }
    cp->raw_off = off;
    cp->raw_bytes = at;
    return TJ_OK;
}

size_t jit_cpu_raw_bytes(const rt_program *p) {
    return ((const cpu_prog *)p)->raw_bytes;
}

/* Whether node id is written by a step (so the step may write it into the caller's memory). */
static bool step_made(const cpu_prog *cp, uint32_t id) {
    int64_t o = cp->raw_off[id];
    if (o < 0)
        return false;
    int op = ir_node_get(cp->base.g, id)->op;
    return op != IR_OP_GET; /* GETs point into a control-flow node's result slots */
}

tj_status jit_cpu_run_raw(rt_program *p, void *const *in, void *const *out, void *scratch) {
    cpu_prog *cp = (cpu_prog *)p;
    const ir_graph *g = p->g;
    void **ptr = scratch;
    void **bufs = (void **)((char *)scratch + ALIGN64((size_t)g->n_nodes * sizeof(void *)));
    char *base = scratch;
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        int64_t o = cp->raw_off[i];
        const ir_node *n = &g->nodes[i];
        ptr[i] = o >= 0           ? base + o
                 : o == RAW_PARAM ? in[n->a.i[0]]
                 : o == RAW_CONST ? cp->consts[i]->data
                                  : NULL;
    }
    /* outputs a kernel makes go straight to the caller (the first time a node is an output) */
    uint64_t bound = 0;
    for (uint32_t k = 0; k < g->n_outputs && k < 64; k++) {
        uint32_t o = g->outputs[k];
        if (step_made(cp, o) && ptr[o] == base + cp->raw_off[o]) {
            ptr[o] = out[k];
            bound |= (uint64_t)1 << k;
        }
    }
    for (uint32_t s = 0; s < cp->n_steps; s++) {
        const step *sp = &cp->steps[s];
        switch (sp->kind) {
        case STEP_GEN:
            for (uint32_t k = 0; k < sp->n_in; k++)
                bufs[k] = ptr[sp->in[k]];
            for (uint32_t k = 0; k < sp->n_out; k++)
                bufs[sp->n_in + k] = ptr[sp->out[k]];
            jit_cpu_run_units(cp, sp->fn, &sp->plan, bufs);
            break;
        case STEP_BLAS: {
            const uint32_t *min = ir_inputs(g, ir_node_get(g, sp->id));
            char *C = ptr[sp->id];
            if (sp->epi) {
                const pass_group *gr = sp->epi;
                for (uint32_t k = 0; k < gr->n_inputs; k++)
                    bufs[k] = ptr[gr->inputs[k]];
                for (uint32_t k = 0; k < gr->n_outputs; k++)
                    bufs[gr->n_inputs + k] = ptr[gr->outputs[k]];
            }
            jit_cpu_blas_run(cp, sp, ptr[min[0]], ptr[min[1]], C, bufs);
            break;
        }
        case STEP_CF: {
            const ir_node *n = ir_node_get(g, sp->id);
            uint32_t nr = ir_cf_n_results(g, n);
            for (uint32_t k = 0; k < sp->n_in; k++)
                bufs[k] = ptr[sp->in[k]];
            for (uint32_t k = 0; k < nr; k++)
                bufs[sp->n_in + k] = base + sp->raw_res[k];
            if (((jit_cpu_cf_fn)(void *)sp->fn)(bufs) != 0)
                return RT_RAW_REDO;
            break;
        }
        default: /* params, constants, GETs: their pointers are set */
            break;
        }
    }
    for (uint32_t k = 0; k < g->n_outputs; k++) {
        uint32_t o = g->outputs[k];
        if (k < 64 && (bound >> k & 1))
            continue;
        const ir_node *n = ir_node_get(g, o);
        size_t bytes = (size_t)ir_numel(n->rank, n->dims) * ir_dtype_size(n->dtype);
        if (bytes && out[k] != ptr[o])
            memcpy(out[k], ptr[o], bytes);
    }
    return TJ_OK;
}

#endif /* TJ_HAVE_LLVM */
