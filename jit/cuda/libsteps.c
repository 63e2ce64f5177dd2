/* libsteps.c — the CUDA program's steps that are library calls: convolutions through cuDNN (the
 * filter swapped by a kernel), products through cuBLAS alone, and a product with its bias add
 * through cuBLASLt's epilogue (found in the fusion partition). */
#include "runtime/kernels/conv.h"
#include <stdlib.h>
#include <string.h>

#include "jit/cuda/program.h"

/* A convolution through cuDNN: the filter swapped into KRSC scratch by the kernel, cuDNN's call,
 * or for a filter gradient, cuDNN's call into scratch and the swap out. Scratch and workspace
 * come from the caching allocator and go back after the calls are queued (one stream: the next
 * user of the blocks queues behind them). */
tj_status jit_cuda_launch_cudnn(rt_plan *p, const jit_cuda_kernel *k, void *fn, void *const *bufs) {
    rt_device *d = p->dev;
    const char *f = p->base.g->name;
    bool to_hwio = ir_node_get(p->base.g, k->out[0])->op == IR_OP_CONV2D_GRAD_FILTER;
    size_t fb = jit_cudnn_conv_filter_bytes(k->conv), wb = jit_cudnn_conv_workspace(k->conv);
    void *ft = d->vt->alloc(d, fb), *ws = wb ? d->vt->alloc(d, wb) : NULL;
    tj_status st = ft && (ws || !wb) ? TJ_OK : (ir_last_code() ? ir_last_code() : TJ_ERR_OOM);
    kernel_args args = {{0}, {0}};
    void *params[] = {&args};
    if (!st && !to_hwio) {
        args.p[0] = bufs[1], args.p[1] = ft;
        st = rt_cuda_launch(d, fn, k->grid, k->block, 0, params, k->name, f);
    }
    if (!st)
        st = jit_cudnn_conv_run(k->conv, bufs[0], to_hwio ? bufs[1] : ft, to_hwio ? ft : bufs[2],
                                ws, k->name, f);
    if (!st && to_hwio) {
        args.p[0] = ft, args.p[1] = bufs[2];
        st = rt_cuda_launch(d, fn, k->grid, k->block, 0, params, k->name, f);
    }
    if (ws)
        d->vt->free(d, ws, wb);
    if (ft)
        d->vt->free(d, ft, fb);
    return st;
}

/* Convolution node id, its swap kernel k emitted: cuDNN's call made, or where cuDNN offers no
 * algorithm, the swap taken back and the generated kernel emitted instead. */
tj_status jit_cuda_dnn_conv(cuda_prog *cp, jit_sbuf *src, uint32_t id, jit_cuda_kernel *k) {
    const ir_graph *g = cp->rp.base.g;
    const ir_node *n = ir_node_get(g, id);
    rt_conv_geom c;
    tj_status st = jit_cuda_conv_geom(g, n, &c)
                       ? jit_cudnn_conv_new(cp->dnn, n->op, n->dtype, &c, &k->conv)
                       : TJ_ERR_UNSUPPORTED;
    if (st != TJ_ERR_UNSUPPORTED)
        return st;
    src->n = k->src_off;
    if (src->s)
        src->s[src->n] = 0;
    char name[sizeof k->name];
    memcpy(name, k->name, sizeof name);
    jit_cuda_kernel_release(k);
    memset(k, 0, sizeof *k);
    memcpy(k->name, name, sizeof name);
    return jit_cuda_emit_node(src, g, id, k);
}

tj_status jit_cuda_index_graph(const cuda_prog *cp, graph_index *x) {
    const ir_graph *g = cp->rp.base.g;
    const pass_partition *part = cp->part;
    x->group_of = malloc((g->n_nodes + 1) * sizeof *x->group_of);
    x->uses = calloc(g->n_nodes + 1, 1);
    x->absorbed = calloc(part->n_groups + 1, sizeof *x->absorbed);
    if (!x->group_of || !x->uses || !x->absorbed)
        return ir_errorf(TJ_ERR_OOM, "cuda: out of memory");
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        x->group_of[i] = -1;
        const uint32_t *in = ir_inputs(g, &g->nodes[i]);
        for (uint32_t q = 0; q < g->nodes[i].n_in; q++)
            if (in[q] < g->n_nodes && x->uses[in[q]] < 2)
                x->uses[in[q]]++;
    }
    for (uint32_t q = 0; q < g->n_outputs; q++)
        if (g->outputs[q] < g->n_nodes && x->uses[g->outputs[q]] < 2)
            x->uses[g->outputs[q]]++;
    for (uint32_t gi = 0; gi < part->n_groups; gi++)
        for (uint32_t j = 0; j < part->groups[gi].n_nodes; j++)
            x->group_of[part->groups[gi].nodes[j]] = (int32_t)gi;
    return TJ_OK;
}

void jit_cuda_index_free(graph_index *x) {
    free(x->group_of);
    free(x->uses);
    free(x->absorbed);
}

/* Whether product group gi is read only by a fused group computing `p + b` or `relu(p + b)`
 * (b a vector of the product's columns, made by an earlier group) whose one output is that
 * value: *ge, *bias and *relu say which (the add goes to cuBLASLt, a relu stays a kernel). */
