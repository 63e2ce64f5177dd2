/* bench_control.c — control flow (issue 10): the cost of a loop iteration compiled, against the
 * same loop run eagerly and against a hand-written C loop measured in the same run.
 *   while_tanh    S16's loop without the print, on f32[1000] from uniform [0, 1) until sum(x)
 *                 <= 30 (sum(x) <= 1 would take ~10^6 iterations at this size): ns per iteration
 *   rnn_scan      a tanh RNN cell, hidden 128, batch 32, 100 steps (tj_scan): ms per call
 *   fizzbuzz_1e5  a for_range of 10^5 iterations with nested conds and no prints (the branches
 *                 count into a loop variable): ns per iteration
 *   while_tiny    a loop on a tiny tensor: while sum(x) < 10^6: x = x * 1.0001 + 0.1, x f32[4]
 *                 (~55,000 iterations): ns per iteration, against the same C loop
 *   rnn_ta        the same RNN written as the seed's dynamic_rnn: a for_range over time that
 *                 gathers x_t and writes h into a tensor array (S19): ms per call, against
 *                 rnn_scan in the same run
 * Every result is checked against the C loop before timing. Timings are medians. */
#include <math.h>
#include <stdint.h>

#include "bench.h"
#include "tracejit.h"

#define REPS 7

/* ---- while_tanh ------------------------------------------------------------------------------ */
static tj_tensor *sum_gt_1(int n, tj_tensor *const *x, void *user) {
    (void)n, (void)user;
    return tj_greater(tj_sum(x[0], 0, NULL, 0), tj_scalar_f32(30));
}
static tj_tensor *tanh_body(int n, tj_tensor *const *x, void *user) {
    (void)n, (void)user;
    return tj_tanh(x[0]);
}
static tj_tensor *while_tanh(tj_tensor *x) {
    return tj_while_loop(sum_gt_1, tanh_body, 1, &x, NULL);
}
/* the C loop: the same iterations, tanhf per element (the compiled loop uses its approximation) */
__attribute__((noinline)) static int64_t while_tanh_c(float *x, int n) {
    int64_t it = 0;
    for (;;) {
        double s = 0;
        for (int i = 0; i < n; i++)
            s += x[i];
        if (!(s > 30))
            return it;
        for (int i = 0; i < n; i++)
            x[i] = tanhf(x[i]);
        it++;
    }
}

/* ---- rnn_scan: h = tanh(x_t W + h U + b) ----------------------------------------------------- */
enum { RB = 32, RH = 128, RT = 100 };
static tj_tensor *rnn_cell(int n, tj_tensor *const *a, void *user) {
    (void)n;
    tj_tensor **w = user; /* W [H,H], U [H,H], b [H]: values of the enclosing function */
    tj_tensor *h = tj_tanh(tj_add(tj_add(tj_matmul(a[1], w[0]), tj_matmul(a[0], w[1])), w[2]));
    tj_tensor *r[2] = {h, h};
    return tj_tuple(2, r);
}
static tj_tensor *rnn(tj_tensor *xs, tj_tensor *h0, tj_tensor *W, tj_tensor *U, tj_tensor *b) {
    tj_tensor *w[3] = {W, U, b};
    return tj_tuple_get(tj_scan(rnn_cell, 1, &h0, 1, &xs, w), 0);
}

/* ---- while_tiny ------------------------------------------------------------------------------ */
static tj_tensor *tiny_cond(int n, tj_tensor *const *x, void *user) {
    (void)n, (void)user;
    return tj_less(tj_sum(x[0], 0, NULL, 0), tj_scalar_f32(1e6f));
}
static tj_tensor *tiny_body(int n, tj_tensor *const *x, void *user) {
    (void)n, (void)user;
    return tj_add(tj_mul(x[0], tj_scalar_f32(1.0001f)), tj_scalar_f32(0.1f));
}
static tj_tensor *while_tiny(tj_tensor *x) {
    return tj_while_loop(tiny_cond, tiny_body, 1, &x, NULL);
}
__attribute__((noinline)) static int64_t while_tiny_c(float *x) {
    int64_t it = 0;
    while ((double)x[0] + x[1] + x[2] + x[3] < 1e6) {
        for (int k = 0; k < 4; k++)
            x[k] = x[k] * 1.0001f + 0.1f;
        it++;
    }
    return it;
}

