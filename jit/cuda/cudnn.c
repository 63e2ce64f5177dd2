/* cudnn.c — convolutions and their gradients on the GPU through cuDNN, opened with dlopen
 * (libcudnn.so.9, .8, or TJ_CUDNN naming another; TJ_CUDNN=0: never, the generated direct kernels
 * instead). cuDNN's convolution API of descriptors (deprecated in cuDNN 9 for its graph API, and
 * still the one every release carries): NHWC tensors as ours are; filters as KRSC (cuDNN's NHWC
 * filter format, [o][kh][kw][cg]), since cuDNN has no HWIO: the program swaps the filter's layout
 * with a generated kernel on the way in (or the filter gradient's on the way out). Each
 * convolution's algorithm is chosen once, when the program compiles, from cuDNN's heuristics: the
 * first deterministic one (the same sums every run, as the generated kernels), FMA math (full f32:
 * no TF32, as cuBLAS is called), with its workspace asked from the device's caching allocator per
 * call. Calls go to the default stream, after the kernels queued before them. One handle per GPU,
 * made on first use, its calls serialized. Pads are cuDNN's symmetric ones: a convolution whose
 * bottom or right pad cuDNN would compute differently (TensorFlow's SAME with an even window)
 * keeps the generated kernel. */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jit/cuda/cuda.h"
#include "runtime/cuda.h"
#include "runtime/kernels/conv.h"

typedef int cudnnStatus_t;
typedef struct cudnnContext *cudnnHandle_t;
typedef struct cudnnTensorStruct *cudnnTensorDescriptor_t;
typedef struct cudnnFilterStruct *cudnnFilterDescriptor_t;
typedef struct cudnnConvolutionStruct *cudnnConvolutionDescriptor_t;
/* cudnnConvolution{Fwd,BwdData,BwdFilter}AlgoPerf_t: one layout for the three */
typedef struct {
    int algo;
    cudnnStatus_t status;
    float time;
    size_t memory;
    int determinism;
    int mathType;
    int reserved[3];
} algo_perf;
enum {
    CUDNN_DATA_FLOAT = 0,
    CUDNN_DATA_DOUBLE = 1,
    CUDNN_TENSOR_NHWC = 1,
    CUDNN_CROSS_CORRELATION = 1,
    CUDNN_FMA_MATH = 3,
    CUDNN_DETERMINISTIC = 1,
    MAX_GPUS = 16,
    MAX_ALGOS = 16,
};
/* Workspaces above this are passed over (the allocator would hold them for the process). */
static const size_t max_workspace = (size_t)1 << 30;

struct jit_cudnn {
    cudnnHandle_t h;
    rt_device *dev;
    pthread_mutex_t mu;
};

struct jit_cudnn_conv {
    const jit_cudnn *dnn;
    int op;
    float one, zero; /* alpha and beta for f32 */
    double done, dzero;
    bool f64;
    int algo;
    size_t workspace, filter_bytes;
    cudnnTensorDescriptor_t x, y; /* x: the input side, y: the output side, as the forward's */
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
};

typedef cudnnStatus_t (*get_algo_fn)(cudnnHandle_t, void *, void *, void *, void *, int, int *,
                                     algo_perf *);
typedef cudnnStatus_t (*ws_fn)(cudnnHandle_t, void *, void *, void *, void *, int, size_t *);
typedef cudnnStatus_t (*run_fn)(cudnnHandle_t, const void *, void *, const void *, void *,
                                const void *, void *, int, void *, size_t, const void *, void *,
                                void *);

static struct {
    pthread_once_t once;
    void *lib;
    const char *why;
    char why_buf[256];
    size_t version;
    size_t (*GetVersion)(void);
    const char *(*GetErrorString)(cudnnStatus_t);
    cudnnStatus_t (*Create)(cudnnHandle_t *);
    cudnnStatus_t (*CreateTensor)(cudnnTensorDescriptor_t *);
    cudnnStatus_t (*SetTensor4d)(cudnnTensorDescriptor_t, int, int, int, int, int, int);
    cudnnStatus_t (*DestroyTensor)(cudnnTensorDescriptor_t);
    cudnnStatus_t (*CreateFilter)(cudnnFilterDescriptor_t *);
    cudnnStatus_t (*SetFilter4d)(cudnnFilterDescriptor_t, int, int, int, int, int, int);
    cudnnStatus_t (*DestroyFilter)(cudnnFilterDescriptor_t);
    cudnnStatus_t (*CreateConv)(cudnnConvolutionDescriptor_t *);
    cudnnStatus_t (*SetConv2d)(cudnnConvolutionDescriptor_t, int, int, int, int, int, int, int,
                               int);
    cudnnStatus_t (*SetGroups)(cudnnConvolutionDescriptor_t, int);
    cudnnStatus_t (*SetMath)(cudnnConvolutionDescriptor_t, int);
    cudnnStatus_t (*DestroyConv)(cudnnConvolutionDescriptor_t);
    get_algo_fn algo[3]; /* forward, backward data, backward filter */
    ws_fn ws[3];
    run_fn run[3];
    pthread_mutex_t mu;
    jit_cudnn *per_gpu[MAX_GPUS];
    int tried[MAX_GPUS];
} D = {.once = PTHREAD_ONCE_INIT, .mu = PTHREAD_MUTEX_INITIALIZER};

