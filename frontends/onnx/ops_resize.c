/* ops_resize.c — ONNX's Resize (opsets 10 to 13) and Upsample as separable passes, one per
 * resized axis. Each output index reads n taps of the input (1 nearest, 2 linear, 4 cubic) at
 * indices and with weights computed when the function is traced, from scales or sizes known then
 * (constants, or value inputs the function is specialized on), by the formulas of ONNX's
 * reference (onnx/backend/test/case/node/resize.py): the source coordinate of each
 * coordinate_transformation_mode, neighbours taken from the edge-padded axis, cubic coefficients
 * with cubic_coeff_a, exclude_outside, tf_crop_and_resize's extrapolation_value. A pass is a
 * gather per tap times a constant weight row, summed: tracejit fuses it and differentiates it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

enum { NEAREST, LINEAR, CUBIC };
enum { HALF_PIXEL, PYTORCH_HALF_PIXEL, ALIGN_CORNERS, ASYMMETRIC, TF_HALF_PIXEL_FOR_NN, CROP };
enum { PREFER_FLOOR, PREFER_CEIL, FLOOR, CEIL };

typedef struct rs_mode {
    int interp, coord, nearest, exclude;
    double a, extrap;
} rs_mode;

/* The source coordinate of output index o on an axis of `in` elements; NAN outside a crop. */
static double src_coord(const rs_mode *m, double o, double scale, int64_t in, double roi_lo,
                        double roi_hi) {
    double out_w = scale * (double)in, last = (double)(in - 1);
    switch (m->coord) {
    case ALIGN_CORNERS:
        return out_w == 1 ? 0 : o * last / (out_w - 1);
    case ASYMMETRIC:
        return o / scale;
    case CROP: {
        double x =
            out_w == 1 ? (roi_hi - roi_lo) * last / 2 : o * (roi_hi - roi_lo) * last / (out_w - 1);
        x += roi_lo * last;
        return x < 0 || x > last ? NAN : x;
    }
    case TF_HALF_PIXEL_FOR_NN:
        return (o + 0.5) / scale;
    case PYTORCH_HALF_PIXEL:
        return out_w == 1 ? -0.5 : (o + 0.5) / scale - 0.5;
    default:
        return (o + 0.5) / scale - 0.5;
    }
}

static int64_t clamp_index(double i, int64_t in) {
    return i < 0 ? 0 : i > (double)(in - 1) ? in - 1 : (int64_t)i;
}

/* The n taps of source coordinate x: indices (clamped: the edge-padded axis) and weights. As the
 * reference, the left neighbour is preferred, so the ratio is in (0, 1]. */