/* ---- rnn_ta: the loop over time with a tensor array ----------------------------------------- */
static tj_tensor *rnn_ta_step(int n, tj_tensor *const *a, void *user) {
    (void)n;
    tj_tensor **w = user; /* xs, W, U, b */
    tj_tensor *x = tj_gather(w[0], a[0], 0);
    tj_tensor *h = tj_tanh(tj_add(tj_add(tj_matmul(x, w[1]), tj_matmul(a[1], w[2])), w[3]));
    tj_tensor *r[2] = {h, tj_tensor_array_write(a[2], a[0], h)};
    return tj_tuple(2, r);
}
static tj_tensor *rnn_ta(tj_tensor *xs, tj_tensor *h0, tj_tensor *W, tj_tensor *U, tj_tensor *b) {
    tj_tensor *w[4] = {xs, W, U, b};
    tj_tensor *ta = tj_tensor_array_new(TJ_F32, RT, 2, (int64_t[]){RB, RH});
    tj_tensor *init[2] = {h0, ta};
    tj_tensor *r = tj_for_range(tj_scalar_i64(0), tj_scalar_i64(RT), tj_scalar_i64(1), rnn_ta_step,
                                2, init, w);
    return tj_tuple_get(r, 0);
}

/* ---- fizzbuzz_1e5: counts of fizzbuzz, fizz, buzz and other, kept in loop variables ---------- */
static tj_tensor *divisible(tj_tensor *i, int64_t k) {
    return tj_equal(tj_mod(i, tj_scalar_i64(k)), tj_scalar_i64(0));
}
static tj_tensor *bump(tj_tensor *const *c, int k) {
    tj_tensor *r[4];
    for (int j = 0; j < 4; j++)
        r[j] = j == k ? tj_add(c[j], tj_scalar_i64(1)) : c[j];
    return tj_tuple(4, r);
}
static tj_tensor *fb(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    return bump(a + 1, 0);
}
static tj_tensor *fz(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    return bump(a + 1, 1);
}
static tj_tensor *bz(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    return bump(a + 1, 2);
}
static tj_tensor *other(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    return bump(a + 1, 3);
}
static tj_tensor *elif_buzz(int n, tj_tensor *const *a, void *u) {
    return tj_cond(divisible(a[0], 5), bz, other, n, a, u);
}
static tj_tensor *elif_fizz(int n, tj_tensor *const *a, void *u) {
    return tj_cond(divisible(a[0], 3), fz, elif_buzz, n, a, u);
}
static tj_tensor *fizz_body(int n, tj_tensor *const *a, void *u) {
    return tj_cond(divisible(a[0], 15), fb, elif_fizz, n, a, u);
}
static tj_tensor *fizzbuzz(tj_tensor *n) {
    tj_tensor *zero = tj_scalar_i64(0), *init[4] = {zero, zero, zero, zero};
    return tj_for_range(tj_scalar_i64(1), tj_add(n, tj_scalar_i64(1)), tj_scalar_i64(1), fizz_body,
                        4, init, NULL);
}
__attribute__((noinline)) static void fizzbuzz_c(int64_t n, int64_t *c) {
    c[0] = c[1] = c[2] = c[3] = 0;
    for (int64_t i = 1; i <= n; i++)
        c[i % 15 == 0 ? 0 : i % 3 == 0 ? 1 : i % 5 == 0 ? 2 : 3]++;
}

static double time_call(tj_function *f, int n, tj_tensor **args, int reps, tj_tensor **last) {
    double v[REPS];
    for (int r = 0; r < reps; r++) {
        double t0 = bench_now();
        tj_tensor *y = tj_call(f, n, args);
        v[r] = bench_now() - t0;
        if (r == reps - 1 && last)
            *last = y;
        else
            tj_release(y);
    }
    return bench_median(v, reps);
}

