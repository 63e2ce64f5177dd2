/* conv_direct.c — f32 convolutions without patches, on the vector kernels of the CPU's
 * instruction set (direct.h: AVX-512 or AVX2 + FMA, picked at run time by rt_isa()).
 *
 * im2col + sgemm copies every input element KH·KW times and hands OpenBLAS thin products (64 or
 * 32 output channels, or 25 taps for a 1-channel image) that it runs at 15-45% of the FMA peak.
 * Here the output channels are the vector lanes (16 or 8 per register, the last one masked) and a
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
 * strided input gradients and CPUs without a vector ISA of direct.h take the im2col path
 * (conv.c). This file is the ISA-neutral half (padding, tasks, bands); the tiles are in
 * direct_kernels.inc, compiled for AVX-512, AVX2 + FMA and aarch64's NEON. */
#include <stdlib.h>
#include <string.h>

#include "runtime/kernels/direct.h"
#include "runtime/kernels/gemm.h"
#include "runtime/rt_pool.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
extern const rt_simd_kernels rt_simd_avx512, rt_simd_avx2;
#elif defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__))
extern const rt_simd_kernels rt_simd_neon;
#endif

const rt_simd_kernels *rt_simd(void) {
    int isa = rt_isa();
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    return isa == RT_ISA_AVX512 ? &rt_simd_avx512 : isa == RT_ISA_AVX2 ? &rt_simd_avx2 : NULL;
#elif defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__))
    return isa == RT_ISA_NEON ? &rt_simd_neon : NULL;
#else
    (void)isa;
    return NULL;
#endif
}

int rt_conv_direct_usable(const rt_conv_geom *g) {
    return rt_simd() && g->groups <= 1 && g->dh == 1 && g->dw == 1 && g->o >= 1 && g->c >= 1 &&
           g->pt < g->kh && g->pl < g->kw;
}

/* Forward tasks: blocks of `rows` output rows of one image (every group of output channels, or
 * one: big_filter), so that a span of taps' weights serves several rows' tiles from L2
 * (direct_kernels.inc: FWD_KC). */
typedef struct fwd_job {
    const rt_dconv *d;
    int64_t rows, per_img, per_group; /* per_group: tasks a group (0: every group a task) */
} fwd_job;

static void fwd_block(void *ctx, int64_t t) {
    const fwd_job *j = ctx;
    const rt_dconv *d = j->d;
    int64_t g0 = 0, g1 = INT64_MAX;
    if (j->per_group)
        g0 = t / j->per_group, g1 = g0 + 1, t %= j->per_group;
    int64_t b = t / j->per_img, oy0 = t % j->per_img * j->rows;
    int64_t oy1 = oy0 + j->rows < d->OH ? oy0 + j->rows : d->OH;
    d->k->fwd_rows_into(d, b, oy0, oy1, g0, g1, d->y + (b * d->OH + oy0) * d->OW * d->O,
                        d->OW * d->O);
}

/* Filters larger than BIG_FILTER bytes (Inception's 3x3 stride-2 35x35x288 -> 384: 4 MB) run by
 * group of output channels, then block of rows (fwd_job.per_group), so the threads take one
 * group's rows together and its weights (at most KH·KW·C·GROUP floats) stay in each
 * core's L2, where a task per row streamed every group's weights from L3 for a few tiles of
 * pixels (575 MFLOP in 4.1 ms). */
enum { BIG_FILTER = 1 << 20 };

static int big_filter(const rt_dconv *d) {
    return d->O > d->k->group && d->KH * d->KWC * d->O * (int64_t)sizeof(float) > BIG_FILTER;
}

typedef struct pad_job {
    const rt_conv_geom *g;
    const float *x;
    float *p;
    int64_t hp, wp;
} pad_job;

/* row t = b·hp + r of the zero-bordered copy (a task: rows are independent) */
static void pad_row(void *ctx, int64_t t) {
    const pad_job *j = ctx;
    const rt_conv_geom *g = j->g;
    int64_t wp = j->wp, b = t / j->hp, iy = t % j->hp - g->pt;
    float *row = j->p + t * wp * g->c;
    if (iy < 0 || iy >= g->h) {
        memset(row, 0, (size_t)(wp * g->c) * sizeof(float));
        return;
    }
    int64_t c0 = g->pl, c1 = g->pl + g->w < wp ? g->pl + g->w : wp; /* copied columns */
    memset(row, 0, (size_t)(c0 * g->c) * sizeof(float));
    memcpy(row + c0 * g->c, j->x + (b * g->h + iy) * g->w * g->c,
           (size_t)((c1 - c0) * g->c) * sizeof(float));
    memset(row + c1 * g->c, 0, (size_t)((wp - c1) * g->c) * sizeof(float));
}

