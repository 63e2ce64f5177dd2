/* runtime.h — the internal interface of runtime/, the execution runtime: tensors and buffers,
 * scopes, the reference kernels, variables, programs (the executable form of a graph; the
 * interpreter is one, jit backends add others behind the same vtable) and the executor, the
 * object loader, the thread pool, profiles, check numerics and configuration. runtime/ knows
 * nothing of compilers or of tracing: the op entry points, tracing, control flow and tapes are
 * the floor above (api/api.h). It can run any program handed to it. */
#ifndef TJ_RUNTIME_H
#define TJ_RUNTIME_H

#if defined(TJ_LAYER_IR) || defined(TJ_LAYER_PASSES)
#error "runtime/ is above ir/: this layer may not use it"
#endif

#include <stdatomic.h>
#include <stddef.h>
#include <string.h>
#include <pthread.h>

#include "ir/ir.h"

/* ---- buffers and tensors --------------------------------------------------------------------- */
typedef struct rt_buffer { /* 56 bytes: the header and its data's first line share a block */
    atomic_int rc;
    uint8_t inline_data; /* data lives in the same allocation as this header */
    uint8_t immutable;   /* tj_tensor_adopt or a graph constant: never written, so a trace that
                            captures the tensor shares it as a blob (rt_const_blob), no copy */
    uint8_t device_data; /* data came from device->vt->alloc, which frees it */
    void *data;
    size_t size;
    void (*release)(void *user); /* borrowed memory: called instead of free */
    void *user;
    int64_t n_strings;        /* > 0: data holds tj_string elements whose .data this buffer owns */
    struct rt_device *device; /* where data lives (device.h); NULL: the host */
} rt_buffer;

enum { RT_CONCRETE = 0, RT_SYMBOLIC, RT_ERROR, RT_TUPLE, RT_FREED /* in quarantine */ };

struct tj_tensor {
    atomic_int rc;
    uint8_t kind;
    uint8_t dtype; /* tj_dtype */
    uint8_t rank;
    uint8_t is_static;    /* tj_static_*: part of a signature by value */
    uint8_t host_scalar;  /* tj_scalar_* / tj_static_*: takes the other operand's dtype in ops */
    uint8_t tensor_array; /* RT_TUPLE: a tensor array (data, written mask), see tensor_array.c */
    uint8_t on_device;    /* RT_CONCRETE: buf's memory is not the host's (device.h); kept here, in
                             the line a call reads anyway, so checking it costs no buffer read */
    int64_t numel;
    int64_t dims[TJ_MAX_RANK];
    /* RT_CONCRETE */
    void *data;
    rt_buffer *buf;
    /* RT_SYMBOLIC */
    struct rt_trace *trace; /* may dangle once the trace ends: check rt_trace_is_live */
    uint64_t trace_serial;
    uint32_t node;
    /* RT_ERROR */
    tj_status code;
    char *msg;
    /* RT_TUPLE */
    int n_items;
    tj_tensor **items;
};

/* A copy of src's header into dst for a kernel's local use (its data pointer or extents then
 * changed), read without src's reference count, which other threads may be changing at the same
 * time (a tensor shared by threads); dst's count is 1 and nothing owns it. */
static inline void rt_header_copy(tj_tensor *dst, const tj_tensor *src) {
    size_t from = offsetof(tj_tensor, kind);
    memcpy((char *)dst + from, (const char *)src + from, sizeof *dst - from);
    atomic_init(&dst->rc, 1);
}

/* A concrete tensor with a fresh 64-byte aligned zeroed buffer. Returns NULL on OOM (error set).
 * The returned reference is NOT registered in any scope (runtime-internal). */
tj_tensor *rt_tensor_alloc(int dtype, int rank, const int64_t *dims);
/* The same with the data left uninitialised (for kernels that write every element; not for
 * strings, which are always zeroed). */
tj_tensor *rt_tensor_alloc_uninit(int dtype, int rank, const int64_t *dims);
/* A concrete tensor header of that type with no buffer yet (device.c gives it one), or NULL
 * with the error set. */
tj_tensor *rt_tensor_header(int dtype, int rank, const int64_t *dims);
/* A concrete tensor over immutable data it does not own (not scoped): release(ctx) runs when
 * its last reference goes. NULL on OOM (error set). */
tj_tensor *rt_tensor_wrap(int dtype, int rank, const int64_t *dims, void *data,
                          void (*release)(void *ctx), void *ctx);
