/* shape.c — data-movement kernels: RESHAPE/EXPAND_DIMS/SQUEEZE (row-major copies), TRANSPOSE,
 * BROADCAST_TO, CONCAT, SLICE (raw Python begin/end/step normalised exactly like
 * slice.indices()) and GATHER (indices must lie in [0, dim): negative or too large is an error,
 * as TensorFlow on CPU, checked before anything is written). Every kernel copies: string
 * elements are deep-copied into the output's buffer. */
#include <stdlib.h>

#include "runtime/kernels/kernels.h"
#include "runtime/rt_pool.h"

static tj_status same_dtype(const ir_node *n, const tj_tensor *x, const tj_tensor *out) {
    if (x->dtype == out->dtype)
        return TJ_OK;
    return ir_errorf(TJ_ERR_INVALID, "%s: input dtype %s differs from output dtype %s",
                     rt_k_name(n), ir_dtype_name(x->dtype), ir_dtype_name(out->dtype));
}

tj_status rt_k_copy(const ir_node *n, const tj_tensor *x, tj_tensor *out) {
    tj_status st = same_dtype(n, x, out);
    if (st)
        return st;
    if (x->numel != out->numel) {
        char a[128], b[128];
        return ir_errorf(TJ_ERR_SHAPE, "%s: cannot copy %s into %s", rt_k_name(n),
                         ir_fmt_dims(a, sizeof a, x->rank, x->dims),
                         ir_fmt_dims(b, sizeof b, out->rank, out->dims));
    }
    if (x->dtype != TJ_STRING) {
        if (x->numel)
            memcpy(out->data, x->data, (size_t)x->numel * ir_dtype_size(x->dtype));
        return TJ_OK;
    }
    for (int64_t i = 0; i < x->numel; i++) {
        st = rt_k_copy_elem(n, out, i, x, i);
        if (st)
            return st;
    }
    return TJ_OK;
}

/* A concat's rows on the pool: task t copies output rows [t·per, (t+1)·per), each from every
 * input in turn, so the output is written once in order (DenseNet's channel concats in NHWC:
 * 3136 rows of 7 to 58 runs of 128 bytes each; input by input, each pass strided across the
 * whole output, took twice ONNX Runtime's time). */
typedef struct concat_job {
    char *out;
    const char **src;
    size_t *len, row; /* per input: bytes per row; the output's row */
    uint32_t n_in;
    int64_t outer, per;
} concat_job;

static void concat_task(void *ctx, int64_t t) {
    const concat_job *j = ctx;
    int64_t o0 = t * j->per, o1 = o0 + j->per < j->outer ? o0 + j->per : j->outer;
    for (int64_t o = o0; o < o1; o++) {
        char *d = j->out + (size_t)o * j->row;
        for (uint32_t k = 0; k < j->n_in; d += j->len[k], k++)
            if (j->len[k])
                memcpy(d, j->src[k] + (size_t)o * j->len[k], j->len[k]);
    }
}

enum { CONCAT_TASK_BYTES = 64 << 10, CONCAT_SPLIT = 256 << 10 };

/* false (nothing written) when there is no memory for the job's tables */
static bool concat_rows(tj_tensor *const *in, uint32_t n_in, int64_t ax, int64_t inner,
                        int64_t outer, int64_t orow, size_t es, tj_tensor *out) {
    concat_job j = {out->data,
                    malloc(n_in * sizeof *j.src),
                    malloc(n_in * sizeof *j.len),
                    (size_t)orow * es,
                    n_in,
                    outer,
                    outer};
    if (!j.src || !j.len) {
        free(j.src), free(j.len);
        return false;
    }
    for (uint32_t k = 0; k < n_in; k++)
        j.src[k] = in[k]->data, j.len[k] = (size_t)(in[k]->dims[ax] * inner) * es;
    size_t bytes = (size_t)out->numel * es;
    if (bytes >= CONCAT_SPLIT && rt_pool_size() > 1 && outer > 1) {
        j.per = (int64_t)(CONCAT_TASK_BYTES / (j.row ? j.row : 1));
        j.per = j.per < 1 ? 1 : j.per;
        rt_parallel_for((outer + j.per - 1) / j.per, concat_task, &j);
    } else if (outer > 0) {
        concat_task(&j, 0);
    }
    free(j.src), free(j.len);
    return true;
}

