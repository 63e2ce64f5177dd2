/* test_kernels.c — the elementwise reference kernels (unary, cast, binary with broadcasting,
 * where) and the reductions (sum ... prod, argmax/argmin, softmax), checked value by value against
 * hand-computed or scalar-formula results, on every supported dtype, with empty tensors and the
 * error paths (integer division by zero, negative integer exponent, empty max). The kernels are
 * the oracle for every backend, so these tests are the oracle's oracle. */
#include "kernel_helpers.h"

static const float fx[] = {-2.5f, -1.0f, -0.5f, 0.0f, 0.5f, 1.5f, 2.5f, 3.0f};
static const int64_t d8[] = {8};

static void test_unary_float(void) {
    static const int ops[] = {IR_OP_NEG,  IR_OP_ABS,   IR_OP_SIGN,  IR_OP_EXP,     IR_OP_LOG,
                              IR_OP_SQRT, IR_OP_RSQRT, IR_OP_TANH,  IR_OP_SIGMOID, IR_OP_RELU,
                              IR_OP_SIN,  IR_OP_COS,   IR_OP_FLOOR, IR_OP_CEIL,    IR_OP_ROUND,
                              IR_OP_ATAN, IR_OP_ASIN,  IR_OP_ACOS,  IR_OP_ERF};
    double dx[8];
    for (int i = 0; i < 8; i++)
        dx[i] = fx[i];
    tj_tensor *xf = mk(TJ_F32, 1, d8, fx), *xd = mk(TJ_F64, 1, d8, dx);
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        int op = ops[k];
        tj_tensor *rf = run1(proto(op), xf), *rd = run1(proto(op), xd);
        CHECK_MSG(rf && rd, "%s: %s", ir_ops[op].name, ir_last_error());
        if (!rf || !rd)
            continue;
        CHECK_EQ_INT(rf->dtype, TJ_F32);
        CHECK_EQ_INT(rd->dtype, TJ_F64);
        for (int i = 0; i < 8; i++) {
            double v = dx[i], w;
            switch (op) {
            case IR_OP_NEG:
                w = -v;
                break;
            case IR_OP_ABS:
                w = fabs(v);
                break;
            case IR_OP_SIGN:
                w = v > 0 ? 1 : v < 0 ? -1 : 0;
                break;
            case IR_OP_EXP:
                w = exp(v);
                break;
            case IR_OP_LOG:
                w = log(v);
                break;
            case IR_OP_SQRT:
                w = sqrt(v);
                break;
            case IR_OP_RSQRT:
                w = 1 / sqrt(v);
                break;
            case IR_OP_TANH:
                w = tanh(v);
                break;
            case IR_OP_SIGMOID:
                w = 1 / (1 + exp(-v));
                break;
            case IR_OP_RELU:
                w = v > 0 ? v : 0;
                break;
            case IR_OP_SIN:
                w = sin(v);
                break;
            case IR_OP_COS:
                w = cos(v);
                break;
            case IR_OP_ATAN:
                w = atan(v);
                break;
            case IR_OP_ASIN: /* NaN outside [-1, 1] */
                w = asin(v);
                break;
            case IR_OP_ACOS:
                w = acos(v);
                break;
            case IR_OP_ERF:
                w = erf(v);
                break;
            case IR_OP_FLOOR:
                w = floor(v);
                break;
            case IR_OP_CEIL:
                w = ceil(v);
                break;
            default:
                w = rint(v);
                break;
            }
            CHECK_MSG(same_f(at(rd, i), w, 1e-15), "%s f64(%g) = %.17g, want %.17g",
                      ir_ops[op].name, v, at(rd, i), w);
            CHECK_MSG(same_f(at(rf, i), w, 1e-6), "%s f32(%g) = %.9g, want %.9g", ir_ops[op].name,
                      v, at(rf, i), w);
        }
    }
    /* round is half to even */
    CHECK_VALS(run1(proto(IR_OP_ROUND), xf), 0, -2, -1, -0.0, 0, 0, 2, 2, 3);
    /* NaN passes through sign/relu; log(0) = -inf */
    tj_tensor *nanx = mk(TJ_F32, 1, D(3), F32(NAN, 0.0f, -INFINITY));
    CHECK_VALS(run1(proto(IR_OP_SIGN), nanx), 0, NAN, 0, -1);
    CHECK_VALS(run1(proto(IR_OP_RELU), nanx), 0, NAN, 0, 0);
    CHECK_VALS(run1(proto(IR_OP_LOG), nanx), 0, NAN, -INFINITY, NAN);
    CHECK_VALS(run1(proto(IR_OP_SIGMOID), nanx), 0, NAN, 0.5, 0);
}

