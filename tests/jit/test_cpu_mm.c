/* test_cpu_mm.c — generated and OpenBLAS matrix products of the CPU backend against the reference
 * kernels (the interpreter) on fresh random inputs: every numeric dtype, odd sizes (1, 3, 17, 63,
 * 64, 65, 130), empty operands, broadcast batch dims, rank-1 operands, a transpose in front,
 * the power(x, 100) chain (one kernel), small matmuls with elementwise ops between them, dense +
 * bias + relu with its epilogue fused after the gemm, and everything again with TJ_NO_BLAS=1.
 * Tolerances (|a-b| <= tol * max(1, |ref|)): integers exact; generated small f32/f64 products
 * with no_contract exact (the reference's order; f32 in double); by default f32 2e-6 * k (float
 * accumulation with FMA), f64 1e-14 * k; OpenBLAS products f32 4e-6 * k, f64 1e-14 * k. */
#include "check.h"
#include "runtime/rt_pool.h"
#include "test_cpu_util.h"

static uint32_t mm(ir_graph *g, uint32_t a, uint32_t b) {
    return tu_bin(g, IR_OP_MATMUL, a, b);
}

/* Runs g with the jit (opts) and the interpreter on args and compares every output. */
static void compare(ir_graph *g, tj_tensor **args, uint32_t n, const jit_cpu_opts *o, double tol,
                    const char *what) {
    rt_program *p = jit_cpu_compile_opts(g, o);
    rt_program *ref = rt_interp_new(g);
    CHECK_MSG(p && ref, "%s: %s", what, ir_last_error());
    if (!p || !ref) {
        if (p)
            p->vt->free(p);
        if (ref)
            ref->vt->free(ref);
        return;
    }
    tu_compare_programs(p, ref, args, n, tol, what);
    p->vt->free(p);
    ref->vt->free(ref);
}

static double tol_for(int dt, int64_t k, bool strict, bool blas) {
    if (ir_dtype_is_int(dt))
        return 0;
    double kk = (double)(k > 0 ? k : 1);
    if (dt == TJ_F64)
        return strict && !blas ? 0 : 1e-14 * kk;
    return blas ? 4e-6 * kk : strict ? 0 : 2e-6 * kk;
}

/* [m,k] x [k,n] of dt, strict and default. */
static void check_plain(int dt, int64_t m, int64_t k, int64_t n) {
    int64_t da[2] = {m, k}, db[2] = {k, n};
    ir_graph *g = ir_graph_new("mm");
    ir_add_output(g, mm(g, tu_param(g, 0, dt, 2, da), tu_param(g, 1, dt, 2, db)));
    tj_tensor *args[2] = {tu_random(dt, 2, da, 0), tu_random(dt, 2, db, 0)};
    bool blas = ir_dtype_is_float(dt) && (m > 64 || k > 64 || n > 64);
    char what[96];
    for (int strict = 0; strict < 2; strict++) {
        snprintf(what, sizeof what, "%s [%lld,%lld]x[%lld,%lld]%s", ir_dtype_short(dt),
                 (long long)m, (long long)k, (long long)k, (long long)n, strict ? " strict" : "");
        jit_cpu_opts o = {.no_contract = strict};
        compare(g, args, 2, &o, tol_for(dt, k, strict, blas), what);
    }
    tj_release(args[0]);
    tj_release(args[1]);
    ir_graph_free(g);
}

