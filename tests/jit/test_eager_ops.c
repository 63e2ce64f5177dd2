/* test_eager_ops.c — a broad eager check of the public ops through the API, on small
 * hand-computed examples: scalar promotion, static scalars with float tensors, elementwise,
 * comparisons, reductions, shape ops, constructors, strings, scopes and tj_keep (no leaks), and
 * borrowed tensors whose release callback runs exactly once. Kernels are tested directly in
 * tests/runtime; this file checks the API layer on top of them. */
#include <tracejit.h>

#include "check.h"

/* t has dtype dt, shape dims[rank] and values v (compared as doubles, tolerance tol) */
static int is(tj_tensor *t, tj_dtype dt, int rank, const int64_t *dims, const double *v,
              double tol) {
    if (tj_status_of(t) != TJ_OK) {
        fprintf(stderr, "  error: %s\n", tj_error_message(t));
        return 0;
    }
    if (tj_tensor_dtype(t) != dt || tj_tensor_rank(t) != rank) {
        fprintf(stderr, "  dtype %d rank %d\n", tj_tensor_dtype(t), tj_tensor_rank(t));
        return 0;
    }
    int64_t n = 1;
    for (int i = 0; i < rank; i++) {
        if (tj_tensor_dims(t)[i] != dims[i])
            return 0;
        n *= dims[i];
    }
    if (tj_tensor_numel(t) != n)
        return 0;
    for (int64_t i = 0; i < n; i++) {
        double g = tj_tensor_get_f64(t, i);
        if (!(fabs(g - v[i]) <= tol) && !(isnan(g) && isnan(v[i])) && g != v[i]) {
            fprintf(stderr, "  element %lld: %.9g vs %.9g\n", (long long)i, g, v[i]);
            return 0;
        }
    }
    return 1;
}
#define D(...) ((const int64_t[]){__VA_ARGS__})
#define V(...) ((const double[]){__VA_ARGS__})
#define IS(t, dt, rank, dims, vals) CHECK(is((t), (dt), (rank), (dims), (vals), 1e-6))
#define IS0(t, dt, val) CHECK(is((t), (dt), 0, NULL, V(val), 1e-6))

static tj_tensor *f32(int rank, const int64_t *dims, const float *v) {
    return tj_tensor_from_data(TJ_F32, rank, dims, v);
}
static tj_tensor *i32(int rank, const int64_t *dims, const int32_t *v) {
    return tj_tensor_from_data(TJ_I32, rank, dims, v);
}

static int n_released;
static void count_release(void *user) {
    n_released++;
    (void)user;
}

/* Concats large enough to run on the pool (runtime/kernels/shape.c): along the last axis (NHWC
 * channels, DenseNet's), a middle axis and the first, from f32 and i64 inputs, every element
 * checked against its source. */
static void big_concats(void) {
    tj_scope_begin();
    static const int64_t parts[3] = {5, 1, 26};
    for (int ax = 0; ax < 3; ax++)
        for (int dt = 0; dt < 2; dt++) {
            tj_dtype t = dt ? TJ_I64 : TJ_F32;
            tj_tensor *in[3];
            int64_t od[3] = {97, 40, 33};
            od[ax] = 0;
            for (int k = 0; k < 3; k++) {
                int64_t d[3] = {97, 40, 33};
                d[ax] = parts[k] * (ax == 1 ? 2 : 1);
                od[ax] += d[ax];
                in[k] = tj_cast(tj_random_uniform(TJ_F32, 3, d, -1000, 1000, 70 + (uint64_t)k), t);
            }
            tj_tensor *c = tj_concat(3, in, ax);
            CHECK_MSG(tj_status_of(c) == TJ_OK, "concat axis %d: %s", ax, tj_error_message(c));
            int64_t bad = 0, at = 0;
            for (int64_t i = 0; i < od[0] && tj_status_of(c) == TJ_OK; i++)
                for (int64_t j = 0; j < od[1]; j++)
                    for (int64_t l = 0; l < od[2]; l++) {
                        int64_t idx[3] = {i, j, l}, k = 0;
                        while (idx[ax] >= tj_tensor_dims(in[k])[ax])
                            idx[ax] -= tj_tensor_dims(in[k++])[ax];
                        const int64_t *d = tj_tensor_dims(in[k]);
                        double want =
                            tj_tensor_get_f64(in[k], (idx[0] * d[1] + idx[1]) * d[2] + idx[2]);
                        bad += tj_tensor_get_f64(c, at++) != want;
                    }
            CHECK_MSG(bad == 0, "concat axis %d (%s): %lld elements off", ax, dt ? "i64" : "f32",
                      (long long)bad);
        }
    tj_scope_end();
}

