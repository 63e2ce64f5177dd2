/* conv.c — convolutions (NHWC input, HWIO filter) and pooling, with their gradients.
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

#include "runtime/kernels/kernels.h"

typedef struct geom {
    int64_t n, h, w, c;     /* input */
    int64_t kh, kw, o;      /* filter */
    int64_t oh, ow;         /* output */
    int64_t sh, sw, dh, dw; /* strides, dilations */
    int64_t pt, pl;         /* pads top and left (bottom/right only bound the output) */
} geom;

static geom geom_of(const ir_node *n, const int64_t *x, const int64_t *w, const int64_t *y) {
    geom g = {x[0], x[1],      x[2],      x[3],      w[0],      w[1],         w[3],        y[1],
              y[2], n->a.i[0], n->a.i[1], n->a.i[2], n->a.i[3], n->a.list[0], n->a.list[2]};
    return g;
}

static const rt_blas *blas_for_conv(void) {
    return rt_config_get()->exact_math ? NULL : rt_blas_get();
}

enum { ROW_MAJOR = 101, NO_TRANS = 111, TRANS = 112 };

/* ---- im2col / col2im over output rows [u0, u0 + nu) (u = n * OH + oy) --------------------- */
#define IM2COL(T)                                                                                  \
    static void im2col_##T(const geom *g, const T *x, int64_t u0, int64_t nu, T *cols) {           \
        int64_t K = g->kh * g->kw * g->c;                                                          \
        for (int64_t u = u0; u < u0 + nu; u++) {                                                   \
            int64_t b = u / g->oh, oy = u % g->oh;                                                 \
            for (int64_t ox = 0; ox < g->ow; ox++) {                                               \
                T *row = cols + ((u - u0) * g->ow + ox) * K;                                       \
                for (int64_t ky = 0; ky < g->kh; ky++) {                                           \
                    int64_t iy = oy * g->sh + ky * g->dh - g->pt;                                  \
                    for (int64_t kx = 0; kx < g->kw; kx++, row += g->c) {                          \
                        int64_t ix = ox * g->sw + kx * g->dw - g->pl;                              \
                        if (iy < 0 || iy >= g->h || ix < 0 || ix >= g->w) {                        \
                            memset(row, 0, (size_t)g->c * sizeof(T));                              \
                            continue;                                                              \
                        }                                                                          \
                        memcpy(row, x + ((b * g->h + iy) * g->w + ix) * g->c,                      \
                               (size_t)g->c * sizeof(T));                                          \
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

/* ---- direct loops (the oracle) --------------------------------------------------------------- */
/* Visits every (output position, tap) pair with a valid input element: BODY sees xi (input
 * offset), wi (filter offset without the output channel: (ky, kx, c) * O) and yi (output offset
 * without the output channel). */
#define FOR_TAPS(g, BODY)                                                                          \
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
                            int64_t xi = ((b * (g)->h + iy) * (g)->w + ix) * (g)->c + c;           \
                            int64_t wi = ((ky * (g)->kw + kx) * (g)->c + c) * (g)->o;              \
                            BODY                                                                   \
                        }                                                                          \
                    }                                                                              \
                }                                                                                  \
            }

#define DIRECT(T)                                                                                  \
    static void direct_fwd_##T(const geom *g, const T *x, const T *w, T *y) {                      \
        FOR_TAPS(g, for (int64_t o = 0; o < g->o; o++) y[yi + o] += x[xi] * w[wi + o];)            \
    }                                                                                              \
    static void direct_dx_##T(const geom *g, const T *dy, const T *w, T *dx) {                     \
        FOR_TAPS(g, for (int64_t o = 0; o < g->o; o++) dx[xi] += dy[yi + o] * w[wi + o];)          \
    }                                                                                              \
    static void direct_dw_##T(const geom *g, const T *x, const T *dy, T *dw) {                     \
        FOR_TAPS(g, for (int64_t o = 0; o < g->o; o++) dw[wi + o] += x[xi] * dy[yi + o];)          \
    }
