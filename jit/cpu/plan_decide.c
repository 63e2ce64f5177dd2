/* plan_decide.c — the CPU program's plan, decided without LLVM: the fusion partition, the steps
 * (generated kernels, OpenBLAS products and direct convolutions with their epilogues,
 * reference-kernel nodes, native control flow), each kernel's work units, the chains of small
 * kernels, the kernels' names, and which kernels are the same code (a structural key per kernel:
 * the same ops on the same shapes read the same way, whatever the node ids). compile.c and
 * llvm/generate.c then emit LLVM IR only for what a cached object does not already hold, once per
 * distinct kernel; image.c decides the plan again for a saved program's graph and refuses an image
 * whose plan differs, so nothing a graph determines is taken from a file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jit/cpu/lower.h"
#include "jit/cpu/program.h"

bool jit_cpu_fusable(const ir_graph *g, uint32_t id, void *user) {
    return jit_cpu_ew_supported(g, id);
}
bool jit_cpu_reducible(const ir_graph *g, uint32_t id, void *user) {
    return jit_cpu_red_supported(g, id);
}

static uint32_t *ids_dup(const uint32_t *a, uint32_t n) {
    uint32_t *p = malloc((n + 1) * sizeof *p);
    if (p && n)
        memcpy(p, a, n * sizeof *p);
    return p;
}

/* One step per group; matmuls, softmaxes and unsupported nodes decided here. */
static tj_status build_steps(cpu_prog *cp, const jit_cpu_opts *o) {
    const ir_graph *g = cp->rp.base.g;
    const rt_blas *blas = NULL;
    bool blas_asked = false;
    for (uint32_t gi = 0; gi < cp->part->n_groups; gi++) {
        const pass_group *gr = &cp->part->groups[gi];
        step *sp = &cp->steps[cp->n_steps++];
        if (gr->fused || gr->reduce) {
            sp->kind = STEP_GEN;
            sp->sub = gr->fused ? SUB_EW : SUB_RED;
            sp->id = gi;
            sp->n_in = gr->n_inputs;
            sp->n_out = gr->n_outputs;
            sp->in = ids_dup(gr->inputs, gr->n_inputs);
            sp->out = ids_dup(gr->outputs, gr->n_outputs);
        } else {
            uint32_t id = gr->nodes[0];
            const ir_node *n = ir_node_get(g, id);
            sp->id = id;
            sp->kind = STEP_NODE;
            const char *why = "no generated lowering";
            if ((ir_ops[n->op].flags & IR_F_CF) && jit_cpu_cf_supported(g, id)) {
                sp->kind = STEP_CF;
            } else if (n->op == IR_OP_MATMUL && rt_mm_of(g, id, &sp->mm)) {
                if (ir_dtype_is_float(sp->mm.dt) && !jit_cpu_mm_small(&sp->mm) && !o->exact_math) {
                    if (!blas_asked)
                        blas = rt_blas_get();
                    blas_asked = true;
                }
                sp->kind = STEP_GEN;
                sp->sub = SUB_MM;
                /* OpenBLAS sums in its own order: not under exact math (bit-identical results) */
                if (ir_dtype_is_float(sp->mm.dt) && !jit_cpu_mm_small(&sp->mm) && blas &&
                    !o->exact_math && sp->mm.m < INT32_MAX && sp->mm.n < INT32_MAX &&
                    sp->mm.k < INT32_MAX) {
                    sp->kind = STEP_BLAS;
                    sp->blas = blas;
                    sp->src[0] = ir_inputs(g, n)[0];
                    sp->src[1] = ir_inputs(g, n)[1];
                }
            } else if ((n->op == IR_OP_SOFTMAX || n->op == IR_OP_LOG_SOFTMAX) &&
                       jit_cpu_softmax_supported(g, id)) {
                sp->kind = STEP_GEN;
                sp->sub = SUB_SOFTMAX;
            } else if (jit_cpu_view_supported(g, id)) {
                sp->kind = STEP_GEN;
                sp->sub = SUB_VIEW;
            } else if (ir_ops[n->op].flags & IR_F_RED) {
                why = "reduction axes, dtype or empty input not generated";
            } else if (n->op == IR_OP_SOFTMAX || n->op == IR_OP_LOG_SOFTMAX) {
                why = "softmax over a non-last axis or a non-float dtype";
            }
            if (sp->kind == STEP_NODE && !(ir_ops[n->op].flags & IR_F_PLUMB))
                rt_log(RT_LOG_COMPILE, "cpu: %%%u %s %s: reference kernel (%s)", id,
                       ir_ops[n->op].name, ir_dtype_short(n->dtype), why);
            sp->n_in = n->n_in;
            sp->in = ids_dup(ir_inputs(g, n), n->n_in);
            sp->n_out = 1;
            sp->out = ids_dup(&id, 1);
            if (n->op == IR_OP_CONST && !(cp->rp.consts[id] = rt_const_tensor(g, n)))
                return ir_last_code() ? ir_last_code() : TJ_ERR_OOM;
        }
        if (!sp->in || !sp->out)
            return ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory");
    }
    return TJ_OK;
}

/* A BLAS product of 2-D operands reads a transposed operand through the call's trans flag
 * (what XLA's dot_general and Inductor's mm do with layouts): a gradient's `g @ W^T` and
 * `x^T @ g` no longer copy W or x first. A transpose no other step reads is dropped. */
