/* Grouped and depthwise convolutions as one op (issue 23, item 11): a filter of C / G input
 * channels makes tj_conv2d a convolution of G groups, as tf.nn.conv2d. Checked against the same
 * convolution written group by group (slices of x and of the filter, one tj_conv2d each,
 * concatenated), for depthwise (with multipliers 1 and 2), ShuffleNet's 1x1 groups, ResNeXt-like
 * 3x3 groups, strides, SAME padding and dilation; forward and both gradients (tj_grad of a sum
 * against the per-group function's), compiled and eager, f32 and f64; and the shape errors. */
#include <math.h>
#include <tracejit.h>

#include "check.h"

typedef struct gc {
    const char *name;
    int64_t n, h, w, c, kh, kw, o, groups;
    int stride, same, dil;
} gc;
static const gc *G;
static tj_dtype DT;

static tj_tensor *grouped(tj_tensor *x, tj_tensor *w) {
    int st[2] = {G->stride, G->stride}, dl[2] = {G->dil, G->dil};
    return tj_conv2d(x, w, st, G->same ? TJ_PAD_SAME : TJ_PAD_VALID, dl);
}
static tj_tensor *by_groups(tj_tensor *x, tj_tensor *w) {
    int st[2] = {G->stride, G->stride}, dl[2] = {G->dil, G->dil};
    int64_t cg = G->c / G->groups, og = G->o / G->groups;
    tj_tensor *ys[64];
    for (int64_t k = 0; k < G->groups; k++) {
        int64_t xb[4] = {0, 0, 0, k * cg}, xe[4] = {G->n, G->h, G->w, (k + 1) * cg};
        int64_t wb[4] = {0, 0, 0, k * og}, we[4] = {G->kh, G->kw, cg, (k + 1) * og};
        ys[k] = tj_conv2d(tj_slice(x, xb, xe, NULL), tj_slice(w, wb, we, NULL), st,
                          G->same ? TJ_PAD_SAME : TJ_PAD_VALID, dl);
    }
    return tj_concat((int)G->groups, ys, 3);
}
/* a loss whose gradient reaches every element: sum(conv · r) with a fixed r */
static tj_tensor *R;
static tj_tensor *loss_grouped(tj_tensor *x, tj_tensor *w) {
    return tj_sum(tj_mul(grouped(x, w), R), 0, NULL, 0);
}
static tj_tensor *loss_by_groups(tj_tensor *x, tj_tensor *w) {
    return tj_sum(tj_mul(by_groups(x, w), R), 0, NULL, 0);
}

static void close_all(tj_tensor *a, tj_tensor *b, double tol, const char *what) {
    CHECK_MSG(tj_status_of(a) == TJ_OK && tj_status_of(b) == TJ_OK, "%s: %s %s", what,
              tj_error_message(a), tj_error_message(b));
    if (tj_status_of(a) || tj_status_of(b))
        return;
    CHECK_EQ_INT(tj_tensor_numel(a), tj_tensor_numel(b));
    int bad = 0;
    for (int64_t i = 0; i < tj_tensor_numel(a); i++) {
        double u = tj_tensor_get_f64(a, i), v = tj_tensor_get_f64(b, i);
        bad += !(fabs(u - v) <= tol * (1 + fabs(v)));
    }
    CHECK_MSG(bad == 0, "%s: %d of %lld values differ", what, bad, (long long)tj_tensor_numel(a));
}

