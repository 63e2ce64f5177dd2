/* grad.c — the gradient rule of every op (the op table's gradient column, see grad.h).
 *
 * Rules follow TensorFlow's registered gradients (tensorflow/python/ops/math_grad.py,
 * array_grad.py, nn_grad.py) and JAX's JVP/transpose rules where they agree: broadcast operands
 * get their gradients summed back to their shape; maximum/minimum send a tie to the first
 * operand; max/min reductions split the gradient evenly among tied elements; relu's gradient at
 * 0 is 0; sign, floor, ceil and round have zero gradients; pow's gradient with respect to the
 * exponent is 0 where the base is <= 0. */
#include <stdlib.h>
#include <string.h>

#include "api/grad.h"

/* ---- helpers (all results scoped) ------------------------------------------------------------ */
static tj_tensor *zeros_like(const tj_tensor *x) {
    return tj_zeros((tj_dtype)x->dtype, x->rank, x->dims);
}

/* A host number: takes the other operand's dtype in ops. */
static tj_tensor *num(double v) {
    return tj_scalar_f64(v);
}

static int same_shape(const tj_tensor *a, const tj_tensor *b) {
    if (a->rank != b->rank)
        return 0;
    for (int d = 0; d < a->rank; d++)
        if (a->dims[d] != b->dims[d])
            return 0;
    return 1;
}

/* g (an op's output gradient) summed over the axes that broadcasting added to x, shaped like x. */
static tj_tensor *unbroadcast(tj_tensor *g, const tj_tensor *x) {
    if (same_shape(g, x))
        return g;
    int axes[TJ_MAX_RANK], na = 0, off = g->rank - x->rank;
    for (int d = 0; d < g->rank; d++) {
        int xd = d - off;
        if (xd < 0 || (x->dims[xd] == 1 && g->dims[d] != 1))
            axes[na++] = d;
    }
    tj_tensor *s = na ? tj_sum(g, na, axes, 1) : g;
    return tj_reshape(s, x->rank, x->dims);
}

static int reduced_axis(const ir_node *n, int d) {
    for (uint32_t k = 0; k < n->a.n_list; k++)
        if (n->a.list[k] == d)
            return 1;
    return 0;
}

/* t (a reduction's output, or its gradient) reshaped with the reduced axes kept as 1. */
static tj_tensor *keep_reduced(const ir_node *n, tj_tensor *t, const tj_tensor *x) {
    int64_t kd[TJ_MAX_RANK];
    for (int d = 0; d < x->rank; d++)
        kd[d] = reduced_axis(n, d) ? 1 : x->dims[d];
    return tj_reshape(t, x->rank, kd);
}

static double reduced_count(const ir_node *n, const tj_tensor *x) {
    double c = 1;
    for (int d = 0; d < x->rank; d++)
        if (reduced_axis(n, d))
            c *= (double)x->dims[d];
    return c;
}

/* ---- elementwise ----------------------------------------------------------------------------- */
#define RULE(name)                                                                                 \
    static tj_status name(const ir_node *n, tj_tensor *const *in, tj_tensor *out, tj_tensor *g,    \
                          uint32_t want, tj_tensor **gin)
#define UNUSED (void)n, (void)in, (void)out, (void)want

