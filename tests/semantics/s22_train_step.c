/* S22 — the seed's training step: the CNN of examples/cnn.h trained by one compiled function
 * per step (loss under a tape, gradients of the eight variables, Adam), on the first 1000
 * Fashion-MNIST training images. Checks: the loss falls as the seed's does; the same seed gives
 * the same loss sequence; compiled and eager agree within stated tolerances: the gradients of
 * all eight variables at the same parameters within 1e-4 of each variable's largest gradient
 * (the compiled step fuses and reorders float32 sums), and after 3 Adam steps the losses within
 * 1e-3 relative and the variables within 1e-4 on average (Adam's first steps move every weight
 * by about the learning rate whatever the gradient's size, so a weight whose gradient is ~0 may
 * move either way: at most 3 steps of 2e-3 apart); the step prints its loss (tj_print) on every
 * call; a label out of range fails the step with the op and the label named. Skips (77) without the
 * dataset (Debian's, or the folder TJ_FASHION_MNIST names). */
#include "../../examples/cnn.h"
#include "check.h"
#include "native_first.h"

enum { LIMIT = 1000 };

static cnn_data data;
static int printed;

static void sink(const char *line, void *user) {
    (void)user;
    printed += strncmp(line, "loss: ", 6) == 0;
}

/* Runs `steps` steps from a fresh model of `seed`; losses into out. */
static void train(int steps, int64_t batch, int eager, double *out, tj_tensor **final_vars) {
    if (cnn_init(&cnn_model, 7, 1e-3)) {
        CHECK_MSG(0, "init: %s", tj_last_error());
        return;
    }
    cnn_model.print_loss = 1;
    tj_function *f = tj_function_new("train_one_step", (void *)cnn_train_step, 2, NULL);
    for (int s = 0; s < steps; s++) {
        tj_scope_begin();
        tj_tensor *x, *y;
        cnn_batch(&data, LIMIT, batch, 100 + (uint64_t)s, &x, &y);
        tj_tensor *args[2] = {x, y};
        if (s == 0 && !eager) /* the native tier from the first step */
            check_native_first(f, 2, args);
        tj_tensor *l = eager ? tj_call_eager(f, 2, args) : tj_call(f, 2, args);
        CHECK_MSG(tj_status_of(l) == TJ_OK, "step %d: %s", s, tj_error_message(l));
        out[s] = tj_tensor_get_f64(l, 0);
        tj_scope_end();
    }
    if (!eager)
        CHECK_EQ_INT(tj_function_trace_count(f), tj_get_eager() ? 0 : 1);
    for (int k = 0; final_vars && k < CNN_NVARS; k++)
        final_vars[k] = tj_variable_read(cnn_model.vars[k]);
    tj_function_free(f);
    cnn_free(&cnn_model);
}

/* the gradients of the loss, for the compiled/eager comparison */
static tj_tensor *grads_only(tj_tensor *x, tj_tensor *y) {
    tj_tape *tape = tj_tape_new(0);
    tj_tensor *loss = tj_sparse_categorical_crossentropy(y, cnn_forward(&cnn_model, x), 0);
    tj_tensor *g[CNN_NVARS];
    tj_status st = tj_tape_gradient_vars(tape, loss, NULL, CNN_NVARS, cnn_model.vars, g);
    tj_tape_free(tape);
    return st ? tj_error_new(st, "%s", tj_last_error()) : tj_tuple(CNN_NVARS, g);
}

static void gradients_agree(void) {
    cnn_init(&cnn_model, 7, 1e-3);
    tj_function *f = tj_function_new("grads", (void *)grads_only, 2, NULL);
    tj_scope_begin();
    tj_tensor *x, *y;
    cnn_batch(&data, LIMIT, 8, 5, &x, &y);
    tj_tensor *args[2] = {x, y};
    tj_tensor *gc = tj_call(f, 2, args), *ge = tj_call_eager(f, 2, args);
    CHECK_MSG(tj_tuple_size(gc) == CNN_NVARS, "%s", tj_error_message(gc));
    CHECK_MSG(tj_tuple_size(ge) == CNN_NVARS, "%s", tj_error_message(ge));
    for (int k = 0;
         k < CNN_NVARS && tj_tuple_size(gc) == CNN_NVARS && tj_tuple_size(ge) == CNN_NVARS; k++) {
        tj_tensor *a = tj_tuple_get(gc, k), *b = tj_tuple_get(ge, k);
        double worst = 0, scale = 0;
        for (int64_t i = 0; i < tj_tensor_numel(b); i++) {
            worst = fmax(worst, fabs(tj_tensor_get_f64(a, i) - tj_tensor_get_f64(b, i)));
            scale = fmax(scale, fabs(tj_tensor_get_f64(b, i)));
        }
        CHECK_MSG(scale > 0 && worst <= 1e-4 * scale,
                  "gradient %d: compiled and eager differ by %g (largest %g)", k, worst, scale);
    }
    tj_scope_end();
    tj_function_free(f);
    cnn_free(&cnn_model);
}