static void test_unary_int_bool(void) {
    tj_tensor *a = mk(TJ_I32, 1, D(5), I32(INT32_MIN, -7, 0, 5, INT32_MAX));
    CHECK_IVALS(run1(proto(IR_OP_NEG), a), INT32_MIN, 7, 0, -5, -INT32_MAX);
    CHECK_IVALS(run1(proto(IR_OP_ABS), a), INT32_MIN, 7, 0, 5, INT32_MAX);
    CHECK_IVALS(run1(proto(IR_OP_SIGN), a), -1, -1, 0, 1, 1);
    CHECK_IVALS(run1(proto(IR_OP_RELU), a), 0, 0, 0, 5, INT32_MAX);
    tj_tensor *b = mk(TJ_I64, 1, D(3), I64(INT64_MIN, -3, 9));
    CHECK_IVALS(run1(proto(IR_OP_NEG), b), INT64_MIN, 3, -9);
    CHECK_IVALS(run1(proto(IR_OP_ABS), b), INT64_MIN, 3, 9);
    CHECK_IVALS(run1(proto(IR_OP_SIGN), b), -1, -1, 1);
    tj_tensor *c = mk(TJ_BOOL, 1, D(2), B8(0, 1));
    tj_tensor *nc = run1(proto(IR_OP_LOGICAL_NOT), c);
    CHECK(nc && nc->dtype == TJ_BOOL);
    CHECK_IVALS(nc, 1, 0);
    tj_tensor *f = mk(TJ_F64, 1, D(4), F64(NAN, INFINITY, -INFINITY, 1.0));
    tj_tensor *isn = run1(proto(IR_OP_ISNAN), f), *isi = run1(proto(IR_OP_ISINF), f);
    CHECK(isn && isn->dtype == TJ_BOOL);
    CHECK_IVALS(isn, 1, 0, 0, 0);
    CHECK_IVALS(isi, 0, 1, 1, 0);
    /* empty tensors */
    tj_tensor *e = mk(TJ_F32, 2, D(0, 3), NULL);
    tj_tensor *ee = run1(proto(IR_OP_EXP), e);
    CHECK(ee && ee->numel == 0 && ee->rank == 2 && ee->dims[1] == 3);
    /* defensive: a mismatching dtype straight into the kernel is unsupported, not a crash */
    ir_node p = proto(IR_OP_EXP);
    p.n_in = 1;
    p.dtype = TJ_I32;
    p.rank = 1;
    p.dims[0] = 5;
    tj_tensor *o = track(rt_tensor_alloc(TJ_I32, 1, D(5)));
    CHECK_EQ_INT(rt_ref_kernel(&p, &a, o), TJ_ERR_UNSUPPORTED);
    CHECK_HAS(ir_last_error(), "exp");
}

static tj_tensor *cast(tj_tensor *x, int dt) {
    ir_node p = proto(IR_OP_CAST);
    p.dtype = (uint8_t)dt;
    return run1(p, x);
}

