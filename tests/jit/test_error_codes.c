/* Status codes match their messages (a dtype that is wrong is TJ_ERR_DTYPE, a shape that is
 * wrong TJ_ERR_SHAPE), eager and traced; every variable has a name, so checkpoints of unnamed
 * variables work; an error an op makes inside a void host callback that the callback does not
 * report is named under TJ_LOG=misuse instead of vanishing (issue 23, items 13, 16, 17). */
#include <tracejit.h>

#include "check.h"

static tj_tensor *one_f32(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)a, (void)u;
    return tj_scalar_f32(1);
}
static tj_tensor *one_f64(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)a, (void)u;
    return tj_scalar_f64(1);
}
static tj_tensor *lt3(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    return tj_less(a[0], tj_scalar_f32(3));
}
static tj_tensor *to_f64(int n, tj_tensor *const *a, void *u) {
    (void)u;
    return tj_cast(a[n - 1], TJ_F64);
}
static tj_tensor *to_row(int n, tj_tensor *const *a, void *u) {
    (void)u;
    return tj_reshape(a[n - 1], 1, (int64_t[]){1});
}
static tj_tensor *scan_f64(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u; /* carried value 0 changes dtype */
    return tj_tuple(2, (tj_tensor *[]){tj_cast(a[0], TJ_F64), a[1]});
}

/* the ops, each in a function so that it runs eagerly and traced */
static int which;
static tj_tensor *op_under_test(tj_tensor *x) {
    int64_t d[1] = {2};
    tj_body two[2] = {one_f32, one_f64};
    switch (which) {
    case 0:
        return tj_cond(tj_scalar_str("a"), one_f32, one_f32, 1, &x, NULL);
    case 1:
        return tj_switch(tj_scalar_f32(1), 2, two, 1, &x, NULL);
    case 2:
        return tj_while_loop(lt3, to_f64, 1, &x, NULL);
    case 3:
        return tj_for_range(tj_scalar_i64(0), tj_scalar_i64(2), tj_scalar_i64(1), to_f64, 1, &x,
                            NULL);
    case 4:
        return tj_tensor_array_write(tj_tensor_array_new(TJ_F32, 3, 1, d), tj_scalar_i32(0),
                                     tj_zeros(TJ_F64, 1, d));
    case 5:
        return tj_for_range(tj_scalar_str("0"), tj_scalar_i64(2), tj_scalar_i64(1), to_f64, 1, &x,
                            NULL);
    case 6:
        return tj_scan(scan_f64, 1, &x, 1, (tj_tensor *[]){tj_zeros(TJ_F32, 1, d)}, NULL);
    /* shapes, not dtypes */
    case 7:
        return tj_while_loop(lt3, to_row, 1, &x, NULL);
    case 8:
        return tj_tensor_array_write(tj_tensor_array_new(TJ_F32, 3, 1, d), tj_scalar_i32(0),
                                     tj_zeros(TJ_F32, 1, (int64_t[]){3}));
    }
    return NULL;
}
/* traced only: both branches of a cond, both of a switch */
static tj_tensor *cond_dtypes(tj_tensor *x) {
    return tj_cond(tj_greater(x, tj_scalar_f32(0)), one_f32, one_f64, 1, &x, NULL);
}
static tj_tensor *switch_dtypes(tj_tensor *x) {
    tj_body two[2] = {one_f32, one_f64};
    return tj_switch(tj_cast(x, TJ_I32), 2, two, 1, &x, NULL);
}

static void codes(void) {
    static const struct {
        tj_status code;
        const char *msg;
    } want[] = {
        {TJ_ERR_DTYPE, "cond: the predicate must be a scalar bool or number, got string[]"},
        {TJ_ERR_DTYPE, "switch: the branch index must be an integer scalar, got float32[]"},
        {TJ_ERR_DTYPE, "float64[]"}, /* eager: "loop variable 0 changed from float32[] to .." */
        {TJ_ERR_DTYPE, "float64[]"}, /* traced: "body region result 0 is float64[], .." */
        {TJ_ERR_DTYPE, "a row of float32[3,2] cannot be float64[2]"},
        {TJ_ERR_DTYPE, "for_range: start must be a numeric scalar, got string[]"},
        {TJ_ERR_DTYPE, "float64"},
        {TJ_ERR_SHAPE, "float32[1]"},
        {TJ_ERR_SHAPE, "a row of float32[3,2] cannot be float32[3]"},
    };
    tj_tensor *x = tj_scalar_f32(1);
    for (which = 0; which < (int)(sizeof want / sizeof want[0]); which++) {
        for (int traced = 0; traced < 2; traced++) {
            tj_function *f = tj_function_new("op_under_test", (void *)op_under_test, 1, NULL);
            tj_tensor *r = traced ? tj_call(f, 1, &x) : tj_call_eager(f, 1, &x);
            CHECK_MSG(tj_status_of(r) == want[which].code, "case %d traced %d: %s (%s)", which,
                      traced, tj_status_name(tj_status_of(r)), tj_error_message(r));
            CHECK_HAS(tj_error_message(r), want[which].msg);
            tj_function_free(f);
        }
    }
    void *traced_only[2] = {(void *)cond_dtypes, (void *)switch_dtypes};
    for (int k = 0; k < 2; k++) {
        tj_function *f = tj_function_new("branches", traced_only[k], 1, NULL);
        tj_tensor *r = tj_call(f, 1, &x);
        CHECK_MSG(tj_status_of(r) == TJ_ERR_DTYPE, "%s: %s", tj_status_name(tj_status_of(r)),
                  tj_error_message(r));
        CHECK_HAS(tj_error_message(r), "float64[]");
        tj_function_free(f);
    }

    /* an optimizer given a gradient of another dtype; a checkpoint of another dtype */
    int64_t d[1] = {2};
    tj_tensor *z64 = tj_zeros(TJ_F64, 1, d), *z32 = tj_zeros(TJ_F32, 1, d),
              *z3 = tj_zeros(TJ_F64, 1, (int64_t[]){3});
    tj_variable *v = tj_variable_new(z64, "v"), *v32 = tj_variable_new(z32, "v"),
                *v3 = tj_variable_new(z3, "v");
    tj_optimizer *o = tj_sgd_new(0.1, 0, 0);
    CHECK_EQ_INT(tj_optimizer_apply(o, 1, &v, &z32), TJ_ERR_DTYPE);
    CHECK_HAS(tj_last_error(), "gradient 0 is float32[2], variable 'v' is float64[2]");
    CHECK_EQ_INT(tj_optimizer_apply(o, 1, &v, &z3), TJ_ERR_SHAPE);
    char path[64];
    snprintf(path, sizeof path, "/tmp/tj-codes-%d.ckpt", (int)getpid());
    CHECK_EQ_INT(tj_checkpoint_save(path, 1, &v), TJ_OK);
    CHECK_EQ_INT(tj_checkpoint_restore(path, 1, &v32, 0), TJ_ERR_DTYPE);
    CHECK_HAS(tj_last_error(), "variable 'v' is float32[2] but");
    CHECK_EQ_INT(tj_checkpoint_restore(path, 1, &v3, 0), TJ_ERR_SHAPE);
    unlink(path);
    tj_optimizer_free(o);
    tj_variable_free(v);
    tj_variable_free(v32);
    tj_variable_free(v3);
}