bool jit_cuda_epilogue_of(const cuda_prog *cp, const graph_index *x, uint32_t gi, uint32_t *ge,
                          uint32_t *bias, bool *relu) {
    const ir_graph *g = cp->rp.base.g;
    const pass_group *gr = &cp->part->groups[gi];
    rt_mm mm;
    uint32_t p = gr->nodes[0], c = IR_NONE;
    if (gr->fused || gr->reduce || gr->n_nodes != 1 || ir_node_get(g, p)->op != IR_OP_MATMUL ||
        !rt_mm_of(g, p, &mm) || mm.dt != TJ_F32 || mm.batches != 1 || x->uses[p] != 1)
        return false;
    for (uint32_t i = p + 1; i < g->n_nodes && c == IR_NONE; i++)
        for (uint32_t q = 0; q < g->nodes[i].n_in; q++)
            if (ir_inputs(g, &g->nodes[i])[q] == p)
                c = i;
    if (c == IR_NONE || x->group_of[c] <= (int32_t)gi)
        return false;
    const pass_group *e = &cp->part->groups[x->group_of[c]];
    const ir_node *cn = ir_node_get(g, c);
    if (!e->fused || e->nodes[0] != c || cn->op != IR_OP_ADD || cn->n_in != 2 || cn->rank != 2 ||
        cn->dtype != TJ_F32 || cn->dims[0] != mm.m || cn->dims[1] != mm.n)
        return false;
    const uint32_t *in = ir_inputs(g, cn);
    uint32_t b = in[0] == p ? in[1] : in[0];
    const ir_node *bn = ir_node_get(g, b);
    if (b == p || bn->dtype != TJ_F32 || bn->rank != 1 || bn->dims[0] != mm.n ||
        x->group_of[b] >= (int32_t)gi)
        return false;
    const ir_node *r = e->n_nodes == 2 ? ir_node_get(g, e->nodes[1]) : NULL;
    *relu = r && r->op == IR_OP_RELU && ir_inputs(g, r)[0] == c && x->uses[c] == 1;
    if (e->n_nodes != (*relu ? 2u : 1u) || e->n_outputs != 1 ||
        e->outputs[0] != e->nodes[e->n_nodes - 1])
        return false;
    *ge = (uint32_t)x->group_of[c];
    *bias = b;
    return true;
}

/* Product group gi and the bias add starting fused group ge as one cuBLASLt call in kernel k
 * (no source); TJ_ERR_UNSUPPORTED when cuBLASLt offers no algorithm. */
tj_status jit_cuda_lt_kernel(cuda_prog *cp, uint32_t gi, uint32_t ge, uint32_t bias,
                             jit_cuda_kernel *k, size_t at) {
    const ir_graph *g = cp->rp.base.g;
    uint32_t p = cp->part->groups[gi].nodes[0], add = cp->part->groups[ge].nodes[0];
    if (!rt_mm_of(g, p, &k->mm))
        return TJ_ERR_UNSUPPORTED;
    tj_status st = jit_lt_mm_new(cp->lt, &k->mm, &k->lt);
    if (st)
        return st;
    const uint32_t *in = ir_inputs(g, ir_node_get(g, p));
    uint32_t ins[3] = {in[0], in[1], bias}, nodes[2] = {p, add};
    k->kind = JIT_CK_MM;
    k->n_in = 3;
    k->n_out = 1;
    k->n_nodes = 2;
    k->src_off = at;
    k->src_len = 0;
    if (!(k->in = jit_cuda_ids_dup(ins, 3)) || !(k->out = jit_cuda_ids_dup(&add, 1)) ||
        !(k->nodes = jit_cuda_ids_dup(nodes, 2)))
        return ir_errorf(TJ_ERR_OOM, "cuda: out of memory");
    return TJ_OK;
}

/* Product node id as cuBLAS's call alone (cuBLAS takes f32 and f64): no generated source, which
 * NVRTC would compile for nothing. TJ_ERR_UNSUPPORTED: not such a product. */
tj_status jit_cuda_blas_kernel(cuda_prog *cp, uint32_t id, jit_cuda_kernel *k, size_t at) {
    const ir_graph *g = cp->rp.base.g;
    const ir_node *n = ir_node_get(g, id);
    if (!cp->blas || n->op != IR_OP_MATMUL || !rt_mm_of(g, id, &k->mm) ||
        (k->mm.dt != TJ_F32 && k->mm.dt != TJ_F64) || k->mm.m * k->mm.n == 0)
        return TJ_ERR_UNSUPPORTED;
    k->kind = JIT_CK_MM;
    k->n_in = 2;
    k->n_out = 1;
    k->n_nodes = 1;
    k->src_off = at;
    k->src_len = 0;
    if (!(k->in = jit_cuda_ids_dup(ir_inputs(g, n), 2)) || !(k->out = jit_cuda_ids_dup(&id, 1)) ||
        !(k->nodes = jit_cuda_ids_dup(&id, 1)))
        return ir_errorf(TJ_ERR_OOM, "cuda: out of memory");
    return TJ_OK;
}

/* The relu of fused group ge (after its bias add went to cuBLASLt) as a kernel of its own. */
tj_status jit_cuda_relu_kernel(cuda_prog *cp, jit_sbuf *src, uint32_t ge, jit_cuda_kernel *k) {
    const pass_group *e = &cp->part->groups[ge];
    pass_group r = *e;
    r.n_nodes = r.n_inputs = 1;
    r.nodes = &e->nodes[1];
    r.inputs = &e->nodes[0];
    return jit_cuda_emit_group(src, cp->rp.base.g, &r, k);
}
