/* seeds.c — the seed notebooks' tf.function examples (SEMANTICS S1–S14, S20, S23) in C.
 * Prints what the seeds print: "Tracing with ..." when (and only when) a trace runs, then the
 * values. Run by the README's first command. Exits non-zero if a value differs from the seeds. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <tracejit.h>

static int failures;
#define EXPECT(cond)                                                                               \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            failures++;                                                                            \
            fprintf(stderr, "seeds.c:%d: unexpected: %s\n", __LINE__, #cond);                      \
        }                                                                                          \
    } while (0)

static void show(tj_tensor *t) {
    tj_tensor_fprint(stdout, t);
}
static void section(const char *s) {
    printf("\n== %s\n", s);
}

/* S1, S3: polymorphism */
static tj_tensor *dbl(tj_tensor *a) {
    char *s = tj_tensor_str(a);
    printf("Tracing with %s\n", s);
    free(s);
    return tj_add(a, a);
}

/* S4: static arguments */
static tj_tensor *traced_with(tj_tensor *x) {
    char *s = tj_tensor_values_str(x);
    printf("Traced with %s\n", tj_tensor_is_symbolic(x) ? "a tensor" : s);
    free(s);
    tj_print("Executed with", 1, &x);
    return NULL;
}

static tj_tensor *train(tj_tensor *num_steps) {
    char *s = tj_tensor_is_symbolic(num_steps) ? tj_tensor_str(num_steps)
                                               : tj_tensor_values_str(num_steps);
    printf("Tracing with num_steps = %s\n", s);
    free(s);
    return NULL;
}

/* S5 */
static tj_tensor *tracing_f(void) {
    printf("Tracing!\n");
    tj_print("Executing", 0, NULL);
    return NULL;
}

/* S7 */
static tj_tensor *next_collatz(tj_tensor *x) {
    char *s = tj_tensor_str(x);
    printf("Tracing with %s\n", s);
    free(s);
    tj_tensor *two = tj_scalar_i32(2);
    tj_tensor *even = tj_equal(tj_mod(x, two), tj_scalar_i32(0));
    return tj_where(even, tj_floordiv(x, two),
                    tj_add(tj_mul(tj_scalar_i32(3), x), tj_scalar_i32(1)));
}

/* S10 */
static tj_variable *counter;
static tj_tensor *increment(void) {
    return tj_assign_add(counter, tj_scalar_i32(1));
}

/* S11 */
static tj_variable *state[2];
static tj_tensor *stateful(tj_tensor *x) {
    if (!state[0]) {
        state[0] = tj_variable_new(tj_mul(tj_scalar_f32(2.0f), x), "state0");
        state[1] =
            tj_variable_new(tj_mul(tj_variable_read(state[0]), tj_scalar_f32(3.0f)), "state1");
    }
    return tj_mul(tj_mul(tj_variable_read(state[0]), x), tj_variable_read(state[1]));
}

static tj_variable *leaked;
static tj_tensor *creates_variable(tj_tensor *x) {
    tj_variable *v = tj_variable_new(tj_scalar_f32(1.0f), "v");
    tj_tensor *r = tj_assign_add(v, x);
    if (v) {
        tj_variable_free(leaked);
        leaked = v;
    }
    return r;
}

/* S13 */
static int64_t external_list[16];
static int n_external;
static void side_effect(void *user, tj_tensor *x) {
    (void)user;
    printf("Host side effect\n");
    if (n_external < 16)
        external_list[n_external++] = (int64_t)tj_tensor_get_f64(x, 0);
}
static tj_tensor *with_callback(tj_tensor *x) {
    tj_host_callback((void *)side_effect, NULL, 1, &x);
    return NULL;
}

/* S14 */
static tj_variable *external_var;
static int iterator[] = {0, 1, 2, 3}, iter_pos;
static tj_tensor *buggy_consume_next(void) {
    tj_tensor *v = tj_assign_add(external_var, tj_scalar_i32(iterator[iter_pos++]));
    tj_print("Value of external_var:", 1, &v);
    return NULL;
}

/* S20 */
static tj_tensor *add_fn(tj_tensor *a, tj_tensor *b) {
    return tj_add(a, b);
}
static tj_function *add_function;
static tj_tensor *dense_layer(tj_tensor *x, tj_tensor *w, tj_tensor *b) {
    tj_tensor *args[2] = {tj_matmul(x, w), b};
    return tj_call(add_function, 2, args);
}

/* S23 */
static tj_tensor *unused_gather(tj_tensor *x) {
    tj_gather(x, tj_scalar_i32(1), 0); /* out of range, result unused: pruned */
    return x;
}

