/* Eager kernels on shapes large enough to take their fast paths, against naive loops over the
 * same host data: transposes copied in 32 x 32 blocks (extents not multiples of 32, a 3-D
 * permutation, an int64 and a uint8 one; large ones on the pool, by bands of a plane or by planes),
 * f32 arithmetic split across the pool (same shapes and a scalar, 2^17 + 3 elements: chunks with a
 * tail; exp), a bias broadcast over rows (split by whole rows), and where with a broadcast
 * condition, with same-shape operands and with a scalar on either side. Every value must match
 * exactly: none of these round differently. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include <tracejit.h>

#include "check.h"

static float *randf(int64_t n, unsigned seed) {
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        v[i] = (float)((seed >> 8) % 2001) / 100.0f - 10.0f;
    }
    return v;
}

/* The elements of t (n of them) equal want, bit for bit as floats. */
static int64_t mismatches(tj_tensor *t, const float *want, int64_t n) {
    if (tj_status_of(t) || tj_tensor_numel(t) != n) {
        fprintf(stderr, "  %s\n", tj_status_of(t) ? tj_error_message(t) : "wrong size");
        return -1;
    }
    const float *g = tj_tensor_data(t);
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++)
        bad += g[i] != want[i];
    return bad;
}

static void transposes(void) {
    int64_t R = 70, C = 45, d2[2] = {R, C};
    float *x = randf(R * C, 1), *w = malloc((size_t)(R * C) * sizeof *w);
    tj_tensor *t = tj_tensor_from_data(TJ_F32, 2, d2, x);
    for (int64_t i = 0; i < R; i++)
        for (int64_t j = 0; j < C; j++)
            w[j * R + i] = x[i * C + j];
    CHECK_EQ_INT(mismatches(tj_transpose(t, NULL), w, R * C), 0);
    /* [A, B, C] -> [C, A, B] */
    int64_t A = 5, B = 33, K = 40, d3[3] = {A, B, K};
    float *y = randf(A * B * K, 2), *wy = malloc((size_t)(A * B * K) * sizeof *wy);
    for (int64_t a = 0; a < A; a++)
        for (int64_t b = 0; b < B; b++)
            for (int64_t k = 0; k < K; k++)
                wy[(k * A + a) * B + b] = y[(a * B + b) * K + k];
    tj_tensor *ty = tj_tensor_from_data(TJ_F32, 3, d3, y);
    CHECK_EQ_INT(mismatches(tj_transpose(ty, (int[]){2, 0, 1}), wy, A * B * K), 0);
    /* other element sizes */
    int64_t *xi = malloc((size_t)(R * C) * sizeof *xi);
    uint8_t *xb = malloc((size_t)(R * C));
    for (int64_t i = 0; i < R * C; i++)
        xi[i] = i * 7 - 100, xb[i] = (uint8_t)(i % 2);
    tj_tensor *ti = tj_transpose(tj_tensor_from_data(TJ_I64, 2, d2, xi), NULL);
    tj_tensor *tb = tj_transpose(tj_tensor_from_data(TJ_BOOL, 2, d2, xb), NULL);
    const int64_t *gi = tj_tensor_data(ti);
    const uint8_t *gb = tj_tensor_data(tb);
    int64_t bad = 0;
    for (int64_t i = 0; gi && gb && i < R; i++)
        for (int64_t j = 0; j < C; j++)
            bad += gi[j * R + i] != xi[i * C + j] || gb[j * R + i] != xb[i * C + j];
    CHECK(gi && gb);
    CHECK_EQ_INT(bad, 0);
    free(x), free(w), free(y), free(wy), free(xi), free(xb);
    /* past 2^17 elements the copy runs on the pool: one plane in bands of rows ([300, 517]),
     * and many planes ([9, 130, 120] -> [2, 0, 1]: 120 planes of 9 x 130) */
    int64_t R2 = 300, C2 = 517, e2[2] = {R2, C2};
    float *u = randf(R2 * C2, 5), *wu = malloc((size_t)(R2 * C2) * sizeof *wu);
    for (int64_t i = 0; i < R2; i++)
        for (int64_t j = 0; j < C2; j++)
            wu[j * R2 + i] = u[i * C2 + j];
    CHECK_EQ_INT(mismatches(tj_transpose(tj_tensor_from_data(TJ_F32, 2, e2, u), NULL), wu, R2 * C2),
                 0);
    int64_t e3[3] = {9, 130, 120};
    for (int64_t a = 0; a < 9; a++)
        for (int64_t b = 0; b < 130; b++)
            for (int64_t k = 0; k < 120; k++)
                wu[(k * 9 + a) * 130 + b] = u[(a * 130 + b) * 120 + k];
    CHECK_EQ_INT(mismatches(tj_transpose(tj_tensor_from_data(TJ_F32, 3, e3, u), (int[]){2, 0, 1}),
                            wu, 9 * 130 * 120),
                 0);
    free(u), free(wu);
}

