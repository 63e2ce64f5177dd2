/* s16_while.c — SEMANTICS S16: `while sum(x) > 1 { print(x); x = tanh(x) }` runs as a compiled
 * loop: one trace, every iterate printed in order, the same lines and result as the eager run.
 * Also: loop variables of several dtypes, an invariant read from the enclosing function, a
 * variable incremented once per executed iteration, maximum_iterations, a body that changes a
 * variable's shape (an error naming the variable and both shapes), a failing body (the error
 * names the iteration), NULL bodies. */
#include <tracejit.h>

#include <math.h>

#include "check.h"

#define MAX_LINES 64
static char lines[2][MAX_LINES][200];
static int n_lines[2], run;
static void sink(const char *line, void *user) {
    (void)user;
    if (n_lines[run] < MAX_LINES)
        snprintf(lines[run][n_lines[run]], sizeof lines[0][0], "%s", line);
    n_lines[run]++;
}

static tj_tensor *sum_gt_1(int n, tj_tensor *const *x, void *user) {
    (void)n;
    (void)user;
    return tj_greater(tj_sum(x[0], 0, NULL, 0), tj_scalar_f32(1));
}
static tj_tensor *print_tanh(int n, tj_tensor *const *x, void *user) {
    (void)n;
    (void)user;
    tj_print("", 1, x);
    return tj_tanh(x[0]);
}
static int n_traced;
static tj_tensor *f(tj_tensor *x) {
    n_traced++;
    return tj_while_loop(sum_gt_1, print_tanh, 1, &x, NULL);
}

/* a counter and an accumulator; the limit is a value of the enclosing function (an invariant);
 * a variable counts the iterations */
static tj_variable *count;
static tj_tensor *below(int n, tj_tensor *const *v, void *user) {
    (void)n;
    return tj_less(v[0], (tj_tensor *)user);
}
static tj_tensor *step(int n, tj_tensor *const *v, void *user) {
    (void)n;
    (void)user;
    tj_assign_add(count, tj_scalar_i64(1));
    tj_tensor *r[2] = {tj_add(v[0], tj_scalar_i32(1)), tj_mul(v[1], tj_scalar_f64(2))};
    return tj_tuple(2, r);
}
static tj_tensor *doubling(tj_tensor *limit) {
    tj_tensor *init[2] = {tj_scalar_i32(0), tj_scalar_f64(1)};
    tj_tensor *r = tj_while_loop(below, step, 2, init, limit);
    tj_tensor *after = tj_variable_read(count); /* read after the loop: the updated value */
    tj_tensor *items[3] = {tj_tuple_get(r, 0), tj_tuple_get(r, 1), after};
    return tj_tuple(3, items);
}
static tj_tensor *capped(tj_tensor *x) {
    return tj_while_loop_max(sum_gt_1, print_tanh, 1, &x, 3, NULL);
}

/* bad bodies */
static tj_tensor *grow(int n, tj_tensor *const *v, void *user) {
    (void)n;
    (void)user;
    return tj_concat(2, (tj_tensor *[]){v[0], v[0]}, 0);
}
static tj_tensor *grows(tj_tensor *x) {
    return tj_while_loop(sum_gt_1, grow, 1, &x, NULL);
}
static tj_tensor *idiv(int n, tj_tensor *const *v, void *user) {
    (void)n;
    (void)user;
    /* 10 / (3 - i) fails when i reaches 3 */
    tj_tensor *r[2] = {tj_add(v[0], tj_scalar_i64(1)),
                       tj_div(tj_scalar_i64(10), tj_sub(tj_scalar_i64(3), v[0]))};
    return tj_tuple(2, r);
}
static tj_tensor *lt10(int n, tj_tensor *const *v, void *user) {
    (void)n;
    (void)user;
    return tj_less(v[0], tj_scalar_i64(10));
}
static tj_tensor *fails(tj_tensor *x) {
    tj_tensor *init[2] = {x, x};
    return tj_while_loop(lt10, idiv, 2, init, NULL);
}