static void test_cast(void) {
    tj_tensor *f = mk(TJ_F32, 1, D(7), F32(1.9f, -1.9f, 1e10f, -1e10f, NAN, 0.0f, -0.5f));
    CHECK_IVALS(cast(f, TJ_I32), 1, -1, INT32_MAX, INT32_MIN, 0, 0, 0);
    CHECK_IVALS(cast(f, TJ_I64), 1, -1, 10000000000LL, -10000000000LL, 0, 0, 0);
    CHECK_IVALS(cast(f, TJ_BOOL), 1, 1, 1, 1, 1, 0, 1);
    tj_tensor *d = mk(TJ_F64, 1, D(3), F64(1e300, -1e300, 3.99));
    CHECK_IVALS(cast(d, TJ_I64), INT64_MAX, INT64_MIN, 3);
    CHECK_VALS(cast(d, TJ_F32), 0, INFINITY, -INFINITY, (float)3.99);
    tj_tensor *l = mk(TJ_I64, 1, D(3), I64(4294967297LL, -1, (int64_t)1 << 40));
    CHECK_IVALS(cast(l, TJ_I32), 1, -1, 0); /* wraps */
    tj_tensor *big = mk(TJ_I64, 1, D(1), I64(((int64_t)1 << 53) + 1));
    CHECK_VALS(cast(big, TJ_F32), 0, 9007199254740992.0);
    tj_tensor *b = mk(TJ_BOOL, 1, D(2), B8(1, 0));
    CHECK_VALS(cast(b, TJ_F32), 0, 1, 0);
    CHECK_IVALS(cast(b, TJ_I64), 1, 0);
    tj_tensor *i = mk(TJ_I32, 1, D(3), I32(-3, 0, 2));
    tj_tensor *id = cast(i, TJ_F64);
    CHECK(id && id->dtype == TJ_F64);
    CHECK_VALS(id, 0, -3, 0, 2);
    CHECK_IVALS(cast(i, TJ_BOOL), 1, 0, 1);
    tj_tensor *s = mk(TJ_STRING, 1, D(2), STR("ab", ""));
    tj_tensor *sc = cast(s, TJ_STRING);
    CHECK_SVALS(sc, "ab", "");
    CHECK(sc && ((tj_string *)sc->data)[0].data != ((tj_string *)s->data)[0].data);
}

static tj_tensor *bin(int op, tj_tensor *a, tj_tensor *b) {
    return run2(proto(op), a, b);
}

