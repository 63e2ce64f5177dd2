/* test_control_exec.c — the executor runs control-flow nodes (issue 10): a COND runs one branch
 * (the other's effects do not happen), a WHILE iterates until its cond is false or its maximum
 * count, a FOR walks its int64 range (negative steps too, none for an empty range), a SCAN
 * slices its sequences and stacks its ys, side effects inside regions happen once per executed
 * iteration, and a failing body stops the loop with an error naming the op and the iteration.
 * Graphs are written in the text IR and run with the interpreter. */
#include <math.h>

#include "check.h"
#include "runtime/runtime.h"

static int n_lines;
static char lines[16][64];
static void sink(const char *line, void *user) {
    (void)user;
    if (n_lines < 16)
        snprintf(lines[n_lines], sizeof lines[0], "%s", line);
    n_lines++;
}

/* Runs text on args; returns output k (a new reference) or NULL with the status in *st. */
static tj_tensor **run(const char *text, tj_tensor *const *args, uint32_t n, tj_status *st) {
    static tj_tensor *outs[4];
    ir_graph *g = ir_parse(text);
    CHECK_MSG(g != NULL, "%s", ir_last_error());
    *st = TJ_ERR_INVALID;
    if (!g)
        return NULL;
    CHECK_MSG(ir_verify(g) == TJ_OK, "%s", ir_last_error());
    rt_program *p = rt_interp_new(g);
    CHECK_MSG(p != NULL, "%s", ir_last_error());
    memset(outs, 0, sizeof outs);
    n_lines = 0;
    *st = p ? p->vt->run(p, args, n, NULL, outs) : TJ_ERR_INVALID;
    if (p)
        p->vt->free(p);
    ir_graph_free(g);
    return outs;
}

static tj_tensor *f32s(int n, const float *v) {
    int64_t d[1] = {n};
    tj_tensor *t = rt_tensor_alloc(TJ_F32, 1, d);
    memcpy(t->data, v, (size_t)n * sizeof *v);
    return t;
}
static tj_tensor *scalar_f32(float v) {
    tj_tensor *t = rt_tensor_alloc(TJ_F32, 0, NULL);
    *(float *)t->data = v;
    return t;
}
static tj_tensor *scalar_i64(int64_t v) {
    tj_tensor *t = rt_tensor_alloc(TJ_I64, 0, NULL);
    *(int64_t *)t->data = v;
    return t;
}
static double at(const tj_tensor *t, int64_t i) {
    return tj_tensor_get_f64(t, i);
}

static const char *cond_text = "graph @square_if_positive {\n"
                               "  graph @then {\n"
                               "    %0 = param {index=0} : f32[]\n"
                               "    %1 = mul %0, %0 : f32[]\n"
                               "    %2 = print %1 {prefix=\"then\"} : void\n"
                               "    return %1\n"
                               "    effects %2\n"
                               "  }\n"
                               "  graph @else {\n"
                               "    %0 = param {index=0} : f32[]\n"
                               "    %1 = const [0] : f32[]\n"
                               "    %2 = print %1 {prefix=\"else\"} : void\n"
                               "    return %1\n"
                               "    effects %2\n"
                               "  }\n"
                               "  %0 = param {index=0} : f32[]\n"
                               "  %1 = const [0] : f32[]\n"
                               "  %2 = greater %0, %1 : bool[]\n"
                               "  %3 = cond %2, %0 {sub0=1, sub1=2} : tuple[]\n"
                               "  %4 = get %3 {index=0} : f32[]\n"
                               "  return %4\n"
                               "  effects %3\n"
                               "}\n";

