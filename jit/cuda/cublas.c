/* cublas.c — matrix products on the GPU through cuBLAS, opened with dlopen (libcublas.so.13, .12,
 * or TJ_CUBLAS naming another; TJ_CUBLAS=0: never, the generated tiled kernel instead). Row-major
 * C = A x B is column-major C^T = B^T x A^T, so cuBLAS is called with the operands swapped and
 * nothing transposed. Batches whose operands are evenly spaced (or one of them shared) are one
 * strided-batched call; other broadcasts, a call per batch. Calls go to the default stream, after
 * the kernels queued before them. Full f32 arithmetic (cuBLAS's default math mode: no TF32), as
 * the reference kernels compute. One handle per GPU, made on first use, its calls serialized. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jit/cuda/cuda.h"
#include "runtime/cuda.h"

typedef int cublasStatus_t;
typedef struct cublasContext *cublasHandle_t;
enum { CUBLAS_OP_N = 0, MAX_GPUS = 16 };

struct jit_cublas {
    cublasHandle_t h;
    int version;
    pthread_mutex_t mu;
};

static struct {
    pthread_once_t once;
    void *lib;
    const char *why;
    char why_buf[256];
    cublasStatus_t (*Create)(cublasHandle_t *);
    cublasStatus_t (*GetVersion)(cublasHandle_t, int *);
    cublasStatus_t (*Sgemm)(cublasHandle_t, int, int, int, int, int, const float *, const float *,
                            int, const float *, int, const float *, float *, int);
    cublasStatus_t (*Dgemm)(cublasHandle_t, int, int, int, int, int, const double *, const double *,
                            int, const double *, int, const double *, double *, int);
    cublasStatus_t (*SgemmB)(cublasHandle_t, int, int, int, int, int, const float *, const float *,
                             int, long long, const float *, int, long long, const float *, float *,
                             int, long long, int);
    cublasStatus_t (*DgemmB)(cublasHandle_t, int, int, int, int, int, const double *,
                             const double *, int, long long, const double *, int, long long,
                             const double *, double *, int, long long, int);
    pthread_mutex_t mu;
    jit_cublas *per_gpu[MAX_GPUS];
    int tried[MAX_GPUS];
} B = {.once = PTHREAD_ONCE_INIT, .mu = PTHREAD_MUTEX_INITIALIZER};

static void load(void) {
    const char *env = getenv("TJ_CUBLAS");
    if (env && !strcmp(env, "0")) {
        B.why = "TJ_CUBLAS=0";
        return;
    }
    const char *names[] = {env && *env ? env : "libcublas.so.13", "libcublas.so.12",
                           "libcublas.so"};
    for (size_t i = 0; i < 3 && !B.lib; i++)
        B.lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!B.lib) {
        snprintf(B.why_buf, sizeof B.why_buf, "cuBLAS not found (%s)", names[0]);
        B.why = B.why_buf;
        return;
    }
    const rt_cuda_sym syms[] = {
        {(void **)&B.Create, "cublasCreate_v2"},
        {(void **)&B.GetVersion, "cublasGetVersion_v2"},
        {(void **)&B.Sgemm, "cublasSgemm_v2"},
        {(void **)&B.Dgemm, "cublasDgemm_v2"},
        {(void **)&B.SgemmB, "cublasSgemmStridedBatched"},
        {(void **)&B.DgemmB, "cublasDgemmStridedBatched"},
    };
    const char *missing = rt_cuda_resolve(B.lib, syms, sizeof syms / sizeof *syms);
    if (missing) {
        snprintf(B.why_buf, sizeof B.why_buf, "cuBLAS lacks %s", missing);
        B.why = B.why_buf;
    }
}

const jit_cublas *jit_cublas_get(rt_device *dev, int ordinal, const char **why) {
    pthread_once(&B.once, load);
    *why = B.why;
    if (B.why || ordinal < 0 || ordinal >= MAX_GPUS)
        return NULL;
    pthread_mutex_lock(&B.mu);
    if (!B.tried[ordinal]) {
        B.tried[ordinal] = 1;
        jit_cublas *c = calloc(1, sizeof *c);
        /* the handle is made on the context current on this thread: the device's */
        tj_status st = rt_cuda_use(dev, "cuBLAS");
        if (c && !st && B.Create(&c->h) == 0) {
            B.GetVersion(c->h, &c->version);
            pthread_mutex_init(&c->mu, NULL);
            B.per_gpu[ordinal] = c;
        } else {
            free(c);
            ir_clear_error();
        }
    }
    jit_cublas *c = B.per_gpu[ordinal];
    pthread_mutex_unlock(&B.mu);
    if (!c)
        *why = "cublasCreate failed (no usable GPU for cuBLAS)";
    return c;
}

