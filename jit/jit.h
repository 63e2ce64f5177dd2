/* jit.h — the internal interface of jit/: functions and their signature caches, the tracing
 * driver, and the compile pipeline (passes, then a backend program). */
#ifndef TJ_JIT_H
#define TJ_JIT_H

#if defined(TJ_LAYER_IR) || defined(TJ_LAYER_PASSES) || defined(TJ_LAYER_RUNTIME) ||               \
    defined(TJ_LAYER_API)
#error "jit/ is the top floor: this layer may not use it"
#endif

#include <ffi.h>

#include "jit/backend.h"
#include "passes/passes.h"
#include "api/api.h"
#include "runtime/module.h"

/* One argument of a call signature: a tensor's dtype and dims, or a static value. */
typedef struct jit_argsig {
    uint8_t is_static;
    uint8_t dtype;
    uint8_t rank;
    int64_t dims[TJ_MAX_RANK]; /* -1: any */
    tj_tensor *value;          /* static value (retained), else NULL */
} jit_argsig;

enum {
    JIT_RESULT_NONE = RT_RESULT_NONE,
    JIT_RESULT_SINGLE = RT_RESULT_SINGLE,
    JIT_RESULT_TUPLE = RT_RESULT_TUPLE
};

/* TJ_DUMP: writes the concrete function's traced graph and its kernels as DOT beside the
 * text IR (<dir>/<function>.<signature hash>.traced.dot, .kernels.dot). */
void jit_dump_dot(const tj_concrete *c);

struct tj_concrete {
    tj_function *fn;  /* NULL for a saved module's function (jit/module.c) */
    const char *name; /* the function's name (fn->name, or the module's) for messages */
    uint64_t sig_hash;
    uint32_t nargs;
    jit_argsig *sig;
    ir_graph *graph;  /* optimized */
    ir_graph *traced; /* as traced, before the passes (pictures) */
    tj_variable **caps;
    uint32_t n_caps;
    tj_variable **locks; /* variables the graph assigns, by id: held during a run */
    uint32_t n_locks;
    rt_program *prog;            /* the first program (tiered: the interpreter's) */
    _Atomic(rt_program *) tier1; /* tiered: the native program once compiled, else NULL */
    pthread_t compiler;          /* tiered: the background compile (joined on free) */
    bool shape_generic; /* not its function's first signature: shape-generic code (tracing.c) */
    const jit_backend *backend; /* the backend it compiles for (a re-specialization's too) */
    /* a hot shape-generic signature's code specialized to its shapes (jit_respecialize): the
     * program once compiled, else NULL; calls counted; 0 none, 1 a thread made (joined on free),
     * 2 no thread could be made */
    _Atomic(rt_program *) tier2;
    atomic_int hot_calls;
    _Atomic double hot_t0; /* when its first counted call ended (ms, monotonic) */
    atomic_int respec;
    pthread_t respec_thread;
    atomic_int compiling; /* 1 while a compile is pending or `compiler` not joined */
    atomic_int tier_go;   /* set after the second call: the compile may start */
    atomic_int tier_runs; /* tiered: calls run before the compile was released */
    int result_kind;
    atomic_uint_fast64_t last_used;
    int has_unknown; /* some signature dims are -1 */
    /* has_unknown: native code per shape called (jit_instance); NULL: the interpreter runs the
     * graph at every shape (no native backend, or a graph with regions) */
    struct jit_instances *inst;
    int pinned; /* handed out by tj_function_get_concrete: never freed before its function */
};

/* ---- functions and their caches (function.c) ------------------------------------------------- */
#define FN_MAGIC 0x746a666eu
#define SIG_STACK 16

typedef struct jit_snapshot {
    uint32_t n;
    tj_concrete *items[];
} jit_snapshot;

typedef struct jit_retired {
    void *p;
    int is_concrete;
    uint64_t seq; /* retirement number: freed once both reader counters were seen at 0 after it */
    struct jit_retired *next;
} jit_retired;

