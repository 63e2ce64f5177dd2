/* ops.c — ONNX's elementwise ops, activations, softmax, Gemm and reductions as tracejit ops, one
 * converter each, for the default domain up to opset 17 (ops_shape.c: shape ops; ops_nn.c:
 * convolution, pooling, normalization, losses).
 * Compositions (Gemm, the activation family, the reduction family, Flatten) are built from
 * tracejit's primitives; what depends on values (Reshape's shape, Slice's starts, Unsqueeze's
 * axes from opset 13) reads them when they are known at trace time and refuses otherwise.
 * Attributes that became inputs are read from where the node's opset puts them. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ---- elementwise ------------------------------------------------------------------------------
 */
#define UNARY(cname, expr)                                                                         \
    CONV(cname) {                                                                                  \
        tj_tensor *x = in[0];                                                                      \
        (void)x;                                                                                   \
        return one(out, expr);                                                                     \
    }
UNARY(c_abs, tj_abs(x))
UNARY(c_neg, tj_neg(x))
UNARY(c_exp, tj_exp(x))
UNARY(c_log, tj_log(x))
UNARY(c_sqrt, tj_sqrt(x))
UNARY(c_relu, tj_relu(x))
UNARY(c_sigmoid, tj_sigmoid(x))
UNARY(c_tanh, tj_tanh(x))
UNARY(c_sin, tj_sin(x))
UNARY(c_cos, tj_cos(x))
UNARY(c_tan, tj_div(tj_sin(x), tj_cos(x)))
UNARY(c_atan, tj_atan(x))
UNARY(c_asin, tj_asin(x))
UNARY(c_acos, tj_acos(x))
UNARY(c_erf, tj_erf(x))
UNARY(c_floor, tj_floor(x))
UNARY(c_ceil, tj_ceil(x))
UNARY(c_round, tj_round(x))
UNARY(c_sign, tj_sign(x))
UNARY(c_not, tj_logical_not(x))
UNARY(c_isnan, tj_isnan(x))
UNARY(c_identity, tj_reshape(x, tj_tensor_rank(x), tj_tensor_dims(x))) /* any dtype; -0 stays -0 */
UNARY(c_reciprocal, tj_div(like(x, 1), x))
UNARY(c_softplus, tj_log(tj_add(tj_exp(x), like(x, 1))))
UNARY(c_softsign, tj_div(x, tj_add(tj_abs(x), like(x, 1))))
UNARY(c_sinh, tj_div(tj_sub(tj_exp(x), tj_exp(tj_neg(x))), like(x, 2)))
UNARY(c_cosh, tj_div(tj_add(tj_exp(x), tj_exp(tj_neg(x))), like(x, 2)))

CONV(c_isinf) {
    tj_tensor *x = in[0], *r = tj_isinf(x);
    int64_t pos = ox_attr_i(n, "detect_positive", 1), neg = ox_attr_i(n, "detect_negative", 1);
    if (!pos)
        r = tj_logical_and(r, tj_less(x, like(x, 0)));
    if (!neg)
        r = tj_logical_and(r, tj_greater(x, like(x, 0)));
    return one(out, r);
}

#define BINARY(cname, expr)                                                                        \
    CONV(cname) {                                                                                  \
        tj_tensor *a = in[0], *b = in[1];                                                          \
        return one(out, expr);                                                                     \
    }
BINARY(c_add, tj_add(a, b))
BINARY(c_sub, tj_sub(a, b))
BINARY(c_mul, tj_mul(a, b))
BINARY(c_div, tj_div(a, b))
BINARY(c_equal, tj_equal(a, b))
BINARY(c_less, tj_less(a, b))
BINARY(c_greater, tj_greater(a, b))
BINARY(c_less_equal, tj_less_equal(a, b))
BINARY(c_greater_equal, tj_greater_equal(a, b))
BINARY(c_and, tj_logical_and(a, b))
BINARY(c_or, tj_logical_or(a, b))
BINARY(c_xor, tj_not_equal(a, b))
BINARY(c_matmul, tj_matmul(a, b))

