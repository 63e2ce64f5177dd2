/* cnn.h — the seed's CNN (SEMANTICS S22) in C, shared by examples/train_cnn.c, the S22 test and
 * the benchmark: conv 5x5x32 relu, max-pool 2, conv 5x5x64 relu, max-pool 2, flatten, dense 1024
 * relu, dense 10, softmax; Keras' sparse categorical cross-entropy on the probabilities; Adam at
 * 1e-3. One traced function per step computes the loss under a tape, prints it, takes the
 * gradients of every variable and applies Adam: forward, backward and update in one graph.
 * Header-only (static functions): include it once per program. */
#ifndef TJ_EXAMPLES_CNN_H
#define TJ_EXAMPLES_CNN_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tracejit.h>

enum { CNN_NVARS = 8 };

typedef struct cnn {
    tj_variable *vars[CNN_NVARS]; /* conv1 w, b, conv2 w, b, dense1 w, b, dense2 w, b */
    tj_optimizer *opt;
    int print_loss; /* tj_print the loss each step (the seed's tf.print) */
} cnn;

static cnn cnn_model; /* the model a traced step captures */

/* Keras' defaults: Glorot-uniform kernels from `seed`, zero biases. */
static int cnn_init(cnn *m, uint64_t seed, double lr) {
    static const int64_t shapes[CNN_NVARS][4] = {{5, 5, 1, 32}, {32},   {5, 5, 32, 64}, {64},
                                                 {3136, 1024},  {1024}, {1024, 10},     {10}};
    static const int ranks[CNN_NVARS] = {4, 1, 4, 1, 2, 1, 2, 1};
    static const char *names[CNN_NVARS] = {"conv1/kernel",  "conv1/bias",    "conv2/kernel",
                                           "conv2/bias",    "dense1/kernel", "dense1/bias",
                                           "dense2/kernel", "dense2/bias"};
    memset(m, 0, sizeof *m);
    tj_scope_begin();
    for (int k = 0; k < CNN_NVARS; k++) {
        tj_tensor *init = k % 2 == 0 ? tj_glorot_uniform(TJ_F32, ranks[k], shapes[k], seed + k)
                                     : tj_zeros(TJ_F32, ranks[k], shapes[k]);
        m->vars[k] = tj_variable_new(init, names[k]);
    }
    tj_scope_end();
    m->opt = tj_adam_new(lr, 0.9, 0.999, 1e-7);
    for (int k = 0; k < CNN_NVARS; k++)
        if (!m->vars[k])
            return -1;
    return m->opt ? 0 : -1;
}

static void cnn_free(cnn *m) {
    tj_optimizer_free(m->opt);
    for (int k = 0; k < CNN_NVARS; k++)
        tj_variable_free(m->vars[k]);
}

/* The class probabilities of x [N, 28, 28, 1]. */
static tj_tensor *cnn_forward(cnn *m, tj_tensor *x) {
    tj_tensor *v[CNN_NVARS];
    for (int k = 0; k < CNN_NVARS; k++)
        v[k] = tj_variable_read(m->vars[k]);
    int pool[2] = {2, 2};
    tj_tensor *h = tj_relu(tj_bias_add(tj_conv2d(x, v[0], NULL, TJ_PAD_SAME, NULL), v[1]));
    h = tj_max_pool2d(h, pool, pool, TJ_PAD_VALID);
    h = tj_relu(tj_bias_add(tj_conv2d(h, v[2], NULL, TJ_PAD_SAME, NULL), v[3]));
    h = tj_max_pool2d(h, pool, pool, TJ_PAD_VALID);
    int64_t flat[2] = {-1, 7 * 7 * 64};
    h = tj_reshape(h, 2, flat);
    h = tj_relu(tj_bias_add(tj_matmul(h, v[4]), v[5]));
    h = tj_bias_add(tj_matmul(h, v[6]), v[7]);
    return tj_softmax(h, -1);
}

/* train_one_step(X, y): returns the loss; the variables are updated in place. */
static tj_tensor *cnn_train_step(tj_tensor *x, tj_tensor *y) {
    cnn *m = &cnn_model;
    tj_tape *tape = tj_tape_new(0);
    tj_tensor *probs = cnn_forward(m, x);
    tj_tensor *loss = tj_sparse_categorical_crossentropy(y, probs, 0);
    if (m->print_loss)
        tj_print("loss: ", 1, &loss);
    tj_tape_stop(tape);
    tj_tensor *grads[CNN_NVARS];
    tj_status st = tj_tape_gradient_vars(tape, loss, NULL, CNN_NVARS, m->vars, grads);
    tj_tape_free(tape);
    if (!st)
        st = tj_optimizer_apply(m->opt, CNN_NVARS, m->vars, grads);
    if (st)
        return tj_error_new(st, "train_one_step: %s", tj_last_error());
    return loss;
}