static void load(void) {
    const char *env = getenv("TJ_CUDNN");
    if (env && !strcmp(env, "0")) {
        D.why = "TJ_CUDNN=0";
        return;
    }
    const char *names[] = {env && *env ? env : "libcudnn.so.9", "libcudnn.so.8", "libcudnn.so"};
    for (size_t i = 0; i < 3 && !D.lib; i++)
        D.lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!D.lib) {
        snprintf(D.why_buf, sizeof D.why_buf, "cuDNN not found (%s)", names[0]);
        D.why = D.why_buf;
        return;
    }
    const rt_cuda_sym syms[] = {
        {(void **)&D.GetVersion, "cudnnGetVersion"},
        {(void **)&D.GetErrorString, "cudnnGetErrorString"},
        {(void **)&D.Create, "cudnnCreate"},
        {(void **)&D.CreateTensor, "cudnnCreateTensorDescriptor"},
        {(void **)&D.SetTensor4d, "cudnnSetTensor4dDescriptor"},
        {(void **)&D.DestroyTensor, "cudnnDestroyTensorDescriptor"},
        {(void **)&D.CreateFilter, "cudnnCreateFilterDescriptor"},
        {(void **)&D.SetFilter4d, "cudnnSetFilter4dDescriptor"},
        {(void **)&D.DestroyFilter, "cudnnDestroyFilterDescriptor"},
        {(void **)&D.CreateConv, "cudnnCreateConvolutionDescriptor"},
        {(void **)&D.SetConv2d, "cudnnSetConvolution2dDescriptor"},
        {(void **)&D.SetGroups, "cudnnSetConvolutionGroupCount"},
        {(void **)&D.SetMath, "cudnnSetConvolutionMathType"},
        {(void **)&D.DestroyConv, "cudnnDestroyConvolutionDescriptor"},
        {(void **)&D.algo[0], "cudnnGetConvolutionForwardAlgorithm_v7"},
        {(void **)&D.algo[1], "cudnnGetConvolutionBackwardDataAlgorithm_v7"},
        {(void **)&D.algo[2], "cudnnGetConvolutionBackwardFilterAlgorithm_v7"},
        {(void **)&D.ws[0], "cudnnGetConvolutionForwardWorkspaceSize"},
        {(void **)&D.ws[1], "cudnnGetConvolutionBackwardDataWorkspaceSize"},
        {(void **)&D.ws[2], "cudnnGetConvolutionBackwardFilterWorkspaceSize"},
        {(void **)&D.run[0], "cudnnConvolutionForward"},
        {(void **)&D.run[1], "cudnnConvolutionBackwardData"},
        {(void **)&D.run[2], "cudnnConvolutionBackwardFilter"},
    };
    const char *missing = rt_cuda_resolve(D.lib, syms, sizeof syms / sizeof *syms);
    if (missing) {
        snprintf(D.why_buf, sizeof D.why_buf, "cuDNN lacks %s", missing);
        D.why = D.why_buf;
        return;
    }
    D.version = D.GetVersion();
    if (D.version < 8000) { /* the _v7 heuristics and group counts came with cuDNN 7; 8 is ours */
        snprintf(D.why_buf, sizeof D.why_buf, "cuDNN %zu is older than 8", D.version);
        D.why = D.why_buf;
    }
}