static void test_binary_float(void) {
    tj_tensor *a = mk(TJ_F32, 2, D(2, 3), F32(1, 2, 3, 4, 5, 6));
    tj_tensor *row = mk(TJ_F32, 1, D(3), F32(10, 20, 30));
    tj_tensor *col = mk(TJ_F32, 2, D(2, 1), F32(100, 200));
    tj_tensor *r = bin(IR_OP_ADD, a, row);
    CHECK_SHAPE(r, 2, 2, 3);
    CHECK_VALS(r, 0, 11, 22, 33, 14, 25, 36);
    r = bin(IR_OP_SUB, col, row); /* [2,1] - [3] -> [2,3] */
    CHECK_SHAPE(r, 2, 2, 3);
    CHECK_VALS(r, 0, 90, 80, 70, 190, 180, 170);
    tj_tensor *s = mk(TJ_F32, 0, NULL, F32(2));
    CHECK_VALS(bin(IR_OP_MUL, s, a), 0, 2, 4, 6, 8, 10, 12);
    CHECK_VALS(bin(IR_OP_DIV, a, s), 0, 0.5, 1, 1.5, 2, 2.5, 3);
    tj_tensor *x = mk(TJ_F64, 1, D(6), F64(7, -7, 7, -7, 1, -7.5));
    tj_tensor *y = mk(TJ_F64, 1, D(6), F64(2, 2, -2, -2, 0, 2));
    CHECK_VALS(bin(IR_OP_DIV, x, y), 0, 3.5, -3.5, -3.5, 3.5, INFINITY, -3.75);
    CHECK_VALS(bin(IR_OP_FLOORDIV, x, y), 0, 3, -4, -4, 3, INFINITY, -4);
    CHECK_VALS(bin(IR_OP_MOD, x, y), 0, 1, 1, -1, -1, NAN, 0.5);
    CHECK_VALS(bin(IR_OP_POW, x, y), 1e-15, 49, 49, 1 / 49.0, 1 / 49.0, 1, 56.25);
    tj_tensor *n1 = mk(TJ_F32, 1, D(3), F32(NAN, 1, 5));
    tj_tensor *n2 = mk(TJ_F32, 1, D(3), F32(0, NAN, 3));
    CHECK_VALS(bin(IR_OP_MAXIMUM, n1, n2), 0, NAN, NAN, 5);
    CHECK_VALS(bin(IR_OP_MINIMUM, n1, n2), 0, NAN, NAN, 3);
    tj_tensor *c = bin(IR_OP_LT, n1, n2);
    CHECK(c && c->dtype == TJ_BOOL);
    CHECK_IVALS(c, 0, 0, 0);
    CHECK_IVALS(bin(IR_OP_NE, n1, n2), 1, 1, 1);
    CHECK_IVALS(bin(IR_OP_GT, a, row), 0, 0, 0, 0, 0, 0);
    CHECK_IVALS(bin(IR_OP_GE, row, a), 1, 1, 1, 1, 1, 1);
    tj_tensor *e1 = mk(TJ_F32, 1, D(3), F32(1, 2, 3));
    tj_tensor *e2 = mk(TJ_F32, 1, D(3), F32(1, 3, 2));
    CHECK_IVALS(bin(IR_OP_EQ, e1, e2), 1, 0, 0);
    CHECK_IVALS(bin(IR_OP_LE, e1, e2), 1, 1, 0);
    /* broadcasting into an empty output, and rank-0 with rank-0 */
    tj_tensor *em = mk(TJ_F32, 2, D(0, 3), NULL);
    r = bin(IR_OP_ADD, em, row);
    CHECK(r && r->numel == 0 && r->rank == 2 && r->dims[0] == 0);
    CHECK_VALS(bin(IR_OP_ADD, s, s), 0, 4);
}

