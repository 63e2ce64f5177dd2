/* test_jit_closure.c — tj_jit_compile: closures with the user function's own C signature, of
 * arity 0, 1, 3 and 16, give the same results as tj_call on the same function and trace once
 * per signature; tj_jit_function returns the tj_function behind the closure. */
#include <tracejit.h>

#include "check.h"

static int n0;
static tj_tensor *f0(void) {
    n0++;
    int64_t d[2] = {2, 2};
    return tj_eye(TJ_F32, d[0], d[1]);
}

static tj_tensor *f1(tj_tensor *x) {
    return tj_mul(x, x);
}

static tj_tensor *f3(tj_tensor *x, tj_tensor *w, tj_tensor *b) {
    return tj_relu(tj_add(tj_matmul(x, w), b));
}

/* sum of (i+1) * a_i over 16 arguments */
static tj_tensor *f16(tj_tensor *a0, tj_tensor *a1, tj_tensor *a2, tj_tensor *a3, tj_tensor *a4,
                      tj_tensor *a5, tj_tensor *a6, tj_tensor *a7, tj_tensor *a8, tj_tensor *a9,
                      tj_tensor *a10, tj_tensor *a11, tj_tensor *a12, tj_tensor *a13,
                      tj_tensor *a14, tj_tensor *a15) {
    tj_tensor *a[16] = {a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15};
    tj_tensor *acc = tj_mul(a[0], tj_scalar_f64(1));
    for (int i = 1; i < 16; i++)
        acc = tj_add(acc, tj_mul(a[i], tj_scalar_f64(i + 1)));
    return acc;
}

typedef tj_tensor *(*fn0)(void);
typedef tj_tensor *(*fn1)(tj_tensor *);
typedef tj_tensor *(*fn3)(tj_tensor *, tj_tensor *, tj_tensor *);
typedef tj_tensor *(*fn16)(tj_tensor *, tj_tensor *, tj_tensor *, tj_tensor *, tj_tensor *,
                           tj_tensor *, tj_tensor *, tj_tensor *, tj_tensor *, tj_tensor *,
                           tj_tensor *, tj_tensor *, tj_tensor *, tj_tensor *, tj_tensor *,
                           tj_tensor *);

static int same(tj_tensor *a, tj_tensor *b) {
    if (tj_status_of(a) || tj_status_of(b) || tj_tensor_dtype(a) != tj_tensor_dtype(b) ||
        tj_tensor_numel(a) != tj_tensor_numel(b) || tj_tensor_rank(a) != tj_tensor_rank(b))
        return 0;
    for (int64_t i = 0; i < tj_tensor_numel(a); i++)
        if (tj_tensor_get_f64(a, i) != tj_tensor_get_f64(b, i))
            return 0;
    return 1;
}

