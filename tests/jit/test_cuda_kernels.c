/* The CUDA backend's generated kernels (jit/cuda/source.c), without a GPU, two ways:
 *  - NVRTC and ptxas: every module the backend makes for the test programs here and for the seed
 *    CNN's training step compiles with NVRTC for sm_80 and sm_90, and its PTX assembles with the
 *    toolkit's ptxas for both; a failure names the program and carries NVRTC's log. Where NVRTC
 *    is absent this part says so and is skipped.
 *  - Their values, on a GPU (tests/gpu/run.sh) or, in CI, under TJ_CUDA_EMULATE with the fake
 *    driver of tests/cuda/fake_cuda.c: the same source compiled for the host with the prelude's
 *    shim (a block's threads as fibers meeting at __syncthreads) runs every program through
 * TJ_BACKEND=cuda's whole path (the device plan, copies, launches), compared with the interpreter's
 * reference kernels on random inputs with special values (NaN, +-inf, -0, 1e30) at edge sizes (0,
 * 1, odd, a row of 1000); floats within 1e-5 relative (sums in another order), integers and bools
 * exactly. CMake runs it again with TJ_CUDA_MAX_BLOCKS=3, so every grid-stride loop goes round. */
#include <dlfcn.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../examples/cnn.h"
#include "check.h"
#include "cuda/ptxas.h"
#include "jit/cuda/cuda.h"
#include "jit/cuda/nvrtc/nvrtc.h"
#include "jit/jit.h"

/* ---- the programs -----------------------------------------------------------------------------
 */
static tj_tensor *ew_poly(tj_tensor *x, tj_tensor *a, tj_tensor *b) { /* broadcasting a, b */
    tj_tensor *y =
        tj_sub(tj_mul(tj_add(tj_mul(x, tj_scalar_f32(2)), tj_scalar_f32(1)), x), tj_scalar_f32(3));
    tj_tensor *z = tj_sub(tj_mul(tj_tanh(tj_add(tj_mul(x, a), b)), a), x);
    tj_tensor *w = tj_where(tj_less(x, a), tj_sigmoid(z), tj_relu(tj_neg(b)));
    return tj_tuple(3, (tj_tensor *[]){y, z, tj_add(w, tj_mod(tj_abs(x), tj_scalar_f32(0.7f)))});
}

static tj_tensor *ew_math(tj_tensor *x, tj_tensor *a, tj_tensor *b) {
    tj_tensor *u = tj_add(tj_exp(tj_neg(tj_abs(x))), tj_sign(a));
    tj_tensor *v = tj_maximum(tj_round(tj_mul(x, tj_scalar_f32(3))), tj_floordiv(b, a));
    tj_tensor *nan = tj_cast(tj_isnan(tj_pow(x, a)), TJ_F32);
    return tj_tuple(3, (tj_tensor *[]){u, v, nan});
}

static tj_tensor *ew_f64(tj_tensor *x, tj_tensor *a, tj_tensor *b) {
    tj_tensor *xd = tj_cast(x, TJ_F64), *ad = tj_cast(a, TJ_F64);
    tj_tensor *y = tj_div(tj_sub(tj_mul(xd, ad), tj_cast(b, TJ_F64)), tj_add(ad, tj_scalar_f64(3)));
    return tj_tuple(2, (tj_tensor *[]){y, tj_minimum(y, tj_tanh(xd))});
}

static tj_tensor *ew_int(tj_tensor *x, tj_tensor *a, tj_tensor *b) { /* int32 in */
    tj_tensor *y = tj_add(tj_mul(x, a), tj_left_shift(b, tj_scalar_i32(3)));
    tj_tensor *m = tj_maximum(tj_neg(x), tj_abs(a));
    tj_tensor *c = tj_logical_and(tj_greater(x, a), tj_not_equal(b, tj_scalar_i32(0)));
    tj_tensor *l = tj_cast(tj_where(c, y, m), TJ_I64);
    tj_tensor *s8 = tj_cast(tj_add(tj_cast(x, TJ_I8), tj_cast(a, TJ_I8)), TJ_I32);
    tj_tensor *u16 = tj_cast(tj_sub(tj_cast(x, TJ_U16), tj_cast(b, TJ_U16)), TJ_I32);
    tj_tensor *f = tj_mul(tj_cast(y, TJ_F32), tj_scalar_f32(0.5f));
    return tj_tuple(5, (tj_tensor *[]){l, s8, u16, f, tj_right_shift(y, tj_abs(a))});
}

