/* internal.h — private to the ONNX frontend: the loaded model (model.c) and the op converters
 * (ops.c). A converter turns one ONNX node into tracejit ops on the node's input tensors; the
 * importer runs the converters in node order inside the trace of the imported function. */
#ifndef TJ_ONNX_INTERNAL_H
#define TJ_ONNX_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "onnx.pb-c.h"
#include "tj_onnx.h"

/* Where a node is converted: the model and the names in scope (model.c's env chain). */
typedef struct ox_scope {
    const struct tj_onnx_model *m;
    const struct env *e;
} ox_scope;

/* The node being converted, for messages; scope: for converters that run subgraphs. */
typedef struct ox_node {
    const Onnx__NodeProto *p;
    int index;
    int opset;
    const ox_scope *scope;
} ox_node;

/* Whether node n's input 1 is an initializer laid out at load as its converter would lay it out
 * (model.c: a 2-D Conv's filter in HWIO, a transB Gemm's B as [K, N]): the converter then takes
 * it as it is. Only nodes of the main graph, as the model read them. */
bool ox_prelaid(const ox_node *n);

/* A converter: in[0..n_in) are the node's inputs (NULL for an omitted optional one); writes
 * the node's n_out outputs to out (new references or tensors of the current scope). Returns
 * TJ_OK or an error status with the message set (ox_fail). */
typedef tj_status (*ox_conv_fn)(const ox_node *n, int n_in, tj_tensor *const *in, int n_out,
                                tj_tensor **out);

typedef struct ox_op {
    const char *name;
    ox_conv_fn fn;
    int min_in, max_in; /* inputs accepted (-1: any number) */
    int since;          /* the first opset this converter implements */
    uint32_t values;    /* bit k: input k is read as values (a shape, axes), not computed on */
} ox_op;

/* Runs subgraph g (an If branch, a Loop or Scan body) in n's scope: its inputs bound to
 * in[0..n_in), its nodes converted (names of the enclosing graphs visible), its outputs in
 * out[0..n_out) (tensors of the current scope). TJ_OK or the error set. */
/* A map from value names (borrowed, never copied) to indices (names.c). Zeroed: empty. */
typedef struct ox_names {
    const char **keys;
    uint32_t *vals;
    uint32_t cap, n;
} ox_names;
bool ox_names_get(const ox_names *t, const char *name, uint32_t *v);
int ox_names_put(ox_names *t, const char *name, uint32_t v); /* -1: out of memory */
void ox_names_free(ox_names *t);

/* Nesting limits of a model, checked on its bytes before they are unpacked (depth.c). */
enum { OX_MAX_GRAPH_DEPTH = 64, OX_MAX_MESSAGE_DEPTH = 256 };
tj_status ox_check_depth(const char *path, const void *data, size_t size);
tj_status ox_subgraph(const ox_node *n, const Onnx__GraphProto *g, int n_in, tj_tensor *const *in,
                      int n_out, tj_tensor **out);

/* The converter of op_type at opset, or NULL. */
const ox_op *ox_find_op(const char *op_type, int opset);

/* Sets the error "onnx: node <index> '<name>' (<op>): <message>" and returns code. */
tj_status ox_fail(const ox_node *n, tj_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Attributes of the node by name: whether present; the value or the default. */
const Onnx__AttributeProto *ox_attr(const ox_node *n, const char *name);
int64_t ox_attr_i(const ox_node *n, const char *name, int64_t dflt);
float ox_attr_f(const ox_node *n, const char *name, float dflt);
/* An ints attribute: its count (0 when absent) and values (borrowed). */
size_t ox_attr_ints(const ox_node *n, const char *name, const int64_t **v);
/* A string attribute (NUL-terminated copy in buf), or dflt. */
const char *ox_attr_s(const ox_node *n, const char *name, const char *dflt, char *buf, size_t cap);

/* A tensor's values as int64s when they are known at trace time (a concrete tensor: an
 * initializer, a Constant, a Shape, arithmetic on those): count, or -1 with the error set
 * naming what (a value computed from the model's inputs). *v is malloc'd. */
int64_t ox_host_ints(const ox_node *n, const tj_tensor *t, const char *what, int64_t **v);
/* The same as doubles (scales, a region of interest). */
int64_t ox_host_f64(const ox_node *n, const tj_tensor *t, const char *what, double **v);

/* protobuf-c's allocator for everything the importer unpacks: large blocks in huge pages. */
extern ProtobufCAllocator ox_pb_allocator;
/* A tensor from a TensorProto; an error tensor naming `what` when it cannot be read. */
tj_tensor *ox_tensor(const Onnx__TensorProto *p, const char *what);
/* The same, taking p's raw data instead of copying it (p's raw data is gone after): for a proto
 * read once. */
tj_tensor *ox_tensor_take(Onnx__TensorProto *p, const char *what);
/* tracejit's dtype for an ONNX element type, or -1; the type's name ("uint8"). */
int ox_dtype(int32_t onnx_type);
const char *ox_type_name(int32_t onnx_type);
/* A whole file (malloc'd, *size bytes), or NULL with the error set naming it. */
enum { OX_MAX_FILE = 1 << 30 }; /* the largest model or tensor file read (1 GiB) */
unsigned char *ox_read_file(const char *path, size_t *size);

/* The op tables (ops.c, ops_shape.c, ops_nn.c, ops_conv.c, ops_resize.c, ops_index.c,
 * ops_control.c), each ended by a NULL name. */
extern const ox_op ox_ops_math[], ox_ops_shape[], ox_ops_nn[], ox_ops_conv[], ox_ops_resize[],
    ox_ops_index[], ox_ops_control[];

/* ---- shared by the converters ---------------------------------------------------------------- */
#define CONV(name)                                                                                 \
    static tj_status name(const ox_node *n, int n_in, tj_tensor *const *in, int n_out,             \
                          tj_tensor **out)

static inline tj_status one(tj_tensor **out, tj_tensor *t) {
    out[0] = t;
    return TJ_OK;
}

/* A scalar of x's dtype. */
static inline tj_tensor *like(tj_tensor *x, double v) {
    return tj_cast(tj_scalar_f64(v), tj_tensor_dtype(x));
}

/* axis in [-rank, rank) to [0, rank), or -1. */
static inline int axis_of(int64_t a, int rank) {
    if (a < -rank || a >= rank)
        return -1;
    return (int)(a < 0 ? a + rank : a);
}

/* x with axis `from` moved to position `to` (the others keep their order). */
static inline tj_tensor *move_axis(tj_tensor *x, int from, int to) {
    int rank = tj_tensor_rank(x), perm[TJ_MAX_RANK], k = 0;
    if (tj_status_of(x) || from == to)
        return x; /* an error flows on */
    if (from < 0 || to < 0 || from >= rank || to >= rank)
        return tj_error_new(TJ_ERR_SHAPE, "onnx: axis %d to %d for rank %d", from, to, rank);
    for (int d = 0; d < rank; d++)
        if (d != from)
            perm[k++] = d;
    memmove(perm + to + 1, perm + to, (size_t)(rank - 1 - to) * sizeof *perm);
    perm[to] = from;
    return tj_transpose(x, perm);
}

/* A malloc'd copy of a[0..n) (room for one more; NULL on OOM). */
static inline int64_t *ox_dup_ints(const int64_t *a, int64_t n) {
    int64_t *p = malloc(((size_t)(n > 0 ? n : 0) + 1) * sizeof *p);
    if (p && n > 0)
        memcpy(p, a, (size_t)n * sizeof *p);
    return p;
}

#endif /* TJ_ONNX_INTERNAL_H */
