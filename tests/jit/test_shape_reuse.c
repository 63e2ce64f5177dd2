/* Code shared across shapes (issue 26): a new shape traces again (S3: the trace's host code runs
 * again) and plans again, but where every kernel's code is extent-free (flat elementwise loops,
 * and from a function's second signature on its broadcasting loops, whose extents come from a
 * geometry block at run time) it runs the code an earlier shape compiled instead of calling
 * LLVM; kernels whose code bakes in extents (reductions, products) get their own. Every result is
 * checked against eager execution, shapes alternating, so a kernel run at a size it was not planned
 * for would show. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "native_first.h"
#include "shapes_util.h"
#include <tracejit.h>

static int n_shared, n_built, n_traces, n_respec;

static void log_sink(const char *topic, const char *msg, void *user) {
    (void)topic, (void)user;
    if (strstr(msg, "compiled again, specialized and unrolled"))
        n_respec++;
    if (strstr(msg, "shared with a loaded program"))
        n_shared++;
    else if (strstr(msg, "kernels, build") || strstr(msg, "loaded from the disk cache"))
        n_built++;
}

/* flat: every input full-size or a scalar; one fused loop */
static tj_tensor *flat_chain(tj_tensor *x, tj_tensor *y) {
    n_traces++; /* host code: runs at every trace */
    tj_tensor *t = tj_add(tj_mul(x, tj_scalar_f32(1.5f)), y);
    t = tj_sqrt(tj_add(tj_mul(t, t), tj_scalar_f32(0.25f)));
    return tj_sub(t, tj_mul(y, tj_scalar_f32(0.5f)));
}
/* the same ops written again: another function, the same kernel */
static tj_tensor *flat_chain_again(tj_tensor *x, tj_tensor *y) {
    tj_tensor *t = tj_add(tj_mul(x, tj_scalar_f32(1.5f)), y);
    t = tj_sqrt(tj_add(tj_mul(t, t), tj_scalar_f32(0.25f)));
    return tj_sub(t, tj_mul(y, tj_scalar_f32(0.5f)));
}
/* a row broadcast: strides in the code */
static tj_tensor *bcast(tj_tensor *x, tj_tensor *b) {
    return tj_mul(tj_add(x, b), tj_scalar_f32(2.0f));
}
/* a reduction over the last axis of x*x */
static tj_tensor *row_norms(tj_tensor *x, tj_tensor *y) {
    return tj_sum(tj_mul(x, y), 1, (const int[]){1}, 0);
}
/* one-element constants: a float one is loaded (two scales, one kernel), an integer one is an
 * immediate (two factors, two kernels: a multiply by a constant strength-reduces) */
static tj_tensor *scale2(tj_tensor *x, tj_tensor *y) {
    return tj_add(tj_mul(x, tj_scalar_f32(2.0f)), y);
}
static tj_tensor *scale3(tj_tensor *x, tj_tensor *y) {
    return tj_add(tj_mul(x, tj_scalar_f32(3.0f)), y);
}
static tj_tensor *times3(tj_tensor *x) {
    return tj_mul(x, tj_scalar_i32(3));
}
static tj_tensor *times5(tj_tensor *x) {
    return tj_mul(x, tj_scalar_i32(5));
}

/* sum and mean over the axis before the last (the rows of a matrix; the middle axis of a
 * rank-3 x) */
static tj_tensor *col_sums(tj_tensor *x, tj_tensor *y) {
    int axis = tj_tensor_rank(x) - 2;
    return tj_add(tj_sum(tj_add(x, y), 1, &axis, 0), tj_mean(tj_mul(x, y), 1, &axis, 0));
}
/* the mean of every element (a loss): one row, its length the whole tensor */
static tj_tensor *mean_all(tj_tensor *x, tj_tensor *y) {
    return tj_mean(tj_mul(x, y), 0, NULL, 0);
}
/* an integer mean over the leading axis (a truncating division by the run-time length) */
static tj_tensor *col_means_i32(tj_tensor *x) {
    static const int axis0[1] = {0};
    return tj_mean(x, 1, axis0, 0);
}
/* a softmax over the last axis, of a flat producer */
static tj_tensor *softmax_rows(tj_tensor *x, tj_tensor *y) {
    return tj_softmax(tj_sub(x, y), -1);
}
/* a convolution with a bias and a relu fused behind it (a conv step and its epilogue) */
static tj_tensor *conv_relu(tj_tensor *x, tj_tensor *w, tj_tensor *b) {
    return tj_relu(tj_add(tj_conv2d(x, w, NULL, TJ_PAD_SAME, NULL), b));
}
/* a training step: a dense layer with a bias, a mean squared loss, SGD (the mean's gradient
 * divides by the batch size, a constant of each trace; its bias gradient sums the batch) */
