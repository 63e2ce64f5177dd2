/* fusion.c — the fusion/partitioning pass. Walks the live nodes from the last to the first: an
 * elementwise node joins the fused group of its consumers when all of them are in one group (so
 * groups stay convex and a node's value never leaves its group unless it is an output), else it
 * starts a group whose loop shape is its own shape. A node with a consumer outside its group is
 * therefore always its group's last node, so ordering groups by their last node is a valid
 * schedule. Graph outputs may sit inside a group only if their shape is the loop shape. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes/fusion.h"

static bool default_fusable(const ir_graph *g, uint32_t id, void *user) {
    const ir_node *n = ir_node_get(g, id);
    if (!(ir_ops[n->op].flags & IR_F_EW) || (ir_ops[n->op].flags & IR_F_SIDE))
        return false;
    if (n->dtype == TJ_STRING || n->a.sub[0])
        return false;
    const uint32_t *in = ir_inputs(g, n);
    for (uint32_t k = 0; k < n->n_in; k++)
        if (ir_node_get(g, in[k])->dtype == TJ_STRING)
            return false;
    return true;
}

static bool same_dims(const ir_node *n, int rank, const int64_t *dims) {
    if (n->rank != rank)
        return false;
    for (int d = 0; d < rank; d++)
        if (n->dims[d] != dims[d] || dims[d] < 0)
            return false;
    return true;
}

void pass_partition_free(pass_partition *p) {
    if (!p)
        return;
    for (uint32_t i = 0; i < p->n_groups; i++) {
        free(p->groups[i].nodes);
        free(p->groups[i].inputs);
        free(p->groups[i].outputs);
    }
    free(p->groups);
    free(p->group_of);
    free(p);
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Fills nodes/inputs/outputs of every group from group_of. */
static tj_status fill_groups(const ir_graph *g, pass_partition *p, const uint8_t *is_out,
                             const uint32_t *cons_off, const uint32_t *cons) {
    uint32_t n = g->n_nodes;
    for (uint32_t id = 0; id < n; id++) {
        if (p->group_of[id] != IR_NONE)
            p->groups[p->group_of[id]].n_nodes++;
    }
    for (uint32_t gi = 0; gi < p->n_groups; gi++) {
        pass_group *gr = &p->groups[gi];
        gr->nodes = malloc(gr->n_nodes * sizeof *gr->nodes);
        if (!gr->nodes)
            return TJ_ERR_OOM;
        gr->n_nodes = 0;
    }
    for (uint32_t id = 0; id < n; id++) {
        uint32_t gi = p->group_of[id];
        if (gi == IR_NONE)
            continue;
        pass_group *gr = &p->groups[gi];
        gr->nodes[gr->n_nodes++] = id;
    }
    for (uint32_t gi = 0; gi < p->n_groups; gi++) {
        pass_group *gr = &p->groups[gi];
        uint32_t n_in_max = 0;
        for (uint32_t k = 0; k < gr->n_nodes; k++)
            n_in_max += ir_node_get(g, gr->nodes[k])->n_in;
        gr->inputs = malloc((n_in_max + 1) * sizeof *gr->inputs);
        gr->outputs = malloc(gr->n_nodes * sizeof *gr->outputs);
        if (!gr->inputs || !gr->outputs)
            return TJ_ERR_OOM;
        for (uint32_t k = 0; k < gr->n_nodes; k++) {
            uint32_t id = gr->nodes[k];
            const ir_node *nd = ir_node_get(g, id);
            const uint32_t *in = ir_inputs(g, nd);
            for (uint32_t j = 0; j < nd->n_in; j++)
                if (p->group_of[in[j]] != gi)
                    gr->inputs[gr->n_inputs++] = in[j];
            bool out = is_out[id];
            for (uint32_t c = cons_off[id]; c < cons_off[id + 1] && !out; c++)
                out = p->group_of[cons[c]] != gi;
            if (out)
                gr->outputs[gr->n_outputs++] = id;
        }
        qsort(gr->inputs, gr->n_inputs, sizeof *gr->inputs, cmp_u32);
        uint32_t m = 0;
        for (uint32_t k = 0; k < gr->n_inputs; k++)
            if (m == 0 || gr->inputs[m - 1] != gr->inputs[k])
                gr->inputs[m++] = gr->inputs[k];
        gr->n_inputs = m;
    }
    return TJ_OK;
}

