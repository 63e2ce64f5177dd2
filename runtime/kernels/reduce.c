/* reduce.c — reductions (SUM MEAN MAX MIN PROD over the axes in the node's list), ARGMAX/ARGMIN
 * and SOFTMAX/LOG_SOFTMAX along one axis. Accumulation: floats accumulate in double in input
 * order (for f32 that is far more accurate than the f32 result, so it is a good oracle; f64 sums
 * are sequential, not pairwise); integers accumulate in uint64 and wrap to their width, and MEAN
 * of integers divides that sum, truncating (TensorFlow). Empty reductions: SUM 0, PROD 1, float
 * MEAN NaN; MAX/MIN and integer MEAN have no identity and are errors. MAX/MIN/ARG* treat NaN as
 * the extreme (it propagates; ARG* return the first NaN, as NumPy). Softmax subtracts the max. */
#include <stdlib.h>

#include "runtime/kernels/kernels.h"

/* Reads the reduced-axes mask from the node; n_list == 0 means all axes if the element counts
 * differ, no axes otherwise (the two agree whenever the counts match). */
static tj_status reduce_axes(const ir_node *n, const tj_tensor *x, const tj_tensor *out,
                             bool *red) {
    memset(red, 0, sizeof(bool) * TJ_MAX_RANK);
    if (n->a.n_list > (uint32_t)x->rank)
        return ir_errorf(TJ_ERR_INVALID, "%s: %u axes for an input of rank %d", rt_k_name(n),
                         n->a.n_list, x->rank);
    for (uint32_t k = 0; k < n->a.n_list; k++) {
        int64_t ax = n->a.list[k];
        if (ax < 0 || ax >= x->rank)
            return ir_errorf(TJ_ERR_INVALID, "%s: axis %lld out of range for rank %d", rt_k_name(n),
                             (long long)ax, x->rank);
        red[ax] = true;
    }
    if (n->a.n_list == 0 && x->numel != out->numel)
        for (int d = 0; d < x->rank; d++)
            red[d] = true;
    int64_t kept = 1;
    for (int d = 0; d < x->rank; d++)
        kept *= red[d] ? 1 : x->dims[d];
    if (kept != out->numel) {
        char a[128], b[128];
        return ir_errorf(TJ_ERR_INVALID, "%s: output %s does not fit the reduction of %s",
                         rt_k_name(n), ir_fmt_dims(a, sizeof a, out->rank, out->dims),
                         ir_fmt_dims(b, sizeof b, x->rank, x->dims));
    }
    return TJ_OK;
}

static tj_status empty_error(const ir_node *n, const tj_tensor *x, const bool *red) {
    int ax = 0;
    while (ax < x->rank && !(red[ax] && x->dims[ax] == 0))
        ax++;
    char s[128];
    return ir_errorf(TJ_ERR_RUNTIME, "%s: empty reduction over axis %d of %s (no identity)",
                     rt_k_name(n), ax, ir_fmt_dims(s, sizeof s, x->rank, x->dims));
}

/* Accumulates every input element into acc[out index]; ACC(a, v) updates a with value v. */
#define REDUCE_LOOP(T, AT, ACC)                                                                    \
    do {                                                                                           \
        const T *xs_ = x->data;                                                                    \
        AT *acc_ = acc;                                                                            \
        for (int64_t i_ = 0; i_ < x->numel; i_++, rt_k_iter_next(&it)) {                           \
            AT *a_ = &acc_[it.off[0]];                                                             \
            T v = xs_[i_];                                                                         \
            ACC(*a_, v);                                                                           \
        }                                                                                          \
    } while (0)

#define ACC_SUM(a, v) a += v
#define ACC_SUMU(a, v) a += (uint64_t)(int64_t)v
#define ACC_PROD(a, v) a *= v
#define ACC_PRODU(a, v) a *= (uint64_t)(int64_t)v
#define ACC_MAXF(a, v) a = (v > a || v != v) ? v : a
#define ACC_MINF(a, v) a = (v < a || v != v) ? v : a
#define ACC_MAXI(a, v) a = v > a ? v : a
#define ACC_MINI(a, v) a = v < a ? v : a

