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

/* Zeroes the attribute fields op does not use (its schema in ops.def names the ones it does), so
 * that interning sees equal nodes equal. A CONST's blob is its payload. */
static void canon_attrs(int op, ir_attrs *a) {
    bool keep_i[4] = {0}, keep_f[3] = {0}, keep_list = false, keep_blob = op == IR_OP_CONST;
    for (const ir_attr_spec *s = ir_ops[op].attrs; s->name; s++) {
        if (s->kind == IR_AK_INT)
            keep_i[s->slot] = true;
        else if (s->kind == IR_AK_FLOAT)
            keep_f[s->slot] = true;
        else if (s->kind == IR_AK_LIST || s->kind == IR_AK_LIST3)
            keep_list = true;
        else if (s->kind == IR_AK_STRING || s->kind == IR_AK_POINTER)
            keep_blob = true;
    }
    for (int k = 0; k < 4; k++)
        if (!keep_i[k])
            a->i[k] = 0;
    for (int k = 0; k < 3; k++)
        if (!keep_f[k])
            a->f[k] = 0;
    if (!keep_list)
        a->n_list = 0;
    for (uint32_t k = a->n_list < IR_MAX_LIST ? a->n_list : IR_MAX_LIST; k < IR_MAX_LIST; k++)
        a->list[k] = 0;
    if (!keep_blob)
        a->blob = 0;
    a->sub[0] = a->sub[1] = 0;
}

static tj_status need(const char *op, int dt, bool ok, const char *what) {
    if (ok)
        return TJ_OK;
    return ir_errorf(TJ_ERR_DTYPE, "%s: expected a %s dtype, got %s", op, what, ir_dtype_name(dt));
}

/* The op's dtype class (ops.def) for operand dtype dt. */
static tj_status need_class(const char *name, int op, int dt) {
    int dc = ir_ops[op].dtypes;
    return need(name, dt, ir_dtype_in_class(dt, dc), ir_dtype_class_name(dc));
}

