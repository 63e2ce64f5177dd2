/* cpu.h — private interface of the CPU JIT backend (jit/cpu/; registered as "cpu" by backend.c):
 * LLVM plumbing (llvm.c: host TargetMachines, O3, object emission in memory, linked by tracejit's
 * own loader), elementwise codegen
 * for fused groups (codegen_ew.c) and the compiled program (program.c). Without LLVM
 * (TJ_HAVE_LLVM undefined) every entry reports TJ_ERR_UNSUPPORTED. LLVM types never appear in
 * the part of this header seen outside the backend. */
#ifndef TJ_JIT_CPU_H
#define TJ_JIT_CPU_H

#ifdef TJ_JIT_CORE
#error                                                                                             \
    "jit/cpu/cpu.h is the CPU backend's own header: the jit core reaches it through jit/backend.h"
#endif

#include <stdbool.h>

#include "passes/fusion.h"
#include "runtime/plan.h"

/* ---- the program: what the lead calls -------------------------------------------------------- */
typedef struct jit_cpu_opts {
    bool no_contract; /* forbid FMA contraction (bit-exact results vs the reference kernels) */
    int64_t par_min;  /* elements above which a kernel is split across threads (0: 65536) */
    bool exact_math;  /* transcendentals call libm as the reference kernels do (bit-identical);
                         default: vectorizable approximations (approx.c). TJ_EXACT_MATH=1 too */
} jit_cpu_opts;

/* Whether o (may be NULL) or the environment (TJ_EXACT_MATH=1) asks for exact math. Part of the
 * code's cache key: approximate and exact kernels differ. */
bool jit_cpu_exact_math(const jit_cpu_opts *o);

/* The format version of program images (image.c); a loader refuses any other. */
#define JIT_CPU_IMAGE_VERSION 4

/* Compiles g (borrowed: must outlive the program) for the host CPU. Returns a program whose
 * run() executes fused groups as native kernels and every other node with the reference
 * kernels, or NULL with the error set: TJ_ERR_UNSUPPORTED when LLVM is absent or g has unknown
 * (-1) dims (the caller then falls back to the interpreter). opts may be NULL. */
rt_program *jit_cpu_compile(const ir_graph *g);
rt_program *jit_cpu_compile_opts(const ir_graph *g, const jit_cpu_opts *opts);
/* A compiled program as bytes (image.c): its plan and its kernels' object, regions included;
 * malloc'd (*size bytes), or NULL with the error set (TJ_ERR_UNSUPPORTED: p is not a CPU
 * program). Made from the bytes again, without LLVM, by jit_cpu_program_from_image for the
 * same graph g (borrowed, as for compile): NULL with TJ_ERR_UNSUPPORTED when the image cannot
 * run here (another tracejit build, a CPU lacking features the code uses, no OpenBLAS for its
 * products) and the caller should compile or interpret instead, TJ_ERR_CORRUPT when it is
 * damaged or another graph's. Structure is checked; the code itself is trusted. */
unsigned char *jit_cpu_program_image(const rt_program *p, size_t *size);
/* Whether p is a CPU program. */
bool jit_cpu_is_program(const rt_program *p);
rt_program *jit_cpu_program_from_image(const ir_graph *g, const void *img, size_t size);
/* Partition of the program (borrowed; NULL for other programs), for tests and dumps. */
const pass_partition *jit_cpu_program_partition(const rt_program *p);

/* Whether the backend was built and LLVM initialises on this machine. */
bool jit_cpu_available(void);
/* NULL when it is; otherwise why not, a sentence (static). Sets no error. */
const char *jit_cpu_unavailable(void);
/* "x86_64-linux-gnu": the target the images of this build run on (image.c; no LLVM). */
const char *jit_cpu_image_target(void);
/* "x86_64-pc-linux-gnu/znver3/+avx2,..." : the target, part of every cache key. Static. */
const char *jit_cpu_target_id(void);

