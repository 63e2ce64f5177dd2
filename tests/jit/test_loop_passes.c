/* test_loop_passes.c — loop optimizations across region boundaries, end to end (passes/loops.c,
 * issue 10): an invariant computation moves out of a while body (and out of two nested loops at
 * once), a carried counter nobody reads is removed, a scan output nobody reads is removed, and an
 * integer division in a loop that never runs stays inside it (moved out, it would fail). Each
 * compiled result equals the eager one; the compiled graph's text shows what moved. CMake runs it
 * on the interpreter too. */
#include <stdlib.h>
#include <tracejit.h>

#include "check.h"

static int count(const char *text, const char *what) {
    int n = 0;
    for (const char *p = text; p && (p = strstr(p, what)); p += strlen(what))
        n++;
    return n;
}

/* the top-level graph's lines: everything after the last region's closing "  }\n" */
static const char *top_level(const char *text) {
    const char *p = text, *q;
    while (text && (q = strstr(p, "\n  }\n")))
        p = q + 5;
    return p;
}

/* ---- while sum(x) < 100: x = x * (k * 2 + 1); c = c + 1 (c never read) -------------------- */
static tj_tensor *small(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    return tj_less(tj_sum(a[0], 0, NULL, 0), tj_scalar_f32(100));
}
static tj_tensor *grow(int n, tj_tensor *const *a, void *u) {
    (void)n;
    tj_tensor *k = u;
    tj_tensor *r[2] = {tj_mul(a[0], tj_add(tj_mul(k, tj_scalar_f32(2)), tj_scalar_f32(1))),
                       tj_add(a[1], tj_scalar_i32(1))};
    return tj_tuple(2, r);
}
static tj_tensor *grown(tj_tensor *x, tj_tensor *k) {
    tj_tensor *init[2] = {x, tj_scalar_i32(0)};
    return tj_tuple_get(tj_while_loop(small, grow, 2, init, k), 0);
}

/* ---- for i < n: while max(x) < 50 * (i + 1): x = x + exp(k) -----------------------------------
 */
typedef struct lim {
    tj_tensor *k, *i;
} lim;
static tj_tensor *below(int n, tj_tensor *const *a, void *u) {
    (void)n;
    tj_tensor *bound =
        tj_mul(tj_cast(tj_add(((lim *)u)->i, tj_scalar_i64(1)), TJ_F32), tj_scalar_f32(50));
    return tj_less(tj_max(a[0], 0, NULL, 0), bound);
}
static tj_tensor *bump(int n, tj_tensor *const *a, void *u) {
    (void)n;
    return tj_add(a[0], tj_exp(((lim *)u)->k));
}
static tj_tensor *outer(int n, tj_tensor *const *a, void *u) {
    (void)n;
    lim l = {u, a[0]};
    return tj_while_loop(below, bump, 1, &a[1], &l);
}
static tj_tensor *nested(tj_tensor *n, tj_tensor *x, tj_tensor *k) {
    return tj_for_range(tj_scalar_i64(0), n, tj_scalar_i64(1), outer, 1, &x, k);
}

/* ---- for i < n: x = x + 10 // z (z = 0 and n = 0: no error) ------------------------------ */
static tj_tensor *add_q(int n, tj_tensor *const *a, void *u) {
    (void)n;
    return tj_add(a[1], tj_floordiv(tj_scalar_i64(10), (tj_tensor *)u));
}
static tj_tensor *guarded(tj_tensor *n, tj_tensor *x, tj_tensor *z) {
    return tj_for_range(tj_scalar_i64(0), n, tj_scalar_i64(1), add_q, 1, &x, z);
}

/* ---- scan returning the carry, a used output and an unused one ------------------------------ */
static tj_tensor *scan_body(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    tj_tensor *s = tj_add(a[0], a[1]);
    tj_tensor *r[3] = {s, tj_mul(s, tj_scalar_f32(2)), tj_exp(a[1])};
    return tj_tuple(3, r);
}
static tj_tensor *scanned(tj_tensor *xs) {
    tj_tensor *s0 = tj_zeros(TJ_F32, 1, (int64_t[]){3});
    return tj_tuple_get(tj_scan(scan_body, 1, &s0, 1, &xs, NULL), 1);
}

