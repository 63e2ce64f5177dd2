/* ops_shape.c — ONNX's shape ops as tracejit ops: Reshape, Flatten, Transpose, Concat, Squeeze,
 * Unsqueeze, Expand, Gather, Cast, Constant, ConstantOfShape, Shape, Size, Range, Slice, Split,
 * Tile, Dropout (inference). Values that decide a shape (Reshape's target, Slice's starts, the
 * axes inputs from opset 13) are read when known at trace time (ox_host_ints). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ---- shapes ------------------------------------------------------------------------------------
 */
CONV(c_reshape) {
    tj_tensor *x = in[0];
    int64_t *v = NULL, dims[TJ_MAX_RANK];
    int64_t cnt;
    if (n->opset < 5) {
        const int64_t *a;
        cnt = (int64_t)ox_attr_ints(n, "shape", &a);
        v = ox_dup_ints(a, cnt);
    } else if ((cnt = ox_host_ints(n, in[1], "shape", &v)) < 0) {
        return TJ_ERR_UNSUPPORTED;
    }
    if (cnt > TJ_MAX_RANK) {
        free(v);
        return ox_fail(n, TJ_ERR_UNSUPPORTED, "a target of rank %lld", (long long)cnt);
    }
    int allowzero = (int)ox_attr_i(n, "allowzero", 0);
    for (int64_t d = 0; d < cnt; d++)
        dims[d] = v[d] == 0 && !allowzero && d < tj_tensor_rank(x) ? tj_tensor_dims(x)[d] : v[d];
    free(v);
    return one(out, tj_reshape(x, (int)cnt, dims));
}

CONV(c_flatten) {
    tj_tensor *x = in[0];
    int rank = tj_tensor_rank(x);
    int64_t a = ox_attr_i(n, "axis", 1);
    if (a < 0)
        a += rank;
    if (a < 0 || a > rank)
        return ox_fail(n, TJ_ERR_SHAPE, "axis out of range for rank %d", rank);
    int64_t dims[2] = {1, 1};
    for (int d = 0; d < rank; d++)
        dims[d < a ? 0 : 1] *= tj_tensor_dims(x)[d];
    return one(out, tj_reshape(x, 2, dims));
}

CONV(c_transpose) {
    tj_tensor *x = in[0];
    const int64_t *p;
    size_t np = ox_attr_ints(n, "perm", &p);
    if (!np)
        return one(out, tj_transpose(x, NULL));
    int perm[TJ_MAX_RANK];
    if (np != (size_t)tj_tensor_rank(x))
        return ox_fail(n, TJ_ERR_SHAPE, "perm has %zu entries for rank %d", np, tj_tensor_rank(x));
    for (size_t k = 0; k < np; k++)
        perm[k] = (int)p[k];
    return one(out, tj_transpose(x, perm));
}

CONV(c_concat) {
    int rank = tj_tensor_rank(in[0]), axis = axis_of(ox_attr_i(n, "axis", 0), rank);
    if (axis < 0)
        return ox_fail(n, TJ_ERR_SHAPE, "axis out of range for rank %d", rank);
    return one(out, tj_concat(n_in, in, axis));
}

/* Squeeze / Unsqueeze axes: the attribute, or from opset 13 the second input. */
static int64_t axes_of(const ox_node *n, int n_in, tj_tensor *const *in, int64_t **v) {
    if (n->opset >= 13) {
        if (n_in < 2 || !in[1]) {
            *v = NULL;
            return 0;
        }
        return ox_host_ints(n, in[1], "axes", v);
    }
    const int64_t *a;
    int64_t cnt = (int64_t)ox_attr_ints(n, "axes", &a);
    *v = ox_dup_ints(a, cnt);
    return cnt;
}

