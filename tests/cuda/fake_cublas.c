/* fake_cublas.c — a stand-in for libcublas.so.13 where there is no GPU (the CUDA backend opens
 * it through TJ_CUBLAS), over the fake driver's device memory (host memory). Its products are
 * loops written from cuBLAS's documented column-major semantics, C = alpha op(A) op(B) + beta C
 * with leading dimensions and batch strides, so the backend's operand swap (row-major products as
 * column-major ones), its leading dimensions and its batching are checked by values. It refuses
 * what cuBLAS refuses (a leading dimension shorter than its rows, negative extents). FAKE_CUBLAS
 * selects a fault: "create_fail" (cublasCreate fails), "exec_fail" (every product fails with
 * CUBLAS_STATUS_EXECUTION_FAILED). fake_cublas_calls counts the products run. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int cublasStatus_t;
enum { OK = 0, NOT_INITIALIZED = 1, INVALID_VALUE = 7, EXECUTION_FAILED = 13, OP_N = 0, OP_T = 1 };

static int calls;

static int mode_is(const char *m) {
    const char *e = getenv("FAKE_CUBLAS");
    return e && !strcmp(e, m);
}

int fake_cublas_calls(void) {
    return calls;
}
cublasStatus_t cublasCreate_v2(void **h) {
    static int token;
    if (mode_is("create_fail"))
        return NOT_INITIALIZED;
    *h = &token;
    return OK;
}
cublasStatus_t cublasGetVersion_v2(void *h, int *v) {
    (void)h;
    *v = 130000;
    return OK;
}

/* One column-major product: C[m x n] = alpha op(A)[m x k] op(B)[k x n] + beta C. */
static cublasStatus_t gemm(int dbl, int ta, int tb, int m, int n, int k, const void *alpha,
                           const void *A, int lda, long long sa, const void *B, int ldb,
                           long long sb, const void *beta, void *C, int ldc, long long sc,
                           int batches) {
    if (m < 0 || n < 0 || k < 0 || batches < 0 || (ta != OP_N && ta != OP_T) ||
        (tb != OP_N && tb != OP_T) || lda < (ta == OP_N ? (m > 1 ? m : 1) : (k > 1 ? k : 1)) ||
        ldb < (tb == OP_N ? (k > 1 ? k : 1) : (n > 1 ? n : 1)) || ldc < (m > 1 ? m : 1))
        return INVALID_VALUE;
    if (mode_is("exec_fail"))
        return EXECUTION_FAILED;
    calls++;
    double al = dbl ? *(const double *)alpha : *(const float *)alpha;
    double be = dbl ? *(const double *)beta : *(const float *)beta;
    for (int bi = 0; bi < batches; bi++)
        for (int j = 0; j < n; j++)
            for (int i = 0; i < m; i++) {
                double acc = 0;
                for (int q = 0; q < k; q++) {
                    long long ai =
                        bi * sa + (ta == OP_N ? (long long)q * lda + i : (long long)i * lda + q);
                    long long bj =
                        bi * sb + (tb == OP_N ? (long long)j * ldb + q : (long long)q * ldb + j);
                    acc += dbl ? ((const double *)A)[ai] * ((const double *)B)[bj]
                               : (double)((const float *)A)[ai] * ((const float *)B)[bj];
                }
                long long ci = bi * sc + (long long)j * ldc + i;
                if (dbl) {
                    double *c = (double *)C + ci;
                    *c = al * acc + (be != 0 ? be * *c : 0);
                } else {
                    float *c = (float *)C + ci;
                    *c = (float)(al * acc + (be != 0 ? be * *c : 0));
                }
            }
    return OK;
}

cublasStatus_t cublasSgemm_v2(void *h, int ta, int tb, int m, int n, int k, const float *alpha,
                              const float *A, int lda, const float *B, int ldb, const float *beta,
                              float *C, int ldc) {
    (void)h;
    return gemm(0, ta, tb, m, n, k, alpha, A, lda, 0, B, ldb, 0, beta, C, ldc, 0, 1);
}
cublasStatus_t cublasDgemm_v2(void *h, int ta, int tb, int m, int n, int k, const double *alpha,
                              const double *A, int lda, const double *B, int ldb,
                              const double *beta, double *C, int ldc) {
    (void)h;
    return gemm(1, ta, tb, m, n, k, alpha, A, lda, 0, B, ldb, 0, beta, C, ldc, 0, 1);
}
cublasStatus_t cublasSgemmStridedBatched(void *h, int ta, int tb, int m, int n, int k,
                                         const float *alpha, const float *A, int lda, long long sa,
                                         const float *B, int ldb, long long sb, const float *beta,
                                         float *C, int ldc, long long sc, int batches) {
    (void)h;
    return gemm(0, ta, tb, m, n, k, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc, sc, batches);
}
cublasStatus_t cublasDgemmStridedBatched(void *h, int ta, int tb, int m, int n, int k,
                                         const double *alpha, const double *A, int lda,
                                         long long sa, const double *B, int ldb, long long sb,
                                         const double *beta, double *C, int ldc, long long sc,
                                         int batches) {
    (void)h;
    return gemm(1, ta, tb, m, n, k, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc, sc, batches);
}

/* ---- cuBLASLt (TJ_CUBLASLT names this library too) ---------------------------------------------
 * cublasLtMatmul with the epilogues the backend asks for: D = epilogue(alpha A B + beta C), all
 * column-major f32, the bias a vector of D's rows added before relu. Descriptors keep what was
 * set; the heuristic offers one algorithm that asks for a workspace (checked at the call). */
