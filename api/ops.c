/* ops.c — the public op entry points. Each builds a prototype node (op + attributes) and hands
 * it to api_apply, which records or runs it. Argument checks that need no shapes (NULL lists,
 * counts) happen here; everything shape- and dtype-related happens in ir_infer. */
#include <stdlib.h>
#include <string.h>

#include "api/api.h"

static ir_node proto_of(int op) {
    ir_node p;
    memset(&p, 0, sizeof p);
    p.op = (uint16_t)op;
    return p;
}

static tj_tensor *apply1(int op, tj_tensor *x) {
    ir_node p = proto_of(op);
    return api_apply(&p, &x, 1);
}

static tj_tensor *apply2(int op, tj_tensor *a, tj_tensor *b) {
    ir_node p = proto_of(op);
    tj_tensor *in[2] = {a, b};
    return api_apply(&p, in, 2);
}

#define UNARY(fn, OP)                                                                              \
    tj_tensor *tj_##fn(tj_tensor *x) {                                                             \
        return apply1(IR_OP_##OP, x);                                                              \
    }
#define BINARY(fn, OP)                                                                             \
    tj_tensor *tj_##fn(tj_tensor *a, tj_tensor *b) {                                               \
        return apply2(IR_OP_##OP, a, b);                                                           \
    }

UNARY(neg, NEG)
UNARY(abs, ABS)
UNARY(sign, SIGN)
UNARY(exp, EXP)
UNARY(log, LOG)
UNARY(sqrt, SQRT)
UNARY(rsqrt, RSQRT)
UNARY(tanh, TANH)
UNARY(sigmoid, SIGMOID)
UNARY(relu, RELU)
UNARY(sin, SIN)
UNARY(cos, COS)
UNARY(atan, ATAN)
UNARY(asin, ASIN)
UNARY(acos, ACOS)
UNARY(erf, ERF)
UNARY(floor, FLOOR)
UNARY(ceil, CEIL)
UNARY(round, ROUND)
UNARY(logical_not, LOGICAL_NOT)
UNARY(isnan, ISNAN)
UNARY(isinf, ISINF)
BINARY(add, ADD)
BINARY(sub, SUB)
BINARY(mul, MUL)
BINARY(div, DIV)
BINARY(floordiv, FLOORDIV)
BINARY(mod, MOD)
BINARY(pow, POW)
BINARY(maximum, MAXIMUM)
BINARY(minimum, MINIMUM)
BINARY(equal, EQ)
BINARY(not_equal, NE)
BINARY(less, LT)
BINARY(less_equal, LE)
BINARY(greater, GT)
BINARY(greater_equal, GE)
BINARY(logical_and, LOGICAL_AND)
BINARY(left_shift, SHIFT_LEFT)
BINARY(right_shift, SHIFT_RIGHT)
BINARY(logical_or, LOGICAL_OR)
BINARY(matmul, MATMUL)

tj_tensor *tj_str_concat(tj_tensor *a, tj_tensor *b) {
    if (a && b && a->kind != RT_ERROR && b->kind != RT_ERROR &&
        (a->dtype != TJ_STRING || b->dtype != TJ_STRING))
        return rt_scoped(rt_errorf(TJ_ERR_DTYPE,
                                   "str_concat: expected string tensors, got %s and %s",
                                   ir_dtype_name(a->dtype), ir_dtype_name(b->dtype)));
    return apply2(IR_OP_ADD, a, b);
}

tj_tensor *tj_where(tj_tensor *cond, tj_tensor *a, tj_tensor *b) {
    ir_node p = proto_of(IR_OP_WHERE);
    tj_tensor *in[3] = {cond, a, b};
    return api_apply(&p, in, 3);
}

static tj_tensor *reduce(int op, tj_tensor *x, int n_axes, const int *axes, int keepdims) {
    const char *name = ir_ops[op].name;
    if (n_axes < 0 || n_axes > TJ_MAX_RANK || (n_axes > 0 && !axes))
        return rt_scoped(rt_errorf(TJ_ERR_INVALID, "%s: bad axes list (n_axes=%d)", name, n_axes));
    ir_node p = proto_of(op);
    p.a.n_list = (uint32_t)n_axes;
    for (int i = 0; i < n_axes; i++)
        p.a.list[i] = axes[i];
    p.a.i[0] = keepdims != 0;
    return api_apply(&p, &x, 1);
}

