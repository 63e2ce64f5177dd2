/* source_red.c — the CUDA backend's reductions (SUM MEAN MAX MIN PROD of f32, f64, i32, i64):
 * reduce groups (a reduction with the elementwise producers only it reads) over adjacent axes, a
 * block per row with a tree in shared memory (inner 1) or a thread per column; single
 * reductions over axes that are not adjacent, a thread per output over constant strides. Every
 * output's sum is taken in the same order every run; f32 sums and products accumulate in double,
 * as the reference kernels (runtime/kernels/reduce.c) do. */
#include <stdio.h>

#include "jit/cuda/cuda.h"

/* A reduction this backend generates: SUM MEAN MAX MIN PROD of f32/f64/i32/i64 whose reduced
 * axes are adjacent, with a non-empty result and, for MAX/MIN, a non-empty reduction. */
static bool red_supported(const ir_graph *g, uint32_t id, int64_t *outer, int64_t *len,
                          int64_t *inner) {
    const ir_node *n = ir_node_get(g, id);
    if (n->n_in != 1 || n->op < IR_OP_SUM || n->op > IR_OP_PROD)
        return false;
    int dt = n->dtype;
    if ((dt != TJ_F32 && dt != TJ_F64 && dt != TJ_I32 && dt != TJ_I64) ||
        ir_node_get(g, ir_inputs(g, n)[0])->dtype != dt)
        return false;
    if (!rt_red_geometry(g, n, outer, len, inner) || *outer * *inner == 0)
        return false;
    bool no_identity = n->op == IR_OP_MAX || n->op == IR_OP_MIN || (n->op == IR_OP_MEAN && dt >= 2);
    return !(*len == 0 && no_identity) && *outer < INT32_MAX; /* the host reports that error */
}

bool jit_cuda_reducible(const ir_graph *g, uint32_t id, void *user) {
    (void)user;
    int64_t o, l, i;
    return red_supported(g, id, &o, &l, &i);
}

/* A reduction's identity, combination and final step, per op and dtype. */
static void red_ops(const ir_node *r, const char **ident, char *comb, size_t cs, const char *acc,
                    const char *v) {
    int dt = r->dtype;
    bool fl = ir_dtype_is_float(dt);
    const char *T = jit_cuda_ctype(dt), *S = jit_cuda_sfx(dt);
    switch (r->op) {
    case IR_OP_MAX:
    case IR_OP_MIN: {
        bool mx = r->op == IR_OP_MAX;
        *ident = fl ? (mx ? "-TJ_INF" : "TJ_INF")
                    : (mx ? (dt == TJ_I32 ? "(-2147483647 - 1)" : "(-9223372036854775807LL - 1)")
                          : (dt == TJ_I32 ? "2147483647" : "9223372036854775807LL"));
        if (fl)
            snprintf(comb, cs, "%s_nan_%s(%s, %s)", mx ? "fmax" : "fmin", S, acc, v);
        else
            snprintf(comb, cs, "(%s %s %s ? %s : %s)", acc, mx ? ">" : "<", v, acc, v);
        return;
    }
    case IR_OP_PROD:
        *ident = "1";
        if (fl)
            snprintf(comb, cs, "(%s * %s)", acc, v);
        else
            snprintf(comb, cs, "(%s)((uint64_t)%s * (uint64_t)%s)", T, acc, v);
        return;
    default: /* SUM, MEAN */
        *ident = "0";
        if (fl)
            snprintf(comb, cs, "(%s + %s)", acc, v);
        else
            snprintf(comb, cs, "(%s)((uint64_t)%s + (uint64_t)%s)", T, acc, v);
    }
}

