/* s15_switch.c — SEMANTICS S15, the many-way form: tj_switch (tf.switch_case, lax.switch). One
 * trace serves every index; only the chosen branch runs (its host callback and print), an index
 * out of range is clamped as lax.switch does, a constant index leaves no cond in the compiled
 * graph, a switch works inside a loop with the index computed from the loop counter, branches
 * may return several values. Errors: a bad index, an empty or NULL branch list, a NULL branch,
 * branches that disagree (named), a branch that fails. */
#include <tracejit.h>

#include "check.h"

static int ran[8], n_traced;
static char last_line[128];
static void sink(const char *line, void *user) {
    (void)user;
    snprintf(last_line, sizeof last_line, "%s", line);
}
static void count(void *user, tj_tensor *x) {
    (void)x;
    ran[(intptr_t)user]++;
}

/* branch k: callback k, print "bk x", result x * (k + 1) + k */
static tj_tensor *branch(int k, tj_tensor *x) {
    char prefix[8];
    snprintf(prefix, sizeof prefix, "b%d", k);
    tj_host_callback((void *)count, (void *)(intptr_t)k, 1, &x);
    tj_print(prefix, 1, &x);
    return tj_add(tj_mul(x, tj_scalar_f32((float)k + 1)), tj_scalar_f32((float)k));
}
#define BRANCH(k)                                                                                  \
    static tj_tensor *b##k(int n, tj_tensor *const *a, void *u) {                                  \
        (void)n, (void)u;                                                                          \
        return branch(k, a[0]);                                                                    \
    }
BRANCH(0)
BRANCH(1)
BRANCH(2)
BRANCH(3)
BRANCH(4)
static const tj_body five[5] = {b0, b1, b2, b3, b4};

static tj_tensor *pick(tj_tensor *i, tj_tensor *x) {
    n_traced++;
    return tj_switch(i, 5, five, 1, &x, NULL);
}
static tj_tensor *pick_const(tj_tensor *x) {
    return tj_switch(tj_scalar_i32(3), 5, five, 1, &x, NULL);
}

/* for i in range(6): x = [x + 1, x * 2, x - 3][i % 3] */
static tj_tensor *inc(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    return tj_add(a[0], tj_scalar_f32(1));
}
static tj_tensor *dbl(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    return tj_mul(a[0], tj_scalar_f32(2));
}
static tj_tensor *sub3(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    return tj_sub(a[0], tj_scalar_f32(3));
}
static tj_tensor *step(int n, tj_tensor *const *a, void *u) {
    (void)n;
    static const tj_body fns[3] = {inc, dbl, sub3};
    return tj_switch(tj_mod(a[0], tj_scalar_i64(3)), 3, fns, 1, &a[1], u);
}
static tj_tensor *loop(tj_tensor *n, tj_tensor *x) {
    return tj_for_range(tj_scalar_i64(0), n, tj_scalar_i64(1), step, 1, &x, NULL);
}

/* two results per branch */
static tj_tensor *pair0(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    return tj_tuple(2, (tj_tensor *[]){tj_add(a[0], a[1]), tj_sub(a[0], a[1])});
}
static tj_tensor *pair1(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    return tj_tuple(2, (tj_tensor *[]){tj_mul(a[0], a[1]), a[0]});
}
static tj_tensor *pairs(tj_tensor *i, tj_tensor *x, tj_tensor *y) {
    return tj_switch(i, 2, (tj_body[]){pair0, pair1}, 2, (tj_tensor *[]){x, y}, NULL);
}

/* branches that disagree */
static tj_tensor *vec3(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    return tj_broadcast_to(a[0], 1, (int64_t[]){3});
}
static tj_tensor *vec4(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    return tj_broadcast_to(a[0], 1, (int64_t[]){4});
}
static tj_tensor *as_int(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    return tj_cast(tj_broadcast_to(a[0], 1, (int64_t[]){3}), TJ_I32);
}
static tj_tensor *two_vals(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    return tj_tuple(2, (tj_tensor *[]){a[0], a[0]});
}
static tj_tensor *broken(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    return tj_matmul(a[0], a[0]); /* a scalar: rank error */
}
static tj_tensor *mismatched(tj_tensor *i, tj_tensor *x) {
    return tj_switch(i, 3, (tj_body[]){vec3, vec3, vec4}, 1, &x, NULL);
}
static tj_tensor *wrong_dtype(tj_tensor *i, tj_tensor *x) {
    return tj_switch(i, 2, (tj_body[]){vec3, as_int}, 1, &x, NULL);
}
static tj_tensor *wrong_count(tj_tensor *i, tj_tensor *x) {
    return tj_switch(i, 2, (tj_body[]){vec3, two_vals}, 1, &x, NULL);
}
static tj_tensor *failing(tj_tensor *i, tj_tensor *x) {
    return tj_switch(i, 2, (tj_body[]){vec3, broken}, 1, &x, NULL);
}

