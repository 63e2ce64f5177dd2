/* test_int_dtypes.c — int8, uint8, int16, uint16, uint32 and uint64 through the public API,
 * eagerly and compiled (LLVM where the codegen takes the op, reference kernels where it does
 * not), against an oracle written here from the definitions: wrapping add/sub/mul/pow modulo
 * 2^bits, truncating DIV and Python-style FLOORDIV/MOD for signed widths, unsigned compares and
 * division for unsigned ones, reductions that wrap, saturating float -> int casts, extension by
 * the source's signedness. Also printing, host-scalar promotion and the errors around them. */
#include <tracejit.h>

#include "check.h"

#define N 12
static const tj_dtype DTS[] = {TJ_I8, TJ_U8, TJ_I16, TJ_U16, TJ_U32, TJ_U64};

static int bits_of(tj_dtype dt) {
    return 8 * (int)tj_dtype_size(dt);
}
static int is_uns(tj_dtype dt) {
    return dt == TJ_U8 || dt == TJ_U16 || dt == TJ_U32 || dt == TJ_U64;
}
/* v modulo 2^bits, sign-extended for signed widths (uint64 kept as its bit pattern) */
static int64_t wrapv(tj_dtype dt, uint64_t v) {
    int b = bits_of(dt);
    if (b == 64)
        return (int64_t)v;
    uint64_t m = (1ull << b) - 1;
    v &= m;
    if (!is_uns(dt) && (v >> (b - 1)))
        v |= ~m;
    return (int64_t)v;
}
static int64_t smin(tj_dtype dt) {
    return is_uns(dt) ? 0 : wrapv(dt, 1ull << (bits_of(dt) - 1));
}
static int64_t smax(tj_dtype dt) {
    return wrapv(dt, is_uns(dt) ? ~0ull : (1ull << (bits_of(dt) - 1)) - 1);
}
static int lt(tj_dtype dt, int64_t x, int64_t y) {
    return is_uns(dt) ? (uint64_t)x < (uint64_t)y : x < y;
}

/* the raw element buffer of values v[0..n) in dtype dt */
static void pack(tj_dtype dt, const int64_t *v, int n, void *out) {
    for (int i = 0; i < n; i++) {
        uint64_t u = (uint64_t)v[i];
        switch (tj_dtype_size(dt)) {
        case 1:
            ((uint8_t *)out)[i] = (uint8_t)u;
            break;
        case 2:
            ((uint16_t *)out)[i] = (uint16_t)u;
            break;
        case 4:
            ((uint32_t *)out)[i] = (uint32_t)u;
            break;
        default:
            ((uint64_t *)out)[i] = u;
        }
    }
}
static int64_t elem(const tj_tensor *t, int64_t i) {
    const void *p = tj_tensor_data(t);
    switch (tj_tensor_dtype(t)) {
    case TJ_I8:
        return ((const int8_t *)p)[i];
    case TJ_U8:
    case TJ_BOOL:
        return ((const uint8_t *)p)[i];
    case TJ_I16:
        return ((const int16_t *)p)[i];
    case TJ_U16:
        return ((const uint16_t *)p)[i];
    case TJ_I32:
        return ((const int32_t *)p)[i];
    case TJ_U32:
        return ((const uint32_t *)p)[i];
    default:
        return ((const int64_t *)p)[i];
    }
}

enum {
    O_ADD,
    O_SUB,
    O_MUL,
    O_DIV,
    O_FDIV,
    O_MOD,
    O_POW,
    O_MAX,
    O_MIN,
    O_LT,
    O_GE,
    O_NEG,
    O_ABS,
    O_SIGN,
    O_RELU,
    O_SHL,
    O_SHR,
    N_BIN
};
static const char *const NAMES[] = {"add", "sub",  "mul",  "div",        "floordiv",   "mod",
                                    "pow", "max",  "min",  "less",       "ge",         "neg",
                                    "abs", "sign", "relu", "left_shift", "right_shift"};

