/* test_cpu_ops.c — every elementwise op the CPU codegen fuses, for every dtype it accepts, on
 * random inputs (floats with NaN, +-inf, -0 and halves mixed in) of sizes that are not multiples
 * of the vector width, empty tensors, scalars and NumPy broadcasting, compiled and compared with
 * the interpreter (reference kernels). Tolerance 0: results must be bit-identical (NaN == NaN),
 * except exp, log, tanh and sigmoid, which are approximations (jit/cpu/llvm/approx.c, tested on
 * their own in test_cpu_approx.c): within 4e-7 (f32) / 1e-15 (f64) relative (absolute below 1),
 * with NaN and infinities where the reference has them. */
#include "check.h"
#include "test_cpu_util.h"

typedef struct shp {
    int ra;
    int64_t a[3];
    int rb;
    int64_t b[3];
} shp;

static const shp shapes[] = {
    {1, {0}, 1, {0}},       {1, {1}, 1, {1}},     {1, {5}, 1, {5}},    {1, {17}, 1, {17}},
    {1, {1023}, 1, {1023}}, {2, {4, 33}, 0, {0}}, {0, {0}, 2, {3, 7}}, {3, {3, 1, 5}, 2, {4, 1}},
    {2, {7, 1}, 2, {1, 9}}, {1, {1}, 1, {6}},     {2, {2, 0}, 1, {1}}, {3, {2, 3, 4}, 3, {2, 3, 4}},
};
#define N_SHAPES (int)(sizeof shapes / sizeof shapes[0])

static int n_fused_graphs, n_cases;

/* Builds one graph holding the op once per shape (each on its own params), runs both ways. */
static void run_case(int op, int dt, int dt_out, const char *what) {
    ir_graph *g = ir_graph_new(what);
    int n_in = op == IR_OP_WHERE ? 3 : op == IR_OP_CAST ? 1 : ir_ops[op].n_in;
    int np = 0;
    int ranks[3 * N_SHAPES];
    int64_t dims[3 * N_SHAPES][3];
    int dts[3 * N_SHAPES];
    for (int s = 0; s < N_SHAPES; s++) {
        const shp *sh = &shapes[s];
        uint32_t in[3] = {IR_NONE, IR_NONE, IR_NONE};
        for (int k = 0; k < n_in; k++) {
            /* unary: shape a; binary: a, b; where: cond b-shaped, a, b */
            int use_b = n_in == 1 ? 0 : n_in == 2 ? k == 1 : k != 1;
            int r = use_b ? sh->rb : sh->ra;
            const int64_t *d = use_b ? sh->b : sh->a;
            int kdt = op == IR_OP_WHERE && k == 0 ? TJ_BOOL : dt;
            ranks[np] = r;
            memcpy(dims[np], d, sizeof dims[np]);
            dts[np] = kdt;
            in[k] = tu_param(g, np++, kdt, r, d);
        }
        uint32_t y;
        if (op == IR_OP_CAST)
            y = tu_cast(g, in[0], dt_out);
        else
            y = tu_op(g, op, in[0], n_in > 1 ? in[1] : IR_NONE, n_in > 2 ? in[2] : IR_NONE);
        if (y == IR_NONE) { /* the op does not take this dtype */
            ir_graph_free(g);
            return;
        }
        ir_add_output(g, y);
        if (!jit_cpu_ew_supported(g, y)) {
            ir_graph_free(g);
            return;
        }
    }
    n_cases++;
    rt_program *p = jit_cpu_compile_opts(g, &(jit_cpu_opts){.no_contract = true});
    CHECK_MSG(p != NULL, "%s: %s", what, ir_last_error());
    rt_program *ref = rt_interp_new(g);
    if (!p || !ref)
        goto out;
    const pass_partition *part = jit_cpu_program_partition(p);
    int fused = 0;
    for (uint32_t k = 0; k < part->n_groups; k++)
        fused += part->groups[k].fused;
    CHECK_MSG(fused == N_SHAPES, "%s: %d fused groups", what, fused);
    n_fused_graphs++;
    for (int rep = 0; rep < 2; rep++) {
        tj_tensor *args[3 * N_SHAPES];
        for (int k = 0; k < np; k++)
            args[k] = tu_random(dts[k], ranks[k], dims[k], 1);
        tj_tensor *a[N_SHAPES] = {0}, *b[N_SHAPES] = {0};
        CHECK_MSG(tu_run(p, args, (uint32_t)np, a) == TJ_OK, "%s: %s", what, ir_last_error());
        CHECK_MSG(tu_run(ref, args, (uint32_t)np, b) == TJ_OK, "%s: %s", what, ir_last_error());
        bool approx = op == IR_OP_EXP || op == IR_OP_LOG || op == IR_OP_TANH || op == IR_OP_SIGMOID;
        double tol = !approx ? 0 : dt == TJ_F32 ? 4e-7 : 1e-15;
        for (int s = 0; s < N_SHAPES; s++) {
            int64_t first = -1, bad = tu_diff(a[s], b[s], tol, &first);
            CHECK_MSG(bad == 0, "%s shape #%d: %lld differ, first %lld: %.17g vs %.17g", what, s,
                      (long long)bad, (long long)first, first >= 0 ? tu_get(a[s], first) : 0.0,
                      first >= 0 ? tu_get(b[s], first) : 0.0);
            tj_release(a[s]);
            tj_release(b[s]);
        }
        for (int k = 0; k < np; k++)
            tj_release(args[k]);
    }
out:
    if (p)
        p->vt->free(p);
    if (ref)
        ref->vt->free(ref);
    ir_graph_free(g);
}

