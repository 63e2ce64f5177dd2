/* s11_variables_first_trace.c — SEMANTICS S11: creating a variable inside a function on a later
 * trace is an error with a clear message; creating it only on the first call (guarded by host
 * state) works: the seed's `state` example gives fn(1.0) = 12.0 and fn(3.0) = 36.0. */
#include <tracejit.h>

#include "check.h"

static tj_variable *state[2];
static int n_created;

static tj_tensor *stateful(tj_tensor *x) {
    if (!state[0]) {
        state[0] = tj_variable_new(tj_mul(tj_scalar_f32(2.0f), x), "state0");
        state[1] =
            tj_variable_new(tj_mul(tj_variable_read(state[0]), tj_scalar_f32(3.0f)), "state1");
        n_created += 2;
    }
    return tj_mul(tj_mul(tj_variable_read(state[0]), x), tj_variable_read(state[1]));
}

static tj_variable *made[8];
static int n_made;
static tj_tensor *creates_variable(tj_tensor *x) {
    tj_variable *v = tj_variable_new(tj_scalar_f32(1.0f), "v");
    if (v && n_made < 8)
        made[n_made++] = v;
    return tj_assign_add(v, x);
}

/* creates a variable only when called with a float64 (i.e. on a later signature's trace) */
static tj_variable *late;
static tj_tensor *late_creation(tj_tensor *x) {
    if (tj_tensor_dtype(x) == TJ_F64 && !late)
        late = tj_variable_new(tj_scalar_f64(0.0), "late");
    return tj_add(x, x);
}

int main(void) {
    tj_scope_begin();
    /* the seed's state example */
    tj_function *fn = tj_function_new("fn", (void *)stateful, 1, NULL);
    tj_tensor *r = tj_call(fn, 1, (tj_tensor *[]){tj_scalar_f32(1.0f)});
    CHECK_EQ_INT(tj_status_of(r), TJ_OK);
    CHECK_NEAR(tj_tensor_get_f64(r, 0), 12.0, 0);
    r = tj_call(fn, 1, (tj_tensor *[]){tj_scalar_f32(3.0f)});
    CHECK_NEAR(tj_tensor_get_f64(r, 0), 36.0, 0);
    CHECK_EQ_INT(n_created, 2);
    /* the variables hold 2*1 and 2*1*3, initialised from the first call's input */
    CHECK_NEAR(tj_tensor_get_f64(tj_variable_read(state[0]), 0), 2.0, 0);
    CHECK_NEAR(tj_tensor_get_f64(tj_variable_read(state[1]), 0), 6.0, 0);
    /* a new signature traces again without creating variables: fine */
    int64_t d2[1] = {2};
    r = tj_call(fn, 1, (tj_tensor *[]){tj_tensor_from_data(TJ_F32, 1, d2, (float[]){1, 2})});
    CHECK_EQ_INT(tj_status_of(r), TJ_OK);
    CHECK_NEAR(tj_tensor_get_f64(r, 1), 24.0, 0);
    CHECK_EQ_INT(n_created, 2);
    tj_function_free(fn);
    tj_variable_free(state[0]);
    tj_variable_free(state[1]);

    /* unconditional creation: an error naming the problem, never a crash */
    tj_function *cv = tj_function_new("f", (void *)creates_variable, 1, NULL);
    for (int i = 0; i < 2; i++) {
        r = tj_call(cv, 1, (tj_tensor *[]){tj_scalar_f32(1.0f)});
        CHECK_EQ_INT(tj_status_of(r), TJ_ERR_STATE);
        const char *m = tj_error_message(r);
        CHECK_HAS(m, "variable");
        CHECK_HAS(m, "non-first trace");
        CHECK_EQ_INT(tj_function_n_concrete(cv), 0);
    }
    tj_function_free(cv);
    for (int i = 0; i < n_made; i++)
        tj_variable_free(made[i]);

    /* creation on the trace of a later signature is an error too; earlier traces keep working */
    tj_function *lc = tj_function_new("late_creation", (void *)late_creation, 1, NULL);
    r = tj_call(lc, 1, (tj_tensor *[]){tj_scalar_f32(1.5f)});
    CHECK_NEAR(tj_tensor_get_f64(r, 0), 3.0, 0);
    r = tj_call(lc, 1, (tj_tensor *[]){tj_scalar_f64(1.5)});
    CHECK_EQ_INT(tj_status_of(r), TJ_ERR_STATE);
    CHECK_HAS(tj_error_message(r), "variable_new");
    CHECK(late == NULL);
    r = tj_call(lc, 1, (tj_tensor *[]){tj_scalar_f32(2.5f)});
    CHECK_NEAR(tj_tensor_get_f64(r, 0), 5.0, 0);
    CHECK_EQ_INT(tj_function_n_concrete(lc), 1);
    tj_function_free(lc);
    tj_variable_free(late);

    /* a first trace for a spec cannot evaluate an input-dependent initial value: an error */
    state[0] = state[1] = NULL;
    n_created = 0;
    fn = tj_function_new("fn", (void *)stateful, 1, NULL);
    CHECK(tj_function_get_concrete(fn, 1, (tj_spec[]){{.dtype = TJ_F32}}) == NULL);
    CHECK_HAS(tj_last_error(), "variable_new");
    CHECK_HAS(tj_last_error(), "unknown while tracing for a spec");
    CHECK(state[0] == NULL);
    /* BUG (jit/function.c build_concrete: first = n_traces == 0 counts failed traces): after a
     * failed first trace, no trace may ever create variables again, so a correct call fails. */
    r = tj_call(fn, 1, (tj_tensor *[]){tj_scalar_f32(1.0f)});
    CHECK_EQ_INT(tj_status_of(r), TJ_OK);
    CHECK_NEAR(tj_tensor_get_f64(r, 0), 12.0, 0);
    tj_function_free(fn);
    tj_variable_free(state[0]);
    tj_variable_free(state[1]);

    tj_scope_end();
    return check_done();
}
