/* test_hardening.c — regressions for issue 9 (defects found by trying the library as a new user,
 * fuzzing and stress): host reads of symbolic values fail the trace, call_into refuses immutable
 * outputs, callbacks can fail a call, error codes stay negative, element counts are checked,
 * freed handles stay detectable past any number of frees, re-entry and recursion give errors,
 * float printing, misleading messages. Each block names its item number in the issue. */
#include <pthread.h>
#include <tracejit.h>

#include "check.h"

#define F32V(n, ...) tj_tensor_from_data(TJ_F32, 1, (int64_t[]){n}, (float[]){__VA_ARGS__})
#define I32V(n, ...) tj_tensor_from_data(TJ_I32, 1, (int64_t[]){n}, (int32_t[]){__VA_ARGS__})

/* ---- 1: host code reading a symbolic value fails the trace ----------------------------------- */
static tj_tensor *square_if_positive_host(tj_tensor *x) {
    if (tj_tensor_get_f64(tj_greater(x, tj_scalar_f32(0)), 0) != 0) /* decided at trace time */
        return tj_mul(x, x);
    return tj_mul(x, tj_scalar_f32(0));
}
static int n_prints;
static void count_print(const char *line, void *user) {
    (void)line;
    (void)user;
    n_prints++;
}
static tj_tensor *host_while(tj_tensor *x) {
    while (tj_tensor_get_f64(tj_sum(x, 0, NULL, 0), 0) > 1) {
        tj_print("x:", 1, &x);
        x = tj_tanh(x);
    }
    return x;
}
static tj_tensor *reads_data(tj_tensor *x) {
    const float *p = tj_tensor_data(x);
    return p ? tj_scalar_f32(p[0]) : tj_add(x, x);
}
static tj_tensor *reads_values(tj_tensor *x) {
    char *s = tj_tensor_values_str(x);
    free(s);
    return x;
}
static tj_tensor *prints_repr(tj_tensor *x) { /* the symbolic repr is fine: no value is read */
    char *s = tj_tensor_str(x);
    int ok = strstr(s, "Tensor(\"x0:0\"") != NULL;
    free(s);
    return ok ? tj_add(x, x) : tj_error_new(TJ_ERR_INVALID, "bad repr");
}

static void test_symbolic_reads(void) {
    tj_function *f = tj_function_new("square_if_positive", (void *)square_if_positive_host, 1, 0);
    tj_tensor *r = tj_call(f, 1, (tj_tensor *[]){tj_scalar_f32(-2)});
    CHECK_EQ_INT(tj_status_of(r), TJ_ERR_STATE);
    CHECK_HAS(tj_error_message(r), "tensor_get_f64");
    CHECK_HAS(tj_error_message(r), "not known while tracing");
    CHECK_HAS(tj_error_message(r), "tj_where");
    CHECK_EQ_INT(tj_function_n_concrete(f), 0);
    /* eagerly the same code is fine: the value is known */
    r = tj_call_eager(f, 1, (tj_tensor *[]){tj_scalar_f32(-2)});
    CHECK_NEAR(tj_tensor_get_f64(r, 0), 0, 0);
    tj_function_free(f);

    tj_set_print_sink(count_print, NULL);
    n_prints = 0;
    f = tj_function_new("host_while", (void *)host_while, 1, NULL);
    r = tj_call(f, 1, (tj_tensor *[]){F32V(2, 1, 2)});
    CHECK_EQ_INT(tj_status_of(r), TJ_ERR_STATE);
    CHECK_HAS(tj_error_message(r), "sum_");
    CHECK_EQ_INT(n_prints, 0);
    r = tj_call_eager(f, 1, (tj_tensor *[]){F32V(2, 1, 2)});
    CHECK(n_prints > 0);
    CHECK(tj_tensor_get_f64(tj_sum(r, 0, NULL, 0), 0) <= 1);
    tj_function_free(f);
    tj_set_print_sink(NULL, NULL);

    f = tj_function_new("reads_data", (void *)reads_data, 1, NULL);
    r = tj_call(f, 1, (tj_tensor *[]){F32V(2, 1, 2)});
    CHECK_EQ_INT(tj_status_of(r), TJ_ERR_STATE);
    CHECK_HAS(tj_error_message(r), "tensor_data: the value of symbolic tensor 'x0:0'");
    tj_function_free(f);
    f = tj_function_new("reads_values", (void *)reads_values, 1, NULL);
    r = tj_call(f, 1, (tj_tensor *[]){F32V(2, 1, 2)});
    CHECK_HAS(tj_error_message(r), "tensor_values_str");
    tj_function_free(f);
    f = tj_function_new("prints_repr", (void *)prints_repr, 1, NULL);
    r = tj_call(f, 1, (tj_tensor *[]){F32V(2, 1, 2)});
    CHECK_EQ_INT(tj_status_of(r), TJ_OK);
    CHECK_NEAR(tj_tensor_get_f64(r, 1), 4, 0);
    tj_function_free(f);
}