static void fold_transposes(cpu_prog *cp, const uint8_t *is_out) {
    const ir_graph *g = cp->rp.base.g;
    for (uint32_t s = 0; s < cp->n_steps; s++) {
        step *sp = &cp->steps[s];
        const ir_node *mn = ir_node_get(g, sp->id);
        if (sp->kind != STEP_BLAS || sp->mm.batches != 1 || mn->rank != 2)
            continue;
        for (int k = 0; k < 2; k++) {
            const ir_node *t = ir_node_get(g, sp->src[k]);
            if (t->op != IR_OP_TRANSPOSE || t->rank != 2 || t->a.n_list != 2 || t->a.list[0] != 1 ||
                is_out[sp->src[k]])
                continue;
            uint32_t from = sp->src[k], to = ir_inputs(g, t)[0];
            sp->src[k] = to;
            sp->trans[k] = 1;
            for (uint32_t j = 0; j < sp->n_in; j++)
                if (sp->in[j] == from)
                    sp->in[j] = to;
        }
    }
    /* drop a transpose step whose value nothing reads any more */
    for (uint32_t s = 0; s < cp->n_steps; s++) {
        step *sp = &cp->steps[s];
        if (sp->kind != STEP_GEN || sp->sub != SUB_VIEW || sp->n_out != 1 || is_out[sp->out[0]] ||
            ir_node_get(g, sp->out[0])->op != IR_OP_TRANSPOSE)
            continue;
        bool read = false;
        for (uint32_t t = 0; t < cp->n_steps && !read; t++)
            for (uint32_t k = 0; k < cp->steps[t].n_in && !read; k++)
                read = cp->steps[t].in[k] == sp->out[0];
        if (read)
            continue;
        free(sp->in);
        free(sp->out);
        memmove(sp, sp + 1, (cp->n_steps - s - 1) * sizeof *sp);
        cp->n_steps--;
        s--;
    }
}

/* The one step after s that reads node id; UINT32_MAX when none or several do. */
static uint32_t sole_reader(const cpu_prog *cp, uint32_t s, uint32_t id) {
    uint32_t reader = UINT32_MAX, n = 0;
    for (uint32_t t = s + 1; t < cp->n_steps; t++)
        for (uint32_t k = 0; k < cp->steps[t].n_in; k++)
            if (cp->steps[t].in[k] == id) {
                reader = t;
                n++;
            }
    return n == 1 ? reader : UINT32_MAX;
}

static void drop_step(cpu_prog *cp, uint32_t s) {
    free(cp->steps[s].in);
    free(cp->steps[s].out);
    memmove(&cp->steps[s], &cp->steps[s + 1], (cp->n_steps - s - 1) * sizeof cp->steps[s]);
    cp->n_steps--;
}

/* What a step fused from a product (or convolution) `self` of operands src and its epilogue gr
 * (NULL: none) reads: the operands, then the group's other inputs. New array (*n entries), NULL
 * on OOM. */
static uint32_t *merged_inputs(const uint32_t *src, uint32_t self, const pass_group *gr,
                               uint32_t *n) {
    uint32_t *in = malloc(((gr ? gr->n_inputs : 0) + 3) * sizeof *in);
    *n = 0;
    if (!in)
        return NULL;
    in[(*n)++] = src[0];
    if (src[1] != src[0])
        in[(*n)++] = src[1];
    for (uint32_t k = 0; gr && k < gr->n_inputs; k++)
        if (gr->inputs[k] != self && gr->inputs[k] != src[0] && gr->inputs[k] != src[1])
            in[(*n)++] = gr->inputs[k];
    return in;
}

/* A BLAS product read only by one elementwise group of its own shape takes that group as its
 * epilogue and moves to the group's position. */
static tj_status merge_epilogues(cpu_prog *cp, const uint8_t *is_out) {
    const ir_graph *g = cp->rp.base.g;
    for (uint32_t s = 0; s < cp->n_steps; s++) {
        step *sp = &cp->steps[s];
        if (sp->kind != STEP_BLAS || is_out[sp->id])
            continue;
        uint32_t reader = sole_reader(cp, s, sp->id);
        if (reader == UINT32_MAX || cp->steps[reader].kind != STEP_GEN ||
            cp->steps[reader].sub != SUB_EW)
            continue;
        step *ep = &cp->steps[reader];
        const pass_group *gr = &cp->part->groups[ep->id];
        const ir_node *mn = ir_node_get(g, sp->id);
        if (gr->rank != mn->rank || memcmp(gr->dims, mn->dims, (size_t)mn->rank * 8) != 0)
            continue;
        uint32_t n_in, *in = merged_inputs(sp->src, sp->id, gr, &n_in);
        if (!in)
            return ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory");
        /* the merged step takes the group's place and outputs; the product's step goes */
        step merged = *sp;
        merged.epi = gr;
        merged.in = in;
        merged.n_in = n_in;
        merged.out = ep->out;
        merged.n_out = ep->n_out;
        free(ep->in);
        *ep = merged;
        drop_step(cp, s); /* frees sp's own in/out */
        s--;
    }
    return TJ_OK;
}

/* An f32 convolution on the direct kernels read only by an elementwise group of its shape (bias,
 * activation) and/or a max pool whose windows tile its rows becomes one STEP_CONV at the last
 * of their positions (their other inputs are made by then): the convolution runs by bands of
 * rows, each band's epilogue and pooled row computed while the band is in cache. */