/* Whether node nd may join reduce group gr: not an output, the loop shape, and every input of
 * the loop shape or a single element (so the kernel indexes inputs without broadcasting). */
static bool joins_reduce(const ir_graph *g, const ir_node *nd, const pass_group *gr, bool is_out) {
    if (is_out || !same_dims(nd, gr->rank, gr->dims))
        return false;
    const uint32_t *in = ir_inputs(g, nd);
    for (uint32_t j = 0; j < nd->n_in; j++) {
        const ir_node *x = ir_node_get(g, in[j]);
        if (ir_numel(x->rank, x->dims) != 1 && !same_dims(x, gr->rank, gr->dims))
            return false;
    }
    return true;
}

pass_partition *pass_fusion_run(const ir_graph *g, pass_fusable_fn fusable,
                                pass_fusable_fn reducible, void *user) {
    if (!fusable)
        fusable = default_fusable;
    uint32_t n = g->n_nodes;
    pass_partition *p = calloc(1, sizeof *p);
    uint8_t *live = calloc(n + 1, 1), *is_out = calloc(n + 1, 1);
    uint32_t *cons_off = calloc(n + 2, sizeof *cons_off);
    uint32_t *cons = NULL;
    tj_status st = TJ_ERR_OOM;
    if (!p || !live || !is_out || !cons_off)
        goto fail;
    p->n_nodes = n;
    p->group_of = malloc((n + 1) * sizeof *p->group_of);
    p->groups = calloc(n + 1, sizeof *p->groups);
    if (!p->group_of || !p->groups)
        goto fail;

    /* liveness: what the outputs and the effects depend on */
    for (uint32_t i = 0; i < g->n_outputs; i++)
        live[g->outputs[i]] = is_out[g->outputs[i]] = 1;
    for (uint32_t i = 0; i < g->n_effects; i++)
        live[g->effects[i]] = 1;
    for (uint32_t id = n; id-- > 0;) {
        const ir_node *nd = ir_node_get(g, id);
        if (ir_node_has_effect(g, nd))
            live[id] = 1;
        if (!live[id])
            continue;
        const uint32_t *in = ir_inputs(g, nd);
        for (uint32_t j = 0; j < nd->n_in; j++)
            live[in[j]] = 1;
    }
    /* consumers (CSR), live nodes only */
    for (uint32_t id = 0; id < n; id++) {
        if (!live[id])
            continue;
        const ir_node *nd = ir_node_get(g, id);
        const uint32_t *in = ir_inputs(g, nd);
        for (uint32_t j = 0; j < nd->n_in; j++)
            cons_off[in[j] + 1]++;
    }
    for (uint32_t id = 0; id < n; id++)
        cons_off[id + 1] += cons_off[id];
    cons = malloc((cons_off[n] + 1) * sizeof *cons);
    if (!cons)
        goto fail;
    {
        uint32_t *fill = calloc(n + 1, sizeof *fill);
        if (!fill)
            goto fail;
        for (uint32_t id = 0; id < n; id++) {
            if (!live[id])
                continue;
            const ir_node *nd = ir_node_get(g, id);
            const uint32_t *in = ir_inputs(g, nd);
            for (uint32_t j = 0; j < nd->n_in; j++)
                cons[cons_off[in[j]] + fill[in[j]]++] = id;
        }
        free(fill);
    }

    /* assignment, last node first; groups numbered in reverse, fixed below */
    uint32_t ng = 0, *size = calloc(n + 1, sizeof *size); /* nodes per group so far */
    if (!size)
        goto fail;
    for (uint32_t id = n; id-- > 0;) {
        p->group_of[id] = IR_NONE;
        if (!live[id])
            continue;
        const ir_node *nd = ir_node_get(g, id);
        bool fuse = fusable(g, id, user);
        uint32_t join = IR_NONE;
        if (fuse && cons_off[id + 1] > cons_off[id]) {
            join = p->group_of[cons[cons_off[id]]];
            for (uint32_t c = cons_off[id]; c < cons_off[id + 1] && join != IR_NONE; c++)
                if (p->group_of[cons[c]] != join)
                    join = IR_NONE;
            if (join != IR_NONE && p->groups[join].reduce &&
                !joins_reduce(g, nd, &p->groups[join], is_out[id]))
                join = IR_NONE;
            else if (join != IR_NONE && !p->groups[join].fused && !p->groups[join].reduce)
                join = IR_NONE;
            if (join != IR_NONE && is_out[id] &&
                !same_dims(nd, p->groups[join].rank, p->groups[join].dims))
                join = IR_NONE;
            if (join != IR_NONE && size[join] >= PASS_MAX_GROUP_NODES)
                join = IR_NONE; /* full: this node ends a new group */
        }
        if (join != IR_NONE) {
            p->group_of[id] = join;
            size[join]++;
            continue;
        }
        pass_group *gr = &p->groups[ng];
        gr->fused = fuse;
        gr->rank = nd->rank;
        memcpy(gr->dims, nd->dims, sizeof gr->dims);
        if (!fuse && reducible && nd->n_in == 1 && (ir_ops[nd->op].flags & IR_F_RED) &&
            reducible(g, id, user)) {
            const ir_node *x = ir_node_get(g, ir_inputs(g, nd)[0]);
            gr->reduce = true;
            gr->rank = x->rank;
            memcpy(gr->dims, x->dims, sizeof gr->dims);
        }
        size[ng] = 1;
        p->group_of[id] = ng++;
    }
    free(size);
    /* renumber so that groups run in ascending order of their last node */
    p->n_groups = ng;
    for (uint32_t i = 0; i < ng / 2; i++) {
        pass_group t = p->groups[i];
        p->groups[i] = p->groups[ng - 1 - i];
        p->groups[ng - 1 - i] = t;
    }
    for (uint32_t id = 0; id < n; id++)
        if (p->group_of[id] != IR_NONE)
            p->group_of[id] = ng - 1 - p->group_of[id];
    st = fill_groups(g, p, is_out, cons_off, cons);
    if (st != TJ_OK)
        goto fail;
    free(live);
    free(is_out);
    free(cons_off);
    free(cons);
    return p;
fail:
    free(live);
    free(is_out);
    free(cons_off);
    free(cons);
    pass_partition_free(p);
    ir_errorf(st, "fusion: out of memory partitioning a graph of %u nodes", n);
    return NULL;
}