CONV(c_squeeze) {
    tj_tensor *x = in[0];
    int64_t *v = NULL, cnt = axes_of(n, n_in, in, &v);
    if (cnt < 0)
        return TJ_ERR_UNSUPPORTED;
    int axes[TJ_MAX_RANK], rank = tj_tensor_rank(x);
    if (cnt > rank) {
        free(v);
        return ox_fail(n, TJ_ERR_SHAPE, "%lld axes for rank %d", (long long)cnt, rank);
    }
    for (int64_t k = 0; k < cnt; k++)
        if ((axes[k] = axis_of(v[k], rank)) < 0) {
            free(v);
            return ox_fail(n, TJ_ERR_SHAPE, "axis out of range for rank %d", rank);
        }
    free(v);
    return one(out, tj_squeeze(x, (int)cnt, axes));
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

CONV(c_unsqueeze) {
    tj_tensor *x = in[0];
    int64_t *v = NULL, cnt = axes_of(n, n_in, in, &v);
    if (cnt < 0)
        return TJ_ERR_UNSUPPORTED;
    if (cnt > TJ_MAX_RANK) {
        free(v);
        return ox_fail(n, TJ_ERR_SHAPE, "%lld axes", (long long)cnt);
    }
    int out_rank = tj_tensor_rank(x) + (int)cnt;
    for (int64_t k = 0; k < cnt; k++)
        if (v[k] < -out_rank || v[k] >= out_rank) {
            long long bad = (long long)v[k];
            free(v);
            return ox_fail(n, TJ_ERR_SHAPE, "axis %lld out of range for rank %d", bad, out_rank);
        } else if (v[k] < 0) {
            v[k] += out_rank;
        }
    if (cnt)
        qsort(v, (size_t)cnt, sizeof *v, cmp_i64);
    for (int64_t k = 0; k < cnt; k++)
        x = tj_expand_dims(x, (int)v[k]);
    free(v);
    return one(out, cnt ? x : tj_add(x, like(x, 0)));
}

/* Expand: NumPy broadcasting of x and the target shape, both ways. */
CONV(c_expand) {
    tj_tensor *x = in[0];
    int64_t *v = NULL, cnt = ox_host_ints(n, in[1], "shape", &v);
    if (cnt < 0)
        return TJ_ERR_UNSUPPORTED;
    if (cnt > TJ_MAX_RANK) {
        free(v);
        return ox_fail(n, TJ_ERR_SHAPE, "a target of rank %lld", (long long)cnt);
    }
    int rank = tj_tensor_rank(x), r = cnt > rank ? (int)cnt : rank;
    int64_t dims[TJ_MAX_RANK];
    for (int d = 0; d < r && r <= TJ_MAX_RANK; d++) {
        int64_t a = d - (r - rank) >= 0 ? tj_tensor_dims(x)[d - (r - rank)] : 1;
        int64_t b = d - (r - (int)cnt) >= 0 ? v[d - (r - (int)cnt)] : 1;
        dims[d] = a == 1 ? b : a;
    }
    free(v);
    return one(out, tj_broadcast_to(x, r, dims));
}

CONV(c_gather) {
    tj_tensor *x = in[0], *idx = in[1];
    int rank = tj_tensor_rank(x), axis = axis_of(ox_attr_i(n, "axis", 0), rank);
    if (axis < 0)
        return ox_fail(n, TJ_ERR_SHAPE, "axis out of range for rank %d", rank);
    /* negative indices count from the end of the axis */
    tj_tensor *dim = tj_cast(tj_scalar_i64(tj_tensor_dims(x)[axis]), tj_tensor_dtype(idx));
    idx = tj_where(tj_less(idx, like(idx, 0)), tj_add(idx, dim), idx);
    return one(out, tj_gather(x, idx, axis));
}

/* GatherND as one gather: data's batch dims and its first m indexed dims are flattened into one
 * axis, and each index tuple (the last axis of indices, negative from the end) becomes its
 * position there: batch position * prod(indexed dims) + sum_j idx_j * stride_j. */
CONV(c_gather_nd) {
    (void)n_in, (void)n_out;
    tj_tensor *x = in[0], *idx = tj_cast(in[1], TJ_I64);
    int r = tj_tensor_rank(x), q = tj_tensor_rank(idx);
    int64_t b = ox_attr_i(n, "batch_dims", 0);
    int64_t m = q > 0 ? tj_tensor_dims(idx)[q - 1] : -1;
    if (tj_status_of(x) || tj_status_of(idx))
        return one(out, tj_status_of(x) ? x : idx);
    if (q < 1 || b < 0 || b >= q || b >= r || m < 1 || b + m > r)
        return ox_fail(n, TJ_ERR_SHAPE,
                       "indices of rank %d (last dim %lld) and batch_dims %lld for data of rank %d",
                       q, (long long)m, (long long)b, r);
    const int64_t *xd = tj_tensor_dims(x), *id = tj_tensor_dims(idx);
    for (int64_t k = 0; k < b; k++)
        if (xd[k] != id[k])
            return ox_fail(n, TJ_ERR_SHAPE, "batch dim %lld: data has %lld, indices %lld",
                           (long long)k, (long long)xd[k], (long long)id[k]);
    int64_t block = 1, batch = 1, flat_dims[TJ_MAX_RANK], nf = 0;
    for (int64_t k = 0; k < b; k++)
        batch *= xd[k];
    for (int64_t k = b; k < b + m; k++)
        block *= xd[k];
    tj_tensor *pos = NULL;
    int64_t stride = 1;
    for (int64_t j = m - 1; j >= 0; j--) { /* the index tuple's position inside one batch */
        int64_t bg[TJ_MAX_RANK] = {0}, en[TJ_MAX_RANK];
        memcpy(en, id, (size_t)q * sizeof *en);
        bg[q - 1] = j, en[q - 1] = j + 1;
        int64_t sd[TJ_MAX_RANK];
        memcpy(sd, id, (size_t)(q - 1) * sizeof *sd);
        tj_tensor *ij = tj_reshape(tj_slice(idx, bg, en, NULL), q - 1, sd);
        ij = tj_where(tj_less(ij, tj_scalar_i64(0)), tj_add(ij, tj_scalar_i64(xd[b + j])), ij);
        tj_tensor *term = tj_mul(ij, tj_scalar_i64(stride));
        pos = pos ? tj_add(pos, term) : term;
        stride *= xd[b + j];
    }
    if (b > 0) { /* + the batch position times the block */
        int64_t bd[TJ_MAX_RANK];
        for (int k = 0; k < q - 1; k++)
            bd[k] = k < b ? id[k] : 1;
        tj_tensor *bpos = tj_reshape(tj_range(TJ_I64, 0, (double)batch, 1), q - 1, bd);
        pos = tj_add(pos, tj_mul(bpos, tj_scalar_i64(block)));
    }
    flat_dims[nf++] = batch * block;
    for (int k = (int)(b + m); k < r; k++)
        flat_dims[nf++] = xd[k];
    tj_tensor *y = tj_gather(tj_reshape(x, (int)nf, flat_dims), pos, 0);
    return one(out, y);
}

CONV(c_cast) {
    int64_t to = ox_attr_i(n, "to", 0);
    int dt = ox_dtype((int32_t)to);
    if (dt < 0)
        return ox_fail(n, TJ_ERR_UNSUPPORTED, "cast to ONNX element type %lld", (long long)to);
    return one(out, tj_cast(in[0], (tj_dtype)dt));
}

CONV(c_constant) {
    const Onnx__AttributeProto *a;
    if ((a = ox_attr(n, "value")) && a->t)
        return one(out, ox_tensor(a->t, "the constant"));
    if ((a = ox_attr(n, "value_float")))
        return one(out, tj_tensor_from_data(TJ_F32, 0, NULL, &a->f));
    if ((a = ox_attr(n, "value_int")))
        return one(out, tj_tensor_from_data(TJ_I64, 0, NULL, &a->i));
    if ((a = ox_attr(n, "value_floats"))) {
        int64_t d = (int64_t)a->n_floats;
        return one(out, tj_tensor_from_data(TJ_F32, 1, &d, a->floats));
    }
    if ((a = ox_attr(n, "value_ints"))) {
        int64_t d = (int64_t)a->n_ints;
        return one(out, tj_tensor_from_data(TJ_I64, 1, &d, a->ints));
    }
    return ox_fail(n, TJ_ERR_UNSUPPORTED, "a constant of a kind tracejit lacks (strings, sparse)");
}

CONV(c_constant_of_shape) {
    int64_t *v = NULL, cnt = ox_host_ints(n, in[0], "shape", &v);
    if (cnt < 0)
        return TJ_ERR_UNSUPPORTED;
    const Onnx__AttributeProto *a = ox_attr(n, "value");
    tj_tensor *val = a && a->t ? ox_tensor(a->t, "the value")
                               : tj_tensor_from_data(TJ_F32, 0, NULL, &(float){0});
    if (tj_tensor_rank(val) != 0)
        val = tj_reshape(val, 0, NULL);
    tj_tensor *r = tj_fill((int)cnt, v, val);
    free(v);
    return one(out, r);
}

/* Shape (start and end from opset 15): known when traced, a constant. */
CONV(c_shape) {
    tj_tensor *x = in[0];
    int rank = tj_tensor_rank(x);
    if (tj_status_of(x) || rank < 0) /* an error flows on */
        return one(out, tj_add(x, x));
    int64_t s = ox_attr_i(n, "start", 0), e = ox_attr_i(n, "end", rank);
    s = s < 0 ? s + rank : s, e = e < 0 ? e + rank : e;
    s = s < 0 ? 0 : s > rank ? rank : s, e = e < 0 ? 0 : e > rank ? rank : e;
    int64_t len = e > s ? e - s : 0;
    return one(out, tj_tensor_from_data(TJ_I64, 1, &len, tj_tensor_dims(x) + s));
}

CONV(c_size) {
    int64_t v = tj_tensor_numel(in[0]);
    return one(out, tj_tensor_from_data(TJ_I64, 0, NULL, &v));
}

CONV(c_range) {
    for (int k = 0; k < 3; k++)
        if (tj_tensor_is_symbolic(in[k]))
            return ox_fail(n, TJ_ERR_UNSUPPORTED,
                           "input %d is computed from the model's inputs; Range needs it known "
                           "when traced",
                           k);
    double s = tj_tensor_get_f64(in[0], 0), l = tj_tensor_get_f64(in[1], 0),
           d = tj_tensor_get_f64(in[2], 0);
    return one(out, tj_range(tj_tensor_dtype(in[0]), s, l, d));
}

/* Slice: attributes before opset 10, inputs from 10 (starts, ends, axes, steps). */
CONV(c_slice) {
    tj_tensor *x = in[0];
    int rank = tj_tensor_rank(x);
    int64_t *st = NULL, *en = NULL, *ax = NULL, *sp = NULL, ns, ne, na = -1, nst = -1;
    if (n->opset < 10) {
        const int64_t *a;
        ns = (int64_t)ox_attr_ints(n, "starts", &a);
        st = ox_dup_ints(a, ns);
        ne = (int64_t)ox_attr_ints(n, "ends", &a);
        en = ox_dup_ints(a, ne);
        if (ox_attr(n, "axes")) {
            na = (int64_t)ox_attr_ints(n, "axes", &a);
            ax = ox_dup_ints(a, na);
        }
    } else {
        if ((ns = ox_host_ints(n, in[1], "starts", &st)) < 0 ||
            (ne = ox_host_ints(n, in[2], "ends", &en)) < 0 ||
            (n_in > 3 && in[3] && (na = ox_host_ints(n, in[3], "axes", &ax)) < 0) ||
            (n_in > 4 && in[4] && (nst = ox_host_ints(n, in[4], "steps", &sp)) < 0)) {
            free(st), free(en), free(ax), free(sp);
            return TJ_ERR_UNSUPPORTED;
        }
    }
    tj_status s = TJ_OK;
    int64_t b[TJ_MAX_RANK], e[TJ_MAX_RANK], step[TJ_MAX_RANK];
    for (int d = 0; d < rank; d++)
        b[d] = 0, e[d] = tj_tensor_dims(x)[d], step[d] = 1;
    if (ns != ne || (na >= 0 && na != ns) || (nst >= 0 && nst != ns))
        s = ox_fail(n, TJ_ERR_SHAPE, "starts, ends, axes and steps differ in length");
    for (int64_t k = 0; k < ns && !s; k++) {
        int a = axis_of(na >= 0 ? ax[k] : k, rank);
        if (a < 0) {
            s = ox_fail(n, TJ_ERR_SHAPE, "axis out of range for rank %d", rank);
            break;
        }
        int64_t dim = tj_tensor_dims(x)[a], stp = nst >= 0 ? sp[k] : 1;
        /* ONNX clamps like Python, but ends beyond INT64 range mean "to the end" */
        int64_t sb = st[k], se = en[k];
        if (stp == 0) {
            s = ox_fail(n, TJ_ERR_SHAPE, "a step of 0");
            break;
        }
        if (sb < -dim - 1)
            sb = stp > 0 ? 0 : -dim - 1;
        if (se > dim)
            se = dim;
        if (se < -dim - 1)
            se = -dim - 1;
        if (sb > dim)
            sb = dim;
        b[a] = sb, e[a] = se, step[a] = stp;
        if (stp < 0 && se == -dim - 1)
            e[a] = INT64_MIN / 2; /* before the first element */
    }
    free(st), free(en), free(ax), free(sp);
    return s ? s : one(out, tj_slice(x, b, e, step));
}

/* Inference, or training with a ratio of 0 (known when traced): the identity, the mask all true.
 * Random dropout is refused: ONNX's expected outputs come from numpy's generator. */
CONV(c_dropout) {
    tj_tensor *x = in[0];
    int training =
        n_in > 2 && in[2] && (tj_tensor_is_symbolic(in[2]) || tj_tensor_get_f64(in[2], 0) != 0);
    int zero_ratio = n_in > 1 && in[1] && !tj_tensor_is_symbolic(in[1]) &&
                     tj_tensor_get_f64(in[1], 0) == 0; /* the default ratio is 0.5 */
    if (training && !zero_ratio)
        return ox_fail(n, TJ_ERR_UNSUPPORTED, "training_mode (random dropout) is not supported");
    if (ox_attr_i(n, "is_test", 1) == 0 && n->opset < 7)
        return ox_fail(n, TJ_ERR_UNSUPPORTED, "is_test=0 (random dropout) is not supported");
    out[0] = tj_add(x, like(x, 0));
    if (n_out > 1)
        out[1] = tj_ones(TJ_BOOL, tj_tensor_rank(x), tj_tensor_dims(x));
    return TJ_OK;
}

CONV(c_split) {
    tj_tensor *x = in[0];
    int rank = tj_tensor_rank(x), axis = axis_of(ox_attr_i(n, "axis", 0), rank);
    if (axis < 0)
        return ox_fail(n, TJ_ERR_SHAPE, "axis out of range for rank %d", rank);
    int64_t dim = tj_tensor_dims(x)[axis], *v = NULL, cnt = 0;
    if (n->opset >= 13 && n_in > 1 && in[1]) {
        if ((cnt = ox_host_ints(n, in[1], "split", &v)) < 0)
            return TJ_ERR_UNSUPPORTED;
    } else if (n->opset < 13 && ox_attr(n, "split")) {
        const int64_t *a;
        cnt = (int64_t)ox_attr_ints(n, "split", &a);
        v = ox_dup_ints(a, cnt);
    }
    if (cnt && cnt != n_out) {
        free(v);
        return ox_fail(n, TJ_ERR_SHAPE, "%lld sizes for %d outputs", (long long)cnt, n_out);
    }
    int64_t at = 0;
    for (int k = 0; k < n_out; k++) {
        int64_t len = cnt ? v[k] : (dim + n_out - 1) / n_out;
        int64_t b[TJ_MAX_RANK] = {0}, e[TJ_MAX_RANK];
        for (int d = 0; d < rank; d++)
            e[d] = tj_tensor_dims(x)[d];
        b[axis] = at, e[axis] = at + len < dim ? at + len : dim;
        out[k] = tj_slice(x, b, e, NULL);
        at += len;
    }
    free(v);
    return TJ_OK;
}

CONV(c_tile) { /* per axis: a new axis of the repeat count in front, broadcast, merged */
    tj_tensor *x = in[0];
    int64_t *v = NULL, cnt = ox_host_ints(n, in[1], "repeats", &v);
    int rank = tj_tensor_rank(x);
    if (cnt < 0)
        return TJ_ERR_UNSUPPORTED;
    if (cnt != rank || rank >= TJ_MAX_RANK) {
        free(v);
        return ox_fail(n, TJ_ERR_SHAPE, "%lld repeats for rank %d", (long long)cnt, rank);
    }
    for (int d = 0; d < rank; d++) {
        int64_t len = tj_tensor_dims(x)[d];
        if (v[d] < 0 || (len && v[d] > ((int64_t)1 << 40) / len)) {
            long long bad = (long long)v[d];
            free(v);
            return ox_fail(n, TJ_ERR_SHAPE, "repeat %lld of axis %d", bad, d);
        }
        if (v[d] == 1)
            continue;
        int64_t e[TJ_MAX_RANK], m[TJ_MAX_RANK];
        for (int k = 0, j = 0; k < rank; k++) {
            if (k == d)
                e[j++] = 1;
            e[j++] = tj_tensor_dims(x)[k];
            m[k] = k == d ? len * v[d] : tj_tensor_dims(x)[k];
        }
        tj_tensor *y = tj_reshape(x, rank + 1, e);
        e[d] = v[d];
        x = tj_reshape(tj_broadcast_to(y, rank + 1, e), rank, m);
    }
    free(v);
    return one(out, tj_add(x, like(x, 0)));
}

const ox_op ox_ops_shape[] = {
    {"Cast", c_cast, 1, 1, 6, 0},
    {"Concat", c_concat, 1, -1, 4, 0},
    {"Constant", c_constant, 0, 0, 1, 0},
    {"ConstantOfShape", c_constant_of_shape, 1, 1, 9, 0x1},
    {"Dropout", c_dropout, 1, 3, 1, 0x6},
    {"GatherND", c_gather_nd, 2, 2, 11, 0},
    {"Expand", c_expand, 2, 2, 8, 0x2},
    {"Flatten", c_flatten, 1, 1, 1, 0},
    {"Gather", c_gather, 2, 2, 1, 0},
    {"Range", c_range, 3, 3, 11, 0x7},
    {"Reshape", c_reshape, 1, 2, 1, 0x2},
    {"Shape", c_shape, 1, 1, 1, 0},
    {"Size", c_size, 1, 1, 1, 0},
    {"Slice", c_slice, 1, 5, 1, 0x1e},
    {"Split", c_split, 1, 2, 1, 0x2},
    {"Squeeze", c_squeeze, 1, 2, 1, 0x2},
    {"Tile", c_tile, 2, 2, 6, 0x2},
    {"Transpose", c_transpose, 1, 1, 1, 0},
    {"Unsqueeze", c_unsqueeze, 1, 2, 1, 0x2},
    {NULL, NULL, 0, 0, 0, 0},
};