static tj_status merge_convs(cpu_prog *cp, const uint8_t *is_out) {
    const ir_graph *g = cp->rp.base.g;
    for (uint32_t s = 0; s < cp->n_steps; s++) {
        step *sp = &cp->steps[s];
        const ir_node *n = ir_node_get(g, sp->id);
        if (sp->kind != STEP_NODE || n->op != IR_OP_CONV2D || is_out[sp->id])
            continue;
        uint32_t t = sole_reader(cp, s, sp->id), ep = UINT32_MAX, pool = UINT32_MAX;
        const pass_group *epi = NULL;
        uint32_t last = UINT32_MAX; /* the value the pool would read */
        if (t != UINT32_MAX && cp->steps[t].kind == STEP_GEN && cp->steps[t].sub == SUB_EW) {
            ep = t;
            epi = &cp->part->groups[cp->steps[t].id];
            if (epi->n_outputs == 1 && !is_out[epi->outputs[0]]) {
                last = epi->outputs[0];
                t = sole_reader(cp, ep, last);
            } else {
                t = UINT32_MAX;
            }
        } else {
            last = sp->id;
        }
        if (t != UINT32_MAX && cp->steps[t].kind == STEP_NODE &&
            ir_node_get(g, cp->steps[t].id)->op == IR_OP_MAX_POOL2D && cp->steps[t].n_in == 1 &&
            cp->steps[t].in[0] == last && jit_cpu_conv_fusable(g, sp->id, epi, cp->steps[t].id))
            pool = t;
        if (pool == UINT32_MAX && (!epi || !jit_cpu_conv_fusable(g, sp->id, epi, IR_NONE))) {
            /* alone, a convolution with a constant filter is still a step of its own, which
             * packs the filter once (an imported model's projections and DenseNet's 3x3s) */
            const ir_node *w = ir_node_get(g, ir_inputs(g, n)[1]);
            if (w->op != IR_OP_CONST || w->dtype != TJ_F32 ||
                !jit_cpu_conv_fusable(g, sp->id, NULL, IR_NONE))
                continue;
            sp->kind = STEP_CONV;
            sp->src[0] = ir_inputs(g, n)[0], sp->src[1] = ir_inputs(g, n)[1];
            sp->epi = NULL, sp->pool = 0;
            continue;
        }
        /* the step reads x, w and the epilogue's other inputs */
        const uint32_t *xin = ir_inputs(g, n);
        uint32_t n_in, *in = merged_inputs(xin, sp->id, epi, &n_in);
        uint32_t *out = malloc(((epi ? epi->n_outputs : 0) + 2) * sizeof *out), n_out = 0;
        if (!in || !out) {
            free(in);
            free(out);
            return ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory");
        }
        if (pool != UINT32_MAX)
            out[n_out++] = cp->steps[pool].id;
        else
            for (uint32_t k = 0; k < epi->n_outputs; k++)
                out[n_out++] = epi->outputs[k];
        step merged = {.kind = STEP_CONV,
                       .id = sp->id,
                       .n_in = n_in,
                       .n_out = n_out,
                       .in = in,
                       .out = out,
                       .epi = epi,
                       .src = {xin[0], xin[1]},
                       .pool = pool != UINT32_MAX ? cp->steps[pool].id + 1 : 0};
        uint32_t at = pool != UINT32_MAX ? pool : ep;
        free(cp->steps[at].in);
        free(cp->steps[at].out);
        cp->steps[at] = merged;
        if (pool != UINT32_MAX && ep != UINT32_MAX)
            drop_step(cp, ep);
        drop_step(cp, s);
        s--;
    }
    return TJ_OK;
}

/* ---- work units ------------------------------------------------------------------------------ */
static tj_status step_units(cpu_prog *cp, step *sp) {
    const ir_graph *g = cp->rp.base.g;
    if (sp->kind == STEP_BLAS || sp->kind == STEP_CONV)
        return sp->epi ? jit_cpu_ew_units(g, sp->epi, &sp->plan) : TJ_OK;
    if (sp->kind != STEP_GEN)
        return TJ_OK;
    switch (sp->sub) {
    case SUB_EW:
        return jit_cpu_ew_units(g, &cp->part->groups[sp->id], &sp->plan);
    case SUB_RED:
        return jit_cpu_red_units(g, &cp->part->groups[sp->id], &sp->plan);
    case SUB_MM:
        return jit_cpu_mm_units(g, sp->id, &sp->plan);
    case SUB_VIEW:
        return jit_cpu_view_units(g, sp->id, &sp->plan);
    case SUB_SOFTMAX:
        return jit_cpu_softmax_units(g, sp->id, &sp->plan);
    default:
        return TJ_OK;
    }
}

/* Whether step sp has a kernel of its own to emit (a name). */
static bool emits(const step *sp) {
    return sp->kind == STEP_GEN || sp->kind == STEP_CF ||
           ((sp->kind == STEP_BLAS || sp->kind == STEP_CONV) && sp->epi);
}

/* ---- chains of small kernels ----------------------------------------------------------------- */
/* Whether a generated step is small enough to run inside a chain: it would not be split across
 * threads, and each output fits a stack slot. */
static bool chainable(const cpu_prog *cp, const step *sp) {
    return sp->kind == STEP_GEN && sp->sub != SUB_CHAIN && jit_cpu_step_small(cp, sp);
}

