/* s17_fizzbuzz.c — SEMANTICS S17: fizzbuzz over a tensor range 1..n with prints in if / else-if
 * branches: host code in each branch runs once, at the one trace; n = 5 and then n = 20 print the
 * right sequences without retracing (n is a tensor). Also for_range's edge cases: an empty
 * range, a negative step, a zero step (an error), float bounds (refused when known only at run
 * time), carried values. */
#include <tracejit.h>

#include "check.h"

static char out[4096];
static int n_lines;
static void sink(const char *line, void *user) {
    (void)user;
    size_t l = strlen(out);
    snprintf(out + l, sizeof out - l, "%s%s", n_lines++ ? " " : "", line);
}

static const char *printed(void) {
    return out;
}

static int traced_loop, traced[4];
static tj_tensor *say_fizzbuzz(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)a, (void)u;
    traced[0]++; /* the seed's print('Tracing fizzbuzz branch'): at trace time only */
    tj_print("fizzbuzz", 0, NULL);
    return NULL;
}
static tj_tensor *say_fizz(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)a, (void)u;
    traced[1]++;
    tj_print("fizz", 0, NULL);
    return NULL;
}
static tj_tensor *say_buzz(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)a, (void)u;
    traced[2]++;
    tj_print("buzz", 0, NULL);
    return NULL;
}
static tj_tensor *say_i(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    traced[3]++;
    tj_print("", 1, a);
    return NULL;
}
static tj_tensor *divisible(tj_tensor *i, int64_t k) {
    return tj_equal(tj_mod(i, tj_scalar_i64(k)), tj_scalar_i64(0));
}
static tj_tensor *elif_buzz(int n, tj_tensor *const *a, void *u) {
    return tj_cond(divisible(a[0], 5), say_buzz, say_i, n, a, u);
}
static tj_tensor *elif_fizz(int n, tj_tensor *const *a, void *u) {
    return tj_cond(divisible(a[0], 3), say_fizz, elif_buzz, n, a, u);
}
static tj_tensor *body(int n, tj_tensor *const *a, void *u) {
    (void)n;
    traced_loop++; /* print('Tracing for loop') */
    return tj_cond(divisible(a[0], 15), say_fizzbuzz, elif_fizz, 1, a, u);
}
static tj_tensor *fizzbuzz(tj_tensor *n) {
    tj_for_range(tj_scalar_i64(1), tj_add(n, tj_scalar_i64(1)), tj_scalar_i64(1), body, 0, NULL,
                 NULL);
    return NULL;
}

/* sum of i over a range with float bounds, carrying two values */
static tj_tensor *acc(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    tj_tensor *r[2] = {tj_add(a[1], a[0]), tj_add(a[2], tj_scalar_i32(1))};
    return tj_tuple(2, r);
}
static tj_tensor *sum_range(tj_tensor *lo, tj_tensor *hi, tj_tensor *step) {
    tj_tensor *init[2] = {tj_scalar_i64(0), tj_scalar_i32(0)};
    return tj_for_range(lo, hi, step, acc, 2, init, NULL);
}

static double at(tj_tensor *t, int k) {
    return tj_tensor_get_f64(tj_tuple_get(t, k), 0);
}

int main(void) {
    int eager = tj_get_eager();
    tj_scope_begin();
    tj_set_print_sink(sink, NULL);
    tj_function *f = tj_function_new("fizzbuzz", (void *)fizzbuzz, 1, NULL);
    tj_call(f, 1, (tj_tensor *[]){tj_scalar_i64(5)});
    CHECK_STR(printed(), "1 2 fizz 4 buzz");
    if (!eager) {
        CHECK_EQ_INT(traced_loop, 1);
        for (int k = 0; k < 4; k++)
            CHECK_EQ_INT(traced[k], 1); /* every branch traced once, taken or not */
    }
    out[0] = 0;
    n_lines = 0;
    tj_call(f, 1, (tj_tensor *[]){tj_scalar_i64(20)});
    CHECK_STR(printed(),
              "1 2 fizz 4 buzz fizz 7 8 fizz buzz 11 fizz 13 14 fizzbuzz 16 17 fizz 19 buzz");
    CHECK_EQ_INT(tj_function_trace_count(f), eager ? 0 : 1);
    if (!eager) {
        CHECK_EQ_INT(traced_loop, 1); /* no retrace: n is a tensor */
        CHECK_EQ_INT(traced[0], 1);
    }
    tj_function_free(f);

    f = tj_function_new("sum_range", (void *)sum_range, 3, NULL);
    tj_tensor *r =
        tj_call(f, 3, (tj_tensor *[]){tj_scalar_i64(1), tj_scalar_i64(11), tj_scalar_i64(1)});
    CHECK_NEAR(at(r, 0), 55, 0);
    CHECK_NEAR(at(r, 1), 10, 0);
    r = tj_call(f, 3, (tj_tensor *[]){tj_scalar_i64(10), tj_scalar_i64(0), tj_scalar_i64(-3)});
    CHECK_NEAR(at(r, 0), 10 + 7 + 4 + 1, 0);
    CHECK_NEAR(at(r, 1), 4, 0);
    r = tj_call(f, 3, (tj_tensor *[]){tj_scalar_i64(5), tj_scalar_i64(5), tj_scalar_i64(1)});
    CHECK_NEAR(at(r, 0), 0, 0);
    CHECK_NEAR(at(r, 1), 0, 0);
    r = tj_call(f, 3, (tj_tensor *[]){tj_scalar_i64(0), tj_scalar_i64(3), tj_scalar_i64(0)});
    CHECK_EQ_INT(tj_status_of(r), TJ_ERR_RUNTIME);
    CHECK_HAS(tj_error_message(r), "delta is 0");
    r = tj_call(f, 3, (tj_tensor *[]){tj_scalar_i64(0), tj_scalar_i64(10), tj_scalar_i64(1)});
    CHECK_NEAR(at(r, 0), 45, 0);
    CHECK_EQ_INT(tj_function_trace_count(f), eager ? 0 : 1);
    /* float bounds make a range over floats (tests/jit/test_float_range.c): as arguments of a
     * traced function they are known only at run time, which is refused by name, not truncated
     * to int64; a non-scalar bound is an error */
    r = tj_call(f, 3, (tj_tensor *[]){tj_scalar_f32(1), tj_scalar_f32(4.5f), tj_scalar_f32(1)});
    if (!eager) {
        CHECK_EQ_INT(tj_status_of(r), TJ_ERR_UNSUPPORTED);
        CHECK_HAS(tj_error_message(r), "for_range: start is a float32 computed when the function");
    }
    tj_tensor *v2 = tj_tensor_from_data(TJ_I64, 1, (int64_t[]){2}, (int64_t[]){1, 2});
    r = tj_call(f, 3, (tj_tensor *[]){tj_scalar_i64(0), v2, tj_scalar_i64(1)});
    CHECK_EQ_INT(tj_status_of(r), TJ_ERR_SHAPE);
    CHECK_HAS(tj_error_message(r), "for_range: limit must be a numeric scalar, got int64[2]");
    tj_function_free(f);
    r = tj_for_range(tj_scalar_i64(0), tj_scalar_i64(1), tj_scalar_i64(1), NULL, 0, NULL, NULL);
    CHECK_HAS(tj_error_message(r), "for_range: the body is NULL");
    tj_set_print_sink(NULL, NULL);
    tj_scope_end();
    return check_done();
}
