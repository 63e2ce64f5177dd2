/* fake_cudnn.c — a stand-in for libcudnn.so.9 where there is no GPU (the CUDA backend opens it
 * through TJ_CUDNN), over the fake driver's device memory (host memory: tests/cuda/fake_cuda.c).
 * Its convolutions are loops written from cuDNN's documented semantics, not from ours: NHWC or
 * NCHW tensors, KRSC (NHWC) or KCRS (NCHW) filters, symmetric pads, strides, dilations, groups,
 * cross-correlation or convolution, alpha and beta. So the backend's descriptors, its filter
 * swaps and its choice of algorithm are checked by the values they give. It refuses what cuDNN
 * refuses: output extents that do not follow from the input's, mismatched channels, a workspace
 * smaller than the algorithm asked for. Its heuristics offer a nondeterministic algorithm first
 * (as cuDNN's may for the filter gradient), and running that one is refused: the backend must
 * pick a deterministic one. FAKE_CUDNN selects a fault: "create_fail" (cudnnCreate fails),
 * "exec_fail" (every convolution fails with CUDNN_STATUS_EXECUTION_FAILED), "nondeterministic"
 * (only nondeterministic algorithms are offered). fake_cudnn_calls counts the convolutions run. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int cudnnStatus_t;
enum {
    OK = 0,
    NOT_INITIALIZED = 1001,
    BAD_PARAM = 2000,
    NOT_SUPPORTED = 3000,
    EXECUTION_FAILED = 5000,
    WORKSPACE = 256, /* bytes the deterministic algorithm asks for */
};

typedef struct {
    int fmt, dt, n, c, h, w;
} tensor;
typedef struct {
    int dt, fmt, k, c, h, w;
} filter;
typedef struct {
    int ph, pw, u, v, dh, dw, mode, ty, groups, math;
} conv;
typedef struct {
    int algo;
    cudnnStatus_t status;
    float time;
    size_t memory;
    int determinism;
    int mathType;
    int reserved[3];
} perf;

static int calls;

static const char *mode_is(const char *m) {
    const char *e = getenv("FAKE_CUDNN");
    return e && !strcmp(e, m) ? e : NULL;
}

size_t cudnnGetVersion(void) {
    return 91900;
}
const char *cudnnGetErrorString(cudnnStatus_t s) {
    return s == OK                 ? "CUDNN_STATUS_SUCCESS"
           : s == BAD_PARAM        ? "CUDNN_STATUS_BAD_PARAM"
           : s == NOT_SUPPORTED    ? "CUDNN_STATUS_NOT_SUPPORTED"
           : s == EXECUTION_FAILED ? "CUDNN_STATUS_EXECUTION_FAILED"
                                   : "CUDNN_STATUS_NOT_INITIALIZED";
}
cudnnStatus_t cudnnCreate(void **h) {
    static int token;
    if (mode_is("create_fail"))
        return NOT_INITIALIZED;
    *h = &token;
    return OK;
}
int fake_cudnn_calls(void) {
    return calls;
}

#define MAKE(type, name)                                                                           \
    cudnnStatus_t name(type **d) {                                                                 \
        return (*d = calloc(1, sizeof **d)) ? OK : NOT_INITIALIZED;                                \
    }
MAKE(tensor, cudnnCreateTensorDescriptor)
MAKE(filter, cudnnCreateFilterDescriptor)
MAKE(conv, cudnnCreateConvolutionDescriptor)
cudnnStatus_t cudnnDestroyTensorDescriptor(tensor *d) {
    free(d);
    return OK;
}
cudnnStatus_t cudnnDestroyFilterDescriptor(filter *d) {
    free(d);
    return OK;
}
cudnnStatus_t cudnnDestroyConvolutionDescriptor(conv *d) {
    free(d);
    return OK;
}
cudnnStatus_t cudnnSetTensor4dDescriptor(tensor *d, int fmt, int dt, int n, int c, int h, int w) {
    if (fmt < 0 || fmt > 1 || dt < 0 || dt > 1 || n < 1 || c < 1 || h < 1 || w < 1)
        return BAD_PARAM;
    *d = (tensor){fmt, dt, n, c, h, w};
    return OK;
}
cudnnStatus_t cudnnSetFilter4dDescriptor(filter *d, int dt, int fmt, int k, int c, int h, int w) {
    if (fmt < 0 || fmt > 1 || dt < 0 || dt > 1 || k < 1 || c < 1 || h < 1 || w < 1)
        return BAD_PARAM;
    *d = (filter){dt, fmt, k, c, h, w};
    return OK;
}
cudnnStatus_t cudnnSetConvolution2dDescriptor(conv *d, int ph, int pw, int u, int v, int dh, int dw,
                                              int mode, int ty) {
    if (ph < 0 || pw < 0 || u < 1 || v < 1 || dh < 1 || dw < 1 || mode < 0 || mode > 1)
        return BAD_PARAM;
    *d = (conv){ph, pw, u, v, dh, dw, mode, ty, 1, 0};
    return OK;
}
cudnnStatus_t cudnnSetConvolutionGroupCount(conv *d, int groups) {
    if (groups < 1)
        return BAD_PARAM;
    d->groups = groups;
    return OK;
}
cudnnStatus_t cudnnSetConvolutionMathType(conv *d, int math) {
    d->math = math;
    return OK;
}