CONV(c_pow) { /* the exponent may have another dtype: computed in the base's */
    tj_tensor *e = tj_tensor_dtype(in[1]) == tj_tensor_dtype(in[0])
                       ? in[1]
                       : tj_cast(in[1], tj_tensor_dtype(in[0]));
    return one(out, tj_pow(in[0], e));
}

CONV(c_mod) {
    if (ox_attr_i(n, "fmod", 0)) { /* C's fmod: the sign of the dividend */
        tj_tensor *a = in[0], *b = in[1];
        tj_tensor *q = tj_div(a, b);
        if (tj_tensor_dtype(a) == TJ_F32 || tj_tensor_dtype(a) == TJ_F64)
            q = tj_where(tj_less(q, like(q, 0)), tj_ceil(q), tj_floor(q));
        return one(out, tj_sub(a, tj_mul(q, b)));
    }
    return one(out, tj_mod(in[0], in[1]));
}

CONV(c_bitshift) { /* direction LEFT or RIGHT (required; ONNX's types are unsigned) */
    char dir[8];
    const char *d = ox_attr_s(n, "direction", "", dir, sizeof dir);
    if (strcmp(d, "LEFT") && strcmp(d, "RIGHT"))
        return ox_fail(n, TJ_ERR_INVALID, "direction is '%s', not LEFT or RIGHT", d);
    return one(out, d[0] == 'L' ? tj_left_shift(in[0], in[1]) : tj_right_shift(in[0], in[1]));
}

CONV(c_where) {
    return one(out, tj_where(in[0], in[1], in[2]));
}

/* Max, Min, Sum, Mean of any number of inputs. */
static tj_status variadic(int n_in, tj_tensor *const *in, tj_tensor **out,
                          tj_tensor *(*f)(tj_tensor *, tj_tensor *), int mean) {
    tj_tensor *r = in[0];
    for (int k = 1; k < n_in; k++)
        r = f(r, in[k]);
    if (n_in == 1)
        r = tj_add(r, like(r, 0));
    return one(out, mean ? tj_div(r, like(r, n_in)) : r);
}
CONV(c_max) {
    return variadic(n_in, in, out, tj_maximum, 0);
}
CONV(c_min) {
    return variadic(n_in, in, out, tj_minimum, 0);
}
CONV(c_sum) {
    return variadic(n_in, in, out, tj_add, 0);
}
CONV(c_mean) {
    return variadic(n_in, in, out, tj_add, 1);
}

/* ---- activations ------------------------------------------------------------------------------
 */