/* NULL and "" both give a name (distinct), so a checkpoint of them saves and restores. */
static void unnamed_variables(void) {
    tj_tensor *a = tj_scalar_f32(1), *b = tj_scalar_f32(2);
    tj_variable *vs[2] = {tj_variable_new(a, NULL), tj_variable_new(b, "")};
    const char *n0 = tj_variable_name(vs[0]), *n1 = tj_variable_name(vs[1]);
    CHECK(n0 && !strncmp(n0, "Variable_", 9));
    CHECK(n1 && !strncmp(n1, "Variable_", 9));
    CHECK(n0 && n1 && strcmp(n0, n1) != 0);
    char path[64];
    snprintf(path, sizeof path, "/tmp/tj-unnamed-%d.ckpt", (int)getpid());
    CHECK_MSG(tj_checkpoint_save(path, 2, vs) == TJ_OK, "%s", tj_last_error());
    (void)(tj_assign(vs[0], tj_scalar_f32(5)));
    CHECK_MSG(tj_checkpoint_restore(path, 2, vs, 0) == TJ_OK, "%s", tj_last_error());
    tj_tensor *r = tj_variable_read(vs[0]);
    CHECK_NEAR(tj_tensor_get_f64(r, 0), 1, 0);
    unlink(path);
    tj_variable_free(vs[0]);
    tj_variable_free(vs[1]);
}

/* A void callback whose op fails: the call goes on, and TJ_LOG=misuse names the error. */
static char logged[1024];
static void sink(const char *topic, const char *msg, void *user) {
    (void)user;
    if (!strcmp(topic, "misuse") && !logged[0])
        snprintf(logged, sizeof logged, "%s", msg);
}
static void bad_callback(void *user, tj_tensor *x) {
    (void)user;
    tj_matmul(x, x); /* a scalar: matmul refuses; the callback's scope releases the result */
}
static void reported_callback(void *user, tj_tensor *x) {
    (void)user;
    tj_callback_fail(TJ_ERR_RUNTIME, "%s", tj_error_message(tj_matmul(x, x)));
}
static tj_tensor *with_callback(tj_tensor *x) {
    tj_host_callback((void *)bad_callback, NULL, 1, &x);
    return tj_add(x, x);
}
static tj_tensor *with_reported(tj_tensor *x) {
    tj_status st = tj_host_callback((void *)reported_callback, NULL, 1, &x);
    if (st) /* eager: the status comes back here (compiled: the call fails) */
        return tj_error_new(st, "%s", tj_last_error());
    return tj_add(x, x);
}
static void callback_errors(void) {
    const char *got = logged;
    tj_set_log(sink, NULL);
    tj_set_log_topics("misuse");
    tj_tensor *x = tj_scalar_f32(2);
    for (int traced = 0; traced < 2; traced++) {
        logged[0] = 0;
        tj_function *f = tj_function_new("with_callback", (void *)with_callback, 1, NULL);
        tj_tensor *r = traced ? tj_call(f, 1, &x) : tj_call_eager(f, 1, &x);
        CHECK_MSG(tj_status_of(r) == TJ_OK, "%s", tj_error_message(r)); /* the call goes on */
        CHECK_HAS(got, "host_callback: an op in the callback failed");
        CHECK_HAS(got, "matmul");
        tj_function_free(f);
        /* reported with tj_callback_fail: the call fails, nothing more is logged */
        logged[0] = 0;
        f = tj_function_new("with_reported", (void *)with_reported, 1, NULL);
        r = traced ? tj_call(f, 1, &x) : tj_call_eager(f, 1, &x);
        CHECK_EQ_INT(tj_status_of(r), TJ_ERR_RUNTIME);
        CHECK_HAS(tj_error_message(r), "host_callback: matmul");
        CHECK_STR(got, "");
        tj_function_free(f);
    }
    tj_set_log_topics("");
    tj_set_log(NULL, NULL);
}

int main(void) {
    tj_scope_begin(); /* the host scalars made inline */
    codes();
    unnamed_variables();
    callback_errors();
    tj_scope_end();
    return check_done();
}