bool jit_cpu_step_small(const cpu_prog *cp, const step *sp) {
    if (sp->plan.n_units * sp->plan.unit_len >= cp->rp.par_min)
        return false;
    for (uint32_t k = 0; k < sp->n_out; k++) {
        const ir_node *n = ir_node_get(cp->rp.base.g, sp->out[k]);
        if (ir_numel(n->rank, n->dims) * (int64_t)ir_dtype_size(n->dtype) > 65536)
            return false;
    }
    return true;
}

/* The nodes a generated step computes (a group's, or one). */
static uint32_t step_size(const cpu_prog *cp, const step *sp) {
    return sp->kind == STEP_GEN && (sp->sub == SUB_EW || sp->sub == SUB_RED)
               ? cp->part->groups[sp->id].n_nodes
               : 1;
}

static bool has_id(const uint32_t *a, uint32_t n, uint32_t id) {
    for (uint32_t k = 0; k < n; k++)
        if (a[k] == id)
            return true;
    return false;
}

/* Replaces steps [s0, s1] by one chain step holding them as its members: it reads what they read
 * from outside the run (in first-use order) and writes what is a graph output or read after the
 * run. */
static tj_status make_chain(cpu_prog *cp, uint32_t s0, uint32_t s1, const uint32_t *last_reader,
                            const uint8_t *is_out, uint32_t chain_no) {
    uint32_t n_mem = s1 - s0 + 1, n_all = 0;
    for (uint32_t s = s0; s <= s1; s++)
        n_all += cp->steps[s].n_in + cp->steps[s].n_out;
    step *mem = malloc(n_mem * sizeof *mem);
    uint32_t *in = malloc((n_all + 1) * sizeof *in), *out = malloc((n_all + 1) * sizeof *out);
    uint32_t *nodes = malloc((cp->rp.base.g->n_nodes + 1) * sizeof *nodes), n_in = 0, n_out = 0;
    if (!mem || !in || !out || !nodes) {
        free(mem);
        free(in);
        free(out);
        free(nodes);
        return ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory");
    }
    uint32_t n_nodes = 0;
    for (uint32_t s = s0; s <= s1; s++) {
        const step *sp = &cp->steps[s];
        for (uint32_t k = 0; k < sp->n_in; k++) {
            bool inside = false;
            for (uint32_t t = s0; t < s && !inside; t++)
                inside = has_id(cp->steps[t].out, cp->steps[t].n_out, sp->in[k]);
            if (!inside && !has_id(in, n_in, sp->in[k]))
                in[n_in++] = sp->in[k];
        }
        for (uint32_t k = 0; k < sp->n_out; k++)
            if (is_out[sp->out[k]] || last_reader[sp->out[k]] > s1)
                out[n_out++] = sp->out[k];
        n_nodes += jit_cpu_step_nodes(cp, sp, nodes + n_nodes);
    }
    memcpy(mem, &cp->steps[s0], n_mem * sizeof *mem); /* the members keep their in/out */
    step ch = {.kind = STEP_GEN,
               .sub = SUB_CHAIN,
               .id = cp->steps[s0].id,
               .n_in = n_in,
               .n_out = n_out,
               .in = in,
               .out = out,
               .chain_nodes = nodes,
               .n_chain_nodes = n_nodes,
               .members = mem,
               .n_members = n_mem,
               .kidx = chain_no};
    ch.plan.n_units = 1;
    ch.plan.unit_len = 1;
    cp->steps[s0] = ch;
    memmove(&cp->steps[s0 + 1], &cp->steps[s1 + 1], (cp->n_steps - s1 - 1) * sizeof(step));
    cp->n_steps -= n_mem - 1;
    return TJ_OK;
}

/* Runs of consecutive chainable steps become chains of at most PASS_MAX_GROUP_NODES ops (their
 * members are inlined into one function, whose compile cost must stay bounded). */
static tj_status decide_chains(cpu_prog *cp, const uint8_t *is_out) {
    const ir_graph *g = cp->rp.base.g;
    uint32_t *last_reader = calloc(g->n_nodes + 1, sizeof *last_reader);
    if (!last_reader)
        return ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory");
    for (uint32_t s = 0; s < cp->n_steps; s++)
        for (uint32_t k = 0; k < cp->steps[s].n_in; k++)
            last_reader[cp->steps[s].in[k]] = s;
    tj_status st = TJ_OK;
    uint32_t n_chains = 0;
    /* from the back, so that replacing a run keeps the indices of the runs before it */
    for (uint32_t s1 = cp->n_steps; s1-- > 0 && !st;) {
        if (!chainable(cp, &cp->steps[s1]))
            continue;
        uint32_t s0 = s1, nodes = step_size(cp, &cp->steps[s1]);
        while (s0 > 0 && chainable(cp, &cp->steps[s0 - 1]) &&
               nodes + step_size(cp, &cp->steps[s0 - 1]) <= PASS_MAX_GROUP_NODES)
            nodes += step_size(cp, &cp->steps[--s0]);
        if (s1 > s0)
            st = make_chain(cp, s0, s1, last_reader, is_out, n_chains++);
        s1 = s0;
    }
    free(last_reader);
    return st;
}

