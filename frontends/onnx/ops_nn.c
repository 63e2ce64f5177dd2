/* ops_nn.c — ONNX's neural-network ops as tracejit ops: convolution and pooling (1-D and 2-D),
 * normalizations (BatchNormalization in inference, LayerNormalization, InstanceNormalization),
 * global pooling, losses (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss), Pad (constant),
 * and matrix helpers (Trilu, EyeLike, Hardmax, OneHot, CumSum, DepthToSpace, SpaceToDepth).
 * ONNX is channels-first (NCHW, filters OIHW); tracejit's convolutions are NHWC / HWIO, so
 * layouts are transposed around them (the passes fold what they can). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* x with axis `from` moved to position `to`. */
static tj_tensor *move_axis(tj_tensor *x, int from, int to) {
    int rank = tj_tensor_rank(x), perm[TJ_MAX_RANK], k = 0;
    if (from == to)
        return x;
    for (int d = 0; d < rank; d++)
        if (d != from)
            perm[k++] = d;
    memmove(perm + to + 1, perm + to, (size_t)(rank - 1 - to) * sizeof *perm);
    perm[to] = from;
    return tj_transpose(x, perm);
}

/* [n, m] of bool: where cols - rows (op) k holds; op: 0 ==, 1 >=, 2 <=. */
static tj_tensor *diag_mask(int64_t n, int64_t m, int64_t k, int op) {
    int64_t rd[2] = {n, 1}, cd[2] = {1, m};
    tj_tensor *rows = tj_reshape(tj_range(TJ_I64, 0, (double)n, 1), 2, rd);
    tj_tensor *cols = tj_reshape(tj_range(TJ_I64, 0, (double)m, 1), 2, cd);
    tj_tensor *d = tj_sub(cols, rows), *kk = tj_scalar_i64(k);
    return op == 0 ? tj_equal(d, kk) : op == 1 ? tj_greater_equal(d, kk) : tj_less_equal(d, kk);
}

/* A scalar input's value known at trace time, or dflt when absent. */
static int host_scalar(const ox_node *n, tj_tensor *t, const char *what, int64_t dflt, int64_t *v) {
    int64_t *p = NULL;
    if (!t) {
        *v = dflt;
        return 0;
    }
    int64_t cnt = ox_host_ints(n, t, what, &p);
    if (cnt != 1) {
        free(p);
        if (cnt >= 0)
            ox_fail(n, TJ_ERR_SHAPE, "%s must hold one value", what);
        return -1;
    }
    *v = p[0];
    free(p);
    return 0;
}

/* ---- matrix helpers ---------------------------------------------------------------------------
 */
CONV(c_trilu) {
    tj_tensor *x = in[0];
    int rank = tj_tensor_rank(x);
    int64_t k;
    if (rank < 2)
        return ox_fail(n, TJ_ERR_SHAPE, "rank %d (needs 2 or more)", rank);
    if (host_scalar(n, n_in > 1 ? in[1] : NULL, "k", 0, &k))
        return TJ_ERR_UNSUPPORTED;
    tj_tensor *mask = diag_mask(tj_tensor_dims(x)[rank - 2], tj_tensor_dims(x)[rank - 1], k,
                                ox_attr_i(n, "upper", 1) ? 1 : 2);
    return one(out, tj_where(mask, x, like(x, 0)));
}

CONV(c_eye_like) {
    tj_tensor *x = in[0];
    if (tj_tensor_rank(x) != 2)
        return ox_fail(n, TJ_ERR_SHAPE, "rank %d (needs 2)", tj_tensor_rank(x));
    int dt =
        ox_attr(n, "dtype") ? ox_dtype((int32_t)ox_attr_i(n, "dtype", 1)) : (int)tj_tensor_dtype(x);
    if (dt < 0)
        return ox_fail(n, TJ_ERR_UNSUPPORTED, "dtype %lld", (long long)ox_attr_i(n, "dtype", 0));
    tj_tensor *m = diag_mask(tj_tensor_dims(x)[0], tj_tensor_dims(x)[1], ox_attr_i(n, "k", 0), 0);
    return one(out, tj_cast(m, (tj_dtype)dt));
}

