/* bench_cpu.c — issue 4's CPU benchmarks: streaming elementwise (vs memcpy bandwidth and vs C
 * -ffast-math with libmvec), row softmax (vs memcpy), f32 matmul and dense+bias+relu (vs OpenBLAS
 * sgemm at the same thread count, its core named in the result), compile latency (first module
 * in the process, uncached compiles, and a fresh process whose code is in the disk cache), and
 * the caching allocator's peak. Every tracejit result is checked against the baseline's (or a
 * plain C loop's) output before timing; a mismatch skips that benchmark and fails the run.
 * Timings are medians after a warm-up; baselines run in the same process with the same thread
 * count (rt_pool_size). `--quick` runs fewer repetitions of the same sizes. */
#include <math.h>
#include <spawn.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "runtime/rt_pool.h"
#include "tracejit.h"
#ifdef TJ_BENCH_HAVE_OPENBLAS
#include <cblas.h>
#endif

extern char **environ;

/* baseline_fastmath.c (compiled -O3 -march=native -ffast-math) */
void bl_memcpy(int n_threads, void *dst, const void *src, size_t bytes);
void bl_tanh_poly(int n_threads, const float *x, float *y, int64_t n, float a, float b, float c);
void bl_bias_relu(int n_threads, float *y, const float *bias, int64_t rows, int64_t cols);
void bl_colsum_sq(int n_threads, const float *x, float *y, int64_t rows, int64_t cols);

static int quick, n_threads, failures;

/* TJ_BENCH_ONLY=name[,name...] runs only the groups named (ew, softmax, reduce, gemm, compile). */
static int wanted(const char *group) {
    const char *only = getenv("TJ_BENCH_ONLY");
    if (!only || !*only)
        return 1;
    size_t n = strlen(group);
    for (const char *p = only; (p = strstr(p, group)) != NULL; p += n)
        if ((p == only || p[-1] == ',') && (p[n] == 0 || p[n] == ','))
            return 1;
    return 0;
}

/* ---- timing ---------------------------------------------------------------------------------- */
/* OpenBLAS's idle threads spin for a while after a call; let them go to sleep before tracejit
 * runs again, so the next benchmark has both cores. */
static void settle(void) {
    struct timespec ts = {0, 200 * 1000 * 1000};
    nanosleep(&ts, NULL);
}

typedef void (*run_fn)(void *ctx);
#define MAX_REPS 64

/* Times a and b (both already warmed up). The first timed pair sets the repetition count from the
 * time budget; then `interleave` alternates them (a drift in clock or neighbours hits both alike),
 * otherwise all of a runs before all of b (used for OpenBLAS, whose idle threads spin after a call
 * and would steal a core from whatever runs next). Writes medians in seconds; returns the reps. */
static int time_pair(run_fn a, void *ca, run_fn b, void *cb, int interleave, double *ma,
                     double *mb) {
    static double va[MAX_REPS], vb[MAX_REPS];
    double t0 = bench_now();
    a(ca);
    va[0] = bench_now() - t0;
    t0 = bench_now();
    if (b)
        b(cb);
    vb[0] = bench_now() - t0;
    double budget = quick ? 0.3 : 3.0, one = va[0] + vb[0];
    int lo = quick ? 3 : 7, hi = quick ? 15 : 51;
    if (one > (quick ? 1.0 : 10.0))
        lo = 1; /* the reference-kernel fallback can take seconds */
    int reps = one > 0 ? (int)(budget / one) : hi;
    reps = reps < lo ? lo : reps > hi ? hi : reps;
    for (int r = 1; r < reps; r++) {
        if (!interleave)
            break;
        t0 = bench_now();
        a(ca);
        va[r] = bench_now() - t0;
        t0 = bench_now();
        if (b)
            b(cb);
        vb[r] = bench_now() - t0;
    }
    if (!interleave && reps > 1)
        settle();
    for (int r = 1; r < reps && !interleave; r++) {
        t0 = bench_now();
        a(ca);
        va[r] = bench_now() - t0;
    }
    for (int r = 1; r < reps && !interleave; r++) {
        t0 = bench_now();
        if (b)
            b(cb);
        vb[r] = bench_now() - t0;
    }
    *ma = bench_median(va, reps);
    *mb = bench_median(vb, reps);
    return reps;
}

typedef struct tj_run {
    tj_function *f;
    int n;
    tj_tensor *args[3];
} tj_run;

static void run_tj(void *ctx) {
    tj_run *r = ctx;
    tj_release(tj_call(r->f, r->n, r->args));
}

/* ---- checking -------------------------------------------------------------------------------- */
/* Checks y (a tj_call result, released here) against ref: |y - ref| <= atol + rtol*|ref|.
 * Returns 1 if it fits; else prints why, counts a failure and returns 0. */
static int check_f32(const char *bench, tj_tensor *y, const float *ref, int64_t n, double atol,
                     double rtol) {
    int ok = tj_status_of(y) == TJ_OK && tj_tensor_dtype(y) == TJ_F32 && tj_tensor_numel(y) == n;
    double max_err = 0;
    int64_t bad = -1;
    if (ok) {
        const float *p = tj_tensor_data(y);
        for (int64_t i = 0; i < n; i++) {
            double d = fabs((double)p[i] - ref[i]);
            if (!(d <= atol + rtol * fabs(ref[i])) && bad < 0)
                bad = i;
            if (d > max_err || d != d)
                max_err = d;
        }
        if (bad >= 0)
            fprintf(stderr,
                    "bench_cpu: %s: result differs from the baseline at %lld: %.9g vs %.9g "
                    "(tolerance %.3g + %.3g*|ref|); not timed\n",
                    bench, (long long)bad, p[bad], ref[bad], atol, rtol);
    } else {
        fprintf(stderr, "bench_cpu: %s: tracejit failed: %s; not timed\n", bench,
                tj_status_of(y) ? tj_error_message(y) : "wrong dtype or size");
    }
    tj_release(y);
    if (ok && bad < 0) {
        printf("  # %s: checked %lld values, max |err| %.3g (tolerance %.3g + %.3g*|ref|)\n", bench,
               (long long)n, max_err, atol, rtol);
        return 1;
    }
    failures++;
    return 0;
}