/* ---- shape-generic kernels ------------------------------------------------------------------- */
/* A function's later signatures (o->shape_generic): its broadcasting elementwise kernels, alone
 * or the epilogue of a product or a convolution, take their outer extents at run time (the
 * batch, a sequence length, an image's pixels), so the next shape of the same pattern and row
 * length runs this code; so does a reduction over a kept inner axis, its reduced length at run
 * time. A flat loop needs nothing (its size is its work units); chains, products, views and
 * softmax stay as keyed (step_key). */
static void decide_generic(cpu_prog *cp, const jit_cpu_opts *o) {
    const ir_graph *g = cp->rp.base.g;
    for (uint32_t s = 0; s < cp->n_steps; s++) {
        step *sp = &cp->steps[s];
        const pass_group *gr = sp->kind == STEP_GEN && sp->sub == SUB_EW ? &cp->part->groups[sp->id]
                               : sp->kind == STEP_BLAS || sp->kind == STEP_CONV ? sp->epi
                                                                                : NULL;
        sp->generic = o->shape_generic && gr && gr->fused && !gr->reduce && !jit_cpu_ew_flat(g, gr)
                          ? RT_GENERIC_EW
                          : 0;
        /* a reduction over a kept inner axis (a bias gradient: the batch summed) or over
         * everything (a mean loss) takes its reduced length at run time; rows of the last axis
         * keep it (their register loop, many rows) */
        int64_t outer, len, inner;
        if (o->shape_generic && sp->kind == STEP_GEN && sp->sub == SUB_RED &&
            jit_cpu_red_geometry(g, ir_node_get(g, sp->out[0]), &outer, &len, &inner) &&
            (inner > 1 || outer == 1))
            sp->generic = RT_GENERIC_RED;
    }
}

/* ---- structural keys: which kernels are the same code ---------------------------------------- */
typedef struct kbuf {
    unsigned char *p;
    size_t n, cap;
    int oom;
} kbuf;

static void kput(kbuf *b, const void *x, size_t n) {
    if (b->oom || !n)
        return;
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 256;
        while (cap < b->n + n)
            cap *= 2;
        unsigned char *q = realloc(b->p, cap);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->p = q, b->cap = cap;
    }
    memcpy(b->p + b->n, x, n);
    b->n += n;
}
static void kput64(kbuf *b, int64_t v) {
    kput(b, &v, sizeof v);
}

/* Everything of node id that its code depends on, never its id: op, type, attributes, the
 * content of its payload. sizeless: a flat loop's node, whose code depends only on whether it
 * has one element or the loop's (its rank and dims are left out). */
static void node_desc(kbuf *b, const ir_graph *g, uint32_t id, bool sizeless) {
    const ir_node *n = ir_node_get(g, id);
    kput64(b, n->op);
    kput64(b, n->dtype);
    if (sizeless) {
        kput64(b, ir_numel(n->rank, n->dims) == 1 ? -1 : -2);
    } else {
        kput64(b, n->rank);
        kput(b, n->dims, sizeof(int64_t) * n->rank);
    }
    kput(b, n->a.i, sizeof n->a.i);
    kput(b, n->a.f, sizeof n->a.f);
    kput64(b, n->a.n_list);
    kput(b, n->a.list, sizeof(int64_t) * n->a.n_list);
    const ir_blob *bl = n->a.blob ? ir_blob_get(g, n->a.blob) : NULL;
    kput64(b, bl ? (int64_t)bl->size : -1);
    kput64(b, bl ? (int64_t)bl->h : 0);
    kput64(b, n->n_in);
}

/* A kernel's input buffer: its type (and size unless sizeless); a constant's content too, except
 * a one-element one the code loads rather than holds (jit_cpu_const_immediate: a mean's 1/N at a
 * new batch size runs the same code), never what else made it (a variable's slot, an op). */
static void input_desc(kbuf *b, const ir_graph *g, uint32_t id, bool sizeless) {
    const ir_node *n = ir_node_get(g, id);
    kput64(b, n->dtype);
    if (sizeless) {
        kput64(b, ir_numel(n->rank, n->dims) == 1 ? -1 : -2);
    } else {
        kput64(b, n->rank);
        kput(b, n->dims, sizeof(int64_t) * n->rank);
    }
    const ir_blob *bl = n->op == IR_OP_CONST && n->a.blob ? ir_blob_get(g, n->a.blob) : NULL;
    bool loaded = bl && ir_numel(n->rank, n->dims) == 1 && !jit_cpu_const_immediate(g, n);
    kput64(b, bl ? (int64_t)bl->size : -1);
    kput64(b, bl && !loaded ? (int64_t)bl->h : 0);
}

/* A kernel computing nodes[0..nn) (in order) from buffers in[0..n_in) into out[0..n_out): each
 * input buffer described, each node with its inputs as positions (a node of the kernel, or a
 * buffer), each output as the position of the node it is. */
