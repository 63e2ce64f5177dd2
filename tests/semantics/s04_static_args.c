/* s04_static_args.c — SEMANTICS S4: static arguments (Python ints/floats) are part of the cache
 * key by value. f(1) f(2) f(1) f(0.1) f(0.2) f(0.1) traces four times (the third and sixth calls
 * reuse); train(static 10) then (static 20) traces twice; the same as tensors traces once. */
#include <tracejit.h>

#include "check.h"

#define MAX_LINES 64
static char lines[MAX_LINES][128];
static int n_lines;
static void sink(const char *line, void *user) {
    (void)user;
    if (n_lines < MAX_LINES)
        snprintf(lines[n_lines++], sizeof lines[0], "%s", line);
}

static int n_traced;
static int saw_static = 1;
static tj_tensor *traced_with(tj_tensor *x) {
    n_traced++;
    saw_static &= tj_is_static(x) && !tj_tensor_is_symbolic(x);
    tj_print("Executed with", 1, &x);
    return NULL;
}

/* train: a static number of steps unrolls on the host; a tensor one is a symbolic input */
static int n_train_traces;
static tj_tensor *train(tj_tensor *num_steps) {
    n_train_traces++;
    if (tj_tensor_is_symbolic(num_steps))
        return tj_mul(num_steps, tj_scalar_i32(2));
    tj_tensor *acc = tj_scalar_i64(0);
    int64_t n = (int64_t)tj_tensor_get_f64(num_steps, 0);
    for (int64_t i = 0; i < n; i++)
        acc = tj_add(acc, tj_scalar_i64(2));
    return acc;
}

int main(void) {
    tj_scope_begin();
    tj_set_print_sink(sink, NULL);
    tj_function *f = tj_function_new("f", (void *)traced_with, 1, NULL);
    tj_tensor *calls[6] = {tj_static_i64(1),   tj_static_i64(2),   tj_static_i64(1),
                           tj_static_f64(0.1), tj_static_f64(0.2), tj_static_f64(0.1)};
    int want_traces[6] = {1, 2, 2, 3, 4, 4};
    for (int i = 0; i < 6; i++) {
        CHECK(tj_is_static(calls[i]));
        tj_tensor *r = tj_call(f, 1, &calls[i]);
        CHECK_EQ_INT(tj_status_of(r), TJ_OK);
        CHECK_EQ_INT(tj_tuple_size(r), 0); /* no result: an empty tuple */
        CHECK_MSG(tj_function_trace_count(f) == want_traces[i], "call %d: %d traces", i,
                  tj_function_trace_count(f));
    }
    CHECK_EQ_INT(n_traced, 4);
    CHECK_EQ_INT(tj_function_n_concrete(f), 4);
    CHECK(saw_static);
    const char *want[6] = {"Executed with 1",   "Executed with 2",   "Executed with 1",
                           "Executed with 0.1", "Executed with 0.2", "Executed with 0.1"};
    CHECK_EQ_INT(n_lines, 6);
    for (int i = 0; i < 6 && i < n_lines; i++)
        CHECK_STR(lines[i], want[i]);
    tj_function_free(f);

    /* static arguments act as 0-d tensors eagerly */
    tj_tensor *s = tj_static_f64(0.5);
    CHECK_EQ_INT(tj_tensor_rank(s), 0);
    CHECK_EQ_INT(tj_tensor_dtype(s), TJ_F64);
    CHECK_NEAR(tj_tensor_get_f64(s, 0), 0.5, 0);
    CHECK_EQ_INT(tj_tensor_dtype(tj_static_i64(3)), TJ_I64);
    CHECK(!tj_is_static(tj_scalar_i64(3)));

    /* train(num_steps=10), then 20, as static values: two traces, unrolled values */
    tj_function *tr = tj_function_new("train", (void *)train, 1, NULL);
    tj_tensor *r = tj_call(tr, 1, (tj_tensor *[]){tj_static_i64(10)});
    CHECK_EQ_INT(tj_tensor_get_f64(r, 0), 20);
    r = tj_call(tr, 1, (tj_tensor *[]){tj_static_i64(20)});
    CHECK_EQ_INT(tj_tensor_get_f64(r, 0), 40);
    r = tj_call(tr, 1, (tj_tensor *[]){tj_static_i64(10)});
    CHECK_EQ_INT(tj_tensor_get_f64(r, 0), 20);
    CHECK_EQ_INT(tj_function_trace_count(tr), 2);
    CHECK_EQ_INT(n_train_traces, 2);
    tj_function_free(tr);

    /* the same as tensors: one trace */
    n_train_traces = 0;
    tr = tj_function_new("train", (void *)train, 1, NULL);
    r = tj_call(tr, 1, (tj_tensor *[]){tj_scalar_i32(10)});
    CHECK_EQ_INT(tj_tensor_get_f64(r, 0), 20);
    r = tj_call(tr, 1, (tj_tensor *[]){tj_scalar_i32(20)});
    CHECK_EQ_INT(tj_tensor_get_f64(r, 0), 40);
    CHECK_EQ_INT(tj_function_trace_count(tr), 1);
    CHECK_EQ_INT(n_train_traces, 1);
    tj_function_free(tr);

    /* static strings and bools key by value too */
    n_lines = 0;
    n_traced = 0;
    f = tj_function_new("f", (void *)traced_with, 1, NULL);
    tj_call(f, 1, (tj_tensor *[]){tj_static_str("a")});
    tj_call(f, 1, (tj_tensor *[]){tj_static_str("b")});
    tj_call(f, 1, (tj_tensor *[]){tj_static_str("a")});
    tj_call(f, 1, (tj_tensor *[]){tj_static_bool(1)});
    tj_call(f, 1, (tj_tensor *[]){tj_static_bool(1)});
    CHECK_EQ_INT(tj_function_trace_count(f), 3);
    CHECK_EQ_INT(n_lines, 5);
    if (n_lines == 5) {
        CHECK_STR(lines[0], "Executed with a");
        CHECK_STR(lines[1], "Executed with b");
        CHECK_STR(lines[2], "Executed with a");
    }
    tj_function_free(f);

    tj_set_print_sink(NULL, NULL);
    tj_scope_end();
    return check_done();
}
