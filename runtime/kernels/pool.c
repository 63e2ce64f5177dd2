/* pool.c — max and average pooling over H and W of NHWC tensors, with their gradients. The
 * forward poolings run by blocks of output rows on the runtime's pool (rows never share an
 * output), the gradients and dilated windows a sample a task (samples never share an
 * input-gradient element). Within an output position the loops run over the window's
 * positions with the channels innermost and contiguous, so they vectorize. Max: NaN wins (and is
 * kept once found), the first maximum of a window takes the gradient. Average: over the window's
 * positions inside the input. f32 max pooling takes the direct kernels (conv_direct.c) where the
 * ISA has them. */
#include <stdlib.h>
#include <string.h>

#include "runtime/kernels/conv.h"
#include "runtime/kernels/kernels.h"
#include "runtime/rt_pool.h"

typedef rt_conv_geom geom;

rt_conv_geom rt_pool_geom_of(const ir_node *n, const int64_t *x, const int64_t *y) {
    int dil = n->a.n_list == 6; /* a dilated max pool: the dilations after the pads */
    return (rt_conv_geom){x[0],
                          x[1],
                          x[2],
                          x[3],
                          n->a.i[2],
                          n->a.i[3],
                          x[3],
                          y[1],
                          y[2],
                          n->a.i[0],
                          n->a.i[1],
                          dil ? n->a.list[4] : 1,
                          dil ? n->a.list[5] : 1,
                          n->a.list[0],
                          n->a.list[2],
                          1};
}

enum { POOL_CH = 256 }; /* channels per pass of the max gradient's argmax */

#define WINDOW(p, oy, ox)                                                                          \
    int64_t y0 = (oy) * (p)->sh - (p)->pt, x0 = (ox) * (p)->sw - (p)->pl;                          \
    int64_t y1 = y0 + (p)->kh, x1 = x0 + (p)->kw;                                                  \
    y0 = y0 < 0 ? 0 : y0;                                                                          \
    x0 = x0 < 0 ? 0 : x0;                                                                          \
    y1 = y1 > (p)->h ? (p)->h : y1;                                                                \
    x1 = x1 > (p)->w ? (p)->w : x1

#define XI(p, b, iy, ix) ((((b) * (p)->h + (iy)) * (p)->w + (ix)) * (p)->c)