static tj_tensor *uniform(int rank, const int64_t *dims, double lo, double hi, uint64_t seed) {
    return tj_random_uniform(TJ_F32, rank, dims, lo, hi, seed);
}

/* Baseline buffers get what tracejit's allocator gives its tensors (runtime/alloc.c: mmap'd,
 * MADV_HUGEPAGE), so neither side pays for 4 KiB-page TLB misses the other does not. */
static float *alloc_f32(int64_t n) {
    size_t bytes = (size_t)n * 4;
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        fprintf(stderr, "bench_cpu: out of memory\n");
        exit(1);
    }
    madvise(p, bytes, MADV_HUGEPAGE);
    memset(p, 0, bytes); /* fault the pages in before timing */
    return p;
}
static void free_f32(float *p, int64_t n) {
    if (p)
        munmap(p, (size_t)n * 4);
}

/* ---- memcpy baseline ------------------------------------------------------------------------- */
typedef struct copy_run {
    void *dst;
    const void *src;
    size_t bytes;
} copy_run;

static void run_copy(void *ctx) {
    copy_run *c = ctx;
    bl_memcpy(n_threads, c->dst, c->src, c->bytes);
}

/* ---- elementwise ----------------------------------------------------------------------------- */
static tj_tensor *poly(tj_tensor *x) {
    return tj_sub(tj_mul(tj_add(tj_mul(x, tj_scalar_f32(2)), tj_scalar_f32(1)), x),
                  tj_scalar_f32(3));
}

#define TANH_A 0.7f
#define TANH_B 0.1f
#define TANH_C 1.3f
static tj_tensor *tanh_poly(tj_tensor *x) {
    tj_tensor *u = tj_add(tj_mul(x, tj_scalar_f32(TANH_A)), tj_scalar_f32(TANH_B));
    return tj_sub(tj_mul(tj_tanh(u), tj_scalar_f32(TANH_C)), x);
}

typedef struct tanh_run {
    const float *x;
    float *y;
    int64_t n;
} tanh_run;

static void run_tanh_c(void *ctx) {
    tanh_run *t = ctx;
    bl_tanh_poly(n_threads, t->x, t->y, t->n, TANH_A, TANH_B, TANH_C);
}

static void bench_ew(void) {
    const int64_t n = (int64_t)1 << 24;
    tj_tensor *x = uniform(1, &n, -3, 3, 11);
    const float *xs = tj_tensor_data(x);
    float *ref = alloc_f32(n), *dst = alloc_f32(n);
    tj_run r = {.n = 1, .args = {x}};
    double mt, mb;

    /* ew_poly_2e24 vs memcpy of the same bytes: read x, write y */
    r.f = tj_function_new("ew_poly", (void *)poly, 1, NULL);
    for (int64_t i = 0; i < n; i++)
        ref[i] = (xs[i] * 2 + 1) * xs[i] - 3;
    if (check_f32("ew_poly_2e24", tj_call(r.f, 1, &x), ref, n, 1e-5, 1e-5)) {
        copy_run c = {dst, xs, (size_t)n * 4};
        run_copy(&c);
        int reps = time_pair(run_tj, &r, run_copy, &c, 1, &mt, &mb);
        double bytes = 2.0 * (double)n * 4;
        char base[64];
        snprintf(base, sizeof base, "memcpy %d thr", n_threads);
        printf("  # ew_poly_2e24: %d reps; tracejit %.3f ms, memcpy %.3f ms\n", reps, mt * 1e3,
               mb * 1e3);
        bench_report("ew_poly_2e24", "gbps", bytes / mt * 1e-9, "GB/s", base, bytes / mb * 1e-9,
                     mb / mt);
    }
    tj_function_free(r.f);

    /* ew_tanh_2e24 vs the same loop in C -ffast-math (libmvec tanhf) */
    r.f = tj_function_new("ew_tanh", (void *)tanh_poly, 1, NULL);
    tanh_run c = {xs, ref, n};
    run_tanh_c(&c);
    if (check_f32("ew_tanh_2e24", tj_call(r.f, 1, &x), ref, n, 1e-5, 1e-5)) {
        int reps = time_pair(run_tj, &r, run_tanh_c, &c, 1, &mt, &mb);
        char base[64];
        snprintf(base, sizeof base, "C -ffast-math libmvec %d thr", n_threads);
        printf("  # ew_tanh_2e24: %d reps\n", reps);
        bench_report("ew_tanh_2e24", "ms", mt * 1e3, "ms", base, mb * 1e3, mb / mt);
    }
    tj_function_free(r.f);
    free_f32(ref, n);
    free_f32(dst, n);
    tj_release(x);
}

/* ---- softmax --------------------------------------------------------------------------------- */
static tj_tensor *softmax_last(tj_tensor *x) {
    return tj_softmax(x, -1);
}

