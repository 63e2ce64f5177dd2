/* test_kernels_shape.c — the reference kernels for matmul (2-D, batched, broadcast batch dims,
 * wrapping ints, empty operands), the shape ops (reshape ... gather, on numbers and strings,
 * with Python slicing and gather's range errors), the sources (eye, range, the stateless random
 * ops: deterministic per seed, different across seeds, right moments) and rt_ref_kernel's own
 * guards (ops without a kernel, malformed calls). */
#include "kernel_helpers.h"

static tj_tensor *bin(int op, tj_tensor *a, tj_tensor *b) {
    return run2(proto(op), a, b);
}

/* Naive matmul of one batch for cross-checking. */
static void naive_mm(const double *a, const double *b, double *o, int64_t m, int64_t k, int64_t n) {
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0;
            for (int64_t p = 0; p < k; p++)
                s += a[i * k + p] * b[p * n + j];
            o[i * n + j] = s;
        }
}

static void test_matmul(void) {
    tj_tensor *a = mk(TJ_F32, 2, D(2, 3), F32(1, 2, 3, 4, 5, 6));
    tj_tensor *b = mk(TJ_F32, 2, D(3, 2), F32(7, 8, 9, 10, 11, 12));
    tj_tensor *r = bin(IR_OP_MATMUL, a, b);
    CHECK_SHAPE(r, 2, 2, 2);
    CHECK_VALS(r, 0, 58, 64, 139, 154);
    /* S20: ones [3,3] x ones [3,2] + 0 -> 3s */
    float ones[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    r = bin(IR_OP_MATMUL, mk(TJ_F32, 2, D(3, 3), ones), mk(TJ_F32, 2, D(3, 2), ones));
    CHECK_VALS(r, 0, 3, 3, 3, 3, 3, 3);
    /* batched with broadcasting: [2,1,2,3] x [3,3,2] -> [2,3,2,2] */
    double av[12], bv[18];
    for (int i = 0; i < 12; i++)
        av[i] = i * 0.5 - 2;
    for (int i = 0; i < 18; i++)
        bv[i] = (i % 7) - 3;
    tj_tensor *ba = mk(TJ_F64, 4, D(2, 1, 2, 3), av), *bb = mk(TJ_F64, 3, D(3, 3, 2), bv);
    r = bin(IR_OP_MATMUL, ba, bb);
    CHECK_SHAPE(r, 4, 2, 3, 2, 2);
    if (r && r->numel == 24) {
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 3; j++) {
                double want[4];
                naive_mm(av + i * 6, bv + j * 6, want, 2, 3, 2);
                for (int e = 0; e < 4; e++)
                    CHECK_NEAR(at(r, (i * 3 + j) * 4 + e), want[e], 1e-12);
            }
    }
    /* ints wrap */
    tj_tensor *ia = mk(TJ_I32, 2, D(1, 2), I32(INT32_MAX, 1));
    tj_tensor *ib = mk(TJ_I32, 2, D(2, 1), I32(2, 3));
    CHECK_IVALS(bin(IR_OP_MATMUL, ia, ib), 1); /* 2*MAX + 3 wraps to 1 */
    tj_tensor *la = mk(TJ_I64, 3, D(2, 1, 2), I64(1, 2, 3, 4));
    tj_tensor *lb = mk(TJ_I64, 2, D(2, 2), I64(1, 0, 0, -1));
    r = bin(IR_OP_MATMUL, la, lb);
    CHECK_SHAPE(r, 3, 2, 1, 2);
    CHECK_IVALS(r, 1, -2, 3, -4);
    /* f32 accumulates in float, in k order, as NumPy and TensorFlow: 1e8 + 1 rounds back to 1e8
     * sixteen times (in double it would be 100000016) */
    float big[17], one17[17];
    big[0] = 1e8f;
    for (int i = 0; i < 17; i++)
        one17[i] = 1, big[i] = i ? 1 : 1e8f;
    CHECK_VALS(bin(IR_OP_MATMUL, mk(TJ_F32, 2, D(1, 17), big), mk(TJ_F32, 2, D(17, 1), one17)), 0,
               100000000.0);
    /* overflow of a partial sum is not rescued: 6e38 is inf in float, inf + (-6e38) stays inf
     * only with an FMA; with a multiply and an add, -inf + inf is NaN */
    CHECK_VALS(bin(IR_OP_MATMUL, mk(TJ_F32, 2, D(1, 2), F32(3e38f, 3e38f)),
                   mk(TJ_F32, 2, D(2, 1), F32(2, -2))),
               0, NAN);
    /* empty: k = 0 gives zeros, m = 0 gives an empty result */
    r = bin(IR_OP_MATMUL, mk(TJ_F32, 2, D(2, 0), NULL), mk(TJ_F32, 2, D(0, 3), NULL));
    CHECK_SHAPE(r, 2, 2, 3);
    CHECK_VALS(r, 0, 0, 0, 0, 0, 0, 0);
    r = bin(IR_OP_MATMUL, mk(TJ_F64, 2, D(0, 2), NULL), mk(TJ_F64, 2, D(2, 3), NULL));
    CHECK(r && r->numel == 0);
}

