/* seeds.c — the seed notebooks' tf.function examples (SEMANTICS S1–S20, S23) in C.
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

/* S27: the seed's DemoModule */
static tj_variable *demo_x;
static tj_tensor *addprint(tj_tensor *a) {
    tj_assign_add(demo_x, a);
    tj_tensor *v = tj_variable_read(demo_x);
    tj_print(NULL, 1, &v);
    return v;
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

/* S15: square_if_positive as a real branch */
static tj_tensor *square_b(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    return tj_mul(a[0], a[0]);
}
static tj_tensor *zero_b(int n, tj_tensor *const *a, void *u) { /* x = 0 */
    (void)n, (void)u;
    return tj_zeros(tj_tensor_dtype(a[0]), tj_tensor_rank(a[0]), tj_tensor_dims(a[0]));
}
static tj_tensor *square_if_positive(tj_tensor *x) {
    printf("Tracing square_if_positive\n");
    return tj_cond(tj_greater(x, tj_scalar_f32(0)), square_b, zero_b, 1, &x, NULL);
}
/* S16: while tf.reduce_sum(x) > 1: tf.print(x); x = tf.tanh(x) */
static tj_tensor *sum_gt_1(int n, tj_tensor *const *x, void *u) {
    (void)n, (void)u;
    return tj_greater(tj_sum(x[0], 0, NULL, 0), tj_scalar_f32(1));
}
static tj_tensor *print_tanh(int n, tj_tensor *const *x, void *u) {
    (void)n, (void)u;
    tj_print("", 1, x);
    return tj_tanh(x[0]);
}
static tj_tensor *tanh_loop(tj_tensor *x) {
    return tj_while_loop(sum_gt_1, print_tanh, 1, &x, NULL);
}
/* S17: fizzbuzz over tf.range(1, n + 1) */
static tj_tensor *divisible(tj_tensor *i, int64_t k) {
    return tj_equal(tj_mod(i, tj_scalar_i64(k)), tj_scalar_i64(0));
}
#define SAY(name, text)                                                                            \
    static tj_tensor *name(int n, tj_tensor *const *a, void *u) {                                  \
        (void)n, (void)a, (void)u;                                                                 \
        printf("Tracing " text " branch\n");                                                       \
        tj_print(text, 0, NULL);                                                                   \
        return NULL;                                                                               \
    }
SAY(say_fizzbuzz, "fizzbuzz")
SAY(say_fizz, "fizz")
SAY(say_buzz, "buzz")
static tj_tensor *say_i(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    printf("Tracing default branch\n");
    tj_print("", 1, a);
    return NULL;
}
static tj_tensor *elif_buzz(int n, tj_tensor *const *a, void *u) {
    return tj_cond(divisible(a[0], 5), say_buzz, say_i, n, a, u);
}
static tj_tensor *elif_fizz(int n, tj_tensor *const *a, void *u) {
    return tj_cond(divisible(a[0], 3), say_fizz, elif_buzz, n, a, u);
}
static tj_tensor *fizz_body(int n, tj_tensor *const *a, void *u) {
    (void)n;
    printf("Tracing for loop\n");
    return tj_cond(divisible(a[0], 15), say_fizzbuzz, elif_fizz, 1, a, u);
}
static tj_tensor *fizzbuzz(tj_tensor *n) {
    tj_for_range(tj_scalar_i64(1), tj_add(n, tj_scalar_i64(1)), tj_scalar_i64(1), fizz_body, 0,
                 NULL, NULL);
    return NULL;
}
/* S18: the seed's train(dataset): unrolled over a host list, one loop over a tensor */
static int n_pairs;
static tj_tensor *train_list(tj_tensor *w) {
    tj_tensor *loss = tj_scalar_i32(0);
    for (int k = 0; k < n_pairs; k++)
        loss = tj_add(loss, tj_abs(tj_sub(tj_mul(w, tj_scalar_i32(1)), tj_scalar_i32(1))));
    return loss;
}
static tj_tensor *train_step(int n, tj_tensor *const *a, void *u) {
    (void)n;
    tj_tensor *x = tj_gather(a[1], tj_scalar_i64(0), 0), *y = tj_gather(a[1], tj_scalar_i64(1), 0);
    return tj_add(a[0], tj_abs(tj_sub(tj_mul((tj_tensor *)u, y), x)));
}
static tj_tensor *train_tensor(tj_tensor *w, tj_tensor *data) {
    tj_tensor *zero = tj_scalar_i32(0);
    return tj_tuple_get(tj_scan(train_step, 1, &zero, 1, &data, w), 0);
}
/* S19: dynamic_rnn with a tensor array, rnn_step(x, state) = state + x */
static tj_tensor *rnn_time_step(int n, tj_tensor *const *a, void *u) {
    (void)n;
    tj_tensor *state = tj_add(a[1], tj_gather((tj_tensor *)u, a[0], 0));
    tj_tensor *r[2] = {state, tj_tensor_array_write(a[2], a[0], state)};
    return tj_tuple(2, r);
}
static tj_tensor *dynamic_rnn(tj_tensor *input_data, tj_tensor *initial_state) {
    tj_tensor *x = tj_transpose(input_data, (int[]){1, 0, 2}); /* [batch, time, f] -> time major */
    int64_t max_seq_len = tj_tensor_dims(x)[0];
    tj_tensor *init[2] = {initial_state,
                          tj_tensor_array_new(TJ_F32, max_seq_len, 2, tj_tensor_dims(x) + 1)};
    tj_tensor *r = tj_for_range(tj_scalar_i64(0), tj_scalar_i64(max_seq_len), tj_scalar_i64(1),
                                rnn_time_step, 2, init, x);
    return tj_transpose(tj_tensor_array_stack(tj_tuple_get(r, 1)), (int[]){1, 0, 2});
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

    section("S15: conditionals (a real branch, one trace)");
    tj_function *sp = tj_function_new("square_if_positive", (void *)square_if_positive, 1, NULL);
    tj_tensor *p2 = tj_call(sp, 1, (tj_tensor *[]){tj_scalar_f32(2)});
    tj_tensor *m2 = tj_call(sp, 1, (tj_tensor *[]){tj_scalar_f32(-2)});
    show(p2);
    show(m2);
    EXPECT(tj_tensor_get_f64(p2, 0) == 4 && tj_tensor_get_f64(m2, 0) == 0);
    EXPECT(tj_function_trace_count(sp) == 1 || tj_get_eager());
    tj_function_free(sp);

    section("S16: while sum(x) > 1: print(x); x = tanh(x)");
    tj_function *tl = tj_function_new("f", (void *)tanh_loop, 1, NULL);
    r = tj_call(tl, 1, (tj_tensor *[]){tj_random_uniform(TJ_F32, 1, (int64_t[]){5}, 0, 1, 42)});
    show(r);
    EXPECT(tj_tensor_get_f64(tj_sum(r, 0, NULL, 0), 0) <= 1);
    tj_function_free(tl);

    section("S17: fizzbuzz over a tensor range (n = 5, then n = 20, one trace)");
    tj_function *fz = tj_function_new("fizzbuzz", (void *)fizzbuzz, 1, NULL);
    printf("first call:\n");
    tj_call(fz, 1, (tj_tensor *[]){tj_scalar_i64(5)});
    printf("second call:\n");
    tj_call(fz, 1, (tj_tensor *[]){tj_scalar_i64(20)});
    EXPECT(tj_function_trace_count(fz) == 1 || tj_get_eager());
    tj_function_free(fz);

    section("S18: unrolled vs compiled loops (graph sizes)");
    int nodes[3];
    for (int k = 0; k < 2; k++) {
        n_pairs = k ? 10 : 3;
        tj_function *tr2 = tj_function_new("train", (void *)train_list, 1, NULL);
        nodes[k] = tj_concrete_node_count(
            tj_function_get_concrete(tr2, 1, (tj_spec[]){{.dtype = TJ_I32}}));
        printf("train(host list of %d pairs) contains %d nodes in its graph\n", n_pairs, nodes[k]);
        tj_function_free(tr2);
    }
    tj_function *tt = tj_function_new("train", (void *)train_tensor, 2, NULL);
    nodes[2] = tj_concrete_node_count(tj_function_get_concrete(
        tt, 2, (tj_spec[]){{.dtype = TJ_I32}, {.dtype = TJ_I32, .rank = 2, .dims = {-1, 2}}}));
    printf("train(tensor of pairs, any length) contains %d nodes in its graph\n", nodes[2]);
    EXPECT(tj_get_eager() || (nodes[1] > nodes[0] && nodes[2] < nodes[1]));
    tj_function_free(tt);

    section("S19: dynamic_rnn with a tensor array");
    tj_function *dr = tj_function_new("dynamic_rnn", (void *)dynamic_rnn, 2, NULL);
    r = tj_call(dr, 2,
                (tj_tensor *[]){tj_random_uniform(TJ_F32, 3, (int64_t[]){2, 3, 4}, 0, 1, 7),
                                tj_zeros(TJ_F32, 2, (int64_t[]){2, 4})});
    show(r);
    EXPECT(tj_status_of(r) == TJ_OK && tj_tensor_rank(r) == 3);
    tj_function_free(dr);

    section("S26: check numerics");
    tj_enable_check_numerics();
    r = tj_log(tj_scalar_f32(-1));
    printf("%s\n", tj_error_message(r));
    EXPECT(tj_status_of(r) == TJ_ERR_RUNTIME);
    tj_disable_check_numerics();

    section("S27/S29: a module saved and loaded; a checkpoint");
    const char *mdir = getenv("TJ_SEEDS_MODULE_DIR");
    char tmpl[] = "/tmp/tracejit-demo-XXXXXX";
    if (!mdir)
        mdir = mkdtemp(tmpl);
    demo_x = tj_variable_new(tj_scalar_f32(1), "demo_module/x");
    tj_function *ap = tj_function_new("addprint", (void *)addprint, 1, NULL);
    tj_module *demo = tj_module_new("demo_module");
    tj_spec f32_scalar = {.dtype = TJ_F32};
    tj_module_add_function(demo, "addprint", ap, 1, &f32_scalar);
    r = tj_module_call(demo, "addprint", 1, (tj_tensor *[]){tj_scalar_f32(5)});
    EXPECT(tj_tensor_get_f64(r, 0) == 6);
    r = tj_module_call(demo, "addprint", 1, (tj_tensor *[]){tj_scalar_f32(50)});
    EXPECT(tj_tensor_get_f64(r, 0) == 56);
    tj_status st = mdir ? tj_module_save(demo, mdir) : TJ_ERR_IO;
    printf("saved to %s: %s\n", mdir ? mdir : "?", st ? tj_last_error() : "ok");
    EXPECT(st == TJ_OK);
    tj_module *demo2 = st ? NULL : tj_module_load(mdir);
    EXPECT(demo2 != NULL);
    if (demo2) {
        r = tj_module_call(demo2, "addprint", 1, (tj_tensor *[]){tj_scalar_f32(5)});
        EXPECT(tj_tensor_get_f64(r, 0) == 61); /* the loaded copy continues from 56 */
        char *desc = tj_module_describe(demo2);
        printf("%s", desc ? desc : "");
        free(desc);
        tj_module_free(demo2);
    }
    char ck[200];
    snprintf(ck, sizeof ck, "%s/x.ckpt", mdir ? mdir : "/tmp");
    EXPECT(tj_checkpoint_save(ck, 1, &demo_x) == TJ_OK);
    tj_assign(demo_x, tj_scalar_f32(0));
    EXPECT(tj_checkpoint_restore(ck, 1, &demo_x, 0) == TJ_OK);
    r = tj_variable_read(demo_x);
    printf("restored demo_module/x from %s: %g\n", ck, tj_tensor_get_f64(r, 0));
    EXPECT(tj_tensor_get_f64(r, 0) == 56);
    remove(ck);
    if (mdir == tmpl) { /* our own temporary directory */
        char p[300];
        const char *files[3] = {"module.tjm", "addprint.tjir", "variables.ckpt"};
        for (int k = 0; k < 3; k++) {
            snprintf(p, sizeof p, "%s/%s", mdir, files[k]);
            remove(p);
        }
        remove(mdir);
    }
    tj_module_free(demo);
    tj_function_free(ap);
    tj_variable_free(demo_x);

    tj_scope_end();
    printf("\nseeds: %s\n", failures ? "FAILED" : "all values as in the seeds");
    return failures ? 1 : 0;
}