int main(int argc, char **argv) {
    bench_native_tier();
    int quick = bench_quick(argc, argv), bad = 0;
    printf("%-24s %-14s %12s %-8s %-26s %12s  %7s\n", "bench", "metric", "value", "unit",
           "baseline", "base value", "ratio");

    /* while_tanh: f32[1000] in [0, 1): sum ~500 -> 30 in about 1,700 iterations */
    enum { N = 1000 };
    float x0[N], xc[N];
    for (int i = 0; i < N; i++)
        x0[i] = (float)((i * 7919) % 1000) / 1000.0f;
    memcpy(xc, x0, sizeof xc);
    int64_t iters = while_tanh_c(xc, N);
    tj_tensor *x = tj_tensor_from_data(TJ_F32, 1, (int64_t[]){N}, x0);
    tj_function *f = tj_function_new("while_tanh", (void *)while_tanh, 1, NULL);
    tj_tensor *y = NULL;
    double tc = time_call(f, 1, &x, REPS, &y), s = 0;
    for (int i = 0; i < N; i++)
        s += tj_tensor_get_f64(y, i);
    if (tj_status_of(y) || !(s <= 30) || s < 29) {
        fprintf(stderr, "bench_control: while_tanh gave sum %g (%s)\n", s, tj_error_message(y));
        bad++;
    }
    tj_release(y);
    double v[REPS];
    for (int r = 0; r < REPS; r++) {
        memcpy(xc, x0, sizeof xc);
        double t0 = bench_now();
        while_tanh_c(xc, N);
        v[r] = bench_now() - t0;
    }
    double tcl = bench_median(v, REPS);
    tj_tensor *ye = NULL;
    double t0 = bench_now();
    ye = tj_call_eager(f, 1, &x);
    double te = bench_now() - t0;
    tj_release(ye);
    printf("  # while_tanh: %lld iterations of f32[%d]\n", (long long)iters, N);
    bench_report("while_tanh", "ns_per_iter", tc / iters * 1e9, "ns", "C loop (tanhf)",
                 tcl / iters * 1e9, tcl / tc);
    bench_report("while_tanh", "ns_per_iter_eager", te / iters * 1e9, "ns", "compiled",
                 tc / iters * 1e9, tc / te);
    tj_function_free(f);
    tj_release(x);

    /* while_tiny */
    float t0v[4] = {1, 2, 3, 4}, tc4[4];
    memcpy(tc4, t0v, sizeof tc4);
    int64_t titers = while_tiny_c(tc4);
    for (int r = 0; r < REPS; r++) {
        memcpy(tc4, t0v, sizeof tc4);
        double t1 = bench_now();
        while_tiny_c(tc4);
        v[r] = bench_now() - t1;
    }
    double ttc = bench_median(v, REPS);
    x = tj_tensor_from_data(TJ_F32, 1, (int64_t[]){4}, t0v);
    f = tj_function_new("while_tiny", (void *)while_tiny, 1, NULL);
    y = NULL;
    double ttj = time_call(f, 1, &x, REPS, &y);
    if (tj_status_of(y) || fabs(tj_tensor_get_f64(y, 0) - tc4[0]) > 1e-3 * fabs(tc4[0])) {
        fprintf(stderr, "bench_control: while_tiny gave %g, the C loop %g (%s)\n",
                tj_tensor_get_f64(y, 0), tc4[0], tj_error_message(y));
        bad++;
    }
    tj_release(y);
    printf("  # while_tiny: %lld iterations of f32[4]\n", (long long)titers);
    bench_report("while_tiny", "ns_per_iter", ttj / titers * 1e9, "ns", "C loop",
                 ttc / titers * 1e9, ttc / ttj);
    tj_function_free(f);
    tj_release(x);

    /* rnn_scan */
    float *xs = malloc(sizeof(float) * RT * RB * RH), *w = malloc(sizeof(float) * RH * RH * 2);
    for (int i = 0; i < RT * RB * RH; i++)
        xs[i] = (float)((i * 31) % 17) / 17.0f - 0.5f;
    for (int i = 0; i < 2 * RH * RH; i++)
        w[i] = ((float)((i * 13) % 23) / 23.0f - 0.5f) * 0.1f;
    tj_tensor *X = tj_tensor_from_data(TJ_F32, 3, (int64_t[]){RT, RB, RH}, xs);
    tj_tensor *W = tj_tensor_from_data(TJ_F32, 2, (int64_t[]){RH, RH}, w);
    tj_tensor *U = tj_tensor_from_data(TJ_F32, 2, (int64_t[]){RH, RH}, w + RH * RH);
    tj_tensor *bias = tj_zeros(TJ_F32, 1, (int64_t[]){RH});
    tj_tensor *h0 = tj_zeros(TJ_F32, 2, (int64_t[]){RB, RH});
    tj_tensor *rargs[5] = {X, h0, W, U, bias};
    f = tj_function_new("rnn_scan", (void *)rnn, 5, NULL);
    y = NULL;
    int rreps = quick ? 3 : REPS;
    double tr = time_call(f, 5, rargs, rreps, &y);
    tj_tensor *yr = tj_call_eager(f, 5, rargs);
    double maxd = 0;
    for (int i = 0; i < RB * RH && !tj_status_of(y) && !tj_status_of(yr); i++)
        maxd = fmax(maxd, fabs(tj_tensor_get_f64(y, i) - tj_tensor_get_f64(yr, i)));
    if (tj_status_of(y) || tj_status_of(yr) || maxd > 1e-4) {
        fprintf(stderr, "bench_control: rnn_scan differs from eager by %g (%s)\n", maxd,
                tj_error_message(y));
        bad++;
    }
    t0 = bench_now();
    tj_release(tj_call_eager(f, 5, rargs));
    double tre = bench_now() - t0;
    double flops = 2.0 * 2 * RB * RH * RH * RT;
    printf("  # rnn_scan: batch %d, hidden %d, %d steps; |compiled - eager| <= %.2g\n", RB, RH, RT,
           maxd);
    bench_report("rnn_scan", "ms", tr * 1e3, "ms", "eager", tre * 1e3, tre / tr);
    bench_report("rnn_scan", "gflops", flops / tr * 1e-9, "GFLOP/s", NULL, 0, 0);
    tj_release(yr);
    tj_function_free(f);
    /* rnn_ta: the same final state through a tensor array, against the scan */
    f = tj_function_new("rnn_ta", (void *)rnn_ta, 5, NULL);
    tj_tensor *yt = NULL;
    double tt = time_call(f, 5, rargs, rreps, &yt);
    maxd = 0;
    for (int i = 0; i < RB * RH && !tj_status_of(y) && !tj_status_of(yt); i++)
        maxd = fmax(maxd, fabs(tj_tensor_get_f64(y, i) - tj_tensor_get_f64(yt, i)));
    if (tj_status_of(yt) || maxd > 1e-5) {
        fprintf(stderr, "bench_control: rnn_ta differs from rnn_scan by %g (%s)\n", maxd,
                tj_error_message(yt));
        bad++;
    }
    bench_report("rnn_ta", "ms", tt * 1e3, "ms", "rnn_scan", tr * 1e3, tr / tt);
    tj_release(yt);
    tj_release(y);
    tj_function_free(f);
    tj_release(X), tj_release(W), tj_release(U), tj_release(bias), tj_release(h0);
    free(xs);
    free(w);

    /* fizzbuzz_1e5 */
    int64_t nfb = 100000, want[4];
    fizzbuzz_c(nfb, want);
    for (int r = 0; r < REPS; r++) {
        double t1 = bench_now();
        fizzbuzz_c(nfb, want);
        v[r] = bench_now() - t1;
    }
    double tfc = bench_median(v, REPS);
    tj_tensor *n = tj_scalar_i64(nfb);
    f = tj_function_new("fizzbuzz", (void *)fizzbuzz, 1, NULL);
    y = NULL;
    double tf = time_call(f, 1, &n, quick ? 3 : REPS, &y);
    for (int k = 0; k < 4; k++)
        if (tj_status_of(y) || tj_tensor_get_f64(tj_tuple_get(y, k), 0) != (double)want[k]) {
            fprintf(stderr, "bench_control: fizzbuzz count %d differs (%s)\n", k,
                    tj_error_message(y));
            bad++;
            break;
        }
    tj_release(y);
    bench_report("fizzbuzz_1e5", "ns_per_iter", tf / nfb * 1e9, "ns", "C loop", tfc / nfb * 1e9,
                 tfc / tf);
    tj_function_free(f);
    tj_release(n);
    return bad ? 1 : 0;
}
