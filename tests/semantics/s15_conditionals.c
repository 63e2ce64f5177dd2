/* s15_conditionals.c — SEMANTICS S15: square_if_positive with a data-dependent condition is one
 * trace that compiles to a real branch: 2 gives 4, -2 gives 0, and the branch not taken runs no
 * op and no side effect (its print and host callback stay silent). Also: a number as predicate,
 * branches that disagree, a bad predicate, captured outer values, several results, nesting. */
#include <tracejit.h>

#include "check.h"

static int n_traced, n_then_cb, n_else_cb;
static char last_line[128];
static void sink(const char *line, void *user) {
    (void)user;
    snprintf(last_line, sizeof last_line, "%s", line);
}
static const char *last(void) {
    return last_line;
}
static void then_cb(void *user, tj_tensor *x) {
    (void)user;
    (void)x;
    n_then_cb++;
}
static void else_cb(void *user, tj_tensor *x) {
    (void)user;
    (void)x;
    n_else_cb++;
}

static tj_tensor *square(int n, tj_tensor *const *a, void *user) {
    (void)n;
    (void)user;
    tj_host_callback((void *)then_cb, NULL, 1, a);
    tj_print("then", 1, a);
    return tj_mul(a[0], a[0]);
}
static tj_tensor *zero(int n, tj_tensor *const *a, void *user) {
    (void)n;
    (void)user;
    tj_host_callback((void *)else_cb, NULL, 1, a);
    tj_print("else", 1, a);
    return tj_mul(a[0], tj_scalar_f32(0));
}

/* if x > 0: x * x else 0 */
static tj_tensor *square_if_positive(tj_tensor *x) {
    n_traced++;
    return tj_cond(tj_greater(x, tj_scalar_f32(0)), square, zero, 1, &x, NULL);
}

/* a numeric predicate (nonzero is true) and values captured from the enclosing function */
static tj_tensor *scale_by(int n, tj_tensor *const *a, void *user) {
    (void)n;
    tj_tensor *k = user;
    return tj_mul(a[0], k); /* k: a tensor of the enclosing trace */
}
static tj_tensor *negate(int n, tj_tensor *const *a, void *user) {
    (void)n;
    (void)user;
    return tj_neg(a[0]);
}
static tj_tensor *numeric_pred(tj_tensor *flag, tj_tensor *x, tj_tensor *k) {
    return tj_cond(flag, scale_by, negate, 1, &x, k);
}

/* several results, and a cond inside a cond */
static tj_tensor *two(int n, tj_tensor *const *a, void *user) {
    (void)n;
    (void)user;
    tj_tensor *r[2] = {tj_add(a[0], a[1]), tj_sub(a[0], a[1])};
    return tj_tuple(2, r);
}
static tj_tensor *two_swapped(int n, tj_tensor *const *a, void *user) {
    (void)n;
    (void)user;
    tj_tensor *inner = tj_cond(tj_less(a[0], a[1]), square, zero, 1, &a[0], NULL); /* nested */
    tj_tensor *r[2] = {inner, a[1]};
    return tj_tuple(2, r);
}
static tj_tensor *pair(tj_tensor *p, tj_tensor *x, tj_tensor *y) {
    tj_tensor *a[2] = {x, y};
    return tj_cond(p, two, two_swapped, 2, a, NULL);
}

/* branches that disagree, and a predicate that is not a scalar */
static tj_tensor *vec(int n, tj_tensor *const *a, void *user) {
    (void)n;
    (void)user;
    return tj_concat(2, (tj_tensor *[]){a[0], a[0]}, 0);
}
static tj_tensor *same(int n, tj_tensor *const *a, void *user) {
    (void)n;
    (void)user;
    return a[0];
}
static tj_tensor *mismatched(tj_tensor *x) {
    return tj_cond(tj_greater(tj_sum(x, 0, NULL, 0), tj_scalar_f32(0)), vec, same, 1, &x, NULL);
}
/* a predicate the passes fold (1 < 2): the compiled graph is the then branch, inlined */
static tj_tensor *const_pred(tj_tensor *x) {
    return tj_cond(tj_less(tj_scalar_f32(1), tj_scalar_f32(2)), square, zero, 1, &x, NULL);
}
static tj_tensor *vector_pred(tj_tensor *x) {
    return tj_cond(tj_greater(x, tj_scalar_f32(0)), same, same, 1, &x, NULL);
}