struct tj_function {
    uint32_t magic;
    char *name;
    void *fn;
    tj_body body; /* tj_function_new_body: called as body(nargs, args, body_user) instead of fn */
    void *body_user;
    void (*body_free)(void *user); /* called on body_user when the function is freed */
    int nargs;
    ffi_cif cif;
    ffi_type **arg_types;
    char **arg_names;
    jit_argsig *input_sig; /* n_input_sig entries, or NULL */
    int n_input_sig;
    int cache_bound;
    int eager;
    int tiered;                 /* tj_function_options.tiered: 1 on, < 0 off, 0 TJ_TIERED's */
    const jit_backend *backend; /* tj_function_options.backend resolved; NULL: TJ_BACKEND's */
    int outputs_host;           /* tj_function_options.output_device: 1 "cpu", 0 as configured */
    pthread_mutex_t mu;
    _Atomic(jit_snapshot *) cache;
    atomic_uint epoch;                 /* parity: the reader counter new calls join */
    atomic_uint_fast64_t active[2];    /* calls inside their read-side section, per parity */
    jit_retired *graveyard;            /* retired snapshots and concrete functions (under mu) */
    jit_retired *pinned;               /* evicted concrete functions the user holds */
    uint64_t retire_seq, zero_seen[2]; /* under mu: see reclaim() in function.c */
    tj_variable **owned_vars;          /* created while tracing f: released with f (under mu) */
    size_t n_owned_vars;
    atomic_uint_fast64_t n_calls;
    atomic_int n_traces;
    int has_concrete;        /* a trace has succeeded (under mu) */
    uint64_t trace_calls[5]; /* call index of the last 5 traces (retrace warning) */
    int n_warnings;
};

/* tj_function_new_body with a destructor for `user` (called on failure too). */
tj_function *jit_function_new_body(const char *name, tj_body body, int nargs, void *user,
                                   void (*free_user)(void *), const tj_function_options *opts);

/* function headers live in an rt_arena (function.c), so a freed handle is recognised */
enum { JIT_FN_NONE = 0, JIT_FN_ALIVE, JIT_FN_FREED };
int jit_fn_state(const tj_function *f); /* JIT_FN_NONE for anything not made by tj_function_new */

static inline int jit_fn_alive(const tj_function *f) {
    return jit_fn_state(f) == JIT_FN_ALIVE;
}

/* signature.c */
uint64_t jit_hash_static(const tj_tensor *t, uint64_t h);
uint64_t jit_sig_hash(const jit_argsig *sig, int nargs);
void jit_tf_shape(char *buf, size_t n, int rank, const int64_t *dims); /* "(2, 3)", "(None,)" */
int jit_arg_matches(const jit_argsig *want, const tj_tensor *t);
void jit_sig_free(jit_argsig *sig, uint32_t n);
/* Checks a spec's dtype and dims (-1: unknown); the error names `what` and index i. */
tj_status jit_check_spec(const char *what, int i, const tj_spec *sp);
jit_argsig *jit_sig_copy(const jit_argsig *sig, uint32_t n); /* statics retained */
/* function.c */
/* TJ_OK for a live function; an error naming `what` for NULL, freed or foreign handles. */
tj_status jit_check_fn(const char *what, const tj_function *f);
/* An error if f is being traced on this thread (its lock is held: a re-entry would deadlock). */
tj_status jit_check_not_tracing(const char *what, const tj_function *f);
tj_tensor *jit_check_args(const char *what, const tj_function *f, int nargs,
                          tj_tensor *const *args);
tj_concrete *jit_build_concrete(tj_function *f, const jit_argsig *sig, uint64_t h,
                                tj_tensor *const *args, uint64_t call_idx); /* f->mu held */
/* Adds c to f's cache (a new snapshot, evicting the least recently used entry beyond the bound)
 * and frees what no call can still use. f->mu held. */