static void body_key(kbuf *b, const ir_graph *g, const uint32_t *nodes, uint32_t nn,
                     const uint32_t *in, uint32_t n_in, const uint32_t *out, uint32_t n_out,
                     bool sizeless) {
    kput64(b, nn), kput64(b, n_in), kput64(b, n_out);
    for (uint32_t j = 0; j < n_in; j++)
        input_desc(b, g, in[j], sizeless);
    for (uint32_t k = 0; k < nn; k++) {
        node_desc(b, g, nodes[k], sizeless);
        const ir_node *n = ir_node_get(g, nodes[k]);
        const uint32_t *ni = ir_inputs(g, n);
        for (uint32_t e = 0; e < n->n_in; e++) {
            int64_t ref = -1;
            for (uint32_t j = 0; j < k && ref < 0; j++)
                if (nodes[j] == ni[e])
                    ref = j;
            for (uint32_t j = 0; j < n_in && ref < 0; j++)
                if (in[j] == ni[e])
                    ref = (int64_t)nn + j;
            kput64(b, ref);
        }
    }
    for (uint32_t j = 0; j < n_out; j++) {
        int64_t ref = -1;
        for (uint32_t k = 0; k < nn && ref < 0; k++)
            if (nodes[k] == out[j])
                ref = k;
        kput64(b, ref);
    }
}

/* A reduction group's code (codegen_red.c) depends on its reduced length and kept inner extent,
 * and on which inputs it reads as one broadcast element, never on the outer extent (its work
 * units: a batch of rows), nor, shape-generic, on the length: those into b; false (nothing
 * written) if it has no such geometry. */
static bool red_outer_free(kbuf *b, const ir_graph *g, const pass_group *gr, bool generic) {
    const ir_node *root = ir_node_get(g, gr->nodes[gr->n_nodes - 1]);
    int64_t outer, len, inner;
    if (!jit_cpu_red_geometry(g, root, &outer, &len, &inner))
        return false;
    kput64(b, generic ? -1 : len), kput64(b, inner); /* generic: the length comes at run time */
    for (uint32_t i = 0; i < gr->n_inputs; i++) {
        const ir_node *x = ir_node_get(g, gr->inputs[i]);
        kput64(b, ir_numel(x->rank, x->dims) == 1 && len * outer * inner != 1);
    }
    return true;
}

/* The key of step sp's kernel into b (nothing for a step without one, or with native control
 * flow, which is never shared). */
static void step_key(kbuf *b, const cpu_prog *cp, const step *sp) {
    const ir_graph *g = cp->rp.base.g;
    const pass_group *gr = NULL;
    rt_mm mm;
    if ((sp->kind == STEP_BLAS || sp->kind == STEP_CONV) && sp->epi)
        gr = sp->epi; /* the epilogue's kernel is the group's elementwise kernel */
    else if (sp->kind == STEP_GEN && (sp->sub == SUB_EW || sp->sub == SUB_RED))
        gr = &cp->part->groups[sp->id];
    if (gr) {
        /* a flat elementwise loop's code is the same for every size (the Adam updates of a
         * model's variables, the repeated blocks of a network: one kernel each), a reduction's
         * for every outer extent; a shape-generic one's for every shape of its pattern:
         * collapsed rank, which strides are 0, and the row length, which the inner loop keeps
         * as a constant (a vector loop with no remainder to test: a run-time length cost 10% on
         * a 4096 x 1024 loop; bench/RESULTS.md) */
        bool sizeless = gr->fused && !gr->reduce && jit_cpu_ew_flat(g, gr);
        kput64(b, gr->reduce ? SUB_RED : SUB_EW);
        kput64(b, gr->fused), kput64(b, gr->reduce), kput64(b, sizeless), kput64(b, sp->generic);
        rt_ew_layout L = {0};
        bool outer_free = false; /* a reduction: red_outer_free */
        if (gr->reduce) {
            if (!(outer_free = red_outer_free(b, g, gr, sp->generic == RT_GENERIC_RED))) {
                kput64(b, gr->rank);
                kput(b, gr->dims, sizeof(int64_t) * gr->rank);
            }
        } else if (sp->generic && jit_cpu_ew_layout(g, gr, &L) == TJ_OK) {
            kput64(b, L.rank);
            kput64(b, L.dims[L.rank - 1]);
            for (uint32_t i = 0; i < gr->n_inputs; i++)
                for (int d = 0; d < L.rank; d++)
                    kput64(b, L.scalar[i] ? -1 : L.st[i][d] == 0 ? 0 : d == L.rank - 1 ? 1 : 2);
        } else if (sp->generic) {
            b->oom = 1;
        } else if (!sizeless) {
            kput64(b, gr->rank);
            kput(b, gr->dims, sizeof(int64_t) * gr->rank);
        }
        rt_ew_layout_free(&L);
        body_key(b, g, gr->nodes, gr->n_nodes, gr->inputs, gr->n_inputs, gr->outputs, gr->n_outputs,
                 sizeless || (sp->generic && !gr->reduce) || outer_free);
    } else if (sp->kind == STEP_GEN && sp->sub == SUB_CHAIN) {
        kput64(b, SUB_CHAIN);
        kput64(b, sp->n_members), kput64(b, sp->n_in), kput64(b, sp->n_out);
        for (uint32_t m = 0; m < sp->n_members; m++) {
            const step *ms = &sp->members[m];
            kbuf mk = {0};
            step_key(&mk, cp, ms);
            kput64(b, (int64_t)mk.n);
            kput(b, mk.p, mk.n);
            b->oom |= mk.oom;
            free(mk.p);
            kput64(b, ms->plan.n_units);
            /* the wiring: each member buffer a chain input, or an earlier member's output */
            for (uint32_t k = 0; k < ms->n_in + ms->n_out; k++) {
                uint32_t id = k < ms->n_in ? ms->in[k] : ms->out[k - ms->n_in];
                int64_t ref = -1;
                for (uint32_t j = 0; j < sp->n_in && ref < 0; j++)
                    if (sp->in[j] == id)
                        ref = j;
                for (uint32_t j = 0; j < sp->n_out && ref < 0; j++)
                    if (sp->out[j] == id)
                        ref = 1000000 + j;
                for (uint32_t t = 0; t < m && ref < 0; t++)
                    for (uint32_t j = 0; j < sp->members[t].n_out && ref < 0; j++)
                        if (sp->members[t].out[j] == id)
                            ref = 2000000 + 1000 * (int64_t)t + j;
                kput64(b, ref);
            }
        }
    } else if (sp->kind == STEP_GEN && sp->sub == SUB_SOFTMAX) {
        /* a softmax's code is its row length's: it runs rows [begin, end) of any count */
        const ir_node *x = ir_node_get(g, sp->in[0]);
        kput64(b, sp->sub);
        kput64(b, x->dims[x->rank - 1]);
        body_key(b, g, &sp->id, 1, sp->in, sp->n_in, sp->out, sp->n_out, true);
    } else if (sp->kind == STEP_GEN && sp->sub == SUB_MM && rt_mm_of(g, sp->id, &mm) &&
               mm.batches == 1) {
        /* one batch of a product: its code names k and n, not its rows (codegen_mm.c) */
        kput64(b, sp->sub);
        kput64(b, -1), kput64(b, mm.k), kput64(b, mm.n);
        body_key(b, g, &sp->id, 1, sp->in, sp->n_in, sp->out, sp->n_out, true);
    } else if (sp->kind == STEP_GEN) { /* one node: a product, a view */
        kput64(b, sp->sub);
        body_key(b, g, &sp->id, 1, sp->in, sp->n_in, sp->out, sp->n_out, false);
    }
}