CONV(c_hardmax) {
    tj_tensor *x = in[0];
    int rank = tj_tensor_rank(x);
    int axis = axis_of(ox_attr_i(n, "axis", n->opset < 13 ? 1 : -1), rank);
    if (axis < 0)
        return ox_fail(n, TJ_ERR_SHAPE, "axis out of range for rank %d", rank);
    tj_tensor *y = x;
    int64_t flat[2] = {1, 1};
    if (n->opset < 13) { /* as a 2-D [prod(:axis), prod(axis:)] */
        for (int d = 0; d < rank; d++)
            flat[d < axis ? 0 : 1] *= tj_tensor_dims(x)[d];
        y = tj_reshape(x, 2, flat);
    }
    int a = n->opset < 13 ? 1 : axis;
    int64_t depth = tj_tensor_dims(y)[a];
    tj_tensor *h = tj_one_hot(tj_argmax(y, a), depth, 1, 0, tj_tensor_dtype(x));
    h = move_axis(h, tj_tensor_rank(h) - 1, a);
    return one(out, n->opset < 13 ? tj_reshape(h, rank, tj_tensor_dims(x)) : h);
}

CONV(c_one_hot) {
    tj_tensor *idx = in[0], *values = in[2];
    int64_t depth, *v = NULL;
    if (tj_tensor_is_symbolic(in[1]))
        return ox_fail(n, TJ_ERR_UNSUPPORTED, "its depth is computed from the model's inputs");
    depth = (int64_t)tj_tensor_get_f64(in[1], 0);
    if (tj_tensor_is_symbolic(values) || tj_tensor_numel(values) != 2)
        return ox_fail(n, TJ_ERR_UNSUPPORTED, "values must be two known numbers [off, on]");
    double off = tj_tensor_get_f64(values, 0), on = tj_tensor_get_f64(values, 1);
    free(v);
    if (tj_tensor_dtype(idx) != TJ_I64 && tj_tensor_dtype(idx) != TJ_I32)
        idx = tj_cast(idx, TJ_I64);
    idx = tj_where(tj_less(idx, like(idx, 0)), tj_add(idx, like(idx, (double)depth)), idx);
    int rank = tj_tensor_rank(idx) + 1, axis = axis_of(ox_attr_i(n, "axis", -1), rank);
    if (axis < 0)
        return ox_fail(n, TJ_ERR_SHAPE, "axis out of range for rank %d", rank);
    tj_tensor *h = tj_one_hot(idx, depth, on, off, tj_tensor_dtype(values));
    return one(out, move_axis(h, rank - 1, axis));
}

CONV(c_cumsum) {
    tj_tensor *x = in[0];
    int64_t a;
    int rank = tj_tensor_rank(x);
    if (host_scalar(n, in[1], "axis", 0, &a))
        return TJ_ERR_UNSUPPORTED;
    int axis = axis_of(a, rank);
    if (axis < 0)
        return ox_fail(n, TJ_ERR_SHAPE, "axis out of range for rank %d", rank);
    int excl = ox_attr_i(n, "exclusive", 0) != 0, rev = ox_attr_i(n, "reverse", 0) != 0;
    int64_t len = tj_tensor_dims(x)[axis];
    /* y[j] = sum over i of x[i] * T[i, j], T a triangle of ones: a product with the axis last */
    int64_t rd[2] = {len, 1}, cd[2] = {1, len};
    tj_tensor *i = tj_reshape(tj_range(TJ_I64, 0, (double)len, 1), 2, rd);
    tj_tensor *j = tj_reshape(tj_range(TJ_I64, 0, (double)len, 1), 2, cd);
    tj_tensor *t = rev ? (excl ? tj_greater(i, j) : tj_greater_equal(i, j))
                       : (excl ? tj_less(i, j) : tj_less_equal(i, j));
    tj_tensor *xl = move_axis(x, axis, rank - 1);
    if (rank == 1) /* a product needs a row */
        xl = tj_expand_dims(xl, 0);
    tj_tensor *y = tj_matmul(xl, tj_cast(t, tj_tensor_dtype(x)));
    return one(out, rank == 1 ? tj_squeeze(y, 1, (int[]){0}) : move_axis(y, rank - 1, axis));
}

