/* kernels.h — private to runtime/kernels/: the per-family entry points that rt_ref_kernel
 * (dispatch.c) switches to, and the helpers they share: row-major strides, broadcast strides,
 * a multi-index iterator over up to three operands, element copies that deep-copy strings,
 * saturating float-to-int conversion and error helpers. Nothing here is used outside the folder.
 * Invariant of every kernel: `out` arrives allocated with the node's dtype/dims, zeroed unless
 * the op has IR_F_FILLS (ops.def): its kernel writes every element itself (rt_kernel_output). */
#ifndef TJ_RT_KERNELS_H
#define TJ_RT_KERNELS_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "runtime/runtime.h"

/* ---- families (one file each) ---------------------------------------------------------------- */
tj_status rt_k_unary(const ir_node *n, const tj_tensor *x, tj_tensor *out);    /* unary.c */
tj_status rt_k_cast(const ir_node *n, const tj_tensor *x, tj_tensor *out);     /* cast.c */
tj_status rt_k_binary(const ir_node *n, tj_tensor *const *in, tj_tensor *out); /* binary.c */
tj_status rt_k_where(const ir_node *n, tj_tensor *const *in, tj_tensor *out);  /* binary.c */
tj_status rt_k_reduce(const ir_node *n, const tj_tensor *x, tj_tensor *out);   /* reduce.c */
tj_status rt_k_arg(const ir_node *n, const tj_tensor *x, tj_tensor *out);      /* reduce.c */
tj_status rt_k_softmax(const ir_node *n, const tj_tensor *x, tj_tensor *out);  /* reduce.c */
tj_status rt_k_matmul(const ir_node *n, tj_tensor *const *in, tj_tensor *out); /* matmul.c */
tj_status rt_k_copy(const ir_node *n, const tj_tensor *x, tj_tensor *out);     /* shape.c */
tj_status rt_k_transpose(const ir_node *n, const tj_tensor *x, tj_tensor *out);
tj_status rt_k_broadcast_to(const ir_node *n, const tj_tensor *x, tj_tensor *out);
tj_status rt_k_concat(const ir_node *n, tj_tensor *const *in, tj_tensor *out);
tj_status rt_k_slice(const ir_node *n, const tj_tensor *x, tj_tensor *out);
tj_status rt_k_gather(const ir_node *n, tj_tensor *const *in, tj_tensor *out);
tj_status rt_k_row(const ir_node *n, tj_tensor *const *in, tj_tensor *out); /* update/read_index */
tj_status rt_k_slice_grad(const ir_node *n, const tj_tensor *dy, tj_tensor *out); /* grad.c */
tj_status rt_k_scatter_add(const ir_node *n, tj_tensor *const *in, tj_tensor *out);
tj_status rt_k_conv2d(const ir_node *n, tj_tensor *const *in, tj_tensor *out);  /* conv.c */
tj_status rt_k_pool2d(const ir_node *n, tj_tensor *const *in, tj_tensor *out);  /* pool.c */
tj_status rt_k_one_hot(const ir_node *n, const tj_tensor *idx, tj_tensor *out); /* nn.c */
tj_status rt_k_sparse_xent(const ir_node *n, tj_tensor *const *in, tj_tensor *out);
tj_status rt_k_eye(const ir_node *n, tj_tensor *out); /* source.c */
tj_status rt_k_range(const ir_node *n, tj_tensor *out);
tj_status rt_k_random(const ir_node *n, tj_tensor *out);

/* ---- errors ---------------------------------------------------------------------------------- */
static inline const char *rt_k_name(const ir_node *n) {
    return n->op < IR_N_OPS ? ir_ops[n->op].name : "?";
}
/* "<op>: not supported for <dtype>" (TJ_ERR_UNSUPPORTED). */
tj_status rt_k_unsupported(const ir_node *n, int dtype);
/* Checks that `out` is usable for the kernel: concrete, data present when numel > 0. */
tj_status rt_k_check_tensor(const ir_node *n, const char *what, const tj_tensor *t);

/* ---- strides and iteration ------------------------------------------------------------------- */
/* Row-major element strides of a contiguous tensor. */
void rt_k_strides(int rank, const int64_t *dims, int64_t *strides);
/* Element strides that read `rank_in`/`dims_in` broadcast (NumPy rules, aligned on the right) to
 * an output of `rank`/`dims`: 0 along broadcast axes. */
void rt_k_bcast_strides(int rank, const int64_t *dims, int rank_in, const int64_t *dims_in,
                        int64_t *strides);

#define RT_K_MAX_OPS 3
/* Walks a row-major multi-index over `dims`, keeping one element offset per operand. */
typedef struct rt_k_iter {
    int rank, n_ops;
    int64_t dims[TJ_MAX_RANK];
    int64_t st[RT_K_MAX_OPS][TJ_MAX_RANK];
    int64_t idx[TJ_MAX_RANK];
    int64_t off[RT_K_MAX_OPS];
} rt_k_iter;

/* Rewrites dims and the n_ops operands' strides st[k] (of an output walked in row-major order)
 * with the axes of extent 1 dropped and adjacent axes that every operand walks as one merged:
 * same-shape operands become one axis, a bias over the last axis two. Returns the new rank (at
 * least 1: one element is dims {1} with strides 0). */
int rt_k_coalesce(int rank, int64_t *dims, int n_ops, int64_t (*st)[TJ_MAX_RANK]);