CONV(c_leaky_relu) {
    tj_tensor *x = in[0];
    float alpha = ox_attr_f(n, "alpha", 0.01f);
    return one(out, tj_where(tj_less(x, like(x, 0)), tj_mul(x, like(x, alpha)), x));
}
CONV(c_prelu) {
    tj_tensor *x = in[0], *slope = in[1];
    int rank = tj_tensor_rank(x);
    /* a slope per channel (axis 1) of C values, as PyTorch exports it */
    if (tj_tensor_rank(slope) == 1 && rank > 2 &&
        tj_tensor_dims(slope)[0] == tj_tensor_dims(x)[1] &&
        tj_tensor_dims(slope)[0] != tj_tensor_dims(x)[rank - 1]) {
        int64_t d[TJ_MAX_RANK];
        for (int k = 0; k < rank - 1; k++)
            d[k] = k == 0 ? tj_tensor_dims(slope)[0] : 1;
        slope = tj_reshape(slope, rank - 1, d);
    }
    return one(out, tj_where(tj_less(x, like(x, 0)), tj_mul(x, slope), x));
}
CONV(c_thresholded_relu) {
    tj_tensor *x = in[0];
    float alpha = ox_attr_f(n, "alpha", 1.0f);
    return one(out, tj_where(tj_greater(x, like(x, alpha)), x, like(x, 0)));
}
CONV(c_elu) {
    tj_tensor *x = in[0];
    float alpha = ox_attr_f(n, "alpha", 1.0f);
    return one(out, tj_where(tj_less(x, like(x, 0)),
                             tj_mul(like(x, alpha), tj_sub(tj_exp(x), like(x, 1))), x));
}
/* Celu: max(0, x) + min(0, alpha * (exp(x / alpha) - 1)). */
CONV(c_celu) {
    tj_tensor *x = in[0];
    float alpha = ox_attr_f(n, "alpha", 1.0f);
    if (!(alpha != 0))
        return ox_fail(n, TJ_ERR_INVALID, "alpha must not be 0");
    tj_tensor *neg = tj_mul(like(x, alpha), tj_sub(tj_exp(tj_div(x, like(x, alpha))), like(x, 1)));
    return one(out, tj_add(tj_maximum(x, like(x, 0)), tj_minimum(neg, like(x, 0))));
}
CONV(c_selu) {
    tj_tensor *x = in[0];
    float alpha = ox_attr_f(n, "alpha", 1.67326319217681884765625f);
    float gamma = ox_attr_f(n, "gamma", 1.05070102214813232421875f);
    tj_tensor *neg = tj_mul(like(x, alpha), tj_sub(tj_exp(x), like(x, 1)));
    return one(out, tj_mul(like(x, gamma), tj_where(tj_less_equal(x, like(x, 0)), neg, x)));
}
CONV(c_hard_sigmoid) {
    tj_tensor *x = in[0];
    float alpha = ox_attr_f(n, "alpha", 0.2f), beta = ox_attr_f(n, "beta", 0.5f);
    tj_tensor *y = tj_add(tj_mul(x, like(x, alpha)), like(x, beta));
    return one(out, tj_maximum(tj_minimum(y, like(x, 1)), like(x, 0)));
}
CONV(c_hard_swish) {
    tj_tensor *x = in[0];
    tj_tensor *y = tj_add(tj_mul(x, like(x, 1.0 / 6)), like(x, 0.5));
    return one(out, tj_mul(x, tj_maximum(tj_minimum(y, like(x, 1)), like(x, 0))));
}
CONV(c_clip) {
    tj_tensor *x = in[0], *lo = NULL, *hi = NULL;
    if (n->opset < 11) {
        lo = like(x, ox_attr_f(n, "min", -INFINITY));
        hi = like(x, ox_attr_f(n, "max", INFINITY));
    } else {
        lo = n_in > 1 ? in[1] : NULL;
        hi = n_in > 2 ? in[2] : NULL;
    }
    if (lo)
        x = tj_maximum(x, lo);
    if (hi)
        x = tj_minimum(x, hi);
    return one(out, lo || hi ? x : tj_add(x, like(x, 0)));
}

/* ---- softmax: before opset 13 the input is seen as 2-D [prod(:axis), prod(axis:)] ----------- */
static tj_status softmax_like(const ox_node *n, tj_tensor *x, tj_tensor **out,
                              tj_tensor *(*f)(tj_tensor *, int)) {
    int rank = tj_tensor_rank(x);
    int axis = axis_of(ox_attr_i(n, "axis", n->opset < 13 ? 1 : -1), rank > 0 ? rank : 1);
    if (axis < 0)
        return ox_fail(n, TJ_ERR_SHAPE, "axis %lld is out of range for rank %d",
                       (long long)ox_attr_i(n, "axis", 1), rank);
    if (n->opset >= 13)
        return one(out, f(x, axis));
    int64_t flat[2] = {1, 1};
    for (int d = 0; d < rank; d++)
        flat[d < axis ? 0 : 1] *= tj_tensor_dims(x)[d];
    return one(out, tj_reshape(f(tj_reshape(x, 2, flat), 1), rank, tj_tensor_dims(x)));
}
CONV(c_softmax) {
    return softmax_like(n, in[0], out, tj_softmax);
}
CONV(c_log_softmax) {
    return softmax_like(n, in[0], out, tj_log_softmax);
}

