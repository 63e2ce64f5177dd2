/* infer_shape.c — shape inference for the shape ops (reshape, transpose, broadcast_to,
 * expand_dims, squeeze, concat, slice, gather); ir_infer in infer.c dispatches here. Same
 * contract: fill the node's dtype/rank/dims, canonicalise attrs (perm and squeeze axes stored
 * explicitly, axes normalised), and name the op and shapes in every error. */
#include <limits.h>
#include <string.h>

#include "ir/internal.h"

#define DB 200

int64_t ir_slice_len(int64_t len, int64_t b, int64_t e, int64_t s) {
    if (s > 0) {
        b = b < 0 ? (b + len < 0 ? 0 : b + len) : (b > len ? len : b);
        e = e < 0 ? (e + len < 0 ? 0 : e + len) : (e > len ? len : e);
        return e > b ? (int64_t)((uint64_t)(e - b - 1) / (uint64_t)s) + 1 : 0;
    }
    b = b < 0 ? (b + len < -1 ? -1 : b + len) : (b > len - 1 ? len - 1 : b);
    e = e < 0 ? (e + len < -1 ? -1 : e + len) : (e > len - 1 ? len - 1 : e);
    uint64_t as = (uint64_t)0 - (uint64_t)s;
    return b > e ? (int64_t)((uint64_t)(b - e - 1) / as) + 1 : 0;
}

static tj_status reshape(ir_node *p, const ir_node *x) {
    char sx[DB], sp[DB];
    if (ir_check_shape("reshape", p->rank, p->dims, true))
        return TJ_ERR_SHAPE;
    int n_unknown = 0, at = -1;
    int64_t prod = 1; /* bounded by ir_check_shape */
    for (int k = 0; k < p->rank; k++) {
        if (p->dims[k] == -1) {
            n_unknown++;
            at = k;
        } else {
            prod *= p->dims[k];
        }
    }
    int64_t n = ir_numel(x->rank, x->dims);
    if (n_unknown > 1 && n >= 0)
        return ir_errorf(TJ_ERR_SHAPE, "reshape: at most one dimension of %s may be -1",
                         ir_fmt_dims(sp, DB, p->rank, p->dims));
    if (n >= 0) {
        if (n_unknown ? (prod == 0 || n % prod != 0) : prod != n)
            return ir_errorf(TJ_ERR_SHAPE, "reshape: cannot reshape %s (%lld elements) into %s",
                             ir_fmt_dims(sx, DB, x->rank, x->dims), (long long)n,
                             ir_fmt_dims(sp, DB, p->rank, p->dims));
        if (n_unknown)
            p->dims[at] = n / prod;
    }
    p->dtype = x->dtype;
    return TJ_OK;
}

static tj_status transpose(ir_node *p, const ir_node *x) {
    char sx[DB];
    int r = x->rank;
    if (p->a.n_list == 0) {
        for (int k = 0; k < r; k++)
            p->a.list[k] = r - 1 - k;
        p->a.n_list = (uint32_t)r;
    }
    if (p->a.n_list != (uint32_t)r)
        return ir_errorf(TJ_ERR_SHAPE, "transpose: permutation has %u entries for shape %s",
                         p->a.n_list, ir_fmt_dims(sx, DB, r, x->dims));
    bool seen[IR_MAX_RANK] = {false};
    for (int k = 0; k < r; k++) {
        if (ir_norm_axis("transpose", &p->a.list[k], r, x))
            return TJ_ERR_SHAPE;
        if (seen[p->a.list[k]])
            return ir_errorf(TJ_ERR_SHAPE, "transpose: axis %lld repeated in permutation",
                             (long long)p->a.list[k]);
        seen[p->a.list[k]] = true;
        p->dims[k] = x->dims[p->a.list[k]];
    }
    p->rank = (uint8_t)r;
    p->dtype = x->dtype;
    return TJ_OK;
}

