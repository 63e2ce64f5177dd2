/* loops.c — loop optimizations across the region boundary (part of the simplify pass), on
 * WHILE, FOR and SCAN nodes:
 *   - loop-invariant code motion: a pure node of a loop region whose inputs are all invariant
 *     (the node's trailing invariant operands, constants, other such nodes) is computed once in
 *     the enclosing graph and enters the loop as a new invariant operand. Only nodes that cannot
 *     fail move (no integer division, gather or tensor-array index: a loop that runs zero times
 *     must not raise an error its body never would), and nothing random, effectful or reading a
 *     variable.
 *   - dead loop variables: a carried value whose result nobody reads and that feeds neither the
 *     condition, nor a side effect, nor a live carried value, a scan output nobody reads, and an
 *     invariant no region reads are removed, with their params, results and body outputs.
 * Region params keep contiguous indices (the verifier wants 0..n-1 present): a removed param
 * renumbers the later ones, and a new param is added to every region of the node. */
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"

static bool is_loop(int op) {
    return op == IR_OP_WHILE || op == IR_OP_FOR || op == IR_OP_SCAN;
}
static int n_regions(const ir_node *n) {
    return n->op == IR_OP_WHILE ? 2 : 1;
}
/* operand index of region param p (FOR's param 0 is the index i: no operand) */
static int64_t operand_of(const ir_node *n, uint32_t p) {
    return n->op == IR_OP_FOR ? (p == 0 ? -1 : (int64_t)p + 2) : (int64_t)p;
}
static uint32_t n_params_of(const ir_node *n) {
    return n->op == IR_OP_FOR ? n->n_in - 2 : n->n_in;
}

/* A node that may run once outside the loop: pure, deterministic, and unable to fail. */
static bool movable(const ir_graph *r, const ir_node *n) {
    unsigned f = ir_ops[n->op].flags;
    if ((f & (IR_F_SIDE | IR_F_RAND | IR_F_CF | IR_F_PLUMB)) || n->a.blob || n->a.sub[0] ||
        n->a.sub[1])
        return false;
    (void)r;
    return !ir_node_may_fail(n) && n->dtype < TJ_N_DTYPES && n->dtype != TJ_STRING;
}

/* ---- rebuilding a region with params renumbered, nodes turned into params, outputs dropped --- */
typedef struct region_edit {
    const int64_t *pmap;     /* old param index -> new one, -1: dropped (must be unused) */
    const int64_t *as_param; /* per node: the new param index it becomes, or -1 (NULL: none) */
    const uint8_t *keep_out; /* per output: kept (NULL: all) */
    uint32_t n_params;       /* the result has params 0..n_params-1 ... */
    const ir_node *types;    /* ... typed so when a region lacks one */
} region_edit;

static uint32_t add_param(ir_graph *g, const ir_node *type, uint32_t index) {
    ir_node p;
    memset(&p, 0, sizeof p);
    p.op = IR_OP_PARAM;
    p.dtype = type->dtype;
    p.rank = type->rank;
    memcpy(p.dims, type->dims, sizeof p.dims);
    p.a.i[0] = index;
    return ir_add(g, &p, NULL, 0);
}

