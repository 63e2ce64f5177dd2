/* bench_gpu.c — the CUDA backend on GPU 0 (issue 27; bench/run --gpu, tests/gpu/run.sh). Every
 * row times calls on device inputs to a synchronize (tj_device_synchronize), the median of its
 * repetitions, against a baseline measured in the same run on the same GPU:
 *   copy_2^26           a device-to-device copy of 2^26 f32 (the driver's), the bandwidth bound;
 *   ew_poly_2^26        (x*2+1)*x-3 on 2^26 f32: GB/s read + written, as a fraction of the copy's;
 *   ew_tanh_2^26        tanh(x*a+b)*c-x, a b c scalars: the same;
 *   softmax_8192x8192   row softmax: the same;
 *   matmul_f32_4096     TFLOP/s (cuBLAS where it loads; TJ_CUBLAS=0: the generated kernel);
 *   conv2d_200x200x100  the seed's S25 convolution, GFLOP/s (cuDNN where it loads);
 *   cnn_train_step_b50, _b512  the seed CNN's training step (examples/cnn.h), ms per step;
 *   with TJ_CUDNN=0 these rows are named ..._direct (the generated direct kernels), with
 *   TJ_CUDA_GRAPHS=0 ..._nographs (every kernel launched on its own): the A/Bs that say whether
 *   cuDNN and the graphs earn their place (--convs: only these rows and the host costs);
 *   call_10op_hit       the host's time of a cache-hit call of a 10-op function on 16 elements
 *                       (calls queued back to back, one synchronize at the end), in µs;
 *   call_chain_hit      the same for a function of 6 kernels in a row (a graph from the second
 *                       call; one by one under TJ_CUDA_GRAPHS=0);
 *   first_call_ew       a first call of ew_poly with the NVRTC cache emptied: trace, passes,
 *                       NVRTC, module load, run (ms), beside its steady call.
 * Without a GPU it says why and exits 0 (bench/run runs it everywhere). --smoke: every row at a
 * tiny size (the rows' code on the tests' fake driver and emulation, where no GPU is; its
 * figures mean nothing). bf16 products are not
 * rows: bf16 is a storage type here (arithmetic casts to f32 first). */
#include <math.h>
#include <stdlib.h>

#include "bench/bench.h"
#include "examples/cnn.h"
#include "runtime/cuda.h"

static const char *dev = "cuda:0";
static int smoke; /* --smoke: tiny sizes */

static int reps_for(double ms_one) {
    int r = ms_one > 0 ? (int)(300.0 / ms_one) : 50;
    return r < 5 ? 5 : r > 200 ? 200 : r;
}

/* The median ms of calls of f on args, each to a synchronize; *first: the first call's ms. */
static double time_calls(tj_function *f, int n, tj_tensor **args, double *first) {
    double t0 = bench_now();
    tj_scope_begin();
    tj_tensor *r = tj_call(f, n, args);
    tj_status st = tj_status_of(r) ? tj_status_of(r) : tj_device_synchronize(dev);
    tj_scope_end();
    if (st) {
        fprintf(stderr, "bench_gpu: %s\n", tj_last_error());
        return NAN;
    }
    if (first)
        *first = (bench_now() - t0) * 1e3;
    for (int w = 0; w < 3; w++) { /* warm */
        tj_scope_begin();
        tj_call(f, n, args);
        tj_scope_end();
    }
    tj_device_synchronize(dev);
    double one = 0;
    {
        double a = bench_now();
        tj_scope_begin();
        tj_call(f, n, args);
        tj_scope_end();
        tj_device_synchronize(dev);
        one = (bench_now() - a) * 1e3;
    }
    int reps = reps_for(one);
    double *t = malloc(sizeof *t * (size_t)reps);
    for (int i = 0; i < reps; i++) {
        double a = bench_now();
        tj_scope_begin();
        tj_call(f, n, args);
        tj_scope_end();
        tj_device_synchronize(dev);
        t[i] = (bench_now() - a) * 1e3;
    }
    double m = bench_median(t, reps);
    free(t);
    return m;
}

