/* conv_direct.c — f32 convolutions without patches, on AVX-512 (picked at run time).
 *
 * im2col + sgemm copies every input element KH·KW times and hands OpenBLAS thin products (64 or
 * 32 output channels, or 25 taps for a 1-channel image) that it runs at 15-45% of the FMA peak.
 * Here the output channels are the vector lanes (16 per register, the last one masked) and a
 * block of output pixels (forward) or of taps (filter gradient) are the register tile, the way
 * oneDNN's direct convolutions work:
 *
 *   forward      y[b,oy,ox,o] += x[b, oy·sh + ky, ox·sw + kx, c] · w[ky,kx,c,o]
 *   filter grad  dw[ky,kx,c,o] += x[b, oy·sh + ky, ox·sw + kx, c] · dy[b,oy,ox,o]
 *   input grad   (stride 1) the forward convolution of dy, padded by KH-1-pt, with the filter
 *                flipped and its channels swapped: w'[ky,kx,o,c] = w[KH-1-ky, KW-1-kx, c, o]
 *
 * With dilation 1 the taps (kx, c) of one filter row are one contiguous run j = kx·C + c of the
 * input row, so a tap row is a plain loop over j. Padding is a zero-bordered copy of the input
 * (pt, pl and whatever the last window needs), so the inner loops never test bounds. Every sum
 * runs in the oracle's order (ky, kx, c) but with fused multiply-adds, so results differ from
 * the direct loops in the last bits; TJ_EXACT_MATH keeps the oracle. Dilated convolutions, f64,
 * strided input gradients and CPUs without AVX-512 take the im2col path (conv.c). */
#include <stdlib.h>
#include <string.h>

#include "runtime/kernels/conv.h"
#include "runtime/kernels/tiles.h"
#include "runtime/rt_pool.h"

int rt_conv_direct_usable(const rt_conv_geom *g) {
    return rt_avx512() && g->groups <= 1 && g->dh == 1 && g->dw == 1 && g->o >= 1 && g->c >= 1 &&
           g->pt < g->kh && g->pl < g->kw;
}

#if HAVE_X86
/* One convolution over a padded input: xp[b][r][col][c] at b·xs_img + r·xs_row + col·C + c. */
typedef struct dconv {
    const float *x;
    int64_t xs_img, xs_row, C;
    const float *w; /* [KH][KWC][O] */
    const float *dy;
    float *y; /* forward: [N][OH][OW][O]; filter grad: [KH][KWC][O] */
    int64_t N, OH, OW, O, KH, KWC, sh, sw;
    /* forward with short filter rows (KWC < 16: few channels): every tap (ky, j) in one loop,
     * at input offset tap[t] = ky·xs_row + j, instead of a KWC-long loop per filter row (the
     * seed CNN's first layer: 5 taps a row, the row loop's setup cost as much as its FMAs) */
    int n_taps;
    int32_t tap[256];
} dconv;

#define UNROLL _Pragma("GCC unroll 16")

/* the output channels [og, og + 16·NV): the last vector masked by `last` */
#define LOADW(NV, dst, src, last)                                                                  \
    UNROLL for (int v_ = 0; v_ < NV - 1; v_++) dst[v_] = _mm512_loadu_ps((src) + 16 * v_);         \
    dst[NV - 1] = _mm512_maskz_loadu_ps(last, (src) + 16 * (NV - 1))

/* Forward: PB output pixels (ox0 ...) of row (b, oy), channels [og, og + 16·NV), into the row
 * at yrow ([OW][O]): fwd_ loops over filter rows, then over a row's KWC taps; fwdt_ over the
 * d->n_taps taps at once (dconv.tap). */
