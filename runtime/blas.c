/* blas.c — OpenBLAS as an external kernel (the way XLA calls Eigen), of the CPU backend's
 * products and of the eager convolutions: opened
 * with dlopen("libopenblas.so.0") on first use, so tracejit builds and runs where it is absent
 * (large float products are then generated like the small ones). OpenBLAS picks its kernel in a
 * constructor from OPENBLAS_CORETYPE; an environment forcing an older core would halve its speed,
 * so the variable is unset around the dlopen (under a lock) and restored after. Its idle threads
 * spin (sched_yield) for 2^28 cycles by default, taking the cores the runtime's pool needs between
 * two products (pooling, im2col, fused kernels: a training step alternates them); unless the
 * user set OPENBLAS_THREAD_TIMEOUT it is set to 12 (2^12 cycles, ~1 us) for the dlopen: the seed
 * CNN's step went from 31-37 to 27-28 ms (bench/RESULTS.md). It runs single-threaded inside the
 * runtime pool's tasks (SPLIT_GEMM), so one set of threads (TJ_NUM_THREADS) runs everything.
 * TJ_NO_BLAS=1, read at each compile, turns it off. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime.h"
#include "runtime/rt_pool.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_mutex_t env_mu = PTHREAD_MUTEX_INITIALIZER;
static rt_blas lib;
static bool have;
static char info[256] = "openblas: not loaded";
static rt_sgemm_fn real_sgemm;
static rt_dgemm_fn real_dgemm;

/* Every column of a product summed in one order. OpenBLAS computes the last columns of a
 * row-major product (its rows, in the column-major product it computes) with narrower edge
 * kernels that accumulate in another order: a layer whose weights are all equal gave channels one
 * float step apart (17, 33, 65, 100, 129 output channels here; 16, 48, 64, 1000 did not), which a
 * softmax over large logits turns into a wrong answer (issue 23). A product whose columns are not
 * a multiple of PAD_COLS runs on copies of B and C widened with zero columns, so every column
 * goes through the full-width kernels; the copies cost O(K·N + M·N), the product O(M·N·K). */
enum { ROW_MAJOR = 101, TRANS = 112, PAD_COLS = 16 };

#define PADDED_GEMM(name, T, real)                                                                 \
    static bool name(int ta, int tb, int m, int n, int k, T alpha, const T *a, int lda,            \
                     const T *b, int ldb, T beta, T *c, int ldc) {                                 \
        int np = (n + PAD_COLS - 1) / PAD_COLS * PAD_COLS;                                         \
        size_t brows = tb == TRANS ? (size_t)np : (size_t)k,                                       \
               bcols = tb == TRANS ? (size_t)k : (size_t)np;                                       \
        T *bp = calloc(brows * bcols + 1, sizeof *bp),                                             \
          *cp = malloc(((size_t)m * np + 1) * sizeof *cp);                                         \
        if (!bp || !cp) { /* no memory for the copies: the product as asked */                     \
            free(bp);                                                                              \
            free(cp);                                                                              \
            return false;                                                                          \
        }                                                                                          \
        if (tb == TRANS) /* B is [n][k]: n rows, then zero rows */                                 \
            for (int j = 0; j < n; j++)                                                            \
                memcpy(bp + (size_t)j * k, b + (size_t)j * ldb, (size_t)k * sizeof *bp);           \
        else /* B is [k][n]: each row widened to np columns */                                     \
            for (int i = 0; i < k; i++)                                                            \
                memcpy(bp + (size_t)i * np, b + (size_t)i * ldb, (size_t)n * sizeof *bp);          \
        for (int i = 0; i < m; i++) { /* C's rows, and zeros (beta·0) past n */                   \
            if (beta != 0)                                                                         \
                memcpy(cp + (size_t)i * np, c + (size_t)i * ldc, (size_t)n * sizeof *cp);          \
            memset(cp + (size_t)i * np + (beta != 0 ? n : 0), 0,                                   \
                   (size_t)(beta != 0 ? np - n : np) * sizeof *cp);                                \
        }                                                                                          \
        real(ROW_MAJOR, ta, tb, m, np, k, alpha, a, lda, bp, (int)bcols, beta, cp, np);            \
        for (int i = 0; i < m; i++)                                                                \
            memcpy(c + (size_t)i * ldc, cp + (size_t)i * np, (size_t)n * sizeof *cp);              \
        free(bp);                                                                                  \
        free(cp);                                                                                  \
        return true;                                                                               \
    }

/* One set of threads: OpenBLAS runs single-threaded inside the runtime pool's tasks, each task a
 * block of at least ROWS_MIN of C's rows, handed out dynamically like every loop of the pool.
 * OpenBLAS's own threads split a product statically and spin between products: beside a busy
 * process, or beside the pool's threads, 2 threads ran slower than 1 (issue 25). Rows, never
 * columns: a row is then computed by one call, so all its columns by the same kernels (blocks of
 * columns went through OpenBLAS's narrower or small-matrix kernels, and equal weights gave
 * channels a float step apart again, the case PAD_COLS fixes); each task packs B again, at most
 * 1/ROWS_MIN of its work. A product below SPLIT_MIN multiply-adds, or of fewer than 2·ROWS_MIN
 * rows, runs as one call. */
enum { SPLIT_MIN = 1 << 18, ROWS_MIN = 32 };