static void test_reshape_transpose(void) {
    int32_t v[24];
    for (int i = 0; i < 24; i++)
        v[i] = i;
    tj_tensor *x = mk(TJ_I32, 3, D(2, 3, 4), v);
    ir_node p = proto(IR_OP_RESHAPE);
    p.rank = 2;
    p.dims[0] = 4;
    p.dims[1] = -1;
    tj_tensor *r = run1(p, x);
    CHECK_SHAPE(r, 2, 4, 6);
    CHECK(r && r->data != x->data && memcmp(r->data, v, sizeof v) == 0);
    p = proto(IR_OP_TRANSPOSE);
    p.a.n_list = 3;
    p.a.list[0] = 2, p.a.list[1] = 0, p.a.list[2] = 1;
    r = run1(p, x);
    CHECK_SHAPE(r, 3, 4, 2, 3);
    if (r && r->numel == 24) {
        int ok = 1;
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 2; j++)
                for (int k = 0; k < 3; k++)
                    ok &= ati(r, (i * 2 + j) * 3 + k) == v[(j * 3 + k) * 4 + i];
        CHECK(ok);
    }
    r = run1(proto(IR_OP_TRANSPOSE), mk(TJ_STRING, 2, D(2, 2), STR("a", "b", "c", "d")));
    CHECK_SVALS(r, "a", "c", "b", "d");
    p = proto(IR_OP_EXPAND_DIMS);
    p.a.i[0] = -1;
    tj_tensor *s = mk(TJ_STRING, 1, D(2), STR("p", "q"));
    r = run1(p, s);
    CHECK_SHAPE(r, 2, 2, 1);
    CHECK_SVALS(r, "p", "q");
    p = proto(IR_OP_SQUEEZE);
    r = run1(p, mk(TJ_F64, 3, D(1, 2, 1), F64(1.5, -2)));
    CHECK_SHAPE(r, 1, 2);
    CHECK_VALS(r, 0, 1.5, -2);
    /* empty reshape */
    p = proto(IR_OP_RESHAPE);
    p.rank = 2;
    p.dims[0] = 0;
    p.dims[1] = 5;
    r = run1(p, mk(TJ_F32, 1, D(0), NULL));
    CHECK(r && r->numel == 0 && r->dims[1] == 5);
}

static void test_broadcast_concat(void) {
    ir_node p = proto(IR_OP_BROADCAST_TO);
    p.rank = 3;
    p.dims[0] = 2, p.dims[1] = 2, p.dims[2] = 3;
    tj_tensor *r = run1(p, mk(TJ_I64, 2, D(2, 1), I64(5, 6)));
    CHECK_SHAPE(r, 3, 2, 2, 3);
    CHECK_IVALS(r, 5, 5, 5, 6, 6, 6, 5, 5, 5, 6, 6, 6);
    p.rank = 2;
    p.dims[0] = 2, p.dims[1] = 2;
    CHECK_SVALS(run1(p, mk(TJ_STRING, 0, NULL, STR("s"))), "s", "s", "s", "s");
    p.dims[0] = 0;
    r = run1(p, mk(TJ_BOOL, 1, D(2), B8(1, 0)));
    CHECK(r && r->numel == 0);

    tj_tensor *a = mk(TJ_F32, 2, D(2, 1), F32(1, 2));
    tj_tensor *b = mk(TJ_F32, 2, D(2, 2), F32(3, 4, 5, 6));
    tj_tensor *e = mk(TJ_F32, 2, D(2, 0), NULL);
    tj_tensor *in[3] = {a, e, b};
    ir_node c = proto(IR_OP_CONCAT);
    c.a.i[0] = 1;
    tj_status st;
    r = run_n(c, in, 3, &st);
    CHECK_SHAPE(r, 2, 2, 3);
    CHECK_VALS(r, 0, 1, 3, 4, 2, 5, 6);
    c.a.i[0] = 0;
    tj_tensor *in2[2] = {b, mk(TJ_F32, 2, D(1, 2), F32(7, 8))};
    r = run_n(c, in2, 2, &st);
    CHECK_SHAPE(r, 2, 3, 2);
    CHECK_VALS(r, 0, 3, 4, 5, 6, 7, 8);
    tj_tensor *sa = mk(TJ_STRING, 1, D(2), STR("x", "y")), *sb = mk(TJ_STRING, 1, D(1), STR("z"));
    tj_tensor *in3[2] = {sa, sb};
    CHECK_SVALS(run_n(c, in3, 2, &st), "x", "y", "z");
}

