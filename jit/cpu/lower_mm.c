/* lower_mm.c — the geometry of the CPU backend's matrix products and softmaxes (llvm/codegen_mm.c,
 * codegen_softmax.c): which it generates and their work units, decided without LLVM. */
#include <string.h>

#include "jit/cpu/lower.h"

bool jit_cpu_mm_shape(const ir_graph *g, uint32_t id, rt_mm *s) {
    const ir_node *n = ir_node_get(g, id);
    if (n->op != IR_OP_MATMUL || n->n_in != 2)
        return false;
    const uint32_t *in = ir_inputs(g, n);
    const ir_node *a = ir_node_get(g, in[0]), *b = ir_node_get(g, in[1]);
    int dt = n->dtype;
    if (a->dtype != dt || b->dtype != dt || !(ir_dtype_is_float(dt) || ir_dtype_is_index(dt)) ||
        a->rank < 1 || b->rank < 1 || ir_numel(n->rank, n->dims) < 0 ||
        ir_numel(a->rank, a->dims) < 0 || ir_numel(b->rank, b->dims) < 0)
        return false;
    memset(s, 0, sizeof *s);
    s->dt = dt;
    s->m = a->rank >= 2 ? a->dims[a->rank - 2] : 1;
    s->k = a->dims[a->rank - 1];
    s->n = b->rank >= 2 ? b->dims[b->rank - 1] : 1;
    if ((b->rank >= 2 ? b->dims[b->rank - 2] : b->dims[0]) != s->k)
        return false;
    int ra = a->rank >= 2 ? a->rank - 2 : 0, rb = b->rank >= 2 ? b->rank - 2 : 0;
    s->rank = ra > rb ? ra : rb;
    s->batches = 1;
    for (int d = 0; d < s->rank; d++) {
        int da = d - (s->rank - ra), db = d - (s->rank - rb);
        int64_t xa = da >= 0 ? a->dims[da] : 1, xb = db >= 0 ? b->dims[db] : 1;
        if (xa != xb && xa != 1 && xb != 1)
            return false;
        s->dims[d] = xa == 1 ? xb : xa;
        s->batches *= s->dims[d];
    }
    int64_t ma = 1, mb = 1;
    for (int d = s->rank - 1; d >= 0; d--) {
        int da = d - (s->rank - ra), db = d - (s->rank - rb);
        int64_t xa = da >= 0 ? a->dims[da] : 1, xb = db >= 0 ? b->dims[db] : 1;
        s->sa[d] = xa == 1 ? 0 : ma;
        s->sb[d] = xb == 1 ? 0 : mb;
        ma *= xa;
        mb *= xb;
    }
    return s->batches * s->m * s->n == ir_numel(n->rank, n->dims);
}

bool jit_cpu_mm_small(const rt_mm *s) {
    return s->m <= 64 && s->k <= 64 && s->n <= 64;
}

/* Units of the generated product of matmul node id: rows of the output (batches x m). */
tj_status jit_cpu_mm_units(const ir_graph *g, uint32_t id, rt_units *plan) {
    rt_mm s;
    if (!jit_cpu_mm_shape(g, id, &s))
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
