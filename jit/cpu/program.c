/* program.c — the CPU backend's program: the runtime's plan (runtime/plan.h, which runs it with
 * the one run loop every backend shares) made from the steps plan_decide.c decided and compile.c
 * compiled. Each step becomes an rt_step: a generated kernel with its work units, an OpenBLAS or
 * packed product with its epilogue's buffers (and whether the gemm tiles apply a + bias / relu
 * epilogue themselves, whether a constant B is packed), a direct convolution with its epilogue
 * and pool, native control flow, or a node the executor runs. Only concrete shapes are compiled:
 * a graph with unknown dims is refused with TJ_ERR_UNSUPPORTED (the caller interprets it). */
#include <stdlib.h>
#include <string.h>

#include "jit/cpu/program.h"
#include "runtime/kernels/conv.h"
#include "runtime/kernels/gemm.h"

static const rt_program_vt cpu_vt;

bool jit_cpu_is_program(const rt_program *p) {
    return p && p->vt == &cpu_vt;
}

const pass_partition *jit_cpu_program_partition(const rt_program *p) {
    return jit_cpu_is_program(p) ? ((const cpu_prog *)p)->part : NULL;
}

/* The constant right operand of product s packed, at its first run (f32, one batch, A not
 * transposed, M small enough that not packing A costs little); NULL: OpenBLAS runs it. */
static bool packable(const cpu_prog *cp, const step *s) {
    const rt_mm *mm = &s->mm;
    const ir_node *b = ir_node_get(cp->rp.base.g, s->src[1]);
    if (s->kind == STEP_CONV) /* a constant f32 filter, packed for the direct kernels' route */
        return b->op == IR_OP_CONST && b->dtype == TJ_F32;
    return s->kind == STEP_BLAS && mm->dt == TJ_F32 && mm->batches == 1 && !s->trans[0] &&
           mm->k >= 1 && mm->m <= 4096 && b->op == IR_OP_CONST && rt_gemm_packed_usable();
}

bool jit_cpu_conv_fusable(const ir_graph *g, uint32_t id, const pass_group *epi, uint32_t pool_id) {
    const ir_node *n = ir_node_get(g, id);
    return rt_plan_conv_usable(g, id, pool_id, epi ? epi->n_inputs : 0, epi ? epi->n_outputs : 0) &&
           (!epi || (epi->rank == 4 && memcmp(epi->dims, n->dims, sizeof n->dims[0] * 4) == 0));
}

void jit_cpu_prog_free(rt_program *p) {
    cpu_prog *cp = (cpu_prog *)p;
    if (!cp)
        return;
    rt_plan_release(&cp->rp);
    jit_cpu_shared_release(cp->shared);
    pass_partition_free(cp->part);
    for (uint32_t s = 0; cp->steps && s < cp->n_steps; s++) {
        free(cp->steps[s].in);
        free(cp->steps[s].out);
        free(cp->steps[s].chain_nodes);
        for (uint32_t m = 0; m < cp->steps[s].n_members; m++) {
            free(cp->steps[s].members[m].in);
            free(cp->steps[s].members[m].out);
        }
        free(cp->steps[s].members);
    }
    free(cp->steps);
    free(cp->key);
    free(cp);
}

static const rt_program_vt cpu_vt = {rt_plan_run,       jit_cpu_prog_free, "cpu",
                                     rt_plan_raw_bytes, rt_plan_run_raw,   rt_plan_raw_inplace,
                                     rt_plan_kernels};

/* ---- building: what every program needs once its steps exist ------------------------------ */
cpu_prog *jit_cpu_prog_new(const ir_graph *g, const jit_cpu_opts *o) {
    cpu_prog *cp = calloc(1, sizeof *cp);
    if (!cp) {
        ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory");
        return NULL;
    }
    cp->rp.base.vt = &cpu_vt;
    if (rt_plan_init(&cp->rp, g, "cpu program") != TJ_OK) {
        free(cp);
        return NULL;
    }
    cp->opts = *o;
    cp->rp.par_min = o->par_min;
    cp->rp.check_params = 1;
    return cp;
}

uint32_t jit_cpu_step_nodes(const cpu_prog *cp, const step *sp, uint32_t *out) {
    if (sp->kind == STEP_GEN && sp->sub == SUB_CHAIN) {
        memcpy(out, sp->chain_nodes, sp->n_chain_nodes * sizeof *out);
        return sp->n_chain_nodes;
    }
    const pass_group *gr = NULL;
    uint32_t n = 0;
    if (sp->kind == STEP_GEN && (sp->sub == SUB_EW || sp->sub == SUB_RED))
        gr = &cp->part->groups[sp->id];
    else
        out[n++] = sp->id, gr = sp->kind == STEP_BLAS || sp->kind == STEP_CONV ? sp->epi : NULL;
    for (uint32_t k = 0; gr && k < gr->n_nodes; k++)
        out[n++] = gr->nodes[k];
    if (sp->kind == STEP_CONV && sp->pool)
        out[n++] = sp->pool - 1;
    return n;
}

static uint32_t *ids_dup(const uint32_t *a, uint32_t n) {
    uint32_t *p = malloc((n + 1) * sizeof *p);
    if (p && n)
        memcpy(p, a, n * sizeof *p);
    return p;
}

