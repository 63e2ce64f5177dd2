/* Unknown dims run native code (issue 26): a signature with -1 dims is traced once (S3, S7: its
 * host code runs once), and each shape it is called at runs its graph at that shape compiled as
 * a later signature's is (shape-generic kernels, so the next batch size of a broadcasting loop
 * runs the code the first compiled); values equal eager execution at every shape, shapes
 * alternating; a shape error at a call names the op and both shapes; everything is freed with
 * the function (the sanitizer runs check that). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "native_first.h"
#include "shapes_util.h"
#include <tracejit.h>

static int n_built, n_shared, n_instances, n_traces;

static void log_sink(const char *topic, const char *msg, void *user) {
    (void)topic, (void)user;
    if (getenv("TEST_VERBOSE"))
        fprintf(stderr, "%s\n", msg);
    if (strstr(msg, "shared with a loaded program"))
        n_shared++;
    else if (strstr(msg, "kernels, build") || strstr(msg, "loaded from the disk cache"))
        n_built++;
    if (strstr(msg, "an instance of its unknown-dims signature"))
        n_instances++;
}

/* a broadcasting loop, a reshape to an unknown extent, a row reduction and a column broadcast */
static int use_sub; /* the trace's ops: another op, other kernels */
static tj_tensor *affine(tj_tensor *x, tj_tensor *b) {
    n_traces++;
    tj_tensor *s = tj_mul(x, tj_scalar_f32(2.0f));
    tj_tensor *y = tj_relu(use_sub ? tj_sub(s, b) : tj_add(s, b));
    int64_t halves[2] = {-1, 12};
    tj_tensor *v = tj_reshape(y, 2, halves);
    static const int axis1[1] = {1};
    return tj_add(tj_mul(v, tj_scalar_f32(0.5f)), tj_sum(v, 1, axis1, 1));
}

static void same_as_eager(tj_function *f, int64_t rows, int64_t cols, float seed) {
    tj_tensor *x = su_filled(2, (const int64_t[]){rows, cols}, seed),
              *b = su_filled(1, (const int64_t[]){cols}, seed + 0.25f);
    tj_tensor *args[2] = {x, b};
    tj_tensor *r = tj_call(f, 2, args);
    int traces = n_traces;
    tj_tensor *e = tj_call_eager(f, 2, args);
    n_traces = traces; /* the eager run's host code is not a trace */
    CHECK_MSG(tj_status_of(r) == TJ_OK, "%s", tj_error_message(r));
    if (tj_status_of(r) == TJ_OK && tj_status_of(e) == TJ_OK) {
        CHECK_EQ_INT(tj_tensor_numel(r), rows * cols);
        int bad = su_differ(r, e, 1e-5);
        CHECK_MSG(bad == 0, "[%lld, %lld]: %d elements differ from eager", (long long)rows,
                  (long long)cols, bad);
    }
    tj_release(r);
    tj_release(e);
    tj_release(x);
    tj_release(b);
}

/* Threads calling one unknown-dims signature at shapes not seen yet and seen, at once: the
 * instances are made once each (under the signature's lock) and run concurrently (TSan runs
 * this file). want[k]: the eager result at rows 3 + k. */
enum { N_THREADS = 4, N_SHAPES = 6, N_CALLS = 24 };
typedef struct shared_calls {
    tj_function *f;
    tj_tensor *x[N_SHAPES], *b, *want[N_SHAPES];
    int seed, bad;
} shared_calls;

static void *call_many(void *arg) {
    shared_calls *s = arg;
    int bad = 0;
    for (int i = 0; i < N_CALLS; i++) {
        int k = (s->seed * 7 + i * 5) % N_SHAPES;
        tj_tensor *r = tj_call(s->f, 2, (tj_tensor *[]){s->x[k], s->b});
        if (tj_status_of(r) != TJ_OK || tj_tensor_numel(r) != tj_tensor_numel(s->want[k])) {
            bad++;
        } else {
            bad += su_differ(r, s->want[k], 1e-5);
        }
        tj_release(r);
    }
    s->bad = bad;
    return NULL;
}

