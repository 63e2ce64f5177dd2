/* decompose.c — composite ops written as primitives: the ops ops.def marks IR_F_COMPOSITE each
 * have an entry in pass_decompositions, indexed by op (NULL: a primitive), that builds the same
 * value from elementwise ops, reductions and data movement. A backend that lowers only the
 * primitives runs every composite through it, and takes an op's fast path (a fused softmax
 * kernel, the reference cross-entropy) by saying it lowers that op natively. The max-pool
 * gradient has none: routing each window's gradient to its first maximum needs an argmax per
 * window, which no primitive gives. The rewrites keep
 * the reference kernels' numerics: softmaxes and the cross-entropy subtract the row's maximum
 * first, so no exponential overflows, and the cross-entropy still fails (TJ_ERR_RUNTIME) on a
 * label outside [0, C), though the message is the gather's that checks it. tests/jit/
 * test_decompose.c runs every composite both ways and compares. */
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"

/* ---- building primitives in dst -------------------------------------------------------------- */
static uint32_t node(ir_graph *g, const ir_node *p, const uint32_t *in, uint32_t n_in) {
    for (uint32_t k = 0; k < n_in; k++)
        if (in[k] == IR_NONE)
            return IR_NONE; /* an earlier node failed: its error is set */
    return ir_add(g, p, in, n_in);
}

static uint32_t op1(ir_graph *g, int op, uint32_t x) {
    ir_node p = {.op = (uint16_t)op};
    return node(g, &p, &x, 1);
}

static uint32_t op2(ir_graph *g, int op, uint32_t a, uint32_t b) {
    ir_node p = {.op = (uint16_t)op};
    uint32_t in[2] = {a, b};
    return node(g, &p, in, 2);
}

/* A reduction of x along one axis, keeping it (size 1) or not. */
static uint32_t reduce(ir_graph *g, int op, uint32_t x, int64_t axis, bool keep) {
    ir_node p = {.op = (uint16_t)op};
    p.a.n_list = 1;
    p.a.list[0] = axis;
    p.a.i[0] = keep;
    return node(g, &p, &x, 1);
}

/* A constant of dtype dt (f32, f64, i32, i64 or a 1-byte type) and dims[0..rank) whose element at
 * index at[] is f(at, ctx). */
static uint32_t constant(ir_graph *g, int dt, int rank, const int64_t *dims,
                         double (*f)(const int64_t *at, const void *ctx), const void *ctx) {
    size_t es = ir_dtype_size(dt);
    if (dt != TJ_F32 && dt != TJ_F64 && dt != TJ_I32 && dt != TJ_I64 && es != 1)
        return (void)ir_errorf(TJ_ERR_DTYPE, "decompose: no constant of dtype %s",
                               ir_dtype_name(dt)),
               IR_NONE;
    int64_t n = ir_numel(rank, dims), at[IR_MAX_RANK] = {0};
    unsigned char *v = malloc((size_t)n * es + 1);
    if (!v)
        return (void)ir_errorf(TJ_ERR_OOM, "decompose: out of memory"), IR_NONE;
    for (int64_t i = 0; i < n; i++) {
        double x = f(at, ctx);
        if (dt == TJ_F32)
            ((float *)v)[i] = (float)x;
        else if (dt == TJ_F64)
            ((double *)v)[i] = x;
        else if (dt == TJ_I32)
            ((int32_t *)v)[i] = (int32_t)x;
        else if (dt == TJ_I64)
            ((int64_t *)v)[i] = (int64_t)x;
        else
            v[i] = (uint8_t)x;
        for (int d = rank - 1; d >= 0 && ++at[d] == dims[d]; d--) /* the next index */
            at[d] = 0;
    }
    ir_node p = {.op = IR_OP_CONST, .dtype = (uint8_t)dt, .rank = (uint8_t)rank};
    if (rank)
        memcpy(p.dims, dims, (size_t)rank * sizeof *dims);
    p.a.blob = ir_add_blob(g, v, (size_t)n * es);
    free(v);
    return p.a.blob ? ir_add(g, &p, NULL, 0) : IR_NONE;
}

static double value_at(const int64_t *at, const void *ctx) {
    (void)at;
    return *(const double *)ctx;
}

/* A rank-0 constant v of dtype dt. */
static uint32_t scalar(ir_graph *g, int dt, double v) {
    return constant(g, dt, 0, NULL, value_at, &v);
}

/* ---- the decompositions ---------------------------------------------------------------------- */
/* relu(x) = maximum(x, 0): NaN stays NaN, as in the reference kernel */
static uint32_t relu(ir_graph *g, const ir_node *n, const uint32_t *in) {
    return op2(g, IR_OP_MAXIMUM, in[0], scalar(g, n->dtype, 0));
}