#define FWD_HEAD(NAME, NV, PB)                                                                     \
    TGT static void NAME##_##NV##_##PB(const dconv *d, int64_t b, int64_t oy, int64_t ox0,         \
                                       int64_t og, __mmask16 last, float *yrow) {                  \
        __m512 acc[PB][NV];                                                                        \
        UNROLL for (int p = 0; p < PB; p++) UNROLL for (int v = 0; v < NV; v++) acc[p][v] =        \
            _mm512_setzero_ps();                                                                   \
        int64_t px = d->sw * d->C; /* input elements between neighbouring pixels */

/* acc += the PB pixels at xr (px apart) times the weights at wr */
#define FWD_TAP(NV, PB, xr, wr)                                                                    \
    do {                                                                                           \
        __m512 wv[NV];                                                                             \
        LOADW(NV, wv, wr, last);                                                                   \
        UNROLL for (int p = 0; p < PB; p++) {                                                      \
            __m512 xb = _mm512_set1_ps((xr)[p * px]);                                              \
            UNROLL for (int v = 0; v < NV; v++) acc[p][v] = _mm512_fmadd_ps(xb, wv[v], acc[p][v]); \
        }                                                                                          \
    } while (0)

#define FWD_TAIL(NV, PB)                                                                           \
    float *yr = yrow + ox0 * d->O + og;                                                            \
    UNROLL for (int p = 0; p < PB; p++) {                                                          \
        UNROLL for (int v = 0; v < NV - 1; v++)                                                    \
            _mm512_storeu_ps(yr + p * d->O + 16 * v, acc[p][v]);                                   \
        _mm512_mask_storeu_ps(yr + p * d->O + 16 * (NV - 1), last, acc[p][NV - 1]);                \
    }                                                                                              \
    }

#define FWD(NV, PB)                                                                                \
    FWD_HEAD(fwd, NV, PB)                                                                          \
    for (int64_t ky = 0; ky < d->KH; ky++) {                                                       \
        const float *xr = d->x + b * d->xs_img + (oy * d->sh + ky) * d->xs_row + ox0 * px;         \
        const float *wr = d->w + ky * d->KWC * d->O + og;                                          \
        for (int64_t j = 0; j < d->KWC; j++, wr += d->O)                                           \
            FWD_TAP(NV, PB, xr + j, wr);                                                           \
    }                                                                                              \
    FWD_TAIL(NV, PB)

#define FWDT(NV, PB)                                                                               \
    FWD_HEAD(fwdt, NV, PB)                                                                         \
    const float *xo = d->x + b * d->xs_img + oy * d->sh * d->xs_row + ox0 * px;                    \
    const float *wt = d->w + og;                                                                   \
    for (int t = 0; t < d->n_taps; t++, wt += d->O)                                                \
        FWD_TAP(NV, PB, xo + d->tap[t], wt);                                                       \
    FWD_TAIL(NV, PB)

/* Filter gradient: taps [j0, j0 + JB) of filter row ky, channels [og, og + 16·NV), summed over
 * every output pixel. */
#define DW(NV, JB)                                                                                 \
    TGT static void dw_##NV##_##JB(const dconv *d, int64_t ky, int64_t j0, int64_t og,             \
                                   __mmask16 last) {                                               \
        __m512 acc[JB][NV];                                                                        \
        UNROLL for (int q = 0; q < JB; q++) UNROLL for (int v = 0; v < NV; v++) acc[q][v] =        \
            _mm512_setzero_ps();                                                                   \
        int64_t px = d->sw * d->C;                                                                 \
        for (int64_t b = 0; b < d->N; b++)                                                         \
            for (int64_t oy = 0; oy < d->OH; oy++) {                                               \
                const float *xr = d->x + b * d->xs_img + (oy * d->sh + ky) * d->xs_row + j0;       \
                const float *gr = d->dy + (b * d->OH + oy) * d->OW * d->O + og;                    \
                for (int64_t ox = 0; ox < d->OW; ox++, xr += px, gr += d->O) {                     \
                    __m512 gv[NV];                                                                 \
                    LOADW(NV, gv, gr, last);                                                       \
                    UNROLL for (int q = 0; q < JB; q++) {                                          \
                        __m512 xb = _mm512_set1_ps(xr[q]);                                         \
                        UNROLL for (int v = 0; v < NV; v++) acc[q][v] =                            \
                            _mm512_fmadd_ps(xb, gv[v], acc[q][v]);                                 \
                    }                                                                              \
                }                                                                                  \
            }                                                                                      \
        float *out = d->y + (ky * d->KWC + j0) * d->O + og;                                        \
        UNROLL for (int q = 0; q < JB; q++) {                                                      \
            UNROLL for (int v = 0; v < NV - 1; v++)                                                \
                _mm512_storeu_ps(out + q * d->O + 16 * v, acc[q][v]);                              \
            _mm512_mask_storeu_ps(out + q * d->O + 16 * (NV - 1), last, acc[q][NV - 1]);           \
        }                                                                                          \
    }