/* ---- Gemm: alpha * op(A) op(B) + beta * C ------------------------------------------------------
 */
CONV(c_gemm) {
    tj_tensor *a = in[0], *b = in[1];
    if (ox_attr_i(n, "transA", 0))
        a = tj_transpose(a, NULL);
    if (ox_attr_i(n, "transB", 0) && !ox_prelaid(n)) /* else laid out when the model was read */
        b = tj_transpose(b, NULL);
    float alpha = ox_attr_f(n, "alpha", 1.0f), beta = ox_attr_f(n, "beta", 1.0f);
    tj_tensor *y = tj_matmul(a, b);
    if (alpha != 1.0f)
        y = tj_mul(y, like(y, alpha));
    if (n_in > 2 && in[2])
        y = tj_add(y, beta != 1.0f ? tj_mul(in[2], like(in[2], beta)) : in[2]);
    return one(out, y);
}

/* ---- reductions -------------------------------------------------------------------------------
 */
/* The axes of a reduction: the attribute, or (ReduceSum from 13) the optional second input. */
static int red_axes(const ox_node *n, int n_in, tj_tensor *const *in, int rank, int *axes,
                    int *noop) {
    int64_t *v = NULL, cnt;
    const int64_t *av;
    *noop = 0;
    if (!strcmp(n->p->op_type, "ReduceSum") && n->opset >= 13) {
        if (n_in < 2 || !in[1] || tj_tensor_numel(in[1]) == 0) {
            *noop = ox_attr_i(n, "noop_with_empty_axes", 0) != 0;
            return 0;
        }
        if ((cnt = ox_host_ints(n, in[1], "axes", &v)) < 0)
            return -1;
        av = v;
    } else {
        cnt = (int64_t)ox_attr_ints(n, "axes", &av);
    }
    if (cnt > TJ_MAX_RANK) {
        free(v);
        return ox_fail(n, TJ_ERR_SHAPE, "%lld axes", (long long)cnt), -1;
    }
    for (int64_t k = 0; k < cnt; k++)
        if ((axes[k] = axis_of(av[k], rank)) < 0) {
            long long bad = (long long)av[k];
            free(v);
            return ox_fail(n, TJ_ERR_SHAPE, "axis %lld is out of range for rank %d", bad, rank), -1;
        }
    free(v);
    return (int)cnt;
}

enum { R_SUM, R_MEAN, R_MAX, R_MIN, R_PROD, R_L1, R_L2, R_LOGSUM, R_LOGSUMEXP, R_SUMSQ };
static tj_status reduce(const ox_node *n, int n_in, tj_tensor *const *in, tj_tensor **out,
                        int kind) {
    tj_tensor *x = in[0];
    int rank = tj_tensor_rank(x), axes[TJ_MAX_RANK + 8], noop = 0;
    int na = red_axes(n, n_in, in, rank, axes, &noop);
    if (na < 0)
        return TJ_ERR_UNSUPPORTED;
    if (noop)
        return one(out, tj_add(x, like(x, 0)));
    int keep = ox_attr_i(n, "keepdims", 1) != 0;
    if (rank == 0) /* a scalar reduces to itself */
        na = 0;
    switch (kind) {
    case R_SUM:
        return one(out, tj_sum(x, na, axes, keep));
    case R_MEAN:
        return one(out, tj_mean(x, na, axes, keep));
    case R_MAX:
        return one(out, tj_max(x, na, axes, keep));
    case R_MIN:
        return one(out, tj_min(x, na, axes, keep));
    case R_PROD:
        return one(out, tj_prod(x, na, axes, keep));
    case R_L1:
        return one(out, tj_sum(tj_abs(x), na, axes, keep));
    case R_L2:
        return one(out, tj_sqrt(tj_sum(tj_mul(x, x), na, axes, keep)));
    case R_LOGSUM:
        return one(out, tj_log(tj_sum(x, na, axes, keep)));
    case R_SUMSQ:
        return one(out, tj_sum(tj_mul(x, x), na, axes, keep));
    default: { /* log(sum(exp(x - max))) + max, stable */
        tj_tensor *m = tj_max(x, na, axes, 1);
        tj_tensor *s = tj_log(tj_sum(tj_exp(tj_sub(x, m)), na, axes, keep));
        return one(out, tj_add(s, keep ? m : tj_max(x, na, axes, 0)));
    }
    }
}
#define REDUCE(cname, kind)                                                                        \
    CONV(cname) {                                                                                  \
        return reduce(n, n_in, in, out, kind);                                                     \
    }
