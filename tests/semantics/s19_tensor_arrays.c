/* s19_tensor_arrays.c — SEMANTICS S19: the seed's dynamic_rnn: transpose to time-major, loop over
 * time writing each state into a tensor array, stack, transpose back; compiled equals eager, and
 * the same written with tj_scan. Also tensor arrays' errors: a read of an index never written or
 * out of range (run-time errors naming the index), a write of the wrong shape, a non-array. */
#include <tracejit.h>

#include "check.h"

enum { B = 2, T = 3, F = 4 };

/* the seed's rnn_step(x, state): state + x */
static tj_tensor *rnn_step(tj_tensor *x, tj_tensor *state) {
    return tj_add(state, x);
}

/* loop variables: (state, states); the input is a value of the enclosing function */
static tj_tensor *time_step(int n, tj_tensor *const *a, void *user) {
    (void)n;
    tj_tensor *inputs = user; /* [T, B, F] */
    tj_tensor *x = tj_gather(inputs, a[0], 0);
    tj_tensor *state = rnn_step(x, a[1]);
    tj_tensor *r[2] = {state, tj_tensor_array_write(a[2], a[0], state)};
    return tj_tuple(2, r);
}
static tj_tensor *dynamic_rnn(tj_tensor *input_data, tj_tensor *initial_state) {
    tj_tensor *x = tj_transpose(input_data, (int[]){1, 0, 2}); /* [T, B, F] */
    int64_t max_seq_len = tj_tensor_dims(x)[0];
    tj_tensor *states = tj_tensor_array_new(TJ_F32, max_seq_len, 2, (int64_t[]){B, F});
    tj_tensor *init[2] = {initial_state, states};
    tj_tensor *r = tj_for_range(tj_scalar_i64(0), tj_scalar_i64(max_seq_len), tj_scalar_i64(1),
                                time_step, 2, init, x);
    return tj_transpose(tj_tensor_array_stack(tj_tuple_get(r, 1)), (int[]){1, 0, 2});
}

/* the same with scan: carried state, one time step of x per iteration, the states stacked */
static tj_tensor *scan_step(int n, tj_tensor *const *a, void *user) {
    (void)n;
    (void)user;
    tj_tensor *state = rnn_step(a[1], a[0]);
    tj_tensor *r[2] = {state, state};
    return tj_tuple(2, r);
}
static tj_tensor *scan_rnn(tj_tensor *input_data, tj_tensor *initial_state) {
    tj_tensor *x = tj_transpose(input_data, (int[]){1, 0, 2});
    tj_tensor *r = tj_scan(scan_step, 1, &initial_state, 1, &x, NULL);
    return tj_transpose(tj_tuple_get(r, 1), (int[]){1, 0, 2});
}

/* reads: of an index written in a loop, and of one never written */
static tj_tensor *fill_two(int n, tj_tensor *const *a, void *user) {
    (void)n;
    (void)user;
    return tj_tensor_array_write(a[1], a[0], tj_cast(a[0], TJ_F32));
}
static tj_tensor *read_at(tj_tensor *k) {
    tj_tensor *ta = tj_tensor_array_new(TJ_F32, 4, 0, NULL);
    ta = tj_for_range(tj_scalar_i64(0), tj_scalar_i64(2), tj_scalar_i64(1), fill_two, 1, &ta, NULL);
    return tj_tensor_array_read(ta, k);
}