/* DepthToSpace (DCR or CRD) and SpaceToDepth: reshape, transpose, reshape. */
CONV(c_depth_to_space) {
    tj_tensor *x = in[0];
    if (tj_tensor_rank(x) != 4)
        return ox_fail(n, TJ_ERR_SHAPE, "rank %d (needs 4)", tj_tensor_rank(x));
    const int64_t *d = tj_tensor_dims(x);
    int64_t b = ox_attr_i(n, "blocksize", 0), N = d[0], C = d[1], H = d[2], W = d[3];
    if (b <= 0 || C % (b * b))
        return ox_fail(n, TJ_ERR_SHAPE, "blocksize %lld for %lld channels", (long long)b,
                       (long long)C);
    char mode[8];
    int crd = !strcmp(ox_attr_s(n, "mode", "DCR", mode, sizeof mode), "CRD");
    int64_t s1[6] = {N, b, b, C / (b * b), H, W}, s2[6] = {N, C / (b * b), b, b, H, W};
    static const int p1[6] = {0, 3, 4, 1, 5, 2}, p2[6] = {0, 1, 4, 2, 5, 3};
    int64_t o[4] = {N, C / (b * b), H * b, W * b};
    return one(out, tj_reshape(tj_transpose(tj_reshape(x, 6, crd ? s2 : s1), crd ? p2 : p1), 4, o));
}

CONV(c_space_to_depth) {
    tj_tensor *x = in[0];
    if (tj_tensor_rank(x) != 4)
        return ox_fail(n, TJ_ERR_SHAPE, "rank %d (needs 4)", tj_tensor_rank(x));
    const int64_t *d = tj_tensor_dims(x);
    int64_t b = ox_attr_i(n, "blocksize", 0), N = d[0], C = d[1], H = d[2], W = d[3];
    if (b <= 0 || H % b || W % b)
        return ox_fail(n, TJ_ERR_SHAPE, "blocksize %lld for [%lld, %lld]", (long long)b,
                       (long long)H, (long long)W);
    int64_t s[6] = {N, C, H / b, b, W / b, b}, o[4] = {N, C * b * b, H / b, W / b};
    static const int p[6] = {0, 3, 5, 1, 2, 4};
    return one(out, tj_reshape(tj_transpose(tj_reshape(x, 6, s), p), 4, o));
}

/* ---- padding -----------------------------------------------------------------------------------
 */
/* x padded on axis a with lo / hi elements of value v (negative: cropped). */
static tj_tensor *pad_axis(tj_tensor *x, int a, int64_t lo, int64_t hi, tj_tensor *v) {
    int rank = tj_tensor_rank(x);
    if (lo < 0 || hi < 0) {
        int64_t b[TJ_MAX_RANK] = {0}, e[TJ_MAX_RANK];
        for (int d = 0; d < rank; d++)
            e[d] = tj_tensor_dims(x)[d];
        b[a] = lo < 0 ? -lo : 0;
        e[a] = hi < 0 ? e[a] + hi : e[a];
        x = tj_slice(x, b, e, NULL);
        lo = lo < 0 ? 0 : lo, hi = hi < 0 ? 0 : hi;
    }
    if (!lo && !hi)
        return x;
    tj_tensor *parts[3];
    int np = 0;
    int64_t d[TJ_MAX_RANK];
    memcpy(d, tj_tensor_dims(x), (size_t)rank * sizeof *d);
    if (lo)
        d[a] = lo, parts[np++] = tj_fill(rank, d, v);
    parts[np++] = x;
    if (hi)
        d[a] = hi, parts[np++] = tj_fill(rank, d, v);
    return tj_concat(np, parts, a);
}

CONV(c_pad) {
    tj_tensor *x = in[0];
    int rank = tj_tensor_rank(x);
    char mode[16];
    if (strcmp(ox_attr_s(n, "mode", "constant", mode, sizeof mode), "constant"))
        return ox_fail(n, TJ_ERR_UNSUPPORTED, "mode '%s' (only constant)", mode);
    int64_t *p = NULL, cnt;
    tj_tensor *v = like(x, 0);
    if (n->opset < 11) {
        const int64_t *a;
        cnt = (int64_t)ox_attr_ints(n, "pads", &a);
        p = malloc(((size_t)cnt + 1) * sizeof *p);
        if (cnt)
            memcpy(p, a, (size_t)cnt * sizeof *p);
        v = like(x, ox_attr_f(n, "value", 0));
    } else {
        if ((cnt = ox_host_ints(n, in[1], "pads", &p)) < 0)
            return TJ_ERR_UNSUPPORTED;
        if (n_in > 2 && in[2])
            v = tj_reshape(in[2], 0, NULL);
        if (n_in > 3 && in[3]) {
            free(p);
            return ox_fail(n, TJ_ERR_UNSUPPORTED, "the axes input (opset 18)");
        }
    }
    if (cnt != 2 * rank) {
        free(p);
        return ox_fail(n, TJ_ERR_SHAPE, "%lld pads for rank %d", (long long)cnt, rank);
    }
    for (int d = 0; d < rank; d++)
        x = pad_axis(x, d, p[d], p[d + rank], v);
    free(p);
    return one(out, tj_add(x, like(x, 0)));
}