static tj_tensor *on_gpu(tj_tensor *t) {
    return tj_to_device(t, dev);
}

/* "_direct" when TJ_CUDNN=0 (the generated convolution kernels), "_nographs" when
 * TJ_CUDA_GRAPHS=0, both, or "". */
static const char *conv_route(void) {
    static char r[32];
    const char *d = getenv("TJ_CUDNN"), *g = getenv("TJ_CUDA_GRAPHS");
    snprintf(r, sizeof r, "%s%s", d && !strcmp(d, "0") ? "_direct" : "",
             g && !strcmp(g, "0") ? "_nographs" : "");
    return r;
}

static tj_tensor *ew_poly(tj_tensor *x) {
    return tj_sub(tj_mul(tj_add(tj_mul(x, tj_scalar_f32(2)), tj_scalar_f32(1)), x),
                  tj_scalar_f32(3));
}
static tj_tensor *ew_tanh(tj_tensor *x, tj_tensor *a, tj_tensor *b, tj_tensor *c) {
    return tj_sub(tj_mul(tj_tanh(tj_add(tj_mul(x, a), b)), c), x);
}
static tj_tensor *softmax_rows(tj_tensor *x) {
    return tj_softmax(x, -1);
}
static tj_tensor *matmul(tj_tensor *a, tj_tensor *b) {
    return tj_matmul(a, b);
}
static tj_tensor *conv_bias(tj_tensor *x, tj_tensor *w, tj_tensor *b) {
    return tj_bias_add(tj_conv2d(x, w, NULL, TJ_PAD_VALID, NULL), b);
}
/* Six kernels in a row: softmax, its row sums, a transpose, elementwise, a column sum. */
static tj_tensor *chain(tj_tensor *x, tj_tensor *y) {
    tj_tensor *s = tj_softmax(tj_mul(x, y), -1);
    tj_tensor *r = tj_mul(tj_sum(s, 1, (const int[]){1}, 1), tj_tanh(x));
    tj_tensor *t = tj_transpose(tj_exp(r), NULL);
    return tj_sum(tj_softmax(tj_add(t, t), -1), 1, (const int[]){0}, 0);
}

static tj_tensor *ten_ops(tj_tensor *x, tj_tensor *y) {
    tj_tensor *a = tj_add(x, y), *b = tj_mul(a, x), *c = tj_sub(b, y), *d = tj_tanh(c);
    tj_tensor *e = tj_exp(tj_neg(d)), *f = tj_add(e, a), *g = tj_sum(f, 0, NULL, 0);
    tj_tensor *h = tj_mul(tj_transpose(tj_reshape(f, 2, (const int64_t[]){4, 4}), NULL), g);
    return tj_relu(tj_sub(h, tj_scalar_f32(1)));
}

static const tj_function_options cuda_opts = {.backend = "cuda"};

static double copy_ms(int64_t n) {
    rt_device *d = rt_cuda_device(0);
    size_t bytes = (size_t)n * 4;
    void *a = d->vt->alloc(d, bytes), *b = d->vt->alloc(d, bytes);
    double t[20];
    for (int i = 0; i < 23; i++) {
        double s = bench_now();
        d->vt->copy(d, b, a, bytes);
        d->vt->sync(d);
        if (i >= 3)
            t[i - 3] = (bench_now() - s) * 1e3;
    }
    d->vt->free(d, a, bytes);
    d->vt->free(d, b, bytes);
    return bench_median(t, 20);
}

