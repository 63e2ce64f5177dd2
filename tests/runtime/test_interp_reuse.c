/* test_interp_reuse.c — the interpreter writes an elementwise node's result into an input that
 * dies there and that nothing else holds: a chain of n ops allocates one buffer, not n. Never an
 * argument (the caller's), an output, a value read again later, a constant, or an input of
 * another dtype or shape; the values are those of the chain without reuse. A reshape of an
 * intermediate is a view of it (and the two are refused as tj_call_into outputs); of an argument
 * or borrowed memory, a copy. */
#include <math.h>

#include "check.h"
#include "runtime/rt_pool.h"
#include "runtime/runtime.h"

/* Runs text on args with the interpreter: the outputs (new references) in outs; the number of
 * buffers the run allocated in *n_alloc. */
static tj_status run(const char *text, tj_tensor *const *args, uint32_t n, tj_tensor **outs,
                     uint64_t *n_alloc) {
    ir_graph *g = ir_parse(text);
    CHECK_MSG(g != NULL, "%s", ir_last_error());
    if (!g)
        return TJ_ERR_INVALID;
    CHECK_MSG(ir_verify(g) == TJ_OK, "%s", ir_last_error());
    rt_program *p = rt_interp_new(g);
    CHECK_MSG(p != NULL, "%s", ir_last_error());
    memset(outs, 0, 4 * sizeof *outs);
    uint64_t a0 = rt_alloc_get_stats().n_alloc;
    tj_status st = p ? p->vt->run(p, args, n, NULL, outs) : TJ_ERR_INVALID;
    CHECK_MSG(st == TJ_OK, "%s", ir_last_error());
    *n_alloc = rt_alloc_get_stats().n_alloc - a0;
    if (p)
        p->vt->free(p);
    ir_graph_free(g);
    return st;
}

static tj_tensor *f32s(int rank, const int64_t *dims, const float *v) {
    tj_tensor *t = rt_tensor_alloc(TJ_F32, rank, dims);
    memcpy(t->data, v, (size_t)t->numel * sizeof *v);
    return t;
}

static float relu(float x) {
    return x > 0 ? x : 0;
}

