/* emit.c — LLVM emission helpers shared by the CPU codegen files (elementwise, matmul,
 * reductions, softmax, views): the emission state, the kernel entry (void k(void **bufs,
 * i64 begin, i64 end) with the buffer pointers loaded) and exit, counted loops
 * for (i = from; i < to; i++), entered only when from < to, with the index as a phi, intrinsic
 * calls, fast-math flags and element loads. */
#include <string.h>

#include "jit/cpu/llvm/codegen.h"

#include <llvm-c/DebugInfo.h> /* LLVMTemporaryMDNode: a self-referential loop id */

void jit_cpu_em_init(jit_cpu_em *e, LLVMModuleRef m, bool contract, bool exact_math) {
    memset(e, 0, sizeof *e);
    e->c = LLVMGetModuleContext(m);
    e->m = m;
    e->contract = contract;
    e->exact_math = exact_math;
    e->i1 = LLVMInt1TypeInContext(e->c);
    e->i8 = LLVMInt8TypeInContext(e->c);
    e->i16 = LLVMInt16TypeInContext(e->c);
    e->i32 = LLVMInt32TypeInContext(e->c);
    e->i64 = LLVMInt64TypeInContext(e->c);
    e->f32 = LLVMFloatTypeInContext(e->c);
    e->f64 = LLVMDoubleTypeInContext(e->c);
    e->ptr = LLVMPointerTypeInContext(e->c, 0);
    e->b = LLVMCreateBuilderInContext(e->c);
}

LLVMValueRef jit_cpu_kernel_begin(jit_cpu_em *e, const char *name, uint32_t n_bufs,
                                  LLVMValueRef *ptrs) {
    LLVMTypeRef kp[3] = {e->ptr, e->i64, e->i64};
    LLVMTypeRef k_ty = LLVMFunctionType(LLVMVoidTypeInContext(e->c), kp, 3, 0);
    LLVMValueRef f = LLVMAddFunction(e->m, name, k_ty);
    unsigned k_nounwind = LLVMGetEnumAttributeKindForName("nounwind", 8);
    LLVMAddAttributeAtIndex(f, LLVMAttributeFunctionIndex,
                            LLVMCreateEnumAttribute(e->c, k_nounwind, 0));
    LLVMPositionBuilderAtEnd(e->b, LLVMAppendBasicBlockInContext(e->c, f, "entry"));
    for (uint32_t i = 0; i < n_bufs; i++) {
        LLVMValueRef idx = LLVMConstInt(e->i64, i, 0);
        LLVMValueRef slot = LLVMBuildInBoundsGEP2(e->b, e->ptr, LLVMGetParam(f, 0), &idx, 1, "");
        ptrs[i] = LLVMBuildLoad2(e->b, e->ptr, slot, "");
    }
    return f;
}

/* Closes a kernel begun with jit_cpu_kernel_begin: branches to `done`, returns, frees the builder.
 */
void jit_cpu_kernel_end(jit_cpu_em *e, LLVMBasicBlockRef done) {
    LLVMBuildBr(e->b, done);
    LLVMPositionBuilderAtEnd(e->b, done);
    LLVMBuildRetVoid(e->b);
    LLVMDisposeBuilder(e->b);
}

LLVMValueRef jit_cpu_intrinsic(jit_cpu_em *e, const char *name, LLVMTypeRef *ov, unsigned n_ov,
                               LLVMValueRef *args, unsigned n) {
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    LLVMValueRef f = LLVMGetIntrinsicDeclaration(e->m, id, ov, n_ov);
    return LLVMBuildCall2(e->b, LLVMIntrinsicGetType(e->c, id, ov, n_ov), f, args, n, "");
}

LLVMValueRef jit_cpu_libm(jit_cpu_em *e, LLVMBuilderRef b, const char *name, LLVMTypeRef t,
                          LLVMValueRef *args, unsigned n) {
    LLVMTypeRef params[2] = {t, t};
    LLVMTypeRef ft = LLVMFunctionType(t, params, n, 0);
    LLVMValueRef f = LLVMGetNamedFunction(e->m, name);
    if (!f)
        f = LLVMAddFunction(e->m, name, ft);
    LLVMValueRef c = LLVMBuildCall2(b, ft, f, args, n, "");
    unsigned kind = LLVMGetEnumAttributeKindForName("nobuiltin", 9);
    LLVMAddCallSiteAttribute(c, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(e->c, kind, 0));
    return c;
}

LLVMValueRef jit_cpu_intrin2(jit_cpu_em *e, const char *name, LLVMValueRef x, LLVMValueRef y) {
    LLVMTypeRef t = LLVMTypeOf(x);
    LLVMValueRef a[2] = {x, y};
    return jit_cpu_intrinsic(e, name, &t, 1, a, 2);
}

LLVMValueRef jit_cpu_fast(LLVMValueRef v, LLVMFastMathFlags f) {
    if (f && LLVMIsAInstruction(v) && LLVMCanValueUseFastMathFlags(v))
        LLVMSetFastMathFlags(v, f);
    return v;
}

LLVMValueRef jit_cpu_load_elem(jit_cpu_em *e, LLVMValueRef base, int dt, LLVMValueRef off) {
    LLVMTypeRef mt = dt == TJ_BOOL ? e->i8 : jit_cpu_reg_ty(e, dt);
    LLVMValueRef v =
        LLVMBuildLoad2(e->b, mt, LLVMBuildInBoundsGEP2(e->b, mt, base, &off, 1, ""), "");
    return dt == TJ_BOOL ? LLVMBuildICmp(e->b, LLVMIntNE, v, LLVMConstInt(e->i8, 0, 0), "") : v;
}

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
    l->latch_br = LLVMBuildCondBr(e->b, LLVMBuildICmp(e->b, LLVMIntSLT, nx, to, ""), l->head, out);
    LLVMAddIncoming(l->i, &nx, &cur, 1);
    LLVMPositionBuilderAtEnd(e->b, out);
    return cur; /* the latch, for phis carried around the loop */
}

void jit_cpu_loop_no_unroll(jit_cpu_em *e, const jit_cpu_loop *l) {
    jit_cpu_branch_no_unroll(e->c, l->latch_br);
}

void jit_cpu_branch_no_unroll(LLVMContextRef c, LLVMValueRef latch_br) {
    /* !llvm.loop !0, !0 = distinct !{!0, !1}, !1 = !{!"llvm.loop.unroll.disable"} */
    LLVMMetadataRef opt = LLVMMDStringInContext2(c, "llvm.loop.unroll.disable", 24);
    LLVMMetadataRef prop = LLVMMDNodeInContext2(c, &opt, 1);
    LLVMMetadataRef tmp = LLVMTemporaryMDNode(c, NULL, 0);
    LLVMMetadataRef ops[2] = {tmp, prop};
    LLVMMetadataRef self = LLVMMDNodeInContext2(c, ops, 2);
    LLVMMetadataReplaceAllUsesWith(tmp, self);
    LLVMSetMetadata(latch_br, LLVMGetMDKindIDInContext(c, "llvm.loop", 9),
                    LLVMMetadataAsValue(c, self));
}