/* cuDNN's rules: the output's extents follow from the input's, channels match per group. */
static cudnnStatus_t check(const tensor *x, const filter *w, const conv *c, const tensor *y) {
    int oh = (x->h + 2 * c->ph - c->dh * (w->h - 1) - 1) / c->u + 1;
    int ow = (x->w + 2 * c->pw - c->dw * (w->w - 1) - 1) / c->v + 1;
    if (x->dt != w->dt || y->dt != x->dt || c->ty != x->dt || x->n != y->n ||
        x->c != w->c * c->groups || w->k != y->c || w->k % c->groups || y->h != oh || y->w != ow)
        return BAD_PARAM;
    return OK;
}

static cudnnStatus_t offer(int nondeterministic_only, int *got, perf *p, int want) {
    perf all[2] = {{.algo = 0, .memory = 0, .determinism = 0},
                   {.algo = 1, .memory = WORKSPACE, .determinism = 1}};
    int n = nondeterministic_only ? 1 : 2;
    *got = n < want ? n : want;
    memcpy(p, all, (size_t)*got * sizeof *p);
    return OK;
}
cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(void *h, tensor *x, filter *w, conv *c,
                                                     tensor *y, int want, int *got, perf *p) {
    (void)h;
    return check(x, w, c, y) ? BAD_PARAM : offer(0, got, p, want);
}
cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(void *h, filter *w, tensor *dy, conv *c,
                                                          tensor *dx, int want, int *got, perf *p) {
    (void)h;
    return check(dx, w, c, dy) ? BAD_PARAM : offer(0, got, p, want);
}
cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithm_v7(void *h, tensor *x, tensor *dy, conv *c,
                                                            filter *dw, int want, int *got,
                                                            perf *p) {
    (void)h;
    return check(x, dw, c, dy) ? BAD_PARAM
                               : offer(mode_is("nondeterministic") != NULL, got, p, want);
}
static cudnnStatus_t ws_of(int algo, size_t *size) {
    *size = algo == 1 ? WORKSPACE : 0;
    return algo == 0 || algo == 1 ? OK : BAD_PARAM;
}
cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(void *h, tensor *x, filter *w, conv *c,
                                                      tensor *y, int algo, size_t *size) {
    (void)h;
    return check(x, w, c, y) ? BAD_PARAM : ws_of(algo, size);
}
cudnnStatus_t cudnnGetConvolutionBackwardDataWorkspaceSize(void *h, filter *w, tensor *dy, conv *c,
                                                           tensor *dx, int algo, size_t *size) {
    (void)h;
    return check(dx, w, c, dy) ? BAD_PARAM : ws_of(algo, size);
}
cudnnStatus_t cudnnGetConvolutionBackwardFilterWorkspaceSize(void *h, tensor *x, tensor *dy,
                                                             conv *c, filter *dw, int algo,
                                                             size_t *size) {
    (void)h;
    return check(x, dw, c, dy) ? BAD_PARAM : ws_of(algo, size);
}

static size_t at_t(const tensor *t, int n, int c, int h, int w) {
    return t->fmt == 1 ? (((size_t)n * t->h + h) * t->w + w) * t->c + c
                       : (((size_t)n * t->c + c) * t->h + h) * t->w + w;
}
static size_t at_f(const filter *f, int k, int c, int r, int s) {
    return f->fmt == 1 ? (((size_t)k * f->h + r) * f->w + s) * f->c + c
                       : (((size_t)k * f->c + c) * f->h + r) * f->w + s;
}
static double get(const void *p, int dt, size_t i) {
    return dt ? ((const double *)p)[i] : ((const float *)p)[i];
}

