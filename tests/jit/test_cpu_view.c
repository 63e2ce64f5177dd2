/* test_cpu_view.c — generated strided views (jit/cpu/llvm/codegen_view.c): TRANSPOSE (every perm of
 * rank 3, rank 0, 1, 2 and 4, empty), SLICE (positive and negative steps, bounds past the ends,
 * empty results, a step on the last axis) and BROADCAST_TO (new axes, size-1 axes, a scalar, an
 * empty target) for f32 f64 i32 i64 bool, compiled and compared bit for bit with the interpreter
 * (reference kernels); the compile log must name no reference kernel for them. A string
 * transpose stays on the reference kernel (and still agrees). */
#include <tracejit.h>

#include "check.h"
#include "test_cpu_util.h"

static int n_fallbacks;
static void log_sink(const char *topic, const char *msg, void *user) {
    (void)topic;
    (void)user;
    if (strstr(msg, "reference kernel"))
        n_fallbacks++;
}

static uint32_t with_list(ir_graph *g, int op, uint32_t x, const int64_t *list, int n) {
    ir_node p = {0};
    p.op = (uint16_t)op;
    for (int k = 0; k < n; k++)
        p.a.list[k] = list[k];
    p.a.n_list = (uint32_t)n;
    return ir_add(g, &p, &x, 1);
}

static uint32_t bcast(ir_graph *g, uint32_t x, int rank, const int64_t *dims) {
    ir_node p = {0};
    p.op = IR_OP_BROADCAST_TO;
    p.rank = (uint8_t)rank;
    if (rank)
        memcpy(p.dims, dims, (size_t)rank * sizeof *dims);
    return ir_add(g, &p, &x, 1);
}

/* Compiles g, runs it and the interpreter on one random input, compares every output. */
static void compare(ir_graph *g, int dt, int rank, const int64_t *dims, bool generated,
                    const char *what) {
    n_fallbacks = 0;
    rt_program *p = jit_cpu_compile_opts(g, NULL), *ref = rt_interp_new(g);
    CHECK_MSG(p && ref, "%s: %s", what, ir_last_error());
    if (p && ref) {
        tj_tensor *x = tu_random(dt, rank, dims, 1);
        tu_compare_programs(p, ref, &x, 1, 0, what);
        tj_release(x);
    }
    if (generated)
        CHECK_MSG(n_fallbacks == 0, "%s: %d nodes ran reference kernels", what, n_fallbacks);
    if (p)
        p->vt->free(p);
    if (ref)
        ref->vt->free(ref);
}

