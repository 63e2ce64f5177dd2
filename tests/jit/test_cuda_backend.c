/* The CUDA backend's behaviour around its kernels, on a GPU (tests/gpu/run.sh) or, in CI, on the
 * fake driver of tests/cuda/fake_cuda.c with its kernels compiled for the host (TJ_CUDA_EMULATE):
 *  - results stay on the GPU ("cuda:0", or TJ_CUDA_DEVICE's: CMake's _device1 run) unless
 *    output_device is "cpu"; host arguments and any GPU's are taken; tj_call_into writes host
 *    tensors;
 *  - variables live on the GPU across calls: the host reads the current value, a host assign is
 *    what the next call reads;
 *  - tj_print and host callbacks run on every call, in order, with host values; a while loop and
 *    a cond (run on the host around the kernels) give the interpreter's results;
 *  - the seed CNN's training step: 3 steps at batch 4 give the interpreter's losses and variables;
 *  - faults: a launch the driver refuses names the kernel and the function, and the process goes
 *    on (FAKE_CUDA=launch_fail, CMake's _launch_fail run); a label out of range names the op;
 *    check numerics names the kernel that made a NaN on the GPU; (FAKE_CUDA=cubin) NVRTC's cubins,
 *    compiled in parts at once and cached, reach the driver with every kernel in them.
 * Without a GPU, and without the fake driver and the emulation, it says so and skips (77). */
#include <dlfcn.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../examples/cnn.h"
#include "check.h"

static const tj_function_options on_gpu = {.backend = "cuda"};
static char gpu[16] = "cuda:0"; /* TJ_CUDA_DEVICE's (CMake runs this again with 1) */
static const tj_function_options on_gpu_host_out = {.backend = "cuda", .output_device = "cpu"};
static const tj_function_options on_interp = {.backend = "interp", .tiered = -1};

static tj_tensor *affine(tj_tensor *x, tj_tensor *a) {
    return tj_add(tj_mul(x, a), tj_scalar_f32(1));
}

static tj_tensor *vec(const float *v, int64_t n) {
    return tj_tensor_from_data(TJ_F32, 1, &n, v);
}

static void outputs_and_inputs(void) {
    tj_scope_begin();
    tj_function *f = tj_function_new("affine", (void *)affine, 2, &on_gpu);
    tj_tensor *x = vec((const float[]){1, 2, 3}, 3), *a = vec((const float[]){2, 2, 2}, 3);
    tj_tensor *y = tj_call(f, 2, (tj_tensor *[]){x, a});
    CHECK_MSG(tj_status_of(y) == TJ_OK, "%s", tj_error_message(y));
    CHECK_MSG(!strcmp(tj_tensor_device(y), gpu), "%s", tj_tensor_device(y)); /* left there */
    CHECK(tj_tensor_data(y) == NULL);                                        /* not host memory */
    CHECK(tj_tensor_get_f64(y, 2) == 7);
    CHECK_EQ_INT(tj_device_synchronize(gpu), TJ_OK); /* the queued kernels done */
    CHECK_EQ_INT(tj_device_synchronize("cpu"), TJ_OK);
    CHECK_EQ_INT(tj_device_synchronize("tpu"), TJ_ERR_INVALID);
    CHECK_HAS(tj_last_error(), "unknown device 'tpu'");
    /* GPU arguments, and one of each */
    tj_tensor *xg = tj_to_device(x, gpu), *ag = tj_to_device(a, gpu);
    tj_tensor *y2 = tj_call(f, 2, (tj_tensor *[]){xg, a});
    tj_tensor *y3 = tj_call(f, 2, (tj_tensor *[]){xg, ag});
    CHECK_MSG(tj_status_of(y2) == TJ_OK && tj_status_of(y3) == TJ_OK, "%s %s", tj_error_message(y2),
              tj_error_message(y3));
    CHECK(tj_tensor_get_f64(y2, 0) == 3 && tj_tensor_get_f64(y3, 1) == 5);
    CHECK_EQ_INT(tj_function_trace_count(f), 1); /* the device is not part of the signature */
    if (strcmp(gpu, "cuda:0") != 0) { /* an argument on another GPU: an error naming both */
        tj_tensor *other = tj_call(f, 2, (tj_tensor *[]){tj_to_device(x, "cuda:0"), a});
        CHECK(tj_status_of(other) == TJ_ERR_INVALID);
        CHECK_HAS(tj_error_message(other), "argument 0 is on cuda:0");
        CHECK_HAS(tj_error_message(other), gpu);
    }
    /* tj_call_into a host tensor */
    tj_tensor *out = tj_zeros(TJ_F32, 1, (const int64_t[]){3});
    CHECK_EQ_INT(tj_call_into(f, 2, (tj_tensor *[]){x, a}, 1, &out), TJ_OK);
    CHECK(((const float *)tj_tensor_data(out))[1] == 5);
    tj_function_free(f);
    /* results to the host */
    f = tj_function_new("affine", (void *)affine, 2, &on_gpu_host_out);
    tj_tensor *h = tj_call(f, 2, (tj_tensor *[]){xg, a});
    CHECK(!strcmp(tj_tensor_device(h), "cpu") && ((const float *)tj_tensor_data(h))[0] == 3);
    tj_function_free(f);
    tj_function_options bad = {.output_device = "cuda:3"};
    CHECK(tj_function_new("affine", (void *)affine, 2, &bad) == NULL);
    CHECK_HAS(tj_last_error(), "output_device 'cuda:3'");
    tj_scope_end();
}

