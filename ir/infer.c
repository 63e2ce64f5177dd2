/* infer.c — dtype and shape inference for every op in ops.def, on node descriptors. ir_add calls
 * it for each new node; eager execution calls it on descriptors built from tensors. Besides the
 * output dtype/dims it canonicalises attributes (axes normalised, sorted and deduplicated,
 * defaults stored explicitly, attributes the op does not use zeroed), so that equal nodes compare
 * equal field by field. Errors name the op, the argument and the shapes/dtypes. */
#include <limits.h>
#include <math.h>
#include <string.h>

#include "ir/internal.h"

#define DB 200 /* room for "[" + 8 dims of 20 chars + "]" */

enum { U_I0 = 1, U_F3 = 2, U_F2 = 4, U_LIST = 8, U_BLOB = 16, U_I1 = 32, U_I23 = 64 };

/* Which attribute fields the op reads; the rest are zeroed so that interning sees them equal. */
static unsigned attr_use(int op) {
    switch (op) {
    case IR_OP_CONST:
    case IR_OP_PRINT:
    case IR_OP_HOST_CALLBACK:
        return U_BLOB;
    case IR_OP_VAR_READ: /* i[1]: the read's version: reads after an assignment are new nodes */
        return U_I0 | U_I1;
    case IR_OP_PARAM:
    case IR_OP_ASSIGN:
    case IR_OP_ARGMAX:
    case IR_OP_ARGMIN:
    case IR_OP_SOFTMAX:
    case IR_OP_LOG_SOFTMAX:
    case IR_OP_EXPAND_DIMS:
    case IR_OP_CONCAT:
    case IR_OP_GATHER:
    case IR_OP_SCATTER_ADD:
        return U_I0;
    case IR_OP_RANGE:
        return U_F3;
    case IR_OP_RANDOM_UNIFORM:
    case IR_OP_RANDOM_NORMAL:
        return U_I0 | U_F2;
    case IR_OP_SUM:
    case IR_OP_MEAN:
    case IR_OP_MAX:
    case IR_OP_MIN:
    case IR_OP_PROD:
        return U_I0 | U_LIST;
    case IR_OP_CONV2D:
    case IR_OP_CONV2D_GRAD_INPUT:
    case IR_OP_CONV2D_GRAD_FILTER:
    case IR_OP_MAX_POOL2D:
    case IR_OP_MAX_POOL2D_GRAD:
    case IR_OP_AVG_POOL2D:
    case IR_OP_AVG_POOL2D_GRAD:
        return U_I0 | U_I1 | U_I23 | U_LIST;
    case IR_OP_ONE_HOT:
        return U_I0 | U_F2;
    case IR_OP_TRANSPOSE:
    case IR_OP_SQUEEZE:
    case IR_OP_SLICE:
    case IR_OP_SLICE_GRAD:
        return U_LIST;
    default:
        return 0;
    }
}

static void canon_attrs(ir_attrs *a, unsigned use) {
    if (!(use & U_I0))
        a->i[0] = 0;
    if (!(use & U_I1))
        a->i[1] = 0;
    if (!(use & U_I23))
        a->i[2] = a->i[3] = 0;
    int nf = (use & U_F3) ? 3 : (use & U_F2) ? 2 : 0;
    for (int k = nf; k < 3; k++)
        a->f[k] = 0;
    if (!(use & U_LIST))
        a->n_list = 0;
    for (uint32_t k = a->n_list < IR_MAX_LIST ? a->n_list : IR_MAX_LIST; k < IR_MAX_LIST; k++)
        a->list[k] = 0;
    if (!(use & U_BLOB))
        a->blob = 0;
    a->sub[0] = a->sub[1] = 0;
}

static tj_status need(const char *op, int dt, bool ok, const char *what) {
    if (ok)
        return TJ_OK;
    return ir_errorf(TJ_ERR_DTYPE, "%s: expected a %s dtype, got %s", op, what, ir_dtype_name(dt));
}
#define NEED(dt, ok, what)                                                                         \
    do {                                                                                           \
        if (need(name, dt, ok, what))                                                              \
            return TJ_ERR_DTYPE;                                                                   \
    } while (0)