int main(void) {
    tj_scope_begin();

    /* arity 0 */
    fn0 c0 = (fn0)tj_jit_compile((void *)f0, 0, NULL);
    CHECK(c0 != NULL);
    tj_function *h0 = tj_jit_function((void *)c0);
    CHECK(h0 != NULL);
    tj_tensor *r = c0();
    CHECK_EQ_INT(tj_tensor_rank(r), 2);
    CHECK_NEAR(tj_tensor_get_f64(r, 0), 1, 0);
    CHECK_NEAR(tj_tensor_get_f64(r, 1), 0, 0);
    CHECK_NEAR(tj_tensor_get_f64(r, 3), 1, 0);
    CHECK(same(r, c0()));
    CHECK(same(r, tj_call(h0, 0, NULL)));
    CHECK_EQ_INT(n0, 1);
    CHECK_EQ_INT(tj_function_trace_count(h0), 1);

    /* arity 1 */
    fn1 c1 = (fn1)tj_jit_compile((void *)f1, 1, NULL);
    tj_function *h1 = tj_jit_function((void *)c1);
    CHECK(h1 != NULL && h1 != h0);
    tj_function *ref1 = tj_function_new("f1", (void *)f1, 1, NULL);
    for (int i = -2; i <= 2; i++) {
        tj_tensor *x = tj_scalar_i64(i * 1000003LL);
        r = c1(x);
        CHECK_NEAR(tj_tensor_get_f64(r, 0), (double)(i * 1000003LL) * (i * 1000003LL), 0);
        CHECK(same(r, tj_call(ref1, 1, &x)));
        CHECK(same(r, tj_call(h1, 1, &x)));
    }
    CHECK_EQ_INT(tj_function_trace_count(h1), 1);
    int64_t d3[1] = {3};
    r = c1(tj_tensor_from_data(TJ_F32, 1, d3, (float[]){1.5f, -2, 3}));
    CHECK_NEAR(tj_tensor_get_f64(r, 0), 2.25, 0);
    CHECK_NEAR(tj_tensor_get_f64(r, 1), 4, 0);
    CHECK_EQ_INT(tj_function_trace_count(h1), 2);
    /* an error input gives an error result, not a crash */
    r = c1(NULL);
    CHECK_EQ_INT(tj_status_of(r), TJ_ERR_INVALID);
    tj_function_free(ref1);

    /* arity 3 */
    fn3 c3 = (fn3)tj_jit_compile((void *)f3, 3, NULL);
    tj_function *ref3 = tj_function_new("f3", (void *)f3, 3, NULL);
    int64_t d12[2] = {1, 2}, d22[2] = {2, 2}, d2[1] = {2};
    tj_tensor *x = tj_tensor_from_data(TJ_F32, 2, d12, (float[]){1, 2});
    tj_tensor *w = tj_tensor_from_data(TJ_F32, 2, d22, (float[]){1, -1, 2, -3});
    tj_tensor *b = tj_tensor_from_data(TJ_F32, 1, d2, (float[]){0.5f, 10});
    r = c3(x, w, b);
    /* [1,2] x [[1,-1],[2,-3]] = [5, -7]; + b = [5.5, 3]; relu */
    CHECK_EQ_INT(tj_tensor_rank(r), 2);
    CHECK_NEAR(tj_tensor_get_f64(r, 0), 5.5, 0);
    CHECK_NEAR(tj_tensor_get_f64(r, 1), 3.0, 0);
    CHECK(same(r, tj_call(ref3, 3, (tj_tensor *[]){x, w, b})));
    b = tj_tensor_from_data(TJ_F32, 1, d2, (float[]){-6, 0});
    r = c3(x, w, b);
    CHECK_NEAR(tj_tensor_get_f64(r, 0), 0.0, 0);
    CHECK_NEAR(tj_tensor_get_f64(r, 1), 0.0, 0);
    CHECK(same(r, tj_call(ref3, 3, (tj_tensor *[]){x, w, b})));
    CHECK_EQ_INT(tj_function_trace_count(tj_jit_function((void *)c3)), 1);
    r = c3(x, x, b); /* [1,2] x [1,2]: a shape error from the trace */
    CHECK_EQ_INT(tj_status_of(r), TJ_ERR_SHAPE);
    CHECK_HAS(tj_error_message(r), "matmul");
    tj_function_free(ref3);

    /* arity 16, with options passed through */
    fn16 c16 = (fn16)tj_jit_compile((void *)f16, 16, &(tj_function_options){.cache_bound = 1});
    CHECK(c16 != NULL);
    tj_function *ref16 = tj_function_new("f16", (void *)f16, 16, NULL);
    tj_tensor *a[16];
    double want = 0;
    for (int i = 0; i < 16; i++) {
        a[i] = tj_scalar_f64(0.5 * i);
        want += (i + 1) * 0.5 * i;
    }
    r = c16(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13],
            a[14], a[15]);
    CHECK_NEAR(tj_tensor_get_f64(r, 0), want, 1e-9);
    CHECK(same(r, tj_call(ref16, 16, a)));
    tj_function *h16 = tj_jit_function((void *)c16);
    CHECK(same(r, tj_call(h16, 16, a)));
    CHECK_EQ_INT(tj_function_trace_count(h16), 1);
    /* a float32 argument makes a new signature; the cache bound 1 keeps one */
    a[15] = tj_scalar_f32(1.0f);
    r = c16(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13],
            a[14], a[15]);
    CHECK_EQ_INT(tj_status_of(r), TJ_ERR_DTYPE); /* float64 + float32: no implicit promotion */
    a[15] = tj_scalar_f64(1.0);
    r = c16(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13],
            a[14], a[15]);
    CHECK_NEAR(tj_tensor_get_f64(r, 0), want - 16 * 7.5 + 16, 1e-9);
    CHECK_EQ_INT(tj_function_n_concrete(h16), 1);
    tj_function_free(ref16);

    /* the handle is not a closure: NULL */
    CHECK(tj_jit_function((void *)f1) == NULL);
    tj_jit_free((void *)c0);
    tj_jit_free((void *)c1);
    tj_jit_free((void *)c3);
    tj_jit_free((void *)c16);
    CHECK(tj_jit_function((void *)c1) == NULL);
    tj_scope_end();
    return check_done();
}
