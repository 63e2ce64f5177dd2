/* S26: check numerics (tf.debugging.enable_check_numerics). Off, NaN and infinity flow through
 * as values. On, the first op that produces one is an error naming it: eagerly the op itself; in
 * a compiled function the op inside the fused kernel (found by re-running the kernel's ops one
 * by one), the kernel, the function and its signature; in the interpreter the node. */
#include <math.h>

#include "check.h"
#include <tracejit.h>

static tj_tensor *f_fused(tj_tensor *x) {
    /* one fused kernel: mul, log, add, tanh; only log can make a NaN here */
    return tj_tanh(tj_add(tj_log(tj_mul(x, tj_scalar_f32(2))), tj_scalar_f32(1)));
}

static tj_tensor *f_div(tj_tensor *x, tj_tensor *y) {
    return tj_sum(tj_div(x, y), 0, NULL, 0);
}

static tj_tensor *vec(const float *v, int64_t n) {
    return tj_tensor_from_data(TJ_F32, 1, &n, v);
}

int main(void) {
    const float good[4] = {1, 2, 3, 4}, bad[4] = {1, 2, -3, 4}, zero[4] = {1, 1, 0, 1};
    tj_tensor *xg = vec(good, 4), *xb = vec(bad, 4), *z = vec(zero, 4);
    tj_function *f = tj_function_new("f_fused", (void *)f_fused, 1, NULL);
    tj_function *d = tj_function_new("f_div", (void *)f_div, 2, NULL);

    /* off: values */
    tj_tensor *r = tj_call(f, 1, &xb);
    CHECK_EQ_INT(tj_status_of(r), TJ_OK);
    CHECK(isnan(tj_tensor_get_f64(r, 2)));
    tj_release(r);

    tj_enable_check_numerics();
    /* eagerly: the op */
    r = tj_log(xb);
    CHECK_EQ_INT(tj_status_of(r), TJ_ERR_RUNTIME);
    CHECK_HAS(tj_error_message(r),
              "check_numerics: op 'log' (f32[4]) produced NaN at element 2 eagerly");
    tj_release(r);
    r = tj_div(xg, z);
    CHECK_HAS(tj_error_message(r), "op 'div' (f32[4]) produced Inf at element 2");
    tj_release(r);
    r = tj_call_eager(f, 1, &xb);
    CHECK_HAS(tj_error_message(r), "op 'log' (f32[4]) produced NaN at element 2 eagerly");
    tj_release(r);

    /* compiled: the op inside the fused kernel, the kernel, the function and the signature
     * (the native tier: tiered functions run their first calls on the interpreter, which names
     * the op and the function too) */
    r = tj_call(f, 1, &xg);
    CHECK_EQ_INT(tj_status_of(r), TJ_OK);
    tj_release(r);
    CHECK_EQ_INT(tj_function_wait_compiled(f), TJ_OK);
    r = tj_call(f, 1, &xb);
    CHECK_EQ_INT(tj_status_of(r), TJ_ERR_RUNTIME);
    const char *m = tj_error_message(r);
    CHECK_HAS(m, "check_numerics: op %");
    if (!tj_backend_unavailable("cpu")) { /* compiled (a build without LLVM interprets) */
        CHECK_HAS(m, " 'log' (f32[4]) produced NaN at element 2 (kernel '");
        CHECK_HAS(m, "tanh"); /* the kernel's label lists its ops */
    }
    CHECK_HAS(m, "in function 'f_fused' called with (TensorSpec(shape=(4,), dtype=float32))");
    tj_release(r);
    tj_tensor *args[2] = {xg, z};
    r = tj_call(d, 2, args);
    CHECK_HAS(tj_error_message(r), "'div' (f32[4]) produced Inf at element 2");
    CHECK_HAS(tj_error_message(r), "in function 'f_div' called with (TensorSpec(shape=(4,), "
                                   "dtype=float32), TensorSpec(shape=(4,), dtype=float32))");
    tj_release(r);

    /* the interpreter backend: the node */
    tj_function_options o = {.backend = "interp"};
    tj_function *fi = tj_function_new("f_interp", (void *)f_fused, 1, &o);
    r = tj_call(fi, 1, &xb);
    CHECK_HAS(tj_error_message(r), "'log' (f32[4]) produced NaN at element 2 (interpreter)");
    CHECK_HAS(tj_error_message(r), "in function 'f_interp'");
    tj_release(r);

    /* off again: values */
    tj_disable_check_numerics();
    r = tj_call(f, 1, &xb);
    CHECK_EQ_INT(tj_status_of(r), TJ_OK);
    tj_release(r);
    r = tj_log(xb);
    CHECK_EQ_INT(tj_status_of(r), TJ_OK);
    tj_release(r);

    tj_function_free(f);
    tj_function_free(d);
    tj_function_free(fi);
    tj_release(xg);
    tj_release(xb);
    tj_release(z);
    return check_done();
}