#define POOLS(T)                                                                                   \
    /* the running maximum of POOL_CH channels stays in a local array (registers), not in y,       \
     * which the compiler must assume x may alias */                                               \
    static void max_pool_##T(const geom *p, const T *x, T *y, int64_t b, int64_t oy0,              \
                             int64_t oy1) {                                                        \
        T acc[POOL_CH];                                                                            \
        for (int64_t oy = oy0; oy < oy1; oy++)                                                     \
            for (int64_t ox = 0; ox < p->ow; ox++) {                                               \
                WINDOW(p, oy, ox);                                                                 \
                T *yo = y + ((b * p->oh + oy) * p->ow + ox) * p->c;                                \
                for (int64_t c0 = 0; c0 < p->c; c0 += POOL_CH) {                                   \
                    int64_t nc = p->c - c0 < POOL_CH ? p->c - c0 : POOL_CH;                        \
                    memcpy(acc, x + XI(p, b, y0, x0) + c0, (size_t)nc * sizeof(T));                \
                    for (int64_t iy = y0; iy < y1; iy++)                                           \
                        for (int64_t ix = x0; ix < x1; ix++) {                                     \
                            const T *xi = x + XI(p, b, iy, ix) + c0;                               \
                            for (int64_t c = 0; c < nc; c++) {                                     \
                                T v = xi[c], m = acc[c]; /* branch-free: it vectorizes */          \
                                acc[c] = ((v > m) | ((v != v) & (m == m))) ? v : m;                \
                            }                                                                      \
                        }                                                                          \
                    memcpy(yo + c0, acc, (size_t)nc * sizeof(T));                                  \
                }                                                                                  \
            }                                                                                      \
    }                                                                                              \
    /* The argmax of each window and channel as the window position k (int32 lanes, branch-free:   \
     * it vectorizes). Windows that never overlap (tiles) write each input element once: the       \
     * gradient or zero; overlapping ones add the gradient at the argmax (into zeros). */          \
    static void max_pool_grad_##T(const geom *p, const T *x, const T *dy, T *dx, int64_t b,        \
                                  int tiles) {                                                     \
        T best[POOL_CH];                                                                           \
        int32_t at[POOL_CH];                                                                       \
        for (int64_t oy = 0; oy < p->oh; oy++)                                                     \
            for (int64_t ox = 0; ox < p->ow; ox++) {                                               \
                WINDOW(p, oy, ox);                                                                 \
                const T *g = dy + ((b * p->oh + oy) * p->ow + ox) * p->c;                          \
                for (int64_t c0 = 0; c0 < p->c; c0 += POOL_CH) {                                   \
                    int64_t nc = p->c - c0 < POOL_CH ? p->c - c0 : POOL_CH;                        \
                    const T *x0p = x + XI(p, b, y0, x0) + c0;                                      \
                    for (int64_t c = 0; c < nc; c++)                                               \
                        best[c] = x0p[c], at[c] = 0;                                               \
                    int32_t k = 0;                                                                 \
                    for (int64_t iy = y0; iy < y1; iy++)                                           \
                        for (int64_t ix = x0; ix < x1; ix++, k++) {                                \
                            const T *xi = x + XI(p, b, iy, ix) + c0;                               \
                            for (int64_t c = 0; c < nc; c++) {                                     \
                                T v = xi[c], m = best[c];                                          \
                                int32_t take = -(int32_t)((v > m) | ((v != v) & (m == m)));        \
                                best[c] = take ? v : m;                                            \
                                at[c] = (at[c] & ~take) | (k & take);                              \
                            }                                                                      \
                        }                                                                          \
                    if (!tiles) {                                                                  \
                        for (int64_t c = 0; c < nc; c++)                                           \
                            dx[XI(p, b, y0 + at[c] / (x1 - x0), x0 + at[c] % (x1 - x0)) + c0 +     \
                               c] += g[c0 + c];                                                    \
                        continue;                                                                  \
                    }                                                                              \
                    k = 0;                                                                         \
                    for (int64_t iy = y0; iy < y1; iy++)                                           \
                        for (int64_t ix = x0; ix < x1; ix++, k++) {                                \
                            T *d = dx + XI(p, b, iy, ix) + c0;                                     \
                            for (int64_t c = 0; c < nc; c++) {                                     \
                                T gv = g[c0 + c]; /* loaded unconditionally: a blend, no branch */ \
                                d[c] = at[c] == k ? gv : (T)0;                                     \
                            }                                                                      \
                        }                                                                          \
                }                                                                                  \
            }                                                                                      \
    }                                                                                              \
    /* the sums of POOL_CH channels in a local array, as max_pool's maxima: in registers, not      \
     * in y (which x may alias), and every output written (no zeroing first) */                    \
    static void avg_pool_##T(const geom *p, const T *x, T *y, int64_t b, int64_t oy0,              \
                             int64_t oy1) {                                                        \
        T acc[POOL_CH];                                                                            \
        for (int64_t oy = oy0; oy < oy1; oy++)                                                     \
            for (int64_t ox = 0; ox < p->ow; ox++) {                                               \
                WINDOW(p, oy, ox);                                                                 \
                T *yo = y + ((b * p->oh + oy) * p->ow + ox) * p->c;                                \
                T cnt = (T)((y1 - y0) * (x1 - x0));                                                \
                for (int64_t c0 = 0; c0 < p->c; c0 += POOL_CH) {                                   \
                    int64_t nc = p->c - c0 < POOL_CH ? p->c - c0 : POOL_CH;                        \
                    for (int64_t c = 0; c < nc; c++)                                               \
                        acc[c] = 0;                                                                \
                    for (int64_t iy = y0; iy < y1; iy++)                                           \
                        for (int64_t ix = x0; ix < x1; ix++) {                                     \
                            const T *xi = x + XI(p, b, iy, ix) + c0;                               \
                            for (int64_t c = 0; c < nc; c++)                                       \
                                acc[c] += xi[c];                                                   \
                        }                                                                          \
                    for (int64_t c = 0; c < nc; c++)                                               \
                        yo[c0 + c] = acc[c] / cnt;                                                 \
                }                                                                                  \
            }                                                                                      \
    }                                                                                              \
    static void avg_pool_grad_##T(const geom *p, const T *dy, T *dx, int64_t b) {                  \
        for (int64_t oy = 0; oy < p->oh; oy++)                                                     \
            for (int64_t ox = 0; ox < p->ow; ox++) {                                               \
                WINDOW(p, oy, ox);                                                                 \
                const T *g = dy + ((b * p->oh + oy) * p->ow + ox) * p->c;                          \
                T cnt = (T)((y1 - y0) * (x1 - x0));                                                \
                for (int64_t iy = y0; iy < y1; iy++)                                               \
                    for (int64_t ix = x0; ix < x1; ix++) {                                         \
                        T *d = dx + XI(p, b, iy, ix);                                              \
                        for (int64_t c = 0; c < p->c; c++)                                         \
                            d[c] += g[c] / cnt;                                                    \
                    }                                                                              \
            }                                                                                      \
    }
