/* Every gradient rule against central finite differences in f64, on shapes that broadcast,
 * keepdims on and off and every axis. For each case the loss is sum(f(xs) * w) with a fixed random
 * w (so the output gradient is not uniform); the tape's gradient of each input is compared with
 * (loss(x + h) - loss(x - h)) / 2h element by element. The same gradients compiled (tj_grad of
 * the loss, one graph) must agree with the eager tape. Second-order gradients (a tape inside a
 * tape) are checked the same way on the rules that compose. The table test walks ops.def: every
 * op has a rule, or says it has no gradient, or why it is refused. */
#include <tracejit.h>

#include "check.h"
#include "api/grad.h"

enum { MAXIN = 3 };
typedef struct gcase {
    const char *name;
    int n_in;
    int rank[MAXIN];
    int64_t dims[MAXIN][4];
    double lo, hi; /* input domain */
    tj_tensor *(*fn)(tj_tensor *const *x, int arg);
    int arg;
} gcase;

static const int ax1[1] = {1}, ax_last[1] = {-1}, ax02[2] = {0, 2};

static tj_tensor *f_unary(tj_tensor *const *x, int op) {
    tj_tensor *(*fns[])(tj_tensor *) = {tj_neg,   tj_abs,   tj_exp,     tj_log,  tj_sqrt,
                                        tj_rsqrt, tj_tanh,  tj_sigmoid, tj_relu, tj_sin,
                                        tj_cos,   tj_floor, tj_sign,    tj_ceil, tj_round,
                                        tj_atan,  tj_asin,  tj_acos,    tj_erf};
    return fns[op](x[0]);
}
static tj_tensor *f_binary(tj_tensor *const *x, int op) {
    tj_tensor *(*fns[])(tj_tensor *, tj_tensor *) = {
        tj_add, tj_sub, tj_mul, tj_div, tj_pow, tj_maximum, tj_minimum, tj_matmul, tj_mod};
    return fns[op](x[0], x[1]);
}
static tj_tensor *f_reduce(tj_tensor *const *x, int arg) {
    /* arg: op * 8 + axes choice * 2 + keepdims */
    int op = arg / 8, which = (arg / 2) % 4, kd = arg % 2;
    const int *axes[4] = {NULL, ax1, ax_last, ax02};
    int n_axes[4] = {0, 1, 1, 2};
    tj_tensor *(*fns[])(tj_tensor *, int, const int *, int) = {tj_sum, tj_mean, tj_max, tj_min,
                                                               tj_prod};
    return fns[op](x[0], n_axes[which], axes[which], kd);
}
static tj_tensor *f_softmax(tj_tensor *const *x, int arg) {
    return arg == 0   ? tj_softmax(x[0], -1)
           : arg == 1 ? tj_softmax(x[0], 0)
           : arg == 2 ? tj_log_softmax(x[0], -1)
                      : tj_log_softmax(x[0], 1);
}
static tj_tensor *f_where(tj_tensor *const *x, int arg) {
    (void)arg;
    return tj_where(tj_greater(x[0], tj_scalar_f64(0)), x[1], x[2]);
}
static tj_tensor *f_shape(tj_tensor *const *x, int arg) {
    int perm[3] = {2, 0, 1};
    int64_t to[3] = {2, 3, 4}, r6[2] = {6, 4}, b[3] = {1, -1, 0}, e[3] = {2, -4, 3},
            s[3] = {1, -2, 2};
    int sq[1] = {1};
    int64_t idx_d[1] = {5};
    int64_t iv[5] = {2, 0, 2, 1, 2};
    switch (arg) {
    case 0:
        return tj_transpose(x[0], perm);
    case 1:
        return tj_broadcast_to(x[0], 3, to);
    case 2:
        return tj_reshape(x[0], 2, r6);
    case 3:
        return tj_squeeze(tj_expand_dims(x[0], 1), 1, sq);
    case 4:
        return tj_slice(x[0], b, e, s);
    case 5: {
        tj_tensor *xs[2] = {x[0], x[1]};
        return tj_concat(2, xs, 1);
    }
    case 6:
        return tj_gather(x[0], tj_tensor_from_data(TJ_I64, 1, idx_d, iv), 1);
    case 7:
        return tj_cast(tj_cast(x[0], TJ_F32), TJ_F64);
    case 8: /* a tensor array: write two rows, read one back, stack */
    default: {
        int64_t ed[1] = {4};
        tj_tensor *ta = tj_tensor_array_new(TJ_F64, 3, 1, ed);
        ta = tj_tensor_array_write(ta, tj_scalar_i64(0), x[0]);
        ta = tj_tensor_array_write(ta, tj_scalar_i64(2), tj_mul(x[0], x[1]));
        ta =
            tj_tensor_array_write(ta, tj_scalar_i64(1), tj_tensor_array_read(ta, tj_scalar_i64(2)));
        return tj_tensor_array_stack(ta);
    }
    }
}

static tj_tensor *f_nn(tj_tensor *const *x, int arg) {
    int s2[2] = {2, 2}, s21[2] = {2, 1}, k2[2] = {2, 2}, k32[2] = {3, 2}, d2[2] = {2, 1};
    int64_t ld[1] = {3};
    int64_t lv[3] = {2, 0, 4};
    switch (arg) {
    case 0:
        return tj_conv2d(x[0], x[1], NULL, TJ_PAD_VALID, NULL);
    case 1:
        return tj_conv2d(x[0], x[1], s2, TJ_PAD_SAME, NULL);
    case 2:
        return tj_conv2d(x[0], x[1], s21, TJ_PAD_SAME, d2);
    case 3:
        return tj_max_pool2d(x[0], k2, s2, TJ_PAD_VALID);
    case 4:
        return tj_max_pool2d(x[0], k32, s21, TJ_PAD_SAME);
    case 5:
        return tj_avg_pool2d(x[0], k2, s2, TJ_PAD_SAME);
    case 6:
        return tj_avg_pool2d(x[0], k32, NULL, TJ_PAD_VALID);
    case 7:
        return tj_sparse_softmax_cross_entropy(tj_tensor_from_data(TJ_I64, 1, ld, lv), x[0]);
    case 8:
        return tj_sparse_categorical_crossentropy(tj_tensor_from_data(TJ_I64, 1, ld, lv),
                                                  tj_softmax(x[0], -1), 0);
    default:
        return tj_bias_add(x[0], x[1]);
    }
}