static void elementwise(double copy) {
    int64_t n = (int64_t)1 << (smoke ? 12 : 26);
    double gb_copy = 2.0 * (double)n * 4 / (copy * 1e6);
    bench_report("copy_2^26", "GB/s", gb_copy, "GB/s", NULL, 0, 0);
    tj_scope_begin();
    tj_tensor *x = on_gpu(tj_random_uniform(TJ_F32, 1, &n, -1, 1, 1));
    tj_function *f = tj_function_new("ew_poly", (void *)ew_poly, 1, &cuda_opts);
    double ms = time_calls(f, 1, &x, NULL), gb = 2.0 * (double)n * 4 / (ms * 1e6);
    bench_report("ew_poly_2^26", "GB/s", gb, "GB/s", "copy", gb_copy, gb / gb_copy);
    tj_function_free(f);
    tj_tensor *args[4] = {x, on_gpu(tj_scalar_f32(0.5f)), on_gpu(tj_scalar_f32(0.1f)),
                          on_gpu(tj_scalar_f32(2))};
    f = tj_function_new("ew_tanh", (void *)ew_tanh, 4, &cuda_opts);
    ms = time_calls(f, 4, args, NULL), gb = 2.0 * (double)n * 4 / (ms * 1e6);
    bench_report("ew_tanh_2^26", "GB/s", gb, "GB/s", "copy", gb_copy, gb / gb_copy);
    tj_function_free(f);
    tj_scope_end();
}

static void softmax(double copy) {
    int64_t d[2] = {smoke ? 64 : 8192, smoke ? 64 : 8192}, n = d[0] * d[1];
    double gb_copy = 2.0 * 4 * (double)((int64_t)1 << (smoke ? 12 : 26)) / (copy * 1e6);
    tj_scope_begin();
    tj_tensor *x = on_gpu(tj_random_uniform(TJ_F32, 2, d, -4, 4, 2));
    tj_function *f = tj_function_new("softmax", (void *)softmax_rows, 1, &cuda_opts);
    double ms = time_calls(f, 1, &x, NULL), gb = 2.0 * (double)n * 4 / (ms * 1e6);
    bench_report("softmax_8192x8192", "GB/s", gb, "GB/s", "copy", gb_copy, gb / gb_copy);
    tj_function_free(f);
    tj_scope_end();
}

static void products(void) {
    int64_t m = smoke ? 32 : 4096, d[2] = {m, m};
    tj_scope_begin();
    tj_tensor *args[2] = {on_gpu(tj_random_uniform(TJ_F32, 2, d, -1, 1, 3)),
                          on_gpu(tj_random_uniform(TJ_F32, 2, d, -1, 1, 4))};
    tj_function *f = tj_function_new("matmul", (void *)matmul, 2, &cuda_opts);
    double ms = time_calls(f, 2, args, NULL), tf = 2.0 * (double)m * m * m / (ms * 1e9);
    bench_report("matmul_f32_4096", "TFLOP/s", tf, "TFLOP/s", NULL, 0, 0);
    tj_function_free(f);
    tj_scope_end();
}

static void convolution(void) {
    tj_scope_begin();
    char name[48];
    int64_t side = smoke ? 10 : 200, ch = smoke ? 4 : 100;
    int64_t xd[4] = {1, side, side, ch}, wd[4] = {3, 3, ch, ch}, bd[1] = {ch};
    tj_tensor *c[3] = {on_gpu(tj_random_uniform(TJ_F32, 4, xd, -1, 1, 5)),
                       on_gpu(tj_random_uniform(TJ_F32, 4, wd, -1, 1, 6)),
                       on_gpu(tj_random_uniform(TJ_F32, 1, bd, -1, 1, 7))};
    tj_function *f = tj_function_new("conv2d_200x200x100", (void *)conv_bias, 3, &cuda_opts);
    double ms = time_calls(f, 3, c, NULL);
    double gf = 2.0 * (double)(side - 2) * (side - 2) * ch * 9 * ch / (ms * 1e6);
    snprintf(name, sizeof name, "conv2d_200x200x100%s", conv_route());
    bench_report(name, "GFLOP/s", gf, "GFLOP/s", NULL, 0, 0);
    tj_function_free(f);
    tj_scope_end();
}