static tj_tensor *reductions(tj_tensor *x, tj_tensor *a, tj_tensor *b) { /* x [r, c] */
    (void)b;
    tj_tensor *sx = tj_mul(x, a); /* a producer fused into the reductions */
    return tj_tuple(
        7, (tj_tensor *[]){tj_sum(sx, 1, (const int[]){1}, 0), tj_sum(sx, 1, (const int[]){0}, 1),
                           tj_mean(x, 0, NULL, 0), tj_max(x, 1, (const int[]){1}, 0),
                           tj_min(tj_neg(x), 1, (const int[]){0}, 0),
                           tj_prod(tj_tanh(x), 1, (const int[]){1}, 1),
                           tj_sum(tj_cast(tj_round(x), TJ_I64), 1, (const int[]){1}, 0)});
}

static tj_tensor *reductions_3d(tj_tensor *x, tj_tensor *a, tj_tensor *b) { /* x [p, q, r] */
    (void)a, (void)b;
    tj_tensor *i = tj_cast(tj_mul(x, tj_scalar_f32(10)), TJ_I32);
    return tj_tuple(4, (tj_tensor *[]){tj_sum(x, 1, (const int[]){1}, 0),
                                       tj_max(x, 2, (const int[]){0, 1}, 0),
                                       tj_sum(i, 2, (const int[]){1, 2}, 0),
                                       tj_mean(tj_cast(x, TJ_F64), 1, (const int[]){2}, 1)});
}

static tj_tensor *reductions_gap(tj_tensor *x, tj_tensor *a, tj_tensor *b) { /* axes not adjacent */
    (void)a, (void)b;
    const int ax[2] = {0, 2};
    tj_tensor *i = tj_cast(tj_mul(x, tj_scalar_f32(10)), TJ_I64);
    return tj_tuple(5, (tj_tensor *[]){tj_sum(x, 2, ax, 0), tj_max(x, 2, ax, 1),
                                       tj_mean(tj_cast(x, TJ_F64), 2, ax, 0),
                                       tj_prod(tj_tanh(x), 2, ax, 0), tj_sum(i, 2, ax, 0)});
}

static tj_tensor *softmaxes(tj_tensor *x, tj_tensor *a, tj_tensor *b) { /* x [r, c] */
    (void)a, (void)b;
    return tj_tuple(3, (tj_tensor *[]){tj_softmax(x, -1), tj_log_softmax(x, 1),
                                       tj_softmax(tj_cast(x, TJ_F64), -1)});
}

static tj_tensor *products(tj_tensor *x, tj_tensor *a, tj_tensor *b) { /* [m,k] [k,n] [2,1,k,m] */
    tj_tensor *p = tj_matmul(x, a);
    tj_tensor *q = tj_matmul(b, x); /* batch-broadcast: [2, 1, k, k] */
    tj_tensor *d = tj_matmul(tj_cast(x, TJ_F64), tj_cast(a, TJ_F64));
    return tj_tuple(3, (tj_tensor *[]){tj_add(p, tj_scalar_f32(1)), q, d});
}

static tj_tensor *views(tj_tensor *x, tj_tensor *a, tj_tensor *b) { /* x [r, c] */
    (void)a, (void)b;
    int64_t r = tj_tensor_dims(x)[0], c = tj_tensor_dims(x)[1];
    tj_tensor *t = tj_transpose(x, NULL);
    tj_tensor *s = tj_slice(x, (const int64_t[]){0, 1}, (const int64_t[]){r, c}, NULL);
    tj_tensor *bc = tj_broadcast_to(tj_reshape(x, 3, (const int64_t[]){r, 1, c}), 3,
                                    (const int64_t[]){r, 2, c});
    tj_tensor *e = tj_reshape(tj_exp(x), 1, (const int64_t[]){r * c});
    return tj_tuple(4, (tj_tensor *[]){tj_add(t, tj_scalar_f32(1)), s, bc, e});
}

/* f16 and bf16, storage types: casts both ways (overflow, subnormals, NaN, -0 from the inputs'
 * specials and a 1e5 scale), a where choosing their bits, an int through bf16 */