/* ---- variables ------------------------------------------------------------------------------ */
static tj_variable *counter;

static tj_tensor *bump(tj_tensor *x) {
    tj_tensor *v = tj_assign_add(counter, x);
    return tj_mul(v, tj_scalar_f32(2));
}

static void variables(void) {
    tj_scope_begin();
    counter = tj_variable_new(tj_zeros(TJ_F32, 1, (const int64_t[]){2}), "counter");
    tj_function *f = tj_function_new("bump", (void *)bump, 1, &on_gpu);
    tj_tensor *one = vec((const float[]){1, 10}, 2);
    for (int i = 0; i < 3; i++) {
        tj_tensor *r = tj_call(f, 1, &one);
        CHECK_MSG(tj_status_of(r) == TJ_OK, "%s", tj_error_message(r));
        CHECK(tj_tensor_get_f64(r, 1) == 20.0 * (i + 1));
    }
    tj_tensor *v = tj_variable_read(counter); /* the host's copy of the GPU's value */
    CHECK(!strcmp(tj_tensor_device(v), "cpu"));
    CHECK(tj_tensor_get_f64(v, 0) == 3 && tj_tensor_get_f64(v, 1) == 30);
    tj_assign(counter, vec((const float[]){100, 200}, 2)); /* the next call reads it */
    tj_tensor *r = tj_call(f, 1, &one);
    CHECK(tj_tensor_get_f64(r, 0) == 202);
    CHECK(tj_tensor_get_f64(tj_variable_read(counter), 1) == 210);
    tj_function_free(f);
    tj_variable_free(counter);
    tj_scope_end();
}

/* ---- effects and control flow -----------------------------------------------------------------
 */
static int printed, called;
static char last_line[256];
static void sink(const char *line, void *user) {
    (void)user;
    printed++;
    snprintf(last_line, sizeof last_line, "%s", line);
}
static void callback(void *user, tj_tensor *x) {
    (void)user;
    called += (int)tj_tensor_get_f64(x, 0);
}

static tj_tensor *below(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    return tj_less(tj_sum(a[0], 0, NULL, 0), tj_scalar_f32(100));
}
static tj_tensor *grow(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    return tj_add(tj_mul(a[0], tj_scalar_f32(1.5f)), tj_scalar_f32(1));
}
static tj_tensor *neg_body(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    return tj_neg(a[0]);
}
static tj_tensor *same_body(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    return tj_tanh(a[0]);
}

static tj_tensor *effects(tj_tensor *x) {
    tj_tensor *y = tj_exp(x);
    tj_print("y: ", 1, &y);
    tj_host_callback((void *)callback, NULL, 1, &x);
    tj_tensor *w = tj_while_loop(below, grow, 1, &y, NULL);
    tj_tensor *c = tj_cond(tj_greater(tj_sum(x, 0, NULL, 0), tj_scalar_f32(0)), neg_body, same_body,
                           1, &w, NULL);
    return tj_tuple(2, (tj_tensor *[]){w, tj_mul(c, tj_scalar_f32(2))});
}

