/* s05_new_function_object.c — SEMANTICS S5: wrapping the same C function twice gives two
 * functions, each with its own signature cache: each traces on its first call (the compiled code
 * may be shared through the content-hash cache, which is invisible here except for speed). */
#include <tracejit.h>

#include "check.h"

static int n_tracing;
static int n_exec;
static void count_lines(const char *line, void *user) {
    (void)user;
    if (strcmp(line, "Executing") == 0)
        n_exec++;
}

static tj_tensor *tracing_f(void) {
    n_tracing++; /* the seed's print("Tracing!") */
    tj_print("Executing", 0, NULL);
    return NULL;
}

static tj_tensor *sq(tj_tensor *x) {
    n_tracing++;
    return tj_mul(x, x);
}

int main(void) {
    tj_scope_begin();
    tj_set_print_sink(count_lines, NULL);
    for (int i = 0; i < 2; i++) {
        tj_function *g = tj_function_new("f", (void *)tracing_f, 0, NULL);
        CHECK_EQ_INT(tj_function_trace_count(g), 0);
        tj_tensor *r = tj_call(g, 0, NULL);
        CHECK_EQ_INT(tj_status_of(r), TJ_OK);
        CHECK_EQ_INT(n_tracing, i + 1); /* "Tracing!" for each new function object */
        CHECK_EQ_INT(tj_function_trace_count(g), 1);
        tj_call(g, 0, NULL);
        CHECK_EQ_INT(n_tracing, i + 1);
        tj_function_free(g);
    }
    CHECK_EQ_INT(n_exec, 4);

    /* two live wrappers of one C function: separate caches, same results */
    n_tracing = 0;
    tj_function *a = tj_function_new("sq", (void *)sq, 1, NULL);
    tj_function *b = tj_function_new("sq", (void *)sq, 1, NULL);
    CHECK(a != b);
    tj_tensor *ra = tj_call(a, 1, (tj_tensor *[]){tj_scalar_f32(3.0f)});
    CHECK_EQ_INT(n_tracing, 1);
    tj_tensor *rb = tj_call(b, 1, (tj_tensor *[]){tj_scalar_f32(4.0f)});
    CHECK_EQ_INT(n_tracing, 2);
    CHECK_NEAR(tj_tensor_get_f64(ra, 0), 9.0, 0);
    CHECK_NEAR(tj_tensor_get_f64(rb, 0), 16.0, 0);
    CHECK_EQ_INT(tj_function_trace_count(a), 1);
    CHECK_EQ_INT(tj_function_trace_count(b), 1);
    tj_call(a, 1, (tj_tensor *[]){tj_scalar_f32(5.0f)});
    tj_call(b, 1, (tj_tensor *[]){tj_scalar_f32(6.0f)});
    CHECK_EQ_INT(n_tracing, 2);
    /* freeing one leaves the other working */
    tj_function_free(a);
    rb = tj_call(b, 1, (tj_tensor *[]){tj_scalar_f32(-2.0f)});
    CHECK_NEAR(tj_tensor_get_f64(rb, 0), 4.0, 0);
    CHECK_EQ_INT(n_tracing, 2);
    tj_function_free(b);

    tj_set_print_sink(NULL, NULL);
    tj_scope_end();
    return check_done();
}