RULE(g_neg) {
    UNUSED;
    gin[0] = tj_neg(g);
    return TJ_OK;
}
RULE(g_abs) {
    UNUSED;
    gin[0] = tj_mul(g, tj_sign(in[0]));
    return TJ_OK;
}
RULE(g_zero) { /* sign, floor, ceil, round: piecewise constant */
    UNUSED;
    (void)g;
    gin[0] = zeros_like(in[0]);
    return TJ_OK;
}
RULE(g_exp) {
    UNUSED;
    gin[0] = tj_mul(g, out);
    return TJ_OK;
}
RULE(g_log) {
    UNUSED;
    gin[0] = tj_div(g, in[0]);
    return TJ_OK;
}
RULE(g_sqrt) { /* g / (2 sqrt(x)) */
    UNUSED;
    gin[0] = tj_div(tj_mul(g, num(0.5)), out);
    return TJ_OK;
}
RULE(g_rsqrt) { /* -g y^3 / 2 */
    UNUSED;
    gin[0] = tj_mul(g, tj_mul(tj_mul(tj_mul(out, out), out), num(-0.5)));
    return TJ_OK;
}
RULE(g_tanh) {
    UNUSED;
    gin[0] = tj_mul(g, tj_sub(num(1), tj_mul(out, out)));
    return TJ_OK;
}
RULE(g_sigmoid) {
    UNUSED;
    gin[0] = tj_mul(g, tj_mul(out, tj_sub(num(1), out)));
    return TJ_OK;
}
RULE(g_relu) { /* 0 at 0, as TensorFlow's ReluGrad */
    UNUSED;
    gin[0] = tj_where(tj_greater(out, num(0)), g, num(0));
    return TJ_OK;
}
RULE(g_sin) {
    UNUSED;
    gin[0] = tj_mul(g, tj_cos(in[0]));
    return TJ_OK;
}
RULE(g_cos) {
    UNUSED;
    gin[0] = tj_neg(tj_mul(g, tj_sin(in[0])));
    return TJ_OK;
}
RULE(g_atan) { /* 1 / (1 + x^2) */
    UNUSED;
    gin[0] = tj_div(g, tj_add(num(1), tj_mul(in[0], in[0])));
    return TJ_OK;
}
RULE(g_asin) { /* 1 / sqrt(1 - x^2) */
    UNUSED;
    gin[0] = tj_mul(g, tj_rsqrt(tj_sub(num(1), tj_mul(in[0], in[0]))));
    return TJ_OK;
}
RULE(g_acos) { /* -1 / sqrt(1 - x^2) */
    UNUSED;
    gin[0] = tj_neg(tj_mul(g, tj_rsqrt(tj_sub(num(1), tj_mul(in[0], in[0])))));
    return TJ_OK;
}
RULE(g_erf) { /* 2 / sqrt(pi) exp(-x^2) */
    UNUSED;
    gin[0] = tj_mul(g, tj_mul(num(1.1283791670955126), tj_exp(tj_neg(tj_mul(in[0], in[0])))));
    return TJ_OK;
}
RULE(g_cast) { /* back to the input's float dtype; an integer or bool input gets none */
    UNUSED;
    if (ir_dtype_is_float(in[0]->dtype))
        gin[0] = tj_cast(g, (tj_dtype)in[0]->dtype);
    return TJ_OK;
}

RULE(g_add) {
    UNUSED;
    gin[0] = unbroadcast(g, in[0]);
    gin[1] = unbroadcast(g, in[1]);
    return TJ_OK;
}
RULE(g_sub) {
    UNUSED;
    gin[0] = unbroadcast(g, in[0]);
    gin[1] = unbroadcast(tj_neg(g), in[1]);
    return TJ_OK;
}
RULE(g_mul) {
    UNUSED;
    gin[0] = unbroadcast(tj_mul(g, in[1]), in[0]);
    gin[1] = unbroadcast(tj_mul(g, in[0]), in[1]);
    return TJ_OK;
}
RULE(g_div) { /* d(a/b) = g/b, -g a / b / b */
    UNUSED;
    gin[0] = unbroadcast(tj_div(g, in[1]), in[0]);
    gin[1] = unbroadcast(tj_neg(tj_div(tj_div(tj_mul(g, in[0]), in[1]), in[1])), in[1]);
    return TJ_OK;
}
RULE(g_mod) { /* floor mod: a - floor(a / b) b */
    UNUSED;
    gin[0] = unbroadcast(g, in[0]);
    gin[1] = unbroadcast(tj_neg(tj_mul(g, tj_floor(tj_div(in[0], in[1])))), in[1]);
    return TJ_OK;
}
RULE(g_pow) { /* g b a^(b-1); g y log(a) where a > 0, else 0 */
    UNUSED;
    tj_tensor *a = in[0], *b = in[1];
    gin[0] = unbroadcast(tj_mul(g, tj_mul(b, tj_pow(a, tj_sub(b, num(1))))), a);
    tj_tensor *pos = tj_greater(a, num(0));
    tj_tensor *loga = tj_where(pos, tj_log(tj_where(pos, a, num(1))), num(0));
    gin[1] = unbroadcast(tj_mul(g, tj_mul(out, loga)), b);
    return TJ_OK;
}
static tj_status minmax(tj_tensor *const *in, tj_tensor *g, tj_tensor **gin, int is_max) {
    tj_tensor *first = is_max ? tj_greater_equal(in[0], in[1]) : tj_less_equal(in[0], in[1]);
    gin[0] = unbroadcast(tj_where(first, g, num(0)), in[0]);
    gin[1] = unbroadcast(tj_where(first, num(0), g), in[1]);
    return TJ_OK;
}
RULE(g_maximum) {
    UNUSED;
    return minmax(in, g, gin, 1);
}
RULE(g_minimum) {
    UNUSED;
    return minmax(in, g, gin, 0);
}
RULE(g_where) {
    UNUSED;
    gin[1] = unbroadcast(tj_where(in[0], g, num(0)), in[1]);
    gin[2] = unbroadcast(tj_where(in[0], num(0), g), in[2]);
    return TJ_OK;
}