static void effects_and_loops(void) {
    tj_scope_begin();
    tj_set_print_sink(sink, NULL);
    tj_function *f = tj_function_new("effects", (void *)effects, 1, &on_gpu);
    tj_function *r = tj_function_new("effects", (void *)effects, 1, &on_interp);
    tj_tensor *x = vec((const float[]){1, 0.5f, -3}, 3);
    for (int i = 0; i < 2; i++) {
        tj_tensor *g = tj_call(f, 1, &x);
        CHECK_MSG(tj_status_of(g) == TJ_OK, "%s", tj_error_message(g));
        CHECK_EQ_INT(printed, i + 1);
        CHECK_MSG(strstr(last_line, "y: ") == last_line && strstr(last_line, "[2.71828"), "%s",
                  last_line);
        CHECK_EQ_INT(called, i + 1);
        tj_tensor *e = tj_call(r, 1, &x); /* the interpreter: prints and calls too */
        for (int k = 0; k < 2; k++)
            for (int j = 0; j < 3; j++)
                CHECK(fabs(tj_tensor_get_f64(tj_tuple_get(g, k), j) -
                           tj_tensor_get_f64(tj_tuple_get(e, k), j)) < 1e-4);
        printed = called = i + 1;
    }
    tj_set_print_sink(NULL, NULL);
    tj_function_free(f);
    tj_function_free(r);
    tj_scope_end();
}

/* ---- the seed CNN --------------------------------------------------------------------------- */
static void train(const tj_function_options *o, double *losses, tj_tensor **vars) {
    if (cnn_init(&cnn_model, 7, 1e-3)) {
        CHECK_MSG(0, "cnn_init: %s", tj_last_error());
        return;
    }
    tj_function *f = tj_function_new("cnn_train_step", (void *)cnn_train_step, 2, o);
    for (int s = 0; s < 3; s++) {
        tj_scope_begin();
        int64_t xd[4] = {4, 28, 28, 1}, yd[1] = {4};
        tj_tensor *x = tj_random_uniform(TJ_F32, 4, xd, 0, 1, 40 + (uint64_t)s);
        tj_tensor *y = tj_cast(
            tj_mul(tj_random_uniform(TJ_F32, 1, yd, 0, 1, 50 + (uint64_t)s), tj_scalar_f32(9.99f)),
            TJ_I32);
        tj_tensor *l = tj_call(f, 2, (tj_tensor *[]){x, y});
        CHECK_MSG(tj_status_of(l) == TJ_OK, "step %d: %s", s, tj_error_message(l));
        losses[s] = tj_status_of(l) ? NAN : tj_tensor_get_f64(l, 0);
        tj_scope_end();
    }
    for (int k = 0; k < CNN_NVARS; k++)
        vars[k] = tj_variable_read(cnn_model.vars[k]);
    tj_function_free(f);
    cnn_free(&cnn_model);
}

static void cnn_steps(void) {
    tj_scope_begin();
    double lg[3], lr[3];
    tj_tensor *vg[CNN_NVARS], *vr[CNN_NVARS];
    train(&on_gpu, lg, vg);
    train(&on_interp, lr, vr);
    for (int s = 0; s < 3; s++)
        CHECK_MSG(fabs(lg[s] - lr[s]) <= 1e-4 * fabs(lr[s]), "step %d: cuda %.7g, interp %.7g", s,
                  lg[s], lr[s]);
    for (int k = 0; k < CNN_NVARS; k++) {
        double worst = 0;
        for (int64_t i = 0; i < tj_tensor_numel(vr[k]); i++)
            worst = fmax(worst, fabs(tj_tensor_get_f64(vg[k], i) - tj_tensor_get_f64(vr[k], i)));
        CHECK_MSG(worst < 1e-4, "variable %d differs by %g after 3 steps", k, worst);
    }
    printf("cnn: losses %.5f %.5f %.5f on cuda, %.5f %.5f %.5f interpreted\n", lg[0], lg[1], lg[2],
           lr[0], lr[1], lr[2]);
    tj_scope_end();
}

/* ---- CUDA graphs ---------------------------------------------------------------------------- */
/* The fake driver's counter `name` (tests/cuda/fake_cuda.c), or -1 without the fake. */
static int fake_count(const char *name) {
    const char *path = getenv("TJ_CUDA_DRIVER");
    void *lib = path && *path ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : NULL;
    int (*count)(void) = lib ? (int (*)(void))dlsym(lib, name) : NULL;
    int n = count ? count() : -1;
    if (lib)
        dlclose(lib);
    return n;
}

