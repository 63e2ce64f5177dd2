/* The direct vector kernels (runtime/kernels/direct_kernels.inc) of the ISA rt_isa() picks here
 * (AVX-512, AVX2, NEON; ctest runs this again under TJ_ISA=avx2 and generic, and
 * scripts/aarch64.sh under qemu), against naive loops on small shapes: the forward convolution
 * (strides, pads, channel counts that leave a tail vector, the short-row tap path), the filter
 * and input gradients, the fused bands, max pooling (with a NaN that must win) and the f32
 * products on the ISA's tiles where they run them. Sums differ from the loops only by fused
 * multiply-adds: a relative tolerance of 1e-4. Where no vector ISA is there, every kernel must
 * decline (return 1) and write nothing. Small enough to run in seconds under emulation. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "runtime/kernels/conv.h"
#include "runtime/kernels/gemm.h"
#include "runtime/runtime.h"

static float frand(uint32_t *s) {
    *s = *s * 1664525u + 1013904223u;
    return (float)((*s >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static float *rnd(size_t n, uint32_t seed) {
    float *p = malloc((n ? n : 1) * sizeof *p);
    for (size_t i = 0; i < n; i++)
        p[i] = frand(&seed);
    return p;
}

static int close_to(const float *a, const float *b, size_t n, const char *what) {
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        if (!(fabsf(a[i] - b[i]) <= 1e-4f * (1.0f + fabsf(b[i]))) && !(isnan(a[i]) && isnan(b[i])))
            bad++;
    CHECK_MSG(bad == 0, "%s: %zu of %zu values differ", what, bad, n);
    return bad == 0;
}

/* The naive NHWC x HWIO convolution's terms x·w, each added where `mode` wants it: the output
 * (CONV_Y: y += x·w), the filter gradient (CONV_DW: dw += x·dy) or the input gradient
 * (CONV_DX: dx += dy·w); out is zeroed first. */
enum { CONV_Y, CONV_DW, CONV_DX };
static void conv_ref(int mode, const rt_conv_geom *g, const float *x, const float *w,
                     const float *dy, float *out) {
    int64_t n_out = mode == CONV_Y    ? g->n * g->oh * g->ow * g->o
                    : mode == CONV_DW ? g->kh * g->kw * g->c * g->o
                                      : g->n * g->h * g->w * g->c;
    memset(out, 0, (size_t)n_out * sizeof *out);
    for (int64_t b = 0; b < g->n; b++)
        for (int64_t oy = 0; oy < g->oh; oy++)
            for (int64_t ox = 0; ox < g->ow; ox++)
                for (int64_t ky = 0; ky < g->kh; ky++)
                    for (int64_t kx = 0; kx < g->kw; kx++) {
                        int64_t iy = oy * g->sh + ky - g->pt, ix = ox * g->sw + kx - g->pl;
                        if (iy < 0 || iy >= g->h || ix < 0 || ix >= g->w)
                            continue;
                        for (int64_t c = 0; c < g->c; c++)
                            for (int64_t o = 0; o < g->o; o++) {
                                int64_t xi = ((b * g->h + iy) * g->w + ix) * g->c + c,
                                        wi = ((ky * g->kw + kx) * g->c + c) * g->o + o,
                                        yi = ((b * g->oh + oy) * g->ow + ox) * g->o + o;
                                if (mode == CONV_Y)
                                    out[yi] += x[xi] * w[wi];
                                else if (mode == CONV_DW)
                                    out[wi] += x[xi] * dy[yi];
                                else
                                    out[xi] += dy[yi] * w[wi];
                            }
                    }
}

static rt_conv_geom geom(int64_t n, int64_t h, int64_t w, int64_t c, int64_t k, int64_t o,
                         int64_t s, int64_t pad) {
    rt_conv_geom g = {.n = n,
                      .h = h,
                      .w = w,
                      .c = c,
                      .kh = k,
                      .kw = k,
                      .o = o,
                      .sh = s,
                      .sw = s,
                      .dh = 1,
                      .dw = 1,
                      .pt = pad,
                      .pl = pad};
    g.oh = (h + 2 * pad - k) / s + 1;
    g.ow = (w + 2 * pad - k) / s + 1;
    return g;
}

typedef struct band_ctx {
    const rt_conv_geom *g;
    float *y;
} band_ctx;

static void band_copy(void *ctx, int64_t b, int64_t r0, int64_t rows, float *buf) {
    const band_ctx *bc = ctx;
    size_t row = (size_t)(bc->g->ow * bc->g->o);
    memcpy(bc->y + ((size_t)b * bc->g->oh + (size_t)r0) * row, buf, rows * row * sizeof *buf);
}