tj_tensor *tj_sum(tj_tensor *x, int n, const int *axes, int kd) {
    return reduce(IR_OP_SUM, x, n, axes, kd);
}
tj_tensor *tj_mean(tj_tensor *x, int n, const int *axes, int kd) {
    return reduce(IR_OP_MEAN, x, n, axes, kd);
}
tj_tensor *tj_max(tj_tensor *x, int n, const int *axes, int kd) {
    return reduce(IR_OP_MAX, x, n, axes, kd);
}
tj_tensor *tj_min(tj_tensor *x, int n, const int *axes, int kd) {
    return reduce(IR_OP_MIN, x, n, axes, kd);
}
tj_tensor *tj_prod(tj_tensor *x, int n, const int *axes, int kd) {
    return reduce(IR_OP_PROD, x, n, axes, kd);
}

static tj_tensor *with_axis(int op, tj_tensor *x, int axis) {
    ir_node p = proto_of(op);
    p.a.i[0] = axis;
    return api_apply(&p, &x, 1);
}

tj_tensor *tj_argmax(tj_tensor *x, int axis) {
    return with_axis(IR_OP_ARGMAX, x, axis);
}
tj_tensor *tj_argmin(tj_tensor *x, int axis) {
    return with_axis(IR_OP_ARGMIN, x, axis);
}
tj_tensor *tj_softmax(tj_tensor *x, int axis) {
    return with_axis(IR_OP_SOFTMAX, x, axis);
}
tj_tensor *tj_log_softmax(tj_tensor *x, int axis) {
    return with_axis(IR_OP_LOG_SOFTMAX, x, axis);
}
tj_tensor *tj_expand_dims(tj_tensor *x, int axis) {
    return with_axis(IR_OP_EXPAND_DIMS, x, axis);
}

static int bad_dims(const char *op, int rank, const int64_t *dims, tj_tensor **err) {
    if (rank < 0 || rank > TJ_MAX_RANK) {
        *err = rt_scoped(
            rt_errorf(TJ_ERR_SHAPE, "%s: rank %d out of range [0, %d]", op, rank, TJ_MAX_RANK));
        return 1;
    }
    if (rank > 0 && !dims) {
        *err = rt_scoped(rt_errorf(TJ_ERR_INVALID, "%s: dims is NULL for rank %d", op, rank));
        return 1;
    }
    return 0;
}

static tj_tensor *with_dims(int op, tj_tensor *x, int rank, const int64_t *dims) {
    tj_tensor *err;
    if (bad_dims(ir_ops[op].name, rank, dims, &err))
        return err;
    ir_node p = proto_of(op);
    p.rank = (uint8_t)rank;
    for (int i = 0; i < rank; i++)
        p.dims[i] = dims[i];
    return api_apply(&p, &x, 1);
}

tj_tensor *tj_reshape(tj_tensor *x, int rank, const int64_t *dims) {
    return with_dims(IR_OP_RESHAPE, x, rank, dims);
}
tj_tensor *tj_broadcast_to(tj_tensor *x, int rank, const int64_t *dims) {
    return with_dims(IR_OP_BROADCAST_TO, x, rank, dims);
}

tj_tensor *tj_transpose(tj_tensor *x, const int *perm) {
    ir_node p = proto_of(IR_OP_TRANSPOSE);
    if (perm && x && x->kind != RT_ERROR && x->kind != RT_TUPLE) {
        p.a.n_list = x->rank;
        for (int i = 0; i < x->rank; i++)
            p.a.list[i] = perm[i];
    }
    return api_apply(&p, &x, 1);
}

tj_tensor *tj_squeeze(tj_tensor *x, int n_axes, const int *axes) {
    if (n_axes < 0 || n_axes > TJ_MAX_RANK || (n_axes > 0 && !axes))
        return rt_scoped(rt_errorf(TJ_ERR_INVALID, "squeeze: bad axes list (n_axes=%d)", n_axes));
    ir_node p = proto_of(IR_OP_SQUEEZE);
    p.a.n_list = (uint32_t)n_axes;
    for (int i = 0; i < n_axes; i++)
        p.a.list[i] = axes[i];
    return api_apply(&p, &x, 1);
}

