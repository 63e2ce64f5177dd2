/* test_raw_loops.c — tensor loops on their regions' raw forms (runtime/exec_raw.c,
 * runtime/plan_raw.c, issue 10): while, for_range and scan over vectors whose iterations run
 * the compiled kernels on two swapped buffers per loop variable. Each result equals the eager
 * one: vectors of odd byte sizes (no 64-byte rows), a scan whose output is its carried value and
 * whose other outputs are a param and a kernel's value, zero iterations (the operands come back),
 * maximum_iterations, a body with an OpenBLAS product and its fused epilogue, a native scalar
 * loop inside a raw body, and a division by zero inside that (the loop is redone the usual way,
 * which names the iteration). The raw path's use is counted (rt_raw_loop_count). CMake runs it
 * on the interpreter too, where no loop runs raw. */
#include <stdlib.h>
#include <tracejit.h>

#include "check.h"
#include "native_first.h"
#include "runtime/runtime.h"

static tj_tensor *vec(int n, float start, float step) {
    float *v = malloc(sizeof(float) * (size_t)(n ? n : 1));
    for (int i = 0; i < n; i++)
        v[i] = start + step * (float)((i * 7) % 11);
    tj_tensor *t = tj_tensor_from_data(TJ_F32, 1, (int64_t[]){n}, v);
    free(v);
    return t;
}

/* every element of a and b equal (tol 0) or within tol * (1 + |b|) */
static void same(const char *what, tj_tensor *a, tj_tensor *b, double tol) {
    CHECK_MSG(tj_status_of(a) == TJ_OK && tj_status_of(b) == TJ_OK, "%s: %s / %s", what,
              tj_error_message(a), tj_error_message(b));
    if (tj_status_of(a) || tj_status_of(b))
        return;
    CHECK_MSG(tj_tensor_numel(a) == tj_tensor_numel(b), "%s: %lld vs %lld elements", what,
              (long long)tj_tensor_numel(a), (long long)tj_tensor_numel(b));
    for (int64_t i = 0; i < tj_tensor_numel(a) && i < tj_tensor_numel(b); i++) {
        double x = tj_tensor_get_f64(a, i), y = tj_tensor_get_f64(b, i);
        if (!(fabs(x - y) <= tol * (1 + fabs(y)))) {
            CHECK_MSG(0, "%s: element %lld: %.9g vs %.9g", what, (long long)i, x, y);
            return;
        }
    }
}

/* ---- while max(x) > 1: x = x * 0.5 + c (c captured; x * 0.5 is exact, so FMA or not agree) */
static tj_tensor *big(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    return tj_greater(tj_max(a[0], 0, NULL, 0), tj_scalar_f32(1));
}
static tj_tensor *halve(int n, tj_tensor *const *a, void *u) {
    (void)n;
    return tj_add(tj_mul(a[0], tj_scalar_f32(0.5f)), (tj_tensor *)u);
}
static tj_tensor *shrink(tj_tensor *x, tj_tensor *c) {
    return tj_while_loop(big, halve, 1, &x, c);
}
static tj_tensor *shrink_max(tj_tensor *x, tj_tensor *c) {
    return tj_while_loop_max(big, halve, 1, &x, 3, c);
}

/* ---- for i in range(n): (x, k) = (x + i * d, k + 1), d captured ---------------------------- */
static tj_tensor *step(int n, tj_tensor *const *a, void *u) {
    (void)n;
    tj_tensor *r[2] = {tj_add(a[1], tj_mul(tj_cast(a[0], TJ_F32), (tj_tensor *)u)),
                       tj_add(a[2], tj_scalar_i64(1))};
    return tj_tuple(2, r);
}
static tj_tensor *stepped(tj_tensor *n, tj_tensor *x, tj_tensor *d) {
    tj_tensor *init[2] = {x, tj_scalar_i64(0)};
    return tj_for_range(tj_scalar_i64(0), n, tj_scalar_i64(1), step, 2, init, d);
}