#define TILE(NV, B) FWD(NV, B) FWDT(NV, B) DW(NV, B)
RT_TILES(TILE)

typedef void (*fwd_fn)(const dconv *, int64_t, int64_t, int64_t, int64_t, __mmask16, float *);
typedef void (*dw_fn)(const dconv *, int64_t, int64_t, int64_t, __mmask16);
RT_TILE_TABLE(fwd_fn, fwd_tile, fwd);
RT_TILE_TABLE(fwd_fn, fwdt_tile, fwdt);
RT_TILE_TABLE(dw_fn, dw_tile, dw);

/* channel group g: [64·g, min(O, 64·g + 64)): NV vectors, the last one's lane mask */
static int group_nv(int64_t O, int64_t g, __mmask16 *last) {
    int64_t n = O - 64 * g < 64 ? O - 64 * g : 64;
    int nv = (int)((n + 15) / 16);
    *last = rt_lanes(n - 16 * (nv - 1));
    return nv;
}

/* output row (b, oy) into yrow ([OW][O]) */
static void fwd_row_into(const dconv *d, int64_t b, int64_t oy, float *yrow) {
    for (int64_t g = 0; g * 64 < d->O; g++) {
        __mmask16 last;
        int nv = group_nv(d->O, g, &last);
        int64_t nb = rt_tile_blocks(d->OW, rt_tile_big[nv - 1]);
        for (int64_t i = 0; i < nb; i++) {
            int64_t ox, len;
            rt_tile_block(d->OW, nb, i, &ox, &len);
            (d->n_taps ? fwdt_tile : fwd_tile)[nv - 1][len](d, b, oy, ox, 64 * g, last, yrow);
        }
    }
}

static void fwd_row(void *ctx, int64_t t) {
    const dconv *d = ctx;
    fwd_row_into(d, t / d->OH, t % d->OH, d->y + t * d->OW * d->O);
}

/* filter-gradient tasks: (ky, channel group, block of taps) */
typedef struct dw_plan {
    const dconv *d;
    int64_t n_groups, n_blocks, span; /* span: taps per task */
} dw_plan;

static void dw_task(void *ctx, int64_t t) {
    const dw_plan *pl = ctx;
    const dconv *d = pl->d;
    int64_t blk = t % pl->n_blocks, g = (t / pl->n_blocks) % pl->n_groups;
    int64_t ky = t / (pl->n_blocks * pl->n_groups);
    __mmask16 last;
    int nv = group_nv(d->O, g, &last);
    int64_t j0 = blk * pl->span, e = j0 + pl->span < d->KWC ? j0 + pl->span : d->KWC;
    int64_t nb = rt_tile_blocks(e - j0, rt_tile_big[nv - 1]);
    for (int64_t i = 0; i < nb; i++) {
        int64_t j, len;
        rt_tile_block(e - j0, nb, i, &j, &len);
        dw_tile[nv - 1][len](d, ky, j0 + j, 64 * g, last);
    }
}

