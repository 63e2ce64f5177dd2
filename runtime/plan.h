/* plan.h — the runtime's executable plan and its one run loop (plan.c, plan_raw.c). A plan is a
 * graph's steps in order, each one of a small vocabulary every backend shares:
 *
 *   RT_STEP_NODE    a node as the executor runs it (exec.c): a source, a variable, a side
 *                   effect, a reference kernel; the interpreter is a plan of these alone
 *   RT_STEP_KERNEL  a compiled kernel: a code address, its buffers (node ids, inputs then
 *                   outputs) and its work units, split across the thread pool when large
 *   RT_STEP_GEMM    a matrix product by a library (OpenBLAS, the packed f32 kernels) and the
 *                   compiled kernel of its fused consumers (the epilogue), block by block
 *   RT_STEP_CONV    an f32 convolution by bands of output rows on the direct kernels, its
 *                   epilogue and a max pool behind it while each band is in cache
 *   RT_STEP_CF      a branch or loop lowered to one native function of scalars, which hands
 *                   back to the executor (the node's region programs) when it meets an error
 *
 * A backend decides the steps and fills their code addresses; the runtime runs them, releases
 * each value after its last reader, checks numerics and writes profile events the same way for
 * every backend. A plan with no effects, variables or strings also has a raw form (plan_raw.c):
 * the same steps on data pointers in one scratch block, what a loop's regions run each
 * iteration. Nothing here needs LLVM, the passes or the API layer. */
#ifndef TJ_RUNTIME_PLAN_H
#define TJ_RUNTIME_PLAN_H

#include "runtime/runtime.h"

/* Kernel ABI: bufs holds the step's input data pointers then its output data pointers (then,
 * for a shape-generic kernel, its geometry block: rt_step.geom); [begin, end) is a range of work
 * units (elements, or rows of the loop shape). */
typedef void (*rt_kernel_fn)(void *const *bufs, int64_t begin, int64_t end);
/* Control-flow ABI: bufs holds the node's operands' data then its results'; returns 0, or 1
 * when the run must be redone by the executor (an error to report with its iteration). */
typedef int32_t (*rt_cf_fn)(void *const *bufs);

/* A kernel's work: n_units units of unit_len elements (0 units: nothing to do). */
typedef struct rt_units {
    int64_t n_units, unit_len;
} rt_units;

/* The loop of an elementwise kernel over dims (every output's shape) reading inputs in: the
 * dims with size-1 dims dropped and adjacent dims merged where every input's strides agree; per
 * input its element strides over them (0 where it is broadcast); scalar: every stride 0; flat:
 * one dim, or every input full-size or scalar (one loop over elements). */
typedef struct rt_ew_layout {
    int rank; /* collapsed rank (>= 1) */
    int64_t dims[IR_MAX_RANK];
    int64_t (*st)[IR_MAX_RANK];
    bool *scalar;
    bool flat;
} rt_ew_layout;
/* Fills L (st and scalar malloc'd: rt_ew_layout_free frees them). */
tj_status rt_ew_layout_of(const ir_graph *g, const uint32_t *in, uint32_t n_in, int rank,
                          const int64_t *dims, rt_ew_layout *L);
void rt_ew_layout_free(rt_ew_layout *L);
/* Reduction node n's geometry, size-1 axes ignored: outer kept elements, then len reduced ones
 * (the reduced axes must be adjacent), then inner kept ones; out[o, i] reduces x[o, 0..len, i].
 * false: not one a kernel takes. */
bool rt_red_geometry(const ir_graph *g, const ir_node *n, int64_t *outer, int64_t *len,
                     int64_t *inner);
/* A reduction kernel's work units: rows o when inner is 1, else blocks of up to RT_RED_BLOCK
 * consecutive i of one o (the backend's code generator splits the same way). */
enum { RT_RED_BLOCK = 256 };
rt_units rt_red_units(int64_t outer, int64_t len, int64_t inner);
/* What of a kernel's geometry comes at run time (rt_step.generic): an elementwise loop's outer
 * extents and strides (rt_ew_geom), a reduction's reduced length (one int64). */
enum { RT_GENERIC_EW = 1, RT_GENERIC_RED = 2 };

