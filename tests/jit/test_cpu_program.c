/* test_cpu_program.c — the CPU program around the kernels: params, constants, variables
 * (var_read, assign), print and host callbacks run every call in program order, outputs that are
 * params or constants, dead nodes not run (S23), reference-kernel errors reported with their
 * message, unknown dims refused with TJ_ERR_UNSUPPORTED, and large kernels split across threads
 * (flat and broadcasting layouts) with results identical to the interpreter. */
#include <pthread.h>

#include "check.h"
#include "test_cpu_util.h"

static char lines[16][128];
static int n_lines, n_calls;
static float cb_sum;

static void sink(const char *line, void *user) {
    if (n_lines < 16)
        snprintf(lines[n_lines++], sizeof lines[0], "%s", line);
}

static void callback(void *user, tj_tensor *x) {
    n_calls++;
    cb_sum += ((const float *)x->data)[0];
    *(int *)user += 1;
}

static uint32_t node_with(ir_graph *g, int op, int dt, int rank, const int64_t *dims, int64_t i0,
                          uint32_t blob, const uint32_t *in, uint32_t n_in) {
    ir_node p = {0};
    p.op = (uint16_t)op;
    p.dtype = (uint8_t)dt;
    p.rank = (uint8_t)rank;
    if (rank)
        memcpy(p.dims, dims, (size_t)rank * sizeof *dims);
    p.a.i[0] = i0;
    p.a.blob = blob;
    return ir_add(g, &p, in, n_in);
}

static void test_effects(void) {
    int64_t n = 5, one = 1;
    int user = 0;
    ir_graph *g = ir_graph_new("effects");
    uint32_t x = tu_param(g, 0, TJ_F32, 1, &n);
    uint32_t a = tu_bin(g, IR_OP_ADD, tu_bin(g, IR_OP_MUL, x, tu_const_f64(g, TJ_F32, 2)),
                        tu_const_f64(g, TJ_F32, 1));
    uint32_t pr = node_with(g, IR_OP_PRINT, IR_VOID, 0, NULL, 0, ir_add_blob(g, "a:", 3), &a, 1);
    void *cb[2] = {(void *)callback, &user};
    uint32_t hc = node_with(g, IR_OP_HOST_CALLBACK, IR_VOID, 0, NULL, 0,
                            ir_add_blob(g, cb, sizeof cb), &a, 1);
    uint32_t v = node_with(g, IR_OP_VAR_READ, TJ_F32, 1, &n, 0, 0, NULL, 0);
    uint32_t nv = tu_bin(g, IR_OP_ADD, v, a);
    uint32_t as = node_with(g, IR_OP_ASSIGN, TJ_F32, 1, &n, 0, 0, &nv, 1);
    uint32_t out = tu_bin(g, IR_OP_MUL, as, tu_const_f64(g, TJ_F32, 3));
    /* dead: gather of index 1 from a 1-element tensor would fail if it ran */
    uint32_t small = tu_param(g, 1, TJ_F32, 1, &one);
    uint32_t idx = tu_const_f64(g, TJ_I64, 1);
    uint32_t gin[2] = {small, idx};
    uint32_t dead = node_with(g, IR_OP_GATHER, 0, 0, NULL, 0, 0, gin, 2);
    CHECK(pr != IR_NONE && hc != IR_NONE && as != IR_NONE && dead != IR_NONE);
    ir_add_output(g, out);
    ir_add_output(g, x);
    ir_add_output(g, idx);
    CHECK_EQ_INT(ir_verify(g), TJ_OK);

    rt_program *p = jit_cpu_compile(g);
    CHECK_MSG(p != NULL, "%s", ir_last_error());
    if (!p)
        goto done;
    CHECK_STR(p->vt->name, "cpu");
    float xs[5] = {0, 1, 2, 3, -1}, zeros[5] = {0};
    tj_tensor *args[2] = {tj_tensor_from_data(TJ_F32, 1, &n, xs),
                          tj_tensor_from_data(TJ_F32, 1, &one, xs)};
    tj_tensor *init = tj_tensor_from_data(TJ_F32, 1, &n, zeros);
    tj_variable *var = tj_variable_new(init, "acc");
    tj_release(init);
    tj_set_print_sink(sink, NULL);
    for (int call = 1; call <= 2; call++) {
        tj_tensor *outs[3] = {0};
        tj_status st = p->vt->run(p, args, 2, &var, outs);
        CHECK_MSG(st == TJ_OK, "%s", ir_last_error());
        if (st)
            break;
        for (int i = 0; i < 5; i++) {
            CHECK_NEAR(((float *)outs[0]->data)[i], 3.0f * call * (2 * xs[i] + 1), 0);
            CHECK_NEAR(tu_get(outs[1], i), xs[i], 0);
        }
        CHECK(outs[1] == args[0]);
        CHECK_EQ_INT(tu_get(outs[2], 0), 1);
        tj_tensor *vv = tj_variable_read(var);
        CHECK_NEAR(tu_get(vv, 4), -1.0 * call, 0);
        tj_release(vv);
        for (int k = 0; k < 3; k++)
            tj_release(outs[k]);
    }
    CHECK_EQ_INT(n_lines, 2);
    CHECK_HAS(lines[0], "a:");
    CHECK_HAS(lines[1], "[1 3 5 7 -1]");
    CHECK_EQ_INT(n_calls, 2);
    CHECK_EQ_INT(user, 2);
    CHECK_NEAR(cb_sum, 2.0, 0);
    /* with no variable bound: a clear error, no crash */
    tj_tensor *outs[3] = {0};
    tj_variable *none = NULL;
    CHECK_EQ_INT(p->vt->run(p, args, 2, &none, outs), TJ_ERR_STATE);
    CHECK_HAS(ir_last_error(), "variable slot 0");
    CHECK(outs[0] == NULL);
    CHECK_EQ_INT(n_lines, 3); /* effects before the failing node ran, as in the interpreter */
    tj_set_print_sink(NULL, NULL);
    tj_variable_free(var);
    for (int k = 0; k < 2; k++)
        tj_release(args[k]);
    p->vt->free(p);
done:
    ir_graph_free(g);
}