int main(void) {
    static const float xv[6] = {-1.5f, 0.25f, 2, -3, 0.5f, 4};
    const int64_t d6[1] = {6}, d23[2] = {2, 3}, d3[1] = {3};
    tj_tensor *x = f32s(1, d6, xv), *outs[4] = {0};
    uint64_t n_alloc = 0;

    /* a chain: exp, + x, relu, neg. The argument x is read at every step and never written */
    tj_status st = run("graph @chain {\n"
                       "  %0 = param {index=0} : f32[6]\n"
                       "  %1 = exp %0 : f32[6]\n"
                       "  %2 = add %1, %0 : f32[6]\n"
                       "  %3 = relu %2 : f32[6]\n"
                       "  %4 = neg %3 : f32[6]\n"
                       "  %5 = mul %4, %0 : f32[6]\n"
                       "  return %5\n"
                       "}\n",
                       &x, 1, outs, &n_alloc);
    CHECK_EQ_INT(st, TJ_OK);
    CHECK_EQ_INT(n_alloc, 1); /* exp's buffer carries the whole chain */
    for (int i = 0; i < 6 && !st; i++) {
        CHECK_NEAR(tj_tensor_get_f64(outs[0], i), -relu(expf(xv[i]) + xv[i]) * xv[i], 1e-6);
        CHECK_NEAR(tj_tensor_get_f64(x, i), xv[i], 0); /* the argument is untouched */
    }
    tj_release(outs[0]);

    /* a value read again later is not overwritten; an output is not either */
    st = run("graph @twice {\n"
             "  %0 = param {index=0} : f32[6]\n"
             "  %1 = exp %0 : f32[6]\n"
             "  %2 = neg %1 : f32[6]\n"
             "  %3 = add %2, %1 : f32[6]\n"
             "  %4 = sqrt %1 : f32[6]\n"
             "  %5 = mul %3, %4 : f32[6]\n"
             "  %6 = abs %4 : f32[6]\n"
             "  return %5, %4, %6\n"
             "}\n",
             &x, 1, outs, &n_alloc);
    CHECK_EQ_INT(st, TJ_OK);
    /* %1; %2 (%1 is read later); %3 in %2's; %4 in %1's (its last read); %5 in %3's; %6 (%4
     * is an output) */
    CHECK_EQ_INT(n_alloc, 3);
    for (int i = 0; i < 6 && !st; i++) {
        float e = expf(xv[i]);
        CHECK_NEAR(tj_tensor_get_f64(outs[0], i), (-e + e) * sqrtf(e), 1e-6);
        CHECK_NEAR(tj_tensor_get_f64(outs[1], i), sqrtf(e), 1e-6);
        CHECK_NEAR(tj_tensor_get_f64(outs[2], i), sqrtf(e), 1e-6);
    }
    for (int k = 0; k < 3; k++)
        tj_release(outs[k]);

    /* broadcasting: the full-shape operand takes the result, the broadcast one cannot; a
     * comparison (bool) or a cast (another dtype) allocates its own */
    static const float yv[3] = {10, 20, 30};
    tj_tensor *args[2] = {f32s(2, d23, xv), f32s(1, d3, yv)};
    st = run("graph @bcast {\n"
             "  %0 = param {index=0} : f32[2,3]\n"
             "  %1 = param {index=1} : f32[3]\n"
             "  %2 = neg %1 : f32[3]\n"
             "  %3 = exp %0 : f32[2,3]\n"
             "  %4 = add %2, %3 : f32[2,3]\n"
             "  %5 = cast %4 : i32[2,3]\n"
             "  %6 = greater %4, %0 : bool[2,3]\n"
             "  return %5, %6\n"
             "}\n",
             args, 2, outs, &n_alloc);
    CHECK_EQ_INT(st, TJ_OK);
    CHECK_EQ_INT(n_alloc, 4); /* %2, %3 (also %4), %5, %6 */
    for (int i = 0; i < 6 && !st; i++) {
        float v = -yv[i % 3] + expf(xv[i]);
        CHECK_NEAR(tj_tensor_get_f64(outs[0], i), (int32_t)v, 0);
        CHECK_NEAR(tj_tensor_get_f64(outs[1], i), v > xv[i], 0);
    }
    for (int k = 0; k < 2; k++) {
        tj_release(outs[k]);
        tj_release(args[k]);
    }

    /* a constant's buffer is the graph's: never written */
    tj_tensor *y = f32s(1, d3, yv);
    st = run("graph @konst {\n"
             "  %0 = const [1, 2, 3] : f32[3]\n"
             "  %1 = param {index=0} : f32[3]\n"
             "  %2 = add %0, %1 : f32[3]\n"
             "  %3 = add %0, %2 : f32[3]\n"
             "  return %3\n"
             "}\n",
             &y, 1, outs, &n_alloc);
    CHECK_EQ_INT(st, TJ_OK);
    for (int i = 0; i < 3 && !st; i++)
        CHECK_NEAR(tj_tensor_get_f64(outs[0], i), 2 * (i + 1) + yv[i], 0);
    tj_release(outs[0]);
    tj_release(y);

    /* a reshape of a buffer the run owns is a view of it (no copy); the neg after it then takes
     * that buffer too */
    st = run("graph @view {\n"
             "  %0 = param {index=0} : f32[6]\n"
             "  %1 = exp %0 : f32[6]\n"
             "  %2 = reshape %1 : f32[2,3]\n"
             "  %3 = neg %2 : f32[2,3]\n"
             "  return %3\n"
             "}\n",
             &x, 1, outs, &n_alloc);
    CHECK_EQ_INT(st, TJ_OK);
    CHECK_EQ_INT(n_alloc, 1);
    CHECK_EQ_INT(tj_tensor_rank(outs[0]), 2);
    for (int i = 0; i < 6 && !st; i++)
        CHECK_NEAR(tj_tensor_get_f64(outs[0], i), -expf(xv[i]), 1e-6);
    tj_release(outs[0]);

    /* an intermediate returned beside its view: the two share a buffer, so neither can receive a
     * call's results (tj_call_into); an argument, which its caller holds, is copied */
    st = run("graph @shared {\n"
             "  %0 = param {index=0} : f32[6]\n"
             "  %1 = exp %0 : f32[6]\n"
             "  %2 = reshape %1 : f32[2,3]\n"
             "  %3 = reshape %0 : f32[3,2]\n"
             "  return %1, %2, %3\n"
             "}\n",
             &x, 1, outs, &n_alloc);
    CHECK_EQ_INT(st, TJ_OK);
    CHECK(tj_tensor_data(outs[1]) == tj_tensor_data(outs[0]));
    CHECK(tj_tensor_data(outs[2]) != tj_tensor_data(x));
    CHECK_EQ_INT(rt_check_output(outs[0], "call_into", 0), TJ_ERR_INVALID);
    CHECK(strstr(ir_last_error(), "call_into: output 0 shares its memory with another tensor"));
    CHECK_EQ_INT(rt_check_output(outs[2], "call_into", 2), TJ_OK);
    for (int k = 0; k < 3; k++)
        tj_release(outs[k]);

    /* borrowed memory is copied, not viewed: its owner may write it after the call */
    float mine[6];
    memcpy(mine, xv, sizeof mine);
    tj_tensor *b = tj_tensor_borrow(TJ_F32, 1, d6, mine, NULL, NULL);
    st = run("graph @borrowed {\n"
             "  %0 = param {index=0} : f32[6]\n"
             "  %1 = reshape %0 : f32[3,2]\n"
             "  return %1\n"
             "}\n",
             &b, 1, outs, &n_alloc);
    CHECK_EQ_INT(st, TJ_OK);
    CHECK(tj_tensor_data(outs[0]) != (const void *)mine);
    mine[4] = 99;
    CHECK_NEAR(tj_tensor_get_f64(outs[0], 4), xv[4], 0);
    tj_release(outs[0]);
    tj_release(b);
    tj_release(x);
    return check_done();
}
