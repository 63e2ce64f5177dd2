/* tj_call_into: results written into caller-provided tensors, for single results, tuples, eager
 * mode; mismatched outputs (shape, dtype, count, NULL) are errors naming the function and the
 * shapes; the caller's tensors are left untouched on error. */
#include <tracejit.h>

#include "check.h"

static tj_tensor *poly(tj_tensor *x) {
    return tj_sub(tj_mul(tj_add(tj_mul(x, tj_scalar_f32(2)), tj_scalar_f32(1)), x),
                  tj_scalar_f32(3));
}
static tj_tensor *two(tj_tensor *x) {
    return tj_tuple(2, (tj_tensor *[]){tj_neg(x), tj_sum(x, 0, NULL, 0)});
}

int main(void) {
    int64_t d[1] = {5};
    float xs[5] = {0, 1, 2, -1, 0.5f};
    tj_tensor *x = tj_tensor_from_data(TJ_F32, 1, d, xs);
    tj_tensor *y = tj_tensor_empty(TJ_F32, 1, d);
    tj_function *f = tj_function_new("poly", (void *)poly, 1, NULL);
    for (int rep = 0; rep < 3; rep++) {
        CHECK_EQ_INT(tj_call_into(f, 1, &x, 1, &y), TJ_OK);
        const float *p = tj_tensor_data(y);
        for (int i = 0; i < 5; i++)
            CHECK_NEAR(p[i], (xs[i] * 2 + 1) * xs[i] - 3, 1e-5);
    }
    CHECK_EQ_INT(tj_function_trace_count(f), 1);

    /* wrong output shape / dtype / count / NULL */
    int64_t d4[1] = {4};
    tj_tensor *bad = tj_tensor_empty(TJ_F32, 1, d4), *badt = tj_tensor_empty(TJ_I32, 1, d);
    CHECK_EQ_INT(tj_call_into(f, 1, &x, 1, &bad), TJ_ERR_SIGNATURE);
    CHECK_HAS(tj_last_error(), "poly");
    CHECK_HAS(tj_last_error(), "[5]");
    CHECK_HAS(tj_last_error(), "[4]");
    CHECK_EQ_INT(tj_call_into(f, 1, &x, 1, &badt), TJ_ERR_SIGNATURE);
    CHECK_HAS(tj_last_error(), "int32");
    CHECK_EQ_INT(tj_call_into(f, 1, &x, 2, (tj_tensor *[]){y, y}), TJ_ERR_INVALID);
    CHECK_HAS(tj_last_error(), "1 results, 2 outputs");
    CHECK_EQ_INT(tj_call_into(f, 1, &x, 1, NULL), TJ_ERR_INVALID);
    CHECK_EQ_INT(tj_call_into(f, 1, &x, 1, (tj_tensor *[]){NULL}), TJ_ERR_INVALID);
    CHECK_EQ_INT(tj_call_into(NULL, 1, &x, 1, &y), TJ_ERR_INVALID);
    CHECK_EQ_INT(tj_call_into(f, 2, (tj_tensor *[]){x, x}, 1, &y), TJ_ERR_INVALID);

    /* a tuple of results */
    tj_function *g = tj_function_new("two", (void *)two, 1, NULL);
    tj_tensor *n = tj_tensor_empty(TJ_F32, 1, d), *s = tj_tensor_empty(TJ_F32, 0, NULL);
    CHECK_EQ_INT(tj_call_into(g, 1, &x, 2, (tj_tensor *[]){n, s}), TJ_OK);
    CHECK_NEAR(tj_tensor_get_f64(n, 2), -2, 0);
    CHECK_NEAR(tj_tensor_get_f64(s, 0), 2.5, 1e-6);

    /* eager mode gives the same, with and without a scope open */
    tj_set_eager(1);
    CHECK_EQ_INT(tj_call_into(f, 1, &x, 1, &y), TJ_OK);
    CHECK_NEAR(tj_tensor_get_f64(y, 1), 0, 1e-6);
    tj_scope_begin();
    CHECK_EQ_INT(tj_call_into(g, 1, &x, 2, (tj_tensor *[]){n, s}), TJ_OK);
    tj_scope_end();
    CHECK_NEAR(tj_tensor_get_f64(s, 0), 2.5, 1e-6);
    tj_set_eager(0);

    /* under a tape watching the argument, as tj_call: the ops are recorded and each output is a
     * copy of its result, so gradients reach the argument (d/dx of (2x + 1)x - 3 is 4x + 1) */
    tj_tensor *yt = tj_tensor_empty(TJ_F32, 1, d), *sum = tj_tensor_empty(TJ_F32, 0, NULL);
    tj_tape *tape = tj_tape_new(0);
    CHECK_EQ_INT(tj_tape_watch(tape, x), TJ_OK);
    CHECK_EQ_INT(tj_call_into(f, 1, &x, 1, &yt), TJ_OK);
    CHECK_EQ_INT(tj_call_into(g, 1, &x, 2, (tj_tensor *[]){n, sum}), TJ_OK);
    tj_tape_stop(tape);
    tj_tensor *gx = NULL, *gs = NULL, *ones = tj_ones(TJ_F32, 1, d);
    CHECK_EQ_INT(tj_tape_gradient(tape, yt, ones, 1, &x, &gx), TJ_OK);
    CHECK_MSG(gx != NULL, "the tape did not record tj_call_into's ops");
    for (int i = 0; gx && i < 5; i++)
        CHECK_NEAR(tj_tensor_get_f64(gx, i), 4 * xs[i] + 1, 1e-5);
    CHECK_EQ_INT(tj_tape_gradient(tape, sum, NULL, 1, &x, &gs), TJ_OK);
    CHECK(gs != NULL);
    for (int i = 0; gs && i < 5; i++)
        CHECK_NEAR(tj_tensor_get_f64(gs, i), 1, 0);
    CHECK_NEAR(tj_tensor_get_f64(yt, 3), -2, 1e-6); /* (2(-1) + 1)(-1) - 3 */
    tj_release(gx);
    tj_release(gs);
    tj_release(ones);
    tj_release(yt);
    tj_release(sum);
    tj_tape_free(tape);

    tj_function_free(f);
    tj_function_free(g);
    tj_release(x);
    tj_release(y);
    tj_release(bad);
    tj_release(badt);
    tj_release(n);
    tj_release(s);
    return check_done();
}
