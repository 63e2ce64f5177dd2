/* ops_conv.c — ONNX's convolutions (Conv, ConvTranspose; 1-D to 3-D), pooling and Pad as tracejit
 * ops. ONNX is channels-first (NCHW, filters OIHW); tracejit's convolutions are NHWC / HWIO, so
 * layouts are transposed around them (the passes fold what they can); a convolution's explicit
 * pads go to tj_conv2d_pads, a max pool's to tj_max_pool2d_pads (each smaller than the window),
 * and other pools' explicit padding (ONNX's pads, SAME_LOWER, ceil_mode) is concatenated on
 * before a VALID window. */
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
/* tracejit's windows are 2-D (NHWC); ONNX's 1-D ones get H = 1, 3-D convolutions are sums of 2-D
 * ones over the depth taps, and pooling that tracejit's kernels lack (3-D, dilated, with Indices)
 * is a running max or sum over strided slices, one per tap of the window. */
#define MAX_SP 3
typedef struct window {
    int spatial; /* 1, 2 or 3 */
    int64_t k[MAX_SP], s[MAX_SP], d[MAX_SP];
    int64_t pad[2 * MAX_SP]; /* begins, then ends */
} window;

/* The window attributes of a conv or pool over x's spatial dims (k from the filter when given).
 * transposed: ConvTranspose, whose auto_pad is resolved by its converter. */