tj_tensor *tj_concat(int n, tj_tensor *const *xs, int axis) {
    if (n <= 0)
        return rt_scoped(rt_errorf(TJ_ERR_INVALID, "concat: needs at least one tensor (n=%d)", n));
    if (!xs)
        return rt_scoped(rt_errorf(TJ_ERR_INVALID, "concat: the tensor list is NULL (n=%d)", n));
    ir_node p = proto_of(IR_OP_CONCAT);
    p.a.i[0] = axis;
    return api_apply(&p, xs, (uint32_t)n);
}

tj_tensor *tj_slice(tj_tensor *x, const int64_t *begin, const int64_t *end, const int64_t *step) {
    ir_node p = proto_of(IR_OP_SLICE);
    if (x && x->kind != RT_ERROR && x->kind != RT_TUPLE) {
        int r = x->rank;
        p.a.n_list = 3u * (uint32_t)r;
        for (int i = 0; i < r; i++) {
            int64_t st = step ? step[i] : 1;
            p.a.list[i] = begin ? begin[i] : (st > 0 ? 0 : INT64_MAX);
            p.a.list[r + i] = end ? end[i] : (st > 0 ? INT64_MAX : INT64_MIN);
            p.a.list[2 * r + i] = st;
        }
    }
    return api_apply(&p, &x, 1);
}

tj_tensor *tj_gather(tj_tensor *params, tj_tensor *indices, int axis) {
    ir_node p = proto_of(IR_OP_GATHER);
    p.a.i[0] = axis;
    tj_tensor *in[2] = {params, indices};
    return api_apply(&p, in, 2);
}

tj_tensor *tj_scatter_add(tj_tensor *x, tj_tensor *indices, tj_tensor *updates, int axis) {
    ir_node p = proto_of(IR_OP_SCATTER_ADD);
    p.a.i[0] = axis;
    tj_tensor *in[3] = {x, indices, updates};
    return api_apply(&p, in, 3);
}

tj_tensor *tj_cast(tj_tensor *x, tj_dtype dt) {
    if ((int)dt < 0 || dt >= TJ_N_DTYPES)
        return rt_scoped(rt_errorf(TJ_ERR_DTYPE, "cast: bad dtype %d", dt));
    ir_node p = proto_of(IR_OP_CAST);
    p.dtype = (uint8_t)dt;
    return api_apply(&p, &x, 1);
}

/* ---- constructors: a source node (eye, range, random) or a broadcast scalar ------------------ */
static tj_tensor *source(ir_node *p, int dt, int rank, const int64_t *dims) {
    tj_tensor *err;
    if (bad_dims(ir_ops[p->op].name, rank, dims, &err))
        return err;
    if ((int)dt < 0 || dt >= TJ_N_DTYPES)
        return rt_scoped(rt_errorf(TJ_ERR_DTYPE, "%s: bad dtype %d", ir_ops[p->op].name, dt));
    p->dtype = (uint8_t)dt;
    p->rank = (uint8_t)rank;
    for (int i = 0; i < rank; i++)
        p->dims[i] = dims[i];
    return api_apply(p, NULL, 0);
}

/* fill, zeros and ones check their own arguments, so their errors name them, not broadcast_to */
static tj_tensor *fill(const char *op, int rank, const int64_t *dims, tj_tensor *value) {
    if (!value)
        return rt_scoped(rt_errorf(TJ_ERR_INVALID, "%s: value is NULL", op));
    if (value->kind == RT_ERROR)
        return rt_scoped(rt_retain(value));
    if (value->kind == RT_TUPLE)
        return rt_scoped(rt_errorf(TJ_ERR_INVALID, "%s: value is a tuple, not a tensor", op));
    if (value->rank != 0)
        return rt_scoped(
            rt_errorf(TJ_ERR_SHAPE, "%s: value must be 0-d, got rank %d", op, value->rank));
    if (ir_check_shape(op, rank, dims, false))
        return rt_scoped(rt_error_from_status(0));
    return tj_broadcast_to(value, rank, dims);
}

