/* The neural-network ops against plain loops written here (the oracle), eagerly and compiled.
 * f32 convolutions run on the direct AVX-512 kernels where the CPU has them; the test runs again
 * under TJ_DIRECT_CONV=0 (im2col + OpenBLAS) and TJ_EXACT_MATH=1 (the kernels' own loops). Also
 * TensorFlow's SAME geometry, one_hot, the cross-entropies, and every bad input the issue lists:
 * channels that differ, a filter or window larger than the input, a label out of range (eagerly and
 * at run time when compiled). */
#include <tracejit.h>

#include "check.h"

static uint64_t rng = 12345;
static double urand(void) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng >> 11) / 9007199254740992.0 * 2 - 1;
}

static tj_tensor *rand_f32(int64_t a, int64_t b, int64_t c, int64_t d) {
    int64_t dims[4] = {a, b, c, d}, n = a * b * c * d;
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)urand();
    tj_tensor *t = tj_tensor_from_data(TJ_F32, 4, dims, v);
    free(v);
    return t;
}

/* the oracle: y[n,oy,ox,o] = sum x[n, oy*s + ky*d - pt, ox*s + kx*d - pl, c] w[ky,kx,c,o] */
static double conv_at(const tj_tensor *x, const tj_tensor *w, int64_t n, int64_t oy, int64_t ox,
                      int64_t o, const int *s, const int *d, int64_t pt, int64_t pl) {
    const int64_t *xd = tj_tensor_dims(x), *wd = tj_tensor_dims(w);
    const float *xv = tj_tensor_data(x), *wv = tj_tensor_data(w);
    double acc = 0;
    for (int64_t ky = 0; ky < wd[0]; ky++)
        for (int64_t kx = 0; kx < wd[1]; kx++)
            for (int64_t c = 0; c < wd[2]; c++) {
                int64_t iy = oy * s[0] + ky * d[0] - pt, ix = ox * s[1] + kx * d[1] - pl;
                if (iy < 0 || iy >= xd[1] || ix < 0 || ix >= xd[2])
                    continue;
                acc += (double)xv[((n * xd[1] + iy) * xd[2] + ix) * xd[3] + c] *
                       wv[((ky * wd[1] + kx) * wd[2] + c) * wd[3] + o];
            }
    return acc;
}

static tj_tensor *conv_fn(tj_tensor *x, tj_tensor *w) {
    int s[2] = {2, 1};
    return tj_conv2d(x, w, s, TJ_PAD_SAME, NULL);
}

static void conv_cases(void) {
    struct {
        int64_t n, h, w, c, kh, kw, o;
        int s[2], d[2];
        tj_padding pad;
    } cs[] = {
        {2, 7, 6, 3, 3, 3, 4, {1, 1}, {1, 1}, TJ_PAD_VALID},
        {2, 7, 6, 3, 3, 3, 4, {1, 1}, {1, 1}, TJ_PAD_SAME},
        {1, 9, 8, 2, 5, 5, 3, {2, 2}, {1, 1}, TJ_PAD_SAME},
        {3, 8, 7, 2, 3, 2, 2, {2, 3}, {1, 1}, TJ_PAD_VALID},
        {1, 9, 9, 2, 3, 3, 2, {1, 1}, {2, 2}, TJ_PAD_SAME},
        {50, 28, 28, 1, 5, 5, 32, {1, 1}, {1, 1}, TJ_PAD_SAME}, /* the seed's first layer */
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        tj_scope_begin();
        tj_tensor *x = rand_f32(cs[i].n, cs[i].h, cs[i].w, cs[i].c);
        tj_tensor *w = rand_f32(cs[i].kh, cs[i].kw, cs[i].c, cs[i].o);
        tj_tensor *y = tj_conv2d(x, w, cs[i].s, cs[i].pad, cs[i].d);
        CHECK_MSG(tj_status_of(y) == TJ_OK, "case %zu: %s", i, tj_error_message(y));
        if (tj_status_of(y)) {
            tj_scope_end();
            continue;
        }
        const int64_t *yd = tj_tensor_dims(y);
        int64_t span[2] = {(cs[i].kh - 1) * cs[i].d[0] + 1, (cs[i].kw - 1) * cs[i].d[1] + 1};
        int64_t in[2] = {cs[i].h, cs[i].w}, pads[2] = {0, 0};
        for (int k = 0; k < 2; k++) {
            int64_t want = cs[i].pad == TJ_PAD_SAME ? (in[k] + cs[i].s[k] - 1) / cs[i].s[k]
                                                    : (in[k] - span[k]) / cs[i].s[k] + 1;
            CHECK_EQ_INT(yd[1 + k], want);
            int64_t total = (want - 1) * cs[i].s[k] + span[k] - in[k];
            pads[k] = cs[i].pad == TJ_PAD_SAME && total > 0 ? total / 2 : 0;
        }
        const float *yv = tj_tensor_data(y);
        double worst = 0;
        for (int64_t n = 0; n < yd[0]; n++)
            for (int64_t oy = 0; oy < yd[1]; oy++)
                for (int64_t ox = 0; ox < yd[2]; ox++)
                    for (int64_t o = 0; o < yd[3]; o++) {
                        double want =
                            conv_at(x, w, n, oy, ox, o, cs[i].s, cs[i].d, pads[0], pads[1]);
                        double got = yv[((n * yd[1] + oy) * yd[2] + ox) * yd[3] + o];
                        worst = fmax(worst, fabs(got - want));
                    }
        CHECK_MSG(worst <= 1e-4, "case %zu: max error %g", i, worst);
        tj_scope_end();
    }
    /* compiled == eager */
    tj_scope_begin();
    tj_function *f = tj_function_new("conv", (void *)conv_fn, 2, NULL);
    tj_tensor *x = rand_f32(2, 9, 8, 3), *w = rand_f32(3, 3, 3, 5);
    tj_tensor *args[2] = {x, w};
    tj_tensor *yc = tj_call(f, 2, args), *ye = conv_fn(x, w);
    CHECK_EQ_INT(tj_tensor_numel(yc), tj_tensor_numel(ye));
    for (int64_t i = 0; i < tj_tensor_numel(ye); i++)
        if (tj_tensor_get_f64(yc, i) != tj_tensor_get_f64(ye, i)) {
            CHECK_MSG(0, "compiled conv differs at %lld", (long long)i);
            break;
        }
    tj_function_free(f);
    tj_scope_end();
}

/* A convolution's value and both gradients (loss = sum(conv(x, w) * r)) against loops over every
 * (output, tap) pair in double. The geometries cover the kernels' paths: patches in several
 * chunks (the filter gradient accumulates across them), the direct kernels' tiles and their
 * remainders (widths 28 and 29), output channels in one or two groups of 64 with a masked last
 * vector (8, 17, 100), one input channel, strides with a bottom/right pad (the input gradient of
 * a strided convolution takes im2col). */