static tj_variable *tw, *tb;
static tj_optimizer *tsgd;
static tj_tensor *train_step(tj_tensor *x, tj_tensor *y) {
    tj_tape *tape = tj_tape_new(0);
    tj_tensor *h = tj_relu(tj_add(tj_matmul(x, tj_variable_read(tw)), tj_variable_read(tb)));
    tj_tensor *d = tj_sub(h, y);
    tj_tensor *loss = tj_mean(tj_mul(d, d), 0, NULL, 0);
    tj_tape_stop(tape);
    tj_tensor *g[2];
    tj_status st = tj_tape_gradient_vars(tape, loss, NULL, 2, (tj_variable *[]){tw, tb}, g);
    tj_tape_free(tape);
    if (!st)
        st = tj_optimizer_apply(tsgd, 2, (tj_variable *[]){tw, tb}, g);
    return st ? tj_error_new(st, "%s", tj_last_error()) : loss;
}
/* small kernels a first signature chains: a softmax, a row sum, an add */
static tj_tensor *small_chain(tj_tensor *x, tj_tensor *y) {
    static const int ax1[1] = {1};
    return tj_add(tj_softmax(tj_mul(x, y), -1), tj_sum(x, 1, ax1, 1));
}
/* a product and a flat epilogue */
static tj_tensor *dense(tj_tensor *x, tj_tensor *w) {
    return tj_mul(tj_matmul(x, w), tj_scalar_f32(0.5f));
}

/* f on (a, b), compiled, against f run eagerly: same shape, values within tol */
static void same_as_eager(tj_function *f, tj_tensor *a, tj_tensor *b, double tol) {
    tj_tensor *args[2] = {a, b};
    tj_tensor *r = tj_call(f, 2, args), *e = tj_call_eager(f, 2, args);
    CHECK_MSG(tj_status_of(r) == TJ_OK, "%s: %s", tj_function_name(f), tj_error_message(r));
    CHECK_EQ_INT(tj_status_of(e), TJ_OK);
    if (tj_status_of(r) || tj_status_of(e)) {
        tj_release(r);
        tj_release(e);
        return;
    }
    CHECK_EQ_INT(tj_tensor_rank(r), tj_tensor_rank(e));
    CHECK_EQ_INT(tj_tensor_numel(r), tj_tensor_numel(e));
    int bad = su_differ(r, e, tol);
    CHECK_MSG(bad == 0, "%s: %d elements differ from eager", tj_function_name(f), bad);
    tj_release(r);
    tj_release(e);
}

static void call_shape(tj_function *f, int rank, const int64_t *dims, float seed) {
    tj_tensor *a = su_filled(rank, dims, seed), *b = su_filled(rank, dims, seed + 0.5f);
    same_as_eager(f, a, b, 1e-5);
    tj_release(a);
    tj_release(b);
}