/* ---- scan over rows: s = s * 0.5 + row; outputs s (the carried value again), the row itself
 * (a param) and row * 2 ------------------------------------------------------------------------ */
static tj_tensor *scan_body(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    tj_tensor *s = tj_add(tj_mul(a[0], tj_scalar_f32(0.5f)), a[1]);
    tj_tensor *r[4] = {s, s, a[1], tj_mul(a[1], tj_scalar_f32(2))};
    return tj_tuple(4, r);
}
static tj_tensor *scanned(tj_tensor *xs) {
    tj_tensor *s0 = tj_zeros(TJ_F32, 1, (int64_t[]){tj_tensor_dims(xs)[1]});
    return tj_scan(scan_body, 1, &s0, 1, &xs, NULL);
}

/* ---- an RNN cell with a product large enough for OpenBLAS (hidden 96) and its epilogue ------- */
static tj_tensor *cell(int n, tj_tensor *const *a, void *u) {
    (void)n;
    tj_tensor *h = tj_tanh(tj_add(tj_matmul(a[0], (tj_tensor *)u), a[1]));
    tj_tensor *r[2] = {h, tj_sum(h, 0, NULL, 0)};
    return tj_tuple(2, r);
}
static tj_tensor *rnn(tj_tensor *xs, tj_tensor *h0, tj_tensor *U) {
    return tj_scan(cell, 1, &h0, 1, &xs, U);
}

/* ---- a native scalar branch inside a raw body: v += 10 // (3 - i) when i >= 0 --------------- */
static tj_tensor *tenth(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    return tj_floordiv(tj_scalar_i64(10), tj_sub(tj_scalar_i64(3), a[0]));
}
static tj_tensor *nothing(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    return tj_mul(a[0], tj_scalar_i64(0));
}
static tj_tensor *div_body(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    tj_tensor *q =
        tj_cond(tj_greater_equal(a[0], tj_scalar_i64(0)), tenth, nothing, 1, &a[0], NULL);
    return tj_add(a[1], tj_cast(q, TJ_F32));
}
static tj_tensor *divided(tj_tensor *n, tj_tensor *v) {
    return tj_for_range(tj_scalar_i64(0), n, tj_scalar_i64(1), div_body, 1, &v, NULL);
}

/* ---- reference kernels in a raw body: the seed's dynamic_rnn (gather a time step, write the
 * state into a tensor array), and a read of a row never written (handed back: the usual path
 * names it) ------------------------------------------------------------------------------------ */
static tj_tensor *time_step(int n, tj_tensor *const *a, void *u) {
    (void)n;
    tj_tensor *state = tj_add(a[1], tj_gather((tj_tensor *)u, a[0], 0));
    tj_tensor *r[2] = {state, tj_tensor_array_write(a[2], a[0], state)};
    return tj_tuple(2, r);
}
static tj_tensor *dyn_rnn(tj_tensor *xs, tj_tensor *s0) {
    int64_t T = tj_tensor_dims(xs)[0];
    tj_tensor *ta = tj_tensor_array_new(TJ_F32, T, 2, tj_tensor_dims(xs) + 1);
    tj_tensor *init[2] = {s0, ta};
    tj_tensor *r =
        tj_for_range(tj_scalar_i64(0), tj_scalar_i64(T), tj_scalar_i64(1), time_step, 2, init, xs);
    return tj_tensor_array_stack(tj_tuple_get(r, 1));
}
static tj_tensor *read_back(int n, tj_tensor *const *a, void *u) {
    (void)n;
    /* reads row i * 2 of an array whose rows 0..3 were written: fails at i = 2 */
    return tj_add(a[1], tj_tensor_array_read((tj_tensor *)u, tj_mul(a[0], tj_scalar_i64(2))));
}
static tj_tensor *fill(int n, tj_tensor *const *a, void *u) {
    (void)n, (void)u;
    return tj_tensor_array_write(a[1], a[0], tj_cast(a[0], TJ_F32));
}
static tj_tensor *reads(tj_tensor *n) {
    tj_tensor *ta = tj_tensor_array_new(TJ_F32, 8, 0, NULL);
    ta = tj_for_range(tj_scalar_i64(0), tj_scalar_i64(4), tj_scalar_i64(1), fill, 1, &ta, NULL);
    tj_tensor *z = tj_scalar_f32(0);
    return tj_for_range(tj_scalar_i64(0), n, tj_scalar_i64(1), read_back, 1, &z, ta);
}

