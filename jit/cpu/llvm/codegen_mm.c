/* codegen_mm.c — generated matrix products: the small ones (every dim <= 64, chained by
 * codegen_chain.c so that power(x, 100) is one native function), every integer one, and large
 * float ones when OpenBLAS is absent. One unit of work is one output row: its n outputs are held
 * in vector registers (<W x acc>, W <= 64) while p runs over k, each step adding a[i,p] times a
 * row segment of b, so loads are contiguous and shapes are constants. Semantics are the reference
 * kernel's (runtime/kernels/matmul.c): integers wrap (a sum in the dtype's width equals the
 * uint64 sum truncated); floats accumulate in their own dtype in p order, a multiply and an add per
 * step with no_contract (bit-identical), else one FMA per step. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jit/cpu/llvm/codegen.h"

typedef jit_cpu_em em;

#define c64 jit_cpu_c64
typedef jit_cpu_loop loop;
#define loop_begin jit_cpu_loop_begin
#define loop_end jit_cpu_loop_end

/* One segment of W outputs of row `arow` (element offset of a's row) starting at column j0. */
static void emit_segment(em *e, LLVMValueRef fn, const rt_mm *s, LLVMValueRef A, LLVMValueRef B,
                         LLVMValueRef O, LLVMValueRef arow, LLVMValueRef bbase, LLVMValueRef orow,
                         LLVMValueRef j0, unsigned W, bool strict) {
    LLVMBuilderRef b = e->b;
    bool fl = ir_dtype_is_float(s->dt);
    LLVMTypeRef et = jit_cpu_reg_ty(e, s->dt);
    LLVMTypeRef vt = LLVMVectorType(et, W); /* accumulators: the dtype itself, as the reference */
    unsigned align = (unsigned)ir_dtype_size(s->dt);
    LLVMValueRef acc0 = LLVMConstNull(vt), acc = acc0;
    if (s->k > 0) {
        LLVMBasicBlockRef pre = LLVMGetInsertBlock(b);
        loop l = loop_begin(e, fn, c64(e, 0));
        LLVMValueRef phi = LLVMBuildPhi(b, vt, "acc");
        LLVMAddIncoming(phi, &acc0, &pre, 1);
        LLVMValueRef ai = LLVMBuildNSWAdd(b, arow, l.i, "");
        LLVMValueRef av = LLVMBuildLoad2(b, et, LLVMBuildInBoundsGEP2(b, et, A, &ai, 1, ""), "");
        LLVMValueRef bi = LLVMBuildNSWAdd(
            b, LLVMBuildNSWAdd(b, bbase, LLVMBuildNSWMul(b, l.i, c64(e, s->n), ""), ""), j0, "");
        LLVMValueRef bv = LLVMBuildLoad2(b, vt, LLVMBuildInBoundsGEP2(b, et, B, &bi, 1, ""), "");
        LLVMSetAlignment(bv, align);
        LLVMValueRef sp = LLVMBuildInsertElement(b, LLVMGetUndef(vt), av, c64(e, 0), "");
        LLVMValueRef zmask = LLVMConstNull(LLVMVectorType(e->i32, W));
        sp = LLVMBuildShuffleVector(b, sp, LLVMGetUndef(vt), zmask, "");
        LLVMValueRef nacc;
        if (fl) {
            LLVMValueRef pr = LLVMBuildFMul(b, sp, bv, "");
            nacc = LLVMBuildFAdd(b, phi, pr, "");
            if (e->contract && !strict) {
                LLVMSetFastMathFlags(pr, LLVMFastMathAllowContract);
                LLVMSetFastMathFlags(nacc, LLVMFastMathAllowContract);
            }
        } else {
            nacc = LLVMBuildAdd(b, phi, LLVMBuildMul(b, sp, bv, ""), "");
        }
        LLVMBasicBlockRef latch = LLVMGetInsertBlock(b);
        loop_end(e, fn, &l, c64(e, s->k));
        LLVMAddIncoming(phi, &nacc, &latch, 1);
        acc = nacc; /* the value leaving the loop is the last update */
    }
    LLVMValueRef oi = LLVMBuildNSWAdd(b, orow, j0, "");
    LLVMValueRef st = LLVMBuildStore(b, acc, LLVMBuildInBoundsGEP2(b, et, O, &oi, 1, ""));
    LLVMSetAlignment(st, align);
}

