/* internal.h — helpers shared by the files of the ir/ layer only (graph, verify, hash, print,
 * parse). Not part of the contract; other layers use ir.h. */
#ifndef TJ_IR_INTERNAL_H
#define TJ_IR_INTERNAL_H

#include "ir/ir.h"

/* The interning key of node `n` whose inputs are `in` (blobs hashed by content). */
uint64_t ir_node_key(const ir_graph *g, const ir_node *n, const uint32_t *in);
/* Checks the node's blob/subgraph references against the graph (CONST payload size, ...). */
tj_status ir_check_payload(const ir_graph *g, const ir_node *n);
/* Walks a serialized string payload; returns the number of elements or -1 if malformed. */
int64_t ir_string_count(const void *data, size_t size);

/* Inference for the shape ops (reshape ... gather); ir_infer dispatches to it. */
/* The shape rules of the data-movement ops (infer_shape.c) and the nn ops (infer_nn.c), in the
 * shape table's signature (ir_shape_fn, indexed by op in ir/infer.c). */
#define IR_SHAPE_RULE(name) tj_status name(ir_node *p, const ir_node *const *ins, uint32_t n_in);
IR_SHAPE_RULE(ir_shape_reshape)
IR_SHAPE_RULE(ir_shape_transpose)
IR_SHAPE_RULE(ir_shape_broadcast_to)
IR_SHAPE_RULE(ir_shape_expand_dims)
IR_SHAPE_RULE(ir_shape_squeeze)
IR_SHAPE_RULE(ir_shape_concat)
IR_SHAPE_RULE(ir_shape_slice)
IR_SHAPE_RULE(ir_shape_gather)
IR_SHAPE_RULE(ir_shape_slice_grad)
IR_SHAPE_RULE(ir_shape_scatter_add)
IR_SHAPE_RULE(ir_shape_row)
IR_SHAPE_RULE(ir_shape_conv)
IR_SHAPE_RULE(ir_shape_pool)
IR_SHAPE_RULE(ir_shape_one_hot)
IR_SHAPE_RULE(ir_shape_sparse_xent)
#undef IR_SHAPE_RULE
/* Python slice length of an axis of length `len` (>= 0); begin/end may be any int64. */
int64_t ir_slice_len(int64_t len, int64_t begin, int64_t end, int64_t step);

/* Normalises axis *ax of an axis count r (error names op and in's shape if out of range). */
tj_status ir_norm_axis(const char *op, int64_t *ax, int r, const ir_node *in);
void ir_sort_unique(int64_t *v, uint32_t *n);

/* A growing text buffer (print.c, dot.c): appends never fail; oom says one did. */
typedef struct ir_sbuf {
    char *p;
    size_t n, cap;
    bool oom;
} ir_sbuf;
void ir_sbuf_put(ir_sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* n's type as the text IR writes it: "f32[2,?]", "void". */
void ir_sbuf_type(ir_sbuf *b, const ir_node *n);

#endif