POOLS(float)
POOLS(double)

/* A dilated max window (dh, dw > 1 in p): its taps are dh, dw apart, those inside the input
 * taken in (ky, kx) order with the same rules (NaN wins, the first maximum takes the gradient).
 * Forward writes every output; the gradient adds into zeros. */
#define DILATED_TAPS(p, oy, ox, ...)                                                               \
    for (int64_t ky = 0; ky < (p)->kh; ky++) {                                                     \
        int64_t iy = (oy) * (p)->sh - (p)->pt + ky * (p)->dh;                                      \
        if (iy < 0 || iy >= (p)->h)                                                                \
            continue;                                                                              \
        for (int64_t kx = 0; kx < (p)->kw; kx++) {                                                 \
            int64_t ix = (ox) * (p)->sw - (p)->pl + kx * (p)->dw;                                  \
            if (ix < 0 || ix >= (p)->w)                                                            \
                continue;                                                                          \
            __VA_ARGS__                                                                            \
        }                                                                                          \
    }
/* Running maxima start at -inf: the rule then keeps the first maximum, lets a NaN win, and an
 * output with no tap inside (never: pads are smaller than the span) is -inf. */
#define DILATED(T)                                                                                  \
    /* rule(m, v): v replaces the running m when larger, or NaN over a number (first kept) */       \
    static inline T pool_rule_##T(T m, T v) {                                                       \
        return (v > m) || ((v != v) & (m == m)) ? v : m;                                            \
    }                                                                                               \
    /* one output's window, tap by tap (when the row maxima below find no memory) */                \
    static void max_pool_dil_taps_##T(const geom *p, const T *x, T *yo, int64_t b, int64_t oy,      \
                                      int64_t ox) {                                                 \
        for (int64_t c = 0; c < p->c; c++)                                                          \
            yo[c] = (T)-INFINITY;                                                                   \
        DILATED_TAPS(p, oy, ox, {                                                                   \
            const T *xi = x + XI(p, b, iy, ix);                                                     \
            for (int64_t c = 0; c < p->c; c++)                                                      \
                yo[c] = pool_rule_##T(yo[c], xi[c]);                                                \
        })                                                                                          \
    }                                                                                               \
    /* Row iy's maxima over each output column's window, window by window, into r [ow][c]. */       \
    static void row_max_windows_##T(const geom *p, const T *x, int64_t b, int64_t iy, T *r0) {      \
        int64_t C = p->c;                                                                           \
        for (int64_t o2 = 0; o2 < p->ow; o2++) {                                                    \
            T *r = r0 + o2 * C;                                                                     \
            for (int64_t c = 0; c < C; c++)                                                         \
                r[c] = (T)-INFINITY;                                                                \
            for (int64_t kx = 0; kx < p->kw; kx++) {                                                \
                int64_t ix = o2 * p->sw - p->pl + kx * p->dw;                                       \
                if (ix < 0 || ix >= p->w)                                                           \
                    continue;                                                                       \
                const T *xi = x + XI(p, b, iy, ix);                                                 \
                for (int64_t c = 0; c < C; c++)                                                     \
                    r[c] = pool_rule_##T(r[c], xi[c]);                                              \
            }                                                                                       \
        }                                                                                           \
    }                                                                                               \
    /* The same when the dilation is q strides (dw = q·sw): column o2's taps are z[o2 + q·kx]     \
     * with z[j] = x[iy, j·sw - pl] (-inf outside: never a winner), so each residue class mod q is \
     * a sliding window of kw over its sequence: van Herk / Gil-Werman, a prefix and a suffix       \
     * maximum per block of kw and one rule per output, O(3) per element instead of O(kw). Ties     \
     * keep the earlier element in both scans, so the first maximum and NaN rules hold. 1 when      \
     * there is no memory (the caller loops window by window). */                                   \
    static int row_max_sliding_##T(const geom *p, const T *x, int64_t b, int64_t iy, T *r) {        \
        int64_t q = p->dw / p->sw, kw = p->kw, C = p->c, lz = p->ow + q * (kw - 1);                 \
        int64_t tmax = (lz + q - 1) / q;                                                            \
        T *s = malloc((size_t)(3 * tmax + 1) * sizeof(T)), *P = s + tmax, *S = P + tmax;            \
        if (!s)                                                                                     \
            return 1;                                                                               \
        for (int64_t c = 0; c < C; c++)                                                             \
            for (int64_t rho = 0; rho < q && rho < p->ow; rho++) {                                  \
                int64_t tn = (lz - rho + q - 1) / q;                                                \
                for (int64_t t = 0; t < tn; t++) {                                                  \
                    int64_t ix = (rho + q * t) * p->sw - p->pl;                                     \
                    s[t] = ix >= 0 && ix < p->w ? x[XI(p, b, iy, ix) + c] : (T)-INFINITY;           \
                    P[t] = t % kw == 0 ? s[t] : pool_rule_##T(P[t - 1], s[t]);                      \
                }                                                                                   \
                for (int64_t t = tn - 1; t >= 0; t--)                                               \
                    S[t] = t % kw == kw - 1 || t == tn - 1 ? s[t] : pool_rule_##T(s[t], S[t + 1]);  \
                for (int64_t t0 = 0; rho + q * t0 < p->ow; t0++)                                    \
                    r[(rho + q * t0) * C + c] = pool_rule_##T(S[t0], P[t0 + kw - 1]);               \
            }                                                                                       \
        free(s);                                                                                    \
        return 0;                                                                                   \
    }                                                                                               \
    /* Separable: the maximum over a window's columns is computed once per input row and output     \
     * column (windows of neighbouring output rows share their rows: the 60x80 window of ONNX's     \
     * dilated pooling model, stride 10, reads each row for ~6 output rows), then over its rows.    \
     * The first maximum in (ky, kx) order and NaN winning hold through both stages. */             \
    static void max_pool_dil_##T(const geom *p, const T *x, T *y, int64_t b) {                      \
        int64_t C = p->c, row = p->ow * C;                                                          \
        T *rm = malloc((size_t)(p->h * row + 1) * sizeof(T));                                       \
        unsigned char *have = calloc((size_t)p->h + 1, 1);                                          \
        for (int64_t oy = 0; oy < p->oh; oy++)                                                      \
            for (int64_t ox = 0; ox < p->ow; ox++) {                                                \
                T *yo = y + ((b * p->oh + oy) * p->ow + ox) * C;                                    \
                if (!rm || !have) {                                                                 \
                    max_pool_dil_taps_##T(p, x, yo, b, oy, ox);                                     \
                    continue;                                                                       \
                }                                                                                   \
                for (int64_t c = 0; c < C; c++)                                                     \
                    yo[c] = (T)-INFINITY;                                                           \
                for (int64_t ky = 0; ky < p->kh; ky++) {                                            \
                    int64_t iy = oy * p->sh - p->pt + ky * p->dh;                                   \
                    if (iy < 0 || iy >= p->h)                                                       \
                        continue;                                                                   \
                    if (!have[iy]) { /* row iy's maximum over each output column's taps */          \
                        T *r = rm + iy * row;                                                       \
                        if (p->dw % p->sw != 0 || p->kw < 8 ||                                      \
                            row_max_sliding_##T(p, x, b, iy, r))                                    \
                            row_max_windows_##T(p, x, b, iy, r);                                    \
                        have[iy] = 1;                                                               \
                    }                                                                               \
                    const T *r = rm + iy * row + ox * C;                                            \
                    for (int64_t c = 0; c < C; c++)                                                 \
                        yo[c] = pool_rule_##T(yo[c], r[c]);                                         \
                }                                                                                   \
            }                                                                                       \
        free(rm);                                                                                   \
        free(have);                                                                                 \
    }                                                                                               \
    static void max_pool_grad_dil_##T(const geom *p, const T *x, const T *dy, T *dx, int64_t b) {   \
        for (int64_t oy = 0; oy < p->oh; oy++)                                                      \
            for (int64_t ox = 0; ox < p->ow; ox++) {                                                \
                const T *g = dy + ((b * p->oh + oy) * p->ow + ox) * p->c;                           \
                for (int64_t c = 0; c < p->c; c++) {                                                \
                    int64_t at = -1;                                                                \
                    T m = 0;                                                                        \
                    DILATED_TAPS(p, oy, ox, {                                                       \
                        T v = x[XI(p, b, iy, ix) + c];                                              \
                        if (at < 0 || (v > m) || ((v != v) & (m == m)))                             \
                            m = v, at = XI(p, b, iy, ix) + c;                                       \
                    })                                                                              \
                    if (at >= 0)                                                                    \
                        dx[at] += g[c];                                                             \
                }                                                                                   \
            }                                                                                       \
    }
