/* test_cache.c — the signature cache of tj_function: the LRU bound (cache_bound) and retracing of
 * evicted signatures, tuple and empty results, retrace logging (tj_set_log + "retrace" topic:
 * which argument changed and how; the frequent-retracing warning), and 8 threads calling one
 * function with 3 mixed signatures: every signature traced exactly once, every result right. */
#include <pthread.h>
#include <stdatomic.h>

#include <tracejit.h>

#include "check.h"

static atomic_int n_runs;

static tj_tensor *affine(tj_tensor *x) {
    atomic_fetch_add(&n_runs, 1);
    return tj_add(tj_mul(x, tj_scalar_i32(2)), tj_scalar_i32(1));
}

static tj_tensor *stats(tj_tensor *x) {
    tj_tensor *items[3] = {tj_sum(x, 0, NULL, 0), tj_max(x, 0, NULL, 0), tj_neg(x)};
    return tj_tuple(3, items);
}

static int n_effects;
static tj_tensor *no_result(tj_tensor *x) {
    n_effects++;
    (void)x;
    return NULL;
}

static tj_tensor *echo(tj_tensor *x, tj_tensor *s) {
    (void)s;
    return tj_neg(x);
}

static tj_variable *counter;
static tj_tensor *bump(void) {
    return tj_assign_add(counter, tj_scalar_i64(1));
}
static void *bump_work(void *p) {
    tj_function *f = p;
    for (int i = 0; i < 1000; i++)
        tj_release(tj_call(f, 0, NULL));
    return NULL;
}

/* ---- log capture ----------------------------------------------------------------------------- */
#define MAX_LOG 64
static char logs[MAX_LOG][512];
static int n_logs;
static void log_sink(const char *topic, const char *msg, void *user) {
    (void)user;
    if (n_logs < MAX_LOG)
        snprintf(logs[n_logs++], sizeof logs[0], "[%s] %s", topic, msg);
}
static int count_logs(const char *needle) {
    int n = 0;
    for (int i = 0; i < n_logs; i++)
        n += strstr(logs[i], needle) != NULL;
    return n;
}

/* ---- threads --------------------------------------------------------------------------------- */
typedef struct worker {
    tj_function *f;
    int id, bad;
} worker;

static void *work(void *p) {
    worker *w = p;
    int64_t d3[1] = {3}, d22[2] = {2, 2};
    for (int i = 0; i < 200; i++) {
        tj_scope_begin();
        int k = (i + w->id) % 3;
        int32_t v = w->id * 1000 + i;
        tj_tensor *x = k == 0   ? tj_scalar_i32(v)
                       : k == 1 ? tj_tensor_from_data(TJ_I32, 1, d3, (int32_t[]){v, -v, 7})
                                : tj_tensor_from_data(TJ_I32, 2, d22, (int32_t[]){v, 0, 1, 2});
        tj_tensor *r = tj_call(w->f, 1, &x);
        int ok = tj_status_of(r) == TJ_OK && tj_tensor_numel(r) == tj_tensor_numel(x) &&
                 tj_tensor_rank(r) == tj_tensor_rank(x);
        for (int64_t j = 0; ok && j < tj_tensor_numel(x); j++)
            ok = tj_tensor_get_f64(r, j) == 2 * tj_tensor_get_f64(x, j) + 1;
        w->bad += !ok;
        tj_scope_end();
    }
    return NULL;
}

