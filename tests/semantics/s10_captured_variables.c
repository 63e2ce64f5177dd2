/* s10_captured_variables.c — SEMANTICS S10: a variable created outside a function and used
 * inside it is an implicit input; assign/assign_add inside the compiled function change it for
 * everyone: g() doing a = a + 1 and returning a returns 1, 2, 3. */
#include <tracejit.h>

#include "check.h"

static tj_variable *a, *w;
static int n_traces;

static tj_tensor *g(void) {
    n_traces++;
    return tj_assign(a, tj_add(tj_variable_read(a), tj_scalar_i32(1))); /* a = a + 1 */
}

static tj_tensor *inc(void) {
    return tj_assign_add(a, tj_scalar_i32(1));
}

/* y = x * w; w -= 0.5 * x (a read-modify-write of a float vector) */
static tj_tensor *step(tj_tensor *x) {
    n_traces++;
    tj_tensor *y = tj_mul(x, tj_variable_read(w));
    tj_assign_sub(w, tj_mul(tj_scalar_f32(0.5f), x));
    return y;
}

int main(void) {
    tj_scope_begin();
    a = tj_variable_new(tj_scalar_i32(0), "a");
    CHECK(a != NULL);
    CHECK_STR(tj_variable_name(a), "a");
    tj_function *fg = tj_function_new("g", (void *)g, 0, NULL);
    for (int i = 1; i <= 3; i++) {
        tj_tensor *r = tj_call(fg, 0, NULL);
        CHECK_EQ_INT(tj_status_of(r), TJ_OK);
        CHECK_EQ_INT(tj_tensor_dtype(r), TJ_I32);
        CHECK_EQ_INT(tj_tensor_get_f64(r, 0), i);
        /* visible outside the function */
        CHECK_EQ_INT(tj_tensor_get_f64(tj_variable_read(a), 0), i);
    }
    CHECK_EQ_INT(n_traces, 1);

    /* a change from outside is seen by the compiled function (no retrace) */
    tj_tensor *r = tj_assign(a, tj_scalar_i32(10));
    CHECK_EQ_INT(tj_tensor_get_f64(r, 0), 10);
    r = tj_call(fg, 0, NULL);
    CHECK_EQ_INT(tj_tensor_get_f64(r, 0), 11);
    CHECK_EQ_INT(n_traces, 1);

    /* a second function sharing the variable sees and makes the same updates */
    tj_function *fi = tj_function_new("inc", (void *)inc, 0, NULL);
    r = tj_call(fi, 0, NULL);
    CHECK_EQ_INT(tj_tensor_get_f64(r, 0), 12);
    r = tj_call(fg, 0, NULL);
    CHECK_EQ_INT(tj_tensor_get_f64(r, 0), 13);

    /* the functions keep the variable alive after the caller frees it */
    tj_variable_free(a);
    r = tj_call(fi, 0, NULL);
    CHECK_EQ_INT(tj_status_of(r), TJ_OK);
    CHECK_EQ_INT(tj_tensor_get_f64(r, 0), 14);
    r = tj_call(fg, 0, NULL);
    CHECK_EQ_INT(tj_tensor_get_f64(r, 0), 15);
    tj_function_free(fg);
    tj_function_free(fi);
    a = NULL;

    /* float vector state */
    n_traces = 0;
    int64_t d3[1] = {3};
    w = tj_variable_new(tj_tensor_from_data(TJ_F32, 1, d3, (float[]){1, 2, 3}), "w");
    tj_function *fs = tj_function_new("step", (void *)step, 1, NULL);
    tj_tensor *x = tj_tensor_from_data(TJ_F32, 1, d3, (float[]){2, 2, 2});
    r = tj_call(fs, 1, &x);
    CHECK_NEAR(tj_tensor_get_f64(r, 2), 6.0, 0); /* x * old w */
    r = tj_call(fs, 1, &x);
    CHECK_NEAR(tj_tensor_get_f64(r, 0), 0.0, 0); /* w was 1 - 1 = 0 */
    CHECK_NEAR(tj_tensor_get_f64(r, 2), 4.0, 0);
    tj_tensor *wv = tj_variable_read(w);
    CHECK_NEAR(tj_tensor_get_f64(wv, 0), -1.0, 0);
    CHECK_NEAR(tj_tensor_get_f64(wv, 1), 0.0, 0);
    CHECK_NEAR(tj_tensor_get_f64(wv, 2), 1.0, 0);
    CHECK_EQ_INT(n_traces, 1);

    /* assigning a value of another shape is an error, and the variable keeps its value */
    int64_t d2[1] = {2};
    r = tj_assign(w, tj_tensor_from_data(TJ_F32, 1, d2, (float[]){1, 2}));
    CHECK(tj_status_of(r) != TJ_OK);
    CHECK_HAS(tj_error_message(r), "w");
    CHECK_NEAR(tj_tensor_get_f64(tj_variable_read(w), 0), -1.0, 0);
    tj_function_free(fs);
    tj_variable_free(w);

    CHECK_EQ_INT(tj_status_of(tj_variable_read(NULL)), TJ_ERR_INVALID);
    CHECK(tj_variable_new(NULL, "x") == NULL);
    tj_scope_end();
    return check_done();
}