static void conv_case(int64_t n, int64_t h, int64_t c, int64_t k, int64_t o, int64_t s, int64_t pad,
                      int vec) {
    rt_conv_geom g = geom(n, h, h, c, k, o, s, pad);
    char name[96];
    snprintf(name, sizeof name, "conv n%lld h%lld c%lld k%lld o%lld s%lld p%lld", (long long)n,
             (long long)h, (long long)c, (long long)k, (long long)o, (long long)s, (long long)pad);
    size_t nx = (size_t)(n * h * h * c), nw = (size_t)(k * k * c * o),
           ny = (size_t)(n * g.oh * g.ow * o);
    float *x = rnd(nx, 1), *w = rnd(nw, 2), *dy = rnd(ny, 3);
    float *y = calloc(ny, 4), *yr = calloc(ny, 4), *dw = calloc(nw, 4), *dwr = calloc(nw, 4),
          *dx = calloc(nx, 4), *dxr = calloc(nx, 4);
    conv_ref(CONV_Y, &g, x, w, dy, yr);
    conv_ref(CONV_DW, &g, x, w, dy, dwr);
    conv_ref(CONV_DX, &g, x, w, dy, dxr);
    int ran = rt_conv_direct_fwd(&g, x, w, NULL, y) == 0;
    CHECK_MSG(ran == vec, "%s: the forward kernel %s", name, ran ? "ran" : "declined");
    if (ran)
        close_to(y, yr, ny, name);
    if (rt_conv_direct_filter_grad(&g, x, dy, dw) == 0) {
        CHECK_MSG(vec, "%s: a filter gradient without a vector ISA", name);
        close_to(dw, dwr, nw, "filter gradient");
    }
    if (rt_conv_direct_input_grad(&g, dy, w, dx) == 0) {
        CHECK_MSG(vec && s == 1, "%s: an input gradient it does not take", name);
        close_to(dx, dxr, nx, "input gradient");
    }
    /* the product route with a residual and relu in the tiles: relu(y + res) */
    float *res = rnd(ny, 8), *yer = malloc(ny * 4);
    for (size_t i = 0; i < ny; i++)
        yer[i] = yr[i] + res[i] > 0 ? yr[i] + res[i] : 0.0f;
    rt_gemm_epi re = {.add = {res}, .full = {1}, .n_add = 1, .relu = 1, .ld = o};
    ran = rt_conv_direct_product(&g, x, w, NULL, &re, y) == 0;
    CHECK_MSG(ran == (rt_conv_direct_as_product(&g) && rt_gemm_packed_usable()),
              "%s: the product route %s", name, ran ? "ran" : "declined");
    if (ran)
        close_to(y, yer, ny, "product route + residual + relu");
    free(res), free(yer);
    memset(y, 0, ny * 4);
    band_ctx bc = {&g, y};
    if (g.ow * g.o * 2 <= RT_CONV_BAND_FLOATS &&
        rt_conv_direct_fwd_bands(&g, x, w, NULL, 2, g.oh, band_copy, &bc) == 0)
        close_to(y, yr, ny, "bands");
    /* the filter packed once for g's route (rt_conv_direct_pack): read instead of w, which is
     * zero here, by the forward and the bands; a packing of another layout is ignored */
    rt_packed_b *pw = rt_conv_direct_pack(&g, w);
    CHECK_MSG(!pw == !vec, "%s: %s", name, pw ? "packed without a vector ISA" : "not packed");
    float *w0 = calloc(nw, 4);
    if (pw) {
        memset(y, 0, ny * 4);
        CHECK(rt_conv_direct_fwd(&g, x, w0, pw, y) == 0);
        close_to(y, yr, ny, "forward, filter packed once");
        memset(y, 0, ny * 4);
        if (g.ow * g.o * 2 <= RT_CONV_BAND_FLOATS &&
            rt_conv_direct_fwd_bands(&g, x, w0, pw, 2, g.oh, band_copy, &bc) == 0)
            close_to(y, yr, ny, "bands, filter packed once");
        rt_gemm_packed_free(pw);
        rt_packed_b *other = rt_pack_panels(w, k * k * c, o, o, 0, 1);
        memset(y, 0, ny * 4);
        CHECK(other && rt_conv_direct_fwd(&g, x, w, other, y) == 0);
        close_to(y, yr, ny, "forward, a packing of another layout ignored");
        rt_gemm_packed_free(other);
    }
    free(w0);
    free(x), free(w), free(dy), free(y), free(yr), free(dw), free(dwr), free(dx), free(dxr);
}