/* Drops one reference to a buffer, freeing it (and its strings) with the last. */
void rt_buffer_release(rt_buffer *b);
/* An error tensor from the thread's current error (ir_last_error). Unscoped. */
tj_tensor *rt_error_from_status(tj_status code);
tj_tensor *rt_errorf(tj_status code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The library's own reference counting (tj_retain/tj_release are the user's: lifetime.c). */
tj_tensor *rt_retain(tj_tensor *t);
void rt_release(tj_tensor *t);
/* Around a call of user code that returns a tensor (a traced function, a body, a branch):
 * rt_user_leave gives a reference the code retained and returned to the innermost scope, so the
 * result is scope-owned either way. Returns r. */
typedef struct rt_user_mark {
    size_t at, prev;
} rt_user_mark;
rt_user_mark rt_user_enter(void);
tj_tensor *rt_user_leave(tj_tensor *r, rt_user_mark m);
/* Called for every error tensor made: while a host callback runs, keeps the first (effects.c). */
void rt_callback_note_error(tj_status code, const char *msg);
/* An unscoped tuple retaining its items. */
tj_tensor *rt_tuple_new(int n, tj_tensor *const *items);
/* A deep copy of a concrete tensor (strings too), keeping its static / host-scalar marks.
 * Unscoped; NULL with the error set. */
tj_tensor *rt_tensor_clone(const tj_tensor *t);
/* t as an ordinary tensor argument: a new reference to t, or, for a host scalar or static value,
 * to a new header sharing its buffer without those marks. NULL with the error set on OOM. */
tj_tensor *rt_tensor_plain(tj_tensor *t);
/* A new header on t's buffer (a concrete t; others: a new reference to t), without the static
 * and host-scalar marks: the same values under another identity (for tapes). NULL on OOM. */
tj_tensor *rt_tensor_alias(tj_tensor *t);
/* A new header over concrete t's buffer (one more reference to it) with another shape of the
 * same element count: a reshape that copies nothing. Unscoped; NULL on OOM. */
tj_tensor *rt_tensor_view(tj_tensor *t, int rank, const int64_t *dims);
/* Whether t may receive a call's results (tj_call_into): concrete, not static, not immutable,
 * its buffer its own (no view shares it). `what` and `k`
 * name the call and the output in the error. */
tj_status rt_check_output(const tj_tensor *t, const char *what, int k);
/* Copies src's elements into dst (a caller's tensor): same dtype and dims, not strings. */
tj_status rt_copy_into(tj_tensor *dst, const tj_tensor *src);
/* Whether t is a released header still in quarantine (a use after release); reports it (error
 * and the "misuse" log topic) naming `what`. */
int rt_is_freed(const tj_tensor *t, const char *what);
/* Registers a new reference in the innermost scope, if any; returns t. Every public function
 * returning a tensor passes it through here. */
tj_tensor *rt_scoped(tj_tensor *t);
/* Fills a descriptor node (op PARAM) with t's dtype and dims, for ir_infer. */
void rt_desc(const tj_tensor *t, ir_node *desc);
/* Deep-copies string elements into a new buffer-owned array (for string kernels). */
char *rt_strdup_len(const char *s, size_t n);

/* ---- reference kernels (runtime/kernels/) ---------------------------------------------------- */
/* Runs a pure op: `n` carries op, attrs and the concrete output dtype/dims (already inferred);
 * `in` are concrete inputs (n->n_in of them); `out` was allocated by the caller with n's
 * dtype/dims. Ops handled here: every op but the IR_F_PLUMB ones (sources the executor binds,
 * variables, effects, control flow). Returns TJ_OK or an error (set with ir_errorf) naming the
 * op. The call checks the operands, then runs rt_ref_kernels[op]. */
tj_status rt_ref_kernel(const ir_node *n, tj_tensor *const *in, tj_tensor *out);
/* Each op's reference kernel, indexed by op (runtime/kernels/dispatch.c); NULL for the ops the
 * executor runs itself. Called only through rt_ref_kernel, which checks the operands first. */
typedef tj_status (*rt_ref_fn)(const ir_node *n, tj_tensor *const *in, tj_tensor *out);
extern const rt_ref_fn rt_ref_kernels[IR_N_OPS];
/* The output buffer of n's reference kernel (n's dtype and dims): uninitialised when the op's
 * kernel writes every element (IR_F_FILLS in ops.def), zeroed for the others, which accumulate.
 * NULL with the error set. */