/* Several kernels in a row (a graph segment): a row softmax, its row sums, and elementwise. */
static tj_tensor *chain(tj_tensor *x, tj_tensor *y) {
    tj_tensor *s = tj_softmax(tj_mul(x, y), -1);
    return tj_add(tj_mul(tj_sum(s, 1, (const int[]){1}, 1), tj_tanh(x)), tj_exp(y));
}

/* Calls with new inputs each time (host and GPU ones): the first launches one by one, the second
 * makes the graph, the later ones move its nodes' buffers; every call's result is its own
 * (outputs are not reused by the next replay) and equals the interpreter's. */
static void graphs(void) {
    tj_scope_begin();
    tj_function *fg = tj_function_new("chain", (void *)chain, 2, &on_gpu);
    tj_function *fr = tj_function_new("chain", (void *)chain, 2, &on_interp);
    int launches0 = fake_count("fake_cuda_graph_launches"),
        sets0 = fake_count("fake_cuda_graph_node_sets");
    enum { CALLS = 5 };
    tj_tensor *got[CALLS], *want[CALLS];
    for (int c = 0; c < CALLS; c++) {
        int64_t d[2] = {3, 7};
        tj_tensor *x = tj_random_uniform(TJ_F32, 2, d, -2, 2, 100 + (uint64_t)c);
        tj_tensor *y = tj_random_uniform(TJ_F32, 2, d, -2, 2, 200 + (uint64_t)c);
        if (c % 2)
            x = tj_to_device(x, gpu);
        got[c] = tj_call(fg, 2, (tj_tensor *[]){x, y});
        want[c] = tj_call(fr, 2, (tj_tensor *[]){x, y});
        CHECK_MSG(tj_status_of(got[c]) == TJ_OK, "call %d: %s", c, tj_error_message(got[c]));
    }
    for (int c = 0; c < CALLS; c++) {
        double worst = 0;
        for (int64_t i = 0; i < 21 && tj_status_of(got[c]) == TJ_OK; i++)
            worst = fmax(worst, fabs(tj_tensor_get_f64(got[c], i) - tj_tensor_get_f64(want[c], i)));
        CHECK_MSG(worst < 1e-5, "call %d differs from the interpreter's by %g", c, worst);
    }
    const char *off = getenv("TJ_CUDA_GRAPHS");
    int launches = fake_count("fake_cuda_graph_launches") - launches0;
    int sets = fake_count("fake_cuda_graph_node_sets") - sets0;
    if (launches0 >= 0 && !(off && !strcmp(off, "0"))) {
        CHECK_MSG(launches == CALLS - 1, "%d graph launches for %d calls", launches, CALLS);
        CHECK_MSG(sets > 0, "no graph node was moved to the new buffers");
    } else if (launches0 >= 0) {
        CHECK_EQ_INT(launches, 0);
    }
    printf("graphs: %d launches, %d nodes set over %d calls\n", launches, sets, CALLS);
    /* the same GPU inputs, each result dropped: the allocator hands out the same blocks (the
     * lowest of their class), so once made the graph runs as it is, no node set */
    int64_t d[2] = {3, 7};
    tj_tensor *x = tj_to_device(tj_random_uniform(TJ_F32, 2, d, -2, 2, 7), gpu);
    tj_tensor *y = tj_to_device(tj_random_uniform(TJ_F32, 2, d, -2, 2, 8), gpu);
    for (int c = 0; c < 6; c++) {
        if (c == 3)
            sets0 = fake_count("fake_cuda_graph_node_sets");
        tj_scope_begin();
        tj_tensor *r = tj_call(fg, 2, (tj_tensor *[]){x, y});
        CHECK_MSG(tj_status_of(r) == TJ_OK, "%s", tj_error_message(r));
        tj_scope_end();
    }
    if (sets0 >= 0)
        CHECK_EQ_INT(fake_count("fake_cuda_graph_node_sets") - sets0, 0);
    tj_function_free(fg);
    tj_function_free(fr);
    tj_scope_end();
}

/* ---- faults ---------------------------------------------------------------------------------- */
static tj_tensor *xent(tj_tensor *logits, tj_tensor *labels) {
    return tj_sparse_categorical_crossentropy(labels, tj_softmax(logits, -1), 0);
}

/* The cross-entropy with kernels queued after it: its label check is waited for at the call's
 * end, not between the launches. */