static tj_tensor *slice(tj_tensor *x, const int64_t *b, const int64_t *e, const int64_t *s) {
    ir_node p = proto(IR_OP_SLICE);
    int r = x->rank;
    p.a.n_list = (uint32_t)(3 * r);
    for (int d = 0; d < r; d++) {
        p.a.list[d] = b[d];
        p.a.list[r + d] = e[d];
        p.a.list[2 * r + d] = s[d];
    }
    return run1(p, x);
}

/* Python's slicing of range(len) for cross-checking: returns the count, fills idx. */
static int64_t py_slice(int64_t len, int64_t b, int64_t e, int64_t s, int64_t *idx) {
    int64_t n = 0;
    if (s > 0) {
        b = b < 0 ? (b + len < 0 ? 0 : b + len) : (b > len ? len : b);
        e = e < 0 ? (e + len < 0 ? 0 : e + len) : (e > len ? len : e);
        for (int64_t i = b; i < e; i += s) {
            idx[n++] = i;
            if (e - i <= s)
                break; /* the next step would pass e (and might overflow) */
        }
    } else {
        b = b < 0 ? (b + len < -1 ? -1 : b + len) : (b > len - 1 ? len - 1 : b);
        e = e < 0 ? (e + len < -1 ? -1 : e + len) : (e > len - 1 ? len - 1 : e);
        for (int64_t i = b; i > e; i += s) {
            idx[n++] = i;
            if ((uint64_t)(i - e) <= (uint64_t)0 - (uint64_t)s)
                break;
        }
    }
    return n;
}

static void test_slice(void) {
    int32_t v[12];
    for (int i = 0; i < 12; i++)
        v[i] = i;
    tj_tensor *x = mk(TJ_I32, 2, D(3, 4), v);
    tj_tensor *r = slice(x, D(1, 0), D(3, 4), D(1, 2));
    CHECK_SHAPE(r, 2, 2, 2);
    CHECK_IVALS(r, 4, 6, 8, 10);
    r = slice(x, D(INT64_MAX, -1), D(INT64_MIN, INT64_MIN), D(-1, -2)); /* x[::-1, ::-2] */
    CHECK_SHAPE(r, 2, 3, 2);
    CHECK_IVALS(r, 11, 9, 7, 5, 3, 1);
    r = slice(x, D(-100, 2), D(100, 2), D(1, 1));
    CHECK_SHAPE(r, 2, 3, 0);
    /* exhaustive 1-D cross-check against Python's rules */
    int64_t vals[] = {INT64_MIN, -9, -5, -4, -1, 0, 1, 3, 4, 5, 9, INT64_MAX};
    int64_t steps[] = {INT64_MIN, -5, -2, -1, 1, 2, 3, INT64_MAX};
    tj_tensor *y = mk(TJ_I64, 1, D(5), I64(0, 1, 2, 3, 4));
    int bad = 0;
    for (size_t i = 0; i < 12; i++)
        for (size_t j = 0; j < 12; j++)
            for (size_t k = 0; k < 8; k++) {
                int64_t idx[16];
                int64_t n = py_slice(5, vals[i], vals[j], steps[k], idx);
                r = slice(y, &vals[i], &vals[j], &steps[k]);
                if (!r || r->numel != n) {
                    fprintf(stderr, "slice %lld:%lld:%lld gives %lld elements, want %lld\n",
                            (long long)vals[i], (long long)vals[j], (long long)steps[k],
                            r ? (long long)r->numel : -1LL, (long long)n);
                    bad++;
                    continue;
                }
                for (int64_t q = 0; q < n; q++)
                    bad += ati(r, q) != idx[q];
            }
    CHECK_EQ_INT(bad, 0);
    r = slice(mk(TJ_STRING, 1, D(3), STR("a", "b", "c")), D(-1), D(INT64_MIN), D(-2));
    CHECK_SVALS(r, "c", "a");
    r = slice(mk(TJ_F32, 1, D(0), NULL), D(0), D(5), D(1));
    CHECK(r && r->numel == 0);
}

