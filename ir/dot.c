/* dot.c — a graph as Graphviz DOT, for people (TensorBoard's graph view is what the seeds use).
 * One box per node: "%id op" and its dtype and shape (a scalar constant shows its value).
 * Parameters, constants, variable reads, side effects (print, assign, host callbacks) and control
 * flow each have their own shape and colour, and side effects are chained in program order by
 * dashed edges. When the backend says which kernel computes each node, the nodes of one kernel
 * are drawn inside a cluster labelled with the kernel's name. Regions of control-flow nodes are
 * summarised in their node's label (their own graphs can be drawn separately). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/internal.h"

/* s inside a double-quoted DOT string: quotes and backslashes escaped, control bytes dropped */
static void put_escaped(ir_sbuf *b, const char *s) {
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            ir_sbuf_put(b, "\\%c", *s);
        else if ((unsigned char)*s >= 32)
            ir_sbuf_put(b, "%c", *s);
    }
}

/* A scalar constant's value, for the label. */
static void put_const_value(ir_sbuf *b, const ir_graph *g, const ir_node *n) {
    const ir_blob *bl = ir_blob_get(g, n->a.blob);
    if (n->rank != 0 || !bl || !bl->data)
        return;
    double v = 0;
    switch (n->dtype) {
    case TJ_F32: {
        float f;
        memcpy(&f, bl->data, 4);
        v = f;
        break;
    }
    case TJ_F64:
        memcpy(&v, bl->data, 8);
        break;
    case TJ_I32: {
        int32_t i;
        memcpy(&i, bl->data, 4);
        v = i;
        break;
    }
    case TJ_I64: {
        int64_t i;
        memcpy(&i, bl->data, 8);
        v = (double)i;
        break;
    }
    case TJ_BOOL:
        v = *(const uint8_t *)bl->data;
        break;
    case TJ_F16:
    case TJ_BF16: {
        uint16_t h;
        memcpy(&h, bl->data, 2);
        v = ir_half_to_f64(n->dtype, h);
        break;
    }
    default:
        if (!ir_dtype_is_int(n->dtype))
            return;
        int64_t x = ir_int_get(n->dtype, bl->data);
        v = n->dtype == TJ_U64 ? (double)(uint64_t)x : (double)x;
    }
    ir_sbuf_put(b, " = %.6g", v);
}

static void put_node(ir_sbuf *b, const ir_graph *g, uint32_t id, const char *indent) {
    const ir_node *n = ir_node_get(g, id);
    unsigned fl = ir_ops[n->op].flags;
    const char *shape = "box", *fill = "white", *extra = "";
    if (n->op == IR_OP_PARAM)
        shape = "invhouse", fill = "#d9ead3";
    else if (n->op == IR_OP_CONST)
        fill = "#eeeeee";
    else if (n->op == IR_OP_VAR_READ)
        shape = "cylinder", fill = "#fce5cd";
    else if (fl & IR_F_CF)
        shape = "box3d", fill = "#fff2cc";
    if (ir_node_has_effect(g, n))
        fill = n->op == IR_OP_ASSIGN ? "#f9cb9c" : "#f4cccc", extra = ", penwidth=2";
    ir_sbuf_put(b, "%sn%u [shape=%s, fillcolor=\"%s\"%s, label=\"%%%u %s", indent, id, shape, fill,
                extra, id, ir_ops[n->op].name);
    if (n->op == IR_OP_PARAM)
        ir_sbuf_put(b, " %lld", (long long)n->a.i[0]);
    if (n->op == IR_OP_VAR_READ || n->op == IR_OP_ASSIGN)
        ir_sbuf_put(b, " v%lld", (long long)n->a.i[0]);
    if (n->op == IR_OP_CONST)
        put_const_value(b, g, n);
    if (fl & IR_F_CF) {
        for (int k = 0; k < 2; k++) {
            const ir_graph *r = ir_region(g, n, k);
            if (r) {
                ir_sbuf_put(b, "\\n");
                put_escaped(b, r->name && *r->name ? r->name : k ? "region 1" : "region 0");
                ir_sbuf_put(b, ": %u nodes", r->n_nodes);
            }
        }
    }
    ir_sbuf_put(b, "\\n");
    ir_sbuf_type(b, n);
    ir_sbuf_put(b, "\"];\n");
}