/* Max and average pooling of two 9x9 images against loops: the max's first maximum and NaN
 * (which wins its windows), the average over the window's elements inside the input, summed in
 * (ky, kx) order and divided by their count (the same float operations: equal values); rows
 * [1, oh) first, then row 0, as the pool's tasks split them. */
static void pool_case(int64_t c, int64_t k, int64_t s, int64_t pad, int vec) {
    rt_conv_geom p = geom(2, 9, 9, c, k, c, s, pad);
    size_t nx = (size_t)(2 * 9 * 9 * c), ny = (size_t)(2 * p.oh * p.ow * c);
    float *x = rnd(nx, 4), *y = calloc(ny, 4), *ym = calloc(ny, 4), *ya = calloc(ny, 4);
    x[5 * c + c / 2] = NAN; /* a NaN wins its windows, and spoils their averages */
    for (int64_t b = 0; b < 2; b++)
        for (int64_t oy = 0; oy < p.oh; oy++)
            for (int64_t ox = 0; ox < p.ow; ox++)
                for (int64_t ch = 0; ch < c; ch++) {
                    float m = 0, sum = 0;
                    int n = 0;
                    for (int64_t ky = 0; ky < k; ky++)
                        for (int64_t kx = 0; kx < k; kx++) {
                            int64_t iy = oy * s + ky - pad, ix = ox * s + kx - pad;
                            if (iy < 0 || iy >= 9 || ix < 0 || ix >= 9)
                                continue;
                            float v = x[((b * 9 + iy) * 9 + ix) * c + ch];
                            if (n == 0 || (!isnan(m) && (isnan(v) || v > m)))
                                m = v; /* the first maximum, the first NaN */
                            sum += v, n++;
                        }
                    ym[((b * p.oh + oy) * p.ow + ox) * c + ch] = m;
                    ya[((b * p.oh + oy) * p.ow + ox) * c + ch] = sum / (float)n;
                }
    for (int avg = 0; avg < 2; avg++) {
        int ran = 1;
        memset(y, 0, ny * 4);
        for (int64_t b = 0; b < 2; b++)
            ran &= rt_pool_direct_rows(&p, avg, x, y, b, 1, p.oh) == 0 &&
                   rt_pool_direct_rows(&p, avg, x, y, b, 0, 1) == 0;
        CHECK_MSG(ran == vec, "%s pool c%lld: the kernel %s", avg ? "average" : "max", (long long)c,
                  ran ? "ran" : "declined");
        if (ran)
            close_to(y, avg ? ya : ym, ny, avg ? "average pool" : "max pool");
    }
    free(x), free(y), free(ym), free(ya);
}