tj_tensor *tj_fill(int rank, const int64_t *dims, tj_tensor *value) {
    return fill("fill", rank, dims, value);
}

static tj_tensor *filled(tj_dtype dt, int rank, const int64_t *dims, double v) {
    const char *op = v == 0 ? "zeros" : "ones";
    if ((int)dt < 0 || dt >= TJ_N_DTYPES)
        return rt_scoped(rt_errorf(TJ_ERR_DTYPE, "%s: bad dtype %d", op, (int)dt));
    tj_scope_begin();
    tj_tensor *s = NULL;
    switch (dt) {
    case TJ_F32:
        s = tj_scalar_f32((float)v);
        break;
    case TJ_F64:
        s = tj_scalar_f64(v);
        break;
    case TJ_I32:
        s = tj_scalar_i32((int32_t)v);
        break;
    case TJ_I64:
        s = tj_scalar_i64((int64_t)v);
        break;
    case TJ_BOOL:
        s = tj_scalar_bool(v != 0);
        break;
    default:
        s = ir_dtype_is_int(dt) || ir_dtype_is_half(dt)
                ? tj_cast(tj_scalar_i64((int64_t)v), dt)
                : tj_error_new(TJ_ERR_DTYPE, "%s: unsupported dtype %s", op, ir_dtype_name(dt));
    }
    tj_tensor *r = tj_keep(fill(op, rank, dims, s));
    tj_scope_end();
    return r; /* tj_keep already handed it to the enclosing scope or the caller */
}

tj_tensor *tj_zeros(tj_dtype dt, int rank, const int64_t *dims) {
    return filled(dt, rank, dims, 0);
}
tj_tensor *tj_ones(tj_dtype dt, int rank, const int64_t *dims) {
    return filled(dt, rank, dims, 1);
}

tj_tensor *tj_eye(tj_dtype dt, int64_t n, int64_t m) {
    ir_node p = proto_of(IR_OP_EYE);
    int64_t d[2] = {n, m};
    return source(&p, dt, 2, d);
}

tj_tensor *tj_range(tj_dtype dt, double start, double limit, double delta) {
    ir_node p = proto_of(IR_OP_RANGE);
    p.a.f[0] = start;
    p.a.f[1] = limit;
    p.a.f[2] = delta;
    int64_t d[1] = {-1}; /* ir_infer computes the length */
    return source(&p, dt, 1, d);
}

tj_tensor *tj_random_uniform(tj_dtype dt, int rank, const int64_t *dims, double lo, double hi,
                             uint64_t seed) {
    ir_node p = proto_of(IR_OP_RANDOM_UNIFORM);
    p.a.i[0] = (int64_t)seed;
    p.a.f[0] = lo;
    p.a.f[1] = hi;
    return source(&p, dt, rank, dims);
}

tj_tensor *tj_random_normal(tj_dtype dt, int rank, const int64_t *dims, double mean, double stddev,
                            uint64_t seed) {
    ir_node p = proto_of(IR_OP_RANDOM_NORMAL);
    p.a.i[0] = (int64_t)seed;
    p.a.f[0] = mean;
    p.a.f[1] = stddev;
    return source(&p, dt, rank, dims);
}

/* ---- neural networks ------------------------------------------------------------------------- */
static int pair(const int *v, int k) {
    return v ? v[k] : 1;
}

/* Pads for TensorFlow's SAME/VALID along one axis of length `in` (known), a window spanning
 * `span` taps, stride `s`: SAME gives ceil(in / s) outputs, the odd pad going after. */
static void tf_pads(tj_padding pad, int64_t in, int64_t span, int64_t s, int64_t *p0, int64_t *p1) {
    *p0 = *p1 = 0;
    if (pad != TJ_PAD_SAME || in < 0)
        return;
    int64_t out = (in + s - 1) / s, total = (out - 1) * s + span - in;
    if (total < 0)
        total = 0;
    *p0 = total / 2;
    *p1 = total - *p0;
}

/* x's dims when it is a rank-4 tensor (symbolic or concrete), else NULL. */
static const int64_t *dims4(const tj_tensor *x) {
    return x && x->kind != RT_ERROR && x->kind != RT_TUPLE && x->rank == 4 ? x->dims : NULL;
}