static void check_batched(int dt) {
    static const int64_t cases[][2][4] = {
        {{2, 1, 3, 5}, {4, 5, 7, 0}}, /* a [2,1,3,5] x b [4,5,7] */
        {{5, 0, 0, 0}, {3, 5, 4, 0}}, /* a [5] x b [3,5,4] */
        {{2, 3, 5, 0}, {5, 0, 0, 0}}, /* a [2,3,5] x b [5] */
        {{3, 70, 66, 0}, {66, 67, 0, 0}},
    };
    static const int ranks[][2] = {{4, 3}, {1, 3}, {3, 1}, {3, 2}};
    for (int c = 0; c < 4; c++) {
        ir_graph *g = ir_graph_new("bmm");
        uint32_t a = tu_param(g, 0, dt, ranks[c][0], cases[c][0]);
        uint32_t b = tu_param(g, 1, dt, ranks[c][1], cases[c][1]);
        ir_add_output(g, mm(g, a, b));
        tj_tensor *args[2] = {tu_random(dt, ranks[c][0], cases[c][0], 0),
                              tu_random(dt, ranks[c][1], cases[c][1], 0)};
        char what[64];
        snprintf(what, sizeof what, "%s batched case %d", ir_dtype_short(dt), c);
        compare(g, args, 2, NULL, tol_for(dt, 70, false, c == 3), what);
        tj_release(args[0]);
        tj_release(args[1]);
        ir_graph_free(g);
    }
}

/* r = eye(10); 100 times r = x @ r: one chain kernel, exact. */
static void check_power(int dt) {
    int64_t d[2] = {10, 10};
    ir_graph *g = ir_graph_new("power");
    uint32_t x = tu_param(g, 0, dt, 2, d);
    ir_node e = {0};
    e.op = IR_OP_EYE;
    e.dtype = (uint8_t)dt;
    e.rank = 2;
    e.dims[0] = e.dims[1] = 10;
    uint32_t r = ir_add(g, &e, NULL, 0);
    for (int i = 0; i < 100; i++)
        r = mm(g, x, r);
    ir_add_output(g, r);
    tj_tensor *args[1] = {tu_random(dt, 2, d, 0)};
    jit_cpu_opts o = {.no_contract = true};
    compare(g, args, 1, &o, 0, "power(x, 100)");
    rt_program *p = jit_cpu_compile_opts(g, &o);
    CHECK(p != NULL);
    CHECK_EQ_INT(jit_cpu_last_stats().n_kernels, 1); /* the whole chain is one function */
    if (p)
        p->vt->free(p);
    tj_release(args[0]);
    ir_graph_free(g);
}

/* small matmuls with elementwise ops between them, one output mid-chain */
static void check_mixed_chain(int dt) {
    int64_t d[2] = {17, 17}, dv[1] = {17};
    ir_graph *g = ir_graph_new("mixed");
    uint32_t x = tu_param(g, 0, dt, 2, d), v = tu_param(g, 1, dt, 1, dv);
    uint32_t r = x;
    for (int i = 0; i < 6; i++) {
        r = mm(g, r, x);
        r = tu_un(g, IR_OP_RELU, tu_bin(g, IR_OP_SUB, r, v));
        if (i == 2)
            ir_add_output(g, r);
        if (ir_dtype_is_float(dt))
            r = tu_bin(g, IR_OP_MUL, r, tu_const_f64(g, dt, 0.01));
    }
    ir_add_output(g, mm(g, r, v));
    tj_tensor *args[2] = {tu_random(dt, 2, d, 0), tu_random(dt, 1, dv, 0)};
    jit_cpu_opts o = {.no_contract = true};
    compare(g, args, 2, &o, 0, "mixed chain");
    tj_release(args[0]);
    tj_release(args[1]);
    ir_graph_free(g);
}

/* relu(x @ w + bias) with bias [n] (row units), [m,1] and [m,n] (flat) */
static void check_dense(int dt, int64_t m, int64_t k, int64_t n, int bias_kind) {
    int64_t dx[2] = {m, k}, dw[2] = {k, n}, db[2] = {m, n};
    int brank = bias_kind == 2 ? 2 : bias_kind == 1 ? 2 : 1;
    if (bias_kind == 0)
        db[0] = n;
    if (bias_kind == 1)
        db[1] = 1;
    ir_graph *g = ir_graph_new("dense");
    uint32_t x = tu_param(g, 0, dt, 2, dx), w = tu_param(g, 1, dt, 2, dw);
    uint32_t b = tu_param(g, 2, dt, brank, db);
    ir_add_output(g, tu_un(g, IR_OP_RELU, tu_bin(g, IR_OP_ADD, mm(g, x, w), b)));
    tj_tensor *args[3] = {tu_random(dt, 2, dx, 0), tu_random(dt, 2, dw, 0),
                          tu_random(dt, brank, db, 1)};
    char what[96];
    snprintf(what, sizeof what, "dense %s %lldx%lldx%lld bias %d", ir_dtype_short(dt), (long long)m,
             (long long)k, (long long)n, bias_kind);
    compare(g, args, 3, NULL, tol_for(dt, k, false, true), what);
    for (int i = 0; i < 3; i++)
        tj_release(args[i]);
    ir_graph_free(g);
}