static tj_tensor *halves(tj_tensor *x, tj_tensor *a, tj_tensor *b) {
    (void)b;
    tj_tensor *h = tj_cast(tj_mul(x, tj_scalar_f32(1e4f)), TJ_F16);
    tj_tensor *bf = tj_cast(tj_mul(a, tj_scalar_f32(3e-39f)), TJ_BF16);
    tj_tensor *w = tj_where(tj_less(x, a), h, tj_cast(a, TJ_F16));
    tj_tensor *i =
        tj_cast(tj_cast(tj_cast(tj_mul(x, tj_scalar_f32(1000)), TJ_I32), TJ_BF16), TJ_F32);
    return tj_tuple(5,
                    (tj_tensor *[]){h, bf, tj_cast(h, TJ_F32), tj_cast(tj_cast(bf, TJ_F64), TJ_F16),
                                    tj_add(tj_cast(w, TJ_F32), i)});
}

/* x [n,h,w,c], w [kh,kw,c/g,o], b [o]: convolutions (strides, pads, dilation, groups), pooling,
 * and the gradients through them (conv2d_grad_input/_filter, max_pool2d_grad) */
static tj_tensor *convs(tj_tensor *x, tj_tensor *w, tj_tensor *b) {
    tj_tape *tape = tj_tape_new(0);
    tj_tape_watch(tape, x);
    tj_tape_watch(tape, w);
    tj_tensor *y = tj_relu(tj_add(tj_conv2d(x, w, (const int[]){2, 1}, TJ_PAD_SAME, NULL), b));
    tj_tensor *p = tj_max_pool2d(y, (const int[]){2, 2}, (const int[]){2, 2}, TJ_PAD_SAME);
    tj_tensor *q = tj_avg_pool2d(y, (const int[]){3, 2}, (const int[]){1, 2}, TJ_PAD_VALID);
    tj_tensor *loss = tj_add(tj_sum(tj_mul(p, p), 0, NULL, 0), tj_sum(q, 0, NULL, 0));
    tj_tensor *g[2] = {NULL, NULL};
    tj_tape_gradient(tape, loss, NULL, 2, (tj_tensor *[]){x, w}, g);
    tj_tape_free(tape);
    tj_tensor *d = tj_conv2d_pads(x, w, NULL, (const int64_t[]){1, 0, 2, 1}, (const int[]){2, 1});
    return tj_tuple(6, (tj_tensor *[]){y, p, q, g[0], g[1], d});
}

static tj_tensor *grouped(tj_tensor *x, tj_tensor *w, tj_tensor *b) { /* w [3,3,c/2,o] */
    (void)b;
    tj_tape *tape = tj_tape_new(0);
    tj_tape_watch(tape, x);
    tj_tape_watch(tape, w);
    tj_tensor *y = tj_conv2d(x, w, (const int[]){1, 2}, TJ_PAD_VALID, NULL);
    tj_tensor *m = tj_max_pool2d_pads(y, (const int[]){3, 3}, (const int[]){2, 2},
                                      (const int64_t[]){1, 1, 2, 0});
    tj_tensor *g[2] = {NULL, NULL};
    tj_tape_gradient(tape, tj_sum(tj_tanh(m), 0, NULL, 0), NULL, 2, (tj_tensor *[]){x, w}, g);
    tj_tape_free(tape);
    return tj_tuple(4, (tj_tensor *[]){y, m, g[0], g[1]});
}

/* pooling alone, with special values: NaN wins a max window and takes its gradient */
static tj_tensor *pools(tj_tensor *x, tj_tensor *a, tj_tensor *b) {
    (void)a, (void)b;
    tj_tape *tape = tj_tape_new(0);
    tj_tape_watch(tape, x);
    tj_tensor *m = tj_max_pool2d(x, (const int[]){3, 2}, (const int[]){2, 2}, TJ_PAD_SAME);
    tj_tensor *g = NULL;
    tj_tape_gradient(tape, tj_sum(tj_mul(m, tj_scalar_f32(3)), 0, NULL, 0), NULL, 1, &x, &g);
    tj_tape_free(tape);
    tj_tensor *v = tj_avg_pool2d(x, (const int[]){2, 3}, (const int[]){1, 1}, TJ_PAD_SAME);
    return tj_tuple(3, (tj_tensor *[]){m, g, v});
}

