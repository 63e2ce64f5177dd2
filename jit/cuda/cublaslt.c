/* cublaslt.c — a product and the bias add after it as one cuBLASLt call, its epilogue
 * (libcublasLt.so.13, .12, or TJ_CUBLASLT naming another; TJ_CUBLASLT=0: never). The backend
 * (backend.c) folds `x @ w + b`, b a row of the product's columns, into the product's step when
 * the product is 2-D f32 and read by nothing else: the bias is added while the product's tile is
 * in registers instead of by a second pass over the output. Not the relu epilogue: cuBLASLt's
 * relu is a max that turns NaN into 0, and ours keeps NaN (runtime/kernels/unary.c), so a relu
 * after the bias stays a kernel of its own. Row-major
 * C = A x B is column-major C^T = B^T x A^T, so the operands are swapped, as for cuBLAS; the bias
 * runs along the column-major D's rows, which are our columns: cuBLASLt's bias vector, as is.
 * Full f32 (CUBLAS_COMPUTE_32F: no TF32), the algorithm chosen once per product from cuBLASLt's
 * heuristics (its workspace, at most 32 MiB, from the caching allocator per call). Calls go to
 * the default stream, serialized per GPU (the bias pointer is the descriptor's). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jit/cuda/cuda.h"
#include "runtime/cuda.h"

typedef int cublasStatus_t;
typedef struct cublasLtContext *lt_handle;
typedef void *lt_desc, *lt_layout, *lt_pref;
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
enum {
    CUBLAS_COMPUTE_32F = 68,
    CUDA_R_32F = 0,
    DESC_EPILOGUE = 7,
    DESC_BIAS_POINTER = 8,
    PREF_MAX_WORKSPACE_BYTES = 1,
    MAX_GPUS = 16,
};
static const size_t max_workspace = (size_t)32 << 20;

struct jit_cublaslt {
    lt_handle h;
    rt_device *dev;
    pthread_mutex_t mu;
};

struct jit_lt_mm {
    const jit_cublaslt *lt;
    lt_desc op;
    lt_layout a, b, d; /* cuBLASLt's A (our B), B (our A), D (our C) */
    lt_algo algo;
    size_t workspace;
};

static struct {
    pthread_once_t once;
    void *lib;
    const char *why;
    char why_buf[256];
    size_t version;
    size_t (*GetVersion)(void);
    cublasStatus_t (*Create)(lt_handle *);
    cublasStatus_t (*DescCreate)(lt_desc *, int, int);
    cublasStatus_t (*DescSet)(lt_desc, int, const void *, size_t);
    cublasStatus_t (*DescDestroy)(lt_desc);
    cublasStatus_t (*LayoutCreate)(lt_layout *, int, uint64_t, uint64_t, int64_t);
    cublasStatus_t (*LayoutDestroy)(lt_layout);
    cublasStatus_t (*PrefCreate)(lt_pref *);
    cublasStatus_t (*PrefSet)(lt_pref, int, const void *, size_t);
    cublasStatus_t (*PrefDestroy)(lt_pref);
    cublasStatus_t (*Heuristic)(lt_handle, lt_desc, lt_layout, lt_layout, lt_layout, lt_layout,
                                lt_pref, int, lt_heuristic *, int *);
    cublasStatus_t (*Matmul)(lt_handle, lt_desc, const void *, const void *, lt_layout,
                             const void *, lt_layout, const void *, const void *, lt_layout, void *,
                             lt_layout, const lt_algo *, void *, size_t, void *);
    pthread_mutex_t mu;
    jit_cublaslt *per_gpu[MAX_GPUS];
    int tried[MAX_GPUS];
} L = {.once = PTHREAD_ONCE_INIT, .mu = PTHREAD_MUTEX_INITIALIZER};

static void load(void) {
    const char *env = getenv("TJ_CUBLASLT");
    if (env && !strcmp(env, "0")) {
        L.why = "TJ_CUBLASLT=0";
        return;
    }
    const char *names[] = {env && *env ? env : "libcublasLt.so.13", "libcublasLt.so.12",
                           "libcublasLt.so"};
    for (size_t i = 0; i < 3 && !L.lib; i++)
        L.lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!L.lib) {
        snprintf(L.why_buf, sizeof L.why_buf, "cuBLASLt not found (%s)", names[0]);
        L.why = L.why_buf;
        return;
    }
    const rt_cuda_sym syms[] = {
        {(void **)&L.GetVersion, "cublasLtGetVersion"},
        {(void **)&L.Create, "cublasLtCreate"},
        {(void **)&L.DescCreate, "cublasLtMatmulDescCreate"},
        {(void **)&L.DescSet, "cublasLtMatmulDescSetAttribute"},
        {(void **)&L.DescDestroy, "cublasLtMatmulDescDestroy"},
        {(void **)&L.LayoutCreate, "cublasLtMatrixLayoutCreate"},
        {(void **)&L.LayoutDestroy, "cublasLtMatrixLayoutDestroy"},
        {(void **)&L.PrefCreate, "cublasLtMatmulPreferenceCreate"},
        {(void **)&L.PrefSet, "cublasLtMatmulPreferenceSetAttribute"},
        {(void **)&L.PrefDestroy, "cublasLtMatmulPreferenceDestroy"},
        {(void **)&L.Heuristic, "cublasLtMatmulAlgoGetHeuristic"},
        {(void **)&L.Matmul, "cublasLtMatmul"},
    };
    const char *missing = rt_cuda_resolve(L.lib, syms, sizeof syms / sizeof *syms);
    if (missing) {
        snprintf(L.why_buf, sizeof L.why_buf, "cuBLASLt lacks %s", missing);
        L.why = L.why_buf;
        return;
    }
    L.version = L.GetVersion();
}