static tj_tensor *xent_then(tj_tensor *logits, tj_tensor *labels) {
    tj_tensor *l = xent(logits, labels);
    return tj_sum(tj_exp(tj_mul(l, tj_sum(tj_tanh(logits), 0, NULL, 0))), 0, NULL, 0);
}

/* Gathers on both axes, int32 and int64 indices, and work after them. */
static tj_tensor *gathers(tj_tensor *p, tj_tensor *i0, tj_tensor *i1) {
    tj_tensor *a = tj_gather(p, i0, 0), *b = tj_gather(p, i1, 1);
    return tj_tuple(3, (tj_tensor *[]){a, b, tj_tanh(tj_sum(a, 0, NULL, 0))});
}

static tj_tensor *makes_nan(tj_tensor *x) {
    return tj_mul(tj_log(x), tj_scalar_f32(2));
}

static void faults(void) {
    tj_scope_begin();
    tj_function *f = tj_function_new("xent", (void *)xent, 2, &on_gpu);
    tj_tensor *lg = tj_zeros(TJ_F32, 2, (const int64_t[]){2, 3});
    tj_tensor *lb = tj_tensor_from_data(TJ_I32, 1, (const int64_t[]){2}, (const int32_t[]){1, 7});
    tj_tensor *r = tj_call(f, 2, (tj_tensor *[]){lg, lb});
    CHECK(tj_status_of(r) != TJ_OK);
    CHECK_HAS(tj_error_message(r), "label 7 of row 1 is outside [0, 3)");
    tj_function_free(f);
    /* int64 labels, two bad rows: the first is named, its label too large to say */
    f = tj_function_new("xent_then", (void *)xent_then, 2, &on_gpu);
    lg = tj_zeros(TJ_F32, 2, (const int64_t[]){3, 3});
    lb = tj_tensor_from_data(TJ_I64, 1, (const int64_t[]){3},
                             (const int64_t[]){0, 5000000000LL, -2});
    r = tj_call(f, 2, (tj_tensor *[]){lg, lb});
    CHECK(tj_status_of(r) == TJ_ERR_RUNTIME);
    CHECK_HAS(tj_error_message(r), "the label of row 1 is outside [0, 3)");
    lb = tj_tensor_from_data(TJ_I64, 1, (const int64_t[]){3}, (const int64_t[]){0, 2, -2});
    r = tj_call(f, 2, (tj_tensor *[]){lg, lb});
    CHECK_HAS(tj_error_message(r), "label -2 of row 2 is outside [0, 3)");
    lb = tj_tensor_from_data(TJ_I64, 1, (const int64_t[]){3}, (const int64_t[]){0, 2, 1});
    r = tj_call(f, 2, (tj_tensor *[]){lg, lb}); /* good labels: the call goes on */
    CHECK_MSG(tj_status_of(r) == TJ_OK, "%s", tj_error_message(r));
    tj_function_free(f);
    /* gathers on the GPU: values as the interpreter's; a bad index is the call's error, in the
     * host kernel's words (the first bad position) */
    f = tj_function_new("gathers", (void *)gathers, 3, &on_gpu_host_out);
    tj_function *fi = tj_function_new("gathers", (void *)gathers, 3, &on_interp);
    tj_tensor *p = tj_random_uniform(TJ_F32, 2, (const int64_t[]){5, 4}, -1, 1, 9);
    tj_tensor *i1 =
        tj_tensor_from_data(TJ_I64, 2, (const int64_t[]){2, 2}, (const int64_t[]){3, 0, 1, 3});
    const int32_t good[3] = {4, 0, 2}, bad[3] = {1, 7, -1};
    tj_tensor *i0 = tj_tensor_from_data(TJ_I32, 1, (const int64_t[]){3}, good);
    r = tj_call(f, 3, (tj_tensor *[]){p, i0, i1});
    tj_tensor *ri = tj_call(fi, 3, (tj_tensor *[]){p, i0, i1});
    CHECK_MSG(tj_status_of(r) == TJ_OK, "gathers: %s", tj_error_message(r));
    for (int k = 0; k < 3 && tj_status_of(r) == TJ_OK; k++) {
        const tj_tensor *a = tj_tuple_get(r, k), *b = tj_tuple_get(ri, k);
        CHECK_EQ_INT(tj_tensor_numel(a), tj_tensor_numel(b));
        for (int64_t e = 0; e < tj_tensor_numel(b); e++)
            CHECK_MSG(fabs(tj_tensor_get_f64(a, e) - tj_tensor_get_f64(b, e)) < 1e-6,
                      "gather output %d element %lld", k, (long long)e);
    }
    i0 = tj_tensor_from_data(TJ_I32, 1, (const int64_t[]){3}, bad);
    r = tj_call(f, 3, (tj_tensor *[]){p, i0, i1});
    ri = tj_call(fi, 3, (tj_tensor *[]){p, i0, i1});
    CHECK(tj_status_of(r) == TJ_ERR_RUNTIME);
    CHECK_HAS(tj_error_message(r), "gather: index 7 out of range [0, 5) on axis 0 of params [5,4]");
    CHECK_HAS(tj_error_message(ri),
              "gather: index 7 out of range [0, 5) on axis 0 of params [5,4]");
    tj_function_free(fi);
    tj_function_free(f);
    /* check numerics: the kernel on the GPU that made the NaN */
    tj_enable_check_numerics();
    f = tj_function_new("makes_nan", (void *)makes_nan, 1, &on_gpu);
    tj_tensor *x = vec((const float[]){1, -1}, 2);
    r = tj_call(f, 1, &x);
    CHECK(tj_status_of(r) != TJ_OK);
    CHECK_HAS(tj_error_message(r), gpu);
    CHECK_HAS(tj_error_message(r), "makes_nan");
    tj_disable_check_numerics();
    tj_function_free(f);
    tj_scope_end();
}