static void sb_printf(char **buf, size_t *len, size_t *cap, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void sb_printf(char **buf, size_t *len, size_t *cap, const char *fmt, ...) {
    if (!*buf && *cap)
        return; /* an earlier allocation failed */
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (k < 0)
        return;
    if (*len + (size_t)k + 1 > *cap) {
        size_t nc = (*cap + (size_t)k + 1) * 2;
        char *nb = realloc(*buf, nc);
        if (!nb) {
            free(*buf);
            *buf = NULL;
            *cap = 1;
            return;
        }
        *buf = nb;
        *cap = nc;
    }
    va_start(ap, fmt);
    vsnprintf(*buf + *len, *cap - *len, fmt, ap);
    va_end(ap);
    *len += (size_t)k;
}

char *pass_partition_str(const pass_partition *p) {
    char *buf = NULL;
    size_t len = 0, cap = 0;
    sb_printf(&buf, &len, &cap, "%s", "");
    for (uint32_t gi = 0; p && gi < p->n_groups; gi++) {
        const pass_group *gr = &p->groups[gi];
        sb_printf(&buf, &len, &cap, "%s", gr->fused ? "fused" : gr->reduce ? "reduce" : "node");
        for (uint32_t k = 0; k < gr->n_nodes; k++)
            sb_printf(&buf, &len, &cap, " %%%u", gr->nodes[k]);
        sb_printf(&buf, &len, &cap, " <-");
        for (uint32_t k = 0; k < gr->n_inputs; k++)
            sb_printf(&buf, &len, &cap, " %%%u", gr->inputs[k]);
        sb_printf(&buf, &len, &cap, " ->");
        for (uint32_t k = 0; k < gr->n_outputs; k++)
            sb_printf(&buf, &len, &cap, " %%%u", gr->outputs[k]);
        sb_printf(&buf, &len, &cap, "\n");
    }
    return buf;
}