DIRECT(float)
DIRECT(double)

/* ---- the BLAS path --------------------------------------------------------------------------- */
/* which: 0 forward (a = x, b = w, out = y), 1 input gradient (a = dy, b = w, out = dx),
 * 2 filter gradient (a = x, b = dy, out = dw). Returns 0 when done, 1 to use the direct loops. */
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
        if (which != 1) {
            if (dt == TJ_F32)
                im2col_float(g, a, u0, nu, cols);
            else
                im2col_double(g, a, u0, nu, cols);
        }
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
                col2im_float(g, cols, u0, nu, out);
            } else {
                bl->dgemm(ROW_MAJOR, NO_TRANS, TRANS, rows, Ki, O, 1.0, (const double *)a + yoff, O,
                          b, O, 0.0, cols, Ki);
                col2im_double(g, cols, u0, nu, out);
            }
        }
    }
    return 0;
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
        g = geom_of(n, a->dims, b->dims, out->dims);
        break;
    case IR_OP_CONV2D_GRAD_INPUT:
        which = 1;
        g = geom_of(n, out->dims, b->dims, a->dims);
        break;
    default:
        which = 2;
        g = geom_of(n, a->dims, out->dims, b->dims);
        break;
    }
    if (out->numel == 0)
        return TJ_OK;
    memset(out->data, 0, (size_t)out->numel * ir_dtype_size(out->dtype));
    if (!conv_blas(&g, which, out->dtype, a->data, b->data, out->data))
        return TJ_OK;
    int f = out->dtype == TJ_F32;
    switch (which) {
    case 0:
        f ? direct_fwd_float(&g, a->data, b->data, out->data)
          : direct_fwd_double(&g, a->data, b->data, out->data);
        break;
    case 1:
        f ? direct_dx_float(&g, a->data, b->data, out->data)
          : direct_dx_double(&g, a->data, b->data, out->data);
        break;
    default:
        f ? direct_dw_float(&g, a->data, b->data, out->data)
          : direct_dw_double(&g, a->data, b->data, out->data);
        break;
    }
    return TJ_OK;
}

/* ---- pooling --------------------------------------------------------------------------------- */
/* Visits every output position with its window clipped to the input: BODY sees yi (output
 * offset without the channel), y0/y1, x0/x1 (the clipped window) and b (the sample). */
#define FOR_WINDOWS(p, BODY)                                                                       \
    for (int64_t b = 0; b < (p)->n; b++)                                                           \
        for (int64_t oy = 0; oy < (p)->oh; oy++)                                                   \
            for (int64_t ox = 0; ox < (p)->ow; ox++) {                                             \
                int64_t yi = ((b * (p)->oh + oy) * (p)->ow + ox) * (p)->c;                         \
                int64_t y0 = oy * (p)->sh - (p)->pt, x0 = ox * (p)->sw - (p)->pl;                  \
                int64_t y1 = y0 + (p)->kh, x1 = x0 + (p)->kw;                                      \
                y0 = y0 < 0 ? 0 : y0;                                                              \
                x0 = x0 < 0 ? 0 : x0;                                                              \
                y1 = y1 > (p)->h ? (p)->h : y1;                                                    \
                x1 = x1 > (p)->w ? (p)->w : x1;                                                    \
                BODY                                                                               \
            }

#define XI(p, b, iy, ix) ((((b) * (p)->h + (iy)) * (p)->w + (ix)) * (p)->c)