/* Timings of the last compile on this thread, in milliseconds. */
typedef struct jit_cpu_stats {
    double build_ms, opt_ms, emit_ms, link_ms; /* IR build, O3 passes, object emit, load */
    size_t obj_bytes;
    int halves; /* 2: compiled as two halves on two threads (O3 and emit are the longer half's) */
    uint32_t n_kernels;
    int from_cache; /* 0: compiled; 1: shared with a loaded program; 2: loaded from disk */
} jit_cpu_stats;
jit_cpu_stats jit_cpu_last_stats(void);

/* ---- compiled code objects (code.c; no LLVM needed) ------------------------------------------ */
/* One object blob linked into the process by runtime/objload.c: its bytes (what the disk cache
 * and saved modules store) and the addresses of its kernels. Freed with jit_cpu_code_free, which
 * unmaps it. */
typedef struct jit_cpu_code jit_cpu_code;
/* Links a copy of object bytes (e.g. from a cache) and looks up `n_syms` symbols into addrs. */
jit_cpu_code *jit_cpu_code_load(const void *obj, size_t size, const char *const *syms,
                                uint32_t n_syms, void **addrs);
/* The same, taking ownership of obj (malloc'd; freed on failure too). */
jit_cpu_code *jit_cpu_code_adopt(void *obj, size_t size, const char *const *syms, uint32_t n_syms,
                                 void **addrs);
const void *jit_cpu_code_object(const jit_cpu_code *c, size_t *size);
void jit_cpu_code_free(jit_cpu_code *c);

/* ---- shared and cached code (codecache.c) --------------------------------------------------- */
/* The cache key of g's kernels and the symbol prefix derived from it. */
void jit_cpu_code_key(const ir_graph *g, bool contract, char *key, size_t n, char *prefix,
                      size_t pn);
typedef struct jit_cpu_shared jit_cpu_shared;
/* Finds code for key in the process table (*from = 1) or on disk (*from = 2), fills addrs and
 * returns a reference; NULL (*from = 0) on a miss. */
jit_cpu_shared *jit_cpu_shared_find(const char *key, const char *const *syms, uint32_t n,
                                    void **addrs, int *from);
/* Registers code (owns it from now on), writes it to the disk cache when store (fresh code),
 * fills addrs (from the entry registered first, if any) and returns a reference. */
jit_cpu_shared *jit_cpu_shared_add(const char *key, jit_cpu_code *code, const char *const *syms,
                                   uint32_t n, void **addrs, bool store);
/* The object bytes behind s (borrowed). */
const void *jit_cpu_shared_object(const jit_cpu_shared *s, size_t *size);
void jit_cpu_shared_release(jit_cpu_shared *s);

/* ---- the disk payload (payload.c) ------------------------------------------------------------ */
/* A payload naming syms then holding the object (malloc'd, *size bytes); NULL on OOM. */
unsigned char *jit_cpu_payload_encode(const char *const *syms, uint32_t n, const void *obj,
                                      size_t obj_size, size_t *size);
/* The object's offset in a payload written for exactly these syms; 0 if it is not one. */
size_t jit_cpu_payload_parse(const unsigned char *p, size_t size, const char *const *syms,
                             uint32_t n);

/* Kernel ABIs: rt_kernel_fn and rt_cf_fn (runtime/plan.h). */

/* Whether the codegen supports node `id` inside a fused group (op and dtypes). */
bool jit_cpu_ew_supported(const ir_graph *g, uint32_t id);
/* The fusion predicates (pass_fusable_fn): the two above, as the fusion pass calls them. */
bool jit_cpu_fusable(const ir_graph *g, uint32_t id, void *user);
bool jit_cpu_reducible(const ir_graph *g, uint32_t id, void *user);

/* OpenBLAS: runtime/blas.c (rt_blas_get), shared with the eager kernels */

/* ---- matrix products (codegen_mm.c) ------------------------------------------------------- */
/* A MATMUL node's geometry: rt_mm (runtime/plan.h). */
/* Fills s for node id; false if it is not a matmul of concrete numeric shapes. */
bool jit_cpu_mm_shape(const ir_graph *g, uint32_t id, rt_mm *s);
/* Every dimension at most 64: generated inline, no BLAS. */
bool jit_cpu_mm_small(const rt_mm *s);