/* ---- 2: call_into outputs; static values in signatures are private copies -------------------- */
static tj_tensor *scale(tj_tensor *x, tj_tensor *k) {
    return tj_mul(x, k);
}
static tj_tensor *ident(tj_tensor *x) {
    return x;
}
static tj_tensor *escaped;
static tj_tensor *keeps_symbolic(tj_tensor *x) {
    tj_release(escaped);
    escaped = tj_retain(tj_add(x, x));
    return tj_add(x, x);
}

static void test_call_into_outputs(void) {
    tj_function *f = tj_function_new("scale", (void *)scale, 2, NULL);
    tj_tensor *k = tj_static_f64(3);
    tj_tensor *x = tj_scalar_f64(2);
    tj_tensor *out = tj_tensor_empty(TJ_F64, 0, NULL);
    CHECK_EQ_INT(tj_call_into(f, 2, (tj_tensor *[]){x, k}, 1, &out), TJ_OK);
    CHECK_NEAR(tj_tensor_get_f64(out, 0), 6, 0);
    /* a static value as an output: refused, and the static keeps its value */
    CHECK_EQ_INT(tj_call_into(f, 2, (tj_tensor *[]){x, k}, 1, &k), TJ_ERR_INVALID);
    CHECK_HAS(tj_last_error(), "output 0 is a static value");
    CHECK_NEAR(tj_tensor_get_f64(k, 0), 3, 0);
    tj_tensor *err = tj_error_new(TJ_ERR_SHAPE, "e");
    CHECK_EQ_INT(tj_call_into(f, 2, (tj_tensor *[]){x, k}, 1, &err), TJ_ERR_INVALID);
    CHECK_HAS(tj_last_error(), "output 0 is an error tensor");
    /* eager mode refuses the same */
    tj_set_eager(1);
    CHECK_EQ_INT(tj_call_into(f, 2, (tj_tensor *[]){x, k}, 1, &k), TJ_ERR_INVALID);
    tj_set_eager(0);
    CHECK_NEAR(tj_tensor_get_f64(k, 0), 3, 0);
    /* a symbolic tensor from a finished trace */
    tj_function *g = tj_function_new("keeps_symbolic", (void *)keeps_symbolic, 1, NULL);
    tj_call(g, 1, &x);
    CHECK_EQ_INT(tj_call_into(f, 2, (tj_tensor *[]){x, k}, 1, &escaped), TJ_ERR_STATE);
    CHECK_HAS(tj_last_error(), "symbolic tensor");
    /* ... and as an argument: named as such, not as a signature mismatch */
    tj_function *id = tj_function_new("ident", (void *)ident, 1, NULL);
    tj_tensor *r = tj_call(id, 1, &escaped);
    CHECK_EQ_INT(tj_status_of(r), TJ_ERR_STATE);
    CHECK_HAS(tj_error_message(r), "symbolic tensor from a finished trace");
    tj_release(escaped);
    escaped = NULL;
    /* the signature prints the value it was traced with */
    char *sigs = tj_function_signatures(f);
    CHECK_HAS(sigs, "x1: 3 (static)");
    free(sigs);
    tj_function_free(g);
    tj_function_free(id);
    tj_function_free(f);
}