static const gcase cases[] = {
    /* unary */
    {"neg", 1, {2}, {{3, 4}}, -2, 2, f_unary, 0},
    {"abs", 1, {2}, {{3, 4}}, -2, 2, f_unary, 1},
    {"exp", 1, {2}, {{3, 4}}, -2, 2, f_unary, 2},
    {"log", 1, {2}, {{3, 4}}, 0.5, 3, f_unary, 3},
    {"sqrt", 1, {2}, {{3, 4}}, 0.5, 3, f_unary, 4},
    {"rsqrt", 1, {2}, {{3, 4}}, 0.5, 3, f_unary, 5},
    {"tanh", 1, {2}, {{3, 4}}, -2, 2, f_unary, 6},
    {"sigmoid", 1, {2}, {{3, 4}}, -3, 3, f_unary, 7},
    {"relu", 1, {2}, {{3, 4}}, -2, 2, f_unary, 8},
    {"sin", 1, {1}, {{7}}, -3, 3, f_unary, 9},
    {"cos", 1, {1}, {{7}}, -3, 3, f_unary, 10},
    {"floor", 1, {1}, {{7}}, -3, 3, f_unary, 11},
    {"sign", 1, {1}, {{7}}, -3, 3, f_unary, 12},
    {"ceil", 1, {1}, {{7}}, -3, 3, f_unary, 13},
    {"round", 1, {1}, {{7}}, -3, 3, f_unary, 14},
    {"atan", 1, {2}, {{3, 4}}, -3, 3, f_unary, 15},
    {"asin", 1, {2}, {{3, 4}}, -0.9, 0.9, f_unary, 16}, /* inside (-1, 1), off the poles */
    {"acos", 1, {2}, {{3, 4}}, -0.9, 0.9, f_unary, 17},
    {"erf", 1, {2}, {{3, 4}}, -2, 2, f_unary, 18},
    /* binary, with broadcasting both ways */
    {"add", 2, {3, 2}, {{2, 3, 4}, {3, 1}}, -2, 2, f_binary, 0},
    {"add_rank0", 2, {0, 2}, {{0}, {2, 3}}, -2, 2, f_binary, 0},
    {"sub", 2, {1, 3}, {{4}, {2, 3, 4}}, -2, 2, f_binary, 1},
    {"mul", 2, {3, 3}, {{2, 1, 4}, {1, 3, 1}}, -2, 2, f_binary, 2},
    {"div", 2, {2, 1}, {{3, 4}, {4}}, 0.5, 2, f_binary, 3},
    {"pow", 2, {2, 2}, {{3, 4}, {1, 4}}, 0.5, 2, f_binary, 4},
    {"maximum", 2, {2, 2}, {{3, 4}, {3, 1}}, -2, 2, f_binary, 5},
    {"minimum", 2, {2, 1}, {{3, 4}, {4}}, -2, 2, f_binary, 6},
    {"matmul", 2, {2, 2}, {{3, 4}, {4, 5}}, -2, 2, f_binary, 7},
    {"matmul_batch", 2, {3, 2}, {{2, 3, 4}, {4, 2}}, -2, 2, f_binary, 7},
    {"matmul_bcast", 2, {4, 3}, {{2, 1, 3, 4}, {3, 4, 2}}, -2, 2, f_binary, 7},
    {"mod", 2, {2, 2}, {{3, 4}, {3, 4}}, 0.5, 3, f_binary, 8},
    {"where", 3, {2, 2, 1}, {{3, 4}, {3, 4}, {4}}, -2, 2, f_where, 0},
    /* softmax family */
    {"softmax", 1, {2}, {{3, 5}}, -2, 2, f_softmax, 0},
    {"softmax_ax0", 1, {2}, {{3, 5}}, -2, 2, f_softmax, 1},
    {"log_softmax", 1, {2}, {{3, 5}}, -2, 2, f_softmax, 2},
    {"log_softmax_3d", 1, {3}, {{2, 3, 4}}, -2, 2, f_softmax, 3},
    /* shapes */
    {"transpose", 1, {3}, {{3, 4, 2}}, -2, 2, f_shape, 0},
    {"broadcast_to", 1, {2}, {{3, 1}}, -2, 2, f_shape, 1},
    {"reshape", 1, {3}, {{2, 3, 4}}, -2, 2, f_shape, 2},
    {"expand_squeeze", 1, {2}, {{3, 4}}, -2, 2, f_shape, 3},
    {"slice", 1, {3}, {{3, 5, 4}}, -2, 2, f_shape, 4},
    {"concat", 2, {2, 2}, {{3, 2}, {3, 4}}, -2, 2, f_shape, 5},
    {"gather", 1, {2}, {{2, 3}}, -2, 2, f_shape, 6},
    {"cast", 1, {2}, {{2, 3}}, -2, 2, f_shape, 7},
    {"tensor_array", 2, {1, 1}, {{4}, {4}}, -2, 2, f_shape, 8},
    /* neural networks */
    {"conv2d_valid", 2, {4, 4}, {{2, 5, 4, 3}, {3, 2, 3, 2}}, -1, 1, f_nn, 0},
    {"conv2d_same_s2", 2, {4, 4}, {{2, 5, 6, 2}, {3, 3, 2, 3}}, -1, 1, f_nn, 1},
    {"conv2d_dilated", 2, {4, 4}, {{1, 6, 5, 2}, {2, 3, 2, 2}}, -1, 1, f_nn, 2},
    {"max_pool_valid", 1, {4}, {{2, 4, 5, 3}}, -2, 2, f_nn, 3},
    {"max_pool_same", 1, {4}, {{1, 5, 4, 2}}, -2, 2, f_nn, 4},
    {"avg_pool_same", 1, {4}, {{2, 5, 3, 2}}, -2, 2, f_nn, 5},
    {"avg_pool_valid", 1, {4}, {{1, 4, 5, 2}}, -2, 2, f_nn, 6},
    {"sparse_xent", 1, {2}, {{3, 5}}, -2, 2, f_nn, 7},
    {"sparse_categorical_crossentropy", 1, {2}, {{3, 5}}, -2, 2, f_nn, 8},
    {"bias_add", 2, {4, 1}, {{2, 3, 2, 4}, {4}}, -2, 2, f_nn, 9},
};

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double urand(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

static tj_tensor *rand_tensor(int rank, const int64_t *dims, double lo, double hi) {
    int64_t n = 1;
    for (int d = 0; d < rank; d++)
        n *= dims[d];
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++) {
        v[i] = lo + (hi - lo) * urand();
        if (lo < 0 && fabs(v[i]) < 0.05) /* keep away from kinks at 0 */
            v[i] = 0.3;
        if (fabs(v[i] - round(v[i])) < 0.05) /* and from integer steps (floor, mod, round) */
            v[i] += 0.1;
    }
    tj_tensor *t = tj_tensor_from_data(TJ_F64, rank, dims, v);
    free(v);
    return t;
}