static double call1(tj_function *f, tj_tensor *i, float x) {
    tj_tensor *r = tj_call(f, 2, (tj_tensor *[]){i, tj_scalar_f32(x)});
    CHECK_MSG(tj_status_of(r) == TJ_OK, "%s", tj_error_message(r));
    return tj_tensor_get_f64(r, 0);
}

int main(void) {
    int eager = tj_get_eager();
    tj_scope_begin();
    tj_set_print_sink(sink, NULL);

    /* five branches, one trace; only the chosen one runs; out of range clamps */
    tj_function *f = tj_function_new("pick", (void *)pick, 2, NULL);
    const int64_t idx[] = {0, 1, 2, 3, 4, -7, 99};
    const int want_branch[] = {0, 1, 2, 3, 4, 0, 4};
    for (int c = 0; c < 7; c++) {
        int before[5];
        memcpy(before, ran, sizeof before);
        int k = want_branch[c];
        CHECK_NEAR(call1(f, tj_scalar_i64(idx[c]), 2), 2.0 * (k + 1) + k, 0);
        for (int j = 0; j < 5; j++)
            CHECK_MSG(ran[j] == before[j] + (j == k), "index %lld: branch %d ran %d times",
                      (long long)idx[c], j, ran[j] - before[j]);
        char want[16];
        snprintf(want, sizeof want, "b%d 2", k);
        CHECK_MSG(strcmp(last_line, want) == 0, "printed \"%s\", want \"%s\"", last_line, want);
    }
    CHECK_EQ_INT(n_traced, eager ? 7 : 1);
    CHECK_EQ_INT(tj_function_trace_count(f), eager ? 0 : 1);
    if (!eager) { /* a balanced tree of conds: 4 of them for 5 branches */
        tj_concrete *c =
            tj_function_get_concrete(f, 2, (tj_spec[]){{.dtype = TJ_I64}, {.dtype = TJ_F32}});
        char *text = tj_concrete_graph_text(c);
        int conds = 0;
        for (const char *p = text; p && (p = strstr(p, "= cond ")); p++)
            conds++;
        CHECK_EQ_INT(conds, 4);
        free(text);
    }
    /* an int32 index is a new signature, same answers; eagerly the same */
    CHECK_NEAR(call1(f, tj_scalar_i32(3), 1), 7, 0);
    tj_tensor *e = tj_call_eager(f, 2, (tj_tensor *[]){tj_scalar_i32(1), tj_scalar_f32(5)});
    CHECK_NEAR(tj_tensor_get_f64(e, 0), 11, 0);
    tj_function_free(f);

    /* a constant index: the passes leave the one branch, no cond */
    f = tj_function_new("pick_const", (void *)pick_const, 1, NULL);
    memset(ran, 0, sizeof ran);
    tj_tensor *r = tj_call(f, 1, (tj_tensor *[]){tj_scalar_f32(2)});
    CHECK_NEAR(tj_tensor_get_f64(r, 0), 11, 0);
    CHECK_EQ_INT(ran[3], 1);
    CHECK_EQ_INT(ran[0] + ran[1] + ran[2] + ran[4], 0);
    if (!eager) {
        tj_concrete *c = tj_function_get_concrete(f, 1, (tj_spec[]){{.dtype = TJ_F32}});
        char *text = tj_concrete_graph_text(c);
        CHECK_MSG(text && !strstr(text, "= cond "), "a cond is left:\n%s", text ? text : "");
        CHECK_HAS(text, "prefix=\"b3\"");
        free(text);
    }
    tj_function_free(f);

    /* inside a loop, the index from the counter: x = [x+1, x*2, x-3][i % 3] for i < n */
    f = tj_function_new("loop", (void *)loop, 2, NULL);
    for (int64_t n = 0; n <= 7; n += 7) {
        double x = 1;
        for (int64_t i = 0; i < n; i++)
            x = i % 3 == 0 ? x + 1 : i % 3 == 1 ? x * 2 : x - 3;
        r = tj_call(f, 2, (tj_tensor *[]){tj_scalar_i64(n), tj_scalar_f32(1)});
        CHECK_MSG(tj_status_of(r) == TJ_OK, "%s", tj_error_message(r));
        CHECK_NEAR(tj_tensor_get_f64(r, 0), x, 0);
    }
    CHECK_EQ_INT(tj_function_trace_count(f), eager ? 0 : 1);
    tj_function_free(f);

    /* several results */
    f = tj_function_new("pairs", (void *)pairs, 3, NULL);
    for (int i = 0; i < 2; i++) {
        r = tj_call(f, 3, (tj_tensor *[]){tj_scalar_i32(i), tj_scalar_f32(5), tj_scalar_f32(2)});
        CHECK_EQ_INT(tj_tuple_size(r), 2);
        CHECK_NEAR(tj_tensor_get_f64(tj_tuple_get(r, 0), 0), i ? 10 : 7, 0);
        CHECK_NEAR(tj_tensor_get_f64(tj_tuple_get(r, 1), 0), i ? 5 : 3, 0);
    }
    tj_function_free(f);

    /* errors: branches that disagree (traced: named; eagerly only one runs) */
    struct {
        const char *name;
        void *fn;
        const char *msg;
        tj_status code; /* a dtype that differs is TJ_ERR_DTYPE, anything else TJ_ERR_SHAPE */
    } bad[] = {
        {"mismatched", (void *)mismatched,
         "switch: branch 2 result 0 is float32[4], branch 0 "
         "returned float32[3]",
         TJ_ERR_SHAPE},
        {"wrong_dtype", (void *)wrong_dtype,
         "switch: branch 1 result 0 is int32[3], branch 0 "
         "returned float32[3]",
         TJ_ERR_DTYPE},
        {"wrong_count", (void *)wrong_count,
         "switch: branch 1 returns 2 values (a tuple), branch "
         "0 returned 1",
         TJ_ERR_SHAPE},
    };
    for (size_t c = 0; c < sizeof bad / sizeof bad[0]; c++) {
        f = tj_function_new(bad[c].name, bad[c].fn, 2, NULL);
        r = tj_call(f, 2, (tj_tensor *[]){tj_scalar_i32(0), tj_scalar_f32(1)});
        CHECK_EQ_INT(tj_status_of(r), eager ? TJ_OK : bad[c].code);
        if (!eager)
            CHECK_HAS(tj_error_message(r), bad[c].msg);
        tj_function_free(f);
    }
    /* a branch that fails: its error, traced and (when it is the one run) eagerly */
    f = tj_function_new("failing", (void *)failing, 2, NULL);
    r = tj_call(f, 2, (tj_tensor *[]){tj_scalar_i32(1), tj_scalar_f32(1)});
    CHECK(tj_status_of(r) != TJ_OK);
    CHECK_HAS(tj_error_message(r), "matmul");
    tj_function_free(f);

    /* a bad index, a bad branch list */
    tj_tensor *x = tj_scalar_f32(1);
    r = tj_switch(tj_scalar_f32(1), 5, five, 1, &x, NULL);
    CHECK_EQ_INT(tj_status_of(r), TJ_ERR_DTYPE);
    CHECK_HAS(tj_error_message(r), "switch: the branch index must be an integer scalar, got "
                                   "float32[]");
    tj_tensor *v = tj_tensor_from_data(TJ_I32, 1, (int64_t[]){2}, (int32_t[]){0, 1});
    r = tj_switch(v, 5, five, 1, &x, NULL);
    CHECK_HAS(tj_error_message(r), "got int32[2]");
    r = tj_switch(tj_scalar_bool(1), 5, five, 1, &x, NULL);
    CHECK_HAS(tj_error_message(r), "got bool[]");
    r = tj_switch(NULL, 5, five, 1, &x, NULL);
    CHECK_HAS(tj_error_message(r), "switch: the branch index is NULL");
    r = tj_switch(tj_scalar_i32(0), 0, five, 1, &x, NULL);
    CHECK_HAS(tj_error_message(r), "switch: needs a list of at least one branch, got 0");
    r = tj_switch(tj_scalar_i32(0), 2, NULL, 1, &x, NULL);
    CHECK_HAS(tj_error_message(r), "(NULL list)");
    r = tj_switch(tj_scalar_i32(0), 3, (tj_body[]){b0, NULL, b2}, 1, &x, NULL);
    CHECK_HAS(tj_error_message(r), "switch: branch 1 of 3 is NULL");
    r = tj_switch(tj_scalar_i32(0), 2, five, 1, NULL, NULL);
    CHECK_HAS(tj_error_message(r), "switch: bad argument list (n=1)");
    r = tj_switch(tj_matmul(x, x), 2, five, 1, &x, NULL); /* an error index is passed on */
    CHECK_HAS(tj_error_message(r), "matmul");
    r = tj_switch(tj_scalar_i32(1), 2, five, 1, &x, NULL); /* eagerly: branch 1 */
    CHECK_NEAR(tj_tensor_get_f64(r, 0), 3, 0);

    tj_set_print_sink(NULL, NULL);
    tj_scope_end();
    return check_done();
}
