/* codegen.h — the CPU backend's code generator (jit/cpu/llvm/, linked into libtracejit only):
 * LLVM plumbing (llvm.c: host TargetMachines, O3, object emission in memory, linked by
 * tracejit's own loader), the emitters of each kernel family (codegen_*.c, ew_ops.c, approx.c,
 * emit.c) and generate.c, which emits and compiles a decided plan. It emits exactly what
 * lower.h's predicates accept. Nothing outside this folder includes it. */
#ifndef TJ_JIT_CPU_CODEGEN_H
#define TJ_JIT_CPU_CODEGEN_H

#include "jit/cpu/lower.h"

#include <llvm-c/Core.h>
#include <llvm-c/TargetMachine.h>

/* Process-wide LLVM state, created on first use; TJ_OK or TJ_ERR_UNSUPPORTED/RUNTIME. */
tj_status jit_cpu_llvm_init(void);
/* The code generator's entries (jit_cpu_codegen): NULL when LLVM initialises here, else why not;
 * "x86_64-pc-linux-gnu/znver3/+avx2,...", the target every cache key names. */
const char *jit_cpu_llvm_unavailable(void);
const char *jit_cpu_llvm_target_id(void);
/* Sets the module's triple and data layout for the host target. */
void jit_cpu_prepare_module(LLVMModuleRef m);
/* Verifies, optimises (default<O3>), emits and links module m (consumed, with its context if
 * own_ctx) and looks up syms. NULL with the error set. Records timings in the thread's stats. */
jit_cpu_code *jit_cpu_code_compile(LLVMModuleRef m, LLVMContextRef ctx, const char *const *syms,
                                   uint32_t n_syms, void **addrs);
/* Emits into m a kernel named `name` for fused group gr of g; fills *plan. generic: a
 * broadcasting loop takes its extents from the geometry block after the buffers. */
tj_status jit_cpu_ew_emit(LLVMModuleRef m, const ir_graph *g, const pass_group *gr,
                          const char *name, bool contract, bool exact_math, bool generic,
                          rt_units *plan);

/* Emission state shared by codegen_ew.c (loops) and ew_ops.c (one element of one op). */
typedef struct jit_cpu_em {
    LLVMContextRef c;
    LLVMModuleRef m;
    LLVMBuilderRef b;
    bool contract;   /* FMA contraction allowed on fadd/fsub/fmul */
    bool exact_math; /* transcendentals call libm (bit-identical to the reference kernels) */
    LLVMTypeRef i1, i8, i16, i32, i64, f32, f64, ptr;
} jit_cpu_em;
/* Counted loops (emit.c): for (i = from; i < to; i++), entered only when from < to. */
typedef struct jit_cpu_loop {
    LLVMValueRef i;
    LLVMBasicBlockRef head;
    LLVMValueRef latch_br; /* the back branch, once closed (jit_cpu_loop_no_unroll) */
} jit_cpu_loop;
LLVMValueRef jit_cpu_c64(jit_cpu_em *e, int64_t v);
/* A call of intrinsic `name` overloaded on the n_ov types ov. */
LLVMValueRef jit_cpu_intrinsic(jit_cpu_em *e, const char *name, LLVMTypeRef *ov, unsigned n_ov,
                               LLVMValueRef *args, unsigned n);
/* A call of libm's `name` (1 or 2 operands of scalar type t) that LLVM must not treat as a
 * builtin: it would constant-fold tanhf(3.5f) with the host's double tanh, or rewrite pow(2, x)
 * as exp2(x) and x^2 as x*x, giving results other than libm's at run time. */
LLVMValueRef jit_cpu_libm(jit_cpu_em *e, LLVMBuilderRef b, const char *name, LLVMTypeRef t,
                          LLVMValueRef *args, unsigned n);
/* A two-operand intrinsic overloaded on its operands' type (llvm.maximum, ...). */
LLVMValueRef jit_cpu_intrin2(jit_cpu_em *e, const char *name, LLVMValueRef x, LLVMValueRef y);
/* Sets fast-math flags f on v if it is a floating-point instruction; returns v. */
LLVMValueRef jit_cpu_fast(LLVMValueRef v, LLVMFastMathFlags f);
/* Element `off` of a buffer of dtype dt (bool: i8 in memory, i1 in registers). */
LLVMValueRef jit_cpu_load_elem(jit_cpu_em *e, LLVMValueRef base, int dt, LLVMValueRef off);
jit_cpu_loop jit_cpu_loop_begin(jit_cpu_em *e, LLVMValueRef fn, LLVMValueRef from);
/* Closes l; returns the latch block (for phis carried around the loop). */
LLVMBasicBlockRef jit_cpu_loop_end(jit_cpu_em *e, LLVMValueRef fn, jit_cpu_loop *l,
                                   LLVMValueRef to);
/* Marks the closed loop l not to be unrolled (llvm.loop.unroll.disable), so a short inner loop
 * of constant trip count stays a loop the vectorizer widens. */