static void run(const gc *g, tj_dtype dt) {
    tj_scope_begin();
    G = g, DT = dt;
    int64_t xd[4] = {g->n, g->h, g->w, g->c}, wd[4] = {g->kh, g->kw, g->c / g->groups, g->o};
    tj_tensor *x = tj_random_uniform(dt, 4, xd, -1, 1, 3),
              *w = tj_random_uniform(dt, 4, wd, -1, 1, 4);
    tj_tensor *args[2] = {x, w};
    double tol = dt == TJ_F32 ? 2e-5 : 1e-12;
    char what[200];
    tj_function *fg = tj_function_new("grouped", (void *)grouped, 2, NULL);
    tj_function *fb = tj_function_new("by_groups", (void *)by_groups, 2, NULL);
    tj_tensor *want = tj_call_eager(fb, 2, args);
    for (int eager = 0; eager < 2; eager++) {
        tj_tensor *y = eager ? tj_call_eager(fg, 2, args) : tj_call(fg, 2, args);
        snprintf(what, sizeof what, "%s %s%s forward", g->name, tj_dtype_name(dt),
                 eager ? " eager" : "");
        close_all(y, want, tol, what);
    }
    /* gradients of sum(conv · r) in x and w */
    int64_t yd[4];
    memcpy(yd, tj_tensor_dims(want), sizeof yd);
    R = tj_random_uniform(dt, 4, yd, -1, 1, 5);
    tj_function *lg = tj_function_new("loss_grouped", (void *)loss_grouped, 2, NULL);
    tj_function *lb = tj_function_new("loss_by_groups", (void *)loss_by_groups, 2, NULL);
    tj_function *dg = tj_grad(lg, 2, (int[]){0, 1}, NULL),
                *db = tj_grad(lb, 2, (int[]){0, 1}, NULL);
    tj_tensor *gw = tj_call_eager(db, 2, args);
    for (int eager = 0; eager < 2; eager++) {
        tj_tensor *gg = eager ? tj_call_eager(dg, 2, args) : tj_call(dg, 2, args);
        for (int k = 0; k < 2; k++) {
            snprintf(what, sizeof what, "%s %s%s gradient in %s", g->name, tj_dtype_name(dt),
                     eager ? " eager" : "", k ? "w" : "x");
            close_all(tj_tuple_get(gg, k), tj_tuple_get(gw, k), 10 * tol, what);
        }
    }
    tj_function_free(dg);
    tj_function_free(db);
    tj_function_free(lg);
    tj_function_free(lb);
    tj_function_free(fg);
    tj_function_free(fb);
    tj_scope_end();
}

int main(void) {
    static const gc cases[] = {
        {"depthwise 3x3", 2, 9, 11, 24, 3, 3, 24, 24, 1, 1, 1},
        {"depthwise x2 multiplier, stride 2", 2, 10, 9, 8, 3, 3, 16, 8, 2, 1, 1},
        {"depthwise 5x5 dilated, valid", 1, 13, 12, 6, 5, 5, 6, 6, 1, 0, 2},
        {"shufflenet 1x1, 3 groups", 2, 7, 7, 24, 1, 1, 36, 3, 1, 0, 1},
        {"resnext 3x3, 4 groups", 2, 8, 8, 32, 3, 3, 32, 4, 1, 1, 1},
        {"2 groups strided valid", 1, 11, 10, 6, 3, 2, 4, 2, 2, 0, 1},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        run(&cases[k], TJ_F32);
        run(&cases[k], TJ_F64);
    }
    /* shapes that do not group: named */
    tj_scope_begin();
    tj_tensor *x = tj_zeros(TJ_F32, 4, (int64_t[]){1, 5, 5, 6});
    tj_tensor *w4 = tj_zeros(TJ_F32, 4, (int64_t[]){3, 3, 4, 8});  /* 6 is no multiple of 4 */
    tj_tensor *w3 = tj_zeros(TJ_F32, 4, (int64_t[]){3, 3, 3, 4});  /* 2 groups, 4 % 2 ok */
    tj_tensor *w3o = tj_zeros(TJ_F32, 4, (int64_t[]){3, 3, 2, 5}); /* 3 groups, 5 % 3 != 0 */
    tj_tensor *r = tj_conv2d(x, w4, NULL, TJ_PAD_VALID, NULL);
    CHECK_EQ_INT(tj_status_of(r), TJ_ERR_SHAPE);
    CHECK_HAS(tj_error_message(r), "conv2d: input channels differ: input [1,5,5,6] has 6, filter "
                                   "[3,3,4,8] expects 4 (or a multiple");
    CHECK_EQ_INT(tj_status_of(tj_conv2d(x, w3, NULL, TJ_PAD_VALID, NULL)), TJ_OK);
    CHECK_EQ_INT(tj_status_of(tj_conv2d(x, w3o, NULL, TJ_PAD_VALID, NULL)), TJ_ERR_SHAPE);
    tj_scope_end();
    return check_done();
}