/* Fills p's strides (i[0..1]), i[2..3] and pads from the padded tensor's dims (NHWC, NULL when
 * unknown); spans are the windows'. */
static tj_tensor *window_attrs(const char *op, ir_node *p, const int64_t *x, const int *strides,
                               tj_padding padding, const int64_t *span, const int *i23) {
    if (padding != TJ_PAD_VALID && padding != TJ_PAD_SAME)
        return rt_scoped(rt_errorf(TJ_ERR_INVALID,
                                   "%s: unknown padding %d (TJ_PAD_VALID or TJ_PAD_SAME)", op,
                                   (int)padding));
    for (int k = 0; k < 2; k++) {
        p->a.i[k] = pair(strides, k);
        p->a.i[2 + k] = i23[k];
        if (p->a.i[k] < 1 || i23[k] < 1)
            return rt_scoped(rt_errorf(
                TJ_ERR_INVALID, "%s: strides, dilations and windows must be >= 1, got %lld and %d",
                op, (long long)p->a.i[k], i23[k]));
    }
    p->a.n_list = 4;
    int64_t h = x ? x[1] : -1, w = x ? x[2] : -1;
    if (padding == TJ_PAD_SAME && (h < 0 || w < 0) && x)
        return rt_scoped(
            rt_errorf(TJ_ERR_SHAPE, "%s: SAME padding needs the input's height and width", op));
    tf_pads(padding, h, span[0], p->a.i[0], &p->a.list[0], &p->a.list[1]);
    tf_pads(padding, w, span[1], p->a.i[1], &p->a.list[2], &p->a.list[3]);
    return NULL;
}

tj_tensor *tj_conv2d(tj_tensor *x, tj_tensor *filter, const int *strides, tj_padding padding,
                     const int *dilations) {
    ir_node p = proto_of(IR_OP_CONV2D);
    int dil[2] = {pair(dilations, 0), pair(dilations, 1)};
    int64_t span[2] = {1, 1};
    if (filter && filter->kind != RT_ERROR && filter->kind != RT_TUPLE && filter->rank == 4)
        for (int k = 0; k < 2; k++)
            span[k] = (int64_t)dil[k] * (filter->dims[k] - 1) + 1;
    tj_tensor *err = window_attrs("conv2d", &p, dims4(x), strides, padding, span, dil);
    if (err)
        return err;
    tj_tensor *in[2] = {x, filter};
    return api_apply(&p, in, 2);
}

tj_tensor *tj_conv2d_pads(tj_tensor *x, tj_tensor *filter, const int *strides, const int64_t *pads,
                          const int *dilations) {
    if (!pads)
        return rt_scoped(rt_errorf(TJ_ERR_INVALID, "conv2d_pads: pads is NULL"));
    for (int k = 0; k < 4; k++)
        if (pads[k] < 0 || pads[k] > INT32_MAX)
            return rt_scoped(rt_errorf(TJ_ERR_INVALID,
                                       "conv2d_pads: pads[%d] = %lld is not in [0, 2^31)", k,
                                       (long long)pads[k]));
    ir_node p = proto_of(IR_OP_CONV2D);
    int dil[2] = {pair(dilations, 0), pair(dilations, 1)};
    int64_t span[2] = {1, 1};
    tj_tensor *err = window_attrs("conv2d_pads", &p, dims4(x), strides, TJ_PAD_VALID, span, dil);
    if (err)
        return err;
    memcpy(p.a.list, pads, 4 * sizeof *pads); /* the VALID pads (zeros) replaced */
    tj_tensor *in[2] = {x, filter};
    return api_apply(&p, in, 2);
}