int jit_cublas_version(const jit_cublas *c) {
    return c ? c->version : 0;
}

/* Even spacing of batch operands: offsets bi * step for every batch, or the same one. */
static bool even(const rt_mm *mm, int which, int64_t *step) {
    int64_t a0, b0, a1, b1;
    rt_mm_batch(mm, 0, &a0, &b0);
    if (mm->batches < 2) {
        *step = 0;
        return true;
    }
    rt_mm_batch(mm, 1, &a1, &b1);
    int64_t s = which ? b1 - b0 : a1 - a0;
    for (int64_t bi = 2; bi < mm->batches; bi++) {
        rt_mm_batch(mm, bi, &a1, &b1);
        if ((which ? b1 - b0 : a1 - a0) != bi * s)
            return false;
    }
    *step = s;
    return true;
}

tj_status jit_cublas_gemm(const jit_cublas *c, const rt_mm *mm, const void *A, const void *Bm,
                          void *C, const char *kernel, const char *function) {
    if (mm->m > INT32_MAX || mm->n > INT32_MAX || mm->k > INT32_MAX)
        return ir_errorf(TJ_ERR_UNSUPPORTED, "cuBLAS: %s: a product too large for 32-bit extents",
                         kernel);
    int m = (int)mm->m, n = (int)mm->n, k = (int)mm->k;
    size_t es = mm->dt == TJ_F64 ? 8 : 4;
    int64_t sa, sb;
    cublasStatus_t r = 0;
    const float one = 1, zero = 0;
    const double done = 1, dzero = 0;
    jit_cublas *cc = (jit_cublas *)c;
    pthread_mutex_lock(&cc->mu);
    if (even(mm, 0, &sa) && even(mm, 1, &sb) && mm->batches <= INT32_MAX) {
        long long sA = sa / (int64_t)es, sB = sb / (int64_t)es, sC = (long long)m * n;
        r = mm->dt == TJ_F64 ? B.DgemmB(c->h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &done, Bm, n, sB,
                                        A, k, sA, &dzero, C, n, sC, (int)mm->batches)
                             : B.SgemmB(c->h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, Bm, n, sB, A,
                                        k, sA, &zero, C, n, sC, (int)mm->batches);
    } else {
        for (int64_t bi = 0; bi < mm->batches && !r; bi++) {
            int64_t ao, bo;
            rt_mm_batch(mm, bi, &ao, &bo);
            const char *a = (const char *)A + ao, *b = (const char *)Bm + bo;
            char *o = (char *)C + (size_t)bi * (size_t)m * (size_t)n * es;
            r = mm->dt == TJ_F64
                    ? B.Dgemm(c->h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &done, (const double *)b, n,
                              (const double *)a, k, &dzero, (double *)o, n)
                    : B.Sgemm(c->h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, (const float *)b, n,
                              (const float *)a, k, &zero, (float *)o, n);
        }
    }
    pthread_mutex_unlock(&cc->mu);
    return r == 0 ? TJ_OK
                  : ir_errorf(TJ_ERR_RUNTIME,
                              "cuBLAS: product %s of function '%s' failed: status %d (%dx%dx%d)",
                              kernel, function && *function ? function : "?", r, m, k, n);
}