/* Each input is a [outer, d_k * inner] block; output rows interleave them. */
tj_status rt_k_concat(const ir_node *n, tj_tensor *const *in, tj_tensor *out) {
    int64_t ax = n->a.i[0];
    if (n->n_in == 0 || ax < 0 || ax >= out->rank)
        return ir_errorf(TJ_ERR_INVALID,
                         "concat: axis %lld out of range for rank %d with %u "
                         "inputs",
                         (long long)ax, out->rank, n->n_in);
    int64_t outer = 1, inner = 1, total = 0;
    for (int d = 0; d < ax; d++)
        outer *= out->dims[d];
    for (int d = (int)ax + 1; d < out->rank; d++)
        inner *= out->dims[d];
    for (uint32_t k = 0; k < n->n_in; k++) {
        const tj_tensor *x = in[k];
        tj_status st = same_dtype(n, x, out);
        if (st)
            return st;
        bool ok = x->rank == out->rank;
        for (int d = 0; ok && d < x->rank; d++)
            ok = d == ax || x->dims[d] == out->dims[d];
        if (!ok) {
            char a[128], b[128];
            return ir_errorf(TJ_ERR_SHAPE,
                             "concat: input %u %s does not fit output %s on axis "
                             "%lld",
                             k, ir_fmt_dims(a, sizeof a, x->rank, x->dims),
                             ir_fmt_dims(b, sizeof b, out->rank, out->dims), (long long)ax);
        }
        total += x->dims[ax];
    }
    if (total != out->dims[ax])
        return ir_errorf(TJ_ERR_SHAPE, "concat: inputs sum to %lld on axis %lld, output has %lld",
                         (long long)total, (long long)ax, (long long)out->dims[ax]);
    int64_t orow = out->dims[ax] * inner, col = 0;
    size_t es = ir_dtype_size(out->dtype);
    if (out->dtype != TJ_STRING && concat_rows(in, n->n_in, ax, inner, outer, orow, es, out))
        return TJ_OK;
    for (uint32_t k = 0; k < n->n_in; k++) {
        const tj_tensor *x = in[k];
        int64_t xrow = x->dims[ax] * inner;
        for (int64_t o = 0; o < outer && xrow > 0; o++) {
            int64_t di = o * orow + col, si = o * xrow;
            if (out->dtype != TJ_STRING) {
                memcpy((char *)out->data + (size_t)di * es, (const char *)x->data + (size_t)si * es,
                       (size_t)xrow * es);
                continue;
            }
            for (int64_t j = 0; j < xrow; j++) {
                tj_status st = rt_k_copy_elem(n, out, di + j, x, si + j);
                if (st)
                    return st;
            }
        }
        col += xrow;
    }
    return TJ_OK;
}

/* Python's slice(start, stop, step).indices(len): returns the first index and the count. */
static int64_t slice_indices(int64_t start, int64_t stop, int64_t step, int64_t len,
                             int64_t *first) {
    int64_t lower = step < 0 ? -1 : 0, upper = step < 0 ? len - 1 : len;
    if (start < 0) {
        start += len;
        if (start < lower)
            start = lower;
    } else if (start > upper) {
        start = upper;
    }
    if (stop < 0) {
        stop += len;
        if (stop < lower)
            stop = lower;
    } else if (stop > upper) {
        stop = upper;
    }
    *first = start;
    if (step > 0)
        return stop > start ? (stop - start - 1) / step + 1 : 0;
    /* step < 0: -(step + 1) avoids overflow at INT64_MIN */
    return start > stop
               ? (int64_t)((uint64_t)(start - stop - 1) / ((uint64_t)(-(step + 1)) + 1)) + 1
               : 0;
}