static void bench_softmax(void) {
    const int64_t d[2] = {4096, 4096}, n = d[0] * d[1];
    tj_tensor *x = uniform(2, d, -4, 4, 12);
    const float *xs = tj_tensor_data(x);
    float *ref = alloc_f32(n), *dst = alloc_f32(n);
    for (int64_t i = 0; i < d[0]; i++) { /* the oracle: max-shifted, double sums */
        const float *row = xs + i * d[1];
        float m = row[0];
        for (int64_t j = 1; j < d[1]; j++)
            m = row[j] > m ? row[j] : m;
        double s = 0;
        for (int64_t j = 0; j < d[1]; j++)
            s += exp((double)row[j] - m);
        for (int64_t j = 0; j < d[1]; j++)
            ref[i * d[1] + j] = (float)(exp((double)row[j] - m) / s);
    }
    tj_run r = {tj_function_new("softmax", (void *)softmax_last, 1, NULL), 1, {x}};
    if (check_f32("softmax_4096", tj_call(r.f, 1, &x), ref, n, 1e-9, 1e-5)) {
        copy_run c = {dst, xs, (size_t)n * 4};
        run_copy(&c);
        double mt, mb;
        int reps = time_pair(run_tj, &r, run_copy, &c, 1, &mt, &mb);
        double bytes = 2.0 * (double)n * 4;
        char base[64];
        snprintf(base, sizeof base, "memcpy %d thr", n_threads);
        printf("  # softmax_4096: %d reps; tracejit %.3f ms, memcpy %.3f ms\n", reps, mt * 1e3,
               mb * 1e3);
        bench_report("softmax_4096", "gbps", bytes / mt * 1e-9, "GB/s", base, bytes / mb * 1e-9,
                     mb / mt);
    }
    tj_function_free(r.f);
    free_f32(ref, n);
    free_f32(dst, n);
    tj_release(x);
}

/* ---- a reduction over the leading axis ------------------------------------------------------ */
static tj_tensor *colsum_sq(tj_tensor *x) {
    static const int axis0[1] = {0};
    return tj_sum(tj_mul(x, x), 1, axis0, 0);
}

typedef struct colsum_run {
    const float *x;
    float *y;
    int64_t rows, cols;
} colsum_run;

static void run_colsum_c(void *ctx) {
    colsum_run *c = ctx;
    bl_colsum_sq(n_threads, c->x, c->y, c->rows, c->cols);
}

static void bench_reduce(void) {
    const int64_t d[2] = {4096, 4096};
    tj_tensor *x = uniform(2, d, -2, 2, 13);
    float *ref = alloc_f32(d[1]);
    colsum_run c = {tj_tensor_data(x), ref, d[0], d[1]};
    run_colsum_c(&c);
    tj_run r = {tj_function_new("colsum_sq", (void *)colsum_sq, 1, NULL), 1, {x}};
    if (check_f32("reduce_axis0_4096", tj_call(r.f, 1, &x), ref, d[1], 1e-6, 1e-6)) {
        double mt, mb;
        int reps = time_pair(run_tj, &r, run_colsum_c, &c, 1, &mt, &mb);
        double bytes = (double)d[0] * d[1] * 4;
        char base[64];
        snprintf(base, sizeof base, "C loop -O3 %d thr", n_threads);
        printf("  # reduce_axis0_4096: sum(x*x, axis 0), %d reps; tracejit %.3f ms, C %.3f ms\n",
               reps, mt * 1e3, mb * 1e3);
        bench_report("reduce_axis0_4096", "gbps", bytes / mt * 1e-9, "GB/s", base,
                     bytes / mb * 1e-9, mb / mt);
    }
    tj_function_free(r.f);
    free_f32(ref, d[1]);
    tj_release(x);
}

/* ---- matmul and dense ------------------------------------------------------------------------ */
static tj_tensor *mm(tj_tensor *a, tj_tensor *b) {
    return tj_matmul(a, b);
}
static tj_tensor *dense(tj_tensor *x, tj_tensor *w, tj_tensor *b) {
    return tj_relu(tj_add(tj_matmul(x, w), b));
}

typedef struct gemm_run {
    const float *a, *b, *bias;
    float *c;
    int n;
} gemm_run;

static char blas_name[96] = "OpenBLAS missing";

#ifdef TJ_BENCH_HAVE_OPENBLAS
static void run_sgemm(void *ctx) {
    gemm_run *g = ctx;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, g->n, g->n, g->n, 1.0f, g->a, g->n, g->b,
                g->n, 0.0f, g->c, g->n);
    if (g->bias)
        bl_bias_relu(n_threads, g->c, g->bias, g->n, g->n);
}
#endif

static void bench_gemm(const char *bench, int n, int with_bias) {
    int64_t d[2] = {n, n}, nb = n;
    tj_tensor *a = uniform(2, d, -1, 1, 21), *b = uniform(2, d, -1, 1, 22);
    tj_tensor *bias = with_bias ? uniform(1, &nb, -1, 1, 23) : NULL;
    tj_run r = {with_bias ? tj_function_new(bench, (void *)dense, 3, NULL)
                          : tj_function_new(bench, (void *)mm, 2, NULL),
                with_bias ? 3 : 2,
                {a, b, bias}};
    double flops = 2.0 * n * n * (double)n, mt, mb;
    int reps;
#ifdef TJ_BENCH_HAVE_OPENBLAS
    gemm_run g = {tj_tensor_data(a), tj_tensor_data(b), bias ? tj_tensor_data(bias) : NULL,
                  alloc_f32((int64_t)n * n), n};
    run_sgemm(&g);
    /* sum orders differ: the error grows like K times eps times |a||b| (inputs in [-1, 1]) */
    if (check_f32(bench, tj_call(r.f, r.n, r.args), g.c, (int64_t)n * n, 1e-6 * n, 1e-5)) {
        reps = time_pair(run_tj, &r, run_sgemm, &g, 0, &mt, &mb);
        char base[128];
        snprintf(base, sizeof base, "%s%s", blas_name, with_bias ? " + C bias/relu" : "");
        printf("  # %s: %d reps; tracejit %.3f ms, OpenBLAS %.3f ms\n", bench, reps, mt * 1e3,
               mb * 1e3);
        bench_report(bench, "gflops", flops / mt * 1e-9, "GFLOP/s", base, flops / mb * 1e-9,
                     mb / mt);
        settle();
    }
    free_f32(g.c, (int64_t)n * n);
#else
    tj_tensor *y = tj_call(r.f, r.n, r.args);
    if (tj_status_of(y) == TJ_OK) {
        reps = time_pair(run_tj, &r, NULL, NULL, 1, &mt, &mb);
        printf("  # %s: %d reps, not checked (no OpenBLAS in this build)\n", bench, reps);
        bench_report(bench, "gflops", flops / mt * 1e-9, "GFLOP/s", NULL, 0, 0);
    }
    tj_release(y);
#endif
    tj_function_free(r.f);
    tj_release(a);
    tj_release(b);
    tj_release(bias);
}

