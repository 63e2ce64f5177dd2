/* codegen_view.c — generated data movement: TRANSPOSE, SLICE and BROADCAST_TO are strided views
 * of their input (runtime/kernels/shape.c's rt_k_view gives base and strides, checked as the
 * reference kernels check), copied into a fresh output: out[idx] = x[base + sum idx[d] s[d]].
 * A unit is one row of the output's last axis; its start is computed from the unit index with
 * constant divisions, and the row is a loop with a constant stride (contiguous rows, as in
 * slices of whole rows, vectorize as copies). When the last axis gathers (a stride other than 1:
 * transposes), a unit is a block of 16 rows copied column by column instead, so each input
 * cache line read serves 16 outputs and the block's output lines stay in cache. Elements move as
 * integers of their size, so every dtype but string (whose elements own memory) is handled. */
#include <stdlib.h>
#include <string.h>

#include "jit/cpu/llvm/codegen.h"
#include "runtime/kernels/kernels.h"

tj_status jit_cpu_view_emit(LLVMModuleRef m, const ir_graph *g, uint32_t id, const char *name,
                            rt_units *plan) {
    int64_t base, s[IR_MAX_RANK];
    bool blocked;
    tj_status st0 = jit_cpu_view_plan(g, id, plan, &blocked, &base, s);
    if (st0)
        return st0;
    const ir_node *n = ir_node_get(g, id);
    int rank = n->rank;
    int64_t len = rank ? n->dims[rank - 1] : 1;
    int64_t last = rank ? s[rank - 1] : 0;
    /* a gather along the last axis (transposes): blocks of T output rows, walked column by
     * column, so each input line read serves T outputs and the T output lines stay in cache */
    int64_t R = rank >= 2 ? n->dims[rank - 2] : 1, T = JIT_CPU_VIEW_BLOCK;
    int64_t nb = (R + T - 1) / T;
    jit_cpu_em E;
    jit_cpu_em_init(&E, m, false, false);
    jit_cpu_em *e = &E;
    LLVMBuilderRef b = e->b;
    LLVMTypeRef t = LLVMIntTypeInContext(e->c, 8 * (unsigned)ir_dtype_size(n->dtype));
    LLVMValueRef p[2];
    LLVMValueRef fn = jit_cpu_kernel_begin(e, name, 2, p);
    LLVMValueRef tl = blocked ? LLVMBuildAlloca(b, LLVMArrayType2(t, (uint64_t)(T * T)), "tile")
                              : NULL; /* in the entry block: one stack tile per call */
    LLVMValueRef begin = LLVMGetParam(fn, 1), end = LLVMGetParam(fn, 2);
    LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(e->c, fn, "rows");
    LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(e->c, fn, "done");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, begin, end, ""), body, done);
    LLVMPositionBuilderAtEnd(b, body);
    jit_cpu_loop u = jit_cpu_loop_begin(e, fn, begin);