tj_status jit_fn_publish(tj_function *f, tj_concrete *c);
void jit_concrete_free(tj_concrete *c);
tj_tensor *jit_run_concrete(tj_concrete *c, tj_tensor *const *args);
/* tj_concrete_call's result unscoped (a new reference). */
tj_tensor *jit_concrete_call(tj_concrete *c, int nargs, tj_tensor *const *args);
/* NULL when args[0..nargs) match c's signature, else the error tensor naming the input. */
tj_tensor *jit_concrete_check_args(const tj_concrete *c, int nargs, tj_tensor *const *args);
/* A concrete function for a graph that was not traced here (a saved module's): `name`
 * (borrowed, outliving it), the signature specs[0..nargs), the variables of its capture slots
 * (retained), compiled like a trace for backend b; or, given a program image that b wrote
 * (b->write, of this very graph: g is taken as optimized), made from the image by b->read without
 * compiling. Freed with jit_concrete_free. NULL with the error set (an image that cannot run here:
 * TJ_ERR_UNSUPPORTED). */
tj_concrete *jit_concrete_from_graph(const char *name, const ir_graph *g, const tj_spec *specs,
                                     int nargs, tj_variable *const *caps, uint32_t n_caps,
                                     int result_kind, uint64_t hash, const jit_backend *b,
                                     const void *image, size_t image_size);

/* The backend f compiles for (f may be NULL: a saved module's function): f's option, else
 * TJ_BACKEND's choice, else the registry's first available backend. An error naming TJ_BACKEND
 * when it names an unknown or unavailable backend. */
tj_status jit_fn_backend(const tj_function *f, const jit_backend **out);
/* Compiles a traced graph into a program: runs the pass pipeline (consuming nothing; returns the
 * optimized graph in *opt) then backend b (shape_generic: jit_backend_opts'). NULL with the
 * error set. */
rt_program *jit_compile_graph(const ir_graph *traced, const char *fn_name, uint64_t sig_hash,
                              const jit_backend *b, bool shape_generic, ir_graph **opt);
/* The two halves of jit_compile_graph: the pass pipeline (a new optimized graph, caller frees;
 * NULL with the error set), composites written as primitives where b does not lower them
 * (b->native) or TJ_DECOMPOSE=1 asks, and backend b's program for an optimized graph (the
 * interpreter's when b declines or fails on it, logged under TJ_LOG=compile). The program reads g,
 * which must outlive it. */
ir_graph *jit_optimize_graph(const ir_graph *traced, const char *fn_name, uint64_t sig_hash,
                             const jit_backend *b);
rt_program *jit_backend_program(const ir_graph *g, const char *fn_name, const jit_backend *b,
                                bool shape_generic);
/* The same with quick (jit_backend_opts) chosen: jit_backend_program's is the configuration's
 * (TJ_QUICK_COMPILE); a hot signature's recompile asks quick = false. */
rt_program *jit_backend_program_opts(const ir_graph *g, const char *fn_name, const jit_backend *b,
                                     bool shape_generic, bool quick);
/* b's program for g from code already compiled (b's code cache, in this process or on disk; a
 * program that needs no generated code), or NULL with no error: it would have to generate code
 * (the interpreter: always NULL). */
rt_program *jit_backend_program_cached(const ir_graph *g, const char *fn_name, const jit_backend *b,
                                       bool shape_generic);

/* A signature with unknown dims, called at args' shapes: its graph at those shapes compiled as a
 * later signature's is (shape-generic kernels; the code cache first; tiered as the function
 * is), kept per shape (up to JIT_MAX_INSTANCES, the interpreter after). NULL: c has none to run
 * (the caller runs c's own program, whose interpreter reports any shape error). The instances
 * are c's: jit_instances_free (from jit_concrete_free) frees them. */
enum { JIT_MAX_INSTANCES = 32 };
tj_concrete *jit_instance(tj_concrete *c, tj_tensor *const *args);
void jit_instances_free(tj_concrete *c);
/* Releases the background compiles of c's instances (tj_function_wait_compiled). */
void jit_instances_go(tj_concrete *c);

/* Tiered concrete functions (tracing.c): marks c's background compile pending (c->prog is the
 * interpreter's program; the compile's thread starts when released); cancels or joins it
 * (c->tier1 is final after); the program a call runs. */