typedef struct pad_job {
    const rt_conv_geom *g;
    const float *x;
    float *p;
    int64_t hp, wp;
} pad_job;

/* image b of the zero-bordered copy (a task: images are independent) */
static void pad_image(void *ctx, int64_t b) {
    const pad_job *j = ctx;
    const rt_conv_geom *g = j->g;
    int64_t hp = j->hp, wp = j->wp;
    for (int64_t r = 0; r < hp; r++) {
        float *row = j->p + (b * hp + r) * wp * g->c;
        int64_t iy = r - g->pt;
        if (iy < 0 || iy >= g->h) {
            memset(row, 0, (size_t)(wp * g->c) * sizeof(float));
            continue;
        }
        int64_t c0 = g->pl, c1 = g->pl + g->w < wp ? g->pl + g->w : wp; /* copied columns */
        memset(row, 0, (size_t)(c0 * g->c) * sizeof(float));
        memcpy(row + c0 * g->c, j->x + (b * g->h + iy) * g->w * g->c,
               (size_t)((c1 - c0) * g->c) * sizeof(float));
        memset(row + c1 * g->c, 0, (size_t)((wp - c1) * g->c) * sizeof(float));
    }
}

/* The input with a zero border: rows [-pt, Hp - pt) and columns [-pl, Wp - pl) of x, where Hp and
 * Wp reach the last window. NULL when x needs none (it is used in place) or on allocation failure
 * (*fail set). */
static float *pad_input(const rt_conv_geom *g, const float *x, dconv *d, size_t *bytes, int *fail) {
    int64_t hp = (g->oh - 1) * g->sh + g->kh, wp = (g->ow - 1) * g->sw + g->kw;
    d->C = g->c;
    if (g->pt == 0 && g->pl == 0 && hp <= g->h && wp <= g->w) {
        d->x = x, d->xs_row = g->w * g->c, d->xs_img = g->h * g->w * g->c;
        return NULL;
    }
    *bytes = (size_t)(g->n * hp * wp * g->c) * sizeof(float);
    float *p = rt_alloc(*bytes);
    if (!p) {
        *fail = 1;
        return NULL;
    }
    pad_job j = {g, x, p, hp, wp};
    if (g->n > 1 && *bytes >= ((size_t)1 << 18)) /* the seed CNN's second layer: 2 MB */
        rt_parallel_for(g->n, pad_image, &j);
    else
        for (int64_t b = 0; b < g->n; b++)
            pad_image(&j, b);
    d->x = p, d->xs_row = wp * g->c, d->xs_img = hp * wp * g->c;
    return p;
}

/* d's geometry from g and its input x, zero-bordered into *pad when it needs one (rt_free it with
 * *bytes). 1 when the direct kernels do not take g or memory is short. */
static int begin(const rt_conv_geom *g, const float *x, dconv *d, float **pad, size_t *bytes) {
    if (!rt_conv_direct_usable(g))
        return 1;
    d->N = g->n, d->OH = g->oh, d->OW = g->ow, d->O = g->o;
    d->KH = g->kh, d->KWC = g->kw * g->c, d->sh = g->sh, d->sw = g->sw;
    int fail = 0;
    *bytes = 0;
    *pad = pad_input(g, x, d, bytes, &fail);
    d->n_taps = 0;
    if (!fail && d->KWC < 16 && d->KH * d->KWC <= (int64_t)(sizeof d->tap / sizeof d->tap[0]) &&
        d->KH * d->xs_row < INT32_MAX)
        for (int64_t ky = 0; ky < d->KH; ky++)
            for (int64_t j = 0; j < d->KWC; j++)
                d->tap[d->n_taps++] = (int32_t)(ky * d->xs_row + j);
    return fail;
}

int rt_conv_direct_fwd(const rt_conv_geom *g, const float *x, const float *w, float *y) {
    dconv d = {.w = w, .y = y};
    float *pad;
    size_t bytes;
    if (begin(g, x, &d, &pad, &bytes))
        return 1;
    rt_parallel_for(g->n * g->oh, fwd_row, &d);
    rt_free(pad, bytes);
    return 0;
}

