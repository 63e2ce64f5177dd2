/* conv.c — convolutions (NHWC input, HWIO filter) with their gradients (pooling: pool.c).
 *
 * A convolution is a matrix product over patches: the rows of `cols` are the output positions
 * (n, oh, ow) and its columns the taps (kh, kw, c), so y = cols · w with w viewed as
 * [KH·KW·C, O], dw = colsᵀ · dy and dcols = dy · wᵀ, which col2im adds back into dx. With
 * OpenBLAS present (and not TJ_EXACT_MATH) the products are sgemm/dgemm on chunks of output
 * rows whose patches fit in ~8 MiB (a buffer kept per thread), so an eager convolution runs as fast
 * as a compiled one (both run this kernel). Without it, or under exact math, direct loops
 * accumulate in the dtype in (kh, kw, c) order: the oracle the tests compare against. */
#include <pthread.h>
#include <stdlib.h>

#include "runtime/kernels/conv.h"
#include "runtime/kernels/kernels.h"
#include "runtime/rt_pool.h"

typedef rt_conv_geom geom;

rt_conv_geom rt_conv_geom_of(const ir_node *n, const int64_t *x, const int64_t *w,
                             const int64_t *y) {
    return (rt_conv_geom){
        x[0],      x[1],         x[2],         x[3],
        w[0],      w[1],         w[3],         y[1],
        y[2],      n->a.i[0],    n->a.i[1],    n->a.i[2],
        n->a.i[3], n->a.list[0], n->a.list[2], w[2] > 0 && x[3] > w[2] ? x[3] / w[2] : 1};
}

static const rt_blas *blas_for_conv(void) {
    return rt_config_get()->exact_math ? NULL : rt_blas_get();
}

enum { ROW_MAJOR = 101, NO_TRANS = 111, TRANS = 112 };

/* ---- im2col / col2im over output rows [u0, u0 + nu) (u = n * OH + oy) --------------------- */
/* Copies n elements (short runs inline: a 1-channel image copies one float per tap). */
#define COPY_RUN(T, dst, src, n)                                                                   \
    do {                                                                                           \
        if ((n) < 32)                                                                              \
            for (int64_t q_ = 0; q_ < (n); q_++)                                                   \
                (dst)[q_] = (src)[q_];                                                             \
        else                                                                                       \
            memcpy((dst), (src), (size_t)(n) * sizeof(T));                                         \
    } while (0)