void jit_tier_up_start(tj_concrete *c);
void jit_tier_join(tj_concrete *c);
/* Releases c's compile: how 1 starts its thread (after c's second call, or when native code is
 * waited for), 2 cancels one not started. Only the first release counts. */
void jit_tier_go(tj_concrete *c, int how);
/* The final program of c: starts its compile if not released yet, then joins it (pictures and
 * saved modules want the native code, not a cancelled compile). */
void jit_tier_finish(tj_concrete *c);
void jit_tier_wait_all(void); /* until every released compile has finished */
static inline rt_program *jit_concrete_program(const tj_concrete *c) {
    rt_program *t = atomic_load_explicit(&((tj_concrete *)c)->tier2, memory_order_acquire);
    if (!t)
        t = atomic_load_explicit(&((tj_concrete *)c)->tier1, memory_order_acquire);
    return t ? t : c->prog;
}
/* A hot signature: JIT_RESPECIALIZE_CALLS calls within JIT_HOT_MS milliseconds (short calls,
 * where a microsecond counts). When its program says the backend's best code would run faster
 * (rt_program.recompile_pays: shape-generic code with small kernels unchained, or quick code
 * with small kernels), that code (specialized, not quick) is compiled in the background and
 * takes over as tier2. A program whose calls take milliseconds is never compiled again. */
enum { JIT_RESPECIALIZE_CALLS = 1000, JIT_HOT_MS = 1000 };
void jit_respecialize(tj_concrete *c);
/* Joins c's re-specialization and frees its program (jit_concrete_free). */
void jit_respecialize_free(tj_concrete *c);

/* The constant-folding evaluator handed to the pass pipeline: runs the reference kernel. */
tj_status jit_fold_eval(void *user, ir_graph *g, const ir_node *node, const uint32_t *in,
                        uint32_t n_in, uint32_t *blob_out);

/* Hash of a call's signature; fills sig (statics borrowed, not retained). */
uint64_t jit_signature(int nargs, tj_tensor *const *args, jit_argsig *sig);
/* jit_signature's hash without filling a signature (the cache-hit path). */
uint64_t jit_args_hash(int nargs, tj_tensor *const *args);
/* Writes "int32[2,3]" or "static 1" for an arg signature. */
void jit_argsig_str(const jit_argsig *s, char *buf, size_t n);

/* ---- the artifact cache (cache.c) ----------------------------------------------------------- */
typedef struct jit_cache_stats {
    uint64_t mem_hits, disk_hits, misses, corrupt, stores;
    size_t mem_bytes;
} jit_cache_stats;
/* Looks up compiled code by its full key: TJ_OK with a malloc'd copy in *data (caller frees), or
 * a negative status for a miss (absent, disabled, or a corrupt entry that was deleted). */
tj_status jit_cache_get(const char *key, void **data, size_t *size);
/* Stores compiled code in memory and on disk (atomically). */
tj_status jit_cache_put(const char *key, const void *data, size_t size);
void jit_cache_get_stats(jit_cache_stats *out);
/* Overrides the directory (NULL: TJ_CACHE_DIR or the default), on/off (-1: TJ_CACHE), and the
 * memory bound in bytes (0: unchanged). For tests and embedders. */
void jit_cache_configure(const char *dir, int enabled, size_t mem_bound_bytes);
void jit_cache_clear_memory(void);
/* A disk entry (header, key, payload) for key and payload, malloc'd (*n bytes); NULL on OOM. */
void *jit_cache_encode(const char *key, const void *payload, size_t size, size_t *n);
/* Checks a disk entry held in memory (n bytes: header, key, payload) against `key`: TJ_OK with the
 * payload's offset and size, or TJ_ERR_CORRUPT naming what is wrong. Never reads outside
 * [file, file + n). The reader the fuzzer drives (tests/fuzz/fuzz_cache.c). */
tj_status jit_cache_decode(const void *file, size_t n, const char *key, size_t *off, size_t *size);
/* Overrides TJ_CACHE_MAX_BYTES (0: back to it). For tests and embedders. */
void jit_cache_set_disk_bound(size_t bytes);

#endif