static ir_graph *edit_region(const ir_graph *r, const region_edit *e) {
    ir_graph *g = ir_graph_new(r->name);
    uint32_t *map = malloc(((size_t)r->n_nodes + 1) * sizeof *map);
    uint8_t *have = calloc((size_t)e->n_params + 1, 1);
    uint32_t *in = NULL, cap_in = 0;
    tj_status st = g && map && have ? TJ_OK : ir_errorf(TJ_ERR_OOM, "loops: out of memory");
    for (uint32_t j = 0; j < r->n_nodes && !st; j++) {
        const ir_node *n = ir_node_get(r, j);
        map[j] = IR_NONE;
        int64_t np = e->as_param ? e->as_param[j] : -1;
        if (n->op == IR_OP_PARAM && np < 0)
            np = e->pmap ? e->pmap[n->a.i[0]] : n->a.i[0];
        if (np >= 0 || n->op == IR_OP_PARAM) {
            if (np >= 0 && (uint64_t)np < e->n_params) {
                have[np] = 1;
                if ((map[j] = add_param(g, n, (uint32_t)np)) == IR_NONE)
                    st = ir_last_code();
            }
            continue;
        }
        if (n->n_in > cap_in) {
            uint32_t *t = realloc(in, (n->n_in + 8) * sizeof *in);
            if (!t) {
                st = ir_errorf(TJ_ERR_OOM, "loops: out of memory");
                break;
            }
            in = t;
            cap_in = n->n_in + 8;
        }
        const uint32_t *rin = ir_inputs(r, n);
        bool dead = false;
        for (uint32_t k = 0; k < n->n_in; k++)
            dead |= (in[k] = map[rin[k]]) == IR_NONE;
        if (dead) /* reads a dropped param: only dead code may */
            continue;
        ir_node p = *n;
        const ir_blob *b = n->a.blob ? ir_blob_get(r, n->a.blob) : NULL;
        if (b && !(p.a.blob = ir_add_blob_shared(g, b))) {
            st = ir_last_code();
            break;
        }
        for (int k = 0; k < 2 && !st; k++) {
            const ir_graph *sub = n->a.sub[k] ? ir_region(r, n, k) : NULL;
            ir_graph *c = sub ? ir_graph_share(sub) : NULL;
            if (sub && (!c || !(p.a.sub[k] = ir_add_sub(g, c)))) {
                ir_graph_free(c);
                st = ir_errorf(TJ_ERR_OOM, "loops: out of memory");
            }
        }
        if (!st && (map[j] = ir_add(g, &p, in, n->n_in)) == IR_NONE)
            st = ir_last_code();
    }
    for (uint32_t p = 0; p < e->n_params && !st; p++) /* every region takes every operand */
        if (!have[p] && add_param(g, &e->types[p], p) == IR_NONE)
            st = ir_last_code();
    for (uint32_t k = 0; k < r->n_outputs && !st; k++) {
        if (e->keep_out && !e->keep_out[k])
            continue;
        uint32_t d = map[r->outputs[k]];
        st = d == IR_NONE ? ir_errorf(TJ_ERR_INVALID, "loops: region output %u lost its value", k)
                          : ir_add_output(g, d);
    }
    if (!st)
        g->n_effects = 0;
    for (uint32_t k = 0; k < r->n_effects && !st; k++) {
        uint32_t d = map[r->effects[k]];
        st = d == IR_NONE ? ir_errorf(TJ_ERR_INVALID, "loops: region effect %u lost", k)
                          : ir_add_effect(g, d);
    }
    if (g && !st)
        g->n_caps = r->n_caps;
    free(map);
    free(have);
    free(in);
    if (st) {
        ir_graph_free(g);
        return NULL;
    }
    ir_graph *pr = pass_prune_run(g, NULL, NULL); /* what only the moved nodes read */
    if (pr != g)
        ir_graph_free(g);
    return pr;
}

/* ---- the analysis of one loop node -------------------------------------------------------- */
typedef struct plan {
    uint32_t P;           /* region params before the edit */
    uint32_t n_inv;       /* trailing invariant params */
    const ir_graph *r[2]; /* regions */
    int nr;               /* how many */
    /* code motion: per region, per node: -1, or the slot of the new invariant it becomes */
    int64_t *slot[2];
    uint32_t n_slots;
    uint32_t *slot_node; /* per slot: region << 31 | node */
    /* dead values: per param, kept; per body output, kept */
    uint8_t *keep_param, *keep_out;
    bool changed;
} plan;

static void plan_free(plan *p) {
    for (int k = 0; k < 2; k++)
        free(p->slot[k]);
    free(p->slot_node);
    free(p->keep_param);
    free(p->keep_out);
    memset(p, 0, sizeof *p);
}

