/* matmul.c — MATMUL [..., m, k] x [..., k, n] with NumPy-broadcast batch dims (a rank-1 operand
 * is a row / column vector, as NumPy; ir_infer decides whether that is allowed). Large float
 * products call OpenBLAS (blas_matmul). Otherwise loop order i-k-j so the innermost loop streams
 * rows of b and out. Floats accumulate in their own dtype
 * (as NumPy and TensorFlow), one multiply and one add per step in k order (no FMA): the contract
 * the generated kernels keep bit for bit under exact math. Integers wrap (unsigned arithmetic). */
#include <stdlib.h>

#include "runtime/kernels/gemm.h"
#include "runtime/kernels/kernels.h"

typedef struct mm_shape {
    int64_t m, k, n;
    int rank; /* batch rank of the output */
    int64_t dims[TJ_MAX_RANK];
    int64_t sa[TJ_MAX_RANK], sb[TJ_MAX_RANK]; /* batch strides, in matrices */
    int64_t batches;
} mm_shape;

static tj_status mm_plan(const ir_node *n, const tj_tensor *a, const tj_tensor *b,
                         const tj_tensor *out, mm_shape *s) {
    char da[128], db[128], dc[128];
    if (a->rank < 1 || b->rank < 1)
        return ir_errorf(TJ_ERR_SHAPE, "matmul: operands must have rank >= 1: %s x %s",
                         ir_fmt_dims(da, sizeof da, a->rank, a->dims),
                         ir_fmt_dims(db, sizeof db, b->rank, b->dims));
    s->m = a->rank >= 2 ? a->dims[a->rank - 2] : 1;
    s->k = a->dims[a->rank - 1];
    int64_t kb = b->rank >= 2 ? b->dims[b->rank - 2] : b->dims[0];
    s->n = b->rank >= 2 ? b->dims[b->rank - 1] : 1;
    if (kb != s->k)
        return ir_errorf(TJ_ERR_SHAPE, "matmul: inner dimensions differ: %s x %s",
                         ir_fmt_dims(da, sizeof da, a->rank, a->dims),
                         ir_fmt_dims(db, sizeof db, b->rank, b->dims));
    int ra = a->rank >= 2 ? a->rank - 2 : 0, rb = b->rank >= 2 ? b->rank - 2 : 0;
    tj_status st = ir_broadcast("matmul", ra, a->dims, rb, b->dims, &s->rank, s->dims);
    if (st)
        return st;
    rt_k_bcast_strides(s->rank, s->dims, ra, a->dims, s->sa);
    rt_k_bcast_strides(s->rank, s->dims, rb, b->dims, s->sb);
    s->batches = 1;
    for (int d = 0; d < s->rank; d++)
        s->batches *= s->dims[d];
    if (s->batches * s->m * s->n != out->numel)
        return ir_errorf(TJ_ERR_INVALID, "matmul: output %s does not fit %s x %s",
                         ir_fmt_dims(da, sizeof da, out->rank, out->dims),
                         ir_fmt_dims(db, sizeof db, a->rank, a->dims),
                         ir_fmt_dims(dc, sizeof dc, b->rank, b->dims));
    return TJ_OK;
}

/* One batch: O[m,n] = A[m,k] B[k,n]. ACC is the accumulator type, row[] a scratch of n. */
#define MM_BODY(T, ACC, MUL_ADD, STORE)                                                            \
    do {                                                                                           \
        for (int64_t i = 0; i < m; i++) {                                                          \
            for (int64_t j = 0; j < nn; j++)                                                       \
                row[j] = 0;                                                                        \
            for (int64_t p = 0; p < k; p++) {                                                      \
                ACC av = (ACC)A[i * k + p];                                                        \
                const T *brow = B + p * nn;                                                        \
                for (int64_t j = 0; j < nn; j++)                                                   \
                    row[j] = MUL_ADD(row[j], av, brow[j]);                                         \
            }                                                                                      \
            for (int64_t j = 0; j < nn; j++)                                                       \
                O[i * nn + j] = STORE(row[j]);                                                     \
        }                                                                                          \
    } while (0)

/* Large float products (any dim above 64, the compiled plan's rule: jit_cpu_mm_small) go where
 * the compiled code sends them, unless exact math asks for this file's summation order: f32 to
 * the AVX-512 kernels of gemm_packed.c (on B as it lies; no OpenBLAS to start on an interpreted
 * first call), f64 and CPUs without AVX-512 to OpenBLAS; so eager, interpreted and folded products
 * cost what compiled ones do. 1 when done. */