const jit_cublaslt *jit_cublaslt_get(rt_device *dev, int ordinal, const char **why) {
    pthread_once(&L.once, load);
    *why = L.why;
    if (L.why || ordinal < 0 || ordinal >= MAX_GPUS)
        return NULL;
    pthread_mutex_lock(&L.mu);
    if (!L.tried[ordinal]) {
        L.tried[ordinal] = 1;
        jit_cublaslt *c = calloc(1, sizeof *c);
        tj_status st = rt_cuda_use(dev, "cuBLASLt");
        if (c && !st && L.Create(&c->h) == 0) {
            c->dev = dev;
            pthread_mutex_init(&c->mu, NULL);
            L.per_gpu[ordinal] = c;
        } else {
            free(c);
            ir_clear_error();
        }
    }
    jit_cublaslt *c = L.per_gpu[ordinal];
    pthread_mutex_unlock(&L.mu);
    if (!c)
        *why = "cublasLtCreate failed (no usable GPU for cuBLASLt)";
    return c;
}

size_t jit_cublaslt_version(void) {
    pthread_once(&L.once, load);
    return L.why ? 0 : L.version;
}

void jit_lt_mm_free(jit_lt_mm *p) {
    if (!p)
        return;
    if (p->op)
        L.DescDestroy(p->op);
    if (p->a)
        L.LayoutDestroy(p->a);
    if (p->b)
        L.LayoutDestroy(p->b);
    if (p->d)
        L.LayoutDestroy(p->d);
    free(p);
}

tj_status jit_lt_mm_new(const jit_cublaslt *lt, const rt_mm *mm, jit_lt_mm **out) {
    *out = NULL;
    if (!lt || mm->dt != TJ_F32 || mm->batches != 1 || mm->m < 1 || mm->n < 1 || mm->k < 1 ||
        mm->m > INT32_MAX || mm->n > INT32_MAX || mm->k > INT32_MAX)
        return TJ_ERR_UNSUPPORTED;
    jit_lt_mm *p = calloc(1, sizeof *p);
    if (!p)
        return ir_errorf(TJ_ERR_OOM, "cuBLASLt: out of memory");
    p->lt = lt;
    int epi = 4; /* CUBLASLT_EPILOGUE_BIAS */
    uint64_t m = (uint64_t)mm->m, n = (uint64_t)mm->n, k = (uint64_t)mm->k;
    lt_pref pref = NULL;
    cublasStatus_t r = L.DescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    r = r ? r : L.DescSet(p->op, DESC_EPILOGUE, &epi, sizeof epi);
    r = r ? r : L.LayoutCreate(&p->a, CUDA_R_32F, n, k, (int64_t)n);
    r = r ? r : L.LayoutCreate(&p->b, CUDA_R_32F, k, m, (int64_t)k);
    r = r ? r : L.LayoutCreate(&p->d, CUDA_R_32F, n, m, (int64_t)n);
    r = r ? r : L.PrefCreate(&pref);
    r = r ? r : L.PrefSet(pref, PREF_MAX_WORKSPACE_BYTES, &max_workspace, sizeof max_workspace);
    lt_heuristic best;
    int got = 0;
    pthread_mutex_lock(&((jit_cublaslt *)lt)->mu);
    tj_status st = rt_cuda_use(lt->dev, "cuBLASLt");
    if (!st && !r)
        r = L.Heuristic(lt->h, p->op, p->a, p->b, p->d, p->d, pref, 1, &best, &got);
    pthread_mutex_unlock(&((jit_cublaslt *)lt)->mu);
    if (pref)
        L.PrefDestroy(pref);
    if (st || r || got < 1 || best.state != 0 || best.workspace > max_workspace) {
        jit_lt_mm_free(p); /* no algorithm: the product and its epilogue stay apart */
        if (st)
            ir_clear_error();
        return TJ_ERR_UNSUPPORTED;
    }
    p->algo = best.algo;
    p->workspace = best.workspace;
    *out = p;
    return TJ_OK;
}

size_t jit_lt_mm_workspace(const jit_lt_mm *p) {
    return p->workspace;
}

tj_status jit_lt_mm_run(const jit_lt_mm *p, const void *A, const void *B, const void *bias, void *C,
                        void *ws, const char *kernel, const char *function) {
    const float one = 1, zero = 0;
    jit_cublaslt *lt = (jit_cublaslt *)p->lt;
    pthread_mutex_lock(&lt->mu);
    tj_status st = rt_cuda_use(lt->dev, kernel);
    cublasStatus_t r = st ? 0 : L.DescSet(p->op, DESC_BIAS_POINTER, &bias, sizeof bias);
    if (!st && !r)
        r = L.Matmul(lt->h, p->op, &one, B, p->a, A, p->b, &zero, C, p->d, C, p->d, &p->algo, ws,
                     p->workspace, NULL);
    pthread_mutex_unlock(&lt->mu);
    return st  ? st
           : r ? ir_errorf(TJ_ERR_RUNTIME,
                           "cuBLASLt: product and bias %s of function '%s' failed: status %d",
                           kernel, function && *function ? function : "?", r)
               : TJ_OK;
}
