/* infer_nn.c — shape rules of the neural-network ops: convolutions and their gradients, pooling
 * and its gradients, one_hot and the sparse softmax cross-entropy. Messages name the op, the
 * argument and the shapes, as TensorFlow's do. */
#include <string.h>

#include "ir/internal.h"

#define DB 200

/* the output extent of a window of `k` taps dilated by `d`, stride `s`, over `in` plus pads */
static int64_t out_len(int64_t in, int64_t k, int64_t s, int64_t d, int64_t p0, int64_t p1) {
    int64_t span = d * (k - 1) + 1, padded = in + p0 + p1;
    return padded < span ? -1 : (padded - span) / s + 1;
}

/* A max pool's window dilation along axis k (0: H, 1: W): list[4 + k] when the list has the
 * two dilations after the pads, else 1. */
static int64_t pool_dilation(const ir_node *p, int k) {
    return p->a.n_list == 6 ? p->a.list[4 + k] : 1;
}

/* Strides, dilations (or windows) >= 1 and pads >= 0; a max pool's list may add its window's
 * two dilations after the pads. */
static tj_status check_geometry(const char *op, const ir_node *p, int dil) {
    int max_pool = p->op == IR_OP_MAX_POOL2D || p->op == IR_OP_MAX_POOL2D_GRAD;
    if (p->a.n_list != 4 && !(max_pool && p->a.n_list == 6))
        return ir_errorf(TJ_ERR_INVALID,
                         "%s: expected 4 pads [top, bottom, left, right]%s, got %u values", op,
                         max_pool ? " (and 2 dilations)" : "", p->a.n_list);
    for (int k = 0; k < 2 && p->a.n_list == 6; k++)
        if (p->a.list[4 + k] < 1 || p->a.list[4 + k] > INT32_MAX)
            return ir_errorf(TJ_ERR_INVALID, "%s: dilation %lld must be >= 1", op,
                             (long long)p->a.list[4 + k]);
    for (int k = 0; k < 4; k++) {
        if (k < 2 && (p->a.i[k] < 1 || p->a.i[k] > INT32_MAX))
            return ir_errorf(TJ_ERR_INVALID, "%s: stride %lld must be >= 1", op,
                             (long long)p->a.i[k]);
        if (k >= 2 && (p->a.i[k] < 1 || p->a.i[k] > INT32_MAX))
            return ir_errorf(TJ_ERR_INVALID, "%s: %s %lld must be >= 1", op,
                             dil ? "dilation" : "window size", (long long)p->a.i[k]);
        if (p->a.list[k] < 0 || p->a.list[k] > INT32_MAX)
            return ir_errorf(TJ_ERR_INVALID, "%s: pad %lld must be >= 0", op,
                             (long long)p->a.list[k]);
    }
    return TJ_OK;
}

/* The [N, OH, OW, O] output of a convolution of x dims by w dims (both rank 4, known or -1). A
 * grouped convolution (TensorFlow's: the groups are C / the filter's input channels) needs C a
 * multiple of the filter's input channels and O a multiple of the groups; depthwise is C groups
 * of one channel. */
static tj_status conv_out(const char *op, const ir_node *p, const int64_t *x, const int64_t *w,
                          int64_t *y) {
    char sx[DB], sw[DB];
    if (x[3] >= 0 && w[2] >= 0 &&
        (w[2] == 0 ? x[3] != 0 : x[3] % w[2] != 0 || (w[3] >= 0 && w[3] % (x[3] / w[2]) != 0)))
        return ir_errorf(TJ_ERR_SHAPE,
                         "%s: input channels differ: input %s has %lld, filter %s expects %lld "
                         "(or a multiple, in groups that divide its %lld output channels)",
                         op, ir_fmt_dims(sx, DB, 4, x), (long long)x[3], ir_fmt_dims(sw, DB, 4, w),
                         (long long)w[2], (long long)w[3]);
    y[0] = x[0];
    y[3] = w[3];
    for (int k = 0; k < 2; k++) {
        if (x[1 + k] < 0 || w[k] < 0) {
            y[1 + k] = -1;
            continue;
        }
        y[1 + k] = out_len(x[1 + k], w[k], p->a.i[k], p->a.i[2 + k], p->a.list[2 * k],
                           p->a.list[2 * k + 1]);
        if (y[1 + k] < 0)
            return ir_errorf(TJ_ERR_SHAPE,
                             "%s: the filter %s (dilated) is larger than the padded input %s on "
                             "axis %s",
                             op, ir_fmt_dims(sw, DB, 4, w), ir_fmt_dims(sx, DB, 4, x),
                             k ? "W" : "H");
    }
    return TJ_OK;
}