#define K(v) jit_cpu_c64(e, (v))
#define COPY(src, dst)                                                                             \
    LLVMBuildStore(                                                                                \
        b,                                                                                         \
        LLVMBuildLoad2(b, t, LLVMBuildInBoundsGEP2(b, t, p[0], (LLVMValueRef[]){src}, 1, ""), ""), \
        LLVMBuildInBoundsGEP2(b, t, p[1], (LLVMValueRef[]){dst}, 1, ""))
    /* the first input element of the unit's rows: base + sum over leading axes of idx[d] s[d] */
    int first = blocked ? rank - 3 : rank - 2;
    LLVMValueRef r0 = NULL, rem = u.i, off = K(base);
    if (blocked) {
        r0 = LLVMBuildNSWMul(b, LLVMBuildSRem(b, u.i, K(nb), ""), K(T), "");
        rem = LLVMBuildSDiv(b, u.i, K(nb), "");
    }
    LLVMValueRef row0 = rem; /* blocked: the index over the axes before the last two */
    for (int d = first; d >= 0; d--) {
        LLVMValueRef idx = d ? LLVMBuildSRem(b, rem, K(n->dims[d]), "") : rem;
        off = LLVMBuildAdd(b, off, LLVMBuildMul(b, idx, K(s[d]), ""), "");
        if (d)
            rem = LLVMBuildSDiv(b, rem, K(n->dims[d]), "");
    }
    if (!blocked) { /* one output row, read with the last axis' stride */
        LLVMValueRef orow = LLVMBuildNSWMul(b, u.i, K(len), "");
        jit_cpu_loop l = jit_cpu_loop_begin(e, fn, K(0));
        COPY(LLVMBuildAdd(b, off, LLVMBuildMul(b, l.i, K(last), ""), ""),
             LLVMBuildNSWAdd(b, orow, l.i, ""));
        jit_cpu_loop_end(e, fn, &l, K(len));
    } else { /* rows r0 .. r0+cnt of the second-to-last axis, column by column */
        LLVMValueRef left = LLVMBuildNSWSub(b, K(R), r0, "");
        LLVMValueRef cnt =
            LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, left, K(T), ""), left, K(T), "");
        off = LLVMBuildAdd(b, off, LLVMBuildMul(b, r0, K(s[rank - 2]), ""), "");
        LLVMValueRef obase = LLVMBuildNSWMul(
            b, LLVMBuildNSWAdd(b, LLVMBuildNSWMul(b, row0, K(R), ""), r0, ""), K(len), "");
        /* tile by tile of T columns, through a T x T stack tile: phase 1 reads T input
         * stretches (contiguous when the second-to-last axis has stride 1), phase 2 writes T
         * contiguous output stretches; every line is used whole at once, whatever the strides */
        jit_cpu_loop lc = jit_cpu_loop_begin(e, fn, K(0));
        LLVMValueRef c0 = LLVMBuildNSWMul(b, lc.i, K(T), "");
        LLVMValueRef cleft = LLVMBuildNSWSub(b, K(len), c0, "");
        LLVMValueRef jcnt =
            LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, cleft, K(T), ""), cleft, K(T), "");
        jit_cpu_loop lj = jit_cpu_loop_begin(e, fn, K(0));
        LLVMValueRef srcj = LLVMBuildAdd(
            b, off, LLVMBuildMul(b, LLVMBuildNSWAdd(b, c0, lj.i, ""), K(last), ""), "");
        jit_cpu_loop li = jit_cpu_loop_begin(e, fn, K(0));
        LLVMValueRef v = LLVMBuildLoad2(
            b, t,
            LLVMBuildInBoundsGEP2(b, t, p[0],
                                  (LLVMValueRef[]){LLVMBuildAdd(
                                      b, srcj, LLVMBuildMul(b, li.i, K(s[rank - 2]), ""), "")},
                                  1, ""),
            "");
        LLVMBuildStore(b, v,
                       LLVMBuildInBoundsGEP2(b, t, tl,
                                             (LLVMValueRef[]){LLVMBuildNSWAdd(
                                                 b, LLVMBuildNSWMul(b, li.i, K(T), ""), lj.i, "")},
                                             1, ""));
        jit_cpu_loop_end(e, fn, &li, cnt);
        jit_cpu_loop_end(e, fn, &lj, jcnt);
        jit_cpu_loop li2 = jit_cpu_loop_begin(e, fn, K(0));
        LLVMValueRef dsti = LLVMBuildNSWAdd(
            b, LLVMBuildNSWAdd(b, obase, LLVMBuildNSWMul(b, li2.i, K(len), ""), ""), c0, "");
        jit_cpu_loop lj2 = jit_cpu_loop_begin(e, fn, K(0));
        LLVMValueRef w = LLVMBuildLoad2(
            b, t,
            LLVMBuildInBoundsGEP2(b, t, tl,
                                  (LLVMValueRef[]){LLVMBuildNSWAdd(
                                      b, LLVMBuildNSWMul(b, li2.i, K(T), ""), lj2.i, "")},
                                  1, ""),
            "");
        LLVMBuildStore(b, w,
                       LLVMBuildInBoundsGEP2(b, t, p[1],
                                             (LLVMValueRef[]){LLVMBuildNSWAdd(b, dsti, lj2.i, "")},
                                             1, ""));
        jit_cpu_loop_end(e, fn, &lj2, jcnt);
        jit_cpu_loop_end(e, fn, &li2, cnt);
        jit_cpu_loop_end(e, fn, &lc, K((len + T - 1) / T));
    }
#undef COPY
#undef K
    jit_cpu_loop_end(e, fn, &u, end);
    jit_cpu_kernel_end(e, done);
    return TJ_OK;
}