DILATED(float)
DILATED(double)

typedef struct pool_task {
    const ir_node *n;
    const geom *p;
    const void *a, *b; /* the inputs */
    void *out;
    int f32;
    int64_t zero; /* elements of out per sample to zero first (0: the kernel writes them all) */
    int tiles;    /* max gradient: the windows never overlap */
    int64_t per, groups; /* forward pooling: output rows per task, tasks per sample */
} pool_task;

/* Task i of a forward pooling: rows [g·per, (g+1)·per) of sample i / groups, g = i % groups
 * (rows never share an output: at batch 1, Inception's pools ran on one thread). */
static void pool_rows(void *ctx, int64_t i) {
    const pool_task *t = ctx;
    const geom *p = t->p;
    int64_t b = i / t->groups, oy0 = i % t->groups * t->per,
            oy1 = oy0 + t->per < p->oh ? oy0 + t->per : p->oh;
    int avg = t->n->op == IR_OP_AVG_POOL2D;
    if (t->f32 && !rt_config_get()->exact_math && /* the vector kernels: the loops' order */
        rt_pool_direct_rows(p, avg, t->a, t->out, b, oy0, oy1) == 0)
        return;
    if (t->f32)
        (avg ? avg_pool_float : max_pool_float)(p, t->a, t->out, b, oy0, oy1);
    else
        (avg ? avg_pool_double : max_pool_double)(p, t->a, t->out, b, oy0, oy1);
}