tj_tensor *rt_kernel_output(const ir_node *n);
/* Writes the values of t (not the header) in NumPy style: "[4 1]", "2.2", "aa". */
char *rt_values_str(const tj_tensor *t);
/* Host code asked for the value of symbolic tensor t (`what` names the accessor): sets the error
 * and, if t belongs to an open trace, fails that trace (a value decided at trace time would be
 * frozen into the graph: a silent wrong result). */
void rt_refuse_host_read(const tj_tensor *t, const char *what);

/* ---- handles (handles.c): slots at addresses never reused --------------------------------------
 */
/* Objects allocated from an arena start with a uint32 magic; a freed one reads RT_DEAD_MAGIC or
 * zero, so a stale handle is recognised for any number of frees. */
#define RT_DEAD_MAGIC 0xdeadf00du
typedef struct rt_arena {
    pthread_mutex_t mu;
    char *region;
    size_t size, next;
    size_t slot; /* a power of two dividing the page size */
} rt_arena;
#define RT_ARENA_INIT(slot_size)                                                                   \
    { PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0, (slot_size) }
void *rt_arena_alloc(rt_arena *a);                    /* a zeroed slot; NULL with the error set */
int rt_arena_holds(const rt_arena *a, const void *p); /* p is one of a's slots (live or dead) */
/* Scrubs obj_size bytes of p, marks it dead, returns fully dead pages to the kernel. */
void rt_arena_release(rt_arena *a, void *p, size_t obj_size);

/* ---- variables ------------------------------------------------------------------------------- */
#define RT_VAR_MAGIC 0x746a7661u
struct tj_variable {
    uint32_t magic;            /* RT_VAR_MAGIC while alive (the slot lives in an rt_arena) */
    atomic_int rc;             /* the owner's reference + one per capturing graph */
    atomic_int user_ref;       /* 1 while the creator's reference is held (tj_variable_free) */
    int owned_by_trace;        /* created while tracing: the traced function owns it */
    pthread_mutex_t mu;        /* guards the value pointer swap */
    pthread_mutex_t update_mu; /* recursive: held across read-modify-write and compiled runs */
    tj_tensor *value;          /* concrete; replaced (not mutated) on assign; NULL while only
                                  dev_value is current (copied back on the first host read) */
    tj_tensor *dev_value;      /* its copy on a device (a GPU program's reads and assigns), or
                                  NULL: kept there across calls, current with value */
    uint8_t dtype, rank;       /* fixed at creation: every assign must match */
    int64_t dims[TJ_MAX_RANK];
    char *name;
    uint64_t id;
};
/* Serialises updates: assign_add/assign_sub and compiled functions that assign v hold it. */
void rt_variable_lock(tj_variable *v);
void rt_variable_unlock(tj_variable *v);
/* TJ_OK for a live variable; an error naming `what` for NULL or a freed handle. */
tj_status rt_variable_check(const tj_variable *v, const char *what);
tj_variable *rt_variable_retain(tj_variable *v);
void rt_variable_release(tj_variable *v);
/* +1 ref on the current value, on the host (copied back from its device copy when an assign
 * there made that the current one; an error tensor if that copy fails) */
tj_tensor *rt_variable_get(tj_variable *v);
tj_status rt_variable_set(tj_variable *v, tj_tensor *value); /* checks dtype/shape; retains */
/* A device program's read: the value on device d (+1 ref), copied there once and kept until an
 * assign replaces it; NULL with the error set when the copy fails. */
struct rt_device;
tj_tensor *rt_variable_get_on(tj_variable *v, struct rt_device *d);
/* A device program's assign of a value on a device: it becomes the current value there, the
 * host's copy is made only when the host reads it. */
tj_status rt_variable_set_device(tj_variable *v, tj_tensor *value);
/* An error naming the variable unless dtype, rank and dims are its own. */
tj_status rt_variable_check_value(const tj_variable *v, int dtype, int rank, const int64_t *dims);
/* A new variable holding value (taken: a plain concrete tensor), named `name` (NULL or "":
 * "Variable_<id>"); owned by its creator, or by the traced function when owned_by_trace. NULL
 * on OOM (value released). */
tj_variable *rt_variable_create(tj_tensor *value, const char *name, int owned_by_trace);

