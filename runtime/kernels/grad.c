/* grad.c — reference kernels of the gradient companions: SLICE_GRAD (the adjoint of a slice:
 * zeros of the sliced tensor's shape with the gradient written into the slice) and SCATTER_ADD
 * (the adjoint of gather: rows added at their indices, repeated indices accumulate). */
#include <stdlib.h>

#include "runtime/kernels/kernels.h"

tj_status rt_k_slice_grad(const ir_node *n, const tj_tensor *dy, tj_tensor *out) {
    if (dy->dtype != out->dtype || dy->dtype == TJ_STRING)
        return rt_k_unsupported(n, dy->dtype);
    ir_node view = *n;
    view.op = IR_OP_SLICE;
    int64_t base, s[TJ_MAX_RANK];
    /* the slice's view of `out` is where dy's elements go */
    tj_status st = rt_k_view(&view, out->rank, out->dims, dy->rank, dy->dims, &base, s);
    if (st || dy->numel == 0)
        return st;
    rt_k_iter it;
    const int64_t *strides[2] = {s, NULL};
    const int64_t bases[2] = {base, 0};
    rt_k_iter_init(&it, dy->rank, dy->dims, 2, strides, bases);
    size_t es = ir_dtype_size(dy->dtype);
    for (int64_t i = 0; i < dy->numel; i++, rt_k_iter_next(&it))
        memcpy((char *)out->data + (size_t)it.off[0] * es, (const char *)dy->data + (size_t)i * es,
               es);
    return TJ_OK;
}

#define SCATTER_ROWS(T, U)                                                                         \
    do {                                                                                           \
        T *o = out->data;                                                                          \
        const T *u = upd->data;                                                                    \
        for (int64_t a = 0; a < outer; a++)                                                        \
            for (int64_t j = 0; j < m; j++) {                                                      \
                T *dst = o + (a * N + rows[j]) * inner;                                            \
                const T *src = u + (a * m + j) * inner;                                            \
                for (int64_t t = 0; t < inner; t++)                                                \
                    dst[t] = (T)((U)dst[t] + (U)src[t]);                                           \
            }                                                                                      \
    } while (0)

tj_status rt_k_scatter_add(const ir_node *n, tj_tensor *const *in, tj_tensor *out) {
    const tj_tensor *x = in[0], *idx = in[1], *upd = in[2];
    if (idx->dtype != TJ_I32 && idx->dtype != TJ_I64)
        return ir_errorf(TJ_ERR_DTYPE, "scatter_add: indices must be int32 or int64, got %s",
                         ir_dtype_name(idx->dtype));
    if (x->dtype != out->dtype || upd->dtype != out->dtype)
        return rt_k_unsupported(n, upd->dtype);
    int64_t ax = n->a.i[0];
    char xs[128];
    ir_fmt_dims(xs, sizeof xs, x->rank, x->dims);
    if (ax < 0 || ax >= x->rank)
        return ir_errorf(TJ_ERR_INVALID, "scatter_add: axis %lld out of range for %s",
                         (long long)ax, xs);
    int64_t outer, inner, N = x->dims[ax], m = idx->numel;
    rt_k_split_axis(x->rank, x->dims, ax, &outer, &inner);
    if (outer * m * inner != upd->numel || out->numel != x->numel)
        return ir_errorf(TJ_ERR_INVALID, "scatter_add: %lld updates for %lld indices into %s",
                         (long long)upd->numel, (long long)m, xs);
    int64_t stack_rows[64], *rows = m <= 64 ? stack_rows : malloc((size_t)m * sizeof *rows);
    if (!rows)
        return ir_errorf(TJ_ERR_OOM, "scatter_add: out of memory");
    tj_status st = TJ_OK;
    for (int64_t j = 0; j < m && !st; j++) {
        rows[j] = rt_k_index_at(idx, j);
        if (rows[j] < 0 || rows[j] >= N)
            st = ir_errorf(TJ_ERR_RUNTIME,
                           "scatter_add: index %lld out of range [0, %lld) on axis %lld of %s",
                           (long long)rows[j], (long long)N, (long long)ax, xs);
    }
    if (!st) {
        if (x->numel)
            memcpy(out->data, x->data, (size_t)x->numel * ir_dtype_size(x->dtype));
        switch (out->dtype) {
        case TJ_F32:
            SCATTER_ROWS(float, float);
            break;
        case TJ_F64:
            SCATTER_ROWS(double, double);
            break;
        case TJ_I32:
            SCATTER_ROWS(int32_t, uint32_t); /* wraps like the binary kernels' int add */
            break;
        case TJ_I64:
            SCATTER_ROWS(int64_t, uint64_t);
            break;
        default:
            st = rt_k_unsupported(n, out->dtype);
        }
    }
    if (rows != stack_rows)
        free(rows);
    return st;
}