static int64_t oracle(tj_dtype dt, int op, int64_t x, int64_t y) {
    uint64_t ux = (uint64_t)x, uy = (uint64_t)y;
    int u = is_uns(dt);
    switch (op) {
    case O_ADD:
        return wrapv(dt, ux + uy);
    case O_SUB:
        return wrapv(dt, ux - uy);
    case O_MUL:
        return wrapv(dt, ux * uy);
    case O_DIV:
    case O_FDIV:
    case O_MOD: {
        if (u)
            return op == O_MOD ? (int64_t)(ux % uy) : (int64_t)(ux / uy);
        if (y == -1) /* MIN / -1 wraps to MIN; the remainder is 0 */
            return op == O_MOD ? 0 : wrapv(dt, 0 - ux);
        int64_t q = x / y, r = x % y;
        if (op == O_DIV)
            return q;
        if (r != 0 && ((r < 0) != (y < 0)))
            q--, r += y;
        return op == O_MOD ? r : q;
    }
    case O_POW: {
        uint64_t r = 1;
        for (int64_t k = 0; k < y; k++)
            r *= ux;
        return wrapv(dt, r);
    }
    case O_MAX:
        return lt(dt, x, y) ? y : x;
    case O_MIN:
        return lt(dt, y, x) ? y : x;
    case O_LT:
        return lt(dt, x, y);
    case O_GE:
        return !lt(dt, x, y);
    case O_NEG:
        return wrapv(dt, 0 - ux);
    case O_ABS:
        return !u && x < 0 ? wrapv(dt, 0 - ux) : x;
    case O_SIGN:
        return u ? x != 0 : (x > 0) - (x < 0);
    case O_SHL:
    case O_SHR: { /* one bit at a time: a count outside [0, bits) shifts everything out */
        int64_t v = x;
        for (int k = 0; k < 64 && (uint64_t)k < (u ? uy : (uint64_t)(y < 0 ? 64 : y)); k++)
            v = op == O_SHL ? wrapv(dt, (uint64_t)v << 1)
                : u         ? (int64_t)((uint64_t)v >> 1)
                            : (v < 0 ? ~((~v) >> 1) : v >> 1);
        return v;
    }
    default: /* relu */
        return !u && x < 0 ? 0 : x;
    }
}

static tj_tensor *apply(int op, tj_tensor *a, tj_tensor *b, tj_tensor *e) {
    switch (op) {
    case O_ADD:
        return tj_add(a, b);
    case O_SUB:
        return tj_sub(a, b);
    case O_MUL:
        return tj_mul(a, b);
    case O_DIV:
        return tj_div(a, b);
    case O_FDIV:
        return tj_floordiv(a, b);
    case O_MOD:
        return tj_mod(a, b);
    case O_POW:
        return tj_pow(a, e);
    case O_MAX:
        return tj_maximum(a, b);
    case O_MIN:
        return tj_minimum(a, b);
    case O_LT:
        return tj_less(a, b);
    case O_GE:
        return tj_greater_equal(a, b);
    case O_NEG:
        return tj_neg(a);
    case O_ABS:
        return tj_abs(a);
    case O_SIGN:
        return tj_sign(a);
    case O_SHL:
        return tj_left_shift(a, b);
    case O_SHR:
        return tj_right_shift(a, b);
    default:
        return tj_relu(a);
    }
}

/* every op of the table, then reductions, casts and a matmul, as one tuple */
static tj_tensor *all_ops(tj_tensor *a, tj_tensor *b, tj_tensor *e) {
    tj_tensor *r[N_BIN + 9];
    for (int op = 0; op < N_BIN; op++)
        r[op] = apply(op, a, b, e);
    r[N_BIN + 0] = tj_sum(a, 0, NULL, 0);
    r[N_BIN + 1] = tj_max(a, 0, NULL, 0);
    r[N_BIN + 2] = tj_min(a, 0, NULL, 0);
    r[N_BIN + 3] = tj_mean(b, 0, NULL, 0);
    r[N_BIN + 4] = tj_prod(e, 0, NULL, 0);
    r[N_BIN + 5] = tj_argmax(a, 0);
    r[N_BIN + 6] = tj_cast(a, TJ_F64);
    r[N_BIN + 7] = tj_cast(a, TJ_I64);
    tj_tensor *a2 = tj_reshape(a, 2, (const int64_t[]){3, 4}),
              *b2 = tj_reshape(b, 2, (const int64_t[]){4, 3});
    r[N_BIN + 8] = tj_matmul(a2, b2);
    return tj_tuple(N_BIN + 9, r);
}