tj_status jit_cuda_emit_red(jit_sbuf *b, const ir_graph *g, const pass_group *gr,
                            jit_cuda_kernel *k) {
    uint32_t rid = gr->nodes[gr->n_nodes - 1];
    const ir_node *r = ir_node_get(g, rid);
    int64_t outer, len, inner;
    if (!red_supported(g, rid, &outer, &len, &inner))
        return TJ_ERR_UNSUPPORTED;
    uint32_t src = ir_inputs(g, r)[0];
    /* the producers' inputs have the loop shape or one element: flat or scalar */
    rt_ew_layout L = {0};
    const ir_node *x = ir_node_get(g, src);
    tj_status st = rt_ew_layout_of(g, gr->inputs, gr->n_inputs, x->rank, x->dims, &L);
    if (st)
        return st;
    for (uint32_t q = 0; q < gr->n_inputs && !st; q++)
        if (!L.scalar[q] && !L.flat &&
            ir_numel(ir_node_get(g, gr->inputs[q])->rank, ir_node_get(g, gr->inputs[q])->dims) !=
                ir_numel(x->rank, x->dims))
            st = TJ_ERR_UNSUPPORTED;
    L.flat = true; /* every input read at the element's index, or at 0 */
    const char *T = jit_cuda_ctype(r->dtype), *ident;
    /* f32 sums and products accumulate in double, as the reference kernels do (1e30 * 1e30 * 0
     * is 0 there, not NaN) */
    const char *A = r->dtype == TJ_F32 && r->op != IR_OP_MAX && r->op != IR_OP_MIN ? "double" : T;
    char comb[256], comb2[256];
    red_ops(r, &ident, comb, sizeof comb, "acc", "v");
    red_ops(r, &ident, comb2, sizeof comb2, "sh_[t_]", "sh_[t_ + s_]");
    char fin_acc[200], fin_sh[200];
    if (r->op == IR_OP_MEAN) { /* floats: NaN for an empty mean; integers truncate */
        snprintf(fin_acc, sizeof fin_acc, "(%s)(acc / (%s)%lld)", T, A, (long long)len);
        snprintf(fin_sh, sizeof fin_sh, "(%s)(sh_[0] / (%s)%lld)", T, A, (long long)len);
    } else {
        snprintf(fin_acc, sizeof fin_acc, "(%s)acc", T);
        snprintf(fin_sh, sizeof fin_sh, "(%s)sh_[0]", T);
    }
    bool ok = !st;
    if (inner == 1) { /* a block per row: strided partial sums, then a tree */
        jit_cuda_open_blocks(b, g, k, JIT_CK_RED_ROW, outer);
        jit_sbuf_printf(b,
                        "    TJ_SHARED %s sh_[%d];\n"
                        "    unsigned t_ = threadIdx.x;\n"
                        "    for (int64_t o_ = blockIdx.x; o_ < %lldLL; o_ += gridDim.x) {\n"
                        "      %s acc = %s;\n"
                        "      for (int64_t j_ = t_; j_ < %lldLL; j_ += blockDim.x) {\n"
                        "        int64_t e_ = o_ * %lldLL + j_;\n",
                        A, JIT_CUDA_BLOCK, (long long)outer, A, ident, (long long)len,
                        (long long)len);
        ok = ok && jit_cuda_emit_ew_body(b, g, gr, &L, "e_", rid);
        jit_sbuf_printf(b,
                        "        %s v = v%u;\n"
                        "        acc = %s;\n"
                        "      }\n"
                        "      sh_[t_] = acc;\n"
                        "      __syncthreads();\n"
                        "      for (unsigned s_ = blockDim.x / 2; s_ > 0; s_ >>= 1) {\n"
                        "        if (t_ < s_) sh_[t_] = %s;\n"
                        "        __syncthreads();\n"
                        "      }\n"
                        "      if (t_ == 0) o0[o_] = %s;\n"
                        "      __syncthreads();\n"
                        "    }\n}\n",
                        A, src, comb, comb2, fin_sh);
    } else { /* a thread per output, the reduced axis in order */
        jit_cuda_open_threads(b, g, k, JIT_CK_RED_COL, outer * inner);
        jit_sbuf_printf(b,
                        "      int64_t o_ = e_ / %lldLL, i_ = e_ %% %lldLL;\n"
                        "      %s acc = %s;\n"
                        "      for (int64_t j_ = 0; j_ < %lldLL; j_++) {\n"
                        "        int64_t x_ = (o_ * %lldLL + j_) * %lldLL + i_;\n",
                        (long long)inner, (long long)inner, A, ident, (long long)len,
                        (long long)len, (long long)inner);
        ok = ok && jit_cuda_emit_ew_body(b, g, gr, &L, "x_", rid);
        jit_sbuf_printf(b,
                        "        %s v = v%u;\n"
                        "        acc = %s;\n"
                        "      }\n"
                        "      o0[e_] = %s;\n"
                        "    }\n}\n",
                        A, src, comb, fin_acc);
    }
    rt_ew_layout_free(&L);
    return ok ? TJ_OK : TJ_ERR_UNSUPPORTED;
}