static void test_binary_int(void) {
    tj_tensor *x = mk(TJ_I32, 1, D(6), I32(7, -7, 7, -7, INT32_MIN, INT32_MAX));
    tj_tensor *y = mk(TJ_I32, 1, D(6), I32(2, 2, -2, -2, -1, 1));
    CHECK_IVALS(bin(IR_OP_DIV, x, y), 3, -3, -3, 3, INT32_MIN, INT32_MAX);
    CHECK_IVALS(bin(IR_OP_FLOORDIV, x, y), 3, -4, -4, 3, INT32_MIN, INT32_MAX);
    CHECK_IVALS(bin(IR_OP_MOD, x, y), 1, 1, -1, -1, 0, 0);
    CHECK_IVALS(bin(IR_OP_ADD, x, y), 9, -5, 5, -9, INT32_MAX, INT32_MIN); /* wraps */
    CHECK_IVALS(bin(IR_OP_SUB, x, y), 5, -9, 9, -5, INT32_MIN + 1, INT32_MAX - 1);
    CHECK_IVALS(bin(IR_OP_MUL, x, y), 14, -14, -14, 14, INT32_MIN, INT32_MAX);
    CHECK_IVALS(bin(IR_OP_MAXIMUM, x, y), 7, 2, 7, -2, -1, INT32_MAX);
    CHECK_IVALS(bin(IR_OP_MINIMUM, x, y), 2, -7, -2, -7, INT32_MIN, 1);
    CHECK_IVALS(bin(IR_OP_EQ, x, x), 1, 1, 1, 1, 1, 1);
    tj_tensor *b = mk(TJ_I64, 1, D(4), I64(3, -2, 2, 0));
    tj_tensor *e = mk(TJ_I64, 1, D(4), I64(4, 3, 64, 0));
    CHECK_IVALS(bin(IR_OP_POW, b, e), 81, -8, 0, 1); /* 2^64 wraps to 0 */
    tj_tensor *big = mk(TJ_I64, 1, D(2), I64(INT64_MAX, INT64_MIN));
    tj_tensor *one = mk(TJ_I64, 0, NULL, I64(1));
    CHECK_IVALS(bin(IR_OP_ADD, big, one), INT64_MIN, INT64_MIN + 1);
    tj_tensor *mone = mk(TJ_I64, 0, NULL, I64(-1));
    CHECK_IVALS(bin(IR_OP_DIV, big, mone), -INT64_MAX, INT64_MIN);
    CHECK_IVALS(bin(IR_OP_MOD, big, mone), 0, 0);
    /* Python floor semantics on a broadcast grid */
    tj_tensor *g = mk(TJ_I64, 2, D(2, 1), I64(-5, 5));
    tj_tensor *h = mk(TJ_I64, 1, D(2), I64(3, -3));
    CHECK_IVALS(bin(IR_OP_FLOORDIV, g, h), -2, 1, 1, -2);
    CHECK_IVALS(bin(IR_OP_MOD, g, h), 1, -2, 2, -1);
    /* errors */
    tj_tensor *z = mk(TJ_I32, 1, D(2), I32(1, 0));
    tj_tensor *two = mk(TJ_I32, 2, D(1, 2), I32(1, 2));
    CHECK_FAILS(bin(IR_OP_DIV, two, z), TJ_ERR_RUNTIME, "div: integer division by zero");
    CHECK_FAILS(bin(IR_OP_FLOORDIV, two, z), TJ_ERR_RUNTIME, "floordiv: integer division by zero");
    CHECK_FAILS(bin(IR_OP_MOD, two, z), TJ_ERR_RUNTIME, "integer division by zero");
    tj_tensor *neg = mk(TJ_I32, 0, NULL, I32(-1));
    CHECK_FAILS(bin(IR_OP_POW, two, neg), TJ_ERR_RUNTIME, "pow: negative integer exponent");
    /* an empty output never divides */
    tj_tensor *em = mk(TJ_I32, 1, D(0), NULL);
    tj_tensor *z0 = mk(TJ_I32, 0, NULL, I32(0));
    tj_tensor *r = bin(IR_OP_DIV, em, z0);
    CHECK(r && r->numel == 0);
}