static tj_status window_of(const ox_node *n, tj_tensor *x, const int64_t *kdims, window *w,
                           int transposed) {
    int sp = tj_tensor_rank(x) - 2;
    if (sp < 1 || sp > MAX_SP)
        return ox_fail(n, TJ_ERR_UNSUPPORTED, "%d spatial dims (1 to 3 are supported)", sp);
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
            w->pad[i] = a[i], w->pad[MAX_SP + i] = a[sp + i];
    for (int i = 0; i < sp; i++)
        if (w->k[i] < 1 || w->s[i] < 1 || w->d[i] < 1 || w->k[i] > 4096 || w->s[i] > 4096 ||
            w->d[i] > 4096 || w->pad[i] < 0 || w->pad[MAX_SP + i] < 0 || w->pad[i] > 4096 ||
            w->pad[MAX_SP + i] > 4096)
            return ox_fail(n, TJ_ERR_SHAPE, "kernel %lld, stride %lld, dilation %lld, pads",
                           (long long)w->k[i], (long long)w->s[i], (long long)w->d[i]);
    char ap[16];
    ox_attr_s(n, "auto_pad", "NOTSET", ap, sizeof ap);
    if (!transposed && (!strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER"))) {
        for (int i = 0; i < sp; i++) {
            int64_t in_d = tj_tensor_dims(x)[2 + i], out_d = (in_d + w->s[i] - 1) / w->s[i];
            int64_t need = (out_d - 1) * w->s[i] + (w->k[i] - 1) * w->d[i] + 1 - in_d;
            need = need < 0 ? 0 : need;
            int64_t small = need / 2, big = need - small;
            w->pad[i] = ap[5] == 'U' ? small : big;
            w->pad[MAX_SP + i] = ap[5] == 'U' ? big : small;
        }
    } else if (!strcmp(ap, "VALID")) { /* no padding, transposed or not */
        memset(w->pad, 0, sizeof w->pad);
    }
    if (!transposed && ox_attr_i(n, "ceil_mode", 0))
        for (int i = 0; i < sp; i++) { /* the last partial window: extra padding at the end */
            int64_t in_d = tj_tensor_dims(x)[2 + i] + w->pad[i] + w->pad[MAX_SP + i];
            int64_t span = (w->k[i] - 1) * w->d[i] + 1, rem = (in_d - span) % w->s[i];
            if (rem)
                w->pad[MAX_SP + i] += w->s[i] - rem;
        }
    return TJ_OK;
}

/* The window's last two spatial values (1 for a missing H) as tracejit's {h, w}. */
static void hw2(const window *w, const int64_t *v, int *out) {
    int sp = w->spatial;
    out[0] = sp == 1 ? 1 : (int)v[sp - 2];
    out[1] = (int)v[sp - 1];
}

/* The channels-last axis of spatial dim i (1-D inputs get H = 1 at axis 1). */
static int cl_axis(const window *w, int i) {
    return 1 + i + (w->spatial == 1);
}

/* NC[D]HW (or NCL) to N[D]HWC; 1-D gets H = 1. */
static tj_tensor *to_cl(tj_tensor *x, const window *w) {
    if (w->spatial == 1) {
        const int64_t *d = tj_tensor_dims(x);
        int64_t r[4] = {d[0], d[1], 1, d[2]};
        x = tj_reshape(x, 4, r);
    }
    return w->spatial == 3 ? tj_transpose(x, (int[]){0, 2, 3, 4, 1})
                           : tj_transpose(x, (int[]){0, 2, 3, 1});
}

static tj_tensor *from_cl(tj_tensor *y, const window *w) {
    if (w->spatial == 3)
        return tj_transpose(y, (int[]){0, 4, 1, 2, 3});
    y = tj_transpose(y, (int[]){0, 3, 1, 2});
    if (w->spatial == 1) {
        const int64_t *d = tj_tensor_dims(y);
        int64_t r[3] = {d[0], d[1], d[3]};
        y = tj_reshape(y, 3, r);
    }
    return y;
}

/* to_cl with the window's padding of value v. */
static tj_tensor *to_cl_padded(tj_tensor *x, const window *w, tj_tensor *v) {
    x = to_cl(x, w);
    for (int i = 0; i < w->spatial; i++)
        x = pad_axis(x, cl_axis(w, i), w->pad[i], w->pad[MAX_SP + i], v);
    return x;
}

/* A filter laid out for tracejit: Conv's OIHW (or OIL / OIDHW) to [KD,] KH, KW, I, O, which is
 * also ConvTranspose's IOHW to [KD,] KH, KW, O, I as tj_conv2d_transpose takes it. */
static tj_tensor *filter_hwio(tj_tensor *f, const window *w) {
    if (w->spatial == 1) {
        const int64_t *d = tj_tensor_dims(f);
        int64_t r[4] = {d[0], d[1], 1, d[2]};
        f = tj_reshape(f, 4, r);
    }
    if (w->spatial == 3)
        return tj_transpose(f, (int[]){2, 3, 4, 1, 0});
    return tj_transpose(f, (int[]){2, 3, 1, 0});
}

/* Depth tap kd of a 3-D filter [KD, KH, KW, A, B]: [KH, KW, A, B]. */
static tj_tensor *depth_tap(tj_tensor *f, int64_t kd) {
    const int64_t *d = tj_tensor_dims(f);
    int64_t b[5] = {kd, 0, 0, 0, 0}, e[5] = {kd + 1, d[1], d[2], d[3], d[4]};
    return tj_reshape(tj_slice(f, b, e, NULL), 4, d + 1);
}

/* Converts one group (the node without its group attribute). */
typedef tj_status (*group_fn)(const ox_node *n, int n_in, tj_tensor *const *in, tj_tensor **out);

/* A grouped convolution: one convolution per group of input channels, concatenated. The filter's
 * axis 0 is split with the input channels (ConvTranspose, IOHW) or with the output channels
 * (Conv, OIHW); the bias with the output channels. */
static tj_status grouped(const ox_node *n, int n_in, tj_tensor *const *in, tj_tensor **out,
                         int64_t groups, group_fn fn, int transposed) {
    tj_tensor *x = in[0], *f = in[1];
    int64_t c = tj_tensor_rank(x) > 1 ? tj_tensor_dims(x)[1] : 0;
    int64_t m = tj_tensor_rank(f) > 1 ? tj_tensor_dims(f)[0] : 0;
    /* the range first: every division below is by groups */
    if (groups < 1 || groups > 4096 || c % groups || m % groups || (transposed && m != c))
        return ox_fail(n, TJ_ERR_SHAPE, "group=%lld for %lld channels and %lld filters",
                       (long long)groups, (long long)c, (long long)m);
    int64_t o = transposed ? (tj_tensor_rank(f) > 1 ? tj_tensor_dims(f)[1] : 0) : m / groups;
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
            int64_t bb[1] = {g * o}, be[1] = {(g + 1) * o};
            gin[2] = tj_slice(in[2], bb, be, NULL);
        }
        st = fn(&one_group, gin[2] ? 3 : 2, gin, &ys[g]);
    }
    if (!st)
        out[0] = tj_concat((int)groups, ys, 1);
    free(attrs);
    free(ys);
    return st;
}

