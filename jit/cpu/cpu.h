/* cpu.h — private interface of the CPU JIT backend (jit/cpu/): LLVM plumbing (llvm.c: one ORC
 * LLJIT per process, a host TargetMachine, O3, object emission in memory), elementwise codegen
 * for fused groups (codegen_ew.c) and the compiled program (program.c). Without LLVM
 * (TJ_HAVE_LLVM undefined) every entry reports TJ_ERR_UNSUPPORTED. LLVM types never appear in
 * the part of this header seen outside the backend. */
#ifndef TJ_JIT_CPU_H
#define TJ_JIT_CPU_H

#include <stdbool.h>

#include "passes/fusion.h"
#include "runtime/runtime.h"

/* ---- the program: what the lead calls -------------------------------------------------------- */
typedef struct jit_cpu_opts {
    bool no_contract; /* forbid FMA contraction (bit-exact results vs the reference kernels) */
    int64_t par_min;  /* elements above which a kernel is split across threads (0: 65536) */
} jit_cpu_opts;

/* Compiles g (borrowed: must outlive the program) for the host CPU. Returns a program whose
 * run() executes fused groups as native kernels and every other node with the reference
 * kernels, or NULL with the error set: TJ_ERR_UNSUPPORTED when LLVM is absent or g has unknown
 * (-1) dims (the caller then falls back to the interpreter). opts may be NULL. */
rt_program *jit_cpu_compile(const ir_graph *g);
rt_program *jit_cpu_compile_opts(const ir_graph *g, const jit_cpu_opts *opts);
/* Partition of the program (borrowed; NULL for other programs), for tests and dumps. */
const pass_partition *jit_cpu_program_partition(const rt_program *p);

/* Whether the backend was built and LLVM initialises on this machine. */
bool jit_cpu_available(void);
/* "x86_64-pc-linux-gnu/znver3/+avx2,..." : the target, part of every cache key. Static. */
const char *jit_cpu_target_id(void);

/* Timings of the last compile on this thread, in milliseconds. */
typedef struct jit_cpu_stats {
    double build_ms, opt_ms, emit_ms, link_ms; /* IR build, O3 passes, object emit, ORC add */
    size_t obj_bytes;
    uint32_t n_kernels;
    int from_cache; /* 0: compiled; 1: shared with a loaded program; 2: loaded from disk */
} jit_cpu_stats;
jit_cpu_stats jit_cpu_last_stats(void);

/* ---- compiled code objects (llvm.c) ---------------------------------------------------------- */
/* One object file linked into the process: its bytes (the future disk-cache entry) and the
 * addresses of its kernels. Freed with jit_cpu_code_free, which unlinks it. */
typedef struct jit_cpu_code jit_cpu_code;
/* Links object bytes (e.g. from a cache) and looks up `n_syms` symbols into addrs. */
jit_cpu_code *jit_cpu_code_load(const void *obj, size_t size, const char *const *syms,
                                uint32_t n_syms, void **addrs);
const void *jit_cpu_code_object(const jit_cpu_code *c, size_t *size);
void jit_cpu_code_free(jit_cpu_code *c);
/* A process-unique symbol prefix ("tj_k12_"). */
void jit_cpu_unique_prefix(char *buf, size_t n);

/* ---- shared and cached code (codecache.c) --------------------------------------------------- */
/* The cache key of g's kernels and the symbol prefix derived from it. */
void jit_cpu_code_key(const ir_graph *g, bool contract, char *key, size_t n, char *prefix, size_t pn);
typedef struct jit_cpu_shared jit_cpu_shared;
/* Finds code for key in the process table (*from = 1) or on disk (*from = 2), fills addrs and
 * returns a reference; NULL (*from = 0) on a miss. */
jit_cpu_shared *jit_cpu_shared_find(const char *key, const char *const *syms, uint32_t n, void **addrs,
                                    int *from);
/* Registers freshly compiled code (owns it from now on), writes it to the disk cache, fills addrs
 * (from the entry another thread registered first, if any) and returns a reference. */
jit_cpu_shared *jit_cpu_shared_add(const char *key, jit_cpu_code *code, const char *const *syms, uint32_t n,
                                   void **addrs);
void jit_cpu_shared_release(jit_cpu_shared *s);

/* Kernel ABI: bufs holds the group's input data pointers then its output data pointers;
 * [begin, end) is a range of work units (elements, or rows of the loop shape). */
typedef void (*jit_cpu_kernel_fn)(void *const *bufs, int64_t begin, int64_t end);

/* The work of one fused group's kernel (codegen_ew.c). */
typedef struct jit_cpu_ew_plan {
    int64_t n_units;  /* units of work (0: nothing to do) */
    int64_t unit_len; /* elements per unit */
} jit_cpu_ew_plan;
/* Whether the codegen supports node `id` inside a fused group (op and dtypes). */
bool jit_cpu_ew_supported(const ir_graph *g, uint32_t id);

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
                          const char *name, bool contract, jit_cpu_ew_plan *plan);
void jit_cpu_stats_set(const jit_cpu_stats *s);

/* Emission state shared by codegen_ew.c (loops) and ew_ops.c (one element of one op). */
typedef struct jit_cpu_em {
    LLVMContextRef c;
    LLVMModuleRef m;
    LLVMBuilderRef b;
    bool contract; /* FMA contraction allowed on fadd/fsub/fmul */
    LLVMTypeRef i1, i8, i32, i64, f32, f64, ptr;
} jit_cpu_em;
/* Register type of a dtype (bool is i1; in memory it is i8). */
LLVMTypeRef jit_cpu_reg_ty(jit_cpu_em *e, int dt);
/* One element of node n from its inputs' values a[] (t: dtype of the value operands, i.e. input
 * 0, or input 1 for where). NULL if the op has no lowering. */
LLVMValueRef jit_cpu_emit_op(jit_cpu_em *e, const ir_node *n, int t, LLVMValueRef *a);
#endif

#endif /* TJ_JIT_CPU_H */
