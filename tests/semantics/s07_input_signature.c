/* s07_input_signature.c — SEMANTICS S7: a function with input signature [dims {-1}, int32]
 * accepts [1,2] and returns [4,1] for next_collatz; a 2-D input is rejected with an error showing
 * the inputs and the signature; it never retraces beyond the signature. */
#include <tracejit.h>

#include "check.h"

static int n_traces;
static tj_tensor *next_collatz(tj_tensor *x) {
    n_traces++;
    tj_tensor *two = tj_scalar_i32(2);
    tj_tensor *even = tj_equal(tj_mod(x, two), tj_scalar_i32(0));
    return tj_where(even, tj_floordiv(x, two),
                    tj_add(tj_mul(tj_scalar_i32(3), x), tj_scalar_i32(1)));
}

static tj_tensor *vec(int n, const int32_t *v) {
    int64_t d[1] = {n};
    return tj_tensor_from_data(TJ_I32, 1, d, v);
}

int main(void) {
    tj_scope_begin();
    tj_spec sig = {.dtype = TJ_I32, .rank = 1, .dims = {-1}};
    tj_function *f = tj_function_new("next_collatz", (void *)next_collatz, 1,
                                     &(tj_function_options){.n_input_signature = 1,
                                                            .input_signature = &sig,
                                                            .arg_names = (const char *[]){"x"}});
    CHECK(f != NULL);

    tj_tensor *r = tj_call(f, 1, (tj_tensor *[]){vec(2, (int32_t[]){1, 2})});
    CHECK_EQ_INT(tj_status_of(r), TJ_OK);
    char *s = tj_tensor_values_str(r);
    CHECK_STR(s, "[4 1]");
    free(s);
    CHECK_EQ_INT(n_traces, 1);

    /* other lengths fit the signature: no retrace */
    r = tj_call(f, 1, (tj_tensor *[]){vec(5, (int32_t[]){3, 4, 5, 6, 7})});
    s = tj_tensor_values_str(r);
    CHECK_STR(s, "[10 2 16 3 22]");
    free(s);
    r = tj_call(f, 1, (tj_tensor *[]){vec(1, (int32_t[]){27})});
    CHECK_EQ_INT(tj_tensor_get_f64(r, 0), 82);
    r = tj_call(f, 1, (tj_tensor *[]){vec(0, NULL)});
    CHECK_EQ_INT(tj_status_of(r), TJ_OK);
    CHECK_EQ_INT(tj_tensor_numel(r), 0);
    CHECK_EQ_INT(n_traces, 1);
    CHECK_EQ_INT(tj_function_trace_count(f), 1);
    CHECK_EQ_INT(tj_function_n_concrete(f), 1);

    /* 2-D input: rejected, the message shows the inputs and the signature */
    int64_t d22[2] = {2, 2};
    r = tj_call(f, 1,
                (tj_tensor *[]){tj_tensor_from_data(TJ_I32, 2, d22, (int32_t[]){1, 2, 3, 4})});
    CHECK_EQ_INT(tj_status_of(r), TJ_ERR_SIGNATURE);
    const char *m = tj_error_message(r);
    CHECK_HAS(m, "next_collatz");
    CHECK_HAS(m, "input_signature");
    CHECK_HAS(m, "[[1 2] [3 4]]");
    CHECK_HAS(m, "shape=(2, 2)");
    CHECK_HAS(m, "TensorSpec(shape=(None,), dtype=int32)");

    /* wrong dtype and a static value are rejected too */
    int64_t d2[1] = {2};
    r = tj_call(f, 1, (tj_tensor *[]){tj_tensor_from_data(TJ_I64, 1, d2, (int64_t[]){1, 2})});
    CHECK_EQ_INT(tj_status_of(r), TJ_ERR_SIGNATURE);
    CHECK_HAS(tj_error_message(r), "int64");
    r = tj_call(f, 1, (tj_tensor *[]){tj_static_i64(3)});
    CHECK_EQ_INT(tj_status_of(r), TJ_ERR_SIGNATURE);
    r = tj_call(f, 1, (tj_tensor *[]){tj_scalar_i32(3)});
    CHECK_EQ_INT(tj_status_of(r), TJ_ERR_SIGNATURE);
    CHECK_EQ_INT(n_traces, 1);
    CHECK_EQ_INT(tj_function_trace_count(f), 1);

    /* the concrete signature shows the unknown dimension */
    char *sigs = tj_function_signatures(f);
    CHECK_HAS(sigs, "x: int32 Tensor, shape=(None,)");
    free(sigs);
    tj_function_free(f);

    /* a signature whose length differs from nargs is rejected at creation */
    CHECK(tj_function_new(
              "bad", (void *)next_collatz, 2,
              &(tj_function_options){.n_input_signature = 1, .input_signature = &sig}) == NULL);
    CHECK_HAS(tj_last_error(), "bad");
    tj_scope_end();
    return check_done();
}