static void bad_label(void) {
    cnn_init(&cnn_model, 7, 1e-3);
    cnn_model.print_loss = 0;
    tj_function *f = tj_function_new("train_one_step", (void *)cnn_train_step, 2, NULL);
    tj_scope_begin();
    tj_tensor *x, *y;
    cnn_batch(&data, LIMIT, 4, 1, &x, &y);
    int32_t lv[4] = {1, 2, 10, 3};
    int64_t d[1] = {4};
    tj_tensor *args[2] = {x, tj_tensor_from_data(TJ_I32, 1, d, lv)};
    tj_tensor *r = tj_call(f, 2, args);
    CHECK_EQ_INT(tj_status_of(r), TJ_ERR_RUNTIME);
    CHECK_HAS(tj_error_message(r), "label 10 of row 2 is outside [0, 10)");
    tj_scope_end();
    tj_function_free(f);
    cnn_free(&cnn_model);
}

int main(void) {
    const char *dir = getenv("TJ_FASHION_MNIST"); /* tests/gpu/run.sh: the bundle's subset */
    const char *err = cnn_load(&data, dir && *dir ? dir : "/usr/share/datasets/fashion-mnist");
    if (err) {
        printf("skipped: %s\n", err);
        cnn_data_free(&data);
        return 77;
    }
    tj_set_print_sink(sink, NULL);
    enum { STEPS = 30, CMP = 3 };
    double a[STEPS], b[STEPS], e[CMP], c[CMP];
    train(STEPS, 50, 0, a, NULL);
    CHECK_EQ_INT(printed, STEPS);
    double first = 0, last = 0;
    for (int s = 0; s < 5; s++) {
        first += a[s] / 5;
        last += a[STEPS - 1 - s] / 5;
    }
    printf("loss: first 5 steps %.4f, last 5 %.4f\n", first, last);
    CHECK(first > 2.0 && first < 2.4); /* ln 10 = 2.30 at the start, as the seed's 2.31 */
    CHECK_MSG(last < 0.75 * first, "the loss did not fall: %.4f -> %.4f", first, last);
    /* the same seed, the same losses */
    train(STEPS, 50, 0, b, NULL);
    for (int s = 0; s < STEPS; s++)
        CHECK_MSG(a[s] == b[s], "step %d: %.9g then %.9g", s, a[s], b[s]);
    /* compiled and eager steps (batch 8 keeps the eager reference kernels quick) */
    tj_tensor *vc[CNN_NVARS], *ve[CNN_NVARS];
    train(CMP, 8, 0, c, vc);
    train(CMP, 8, 1, e, ve);
    for (int s = 0; s < CMP; s++)
        CHECK_MSG(fabs(c[s] - e[s]) <= 1e-3 * fabs(e[s]), "step %d: compiled %.9g, eager %.9g", s,
                  c[s], e[s]);
    for (int k = 0; k < CNN_NVARS; k++) {
        double worst = 0, mean = 0;
        int64_t n = tj_tensor_numel(ve[k]);
        for (int64_t i = 0; i < n; i++) {
            double d = fabs(tj_tensor_get_f64(vc[k], i) - tj_tensor_get_f64(ve[k], i));
            worst = fmax(worst, d);
            mean += d / (double)n;
        }
        CHECK_MSG(worst <= 3 * 2e-3 + 1e-6 && mean <= 1e-4,
                  "variable %d: compiled and eager differ by %g at most, %g on average", k, worst,
                  mean);
        tj_release(vc[k]);
        tj_release(ve[k]);
    }
    gradients_agree();
    bad_label();
    tj_set_print_sink(NULL, NULL);
    cnn_data_free(&data);
    return check_done();
}