/* ---- convolution and pooling ---------------------------------------------------------------- */
typedef struct window {
    int spatial; /* 1 or 2 */
    int64_t k[2], s[2], d[2];
    int64_t pad[4]; /* top, left, bottom, right */
    int same;       /* SAME_UPPER / SAME_LOWER: pads computed here */
} window;

/* The window attributes of a conv or pool over x's spatial dims (k from the filter when given). */
static tj_status window_of(const ox_node *n, tj_tensor *x, const int64_t *kdims, window *w) {
    int sp = tj_tensor_rank(x) - 2;
    if (sp != 1 && sp != 2)
        return ox_fail(n, TJ_ERR_UNSUPPORTED, "%d spatial dims (1 or 2 are supported)", sp);
    memset(w, 0, sizeof *w);
    w->spatial = sp;
    const int64_t *a;
    size_t na = ox_attr_ints(n, "kernel_shape", &a);
    for (int i = 0; i < sp; i++) {
        w->k[i] = na == (size_t)sp ? a[i] : kdims ? kdims[i] : 0;
        w->s[i] = 1, w->d[i] = 1;
    }
    if (!w->k[0])
        return ox_fail(n, TJ_ERR_INVALID, "no kernel_shape");
    if ((na = ox_attr_ints(n, "strides", &a)) == (size_t)sp)
        for (int i = 0; i < sp; i++)
            w->s[i] = a[i];
    if ((na = ox_attr_ints(n, "dilations", &a)) == (size_t)sp)
        for (int i = 0; i < sp; i++)
            w->d[i] = a[i];
    if ((na = ox_attr_ints(n, "pads", &a)) == (size_t)(2 * sp))
        for (int i = 0; i < sp; i++)
            w->pad[i] = a[i], w->pad[2 + i] = a[sp + i];
    char ap[16];
    ox_attr_s(n, "auto_pad", "NOTSET", ap, sizeof ap);
    if (!strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER")) {
        for (int i = 0; i < sp; i++) {
            int64_t in_d = tj_tensor_dims(x)[2 + i], out_d = (in_d + w->s[i] - 1) / w->s[i];
            int64_t need = (out_d - 1) * w->s[i] + (w->k[i] - 1) * w->d[i] + 1 - in_d;
            need = need < 0 ? 0 : need;
            int64_t small = need / 2, big = need - small;
            w->pad[i] = ap[5] == 'U' ? small : big;
            w->pad[2 + i] = ap[5] == 'U' ? big : small;
        }
    } else if (!strcmp(ap, "VALID")) {
        memset(w->pad, 0, sizeof w->pad);
    }
    if (ox_attr_i(n, "ceil_mode", 0))
        for (int i = 0; i < sp; i++) { /* the last partial window: extra padding at the end */
            int64_t in_d = tj_tensor_dims(x)[2 + i] + w->pad[i] + w->pad[2 + i];
            int64_t span = (w->k[i] - 1) * w->d[i] + 1, rem = (in_d - span) % w->s[i];
            if (rem)
                w->pad[2 + i] += w->s[i] - rem;
        }
    return TJ_OK;
}

/* NCHW (or NCL) to NHWC with the window's padding of value v; 1-D gets H = 1. */
static tj_tensor *to_nhwc(tj_tensor *x, const window *w, tj_tensor *v) {
    if (w->spatial == 1) {
        const int64_t *d = tj_tensor_dims(x);
        int64_t r[4] = {d[0], d[1], 1, d[2]};
        x = tj_reshape(x, 4, r);
    }
    x = tj_transpose(x, (int[]){0, 2, 3, 1});
    int sp = w->spatial;
    if (sp == 2)
        x = pad_axis(x, 1, w->pad[0], w->pad[2], v);
    return pad_axis(x, 2, w->pad[sp == 2 ? 1 : 0], w->pad[sp == 2 ? 3 : 2], v);
}