/* the sparse softmax cross-entropy (a block per row on the GPU), f32 and f64, labels in range */
static tj_tensor *xents(tj_tensor *x, tj_tensor *a, tj_tensor *b) { /* x [r, c], a [r] */
    (void)b;
    int64_t c = tj_tensor_dims(x)[1];
    tj_tensor *lab = tj_cast(
        tj_mod(tj_floor(tj_mul(tj_abs(a), tj_scalar_f32(10))), tj_scalar_f32((float)c)), TJ_I32);
    lab = tj_where(tj_isnan(a), tj_zeros(TJ_I32, 1, tj_tensor_dims(a)), lab);
    lab = tj_where(tj_less(lab, tj_scalar_i32(0)), tj_zeros(TJ_I32, 1, tj_tensor_dims(a)), lab);
    return tj_tuple(2, (tj_tensor *[]){tj_sparse_softmax_cross_entropy(lab, x),
                                       tj_sparse_softmax_cross_entropy(tj_cast(lab, TJ_I64),
                                                                       tj_cast(x, TJ_F64))});
}

static tj_tensor *one_hots(tj_tensor *x, tj_tensor *a, tj_tensor *b) { /* int32 x: some outside */
    (void)a, (void)b;
    tj_tensor *i = tj_mod(tj_abs(x), tj_scalar_i32(9)); /* 0..8, a depth of 7 */
    return tj_tuple(2, (tj_tensor *[]){tj_one_hot(i, 7, 1, 0, TJ_F32),
                                       tj_one_hot(tj_cast(i, TJ_I64), 7, -2.5, 0.5, TJ_F64)});
}

typedef struct prog {
    const char *name;
    void *fn;
    int dt;      /* the inputs' dtype */
    int rank[3]; /* per input */
    int64_t dims[3][4];
    /* no special values: a convolution's NaN and inf results depend on its route even on the host
     * (a product over zero-padded patches multiplies a NaN weight by a pad, direct loops skip it;
     * inf - inf depends on the order) */
    int plain;
} prog;