static tj_status broadcast_to(ir_node *p, const ir_node *x) {
    char sx[DB], sp[DB];
    if (p->rank > IR_MAX_RANK)
        return ir_errorf(TJ_ERR_SHAPE, "broadcast_to: rank %d exceeds the maximum %d", p->rank,
                         IR_MAX_RANK);
    for (int k = 0; k < p->rank; k++)
        if (p->dims[k] < -1)
            return ir_errorf(TJ_ERR_SHAPE, "broadcast_to: invalid dimension %lld in target %s",
                             (long long)p->dims[k], ir_fmt_dims(sp, DB, p->rank, p->dims));
    int r;
    int64_t d[IR_MAX_RANK];
    bool ok = x->rank <= p->rank &&
              !ir_broadcast("broadcast_to", x->rank, x->dims, p->rank, p->dims, &r, d);
    for (int k = 0; ok && k < p->rank; k++) {
        if (p->dims[k] >= 0 && d[k] >= 0 && d[k] != p->dims[k])
            ok = false;
        if (p->dims[k] < 0)
            p->dims[k] = d[k];
    }
    if (!ok)
        return ir_errorf(TJ_ERR_SHAPE, "broadcast_to: cannot broadcast %s to %s",
                         ir_fmt_dims(sx, DB, x->rank, x->dims),
                         ir_fmt_dims(sp, DB, p->rank, p->dims));
    p->dtype = x->dtype;
    return TJ_OK;
}

static tj_status expand_dims(ir_node *p, const ir_node *x) {
    int r = x->rank;
    if (r + 1 > IR_MAX_RANK)
        return ir_errorf(TJ_ERR_SHAPE, "expand_dims: rank %d exceeds the maximum %d", r + 1,
                         IR_MAX_RANK);
    if (ir_norm_axis("expand_dims", &p->a.i[0], r + 1, x))
        return TJ_ERR_SHAPE;
    int64_t ax = p->a.i[0];
    for (int k = 0, o = 0; k <= r; k++)
        p->dims[k] = k == ax ? 1 : x->dims[o++];
    p->rank = (uint8_t)(r + 1);
    p->dtype = x->dtype;
    return TJ_OK;
}

static tj_status squeeze(ir_node *p, const ir_node *x) {
    char sx[DB];
    int r = x->rank;
    if (p->a.n_list > IR_MAX_LIST)
        return ir_errorf(TJ_ERR_INVALID, "squeeze: too many axes (%u)", p->a.n_list);
    if (p->a.n_list == 0) {
        for (int k = 0; k < r; k++)
            if (x->dims[k] == 1)
                p->a.list[p->a.n_list++] = k;
    } else {
        for (uint32_t k = 0; k < p->a.n_list; k++) {
            if (ir_norm_axis("squeeze", &p->a.list[k], r, x))
                return TJ_ERR_SHAPE;
            int64_t d = x->dims[p->a.list[k]];
            if (d != 1 && d != -1)
                return ir_errorf(
                    TJ_ERR_SHAPE, "squeeze: cannot squeeze axis %lld of size %lld in shape %s",
                    (long long)p->a.list[k], (long long)d, ir_fmt_dims(sx, DB, r, x->dims));
        }
        ir_sort_unique(p->a.list, &p->a.n_list);
    }
    int o = 0;
    uint32_t j = 0;
    for (int k = 0; k < r; k++) {
        if (j < p->a.n_list && p->a.list[j] == k)
            j++;
        else
            p->dims[o++] = x->dims[k];
    }
    p->rank = (uint8_t)o;
    p->dtype = x->dtype;
    return TJ_OK;
}