/* ---- compile latency ------------------------------------------------------------------------- */
/* What the CPU backend's compile log says happened to the last program (jit/cpu/program.c). */
static int n_compiled, n_loaded, n_shared;

static int last_generic; /* the last compile's shape-generic kernels */
static void log_sink(const char *topic, const char *msg, void *user) {
    (void)topic, (void)user;
    const char *g = strstr(msg, " shape-generic");
    if (g) { /* "...; N shape-generic)" or "...; N shape-generic; ..." */
        while (g > msg && g[-1] >= '0' && g[-1] <= '9')
            g--;
        last_generic = atoi(g);
    }
    if (strstr(msg, "loaded from the disk cache"))
        n_loaded++;
    else if (strstr(msg, "shared with a loaded program"))
        n_shared++;
    else if (strstr(msg, "kernels, build"))
        n_compiled++;
}

/* 50 ops; the subtracted constant is the nonce, so each nonce is a graph no cache has seen. */
static float chain_c;
static tj_tensor *chain50(tj_tensor *x) {
    tj_tensor *y = x;
    for (int i = 0; i < 25; i++)
        y = tj_sub(tj_mul(y, tj_scalar_f32(1.0001f)), tj_scalar_f32(chain_c));
    return y;
}

static uint64_t nonce_next(void) {
    static uint64_t s;
    if (!s)
        s = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull ^ (uint64_t)(bench_now() * 1e9);
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    return s;
}
/* exact in f32 (< 2^21 + 0.5), so the child rebuilds the same graph from the number */
static float nonce_const(uint64_t nonce) {
    return 0.5f + (float)(nonce & 0xfffff);
}

/* Runs chain50 once (the first call of a new function) and checks it; returns ms or -1. Tiered
 * (native_ms not NULL): the function is tiered, and *native_ms is the time from the call's start
 * until its native code is in place (the background compile's end). */
static int warm_disk; /* the disk-hit child: the cache is what it reads */
static double chain_first_call_tiers(float c, double *native_ms) {
    float ones[16], ref[16];
    for (int i = 0; i < 16; i++) {
        ones[i] = 1;
        float y = 1;
        for (int k = 0; k < 25; k++)
            y = y * 1.0001f - c;
        ref[i] = y;
    }
    int64_t d = 16;
    tj_tensor *in = tj_tensor_from_data(TJ_F32, 1, &d, ones);
    chain_c = c;
    /* cold: the code cache emptied (the bench's own folder). A new constant alone no longer
     * makes new code: a one-element float constant is loaded, not compiled in, so every rep's
     * kernel is the same and the last rep's would be on disk */
    if (!warm_disk)
        tj_cache_clear();
    double t0 = bench_now();
    tj_function *f = tj_function_new("chain50", (void *)chain50, 1,
                                     &(tj_function_options){.tiered = native_ms ? 1 : -1});
    tj_tensor *y = tj_call(f, 1, &in);
    double ms = (bench_now() - t0) * 1e3;
    if (native_ms) {
        tj_function_wait_compiled(f);
        *native_ms = (bench_now() - t0) * 1e3;
    }
    int ok = tj_status_of(y) == TJ_OK && tj_tensor_numel(y) == 16;
    for (int i = 0; ok && i < 16; i++)
        ok = fabs(tj_tensor_get_f64(y, i) - ref[i]) <= 1e-5 * fabs(ref[i]) + 1e-3;
    if (!ok)
        fprintf(stderr, "bench_cpu: chain50: wrong result or error: %s\n", tj_error_message(y));
    tj_release(y);
    tj_function_free(f);
    tj_release(in);
    return ok ? ms : -1;
}

static double chain_first_call(float c) {
    return chain_first_call_tiers(c, NULL);
}

/* retrace_50op: a function already traced for f32[16] is called with f32[32]; the second call's
 * latency is the cost of a retrace for a new shape: trace + passes + plan, then the code the
 * first shape compiled (its one flat loop serves every size: no LLVM), and the run. The code
 * cache is emptied before each rep's first call. */
static double chain_retrace(float c) {
    float xs[32];
    for (int i = 0; i < 32; i++)
        xs[i] = 1;
    int64_t d16 = 16, d32 = 32;
    tj_tensor *a = tj_tensor_from_data(TJ_F32, 1, &d16, xs),
              *b = tj_tensor_from_data(TJ_F32, 1, &d32, xs);
    chain_c = c;
    tj_cache_clear(); /* the first shape compiles (chain_first_call_tiers says why) */
    tj_function *f = tj_function_new("chain50", (void *)chain50, 1, NULL);
    tj_tensor *y = tj_call(f, 1, &a);
    int ok = tj_status_of(y) == TJ_OK;
    tj_release(y);
    double t0 = bench_now();
    y = tj_call(f, 1, &b);
    double ms = (bench_now() - t0) * 1e3;
    ok = ok && tj_status_of(y) == TJ_OK && tj_tensor_numel(y) == 32 &&
         tj_function_trace_count(f) == 2;
    tj_release(y);
    tj_function_free(f);
    tj_release(a);
    tj_release(b);
    return ok ? ms : -1;
}