static void cnn_steps(int64_t batch) {
    if (cnn_init(&cnn_model, 7, 1e-3))
        return;
    tj_scope_begin();
    int64_t xd[4] = {batch, 28, 28, 1};
    tj_tensor *x = on_gpu(tj_random_uniform(TJ_F32, 4, xd, 0, 1, 8));
    tj_tensor *y = on_gpu(tj_cast(
        tj_mul(tj_random_uniform(TJ_F32, 1, &batch, 0, 1, 9), tj_scalar_f32(9.99f)), TJ_I32));
    tj_function *f = tj_function_new("cnn_train_step", (void *)cnn_train_step, 2, &cuda_opts);
    double first = 0, ms = time_calls(f, 2, (tj_tensor *[]){x, y}, &first);
    char name[48];
    snprintf(name, sizeof name, "cnn_train_step_b%lld%s", (long long)batch, conv_route());
    bench_report(name, "ms", ms, "ms", NULL, 0, 0);
    bench_report(name, "first_call_ms", first, "ms", "steady", ms, first / ms);
    tj_function_free(f);
    tj_scope_end();
    cnn_free(&cnn_model);
}

/* The host's time of a cache-hit call of fn (2 arguments of dims d) as row `name`. */
static void host_cost_of(const char *name, void *fn, int rank, const int64_t *d) {
    tj_scope_begin();
    tj_tensor *a[2] = {on_gpu(tj_random_uniform(TJ_F32, rank, d, -1, 1, 10)),
                       on_gpu(tj_random_uniform(TJ_F32, rank, d, -1, 1, 11))};
    tj_function *f = tj_function_new(name, fn, 2, &cuda_opts);
    for (int w = 0; w < 3; w++) /* the second call makes a graph where one is made */
        tj_call(f, 2, a);
    tj_device_synchronize(dev);
    double t[9];
    for (int k = 0; k < 9; k++) {
        int calls = smoke ? 20 : 2000;
        double s = bench_now();
        for (int i = 0; i < calls; i++) {
            tj_scope_begin();
            tj_call(f, 2, a);
            tj_scope_end();
        }
        t[k] = (bench_now() - s) * 1e6 / calls; /* host time: the launches are queued */
        tj_device_synchronize(dev);
    }
    char row[64];
    snprintf(row, sizeof row, "%s%s", name, conv_route());
    bench_report(row, "us_host", bench_median(t, 9), "us", NULL, 0, 0);
    tj_function_free(f);
    tj_scope_end();
}

static void host_cost(void) {
    int64_t n = 16, d[2] = {4, 8};
    host_cost_of("call_10op_hit", (void *)ten_ops, 1, &n);
    host_cost_of("call_chain_hit", (void *)chain, 2, d);
}

static void first_call(void) {
    int64_t n = smoke ? 1 << 10 : 1 << 20;
    tj_scope_begin();
    tj_cache_clear();
    tj_tensor *x = on_gpu(tj_random_uniform(TJ_F32, 1, &n, -1, 1, 12));
    tj_function_options o = {.backend = "cuda", .name = "ew_first"};
    tj_function *f = tj_function_new("ew_first", (void *)ew_tanh, 4, &o);
    tj_tensor *args[4] = {x, on_gpu(tj_scalar_f32(0.3f)), on_gpu(tj_scalar_f32(0.2f)),
                          on_gpu(tj_scalar_f32(1.5f))};
    double first = 0, ms = time_calls(f, 4, args, &first);
    bench_report("first_call_ew", "ms", first, "ms", "steady", ms, first / ms);
    tj_function_free(f);
    tj_scope_end();
}

int main(int argc, char **argv) {
    const char *why = tj_device_unavailable("cuda");
    if (why || tj_backend_unavailable("cuda")) {
        printf("bench_gpu: skipped: %s\n", why ? why : tj_backend_unavailable("cuda"));
        return 0;
    }
    int quick = bench_quick(argc, argv), convs = 0;
    for (int i = 1; i < argc; i++)
        smoke |= !strcmp(argv[i], "--smoke"), convs |= !strcmp(argv[i], "--convs");
    if (smoke)
        printf("bench_gpu: --smoke: tiny sizes, figures not meaningful\n");
    if (!convs) {
        double copy = copy_ms((int64_t)1 << (smoke ? 12 : 26));
        first_call();
        elementwise(copy);
        softmax(copy);
        products();
    }
    host_cost();
    convolution();
    cnn_steps(smoke ? 2 : 50);
    if (!quick && !smoke)
        cnn_steps(512);
    return 0;
}
