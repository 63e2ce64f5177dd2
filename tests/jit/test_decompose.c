/* test_decompose.c — composite ops as primitives (passes/decompose.c); that an op has a
 * decomposition exactly when ops.def marks it composite is test_op_table.c's. What a
 * decomposition builds holds primitives only. Every composite runs both ways on the interpreter,
 * over several dtypes, shapes and axes, on values that stress it (large magnitudes that overflow a
 * naive exp, -inf, NaN), and the values must agree: f32 within 2e-6 relative (plus 1e-6 absolute),
 * f64 within 1e-12, NaN where the op gives NaN. A backend that lowers every composite natively gets
 * the graph back; a cross-entropy still fails on a label outside its classes; one whose class count
 * is unknown cannot be decomposed, and says so. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "jit/jit.h"
#include "passes/passes.h"
#include "runtime/runtime.h"

/* Param `index` of g. */
static const ir_node *param(const ir_graph *g, int64_t index) {
    for (uint32_t i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].op == IR_OP_PARAM && g->nodes[i].a.i[0] == index)
            return &g->nodes[i];
    return NULL;
}

/* Deterministic values for param node x: mostly moderate, some large enough that exp overflows
 * without the max shift, and (when specials) a -inf and a NaN; labels in [0, classes) when
 * classes > 0. */
static tj_tensor *input(const ir_node *x, int seed, bool specials, int64_t classes) {
    int dt = x->dtype;
    tj_tensor *t = rt_tensor_alloc(dt, x->rank, x->dims);
    uint64_t s = 0x9e3779b97f4a7c15ull * (uint64_t)(seed + 1);
    for (int64_t i = 0; i < t->numel; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        double u = (double)(s >> 11) / 9007199254740992.0; /* [0, 1) */
        double v = (u - 0.5) * 8;
        if (i % 7 == 3)
            v *= dt == TJ_F32 ? 25 : 200; /* +-100 (f32), +-800 (f64): exp overflows */
        if (specials && i == 5)
            v = -INFINITY;
        if (specials && i == 11)
            v = NAN;
        if (classes > 0) /* labels */
            v = (double)(s >> 33) / 2147483648.0 * (double)classes;
        if (dt == TJ_F32)
            ((float *)t->data)[i] = (float)v;
        else if (dt == TJ_F64)
            ((double *)t->data)[i] = v;
        else if (dt == TJ_I32)
            ((int32_t *)t->data)[i] = (int32_t)floor(v);
        else
            ((int64_t *)t->data)[i] = (int64_t)floor(v);
    }
    return t;
}

static tj_tensor *run(const ir_graph *g, tj_tensor **args, uint32_t n) {
    rt_program *p = rt_interp_new(g);
    tj_tensor *out[1] = {0};
    tj_status st = p ? p->vt->run(p, args, n, NULL, out) : TJ_ERR_INVALID;
    CHECK_MSG(st == TJ_OK, "run: %s", ir_last_error());
    if (p)
        p->vt->free(p);
    return out[0];
}

/* Runs graph text both ways: as it is and decomposed. Param 0 is the op's value input; a param
 * 1 holds labels over param 0's last axis (the cross-entropy). */
static void both_ways(const char *name, const char *text) {
    ir_graph *g = ir_parse(text);
    CHECK_MSG(g != NULL, "%s: %s", name, ir_last_error());
    if (!g)
        return;
    uint32_t n_done = 0;
    ir_graph *d = pass_decompose(g, NULL, NULL, &n_done);
    CHECK_MSG(d != NULL && d != g && n_done == 1, "%s: %s", name, d ? "" : ir_last_error());
    if (!d || d == g) {
        ir_graph_free(g);
        return;
    }
    for (uint32_t i = 0; i < d->n_nodes; i++) /* primitives only */
        CHECK_MSG(!(ir_ops[d->nodes[i].op].flags & IR_F_COMPOSITE), "%s: %s left", name,
                  ir_ops[d->nodes[i].op].name);
    const ir_node *x = param(g, 0), *labels = param(g, 1);
    int dt = x->dtype;
    for (int specials = 0; specials <= (dt == TJ_F32 || dt == TJ_F64); specials++) {
        tj_tensor *args[2] = {input(x, 1 + specials, specials, 0),
                              labels ? input(labels, 7, false, x->dims[x->rank - 1]) : NULL};
        uint32_t n = labels ? 2 : 1;
        tj_tensor *want = run(g, args, n), *got = run(d, args, n);
        CHECK_MSG(want && got && want->dtype == got->dtype && want->numel == got->numel, "%s",
                  name);
        double tol = dt == TJ_F32 ? 2e-6 : 1e-12, worst = 0;
        for (int64_t i = 0; want && got && i < want->numel; i++) {
            double a = tj_tensor_get_f64(want, i), b = tj_tensor_get_f64(got, i);
            if (isnan(a) || isnan(b)) {
                CHECK_MSG(isnan(a) && isnan(b), "%s[%lld]: %g both ways? %g", name, (long long)i, a,
                          b);
                continue;
            }
            if (isinf(a) || isinf(b)) {
                CHECK_MSG(a == b, "%s[%lld]: %g vs %g", name, (long long)i, a, b);
                continue;
            }
            double err = fabs(a - b) / (fabs(a) + (dt == TJ_F32 ? 0.5 : 1e-3));
            worst = err > worst ? err : worst;
        }
        CHECK_MSG(worst <= tol, "%s%s: decomposed differs by %g (relative)", name,
                  specials ? " (with -inf, NaN)" : "", worst);
        rt_release(want);
        rt_release(got);
        rt_release(args[0]);
        rt_release(args[1]);
    }
    ir_graph_free(d);
    ir_graph_free(g);
}

