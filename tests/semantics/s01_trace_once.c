/* s01_trace_once.c — SEMANTICS S1: the first call with a new signature runs the user's C code
 * once with symbolic tensors (host code runs then, and only then), later calls with the same
 * signature run the compiled code without touching the C function. */
#include <tracejit.h>

#include "check.h"

static int n_host_runs;      /* how often the C body ran */
static int saw_symbolic = 1; /* every run saw symbolic tensors */

static tj_tensor *poly(tj_tensor *x) {
    n_host_runs++;
    saw_symbolic &= tj_tensor_is_symbolic(x);
    /* 3x^2 + 1 */
    return tj_add(tj_mul(tj_scalar_f32(3.0f), tj_mul(x, x)), tj_scalar_f32(1.0f));
}

int main(void) {
    tj_scope_begin();
    tj_function *f = tj_function_new("poly", (void *)poly, 1, NULL);
    CHECK(f != NULL);
    CHECK_STR(tj_function_name(f), "poly");
    CHECK_EQ_INT(tj_function_trace_count(f), 0);
    CHECK_EQ_INT(tj_function_n_concrete(f), 0);

    float xs[4] = {0.0f, 1.0f, -2.0f, 0.5f};
    for (int i = 0; i < 4; i++) {
        tj_tensor *r = tj_call(f, 1, (tj_tensor *[]){tj_scalar_f32(xs[i])});
        CHECK_EQ_INT(tj_status_of(r), TJ_OK);
        CHECK_EQ_INT(tj_tensor_dtype(r), TJ_F32);
        CHECK_EQ_INT(tj_tensor_rank(r), 0);
        CHECK(!tj_tensor_is_symbolic(r));
        CHECK_NEAR(tj_tensor_get_f64(r, 0), 3.0 * xs[i] * xs[i] + 1.0, 1e-6);
        /* host code ran on the first call only */
        CHECK_EQ_INT(n_host_runs, 1);
        CHECK_EQ_INT(tj_function_trace_count(f), 1);
        CHECK_EQ_INT(tj_function_n_concrete(f), 1);
    }
    CHECK(saw_symbolic);

    /* a vector is a new signature: one more run of the C code, then none */
    int64_t d[1] = {3};
    for (int k = 0; k < 3; k++) {
        float v[3] = {1.0f, 2.0f, (float)k};
        tj_tensor *r = tj_call(f, 1, (tj_tensor *[]){tj_tensor_from_data(TJ_F32, 1, d, v)});
        CHECK_EQ_INT(tj_status_of(r), TJ_OK);
        CHECK_EQ_INT(tj_tensor_numel(r), 3);
        CHECK_NEAR(tj_tensor_get_f64(r, 0), 4.0, 1e-6);
        CHECK_NEAR(tj_tensor_get_f64(r, 1), 13.0, 1e-6);
        CHECK_NEAR(tj_tensor_get_f64(r, 2), 3.0 * k * k + 1.0, 1e-6);
    }
    CHECK_EQ_INT(n_host_runs, 2);
    CHECK_EQ_INT(tj_function_trace_count(f), 2);
    CHECK_EQ_INT(tj_function_n_concrete(f), 2);

    /* the scalar trace is still there */
    tj_tensor *r = tj_call(f, 1, (tj_tensor *[]){tj_scalar_f32(2.0f)});
    CHECK_NEAR(tj_tensor_get_f64(r, 0), 13.0, 1e-6);
    CHECK_EQ_INT(n_host_runs, 2);

    tj_function_free(f);
    tj_scope_end();
    return check_done();
}