/* pads: NULL for `pad`, else explicit {top, bottom, left, right} (tj_conv2d_pads) */
static void conv_vs_loops_pads(int64_t N, int64_t H, int64_t W, int64_t C, int64_t KH, int64_t KW,
                               int64_t O, int s, tj_padding pad, const int64_t *pads) {
    tj_scope_begin();
    int st[2] = {s, s};
    int64_t OH = pad == TJ_PAD_SAME ? (H + s - 1) / s : (H - KH) / s + 1;
    int64_t OW = pad == TJ_PAD_SAME ? (W + s - 1) / s : (W - KW) / s + 1;
    int64_t th = (OH - 1) * s + KH - H, tw = (OW - 1) * s + KW - W;
    int64_t pt = pad == TJ_PAD_SAME && th > 0 ? th / 2 : 0,
            pl = pad == TJ_PAD_SAME && tw > 0 ? tw / 2 : 0;
    if (pads) {
        OH = (H + pads[0] + pads[1] - KH) / s + 1, OW = (W + pads[2] + pads[3] - KW) / s + 1;
        pt = pads[0], pl = pads[2];
    }
    tj_tensor *x = rand_f32(N, H, W, C), *w = rand_f32(KH, KW, C, O);
    tj_tensor *r = rand_f32(N, OH, OW, O);
    tj_tape *tape = tj_tape_new(0);
    tj_tape_watch(tape, x);
    tj_tape_watch(tape, w);
    tj_tensor *y = pads ? tj_conv2d_pads(x, w, st, pads, NULL) : tj_conv2d(x, w, st, pad, NULL);
    tj_tensor *loss = tj_sum(tj_mul(y, r), 0, NULL, 0);
    tj_tensor *src[2] = {x, w}, *g[2] = {0};
    CHECK_EQ_INT(tj_tape_gradient(tape, loss, NULL, 2, src, g), TJ_OK);
    tj_tape_free(tape);
    CHECK_EQ_INT(tj_tensor_dims(y)[1], OH);
    CHECK_EQ_INT(tj_tensor_dims(y)[2], OW);
    const float *xv = tj_tensor_data(x), *wv = tj_tensor_data(w), *rv = tj_tensor_data(r);
    double *yy = calloc((size_t)(N * OH * OW * O), sizeof *yy),
           *dx = calloc((size_t)(N * H * W * C), sizeof *dx),
           *dw = calloc((size_t)(KH * KW * C * O), sizeof *dw);
    for (int64_t n = 0; n < N; n++)
        for (int64_t oy = 0; oy < OH; oy++)
            for (int64_t ox = 0; ox < OW; ox++)
                for (int64_t ky = 0; ky < KH; ky++)
                    for (int64_t kx = 0; kx < KW; kx++) {
                        int64_t iy = oy * s + ky - pt, ix = ox * s + kx - pl;
                        if (iy < 0 || iy >= H || ix < 0 || ix >= W)
                            continue;
                        for (int64_t c = 0; c < C; c++)
                            for (int64_t o = 0; o < O; o++) {
                                int64_t yi = ((n * OH + oy) * OW + ox) * O + o;
                                int64_t xi = ((n * H + iy) * W + ix) * C + c;
                                int64_t wi = ((ky * KW + kx) * C + c) * O + o;
                                yy[yi] += (double)xv[xi] * wv[wi];
                                dx[xi] += rv[yi] * (double)wv[wi];
                                dw[wi] += rv[yi] * (double)xv[xi];
                            }
                    }
    double ey = 0, ex = 0, ew = 0, tol = 1e-5 * (double)(KH * KW * C); /* f32 sums of K terms */
    for (int64_t i = 0; i < N * OH * OW * O; i++)
        ey = fmax(ey, fabs(tj_tensor_get_f64(y, i) - yy[i]));
    for (int64_t i = 0; i < N * H * W * C; i++)
        ex = fmax(ex, fabs(tj_tensor_get_f64(g[0], i) - dx[i]));
    for (int64_t i = 0; i < KH * KW * C * O; i++) /* summed over every output pixel */
        ew = fmax(ew, fabs(tj_tensor_get_f64(g[1], i) - dw[i]) / (1 + fabs(dw[i])));
    CHECK_MSG(
        ey <= tol && ex <= tol && ew <= 1e-4,
        "conv [%lld,%lld,%lld,%lld] * [%lld,%lld,%lld,%lld] stride %d%s: y off by %g, dx by %g, "
        "dw by %g (relative)",
        (long long)N, (long long)H, (long long)W, (long long)C, (long long)KH, (long long)KW,
        (long long)C, (long long)O, s, pads ? " explicit pads" : "", ey, ex, ew);
    free(yy);
    free(dx);
    free(dw);
    tj_scope_end();
}

static void conv_vs_loops(int64_t N, int64_t H, int64_t W, int64_t C, int64_t KH, int64_t KW,
                          int64_t O, int s, tj_padding pad) {
    conv_vs_loops_pads(N, H, W, C, KH, KW, O, s, pad, NULL);
}

static void conv_grads(void) {
    /* explicit pads: ResNet's strided 3x3 and 7x7 stem (PyTorch's symmetric pads, not SAME's),
     * an asymmetric border, and pads as large as a 1x1 filter's span (no direct kernel) */
    conv_vs_loops_pads(2, 12, 12, 8, 3, 3, 16, 2, TJ_PAD_VALID, (int64_t[]){1, 1, 1, 1});
    conv_vs_loops_pads(1, 20, 20, 3, 7, 7, 16, 2, TJ_PAD_VALID, (int64_t[]){3, 3, 3, 3});
    conv_vs_loops_pads(2, 9, 11, 4, 3, 3, 8, 1, TJ_PAD_VALID, (int64_t[]){0, 2, 1, 0});
    conv_vs_loops_pads(1, 6, 6, 5, 1, 1, 4, 1, TJ_PAD_VALID, (int64_t[]){2, 2, 1, 1});
    conv_vs_loops(4, 40, 64, 32, 3, 3, 8, 1, TJ_PAD_SAME);   /* 160 rows of 73 KiB: 2 chunks */
    conv_vs_loops(3, 28, 28, 1, 5, 5, 32, 1, TJ_PAD_SAME);   /* the seed's first layer */
    conv_vs_loops(2, 14, 14, 32, 5, 5, 64, 1, TJ_PAD_SAME);  /* and its second */
    conv_vs_loops(1, 12, 29, 5, 3, 3, 100, 1, TJ_PAD_VALID); /* two channel groups, masked */
    conv_vs_loops(2, 9, 29, 3, 3, 2, 17, 1, TJ_PAD_SAME);
    conv_vs_loops(2, 10, 11, 4, 3, 3, 16, 2, TJ_PAD_SAME); /* bottom/right pad; dx by im2col */
    conv_vs_loops(1, 9, 9, 7, 1, 1, 3, 1, TJ_PAD_VALID);
}

