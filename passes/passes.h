/* passes.h — the internal interface of the passes/ layer: the graph-to-graph optimization passes
 * (algebraic simplification, constant folding, common-subexpression elimination, dead-op
 * pruning) and the pipeline that runs them with verification, dumps and statistics.
 * passes/ uses ir/ only. Constant folding needs the reference kernels, which live in runtime/,
 * so the caller (jit/) injects an evaluator (pass_eval_fn) through pass_options.
 *
 * Every pass reads a graph and returns a NEW graph built through ir_add (the input is never
 * modified); copied nodes keep their relative order; outputs and effects are remapped, effects
 * keep program order; params keep their indices; n_params and n_caps are preserved. */
#ifndef TJ_PASSES_H
#define TJ_PASSES_H

#if defined(TJ_LAYER_IR) || defined(TJ_LAYER_RUNTIME) || defined(TJ_LAYER_API)
#error "passes/ is above ir/ and beside runtime/: this layer may not use it"
#endif

#include <stddef.h>
#include <stdint.h>

#include "ir/ir.h"

/* ---- the constant-folding evaluator ----------------------------------------------------------
 * Called by the fold pass for a pure node all of whose inputs are CONST nodes.
 *   g     the graph being built; in[0 .. n_in) are ids of CONST nodes of g (payload:
 *         ir_blob_get(g, ir_node_get(g, in[i])->a.blob), in the CONST payload encoding).
 *   node  a descriptor of the node to evaluate: op, attrs, and the inferred output
 *         dtype/rank/dims and n_in (exactly what rt_ref_kernel expects); in_off is meaningless.
 * On success the evaluator adds the result's payload to g (ir_add_blob, or rt_const_blob) and
 * stores the returned blob handle in *blob_out; it must not add nodes. On failure (unsupported
 * op, index out of range, integer division by zero, OOM, ...) it returns a negative tj_status;
 * the pass then leaves the node as it is (it fails at run time only if it is live) and clears
 * the error. A typical implementation (jit/):
 *     ins[i] = rt_const_tensor(g, ir_node_get(g, in[i]));
 *     out = rt_tensor_alloc(node->dtype, node->rank, node->dims);
 *     st = rt_ref_kernel(node, ins, out);  if ok: *blob_out = rt_const_blob(g, out); */
typedef int (*pass_eval_fn)(void *user, ir_graph *g, const ir_node *node, /* tj_status */
                            const uint32_t *in, uint32_t n_in, uint32_t *blob_out);

/* ---- the passes, by id (the order of the enum is the order of the stats table) --------------- */
typedef enum pass_id {
    PASS_SIMPLIFY = 0,
    PASS_FOLD,
    PASS_CSE,
    PASS_PRUNE,
    PASS_FUSION, /* known to the spec parser only: run by the jit (passes/fusion.c), not here */
    PASS_N
} pass_id;

#define PASS_BIT(id) (1u << (id))
#define PASS_DEFAULT_MASK                                                                          \
    (PASS_BIT(PASS_SIMPLIFY) | PASS_BIT(PASS_FOLD) | PASS_BIT(PASS_CSE) | PASS_BIT(PASS_PRUNE) |   \
     PASS_BIT(PASS_FUSION))
#define PASS_DEFAULT_FOLD_MAX_BYTES ((size_t)1 << 20)
#define PASS_DEFAULT_MAX_ITERS 4

const char *pass_name(pass_id id); /* "simplify", "fold", "cse", "prune", "fusion" */

/* Parses a pass selection such as "fold,cse,-simplify" into a mask of PASS_BIT()s.
 * Comma-separated names; "-name" disables, "name" or "+name" enables. If the first item is a
 * bare name (no sign), selection starts from nothing (only the listed passes run); if it starts
 * with a sign, it starts from the default set. "all"/"default" = the default set, "none" = no
 * pass. Whitespace around items is ignored. NULL or "" gives the default set.
 * Returns TJ_ERR_INVALID naming the unknown pass and the known ones. */
tj_status pass_parse_spec(const char *spec, unsigned *mask_out);

typedef struct pass_options {
    const char *passes;    /* selection (see pass_parse_spec); NULL = default (TJ_PASSES) */
    int verify;            /* run ir_verify on the input and after every pass */
    const char *dump_dir;  /* non-NULL: write ir_print of the input and after each pass run to
                            * <dump_dir>/<function>.<sig_hash %016llx>.<NN>.<pass>.tjir, NN = 00
                            * (input), 01, ... in run order; the directory is created (one
                            * level). A pass that changed nothing dumps the same text again. */
    const char *function;  /* function name for dump files; NULL: the graph's name or "graph" */
    uint64_t sig_hash;     /* signature hash for dump file names */
    size_t fold_max_bytes; /* largest constant fold may create; 0 = 1 MiB */
    pass_eval_fn eval;     /* constant-folding evaluator; NULL: fold does nothing */
    void *eval_user;
    int fast_math; /* allow value-changing float rewrites (none implemented yet) */
    int max_iters; /* bound on pipeline iterations to a fixed point; 0 = 4 */
} pass_options;

