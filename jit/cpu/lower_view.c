/* lower_view.c — which strided views (transpose, slice, broadcast_to) the CPU backend generates
 * (llvm/codegen_view.c) and their work units, decided without LLVM. */
#include <string.h>

#include "jit/cpu/lower.h"
#include "runtime/kernels/kernels.h"

/* The view of node id, or false if it is not one this backend generates. */
static bool view_of(const ir_graph *g, uint32_t id, int64_t *base, int64_t *s) {
    const ir_node *n = ir_node_get(g, id);
    if ((n->op != IR_OP_TRANSPOSE && n->op != IR_OP_SLICE && n->op != IR_OP_BROADCAST_TO) ||
        n->n_in != 1 || n->dtype == TJ_STRING || n->dtype == IR_VOID)
        return false;
    const ir_node *x = ir_node_get(g, ir_inputs(g, n)[0]);
    if (x->dtype != n->dtype || ir_numel(x->rank, x->dims) < 0 || ir_numel(n->rank, n->dims) < 0)
        return false;
    tj_status st = rt_k_view(n, x->rank, x->dims, n->rank, n->dims, base, s);
    if (st)
        ir_clear_error(); /* not generated: the reference kernel reports it at run time */
    return st == TJ_OK;
}

bool jit_cpu_view_supported(const ir_graph *g, uint32_t id) {
    int64_t base, s[IR_MAX_RANK];
    return view_of(g, id, &base, s);
}

/* Units of view node id: output rows; a gather along the last axis (transposes) takes blocks of
 * JIT_CPU_VIEW_BLOCK rows. *blocked says which. */
tj_status jit_cpu_view_plan(const ir_graph *g, uint32_t id, rt_units *plan, bool *blocked,
                            int64_t *base, int64_t *s) {
    if (!view_of(g, id, base, s))
        return ir_errorf(TJ_ERR_UNSUPPORTED, "cpu jit: %%%u is not a generated view", id);
    const ir_node *n = ir_node_get(g, id);
    int rank = n->rank;
    int64_t numel = ir_numel(rank, n->dims), len = rank ? n->dims[rank - 1] : 1;
    int64_t last = rank ? s[rank - 1] : 0;
    plan->n_units = len ? numel / len : 0;
    plan->unit_len = len ? len : 1;
    int64_t R = rank >= 2 ? n->dims[rank - 2] : 1, T = JIT_CPU_VIEW_BLOCK;
    *blocked = rank >= 2 && last != 1 && last != 0 && R > 1 && len > 1;
    int64_t nb = (R + T - 1) / T, lead = *blocked && len && R ? numel / (len * R) : 0;
    if (*blocked) {
        plan->n_units = lead * nb;
        plan->unit_len = T * len;
    }
    return TJ_OK;
}

tj_status jit_cpu_view_units(const ir_graph *g, uint32_t id, rt_units *plan) {
    int64_t base, s[IR_MAX_RANK];
    bool blocked;
    return jit_cpu_view_plan(g, id, plan, &blocked, &base, s);
}