static tj_status need_rank4(const char *op, const char *what, const ir_node *t) {
    char s[DB];
    if (t->rank != 4)
        return ir_errorf(TJ_ERR_SHAPE, "%s: %s must have rank 4 (%s), got %s", op, what,
                         strcmp(what, "filter") == 0 ? "HWIO" : "NHWC",
                         ir_fmt_dims(s, DB, t->rank, t->dims));
    return TJ_OK;
}

static tj_status need_float(const char *op, const ir_node *a, const ir_node *b) {
    if (!ir_dtype_is_float(a->dtype) || (b && b->dtype != a->dtype))
        return ir_errorf(TJ_ERR_DTYPE, "%s: expected float operands of one dtype, got %s%s%s", op,
                         ir_dtype_name(a->dtype), b ? " and " : "",
                         b ? ir_dtype_name(b->dtype) : "");
    return TJ_OK;
}

static bool same_dims(const int64_t *a, const int64_t *b, int r) {
    for (int k = 0; k < r; k++)
        if (a[k] >= 0 && b[k] >= 0 && a[k] != b[k])
            return false;
    return true;
}

static tj_status conv(ir_node *p, const ir_node *const *ins) {
    const char *op = ir_ops[p->op].name;
    char s1[DB], s2[DB];
    tj_status st = check_geometry(op, p, 1);
    if (st || (st = need_float(op, ins[0], ins[1])))
        return st;
    const ir_node *a = ins[0], *b = ins[1];
    int64_t y[4];
    switch (p->op) {
    case IR_OP_CONV2D:
        if ((st = need_rank4(op, "input", a)) || (st = need_rank4(op, "filter", b)) ||
            (st = conv_out(op, p, a->dims, b->dims, y)))
            return st;
        memcpy(p->dims, y, sizeof y);
        break;
    case IR_OP_CONV2D_GRAD_INPUT: /* dy, w -> the node's dims (x) */
        if ((st = need_rank4(op, "gradient", a)) || (st = need_rank4(op, "filter", b)) ||
            (st = need_rank4(op, "input", p)) || (st = conv_out(op, p, p->dims, b->dims, y)))
            return st;
        if (!same_dims(y, a->dims, 4))
            return ir_errorf(TJ_ERR_SHAPE, "%s: the gradient %s does not match the output %s", op,
                             ir_fmt_dims(s1, DB, 4, a->dims), ir_fmt_dims(s2, DB, 4, y));
        break;
    default: /* CONV2D_GRAD_FILTER: x, dy -> the node's dims (w) */
        if ((st = need_rank4(op, "input", a)) || (st = need_rank4(op, "gradient", b)) ||
            (st = need_rank4(op, "filter", p)) || (st = conv_out(op, p, a->dims, p->dims, y)))
            return st;
        if (!same_dims(y, b->dims, 4))
            return ir_errorf(TJ_ERR_SHAPE, "%s: the gradient %s does not match the output %s", op,
                             ir_fmt_dims(s1, DB, 4, b->dims), ir_fmt_dims(s2, DB, 4, y));
        break;
    }
    p->rank = 4;
    p->dtype = a->dtype;
    return TJ_OK;
}

/* The pooled dims of x (rank 4) into y. */
static tj_status pool_out(const char *op, const ir_node *p, const int64_t *x, int64_t *y) {
    char sx[DB];
    y[0] = x[0];
    y[3] = x[3];
    for (int k = 0; k < 2; k++) {
        if (x[1 + k] < 0) {
            y[1 + k] = -1;
            continue;
        }
        int64_t d = pool_dilation(p, k), span = d * (p->a.i[2 + k] - 1) + 1;
        y[1 + k] =
            out_len(x[1 + k], p->a.i[2 + k], p->a.i[k], d, p->a.list[2 * k], p->a.list[2 * k + 1]);
        if (y[1 + k] < 0)
            return ir_errorf(TJ_ERR_SHAPE,
                             "%s: the window %lldx%lld%s is larger than the padded input %s on "
                             "axis %s",
                             op, (long long)p->a.i[2], (long long)p->a.i[3],
                             p->a.n_list == 6 ? " (dilated)" : "", ir_fmt_dims(sx, DB, 4, x),
                             k ? "W" : "H");
        if (p->a.list[2 * k] >= span || p->a.list[2 * k + 1] >= span)
            return ir_errorf(TJ_ERR_INVALID, "%s: pads must be smaller than the window", op);
    }
    return TJ_OK;
}

