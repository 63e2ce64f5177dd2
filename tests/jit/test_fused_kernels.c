/* The CPU program's fused convolution steps and packed-weight products, against eager execution
 * (the reference kernels):
 * - a conv2d read only by its epilogue (bias, activation) and/or a max pool whose windows tile its
 *   rows runs as one step by bands of rows (RT_STEP_CONV, jit/cpu/plan_decide.c): geometries with
 * padding, strides, channel counts that leave masked vector tails, pooled windows clipped at the
 * edge, a pool straight behind the convolution, an epilogue without a pool, NaN and -0 in the
 * input; the pictures name the fused step; where the fusion must not happen (the activation is also
 * a result, the pool's windows overlap) the values still match;
 * - a product whose right operand is a constant (weights captured by the trace) runs on B packed
 *   once (runtime/kernels/gemm_packed.c): row counts, depths and widths around the tile, panel
 *   and chunk sizes, with and without an epilogue, and a transposed constant, called repeatedly;
 * - residual blocks, relu(conv + bias + r) and relu(x · W + bias + r): the additions in the
 *   product's tiles where the product route runs, in either order, in a loop's raw form too.
 * Run also with TJ_DIRECT_CONV=0 (ctest: jit_test_fused_kernels_unfused): the conv step then runs
 * its unfused path (reference convolution, whole epilogue, reference pool). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <tracejit.h>

#include "check.h"
#include "runtime/kernels/gemm.h"

/* The planner's own query: f32 products on the runtime's tiles (AVX-512; AVX2 leaves them to
 * OpenBLAS, whose kernels are faster there). */
static int packed_products(void) {
    return rt_gemm_packed_usable();
}

static tj_tensor *rnd(int rank, const int64_t *d, uint64_t seed) {
    return tj_random_uniform(TJ_F32, rank, d, -1, 1, seed);
}

/* |compiled - eager| <= tol (1 + |eager|) everywhere, NaN where eager has NaN; same bits of zero
 * signs where exact_zero_sign */
static void compare(tj_tensor *c, tj_tensor *e, double tol, const char *what) {
    CHECK_MSG(tj_status_of(c) == TJ_OK, "%s: %s", what, tj_error_message(c));
    CHECK_MSG(tj_status_of(e) == TJ_OK, "%s (eager): %s", what, tj_error_message(e));
    if (tj_status_of(c) || tj_status_of(e))
        return;
    CHECK_EQ_INT(tj_tensor_numel(c), tj_tensor_numel(e));
    double worst = 0;
    int64_t bad_nan = 0;
    for (int64_t i = 0; i < tj_tensor_numel(e) && i < tj_tensor_numel(c); i++) {
        double a = tj_tensor_get_f64(c, i), b = tj_tensor_get_f64(e, i);
        if (isnan(a) || isnan(b)) {
            bad_nan += isnan(a) != isnan(b);
            continue;
        }
        worst = fmax(worst, fabs(a - b) / (1 + fabs(b)));
    }
    CHECK_MSG(worst <= tol && bad_nan == 0,
              "%s: compiled and eager differ by %g (%lld NaN mismatches)", what, worst,
              (long long)bad_nan);
}

/* ---- convolution steps ------------------------------------------------------------------------
 */
typedef struct conv_case {
    const char *name;
    int64_t n, h, w, c, kh, kw, o;
    int stride;
    tj_padding pad;
    int pk, ps; /* pool window and stride; 0: no pool */
    tj_padding ppad;
    int act;      /* 0 relu, 1 tanh, 2 none (a pool straight behind the conv) */
    int also_out; /* the activation is a result too: no fusion with the pool */
} conv_case;

static const conv_case *g_case;

