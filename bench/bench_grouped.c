/* bench_grouped.c — grouped and depthwise convolutions (issue 23, item 11), the ShuffleNet unit
 * at 28x28 with 240 channels: a 1x1 convolution in 3 groups, relu, a 3x3 depthwise convolution,
 * a 1x1 convolution in 3 groups, 8 units deep, batch 1, f32. Compiled as tracejit's grouped op
 * (one conv2d per layer) against the same network written group by group (one conv2d per group,
 * concatenated: what the ONNX importer made before, 243 convolutions here instead of 24): per
 * call (median of repeated calls) and first call (trace + passes + compile, no disk cache). */
#include "bench/bench.h"

enum { N = 1, H = 28, W = 28, C = 240, G = 3, UNITS = 8 };
static int split;
static tj_tensor *wa[UNITS], *wd[UNITS], *wb[UNITS];

static tj_tensor *conv(tj_tensor *x, tj_tensor *w, int groups) {
    if (!split || groups == 1)
        return tj_conv2d(x, w, NULL, TJ_PAD_SAME, NULL);
    const int64_t *xd = tj_tensor_dims(x), *fd = tj_tensor_dims(w);
    int64_t cg = xd[3] / groups, og = fd[3] / groups;
    tj_tensor *ys[256];
    for (int64_t k = 0; k < groups; k++) {
        int64_t xb[4] = {0, 0, 0, k * cg}, xe[4] = {xd[0], xd[1], xd[2], (k + 1) * cg};
        int64_t wb_[4] = {0, 0, 0, k * og}, we[4] = {fd[0], fd[1], fd[2], (k + 1) * og};
        ys[k] = tj_conv2d(tj_slice(x, xb, xe, NULL), tj_slice(w, wb_, we, NULL), NULL, TJ_PAD_SAME,
                          NULL);
    }
    return tj_concat((int)groups, ys, 3);
}

static tj_tensor *net(tj_tensor *x) {
    for (int u = 0; u < UNITS; u++) {
        tj_tensor *h = tj_relu(conv(x, wa[u], G));
        h = conv(h, wd[u], C); /* depthwise */
        x = tj_relu(tj_add(conv(h, wb[u], G), x));
    }
    return x;
}

static double median_call_ms(tj_function *f, tj_tensor *x, int reps) {
    double t[64];
    for (int r = -1; r < reps; r++) {
        double t0 = bench_now();
        tj_tensor *y = tj_call(f, 1, &x);
        if (tj_status_of(y)) {
            fprintf(stderr, "bench_grouped: %s\n", tj_error_message(y));
            exit(1);
        }
        tj_release(y);
        if (r >= 0)
            t[r] = 1e3 * (bench_now() - t0);
    }
    return bench_median(t, reps);
}

int main(int argc, char **argv) {
    bench_native_tier();
    int reps = bench_quick(argc, argv) ? 9 : 31;
    setenv("TJ_CACHE", "0", 1); /* first calls compile */
    for (int u = 0; u < UNITS; u++) {
        wa[u] = tj_random_uniform(TJ_F32, 4, (int64_t[]){1, 1, C / G, C}, -0.1, 0.1, 10 + u);
        wd[u] = tj_random_uniform(TJ_F32, 4, (int64_t[]){3, 3, 1, C}, -0.1, 0.1, 30 + u);
        wb[u] = tj_random_uniform(TJ_F32, 4, (int64_t[]){1, 1, C / G, C}, -0.1, 0.1, 50 + u);
    }
    tj_tensor *x = tj_random_uniform(TJ_F32, 4, (int64_t[]){N, H, W, C}, -1, 1, 1);
    double first[2], call[2];
    for (split = 0; split < 2; split++) {
        tj_function *f = tj_function_new(split ? "by_groups" : "grouped", (void *)net, 1, NULL);
        double t0 = bench_now();
        tj_release(tj_call(f, 1, &x));
        first[split] = 1e3 * (bench_now() - t0);
        call[split] = median_call_ms(f, x, reps);
        tj_function_free(f);
    }
    bench_report("shufflenet_units_x8", "ms_per_call", call[0], "ms", "group by group", call[1],
                 call[1] / call[0]);
    bench_report("shufflenet_units_x8", "ms_first_call", first[0], "ms", "group by group", first[1],
                 first[1] / first[0]);
    return 0;
}
