/* test_numerics.c — numeric contracts where compiled and eager code once disagreed (issue 9,
 * items 6-10): host-scalar promotion by kind, float matmul accumulating in its own dtype, exact
 * math holding for large matmuls and pow with constant operands, sigmoid's tails, prod keeping
 * 0 and inf. CMake runs it with the default math and with TJ_EXACT_MATH=1 (bit-for-bit checks
 * against eager execution only in the second). */
#include <math.h>
#include <stdint.h>
#include <tracejit.h>

#include "check.h"

static int exact;

static tj_tensor *mm(tj_tensor *a, tj_tensor *b) {
    return tj_matmul(a, b);
}
static tj_tensor *pow2x(tj_tensor *x) { /* LLVM would make these exp2, x*x, 1/x, sqrt */
    tj_tensor *items[4] = {tj_pow(tj_scalar_f64(2), x), tj_pow(x, tj_scalar_f64(2)),
                           tj_pow(x, tj_scalar_f64(-1)), tj_pow(x, tj_scalar_f64(0.5))};
    return tj_tuple(4, items);
}
static tj_tensor *sigm(tj_tensor *x) {
    return tj_sigmoid(x);
}
static tj_tensor *prod_all(tj_tensor *x) {
    return tj_prod(x, 0, NULL, 0);
}
static tj_tensor *greater3(tj_tensor *x) {
    return tj_greater(x, tj_scalar_f64(3));
}
static tj_tensor *add_sum(tj_tensor *x, tj_tensor *y) {
    return tj_add(x, tj_sum(y, 0, NULL, 0));
}

/* Calls f compiled and eagerly; both must succeed with bitwise-equal results (NaN == NaN). */
static void same_both_ways(const char *what, void *fn, int n, tj_tensor **args, int bitwise) {
    tj_function *f = tj_function_new(what, fn, n, NULL);
    tj_tensor *c = tj_call(f, n, args), *e = tj_call_eager(f, n, args);
    CHECK_MSG(tj_status_of(c) == TJ_OK && tj_status_of(e) == TJ_OK, "%s: %s / %s", what,
              tj_error_message(c), tj_error_message(e));
    int nt = tj_tuple_size(c) < 0 ? 1 : tj_tuple_size(c);
    for (int k = 0; k < nt && !tj_status_of(c) && !tj_status_of(e); k++) {
        const tj_tensor *a = tj_tuple_size(c) < 0 ? c : tj_tuple_get(c, k);
        const tj_tensor *b = tj_tuple_size(e) < 0 ? e : tj_tuple_get(e, k);
        for (int64_t i = 0; i < tj_tensor_numel(a); i++) {
            double x = tj_tensor_get_f64(a, i), y = tj_tensor_get_f64(b, i);
            int ok = (isnan(x) && isnan(y)) ||
                     (bitwise ? x == y && signbit(x) == signbit(y) : fabs(x - y) <= 1e-6 * fabs(y));
            CHECK_MSG(ok, "%s result %d [%lld]: compiled %.17g, eager %.17g", what, k, (long long)i,
                      x, y);
        }
    }
    tj_function_free(f);
}

