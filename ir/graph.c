/* graph.c — the graph builder: arenas for nodes, edges, blobs and subgraphs (amortised growth,
 * or presized by ir_graph_reserve), and ir_add, which validates, infers, canonicalises and interns
 * each node. Interning is an open-addressing table keyed by ir_node_key (blobs by content) that
 * keeps key bits beside each id, so probes and rehashes read a node only on a likely match;
 * side-effect and random nodes bypass it and side-effect nodes are appended to the effect list in
 * program order. Nodes never change once added, so ids stay topological. ir_add_inferred is
 * ir_add without re-inference, for the copies a pass rebuild makes. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "ir/internal.h"

/* Arrays of a few MB (a 10k-node graph's nodes) go on transparent huge pages where the system
 * allows it (a hint; malloc'd memory either way): a fresh graph then costs a few page faults
 * instead of one per 4 KB, and random probes into nodes and the intern table miss the TLB less. */
#define HUGE_PAGE ((size_t)2 << 20)
#define ITAB_BYTES(cap) ((size_t)(cap) * (2 * sizeof(uint32_t) + 1)) /* see itab_grow */
static void *big_alloc(size_t size) {
    if (size < HUGE_PAGE)
        return malloc(size);
    size_t r = (size + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
    void *p = aligned_alloc(HUGE_PAGE, r);
#ifdef MADV_HUGEPAGE
    if (p)
        (void)madvise(p, r, MADV_HUGEPAGE);
#endif
    return p;
}

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
    atomic_init((_Atomic int *)&g->refs, 1);
    g->name = strdup(name ? name : "main");
    if (!g->name || !GROW(g->nodes, 0, g->cap_nodes, 16) || !GROW(g->edges, 0, g->cap_edges, 32) ||
        !GROW(g->outputs, 0, g->cap_outputs, 1) || !GROW(g->effects, 0, g->cap_effects, 1)) {
        ir_graph_free(g);
        return NULL;
    }
    return g;
}

/* Blob payloads are immutable once added, so graphs share them: a rebuild, a pass or a clone
 * takes a reference (ir_add_blob_shared) instead of copying and rehashing a model's megabytes of
 * weights. The count lives in a header (ir_blob.own): a copied payload follows it in the same
 * allocation, 64-byte aligned as tensor buffers are; a borrowed one is elsewhere and handed back
 * to its owner (release) with the last reference. */
typedef struct blob_hdr {
    atomic_size_t refs;
    void (*release)(void *ctx); /* borrowed payload; NULL: the payload follows the header */
    void *ctx;
    char pad[40];
} blob_hdr;

static void payload_unref(void *own) {
    blob_hdr *h = own;
    if (!h || atomic_fetch_sub_explicit(&h->refs, 1, memory_order_acq_rel) != 1)
        return;
    if (h->release)
        h->release(h->ctx);
    free(h);
}

#define BLOB_SEED 0x5eedb10bu

static void payload_ref(void *own) {
    atomic_fetch_add_explicit(&((blob_hdr *)own)->refs, 1, memory_order_relaxed);
}

ir_graph *ir_graph_share(const ir_graph *g) {
    if (g)
        atomic_fetch_add_explicit((_Atomic int *)&g->refs, 1, memory_order_relaxed);
    return (ir_graph *)g;
}