const jit_cudnn *jit_cudnn_get(rt_device *dev, int ordinal, const char **why) {
    pthread_once(&D.once, load);
    *why = D.why;
    if (D.why || ordinal < 0 || ordinal >= MAX_GPUS)
        return NULL;
    pthread_mutex_lock(&D.mu);
    if (!D.tried[ordinal]) {
        D.tried[ordinal] = 1;
        jit_cudnn *c = calloc(1, sizeof *c);
        tj_status st = rt_cuda_use(dev, "cuDNN"); /* the handle is made on the current context */
        if (c && !st && D.Create(&c->h) == 0) {
            c->dev = dev;
            pthread_mutex_init(&c->mu, NULL);
            D.per_gpu[ordinal] = c;
        } else {
            free(c);
            ir_clear_error();
        }
    }
    jit_cudnn *c = D.per_gpu[ordinal];
    pthread_mutex_unlock(&D.mu);
    if (!c)
        *why = "cudnnCreate failed (no usable GPU for cuDNN)";
    return c;
}

size_t jit_cudnn_version(void) {
    pthread_once(&D.once, load);
    return D.why ? 0 : D.version;
}

/* cuDNN's output extent for input in, window k, dilation d, stride s and symmetric pad p. */
static int64_t out_extent(int64_t in, int64_t k, int64_t d, int64_t s, int64_t p) {
    int64_t span = in + 2 * p - d * (k - 1) - 1;
    return span < 0 ? 0 : span / s + 1;
}

bool jit_cudnn_fits(const rt_conv_geom *c) {
    const int64_t ext[] = {c->n,  c->h,  c->w,  c->c,  c->kh, c->kw, c->o,
                           c->oh, c->ow, c->sh, c->sw, c->dh, c->dw};
    for (size_t i = 0; i < sizeof ext / sizeof *ext; i++)
        if (ext[i] < 1 || ext[i] > INT_MAX)
            return false;
    int64_t groups = c->groups > 1 ? c->groups : 1;
    return c->pt >= 0 && c->pl >= 0 && c->pt <= INT_MAX && c->pl <= INT_MAX && c->c % groups == 0 &&
           c->o % groups == 0 && out_extent(c->h, c->kh, c->dh, c->sh, c->pt) == c->oh &&
           out_extent(c->w, c->kw, c->dw, c->sw, c->pl) == c->ow &&
           (uint64_t)c->n * (uint64_t)c->h * (uint64_t)c->w * (uint64_t)c->c <= INT_MAX &&
           (uint64_t)c->n * (uint64_t)c->oh * (uint64_t)c->ow * (uint64_t)c->o <= INT_MAX;
}

void jit_cudnn_conv_free(jit_cudnn_conv *cv) {
    if (!cv)
        return;
    if (cv->x)
        D.DestroyTensor(cv->x);
    if (cv->y)
        D.DestroyTensor(cv->y);
    if (cv->w)
        D.DestroyFilter(cv->w);
    if (cv->conv)
        D.DestroyConv(cv->conv);
    free(cv);
}

static int which(int op) {
    return op == IR_OP_CONV2D ? 0 : op == IR_OP_CONV2D_GRAD_INPUT ? 1 : 2;
}

/* The operands of call `which` in cuDNN's order: forward (x, w, conv, y), backward data
 * (w, dy, conv, dx), backward filter (x, dy, conv, dw). */
static void order(const jit_cudnn_conv *cv, void *d[4]) {
    int k = which(cv->op);
    d[0] = k == 1 ? (void *)cv->w : (void *)cv->x;
    d[1] = k == 0 ? (void *)cv->w : (void *)cv->y;
    d[2] = cv->conv;
    d[3] = k == 0 ? (void *)cv->y : k == 1 ? (void *)cv->x : (void *)cv->w;
}

