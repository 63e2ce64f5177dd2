/* binary.c — broadcasting binary elementwise kernels and WHERE. Inputs share a dtype (ir_infer
 * guarantees it); comparisons write bool. Floats follow IEEE (x/0 = inf, MAXIMUM/MINIMUM
 * propagate NaN, MOD is Python's floor mod built on fmod); integers wrap on add/sub/mul/pow
 * (unsigned arithmetic, no UB), divide truncating (DIV) or flooring (FLOORDIV, MOD as Python),
 * (unsigned widths divide and compare unsigned; every width computes in uint64 and wraps back),
 * and a zero divisor or a negative POW exponent is an error found before any output is written
 * (every divisor element is used when the output is non-empty). Strings: ADD concatenates,
 * EQ/NE compare bytes. */
#include <stdlib.h>
#include <string.h>
#include <tgmath.h>

#include "runtime/kernels/kernels.h"
#include "runtime/rt_pool.h"

#include "runtime/kernels/scalar.h"

/* ---- the broadcast loop ---------------------------------------------------------------------- */
/* Rows over all axes but the last (an iterator), then an inner loop over the last axis with each
 * operand's stride (0 when broadcast). Binds x, y (the operands' elements) for EXPR. */
typedef struct bin_plan {
    rt_k_iter it;
    int64_t len, rows, ia, ib;
} bin_plan;

static void bin_plan_init(bin_plan *p, const tj_tensor *a, const tj_tensor *b, const tj_tensor *o) {
    int64_t dims[TJ_MAX_RANK], s[2][TJ_MAX_RANK];
    memcpy(dims, o->dims, sizeof(int64_t) * (size_t)o->rank);
    rt_k_bcast_strides(o->rank, o->dims, a->rank, a->dims, s[0]);
    rt_k_bcast_strides(o->rank, o->dims, b->rank, b->dims, s[1]);
    int r = rt_k_coalesce(o->rank, dims, 2, s);
    const int64_t *st[2] = {s[0], s[1]};
    rt_k_iter_init(&p->it, r - 1, dims, 2, st, NULL);
    p->len = dims[r - 1];
    p->ia = s[0][r - 1];
    p->ib = s[1][r - 1];
    p->rows = p->len ? o->numel / p->len : 0;
}

/* The inner loop over one row, specialised for unit and zero strides (a scalar or a bias beside
 * a tensor) so that the compiler vectorizes it. */
#define BIN_ROW(TA, TO, EXPR, pa_, pb_, po_)                                                       \
    do {                                                                                           \
        if (p.ia == 1 && p.ib == 1) {                                                              \
            for (int64_t j_ = 0; j_ < p.len; j_++) {                                               \
                TA x = pa_[j_], y = pb_[j_];                                                       \
                po_[j_] = (EXPR);                                                                  \
            }                                                                                      \
        } else if (p.ia == 1 && p.ib == 0) {                                                       \
            TA y = pb_[0];                                                                         \
            for (int64_t j_ = 0; j_ < p.len; j_++) {                                               \
                TA x = pa_[j_];                                                                    \
                po_[j_] = (EXPR);                                                                  \
            }                                                                                      \
        } else if (p.ia == 0 && p.ib == 1) {                                                       \
            TA x = pa_[0];                                                                         \
            for (int64_t j_ = 0; j_ < p.len; j_++) {                                               \
                TA y = pb_[j_];                                                                    \
                po_[j_] = (EXPR);                                                                  \
            }                                                                                      \
        } else {                                                                                   \
            for (int64_t j_ = 0; j_ < p.len; j_++) {                                               \
                TA x = pa_[j_ * p.ia], y = pb_[j_ * p.ib];                                         \
                po_[j_] = (EXPR);                                                                  \
            }                                                                                      \
        }                                                                                          \
    } while (0)

#define BIN_LOOP(TA, TO, EXPR)                                                                     \
    do {                                                                                           \
        const TA *A_ = a->data, *B_ = b->data;                                                     \
        TO *O_ = out->data;                                                                        \
        for (int64_t r_ = 0; r_ < p.rows; r_++, rt_k_iter_next(&p.it)) {                           \
            const TA *pa_ = A_ + p.it.off[0], *pb_ = B_ + p.it.off[1];                             \
            TO *po_ = O_ + r_ * p.len;                                                             \
            BIN_ROW(TA, TO, EXPR, pa_, pb_, po_);                                                  \
        }                                                                                          \
        return TJ_OK;                                                                              \
    } while (0)