/* ---- 3: a host callback fails the call ------------------------------------------------------- */
static int n_cb;
static void failing_cb(void *user, tj_tensor *x) {
    (void)user;
    n_cb++;
    if (tj_tensor_get_f64(x, 0) < 0)
        tj_callback_fail(TJ_ERR_RUNTIME, "negative input %g", tj_tensor_get_f64(x, 0));
}
static tj_tensor *with_cb(tj_tensor *x) {
    tj_host_callback((void *)failing_cb, NULL, 1, &x);
    return tj_add(x, x);
}

static void test_callback_fail(void) {
    CHECK_EQ_INT(tj_callback_fail(TJ_ERR_RUNTIME, "outside"), TJ_ERR_STATE);
    CHECK_HAS(tj_last_error(), "outside a host callback");
    tj_tensor *neg = tj_scalar_f32(-1), *pos = tj_scalar_f32(1);
    CHECK_EQ_INT(tj_host_callback((void *)failing_cb, NULL, 1, &neg), TJ_ERR_RUNTIME);
    CHECK_HAS(tj_last_error(), "host_callback: negative input -1");
    CHECK_EQ_INT(tj_host_callback((void *)failing_cb, NULL, 1, &pos), TJ_OK);
    { /* the test runs again with TJ_BACKEND=interp (CMake) */
        tj_function *f = tj_function_new("with_cb", (void *)with_cb, 1, NULL);
        n_cb = 0;
        tj_tensor *r = tj_call(f, 1, &pos);
        CHECK_NEAR(tj_tensor_get_f64(r, 0), 2, 0);
        r = tj_call(f, 1, &neg);
        CHECK_EQ_INT(tj_status_of(r), TJ_ERR_RUNTIME);
        CHECK_HAS(tj_error_message(r), "negative input -1");
        tj_tensor *out = tj_tensor_empty(TJ_F32, 0, NULL);
        CHECK_EQ_INT(tj_call_into(f, 1, &neg, 1, &out), TJ_ERR_RUNTIME);
        CHECK_EQ_INT(n_cb, 3);
        /* and the next good call works */
        r = tj_call(f, 1, &pos);
        CHECK_EQ_INT(tj_status_of(r), TJ_OK);
        tj_function_free(f);
    }
}

/* ---- 4: error codes, random bounds, tuple results holding an error -------------------------- */
static tj_tensor *tuple_with_error(tj_tensor *x) {
    tj_tensor *items[2] = {x, tj_matmul(x, x)};
    return tj_tuple(2, items);
}

static void test_errors_and_randoms(void) {
    tj_tensor *e = tj_error_new(5, "positive %d", 5);
    CHECK(tj_status_of(e) < 0);
    CHECK_EQ_INT(tj_status_of(e), TJ_ERR_INVALID);
    CHECK_HAS(tj_error_message(e), "positive 5");
    CHECK_EQ_INT(tj_status_of(tj_error_new(0, "zero")), TJ_ERR_INVALID);
    CHECK_EQ_INT(tj_status_of(tj_error_new(TJ_ERR_IO, "io")), TJ_ERR_IO);
    int64_t d[1] = {4};
    tj_tensor *u = tj_random_uniform(TJ_F32, 1, d, 2, 1, 7);
    CHECK_EQ_INT(tj_status_of(u), TJ_ERR_INVALID);
    CHECK_HAS(tj_error_message(u), "random_uniform: bounds");
    CHECK_EQ_INT(tj_status_of(tj_random_uniform(TJ_F32, 1, d, 0, NAN, 7)), TJ_ERR_INVALID);
    CHECK_EQ_INT(tj_status_of(tj_random_uniform(TJ_F32, 1, d, 1, 1, 7)), TJ_OK);
    tj_tensor *n = tj_random_normal(TJ_F64, 1, d, 0, -1, 7);
    CHECK_EQ_INT(tj_status_of(n), TJ_ERR_INVALID);
    CHECK_HAS(tj_error_message(n), "stddev");
    CHECK_EQ_INT(tj_status_of(tj_random_normal(TJ_F64, 1, d, 0, 0, 7)), TJ_OK);
    tj_function *f = tj_function_new("tuple_with_error", (void *)tuple_with_error, 1, NULL);
    tj_tensor *r = tj_call(f, 1, (tj_tensor *[]){F32V(3, 1, 2, 3)});
    CHECK_EQ_INT(tj_status_of(r), TJ_ERR_SHAPE);
    CHECK_HAS(tj_error_message(r), "matmul");
    tj_function_free(f);
}