enum { MM_ROW_MAJOR = 101, MM_NO_TRANS = 111 };
static int blas_matmul(const tj_tensor *a, const tj_tensor *b, tj_tensor *out, const mm_shape *s) {
    int dt = a->dtype;
    if ((dt != TJ_F32 && dt != TJ_F64) || (s->m <= 64 && s->k <= 64 && s->n <= 64) || s->k == 0 ||
        rt_config_get()->exact_math || s->m > INT32_MAX || s->n > INT32_MAX || s->k > INT32_MAX)
        return 0;
    int own = dt == TJ_F32 && rt_gemm_f32_takes(s->m, s->n, s->k);
    const rt_blas *bl = own ? NULL : rt_blas_get();
    if (!own && !bl)
        return 0;
    int m = (int)s->m, n = (int)s->n, k = (int)s->k;
    const int64_t *strides[2] = {s->sa, s->sb};
    if (own) {
        rt_k_iter it;
        rt_k_iter_init(&it, s->rank, s->dims, 2, strides, NULL);
        for (int64_t bi = 0; bi < s->batches; bi++, rt_k_iter_next(&it))
            rt_gemm_f32(s->m, s->n, s->k, (const float *)a->data + it.off[0] * s->m * s->k, s->k, 0,
                        (const float *)b->data + it.off[1] * s->k * s->n, s->n,
                        (float *)out->data + bi * s->m * s->n, s->n, NULL);
        return 1;
    }
    rt_k_iter it;
    rt_k_iter_init(&it, s->rank, s->dims, 2, strides, NULL);
    for (int64_t bi = 0; bi < s->batches; bi++, rt_k_iter_next(&it)) {
        int64_t oa = it.off[0] * s->m * s->k, ob = it.off[1] * s->k * s->n, oo = bi * s->m * s->n;
        if (dt == TJ_F32)
            bl->sgemm(MM_ROW_MAJOR, MM_NO_TRANS, MM_NO_TRANS, m, n, k, 1.0f,
                      (const float *)a->data + oa, k, (const float *)b->data + ob, n, 0.0f,
                      (float *)out->data + oo, n);
        else
            bl->dgemm(MM_ROW_MAJOR, MM_NO_TRANS, MM_NO_TRANS, m, n, k, 1.0,
                      (const double *)a->data + oa, k, (const double *)b->data + ob, n, 0.0,
                      (double *)out->data + oo, n);
    }
    return 1;
}

#define FMA_F(acc, x, y) ((acc) + (x) * (y))
#define FMA_U(acc, x, y) ((acc) + (x) * (uint64_t)(int64_t)(y))
#define STORE_F32(v) ((float)(v))
#define STORE_F64(v) (v)
#define STORE_I32(v) ((int32_t)(uint32_t)(v))
#define STORE_I64(v) ((int64_t)(v))

tj_status rt_k_matmul(const ir_node *n, tj_tensor *const *in, tj_tensor *out) {
    const tj_tensor *a = in[0], *b = in[1];
    int dt = a->dtype;
    if (b->dtype != dt || out->dtype != dt || !ir_dtype_is_numeric(dt))
        return ir_errorf(TJ_ERR_UNSUPPORTED, "matmul: not supported for dtypes %s x %s -> %s",
                         ir_dtype_name(dt), ir_dtype_name(b->dtype), ir_dtype_name(out->dtype));
    mm_shape s;
    tj_status st = mm_plan(n, a, b, out, &s);
    if (st)
        return st;
    if (out->numel == 0)
        return TJ_OK;
    int64_t m = s.m, k = s.k, nn = s.n;
    if (blas_matmul(a, b, out, &s))
        return TJ_OK;
    void *scratch = malloc((size_t)(nn ? nn : 1) * 8);
    if (!scratch)
        return ir_errorf(TJ_ERR_OOM, "matmul: out of memory");
    const int64_t *strides[2] = {s.sa, s.sb};
    rt_k_iter it;
    rt_k_iter_init(&it, s.rank, s.dims, 2, strides, NULL);
    for (int64_t bi = 0; bi < s.batches; bi++, rt_k_iter_next(&it)) {
        int64_t oa = it.off[0] * m * k, ob = it.off[1] * k * nn, oo = bi * m * nn;
        switch (dt) {
        case TJ_F32: {
            const float *A = (const float *)a->data + oa, *B = (const float *)b->data + ob;
            float *O = (float *)out->data + oo;
            float *row = scratch;
            MM_BODY(float, float, FMA_F, STORE_F32);
            break;
        }
        case TJ_F64: {
            const double *A = (const double *)a->data + oa, *B = (const double *)b->data + ob;
            double *O = (double *)out->data + oo;
            double *row = scratch;
            MM_BODY(double, double, FMA_F, STORE_F64);
            break;
        }
        case TJ_I32: {
            const int32_t *A = (const int32_t *)a->data + oa, *B = (const int32_t *)b->data + ob;
            int32_t *O = (int32_t *)out->data + oo;
            uint64_t *row = scratch;
            MM_BODY(int32_t, uint64_t, FMA_U, STORE_I32);
            break;
        }
        case TJ_I64: {
            const int64_t *A = (const int64_t *)a->data + oa, *B = (const int64_t *)b->data + ob;
            int64_t *O = (int64_t *)out->data + oo;
            uint64_t *row = scratch;
            MM_BODY(int64_t, uint64_t, FMA_U, STORE_I64);
            break;
        }
        default: /* the other integer widths: widened, summed in uint64, wrapped on the store */
            for (int64_t i = 0; i < m; i++)
                for (int64_t j = 0; j < nn; j++) {
                    uint64_t acc = 0;
                    for (int64_t kk = 0; kk < k; kk++)
                        acc += (uint64_t)rt_int_load(a, oa + i * k + kk) *
                               (uint64_t)rt_int_load(b, ob + kk * nn + j);
                    rt_int_store(out, oo + i * nn + j, (int64_t)acc);
                }
            break;
        }
    }
    free(scratch);
    return TJ_OK;
}