#define SPLIT_GEMM(name, T, real)                                                                  \
    typedef struct name##_job {                                                                    \
        int ta, tb, m, n, k, lda, ldb, ldc;                                                        \
        int64_t block;                                                                             \
        T alpha, beta;                                                                             \
        const T *a, *b;                                                                            \
        T *c;                                                                                      \
    } name##_job;                                                                                  \
    static void name##_task(void *ctx, int64_t t) { /* rows x0 .. of A ([k][m] if TRANS) and C */  \
        const name##_job *j = ctx;                                                                 \
        int64_t x0 = t * j->block;                                                                 \
        int w = (int)(x0 + j->block < j->m ? j->block : j->m - x0);                                \
        real(ROW_MAJOR, j->ta, j->tb, w, j->n, j->k, j->alpha,                                     \
             j->a + (j->ta == TRANS ? x0 : x0 * j->lda), j->lda, j->b, j->ldb, j->beta,            \
             j->c + x0 * j->ldc, j->ldc);                                                          \
    }                                                                                              \
    static void name(int order, int ta, int tb, int m, int n, int k, T alpha, const T *a, int lda, \
                     const T *b, int ldb, T beta, T *c, int ldc) {                                 \
        int64_t threads = rt_pool_size();                                                          \
        if (order != ROW_MAJOR || threads < 2 || m < 2 * ROWS_MIN ||                               \
            (int64_t)m * n * k < SPLIT_MIN) {                                                      \
            real(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);                     \
            return;                                                                                \
        }                                                                                          \
        name##_job j = {ta, tb, m, n, k, lda, ldb, ldc, 0, alpha, beta, a, b, c};                  \
        int64_t parts = 2 * threads;                                                               \
        j.block = (m + parts - 1) / parts;                                                         \
        j.block = j.block < ROWS_MIN ? ROWS_MIN : j.block;                                         \
        rt_parallel_for((m + j.block - 1) / j.block, name##_task, &j);                             \
    }
SPLIT_GEMM(split_sgemm, float, real_sgemm)
SPLIT_GEMM(split_dgemm, double, real_dgemm)
PADDED_GEMM(padded_sgemm, float, split_sgemm)
PADDED_GEMM(padded_dgemm, double, split_dgemm)

static void pooled_sgemm(int order, int ta, int tb, int m, int n, int k, float alpha,
                         const float *a, int lda, const float *b, int ldb, float beta, float *c,
                         int ldc) {
    if (order != ROW_MAJOR || n < 2 || n % PAD_COLS == 0 || n > INT32_MAX - PAD_COLS ||
        !padded_sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc))
        split_sgemm(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
static void pooled_dgemm(int order, int ta, int tb, int m, int n, int k, double alpha,
                         const double *a, int lda, const double *b, int ldb, double beta, double *c,
                         int ldc) {
    if (order != ROW_MAJOR || n < 2 || n % PAD_COLS == 0 || n > INT32_MAX - PAD_COLS ||
        !padded_dgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc))
        split_dgemm(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

static void load(void) {
    pthread_mutex_lock(&env_mu);
    const char *ct = getenv("OPENBLAS_CORETYPE");
    char *saved = ct ? strdup(ct) : NULL;
    if (ct)
        unsetenv("OPENBLAS_CORETYPE");
    bool set_timeout = getenv("OPENBLAS_THREAD_TIMEOUT") == NULL;
    if (set_timeout)
        setenv("OPENBLAS_THREAD_TIMEOUT", "12", 1);
    /* already in the process (a user linked it): dlopen returns that copy, its core is fixed */
    bool preloaded = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_NOLOAD) != NULL;
    void *h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
    if (saved)
        setenv("OPENBLAS_CORETYPE", saved, 1);
    if (set_timeout)
        unsetenv("OPENBLAS_THREAD_TIMEOUT");
    pthread_mutex_unlock(&env_mu);
    if (!h) {
        const char *why = dlerror();
        snprintf(info, sizeof info, "openblas: unavailable (%s)", why ? why : "dlopen failed");
        free(saved);
        return;
    }
    real_sgemm = (rt_sgemm_fn)dlsym(h, "cblas_sgemm");
    real_dgemm = (rt_dgemm_fn)dlsym(h, "cblas_dgemm");
    lib.sgemm = pooled_sgemm;
    lib.dgemm = pooled_dgemm;
    void (*set_threads)(int) = (void (*)(int))dlsym(h, "openblas_set_num_threads");
    char *(*corename)(void) = (char *(*)(void))dlsym(h, "openblas_get_corename");
    if (!real_sgemm || !real_dgemm) {
        snprintf(info, sizeof info, "openblas: cblas_sgemm/cblas_dgemm missing");
        free(saved);
        return;
    }
    if (set_threads) /* each call single-threaded: the runtime's pool runs them (SPLIT_GEMM) */
        set_threads(1);
    int threads = rt_pool_size();
    snprintf(info, sizeof info, "openblas core=%s threads=1 per task, %d tasks at once%s%s%s%s",
             corename ? corename() : "?", threads, preloaded ? " (preloaded)" : "",
             saved ? " (OPENBLAS_CORETYPE=" : "", saved ? saved : "", saved ? " ignored)" : "");
    free(saved);
    have = true;
}

const rt_blas *rt_blas_get(void) {
    const char *off = getenv("TJ_NO_BLAS");
    if (off && *off && strcmp(off, "0") != 0)
        return NULL;
    pthread_once(&once, load);
    return have ? &lib : NULL;
}

const char *rt_blas_info(void) {
    pthread_once(&once, load);
    return info;
}
