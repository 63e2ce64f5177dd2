/* test_native_cf.c — scalar branches and loops lowered natively (jit/cpu/llvm/codegen_cf.c, issue
 * 10): every construct (cond, while with and without maximum_iterations, for_range up, down, to an
 * overflow, nested, captured values), integer division as Python's on i32 and i64 (negative
 * operands, MIN / -1), float and bool carried values. Each function's compiled result equals its
 * eager one (exact: the ops used round alike), and the compile log shows the node went native.
 * Errors the native code hands back (a division by zero in iteration 3, a step of 0) come back
 * from the executor with the iteration named. CMake runs it on the interpreter too (TJ_BACKEND=
 * interp: the same values, nothing native). */
#include <stdlib.h>
#include <tracejit.h>

#include "check.h"

static int n_native, n_fallback;
static void on_log(const char *topic, const char *msg, void *user) {
    (void)topic, (void)user;
    if (strstr(msg, "native control flow"))
        n_native++;
    if (strstr(msg, ": executor ("))
        n_fallback++;
}

/* ---- collatz: while n != 1 { n = n % 2 == 0 ? n // 2 : 3n + 1; steps++ } ----------------------
 */
static tj_tensor *ne1(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    return tj_not_equal(a[0], tj_scalar_i64(1));
}
static tj_tensor *halve(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    return tj_floordiv(a[0], tj_scalar_i64(2));
}
static tj_tensor *triple(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    return tj_add(tj_mul(a[0], tj_scalar_i64(3)), tj_scalar_i64(1));
}
static tj_tensor *collatz_step(int n, tj_tensor *const *a, void *u) {
    (void)n;
    tj_tensor *even = tj_equal(tj_mod(a[0], tj_scalar_i64(2)), tj_scalar_i64(0));
    tj_tensor *r[2] = {tj_cond(even, halve, triple, 1, &a[0], u), tj_add(a[1], tj_scalar_i64(1))};
    return tj_tuple(2, r);
}
static tj_tensor *collatz(tj_tensor *x) {
    tj_tensor *init[2] = {x, tj_scalar_i64(0)};
    return tj_tuple_get(tj_while_loop(ne1, collatz_step, 2, init, NULL), 1);
}

/* ---- Python integer division over a range of dividends, T = the dtype of a and b ------------- */
static tj_tensor *div_body(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    /* a: i, acc, x0, d: x = x0 - i (cast to x0's dtype); acc = acc * 3 + (x // d) + (x % d) +
     * div(x, d) */
    tj_tensor *x = tj_sub(a[2], tj_cast(a[0], tj_tensor_dtype(a[2])));
    tj_tensor *t = tj_add(tj_add(tj_floordiv(x, a[3]), tj_mod(x, a[3])), tj_div(x, a[3]));
    tj_tensor *r[3] = {tj_add(tj_mul(a[1], tj_scalar_i32(3)), t), a[2], a[3]};
    return tj_tuple(3, r);
}
static tj_tensor *divisions(tj_tensor *x0, tj_tensor *d) {
    tj_tensor *acc = tj_cast(tj_scalar_i32(0), tj_tensor_dtype(x0));
    tj_tensor *carried[3] = {acc, x0, d}; /* x0 and d ride along unchanged */
    return tj_tuple_get(tj_for_range(tj_scalar_i64(0), tj_scalar_i64(7), tj_scalar_i64(1), div_body,
                                     3, carried, NULL),
                        0);
}

/* ---- a division by zero in iteration 3: 10 // (3 - i) -----------------------------------------
 */
static tj_tensor *by_zero_body(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    return tj_add(a[1], tj_floordiv(tj_scalar_i64(10), tj_sub(tj_scalar_i64(3), a[0])));
}
static tj_tensor *by_zero(tj_tensor *n) {
    tj_tensor *z = tj_scalar_i64(0);
    return tj_for_range(tj_scalar_i64(0), n, tj_scalar_i64(1), by_zero_body, 1, &z, NULL);
}

/* ---- for_range with tensor bounds: sum of i*k (k captured) for i in range(a, b, s) ------------
 */