static void threads(const tj_spec *sig) {
    tj_function *f =
        tj_function_new("affine_threads", (void *)affine, 2,
                        &(tj_function_options){.n_input_signature = 2, .input_signature = sig});
    shared_calls s[N_THREADS];
    tj_tensor *b = su_filled(1, (const int64_t[]){24}, 0.25f), *x[N_SHAPES], *want[N_SHAPES];
    for (int k = 0; k < N_SHAPES; k++) {
        x[k] = su_filled(2, (const int64_t[]){3 + k, 24}, (float)k);
        want[k] = tj_call_eager(f, 2, (tj_tensor *[]){x[k], b});
        CHECK_EQ_INT(tj_status_of(want[k]), TJ_OK);
    }
    pthread_t th[N_THREADS];
    for (int t = 0; t < N_THREADS; t++) {
        s[t] = (shared_calls){.f = f, .b = b, .seed = t};
        memcpy(s[t].x, x, sizeof x);
        memcpy(s[t].want, want, sizeof want);
        CHECK(pthread_create(&th[t], NULL, call_many, &s[t]) == 0);
    }
    for (int t = 0; t < N_THREADS; t++) {
        pthread_join(th[t], NULL);
        CHECK_MSG(s[t].bad == 0, "thread %d: %d wrong values or errors", t, s[t].bad);
    }
    CHECK_EQ_INT(tj_function_trace_count(f), 1);
    CHECK_EQ_INT(tj_function_wait_compiled(f), TJ_OK);
    for (int k = 0; k < N_SHAPES; k++) {
        tj_release(x[k]);
        tj_release(want[k]);
    }
    tj_release(b);
    tj_function_free(f);
}

/* a reshape to an unknown row count of 4 columns; a gather of fixed indices */
static tj_tensor *rows_of_4(tj_tensor *x) {
    return tj_reshape(tj_mul(x, x), 2, (const int64_t[]){-1, 4});
}
static tj_tensor *pick(tj_tensor *x, tj_tensor *idx) {
    return tj_gather(tj_add(x, x), idx, 0);
}

/* The checks a compile made for the traced shapes, made again at each shape called: a reshape
 * that no longer divides and a gather index past the new extent are errors naming the op and
 * the shapes, after the same signature ran at shapes where they held (on an instance's native
 * code, or the interpreter under TJ_BACKEND=interp). */
static void shape_errors_later(void) {
    float zeros[64] = {0};
    tj_spec s1 = {.dtype = TJ_F32, .rank = 2, .dims = {-1, 6}};
    tj_function *f =
        tj_function_new("rows_of_4", (void *)rows_of_4, 1,
                        &(tj_function_options){.n_input_signature = 1, .input_signature = &s1});
    const int64_t rows[3] = {2, 4, 3}; /* 12 and 24 elements divide by 4; 18 does not */
    for (int k = 0; k < 3; k++) {
        tj_tensor *x = tj_tensor_from_data(TJ_F32, 2, (const int64_t[]){rows[k], 6}, zeros);
        tj_tensor *r = tj_call(f, 1, &x);
        if (k < 2) {
            CHECK_MSG(tj_status_of(r) == TJ_OK, "%s", tj_error_message(r));
        } else {
            CHECK_EQ_INT(tj_status_of(r), TJ_ERR_SHAPE);
            CHECK_MSG(strstr(tj_error_message(r), "reshape") &&
                          strstr(tj_error_message(r), "[3,6]") && strstr(tj_error_message(r), "4]"),
                      "%s", tj_error_message(r));
        }
        tj_release(r);
        tj_release(x);
    }
    tj_spec s2[2] = {{.dtype = TJ_F32, .rank = 1, .dims = {-1}},
                     {.dtype = TJ_I32, .rank = 1, .dims = {3}}};
    tj_function *g =
        tj_function_new("pick", (void *)pick, 2,
                        &(tj_function_options){.n_input_signature = 2, .input_signature = s2});
    const int32_t at[3] = {0, 5, 9};
    tj_tensor *idx = tj_tensor_from_data(TJ_I32, 1, (const int64_t[]){3}, at);
    const int64_t len[3] = {10, 12, 6}; /* index 9 is past the end of 6 */
    for (int k = 0; k < 3; k++) {
        tj_tensor *x = tj_tensor_from_data(TJ_F32, 1, &len[k], zeros);
        tj_tensor *r = tj_call(g, 2, (tj_tensor *[]){x, idx});
        if (k < 2) {
            CHECK_MSG(tj_status_of(r) == TJ_OK, "%s", tj_error_message(r));
        } else {
            CHECK(tj_status_of(r) != TJ_OK);
            CHECK_MSG(strstr(tj_error_message(r), "gather") &&
                          strstr(tj_error_message(r), "index 9") &&
                          strstr(tj_error_message(r), "[6]"),
                      "%s", tj_error_message(r));
        }
        tj_release(r);
        tj_release(x);
    }
    tj_release(idx);
    tj_function_free(g);
    tj_function_free(f);
}

