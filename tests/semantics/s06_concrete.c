/* s06_concrete.c — SEMANTICS S6: tj_function_get_concrete traces for a spec without running;
 * calling a concrete function with an incompatible input fails naming the function, the input
 * index and the expected and actual dtype/shape; a static argument fixed at trace time stays
 * fixed (another value is an error, not a retrace). */
#include <tracejit.h>

#include "check.h"

static int n_runs, n_printed;
static void sink(const char *line, void *user) {
    (void)line;
    (void)user;
    n_printed++;
}

static tj_tensor *dbl(tj_tensor *a) {
    n_runs++;
    tj_print("running", 1, &a);
    return tj_add(a, a);
}

static tj_tensor *scale(tj_tensor *x, tj_tensor *k) {
    n_runs++;
    return tj_mul(x, k);
}

static const char *str0(const tj_tensor *t) {
    const tj_string *s = tj_tensor_data(t);
    return s ? s->data : NULL;
}

int main(void) {
    tj_scope_begin();
    tj_set_print_sink(sink, NULL);
    tj_function *f = tj_function_new("double", (void *)dbl, 1, NULL);

    /* obtaining a concrete trace runs the C code once, but executes nothing */
    tj_concrete *ds = tj_function_get_concrete(f, 1, (tj_spec[]){{.dtype = TJ_STRING}});
    CHECK(ds != NULL);
    CHECK_EQ_INT(n_runs, 1);
    CHECK_EQ_INT(n_printed, 0);
    CHECK_EQ_INT(tj_function_trace_count(f), 1);
    CHECK(tj_concrete_node_count(ds) > 0);

    tj_tensor *r = tj_concrete_call(ds, 1, (tj_tensor *[]){tj_scalar_str("a")});
    CHECK_STR(str0(r), "aa");
    r = tj_concrete_call(ds, 1, (tj_tensor *[]){tj_scalar_str("b")});
    CHECK_STR(str0(r), "bb");
    CHECK_EQ_INT(n_runs, 1);
    CHECK_EQ_INT(n_printed, 2);

    /* wrong dtype: "input #0 was expected to be a string tensor but is a int32 tensor" */
    r = tj_concrete_call(ds, 1, (tj_tensor *[]){tj_scalar_i32(1)});
    CHECK_EQ_INT(tj_status_of(r), TJ_ERR_SIGNATURE);
    const char *m = tj_error_message(r);
    CHECK_HAS(m, "double");
    CHECK_HAS(m, "input #0");
    CHECK_HAS(m, "expected to be a string tensor but is a int32 tensor");
    CHECK_EQ_INT(tj_function_trace_count(f), 1);

    /* a tj_call with the same signature finds the concrete function made from the spec */
    r = tj_call(f, 1, (tj_tensor *[]){tj_scalar_str("c")});
    CHECK_STR(str0(r), "cc");
    CHECK_EQ_INT(tj_function_trace_count(f), 1);

    /* unknown dimensions: one concrete function for every matching shape */
    tj_concrete *dm =
        tj_function_get_concrete(f, 1, (tj_spec[]){{.dtype = TJ_F32, .rank = 2, .dims = {-1, 3}}});
    CHECK(dm != NULL);
    CHECK_EQ_INT(tj_function_trace_count(f), 2);
    int64_t d23[2] = {2, 3}, d43[2] = {4, 3}, d24[2] = {2, 4}, d6[1] = {6};
    float v12[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    r = tj_concrete_call(dm, 1, (tj_tensor *[]){tj_tensor_from_data(TJ_F32, 2, d23, v12)});
    CHECK_EQ_INT(tj_status_of(r), TJ_OK);
    CHECK_EQ_INT(tj_tensor_dims(r)[0], 2);
    CHECK_NEAR(tj_tensor_get_f64(r, 5), 12.0, 0);
    r = tj_concrete_call(dm, 1, (tj_tensor *[]){tj_tensor_from_data(TJ_F32, 2, d43, v12)});
    CHECK_EQ_INT(tj_status_of(r), TJ_OK);
    CHECK_EQ_INT(tj_tensor_dims(r)[0], 4);
    CHECK_NEAR(tj_tensor_get_f64(r, 11), 24.0, 0);
    r = tj_concrete_call(dm, 1, (tj_tensor *[]){tj_tensor_from_data(TJ_F32, 2, d24, v12)});
    CHECK_EQ_INT(tj_status_of(r), TJ_ERR_SIGNATURE);
    m = tj_error_message(r);
    CHECK_HAS(m, "double");
    CHECK_HAS(m, "input #0");
    CHECK_HAS(m, "(None, 3)");
    CHECK_HAS(m, "[2,4]");
    r = tj_concrete_call(dm, 1, (tj_tensor *[]){tj_tensor_from_data(TJ_F32, 1, d6, v12)});
    CHECK_EQ_INT(tj_status_of(r), TJ_ERR_SIGNATURE);
    CHECK_HAS(tj_error_message(r), "[6]");
    CHECK_EQ_INT(tj_function_trace_count(f), 2);
    tj_function_free(f);

    /* a static argument is fixed at trace time */
    n_runs = 0;
    tj_function *s = tj_function_new("scale", (void *)scale, 2, NULL);
    tj_concrete *c3 = tj_function_get_concrete(
        s, 2, (tj_spec[]){{.dtype = TJ_F64}, {.static_value = tj_static_f64(3.0)}});
    CHECK(c3 != NULL);
    CHECK_EQ_INT(n_runs, 1);
    r = tj_concrete_call(c3, 2, (tj_tensor *[]){tj_scalar_f64(2.0), tj_static_f64(3.0)});
    CHECK_EQ_INT(tj_status_of(r), TJ_OK);
    CHECK_NEAR(tj_tensor_get_f64(r, 0), 6.0, 0);
    r = tj_concrete_call(c3, 2, (tj_tensor *[]){tj_scalar_f64(2.0), tj_static_f64(4.0)});
    CHECK_EQ_INT(tj_status_of(r), TJ_ERR_SIGNATURE);
    m = tj_error_message(r);
    CHECK_HAS(m, "scale");
    CHECK_HAS(m, "input #1");
    CHECK_HAS(m, "static");
    CHECK_HAS(m, "3");
    CHECK_HAS(m, "4");
    /* a tensor where the static was fixed is an error too */
    r = tj_concrete_call(c3, 2, (tj_tensor *[]){tj_scalar_f64(2.0), tj_scalar_f64(3.0)});
    CHECK_EQ_INT(tj_status_of(r), TJ_ERR_SIGNATURE);
    CHECK_HAS(tj_error_message(r), "input #1");
    CHECK_EQ_INT(n_runs, 1);
    CHECK_EQ_INT(tj_function_trace_count(s), 1);
    /* tj_call with the other value retraces (that is the function, not the concrete one) */
    r = tj_call(s, 2, (tj_tensor *[]){tj_scalar_f64(2.0), tj_static_f64(4.0)});
    CHECK_NEAR(tj_tensor_get_f64(r, 0), 8.0, 0);
    CHECK_EQ_INT(tj_function_trace_count(s), 2);
    /* bad specs are errors */
    CHECK(tj_function_get_concrete(s, 1, (tj_spec[]){{.dtype = TJ_F64}}) == NULL);
    CHECK(tj_last_error()[0] != 0);
    CHECK(tj_function_get_concrete(
              s, 2, (tj_spec[]){{.dtype = TJ_F64, .rank = 9}, {.dtype = TJ_F64}}) == NULL);
    CHECK_HAS(tj_last_error(), "rank");
    CHECK(tj_function_get_concrete(NULL, 0, NULL) == NULL);
    tj_function_free(s);

    tj_set_print_sink(NULL, NULL);
    tj_scope_end();
    return check_done();
}
