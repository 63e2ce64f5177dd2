/* common.c — helpers shared by the reference kernels: error messages, strides, broadcast strides,
 * the multi-operand index iterator and element copies. Element copies of TJ_STRING tensors always
 * deep-copy (the output buffer owns its strings: rt_tensor_alloc set n_strings = numel). */
#include <stdlib.h>

#include "runtime/kernels/kernels.h"
#include "runtime/rt_pool.h"

tj_status rt_k_unsupported(const ir_node *n, int dtype) {
    return ir_errorf(TJ_ERR_UNSUPPORTED, "%s: not supported for dtype %s", rt_k_name(n),
                     ir_dtype_name(dtype));
}

tj_status rt_k_check_tensor(const ir_node *n, const char *what, const tj_tensor *t) {
    if (!t)
        return ir_errorf(TJ_ERR_INVALID, "%s: %s is NULL", rt_k_name(n), what);
    if (t->kind != RT_CONCRETE)
        return ir_errorf(TJ_ERR_INVALID, "%s: %s is not a concrete tensor", rt_k_name(n), what);
    if (t->numel > 0 && !t->data)
        return ir_errorf(TJ_ERR_INVALID, "%s: %s has no data", rt_k_name(n), what);
    return TJ_OK;
}

void rt_k_strides(int rank, const int64_t *dims, int64_t *strides) {
    int64_t s = 1;
    for (int d = rank - 1; d >= 0; d--) {
        strides[d] = s;
        s *= dims[d];
    }
}

void rt_k_bcast_strides(int rank, const int64_t *dims, int rank_in, const int64_t *dims_in,
                        int64_t *strides) {
    int64_t s = 1;
    for (int d = rank - 1; d >= 0; d--) {
        int di = d - (rank - rank_in);
        if (di < 0) {
            strides[d] = 0;
            continue;
        }
        strides[d] = (dims_in[di] == 1 && dims[d] != 1) ? 0 : s;
        s *= dims_in[di];
    }
}

int rt_k_coalesce(int rank, int64_t *dims, int n_ops, int64_t (*st)[TJ_MAX_RANK]) {
    int r = 0;
    for (int d = 0; d < rank; d++) {
        if (dims[d] == 1)
            continue; /* an axis of extent 1: its strides never move */
        int merge = r > 0;
        for (int k = 0; k < n_ops && merge; k++)
            merge = st[k][r - 1] == st[k][d] * dims[d];
        if (merge) {
            dims[r - 1] *= dims[d];
            for (int k = 0; k < n_ops; k++)
                st[k][r - 1] = st[k][d];
            continue;
        }
        dims[r] = dims[d];
        for (int k = 0; k < n_ops; k++)
            st[k][r] = st[k][d];
        r++;
    }
    if (r == 0) { /* one element */
        dims[0] = 1;
        for (int k = 0; k < n_ops; k++)
            st[k][0] = 0;
        r = 1;
    }
    return r;
}

void rt_k_iter_init(rt_k_iter *it, int rank, const int64_t *dims, int n_ops,
                    const int64_t *const *strides, const int64_t *base) {
    memset(it, 0, sizeof *it);
    it->rank = rank;
    it->n_ops = n_ops;
    memcpy(it->dims, dims, sizeof(int64_t) * (size_t)rank);
    for (int k = 0; k < n_ops; k++) {
        if (strides && strides[k])
            memcpy(it->st[k], strides[k], sizeof(int64_t) * (size_t)rank);
        else
            rt_k_strides(rank, dims, it->st[k]);
        it->off[k] = base ? base[k] : 0;
    }
}

tj_status rt_k_set_str(const ir_node *n, tj_tensor *out, int64_t i, const char *s, size_t len) {
    tj_string *o = (tj_string *)out->data + i;
    char *p = rt_strdup_len(s ? s : "", s ? len : 0);
    if (!p)
        return ir_errorf(TJ_ERR_OOM, "%s: out of memory copying a string", rt_k_name(n));
    free(o->data); /* normally NULL: out is freshly zeroed */
    o->data = p;
    o->len = s ? len : 0;
    return TJ_OK;
}