/* ---- linear algebra -------------------------------------------------------------------------- */
static tj_tensor *swap_last(tj_tensor *t) {
    int perm[TJ_MAX_RANK];
    for (int d = 0; d < t->rank; d++)
        perm[d] = d;
    perm[t->rank - 2] = t->rank - 1;
    perm[t->rank - 1] = t->rank - 2;
    return tj_transpose(t, perm);
}
RULE(g_matmul) { /* ga = g b^T, gb = a^T g, batch dims summed back */
    UNUSED;
    if (API_GRAD_WANTS(want, 0))
        gin[0] = unbroadcast(tj_matmul(g, swap_last(in[1])), in[0]);
    if (API_GRAD_WANTS(want, 1))
        gin[1] = unbroadcast(tj_matmul(swap_last(in[0]), g), in[1]);
    return TJ_OK;
}

/* ---- reductions ------------------------------------------------------------------------------ */
RULE(g_sum) {
    UNUSED;
    gin[0] = tj_broadcast_to(keep_reduced(n, g, in[0]), in[0]->rank, in[0]->dims);
    return TJ_OK;
}
RULE(g_mean) {
    UNUSED;
    tj_tensor *s = tj_broadcast_to(keep_reduced(n, g, in[0]), in[0]->rank, in[0]->dims);
    gin[0] = tj_div(s, num(reduced_count(n, in[0])));
    return TJ_OK;
}
RULE(g_maxmin) { /* split evenly among the elements equal to the result */
    UNUSED;
    tj_tensor *x = in[0];
    tj_tensor *hit = tj_cast(tj_equal(x, keep_reduced(n, out, x)), (tj_dtype)x->dtype);
    int axes[TJ_MAX_RANK];
    for (uint32_t k = 0; k < n->a.n_list; k++)
        axes[k] = (int)n->a.list[k];
    tj_tensor *ties = tj_sum(hit, (int)n->a.n_list, axes, 1);
    if (n->a.n_list == 0) /* a reduction over no axis is the identity */
        ties = num(1);
    gin[0] = tj_div(tj_mul(keep_reduced(n, g, x), hit), ties);
    return TJ_OK;
}
RULE(g_prod) { /* the product of the other elements, exact when some are zero */
    UNUSED;
    tj_tensor *x = in[0];
    if (n->a.n_list == 0) {
        gin[0] = g;
        return TJ_OK;
    }
    int axes[TJ_MAX_RANK];
    for (uint32_t k = 0; k < n->a.n_list; k++)
        axes[k] = (int)n->a.list[k];
    int na = (int)n->a.n_list;
    tj_tensor *zero = tj_equal(x, num(0));
    tj_tensor *p_nz = tj_prod(tj_where(zero, num(1), x), na, axes, 1);
    tj_tensor *n_zero = tj_sum(tj_cast(zero, (tj_dtype)x->dtype), na, axes, 1);
    tj_tensor *no_zero = tj_equal(n_zero, num(0)), *one_zero = tj_equal(n_zero, num(1));
    tj_tensor *others = tj_where(no_zero, tj_div(p_nz, tj_where(zero, num(1), x)),
                                 tj_where(tj_logical_and(one_zero, zero), p_nz, num(0)));
    gin[0] = tj_mul(keep_reduced(n, g, x), others);
    return TJ_OK;
}
RULE(g_softmax) { /* y (g - sum(g y)) */
    UNUSED;
    int ax = (int)n->a.i[0];
    gin[0] = tj_mul(out, tj_sub(g, tj_sum(tj_mul(g, out), 1, &ax, 1)));
    return TJ_OK;
}
RULE(g_log_softmax) { /* g - exp(y) sum(g) */
    UNUSED;
    int ax = (int)n->a.i[0];
    gin[0] = tj_sub(g, tj_mul(tj_exp(out), tj_sum(g, 1, &ax, 1)));
    return TJ_OK;
}