#define CMP_CASES(T)                                                                               \
    case IR_OP_EQ:                                                                                 \
        BIN_LOOP(T, uint8_t, x == y);                                                              \
    case IR_OP_NE:                                                                                 \
        BIN_LOOP(T, uint8_t, x != y);                                                              \
    case IR_OP_LT:                                                                                 \
        BIN_LOOP(T, uint8_t, x < y);                                                               \
    case IR_OP_LE:                                                                                 \
        BIN_LOOP(T, uint8_t, x <= y);                                                              \
    case IR_OP_GT:                                                                                 \
        BIN_LOOP(T, uint8_t, x > y);                                                               \
    case IR_OP_GE:                                                                                 \
        BIN_LOOP(T, uint8_t, x >= y)

#define FLOAT_BINARY(T, SFX)                                                                       \
    static tj_status binary_##SFX(int op, const tj_tensor *a, const tj_tensor *b, tj_tensor *out,  \
                                  bin_plan p) {                                                    \
        switch (op) {                                                                              \
        case IR_OP_ADD:                                                                            \
            BIN_LOOP(T, T, x + y);                                                                 \
        case IR_OP_SUB:                                                                            \
            BIN_LOOP(T, T, x - y);                                                                 \
        case IR_OP_MUL:                                                                            \
            BIN_LOOP(T, T, x *y);                                                                  \
        case IR_OP_DIV:                                                                            \
            BIN_LOOP(T, T, x / y);                                                                 \
        case IR_OP_FLOORDIV:                                                                       \
            BIN_LOOP(T, T, floor(x / y));                                                          \
        case IR_OP_MOD:                                                                            \
            BIN_LOOP(T, T, fmod_py_##SFX(x, y));                                                   \
        case IR_OP_POW:                                                                            \
            BIN_LOOP(T, T, pow(x, y));                                                             \
        case IR_OP_MAXIMUM:                                                                        \
            BIN_LOOP(T, T, fmax_nan_##SFX(x, y));                                                  \
        case IR_OP_MINIMUM:                                                                        \
            BIN_LOOP(T, T, fmin_nan_##SFX(x, y));                                                  \
            CMP_CASES(T);                                                                          \
        default:                                                                                   \
            return TJ_ERR_UNSUPPORTED;                                                             \
        }                                                                                          \
    }

FLOAT_BINARY(float, f32)
FLOAT_BINARY(double, f64)

#define INT_BINARY(T, U, SFX)                                                                      \
    static tj_status binary_##SFX(int op, const tj_tensor *a, const tj_tensor *b, tj_tensor *out,  \
                                  bin_plan p) {                                                    \
        switch (op) {                                                                              \
        case IR_OP_ADD: /* in uint64: a narrow U would promote to int and could overflow */        \
            BIN_LOOP(T, T, (T)(U)((uint64_t)x + (uint64_t)y));                                     \
        case IR_OP_SUB:                                                                            \
            BIN_LOOP(T, T, (T)(U)((uint64_t)x - (uint64_t)y));                                     \
        case IR_OP_MUL:                                                                            \
            BIN_LOOP(T, T, (T)(U)((uint64_t)x * (uint64_t)y));                                     \
        case IR_OP_DIV:                                                                            \
            BIN_LOOP(T, T, idiv_##SFX(x, y));                                                      \
        case IR_OP_FLOORDIV:                                                                       \
            BIN_LOOP(T, T, ifloordiv_##SFX(x, y));                                                 \
        case IR_OP_MOD:                                                                            \
            BIN_LOOP(T, T, imod_##SFX(x, y));                                                      \
        case IR_OP_POW:                                                                            \
            BIN_LOOP(T, T, ipow_##SFX(x, y));                                                      \
        case IR_OP_SHIFT_LEFT:                                                                     \
            BIN_LOOP(T, T, ishl_##SFX(x, y));                                                      \
        case IR_OP_SHIFT_RIGHT:                                                                    \
            BIN_LOOP(T, T, ishr_##SFX(x, y));                                                      \
        case IR_OP_MAXIMUM:                                                                        \
            BIN_LOOP(T, T, x > y ? x : y);                                                         \
        case IR_OP_MINIMUM:                                                                        \
            BIN_LOOP(T, T, x < y ? x : y);                                                         \
            CMP_CASES(T);                                                                          \
        default:                                                                                   \
            return TJ_ERR_UNSUPPORTED;                                                             \
        }                                                                                          \
    }

INT_BINARY(int8_t, uint8_t, i8)
INT_BINARY(int16_t, uint16_t, i16)
INT_BINARY(int32_t, uint32_t, i32)
INT_BINARY(int64_t, uint64_t, i64)

#define UINT_BINARY(T, SFX)                                                                        \
    static tj_status binary_##SFX(int op, const tj_tensor *a, const tj_tensor *b, tj_tensor *out,  \
                                  bin_plan p) {                                                    \
        switch (op) {                                                                              \
        case IR_OP_ADD:                                                                            \
            BIN_LOOP(T, T, (T)((uint64_t)x + y));                                                  \
        case IR_OP_SUB:                                                                            \
            BIN_LOOP(T, T, (T)((uint64_t)x - y));                                                  \
        case IR_OP_MUL:                                                                            \
            BIN_LOOP(T, T, (T)((uint64_t)x * y));                                                  \
        case IR_OP_DIV:                                                                            \
        case IR_OP_FLOORDIV:                                                                       \
            BIN_LOOP(T, T, (T)(x / y));                                                            \
        case IR_OP_MOD:                                                                            \
            BIN_LOOP(T, T, (T)(x % y));                                                            \
        case IR_OP_POW:                                                                            \
            BIN_LOOP(T, T, upow_##SFX(x, y));                                                      \
        case IR_OP_SHIFT_LEFT:                                                                     \
            BIN_LOOP(T, T, ushl_##SFX(x, y));                                                      \
        case IR_OP_SHIFT_RIGHT:                                                                    \
            BIN_LOOP(T, T, ushr_##SFX(x, y));                                                      \
        case IR_OP_MAXIMUM:                                                                        \
            BIN_LOOP(T, T, x > y ? x : y);                                                         \
        case IR_OP_MINIMUM:                                                                        \
            BIN_LOOP(T, T, x < y ? x : y);                                                         \
            CMP_CASES(T);                                                                          \
        default:                                                                                   \
            return TJ_ERR_UNSUPPORTED;                                                             \
        }                                                                                          \
    }

UINT_BINARY(uint8_t, u8)
UINT_BINARY(uint16_t, u16)
UINT_BINARY(uint32_t, u32)
UINT_BINARY(uint64_t, u64)

static tj_status binary_bool(int op, const tj_tensor *a, const tj_tensor *b, tj_tensor *out,
                             bin_plan p) {
    switch (op) {
    case IR_OP_LOGICAL_AND:
        BIN_LOOP(uint8_t, uint8_t, (x && y) ? 1 : 0);
    case IR_OP_LOGICAL_OR:
        BIN_LOOP(uint8_t, uint8_t, (x || y) ? 1 : 0);
    case IR_OP_MAXIMUM:
        BIN_LOOP(uint8_t, uint8_t, x > y ? x : y);
    case IR_OP_MINIMUM:
        BIN_LOOP(uint8_t, uint8_t, x < y ? x : y);
        CMP_CASES(uint8_t);
    default:
        return TJ_ERR_UNSUPPORTED;
    }
}

static tj_status binary_string(const ir_node *n, const tj_tensor *a, const tj_tensor *b,
                               tj_tensor *out, bin_plan p) {
    int op = n->op;
    if (op != IR_OP_ADD && op != IR_OP_EQ && op != IR_OP_NE)
        return TJ_ERR_UNSUPPORTED;
    const tj_string *A = a->data, *B = b->data;
    for (int64_t r = 0; r < p.rows; r++, rt_k_iter_next(&p.it)) {
        for (int64_t j = 0; j < p.len; j++) {
            const tj_string *x = A + p.it.off[0] + j * p.ia, *y = B + p.it.off[1] + j * p.ib;
            int64_t oi = r * p.len + j;
            if (op == IR_OP_ADD) {
                char *s = malloc(x->len + y->len + 1);
                if (!s)
                    return ir_errorf(TJ_ERR_OOM, "add: out of memory concatenating strings");
                if (x->len)
                    memcpy(s, x->data, x->len);
                if (y->len)
                    memcpy(s + x->len, y->data, y->len);
                s[x->len + y->len] = 0;
                tj_string *o = (tj_string *)out->data + oi;
                o->data = s;
                o->len = x->len + y->len;
            } else {
                int eq = x->len == y->len && (x->len == 0 || !memcmp(x->data, y->data, x->len));
                ((uint8_t *)out->data)[oi] = (uint8_t)(op == IR_OP_EQ ? eq : !eq);
            }
        }
    }
    return TJ_OK;
}

/* Integer DIV/FLOORDIV/MOD need a non-zero divisor; integer POW a non-negative exponent. */
static tj_status check_int_operand(const ir_node *n, const tj_tensor *b) {
    int op = n->op;
    bool is_div = op == IR_OP_DIV || op == IR_OP_FLOORDIV || op == IR_OP_MOD;
    if (!is_div && op != IR_OP_POW)
        return TJ_OK;
    for (int64_t i = 0; i < b->numel; i++) {
        int64_t v = rt_int_load(b, i);
        if (is_div && v == 0)
            return ir_errorf(TJ_ERR_RUNTIME, "%s: integer division by zero", rt_k_name(n));
        if (!is_div && v < 0 && !ir_dtype_is_unsigned(b->dtype))
            return ir_errorf(TJ_ERR_RUNTIME, "%s: negative integer exponent %lld", rt_k_name(n),
                             (long long)v);
    }
    return TJ_OK;
}

/* Large f32 arithmetic is split across the pool in chunks of about 32K elements: a coalesced
 * single row (same shapes, or a scalar beside a tensor: eager mode's optimizer updates and
 * gradient sums) by ranges of it, several rows (a bias beside activations) by whole rows, each
 * chunk's iterator set to its first row. Elementwise: each result is the serial loop's. */
enum { BIN_CHUNK = 1 << 15 };

typedef struct bin_split {
    int op;
    const tj_tensor *a, *b;
    tj_tensor *out;
    bin_plan p;
    int64_t rows_per; /* rows per chunk; 0: the one row split by ranges */
} bin_split;

static void bin_chunk(void *ctx, int64_t t) {
    const bin_split *s = ctx;
    tj_tensor a, b, o; /* headers only: the kernel reads data */
    rt_header_copy(&a, s->a);
    rt_header_copy(&b, s->b);
    rt_header_copy(&o, s->out);
    bin_plan p = s->p;
    if (!s->rows_per) {
        int64_t j0 = t * BIN_CHUNK;
        p.len = s->p.len - j0 < BIN_CHUNK ? s->p.len - j0 : BIN_CHUNK;
        a.data = (float *)a.data + j0 * s->p.ia;
        b.data = (float *)b.data + j0 * s->p.ib;
        o.data = (float *)o.data + j0;
    } else {
        int64_t r0 = t * s->rows_per, r = r0;
        p.rows = s->p.rows - r0 < s->rows_per ? s->p.rows - r0 : s->rows_per;
        for (int d = p.it.rank - 1; d >= 0; d--) { /* the iterator at row r0 */
            p.it.idx[d] = r % p.it.dims[d];
            r /= p.it.dims[d];
            for (int k = 0; k < 2; k++)
                p.it.off[k] += p.it.idx[d] * p.it.st[k][d];
        }
        o.data = (float *)o.data + r0 * p.len;
    }
    (void)binary_f32(s->op, &a, &b, &o, p);
}

/* The chunks of a split, or 0 to run serially. */
static int64_t bin_splits(int op, const tj_tensor *a, const bin_plan *p, int64_t *rows_per) {
    if (a->dtype != TJ_F32 || p->rows * p->len < 2 * BIN_CHUNK || rt_pool_size() < 2 ||
        !(op == IR_OP_ADD || op == IR_OP_SUB || op == IR_OP_MUL || op == IR_OP_DIV ||
          op == IR_OP_MAXIMUM || op == IR_OP_MINIMUM))
        return 0;
    if (p->rows == 1) {
        *rows_per = 0;
        return (p->len + BIN_CHUNK - 1) / BIN_CHUNK;
    }
    *rows_per = p->len >= BIN_CHUNK ? 1 : BIN_CHUNK / p->len;
    return (p->rows + *rows_per - 1) / *rows_per;
}

tj_status rt_k_binary(const ir_node *n, tj_tensor *const *in, tj_tensor *out) {
    const tj_tensor *a = in[0], *b = in[1];
    if (a->dtype != b->dtype)
        return ir_errorf(TJ_ERR_DTYPE, "%s: operand dtypes differ: %s vs %s", rt_k_name(n),
                         ir_dtype_name(a->dtype), ir_dtype_name(b->dtype));
    int want = (ir_ops[n->op].flags & IR_F_CMP) ? TJ_BOOL : a->dtype;
    if (out->dtype != want)
        return ir_errorf(TJ_ERR_INVALID, "%s: output dtype %s, expected %s", rt_k_name(n),
                         ir_dtype_name(out->dtype), ir_dtype_name(want));
    if (out->numel == 0)
        return TJ_OK;
    if (ir_dtype_is_int(a->dtype)) {
        tj_status st = check_int_operand(n, b);
        if (st)
            return st;
    }
    bin_plan p;
    bin_plan_init(&p, a, b, out);
    int64_t rows_per = 0, chunks = bin_splits(n->op, a, &p, &rows_per);
    if (chunks > 1) {
        bin_split sp = {n->op, a, b, out, p, rows_per};
        rt_parallel_for(chunks, bin_chunk, &sp);
        return TJ_OK;
    }
    tj_status st = TJ_ERR_UNSUPPORTED;
    switch (a->dtype) {
    case TJ_F32:
        st = binary_f32(n->op, a, b, out, p);
        break;
    case TJ_F64:
        st = binary_f64(n->op, a, b, out, p);
        break;
    case TJ_I32:
        st = binary_i32(n->op, a, b, out, p);
        break;
    case TJ_I64:
        st = binary_i64(n->op, a, b, out, p);
        break;
#define CASE(DT, SFX)                                                                              \
    case DT:                                                                                       \
        st = binary_##SFX(n->op, a, b, out, p);                                                    \
        break;
        RT_K_NARROW_INTS(CASE)
#undef CASE
    case TJ_BOOL:
        st = binary_bool(n->op, a, b, out, p);
        break;
    case TJ_STRING:
        st = binary_string(n, a, b, out, p);
        break;
    default:
        break;
    }
    return st == TJ_ERR_UNSUPPORTED ? rt_k_unsupported(n, a->dtype) : st;
}

/* where: after coalescing, rows of `len` elements with per-operand strides; a unit-stride or
 * scalar operand row selects without branches (a bool mask of random values made the branchy
 * loop mispredict half the time: relu's gradient on 1.25M elements took 9 ms), and large
 * selections are split over the pool like the arithmetic above (ranges of a single row, or whole
 * rows, each chunk's iterator set to its first row). */
typedef struct where_job {
    const ir_node *n;
    const tj_tensor *c, *a, *b;
    tj_tensor *out;
    int r;
    int64_t dims[TJ_MAX_RANK], s[3][TJ_MAX_RANK];
    int64_t len, rows, rows_per; /* rows_per 0: the single row split by ranges */
} where_job;

#define WHERE_BLEND(T, c, x, y) ((((T)0 - (T)((c) != 0)) & (x)) | (~((T)0 - (T)((c) != 0)) & (y)))
#define WHERE_ROW(T)                                                                               \
    do {                                                                                           \
        const T *pa = (const T *)w->a->data + it.off[1] + j0 * ia,                                 \
                *pb = (const T *)w->b->data + it.off[2] + j0 * ib;                                 \
        T *po = (T *)w->out->data + o;                                                             \
        if (ic == 1 && ia == 1 && ib == 1)                                                         \
            for (int64_t j = 0; j < jn; j++)                                                       \
                po[j] = WHERE_BLEND(T, pc[j], pa[j], pb[j]);                                       \
        else if (ic == 1 && ia == 1 && ib == 0) {                                                  \
            T y = pb[0];                                                                           \
            for (int64_t j = 0; j < jn; j++)                                                       \
                po[j] = WHERE_BLEND(T, pc[j], pa[j], y);                                           \
        } else if (ic == 1 && ia == 0 && ib == 1) {                                                \
            T x = pa[0];                                                                           \
            for (int64_t j = 0; j < jn; j++)                                                       \
                po[j] = WHERE_BLEND(T, pc[j], x, pb[j]);                                           \
        } else                                                                                     \
            for (int64_t j = 0; j < jn; j++)                                                       \
                po[j] = pc[j * ic] ? pa[j * ia] : pb[j * ib];                                      \
    } while (0)

/* rows [r0, r0 + nr), columns [j0, j0 + jn) of each */
static tj_status where_part(const where_job *w, int64_t r0, int64_t nr, int64_t j0, int64_t jn) {
    const int64_t *st[3] = {w->s[0], w->s[1], w->s[2]};
    rt_k_iter it;
    rt_k_iter_init(&it, w->r - 1, w->dims, 3, st, NULL);
    for (int64_t d = it.rank - 1, rr = r0; d >= 0; d--) { /* the iterator at row r0 */
        it.idx[d] = rr % it.dims[d];
        rr /= it.dims[d];
        for (int k = 0; k < 3; k++)
            it.off[k] += it.idx[d] * it.st[k][d];
    }
    int last = w->r - 1;
    int64_t ic = w->s[0][last], ia = w->s[1][last], ib = w->s[2][last];
    size_t es = ir_dtype_size(w->out->dtype);
    for (int64_t i = r0; i < r0 + nr; i++, rt_k_iter_next(&it)) {
        const uint8_t *pc = (const uint8_t *)w->c->data + it.off[0] + j0 * ic;
        int64_t o = i * w->len + j0;
        if (w->out->dtype != TJ_STRING && es == 4)
            WHERE_ROW(uint32_t);
        else if (w->out->dtype != TJ_STRING && es == 8)
            WHERE_ROW(uint64_t);
        else
            for (int64_t j = 0; j < jn; j++) {
                tj_status e =
                    pc[j * ic]
                        ? rt_k_copy_elem(w->n, w->out, o + j, w->a, it.off[1] + (j0 + j) * ia)
                        : rt_k_copy_elem(w->n, w->out, o + j, w->b, it.off[2] + (j0 + j) * ib);
                if (e)
                    return e;
            }
    }
    return TJ_OK;
}
#undef WHERE_ROW
#undef WHERE_BLEND

static void where_chunk(void *ctx, int64_t t) {
    const where_job *w = ctx;
    if (!w->rows_per) {
        int64_t j0 = t * BIN_CHUNK;
        (void)where_part(w, 0, 1, j0, w->len - j0 < BIN_CHUNK ? w->len - j0 : BIN_CHUNK);
    } else {
        int64_t r0 = t * w->rows_per;
        (void)where_part(w, r0, w->rows - r0 < w->rows_per ? w->rows - r0 : w->rows_per, 0, w->len);
    }
}

tj_status rt_k_where(const ir_node *n, tj_tensor *const *in, tj_tensor *out) {
    const tj_tensor *c = in[0], *a = in[1], *b = in[2];
    if (c->dtype != TJ_BOOL)
        return ir_errorf(TJ_ERR_DTYPE, "where: condition must be bool, got %s",
                         ir_dtype_name(c->dtype));
    if (a->dtype != b->dtype || a->dtype != out->dtype)
        return ir_errorf(TJ_ERR_DTYPE, "where: operand dtypes differ: %s vs %s",
                         ir_dtype_name(a->dtype), ir_dtype_name(b->dtype));
    if (out->numel == 0)
        return TJ_OK;
    where_job w = {.n = n, .c = c, .a = a, .b = b, .out = out};
    for (int k = 0; k < 3; k++)
        rt_k_bcast_strides(out->rank, out->dims, in[k]->rank, in[k]->dims, w.s[k]);
    memcpy(w.dims, out->dims, sizeof(int64_t) * (size_t)out->rank);
    w.r = rt_k_coalesce(out->rank, w.dims, 3, w.s);
    w.len = w.dims[w.r - 1], w.rows = w.len ? out->numel / w.len : 0;
    size_t es = ir_dtype_size(out->dtype);
    if (out->dtype == TJ_STRING || (es != 4 && es != 8) || out->numel < 2 * BIN_CHUNK ||
        rt_pool_size() < 2)
        return where_part(&w, 0, w.rows, 0, w.len);
    w.rows_per = w.rows == 1 ? 0 : w.len >= BIN_CHUNK ? 1 : BIN_CHUNK / w.len;
    rt_parallel_for(w.rows == 1 ? (w.len + BIN_CHUNK - 1) / BIN_CHUNK
                                : (w.rows + w.rows_per - 1) / w.rows_per,
                    where_chunk, &w);
    return TJ_OK;
}