/* A shape-generic elementwise kernel's geometry block (malloc'd; NULL on no memory): its
 * collapsed dims, then per input its strides over them, rank + n_in * rank int64s. The code was
 * generated for the same collapsed rank and the same zero strides (its structural key). */
int64_t *rt_ew_geom(const rt_ew_layout *L, uint32_t n_in);

/* A matrix product's geometry: batches of [m,k] x [k,n], NumPy-broadcast batch dims whose
 * strides (in matrices, 0 where broadcast) locate each batch's operands. */
typedef struct rt_mm {
    int dt;
    int64_t m, k, n, batches;
    int rank; /* batch rank of the output */
    int64_t dims[IR_MAX_RANK], sa[IR_MAX_RANK], sb[IR_MAX_RANK];
} rt_mm;
/* Fills s for MATMUL node id of g; false if it is not a matmul of concrete numeric shapes. */
bool rt_mm_of(const ir_graph *g, uint32_t id, rt_mm *s);
/* Byte offsets of batch bi's operands. */
void rt_mm_batch(const rt_mm *s, int64_t bi, int64_t *a_off, int64_t *b_off);

/* The fused consumers of a product or a convolution, run by the step's kernel: its buffers
 * (node ids, inputs then outputs; the product's own node among the inputs). */
typedef struct rt_epilogue {
    uint32_t n_in, n_out;
    uint32_t *in, *out;
} rt_epilogue;

enum { RT_STEP_NODE, RT_STEP_KERNEL, RT_STEP_GEMM, RT_STEP_CF, RT_STEP_CONV };
enum { RT_STEP_EPI_ADDS = 4 };

struct rt_packed_b;
typedef struct rt_step {
    int kind;
    uint32_t id; /* NODE, GEMM, CONV, CF: the node; KERNEL: its first output */
    uint32_t n_in, n_out;
    uint32_t *in, *out; /* node ids: the kernel's buffers, inputs then outputs; NODE: the node's
                           inputs and itself */
    rt_kernel_fn fn;    /* KERNEL; GEMM, CONV: the epilogue's; CF: an rt_cf_fn */
    rt_units units;
    uint32_t *nodes, n_nodes; /* the nodes it computes (profiles, numerics, pictures) */
    /* GEMM, CONV */
    rt_mm mm;
    const rt_blas *blas;
    uint32_t src[2];  /* the operands (GEMM: what a folded 2-D transpose reads); CONV: x, w */
    uint8_t trans[2]; /* GEMM: an operand read transposed */
    rt_epilogue epi;  /* n_in + n_out == 0: none */
    uint32_t pool;    /* CONV: 1 + the max pool fused behind it; 0: none */
    /* GEMM, CONV: B (the filter) a constant the packed kernels take, packed at the first run
     * (atomic, owned); packing tried and failed (atomic) */
    struct rt_packed_b *packed;
    int packs, no_pack;
    /* GEMM, CONV: the epilogue is additions and a relu the product's tiles can apply
     * (rt_plan_simple_epi): epi_n_add addends in order, each the epilogue's buffer epi_add[i], a
     * row of the output's last dim (a bias) or, epi_full[i], of the output's shape (a residual) */
    int epi_simple, epi_relu, epi_n_add;
    uint32_t epi_add[RT_STEP_EPI_ADDS];
    uint8_t epi_full[RT_STEP_EPI_ADDS];
    int64_t *raw_res; /* CF in the raw form: the scratch offsets of its results */
    /* KERNEL, GEMM, CONV: the (epilogue's) kernel is shape-generic (RT_GENERIC_*): it takes
     * extents at run time from geom, a pointer passed after its buffers (made from the graph by
     * rt_plan_finish; owned) */
    uint8_t generic;
    int64_t *geom;
} rt_step;