/* ---- the thread's mode, and symbolic tensors ------------------------------------------------
 * The tracer (api/trace.c) tells the runtime what it needs of traces; the runtime never asks it.
 * rt_tracing is 1 while a trace records this thread's ops (set as traces open, close, suspend and
 * resume). A symbolic tensor's trace is opaque here: the tracer registers how to name one and
 * what a refused host read of its value does, before the first symbolic tensor exists. */
extern _Thread_local int rt_tracing;
typedef struct rt_symbolic_ops {
    /* t's name as TensorFlow prints it: "x:0", "add_3:0"; "<escaped>:0" once its trace ended */
    void (*name)(const tj_tensor *t, char *buf, size_t n);
    /* a host read of t's value was refused (the error is set): fails t's trace if it is open on
     * this thread, so the function reports it */
    void (*refused)(const tj_tensor *t);
} rt_symbolic_ops;
void rt_set_symbolic_ops(const rt_symbolic_ops *ops);

/* ---- programs: the executable form of a graph ------------------------------------------------ */
typedef struct rt_program rt_program;
typedef struct rt_program_vt {
    /* Runs with concrete args (already checked against the signature) and the captured
     * variables. For each output k: if outs[k] is NULL on entry, a new unscoped reference is
     * written there; otherwise outs[k] is a caller tensor of the output's dtype and shape that
     * receives the values (tj_call_into) and is left as it is. */
    tj_status (*run)(rt_program *p, tj_tensor *const *args, uint32_t n_args, tj_variable **caps,
                     tj_tensor **outs);
    void (*free)(rt_program *p);
    const char *name; /* "interp", "cpu", ... */
    /* Optional (NULL: none), for loops (exec.c): the program's raw form, which runs on data
     * pointers and allocates nothing. raw_bytes(p) is the scratch one run needs (64-byte
     * aligned), 0 when p has no raw form (it reads variables, has side effects or strings, or a
     * node only the executor runs). run_raw reads param k's elements at in[k] and writes output
     * k into out[k] (caller memory of the output's dtype and shape that aliases no in[j]).
     * It returns TJ_OK or RT_RAW_REDO: a node has an error to report, so the caller runs the
     * node the usual way (a program with a raw form is pure: running again is safe). */
    size_t (*raw_bytes)(const rt_program *p);
    tj_status (*run_raw)(rt_program *p, void *const *in, void *const *out, void *scratch);
    /* Optional: the param whose memory output k may be written over (out[k] == in[param]: the
     * output is that param updated in place, e.g. a tensor-array write, and nothing else reads
     * the param), or -1. */
    int32_t (*raw_inplace)(const rt_program *p, uint32_t k);
    /* Optional (pictures and profiles): the kernels p runs. Fills kernel_of[id] for every node
     * of p->g with the index of the kernel that computes it, or -1 (a parameter, a constant
     * read in place, a node that does not run), and returns the number of kernels; *names
     * (owned by p) labels them. */
    uint32_t (*kernels)(const rt_program *p, int32_t *kernel_of, const char *const **names);
} rt_program_vt;
#define RT_RAW_REDO 1
/* Runs loop node i of g (WHILE, FOR, SCAN) on its regions' raw forms (exec_raw.c): results into
 * res, or RT_RAW_REDO when that path does not apply (the caller runs the loop as usual). */
tj_status rt_loop_raw(const ir_graph *g, uint32_t i, rt_program *r0, rt_program *r1,
                      tj_tensor **ins, tj_tensor **res);
/* Loop nodes run that way so far in the process (for tests and profiles). */
uint64_t rt_raw_loop_count(void);
struct rt_program {
    const rt_program_vt *vt;
    const ir_graph *g; /* borrowed: owned by the concrete function */
    /* code that the backend's best code for these shapes would run faster: shape-generic code
     * whose small kernels were left unchained, or quick code (jit_backend_opts.quick) with small
     * kernels; a hot signature compiles that too (jit/tracing.c) */
    bool recompile_pays;
};

/* The interpreter: runs the graph node by node with the reference kernels. Const payloads are
 * materialised once here. */
rt_program *rt_interp_new(const ir_graph *g);
/* Evaluates node `id` of g with the given args and captures (used for variable initialisers
 * on a trace and for constant folding). Returns an unscoped reference or NULL (error set). */
tj_tensor *rt_eval_node(const ir_graph *g, uint32_t id, tj_tensor *const *args, uint32_t n_args,
                        tj_variable **caps);