#define POOLS(T)                                                                                   \
    static void max_pool_##T(const geom *p, const T *x, T *y) {                                    \
        FOR_WINDOWS(                                                                               \
            p, for (int64_t c = 0; c < p->c; c++) {                                                \
                T m = x[XI(p, b, y0, x0) + c];                                                     \
                for (int64_t iy = y0; iy < y1; iy++)                                               \
                    for (int64_t ix = x0; ix < x1; ix++) {                                         \
                        T v = x[XI(p, b, iy, ix) + c];                                             \
                        if (v > m || v != v)                                                       \
                            m = v;                                                                 \
                    }                                                                              \
                y[yi + c] = m;                                                                     \
            })                                                                                     \
    }                                                                                              \
    static void max_pool_grad_##T(const geom *p, const T *x, const T *dy, T *dx) {                 \
        FOR_WINDOWS(                                                                               \
            p, for (int64_t c = 0; c < p->c; c++) {                                                \
                int64_t at = XI(p, b, y0, x0) + c;                                                 \
                T m = x[at];                                                                       \
                for (int64_t iy = y0; iy < y1; iy++)                                               \
                    for (int64_t ix = x0; ix < x1; ix++) {                                         \
                        int64_t k = XI(p, b, iy, ix) + c;                                          \
                        if (x[k] > m || (x[k] != x[k] && m == m)) {                                \
                            m = x[k];                                                              \
                            at = k;                                                                \
                        }                                                                          \
                    }                                                                              \
                dx[at] += dy[yi + c];                                                              \
            })                                                                                     \
    }                                                                                              \
    static void avg_pool_##T(const geom *p, const T *x, T *y) {                                    \
        FOR_WINDOWS(p, {                                                                           \
            T cnt = (T)((y1 - y0) * (x1 - x0));                                                    \
            for (int64_t c = 0; c < p->c; c++) {                                                   \
                T s = 0;                                                                           \
                for (int64_t iy = y0; iy < y1; iy++)                                               \
                    for (int64_t ix = x0; ix < x1; ix++)                                           \
                        s += x[XI(p, b, iy, ix) + c];                                              \
                y[yi + c] = s / cnt;                                                               \
            }                                                                                      \
        })                                                                                         \
    }                                                                                              \
    static void avg_pool_grad_##T(const geom *p, const T *dy, T *dx) {                             \
        FOR_WINDOWS(p, {                                                                           \
            T cnt = (T)((y1 - y0) * (x1 - x0));                                                    \
            for (int64_t c = 0; c < p->c; c++) {                                                   \
                T v = dy[yi + c] / cnt;                                                            \
                for (int64_t iy = y0; iy < y1; iy++)                                               \
                    for (int64_t ix = x0; ix < x1; ix++)                                           \
                        dx[XI(p, b, iy, ix) + c] += v;                                             \
            }                                                                                      \
        })                                                                                         \
    }
POOLS(float)
POOLS(double)

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
    geom p = {xd[0], xd[1],     xd[2],     xd[3], n->a.i[2], n->a.i[3],    xd[3],       yd[1],
              yd[2], n->a.i[0], n->a.i[1], 1,     1,         n->a.list[0], n->a.list[2]};
    if (out->numel == 0)
        return TJ_OK;
    memset(out->data, 0, (size_t)out->numel * ir_dtype_size(dt));
    int f = dt == TJ_F32;
    switch (n->op) {
    case IR_OP_MAX_POOL2D:
        f ? max_pool_float(&p, in[0]->data, out->data)
          : max_pool_double(&p, in[0]->data, out->data);
        break;
    case IR_OP_AVG_POOL2D:
        f ? avg_pool_float(&p, in[0]->data, out->data)
          : avg_pool_double(&p, in[0]->data, out->data);
        break;
    case IR_OP_MAX_POOL2D_GRAD:
        f ? max_pool_grad_float(&p, in[0]->data, in[1]->data, out->data)
          : max_pool_grad_double(&p, in[0]->data, in[1]->data, out->data);
        break;
    default:
        f ? avg_pool_grad_float(&p, in[0]->data, out->data)
          : avg_pool_grad_double(&p, in[0]->data, out->data);
        break;
    }
    return TJ_OK;
}