static tj_tensor *sum_body(int n, tj_tensor *const *a, void *u) {
    (void)n;
    return tj_add(a[1], tj_mul(a[0], (tj_tensor *)u));
}
static tj_tensor *ranged(tj_tensor *a, tj_tensor *b, tj_tensor *s, tj_tensor *k) {
    tj_tensor *z = tj_scalar_i64(0);
    return tj_for_range(a, b, s, sum_body, 1, &z, k);
}

/* ---- maximum_iterations: while x < 100 { x += 1 } stopped after m ------------------------------
 */
static tj_tensor *lt100(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    return tj_less(a[0], tj_scalar_i32(100));
}
static tj_tensor *inc(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    return tj_add(a[0], tj_scalar_i32(1));
}
static tj_tensor *capped(tj_tensor *x) {
    return tj_while_loop_max(lt100, inc, 1, &x, 10, NULL);
}

/* ---- nested: for i < n { j = 0; while j * j < i { j++ }; if j % 2: s += j else s -= i } --------
 */
static tj_tensor *sq_below(int n, tj_tensor *const *a, void *u) {
    (void)n;
    return tj_less(tj_mul(a[0], a[0]), (tj_tensor *)u);
}
static tj_tensor *add_j(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    return tj_add(a[0], a[1]);
}
static tj_tensor *sub_i(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    return tj_sub(a[0], a[2]);
}
static tj_tensor *nest_body(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    tj_tensor *i = a[0], *j0 = tj_scalar_i64(0);
    tj_tensor *j = tj_while_loop(sq_below, inc, 1, &j0, i);
    tj_tensor *args[3] = {a[1], j, i};
    return tj_cond(tj_mod(j, tj_scalar_i64(2)), add_j, sub_i, 3, args, NULL);
}
static tj_tensor *nested(tj_tensor *n) {
    tj_tensor *z = tj_scalar_i64(0);
    return tj_for_range(tj_scalar_i64(0), n, tj_scalar_i64(1), nest_body, 1, &z, NULL);
}

/* ---- floats and bools: Newton's square root, a flag flipped each iteration --------------------
 */
static tj_tensor *not_close(int n, tj_tensor *const *a, void *u) {
    (void)n;
    tj_tensor *e = tj_abs(tj_sub(tj_mul(a[0], a[0]), (tj_tensor *)u));
    return tj_logical_and(tj_greater(e, tj_mul((tj_tensor *)u, tj_scalar_f64(1e-12))),
                          tj_less(a[2], tj_scalar_i32(100)));
}
static tj_tensor *newton(int n, tj_tensor *const *a, void *u) {
    (void)n;
    tj_tensor *x = tj_mul(tj_add(a[0], tj_div((tj_tensor *)u, a[0])), tj_scalar_f64(0.5));
    tj_tensor *r[3] = {x, tj_logical_not(a[1]), tj_add(a[2], tj_scalar_i32(1))};
    return tj_tuple(3, r);
}
static tj_tensor *root(tj_tensor *v) {
    tj_tensor *init[3] = {v, tj_scalar_bool(0), tj_scalar_i32(0)};
    return tj_while_loop(not_close, newton, 3, init, v);
}

/* ---- tiny tensors (<= 16 elements) in registers: broadcasting, reductions over axes, views,
 * bool and integer vectors ------------------------------------------------------------------- */