static void check_dtype(int dt) {
    char what[96];
    const char *ds = ir_dtype_short(dt);
    /* transposes */
    static const int64_t d3[3] = {4, 5, 6}, d4[4] = {2, 3, 4, 5}, d2[2] = {37, 53};
    static const int64_t perms3[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2},
                                         {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
    ir_graph *g = ir_graph_new("transpose3");
    uint32_t x = tu_param(g, 0, dt, 3, d3);
    for (int k = 0; k < 6; k++)
        ir_add_output(g, with_list(g, IR_OP_TRANSPOSE, x, perms3[k], 3));
    snprintf(what, sizeof what, "transpose %s rank 3, all perms", ds);
    compare(g, dt, 3, d3, true, what);
    ir_graph_free(g);

    g = ir_graph_new("transpose_other");
    x = tu_param(g, 0, dt, 4, d4);
    ir_add_output(g, with_list(g, IR_OP_TRANSPOSE, x, (int64_t[]){3, 1, 0, 2}, 4));
    snprintf(what, sizeof what, "transpose %s rank 4", ds);
    compare(g, dt, 4, d4, true, what);
    ir_graph_free(g);

    g = ir_graph_new("transpose2");
    x = tu_param(g, 0, dt, 2, d2);
    ir_add_output(g, with_list(g, IR_OP_TRANSPOSE, x, (int64_t[]){1, 0}, 2));
    snprintf(what, sizeof what, "transpose %s [37,53]", ds);
    compare(g, dt, 2, d2, true, what);
    ir_graph_free(g);

    g = ir_graph_new("transpose_small");
    static const int64_t d0[2] = {0, 5}, d1[1] = {7};
    x = tu_param(g, 0, dt, 2, d0);
    ir_add_output(g, with_list(g, IR_OP_TRANSPOSE, x, (int64_t[]){1, 0}, 2));
    snprintf(what, sizeof what, "transpose %s empty", ds);
    compare(g, dt, 2, d0, true, what);
    ir_graph_free(g);
    g = ir_graph_new("transpose_r1");
    x = tu_param(g, 0, dt, 1, d1);
    ir_add_output(g, with_list(g, IR_OP_TRANSPOSE, x, (int64_t[]){0}, 1));
    snprintf(what, sizeof what, "transpose %s rank 1", ds);
    compare(g, dt, 1, d1, true, what);
    ir_graph_free(g);
    g = ir_graph_new("transpose_r0");
    x = tu_param(g, 0, dt, 0, NULL);
    ir_add_output(g, with_list(g, IR_OP_TRANSPOSE, x, NULL, 0));
    snprintf(what, sizeof what, "transpose %s rank 0", ds);
    compare(g, dt, 0, NULL, true, what);
    ir_graph_free(g);

    /* slices: begin[r], end[r], step[r] as Python writes them */
    static const int64_t ds2[2] = {10, 12};
    static const int64_t slices[][6] = {
        {0, 0, 10, 12, 1, 1},       /* everything */
        {2, 3, 8, 11, 1, 1},        /* a block: contiguous rows */
        {-1, 11, -11, -13, -1, -2}, /* both axes reversed, step 2 on the last */
        {1, -100, 100, 100, 3, 5},  /* bounds past both ends */
        {5, 0, 5, 12, 1, 1},        /* empty */
        {9, 4, 10, 5, 1, 1},        /* one element */
    };
    g = ir_graph_new("slices");
    x = tu_param(g, 0, dt, 2, ds2);
    for (size_t k = 0; k < sizeof slices / sizeof slices[0]; k++)
        ir_add_output(g, with_list(g, IR_OP_SLICE, x, slices[k], 6));
    snprintf(what, sizeof what, "slices %s", ds);
    compare(g, dt, 2, ds2, true, what);
    ir_graph_free(g);

    /* broadcasts */
    static const int64_t b1[2] = {3, 1}, t1[3] = {2, 3, 4}, t2[1] = {5}, t3[2] = {0, 4};
    g = ir_graph_new("bcast");
    x = tu_param(g, 0, dt, 2, b1);
    ir_add_output(g, bcast(g, x, 3, t1));
    snprintf(what, sizeof what, "broadcast_to %s [3,1] -> [2,3,4]", ds);
    compare(g, dt, 2, b1, true, what);
    ir_graph_free(g);
    g = ir_graph_new("bcast_scalar");
    x = tu_param(g, 0, dt, 0, NULL);
    ir_add_output(g, bcast(g, x, 1, t2));
    snprintf(what, sizeof what, "broadcast_to %s scalar -> [5]", ds);
    compare(g, dt, 0, NULL, true, what);
    ir_graph_free(g);
    g = ir_graph_new("bcast_empty");
    x = tu_param(g, 0, dt, 1, (int64_t[]){4});
    ir_add_output(g, bcast(g, x, 2, t3));
    snprintf(what, sizeof what, "broadcast_to %s [4] -> [0,4]", ds);
    compare(g, dt, 1, (int64_t[]){4}, true, what);
    ir_graph_free(g);
}

int main(void) {
    if (!jit_cpu_available()) {
        printf("skip: %s\n", ir_last_error());
        return 77;
    }
    tj_set_log(log_sink, NULL);
    tj_set_log_topics("compile");
    static const int dts[] = {TJ_F32, TJ_F64, TJ_I32, TJ_I64, TJ_BOOL};
    for (int d = 0; d < 5; d++)
        check_dtype(dts[d]);
    /* a string transpose runs the reference kernel inside the plan, and agrees */
    ir_graph *g = ir_graph_new("transpose_str");
    static const int64_t d[2] = {2, 3};
    uint32_t x = tu_param(g, 0, TJ_STRING, 2, d);
    ir_add_output(g, with_list(g, IR_OP_TRANSPOSE, x, (int64_t[]){1, 0}, 2));
    n_fallbacks = 0;
    rt_program *p = jit_cpu_compile_opts(g, NULL);
    CHECK_MSG(p != NULL, "string transpose: %s", ir_last_error());
    CHECK(n_fallbacks == 1);
    if (p) {
        const char *s[6] = {"a", "b", "c", "d", "e", "f"};
        tj_tensor *in = tj_tensor_from_data(TJ_STRING, 2, d, s), *out = NULL;
        CHECK(p->vt->run(p, &in, 1, NULL, &out) == TJ_OK);
        char *txt = out ? tj_tensor_str(out) : NULL;
        CHECK_MSG(txt && strstr(txt, "[[b'a' b'd'] [b'b' b'e']"), "string transpose gave %s", txt);
        free(txt);
        tj_release(out);
        tj_release(in);
        p->vt->free(p);
    }
    ir_graph_free(g);
    tj_set_log_topics("");
    tj_set_log(NULL, NULL);
    return check_done();
}
