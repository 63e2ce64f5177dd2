/* dtype.c — dtype names and sizes, dims formatting, element counts and NumPy broadcasting with
 * unknown (-1) dims. Pure functions over descriptors; used by inference, the printer/parser and
 * every layer above when it formats an error message. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ir/ir.h"

static const char *const long_names[TJ_N_DTYPES] = {
    "float32", "float64", "int32",  "int64",  "bool",   "string",  "int8",
    "uint8",   "int16",   "uint16", "uint32", "uint64", "float16", "bfloat16"};
static const char *const short_names[TJ_N_DTYPES] = {"f32", "f64", "i32", "i64", "bool",
                                                     "str", "i8",  "u8",  "i16", "u16",
                                                     "u32", "u64", "f16", "bf16"};
static const size_t sizes[TJ_N_DTYPES] = {4, 8, 4, 8, 1, sizeof(tj_string), 1, 1, 2, 2, 4, 8, 2, 2};

const char *ir_dtype_name(int dt) {
    if (dt >= 0 && dt < TJ_N_DTYPES)
        return long_names[dt];
    return dt == IR_VOID ? "void" : dt == IR_TUPLE ? "tuple" : "?";
}

const char *ir_dtype_short(int dt) {
    if (dt >= 0 && dt < TJ_N_DTYPES)
        return short_names[dt];
    return dt == IR_VOID ? "void" : dt == IR_TUPLE ? "tuple" : "?";
}

int ir_dtype_from_short(const char *s, size_t len) {
    if (!s)
        return -1;
    for (int i = 0; i < TJ_N_DTYPES; i++)
        if (strlen(short_names[i]) == len && memcmp(short_names[i], s, len) == 0)
            return i;
    if (len == 4 && memcmp(s, "void", 4) == 0)
        return IR_VOID;
    if (len == 5 && memcmp(s, "tuple", 5) == 0)
        return IR_TUPLE;
    return -1;
}

size_t ir_dtype_size(int dt) {
    return dt >= 0 && dt < TJ_N_DTYPES ? sizes[dt] : 0;
}
bool ir_dtype_is_float(int dt) {
    return dt == TJ_F32 || dt == TJ_F64;
}
bool ir_dtype_is_int(int dt) {
    return dt == TJ_I32 || dt == TJ_I64 || (dt >= TJ_I8 && dt <= TJ_U64);
}
bool ir_dtype_is_half(int dt) {
    return dt == TJ_F16 || dt == TJ_BF16;
}

/* binary16 / bfloat16 layouts: fraction bits and exponent bias */
static void half_layout(int dt, int *mbits, int *bias, int *emax) {
    *mbits = dt == TJ_F16 ? 10 : 7;
    *bias = dt == TJ_F16 ? 15 : 127;
    *emax = dt == TJ_F16 ? 31 : 255;
}

uint16_t ir_half_from_f64(int dt, double v) {
    int mbits, bias, emax;
    half_layout(dt, &mbits, &bias, &emax);
    uint16_t sign = signbit(v) ? 0x8000 : 0;
    if (v != v)
        return (uint16_t)(sign | (emax << mbits) | (1u << (mbits - 1))); /* a quiet NaN */
    double a = fabs(v);
    /* halfway between the largest finite value and the next power of two rounds to infinity */
    if (a >= ldexp(2.0 - ldexp(1, -(mbits + 1)), emax - 1 - bias))
        return (uint16_t)(sign | (emax << mbits));
    if (a < ldexp(1, 1 - bias)) /* subnormal: multiples of 2^(1 - bias - mbits), nearest even */
        return (uint16_t)(sign | (uint16_t)rint(ldexp(a, bias - 1 + mbits)));
    int ex;
    frexp(a, &ex); /* a = m 2^ex, m in [0.5, 1): the significand rounded to mbits + 1 bits */
    uint32_t q = (uint32_t)rint(ldexp(a, mbits + 1 - ex)); /* in [2^mbits, 2^(mbits+1)] */
    return (uint16_t)(sign + ((uint32_t)(ex - 1 + bias) << mbits) + (q - (1u << mbits)));
}

double ir_half_to_f64(int dt, uint16_t h) {
    int mbits, bias, emax;
    half_layout(dt, &mbits, &bias, &emax);
    int e = (h >> mbits) & emax;
    uint32_t m = h & ((1u << mbits) - 1);
    double v = e == 0      ? ldexp(m, 1 - bias - mbits)
               : e == emax ? (m ? NAN : INFINITY)
                           : ldexp((double)(m | (1u << mbits)), e - bias - mbits);
    return (h & 0x8000) ? -v : v;
}

bool ir_dtype_is_index(int dt) {
    return dt == TJ_I32 || dt == TJ_I64;
}
bool ir_dtype_is_unsigned(int dt) {
    return dt == TJ_U8 || dt == TJ_U16 || dt == TJ_U32 || dt == TJ_U64;
}
int64_t ir_int_get(int dt, const void *e) {
    switch (dt) {
    case TJ_I8:
        return *(const int8_t *)e;
    case TJ_U8:
    case TJ_BOOL:
        return *(const uint8_t *)e;
    default:
        break;
    }
    union {
        int16_t i16;
        uint16_t u16;
        int32_t i32;
        uint32_t u32;
        int64_t i64;
    } v;
    memcpy(&v, e, ir_dtype_size(dt));
    switch (dt) {
    case TJ_I16:
        return v.i16;
    case TJ_U16:
        return v.u16;
    case TJ_I32:
        return v.i32;
    case TJ_U32:
        return v.u32;
    default:
        return v.i64;
    }
}

