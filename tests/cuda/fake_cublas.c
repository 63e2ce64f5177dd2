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