static tj_tensor *convnet(tj_tensor *x, tj_tensor *w, tj_tensor *b) {
    const conv_case *k = g_case;
    int st[2] = {k->stride, k->stride}, dil[2] = {1, 1};
    tj_tensor *y = tj_conv2d(x, w, st, k->pad, dil);
    if (k->act != 2)
        y = tj_bias_add(y, b);
    y = k->act == 0 ? tj_relu(y) : k->act == 1 ? tj_tanh(y) : y;
    if (!k->pk)
        return y;
    int pk[2] = {k->pk, k->pk}, ps[2] = {k->ps, k->ps};
    tj_tensor *p = tj_max_pool2d(y, pk, ps, k->ppad);
    return k->also_out ? tj_tuple(2, (tj_tensor *[]){p, y}) : p;
}

/* Whether the kernels picture of f's concrete function for args names a fused conv step. */
static int has_conv_step(tj_function *f, tj_tensor *const *args) {
    tj_spec s[3];
    for (int i = 0; i < 3; i++) {
        s[i] = (tj_spec){TJ_F32, tj_tensor_rank(args[i]), {0}, NULL};
        memcpy(s[i].dims, tj_tensor_dims(args[i]), sizeof(int64_t) * (size_t)s[i].rank);
    }
    tj_concrete *c = tj_function_get_concrete(f, 3, s);
    char *dot = c ? tj_concrete_graph_dot(c, TJ_GRAPH_KERNELS) : NULL;
    int r = dot && strstr(dot, "conv: conv2d") != NULL;
    free(dot);
    return r;
}

/* Each case in its own scope: what it makes is released at its end. */
static void conv_step(const conv_case *k, int nan_input) {
    tj_scope_begin();
    g_case = k;
    int64_t xd[4] = {k->n, k->h, k->w, k->c}, wd[4] = {k->kh, k->kw, k->c, k->o}, bd[1] = {k->o};
    tj_tensor *x = rnd(4, xd, 11), *w = rnd(4, wd, 12), *b = rnd(1, bd, 13);
    if (nan_input) { /* a NaN, a -0 and a window of equal values */
        float *p = (float *)tj_tensor_data(x);
        p[5] = NAN;
        p[k->c * 3] = -0.0f;
        for (int64_t i = 0; i < k->c * 2; i++)
            p[k->w * k->c + i] = 0.5f;
    }
    tj_tensor *args[3] = {x, w, b};
    tj_function *f = tj_function_new(k->name, (void *)convnet, 3, NULL);
    for (int rep = 0; rep < 2; rep++) { /* the second call runs the cached program */
        tj_tensor *c = tj_call(f, 3, args), *e = tj_call_eager(f, 3, args);
        if (tj_tuple_size(e) > 0)
            for (int i = 0; i < tj_tuple_size(e); i++)
                compare(tj_tuple_get(c, i), tj_tuple_get(e, i), 1e-5, k->name);
        else
            compare(c, e, 1e-5, k->name);
    }
    int overlapping = k->pk && k->ps < k->pk;
    int want = !k->also_out && !overlapping && !(k->act == 2 && !k->pk);
    /* the planner fuses a conv step only where the direct kernels run (tj_cpu_isa) */
    int direct = strcmp(tj_cpu_isa(), "generic") != 0 && !tj_backend_unavailable("cpu");
    if (want && getenv("TJ_EXACT_MATH") == NULL && direct)
        CHECK_MSG(has_conv_step(f, args), "%s: no fused conv step", k->name);
    if (!direct) /* without the direct kernels the step would have nothing to run */
        CHECK_MSG(!has_conv_step(f, args), "%s: a conv step planned without vector kernels",
                  k->name);
    if (!want)
        CHECK_MSG(!has_conv_step(f, args) || overlapping || k->also_out,
                  "%s: fused where it must not be", k->name);
    tj_function_free(f);
    tj_scope_end();
}

