/* s02_host_arrays.c — SEMANTICS S2: a tensor made from a host buffer (copied or borrowed) with
 * the same dtype and shape as an earlier argument reuses the earlier trace, and the compiled code
 * reads the new buffer's values. */
#include <tracejit.h>

#include "check.h"

static int n_traces_seen;

static tj_tensor *dbl(tj_tensor *a) {
    n_traces_seen++;
    return tj_add(a, a);
}

static int n_released;
static void on_release(void *user) {
    (void)user;
    n_released++;
}

int main(void) {
    tj_scope_begin();
    tj_function *f = tj_function_new("double", (void *)dbl, 1, NULL);
    int64_t d3[1] = {3}, d23[2] = {2, 3};

    int32_t host[3] = {1, 2, 3};
    tj_tensor *r = tj_call(f, 1, (tj_tensor *[]){tj_tensor_from_data(TJ_I32, 1, d3, host)});
    CHECK_EQ_INT(tj_tensor_get_f64(r, 0), 2);
    CHECK_EQ_INT(tj_tensor_get_f64(r, 2), 6);
    CHECK_EQ_INT(n_traces_seen, 1);

    /* new values in the host buffer, same dtype and shape: same trace, new values */
    host[0] = 10;
    host[2] = -7;
    r = tj_call(f, 1, (tj_tensor *[]){tj_tensor_from_data(TJ_I32, 1, d3, host)});
    CHECK_EQ_INT(tj_tensor_get_f64(r, 0), 20);
    CHECK_EQ_INT(tj_tensor_get_f64(r, 1), 4);
    CHECK_EQ_INT(tj_tensor_get_f64(r, 2), -14);
    CHECK_EQ_INT(n_traces_seen, 1);

    /* a borrowed buffer (no copy) is the same kind of argument */
    int32_t *mine = aligned_alloc(64, 64);
    mine[0] = 5;
    mine[1] = 6;
    mine[2] = 7;
    tj_tensor *b = tj_tensor_borrow(TJ_I32, 1, d3, mine, on_release, NULL);
    r = tj_call(f, 1, (tj_tensor *[]){b});
    CHECK_EQ_INT(tj_status_of(r), TJ_OK);
    CHECK_EQ_INT(tj_tensor_get_f64(r, 0), 10);
    CHECK_EQ_INT(tj_tensor_get_f64(r, 2), 14);
    CHECK_EQ_INT(n_traces_seen, 1);
    CHECK_EQ_INT(tj_function_trace_count(f), 1);
    /* the result does not alias the borrowed buffer */
    CHECK(tj_tensor_data(r) != (const void *)mine);
    CHECK_EQ_INT(mine[0], 5);

    /* a tensor made by ops with the same dtype/shape also reuses the trace */
    r = tj_call(f, 1, (tj_tensor *[]){tj_fill(1, d3, tj_scalar_i32(21))});
    CHECK_EQ_INT(tj_tensor_get_f64(r, 2), 42);
    CHECK_EQ_INT(n_traces_seen, 1);

    /* another shape or dtype of host data traces again */
    int32_t h6[6] = {1, 2, 3, 4, 5, 6};
    r = tj_call(f, 1, (tj_tensor *[]){tj_tensor_from_data(TJ_I32, 2, d23, h6)});
    CHECK_EQ_INT(tj_tensor_rank(r), 2);
    CHECK_EQ_INT(tj_tensor_get_f64(r, 5), 12);
    CHECK_EQ_INT(n_traces_seen, 2);
    double hd[3] = {0.25, 0.5, 1.5};
    r = tj_call(f, 1, (tj_tensor *[]){tj_tensor_from_data(TJ_F64, 1, d3, hd)});
    CHECK_EQ_INT(tj_tensor_dtype(r), TJ_F64);
    CHECK_NEAR(tj_tensor_get_f64(r, 2), 3.0, 0);
    CHECK_EQ_INT(n_traces_seen, 3);
    CHECK_EQ_INT(tj_function_n_concrete(f), 3);

    tj_function_free(f);
    tj_scope_end();
    /* every reference to the borrowed tensor is gone: release ran exactly once */
    CHECK_EQ_INT(n_released, 1);
    free(mine);
    return check_done();
}
