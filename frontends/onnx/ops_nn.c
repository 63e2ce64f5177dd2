/* ops_nn.c — ONNX's neural-network ops as tracejit ops (ops_conv.c: convolution, pooling, Pad):
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
    int64_t depth;
    if (host_scalar(n, in[1], "depth", 0, &depth))
        return TJ_ERR_UNSUPPORTED;
    if (depth < 1 || depth > ((int64_t)1 << 24))
        return ox_fail(n, TJ_ERR_SHAPE, "depth %lld", (long long)depth);
    if (tj_tensor_is_symbolic(values) || tj_tensor_numel(values) != 2)
        return ox_fail(n, TJ_ERR_UNSUPPORTED, "values must be two known numbers [off, on]");
    double off = tj_tensor_get_f64(values, 0), on = tj_tensor_get_f64(values, 1);
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
    if (b <= 0 || b > 4096 || C % (b * b))
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
    if (b <= 0 || b > 4096 || H % b || W % b)
        return ox_fail(n, TJ_ERR_SHAPE, "blocksize %lld for [%lld, %lld]", (long long)b,
                       (long long)H, (long long)W);
    int64_t s[6] = {N, C, H / b, b, W / b, b}, o[4] = {N, C * b * b, H / b, W / b};
    static const int p[6] = {0, 3, 5, 1, 2, 4};
    return one(out, tj_reshape(tj_transpose(tj_reshape(x, 6, s), p), 4, o));
}

/* GatherElements: out[..., j, ...] = data[..., indices[..., j, ...], ...] along axis, as a select
 * over the axis (indices compared with every position) summed away. */