/* op(A) [m, k] · op(B) [k, n] with op a transpose node in front of A (side 0) or B (side 1): the
 * plan folds it into the product (rt_step.trans); B transposed with few rows of A runs as
 * C' = B · A' on the tiles (rt_gemm_f32_bt), with more rows on OpenBLAS */
static void check_transpose(int side, int64_t m, int64_t k, int64_t n) {
    int64_t da[2] = {side == 0 ? k : m, side == 0 ? m : k},
            db[2] = {side == 1 ? n : k, side == 1 ? k : n};
    ir_graph *g = ir_graph_new("tmm");
    uint32_t in[2] = {tu_param(g, 0, TJ_F32, 2, da), tu_param(g, 1, TJ_F32, 2, db)};
    ir_node t = {0};
    t.op = IR_OP_TRANSPOSE;
    t.a.n_list = 2;
    t.a.list[0] = 1;
    t.a.list[1] = 0;
    in[side] = ir_add(g, &t, &in[side], 1);
    ir_add_output(g, mm(g, in[0], in[1]));
    tj_tensor *args[2] = {tu_random(TJ_F32, 2, da, 0), tu_random(TJ_F32, 2, db, 0)};
    char what[96];
    snprintf(what, sizeof what, "transpose %s then matmul %lldx%lldx%lld", side ? "B" : "A",
             (long long)m, (long long)k, (long long)n);
    compare(g, args, 2, NULL, tol_for(TJ_F32, k, false, false), what);
    tj_release(args[0]);
    tj_release(args[1]);
    ir_graph_free(g);
}

/* no_blas: only what OpenBLAS would have run (large float products), now generated */
static void run_all(bool no_blas) {
    static const int dts[] = {TJ_F32, TJ_F64, TJ_I32, TJ_I64};
    static const int64_t sizes[][3] = {{1, 1, 1},    {3, 17, 5},    {17, 63, 64}, {64, 64, 64},
                                       {65, 3, 130}, {130, 65, 17}, {63, 130, 1}, {1, 130, 65},
                                       {0, 5, 3},    {4, 0, 3},     {4, 5, 0}};
    for (int d = 0; d < (no_blas ? 2 : 4); d++) {
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
            if (!no_blas || sizes[s][0] > 64 || sizes[s][1] > 64 || sizes[s][2] > 64)
                check_plain(dts[d], sizes[s][0], sizes[s][1], sizes[s][2]);
        if (no_blas)
            continue;
        check_batched(dts[d]);
        check_mixed_chain(dts[d]);
    }
    if (!no_blas) {
        check_power(TJ_I32);
        check_power(TJ_I64);
    }
    for (int bk = 0; bk < 3; bk++) {
        check_dense(TJ_F32, 130, 65, 257, bk);
        check_dense(TJ_F64, 67, 70, 33, bk);
    }
    check_dense(TJ_F32, 300, 256, 512, 0); /* several gemm blocks, each with its epilogue */
    if (!no_blas) {
        check_transpose(0, 33, 65, 20);
        check_transpose(1, 50, 300, 130); /* the dense input gradient's shape, smaller */
        check_transpose(1, 300, 65, 70);
    }
}

int main(void) {
    if (!jit_cpu_available()) {
        printf("skip: %s\n", ir_last_error());
        return 77;
    }
    printf("%s\n", rt_blas_info());
    run_all(false);
    setenv("TJ_NO_BLAS", "1", 1); /* as if OpenBLAS were absent: generated products */
    run_all(true);
    unsetenv("TJ_NO_BLAS");
    rt_pool_shutdown();
    return check_done();
}