/* ---- reductions and softmax (codegen_red.c) ----------------------------------------------- */
/* Whether reduction node id has a generated kernel (which may absorb elementwise producers). */
bool jit_cpu_red_supported(const ir_graph *g, uint32_t id);
/* Whether SOFTMAX / LOG_SOFTMAX node id has a generated kernel (last axis, f32/f64). */
bool jit_cpu_softmax_supported(const ir_graph *g, uint32_t id);
/* Whether TRANSPOSE / SLICE / BROADCAST_TO node id has a generated kernel (codegen_view.c: every
 * dtype but string, concrete shapes). */
bool jit_cpu_view_supported(const ir_graph *g, uint32_t id);

/* A member of a chain (codegen_chain.c): a kernel of the module run once over all its units, its
 * buffers being node ids (inputs then outputs, the kernel ABI's order). */
typedef struct jit_cpu_member {
    const char *fn;
    int64_t n_units;
    uint32_t n_in, n_out;
    const uint32_t *in, *out;
} jit_cpu_member;

/* The work units of each generated kernel, without LLVM (the emitters use them too): a fused
 * group, a reduce group, a matmul node, a softmax node, a view node. */
tj_status jit_cpu_ew_units(const ir_graph *g, const pass_group *gr, rt_units *plan);
/* Whether group gr's kernel is one flat loop (every input full-size or one element): its code
 * then does not depend on the size, which the units pass in. */
bool jit_cpu_ew_flat(const ir_graph *g, const pass_group *gr);
tj_status jit_cpu_red_units(const ir_graph *g, const pass_group *gr, rt_units *plan);
tj_status jit_cpu_mm_units(const ir_graph *g, uint32_t id, rt_units *plan);
tj_status jit_cpu_softmax_units(const ir_graph *g, uint32_t id, rt_units *plan);
tj_status jit_cpu_view_units(const ir_graph *g, uint32_t id, rt_units *plan);
/* Native control flow (codegen_cf.c): whether COND / WHILE / FOR node id and everything in its
 * regions is scalar arithmetic the codegen lowers (no effects, no tensors beyond one element). */
bool jit_cpu_cf_supported(const ir_graph *g, uint32_t id);

#ifdef TJ_HAVE_LLVM
#include <llvm-c/Core.h>
#include <llvm-c/TargetMachine.h>

/* Process-wide LLVM state, created on first use; TJ_OK or TJ_ERR_UNSUPPORTED/RUNTIME. */
tj_status jit_cpu_llvm_init(void);
/* Sets the module's triple and data layout for the host target. */
void jit_cpu_prepare_module(LLVMModuleRef m);
/* Verifies, optimises (default<O3>), emits and links module m (consumed, with its context if
 * own_ctx) and looks up syms. NULL with the error set. Records timings in the thread's stats. */
jit_cpu_code *jit_cpu_code_compile(LLVMModuleRef m, LLVMContextRef ctx, const char *const *syms,
                                   uint32_t n_syms, void **addrs);
/* Emits into m a kernel named `name` for fused group gr of g; fills *plan. */
tj_status jit_cpu_ew_emit(LLVMModuleRef m, const ir_graph *g, const pass_group *gr,
                          const char *name, bool contract, bool exact_math, rt_units *plan);
void jit_cpu_stats_set(const jit_cpu_stats *s);

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
/* A one-element CONST node of a numeric or bool dtype as an immediate; NULL for anything else. */
LLVMValueRef jit_cpu_const_scalar(jit_cpu_em *e, const ir_graph *g, const ir_node *n);
/* Register type of a dtype (bool is i1; in memory it is i8). */
LLVMTypeRef jit_cpu_reg_ty(jit_cpu_em *e, int dt);
/* One element of node n from its inputs' values a[] (t: dtype of the value operands, i.e. input
 * 0, or input 1 for where). NULL if the op has no lowering. */
LLVMValueRef jit_cpu_emit_op(jit_cpu_em *e, const ir_node *n, int t, LLVMValueRef *a);

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
 * output elements. */
tj_status jit_cpu_red_emit(LLVMModuleRef m, const ir_graph *g, const pass_group *gr,
                           const char *name, const jit_cpu_opts *o, rt_units *plan);
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
#endif

#endif /* TJ_JIT_CPU_H */