/* FAKE_CUDA=launch_fail: every launch fails; the error names the kernel and the function, the
 * process goes on and the host still computes. */
static void launch_fails(void) {
    tj_scope_begin();
    tj_function *f = tj_function_new("affine", (void *)affine, 2, &on_gpu);
    tj_tensor *x = vec((const float[]){1, 2, 3}, 3);
    tj_tensor *y = tj_call(f, 2, (tj_tensor *[]){x, x});
    CHECK(tj_status_of(y) == TJ_ERR_RUNTIME);
    CHECK_HAS(tj_error_message(y), "kernel tjk0 of function 'affine' failed");
    CHECK_HAS(tj_error_message(y), "CUDA_ERROR_LAUNCH_FAILED");
    CHECK(tj_tensor_get_f64(affine(x, x), 2) == 10); /* eager, on the host */
    tj_function_free(f);
    tj_scope_end();
}

/* FAKE_CUDA=cubin (no emulation): NVRTC's real cubins reach the driver, which finds every
 * kernel in its part's module and runs none; the compile log says how many parts, and a second
 * function of the same graph takes them all from the cache. */
static char log_buf[512];
static const char *log_line = log_buf;
static void log_sink(const char *topic, const char *line, void *user) {
    (void)topic, (void)user;
    if (strstr(line, "modules for sm_"))
        snprintf(log_buf, sizeof log_buf, "%s", line);
}

static void cubins(void) {
    tj_scope_begin();
    tj_set_log(log_sink, NULL);
    tj_set_log_topics("compile");
    tj_tensor *x = tj_range(TJ_F32, 0, 3, 1);
    CHECK_EQ_INT(tj_cache_clear(), TJ_OK); /* compiled by the first round, found by the second */
    for (int round = 0; round < 2; round++) {
        tj_function *f = tj_function_new("affine", (void *)affine, 2, &on_gpu);
        tj_tensor *y = tj_call(f, 2, (tj_tensor *[]){x, x});
        CHECK(tj_status_of(y) == TJ_ERR_RUNTIME);
        CHECK_HAS(tj_error_message(y), "of function 'affine' failed: CUDA_ERROR_NO_BINARY_FOR_GPU");
        CHECK_HAS(log_line, "cuda: affine: 1 kernels in 1 modules for sm_90");
        CHECK_HAS(log_line, round ? "(1 from the cache)" : "(0 from the cache)");
        tj_function_free(f);
    }
    /* the CNN's step: its kernels in several parts, each found in its own module */
    if (cnn_init(&cnn_model, 7, 1e-3) == 0) {
        tj_function *f = tj_function_new("cnn_train_step", (void *)cnn_train_step, 2, &on_gpu);
        tj_spec s[2] = {{.dtype = TJ_F32, .rank = 4, .dims = {2, 28, 28, 1}},
                        {.dtype = TJ_I32, .rank = 1, .dims = {2}}};
        CHECK_MSG(tj_function_get_concrete(f, 2, s) != NULL, "%s", tj_last_error());
        CHECK_HAS(log_line, "cuda: cnn_train_step: ");
        CHECK_HAS(log_line, " kernels in 2 modules"); /* TJ_COMPILE_THREADS=2 in CMake */
        tj_function_free(f);
        cnn_free(&cnn_model);
    }
    tj_set_log(NULL, NULL);
    tj_scope_end();
}