static tj_tensor *from_nhwc(tj_tensor *y, const window *w) {
    y = tj_transpose(y, (int[]){0, 3, 1, 2});
    if (w->spatial == 1) {
        const int64_t *d = tj_tensor_dims(y);
        int64_t r[3] = {d[0], d[1], d[3]};
        y = tj_reshape(y, 3, r);
    }
    return y;
}

CONV(c_conv) {
    tj_tensor *x = in[0], *f = in[1];
    if (ox_attr_i(n, "group", 1) != 1)
        return ox_fail(n, TJ_ERR_UNSUPPORTED, "group=%lld (grouped convolutions)",
                       (long long)ox_attr_i(n, "group", 1));
    window w;
    tj_status st = window_of(n, x, tj_tensor_rank(f) >= 3 ? tj_tensor_dims(f) + 2 : NULL, &w);
    if (st)
        return st;
    if (w.spatial == 1) { /* [M, C, k] -> [M, C, 1, k] */
        const int64_t *d = tj_tensor_dims(f);
        int64_t r[4] = {d[0], d[1], 1, d[2]};
        f = tj_reshape(f, 4, r);
    }
    tj_tensor *xh = to_nhwc(x, &w, like(x, 0));
    tj_tensor *fh = tj_transpose(f, (int[]){2, 3, 1, 0}); /* OIHW -> HWIO */
    int sp = w.spatial;
    int strides[2] = {sp == 2 ? (int)w.s[0] : 1, (int)w.s[sp - 1]};
    int dil[2] = {sp == 2 ? (int)w.d[0] : 1, (int)w.d[sp - 1]};
    tj_tensor *y = tj_conv2d(xh, fh, strides, TJ_PAD_VALID, dil);
    if (n_in > 2 && in[2])
        y = tj_bias_add(y, in[2]);
    return one(out, from_nhwc(y, &w));
}

static tj_status pool(const ox_node *n, tj_tensor *x, tj_tensor **out, int is_max, int n_out) {
    window w;
    tj_status st = window_of(n, x, NULL, &w);
    if (st)
        return st;
    if (n_out > 1)
        return ox_fail(n, TJ_ERR_UNSUPPORTED, "the Indices output");
    if (w.d[0] != 1 || w.d[w.spatial - 1] != 1)
        return ox_fail(n, TJ_ERR_UNSUPPORTED, "dilated pooling");
    int sp = w.spatial;
    int k[2] = {sp == 2 ? (int)w.k[0] : 1, (int)w.k[sp - 1]};
    int s[2] = {sp == 2 ? (int)w.s[0] : 1, (int)w.s[sp - 1]};
    if (is_max)
        return one(
            out,
            from_nhwc(tj_max_pool2d(to_nhwc(x, &w, like(x, -INFINITY)), k, s, TJ_PAD_VALID), &w));
    tj_tensor *sum = tj_avg_pool2d(to_nhwc(x, &w, like(x, 0)), k, s, TJ_PAD_VALID);
    if (!ox_attr_i(n, "count_include_pad", 0)) { /* divide by the real elements in each window */
        tj_tensor *ones = tj_ones(tj_tensor_dtype(x), tj_tensor_rank(x), tj_tensor_dims(x));
        tj_tensor *cnt = tj_avg_pool2d(to_nhwc(ones, &w, like(x, 0)), k, s, TJ_PAD_VALID);
        sum = tj_div(sum, cnt);
    }
    return one(out, from_nhwc(sum, &w));
}
CONV(c_max_pool) {
    return pool(n, in[0], out, 1, n_out);
}
CONV(c_average_pool) {
    return pool(n, in[0], out, 0, n_out);
}

/* the spatial axes 2.. of x, for global pooling and instance normalization */
static int spatial_axes(tj_tensor *x, int *axes) {
    int k = 0;
    for (int d = 2; d < tj_tensor_rank(x); d++)
        axes[k++] = d;
    return k;
}
CONV(c_global_average_pool) {
    int axes[TJ_MAX_RANK], na = spatial_axes(in[0], axes);
    return one(out, tj_mean(in[0], na, axes, 1));
}
CONV(c_global_max_pool) {
    int axes[TJ_MAX_RANK], na = spatial_axes(in[0], axes);
    return one(out, tj_max(in[0], na, axes, 1));
}

