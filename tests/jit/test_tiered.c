/* test_tiered.c — tiered functions (the default; tj_function_options.tiered, TJ_TIERED): a new
 * signature whose code must be generated runs its first calls on the interpreter while LLVM
 * compiles in a background thread, then calls switch to the native program; a new signature
 * whose code is compiled already runs it from its first call. Checked: the first tier is the
 * interpreter and the second native code
 * (tj_concrete_backend), results agree across the switch and with eager execution, calls from
 * several threads during the compile (TSan runs this file), one background compile per
 * signature, freeing a function while its compile runs (joined, nothing leaks), concrete
 * functions handed out unrun (waiting starts their compile, freeing cancels it), and the errors
 * of tj_function_wait_compiled; tiering by default, turned off by the option; a new shape of
 * compiled flat kernels native at once. The disk cache is a fresh directory of this run's, so a
 * first tier is the interpreter whatever earlier runs left. */
#include <pthread.h>
#include <tracejit.h>

#include "check.h"
#include "jit/jit.h"

static tj_tensor *dense(tj_tensor *x, tj_tensor *w) {
    return tj_relu(tj_add(tj_matmul(x, w), tj_scalar_f32(0.25f)));
}

/* dense with its own constant: code no earlier compile made (a dense's product needs no generated
 * code and its epilogue's flat loop serves every size, so a new shape alone would find it) */
static float bias_k = 1.0f;
static tj_tensor *dense_k(tj_tensor *x, tj_tensor *w) {
    return tj_relu(tj_add(tj_matmul(x, w), tj_scalar_f32(bias_k)));
}

static tj_tensor *flat(tj_tensor *x, tj_tensor *y) {
    return tj_sub(tj_mul(tj_add(x, y), tj_scalar_f32(3.0f)), tj_sqrt(tj_abs(y)));
}

static tj_tensor *input(int64_t rows, int64_t cols, float scale) {
    const int64_t d[2] = {rows, cols};
    tj_tensor *t = tj_reshape(tj_range(TJ_F32, 0, (double)(rows * cols), 1), 2, d);
    return tj_sub(tj_mul(tj_sin(t), tj_scalar_f32(scale)), tj_scalar_f32(0.1f));
}

static int close_to(tj_tensor *a, tj_tensor *b) {
    if (tj_status_of(a) || tj_status_of(b) || tj_tensor_numel(a) != tj_tensor_numel(b))
        return 0;
    for (int64_t i = 0; i < tj_tensor_numel(a); i++)
        if (fabs(tj_tensor_get_f64(a, i) - tj_tensor_get_f64(b, i)) > 1e-4)
            return 0;
    return 1;
}

/* f's concrete function for two f32 matrices [r0, c0] and [r1, c1] (traced if new, not run) */
static tj_concrete *concrete_at(tj_function *f, int64_t r0, int64_t c0, int64_t r1, int64_t c1) {
    tj_spec s[2] = {{.dtype = TJ_F32, .rank = 2, .dims = {r0, c0}},
                    {.dtype = TJ_F32, .rank = 2, .dims = {r1, c1}}};
    return tj_function_get_concrete(f, 2, s);
}

typedef struct caller {
    tj_function *f;
    tj_tensor *x, *w, *want;
    int bad;
} caller;

static void *call_loop(void *arg) {
    caller *c = arg;
    for (int i = 0; i < 200; i++) {
        tj_tensor *args[2] = {c->x, c->w};
        tj_tensor *y = tj_call(c->f, 2, args);
        c->bad += !close_to(y, c->want);
        tj_release(y);
    }
    return NULL;
}