/* predict(X): the predicted classes (int64 [N]). */
static __attribute__((unused)) tj_tensor *cnn_predict(tj_tensor *x) {
    return tj_argmax(cnn_forward(&cnn_model, x), -1);
}

/* ---- checkpoints (S29): the model's variables, Adam's slots and its step counter ------------ */
enum { CNN_NCKPT = CNN_NVARS * 3 + 1 };
static __attribute__((unused)) int cnn_ckpt_vars(cnn *m, tj_variable **all) {
    if (tj_optimizer_build(m->opt, CNN_NVARS, m->vars)) /* the slots exist before the 1st step */
        return -1;
    for (int k = 0; k < CNN_NVARS; k++)
        all[k] = m->vars[k];
    int n = tj_optimizer_variables(m->opt, CNN_NCKPT - CNN_NVARS, all + CNN_NVARS);
    return n < 0 ? -1 : CNN_NVARS + n;
}
static __attribute__((unused)) tj_status cnn_save(cnn *m, const char *path) {
    tj_variable *all[CNN_NCKPT];
    int n = cnn_ckpt_vars(m, all);
    return n < 0 ? TJ_ERR_INVALID : tj_checkpoint_save(path, n, all);
}
/* Restores everything; *step: the steps already taken (Adam's counter). */
static __attribute__((unused)) tj_status cnn_restore(cnn *m, const char *path, int64_t *step) {
    tj_variable *all[CNN_NCKPT];
    int n = cnn_ckpt_vars(m, all);
    tj_status st = n < 0 ? TJ_ERR_INVALID : tj_checkpoint_restore(path, n, all, 0);
    if (!st) {
        tj_tensor *it = tj_variable_read(tj_optimizer_iterations(m->opt));
        *step = (int64_t)tj_tensor_get_f64(it, 0);
        tj_release(it);
    }
    return st;
}

/* ---- data: Debian's dataset-fashion-mnist (IDX, gzip) ---------------------------------------- */
typedef struct cnn_data {
    tj_tensor *train_x, *train_y, *test_x, *test_y; /* float32 [N,28,28,1] in [0,1]; int32 [N] */
} cnn_data;

static tj_tensor *cnn_images(const char *dir, const char *file) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    tj_scope_begin();
    tj_tensor *raw = tj_idx_load(path);
    tj_tensor *r = raw;
    if (!tj_status_of(raw)) {
        int64_t d[4] = {tj_tensor_dims(raw)[0], 28, 28, 1};
        r = tj_reshape(tj_div(tj_cast(raw, TJ_F32), tj_scalar_f32(255)), 4, d);
    }
    r = tj_keep(r);
    tj_scope_end();
    return r;
}

static tj_tensor *cnn_labels(const char *dir, const char *file) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    return tj_idx_load(path);
}

/* Loads the four files; returns the first error tensor's message, or NULL. */
static __attribute__((unused)) const char *cnn_load(cnn_data *d, const char *dir) {
    d->train_x = cnn_images(dir, "train-images-idx3-ubyte.gz");
    d->train_y = cnn_labels(dir, "train-labels-idx1-ubyte.gz");
    d->test_x = cnn_images(dir, "t10k-images-idx3-ubyte.gz");
    d->test_y = cnn_labels(dir, "t10k-labels-idx1-ubyte.gz");
    tj_tensor *all[4] = {d->train_x, d->train_y, d->test_x, d->test_y};
    for (int k = 0; k < 4; k++)
        if (tj_status_of(all[k]))
            return tj_error_message(all[k]);
    return NULL;
}

static __attribute__((unused)) void cnn_data_free(cnn_data *d) {
    tj_release(d->train_x);
    tj_release(d->train_y);
    tj_release(d->test_x);
    tj_release(d->test_y);
}

/* The seed's get_batch: `batch` random rows (with replacement) of the first `limit` examples. */
static __attribute__((unused)) void cnn_batch(const cnn_data *d, int64_t limit, int64_t batch,
                                              uint64_t seed, tj_tensor **x, tj_tensor **y) {
    tj_tensor *idx = tj_random_indices(limit, batch, seed);
    *x = tj_gather(d->train_x, idx, 0);
    *y = tj_gather(d->train_y, idx, 0);
}

#endif