int main(void) {
    int eager = tj_get_eager();
    tj_scope_begin();
    float in[B * T * F];
    for (int i = 0; i < B * T * F; i++)
        in[i] = (float)((i * 37) % 11) / 10.0f;
    tj_tensor *x = tj_tensor_from_data(TJ_F32, 3, (int64_t[]){B, T, F}, in);
    tj_tensor *s0 = tj_zeros(TJ_F32, 2, (int64_t[]){B, F});
    tj_function *f = tj_function_new("dynamic_rnn", (void *)dynamic_rnn, 2, NULL);
    tj_tensor *a = tj_call(f, 2, (tj_tensor *[]){x, s0});
    tj_tensor *e = tj_call_eager(f, 2, (tj_tensor *[]){x, s0});
    CHECK_MSG(tj_status_of(a) == TJ_OK, "%s", tj_error_message(a));
    CHECK_MSG(tj_status_of(e) == TJ_OK, "%s", tj_error_message(e));
    CHECK_EQ_INT(tj_tensor_rank(a), 3);
    static const int64_t want_dims[3] = {B, T, F};
    for (int d = 0; d < 3 && tj_status_of(a) == TJ_OK; d++)
        CHECK_EQ_INT(tj_tensor_dims(a)[d], want_dims[d]);
    /* out[b, t] = sum of in[b, 0..t] */
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int k = 0; k < F; k++) {
                double want = 0;
                for (int u = 0; u <= t; u++)
                    want += in[(b * T + u) * F + k];
                int64_t at = (b * T + t) * F + k;
                CHECK_NEAR(tj_tensor_get_f64(a, at), want, 1e-5);
                CHECK_NEAR(tj_tensor_get_f64(e, at), tj_tensor_get_f64(a, at), 0);
            }
    if (!eager) {
        tj_concrete *c =
            tj_function_get_concrete(f, 2,
                                     (tj_spec[]){{.dtype = TJ_F32, .rank = 3, .dims = {B, T, F}},
                                                 {.dtype = TJ_F32, .rank = 2, .dims = {B, F}}});
        char *t = tj_concrete_graph_text(c);
        CHECK_HAS(t, "= for ");
        CHECK_HAS(t, "update_index");
        free(t);
    }
    tj_function_free(f);
    /* the same with scan */
    f = tj_function_new("scan_rnn", (void *)scan_rnn, 2, NULL);
    tj_tensor *s = tj_call(f, 2, (tj_tensor *[]){x, s0});
    CHECK_MSG(tj_status_of(s) == TJ_OK, "%s", tj_error_message(s));
    for (int i = 0; i < B * T * F; i++)
        CHECK_NEAR(tj_tensor_get_f64(s, i), tj_tensor_get_f64(a, i), 0);
    tj_function_free(f);

    /* reads of written and unwritten indices: run-time errors name the index */
    f = tj_function_new("read_at", (void *)read_at, 1, NULL);
    tj_tensor *r = tj_call(f, 1, (tj_tensor *[]){tj_scalar_i64(1)});
    CHECK_NEAR(tj_tensor_get_f64(r, 0), 1, 0);
    r = tj_call(f, 1, (tj_tensor *[]){tj_scalar_i64(3)});
    CHECK_EQ_INT(tj_status_of(r), TJ_ERR_RUNTIME);
    CHECK_HAS(tj_error_message(r), "read_index: row 3 was never written");
    r = tj_call(f, 1, (tj_tensor *[]){tj_scalar_i64(9)});
    CHECK_EQ_INT(tj_status_of(r), TJ_ERR_RUNTIME);
    CHECK_HAS(tj_error_message(r), "read_index: index 9 out of range [0, 4)");
    CHECK_EQ_INT(tj_function_trace_count(f), eager ? 0 : 1);
    tj_function_free(f);
    /* eager API errors */
    tj_tensor *ta = tj_tensor_array_new(TJ_F32, 3, 1, (int64_t[]){2});
    CHECK_EQ_INT(tj_tensor_array_size(ta), 3);
    r = tj_tensor_array_write(ta, tj_scalar_i64(0), tj_zeros(TJ_F32, 1, (int64_t[]){5}));
    CHECK_EQ_INT(tj_status_of(r), TJ_ERR_SHAPE);
    CHECK_HAS(tj_error_message(r), "update_index: a row of float32[3,2] cannot be float32[5]");
    r = tj_tensor_array_read(ta, tj_scalar_i64(0));
    CHECK_HAS(tj_error_message(r), "row 0 was never written");
    r = tj_tensor_array_read(x, tj_scalar_i64(0));
    CHECK_HAS(tj_error_message(r), "tensor_array_read: not a tensor array");
    r = tj_tensor_array_read(ta, tj_scalar_f32(0));
    CHECK_HAS(tj_error_message(r), "the index must be an int32 or int64 scalar, got float32[]");
    tj_tensor *u = tj_tensor_array_unstack(x);
    CHECK_EQ_INT(tj_tensor_array_size(u), B);
    r = tj_tensor_array_read(u, tj_scalar_i32(1));
    CHECK_NEAR(tj_tensor_get_f64(r, 0), in[T * F], 0);
    tj_scope_end();
    return check_done();
}
