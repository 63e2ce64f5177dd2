/* lower_red.c — which reductions the CPU backend generates (llvm/codegen_red.c) and their
 * geometry and work units, decided without LLVM. */
#include <string.h>

#include "jit/cpu/lower.h"

bool jit_cpu_red_geometry(const ir_graph *g, const ir_node *n, int64_t *outer, int64_t *len,
                          int64_t *inner) {
    return rt_red_geometry(g, n, outer, len, inner);
}

bool jit_cpu_red_supported(const ir_graph *g, uint32_t id) {
    const ir_node *n = ir_node_get(g, id);
    if (n->n_in != 1 || n->op < IR_OP_SUM || n->op > IR_OP_PROD)
        return false;
    int dt = n->dtype;
    if (!ir_dtype_is_numeric(dt) || ir_node_get(g, ir_inputs(g, n)[0])->dtype != dt)
        return false;
    int64_t outer, len, inner;
    if (!jit_cpu_red_geometry(g, n, &outer, &len, &inner))
        return false;
    if (outer * inner == 0)
        return false; /* an empty result: nothing to generate (the block count would be 0) */
    bool no_identity =
        n->op == IR_OP_MAX || n->op == IR_OP_MIN || (n->op == IR_OP_MEAN && ir_dtype_is_int(dt));
    return !(len == 0 && outer * inner > 0 && no_identity); /* the reference reports that error */
}

tj_status jit_cpu_red_units(const ir_graph *g, const pass_group *gr, rt_units *plan) {
    const ir_node *root = ir_node_get(g, gr->nodes[gr->n_nodes - 1]);
    int64_t outer, len, inner;
    if (!gr->reduce || !jit_cpu_red_geometry(g, root, &outer, &len, &inner))
        return ir_errorf(TJ_ERR_UNSUPPORTED, "cpu jit: %s: reduction not generated",
                         ir_ops[root->op].name);
    *plan = rt_red_units(outer, len, inner);
    return TJ_OK;
}