/* Step sp as the runtime runs it, into r; ids is room for the graph's node count. */
static tj_status to_rt_step(cpu_prog *cp, const step *sp, rt_step *r, uint32_t *ids) {
    static const int kinds[] = {[STEP_NODE] = RT_STEP_NODE,
                                [STEP_GEN] = RT_STEP_KERNEL,
                                [STEP_BLAS] = RT_STEP_GEMM,
                                [STEP_CF] = RT_STEP_CF,
                                [STEP_CONV] = RT_STEP_CONV};
    uint32_t n = jit_cpu_step_nodes(cp, sp, ids);
    r->kind = kinds[sp->kind];
    /* a kernel's groups and chains are the backend's: the runtime knows it by its output */
    r->id = sp->kind != STEP_GEN ? sp->id : sp->n_out ? sp->out[0] : n ? ids[0] : 0;
    r->n_in = sp->n_in;
    r->n_out = sp->n_out;
    r->fn = sp->fn;
    r->units = sp->plan;
    r->n_nodes = n;
    r->mm = sp->mm;
    r->blas = sp->blas;
    memcpy(r->src, sp->src, sizeof r->src);
    memcpy(r->trans, sp->trans, sizeof r->trans);
    r->pool = sp->pool;
    r->generic = sp->generic;
    bool epi = (sp->kind == STEP_BLAS || sp->kind == STEP_CONV) && sp->epi;
    if (!(r->in = ids_dup(sp->in, sp->n_in)) || !(r->out = ids_dup(sp->out, sp->n_out)) ||
        !(r->nodes = ids_dup(ids, n)) ||
        (epi && (!(r->epi.in = ids_dup(sp->epi->inputs, sp->epi->n_inputs)) ||
                 !(r->epi.out = ids_dup(sp->epi->outputs, sp->epi->n_outputs)))))
        return ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory");
    if (epi) {
        r->epi.n_in = sp->epi->n_inputs;
        r->epi.n_out = sp->epi->n_outputs;
    }
    r->packs = packable(cp, sp);
    rt_plan_simple_epi(cp->rp.base.g, r);
    return TJ_OK;
}

/* Labels for pictures and profiles: "k3 fused mul add tanh", "openblas matmul + add relu",
 * "chain of 4: ...", "reference conv2d", "native while". */
static tj_status label_steps(cpu_prog *cp) {
    const ir_graph *g = cp->rp.base.g;
    rt_plan *p = &cp->rp;
    uint32_t *ids = malloc((g->n_nodes + 1) * sizeof *ids);
    p->labels = calloc(cp->n_steps + 1, sizeof *p->labels);
    if (!ids || !p->labels) {
        free(ids);
        return ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory");
    }
    for (uint32_t s = 0; s < cp->n_steps; s++) {
        const step *sp = &cp->steps[s];
        const rt_step *r = &p->steps[s];
        char buf[256];
        int len = 0;
        const char *what = sp->kind == STEP_BLAS   ? (r->packs              ? "packed"
                                                      : rt_plan_own_gemm(r) ? "gemm"
                                                                            : "openblas")
                           : sp->kind == STEP_CF   ? "native"
                           : sp->kind == STEP_CONV ? "conv"
                           : sp->kind == STEP_NODE
                               ? "reference"
                               : (const char *[]){"fused",   "reduce", "matmul",
                                                  "softmax", "view",   "chain"}[sp->sub];
        len = snprintf(buf, sizeof buf, "s%u %s:", s, what);
        uint32_t n = rt_plan_step_nodes(p, s, ids), shown = 0;
        for (uint32_t k = 0; k < n && len < (int)sizeof buf - 40; k++) {
            int op = ir_node_get(g, ids[k])->op;
            if (op == IR_OP_CONST || op == IR_OP_PARAM)
                continue;
            len += snprintf(buf + len, sizeof buf - (size_t)len, " %s", ir_ops[op].name);
            shown++;
        }
        if (shown < n && len >= (int)sizeof buf - 40)
            snprintf(buf + len, sizeof buf - (size_t)len, " ...");
        if (!(p->labels[s] = strdup(buf))) {
            free(ids);
            return ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory");
        }
    }
    free(ids);
    return TJ_OK;
}

tj_status jit_cpu_prog_finish(cpu_prog *cp, rt_program *(*region)(const ir_graph *, void *),
                              void *ctx) {
    const ir_graph *g = cp->rp.base.g;
    rt_plan *p = &cp->rp;
    uint32_t *ids = malloc((g->n_nodes + 1) * sizeof *ids);
    if (!ids || !(p->steps = calloc(cp->n_steps + 1, sizeof *p->steps))) {
        free(ids);
        return ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory");
    }
    tj_status st = TJ_OK;
    for (uint32_t s = 0; s < cp->n_steps && !st; s++)
        st = to_rt_step(cp, &cp->steps[s], &p->steps[p->n_steps++], ids);
    free(ids);
    if (!st)
        st = label_steps(cp);
    return st ? st : rt_plan_finish(p, true, region, ctx);
}