typedef struct rt_plan {
    rt_program base;
    rt_step *steps;
    uint32_t n_steps;
    tj_tensor **consts;   /* per node: materialised CONST payloads (owned) */
    uint32_t *last_use;   /* per node: the last step reading it; UINT32_MAX: a graph output */
    int32_t *out_slot;    /* per node: the first graph output it is, or -1 */
    rt_program **regions; /* control-flow regions (rt_regions_new) */
    char **labels;        /* per step: what it runs ("s3 fused mul add"); NULL: an interpreted
                             plan, whose profile events and numerics errors name ops */
    const char *who;      /* names the executor in messages ("interp", "cpu program") */
    int64_t par_min;      /* elements above which a kernel is split across the pool */
    uint32_t max_bufs;
    int reuse;        /* a node step may write its result over an input that dies there */
    int reinfer;      /* some dims are unknown: shapes come from the actual inputs */
    int check_params; /* arguments must match their PARAM's dtype and dims exactly */
    /* the raw form (plan_raw.c): scratch bytes per run (0: none) and per node where its value
     * lives: RT_RAW_PARAM, RT_RAW_CONST, or an offset into the scratch */
    size_t raw_bytes, raw_hdr;
    int64_t *raw_off;
    int32_t *raw_inplace; /* per output: the param it may overwrite in place, or -1 */
    /* A device plan (dev not NULL: a GPU backend's): its kernel steps run on dev through the
     * backend's launch, with their inputs there (a host value is copied over once a run, a
     * constant once for the plan: dev_consts, per node, owned) and their outputs allocated there;
     * its node steps run on the host with host copies of their inputs; its outputs end on dev.
     * No raw form. */
    struct rt_device *dev;
    tj_status (*launch)(struct rt_plan *p, uint32_t s, void *const *bufs);
    /* Called on the running thread once a device plan's steps are queued (st: how that went),
     * to wait for what they left to check on the device (a kernel's bad-label flag) and say
     * whether the call failed: the call's status. NULL: nothing to check. */
    tj_status (*finish)(struct rt_plan *p, tj_status st);
    tj_tensor **dev_consts;
} rt_plan;

enum { RT_RAW_NONE = -1, RT_RAW_PARAM = -2, RT_RAW_CONST = -3 };

/* p's memory beside its steps: base.g, who, out_slot from the graph, par_min 65536. TJ_OK or
 * TJ_ERR_OOM (error set); p->base.vt is the caller's to set. */
tj_status rt_plan_init(rt_plan *p, const ir_graph *g, const char *who);
/* What follows the steps: last_use, max_bufs, the raw form when `raw` and every step allows it,
 * and the control-flow regions (compiled by region(sub, ctx); NULL: none, the executor builds
 * what it runs). */
tj_status rt_plan_finish(rt_plan *p, bool raw, rt_program *(*region)(const ir_graph *, void *),
                         void *ctx);
/* Frees what p owns (not p itself). */
void rt_plan_release(rt_plan *p);
/* The nodes each step computes, a copy of step s's in out (room for the graph's node count). */
uint32_t rt_plan_step_nodes(const rt_plan *p, uint32_t s, uint32_t *out);

/* The run loop (rt_program_vt.run of every plan). */
tj_status rt_plan_run(rt_program *p, tj_tensor *const *args, uint32_t n_args, tj_variable **caps,
                      tj_tensor **outs);
/* Runs p with env into vals (one slot per node, NULL on entry) as rt_plan_run does, but keeps
 * node keep's value in vals whatever its last use (rt_eval_node). */
tj_status rt_plan_eval(rt_plan *p, const rt_exec_env *env, uint32_t keep, tj_tensor **vals);
/* rt_program_vt.kernels of a plan with labels. */
uint32_t rt_plan_kernels(const rt_program *p, int32_t *kernel_of, const char *const **names);
/* Plans p's raw form when every step allows it (sets raw_bytes, or leaves it 0). */
tj_status rt_plan_raw_prepare(rt_plan *p);
/* The raw form: rt_program_vt.raw_bytes, run_raw and raw_inplace of a plan. */
size_t rt_plan_raw_bytes(const rt_program *p);
tj_status rt_plan_run_raw(rt_program *p, void *const *in, void *const *out, void *scratch);
int32_t rt_plan_raw_inplace(const rt_program *p, uint32_t k);

/* Whether step s has an epilogue (GEMM, CONV). */
static inline bool rt_step_has_epi(const rt_step *s) {
    return s->epi.n_in + s->epi.n_out > 0;
}

