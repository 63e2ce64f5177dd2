/* s14_host_state.c — SEMANTICS S14: host state read by the user's code (the seed's Python
 * iterator) is frozen into the trace: calling again gives the same value. This is the expected
 * pitfall: pass changing values as tensors (or keep them in variables) instead. */
#include <tracejit.h>

#include "check.h"

#define MAX_LINES 16
static char lines[MAX_LINES][96];
static int n_lines;
static void sink(const char *line, void *user) {
    (void)user;
    if (n_lines < MAX_LINES)
        snprintf(lines[n_lines++], sizeof lines[0], "%s", line);
}

static tj_variable *external_var;
static const int iterator[] = {5, 6, 7, 8};
static int iter_pos;

/* buggy: next(iterator) is read on the host, once, while tracing */
static tj_tensor *buggy_consume_next(void) {
    tj_tensor *v = tj_assign_add(external_var, tj_scalar_i32(iterator[iter_pos++]));
    tj_print("Value of external_var:", 1, &v);
    return v;
}

/* good: the value is a tensor argument */
static tj_tensor *good_consume_next(tj_tensor *next) {
    tj_tensor *v = tj_assign_add(external_var, next);
    tj_print("Value of external_var:", 1, &v);
    return v;
}

int main(void) {
    tj_scope_begin();
    tj_set_print_sink(sink, NULL);
    external_var = tj_variable_new(tj_scalar_i32(0), "external_var");
    tj_function *bc = tj_function_new("buggy_consume_next", (void *)buggy_consume_next, 0, NULL);
    for (int i = 1; i <= 3; i++) {
        tj_tensor *r = tj_call(bc, 0, NULL);
        CHECK_EQ_INT(tj_tensor_get_f64(r, 0), 5 * i); /* always +5: the first item, frozen */
    }
    CHECK_EQ_INT(iter_pos, 1); /* the iterator advanced once */
    CHECK_EQ_INT(n_lines, 3);
    CHECK_STR(lines[0], "Value of external_var: 5");
    CHECK_STR(lines[1], "Value of external_var: 10");
    CHECK_STR(lines[2], "Value of external_var: 15");
    tj_function_free(bc);

    /* eagerly the same code reads the iterator every call */
    tj_assign(external_var, tj_scalar_i32(0));
    bc = tj_function_new("buggy_consume_next", (void *)buggy_consume_next, 0, NULL);
    tj_call_eager(bc, 0, NULL);
    tj_tensor *r = tj_call_eager(bc, 0, NULL);
    CHECK_EQ_INT(iter_pos, 3);
    CHECK_EQ_INT(tj_tensor_get_f64(r, 0), 6 + 7);
    tj_function_free(bc);

    /* passing the values as tensors: one trace, every value used */
    tj_assign(external_var, tj_scalar_i32(0));
    n_lines = 0;
    tj_function *gc = tj_function_new("good_consume_next", (void *)good_consume_next, 1, NULL);
    for (int i = 0; i < 4; i++)
        r = tj_call(gc, 1, (tj_tensor *[]){tj_scalar_i32(iterator[i])});
    CHECK_EQ_INT(tj_tensor_get_f64(r, 0), 5 + 6 + 7 + 8);
    CHECK_EQ_INT(tj_function_trace_count(gc), 1);
    CHECK_EQ_INT(n_lines, 4);
    CHECK_STR(lines[3], "Value of external_var: 26");
    tj_function_free(gc);

    tj_variable_free(external_var);
    tj_set_print_sink(NULL, NULL);
    tj_scope_end();
    return check_done();
}
