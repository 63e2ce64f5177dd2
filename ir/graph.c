/* graph.c — the graph builder: arenas for nodes, edges, blobs and subgraphs (amortised growth),
 * and ir_add, which validates, infers, canonicalises and interns each node. Interning is an
 * open-addressing table of node ids keyed by ir_node_key (blobs by content); side-effect and
 * random nodes bypass it and side-effect nodes are appended to the effect list in program order.
 * Nodes never change once added, so ids stay topological. */
#include <stdlib.h>
#include <string.h>

#include "ir/internal.h"

#define GROW(ptr, n, cap, extra)                                                                   \
    grow_((void **)&(ptr), &(cap), (size_t)(n) + (extra), sizeof(*(ptr)))

static bool grow_(void **p, uint32_t *cap, size_t need, size_t elem) {
    if (need <= *cap)
        return true;
    if (need > UINT32_MAX - 1)
        return false;
    size_t c = *cap ? *cap : 8;
    while (c < need)
        c *= 2;
    if (c > UINT32_MAX - 1)
        c = UINT32_MAX - 1;
    void *q = realloc(*p, c * elem);
    if (!q)
        return false;
    *p = q;
    *cap = (uint32_t)c;
    return true;
}

ir_graph *ir_graph_new(const char *name) {
    ir_graph *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->name = strdup(name ? name : "main");
    if (!g->name || !GROW(g->nodes, 0, g->cap_nodes, 16) || !GROW(g->edges, 0, g->cap_edges, 32) ||
        !GROW(g->outputs, 0, g->cap_outputs, 1) || !GROW(g->effects, 0, g->cap_effects, 1)) {
        ir_graph_free(g);
        return NULL;
    }
    return g;
}

void ir_graph_free(ir_graph *g) {
    if (!g)
        return;
    for (uint32_t i = 0; i < g->n_blobs; i++)
        free(g->blobs[i].data);
    for (uint32_t i = 0; i < g->n_subs; i++)
        ir_graph_free(g->subs[i]);
    free(g->name);
    free(g->nodes);
    free(g->edges);
    free(g->blobs);
    free(g->outputs);
    free(g->effects);
    free(g->subs);
    free(g->itab);
    free(g);
}

/* Never returns NULL for n == 0, so arrays are always allocated (no NULL + 0 arithmetic). */
static void *dup_mem(const void *p, size_t n) {
    void *q = malloc(n ? n : 1);
    if (q && n)
        memcpy(q, p, n);
    return q;
}

ir_graph *ir_graph_clone(const ir_graph *g) {
    if (!g)
        return NULL;
    ir_graph *c = ir_graph_new(g->name);
    if (!c)
        return NULL;
    c->n_params = g->n_params;
    c->n_caps = g->n_caps;
#define COPY(f, n, cap)                                                                            \
    do {                                                                                           \
        free(c->f);                                                                                \
        c->f = dup_mem(g->f, sizeof(*g->f) * (size_t)g->n);                                        \
        if (!c->f)                                                                                 \
            goto fail;                                                                             \
        c->n = c->cap = g->n;                                                                      \
    } while (0)
    COPY(nodes, n_nodes, cap_nodes);
    COPY(edges, n_edges, cap_edges);
    COPY(outputs, n_outputs, cap_outputs);
    COPY(effects, n_effects, cap_effects);
#undef COPY
    if (g->itab_cap) {
        c->itab = dup_mem(g->itab, sizeof(uint32_t) * g->itab_cap);
        if (!c->itab)
            goto fail;
        c->itab_cap = g->itab_cap;
    }
    if (g->n_blobs) {
        c->blobs = calloc(g->n_blobs, sizeof *c->blobs);
        if (!c->blobs)
            goto fail;
        c->cap_blobs = g->n_blobs;
        for (uint32_t i = 0; i < g->n_blobs; i++) {
            c->blobs[i] = g->blobs[i];
            c->blobs[i].data = malloc(g->blobs[i].size ? g->blobs[i].size : 1);
            if (!c->blobs[i].data)
                goto fail;
            c->n_blobs = i + 1;
            if (g->blobs[i].size)
                memcpy(c->blobs[i].data, g->blobs[i].data, g->blobs[i].size);
        }
    }
    if (g->n_subs) {
        c->subs = calloc(g->n_subs, sizeof *c->subs);
        if (!c->subs)
            goto fail;
        c->cap_subs = g->n_subs;
        for (uint32_t i = 0; i < g->n_subs; i++) {
            c->subs[i] = ir_graph_clone(g->subs[i]);
            if (!c->subs[i])
                goto fail;
            c->n_subs = i + 1;
        }
    }
    return c;
fail:
    ir_graph_free(c);
    ir_errorf(TJ_ERR_OOM, "ir_graph_clone: out of memory");
    return NULL;
}