int main(void) {
    const char *env = getenv("TJ_EXACT_MATH");
    exact = env && !strcmp(env, "1");
    tj_scope_begin();

    /* 6: promotion looks at how a tensor was made, never at its data */
    tj_tensor *x0 = tj_tensor_from_data(TJ_I32, 0, NULL, (int32_t[]){5});
    tj_tensor *g = tj_greater(x0, tj_scalar_f64(3)); /* a host scalar takes int32 */
    CHECK_EQ_INT(tj_status_of(g), TJ_OK);
    CHECK_NEAR(tj_tensor_get_f64(g, 0), 1, 0);
    tj_function *f = tj_function_new("greater3", (void *)greater3, 1, NULL);
    CHECK_NEAR(tj_tensor_get_f64(tj_call(f, 1, &x0), 0), 1, 0);
    CHECK_NEAR(tj_tensor_get_f64(tj_call_eager(f, 1, &x0), 0), 1, 0);
    tj_function_free(f);
    /* an op's 0-d result is a tensor, not a host scalar: a dtype error both ways, whatever the
     * data (it used to depend on whether the sum happened to be an integer) */
    tj_tensor *xi = tj_tensor_from_data(TJ_I32, 1, (int64_t[]){3}, (int32_t[]){1, 2, 3});
    const float ys[2][2] = {{1, 2}, {1, 2.5f}};
    f = tj_function_new("add_sum", (void *)add_sum, 2, NULL);
    for (int k = 0; k < 2; k++) {
        tj_tensor *y = tj_tensor_from_data(TJ_F32, 1, (int64_t[]){2}, ys[k]);
        tj_tensor *args[2] = {xi, y};
        CHECK_EQ_INT(tj_status_of(tj_add(xi, tj_sum(y, 0, NULL, 0))), TJ_ERR_DTYPE);
        CHECK_EQ_INT(tj_status_of(tj_call(f, 2, args)), TJ_ERR_DTYPE);
        CHECK_EQ_INT(tj_status_of(tj_call_eager(f, 2, args)), TJ_ERR_DTYPE);
    }
    tj_function_free(f);
    /* a host scalar passed as an argument is a tensor argument inside the function */
    tj_tensor *s = tj_scalar_i32(5);
    f = tj_function_new("greater3", (void *)greater3, 1, NULL);
    CHECK_NEAR(tj_tensor_get_f64(tj_call(f, 1, &s), 0), 1, 0);
    CHECK_NEAR(tj_tensor_get_f64(tj_call_eager(f, 1, &s), 0), 1, 0);
    tj_function_free(f);
    /* two host scalars: the lower kind takes the higher one's dtype (Python: 5 > 3.5) */
    g = tj_greater(tj_scalar_i32(5), tj_scalar_f64(3.5));
    CHECK_NEAR(tj_tensor_get_f64(g, 0), 1, 0);
    CHECK_EQ_INT(tj_tensor_dtype(tj_add(tj_scalar_i32(1), tj_scalar_f32(0.5f))), TJ_F32);
    CHECK_NEAR(tj_tensor_get_f64(tj_add(tj_scalar_i32(1), tj_scalar_f32(0.5f)), 0), 1.5, 0);

    /* 8: float accumulation in the dtype: 1e8 + sixteen ones stays 1e8 in f32 */
    float big[17], ones[17];
    for (int i = 0; i < 17; i++)
        big[i] = i ? 1 : 1e8f, ones[i] = 1;
    tj_tensor *a = tj_tensor_from_data(TJ_F32, 2, (int64_t[]){1, 17}, big);
    tj_tensor *b = tj_tensor_from_data(TJ_F32, 2, (int64_t[]){17, 1}, ones);
    CHECK_NEAR(tj_tensor_get_f64(tj_matmul(a, b), 0), 1e8, 0);
    same_both_ways("mm_accumulate", (void *)mm, 2, (tj_tensor *[]){a, b}, 1);
    /* an overflowing partial sum: NaN eagerly (inf + -inf); compiled the same under exact math
     * (a multiply and an add), inf with FMA contraction */
    a = tj_tensor_from_data(TJ_F32, 2, (int64_t[]){1, 2}, (float[]){3e38f, 3e38f});
    b = tj_tensor_from_data(TJ_F32, 2, (int64_t[]){2, 1}, (float[]){2, -2});
    CHECK(isnan(tj_tensor_get_f64(tj_matmul(a, b), 0)));
    if (exact)
        same_both_ways("mm_overflow", (void *)mm, 2, (tj_tensor *[]){a, b}, 1);

    /* 7: exact math holds for matmuls past the generated-kernel size (no OpenBLAS) */
    enum { K = 300 };
    double *va = malloc(K * sizeof *va), *vb = malloc(K * sizeof *vb);
    for (int i = 0; i < K; i++)
        va[i] = sin(i * 0.37) * 1e3, vb[i] = cos(i * 0.11) / 7;
    a = tj_tensor_from_data(TJ_F64, 2, (int64_t[]){1, K}, va);
    b = tj_tensor_from_data(TJ_F64, 2, (int64_t[]){K, 1}, vb);
    same_both_ways("mm_f64_long", (void *)mm, 2, (tj_tensor *[]){a, b}, exact);
    tj_tensor *a2 = tj_tensor_from_data(TJ_F64, 2, (int64_t[]){1, 65}, va);
    tj_tensor *b2 = tj_tensor_from_data(TJ_F64, 2, (int64_t[]){65, 1}, vb);
    same_both_ways("mm_f64_65", (void *)mm, 2, (tj_tensor *[]){a2, b2}, exact);
    float *fa = malloc(128 * 96 * sizeof *fa), *fb = malloc(96 * 80 * sizeof *fb);
    for (int i = 0; i < 128 * 96; i++)
        fa[i] = (float)sin(i * 0.013);
    for (int i = 0; i < 96 * 80; i++)
        fb[i] = (float)cos(i * 0.021);
    a = tj_tensor_from_data(TJ_F32, 2, (int64_t[]){128, 96}, fa);
    b = tj_tensor_from_data(TJ_F32, 2, (int64_t[]){96, 80}, fb);
    if (exact)
        same_both_ways("mm_f32_128x96x80", (void *)mm, 2, (tj_tensor *[]){a, b}, 1);
    free(va);
    free(vb);
    free(fa);
    free(fb);
    /* pow with constant operands stays libm's pow */
    double px[6] = {0.3, 1.7, -2.5, 10.1, 1e-3, 37.9};
    tj_tensor *p = tj_tensor_from_data(TJ_F64, 1, (int64_t[]){6}, px);
    same_both_ways("pow_consts", (void *)pow2x, 1, &p, 1);

    /* 9: sigmoid far in the tails: the subnormal 3.78e-44 at -100 in f32, not 0 */
    float sx[6] = {-100, -88.8f, -1000, 100, 0, -0.0f};
    tj_tensor *sv = tj_tensor_from_data(TJ_F32, 1, (int64_t[]){6}, sx);
    tj_tensor *se = tj_sigmoid(sv);
    CHECK(tj_tensor_get_f64(se, 0) > 3.7e-44 && tj_tensor_get_f64(se, 0) < 3.9e-44);
    CHECK(tj_tensor_get_f64(se, 1) > 0);
    CHECK_NEAR(tj_tensor_get_f64(se, 2), 0, 0);
    CHECK_NEAR(tj_tensor_get_f64(se, 3), 1, 0);
    CHECK_NEAR(tj_tensor_get_f64(se, 4), 0.5, 0);
    same_both_ways("sigmoid_tails", (void *)sigm, 1, &sv, exact);
    double dx[3] = {-800, -745, 40};
    tj_tensor *dv = tj_tensor_from_data(TJ_F64, 1, (int64_t[]){3}, dx);
    CHECK(tj_tensor_get_f64(tj_sigmoid(dv), 1) > 0); /* 5e-324 */
    same_both_ways("sigmoid_tails_f64", (void *)sigm, 1, &dv, exact);

    /* 10: prod keeps what input order gives: 0 stays 0, inf stays inf, in every math mode */
    float pz[128];
    pz[0] = 0;
    for (int i = 1; i < 128; i++)
        pz[i] = 1e18f;
    tj_tensor *zp = tj_tensor_from_data(TJ_F32, 1, (int64_t[]){128}, pz);
    CHECK_NEAR(tj_tensor_get_f64(tj_prod(zp, 0, NULL, 0), 0), 0, 0);
    same_both_ways("prod_zero_first", (void *)prod_all, 1, &zp, 1);
    double pi[64];
    pi[0] = INFINITY, pi[1] = pi[2] = 1e-200;
    for (int i = 3; i < 64; i++)
        pi[i] = 1;
    tj_tensor *ip = tj_tensor_from_data(TJ_F64, 1, (int64_t[]){64}, pi);
    CHECK(isinf(tj_tensor_get_f64(tj_prod(ip, 0, NULL, 0), 0)));
    same_both_ways("prod_inf_first", (void *)prod_all, 1, &ip, 1);

    tj_scope_end();
    return check_done();
}