void jit_cpu_loop_no_unroll(jit_cpu_em *e, const jit_cpu_loop *l);
/* The same for the loop whose back branch is latch_br. */
void jit_cpu_branch_no_unroll(LLVMContextRef c, LLVMValueRef latch_br);
/* A one-element CONST node of a numeric or bool dtype as an immediate; NULL for anything else. */
LLVMValueRef jit_cpu_const_scalar(jit_cpu_em *e, const ir_graph *g, const ir_node *n);
/* Register type of a dtype (bool is i1; in memory it is i8). */
LLVMTypeRef jit_cpu_reg_ty(jit_cpu_em *e, int dt);
/* One element of node n from its inputs' values a[] (t: dtype of the value operands, i.e. input
 * 0, or input 1 for where). NULL if the op has no lowering. */
LLVMValueRef jit_cpu_emit_op(jit_cpu_em *e, const ir_node *n, int t, LLVMValueRef *a);
/* Whether op has an entry in ew_ops.c's lowering table. */
bool jit_cpu_ew_lowered(int op);

/* Transcendentals (approx.c) on x of type ty: float or double, scalar or vector. Straight-line IR
 * (selects, no calls, no branches) so loops using them vectorize; error bounds at the top of
 * approx.c; NaN, +-inf, +-0, overflow and underflow as libm. With e->exact_math they call libm
 * instead (per lane for vectors), bit-identical to the reference kernels. */
LLVMValueRef jit_cpu_emit_exp(jit_cpu_em *e, LLVMValueRef x, LLVMTypeRef ty);
/* e^x for x <= 0 or NaN only (softmax's x - max): the same values as jit_cpu_emit_exp there (a
 * NaN stays a NaN, its payload aside) in fewer instructions. */
LLVMValueRef jit_cpu_emit_exp_nonpos(jit_cpu_em *e, LLVMValueRef x, LLVMTypeRef ty);
LLVMValueRef jit_cpu_emit_log(jit_cpu_em *e, LLVMValueRef x, LLVMTypeRef ty);
LLVMValueRef jit_cpu_emit_tanh(jit_cpu_em *e, LLVMValueRef x, LLVMTypeRef ty);
LLVMValueRef jit_cpu_emit_sigmoid(jit_cpu_em *e, LLVMValueRef x, LLVMTypeRef ty);

/* Fills e's types and a builder for module m (dispose e->b when done). */
void jit_cpu_em_init(jit_cpu_em *e, LLVMModuleRef m, bool contract, bool exact_math);
/* The kernel entry `name(bufs, begin, end)`; positions e->b in its entry block and loads the
 * n_bufs buffer pointers into ptrs. Its arguments 1 and 2 are begin and end. */
LLVMValueRef jit_cpu_kernel_begin(jit_cpu_em *e, const char *name, uint32_t n_bufs,
                                  LLVMValueRef *ptrs);
/* Branches to done, returns and disposes the builder: the end of every kernel. */
void jit_cpu_kernel_end(jit_cpu_em *e, LLVMBasicBlockRef done);
/* A kernel over rows of matmul node id (units: batches*m rows of the output); bufs a, b, out. */
tj_status jit_cpu_mm_emit(LLVMModuleRef m, const ir_graph *g, uint32_t id, const char *name,
                          const jit_cpu_opts *o, rt_units *plan);
/* A kernel for reduce group gr (its elementwise producers computed in registers); units are
 * output elements. generic: the reduced length is read from the block after the output
 * (RT_GENERIC_RED). */
tj_status jit_cpu_red_emit(LLVMModuleRef m, const ir_graph *g, const pass_group *gr,
                           const char *name, const jit_cpu_opts *o, bool generic, rt_units *plan);
/* A kernel for softmax node id; units are rows. */
tj_status jit_cpu_softmax_emit(LLVMModuleRef m, const ir_graph *g, uint32_t id, const char *name,
                               const jit_cpu_opts *o, rt_units *plan);
/* A kernel copying strided view node id (transpose, slice, broadcast_to); units are rows of the
 * output's last axis. */
tj_status jit_cpu_view_emit(LLVMModuleRef m, const ir_graph *g, uint32_t id, const char *name,
                            rt_units *plan);
/* Emits `name` for control-flow node id (jit_cpu_cf_supported must hold). */
tj_status jit_cpu_cf_emit(LLVMModuleRef m, const ir_graph *g, uint32_t id, const char *name,
                          const jit_cpu_opts *o);
/* One kernel `name` running members in order on one thread (ABI: ins then outs); values that
 * no one outside reads live in stack slots. Member kernels become internal to the module. */
tj_status jit_cpu_chain_emit(LLVMModuleRef m, const ir_graph *g, const jit_cpu_member *mem,
                             uint32_t n_mem, const uint32_t *ins, uint32_t n_ins,
                             const uint32_t *outs, uint32_t n_outs, const char *name);

#endif /* TJ_JIT_CPU_CODEGEN_H */