static tj_tensor *weights; /* w of the current case */
static const gcase *cur;

static tj_tensor *loss_of(tj_tensor *const *x) {
    tj_tensor *y = cur->fn(x, cur->arg);
    return tj_sum(tj_mul(y, weights), 0, NULL, 0);
}

/* loss as a function for tj_grad (up to three inputs) */
static tj_tensor *loss1(tj_tensor *a) {
    return loss_of(&a);
}
static tj_tensor *loss2(tj_tensor *a, tj_tensor *b) {
    tj_tensor *x[2] = {a, b};
    return loss_of(x);
}
static tj_tensor *loss3(tj_tensor *a, tj_tensor *b, tj_tensor *c) {
    tj_tensor *x[3] = {a, b, c};
    return loss_of(x);
}

static double eval_loss(tj_tensor *const *x) {
    tj_scope_begin();
    double v = tj_tensor_get_f64(loss_of(x), 0);
    tj_scope_end();
    return v;
}

static void run_case(const gcase *c) {
    cur = c;
    tj_scope_begin();
    tj_tensor *x[MAXIN];
    for (int k = 0; k < c->n_in; k++)
        x[k] = rand_tensor(c->rank[k], c->dims[k], c->lo, c->hi);
    /* the output's shape, for w */
    tj_tensor *y = c->fn(x, c->arg);
    CHECK_MSG(tj_status_of(y) == TJ_OK, "%s: forward: %s", c->name, tj_error_message(y));
    if (tj_status_of(y)) {
        tj_scope_end();
        return;
    }
    weights = rand_tensor(tj_tensor_rank(y), tj_tensor_dims(y), -1, 1);
    /* eager tape */
    tj_tape *tape = tj_tape_new(0);
    for (int k = 0; k < c->n_in; k++)
        CHECK_EQ_INT(tj_tape_watch(tape, x[k]), TJ_OK);
    tj_tensor *loss = loss_of(x);
    tj_tensor *g[MAXIN] = {0};
    tj_status st = tj_tape_gradient(tape, loss, NULL, c->n_in, x, g);
    CHECK_MSG(st == TJ_OK, "%s: %s", c->name, tj_last_error());
    tj_tape_free(tape);
    /* compiled: tj_grad of the loss over every input */
    void *fns[3] = {(void *)loss1, (void *)loss2, (void *)loss3};
    tj_function *lf = tj_function_new(c->name, fns[c->n_in - 1], c->n_in, NULL);
    int argnums[MAXIN] = {0, 1, 2};
    tj_function *gf = tj_grad(lf, c->n_in, argnums, NULL);
    tj_tensor *gc = tj_call(gf, c->n_in, x);
    CHECK_MSG(tj_status_of(gc) == TJ_OK, "%s: compiled: %s", c->name, tj_error_message(gc));
    for (int k = 0; k < c->n_in && !st; k++) {
        tj_tensor *gk = g[k];
        tj_tensor *ck = c->n_in == 1 ? gc : tj_tuple_get(gc, k);
        if (!gk) { /* no gradient (a bool path): finite differences must see none either */
            double *xv = (double *)tj_tensor_data(x[k]);
            double keep = xv[0];
            xv[0] = keep + 1e-3;
            double lp = eval_loss(x);
            xv[0] = keep;
            CHECK_MSG(lp == eval_loss(x), "%s: input %d has no gradient", c->name, k);
            continue;
        }
        CHECK_EQ_INT(tj_tensor_numel(gk), tj_tensor_numel(x[k]));
        CHECK_EQ_INT(tj_tensor_rank(gk), tj_tensor_rank(x[k]));
        double *xv = (double *)tj_tensor_data(x[k]); /* perturbed in place, then restored */
        int64_t n = tj_tensor_numel(x[k]);
        for (int64_t i = 0; i < n; i++) {
            /* the f32 round trip of `cast` needs a step well above f32's rounding */
            double keep = xv[i],
                   h = (c->fn == f_shape && c->arg == 7 ? 1e-2 : 1e-6) * fmax(1, fabs(keep));
            xv[i] = keep + h;
            double lp = eval_loss(x);
            xv[i] = keep - h;
            double lm = eval_loss(x);
            xv[i] = keep;
            double fd = (lp - lm) / (2 * h), an = tj_tensor_get_f64(gk, i);
            CHECK_MSG(fabs(fd - an) <= 1e-5 * fmax(1, fabs(fd)),
                      "%s: d/dx%d[%lld]: tape %.9g, finite differences %.9g", c->name, k,
                      (long long)i, an, fd);
            if (tj_status_of(ck) == TJ_OK)
                CHECK_MSG(fabs(tj_tensor_get_f64(ck, i) - an) <= 1e-9 * fmax(1, fabs(an)),
                          "%s: d/dx%d[%lld]: compiled %.17g, eager %.17g", c->name, k, (long long)i,
                          tj_tensor_get_f64(ck, i), an);
        }
    }
    tj_function_free(gf);
    tj_function_free(lf);
    tj_scope_end();
}

