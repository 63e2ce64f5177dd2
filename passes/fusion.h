/* fusion.h — the fusion/partitioning pass (fusion.c): splits a graph into groups that a backend
 * runs as one unit. A fused group is a convex set of elementwise nodes (IR_F_EW: arithmetic,
 * comparisons, logical ops, cast, where) with one loop shape, whose values are used only inside
 * the group except for the group's outputs; every other live node is a singleton group. Groups
 * come in a valid execution order. Side-effect nodes are never fused. A backend may also ask for
 * reduce groups: a reduction with the elementwise producers only it reads. */
#ifndef TJ_PASSES_FUSION_H
#define TJ_PASSES_FUSION_H

#if defined(TJ_LAYER_IR) || defined(TJ_LAYER_RUNTIME) || defined(TJ_LAYER_API)
#error "passes/ is above ir/ and beside runtime/: this layer may not use it"
#endif

#include <stdbool.h>

#include "ir/ir.h"

typedef struct pass_group {
    bool fused;       /* an elementwise group (may hold a single node) */
    uint32_t n_nodes; /* node ids, ascending (a topological order) */
    uint32_t *nodes;
    uint32_t n_inputs; /* ids of nodes outside the group read by it, ascending */
    uint32_t *inputs;
    uint32_t n_outputs; /* ids of group nodes read outside it (or graph outputs), ascending */
    uint32_t *outputs;
    int rank; /* fused groups: the loop shape, which every output has */
    int64_t dims[IR_MAX_RANK];
    /* a reduce group: its last node is a reduction (the only output), the others elementwise
     * producers of the reduction's input shape (the loop shape) whose inputs outside the group
     * have the loop shape or one element. fused is false. */
    bool reduce;
} pass_group;

/* The most nodes one group takes: a longer run of fusable nodes is cut into groups of at most
 * this many, so a kernel's size, and what compiling it costs, stays bounded whatever the graph
 * (LLVM's optimizer and code generator cost more than linear in one function's size: one kernel
 * of 3,000 relus took 5.4 s; 10,000 took minutes). Each cut costs one pass over the tensor. */
enum { PASS_MAX_GROUP_NODES = 128 };

typedef struct pass_partition {
    uint32_t n_groups;
    pass_group *groups;
    uint32_t *group_of; /* per node id: its group, or IR_NONE for dead nodes (not run) */
    uint32_t n_nodes;
} pass_partition;

/* Decides whether node `id` may join a fused group (the backend's lowering supports its op and
 * dtypes). NULL: every elementwise node of a non-string dtype. */
typedef bool (*pass_fusable_fn)(const ir_graph *g, uint32_t id, void *user);

/* Partitions the live nodes of g (those the outputs and the side effects depend on): fused
 * groups of the nodes `fusable` accepts, and reduce groups started by the reductions `reducible`
 * accepts (NULL: none), absorbing their elementwise producers. Returns a partition the caller
 * frees with pass_partition_free, or NULL with the error set (OOM). */
pass_partition *pass_fusion_run(const ir_graph *g, pass_fusable_fn fusable,
                                pass_fusable_fn reducible, void *user);
void pass_partition_free(pass_partition *p);
/* Text summary for dumps and tests: one line per group, "fused %3 %4 %5 <- %0 %1 -> %5".
 * Caller frees. */
char *pass_partition_str(const pass_partition *p);

#endif /* TJ_PASSES_FUSION_H */