static tj_tensor *gather(tj_tensor *p, tj_tensor *i, int64_t axis) {
    ir_node n = proto(IR_OP_GATHER);
    n.a.i[0] = axis;
    return run2(n, p, i);
}

static void test_gather(void) {
    tj_tensor *p = mk(TJ_F32, 2, D(3, 2), F32(1, 2, 3, 4, 5, 6));
    tj_tensor *r = gather(p, mk(TJ_I32, 1, D(4), I32(2, 0, 2, 1)), 0);
    CHECK_SHAPE(r, 2, 4, 2);
    CHECK_VALS(r, 0, 5, 6, 1, 2, 5, 6, 3, 4);
    r = gather(p, mk(TJ_I64, 2, D(2, 2), I64(1, 0, 0, 0)), 1);
    CHECK_SHAPE(r, 3, 3, 2, 2);
    CHECK_VALS(r, 0, 2, 1, 1, 1, 4, 3, 3, 3, 6, 5, 5, 5);
    r = gather(p, mk(TJ_I64, 0, NULL, I64(1)), 0);
    CHECK_SHAPE(r, 1, 2);
    CHECK_VALS(r, 0, 3, 4);
    tj_tensor *s = mk(TJ_STRING, 1, D(3), STR("a", "bb", "ccc"));
    CHECK_SVALS(gather(s, mk(TJ_I32, 1, D(3), I32(2, 2, 0)), 0), "ccc", "ccc", "a");
    r = gather(p, mk(TJ_I32, 1, D(0), NULL), 0);
    CHECK(r && r->numel == 0 && r->rank == 2);
    /* S23: gather of index 1 on a 1-element tensor fails with a clear error */
    tj_tensor *one = mk(TJ_F32, 1, D(1), F32(7));
    CHECK_FAILS(gather(one, mk(TJ_I32, 0, NULL, I32(1)), 0), TJ_ERR_RUNTIME,
                "gather: index 1 out of range [0, 1) on axis 0 of params [1]");
    CHECK_FAILS(gather(p, mk(TJ_I64, 1, D(2), I64(0, -1)), 0), TJ_ERR_RUNTIME,
                "gather: index -1 out of range [0, 3) on axis 0 of params [3,2]");
}

