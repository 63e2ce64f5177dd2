/* loops.c — counted loops in LLVM IR for the CPU kernels (matmul, reductions, softmax):
 * for (i = from; i < to; i++), entered only when from < to (callers guarantee it), with the index
 * as a phi. Shared by the codegen files so each emits loops the same way. */
#ifdef TJ_HAVE_LLVM
#include "jit/cpu/cpu.h"

LLVMValueRef jit_cpu_c64(jit_cpu_em *e, int64_t v) {
    return LLVMConstInt(e->i64, (unsigned long long)v, 1);
}

jit_cpu_loop jit_cpu_loop_begin(jit_cpu_em *e, LLVMValueRef fn, LLVMValueRef from) {
    jit_cpu_loop l;
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(e->b);
    l.head = LLVMAppendBasicBlockInContext(e->c, fn, "l");
    LLVMBuildBr(e->b, l.head);
    LLVMPositionBuilderAtEnd(e->b, l.head);
    l.i = LLVMBuildPhi(e->b, e->i64, "");
    LLVMAddIncoming(l.i, &from, &pre, 1);
    return l;
}

LLVMBasicBlockRef jit_cpu_loop_end(jit_cpu_em *e, LLVMValueRef fn, jit_cpu_loop *l,
                                   LLVMValueRef to) {
    LLVMValueRef nx = LLVMBuildNSWAdd(e->b, l->i, jit_cpu_c64(e, 1), "");
    LLVMBasicBlockRef cur = LLVMGetInsertBlock(e->b);
    LLVMBasicBlockRef out = LLVMAppendBasicBlockInContext(e->c, fn, "x");
    LLVMBuildCondBr(e->b, LLVMBuildICmp(e->b, LLVMIntSLT, nx, to, ""), l->head, out);
    LLVMAddIncoming(l->i, &nx, &cur, 1);
    LLVMPositionBuilderAtEnd(e->b, out);
    return cur; /* the latch, for phis carried around the loop */
}
#endif
