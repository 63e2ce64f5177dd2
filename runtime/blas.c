/* blas.c — OpenBLAS as an external kernel (the way XLA calls Eigen), of the CPU backend's
 * products and of the eager convolutions: opened
 * with dlopen("libopenblas.so.0") on first use, so tracejit builds and runs where it is absent
 * (large float products are then generated like the small ones). OpenBLAS picks its kernel in a
 * constructor from OPENBLAS_CORETYPE; an environment forcing an older core would halve its speed,
 * so the variable is unset around the dlopen (under a lock) and restored after. Its idle threads
 * spin (sched_yield) for 2^28 cycles by default, taking the cores the runtime's pool needs between
 * two products (pooling, im2col, fused kernels: a training step alternates them); unless the
 * user set OPENBLAS_THREAD_TIMEOUT it is set to 12 (2^12 cycles, ~1 us) for the dlopen: the seed
 * CNN's step went from 31-37 to 27-28 ms (bench/RESULTS.md). Its thread count
 * is the runtime pool's (TJ_NUM_THREADS). TJ_NO_BLAS=1, read at each compile, turns it off. */
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

/* OpenBLAS's threads take the cores: the pool's spinning workers sleep first (pool.c) */
static void quiet_sgemm(int order, int ta, int tb, int m, int n, int k, float alpha, const float *a,
                        int lda, const float *b, int ldb, float beta, float *c, int ldc) {
    rt_pool_quiet();
    real_sgemm(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
static void quiet_dgemm(int order, int ta, int tb, int m, int n, int k, double alpha,
                        const double *a, int lda, const double *b, int ldb, double beta, double *c,
                        int ldc) {
    rt_pool_quiet();
    real_dgemm(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
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
    lib.sgemm = quiet_sgemm;
    lib.dgemm = quiet_dgemm;
    void (*set_threads)(int) = (void (*)(int))dlsym(h, "openblas_set_num_threads");
    char *(*corename)(void) = (char *(*)(void))dlsym(h, "openblas_get_corename");
    if (!real_sgemm || !real_dgemm) {
        snprintf(info, sizeof info, "openblas: cblas_sgemm/cblas_dgemm missing");
        free(saved);
        return;
    }
    int threads = rt_pool_size();
    if (set_threads)
        set_threads(threads);
    snprintf(info, sizeof info, "openblas core=%s threads=%d%s%s%s%s", corename ? corename() : "?",
             threads, preloaded ? " (preloaded)" : "", saved ? " (OPENBLAS_CORETYPE=" : "",
             saved ? saved : "", saved ? " ignored)" : "");
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
