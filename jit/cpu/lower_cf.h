/* lower_cf.h — private to native control flow (lower_cf.c decides what is lowered,
 * llvm/codegen_cf.c lowers it): the small predicates both sides share. */
#ifndef TJ_JIT_CPU_LOWER_CF_H
#define TJ_JIT_CPU_LOWER_CF_H

#include <string.h>

#include "jit/cpu/lower.h"

#define CF_MAX_DEPTH 16 /* nesting of regions lowered */
#define CF_TINY 16      /* elements per value */

static inline bool tiny_dt(int dt) {
    return dt == TJ_BOOL || dt == TJ_I32 || dt == TJ_I64 || dt == TJ_F32 || dt == TJ_F64;
}
static inline int64_t count(const ir_node *n) {
    return ir_numel(n->rank, n->dims);
}
static inline bool tiny(const ir_node *n) {
    int64_t c = count(n);
    return tiny_dt(n->dtype) && c >= 1 && c <= CF_TINY;
}
static inline bool one(const ir_node *n) {
    return tiny_dt(n->dtype) && count(n) == 1;
}
static inline bool is_cf(int op) {
    return op == IR_OP_COND || op == IR_OP_WHILE || op == IR_OP_FOR;
}
/* integer DIV / FLOORDIV / MOD: lowered here (a zero divisor hands back), not in ew_ops.c */
static inline bool int_division(const ir_graph *g, const ir_node *n) {
    if ((n->op != IR_OP_DIV && n->op != IR_OP_FLOORDIV && n->op != IR_OP_MOD) || n->n_in != 2 ||
        (n->dtype != TJ_I32 && n->dtype != TJ_I64))
        return false;
    const uint32_t *in = ir_inputs(g, n);
    return ir_node_get(g, in[0])->dtype == n->dtype && ir_node_get(g, in[1])->dtype == n->dtype;
}
static inline bool is_reduce(const ir_node *n, const ir_node *x) {
    return (n->op == IR_OP_SUM || n->op == IR_OP_MEAN || n->op == IR_OP_MAX || n->op == IR_OP_MIN ||
            n->op == IR_OP_PROD) &&
           n->dtype == x->dtype && ir_dtype_is_numeric(x->dtype) && x->dtype != TJ_BOOL;
}
static inline bool is_view(int op) {
    return op == IR_OP_RESHAPE || op == IR_OP_EXPAND_DIMS || op == IR_OP_SQUEEZE ||
           op == IR_OP_TRANSPOSE || op == IR_OP_BROADCAST_TO || op == IR_OP_SLICE;
}

#endif /* TJ_JIT_CPU_LOWER_CF_H */