static void pool_sample(void *ctx, int64_t b) {
    const pool_task *t = ctx;
    const geom *p = t->p;
    if (t->zero)
        memset((char *)t->out + (size_t)(b * t->zero) * (t->f32 ? 4 : 8), 0,
               (size_t)t->zero * (t->f32 ? 4 : 8));
    if (p->dh != 1 || p->dw != 1) { /* only max pooling is dilated (infer_nn.c) */
        if (t->n->op == IR_OP_MAX_POOL2D)
            t->f32 ? max_pool_dil_float(p, t->a, t->out, b)
                   : max_pool_dil_double(p, t->a, t->out, b);
        else
            t->f32 ? max_pool_grad_dil_float(p, t->a, t->b, t->out, b)
                   : max_pool_grad_dil_double(p, t->a, t->b, t->out, b);
        return;
    }
    switch (t->n->op) {
    case IR_OP_MAX_POOL2D_GRAD:
        t->f32 ? max_pool_grad_float(p, t->a, t->b, t->out, b, t->tiles)
               : max_pool_grad_double(p, t->a, t->b, t->out, b, t->tiles);
        break;
    default:
        t->f32 ? avg_pool_grad_float(p, t->a, t->out, b) : avg_pool_grad_double(p, t->a, t->out, b);
        break;
    }
}

