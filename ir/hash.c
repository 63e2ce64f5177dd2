/* hash.c — content hashing: ir_hash_bytes (a murmur-style 64-bit hash) and ir_graph_hash, a
 * 128-bit Merkle hash of a graph. A node's hash covers its op, dtype, dims, attributes, blob
 * content and its inputs' hashes (never ids or pointers), so the hash does not depend on node
 * numbering; commutative operands are combined order-free. Identical random / side-effect nodes
 * are told apart by their occurrence number among equal-content nodes. */
#include <stdlib.h>
#include <string.h>

#include "ir/internal.h"

static inline uint64_t rotl(uint64_t x, int r) {
    return (x << r) | (x >> (64 - r));
}

static inline uint64_t fmix(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ull;
    k ^= k >> 33;
    return k;
}

uint64_t ir_hash_bytes(const void *p, size_t n, uint64_t seed) {
    const unsigned char *s = p;
    const uint64_t c1 = 0x87c37b91114253d5ull, c2 = 0x4cf5ad432745937full;
    uint64_t h = seed ^ (n * 0x9e3779b97f4a7c15ull);
    size_t i = 0;
    if (n >= 64) { /* four independent chains: a model's megabytes at memory speed, not at the
                      latency of one chain */
        uint64_t v[4] = {h, h ^ c1, h ^ c2, h + 0x9e3779b97f4a7c15ull};
        for (; i + 32 <= n; i += 32)
            for (int l = 0; l < 4; l++) {
                uint64_t k;
                memcpy(&k, s + i + 8 * l, 8);
                k *= c1;
                k = rotl(k, 31);
                k *= c2;
                v[l] ^= k;
                v[l] = rotl(v[l], 27) * 5 + 0x52dce729;
            }
        h = fmix(v[0]) ^ rotl(fmix(v[1]), 17) ^ rotl(fmix(v[2]), 31) ^ rotl(fmix(v[3]), 47);
    }
    for (; i + 8 <= n; i += 8) {
        uint64_t k;
        memcpy(&k, s + i, 8);
        k *= c1;
        k = rotl(k, 31);
        k *= c2;
        h ^= k;
        h = rotl(h, 27) * 5 + 0x52dce729;
    }
    uint64_t k = 0;
    for (size_t j = 0; i + j < n; j++)
        k |= (uint64_t)s[i + j] << (8 * j);
    if (n & 7) {
        k *= c1;
        k = rotl(k, 31);
        k *= c2;
        h ^= k;
    }
    return fmix(h ^ n);
}