/* ---- normalization ----------------------------------------------------------------------------
 */
/* A per-channel [C] parameter shaped to broadcast against NC... x. */
static tj_tensor *per_channel(tj_tensor *p, tj_tensor *x) {
    int rank = tj_tensor_rank(x);
    int64_t d[TJ_MAX_RANK];
    d[0] = tj_tensor_numel(p);
    for (int k = 1; k < rank - 1; k++)
        d[k] = 1;
    return tj_reshape(p, rank > 1 ? rank - 1 : 1, d);
}

CONV(c_batch_norm) {
    tj_tensor *x = in[0];
    if (ox_attr_i(n, "training_mode", 0) || n_out > 1)
        return ox_fail(n, TJ_ERR_UNSUPPORTED, "training mode (running statistics)");
    if (n->opset < 6 && ox_attr(n, "spatial") && ox_attr_i(n, "spatial", 1) == 0)
        return ox_fail(n, TJ_ERR_UNSUPPORTED, "spatial=0");
    float eps = ox_attr_f(n, "epsilon", 1e-5f);
    tj_tensor *inv = tj_rsqrt(tj_add(per_channel(in[4], x), like(x, eps)));
    tj_tensor *y = tj_mul(tj_sub(x, per_channel(in[3], x)), tj_mul(inv, per_channel(in[1], x)));
    return one(out, tj_add(y, per_channel(in[2], x)));
}

CONV(c_instance_norm) {
    tj_tensor *x = in[0];
    float eps = ox_attr_f(n, "epsilon", 1e-5f);
    int axes[TJ_MAX_RANK], na = spatial_axes(x, axes);
    tj_tensor *mean = tj_mean(x, na, axes, 1), *c = tj_sub(x, mean);
    tj_tensor *inv = tj_rsqrt(tj_add(tj_mean(tj_mul(c, c), na, axes, 1), like(x, eps)));
    return one(out, tj_add(tj_mul(tj_mul(c, inv), per_channel(in[1], x)), per_channel(in[2], x)));
}

CONV(c_layer_norm) {
    tj_tensor *x = in[0];
    int rank = tj_tensor_rank(x), axis = axis_of(ox_attr_i(n, "axis", -1), rank);
    if (axis < 0)
        return ox_fail(n, TJ_ERR_SHAPE, "axis out of range for rank %d", rank);
    float eps = ox_attr_f(n, "epsilon", 1e-5f);
    int axes[TJ_MAX_RANK], na = 0;
    for (int d = axis; d < rank; d++)
        axes[na++] = d;
    tj_tensor *mean = tj_mean(x, na, axes, 1), *c = tj_sub(x, mean);
    tj_tensor *inv = tj_rsqrt(tj_add(tj_mean(tj_mul(c, c), na, axes, 1), like(x, eps)));
    tj_tensor *y = tj_mul(tj_mul(c, inv), in[1]);
    if (n_in > 2 && in[2])
        y = tj_add(y, in[2]);
    out[0] = y;
    if (n_out > 1)
        out[1] = mean;
    if (n_out > 2)
        out[2] = inv;
    return TJ_OK;
}

/* ---- losses -----------------------------------------------------------------------------------
 */
/* -x[target] per element (x: [N, C, d...] of log-probabilities, target [N, d...]) with the class
 * weights and ignore_index, then the reduction. */
static tj_status nll(const ox_node *n, tj_tensor *x, tj_tensor *target, tj_tensor *weight,
                     tj_tensor **out) {
    int rank = tj_tensor_rank(x);
    if (rank < 2)
        return ox_fail(n, TJ_ERR_SHAPE, "input of rank %d (needs [N, C, ...])", rank);
    int64_t classes = tj_tensor_dims(x)[1];
    tj_tensor *t = tj_cast(target, TJ_I64);
    tj_tensor *valid = tj_ones(TJ_BOOL, tj_tensor_rank(t), tj_tensor_dims(t));
    const Onnx__AttributeProto *ig = ox_attr(n, "ignore_index");
    if (ig)
        valid = tj_not_equal(t, tj_scalar_i64(ig->i));
    t = tj_where(valid, t, tj_scalar_i64(0));
    tj_tensor *oh = tj_one_hot(t, classes, 1, 0, tj_tensor_dtype(x));
    tj_tensor *picked = tj_sum(tj_mul(move_axis(x, 1, rank - 1), oh), 1, (int[]){-1}, 0);
    tj_tensor *w = tj_cast(valid, tj_tensor_dtype(x));
    if (weight)
        w = tj_mul(w, tj_gather(weight, t, 0));
    tj_tensor *loss = tj_neg(tj_mul(picked, w));
    char red[16];
    ox_attr_s(n, "reduction", "mean", red, sizeof red);
    if (!strcmp(red, "none"))
        return one(out, loss);
    if (!strcmp(red, "sum"))
        return one(out, tj_sum(loss, 0, NULL, 0));
    if (!strcmp(red, "mean"))
        return one(out, tj_div(tj_sum(loss, 0, NULL, 0), tj_sum(w, 0, NULL, 0)));
    return ox_fail(n, TJ_ERR_INVALID, "reduction '%s'", red);
}