/* ---- second order: d2/dx2 of sum(f(x)) by a tape inside a tape ------------------------------- */
static tj_tensor *second(tj_tensor *x, tj_tensor *(*f)(tj_tensor *), tj_tensor **g1) {
    tj_tape *outer = tj_tape_new(0);
    tj_tape_watch(outer, x);
    tj_tape *inner = tj_tape_new(0);
    tj_tape_watch(inner, x);
    tj_tensor *y = tj_sum(f(x), 0, NULL, 0);
    tj_tensor *g = NULL, *h = NULL;
    CHECK_EQ_INT(tj_tape_gradient(inner, y, NULL, 1, &x, &g), TJ_OK);
    tj_tape_free(inner);
    /* g = f'(x) elementwise; sum(g) differentiated again gives f''(x) */
    CHECK_EQ_INT(tj_tape_gradient(outer, tj_sum(g, 0, NULL, 0), NULL, 1, &x, &h), TJ_OK);
    tj_tape_free(outer);
    *g1 = g;
    return h;
}

static tj_tensor *cube(tj_tensor *x) {
    return tj_mul(tj_mul(x, x), x);
}

static void second_order(void) {
    struct {
        const char *name;
        tj_tensor *(*f)(tj_tensor *);
    } fs[] = {{"tanh", tj_tanh}, {"exp", tj_exp},   {"sin", tj_sin}, {"sigmoid", tj_sigmoid},
              {"log", tj_log},   {"sqrt", tj_sqrt}, {"cube", cube}};
    for (size_t i = 0; i < sizeof fs / sizeof fs[0]; i++) {
        tj_scope_begin();
        int64_t d[1] = {5};
        tj_tensor *x = rand_tensor(1, d, 0.5, 2);
        tj_tensor *g1 = NULL, *h = second(x, fs[i].f, &g1);
        CHECK_MSG(h != NULL, "%s: no second derivative", fs[i].name);
        for (int64_t k = 0; h && k < 5; k++) {
            double *xv = (double *)tj_tensor_data(x), keep = xv[k], e = 1e-5;
            xv[k] = keep + e;
            tj_tensor *gp = NULL, *gm = NULL, *hp = second(x, fs[i].f, &gp);
            xv[k] = keep - e;
            tj_tensor *hm = second(x, fs[i].f, &gm);
            xv[k] = keep;
            (void)hp;
            (void)hm;
            double fd = (tj_tensor_get_f64(gp, k) - tj_tensor_get_f64(gm, k)) / (2 * e);
            CHECK_MSG(fabs(fd - tj_tensor_get_f64(h, k)) <= 1e-5 * fmax(1, fabs(fd)),
                      "%s'' at %g: tape %.9g, finite differences %.9g", fs[i].name, keep,
                      tj_tensor_get_f64(h, k), fd);
        }
        tj_scope_end();
    }
    /* compiled: grad of grad of a scalar function */
    tj_scope_begin();
    tj_function *f = tj_function_new("cube", (void *)cube, 1, NULL);
    int a0 = 0;
    tj_function *df = tj_grad(f, 1, &a0, NULL), *ddf = tj_grad(df, 1, &a0, NULL);
    tj_tensor *x = tj_scalar_f64(1.5);
    tj_tensor *r = tj_call(ddf, 1, &x), *re = tj_call_eager(ddf, 1, &x);
    CHECK_MSG(tj_status_of(r) == TJ_OK, "%s", tj_error_message(r));
    CHECK_NEAR(tj_tensor_get_f64(r, 0), 9.0, 1e-12); /* d2/dx2 x^3 = 6x */
    CHECK_NEAR(tj_tensor_get_f64(re, 0), 9.0, 1e-12);
    tj_function_free(ddf);
    tj_function_free(df);
    tj_function_free(f);
    tj_scope_end();
}

/* ---- the table and the errors ---------------------------------------------------------------- */
static void table(void) {
    for (int op = 0; op < IR_N_OPS; op++) {
        const api_grad_rule *r = &api_grad_rules[op];
        CHECK_MSG(r->kind != API_GRAD_MISSING, "op %s has no gradient entry", ir_ops[op].name);
        CHECK_MSG(r->kind != API_GRAD_RULE || r->fn, "op %s: a rule without a function",
                  ir_ops[op].name);
        CHECK_MSG(r->kind != API_GRAD_UNSUPPORTED || r->why, "op %s: refused without a reason",
                  ir_ops[op].name);
    }
}

static tj_variable *unused_var;
static tj_tensor *pair_out(tj_tensor *x, tj_tensor *i) { /* a tuple: not a scalar loss */
    tj_tensor *r[2] = {tj_sum(x, 0, NULL, 0), tj_cast(i, TJ_F64)};
    return tj_tuple(2, r);
}
static tj_tensor *int_arg(tj_tensor *x, tj_tensor *i) {
    return tj_sum(tj_mul(x, tj_cast(i, TJ_F64)), 0, NULL, 0);
}
static tj_tensor *uses_var(tj_tensor *x) {
    return tj_sum(tj_mul(x, tj_variable_read(unused_var)), 0, NULL, 0);
}