/* Marks in `on` every node of r reachable backwards from the roots, and in params (may be NULL)
 * the param indices among them. */
static void reach(const ir_graph *r, const uint32_t *roots, uint32_t n_roots, uint8_t *on,
                  uint8_t *params, uint32_t P) {
    for (uint32_t k = 0; k < n_roots; k++)
        on[roots[k]] = 1;
    for (uint32_t j = r->n_nodes; j-- > 0;) {
        if (!on[j])
            continue;
        const ir_node *n = ir_node_get(r, j);
        if (n->op == IR_OP_PARAM && params && (uint64_t)n->a.i[0] < P)
            params[n->a.i[0]] = 1;
        const uint32_t *in = ir_inputs(r, n);
        for (uint32_t k = 0; k < n->n_in; k++)
            on[in[k]] = 1;
    }
}

/* Code motion: the frontier of each region's invariant nodes (used by a variant node or an
 * output) becomes new invariant slots. */
static tj_status plan_motion(plan *p) {
    for (int ri = 0; ri < p->nr; ri++) {
        const ir_graph *r = p->r[ri];
        uint8_t *inv = calloc((size_t)r->n_nodes + 1, 1),
                *front = calloc((size_t)r->n_nodes + 1, 1);
        p->slot[ri] = malloc(((size_t)r->n_nodes + 1) * sizeof *p->slot[ri]);
        if (!inv || !front || !p->slot[ri]) {
            free(inv);
            free(front);
            return ir_errorf(TJ_ERR_OOM, "loops: out of memory");
        }
        for (uint32_t j = 0; j < r->n_nodes; j++) {
            const ir_node *n = ir_node_get(r, j);
            p->slot[ri][j] = -1;
            if (n->op == IR_OP_PARAM) {
                inv[j] = (uint64_t)n->a.i[0] >= p->P - p->n_inv;
                continue;
            }
            if (n->op == IR_OP_CONST) {
                inv[j] = 1;
                continue;
            }
            bool all = movable(r, n);
            const uint32_t *in = ir_inputs(r, n);
            for (uint32_t k = 0; k < n->n_in && all; k++)
                all = inv[in[k]];
            inv[j] = all ? 2 : 0; /* 2: a computed invariant (may move) */
        }
        for (uint32_t j = 0; j < r->n_nodes; j++) {
            const ir_node *n = ir_node_get(r, j);
            const uint32_t *in = ir_inputs(r, n);
            for (uint32_t k = 0; k < n->n_in; k++)
                if (!inv[j] && inv[in[k]] == 2)
                    front[in[k]] = 1;
        }
        for (uint32_t k = 0; k < r->n_outputs; k++)
            if (inv[r->outputs[k]] == 2)
                front[r->outputs[k]] = 1;
        for (uint32_t j = 0; j < r->n_nodes; j++) {
            if (!front[j])
                continue;
            uint32_t *sn = realloc(p->slot_node, (p->n_slots + 1) * sizeof *sn);
            if (!sn) {
                free(inv);
                free(front);
                return ir_errorf(TJ_ERR_OOM, "loops: out of memory");
            }
            p->slot_node = sn;
            sn[p->n_slots] = (uint32_t)ri << 31 | j;
            p->slot[ri][j] = p->n_slots++;
            p->changed = true;
        }
        free(inv);
        free(front);
    }
    return TJ_OK;
}

