/* plan_raw.c — a plan's raw form (rt_program_vt.run_raw), what a loop's regions run
 * as each iteration: the same steps on data pointers, every value in a slot of one scratch block
 * planned at compile time, so an iteration allocates nothing, counts no references and builds no
 * tensor. A program has a raw form when nothing in it has an effect, reads a variable or is a
 * string: its steps are generated kernels, OpenBLAS products, native scalar branches and loops,
 * plumbing (params, constants, results of those) and reference kernels, which run on tensor
 * headers built in the scratch around the slots (a gather, a tensor-array write: no allocation
 * either). A reference kernel that fails hands the run back (RT_RAW_REDO): the caller reruns the
 * node the usual way, which reports the error. Outputs produced by a step are written straight
 * into the caller's memory (out[k]); the rest are copied there at the end.
 *
 *   scratch:  [ ptr: one pointer per node | bufs: a step's buffer list | headers | slots ... ]
 */
#include <stdlib.h>
#include <string.h>

#include "runtime/plan.h"

#define ALIGN64(x) (((x) + 63) & ~(size_t)63)

static size_t value_bytes(const ir_node *n) {
    return ALIGN64((size_t)ir_numel(n->rank, n->dims) * ir_dtype_size(n->dtype) + 1);
}

/* scratch layout: the pointer table, the step buffer list, then the value slots */
static size_t head_bytes(const rt_plan *pl) {
    return ALIGN64((size_t)pl->base.g->n_nodes * sizeof(void *)) +
           ALIGN64((size_t)(pl->max_bufs + 1) * sizeof(void *));
}

/* A node a raw run computes with its reference kernel: pure, deterministic, not a source. */
static bool by_ref(const ir_node *n) {
    if (ir_ops[n->op].flags & (IR_F_SIDE | IR_F_RAND | IR_F_CF))
        return false;
    switch (n->op) {
    case IR_OP_PARAM:
    case IR_OP_CONST:
    case IR_OP_GET:
    case IR_OP_VAR_READ:
    case IR_OP_ASSIGN:
        return false;
    default:
        return true;
    }
}

