/* bench_train.c — training workloads (issue 11), each in a child process so that its peak RSS
 * is its own:
 *   conv2d_200x200x100  the seed's S25 convolution (100 filters 3x3, VALID, bias) compiled and
 *                       eager, in GFLOP/s and as a fraction of this machine's FMA peak (measured
 *                       here: independent FMA chains on every thread);
 *   cnn_train_step_b50  one training step of the seed's CNN (examples/cnn.h) at batch 50:
 *                       forward, gradients of the 8 variables and Adam, compiled; the step's node
 *                       counts before and after the passes and its cold compile time (no disk
 *                       cache), and the peak RSS;
 *   mlp_train_step      64x784 -> 256 relu -> 10, sparse softmax cross-entropy, SGD 0.1, compiled,
 *                       against the same step written by hand in C on OpenBLAS.
 * Inputs are seeded random tensors (no dataset needed). With --load, instead: each workload on 1
 * and on 2 threads, conv2d on an idle machine (the scaling) and the training steps beside a
 * process spinning at normal priority (a shared machine: 2 threads must not be slower than 1). */
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/bench.h"
#include "examples/cnn.h"
#include "runtime/rt_pool.h"
#include "runtime/runtime.h" /* rt_blas_get: the C baseline calls the same OpenBLAS */

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define HAVE_X86 1
#else
#define HAVE_X86 0
#endif
#if defined(__aarch64__)
#include <arm_neon.h>
#define HAVE_NEON 1
#else
#define HAVE_NEON 0
#endif

static int quick;
/* --load: the run's thread count (0: the normal rows) and where a child leaves its time */
static int mode_threads;
static double *shared_ms;

static double peak_rss_mib(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024;
}

/* median ms of `reps` calls of f(args) (after one warm-up call) */
static double time_calls(tj_function *f, int n, tj_tensor *const *args, int reps) {
    double t[64];
    for (int r = -1; r < reps; r++) {
        double t0 = bench_now();
        tj_tensor *y = tj_call(f, n, args);
        if (tj_status_of(y)) {
            fprintf(stderr, "bench_train: %s: %s\n", tj_function_name(f), tj_error_message(y));
            exit(1);
        }
        tj_release(y);
        if (r >= 0)
            t[r] = 1e3 * (bench_now() - t0);
    }
    return bench_median(t, reps);
}

/* ---- FMA peak -------------------------------------------------------------------------------- */
/* Independent FMA chains on one thread, in the widest vectors the kernels use here (tj_cpu_isa):
 * GFLOP/s, 0 where no FMA is known. Every chain feeds the result (issue 25: the AVX2 probe kept
 * only its first chain live, so the compiler dropped eleven and the "peak" was one chain's
 * latency-bound rate times twelve). */
#if HAVE_X86
__attribute__((target("avx512f"))) static double fma_chains_512(long iters) {
    __m512 a[12], m = _mm512_set1_ps(0.999f), c = _mm512_set1_ps(1e-3f);
    for (int i = 0; i < 12; i++)
        a[i] = _mm512_set1_ps((float)i);
    double t0 = bench_now();
    for (long k = 0; k < iters; k++)
        for (int i = 0; i < 12; i++)
            a[i] = _mm512_fmadd_ps(a[i], m, c);
    double dt = bench_now() - t0;
    float s = 0;
    for (int i = 0; i < 12; i++)
        s += _mm512_reduce_add_ps(a[i]);
    return (double)iters * 12 * 16 * 2 / dt / 1e9 + (s == 12345 ? 1 : 0);
}