int main(void) {
    tj_scope_begin();
    int64_t d2[1] = {2}, d3[1] = {3};
    tj_tensor *a = tj_scalar_i32(5);                                         /* signature A */
    tj_tensor *b = tj_tensor_from_data(TJ_I32, 1, d2, (int32_t[]){1, 2});    /* B */
    tj_tensor *c = tj_tensor_from_data(TJ_I32, 1, d3, (int32_t[]){1, 2, 3}); /* C */

    /* cache bound 2, LRU */
    tj_function *f =
        tj_function_new("affine", (void *)affine, 1, &(tj_function_options){.cache_bound = 2});
    CHECK_EQ_INT(tj_tensor_get_f64(tj_call(f, 1, &a), 0), 11);
    CHECK_EQ_INT(tj_tensor_get_f64(tj_call(f, 1, &b), 1), 5);
    CHECK_EQ_INT(tj_function_n_concrete(f), 2);
    CHECK_EQ_INT(tj_tensor_get_f64(tj_call(f, 1, &a), 0), 11); /* A is now the most recent */
    CHECK_EQ_INT(tj_function_trace_count(f), 2);
    CHECK_EQ_INT(tj_tensor_get_f64(tj_call(f, 1, &c), 2), 7); /* evicts B */
    CHECK_EQ_INT(tj_function_trace_count(f), 3);
    CHECK_EQ_INT(tj_function_n_concrete(f), 2);
    tj_call(f, 1, &a); /* still cached */
    tj_call(f, 1, &c);
    CHECK_EQ_INT(tj_function_trace_count(f), 3);
    CHECK_EQ_INT(tj_tensor_get_f64(tj_call(f, 1, &b), 0), 3); /* evicted: retraces, evicts A */
    CHECK_EQ_INT(tj_function_trace_count(f), 4);
    CHECK_EQ_INT(tj_function_n_concrete(f), 2);
    tj_call(f, 1, &c);
    CHECK_EQ_INT(tj_function_trace_count(f), 4);
    tj_call(f, 1, &a);
    CHECK_EQ_INT(tj_function_trace_count(f), 5);
    CHECK_EQ_INT(tj_function_n_concrete(f), 2);
    CHECK_EQ_INT(atomic_load(&n_runs), 5);
    tj_function_free(f);

    /* several results as a tuple */
    tj_function *fs = tj_function_new("stats", (void *)stats, 1, NULL);
    tj_tensor *x = tj_tensor_from_data(TJ_F32, 1, d3, (float[]){1.5f, -2.0f, 4.0f});
    for (int k = 0; k < 2; k++) {
        tj_tensor *r = tj_call(fs, 1, &x);
        CHECK_EQ_INT(tj_status_of(r), TJ_OK);
        CHECK_EQ_INT(tj_tuple_size(r), 3);
        CHECK_NEAR(tj_tensor_get_f64(tj_tuple_get(r, 0), 0), 3.5, 1e-6);
        CHECK_NEAR(tj_tensor_get_f64(tj_tuple_get(r, 1), 0), 4.0, 0);
        CHECK_EQ_INT(tj_tensor_numel(tj_tuple_get(r, 2)), 3);
        CHECK_NEAR(tj_tensor_get_f64(tj_tuple_get(r, 2), 1), 2.0, 0);
        CHECK(tj_tuple_get(r, 3) == NULL);
    }
    tj_tensor *re = tj_call_eager(fs, 1, &x);
    CHECK_EQ_INT(tj_tuple_size(re), 3);
    CHECK_NEAR(tj_tensor_get_f64(tj_tuple_get(re, 0), 0), 3.5, 1e-6);
    CHECK_EQ_INT(tj_function_trace_count(fs), 1);
    tj_function_free(fs);

    /* no result: an empty tuple, compiled and eager */
    tj_function *fn = tj_function_new("no_result", (void *)no_result, 1, NULL);
    tj_tensor *r = tj_call(fn, 1, &x);
    CHECK_EQ_INT(tj_status_of(r), TJ_OK);
    CHECK_EQ_INT(tj_tuple_size(r), 0);
    r = tj_call(fn, 1, &x);
    CHECK_EQ_INT(tj_tuple_size(r), 0);
    r = tj_call_eager(fn, 1, &x);
    CHECK_EQ_INT(tj_tuple_size(r), 0);
    CHECK_EQ_INT(n_effects, 2);
    tj_function_free(fn);

    /* retrace logging: which argument changed, and how */
    tj_set_log(log_sink, NULL);
    tj_set_log_topics("retrace");
    tj_function *fe = tj_function_new(
        "echo", (void *)echo, 2, &(tj_function_options){.arg_names = (const char *[]){"x", "s"}});
    tj_call(fe, 2, (tj_tensor *[]){tj_scalar_i32(1), tj_static_i64(1)});
    CHECK_EQ_INT(n_logs, 0); /* a first trace is not a retrace */
    tj_call(fe, 2, (tj_tensor *[]){tj_scalar_i32(2), tj_static_i64(1)});
    CHECK_EQ_INT(n_logs, 0);
    tj_call(fe, 2, (tj_tensor *[]){tj_scalar_f32(1), tj_static_i64(1)});
    CHECK_EQ_INT(n_logs, 1);
    CHECK_HAS(logs[0], "[retrace]");
    CHECK_HAS(logs[0], "'echo'");
    CHECK_HAS(logs[0], "argument 0 (x) changed dtype");
    CHECK_HAS(logs[0], "int32");
    CHECK_HAS(logs[0], "float32");
    tj_call(fe, 2, (tj_tensor *[]){tj_ones(TJ_F32, 1, d2), tj_static_i64(1)});
    CHECK_EQ_INT(n_logs, 2);
    CHECK_HAS(logs[1], "argument 0 (x) changed shape");
    CHECK_HAS(logs[1], "shape=()");
    CHECK_HAS(logs[1], "shape=(2,)");
    tj_call(fe, 2, (tj_tensor *[]){tj_ones(TJ_F32, 1, d2), tj_static_i64(9)});
    CHECK_EQ_INT(n_logs, 3);
    CHECK_HAS(logs[2], "argument 1 (s) changed static value");
    CHECK_HAS(logs[2], "static 1 -> static 9");
    CHECK_EQ_INT(count_logs("warning"), 0);
    tj_function_free(fe);

    /* the frequent-retracing warning: 5 of the last 10 calls traced */
    n_logs = 0;
    fe = tj_function_new("echo", (void *)echo, 2, NULL);
    for (int i = 1; i <= 4; i++)
        tj_call(fe, 2, (tj_tensor *[]){tj_scalar_i32(1), tj_static_i64(i)});
    CHECK_EQ_INT(count_logs("warning"), 0);
    tj_call(fe, 2, (tj_tensor *[]){tj_scalar_i32(1), tj_static_i64(5)});
    CHECK_EQ_INT(count_logs("warning"), 1);
    CHECK_EQ_INT(count_logs("5 of the last 10 calls of 'echo'"), 1);
    tj_function_free(fe);
    /* the same five traces spread over more than 10 calls: no warning */
    n_logs = 0;
    fe = tj_function_new("echo", (void *)echo, 2, NULL);
    for (int i = 1; i <= 4; i++)
        tj_call(fe, 2, (tj_tensor *[]){tj_scalar_i32(1), tj_static_i64(i)});
    for (int i = 0; i < 10; i++)
        tj_call(fe, 2, (tj_tensor *[]){tj_scalar_i32(1), tj_static_i64(1)});
    tj_call(fe, 2, (tj_tensor *[]){tj_scalar_i32(1), tj_static_i64(5)});
    CHECK_EQ_INT(tj_function_trace_count(fe), 5);
    CHECK_EQ_INT(count_logs("changed static value"), 4);
    CHECK_EQ_INT(count_logs("warning"), 0);
    tj_function_free(fe);
    /* topic off: nothing logged */
    n_logs = 0;
    tj_set_log_topics("compile");
    fe = tj_function_new("echo", (void *)echo, 2, NULL);
    for (int i = 1; i <= 6; i++)
        tj_call(fe, 2, (tj_tensor *[]){tj_scalar_i32(1), tj_static_i64(i)});
    CHECK_EQ_INT(count_logs("[retrace]"), 0);
    tj_function_free(fe);
    tj_set_log_topics("");
    tj_set_log(NULL, NULL);

    /* 8 threads, 3 mixed signatures, 200 calls each: 3 traces in all */
    atomic_store(&n_runs, 0);
    f = tj_function_new("affine", (void *)affine, 1, NULL);
    pthread_t th[8];
    worker w[8];
    for (int i = 0; i < 8; i++) {
        w[i] = (worker){.f = f, .id = i};
        CHECK(pthread_create(&th[i], NULL, work, &w[i]) == 0);
    }
    int bad = 0;
    for (int i = 0; i < 8; i++) {
        pthread_join(th[i], NULL);
        bad += w[i].bad;
    }
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(tj_function_trace_count(f), 3);
    CHECK_EQ_INT(tj_function_n_concrete(f), 3);
    CHECK_EQ_INT(atomic_load(&n_runs), 3);
    tj_function_free(f);

    /* 8 threads bumping one variable through one compiled function: updates serialise.
     * BUG 1: runtime/variable.c rt_variable_set reads v->value (dtype, rank, dims) before taking
     * v->mu, while another thread's assign may free it: heap use after free under ASan.
     * BUG 2: assign_add is a VAR_READ, an add and an ASSIGN (runtime/variable.c assign_op) with
     * no lock held across them, compiled or eager: concurrent calls lose updates. */
    counter = tj_variable_new(tj_scalar_i64(0), "counter");
    f = tj_function_new("bump", (void *)bump, 0, NULL);
    for (int i = 0; i < 8; i++)
        CHECK(pthread_create(&th[i], NULL, bump_work, f) == 0);
    for (int i = 0; i < 8; i++)
        pthread_join(th[i], NULL);
    CHECK_EQ_INT(tj_function_trace_count(f), 1);
    CHECK_EQ_INT(tj_tensor_get_f64(tj_variable_read(counter), 0), 8000);
    tj_function_free(f);
    tj_variable_free(counter);

    tj_scope_end();
    return check_done();
}
