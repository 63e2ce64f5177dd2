/* lower_ew.c — what the CPU backend's elementwise code generator (llvm/ew_ops.c, codegen_ew.c)
 * lowers, op by op and dtype by dtype, and the collapsed loop of a fused group (its layout: the
 * work units a kernel splits into). Decided without LLVM: a library without the code generator
 * plans the same. */
#include <stdlib.h>
#include <string.h>

#include "jit/cpu/lower.h"

static bool is_num(int dt) {
    return ir_dtype_is_numeric(dt);
}

bool jit_cpu_ew_supported(const ir_graph *g, uint32_t id) {
    const ir_node *n = ir_node_get(g, id);
    if (n->op == IR_OP_BROADCAST_TO) { /* an identity the loop's broadcast strides carry out */
        const ir_node *x = n->n_in == 1 ? ir_node_get(g, ir_inputs(g, n)[0]) : NULL;
        if (!x || x->dtype != n->dtype || !(is_num(n->dtype) || n->dtype == TJ_BOOL) ||
            x->rank > n->rank)
            return false;
        for (int d = 0; d < n->rank; d++)
            if (n->dims[d] < 0)
                return false;
        return true;
    }
    if (!(ir_ops[n->op].flags & IR_F_EW) || n->a.sub[0])
        return false;
    for (int d = 0; d < n->rank; d++)
        if (n->dims[d] < 0)
            return false;
    const uint32_t *in = ir_inputs(g, n);
    int t = n->n_in ? ir_node_get(g, in[0])->dtype : -1;
    int r = n->dtype;
    switch (n->op) {
    case IR_OP_NEG:
    case IR_OP_ABS:
    case IR_OP_SIGN:
    case IR_OP_RELU:
    case IR_OP_FLOOR:
    case IR_OP_CEIL:
    case IR_OP_ROUND:
        return is_num(t) && r == t;
    case IR_OP_SQRT:
    case IR_OP_RSQRT:
    case IR_OP_EXP:
    case IR_OP_LOG:
    case IR_OP_TANH:
    case IR_OP_SIGMOID:
    case IR_OP_SIN:
    case IR_OP_COS:
    case IR_OP_ATAN:
    case IR_OP_ASIN:
    case IR_OP_ACOS:
    case IR_OP_ERF:
        return jit_cpu_flt(t) && r == t;
    case IR_OP_LOGICAL_NOT:
        return t == TJ_BOOL && r == TJ_BOOL;
    case IR_OP_ISNAN:
    case IR_OP_ISINF:
        return (is_num(t) || t == TJ_BOOL) && r == TJ_BOOL;
    case IR_OP_CAST:
        return (is_num(t) || t == TJ_BOOL) && (is_num(r) || r == TJ_BOOL);
    case IR_OP_WHERE: {
        int a = ir_node_get(g, in[1])->dtype, b = ir_node_get(g, in[2])->dtype;
        return t == TJ_BOOL && a == b && a == r && (is_num(a) || a == TJ_BOOL);
    }
    default:
        break;
    }
    if (n->n_in != 2 || ir_node_get(g, in[1])->dtype != t)
        return false;
    switch (n->op) {
    case IR_OP_ADD:
    case IR_OP_SUB:
    case IR_OP_MUL:
        return is_num(t) && r == t;
    case IR_OP_DIV:
    case IR_OP_FLOORDIV:
    case IR_OP_MOD:
    case IR_OP_POW:
        return jit_cpu_flt(t) && r == t;
    case IR_OP_MAXIMUM:
    case IR_OP_MINIMUM:
        return (is_num(t) || t == TJ_BOOL) && r == t;
    case IR_OP_EQ:
    case IR_OP_NE:
    case IR_OP_LT:
    case IR_OP_LE:
    case IR_OP_GT:
    case IR_OP_GE:
        return (is_num(t) || t == TJ_BOOL) && r == TJ_BOOL;
    case IR_OP_LOGICAL_AND:
    case IR_OP_LOGICAL_OR:
        return t == TJ_BOOL && r == TJ_BOOL;
    case IR_OP_SHIFT_LEFT:
    case IR_OP_SHIFT_RIGHT:
        return ir_dtype_is_int(t) && r == t;
    default:
        return false;
    }
}

tj_status jit_cpu_ew_layout(const ir_graph *g, const pass_group *gr, rt_ew_layout *L) {
    return rt_ew_layout_of(g, gr->inputs, gr->n_inputs, gr->rank, gr->dims, L);
}

bool jit_cpu_const_immediate(const ir_graph *g, const ir_node *n) {
    const ir_blob *bl = n->op == IR_OP_CONST ? ir_blob_get(g, n->a.blob) : NULL;
    return bl && ir_numel(n->rank, n->dims) == 1 && bl->size == ir_dtype_size(n->dtype) &&
           (ir_dtype_is_int(n->dtype) || n->dtype == TJ_BOOL);
}

bool jit_cpu_ew_flat(const ir_graph *g, const pass_group *gr) {
    rt_ew_layout L = {0};
    bool flat = jit_cpu_ew_layout(g, gr, &L) == TJ_OK && L.flat;
    rt_ew_layout_free(&L);
    return flat;
}

/* The work units of group gr's kernel: elements of a flat loop, else rows of the collapsed loop
 * shape (the kernel's own split, without LLVM: images and cache hits need it too). */
tj_status jit_cpu_ew_units(const ir_graph *g, const pass_group *gr, rt_units *plan) {
    rt_ew_layout L = {0};
    tj_status st = jit_cpu_ew_layout(g, gr, &L);
    if (!st) {
        int64_t numel = 1;
        for (int d = 0; d < L.rank; d++)
            numel *= L.dims[d];
        int64_t len = L.flat ? numel : L.dims[L.rank - 1];
        plan->unit_len = L.flat ? 1 : len;
        plan->n_units = numel == 0 ? 0 : L.flat ? numel : numel / len;
    }
    rt_ew_layout_free(&L);
    return st;
}