/* A convolution's weight has the input's rank (its kernel dims are read from it). */
static tj_status weight_rank(const ox_node *n, tj_tensor *x, tj_tensor *f) {
    int r = tj_tensor_rank(x);
    if (tj_tensor_rank(f) != r || r < 3)
        return ox_fail(n, TJ_ERR_SHAPE, "the weight has rank %d for %d spatial dims",
                       tj_tensor_rank(f), r - 2);
    return TJ_OK;
}

/* Whether the pads are those TensorFlow's SAME gives x's spatial dims (ceil(in / s) outputs, the
 * odd pad after): then the convolution pads itself instead of a concat of zeros per side. */
static int pads_are_same(const window *w, tj_tensor *x) {
    int any = 0;
    for (int i = 0; i < w->spatial; i++) {
        int64_t in = tj_tensor_dims(x)[2 + i], s = w->s[i], span = (w->k[i] - 1) * w->d[i] + 1;
        int64_t total = ((in + s - 1) / s - 1) * s + span - in;
        total = total > 0 ? total : 0;
        if (w->pad[i] != total / 2 || w->pad[MAX_SP + i] != total - total / 2)
            return 0;
        any |= total > 0;
    }
    return any;
}

static tj_status conv_one(const ox_node *n, int n_in, tj_tensor *const *in, tj_tensor **out) {
    tj_tensor *x = in[0], *f = in[1];
    int pre = ox_prelaid(n); /* f laid out in HWIO when the model was read */
    window w;
    tj_status st = weight_rank(n, x, f);
    if (st || (st = window_of(n, x, tj_tensor_dims(f) + (pre ? 0 : 2), &w, 0)))
        return st;
    int same = w.spatial <= 2 && pads_are_same(&w, x), explicit = w.spatial <= 2 && !same;
    tj_tensor *xh = same || explicit ? to_cl(x, &w) : to_cl_padded(x, &w, like(x, 0)),
              *fh = pre ? f : filter_hwio(f, &w), *y = NULL;
    int strides[2], dil[2];
    hw2(&w, w.s, strides);
    hw2(&w, w.d, dil);
    if (w.spatial == 3 && !tj_status_of(xh) && !tj_status_of(fh)) {
        /* the sum over depth taps kd of 2-D convolutions of the depth slices kd*d + od*s */
        const int64_t *xd = tj_tensor_dims(xh);
        int64_t kd_n = tj_tensor_dims(fh)[0], span = (kd_n - 1) * w.d[0] + 1;
        int64_t od = xd[1] >= span ? (xd[1] - span) / w.s[0] + 1 : 0;
        if (od < 1)
            return ox_fail(n, TJ_ERR_SHAPE,
                           "the filter's depth %lld (dilated %lld) is larger "
                           "than the padded input's %lld",
                           (long long)kd_n, (long long)span, (long long)xd[1]);
        for (int64_t kd = 0; kd < kd_n; kd++) {
            int64_t b[5] = {0, kd * w.d[0], 0, 0, 0},
                    e[5] = {xd[0], kd * w.d[0] + (od - 1) * w.s[0] + 1, xd[2], xd[3], xd[4]},
                    s[5] = {1, w.s[0], 1, 1, 1}, r[4] = {xd[0] * od, xd[2], xd[3], xd[4]};
            tj_tensor *xs = tj_reshape(tj_slice(xh, b, e, s), 4, r);
            tj_tensor *yk = tj_conv2d(xs, depth_tap(fh, kd), strides, TJ_PAD_VALID, dil);
            y = y ? tj_add(y, yk) : yk;
        }
        if (!tj_status_of(y)) {
            const int64_t *yd = tj_tensor_dims(y);
            int64_t r[5] = {xd[0], od, yd[1], yd[2], yd[3]};
            y = tj_reshape(y, 5, r);
        }
    } else if (explicit) { /* the convolution reads its zero border itself */
        int64_t pads[4] = {w.spatial == 1 ? 0 : w.pad[0], w.spatial == 1 ? 0 : w.pad[MAX_SP],
                           w.pad[w.spatial - 1], w.pad[MAX_SP + w.spatial - 1]};
        y = tj_conv2d_pads(xh, fh, strides, pads, dil);
    } else {
        y = tj_conv2d(xh, fh, strides, same ? TJ_PAD_SAME : TJ_PAD_VALID, dil);
    }
    if (n_in > 2 && in[2])
        y = tj_bias_add(y, in[2]);
    return one(out, from_cl(y, &w));
}

