/* ir.h — the internal interface of the ir/ layer: dtypes, shapes, the graph, inference, hashing,
 * the text form, and the thread-local error status. ir/ uses libc only and knows nothing of
 * execution, LLVM or CUDA. Every layer above (passes/, runtime/, jit/) includes this header.
 *
 * Invariants: node ids are dense uint32 in topological order (inputs have smaller ids); a node
 * is immutable once added; identical pure nodes are interned (ir_add returns the existing id);
 * side-effect and random nodes are never interned; passes rebuild graphs through ir_add and keep
 * the relative order of the nodes they copy. */
#ifndef TJ_IR_H
#define TJ_IR_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tracejit.h"

#define IR_MAX_RANK TJ_MAX_RANK
#define IR_MAX_LIST (3 * IR_MAX_RANK)
#define IR_NONE UINT32_MAX
#define IR_TUPLE 14 /* dtype of control-flow nodes: several results, read through GET */
#define IR_VOID 15  /* dtype of nodes with no value (print, host_callback) */

/* ---- status: thread-local error message (shared by every layer; tj_last_error reads it) ---- */
tj_status ir_errorf(tj_status code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
tj_status ir_verrorf(tj_status code, const char *fmt, va_list ap);
const char *ir_last_error(void);
tj_status ir_last_code(void);
void ir_clear_error(void);

/* ---- dtypes and shapes ----------------------------------------------------------------------- */
const char *ir_dtype_name(int dt);  /* "float32" ... "void"; "?" if bad */
const char *ir_dtype_short(int dt); /* "f32", "f64", "i32", "i64", "bool", "str", "void" */
int ir_dtype_from_short(const char *s, size_t len); /* -1 if unknown */
size_t ir_dtype_size(int dt);
bool ir_dtype_is_float(int dt);
bool ir_dtype_is_int(int dt);      /* any signed or unsigned integer width */
bool ir_dtype_is_unsigned(int dt); /* u8, u16, u32, u64 */
bool ir_dtype_is_index(int dt);    /* int32 or int64: the dtypes of indices (gather, one_hot...) */
bool ir_dtype_is_half(int dt);     /* float16, bfloat16: storage types (cast and data movement) */
/* A double rounded to float16 / bfloat16 bits (nearest even; overflow to inf; NaN kept), and
 * back (exact). */
uint16_t ir_half_from_f64(int dt, double v);
double ir_half_to_f64(int dt, uint16_t h);
bool ir_dtype_is_numeric(int dt); /* float or int */
/* Integer (or bool) elements in memory: read sign- or zero-extended (uint64 as its bit pattern),
 * written wrapped to the width; ir_int_fits: v is a value of dt (always true for int64/uint64). */
int64_t ir_int_get(int dt, const void *e);
void ir_int_put(int dt, void *e, int64_t v);
bool ir_int_fits(int dt, int64_t v);

/* Writes "[2,3]" ("[]" for rank 0, "?" for -1 dims, other negatives as numbers) into buf. */
char *ir_fmt_dims(char *buf, size_t n, int rank, const int64_t *dims);
/* numel of known dims; -1 if any dim is unknown. Shapes that passed ir_check_shape (every node and
 * tensor) never overflow. */
int64_t ir_numel(int rank, const int64_t *dims);
/* A reduction of dims over the axes marked in red, size-1 axes ignored, as [outer][len][inner]:
 * outer kept elements, then len reduced ones, then inner kept ones (out[o][i] reduces
 * x[o][0..len][i]). false when reduced axes lie on both sides of a kept one. */
bool ir_red_split(int rank, const int64_t *dims, const bool *red, int64_t *outer, int64_t *len,
                  int64_t *inner);
/* The one place that validates a shape: rank in [0, TJ_MAX_RANK], dims non-negative (-1 too when
 * `unknown_ok`), the element count of the known dims at most TJ_MAX_NUMEL. The error names `op`
 * and the shape. */
tj_status ir_check_shape(const char *op, int rank, const int64_t *dims, bool unknown_ok);
/* NumPy broadcasting, -1 (unknown) dims allowed. On failure sets the error naming `op`. */
tj_status ir_broadcast(const char *op, int ra, const int64_t *da, int rb, const int64_t *db,
                       int *rank_out, int64_t *dims_out);

/* ---- ops ------------------------------------------------------------------------------------- */
enum {
    IR_F_EW = 1 << 0,
    IR_F_RED = 1 << 1,
    IR_F_SIDE = 1 << 2,
    IR_F_RAND = 1 << 3,
    IR_F_COMM = 1 << 4,
    IR_F_EXPAND = 1 << 5,
    IR_F_SRC = 1 << 6,
    IR_F_CMP = 1 << 7,
    IR_F_CF = 1 << 8,         /* control flow: owns regions, yields a tuple (ir/regions.c) */
    IR_F_FILLS = 1 << 9,      /* the reference kernel writes every output element: its buffer need
                                 not be zeroed first (runtime/kernels/dispatch.c) */
    IR_F_PLUMB = 1 << 10,     /* plumbing, not work: values in and out, effects, control */
    IR_F_FAILS = 1 << 11,     /* may fail at run time (an index out of range) */
    IR_F_FAILS_INT = 1 << 12, /* may fail at run time on integers (a division by zero) */
    IR_F_IDEMP = 1 << 13,     /* idempotent: f(f(x)) = f(x) */
    IR_F_INVOL = 1 << 14,     /* an involution: f(f(x)) = x */
    IR_F_COMPOSITE = 1 << 15, /* a composite: passes/decompose.c writes it as primitives, so a
                                 backend may lower those alone and take it as a fast path */
};

/* The dtype class an op works on (ops.def's dtypes column): its value operands' dtype, or for a
 * source the node's own. */
enum {
    IR_DC_NONE = 0, /* checked by the op's own rule (control flow, get) */
    IR_DC_ANY,
    IR_DC_NUMERIC, /* float or integer */
    IR_DC_FLOAT,
    IR_DC_INT,
    IR_DC_BOOL,
    IR_DC_NUM_STR,  /* numeric or string (add: concatenation) */
    IR_DC_NUM_BOOL, /* numeric or bool: anything but strings */
    IR_DC_INDEX,    /* int32 or int64 */
    IR_DC_EQUAL,    /* numeric, bool or string: what equality compares (not the half types) */
    IR_N_DC
};
/* Whether dtype dt is in class dc, and the class's name for messages ("numeric"). */
bool ir_dtype_in_class(int dt, int dc);
const char *ir_dtype_class_name(int dc);

/* The result's dtype (ops.def's result column). */
enum {
    IR_RES_SAME = 0, /* input 0's */
    IR_RES_BOOL,
    IR_RES_I64,
    IR_RES_NODE,     /* given by the node (sources, cast, one_hot) */
    IR_RES_OPERAND1, /* input 1's (where) */
    IR_RES_VOID,     /* none: a side effect */
    IR_RES_TUPLE,    /* control flow: several results, read through get */
    IR_RES_RESULT,   /* get: the control-flow node's result it reads */
    IR_N_RES
};

/* The kernel family (ops.def's family column): which kind of kernel runs an op, what a backend
 * lowers together. */
enum {
    IR_FAM_SOURCE = 0,
    IR_FAM_EW,
    IR_FAM_MATMUL,
    IR_FAM_REDUCE,
    IR_FAM_SOFTMAX,
    IR_FAM_VIEW, /* data movement by strides: reshape, transpose, broadcast, slice */
    IR_FAM_DATA, /* data movement by values: concat, gather, scatter, one_hot, tensor arrays */
    IR_FAM_CONV,
    IR_FAM_POOL,
    IR_FAM_LOSS,
    IR_FAM_EFFECT,
    IR_FAM_CF,
    IR_FAM_PLUMB,
    IR_N_FAM
};

/* Where a named attribute lives in ir_attrs (ops.def's attrs column). */
enum {
    IR_AK_INT = 1, /* i[slot] */
    IR_AK_FLOAT,   /* f[slot] */
    IR_AK_LIST,    /* list[0..n_list) */
    IR_AK_LIST3,   /* the slot-th third of list (a slice's begin, end, step) */
    IR_AK_STRING,  /* blob: a NUL-terminated string */
    IR_AK_POINTER, /* blob: two pointers; this is number slot */
    IR_AK_REGION,  /* sub[slot] */
};
typedef struct ir_attr_spec {
    const char *name; /* NULL ends the list */
    uint8_t kind, slot;
    bool optional; /* printed only when set (non-zero) */
} ir_attr_spec;
enum { IR_MAX_OP_ATTRS = 5 };

typedef enum ir_op {
#define X(e, name, nin, flags, dtypes, result, family, attrs) IR_OP_##e,
#include "ops.def"
#undef X
    IR_N_OPS
} ir_op;

typedef struct ir_op_info {
    const char *name;
    int n_in; /* -1: variadic */
    unsigned flags;
    uint8_t dtypes, result, family; /* IR_DC_*, IR_RES_*, IR_FAM_* */
    ir_attr_spec attrs[IR_MAX_OP_ATTRS + 1];
} ir_op_info;

extern const ir_op_info ir_ops[IR_N_OPS];
/* Op `op`'s attribute called name[0..len), or NULL. */
const ir_attr_spec *ir_op_attr(int op, const char *name, size_t len);
int ir_op_from_name(const char *s, size_t len); /* -1 if unknown */

/* ---- nodes and graphs ------------------------------------------------------------------------ */
typedef struct ir_attrs {
    int64_t i[4];    /* scalar ints (see ops.def) */
    double f[3];     /* scalar floats */
    uint32_t n_list; /* ints list: axes, perm, slice begin/end/step */
    int64_t list[IR_MAX_LIST];
    uint32_t blob;   /* 1 + index into graph blobs; 0: none */
    uint32_t sub[2]; /* 1 + index into graph subgraphs; 0: none (control flow) */
} ir_attrs;

typedef struct ir_node {
    uint16_t op;
    uint8_t dtype; /* tj_dtype or IR_VOID */
    uint8_t rank;
    uint32_t n_in;
    uint32_t in_off; /* inputs: g->edges[in_off .. in_off + n_in) */
    int64_t dims[IR_MAX_RANK];
    ir_attrs a;
    uint64_t h; /* hash of op, dtype, dims, attrs, input ids: the interning key */
} ir_node;
/* Whether node n may fail at run time (IR_F_FAILS, or IR_F_FAILS_INT on an integer dtype). */
bool ir_node_may_fail(const ir_node *n);

typedef struct ir_blob {
    size_t size;
    void *data; /* immutable; shared by the graphs holding the blob */
    uint64_t h; /* content hash */
    void *own;  /* the payload's reference count (ir_blob_ref) */
} ir_blob;

typedef struct ir_graph {
    char *name;
    ir_node *nodes;
    uint32_t n_nodes, cap_nodes;
    uint32_t *edges;
    uint32_t n_edges, cap_edges;
    ir_blob *blobs;
    uint32_t n_blobs, cap_blobs;
    uint32_t *outputs;
    uint32_t n_outputs, cap_outputs;
    uint32_t *effects; /* side-effect nodes in program order */
    uint32_t n_effects, cap_effects;
    uint32_t n_params; /* params are nodes with op PARAM, i[0] = index */
    uint32_t n_caps;   /* captured variable slots used by var_read / assign */
    struct ir_graph **subs;
    uint32_t n_subs, cap_subs;
    uint32_t *itab; /* interning table (graph.c): itab_cap slots of 2 words, then a tag byte each */
    uint32_t itab_cap;
    int refs; /* atomic: holders of this graph (a region is shared by the graphs that own it) */
} ir_graph;

ir_graph *ir_graph_new(const char *name); /* caller frees with ir_graph_free */
/* Drops one reference; the last frees the graph (and drops its regions'). */
void ir_graph_free(ir_graph *g);
/* A copy of g's own nodes, edges and outputs whose regions are g's, shared (ir_graph_share):
 * graphs are not changed once built, so a region is never copied, and a pass over a graph with
 * regions nested n deep costs what its nodes do, not n times their depth. */
ir_graph *ir_graph_clone(const ir_graph *g);
/* A copy of g at concrete shapes: param k takes rank[k] and dims[k] (its dtype stays), and every
 * other node's shape is inferred again from its inputs, in order: a graph traced for a signature
 * with unknown dims (-1), at the shapes of one call. NULL with the error set when those shapes
 * do not fit an op (the message ir_add gives: the op and the shapes), when a node still has an
 * unknown dim, or when g has regions or nodes inferred against it (control flow, get):
 * TJ_ERR_UNSUPPORTED. */
ir_graph *ir_graph_concretize(const ir_graph *g, const int *rank,
                              const int64_t (*dims)[IR_MAX_RANK]);
/* One more reference to g (returned; NULL-safe), for a graph that is finished: a region added to
 * another graph (ir_add_sub takes the reference). */
ir_graph *ir_graph_share(const ir_graph *g);

/* Adds a node. `proto` gives op, attrs and, where the op needs them, dtype/rank/dims (sources,
 * reshape/broadcast_to targets, cast dtype); the rest is inferred. Validates, infers the shape,
 * canonicalises (commutative operands ordered, axes normalised), interns. Returns the node id,
 * or IR_NONE with the error set (message names the op, the argument and the shapes). */
uint32_t ir_add(ir_graph *g, const ir_node *proto, const uint32_t *in, uint32_t n_in);
/* ir_add for a node that is already inferred and canonical: a copy of a node of a graph built by
 * ir_add (blob and subgraph handles translated to g) whose inputs in[k] have the dtypes and dims
 * the original's inputs had. The caller guarantees that (a pass rebuild tracks it); the result
 * is then what ir_add would return, without the cost of inference and payload checks. Operand
 * order, the key, interning, effects and params are handled as in ir_add. */
uint32_t ir_add_inferred(ir_graph *g, const ir_node *node, const uint32_t *in, uint32_t n_in);
/* Presizes g for n_nodes nodes and n_edges edges in all (arrays and interning table), so a
 * graph of known size is built without regrowing. TJ_ERR_OOM with the error set. */
tj_status ir_graph_reserve(ir_graph *g, uint32_t n_nodes, uint32_t n_edges);
/* Empties g (nodes, edges, blobs, subgraphs, outputs, effects, params, caps) and renames it,
 * keeping its arrays, so a graph of similar size is built in memory that is already mapped. */
tj_status ir_graph_reset(ir_graph *g, const char *name);
/* Copies `size` bytes into a new blob; returns the value for ir_attrs.blob (1 + index). */
uint32_t ir_add_blob(ir_graph *g, const void *data, size_t size);
/* Adds blob b of another graph (or of g) to g without copying: payloads are immutable and
 * reference counted, so graphs share them. Handle (>= 1), or 0 with the error set. */
uint32_t ir_add_blob_shared(ir_graph *g, const ir_blob *b);
/* A blob over `size` bytes at `data` that are not copied: the caller promises they never change
 * and stay valid until release(ctx) runs, when the last graph or tensor holding the blob lets go.
 * Handle (>= 1); 0 with the error set, and then release is not called (the caller still owns
 * data). A captured tensor's immutable buffer (tj_tensor_adopt) becomes a blob this way. */
uint32_t ir_add_blob_borrowed(ir_graph *g, const void *data, size_t size,
                              void (*release)(void *ctx), void *ctx);
/* One more reference to blob b's payload (b->data: immutable; 64-byte aligned when copied by
 * ir_add_blob), which keeps it valid after every graph holding it is gone, until
 * ir_blob_unref(token) with the token returned: a constant's tensor borrows it
 * (runtime/const.c). NULL for NULL. */
void *ir_blob_ref(const ir_blob *b);
void ir_blob_unref(void *token); /* NULL-safe */
tj_status ir_add_output(ir_graph *g, uint32_t id);
tj_status ir_add_effect(ir_graph *g, uint32_t id); /* ir_add does this for IR_F_SIDE ops */
uint32_t ir_add_sub(ir_graph *g, ir_graph *sub);   /* takes ownership; returns 1 + index */

static inline const ir_node *ir_node_get(const ir_graph *g, uint32_t id) {
    return &g->nodes[id];
}
static inline const uint32_t *ir_inputs(const ir_graph *g, const ir_node *n) {
    return g->edges + n->in_off;
}
static inline const ir_blob *ir_blob_get(const ir_graph *g, uint32_t blob) {
    return blob ? &g->blobs[blob - 1] : NULL;
}

/* Shape/dtype inference on descriptors: `ins` point at nodes carrying the inputs' dtype/dims
 * (only op-independent fields are read). Fills proto's dtype/rank/dims and normalises attrs.
 * Used by ir_add and by eager execution (runtime builds descriptors from tensors). */
tj_status ir_infer(ir_node *proto, const ir_node *const *ins, uint32_t n_in);
/* Each op's shape rule, indexed by op (ir/infer.c): fills p's dtype, rank and dims from its
 * inputs, after ir_infer has checked arity and inputs; NULL for the ops inferred against their
 * graph (control flow, get). */
typedef tj_status (*ir_shape_fn)(ir_node *p, const ir_node *const *ins, uint32_t n_in);
extern const ir_shape_fn ir_shape_rules[IR_N_OPS];

/* ---- regions (regions.c) --------------------------------------------------------------------- */
/* Whether n has a side effect: a side-effect op, or a control-flow node one of whose regions
 * has one. Such nodes are never merged or pruned and keep program order (g->effects). */
bool ir_node_has_effect(const ir_graph *g, const ir_node *n);
/* The regions of a control-flow node (NULL where absent). */
const ir_graph *ir_region(const ir_graph *g, const ir_node *n, int k);
/* Number of results of a control-flow node; result k's dtype and dims in *out (op PARAM). */
uint32_t ir_cf_n_results(const ir_graph *g, const ir_node *n);
tj_status ir_cf_result(const ir_graph *g, const ir_node *n, uint32_t k, ir_node *out);
/* Inference for COND/WHILE/FOR/SCAN (the regions against the operands) and GET (the producer's
 * result). Used by ir_add in place of ir_infer for these ops. */
tj_status ir_infer_in_graph(const ir_graph *g, ir_node *p, const uint32_t *in, uint32_t n_in);
/* The variable slots a graph assigns, its regions' included: slots[k] = 1 (n slots). */
void ir_assigned_slots(const ir_graph *g, uint8_t *slots, uint32_t n);

/* Checks every structural invariant; TJ_OK or an error naming the node. */
tj_status ir_verify(const ir_graph *g);

/* ---- text form ------------------------------------------------------------------------------- */
/* Prints the graph in the text IR (round-trips through ir_parse). Caller frees. */
char *ir_print(const ir_graph *g);
/* Parses the text IR; NULL with the error set (line and column in the message). */
ir_graph *ir_parse(const char *text);

/* ---- pictures (dot.c) ------------------------------------------------------------------------ */
/* Which kernel computes each node: kernel_of[id] in [0, n_kernels), or -1 (a parameter, a
 * constant read in place, a node that does not run); names[k] labels kernel k. Borrowed. */
typedef struct ir_dot_kernels {
    const int32_t *kernel_of;
    uint32_t n_kernels;
    const char *const *names;
} ir_dot_kernels;
/* g as Graphviz DOT, the nodes of each kernel in a cluster when k is given (may be NULL).
 * Caller frees; NULL with the error set (out of memory). */
char *ir_dot(const ir_graph *g, const ir_dot_kernels *k);

/* ---- hashing --------------------------------------------------------------------------------- */
typedef struct ir_hash128 {
    uint64_t lo, hi;
} ir_hash128;
/* Structural hash of the graph: independent of node numbering and pointer values (blobs are
 * hashed by content). Two graphs that compute the same outputs and effects the same way hash
 * equal. */
ir_hash128 ir_graph_hash(const ir_graph *g);
/* ir_graph_hash and the graph's layout: each node's position and its inputs' positions, in its
 * regions too. Artifacts whose plan depends on node numbering (kernels numbered by step, fused
 * groups' buffer order) are keyed by this, so two graphs that compute the same thing in another
 * order never share compiled code. */
ir_hash128 ir_graph_layout_hash(const ir_graph *g);
uint64_t ir_hash_bytes(const void *p, size_t n, uint64_t seed);
static inline uint64_t ir_hash_mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 27;
    return h;
}

#endif /* TJ_IR_H */