static void test_binary_bool_string_where(void) {
    tj_tensor *p = mk(TJ_BOOL, 1, D(4), B8(0, 0, 1, 1));
    tj_tensor *q = mk(TJ_BOOL, 1, D(4), B8(0, 1, 0, 1));
    CHECK_IVALS(bin(IR_OP_LOGICAL_AND, p, q), 0, 0, 0, 1);
    CHECK_IVALS(bin(IR_OP_LOGICAL_OR, p, q), 0, 1, 1, 1);
    CHECK_IVALS(bin(IR_OP_EQ, p, q), 1, 0, 0, 1);
    CHECK_IVALS(bin(IR_OP_NE, p, q), 0, 1, 1, 0);
    tj_tensor *s = mk(TJ_STRING, 2, D(2, 1), STR("a", "bc"));
    tj_tensor *t = mk(TJ_STRING, 1, D(3), STR("x", "", "yz"));
    tj_tensor *st = bin(IR_OP_ADD, s, t);
    CHECK_SHAPE(st, 2, 2, 3);
    CHECK_SVALS(st, "ax", "a", "ayz", "bcx", "bc", "bcyz");
    tj_tensor *u = mk(TJ_STRING, 1, D(3), STR("a", "", "a\0"));
    tj_tensor *v = mk(TJ_STRING, 0, NULL, STR("a"));
    CHECK_IVALS(bin(IR_OP_EQ, u, v), 1, 0, 1);
    CHECK_IVALS(bin(IR_OP_NE, u, v), 0, 1, 0);
    tj_tensor *aa = mk(TJ_STRING, 0, NULL, STR("a"));
    CHECK_SVALS(bin(IR_OP_ADD, aa, aa), "aa");
    /* where: cond [2,1], a [3], b scalar */
    tj_tensor *c = mk(TJ_BOOL, 2, D(2, 1), B8(1, 0));
    tj_tensor *a = mk(TJ_I32, 1, D(3), I32(1, 2, 3));
    tj_tensor *b = mk(TJ_I32, 0, NULL, I32(-1));
    tj_tensor *in[3] = {c, a, b};
    tj_status stt;
    tj_tensor *w = run_n(proto(IR_OP_WHERE), in, 3, &stt);
    CHECK_SHAPE(w, 2, 2, 3);
    CHECK_IVALS(w, 1, 2, 3, -1, -1, -1);
    tj_tensor *c3 = mk(TJ_BOOL, 1, D(3), B8(1, 0, 1));
    tj_tensor *sin_[3] = {c3, t, v};
    w = run_n(proto(IR_OP_WHERE), sin_, 3, &stt);
    CHECK_SVALS(w, "x", "a", "yz");
    /* where on floats: the Collatz step of S7 */
    tj_tensor *x = mk(TJ_I32, 1, D(2), I32(1, 2));
    tj_tensor *two = mk(TJ_I32, 0, NULL, I32(2)), *three = mk(TJ_I32, 0, NULL, I32(3));
    tj_tensor *onei = mk(TJ_I32, 0, NULL, I32(1)), *zero = mk(TJ_I32, 0, NULL, I32(0));
    tj_tensor *even = bin(IR_OP_EQ, bin(IR_OP_MOD, x, two), zero);
    tj_tensor *odd = bin(IR_OP_ADD, bin(IR_OP_MUL, x, three), onei);
    tj_tensor *cin[3] = {even, bin(IR_OP_DIV, x, two), odd};
    CHECK_IVALS(run_n(proto(IR_OP_WHERE), cin, 3, &stt), 4, 1);
}

static tj_tensor *reduce(int op, tj_tensor *x, int n_axes, const int64_t *axes, int keep) {
    ir_node p = proto(op);
    p.a.n_list = (uint32_t)n_axes;
    for (int k = 0; k < n_axes; k++)
        p.a.list[k] = axes[k];
    p.a.i[0] = keep;
    return run1(p, x);
}