/* A grouped Conv is one convolution: its weight [M, C/group, k...] in HWIO is the grouped filter
 * tj_conv2d takes (as tf.nn.conv2d, the groups are C over the filter's input channels), so the
 * attribute only has to agree with the shapes. */
CONV(c_conv) {
    (void)n_out;
    int64_t groups = ox_attr_i(n, "group", 1);
    tj_tensor *x = in[0], *f = in[1];
    int pre = ox_prelaid(n); /* f in HWIO (rank 4): O and I are its last dims */
    int64_t c = tj_tensor_rank(x) > 1 ? tj_tensor_dims(x)[1] : 0;
    int64_t m = tj_tensor_rank(f) > 1 ? tj_tensor_dims(f)[pre ? 3 : 0] : 0;
    int64_t fc = tj_tensor_rank(f) > 1 ? tj_tensor_dims(f)[pre ? 2 : 1] : 0;
    if (groups < 1 || groups > c || c % groups || m % groups || fc != c / groups)
        return ox_fail(n, TJ_ERR_SHAPE,
                       "group=%lld for %lld channels and %lld filters of %lld channels",
                       (long long)groups, (long long)c, (long long)m, (long long)fc);
    return conv_one(n, n_in, in, out);
}

/* Python's floor division (ONNX's reference computes ConvTranspose's pads with it). */
static int64_t floordiv(int64_t a, int64_t b) {
    int64_t q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

/* ConvTranspose: the full output of each spatial dim, (in - 1) * s + (k - 1) * d + 1, from
 * tracejit's conv2d_transpose (VALID), then cropped by the pads (or extended by
 * output_padding); 3-D: the depth taps' 2-D results spread along depth at kd*d + id*s. */
static tj_status conv_transpose_one(const ox_node *n, int n_in, tj_tensor *const *in,
                                    tj_tensor **out) {
    tj_tensor *x = in[0], *f = in[1];
    window w;
    tj_status st = weight_rank(n, x, f);
    if (st || (st = window_of(n, x, tj_tensor_dims(f) + 2, &w, 1)))
        return st;
    int sp = w.spatial;
    const int64_t *opad, *oshape, *xd = tj_tensor_dims(x);
    size_t n_opad = ox_attr_ints(n, "output_padding", &opad);
    size_t n_oshape = ox_attr_ints(n, "output_shape", &oshape);
    if ((n_opad && n_opad != (size_t)sp) ||
        (n_oshape && n_oshape != (size_t)sp && n_oshape != (size_t)sp + 2))
        return ox_fail(n, TJ_ERR_SHAPE,
                       "%zu output_padding and %zu output_shape values for %d "
                       "spatial dims",
                       n_opad, n_oshape, sp);
    char ap[16];
    ox_attr_s(n, "auto_pad", "NOTSET", ap, sizeof ap);
    int same = !strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER");
    int64_t full[MAX_SP], lo[MAX_SP], hi[MAX_SP]; /* hi < 0 extends the end */
    for (int i = 0; i < sp; i++) {
        int64_t op = n_opad ? opad[i] : 0;
        if (op < 0 || op > 4096)
            return ox_fail(n, TJ_ERR_SHAPE, "output_padding %lld", (long long)op);
        full[i] = (xd[2 + i] - 1) * w.s[i] + (w.k[i] - 1) * w.d[i] + 1;
        lo[i] = w.pad[i], hi[i] = w.pad[MAX_SP + i] - op;
        if (n_oshape || same) {
            int64_t want =
                n_oshape ? oshape[n_oshape - (size_t)sp + (size_t)i] : xd[2 + i] * w.s[i];
            int64_t total = full[i] + op - want;
            if (want < 0 || total > 4 * full[i] + 8192 || -total > 8192)
                return ox_fail(n, TJ_ERR_SHAPE, "output size %lld for input %lld", (long long)want,
                               (long long)xd[2 + i]);
            int64_t half = floordiv(total, 2);
            lo[i] = !strcmp(ap, "SAME_UPPER") ? half : total - half;
            hi[i] = total - lo[i] - op;
        }
        if (full[i] - lo[i] - hi[i] - op < 0 || full[i] < 1)
            return ox_fail(n, TJ_ERR_SHAPE, "pads larger than the output of spatial dim %d", i);
    }
    tj_tensor *xh = to_cl(x, &w), *fh = filter_hwio(f, &w), *zero = like(x, 0), *y = NULL;
    if (tj_status_of(xh) || tj_status_of(fh))
        return one(out, tj_status_of(xh) ? xh : fh);
    int strides[2], dil[2];
    hw2(&w, w.s, strides);
    hw2(&w, w.d, dil);
    int64_t m = tj_tensor_dims(f)[1];
    const int64_t *hd = tj_tensor_dims(xh);
    if (sp == 3) {
        int64_t nd = hd[0] * hd[1], r[4] = {nd, hd[2], hd[3], hd[4]};
        int64_t od[4] = {nd, full[1], full[2], m}, spread = (hd[1] - 1) * w.s[0] + 1;
        tj_tensor *x2 = tj_reshape(xh, 4, r);
        for (int64_t kd = 0; kd < w.k[0]; kd++) {
            tj_tensor *t =
                tj_conv2d_transpose(x2, depth_tap(fh, kd), od, strides, TJ_PAD_VALID, dil);
            int64_t r5[5] = {hd[0], hd[1], full[1], full[2], m};
            t = tj_reshape(t, 5, r5);
            if (w.s[0] > 1) { /* depth i to i * s: s - 1 zero slices after each, the last cut */
                int64_t r6[6] = {hd[0], hd[1], 1, full[1], full[2], m};
                t = pad_axis(tj_reshape(t, 6, r6), 2, 0, w.s[0] - 1, zero);
                int64_t r5s[5] = {hd[0], hd[1] * w.s[0], full[1], full[2], m};
                t = pad_axis(tj_reshape(t, 5, r5s), 1, 0, -(w.s[0] - 1), zero);
            }
            t = pad_axis(t, 1, kd * w.d[0], full[0] - kd * w.d[0] - spread, zero);
            y = y ? tj_add(y, t) : t;
        }
    } else {
        int64_t od[4] = {hd[0], sp == 1 ? 1 : full[0], full[sp - 1], m};
        y = tj_conv2d_transpose(xh, fh, od, strides, TJ_PAD_VALID, dil);
    }
    for (int i = 0; i < sp; i++)
        y = pad_axis(y, cl_axis(&w, i), -lo[i], -hi[i], zero);
    if (n_in > 2 && in[2])
        y = tj_bias_add(y, in[2]);
    return one(out, from_cl(y, &w));
}

CONV(c_conv_transpose) {
    (void)n_out;
    int64_t groups = ox_attr_i(n, "group", 1);
    if (groups != 1)
        return grouped(n, n_in, in, out, groups, conv_transpose_one, 1);
    return conv_transpose_one(n, n_in, in, out);
}

/* Pooling as a running max (with the flat index of the winner, ONNX's Indices, when idx is not
 * NULL) or sum over one strided slice of the padded input per tap of the window: any rank,
 * dilation. Padding is -inf for a max (it never wins), 0 for a sum. */
static tj_status window_taps(const ox_node *n, tj_tensor *x, const window *w, int is_max,
                             tj_tensor **res, tj_tensor **idx, int col_major) {
    int sp = w->spatial;
    int64_t xd[2 + MAX_SP], o[MAX_SP], taps = 1, plane = 1, opos = 1;
    memcpy(xd, tj_tensor_dims(x), (size_t)(2 + sp) * sizeof *xd);
    tj_tensor *xp = x;
    for (int i = 0; i < sp; i++) {
        int64_t padded = xd[2 + i] + w->pad[i] + w->pad[MAX_SP + i];
        int64_t span = (w->k[i] - 1) * w->d[i] + 1;
        if (padded < span)
            return ox_fail(n, TJ_ERR_SHAPE,
                           "the window (%lld dilated) is larger than the padded "
                           "input (%lld) on spatial dim %d",
                           (long long)span, (long long)padded, i);
        o[i] = (padded - span) / w->s[i] + 1;
        taps *= w->k[i], plane *= xd[2 + i], opos *= o[i];
        xp = pad_axis(xp, 2 + i, w->pad[i], w->pad[MAX_SP + i], like(x, is_max ? -INFINITY : 0));
    }
    if (taps > 1024)
        return ox_fail(n, TJ_ERR_UNSUPPORTED, "a window of %lld taps (1024 at most)",
                       (long long)taps);
    int64_t *pos = NULL;
    tj_tensor *acc = NULL, *base = NULL, **stack = NULL;
    if (!idx && taps > 8 && !(stack = calloc((size_t)taps, sizeof *stack)))
        return tj_set_error(TJ_ERR_OOM, "onnx: out of memory");
    if (idx) { /* (n * C + c) * plane, plus the window's position per tap */
        int64_t bd[2 + MAX_SP] = {xd[0], xd[1], 1, 1, 1};
        base = tj_reshape(
            tj_mul(tj_range(TJ_I64, 0, (double)(xd[0] * xd[1]), 1), tj_scalar_i64(plane)), 2 + sp,
            bd);
        if (!(pos = malloc((size_t)opos * sizeof *pos)))
            return tj_set_error(TJ_ERR_OOM, "onnx: out of memory");
    }
    for (int64_t t = 0; t < taps; t++) {
        int64_t kk[MAX_SP], rest = t, b[2 + MAX_SP] = {0}, e[2 + MAX_SP], s[2 + MAX_SP];
        for (int i = sp - 1; i >= 0; i--)
            kk[i] = rest % w->k[i], rest /= w->k[i];
        e[0] = xd[0], e[1] = xd[1], s[0] = s[1] = 1;
        for (int i = 0; i < sp; i++) {
            b[2 + i] = kk[i] * w->d[i];
            e[2 + i] = b[2 + i] + (o[i] - 1) * w->s[i] + 1;
            s[2 + i] = w->s[i];
        }
        tj_tensor *sl = tj_slice(xp, b, e, s), *it = NULL;
        if (pos) { /* this tap's unpadded flat position in each window */
            int64_t stride[MAX_SP], acc_stride = 1;
            for (int j = 0; j < sp; j++) { /* row-major: the last dim varies fastest */
                int i = col_major ? j : sp - 1 - j;
                stride[i] = acc_stride, acc_stride *= xd[2 + i];
            }
            for (int64_t q = 0; q < opos; q++) {
                int64_t r = q, flat = 0;
                for (int i = sp - 1; i >= 0; i--) {
                    flat += ((r % o[i]) * w->s[i] + kk[i] * w->d[i] - w->pad[i]) * stride[i];
                    r /= o[i];
                }
                pos[q] = flat;
            }
            it = tj_add(base, tj_tensor_from_data(TJ_I64, sp, o, pos));
        }
        if (stack) {
            stack[t] = tj_expand_dims(sl, 0);
        } else if (!acc) {
            acc = sl;
            if (idx)
                *idx = it;
        } else if (is_max) {
            tj_tensor *better = tj_greater(sl, acc);
            acc = tj_where(better, sl, acc);
            if (idx)
                *idx = tj_where(better, it, *idx);
        } else {
            acc = tj_add(acc, sl);
        }
    }
    free(pos);
    if (stack) { /* one reduction over the stacked taps */
        tj_tensor *all = tj_concat((int)taps, stack, 0);
        acc = is_max ? tj_max(all, 1, (int[]){0}, 0) : tj_sum(all, 1, (int[]){0}, 0);
        free(stack);
    }
    *res = acc;
    return TJ_OK;
}

/* window_taps; without Indices a max or sum over a box is separable: one pass per spatial dim
 * (k0 + k1 + ... slices, not k0 * k1 * ...). */
static tj_status window_reduce(const ox_node *n, tj_tensor *x, const window *w, int is_max,
                               tj_tensor **res, tj_tensor **idx) {
    if (idx)
        return window_taps(n, x, w, is_max, res, idx, ox_attr_i(n, "storage_order", 0) == 1);
    for (int i = 0; i < w->spatial; i++) {
        window one_dim = *w;
        for (int j = 0; j < w->spatial; j++)
            if (j != i)
                one_dim.k[j] = one_dim.s[j] = one_dim.d[j] = 1,
                one_dim.pad[j] = one_dim.pad[MAX_SP + j] = 0;
        tj_status st = window_taps(n, x, &one_dim, is_max, &x, NULL, 0);
        if (st)
            return st;
    }
    *res = x;
    return TJ_OK;
}

static tj_status pool(const ox_node *n, tj_tensor *x, tj_tensor **out, int is_max, int n_out) {
    window w;
    tj_status st = window_of(n, x, NULL, &w, 0);
    if (st)
        return st;
    int sp = w.spatial;
    int dilated = 0;
    for (int i = 0; i < sp; i++)
        dilated |= w.d[i] != 1;
    int fl = tj_tensor_dtype(x) == TJ_F32 || tj_tensor_dtype(x) == TJ_F64;
    /* one slice per tap where no tracejit op fits: 3-D, Indices, integers, a dilated average */
    if (sp == 3 || (dilated && !is_max) || n_out > 1 || !fl) {
        tj_tensor *y = NULL;
        if ((st = window_reduce(n, x, &w, is_max, &y, n_out > 1 ? &out[1] : NULL)))
            return st;
        if (!is_max) {
            int64_t taps = 1;
            for (int i = 0; i < sp; i++)
                taps *= w.k[i];
            tj_tensor *cnt = like(x, (double)taps);
            if (!ox_attr_i(n, "count_include_pad", 0) &&
                (st = window_reduce(
                     n, tj_ones(tj_tensor_dtype(x), tj_tensor_rank(x), tj_tensor_dims(x)), &w, 0,
                     &cnt, NULL)))
                return st;
            y = tj_div(y, cnt);
        }
        return one(out, y);
    }
    int k[2], s[2], d[2];
    hw2(&w, w.k, k);
    hw2(&w, w.s, s);
    hw2(&w, w.d, d);
    int64_t pads[4] = {sp == 1 ? 0 : w.pad[0], sp == 1 ? 0 : w.pad[MAX_SP], w.pad[sp - 1],
                       w.pad[MAX_SP + sp - 1]};
    if (is_max && !dilated && pads[0] < k[0] && pads[1] < k[0] && pads[2] < k[1] && pads[3] < k[1])
        /* the pool reads its border itself (ResNet's stem: two 1.6 ms copies at batch 1) */
        return one(out, from_cl(tj_max_pool2d_pads(to_cl(x, &w), k, s, pads), &w));
    if (is_max) /* dilated or not: one tracejit op */
        return one(out, from_cl(tj_max_pool2d_dilated(to_cl_padded(x, &w, like(x, -INFINITY)), k, s,
                                                      TJ_PAD_VALID, d),
                                &w));
    tj_tensor *sum = tj_avg_pool2d(to_cl_padded(x, &w, like(x, 0)), k, s, TJ_PAD_VALID);
    if (!ox_attr_i(n, "count_include_pad", 0)) { /* divide by the real elements in each window */
        tj_tensor *ones = tj_ones(tj_tensor_dtype(x), tj_tensor_rank(x), tj_tensor_dims(x));
        tj_tensor *cnt = tj_avg_pool2d(to_cl_padded(ones, &w, like(x, 0)), k, s, TJ_PAD_VALID);
        sum = tj_div(sum, cnt);
    }
    return one(out, from_cl(sum, &w));
}
CONV(c_max_pool) {
    (void)n_in;
    return pool(n, in[0], out, 1, n_out);
}
CONV(c_average_pool) {
    (void)n_in;
    return pool(n, in[0], out, 0, n_out);
}

const ox_op ox_ops_conv[] = {
    {"Pad", c_pad, 1, 4, 1, 0x6},
    {"Conv", c_conv, 2, 3, 1, 0},
    {"ConvTranspose", c_conv_transpose, 2, 3, 1, 0},
    {"MaxPool", c_max_pool, 1, 1, 1, 0},
    {"AveragePool", c_average_pool, 1, 1, 1, 0},
    {NULL, NULL, 0, 0, 0, 0},
};