uint32_t ir_add_blob(ir_graph *g, const void *data, size_t size) {
    if (!g || (size && !data) || !GROW(g->blobs, g->n_blobs, g->cap_blobs, 1)) {
        ir_errorf(g ? TJ_ERR_OOM : TJ_ERR_INVALID, "ir_add_blob: cannot add a blob");
        return 0;
    }
    void *p = malloc(size ? size : 1);
    if (!p) {
        ir_errorf(TJ_ERR_OOM, "ir_add_blob: out of memory (%zu bytes)", size);
        return 0;
    }
    if (size)
        memcpy(p, data, size);
    g->blobs[g->n_blobs] = (ir_blob){size, p, ir_hash_bytes(p, size, 0x5eedb10b)};
    return ++g->n_blobs;
}

tj_status ir_add_output(ir_graph *g, uint32_t id) {
    if (!g || id >= g->n_nodes)
        return ir_errorf(TJ_ERR_INVALID, "ir_add_output: invalid node %u", id);
    if (g->nodes[id].dtype == IR_VOID)
        return ir_errorf(TJ_ERR_INVALID, "ir_add_output: node %%%u (%s) has no value", id,
                         ir_ops[g->nodes[id].op].name);
    if (!GROW(g->outputs, g->n_outputs, g->cap_outputs, 1))
        return ir_errorf(TJ_ERR_OOM, "ir_add_output: out of memory");
    g->outputs[g->n_outputs++] = id;
    return TJ_OK;
}

tj_status ir_add_effect(ir_graph *g, uint32_t id) {
    if (!g || id >= g->n_nodes)
        return ir_errorf(TJ_ERR_INVALID, "ir_add_effect: invalid node %u", id);
    for (uint32_t i = g->n_effects; i-- > 0;)
        if (g->effects[i] == id)
            return TJ_OK;
    if (g->n_effects && id < g->effects[g->n_effects - 1])
        return ir_errorf(TJ_ERR_INVALID,
                         "ir_add_effect: node %%%u comes before the last effect "
                         "%%%u (effects are kept in program order)",
                         id, g->effects[g->n_effects - 1]);
    if (!GROW(g->effects, g->n_effects, g->cap_effects, 1))
        return ir_errorf(TJ_ERR_OOM, "ir_add_effect: out of memory");
    g->effects[g->n_effects++] = id;
    return TJ_OK;
}

uint32_t ir_add_sub(ir_graph *g, ir_graph *sub) {
    if (!g || !sub || !GROW(g->subs, g->n_subs, g->cap_subs, 1)) {
        ir_errorf(TJ_ERR_INVALID, "ir_add_sub: cannot add a subgraph");
        return 0;
    }
    g->subs[g->n_subs++] = sub;
    return g->n_subs;
}

int64_t ir_string_count(const void *data, size_t size) {
    const unsigned char *p = data;
    size_t off = 0;
    int64_t n = 0;
    while (off < size) {
        uint64_t len;
        if (size - off < sizeof len)
            return -1;
        memcpy(&len, p + off, sizeof len);
        off += sizeof len;
        if (len > size - off)
            return -1;
        off += (size_t)len;
        n++;
    }
    return n;
}

tj_status ir_check_payload(const ir_graph *g, const ir_node *n) {
    const char *name = ir_ops[n->op].name;
    if (n->a.blob > g->n_blobs)
        return ir_errorf(TJ_ERR_INVALID, "%s: invalid blob %u", name, n->a.blob);
    for (int k = 0; k < 2; k++)
        if (n->a.sub[k] > g->n_subs)
            return ir_errorf(TJ_ERR_INVALID, "%s: invalid subgraph %u", name, n->a.sub[k]);
    const ir_blob *b = ir_blob_get(g, n->a.blob);
    if (n->op == IR_OP_CONST) {
        char s[200];
        int64_t numel = ir_numel(n->rank, n->dims);
        if (!b)
            return ir_errorf(TJ_ERR_INVALID, "const: missing payload for %s%s",
                             ir_dtype_short(n->dtype), ir_fmt_dims(s, sizeof s, n->rank, n->dims));
        if (n->dtype == TJ_STRING) {
            if (ir_string_count(b->data, b->size) != numel)
                return ir_errorf(TJ_ERR_INVALID, "const: malformed string payload for str%s",
                                 ir_fmt_dims(s, sizeof s, n->rank, n->dims));
        } else if ((uint64_t)numel > SIZE_MAX / 8 ||
                   b->size != (size_t)numel * ir_dtype_size(n->dtype))
            return ir_errorf(TJ_ERR_INVALID, "const: payload of %zu bytes does not match %s%s",
                             b->size, ir_dtype_short(n->dtype),
                             ir_fmt_dims(s, sizeof s, n->rank, n->dims));
    } else if (n->op == IR_OP_HOST_CALLBACK) {
        if (!b || b->size != 2 * sizeof(void *))
            return ir_errorf(TJ_ERR_INVALID, "host_callback: payload must be {fn, user}");
    }
    return TJ_OK;
}