int main(void) {
    int eager = tj_get_eager(); /* CMake runs this with TJ_EAGER=1 too */
    tj_scope_begin();
    tj_set_print_sink(sink, NULL);
    float xs[5] = {0.9f, 0.8f, 0.3f, 0.5f, 0.7f};
    tj_tensor *x = tj_tensor_from_data(TJ_F32, 1, (int64_t[]){5}, xs);
    tj_function *fn = tj_function_new("f", (void *)f, 1, NULL);
    run = 0;
    tj_tensor *a = tj_call(fn, 1, &x);
    tj_tensor *b = tj_call(fn, 1, &x); /* no retrace */
    run = 1;
    tj_tensor *e = tj_call_eager(fn, 1, &x);
    CHECK_EQ_INT(tj_status_of(a), TJ_OK);
    CHECK_EQ_INT(n_traced, eager ? 3 : 2);
    CHECK_EQ_INT(tj_function_trace_count(fn), eager ? 0 : 1);
    CHECK(n_lines[1] >= 10);
    CHECK_EQ_INT(n_lines[0], 2 * n_lines[1]); /* every iterate, on both compiled calls */
    CHECK_STR(lines[0][0], "[0.9 0.8 0.3 0.5 0.7]");
    for (int i = 0; i < n_lines[1] && i < MAX_LINES; i++)
        CHECK_STR(lines[0][i], lines[1][i]); /* the same lines as the eager run */
    double s = 0;
    for (int k = 0; k < 5; k++) {
        CHECK_NEAR(tj_tensor_get_f64(a, k), tj_tensor_get_f64(e, k), 1e-6);
        CHECK_NEAR(tj_tensor_get_f64(b, k), tj_tensor_get_f64(a, k), 0);
        s += tj_tensor_get_f64(a, k);
    }
    CHECK(s <= 1);
    if (!eager) { /* one while node, whatever the trip count */
        tj_concrete *c =
            tj_function_get_concrete(fn, 1, (tj_spec[]){{.dtype = TJ_F32, .rank = 1, .dims = {5}}});
        char *t = tj_concrete_graph_text(c);
        CHECK_HAS(t, "= while ");
        free(t);
    }
    tj_function_free(fn);

    /* several loop variables, an invariant, a variable updated once per iteration */
    count = tj_variable_new(tj_scalar_i64(0), "count");
    fn = tj_function_new("doubling", (void *)doubling, 1, NULL);
    tj_tensor *r = tj_call(fn, 1, (tj_tensor *[]){tj_scalar_i32(5)});
    CHECK_EQ_INT(tj_status_of(r), TJ_OK);
    CHECK_NEAR(tj_tensor_get_f64(tj_tuple_get(r, 0), 0), 5, 0);
    CHECK_NEAR(tj_tensor_get_f64(tj_tuple_get(r, 1), 0), 32, 0);
    CHECK_NEAR(tj_tensor_get_f64(tj_tuple_get(r, 2), 0), 5, 0);
    r = tj_call(fn, 1, (tj_tensor *[]){tj_scalar_i32(3)});
    CHECK_NEAR(tj_tensor_get_f64(tj_tuple_get(r, 1), 0), 8, 0);
    CHECK_NEAR(tj_tensor_get_f64(tj_tuple_get(r, 2), 0), 8, 0);
    CHECK_NEAR(tj_tensor_get_f64(tj_variable_read(count), 0), 8, 0);
    CHECK_EQ_INT(tj_function_trace_count(fn), eager ? 0 : 1);
    tj_function_free(fn);
    tj_variable_free(count);

    /* maximum_iterations stops the loop, as tf.while_loop */
    fn = tj_function_new("capped", (void *)capped, 1, NULL);
    run = 0;
    n_lines[0] = 0;
    r = tj_call(fn, 1, &x);
    CHECK_EQ_INT(n_lines[0], 3);
    CHECK_NEAR(tj_tensor_get_f64(r, 0), tanh(tanh(tanh(0.9f))), 1e-6);
    r = tj_while_loop_max(sum_gt_1, print_tanh, 1, &x, -1, NULL);
    CHECK_EQ_INT(tj_status_of(r), TJ_ERR_INVALID);
    CHECK_HAS(tj_error_message(r), "maximum_iterations -1 is negative");
    tj_function_free(fn);

    /* a body that changes a loop variable's shape */
    fn = tj_function_new("grows", (void *)grows, 1, NULL);
    r = tj_call(fn, 1, &x);
    CHECK_EQ_INT(tj_status_of(r), TJ_ERR_SHAPE);
    CHECK_HAS(tj_error_message(r), eager ? "loop variable 0 changed from float32[5] to float32[10]"
                                         : "body region result 0 is float32[10], expected "
                                           "float32[5]");
    tj_function_free(fn);
    /* a body failing at run time: the error names the iteration */
    fn = tj_function_new("fails", (void *)fails, 1, NULL);
    r = tj_call(fn, 1, (tj_tensor *[]){tj_scalar_i64(0)});
    CHECK_EQ_INT(tj_status_of(r), TJ_ERR_RUNTIME);
    CHECK_HAS(tj_error_message(r), "iteration 3");
    CHECK_HAS(tj_error_message(r), "integer division by zero");
    tj_function_free(fn);
    r = tj_while_loop(NULL, print_tanh, 1, &x, NULL);
    CHECK_HAS(tj_error_message(r), "while_loop: the cond is NULL");
    r = tj_while_loop(sum_gt_1, print_tanh, 1, NULL, NULL);
    CHECK_HAS(tj_error_message(r), "while_loop: bad loop variable list");
    tj_set_print_sink(NULL, NULL);
    tj_scope_end();
    return check_done();
}