/* sigmoid(x) = 1 / (1 + exp(-x)): exp(-x) overflows to inf for very negative x, giving 0 */
static uint32_t sigmoid(ir_graph *g, const ir_node *n, const uint32_t *in) {
    uint32_t one = scalar(g, n->dtype, 1);
    uint32_t e = op1(g, IR_OP_EXP, op1(g, IR_OP_NEG, in[0]));
    return op2(g, IR_OP_DIV, one, op2(g, IR_OP_ADD, one, e));
}

/* x - max(x) along axis (kept), the shift every softmax starts from */
static uint32_t shifted(ir_graph *g, uint32_t x, int64_t axis) {
    return op2(g, IR_OP_SUB, x, reduce(g, IR_OP_MAX, x, axis, true));
}

/* log(sum(exp(d))) along axis (kept) */
static uint32_t log_sum_exp(ir_graph *g, uint32_t d, int64_t axis) {
    return op1(g, IR_OP_LOG, reduce(g, IR_OP_SUM, op1(g, IR_OP_EXP, d), axis, true));
}

/* softmax(x) = e / sum(e), e = exp(x - max(x)) along the axis */
static uint32_t softmax(ir_graph *g, const ir_node *n, const uint32_t *in) {
    uint32_t e = op1(g, IR_OP_EXP, shifted(g, in[0], n->a.i[0]));
    return op2(g, IR_OP_DIV, e, reduce(g, IR_OP_SUM, e, n->a.i[0], true));
}

/* log_softmax(x) = d - log(sum(exp(d))), d = x - max(x) along the axis */
static uint32_t log_softmax(ir_graph *g, const ir_node *n, const uint32_t *in) {
    uint32_t d = shifted(g, in[0], n->a.i[0]);
    return op2(g, IR_OP_SUB, d, log_sum_exp(g, d, n->a.i[0]));
}

/* xent(logits [..., C], labels [...]) = -sum(where(one_hot(labels) != 0, log_softmax(logits), 0))
 * over the last axis: `where`, not a product with the one-hot, so a -inf logit off the label gives
 * no NaN. Needs C known. */
static uint32_t sparse_xent(ir_graph *g, const ir_node *n, const uint32_t *in) {
    const ir_node *lg = ir_node_get(g, in[0]);
    int64_t last = lg->rank - 1, C = lg->rank ? lg->dims[last] : -1;
    if (C < 0)
        return (void)ir_errorf(TJ_ERR_UNSUPPORTED,
                               "decompose: sparse_softmax_xent needs the number of classes"),
               IR_NONE;
    uint32_t d = shifted(g, in[0], last);
    uint32_t ls = op2(g, IR_OP_SUB, d, log_sum_exp(g, d, last));
    ir_node oh = {.op = IR_OP_ONE_HOT, .dtype = TJ_I32};
    oh.a.i[0] = C;
    oh.a.f[0] = 1;
    oh.a.f[1] = 0;
    uint32_t mask = op2(g, IR_OP_NE, node(g, &oh, &in[1], 1), scalar(g, TJ_I32, 0));
    ir_node w = {.op = IR_OP_WHERE};
    uint32_t win[3] = {mask, ls, scalar(g, n->dtype, 0)};
    uint32_t picked = node(g, &w, win, 3);
    uint32_t loss = op1(g, IR_OP_NEG, reduce(g, IR_OP_SUM, picked, last, false));
    /* the op's failure kept: a gather of the labels from C zeros fails on a label outside [0, C)
     * (TJ_ERR_RUNTIME, naming the label), and adds nothing */
    static const double zero = 0;
    ir_node gather = {.op = IR_OP_GATHER};
    uint32_t gin[2] = {constant(g, n->dtype, 1, &C, value_at, &zero), in[1]};
    return op2(g, IR_OP_ADD, loss, node(g, &gather, gin, 2));
}

/* How many real (unpadded) input elements the window at output (oy, ox) holds. */
static double window_count(const int64_t *at, const void *ctx) {
    const ir_node *n = ctx; /* the avg_pool2d_grad node: its dims are the input's */
    double c = 1;
    for (int k = 0; k < 2; k++) {
        int64_t lo = at[1 + k] * n->a.i[k] - n->a.list[2 * k], hi = lo + n->a.i[2 + k];
        lo = lo < 0 ? 0 : lo;
        hi = hi > n->dims[1 + k] ? n->dims[1 + k] : hi;
        c *= (double)(hi - lo);
    }
    return c;
}