CONV(c_gather_elements) {
    tj_tensor *data = in[0], *idx = in[1];
    int rank = tj_tensor_rank(data), axis = axis_of(ox_attr_i(n, "axis", 0), rank);
    if (axis < 0 || tj_tensor_rank(idx) != rank)
        return ox_fail(n, TJ_ERR_SHAPE, "axis or indices' rank does not fit data of rank %d", rank);
    int64_t b[TJ_MAX_RANK] = {0}, e[TJ_MAX_RANK];
    for (int d = 0; d < rank; d++) {
        e[d] = d == axis ? tj_tensor_dims(data)[d] : tj_tensor_dims(idx)[d];
        if (e[d] > tj_tensor_dims(data)[d])
            return ox_fail(n, TJ_ERR_SHAPE, "indices dim %d is larger than data's", d);
    }
    int64_t len = tj_tensor_dims(data)[axis];
    tj_tensor *dl = move_axis(tj_slice(data, b, e, NULL), axis, rank - 1);
    tj_tensor *il = move_axis(tj_cast(idx, TJ_I64), axis, rank - 1);
    il = tj_where(tj_less(il, tj_scalar_i64(0)), tj_add(il, tj_scalar_i64(len)), il);
    tj_tensor *hit = tj_equal(tj_expand_dims(il, rank), tj_range(TJ_I64, 0, (double)len, 1));
    int is_bool = tj_tensor_dtype(data) == TJ_BOOL;
    if (is_bool)
        dl = tj_cast(dl, TJ_I32);
    tj_tensor *r =
        tj_sum(tj_where(hit, tj_expand_dims(dl, rank - 1), like(dl, 0)), 1, (int[]){rank}, 0);
    if (is_bool)
        r = tj_cast(r, TJ_BOOL);
    return one(out, move_axis(r, rank - 1, axis));
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

/* Inference normalizes by the given mean and variance; training mode (opset 14+) by the batch's
 * (over every axis but channels, the variance biased) and also returns the running statistics
 * moved toward them: running * momentum + batch * (1 - momentum). */
CONV(c_batch_norm) {
    tj_tensor *x = in[0], *mean = in[3], *var = in[4];
    int training = n->opset >= 14 && ox_attr_i(n, "training_mode", 0);
    if (n_out > 1 && !training)
        return ox_fail(n, TJ_ERR_UNSUPPORTED, "%d outputs outside training_mode", n_out);
    if (n->opset < 6 && ox_attr(n, "spatial") && ox_attr_i(n, "spatial", 1) == 0)
        return ox_fail(n, TJ_ERR_UNSUPPORTED, "spatial=0");
    float eps = ox_attr_f(n, "epsilon", 1e-5f);
    if (training) {
        int rank = tj_tensor_rank(x), axes[TJ_MAX_RANK], na = 0;
        for (int d = 0; d < rank; d++)
            if (d != 1)
                axes[na++] = d;
        tj_tensor *bm = tj_mean(x, na, axes, 0), *c = tj_sub(x, per_channel(bm, x));
        tj_tensor *bv = tj_mean(tj_mul(c, c), na, axes, 0);
        float mom = ox_attr_f(n, "momentum", 0.9f);
        if (n_out > 1)
            out[1] = tj_add(tj_mul(mean, like(mean, mom)), tj_mul(bm, like(bm, 1 - mom)));
        if (n_out > 2)
            out[2] = tj_add(tj_mul(var, like(var, mom)), tj_mul(bv, like(bv, 1 - mom)));
        mean = bm, var = bv;
    }
    tj_tensor *inv = tj_rsqrt(tj_add(per_channel(var, x), like(x, eps)));
    tj_tensor *y = tj_mul(tj_sub(x, per_channel(mean, x)), tj_mul(inv, per_channel(in[1], x)));
    out[0] = tj_add(y, per_channel(in[2], x));
    return TJ_OK;
}

CONV(c_instance_norm) {
    tj_tensor *x = in[0];
    float eps = ox_attr_f(n, "epsilon", 1e-5f);
    int axes[TJ_MAX_RANK], na = spatial_axes(x, axes);
    tj_tensor *mean = tj_mean(x, na, axes, 1), *c = tj_sub(x, mean);
    tj_tensor *inv = tj_rsqrt(tj_add(tj_mean(tj_mul(c, c), na, axes, 1), like(x, eps)));
    return one(out, tj_add(tj_mul(tj_mul(c, inv), per_channel(in[1], x)), per_channel(in[2], x)));
}

/* LRN: x / (bias + alpha / size * the sum of squares over a window of `size` channels)^beta,
 * the window floor((size - 1) / 2) channels before and ceil((size - 1) / 2) after. */
CONV(c_lrn) {
    (void)n_in, (void)n_out;
    tj_tensor *x = in[0];
    int64_t size = ox_attr_i(n, "size", 0);
    if (tj_tensor_rank(x) < 3 || size < 1 || size > 4096)
        return ox_fail(n, TJ_ERR_SHAPE, "size %lld for rank %d (NC... with a size >= 1)",
                       (long long)size, tj_tensor_rank(x));
    float alpha = ox_attr_f(n, "alpha", 1e-4f), beta = ox_attr_f(n, "beta", 0.75f),
          bias = ox_attr_f(n, "bias", 1);
    int rank = tj_tensor_rank(x);
    int64_t d[TJ_MAX_RANK], lo = (size - 1) / 2, hi = size - 1 - lo, c = tj_tensor_dims(x)[1];
    memcpy(d, tj_tensor_dims(x), (size_t)rank * sizeof *d);
    tj_tensor *sq = tj_mul(x, x), *parts[3], *sum = NULL;
    int np = 0;
    if (lo)
        d[1] = lo, parts[np++] = tj_zeros(tj_tensor_dtype(x), rank, d);
    parts[np++] = sq;
    if (hi)
        d[1] = hi, parts[np++] = tj_zeros(tj_tensor_dtype(x), rank, d);
    tj_tensor *padded = np > 1 ? tj_concat(np, parts, 1) : sq;
    for (int64_t k = 0; k < size; k++) {
        int64_t b[TJ_MAX_RANK] = {0}, e[TJ_MAX_RANK];
        memcpy(e, tj_tensor_dims(x), (size_t)rank * sizeof *e);
        b[1] = k, e[1] = k + c;
        tj_tensor *s = tj_slice(padded, b, e, NULL);
        sum = sum ? tj_add(sum, s) : s;
    }
    tj_tensor *den = tj_add(like(x, bias), tj_mul(like(x, alpha / (double)size), sum));
    return one(out, tj_div(x, tj_pow(den, like(x, beta))));
}

/* MeanVarianceNormalization as its ONNX function body: (x - E[x]) / (sqrt(E[x^2] - E[x]^2) +
 * 1e-9) over `axes` (default N, H, W). */
CONV(c_mvn) {
    (void)n_in, (void)n_out;
    tj_tensor *x = in[0];
    int rank = tj_tensor_rank(x), axes[TJ_MAX_RANK], na = 0;
    const int64_t *a;
    size_t cnt = ox_attr_ints(n, "axes", &a);
    static const int64_t dflt[3] = {0, 2, 3};
    if (!ox_attr(n, "axes"))
        a = dflt, cnt = 3;
    if (cnt > (size_t)rank)
        return ox_fail(n, TJ_ERR_SHAPE, "%zu axes for rank %d", cnt, rank);
    for (size_t k = 0; k < cnt; k++)
        if ((axes[na++] = axis_of(a[k], rank)) < 0)
            return ox_fail(n, TJ_ERR_SHAPE, "axis %lld out of range for rank %d", (long long)a[k],
                           rank);
    tj_tensor *m = tj_mean(x, na, axes, 1);
    tj_tensor *var = tj_sub(tj_mean(tj_mul(x, x), na, axes, 1), tj_mul(m, m));
    return one(out, tj_div(tj_sub(x, m), tj_add(tj_sqrt(var), like(x, 1e-9))));
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
/* ---- quantization (QDQ models) -----------------------------------------------------------------
 * scale / zero point, a scalar or (opset 13) a vector along `axis`, reshaped to broadcast */
static tj_tensor *along(tj_tensor *v, int rank, int axis) {
    if (!v || tj_tensor_rank(v) != 1 || rank < 1)
        return v;
    int64_t d[TJ_MAX_RANK];
    for (int k = 0; k < rank; k++)
        d[k] = k == axis ? tj_tensor_dims(v)[0] : 1;
    return tj_reshape(v, rank, d);
}

/* round half to even, then + zero point, saturated by the cast to the zero point's dtype */
static tj_tensor *quantize(tj_tensor *x, tj_tensor *scale, tj_tensor *zp, tj_dtype dt) {
    tj_tensor *q = tj_round(tj_div(tj_cast(x, TJ_F32), tj_cast(scale, TJ_F32)));
    if (zp)
        q = tj_add(q, tj_cast(zp, TJ_F32));
    return tj_cast(q, dt); /* float -> int saturates at the type's range */
}

CONV(c_quantize_linear) {
    (void)n_out;
    tj_tensor *x = in[0];
    int r = tj_tensor_rank(x), axis = axis_of(ox_attr_i(n, "axis", 1), r > 0 ? r : 1);
    tj_tensor *zp = n_in > 2 ? in[2] : NULL;
    tj_dtype dt = zp ? tj_tensor_dtype(zp) : TJ_U8;
    if (dt != TJ_U8 && dt != TJ_I8)
        return ox_fail(n, TJ_ERR_UNSUPPORTED, "zero point of dtype %s (uint8 or int8)",
                       tj_dtype_name(dt));
    return one(out, quantize(x, along(in[1], r, axis), along(zp, r, axis), dt));
}

CONV(c_dequantize_linear) {
    (void)n_out;
    tj_tensor *x = in[0];
    int r = tj_tensor_rank(x), axis = axis_of(ox_attr_i(n, "axis", 1), r > 0 ? r : 1);
    tj_tensor *v = tj_cast(x, TJ_F32);
    if (n_in > 2 && in[2])
        v = tj_sub(v, tj_cast(along(in[2], r, axis), TJ_F32));
    return one(out, tj_mul(v, tj_cast(along(in[1], r, axis), TJ_F32)));
}

/* y_scale from the range of x and 0, y_zero_point where 0 lands, y in uint8 */
CONV(c_dynamic_quantize_linear) {
    (void)n_in;
    tj_tensor *x = tj_cast(in[0], TJ_F32);
    tj_tensor *lo = tj_minimum(tj_min(x, 0, NULL, 0), tj_scalar_f32(0)),
              *hi = tj_maximum(tj_max(x, 0, NULL, 0), tj_scalar_f32(0));
    tj_tensor *scale = tj_div(tj_sub(hi, lo), tj_scalar_f32(255));
    tj_tensor *zp = tj_cast(tj_round(tj_sub(tj_scalar_f32(0), tj_div(lo, scale))), TJ_U8);
    out[0] = quantize(x, scale, zp, TJ_U8);
    if (n_out > 1)
        out[1] = scale;
    if (n_out > 2)
        out[2] = zp;
    return TJ_OK;
}

/* ---- window functions (opset 17): sums of cosines of 2 pi k / N over k < size ------------------
 */
static tj_status window(const ox_node *n, tj_tensor *size, tj_tensor **out, double a0, double a1,
                        double a2) {
    int64_t *v = NULL, nv = ox_host_ints(n, size, "size", &v);
    if (nv != 1) {
        free(v);
        return nv < 0 ? TJ_ERR_UNSUPPORTED
                      : ox_fail(n, TJ_ERR_SHAPE, "size has %lld values, not one", (long long)nv);
    }
    int64_t len = v[0];
    free(v);
    int dt = ox_dtype((int32_t)ox_attr_i(n, "output_datatype", 1));
    if (len < 0 || dt < 0 || !(dt == TJ_F32 || dt == TJ_F64 || dt == TJ_F16))
        return ox_fail(n, TJ_ERR_INVALID, "size %lld, output_datatype %lld", (long long)len,
                       (long long)ox_attr_i(n, "output_datatype", 1));
    double den = ox_attr_i(n, "periodic", 1) ? (double)len : (double)(len - 1);
    tj_tensor *w = tj_mul(tj_range(TJ_F64, 0, (double)len, 1), tj_scalar_f64(2 * M_PI / den));
    tj_tensor *y = tj_add(tj_scalar_f64(a0), tj_mul(tj_scalar_f64(a1), tj_cos(w)));
    if (a2 != 0)
        y = tj_add(y, tj_mul(tj_scalar_f64(a2), tj_cos(tj_mul(w, tj_scalar_f64(2)))));
    return one(out, tj_cast(y, (tj_dtype)dt));
}
CONV(c_hann_window) {
    (void)n_in, (void)n_out;
    return window(n, in[0], out, 0.5, -0.5, 0);
}
CONV(c_hamming_window) {
    (void)n_in, (void)n_out;
    return window(n, in[0], out, 25.0 / 46, -(1 - 25.0 / 46), 0);
}
CONV(c_blackman_window) {
    (void)n_in, (void)n_out;
    return window(n, in[0], out, 0.42, -0.5, 0.08);
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
    {"BatchNormalization", c_batch_norm, 5, 5, 1, 0},
    {"BlackmanWindow", c_blackman_window, 1, 1, 17, 0x1},
    {"CastLike", c_cast_like, 2, 2, 15, 0},
    {"CumSum", c_cumsum, 2, 2, 11, 0x2},
    {"DepthToSpace", c_depth_to_space, 1, 1, 1, 0},
    {"DequantizeLinear", c_dequantize_linear, 2, 3, 10, 0},
    {"DynamicQuantizeLinear", c_dynamic_quantize_linear, 1, 1, 11, 0},
    {"EyeLike", c_eye_like, 1, 1, 9, 0},
    {"GatherElements", c_gather_elements, 2, 2, 11, 0},
    {"GlobalAveragePool", c_global_average_pool, 1, 1, 1, 0},
    {"GlobalMaxPool", c_global_max_pool, 1, 1, 1, 0},
    {"HammingWindow", c_hamming_window, 1, 1, 17, 0x1},
    {"HannWindow", c_hann_window, 1, 1, 17, 0x1},
    {"Hardmax", c_hardmax, 1, 1, 1, 0},
    {"InstanceNormalization", c_instance_norm, 3, 3, 1, 0},
    {"LayerNormalization", c_layer_norm, 2, 3, 17, 0},
    {"LRN", c_lrn, 1, 1, 1, 0},
    {"MeanVarianceNormalization", c_mvn, 1, 1, 9, 0},
    {"NegativeLogLikelihoodLoss", c_nll_loss, 2, 3, 12, 0},
    {"OneHot", c_one_hot, 3, 3, 9, 0x6},
    {"QuantizeLinear", c_quantize_linear, 2, 3, 10, 0},
    {"Shrink", c_shrink, 1, 1, 9, 0},
    {"SoftmaxCrossEntropyLoss", c_softmax_ce_loss, 2, 3, 12, 0},
    {"SpaceToDepth", c_space_to_depth, 1, 1, 1, 0},
    {"Trilu", c_trilu, 1, 2, 14, 0x2},
    {NULL, NULL, 0, 0, 0, 0},
};
