/* s03_new_dtype_shape.c — SEMANTICS S3: a new dtype or shape is a new trace. double(int32 1)
 * traces and returns 2, double(int32 2) reuses it (4), double(float32 1.1) traces again (2.2), a
 * string "a" traces again ("aa"). Each trace is a separate concrete function of one tj_function. */
#include <tracejit.h>

#include "check.h"

static int n_runs;
static tj_dtype traced_dtype[8];

static tj_tensor *dbl(tj_tensor *a) {
    if (n_runs < 8)
        traced_dtype[n_runs] = tj_tensor_dtype(a);
    n_runs++;
    return tj_add(a, a);
}

static const char *str0(const tj_tensor *t) {
    const tj_string *s = tj_tensor_data(t);
    return s ? s->data : NULL;
}

int main(void) {
    tj_scope_begin();
    tj_function *f = tj_function_new("double", (void *)dbl, 1,
                                     &(tj_function_options){.arg_names = (const char *[]){"a"}});

    tj_tensor *r = tj_call(f, 1, (tj_tensor *[]){tj_scalar_i32(1)});
    CHECK_EQ_INT(tj_tensor_dtype(r), TJ_I32);
    CHECK_EQ_INT(tj_tensor_get_f64(r, 0), 2);
    CHECK_EQ_INT(tj_function_trace_count(f), 1);

    r = tj_call(f, 1, (tj_tensor *[]){tj_scalar_i32(2)});
    CHECK_EQ_INT(tj_tensor_get_f64(r, 0), 4);
    CHECK_EQ_INT(tj_function_trace_count(f), 1);

    r = tj_call(f, 1, (tj_tensor *[]){tj_scalar_f32(1.1f)});
    CHECK_EQ_INT(tj_tensor_dtype(r), TJ_F32);
    CHECK_NEAR(tj_tensor_get_f64(r, 0), 2.2, 1e-6);
    CHECK_EQ_INT(tj_function_trace_count(f), 2);

    r = tj_call(f, 1, (tj_tensor *[]){tj_scalar_str("a")});
    CHECK_EQ_INT(tj_status_of(r), TJ_OK);
    CHECK_EQ_INT(tj_tensor_dtype(r), TJ_STRING);
    CHECK_STR(str0(r), "aa");
    char *vs = tj_tensor_values_str(r);
    CHECK_STR(vs, "aa");
    free(vs);
    CHECK_EQ_INT(tj_function_trace_count(f), 3);

    /* each reuses its own trace */
    r = tj_call(f, 1, (tj_tensor *[]){tj_scalar_str("xyz")});
    CHECK_STR(str0(r), "xyzxyz");
    r = tj_call(f, 1, (tj_tensor *[]){tj_scalar_f32(-0.25f)});
    CHECK_NEAR(tj_tensor_get_f64(r, 0), -0.5, 0);
    r = tj_call(f, 1, (tj_tensor *[]){tj_scalar_i32(-21)});
    CHECK_EQ_INT(tj_tensor_get_f64(r, 0), -42);
    CHECK_EQ_INT(tj_function_trace_count(f), 3);
    CHECK_EQ_INT(n_runs, 3);
    CHECK_EQ_INT(traced_dtype[0], TJ_I32);
    CHECK_EQ_INT(traced_dtype[1], TJ_F32);
    CHECK_EQ_INT(traced_dtype[2], TJ_STRING);

    /* int64 and float64 are new dtypes; rank 1 and rank 2 are new shapes */
    r = tj_call(f, 1, (tj_tensor *[]){tj_scalar_i64(1LL << 40)});
    CHECK_EQ_INT(tj_tensor_dtype(r), TJ_I64);
    CHECK_NEAR(tj_tensor_get_f64(r, 0), (double)(1LL << 41), 0);
    r = tj_call(f, 1, (tj_tensor *[]){tj_scalar_f64(0.1)});
    CHECK_NEAR(tj_tensor_get_f64(r, 0), 0.2, 1e-15);
    int64_t d1[1] = {2}, d2[2] = {1, 2}, d1b[1] = {3};
    r = tj_call(f, 1, (tj_tensor *[]){tj_tensor_from_data(TJ_I32, 1, d1, (int32_t[]){1, 2})});
    CHECK_EQ_INT(tj_tensor_get_f64(r, 1), 4);
    r = tj_call(f, 1, (tj_tensor *[]){tj_tensor_from_data(TJ_I32, 2, d2, (int32_t[]){1, 2})});
    CHECK_EQ_INT(tj_tensor_rank(r), 2);
    r = tj_call(f, 1, (tj_tensor *[]){tj_tensor_from_data(TJ_I32, 1, d1b, (int32_t[]){1, 2, 3})});
    CHECK_EQ_INT(tj_tensor_get_f64(r, 2), 6);
    CHECK_EQ_INT(tj_function_trace_count(f), 8);
    CHECK_EQ_INT(tj_function_n_concrete(f), 8);

    /* the concrete functions are distinct objects; asking for an existing spec does not trace */
    tj_concrete *ci = tj_function_get_concrete(f, 1, (tj_spec[]){{.dtype = TJ_I32}});
    tj_concrete *cf = tj_function_get_concrete(f, 1, (tj_spec[]){{.dtype = TJ_F32}});
    tj_concrete *cs = tj_function_get_concrete(f, 1, (tj_spec[]){{.dtype = TJ_STRING}});
    CHECK(ci && cf && cs && ci != cf && cf != cs && ci != cs);
    CHECK_EQ_INT(tj_function_trace_count(f), 8);
    r = tj_concrete_call(ci, 1, (tj_tensor *[]){tj_scalar_i32(5)});
    CHECK_EQ_INT(tj_tensor_get_f64(r, 0), 10);
    r = tj_concrete_call(cs, 1, (tj_tensor *[]){tj_scalar_str("b")});
    CHECK_STR(str0(r), "bb");

    tj_function_free(f);
    tj_scope_end();
    return check_done();
}