/* Per-pass counters, summed over all runs of that pass in one pipeline call. */
typedef struct pass_stat {
    uint32_t runs;
    uint64_t folded;      /* nodes replaced by a constant */
    uint64_t merged;      /* nodes that became identical to an earlier one (any rebuild) */
    uint64_t simplified;  /* algebraic rewrites applied */
    uint64_t removed;     /* dead nodes dropped */
    uint64_t fold_failed; /* evaluator failures (node left unfolded) */
    uint64_t ns;          /* wall time in the pass */
} pass_stat;

typedef struct pass_stats {
    pass_stat pass[PASS_N];
    uint32_t iterations;
    uint32_t nodes_in, nodes_out;
    uint64_t total_ns; /* whole pipeline, including verification and dumps */
} pass_stats;

/* Runs the pipeline: (fold -> cse -> simplify -> prune) repeated until an iteration
 * changes nothing or max_iters is reached, restricted to the selected passes. Returns a NEW
 * graph (caller frees with ir_graph_free); g is not modified. NULL with the error set (ir_errorf)
 * on failure: bad selection, verifier failure (message names the pass after which the graph is
 * invalid), dump I/O error, OOM. opts may be NULL (defaults, no folding); stats may be NULL. */
ir_graph *pass_pipeline_run(const ir_graph *g, const pass_options *opts, pass_stats *stats);

/* Formats stats as one log line into buf (always NUL-terminated), e.g.
 * "passes: 120 -> 45 nodes, 2 iters, 0.210 ms; simplify 3 simplified 0.030 ms; fold 10 folded
 * 0.050 ms; cse 4 merged 0.020 ms; prune 61 removed 0.020 ms". Returns the length it needed. */
int pass_stats_format(const pass_stats *s, char *buf, size_t n);

/* The individual passes: each returns a new graph, or NULL with the error set. `st` (may be
 * NULL) gets its counters incremented. opts may be NULL (defaults). */
ir_graph *pass_simplify(const ir_graph *g, const pass_options *opts, pass_stat *st);
ir_graph *pass_fold(const ir_graph *g, const pass_options *opts, pass_stat *st);
ir_graph *pass_cse(const ir_graph *g, const pass_options *opts, pass_stat *st);
ir_graph *pass_prune(const ir_graph *g, const pass_options *opts, pass_stat *st);

/* The same passes as the pipeline runs them: when a cheap scan shows the pass would change
 * nothing they return (ir_graph *)g itself (not a copy; the caller must not free it twice).
 * Only the scan is timed then, so a fixed-point check costs a read of the graph, not a rebuild. */
ir_graph *pass_simplify_run(const ir_graph *g, const pass_options *opts, pass_stat *st);
ir_graph *pass_fold_run(const ir_graph *g, const pass_options *opts, pass_stat *st);
ir_graph *pass_cse_run(const ir_graph *g, const pass_options *opts, pass_stat *st);
ir_graph *pass_prune_run(const ir_graph *g, const pass_options *opts, pass_stat *st);

/* ---- rebuilding helpers shared by the pass files (rebuild.c)
 * ------------------------------------- A rebuild copies nodes of `src` into a fresh graph `dst`;
 * map[id] is the dst id of src node id (IR_NONE until set). Blobs and subgraphs are copied once
 * each, when a node first uses them (a region no node uses any more is dropped). */
typedef struct pass_rebuild {
    const ir_graph *src;
    ir_graph *dst;
    uint32_t *map;
    uint32_t *blob_map; /* src blob handle - 1 -> dst blob handle (0: not yet copied) */
    uint32_t *sub_map;  /* src subgraph handle - 1 -> dst subgraph handle */
    uint32_t *scratch;  /* input-id buffer for pass_copy */
    uint8_t *flags;     /* per src id, set by pass_map: PASS_M_SAME, PASS_M_CONST */
    uint32_t cap_scratch;
    uint64_t merged;     /* pass_add calls that returned an existing node (interning) */
    bool dry;            /* simplify's scan: dst == src, identity map, nothing is added */
    const uint8_t *uses; /* simplify: per src id, its users and graph outputs (2: two or more);
                            NULL: unknown (no rewrite that needs a single user) */
    bool keep_effects;   /* pass_rebuild_end keeps dst's effects (node order) instead of remapping
                            src's: a pass that replaces an effect by others (inline_cond.c) */
} pass_rebuild;