/* avg_pool2d_grad(dy) = conv2d_grad_input(dy / count, ones [KH, KW, 1, C]) with the pool's strides
 * and pads, a depthwise convolution's input gradient: each input element sums dy / count over the
 * windows that hold it, count being the real elements of each window (padding is not counted, as
 * in TensorFlow's SAME pooling). Needs the shapes known. */
static uint32_t avg_pool_grad(ir_graph *g, const ir_node *n, const uint32_t *in) {
    const ir_node *dy = ir_node_get(g, in[0]);
    for (int k = 0; k < 4; k++)
        if (n->dims[k] < 0 || dy->dims[k] < 0)
            return (void)ir_errorf(TJ_ERR_UNSUPPORTED,
                                   "decompose: avg_pool2d_grad needs its shapes known"),
                   IR_NONE;
    const int64_t cd[4] = {1, dy->dims[1], dy->dims[2], 1},
                  fd[4] = {n->a.i[2], n->a.i[3], 1, n->dims[3]};
    uint32_t scaled = op2(g, IR_OP_DIV, in[0], constant(g, n->dtype, 4, cd, window_count, n));
    ir_node c = {.op = IR_OP_CONV2D_GRAD_INPUT, .dtype = n->dtype, .rank = 4};
    memcpy(c.dims, n->dims, 4 * sizeof n->dims[0]);
    c.a.i[0] = n->a.i[0], c.a.i[1] = n->a.i[1], c.a.i[2] = 1, c.a.i[3] = 1;
    c.a.n_list = 4;
    memcpy(c.a.list, n->a.list, 4 * sizeof n->a.list[0]);
    static const double one = 1;
    uint32_t cin[2] = {scaled, constant(g, n->dtype, 4, fd, value_at, &one)};
    return node(g, &c, cin, 2);
}

const pass_decomp_fn pass_decompositions[IR_N_OPS] = {
    [IR_OP_RELU] = relu,
    [IR_OP_SIGMOID] = sigmoid,
    [IR_OP_SOFTMAX] = softmax,
    [IR_OP_LOG_SOFTMAX] = log_softmax,
    [IR_OP_SPARSE_XENT] = sparse_xent,
    [IR_OP_AVG_POOL2D_GRAD] = avg_pool_grad,
};

uint32_t pass_decompose_node(ir_graph *dst, const ir_node *n, const uint32_t *in) {
    pass_decomp_fn f = n->op < IR_N_OPS ? pass_decompositions[n->op] : NULL;
    if (!f)
        return (void)ir_errorf(TJ_ERR_INVALID, "decompose: %s is a primitive",
                               n->op < IR_N_OPS ? ir_ops[n->op].name : "?"),
               IR_NONE;
    uint32_t r = f(dst, n, in);
    if (r == IR_NONE)
        return IR_NONE;
    const ir_node *d = ir_node_get(dst, r); /* the same value: its dtype and dims */
    if (d->dtype != n->dtype || d->rank != n->rank ||
        memcmp(d->dims, n->dims, (size_t)n->rank * sizeof n->dims[0]) != 0)
        return (void)ir_errorf(TJ_ERR_INVALID, "decompose: %s decomposed to %s of rank %d",
                               ir_ops[n->op].name, ir_dtype_name(d->dtype), d->rank),
               IR_NONE;
    return r;
}

ir_graph *pass_decompose(const ir_graph *g, bool (*native)(int op, void *user), void *user,
                         uint32_t *n_done) {
    uint32_t done = 0;
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        int op = g->nodes[i].op;
        done += pass_decompositions[op] && !(native && native(op, user));
    }
    if (n_done)
        *n_done = done;
    if (!done)
        return (ir_graph *)g;
    pass_rebuild rb; /* each composite adds at most a dozen nodes */
    if (pass_rebuild_begin(&rb, g, g->n_nodes + 12 * done, g->n_edges + 24 * done) != TJ_OK)
        return NULL;
    uint32_t in[8];
    for (uint32_t id = 0; id < g->n_nodes; id++) {
        const ir_node *n = ir_node_get(g, id);
        uint32_t d;
        if (pass_decompositions[n->op] && !(native && native(n->op, user)) && n->n_in <= 8) {
            const uint32_t *src_in = ir_inputs(g, n);
            for (uint32_t k = 0; k < n->n_in; k++)
                in[k] = rb.map[src_in[k]];
            d = pass_decompose_node(rb.dst, n, in);
        } else {
            d = pass_copy(&rb, id);
        }
        if (d == IR_NONE)
            return pass_rebuild_abort(&rb);
        pass_map(&rb, id, d);
    }
    return pass_rebuild_end(&rb, NULL);
}