static void errors(void) {
    tj_scope_begin();
    int64_t d[1] = {3};
    tj_tensor *x = rand_tensor(1, d, -1, 1), *g = NULL;
    /* a non-scalar target without a seed; a wrong seed; an integer target */
    tj_tape *t = tj_tape_new(0);
    tj_tape_watch(t, x);
    tj_tensor *y = tj_mul(x, x);
    CHECK_EQ_INT(tj_tape_gradient(t, y, NULL, 1, &x, &g), TJ_ERR_SHAPE);
    CHECK_HAS(tj_last_error(), "scalar");
    CHECK_EQ_INT(tj_tape_gradient(t, y, tj_ones(TJ_F64, 1, (int64_t[]){4}), 1, &x, &g),
                 TJ_ERR_SHAPE);
    CHECK_HAS(tj_last_error(), "seed float64[4] does not match the target float64[3]");
    CHECK_EQ_INT(tj_tape_gradient(t, tj_argmax(y, 0), NULL, 1, &x, &g), TJ_ERR_DTYPE);
    CHECK_EQ_INT(tj_tape_gradient(t, NULL, NULL, 1, &x, &g), TJ_ERR_INVALID);
    CHECK(g == NULL);
    /* with a seed: the vector-Jacobian product 2 x seed */
    tj_tensor *seed = tj_ones(TJ_F64, 1, d);
    CHECK_EQ_INT(tj_tape_gradient(t, y, seed, 1, &x, &g), TJ_OK);
    CHECK_NEAR(tj_tensor_get_f64(g, 1), 2 * tj_tensor_get_f64(x, 1), 1e-15);
    /* an unconnected source is NULL (TensorFlow's None), zeros with the flag */
    tj_tensor *other = rand_tensor(1, d, -1, 1);
    tj_tensor *s = tj_sum(y, 0, NULL, 0);
    CHECK_EQ_INT(tj_tape_gradient(t, s, NULL, 1, &other, &g), TJ_OK);
    CHECK(g == NULL);
    tj_tape_free(t);
    t = tj_tape_new(TJ_TAPE_UNCONNECTED_ZERO);
    tj_tape_watch(t, x);
    s = tj_sum(tj_exp(x), 0, NULL, 0);
    CHECK_EQ_INT(tj_tape_gradient(t, s, NULL, 1, &other, &g), TJ_OK);
    CHECK(g != NULL && tj_tensor_get_f64(g, 0) == 0 && tj_tensor_numel(g) == 3);
    /* an integer path stops the gradient: floor division has none */
    tj_tensor *q = tj_sum(tj_floordiv(x, tj_scalar_f64(0.25)), 0, NULL, 0);
    CHECK_EQ_INT(tj_tape_gradient(t, q, NULL, 1, &x, &g), TJ_OK);
    CHECK(g != NULL && tj_tensor_get_f64(g, 0) == 0);
    tj_tape_free(t);
    /* a variable the loss does not use: NULL */
    unused_var = tj_variable_new(x, "unused");
    tj_variable *v2 = tj_variable_new(x, "v2");
    t = tj_tape_new(0);
    s = uses_var(x);
    tj_tensor *gv[2] = {0};
    tj_variable *vs[2] = {unused_var, v2};
    CHECK_EQ_INT(tj_tape_gradient_vars(t, s, NULL, 2, vs, gv), TJ_OK);
    CHECK(gv[0] != NULL && gv[1] == NULL);
    CHECK_NEAR(tj_tensor_get_f64(gv[0], 2), tj_tensor_get_f64(x, 2), 0);
    tj_tape_free(t);
    /* a freed tape, NULL arguments */
    CHECK_EQ_INT(tj_tape_watch(t, x), TJ_ERR_STATE);
    CHECK_HAS(tj_last_error(), "freed");
    CHECK_EQ_INT(tj_tape_watch(NULL, x), TJ_ERR_INVALID);
    CHECK(tj_tape_new(0x100) == NULL);
    /* gradients through traced control flow are refused, naming the op */
    tj_function *f = tj_function_new("uses_var", (void *)uses_var, 1, NULL);
    int a0 = 0, a5 = 5;
    CHECK(tj_grad(f, 1, &a5, NULL) == NULL);
    CHECK_HAS(tj_last_error(), "argnum 5 out of range");
    CHECK(tj_grad(NULL, 1, &a0, NULL) == NULL);
    int twice[2] = {0, 0};
    CHECK(tj_value_and_grad(f, 2, twice, NULL) == NULL);
    CHECK_HAS(tj_last_error(), "2 argnums for 'uses_var' of 1 arguments"); /* too many */
    CHECK(tj_function_new_body("nobody", NULL, 1, NULL, NULL) == NULL);
    CHECK_HAS(tj_last_error(), "body is NULL");
    /* the transform's run-time errors: a tuple result, an integer argument, an argnum twice */
    tj_function *pf = tj_function_new("pair_out", (void *)pair_out, 2, NULL);
    tj_function *nf = tj_function_new("int_arg", (void *)int_arg, 2, NULL);
    CHECK(tj_grad(nf, 2, twice, NULL) == NULL);
    CHECK_HAS(tj_last_error(), "argnum 0 given twice");
    int a01[2] = {0, 1};
    tj_function *pg = tj_grad(pf, 1, &a0, NULL), *ng = tj_grad(nf, 2, a01, NULL);
    tj_tensor *iv = tj_scalar_i32(3);
    iv = tj_cast(iv, TJ_I32);
    tj_tensor *args2[2] = {x, iv};
    for (int eager = 0; eager < 2; eager++) {
        tj_tensor *r1 = eager ? tj_call_eager(pg, 2, args2) : tj_call(pg, 2, args2);
        CHECK_EQ_INT(tj_status_of(r1), TJ_ERR_INVALID);
        CHECK_HAS(tj_error_message(r1), "'pair_out' returned a tuple");
        tj_tensor *r2 = eager ? tj_call_eager(ng, 2, args2) : tj_call(ng, 2, args2);
        CHECK_EQ_INT(tj_status_of(r2), TJ_ERR_DTYPE);
        CHECK_HAS(tj_error_message(r2), "argument 1 of 'int_arg' is int32");
    }
    tj_function_free(pg);
    tj_function_free(ng);
    tj_function_free(pf);
    tj_function_free(nf);
    /* constructors' bad arguments */
    CHECK_EQ_INT(tj_status_of(tj_glorot_uniform(TJ_F32, 0, NULL, 1)), TJ_ERR_SHAPE);
    CHECK_EQ_INT(tj_status_of(tj_one_hot(tj_scalar_i64(1), -2, 1, 0, TJ_F32)), TJ_ERR_INVALID);
    CHECK_EQ_INT(tj_status_of(tj_one_hot(x, 3, 1, 0, TJ_F32)), TJ_ERR_DTYPE);
    CHECK_EQ_INT(tj_status_of(tj_one_hot(tj_scalar_i64(1), 3, 1, 0, (tj_dtype)99)), TJ_ERR_DTYPE);
    tj_function_free(f);
    tj_variable_free(unused_var);
    tj_variable_free(v2);
    tj_scope_end();
}