int main(void) {
    /* TJ_EAGER=1 runs this too (CMake): then nothing is traced and only one branch ever runs */
    int eager = tj_get_eager();
    tj_scope_begin();
    tj_set_print_sink(sink, NULL);
    tj_function *f = tj_function_new("square_if_positive", (void *)square_if_positive, 1, NULL);
    tj_tensor *r = tj_call(f, 1, (tj_tensor *[]){tj_scalar_f32(2)});
    CHECK_EQ_INT(tj_status_of(r), TJ_OK);
    CHECK_NEAR(tj_tensor_get_f64(r, 0), 4, 0);
    CHECK_EQ_INT(n_then_cb, 1);
    CHECK_EQ_INT(n_else_cb, 0);
    CHECK_STR(last(), "then 2");
    r = tj_call(f, 1, (tj_tensor *[]){tj_scalar_f32(-2)});
    CHECK_NEAR(tj_tensor_get_f64(r, 0), -0.0, 0);
    CHECK_EQ_INT(n_then_cb, 1);
    CHECK_EQ_INT(n_else_cb, 1);
    CHECK_STR(last(), "else -2");
    CHECK_EQ_INT(n_traced, eager ? 2 : 1);
    CHECK_EQ_INT(tj_function_trace_count(f), eager ? 0 : 1);
    if (!eager) { /* the compiled graph holds one cond node with its two regions */
        tj_concrete *c = tj_function_get_concrete(f, 1, (tj_spec[]){{.dtype = TJ_F32}});
        char *text = tj_concrete_graph_text(c);
        CHECK_HAS(text, "= cond ");
        CHECK_HAS(text, "graph @then {");
        CHECK_HAS(text, "graph @else {");
        free(text);
    }
    /* eagerly: the same values, one branch run */
    n_then_cb = n_else_cb = 0;
    r = tj_call_eager(f, 1, (tj_tensor *[]){tj_scalar_f32(3)});
    CHECK_NEAR(tj_tensor_get_f64(r, 0), 9, 0);
    CHECK_EQ_INT(n_then_cb + n_else_cb, 1);
    tj_function_free(f);

    /* a numeric predicate and a captured outer value */
    f = tj_function_new("numeric_pred", (void *)numeric_pred, 3, NULL);
    tj_tensor *x = tj_scalar_f32(5), *k = tj_scalar_f32(3);
    r = tj_call(f, 3, (tj_tensor *[]){tj_scalar_i32(7), x, k});
    CHECK_NEAR(tj_tensor_get_f64(r, 0), 15, 0);
    r = tj_call(f, 3, (tj_tensor *[]){tj_scalar_i32(0), x, k});
    CHECK_NEAR(tj_tensor_get_f64(r, 0), -5, 0);
    r = tj_call(f, 3, (tj_tensor *[]){tj_scalar_i32(-1), x, tj_scalar_f32(10)});
    CHECK_NEAR(tj_tensor_get_f64(r, 0), 50, 0);
    CHECK_EQ_INT(tj_function_trace_count(f), eager ? 0 : 1);
    tj_function_free(f);

    /* two results; a nested cond in the else branch */
    f = tj_function_new("pair", (void *)pair, 3, NULL);
    tj_tensor *args[3] = {tj_scalar_bool(1), tj_scalar_f32(5), tj_scalar_f32(2)};
    r = tj_call(f, 3, args);
    CHECK_EQ_INT(tj_tuple_size(r), 2);
    CHECK_NEAR(tj_tensor_get_f64(tj_tuple_get(r, 0), 0), 7, 0);
    CHECK_NEAR(tj_tensor_get_f64(tj_tuple_get(r, 1), 0), 3, 0);
    args[0] = tj_scalar_bool(0);
    r = tj_call(f, 3, args); /* 5 < 2 is false: the inner else, 5 * 0 */
    CHECK_NEAR(tj_tensor_get_f64(tj_tuple_get(r, 0), 0), 0, 0);
    CHECK_NEAR(tj_tensor_get_f64(tj_tuple_get(r, 1), 0), 2, 0);
    args[1] = tj_scalar_f32(1);
    r = tj_call(f, 3, args); /* 1 < 2: the inner then, 1 * 1 */
    CHECK_NEAR(tj_tensor_get_f64(tj_tuple_get(r, 0), 0), 1, 0);
    tj_tensor *e = tj_call_eager(f, 3, args);
    CHECK_NEAR(tj_tensor_get_f64(tj_tuple_get(e, 0), 0), 1, 0);
    CHECK_EQ_INT(tj_function_trace_count(f), eager ? 0 : 1);
    tj_function_free(f);

    /* a constant predicate: the branch it takes is inlined (no cond node, no regions left) and
     * keeps its side effects, in order, on every call */
    f = tj_function_new("const_pred", (void *)const_pred, 1, NULL);
    n_then_cb = n_else_cb = 0;
    for (int i = 1; i <= 2; i++) {
        r = tj_call(f, 1, (tj_tensor *[]){tj_scalar_f32(3)});
        CHECK_NEAR(tj_tensor_get_f64(r, 0), 9, 0);
        CHECK_EQ_INT(n_then_cb, i);
        CHECK_EQ_INT(n_else_cb, 0);
        CHECK_STR(last(), "then 3");
    }
    if (!eager) {
        tj_concrete *c = tj_function_get_concrete(f, 1, (tj_spec[]){{.dtype = TJ_F32}});
        char *text = tj_concrete_graph_text(c);
        CHECK_MSG(text && !strstr(text, "= cond ") && !strstr(text, "  graph @"),
                  "the cond on a constant predicate is still there:\n%s", text ? text : "");
        CHECK_HAS(text, "print ");
        CHECK_HAS(text, "host_callback ");
        free(text);
    }
    tj_function_free(f);

    /* errors: branches that disagree (named), a vector predicate, NULL branches */
    f = tj_function_new("mismatched", (void *)mismatched, 1, NULL);
    tj_tensor *v3 = tj_tensor_from_data(TJ_F32, 1, (int64_t[]){3}, (float[]){1, 2, 3});
    r = tj_call(f, 1, &v3); /* eagerly only one branch runs: nothing to compare it with */
    CHECK_EQ_INT(tj_status_of(r), eager ? TJ_OK : TJ_ERR_SHAPE);
    if (!eager)
        CHECK_HAS(tj_error_message(r),
                  "cond: else region result 0 is float32[3], expected float32[6]");
    tj_function_free(f);
    f = tj_function_new("vector_pred", (void *)vector_pred, 1, NULL);
    r = tj_call(f, 1, &v3);
    CHECK_EQ_INT(tj_status_of(r), TJ_ERR_SHAPE);
    CHECK_HAS(tj_error_message(r), "cond: the predicate must be a scalar bool or number, got "
                                   "bool[3]");
    r = tj_call_eager(f, 1, &v3);
    CHECK_EQ_INT(tj_status_of(r), TJ_ERR_SHAPE);
    tj_function_free(f);
    r = tj_cond(tj_scalar_bool(1), NULL, same, 1, &v3, NULL);
    CHECK_EQ_INT(tj_status_of(r), TJ_ERR_INVALID);
    CHECK_HAS(tj_error_message(r), "cond: the then branch is NULL");
    r = tj_cond(tj_scalar_str("x"), same, same, 1, &v3, NULL);
    CHECK_HAS(tj_error_message(r), "predicate must be a scalar bool or number, got string[]");
    tj_set_print_sink(NULL, NULL);
    tj_scope_end();
    return check_done();
}