/* Reduced axes that are adjacent once size-1 axes are dropped (ir_red_split): x is
 * [outer][len][inner] and out[o][i] reduces x[o][0..len][i]. Then OLI_LOOP reads x in order with
 * a unit-stride inner loop (the iterator's per-element step cost 3 ns: a bias gradient over
 * [50,28,28,32] took 3.9 ms); every output still accumulates in input order, so the values are
 * REDUCE_LOOP's. */
#define OLI_LOOP(T, AT, ACC)                                                                       \
    do {                                                                                           \
        const T *xs_ = x->data;                                                                    \
        for (int64_t o_ = 0; o_ < outer; o_++)                                                     \
            for (int64_t l_ = 0; l_ < len; l_++) {                                                 \
                const T *row_ = xs_ + (o_ * len + l_) * inner;                                     \
                AT *a_ = (AT *)acc + o_ * inner;                                                   \
                for (int64_t i_ = 0; i_ < inner; i_++)                                             \
                    ACC(a_[i_], (AT)row_[i_]);                                                     \
            }                                                                                      \
    } while (0)

static void reduce_float(int op, const tj_tensor *x, rt_k_iter it, double *acc, int64_t m,
                         const bool *red) {
    double init = op == IR_OP_PROD  ? 1
                  : op == IR_OP_MAX ? -INFINITY
                  : op == IR_OP_MIN ? INFINITY
                                    : 0;
    for (int64_t i = 0; i < m; i++)
        acc[i] = init;
    int64_t outer, len, inner;
    bool oli = ir_red_split(x->rank, x->dims, red, &outer, &len, &inner) && outer * inner == m;
#define FLOAT_CASES(T, LOOP)                                                                       \
    switch (op) {                                                                                  \
    case IR_OP_PROD:                                                                               \
        LOOP(T, double, ACC_PROD);                                                                 \
        break;                                                                                     \
    case IR_OP_MAX:                                                                                \
        LOOP(T, double, ACC_MAXF);                                                                 \
        break;                                                                                     \
    case IR_OP_MIN:                                                                                \
        LOOP(T, double, ACC_MINF);                                                                 \
        break;                                                                                     \
    default:                                                                                       \
        LOOP(T, double, ACC_SUM);                                                                  \
        break;                                                                                     \
    }
    if (x->dtype == TJ_F32 && oli) {
        FLOAT_CASES(float, OLI_LOOP)
    } else if (x->dtype == TJ_F32) {
        FLOAT_CASES(float, REDUCE_LOOP)
    } else if (oli) {
        FLOAT_CASES(double, OLI_LOOP)
    } else {
        FLOAT_CASES(double, REDUCE_LOOP)
    }
#undef FLOAT_CASES
}

static void reduce_int(int op, const tj_tensor *x, rt_k_iter it, void *acc, int64_t m) {
    uint64_t *u = acc;
    int64_t *s = acc;
    for (int64_t i = 0; i < m; i++) {
        if (op == IR_OP_MAX)
            s[i] = INT64_MIN;
        else if (op == IR_OP_MIN)
            s[i] = INT64_MAX;
        else
            u[i] = op == IR_OP_PROD;
    }
#define INT_CASES(T)                                                                               \
    switch (op) {                                                                                  \
    case IR_OP_PROD:                                                                               \
        REDUCE_LOOP(T, uint64_t, ACC_PRODU);                                                       \
        break;                                                                                     \
    case IR_OP_MAX:                                                                                \
        REDUCE_LOOP(T, int64_t, ACC_MAXI);                                                         \
        break;                                                                                     \
    case IR_OP_MIN:                                                                                \
        REDUCE_LOOP(T, int64_t, ACC_MINI);                                                         \
        break;                                                                                     \
    default:                                                                                       \
        REDUCE_LOOP(T, uint64_t, ACC_SUMU);                                                        \
        break;                                                                                     \
    }
    if (x->dtype == TJ_I32) {
        INT_CASES(int32_t)
    } else if (x->dtype == TJ_I64) {
        INT_CASES(int64_t)
    } else { /* the other widths, read widened; only uint64 exceeds int64's range */
        bool u64 = x->dtype == TJ_U64;
        if (u64 && (op == IR_OP_MAX || op == IR_OP_MIN))
            for (int64_t i = 0; i < m; i++)
                u[i] = op == IR_OP_MAX ? 0 : UINT64_MAX;
        for (int64_t i = 0; i < x->numel; i++, rt_k_iter_next(&it)) {
            int64_t v = rt_int_load(x, i), *a = &s[it.off[0]];
            uint64_t *au = &u[it.off[0]];
            if (op == IR_OP_PROD)
                *au *= (uint64_t)v;
            else if (op == IR_OP_MAX)
                *a = (u64 ? (uint64_t)v > *au : v > *a) ? v : *a;
            else if (op == IR_OP_MIN)
                *a = (u64 ? (uint64_t)v < *au : v < *a) ? v : *a;
            else
                *au += (uint64_t)v;
        }
    }
#undef INT_CASES
}