/* Dead values: which params and body outputs stay, given which results are read (used). */
static tj_status plan_dead(plan *p, const ir_node *n, const uint8_t *used, uint32_t n_res) {
    uint32_t P = p->P, nc = n->op == IR_OP_SCAN ? (uint32_t)n->a.i[0] : n_res;
    uint32_t first = n->op == IR_OP_FOR ? 1 : 0; /* param of carried value 0 */
    const ir_graph *body = p->r[p->nr - 1];
    size_t most = body->n_nodes > p->r[0]->n_nodes ? body->n_nodes : p->r[0]->n_nodes;
    p->keep_param = calloc((size_t)P + 1, 1);
    p->keep_out = calloc((size_t)body->n_outputs + 1, 1);
    uint8_t *on = calloc(most + 1, 1), *got = calloc((size_t)P + 1, 1);
    if (!p->keep_param || !p->keep_out || !on || !got) {
        free(on);
        free(got);
        return ir_errorf(TJ_ERR_OOM, "loops: out of memory");
    }
    uint8_t *need = p->keep_param; /* params something live reads */
    if (n->op == IR_OP_FOR)
        need[0] = 1;
    if (n->op == IR_OP_SCAN) /* the sequences stay: they give the trip count */
        for (uint32_t k = nc; k < P - p->n_inv; k++)
            need[k] = 1;
    if (p->nr > 1) { /* the condition and its effects */
        const ir_graph *c = p->r[0];
        reach(c, c->outputs, c->n_outputs, on, need, P);
        memset(on, 0, most);
        reach(c, c->effects, c->n_effects, on, need, P);
        memset(on, 0, most);
    }
    reach(body, body->effects, body->n_effects, on, need, P);
    for (uint32_t k = 0; k < body->n_outputs && k < n_res; k++)
        p->keep_out[k] = used[k];
    for (bool grew = true; grew;) {
        grew = false;
        for (uint32_t k = 0; k < nc; k++) /* a carried value something live reads lives on */
            if (need[first + k] && !p->keep_out[k])
                p->keep_out[k] = 1, grew = true;
        memset(on, 0, most);
        memset(got, 0, P);
        for (uint32_t k = 0; k < body->n_outputs; k++)
            if (p->keep_out[k])
                on[body->outputs[k]] = 1;
        reach(body, NULL, 0, on, got, P);
        for (uint32_t k = 0; k < P; k++)
            if (got[k] && !need[k])
                need[k] = 1, grew = true;
    }
    for (uint32_t k = 0; k < nc; k++) /* a carried value enters the loop iff it leaves it */
        need[first + k] = p->keep_out[k];
    free(on);
    free(got);
    for (uint32_t k = 0; k < P; k++)
        p->changed |= !need[k];
    for (uint32_t k = 0; k < body->n_outputs; k++)
        p->changed |= !p->keep_out[k];
    return TJ_OK;
}

static tj_status plan_node(const ir_graph *g, uint32_t id, const uint8_t *used, plan *p) {
    const ir_node *n = ir_node_get(g, id);
    memset(p, 0, sizeof *p);
    p->nr = n_regions(n);
    for (int k = 0; k < p->nr; k++)
        if (!(p->r[k] = ir_region(g, n, k)))
            return ir_errorf(TJ_ERR_INVALID, "loops: %s %%%u lacks a region", ir_ops[n->op].name,
                             id);
    p->P = n_params_of(n);
    p->n_inv = (uint32_t)n->a.i[1];
    const ir_graph *body = p->r[p->nr - 1];
    tj_status st = plan_motion(p);
    if (!st)
        st = plan_dead(p, n, used, body->n_outputs);
    return st;
}

/* The type of new param q: the old param's (from a region that has it), else what the operand
 * gives (a scan's sequence: one row), or the moved value's. */