__attribute__((target("avx2,fma"))) static double fma_chains_256(long iters) {
    __m256 a[12], m = _mm256_set1_ps(0.999f), c = _mm256_set1_ps(1e-3f);
    for (int i = 0; i < 12; i++)
        a[i] = _mm256_set1_ps((float)i);
    double t0 = bench_now();
    for (long k = 0; k < iters; k++)
        for (int i = 0; i < 12; i++)
            a[i] = _mm256_fmadd_ps(a[i], m, c);
    double dt = bench_now() - t0;
    __m256 s = a[0]; /* every chain feeds the result: none may be dropped as dead code */
    for (int i = 1; i < 12; i++)
        s = _mm256_add_ps(s, a[i]);
    float v[8];
    _mm256_storeu_ps(v, s);
    return (double)iters * 12 * 8 * 2 / dt / 1e9 + (v[0] == 12345 ? 1 : 0);
}
#endif
#if HAVE_NEON
/* 12 chains of 4-lane FMAs (aarch64 has 32 vector registers; two or four FMA pipes) */
static double fma_chains_neon(long iters) {
    float32x4_t a[12], m = vdupq_n_f32(0.999f), c = vdupq_n_f32(1e-3f);
    for (int i = 0; i < 12; i++)
        a[i] = vdupq_n_f32((float)i);
    double t0 = bench_now();
    for (long k = 0; k < iters; k++)
        for (int i = 0; i < 12; i++)
            a[i] = vfmaq_f32(c, a[i], m);
    double dt = bench_now() - t0;
    float32x4_t s = a[0]; /* every chain feeds the result */
    for (int i = 1; i < 12; i++)
        s = vaddq_f32(s, a[i]);
    return (double)iters * 12 * 4 * 2 / dt / 1e9 + (vaddvq_f32(s) == 12345 ? 1 : 0);
}
#endif

/* The best of three runs after a warm-up (the clock ramps up; another process may take a run). */
static void *fma_thread(void *arg) {
    double *gflops = arg;
    long iters = 20000000;
    *gflops = 0;
#if HAVE_X86
    for (int r = 0; r < 4; r++) {
        double g = strcmp(tj_cpu_isa(), "avx512") == 0 ? fma_chains_512(r ? iters : iters / 4)
                   : strcmp(tj_cpu_isa(), "avx2") == 0 ? fma_chains_256(r ? iters : iters / 4)
                                                       : 0;
        if (r && g > *gflops)
            *gflops = g;
    }
#elif HAVE_NEON
    for (int r = 0; r < 4; r++) {
        double g = strcmp(tj_cpu_isa(), "neon") == 0 ? fma_chains_neon(r ? iters : iters / 4) : 0;
        if (r && g > *gflops)
            *gflops = g;
    }
#else
    (void)iters;
#endif
    return NULL;
}

static double fma_peak(int threads) {
    pthread_t th[16];
    double g[16] = {0}, sum = 0;
    for (int i = 0; i < threads; i++)
        pthread_create(&th[i], NULL, fma_thread, &g[i]);
    for (int i = 0; i < threads; i++) {
        pthread_join(th[i], NULL);
        sum += g[i];
    }
    return sum;
}

/* ---- conv2d_200x200x100 ---------------------------------------------------------------------- */
static tj_tensor *conv_bias(tj_tensor *x, tj_tensor *w, tj_tensor *b) {
    return tj_bias_add(tj_conv2d(x, w, NULL, TJ_PAD_VALID, NULL), b);
}