enum { FWD, DATA, FILTER };

/* Every product x * w of the convolution, accumulated (in double) into the side `which`
 * computes, then out = alpha * acc + beta * out. */
static cudnnStatus_t run(int which, const void *alpha, const tensor *xd, const void *x,
                         const filter *wd, const void *w, const conv *c, int algo, void *ws,
                         size_t ws_size, const void *beta, const tensor *yd, const void *y,
                         void *out) {
    cudnnStatus_t st = check(xd, wd, c, yd);
    if (st)
        return st;
    if (mode_is("exec_fail"))
        return EXECUTION_FAILED;
    if (algo == 0) /* nondeterministic: the backend must not choose it */
        return NOT_SUPPORTED;
    if (algo != 1 || !ws || ws_size < WORKSPACE)
        return BAD_PARAM;
    memset(ws, 0xA5, WORKSPACE); /* scribbled, as a real algorithm's scratch is */
    calls++;
    int dt = xd->dt, cg = wd->c, kg = wd->k / c->groups;
    size_t n_out = which == FWD    ? (size_t)yd->n * yd->c * yd->h * yd->w
                   : which == DATA ? (size_t)xd->n * xd->c * xd->h * xd->w
                                   : (size_t)wd->k * wd->c * wd->h * wd->w;
    double *acc = calloc(n_out ? n_out : 1, sizeof *acc);
    if (!acc)
        return NOT_INITIALIZED;
    for (int n = 0; n < yd->n; n++)
        for (int k = 0; k < yd->c; k++)
            for (int oy = 0; oy < yd->h; oy++)
                for (int ox = 0; ox < yd->w; ox++)
                    for (int ci = 0; ci < cg; ci++)
                        for (int r = 0; r < wd->h; r++)
                            for (int s = 0; s < wd->w; s++) {
                                int iy = oy * c->u - c->ph + r * c->dh;
                                int ix = ox * c->v - c->pw + s * c->dw;
                                if (iy < 0 || iy >= xd->h || ix < 0 || ix >= xd->w)
                                    continue;
                                int ch = (k / kg) * cg + ci;
                                int fr =
                                    c->mode == 0 ? wd->h - 1 - r : r; /* convolution: flipped */
                                int fs = c->mode == 0 ? wd->w - 1 - s : s;
                                size_t xi = at_t(xd, n, ch, iy, ix), wi = at_f(wd, k, ci, fr, fs);
                                size_t yi = at_t(yd, n, k, oy, ox);
                                if (which == FWD)
                                    acc[yi] += get(x, dt, xi) * get(w, dt, wi);
                                else if (which == DATA)
                                    acc[xi] += get(y, dt, yi) * get(w, dt, wi);
                                else
                                    acc[wi] += get(x, dt, xi) * get(y, dt, yi);
                            }
    double a = dt ? *(const double *)alpha : *(const float *)alpha;
    double b = dt ? *(const double *)beta : *(const float *)beta;
    for (size_t i = 0; i < n_out; i++) {
        double v = a * acc[i] + (b != 0 ? b * get(out, dt, i) : 0);
        if (dt)
            ((double *)out)[i] = v;
        else
            ((float *)out)[i] = (float)v;
    }
    free(acc);
    return OK;
}

cudnnStatus_t cudnnConvolutionForward(void *h, const void *alpha, tensor *xd, const void *x,
                                      filter *wd, const void *w, conv *c, int algo, void *ws,
                                      size_t wss, const void *beta, tensor *yd, void *y) {
    (void)h;
    return run(FWD, alpha, xd, x, wd, w, c, algo, ws, wss, beta, yd, NULL, y);
}
cudnnStatus_t cudnnConvolutionBackwardData(void *h, const void *alpha, filter *wd, const void *w,
                                           tensor *dyd, const void *dy, conv *c, int algo, void *ws,
                                           size_t wss, const void *beta, tensor *dxd, void *dx) {
    (void)h;
    return run(DATA, alpha, dxd, NULL, wd, w, c, algo, ws, wss, beta, dyd, dy, dx);
}
cudnnStatus_t cudnnConvolutionBackwardFilter(void *h, const void *alpha, tensor *xd, const void *x,
                                             tensor *dyd, const void *dy, conv *c, int algo,
                                             void *ws, size_t wss, const void *beta, filter *dwd,
                                             void *dw) {
    (void)h;
    return run(FILTER, alpha, xd, x, dwd, NULL, c, algo, ws, wss, beta, dyd, dy, dw);
}