tj_tensor *tj_conv2d_transpose(tj_tensor *x, tj_tensor *filter, const int64_t *output_dims,
                               const int *strides, tj_padding padding, const int *dilations) {
    ir_node p = proto_of(IR_OP_CONV2D_GRAD_INPUT);
    if (!output_dims)
        return rt_scoped(rt_errorf(TJ_ERR_INVALID, "conv2d_transpose: output_dims is NULL"));
    for (int k = 0; k < 4; k++)
        if (output_dims[k] < 0 || output_dims[k] > ((int64_t)1 << 40))
            return rt_scoped(rt_errorf(TJ_ERR_SHAPE,
                                       "conv2d_transpose: output_dims[%d] = %lld is not a size", k,
                                       (long long)output_dims[k]));
    p.rank = 4;
    memcpy(p.dims, output_dims, 4 * sizeof *output_dims);
    int dil[2] = {pair(dilations, 0), pair(dilations, 1)};
    int64_t span[2] = {1, 1};
    if (filter && filter->kind != RT_ERROR && filter->kind != RT_TUPLE && filter->rank == 4)
        for (int k = 0; k < 2; k++)
            span[k] = (int64_t)dil[k] * (filter->dims[k] - 1) + 1;
    /* SAME/VALID pads are those of the forward convolution, whose input is the result */
    tj_tensor *err = window_attrs("conv2d_transpose", &p, output_dims, strides, padding, span, dil);
    if (err)
        return err;
    const int64_t *xd = dims4(x), *fd = dims4(filter);
    if (xd && fd) { /* the checks inference makes, worded for this op */
        char a[128], b[128], c[128];
        bool ok = (xd[3] < 0 || fd[3] < 0 || xd[3] == fd[3]) &&
                  (fd[2] < 0 || fd[2] == output_dims[3]) && (xd[0] < 0 || xd[0] == output_dims[0]);
        for (int k = 0; k < 2 && ok; k++) {
            int64_t padded = output_dims[1 + k] + p.a.list[2 * k] + p.a.list[2 * k + 1];
            ok = xd[1 + k] < 0 || fd[k] < 0 ||
                 (padded >= span[k] && (padded - span[k]) / p.a.i[k] + 1 == xd[1 + k]);
        }
        if (!ok)
            return rt_scoped(rt_errorf(
                TJ_ERR_SHAPE,
                "conv2d_transpose: input %s and filter %s [KH,KW,C_out,C_in] cannot make output "
                "%s: the filter's C_in must be the input's channels, its C_out the output's, and "
                "conv2d of the output must give the input's height and width",
                ir_fmt_dims(a, sizeof a, 4, xd), ir_fmt_dims(b, sizeof b, 4, fd),
                ir_fmt_dims(c, sizeof c, 4, output_dims)));
    }
    tj_tensor *in[2] = {x, filter};
    return api_apply(&p, in, 2);
}

static tj_tensor *pool(int op, tj_tensor *x, const int *ksize, const int *strides,
                       tj_padding padding) {
    ir_node p = proto_of(op);
    if (!ksize)
        return rt_scoped(rt_errorf(TJ_ERR_INVALID, "%s: ksize is NULL", ir_ops[op].name));
    int64_t span[2] = {ksize[0], ksize[1]};
    tj_tensor *err = window_attrs(ir_ops[op].name, &p, dims4(x), strides, padding, span, ksize);
    return err ? err : api_apply(&p, &x, 1);
}

tj_tensor *tj_max_pool2d(tj_tensor *x, const int *ksize, const int *strides, tj_padding padding) {
    return pool(IR_OP_MAX_POOL2D, x, ksize, strides, padding);
}