static void bench_conv(void) {
    int64_t xd[4] = {1, 200, 200, 100}, wd[4] = {3, 3, 100, 100}, bd[1] = {100};
    tj_tensor *x = tj_random_uniform(TJ_F32, 4, xd, -1, 1, 1);
    tj_tensor *w = tj_random_uniform(TJ_F32, 4, wd, -0.1, 0.1, 2);
    tj_tensor *b = tj_random_uniform(TJ_F32, 1, bd, -1, 1, 3);
    tj_tensor *args[3] = {x, w, b};
    tj_function *f = tj_function_new("conv2d_200x200x100", (void *)conv_bias, 3, NULL);
    int reps = quick ? 5 : 15;
    double ms = time_calls(f, 3, args, reps);
    if (mode_threads) {
        *shared_ms = ms;
        tj_function_free(f);
        return;
    }
    /* eager: the same kernel, op by op */
    double te[32];
    for (int r = -1; r < reps; r++) {
        double t0 = bench_now();
        tj_scope_begin(); /* the convolution's result too */
        conv_bias(x, w, b);
        tj_scope_end();
        if (r >= 0)
            te[r] = 1e3 * (bench_now() - t0);
    }
    double ms_e = bench_median(te, reps);
    double flop = 2.0 * 198 * 198 * 100 * 900, gf = flop / (ms * 1e-3) / 1e9;
    int threads = rt_pool_size();
    double peak = fma_peak(threads);
    printf("  # conv2d_200x200x100: %.2f GFLOP per call, FMA peak %.1f GFLOP/s on %d threads\n",
           flop / 1e9, peak, threads);
    bench_report("conv2d_200x200x100", "ms_compiled", ms, "ms", "eager", ms_e, ms_e / ms);
    bench_report("conv2d_200x200x100", "ms_eager", ms_e, "ms", "compiled", ms, ms / ms_e);
    bench_report("conv2d_200x200x100", "gflops", gf, "GFLOP/s", "FMA peak", peak, gf / peak);
    tj_function_free(f);
    tj_release(x);
    tj_release(w);
    tj_release(b);
}

/* ---- cnn_train_step_b50 ---------------------------------------------------------------------- */
static int nodes_before, nodes_after;
static unsigned n_compiled, n_found; /* kernels of the last CPU compile: compiled, found loaded */
static double compile_ms;
static void log_sink(const char *topic, const char *msg, void *user) {
    (void)user;
    int a, b;
    double ms;
    const char *p;
    if (!strcmp(topic, "passes") && (p = strstr(msg, "train_one_step: passes: ")) &&
        sscanf(p, "train_one_step: passes: %d -> %d", &a, &b) == 2)
        nodes_before = a, nodes_after = b;
    if (!strcmp(topic, "compile") && (p = strstr(msg, "train_one_step: compiled ")) &&
        (p = strstr(p, " in ")) && sscanf(p, " in %lf ms", &ms) == 1)
        compile_ms = ms;
    unsigned c, f, all;
    if (!strcmp(topic, "compile") && (p = strstr(msg, "cpu: ")) &&
        sscanf(p, "cpu: %u kernels, build", &c) == 1 && (p = strstr(p, "shape-generic; ")) &&
        sscanf(p, "shape-generic; %u of the %u found", &f, &all) == 2)
        n_compiled = c, n_found = f;
}