static tj_tensor *tiny_body(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    tj_tensor *i = a[0], *x = a[1], *v = a[2], *flags = a[3]; /* f32[2,3], i32[5], bool[3] */
    tj_tensor *fi = tj_cast(i, TJ_F32);
    tj_tensor *rows = tj_mean(x, 1, (int[]){1}, 1); /* [2,1] */
    tj_tensor *cols = tj_max(x, 1, (int[]){0}, 0);  /* [3] */
    tj_tensor *t = tj_reshape(tj_transpose(x, NULL), 2, (int64_t[]){2, 3});
    tj_tensor *nx = tj_add(tj_mul(x, tj_scalar_f32(0.5f)),
                           tj_sub(tj_mul(rows, tj_scalar_f32(0.25f)), tj_mul(cols, fi)));
    nx = tj_add(nx, tj_mul(t, tj_scalar_f32(0.125f)));
    nx = tj_where(tj_broadcast_to(flags, 2, (int64_t[]){2, 3}), nx, tj_neg(nx));
    tj_tensor *s = tj_slice(v, (int64_t[]){1}, (int64_t[]){4}, NULL); /* [3] */
    tj_tensor *nv =
        tj_sub(tj_mod(tj_add(tj_mul(v, tj_scalar_i32(3)), tj_cast(i, TJ_I32)), tj_scalar_i32(7)),
               tj_floordiv(v, tj_scalar_i32(2)));
    nv = tj_add(nv, tj_sub(tj_sum(s, 0, NULL, 0), tj_prod(s, 0, NULL, 0)));
    tj_tensor *nf = tj_not_equal(flags, tj_greater(cols, tj_min(x, 0, NULL, 0)));
    tj_tensor *r[3] = {nx, nv, nf};
    return tj_tuple(3, r);
}
static tj_tensor *tiny(tj_tensor *n, tj_tensor *x, tj_tensor *v, tj_tensor *flags) {
    tj_tensor *init[3] = {x, v, flags};
    return tj_for_range(tj_scalar_i64(0), n, tj_scalar_i64(1), tiny_body, 3, init, NULL);
}

/* ---- a step of 0 --------------------------------------------------------------------------------
 */
static tj_tensor *zero_step(tj_tensor *s) {
    tj_tensor *z = tj_scalar_i64(0);
    return tj_for_range(tj_scalar_i64(0), tj_scalar_i64(5), s, sum_body, 1, &z, tj_scalar_i64(1));
}

/* element 0 of an integer or bool tensor, exactly */
static int64_t i64_of(tj_tensor *t) {
    const void *d = tj_tensor_data(t);
    if (!d || tj_status_of(t))
        return INT64_MIN + 1;
    switch (tj_tensor_dtype(t)) {
    case TJ_I64:
        return *(const int64_t *)d;
    case TJ_I32:
        return *(const int32_t *)d;
    case TJ_BOOL:
        return *(const uint8_t *)d;
    default:
        return (int64_t)tj_tensor_get_f64(t, 0);
    }
}

/* compiled and eager results of f on args: equal element 0 (and the eager one has no error) */
static tj_tensor *both(tj_function *f, int n, tj_tensor **args, tj_tensor **eager) {
    tj_tensor *r = tj_call(f, n, args);
    *eager = tj_call_eager(f, n, args);
    CHECK_MSG(tj_status_of(r) == TJ_OK, "%s", tj_error_message(r));
    CHECK_MSG(tj_status_of(*eager) == TJ_OK, "%s", tj_error_message(*eager));
    return r;
}