tj_status rt_k_pool2d(const ir_node *n, tj_tensor *const *in, tj_tensor *out) {
    int dt = out->dtype;
    if ((dt != TJ_F32 && dt != TJ_F64) || in[0]->dtype != dt)
        return rt_k_unsupported(n, dt);
    /* x: the full-size side (the input, or the gradient op's output); y: the pooled side */
    const int64_t *xd =
        n->op == IR_OP_MAX_POOL2D || n->op == IR_OP_AVG_POOL2D ? in[0]->dims : out->dims;
    const int64_t *yd = n->op == IR_OP_MAX_POOL2D || n->op == IR_OP_AVG_POOL2D ? out->dims
                        : n->op == IR_OP_MAX_POOL2D_GRAD                       ? in[1]->dims
                                                                               : in[0]->dims;
    geom p = rt_pool_geom_of(n, xd, yd);
    if (out->numel == 0)
        return TJ_OK;
    /* max pooling writes every output; with windows that never overlap and together cover the
     * input, so does its gradient; the rest accumulate into zeros */
    int tiles = p.sh >= p.kh && p.sw >= p.kw && p.dh == 1 && p.dw == 1;
    int covers = tiles && p.sh == p.kh && p.sw == p.kw && p.oh * p.kh - p.pt >= p.h &&
                 p.ow * p.kw - p.pl >= p.w;
    int fwd = n->op == IR_OP_MAX_POOL2D || n->op == IR_OP_AVG_POOL2D;
    int whole = fwd || (n->op == IR_OP_MAX_POOL2D_GRAD && covers);
    pool_task t = {n,
                   &p,
                   in[0]->data,
                   n->op == IR_OP_MAX_POOL2D_GRAD ? in[1]->data : NULL,
                   out->data,
                   dt == TJ_F32,
                   whole ? 0 : out->numel / p.n,
                   tiles,
                   p.oh,
                   1};
    int par = out->numel >= 4096 && rt_pool_size() > 1;
    if (fwd && p.dh == 1 && p.dw == 1) { /* by rows: about four tasks a thread */
        int64_t want = 4 * (int64_t)rt_pool_size();
        t.groups = par && p.n < want ? (want + p.n - 1) / p.n : 1;
        t.groups = t.groups > p.oh ? p.oh : t.groups;
        t.per = (p.oh + t.groups - 1) / t.groups;
        t.groups = (p.oh + t.per - 1) / t.per;
        if (par && p.n * t.groups > 1)
            rt_parallel_for(p.n * t.groups, pool_rows, &t);
        else
            for (int64_t i = 0; i < p.n * t.groups; i++)
                pool_rows(&t, i);
        return TJ_OK;
    }
    if (p.n > 1 && par)
        rt_parallel_for(p.n, pool_sample, &t);
    else
        for (int64_t b = 0; b < p.n; b++)
            pool_sample(&t, b);
    return TJ_OK;
}