static void bench_cnn(void) {
    tj_set_log(log_sink, NULL);
    tj_set_log_topics("passes,compile");
    if (cnn_init(&cnn_model, 1, 1e-3)) {
        fprintf(stderr, "bench_train: %s\n", tj_last_error());
        exit(1);
    }
    int64_t xd[4] = {50, 28, 28, 1};
    tj_tensor *x = tj_random_uniform(TJ_F32, 4, xd, 0, 1, 5);
    tj_tensor *y = tj_random_indices(10, 50, 6), *y32 = tj_cast(y, TJ_I32);
    tj_tensor *args[2] = {x, y32};
    tj_function *f = tj_function_new("train_one_step", (void *)cnn_train_step, 2, NULL);
    double t0 = bench_now();
    tj_tensor *l = tj_call(f, 2, args);
    double first = 1e3 * (bench_now() - t0);
    if (tj_status_of(l)) {
        fprintf(stderr, "bench_train: cnn: %s\n", tj_error_message(l));
        exit(1);
    }
    tj_release(l);
    double ms = time_calls(f, 2, args, quick ? 5 : 20);
    /* eager: the same step op by op (the same kernels, unfused), after one untimed warm-up
     * call as the peers' eager rows have (the allocator's cache and the pages first touched) */
    double te[3];
    int ne = mode_threads ? 0 : quick ? 2 : 3;
    if (ne)
        tj_release(tj_call_eager(f, 2, args));
    for (int r = 0; r < ne; r++) {
        double t1 = bench_now();
        tj_release(tj_call_eager(f, 2, args));
        te[r] = 1e3 * (bench_now() - t1);
    }
    double ms_e = ne ? bench_median(te, ne) : 0;
    tj_set_log_topics("");
    tj_set_log(NULL, NULL);
    if (mode_threads) {
        *shared_ms = ms;
        ne = 0;
    } else {
        printf("  # cnn_train_step_b50: %d nodes traced, %d after the passes; first call %.0f ms "
               "(compile %.0f ms, no disk cache)\n",
               nodes_before, nodes_after, first, compile_ms);
        bench_report("cnn_train_step_b50", "ms_compiled", ms, "ms", "eager", ms_e, ms_e / ms);
        bench_report("cnn_train_step_b50", "ms_eager", ms_e, "ms", "compiled", ms, ms / ms_e);
        bench_report("cnn_train_step_b50", "compile_ms_cold", compile_ms, "ms", NULL, 0, 0);
        bench_report("cnn_train_step_b50", "nodes_traced", nodes_before, "nodes", NULL, 0, 0);
        bench_report("cnn_train_step_b50", "nodes_optimized", nodes_after, "nodes", NULL, 0, 0);
        bench_report("cnn_train_step_b50", "peak_rss", peak_rss_mib(), "MiB", NULL, 0, 0);
    }
    if (!mode_threads) {
        /* new_batch_ms (issue 26): the same function at batch 32 (its second signature:
         * shape-generic kernels, compiled), then the first call at batch 20, which runs the
         * 32's code without a compile, against the first call at 32 and a steady batch-20 call */
        double firsts[2] = {0}, steady = 0;
        int64_t bs[2] = {32, 20};
        tj_set_log(log_sink, NULL);
        tj_set_log_topics("compile");
        n_compiled = n_found = 0;
        for (int k = 0; k < 2; k++) {
            int64_t xk[4] = {bs[k], 28, 28, 1};
            tj_tensor *xb = tj_random_uniform(TJ_F32, 4, xk, 0, 1, 7 + k);
            tj_tensor *yb = tj_random_indices(10, bs[k], 9 + k), *yb32 = tj_cast(yb, TJ_I32);
            tj_tensor *ab[2] = {xb, yb32};
            double t1 = bench_now();
            tj_tensor *lb = tj_call(f, 2, ab);
            firsts[k] = 1e3 * (bench_now() - t1);
            if (tj_status_of(lb)) {
                fprintf(stderr, "bench_train: cnn batch %lld: %s\n", (long long)bs[k],
                        tj_error_message(lb));
                exit(1);
            }
            tj_release(lb);
            if (k == 0)
                tj_set_log_topics(""), tj_set_log(NULL, NULL);
            if (k == 1)
                steady = time_calls(f, 2, ab, quick ? 5 : 20);
            tj_release(xb);
            tj_release(yb);
            tj_release(yb32);
        }
        printf("  # cnn_train_step: first call at batch 32 (a second signature: %u kernels "
               "compiled, %u found in batch 50's code) %.1f ms, then at batch 20 %.1f ms; a "
               "batch-20 step %.1f ms\n",
               n_compiled, n_found, firsts[0], firsts[1], steady);
        bench_report("cnn_train_step_b50", "new_batch_first_ms", firsts[1], "ms",
                     "first call at batch 32", firsts[0], firsts[0] / firsts[1]);
    }
    tj_function_free(f);
    cnn_free(&cnn_model);
    tj_release(x);
    tj_release(y);
    tj_release(y32);
}

/* ---- mlp_train_step -------------------------------------------------------------------------- */
enum { MB = 64, MI = 784, MH = 256, MO = 10 };
static tj_variable *mv[4];
static tj_optimizer *msgd;