static inline uint64_t dbits(double d) {
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

uint64_t ir_node_key(const ir_graph *g, const ir_node *n, const uint32_t *in) {
    uint64_t h =
        ir_hash_mix(0x243f6a8885a308d3ull, n->op | (uint64_t)n->dtype << 16 |
                                               (uint64_t)n->rank << 24 | (uint64_t)n->n_in << 32);
    for (int k = 0; k < n->rank; k++)
        h = ir_hash_mix(h, (uint64_t)n->dims[k]);
    for (int k = 0; k < 4; k++)
        if (n->a.i[k])
            h = ir_hash_mix(h, (uint64_t)n->a.i[k] ^ (uint64_t)k << 60);
    for (int k = 0; k < 3; k++)
        if (dbits(n->a.f[k]))
            h = ir_hash_mix(h, dbits(n->a.f[k]) + (uint64_t)k);
    h = ir_hash_mix(h, n->a.n_list);
    for (uint32_t k = 0; k < n->a.n_list && k < IR_MAX_LIST; k++)
        h = ir_hash_mix(h, (uint64_t)n->a.list[k]);
    const ir_blob *b = ir_blob_get(g, n->a.blob);
    if (b)
        h = ir_hash_mix(h, b->h ^ b->size);
    if (n->a.sub[0] | n->a.sub[1])
        h = ir_hash_mix(h, n->a.sub[0] | (uint64_t)n->a.sub[1] << 32);
    for (uint32_t k = 0; k < n->n_in; k++)
        h = ir_hash_mix(h, in[k]);
    return h;
}

static bool node_eq(const ir_graph *g, const ir_node *a, const uint32_t *ain, const ir_node *b,
                    const uint32_t *bin) {
    if (a->h != b->h || a->op != b->op || a->dtype != b->dtype || a->rank != b->rank ||
        a->n_in != b->n_in || a->a.n_list != b->a.n_list)
        return false;
    if (memcmp(a->dims, b->dims, sizeof(int64_t) * a->rank) ||
        memcmp(a->a.i, b->a.i, sizeof a->a.i) || memcmp(a->a.f, b->a.f, sizeof a->a.f) ||
        memcmp(a->a.list, b->a.list, sizeof(int64_t) * a->a.n_list) ||
        memcmp(a->a.sub, b->a.sub, sizeof a->a.sub) || memcmp(ain, bin, sizeof(uint32_t) * a->n_in))
        return false;
    if (a->a.blob != b->a.blob) {
        const ir_blob *x = ir_blob_get(g, a->a.blob), *y = ir_blob_get(g, b->a.blob);
        if (!x || !y || x->size != y->size || x->h != y->h ||
            (x->size && memcmp(x->data, y->data, x->size)))
            return false;
    }
    return true;
}

static bool internable(const ir_node *n) {
    return !(ir_ops[n->op].flags & (IR_F_SIDE | IR_F_RAND));
}

static bool itab_grow(ir_graph *g) {
    uint32_t cap = g->itab_cap ? g->itab_cap * 2 : 64;
    uint32_t *t = calloc(cap, sizeof *t);
    if (!t)
        return false;
    for (uint32_t id = 0; id < g->n_nodes; id++) {
        const ir_node *n = &g->nodes[id];
        if (!internable(n))
            continue;
        uint32_t j = (uint32_t)n->h & (cap - 1);
        while (t[j])
            j = (j + 1) & (cap - 1);
        t[j] = id + 1;
    }
    free(g->itab);
    g->itab = t;
    g->itab_cap = cap;
    return true;
}

static uint32_t fail_oom(const char *op) {
    ir_errorf(TJ_ERR_OOM, "%s: out of memory", op);
    return IR_NONE;
}

uint32_t ir_add(ir_graph *g, const ir_node *proto, const uint32_t *in, uint32_t n_in) {
    if (!g || !proto) {
        ir_errorf(TJ_ERR_INVALID, "ir_add: NULL argument");
        return IR_NONE;
    }
    if (proto->op >= IR_N_OPS) {
        ir_errorf(TJ_ERR_INVALID, "ir_add: unknown op %u", (unsigned)proto->op);
        return IR_NONE;
    }
    const char *name = ir_ops[proto->op].name;
    int want = ir_ops[proto->op].n_in;
    if ((want >= 0 && n_in != (uint32_t)want) || (n_in && !in)) {
        ir_errorf(TJ_ERR_INVALID, "%s: expected %d inputs, got %u", name, want, n_in);
        return IR_NONE;
    }
    if (g->n_nodes >= UINT32_MAX - 2 || n_in > UINT32_MAX - 2 - g->n_edges)
        return fail_oom(name);
    const ir_node *stack_ins[16] = {NULL};
    const ir_node **ins = n_in <= 16 ? stack_ins : malloc(sizeof *ins * n_in);
    if (!ins)
        return fail_oom(name);
    for (uint32_t k = 0; k < n_in; k++) {
        if (in[k] >= g->n_nodes) {
            if (ins != stack_ins)
                free(ins);
            ir_errorf(TJ_ERR_INVALID, "%s: input %u refers to unknown node %u", name, k, in[k]);
            return IR_NONE;
        }
        ins[k] = &g->nodes[in[k]];
    }
    ir_node n = *proto;
    n.n_in = n_in;
    tj_status st = ir_infer(&n, ins, n_in);
    if (ins != stack_ins)
        free(ins);
    if (st || ir_check_payload(g, &n))
        return IR_NONE;
    if (!GROW(g->edges, g->n_edges, g->cap_edges, n_in))
        return fail_oom(name);
    uint32_t *e = g->edges + g->n_edges;
    if (n_in)
        memcpy(e, in, sizeof(uint32_t) * n_in);
    unsigned fl = ir_ops[n.op].flags;
    if ((fl & IR_F_COMM) && n_in == 2 && !(n.op == IR_OP_ADD && n.dtype == TJ_STRING) &&
        e[0] > e[1]) {
        uint32_t t = e[0];
        e[0] = e[1];
        e[1] = t;
    }
    n.in_off = g->n_edges;
    n.h = ir_node_key(g, &n, e);
    bool intern = internable(&n);
    if (intern) {
        if ((uint64_t)(g->n_nodes + 1) * 2 > g->itab_cap && !itab_grow(g))
            return fail_oom(name);
        uint32_t mask = g->itab_cap - 1, j = (uint32_t)n.h & mask;
        for (; g->itab[j]; j = (j + 1) & mask) {
            const ir_node *m = &g->nodes[g->itab[j] - 1];
            if (node_eq(g, m, g->edges + m->in_off, &n, e))
                return g->itab[j] - 1;
        }
    }
    if (n.op == IR_OP_PARAM && (uint64_t)n.a.i[0] < g->n_params) {
        for (uint32_t j = 0; j < g->n_nodes; j++) {
            const ir_node *m = &g->nodes[j];
            if (m->op == IR_OP_PARAM && m->a.i[0] == n.a.i[0]) {
                char s[200];
                ir_errorf(TJ_ERR_INVALID, "param: index %lld is already defined as %s%s",
                          (long long)n.a.i[0], ir_dtype_short(m->dtype),
                          ir_fmt_dims(s, sizeof s, m->rank, m->dims));
                return IR_NONE;
            }
        }
    }
    if (!GROW(g->nodes, g->n_nodes, g->cap_nodes, 1))
        return fail_oom(name);
    if ((fl & IR_F_SIDE) && !GROW(g->effects, g->n_effects, g->cap_effects, 1))
        return fail_oom(name);
    uint32_t id = g->n_nodes++;
    g->nodes[id] = n;
    g->n_edges += n_in;
    if (intern) {
        uint32_t mask = g->itab_cap - 1, j = (uint32_t)n.h & mask;
        while (g->itab[j])
            j = (j + 1) & mask;
        g->itab[j] = id + 1;
    }
    if (fl & IR_F_SIDE)
        g->effects[g->n_effects++] = id;
    if (n.op == IR_OP_PARAM && (uint64_t)n.a.i[0] + 1 > g->n_params)
        g->n_params = (uint32_t)n.a.i[0] + 1;
    if ((n.op == IR_OP_VAR_READ || n.op == IR_OP_ASSIGN) && (uint64_t)n.a.i[0] + 1 > g->n_caps)
        g->n_caps = (uint32_t)n.a.i[0] + 1;
    return id;
}