static void arithmetic(void) {
    int64_t n = (1 << 17) + 3, d[1] = {n};
    float *a = randf(n, 3), *b = randf(n, 4), *w = malloc((size_t)n * sizeof *w);
    tj_tensor *ta = tj_tensor_from_data(TJ_F32, 1, d, a),
              *tb = tj_tensor_from_data(TJ_F32, 1, d, b);
    for (int64_t i = 0; i < n; i++)
        w[i] = a[i] * b[i];
    CHECK_EQ_INT(mismatches(tj_mul(ta, tb), w, n), 0);
    for (int64_t i = 0; i < n; i++)
        w[i] = a[i] - 0.25f;
    CHECK_EQ_INT(mismatches(tj_sub(ta, tj_scalar_f32(0.25f)), w, n), 0);
    for (int64_t i = 0; i < n; i++)
        w[i] = 3.0f / b[i];
    CHECK_EQ_INT(mismatches(tj_div(tj_scalar_f32(3.0f), tb), w, n), 0);
    for (int64_t i = 0; i < n; i++)
        w[i] = a[i] > b[i] ? a[i] : b[i];
    CHECK_EQ_INT(mismatches(tj_maximum(ta, tb), w, n), 0);
    /* unary ops split the same way once their first chunk ran */
    for (int64_t i = 0; i < n; i++)
        w[i] = expf(a[i] * 0.1f);
    CHECK_EQ_INT(mismatches(tj_exp(tj_mul(ta, tj_scalar_f32(0.1f))), w, n), 0);
    /* a bias over the last axis of [rows, 37]: split by whole rows */
    int64_t rows = n / 37, d2[2] = {rows, 37}, db[1] = {37};
    tj_tensor *m = tj_tensor_from_data(TJ_F32, 2, d2, a),
              *bias = tj_tensor_from_data(TJ_F32, 1, db, b);
    for (int64_t i = 0; i < rows * 37; i++)
        w[i] = a[i] + b[i % 37];
    CHECK_EQ_INT(mismatches(tj_add(m, bias), w, rows * 37), 0);
    /* where(a[rows, 1] > 0, m, -m): the condition broadcast along the rows */
    int64_t dc[2] = {rows, 1};
    tj_tensor *c = tj_greater(tj_tensor_from_data(TJ_F32, 2, dc, b), tj_scalar_f32(0));
    for (int64_t i = 0; i < rows * 37; i++)
        w[i] = b[i / 37] > 0 ? a[i] : -a[i];
    CHECK_EQ_INT(mismatches(tj_where(c, m, tj_neg(m)), w, rows * 37), 0);
    /* where over one coalesced row (split by ranges, selected without branches): same-shape
     * operands, a scalar on either side */
    tj_tensor *c1 = tj_greater(ta, tb);
    for (int64_t i = 0; i < n; i++)
        w[i] = a[i] > b[i] ? a[i] : b[i] * 2.0f;
    CHECK_EQ_INT(mismatches(tj_where(c1, ta, tj_mul(tb, tj_scalar_f32(2.0f))), w, n), 0);
    for (int64_t i = 0; i < n; i++)
        w[i] = a[i] > b[i] ? a[i] : 0.0f;
    CHECK_EQ_INT(mismatches(tj_where(c1, ta, tj_scalar_f32(0.0f)), w, n), 0);
    for (int64_t i = 0; i < n; i++)
        w[i] = a[i] > b[i] ? -1.5f : b[i];
    CHECK_EQ_INT(mismatches(tj_where(c1, tj_scalar_f32(-1.5f), tb), w, n), 0);
    free(a), free(b), free(w);
}