static void test_reduce(void) {
    tj_tensor *x = mk(TJ_F32, 2, D(2, 3), F32(1, 2, 3, 4, 5, 6));
    tj_tensor *r = reduce(IR_OP_SUM, x, 1, D(0), 0);
    CHECK_SHAPE(r, 1, 3);
    CHECK_VALS(r, 0, 5, 7, 9);
    r = reduce(IR_OP_SUM, x, 1, D(-1), 1);
    CHECK_SHAPE(r, 2, 2, 1);
    CHECK_VALS(r, 0, 6, 15);
    r = reduce(IR_OP_SUM, x, 0, NULL, 0);
    CHECK_SHAPE(r, 0, 0);
    CHECK_VALS(r, 0, 21);
    CHECK_VALS(reduce(IR_OP_MEAN, x, 1, D(1), 0), 1e-7, 2, 5);
    CHECK_VALS(reduce(IR_OP_MAX, x, 1, D(0), 0), 0, 4, 5, 6);
    CHECK_VALS(reduce(IR_OP_MIN, x, 1, D(1), 0), 0, 1, 4);
    CHECK_VALS(reduce(IR_OP_PROD, x, 2, D(0, 1), 1), 0, 720);
    /* 3-D over the middle and outer axes */
    double v[24];
    for (int i = 0; i < 24; i++)
        v[i] = i;
    tj_tensor *c = mk(TJ_F64, 3, D(2, 3, 4), v);
    r = reduce(IR_OP_SUM, c, 1, D(1), 0);
    CHECK_SHAPE(r, 2, 2, 4);
    CHECK_VALS(r, 0, 12, 15, 18, 21, 48, 51, 54, 57);
    r = reduce(IR_OP_SUM, c, 2, D(0, 2), 1);
    CHECK_SHAPE(r, 3, 1, 3, 1);
    CHECK_VALS(r, 0, 60, 92, 124);
    /* f32 sums accumulate in double: 1e8 + 1 * 16 stays exact before rounding */
    float acc[17] = {1e8f};
    for (int i = 1; i < 17; i++)
        acc[i] = 1.0f;
    CHECK_VALS(reduce(IR_OP_SUM, mk(TJ_F32, 1, D(17), acc), 0, NULL, 0), 0, 100000016.0);
    /* NaN propagates through max/min */
    tj_tensor *n = mk(TJ_F32, 1, D(3), F32(1, NAN, 3));
    CHECK_VALS(reduce(IR_OP_MAX, n, 0, NULL, 0), 0, NAN);
    CHECK_VALS(reduce(IR_OP_MIN, n, 0, NULL, 0), 0, NAN);
    /* ints: wrapping sums, truncating mean */
    tj_tensor *i = mk(TJ_I32, 1, D(3), I32(INT32_MAX, 1, 0));
    CHECK_IVALS(reduce(IR_OP_SUM, i, 0, NULL, 0), INT32_MIN);
    tj_tensor *j = mk(TJ_I32, 2, D(2, 2), I32(3, 4, -3, -4));
    CHECK_IVALS(reduce(IR_OP_MEAN, j, 1, D(1), 0), 3, -3);
    CHECK_IVALS(reduce(IR_OP_PROD, j, 1, D(0), 0), -9, -16);
    CHECK_IVALS(reduce(IR_OP_MAX, j, 1, D(1), 0), 4, -3);
    tj_tensor *k = mk(TJ_I64, 1, D(3), I64(INT64_MIN, -1, 5));
    CHECK_IVALS(reduce(IR_OP_MIN, k, 0, NULL, 0), INT64_MIN);
    CHECK_IVALS(reduce(IR_OP_MAX, k, 0, NULL, 0), 5);
    /* empty reductions */
    tj_tensor *e = mk(TJ_F32, 2, D(0, 3), NULL);
    CHECK_VALS(reduce(IR_OP_SUM, e, 1, D(0), 0), 0, 0, 0, 0);
    CHECK_VALS(reduce(IR_OP_PROD, e, 1, D(0), 0), 0, 1, 1, 1);
    CHECK_VALS(reduce(IR_OP_MEAN, e, 1, D(0), 0), 0, NAN, NAN, NAN);
    r = reduce(IR_OP_MAX, e, 1, D(1), 0); /* empty output: nothing to reduce, no error */
    CHECK(r && r->numel == 0);
    CHECK_FAILS(reduce(IR_OP_MAX, e, 1, D(0), 0), TJ_ERR_RUNTIME,
                "max: empty reduction over axis 0 of [0,3]");
    CHECK_FAILS(reduce(IR_OP_MIN, e, 0, NULL, 0), TJ_ERR_RUNTIME, "min: empty reduction");
    tj_tensor *ei = mk(TJ_I64, 1, D(0), NULL);
    CHECK_IVALS(reduce(IR_OP_SUM, ei, 0, NULL, 0), 0);
    CHECK_IVALS(reduce(IR_OP_PROD, ei, 0, NULL, 0), 1);
    CHECK_FAILS(reduce(IR_OP_MEAN, ei, 0, NULL, 0), TJ_ERR_RUNTIME, "mean: empty reduction");
    /* rank-0 input: reduces nothing */
    CHECK_VALS(reduce(IR_OP_SUM, mk(TJ_F64, 0, NULL, F64(2.5)), 0, NULL, 0), 0, 2.5);
}