/* while sum(x) > 1 { print(x); x = tanh(x) } */
static const char *while_text = "graph @tanh_loop {\n"
                                "  graph @cond {\n"
                                "    %0 = param {index=0} : f32[2]\n"
                                "    %1 = sum %0 {axes=[0], keepdims=0} : f32[]\n"
                                "    %2 = const [1] : f32[]\n"
                                "    %3 = greater %1, %2 : bool[]\n"
                                "    return %3\n"
                                "  }\n"
                                "  graph @body {\n"
                                "    %0 = param {index=0} : f32[2]\n"
                                "    %1 = print %0 {prefix=\"x\"} : void\n"
                                "    %2 = tanh %0 : f32[2]\n"
                                "    return %2\n"
                                "    effects %1\n"
                                "  }\n"
                                "  %0 = param {index=0} : f32[2]\n"
                                "  %1 = while %0 {sub0=1, sub1=2, max_iterations=0} : tuple[]\n"
                                "  %2 = get %1 {index=0} : f32[2]\n"
                                "  return %2\n"
                                "  effects %1\n"
                                "}\n";

/* sum of i*c for i in range(start, limit, delta) */
static const char *for_text = "graph @sum_range {\n"
                              "  graph @body {\n"
                              "    %0 = param {index=0} : i64[]\n"
                              "    %1 = param {index=1} : i64[]\n"
                              "    %2 = param {index=2} : i64[]\n"
                              "    %3 = mul %0, %2 : i64[]\n"
                              "    %4 = add %1, %3 : i64[]\n"
                              "    return %4, %2\n"
                              "  }\n"
                              "  %0 = param {index=0} : i64[]\n"
                              "  %1 = param {index=1} : i64[]\n"
                              "  %2 = param {index=2} : i64[]\n"
                              "  %3 = const [0] : i64[]\n"
                              "  %4 = const [10] : i64[]\n"
                              "  %5 = for %0, %1, %2, %3, %4 {sub0=1} : tuple[]\n"
                              "  %6 = get %5 {index=0} : i64[]\n"
                              "  return %6\n"
                              "}\n";

/* a cumulative sum: carried s, y_t = s + x_t */
static const char *scan_text = "graph @cumsum {\n"
                               "  graph @step {\n"
                               "    %0 = param {index=0} : f32[2]\n"
                               "    %1 = param {index=1} : f32[2]\n"
                               "    %2 = add %0, %1 : f32[2]\n"
                               "    return %2, %2\n"
                               "  }\n"
                               "  %0 = param {index=0} : f32[2]\n"
                               "  %1 = param {index=1} : f32[3,2]\n"
                               "  %2 = scan %0, %1 {sub0=1, n_carried=1} : tuple[]\n"
                               "  %3 = get %2 {index=0} : f32[2]\n"
                               "  %4 = get %2 {index=1} : f32[3,2]\n"
                               "  return %3, %4\n"
                               "}\n";

/* a loop whose body fails at run time on its third iteration (integer division by zero) */
static const char *fail_text = "graph @fails {\n"
                               "  graph @body {\n"
                               "    %0 = param {index=0} : i64[]\n"
                               "    %1 = param {index=1} : i64[]\n"
                               "    %2 = const [2] : i64[]\n"
                               "    %3 = sub %2, %0 : i64[]\n"
                               "    %4 = div %1, %3 : i64[]\n"
                               "    return %4\n"
                               "  }\n"
                               "  %0 = const [0] : i64[]\n"
                               "  %1 = const [5] : i64[]\n"
                               "  %2 = const [1] : i64[]\n"
                               "  %3 = const [100] : i64[]\n"
                               "  %4 = for %0, %1, %2, %3 {sub0=1} : tuple[]\n"
                               "  %5 = get %4 {index=0} : i64[]\n"
                               "  return %5\n"
                               "}\n";

