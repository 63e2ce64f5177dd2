/* test_cpu_red.c — generated reductions (with their elementwise producers absorbed: one reduce
 * group, no intermediate buffer) and row softmax / log-softmax of the CPU backend against the
 * reference kernels (the interpreter) on fresh random inputs: SUM MEAN MAX MIN PROD of f32 f64
 * i32 i64 over the last axis, a suffix of axes with size-1 dims, all axes, leading and middle
 * axes (blocks of kept elements), axes on both sides of a kept one (reference fallback), empty
 * inputs; softmax rows with large values, -inf, rows of -inf, NaN.
 * Tolerances (|a-b| <= tol * max(1, |ref|)): integers exact; with no_contract (sequential double
 * accumulation) and exact_math (softmax in double with libm) exact; by default reductions f32
 * 1e-6 (double partial sums, rounded once), f64 1e-12 (reassociated partial sums), softmax f32
 * 2e-6 and f64 1e-13 (approx.c's exp: 1 ULP; sums in the input type). */
#include "check.h"
#include "runtime/rt_pool.h"
#include "test_cpu_util.h"

static uint32_t reduce(ir_graph *g, int op, uint32_t x, const int64_t *axes, int n_axes) {
    ir_node p = {0};
    p.op = (uint16_t)op;
    for (int k = 0; k < n_axes; k++)
        p.a.list[k] = axes[k];
    p.a.n_list = (uint32_t)n_axes;
    return ir_add(g, &p, &x, 1);
}

static uint32_t softmax(ir_graph *g, int op, uint32_t x, int axis) {
    ir_node p = {0};
    p.op = (uint16_t)op;
    p.a.i[0] = axis;
    return ir_add(g, &p, &x, 1);
}

static int n_absorbing; /* reduce groups with producers in the last compared program */

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
    const pass_partition *part = jit_cpu_program_partition(p);
    n_absorbing = 0;
    for (uint32_t k = 0; part && k < part->n_groups; k++)
        n_absorbing += part->groups[k].reduce && part->groups[k].n_nodes > 1;
    p->vt->free(p);
    ref->vt->free(ref);
}

typedef struct shape_case {
    int rank;
    int64_t dims[3];
    int n_axes;
    int64_t axes[3];
} shape_case;

/* All five reductions in one graph, each of an absorbed producer and of a parameter. Float
 * producers are exp(x * c) - y (prod: (x - y) / 4, exact up to its rounding, as neither an
 * approximated exp nor an FMA contraction compounds through a product), integer ones x * y + c. */