int main(void) {
    tj_scope_begin();

    section("S1/S3: tracing and polymorphism");
    tj_function *f = tj_function_new("double", (void *)dbl, 1,
                                     &(tj_function_options){.arg_names = (const char *[]){"a"}});
    tj_tensor *r = tj_call(f, 1, (tj_tensor *[]){tj_scalar_i32(1)});
    show(r);
    EXPECT(tj_tensor_get_f64(r, 0) == 2);
    r = tj_call(f, 1, (tj_tensor *[]){tj_scalar_i32(2)});
    show(r);
    EXPECT(tj_tensor_get_f64(r, 0) == 4);
    r = tj_call(f, 1, (tj_tensor *[]){tj_scalar_f32(1.1f)});
    show(r);
    EXPECT(fabs(tj_tensor_get_f64(r, 0) - 2.2) < 1e-6);
    r = tj_call(f, 1, (tj_tensor *[]){tj_scalar_str("a")});
    show(r);
    EXPECT(tj_tensor_dtype(r) == TJ_STRING &&
           strcmp(((const tj_string *)tj_tensor_data(r))->data, "aa") == 0);
    EXPECT(tj_function_trace_count(f) == 3);

    section("S2: host arrays are tensors too");
    int32_t host[3] = {1, 2, 3};
    int64_t d3[1] = {3};
    tj_call(f, 1, (tj_tensor *[]){tj_tensor_from_data(TJ_I32, 1, d3, host)});
    host[0] = 10;
    r = tj_call(f, 1, (tj_tensor *[]){tj_tensor_from_data(TJ_I32, 1, d3, host)});
    show(r);
    EXPECT(tj_function_trace_count(f) == 4 && tj_tensor_get_f64(r, 0) == 20);

    section("S6: concrete functions");
    printf("Obtaining concrete trace:\n");
    tj_concrete *double_strings = tj_function_get_concrete(f, 1, (tj_spec[]){{.dtype = TJ_STRING}});
    printf("Executing traced function:\n");
    show(tj_concrete_call(double_strings, 1, (tj_tensor *[]){tj_scalar_str("a")}));
    show(tj_concrete_call(double_strings, 1, (tj_tensor *[]){tj_scalar_str("b")}));
    printf("Using a concrete trace with incompatible types will throw an error\n");
    r = tj_concrete_call(double_strings, 1, (tj_tensor *[]){tj_scalar_i32(1)});
    printf("Caught expected error: %s\n", tj_error_message(r));
    EXPECT(tj_status_of(r) == TJ_ERR_SIGNATURE);

    section("S8: concrete signatures");
    char *sigs = tj_function_signatures(f);
    printf("%s", sigs);
    free(sigs);
    tj_function_free(f);

    section("S5: a new function object has its own cache");
    for (int i = 0; i < 2; i++) {
        tj_function *g = tj_function_new("f", (void *)tracing_f, 0, NULL);
        tj_call(g, 0, NULL);
        tj_function_free(g);
    }

    section("S7: input signatures");
    tj_spec sig = {.dtype = TJ_I32, .rank = 1, .dims = {-1}};
    tj_function *collatz = tj_function_new(
        "next_collatz", (void *)next_collatz, 1,
        &(tj_function_options){
            .n_input_signature = 1, .input_signature = &sig, .arg_names = (const char *[]){"x"}});
    int64_t d2[1] = {2}, d22[2] = {2, 2};
    r = tj_call(collatz, 1, (tj_tensor *[]){tj_tensor_from_data(TJ_I32, 1, d2, (int32_t[]){1, 2})});
    show(r);
    EXPECT(tj_tensor_get_f64(r, 0) == 4 && tj_tensor_get_f64(r, 1) == 1);
    r = tj_call(collatz, 1,
                (tj_tensor *[]){tj_tensor_from_data(TJ_I32, 2, d22, (int32_t[]){1, 2, 3, 4})});
    printf("Caught expected error: %s\n", tj_error_message(r));
    EXPECT(tj_status_of(r) == TJ_ERR_SIGNATURE);
    tj_function_free(collatz);

    section("S4: static arguments retrace per value");
    tj_function *tr =
        tj_function_new("train", (void *)train, 1,
                        &(tj_function_options){.arg_names = (const char *[]){"num_steps"}});
    tj_call(tr, 1, (tj_tensor *[]){tj_static_i64(10)});
    tj_call(tr, 1, (tj_tensor *[]){tj_static_i64(20)});
    tj_call(tr, 1, (tj_tensor *[]){tj_scalar_i32(10)});
    tj_call(tr, 1, (tj_tensor *[]){tj_scalar_i32(20)});
    EXPECT(tj_function_trace_count(tr) == 3);
    tj_function_free(tr);

    section("S12: print runs on every call; host printf only when tracing");
    tj_function *tw = tj_function_new("f", (void *)traced_with, 1, NULL);
    tj_call(tw, 1, (tj_tensor *[]){tj_static_i64(1)});
    tj_call(tw, 1, (tj_tensor *[]){tj_static_i64(1)});
    tj_call(tw, 1, (tj_tensor *[]){tj_static_i64(2)});
    EXPECT(tj_function_trace_count(tw) == 2);
    tj_function_free(tw);

    section("S13: host callbacks run on every call");
    tj_function *cb = tj_function_new("f", (void *)with_callback, 1, NULL);
    for (int i = 0; i < 3; i++)
        tj_call(cb, 1, (tj_tensor *[]){tj_scalar_i32(1)});
    printf("external_list has %d items, first %lld\n", n_external, (long long)external_list[0]);
    EXPECT(n_external == 3 && external_list[0] == 1);
    tj_function_free(cb);

    section("S14: host state is frozen into the trace");
    external_var = tj_variable_new(tj_scalar_i32(0), "external_var");
    tj_function *bc = tj_function_new("buggy_consume_next", (void *)buggy_consume_next, 0, NULL);
    for (int i = 0; i < 3; i++)
        tj_call(bc, 0, NULL);
    EXPECT(iter_pos == 1);
    tj_function_free(bc);
    tj_variable_free(external_var);

    section("S10: captured variables");
    counter = tj_variable_new(tj_scalar_i32(0), "a");
    tj_function *inc = tj_function_new("g", (void *)increment, 0, NULL);
    for (int i = 1; i <= 3; i++) {
        r = tj_call(inc, 0, NULL);
        show(r);
        EXPECT(tj_tensor_get_f64(r, 0) == i);
    }
    tj_function_free(inc);
    tj_variable_free(counter);

    section("S11: variables only on the first trace");
    tj_function *cv = tj_function_new("f", (void *)creates_variable, 1, NULL);
    r = tj_call(cv, 1, (tj_tensor *[]){tj_scalar_f32(1.0f)});
    printf("Caught expected error: %s\n", tj_error_message(r));
    EXPECT(tj_status_of(r) == TJ_ERR_STATE);
    tj_function_free(cv);
    tj_variable_free(leaked);
    tj_function *fn = tj_function_new("fn", (void *)stateful, 1, NULL);
    r = tj_call(fn, 1, (tj_tensor *[]){tj_scalar_f32(1.0f)});
    show(r);
    EXPECT(tj_tensor_get_f64(r, 0) == 12);
    r = tj_call(fn, 1, (tj_tensor *[]){tj_scalar_f32(3.0f)});
    show(r);
    EXPECT(tj_tensor_get_f64(r, 0) == 36);
    tj_function_free(fn);
    tj_variable_free(state[0]);
    tj_variable_free(state[1]);

    section("S20: nested functions");
    add_function = tj_function_new("add", (void *)add_fn, 2, NULL);
    tj_tensor *(*dense)(tj_tensor *, tj_tensor *, tj_tensor *) =
        tj_jit_compile((void *)dense_layer, 3, NULL);
    int64_t d32[2] = {3, 2}, d2b[1] = {2};
    r = dense(tj_ones(TJ_F32, 2, d32), tj_ones(TJ_F32, 2, d22), tj_ones(TJ_F32, 1, d2b));
    show(r);
    EXPECT(tj_tensor_numel(r) == 6 && tj_tensor_get_f64(r, 5) == 3);
    tj_jit_free((void *)dense);
    tj_function_free(add_function);

    section("S23: non-strict execution");
    r = tj_gather(tj_tensor_from_data(TJ_I32, 1, (int64_t[]){1}, (int32_t[]){7}), tj_scalar_i32(1),
                  0);
    printf("Eager gather fails: %s\n", tj_error_message(r));
    tj_function *ug = tj_function_new("unused_gather", (void *)unused_gather, 1, NULL);
    r = tj_call(ug, 1,
                (tj_tensor *[]){tj_tensor_from_data(TJ_I32, 1, (int64_t[]){1}, (int32_t[]){7})});
    show(r);
    EXPECT(tj_status_of(r) == TJ_OK);
    tj_function_free(ug);

    tj_scope_end();
    printf("\nseeds: %s\n", failures ? "FAILED" : "all values as in the seeds");
    return failures ? 1 : 0;
}