/* A reduction over axes that are not adjacent (rt_red_geometry takes adjacent ones: emit_red),
 * e.g. {0, 2} of a 3-D tensor: a thread per output, the reduced elements visited in row-major
 * order of the reduced axes (the reference kernel's order), every stride a constant. */
tj_status jit_cuda_emit_red_any(jit_sbuf *b, const ir_graph *g, const ir_node *r,
                                jit_cuda_kernel *k) {
    const ir_node *x = ir_node_get(g, ir_inputs(g, r)[0]);
    int dt = r->dtype;
    if ((dt != TJ_F32 && dt != TJ_F64 && dt != TJ_I32 && dt != TJ_I64) || x->dtype != dt ||
        r->a.n_list > (uint32_t)x->rank)
        return TJ_ERR_UNSUPPORTED;
    int64_t xn = ir_numel(x->rank, x->dims), on = ir_numel(r->rank, r->dims);
    bool red[IR_MAX_RANK] = {false};
    for (uint32_t q = 0; q < r->a.n_list; q++) {
        if (r->a.list[q] < 0 || r->a.list[q] >= x->rank)
            return TJ_ERR_UNSUPPORTED;
        red[r->a.list[q]] = true;
    }
    if (r->a.n_list == 0 && xn != on)
        for (int d = 0; d < x->rank; d++)
            red[d] = true;
    int64_t st[IR_MAX_RANK], kept = 1, len = 1, acc = 1;
    for (int d = x->rank - 1; d >= 0; d--) {
        st[d] = acc;
        acc *= x->dims[d];
    }
    for (int d = 0; d < x->rank; d++)
        red[d] ? (len *= x->dims[d]) : (kept *= x->dims[d]);
    bool no_identity = r->op == IR_OP_MAX || r->op == IR_OP_MIN || (r->op == IR_OP_MEAN && dt >= 2);
    if (kept != on || on <= 0 || xn < 0 || (len == 0 && no_identity))
        return TJ_ERR_UNSUPPORTED;
    const char *T = jit_cuda_ctype(dt), *ident;
    const char *A = dt == TJ_F32 && r->op != IR_OP_MAX && r->op != IR_OP_MIN ? "double" : T;
    char comb[256];
    red_ops(r, &ident, comb, sizeof comb, "acc", "v");
    jit_cuda_open_threads(b, g, k, JIT_CK_RED_COL, on);
    jit_sbuf_printf(b, "      int64_t r_ = e_, base_ = 0;\n");
    for (int d = x->rank - 1; d >= 0; d--)
        if (!red[d])
            jit_sbuf_printf(b, "      base_ += (r_ %% %lldLL) * %lldLL; r_ /= %lldLL;\n",
                            (long long)x->dims[d], (long long)st[d], (long long)x->dims[d]);
    jit_sbuf_printf(b,
                    "      %s acc = %s;\n"
                    "      for (int64_t j_ = 0; j_ < %lldLL; j_++) {\n"
                    "        int64_t q_ = j_, off_ = base_;\n",
                    A, ident, (long long)len);
    for (int d = x->rank - 1; d >= 0; d--)
        if (red[d])
            jit_sbuf_printf(b, "        off_ += (q_ %% %lldLL) * %lldLL; q_ /= %lldLL;\n",
                            (long long)x->dims[d], (long long)st[d], (long long)x->dims[d]);
    char fin[200];
    if (r->op == IR_OP_MEAN)
        snprintf(fin, sizeof fin, "(%s)(acc / (%s)%lld)", T, A, (long long)len);
    else
        snprintf(fin, sizeof fin, "(%s)acc", T);
    jit_sbuf_printf(b,
                    "        %s v = i0[off_];\n"
                    "        acc = %s;\n"
                    "      }\n"
                    "      o0[e_] = %s;\n"
                    "    }\n}\n",
                    A, comb, fin);
    return TJ_OK;
}