/* Bands: task t is band (t % per_img) of image t / per_img, computed into a buffer on this
 * thread's stack and handed to the caller's function while it is in cache. */
typedef struct bands {
    dconv d;
    int64_t band, per_img, oh_used;
    rt_conv_band_fn fn;
    void *ctx;
} bands;

static void band_task(void *ctx, int64_t t) {
    const bands *bd = ctx;
    float buf[RT_CONV_BAND_FLOATS] __attribute__((aligned(64)));
    int64_t b = t / bd->per_img, r0 = (t % bd->per_img) * bd->band;
    int64_t nr = bd->oh_used - r0 < bd->band ? bd->oh_used - r0 : bd->band,
            row = bd->d.OW * bd->d.O;
    for (int64_t r = 0; r < nr; r++)
        fwd_row_into(&bd->d, b, r0 + r, buf + r * row);
    bd->fn(bd->ctx, b, r0, nr, buf);
}

int rt_conv_direct_fwd_bands(const rt_conv_geom *g, const float *x, const float *w, int64_t band,
                             int64_t oh_used, rt_conv_band_fn fn, void *ctx) {
    if (band < 1 || oh_used < 1 || oh_used > g->oh || band * g->ow * g->o > RT_CONV_BAND_FLOATS)
        return 1;
    bands bd = {.d = {.w = w}, .band = band, .oh_used = oh_used, .fn = fn, .ctx = ctx};
    float *pad;
    size_t bytes;
    if (begin(g, x, &bd.d, &pad, &bytes))
        return 1;
    bd.per_img = (oh_used + band - 1) / band;
    rt_parallel_for(g->n * bd.per_img, band_task, &bd);
    rt_free(pad, bytes);
    return 0;
}

int rt_conv_direct_filter_grad(const rt_conv_geom *g, const float *x, const float *dy, float *dw) {
    dconv d = {.dy = dy, .y = dw};
    float *pad;
    size_t bytes;
    if (begin(g, x, &d, &pad, &bytes))
        return 1;
    /* enough tasks to balance the pool: blocks of taps a multiple of the tile */
    int64_t n_groups = (g->o + 63) / 64;
    __mmask16 last;
    int64_t big = rt_tile_big[group_nv(g->o, 0, &last) - 1];
    int64_t want = 8 * (int64_t)rt_pool_size(),
            per_row = (want + g->kh * n_groups - 1) / (g->kh * n_groups);
    int64_t span = (d.KWC + per_row - 1) / per_row;
    span = span < big ? big : (span + big - 1) / big * big;
    dw_plan pl = {&d, n_groups, (d.KWC + span - 1) / span, span};
    rt_parallel_for(g->kh * n_groups * pl.n_blocks, dw_task, &pl);
    rt_free(pad, bytes);
    return 0;
}

int rt_conv_direct_input_grad(const rt_conv_geom *g, const float *dy, const float *w, float *dx) {
    if (!rt_conv_direct_usable(g) || g->sh != 1 || g->sw != 1)
        return 1;
    /* dx = the stride-1 convolution of dy (C = O channels), padded by KH-1-pt and KW-1-pl, with
     * the flipped filter [KH][KW][O][C] */
    size_t wbytes = (size_t)(g->kh * g->kw * g->c * g->o) * sizeof(float);
    float *wf = rt_alloc(wbytes);
    if (!wf)
        return 1;
    for (int64_t ky = 0; ky < g->kh; ky++)
        for (int64_t kx = 0; kx < g->kw; kx++)
            for (int64_t c = 0; c < g->c; c++)
                for (int64_t o = 0; o < g->o; o++)
                    wf[((ky * g->kw + kx) * g->o + o) * g->c + c] =
                        w[(((g->kh - 1 - ky) * g->kw + (g->kw - 1 - kx)) * g->c + c) * g->o + o];
    rt_conv_geom t = {.n = g->n,
                      .h = g->oh,
                      .w = g->ow,
                      .c = g->o,
                      .kh = g->kh,
                      .kw = g->kw,
                      .o = g->c,
                      .oh = g->h,
                      .ow = g->w,
                      .sh = 1,
                      .sw = 1,
                      .dh = 1,
                      .dw = 1,
                      .pt = g->kh - 1 - g->pt,
                      .pl = g->kw - 1 - g->pl};
    int r = rt_conv_direct_fwd(&t, dy, wf, dx);
    rt_free(wf, wbytes);
    return r;
}