/* What the steps run, for both forms (plan.c, plan_lib.c): fn over units [u0, u0 + units), or
 * [0, n_units), split across the pool when large; a GEMM step C = A x B then its epilogue on bufs
 * (the epilogue's buffers, C in the product's place); a CONV step x (*) w, then its epilogue on
 * bufs, then its pool into pool_out. */
void rt_plan_run_range(const rt_plan *p, rt_kernel_fn fn, const rt_units *u, void *const *bufs,
                       int64_t u0, int64_t units);
void rt_plan_run_units(const rt_plan *p, rt_kernel_fn fn, const rt_units *u, void *const *bufs);
/* The run loop's GEMM and CONV steps: buffers from vals (one slot per node), outputs allocated. */
tj_status rt_plan_run_gemm(rt_plan *p, const rt_step *s, tj_tensor **vals, void **bufs);
/* A CONV step's epilogue writes its output over an input of the output's shape that dies there
 * (step `at`; keep: a node that stays, IR_NONE: none), where its route allows it. */
tj_status rt_plan_run_conv(rt_plan *p, const rt_step *s, tj_tensor **vals, void **bufs, uint32_t at,
                           uint32_t keep);
/* vals[j] when step `at` is its last reader, nothing else holds its buffer (not borrowed,
 * immutable, a view or shared) and it has n's dtype and dims, so a step may write n over it;
 * NULL otherwise, and always while numerics are checked. */
tj_tensor *rt_plan_dying(const rt_plan *p, uint32_t j, uint32_t at, uint32_t keep,
                         tj_tensor *const *vals, const ir_node *n);
void rt_plan_gemm(rt_plan *p, const rt_step *s, const char *A, const char *B, char *C,
                  void *const *bufs);
size_t rt_plan_gemm_bytes(const rt_step *s);
tj_status rt_plan_conv(rt_plan *p, const rt_step *s, const void *x, const void *w, void **bufs,
                       void *pool_out);
struct rt_conv_geom;
enum { RT_PLAN_CONV_MAX_BUFS = 16 }; /* a CONV step's epilogue buffers at most */
/* Conv node id's geometry and, when pool_id is a node (not IR_NONE), its max pool's. */
void rt_plan_conv_geoms(const ir_graph *g, uint32_t id, uint32_t pool_id, struct rt_conv_geom *cg,
                        struct rt_conv_geom *pg);
/* Whether GEMM step s is what the plan makes of its node: a matmul of f32 or f64 whose operands
 * are the node's inputs, or what a 2-D transpose of one reads (trans 1). s->mm is not read. */
bool rt_plan_gemm_matches(const ir_graph *g, const rt_step *s);
/* Whether f32 conv node id with its max pool pool_id (IR_NONE: none) and an epilogue of epi_in
 * inputs and epi_out outputs (0, 0: none; with neither, the convolution alone, a step that packs
 * a constant filter) runs as one CONV step on this CPU's direct kernels; and whether CONV step s
 * is such a step: its operands the node's, its epilogue reading the convolution, its pool the
 * epilogue's one output (or the convolution). */
bool rt_plan_conv_usable(const ir_graph *g, uint32_t id, uint32_t pool_id, uint32_t epi_in,
                         uint32_t epi_out);
bool rt_plan_conv_matches(const ir_graph *g, const rt_step *s);
/* Whether the packed f32 kernels run GEMM step s on B as it lies (not OpenBLAS). */
bool rt_plan_own_gemm(const rt_step *s);
/* Sets s's epi_* fields from its nodes (s->nodes: the product or convolution, then its
 * epilogue's) in g: epi_simple when the epilogue is one f32 chain from the step's node to its one
 * output of at most RT_STEP_EPI_ADDS additions of an epilogue input (a row of the last dim, or a
 * tensor of the chain's shape) and a final relu, none broadcasting the chain; a batched product or
 * a fused pool never. The plan's builders and an image's reader call it: nothing in an image
 * says which buffers the tiles read. */
void rt_plan_simple_epi(const ir_graph *g, rt_step *s);
/* A concrete tensor header of node n's type over data (nothing to release). */
void rt_plan_header(tj_tensor *h, const ir_node *n, void *data);

#endif /* TJ_RUNTIME_PLAN_H */