tj_status jit_cpu_mm_emit(LLVMModuleRef mod, const ir_graph *g, uint32_t id, const char *name,
                          const jit_cpu_opts *o, rt_units *plan) {
    rt_mm s;
    if (!rt_mm_of(g, id, &s))
        return ir_errorf(TJ_ERR_UNSUPPORTED, "cpu jit: matmul %%%u: no generated lowering", id);
    bool strict = o->no_contract;
    em E;
    jit_cpu_em_init(&E, mod, !o->no_contract, o->exact_math);
    em *e = &E;
    LLVMBuilderRef b = e->b;
    LLVMValueRef p[3];
    LLVMValueRef fn = jit_cpu_kernel_begin(e, name, 3, p);
    if (jit_cpu_mm_units(g, id, plan))
        return ir_last_code();
    LLVMValueRef begin = LLVMGetParam(fn, 1), end = LLVMGetParam(fn, 2);
    LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(e->c, fn, "rows");
    LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(e->c, fn, "done");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, begin, end, ""), body, done);
    LLVMPositionBuilderAtEnd(b, body);
    loop u = loop_begin(e, fn, begin);
    /* row u: batch bi = u / m, row i = u % m; batch offsets from the broadcast strides. One
     * batch: row u itself, so the code never names m (plan_decide.c keys it without m: a new
     * number of rows runs it) */
    bool one = s.batches == 1;
    LLVMValueRef bi = one || s.m == 1 ? u.i : LLVMBuildUDiv(b, u.i, c64(e, s.m), "");
    LLVMValueRef i = one ? u.i : s.m == 1 ? c64(e, 0) : LLVMBuildURem(b, u.i, c64(e, s.m), "");
    LLVMValueRef oa = c64(e, 0), ob = c64(e, 0), rem = bi;
    for (int d = s.rank - 1; d >= 0 && !one; d--) {
        if (s.dims[d] == 1)
            continue;
        LLVMValueRef idx = d > 0 ? LLVMBuildURem(b, rem, c64(e, s.dims[d]), "") : rem;
        if (d > 0)
            rem = LLVMBuildUDiv(b, rem, c64(e, s.dims[d]), "");
        if (s.sa[d])
            oa = LLVMBuildNSWAdd(b, oa, LLVMBuildNSWMul(b, idx, c64(e, s.sa[d]), ""), "");
        if (s.sb[d])
            ob = LLVMBuildNSWAdd(b, ob, LLVMBuildNSWMul(b, idx, c64(e, s.sb[d]), ""), "");
    }
    LLVMValueRef arow = LLVMBuildNSWAdd(b, LLVMBuildNSWMul(b, oa, c64(e, s.m * s.k), ""),
                                        LLVMBuildNSWMul(b, i, c64(e, s.k), ""), "");
    LLVMValueRef bbase = LLVMBuildNSWMul(b, ob, c64(e, s.k * s.n), "");
    LLVMValueRef orow = LLVMBuildNSWMul(b, u.i, c64(e, s.n), "");
    /* segments: full ones of W columns in a loop, then one tail of n % W */
    unsigned W = ir_dtype_size(s.dt) == 8 || (s.dt == TJ_F32 && strict) ? 32 : 64;
    int64_t full = s.n / W, tail = s.n % W;
    if (full == 1) {
        emit_segment(e, fn, &s, p[0], p[1], p[2], arow, bbase, orow, c64(e, 0), W, strict);
    } else if (full > 1) {
        loop jl = loop_begin(e, fn, c64(e, 0));
        LLVMValueRef j0 = LLVMBuildNSWMul(b, jl.i, c64(e, W), "");
        emit_segment(e, fn, &s, p[0], p[1], p[2], arow, bbase, orow, j0, W, strict);
        loop_end(e, fn, &jl, c64(e, full));
    }
    if (tail)
        emit_segment(e, fn, &s, p[0], p[1], p[2], arow, bbase, orow, c64(e, full * W),
                     (unsigned)tail, strict);
    loop_end(e, fn, &u, end);
    jit_cpu_kernel_end(e, done);
    return TJ_OK;
}