/* A window's maximum per lane as conv.c's loops take it: the first of equal values (+0 before
 * -0), the first NaN winning. max_ps(v, m) is `v > m ? v : m`, so the running maximum is a
 * chain of one 2-cycle op per element; the first NaN of each lane is tracked beside it (a chain
 * of compares and blends on m, ~7 cycles per element, made pooling latency-bound). */
typedef struct maxw {
    __m512 m, nanv;
    __mmask16 nan;
} maxw;

TGT static inline void maxw_first(maxw *w, __m512 v) {
    w->m = w->nanv = v;
    w->nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
}
TGT static inline void maxw_add(maxw *w, __m512 v) {
    __mmask16 k = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q) & (__mmask16)~w->nan;
    w->m = _mm512_max_ps(v, w->m);
    w->nanv = _mm512_mask_mov_ps(w->nanv, k, v);
    w->nan |= k;
}
TGT static inline __m512 maxw_get(const maxw *w) {
    return _mm512_mask_blend_ps(w->nan, w->m, w->nanv);
}

TGT static void max_pool_sample(const rt_conv_geom *p, const float *x, float *y, int64_t b) {
    int64_t C = p->c;
    for (int64_t oy = 0; oy < p->oh; oy++) {
        int64_t y0 = oy * p->sh - p->pt, y1 = y0 + p->kh;
        y0 = y0 < 0 ? 0 : y0;
        y1 = y1 > p->h ? p->h : y1;
        for (int64_t ox = 0; ox < p->ow; ox++) {
            int64_t x0 = ox * p->sw - p->pl, x1 = x0 + p->kw;
            x0 = x0 < 0 ? 0 : x0;
            x1 = x1 > p->w ? p->w : x1;
            float *yo = y + ((b * p->oh + oy) * p->ow + ox) * C;
            const float *xw = x + ((b * p->h + y0) * p->w + x0) * C;
            for (int64_t c = 0; c < C; c += 16) {
                __mmask16 k = rt_lanes(C - c);
                maxw m;
                maxw_first(&m, _mm512_maskz_loadu_ps(k, xw + c));
                for (int64_t iy = y0; iy < y1; iy++) {
                    const float *xr = x + ((b * p->h + iy) * p->w) * C + c;
                    for (int64_t ix = iy == y0 ? x0 + 1 : x0; ix < x1; ix++)
                        maxw_add(&m, _mm512_maskz_loadu_ps(k, xr + ix * C));
                }
                _mm512_mask_storeu_ps(yo + c, k, maxw_get(&m));
            }
        }
    }
}

int rt_max_pool_direct(const rt_conv_geom *p, const float *x, float *y, int64_t b) {
    if (!rt_avx512() || p->dh != 1 || p->dw != 1)
        return 1;
    max_pool_sample(p, x, y, b);
    return 0;
}