/* The input with a zero border: rows [-pt, Hp - pt) and columns [-pl, Wp - pl) of x, where Hp and
 * Wp reach the last window. NULL when x needs none (it is used in place) or on allocation failure
 * (*fail set). */
static float *pad_input(const rt_conv_geom *g, const float *x, rt_dconv *d, size_t *bytes,
                        int *fail) {
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
    /* by rows on the pool from 128 KiB (Inception's 17 x 17 x 192 with 3 columns each side: 300
     * KB, one image: a serial copy before every 1x7 convolution) */
    if (*bytes >= ((size_t)1 << 17))
        rt_parallel_for(g->n * hp, pad_row, &j);
    else
        for (int64_t t = 0; t < g->n * hp; t++)
            pad_row(&j, t);
    d->x = p, d->xs_row = wp * g->c, d->xs_img = hp * wp * g->c;
    return p;
}

/* d's geometry from g and its input x, zero-bordered into *pad when it needs one (rt_free it with
 * *bytes). 1 when the direct kernels do not take g or memory is short. */
static int begin(const rt_conv_geom *g, const float *x, rt_dconv *d, float **pad, size_t *bytes) {
    if (!rt_conv_direct_usable(g))
        return 1;
    d->k = rt_simd();
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

/* The filter w ([KH][KW·C][O]) for the forward tiles (rt_dconv.w): pw when it is that packing
 * (rt_conv_direct_pack, once for a constant filter), else packed for this call into *tmp (rt_free
 * it with *bytes): per group of GROUP output channels, its KH·KW·C taps of GROUP floats, zero
 * past O. A filter row of O floats (O = 100: 400 bytes) is neither a whole number of cache lines
 * nor aligned, so every tap's vectors were split loads, and one group's weights were O/GROUP
 * times the bytes the tile reads. 1 (d untouched) when memory is short. */
static int filter_of(const float *w, const rt_packed_b *pw, rt_dconv *d, float **tmp,
                     size_t *bytes) {
    int64_t group = d->k->group, taps = d->KH * d->KWC;
    *tmp = NULL, *bytes = 0;
    if (pw && pw->panel == group && pw->k == taps && pw->n == d->O) {
        d->w = pw->p;
    } else {
        *bytes = (size_t)((d->O + group - 1) / group * taps * group) * sizeof(float);
        if (!(*tmp = rt_alloc(*bytes)))
            return 1;
        rt_pack_panels_into(*tmp, w, taps, d->O, d->O, 0, group);
        d->w = *tmp;
    }
    d->wg = taps * group, d->wt = group;
    return 0;
}

/* ---- short output rows and 1x1 filters: patches and a product ------------------------------
 * With few output rows of at most 7 pixels (ResNet's last stage at batch 1: 7 rows of 7), a row
 * is two tiles of 3 and 4 pixels, each streaming all the filter's taps from L2 for a few
 * multiply-adds per weight vector. There, with many output channels, and for every 1x1 filter (a
 * product already, whose K the product's tiles block in L1), the output pixels of the whole batch
 * are the rows of a product y [N·OH·OW, O] = patches [N·OH·OW, KH·KW·C] · w [KH·KW·C, O] on the
 * product tiles (gemm_packed.c), the filter already being that matrix; a 1x1 stride-1
 * convolution's patches are its input, and a few rows' patches are at most a few MB. (With many
 * rows the patches grow with the batch: the seed CNN's second input gradient, 14 x 14 at batch
 * 50, would copy 63 MB; its step went 37 -> 48 ms.) With the filter packed once for either
 * route, 2 threads (bench/RESULTS.md): 7 x 7 x 512 -> 512 3x3 product 105-157 GFLOP/s, direct
 * 91-98; but 14 x 14 x 256 -> 256 direct 180-234 against 90-147, and a few output channels
 * (DenseNet's 32) gain nothing from a product and pay for its patches: 14 x 14 x 128 -> 32
 * direct 87-137 against 71-81. Where products are OpenBLAS's (AVX2, NEON) the direct tiles
 * run. */
enum { SHORT_ROW = 7, PRODUCT_MIN_O = 256 };

typedef struct patch_job {
    const rt_dconv *d;
    float *a; /* [N·OH·OW][KH·KWC] */
} patch_job;

static void patch_row(void *ctx, int64_t t) { /* output row t = b·OH + oy */
    const patch_job *j = ctx;
    const rt_dconv *d = j->d;
    int64_t b = t / d->OH, oy = t % d->OH, k = d->KH * d->KWC;
    for (int64_t ox = 0; ox < d->OW; ox++) {
        float *dst = j->a + (t * d->OW + ox) * k;
        for (int64_t ky = 0; ky < d->KH; ky++)
            memcpy(dst + ky * d->KWC,
                   d->x + b * d->xs_img + (oy * d->sh + ky) * d->xs_row + ox * d->sw * d->C,
                   (size_t)d->KWC * sizeof(float));
    }
}

static int as_product(const rt_conv_geom *g) {
    int64_t taps = g->kh * g->kw * g->c;
    int few =
        g->ow <= SHORT_ROW && g->o >= PRODUCT_MIN_O && g->n * g->oh < 8 * (int64_t)rt_pool_size();
    return (few || (g->kh == 1 && g->kw == 1)) &&
           rt_gemm_f32_takes(g->n * g->oh * g->ow, g->o, taps);
}

int rt_conv_direct_as_product(const rt_conv_geom *g) {
    return rt_conv_direct_usable(g) && as_product(g);
}

/* The product route with the filter w ([KH·KW·C][O]) as it lies, or packed (pb: rt_gemm_pack of
 * that matrix, once, when it is a constant of the graph), and the tiles' epilogue (NULL: none). */
static int fwd_as_product(const rt_conv_geom *g, const float *x, const float *w,
                          const rt_packed_b *pb, const rt_gemm_epi *epi, float *y) {
    rt_dconv d = {.y = y};
    float *pad;
    size_t bytes;
    if (begin(g, x, &d, &pad, &bytes))
        return 1;
    int64_t m = g->n * g->oh * g->ow, k = g->kh * d.KWC;
    int direct = !pad && g->kh == 1 && g->kw == 1 && g->sh == 1 && g->sw == 1;
    size_t abytes = direct ? 0 : (size_t)(m * k) * sizeof(float);
    float *a = direct ? (float *)d.x : rt_alloc(abytes);
    if (!a) {
        rt_free(pad, bytes);
        return 1;
    }
    if (!direct) {
        patch_job j = {&d, a};
        if (abytes >= ((size_t)1 << 18))
            rt_parallel_for(g->n * g->oh, patch_row, &j);
        else
            for (int64_t t = 0; t < g->n * g->oh; t++)
                patch_row(&j, t);
    }
    int r = 1; /* a packed filter of another size and none as it lies: not run */
    if (pb && pb->panel == RT_PANEL && pb->k == k && pb->n == g->o)
        rt_gemm_packed(pb, m, a, k, y, g->o, epi), r = 0;
    else if (w)
        r = rt_gemm_f32(m, g->o, k, a, k, 0, w, g->o, y, g->o, epi);
    if (!direct)
        rt_free(a, abytes);
    rt_free(pad, bytes);
    return r;
}

int rt_conv_direct_product(const rt_conv_geom *g, const float *x, const float *w,
                           const rt_packed_b *pb, const rt_gemm_epi *epi, float *y) {
    return rt_conv_direct_as_product(g) ? fwd_as_product(g, x, w, pb, epi, y) : 1;
}

rt_packed_b *rt_conv_direct_pack(const rt_conv_geom *g, const float *w) {
    if (!rt_conv_direct_usable(g))
        return NULL;
    int64_t taps = g->kh * g->kw * g->c;
    if (as_product(g))
        return rt_gemm_pack(w, taps, g->o, g->o, 0);
    return rt_pack_panels(w, taps, g->o, g->o, 0, rt_simd()->group);
}

int rt_conv_direct_fwd(const rt_conv_geom *g, const float *x, const float *w, const rt_packed_b *pw,
                       float *y) {
    if (rt_conv_direct_as_product(g) && fwd_as_product(g, x, w, pw, NULL, y) == 0)
        return 0;
    rt_dconv d = {.y = y};
    float *pad, *wp;
    size_t bytes, wbytes;
    if (begin(g, x, &d, &pad, &bytes))
        return 1;
    if (filter_of(w, pw, &d, &wp, &wbytes)) {
        rt_free(pad, bytes);
        return 1;
    }
    /* rows a task: up to 4, while there are 8 tasks a thread */
    int64_t groups = big_filter(&d) ? (g->o + d.k->group - 1) / d.k->group : 1;
    int64_t rows = 4, want = 8 * (int64_t)rt_pool_size();
    while (rows > 1 && groups * g->n * ((g->oh + rows - 1) / rows) < want)
        rows--;
    int64_t per_img = (g->oh + rows - 1) / rows;
    fwd_job j = {&d, rows, per_img, groups > 1 ? g->n * per_img : 0};
    rt_parallel_for(groups * g->n * per_img, fwd_block, &j);
    rt_free(wp, wbytes);
    rt_free(pad, bytes);
    return 0;
}

/* Bands: task t is band (t % per_img) of image t / per_img, computed into a buffer on this
 * thread's stack and handed to the caller's function while it is in cache. */
typedef struct bands {
    rt_dconv d;
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
    bd->d.k->fwd_rows_into(&bd->d, b, r0, r0 + nr, 0, INT64_MAX, buf, row);
    bd->fn(bd->ctx, b, r0, nr, buf);
}

int rt_conv_direct_fwd_bands(const rt_conv_geom *g, const float *x, const float *w,
                             const rt_packed_b *pw, int64_t band, int64_t oh_used,
                             rt_conv_band_fn fn, void *ctx) {
    if (band < 1 || oh_used < 1 || oh_used > g->oh || band * g->ow * g->o > RT_CONV_BAND_FLOATS)
        return 1;
    if (as_product(g)) /* the caller runs rt_conv_direct_fwd, then its epilogue */
        return 1;
    bands bd = {.band = band, .oh_used = oh_used, .fn = fn, .ctx = ctx};
    float *pad, *wp;
    size_t bytes, wbytes;
    if (begin(g, x, &bd.d, &pad, &bytes))
        return 1;
    if (big_filter(&bd.d)) { /* by group (rt_conv_direct_fwd), then the caller's epilogue */
        rt_free(pad, bytes);
        return 1;
    }
    if (filter_of(w, pw, &bd.d, &wp, &wbytes)) {
        rt_free(pad, bytes);
        return 1;
    }
    bd.per_img = (oh_used + band - 1) / band;
    rt_parallel_for(g->n * bd.per_img, band_task, &bd);
    rt_free(wp, wbytes);
    rt_free(pad, bytes);
    return 0;
}

int rt_conv_direct_filter_grad(const rt_conv_geom *g, const float *x, const float *dy, float *dw) {
    rt_dconv d = {.dy = dy, .y = dw};
    float *pad;
    size_t bytes;
    if (begin(g, x, &d, &pad, &bytes))
        return 1;
    /* enough tasks to balance the pool: blocks of taps a multiple of the tile */
    const rt_simd_kernels *k = d.k;
    int64_t n_groups = (g->o + k->group - 1) / k->group, o0 = g->o < k->group ? g->o : k->group;
    int64_t big = k->tile_big[(o0 + k->lanes - 1) / k->lanes - 1];
    int64_t want = 8 * (int64_t)rt_pool_size(),
            per_row = (want + g->kh * n_groups - 1) / (g->kh * n_groups);
    int64_t span = (d.KWC + per_row - 1) / per_row;
    span = span < big ? big : (span + big - 1) / big * big;
    rt_dw_plan pl = {&d, n_groups, (d.KWC + span - 1) / span, span};
    rt_parallel_for(g->kh * n_groups * pl.n_blocks, k->dw_task, &pl);
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
    int r = rt_conv_direct_fwd(&t, dy, wf, NULL, dx);
    rt_free(wf, wbytes);
    return r;
}

int rt_pool_direct_rows(const rt_conv_geom *p, int avg, const float *x, float *y, int64_t b,
                        int64_t oy0, int64_t oy1) {
    const rt_simd_kernels *k = rt_simd();
    if (!k || p->dh != 1 || p->dw != 1)
        return 1;
    (avg ? k->avg_pool_rows : k->max_pool_rows)(p, x, y, b, oy0, oy1);
    return 0;
}

void rt_max_pool_band(const rt_conv_geom *p, const float *rows, int64_t nr, float *y) {
    const rt_simd_kernels *k = rt_simd();
    if (k) /* the caller planned a fused pool only where rt_conv_direct_usable said so */
        k->max_pool_band(p, rows, nr, y);
}