tj_status rt_k_reduce(const ir_node *n, const tj_tensor *x, tj_tensor *out) {
    int op = n->op, dt = x->dtype;
    if (!ir_dtype_is_numeric(dt))
        return rt_k_unsupported(n, dt);
    if (out->dtype != dt)
        return ir_errorf(TJ_ERR_INVALID, "%s: output dtype %s, expected %s", rt_k_name(n),
                         ir_dtype_name(out->dtype), ir_dtype_name(dt));
    bool red[TJ_MAX_RANK];
    tj_status st = reduce_axes(n, x, out, red);
    if (st)
        return st;
    int64_t count = 1;
    for (int d = 0; d < x->rank; d++)
        count *= red[d] ? x->dims[d] : 1;
    int64_t m = out->numel;
    if (m == 0)
        return TJ_OK;
    bool no_identity =
        op == IR_OP_MAX || op == IR_OP_MIN || (op == IR_OP_MEAN && ir_dtype_is_int(dt));
    if (count == 0 && no_identity)
        return empty_error(n, x, red);

    /* Output offsets of input elements: kept axes in the output's row-major order, 0 for
     * reduced axes (keepdims only inserts size-1 axes, which do not change offsets). */
    int64_t ostr[TJ_MAX_RANK], s = 1;
    for (int d = x->rank - 1; d >= 0; d--) {
        ostr[d] = red[d] ? 0 : s;
        s *= red[d] ? 1 : x->dims[d];
    }
    rt_k_iter it;
    const int64_t *strides[1] = {ostr};
    rt_k_iter_init(&it, x->rank, x->dims, 1, strides, NULL);
    void *acc = malloc((size_t)m * 8);
    if (!acc)
        return ir_errorf(TJ_ERR_OOM, "%s: out of memory", rt_k_name(n));

    if (ir_dtype_is_float(dt)) {
        reduce_float(op, x, it, acc, m, red);
        double *a = acc;
        for (int64_t i = 0; i < m; i++) {
            double v = a[i];
            if (op == IR_OP_MEAN)
                v = count ? v / (double)count : NAN;
            rt_k_store_f64(out, i, v);
        }
    } else {
        reduce_int(op, x, it, acc, m);
        const uint64_t *u = acc;
        for (int64_t i = 0; i < m; i++) {
            /* wrap to the dtype's width first: the sum TF computes in that type */
            int64_t v = rt_int_wrap(dt, (int64_t)u[i]);
            if (op == IR_OP_MEAN) /* count > 0 here */
                v = dt == TJ_U64 ? (int64_t)((uint64_t)v / (uint64_t)count) : v / count;
            rt_int_store(out, i, v);
        }
    }
    free(acc);
    return TJ_OK;
}

/* ---- one-axis ops: outer x N x inner views ----------------------------------------------------
 */
static tj_status axis_split(const ir_node *n, const tj_tensor *x, int64_t *outer, int64_t *len,
                            int64_t *inner) {
    int64_t ax = n->a.i[0];
    if (ax < 0 || ax >= x->rank) {
        char s[128];
        return ir_errorf(TJ_ERR_INVALID, "%s: axis %lld out of range for input %s", rt_k_name(n),
                         (long long)ax, ir_fmt_dims(s, sizeof s, x->rank, x->dims));
    }
    *outer = *inner = 1;
    for (int d = 0; d < ax; d++)
        *outer *= x->dims[d];
    for (int d = (int)ax + 1; d < x->rank; d++)
        *inner *= x->dims[d];
    *len = x->dims[ax];
    return TJ_OK;
}

