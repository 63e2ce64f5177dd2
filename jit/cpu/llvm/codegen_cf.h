/* codegen_cf.h — private to the native control-flow lowering: codegen_cf.c (regions, branches,
 * loops) and codegen_cf_elems.c (the element-level pieces: integer division, truth, constants,
 * broadcast index maps, reductions and views over one-LLVM-value-per-element tensors). */
#ifndef TJ_JIT_CPU_CODEGEN_CF_H
#define TJ_JIT_CPU_CODEGEN_CF_H

#include "jit/cpu/llvm/codegen.h"
#include "jit/cpu/lower_cf.h"

typedef struct cfe {
    jit_cpu_em e;
    LLVMValueRef fn;
    LLVMBasicBlockRef bail; /* returns 1: the executor redoes the node */
} cfe;

/* A value: one LLVM value per element (n of them). */
typedef struct val {
    LLVMValueRef *e;
    uint32_t n;
} val;

static inline LLVMBasicBlockRef jit_cf_block(cfe *c, const char *name) {
    return LLVMAppendBasicBlockInContext(c->e.c, c->fn, name);
}

/* The element of an input of dims (ir, idims) that output element o of (orank, odims) reads
 * under NumPy broadcasting. */
int64_t jit_cf_bcast_index(int orank, const int64_t *odims, int ir, const int64_t *idims,
                           int64_t o);
/* x DIV / FLOORDIV / MOD y for i32/i64 as the reference kernels; y == 0 branches to c->bail. */
LLVMValueRef jit_cf_int_division(cfe *c, const ir_node *n, LLVMValueRef x, LLVMValueRef y);
/* v (of dtype dt) as an i1: nonzero is true. */
LLVMValueRef jit_cf_truth(cfe *c, LLVMValueRef v, int dt);
/* Element k of CONST node n as an immediate. */
LLVMValueRef jit_cf_const_elem(cfe *c, const ir_graph *g, const ir_node *n, int64_t k);
/* A reduction of x's elements (xv) into out, in the reference kernel's order. */
void jit_cf_reduce(cfe *c, const ir_node *n, const ir_node *x, const val *xv, val *out);
/* A view op: the reshape family passes elements through, transpose/broadcast/slice map them. */
tj_status jit_cf_view(const ir_node *n, const ir_node *x, const val *xv, val *out);

#endif /* TJ_JIT_CPU_CODEGEN_CF_H */