static void check_reductions(int dt) {
    static const shape_case cases[] = {
        {2, {17, 65}, 1, {1}},
        {2, {3, 130}, 2, {0, 1}},
        {3, {3, 1, 63}, 2, {1, 2}},
        {3, {4, 5, 6}, 1, {0}},
        {2, {0, 5}, 1, {1}},
        {2, {5, 0}, 1, {1}},
        {2, {300, 257}, 1, {1}},
        /* kept axes after the reduced ones: a leading axis (bias gradients), a middle one over
         * more kept elements than one block (256), two adjacent middle axes, an empty one */
        {2, {300, 40}, 1, {0}},
        {3, {4, 5, 600}, 1, {1}},
        {3, {2, 0, 7}, 1, {1}},
        {3, {6, 7, 33}, 2, {0, 1}},
        /* reduced axes on both sides of a kept one: the reference kernel inside the plan */
        {3, {4, 5, 6}, 2, {0, 2}},
    };
    enum { FALLBACK = 11 };
    static const int ops[] = {IR_OP_SUM, IR_OP_MEAN, IR_OP_MAX, IR_OP_MIN, IR_OP_PROD};
    bool fl = ir_dtype_is_float(dt);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const shape_case *sc = &cases[c];
        bool empty = ir_numel(sc->rank, sc->dims) == 0;
        ir_graph *g = ir_graph_new("red");
        uint32_t x = tu_param(g, 0, dt, sc->rank, sc->dims);
        uint32_t y = tu_param(g, 1, dt, sc->rank, sc->dims);
        for (int o = 0; o < 5; o++) {
            bool no_identity =
                ops[o] == IR_OP_MAX || ops[o] == IR_OP_MIN || (ops[o] == IR_OP_MEAN && !fl);
            if (empty && no_identity)
                continue; /* an error, checked in test_cpu_ops */
            /* a producer per reduction (a shared one would be computed once, not absorbed) */
            uint32_t q =
                fl ? tu_bin(g, IR_OP_MUL, x, tu_const_f64(g, dt, 0.25 + 0.01 * o)) : IR_NONE;
            uint32_t v =
                !fl ? tu_bin(g, IR_OP_ADD, tu_bin(g, IR_OP_MUL, x, y), tu_const_f64(g, dt, 3 + o))
                : ops[o] == IR_OP_PROD
                    ? tu_bin(g, IR_OP_MUL, tu_bin(g, IR_OP_SUB, x, y), tu_const_f64(g, dt, 0.25))
                    : tu_bin(g, IR_OP_SUB, tu_un(g, IR_OP_EXP, q), y);
            ir_add_output(g, reduce(g, ops[o], v, sc->axes, sc->n_axes));
            ir_add_output(g, reduce(g, ops[o], y, sc->axes, sc->n_axes));
        }
        tj_tensor *args[2] = {tu_random(dt, sc->rank, sc->dims, 0),
                              tu_random(dt, sc->rank, sc->dims, 0)};
        char what[96];
        snprintf(what, sizeof what, "reductions %s case %zu", ir_dtype_short(dt), c);
        /* the fallback case runs the reference reduction after an elementwise group */
        double tol = !fl ? 0 : dt == TJ_F32 ? 1e-6 : 1e-12;
        jit_cpu_opts strict = {.no_contract = true, .exact_math = true};
        compare(g, args, 2, &strict, c == FALLBACK ? tol : 0, what);
        int64_t red_len = 1; /* elements per output: the error can grow with it */
        for (int k = 0; k < sc->n_axes; k++)
            red_len *= sc->dims[sc->axes[k]];
        if (red_len < sc->dims[sc->rank - 1])
            red_len = sc->dims[sc->rank - 1];
        compare(g, args, 2, NULL, tol * (double)(red_len + 1), what);
        if (c == 0 || c == 3 || c == 7 || c == 8 || c == 10)
            CHECK_MSG(n_absorbing == 5, "%s: %d of 5 reductions absorbed their producers", what,
                      n_absorbing);
        if (c == FALLBACK)
            CHECK_MSG(n_absorbing == 0, "%s: %d reductions generated, none expected", what,
                      n_absorbing);
        tj_release(args[0]);
        tj_release(args[1]);
        ir_graph_free(g);
    }
}

static void check_softmax(int dt, int64_t rows, int64_t len, int axis) {
    int64_t d[2] = {rows, len};
    ir_graph *g = ir_graph_new("softmax");
    uint32_t x = tu_param(g, 0, dt, 2, d);
    ir_add_output(g, softmax(g, IR_OP_SOFTMAX, x, axis));
    ir_add_output(g, softmax(g, IR_OP_LOG_SOFTMAX, x, axis));
    tj_tensor *in = tu_random(dt, 2, d, 1);
    for (int64_t i = 0; i < in->numel; i++) {
        double v = tu_get(in, i) * 100; /* large values: the max subtraction matters */
        int64_t r = len ? i / len : 0;
        if (r == 1)
            v = -1.0 / 0.0; /* a row of -inf: NaN, as the reference */
        if (dt == TJ_F32)
            ((float *)in->data)[i] = (float)v;
        else
            ((double *)in->data)[i] = v;
    }
    char what[96];
    snprintf(what, sizeof what, "softmax %s [%lld,%lld] axis %d", ir_dtype_short(dt),
             (long long)rows, (long long)len, axis);
    jit_cpu_opts exact = {.no_contract = true, .exact_math = true};
    compare(g, &in, 1, &exact, 0, what);
    compare(g, &in, 1, NULL, dt == TJ_F32 ? 2e-6 : 1e-13, what);
    tj_release(in);
    ir_graph_free(g);
}

/* The pipelined kernel (rows of 64 bytes or more) writing into caller tensors (tj_call_into's
 * path): a 64-byte aligned output (non-temporal stores) and one an element off (plain stores),
 * from an input an element off as well (unaligned vector loads); every value against the
 * interpreter's. */