static inline uint64_t dbits(double d) {
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

/* One lane of a node's hash; `ih` holds the lane's hashes of all earlier nodes. */
static uint64_t node_lane(const ir_graph *g, const ir_node *n, const uint64_t *ih, uint64_t seed,
                          uint64_t sub_h) {
    uint64_t h = ir_hash_mix(seed, n->op | (uint64_t)n->dtype << 16 | (uint64_t)n->rank << 24 |
                                       (uint64_t)n->n_in << 32);
    for (int k = 0; k < n->rank && k < IR_MAX_RANK; k++)
        h = ir_hash_mix(h, (uint64_t)n->dims[k]);
    for (int k = 0; k < 4; k++)
        h = ir_hash_mix(h, (uint64_t)n->a.i[k]);
    for (int k = 0; k < 3; k++)
        h = ir_hash_mix(h, dbits(n->a.f[k]));
    h = ir_hash_mix(h, n->a.n_list);
    for (uint32_t k = 0; k < n->a.n_list && k < IR_MAX_LIST; k++)
        h = ir_hash_mix(h, (uint64_t)n->a.list[k]);
    const ir_blob *b = n->a.blob && n->a.blob <= g->n_blobs ? ir_blob_get(g, n->a.blob) : NULL;
    h = ir_hash_mix(h, b ? ir_hash_mix(b->h, b->size) : 0); /* hashed once, when added */
    h = ir_hash_mix(h, sub_h);
    const uint32_t *in = ir_inputs(g, n);
    uint32_t self = (uint32_t)(n - g->nodes);
    for (uint32_t k = 0; k < n->n_in; k++)
        if (in[k] >= self) /* not topological: corrupt graph, hash without reading past it */
            return ir_hash_mix(h, 0xbad);
    bool comm = (ir_ops[n->op].flags & IR_F_COMM) && n->n_in == 2 &&
                !(n->op == IR_OP_ADD && n->dtype == TJ_STRING);
    if (comm) {
        uint64_t a = ih[in[0]], c = ih[in[1]];
        h = ir_hash_mix(ir_hash_mix(h, a < c ? a : c), a < c ? c : a);
    } else {
        for (uint32_t k = 0; k < n->n_in; k++)
            h = ir_hash_mix(h, ih[in[k]]);
    }
    return h;
}

/* Counts occurrences of equal-content random/side nodes (open addressing, grows at 50%). */
typedef struct occ {
    uint64_t lo, hi, count;
} occ;

typedef struct occ_tab {
    occ *t;
    uint32_t cap, n;
} occ_tab;

static bool occ_bump(occ_tab *o, uint64_t lo, uint64_t hi, uint64_t *k) {
    if ((o->n + 1) * 2 > o->cap) {
        uint32_t cap = o->cap ? o->cap * 2 : 16;
        occ *t = calloc(cap, sizeof *t);
        if (!t)
            return false;
        for (uint32_t i = 0; i < o->cap; i++)
            if (o->t[i].count) {
                uint32_t j = (uint32_t)o->t[i].lo & (cap - 1);
                while (t[j].count)
                    j = (j + 1) & (cap - 1);
                t[j] = o->t[i];
            }
        free(o->t);
        o->t = t;
        o->cap = cap;
    }
    uint32_t j = (uint32_t)lo & (o->cap - 1);
    for (; o->t[j].count; j = (j + 1) & (o->cap - 1))
        if (o->t[j].lo == lo && o->t[j].hi == hi) {
            *k = o->t[j].count++;
            return true;
        }
    o->t[j] = (occ){lo, hi, 1};
    o->n++;
    *k = 0;
    return true;
}

/* The positions: per node its op and its inputs' ids, then the outputs' and effects' ids; the
 * regions' layouts in the order of g->subs. */
static void layout_lanes(const ir_graph *g, uint64_t *a, uint64_t *b) {
    *a = ir_hash_mix(*a, g->n_nodes);
    *b = ir_hash_mix(*b, g->n_subs);
    for (uint32_t i = 0; i < g->n_subs; i++)
        layout_lanes(g->subs[i], a, b);
    for (uint32_t id = 0; id < g->n_nodes; id++) {
        const ir_node *n = &g->nodes[id];
        const uint32_t *in = ir_inputs(g, n);
        uint64_t h = ir_hash_mix(n->op, n->n_in);
        for (uint32_t k = 0; k < n->n_in; k++)
            h = ir_hash_mix(h, in[k]);
        *a = ir_hash_mix(*a, h);
        *b = ir_hash_mix(*b, h ^ id);
    }
    for (uint32_t i = 0; i < g->n_outputs; i++)
        *a = ir_hash_mix(*a, g->outputs[i]);
    for (uint32_t i = 0; i < g->n_effects; i++)
        *b = ir_hash_mix(*b, g->effects[i]);
}

ir_hash128 ir_graph_layout_hash(const ir_graph *g) {
    ir_hash128 h = ir_graph_hash(g);
    if (!g)
        return h;
    uint64_t a = h.lo, b = h.hi;
    layout_lanes(g, &a, &b);
    return (ir_hash128){fmix(a), fmix(b ^ 0x510e527fade682d1ull)};
}

ir_hash128 ir_graph_hash(const ir_graph *g) {
    const uint64_t s0 = 0x6a09e667f3bcc908ull, s1 = 0xbb67ae8584caa73bull;
    ir_hash128 r = {s0, s1};
    if (!g)
        return r;
    uint64_t *lo = malloc(sizeof(uint64_t) * (g->n_nodes + 1));
    uint64_t *hi = malloc(sizeof(uint64_t) * (g->n_nodes + 1));
    occ_tab oc = {NULL, 0, 0};
    ir_hash128 *subh = g->n_subs ? malloc(sizeof(ir_hash128) * g->n_subs) : NULL;
    if (!lo || !hi || (g->n_subs && !subh))
        goto done;
    for (uint32_t i = 0; i < g->n_subs; i++)
        subh[i] = ir_graph_hash(g->subs[i]);
    for (uint32_t id = 0; id < g->n_nodes; id++) {
        const ir_node *n = &g->nodes[id];
        uint64_t sa = 0, sb = 0;
        for (int k = 0; k < 2; k++)
            if (n->a.sub[k] && n->a.sub[k] <= g->n_subs) {
                sa = ir_hash_mix(sa, subh[n->a.sub[k] - 1].lo);
                sb = ir_hash_mix(sb, subh[n->a.sub[k] - 1].hi);
            }
        lo[id] = node_lane(g, n, lo, s0, sa);
        hi[id] = node_lane(g, n, hi, s1, sb);
        if (ir_ops[n->op].flags & (IR_F_SIDE | IR_F_RAND)) {
            uint64_t k;
            if (!occ_bump(&oc, lo[id], hi[id], &k))
                goto done;
            lo[id] = ir_hash_mix(lo[id], k);
            hi[id] = ir_hash_mix(hi[id], k);
        }
    }
    uint64_t a = ir_hash_mix(s0, g->n_outputs), b = ir_hash_mix(s1, g->n_outputs);
    for (uint32_t i = 0; i < g->n_outputs; i++)
        if (g->outputs[i] < g->n_nodes) {
            a = ir_hash_mix(a, lo[g->outputs[i]]);
            b = ir_hash_mix(b, hi[g->outputs[i]]);
        }
    a = ir_hash_mix(a, g->n_effects);
    b = ir_hash_mix(b, g->n_effects);
    for (uint32_t i = 0; i < g->n_effects; i++)
        if (g->effects[i] < g->n_nodes) {
            a = ir_hash_mix(a, lo[g->effects[i]]);
            b = ir_hash_mix(b, hi[g->effects[i]]);
        }
    a = ir_hash_mix(ir_hash_mix(a, g->n_params), g->n_caps);
    b = ir_hash_mix(ir_hash_mix(b, g->n_params), g->n_caps);
    r.lo = fmix(a);
    r.hi = fmix(b ^ 0x3c6ef372fe94f82bull);
done:
    free(lo);
    free(hi);
    free(oc.t);
    free(subh);
    return r;
}
