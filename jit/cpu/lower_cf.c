/* lower_cf.c — which COND, WHILE and FOR nodes the CPU backend lowers to one native function
 * (llvm/codegen_cf.c): operands, results and regions (nested ones included) of small values only
 * (at most CF_TINY elements of bool, i32, i64, f32 or f64), no side effect, only the ops the
 * lowering knows. Decided without LLVM: a library without the code generator plans the same. */
#include "jit/cpu/lower_cf.h"

static bool region_ok(const ir_graph *r, int depth);

static bool node_ok(const ir_graph *g, uint32_t id, int depth) {
    const ir_node *n = ir_node_get(g, id);
    const uint32_t *in = ir_inputs(g, n);
    if (ir_node_has_effect(g, n) || (ir_ops[n->op].flags & IR_F_RAND))
        return false;
    if (is_cf(n->op)) {
        if (depth >= CF_MAX_DEPTH)
            return false;
        for (uint32_t k = 0; k < n->n_in; k++)
            if (!tiny(ir_node_get(g, in[k])))
                return false;
        if (n->op == IR_OP_COND && (n->n_in < 1 || !one(ir_node_get(g, in[0]))))
            return false;
        if (n->op == IR_OP_FOR)
            for (int k = 0; k < 3; k++)
                if (n->n_in < 3 || ir_node_get(g, in[k])->dtype != TJ_I64 ||
                    !one(ir_node_get(g, in[k])))
                    return false;
        uint32_t nr = ir_cf_n_results(g, n);
        for (uint32_t k = 0; k < nr; k++) {
            ir_node d;
            if (ir_cf_result(g, n, k, &d) != TJ_OK || !tiny(&d))
                return false;
        }
        for (int k = 0; k < 2; k++) {
            const ir_graph *r = n->a.sub[k] ? ir_region(g, n, k) : NULL;
            if ((k == 0 || n->op != IR_OP_FOR) && !r)
                return false;
            if (r && !region_ok(r, depth + 1))
                return false;
        }
        if (n->op == IR_OP_WHILE) {
            const ir_graph *c = ir_region(g, n, 0);
            if (c->n_outputs != 1 || !one(ir_node_get(c, c->outputs[0])))
                return false;
        }
        return true;
    }
    if (!tiny(n))
        return false;
    switch (n->op) {
    case IR_OP_PARAM:
    case IR_OP_GET:
        return true;
    case IR_OP_CONST: {
        const ir_blob *b = ir_blob_get(g, n->a.blob);
        return b && b->size == (size_t)count(n) * ir_dtype_size(n->dtype);
    }
    default:
        break;
    }
    for (uint32_t k = 0; k < n->n_in; k++)
        if (!tiny(ir_node_get(g, in[k])))
            return false;
    if (n->n_in == 1 && is_reduce(n, ir_node_get(g, in[0]))) {
        for (uint32_t k = 0; k < n->a.n_list; k++)
            if (n->a.list[k] < 0 || n->a.list[k] >= ir_node_get(g, in[0])->rank)
                return false;
        return true;
    }
    if (n->n_in == 1 && is_view(n->op))
        return ir_node_get(g, in[0])->dtype == n->dtype;
    return int_division(g, n) || jit_cpu_ew_supported(g, id);
}

static bool region_ok(const ir_graph *r, int depth) {
    for (uint32_t j = 0; j < r->n_nodes; j++)
        if (!node_ok(r, j, depth))
            return false;
    for (uint32_t k = 0; k < r->n_outputs; k++)
        if (!tiny(ir_node_get(r, r->outputs[k])))
            return false;
    return r->n_effects == 0;
}

bool jit_cpu_cf_supported(const ir_graph *g, uint32_t id) {
    const ir_node *n = ir_node_get(g, id);
    return is_cf(n->op) && node_ok(g, id, 0);
}
