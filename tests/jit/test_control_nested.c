/* test_control_nested.c — control flow nested and composed (issue 10): a cond inside a while
 * inside a scan, reading values of every enclosing level; control flow inside a function called
 * from another traced function; a variable assigned in a branch inside a loop (once per executed
 * iteration). Compiled results equal the eager ones; CMake runs it on the interpreter too. */
#include <tracejit.h>

#include "check.h"

/* scan over rows r: s = s + f(r), f(r) = while sum(v) < limit { v = sum(v) < 0 ? v * -2 :
 * v + step }, step = |r| / 2 + 0.1 */
static tj_tensor *flip(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    return tj_mul(a[0], tj_scalar_f32(-2));
}
static tj_tensor *advance(int n, tj_tensor *const *a, void *u) {
    (void)n;
    return tj_add(a[0], (tj_tensor *)u); /* u: the step, a value of the scan body */
}
typedef struct level {
    tj_tensor *limit, *step;
} level;
static tj_tensor *below(int n, tj_tensor *const *a, void *u) {
    (void)n;
    return tj_less(tj_sum(a[0], 0, NULL, 0), ((level *)u)->limit); /* the function's value */
}
static tj_tensor *inner_body(int n, tj_tensor *const *a, void *u) {
    (void)n;
    tj_tensor *v = a[0];
    return tj_cond(tj_less(tj_sum(v, 0, NULL, 0), tj_scalar_f32(0)), flip, advance, 1, &v,
                   ((level *)u)->step);
}
static tj_tensor *scan_body(int n, tj_tensor *const *a, void *u) {
    (void)n;
    /* a positive step from the row: |row| / 2 + 0.1 */
    level lv = {((level *)u)->limit,
                tj_add(tj_mul(tj_abs(a[1]), tj_scalar_f32(0.5f)), tj_scalar_f32(0.1f))};
    tj_tensor *v = tj_while_loop(below, inner_body, 1, &a[1], &lv);
    tj_tensor *r[2] = {tj_add(a[0], v), tj_sum(v, 0, NULL, 0)};
    return tj_tuple(2, r);
}
static tj_tensor *nested(tj_tensor *xs, tj_tensor *limit) {
    level lv = {limit, NULL};
    tj_tensor *s0 = tj_zeros(TJ_F32, 1, (int64_t[]){2});
    return tj_scan(scan_body, 1, &s0, 1, &xs, &lv);
}

/* control flow inside a function called from another traced function */
static tj_tensor *relu_like(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    return a[0];
}
static tj_tensor *neg_zero(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    return tj_sub(a[0], a[0]);
}
static tj_tensor *inner_fn(tj_tensor *x) {
    return tj_cond(tj_greater(x, tj_scalar_f64(0)), relu_like, neg_zero, 1, &x, NULL);
}
static tj_function *inner_f;
static tj_tensor *outer_fn(tj_tensor *x) {
    tj_tensor *a = tj_call(inner_f, 1, &x);
    tj_tensor *b = tj_neg(x);
    tj_tensor *c = tj_call(inner_f, 1, &b);
    return tj_add(a, c); /* |x| */
}

/* a variable counts the odd iterations, assigned inside a branch inside a loop */
static tj_variable *odd_count;
static tj_tensor *count_it(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    tj_assign_add(odd_count, tj_scalar_i64(1));
    return a[0];
}
static tj_tensor *skip(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    return a[0];
}
static tj_tensor *odd_body(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    tj_tensor *odd = tj_equal(tj_mod(a[0], tj_scalar_i64(2)), tj_scalar_i64(1));
    return tj_cond(odd, count_it, skip, 1, &a[1], NULL);
}
static tj_tensor *count_odd(tj_tensor *n) {
    tj_tensor *acc = tj_scalar_i64(0);
    tj_for_range(tj_scalar_i64(0), n, tj_scalar_i64(1), odd_body, 1, &acc, NULL);
    return tj_variable_read(odd_count);
}

int main(void) {
    tj_scope_begin();
    float rows[8] = {1, -2, 0.5f, 0.25f, -1, -1, 3, 1};
    tj_tensor *xs = tj_tensor_from_data(TJ_F32, 2, (int64_t[]){4, 2}, rows);
    tj_tensor *limit = tj_scalar_f32(10);
    tj_function *f = tj_function_new("nested", (void *)nested, 2, NULL);
    tj_tensor *c = tj_call(f, 2, (tj_tensor *[]){xs, limit});
    tj_tensor *e = tj_call_eager(f, 2, (tj_tensor *[]){xs, limit});
    CHECK_MSG(tj_status_of(c) == TJ_OK, "%s", tj_error_message(c));
    CHECK_MSG(tj_status_of(e) == TJ_OK, "%s", tj_error_message(e));
    for (int k = 0; k < 2 && !tj_status_of(c) && !tj_status_of(e); k++) {
        tj_tensor *a = tj_tuple_get(c, k), *b = tj_tuple_get(e, k);
        CHECK_EQ_INT(tj_tensor_numel(a), tj_tensor_numel(b));
        for (int64_t i = 0; i < tj_tensor_numel(a); i++)
            CHECK_NEAR(tj_tensor_get_f64(a, i), tj_tensor_get_f64(b, i), 1e-5);
    }
    if (!tj_status_of(c)) { /* every row's loop ended at or past the limit */
        tj_tensor *sums = tj_tuple_get(c, 1);
        for (int i = 0; i < 4; i++)
            CHECK(tj_tensor_get_f64(sums, i) >= 10);
    }
    /* another limit: no retrace */
    c = tj_call(f, 2, (tj_tensor *[]){xs, tj_scalar_f32(3)});
    CHECK_EQ_INT(tj_status_of(c), TJ_OK);
    CHECK_EQ_INT(tj_function_trace_count(f), tj_get_eager() ? 0 : 1);
    tj_function_free(f);

    inner_f = tj_function_new("inner", (void *)inner_fn, 1, NULL);
    f = tj_function_new("outer", (void *)outer_fn, 1, NULL);
    const double xv[3] = {2.5, -4, 0};
    for (int i = 0; i < 3; i++) {
        tj_tensor *r = tj_call(f, 1, (tj_tensor *[]){tj_scalar_f64(xv[i])});
        CHECK_NEAR(tj_tensor_get_f64(r, 0), xv[i] < 0 ? -xv[i] : xv[i], 0);
    }
    CHECK_EQ_INT(tj_function_trace_count(inner_f), 0); /* inlined into outer's graph */
    tj_function_free(f);
    tj_function_free(inner_f);

    odd_count = tj_variable_new(tj_scalar_i64(0), "odd_count");
    f = tj_function_new("count_odd", (void *)count_odd, 1, NULL);
    tj_tensor *r = tj_call(f, 1, (tj_tensor *[]){tj_scalar_i64(7)}); /* 1, 3, 5 */
    CHECK_NEAR(tj_tensor_get_f64(r, 0), 3, 0);
    r = tj_call(f, 1, (tj_tensor *[]){tj_scalar_i64(10)}); /* + 1, 3, 5, 7, 9 */
    CHECK_NEAR(tj_tensor_get_f64(r, 0), 8, 0);
    r = tj_call_eager(f, 1, (tj_tensor *[]){tj_scalar_i64(4)}); /* + 1, 3 */
    CHECK_NEAR(tj_tensor_get_f64(r, 0), 10, 0);
    tj_function_free(f);
    tj_variable_free(odd_count);
    tj_scope_end();
    return check_done();
}