CONV(c_nll_loss) {
    return nll(n, in[0], in[1], n_in > 2 ? in[2] : NULL, out);
}

CONV(c_softmax_ce_loss) {
    tj_tensor *lp = tj_log_softmax(in[0], 1);
    tj_status st = nll(n, lp, in[1], n_in > 2 ? in[2] : NULL, out);
    if (!st && n_out > 1)
        out[1] = lp;
    return st;
}

/* ---- small compositions -----------------------------------------------------------------------
 */
CONV(c_cast_like) {
    return one(out, tj_cast(in[0], tj_tensor_dtype(in[1])));
}
CONV(c_shrink) {
    tj_tensor *x = in[0];
    float l = ox_attr_f(n, "lambd", 0.5f), b = ox_attr_f(n, "bias", 0.0f);
    return one(out,
               tj_where(tj_less(x, like(x, -l)), tj_add(x, like(x, b)),
                        tj_where(tj_greater(x, like(x, l)), tj_sub(x, like(x, b)), like(x, 0))));
}
CONV(c_asinh) {
    tj_tensor *x = in[0];
    return one(out, tj_log(tj_add(x, tj_sqrt(tj_add(tj_mul(x, x), like(x, 1))))));
}
CONV(c_acosh) {
    tj_tensor *x = in[0];
    return one(out, tj_log(tj_add(x, tj_sqrt(tj_sub(tj_mul(x, x), like(x, 1))))));
}
CONV(c_atanh) {
    tj_tensor *x = in[0];
    return one(out,
               tj_mul(like(x, 0.5), tj_log(tj_div(tj_add(like(x, 1), x), tj_sub(like(x, 1), x)))));
}

const ox_op ox_ops_nn[] = {
    {"Acosh", c_acosh, 1, 1, 9, 0},
    {"Asinh", c_asinh, 1, 1, 9, 0},
    {"Atanh", c_atanh, 1, 1, 9, 0},
    {"AveragePool", c_average_pool, 1, 1, 1, 0},
    {"BatchNormalization", c_batch_norm, 5, 5, 1, 0},
    {"CastLike", c_cast_like, 2, 2, 15, 0},
    {"Conv", c_conv, 2, 3, 1, 0},
    {"CumSum", c_cumsum, 2, 2, 11, 0x2},
    {"DepthToSpace", c_depth_to_space, 1, 1, 1, 0},
    {"EyeLike", c_eye_like, 1, 1, 9, 0},
    {"GlobalAveragePool", c_global_average_pool, 1, 1, 1, 0},
    {"GlobalMaxPool", c_global_max_pool, 1, 1, 1, 0},
    {"Hardmax", c_hardmax, 1, 1, 1, 0},
    {"InstanceNormalization", c_instance_norm, 3, 3, 1, 0},
    {"LayerNormalization", c_layer_norm, 2, 3, 17, 0},
    {"MaxPool", c_max_pool, 1, 1, 1, 0},
    {"NegativeLogLikelihoodLoss", c_nll_loss, 2, 3, 12, 0},
    {"OneHot", c_one_hot, 3, 3, 9, 0x6},
    {"Pad", c_pad, 1, 4, 1, 0x6},
    {"Shrink", c_shrink, 1, 1, 9, 0},
    {"SoftmaxCrossEntropyLoss", c_softmax_ce_loss, 2, 3, 12, 0},
    {"SpaceToDepth", c_space_to_depth, 1, 1, 1, 0},
    {"Trilu", c_trilu, 1, 2, 14, 0x2},
    {NULL, NULL, 0, 0, 0, 0},
};
