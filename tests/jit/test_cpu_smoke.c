/* test_cpu_smoke.c — end-to-end check of the CPU JIT on y = (x*2+1)*x - 3 (f32): the partition
 * is one fused group, the compiled program matches the interpreter bit for bit with contraction
 * off, and within 1 ulp-ish with it on; compile timings are printed. Skips without LLVM. */
#include "check.h"
#include "test_cpu_util.h"

static ir_graph *poly(int64_t n) {
    ir_graph *g = ir_graph_new("poly");
    uint32_t x = tu_param(g, 0, TJ_F32, 1, &n);
    uint32_t y = tu_bin(g, IR_OP_MUL, x, tu_const_f64(g, TJ_F32, 2));
    y = tu_bin(g, IR_OP_ADD, y, tu_const_f64(g, TJ_F32, 1));
    y = tu_bin(g, IR_OP_MUL, y, x);
    y = tu_bin(g, IR_OP_SUB, y, tu_const_f64(g, TJ_F32, 3));
    ir_add_output(g, y);
    return g;
}

int main(void) {
    if (!jit_cpu_available()) {
        printf("skip: %s\n", ir_last_error());
        return 77;
    }
    printf("target: %s\n", jit_cpu_target_id());
    int64_t sizes[] = {0, 1, 7, 33, 1000, 100003};
    for (int k = 0; k < 6; k++) {
        int64_t n = sizes[k];
        ir_graph *g = poly(n);
        CHECK(g != NULL);
        for (int contract = 0; contract < 2; contract++) {
            jit_cpu_opts o = {.no_contract = !contract};
            rt_program *p = jit_cpu_compile_opts(g, &o);
            CHECK_MSG(p != NULL, "%s", ir_last_error());
            if (!p)
                continue;
            jit_cpu_stats s = jit_cpu_last_stats();
            printf("n=%lld contract=%d: kernels %u build %.2f ms O3 %.2f ms emit %.2f ms link "
                   "%.2f ms obj %zu B\n",
                   (long long)n, contract, s.n_kernels, s.build_ms, s.opt_ms, s.emit_ms, s.link_ms,
                   s.obj_bytes);
            const pass_partition *part = jit_cpu_program_partition(p);
            char *str = pass_partition_str(part);
            if (k == 0 && contract == 0)
                printf("%s", str);
            free(str);
            CHECK_EQ_INT(s.n_kernels, 1);
            rt_program *ref = rt_interp_new(g);
            tj_tensor *x = tu_random(TJ_F32, 1, &n, 1);
            tj_tensor *a = NULL, *b = NULL;
            CHECK_EQ_INT(tu_run(p, &x, 1, &a), TJ_OK);
            CHECK_EQ_INT(tu_run(ref, &x, 1, &b), TJ_OK);
            int64_t first = -1;
            int64_t bad = tu_diff(a, b, contract ? 1e-6 : 0, &first);
            CHECK_MSG(bad == 0, "n=%lld: %lld differ, first at %lld: %g vs %g", (long long)n,
                      (long long)bad, (long long)first, first >= 0 ? tu_get(a, first) : 0.0,
                      first >= 0 ? tu_get(b, first) : 0.0);
            tj_release(a);
            tj_release(b);
            tj_release(x);
            ref->vt->free(ref);
            p->vt->free(p);
        }
        ir_graph_free(g);
    }
    return check_done();
}
