/* tj_for_range over floats, as tf.range: ceil((limit - start) / delta) steps, the body getting
 * i = start + k·delta in the bounds' float type; eager, and traced with bounds known when traced
 * (constants). NaN, infinite, zero-step and too-long ranges are errors naming the bound; float
 * bounds known only at run time are refused by name (issue 23, item 3: 0.5..3.7 ran 3 times, a
 * step of 0.5 was "delta is 0", 1e30 ran once, NaN ran zero times). */
#include <math.h>
#include <tracejit.h>

#include "check.h"

/* carried: (sum of i, count, dtype probe) */
static tj_tensor *acc(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    tj_tensor *i = a[0];
    return tj_tuple(
        2, (tj_tensor *[]){tj_add(a[1], tj_cast(i, TJ_F64)), tj_add(a[2], tj_scalar_i64(1))});
}
static double g_b[3];
static int g_f64;
static tj_tensor *mk(double v) {
    return g_f64 ? tj_scalar_f64(v) : tj_scalar_f32((float)v);
}
static tj_tensor *loop(tj_tensor *dummy) {
    (void)dummy;
    tj_tensor *init[2] = {tj_scalar_f64(0), tj_scalar_i64(0)};
    return tj_for_range(mk(g_b[0]), mk(g_b[1]), mk(g_b[2]), acc, 2, init, NULL);
}
/* the index's dtype */
static tj_dtype seen;
static tj_tensor *probe(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    seen = tj_tensor_dtype(a[0]);
    return tj_retain(a[1]);
}
static tj_tensor *symbolic_limit(tj_tensor *lim) {
    return tj_for_range(tj_scalar_f32(0), lim, tj_scalar_f32(1), probe, 1,
                        (tj_tensor *[]){tj_scalar_f64(0)}, NULL);
}

static void run(double s, double l, double d, int f64, int want_steps, double want_sum,
                const char *want_error) {
    g_b[0] = s, g_b[1] = l, g_b[2] = d, g_f64 = f64;
    tj_tensor *x = tj_scalar_f32(0);
    for (int traced = 0; traced < 2; traced++) {
        tj_function *f = tj_function_new("float_range", (void *)loop, 1, NULL);
        tj_tensor *r = traced ? tj_call(f, 1, &x) : tj_call_eager(f, 1, &x);
        if (want_error) {
            CHECK_MSG(tj_status_of(r) != TJ_OK, "range(%g, %g, %g) traced %d ran", s, l, d, traced);
            CHECK_HAS(tj_error_message(r), want_error);
        } else {
            CHECK_MSG(tj_status_of(r) == TJ_OK, "%s", tj_error_message(r));
            CHECK_EQ_INT(tj_tensor_get_f64(tj_tuple_get(r, 1), 0), want_steps);
            CHECK_NEAR(tj_tensor_get_f64(tj_tuple_get(r, 0), 0), want_sum, 1e-9);
        }
        tj_function_free(f);
    }
}

int main(void) {
    tj_scope_begin();                                    /* the host scalars made inline */
    run(0.5, 3.7, 1, 0, 4, 0.5 + 1.5 + 2.5 + 3.5, NULL); /* tf.range: 4 elements */
    run(0, 2, 0.5, 0, 4, 0 + 0.5 + 1 + 1.5, NULL);
    run(3, 0, -0.5, 1, 6, 3 + 2.5 + 2 + 1.5 + 1 + 0.5, NULL);
    run(0, 0.1, 0.025, 1, 4, 0.15, NULL); /* (0.1 - 0) / 0.025 is 4 in float64: 4 steps */
    run(1, 0, 1, 0, 0, 0, NULL);          /* empty, not an error (as the int64 range) */
    run(0, 1e30, 1, 0, 0, 0, "for_range: range(0, 1e+30, 1) has 1e+30 steps, more than 2^53");
    run(0, NAN, 1, 0, 0, 0, "for_range: limit is nan");
    run(INFINITY, 1, 1, 1, 0, 0, "for_range: start is inf");
    run(0, 2, 0, 0, 0, 0, "for_range: delta is 0 (range(0, 2, 0))");

    /* the index takes the bounds' float type: float64 if one is, else float32 */
    tj_tensor *v0 = tj_scalar_f64(0);
    (void)(tj_for_range(tj_scalar_f32(0), tj_scalar_i64(2), tj_scalar_f32(1), probe, 1, &v0, NULL));
    CHECK_EQ_INT(seen, TJ_F32);
    (void)(tj_for_range(tj_scalar_i32(0), tj_scalar_f64(2), tj_scalar_i64(1), probe, 1, &v0, NULL));
    CHECK_EQ_INT(seen, TJ_F64);
    (void)(tj_for_range(tj_scalar_i32(0), tj_scalar_i32(2), tj_scalar_i64(1), probe, 1, &v0, NULL));
    CHECK_EQ_INT(seen, TJ_I64);

    /* a float bound computed when the function runs: refused by name, not truncated */
    tj_function *f = tj_function_new("symbolic_limit", (void *)symbolic_limit, 1, NULL);
    tj_tensor *lim = tj_scalar_f32(3.5f);
    tj_tensor *r = tj_call(f, 1, &lim);
    CHECK_EQ_INT(tj_status_of(r), TJ_ERR_UNSUPPORTED);
    CHECK_HAS(tj_error_message(r), "for_range: limit is a float32 computed when the function runs");
    r = tj_call_eager(f, 1, &lim); /* eager: the value is known */
    CHECK_MSG(tj_status_of(r) == TJ_OK, "%s", tj_error_message(r));
    tj_function_free(f);
    tj_scope_end();
    return check_done();
}
