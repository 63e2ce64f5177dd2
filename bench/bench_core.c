/* bench_core.c — the core benchmarks of the foundation: cache-hit call overhead, the seed's
 * power(x, 100) on a 10x10 int32 matrix (S25: eager vs compiled, against the same loop
 * hand-written in C and compiled -O3 -march=native in this file). Compile latency is in
 * bench_cpu.c (compile_50op, compile_disk_hit). Timings are medians; ratios are measured in the
 * same run. */
#include <stdint.h>

#include "bench.h"
#include "tracejit.h"

static tj_tensor *add2(tj_tensor *a, tj_tensor *b) {
    return tj_add(a, b);
}

static tj_tensor *power100(tj_tensor *x) {
    tj_tensor *r = tj_eye(TJ_I32, 10, 10);
    for (int i = 0; i < 100; i++)
        r = tj_matmul(x, r);
    return r;
}

__attribute__((noinline)) static void power_c(const int32_t *x, int32_t *r) {
    int32_t t[100];
    for (int i = 0; i < 100; i++)
        r[i] = i / 10 == i % 10;
    for (int s = 0; s < 100; s++) {
        for (int i = 0; i < 10; i++)
            for (int j = 0; j < 10; j++) {
                uint32_t acc = 0;
                for (int k = 0; k < 10; k++)
                    acc += (uint32_t)x[i * 10 + k] * (uint32_t)r[k * 10 + j];
                t[i * 10 + j] = (int32_t)acc;
            }
        for (int i = 0; i < 100; i++)
            r[i] = t[i];
    }
}

#define REPS 15

int main(int argc, char **argv) {
    bench_native_tier();
    int quick = bench_quick(argc, argv);
    int iters = quick ? 20000 : 200000;
    double v[REPS];
    printf("%-24s %-14s %12s %-8s %-26s %12s  %7s\n", "bench", "metric", "value", "unit",
           "baseline", "base value", "ratio");

    /* cache-hit call overhead: two 1-element f32 inputs, result allocated by the call */
    tj_function *f = tj_function_new("add2", (void *)add2, 2, NULL);
    tj_tensor *a = tj_scalar_f32(1), *b = tj_scalar_f32(2);
    tj_tensor *args[2] = {a, b};
    tj_release(tj_call(f, 2, args));
    for (int r = 0; r < REPS; r++) {
        double t0 = bench_now();
        for (int i = 0; i < iters; i++)
            tj_release(tj_call(f, 2, args));
        v[r] = (bench_now() - t0) / iters * 1e9;
    }
    bench_report("call_overhead", "ns_alloc", bench_median(v, REPS), "ns", NULL, 0, 0);
    /* the same call writing into a caller-provided tensor */
    tj_tensor *out = tj_scalar_f32(0);
    for (int r = 0; r < REPS; r++) {
        double t0 = bench_now();
        for (int i = 0; i < iters; i++)
            tj_call_into(f, 2, args, 1, &out);
        v[r] = (bench_now() - t0) / iters * 1e9;
    }
    if (tj_tensor_get_f64(out, 0) != 3) {
        fprintf(stderr, "bench_core: call_into gave %g, expected 3\n", tj_tensor_get_f64(out, 0));
        return 1;
    }
    bench_report("call_overhead", "ns_into", bench_median(v, REPS), "ns", NULL, 0, 0);
    tj_release(out);
    tj_function_free(f);

    /* S25: power(x, 100), 10x10 int32 */
    int32_t xs[100], ref[100];
    for (int i = 0; i < 100; i++)
        xs[i] = (i * 7 + 3) % 5 - 2;
    int64_t d[2] = {10, 10};
    tj_tensor *x = tj_tensor_from_data(TJ_I32, 2, d, xs);
    tj_function *pw = tj_function_new("power", (void *)power100, 1, NULL);
    tj_tensor *y = tj_call(pw, 1, &x);
    power_c(xs, ref);
    int ok = tj_status_of(y) == TJ_OK && memcmp(tj_tensor_data(y), ref, sizeof ref) == 0;
    tj_release(y);
    if (!ok) {
        fprintf(stderr, "bench_core: power results differ from the C loop\n");
        return 1;
    }
    int piters = quick ? 50 : 500;
    double vc[REPS], ve[REPS], vg[REPS];
    for (int r = 0; r < REPS; r++) {
        double t0 = bench_now();
        for (int i = 0; i < piters; i++)
            tj_release(tj_call(pw, 1, &x));
        vc[r] = (bench_now() - t0) / piters * 1e6;
        t0 = bench_now();
        for (int i = 0; i < piters; i++) {
            tj_scope_begin();
            power100(x);
            tj_scope_end();
        }
        ve[r] = (bench_now() - t0) / piters * 1e6;
        t0 = bench_now();
        for (int i = 0; i < piters * 10; i++)
            power_c(xs, ref);
        vg[r] = (bench_now() - t0) / (piters * 10) * 1e6;
    }
    double mc = bench_median(vc, REPS), me = bench_median(ve, REPS), mg = bench_median(vg, REPS);
    bench_report("power_10x10_i32", "us_compiled", mc, "us", "C loop gcc -O3 -march=native", mg,
                 mg / mc);
    bench_report("power_10x10_i32", "us_eager", me, "us", "compiled (tracejit)", mc, mc / me);
    tj_function_free(pw);
    tj_release(x);

    return 0;
}
