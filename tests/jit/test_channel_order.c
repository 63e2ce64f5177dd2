/* Equal weights give bit-identical channels (issue 23, item 12): with every filter (or product
 * column) equal, each output channel sums the same terms, so every kernel must sum them in the
 * same order whatever the channel's position (full vector, masked tail, a BLAS edge kernel).
 * OpenBLAS summed a product's last columns in another order: 17, 33, 65, 100 and 129 channels gave
 * values one float step apart, and a softmax over logits near 1e9 (a SqueezeNet-class head:
 * conv, relu, global mean, softmax) gave some classes 1/k and the rest 0 instead of 1/O each.
 * Convolutions (1x1, 3x3, strided, SAME, with bias + relu and a max pool) and products with
 * constant and argument weights, compiled and eager; CI runs it again with TJ_ISA=generic (the
 * im2col + OpenBLAS path of CPUs without AVX-512). */
#include <tracejit.h>

#include "check.h"

static tj_tensor *W, *B;
static int KH, S, PAD, POOL;

static tj_tensor *conv(tj_tensor *x) {
    int st[2] = {S, S};
    tj_tensor *y =
        tj_relu(tj_bias_add(tj_conv2d(x, W, st, PAD ? TJ_PAD_SAME : TJ_PAD_VALID, NULL), B));
    if (POOL) {
        int pk[2] = {2, 2};
        y = tj_max_pool2d(y, pk, pk, TJ_PAD_VALID);
    }
    return y;
}
static tj_tensor *dense_const(tj_tensor *x) {
    return tj_add(tj_matmul(x, W), B);
}
static tj_tensor *dense_arg(tj_tensor *x, tj_tensor *w) {
    return tj_matmul(x, w);
}
static tj_tensor *head(tj_tensor *x) {
    int ax[2] = {1, 2};
    tj_tensor *y = tj_relu(tj_bias_add(tj_conv2d(x, W, NULL, TJ_PAD_VALID, NULL), B));
    return tj_softmax(tj_mean(y, 2, ax, 0), -1);
}

/* How many elements of y (channels last, O of them) differ from their row's channel 0. */
static int64_t uneven(tj_tensor *y, int64_t O) {
    const float *p = tj_tensor_data(y);
    int64_t n = tj_tensor_numel(y), bad = 0;
    for (int64_t i = 0; p && i < n / O; i++)
        for (int64_t o = 1; o < O; o++)
            bad += p[i * O + o] != p[i * O];
    return bad;
}

static void check_fn(void *fn, int nargs, tj_tensor *const *args, int64_t O, const char *what) {
    tj_function *f = tj_function_new(what, fn, nargs, NULL);
    for (int eager = 0; eager < 2; eager++) {
        tj_tensor *y = eager ? tj_call_eager(f, nargs, args) : tj_call(f, nargs, args);
        CHECK_MSG(tj_status_of(y) == TJ_OK, "%s: %s", what, tj_error_message(y));
        int64_t bad = tj_status_of(y) ? 0 : uneven(y, O);
        CHECK_MSG(bad == 0, "%s%s: %lld channel values differ from channel 0", what,
                  eager ? " eager" : "", (long long)bad); /* y: main's scope releases it */
    }
    tj_function_free(f);
}

int main(void) {
    static const int64_t Cs[] = {3, 16, 64}, Os[] = {1, 16, 17, 33, 48, 65, 100, 129};
    char what[160];
    tj_scope_begin();
    for (size_t ci = 0; ci < sizeof Cs / sizeof Cs[0]; ci++)
        for (size_t oi = 0; oi < sizeof Os / sizeof Os[0]; oi++) {
            int64_t C = Cs[ci], O = Os[oi];
            int64_t xd[4] = {2, 9, 9, C}, bd[1] = {O};
            tj_tensor *x = tj_random_uniform(TJ_F32, 4, xd, -1, 1, (uint64_t)(7 + C));
            B = tj_fill(1, bd, tj_scalar_f32(0.5f));
            for (KH = 1; KH <= 3; KH += 2)
                for (S = 1; S <= 2; S++)
                    for (PAD = 0; PAD < 2; PAD++)
                        for (POOL = 0; POOL < 2; POOL++) {
                            int64_t wd[4] = {KH, KH, C, O};
                            W = tj_fill(4, wd, tj_scalar_f32(0.0123f));
                            snprintf(what, sizeof what, "conv C %lld O %lld k %d s %d %s%s",
                                     (long long)C, (long long)O, KH, S, PAD ? "same" : "valid",
                                     POOL ? " pool" : "");
                            check_fn((void *)conv, 1, &x, O, what);
                        }
            int64_t md[2] = {81, C}, wd[2] = {C, O};
            tj_tensor *xm = tj_random_uniform(TJ_F32, 2, md, -1, 1, (uint64_t)(9 + C));
            W = tj_fill(2, wd, tj_scalar_f32(0.0123f));
            snprintf(what, sizeof what, "dense (constant weights) K %lld N %lld", (long long)C,
                     (long long)O);
            check_fn((void *)dense_const, 1, &xm, O, what);
            snprintf(what, sizeof what, "dense (weights an argument) K %lld N %lld", (long long)C,
                     (long long)O);
            check_fn((void *)dense_arg, 2, (tj_tensor *[]){xm, W}, O, what);
        }
    /* the SqueezeNet-class head: logits near 1e9, every class 1/O exactly */
    int64_t xd[4] = {1, 13, 13, 64}, wd[4] = {1, 1, 64, 100}, bd[1] = {100};
    tj_tensor *x = tj_random_uniform(TJ_F32, 4, xd, 0, 1e9, 3);
    W = tj_fill(4, wd, tj_scalar_f32(0.0123f));
    B = tj_fill(1, bd, tj_scalar_f32(0.5f));
    tj_function *f = tj_function_new("head", (void *)head, 1, NULL);
    for (int eager = 0; eager < 2; eager++) {
        tj_tensor *p = eager ? tj_call_eager(f, 1, &x) : tj_call(f, 1, &x);
        int bad = 0;
        for (int k = 0; k < 100 && !tj_status_of(p); k++)
            bad += tj_tensor_get_f64(p, k) != (float)(1.0 / 100) &&
                   fabs(tj_tensor_get_f64(p, k) - 0.01) > 1e-7;
        CHECK_MSG(!tj_status_of(p) && bad == 0, "head%s: %d classes are not 1/100",
                  eager ? " eager" : "", bad);
    }
    tj_function_free(f);
    tj_scope_end();
    return check_done();
}