/* ---- strided views: TRANSPOSE, BROADCAST_TO, SLICE ---- */
tj_status rt_k_view(const ir_node *n, int xrank, const int64_t *xdims, int orank,
                    const int64_t *odims, int64_t *base, int64_t *s) {
    int64_t xs[TJ_MAX_RANK];
    rt_k_strides(xrank, xdims, xs);
    *base = 0;
    char a[128], b[128];
    switch (n->op) {
    case IR_OP_TRANSPOSE: {
        if (n->a.n_list != (uint32_t)xrank || orank != xrank)
            return ir_errorf(TJ_ERR_INVALID, "transpose: perm has %u entries for rank %d",
                             n->a.n_list, xrank);
        bool seen[TJ_MAX_RANK] = {0};
        for (int d = 0; d < xrank; d++) {
            int64_t p = n->a.list[d];
            if (p < 0 || p >= xrank || seen[p] || odims[d] != xdims[p])
                return ir_errorf(TJ_ERR_INVALID, "transpose: bad perm entry %lld at %d",
                                 (long long)p, d);
            seen[p] = true;
            s[d] = xs[p];
        }
        return TJ_OK;
    }
    case IR_OP_BROADCAST_TO: {
        bool ok = xrank <= orank;
        for (int d = 0; ok && d < xrank; d++) {
            int64_t xd = xdims[d], od = odims[orank - xrank + d];
            ok = xd == od || xd == 1;
        }
        if (!ok)
            return ir_errorf(TJ_ERR_SHAPE, "broadcast_to: cannot broadcast %s to %s",
                             ir_fmt_dims(a, sizeof a, xrank, xdims),
                             ir_fmt_dims(b, sizeof b, orank, odims));
        rt_k_bcast_strides(orank, odims, xrank, xdims, s);
        return TJ_OK;
    }
    case IR_OP_SLICE: {
        int r = xrank;
        if (n->a.n_list != 3u * (uint32_t)r || orank != r)
            return ir_errorf(TJ_ERR_INVALID, "slice: %u begin/end/step entries for rank %d",
                             n->a.n_list, r);
        for (int d = 0; d < r; d++) {
            int64_t bg = n->a.list[d], e = n->a.list[r + d], step = n->a.list[2 * r + d], first;
            if (step == 0)
                return ir_errorf(TJ_ERR_INVALID, "slice: step is 0 on axis %d", d);
            int64_t cnt = slice_indices(bg, e, step, xdims[d], &first);
            if (cnt != odims[d])
                return ir_errorf(
                    TJ_ERR_INVALID, "slice: axis %d of %s gives %lld elements, output has %lld", d,
                    ir_fmt_dims(a, sizeof a, r, xdims), (long long)cnt, (long long)odims[d]);
            if (cnt > 0)
                *base += first * xs[d];
            s[d] = cnt > 1 ? step * xs[d] : 0; /* |step| < dim when cnt > 1: no overflow */
        }
        return TJ_OK;
    }
    default:
        return ir_errorf(TJ_ERR_UNSUPPORTED, "%s: not a strided view", rt_k_name(n));
    }
}

static tj_status view_copy(const ir_node *n, const tj_tensor *x, tj_tensor *out) {
    tj_status st = same_dtype(n, x, out);
    int64_t base, s[TJ_MAX_RANK];
    if (!st)
        st = rt_k_view(n, x->rank, x->dims, out->rank, out->dims, &base, s);
    return st ? st : rt_k_copy_strided(n, x, base, s, out);
}

tj_status rt_k_transpose(const ir_node *n, const tj_tensor *x, tj_tensor *out) {
    return view_copy(n, x, out);
}

tj_status rt_k_broadcast_to(const ir_node *n, const tj_tensor *x, tj_tensor *out) {
    return view_copy(n, x, out);
}

tj_status rt_k_slice(const ir_node *n, const tj_tensor *x, tj_tensor *out) {
    return view_copy(n, x, out);
}