/* strides[k] points at rank entries (or NULL for a contiguous operand of shape dims); base[k]
 * (or NULL for all zero) are the starting offsets. */
void rt_k_iter_init(rt_k_iter *it, int rank, const int64_t *dims, int n_ops,
                    const int64_t *const *strides, const int64_t *base);

static inline void rt_k_iter_next(rt_k_iter *it) {
    for (int d = it->rank - 1; d >= 0; d--) {
        for (int k = 0; k < it->n_ops; k++)
            it->off[k] += it->st[k][d];
        if (++it->idx[d] < it->dims[d])
            return;
        for (int k = 0; k < it->n_ops; k++)
            it->off[k] -= it->st[k][d] * it->dims[d];
        it->idx[d] = 0;
    }
}

/* ---- elements -------------------------------------------------------------------------------- */
/* Sets out's string element i to a malloc'd copy of s[0..len). TJ_ERR_OOM on failure. */
tj_status rt_k_set_str(const ir_node *n, tj_tensor *out, int64_t i, const char *s, size_t len);
/* Copies element `si` of src into element `di` of dst (same dtype; strings deep-copied). */
tj_status rt_k_copy_elem(const ir_node *n, tj_tensor *dst, int64_t di, const tj_tensor *src,
                         int64_t si);
/* The strided view a TRANSPOSE, BROADCAST_TO or SLICE node takes of an input of dims xdims for
 * an output of dims odims: out[idx] = x[base + sum idx[d] * strides[d]] (elements; strides per
 * output axis). Checked as the kernels check; TJ_ERR_UNSUPPORTED for other ops. */
tj_status rt_k_view(const ir_node *n, int xrank, const int64_t *xdims, int orank,
                    const int64_t *odims, int64_t *base, int64_t *strides);
/* Fills every element of out (row-major) from src at offset base + sum idx[d] * strides[d]. */
tj_status rt_k_copy_strided(const ir_node *n, const tj_tensor *src, int64_t base,
                            const int64_t *strides, tj_tensor *out);

/* Element j of an int32 or int64 index tensor. */
static inline int64_t rt_k_index_at(const tj_tensor *idx, int64_t j) {
    return idx->dtype == TJ_I32 ? ((const int32_t *)idx->data)[j] : ((const int64_t *)idx->data)[j];
}
/* A tensor viewed as [outer, dims[ax], inner] around axis ax. */
static inline void rt_k_split_axis(int rank, const int64_t *dims, int64_t ax, int64_t *outer,
                                   int64_t *inner) {
    *outer = *inner = 1;
    for (int d = 0; d < ax; d++)
        *outer *= dims[d];
    for (int d = (int)ax + 1; d < rank; d++)
        *inner *= dims[d];
}

/* Float to integer: truncation toward zero, saturating at the type's range, NaN -> 0. */
static inline int64_t rt_k_f2i64(double v) {
    if (v != v)
        return 0;
    if (v >= 9223372036854775808.0)
        return INT64_MAX;
    if (v <= -9223372036854775808.0)
        return INT64_MIN;
    return (int64_t)v;
}
static inline int32_t rt_k_f2i32(double v) {
    if (v != v)
        return 0;
    if (v >= 2147483647.0)
        return INT32_MAX;
    if (v <= -2147483648.0)
        return INT32_MIN;
    return (int32_t)v;
}

/* Stores a double into element i of a numeric or bool tensor (saturating for ints). */
void rt_k_store_f64(tj_tensor *t, int64_t i, double v);

/* The integer widths beside int32/int64 as X(dtype, suffix): kernels written per C type
 * generate a function per suffix and dispatch with this list. */
#define RT_K_NARROW_INTS(X)                                                                        \
    X(TJ_I8, i8) X(TJ_I16, i16) X(TJ_U8, u8) X(TJ_U16, u16) X(TJ_U32, u32) X(TJ_U64, u64)

/* ---- integers of every width: rt_int_load/wrap/store (runtime.h) ----------------------------
 * The kernels written per C type cover int32/int64; the other widths go through those helpers:
 * an element widened to 64 bits, computed on, and wrapped back. */
/* Float to integer dtype dt: truncation toward zero, saturating at dt's range, NaN -> 0 (the
 * result as rt_int_load reads it). */
static inline int64_t rt_k_f2int(int dt, double v) {
    if (v != v)
        return 0;
    switch (dt) {
    case TJ_I8:
        return v >= 127.0 ? 127 : v <= -128.0 ? -128 : (int64_t)v;
    case TJ_U8:
        return v >= 255.0 ? 255 : v <= 0 ? 0 : (int64_t)v;
    case TJ_I16:
        return v >= 32767.0 ? 32767 : v <= -32768.0 ? -32768 : (int64_t)v;
    case TJ_U16:
        return v >= 65535.0 ? 65535 : v <= 0 ? 0 : (int64_t)v;
    case TJ_I32:
        return rt_k_f2i32(v);
    case TJ_U32:
        return v >= 4294967295.0 ? 4294967295 : v <= 0 ? 0 : (int64_t)v;
    case TJ_U64:
        return v >= 18446744073709551616.0 ? -1 : v <= 0 ? 0 : (int64_t)(uint64_t)v;
    default:
        return rt_k_f2i64(v);
    }
}
/* An integer element as a double (uint64 read unsigned). */
static inline double rt_k_int2f(int dt, int64_t v) {
    return dt == TJ_U64 ? (double)(uint64_t)v : (double)v;
}

#endif /* TJ_RT_KERNELS_H */
