/* jit_cpu_opts.exact_math given through the options (not the environment) reaches every kernel
 * kind: fused elementwise groups with exp/log/tanh/sigmoid are then bit-identical to the
 * reference kernels, while the default (approximations) differs in some element and stays within
 * the stated bounds. Also: exact and approximate code are cached under different keys. */
#include "check.h"
#include "jit/cpu/cpu.h"
#include "test_cpu_util.h"

static ir_graph *graph(int dt, int64_t n) {
    ir_graph *g = ir_graph_new("exact");
    int64_t d[1] = {n};
    uint32_t x = tu_param(g, 0, dt, 1, d);
    uint32_t a = tu_bin(g, IR_OP_MUL, x, tu_const_f64(g, dt, 0.75));
    uint32_t t = tu_un(g, IR_OP_TANH, tu_bin(g, IR_OP_ADD, a, tu_const_f64(g, dt, 0.25)));
    uint32_t e = tu_un(g, IR_OP_EXP, tu_un(g, IR_OP_SIGMOID, x));
    uint32_t l = tu_un(g, IR_OP_LOG, tu_un(g, IR_OP_ABS, x));
    ir_add_output(g, tu_bin(g, IR_OP_ADD, tu_bin(g, IR_OP_MUL, t, e), l));
    return g;
}

int main(void) {
    if (!jit_cpu_available()) {
        printf("no LLVM: skipped\n");
        return 77;
    }
    setenv("TJ_CACHE", "0", 1);
    const int dts[2] = {TJ_F32, TJ_F64};
    for (int k = 0; k < 2; k++) {
        int64_t n = 4099, d[1] = {n};
        ir_graph *g = graph(dts[k], n);
        tj_tensor *x = tu_random(dts[k], 1, d, 1);
        rt_program *ref = rt_interp_new(g);
        rt_program *exact =
            jit_cpu_compile_opts(g, &(jit_cpu_opts){.exact_math = true, .no_contract = true});
        rt_program *fast = jit_cpu_compile_opts(g, &(jit_cpu_opts){.no_contract = true});
        CHECK(ref && exact && fast);
        tj_tensor *r = NULL, *e = NULL, *f = NULL;
        CHECK(ref && tu_run(ref, &x, 1, &r) == TJ_OK);
        CHECK(exact && tu_run(exact, &x, 1, &e) == TJ_OK);
        CHECK(fast && tu_run(fast, &x, 1, &f) == TJ_OK);
        int64_t first = -1;
        CHECK_MSG(tu_diff(e, r, 0, &first) == 0,
                  "%s: exact_math differs from the reference at %lld", ir_dtype_name(dts[k]),
                  (long long)first);
        /* the approximations are not libm: some element differs, all within a few ulp-ish */
        CHECK(tu_diff(f, r, 0, NULL) > 0);
        CHECK_EQ_INT(tu_diff(f, r, dts[k] == TJ_F32 ? 4e-6 : 1e-14, &first), 0);
        tj_release(r);
        tj_release(e);
        tj_release(f);
        if (ref)
            ref->vt->free(ref);
        if (exact)
            exact->vt->free(exact);
        if (fast)
            fast->vt->free(fast);
        tj_release(x);
        ir_graph_free(g);
    }
    return check_done();
}