#define IM2COL(T)                                                                                  \
    static void im2col_##T(const geom *g, const T *x, int64_t u0, int64_t nu, T *cols) {           \
        int64_t K = g->kh * g->kw * g->c;                                                          \
        for (int64_t u = u0; u < u0 + nu; u++) {                                                   \
            int64_t b = u / g->oh, oy = u % g->oh;                                                 \
            for (int64_t ox = 0; ox < g->ow; ox++) {                                               \
                T *row = cols + ((u - u0) * g->ow + ox) * K;                                       \
                int64_t ix0 = ox * g->sw - g->pl, ix1 = ix0 + (g->kw - 1) * g->dw;                 \
                /* undilated and inside the row: the window's kw taps are one contiguous run */    \
                int whole = g->dw == 1 && ix0 >= 0 && ix1 < g->w;                                  \
                for (int64_t ky = 0; ky < g->kh; ky++) {                                           \
                    int64_t iy = oy * g->sh + ky * g->dh - g->pt;                                  \
                    if (iy < 0 || iy >= g->h) {                                                    \
                        memset(row, 0, (size_t)(g->kw * g->c) * sizeof(T));                        \
                        row += g->kw * g->c;                                                       \
                        continue;                                                                  \
                    }                                                                              \
                    const T *xr = x + (b * g->h + iy) * g->w * g->c;                               \
                    if (whole) {                                                                   \
                        COPY_RUN(T, row, xr + ix0 * g->c, g->kw * g->c);                           \
                        row += g->kw * g->c;                                                       \
                        continue;                                                                  \
                    }                                                                              \
                    for (int64_t kx = 0; kx < g->kw; kx++, row += g->c) {                          \
                        int64_t ix = ix0 + kx * g->dw;                                             \
                        if (ix < 0 || ix >= g->w) {                                                \
                            memset(row, 0, (size_t)g->c * sizeof(T));                              \
                            continue;                                                              \
                        }                                                                          \
                        COPY_RUN(T, row, xr + ix * g->c, g->c);                                    \
                    }                                                                              \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    static void col2im_##T(const geom *g, const T *cols, int64_t u0, int64_t nu, T *dx) {          \
        int64_t K = g->kh * g->kw * g->c;                                                          \
        for (int64_t u = u0; u < u0 + nu; u++) {                                                   \
            int64_t b = u / g->oh, oy = u % g->oh;                                                 \
            for (int64_t ox = 0; ox < g->ow; ox++) {                                               \
                const T *row = cols + ((u - u0) * g->ow + ox) * K;                                 \
                for (int64_t ky = 0; ky < g->kh; ky++) {                                           \
                    int64_t iy = oy * g->sh + ky * g->dh - g->pt;                                  \
                    for (int64_t kx = 0; kx < g->kw; kx++, row += g->c) {                          \
                        int64_t ix = ox * g->sw + kx * g->dw - g->pl;                              \
                        if (iy < 0 || iy >= g->h || ix < 0 || ix >= g->w)                          \
                            continue;                                                              \
                        T *d = dx + ((b * g->h + iy) * g->w + ix) * g->c;                          \
                        for (int64_t c = 0; c < g->c; c++)                                         \
                            d[c] += row[c];                                                        \
                    }                                                                              \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }
IM2COL(float)
IM2COL(double)

/* ---- direct loops (the oracle) ---------------------------------------------------------------
 * Group k (one group: the whole convolution) convolves input channels [k·cg, (k+1)·cg) with the
 * filter's columns [k·og, (k+1)·og) (the filter is [KH, KW, cg, O]) into those output channels.
 * FOR_GROUP_TAPS visits every (output position, tap) pair with a valid input element: BODY sees xi
 * (input offset), wi (filter offset without the output channel) and yi (output offset without
 * the output channel), and the group's output channels [o0, o0 + og). Every output element sums
 * its taps in (ky, kx, c) order. */
#define FOR_GROUP_TAPS(g, BODY)                                                                    \
    for (int64_t b = 0; b < (g)->n; b++)                                                           \
        for (int64_t oy = 0; oy < (g)->oh; oy++)                                                   \
            for (int64_t ox = 0; ox < (g)->ow; ox++) {                                             \
                int64_t yi = ((b * (g)->oh + oy) * (g)->ow + ox) * (g)->o;                         \
                for (int64_t ky = 0; ky < (g)->kh; ky++) {                                         \
                    int64_t iy = oy * (g)->sh + ky * (g)->dh - (g)->pt;                            \
                    if (iy < 0 || iy >= (g)->h)                                                    \
                        continue;                                                                  \
                    for (int64_t kx = 0; kx < (g)->kw; kx++) {                                     \
                        int64_t ix = ox * (g)->sw + kx * (g)->dw - (g)->pl;                        \
                        if (ix < 0 || ix >= (g)->w)                                                \
                            continue;                                                              \
                        for (int64_t c = 0; c < (g)->c; c++) {                                     \
                            int64_t grp = c / cg, o0 = grp * og;                                   \
                            int64_t xi = ((b * (g)->h + iy) * (g)->w + ix) * (g)->c + c;           \
                            int64_t wi = ((ky * (g)->kw + kx) * cg + c - grp * cg) * (g)->o;       \
                            BODY                                                                   \
                        }                                                                          \
                    }                                                                              \
                }                                                                                  \
            }

#define GROUPED_DIRECT(T)                                                                          \
    static void grouped_direct_##T(const geom *g, int which, const T *a, const T *w, T *out) {     \
        int64_t groups = g->groups > 1 ? g->groups : 1, cg = g->c / groups, og = g->o / groups;    \
        if (which == 0)                                                                            \
            FOR_GROUP_TAPS(g, for (int64_t o = o0; o < o0 + og; o++) out[yi + o] +=                \
                              a[xi] * w[wi + o];)                                                  \
        else if (which == 1)                                                                       \
            FOR_GROUP_TAPS(g, for (int64_t o = o0; o < o0 + og; o++) out[xi] +=                    \
                              a[yi + o] * w[wi + o];)                                              \
        else /* a = x, w = dy */                                                                   \
            FOR_GROUP_TAPS(g, for (int64_t o = o0; o < o0 + og; o++) out[wi + o] +=                \
                              a[xi] * w[yi + o];)                                                  \
    }
GROUPED_DIRECT(float)
GROUPED_DIRECT(double)

/* ---- the BLAS path --------------------------------------------------------------------------- */
/* which: 0 forward (a = x, b = w, out = y), 1 input gradient (a = dy, b = w, out = dx),
 * 2 filter gradient (a = x, b = dy, out = dw). Returns 0 when done, 1 to use the direct loops. */
/* im2col and col2im of rows [u0, u0 + nu) on the runtime's pool: im2col in pieces of rows;
 * col2im by sample (a sample's rows add into the same dx elements; different samples never do). */
typedef struct cols_task {
    const geom *g;
    int f32, to_cols;
    const void *src; /* x (im2col) or the patches (col2im) */
    void *dst;       /* the patches (im2col) or dx (col2im) */
    int64_t u0, nu, per;
} cols_task;

static void cols_piece(void *ctx, int64_t i) {
    const cols_task *t = ctx;
    const geom *g = t->g;
    int64_t a, e;
    if (t->to_cols) {
        a = t->u0 + i * t->per;
        e = a + t->per < t->u0 + t->nu ? a + t->per : t->u0 + t->nu;
    } else { /* the rows of sample (first sample + i) inside the range */
        int64_t b = t->u0 / g->oh + i;
        a = b * g->oh > t->u0 ? b * g->oh : t->u0;
        e = (b + 1) * g->oh < t->u0 + t->nu ? (b + 1) * g->oh : t->u0 + t->nu;
    }
    if (a >= e)
        return;
    size_t es = t->f32 ? 4 : 8, K = (size_t)(g->kh * g->kw * g->c);
    if (t->to_cols) {
        void *cols = (char *)t->dst + (size_t)((a - t->u0) * g->ow) * K * es;
        t->f32 ? im2col_float(g, t->src, a, e - a, cols) : im2col_double(g, t->src, a, e - a, cols);
    } else {
        const void *cols = (const char *)t->src + (size_t)((a - t->u0) * g->ow) * K * es;
        t->f32 ? col2im_float(g, cols, a, e - a, t->dst) : col2im_double(g, cols, a, e - a, t->dst);
    }
}

static void cols_run(const geom *g, int f32, int to_cols, const void *src, void *dst, int64_t u0,
                     int64_t nu) {
    int64_t per = (nu + 15) / 16, n_tasks;
    if (to_cols)
        n_tasks = (nu + per - 1) / per;
    else
        n_tasks = (u0 + nu - 1) / g->oh - u0 / g->oh + 1;
    cols_task t = {g, f32, to_cols, src, dst, u0, nu, per};
    if (n_tasks > 1 && nu * g->ow * g->kh * g->kw * g->c >= 65536)
        rt_parallel_for(n_tasks, cols_piece, &t);
    else
        for (int64_t i = 0; i < n_tasks; i++)
            cols_piece(&t, i);
}

/* The patch buffer, kept per thread between calls (freed when the thread exits): a first touch
 * of fresh memory costs ~11 us per page here, more than the copy into it. */
typedef struct scratch {
    void *p;
    size_t size;
} scratch;
static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;

static void scratch_free(void *s) {
    if (s)
        free(((scratch *)s)->p);
    free(s);
}
static void scratch_init(void) {
    pthread_key_create(&scratch_key, scratch_free);
}

static void *patch_buffer(size_t bytes) {
    pthread_once(&scratch_once, scratch_init);
    scratch *s = pthread_getspecific(scratch_key);
    if (!s) {
        if (!(s = calloc(1, sizeof *s)) || pthread_setspecific(scratch_key, s)) {
            free(s);
            return NULL;
        }
    }
    if (bytes <= s->size)
        return s->p;
    void *p = realloc(s->p, bytes);
    if (!p)
        return NULL;
    s->p = p;
    s->size = bytes;
    return p;
}

static int conv_blas(const geom *g, int which, int dt, const void *a, const void *b, void *out) {
    const rt_blas *bl = blas_for_conv();
    int64_t K = g->kh * g->kw * g->c, U = g->n * g->oh;
    size_t es = dt == TJ_F32 ? 4 : 8;
    if (!bl || K * U * g->ow == 0 || g->o == 0 || K > INT32_MAX || g->o > INT32_MAX)
        return 1;
    /* output rows per product: patches of at most ~8 MiB (at least one row) */
    int64_t row_bytes = g->ow * K * (int64_t)es, chunk = ((int64_t)8 << 20) / row_bytes;
    if (chunk < 1)
        chunk = 1;
    if (chunk > U)
        chunk = U;
    if (chunk * g->ow > INT32_MAX)
        return 1;
    void *cols = patch_buffer((size_t)(chunk * row_bytes));
    if (!cols)
        return 1;
    int O = (int)g->o, Ki = (int)K;
    for (int64_t u0 = 0; u0 < U; u0 += chunk) {
        int64_t nu = U - u0 < chunk ? U - u0 : chunk;
        int rows = (int)(nu * g->ow);
        size_t yoff = (size_t)(u0 * g->ow * g->o);
        if (which != 1)
            cols_run(g, dt == TJ_F32, 1, a, cols, u0, nu);
        if (which == 0) { /* y[rows, O] = cols[rows, K] · w[K, O] */
            if (dt == TJ_F32)
                bl->sgemm(ROW_MAJOR, NO_TRANS, NO_TRANS, rows, O, Ki, 1.0f, cols, Ki, b, O, 0.0f,
                          (float *)out + yoff, O);
            else
                bl->dgemm(ROW_MAJOR, NO_TRANS, NO_TRANS, rows, O, Ki, 1.0, cols, Ki, b, O, 0.0,
                          (double *)out + yoff, O);
        } else if (which == 2) { /* dw[K, O] += colsᵀ · dy[rows, O] */
            if (dt == TJ_F32)
                bl->sgemm(ROW_MAJOR, TRANS, NO_TRANS, Ki, O, rows, 1.0f, cols, Ki,
                          (const float *)b + yoff, O, u0 ? 1.0f : 0.0f, out, O);
            else
                bl->dgemm(ROW_MAJOR, TRANS, NO_TRANS, Ki, O, rows, 1.0, cols, Ki,
                          (const double *)b + yoff, O, u0 ? 1.0 : 0.0, out, O);
        } else { /* dcols[rows, K] = dy[rows, O] · wᵀ, added back into dx */
            if (dt == TJ_F32) {
                bl->sgemm(ROW_MAJOR, NO_TRANS, TRANS, rows, Ki, O, 1.0f, (const float *)a + yoff, O,
                          b, O, 0.0f, cols, Ki);
                cols_run(g, 1, 0, cols, out, u0, nu);
            } else {
                bl->dgemm(ROW_MAJOR, NO_TRANS, TRANS, rows, Ki, O, 1.0, (const double *)a + yoff, O,
                          b, O, 0.0, cols, Ki);
                cols_run(g, 0, 0, cols, out, u0, nu);
            }
        }
    }
    return 0;
}

/* ---- grouped convolutions: depthwise (cg = 1) runs its own loops, channels innermost so they
 * vectorize, one task per output row; other groups one product per group (a 1x1 stride-1
 * unpadded convolution reads x in place, others gather the group's patches); without BLAS or
 * under exact math, the direct loops above. ------------------------------------------------- */
/* Depthwise, one output row (b, oy) per task: forward and input gradient (a = dy) write only
 * their own row (the input gradient row by row of dx: a task is an input row there). */
typedef struct dw_task {
    const geom *g;
    int which, f32;
    const void *a, *w;
    void *out;
} dw_task;

#define DEPTHWISE(T)                                                                               \
    /* y[b,oy,ox, c·m + j] = sum over (ky, kx) of x[b,iy,ix,c] · w[ky,kx,0, c·m + j] */         \
    static void dw_fwd_row_##T(const geom *g, const T *x, const T *w, T *y, int64_t u) {           \
        int64_t b = u / g->oh, oy = u % g->oh, m = g->o / g->c;                                    \
        for (int64_t ox = 0; ox < g->ow; ox++) {                                                   \
            T *yo = y + ((b * g->oh + oy) * g->ow + ox) * g->o;                                    \
            memset(yo, 0, (size_t)g->o * sizeof(T));                                               \
            for (int64_t ky = 0; ky < g->kh; ky++) {                                               \
                int64_t iy = oy * g->sh + ky * g->dh - g->pt;                                      \
                if (iy < 0 || iy >= g->h)                                                          \
                    continue;                                                                      \
                for (int64_t kx = 0; kx < g->kw; kx++) {                                           \
                    int64_t ix = ox * g->sw + kx * g->dw - g->pl;                                  \
                    if (ix < 0 || ix >= g->w)                                                      \
                        continue;                                                                  \
                    const T *xi = x + ((b * g->h + iy) * g->w + ix) * g->c;                        \
                    const T *wi = w + (ky * g->kw + kx) * g->o;                                    \
                    if (m == 1)                                                                    \
                        for (int64_t c = 0; c < g->c; c++)                                         \
                            yo[c] += xi[c] * wi[c];                                                \
                    else                                                                           \
                        for (int64_t c = 0; c < g->c; c++)                                         \
                            for (int64_t j = 0; j < m; j++)                                        \
                                yo[c * m + j] += xi[c] * wi[c * m + j];                            \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    /* dx[b,iy,ix,c] = sum over the (oy, ox, ky, kx) that read it of dy · w, in (oy, ox, ky, kx)  \
     * order as the direct loops add them: input row (b, iy) per task */                           \
    static void dw_dx_row_##T(const geom *g, const T *dy, const T *w, T *dx, int64_t u) {          \
        int64_t b = u / g->h, iy = u % g->h, m = g->o / g->c;                                      \
        T *dxr = dx + (b * g->h + iy) * g->w * g->c;                                               \
        memset(dxr, 0, (size_t)(g->w * g->c) * sizeof(T));                                         \
        for (int64_t oy = 0; oy < g->oh; oy++) {                                                   \
            int64_t t = iy + g->pt - oy * g->sh; /* ky · dh */                                    \
            if (t < 0 || t % g->dh || t / g->dh >= g->kh)                                          \
                continue;                                                                          \
            int64_t ky = t / g->dh;                                                                \
            for (int64_t ox = 0; ox < g->ow; ox++) {                                               \
                const T *dyo = dy + ((b * g->oh + oy) * g->ow + ox) * g->o;                        \
                for (int64_t kx = 0; kx < g->kw; kx++) {                                           \
                    int64_t ix = ox * g->sw + kx * g->dw - g->pl;                                  \
                    if (ix < 0 || ix >= g->w)                                                      \
                        continue;                                                                  \
                    T *d = dxr + ix * g->c;                                                        \
                    const T *wi = w + (ky * g->kw + kx) * g->o;                                    \
                    for (int64_t c = 0; c < g->c; c++)                                             \
                        for (int64_t j = 0; j < m; j++)                                            \
                            d[c] += dyo[c * m + j] * wi[c * m + j];                                \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    /* dw[ky,kx,0,o] = sum over (b, oy, ox) of x · dy, in that order (one pass, the whole         \
     * filter: it is small) */                                                                     \
    static void dw_dw_##T(const geom *g, const T *x, const T *dy, T *dw) {                         \
        int64_t m = g->o / g->c;                                                                   \
        memset(dw, 0, (size_t)(g->kh * g->kw * g->o) * sizeof(T));                                 \
        for (int64_t b = 0; b < g->n; b++)                                                         \
            for (int64_t oy = 0; oy < g->oh; oy++)                                                 \
                for (int64_t ox = 0; ox < g->ow; ox++) {                                           \
                    const T *dyo = dy + ((b * g->oh + oy) * g->ow + ox) * g->o;                    \
                    for (int64_t ky = 0; ky < g->kh; ky++) {                                       \
                        int64_t iy = oy * g->sh + ky * g->dh - g->pt;                              \
                        if (iy < 0 || iy >= g->h)                                                  \
                            continue;                                                              \
                        for (int64_t kx = 0; kx < g->kw; kx++) {                                   \
                            int64_t ix = ox * g->sw + kx * g->dw - g->pl;                          \
                            if (ix < 0 || ix >= g->w)                                              \
                                continue;                                                          \
                            const T *xi = x + ((b * g->h + iy) * g->w + ix) * g->c;                \
                            T *wo = dw + (ky * g->kw + kx) * g->o;                                 \
                            for (int64_t c = 0; c < g->c; c++)                                     \
                                for (int64_t j = 0; j < m; j++)                                    \
                                    wo[c * m + j] += xi[c] * dyo[c * m + j];                       \
                        }                                                                          \
                    }                                                                              \
                }                                                                                  \
    }
DEPTHWISE(float)
DEPTHWISE(double)

static void dw_piece(void *ctx, int64_t u) {
    const dw_task *t = ctx;
    if (t->which == 0)
        t->f32 ? dw_fwd_row_float(t->g, t->a, t->w, t->out, u)
               : dw_fwd_row_double(t->g, t->a, t->w, t->out, u);
    else
        t->f32 ? dw_dx_row_float(t->g, t->a, t->w, t->out, u)
               : dw_dx_row_double(t->g, t->a, t->w, t->out, u);
}

/* Gathers group k's patches of rows [u0, u0 + nu) into cols [rows][KH·KW·cg]. */
#define GROUP_COLS(T)                                                                              \
    static void group_cols_##T(const geom *g, const T *x, int64_t k, int64_t u0, int64_t nu,       \
                               T *cols, int back) {                                                \
        int64_t cg = g->c / g->groups;                                                             \
        for (int64_t u = u0; u < u0 + nu; u++) {                                                   \
            int64_t b = u / g->oh, oy = u % g->oh;                                                 \
            for (int64_t ox = 0; ox < g->ow; ox++) {                                               \
                T *row = cols + ((u - u0) * g->ow + ox) * g->kh * g->kw * cg;                      \
                for (int64_t ky = 0; ky < g->kh; ky++) {                                           \
                    int64_t iy = oy * g->sh + ky * g->dh - g->pt;                                  \
                    for (int64_t kx = 0; kx < g->kw; kx++, row += cg) {                            \
                        int64_t ix = ox * g->sw + kx * g->dw - g->pl;                              \
                        bool in = iy >= 0 && iy < g->h && ix >= 0 && ix < g->w;                    \
                        T *xr = (T *)x + ((b * g->h + iy) * g->w + ix) * g->c + k * cg;            \
                        if (back) { /* col2im: add the row back into dx */                         \
                            for (int64_t c = 0; in && c < cg; c++)                                 \
                                xr[c] += row[c];                                                   \
                        } else if (in) {                                                           \
                            memcpy(row, xr, (size_t)cg * sizeof(T));                               \
                        } else {                                                                   \
                            memset(row, 0, (size_t)cg * sizeof(T));                                \
                        }                                                                          \
                    }                                                                              \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }
GROUP_COLS(float)
GROUP_COLS(double)

/* One BLAS product per group; 0 when done, 1 to use the direct loops (no BLAS, or memory). */
static int grouped_blas(const geom *g, int which, int dt, const void *a, const void *b, void *out) {
    const rt_blas *bl = blas_for_conv();
    int64_t cg = g->c / g->groups, og = g->o / g->groups, K = g->kh * g->kw * cg;
    int64_t rows = g->n * g->oh * g->ow;
    if (!bl || rows > INT32_MAX || K > INT32_MAX || g->o > INT32_MAX || g->c > INT32_MAX)
        return 1;
    bool f = dt == TJ_F32, in_place = g->kh == 1 && g->kw == 1 && g->sh == 1 && g->sw == 1 &&
                                      g->pt == 0 && g->pl == 0 && g->oh == g->h && g->ow == g->w;
    size_t es = f ? 4 : 8;
    void *cols = in_place ? NULL : malloc((size_t)(rows * K) * es + 1);
    if (!in_place && !cols)
        return 1;
    int R = (int)rows, Ki = (int)K, O = (int)g->o, og_ = (int)og, C = (int)g->c;
    for (int64_t k = 0; k < g->groups; k++) {
        size_t oo = (size_t)(k * og), co = (size_t)(k * cg); /* the group's columns */
        if (which == 0) { /* y[:, group] = patches · w[:, group] */
            const void *A = in_place ? (const char *)a + co * es : cols;
            if (!in_place)
                f ? group_cols_float(g, a, k, 0, g->n * g->oh, cols, 0)
                  : group_cols_double(g, a, k, 0, g->n * g->oh, cols, 0);
            int lda = in_place ? C : Ki;
            if (f)
                bl->sgemm(ROW_MAJOR, NO_TRANS, NO_TRANS, R, og_, Ki, 1.0f, A, lda,
                          (const float *)b + oo, O, 0.0f, (float *)out + oo, O);
            else
                bl->dgemm(ROW_MAJOR, NO_TRANS, NO_TRANS, R, og_, Ki, 1.0, A, lda,
                          (const double *)b + oo, O, 0.0, (double *)out + oo, O);
        } else if (which == 2) { /* dw[:, group] = patchesᵀ · dy[:, group] */
            const void *A = in_place ? (const char *)a + co * es : cols;
            if (!in_place)
                f ? group_cols_float(g, a, k, 0, g->n * g->oh, cols, 0)
                  : group_cols_double(g, a, k, 0, g->n * g->oh, cols, 0);
            int lda = in_place ? C : Ki;
            if (f)
                bl->sgemm(ROW_MAJOR, TRANS, NO_TRANS, Ki, og_, R, 1.0f, A, lda,
                          (const float *)b + oo, O, 0.0f, (float *)out + oo, O);
            else
                bl->dgemm(ROW_MAJOR, TRANS, NO_TRANS, Ki, og_, R, 1.0, A, lda,
                          (const double *)b + oo, O, 0.0, (double *)out + oo, O);
        } else { /* dpatches = dy[:, group] · w[:, group]ᵀ, added back into dx's group */
            void *D = in_place ? (char *)out + co * es : cols;
            int ldd = in_place ? C : Ki;
            if (f)
                bl->sgemm(ROW_MAJOR, NO_TRANS, TRANS, R, Ki, og_, 1.0f, (const float *)a + oo, O,
                          (const float *)b + oo, O, 0.0f, D, ldd);
            else
                bl->dgemm(ROW_MAJOR, NO_TRANS, TRANS, R, Ki, og_, 1.0, (const double *)a + oo, O,
                          (const double *)b + oo, O, 0.0, D, ldd);
            if (!in_place)
                f ? group_cols_float(g, out, k, 0, g->n * g->oh, cols, 1)
                  : group_cols_double(g, out, k, 0, g->n * g->oh, cols, 1);
        }
    }
    free(cols);
    return 0;
}

/* A grouped convolution (g->groups > 1) of `which` (0 forward, 1 input gradient, 2 filter
 * gradient) into out (zeroed by the caller for 1). */
static void conv_grouped(const geom *g, int which, int dt, const void *a, const void *b, void *out,
                         size_t bytes) {
    bool f = dt == TJ_F32, exact = rt_config_get()->exact_math;
    if (g->c == g->groups && !exact) { /* depthwise: its own loops, exact in the oracle's order */
        if (which == 2) {
            f ? dw_dw_float(g, a, b, out) : dw_dw_double(g, a, b, out);
            return;
        }
        dw_task t = {g, which, f, a, b, out};
        int64_t rows = which == 0 ? g->n * g->oh : g->n * g->h;
        if (rows > 1 && g->n * g->oh * g->ow * g->o * g->kh * g->kw >= 65536)
            rt_parallel_for(rows, dw_piece, &t);
        else
            for (int64_t u = 0; u < rows; u++)
                dw_piece(&t, u);
        return;
    }
    if (!grouped_blas(g, which, dt, a, b, out))
        return;
    memset(out, 0, bytes);
    f ? grouped_direct_float(g, which, a, b, out) : grouped_direct_double(g, which, a, b, out);
}

tj_status rt_k_conv2d(const ir_node *n, tj_tensor *const *in, tj_tensor *out) {
    const tj_tensor *a = in[0], *b = in[1];
    if (a->dtype != out->dtype || b->dtype != out->dtype ||
        (out->dtype != TJ_F32 && out->dtype != TJ_F64))
        return rt_k_unsupported(n, out->dtype);
    geom g;
    int which;
    switch (n->op) {
    case IR_OP_CONV2D:
        which = 0;
        g = rt_conv_geom_of(n, a->dims, b->dims, out->dims);
        break;
    case IR_OP_CONV2D_GRAD_INPUT:
        which = 1;
        g = rt_conv_geom_of(n, out->dims, b->dims, a->dims);
        break;
    default:
        which = 2;
        g = rt_conv_geom_of(n, a->dims, out->dims, b->dims);
        break;
    }
    if (out->numel == 0)
        return TJ_OK;
    if (g.groups > 1) {
        size_t bytes = (size_t)out->numel * ir_dtype_size(out->dtype);
        if (which == 1)
            memset(out->data, 0, bytes);
        conv_grouped(&g, which, out->dtype, a->data, b->data, out->data, bytes);
        return TJ_OK;
    }
    /* f32 without exact math: the direct kernels when they take it (conv_direct.c) */
    if (out->dtype == TJ_F32 && !rt_config_get()->exact_math && !rt_config_get()->no_direct_conv) {
        int r = which == 0   ? rt_conv_direct_fwd(&g, a->data, b->data, NULL, out->data)
                : which == 1 ? rt_conv_direct_input_grad(&g, a->data, b->data, out->data)
                             : rt_conv_direct_filter_grad(&g, a->data, b->data, out->data);
        if (!r)
            return TJ_OK;
    }
    /* col2im and the direct loops accumulate; the products write every element (beta 0) */
    size_t bytes = (size_t)out->numel * ir_dtype_size(out->dtype);
    if (which == 1)
        memset(out->data, 0, bytes);
    if (!conv_blas(&g, which, out->dtype, a->data, b->data, out->data))
        return TJ_OK;
    if (which != 1)
        memset(out->data, 0, bytes);
    out->dtype == TJ_F32 ? grouped_direct_float(&g, which, a->data, b->data, out->data)
                         : grouped_direct_double(&g, which, a->data, b->data, out->data);
    return TJ_OK;
}
