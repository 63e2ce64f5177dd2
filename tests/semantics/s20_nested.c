/* s20_nested.c — SEMANTICS S20: a function calling another traced function (or a plain C helper
 * that calls ops) is traced as one graph: dense_layer calling add on matmul(x, w) and b gives
 * [[3,3],[3,3],[3,3]] for ones inputs. The inner function is inlined (it never traces itself). */
#include <tracejit.h>

#include "check.h"

static int n_inner_runs, n_outer_runs, n_helper_runs;
static tj_function *add_function;

static tj_tensor *add_fn(tj_tensor *a, tj_tensor *b) {
    n_inner_runs++;
    return tj_add(a, b);
}

static tj_tensor *dense_layer(tj_tensor *x, tj_tensor *w, tj_tensor *b) {
    n_outer_runs++;
    tj_tensor *args[2] = {tj_matmul(x, w), b};
    return tj_call(add_function, 2, args);
}

/* a plain C helper, no tj_function */
static tj_tensor *affine(tj_tensor *x, tj_tensor *w, tj_tensor *b) {
    n_helper_runs++;
    return tj_add(tj_matmul(x, w), b);
}
static tj_tensor *two_layers(tj_tensor *x, tj_tensor *w, tj_tensor *b) {
    n_outer_runs++;
    return tj_relu(affine(affine(x, w, b), tj_transpose(w, NULL), tj_scalar_f32(-10.0f)));
}

static int all_equal(tj_tensor *r, double v) {
    int ok = tj_status_of(r) == TJ_OK;
    for (int64_t i = 0; ok && i < tj_tensor_numel(r); i++)
        ok = tj_tensor_get_f64(r, i) == v;
    return ok;
}

int main(void) {
    tj_scope_begin();
    add_function = tj_function_new("add", (void *)add_fn, 2, NULL);
    tj_function *dense = tj_function_new("dense_layer", (void *)dense_layer, 3, NULL);
    int64_t d32[2] = {3, 2}, d22[2] = {2, 2}, d2[1] = {2};
    tj_tensor *x = tj_ones(TJ_F32, 2, d32), *w = tj_ones(TJ_F32, 2, d22),
              *b = tj_ones(TJ_F32, 1, d2);
    for (int k = 0; k < 3; k++) {
        tj_tensor *r = tj_call(dense, 3, (tj_tensor *[]){x, w, b});
        CHECK_EQ_INT(tj_tensor_rank(r), 2);
        CHECK_EQ_INT(tj_tensor_dims(r)[0], 3);
        CHECK_EQ_INT(tj_tensor_dims(r)[1], 2);
        CHECK(all_equal(r, 3.0));
        char *s = tj_tensor_values_str(r);
        CHECK_STR(s, "[[3 3] [3 3] [3 3]]");
        free(s);
    }
    CHECK_EQ_INT(tj_function_trace_count(dense), 1);
    CHECK_EQ_INT(n_outer_runs, 1);
    /* inlined: the inner C code ran once, inside the outer trace, and never traced itself */
    CHECK_EQ_INT(n_inner_runs, 1);
    CHECK_EQ_INT(tj_function_trace_count(add_function), 0);
    CHECK_EQ_INT(tj_function_n_concrete(add_function), 0);

    /* one graph: the matmul and the add are both in the outer concrete function */
    tj_concrete *c = tj_function_get_concrete(
        dense, 3,
        (tj_spec[]){{TJ_F32, 2, {3, 2}, NULL}, {TJ_F32, 2, {2, 2}, NULL}, {TJ_F32, 1, {2}, NULL}});
    CHECK(c != NULL);
    CHECK_EQ_INT(tj_function_trace_count(dense), 1);
    char *text = tj_concrete_graph_text(c);
    CHECK_HAS(text, "matmul");
    CHECK_HAS(text, "add");
    free(text);

    /* the inner function still works on its own */
    tj_tensor *r = tj_call(add_function, 2, (tj_tensor *[]){tj_scalar_f32(1), tj_scalar_f32(2)});
    CHECK_NEAR(tj_tensor_get_f64(r, 0), 3.0, 0);
    CHECK_EQ_INT(tj_function_trace_count(add_function), 1);

    /* a plain C helper called twice inside a trace */
    n_outer_runs = 0;
    tj_function *tl = tj_function_new("two_layers", (void *)two_layers, 3, NULL);
    for (int k = 0; k < 2; k++) {
        r = tj_call(tl, 3, (tj_tensor *[]){x, w, b});
        /* affine(x) = 3 everywhere; 3*1 + 3*1 - 10 = -4 -> relu 0 */
        CHECK(all_equal(r, 0.0));
    }
    tj_tensor *b5 = tj_fill(1, d2, tj_scalar_f32(5.0f));
    r = tj_call(tl, 3, (tj_tensor *[]){x, w, b5}); /* (2 + 5) * 2 - 10 = 4 */
    CHECK(all_equal(r, 4.0));
    CHECK_EQ_INT(tj_tensor_numel(r), 6);
    CHECK_EQ_INT(tj_function_trace_count(tl), 1);
    CHECK_EQ_INT(n_outer_runs, 1);
    CHECK_EQ_INT(n_helper_runs, 2);

    /* the same through tj_jit_compile */
    tj_tensor *(*fast)(tj_tensor *, tj_tensor *, tj_tensor *) =
        tj_jit_compile((void *)dense_layer, 3, NULL);
    CHECK(fast != NULL);
    r = fast(x, w, b);
    CHECK(all_equal(r, 3.0));
    CHECK_EQ_INT(tj_function_trace_count(tj_jit_function((void *)fast)), 1);
    tj_jit_free((void *)fast);

    tj_function_free(tl);
    tj_function_free(dense);
    tj_function_free(add_function);
    tj_scope_end();
    return check_done();
}