static void check_results(tj_dtype dt, const char *how, tj_tensor *res, const int64_t *x,
                          const int64_t *y, const int64_t *ex) {
    char what[64];
    if (tj_status_of(res) != TJ_OK) {
        fprintf(stderr, "  %s %s: %s\n", tj_dtype_name(dt), how, tj_error_message(res));
        CHECK(0);
        return;
    }
    CHECK(tj_tuple_size(res) == N_BIN + 9);
    for (int op = 0; op < N_BIN; op++) {
        tj_tensor *t = tj_tuple_get(res, op);
        int cmp = op == O_LT || op == O_GE;
        snprintf(what, sizeof what, "%s %s %s", tj_dtype_name(dt), how, NAMES[op]);
        CHECK_MSG(tj_tensor_dtype(t) == (cmp ? TJ_BOOL : dt), what);
        int bad = 0;
        for (int i = 0; i < N && !bad; i++) {
            int64_t want = oracle(dt, op, x[i], op == O_POW ? ex[i] : y[i]);
            if (elem(t, i) != want) {
                fprintf(stderr, "  %s [%d]: %lld op %lld = %lld, want %lld\n", what, i,
                        (long long)x[i], (long long)y[i], (long long)elem(t, i), (long long)want);
                bad = 1;
            }
        }
        CHECK_MSG(!bad, what);
    }
    /* reductions: wrapped sum, unsigned-aware max/min and argmax, truncating mean */
    uint64_t sum = 0, sumb = 0, prod = 1;
    int64_t mx = x[0], mn = x[0];
    int amx = 0;
    for (int i = 0; i < N; i++) {
        sum += (uint64_t)x[i], sumb += (uint64_t)y[i], prod *= (uint64_t)ex[i];
        if (lt(dt, mx, x[i]))
            mx = x[i], amx = i;
        if (lt(dt, x[i], mn))
            mn = x[i];
    }
    int64_t mean = is_uns(dt) ? (int64_t)((uint64_t)wrapv(dt, sumb) / N) : wrapv(dt, sumb) / N;
    const int64_t want_red[6] = {wrapv(dt, sum), mx, mn, mean, wrapv(dt, prod), amx};
    static const char *const rn[6] = {"sum", "max", "min", "mean", "prod", "argmax"};
    for (int k = 0; k < 6; k++) {
        snprintf(what, sizeof what, "%s %s %s", tj_dtype_name(dt), how, rn[k]);
        int64_t got = elem(tj_tuple_get(res, N_BIN + k), 0);
        if (got != want_red[k])
            fprintf(stderr, "  %s: %lld, want %lld\n", what, (long long)got,
                    (long long)want_red[k]);
        CHECK_MSG(got == want_red[k], what);
    }
    tj_tensor *f = tj_tuple_get(res, N_BIN + 6), *w = tj_tuple_get(res, N_BIN + 7);
    int bad = 0;
    for (int i = 0; i < N; i++) {
        double fv = is_uns(dt) ? (double)(uint64_t)x[i] : (double)x[i];
        bad |= tj_tensor_get_f64(f, i) != fv || elem(w, i) != x[i];
    }
    snprintf(what, sizeof what, "%s %s casts out", tj_dtype_name(dt), how);
    CHECK_MSG(!bad, what);
    tj_tensor *mm = tj_tuple_get(res, N_BIN + 8);
    bad = 0;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            uint64_t acc = 0;
            for (int k = 0; k < 4; k++)
                acc += (uint64_t)x[i * 4 + k] * (uint64_t)y[k * 3 + j];
            bad |= elem(mm, i * 3 + j) != wrapv(dt, acc);
        }
    snprintf(what, sizeof what, "%s %s matmul", tj_dtype_name(dt), how);
    CHECK_MSG(!bad, what);
}

static void arith(void) {
    void *fn = tj_jit_compile((void *)all_ops, 3, &(tj_function_options){.name = "int_ops"});
    CHECK(fn != NULL);
    tj_tensor *(*f)(tj_tensor *, tj_tensor *, tj_tensor *) =
        (tj_tensor * (*)(tj_tensor *, tj_tensor *, tj_tensor *)) fn;
    for (size_t k = 0; k < sizeof DTS / sizeof *DTS; k++) {
        tj_dtype dt = DTS[k];
        tj_scope_begin();
        /* the extremes, their neighbours, -1 (all ones), small values of both signs */
        int64_t lo = smin(dt), hi = smax(dt);
        int64_t x[N] = {lo,
                        hi,
                        wrapv(dt, (uint64_t)-1),
                        0,
                        1,
                        7,
                        wrapv(dt, (uint64_t)-7),
                        wrapv(dt, (uint64_t)lo + 1),
                        wrapv(dt, (uint64_t)hi - 1),
                        100,
                        3,
                        42};
        int64_t y[N] = {wrapv(dt, (uint64_t)-1),
                        3,
                        wrapv(dt, (uint64_t)-2),
                        5,
                        hi,
                        2,
                        wrapv(dt, (uint64_t)-3),
                        7,
                        lo == 0 ? 9 : lo,
                        1,
                        wrapv(dt, (uint64_t)-4),
                        11};
        int64_t ex[N] = {0, 1, 2, 3, 5, 4, 3, 2, 1, 3, 7, 2};
        uint64_t bx[N], by[N], be[N];
        pack(dt, x, N, bx), pack(dt, y, N, by), pack(dt, ex, N, be);
        const int64_t d[1] = {N};
        tj_tensor *a = tj_tensor_from_data(dt, 1, d, bx), *b = tj_tensor_from_data(dt, 1, d, by),
                  *e = tj_tensor_from_data(dt, 1, d, be);
        check_results(dt, "eager", all_ops(a, b, e), x, y, ex);
        check_results(dt, "compiled", f(a, b, e), x, y, ex);
        tj_scope_end();
    }
    tj_jit_free(fn);
}