static void same(const char *what, tj_tensor *a, tj_tensor *b, double tol) {
    CHECK_MSG(tj_status_of(a) == TJ_OK && tj_status_of(b) == TJ_OK, "%s: %s / %s", what,
              tj_error_message(a), tj_error_message(b));
    for (int64_t i = 0; !tj_status_of(a) && !tj_status_of(b) && i < tj_tensor_numel(a); i++) {
        double x = tj_tensor_get_f64(a, i), y = tj_tensor_get_f64(b, i);
        CHECK_MSG(fabs(x - y) <= tol * (1 + fabs(y)), "%s [%lld]: %.9g vs %.9g", what, (long long)i,
                  x, y);
    }
}

static char *graph_text(tj_function *f, int n, const tj_spec *specs) {
    return tj_concrete_graph_text(tj_function_get_concrete(f, n, specs));
}

int main(void) {
    int eager = tj_get_eager();
    tj_scope_begin();
    tj_tensor *x4 = tj_tensor_from_data(TJ_F32, 1, (int64_t[]){4}, (float[]){1, 2, 3, 4});
    tj_spec v4 = {.dtype = TJ_F32, .rank = 1, .dims = {4}}, f0 = {.dtype = TJ_F32};
    tj_spec i0 = {.dtype = TJ_I64};

    tj_function *f = tj_function_new("grown", (void *)grown, 2, NULL);
    tj_tensor *args[3] = {x4, tj_scalar_f32(0.75f), NULL};
    same("grown", tj_call(f, 2, args), tj_call_eager(f, 2, args), 1e-6);
    if (!eager) {
        char *t = graph_text(f, 2, (tj_spec[]){v4, f0});
        /* one while of two operands (x and the moved k * 2 + 1): the counter is gone */
        CHECK_EQ_INT(count(t, "= while "), 1);
        CHECK_MSG(t && strstr(t, "= while %") && count(strstr(t, "= while %"), ",") >= 2 &&
                      !strstr(t, ": i32[]"),
                  "the counter is still carried:\n%s", t ? t : "");
        const char *top = top_level(t);
        CHECK_MSG(count(top, "= mul ") == 1 && count(top, "= add ") == 1,
                  "k * 2 + 1 did not move out:\n%s", t ? t : "");
        free(t);
    }
    tj_function_free(f);

    f = tj_function_new("nested", (void *)nested, 3, NULL);
    tj_tensor *a3[3] = {tj_scalar_i64(3), x4, tj_scalar_f32(1.5f)};
    same("nested", tj_call(f, 3, a3), tj_call_eager(f, 3, a3), 1e-6);
    if (!eager) {
        char *t = graph_text(f, 3, (tj_spec[]){i0, v4, f0});
        CHECK_MSG(count(top_level(t), "= exp ") == 1, "exp(k) did not leave both loops:\n%s",
                  t ? t : "");
        free(t);
    }
    tj_function_free(f);

    f = tj_function_new("guarded", (void *)guarded, 3, NULL);
    tj_tensor *g3[3] = {tj_scalar_i64(0), tj_scalar_i64(5), tj_scalar_i64(0)};
    tj_tensor *r = tj_call(f, 3, g3);
    CHECK_MSG(tj_status_of(r) == TJ_OK, "a loop that never runs failed: %s", tj_error_message(r));
    CHECK_NEAR(tj_tensor_get_f64(r, 0), 5, 0);
    g3[0] = tj_scalar_i64(2);
    r = tj_call(f, 3, g3);
    CHECK_EQ_INT(tj_status_of(r), TJ_ERR_RUNTIME);
    CHECK_HAS(tj_error_message(r), "division by zero");
    g3[2] = tj_scalar_i64(3);
    CHECK_NEAR(tj_tensor_get_f64(tj_call(f, 3, g3), 0), 5 + 3 + 3, 0);
    tj_function_free(f);

    f = tj_function_new("scanned", (void *)scanned, 1, NULL);
    float xs[12];
    for (int i = 0; i < 12; i++)
        xs[i] = (float)(i % 5) - 2.0f;
    tj_tensor *X = tj_tensor_from_data(TJ_F32, 2, (int64_t[]){4, 3}, xs);
    same("scanned", tj_call(f, 1, &X), tj_call_eager(f, 1, &X), 1e-6);
    if (!eager) {
        char *t = graph_text(f, 1, (tj_spec[]){{.dtype = TJ_F32, .rank = 2, .dims = {4, 3}}});
        CHECK_MSG(t && !strstr(t, "= exp "), "the unused scan output is still computed:\n%s",
                  t ? t : "");
        free(t);
    }
    tj_function_free(f);
    (void)args;
    tj_scope_end();
    return check_done();
}
