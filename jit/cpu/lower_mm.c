/* lower_mm.c — the geometry of the CPU backend's matrix products and softmaxes (llvm/codegen_mm.c,
 * codegen_softmax.c): which it generates and their work units, decided without LLVM. */
#include <string.h>

#include "jit/cpu/lower.h"

bool jit_cpu_mm_small(const rt_mm *s) {
    return s->m <= 64 && s->k <= 64 && s->n <= 64;
}

/* Units of the generated product of matmul node id: rows of the output (batches x m). */
tj_status jit_cpu_mm_units(const ir_graph *g, uint32_t id, rt_units *plan) {
    rt_mm s;
    if (!rt_mm_of(g, id, &s))
        return ir_errorf(TJ_ERR_UNSUPPORTED, "cpu jit: matmul %%%u: no generated lowering", id);
    plan->n_units = s.n == 0 ? 0 : s.batches * s.m;
    plan->unit_len = s.n * (s.k > 0 ? s.k : 1);
    return TJ_OK;
}

bool jit_cpu_softmax_supported(const ir_graph *g, uint32_t id) {
    const ir_node *n = ir_node_get(g, id);
    if ((n->op != IR_OP_SOFTMAX && n->op != IR_OP_LOG_SOFTMAX) || n->n_in != 1)
        return false;
    const ir_node *x = ir_node_get(g, ir_inputs(g, n)[0]);
    return ir_dtype_is_float(n->dtype) && x->dtype == n->dtype && x->rank >= 1 &&
           n->a.i[0] == x->rank - 1 && ir_numel(x->rank, x->dims) >= 0;
}

/* Units of softmax node id: rows of its last axis. */
tj_status jit_cpu_softmax_units(const ir_graph *g, uint32_t id, rt_units *plan) {
    if (!jit_cpu_softmax_supported(g, id))
        return ir_errorf(TJ_ERR_UNSUPPORTED, "cpu jit: softmax %%%u not generated", id);
    const ir_node *x = ir_node_get(g, ir_inputs(g, ir_node_get(g, id))[0]);
    int64_t len = x->dims[x->rank - 1], numel = ir_numel(x->rank, x->dims);
    plan->n_units = len ? numel / len : 0;
    plan->unit_len = len ? len : 1;
    return TJ_OK;
}