/* ---- gradients through traced control flow ------------------------------------------------- */
static tj_tensor *br_sin(int n, tj_tensor *const *a, void *u) { /* (sin(x) * y, x * x) */
    (void)n, (void)u;
    tj_tensor *r[2] = {tj_mul(tj_sin(a[0]), a[1]), tj_mul(a[0], a[0])};
    return tj_tuple(2, r);
}
static tj_tensor *br_exp(int n, tj_tensor *const *a, void *u) { /* (exp(x) + y, y): no x in #2 */
    (void)n, (void)u;
    tj_tensor *r[2] = {tj_add(tj_exp(a[0]), a[1]), tj_mul(a[1], tj_scalar_f64(3))};
    return tj_tuple(2, r);
}
static tj_tensor *captured_outer;
static tj_tensor *br_cap(int n, tj_tensor *const *a, void *u) { /* reads an outer value */
    (void)n, (void)u;
    tj_tensor *r[2] = {tj_mul(a[0], captured_outer), tj_tanh(a[1])};
    return tj_tuple(2, r);
}
static tj_tensor *br_print(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    tj_print("x", 1, a);
    tj_tensor *r[2] = {a[0], a[1]};
    return tj_tuple(2, r);
}
static tj_body cond_bodies[4] = {br_sin, br_exp, br_cap, br_print};
static int which_then, which_else;

/* loss = sum(r0 * 2) + sum(r1) of cond(sum(x) > 0, then, else)(x, y) */
static tj_tensor *cond_loss(tj_tensor *x, tj_tensor *y) {
    tj_tensor *xy[2] = {x, y};
    captured_outer = tj_cos(y);
    tj_tensor *pred = tj_greater(tj_sum(x, 0, NULL, 0), tj_scalar_f64(0));
    tj_tensor *r = tj_cond(pred, cond_bodies[which_then], cond_bodies[which_else], 2, xy, NULL);
    return tj_add(tj_sum(tj_mul(tj_tuple_get(r, 0), tj_scalar_f64(2)), 0, NULL, 0),
                  tj_sum(tj_tuple_get(r, 1), 0, NULL, 0));
}

static tj_tensor *switch_loss(tj_tensor *i, tj_tensor *x) {
    tj_body fns[3] = {br_sin, br_exp, br_cap};
    tj_tensor *xy[2] = {x, x};
    captured_outer = tj_cos(x);
    tj_tensor *r = tj_switch(i, 3, fns, 2, xy, NULL);
    return tj_sum(tj_add(tj_tuple_get(r, 0), tj_tuple_get(r, 1)), 0, NULL, 0);
}

static tj_tensor *while_body(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    return tj_mul(a[0], tj_scalar_f64(0.5));
}
static tj_tensor *while_cond(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    return tj_greater(tj_sum(a[0], 0, NULL, 0), tj_scalar_f64(1));
}
static tj_tensor *through_while(tj_tensor *x) {
    return tj_sum(tj_while_loop(while_cond, while_body, 1, &x, NULL), 0, NULL, 0);
}

/* scan: h = tanh(h W + x_t) * s, with W captured, an int step counter carried, and a per-step
 * output y_t = h * x_t; loss = sum(h_T) + sum(ys^2) */
static tj_tensor *scan_w;
static tj_tensor *rnn_body(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u; /* a: h, count, s (carried), x_t */
    tj_tensor *h = tj_mul(tj_tanh(tj_add(tj_matmul(a[0], scan_w), a[3])), a[2]);
    tj_tensor *r[4] = {h, tj_add(a[1], tj_scalar_i64(1)), a[2], tj_mul(h, a[3])};
    return tj_tuple(4, r);
}
static tj_tensor *scan_loss(tj_tensor *h0, tj_tensor *xs, tj_tensor *w, tj_tensor *s) {
    scan_w = w;
    tj_tensor *carry[3] = {h0, tj_scalar_i64(0), s};
    tj_tensor *r = tj_scan(rnn_body, 3, carry, 1, &xs, NULL);
    tj_tensor *ys = tj_tuple_get(r, 3);
    return tj_add(tj_sum(tj_tuple_get(r, 0), 0, NULL, 0), tj_sum(tj_mul(ys, ys), 0, NULL, 0));
}