/* ---- 5: reductions with a size-0 dimension after the reduced axes --------------------------- */
static int n_axes_g, axes_g[2], op_g;
static tj_tensor *reduce_g(tj_tensor *x) {
    switch (op_g) {
    case 0:
        return tj_sum(x, n_axes_g, axes_g, 0);
    case 1:
        return tj_max(x, n_axes_g, axes_g, 0);
    case 2:
        return tj_prod(x, n_axes_g, axes_g, 1);
    default:
        return tj_mean(x, n_axes_g, axes_g, 0);
    }
}

static void test_empty_reductions(void) {
    struct {
        int rank;
        int64_t dims[3];
        int n_axes, axes[2], op;
    } cases[] = {
        {2, {2, 0}, 1, {0}, 0},    {3, {3, 0, 4}, 1, {0}, 0}, {3, {3, 4, 0}, 2, {0, 1}, 1},
        {3, {3, 4, 0}, 1, {1}, 2}, {3, {0, 3, 4}, 1, {2}, 3}, {2, {0, 5}, 1, {1}, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        n_axes_g = cases[i].n_axes;
        memcpy(axes_g, cases[i].axes, sizeof axes_g);
        op_g = cases[i].op;
        tj_tensor *x = tj_zeros(TJ_F32, cases[i].rank, cases[i].dims);
        tj_tensor *want = reduce_g(x);
        tj_function *f = tj_function_new("reduce", (void *)reduce_g, 1, NULL);
        tj_tensor *got = tj_call(f, 1, &x);
        CHECK_MSG(tj_status_of(got) == TJ_OK, "case %zu: %s", i, tj_error_message(got));
        CHECK_EQ_INT(tj_status_of(want), TJ_OK);
        CHECK_EQ_INT(tj_tensor_rank(got), tj_tensor_rank(want));
        CHECK_EQ_INT(tj_tensor_numel(got), tj_tensor_numel(want));
        for (int k = 0; k < tj_tensor_rank(want) && tj_status_of(got) == TJ_OK; k++)
            CHECK_EQ_INT(tj_tensor_dims(got)[k], tj_tensor_dims(want)[k]);
        tj_function_free(f);
    }
}

/* ---- 11: element counts that overflow -------------------------------------------------------- */
static int64_t big_dims[3];
static int big_rank;
static tj_tensor *broadcast_big(tj_tensor *x) {
    return tj_broadcast_to(x, big_rank, big_dims);
}

static void test_numel_overflow(void) {
    const int64_t shapes[][3] = {{(int64_t)1 << 40, (int64_t)1 << 40, 1},
                                 {(int64_t)1 << 32, (int64_t)1 << 32, 1},
                                 {(int64_t)1 << 31, (int64_t)1 << 31, 4},
                                 {(int64_t)1 << 40, (int64_t)1 << 40, 0}};
    for (int i = 0; i < 4; i++) {
        const int64_t *d = shapes[i];
        tj_tensor *t[] = {
            tj_tensor_empty(TJ_F32, 3, d),
            tj_zeros(TJ_F32, 3, d),
            tj_ones(TJ_I32, 3, d),
            tj_fill(3, d, tj_scalar_f32(1)),
            tj_tensor_from_data(TJ_F32, 3, d, (float[]){0}),
            tj_broadcast_to(tj_scalar_f32(1), 3, d),
            tj_random_uniform(TJ_F32, 3, d, 0, 1, 1),
            tj_reshape(tj_scalar_f32(1), 3, d),
        };
        for (size_t k = 0; k < sizeof t / sizeof *t; k++) {
            CHECK_MSG(tj_status_of(t[k]) == TJ_ERR_SHAPE, "shape %d ctor %zu: %d", i, k,
                      tj_status_of(t[k]));
            CHECK_HAS(tj_error_message(t[k]), "elements");
            char *s = tj_tensor_str(t[k]); /* printing an error is safe */
            CHECK(s != NULL);
            free(s);
        }
        CHECK_HAS(tj_error_message(t[1]), "zeros:");
        CHECK_HAS(tj_error_message(t[2]), "ones:");
        CHECK_HAS(tj_error_message(t[3]), "fill:");
    }
    /* traced: the trace fails, nothing runs */
    big_rank = 2;
    big_dims[0] = big_dims[1] = (int64_t)1 << 32;
    tj_function *f = tj_function_new("broadcast_big", (void *)broadcast_big, 1, NULL);
    tj_tensor *r = tj_call(f, 1, (tj_tensor *[]){tj_scalar_f32(1)});
    CHECK_EQ_INT(tj_status_of(r), TJ_ERR_SHAPE);
    CHECK_HAS(tj_error_message(r), "broadcast_to: shape [4294967296,4294967296]");
    tj_function_free(f);
    /* the largest allowed count is fine to describe (not to allocate here) */
    CHECK_EQ_INT(tj_status_of(tj_reshape(tj_zeros(TJ_F32, 1, (int64_t[]){0}), 2,
                                         (int64_t[]){0, (int64_t)1 << 40})),
                 TJ_OK);
    /* a negative dim is printed as itself, not as "?" */
    tj_tensor *z = tj_zeros(TJ_F32, 2, (int64_t[]){2, -3});
    CHECK_HAS(tj_error_message(z), "zeros: invalid dimension -3 at axis 1 of shape [2,-3]");
}

/* ---- 12: freed handles past any number of frees ---------------------------------------------- */
static void test_freed_handles(void) {
    enum { N = 10000 };
    tj_function **fs = malloc(N * sizeof *fs);
    for (int i = 0; i < N; i++) {
        fs[i] = tj_function_new("f", (void *)ident, 1, NULL);
        CHECK(fs[i] != NULL);
    }
    for (int i = 0; i < N; i++)
        tj_function_free(fs[i]);
    tj_tensor *x = tj_scalar_f32(1);
    for (int i = 0; i < N; i += 997) {
        tj_tensor *r = tj_call(fs[i], 1, &x);
        CHECK_EQ_INT(tj_status_of(r), TJ_ERR_STATE);
        CHECK_HAS(tj_error_message(r), "freed");
        tj_function_free(fs[i]); /* a second free is a no-op */
        CHECK_EQ_INT(tj_function_trace_count(fs[i]), -1);
        CHECK(tj_function_get_concrete(fs[i], 1, (tj_spec[]){{.dtype = TJ_F32}}) == NULL);
        CHECK_HAS(tj_last_error(), "freed");
    }
    free(fs);
    /* a pointer that never was a function */
    static char not_fn[512];
    tj_tensor *r = tj_call((tj_function *)not_fn, 1, &x);
    CHECK_EQ_INT(tj_status_of(r), TJ_ERR_INVALID);
    CHECK_HAS(tj_error_message(r), "not a tj_function");
}

/* ---- 13, 14: re-entry and recursion ---------------------------------------------------------- */
static tj_function *self_fn;
static char free_err[256];
static tj_tensor *frees_itself(tj_tensor *x) {
    tj_function_free(self_fn);
    snprintf(free_err, sizeof free_err, "%s", tj_last_error());
    return tj_add(x, x);
}
static tj_tensor *concretes_itself(tj_tensor *x) {
    if (tj_function_get_concrete(self_fn, 1, (tj_spec[]){{.dtype = TJ_F64}}) == NULL)
        return tj_error_new(TJ_ERR_STATE, "%s", tj_last_error());
    return tj_add(x, x);
}
static tj_tensor *lists_itself(tj_tensor *x) {
    char *s = tj_function_signatures(self_fn);
    free(s);
    return tj_add(x, x);
}
static tj_tensor *recurses(tj_tensor *x) {
    return tj_call(self_fn, 1, &x);
}
static void *recurse_thread(void *arg) {
    (void)arg;
    tj_tensor *x = tj_scalar_f32(1);
    tj_tensor *r = tj_call(self_fn, 1, &x);
    int ok = tj_status_of(r) == TJ_ERR_STATE && strstr(tj_error_message(r), "nested");
    tj_release(r);
    tj_release(x);
    return ok ? arg : NULL;
}

static void test_reentry(void) {
    tj_tensor *x = tj_scalar_f32(1);
    self_fn = tj_function_new("frees_itself", (void *)frees_itself, 1, NULL);
    tj_tensor *r = tj_call(self_fn, 1, &x);
    CHECK_EQ_INT(tj_status_of(r), TJ_OK); /* the free is refused; the call goes on */
    CHECK(strstr(free_err, "function_free: 'frees_itself' is being traced"));
    CHECK_EQ_INT(tj_function_n_concrete(self_fn), 1);
    tj_function_free(self_fn);
    self_fn = tj_function_new("concretes_itself", (void *)concretes_itself, 1, NULL);
    r = tj_call(self_fn, 1, &x);
    CHECK_EQ_INT(tj_status_of(r), TJ_ERR_STATE);
    CHECK_HAS(tj_error_message(r), "get_concrete: 'concretes_itself' is being traced");
    tj_function_free(self_fn);
    self_fn = tj_function_new("lists_itself", (void *)lists_itself, 1, NULL);
    r = tj_call(self_fn, 1, &x);
    CHECK_EQ_INT(tj_status_of(r), TJ_OK);
    tj_function_free(self_fn);
    /* unbounded recursion: compiled (inlined while tracing) and eager */
    self_fn = tj_function_new("recurses", (void *)recurses, 1, NULL);
    r = tj_call(self_fn, 1, &x);
    CHECK_EQ_INT(tj_status_of(r), TJ_ERR_STATE);
    CHECK_HAS(tj_error_message(r), "'recurses': functions nested 1000 deep");
    r = tj_call_eager(self_fn, 1, &x);
    CHECK_EQ_INT(tj_status_of(r), TJ_ERR_STATE);
    /* on a thread with a small stack the stack check stops it first */
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setstacksize(&a, 1 << 20);
    pthread_t th;
    static int token;
    void *ok = NULL;
    CHECK(pthread_create(&th, &a, recurse_thread, &token) == 0);
    pthread_join(th, &ok);
    pthread_attr_destroy(&a);
    CHECK(ok == &token);
    tj_function_free(self_fn);
}

/* ---- 16: double releases are reported, not heap corruption ----------------------------------- */
static char misuse_msg[512];
static int n_misuse;
static void log_sink(const char *topic, const char *msg, void *user) {
    (void)user;
    if (!strcmp(topic, "misuse")) {
        n_misuse++;
        snprintf(misuse_msg, sizeof misuse_msg, "%s", msg);
    }
}

static void test_double_release(void) {
    tj_set_log(log_sink, NULL);
    tj_set_log_topics("misuse");
    n_misuse = 0;
    tj_scope_begin();
    tj_tensor *t = tj_add(tj_scalar_f32(1), tj_scalar_f32(2));
    tj_release(t); /* the scope owns it: the first mistake a C user makes */
    tj_scope_end();
    CHECK_EQ_INT(n_misuse, 1);
    CHECK(strstr(misuse_msg, "release: tensor") && strstr(misuse_msg, "already released"));
    /* twice by hand, without a scope (main opens its scope after this test) */
    tj_tensor *u = tj_scalar_f32(1);
    tj_release(u);
    tj_release(u);
    CHECK_EQ_INT(n_misuse, 2);
    /* a released tensor used as an argument or read: an error, not a read of freed memory */
    tj_tensor *one = tj_scalar_f32(1), *r = tj_add(u, one);
    CHECK_EQ_INT(tj_status_of(r), TJ_ERR_STATE);
    CHECK_HAS(tj_error_message(r), "add: tensor");
    tj_release(r);
    tj_release(one);
    CHECK_EQ_INT(tj_status_of(u), TJ_ERR_STATE);
    CHECK_EQ_INT(n_misuse, 4);
    tj_set_log(NULL, NULL);
    tj_set_log_topics("");
}

/* ---- 19: variables created inside a trace belong to the function ---------------------------- */
static tj_tensor *makes_variable(tj_tensor *x) { /* unconditional: the re-trace refuses it */
    tj_variable *v = tj_variable_new(x, "w");
    return tj_assign_add(v, x);
}
static tj_variable *kept;
static tj_tensor *keeps_variable(tj_tensor *x) {
    if (!kept)
        kept = tj_variable_new(tj_mul(x, tj_scalar_f32(10)), "kept");
    return tj_add(tj_variable_read(kept), x);
}

static void test_variables_owned(void) {
    tj_tensor *x = tj_scalar_f32(2);
    tj_function *f = tj_function_new("makes_variable", (void *)makes_variable, 1, NULL);
    tj_tensor *r = tj_call(f, 1, &x);
    CHECK_EQ_INT(tj_status_of(r), TJ_ERR_STATE);
    tj_function_free(f); /* the variable of the failed trace goes with it (LeakSanitizer) */
    f = tj_function_new("keeps_variable", (void *)keeps_variable, 1, NULL);
    r = tj_call(f, 1, &x);
    CHECK_NEAR(tj_tensor_get_f64(r, 0), 22, 0);
    tj_variable_free(kept); /* owned by the function: refused, and the variable still works */
    CHECK_HAS(tj_last_error(), "'kept' was created while tracing a function, which owns it");
    CHECK_NEAR(tj_tensor_get_f64(tj_variable_read(kept), 0), 20, 0);
    r = tj_call(f, 1, &x);
    CHECK_NEAR(tj_tensor_get_f64(r, 0), 22, 0);
    tj_function_free(f);
    /* the handle is stale now: every use reports it */
    CHECK_EQ_INT(tj_status_of(tj_variable_read(kept)), TJ_ERR_STATE);
    CHECK_HAS(tj_error_message(tj_variable_read(kept)), "variable_read: the variable was freed");
    tj_variable_free(kept);
    CHECK_HAS(tj_last_error(), "variable_free: the variable was freed");
    CHECK_EQ_INT(tj_status_of(tj_assign(kept, x)), TJ_ERR_STATE);
    CHECK_STR(tj_variable_name(kept), "");
    kept = NULL;
    /* one made outside a trace is the creator's: freeing twice is reported */
    tj_variable *v = tj_variable_new(x, "v");
    tj_function *g = tj_function_new("keeps_variable", (void *)keeps_variable, 1, NULL);
    kept = v;
    r = tj_call(g, 1, &x); /* the concrete function captures v */
    CHECK_NEAR(tj_tensor_get_f64(r, 0), 4, 0);
    tj_variable_free(v);
    tj_variable_free(v); /* still alive (captured), but the creator's reference is gone */
    CHECK_HAS(tj_last_error(), "variable_free: 'v' was already freed");
    r = tj_call(g, 1, &x);
    CHECK_NEAR(tj_tensor_get_f64(r, 0), 4, 0);
    tj_function_free(g);
    kept = NULL;
    /* a variable holds a value, not a host scalar: reads do not promote */
    tj_variable *hv = tj_variable_new(tj_scalar_f64(1.5), "hv");
    CHECK_EQ_INT(tj_status_of(tj_add(tj_variable_read(hv), tj_scalar_f32(1))), TJ_OK);
    CHECK_EQ_INT(tj_status_of(tj_add(tj_variable_read(hv), F32V(1, 2))), TJ_ERR_DTYPE);
    tj_variable_free(hv);
}

/* ---- 22, 23: printing and messages ----------------------------------------------------------- */
static void test_messages(void) {
    char *s = tj_tensor_values_str(F32V(7, 10, -50, 100, 0.5f, 1234, 1e20f, 1e-7f));
    CHECK_STR(s, "[10 -50 100 0.5 1234 1e+20 1e-07]");
    free(s);
    s = tj_tensor_values_str(
        tj_tensor_from_data(TJ_F64, 1, (int64_t[]){4}, (double[]){0.1, 123456789, 1e16, 0.0001}));
    CHECK_STR(s, "[0.1 123456789 1e+16 0.0001]");
    free(s);
    s = tj_tensor_str(tj_scalar_f32(10));
    CHECK_STR(s, "tj.Tensor(10, shape=(), dtype=float32)");
    free(s);
    /* assigning the wrong dtype is a dtype error */
    tj_variable *v = tj_variable_new(tj_scalar_f32(0), "v");
    tj_tensor *r = tj_assign(v, tj_scalar_i32(1));
    CHECK_EQ_INT(tj_status_of(r), TJ_ERR_DTYPE);
    CHECK_HAS(tj_error_message(r), "variable 'v' is float32[], value is int32[]");
    r = tj_assign(v, F32V(2, 1, 2));
    CHECK_EQ_INT(tj_status_of(r), TJ_ERR_SHAPE);
    tj_variable_free(v);
    r = tj_concat(2, NULL, 0);
    CHECK_HAS(tj_error_message(r), "concat: the tensor list is NULL");
    r = tj_scalar_str(NULL);
    CHECK_EQ_INT(tj_status_of(r), TJ_ERR_INVALID);
    CHECK_HAS(tj_error_message(r), "scalar_str");
    /* bad dims and bounds in signatures and options */
    tj_spec bad = {.dtype = TJ_F32, .rank = 1, .dims = {-7}};
    tj_function_options o = {.n_input_signature = 1, .input_signature = &bad};
    CHECK(tj_function_new("f", (void *)ident, 1, &o) == NULL);
    CHECK_HAS(tj_last_error(), "input signature 0: invalid dimension -7");
    tj_function_options ob = {.cache_bound = -5};
    CHECK(tj_function_new("f", (void *)ident, 1, &ob) == NULL);
    CHECK_HAS(tj_last_error(), "cache_bound -5");
    tj_function *f = tj_function_new("f", (void *)ident, 1, NULL);
    CHECK(tj_function_get_concrete(f, 1, &bad) == NULL);
    CHECK_HAS(tj_last_error(), "get_concrete: spec 0: invalid dimension -7");
    tj_function_free(f);
    /* a closure's name */
    tj_function_options on = {.name = "my_dense"};
    tj_tensor *(*fn)(tj_tensor *) =
        (tj_tensor * (*)(tj_tensor *)) tj_jit_compile((void *)ident, 1, &on);
    CHECK_STR(tj_function_name(tj_jit_function((void *)fn)), "my_dense");
    tj_jit_free((void *)fn);
}

int main(void) {
    test_double_release(); /* before the scope: it releases tensors by hand */
    tj_scope_begin();
    test_symbolic_reads();
    test_call_into_outputs();
    test_callback_fail();
    test_errors_and_randoms();
    test_empty_reductions();
    test_numel_overflow();
    test_freed_handles();
    test_reentry();
    test_variables_owned();
    test_messages();
    tj_scope_end();
    return check_done();
}