static void param_type(const plan *p, const ir_graph *dst, const ir_node *loop, const uint32_t *ops,
                       const int64_t *old_of_new, const uint32_t *slot_dst, uint32_t n_kept,
                       uint32_t q, ir_node *t) {
    memset(t, 0, sizeof *t);
    if (q >= n_kept) {
        *t = *ir_node_get(dst, slot_dst[q - n_kept]);
        return;
    }
    for (int ri = 0; ri < p->nr; ri++)
        for (uint32_t j = 0; j < p->r[ri]->n_nodes; j++) {
            const ir_node *n = ir_node_get(p->r[ri], j);
            if (n->op == IR_OP_PARAM && n->a.i[0] == old_of_new[q]) {
                *t = *n;
                return;
            }
        }
    int64_t o = operand_of(loop, (uint32_t)old_of_new[q]);
    if (o < 0) { /* for_range's index */
        t->dtype = TJ_I64;
        return;
    }
    *t = *ir_node_get(dst, ops[o]);
    if (loop->op == IR_OP_SCAN && o >= loop->a.i[0] && o < (int64_t)(p->P - p->n_inv) &&
        t->rank > 0) {
        t->rank--;
        memmove(t->dims, t->dims + 1, (size_t)t->rank * sizeof *t->dims);
    }
}

/* Copies node j of region r and the invariant nodes it reads into rb->dst (hmap: per region
 * node, its dst id); region params read the loop node's operands ops. */
static uint32_t move_out(pass_rebuild *rb, const ir_node *loop, const uint32_t *ops,
                         const ir_graph *r, uint32_t j, uint32_t *hmap) {
    uint8_t *on = calloc((size_t)r->n_nodes + 1, 1);
    if (!on)
        return ir_errorf(TJ_ERR_OOM, "loops: out of memory"), IR_NONE;
    reach(r, &j, 1, on, NULL, 0);
    uint32_t in[IR_MAX_RANK + 8], *ins = in;
    for (uint32_t i = 0; i <= j; i++) {
        if (!on[i] || hmap[i] != IR_NONE)
            continue;
        const ir_node *n = ir_node_get(r, i);
        if (n->op == IR_OP_PARAM) {
            hmap[i] = ops[operand_of(loop, (uint32_t)n->a.i[0])];
            continue;
        }
        ir_node p = *n;
        const ir_blob *b = n->a.blob ? ir_blob_get(r, n->a.blob) : NULL;
        if (b && !(p.a.blob = ir_add_blob_shared(rb->dst, b)))
            break;
        if (n->n_in > sizeof in / sizeof in[0] && !(ins = malloc(n->n_in * sizeof *ins))) {
            ir_errorf(TJ_ERR_OOM, "loops: out of memory");
            break;
        }
        const uint32_t *rin = ir_inputs(r, n);
        for (uint32_t k = 0; k < n->n_in; k++)
            ins[k] = hmap[rin[k]];
        hmap[i] = ir_add(rb->dst, &p, ins, n->n_in);
        if (ins != in)
            free(ins);
        ins = in;
        if (hmap[i] == IR_NONE)
            break;
    }
    free(on);
    return hmap[j];
}

/* Rewrites loop node id into rb->dst following plan p; res_map gets each old result's new index
 * (-1: gone). Returns the new node's dst id. */