tj_status jit_cudnn_conv_new(const jit_cudnn *dnn, int op, int dt, const rt_conv_geom *c,
                             jit_cudnn_conv **out) {
    *out = NULL;
    if (!dnn || (dt != TJ_F32 && dt != TJ_F64) || !jit_cudnn_fits(c))
        return TJ_ERR_UNSUPPORTED;
    jit_cudnn_conv *cv = calloc(1, sizeof *cv);
    if (!cv)
        return ir_errorf(TJ_ERR_OOM, "cuDNN: out of memory");
    cv->dnn = dnn;
    cv->op = op;
    cv->one = 1, cv->done = 1;
    cv->f64 = dt == TJ_F64;
    int groups = c->groups > 1 ? (int)c->groups : 1,
        ty = cv->f64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
    cv->filter_bytes = (size_t)(c->kh * c->kw * (c->c / groups) * c->o) * (cv->f64 ? 8 : 4);
    cudnnStatus_t r = D.CreateTensor(&cv->x);
    r = r ? r : D.CreateTensor(&cv->y);
    r = r ? r : D.CreateFilter(&cv->w);
    r = r ? r : D.CreateConv(&cv->conv);
    r = r ? r
          : D.SetTensor4d(cv->x, CUDNN_TENSOR_NHWC, ty, (int)c->n, (int)c->c, (int)c->h, (int)c->w);
    r = r ? r
          : D.SetTensor4d(cv->y, CUDNN_TENSOR_NHWC, ty, (int)c->n, (int)c->o, (int)c->oh,
                          (int)c->ow);
    r = r ? r
          : D.SetFilter4d(cv->w, ty, CUDNN_TENSOR_NHWC, (int)c->o, (int)c->c / groups, (int)c->kh,
                          (int)c->kw);
    r = r ? r
          : D.SetConv2d(cv->conv, (int)c->pt, (int)c->pl, (int)c->sh, (int)c->sw, (int)c->dh,
                        (int)c->dw, CUDNN_CROSS_CORRELATION, ty);
    r = r ? r : D.SetGroups(cv->conv, groups);
    r = r ? r : D.SetMath(cv->conv, CUDNN_FMA_MATH);
    int k = which(op), got = 0;
    algo_perf perf[MAX_ALGOS];
    void *o[4];
    order(cv, o);
    pthread_mutex_lock(&((jit_cudnn *)dnn)->mu);
    tj_status st = rt_cuda_use(dnn->dev, "cuDNN");
    if (!st && !r)
        r = D.algo[k](dnn->h, o[0], o[1], o[2], o[3], MAX_ALGOS, &got, perf);
    cv->algo = -1;
    for (int i = 0; i < got && i < MAX_ALGOS && !st && !r && cv->algo < 0; i++) {
        size_t ws = 0;
        if (perf[i].status == 0 && perf[i].determinism == CUDNN_DETERMINISTIC &&
            D.ws[k](dnn->h, o[0], o[1], o[2], o[3], perf[i].algo, &ws) == 0 && ws <= max_workspace)
            cv->algo = perf[i].algo, cv->workspace = ws;
    }
    pthread_mutex_unlock(&((jit_cudnn *)dnn)->mu);
    if (st || r || cv->algo < 0) { /* no algorithm here: the generated kernel computes it */
        jit_cudnn_conv_free(cv);
        if (st)
            ir_clear_error();
        return TJ_ERR_UNSUPPORTED;
    }
    *out = cv;
    return TJ_OK;
}

size_t jit_cudnn_conv_workspace(const jit_cudnn_conv *cv) {
    return cv->workspace;
}

size_t jit_cudnn_conv_filter_bytes(const jit_cudnn_conv *cv) {
    return cv->filter_bytes;
}

int jit_cudnn_conv_algo(const jit_cudnn_conv *cv) {
    return cv->algo;
}

tj_status jit_cudnn_conv_run(const jit_cudnn_conv *cv, const void *a, const void *b, void *out,
                             void *ws, const char *kernel, const char *function) {
    int k = which(cv->op);
    void *o[4];
    order(cv, o);
    const void *alpha = cv->f64 ? (const void *)&cv->done : (const void *)&cv->one;
    const void *beta = cv->f64 ? (const void *)&cv->dzero : (const void *)&cv->zero;
    /* forward (x, w), backward data (w, dy), backward filter (x, dy): a and b arrive as the
     * step's inputs, (x, w), (dy, w), (x, dy) */
    const void *first = k == 1 ? b : a, *second = k == 1 ? a : b;
    jit_cudnn *dnn = (jit_cudnn *)cv->dnn;
    pthread_mutex_lock(&dnn->mu);
    tj_status st = rt_cuda_use(dnn->dev, kernel);
    cudnnStatus_t r = st ? 0
                         : D.run[k](dnn->h, alpha, o[0], first, o[1], second, o[2], cv->algo, ws,
                                    cv->workspace, beta, o[3], out);
    pthread_mutex_unlock(&dnn->mu);
    static const char *const what[] = {"convolution", "input gradient", "filter gradient"};
    return st  ? st
           : r ? ir_errorf(TJ_ERR_RUNTIME, "cuDNN: %s %s of function '%s' failed: %s (%d)", what[k],
                           kernel, function && *function ? function : "?", D.GetErrorString(r), r)
               : TJ_OK;
}
