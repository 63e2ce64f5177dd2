/* unary.c — elementwise unary reference kernels (neg ... isinf; cast lives in cast.c).
 * Floats use the type's own libm function (tgmath: expf for f32, exp for f64), so f32 results are
 * what a float kernel computes, not a rounded double. ROUND is rint (half to even under the
 * default rounding mode). Sigmoid is computed from exp(-|x|), stable at both ends. Integer NEG/ABS
 * go through unsigned arithmetic so INT_MIN wraps (as TensorFlow) instead of overflowing.
 * ISNAN/ISINF write bool. */
#include <tgmath.h>

#include "runtime/kernels/kernels.h"
#include "runtime/rt_pool.h"

#define LOOP(EXPR)                                                                                 \
    for (int64_t i = 0; i < n; i++) {                                                              \
        __typeof__(x[0]) v = x[i];                                                                 \
        o[i] = (EXPR);                                                                             \
    }                                                                                              \
    return TJ_OK

#define FLOAT_UNARY(T, NAME)                                                                       \
    static tj_status NAME(int op, const T *x, T *o, int64_t n) {                                   \
        const T one = 1, zero = 0;                                                                 \
        switch (op) {                                                                              \
        case IR_OP_NEG:                                                                            \
            LOOP(-v);                                                                              \
        case IR_OP_ABS:                                                                            \
            LOOP(fabs(v));                                                                         \
        case IR_OP_SIGN:                                                                           \
            LOOP(v > zero ? one : v < zero ? -one : v); /* keeps NaN and -0 */                     \
        case IR_OP_EXP:                                                                            \
            LOOP(exp(v));                                                                          \
        case IR_OP_LOG:                                                                            \
            LOOP(log(v));                                                                          \
        case IR_OP_SQRT:                                                                           \
            LOOP(sqrt(v));                                                                         \
        case IR_OP_RSQRT:                                                                          \
            LOOP(one / sqrt(v));                                                                   \
        case IR_OP_TANH:                                                                           \
            LOOP(tanh(v));                                                                         \
        case IR_OP_SIGMOID: /* e = exp(-|x|) never overflows: no flush to 0 below x = -88.7 */     \
            LOOP(({                                                                                \
                T e_ = exp(-fabs(v));                                                              \
                v >= zero ? one / (one + e_) : e_ / (one + e_);                                    \
            }));                                                                                   \
        case IR_OP_RELU:                                                                           \
            LOOP(v > zero ? v : (v != v ? v : zero));                                              \
        case IR_OP_SIN:                                                                            \
            LOOP(sin(v));                                                                          \
        case IR_OP_COS:                                                                            \
            LOOP(cos(v));                                                                          \
        case IR_OP_ATAN:                                                                           \
            LOOP(atan(v));                                                                         \
        case IR_OP_ASIN:                                                                           \
            LOOP(asin(v));                                                                         \
        case IR_OP_ACOS:                                                                           \
            LOOP(acos(v));                                                                         \
        case IR_OP_ERF:                                                                            \
            LOOP(erf(v));                                                                          \
        case IR_OP_FLOOR:                                                                          \
            LOOP(floor(v));                                                                        \
        case IR_OP_CEIL:                                                                           \
            LOOP(ceil(v));                                                                         \
        case IR_OP_ROUND:                                                                          \
            LOOP(rint(v));                                                                         \
        default:                                                                                   \
            return TJ_ERR_UNSUPPORTED;                                                             \
        }                                                                                          \
    }

FLOAT_UNARY(float, unary_f32)
FLOAT_UNARY(double, unary_f64)

/* T: the signed type, U: its unsigned twin (wrapping negation). */
#define INT_UNARY(T, U, NAME)                                                                      \
    static tj_status NAME(int op, const T *x, T *o, int64_t n) {                                   \
        switch (op) {                                                                              \
        case IR_OP_NEG:                                                                            \
            LOOP((T)(U)(0u - (U)v));                                                               \
        case IR_OP_ABS:                                                                            \
            LOOP(v < 0 ? (T)(U)(0u - (U)v) : v);                                                   \
        case IR_OP_SIGN:                                                                           \
            LOOP((T)((v > 0) - (v < 0)));                                                          \
        case IR_OP_RELU:                                                                           \
            LOOP(v > 0 ? v : 0);                                                                   \
        case IR_OP_FLOOR:                                                                          \
        case IR_OP_CEIL:                                                                           \
        case IR_OP_ROUND:                                                                          \
            LOOP(v); /* integers are already integral */                                           \
        default:                                                                                   \
            return TJ_ERR_UNSUPPORTED;                                                             \
        }                                                                                          \
    }

INT_UNARY(int8_t, uint8_t, unary_i8)
INT_UNARY(int16_t, uint16_t, unary_i16)
INT_UNARY(int32_t, uint32_t, unary_i32)
INT_UNARY(int64_t, uint64_t, unary_i64)