/* Window ox of a band, channels [c, c + 16) under k, by maxw's rules. */
TGT static void pool_window(const rt_conv_geom *p, const float *rows, int64_t nr, int64_t ox,
                            int64_t c, __mmask16 k, float *y) {
    int64_t C = p->c, rs = p->w * C;
    int64_t x0 = ox * p->sw - p->pl, x1 = x0 + p->kw;
    x0 = x0 < 0 ? 0 : x0;
    x1 = x1 > p->w ? p->w : x1;
    maxw m;
    maxw_first(&m, _mm512_maskz_loadu_ps(k, rows + x0 * C + c));
    for (int64_t r = 0; r < nr; r++)
        for (int64_t ix = r == 0 ? x0 + 1 : x0; ix < x1; ix++)
            maxw_add(&m, _mm512_maskz_loadu_ps(k, rows + r * rs + ix * C + c));
    _mm512_mask_storeu_ps(y + ox * C + c, k, maxw_get(&m));
}

/* Four whole windows (no clipping) at once: four independent chains of one max each, and a sum
 * beside them that turns NaN when any element is NaN (or infinities cancel): such a window is
 * taken again by maxw's rules. maxw on every element, one window at a time, made the seed CNN's
 * first pool cost a third of its convolution. Returns the windows done. */
TGT static int64_t max_pool_band4(const rt_conv_geom *p, const float *rows, int64_t nr, float *y) {
    int64_t C = p->c, rs = p->w * C, n = 0;
    if (p->pl != 0 || (p->ow - 1) * p->sw + p->kw > p->w)
        return 0;
    for (; n + 4 <= p->ow; n += 4)
        for (int64_t c = 0; c < C; c += 16) {
            __mmask16 k = rt_lanes(C - c);
            __m512 m[4], s[4];
            const float *w0 = rows + n * p->sw * C + c;
            for (int u = 0; u < 4; u++)
                m[u] = s[u] = _mm512_maskz_loadu_ps(k, w0 + u * p->sw * C);
            for (int64_t r = 0; r < nr; r++)
                for (int64_t ix = r == 0 ? 1 : 0; ix < p->kw; ix++)
                    for (int u = 0; u < 4; u++) {
                        __m512 v = _mm512_maskz_loadu_ps(k, w0 + r * rs + (u * p->sw + ix) * C);
                        m[u] = _mm512_max_ps(v, m[u]); /* v > m ? v : m: the first of equals */
                        s[u] = _mm512_add_ps(s[u], v);
                    }
            for (int u = 0; u < 4; u++) {
                if (_mm512_cmp_ps_mask(s[u], s[u], _CMP_UNORD_Q))
                    pool_window(p, rows, nr, n + u, c, k, y);
                else
                    _mm512_mask_storeu_ps(y + (n + u) * C + c, k, m[u]);
            }
        }
    return n;
}

TGT static void max_pool_band(const rt_conv_geom *p, const float *rows, int64_t nr, float *y) {
    for (int64_t ox = max_pool_band4(p, rows, nr, y); ox < p->ow; ox++)
        for (int64_t c = 0; c < p->c; c += 16)
            pool_window(p, rows, nr, ox, c, rt_lanes(p->c - c), y);
}

void rt_max_pool_band(const rt_conv_geom *p, const float *rows, int64_t nr, float *y) {
    max_pool_band(p, rows, nr, y);
}
#else
int rt_max_pool_direct(const rt_conv_geom *p, const float *x, float *y, int64_t b) {
    return 1;
}
int rt_conv_direct_fwd_bands(const rt_conv_geom *g, const float *x, const float *w, int64_t band,
                             int64_t oh_used, rt_conv_band_fn fn, void *ctx) {
    return 1;
}
void rt_max_pool_band(const rt_conv_geom *p, const float *rows, int64_t nr, float *y) {}
int rt_conv_direct_fwd(const rt_conv_geom *g, const float *x, const float *w, float *y) {
    return 1;
}
int rt_conv_direct_filter_grad(const rt_conv_geom *g, const float *x, const float *dy, float *dw) {
    return 1;
}
int rt_conv_direct_input_grad(const rt_conv_geom *g, const float *dy, const float *w, float *dx) {
    return 1;
}
#endif