/* The child of compile_disk_hit: prints "<ms> <loaded from disk 0/1>". */
static int disk_hit_child(const char *arg) {
    tj_set_log(log_sink, NULL);
    tj_set_log_topics("compile");
    warm_disk = 1;
    double ms = chain_first_call(nonce_const(strtoull(arg, NULL, 10)));
    printf("%.6f %d\n", ms, n_loaded == 1 && n_compiled == 0);
    return ms < 0;
}

/* Spawns this executable as a disk-hit child; returns its ms, or -1 (failure or not a hit). */
static double spawn_child(uint64_t nonce) {
    int fd[2];
    if (pipe(fd))
        return -1;
    char num[32];
    snprintf(num, sizeof num, "%llu", (unsigned long long)nonce);
    char *argv[] = {"bench_cpu", "--disk-hit-child", num, NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fd[1], 1);
    posix_spawn_file_actions_addclose(&fa, fd[0]);
    pid_t pid;
    int err = posix_spawn(&pid, "/proc/self/exe", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fd[1]);
    char buf[128] = {0};
    ssize_t got = err ? -1 : read(fd[0], buf, sizeof buf - 1);
    close(fd[0]);
    int status = 0;
    if (!err)
        waitpid(pid, &status, 0);
    double ms = -1;
    int hit = 0;
    if (got <= 0 || !WIFEXITED(status) || WEXITSTATUS(status) ||
        sscanf(buf, "%lf %d", &ms, &hit) != 2)
        return -1;
    if (!hit)
        fprintf(stderr, "bench_cpu: compile_disk_hit: the child did not load from disk\n");
    return hit ? ms : -1;
}

static void bench_compile_first(void) {
    /* the first module of the process pays for LLVM's and the JIT's set-up too */
    double ms = chain_first_call(nonce_const(nonce_next()));
    if (ms >= 0 && n_compiled == 1 && n_loaded + n_shared == 0)
        bench_report("compile_first_module", "ms", ms, "ms", NULL, 0, 0);
    else {
        fprintf(stderr, "bench_cpu: compile_first_module: not a compile (compiled %d, loaded %d)\n",
                n_compiled, n_loaded + n_shared);
        failures++;
    }
}

static void bench_compile(void) {
    /* each call a real trace + passes + compile (the code cache emptied before it; fresh
     * constants keep the peers' caches out); the compile log confirms each one compiled */
    double v[MAX_REPS];
    int reps = quick ? 5 : 21, got = 0;
    for (int r = 0; r < reps; r++) {
        int c0 = n_compiled;
        double ms = chain_first_call(nonce_const(nonce_next()));
        if (ms >= 0 && n_compiled == c0 + 1)
            v[got++] = ms;
    }
    if (got == reps)
        bench_report("compile_50op", "ms_median", bench_median(v, got), "ms", NULL, 0, 0);
    else {
        fprintf(stderr, "bench_cpu: compile_50op: %d of %d calls compiled\n", got, reps);
        failures++;
    }

    /* first_call_50op: the default, tiered: trace + passes + the interpreter's run, LLVM
     * compiling in the background; and when the native code is in place */
    double nat[MAX_REPS];
    got = 0;
    for (int r = 0; r < reps; r++) {
        int c0 = n_compiled;
        double ms = chain_first_call_tiers(nonce_const(nonce_next()), &nat[got]);
        if (ms >= 0 && n_compiled == c0 + 1)
            v[got++] = ms;
    }
    if (got == reps) {
        bench_report("first_call_50op", "ms_median", bench_median(v, got), "ms", NULL, 0, 0);
        bench_report("first_call_50op", "native_ms_median", bench_median(nat, got), "ms", NULL, 0,
                     0);
    } else {
        fprintf(stderr, "bench_cpu: first_call_50op: %d of %d calls compiled in the background\n",
                got, reps);
        failures++;
    }

    got = 0;
    for (int r = 0; r < reps; r++) {
        int c0 = n_compiled, s0 = n_shared;
        double ms = chain_retrace(nonce_const(nonce_next()));
        if (ms >= 0 && n_compiled == c0 + 1 && n_shared == s0 + 1)
            v[got++] = ms;
    }
    if (got == reps)
        bench_report("retrace_50op", "ms_median", bench_median(v, got), "ms", NULL, 0, 0);
    else {
        fprintf(stderr,
                "bench_cpu: retrace_50op: %d of %d retraces ran the first shape's code without "
                "compiling\n",
                got, reps);
        failures++;
    }

    /* compile_disk_hit: the parent compiles (and stores) a fresh graph, children load it */
    uint64_t nonce = nonce_next();
    int c0 = n_compiled;
    if (chain_first_call(nonce_const(nonce)) < 0 || n_compiled != c0 + 1) {
        fprintf(stderr, "bench_cpu: compile_disk_hit: the parent did not compile\n");
        failures++;
        return;
    }
    reps = quick ? 5 : 15;
    for (int r = 0; r < reps; r++) {
        if ((v[r] = spawn_child(nonce)) < 0) {
            fprintf(stderr, "bench_cpu: compile_disk_hit: child failed or missed (TJ_CACHE=0?)\n");
            failures++;
            return;
        }
    }
    printf("  # compile_disk_hit: %d child processes, first call = new function + trace + passes + "
           "disk load + run\n",
           reps);
    bench_report("compile_disk_hit", "ms_median", bench_median(v, reps), "ms", NULL, 0, 0);
}