/* What pass_map learns of map[id] while both nodes are in cache, so later reads need neither:
 * SAME: it has src node id's dtype and dims (copies of its users skip re-inference);
 * CONST: it is a CONST of dst with a payload. */
enum { PASS_M_SAME = 1, PASS_M_CONST = 2 };

/* dst is presized for n_nodes nodes and n_edges edges (src's counts bound every pass; prune
 * knows the live counts), so it is built without regrowing. */
tj_status pass_rebuild_begin(pass_rebuild *rb, const ir_graph *src, uint32_t n_nodes,
                             uint32_t n_edges);
/* The pipeline hands over the graphs it is done with; the next pass_rebuild_begin on this thread
 * builds its dst in that storage (no fresh pages to fault in and zero). One is kept, the larger;
 * NULL frees it. */
void pass_spare_put(ir_graph *g);
/* Sets map[id] = d (a dst id) and flags[id]. */
void pass_map(pass_rebuild *rb, uint32_t id, uint32_t d);
/* Copies src node `id` with inputs already mapped through rb->map; returns the dst id. */
uint32_t pass_copy(pass_rebuild *rb, uint32_t id);
/* Adds `proto` (a node of src: its blob/subgraph handles are translated) with dst inputs. */
uint32_t pass_add(pass_rebuild *rb, const ir_node *proto, const uint32_t *in, uint32_t n_in);
/* Remaps outputs and effects, sets n_params/n_caps, adds the merge count to st (may be NULL),
 * frees the maps; returns dst (NULL on error, dst freed). */
ir_graph *pass_rebuild_end(pass_rebuild *rb, pass_stat *st);
/* Frees everything after a failure. Returns NULL. */
ir_graph *pass_rebuild_abort(pass_rebuild *rb);

/* simplify.c: each op's rewrites, indexed by op (NULL: none beyond the flags' f(f(x))): the dst
 * id node n of src (its inputs mapped to m[]; cmask: which are constants) simplifies to, or
 * IR_NONE. Never an entry for an effect, a random op or control flow (tests/jit/test_op_table.c).
 */
typedef uint32_t (*pass_simplify_fn)(pass_rebuild *rb, const ir_node *n, const uint32_t *m,
                                     unsigned cmask);
extern const pass_simplify_fn pass_simplify_rules[IR_N_OPS];

/* decompose.c: composite ops (IR_F_COMPOSITE in ops.def) as primitives. pass_decompositions[op]
 * builds in dst, from the dst ids of n's inputs, the primitives computing node n; it returns the
 * dst id of the value (IR_NONE with the error set); NULL for a primitive. pass_decompose_node
 * runs op n->op's entry and checks the value has n's dtype and dims. pass_decompose gives g with
 * every composite the backend does not lower natively (native(op, user) false; native NULL:
 * none) replaced by its decomposition, g itself when there is none (*n_done: how many). Regions
 * are left as they are: a backend decomposes each region graph it compiles. */
typedef uint32_t (*pass_decomp_fn)(ir_graph *dst, const ir_node *n, const uint32_t *in);
extern const pass_decomp_fn pass_decompositions[IR_N_OPS];
uint32_t pass_decompose_node(ir_graph *dst, const ir_node *n, const uint32_t *in);
ir_graph *pass_decompose(const ir_graph *g, bool (*native)(int op, void *user), void *user,
                         uint32_t *n_done);

/* inline_cond.c: whether g has a COND with a constant predicate, and g with each such COND
 * replaced by the branch it takes (a new graph; NULL with the error set). */
bool pass_has_const_cond(const ir_graph *g);
ir_graph *pass_inline_conds(const ir_graph *g, pass_stat *st);

/* loops.c: g with loop-invariant nodes moved out of loop regions and dead loop values removed;
 * g itself when there is nothing to do (a new graph otherwise; NULL with the error set). */
ir_graph *pass_loops_run(const ir_graph *g, pass_stat *st);

/* Nodes of g whose value is a CONST: its payload, or NULL. */
const ir_blob *pass_const_blob(const ir_graph *g, uint32_t id);
/* true when the dims of a and b are equal and fully known (and ranks match). */
bool pass_same_shape(const ir_node *a, const ir_node *b);

/* The fusion/partitioning pass (another file of this layer) has its own declarations. */
#include "passes/fusion.h"

#endif /* TJ_PASSES_H */