/* ---- cuBLAS and cuDNN (TJ_CUBLAS/TJ_CUDNN naming tests/cuda/'s fakes) ----------------------- */
static char lib_log_buf[2048];
static const char *lib_log = lib_log_buf;
static void lib_sink(const char *topic, const char *line, void *user) {
    (void)topic, (void)user;
    size_t n = strlen(lib_log_buf);
    if ((strstr(line, "cuDNN") || strstr(line, " by ")) &&
        n + strlen(line) + 2 < sizeof lib_log_buf)
        snprintf(lib_log_buf + n, sizeof lib_log_buf - n, "%s\n", line);
}

/* A strided convolution and both its gradients, a batched product, and a dense layer
 * (relu(m0^T m0 + b): the bias add as cuBLASLt's epilogue, the relu a kernel). */
static tj_tensor *conv_net(tj_tensor *x, tj_tensor *w, tj_tensor *m) {
    tj_tape *tape = tj_tape_new(0);
    tj_tape_watch(tape, x);
    tj_tape_watch(tape, w);
    tj_tensor *y = tj_conv2d(x, w, (const int[]){2, 1}, TJ_PAD_VALID, NULL);
    tj_tensor *g[2] = {NULL, NULL};
    tj_tape_gradient(tape, tj_sum(tj_mul(y, y), 0, NULL, 0), NULL, 2, (tj_tensor *[]){x, w}, g);
    tj_tape_free(tape);
    tj_tensor *m0 =
        tj_reshape(tj_slice(m, (const int64_t[]){0, 0, 0}, (const int64_t[]){1, 5, 6}, NULL), 2,
                   (const int64_t[]){5, 6});
    tj_tensor *dense = tj_relu(
        tj_bias_add(tj_matmul(tj_transpose(m0, NULL), m0), tj_sum(m0, 1, (const int[]){0}, 0)));
    return tj_tuple(5,
                    (tj_tensor *[]){y, g[0], g[1],
                                    tj_matmul(m, tj_transpose(m, (const int[]){0, 2, 1})), dense});
}

/* Under each FAKE_CUDNN/FAKE_CUBLAS fault, the route the compile log names and the values (or
 * the call's error); 1 when the rest of the suite should run too (no fault). */