int main(void) {
    check_untiered();
    tj_set_log(log_sink, NULL);
    tj_set_log_topics("compile");

    /* one flat kernel: the first shape compiles (or finds its code on disk), the others share */
    tj_function *f = tj_function_new("flat_chain", (void *)flat_chain, 2, NULL);
    call_shape(f, 1, (const int64_t[]){16}, 0.0f);
    CHECK_EQ_INT(n_built, 1);
    CHECK_EQ_INT(n_shared, 0);
    call_shape(f, 1, (const int64_t[]){1000}, 1.0f);
    call_shape(f, 2, (const int64_t[]){3, 5}, 2.0f);  /* another rank: still one flat loop */
    call_shape(f, 1, (const int64_t[]){70000}, 3.0f); /* split across the pool's threads */
    CHECK_EQ_INT(tj_function_trace_count(f), 4);
    CHECK_EQ_INT(n_traces, 8); /* 4 traces, and the 4 eager runs beside them */
    CHECK_EQ_INT(n_built, 1);
    CHECK_EQ_INT(n_shared, 3);
    /* back to earlier shapes: their concrete functions, no trace */
    call_shape(f, 1, (const int64_t[]){16}, 4.0f);
    call_shape(f, 2, (const int64_t[]){3, 5}, 5.0f);
    CHECK_EQ_INT(tj_function_trace_count(f), 4);
    /* one element: the inputs are scalars to the kernel (loaded once): other code */
    call_shape(f, 1, (const int64_t[]){1}, 6.0f);
    CHECK_EQ_INT(n_built, 2);
    /* another function tracing to the same kernel, at a shape not seen yet, shares it */
    tj_function *g = tj_function_new("flat_chain_again", (void *)flat_chain_again, 2, NULL);
    call_shape(g, 1, (const int64_t[]){33}, 7.0f);
    CHECK_EQ_INT(n_built, 2);
    CHECK_EQ_INT(n_shared, 4);
    tj_function_free(g);

    /* a float scale is loaded: scale3 runs scale2's kernel, with its own value */
    tj_function *s2 = tj_function_new("scale2", (void *)scale2, 2, NULL),
                *s3 = tj_function_new("scale3", (void *)scale3, 2, NULL);
    int built0 = n_built, shared0 = n_shared;
    call_shape(s2, 1, (const int64_t[]){40}, 0.5f);
    call_shape(s3, 1, (const int64_t[]){40}, 0.5f);
    CHECK_EQ_INT(n_built - built0, 1);
    CHECK_EQ_INT(n_shared - shared0, 1);
    tj_function_free(s2);
    tj_function_free(s3);
    /* an integer factor is an immediate: each its own kernel, each value right */
    tj_function *m3 = tj_function_new("times3", (void *)times3, 1, NULL),
                *m5 = tj_function_new("times5", (void *)times5, 1, NULL);
    built0 = n_built;
    int32_t iv[16];
    for (int i = 0; i < 16; i++)
        iv[i] = 7 * i - 40;
    tj_tensor *xi = tj_tensor_from_data(TJ_I32, 1, (const int64_t[]){16}, iv);
    for (int k = 0; k < 2; k++) {
        tj_tensor *got = tj_call(k ? m5 : m3, 1, &xi), *want = tj_call_eager(k ? m5 : m3, 1, &xi);
        int nbad = tj_status_of(got) != TJ_OK;
        for (int i = 0; !nbad && i < 16; i++)
            nbad += tj_tensor_get_f64(got, i) != tj_tensor_get_f64(want, i);
        CHECK_MSG(nbad == 0, "times%d: %d differ", k ? 5 : 3, nbad);
        tj_release(got);
        tj_release(want);
    }
    CHECK_EQ_INT(n_built - built0, 2);
    tj_release(xi);
    tj_function_free(m3);
    tj_function_free(m5);

    /* broadcasting: the first shape's kernel has its strides in the code; from the function's
     * second signature on the kernel takes its outer extents and strides at run time (automatic
     * dynamic shapes), keeping the row length, so the third shape of the same pattern and row
     * length shares the second's code */
    tj_function *fb = tj_function_new("bcast", (void *)bcast, 2, NULL);
    int built = n_built, shared = n_shared;
    for (int r = 0; r < 2; r++) {
        for (int64_t rows = 4; rows <= 7; rows++) {
            tj_tensor *x = su_filled(2, (const int64_t[]){rows, 24}, (float)rows),
                      *b = su_filled(1, (const int64_t[]){24}, 0.25f);
            same_as_eager(fb, x, b, 1e-6);
            tj_release(x);
            tj_release(b);
        }
    }
    CHECK_EQ_INT(tj_function_trace_count(fb), 4);
    CHECK_EQ_INT(n_built - built, 2);   /* the first shape's, the generic one */
    CHECK_EQ_INT(n_shared - shared, 2); /* the third and fourth shapes */
    /* another row length: compiled for it, then shared by the rows that follow */
    built = n_built, shared = n_shared;
    for (int64_t rows = 2; rows <= 3; rows++) {
        tj_tensor *x = su_filled(2, (const int64_t[]){rows, 40}, 3.0f),
                  *b = su_filled(1, (const int64_t[]){40}, 0.75f);
        same_as_eager(fb, x, b, 1e-6);
        tj_release(x);
        tj_release(b);
    }
    CHECK_EQ_INT(n_built - built, 1);
    CHECK_EQ_INT(n_shared - shared, 1);
    /* another pattern (a column, not a row): its own generic kernel, then shared */
    built = n_built, shared = n_shared;
    for (int64_t rows = 3; rows <= 5; rows++) {
        tj_tensor *x = su_filled(2, (const int64_t[]){rows, 7}, 1.0f),
                  *b = su_filled(2, (const int64_t[]){rows, 1}, 2.0f);
        same_as_eager(fb, x, b, 1e-6);
        tj_release(x);
        tj_release(b);
    }
    CHECK_EQ_INT(n_built - built, 1);
    CHECK_EQ_INT(n_shared - shared, 2);
    /* rank 3 with a middle-axis broadcast ([a,b,c] + [b,1]: three collapsed dims, the outer two
     * and their strides from the geometry block), shapes alternating between the pattern's */
    built = n_built, shared = n_shared;
    for (int k = 0; k < 4; k++) {
        int64_t a = 2 + k, bb = 3 + k % 2 * 2, c = 5;
        tj_tensor *x = su_filled(3, (const int64_t[]){a, bb, c}, 0.5f * (float)k),
                  *b = su_filled(2, (const int64_t[]){bb, 1}, 1.5f);
        same_as_eager(fb, x, b, 1e-6);
        tj_release(x);
        tj_release(b);
    }
    CHECK_EQ_INT(n_built - built, 1);
    CHECK_EQ_INT(n_shared - shared, 3);
    /* shapes that do not broadcast at a later call: the trace reports them, naming the op and
     * both shapes, whatever code the earlier shapes compiled */
    tj_tensor *x48 = su_filled(2, (const int64_t[]){4, 8}, 0.0f),
              *bad = su_filled(1, (const int64_t[]){5}, 0.0f);
    tj_tensor *r = tj_call(fb, 2, (tj_tensor *[]){x48, bad});
    CHECK_EQ_INT(tj_status_of(r), TJ_ERR_SHAPE);
    CHECK_MSG(strstr(tj_error_message(r), "add") && strstr(tj_error_message(r), "[4,8]") &&
                  strstr(tj_error_message(r), "[5]"),
              "%s", tj_error_message(r));
    tj_release(r);
    tj_release(x48);
    tj_release(bad);
    tj_function_free(fb);

    /* reductions: the reduced length and the kept inner extent are in the code, the outer extent
     * (rows) is not: [6, 8] runs [4, 8]'s code, [8, 4] has its own */
    tj_function *fr = tj_function_new("row_norms", (void *)row_norms, 2, NULL);
    built = n_built, shared = n_shared;
    call_shape(fr, 2, (const int64_t[]){4, 8}, 0.5f);
    call_shape(fr, 2, (const int64_t[]){8, 4}, 1.5f);
    call_shape(fr, 2, (const int64_t[]){4, 8}, 2.5f);
    call_shape(fr, 2, (const int64_t[]){6, 8}, 3.5f);
    call_shape(fr, 2, (const int64_t[]){70000, 4}, 4.5f); /* split across the pool's threads */
    CHECK_EQ_INT(n_built - built, 2);
    CHECK_EQ_INT(n_shared - shared, 2);
    tj_function_free(fr);
    /* over the leading axis ([r, 24] -> [24]): the reduced length is the rows; the first
     * signature's kernel has it in its code, a later one's takes it at run time (shared by the
     * third row count); a leading batch axis kept ([b, r, 24] over r: another axis, another
     * kernel) is outer, shared, and so is the length. Large enough not to be chained (a chain
     * of small kernels has their extents in its code). */
    tj_function *fc = tj_function_new("col_sums", (void *)col_sums, 2, NULL);
    built = n_built, shared = n_shared;
    call_shape(fc, 2, (const int64_t[]){3000, 24}, 0.5f);
    call_shape(fc, 2, (const int64_t[]){3500, 24}, 1.5f);
    call_shape(fc, 2, (const int64_t[]){4000, 24}, 2.0f);
    call_shape(fc, 3, (const int64_t[]){2, 1600, 24}, 2.5f);
    call_shape(fc, 3, (const int64_t[]){3, 1500, 24}, 3.5f);
    call_shape(fc, 2, (const int64_t[]){0, 70000}, 2.0f); /* empty: sums 0, means NaN */
    call_shape(fc, 2, (const int64_t[]){3500, 24}, 4.5f);
    CHECK_EQ_INT(n_built - built, 4);
    CHECK_EQ_INT(n_shared - shared, 2);
    tj_function_free(fc);
    /* a mean over everything: from the second signature on its length comes at run time */
    tj_function *fa = tj_function_new("mean_all", (void *)mean_all, 2, NULL);
    built = n_built, shared = n_shared;
    call_shape(fa, 2, (const int64_t[]){3, 24}, 0.5f);
    call_shape(fa, 2, (const int64_t[]){5, 24}, 1.5f);
    call_shape(fa, 2, (const int64_t[]){7, 24}, 2.5f);
    call_shape(fa, 3, (const int64_t[]){2, 9, 24}, 3.5f);
    CHECK_EQ_INT(n_built - built, 3); /* the first, the generic one, another rank's */
    CHECK_EQ_INT(n_shared - shared, 1);
    tj_function_free(fa);
    tj_function *fm = tj_function_new("col_means_i32", (void *)col_means_i32, 1, NULL);
    built = n_built, shared = n_shared;
    for (int64_t nr = 3; nr <= 6; nr++) {
        int32_t v[6 * 20];
        for (int64_t i = 0; i < nr * 20; i++)
            v[i] = (int32_t)((i * 7919) % 201) - 100;
        tj_tensor *x = tj_tensor_from_data(TJ_I32, 2, (const int64_t[]){nr, 20}, v);
        tj_tensor *got = tj_call(fm, 1, &x), *want = tj_call_eager(fm, 1, &x);
        CHECK_MSG(tj_status_of(got) == TJ_OK, "%s", tj_error_message(got));
        int nbad = 0;
        for (int64_t i = 0; tj_status_of(got) == TJ_OK && i < 20; i++)
            nbad += tj_tensor_get_f64(got, i) != tj_tensor_get_f64(want, i);
        CHECK_MSG(nbad == 0, "col_means_i32 [%lld, 20]: %d differ", (long long)nr, nbad);
        tj_release(got);
        tj_release(want);
        tj_release(x);
    }
    CHECK_EQ_INT(n_built - built, 2);
    CHECK_EQ_INT(n_shared - shared, 2);
    tj_function_free(fm);
    /* a softmax over the last axis: its code is the row length's (large enough not to be
     * chained: a chain of small kernels has their work units in its code) */
    tj_function *fs = tj_function_new("softmax_rows", (void *)softmax_rows, 2, NULL);
    built = n_built, shared = n_shared;
    call_shape(fs, 2, (const int64_t[]){7000, 10}, 0.5f);
    call_shape(fs, 2, (const int64_t[]){9000, 10}, 1.5f);
    call_shape(fs, 3, (const int64_t[]){2, 4000, 10}, 2.5f); /* another rank: its own axis */
    call_shape(fs, 2, (const int64_t[]){7000, 12}, 3.5f);
    CHECK_EQ_INT(n_built - built, 3);
    CHECK_EQ_INT(n_shared - shared, 1);
    tj_function_free(fs);

    /* a small product with a flat epilogue: a product's code names its k and n, not its rows:
     * a new row count shares it, another n compiles */
    tj_function *fd = tj_function_new("dense", (void *)dense, 2, NULL);
    built = n_built, shared = n_shared;
    for (int64_t m = 2; m <= 6; m += 4) {
        tj_tensor *x = su_filled(2, (const int64_t[]){m, 5}, 0.0f),
                  *w = su_filled(2, (const int64_t[]){5, 3}, 1.0f);
        same_as_eager(fd, x, w, 1e-5);
        tj_release(x);
        tj_release(w);
    }
    CHECK_EQ_INT(n_built - built, 1);
    CHECK_EQ_INT(n_shared - shared, 1);
    built = n_built, shared = n_shared;
    int64_t mk[4][2] = {{20, 64}, {40, 64}, {64, 64}, {40, 48}};
    for (int k = 0; k < 4; k++) {
        tj_tensor *x = su_filled(2, (const int64_t[]){mk[k][0], 64}, 0.5f * (float)k),
                  *w = su_filled(2, (const int64_t[]){64, mk[k][1]}, 1.0f);
        same_as_eager(fd, x, w, 1e-4);
        tj_release(x);
        tj_release(w);
    }
    CHECK_EQ_INT(n_built - built, 2);
    CHECK_EQ_INT(n_shared - shared, 2);
    tj_function_free(fd);

    /* a convolution's epilogue (bias + relu over [n, h, w, 16]): from the second batch size on
     * shape-generic, shared by the third (the convolution itself is a runtime kernel) */
    tj_function *fv = tj_function_new("conv_relu", (void *)conv_relu, 3, NULL);
    built = n_built, shared = n_shared;
    for (int64_t nb = 1; nb <= 3; nb++) {
        tj_tensor *x = su_filled(4, (const int64_t[]){nb, 16, 16, 8}, 0.25f * (float)nb),
                  *w = su_filled(4, (const int64_t[]){3, 3, 8, 16}, 0.1f),
                  *b = su_filled(1, (const int64_t[]){16}, 0.5f);
        tj_tensor *args[3] = {x, w, b};
        tj_tensor *got = tj_call(fv, 3, args), *e = tj_call_eager(fv, 3, args);
        CHECK_MSG(tj_status_of(got) == TJ_OK, "%s", tj_error_message(got));
        int nbad = tj_status_of(got) == TJ_OK ? su_differ(got, e, 1e-4) : 1;
        CHECK_MSG(nbad == 0, "conv_relu batch %lld: %d differ", (long long)nb, nbad);
        tj_release(got);
        tj_release(e);
        tj_release(x);
        tj_release(w);
        tj_release(b);
    }
    CHECK_EQ_INT(n_built - built, 2);
    CHECK_EQ_INT(n_shared - shared, 1);
    tj_function_free(fv);

    /* a training step at five batch sizes: the first compiles specialized code, the second
     * shape-generic code (the broadcast bias, the bias gradient over the batch, the mean, its
     * 1/N a loaded constant), which the others run without a compile; the loss falls. Batches
     * over 64, so the products (the weight gradient's inner dim is the batch) are library
     * calls: a small generated product has its k in its code */
    tj_tensor *w0 = su_filled(2, (const int64_t[]){8, 4}, 0.1f),
              *b0 = tj_zeros(TJ_F32, 1, (const int64_t[]){4});
    tw = tj_variable_new(w0, "w");
    tb = tj_variable_new(b0, "b");
    tsgd = tj_sgd_new(0.01, 0, 0);
    tj_function *fts = tj_function_new("train_step", (void *)train_step, 2, NULL);
    built = n_built, shared = n_shared;
    double first_loss = 0, last_loss = 0;
    int64_t batches[] = {80, 96, 120, 72, 99, 80, 80, 80};
    for (int k = 0; k < 8; k++) {
        tj_tensor *x = su_filled(2, (const int64_t[]){batches[k], 8}, 0.0f),
                  *y = su_filled(2, (const int64_t[]){batches[k], 4}, 0.5f);
        tj_tensor *l = tj_call(fts, 2, (tj_tensor *[]){x, y});
        CHECK_MSG(tj_status_of(l) == TJ_OK, "%s", tj_error_message(l));
        double v = tj_status_of(l) == TJ_OK ? tj_tensor_get_f64(l, 0) : NAN;
        CHECK(isfinite(v));
        if (k == 0)
            first_loss = v;
        last_loss = v;
        tj_release(l);
        tj_release(x);
        tj_release(y);
    }
    CHECK_MSG(last_loss < first_loss, "loss %g -> %g", first_loss, last_loss);
    CHECK_EQ_INT(n_built - built, 2);
    CHECK_EQ_INT(n_shared - shared, 3);
    tj_function_free(fts);
    tj_optimizer_free(tsgd);
    tj_variable_free(tw);
    tj_variable_free(tb);
    tj_release(w0);
    tj_release(b0);

    /* a hot shape-generic signature whose small kernels a specialized program would chain:
     * compiled again, specialized to its shapes, after JIT_RESPECIALIZE_CALLS (1000) calls, in
     * the background; values equal before and after. A large one is never re-specialized. */
    tj_function *fc2 = tj_function_new("small_chain", (void *)small_chain, 2, NULL);
    call_shape(fc2, 2, (const int64_t[]){4, 10}, 0.5f);
    tj_tensor *xs = su_filled(2, (const int64_t[]){3, 10}, 1.0f),
              *ys = su_filled(2, (const int64_t[]){3, 10}, 2.0f);
    for (int k = 0; k < 999; k++)
        tj_release(tj_call(fc2, 2, (tj_tensor *[]){xs, ys}));
    CHECK_EQ_INT(tj_function_wait_compiled(fc2), TJ_OK);
    CHECK_EQ_INT(n_respec, 0); /* 999 calls */
    same_as_eager(fc2, xs, ys, 1e-5);
    CHECK_EQ_INT(tj_function_wait_compiled(fc2), TJ_OK);
    CHECK_EQ_INT(n_respec, 1);
    same_as_eager(fc2, xs, ys, 1e-5); /* the specialized program's values */
    tj_release(xs);
    tj_release(ys);
    tj_function_free(fc2);
    tj_function *fl2 = tj_function_new("large_chain", (void *)small_chain, 2, NULL);
    call_shape(fl2, 2, (const int64_t[]){4000, 20}, 0.5f);
    tj_tensor *xl = su_filled(2, (const int64_t[]){3500, 20}, 1.0f),
              *yl = su_filled(2, (const int64_t[]){3500, 20}, 2.0f);
    for (int k = 0; k < 1001; k++)
        tj_release(tj_call(fl2, 2, (tj_tensor *[]){xl, yl}));
    CHECK_EQ_INT(tj_function_wait_compiled(fl2), TJ_OK);
    CHECK_EQ_INT(n_respec, 1);
    tj_release(xl);
    tj_release(yl);
    tj_function_free(fl2);
    /* freed while its re-specialization compiles: joined, nothing leaks */
    tj_function *fr2 = tj_function_new("small_chain_freed", (void *)small_chain, 2, NULL);
    call_shape(fr2, 2, (const int64_t[]){5, 10}, 0.5f);
    tj_tensor *xf = su_filled(2, (const int64_t[]){2, 10}, 1.0f);
    for (int k = 0; k < 1000; k++)
        tj_release(tj_call(fr2, 2, (tj_tensor *[]){xf, xf}));
    tj_function_free(fr2);
    tj_release(xf);

    tj_function_free(f);

    /* TJ_TIERED=0 (check_untiered) turns the default off; tiered = 1 turns it on all the same */
    tj_spec s9[2] = {{.dtype = TJ_F32, .rank = 1, .dims = {9}},
                     {.dtype = TJ_F32, .rank = 1, .dims = {9}}};
    for (int on = 0; on < 2; on++) {
        tj_function *ft = tj_function_new("flat_chain", (void *)flat_chain, 2,
                                          &(tj_function_options){.tiered = on ? 1 : 0});
        call_shape(ft, 1, (const int64_t[]){9}, 8.0f);
        CHECK_STR(tj_concrete_backend(tj_function_get_concrete(ft, 2, s9)), on ? "interp" : "cpu");
        CHECK_EQ_INT(tj_function_wait_compiled(ft), TJ_OK);
        CHECK_STR(tj_concrete_backend(tj_function_get_concrete(ft, 2, s9)), "cpu");
        tj_function_free(ft);
    }
    tj_set_log_topics("");
    tj_set_log(NULL, NULL);
    return check_done();
}