static tj_tensor *mlp_step(tj_tensor *x, tj_tensor *y) {
    tj_tape *tape = tj_tape_new(0);
    tj_tensor *v[4];
    for (int k = 0; k < 4; k++)
        v[k] = tj_variable_read(mv[k]);
    tj_tensor *h = tj_relu(tj_bias_add(tj_matmul(x, v[0]), v[1]));
    tj_tensor *logits = tj_bias_add(tj_matmul(h, v[2]), v[3]);
    tj_tensor *loss = tj_mean(tj_sparse_softmax_cross_entropy(y, logits), 0, NULL, 0);
    tj_tape_stop(tape);
    tj_tensor *g[4];
    tj_status st = tj_tape_gradient_vars(tape, loss, NULL, 4, mv, g);
    tj_tape_free(tape);
    if (!st)
        st = tj_optimizer_apply(msgd, 4, mv, g);
    return st ? tj_error_new(st, "%s", tj_last_error()) : loss;
}

/* The same step by hand: C loops and OpenBLAS; buffers allocated once. */
typedef struct cstep {
    float *w1, *b1, *w2, *b2, *h, *lg, *dl, *dh, *dw1, *dw2;
} cstep;

static float c_step(cstep *s, const rt_blas *bl, const float *x, const int32_t *y) {
    enum { RM = 101, NT = 111, T = 112 };
    bl->sgemm(RM, NT, NT, MB, MH, MI, 1, x, MI, s->w1, MH, 0, s->h, MH);
    for (int i = 0; i < MB; i++)
        for (int j = 0; j < MH; j++) {
            float v = s->h[i * MH + j] + s->b1[j];
            s->h[i * MH + j] = v > 0 ? v : 0;
        }
    bl->sgemm(RM, NT, NT, MB, MO, MH, 1, s->h, MH, s->w2, MO, 0, s->lg, MO);
    double loss = 0;
    for (int i = 0; i < MB; i++) {
        float *l = s->lg + i * MO, m = -INFINITY;
        for (int j = 0; j < MO; j++)
            m = fmaxf(m, l[j] + s->b2[j]);
        double z = 0;
        for (int j = 0; j < MO; j++)
            z += exp((double)(l[j] + s->b2[j] - m));
        loss += m + log(z) - (l[y[i]] + s->b2[y[i]]);
        for (int j = 0; j < MO; j++)
            s->dl[i * MO + j] =
                (float)((exp((double)(l[j] + s->b2[j] - m)) / z - (j == y[i])) / MB);
    }
    bl->sgemm(RM, T, NT, MH, MO, MB, 1, s->h, MH, s->dl, MO, 0, s->dw2, MO);
    bl->sgemm(RM, NT, T, MB, MH, MO, 1, s->dl, MO, s->w2, MO, 0, s->dh, MH);
    for (int i = 0; i < MB * MH; i++)
        if (s->h[i] <= 0)
            s->dh[i] = 0;
    bl->sgemm(RM, T, NT, MI, MH, MB, 1, x, MI, s->dh, MH, 0, s->dw1, MH);
    const float lr = 0.1f;
    for (int j = 0; j < MO; j++) {
        float db = 0;
        for (int i = 0; i < MB; i++)
            db += s->dl[i * MO + j];
        s->b2[j] -= lr * db;
    }
    for (int j = 0; j < MH; j++) {
        float db = 0;
        for (int i = 0; i < MB; i++)
            db += s->dh[i * MH + j];
        s->b1[j] -= lr * db;
    }
    for (int i = 0; i < MI * MH; i++)
        s->w1[i] -= lr * s->dw1[i];
    for (int i = 0; i < MH * MO; i++)
        s->w2[i] -= lr * s->dw2[i];
    return (float)(loss / MB);
}