/* A concrete tensor from a CONST node's blob, and the blob bytes for a tensor (const.c). */
tj_tensor *rt_const_tensor(const ir_graph *g, const ir_node *n);
uint32_t rt_const_blob(ir_graph *g, const tj_tensor *t);

/* ---- the shared node step (exec.c) ---------------------------------------------------------- */
typedef struct rt_exec_env {
    tj_tensor *const *args; /* the call's arguments (PARAM i reads args[i]) */
    uint32_t n_args;
    tj_variable **caps; /* captured variables by slot (VAR_READ, ASSIGN) */
    tj_tensor **consts; /* per node: materialised CONST payloads, or NULL (built on demand) */
    rt_program *const *regions; /* per node, two each: the programs running a control-flow
                                   node's regions (regions[2 * i + k]); NULL: none */
    int effects;                /* 0: values only (no print, callback or assignment) */
    int reinfer;                /* the graph has unknown dims: shapes come from the actual inputs */
    int check_params;           /* arguments must match their PARAM's dtype and dims exactly */
    const char *who;            /* names the executor in messages ("interp", "cpu program") */
    struct rt_device *device;   /* a device plan's device: arguments may be there, variables are
                                   read there and assigned there (NULL: the host) */
} rt_exec_env;
/* Runs node i of g: reads its inputs from vals into ins (room for n_in), writes vals[i] (a new
 * reference; none for print and callbacks). Sources, variables, side effects and reference
 * kernels: what a node means when it runs, for every executor. `reuse` (NULL: none) is a
 * concrete tensor of the node's dtype and dims that its reference kernel writes instead of a
 * new one: an elementwise node's dying input, which nothing else holds (runtime/interp.c). */
tj_status rt_exec_node(const ir_graph *g, uint32_t i, const rt_exec_env *env, tj_tensor **vals,
                       tj_tensor **ins, tj_tensor *reuse);

/* Builds the region programs of g's control-flow nodes with `compile` (*out: NULL when g has
 * none; two entries per node, see rt_exec_env.regions), and frees them. */
tj_status rt_regions_new(const ir_graph *g, rt_program *(*compile)(const ir_graph *, void *),
                         void *ctx, rt_program ***out);
void rt_regions_free(rt_program **regions, const ir_graph *g);

/* Side effects shared by eager execution and programs. */
tj_status rt_do_print(const char *prefix, tj_tensor *const *xs, uint32_t n);
tj_status rt_do_callback(void *fn, void *user, tj_tensor *const *xs, uint32_t n);

/* ---- OpenBLAS (runtime/blas.c; eager convolutions and compiled products share it), opened with
 * dlopen on first use ----------------------------------- */
typedef void (*rt_sgemm_fn)(int order, int ta, int tb, int m, int n, int k, float alpha,
                            const float *a, int lda, const float *b, int ldb, float beta, float *c,
                            int ldc);
typedef void (*rt_dgemm_fn)(int order, int ta, int tb, int m, int n, int k, double alpha,
                            const double *a, int lda, const double *b, int ldb, double beta,
                            double *c, int ldc);
typedef struct rt_blas {
    rt_sgemm_fn sgemm; /* cblas_sgemm */
    rt_dgemm_fn dgemm; /* cblas_dgemm */
} rt_blas;
/* The library (static), or NULL when it is absent or TJ_NO_BLAS=1 (read at every call). */
const rt_blas *rt_blas_get(void);
/* "openblas core=Zen threads=2" or why it is unavailable: what the benchmarks report. Static. */
const char *rt_blas_info(void);

/* ---- profiles (profile.c) -------------------------------------------------------------------- */
extern atomic_int rt_profiling; /* 1 while a profile is being recorded */
#define RT_PROFILING()                                                                             \
    __builtin_expect(atomic_load_explicit(&rt_profiling, memory_order_relaxed), 0)
double rt_profile_now(void); /* microseconds, monotonic */
/* Records a complete event of kind `cat` (a static string) named `name` from t0 to now on this
 * thread; args_fmt (may be NULL) formats the members of its "args" object (JSON). */
/* s escaped as the contents of a JSON string into buf (n bytes; cut at a character, never in an
 * escape). Any text from a user (a function's name) goes into an event's args through this. */
const char *rt_profile_json(char *buf, size_t n, const char *s);
void rt_profile_event(const char *cat, const char *name, double t0, const char *args_fmt, ...)
    __attribute__((format(printf, 4, 5)));