int main(void) {
    const char *be = getenv("TJ_BACKEND");
    int native = (!be || !*be || strcmp(be, "interp") != 0) && !tj_backend_unavailable("cpu");
    tj_set_log(on_log, NULL);
    tj_set_log_topics("compile");
    tj_scope_begin();

    tj_function *f = tj_function_new("collatz", (void *)collatz, 1, NULL);
    int64_t starts[] = {1, 6, 27, 97};
    int64_t want[] = {0, 8, 111, 118};
    for (int c = 0; c < 4; c++) {
        tj_tensor *e, *r = both(f, 1, (tj_tensor *[]){tj_scalar_i64(starts[c])}, &e);
        CHECK_EQ_INT(i64_of(r), want[c]);
        CHECK_EQ_INT(i64_of(e), want[c]);
    }
    tj_function_free(f);
    if (native)
        CHECK_MSG(n_native >= 1, "collatz's loop was not lowered natively");

    /* integer division: every sign combination, i32 and i64, and MIN / -1 (wraps) */
    f = tj_function_new("divisions", (void *)divisions, 2, NULL);
    int64_t xs[] = {17, -17, 3, -3, 0}, ds[] = {5, -5, 1, -1, 7};
    for (int a = 0; a < 5; a++)
        for (int b = 0; b < 5; b++)
            for (int w = 0; w < 2; w++) {
                tj_tensor *x0 = w ? tj_scalar_i64(xs[a]) : tj_scalar_i32((int32_t)xs[a]);
                tj_tensor *d = w ? tj_scalar_i64(ds[b]) : tj_scalar_i32((int32_t)ds[b]);
                tj_tensor *e, *r = both(f, 2, (tj_tensor *[]){x0, d}, &e);
                CHECK_MSG(i64_of(r) == i64_of(e), "%s %lld / %lld: compiled %lld, eager %lld",
                          w ? "i64" : "i32", (long long)xs[a], (long long)ds[b],
                          (long long)i64_of(r), (long long)i64_of(e));
            }
    for (int w = 0; w < 2; w++) {
        tj_tensor *x0 = w ? tj_scalar_i64(INT64_MIN + 6) : tj_scalar_i32(INT32_MIN + 6);
        tj_tensor *d = w ? tj_scalar_i64(-1) : tj_scalar_i32(-1);
        tj_tensor *e, *r = both(f, 2, (tj_tensor *[]){x0, d}, &e);
        CHECK_MSG(i64_of(r) == i64_of(e), "MIN / -1 (%s): compiled %lld, eager %lld",
                  w ? "i64" : "i32", (long long)i64_of(r), (long long)i64_of(e));
    }
    tj_function_free(f);

    /* a division by zero in iteration 3: the executor names it */
    n_fallback = 0;
    f = tj_function_new("by_zero", (void *)by_zero, 1, NULL);
    tj_tensor *r = tj_call(f, 1, (tj_tensor *[]){tj_scalar_i64(3)}); /* i = 0, 1, 2: fine */
    CHECK_EQ_INT(i64_of(r), 3 + 5 + 10);
    r = tj_call(f, 1, (tj_tensor *[]){tj_scalar_i64(5)});
    CHECK_EQ_INT(tj_status_of(r), TJ_ERR_RUNTIME);
    CHECK_HAS(tj_error_message(r), "for: iteration 3");
    CHECK_HAS(tj_error_message(r), "integer division by zero");
    r = tj_call(f, 1, (tj_tensor *[]){tj_scalar_i64(2)}); /* and it still works afterwards */
    CHECK_EQ_INT(i64_of(r), 3 + 5);
    CHECK_EQ_INT(n_fallback, 0);
    tj_function_free(f);

    /* tensor bounds: up, down, empty, to the edge of int64 (i + step overflows: stops there) */
    f = tj_function_new("ranged", (void *)ranged, 4, NULL);
    int64_t bounds[][3] = {{0, 10, 1},
                           {10, 0, -3},
                           {5, 5, 1},
                           {3, -2, 1},
                           {-7, 11, 4},
                           {INT64_MAX - 10, INT64_MAX, 4},
                           {INT64_MIN + 5, INT64_MIN, -2}};
    for (size_t c = 0; c < sizeof bounds / sizeof bounds[0]; c++) {
        tj_tensor *args[4] = {tj_scalar_i64(bounds[c][0]), tj_scalar_i64(bounds[c][1]),
                              tj_scalar_i64(bounds[c][2]), tj_scalar_i64(3)};
        tj_tensor *e;
        r = both(f, 4, args, &e);
        int64_t s = 0; /* wrapping, as the int64 adds do */
        for (int64_t i = bounds[c][0]; bounds[c][2] > 0 ? i < bounds[c][1] : i > bounds[c][1];) {
            s = (int64_t)((uint64_t)s + (uint64_t)i * 3u);
            if (__builtin_add_overflow(i, bounds[c][2], &i))
                break;
        }
        CHECK_MSG(i64_of(r) == s && i64_of(e) == s,
                  "range(%lld, %lld, %lld): %lld / %lld, want %lld", (long long)bounds[c][0],
                  (long long)bounds[c][1], (long long)bounds[c][2], (long long)i64_of(r),
                  (long long)i64_of(e), (long long)s);
    }
    tj_function_free(f);

    /* a step of 0 */
    f = tj_function_new("zero_step", (void *)zero_step, 1, NULL);
    r = tj_call(f, 1, (tj_tensor *[]){tj_scalar_i64(0)});
    CHECK_EQ_INT(tj_status_of(r), TJ_ERR_RUNTIME);
    CHECK_HAS(tj_error_message(r), "for: delta is 0 (range(0, 5, 0))");
    r = tj_call(f, 1, (tj_tensor *[]){tj_scalar_i64(2)});
    CHECK_EQ_INT(i64_of(r), 0 + 2 + 4);
    tj_function_free(f);

    /* maximum_iterations */
    f = tj_function_new("capped", (void *)capped, 1, NULL);
    int32_t from[] = {0, 95, 100, 200};
    int32_t capped_want[] = {10, 100, 100, 200};
    for (int c = 0; c < 4; c++) {
        tj_tensor *e;
        r = both(f, 1, (tj_tensor *[]){tj_scalar_i32(from[c])}, &e);
        CHECK_EQ_INT(i64_of(r), capped_want[c]);
        CHECK_EQ_INT(i64_of(e), capped_want[c]);
    }
    tj_function_free(f);

    /* nested: a while and a cond in a for */
    f = tj_function_new("nested", (void *)nested, 1, NULL);
    for (int64_t n = 0; n < 40; n += 13) {
        int64_t s = 0;
        for (int64_t i = 0; i < n; i++) {
            int64_t j = 0;
            while (j * j < i)
                j++;
            s = j % 2 ? s + j : s - i;
        }
        tj_tensor *e;
        r = both(f, 1, (tj_tensor *[]){tj_scalar_i64(n)}, &e);
        CHECK_EQ_INT(i64_of(r), s);
        CHECK_EQ_INT(i64_of(e), s);
    }
    tj_function_free(f);

    /* floats and bools */
    f = tj_function_new("root", (void *)root, 1, NULL);
    for (double v = 0.5; v < 1e6; v *= 37) {
        tj_tensor *e;
        r = both(f, 1, (tj_tensor *[]){tj_scalar_f64(v)}, &e);
        double x = tj_tensor_get_f64(tj_tuple_get(r, 0), 0);
        CHECK_NEAR(x, sqrt(v), 1e-9 * sqrt(v));
        CHECK_NEAR(x, tj_tensor_get_f64(tj_tuple_get(e, 0), 0), 1e-12 * sqrt(v));
        int64_t its = i64_of(tj_tuple_get(r, 2));
        CHECK_EQ_INT(its, i64_of(tj_tuple_get(e, 2)));
        CHECK_EQ_INT(tj_tensor_get_f64(tj_tuple_get(r, 1), 0) != 0, its % 2);
        CHECK_EQ_INT(tj_tensor_dtype(tj_tuple_get(r, 1)), TJ_BOOL);
    }
    tj_function_free(f);

    /* tiny tensors */
    f = tj_function_new("tiny", (void *)tiny, 4, NULL);
    tj_tensor *tx = tj_tensor_from_data(TJ_F32, 2, (int64_t[]){2, 3},
                                        (float[]){0.5f, -1.25f, 2, 3.5f, -0.75f, 1});
    tj_tensor *tv = tj_tensor_from_data(TJ_I32, 1, (int64_t[]){5}, (int32_t[]){3, -4, 7, 1, -9});
    tj_tensor *tf = tj_tensor_from_data(TJ_BOOL, 1, (int64_t[]){3}, (uint8_t[]){1, 0, 1});
    for (int64_t n = 0; n <= 9; n += 3) {
        tj_tensor *ta[4] = {tj_scalar_i64(n), tx, tv, tf}, *e;
        r = both(f, 4, ta, &e);
        for (int k = 0; k < 3 && tj_tuple_size(r) == 3 && tj_tuple_size(e) == 3; k++) {
            tj_tensor *cr = tj_tuple_get(r, k), *ce = tj_tuple_get(e, k);
            for (int64_t j = 0; j < tj_tensor_numel(ce); j++) {
                double x = tj_tensor_get_f64(cr, j), y = tj_tensor_get_f64(ce, j);
                CHECK_MSG(k ? x == y : fabs(x - y) <= 1e-5 * (1 + fabs(y)),
                          "tiny n=%lld result %d [%lld]: %.9g vs eager %.9g", (long long)n, k,
                          (long long)j, x, y);
            }
        }
    }
    tj_function_free(f);

    if (native)
        CHECK_MSG(n_native >= 8, "%d loops lowered natively, expected every one", n_native);
    else
        CHECK_EQ_INT(n_native, 0);
    tj_scope_end();
    tj_set_log(NULL, NULL);
    return check_done();
}