static uint32_t apply(pass_rebuild *rb, uint32_t id, plan *p, int64_t *res_map, uint64_t *moved,
                      uint64_t *removed) {
    const ir_graph *g = rb->src;
    const ir_node *n = ir_node_get(g, id);
    const uint32_t *in = ir_inputs(g, n);
    const ir_graph *body = p->r[p->nr - 1];
    uint32_t P = p->P, lead = n->op == IR_OP_FOR ? 3 : 0, n_kept = 0, n_ops = 0;
    uint32_t *ops = malloc(((size_t)n->n_in + 1) * sizeof *ops);
    uint32_t *new_ops = malloc(((size_t)n->n_in + p->n_slots + 1) * sizeof *new_ops);
    uint32_t *slot_dst = malloc(((size_t)p->n_slots + 1) * sizeof *slot_dst);
    uint32_t *hmap[2] = {NULL, NULL};
    int64_t *pmap = malloc(((size_t)P + 1) * sizeof *pmap);
    int64_t *old_of_new = malloc(((size_t)P + p->n_slots + 1) * sizeof *old_of_new);
    int64_t *as_param[2] = {NULL, NULL};
    ir_node *types = calloc((size_t)P + p->n_slots + 1, sizeof *types);
    ir_graph *nr[2] = {NULL, NULL};
    uint32_t result = IR_NONE;
    bool ok = ops && new_ops && slot_dst && pmap && old_of_new && types;
    for (int ri = 0; ri < p->nr && ok; ri++) {
        hmap[ri] = malloc(((size_t)p->r[ri]->n_nodes + 1) * sizeof *hmap[ri]);
        as_param[ri] = malloc(((size_t)p->r[ri]->n_nodes + 1) * sizeof *as_param[ri]);
        ok = hmap[ri] && as_param[ri];
        for (uint32_t j = 0; ok && j < p->r[ri]->n_nodes; j++)
            hmap[ri][j] = IR_NONE;
    }
    if (!ok) {
        ir_errorf(TJ_ERR_OOM, "loops: out of memory");
        goto out;
    }
    for (uint32_t k = 0; k < n->n_in; k++)
        ops[k] = rb->map[in[k]];
    /* the moved nodes, computed before the loop */
    for (uint32_t s = 0; s < p->n_slots; s++) {
        int ri = (int)(p->slot_node[s] >> 31);
        uint32_t j = p->slot_node[s] & 0x7fffffffu;
        if ((slot_dst[s] = move_out(rb, n, ops, p->r[ri], j, hmap[ri])) == IR_NONE)
            goto out;
    }
    /* params kept, renumbered; operands follow them */
    for (uint32_t k = 0; k < lead; k++)
        new_ops[n_ops++] = ops[k];
    for (uint32_t q = 0; q < P; q++) {
        pmap[q] = p->keep_param[q] ? (int64_t)n_kept : -1;
        if (!p->keep_param[q])
            continue;
        old_of_new[n_kept++] = q;
        int64_t o = operand_of(n, q);
        if (o >= 0)
            new_ops[n_ops++] = ops[o];
    }
    for (uint32_t s = 0; s < p->n_slots; s++)
        new_ops[n_ops++] = slot_dst[s];
    uint32_t n_params = n_kept + p->n_slots;
    for (uint32_t q = 0; q < n_params; q++)
        param_type(p, rb->dst, n, ops, old_of_new, slot_dst, n_kept, q, &types[q]);
    for (int ri = 0; ri < p->nr; ri++) {
        for (uint32_t j = 0; j < p->r[ri]->n_nodes; j++)
            as_param[ri][j] = p->slot[ri][j] >= 0 ? (int64_t)n_kept + p->slot[ri][j] : -1;
        region_edit e = {pmap, as_param[ri], ri == p->nr - 1 ? p->keep_out : NULL, n_params, types};
        if (!(nr[ri] = edit_region(p->r[ri], &e)))
            goto out;
    }
    ir_node proto = *n;
    for (int ri = 0; ri < p->nr; ri++) {
        if (!(proto.a.sub[ri] = ir_add_sub(rb->dst, nr[ri])))
            goto out;
        nr[ri] = NULL; /* owned by dst now */
    }
    uint32_t inv_kept = 0;
    for (uint32_t q = P - p->n_inv; q < P; q++)
        inv_kept += p->keep_param[q];
    proto.a.i[1] = inv_kept + p->n_slots;
    if (n->op == IR_OP_SCAN) {
        uint32_t nc = 0;
        for (uint32_t k = 0; k < (uint32_t)n->a.i[0]; k++)
            nc += p->keep_param[k];
        proto.a.i[0] = nc;
    }
    int64_t next = 0;
    for (uint32_t k = 0; k < body->n_outputs; k++)
        res_map[k] = p->keep_out[k] ? next++ : -1;
    result = ir_add(rb->dst, &proto, new_ops, n_ops);
    *moved += p->n_slots;
    *removed += (uint64_t)(P - n_kept) + (body->n_outputs - (uint64_t)next);
out:
    for (int ri = 0; ri < 2; ri++) {
        free(hmap[ri]);
        free(as_param[ri]);
        ir_graph_free(nr[ri]);
    }
    free(ops);
    free(new_ops);
    free(slot_dst);
    free(pmap);
    free(old_of_new);
    free(types);
    return result;
}