void rt_profile_from_env(const char *path); /* TJ_PROFILE: start now, write at exit */
const char *rt_profile_dims(char *buf, size_t n, int rank, const int64_t *dims);

/* ---- checkpoints (checkpoint.c) -------------------------------------------------------------- */
/* Parses and checks a checkpoint image as tj_checkpoint_restore does (for the fuzzer): TJ_OK
 * with the variable count in *n, or the error. */
tj_status rt_checkpoint_parse(const unsigned char *p, size_t size, uint32_t *n);
/* Reads a checkpoint whole: its names (caller frees each and the array) and values (new
 * references). */
tj_status rt_checkpoint_read(const char *path, uint32_t *n, char ***names, tj_tensor ***values);
/* Reads a regular file of at most max bytes (a NUL after it; caller frees); errors name
 * `what` and the file. */
tj_status rt_read_file(const char *what, const char *path, size_t max, unsigned char **out,
                       size_t *size);
uint64_t rt_fnv1a(const void *p, size_t n); /* FNV-1a 64, the checksum of saved files */

/* ---- check numerics (numerics.c) ------------------------------------------------------------- */
extern atomic_int rt_check_numerics; /* tj_enable_check_numerics, TJ_CHECK_NUMERICS=1 */
#define RT_CHECKING_NUMERICS()                                                                     \
    __builtin_expect(atomic_load_explicit(&rt_check_numerics, memory_order_relaxed), 0)
/* The first NaN or infinity of a float tensor (its index; *is_nan says which), or -1. */
int64_t rt_numerics_first_bad(const tj_tensor *t, int *is_nan);
/* Sets and returns the error "check_numerics: op %<node> '<op>' (<dtype><dims>) produced NaN at
 * element <at> <where> <context>" (node < 0: not printed). */
tj_status rt_numerics_error(const char *where, const char *op, int64_t node, const tj_tensor *t,
                            int64_t at, int is_nan, const char *context);
/* Runs `nodes` of g (a kernel's, in any order) again one by one on the reference kernels, their
 * other inputs taken from vals, and returns the error naming the first whose result has a NaN
 * or infinity; TJ_OK when none has (the kernel's own arithmetic differs). */
tj_status rt_numerics_locate(const ir_graph *g, const uint32_t *nodes, uint32_t n_nodes,
                             const rt_exec_env *env, tj_tensor *const *vals, const char *context);

/* ---- configuration and logging (read once from the environment) ------------------------------ */
typedef struct rt_config {
    int eager;
    unsigned log_topics; /* RT_LOG_* bits */
    const char *dump_dir;
    const char *passes;
    const char *cache_dir;
    int cache_enabled;
    size_t cache_max_bytes; /* TJ_CACHE_MAX_BYTES: the disk cache's bound (default 1 GiB) */
    int num_threads;
    const char *backend; /* TJ_BACKEND: "cpu" (default) or "interp" */
    int tiered;          /* 1 unless TJ_TIERED=0: a function's new signature runs its first calls
                            on the interpreter while LLVM compiles in the background, unless its
                            tj_function_options.tiered says otherwise */
    int exact_math;      /* TJ_EXACT_MATH=1: compiled transcendentals call libm (bit-exact) */
    int no_direct_conv;  /* TJ_DIRECT_CONV=0: f32 convolutions always use im2col + OpenBLAS */
    int decompose;       /* TJ_DECOMPOSE=1: every backend gets composite ops as primitives */
    int compile_threads; /* TJ_COMPILE_THREADS: how many parts a large module compiles in at once,
                            a thread each (1 to JIT_CPU_MAX_PARTS; default the cores, at most 8) */
    bool quick_compile;  /* a signature's first native code compiled quick (jit_backend_opts.quick);
                            TJ_QUICK_COMPILE=0 turns it off */
    int isa_cap;         /* TJ_ISA: the highest RT_ISA_* the kernels may use; -1 when unset */
    const char *cuda_driver; /* TJ_CUDA_DRIVER: the driver library to open (runtime/cuda.h) */
    bool cuda_sync;          /* TJ_CUDA_SYNC=1: wait for every kernel (a fault names its kernel) */
    bool cuda_graphs;        /* runs of generated kernels replayed as CUDA graphs (TJ_CUDA_GRAPHS=0:
                                every kernel launched on its own) */
    /* TJ_CUDA_EMULATE: the CUDA backend's kernels compiled for the host by this C compiler
     * ("cc") instead of NVRTC, for the tests' fake driver, which runs them (jit/cuda/emulate.c) */
    const char *cuda_emulate;
    bool outputs_host; /* TJ_OUTPUT_DEVICE=cpu: functions' results copied to the host */
    /* TJ_CUDA_MAX_BLOCKS: the most blocks a generated kernel's grid has (default 65535 * 16);
     * the kernels loop grid-stride over the rest (a test makes it small to exercise that) */
    unsigned cuda_max_blocks;
    int cuda_device; /* TJ_CUDA_DEVICE: the GPU the CUDA backend compiles for (default 0) */
} rt_config;
enum {
    RT_LOG_RETRACE = 1,
    RT_LOG_COMPILE = 2,
    RT_LOG_PASSES = 4,
    RT_LOG_MISUSE = 8,
    RT_LOG_CACHE = 16,
    RT_LOG_ALL = 31
};
const rt_config *rt_config_get(void);