REDUCE(c_reduce_sum, R_SUM)
REDUCE(c_reduce_mean, R_MEAN)
REDUCE(c_reduce_max, R_MAX)
REDUCE(c_reduce_min, R_MIN)
REDUCE(c_reduce_prod, R_PROD)
REDUCE(c_reduce_l1, R_L1)
REDUCE(c_reduce_l2, R_L2)
REDUCE(c_reduce_log_sum, R_LOGSUM)
REDUCE(c_reduce_log_sum_exp, R_LOGSUMEXP)
REDUCE(c_reduce_sum_square, R_SUMSQ)

static tj_status arg_reduce(const ox_node *n, tj_tensor *x, tj_tensor **out, int is_max) {
    int rank = tj_tensor_rank(x), axis = axis_of(ox_attr_i(n, "axis", 0), rank);
    if (axis < 0)
        return ox_fail(n, TJ_ERR_SHAPE, "axis out of range for rank %d", rank);
    tj_tensor *r;
    if (ox_attr_i(n, "select_last_index", 0)) { /* the first of the reversed axis, mapped back */
        int64_t b[TJ_MAX_RANK] = {0}, e[TJ_MAX_RANK], s[TJ_MAX_RANK];
        for (int d = 0; d < rank; d++)
            b[d] = 0, e[d] = tj_tensor_dims(x)[d], s[d] = 1;
        b[axis] = -1, e[axis] = INT64_MIN / 2, s[axis] = -1;
        tj_tensor *rev = tj_slice(x, b, e, s);
        r = is_max ? tj_argmax(rev, axis) : tj_argmin(rev, axis);
        r = tj_sub(tj_scalar_i64(tj_tensor_dims(x)[axis] - 1), r);
    } else {
        r = is_max ? tj_argmax(x, axis) : tj_argmin(x, axis);
    }
    return one(out, ox_attr_i(n, "keepdims", 1) ? tj_expand_dims(r, axis) : r);
}
CONV(c_argmax) {
    return arg_reduce(n, in[0], out, 1);
}
CONV(c_argmin) {
    return arg_reduce(n, in[0], out, 0);
}

/* ---- the table ----------------------------------------------------------------------------------
 */