ir_graph *pass_loops_run(const ir_graph *g, pass_stat *st) {
    plan *plans = NULL;
    uint8_t *used = NULL;
    bool any = false;
    for (uint32_t id = 0; id < g->n_nodes && !any; id++)
        any = is_loop(ir_node_get(g, id)->op);
    if (!any)
        return (ir_graph *)g;
    plans = calloc(g->n_nodes, sizeof *plans);
    int64_t **res_maps = calloc(g->n_nodes, sizeof *res_maps);
    if (!plans || !res_maps) {
        free(plans);
        free(res_maps);
        ir_errorf(TJ_ERR_OOM, "loops: out of memory");
        return NULL;
    }
    tj_status err = TJ_OK;
    any = false;
    for (uint32_t id = 0; id < g->n_nodes && !err; id++) {
        const ir_node *n = ir_node_get(g, id);
        if (!is_loop(n->op))
            continue;
        const ir_graph *body = ir_region(g, n, n_regions(n) - 1);
        uint32_t n_res = body ? body->n_outputs : 0;
        free(used);
        if (!(used = calloc((size_t)n_res + 1, 1))) {
            err = ir_errorf(TJ_ERR_OOM, "loops: out of memory");
            break;
        }
        for (uint32_t j = id + 1; j < g->n_nodes; j++) {
            const ir_node *u = ir_node_get(g, j);
            if (u->op == IR_OP_GET && ir_inputs(g, u)[0] == id && (uint64_t)u->a.i[0] < n_res)
                used[u->a.i[0]] = 1;
        }
        err = plan_node(g, id, used, &plans[id]);
        if (!err && !plans[id].changed)
            plan_free(&plans[id]);
        else if (!err && !(res_maps[id] = calloc((size_t)n_res + 1, sizeof **res_maps)))
            err = ir_errorf(TJ_ERR_OOM, "loops: out of memory");
        any |= !err && plans[id].changed;
    }
    free(used);
    ir_graph *out = (ir_graph *)g;
    if (!err && any) {
        pass_rebuild rb;
        uint64_t moved = 0, removed = 0;
        out = NULL;
        if (pass_rebuild_begin(&rb, g, g->n_nodes, g->n_edges) == TJ_OK) {
            bool ok = true;
            for (uint32_t id = 0; id < g->n_nodes && ok; id++) {
                const ir_node *n = ir_node_get(g, id);
                uint32_t d;
                if (plans[id].changed) {
                    d = apply(&rb, id, &plans[id], res_maps[id], &moved, &removed);
                } else if (n->op == IR_OP_GET && res_maps[ir_inputs(g, n)[0]]) {
                    ir_node p = *n;
                    p.a.i[0] = res_maps[ir_inputs(g, n)[0]][n->a.i[0]];
                    uint32_t src_in = rb.map[ir_inputs(g, n)[0]];
                    if (p.a.i[0] < 0) {
                        ir_errorf(TJ_ERR_INVALID, "loops: get %%%u of a removed result", id);
                        d = IR_NONE;
                    } else {
                        d = pass_add(&rb, &p, &src_in, 1);
                    }
                } else {
                    d = pass_copy(&rb, id);
                }
                if ((ok = d != IR_NONE))
                    pass_map(&rb, id, d);
            }
            out = ok ? pass_rebuild_end(&rb, st) : pass_rebuild_abort(&rb);
            if (out && st) {
                st->simplified += moved;
                st->removed += removed;
            }
        }
    }
    for (uint32_t id = 0; id < g->n_nodes; id++) {
        plan_free(&plans[id]);
        free(res_maps[id]);
    }
    free(plans);
    free(res_maps);
    return err ? NULL : out;
}
