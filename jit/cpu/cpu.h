/* cpu.h — private interface of the CPU JIT backend (jit/cpu/; registered as "cpu" by backend.c):
 * compiling a graph (compile.c: the plan decided by plan_decide.c and lower_*.c, kernels from the
 * code cache or the code generator), the program the runtime runs (program.c), images (image.c)
 * and code objects (code.c, codecache.c, payload.c). None of it needs LLVM: the code generator
 * (jit/cpu/llvm/, its own header codegen.h) is linked into libtracejit only, behind
 * jit_cpu_codegen_linked below. */
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
    bool cached_only; /* kernels from the code cache only: a miss is TJ_ERR_UNSUPPORTED */
    /* elementwise kernels that broadcast take their extents at run time (rt_step.geom): one
     * compiled kernel serves every shape of its broadcasting pattern */
    bool shape_generic;
    /* the loops of small kernels not unrolled (jit_backend_opts.quick; llvm/generate.c) */
    bool quick;
} jit_cpu_opts;

/* Whether o (may be NULL) or the environment (TJ_EXACT_MATH=1) asks for exact math. Part of the
 * code's cache key: approximate and exact kernels differ. */
bool jit_cpu_exact_math(const jit_cpu_opts *o);

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
/* "x86_64-pc-linux-gnu/znver3/+avx2,..." : the target, part of every cache key. Static. */
const char *jit_cpu_target_id(void);

/* Timings of the last compile on this thread, in milliseconds. */
/* The most parts one module is compiled in at once, a thread each (TJ_COMPILE_THREADS). */
enum { JIT_CPU_MAX_PARTS = 8 };
typedef struct jit_cpu_stats {
    double build_ms, opt_ms, emit_ms, link_ms; /* IR build, O3 passes, object emit, load */
    size_t obj_bytes;
    int parts; /* >= 2: compiled as that many parts on as many threads (O3 and emit are the
                  longest part's) */
    uint32_t n_kernels;
    int from_cache;    /* 0: compiled; 1: shared with a loaded program; 2: loaded from disk */
    uint32_t n_reused; /* compiled: of its n_kernels, how many were found in loaded code */
} jit_cpu_stats;
jit_cpu_stats jit_cpu_last_stats(void);
void jit_cpu_stats_set(const jit_cpu_stats *s);

/* ---- the code generator ---------------------------------------------------------------------- */
/* What turns a decided plan into native code, linked per library: jit/cpu/llvm/ (LLVM) in
 * libtracejit, jit/cpu/none/ in libtracejit_rt, whose CPU backend runs cached and saved code
 * and compiles none. Each library holds exactly one definition of jit_cpu_codegen_linked. */
struct cpu_prog;
typedef struct jit_cpu_shared jit_cpu_shared; /* a program's loaded code (codecache.c) */
typedef struct jit_cpu_codegen {
    /* NULL when it generates code here; otherwise why not, a sentence (static) */
    const char *(*unavailable)(void);
    /* the target every cache key names ("x86_64-pc-linux-gnu/znver3/+avx2,..."; "none") */
    const char *(*target_id)(void);
    /* emits and compiles the kernels cp's plan names (a code-cache miss): fills addrs for the
     * names (*nk of them; a control-flow step it turns down becomes a node step and loses its
     * name, so *nk may shrink) and sets cp's shared code; the steps marked found are in
     * draft already (jit_cpu_shared_begin) and are not generated */
    tj_status (*generate)(struct cpu_prog *cp, const jit_cpu_opts *o, const char **names,
                          void **addrs, uint32_t *nk, jit_cpu_shared *draft);
    /* whether op has an elementwise lowering (its table entry: what a fused kernel computes of
     * one element); the ops jit_cpu_ew_supported accepts must have one */
    bool (*lowers)(int op);
} jit_cpu_codegen;
extern const jit_cpu_codegen jit_cpu_codegen_linked;

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
/* The cache key of a program's kernels from their structural hash (jit_cpu_kernels_hash). */
void jit_cpu_code_key(ir_hash128 kernels, bool contract, char *key, size_t n);
/* Finds a program's code for key in the process table (*from = 1) or, when disk, on disk
 * (*from = 2), fills addrs and returns a reference; NULL (*from = 0) on a miss. */
jit_cpu_shared *jit_cpu_shared_find(const char *key, const char *const *syms, uint32_t n,
                                    void **addrs, bool disk, int *from);
/* A program miss: the kernels of syms already loaded in this process (by another program, or
 * another signature) get found[i] = 1 and addrs[i], their objects held by the draft returned (for
 * jit_cpu_shared_finish, or jit_cpu_shared_release on failure); NULL on OOM. syms may be NULL
 * when n is 0. */
jit_cpu_shared *jit_cpu_shared_begin(const char *const *syms, uint32_t n, void **addrs,
                                     uint8_t *found);
/* Completes draft d as the program of key: code (owned from now on; NULL when every kernel was
 * found) exports the n_fresh kernels fresh at fresh_addrs; every one of syms must then be in d's
 * objects. Fills addrs for syms, writes the program to the disk cache when to_disk, and returns a
 * reference (to an equal program another thread registered meanwhile, if one did); NULL on failure,
 * d and code freed. */
jit_cpu_shared *jit_cpu_shared_finish(jit_cpu_shared *d, const char *key, jit_cpu_code *code,
                                      const char *const *fresh, void *const *fresh_addrs,
                                      uint32_t n_fresh, const char *const *syms, uint32_t n,
                                      void **addrs, bool to_disk);
/* Both at once, for code holding every kernel of syms (loaded from an image). */
jit_cpu_shared *jit_cpu_shared_add(const char *key, jit_cpu_code *code, const char *const *syms,
                                   uint32_t n, void **addrs, bool to_disk);
/* The object bytes behind s (borrowed): one object, or a container of all it holds. */
const void *jit_cpu_shared_object(const jit_cpu_shared *s, size_t *size);
/* How many objects s's kernels live in (1 when compiled whole). */
uint32_t jit_cpu_shared_objects(const jit_cpu_shared *s);
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
/* A MATMUL node's geometry: rt_mm_of (runtime/plan.h). */
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
/* Whether node n is a constant elementwise code holds as an immediate: one element of an
 * integer or bool dtype (a division or a shift by it strength-reduces). A one-element float
 * constant is loaded from its buffer, so a value a new shape changes (a mean's 1/N) does not
 * change the code; kernel keys name the value of exactly the immediates (plan_decide.c). */
bool jit_cpu_const_immediate(const ir_graph *g, const ir_node *n);
tj_status jit_cpu_red_units(const ir_graph *g, const pass_group *gr, rt_units *plan);
tj_status jit_cpu_mm_units(const ir_graph *g, uint32_t id, rt_units *plan);
tj_status jit_cpu_softmax_units(const ir_graph *g, uint32_t id, rt_units *plan);
tj_status jit_cpu_view_units(const ir_graph *g, uint32_t id, rt_units *plan);
/* Native control flow (codegen_cf.c): whether COND / WHILE / FOR node id and everything in its
 * regions is scalar arithmetic the codegen lowers (no effects, no tensors beyond one element). */
bool jit_cpu_cf_supported(const ir_graph *g, uint32_t id);

#endif /* TJ_JIT_CPU_H */