int main(void) {
    check_untiered(); /* native at an instance's first call; the tiered case below */
    char dir[] = "/tmp/tj-unknown-XXXXXX"; /* compiles counted from an empty code cache */
    if (!mkdtemp(dir))
        return 77;
    setenv("TJ_CACHE_DIR", dir, 1); /* before anything reads the configuration */
    int native = !getenv("TJ_BACKEND") && !tj_backend_unavailable("cpu") && !getenv("TJ_CACHE");
    tj_set_log(log_sink, NULL);
    tj_set_log_topics("compile");
    tj_spec sig[2] = {{.dtype = TJ_F32, .rank = 2, .dims = {-1, 24}},
                      {.dtype = TJ_F32, .rank = 1, .dims = {24}}};
    tj_function *f =
        tj_function_new("affine", (void *)affine, 2,
                        &(tj_function_options){.n_input_signature = 2, .input_signature = sig});
    int64_t rows[] = {4, 5, 6, 4, 300, 5};
    for (int k = 0; k < 6; k++)
        same_as_eager(f, rows[k], 24, (float)k);
    CHECK_EQ_INT(n_traces, 1); /* one trace: the signature's */
    CHECK_EQ_INT(tj_function_trace_count(f), 1);
    CHECK_EQ_INT(tj_function_n_concrete(f), 1);
    if (native) {
        CHECK_EQ_INT(n_instances, 4); /* 4, 5, 6 and 300 rows; the repeats run theirs */
        /* the first instance compiles; the others' kernels are shape-generic (the broadcasting
         * loops) or outer-free (the row sums): shared */
        CHECK_EQ_INT(n_built, 1);
        CHECK_EQ_INT(n_shared, 3);
    }

    /* a shape error at a call (both extents unknown): named by the op, with both shapes */
    tj_spec any[2] = {{.dtype = TJ_F32, .rank = 2, .dims = {-1, -1}},
                      {.dtype = TJ_F32, .rank = 1, .dims = {-1}}};
    tj_function *g =
        tj_function_new("affine_any", (void *)affine, 2,
                        &(tj_function_options){.n_input_signature = 2, .input_signature = any});
    same_as_eager(g, 3, 8, 1.0f);
    tj_tensor *x = su_filled(2, (const int64_t[]){3, 5}, 0.0f),
              *b = su_filled(1, (const int64_t[]){4}, 0.0f);
    tj_tensor *r = tj_call(g, 2, (tj_tensor *[]){x, b});
    CHECK_EQ_INT(tj_status_of(r), TJ_ERR_SHAPE);
    CHECK_MSG(strstr(tj_error_message(r), "add") && strstr(tj_error_message(r), "[3,5]") &&
                  strstr(tj_error_message(r), "[4]"),
              "%s", tj_error_message(r));
    tj_release(r);
    tj_release(x);
    tj_release(b);
    same_as_eager(g, 2, 18, 2.0f); /* and the next call runs */

    /* tiered, kernels no cache has (another op): an instance starts on the interpreter
     * and compiles from its second call in the background; tj_function_wait_compiled waits
     * for it; values agree throughout. Its next shape then finds that code at once. */
    use_sub = 1;
    tj_function *h = tj_function_new(
        "affine_tiered", (void *)affine, 2,
        &(tj_function_options){.n_input_signature = 2, .input_signature = sig, .tiered = 1});
    int built = n_built, shared = n_shared;
    same_as_eager(h, 7, 24, 3.0f);
    CHECK_EQ_INT(n_built, built); /* the first call: interpreted, nothing compiled */
    same_as_eager(h, 7, 24, 4.0f);
    CHECK_EQ_INT(tj_function_wait_compiled(h), TJ_OK);
    if (native)
        CHECK_EQ_INT(n_built - built, 1);
    same_as_eager(h, 7, 24, 5.0f);
    same_as_eager(h, 9, 24, 6.0f);
    if (native)
        CHECK_EQ_INT(n_shared - shared, 1);
    use_sub = 0;
    threads(sig);
    shape_errors_later();
    tj_function_free(h);
    tj_function_free(g);
    tj_function_free(f);
    tj_set_log_topics("");
    tj_set_log(NULL, NULL);
    tj_cache_clear();
    rmdir(dir);
    return check_done();
}