static void bench_mlp(void) {
    int64_t xd[2] = {MB, MI}, d1[2] = {MI, MH}, d2[1] = {MH}, d3[2] = {MH, MO}, d4[1] = {MO};
    const int64_t *dims[4] = {d1, d2, d3, d4};
    for (int k = 0; k < 4; k++) {
        tj_tensor *init =
            k % 2 ? tj_zeros(TJ_F32, 1, dims[k]) : tj_glorot_uniform(TJ_F32, 2, dims[k], 10 + k);
        mv[k] = tj_variable_new(init, "mlp");
        tj_release(init);
    }
    msgd = tj_sgd_new(0.1, 0, 0);
    tj_tensor *x = tj_random_uniform(TJ_F32, 2, xd, 0, 1, 7);
    tj_tensor *y64 = tj_random_indices(MO, MB, 8), *y = tj_cast(y64, TJ_I32);
    /* the C step starts from the same weights */
    const rt_blas *bl = rt_blas_get();
    cstep s;
    float **bufs[10] = {&s.w1, &s.b1, &s.w2, &s.b2, &s.h, &s.lg, &s.dl, &s.dh, &s.dw1, &s.dw2};
    size_t sizes[10] = {MI * MH, MH,      MH * MO, MO,      MB * MH,
                        MB * MO, MB * MO, MB * MH, MI * MH, MH * MO};
    for (int k = 0; k < 10; k++)
        *bufs[k] = aligned_alloc(64, (sizes[k] * 4 + 63) / 64 * 64);
    for (int k = 0; k < 4; k++) {
        tj_tensor *v = tj_variable_read(mv[k]);
        memcpy(*bufs[k], tj_tensor_data(v), sizes[k] * 4);
        tj_release(v);
    }
    tj_function *f = tj_function_new("mlp_train_step", (void *)mlp_step, 2, NULL);
    tj_tensor *args[2] = {x, y};
    tj_tensor *l0 = tj_call(f, 2, args);
    float c0 = bl ? c_step(&s, bl, tj_tensor_data(x), tj_tensor_data(y)) : 0;
    printf("  # mlp_train_step: first loss tracejit %.6f, C %.6f\n", tj_tensor_get_f64(l0, 0),
           (double)c0);
    tj_release(l0);
    int reps = quick ? 20 : 200;
    double ms = time_calls(f, 2, args, reps > 64 ? 64 : reps);
    double tc[64];
    int nc = reps > 64 ? 64 : reps;
    for (int r = 0; bl && r < nc; r++) {
        double t0 = bench_now();
        c_step(&s, bl, tj_tensor_data(x), tj_tensor_data(y));
        tc[r] = 1e3 * (bench_now() - t0);
    }
    double mc = bl ? bench_median(tc, nc) : 0;
    if (mode_threads)
        *shared_ms = ms;
    else if (bl)
        bench_report("mlp_train_step", "ms_compiled", ms, "ms", "C + OpenBLAS", mc, mc / ms);
    else
        bench_report("mlp_train_step", "ms_compiled", ms, "ms", NULL, 0, 0);
    if (!mode_threads) {
        /* ms_generic (issue 26): the same step as a function's second signature (its first at
         * batch 32), whose broadcasting kernels take their extents at run time; blocks of calls
         * alternate with the specialized function's, the median of each */
        int64_t hd[2] = {MB / 2, MI};
        tj_tensor *xh = tj_random_uniform(TJ_F32, 2, hd, 0, 1, 17);
        tj_tensor *yh64 = tj_random_indices(MO, MB / 2, 18), *yh = tj_cast(yh64, TJ_I32);
        tj_function *fg = tj_function_new("mlp_train_step_generic", (void *)mlp_step, 2, NULL);
        time_calls(fg, 2, (tj_tensor *[]){xh, yh}, 1); /* its first signature */
        double vs[7], vg[7];
        int blocks = quick ? 3 : 7;
        for (int k = 0; k < blocks; k++) {
            vg[k] = time_calls(fg, 2, args, 8);
            vs[k] = time_calls(f, 2, args, 8);
        }
        double mg = bench_median(vg, blocks), msp = bench_median(vs, blocks);
        printf("  # mlp_train_step: generic %.3f ms, specialized %.3f ms (%d blocks of 8)\n", mg,
               msp, blocks);
        bench_report("mlp_train_step", "ms_generic", mg, "ms", "specialized step", msp, msp / mg);
        tj_function_free(fg);
        tj_release(xh);
        tj_release(yh);
        tj_release(yh64);
    }
    tj_function_free(f);
    tj_optimizer_free(msgd);
    for (int k = 0; k < 4; k++)
        tj_variable_free(mv[k]);
    for (int k = 0; k < 10; k++)
        free(*bufs[k]);
    tj_release(x);
    tj_release(y);
    tj_release(y64);
}

