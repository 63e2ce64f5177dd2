/* backend.h — what a backend is, and the registry that lists them (backend.c). The jit core
 * (compile.c, module.c, tracing.c) reaches backends through this header only; a backend lives in
 * its own folder (jit/cpu/, jit/interp/) and defines one `const jit_backend jit_backend_<name>`.
 * Which backends a build holds is decided by CMake (TJ_BACKENDS, in order of preference), which
 * writes the registry's list (gen/tj_backends.h); the core names none of them.
 *
 * The shape follows tinygrad's compiled device (a compiler that makes bytes, a program one calls)
 * and XLA's per-platform compiler factory (one registration per platform, looked up by name): a
 * backend compiles an optimized graph into an rt_program (the runtime's executable form, run by
 * the runtime), may write that program as bytes and read it back for the same graph, and says
 * whether it can run here and why not. */
#ifndef TJ_JIT_BACKEND_H
#define TJ_JIT_BACKEND_H

#if defined(TJ_LAYER_IR) || defined(TJ_LAYER_PASSES) || defined(TJ_LAYER_RUNTIME) ||               \
    defined(TJ_LAYER_API)
#error "jit/ is the top floor: this layer may not use it"
#endif

#include <stdbool.h>
#include <stddef.h>

#include "passes/fusion.h"
#include "runtime/runtime.h"

/* Options of one compile, backend-neutral. */
typedef struct jit_backend_opts {
    bool exact_math; /* results bit-identical to the reference kernels (TJ_EXACT_MATH=1) */
    /* only what needs no code generator: every kernel found in the backend's code cache (this
     * process or disk), or none needed; otherwise TJ_ERR_UNSUPPORTED with nothing compiled (a
     * new signature of a tiered function asks this first, and starts on the interpreter only
     * when the code must be generated). A backend that caches nothing compiles as usual. */
    bool cached_only;
    /* code that serves every shape of the graph's class where the backend has such code (its
     * extents passed at run time), rather than code specialized to these extents: what a
     * function's later signatures ask (jit/tracing.c: automatic dynamic shapes) */
    bool shape_generic;
    /* a signature's first native code: the backend may trade a little run time in small
     * kernels for a faster compile (the CPU backend does not unroll loops: compiles take about
     * half as long); a hot signature whose program says so (rt_program.recompile_pays) is
     * compiled again without it (jit/tracing.c). TJ_QUICK_COMPILE=0: never */
    bool quick;
} jit_backend_opts;

typedef struct jit_backend {
    const char *name; /* "cpu", "interp": what TJ_BACKEND and tj_function_options.backend name */
    const char *what; /* a few words for listings: "native code through LLVM" */
    /* NULL when the backend can compile here; otherwise a sentence saying why not that a user can
     * act on ("this library was built without LLVM: link libtracejit instead"). Static. */
    const char *(*unavailable)(void);
    /* The backend's part of every cache key of its artifacts: target triple, CPU and features or
     * GPU architecture, compiler version. Static; "" for a backend that caches nothing. */
    const char *(*cache_key)(void);
    /* The target its programs' images run on ("x86_64-linux-gnu"): with the name, it names saved
     * images (<fn>.<name>.<target>.tjx). NULL for a backend that writes no images. */
    const char *(*image_target)(void);
    /* What the fusion pass may put into one kernel (passes/fusion.h); NULL: nothing is fused. */
    pass_fusable_fn fusable, reducible;
    /* Which composite ops (IR_F_COMPOSITE) it lowers itself; the others reach it as primitives
     * (passes/decompose.c). NULL: it lowers them all. A new backend lowers the primitives first
     * and opts into each composite's fast path here. */
    bool (*native)(int op);
    /* Compiles optimized graph g (borrowed: it must outlive the program). NULL with the error
     * set; TJ_ERR_UNSUPPORTED means "declined": this graph is not for this backend (unknown
     * dims, ops it does not lower) and the caller runs it on the interpreter instead. */
    rt_program *(*compile)(const ir_graph *g, const jit_backend_opts *o);
    /* Optional (NULL: programs cannot be saved as native code). write: p (one of this backend's
     * programs) as bytes, malloc'd, *size bytes, or NULL with the error set. read: the program
     * again for the same graph g (borrowed, as for compile): NULL with TJ_ERR_UNSUPPORTED when the
     * image cannot run here (another build, a CPU lacking its features), TJ_ERR_CORRUPT when it is
     * damaged or another graph's. */
    unsigned char *(*write)(const rt_program *p, size_t *size);
    rt_program *(*read)(const ir_graph *g, const void *img, size_t size);
    /* Its programs run on a device and leave their outputs there (the CUDA backend's): a new
     * signature is compiled before its first call, never started on the interpreter (tiers),
     * whose results would be the host's, and a compile that fails is the call's error rather
     * than a fall back to the interpreter. */
    bool device;
} jit_backend;

/* The registry, in order of preference (the interpreter, always available, last). */
uint32_t jit_backend_count(void);
const jit_backend *jit_backend_at(uint32_t i);
/* The backend called `name`, or NULL. */
const jit_backend *jit_backend_find(const char *name);
/* The backend that made program p (by its vt->name), or NULL. */
const jit_backend *jit_backend_of(const rt_program *p);
/* The interpreter: runs any graph with the reference kernels; what a declined graph runs on. */
const jit_backend *jit_backend_interpreter(void);

/* Resolves a choice: `spec` is a backend name or a comma-separated list of names in order of
 * preference ("cuda,cpu": the first one available here); NULL or "" picks the first available
 * backend of the registry. `what` names where the choice came from in messages ("TJ_BACKEND").
 * An unknown name, or a list none of whose backends is available, is TJ_ERR_INVALID naming it
 * and listing the available ones; never a silent fallback. */
tj_status jit_backend_select(const char *spec, const char *what, const jit_backend **out);
/* "cpu, interp": the backends available here, for messages. */
void jit_backend_list_available(char *buf, size_t n);

#endif /* TJ_JIT_BACKEND_H */