static void test_errors(void) {
    /* a reference-kernel error (integer floordiv by zero) surfaces with its message */
    int64_t n = 3;
    ir_graph *g = ir_graph_new("errors");
    uint32_t x = tu_param(g, 0, TJ_I32, 1, &n), y = tu_param(g, 1, TJ_I32, 1, &n);
    ir_add_output(g, tu_un(g, IR_OP_NEG, tu_bin(g, IR_OP_FLOORDIV, x, y)));
    rt_program *p = jit_cpu_compile(g);
    CHECK(p != NULL);
    int32_t a[3] = {7, -7, 1}, b[3] = {2, 2, 0};
    tj_tensor *args[2] = {tj_tensor_from_data(TJ_I32, 1, &n, a),
                          tj_tensor_from_data(TJ_I32, 1, &n, b)};
    tj_tensor *out = NULL;
    if (p) {
        CHECK_EQ_INT(p->vt->run(p, args, 2, NULL, &out), TJ_ERR_RUNTIME);
        CHECK_HAS(ir_last_error(), "floordiv: integer division by zero");
        CHECK(out == NULL);
        b[2] = -1;
        tj_tensor *args2[2] = {args[0], tj_tensor_from_data(TJ_I32, 1, &n, b)};
        CHECK_EQ_INT(p->vt->run(p, args2, 2, NULL, &out), TJ_OK);
        CHECK(out && ((int32_t *)out->data)[0] == -3 && ((int32_t *)out->data)[1] == 4 &&
              ((int32_t *)out->data)[2] == 1);
        tj_release(out);
        out = NULL;
        tj_release(args2[1]);
        int64_t n4 = 4;
        tj_tensor *wrong[2] = {args[0], rt_tensor_alloc(TJ_I32, 1, &n4)};
        CHECK_EQ_INT(p->vt->run(p, wrong, 2, NULL, &out), TJ_ERR_SIGNATURE);
        CHECK_HAS(ir_last_error(), "argument 1 is not i32[3]");
        tj_release(wrong[1]);
        p->vt->free(p);
    }
    for (int k = 0; k < 2; k++)
        tj_release(args[k]);
    ir_graph_free(g);

    /* unknown dims: refused, the caller interprets */
    int64_t unk = -1;
    g = ir_graph_new("unknown");
    x = tu_param(g, 0, TJ_F32, 1, &unk);
    ir_add_output(g, tu_un(g, IR_OP_NEG, x));
    CHECK(jit_cpu_compile(g) == NULL);
    CHECK_EQ_INT(ir_last_code(), TJ_ERR_UNSUPPORTED);
    CHECK_HAS(ir_last_error(), "unknown dims");
    ir_graph_free(g);
    CHECK(jit_cpu_compile(NULL) == NULL);
    CHECK_EQ_INT(ir_last_code(), TJ_ERR_INVALID);
}