/* out[o, j, t] = params[o, idx[j], t] with params viewed as [outer, N, inner]. */
/* Copies `count` elements from src[so] to dst[do_] (strings deep-copied). */
static tj_status copy_elems(const ir_node *n, tj_tensor *dst, int64_t do_, const tj_tensor *src,
                            int64_t so, int64_t count) {
    if (dst->dtype != TJ_STRING) {
        size_t es = ir_dtype_size(dst->dtype);
        if (count)
            memcpy((char *)dst->data + (size_t)do_ * es, (const char *)src->data + (size_t)so * es,
                   (size_t)count * es);
        return TJ_OK;
    }
    for (int64_t t = 0; t < count; t++) {
        tj_status st = rt_k_copy_elem(n, dst, do_ + t, src, so + t);
        if (st)
            return st;
    }
    return TJ_OK;
}

tj_status rt_k_row(const ir_node *n, tj_tensor *const *in, tj_tensor *out) {
    const tj_tensor *x = in[0];
    const tj_tensor *i = in[n->op == IR_OP_UPDATE_INDEX ? 1 : 2];
    const char *op = rt_k_name(n);
    if (i->dtype != TJ_I32 && i->dtype != TJ_I64)
        return ir_errorf(TJ_ERR_DTYPE, "%s: the index must be int32 or int64, got %s", op,
                         ir_dtype_name(i->dtype));
    int64_t rows = x->rank ? x->dims[0] : 0, idx = rt_k_index_at(i, 0);
    int64_t row = rows ? x->numel / rows : 0;
    if (idx < 0 || idx >= rows)
        return ir_errorf(TJ_ERR_RUNTIME, "%s: index %lld out of range [0, %lld)", op,
                         (long long)idx, (long long)rows);
    if (n->op == IR_OP_READ_INDEX) {
        if (!((const uint8_t *)in[1]->data)[idx])
            return ir_errorf(TJ_ERR_RUNTIME,
                             "read_index: row %lld was never written (a tensor "
                             "array read before its write)",
                             (long long)idx);
        return copy_elems(n, out, 0, x, idx * row, row);
    }
    tj_status st = copy_elems(n, out, 0, x, 0, x->numel);
    return st ? st : copy_elems(n, out, idx * row, in[2], 0, row);
}

tj_status rt_k_gather(const ir_node *n, tj_tensor *const *in, tj_tensor *out) {
    const tj_tensor *p = in[0], *idx = in[1];
    tj_status st = same_dtype(n, p, out);
    if (st)
        return st;
    if (idx->dtype != TJ_I32 && idx->dtype != TJ_I64)
        return ir_errorf(TJ_ERR_DTYPE, "gather: indices must be int32 or int64, got %s",
                         ir_dtype_name(idx->dtype));
    int64_t ax = n->a.i[0];
    char ps[128];
    ir_fmt_dims(ps, sizeof ps, p->rank, p->dims);
    if (ax < 0 || ax >= p->rank)
        return ir_errorf(TJ_ERR_INVALID, "gather: axis %lld out of range for params %s",
                         (long long)ax, ps);
    int64_t outer, inner, N = p->dims[ax], m = idx->numel;
    rt_k_split_axis(p->rank, p->dims, ax, &outer, &inner);
    if (outer * m * inner != out->numel)
        return ir_errorf(TJ_ERR_INVALID, "gather: output has %lld elements, expected %lld",
                         (long long)out->numel, (long long)(outer * m * inner));
    for (int64_t j = 0; j < m; j++) {
        int64_t v = rt_k_index_at(idx, j);
        if (v < 0 || v >= N)
            return ir_errorf(TJ_ERR_RUNTIME,
                             "gather: index %lld out of range [0, %lld) on axis "
                             "%lld of params %s",
                             (long long)v, (long long)N, (long long)ax, ps);
    }
    if (out->numel == 0)
        return TJ_OK;
    size_t es = ir_dtype_size(out->dtype);
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t j = 0; j < m; j++) {
            int64_t si = (o * N + rt_k_index_at(idx, j)) * inner, di = (o * m + j) * inner;
            if (out->dtype != TJ_STRING) {
                memcpy((char *)out->data + (size_t)di * es, (const char *)p->data + (size_t)si * es,
                       (size_t)inner * es);
                continue;
            }
            for (int64_t t = 0; t < inner; t++) {
                st = rt_k_copy_elem(n, out, di + t, p, si + t);
                if (st)
                    return st;
            }
        }
    }
    return TJ_OK;
}