static void gemm_case(int64_t m, int64_t n, int64_t k) {
    float *a = rnd((size_t)(m * k), 5), *b = rnd((size_t)(k * n), 6),
          *c = calloc((size_t)(m * n), 4), *cr = calloc((size_t)(m * n), 4);
    float *bias = malloc((size_t)n * 4);
    for (int64_t j = 0; j < n; j++)
        bias[j] = 0.5f;
    for (int64_t i = 0; i < m; i++) /* relu(a·b + 0.5) */
        for (int64_t j = 0; j < n; j++) {
            float s = 0.5f;
            for (int64_t q = 0; q < k; q++)
                s += a[i * k + q] * b[q * n + j];
            cr[i * n + j] = s > 0 ? s : 0.0f;
        }
    rt_gemm_epi epi = {.add = {bias}, .n_add = 1, .relu = 1};
    int own = rt_gemm_f32(m, n, k, a, k, 0, b, n, c, n, &epi) == 0;
    CHECK_MSG(own == rt_gemm_packed_usable(), "gemm %lldx%lldx%lld: %s", (long long)m, (long long)n,
              (long long)k, own ? "ran" : "declined");
    if (own)
        close_to(c, cr, (size_t)(m * n), "gemm + bias + relu");
    float *at = malloc((size_t)(m * k) * 4); /* A stored [k][m]: the product x' · dy */
    for (int64_t i = 0; i < m; i++)
        for (int64_t q = 0; q < k; q++)
            at[q * m + i] = a[i * k + q];
    memset(c, 0, (size_t)(m * n) * 4);
    if (rt_gemm_f32(m, n, k, at, m, 1, b, n, c, n, &epi) == 0)
        close_to(c, cr, (size_t)(m * n), "gemm, A transposed");
    free(at);
    float *bt = malloc((size_t)(k * n) * 4), *cp = malloc((size_t)(m * n) * 4);
    for (int64_t q = 0; q < k; q++) /* B stored [n][k]: the product dy · W' */
        for (int64_t j = 0; j < n; j++)
            bt[j * k + q] = b[q * n + j];
    for (int64_t i = 0; i < m * n; i++) /* the reference without the epilogue */
        cp[i] = 0.0f;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++)
            for (int64_t q = 0; q < k; q++)
                cp[i * n + j] += a[i * k + q] * b[q * n + j];
    memset(c, 0, (size_t)(m * n) * 4);
    rt_gemm_f32_bt(m, n, k, a, k, bt, k, c);
    close_to(c, cp, (size_t)(m * n), "gemm, B transposed");
    free(bt), free(cp);
    rt_packed_b *pb = rt_gemm_pack(b, k, n, n, 0);
    CHECK(!pb == !rt_gemm_packed_usable());
    if (pb) {
        memset(c, 0, (size_t)(m * n) * 4);
        rt_gemm_packed(pb, m, a, k, c, n, &epi);
        close_to(c, cr, (size_t)(m * n), "packed gemm + bias + relu");
    }
    /* a residual (full addend, rows ld floats apart) before the bias, then relu: relu((a·b + res)
     * + 0.5), the order the tiles add in; C with a wider row than the product's */
    int64_t ld = n + 3;
    float *res = rnd((size_t)(m * ld), 7), *cw = calloc((size_t)(m * ld), 4);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            float s = 0.0f;
            for (int64_t q = 0; q < k; q++)
                s += a[i * k + q] * b[q * n + j];
            s = (s + res[i * ld + j]) + 0.5f;
            cr[i * n + j] = s > 0 ? s : 0.0f;
        }
    rt_gemm_epi re = {.add = {res, bias}, .full = {1, 0}, .n_add = 2, .relu = 1, .ld = ld};
    if (rt_gemm_f32(m, n, k, a, k, 0, b, n, cw, ld, &re) == 0)
        for (int64_t i = 0; i < m; i++)
            close_to(cw + i * ld, cr + i * n, (size_t)n, "gemm + residual + bias + relu");
    if (pb) {
        memset(cw, 0, (size_t)(m * ld) * 4);
        rt_gemm_packed(pb, m, a, k, cw, ld, &re);
        for (int64_t i = 0; i < m; i++)
            close_to(cw + i * ld, cr + i * n, (size_t)n, "packed gemm + residual + bias + relu");
        rt_gemm_packed_free(pb);
    }
    free(res), free(cw);
    free(a), free(b), free(c), free(cr), free(bias);
}

int main(void) {
    const char *isa = rt_isa_name(rt_isa());
    int vec = rt_isa() != RT_ISA_GENERIC;
    printf("direct kernels: %s\n", isa);
    conv_case(2, 7, 3, 3, 5, 1, 1, vec);   /* short rows: the tap path; a tail vector */
    conv_case(1, 9, 17, 3, 37, 1, 0, vec); /* channels past one group of vectors */
    conv_case(2, 8, 8, 5, 70, 2, 2, vec);  /* stride 2 (no input gradient), two groups */
    conv_case(1, 6, 32, 1, 16, 1, 0, vec); /* 1x1 */
    conv_case(1, 5, 8, 3, 260, 1, 1, vec); /* short rows, many channels: the product route */
    /* rows wider than the product route takes (conv_direct.c: SHORT_ROW), whole last vectors (the
     * tiles' unmasked loads): the tap path (KW·C < 16) and the filter-row path, 4 and 3 vectors */
    conv_case(1, 17, 2, 3, 64, 1, 1, vec);
    conv_case(1, 16, 8, 3, 48, 1, 0, vec);
    /* a filter over 1 MB (conv_direct.c: BIG_FILTER): by group of output channels, the last one
     * partial */
    conv_case(1, 16, 160, 3, 200, 1, 1, vec);
    /* filters summed in spans of taps (direct_kernels.inc: FWD_KC), onto partial sums kept in
     * the output: 3 filter rows in 2 pieces each on AVX-512; on every ISA's group width */
    conv_case(1, 6, 200, 3, 70, 1, 1, vec);
    conv_case(1, 5, 720, 3, 20, 1, 1, vec);
    pool_case(5, 2, 2, 0, vec);
    pool_case(37, 3, 2, 1, vec);
    gemm_case(7, 37, 19);
    gemm_case(50, 130, 64); /* a narrow last panel */
    gemm_case(40, 70, 300); /* K in three chunks (the epilogue after the last) */
    /* B's chunks copied per task and the next one prefetched: several panels a task, five chunks
     * of K, the last panel 44 wide */
    gemm_case(49, 300, 520);
    gemm_case(600, 130, 40); /* row groups: B packed per call (gemm_packed.c), a narrow panel */
    /* 64 rows by 5 panels on the pool: groups of rows by single panels (gemm_packed.c's split) */
    gemm_case(64, 320, 200);
    return check_done();
}