static void tiers(void) {
    tj_function *f =
        tj_function_new("dense", (void *)dense, 2, &(tj_function_options){.tiered = 1});
    CHECK(f != NULL);
    tj_scope_begin();
    tj_tensor *x = input(8, 96, 1.0f), *w = input(96, 80, 0.5f);
    tj_tensor *want = dense(x, w); /* eager */
    tj_tensor *args[2] = {x, w};
    tj_tensor *y = tj_call(f, 2, args);
    CHECK(close_to(y, want));
    tj_concrete *c = concrete_at(f, 8, 96, 96, 80);
    CHECK(c != NULL);
    if (!c) {
        tj_scope_end();
        tj_function_free(f);
        return;
    }
    CHECK_STR(c->prog->vt->name, "interp"); /* the first tier, whatever the compile's progress */
    /* calls from two threads while the compile may still run */
    caller cs[2] = {{f, x, w, want, 0}, {f, x, w, want, 0}};
    pthread_t th[2];
    for (int k = 0; k < 2; k++)
        pthread_create(&th[k], NULL, call_loop, &cs[k]);
    for (int k = 0; k < 2; k++)
        pthread_join(th[k], NULL);
    CHECK_EQ_INT(cs[0].bad + cs[1].bad, 0);
    CHECK_EQ_INT(tj_function_wait_compiled(f), TJ_OK);
    CHECK_STR(tj_concrete_backend(c), "cpu"); /* the second tier: native code */
    CHECK(close_to(tj_call(f, 2, args), want));
    CHECK_EQ_INT(tj_function_trace_count(f), 1);
    /* a new signature: its own first tier and compile */
    tj_tensor *x2 = input(3, 96, 2.0f);
    tj_tensor *args2[2] = {x2, w};
    CHECK(close_to(tj_call(f, 2, args2), dense(x2, w)));
    CHECK_EQ_INT(tj_function_wait_compiled(f), TJ_OK);
    CHECK_EQ_INT(tj_function_n_concrete(f), 2);
    tj_scope_end(); /* y too */
    tj_function_free(f);
}

/* Freed while compiling: the free joins the thread (ASan/LSan: nothing leaks or is used after). */
static void free_while_compiling(void) {
    for (int i = 0; i < 3; i++) {
        bias_k = 2.0f + (float)i;
        tj_function *f =
            tj_function_new("dense", (void *)dense_k, 2, &(tj_function_options){.tiered = 1});
        tj_scope_begin();
        tj_tensor *x = input(4, 64 + i, 1.0f), *w = input(64 + i, 70, 1.0f);
        tj_tensor *args[2] = {x, w};
        CHECK(close_to(tj_call(f, 2, args), dense_k(x, w)));
        CHECK(close_to(tj_call(f, 2, args), dense_k(x, w))); /* the second: the compile starts */
        tj_scope_end();
        tj_function_free(f);
    }
}

/* A signature called once never compiles (a sweep of batch sizes: each once); the second call of
 * one starts its compile. */
static void once_never_compiles(void) {
    bias_k = 20.0f;
    tj_function *f =
        tj_function_new("dense", (void *)dense_k, 2, &(tj_function_options){.tiered = 1});
    tj_scope_begin();
    tj_tensor *w = input(24, 6, 1.0f);
    for (int64_t n = 1; n <= 3; n++) {
        tj_tensor *x = input(n, 24, 0.5f);
        CHECK(close_to(tj_call(f, 2, (tj_tensor *[]){x, w}), dense_k(x, w)));
    }
    tj_concrete *c = concrete_at(f, 3, 24, 24, 6);
    usleep(200 * 1000); /* a compile released by mistake would be done, or well under way */
    CHECK_STR(tj_concrete_backend(c), "interp");
    CHECK_EQ_INT(atomic_load(&c->compiling), 1); /* its thread waits, unreleased */
    CHECK_EQ_INT(atomic_load(&c->tier_go), 0);
    tj_tensor *x3 = input(3, 24, 0.5f);
    CHECK(close_to(tj_call(f, 2, (tj_tensor *[]){x3, w}), dense_k(x3, w)));
    CHECK(atomic_load(&c->tier_go) == 1); /* the second call released it */
    CHECK_EQ_INT(tj_function_wait_compiled(f), TJ_OK);
    CHECK_STR(tj_concrete_backend(c), "cpu");
    tj_scope_end();
    tj_function_free(f); /* the other two: cancelled unrun */
}