/* ---- the CPU's vector instruction set (isa.c) -------------------------------------------------
 */
/* x86-64's in order (each includes what the one before it can do), then aarch64's Advanced SIMD,
 * which TJ_ISA can only lower to generic. */
enum { RT_ISA_GENERIC = 0, RT_ISA_AVX2 = 1, RT_ISA_AVX512 = 2, RT_ISA_NEON = 3 };
/* The instruction set the hand-written kernels use here: the best the CPU and OS support,
 * lowered by TJ_ISA. Read once; the planner, the kernels and the tests all ask this. */
int rt_isa(void);
const char *rt_isa_name(int isa); /* "generic", "avx2", "avx512", "neon" (static) */
int rt_isa_parse(const char *s);  /* RT_ISA_* for a name, -1 for anything else */
/* Set by a thread that compiles in the background (a tiered function's tier-up): its LLVM
 * compiles run on that thread alone, leaving the other cores to the calls. */
extern _Thread_local int rt_compile_one_thread;
void rt_log(unsigned topic, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int rt_log_enabled(unsigned topic);

/* ---- integer elements of every width --------------------------------------------------------
 * Element i of an integer (or bool) tensor widened to 64 bits: sign- or zero-extended; a uint64
 * above INT64_MAX comes back as its two's-complement bit pattern. */
static inline int64_t rt_int_load(const tj_tensor *t, int64_t i) {
    const void *p = t->data;
    switch (t->dtype) {
    case TJ_I8:
        return ((const int8_t *)p)[i];
    case TJ_U8:
    case TJ_BOOL:
        return ((const uint8_t *)p)[i];
    case TJ_I16:
        return ((const int16_t *)p)[i];
    case TJ_U16:
        return ((const uint16_t *)p)[i];
    case TJ_I32:
        return ((const int32_t *)p)[i];
    case TJ_U32:
        return ((const uint32_t *)p)[i];
    case TJ_I64:
        return ((const int64_t *)p)[i];
    case TJ_U64:
        return (int64_t)((const uint64_t *)p)[i];
    default:
        return 0;
    }
}
/* v modulo 2^bits of dtype dt, extended back to 64 bits as rt_int_load would read it. */
static inline int64_t rt_int_wrap(int dt, int64_t v) {
    uint64_t u = (uint64_t)v;
    switch (dt) {
    case TJ_I8:
        return (int8_t)(uint8_t)u;
    case TJ_U8:
        return (uint8_t)u;
    case TJ_I16:
        return (int16_t)(uint16_t)u;
    case TJ_U16:
        return (uint16_t)u;
    case TJ_I32:
        return (int32_t)(uint32_t)u;
    case TJ_U32:
        return (uint32_t)u;
    default:
        return v;
    }
}
/* Stores v wrapped to t's width (t an integer or bool tensor). */
static inline void rt_int_store(tj_tensor *t, int64_t i, int64_t v) {
    void *p = t->data;
    switch (ir_dtype_size(t->dtype)) {
    case 1:
        ((uint8_t *)p)[i] = (uint8_t)v;
        break;
    case 2:
        ((uint16_t *)p)[i] = (uint16_t)v;
        break;
    case 4:
        ((uint32_t *)p)[i] = (uint32_t)v;
        break;
    default:
        ((uint64_t *)p)[i] = (uint64_t)v;
        break;
    }
}

#endif /* TJ_RUNTIME_H */
