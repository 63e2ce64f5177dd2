/* cast.c — CAST between the numeric dtypes and bool (string -> string copies). The target dtype
 * is the output's. float -> int truncates toward zero and saturates at the target's range (NaN
 * becomes 0; unsigned targets saturate at 0) so no conversion is undefined; int -> int of another
 * width or signedness wraps modulo 2^bits (two's complement, as TF and NumPy);
 * bool -> number gives 0/1; number -> bool is x != 0 (NaN is true, as in C and TF). */
#include "runtime/kernels/kernels.h"

/* Reads element i as the widest type of its kind. */
static inline double get_f(const tj_tensor *t, int64_t i) {
    switch (t->dtype) {
    case TJ_F32:
        return ((const float *)t->data)[i];
    case TJ_F64:
        return ((const double *)t->data)[i];
    case TJ_I32:
        return ((const int32_t *)t->data)[i];
    case TJ_I64:
        return (double)((const int64_t *)t->data)[i];
    case TJ_BOOL:
        return ((const uint8_t *)t->data)[i] != 0;
    case TJ_F16:
    case TJ_BF16:
        return ir_half_to_f64(t->dtype, ((const uint16_t *)t->data)[i]);
    default:
        return rt_k_int2f(t->dtype, rt_int_load(t, i));
    }
}

static inline int64_t get_i(const tj_tensor *t, int64_t i) {
    switch (t->dtype) {
    case TJ_F32:
        return rt_k_f2i64(((const float *)t->data)[i]);
    case TJ_F64:
        return rt_k_f2i64(((const double *)t->data)[i]);
    case TJ_I32:
        return ((const int32_t *)t->data)[i];
    case TJ_BOOL:
        return ((const uint8_t *)t->data)[i] != 0;
    case TJ_F16:
    case TJ_BF16:
        return rt_k_f2i64(get_f(t, i));
    default:
        return rt_int_load(t, i);
    }
}

tj_status rt_k_cast(const ir_node *n, const tj_tensor *x, tj_tensor *out) {
    if (x->numel != out->numel)
        return ir_errorf(TJ_ERR_INVALID, "cast: input has %lld elements, output %lld",
                         (long long)x->numel, (long long)out->numel);
    int from = x->dtype, to = out->dtype;
    if (from == TJ_STRING || to == TJ_STRING) {
        if (from != to)
            return ir_errorf(TJ_ERR_UNSUPPORTED, "cast: from %s to %s is not supported",
                             ir_dtype_name(from), ir_dtype_name(to));
        for (int64_t i = 0; i < x->numel; i++) {
            tj_status st = rt_k_copy_elem(n, out, i, x, i);
            if (st)
                return st;
        }
        return TJ_OK;
    }
    int64_t len = x->numel;
    bool from_f = ir_dtype_is_float(from) || ir_dtype_is_half(from);
    switch (to) {
    case TJ_F32:
        for (int64_t i = 0; i < len; i++) /* 64-bit ints directly: no double rounding via f64 */
            ((float *)out->data)[i] = from == TJ_I64   ? (float)((const int64_t *)x->data)[i]
                                      : from == TJ_U64 ? (float)((const uint64_t *)x->data)[i]
                                                       : (float)get_f(x, i);
        break;
    case TJ_F64:
        for (int64_t i = 0; i < len; i++)
            ((double *)out->data)[i] = get_f(x, i);
        break;
    case TJ_I32:
        for (int64_t i = 0; i < len; i++)
            ((int32_t *)out->data)[i] =
                from_f ? rt_k_f2i32(get_f(x, i)) : (int32_t)(uint32_t)(uint64_t)get_i(x, i);
        break;
    case TJ_I64:
        for (int64_t i = 0; i < len; i++)
            ((int64_t *)out->data)[i] = get_i(x, i);
        break;
    case TJ_BOOL:
        for (int64_t i = 0; i < len; i++)
            ((uint8_t *)out->data)[i] = from_f ? get_f(x, i) != 0 : get_i(x, i) != 0;
        break;
    case TJ_F16:
    case TJ_BF16: /* one rounding from the exact double (64-bit ints: two) */
        for (int64_t i = 0; i < len; i++)
            ((uint16_t *)out->data)[i] = ir_half_from_f64(to, get_f(x, i));
        break;
    default:
        if (!ir_dtype_is_int(to))
            return rt_k_unsupported(n, to);
        for (int64_t i = 0; i < len; i++)
            rt_int_store(out, i, from_f ? rt_k_f2int(to, get_f(x, i)) : get_i(x, i));
    }
    return TJ_OK;
}