/* Unsigned: negation wraps modulo 2^bits (as NumPy), abs/relu/floor... are the identity. */
#define UINT_UNARY(T, NAME)                                                                        \
    static tj_status NAME(int op, const T *x, T *o, int64_t n) {                                   \
        switch (op) {                                                                              \
        case IR_OP_NEG:                                                                            \
            LOOP((T)(0u - (uint64_t)v));                                                           \
        case IR_OP_SIGN:                                                                           \
            LOOP((T)(v > 0));                                                                      \
        case IR_OP_ABS:                                                                            \
        case IR_OP_RELU:                                                                           \
        case IR_OP_FLOOR:                                                                          \
        case IR_OP_CEIL:                                                                           \
        case IR_OP_ROUND:                                                                          \
            LOOP(v);                                                                               \
        default:                                                                                   \
            return TJ_ERR_UNSUPPORTED;                                                             \
        }                                                                                          \
    }

UINT_UNARY(uint8_t, unary_u8)
UINT_UNARY(uint16_t, unary_u16)
UINT_UNARY(uint32_t, unary_u32)
UINT_UNARY(uint64_t, unary_u64)

#define PRED_LOOP(T, EXPR)                                                                         \
    do {                                                                                           \
        const T *x_ = x->data;                                                                     \
        for (int64_t i = 0; i < x->numel; i++) {                                                   \
            T v = x_[i];                                                                           \
            o[i] = (EXPR) ? 1 : 0;                                                                 \
        }                                                                                          \
    } while (0)

/* ISNAN / ISINF: bool results; integers and bools are never NaN or infinite. */
static tj_status unary_pred(const ir_node *n, const tj_tensor *x, tj_tensor *out) {
    uint8_t *o = out->data;
    int nan = n->op == IR_OP_ISNAN;
    switch (x->dtype) {
    case TJ_F32:
        PRED_LOOP(float, nan ? isnan(v) : isinf(v));
        return TJ_OK;
    case TJ_F64:
        PRED_LOOP(double, nan ? isnan(v) : isinf(v));
        return TJ_OK;
    default:
        if (ir_dtype_is_int(x->dtype) || x->dtype == TJ_BOOL)
            return TJ_OK; /* out is zeroed: all false */
        return rt_k_unsupported(n, x->dtype);
    }
}

/* Large f32 inputs are split across the pool in chunks once the first chunk has run (an op this
 * kernel does not have says so there, before any thread starts); elementwise, so each result is
 * the serial loop's. */
enum { UN_CHUNK = 1 << 15 };

typedef struct un_split {
    int op;
    const float *x;
    float *out;
    int64_t len;
} un_split;

static void un_chunk(void *ctx, int64_t t) {
    const un_split *s = ctx;
    int64_t j0 = (t + 1) * UN_CHUNK, n = s->len - j0 < UN_CHUNK ? s->len - j0 : UN_CHUNK;
    (void)unary_f32(s->op, s->x + j0, s->out + j0, n);
}

static tj_status unary_f32_split(int op, const float *x, float *o, int64_t len) {
    if (len < 2 * UN_CHUNK || rt_pool_size() < 2)
        return unary_f32(op, x, o, len);
    tj_status st = unary_f32(op, x, o, UN_CHUNK);
    if (st)
        return st;
    un_split s = {op, x, o, len};
    rt_parallel_for((len + UN_CHUNK - 1) / UN_CHUNK - 1, un_chunk, &s);
    return TJ_OK;
}

tj_status rt_k_unary(const ir_node *n, const tj_tensor *x, tj_tensor *out) {
    if (n->op == IR_OP_ISNAN || n->op == IR_OP_ISINF) {
        if (out->dtype != TJ_BOOL)
            return rt_k_unsupported(n, out->dtype);
        return unary_pred(n, x, out);
    }
    if (x->dtype != out->dtype || x->numel != out->numel)
        return ir_errorf(TJ_ERR_INVALID, "%s: input %s does not match output %s", rt_k_name(n),
                         ir_dtype_name(x->dtype), ir_dtype_name(out->dtype));
    tj_status st = TJ_ERR_UNSUPPORTED;
    int64_t len = x->numel;
    switch (x->dtype) {
    case TJ_F32:
        st = unary_f32_split(n->op, x->data, out->data, len);
        break;
    case TJ_F64:
        st = unary_f64(n->op, x->data, out->data, len);
        break;
    case TJ_I32:
        st = unary_i32(n->op, x->data, out->data, len);
        break;
    case TJ_I64:
        st = unary_i64(n->op, x->data, out->data, len);
        break;
#define CASE(DT, SFX)                                                                              \
    case DT:                                                                                       \
        st = unary_##SFX(n->op, x->data, out->data, len);                                          \
        break;
        RT_K_NARROW_INTS(CASE)
#undef CASE
    case TJ_BOOL:
        if (n->op == IR_OP_LOGICAL_NOT) {
            const uint8_t *xb = x->data;
            uint8_t *ob = out->data;
            for (int64_t i = 0; i < len; i++)
                ob[i] = !xb[i];
            st = TJ_OK;
        }
        break;
    default:
        break;
    }
    return st == TJ_ERR_UNSUPPORTED ? rt_k_unsupported(n, x->dtype) : st;
}