static void test_sources(void) {
    ir_node p = proto(IR_OP_EYE);
    p.dtype = TJ_F64;
    p.rank = 2;
    p.dims[0] = 2, p.dims[1] = 3;
    tj_tensor *r = run0(p);
    CHECK_SHAPE(r, 2, 2, 3);
    CHECK_VALS(r, 0, 1, 0, 0, 0, 1, 0);
    p.dtype = TJ_BOOL;
    p.dims[0] = 3, p.dims[1] = 2;
    CHECK_IVALS(run0(p), 1, 0, 0, 1, 0, 0);
    p.dtype = TJ_I32;
    p.dims[0] = 0;
    r = run0(p);
    CHECK(r && r->numel == 0);

    p = proto(IR_OP_RANGE);
    p.dtype = TJ_F32;
    p.a.f[0] = 1, p.a.f[1] = 2, p.a.f[2] = 0.25;
    CHECK_VALS(run0(p), 0, 1, 1.25, 1.5, 1.75);
    p.dtype = TJ_I32;
    p.a.f[0] = 10, p.a.f[1] = 1, p.a.f[2] = -3;
    CHECK_IVALS(run0(p), 10, 7, 4);
    p.a.f[0] = 0, p.a.f[1] = 0, p.a.f[2] = 1;
    r = run0(p);
    CHECK(r && r->numel == 0 && r->rank == 1);
    p.dtype = TJ_I64;
    p.a.f[0] = 1, p.a.f[1] = 6, p.a.f[2] = 1;
    CHECK_IVALS(run0(p), 1, 2, 3, 4, 5);

    /* random: deterministic per seed, element k independent of the total size */
    enum { N = 20000 };
    ir_node u = proto(IR_OP_RANDOM_UNIFORM);
    u.dtype = TJ_F32;
    u.rank = 1;
    u.dims[0] = N;
    u.a.i[0] = 42;
    u.a.f[0] = -1, u.a.f[1] = 3;
    tj_tensor *u1 = run0(u), *u2 = run0(u);
    u.a.i[0] = 43;
    tj_tensor *u3 = run0(u);
    u.a.i[0] = 42;
    u.dims[0] = 5;
    tj_tensor *u4 = run0(u);
    CHECK(u1 && u2 && u3 && u4);
    if (u1 && u2 && u3 && u4) {
        CHECK(memcmp(u1->data, u2->data, N * sizeof(float)) == 0);
        CHECK(memcmp(u1->data, u4->data, 5 * sizeof(float)) == 0);
        int same = 0, out = 0;
        double sum = 0;
        for (int i = 0; i < N; i++) {
            double a = at(u1, i);
            same += a == at(u3, i);
            out += !(a >= -1 && a < 3);
            sum += a;
        }
        CHECK(same < 5);
        CHECK_EQ_INT(out, 0);
        CHECK_NEAR(sum / N, 1.0, 0.05); /* mean of U(-1,3); sd of the mean ~0.008 */
    }
    ir_node g = proto(IR_OP_RANDOM_NORMAL);
    g.dtype = TJ_F64;
    g.rank = 2;
    g.dims[0] = 100, g.dims[1] = 200;
    g.a.i[0] = 7;
    g.a.f[0] = 2, g.a.f[1] = 0.5;
    tj_tensor *n1 = run0(g), *n2 = run0(g);
    CHECK(n1 && n2 && memcmp(n1->data, n2->data, (size_t)n1->numel * 8) == 0);
    if (n1) {
        double s1 = 0, s2 = 0;
        for (int64_t i = 0; i < n1->numel; i++)
            s1 += at(n1, i);
        double mean = s1 / (double)n1->numel;
        for (int64_t i = 0; i < n1->numel; i++)
            s2 += (at(n1, i) - mean) * (at(n1, i) - mean);
        CHECK_NEAR(mean, 2.0, 0.02);
        CHECK_NEAR(sqrt(s2 / (double)n1->numel), 0.5, 0.02);
    }
    g.dims[0] = 0;
    r = run0(g);
    CHECK(r && r->numel == 0);
}

static void test_dispatch_guards(void) {
    ir_node p = proto(IR_OP_CONST);
    tj_tensor *o = mk(TJ_F32, 0, NULL, F32(0));
    CHECK_EQ_INT(rt_ref_kernel(&p, NULL, o), TJ_ERR_INVALID);
    CHECK_HAS(ir_last_error(), "const");
    p = proto(IR_OP_ASSIGN);
    CHECK_EQ_INT(rt_ref_kernel(&p, NULL, o), TJ_ERR_INVALID);
    /* arity and output mismatches are errors, not crashes */
    p = proto(IR_OP_ADD);
    p.n_in = 1;
    CHECK_EQ_INT(rt_ref_kernel(&p, &o, o), TJ_ERR_INVALID);
    p = proto(IR_OP_NEG);
    p.n_in = 1;
    p.dtype = TJ_F32;
    p.rank = 1;
    p.dims[0] = 3;
    CHECK_EQ_INT(rt_ref_kernel(&p, &o, o), TJ_ERR_INVALID);
    CHECK_HAS(ir_last_error(), "neg");
    CHECK_EQ_INT(rt_ref_kernel(NULL, NULL, NULL), TJ_ERR_INVALID);
}

int main(void) {
    test_matmul();
    test_reshape_transpose();
    test_broadcast_concat();
    test_slice();
    test_gather();
    test_sources();
    test_dispatch_guards();
    pool_free();
    return check_done();
}