static void conv_steps(void) {
    static const conv_case cases[] = {
        /* the seed CNN's first layer, smaller batch */
        {"cnn1", 3, 28, 28, 1, 5, 5, 32, 1, TJ_PAD_SAME, 2, 2, TJ_PAD_VALID, 0, 0},
        /* odd sizes: 20 channels (a masked tail), pooled rows and columns clipped (SAME) */
        {"odd", 2, 11, 13, 3, 3, 3, 20, 1, TJ_PAD_SAME, 2, 2, TJ_PAD_SAME, 0, 0},
        /* a strided convolution, 3x3 pool; VALID drops the last conv row */
        {"strided", 2, 17, 15, 4, 3, 3, 70, 2, TJ_PAD_VALID, 3, 3, TJ_PAD_VALID, 1, 0},
        /* the pool straight behind the convolution */
        {"conv_pool", 2, 12, 12, 8, 3, 3, 16, 1, TJ_PAD_SAME, 2, 2, TJ_PAD_VALID, 2, 0},
        /* an epilogue, no pool: bands of many rows */
        {"epilogue", 2, 30, 9, 5, 5, 3, 33, 1, TJ_PAD_SAME, 0, 0, TJ_PAD_VALID, 1, 0},
        /* not fused with the pool: the activation is a result too */
        {"also_out", 2, 8, 8, 3, 3, 3, 16, 1, TJ_PAD_SAME, 2, 2, TJ_PAD_VALID, 0, 1},
        /* not fused with the pool: overlapping windows */
        {"overlap", 2, 9, 9, 3, 3, 3, 16, 1, TJ_PAD_SAME, 3, 2, TJ_PAD_VALID, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        conv_step(&cases[i], 0);
    conv_step(&cases[0], 1);
    conv_step(&cases[1], 1);
}

/* A conv step inside a loop: the loop's body program runs in its raw form (pointers into one
 * scratch block per iteration). */
static tj_tensor *loop_body(int n, tj_tensor *const *a, void *u) {
    int st[2] = {1, 1}, dil[2] = {1, 1};
    tj_tensor *y = tj_conv2d(a[1], a[2], st, TJ_PAD_SAME, dil);
    /* scaled to a contraction: rounding differences must not grow over the iterations */
    y = tj_tanh(tj_bias_add(tj_mul(y, tj_scalar_f32(0.05f)), a[3]));
    return tj_tuple(3, (tj_tensor *[]){y, a[2], a[3]});
}
static tj_tensor *looped(tj_tensor *x, tj_tensor *w, tj_tensor *b) {
    tj_tensor *init[3] = {x, w, b};
    return tj_tuple_get(tj_for_range(tj_scalar_i32(0), tj_scalar_i32(40), tj_scalar_i32(1),
                                     loop_body, 3, init, NULL),
                        0);
}

static void conv_in_loop(void) {
    tj_scope_begin();
    int64_t xd[4] = {2, 9, 10, 12}, wd[4] = {3, 3, 12, 12}, bd[1] = {12};
    tj_tensor *args[3] = {rnd(4, xd, 41), rnd(4, wd, 42), rnd(1, bd, 43)};
    tj_function *f = tj_function_new("looped", (void *)looped, 3, NULL);
    for (int rep = 0; rep < 2; rep++)
        compare(tj_call(f, 3, args), tj_call_eager(f, 3, args), 1e-5, "conv in a loop");
    tj_function_free(f);
    tj_scope_end();
}

/* ---- residual blocks: the epilogue's additions in the product's tiles --------------------------
 * relu(conv(x, w) + b + r), ResNet's block end, with the filter a constant: on the product route
 * (1x1 filters, short rows) the bias, the residual r and the relu run in the tiles
 * (rt_plan_simple_epi), elsewhere by bands; either way the values are eager's. */
static tj_tensor *g_cw, *g_cw2;
static int g_res_first;

static tj_tensor *resblock(tj_tensor *x, tj_tensor *r, tj_tensor *b) {
    int st[2] = {1, 1}, dil[2] = {1, 1};
    if (g_cw2) /* the residual made in the function (a projection), dying at the block's end */
        r = tj_conv2d(r, g_cw2, st, TJ_PAD_SAME, dil);
    tj_tensor *y = tj_conv2d(x, g_cw, st, TJ_PAD_SAME, dil); /* g_cw: concrete, a constant */
    y = g_res_first ? tj_add(tj_add(r, y), b) : tj_add(tj_add(y, b), r);
    return tj_relu(y);
}

static void residual_case(int64_t n, int64_t h, int64_t c, int64_t k, int64_t o, int res_first) {
    tj_scope_begin();
    int64_t xd[4] = {n, h, h, c}, wd[4] = {k, k, c, o}, rd[4] = {n, h, h, o}, bd[1] = {o};
    g_cw = rnd(4, wd, 51), g_res_first = res_first;
    int projected = res_first == 2; /* the residual a 1x1 convolution of the input r */
    g_cw2 = projected ? tj_mul(rnd(4, (int64_t[]){1, 1, o, o}, 55), tj_scalar_f32(0.1f)) : NULL;
    tj_tensor *args[3] = {rnd(4, xd, 52), rnd(4, rd, 53), rnd(1, bd, 54)};
    ((float *)tj_tensor_data(args[1]))[3] = NAN; /* through the residual and the relu */
    char name[96];
    snprintf(name, sizeof name, "residual n%lld h%lld c%lld k%lld o%lld%s", (long long)n,
             (long long)h, (long long)c, (long long)k, (long long)o,
             projected   ? " r projected"
             : res_first ? " r first"
                         : "");
    tj_function *f = tj_function_new("resblock", (void *)resblock, 3, NULL);
    tj_tensor *want = tj_call_eager(f, 3, args);
    for (int rep = 0; rep < 2; rep++) /* the filter packed at the first call, reused after */
        compare(tj_call(f, 3, args), want, 1e-5, name);
    /* the result written over the residual it adds (tj_call_into, the output the input r):
     * eager's values (the call writes its outputs after the run; no plan today writes a residual
     * in place, which the tiles refuse: plan_lib.c's tiles_epi) */
    tj_tensor *r = tj_tensor_from_data(TJ_F32, 4, rd, tj_tensor_data(args[1]));
    tj_tensor *inplace[3] = {args[0], r, args[2]};
    tj_status st = tj_call_into(f, 3, inplace, 1, &r);
    CHECK_MSG(st == TJ_OK, "%s into its residual: %s", name, tj_last_error());
    if (st == TJ_OK)
        compare(r, want, 1e-5, name);
    int direct = strcmp(tj_cpu_isa(), "generic") != 0 && !tj_backend_unavailable("cpu");
    if (direct && getenv("TJ_EXACT_MATH") == NULL)
        CHECK_MSG(has_conv_step(f, args), "%s: no conv step", name);
    tj_function_free(f);
    g_cw = g_cw2 = NULL;
    tj_scope_end();
}

/* the same block as a loop's body: its program runs in the raw form, the filter a loop value
 * (read as it lies), the block's output the next iteration's input and residual */
static tj_tensor *res_body(int n, tj_tensor *const *a, void *u) {
    int st[2] = {1, 1}, dil[2] = {1, 1};
    tj_tensor *y = tj_conv2d(a[1], a[2], st, TJ_PAD_SAME, dil);
    y = tj_relu(tj_add(tj_add(y, a[3]), a[1]));
    return tj_tuple(3, (tj_tensor *[]){y, a[2], a[3]});
}
static tj_tensor *res_looped(tj_tensor *x, tj_tensor *w, tj_tensor *b) {
    tj_tensor *init[3] = {x, w, b};
    return tj_tuple_get(tj_for_range(tj_scalar_i32(0), tj_scalar_i32(12), tj_scalar_i32(1),
                                     res_body, 3, init, NULL),
                        0);
}

static void residual_cases(void) {
    residual_case(1, 14, 16, 1, 40, 0); /* 1x1: the product route, a masked last vector */
    residual_case(1, 14, 16, 1, 40, 1);
    residual_case(2, 7, 24, 3, 260, 0); /* short rows, many channels: the product with patches */
    residual_case(2, 7, 24, 3, 70, 0);  /* short rows, fewer channels: the direct kernels */
    residual_case(1, 20, 8, 3, 16, 1);  /* long rows: by bands */
    residual_case(3, 9, 130, 1, 64, 0); /* K in two chunks: the epilogue after the last */
    /* the residual computed in the function and dying at the block's end: the block's output
     * takes its buffer (plan_lib.c's conv_out_over) where the epilogue reads each element before
     * writing it: in the tiles over one chunk of K, by bands; not over two chunks (both
     * convolutions over 130 channels: whichever carries the epilogue) */
    residual_case(1, 14, 16, 1, 40, 2);
    residual_case(3, 9, 130, 1, 130, 2);
    residual_case(1, 20, 8, 3, 16, 2);
    tj_scope_begin();
    int64_t xd[4] = {2, 6, 6, 24}, wd[4] = {1, 1, 24, 24}, bd[1] = {24};
    tj_tensor *w = tj_mul(rnd(4, wd, 61), tj_scalar_f32(0.05f));
    tj_tensor *args[3] = {rnd(4, xd, 62), w, rnd(1, bd, 63)};
    tj_function *f = tj_function_new("res_looped", (void *)res_looped, 3, NULL);
    for (int rep = 0; rep < 2; rep++)
        compare(tj_call(f, 3, args), tj_call_eager(f, 3, args), 1e-5, "residual in a loop");
    tj_function_free(f);
    tj_scope_end();
}

/* ---- packed constant weights --------------------------------------------------------------- */
static tj_tensor *g_w, *g_bias;
static int g_trans, g_relu;

static tj_tensor *g_res; /* a residual added after the bias (a constant); NULL: none */

static tj_tensor *dense(tj_tensor *x) {
    tj_tensor *w = g_trans ? tj_transpose(g_w, NULL) : g_w; /* g_w: concrete, a constant */
    tj_tensor *y = tj_matmul(x, w);
    if (g_bias)
        y = tj_add(y, g_bias);
    if (g_res)
        y = tj_add(y, g_res);
    return g_relu ? tj_relu(y) : y;
}

/* relu?(x · w + bias) in double from the tensors' data: an oracle independent of every kernel
 * (NaN where it has NaN) */
static void dense_oracle(tj_tensor *c, tj_tensor *x, int64_t m, int64_t k, int64_t n,
                         const char *what) {
    const float *xp = tj_tensor_data(x), *wp = tj_tensor_data(g_w);
    const float *bp = g_bias ? tj_tensor_data(g_bias) : NULL;
    double worst = 0;
    int64_t nans = 0;
    for (int64_t i = 0; i < m && tj_status_of(c) == TJ_OK; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = (bp ? bp[j] : 0) + (g_res ? tj_tensor_get_f64(g_res, i * n + j) : 0);
            for (int64_t q = 0; q < k; q++)
                s += (double)xp[i * k + q] * (g_trans ? wp[j * k + q] : wp[q * n + j]);
            s = g_relu && s < 0 ? 0 : s;
            double got = tj_tensor_get_f64(c, i * n + j);
            nans += isnan(got) != isnan(s);
            if (!isnan(s))
                worst = fmax(worst, fabs(got - s) / (1 + fabs(s)));
        }
    CHECK_MSG(worst <= 1e-6 * (1 + (double)k) && nans == 0,
              "%s: off the oracle by %g, %lld NaN mismatches", what, worst, (long long)nans);
}

/* epilogue: 0 none, 1 + bias then relu, 2 + bias, 3 relu (the last two: not every call), 4 +
 * bias + a residual then relu */
static void dense_case(int64_t m, int64_t k, int64_t n, int trans, int epilogue) {
    tj_scope_begin();
    int64_t xd[2] = {m, k}, wd[2] = {trans ? n : k, trans ? k : n}, bd[1] = {n}, rd[2] = {m, n};
    g_w = rnd(2, wd, 21 + (uint64_t)n);
    g_bias = epilogue == 1 || epilogue == 2 || epilogue == 4 ? rnd(1, bd, 22) : NULL;
    g_res = epilogue == 4 ? rnd(2, rd, 23) : NULL;
    g_trans = trans, g_relu = epilogue == 1 || epilogue == 3 || epilogue == 4;
    char name[96];
    snprintf(name, sizeof name, "dense %lldx%lldx%lld%s%s%s%s", (long long)m, (long long)k,
             (long long)n, trans ? " transposed" : "", g_bias ? " +bias" : "",
             g_res ? " +residual" : "", g_relu ? " relu" : "");
    tj_function *f = tj_function_new("dense", (void *)dense, 1, NULL);
    for (int rep = 0; rep < 3; rep++) { /* packed at the first call, reused after */
        tj_tensor *x = rnd(2, xd, 30 + (uint64_t)rep);
        if (rep == 2) /* a NaN through the product and the relu */
            ((float *)tj_tensor_data(x))[k * (m / 2)] = NAN;
        tj_tensor *c = tj_call(f, 1, &x), *e = tj_call_eager(f, 1, &x);
        compare(c, e, 2e-5 * (1 + (double)k / 64), name);
        dense_oracle(c, x, m, k, n, name);
        dense_oracle(e, x, m, k, n, name);
    }
    /* a product the CPU program hands to a library runs on the packed weights */
    tj_spec s = {TJ_F32, 2, {m, k}, NULL};
    char *dot = tj_concrete_graph_dot(tj_function_get_concrete(f, 1, &s), TJ_GRAPH_KERNELS);
    int large = m > 64 || k > 64 || n > 64,
        blas = getenv("TJ_NO_BLAS") == NULL && !tj_backend_unavailable("cpu");
    if (large && epilogue == 1 && blas && getenv("TJ_EXACT_MATH") == NULL &&
        packed_products()) /* one node's kernel is drawn without its label */
        CHECK_MSG(dot && strstr(dot, "packed: matmul"), "%s: not on packed weights", name);
    free(dot);
    tj_function_free(f);
    g_w = g_bias = g_res = NULL;
    tj_scope_end();
}

static void dense_cases(void) {
    static const int64_t ms[] = {1, 7, 50, 300}, ks[] = {1, 5, 130, 300},
                         ns[] = {1, 10, 17, 64, 130};
    for (size_t a = 0; a < 4; a++)
        for (size_t b = 0; b < 4; b++)
            for (size_t c = 0; c < 5; c++)
                dense_case(ms[a], ks[b], ns[c], 0, (int)((a + b + c) % 4));
    /* a transposed constant over 1 MiB stays a transpose (not folded): read transposed */
    dense_case(64, 600, 500, 1, 1);
    dense_case(50, 3136, 100, 0, 1); /* deep: many chunks of K */
    dense_case(300, 300, 130, 0, 4); /* a residual: row blocks, chunks of K, a narrow panel */
    dense_case(7, 64, 17, 0, 4);
}

int main(void) {
    /* TJ_ISA lowers the capability query, never raises it */
    const char *want = getenv("TJ_ISA"), *isa = tj_cpu_isa();
    CHECK_MSG(!strcmp(isa, "avx512") || !strcmp(isa, "avx2") || !strcmp(isa, "neon") ||
                  !strcmp(isa, "generic"),
              "tj_cpu_isa: '%s'", isa);
    if (want && !strcmp(want, "generic"))
        CHECK_MSG(!strcmp(isa, "generic"), "TJ_ISA=generic, tj_cpu_isa says '%s'", isa);
    if (want && !strcmp(want, "avx2")) /* avx2 where the CPU has it, generic where it does not */
        CHECK_MSG(!strcmp(isa, "avx2") || !strcmp(isa, "generic"),
                  "TJ_ISA=avx2, tj_cpu_isa says '%s'", isa);
    tj_scope_begin();
    conv_steps();
    conv_in_loop();
    residual_cases();
    dense_cases();
    tj_scope_end();
    return check_done();
}
