/* ops_conv.c — ONNX's convolution, pooling (1-D and 2-D) and Pad as tracejit ops. ONNX is
 * channels-first (NCHW, filters OIHW); tracejit's convolutions are NHWC / HWIO, so layouts are
 * transposed around them (the passes fold what they can) and explicit padding (ONNX's pads,
 * SAME_LOWER, ceil_mode) is concatenated on before a VALID window. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ---- padding -----------------------------------------------------------------------------------
 */
/* x padded on axis a with lo / hi elements of value v (negative: cropped). */
static tj_tensor *pad_axis(tj_tensor *x, int a, int64_t lo, int64_t hi, tj_tensor *v) {
    int rank = tj_tensor_rank(x);
    if (tj_status_of(x) || a < 0 || a >= rank)
        return x;
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

/* The lo (side 0) or hi (side 1) padding of axis a: cnt copies of the edge, or the reflection
 * of the cnt elements next to it. */
static tj_tensor *pad_part(tj_tensor *x, int a, int side, int64_t cnt, int reflect) {
    int rank = tj_tensor_rank(x);
    if (tj_status_of(x) || a < 0 || a >= rank)
        return x;
    int64_t len = tj_tensor_dims(x)[a], b[TJ_MAX_RANK], e[TJ_MAX_RANK], s[TJ_MAX_RANK];
    for (int d = 0; d < rank; d++)
        b[d] = 0, e[d] = tj_tensor_dims(x)[d], s[d] = 1;
    if (reflect) { /* lo: x[cnt] ... x[1]; hi: x[len-2] ... x[len-1-cnt] */
        b[a] = side ? len - 2 : cnt, s[a] = -1;
        e[a] = side ? len - 2 - cnt : 0;
        if (e[a] < 0)
            e[a] = INT64_MIN / 2; /* through the first element */
        return tj_slice(x, b, e, s);
    }
    int64_t d2[TJ_MAX_RANK];
    memcpy(d2, tj_tensor_dims(x), (size_t)rank * sizeof *d2);
    b[a] = side ? len - 1 : 0, e[a] = b[a] + 1, d2[a] = cnt;
    return tj_broadcast_to(tj_slice(x, b, e, NULL), rank, d2);
}

/* x padded on axis a by repeating its edge, or by its reflection (without the edge). */
static tj_tensor *pad_copy(tj_tensor *x, int a, int64_t lo, int64_t hi, int reflect) {
    tj_tensor *seq[3];
    int m = 0;
    if (lo > 0)
        seq[m++] = pad_part(x, a, 0, lo, reflect);
    seq[m++] = x;
    if (hi > 0)
        seq[m++] = pad_part(x, a, 1, hi, reflect);
    return m == 1 ? x : tj_concat(m, seq, a);
}

CONV(c_pad) {
    tj_tensor *x = in[0];
    int rank = tj_tensor_rank(x);
    char mode[16];
    ox_attr_s(n, "mode", "constant", mode, sizeof mode);
    int copy = !strcmp(mode, "edge") ? 1 : !strcmp(mode, "reflect") ? 2 : 0;
    if (!copy && strcmp(mode, "constant"))
        return ox_fail(n, TJ_ERR_UNSUPPORTED, "mode '%s'", mode);
    int64_t *p = NULL, cnt;
    tj_tensor *v = like(x, 0);
    if (n->opset < 11) {
        const int64_t *a;
        cnt = (int64_t)ox_attr_ints(n, "pads", &a);
        p = ox_dup_ints(a, cnt);
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
    for (int d = 0; d < rank; d++) {
        if (copy && (p[d] < 0 || p[d + rank] < 0 ||
                     (copy == 2 &&
                      (p[d] >= tj_tensor_dims(x)[d] || p[d + rank] >= tj_tensor_dims(x)[d])))) {
            free(p);
            return ox_fail(n, TJ_ERR_SHAPE, "pads of axis %d do not fit mode '%s'", d, mode);
        }
        x = copy ? pad_copy(x, d, p[d], p[d + rank], copy == 2)
                 : pad_axis(x, d, p[d], p[d + rank], v);
    }
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
    if ((na = ox_attr_ints(n, "strides", &a)) == (size_t)sp)
        for (int i = 0; i < sp; i++)
            w->s[i] = a[i];
    if ((na = ox_attr_ints(n, "dilations", &a)) == (size_t)sp)
        for (int i = 0; i < sp; i++)
            w->d[i] = a[i];
    if ((na = ox_attr_ints(n, "pads", &a)) == (size_t)(2 * sp))
        for (int i = 0; i < sp; i++)
            w->pad[i] = a[i], w->pad[2 + i] = a[sp + i];
    for (int i = 0; i < sp; i++)
        if (w->k[i] < 1 || w->s[i] < 1 || w->d[i] < 1 || w->k[i] > 4096 || w->s[i] > 4096 ||
            w->d[i] > 4096 || w->pad[i] < 0 || w->pad[2 + i] < 0 || w->pad[i] > 4096 ||
            w->pad[2 + i] > 4096)
            return ox_fail(n, TJ_ERR_SHAPE, "kernel %lld, stride %lld, dilation %lld, pads",
                           (long long)w->k[i], (long long)w->s[i], (long long)w->d[i]);
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
    int64_t groups = ox_attr_i(n, "group", 1);
    if (groups != 1) { /* one convolution per group of channels, concatenated */
        int64_t c = tj_tensor_rank(x) > 1 ? tj_tensor_dims(x)[1] : 0;
        int64_t m = tj_tensor_rank(f) > 0 ? tj_tensor_dims(f)[0] : 0;
        if (groups < 1 || c % groups || m % groups || groups > 4096)
            return ox_fail(n, TJ_ERR_SHAPE, "group=%lld for %lld channels and %lld filters",
                           (long long)groups, (long long)c, (long long)m);
        tj_tensor **ys = calloc((size_t)groups, sizeof *ys);
        if (!ys)
            return tj_set_error(TJ_ERR_OOM, "onnx: out of memory");
        ox_node one_group = *n;
        Onnx__NodeProto p = *n->p; /* the same node without its group attribute */
        Onnx__AttributeProto **attrs = calloc(p.n_attribute + 1, sizeof *attrs);
        size_t na = 0;
        for (size_t k = 0; attrs && k < p.n_attribute; k++)
            if (strcmp(p.attribute[k]->name, "group"))
                attrs[na++] = p.attribute[k];
        p.attribute = attrs, p.n_attribute = na;
        one_group.p = &p;
        tj_status st = attrs ? TJ_OK : tj_set_error(TJ_ERR_OOM, "onnx: out of memory");
        for (int64_t g = 0; g < groups && !st; g++) {
            int64_t xb[TJ_MAX_RANK] = {0}, xe[TJ_MAX_RANK], fb[TJ_MAX_RANK] = {0}, fe[TJ_MAX_RANK];
            for (int d = 0; d < tj_tensor_rank(x); d++)
                xe[d] = tj_tensor_dims(x)[d], fe[d] = tj_tensor_dims(f)[d];
            xb[1] = g * (c / groups), xe[1] = (g + 1) * (c / groups);
            fb[0] = g * (m / groups), fe[0] = (g + 1) * (m / groups);
            tj_tensor *gin[3] = {tj_slice(x, xb, xe, NULL), tj_slice(f, fb, fe, NULL), NULL};
            if (n_in > 2 && in[2]) {
                int64_t bb[1] = {fb[0]}, be[1] = {fe[0]};
                gin[2] = tj_slice(in[2], bb, be, NULL);
            }
            st = c_conv(&one_group, gin[2] ? 3 : 2, gin, 1, &ys[g]);
        }
        if (!st)
            out[0] = tj_concat((int)groups, ys, 1);
        free(attrs);
        free(ys);
        return st;
    }
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

const ox_op ox_ops_conv[] = {
    {"Pad", c_pad, 1, 4, 1, 0x6},
    {"Conv", c_conv, 2, 3, 1, 0},
    {"MaxPool", c_max_pool, 1, 1, 1, 0},
    {"AveragePool", c_average_pool, 1, 1, 1, 0},
    {NULL, NULL, 0, 0, 0, 0},
};