static void pool_cases(void) {
    tj_scope_begin();
    /* a 1x3x3x1 image 1..9: SAME 2x2 stride 2 pooling gives 2x2 windows clipped at the edges */
    int64_t d[4] = {1, 3, 3, 1};
    float v[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    tj_tensor *x = tj_tensor_from_data(TJ_F32, 4, d, v);
    int k[2] = {2, 2}, s[2] = {2, 2};
    tj_tensor *mx = tj_max_pool2d(x, k, s, TJ_PAD_SAME), *av = tj_avg_pool2d(x, k, s, TJ_PAD_SAME);
    double want_max[4] = {5, 6, 8, 9}, want_avg[4] = {3, 4.5, 7.5, 9}; /* pads not counted */
    CHECK_EQ_INT(tj_tensor_numel(mx), 4);
    for (int i = 0; i < 4; i++) {
        CHECK_NEAR(tj_tensor_get_f64(mx, i), want_max[i], 0);
        CHECK_NEAR(tj_tensor_get_f64(av, i), want_avg[i], 1e-6);
    }
    tj_tensor *vm = tj_max_pool2d(x, k, s, TJ_PAD_VALID);
    CHECK_EQ_INT(tj_tensor_numel(vm), 1);
    CHECK_NEAR(tj_tensor_get_f64(vm, 0), 5, 0);
    /* ties: the first maximum of each window takes the gradient; a NaN wins its window */
    for (int tiled = 0; tiled < 2; tiled++) {
        int64_t td[4] = {1, 2, 3, 1};
        float tv[6] = {5, 5, 5, 5, NAN, 5};
        tj_tensor *t = tj_tensor_from_data(TJ_F32, 4, td, tv);
        int s1[2] = {1, 1}, k12[2] = {1, 2};
        tj_tape *tape = tj_tape_new(0);
        tj_tape_watch(tape, t);
        tj_tensor *m = tiled ? tj_max_pool2d(t, k, s, TJ_PAD_VALID)     /* one 2x2 window */
                             : tj_max_pool2d(t, k12, s1, TJ_PAD_VALID); /* 1x2, overlapping */
        tj_tensor *g = NULL;
        CHECK_EQ_INT(tj_tape_gradient(tape, tj_sum(m, 0, NULL, 0), NULL, 1, &t, &g), TJ_OK);
        tj_tape_free(tape);
        /* tiled: the window [5 5; 5 NaN] -> the NaN; overlapping 1x2 windows over rows
         * [5 5 5] and [5 NaN 5]: first maxima 0, 1 and NaN at 4 twice */
        double want[2][6] = {{1, 1, 0, 0, 2, 0}, {0, 0, 0, 0, 1, 0}};
        for (int i = 0; g && i < 6; i++)
            CHECK_MSG(tj_tensor_get_f64(g, i) == want[tiled][i], "%s: dx[%d] = %g, want %g",
                      tiled ? "tiled" : "overlapping", i, tj_tensor_get_f64(g, i), want[tiled][i]);
    }
    /* bad input */
    int big[2] = {4, 4};
    tj_tensor *e = tj_max_pool2d(x, big, s, TJ_PAD_VALID);
    CHECK_EQ_INT(tj_status_of(e), TJ_ERR_SHAPE);
    CHECK_HAS(tj_error_message(e),
              "max_pool2d: the window 4x4 is larger than the padded input [1,3,3,1]");
    e = tj_avg_pool2d(tj_reshape(x, 2, (int64_t[]){3, 3}), k, s, TJ_PAD_VALID);
    CHECK_HAS(tj_error_message(e), "must have rank 4");
    CHECK_EQ_INT(tj_status_of(tj_max_pool2d(x, NULL, s, TJ_PAD_VALID)), TJ_ERR_INVALID);
    tj_scope_end();
}

/* Dilated max pooling against loops written from the definition: window taps dilations apart,
 * pads from the dilated span, NaN wins, the first maximum in (ky, kx) order takes the gradient;
 * eager, compiled behind a relu (not fused into a conv step), and its errors. */
/* Max and average pooling (SAME: windows clipped at the edges, the average over the positions
 * inside) against loops, on images large enough that the runtime splits their output rows over
 * the pool (runtime/kernels/pool.c) at batch 1 and 2, with more channels than one pass holds
 * (POOL_CH) and a NaN. */
static void pool_vs_loops(int64_t N, int64_t H, int64_t W, int64_t C, int k, int s) {
    tj_scope_begin();
    tj_tensor *x = rand_f32(N, H, W, C);
    float *xv = (float *)tj_tensor_data(x);
    xv[C * 3 + 1] = NAN;
    int kk[2] = {k, k}, ss[2] = {s, s};
    tj_tensor *ym = tj_max_pool2d(x, kk, ss, TJ_PAD_SAME),
              *ya = tj_avg_pool2d(x, kk, ss, TJ_PAD_SAME);
    int64_t oh = (H + s - 1) / s, ow = (W + s - 1) / s;
    int64_t pt = ((oh - 1) * s + k - H) / 2, pl = ((ow - 1) * s + k - W) / 2;
    pt = pt > 0 ? pt : 0, pl = pl > 0 ? pl : 0;
    int64_t bad_m = 0, bad_a = 0;
    CHECK_EQ_INT(tj_tensor_numel(ym), N * oh * ow * C);
    CHECK_EQ_INT(tj_tensor_numel(ya), N * oh * ow * C);
    for (int64_t b = 0; b < N && tj_tensor_numel(ya) == N * oh * ow * C; b++)
        for (int64_t oy = 0; oy < oh; oy++)
            for (int64_t ox = 0; ox < ow; ox++)
                for (int64_t c = 0; c < C; c++) {
                    double m = 0, sum = 0;
                    int64_t n = 0;
                    for (int64_t iy = oy * s - pt; iy < oy * s - pt + k; iy++)
                        for (int64_t ix = ox * s - pl; ix < ox * s - pl + k; ix++) {
                            if (iy < 0 || iy >= H || ix < 0 || ix >= W)
                                continue;
                            double v = xv[((b * H + iy) * W + ix) * C + c];
                            if (n == 0 || v > m || (isnan(v) && !isnan(m)))
                                m = v;
                            sum += v, n++;
                        }
                    int64_t q = ((b * oh + oy) * ow + ox) * C + c;
                    double gm = tj_tensor_get_f64(ym, q), ga = tj_tensor_get_f64(ya, q);
                    bad_m += !(gm == m || (isnan(gm) && isnan(m)));
                    bad_a += !(fabs(ga - sum / (double)n) <= 1e-5 * (1 + fabs(sum)) ||
                               (isnan(ga) && isnan(sum)));
                }
    CHECK_MSG(bad_m == 0 && bad_a == 0,
              "pool %lldx%lldx%lldx%lld k%d s%d: %lld max, %lld average values off", (long long)N,
              (long long)H, (long long)W, (long long)C, k, s, (long long)bad_m, (long long)bad_a);
    tj_scope_end();
}

static int g_pk[2], g_ps[2], g_pd[2];
static tj_padding g_pp;
static const int64_t *g_pads;
static tj_tensor *dil_pool_fn(tj_tensor *x) {
    return g_pads ? tj_max_pool2d_pads(tj_relu(x), g_pk, g_ps, g_pads)
                  : tj_max_pool2d_dilated(tj_relu(x), g_pk, g_ps, g_pp, g_pd);
}

/* pads: NULL for `pad`, else explicit {top, bottom, left, right} (tj_max_pool2d_pads; dh = dw =
 * 1) */
static void dilated_pool_case_pads(int kh, int kw, int sh, int sw, int dh, int dw, tj_padding pad,
                                   int64_t W, const int64_t *pads) {
    tj_scope_begin();
    int64_t N = 2, H = 9, C = 3, d[4] = {N, H, W, C};
    tj_tensor *x = rand_f32(N, H, W, C);
    float *xv = (float *)tj_tensor_data(x);
    xv[7] = NAN;
    for (int i = 20; i < 26; i++) /* ties */
        xv[i] = 0.25f;
    int k[2] = {kh, kw}, s[2] = {sh, sw}, dl[2] = {dh, dw};
    int64_t span[2] = {(int64_t)dh * (kh - 1) + 1, (int64_t)dw * (kw - 1) + 1}, o[2], p0[2];
    int64_t in[2] = {H, W}, st[2] = {sh, sw}, di[2] = {dh, dw};
    for (int a = 0; a < 2; a++) {
        o[a] = pad == TJ_PAD_SAME ? (in[a] + st[a] - 1) / st[a] : (in[a] - span[a]) / st[a] + 1;
        int64_t total = (o[a] - 1) * st[a] + span[a] - in[a];
        p0[a] = pad == TJ_PAD_SAME && total > 0 ? total / 2 : 0;
        if (pads)
            o[a] = (in[a] + pads[2 * a] + pads[2 * a + 1] - span[a]) / st[a] + 1,
            p0[a] = pads[2 * a];
    }
    tj_tape *tape = tj_tape_new(0);
    tj_tape_watch(tape, x);
    tj_tensor *y = pads ? tj_max_pool2d_pads(x, k, s, pads)
                        : tj_max_pool2d_dilated(x, k, s, pad, dl),
              *g = NULL;
    CHECK_MSG(tj_status_of(y) == TJ_OK, "dilated pool: %s", tj_error_message(y));
    CHECK_EQ_INT(tj_tape_gradient(tape, tj_sum(y, 0, NULL, 0), NULL, 1, &x, &g), TJ_OK);
    tj_tape_free(tape);
    double *want_g = calloc((size_t)(N * H * W * C), sizeof *want_g);
    int bad = 0, bad_g = 0;
    for (int64_t b = 0; b < N; b++)
        for (int64_t oy = 0; oy < o[0]; oy++)
            for (int64_t ox = 0; ox < o[1]; ox++)
                for (int64_t c = 0; c < C; c++) {
                    double m = 0;
                    int64_t at = -1;
                    for (int64_t ky = 0; ky < kh; ky++)
                        for (int64_t kx = 0; kx < kw; kx++) {
                            int64_t iy = oy * sh - p0[0] + ky * di[0];
                            int64_t ix = ox * sw - p0[1] + kx * di[1];
                            if (iy < 0 || iy >= H || ix < 0 || ix >= W)
                                continue;
                            int64_t q = ((b * H + iy) * W + ix) * C + c;
                            double v = xv[q];
                            if (at < 0 || v > m || (isnan(v) && !isnan(m)))
                                m = v, at = q;
                        }
                    double got = tj_tensor_get_f64(y, ((b * o[0] + oy) * o[1] + ox) * C + c);
                    bad += !(got == m || (isnan(got) && isnan(m)));
                    if (at >= 0)
                        want_g[at] += 1;
                }
    for (int64_t q = 0; g && q < N * H * W * C; q++)
        bad_g += tj_tensor_get_f64(g, q) != want_g[q];
    free(want_g);
    CHECK_EQ_INT(tj_tensor_numel(y), N * o[0] * o[1] * C);
    CHECK_MSG(bad == 0 && bad_g == 0, "dilated %dx%d /%d,%d *%d,%d: %d values, %d gradients off",
              kh, kw, sh, sw, dh, dw, bad, bad_g);
    /* compiled behind a relu: the same values as eager */
    memcpy(g_pk, k, sizeof k), memcpy(g_ps, s, sizeof s), memcpy(g_pd, dl, sizeof dl), g_pp = pad;
    g_pads = pads;
    tj_function *f = tj_function_new("dil_pool", (void *)dil_pool_fn, 1, NULL);
    tj_tensor *c1 = tj_call(f, 1, &x), *e1 = tj_call_eager(f, 1, &x);
    int diff = tj_tensor_numel(c1) != tj_tensor_numel(e1);
    for (int64_t q = 0; !diff && q < tj_tensor_numel(e1); q++) {
        double a = tj_tensor_get_f64(c1, q), e = tj_tensor_get_f64(e1, q);
        diff += !(a == e || (isnan(a) && isnan(e)));
    }
    CHECK_MSG(!diff, "dilated pool compiled differs from eager: %s", tj_error_message(c1));
    tj_function_free(f);
    (void)d;
    tj_scope_end();
}

static void dilated_pool_case(int kh, int kw, int sh, int sw, int dh, int dw, tj_padding pad,
                              int64_t W) {
    dilated_pool_case_pads(kh, kw, sh, sw, dh, dw, pad, W, NULL);
}

static void dilated_pools(void) {
    /* explicit pads (ONNX MaxPool's): ResNet's 3x3 stride 2 pad 1, uneven pads, pads as large
     * as allowed (one less than the window) */
    dilated_pool_case_pads(3, 3, 2, 2, 1, 1, TJ_PAD_VALID, 11, (const int64_t[]){1, 1, 1, 1});
    dilated_pool_case_pads(3, 2, 1, 2, 1, 1, TJ_PAD_VALID, 12, (const int64_t[]){0, 2, 1, 0});
    dilated_pool_case_pads(4, 3, 3, 1, 1, 1, TJ_PAD_VALID, 11, (const int64_t[]){3, 3, 2, 2});
    dilated_pool_case(2, 2, 1, 1, 2, 2, TJ_PAD_VALID, 11);
    dilated_pool_case(3, 2, 2, 3, 2, 3, TJ_PAD_SAME, 11);
    dilated_pool_case(3, 4, 3, 2, 3, 2, TJ_PAD_SAME, 11);
    dilated_pool_case(2, 2, 2, 2, 1, 1, TJ_PAD_VALID, 11); /* dilations 1: tj_max_pool2d itself */
    /* 8 taps or more, the dilation a multiple of the stride: the sliding row maxima */
    dilated_pool_case(2, 9, 1, 1, 2, 2, TJ_PAD_SAME, 40);  /* 2 classes of columns */
    dilated_pool_case(3, 8, 2, 3, 2, 3, TJ_PAD_VALID, 40); /* dilation = stride */
    dilated_pool_case(1, 12, 1, 2, 1, 4, TJ_PAD_SAME, 57); /* 1 x 12, 2 classes, pads */
    tj_scope_begin();
    int64_t d[4] = {1, 5, 5, 2};
    tj_tensor *x = tj_zeros(TJ_F32, 4, d);
    int k[2] = {3, 3}, s[2] = {1, 1}, two[2] = {2, 2}, three[2] = {3, 3}, zero[2] = {0, 1};
    tj_tensor *e = tj_max_pool2d_dilated(x, k, s, TJ_PAD_VALID, zero);
    CHECK_EQ_INT(tj_status_of(e), TJ_ERR_INVALID);
    CHECK_HAS(tj_error_message(e), "max_pool2d: dilations must be >= 1, got 0, 1");
    CHECK_EQ_INT(tj_status_of(tj_max_pool2d_dilated(x, k, s, TJ_PAD_VALID, two)), TJ_OK);
    e = tj_max_pool2d_dilated(x, k, s, TJ_PAD_VALID, three); /* spans 7 > 5 */
    CHECK_EQ_INT(tj_status_of(e), TJ_ERR_SHAPE);
    CHECK_HAS(tj_error_message(e), "the window 3x3 (dilated) is larger than the padded input");
    CHECK_EQ_INT(tj_status_of(tj_max_pool2d_dilated(x, NULL, s, TJ_PAD_VALID, two)),
                 TJ_ERR_INVALID);
    /* explicit pads: each smaller than the window along its axis, named when not */
    e = tj_max_pool2d_pads(x, k, s, (const int64_t[]){1, 1, 3, 0});
    CHECK_EQ_INT(tj_status_of(e), TJ_ERR_INVALID);
    CHECK_HAS(tj_error_message(e), "max_pool2d_pads: pads[2] = 3 is not in [0, 3) (the window's "
                                   "width: a window must hold an input element)");
    e = tj_max_pool2d_pads(x, k, s, (const int64_t[]){-1, 0, 0, 0});
    CHECK_HAS(tj_error_message(e), "pads[0] = -1 is not in [0, 3)");
    CHECK_HAS(tj_error_message(tj_max_pool2d_pads(x, k, s, NULL)), "max_pool2d_pads: pads is NULL");
    CHECK_HAS(tj_error_message(tj_max_pool2d_pads(x, NULL, s, (const int64_t[]){0, 0, 0, 0})),
              "max_pool2d_pads: ksize is NULL");
    e = tj_max_pool2d_pads(x, (int[]){3, 6}, s, (const int64_t[]){0, 0, 0, 0});
    CHECK_HAS(tj_error_message(e), "is larger than the padded input");
    tj_scope_end();
}

static tj_tensor *xent_fn(tj_tensor *labels, tj_tensor *logits) {
    return tj_sparse_softmax_cross_entropy(labels, logits);
}

static void xent_cases(void) {
    tj_scope_begin();
    int64_t ld[2] = {2, 3}, bd[1] = {2};
    float lg[6] = {1, 2, 3, 1000, 0, -1000}; /* a huge logit: the fused form stays finite */
    int32_t lb[2] = {2, 1};
    tj_tensor *logits = tj_tensor_from_data(TJ_F32, 2, ld, lg);
    tj_tensor *labels = tj_tensor_from_data(TJ_I32, 1, bd, lb);
    tj_tensor *l = tj_sparse_softmax_cross_entropy(labels, logits);
    double r0 = log(exp(-2.0) + exp(-1.0) + 1.0); /* -log softmax([1,2,3])[2] */
    CHECK_NEAR(tj_tensor_get_f64(l, 0), r0, 1e-6);
    CHECK_NEAR(tj_tensor_get_f64(l, 1), 1000, 1e-3);
    /* Keras on probabilities: mean of -log(clip(p)[label]) */
    int64_t pd[2] = {2, 2};
    float p[4] = {0.25f, 0.75f, 1.0f, 0.0f};
    int32_t pl[2] = {1, 1};
    tj_tensor *k = tj_sparse_categorical_crossentropy(tj_tensor_from_data(TJ_I32, 1, bd, pl),
                                                      tj_tensor_from_data(TJ_F32, 2, pd, p), 0);
    /* row 2: p = [1 - 1e-7, 1e-7] after clipping; softmax of their logs renormalises */
    double want = (-log(0.75) + -log(1e-7 / (1 - 1e-7 + 1e-7))) / 2;
    CHECK_NEAR(tj_tensor_get_f64(k, 0), want, 1e-3);
    CHECK_EQ_INT(tj_tensor_rank(k), 0);
    /* one_hot */
    int32_t ix[3] = {0, 2, 5};
    int64_t id[1] = {3};
    tj_tensor *oh = tj_one_hot(tj_tensor_from_data(TJ_I32, 1, id, ix), 3, 1, -1, TJ_F32);
    double want_oh[9] = {1, -1, -1, -1, -1, 1, -1, -1, -1};
    CHECK_EQ_INT(tj_tensor_numel(oh), 9);
    for (int i = 0; i < 9; i++)
        CHECK_NEAR(tj_tensor_get_f64(oh, i), want_oh[i], 0);
    /* a label out of range: eagerly, and at run time when compiled */
    int32_t bad[2] = {0, 3};
    tj_tensor *blab = tj_tensor_from_data(TJ_I32, 1, bd, bad);
    tj_tensor *e = tj_sparse_softmax_cross_entropy(blab, logits);
    CHECK_EQ_INT(tj_status_of(e), TJ_ERR_RUNTIME);
    CHECK_HAS(tj_error_message(e), "label 3 of row 1 is outside [0, 3)");
    tj_function *f = tj_function_new("xent", (void *)xent_fn, 2, NULL);
    tj_tensor *args[2] = {labels, logits}, *bargs[2] = {blab, logits};
    tj_tensor *ok = tj_call(f, 2, args), *bad_r = tj_call(f, 2, bargs);
    CHECK_NEAR(tj_tensor_get_f64(ok, 0), r0, 1e-6);
    CHECK_EQ_INT(tj_status_of(bad_r), TJ_ERR_RUNTIME);
    CHECK_HAS(tj_error_message(bad_r), "label 3 of row 1");
    tj_function_free(f);
    /* shapes and dtypes */
    e = tj_sparse_softmax_cross_entropy(logits, logits);
    CHECK_EQ_INT(tj_status_of(e), TJ_ERR_DTYPE);
    e = tj_sparse_softmax_cross_entropy(tj_tensor_from_data(TJ_I32, 1, id, ix), logits);
    CHECK_HAS(tj_error_message(e), "labels [3] must be the logits' [2,3] without");
    tj_scope_end();
}

/* conv2d_transpose against a scatter loop: every input pixel adds filter * value to the output
 * pixels its window covers (y[oy*s + ky*d - pt, ...] += x[n, oy, ox, c] w[ky, kx, o, c]); its
 * gradient against the forward convolution (they are adjoint: <T(x), r> = <x, conv(r)>). */
static tj_tensor *convt_fn(tj_tensor *x, tj_tensor *w) {
    int s[2] = {2, 2};
    int64_t od[4] = {tj_tensor_dims(x)[0], 2 * tj_tensor_dims(x)[1], 2 * tj_tensor_dims(x)[2],
                     tj_tensor_dims(w)[2]};
    return tj_conv2d_transpose(x, w, od, s, TJ_PAD_SAME, NULL);
}

static void conv_transpose_cases(void) {
    struct {
        int64_t n, h, w, c, kh, kw, o, oh, ow;
        int s[2], d[2];
        tj_padding pad;
    } cs[] = {
        {2, 3, 4, 3, 3, 3, 2, 7, 9, {2, 2}, {1, 1}, TJ_PAD_VALID},
        {2, 3, 4, 3, 3, 3, 2, 8, 10, {2, 2}, {1, 1}, TJ_PAD_VALID}, /* one extra row and column */
        {1, 4, 4, 2, 3, 3, 5, 8, 8, {2, 2}, {1, 1}, TJ_PAD_SAME},
        {1, 5, 3, 2, 2, 3, 3, 5, 3, {1, 1}, {1, 1}, TJ_PAD_SAME},
        {2, 3, 3, 1, 3, 2, 2, 12, 7, {3, 2}, {2, 1}, TJ_PAD_VALID},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        tj_scope_begin();
        tj_tensor *x = rand_f32(cs[i].n, cs[i].h, cs[i].w, cs[i].c);
        tj_tensor *w = rand_f32(cs[i].kh, cs[i].kw, cs[i].o, cs[i].c);
        int64_t od[4] = {cs[i].n, cs[i].oh, cs[i].ow, cs[i].o};
        tj_tensor *y = tj_conv2d_transpose(x, w, od, cs[i].s, cs[i].pad, cs[i].d);
        CHECK_MSG(tj_status_of(y) == TJ_OK, "case %zu: %s", i, tj_error_message(y));
        if (tj_status_of(y)) {
            tj_scope_end();
            continue;
        }
        int64_t span[2] = {(cs[i].kh - 1) * cs[i].d[0] + 1, (cs[i].kw - 1) * cs[i].d[1] + 1};
        int64_t pads[2] = {0, 0}, outd[2] = {cs[i].oh, cs[i].ow};
        for (int k = 0; k < 2; k++) {
            int64_t in_k = k ? cs[i].w : cs[i].h;
            int64_t total = (in_k - 1) * cs[i].s[k] + span[k] - outd[k];
            pads[k] = cs[i].pad == TJ_PAD_SAME && total > 0 ? total / 2 : 0;
        }
        double *want = calloc((size_t)tj_tensor_numel(y), sizeof *want);
        const float *xv = tj_tensor_data(x), *wv = tj_tensor_data(w);
        for (int64_t n = 0; n < cs[i].n; n++)
            for (int64_t iy = 0; iy < cs[i].h; iy++)
                for (int64_t ix = 0; ix < cs[i].w; ix++)
                    for (int64_t ky = 0; ky < cs[i].kh; ky++)
                        for (int64_t kx = 0; kx < cs[i].kw; kx++) {
                            int64_t oy = iy * cs[i].s[0] + ky * cs[i].d[0] - pads[0];
                            int64_t ox = ix * cs[i].s[1] + kx * cs[i].d[1] - pads[1];
                            if (oy < 0 || oy >= cs[i].oh || ox < 0 || ox >= cs[i].ow)
                                continue;
                            for (int64_t c = 0; c < cs[i].c; c++)
                                for (int64_t o = 0; o < cs[i].o; o++)
                                    want[((n * cs[i].oh + oy) * cs[i].ow + ox) * cs[i].o + o] +=
                                        (double)
                                            xv[((n * cs[i].h + iy) * cs[i].w + ix) * cs[i].c + c] *
                                        wv[((ky * cs[i].kw + kx) * cs[i].o + o) * cs[i].c + c];
                        }
        double worst = 0;
        for (int64_t k = 0; k < tj_tensor_numel(y); k++)
            worst = fmax(worst, fabs(tj_tensor_get_f64(y, k) - want[k]));
        CHECK_MSG(worst <= 1e-4, "conv2d_transpose case %zu: max error %g", i, worst);
        free(want);
        tj_scope_end();
    }
    /* adjoint of conv2d: <T(x), r> = <x, conv2d(r)>; the tape's gradient of <T(x), r> is conv(r) */
    tj_scope_begin();
    int s2[2] = {2, 2};
    tj_tensor *x = rand_f32(2, 4, 3, 3), *w = rand_f32(3, 3, 5, 3), *r = rand_f32(2, 8, 6, 5);
    int64_t od[4] = {2, 8, 6, 5};
    tj_tape *tape = tj_tape_new(0);
    tj_tape_watch(tape, x);
    tj_tensor *loss =
        tj_sum(tj_mul(tj_conv2d_transpose(x, w, od, s2, TJ_PAD_SAME, NULL), r), 0, NULL, 0);
    tj_tensor *g = NULL;
    CHECK_EQ_INT(tj_tape_gradient(tape, loss, NULL, 1, &x, &g), TJ_OK);
    tj_tape_free(tape);
    tj_tensor *cr = tj_conv2d(r, w, s2, TJ_PAD_SAME, NULL); /* [2,4,3,3]: w read as HWIO */
    double worst = 0;
    for (int64_t k = 0; k < tj_tensor_numel(cr); k++)
        worst = fmax(worst, fabs(tj_tensor_get_f64(g, k) - tj_tensor_get_f64(cr, k)));
    CHECK_MSG(worst <= 1e-4, "conv2d_transpose gradient off by %g", worst);
    double lhs = tj_tensor_get_f64(loss, 0),
           rhs = tj_tensor_get_f64(tj_sum(tj_mul(x, cr), 0, NULL, 0), 0);
    CHECK_NEAR(lhs, rhs, 1e-3 * (1 + fabs(rhs)));
    /* compiled == eager */
    tj_function *f = tj_function_new("convt", (void *)convt_fn, 2, NULL);
    tj_tensor *args[2] = {x, w};
    tj_tensor *yc = tj_call(f, 2, args), *ye = convt_fn(x, w);
    CHECK_EQ_INT(tj_status_of(yc), TJ_OK);
    CHECK_EQ_INT(tj_tensor_numel(yc), tj_tensor_numel(ye));
    for (int64_t k = 0; k < tj_tensor_numel(ye); k++)
        if (fabs(tj_tensor_get_f64(yc, k) - tj_tensor_get_f64(ye, k)) > 1e-5) {
            CHECK_MSG(0, "compiled conv2d_transpose differs at %lld", (long long)k);
            break;
        }
    tj_function_free(f);
    /* errors name the op and the shapes */
    int64_t bad[4] = {2, 9, 6, 5}, neg[4] = {2, -1, 6, 5}, badc[4] = {2, 8, 6, 4};
    tj_tensor *e = tj_conv2d_transpose(x, w, bad, s2, TJ_PAD_SAME, NULL);
    CHECK_EQ_INT(tj_status_of(e), TJ_ERR_SHAPE);
    CHECK_HAS(tj_error_message(e), "conv2d_transpose: input [2,4,3,3] and filter [3,3,5,3] "
                                   "[KH,KW,C_out,C_in] cannot make output [2,9,6,5]");
    e = tj_conv2d_transpose(x, w, badc, s2, TJ_PAD_SAME, NULL);
    CHECK_EQ_INT(tj_status_of(e), TJ_ERR_SHAPE);
    e = tj_conv2d_transpose(x, w, neg, s2, TJ_PAD_SAME, NULL);
    CHECK_HAS(tj_error_message(e), "output_dims[1] = -1 is not a size");
    e = tj_conv2d_transpose(x, w, NULL, s2, TJ_PAD_SAME, NULL);
    CHECK_HAS(tj_error_message(e), "conv2d_transpose: output_dims is NULL");
    e = tj_conv2d_transpose(x, rand_f32(3, 3, 5, 2), od, s2, TJ_PAD_SAME, NULL);
    CHECK_EQ_INT(tj_status_of(e), TJ_ERR_SHAPE);
    e = tj_conv2d_transpose(tj_cast(x, TJ_I32), tj_cast(w, TJ_I32), od, s2, TJ_PAD_SAME, NULL);
    CHECK_EQ_INT(tj_status_of(e), TJ_ERR_DTYPE);
    tj_scope_end();
}

static void conv_errors(void) {
    tj_scope_begin();
    tj_tensor *x = rand_f32(1, 4, 4, 3), *w = rand_f32(3, 3, 2, 4), *big = rand_f32(5, 5, 3, 1);
    tj_tensor *e = tj_conv2d(x, w, NULL, TJ_PAD_VALID, NULL);
    CHECK_EQ_INT(tj_status_of(e), TJ_ERR_SHAPE);
    CHECK_HAS(tj_error_message(e), "conv2d: input channels differ: input [1,4,4,3] has 3, filter "
                                   "[3,3,2,4] expects 2");
    e = tj_conv2d(x, big, NULL, TJ_PAD_VALID, NULL);
    CHECK_HAS(tj_error_message(e), "the filter [5,5,3,1] (dilated) is larger than the padded "
                                   "input [1,4,4,3]");
    tj_tensor *ok = tj_conv2d(x, big, NULL, TJ_PAD_SAME, NULL); /* SAME pads it */
    CHECK_EQ_INT(tj_status_of(ok), TJ_OK);
    int zero[2] = {0, 1};
    e = tj_conv2d(x, big, zero, TJ_PAD_SAME, NULL);
    CHECK_EQ_INT(tj_status_of(e), TJ_ERR_INVALID);
    e = tj_conv2d(x, big, NULL, (tj_padding)7, NULL);
    CHECK_HAS(tj_error_message(e), "unknown padding 7");
    e = tj_conv2d(tj_cast(x, TJ_I32), tj_cast(big, TJ_I32), NULL, TJ_PAD_SAME, NULL);
    CHECK_EQ_INT(tj_status_of(e), TJ_ERR_DTYPE);
    e = tj_conv2d(x, NULL, NULL, TJ_PAD_SAME, NULL);
    CHECK_EQ_INT(tj_status_of(e), TJ_ERR_INVALID);
    e = tj_bias_add(x, rand_f32(1, 1, 1, 3));
    CHECK_HAS(tj_error_message(e), "bias_add: bias [1,1,1,3] must be rank 1");
    /* explicit pads: named when bad; enough of them make a large filter fit */
    e = tj_conv2d_pads(x, big, NULL, NULL, NULL);
    CHECK_HAS(tj_error_message(e), "conv2d_pads: pads is NULL");
    e = tj_conv2d_pads(x, big, NULL, (int64_t[]){1, 1, -1, 1}, NULL);
    CHECK_HAS(tj_error_message(e), "conv2d_pads: pads[2] = -1 is not in [0, 2^31)");
    e = tj_conv2d_pads(x, big, NULL, (int64_t[]){0, 0, 1, 0}, NULL);
    CHECK_HAS(tj_error_message(e), "is larger than the padded input");
    ok = tj_conv2d_pads(x, big, NULL, (int64_t[]){1, 0, 0, 1}, NULL);
    CHECK_EQ_INT(tj_status_of(ok), TJ_OK);
    CHECK_EQ_INT(tj_tensor_dims(ok)[1], 1);
    tj_scope_end();
}

/* Convolutions whose filter is a constant of the graph (an imported model's weights) with a bias
 * and relu behind them, or alone, compiled: the filter is packed once by the step for its route
 * and kept (rt_plan_conv); checked against loops in double on three calls (the second reads the
 * packed copy, the third writes into a tensor of ours), for short rows (7 x 7) on the product
 * route and on the direct kernels, a 1x1 filter whose output rows are larger than a band, a
 * strided 1x1 alone (a residual block's projection), and wide rows on the direct kernels, by
 * bands and alone. */
static float *g_cw, *g_cb;
static int64_t g_cwd[4], g_cpads[4];
static int g_cs, g_cepi;
static tj_tensor *const_conv_fn(tj_tensor *x) {
    tj_tensor *w = tj_tensor_from_data(TJ_F32, 4, g_cwd, g_cw),
              *b = tj_tensor_from_data(TJ_F32, 1, &g_cwd[3], g_cb);
    tj_tensor *y = tj_conv2d_pads(x, w, (int[]){g_cs, g_cs}, g_cpads, NULL);
    /* alone: read by a transpose (H and W swapped), not by an elementwise epilogue */
    return g_cepi ? tj_relu(tj_bias_add(y, b)) : tj_transpose(y, (int[]){0, 2, 1, 3});
}

/* epi 0: the convolution alone (its own step, as a residual block's projection) */
static void const_conv_case(int64_t H, int64_t C, int64_t K, int64_t O, int64_t pad, int s,
                            int epi) {
    tj_scope_begin();
    int64_t N = 1, OH = (H + 2 * pad - K) / s + 1, nw = K * K * C * O;
    g_cs = s, g_cepi = epi;
    int64_t wd[4] = {K, K, C, O}, pads[4] = {pad, pad, pad, pad};
    memcpy(g_cwd, wd, sizeof wd), memcpy(g_cpads, pads, sizeof pads);
    g_cw = malloc((size_t)nw * sizeof *g_cw), g_cb = malloc((size_t)O * sizeof *g_cb);
    for (int64_t i = 0; i < nw; i++)
        g_cw[i] = (float)((i * 7919) % 1000) / 1000.0f - 0.5f;
    for (int64_t o = 0; o < O; o++)
        g_cb[o] = (float)(o % 7) / 7.0f - 0.3f;
    tj_tensor *x = rand_f32(N, H, H, C);
    const float *xv = tj_tensor_data(x);
    double *want = calloc((size_t)(N * OH * OH * O), sizeof *want);
    for (int64_t oy = 0; oy < OH; oy++)
        for (int64_t ox = 0; ox < OH; ox++)
            for (int64_t o = 0; o < O; o++) {
                double a = epi ? g_cb[o] : 0;
                for (int64_t ky = 0; ky < K; ky++)
                    for (int64_t kx = 0; kx < K; kx++) {
                        int64_t iy = oy * s + ky - pad, ix = ox * s + kx - pad;
                        if (iy < 0 || iy >= H || ix < 0 || ix >= H)
                            continue;
                        for (int64_t c = 0; c < C; c++)
                            a += (double)xv[(iy * H + ix) * C + c] *
                                 g_cw[((ky * K + kx) * C + c) * O + o];
                    }
                if (epi)
                    want[(oy * OH + ox) * O + o] = a > 0 ? a : 0;
                else
                    want[(ox * OH + oy) * O + o] = a;
            }
    tj_function *f = tj_function_new("const_conv", (void *)const_conv_fn, 1, NULL);
    for (int call = 0; call < 3; call++) { /* the third into a tensor of ours (tj_call_into) */
        tj_tensor *y =
            call < 2 ? tj_call(f, 1, &x) : tj_zeros(TJ_F32, 4, (int64_t[]){N, OH, OH, O});
        if (call == 2)
            CHECK_EQ_INT(tj_call_into(f, 1, &x, 1, &y), TJ_OK);
        double err = 0, tol = 1e-5 * (double)(K * K * C);
        CHECK_MSG(tj_status_of(y) == TJ_OK && tj_tensor_numel(y) == N * OH * OH * O,
                  "const conv: %s", tj_error_message(y));
        for (int64_t i = 0; tj_status_of(y) == TJ_OK && i < N * OH * OH * O; i++)
            err = fmax(err, fabs(tj_tensor_get_f64(y, i) - want[i]));
        CHECK_MSG(err <= tol,
                  "const conv [1,%lld,%lld,%lld] * %lldx%lld -> %lld, call %d: off by %g",
                  (long long)H, (long long)H, (long long)C, (long long)K, (long long)K,
                  (long long)O, call, err);
    }
    tj_function_free(f);
    free(want), free(g_cw), free(g_cb);
    tj_scope_end();
}

/* The same inside a loop body (the raw form of a region: plan_raw.c): h <- transpose(conv(h, w))
 * three times, w a 1x1 constant of the body, C -> C channels on 7 x 7 (the product route). */
static tj_tensor *loop_conv_body(int n, tj_tensor *const *args, void *user) {
    (void)n, (void)user;
    tj_tensor *w = tj_tensor_from_data(TJ_F32, 4, g_cwd, g_cw);
    tj_tensor *y = tj_conv2d(args[1], w, NULL, TJ_PAD_VALID, NULL);
    return tj_transpose(y, (int[]){0, 2, 1, 3});
}
static tj_tensor *loop_conv_fn(tj_tensor *x) {
    return tj_for_range(tj_scalar_i64(0), tj_scalar_i64(3), tj_scalar_i64(1), loop_conv_body, 1, &x,
                        NULL);
}

static void loop_conv_case(void) {
    tj_scope_begin();
    int64_t H = 7, C = 24, wd[4] = {1, 1, C, C};
    memcpy(g_cwd, wd, sizeof wd);
    g_cw = malloc((size_t)(C * C) * sizeof *g_cw);
    for (int64_t i = 0; i < C * C; i++)
        g_cw[i] = (float)((i * 7919) % 1000) / 4000.0f - 0.125f;
    tj_tensor *x = rand_f32(1, H, H, C);
    double *h = malloc((size_t)(H * H * C) * sizeof *h),
           *t = malloc((size_t)(H * H * C) * sizeof *t);
    for (int64_t i = 0; i < H * H * C; i++)
        h[i] = tj_tensor_get_f64(x, i);
    for (int it = 0; it < 3; it++) {
        for (int64_t r = 0; r < H; r++)
            for (int64_t c = 0; c < H; c++)
                for (int64_t o = 0; o < C; o++) {
                    double a = 0;
                    for (int64_t k = 0; k < C; k++)
                        a += h[(r * H + c) * C + k] * g_cw[k * C + o];
                    t[(c * H + r) * C + o] = a; /* transposed */
                }
        memcpy(h, t, (size_t)(H * H * C) * sizeof *h);
    }
    tj_function *f = tj_function_new("loop_conv", (void *)loop_conv_fn, 1, NULL);
    for (int call = 0; call < 2; call++) {
        tj_tensor *y = tj_call(f, 1, &x);
        double err = 0;
        CHECK_MSG(tj_status_of(y) == TJ_OK && tj_tensor_numel(y) == H * H * C, "loop conv: %s",
                  tj_error_message(y));
        for (int64_t i = 0; tj_status_of(y) == TJ_OK && i < H * H * C; i++)
            err = fmax(err, fabs(tj_tensor_get_f64(y, i) - h[i]));
        CHECK_MSG(err <= 1e-4, "loop conv, call %d: off by %g", call, err);
    }
    tj_function_free(f);
    free(h), free(t), free(g_cw);
    tj_scope_end();
}

static void const_convs(void) {
    loop_conv_case();
    const_conv_case(7, 16, 3, 264, 1, 1, 1); /* short rows, many channels: the product route */
    const_conv_case(7, 16, 3, 40, 1, 1, 1);  /* short rows, few channels: the direct kernels */
    const_conv_case(7, 8, 1, 1200, 0, 1, 1); /* a 1x1 filter, rows of 7 x 1200 floats: whole */
    const_conv_case(20, 3, 3, 24, 1, 1, 1);  /* wide rows: the direct kernels by bands */
    const_conv_case(14, 24, 1, 80, 0, 2, 0); /* alone: a 1x1 stride-2 projection, packed */
    const_conv_case(20, 3, 3, 24, 1, 1, 0);  /* alone on the direct kernels */
}

int main(void) {
    const_convs();
    conv_cases();
    conv_grads();
    pool_cases();
    pool_vs_loops(1, 35, 35, 288, 3, 1); /* Inception's 3x3 average: rows over the threads */
    pool_vs_loops(1, 31, 29, 64, 3, 2);  /* stride 2: the direct max kernel by rows */
    pool_vs_loops(2, 12, 9, 5, 2, 2);
    dilated_pools();
    xent_cases();
    conv_errors();
    conv_transpose_cases();
    return check_done();
}