static void check_softmax_into(int dt, int64_t rows, int64_t len) {
    int64_t d[2] = {rows, len}, n = rows * len;
    size_t es = dt == TJ_F32 ? 4 : 8;
    ir_graph *g = ir_graph_new("softmax_into");
    uint32_t x = tu_param(g, 0, dt, 2, d);
    ir_add_output(g, softmax(g, IR_OP_SOFTMAX, x, 1));
    ir_add_output(g, softmax(g, IR_OP_LOG_SOFTMAX, x, 1));
    tj_tensor *src = tu_random(dt, 2, d, 0);
    size_t blk = ((size_t)n * es + 64 + 63) / 64 * 64; /* a 64-byte multiple with room for es */
    char *raw = aligned_alloc(64, 5 * blk);
    CHECK(raw != NULL);
    if (!raw) {
        tj_release(src);
        ir_graph_free(g);
        return;
    }
    char *xin = raw + es, *y0 = raw + blk, *y1 = y0 + blk, *y2 = y1 + blk + es, *y3 = y2 + blk;
    memcpy(xin, src->data, (size_t)n * es);
    tj_tensor *in = tj_tensor_borrow(dt, 2, d, xin, NULL, NULL);
    rt_program *p = jit_cpu_compile_opts(g, NULL), *ref = rt_interp_new(g);
    CHECK_MSG(p && ref, "softmax into: %s", ir_last_error());
    for (int aligned = 0; p && ref && aligned < 2; aligned++) {
        char *ys = aligned ? y0 : y2, *yl = aligned ? y1 : y3;
        tj_tensor *outs[2] = {tj_tensor_borrow(dt, 2, d, ys, NULL, NULL),
                              tj_tensor_borrow(dt, 2, d, yl, NULL, NULL)};
        tj_tensor *want[2] = {NULL, NULL};
        CHECK(p->vt->run(p, &in, 1, NULL, outs) == TJ_OK);
        CHECK(tu_run(ref, &in, 1, want) == TJ_OK);
        for (int k = 0; k < 2; k++) {
            int64_t first = -1,
                    bad = tu_diff(outs[k], want[k], dt == TJ_F32 ? 2e-6 : 1e-13, &first);
            CHECK_MSG(bad == 0, "softmax into %s [%lld,%lld] %s output %d: %lld differ, first %lld",
                      ir_dtype_short(dt), (long long)rows, (long long)len,
                      aligned ? "aligned" : "unaligned", k, (long long)bad, (long long)first);
            tj_release(outs[k]);
            tj_release(want[k]);
        }
    }
    if (p)
        p->vt->free(p);
    if (ref)
        ref->vt->free(ref);
    tj_release(in);
    tj_release(src);
    free(raw);
    ir_graph_free(g);
}

int main(void) {
    if (!jit_cpu_available()) {
        printf("skip: %s\n", ir_last_error());
        return 77;
    }
    static const int dts[] = {TJ_F32, TJ_F64, TJ_I32, TJ_I64};
    for (int d = 0; d < 4; d++)
        check_reductions(dts[d]);
    for (int d = 0; d < 2; d++) {
        check_softmax(dts[d], 17, 65, 1);
        check_softmax(dts[d], 3, 1, 1);
        check_softmax(dts[d], 0, 7, 1);
        check_softmax(dts[d], 300, 300, 1); /* split across threads */
        check_softmax(dts[d], 5, 9, 0);     /* reference fallback */
        /* the pipelined kernel: one vector, one row, 64-byte rows split across threads, the
         * largest row it takes and the first it leaves to the three-pass kernel */
        int64_t w = dts[d] == TJ_F32 ? 16 : 8, most = 64 * 1024 / (2 * (dts[d] == TJ_F32 ? 4 : 8));
        check_softmax(dts[d], 9, w, 1);
        check_softmax(dts[d], 1, 4 * w, 1);
        check_softmax(dts[d], 2, 3 * w + 1, 1);
        check_softmax(dts[d], 301, 256, 1);
        check_softmax(dts[d], 3, most, 1);
        check_softmax(dts[d], 3, most + 1, 1);
        /* rows shorter than a vector: one masked vector each (the MLP's [256, 10]) */
        check_softmax(dts[d], 256, 10, 1);
        check_softmax(dts[d], 7, 2, 1);
        check_softmax(dts[d], 5, w - 1, 1);
        check_softmax_into(dts[d], 1, w);
        check_softmax_into(dts[d], 257, 128);
        check_softmax_into(dts[d], 64, 7 * w + 3);
    }
    rt_pool_shutdown();
    return check_done();
}