static void in_child(void (*fn)(void)) {
    fflush(stdout);
    pid_t p = fork();
    if (p == 0) {
        fn();
        fflush(stdout);
        _exit(0);
    }
    int status = 0;
    waitpid(p, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status))
        fprintf(stderr, "bench_train: a benchmark failed (status %d)\n", status);
}

static void cold_cnn(void) {
    setenv("TJ_CACHE", "0", 1); /* a cold compile: read before tracejit's first call here */
    bench_cnn();
}

/* ---- --load: thread counts, idle and beside a busy process -------------------------------- */
static void (*mode_fn)(void);
static void mode_child(void) {
    char n[16];
    snprintf(n, sizeof n, "%d", mode_threads); /* read at tracejit's first call in this child */
    setenv("TJ_NUM_THREADS", n, 1);
    mode_fn();
}

/* fn's time on 1 and on 2 threads (each in its own child), beside a process of normal priority
 * spinning on one core when `busy`: rows <row> ms_<idle|loaded>_<n>t, the 2-thread one with the
 * 1-thread one as its baseline (a ratio above 1: the second thread helps). */
static void thread_rows(const char *row, void (*fn)(void), int busy) {
    double ms[3] = {0};
    for (int t = 1; t <= 2; t++) {
        pid_t spin = busy ? fork() : 0;
        if (busy && spin == 0)
            for (volatile uint64_t x = 0;; x++)
                ;
        mode_threads = t, mode_fn = fn, *shared_ms = 0;
        in_child(mode_child);
        ms[t] = *shared_ms;
        if (busy && spin > 0) {
            kill(spin, SIGKILL);
            waitpid(spin, NULL, 0);
        }
    }
    mode_threads = 0;
    char m1[32], m2[32];
    const char *how = busy ? "loaded" : "idle";
    snprintf(m1, sizeof m1, "ms_%s_1t", how);
    snprintf(m2, sizeof m2, "ms_%s_2t", how);
    bench_report(row, m1, ms[1], "ms", NULL, 0, 0);
    bench_report(row, m2, ms[2], "ms", busy ? "1 thread, loaded" : "1 thread, idle", ms[1],
                 ms[2] > 0 ? ms[1] / ms[2] : 0);
}

int main(int argc, char **argv) {
    bench_native_tier();
    quick = bench_quick(argc, argv);
    int load = 0;
    for (int i = 1; i < argc; i++)
        load |= strcmp(argv[i], "--load") == 0;
    if (load) { /* issue 25: one set of threads, robust when the machine is shared */
        shared_ms = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (shared_ms == MAP_FAILED)
            return 1;
        printf("%-24s %-14s %12s %-8s %-26s %12s  %7s\n", "bench", "metric", "value", "unit",
               "baseline", "base value", "ratio");
        thread_rows("conv2d_200x200x100", bench_conv, 0);
        thread_rows("mlp_train_step", bench_mlp, 1);
        thread_rows("cnn_train_step_b50", bench_cnn, 1);
        return 0;
    }
    printf("%-24s %-14s %12s %-8s %-26s %12s  %7s\n", "bench", "metric", "value", "unit",
           "baseline", "base value", "ratio");
    in_child(bench_conv);
    in_child(cold_cnn);
    in_child(bench_mlp);
    return 0;
}