tj_status rt_k_copy_elem(const ir_node *n, tj_tensor *dst, int64_t di, const tj_tensor *src,
                         int64_t si) {
    switch (ir_dtype_size(dst->dtype)) {
    case 1:
        ((uint8_t *)dst->data)[di] = ((const uint8_t *)src->data)[si];
        return TJ_OK;
    case 2:
        ((uint16_t *)dst->data)[di] = ((const uint16_t *)src->data)[si];
        return TJ_OK;
    case 4:
        ((uint32_t *)dst->data)[di] = ((const uint32_t *)src->data)[si];
        return TJ_OK;
    case 8:
        ((uint64_t *)dst->data)[di] = ((const uint64_t *)src->data)[si];
        return TJ_OK;
    default:
        break;
    }
    if (dst->dtype == TJ_STRING) {
        const tj_string *s = (const tj_string *)src->data + si;
        return rt_k_set_str(n, dst, di, s->data, s->len);
    }
    return rt_k_unsupported(n, dst->dtype);
}

/* One R x C plane of a strided copy: element (r, c) from src[s0 + r·sr + c·sc] to
 * out[o0 + r·or_ + c] (out's plane axis b is its last), in 32 x 32 blocks, so a transpose reads
 * and writes whole cache lines within a block instead of striding through memory per element. */
#define COPY_PLANE(T)                                                                              \
    static void copy_plane_##T(T *out, const T *src, int64_t o0, int64_t s0, int64_t R, int64_t C, \
                               int64_t or_, int64_t sr, int64_t sc) {                              \
        for (int64_t r0 = 0; r0 < R; r0 += 32)                                                     \
            for (int64_t c0 = 0; c0 < C; c0 += 32) {                                               \
                int64_t r1 = r0 + 32 < R ? r0 + 32 : R, c1 = c0 + 32 < C ? c0 + 32 : C;            \
                for (int64_t r = r0; r < r1; r++) {                                                \
                    T *o = out + o0 + r * or_;                                                     \
                    const T *q = src + s0 + r * sr;                                                \
                    for (int64_t c = c0; c < c1; c++)                                              \
                        o[c] = q[c * sc];                                                          \
                }                                                                                  \
            }                                                                                      \
    }
COPY_PLANE(uint8_t)
COPY_PLANE(uint16_t)
COPY_PLANE(uint32_t)
COPY_PLANE(uint64_t)

/* A strided copy's planes (and, with few planes, bands of a plane's rows) as tasks: large ones
 * (a dense layer's weight transposed for its gradient, 12.8 MB) run on the pool. */
enum { STRIDED_SPLIT = 1 << 17 };
typedef struct strided_job {
    void *out;
    const void *src;
    size_t es;
    int rank;
    int64_t odims[TJ_MAX_RANK], ostr[TJ_MAX_RANK], sstr[TJ_MAX_RANK]; /* plane axes: extent 1 */
    int64_t R, C, or_, sr, sc, base, bands;
} strided_job;

static void strided_task(void *ctx, int64_t t) {
    const strided_job *j = ctx;
    int64_t plane = t / j->bands, band = t % j->bands, o0 = 0, s0 = j->base;
    for (int d = j->rank - 1; d >= 0; d--) { /* the plane's offsets, the last axis fastest */
        int64_t i = plane % j->odims[d];
        plane /= j->odims[d];
        o0 += i * j->ostr[d], s0 += i * j->sstr[d];
    }
    int64_t per = (j->R + j->bands - 1) / j->bands, r0 = band * per,
            R = j->R - r0 < per ? j->R - r0 : per;
    o0 += r0 * j->or_, s0 += r0 * j->sr;
    switch (j->es) {
    case 1:
        copy_plane_uint8_t(j->out, j->src, o0, s0, R, j->C, j->or_, j->sr, j->sc);
        break;
    case 2:
        copy_plane_uint16_t(j->out, j->src, o0, s0, R, j->C, j->or_, j->sr, j->sc);
        break;
    case 4:
        copy_plane_uint32_t(j->out, j->src, o0, s0, R, j->C, j->or_, j->sr, j->sc);
        break;
    default:
        copy_plane_uint64_t(j->out, j->src, o0, s0, R, j->C, j->or_, j->sr, j->sc);
        break;
    }
}