static tj_status pool(ir_node *p, const ir_node *const *ins) {
    const char *op = ir_ops[p->op].name;
    char s1[DB], s2[DB];
    tj_status st = check_geometry(op, p, 0);
    if (st)
        return st;
    const ir_node *x = ins[0];
    int64_t y[4];
    switch (p->op) {
    case IR_OP_MAX_POOL2D:
    case IR_OP_AVG_POOL2D:
        if ((st = need_float(op, x, NULL)) || (st = need_rank4(op, "input", x)) ||
            (st = pool_out(op, p, x->dims, y)))
            return st;
        memcpy(p->dims, y, sizeof y);
        p->rank = 4;
        p->dtype = x->dtype;
        return TJ_OK;
    case IR_OP_MAX_POOL2D_GRAD: /* x, dy -> x's dims */
        if ((st = need_float(op, x, ins[1])) || (st = need_rank4(op, "input", x)) ||
            (st = need_rank4(op, "gradient", ins[1])) || (st = pool_out(op, p, x->dims, y)))
            return st;
        if (!same_dims(y, ins[1]->dims, 4))
            return ir_errorf(TJ_ERR_SHAPE, "%s: the gradient %s does not match the output %s", op,
                             ir_fmt_dims(s1, DB, 4, ins[1]->dims), ir_fmt_dims(s2, DB, 4, y));
        memcpy(p->dims, x->dims, sizeof(int64_t) * 4);
        p->rank = 4;
        p->dtype = x->dtype;
        return TJ_OK;
    default: /* AVG_POOL2D_GRAD: dy -> the node's dims */
        if ((st = need_float(op, x, NULL)) || (st = need_rank4(op, "gradient", x)) ||
            (st = need_rank4(op, "input", p)) || (st = pool_out(op, p, p->dims, y)))
            return st;
        if (!same_dims(y, x->dims, 4))
            return ir_errorf(TJ_ERR_SHAPE, "%s: the gradient %s does not match the output %s", op,
                             ir_fmt_dims(s1, DB, 4, x->dims), ir_fmt_dims(s2, DB, 4, y));
        p->dtype = x->dtype;
        return TJ_OK;
    }
}

/* The rules in the shape table's signature (ir_shape_rules, ir/infer.c). */
tj_status ir_shape_conv(ir_node *p, const ir_node *const *ins, uint32_t n_in) {
    (void)n_in;
    return conv(p, ins);
}

tj_status ir_shape_pool(ir_node *p, const ir_node *const *ins, uint32_t n_in) {
    (void)n_in;
    return pool(p, ins);
}

tj_status ir_shape_one_hot(ir_node *p, const ir_node *const *ins, uint32_t n_in) {
    (void)n_in;
    char s1[DB];
    const ir_node *i = ins[0];
    if (!ir_dtype_is_index(i->dtype))
        return ir_errorf(TJ_ERR_DTYPE, "one_hot: indices must be int32 or int64, got %s",
                         ir_dtype_name(i->dtype));
    if (p->a.i[0] < 0)
        return ir_errorf(TJ_ERR_INVALID, "one_hot: depth %lld must be >= 0", (long long)p->a.i[0]);
    if (i->rank + 1 > IR_MAX_RANK)
        return ir_errorf(TJ_ERR_SHAPE, "one_hot: indices %s leave no room for the depth axis",
                         ir_fmt_dims(s1, DB, i->rank, i->dims));
    if (!ir_dtype_is_numeric(p->dtype))
        return ir_errorf(TJ_ERR_DTYPE, "one_hot: the result dtype must be numeric, got %s",
                         ir_dtype_name(p->dtype));
    memcpy(p->dims, i->dims, sizeof(int64_t) * i->rank);
    p->dims[i->rank] = p->a.i[0];
    p->rank = (uint8_t)(i->rank + 1);
    return TJ_OK;
}

tj_status ir_shape_sparse_xent(ir_node *p, const ir_node *const *ins, uint32_t n_in) {
    (void)n_in;
    char s1[DB], s2[DB];
    const ir_node *lg = ins[0], *lb = ins[1];
    if (!ir_dtype_is_float(lg->dtype))
        return ir_errorf(TJ_ERR_DTYPE, "sparse_softmax_xent: logits must be float, got %s",
                         ir_dtype_name(lg->dtype));
    if (!ir_dtype_is_index(lb->dtype))
        return ir_errorf(TJ_ERR_DTYPE, "sparse_softmax_xent: labels must be int32 or int64, got %s",
                         ir_dtype_name(lb->dtype));
    if (lg->rank < 1 || lb->rank != lg->rank - 1 || !same_dims(lg->dims, lb->dims, lb->rank))
        return ir_errorf(TJ_ERR_SHAPE,
                         "sparse_softmax_xent: labels %s must be the logits' %s without "
                         "their last (class) axis",
                         ir_fmt_dims(s1, DB, lb->rank, lb->dims),
                         ir_fmt_dims(s2, DB, lg->rank, lg->dims));
    memcpy(p->dims, lg->dims, sizeof(int64_t) * lb->rank);
    p->rank = lb->rank;
    p->dtype = lg->dtype;
    return TJ_OK;
}