static tj_status concat(ir_node *p, const ir_node *const *ins, uint32_t n) {
    char s0[DB], sk[DB];
    const ir_node *x = ins[0];
    int r = x->rank;
    if (r == 0)
        return ir_errorf(TJ_ERR_SHAPE, "concat: cannot concatenate scalars (input 0 is [])");
    if (ir_norm_axis("concat", &p->a.i[0], r, x))
        return TJ_ERR_SHAPE;
    int64_t ax = p->a.i[0];
    memcpy(p->dims, x->dims, sizeof(int64_t) * r);
    for (uint32_t i = 1; i < n; i++) {
        const ir_node *y = ins[i];
        if (y->dtype != x->dtype)
            return ir_errorf(TJ_ERR_DTYPE, "concat: dtype mismatch: input 0 is %s, input %u is %s",
                             ir_dtype_name(x->dtype), i, ir_dtype_name(y->dtype));
        bool ok = y->rank == r;
        for (int k = 0; ok && k < r; k++) {
            int64_t a = p->dims[k], b = y->dims[k];
            if (k == ax) {
                if (a < 0 || b < 0)
                    p->dims[k] = -1;
                else if (__builtin_add_overflow(a, b, &p->dims[k]))
                    ok = false;
            } else if (a >= 0 && b >= 0 && a != b)
                ok = false;
            else if (a < 0)
                p->dims[k] = b;
        }
        if (!ok)
            return ir_errorf(TJ_ERR_SHAPE,
                             "concat: shapes differ outside axis %lld: input 0 is %s, input %u "
                             "is %s",
                             (long long)ax, ir_fmt_dims(s0, DB, r, x->dims), i,
                             ir_fmt_dims(sk, DB, y->rank, y->dims));
    }
    p->rank = (uint8_t)r;
    p->dtype = x->dtype;
    return TJ_OK;
}

static tj_status slice(ir_node *p, const ir_node *x) {
    char sx[DB];
    int r = x->rank;
    if (p->a.n_list != 3u * (uint32_t)r)
        return ir_errorf(TJ_ERR_SHAPE,
                         "slice: expected %d begin/end/step values for shape %s, got %u", 3 * r,
                         ir_fmt_dims(sx, DB, r, x->dims), p->a.n_list);
    for (int k = 0; k < r; k++) {
        int64_t b = p->a.list[k], e = p->a.list[r + k], s = p->a.list[2 * r + k];
        if (s == 0)
            return ir_errorf(TJ_ERR_INVALID, "slice: step of axis %d is zero", k);
        p->dims[k] = x->dims[k] < 0 ? -1 : ir_slice_len(x->dims[k], b, e, s);
    }
    p->rank = (uint8_t)r;
    p->dtype = x->dtype;
    return TJ_OK;
}

static tj_status gather(ir_node *p, const ir_node *x, const ir_node *idx) {
    char sx[DB], si[DB];
    if (!ir_dtype_is_index(idx->dtype))
        return ir_errorf(TJ_ERR_DTYPE, "gather: indices must be int32 or int64, got %s",
                         ir_dtype_name(idx->dtype));
    if (x->rank == 0)
        return ir_errorf(TJ_ERR_SHAPE, "gather: params must have rank >= 1, got []");
    if (ir_norm_axis("gather", &p->a.i[0], x->rank, x))
        return TJ_ERR_SHAPE;
    int64_t ax = p->a.i[0];
    int r = x->rank - 1 + idx->rank;
    if (r > IR_MAX_RANK)
        return ir_errorf(TJ_ERR_SHAPE, "gather: result rank %d exceeds the maximum %d (%s, %s)", r,
                         IR_MAX_RANK, ir_fmt_dims(sx, DB, x->rank, x->dims),
                         ir_fmt_dims(si, DB, idx->rank, idx->dims));
    int o = 0;
    for (int k = 0; k < ax; k++)
        p->dims[o++] = x->dims[k];
    for (int k = 0; k < idx->rank; k++)
        p->dims[o++] = idx->dims[k];
    for (int k = (int)ax + 1; k < x->rank; k++)
        p->dims[o++] = x->dims[k];
    p->rank = (uint8_t)r;
    p->dtype = x->dtype;
    return TJ_OK;
}

/* slice_grad(dy): the node's own rank and dims are the sliced tensor's; slicing them with the
 * node's begin/end/step must give dy's dims. */