static const prog progs[] = {
    {"ew_poly", (void *)ew_poly, TJ_F32, {3, 3, 1}, {{5, 3, 7}, {1, 3, 7}, {7}}, 0},
    {"ew_poly_flat", (void *)ew_poly, TJ_F32, {1, 1, 0}, {{1001}, {1001}, {0}}, 0},
    {"ew_poly_empty", (void *)ew_poly, TJ_F32, {2, 2, 1}, {{0, 3}, {1, 3}, {3}}, 0},
    {"ew_math", (void *)ew_math, TJ_F32, {2, 2, 2}, {{9, 33}, {9, 1}, {1, 33}}, 0},
    {"ew_f64", (void *)ew_f64, TJ_F32, {2, 1, 0}, {{4, 5}, {5}, {0}}, 0},
    {"ew_int", (void *)ew_int, TJ_I32, {2, 2, 1}, {{6, 11}, {6, 11}, {11}}, 0},
    {"reductions", (void *)reductions, TJ_F32, {2, 2, 0}, {{17, 33}, {1, 33}, {0}}, 0},
    {"reductions_long_row", (void *)reductions, TJ_F32, {2, 2, 0}, {{3, 1000}, {3, 1}, {0}}, 0},
    {"reductions_one", (void *)reductions, TJ_F32, {2, 2, 0}, {{1, 1}, {1, 1}, {0}}, 0},
    {"reductions_3d", (void *)reductions_3d, TJ_F32, {3, 0, 0}, {{5, 6, 7}, {0}, {0}}, 0},
    {"reductions_gap", (void *)reductions_gap, TJ_F32, {3, 0, 0}, {{4, 5, 6}, {0}, {0}}, 0},
    {"softmaxes", (void *)softmaxes, TJ_F32, {2, 0, 0}, {{7, 300}, {0}, {0}}, 0},
    {"softmax_one", (void *)softmaxes, TJ_F32, {2, 0, 0}, {{1, 1}, {0}, {0}}, 0},
    {"products", (void *)products, TJ_F32, {2, 2, 4}, {{17, 17}, {17, 5}, {2, 1, 17, 17}}, 0},
    {"products_small", (void *)products, TJ_F32, {2, 2, 4}, {{1, 1}, {1, 3}, {3, 1, 1, 1}}, 0},
    {"views", (void *)views, TJ_F32, {2, 0, 0}, {{5, 9}, {0}, {0}}, 0},
    {"convs", (void *)convs, TJ_F32, {4, 4, 1}, {{2, 9, 8, 3}, {3, 2, 3, 4}, {4}}, 1},
    {"convs_1x1", (void *)convs, TJ_F32, {4, 4, 1}, {{1, 5, 5, 2}, {1, 1, 2, 3}, {3}}, 1},
    {"grouped", (void *)grouped, TJ_F32, {4, 4, 0}, {{2, 7, 9, 4}, {3, 3, 2, 6}, {0}}, 1},
    {"pools", (void *)pools, TJ_F32, {4, 0, 0}, {{2, 7, 6, 5}, {0}, {0}}, 0},
    {"halves", (void *)halves, TJ_F32, {2, 2, 0}, {{7, 9}, {7, 9}, {0}}, 0},
    {"xents", (void *)xents, TJ_F32, {2, 1, 0}, {{9, 300}, {9}, {0}}, 0},
    {"xents_one", (void *)xents, TJ_F32, {2, 1, 0}, {{1, 1}, {1}, {0}}, 0},
    {"one_hots", (void *)one_hots, TJ_I32, {2, 0, 0}, {{3, 5}, {0}, {0}}, 0},
};
enum { N_PROGS = sizeof progs / sizeof progs[0] };

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double unif(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

/* Random values with a sprinkle of special ones (floats) or extremes (ints). */
static tj_tensor *input(int dt, int rank, const int64_t *dims, int plain) {
    int64_t n = 1;
    for (int d = 0; d < rank; d++)
        n *= dims[d];
    tj_tensor *t = tj_zeros((tj_dtype)dt, rank, dims);
    void *p = (void *)tj_tensor_data(t);
    static const float special[] = {NAN, INFINITY, -INFINITY, -0.0f, 1e30f, 0.0f};
    for (int64_t i = 0; i < n; i++) {
        double u = unif();
        if (dt == TJ_F32)
            ((float *)p)[i] =
                u < 0.04 && !plain ? special[(int)(unif() * 6)] : (float)(unif() * 4 - 2);
        else
            ((int32_t *)p)[i] =
                u < 0.05 ? (unif() < 0.5 ? INT32_MIN : INT32_MAX) : (int32_t)(unif() * 200) - 100;
    }
    return t;
}

/* ---- NVRTC and ptxas ----------------------------------------------------------------------- */
static int n_modules, n_kernels;

static void compiles_as(const char *what, const ir_graph *g, bool cudnn_layouts) {
    uint32_t nk = 0;
    char *src = jit_cuda_source_of(g, &nk, cudnn_layouts);
    if (cudnn_layouts && src) { /* only where cuDNN changes the module: the filters' swaps */
        char *plain = jit_cuda_source_of(g, NULL, false);
        bool same = plain && !strcmp(plain, src);
        free(plain);
        if (same) {
            free(src);
            return;
        }
    }
    CHECK_MSG(src != NULL, "%s: %s", what, tj_last_error());
    if (!src)
        return;
    CHECK_MSG(nk > 0, "%s: no kernel generated", what);
    static const int sms[] = {80, 90};
    for (int k = 0; k < 2; k++) {
        jit_nvrtc_out out = {0};
        tj_status st = jit_nvrtc_compile(src, what, sms[k], &out);
        CHECK_MSG(st == TJ_OK, "%s for sm_%d: %s", what, sms[k], tj_last_error());
        if (st == TJ_OK) {
            CHECK_MSG(out.cubin && out.cubin_size > 0, "%s: no cubin for sm_%d", what, sms[k]);
            ptxas_accepts(out.ptx, sms[k]);
        }
        jit_nvrtc_free(&out);
    }
    n_modules++;
    n_kernels += (int)nk;
    free(src);
}

static void compiles(const char *what, const ir_graph *g) {
    compiles_as(what, g, false);
    compiles_as(what, g, true); /* the module when cuDNN takes the convolutions */
}

/* Gathers on two axes (their values: test_cuda_backend, with indices in range). */
static tj_tensor *gathers(tj_tensor *p, tj_tensor *i0, tj_tensor *i1) {
    return tj_tuple(2, (tj_tensor *[]){tj_gather(p, i0, 0), tj_gather(p, i1, 1)});
}

static tj_concrete *concrete_of(tj_function *f, const prog *P) {
    tj_spec s[3];
    for (int k = 0; k < 3; k++) {
        s[k] = (tj_spec){.dtype = (tj_dtype)P->dt, .rank = P->rank[k]};
        memcpy(s[k].dims, P->dims[k], sizeof P->dims[k]);
    }
    return tj_function_get_concrete(f, 3, s);
}

static void nvrtc_part(void) {
    const char *why = jit_nvrtc_unavailable();
    if (why) {
        printf("NVRTC not here (%s): the NVRTC/ptxas part is skipped\n", why);
        return;
    }
    tj_function_options o = {.backend = "interp", .tiered = -1};
    for (int i = 0; i < N_PROGS; i++) {
        tj_function *f = tj_function_new(progs[i].name, progs[i].fn, 3, &o);
        tj_concrete *c = concrete_of(f, &progs[i]);
        CHECK_MSG(c != NULL, "%s: %s", progs[i].name, tj_last_error());
        if (c)
            compiles(progs[i].name, c->graph);
        tj_function_free(f);
    }
    tj_function *fg = tj_function_new("gathers", (void *)gathers, 3, &o);
    tj_spec gs[3] = {{.dtype = TJ_F64, .rank = 3, .dims = {5, 4, 3}},
                     {.dtype = TJ_I32, .rank = 1, .dims = {7}},
                     {.dtype = TJ_I64, .rank = 2, .dims = {2, 2}}};
    tj_concrete *gc = tj_function_get_concrete(fg, 3, gs);
    CHECK_MSG(gc != NULL, "gathers: %s", tj_last_error());
    if (gc)
        compiles("gathers", gc->graph);
    tj_function_free(fg);
    /* the seed CNN's training step (forward, backward, Adam) at batch 4 */
    if (cnn_init(&cnn_model, 7, 1e-3) == 0) {
        tj_function *f = tj_function_new("cnn_train_step", (void *)cnn_train_step, 2, &o);
        tj_spec s[2] = {{.dtype = TJ_F32, .rank = 4, .dims = {4, 28, 28, 1}},
                        {.dtype = TJ_I32, .rank = 1, .dims = {4}}};
        tj_concrete *c = tj_function_get_concrete(f, 2, s);
        CHECK_MSG(c != NULL, "cnn: %s", tj_last_error());
        if (c)
            compiles("cnn_train_step", c->graph);
        tj_function_free(f);
    } else {
        CHECK_MSG(0, "cnn_init: %s", tj_last_error());
    }
    cnn_free(&cnn_model);
    printf("NVRTC: %d modules, %d kernels, each for sm_80 and sm_90 and through ptxas\n", n_modules,
           n_kernels);
}

/* ---- values on the emulation ------------------------------------------------------------------
 */
static int close_elem(const tj_tensor *a, const tj_tensor *b, int64_t i) {
    int dt = tj_tensor_dtype(a);
    if (dt == TJ_F32 || dt == TJ_F64) {
        double x = tj_tensor_get_f64(a, i), y = tj_tensor_get_f64(b, i);
        if (isnan(x) || isnan(y))
            return isnan(x) && isnan(y);
        if (isinf(x) || isinf(y))
            return x == y;
        return fabs(x - y) <= 1e-5 * (1 + fmax(fabs(x), fabs(y)));
    }
    size_t es = tj_dtype_size((tj_dtype)dt);
    return !memcmp((const char *)tj_tensor_data(a) + i * es,
                   (const char *)tj_tensor_data(b) + i * es, es);
}

static void values_part(void) {
    tj_function_options ref = {.backend = "interp", .tiered = -1};
    tj_function_options gpu = {.backend = "cuda", .output_device = "cpu"};
    int compared = 0;
    for (int i = 0; i < N_PROGS; i++) {
        const prog *P = &progs[i];
        tj_scope_begin();
        tj_tensor *args[3];
        for (int k = 0; k < 3; k++)
            args[k] = input(P->dt, P->rank[k], P->dims[k], P->plain);
        tj_function *fr = tj_function_new(P->name, P->fn, 3, &ref);
        tj_function *fg = tj_function_new(P->name, P->fn, 3, &gpu);
        CHECK_MSG(fg != NULL, "%s: %s", P->name, tj_last_error());
        tj_tensor *r = tj_call(fr, 3, args), *g = fg ? tj_call(fg, 3, args) : NULL;
        CHECK_MSG(tj_status_of(r) == TJ_OK, "%s (reference): %s", P->name, tj_error_message(r));
        CHECK_MSG(g && tj_status_of(g) == TJ_OK, "%s (cuda): %s", P->name,
                  g ? tj_error_message(g) : "");
        if (tj_status_of(r) == TJ_OK && g && tj_status_of(g) == TJ_OK) {
            CHECK_EQ_INT(tj_tuple_size(g), tj_tuple_size(r));
            for (int k = 0; k < tj_tuple_size(r) && k < tj_tuple_size(g); k++) {
                const tj_tensor *a = tj_tuple_get(r, k), *b = tj_tuple_get(g, k);
                CHECK_MSG(!strcmp(tj_tensor_device(b), "cpu"), "%s: output %d on %s", P->name, k,
                          tj_tensor_device(b));
                CHECK_MSG(tj_tensor_dtype(a) == tj_tensor_dtype(b) &&
                              tj_tensor_numel(a) == tj_tensor_numel(b),
                          "%s: output %d: dtype or size differ", P->name, k);
                if (tj_tensor_dtype(a) != tj_tensor_dtype(b) ||
                    tj_tensor_numel(a) != tj_tensor_numel(b))
                    continue;
                int64_t bad = -1;
                for (int64_t e = 0; e < tj_tensor_numel(a) && bad < 0; e++)
                    if (!close_elem(a, b, e))
                        bad = e;
                CHECK_MSG(bad < 0, "%s: output %d element %lld: reference %.9g, cuda %.9g", P->name,
                          k, (long long)bad, bad >= 0 ? tj_tensor_get_f64(a, bad) : 0.0,
                          bad >= 0 ? tj_tensor_get_f64(b, bad) : 0.0);
                compared++;
            }
        }
        tj_function_free(fr);
        tj_function_free(fg);
        tj_scope_end();
    }
    printf("emulation: %d outputs of %d programs match the reference kernels\n", compared, N_PROGS);
}

/* The library a TJ_CUBLAS/TJ_CUDNN run loaded (a fake: tests/cuda/) and how many calls it ran. */
static int fake_calls(const char *env, const char *counter) {
    const char *path = getenv(env);
    if (!path || !strstr(path, "fake"))
        return -1;
    void *lib = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    int (*calls)(void) = lib ? (int (*)(void))dlsym(lib, counter) : NULL;
    int n = calls ? calls() : 0;
    if (lib)
        dlclose(lib);
    return n;
}

int main(void) {
    const char *values_only = getenv("TJ_TEST_VALUES_ONLY"); /* the libraries' run: NVRTC done */
    if (!values_only || !*values_only)
        nvrtc_part();
    /* a GPU, or the fake driver with the emulation (the fake runs no GPU code) */
    const char *emu = getenv("TJ_CUDA_EMULATE"), *drv = getenv("TJ_CUDA_DRIVER");
    if (!tj_backend_unavailable("cuda") && ((emu && *emu) || !drv || !*drv)) {
        values_part();
        int blas = fake_calls("TJ_CUBLAS", "fake_cublas_calls");
        int dnn = fake_calls("TJ_CUDNN", "fake_cudnn_calls");
        CHECK_MSG(blas != 0, "TJ_CUBLAS names a fake cuBLAS that ran no product");
        CHECK_MSG(dnn != 0, "TJ_CUDNN names a fake cuDNN that ran no convolution");
        if (blas > 0 || dnn > 0)
            printf("libraries: %d products by the fake cuBLAS, %d convolutions by the fake "
                   "cuDNN\n",
                   blas, dnn);
    } else
        printf("no emulation (TJ_CUDA_EMULATE and the fake driver): the values part is skipped; "
               "cuda: %s\n",
               tj_backend_unavailable("cuda") ? tj_backend_unavailable("cuda") : "available");
    return check_done();
}