enum { LT_WORKSPACE = 512, EPI_DEFAULT = 1, EPI_RELU = 2, EPI_BIAS = 4 };
typedef struct {
    int compute, scale, transa, transb, epilogue;
    const float *bias;
} lt_desc;
typedef struct {
    int type;
    uint64_t rows, cols;
    int64_t ld;
} lt_layout;
typedef struct {
    uint64_t data[8];
} lt_algo;
typedef struct {
    lt_algo algo;
    size_t workspace;
    cublasStatus_t state;
    float waves;
    int reserved[4];
} lt_heuristic;

size_t cublasLtGetVersion(void) {
    return 130000;
}
cublasStatus_t cublasLtCreate(void **h) {
    return cublasCreate_v2(h);
}
cublasStatus_t cublasLtMatmulDescCreate(lt_desc **d, int compute, int scale) {
    if (!(*d = calloc(1, sizeof **d)))
        return NOT_INITIALIZED;
    (*d)->compute = compute, (*d)->scale = scale, (*d)->epilogue = EPI_DEFAULT;
    return OK;
}
cublasStatus_t cublasLtMatmulDescDestroy(lt_desc *d) {
    free(d);
    return OK;
}
cublasStatus_t cublasLtMatmulDescSetAttribute(lt_desc *d, int attr, const void *buf, size_t n) {
    switch (attr) {
    case 3: /* TRANSA */
    case 4: /* TRANSB */
    case 7: /* EPILOGUE */
        if (n != sizeof(int))
            return INVALID_VALUE;
        *(attr == 3 ? &d->transa : attr == 4 ? &d->transb : &d->epilogue) = *(const int *)buf;
        return OK;
    case 8: /* BIAS_POINTER */
        if (n != sizeof(void *))
            return INVALID_VALUE;
        d->bias = *(const float *const *)buf;
        return OK;
    default:
        return INVALID_VALUE;
    }
}
cublasStatus_t cublasLtMatrixLayoutCreate(lt_layout **l, int type, uint64_t rows, uint64_t cols,
                                          int64_t ld) {
    if (ld < (int64_t)rows || !(*l = calloc(1, sizeof **l)))
        return INVALID_VALUE;
    **l = (lt_layout){type, rows, cols, ld};
    return OK;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(lt_layout *l) {
    free(l);
    return OK;
}
cublasStatus_t cublasLtMatmulPreferenceCreate(size_t **p) {
    return (*p = calloc(1, sizeof **p)) ? OK : NOT_INITIALIZED;
}
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(size_t *p, int attr, const void *buf,
                                                    size_t n) {
    if (attr != 1 || n != sizeof(uint64_t)) /* MAX_WORKSPACE_BYTES */
        return INVALID_VALUE;
    *p = (size_t) * (const uint64_t *)buf;
    return OK;
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(size_t *p) {
    free(p);
    return OK;
}
/* What cuBLASLt checks: f32 throughout, A's columns B's rows, D's shape, a known epilogue. */
static cublasStatus_t lt_check(const lt_desc *d, const lt_layout *a, const lt_layout *b,
                               const lt_layout *c, const lt_layout *dd) {
    int epi = d->epilogue;
    if (d->compute != 68 || d->scale != 0 || a->type || b->type || c->type || dd->type ||
        d->transa || d->transb || a->cols != b->rows || dd->rows != a->rows ||
        dd->cols != b->cols || c->rows != dd->rows || c->cols != dd->cols ||
        (epi != EPI_DEFAULT && epi != EPI_RELU && epi != EPI_BIAS && epi != (EPI_RELU | EPI_BIAS)))
        return INVALID_VALUE;
    return OK;
}
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(void *h, lt_desc *d, lt_layout *a, lt_layout *b,
                                              lt_layout *c, lt_layout *dd, size_t *pref, int want,
                                              lt_heuristic *out, int *got) {
    (void)h;
    *got = 0;
    if (lt_check(d, a, b, c, dd) || want < 1)
        return INVALID_VALUE;
    if (*pref < LT_WORKSPACE)
        return OK; /* nothing fits the workspace allowed */
    memset(out, 0, sizeof *out);
    out->algo.data[0] = 42;
    out->workspace = LT_WORKSPACE;
    *got = 1;
    return OK;
}
cublasStatus_t cublasLtMatmul(void *h, lt_desc *d, const float *alpha, const float *A, lt_layout *a,
                              const float *B, lt_layout *b, const float *beta, const float *C,
                              lt_layout *c, float *D, lt_layout *dd, const lt_algo *algo, void *ws,
                              size_t ws_size, void *stream) {
    (void)h, (void)stream;
    cublasStatus_t st = lt_check(d, a, b, c, dd);
    if (st || !algo || algo->data[0] != 42 || !ws || ws_size < LT_WORKSPACE ||
        ((d->epilogue & EPI_BIAS) && !d->bias))
        return st ? st : INVALID_VALUE;
    if (mode_is("exec_fail"))
        return EXECUTION_FAILED;
    calls++;
    memset(ws, 0x5A, LT_WORKSPACE);
    for (uint64_t j = 0; j < dd->cols; j++)
        for (uint64_t i = 0; i < dd->rows; i++) {
            double acc = 0;
            for (uint64_t q = 0; q < a->cols; q++)
                acc += (double)A[q * a->ld + i] * B[j * b->ld + q];
            double v = *alpha * acc + (*beta != 0 ? *beta * C[j * c->ld + i] : 0);
            if (d->epilogue & EPI_BIAS)
                v += d->bias[i];
            if ((d->epilogue & EPI_RELU) && !(v > 0))
                v = v != v ? v : 0; /* relu keeps NaN */
            D[j * dd->ld + i] = (float)v;
        }
    return OK;
}