/* ---- shapes ---------------------------------------------------------------------------------- */
RULE(g_reshape) { /* reshape, expand_dims, squeeze */
    UNUSED;
    gin[0] = tj_reshape(g, in[0]->rank, in[0]->dims);
    return TJ_OK;
}
RULE(g_transpose) {
    UNUSED;
    int inv[TJ_MAX_RANK];
    for (uint32_t d = 0; d < n->a.n_list; d++)
        inv[n->a.list[d]] = (int)d;
    gin[0] = tj_transpose(g, inv);
    return TJ_OK;
}
RULE(g_broadcast_to) {
    UNUSED;
    gin[0] = unbroadcast(g, in[0]);
    return TJ_OK;
}
RULE(g_concat) {
    UNUSED;
    int ax = (int)n->a.i[0], r = out->rank;
    int64_t off = 0;
    for (uint32_t k = 0; k < n->n_in; k++) {
        int64_t b[TJ_MAX_RANK] = {0}, e[TJ_MAX_RANK];
        for (int d = 0; d < r; d++)
            e[d] = out->dims[d];
        b[ax] = off;
        e[ax] = off + in[k]->dims[ax];
        off = e[ax];
        gin[k] = tj_slice(g, b, e, NULL);
    }
    return TJ_OK;
}
RULE(g_slice) {
    UNUSED;
    ir_node p = *n;
    p.op = IR_OP_SLICE_GRAD;
    p.rank = in[0]->rank;
    memcpy(p.dims, in[0]->dims, sizeof p.dims);
    gin[0] = api_apply(&p, &g, 1);
    return TJ_OK;
}
RULE(g_gather) { /* params: the rows added back where they were read; indices: none */
    UNUSED;
    ir_node p;
    memset(&p, 0, sizeof p);
    p.op = IR_OP_SCATTER_ADD;
    p.a.i[0] = n->a.i[0];
    tj_tensor *args[3] = {zeros_like(in[0]), in[1], g};
    gin[0] = api_apply(&p, args, 3);
    return TJ_OK;
}
RULE(g_slice_grad) { /* the adjoint of the adjoint: the slice again */
    UNUSED;
    ir_node p = *n;
    p.op = IR_OP_SLICE;
    p.rank = 0;
    gin[0] = api_apply(&p, &g, 1);
    return TJ_OK;
}
RULE(g_scatter_add) { /* x: g; updates: g gathered at the indices */
    UNUSED;
    gin[0] = g;
    gin[2] = tj_gather(g, in[1], (int)n->a.i[0]);
    return TJ_OK;
}
RULE(g_update_index) { /* x: g with row i zeroed; v: row i of g */
    UNUSED;
    ir_node p;
    memset(&p, 0, sizeof p);
    p.op = IR_OP_UPDATE_INDEX;
    tj_tensor *args[3] = {g, in[1], zeros_like(in[2])};
    gin[0] = api_apply(&p, args, 3);
    gin[2] = tj_gather(g, in[1], 0);
    return TJ_OK;
}
RULE(g_read_index) { /* x: zeros with row i = g */
    UNUSED;
    ir_node p;
    memset(&p, 0, sizeof p);
    p.op = IR_OP_UPDATE_INDEX;
    tj_tensor *args[3] = {zeros_like(in[0]), in[2], g};
    gin[0] = api_apply(&p, args, 3);
    return TJ_OK;
}

