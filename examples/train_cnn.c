/* train_cnn.c — the seed's training program (S22) on Debian's Fashion-MNIST: the CNN of
 * examples/cnn.h, batch 50, Adam 1e-3, one compiled function per step that computes the loss
 * under a tape, prints it (tj_print, as the seed's tf.print), takes the gradients of the eight
 * variables and applies Adam. Prints the loss each step, the time per step and the test accuracy.
 *
 *   train_cnn [--steps N] [--seed S] [--data DIR] [--eager] [--quiet] [--every K]
 *             [--test-images N] [--device cpu|cuda]
 *
 * --eager runs the same step op by op (tj_call_eager); --quiet prints the loss every K steps
 * from the host instead of from inside the step; --device cuda compiles the step and the
 * prediction for the GPU (the CUDA backend: the variables stay on the GPU between steps; the
 * predictions come back to the host for the accuracy). */
#include <time.h>

#include "cnn.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv) {
    int steps = 1000, eager = 0, quiet = 0, every = 100, ckpt_every = 0, resume = 0;
    const char *device = "cpu";
    long long test_images = 0; /* 0: the whole test set */
    const char *ckpt = NULL;
    uint64_t seed = 1;
    const char *dir = "/usr/share/datasets/fashion-mnist";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--steps") && i + 1 < argc)
            steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
            seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--data") && i + 1 < argc)
            dir = argv[++i];
        else if (!strcmp(argv[i], "--every") && i + 1 < argc)
            every = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--test-images") && i + 1 < argc)
            test_images = atoll(argv[++i]); /* the first N (multiple of 500) of the test set */
        else if (!strcmp(argv[i], "--eager"))
            eager = 1;
        else if (!strcmp(argv[i], "--quiet"))
            quiet = 1;
        else if (!strcmp(argv[i], "--checkpoint") && i + 1 < argc)
            ckpt = argv[++i];
        else if (!strcmp(argv[i], "--checkpoint-every") && i + 1 < argc)
            ckpt_every = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--resume"))
            resume = 1;
        else if (!strcmp(argv[i], "--device") && i + 1 < argc)
            device = argv[++i];
        else {
            fprintf(stderr,
                    "usage: %s [--steps N] [--seed S] [--data DIR] [--eager] [--quiet] "
                    "[--every K] [--test-images N] [--checkpoint FILE [--checkpoint-every K] "
                    "[--resume]] [--device cpu|cuda]\n",
                    argv[0]);
            return 2;
        }
    }
    if (steps < 0 || every < 1 || ckpt_every < 0 || ((ckpt_every || resume) && !ckpt))
        return fprintf(stderr, "train_cnn: bad --steps, --every or --checkpoint options\n"), 2;
    if (strcmp(device, "cpu") != 0 && strcmp(device, "cuda") != 0)
        return fprintf(stderr, "train_cnn: --device cpu or cuda, not '%s'\n", device), 2;
    /* the step and the prediction compile for the device's backend; predictions come back */
    tj_function_options on = {.backend = strcmp(device, "cuda") ? NULL : "cuda",
                              .output_device = "cpu"};
    if (on.backend && tj_backend_unavailable("cuda"))
        return fprintf(stderr, "train_cnn: --device cuda: %s\n", tj_backend_unavailable("cuda")), 1;
    cnn_data d;
    const char *err = cnn_load(&d, dir);
    if (err) {
        fprintf(stderr, "train_cnn: %s\n(install Debian's dataset-fashion-mnist, or pass --data)\n",
                err);
        cnn_data_free(&d);
        return 1;
    }
    if (cnn_init(&cnn_model, seed, 1e-3)) {
        fprintf(stderr, "train_cnn: %s\n", tj_last_error());
        return 1;
    }
    cnn_model.print_loss = !quiet;
    int64_t first = 0; /* --resume: the steps the checkpoint had taken */
    if (resume) {
        if (cnn_restore(&cnn_model, ckpt, &first)) {
            fprintf(stderr, "train_cnn: %s\n", tj_last_error());
            cnn_free(&cnn_model);
            cnn_data_free(&d);
            return 1;
        }
        printf("train_cnn: resumed from %s after %lld steps\n", ckpt, (long long)first);
    }
    tj_function *step = tj_function_new("train_one_step", (void *)cnn_train_step, 2, &on);
    int64_t n_train = tj_tensor_dims(d.train_x)[0];
    printf("train_cnn: %lld training images, %d steps of 50, %s%s\n", (long long)n_train, steps,
           eager ? "eager" : "compiled", on.backend ? " for the GPU (cuda)" : "");
    double t0 = now(), t_first = 0, last_loss = 0;
    int status = 0;
    for (int s = (int)first; s < steps; s++) {
        tj_scope_begin();
        tj_tensor *x, *y;
        cnn_batch(&d, n_train, 50, seed * 1000003u + (uint64_t)s, &x, &y);
        tj_tensor *args[2] = {x, y};
        tj_tensor *loss = eager ? tj_call_eager(step, 2, args) : tj_call(step, 2, args);
        if (tj_status_of(loss)) {
            fprintf(stderr, "train_cnn: step %d: %s\n", s, tj_error_message(loss));
            status = 1;
            tj_scope_end();
            break;
        }
        last_loss = tj_tensor_get_f64(loss, 0);
        if (quiet && (s % every == 0 || s == steps - 1))
            printf("step %d loss: %.6f\n", s, last_loss);
        tj_scope_end(); /* loss too: the scope owns what the call returns */
        if (s == (int)first)
            t_first = now() - t0;
        if (ckpt && ((ckpt_every && (s + 1) % ckpt_every == 0) || s == steps - 1) &&
            cnn_save(&cnn_model, ckpt)) {
            fprintf(stderr, "train_cnn: %s\n", tj_last_error());
            status = 1;
            break;
        }
    }
    double total = now() - t0;
    if (!status && steps - first > 1)
        printf("first step (trace + compile + run): %.1f ms; then %.2f ms per step (%d steps, "
               "%.1f s in all)\n",
               1e3 * t_first, 1e3 * (total - t_first) / (double)(steps - first - 1),
               (int)(steps - first), total);
    /* test accuracy, 500 images per call */
    tj_function *pred = tj_function_new("predict", (void *)cnn_predict, 1, &on);
    int64_t n_test = tj_tensor_dims(d.test_x)[0], right = 0;
    if (test_images > 0 && test_images / 500 * 500 < n_test)
        n_test = test_images < 500 ? 500 : test_images / 500 * 500;
    for (int64_t i = 0; !status && i < n_test; i += 500) {
        tj_scope_begin();
        int64_t b[4] = {i, 0, 0, 0}, e[4] = {i + 500, 28, 28, 1};
        tj_tensor *xb = tj_slice(d.test_x, b, e, NULL);
        tj_tensor *yb = tj_slice(d.test_y, b, e, NULL);
        tj_tensor *p = tj_call(pred, 1, &xb);
        tj_tensor *hit = tj_sum(tj_cast(tj_equal(p, tj_cast(yb, TJ_I64)), TJ_I32), 0, NULL, 0);
        if (tj_status_of(hit)) {
            fprintf(stderr, "train_cnn: predict: %s\n", tj_error_message(hit));
            status = 1;
        } else {
            right += (int64_t)tj_tensor_get_f64(hit, 0);
        }
        tj_scope_end();
    }
    if (!status)
        printf("final loss %.4f; test accuracy after %d steps: %.2f%% (%lld of %lld)\n", last_loss,
               steps, 100.0 * (double)right / (double)n_test, (long long)right, (long long)n_test);
    tj_function_free(pred);
    tj_function_free(step);
    cnn_free(&cnn_model);
    cnn_data_free(&d);
    return status;
}