static int libraries(void) {
    const char *dnn_fault = getenv("FAKE_CUDNN"), *blas_fault = getenv("FAKE_CUBLAS");
    dnn_fault = dnn_fault ? dnn_fault : "", blas_fault = blas_fault ? blas_fault : "";
    tj_scope_begin();
    tj_set_log(lib_sink, NULL);
    tj_set_log_topics("compile");
    tj_tensor *x = tj_random_uniform(TJ_F32, 4, (const int64_t[]){2, 9, 7, 4}, -1, 1, 3);
    tj_tensor *w = tj_random_uniform(TJ_F32, 4, (const int64_t[]){3, 2, 4, 5}, -1, 1, 4);
    tj_tensor *m = tj_random_uniform(TJ_F32, 3, (const int64_t[]){3, 5, 6}, -1, 1, 5);
    tj_function *fg = tj_function_new("conv_net", (void *)conv_net, 3, &on_gpu_host_out);
    tj_function *fr = tj_function_new("conv_net", (void *)conv_net, 3, &on_interp);
    tj_tensor *g = tj_call(fg, 3, (tj_tensor *[]){x, w, m}),
              *r = tj_call(fr, 3, (tj_tensor *[]){x, w, m});
    if (!strcmp(dnn_fault, "exec_fail") || !strcmp(blas_fault, "exec_fail")) {
        CHECK(tj_status_of(g) == TJ_ERR_RUNTIME);
        CHECK_HAS(tj_error_message(g), "of function 'conv_net' failed: ");
        CHECK_HAS(tj_error_message(g), *dnn_fault ? "cuDNN: convolution tjk" : "cuBLAS");
        CHECK_HAS(tj_error_message(g),
                  *dnn_fault ? "CUDNN_STATUS_EXECUTION_FAILED (5000)" : "status 13");
    } else {
        CHECK_MSG(tj_status_of(g) == TJ_OK, "conv_net on cuda: %s", tj_error_message(g));
        for (int k = 0; k < 5 && tj_status_of(g) == TJ_OK; k++) {
            const tj_tensor *a = tj_tuple_get(g, k), *b = tj_tuple_get(r, k);
            double worst = 0;
            for (int64_t i = 0; i < tj_tensor_numel(b); i++)
                worst = fmax(worst, fabs(tj_tensor_get_f64(a, i) - tj_tensor_get_f64(b, i)) /
                                        (1 + fabs(tj_tensor_get_f64(b, i))));
            CHECK_MSG(worst < 1e-5, "conv_net output %d differs by %g", k, worst);
        }
        const char *dnn = !strcmp(dnn_fault, "create_fail")
                              ? "convolutions by generated kernels: cudnnCreate failed"
                          : !strcmp(dnn_fault, "nondeterministic")
                              ? "2 of 3 convolution kernels by cuDNN 91900"
                              : "3 of 3 convolution kernels by cuDNN 91900";
        CHECK_HAS(lib_log, dnn);
        CHECK_HAS(lib_log, *blas_fault ? "products by generated kernels: cublasCreate failed"
                                       : "products by cuBLAS 130000, 1 with their bias add as "
                                         "cuBLASLt 130000's epilogue");
    }
    tj_function_free(fg);
    tj_function_free(fr);
    tj_set_log(NULL, NULL);
    tj_scope_end();
    printf("libraries: %s", lib_log);
    return !*dnn_fault && !*blas_fault;
}

/* TJ_TEST_EXPECT=<text>: a compile or call that must fail with that text (CMake's _fault_*
 * runs: a GPU ordinal the driver lacks, an emulation compiler that fails, a cubin the fake
 * driver refuses); the process goes on and the host still computes. */
static void expect_fault(const char *want) {
    tj_scope_begin();
    tj_function *f = tj_function_new("affine", (void *)affine, 2, &on_gpu);
    tj_tensor *x = vec((const float[]){1, 2, 3}, 3);
    tj_tensor *y = tj_call(f, 2, (tj_tensor *[]){x, x});
    CHECK(tj_status_of(y) != TJ_OK);
    CHECK_HAS(tj_error_message(y), want);
    CHECK(tj_tensor_get_f64(affine(x, x), 2) == 10);
    tj_function_free(f);
    tj_scope_end();
}

int main(void) {
    const char *want = getenv("TJ_TEST_EXPECT");
    if (want && *want) {
        if (tj_backend_unavailable("cuda")) { /* no NVRTC here */
            printf("skipped: %s\n", tj_backend_unavailable("cuda"));
            return 77;
        }
        expect_fault(want);
        return check_done();
    }
    const char *why = tj_backend_unavailable("cuda");
    const char *emu = getenv("TJ_CUDA_EMULATE"), *drv = getenv("TJ_CUDA_DRIVER");
    const char *fake_mode = getenv("FAKE_CUDA");
    int cubin = fake_mode && !strcmp(fake_mode, "cubin");
    if (why || ((!emu || !*emu) && drv && *drv && !cubin)) { /* a GPU, or the fake's emulation */
        printf("skipped: needs the fake driver and TJ_CUDA_EMULATE (cuda: %s)\n",
               why ? why : "available");
        return 77;
    }
    const char *ord = getenv("TJ_CUDA_DEVICE");
    snprintf(gpu, sizeof gpu, "cuda:%d", ord && *ord ? atoi(ord) : 0);
    const char *mode = getenv("FAKE_CUDA");
    if (mode && !strcmp(mode, "cubin")) {
        if (tj_backend_unavailable("cuda")) { /* no NVRTC here */
            printf("skipped: %s\n", tj_backend_unavailable("cuda"));
            return 77;
        }
        cubins();
        return check_done();
    }
    if (mode && !strcmp(mode, "launch_fail")) {
        launch_fails();
        return check_done();
    }
    const char *dnn = getenv("TJ_CUDNN");
    if (dnn && strstr(dnn, "fake") && !libraries())
        return check_done();
    outputs_and_inputs();
    variables();
    effects_and_loops();
    cnn_steps();
    graphs();
    faults();
    return check_done();
}