/* Step s of cp gets the key of its kernel; alias = 1 + the first earlier step with the same key
 * (it runs that step's code). */
static tj_status decide_aliases(cpu_prog *cp) {
    kbuf *keys = calloc(cp->n_steps + 1, sizeof *keys);
    uint64_t *h = calloc(cp->n_steps + 1, sizeof *h);
    tj_status st = keys && h ? TJ_OK : ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory");
    for (uint32_t s = 0; s < cp->n_steps && !st; s++) {
        step *sp = &cp->steps[s];
        sp->alias = 0;
        sp->key_h[0] = sp->key_h[1] = 0;
        if (!emits(sp) || sp->kind == STEP_CF)
            continue;
        step_key(&keys[s], cp, sp);
        if (keys[s].oom) {
            st = ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory");
            break;
        }
        h[s] = sp->key_h[0] = ir_hash_bytes(keys[s].p, keys[s].n, 0xdedu);
        sp->key_h[1] = ir_hash_bytes(keys[s].p, keys[s].n, 0x656c7321);
        for (uint32_t r = 0; r < s && !sp->alias; r++)
            if (keys[r].n && !cp->steps[r].alias && h[r] == h[s] && keys[r].n == keys[s].n &&
                !memcmp(keys[r].p, keys[s].p, keys[s].n))
                sp->alias = r + 1;
    }
    for (uint32_t s = 0; keys && s < cp->n_steps; s++)
        free(keys[s].p);
    free(keys);
    free(h);
    return st;
}

ir_hash128 jit_cpu_kernels_hash(const cpu_prog *cp) {
    const ir_graph *g = cp->rp.base.g;
    kbuf b = {0};
    bool cf = false;
    kput64(&b, cp->n_steps);
    for (uint32_t s = 0; s < cp->n_steps; s++) {
        const step *sp = &cp->steps[s];
        if (!emits(sp))
            continue;
        /* its position (the symbol's number) and what it runs: another step's code, or its own */
        kput64(&b, s), kput64(&b, sp->kidx), kput64(&b, sp->kind), kput64(&b, sp->sub);
        kput64(&b, sp->alias);
        for (uint32_t m = 0; m < sp->n_members; m++) /* a chain's members are named too */
            kput64(&b, sp->members[m].kidx);
        if (sp->kind == STEP_CF) /* native control flow reads its regions whole */
            cf = true;
        else if (!sp->alias) /* its kernel's key, as decide_aliases hashed it */
            kput(&b, sp->key_h, sizeof sp->key_h);
    }
    ir_hash128 h = {0, 0};
    if (cf || b.oom) { /* the graph itself, extents and all, as before kernels had keys */
        h = ir_graph_layout_hash(g);
        h.lo ^= 0xcf, h.hi ^= (uint64_t)b.oom;
    } else {
        h.lo = ir_hash_bytes(b.p, b.n, 0x6b65726e);
        h.hi = ir_hash_bytes(b.p, b.n, 0x656c7321);
    }
    free(b.p);
    return h;
}

bool jit_cpu_same_kernel(const cpu_prog *cp, const step *a, const step *b) {
    kbuf ka = {0}, kb = {0};
    step_key(&ka, cp, a);
    step_key(&kb, cp, b);
    bool same = !ka.oom && !kb.oom && ka.n && ka.n == kb.n && !memcmp(ka.p, kb.p, ka.n);
    free(ka.p);
    free(kb.p);
    return same;
}