static void taps_of(const rs_mode *m, double x, int64_t in, int n, int64_t *idx, double *w) {
    double base = floor(x), r = x - base;
    if (r == 0)
        base -= 1, r = 1;
    if (m->interp == NEAREST) {
        int up = r == 1 || m->nearest == CEIL || (m->nearest == PREFER_FLOOR && r > 0.5) ||
                 (m->nearest == PREFER_CEIL && r >= 0.5);
        idx[0] = clamp_index(base + up, in), w[0] = 1;
        return;
    }
    double c[4], first = base, a = m->a, s = 0;
    if (m->interp == LINEAR) {
        c[0] = 1 - r, c[1] = r;
    } else {
        double q = 1 - r;
        c[0] = ((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a;
        c[1] = ((a + 2) * r - (a + 3)) * r * r + 1;
        c[2] = ((a + 2) * q - (a + 3)) * q * q + 1;
        c[3] = ((a * (q + 1) - 5 * a) * (q + 1) + 8 * a) * (q + 1) - 4 * a;
        first = base - 1;
    }
    for (int j = 0; j < n; j++) {
        double i = first + j;
        if (m->exclude && (i < 0 || i >= (double)in))
            c[j] = 0;
        idx[j] = clamp_index(i, in), s += c[j];
    }
    for (int j = 0; j < n; j++)
        w[j] = m->exclude && s != 0 ? c[j] / s : c[j];
}

/* A row of `out` values along axis a of a rank-`rank` tensor (every other dim 1), of dtype dt. */
static tj_tensor *axis_row(const double *v, int64_t out, int rank, int a, tj_dtype dt) {
    int64_t d[TJ_MAX_RANK];
    for (int k = 0; k < rank; k++)
        d[k] = k == a ? out : 1;
    return tj_cast(tj_tensor_from_data(TJ_F64, rank, d, v), dt);
}

/* One pass: x resized along axis a to `out` elements. */
static tj_status resize_axis(const rs_mode *m, tj_tensor **x, int a, int64_t out, double scale,
                             double roi_lo, double roi_hi) {
    int rank = tj_tensor_rank(*x), nt = m->interp == NEAREST ? 1 : m->interp == LINEAR ? 2 : 4;
    int64_t in = tj_tensor_dims(*x)[a];
    int64_t *idx = malloc((size_t)(out * nt + 1) * sizeof *idx),
            *col = malloc((size_t)(out + 1) * sizeof *col);
    double *w = malloc((size_t)(out * nt + 1) * sizeof *w),
           *row = malloc((size_t)(out + 1) * sizeof *row),
           *outside = calloc((size_t)out + 1, sizeof *outside);
    tj_status st =
        idx && col && w && row && outside ? TJ_OK : tj_set_error(TJ_ERR_OOM, "onnx: out of memory");
    int identity = !st && out == in, any_outside = 0;
    for (int64_t o = 0; o < out && !st; o++) {
        double x0 = src_coord(m, (double)o, scale, in, roi_lo, roi_hi);
        if (x0 != x0) { /* outside the crop: the extrapolation value */
            outside[o] = 1, any_outside = 1, identity = 0;
            for (int j = 0; j < nt; j++)
                idx[o * nt + j] = 0, w[o * nt + j] = 0;
            continue;
        }
        taps_of(m, x0, in, nt, idx + o * nt, w + o * nt);
        for (int j = 0; j < nt; j++)
            identity &= w[o * nt + j] == 0 || (w[o * nt + j] == 1 && idx[o * nt + j] == o);
    }
    if (!st && !identity) {
        tj_tensor *y = NULL, *src = *x;
        for (int j = 0; j < nt; j++) {
            for (int64_t o = 0; o < out; o++)
                col[o] = idx[o * nt + j], row[o] = w[o * nt + j];
            tj_tensor *g = tj_gather(src, tj_tensor_from_data(TJ_I64, 1, &out, col), a);
            if (nt > 1 || any_outside)
                g = tj_mul(g, axis_row(row, out, rank, a, tj_tensor_dtype(src)));
            y = y ? tj_add(y, g) : g;
        }
        if (any_outside) {
            for (int64_t o = 0; o < out; o++)
                outside[o] *= m->extrap;
            y = tj_add(y, axis_row(outside, out, rank, a, tj_tensor_dtype(src)));
        }
        *x = y;
    }
    free(idx), free(col), free(w), free(row), free(outside);
    return st;
}

static int pick(const char *s, const char *const *names, int n) {
    for (int k = 0; k < n; k++)
        if (!strcmp(s, names[k]))
            return k;
    return -1;
}

/* Resize (10: X, scales; 11+: X, roi, scales, sizes) and Upsample (9: X, scales). Opset 10 and
 * Upsample take asymmetric coordinates and the floor of nearest, as those opsets define. */
static tj_status resize(const ox_node *n, tj_tensor *x, tj_tensor *roi_t, tj_tensor *scales_t,
                        tj_tensor *sizes_t, int legacy, tj_tensor **out) {
    static const char *const interps[] = {"nearest", "linear", "cubic"};
    static const char *const coords[] = {"half_pixel",           "pytorch_half_pixel",
                                         "align_corners",        "asymmetric",
                                         "tf_half_pixel_for_nn", "tf_crop_and_resize"};
    static const char *const nearests[] = {"round_prefer_floor", "round_prefer_ceil", "floor",
                                           "ceil"};
    char b1[32], b2[32], b3[32];
    rs_mode m = {0};
    const char *mode = ox_attr_s(n, "mode", "nearest", b1, sizeof b1);
    m.interp = pick(mode, interps, 3);
    if (legacy && !strcmp(mode, "bilinear"))
        m.interp = LINEAR;
    m.coord =
        legacy ? ASYMMETRIC
               : pick(ox_attr_s(n, "coordinate_transformation_mode", "half_pixel", b2, sizeof b2),
                      coords, 6);
    m.nearest = legacy ? FLOOR
                       : pick(ox_attr_s(n, "nearest_mode", "round_prefer_floor", b3, sizeof b3),
                              nearests, 4);
    m.a = ox_attr_f(n, "cubic_coeff_a", -0.75f);
    m.exclude = (int)ox_attr_i(n, "exclude_outside", 0);
    m.extrap = ox_attr_f(n, "extrapolation_value", 0);
    if (m.interp < 0 || m.coord < 0 || m.nearest < 0)
        return ox_fail(n, TJ_ERR_UNSUPPORTED,
                       "mode '%s', coordinate_transformation_mode '%s', nearest_mode '%s'", mode,
                       legacy ? "asymmetric" : b2, legacy ? "floor" : b3);
    if (m.interp != NEAREST && tj_tensor_dtype(x) != TJ_F32 && tj_tensor_dtype(x) != TJ_F64)
        return ox_fail(n, TJ_ERR_DTYPE, "%s interpolation of %s", mode,
                       tj_dtype_name(tj_tensor_dtype(x)));
    int rank = tj_tensor_rank(x);
    const int64_t *xd = tj_tensor_dims(x);
    double *scales = NULL, *roi = NULL;
    int64_t *sizes = NULL, ns = 0, nz = 0, nr = 0;
    tj_status st = TJ_OK;
    if (sizes_t && tj_tensor_numel(sizes_t) > 0) {
        if ((nz = ox_host_ints(n, sizes_t, "sizes", &sizes)) < 0)
            return TJ_ERR_UNSUPPORTED;
    } else if (scales_t) {
        if ((ns = ox_host_f64(n, scales_t, "scales", &scales)) < 0)
            return TJ_ERR_UNSUPPORTED;
    }
    if (!st && m.coord == CROP && roi_t && (nr = ox_host_f64(n, roi_t, "roi", &roi)) < 0)
        st = TJ_ERR_UNSUPPORTED;
    if (!st && ((nz ? nz : ns) != rank || (m.coord == CROP && nr != 2 * rank)))
        st = ox_fail(n, TJ_ERR_SHAPE, "%lld %s and %lld roi values for rank %d",
                     (long long)(nz ? nz : ns), nz ? "sizes" : "scales", (long long)nr, rank);
    for (int a = 0; a < rank && !st; a++) {
        double scale = sizes ? (double)sizes[a] / (double)xd[a] : scales[a];
        double want = sizes ? (double)sizes[a] : floor(scale * (double)xd[a]);
        if (!(scale > 0) || !(want >= 1) || want > (double)(1 << 24) || xd[a] < 1) {
            st = ox_fail(n, TJ_ERR_SHAPE, "axis %d of %lld elements resized by %g to %g", a,
                         (long long)xd[a], scale, want);
            break;
        }
        st =
            resize_axis(&m, &x, a, (int64_t)want, scale, roi ? roi[a] : 0, roi ? roi[rank + a] : 1);
    }
    free(scales), free(roi), free(sizes);
    if (!st)
        out[0] = tj_add(x, like(x, 0)); /* a new value even when nothing was resized */
    return st;
}

CONV(c_resize) {
    (void)n_out;
    if (n->opset < 11)
        return resize(n, in[0], NULL, in[1], NULL, 1, out);
    return resize(n, in[0], n_in > 1 ? in[1] : NULL, n_in > 2 ? in[2] : NULL,
                  n_in > 3 ? in[3] : NULL, 0, out);
}

CONV(c_upsample) {
    (void)n_out, (void)n_in;
    return resize(n, in[0], NULL, in[1], NULL, 1, out);
}

const ox_op ox_ops_resize[] = {
    {"Resize", c_resize, 2, 4, 10, 0xe},
    {"Upsample", c_upsample, 2, 2, 9, 0x2},
    {NULL, NULL, 0, 0, 0, 0},
};