#define ARG_LOOP(T, IS_NAN)                                                                        \
    do {                                                                                           \
        const T *xs_ = x->data;                                                                    \
        for (int64_t o_ = 0; o_ < outer; o_++)                                                     \
            for (int64_t j_ = 0; j_ < inner; j_++) {                                               \
                const T *p_ = xs_ + o_ * len * inner + j_;                                         \
                T best = p_[0];                                                                    \
                int64_t bi = 0;                                                                    \
                for (int64_t k_ = 1; k_ < len && !(IS_NAN(best)); k_++) {                          \
                    T v = p_[k_ * inner];                                                          \
                    if ((IS_NAN(v)) || (is_max ? v > best : v < best))                             \
                        best = v, bi = k_;                                                         \
                }                                                                                  \
                res[o_ * inner + j_] = bi;                                                         \
            }                                                                                      \
    } while (0)
#define NOT_NAN(v) 0

tj_status rt_k_arg(const ir_node *n, const tj_tensor *x, tj_tensor *out) {
    if (out->dtype != TJ_I64)
        return rt_k_unsupported(n, out->dtype);
    int64_t outer, len, inner;
    tj_status st = axis_split(n, x, &outer, &len, &inner);
    if (st)
        return st;
    if (outer * inner != out->numel)
        return ir_errorf(TJ_ERR_INVALID, "%s: output has %lld elements, expected %lld",
                         rt_k_name(n), (long long)out->numel, (long long)(outer * inner));
    if (out->numel == 0)
        return TJ_OK;
    if (len == 0) {
        char s[128];
        return ir_errorf(TJ_ERR_RUNTIME, "%s: empty reduction over axis %lld of %s", rt_k_name(n),
                         (long long)n->a.i[0], ir_fmt_dims(s, sizeof s, x->rank, x->dims));
    }
    int is_max = n->op == IR_OP_ARGMAX;
    int64_t *res = out->data;
    switch (x->dtype) {
    case TJ_F32:
        ARG_LOOP(float, isnan);
        break;
    case TJ_F64:
        ARG_LOOP(double, isnan);
        break;
    case TJ_I32:
        ARG_LOOP(int32_t, NOT_NAN);
        break;
    case TJ_I64:
        ARG_LOOP(int64_t, NOT_NAN);
        break;
    case TJ_BOOL:
    case TJ_U8:
        ARG_LOOP(uint8_t, NOT_NAN);
        break;
    case TJ_I8:
        ARG_LOOP(int8_t, NOT_NAN);
        break;
    case TJ_I16:
        ARG_LOOP(int16_t, NOT_NAN);
        break;
    case TJ_U16:
        ARG_LOOP(uint16_t, NOT_NAN);
        break;
    case TJ_U32:
        ARG_LOOP(uint32_t, NOT_NAN);
        break;
    case TJ_U64:
        ARG_LOOP(uint64_t, NOT_NAN);
        break;
    default:
        return rt_k_unsupported(n, x->dtype);
    }
    return TJ_OK;
}

/* Softmax in double: m = max, e_k = exp(x_k - m), softmax = e_k / sum e, log_softmax =
 * (x_k - m) - log(sum e). */
tj_status rt_k_softmax(const ir_node *n, const tj_tensor *x, tj_tensor *out) {
    if (!ir_dtype_is_float(x->dtype) || out->dtype != x->dtype)
        return rt_k_unsupported(n, x->dtype);
    int64_t outer, len, inner;
    tj_status st = axis_split(n, x, &outer, &len, &inner);
    if (st)
        return st;
    if (out->numel != x->numel)
        return ir_errorf(TJ_ERR_INVALID, "%s: output size differs from input", rt_k_name(n));
    bool is_log = n->op == IR_OP_LOG_SOFTMAX;
    bool f32 = x->dtype == TJ_F32;
#define AT(k)                                                                                      \
    (f32 ? (double)((const float *)x->data)[base + (k)*inner]                                      \
         : ((const double *)x->data)[base + (k)*inner])
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t j = 0; j < inner; j++) {
            int64_t base = o * len * inner + j;
            double m = -INFINITY;
            for (int64_t k = 0; k < len; k++) {
                double v = AT(k);
                if (v > m || v != v)
                    m = v;
                if (m != m)
                    break;
            }
            double sum = 0;
            for (int64_t k = 0; k < len; k++)
                sum += exp(AT(k) - m);
            double lsum = log(sum);
            for (int64_t k = 0; k < len; k++) {
                double v = AT(k) - m;
                rt_k_store_f64(out, base + k * inner, is_log ? v - lsum : exp(v) / sum);
            }
        }
    }
#undef AT
    return TJ_OK;
}