void ir_graph_free(ir_graph *g) {
    if (!g || atomic_fetch_sub_explicit((_Atomic int *)&g->refs, 1, memory_order_acq_rel) != 1)
        return;
    for (uint32_t i = 0; i < g->n_blobs; i++)
        payload_unref(g->blobs[i].own);
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

enum { CONCRETE_STACK = 8 }; /* inputs of a node ir_graph_concretize infers without malloc */
ir_graph *ir_graph_concretize(const ir_graph *g, const int *rank,
                              const int64_t (*dims)[IR_MAX_RANK]) {
    ir_graph *c = ir_graph_clone(g);
    if (!c)
        return NULL;
    /* shapes change, so keys do: the clone's interning table would name stale keys */
    free(c->itab);
    c->itab = NULL;
    c->itab_cap = 0;
    tj_status st =
        c->n_subs ? ir_errorf(TJ_ERR_UNSUPPORTED, "concretize: the graph has regions") : TJ_OK;
    for (uint32_t i = 0; i < c->n_nodes && !st; i++) {
        ir_node *n = &c->nodes[i];
        const uint32_t *in = c->edges + n->in_off;
        if (n->op == IR_OP_PARAM) {
            int64_t k = n->a.i[0];
            if (k < 0 || (uint64_t)k >= c->n_params || rank[k] < 0 || rank[k] > IR_MAX_RANK) {
                st = ir_errorf(TJ_ERR_INVALID, "concretize: param %lld has no shape", (long long)k);
                break;
            }
            n->rank = (uint8_t)rank[k];
            memcpy(n->dims, dims[k], sizeof(int64_t) * (size_t)rank[k]);
        } else if (n->n_in > 0) {
            if (n->a.sub[0] || !ir_shape_rules[n->op]) {
                st = ir_errorf(TJ_ERR_UNSUPPORTED, "concretize: %s is inferred against its graph",
                               ir_ops[n->op].name);
                break;
            }
            const ir_node *ins[CONCRETE_STACK], **pi = ins;
            if (n->n_in > CONCRETE_STACK && !(pi = malloc(n->n_in * sizeof *pi))) {
                st = ir_errorf(TJ_ERR_OOM, "concretize: out of memory");
                break;
            }
            for (uint32_t k = 0; k < n->n_in; k++)
                pi[k] = &c->nodes[in[k]];
            ir_node p = *n;
            st = ir_infer(&p, pi, n->n_in);
            if (pi != ins)
                free(pi);
            if (!st && p.dtype != n->dtype)
                st =
                    ir_errorf(TJ_ERR_DTYPE, "concretize: %s changed its dtype", ir_ops[n->op].name);
            if (st)
                break;
            n->rank = p.rank;
            memcpy(n->dims, p.dims, sizeof n->dims);
        }
        for (int d = 0; d < n->rank && !st; d++)
            if (n->dims[d] < 0)
                st = ir_errorf(TJ_ERR_UNSUPPORTED, "concretize: %%%u (%s) has an unknown dim", i,
                               ir_ops[n->op].name);
        n->h = ir_node_key(c, n, in);
    }
    if (st) {
        ir_graph_free(c);
        return NULL;
    }
    return c;
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
        c->itab = dup_mem(g->itab, ITAB_BYTES(g->itab_cap));
        if (!c->itab)
            goto fail;
        c->itab_cap = g->itab_cap;
    }
    if (g->n_blobs) {
        c->blobs = calloc(g->n_blobs, sizeof *c->blobs);
        if (!c->blobs)
            goto fail;
        c->cap_blobs = g->n_blobs;
        for (uint32_t i = 0; i < g->n_blobs; i++) { /* shared, not copied */
            c->blobs[i] = g->blobs[i];
            payload_ref(g->blobs[i].own);
            c->n_blobs = i + 1;
        }
    }
    if (g->n_subs) {
        c->subs = calloc(g->n_subs, sizeof *c->subs);
        if (!c->subs)
            goto fail;
        c->cap_subs = g->n_subs;
        for (uint32_t i = 0; i < g->n_subs; i++) /* shared, not copied */
            c->subs[c->n_subs++] = ir_graph_share(g->subs[i]);
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
    blob_hdr *h = size <= SIZE_MAX - sizeof *h - 64
                      ? aligned_alloc(64, (sizeof *h + (size ? size : 1) + 63) & ~(size_t)63)
                      : NULL;
    if (!h) {
        ir_errorf(TJ_ERR_OOM, "ir_add_blob: out of memory (%zu bytes)", size);
        return 0;
    }
    *h = (blob_hdr){.release = NULL};
    atomic_init(&h->refs, 1);
    void *p = h + 1;
    if (size)
        memcpy(p, data, size);
    g->blobs[g->n_blobs] = (ir_blob){size, p, ir_hash_bytes(p, size, BLOB_SEED), h};
    return ++g->n_blobs;
}

uint32_t ir_add_blob_borrowed(ir_graph *g, const void *data, size_t size,
                              void (*release)(void *ctx), void *ctx) {
    if (!g || !data || !release || !GROW(g->blobs, g->n_blobs, g->cap_blobs, 1)) {
        ir_errorf(g && data && release ? TJ_ERR_OOM : TJ_ERR_INVALID,
                  "ir_add_blob_borrowed: cannot add a blob");
        return 0;
    }
    blob_hdr *h = malloc(sizeof *h);
    if (!h) {
        ir_errorf(TJ_ERR_OOM, "ir_add_blob_borrowed: out of memory");
        return 0;
    }
    *h = (blob_hdr){.release = release, .ctx = ctx};
    atomic_init(&h->refs, 1);
    g->blobs[g->n_blobs] = (ir_blob){size, (void *)data, ir_hash_bytes(data, size, BLOB_SEED), h};
    return ++g->n_blobs;
}

void *ir_blob_ref(const ir_blob *b) {
    if (!b || !b->own)
        return NULL;
    payload_ref(b->own);
    return b->own;
}

void ir_blob_unref(void *own) {
    payload_unref(own);
}

uint32_t ir_add_blob_shared(ir_graph *g, const ir_blob *b) {
    ir_blob c = b ? *b : (ir_blob){0}; /* b may point into g->blobs, which GROW moves */
    if (!g || !c.own || !GROW(g->blobs, g->n_blobs, g->cap_blobs, 1)) {
        ir_errorf(g && b ? TJ_ERR_OOM : TJ_ERR_INVALID, "ir_add_blob_shared: cannot add a blob");
        return 0;
    }
    payload_ref(c.own);
    g->blobs[g->n_blobs] = c;
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
    /* the list is increasing, so a duplicate can only be the last entry; the scan runs only on
     * the error path (an id below the last one), to accept an earlier duplicate as before */
    uint32_t last = g->n_effects ? g->effects[g->n_effects - 1] : 0;
    if (g->n_effects && id == last)
        return TJ_OK;
    for (uint32_t i = g->n_effects; g->n_effects && id < last && i-- > 0;)
        if (g->effects[i] == id)
            return TJ_OK;
    if (g->n_effects && id < last)
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

static bool internable(const ir_graph *g, const ir_node *n) {
    return !(ir_ops[n->op].flags & (IR_F_SIDE | IR_F_RAND)) && !ir_node_has_effect(g, n);
}

/* Slot j of the table is itab[2j] = 1 + node id and itab[2j + 1] = the low 32 bits of the key
 * (the slot index comes from them, so growing never reads a node); after the 2 * cap words come
 * cap tag bytes (0: empty, else 0x80 | the key's top 7 bits). A probe reads only the tags (a
 * quarter of a megabyte for 100k nodes, cache resident) until a tag matches. */
static inline uint8_t *itab_tags(const ir_graph *g) {
    return (uint8_t *)(g->itab + 2 * (size_t)g->itab_cap);
}
static inline uint8_t key_tag(uint64_t h) {
    return (uint8_t)(0x80 | (h >> 57));
}

static bool itab_grow(ir_graph *g, uint64_t need) {
    uint64_t cap = g->itab_cap ? (uint64_t)g->itab_cap * 2 : 64;
    while (cap < need)
        cap *= 2;
    if (cap > ((uint64_t)1 << 31))
        return false;
    uint32_t *t = big_alloc(ITAB_BYTES(cap));
    if (!t)
        return false;
    uint8_t *tt = (uint8_t *)(t + 2 * cap), *ot = g->itab_cap ? itab_tags(g) : NULL;
    memset(tt, 0, (size_t)cap);
    uint32_t mask = (uint32_t)cap - 1;
    for (uint32_t i = 0; i < g->itab_cap; i++) {
        if (!ot[i])
            continue;
        uint32_t j = g->itab[2 * i + 1] & mask;
        while (tt[j])
            j = (j + 1) & mask;
        t[2 * j] = g->itab[2 * i];
        t[2 * j + 1] = g->itab[2 * i + 1];
        tt[j] = ot[i];
    }
    free(g->itab);
    g->itab = t;
    g->itab_cap = (uint32_t)cap;
    return true;
}

tj_status ir_graph_reserve(ir_graph *g, uint32_t n_nodes, uint32_t n_edges) {
    if (!g)
        return ir_errorf(TJ_ERR_INVALID, "ir_graph_reserve: NULL graph");
    /* exact sizes: a rebuild knows its bound, and doubling past it only wastes address space */
    if (n_nodes > g->cap_nodes) {
        ir_node *p = n_nodes < UINT32_MAX - 1 ? big_alloc(sizeof *p * n_nodes) : NULL;
        if (!p)
            return ir_errorf(TJ_ERR_OOM, "ir_graph_reserve: out of memory for %u nodes", n_nodes);
        if (g->n_nodes)
            memcpy(p, g->nodes, sizeof *p * g->n_nodes);
        free(g->nodes);
        g->nodes = p;
        g->cap_nodes = n_nodes;
    }
    if (n_edges > g->cap_edges) {
        uint32_t *p = n_edges < UINT32_MAX - 1 ? realloc(g->edges, sizeof *p * n_edges) : NULL;
        if (!p)
            return ir_errorf(TJ_ERR_OOM, "ir_graph_reserve: out of memory for %u edges", n_edges);
        g->edges = p;
        g->cap_edges = n_edges;
    }
    uint64_t need = 2 * ((uint64_t)n_nodes + 1);
    if (need > g->itab_cap && !itab_grow(g, need))
        return ir_errorf(TJ_ERR_OOM, "ir_graph_reserve: out of memory for %u nodes", n_nodes);
    return TJ_OK;
}

tj_status ir_graph_reset(ir_graph *g, const char *name) {
    if (!g)
        return ir_errorf(TJ_ERR_INVALID, "ir_graph_reset: NULL graph");
    char *nm = strdup(name ? name : "main");
    if (!nm)
        return ir_errorf(TJ_ERR_OOM, "ir_graph_reset: out of memory");
    free(g->name);
    g->name = nm;
    for (uint32_t i = 0; i < g->n_blobs; i++)
        payload_unref(g->blobs[i].own);
    for (uint32_t i = 0; i < g->n_subs; i++)
        ir_graph_free(g->subs[i]);
    g->n_nodes = g->n_edges = g->n_blobs = g->n_outputs = g->n_effects = 0;
    g->n_params = g->n_caps = g->n_subs = 0;
    if (g->itab_cap)
        memset(itab_tags(g), 0, g->itab_cap);
    return TJ_OK;
}

static uint32_t fail_oom(const char *op) {
    ir_errorf(TJ_ERR_OOM, "%s: out of memory", op);
    return IR_NONE;
}

/* Checks the op and the input count and ids; NULL (error set) or the op's name. */
static const char *check_call(const ir_graph *g, const ir_node *proto, const uint32_t *in,
                              uint32_t n_in) {
    if (!g || !proto) {
        ir_errorf(TJ_ERR_INVALID, "ir_add: NULL argument");
        return NULL;
    }
    if (proto->op >= IR_N_OPS) {
        ir_errorf(TJ_ERR_INVALID, "ir_add: unknown op %u", (unsigned)proto->op);
        return NULL;
    }
    const char *name = ir_ops[proto->op].name;
    int want = ir_ops[proto->op].n_in;
    if ((want >= 0 && n_in != (uint32_t)want) || (n_in && !in)) {
        ir_errorf(TJ_ERR_INVALID, "%s: expected %d inputs, got %u", name, want, n_in);
        return NULL;
    }
    if (g->n_nodes >= UINT32_MAX - 2 || n_in > UINT32_MAX - 2 - g->n_edges) {
        fail_oom(name);
        return NULL;
    }
    for (uint32_t k = 0; k < n_in; k++)
        if (in[k] >= g->n_nodes) {
            ir_errorf(TJ_ERR_INVALID, "%s: input %u refers to unknown node %u", name, k, in[k]);
            return NULL;
        }
    return name;
}

/* Copies the inputs to the end of the edge array (not yet counted) in canonical operand order
 * and makes room in the intern table for one more node; NULL on OOM. */
static uint32_t *stage(ir_graph *g, const ir_node *n, const uint32_t *in, uint32_t n_in) {
    if (!GROW(g->edges, g->n_edges, g->cap_edges, n_in))
        return NULL;
    uint64_t need = 2 * ((uint64_t)g->n_nodes + 1);
    if (internable(g, n) && need > g->itab_cap && !itab_grow(g, need))
        return NULL;
    uint32_t *e = g->edges + g->n_edges;
    if (n_in)
        memcpy(e, in, sizeof(uint32_t) * n_in);
    if ((ir_ops[n->op].flags & IR_F_COMM) && n_in == 2 &&
        !(n->op == IR_OP_ADD && n->dtype == TJ_STRING) && e[0] > e[1]) {
        uint32_t t = e[0];
        e[0] = e[1];
        e[1] = t;
    }
    return e;
}

/* The second half of ir_add, for an inferred and checked node n whose inputs are staged at e and
 * whose n_in, in_off and key are set: interning, then the append. n may point at
 * g->nodes[g->n_nodes] (room reserved). */
static uint32_t commit(ir_graph *g, ir_node *n, const uint32_t *e, uint32_t n_in,
                       const char *name) {
    bool effect = ir_node_has_effect(g, n);
    bool intern = internable(g, n);
    uint32_t slot = 0;
    if (intern) {
        const uint8_t *tags = itab_tags(g), tag = key_tag(n->h);
        uint32_t mask = g->itab_cap - 1, h32 = (uint32_t)n->h, j = h32 & mask;
        for (; tags[j]; j = (j + 1) & mask) {
            if (tags[j] != tag || g->itab[2 * j + 1] != h32)
                continue;
            const ir_node *m = &g->nodes[g->itab[2 * j] - 1];
            if (node_eq(g, m, g->edges + m->in_off, n, e))
                return g->itab[2 * j] - 1;
        }
        slot = j;
    }
    if (n->op == IR_OP_PARAM && (uint64_t)n->a.i[0] < g->n_params) {
        for (uint32_t j = 0; j < g->n_nodes; j++) {
            const ir_node *m = &g->nodes[j];
            if (m->op == IR_OP_PARAM && m->a.i[0] == n->a.i[0]) {
                char s[200];
                ir_errorf(TJ_ERR_INVALID, "param: index %lld is already defined as %s%s",
                          (long long)n->a.i[0], ir_dtype_short(m->dtype),
                          ir_fmt_dims(s, sizeof s, m->rank, m->dims));
                return IR_NONE;
            }
        }
    }
    if (effect && !GROW(g->effects, g->n_effects, g->cap_effects, 1))
        return fail_oom(name);
    uint32_t id = g->n_nodes;
    if (n != &g->nodes[id]) {
        if (!GROW(g->nodes, g->n_nodes, g->cap_nodes, 1))
            return fail_oom(name);
        g->nodes[id] = *n;
    }
    g->n_nodes++;
    g->n_edges += n_in;
    if (intern) {
        g->itab[2 * slot] = id + 1;
        g->itab[2 * slot + 1] = (uint32_t)n->h;
        itab_tags(g)[slot] = key_tag(n->h);
    }
    if (effect)
        g->effects[g->n_effects++] = id;
    if (n->op == IR_OP_PARAM && (uint64_t)n->a.i[0] + 1 > g->n_params)
        g->n_params = (uint32_t)n->a.i[0] + 1;
    if ((n->op == IR_OP_VAR_READ || n->op == IR_OP_ASSIGN) && (uint64_t)n->a.i[0] + 1 > g->n_caps)
        g->n_caps = (uint32_t)n->a.i[0] + 1;
    return id;
}

uint32_t ir_add(ir_graph *g, const ir_node *proto, const uint32_t *in, uint32_t n_in) {
    const char *name = check_call(g, proto, in, n_in);
    if (!name)
        return IR_NONE;
    const ir_node *stack_ins[16] = {NULL};
    const ir_node **ins = n_in <= 16 ? stack_ins : malloc(sizeof *ins * n_in);
    if (!ins)
        return fail_oom(name);
    for (uint32_t k = 0; k < n_in; k++)
        ins[k] = &g->nodes[in[k]];
    ir_node n = *proto;
    n.n_in = n_in;
    tj_status st = (ir_ops[n.op].flags & IR_F_CF) || n.op == IR_OP_GET
                       ? ir_infer_in_graph(g, &n, in, n_in)
                       : ir_infer(&n, ins, n_in);
    if (ins != stack_ins)
        free(ins);
    if (st || ir_check_payload(g, &n))
        return IR_NONE;
    uint32_t *e = stage(g, &n, in, n_in);
    if (!e)
        return fail_oom(name);
    n.in_off = g->n_edges;
    n.h = ir_node_key(g, &n, e);
    return commit(g, &n, e, n_in, name);
}

uint32_t ir_add_inferred(ir_graph *g, const ir_node *node, const uint32_t *in, uint32_t n_in) {
    const char *name = check_call(g, node, in, n_in);
    if (!name)
        return IR_NONE;
    if (node->rank > IR_MAX_RANK || node->a.n_list > IR_MAX_LIST || node->a.blob > g->n_blobs ||
        node->a.sub[0] > g->n_subs || node->a.sub[1] > g->n_subs)
        return ir_add(g, node, in, n_in); /* not a node of a valid graph: let ir_add report it */
    uintptr_t at = (uintptr_t)node, lo = (uintptr_t)g->nodes;
    if (at >= lo && at < lo + sizeof *g->nodes * g->cap_nodes)
        return ir_add(g, node, in, n_in); /* one of g's own nodes: growing g would move it */
    if (node->n_in != n_in)
        return ir_add(g, node, in, n_in);
    uint32_t *e = stage(g, node, in, n_in);
    if (!e || !GROW(g->nodes, g->n_nodes, g->cap_nodes, 1))
        return fail_oom(name);
    /* the key first: the probe's cache miss then overlaps the copy of the node into the next
     * slot (a merge leaves that slot unused) */
    uint64_t h = ir_node_key(g, node, e);
    if (internable(g, node)) {
        uint32_t j = (uint32_t)h & (g->itab_cap - 1);
        __builtin_prefetch(itab_tags(g) + j);
        __builtin_prefetch(g->itab + 2 * (size_t)j);
    }
    ir_node *n = &g->nodes[g->n_nodes];
    *n = *node;
    n->in_off = g->n_edges;
    n->h = h;
    return commit(g, n, e, n_in, name);
}
