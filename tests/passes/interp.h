/* interp.h — a tiny value interpreter for the ops random_graphs.c generates, so the random test
 * can compare an optimized graph's outputs with the original's bit for bit (including the sign
 * of zero and NaN payload-insensitive equality). Values are held as doubles and rounded to the
 * node's dtype after every op, the way the test evaluator folds. A node that fails (integer
 * division by zero, gather out of range) yields an error that flows to its users; dead failing
 * nodes do not matter (non-strict). This is a test oracle for the passes only: the reference
 * kernels in runtime/ are the real one. */
#ifndef TJ_INTERP_H
#define TJ_INTERP_H

#include <math.h>
#include <stdlib.h>

#include "ptest.h"

typedef struct iv {
    double *v; /* NULL: error */
    int64_t n;
} iv;

/* Rounds x to dtype dt. Integers: a cast from a float saturates (NaN -> 0), as the runtime's;
 * integer arithmetic wraps modulo 2^32 (neg(INT32_MIN) is INT32_MIN), as the kernels'. */
static inline double iround_op(int dt, double x, bool saturate) {
    switch (dt) {
    case TJ_F32:
        return (double)(float)x;
    case TJ_I32:
        if (isnan(x))
            return 0;
        x = trunc(x) + 0.0; /* an integer has no -0 */
        if (!saturate && (x > 2147483647.0 || x < -2147483648.0) && fabs(x) < 9.0e15)
            return (double)(int32_t)(uint32_t)(uint64_t)(int64_t)x;
        return x > 2147483647.0 ? 2147483647.0 : x < -2147483648.0 ? -2147483648.0 : x;
    case TJ_BOOL:
        return x != 0;
    default:
        return x;
    }
}

static inline double iround(int dt, double x) {
    return iround_op(dt, x, true);
}

/* flat index of coordinate `c` (of a shape with rank r, dims d), broadcast from `in` */
static inline int64_t iflat(int r, const int64_t *c, const ir_node *in) {
    int64_t idx = 0;
    for (int k = 0; k < in->rank; k++) {
        int64_t ck = c[r - in->rank + k];
        idx = idx * in->dims[k] + (in->dims[k] == 1 ? 0 : ck);
    }
    return idx;
}

static inline void icoord(const ir_node *n, int64_t flat, int64_t *c) {
    for (int k = n->rank - 1; k >= 0; k--) {
        c[k] = n->dims[k] ? flat % n->dims[k] : 0;
        flat = n->dims[k] ? flat / n->dims[k] : 0;
    }
}

static inline double ibin(int op, int dt, double x, double y, bool *err) {
    bool in = ir_dtype_is_int(dt);
    switch (op) {
    case IR_OP_ADD:
        return x + y;
    case IR_OP_SUB:
        return x - y;
    case IR_OP_MUL:
        return x * y;
    case IR_OP_DIV:
        if (in && y == 0)
            return *err = true, 0;
        return in ? trunc(x / y) : x / y;
    case IR_OP_FLOORDIV:
        if (in && y == 0)
            return *err = true, 0;
        return floor(x / y);
    case IR_OP_POW:
        return pow(x, y);
    /* symmetric in signed zeros (IEEE 754-2019 maximum/minimum): ir_add reorders the operands
     * of commutative ops, so a kernel must not depend on their order */
    case IR_OP_MAXIMUM:
        return isnan(x) || isnan(y) ? NAN : x == y ? (signbit(x) ? y : x) : x > y ? x : y;
    case IR_OP_MINIMUM:
        return isnan(x) || isnan(y) ? NAN : x == y ? (signbit(x) ? x : y) : x < y ? x : y;
    case IR_OP_LT:
        return x < y;
    case IR_OP_EQ:
        return x == y;
    case IR_OP_LOGICAL_AND:
        return x != 0 && y != 0;
    default:
        return *err = true, 0;
    }
}

static inline double iun(int op, double x) {
    switch (op) {
    case IR_OP_NEG:
        return -x;
    case IR_OP_ABS:
        return fabs(x);
    case IR_OP_EXP:
        return exp(x);
    case IR_OP_RELU:
        return x > 0 ? x : 0;
    case IR_OP_LOGICAL_NOT:
        return x == 0;
    case IR_OP_SIGN:
        return x > 0 ? 1 : x < 0 ? -1 : x;
    case IR_OP_CAST:
        return x;
    default:
        return NAN;
    }
}