/* The result dtype by the op's rule (ops.def) for operand dtype dt. */
static int result_dtype(const ir_node *p, int dt) {
    switch (ir_ops[p->op].result) {
    case IR_RES_BOOL:
        return TJ_BOOL;
    case IR_RES_I64:
        return TJ_I64;
    case IR_RES_NODE:
        return p->dtype;
    default:
        return dt;
    }
}

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
    if (need_class(name, p->op, dt))
        return TJ_ERR_DTYPE;
    switch (p->op) {
    case IR_OP_PARAM:
    case IR_OP_VAR_READ:
        if (p->a.i[0] < 0 || p->a.i[0] > INT32_MAX)
            return ir_errorf(TJ_ERR_INVALID, "%s: invalid %s %lld", name,
                             p->op == IR_OP_PARAM ? "index" : "slot", (long long)p->a.i[0]);
        break;
    case IR_OP_EYE:
        if (p->rank != 2)
            return ir_errorf(TJ_ERR_SHAPE, "eye: expected rank 2, got rank %d", p->rank);
        break;
    case IR_OP_RANGE: {
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
        if (!isfinite(p->a.f[0]) || !isfinite(p->a.f[1]) || p->a.f[0] > p->a.f[1])
            return ir_errorf(TJ_ERR_INVALID,
                             "random_uniform: bounds must be finite with lo <= hi, got [%g, %g)",
                             p->a.f[0], p->a.f[1]);
        break;
    case IR_OP_RANDOM_NORMAL:
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
    int dt = x->dtype, out = result_dtype(p, dt);
    if (need_class(name, p->op, dt))
        return TJ_ERR_DTYPE;
    if (p->op == IR_OP_CAST) {
        if (out >= TJ_N_DTYPES)
            return ir_errorf(TJ_ERR_DTYPE, "cast: invalid target dtype %d", out);
        if ((dt == TJ_STRING) != (out == TJ_STRING))
            return ir_errorf(TJ_ERR_DTYPE, "cast: cannot cast %s to %s", ir_dtype_name(dt),
                             ir_dtype_name(out));
    }
    set_like(p, x, out);
    return TJ_OK;
}

static tj_status infer_binary(const char *name, ir_node *p, const ir_node *a, const ir_node *b) {
    int dt = a->dtype;
    if (a->dtype != b->dtype)
        return ir_errorf(TJ_ERR_DTYPE, "%s: dtype mismatch: %s vs %s", name,
                         ir_dtype_name(a->dtype), ir_dtype_name(b->dtype));
    if (need_class(name, p->op, dt))
        return TJ_ERR_DTYPE;
    int r;
    int64_t d[IR_MAX_RANK];
    if (ir_broadcast(name, a->rank, a->dims, b->rank, b->dims, &r, d))
        return TJ_ERR_SHAPE;
    p->dtype = (uint8_t)result_dtype(p, dt);
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
    if (need_class(name, p->op, a->dtype))
        return TJ_ERR_DTYPE;
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
    if (need_class(name, p->op, x->dtype))
        return TJ_ERR_DTYPE;
    if (p->op == IR_OP_ARGMAX || p->op == IR_OP_ARGMIN || p->op == IR_OP_SOFTMAX ||
        p->op == IR_OP_LOG_SOFTMAX) {
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

/* The shape rules in the table's signature: each family's rule for one node. */
static tj_status shape_source(ir_node *p, const ir_node *const *ins, uint32_t n_in) {
    (void)ins, (void)n_in;
    return infer_source(ir_ops[p->op].name, p);
}
static tj_status shape_unary(ir_node *p, const ir_node *const *ins, uint32_t n_in) {
    (void)n_in;
    return infer_unary(ir_ops[p->op].name, p, ins[0]);
}
static tj_status shape_binary(ir_node *p, const ir_node *const *ins, uint32_t n_in) {
    (void)n_in;
    return infer_binary(ir_ops[p->op].name, p, ins[0], ins[1]);
}
static tj_status shape_where(ir_node *p, const ir_node *const *ins, uint32_t n_in) {
    (void)n_in;
    return infer_where(p, ins[0], ins[1], ins[2]);
}
static tj_status shape_matmul(ir_node *p, const ir_node *const *ins, uint32_t n_in) {
    (void)n_in;
    return infer_matmul(p, ins[0], ins[1]);
}
static tj_status shape_reduce(ir_node *p, const ir_node *const *ins, uint32_t n_in) {
    (void)n_in;
    return infer_reduce(ir_ops[p->op].name, p, ins[0]);
}
static tj_status shape_effect(ir_node *p, const ir_node *const *ins, uint32_t n_in) {
    (void)ins, (void)n_in;
    p->dtype = IR_VOID;
    p->rank = 0;
    return TJ_OK;
}
static tj_status shape_assign(ir_node *p, const ir_node *const *ins, uint32_t n_in) {
    (void)n_in;
    if (p->a.i[0] < 0 || p->a.i[0] > INT32_MAX)
        return ir_errorf(TJ_ERR_INVALID, "assign: invalid slot %lld", (long long)p->a.i[0]);
    set_like(p, ins[0], ins[0]->dtype);
    return TJ_OK;
}

/* Every op's shape rule, indexed by op; NULL for the ops inferred against their graph (control
 * flow and get: ir_infer_in_graph). tests/jit/test_op_table.c checks every op. */
const ir_shape_fn ir_shape_rules[IR_N_OPS] = {
    [IR_OP_CONST] = shape_source,
    [IR_OP_PARAM] = shape_source,
    [IR_OP_VAR_READ] = shape_source,
    [IR_OP_EYE] = shape_source,
    [IR_OP_RANGE] = shape_source,
    [IR_OP_RANDOM_UNIFORM] = shape_source,
    [IR_OP_RANDOM_NORMAL] = shape_source,
    [IR_OP_NEG] = shape_unary,
    [IR_OP_ABS] = shape_unary,
    [IR_OP_SIGN] = shape_unary,
    [IR_OP_EXP] = shape_unary,
    [IR_OP_LOG] = shape_unary,
    [IR_OP_SQRT] = shape_unary,
    [IR_OP_RSQRT] = shape_unary,
    [IR_OP_TANH] = shape_unary,
    [IR_OP_SIGMOID] = shape_unary,
    [IR_OP_RELU] = shape_unary,
    [IR_OP_SIN] = shape_unary,
    [IR_OP_COS] = shape_unary,
    [IR_OP_ATAN] = shape_unary,
    [IR_OP_ASIN] = shape_unary,
    [IR_OP_ACOS] = shape_unary,
    [IR_OP_ERF] = shape_unary,
    [IR_OP_FLOOR] = shape_unary,
    [IR_OP_CEIL] = shape_unary,
    [IR_OP_ROUND] = shape_unary,
    [IR_OP_LOGICAL_NOT] = shape_unary,
    [IR_OP_ISNAN] = shape_unary,
    [IR_OP_ISINF] = shape_unary,
    [IR_OP_CAST] = shape_unary,
    [IR_OP_ADD] = shape_binary,
    [IR_OP_SUB] = shape_binary,
    [IR_OP_MUL] = shape_binary,
    [IR_OP_DIV] = shape_binary,
    [IR_OP_FLOORDIV] = shape_binary,
    [IR_OP_MOD] = shape_binary,
    [IR_OP_POW] = shape_binary,
    [IR_OP_MAXIMUM] = shape_binary,
    [IR_OP_MINIMUM] = shape_binary,
    [IR_OP_EQ] = shape_binary,
    [IR_OP_NE] = shape_binary,
    [IR_OP_LT] = shape_binary,
    [IR_OP_LE] = shape_binary,
    [IR_OP_GT] = shape_binary,
    [IR_OP_GE] = shape_binary,
    [IR_OP_LOGICAL_AND] = shape_binary,
    [IR_OP_LOGICAL_OR] = shape_binary,
    [IR_OP_SHIFT_LEFT] = shape_binary,
    [IR_OP_SHIFT_RIGHT] = shape_binary,
    [IR_OP_WHERE] = shape_where,
    [IR_OP_MATMUL] = shape_matmul,
    [IR_OP_SUM] = shape_reduce,
    [IR_OP_MEAN] = shape_reduce,
    [IR_OP_MAX] = shape_reduce,
    [IR_OP_MIN] = shape_reduce,
    [IR_OP_PROD] = shape_reduce,
    [IR_OP_ARGMAX] = shape_reduce,
    [IR_OP_ARGMIN] = shape_reduce,
    [IR_OP_SOFTMAX] = shape_reduce,
    [IR_OP_LOG_SOFTMAX] = shape_reduce,
    [IR_OP_RESHAPE] = ir_shape_reshape,
    [IR_OP_TRANSPOSE] = ir_shape_transpose,
    [IR_OP_BROADCAST_TO] = ir_shape_broadcast_to,
    [IR_OP_EXPAND_DIMS] = ir_shape_expand_dims,
    [IR_OP_SQUEEZE] = ir_shape_squeeze,
    [IR_OP_CONCAT] = ir_shape_concat,
    [IR_OP_SLICE] = ir_shape_slice,
    [IR_OP_GATHER] = ir_shape_gather,
    [IR_OP_SLICE_GRAD] = ir_shape_slice_grad,
    [IR_OP_SCATTER_ADD] = ir_shape_scatter_add,
    [IR_OP_CONV2D] = ir_shape_conv,
    [IR_OP_CONV2D_GRAD_INPUT] = ir_shape_conv,
    [IR_OP_CONV2D_GRAD_FILTER] = ir_shape_conv,
    [IR_OP_MAX_POOL2D] = ir_shape_pool,
    [IR_OP_MAX_POOL2D_GRAD] = ir_shape_pool,
    [IR_OP_AVG_POOL2D] = ir_shape_pool,
    [IR_OP_AVG_POOL2D_GRAD] = ir_shape_pool,
    [IR_OP_ONE_HOT] = ir_shape_one_hot,
    [IR_OP_SPARSE_XENT] = ir_shape_sparse_xent,
    [IR_OP_PRINT] = shape_effect,
    [IR_OP_HOST_CALLBACK] = shape_effect,
    [IR_OP_ASSIGN] = shape_assign,
    [IR_OP_UPDATE_INDEX] = ir_shape_row,
    [IR_OP_READ_INDEX] = ir_shape_row,
};

tj_status ir_infer(ir_node *p, const ir_node *const *ins, uint32_t n_in) {
    if (!p)
        return ir_errorf(TJ_ERR_INVALID, "ir_infer: NULL node");
    if (p->op >= IR_N_OPS)
        return ir_errorf(TJ_ERR_INVALID, "ir_infer: unknown op %u", (unsigned)p->op);
    const char *name = ir_ops[p->op].name;
    if (!ir_shape_rules[p->op]) /* control flow, get */
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
    canon_attrs(p->op, &p->a);
    unsigned fl = ir_ops[p->op].flags;
    tj_status st = ir_shape_rules[p->op](p, ins, n_in);
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