static tj_status slice_grad(ir_node *p, const ir_node *dy) {
    char sx[DB], sy[DB];
    int r = p->rank;
    if (r > IR_MAX_RANK || p->a.n_list != 3u * (uint32_t)r)
        return ir_errorf(TJ_ERR_SHAPE,
                         "slice_grad: expected %d begin/end/step values for rank %d, got %u", 3 * r,
                         r, p->a.n_list);
    if (dy->dtype == TJ_STRING || dy->rank != r)
        return ir_errorf(TJ_ERR_SHAPE, "slice_grad: gradient %s%s does not fit shape %s",
                         ir_dtype_name(dy->dtype), ir_fmt_dims(sy, DB, dy->rank, dy->dims),
                         ir_fmt_dims(sx, DB, r, p->dims));
    for (int k = 0; k < r; k++) {
        int64_t b = p->a.list[k], e = p->a.list[r + k], s = p->a.list[2 * r + k];
        if (s == 0)
            return ir_errorf(TJ_ERR_INVALID, "slice_grad: step of axis %d is zero", k);
        if (p->dims[k] < 0)
            return ir_errorf(TJ_ERR_SHAPE, "slice_grad: the sliced shape %s must be known",
                             ir_fmt_dims(sx, DB, r, p->dims));
        if (dy->dims[k] >= 0 && ir_slice_len(p->dims[k], b, e, s) != dy->dims[k])
            return ir_errorf(TJ_ERR_SHAPE,
                             "slice_grad: axis %d of %s sliced gives %lld elements, the gradient "
                             "%s has %lld",
                             k, ir_fmt_dims(sx, DB, r, p->dims),
                             (long long)ir_slice_len(p->dims[k], b, e, s),
                             ir_fmt_dims(sy, DB, dy->rank, dy->dims), (long long)dy->dims[k]);
    }
    p->dtype = dy->dtype;
    return TJ_OK;
}

/* scatter_add(x, indices, updates): updates must be shaped like gather(x, indices, axis). */
static tj_status scatter_add(ir_node *p, const ir_node *const *ins) {
    const ir_node *x = ins[0], *idx = ins[1], *u = ins[2];
    char sx[DB], si[DB], su[DB];
    if (!ir_dtype_is_numeric(x->dtype) || x->dtype != u->dtype)
        return ir_errorf(TJ_ERR_DTYPE,
                         "scatter_add: x and updates must share a numeric dtype, got %s and %s",
                         ir_dtype_name(x->dtype), ir_dtype_name(u->dtype));
    ir_node want = *p;
    tj_status st = gather(&want, x, idx);
    if (st)
        return st;
    p->a.i[0] = want.a.i[0];
    bool ok = want.rank == u->rank;
    for (int k = 0; ok && k < u->rank; k++)
        ok = want.dims[k] < 0 || u->dims[k] < 0 || want.dims[k] == u->dims[k];
    if (!ok)
        return ir_errorf(TJ_ERR_SHAPE,
                         "scatter_add: updates %s do not match x %s gathered at indices %s on "
                         "axis %lld (%s)",
                         ir_fmt_dims(su, DB, u->rank, u->dims),
                         ir_fmt_dims(sx, DB, x->rank, x->dims),
                         ir_fmt_dims(si, DB, idx->rank, idx->dims), (long long)want.a.i[0],
                         ir_fmt_dims(sx, DB, want.rank, want.dims));
    p->dtype = x->dtype;
    p->rank = x->rank;
    memcpy(p->dims, x->dims, sizeof(int64_t) * x->rank);
    return TJ_OK;
}

static tj_status need_index(const char *op, const ir_node *i) {
    char s[DB];
    if ((i->dtype != TJ_I32 && i->dtype != TJ_I64) || i->rank != 0)
        return ir_errorf(TJ_ERR_DTYPE, "%s: the index must be an int32 or int64 scalar, got %s%s",
                         op, ir_dtype_name(i->dtype), ir_fmt_dims(s, DB, i->rank, i->dims));
    return TJ_OK;
}