tj_status rt_plan_raw_prepare(rt_plan *pl) {
    const ir_graph *g = pl->base.g;
    pl->raw_bytes = 0;
    if (g->n_effects)
        return TJ_OK;
    for (uint32_t i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].dtype == TJ_STRING)
            return TJ_OK;
    uint32_t max_in = 0;
    for (uint32_t s = 0; s < pl->n_steps; s++) {
        const rt_step *sp = &pl->steps[s];
        const ir_node *n = ir_node_get(g, sp->id);
        if (sp->kind != RT_STEP_NODE || n->op == IR_OP_PARAM || n->op == IR_OP_CONST ||
            n->op == IR_OP_GET)
            continue;
        if (!by_ref(n))
            return TJ_OK; /* a variable or an effect: only the executor */
        if (n->n_in > max_in)
            max_in = n->n_in;
    }
    int64_t *off = malloc(((size_t)g->n_nodes + 1) * sizeof *off);
    if (!off)
        return ir_errorf(TJ_ERR_OOM, "%s: out of memory", pl->who);
    for (uint32_t i = 0; i < g->n_nodes; i++)
        off[i] = RT_RAW_NONE;
    pl->raw_hdr = head_bytes(pl);
    size_t at = pl->raw_hdr + ALIGN64(((size_t)max_in + 1) * sizeof(tj_tensor));
    tj_status st = TJ_OK;
    for (uint32_t s = 0; s < pl->n_steps && !st; s++) {
        rt_step *sp = &pl->steps[s];
        const ir_node *n = ir_node_get(g, sp->id);
        if (sp->kind == RT_STEP_NODE) {
            if (n->op == IR_OP_PARAM) {
                off[sp->id] = RT_RAW_PARAM;
            } else if (n->op == IR_OP_CONST) {
                off[sp->id] = RT_RAW_CONST;
            } else if (n->op != IR_OP_GET) { /* a reference kernel's result */
                off[sp->id] = (int64_t)at;
                at += value_bytes(n);
            } else if (off[sp->id] == RT_RAW_NONE) { /* a GET's slot: set by its node's step */
                st = ir_errorf(TJ_ERR_INVALID, "%s: get %%%u before its node", pl->who, sp->id);
            }
            continue;
        }
        if (sp->kind == RT_STEP_CF) { /* a slot per result; its GETs read them */
            uint32_t nr = ir_cf_n_results(g, n);
            if (!(sp->raw_res = malloc(((size_t)nr + 1) * sizeof *sp->raw_res))) {
                st = ir_errorf(TJ_ERR_OOM, "%s: out of memory", pl->who);
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
        if (sp->kind == RT_STEP_GEMM && rt_step_has_epi(sp)) { /* the product: a slot */
            off[sp->id] = (int64_t)at;
            at += ALIGN64(rt_plan_gemm_bytes(sp) + 1);
            outs = sp->epi.out;
            n_out = sp->epi.n_out;
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
    /* an output that is a tensor-array write of a param nothing else reads may be written over
     * that param's memory (the loop passes the same buffer in and out: no copy of the array) */
    int32_t *inplace = malloc(((size_t)g->n_outputs + 1) * sizeof *inplace);
    uint32_t *readers = calloc((size_t)g->n_nodes + 1, sizeof *readers);
    if (!inplace || !readers) {
        free(off);
        free(inplace);
        free(readers);
        return ir_errorf(TJ_ERR_OOM, "%s: out of memory", pl->who);
    }
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        const uint32_t *in = ir_inputs(g, &g->nodes[i]);
        for (uint32_t k = 0; k < g->nodes[i].n_in; k++)
            readers[in[k]]++;
    }
    for (uint32_t k = 0; k < g->n_outputs; k++) {
        readers[g->outputs[k]]++; /* an output counts as a reader */
        inplace[k] = -1;
    }
    for (uint32_t k = 0; k < g->n_outputs; k++) {
        const ir_node *o = ir_node_get(g, g->outputs[k]);
        if (o->op != IR_OP_UPDATE_INDEX || readers[g->outputs[k]] != 1 || off[g->outputs[k]] < 0)
            continue;
        uint32_t d = ir_inputs(g, o)[0];
        const ir_node *pn = ir_node_get(g, d);
        if (pn->op == IR_OP_PARAM && readers[d] == 1)
            inplace[k] = (int32_t)pn->a.i[0];
    }
    free(readers);
    pl->raw_inplace = inplace;
    pl->raw_off = off;
    pl->raw_bytes = at;
    return TJ_OK;
}

int32_t rt_plan_raw_inplace(const rt_program *p, uint32_t k) {
    const rt_plan *pl = (const rt_plan *)p;
    return pl->raw_inplace && k < p->g->n_outputs ? pl->raw_inplace[k] : -1;
}

/* update_index(data, i, value) written over data itself: only row i changes. false: i is out of
 * range (the usual path reports it). */
static bool update_in_place(const ir_graph *g, const ir_node *n, void *const *ptr) {
    const uint32_t *in = ir_inputs(g, n);
    const ir_node *x = ir_node_get(g, in[0]), *i = ir_node_get(g, in[1]);
    int64_t idx = i->dtype == TJ_I32 ? *(const int32_t *)ptr[in[1]] : *(const int64_t *)ptr[in[1]];
    int64_t rows = x->rank ? x->dims[0] : 0;
    if ((i->dtype != TJ_I32 && i->dtype != TJ_I64) || idx < 0 || idx >= rows)
        return false;
    size_t row = (size_t)(ir_numel(x->rank, x->dims) / rows) * ir_dtype_size(x->dtype);
    if (row)
        memmove((char *)ptr[in[0]] + (size_t)idx * row, ptr[in[2]], row);
    return true;
}

size_t rt_plan_raw_bytes(const rt_program *p) {
    return ((const rt_plan *)p)->raw_bytes;
}

void rt_plan_header(tj_tensor *h, const ir_node *n, void *data) {
    memset(h, 0, sizeof *h);
    atomic_init(&h->rc, 1);
    h->kind = RT_CONCRETE;
    h->dtype = n->dtype;
    h->rank = n->rank;
    memcpy(h->dims, n->dims, (size_t)n->rank * sizeof *h->dims);
    h->numel = ir_numel(n->rank, n->dims);
    h->data = data;
}

/* Whether node id is written by a step (so the step may write it into the caller's memory). */
static bool step_made(const rt_plan *pl, uint32_t id) {
    int64_t o = pl->raw_off[id];
    if (o < 0)
        return false;
    int op = ir_node_get(pl->base.g, id)->op;
    return op != IR_OP_GET; /* GETs point into a control-flow node's result slots */
}

tj_status rt_plan_run_raw(rt_program *p, void *const *in, void *const *out, void *scratch) {
    rt_plan *pl = (rt_plan *)p;
    const ir_graph *g = p->g;
    void **ptr = scratch;
    void **bufs = (void **)((char *)scratch + ALIGN64((size_t)g->n_nodes * sizeof(void *)));
    char *base = scratch;
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        int64_t o = pl->raw_off[i];
        const ir_node *n = &g->nodes[i];
        ptr[i] = o >= 0              ? base + o
                 : o == RT_RAW_PARAM ? in[n->a.i[0]]
                 : o == RT_RAW_CONST ? pl->consts[i]->data
                                     : NULL;
    }
    /* outputs a kernel makes go straight to the caller (the first time a node is an output) */
    uint64_t bound = 0;
    for (uint32_t k = 0; k < g->n_outputs && k < 64; k++) {
        uint32_t o = g->outputs[k];
        if (step_made(pl, o) && ptr[o] == base + pl->raw_off[o]) {
            ptr[o] = out[k];
            bound |= (uint64_t)1 << k;
        }
    }
    for (uint32_t s = 0; s < pl->n_steps; s++) {
        const rt_step *sp = &pl->steps[s];
        switch (sp->kind) {
        case RT_STEP_KERNEL:
            for (uint32_t k = 0; k < sp->n_in; k++)
                bufs[k] = ptr[sp->in[k]];
            for (uint32_t k = 0; k < sp->n_out; k++)
                bufs[sp->n_in + k] = ptr[sp->out[k]];
            bufs[sp->n_in + sp->n_out] = sp->geom;
            rt_plan_run_units(pl, sp->fn, &sp->units, bufs);
            break;
        case RT_STEP_GEMM: {
            char *C = ptr[sp->id];
            const rt_epilogue *e = &sp->epi;
            for (uint32_t k = 0; k < e->n_in; k++)
                bufs[k] = ptr[e->in[k]];
            for (uint32_t k = 0; k < e->n_out; k++)
                bufs[e->n_in + k] = ptr[e->out[k]];
            bufs[e->n_in + e->n_out] = sp->geom;
            rt_plan_gemm(pl, sp, ptr[sp->src[0]], ptr[sp->src[1]], C, bufs);
            break;
        }
        case RT_STEP_CONV: {
            const rt_epilogue *e = &sp->epi;
            for (uint32_t k = 0; k < e->n_in; k++)
                bufs[k] = ptr[e->in[k]];
            for (uint32_t k = 0; !sp->pool && k < e->n_out; k++)
                bufs[e->n_in + k] = ptr[e->out[k]];
            if (!rt_step_has_epi(sp) && !sp->pool) /* alone: its own output */
                bufs[0] = ptr[sp->id];
            else
                bufs[e->n_in + e->n_out] = sp->geom;
            if (rt_plan_conv(pl, sp, ptr[sp->src[0]], ptr[sp->src[1]], bufs,
                             sp->pool ? ptr[sp->pool - 1] : NULL) != TJ_OK)
                return RT_RAW_REDO; /* no memory: the usual path reports it */
            break;
        }
        case RT_STEP_CF: {
            const ir_node *n = ir_node_get(g, sp->id);
            uint32_t nr = ir_cf_n_results(g, n);
            for (uint32_t k = 0; k < sp->n_in; k++)
                bufs[k] = ptr[sp->in[k]];
            for (uint32_t k = 0; k < nr; k++)
                bufs[sp->n_in + k] = base + sp->raw_res[k];
            if (((rt_cf_fn)(void *)sp->fn)(bufs) != 0)
                return RT_RAW_REDO;
            break;
        }
        default: { /* params, constants, GETs: their pointers are set; the rest: a reference kernel
                    */
            const ir_node *n = ir_node_get(g, sp->id);
            if (n->op == IR_OP_PARAM || n->op == IR_OP_CONST || n->op == IR_OP_GET)
                break;
            if (n->op == IR_OP_UPDATE_INDEX && ptr[ir_inputs(g, n)[0]] == ptr[sp->id]) {
                if (!update_in_place(g, n, ptr))
                    return RT_RAW_REDO;
                break;
            }
            tj_tensor *h = (tj_tensor *)(base + pl->raw_hdr), **hp = (tj_tensor **)bufs;
            const uint32_t *nin = ir_inputs(g, n);
            for (uint32_t k = 0; k < n->n_in; k++) {
                rt_plan_header(&h[k], ir_node_get(g, nin[k]), ptr[nin[k]]);
                hp[k] = &h[k];
            }
            rt_plan_header(&h[n->n_in], n, ptr[sp->id]);
            if (rt_ref_kernel(n, hp, &h[n->n_in]) != TJ_OK)
                return RT_RAW_REDO; /* an error to report: the usual path finds it again */
            break;
        }
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