/* rows 0..n-1 of a fresh 6-row array written with i + x; the rest stays 0 (a write in place must
 * not reach the array the function starts from, a constant shared by every call) */
static tj_tensor *put_row(int n, tj_tensor *const *a, void *u) {
    (void)n;
    tj_tensor *v = tj_add(tj_cast(a[0], TJ_F32), (tj_tensor *)u);
    return tj_tensor_array_write(a[1], a[0], v);
}
static tj_tensor *partial(tj_tensor *n, tj_tensor *x) {
    tj_tensor *ta = tj_tensor_array_new(TJ_F32, 6, 1, (int64_t[]){2});
    ta = tj_for_range(tj_scalar_i64(0), n, tj_scalar_i64(1), put_row, 1, &ta, x);
    return tj_tensor_array_stack(ta);
}

/* the same over the caller's values: the argument must come back untouched */
static tj_tensor *overwrite(tj_tensor *n, tj_tensor *x, tj_tensor *init) {
    tj_tensor *ta = tj_tensor_array_unstack(init);
    ta = tj_for_range(tj_scalar_i64(0), n, tj_scalar_i64(1), put_row, 1, &ta, x);
    return tj_tensor_array_stack(ta);
}

int main(void) {
    check_untiered();
    const char *be = getenv("TJ_BACKEND");
    int native = (!be || !*be || strcmp(be, "interp") != 0) && !tj_backend_unavailable("cpu");
    tj_scope_begin();
    uint64_t raw0 = rt_raw_loop_count();

    tj_function *f = tj_function_new("shrink", (void *)shrink, 2, NULL);
    for (int n = 1; n <= 37; n += 12) { /* 4 to 148 bytes: never whole 64-byte rows but one */
        tj_tensor *args[2] = {vec(n, 3, 7), vec(n, 0.01f, 0.02f)};
        same("shrink", tj_call(f, 2, args), tj_call_eager(f, 2, args), 0);
    }
    tj_tensor *small[2] = {vec(5, 0.1f, 0.05f), vec(5, 0, 0)}; /* no iteration at all */
    tj_tensor *r = tj_call(f, 2, small);
    same("shrink, zero iterations", r, small[0], 0);
    tj_function_free(f);
    f = tj_function_new("shrink_max", (void *)shrink_max, 2, NULL);
    tj_tensor *args[2] = {vec(9, 100, 3), vec(9, 0, 0)};
    r = tj_call(f, 2, args);
    same("maximum_iterations", r, tj_call_eager(f, 2, args), 0);
    CHECK_NEAR(tj_tensor_get_f64(r, 0), 100.0 / 8, 0);
    tj_function_free(f);

    f = tj_function_new("stepped", (void *)stepped, 3, NULL);
    for (int64_t n = 0; n <= 20; n += 10) {
        tj_tensor *a3[3] = {tj_scalar_i64(n), vec(13, 1, 0.5f), vec(13, 0.25f, 0.125f)};
        tj_tensor *c = tj_call(f, 3, a3), *e = tj_call_eager(f, 3, a3);
        same("stepped x", tj_tuple_get(c, 0), tj_tuple_get(e, 0), 1e-6);
        same("stepped k", tj_tuple_get(c, 1), tj_tuple_get(e, 1), 0);
        CHECK_NEAR(tj_tensor_get_f64(tj_tuple_get(c, 1), 0), (double)n, 0);
    }
    tj_function_free(f);

    f = tj_function_new("scanned", (void *)scanned, 1, NULL);
    int widths[] = {5, 16, 7};
    for (int w = 0; w < 3; w++) { /* 20-byte rows (buffered), 64-byte rows (in place) */
        int T = 6 + w, W = widths[w];
        float *xs = malloc(sizeof(float) * (size_t)(T * W));
        for (int i = 0; i < T * W; i++)
            xs[i] = (float)((i * 13) % 17) - 8.0f;
        tj_tensor *X = tj_tensor_from_data(TJ_F32, 2, (int64_t[]){T, W}, xs);
        free(xs);
        tj_tensor *c = tj_call(f, 1, &X), *e = tj_call_eager(f, 1, &X);
        CHECK_EQ_INT(tj_tuple_size(c), 4);
        for (int k = 0; k < 4 && tj_tuple_size(c) == 4; k++)
            same("scan output", tj_tuple_get(c, k), tj_tuple_get(e, k), 0);
        same("scan passes its rows", tj_tuple_get(c, 2), X, 0);
    }
    tj_tensor *empty = tj_zeros(TJ_F32, 2, (int64_t[]){0, 5});
    tj_tensor *c = tj_call(f, 1, &empty);
    CHECK_EQ_INT(tj_status_of(c), TJ_OK);
    CHECK_EQ_INT(tj_tensor_dims(tj_tuple_get(c, 1))[0], 0);
    tj_function_free(f);

    f = tj_function_new("rnn", (void *)rnn, 3, NULL);
    enum { T = 12, B = 8, H = 96 };
    float *xs = malloc(sizeof(float) * T * B * H), *u = malloc(sizeof(float) * H * H);
    for (int i = 0; i < T * B * H; i++)
        xs[i] = (float)((i * 31) % 17) / 17.0f - 0.5f;
    for (int i = 0; i < H * H; i++)
        u[i] = ((float)((i * 13) % 23) / 23.0f - 0.5f) * 0.2f;
    tj_tensor *a3[3] = {tj_tensor_from_data(TJ_F32, 3, (int64_t[]){T, B, H}, xs),
                        tj_zeros(TJ_F32, 2, (int64_t[]){B, H}),
                        tj_tensor_from_data(TJ_F32, 2, (int64_t[]){H, H}, u)};
    free(xs);
    free(u);
    c = tj_call(f, 3, a3);
    tj_tensor *e = tj_call_eager(f, 3, a3);
    same("rnn h", tj_tuple_get(c, 0), tj_tuple_get(e, 0), 1e-4);
    same("rnn sums", tj_tuple_get(c, 1), tj_tuple_get(e, 1), 1e-3);
    tj_function_free(f);

    f = tj_function_new("divided", (void *)divided, 2, NULL);
    tj_tensor *v = vec(3, 1, 1);
    tj_tensor *a2[2] = {tj_scalar_i64(3), v};
    same("divided", tj_call(f, 2, a2), tj_call_eager(f, 2, a2), 0); /* 10//3 + 10//2 + 10//1 */
    CHECK_NEAR(tj_tensor_get_f64(tj_call(f, 2, a2), 0), 1 + 3 + 5 + 10, 0);
    a2[0] = tj_scalar_i64(5);
    uint64_t before = rt_raw_loop_count();
    r = tj_call(f, 2, a2);
    CHECK_EQ_INT(tj_status_of(r), TJ_ERR_RUNTIME);
    CHECK_HAS(tj_error_message(r), "for: iteration 3");
    CHECK_HAS(tj_error_message(r), "integer division by zero");
    CHECK_EQ_INT(rt_raw_loop_count(), before); /* handed back, not counted */
    tj_function_free(f);

    f = tj_function_new("dyn_rnn", (void *)dyn_rnn, 2, NULL);
    xs = malloc(sizeof(float) * 9 * 3 * 5);
    for (int i = 0; i < 9 * 3 * 5; i++)
        xs[i] = (float)((i * 37) % 11) / 10.0f;
    tj_tensor *d2[2] = {tj_tensor_from_data(TJ_F32, 3, (int64_t[]){9, 3, 5}, xs),
                        tj_zeros(TJ_F32, 2, (int64_t[]){3, 5})};
    free(xs);
    before = rt_raw_loop_count();
    same("dynamic_rnn", tj_call(f, 2, d2), tj_call_eager(f, 2, d2), 1e-6);
    if (native)
        CHECK_MSG(rt_raw_loop_count() > before, "dynamic_rnn's loop did not run raw");
    tj_function_free(f);

    f = tj_function_new("reads", (void *)reads, 1, NULL);
    r = tj_call(f, 1, (tj_tensor *[]){tj_scalar_i64(2)}); /* rows 0 and 2 */
    CHECK_NEAR(tj_tensor_get_f64(r, 0), 0 + 2, 0);
    r = tj_call(f, 1, (tj_tensor *[]){tj_scalar_i64(3)}); /* row 4: never written */
    CHECK_EQ_INT(tj_status_of(r), TJ_ERR_RUNTIME);
    CHECK_HAS(tj_error_message(r), "for: iteration 2");
    CHECK_HAS(tj_error_message(r), "read_index: row 4 was never written");
    tj_function_free(f);

    f = tj_function_new("partial", (void *)partial, 2, NULL);
    tj_tensor *xp = tj_tensor_from_data(TJ_F32, 1, (int64_t[]){2}, (float[]){0.5f, 0.25f});
    for (int64_t n = 5; n >= 0; n -= 2) {
        r = tj_call(f, 2, (tj_tensor *[]){tj_scalar_i64(n), xp});
        CHECK_MSG(tj_status_of(r) == TJ_OK, "%s", tj_error_message(r));
        for (int64_t i = 0; i < 12 && !tj_status_of(r); i++) {
            int64_t row = i / 2;
            double want = row < n ? (double)row + (i % 2 ? 0.25 : 0.5) : 0;
            CHECK_MSG(tj_tensor_get_f64(r, i) == want, "n=%lld: element %lld is %g, want %g",
                      (long long)n, (long long)i, tj_tensor_get_f64(r, i), want);
        }
    }
    tj_function_free(f);
    f = tj_function_new("overwrite", (void *)overwrite, 3, NULL);
    float iv[12];
    for (int i = 0; i < 12; i++)
        iv[i] = 100.0f + (float)i;
    tj_tensor *init = tj_tensor_from_data(TJ_F32, 2, (int64_t[]){6, 2}, iv);
    r = tj_call(f, 3, (tj_tensor *[]){tj_scalar_i64(3), xp, init});
    for (int64_t i = 0; i < 12 && !tj_status_of(r); i++) {
        CHECK_MSG(tj_tensor_get_f64(init, i) == 100.0 + (double)i,
                  "the argument changed at %lld: %g", (long long)i, tj_tensor_get_f64(init, i));
        double want = i / 2 < 3 ? (double)(i / 2) + (i % 2 ? 0.25 : 0.5) : 100.0 + (double)i;
        CHECK_MSG(tj_tensor_get_f64(r, i) == want, "overwrite: element %lld is %g, want %g",
                  (long long)i, tj_tensor_get_f64(r, i), want);
    }
    tj_function_free(f);

    uint64_t ran = rt_raw_loop_count() - raw0;
    if (native)
        CHECK_MSG(ran >= 12, "only %llu loops ran raw",
                  (unsigned long long)ran); /* <= 16 elements: native */
    else
        CHECK_EQ_INT(ran, 0);
    tj_scope_end();
    return check_done();
}