static tj_tensor *argop(int op, tj_tensor *x, int64_t axis) {
    ir_node p = proto(op);
    p.a.i[0] = axis;
    return run1(p, x);
}

static void test_arg_softmax(void) {
    tj_tensor *x = mk(TJ_F32, 2, D(2, 3), F32(1, 5, 5, 7, 0, 7));
    tj_tensor *r = argop(IR_OP_ARGMAX, x, 1);
    CHECK(r && r->dtype == TJ_I64);
    CHECK_SHAPE(r, 1, 2);
    CHECK_IVALS(r, 1, 0);
    CHECK_IVALS(argop(IR_OP_ARGMIN, x, 1), 0, 1);
    CHECK_IVALS(argop(IR_OP_ARGMAX, x, 0), 1, 0, 1);
    CHECK_IVALS(argop(IR_OP_ARGMIN, x, -2), 0, 1, 0);
    tj_tensor *n = mk(TJ_F64, 1, D(4), F64(1, NAN, 9, NAN));
    CHECK_IVALS(argop(IR_OP_ARGMAX, n, 0), 1);
    CHECK_IVALS(argop(IR_OP_ARGMIN, n, 0), 1);
    tj_tensor *i = mk(TJ_I32, 1, D(4), I32(3, -2, 8, -2));
    CHECK_IVALS(argop(IR_OP_ARGMIN, i, 0), 1);
    CHECK_IVALS(argop(IR_OP_ARGMAX, i, 0), 2);
    tj_tensor *l = mk(TJ_I64, 2, D(2, 2), I64(INT64_MIN, INT64_MAX, 0, -1));
    CHECK_IVALS(argop(IR_OP_ARGMAX, l, 1), 1, 0);
    CHECK_FAILS(argop(IR_OP_ARGMAX, mk(TJ_F32, 2, D(2, 0), NULL), 1), TJ_ERR_RUNTIME,
                "argmax: empty reduction over axis 1");
    r = argop(IR_OP_ARGMAX, mk(TJ_F32, 2, D(0, 2), NULL), 1);
    CHECK(r && r->numel == 0);

    /* softmax / log_softmax against the formula, incl. large values (max subtraction) */
    tj_tensor *s = mk(TJ_F32, 2, D(2, 3), F32(1, 2, 3, 1000, 1001, 1002));
    tj_tensor *sm = argop(IR_OP_SOFTMAX, s, 1), *ls = argop(IR_OP_LOG_SOFTMAX, s, 1);
    double z = exp(-2.0) + exp(-1.0) + 1;
    CHECK_VALS(sm, 1e-6, exp(-2.0) / z, exp(-1.0) / z, 1 / z, exp(-2.0) / z, exp(-1.0) / z, 1 / z);
    CHECK_VALS(ls, 1e-6, -2 - log(z), -1 - log(z), -log(z), -2 - log(z), -1 - log(z), -log(z));
    tj_tensor *s0 = mk(TJ_F64, 2, D(2, 2), F64(0, 0, 1, 3));
    double z0 = 1 + exp(1.0);
    CHECK_VALS(argop(IR_OP_SOFTMAX, s0, 0), 1e-12, 1 / z0, 1 / (1 + exp(3.0)), exp(1.0) / z0,
               exp(3.0) / (1 + exp(3.0)));
    r = argop(IR_OP_SOFTMAX, mk(TJ_F32, 2, D(3, 0), NULL), 1);
    CHECK(r && r->numel == 0);
}

int main(void) {
    test_unary_float();
    test_unary_int_bool();
    test_cast();
    test_binary_float();
    test_binary_int();
    test_binary_bool_string_where();
    test_reduce();
    test_arg_softmax();
    pool_free();
    return check_done();
}