/* ---- neural networks ------------------------------------------------------------------------ */
/* The node n retargeted to `op` with the given output dims (rank 4), applied to a, b. */
static tj_tensor *conv_like(const ir_node *n, int op, const int64_t *dims, tj_tensor *a,
                            tj_tensor *b) {
    ir_node p = *n;
    p.op = (uint16_t)op;
    p.rank = 4;
    memcpy(p.dims, dims, 4 * sizeof(int64_t));
    tj_tensor *in[2] = {a, b};
    return api_apply(&p, in, b ? 2 : 1);
}
RULE(g_conv2d) { /* x: conv2d_grad_input(g, w); w: conv2d_grad_filter(x, g) */
    UNUSED;
    if (API_GRAD_WANTS(want, 0))
        gin[0] = conv_like(n, IR_OP_CONV2D_GRAD_INPUT, in[0]->dims, g, in[1]);
    if (API_GRAD_WANTS(want, 1))
        gin[1] = conv_like(n, IR_OP_CONV2D_GRAD_FILTER, in[1]->dims, in[0], g);
    return TJ_OK;
}
RULE(g_conv2d_grad_input) { /* dx = A(dy, w), linear in each: dy: conv2d(g, w); w: filter(g, dy) */
    UNUSED;
    if (API_GRAD_WANTS(want, 0))
        gin[0] = conv_like(n, IR_OP_CONV2D, in[0]->dims, g, in[1]);
    if (API_GRAD_WANTS(want, 1))
        gin[1] = conv_like(n, IR_OP_CONV2D_GRAD_FILTER, in[1]->dims, g, in[0]);
    return TJ_OK;
}
RULE(g_conv2d_grad_filter) { /* dw = B(x, dy): x: grad_input(dy, g); dy: conv2d(x, g) */
    UNUSED;
    if (API_GRAD_WANTS(want, 0))
        gin[0] = conv_like(n, IR_OP_CONV2D_GRAD_INPUT, in[0]->dims, in[1], g);
    if (API_GRAD_WANTS(want, 1))
        gin[1] = conv_like(n, IR_OP_CONV2D, in[1]->dims, in[0], g);
    return TJ_OK;
}
RULE(g_max_pool) {
    UNUSED;
    gin[0] = conv_like(n, IR_OP_MAX_POOL2D_GRAD, in[0]->dims, in[0], g);
    return TJ_OK;
}
RULE(g_avg_pool) {
    UNUSED;
    gin[0] = conv_like(n, IR_OP_AVG_POOL2D_GRAD, in[0]->dims, g, NULL);
    return TJ_OK;
}
RULE(g_avg_pool_grad) { /* linear: its adjoint is the pooling */
    UNUSED;
    gin[0] = conv_like(n, IR_OP_AVG_POOL2D, in[0]->dims, g, NULL);
    return TJ_OK;
}
RULE(g_sparse_xent) { /* logits: g (softmax(logits) - one_hot(labels)); labels: none */
    UNUSED;
    tj_tensor *lg = in[0];
    int ax = lg->rank - 1;
    tj_tensor *oh = tj_one_hot(in[1], lg->dims[ax], 1, 0, (tj_dtype)lg->dtype);
    gin[0] = tj_mul(tj_expand_dims(g, -1), tj_sub(tj_softmax(lg, ax), oh));
    return TJ_OK;
}

/* ---- the table ------------------------------------------------------------------------------- */
#define R(OP, fn) [IR_OP_##OP] = {API_GRAD_RULE, fn, NULL}
#define NONE(OP) [IR_OP_##OP] = {API_GRAD_NONE, NULL, NULL}
#define CF_WHY                                                                                     \
    "gradients through traced while and for loops are not supported yet (cond, switch and scan "   \
    "are; a for over a fixed range is a scan over tj_range)"