/* float -> narrow ints saturate (NaN -> 0), ints -> ints wrap or extend by the source's sign */
static void casts(void) {
    static const float fv[6] = {-1e10f, -129.7f, -0.9f, 200.5f, 1e20f, __builtin_nanf("")};
    const int64_t d6[1] = {6};
    struct {
        tj_dtype dt;
        int64_t want[6];
    } cases[] = {
        {TJ_I8, {-128, -128, 0, 127, 127, 0}},
        {TJ_U8, {0, 0, 0, 200, 255, 0}},
        {TJ_I16, {-32768, -129, 0, 200, 32767, 0}},
        {TJ_U16, {0, 0, 0, 200, 65535, 0}},
        {TJ_U32, {0, 0, 0, 200, 4294967295ll, 0}},
        {TJ_U64, {0, 0, 0, 200, -1 /* UINT64_MAX */, 0}},
    };
    void *fn = tj_jit_compile((void *)tj_cast, 2, &(tj_function_options){.name = "cast"});
    tj_tensor *(*f)(tj_tensor *, tj_tensor *) = (tj_tensor * (*)(tj_tensor *, tj_tensor *)) fn;
    (void)f;
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        tj_scope_begin();
        tj_tensor *x = tj_tensor_from_data(TJ_F32, 1, d6, fv);
        tj_tensor *r = tj_cast(x, cases[k].dt);
        int bad = tj_status_of(r) != TJ_OK;
        for (int i = 0; i < 6 && !bad; i++)
            bad = elem(r, i) != cases[k].want[i];
        CHECK_MSG(!bad, tj_dtype_name(cases[k].dt));
        tj_scope_end();
    }
    tj_jit_free(fn);
    /* int8 -1 -> uint16 65535 (sign-extended, wrapped); uint8 255 -> int64 255 (zero-extended);
     * uint64 max -> float32 1.8e19; int16 -300 -> uint8 212 */
    tj_scope_begin();
    const int64_t d1[1] = {1};
    int8_t m1 = -1;
    uint8_t u255 = 255;
    uint64_t umax = UINT64_MAX;
    int16_t m300 = -300;
    CHECK(elem(tj_cast(tj_tensor_from_data(TJ_I8, 1, d1, &m1), TJ_U16), 0) == 65535);
    CHECK(elem(tj_cast(tj_tensor_from_data(TJ_U8, 1, d1, &u255), TJ_I64), 0) == 255);
    CHECK(tj_tensor_get_f64(tj_cast(tj_tensor_from_data(TJ_U64, 1, d1, &umax), TJ_F32), 0) ==
          (double)(float)UINT64_MAX);
    CHECK(elem(tj_cast(tj_tensor_from_data(TJ_I16, 1, d1, &m300), TJ_U8), 0) == 212);
    tj_scope_end();
}

static tj_tensor *cast_chain(tj_tensor *x) { /* compiled: the LLVM casts */
    tj_tensor *r[4] = {tj_cast(x, TJ_U16), tj_cast(x, TJ_I64), tj_cast(x, TJ_F32),
                       tj_cast(tj_cast(x, TJ_F64), TJ_U8)};
    return tj_tuple(4, r);
}