tj_status rt_k_copy_strided(const ir_node *n, const tj_tensor *src, int64_t base,
                            const int64_t *strides, tj_tensor *out) {
    if (out->numel == 0)
        return TJ_OK;
    if (src->dtype != out->dtype)
        return rt_k_unsupported(n, src->dtype);
    size_t es = ir_dtype_size(out->dtype);
    int rank = out->rank;
    if (rank == 0 || out->dtype == TJ_STRING || (es != 1 && es != 2 && es != 4 && es != 8)) {
        rt_k_iter it; /* element by element (strings: each one duplicated) */
        const int64_t *st[1] = {strides};
        rt_k_iter_init(&it, rank, out->dims, 1, st, &base);
        for (int64_t i = 0; i < out->numel; i++, rt_k_iter_next(&it)) {
            tj_status st_ = rt_k_copy_elem(n, out, i, src, it.off[0]);
            if (st_)
                return st_;
        }
        return TJ_OK;
    }
    /* the plane: out's last axis b, and as rows the axis the source is contiguous along (a
     * transpose), else the one before b; the other axes are walked around it */
    int b = rank - 1, a = -1;
    for (int d = 0; d < b && strides[b] != 1; d++)
        if (strides[d] == 1 && out->dims[d] > 1)
            a = d;
    if (a < 0 && rank >= 2)
        a = rank - 2;
    int64_t ostr[TJ_MAX_RANK], odims[TJ_MAX_RANK];
    rt_k_strides(rank, out->dims, ostr);
    memcpy(odims, out->dims, sizeof(int64_t) * (size_t)rank);
    int64_t R = a >= 0 ? odims[a] : 1, C = odims[b];
    int64_t or_ = a >= 0 ? ostr[a] : 0, sr = a >= 0 ? strides[a] : 0, sc = strides[b];
    if (a >= 0)
        odims[a] = 1;
    odims[b] = 1;
    strided_job j = {out->data, src->data, es, rank, {0}, {0}, {0}, R, C, or_, sr, sc, base, 1};
    memcpy(j.odims, odims, sizeof(int64_t) * (size_t)rank);
    memcpy(j.ostr, ostr, sizeof(int64_t) * (size_t)rank);
    memcpy(j.sstr, strides, sizeof(int64_t) * (size_t)rank);
    int64_t outer = out->numel / (R * C), tasks = outer;
    if (out->numel >= STRIDED_SPLIT && rt_pool_size() > 1 && outer < 2 * rt_pool_size()) {
        j.bands = (R + 63) / 64; /* few planes: each split into bands of 64 rows */
        tasks = outer * j.bands;
    }
    if (out->numel >= STRIDED_SPLIT && rt_pool_size() > 1 && tasks > 1)
        rt_parallel_for(tasks, strided_task, &j);
    else
        for (int64_t t = 0; t < tasks; t++)
            strided_task(&j, t);
    return TJ_OK;
}

void rt_k_store_f64(tj_tensor *t, int64_t i, double v) {
    switch (t->dtype) {
    case TJ_F32:
        ((float *)t->data)[i] = (float)v;
        break;
    case TJ_F64:
        ((double *)t->data)[i] = v;
        break;
    case TJ_I32:
        ((int32_t *)t->data)[i] = rt_k_f2i32(v);
        break;
    case TJ_I64:
        ((int64_t *)t->data)[i] = rt_k_f2i64(v);
        break;
    case TJ_BOOL:
        ((uint8_t *)t->data)[i] = v != 0;
        break;
    case TJ_F16:
    case TJ_BF16:
        ((uint16_t *)t->data)[i] = ir_half_from_f64(t->dtype, v);
        break;
    default:
        if (ir_dtype_is_int(t->dtype))
            rt_int_store(t, i, rt_k_f2int(t->dtype, v));
        break;
    }
}