tj_tensor *tj_max_pool2d_dilated(tj_tensor *x, const int *ksize, const int *strides,
                                 tj_padding padding, const int *dilations) {
    if (!ksize)
        return rt_scoped(rt_errorf(TJ_ERR_INVALID, "max_pool2d: ksize is NULL"));
    int d[2] = {pair(dilations, 0), pair(dilations, 1)};
    if (d[0] == 1 && d[1] == 1)
        return pool(IR_OP_MAX_POOL2D, x, ksize, strides, padding);
    if (d[0] < 1 || d[1] < 1)
        return rt_scoped(rt_errorf(TJ_ERR_INVALID, "max_pool2d: dilations must be >= 1, got %d, %d",
                                   d[0], d[1]));
    ir_node p = proto_of(IR_OP_MAX_POOL2D);
    int64_t span[2] = {(int64_t)d[0] * (ksize[0] - 1) + 1, (int64_t)d[1] * (ksize[1] - 1) + 1};
    tj_tensor *err = window_attrs("max_pool2d", &p, dims4(x), strides, padding, span, ksize);
    if (err)
        return err;
    p.a.n_list = 6; /* the pads, then the window's dilations */
    p.a.list[4] = d[0];
    p.a.list[5] = d[1];
    return api_apply(&p, &x, 1);
}
tj_tensor *tj_max_pool2d_pads(tj_tensor *x, const int *ksize, const int *strides,
                              const int64_t *pads) {
    if (!ksize || !pads)
        return rt_scoped(
            rt_errorf(TJ_ERR_INVALID, "max_pool2d_pads: %s is NULL", ksize ? "pads" : "ksize"));
    for (int k = 0; k < 4; k++)
        if (pads[k] < 0 || pads[k] >= ksize[k / 2])
            return rt_scoped(rt_errorf(TJ_ERR_INVALID,
                                       "max_pool2d_pads: pads[%d] = %lld is not in [0, %d) (the "
                                       "window's %s: a window must hold an input element)",
                                       k, (long long)pads[k], ksize[k / 2],
                                       k < 2 ? "height" : "width"));
    ir_node p = proto_of(IR_OP_MAX_POOL2D);
    int64_t span[2] = {ksize[0], ksize[1]};
    tj_tensor *err =
        window_attrs("max_pool2d_pads", &p, dims4(x), strides, TJ_PAD_VALID, span, ksize);
    if (err)
        return err;
    memcpy(p.a.list, pads, 4 * sizeof *pads); /* the VALID pads (zeros) replaced */
    return api_apply(&p, &x, 1);
}

tj_tensor *tj_avg_pool2d(tj_tensor *x, const int *ksize, const int *strides, tj_padding padding) {
    return pool(IR_OP_AVG_POOL2D, x, ksize, strides, padding);
}

tj_tensor *tj_bias_add(tj_tensor *x, tj_tensor *bias) {
    if (x && bias && x->kind != RT_ERROR && bias->kind != RT_ERROR && x->kind != RT_TUPLE &&
        bias->kind != RT_TUPLE &&
        (bias->rank != 1 || x->rank < 1 ||
         (x->dims[x->rank - 1] >= 0 && bias->dims[0] >= 0 &&
          x->dims[x->rank - 1] != bias->dims[0]))) {
        char a[128], b[128];
        return rt_scoped(rt_errorf(TJ_ERR_SHAPE,
                                   "bias_add: bias %s must be rank 1 and match the last axis of %s",
                                   ir_fmt_dims(a, sizeof a, bias->rank, bias->dims),
                                   ir_fmt_dims(b, sizeof b, x->rank, x->dims)));
    }
    return tj_add(x, bias);
}

tj_tensor *tj_one_hot(tj_tensor *indices, int64_t depth, double on, double off, tj_dtype dt) {
    if ((int)dt < 0 || dt >= TJ_N_DTYPES)
        return rt_scoped(rt_errorf(TJ_ERR_DTYPE, "one_hot: bad dtype %d", (int)dt));
    ir_node p = proto_of(IR_OP_ONE_HOT);
    p.dtype = (uint8_t)dt;
    p.a.i[0] = depth;
    p.a.f[0] = on;
    p.a.f[1] = off;
    return api_apply(&p, &indices, 1);
}

tj_tensor *tj_sparse_softmax_cross_entropy(tj_tensor *labels, tj_tensor *logits) {
    ir_node p = proto_of(IR_OP_SPARSE_XENT);
    tj_tensor *in[2] = {logits, labels};
    return api_apply(&p, in, 2);
}

tj_tensor *tj_sparse_categorical_crossentropy(tj_tensor *labels, tj_tensor *output,
                                              int from_logits) {
    tj_scope_begin();
    tj_tensor *logits = output;
    if (!from_logits) { /* Keras: clip the probabilities, their log is the logits */
        double eps = 1e-7;
        logits = tj_log(tj_minimum(tj_maximum(output, tj_scalar_f64(eps)), tj_scalar_f64(1 - eps)));
    }
    tj_tensor *r = tj_keep(tj_mean(tj_sparse_softmax_cross_entropy(labels, logits), 0, NULL, 0));
    tj_scope_end();
    return r;
}