int main(void) {
    tj_set_print_sink(sink, NULL);
    tj_status st;

    /* cond: 2 -> 4 through the then branch, -2 -> 0 through else; one branch's print each */
    tj_tensor *x = scalar_f32(2);
    tj_tensor **o = run(cond_text, &x, 1, &st);
    CHECK_EQ_INT(st, TJ_OK);
    CHECK_NEAR(at(o[0], 0), 4, 0);
    CHECK_EQ_INT(n_lines, 1);
    CHECK_STR(lines[0], "then 4");
    tj_release(o[0]);
    tj_release(x);
    x = scalar_f32(-2);
    o = run(cond_text, &x, 1, &st);
    CHECK_NEAR(at(o[0], 0), 0, 0);
    CHECK_EQ_INT(n_lines, 1);
    CHECK_STR(lines[0], "else 0");
    tj_release(o[0]);
    tj_release(x);

    /* while: prints every iterate until the sum drops to 1 or below */
    char text[2048];
    snprintf(text, sizeof text, "%s", while_text);
    x = f32s(2, (float[]){1, 2});
    o = run(text, &x, 1, &st);
    CHECK_EQ_INT(st, TJ_OK);
    CHECK(n_lines >= 3);
    CHECK_STR(lines[0], "x [1 2]");
    CHECK(at(o[0], 0) + at(o[0], 1) <= 1);
    int full = n_lines;
    tj_release(o[0]);
    /* the same loop stopped by its maximum count, as tf.while_loop stops */
    memcpy(strstr(text, "max_iterations=0"), "max_iterations=2", 16);
    o = run(text, &x, 1, &st);
    CHECK_EQ_INT(st, TJ_OK);
    CHECK_EQ_INT(n_lines, 2);
    CHECK(full > 2);
    CHECK_NEAR(at(o[0], 0), tanh(tanh(1.0)), 1e-6);
    tj_release(o[0]);
    tj_release(x);

    /* for: the body adds i * 10 (a carried constant): 10 * (0 + ... + 9), downwards 9, 7, .., 1,
     * and two empty ranges */
    const int64_t ranges[][4] = {{0, 10, 1, 45}, {9, 0, -2, 25}, {5, 5, 1, 0}, {5, 0, 1, 0}};
    for (int r = 0; r < 4; r++) {
        tj_tensor *a[3] = {scalar_i64(ranges[r][0]), scalar_i64(ranges[r][1]),
                           scalar_i64(ranges[r][2])};
        o = run(for_text, a, 3, &st);
        CHECK_EQ_INT(st, TJ_OK);
        CHECK_NEAR(at(o[0], 0), 10.0 * (double)ranges[r][3], 0);
        tj_release(o[0]);
        for (int k = 0; k < 3; k++)
            tj_release(a[k]);
    }
    tj_tensor *zero_step[3] = {scalar_i64(0), scalar_i64(3), scalar_i64(0)};
    o = run(for_text, zero_step, 3, &st);
    CHECK_EQ_INT(st, TJ_ERR_RUNTIME);
    CHECK_HAS(tj_last_error(), "for: delta is 0");
    for (int k = 0; k < 3; k++)
        tj_release(zero_step[k]);

    /* scan: carried and stacked */
    tj_tensor *sargs[2] = {f32s(2, (float[]){0, 0}), NULL};
    int64_t d32[2] = {3, 2};
    sargs[1] = rt_tensor_alloc(TJ_F32, 2, d32);
    memcpy(sargs[1]->data, (float[]){1, 10, 2, 20, 3, 30}, 6 * sizeof(float));
    o = run(scan_text, sargs, 2, &st);
    CHECK_EQ_INT(st, TJ_OK);
    CHECK_NEAR(at(o[0], 0), 6, 0);
    CHECK_NEAR(at(o[0], 1), 60, 0);
    const double want[6] = {1, 10, 3, 30, 6, 60};
    for (int i = 0; i < 6; i++)
        CHECK_NEAR(at(o[1], i), want[i], 0);
    tj_release(o[0]);
    tj_release(o[1]);
    tj_release(sargs[0]);
    tj_release(sargs[1]);

    /* a failing body: the error names the loop and the iteration */
    o = run(fail_text, NULL, 0, &st);
    CHECK_EQ_INT(st, TJ_ERR_RUNTIME);
    CHECK_HAS(tj_last_error(), "for: iteration 2: div: integer division by zero");
    CHECK(o[0] == NULL);
    tj_set_print_sink(NULL, NULL);
    return check_done();
}