#define UNSUP(OP, why) [IR_OP_##OP] = {API_GRAD_UNSUPPORTED, NULL, why}

const api_grad_rule api_grad_rules[IR_N_OPS] = {
    /* sources: no inputs */
    NONE(CONST),
    NONE(PARAM),
    NONE(VAR_READ),
    NONE(EYE),
    NONE(RANGE),
    NONE(RANDOM_UNIFORM),
    NONE(RANDOM_NORMAL),
    /* unary */
    R(NEG, g_neg),
    R(ABS, g_abs),
    R(SIGN, g_zero),
    R(EXP, g_exp),
    R(LOG, g_log),
    R(SQRT, g_sqrt),
    R(RSQRT, g_rsqrt),
    R(TANH, g_tanh),
    R(SIGMOID, g_sigmoid),
    R(RELU, g_relu),
    R(SIN, g_sin),
    R(COS, g_cos),
    R(ATAN, g_atan),
    R(ASIN, g_asin),
    R(ACOS, g_acos),
    R(ERF, g_erf),
    R(FLOOR, g_zero),
    R(CEIL, g_zero),
    R(ROUND, g_zero),
    NONE(LOGICAL_NOT),
    NONE(ISNAN),
    NONE(ISINF),
    R(CAST, g_cast),
    /* binary */
    R(ADD, g_add),
    R(SUB, g_sub),
    R(MUL, g_mul),
    R(DIV, g_div),
    NONE(FLOORDIV),
    R(MOD, g_mod),
    R(POW, g_pow),
    R(MAXIMUM, g_maximum),
    R(MINIMUM, g_minimum),
    NONE(EQ),
    NONE(NE),
    NONE(LT),
    NONE(LE),
    NONE(GT),
    NONE(GE),
    NONE(LOGICAL_AND),
    NONE(SHIFT_LEFT),
    NONE(SHIFT_RIGHT),
    NONE(LOGICAL_OR),
    R(WHERE, g_where),
    R(MATMUL, g_matmul),
    /* reductions */
    R(SUM, g_sum),
    R(MEAN, g_mean),
    R(MAX, g_maxmin),
    R(MIN, g_maxmin),
    R(PROD, g_prod),
    NONE(ARGMAX),
    NONE(ARGMIN),
    R(SOFTMAX, g_softmax),
    R(LOG_SOFTMAX, g_log_softmax),
    /* shapes */
    R(RESHAPE, g_reshape),
    R(TRANSPOSE, g_transpose),
    R(BROADCAST_TO, g_broadcast_to),
    R(EXPAND_DIMS, g_reshape),
    R(SQUEEZE, g_reshape),
    R(CONCAT, g_concat),
    R(SLICE, g_slice),
    R(GATHER, g_gather),
    R(SLICE_GRAD, g_slice_grad),
    R(SCATTER_ADD, g_scatter_add),
    /* neural networks */
    R(CONV2D, g_conv2d),
    R(CONV2D_GRAD_INPUT, g_conv2d_grad_input),
    R(CONV2D_GRAD_FILTER, g_conv2d_grad_filter),
    R(MAX_POOL2D, g_max_pool),
    UNSUP(MAX_POOL2D_GRAD, "second derivatives of max pooling are not implemented"),
    R(AVG_POOL2D, g_avg_pool),
    R(AVG_POOL2D_GRAD, g_avg_pool_grad),
    NONE(ONE_HOT),
    R(SPARSE_XENT, g_sparse_xent),
    /* effects: no value to differentiate (assign's result is the value it was given) */
    NONE(PRINT),
    NONE(HOST_CALLBACK),
    NONE(ASSIGN),
    /* control flow */
    [IR_OP_COND] = {API_GRAD_CF, NULL, NULL},
    [IR_OP_SCAN] = {API_GRAD_CF, NULL, NULL},
    [IR_OP_FOR] = {API_GRAD_CF, NULL, NULL},
    UNSUP(WHILE, CF_WHY),

    UNSUP(GET, CF_WHY),
    /* tensor arrays */
    R(UPDATE_INDEX, g_update_index),
    R(READ_INDEX, g_read_index),
};