void ir_int_put(int dt, void *e, int64_t v) {
    uint8_t u8 = (uint8_t)v;
    uint16_t u16 = (uint16_t)v;
    uint32_t u32 = (uint32_t)v;
    size_t es = ir_dtype_size(dt);
    memcpy(e,
           es == 1   ? (const void *)&u8
           : es == 2 ? (const void *)&u16
           : es == 4 ? (const void *)&u32
                     : (const void *)&v,
           es);
}

bool ir_int_fits(int dt, int64_t v) {
    switch (dt) {
    case TJ_I8:
        return v >= INT8_MIN && v <= INT8_MAX;
    case TJ_U8:
    case TJ_BOOL:
        return v >= 0 && v <= UINT8_MAX;
    case TJ_I16:
        return v >= INT16_MIN && v <= INT16_MAX;
    case TJ_U16:
        return v >= 0 && v <= UINT16_MAX;
    case TJ_I32:
        return v >= INT32_MIN && v <= INT32_MAX;
    case TJ_U32:
        return v >= 0 && v <= UINT32_MAX;
    default:
        return true;
    }
}

bool ir_dtype_is_numeric(int dt) {
    return ir_dtype_is_float(dt) || ir_dtype_is_int(dt);
}

char *ir_fmt_dims(char *buf, size_t n, int rank, const int64_t *dims) {
    if (!buf || n == 0)
        return buf;
    size_t off = 0;
    buf[0] = '\0';
#define PUT(...)                                                                                   \
    do {                                                                                           \
        if (off < n) {                                                                             \
            int w_ = snprintf(buf + off, n - off, __VA_ARGS__);                                    \
            off += w_ > 0 ? (size_t)w_ : 0;                                                        \
        }                                                                                          \
    } while (0)
    PUT("[");
    for (int i = 0; i < rank; i++) {
        if (i)
            PUT(",");
        if (dims[i] == -1)
            PUT("?");
        else
            PUT("%lld", (long long)dims[i]);
    }
    PUT("]");
#undef PUT
    return buf;
}

tj_status ir_check_shape(const char *op, int rank, const int64_t *dims, bool unknown_ok) {
    char s[200];
    if (rank < 0 || rank > IR_MAX_RANK)
        return ir_errorf(TJ_ERR_SHAPE, "%s: rank %d out of range [0, %d]", op, rank, IR_MAX_RANK);
    if (rank > 0 && !dims)
        return ir_errorf(TJ_ERR_INVALID, "%s: dims is NULL for rank %d", op, rank);
    /* every partial product of the dims must fit too (kernels multiply strides), so the bound
     * is on the product of the non-zero dims: [2^40, 2^40, 0] is refused like [2^40, 2^40] */
    int64_t n = 1;
    for (int k = 0; k < rank; k++) {
        int64_t d = dims[k];
        if (d < -1 || (d == -1 && !unknown_ok))
            return ir_errorf(TJ_ERR_SHAPE, "%s: invalid dimension %lld at axis %d of shape %s", op,
                             (long long)d, k, ir_fmt_dims(s, sizeof s, rank, dims));
        if (d > 0 && (__builtin_mul_overflow(n, d, &n) || n > TJ_MAX_NUMEL))
            return ir_errorf(TJ_ERR_SHAPE,
                             "%s: shape %s has more than %lld elements (TJ_MAX_NUMEL = 2^40)", op,
                             ir_fmt_dims(s, sizeof s, rank, dims), (long long)TJ_MAX_NUMEL);
    }
    return TJ_OK;
}

int64_t ir_numel(int rank, const int64_t *dims) {
    int64_t n = 1;
    for (int i = 0; i < rank; i++) {
        if (dims[i] < 0)
            return -1;
        if (__builtin_mul_overflow(n, dims[i], &n))
            n = INT64_MAX;
    }
    return n;
}

bool ir_red_split(int rank, const int64_t *dims, const bool *red, int64_t *outer, int64_t *len,
                  int64_t *inner) {
    *outer = *len = *inner = 1;
    int phase = 0; /* 0: outer, 1: reduced, 2: inner */
    for (int d = 0; d < rank; d++) {
        if (dims[d] == 1)
            continue;
        if (red[d] && phase == 2)
            return false;
        phase = red[d] ? 1 : phase == 1 ? 2 : phase;
        *(phase == 0 ? outer : phase == 1 ? len : inner) *= dims[d];
    }
    return true;
}

tj_status ir_broadcast(const char *op, int ra, const int64_t *da, int rb, const int64_t *db,
                       int *rank_out, int64_t *dims_out) {
    int r = ra > rb ? ra : rb;
    if (r > IR_MAX_RANK)
        return ir_errorf(TJ_ERR_SHAPE, "%s: rank %d exceeds the maximum %d", op, r, IR_MAX_RANK);
    int64_t out[IR_MAX_RANK];
    for (int i = 0; i < r; i++) {
        int ia = ra - r + i, ib = rb - r + i;
        int64_t a = ia >= 0 ? da[ia] : 1, b = ib >= 0 ? db[ib] : 1;
        int64_t o;
        if (a == b)
            o = a;
        else if (a == 1)
            o = b;
        else if (b == 1)
            o = a;
        else if (a < 0)
            o = b;
        else if (b < 0)
            o = a;
        else {
            char sa[128], sb[128];
            return ir_errorf(TJ_ERR_SHAPE, "%s: incompatible shapes for broadcasting: %s vs %s", op,
                             ir_fmt_dims(sa, sizeof sa, ra, da),
                             ir_fmt_dims(sb, sizeof sb, rb, db));
        }
        out[i] = o;
    }
    *rank_out = r;
    memcpy(dims_out, out, sizeof(int64_t) * (size_t)r);
    return TJ_OK;
}