int main(void) {
    big_concats();
    tj_scope_begin();
    tj_set_eager(0);
    tj_tensor *xi = i32(1, D(4), (int32_t[]){-7, -2, 3, 8});
    tj_tensor *xf = f32(1, D(4), (float[]){-1.5f, 0.0f, 2.5f, 4.0f});

    /* scalar promotion: a 0-d host scalar takes the other operand's dtype */
    IS(tj_mul(tj_scalar_i32(3), xi), TJ_I32, 1, D(4), V(-21, -6, 9, 24));
    IS(tj_add(xf, tj_scalar_f64(0.5)), TJ_F32, 1, D(4), V(-1, 0.5, 3, 4.5));
    IS(tj_mul(tj_scalar_i32(2), xf), TJ_F32, 1, D(4), V(-3, 0, 5, 8));
    /* static scalars mix with float tensors */
    IS(tj_mul(xf, tj_static_f64(2.0)), TJ_F32, 1, D(4), V(-3, 0, 5, 8));
    IS(tj_sub(tj_static_i64(1), xf), TJ_F32, 1, D(4), V(2.5, 1, -1.5, -3));
    IS(tj_add(xi, tj_static_i64(10)), TJ_I32, 1, D(4), V(3, 8, 13, 18));
    /* two tensors of different dtypes: an error naming the op and both dtypes */
    tj_tensor *e = tj_add(xi, xf);
    CHECK_EQ_INT(tj_status_of(e), TJ_ERR_DTYPE);
    CHECK_HAS(tj_error_message(e), "add");
    CHECK_HAS(tj_error_message(e), "int32");
    CHECK_HAS(tj_error_message(e), "float32");

    /* integer arithmetic: truncating div, floor div, floor mod (Python %) */
    tj_tensor *three = tj_scalar_i32(3);
    IS(tj_div(xi, three), TJ_I32, 1, D(4), V(-2, 0, 1, 2));
    IS(tj_floordiv(xi, three), TJ_I32, 1, D(4), V(-3, -1, 1, 2));
    IS(tj_mod(xi, three), TJ_I32, 1, D(4), V(2, 1, 0, 2));
    IS(tj_mod(xf, tj_scalar_f32(2.0f)), TJ_F32, 1, D(4), V(0.5, 0, 0.5, 0));
    e = tj_div(xi, tj_scalar_i32(0));
    CHECK(tj_status_of(e) != TJ_OK);
    CHECK_HAS(tj_error_message(e), "div");
    IS(tj_div(xf, tj_scalar_f32(2.0f)), TJ_F32, 1, D(4), V(-0.75, 0, 1.25, 2));
    IS(tj_pow(i32(1, D(3), (int32_t[]){2, 3, -2}), three), TJ_I32, 1, D(3), V(8, 27, -8));
    IS(tj_pow(tj_scalar_f64(2.0), tj_scalar_f64(0.5)), TJ_F64, 0, NULL, V(1.41421356237));
    IS(tj_maximum(xi, tj_scalar_i32(0)), TJ_I32, 1, D(4), V(0, 0, 3, 8));
    IS(tj_minimum(xf, tj_scalar_f32(1.0f)), TJ_F32, 1, D(4), V(-1.5, 0, 1, 1));

    /* unary */
    IS(tj_neg(xi), TJ_I32, 1, D(4), V(7, 2, -3, -8));
    IS(tj_abs(xi), TJ_I32, 1, D(4), V(7, 2, 3, 8));
    IS(tj_sign(xf), TJ_F32, 1, D(4), V(-1, 0, 1, 1));
    IS(tj_relu(xf), TJ_F32, 1, D(4), V(0, 0, 2.5, 4));
    IS(tj_floor(xf), TJ_F32, 1, D(4), V(-2, 0, 2, 4));
    IS(tj_ceil(xf), TJ_F32, 1, D(4), V(-1, 0, 3, 4));
    IS(tj_round(f32(1, D(5), (float[]){0.5f, 1.5f, 2.5f, -0.5f, -1.7f})), TJ_F32, 1, D(5),
       V(0, 2, 2, -0, -2));
    tj_tensor *pos = tj_tensor_from_data(TJ_F64, 1, D(3), (double[]){1, 4, 0.25});
    IS(tj_sqrt(pos), TJ_F64, 1, D(3), V(1, 2, 0.5));
    IS(tj_rsqrt(pos), TJ_F64, 1, D(3), V(1, 0.5, 2));
    IS(tj_log(pos), TJ_F64, 1, D(3), V(0, 1.38629436112, -1.38629436112));
    IS(tj_exp(tj_scalar_f64(1.0)), TJ_F64, 0, NULL, V(2.71828182846));
    IS(tj_tanh(tj_scalar_f32(0.5f)), TJ_F32, 0, NULL, V(0.46211715726));
    IS(tj_sigmoid(tj_scalar_f32(0.0f)), TJ_F32, 0, NULL, V(0.5));
    IS(tj_sin(tj_scalar_f64(0.5)), TJ_F64, 0, NULL, V(0.479425538604));
    IS(tj_cos(tj_scalar_f64(0.5)), TJ_F64, 0, NULL, V(0.87758256189));
    tj_tensor *special = tj_log(tj_tensor_from_data(TJ_F32, 1, D(3), (float[]){-1, 0, 1}));
    IS(tj_isnan(special), TJ_BOOL, 1, D(3), V(1, 0, 0));
    IS(tj_isinf(special), TJ_BOOL, 1, D(3), V(0, 1, 0));

    /* comparisons and logic */
    IS(tj_equal(xi, tj_scalar_i32(3)), TJ_BOOL, 1, D(4), V(0, 0, 1, 0));
    IS(tj_not_equal(xi, tj_scalar_i32(3)), TJ_BOOL, 1, D(4), V(1, 1, 0, 1));
    IS(tj_less(xf, tj_scalar_f32(0)), TJ_BOOL, 1, D(4), V(1, 0, 0, 0));
    IS(tj_less_equal(xf, tj_scalar_f32(0)), TJ_BOOL, 1, D(4), V(1, 1, 0, 0));
    IS(tj_greater(xf, tj_scalar_f32(0)), TJ_BOOL, 1, D(4), V(0, 0, 1, 1));
    IS(tj_greater_equal(xf, tj_scalar_f32(0)), TJ_BOOL, 1, D(4), V(0, 1, 1, 1));
    tj_tensor *ba = tj_tensor_from_data(TJ_BOOL, 1, D(4), (uint8_t[]){0, 0, 1, 1});
    tj_tensor *bb = tj_tensor_from_data(TJ_BOOL, 1, D(4), (uint8_t[]){0, 1, 0, 1});
    IS(tj_logical_and(ba, bb), TJ_BOOL, 1, D(4), V(0, 0, 0, 1));
    IS(tj_logical_or(ba, bb), TJ_BOOL, 1, D(4), V(0, 1, 1, 1));
    IS(tj_logical_not(ba), TJ_BOOL, 1, D(4), V(1, 1, 0, 0));
    IS(tj_where(ba, xi, tj_scalar_i32(0)), TJ_I32, 1, D(4), V(0, 0, 3, 8));

    /* broadcasting */
    tj_tensor *m23 = f32(2, D(2, 3), (float[]){1, 2, 3, 4, 5, 6});
    IS(tj_add(m23, f32(1, D(3), (float[]){10, 20, 30})), TJ_F32, 2, D(2, 3),
       V(11, 22, 33, 14, 25, 36));
    IS(tj_mul(m23, f32(2, D(2, 1), (float[]){1, -1})), TJ_F32, 2, D(2, 3), V(1, 2, 3, -4, -5, -6));
    e = tj_add(m23, f32(1, D(2), (float[]){1, 2}));
    CHECK_EQ_INT(tj_status_of(e), TJ_ERR_SHAPE);
    CHECK_HAS(tj_error_message(e), "[2,3] vs [2]");

    /* matmul, with a batch dimension */
    tj_tensor *m32 = f32(2, D(3, 2), (float[]){1, 0, 0, 1, 1, 1});
    IS(tj_matmul(m23, m32), TJ_F32, 2, D(2, 2), V(4, 5, 10, 11));
    tj_tensor *batch = f32(3, D(2, 1, 3), (float[]){1, 1, 1, 0, 1, 2});
    IS(tj_matmul(batch, m32), TJ_F32, 3, D(2, 1, 2), V(2, 2, 2, 3));

    /* reductions */
    IS(tj_sum(m23, 0, NULL, 0), TJ_F32, 0, NULL, V(21));
    IS(tj_sum(m23, 1, (int[]){0}, 0), TJ_F32, 1, D(3), V(5, 7, 9));
    IS(tj_sum(m23, 1, (int[]){-1}, 1), TJ_F32, 2, D(2, 1), V(6, 15));
    IS(tj_mean(m23, 1, (int[]){1}, 0), TJ_F32, 1, D(2), V(2, 5));
    IS(tj_max(m23, 1, (int[]){0}, 0), TJ_F32, 1, D(3), V(4, 5, 6));
    IS(tj_min(xi, 0, NULL, 0), TJ_I32, 0, NULL, V(-7));
    IS(tj_prod(m23, 1, (int[]){1}, 0), TJ_F32, 1, D(2), V(6, 120));
    IS(tj_sum(xi, 0, NULL, 0), TJ_I32, 0, NULL, V(2));
    IS(tj_argmax(m23, 1), TJ_I64, 1, D(2), V(2, 2));
    IS(tj_argmin(xi, 0), TJ_I64, 0, NULL, V(0));
    IS(tj_softmax(f32(1, D(2), (float[]){0, 0}), 0), TJ_F32, 1, D(2), V(0.5, 0.5));
    IS(tj_softmax(f32(1, D(3), (float[]){1, 2, 3}), -1), TJ_F32, 1, D(3),
       V(0.0900305732, 0.244728471, 0.665240956));
    IS(tj_log_softmax(f32(1, D(2), (float[]){0, 0}), 0), TJ_F32, 1, D(2),
       V(-0.69314718, -0.69314718));
    CHECK(tj_status_of(tj_sum(m23, 1, (int[]){2}, 0)) != TJ_OK);

    /* shape ops */
    IS(tj_reshape(m23, 2, D(3, -1)), TJ_F32, 2, D(3, 2), V(1, 2, 3, 4, 5, 6));
    CHECK_EQ_INT(tj_status_of(tj_reshape(m23, 1, D(5))), TJ_ERR_SHAPE);
    IS(tj_transpose(m23, NULL), TJ_F32, 2, D(3, 2), V(1, 4, 2, 5, 3, 6));
    IS(tj_transpose(batch, (int[]){1, 2, 0}), TJ_F32, 3, D(1, 3, 2), V(1, 0, 1, 1, 1, 2));
    IS(tj_broadcast_to(f32(1, D(2), (float[]){1, 2}), 2, D(2, 2)), TJ_F32, 2, D(2, 2),
       V(1, 2, 1, 2));
    IS(tj_expand_dims(xi, 0), TJ_I32, 2, D(1, 4), V(-7, -2, 3, 8));
    IS(tj_expand_dims(xi, -1), TJ_I32, 2, D(4, 1), V(-7, -2, 3, 8));
    IS(tj_squeeze(batch, 0, NULL), TJ_F32, 2, D(2, 3), V(1, 1, 1, 0, 1, 2));
    IS(tj_concat(2, (tj_tensor *[]){m23, m23}, 0), TJ_F32, 2, D(4, 3),
       V(1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6));
    IS(tj_concat(2, (tj_tensor *[]){m23, f32(2, D(2, 1), (float[]){7, 8})}, 1), TJ_F32, 2, D(2, 4),
       V(1, 2, 3, 7, 4, 5, 6, 8));
    IS(tj_slice(xi, D(1), D(3), NULL), TJ_I32, 1, D(2), V(-2, 3));
    IS(tj_slice(xi, NULL, NULL, D(-1)), TJ_I32, 1, D(4), V(8, 3, -2, -7));
    IS(tj_slice(xi, D(-3), D(100), D(2)), TJ_I32, 1, D(2), V(-2, 8));
    IS(tj_slice(m23, D(0, 1), D(2, 3), NULL), TJ_F32, 2, D(2, 2), V(2, 3, 5, 6));
    IS(tj_gather(xi, i32(1, D(3), (int32_t[]){3, 0, 3}), 0), TJ_I32, 1, D(3), V(8, -7, 8));
    IS(tj_gather(m23, tj_scalar_i32(1), 1), TJ_F32, 1, D(2), V(2, 5));
    e = tj_gather(xi, tj_scalar_i32(4), 0);
    CHECK(tj_status_of(e) != TJ_OK);
    CHECK_HAS(tj_error_message(e), "gather");
    /* scatter_add: repeated indices add up; along axis 1 of a matrix; errors */
    IS(tj_scatter_add(xi, i32(1, D(3), (int32_t[]){3, 0, 3}), i32(1, D(3), (int32_t[]){1, 2, 10}),
                      0),
       TJ_I32, 1, D(4), V(-5, -2, 3, 19));
    IS(tj_scatter_add(m23, tj_scalar_i32(2), f32(1, D(2), (float[]){10, 20}), -1), TJ_F32, 2,
       D(2, 3), V(1, 2, 13, 4, 5, 26));
    e = tj_scatter_add(xi, tj_scalar_i32(4), tj_scalar_i32(1), 0);
    CHECK(tj_status_of(e) == TJ_ERR_RUNTIME);
    CHECK_HAS(tj_error_message(e), "scatter_add: index 4 out of range [0, 4)");
    e = tj_scatter_add(xi, tj_scalar_i32(1), f32(1, D(2), (float[]){1, 2}), 0);
    CHECK(tj_status_of(e) == TJ_ERR_DTYPE);
    CHECK_HAS(tj_error_message(e),
              "x and updates must share a numeric dtype, got int32 and float32");
    e = tj_scatter_add(m23, tj_scalar_i32(1), f32(1, D(3), (float[]){1, 2, 3}), 1);
    CHECK(tj_status_of(e) == TJ_ERR_SHAPE);
    CHECK_HAS(tj_error_message(e), "updates [3] do not match x [2,3]");
    IS(tj_cast(xf, TJ_I32), TJ_I32, 1, D(4), V(-1, 0, 2, 4));
    IS(tj_cast(xi, TJ_BOOL), TJ_BOOL, 1, D(4), V(1, 1, 1, 1));
    IS(tj_cast(ba, TJ_F64), TJ_F64, 1, D(4), V(0, 0, 1, 1));

    /* constructors */
    IS(tj_zeros(TJ_I64, 2, D(1, 2)), TJ_I64, 2, D(1, 2), V(0, 0));
    IS(tj_ones(TJ_F64, 1, D(3)), TJ_F64, 1, D(3), V(1, 1, 1));
    IS(tj_ones(TJ_BOOL, 0, NULL), TJ_BOOL, 0, NULL, V(1));
    IS(tj_fill(2, D(2, 2), tj_scalar_i32(7)), TJ_I32, 2, D(2, 2), V(7, 7, 7, 7));
    IS(tj_fill(1, D(2), tj_scalar_f32(-0.5f)), TJ_F32, 1, D(2), V(-0.5, -0.5));
    CHECK(tj_status_of(tj_fill(1, D(2), xi)) != TJ_OK); /* value must be 0-d */
    IS(tj_eye(TJ_F32, 2, 3), TJ_F32, 2, D(2, 3), V(1, 0, 0, 0, 1, 0));
    IS(tj_eye(TJ_I32, 3, 3), TJ_I32, 2, D(3, 3), V(1, 0, 0, 0, 1, 0, 0, 0, 1));
    /* BUG: api/ops.c tj_range passes dims {0} but ir/infer.c wants -1 (unknown) for the
     * length, so every non-empty range is "range: shape does not match length N". */
    IS(tj_range(TJ_I32, 0, 5, 1), TJ_I32, 1, D(5), V(0, 1, 2, 3, 4));
    IS(tj_range(TJ_F32, 1, 2, 0.25), TJ_F32, 1, D(4), V(1, 1.25, 1.5, 1.75));
    IS(tj_range(TJ_I64, 5, 0, -2), TJ_I64, 1, D(3), V(5, 3, 1));
    IS(tj_range(TJ_I32, 3, 3, 1), TJ_I32, 1, D(0), V(0));
    CHECK(tj_status_of(tj_range(TJ_I32, 0, 5, 0)) != TJ_OK);
    tj_tensor *u1 = tj_random_uniform(TJ_F32, 1, D(100), -1, 1, 42);
    tj_tensor *u2 = tj_random_uniform(TJ_F32, 1, D(100), -1, 1, 42);
    tj_tensor *u3 = tj_random_uniform(TJ_F32, 1, D(100), -1, 1, 43);
    int same = 1, differ = 0, in_range = 1;
    for (int i = 0; i < 100; i++) {
        double a = tj_tensor_get_f64(u1, i);
        same &= a == tj_tensor_get_f64(u2, i);
        differ += a != tj_tensor_get_f64(u3, i);
        in_range &= a >= -1 && a < 1;
    }
    CHECK(same && differ > 90 && in_range);
    tj_tensor *nrm = tj_random_normal(TJ_F64, 1, D(4000), 3.0, 2.0, 7);
    CHECK_NEAR(tj_tensor_get_f64(tj_mean(nrm, 0, NULL, 0), 0), 3.0, 0.15);

    /* strings */
    const char *words[2] = {"ab", "c"};
    tj_tensor *s = tj_tensor_from_data(TJ_STRING, 1, D(2), words);
    CHECK(check_values_str(tj_str_concat(s, tj_scalar_str("!")), "[ab! c!]"));
    CHECK(check_values_str(tj_add(tj_scalar_str("x"), s), "[xab xc]"));
    CHECK(check_values_str(tj_add(tj_scalar_str("tj"), tj_static_str("it")), "tjit"));
    IS(tj_equal(s, tj_scalar_str("c")), TJ_BOOL, 1, D(2), V(0, 1));
    CHECK(tj_status_of(tj_mul(s, s)) != TJ_OK);

    /* text forms */
    CHECK(check_values_str(xi, "[-7 -2 3 8]"));
    CHECK(check_values_str(tj_scalar_f32(2.2f), "2.2"));
    char *txt = tj_tensor_str(tj_scalar_i32(2));
    CHECK_STR(txt, "tj.Tensor(2, shape=(), dtype=int32)");
    free(txt);
    CHECK_STR(tj_dtype_name(TJ_F32), "float32");
    CHECK_EQ_INT(tj_dtype_size(TJ_F64), 8);

    /* scopes and tj_keep */
    tj_tensor *kept;
    tj_scope_begin();
    tj_scope_begin();
    tj_tensor *tmp = tj_add(xf, xf);
    kept = tj_keep(tj_mul(tmp, tmp)); /* moves to the middle scope */
    tj_scope_end();
    IS(kept, TJ_F32, 1, D(4), V(9, 0, 25, 64));
    tj_tensor *outer = tj_keep(tj_neg(kept)); /* moves to the outermost scope */
    tj_scope_end();
    IS(outer, TJ_F32, 1, D(4), V(-9, 0, -25, -64));
    /* with no scope open, the caller owns the result */
    tj_scope_end();
    tj_tensor *o1 = tj_scalar_i32(1), *o2 = tj_scalar_i32(2);
    tj_tensor *owned = tj_add(o1, o2);
    IS0(owned, TJ_I32, 3);
    tj_release(owned);
    tj_release(o1);
    tj_release(o2);
    tj_tensor *own2 = tj_scalar_f32(1.0f);
    tj_tensor *own3 = tj_retain(own2);
    CHECK(own3 == own2);
    tj_release(own2);
    IS0(own3, TJ_F32, 1);
    tj_release(own3);

    /* borrowed tensors: no copy, release exactly once when the last reference goes */
    float *buf = aligned_alloc(64, 64);
    for (int i = 0; i < 4; i++)
        buf[i] = (float)i;
    tj_tensor *bt = tj_tensor_borrow(TJ_F32, 1, D(4), buf, count_release, NULL);
    CHECK(tj_tensor_data(bt) == (const void *)buf);
    tj_tensor *keep_bt = tj_retain(bt);
    tj_tensor *tup = tj_tuple(1, &bt); /* the tuple holds a reference too */
    tj_scope_begin();
    IS(tj_add(bt, bt), TJ_F32, 1, D(4), V(0, 2, 4, 6));
    tj_tensor *inner = tj_keep(tj_neg(bt)); /* kept past the scope: the caller owns it */
    tj_scope_end();
    IS(inner, TJ_F32, 1, D(4), V(-0.0, -1, -2, -3));
    tj_release(inner);
    tj_release(bt);
    CHECK_EQ_INT(n_released, 0);
    tj_release(tup);
    CHECK_EQ_INT(n_released, 0);
    tj_release(keep_bt);
    CHECK_EQ_INT(n_released, 1);
    free(buf);
    tj_scope_begin();
    /* a borrowed tensor with a bad shape calls nothing and returns an error */
    float one = 1;
    tj_tensor *bad =
        tj_tensor_borrow(TJ_F32, 9, D(1, 1, 1, 1, 1, 1, 1, 1, 1), &one, count_release, NULL);
    CHECK(tj_status_of(bad) != TJ_OK);
    /* data not aligned to its element size: an error naming the alignment, not a misaligned read */
    double dd[2] = {1, 2};
    tj_tensor *mis = tj_tensor_borrow(TJ_F64, 0, NULL, (char *)dd + 4, NULL, NULL);
    CHECK(tj_status_of(mis) == TJ_ERR_INVALID);
    CHECK(strstr(tj_error_message(mis), "not aligned to 8 bytes for float64") != NULL);
    /* without a release callback */
    tj_tensor *nb = tj_tensor_borrow(TJ_F32, 0, NULL, &one, NULL, NULL);
    IS0(tj_add(nb, nb), TJ_F32, 2);

    tj_scope_end();
    CHECK(n_released == 1 || n_released == 2); /* the failed borrow may release or not */
    return check_done();
}