/* update_index(x, i, v): x with row i replaced by v; read_index(x, written, i): row i. */
static tj_status row_ops(ir_node *p, const ir_node *const *ins) {
    const char *op = ir_ops[p->op].name;
    const ir_node *x = ins[0], *i = ins[p->op == IR_OP_UPDATE_INDEX ? 1 : 2];
    char sx[DB], sv[DB];
    if (x->rank < 1)
        return ir_errorf(TJ_ERR_SHAPE, "%s: needs a leading axis, got %s%s", op,
                         ir_dtype_name(x->dtype), ir_fmt_dims(sx, DB, x->rank, x->dims));
    if (need_index(op, i))
        return TJ_ERR_DTYPE;
    if (p->op == IR_OP_UPDATE_INDEX) {
        const ir_node *v = ins[2];
        bool ok = v->dtype == x->dtype && v->rank == x->rank - 1;
        for (int d = 0; ok && d < v->rank; d++)
            ok = v->dims[d] < 0 || x->dims[d + 1] < 0 || v->dims[d] == x->dims[d + 1];
        if (!ok)
            return ir_errorf(v->dtype != x->dtype ? TJ_ERR_DTYPE : TJ_ERR_SHAPE,
                             "update_index: a row of %s%s cannot be %s%s", ir_dtype_name(x->dtype),
                             ir_fmt_dims(sx, DB, x->rank, x->dims), ir_dtype_name(v->dtype),
                             ir_fmt_dims(sv, DB, v->rank, v->dims));
        p->dtype = x->dtype;
        p->rank = x->rank;
        memcpy(p->dims, x->dims, sizeof p->dims);
        return TJ_OK;
    }
    const ir_node *w = ins[1];
    if (w->dtype != TJ_BOOL || w->rank != 1 ||
        (w->dims[0] >= 0 && x->dims[0] >= 0 && w->dims[0] != x->dims[0]))
        return ir_errorf(TJ_ERR_SHAPE, "read_index: the written mask is %s%s for rows of %s",
                         ir_dtype_name(w->dtype), ir_fmt_dims(sv, DB, w->rank, w->dims),
                         ir_fmt_dims(sx, DB, x->rank, x->dims));
    p->dtype = x->dtype;
    p->rank = (uint8_t)(x->rank - 1);
    memcpy(p->dims, x->dims + 1, (size_t)p->rank * sizeof *p->dims);
    return TJ_OK;
}

/* The rules in the shape table's signature (ir_shape_rules, ir/infer.c). */
tj_status ir_shape_reshape(ir_node *p, const ir_node *const *ins, uint32_t n_in) {
    (void)n_in;
    return reshape(p, ins[0]);
}
tj_status ir_shape_transpose(ir_node *p, const ir_node *const *ins, uint32_t n_in) {
    (void)n_in;
    return transpose(p, ins[0]);
}
tj_status ir_shape_broadcast_to(ir_node *p, const ir_node *const *ins, uint32_t n_in) {
    (void)n_in;
    return broadcast_to(p, ins[0]);
}
tj_status ir_shape_expand_dims(ir_node *p, const ir_node *const *ins, uint32_t n_in) {
    (void)n_in;
    return expand_dims(p, ins[0]);
}
tj_status ir_shape_squeeze(ir_node *p, const ir_node *const *ins, uint32_t n_in) {
    (void)n_in;
    return squeeze(p, ins[0]);
}
tj_status ir_shape_concat(ir_node *p, const ir_node *const *ins, uint32_t n_in) {
    return concat(p, ins, n_in);
}
tj_status ir_shape_slice(ir_node *p, const ir_node *const *ins, uint32_t n_in) {
    (void)n_in;
    return slice(p, ins[0]);
}
tj_status ir_shape_gather(ir_node *p, const ir_node *const *ins, uint32_t n_in) {
    (void)n_in;
    return gather(p, ins[0], ins[1]);
}
tj_status ir_shape_slice_grad(ir_node *p, const ir_node *const *ins, uint32_t n_in) {
    (void)n_in;
    return slice_grad(p, ins[0]);
}
tj_status ir_shape_scatter_add(ir_node *p, const ir_node *const *ins, uint32_t n_in) {
    (void)n_in;
    return scatter_add(p, ins);
}
tj_status ir_shape_row(ir_node *p, const ir_node *const *ins, uint32_t n_in) {
    (void)n_in;
    return row_ops(p, ins);
}