static void test_parallel(void) {
    /* flat: 300001 elements; rows: [300, 1001] + [1001] + [300, 1], split across the pool */
    int64_t big = 300001, m2[2] = {300, 1001}, row = 1001, col[2] = {300, 1};
    ir_graph *g = ir_graph_new("parallel");
    uint32_t x = tu_param(g, 0, TJ_F64, 1, &big);
    ir_add_output(g, tu_un(g, IR_OP_SQRT, tu_un(g, IR_OP_ABS, tu_bin(g, IR_OP_MUL, x, x))));
    uint32_t a = tu_param(g, 1, TJ_F32, 2, m2), b = tu_param(g, 2, TJ_F32, 1, &row);
    uint32_t c = tu_param(g, 3, TJ_F32, 2, col);
    uint32_t s = tu_bin(g, IR_OP_ADD, tu_bin(g, IR_OP_MUL, a, b), c);
    ir_add_output(g, tu_op(g, IR_OP_WHERE, tu_bin(g, IR_OP_GT, s, c), s, tu_un(g, IR_OP_NEG, c)));
    for (int t = 0; t < 2; t++) {
        jit_cpu_opts o = {.no_contract = true, .par_min = t ? 1000 : 1 << 30};
        rt_program *p = jit_cpu_compile_opts(g, &o);
        rt_program *ref = rt_interp_new(g);
        CHECK(p && ref);
        if (!p || !ref)
            break;
        tj_tensor *args[4] = {tu_random(TJ_F64, 1, &big, 1), tu_random(TJ_F32, 2, m2, 1),
                              tu_random(TJ_F32, 1, &row, 1), tu_random(TJ_F32, 2, col, 1)};
        tj_tensor *o1[2] = {0}, *o2[2] = {0};
        CHECK_EQ_INT(tu_run(p, args, 4, o1), TJ_OK);
        CHECK_EQ_INT(tu_run(ref, args, 4, o2), TJ_OK);
        for (int k = 0; k < 2; k++) {
            CHECK_EQ_INT(tu_diff(o1[k], o2[k], 0, NULL), 0);
            tj_release(o1[k]);
            tj_release(o2[k]);
        }
        for (int k = 0; k < 4; k++)
            tj_release(args[k]);
        p->vt->free(p);
        ref->vt->free(ref);
    }
    ir_graph_free(g);
}

/* Compiles and runs y = x * k + k on its own graph; returns the number of wrong elements. */
static void *compile_thread(void *arg) {
    long k = (long)(intptr_t)arg, bad = 0;
    int64_t n = 1000;
    for (int rep = 0; rep < 3; rep++) {
        ir_graph *g = ir_graph_new("thread");
        uint32_t x = tu_param(g, 0, TJ_I64, 1, &n), c = tu_const_f64(g, TJ_I64, (double)k);
        ir_add_output(g, tu_bin(g, IR_OP_ADD, tu_bin(g, IR_OP_MUL, x, c), c));
        rt_program *p = jit_cpu_compile(g);
        tj_tensor *xt = rt_tensor_alloc(TJ_I64, 1, &n), *out = NULL;
        for (int64_t i = 0; i < n; i++)
            ((int64_t *)xt->data)[i] = i;
        if (!p || tu_run(p, &xt, 1, &out) != TJ_OK) {
            bad += n;
        } else {
            for (int64_t i = 0; i < n; i++)
                bad += ((int64_t *)out->data)[i] != i * k + k;
        }
        tj_release(out);
        tj_release(xt);
        if (p)
            p->vt->free(p);
        ir_graph_free(g);
    }
    return (void *)(intptr_t)bad;
}

static void test_threads(void) {
    pthread_t th[4];
    for (long k = 0; k < 4; k++)
        pthread_create(&th[k], NULL, compile_thread, (void *)(k + 2));
    long bad = 0;
    for (int k = 0; k < 4; k++) {
        void *r;
        pthread_join(th[k], &r);
        bad += (long)(intptr_t)r;
    }
    CHECK_EQ_INT(bad, 0);
}

int main(void) {
    if (!jit_cpu_available()) {
        printf("skip: %s\n", ir_last_error());
        return 77;
    }
    test_effects();
    test_errors();
    test_parallel();
    test_threads();
    return check_done();
}