static void set_like(ir_node *p, const ir_node *in, int dtype) {
    p->dtype = (uint8_t)dtype;
    p->rank = in->rank;
    memcpy(p->dims, in->dims, sizeof(int64_t) * in->rank);
}

tj_status ir_norm_axis(const char *op, int64_t *ax, int r, const ir_node *in) {
    if (*ax < -r || *ax >= r) {
        char s[DB];
        return ir_errorf(TJ_ERR_SHAPE, "%s: axis %lld out of range for shape %s", op,
                         (long long)*ax, ir_fmt_dims(s, DB, in->rank, in->dims));
    }
    if (*ax < 0)
        *ax += r;
    return TJ_OK;
}

void ir_sort_unique(int64_t *v, uint32_t *n) {
    for (uint32_t i = 1; i < *n; i++)
        for (uint32_t j = i; j > 0 && v[j - 1] > v[j]; j--) {
            int64_t t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    uint32_t m = 0;
    for (uint32_t i = 0; i < *n; i++)
        if (m == 0 || v[m - 1] != v[i])
            v[m++] = v[i];
    *n = m;
}

static tj_status infer_source(const char *name, ir_node *p) {
    int dt = p->dtype;
    if (dt >= TJ_N_DTYPES)
        return ir_errorf(TJ_ERR_DTYPE, "%s: invalid dtype %d", name, dt);
    bool unknown_ok = p->op == IR_OP_PARAM || p->op == IR_OP_VAR_READ;
    switch (p->op) {
    case IR_OP_PARAM:
    case IR_OP_VAR_READ:
        if (p->a.i[0] < 0 || p->a.i[0] > INT32_MAX)
            return ir_errorf(TJ_ERR_INVALID, "%s: invalid %s %lld", name,
                             p->op == IR_OP_PARAM ? "index" : "slot", (long long)p->a.i[0]);
        break;
    case IR_OP_EYE:
        NEED(dt, dt != TJ_STRING, "numeric or bool");
        if (p->rank != 2)
            return ir_errorf(TJ_ERR_SHAPE, "eye: expected rank 2, got rank %d", p->rank);
        break;
    case IR_OP_RANGE: {
        NEED(dt, ir_dtype_is_numeric(dt), "numeric");
        double st = p->a.f[0], li = p->a.f[1], de = p->a.f[2];
        if (!isfinite(st) || !isfinite(li) || !isfinite(de) || de == 0)
            return ir_errorf(TJ_ERR_INVALID, "range: invalid start %g, limit %g, delta %g", st, li,
                             de);
        double len = ceil((li - st) / de);
        if (!(len >= 0))
            len = 0;
        if (len > 4503599627370496.0)
            return ir_errorf(TJ_ERR_SHAPE, "range: length %g is too large", len);
        int64_t n = (int64_t)len;
        if (p->rank > 1 || (p->rank == 1 && p->dims[0] >= 0 && p->dims[0] != n))
            return ir_errorf(TJ_ERR_SHAPE, "range: shape does not match length %lld", (long long)n);
        p->rank = 1;
        p->dims[0] = n;
        break;
    }
    case IR_OP_RANDOM_UNIFORM:
        NEED(dt, ir_dtype_is_float(dt), "float");
        if (!isfinite(p->a.f[0]) || !isfinite(p->a.f[1]) || p->a.f[0] > p->a.f[1])
            return ir_errorf(TJ_ERR_INVALID,
                             "random_uniform: bounds must be finite with lo <= hi, got [%g, %g)",
                             p->a.f[0], p->a.f[1]);
        break;
    case IR_OP_RANDOM_NORMAL:
        NEED(dt, ir_dtype_is_float(dt), "float");
        if (!isfinite(p->a.f[0]) || !isfinite(p->a.f[1]) || p->a.f[1] < 0)
            return ir_errorf(TJ_ERR_INVALID,
                             "random_normal: mean must be finite and stddev finite and >= 0, got "
                             "mean %g, stddev %g",
                             p->a.f[0], p->a.f[1]);
        break;
    default:
        break;
    }
    return ir_check_shape(name, p->rank, p->dims, unknown_ok);
}

static tj_status infer_unary(const char *name, ir_node *p, const ir_node *x) {
    int dt = x->dtype, out = dt;
    switch (p->op) {
    case IR_OP_NEG:
    case IR_OP_ABS:
    case IR_OP_SIGN:
    case IR_OP_RELU:
        NEED(dt, ir_dtype_is_numeric(dt), "numeric");
        break;
    case IR_OP_LOGICAL_NOT:
        NEED(dt, dt == TJ_BOOL, "bool");
        break;
    case IR_OP_ISNAN:
    case IR_OP_ISINF:
        NEED(dt, ir_dtype_is_float(dt), "float");
        out = TJ_BOOL;
        break;
    case IR_OP_CAST:
        out = p->dtype;
        if (out >= TJ_N_DTYPES)
            return ir_errorf(TJ_ERR_DTYPE, "cast: invalid target dtype %d", out);
        if ((dt == TJ_STRING) != (out == TJ_STRING))
            return ir_errorf(TJ_ERR_DTYPE, "cast: cannot cast %s to %s", ir_dtype_name(dt),
                             ir_dtype_name(out));
        break;
    default:
        NEED(dt, ir_dtype_is_float(dt), "float");
        break;
    }
    set_like(p, x, out);
    return TJ_OK;
}

static tj_status infer_binary(const char *name, ir_node *p, const ir_node *a, const ir_node *b) {
    int dt = a->dtype;
    if (a->dtype != b->dtype)
        return ir_errorf(TJ_ERR_DTYPE, "%s: dtype mismatch: %s vs %s", name,
                         ir_dtype_name(a->dtype), ir_dtype_name(b->dtype));
    switch (p->op) {
    case IR_OP_ADD:
        NEED(dt, dt == TJ_STRING || ir_dtype_is_numeric(dt), "numeric or string");
        break;
    case IR_OP_EQ:
    case IR_OP_NE:
        break;
    case IR_OP_LOGICAL_AND:
    case IR_OP_LOGICAL_OR:
        NEED(dt, dt == TJ_BOOL, "bool");
        break;
    case IR_OP_SHIFT_LEFT:
    case IR_OP_SHIFT_RIGHT:
        NEED(dt, ir_dtype_is_int(dt), "integer");
        break;
    default:
        NEED(dt, ir_dtype_is_numeric(dt), "numeric");
        break;
    }
    int r;
    int64_t d[IR_MAX_RANK];
    if (ir_broadcast(name, a->rank, a->dims, b->rank, b->dims, &r, d))
        return TJ_ERR_SHAPE;
    p->dtype = (uint8_t)((ir_ops[p->op].flags & IR_F_CMP) ? TJ_BOOL : dt);
    p->rank = (uint8_t)r;
    memcpy(p->dims, d, sizeof(int64_t) * r);
    return TJ_OK;
}

static tj_status infer_where(ir_node *p, const ir_node *c, const ir_node *a, const ir_node *b) {
    if (c->dtype != TJ_BOOL)
        return ir_errorf(TJ_ERR_DTYPE, "where: condition must be bool, got %s",
                         ir_dtype_name(c->dtype));
    if (a->dtype != b->dtype)
        return ir_errorf(TJ_ERR_DTYPE, "where: dtype mismatch: %s vs %s", ir_dtype_name(a->dtype),
                         ir_dtype_name(b->dtype));
    int r1, r2;
    int64_t d1[IR_MAX_RANK], d2[IR_MAX_RANK];
    if (ir_broadcast("where", c->rank, c->dims, a->rank, a->dims, &r1, d1) ||
        ir_broadcast("where", r1, d1, b->rank, b->dims, &r2, d2))
        return TJ_ERR_SHAPE;
    p->dtype = a->dtype;
    p->rank = (uint8_t)r2;
    memcpy(p->dims, d2, sizeof(int64_t) * r2);
    return TJ_OK;
}

static tj_status infer_matmul(ir_node *p, const ir_node *a, const ir_node *b) {
    const char *name = "matmul";
    char sa[DB], sb[DB];
    if (a->dtype != b->dtype)
        return ir_errorf(TJ_ERR_DTYPE, "matmul: dtype mismatch: %s vs %s", ir_dtype_name(a->dtype),
                         ir_dtype_name(b->dtype));
    NEED(a->dtype, ir_dtype_is_numeric(a->dtype), "numeric");
    if (a->rank < 2 || b->rank < 2)
        return ir_errorf(TJ_ERR_SHAPE, "matmul: operands must have rank >= 2: %s x %s",
                         ir_fmt_dims(sa, DB, a->rank, a->dims),
                         ir_fmt_dims(sb, DB, b->rank, b->dims));
    int64_t k1 = a->dims[a->rank - 1], k2 = b->dims[b->rank - 2];
    if (k1 >= 0 && k2 >= 0 && k1 != k2)
        return ir_errorf(TJ_ERR_SHAPE, "matmul: inner dimensions differ: %s x %s",
                         ir_fmt_dims(sa, DB, a->rank, a->dims),
                         ir_fmt_dims(sb, DB, b->rank, b->dims));
    int r;
    int64_t d[IR_MAX_RANK];
    if (ir_broadcast("matmul", a->rank - 2, a->dims, b->rank - 2, b->dims, &r, d))
        return TJ_ERR_SHAPE;
    d[r] = a->dims[a->rank - 2];
    d[r + 1] = b->dims[b->rank - 1];
    p->dtype = a->dtype;
    p->rank = (uint8_t)(r + 2);
    memcpy(p->dims, d, sizeof(int64_t) * (r + 2));
    return TJ_OK;
}

static tj_status infer_reduce(const char *name, ir_node *p, const ir_node *x) {
    int r = x->rank;
    NEED(x->dtype, ir_dtype_is_numeric(x->dtype), "numeric");
    if (p->op == IR_OP_ARGMAX || p->op == IR_OP_ARGMIN || p->op == IR_OP_SOFTMAX ||
        p->op == IR_OP_LOG_SOFTMAX) {
        if (p->op == IR_OP_SOFTMAX || p->op == IR_OP_LOG_SOFTMAX)
            NEED(x->dtype, ir_dtype_is_float(x->dtype), "float");
        if (ir_norm_axis(name, &p->a.i[0], r, x))
            return TJ_ERR_SHAPE;
        if (p->op == IR_OP_SOFTMAX || p->op == IR_OP_LOG_SOFTMAX) {
            set_like(p, x, x->dtype);
            return TJ_OK;
        }
        int64_t ax = p->a.i[0];
        int o = 0;
        for (int k = 0; k < r; k++)
            if (k != ax)
                p->dims[o++] = x->dims[k];
        p->rank = (uint8_t)o;
        p->dtype = TJ_I64;
        return TJ_OK;
    }
    if (p->a.n_list > IR_MAX_LIST)
        return ir_errorf(TJ_ERR_INVALID, "%s: too many axes (%u)", name, p->a.n_list);
    if (p->a.n_list == 0) {
        for (int k = 0; k < r; k++)
            p->a.list[k] = k;
        p->a.n_list = (uint32_t)r;
    } else {
        for (uint32_t k = 0; k < p->a.n_list; k++)
            if (ir_norm_axis(name, &p->a.list[k], r, x))
                return TJ_ERR_SHAPE;
        ir_sort_unique(p->a.list, &p->a.n_list);
    }
    p->a.i[0] = p->a.i[0] != 0;
    bool keep = p->a.i[0];
    int o = 0;
    uint32_t j = 0;
    for (int k = 0; k < r; k++) {
        bool red = j < p->a.n_list && p->a.list[j] == k;
        if (red)
            j++;
        if (!red)
            p->dims[o++] = x->dims[k];
        else if (keep)
            p->dims[o++] = 1;
    }
    p->rank = (uint8_t)o;
    p->dtype = x->dtype;
    return TJ_OK;
}

tj_status ir_infer(ir_node *p, const ir_node *const *ins, uint32_t n_in) {
    if (!p)
        return ir_errorf(TJ_ERR_INVALID, "ir_infer: NULL node");
    if (p->op >= IR_N_OPS)
        return ir_errorf(TJ_ERR_INVALID, "ir_infer: unknown op %u", (unsigned)p->op);
    const char *name = ir_ops[p->op].name;
    if ((ir_ops[p->op].flags & IR_F_CF) || p->op == IR_OP_GET)
        return ir_errorf(TJ_ERR_INVALID, "%s: inferred against its graph (ir_infer_in_graph)",
                         name);
    int want = ir_ops[p->op].n_in;
    if (want >= 0 && n_in != (uint32_t)want)
        return ir_errorf(TJ_ERR_INVALID, "%s: expected %d inputs, got %u", name, want, n_in);
    if (p->op == IR_OP_CONCAT && n_in == 0)
        return ir_errorf(TJ_ERR_INVALID, "concat: expected at least one input");
    if (n_in && !ins)
        return ir_errorf(TJ_ERR_INVALID, "%s: NULL inputs", name);
    for (uint32_t k = 0; k < n_in; k++) {
        if (!ins[k])
            return ir_errorf(TJ_ERR_INVALID, "%s: input %u is NULL", name, k);
        if (ins[k]->dtype >= TJ_N_DTYPES)
            return ir_errorf(TJ_ERR_DTYPE, "%s: input %u has no value (dtype %s)", name, k,
                             ir_dtype_name(ins[k]->dtype));
        if (ins[k]->rank > IR_MAX_RANK)
            return ir_errorf(TJ_ERR_SHAPE, "%s: input %u has rank %d > %d", name, k, ins[k]->rank,
                             IR_MAX_RANK);
    }
    canon_attrs(&p->a, attr_use(p->op));
    unsigned fl = ir_ops[p->op].flags;
    tj_status st;
    if (fl & IR_F_SRC)
        st = infer_source(name, p);
    else if (p->op == IR_OP_WHERE)
        st = infer_where(p, ins[0], ins[1], ins[2]);
    else if ((fl & IR_F_EW) && n_in == 1)
        st = infer_unary(name, p, ins[0]);
    else if (fl & IR_F_EW)
        st = infer_binary(name, p, ins[0], ins[1]);
    else if (p->op == IR_OP_MATMUL)
        st = infer_matmul(p, ins[0], ins[1]);
    else if ((fl & IR_F_RED) || p->op == IR_OP_SOFTMAX || p->op == IR_OP_LOG_SOFTMAX)
        st = infer_reduce(name, p, ins[0]);
    else if (p->op == IR_OP_PRINT || p->op == IR_OP_HOST_CALLBACK) {
        p->dtype = IR_VOID;
        p->rank = 0;
        st = TJ_OK;
    } else if (p->op == IR_OP_ASSIGN) {
        if (p->a.i[0] < 0 || p->a.i[0] > INT32_MAX)
            return ir_errorf(TJ_ERR_INVALID, "assign: invalid slot %lld", (long long)p->a.i[0]);
        set_like(p, ins[0], ins[0]->dtype);
        st = TJ_OK;
    } else
        st = ir_infer_shape_op(p, ins, n_in);
    if (st)
        return st;
    /* one checked place for every op's element count: nothing downstream can overflow */
    if (!(fl & IR_F_SRC) && (st = ir_check_shape(name, p->rank, p->dims, true)))
        return st;
    for (int k = p->rank; k < IR_MAX_RANK; k++)
        p->dims[k] = 0;
    for (uint32_t k = p->a.n_list; k < IR_MAX_LIST; k++)
        p->a.list[k] = 0;
    return TJ_OK;
}