/* Evaluates every node of g; params get values from (index, element). Returns the array. */
static inline iv *interp(const ir_graph *g) {
    iv *vals = calloc(g->n_nodes ? g->n_nodes : 1, sizeof *vals);
    int64_t c[IR_MAX_RANK], c2[IR_MAX_RANK];
    for (uint32_t id = 0; id < g->n_nodes; id++) {
        const ir_node *n = &g->nodes[id];
        const uint32_t *in = ir_inputs(g, n);
        if (n->dtype == IR_VOID)
            continue;
        int64_t numel = ir_numel(n->rank, n->dims);
        bool err = false;
        for (uint32_t k = 0; k < n->n_in; k++)
            err = err || !vals[in[k]].v;
        if (err)
            continue;
        double *o = calloc((size_t)(numel ? numel : 1), sizeof *o);
        const ir_node *a = n->n_in ? &g->nodes[in[0]] : NULL;
        const double *x = n->n_in ? vals[in[0]].v : NULL;
        for (int64_t i = 0; i < numel && !err; i++) {
            icoord(n, i, c);
            double r = 0;
            switch (n->op) {
            case IR_OP_PARAM: { /* signed zeros, NaN and inf included, to catch non-IEEE rewrites */
                static const double pv[8] = {-0.0, 1.5, 0.0, -2.0, NAN, 3.0, INFINITY, -0.5};
                r = pv[(n->a.i[0] * 3 + i) % 8];
                break;
            }
            case IR_OP_CONST:
                r = ld(n->dtype, ir_blob_get(g, n->a.blob)->data, i);
                if (n->dtype == TJ_BOOL)
                    r = ((const unsigned char *)ir_blob_get(g, n->a.blob)->data)[i];
                break;
            case IR_OP_RANDOM_UNIFORM:
                r = (double)((n->a.i[0] * 31 + i * 17) % 11) / 11.0;
                break;
            case IR_OP_WHERE: {
                const ir_node *b = &g->nodes[in[1]], *e = &g->nodes[in[2]];
                r = vals[in[0]].v[iflat(n->rank, c, a)] != 0 ? vals[in[1]].v[iflat(n->rank, c, b)]
                                                             : vals[in[2]].v[iflat(n->rank, c, e)];
                break;
            }
            case IR_OP_RESHAPE:
            case IR_OP_SQUEEZE:
            case IR_OP_EXPAND_DIMS:
                r = x[i];
                break;
            case IR_OP_BROADCAST_TO:
                r = x[iflat(n->rank, c, a)];
                break;
            case IR_OP_TRANSPOSE: {
                for (int k = 0; k < n->rank; k++)
                    c2[n->a.list[k]] = c[k];
                int64_t f = 0;
                for (int k = 0; k < a->rank; k++)
                    f = f * a->dims[k] + c2[k];
                r = x[f];
                break;
            }
            case IR_OP_SLICE: {
                int rk = n->rank;
                int64_t f = 0;
                for (int k = 0; k < rk; k++) {
                    int64_t len = a->dims[k], b = n->a.list[k], s = n->a.list[2 * rk + k];
                    if (s > 0)
                        b = b < 0 ? (b + len < 0 ? 0 : b + len) : (b > len ? len : b);
                    else
                        b = b < 0 ? (b + len < -1 ? -1 : b + len) : (b > len - 1 ? len - 1 : b);
                    f = f * len + b + c[k] * s;
                }
                r = x[f];
                break;
            }
            case IR_OP_SUM: {
                /* sum over the input elements that map to this output coordinate */
                int64_t an = ir_numel(a->rank, a->dims);
                for (int64_t j = 0; j < an; j++) {
                    icoord(a, j, c2);
                    bool match = true;
                    for (int k = 0, o2 = 0; k < a->rank; k++) {
                        bool red = false;
                        for (uint32_t q = 0; q < n->a.n_list; q++)
                            red = red || n->a.list[q] == k;
                        if (red) {
                            o2 += n->a.i[0] ? 1 : 0;
                            continue;
                        }
                        match = match && c[o2++] == c2[k];
                    }
                    if (match)
                        r = iround(n->dtype, r + x[j]);
                }
                break;
            }
            case IR_OP_GATHER: { /* axis 0 */
                const ir_node *ix = &g->nodes[in[1]];
                int64_t inner = 1;
                for (int k = 1; k < a->rank; k++)
                    inner *= a->dims[k];
                int64_t per = inner, outer = i / per, within = i % per;
                int64_t k = (int64_t)vals[in[1]].v[outer];
                (void)ix;
                if (k < 0 || k >= a->dims[0])
                    err = true;
                else
                    r = x[k * inner + within];
                break;
            }
            default:
                if (n->n_in == 1)
                    r = iun(n->op, x[i]);
                else if (n->n_in == 2) {
                    const ir_node *b = &g->nodes[in[1]];
                    r = ibin(n->op, a->dtype, x[iflat(n->rank, c, a)],
                             vals[in[1]].v[iflat(n->rank, c, b)], &err);
                }
                break;
            }
            o[i] = iround_op(n->dtype, r, n->op == IR_OP_CAST);
        }
        if (err)
            free(o);
        else
            vals[id] = (iv){o, numel};
    }
    return vals;
}

static inline void interp_free(iv *vals, uint32_t n) {
    for (uint32_t i = 0; i < n; i++)
        free(vals[i].v);
    free(vals);
}

/* Bitwise equal doubles, any NaN equal to any NaN. */
static inline bool same_value(double a, double b) {
    if (isnan(a) || isnan(b))
        return isnan(a) && isnan(b);
    return memcmp(&a, &b, sizeof a) == 0;
}

#endif