/* ---- the plan -------------------------------------------------------------------------------- */
tj_status jit_cpu_plan_decide(cpu_prog *cp, const jit_cpu_opts *o) {
    const ir_graph *g = cp->rp.base.g;
    uint32_t nn = g->n_nodes + 1;
    cp->part = pass_fusion_run(g, jit_cpu_fusable, jit_cpu_reducible, NULL);
    if (!cp->part)
        return ir_last_code() ? ir_last_code() : TJ_ERR_OOM;
    cp->steps = calloc(cp->part->n_groups + 1, sizeof *cp->steps);
    cp->rp.consts = calloc(nn, sizeof *cp->rp.consts);
    uint8_t *is_out = calloc(nn, 1);
    if (!cp->steps || !cp->rp.consts || !is_out) {
        free(is_out);
        return ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory");
    }
    for (uint32_t k = 0; k < g->n_outputs; k++)
        is_out[g->outputs[k]] = 1;
    tj_status st = build_steps(cp, o);
    if (!st) {
        fold_transposes(cp, is_out);
        st = merge_epilogues(cp, is_out);
    }
    if (!st && !o->exact_math)
        st = merge_convs(cp, is_out);
    for (uint32_t s = 0; s < cp->n_steps && !st; s++) {
        st = step_units(cp, &cp->steps[s]);
        cp->steps[s].kidx = s; /* its kernel's number: the name's suffix */
    }
    if (!st && !o->shape_generic) {
        st = decide_chains(cp, is_out);
    } else if (!st) { /* a chain has its members' extents in its code: none, but say it pays */
        for (uint32_t s = 1; s < cp->n_steps && !cp->rp.base.recompile_pays; s++)
            cp->rp.base.recompile_pays =
                chainable(cp, &cp->steps[s - 1]) && chainable(cp, &cp->steps[s]);
    }
    /* quick code: a small generated kernel is where unrolled loops run faster */
    for (uint32_t s = 0; !st && o->quick && s < cp->n_steps && !cp->rp.base.recompile_pays; s++)
        cp->rp.base.recompile_pays =
            cp->steps[s].kind == STEP_GEN && jit_cpu_step_small(cp, &cp->steps[s]);
    if (!st) {
        decide_generic(cp, o);
        st = decide_aliases(cp);
    }
    free(is_out);
    return st;
}

void jit_cpu_plan_key(const cpu_prog *cp, const jit_cpu_opts *o, const char *base, char *key,
                      size_t n) {
    int n_blas = 0;
    for (uint32_t s = 0; s < cp->n_steps; s++)
        n_blas += cp->steps[s].kind == STEP_BLAS;
    /* rt_isa decides which convolutions become conv steps (merge_convs) */
    snprintf(key, n, "%s;plan=6;blas=%d;exact=%d;par=%lld;isa=%s;unroll=%d", base, n_blas > 0,
             o->exact_math, (long long)cp->rp.par_min, rt_isa_name(rt_isa()), !o->quick);
}

/* A kernel's symbol: "tj_" and 32 hex digits hashing what the code depends on, the options of
 * key (the program's key without its kernels' hash) and the kernel's key (kh), so an equal kernel
 * of another program has the same name and its loaded code serves both (codecache.c). A chain's
 * member ends in "_m": it is an internal function of its chain's object, never an entry point. */
static void kernel_name(char *name, size_t size, const char *okey, const uint64_t kh[2],
                        bool member) {
    uint64_t h0 = ir_hash_bytes(okey, strlen(okey), kh[0]);
    uint64_t h1 = ir_hash_bytes(okey, strlen(okey), kh[1] ^ 0x6b65726e656c7321ull);
    snprintf(name, size, "tj_%016llx%016llx%s", (unsigned long long)h0, (unsigned long long)h1,
             member ? "_m" : "");
}

void jit_cpu_plan_names(cpu_prog *cp, const char *key) {
    char prefix[40], okey[1700];
    snprintf(prefix, sizeof prefix, "tj_%016llx_",
             (unsigned long long)ir_hash_bytes(key, strlen(key), 11));
    snprintf(okey, sizeof okey, "%s", key); /* the options: the kernels' hash blanked */
    char *kh = strstr(okey, ";kernels=");
    for (char *c = kh ? kh + 9 : NULL; c && *c && *c != ';'; c++)
        *c = '0';
    for (uint32_t s = 0; s < cp->n_steps; s++) {
        step *sp = &cp->steps[s];
        sp->name[0] = 0;
        if (emits(sp) && (sp->key_h[0] || sp->key_h[1]))
            kernel_name(sp->name, sizeof sp->name, okey, sp->key_h, false);
        else if (emits(sp)) /* native control flow: this program's own */
            snprintf(sp->name, sizeof sp->name, "%.40s%c%u", prefix,
                     sp->sub == SUB_CHAIN && sp->kind == STEP_GEN ? 'c' : 'k', sp->kidx);
        for (uint32_t m = 0; m < sp->n_members; m++) {
            kbuf b = {0};
            step_key(&b, cp, &sp->members[m]);
            uint64_t mh[2] = {ir_hash_bytes(b.p, b.n, 0xdedu), ir_hash_bytes(b.p, b.n, 0x656c7321)};
            if (b.oom) /* no key: the member's own program's name, never another's */
                snprintf(sp->members[m].name, sizeof sp->members[m].name, "%.40sk%u_m", prefix,
                         sp->members[m].kidx);
            else
                kernel_name(sp->members[m].name, sizeof sp->members[m].name, okey, mh, true);
            free(b.p);
        }
    }
}