/* for_range over constant bounds: h = h * w + sin(i * h) */
static tj_tensor *for_body(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u; /* a: i, h, w */
    tj_tensor *fi = tj_cast(a[0], TJ_F64);
    tj_tensor *r[2] = {tj_add(tj_mul(a[1], a[2]), tj_sin(tj_mul(fi, a[1]))), a[2]};
    return tj_tuple(2, r);
}
static int64_t for_limit = 4;
static tj_tensor *for_loss(tj_tensor *h, tj_tensor *w) {
    tj_tensor *init[2] = {h, w};
    tj_tensor *r = tj_for_range(tj_scalar_i64(1), tj_scalar_i64(for_limit), tj_scalar_i64(1),
                                for_body, 2, init, NULL);
    return tj_sum(tj_mul(tj_tuple_get(r, 0), tj_tuple_get(r, 1)), 0, NULL, 0);
}

static void for_gradients(void) {
    int64_t d[1] = {3};
    for (int lim = 0; lim < 2; lim++) {
        for_limit = lim ? 5 : 1; /* 4 iterations, then none */
        tj_scope_begin();
        tj_tensor *args[2] = {rand_tensor(1, d, -1, 1), rand_tensor(1, d, 0.5, 1.2)};
        tj_function *f = tj_function_new("for_loss", (void *)for_loss, 2, NULL);
        int an[2] = {0, 1};
        tj_function *gf = tj_grad(f, 2, an, NULL);
        tj_tensor *gc = tj_call(gf, 2, args), *ge = tj_call_eager(gf, 2, args);
        CHECK_MSG(tj_tuple_size(gc) == 2, "for: %s", tj_error_message(gc));
        CHECK_MSG(tj_tuple_size(ge) == 2, "for eager: %s", tj_error_message(ge));
        for (int k = 0; k < 2 && tj_tuple_size(gc) == 2 && tj_tuple_size(ge) == 2; k++)
            for (int i = 0; i < 3; i++) {
                double c = tj_tensor_get_f64(tj_tuple_get(gc, k), i),
                       e = tj_tensor_get_f64(tj_tuple_get(ge, k), i);
                CHECK_MSG(fabs(c - e) <= 1e-12 * fmax(1, fabs(e)),
                          "for (limit %lld) d/dx%d[%d]: compiled %.17g, eager %.17g",
                          (long long)for_limit, k, i, c, e);
                double *xv = (double *)tj_tensor_data(args[k]), keep = xv[i], h = 1e-6;
                xv[i] = keep + h;
                tj_scope_begin();
                double lp = tj_tensor_get_f64(for_loss(args[0], args[1]), 0);
                xv[i] = keep - h;
                double lm = tj_tensor_get_f64(for_loss(args[0], args[1]), 0);
                tj_scope_end();
                xv[i] = keep;
                double fd = (lp - lm) / (2 * h);
                CHECK_MSG(fabs(fd - e) <= 1e-5 * fmax(1, fabs(fd)),
                          "for d/dx%d[%d]: tape %.9g, finite differences %.9g", k, i, e, fd);
            }
        tj_function_free(gf);
        tj_function_free(f);
        tj_scope_end();
    }
}

static void scan_gradients(void) {
    tj_scope_begin();
    int64_t dh[2] = {2, 3}, dx[3] = {5, 2, 3}, dw[2] = {3, 3}, ds[1] = {3};
    tj_tensor *args[4] = {rand_tensor(2, dh, -1, 1), rand_tensor(3, dx, -1, 1),
                          rand_tensor(2, dw, -0.5, 0.5), rand_tensor(1, ds, 0.5, 1.5)};
    tj_function *f = tj_function_new("scan_loss", (void *)scan_loss, 4, NULL);
    int an[4] = {0, 1, 2, 3};
    tj_function *gf = tj_grad(f, 4, an, NULL);
    tj_tensor *gc = tj_call(gf, 4, args), *ge = tj_call_eager(gf, 4, args);
    CHECK_MSG(tj_tuple_size(gc) == 4, "scan: %s", tj_error_message(gc));
    CHECK_MSG(tj_tuple_size(ge) == 4, "scan eager: %s", tj_error_message(ge));
    for (int k = 0; k < 4 && tj_tuple_size(gc) == 4 && tj_tuple_size(ge) == 4; k++) {
        tj_tensor *c = tj_tuple_get(gc, k), *e = tj_tuple_get(ge, k);
        CHECK_EQ_INT(tj_tensor_numel(c), tj_tensor_numel(args[k]));
        double *xv = (double *)tj_tensor_data(args[k]);
        for (int64_t i = 0; i < tj_tensor_numel(e); i++) {
            CHECK_MSG(fabs(tj_tensor_get_f64(c, i) - tj_tensor_get_f64(e, i)) <= 1e-12,
                      "scan d/dx%d[%lld]: compiled %.17g, eager %.17g", k, (long long)i,
                      tj_tensor_get_f64(c, i), tj_tensor_get_f64(e, i));
            double keep = xv[i], h = 1e-6;
            xv[i] = keep + h;
            tj_scope_begin();
            double lp = tj_tensor_get_f64(scan_loss(args[0], args[1], args[2], args[3]), 0);
            xv[i] = keep - h;
            double lm = tj_tensor_get_f64(scan_loss(args[0], args[1], args[2], args[3]), 0);
            tj_scope_end();
            xv[i] = keep;
            double fd = (lp - lm) / (2 * h);
            CHECK_MSG(fabs(fd - tj_tensor_get_f64(e, i)) <= 1e-5 * fmax(1, fabs(fd)),
                      "scan d/dx%d[%lld]: tape %.9g, finite differences %.9g", k, (long long)i,
                      tj_tensor_get_f64(e, i), fd);
        }
    }
    tj_function_free(gf);
    tj_function_free(f);
    tj_scope_end();
}