/* Reductions of f32 [7, 300, 33] over adjacent axes (read in order, one loop per kept row) and
 * over axes around a kept one (the iterator): sums in double in input order, as naive loops. */
static void reductions(void) {
    int64_t d[3] = {7, 300, 33}, n = 7 * 300 * 33;
    float *x = randf(n, 9), *w = malloc((size_t)(7 * 300) * sizeof *w);
    tj_tensor *t = tj_tensor_from_data(TJ_F32, 3, d, x);
    static const int axes[4][2] = {{1, -1}, {0, 1}, {2, -1}, {0, 2}};
    static const int n_axes[4] = {1, 2, 1, 2};
    for (int c = 0; c < 4; c++) {
        bool red[3] = {false, false, false};
        for (int k = 0; k < n_axes[c]; k++)
            red[axes[c][k]] = true;
        int64_t m = (red[0] ? 1 : 7) * (red[1] ? 1 : 300) * (red[2] ? 1 : 33);
        double *acc = calloc((size_t)m, sizeof *acc);
        float *mx = malloc((size_t)m * sizeof *mx);
        for (int64_t i = 0; i < m; i++)
            mx[i] = -INFINITY;
        for (int64_t a = 0; a < 7; a++)
            for (int64_t b = 0; b < 300; b++)
                for (int64_t k = 0; k < 33; k++) {
                    int64_t o = ((red[0] ? 0 : a) * (red[1] ? 1 : 300) + (red[1] ? 0 : b)) *
                                    (red[2] ? 1 : 33) +
                                (red[2] ? 0 : k);
                    float v = x[(a * 300 + b) * 33 + k];
                    acc[o] += v;
                    mx[o] = v > mx[o] ? v : mx[o];
                }
        for (int64_t i = 0; i < m; i++)
            w[i] = (float)acc[i];
        CHECK_EQ_INT(mismatches(tj_sum(t, n_axes[c], axes[c], 0), w, m), 0);
        CHECK_EQ_INT(mismatches(tj_max(t, n_axes[c], axes[c], 0), mx, m), 0);
        free(acc), free(mx);
    }
    free(x), free(w);
}

int main(void) {
    tj_scope_begin();
    transposes();
    arithmetic();
    reductions();
    /* outputs are not zeroed before kernels that write every element: a product over an empty K
     * must still write its zeros (into a reused block, after one of the same size) */
    int64_t d1[2] = {100, 0}, d2[2] = {0, 70}, df[2] = {100, 70};
    float *junk = randf(100 * 70, 11), *zero = calloc(100 * 70, sizeof *zero);
    tj_scope_begin(); /* freed at its end: the block goes back to the allocator's cache */
    tj_add(tj_tensor_from_data(TJ_F32, 2, df, junk), tj_scalar_f32(1));
    tj_scope_end();
    CHECK_EQ_INT(
        mismatches(tj_matmul(tj_zeros(TJ_F32, 2, d1), tj_zeros(TJ_F32, 2, d2)), zero, 100 * 70), 0);
    free(junk), free(zero);
    tj_scope_end();
    return check_done();
}