char *ir_dot(const ir_graph *g, const ir_dot_kernels *k) {
    ir_sbuf b = {malloc(4096), 0, 4096, false};
    if (!b.p)
        return (void)ir_errorf(TJ_ERR_OOM, "dot: out of memory"), NULL;
    b.p[0] = 0;
    ir_sbuf_put(&b, "digraph \"");
    put_escaped(&b, g->name ? g->name : "graph");
    ir_sbuf_put(&b,
                "\" {\n  rankdir=TB;\n  fontname=\"Helvetica\";\n  node [fontname=\"Helvetica\", "
                "fontsize=10, style=filled];\n"
                "  edge [fontname=\"Helvetica\", fontsize=9, color=\"#555555\"];\n");
    /* nodes inside kernels, one cluster per kernel; the others at the top level */
    uint32_t n_k = k ? k->n_kernels : 0;
    int32_t *size = calloc(n_k + 1, sizeof *size); /* nodes per kernel: clusters of 2 or more */
    if (!size) {
        free(b.p);
        return (void)ir_errorf(TJ_ERR_OOM, "dot: out of memory"), NULL;
    }
    for (uint32_t i = 0; i < g->n_nodes && n_k; i++)
        if (k->kernel_of[i] >= 0 && (uint32_t)k->kernel_of[i] < n_k)
            size[k->kernel_of[i]]++;
    for (uint32_t s = 0; s < n_k && !b.oom; s++) {
        if (size[s] < 2)
            continue;
        ir_sbuf_put(&b,
                    "  subgraph cluster_k%u {\n    style=\"rounded,filled\"; color=\"#6d9eeb\"; "
                    "fillcolor=\"#eef3fd\";\n    label=\"",
                    s);
        put_escaped(&b, k->names && k->names[s] ? k->names[s] : "kernel");
        ir_sbuf_put(&b, "\";\n");
        for (uint32_t i = 0; i < g->n_nodes; i++)
            if (k->kernel_of[i] == (int32_t)s)
                put_node(&b, g, i, "    ");
        ir_sbuf_put(&b, "  }\n");
    }
    for (uint32_t i = 0; i < g->n_nodes; i++)
        if (!k || k->kernel_of[i] < 0 || (uint32_t)k->kernel_of[i] >= n_k ||
            size[k->kernel_of[i]] < 2)
            put_node(&b, g, i, "  ");
    free(size);
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        const ir_node *n = ir_node_get(g, i);
        const uint32_t *in = ir_inputs(g, n);
        for (uint32_t j = 0; j < n->n_in; j++)
            ir_sbuf_put(&b, "  n%u -> n%u;\n", in[j], i);
    }
    for (uint32_t e = 1; e < g->n_effects; e++) /* program order of the side effects */
        ir_sbuf_put(&b, "  n%u -> n%u [style=dashed, color=\"#cc0000\", constraint=false];\n",
                    g->effects[e - 1], g->effects[e]);
    for (uint32_t o = 0; o < g->n_outputs; o++) {
        ir_sbuf_put(&b, "  out%u [shape=house, fillcolor=\"#cfe2f3\", label=\"result %u\"];\n", o,
                    o);
        ir_sbuf_put(&b, "  n%u -> out%u;\n", g->outputs[o], o);
    }
    ir_sbuf_put(&b, "}\n");
    if (b.oom) {
        free(b.p);
        return (void)ir_errorf(TJ_ERR_OOM, "dot: out of memory"), NULL;
    }
    return b.p;
}