/* compiled (one graph with the cond's gradient cond) against eager (the branch run as C) */
static void control_flow(void) {
    int pairs[3][2] = {{0, 1}, {1, 0}, {2, 0}};
    int64_t d[1] = {3};
    for (int sign = 0; sign < 2; sign++)
        for (int p = 0; p < 3; p++) {
            tj_scope_begin();
            which_then = pairs[p][0];
            which_else = pairs[p][1];
            tj_tensor *x = rand_tensor(1, d, sign ? 0.1 : -1.0, sign ? 1.0 : -0.1);
            tj_tensor *y = rand_tensor(1, d, -1, 1);
            tj_function *f = tj_function_new("cond_loss", (void *)cond_loss, 2, NULL);
            int an[2] = {0, 1};
            tj_function *gf = tj_grad(f, 2, an, NULL);
            tj_tensor *args[2] = {x, y};
            tj_tensor *gc = tj_call(gf, 2, args), *ge = tj_call_eager(gf, 2, args);
            CHECK_MSG(tj_tuple_size(gc) == 2, "cond %d/%d: %s", which_then, which_else,
                      tj_error_message(gc));
            CHECK_MSG(tj_tuple_size(ge) == 2, "%s", tj_error_message(ge));
            for (int k = 0; k < 2 && tj_tuple_size(gc) == 2 && tj_tuple_size(ge) == 2; k++)
                for (int i = 0; i < 3; i++) {
                    double c = tj_tensor_get_f64(tj_tuple_get(gc, k), i),
                           e = tj_tensor_get_f64(tj_tuple_get(ge, k), i);
                    CHECK_MSG(fabs(c - e) <= 1e-12 * fmax(1, fabs(e)),
                              "cond %d/%d d/dx%d[%d]: compiled %.17g, eager %.17g", which_then,
                              which_else, k, i, c, e);
                }
            /* and against finite differences of the eager loss */
            for (int i = 0; i < 3 && tj_tuple_size(gc) == 2; i++) {
                double *xv = (double *)tj_tensor_data(x), keep = xv[i], h = 1e-6;
                xv[i] = keep + h;
                double lp = tj_tensor_get_f64(cond_loss(x, y), 0);
                xv[i] = keep - h;
                double lm = tj_tensor_get_f64(cond_loss(x, y), 0);
                xv[i] = keep;
                double fd = (lp - lm) / (2 * h);
                CHECK_MSG(fabs(fd - tj_tensor_get_f64(tj_tuple_get(gc, 0), i)) <= 1e-5,
                          "cond d/dx[%d]: %.9g vs fd %.9g", i,
                          tj_tensor_get_f64(tj_tuple_get(gc, 0), i), fd);
            }
            tj_function_free(gf);
            tj_function_free(f);
            tj_scope_end();
        }
    /* switch: a tree of conds */
    tj_scope_begin();
    tj_function *sf = tj_function_new("switch_loss", (void *)switch_loss, 2, NULL);
    int a1 = 1;
    tj_function *sg = tj_grad(sf, 1, &a1, NULL);
    tj_tensor *x = rand_tensor(1, d, -1, 1);
    for (int64_t b = 0; b < 3; b++) {
        tj_tensor *args[2] = {tj_scalar_i64(b), x};
        tj_tensor *gc = tj_call(sg, 2, args), *ge = tj_call_eager(sg, 2, args);
        CHECK_MSG(tj_status_of(gc) == TJ_OK, "switch %lld: %s", (long long)b, tj_error_message(gc));
        for (int i = 0; i < 3 && tj_status_of(gc) == TJ_OK; i++)
            CHECK_NEAR(tj_tensor_get_f64(gc, i), tj_tensor_get_f64(ge, i), 1e-12);
    }
    CHECK_EQ_INT(tj_function_trace_count(sg), tj_get_eager() ? 0 : 1);
    tj_function_free(sg);
    tj_function_free(sf);
    /* refused: a branch with a print, and a while loop (data-dependent trip count) */
    which_then = 3;
    which_else = 0;
    tj_function *f = tj_function_new("cond_loss", (void *)cond_loss, 2, NULL);
    int an[2] = {0, 1};
    tj_function *gf = tj_grad(f, 2, an, NULL);
    tj_tensor *args[2] = {x, x};
    tj_tensor *r = tj_call(gf, 2, args);
    if (!tj_get_eager()) {
        CHECK_EQ_INT(tj_status_of(r), TJ_ERR_UNSUPPORTED);
        CHECK_HAS(tj_error_message(r), "'print'");
    }
    tj_function_free(gf);
    tj_function_free(f);
    tj_function *wf = tj_function_new("through_while", (void *)through_while, 1, NULL);
    int a0 = 0;
    tj_function *wg = tj_grad(wf, 1, &a0, NULL);
    tj_tensor *w = rand_tensor(1, d, 1, 2);
    r = tj_call(wg, 1, &w);
    if (!tj_get_eager()) {
        CHECK_EQ_INT(tj_status_of(r), TJ_ERR_UNSUPPORTED);
        CHECK_HAS(tj_error_message(r), "'while'");
    }
    tj_tensor *re = tj_call_eager(wg, 1, &w); /* eagerly the loop runs as C: on the tape */
    CHECK_MSG(tj_status_of(re) == TJ_OK, "%s", tj_error_message(re));
    tj_function_free(wg);
    tj_function_free(wf);
    tj_scope_end();
}

int main(void) {
    table();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(&cases[i]);
    for (int op = 0; op < 5; op++)
        for (int k = 0; k < 8; k++) {
            gcase c = {"reduce", 1, {3}, {{2, 3, 4}}, -2, 2, f_reduce, op * 8 + k};
            run_case(&c);
        }
    second_order();
    errors();
    control_flow();
    scan_gradients();
    for_gradients();
    return check_done();
}