/* Concrete functions handed out unrun: waiting starts their compile; freeing one cancels it. */
static void unrun(void) {
    bias_k = 9.0f;
    tj_function *f =
        tj_function_new("dense", (void *)dense_k, 2, &(tj_function_options){.tiered = 1});
    tj_concrete *c = concrete_at(f, 5, 70, 70, 9);
    CHECK_STR(tj_concrete_backend(c), "interp");
    CHECK_EQ_INT(tj_function_wait_compiled(f), TJ_OK);
    CHECK_STR(tj_concrete_backend(c), "cpu");
    tj_function_free(f);
    /* a picture of the kernels wants the native program: it compiles it (was: cancelled it, and
     * the function stayed on the interpreter) */
    bias_k = 10.0f;
    f = tj_function_new("dense", (void *)dense_k, 2, &(tj_function_options){.tiered = 1});
    c = concrete_at(f, 5, 70, 70, 9);
    char *dot = tj_concrete_graph_dot(c, TJ_GRAPH_KERNELS);
    CHECK(dot != NULL);
    free(dot);
    CHECK_STR(tj_concrete_backend(c), "cpu");
    tj_function_free(f);
    bias_k = 11.0f;
    f = tj_function_new("dense", (void *)dense_k, 2, &(tj_function_options){.tiered = 1});
    CHECK(concrete_at(f, 5, 70, 70, 9) != NULL);
    tj_function_free(f); /* its compile never started: cancelled, joined */
}

static void errors(void) {
    CHECK_EQ_INT(tj_function_wait_compiled(NULL), TJ_ERR_INVALID);
    CHECK_HAS(tj_last_error(), "function_wait_compiled: a NULL function");
    CHECK_STR(tj_concrete_backend(NULL), "");
    /* tiering turned off: native code from the first call */
    tj_function *f =
        tj_function_new("dense", (void *)dense, 2, &(tj_function_options){.tiered = -1});
    tj_scope_begin();
    tj_tensor *x = input(2, 8, 1.0f), *w = input(8, 3, 1.0f);
    tj_tensor *args[2] = {x, w};
    (void)tj_call(f, 2, args); /* the scope owns the result */
    CHECK_STR(tj_concrete_backend(concrete_at(f, 2, 8, 8, 3)), "cpu");
    tj_scope_end();
    tj_function_free(f);
}

/* The default: tiered. A first shape starts on the interpreter; a second shape whose kernels
 * (one flat loop) are compiled already runs native code from its first call, no compile. */
static void by_default(void) {
    tj_function *f = tj_function_new("flat", (void *)flat, 2, NULL);
    tj_scope_begin();
    tj_tensor *x = input(4, 33, 1.0f), *y = input(4, 33, 2.0f);
    tj_tensor *args[2] = {x, y};
    CHECK(close_to(tj_call(f, 2, args), flat(x, y)));
    CHECK_STR(tj_concrete_backend(concrete_at(f, 4, 33, 4, 33)), "interp");
    CHECK_EQ_INT(tj_function_wait_compiled(f), TJ_OK);
    CHECK_STR(tj_concrete_backend(concrete_at(f, 4, 33, 4, 33)), "cpu");
    tj_tensor *x2 = input(7, 5, 1.5f), *y2 = input(7, 5, 0.5f);
    tj_tensor *args2[2] = {x2, y2};
    CHECK(close_to(tj_call(f, 2, args2), flat(x2, y2)));
    CHECK_STR(tj_concrete_backend(concrete_at(f, 7, 5, 7, 5)), "cpu");
    CHECK_EQ_INT(tj_function_trace_count(f), 2);
    tj_scope_end();
    tj_function_free(f);
}

int main(void) {
    if (getenv("TJ_TIERED") || getenv("TJ_CACHE"))
        return 77; /* the defaults are what this file checks */
    char dir[] = "/tmp/tj-tiered-XXXXXX";
    if (!mkdtemp(dir))
        return 77;
    setenv("TJ_CACHE_DIR", dir, 1); /* before anything reads the configuration */
    if (getenv("TJ_BACKEND") || tj_backend_unavailable("cpu")) { /* the tiers: interp, then cpu */
        rmdir(dir);
        return 77;
    }
    by_default();
    tiers();
    free_while_compiling();
    once_never_compiles();
    unrun();
    errors();
    tj_cache_clear();
    rmdir(dir);
    return check_done();
}