/* shapes_sweep (issue 26; as bench/peers/common.py's): relu(x @ W + b + c), W [256, 128] f32, a
 * fresh function, tiered as by default (bench_native_tier turns the default off), called once at
 * each batch size 1..100: the total time of the 100 calls (each a new signature: trace, passes, the
 * code cache asked, then cached code or the interpreter) and how many LLVM compiles they caused (a
 * tiered signature compiles from its second call: none here; counted once the function is freed,
 * which joins a compile running). c, fresh per rep, keeps an earlier rep's code out of it. */
enum { SW_K = 256, SW_N = 128, SW_MAX = 100 };
static float sweep_c;
static tj_tensor *sweep_dense(tj_tensor *x, tj_tensor *w, tj_tensor *b) {
    return tj_relu(tj_add(tj_add(tj_matmul(x, w), b), tj_scalar_f32(sweep_c)));
}

static void bench_sweep(void) {
    float *x = malloc(sizeof(float) * SW_MAX * SW_K), *w = malloc(sizeof(float) * SW_K * SW_N);
    float b[SW_N];
    for (int i = 0; i < SW_MAX * SW_K; i++)
        x[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
    for (int i = 0; i < SW_K * SW_N; i++)
        w[i] = (float)((i * 13) % 97) / 1552.0f - 0.03f;
    for (int j = 0; j < SW_N; j++)
        b[j] = (float)(j % 7) / 7.0f - 0.5f;
    tj_tensor *xs[SW_MAX];
    for (int n = 1; n <= SW_MAX; n++)
        xs[n - 1] = tj_tensor_from_data(TJ_F32, 2, (const int64_t[]){n, SW_K}, x);
    tj_tensor *wt = tj_tensor_from_data(TJ_F32, 2, (const int64_t[]){SW_K, SW_N}, w),
              *bt = tj_tensor_from_data(TJ_F32, 1, (const int64_t[]){SW_N}, b);
    int reps = quick ? 1 : 3, ok = 1;
    double v[MAX_REPS], nc[MAX_REPS];
    for (int r = 0; r < reps && ok; r++) {
        sweep_c = (float)(nonce_next() & 0xffff) / 65536.0f;
        int c0 = n_compiled;
        double t0 = bench_now();
        tj_function *f = tj_function_new("sweep_dense", (void *)sweep_dense, 3,
                                         &(tj_function_options){.tiered = 1}); /* the default */
        tj_tensor *y = NULL;
        for (int n = 1; n <= SW_MAX && ok; n++) {
            tj_release(y);
            y = tj_call(f, 3, (tj_tensor *[]){xs[n - 1], wt, bt});
            ok = tj_status_of(y) == TJ_OK;
        }
        v[r] = (bench_now() - t0) * 1e3;
        for (int i = 0; ok && i < SW_MAX; i += 33) /* the last call's rows 0, 33, 66, 99 */
            for (int j = 0; ok && j < SW_N; j++) {
                double s = b[j] + sweep_c;
                for (int k = 0; k < SW_K; k++)
                    s += (double)x[i * SW_K + k] * w[k * SW_N + j];
                s = s > 0 ? s : 0;
                ok = fabs(tj_tensor_get_f64(y, i * SW_N + j) - s) <= 1e-4 * (1 + fabs(s));
            }
        if (!ok)
            fprintf(stderr, "bench_cpu: shapes_sweep: wrong result or error: %s\n",
                    tj_error_message(y));
        tj_release(y);
        tj_function_free(f); /* joins a compile running, cancels those not released */
        nc[r] = n_compiled - c0;
    }
    for (int n = 0; n < SW_MAX; n++)
        tj_release(xs[n]);
    tj_release(wt);
    tj_release(bt);
    free(x);
    free(w);
    if (!ok) {
        failures++;
        return;
    }
    bench_report("shapes_sweep", "ms_median", bench_median(v, reps), "ms", NULL, 0, 0);
    bench_report("shapes_sweep", "llvm_compiles", bench_median(nc, reps), "compiles", NULL, 0, 0);
}

/* Shape-generic against specialized code (issue 26), two functions of fn in one run, interleaved:
 * one whose first signature is the target shape (its kernels specialized to it: the baseline),
 * one first called at `warm` (so the target is its second signature: shape-generic kernels);
 * ratio = specialized / generic. Both are checked against ref; the generic one must have
 * compiled at least one shape-generic kernel, the specialized one none. */
static void generic_row(const char *row, void *fn, int nargs, tj_tensor **target, tj_tensor **warm,
                        const float *ref, int64_t n, double tol) {
    tj_set_log_topics("compile");
    tj_run rs = {tj_function_new("spec", fn, nargs, NULL), nargs, {NULL}};
    tj_run rg = {tj_function_new("gen", fn, nargs, NULL), nargs, {NULL}};
    memcpy(rs.args, target, (size_t)nargs * sizeof *target);
    memcpy(rg.args, target, (size_t)nargs * sizeof *target);
    last_generic = -1;
    int ok = check_f32(row, tj_call(rs.f, nargs, rs.args), ref, n, tol, tol);
    int spec_generic = last_generic;
    tj_release(tj_call(rg.f, nargs, warm)); /* its first signature */
    last_generic = -1;
    ok = ok && check_f32(row, tj_call(rg.f, nargs, rg.args), ref, n, tol, tol);
    int gen_generic = last_generic;
    tj_set_log_topics("");
    if (ok && (spec_generic != 0 || gen_generic < 1)) {
        fprintf(stderr, "bench_cpu: %s: %d and %d shape-generic kernels (want 0, >= 1)\n", row,
                spec_generic, gen_generic);
        failures++;
        ok = 0;
    }
    if (ok) {
        double mg, ms;
        int reps = time_pair(run_tj, &rs, run_tj, &rg, 1, &ms, &mg);
        printf("  # %s: %d reps; generic %.3f ms, specialized %.3f ms\n", row, reps, mg * 1e3,
               ms * 1e3);
        bench_report(row, "ms", mg * 1e3, "ms", "specialized kernel", ms * 1e3, ms / mg);
    }
    tj_function_free(rs.f);
    tj_function_free(rg.f);
}

/* ew_bcast_generic: relu(x * c + b), x [4096, 1024] f32, c [4096, 1] (a column), b [1024] (a
 * row), first called at [2048, 1024]: a broadcasting loop whose outer extent and strides come at
 * run time. reduce_axis0_generic: reduce_axis0_4096's sum(x*x, axis 0), first called at
 * [2048, 4096]: a reduction over a kept inner axis whose reduced length comes at run time. */
static tj_tensor *bcast_affine_relu(tj_tensor *x, tj_tensor *c, tj_tensor *b) {
    return tj_relu(tj_add(tj_mul(x, c), b));
}
/* small_mlp_generic: softmax(relu(x @ w1) @ w2) + rowsum(relu(x @ w1)), x [4, 32], w1 32x48,
 * w2 48x10: six small kernels, which a first signature chains into one and a later one leaves
 * unchained until it is hot */
static tj_tensor *small_mlp(tj_tensor *x, tj_tensor *w1, tj_tensor *w2) {
    static const int ax1[1] = {1};
    tj_tensor *h = tj_relu(tj_matmul(x, w1));
    return tj_add(tj_softmax(tj_matmul(h, w2), -1), tj_sum(h, 1, ax1, 1));
}

/* Microseconds a call of f on args: the best of 15 blocks of `calls` calls. */
static double us_per_call(tj_function *f, tj_tensor **args, int calls) {
    double best = 1e30;
    for (int r = 0; r < 15; r++) {
        double t0 = bench_now();
        for (int i = 0; i < calls; i++)
            tj_release(tj_call(f, 3, args));
        double us = (bench_now() - t0) * 1e6 / calls;
        best = us < best ? us : best;
    }
    return best;
}

static void bench_small_generic(void) {
    const int64_t xd[2] = {4, 32}, xh[2] = {2, 32}, w1d[2] = {32, 48}, w2d[2] = {48, 10};
    tj_tensor *x = uniform(2, xd, 0, 1, 51), *xx = uniform(2, xh, 0, 1, 52),
              *w1 = uniform(2, w1d, -1, 1, 53), *w2 = uniform(2, w2d, -1, 1, 54);
    tj_tensor *args[3] = {x, w1, w2};
    tj_function *fs = tj_function_new("small_spec", (void *)small_mlp, 3, NULL),
                *fg = tj_function_new("small_gen", (void *)small_mlp, 3, NULL);
    tj_release(tj_call(fs, 3, args));
    tj_release(tj_call(fg, 3, (tj_tensor *[]){xx, w1, w2})); /* its first signature */
    tj_release(tj_call(fg, 3, args));                        /* its second: generic */
    /* 15 x 60 calls: under the 1000 after which a hot signature compiles again (the first
     * signature's quick code unrolled, the generic one's specialized) */
    double quick = us_per_call(fs, args, 60), gen = us_per_call(fg, args, 60);
    for (int i = 0; i < 100; i++) { /* past 1000 calls: both compile their best code */
        tj_release(tj_call(fs, 3, args));
        tj_release(tj_call(fg, 3, args));
    }
    tj_function_wait_compiled(fs);
    tj_function_wait_compiled(fg);
    double spec = us_per_call(fs, args, 200), respec = us_per_call(fg, args, 200);
    printf("  # small_mlp_generic: specialized (chained, unrolled) %.2f us, quick (its first "
           "code: loops not unrolled) %.2f us, generic (unchained) %.2f us, re-specialized "
           "after %d calls %.2f us\n",
           spec, quick, gen, 1000, respec);
    bench_report("small_mlp_generic", "us", gen, "us", "specialized, chained", spec, spec / gen);
    bench_report("small_mlp_generic", "us_respecialized", respec, "us", "specialized, chained",
                 spec, spec / respec);
    bench_report("small_mlp_generic", "us_quick", quick, "us", "specialized, chained", spec,
                 spec / quick);
    tj_function_free(fs);
    tj_function_free(fg);
    tj_release(x);
    tj_release(xx);
    tj_release(w1);
    tj_release(w2);
}

static tj_tensor *conv_bias_relu(tj_tensor *x, tj_tensor *w, tj_tensor *b) {
    return tj_relu(tj_add(tj_conv2d(x, w, NULL, TJ_PAD_SAME, NULL), b));
}

static void bench_generic(void) {
    const int64_t d[2] = {4096, 1024}, dc[2] = {4096, 1}, db[1] = {1024};
    const int64_t h[2] = {2048, 1024}, hc[2] = {2048, 1};
    tj_tensor *x = uniform(2, d, -1, 1, 31), *c = uniform(2, dc, -1, 1, 32),
              *b = uniform(1, db, -1, 1, 33);
    tj_tensor *xh = uniform(2, h, -1, 1, 34), *ch = uniform(2, hc, -1, 1, 35);
    int64_t n = d[0] * d[1];
    float *ref = alloc_f32(n);
    const float *xs = tj_tensor_data(x), *cs = tj_tensor_data(c), *bs = tj_tensor_data(b);
    for (int64_t i = 0; i < d[0]; i++)
        for (int64_t j = 0; j < d[1]; j++) {
            float v = xs[i * d[1] + j] * cs[i] + bs[j];
            ref[i * d[1] + j] = v > 0 ? v : 0;
        }
    generic_row("ew_bcast_generic", (void *)bcast_affine_relu, 3, (tj_tensor *[]){x, c, b},
                (tj_tensor *[]){xh, ch, b}, ref, n, 1e-6);
    free_f32(ref, n);
    tj_release(x);
    tj_release(c);
    tj_release(b);
    tj_release(xh);
    tj_release(ch);

    const int64_t r[2] = {4096, 4096}, rh[2] = {2048, 4096};
    tj_tensor *y = uniform(2, r, -2, 2, 13), *yh = uniform(2, rh, -2, 2, 14);
    float *cref = alloc_f32(r[1]);
    colsum_run cr = {tj_tensor_data(y), cref, r[0], r[1]};
    run_colsum_c(&cr);
    generic_row("reduce_axis0_generic", (void *)colsum_sq, 1, &y, &yh, cref, r[1], 1e-6);
    free_f32(cref, r[1]);
    tj_release(y);
    tj_release(yh);

    /* conv_epi_generic: relu(conv2d(x, w) + b), x [8, 56, 56, 64], w 3x3x64x64 SAME, b [64]
     * (ResNet's 56x56 stage), first called at batch 4: the epilogue fused behind the
     * convolution shape-generic; checked against the eager ops */
    const int64_t xd[4] = {8, 56, 56, 64}, xhd[4] = {4, 56, 56, 64}, wd[4] = {3, 3, 64, 64},
                  bd[1] = {64};
    tj_tensor *cx = uniform(4, xd, -1, 1, 41), *cxh = uniform(4, xhd, -1, 1, 42),
              *cw = uniform(4, wd, -0.1, 0.1, 43), *cb = uniform(1, bd, -1, 1, 44);
    tj_tensor *cargs[3] = {cx, cw, cb};
    tj_function *fref = tj_function_new("conv_relu_ref", (void *)conv_bias_relu, 3, NULL);
    tj_tensor *want = tj_call_eager(fref, 3, cargs);
    tj_function_free(fref);
    if (tj_status_of(want) == TJ_OK)
        generic_row("conv_epi_generic", (void *)conv_bias_relu, 3, cargs,
                    (tj_tensor *[]){cxh, cw, cb}, tj_tensor_data(want), tj_tensor_numel(want),
                    1e-4);
    tj_release(want);
    tj_release(cx);
    tj_release(cxh);
    tj_release(cw);
    tj_release(cb);
}

/* Without TJ_CACHE_DIR (bench/run sets it) the disk-hit child needs a folder of its own. */
static char own_cache[64];
static void ensure_cache_dir(void) {
    if (getenv("TJ_CACHE_DIR"))
        return;
    snprintf(own_cache, sizeof own_cache, "/tmp/tj-bench-cache-XXXXXX");
    if (mkdtemp(own_cache))
        setenv("TJ_CACHE_DIR", own_cache, 1);
    else
        own_cache[0] = 0;
}

int main(int argc, char **argv) {
    bench_native_tier();
    if (argc == 3 && strcmp(argv[1], "--disk-hit-child") == 0)
        return disk_hit_child(argv[2]);
    quick = bench_quick(argc, argv);
    ensure_cache_dir(); /* before the first tracejit call: the configuration is read once */
    tj_set_log(log_sink, NULL);
    tj_set_log_topics("compile");
    printf("%-24s %-14s %12s %-8s %-26s %12s  %7s\n", "bench", "metric", "value", "unit",
           "baseline", "base value", "ratio");
    if (wanted("compile")) {
        bench_compile_first(); /* first: nothing in this process has compiled yet */
        bench_compile();
        bench_sweep();
    }
    tj_set_log_topics("");

    n_threads = rt_pool_size();
#ifdef TJ_BENCH_HAVE_OPENBLAS
    if (getenv("OPENBLAS_CORETYPE"))
        fprintf(stderr, "bench_cpu: note: OPENBLAS_CORETYPE=%s forces OpenBLAS's kernel choice\n",
                getenv("OPENBLAS_CORETYPE"));
    openblas_set_num_threads(n_threads);
    snprintf(blas_name, sizeof blas_name, "OpenBLAS %s %d thr", openblas_get_corename(),
             openblas_get_num_threads());
#endif
    double load[3] = {0};
    if (getloadavg(load, 3) == 3) /* other work on the machine skews every number below */
        printf("  # load average %.2f %.2f %.2f (%ld cpus)\n", load[0], load[1], load[2],
               sysconf(_SC_NPROCESSORS_ONLN));
    printf("  # threads: tracejit %d (TJ_NUM_THREADS or cores), baselines %d, %s\n", n_threads,
           n_threads, blas_name);

    /* call_overhead ns_into (tj_call_into, the result written into a caller-provided tensor) is
     * measured by bench_core.c next to ns_alloc, on the same inputs; not repeated here. */

    if (wanted("ew"))
        bench_ew();
    if (wanted("softmax"))
        bench_softmax();
    if (wanted("reduce"))
        bench_reduce();
    if (wanted("generic")) {
        bench_generic();
        bench_small_generic();
    }
    static const int sizes[] = {256, 512, 1024, 2048};
    for (int i = 0; i < 4 && wanted("gemm"); i++) {
        char name[32];
        snprintf(name, sizeof name, "matmul_f32_%d", sizes[i]);
        bench_gemm(name, sizes[i], 0);
    }
    if (wanted("gemm"))
        bench_gemm("dense_bias_relu_1024", 1024, 1);

    rt_alloc_stats st = rt_alloc_get_stats();
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    bench_report("memory", "peak_mib", (double)st.peak_in_use / (1 << 20), "MiB", NULL, 0, 0);
    bench_report("memory", "rss_peak_mib", (double)ru.ru_maxrss / 1024, "MiB", NULL, 0, 0);
    if (own_cache[0]) {
        tj_cache_clear();
        rmdir(own_cache);
    }
    if (failures)
        fprintf(stderr, "bench_cpu: %d benchmark(s) failed their checks\n", failures);
    return failures ? 1 : 0;
}