int main(void) {
    setenv("TJ_CACHE", "0", 1); /* no kernel cached in the other math mode */
    if (!jit_cpu_available()) {
        printf("skip: %s\n", ir_last_error());
        return 77;
    }
    static const int ops[] = {
        IR_OP_NEG,     IR_OP_ABS,         IR_OP_SIGN,       IR_OP_RELU,  IR_OP_FLOOR, IR_OP_CEIL,
        IR_OP_ROUND,   IR_OP_SQRT,        IR_OP_RSQRT,      IR_OP_EXP,   IR_OP_LOG,   IR_OP_TANH,
        IR_OP_SIGMOID, IR_OP_SIN,         IR_OP_COS,        IR_OP_ATAN,  IR_OP_ASIN,  IR_OP_ACOS,
        IR_OP_ERF,     IR_OP_LOGICAL_NOT, IR_OP_ISNAN,      IR_OP_ISINF, IR_OP_ADD,   IR_OP_SUB,
        IR_OP_MUL,     IR_OP_DIV,         IR_OP_FLOORDIV,   IR_OP_MOD,   IR_OP_POW,   IR_OP_MAXIMUM,
        IR_OP_MINIMUM, IR_OP_EQ,          IR_OP_NE,         IR_OP_LT,    IR_OP_LE,    IR_OP_GT,
        IR_OP_GE,      IR_OP_LOGICAL_AND, IR_OP_LOGICAL_OR, IR_OP_WHERE};
    char what[96];
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        for (int dt = 0; dt <= TJ_BOOL; dt++) {
            snprintf(what, sizeof what, "%s %s", ir_ops[ops[i]].name, ir_dtype_short(dt));
            run_case(ops[i], dt, dt, what);
        }
    }
    for (int from = 0; from <= TJ_BOOL; from++) {
        for (int to = 0; to <= TJ_BOOL; to++) {
            snprintf(what, sizeof what, "cast %s->%s", ir_dtype_short(from), ir_dtype_short(to));
            run_case(IR_OP_CAST, from, to, what);
        }
    }
    printf("%d op/dtype cases, %d compiled and compared\n", n_cases, n_fused_graphs);
    /* every float op above, plus all 25 casts, must have been compiled */
    CHECK(n_fused_graphs >= 100);
    return check_done();
}