static void compiled_casts(void) {
    void *fn = tj_jit_compile((void *)cast_chain, 1, &(tj_function_options){.name = "casts"});
    tj_tensor *(*f)(tj_tensor *) = (tj_tensor * (*)(tj_tensor *)) fn;
    tj_scope_begin();
    const int64_t d3[1] = {3};
    int8_t i8[3] = {-1, 127, -128};
    uint32_t u32[3] = {4294967295u, 7, 65536};
    tj_tensor *r = f(tj_tensor_from_data(TJ_I8, 1, d3, i8));
    CHECK(tj_status_of(r) == TJ_OK);
    CHECK(elem(tj_tuple_get(r, 0), 0) == 65535 && elem(tj_tuple_get(r, 0), 2) == 65408);
    CHECK(elem(tj_tuple_get(r, 1), 0) == -1 && elem(tj_tuple_get(r, 1), 2) == -128);
    CHECK(tj_tensor_get_f64(tj_tuple_get(r, 2), 2) == -128.0);
    CHECK(elem(tj_tuple_get(r, 3), 0) == 0 && elem(tj_tuple_get(r, 3), 1) == 127);
    r = f(tj_tensor_from_data(TJ_U32, 1, d3, u32));
    CHECK(tj_status_of(r) == TJ_OK);
    CHECK(elem(tj_tuple_get(r, 0), 0) == 65535 && elem(tj_tuple_get(r, 0), 2) == 0);
    CHECK(elem(tj_tuple_get(r, 1), 0) == 4294967295ll);
    CHECK(tj_tensor_get_f64(tj_tuple_get(r, 2), 0) == (double)4294967295.0f);
    CHECK(elem(tj_tuple_get(r, 3), 0) == 255 && elem(tj_tuple_get(r, 3), 1) == 7);
    tj_scope_end();
    tj_jit_free(fn);
}

static void printing_and_scalars(void) {
    tj_scope_begin();
    const int64_t d2[1] = {2};
    uint64_t u[2] = {UINT64_MAX, 3};
    int8_t s[2] = {-128, 5};
    CHECK(check_values_str(tj_tensor_from_data(TJ_U64, 1, d2, u), "[18446744073709551615 3]"));
    CHECK(check_values_str(tj_tensor_from_data(TJ_I8, 1, d2, s), "[-128 5]"));
    CHECK(!strcmp(tj_dtype_name(TJ_U16), "uint16") && tj_dtype_size(TJ_U16) == 2);
    /* a host scalar takes the tensor's dtype when its value fits */
    uint8_t b[2] = {250, 1};
    tj_tensor *x = tj_tensor_from_data(TJ_U8, 1, d2, b);
    tj_tensor *r = tj_add(x, tj_scalar_i32(10));
    CHECK(tj_tensor_dtype(r) == TJ_U8 && elem(r, 0) == 4 && elem(r, 1) == 11);
    /* ... and stays int32 when it does not: a dtype error naming both */
    r = tj_add(x, tj_scalar_i32(300));
    CHECK(tj_status_of(r) == TJ_ERR_DTYPE);
    CHECK_HAS(tj_error_message(r), "uint8");
    CHECK(elem(tj_zeros(TJ_U16, 1, d2), 1) == 0 && elem(tj_ones(TJ_I8, 1, d2), 0) == 1);
    tj_scope_end();
}

static void errors(void) {
    tj_scope_begin();
    const int64_t d2[1] = {2};
    uint8_t b[2] = {1, 0}, z[2] = {0, 0};
    float f[2] = {1, 2};
    tj_tensor *x = tj_tensor_from_data(TJ_U8, 1, d2, b);
    /* indices must be int32/int64 */
    tj_tensor *r = tj_gather(tj_tensor_from_data(TJ_F32, 1, d2, f), x, 0);
    CHECK(tj_status_of(r) == TJ_ERR_DTYPE);
    CHECK_HAS(tj_error_message(r), "gather: indices must be int32 or int64, got uint8");
    /* integer division by zero is an error, for every width */
    r = tj_div(x, tj_tensor_from_data(TJ_U8, 1, d2, z));
    CHECK(tj_status_of(r) == TJ_ERR_RUNTIME);
    CHECK_HAS(tj_error_message(r), "integer division by zero");
    /* float-only ops name the dtype */
    r = tj_exp(x);
    CHECK(tj_status_of(r) == TJ_ERR_DTYPE);
    CHECK_HAS(tj_error_message(r), "uint8");
    /* mixed widths do not promote implicitly */
    r = tj_add(x, tj_tensor_from_data(TJ_I8, 1, d2, b));
    CHECK(tj_status_of(r) == TJ_ERR_DTYPE);
    CHECK_HAS(tj_error_message(r), "uint8 vs int8");
    tj_scope_end();
}

int main(void) {
    arith();
    casts();
    compiled_casts();
    printing_and_scalars();
    errors();
    return check_done();
}
