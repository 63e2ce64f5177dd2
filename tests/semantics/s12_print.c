/* s12_print.c — SEMANTICS S12: a print op inside a function prints its tensors on every
 * execution of the compiled code, in program order, and is never pruned (its result is unused).
 * Host printf-like code runs only while tracing. The print sink captures the exact lines. */
#include <tracejit.h>

#include "check.h"

#define MAX_LINES 64
static char lines[MAX_LINES][160];
static int n_lines;
static void sink(const char *line, void *user) {
    (void)user;
    if (n_lines < MAX_LINES)
        snprintf(lines[n_lines++], sizeof lines[0], "%s", line);
}

static int n_traced;
static tj_tensor *traced_with(tj_tensor *x) {
    n_traced++; /* the seed's print("Traced with", x) */
    tj_print("Executed with", 1, &x);
    return NULL;
}

/* several prints in program order, around computations, results unused */
static tj_tensor *ordered(tj_tensor *x, tj_tensor *y) {
    tj_print("first", 1, &x);
    tj_tensor *s = tj_add(x, y);
    tj_print("sum", 1, &s);
    tj_tensor *both[2] = {x, y};
    tj_print("both", 2, both);
    tj_tensor *p = tj_mul(s, y);
    tj_print("", 1, &p);
    tj_print("last", 0, NULL);
    return tj_sub(x, y);
}

int main(void) {
    tj_scope_begin();
    tj_set_print_sink(sink, NULL);
    tj_function *f = tj_function_new("f", (void *)traced_with, 1, NULL);
    tj_call(f, 1, (tj_tensor *[]){tj_static_i64(1)});
    tj_call(f, 1, (tj_tensor *[]){tj_static_i64(1)});
    tj_call(f, 1, (tj_tensor *[]){tj_static_i64(2)});
    CHECK_EQ_INT(n_traced, 2);
    CHECK_EQ_INT(n_lines, 3);
    CHECK_STR(lines[0], "Executed with 1");
    CHECK_STR(lines[1], "Executed with 1");
    CHECK_STR(lines[2], "Executed with 2");
    /* tensor arguments print their runtime values */
    n_lines = 0;
    int64_t d3[1] = {3};
    tj_call(f, 1, (tj_tensor *[]){tj_tensor_from_data(TJ_I32, 1, d3, (int32_t[]){1, 2, 3})});
    tj_call(f, 1, (tj_tensor *[]){tj_tensor_from_data(TJ_I32, 1, d3, (int32_t[]){4, 5, 6})});
    CHECK_EQ_INT(n_traced, 3);
    CHECK_EQ_INT(n_lines, 2);
    CHECK_STR(lines[0], "Executed with [1 2 3]");
    CHECK_STR(lines[1], "Executed with [4 5 6]");
    tj_function_free(f);

    /* order and pruning */
    n_lines = 0;
    tj_function *g = tj_function_new("ordered", (void *)ordered, 2, NULL);
    for (int k = 0; k < 2; k++) {
        tj_tensor *r = tj_call(g, 2, (tj_tensor *[]){tj_scalar_i32(5 + k), tj_scalar_i32(2)});
        CHECK_EQ_INT(tj_tensor_get_f64(r, 0), 3 + k);
    }
    CHECK_EQ_INT(tj_function_trace_count(g), 1);
    const char *want[10] = {"first 5", "sum 7", "both 5 2", "14", "last",
                            "first 6", "sum 8", "both 6 2", "16", "last"};
    CHECK_EQ_INT(n_lines, 10);
    for (int i = 0; i < 10 && i < n_lines; i++)
        CHECK_STR(lines[i], want[i]);
    tj_function_free(g);

    /* eagerly, print prints at once */
    n_lines = 0;
    tj_tensor *e = tj_scalar_f32(2.5f);
    CHECK_EQ_INT(tj_print("eager", 1, &e), TJ_OK);
    CHECK_EQ_INT(n_lines, 1);
    CHECK_STR(lines[0], "eager 2.5");
    /* printing an error tensor or NULL is an error, not a crash */
    tj_tensor *bad = tj_error_new(TJ_ERR_INVALID, "bad %d", 1);
    CHECK(tj_print("x", 1, &bad) != TJ_OK);
    CHECK(tj_print("x", 1, NULL) != TJ_OK);

    tj_set_print_sink(NULL, NULL);
    tj_scope_end();
    return check_done();
}
