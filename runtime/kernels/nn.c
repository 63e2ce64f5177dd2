/* nn.c — ONE_HOT and SPARSE_XENT (tf.nn.sparse_softmax_cross_entropy_with_logits: per row,
 * logsumexp(logits) - logits[label], computed from the row's max so it never overflows; the sum
 * of exponentials is accumulated in double). */
#include "runtime/kernels/kernels.h"

tj_status rt_k_one_hot(const ir_node *n, const tj_tensor *idx, tj_tensor *out) {
    if (idx->dtype != TJ_I32 && idx->dtype != TJ_I64)
        return rt_k_unsupported(n, idx->dtype);
    if (out->dtype == TJ_STRING)
        return rt_k_unsupported(n, out->dtype);
    int64_t depth = n->a.i[0];
    double on = n->a.f[0], off = n->a.f[1];
    for (int64_t i = 0; i < idx->numel; i++) {
        int64_t k = rt_k_index_at(idx, i);
        for (int64_t j = 0; j < depth; j++)
            rt_k_store_f64(out, i * depth + j, j == k ? on : off);
    }
    return TJ_OK;
}

tj_status rt_k_sparse_xent(const ir_node *n, tj_tensor *const *in, tj_tensor *out) {
    const tj_tensor *lg = in[0], *lb = in[1];
    if ((lg->dtype != TJ_F32 && lg->dtype != TJ_F64) || lg->dtype != out->dtype)
        return rt_k_unsupported(n, lg->dtype);
    if (lb->dtype != TJ_I32 && lb->dtype != TJ_I64)
        return rt_k_unsupported(n, lb->dtype);
    int64_t C = lg->rank ? lg->dims[lg->rank - 1] : 0, rows = out->numel;
    for (int64_t r = 0; r < rows; r++) {
        int64_t k = rt_k_index_at(lb, r);
        if (k < 0 || k >= C)
            return ir_errorf(TJ_ERR_RUNTIME,
                             "sparse_softmax_xent: label %lld of row %lld is outside [0, %lld) "
                             "(the number of classes)",
                             (long long)k, (long long)r, (long long)C);
        double m = -INFINITY, s = 0, lk;
        if (lg->dtype == TJ_F32) {
            const float *x = (const float *)lg->data + r * C;
            for (int64_t j = 0; j < C; j++)
                m = x[j] > m || x[j] != x[j] ? x[j] : m;
            for (int64_t j = 0; j < C; j++)
                s += exp((double)x[j] - m);
            lk = x[k];
        } else {
            const double *x = (const double *)lg->data + r * C;
            for (int64_t j = 0; j < C; j++)
                m = x[j] > m || x[j] != x[j] ? x[j] : m;
            for (int64_t j = 0; j < C; j++)
                s += exp(x[j] - m);
            lk = x[k];
        }
        rt_k_store_f64(out, r, m + log(s) - lk);
    }
    return TJ_OK;
}