const ox_op ox_ops_math[] = {
    {"Abs", c_abs, 1, 1, 1, 0},
    {"Add", c_add, 2, 2, 1, 0},
    {"And", c_and, 2, 2, 1, 0},
    {"ArgMax", c_argmax, 1, 1, 1, 0},
    {"ArgMin", c_argmin, 1, 1, 1, 0},
    {"Ceil", c_ceil, 1, 1, 1, 0},
    {"Clip", c_clip, 1, 3, 1, 0},
    {"Cos", c_cos, 1, 1, 7, 0},
    {"Celu", c_celu, 1, 1, 12, 0},
    {"Cosh", c_cosh, 1, 1, 9, 0},
    {"Div", c_div, 2, 2, 1, 0},
    {"Elu", c_elu, 1, 1, 1, 0},
    {"Erf", c_erf, 1, 1, 9, 0},
    {"Equal", c_equal, 2, 2, 1, 0},
    {"Exp", c_exp, 1, 1, 1, 0},
    {"Floor", c_floor, 1, 1, 1, 0},
    {"Gemm", c_gemm, 2, 3, 1, 0},
    {"Greater", c_greater, 2, 2, 1, 0},
    {"GreaterOrEqual", c_greater_equal, 2, 2, 12, 0},
    {"HardSigmoid", c_hard_sigmoid, 1, 1, 1, 0},
    {"HardSwish", c_hard_swish, 1, 1, 14, 0},
    {"Identity", c_identity, 1, 1, 1, 0},
    {"IsInf", c_isinf, 1, 1, 10, 0},
    {"IsNaN", c_isnan, 1, 1, 9, 0},
    {"LeakyRelu", c_leaky_relu, 1, 1, 1, 0},
    {"Less", c_less, 2, 2, 1, 0},
    {"LessOrEqual", c_less_equal, 2, 2, 12, 0},
    {"Log", c_log, 1, 1, 1, 0},
    {"LogSoftmax", c_log_softmax, 1, 1, 1, 0},
    {"MatMul", c_matmul, 2, 2, 1, 0},
    {"Max", c_max, 1, -1, 1, 0},
    {"Mean", c_mean, 1, -1, 1, 0},
    {"Min", c_min, 1, -1, 1, 0},
    {"Mod", c_mod, 2, 2, 10, 0},
    {"BitShift", c_bitshift, 2, 2, 11, 0},
    {"Mul", c_mul, 2, 2, 1, 0},
    {"Neg", c_neg, 1, 1, 1, 0},
    {"Not", c_not, 1, 1, 1, 0},
    {"Or", c_or, 2, 2, 1, 0},
    {"Pow", c_pow, 2, 2, 1, 0},
    {"PRelu", c_prelu, 2, 2, 1, 0},
    {"Reciprocal", c_reciprocal, 1, 1, 1, 0},
    {"ReduceL1", c_reduce_l1, 1, 1, 1, 0},
    {"ReduceL2", c_reduce_l2, 1, 1, 1, 0},
    {"ReduceLogSum", c_reduce_log_sum, 1, 1, 1, 0},
    {"ReduceLogSumExp", c_reduce_log_sum_exp, 1, 1, 1, 0},
    {"ReduceMax", c_reduce_max, 1, 1, 1, 0},
    {"ReduceMean", c_reduce_mean, 1, 1, 1, 0},
    {"ReduceMin", c_reduce_min, 1, 1, 1, 0},
    {"ReduceProd", c_reduce_prod, 1, 1, 1, 0},
    {"ReduceSum", c_reduce_sum, 1, 2, 1, 0x2},
    {"ReduceSumSquare", c_reduce_sum_square, 1, 1, 1, 0},
    {"Relu", c_relu, 1, 1, 1, 0},
    {"Round", c_round, 1, 1, 11, 0},
    {"Selu", c_selu, 1, 1, 1, 0},
    {"Sigmoid", c_sigmoid, 1, 1, 1, 0},
    {"Sign", c_sign, 1, 1, 9, 0},
    {"Sin", c_sin, 1, 1, 7, 0},
    {"Asin", c_asin, 1, 1, 7, 0},
    {"Acos", c_acos, 1, 1, 7, 0},
    {"Atan", c_atan, 1, 1, 7, 0},
    {"Sinh", c_sinh, 1, 1, 9, 0},
    {"Softmax", c_softmax, 1, 1, 1, 0},
    {"Softplus", c_softplus, 1, 1, 1, 0},
    {"Softsign", c_softsign, 1, 1, 1, 0},
    {"Sqrt", c_sqrt, 1, 1, 1, 0},
    {"Sub", c_sub, 2, 2, 1, 0},
    {"Sum", c_sum, 1, -1, 1, 0},
    {"Tan", c_tan, 1, 1, 7, 0},
    {"Tanh", c_tanh, 1, 1, 1, 0},
    {"ThresholdedRelu", c_thresholded_relu, 1, 1, 10, 0},
    {"Where", c_where, 3, 3, 9, 0},
    {"Xor", c_xor, 2, 2, 1, 0},
    {NULL, NULL, 0, 0, 0, 0},
};