/* A backend that lowers softmax itself and every other composite as primitives. */
static bool softmax_only(int op) {
    return op == IR_OP_SOFTMAX;
}

static int count_op(const ir_graph *g, int op) {
    int n = 0;
    for (uint32_t i = 0; g && i < g->n_nodes; i++)
        n += g->nodes[i].op == op;
    return n;
}

static bool all_native(int op, void *user) {
    (void)op, (void)user;
    return true;
}

int main(void) {
    ir_graph *g, *d;
    static const struct {
        const char *name, *text; /* the graph's body: params, then %1, its output */
    } cases[] = {
        {"relu f32", "%0 = param {index=0} : f32[7]\n  %1 = relu %0 : f32[7]"},
        {"relu f64", "%0 = param {index=0} : f64[2,3]\n  %1 = relu %0 : f64[2,3]"},
        {"relu i32", "%0 = param {index=0} : i32[5]\n  %1 = relu %0 : i32[5]"},
        {"relu i64", "%0 = param {index=0} : i64[5]\n  %1 = relu %0 : i64[5]"},
        {"sigmoid f32", "%0 = param {index=0} : f32[9]\n  %1 = sigmoid %0 : f32[9]"},
        {"sigmoid f64", "%0 = param {index=0} : f64[3,3]\n  %1 = sigmoid %0 : f64[3,3]"},
        {"softmax f32 axis 1",
         "%0 = param {index=0} : f32[4,5]\n  %1 = softmax %0 {axis=1} : f32[4,5]"},
        {"softmax f32 axis 0",
         "%0 = param {index=0} : f32[4,5]\n  %1 = softmax %0 {axis=0} : f32[4,5]"},
        {"softmax f64 axis 1 of 3",
         "%0 = param {index=0} : f64[2,3,4]\n  %1 = softmax %0 {axis=1} : f64[2,3,4]"},
        {"log_softmax f32 axis 1",
         "%0 = param {index=0} : f32[4,5]\n  %1 = log_softmax %0 {axis=1} : f32[4,5]"},
        {"log_softmax f64 axis 2",
         "%0 = param {index=0} : f64[2,3,4]\n  %1 = log_softmax %0 {axis=2} : f64[2,3,4]"},
        {"sparse_softmax_xent f32", "%0 = param {index=0} : f32[6,5]\n"
                                    "  %2 = param {index=1} : i32[6]\n"
                                    "  %1 = sparse_softmax_xent %0, %2 : f32[6]"},
        {"sparse_softmax_xent f64", "%0 = param {index=0} : f64[2,3,4]\n"
                                    "  %2 = param {index=1} : i64[2,3]\n"
                                    "  %1 = sparse_softmax_xent %0, %2 : f64[2,3]"},
        {"avg_pool2d_grad f32 2x2/2",
         "%0 = param {index=0} : f32[1,2,2,2]\n  %1 = avg_pool2d_grad %0 {stride_h=2, "
         "stride_w=2, window_h=2, window_w=2, pads=[0,0,0,0]} : f32[1,4,4,2]"},
        {"avg_pool2d_grad f32 3x3/2 padded",
         "%0 = param {index=0} : f32[2,3,3,3]\n  %1 = avg_pool2d_grad %0 {stride_h=2, "
         "stride_w=2, window_h=3, window_w=3, pads=[1,1,1,1]} : f32[2,5,5,3]"},
        {"avg_pool2d_grad f64 2x2/1 padded below",
         "%0 = param {index=0} : f64[1,3,4,1]\n  %1 = avg_pool2d_grad %0 {stride_h=1, "
         "stride_w=1, window_h=2, window_w=2, pads=[0,1,0,1]} : f64[1,3,4,1]"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char text[512];
        snprintf(text, sizeof text, "graph @f {\n  %s\n  return %%1\n}\n", cases[k].text);
        both_ways(cases[k].name, text);
    }

    /* the cross-entropy still fails on a label outside [0, C) */
    g = ir_parse("graph @f {\n  %0 = param {index=0} : f32[2,3]\n"
                 "  %1 = param {index=1} : i32[2]\n"
                 "  %2 = sparse_softmax_xent %0, %1 : f32[2]\n  return %2\n}\n");
    d = g ? pass_decompose(g, NULL, NULL, NULL) : NULL;
    CHECK(d != NULL);
    const int64_t d2[1] = {2};
    tj_tensor *args[2] = {g ? input(param(g, 0), 3, false, 0) : NULL,
                          rt_tensor_alloc(TJ_I32, 1, d2)};
    ((int32_t *)args[1]->data)[0] = 1;
    ((int32_t *)args[1]->data)[1] = 3;
    for (int way = 0; way < 2 && d; way++) {
        rt_program *p = rt_interp_new(way ? d : g);
        tj_tensor *out[1] = {0};
        CHECK(p && p->vt->run(p, args, 2, NULL, out) == TJ_ERR_RUNTIME && !out[0]);
        CHECK_MSG(strstr(ir_last_error(), way ? "index 3 out of range [0, 3)" : "label 3 of row 1"),
                  "%s", ir_last_error());
        if (p)
            p->vt->free(p);
    }
    rt_release(args[0]);
    rt_release(args[1]);
    ir_graph_free(d);
    ir_graph_free(g);

    /* a backend lowering every composite natively gets its graph back */
    g = ir_parse("graph @f {\n  %0 = param {index=0} : f32[4,5]\n"
                 "  %1 = softmax %0 {axis=1} : f32[4,5]\n"
                 "  %2 = relu %1 : f32[4,5]\n  return %2\n}\n");
    uint32_t n_done = 9;
    CHECK(g && pass_decompose(g, all_native, NULL, &n_done) == g && n_done == 0);
    d = g ? pass_decompose(g, NULL, NULL, &n_done) : NULL;
    CHECK(d && d != g && n_done == 2);
    ir_graph_free(d);
    ir_graph_free(g);
    /* the compile pipeline hands a backend the composites it does not lower as primitives */
    g = ir_parse("graph @f {\n  %0 = param {index=0} : f32[4,5]\n"
                 "  %1 = softmax %0 {axis=1} : f32[4,5]\n"
                 "  %2 = relu %1 : f32[4,5]\n  return %2\n}\n");
    jit_backend partial = {.name = "partial", .native = softmax_only};
    d = g ? jit_optimize_graph(g, "f", 1, &partial) : NULL;
    CHECK_MSG(d != NULL, "%s", ir_last_error());
    CHECK(count_op(d, IR_OP_SOFTMAX) == 1 && count_op(d, IR_OP_RELU) == 0 &&
          count_op(d, IR_OP_MAXIMUM) == 1);
    ir_graph_free(d);
    d = g ? jit_optimize_graph(g, "f", 1, jit_backend_find("cpu")) : NULL; /* lowers them all */
    CHECK(count_op(d, IR_OP_SOFTMAX) == 1 && count_op(d, IR_OP_RELU) == 1);
    ir_graph_free(d);
    ir_graph_free(g);
    /* unknown shapes: no decomposition, an error naming the op */
    g = ir_parse("graph @f {\n  %0 = param {index=0} : f32[-1,2,2,2]\n"
                 "  %1 = avg_pool2d_grad %0 {stride_h=2, stride_w=2, window_h=2, window_w=2, "
                 "pads=[0,0,0,0]} : f32[-1,4,4,2]\n  return %1\n}\n");
    CHECK_MSG(g != NULL, "%s", ir_last_error());
    CHECK(g && pass_decompose(g, NULL, NULL, NULL) == NULL);
    CHECK_MSG(strstr(ir_last_error(), "avg_pool2d_grad needs its shapes known") != NULL, "%s",
              ir_last_error());
    ir_graph_free(g);
    /* unknown class count: no decomposition, an error naming the op */
    g = ir_parse("graph @f {\n  %0 = param {index=0} : f32[2,-1]\n"
                 "  %1 = param {index=1} : i32[2]\n"
                 "  %2 = sparse_softmax_xent %0, %1 : f32[2]\n  return %2\n}\n");
    CHECK_MSG(g != NULL, "%s", ir_last_error());
    CHECK(g && pass_decompose(g, NULL, NULL, NULL) == NULL);
    CHECK_MSG(strstr(ir_last_error(), "sparse_softmax_xent needs the number of classes") != NULL,
              "%s", ir_last_error());
    ir_graph_free(g);
    return check_done();
}
