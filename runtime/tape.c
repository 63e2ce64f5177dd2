/* tape.c — gradient tapes (tf.GradientTape). A recording tape sees every op of its thread
 * (rt_apply calls rt_tape_on_op) and keeps those whose inputs it already knows: watched tensors,
 * variables read while it records, and the results of ops it kept. tj_tape_gradient walks the
 * kept entries backwards, calling each op's rule (grad.c) and summing the gradients that reach a
 * value. The rules are tracejit ops, so the backward pass is eager on an eager tape and recorded
 * into the same graph on a tape inside a trace, and any other recording tape records it too.
 *
 * Values are named by keys: inside a trace (serial s) the node of the value, (1 << 63 | s << 32
 * | node), so that interned nodes (one value reached twice) share a key; eagerly the tensor's
 * address, which stays valid because the tape holds a reference to every tensor it names. */
#include <stdlib.h>
#include <string.h>

#include "runtime/grad.h"

#define TAPE_MAGIC 0x74617065u

typedef struct entry {
    ir_node n; /* op, canonical attributes, output dtype and dims */
    uint32_t n_in;
    uint64_t *in_keys;
    tj_tensor **in; /* input values (references) */
    uint64_t out_key;
    tj_tensor *out; /* reference */
    /* a result of a control-flow node: one entry per float result, recorded together */
    uint32_t res;   /* which result */
    uint32_t first; /* the index of the node's first entry; UINT32_MAX: not control flow */
} entry;

/* an open-addressing map of keys (never 0) to tensors, or a set when vals is NULL */
typedef struct kmap {
    uint64_t *k;
    tj_tensor **v;
    size_t cap, n;
} kmap;

typedef struct var_read {
    tj_variable *v;
    uint64_t key;
} var_read;

struct tj_tape {
    uint32_t magic;
    unsigned flags;
    int recording, busy;
    uint64_t serial; /* the trace it records (0: eager) */
    entry *e;
    size_t n_e, cap_e;
    kmap known;
    tj_tensor **held; /* eager: references keeping watched tensors' addresses alive */
    size_t n_held, cap_held;
    var_read *reads;
    size_t n_reads, cap_reads;
    struct tj_tape *next; /* the thread's recording tapes */
};

_Thread_local int rt_tape_n_active;
static _Thread_local tj_tape *active;
static rt_arena tape_arena = RT_ARENA_INIT(256);

_Static_assert(sizeof(struct tj_tape) <= 256, "a tape fits its arena slot");

static tj_status check_tape(const tj_tape *t, const char *what) {
    if (!t)
        return ir_errorf(TJ_ERR_INVALID, "%s: tape is NULL", what);
    if (!rt_arena_holds(&tape_arena, t) || t->magic != TAPE_MAGIC)
        return ir_errorf(TJ_ERR_STATE, "%s: the tape was freed (or is not a tape)", what);
    return TJ_OK;
}

/* ---- keys and the map ------------------------------------------------------------------------ */
static uint64_t node_key(uint64_t serial, uint32_t id) {
    return (1ull << 63) | (serial << 32) | id;
}

static uint64_t current_serial(void) {
    rt_trace *tr = rt_trace_current();
    return tr ? tr->serial : 0;
}

/* The key of t as the tape sees it, or 0 (t is not a value of the tape's trace). */
static uint64_t key_of(const tj_tape *tp, tj_tensor *t) {
    if (!t || (t->kind != RT_CONCRETE && t->kind != RT_SYMBOLIC))
        return 0;
    if (!tp->serial)
        return t->kind == RT_CONCRETE ? (uint64_t)(uintptr_t)t : 0;
    rt_trace *tr = rt_trace_current();
    if (!tr || tr->serial != tp->serial)
        return 0;
    if (t->kind == RT_SYMBOLIC)
        return t->trace_serial == tp->serial ? node_key(tp->serial, t->node) : 0;
    uint32_t id = rt_trace_lift(tr, t); /* a concrete tensor inside the trace: its CONST node */
    return id == IR_NONE ? 0 : node_key(tp->serial, id);
}

static size_t slot_of(const kmap *m, uint64_t k) {
    size_t i = (size_t)((k * 0x9e3779b97f4a7c15ull) >> 20) & (m->cap - 1);
    while (m->k[i] && m->k[i] != k)
        i = (i + 1) & (m->cap - 1);
    return i;
}

static int kmap_has(const kmap *m, uint64_t k) {
    return m->cap && m->k[slot_of(m, k)] == k;
}

static tj_tensor **kmap_get(kmap *m, uint64_t k) {
    if (!m->cap)
        return NULL;
    size_t i = slot_of(m, k);
    return m->k[i] == k ? &m->v[i] : NULL;
}

/* Inserts k (value NULL) if absent; returns its value slot (NULL on OOM). */
static tj_tensor **kmap_put(kmap *m, uint64_t k) {
    if ((m->n + 1) * 2 > m->cap) {
        kmap b = {0};
        b.cap = m->cap ? m->cap * 2 : 64;
        b.k = calloc(b.cap, sizeof *b.k);
        b.v = calloc(b.cap, sizeof *b.v);
        if (!b.k || !b.v) {
            free(b.k);
            free(b.v);
            return NULL;
        }
        for (size_t i = 0; i < m->cap; i++)
            if (m->k[i]) {
                size_t j = slot_of(&b, m->k[i]);
                b.k[j] = m->k[i];
                b.v[j] = m->v[i];
            }
        b.n = m->n;
        free(m->k);
        free(m->v);
        *m = b;
    }
    size_t i = slot_of(m, k);
    if (!m->k[i]) {
        m->k[i] = k;
        m->n++;
    }
    return &m->v[i];
}

/* Releases the map's tensors and storage. */
static void kmap_free(kmap *m) {
    for (size_t i = 0; i < m->cap; i++)
        if (m->k[i])
            tj_release(m->v[i]);
    free(m->k);
    free(m->v);
    memset(m, 0, sizeof *m);
}

/* ---- recording ------------------------------------------------------------------------------- */
static int records_here(const tj_tape *tp) {
    return tp->recording && !tp->busy && tp->serial == current_serial();
}

static int hold(tj_tape *tp, tj_tensor *t) {
    if (tp->serial)
        return 1; /* symbolic keys need no reference */
    if (tp->n_held == tp->cap_held) {
        size_t c = tp->cap_held ? tp->cap_held * 2 : 16;
        tj_tensor **h = realloc(tp->held, c * sizeof *h);
        if (!h)
            return 0;
        tp->held = h;
        tp->cap_held = c;
    }
    tp->held[tp->n_held++] = tj_retain(t);
    return 1;
}

static void add_entry(tj_tape *tp, const ir_node *n, const uint64_t *keys, tj_tensor *const *vals,
                      uint32_t n_in, uint64_t out_key, tj_tensor *out) {
    if (tp->n_e == tp->cap_e) {
        size_t c = tp->cap_e ? tp->cap_e * 2 : 64;
        entry *e = realloc(tp->e, c * sizeof *e);
        if (!e)
            return; /* out of memory: the gradient will be missing this op (known stays unset) */
        tp->e = e;
        tp->cap_e = c;
    }
    entry *e = &tp->e[tp->n_e];
    memset(e, 0, sizeof *e);
    e->n = *n;
    e->n.n_in = n_in;
    e->n_in = n_in;
    e->in_keys = malloc((n_in + 1) * sizeof *e->in_keys);
    e->in = calloc(n_in + 1, sizeof *e->in);
    tj_tensor **slot = kmap_put(&tp->known, out_key);
    if (!e->in_keys || !e->in || !slot) {
        free(e->in_keys);
        free(e->in);
        return;
    }
    for (uint32_t k = 0; k < n_in; k++) {
        e->in_keys[k] = keys[k];
        e->in[k] = vals ? tj_retain(vals[k]) : NULL;
    }
    e->out_key = out_key;
    e->out = tj_retain(out);
    e->first = UINT32_MAX;
    tp->n_e++;
}

void rt_tape_on_op(const ir_node *n, tj_tensor *const *orig, tj_tensor *const *vals, uint32_t n_in,
                   const uint32_t *ids, tj_tensor *res) {
    if (!res || res->kind == RT_ERROR || res->kind == RT_TUPLE || !ir_dtype_is_float(res->dtype))
        return;
    for (tj_tape *tp = active; tp; tp = tp->next) {
        if (!records_here(tp))
            continue;
        uint64_t stack_keys[8], *keys = n_in <= 8 ? stack_keys : malloc(n_in * sizeof *keys);
        if (!keys)
            continue;
        int hit = 0;
        for (uint32_t k = 0; k < n_in; k++) {
            keys[k] = ids ? node_key(tp->serial, ids[k]) : key_of(tp, orig[k]);
            /* an input the tape does not know gets no gradient; forgetting its key also keeps
             * an eager address that is later reused from meaning this input */
            if (!keys[k] || !kmap_has(&tp->known, keys[k]))
                keys[k] = 0;
            hit |= keys[k] != 0;
        }
        uint64_t ok = key_of(tp, res);
        /* a result the tape knows already is the same value reached again (an interned node) */
        if (hit && ok && !kmap_has(&tp->known, ok))
            add_entry(tp, n, keys, vals, n_in, ok, res);
        if (keys != stack_keys)
            free(keys);
    }
}

void rt_tape_on_alias(tj_tensor *src, tj_tensor *alias) {
    if (!src || !alias || src == alias || alias->kind != RT_CONCRETE)
        return;
    ir_node n;
    memset(&n, 0, sizeof n);
    n.op = IR_OP_RESHAPE;
    n.dtype = alias->dtype;
    n.rank = alias->rank;
    memcpy(n.dims, alias->dims, sizeof(int64_t) * alias->rank);
    rt_tape_on_op(&n, &src, &src, 1, NULL, alias);
}

void rt_tape_on_var_read(tj_variable *v, tj_tensor *res) {
    if (!res || res->kind == RT_ERROR || !ir_dtype_is_float(res->dtype))
        return;
    for (tj_tape *tp = active; tp; tp = tp->next) {
        if (!records_here(tp))
            continue;
        uint64_t k = key_of(tp, res);
        if (!k)
            continue;
        int seen = 0;
        for (size_t i = 0; i < tp->n_reads && !seen; i++)
            seen = tp->reads[i].v == v && tp->reads[i].key == k;
        if (seen)
            continue;
        if (tp->n_reads == tp->cap_reads) {
            size_t c = tp->cap_reads ? tp->cap_reads * 2 : 8;
            var_read *r = realloc(tp->reads, c * sizeof *r);
            if (!r)
                continue;
            tp->reads = r;
            tp->cap_reads = c;
        }
        if (!kmap_put(&tp->known, k) || !hold(tp, res))
            continue;
        tp->reads[tp->n_reads++] = (var_read){rt_variable_retain(v), k};
    }
}

void rt_tape_on_cf(rt_trace *tr, const ir_node *node, const uint32_t *in, uint32_t n_in,
                   tj_tensor *const *outs, uint32_t n_out) {
    for (tj_tape *tp = active; tp; tp = tp->next) {
        if (!records_here(tp) || tp->serial != tr->serial)
            continue;
        int hit = 0;
        for (uint32_t k = 0; k < n_in && !hit; k++)
            hit = kmap_has(&tp->known, node_key(tp->serial, in[k]));
        if (!hit)
            continue;
        /* one entry per float result, all with the node's operands (symbolic tensors) */
        tj_tensor **vals = calloc((size_t)n_in + 1, sizeof *vals);
        uint64_t *keys = calloc((size_t)n_in + 1, sizeof *keys);
        for (uint32_t k = 0; vals && keys && k < n_in; k++) {
            vals[k] = rt_symbolic(tr, in[k]);
            keys[k] = node_key(tp->serial, in[k]);
            if (!kmap_has(&tp->known, keys[k]))
                keys[k] = 0;
        }
        uint32_t first = (uint32_t)tp->n_e;
        for (uint32_t k = 0; vals && keys && k < n_out; k++) {
            uint64_t ok = key_of(tp, outs[k]);
            size_t before = tp->n_e;
            if (ok && ir_dtype_is_float(outs[k]->dtype) && !kmap_has(&tp->known, ok))
                add_entry(tp, node, keys, vals, n_in, ok, outs[k]);
            if (tp->n_e > before) {
                tp->e[before].res = k;
                tp->e[before].first = first;
            }
        }
        for (uint32_t k = 0; vals && k < n_in; k++)
            tj_release(vals[k]);
        free(vals);
        free(keys);
    }
}

int rt_tape_wants_eager(int n, tj_tensor *const *args) {
    if (!rt_tape_n_active || rt_trace_current())
        return 0;
    for (tj_tape *tp = active; tp; tp = tp->next)
        for (int k = 0; k < n && records_here(tp); k++)
            if (kmap_has(&tp->known, key_of(tp, args[k])))
                return 1;
    return 0;
}

/* ---- the public API -------------------------------------------------------------------------- */
static void unlink_tape(tj_tape *tp) {
    if (!tp->recording)
        return;
    for (tj_tape **p = &active; *p; p = &(*p)->next)
        if (*p == tp) {
            *p = tp->next;
            break;
        }
    tp->recording = 0;
    rt_tape_n_active--;
}

tj_tape *tj_tape_new(unsigned flags) {
    if (flags & ~(unsigned)TJ_TAPE_UNCONNECTED_ZERO)
        return (void)ir_errorf(TJ_ERR_INVALID, "tape_new: unknown flags 0x%x", flags), NULL;
    tj_tape *tp = rt_arena_alloc(&tape_arena);
    if (!tp)
        return NULL;
    tp->magic = TAPE_MAGIC;
    tp->flags = flags;
    tp->serial = current_serial();
    tp->recording = 1;
    tp->next = active;
    active = tp;
    rt_tape_n_active++;
    return tp;
}

tj_status tj_tape_watch(tj_tape *tape, tj_tensor *x) {
    tj_status st = check_tape(tape, "tape_watch");
    if (st)
        return st;
    if (!x)
        return ir_errorf(TJ_ERR_INVALID, "tape_watch: tensor is NULL");
    if (x->kind == RT_ERROR)
        return ir_errorf(x->code, "tape_watch: %s", x->msg);
    if (x->kind == RT_TUPLE || (x->kind != RT_CONCRETE && x->kind != RT_SYMBOLIC))
        return ir_errorf(TJ_ERR_INVALID, "tape_watch: expected a tensor, got a tuple");
    if (tape->serial != current_serial())
        return ir_errorf(TJ_ERR_STATE, "tape_watch: the tape belongs to another trace (a tape "
                                       "made inside a traced function records only that trace)");
    uint64_t k = key_of(tape, x);
    if (!k)
        return ir_errorf(TJ_ERR_STATE, "tape_watch: the tensor is not a value of this trace");
    if (kmap_has(&tape->known, k))
        return TJ_OK;
    if (!kmap_put(&tape->known, k) || !hold(tape, x))
        return ir_errorf(TJ_ERR_OOM, "tape_watch: out of memory");
    return TJ_OK;
}

tj_status tj_tape_stop(tj_tape *tape) {
    tj_status st = check_tape(tape, "tape_stop");
    if (st)
        return st;
    unlink_tape(tape);
    return TJ_OK;
}

void tj_tape_free(tj_tape *tape) {
    if (!tape || check_tape(tape, "tape_free"))
        return;
    unlink_tape(tape);
    for (size_t i = 0; i < tape->n_e; i++) {
        entry *e = &tape->e[i];
        for (uint32_t k = 0; k < e->n_in; k++)
            tj_release(e->in[k]);
        tj_release(e->out);
        free(e->in);
        free(e->in_keys);
    }
    free(tape->e);
    for (size_t i = 0; i < tape->n_held; i++)
        tj_release(tape->held[i]);
    free(tape->held);
    for (size_t i = 0; i < tape->n_reads; i++)
        rt_variable_release(tape->reads[i].v);
    free(tape->reads);
    free(tape->known.k);
    free(tape->known.v);
    tape->magic = 0;
    rt_arena_release(&tape_arena, tape, sizeof *tape);
}

/* ---- the backward pass ----------------------------------------------------------------------- */
static tj_status fail(const char *what, tj_tensor *t) {
    if (t && t->kind == RT_ERROR)
        return ir_errorf(t->code, "%s: %s", what, t->msg);
    return ir_last_code() ? ir_last_code() : TJ_ERR_INVALID;
}

/* Adds g (scoped or borrowed) into the gradient of key k. */
static tj_status accumulate(kmap *grads, uint64_t k, tj_tensor *g) {
    tj_tensor **slot = kmap_put(grads, k);
    if (!slot)
        return ir_errorf(TJ_ERR_OOM, "gradient: out of memory");
    tj_tensor *sum = *slot ? tj_add(*slot, g) : g;
    if (sum->kind == RT_ERROR)
        return ir_errorf(sum->code, "gradient: %s", sum->msg);
    tj_release(*slot);
    *slot = tj_retain(sum);
    return TJ_OK;
}

/* ---- control flow: the gradient of a cond is a cond of the branches' gradients -------------- */
typedef struct cf_bwd {
    const ir_graph *region[2];
    uint32_t n_ops;          /* the branch's operands (region params), node inputs 1.. */
    const uint8_t *float_op; /* which operands get a gradient */
    uint32_t n_res;
    const uint8_t *float_res; /* which results have an output gradient among the args */
} cf_bwd;

/* A branch of the backward cond: replays the forward branch on its operands under a tape and
 * returns the vector-Jacobian product with the output gradients (args after the operands), one
 * tensor per float operand (zeros where the branch does not depend on it). */
static tj_tensor *cf_branch(int which, int n, tj_tensor *const *args, void *user) {
    const cf_bwd *c = user;
    (void)n;
    tj_tensor **outs = calloc((size_t)c->region[which]->n_outputs + 1, sizeof *outs);
    tj_tensor **grads = calloc((size_t)c->n_ops + 1, sizeof *grads);
    tj_tensor **srcs = calloc((size_t)c->n_ops + 1, sizeof *srcs);
    tj_tensor **targets = calloc((size_t)c->n_res + 1, sizeof *targets);
    tj_tensor **seeds = calloc((size_t)c->n_res + 1, sizeof *seeds);
    tj_tensor *res = NULL;
    tj_tape *tape = tj_tape_new(TJ_TAPE_UNCONNECTED_ZERO);
    tj_status st = outs && grads && srcs && targets && seeds && tape ? TJ_OK : TJ_ERR_OOM;
    uint32_t n_src = 0, n_t = 0;
    for (uint32_t k = 0; k < c->n_ops && !st; k++)
        if (c->float_op[k]) {
            srcs[n_src++] = args[k];
            st = tj_tape_watch(tape, args[k]);
        }
    if (!st)
        st = rt_replay_graph(c->region[which], args, c->n_ops, outs);
    if (tape)
        tj_tape_stop(tape);
    for (uint32_t r = 0, j = c->n_ops; r < c->n_res && !st; r++)
        if (c->float_res[r]) {
            targets[n_t] = outs[r];
            seeds[n_t++] = args[j++];
        }
    if (!st)
        st = rt_tape_vjp(tape, n_t, targets, seeds, n_src, srcs, grads);
    if (st)
        res = tj_error_new(st, "%s", ir_last_error());
    else
        res = n_src == 1 ? grads[0] : tj_tuple((int)n_src, grads);
    tj_tape_free(tape);
    free(outs);
    free(grads);
    free(srcs);
    free(targets);
    free(seeds);
    return res;
}
static tj_tensor *cf_then(int n, tj_tensor *const *args, void *user) {
    return cf_branch(0, n, args, user);
}
static tj_tensor *cf_else(int n, tj_tensor *const *args, void *user) {
    return cf_branch(1, n, args, user);
}

/* ---- scan: the carries are recomputed and stacked by a forward scan, then a reverse scan
 * replays each step under a tape (lax.scan's transpose, with rematerialised residuals) ------- */
typedef struct scan_bwd {
    const ir_graph *body;
    uint32_t nc, nx, ni, ny; /* carried, sequences, invariants (captures), per-step outputs */
    const uint8_t *fc, *fx, *fi, *fy; /* float-ness of each */
    uint32_t nfc, nfi;
    int is_for; /* a for_range: the body takes the index first, then the carries */
} scan_bwd;

/* The body's parameters from the carries, the sequences' rows and the invariants. */
static void body_params(const scan_bwd *s, tj_tensor **p, tj_tensor *const *c, tj_tensor *const *x,
                        tj_tensor *const *inv) {
    uint32_t m = 0;
    if (s->is_for)
        p[m++] = x[0];
    for (uint32_t k = 0; k < s->nc; k++)
        p[m++] = c[k];
    for (uint32_t k = 0; !s->is_for && k < s->nx; k++)
        p[m++] = x[k];
    for (uint32_t k = 0; k < s->ni; k++)
        p[m++] = inv[k];
}

/* (c, x_t, inv) -> (c', c): the carries entering every step, stacked */
static tj_tensor *scan_remat(int n, tj_tensor *const *args, void *user) {
    const scan_bwd *s = user;
    (void)n;
    uint32_t no = s->body->n_outputs;
    tj_tensor **outs = calloc((size_t)no + 1, sizeof *outs);
    tj_tensor **r = calloc((size_t)(2 * s->nc) + 1, sizeof *r);
    tj_tensor **p = calloc((size_t)(s->nc + s->nx + s->ni) + 1, sizeof *p);
    tj_tensor *res = NULL;
    tj_status st = outs && r && p ? TJ_OK : TJ_ERR_OOM;
    /* args: c..., inv... (carried unchanged), x_t... */
    if (!st)
        body_params(s, p, args, args + s->nc + s->ni, args + s->nc);
    if (!st)
        st = rt_replay_graph(s->body, p, s->nc + s->nx + s->ni, outs);
    if (!st) {
        tj_tensor **items = calloc((size_t)(2 * s->nc + s->ni) + 1, sizeof *items);
        if (!items) {
            st = TJ_ERR_OOM;
        } else {
            uint32_t m = 0;
            for (uint32_t k = 0; k < s->nc; k++)
                items[m++] = outs[k];
            for (uint32_t k = 0; k < s->ni; k++)
                items[m++] = args[s->nc + k];
            for (uint32_t k = 0; k < s->nc; k++)
                items[m++] = args[k];
            res = tj_tuple((int)m, items);
            free(items);
        }
    }
    if (st)
        res = tj_error_new(st, "%s", ir_last_error());
    free(outs);
    free(r);
    free(p);
    return res;
}

/* carry: g_c (float carries), g_inv (float invariants), inv...; rows: c_t..., x_t..., gy_t
 * (float outputs) -> carry', then g_x_t (float sequences) */
static tj_tensor *scan_reverse(int n, tj_tensor *const *args, void *user) {
    const scan_bwd *s = user;
    (void)n;
    uint32_t no = s->body->n_outputs, np = s->nc + s->nx + s->ni;
    const uint32_t o_inv = s->nfc + s->nfi, o_c = o_inv + s->ni, o_x = o_c + s->nc,
                   o_gy = o_x + s->nx;
    tj_tensor **outs = calloc((size_t)no + 1, sizeof *outs);
    tj_tensor **p = calloc((size_t)np + 1, sizeof *p);
    tj_tensor **src = calloc((size_t)np + 1, sizeof *src), **g = calloc((size_t)np + 1, sizeof *g);
    tj_tensor **tg = calloc((size_t)no + 1, sizeof *tg), **sd = calloc((size_t)no + 1, sizeof *sd);
    tj_tensor **items = calloc((size_t)(o_c + s->nx) + 1, sizeof *items);
    tj_tape *tape = tj_tape_new(TJ_TAPE_UNCONNECTED_ZERO);
    tj_status st = outs && p && src && g && tg && sd && items && tape ? TJ_OK : TJ_ERR_OOM;
    uint32_t ns = 0, nt = 0;
    if (!st)
        body_params(s, p, args + o_c, args + o_x, args + o_inv);
    /* sources in class order: carries, sequences, invariants (the split below follows it) */
    for (uint32_t k = 0; !st && k < np; k++) {
        int fl = k < s->nc           ? s->fc[k]
                 : k < s->nc + s->nx ? s->fx[k - s->nc]
                                     : s->fi[k - s->nc - s->nx];
        tj_tensor *t = k < s->nc           ? args[o_c + k]
                       : k < s->nc + s->nx ? args[o_x + k - s->nc]
                                           : args[o_inv + k - s->nc - s->nx];
        if (fl) {
            src[ns++] = t;
            st = tj_tape_watch(tape, t);
        }
    }
    if (!st)
        st = rt_replay_graph(s->body, p, np, outs);
    if (tape)
        tj_tape_stop(tape);
    for (uint32_t k = 0, jc = 0, jy = 0; !st && k < no; k++) {
        if (k < s->nc ? s->fc[k] : s->fy[k - s->nc]) {
            tg[nt] = outs[k];
            sd[nt++] = k < s->nc ? args[jc++] : args[o_gy + jy++];
        }
    }
    if (!st)
        st = rt_tape_vjp(tape, nt, tg, sd, ns, src, g);
    if (!st) { /* carry': g_c, g_inv + this step's, inv; then g_x_t */
        uint32_t m = 0, j = 0, jc = 0, ji = 0, jx = 0;
        tj_tensor **gc = calloc((size_t)s->nc + 1, sizeof *gc),
                  **gx = calloc((size_t)s->nx + 1, sizeof *gx),
                  **gi = calloc((size_t)s->ni + 1, sizeof *gi);
        for (uint32_t k = 0; gc && gx && gi && k < np; k++) {
            int fl = k < s->nc           ? s->fc[k]
                     : k < s->nc + s->nx ? s->fx[k - s->nc]
                                         : s->fi[k - s->nc - s->nx];
            if (!fl)
                continue;
            if (k < s->nc)
                gc[jc++] = g[j++];
            else if (k < s->nc + s->nx)
                gx[jx++] = g[j++];
            else
                gi[ji++] = g[j++];
        }
        if (!gc || !gx || !gi) {
            st = TJ_ERR_OOM;
        } else {
            for (uint32_t k = 0; k < jc; k++)
                items[m++] = gc[k];
            for (uint32_t k = 0; k < ji; k++)
                items[m++] = tj_add(args[s->nfc + k], gi[k]);
            for (uint32_t k = 0; k < s->ni; k++)
                items[m++] = args[o_inv + k];
            for (uint32_t k = 0; k < jx; k++)
                items[m++] = gx[k];
        }
        free(gc);
        free(gx);
        free(gi);
        tj_tensor *res = st ? NULL : tj_tuple((int)m, items);
        if (res) {
            tj_tape_free(tape);
            free(outs), free(p), free(src), free(g), free(tg), free(sd), free(items);
            return res;
        }
    }
    tj_tape_free(tape);
    free(outs), free(p), free(src), free(g), free(tg), free(sd), free(items);
    return tj_error_new(st ? st : TJ_ERR_OOM, "%s", ir_last_error());
}

/* Reverses axis 0. */
static tj_tensor *reversed(tj_tensor *t) {
    int64_t step[TJ_MAX_RANK];
    for (int d = 0; d < TJ_MAX_RANK; d++)
        step[d] = d ? 1 : -1;
    return tj_slice(t, NULL, NULL, step);
}

static tj_status scan_backward(tj_tape *tp, uint32_t first, uint32_t last, kmap *grads) {
    entry *e0 = &tp->e[first];
    const ir_node *node = &e0->n;
    rt_trace *tr = rt_trace_current();
    scan_bwd s = {ir_region(tr->g, node, 0), 0, 0, 0, 0, NULL, NULL, NULL, NULL, 0, 0, 0};
    if (!s.body)
        return ir_errorf(TJ_ERR_INVALID, "scan gradient: no body");
    /* the operands in the scan layout (carried, sequences, invariants) with their keys; a
     * for_range over constant bounds is a scan over its indices */
    tj_tensor *stack_in[16],
        **in = e0->n_in + 1 <= 16 ? stack_in : calloc(e0->n_in + 1, sizeof *in);
    uint64_t stack_keys[16],
        *keys = e0->n_in + 1 <= 16 ? stack_keys : calloc(e0->n_in + 1, sizeof *keys);
    if (!in || !keys) {
        if (in != stack_in)
            free(in);
        if (keys != stack_keys)
            free(keys);
        return ir_errorf(TJ_ERR_OOM, "scan gradient: out of memory");
    }
    tj_status st0 = TJ_OK;
    int done = 0; /* a for_range of no iteration: its carries passed their gradients through */
    tj_scope_begin();
    if (node->op == IR_OP_FOR) {
        s.is_for = 1;
        s.ni = (uint32_t)node->a.i[1];
        s.nc = e0->n_in - 3 - s.ni;
        s.nx = 1;
        int64_t b[3];
        for (int k = 0; k < 3 && !st0; k++) {
            const ir_node *bn = ir_node_get(tr->g, e0->in[k]->node);
            tj_tensor *c = bn->op == IR_OP_CONST ? rt_scoped(rt_const_tensor(tr->g, bn)) : NULL;
            if (!c)
                st0 = ir_errorf(TJ_ERR_UNSUPPORTED,
                                "a for_range whose bounds are computed at run time has no "
                                "gradient (its trip count is unknown when tracing): give "
                                "constant bounds or use tj_scan");
            else
                b[k] = (int64_t)tj_tensor_get_f64(c, 0);
        }
        tj_tensor *range = st0 ? NULL : tj_range(TJ_I64, (double)b[0], (double)b[1], (double)b[2]);
        if (range && range->kind == RT_ERROR)
            st0 = ir_errorf(range->code, "%s", range->msg);
        for (uint32_t k = 0; !st0 && k < s.nc; k++)
            in[k] = e0->in[3 + k], keys[k] = e0->in_keys[3 + k];
        if (!st0)
            in[s.nc] = range, keys[s.nc] = 0;
        for (uint32_t k = 0; !st0 && k < s.ni; k++)
            in[s.nc + 1 + k] = e0->in[3 + s.nc + k], keys[s.nc + 1 + k] = e0->in_keys[3 + s.nc + k];
        if (!st0 && range->dims[0] == 0) { /* no iteration: the carries pass through */
            for (uint32_t i = first; i <= last && !st0; i++) {
                tj_tensor **gp = kmap_get(grads, tp->e[i].out_key);
                if (gp && *gp && keys[tp->e[i].res])
                    st0 = accumulate(grads, keys[tp->e[i].res], *gp);
            }
            done = 1;
        }
    } else {
        s.nc = (uint32_t)node->a.i[0];
        s.ni = (uint32_t)node->a.i[1];
        s.nx = e0->n_in - s.nc - s.ni;
        for (uint32_t k = 0; k < e0->n_in; k++)
            in[k] = e0->in[k], keys[k] = e0->in_keys[k];
    }
    s.ny = s.body->n_outputs - s.nc;
    if (st0 || done) {
        tj_scope_end();
        if (in != stack_in)
            free(in);
        if (keys != stack_keys)
            free(keys);
        return st0;
    }
    uint8_t *fl = calloc((size_t)(s.nc + s.nx + s.ni + s.ny) + 1, 1);
    tj_tensor **a = calloc((size_t)(3 * (s.nc + s.ni) + s.nx + s.ny) + 1, sizeof *a);
    if (!fl || !a) {
        free(fl);
        free(a);
        tj_scope_end();
        if (in != stack_in)
            free(in);
        if (keys != stack_keys)
            free(keys);
        return ir_errorf(TJ_ERR_OOM, "scan gradient: out of memory");
    }
    s.fc = fl, s.fx = fl + s.nc, s.fi = fl + s.nc + s.nx, s.fy = fl + s.nc + s.nx + s.ni;
    for (uint32_t k = 0; k < s.nc + s.nx + s.ni; k++)
        fl[k] = ir_dtype_is_float(in[k]->dtype);
    for (uint32_t k = 0; k < s.ny; k++)
        fl[s.nc + s.nx + s.ni + k] =
            ir_dtype_is_float(ir_node_get(s.body, s.body->outputs[s.nc + k])->dtype);
    for (uint32_t k = 0; k < s.nc; k++)
        s.nfc += s.fc[k];
    for (uint32_t k = 0; k < s.ni; k++)
        s.nfi += s.fi[k];
    tj_status st = TJ_OK;
    /* the gradient of result r, zeros where none reached it */
    tj_tensor **gres = calloc((size_t)(s.nc + s.ny) + 1, sizeof *gres);
    for (uint32_t i = first; gres && i <= last; i++) {
        tj_tensor **gp = kmap_get(grads, tp->e[i].out_key);
        if (gp && *gp)
            gres[tp->e[i].res] = *gp;
    }
    for (uint32_t i = first; gres && i <= last; i++)
        if (!gres[tp->e[i].res])
            gres[tp->e[i].res] =
                tj_zeros((tj_dtype)tp->e[i].out->dtype, tp->e[i].out->rank, tp->e[i].out->dims);
    /* 1. the carries entering each step: scan (c, inv) over xs -> stacked c_t */
    uint32_t m = 0;
    for (uint32_t k = 0; k < s.nc; k++)
        a[m++] = in[k];
    for (uint32_t k = 0; k < s.ni; k++)
        a[m++] = in[s.nc + s.nx + k];
    tj_tensor *fwd = gres ? tj_scan(scan_remat, (int)(s.nc + s.ni), a, (int)s.nx, in + s.nc, &s)
                          : tj_error_new(TJ_ERR_OOM, "scan gradient: out of memory");
    if (fwd->kind == RT_ERROR)
        st = ir_errorf(fwd->code, "%s", fwd->msg);
    /* 2. the reverse scan */
    tj_tensor *bwd = NULL;
    if (!st) {
        m = 0;
        for (uint32_t k = 0; k < s.nc; k++) /* g_c: the final carries' gradients */
            if (s.fc[k])
                a[m++] =
                    gres[k] ? gres[k] : tj_zeros((tj_dtype)in[k]->dtype, in[k]->rank, in[k]->dims);
        for (uint32_t k = 0; k < s.ni; k++) /* g_inv accumulators */
            if (s.fi[k])
                a[m++] = tj_zeros((tj_dtype)in[s.nc + s.nx + k]->dtype, in[s.nc + s.nx + k]->rank,
                                  in[s.nc + s.nx + k]->dims);
        for (uint32_t k = 0; k < s.ni; k++)
            a[m++] = in[s.nc + s.nx + k];
        uint32_t ncarry = m;
        for (uint32_t k = 0; k < s.nc; k++) /* stacked c_t, reversed */
            a[m++] = reversed(tj_tuple_get(fwd, (int)(s.nc + s.ni + k)));
        for (uint32_t k = 0; k < s.nx; k++)
            a[m++] = reversed(in[s.nc + k]);
        for (uint32_t k = 0; k < s.ny; k++)
            if (s.fy[k]) {
                tj_tensor *gy = gres[s.nc + k];
                if (!gy) {
                    const ir_node *yn = ir_node_get(s.body, s.body->outputs[s.nc + k]);
                    int64_t d[TJ_MAX_RANK];
                    d[0] = in[s.nc]->dims[0];
                    memcpy(d + 1, yn->dims, sizeof(int64_t) * yn->rank);
                    gy = tj_zeros((tj_dtype)yn->dtype, yn->rank + 1, d);
                }
                a[m++] = reversed(gy);
            }
        bwd = tj_scan(scan_reverse, (int)ncarry, a, (int)(m - ncarry), a + ncarry, &s);
        if (bwd->kind == RT_ERROR)
            st = ir_errorf(bwd->code, "%s", bwd->msg);
    }
    /* 3. the operands' gradients: init carries, sequences (reversed back), invariants */
    for (uint32_t k = 0, j = 0; !st && k < s.nc; k++)
        if (s.fc[k] && keys[k])
            st = accumulate(grads, keys[k], tj_tuple_get(bwd, (int)j++));
        else if (s.fc[k])
            j++;
    uint32_t base_x = s.nfc + s.nfi + s.ni;
    for (uint32_t k = 0, j = 0; !st && k < s.nx; k++)
        if (s.fx[k]) {
            if (keys[s.nc + k])
                st = accumulate(grads, keys[s.nc + k],
                                reversed(tj_tuple_get(bwd, (int)(base_x + j))));
            j++;
        }
    for (uint32_t k = 0, j = 0; !st && k < s.ni; k++)
        if (s.fi[k]) {
            if (keys[s.nc + s.nx + k])
                st = accumulate(grads, keys[s.nc + s.nx + k], tj_tuple_get(bwd, (int)(s.nfc + j)));
            j++;
        }
    tj_scope_end();
    free(gres);
    free(fl);
    free(a);
    if (in != stack_in)
        free(in);
    if (keys != stack_keys)
        free(keys);
    return st;
}

/* Entries [first, last] are the float results of one cond node. */
static tj_status cf_backward(tj_tape *tp, uint32_t first, uint32_t last, kmap *grads) {
    entry *e0 = &tp->e[first];
    const ir_node *node = &e0->n;
    rt_trace *tr = rt_trace_current();
    if (tr && (node->op == IR_OP_SCAN || node->op == IR_OP_FOR))
        return scan_backward(tp, first, last, grads);
    if (node->op != IR_OP_COND || !tr)
        return ir_errorf(TJ_ERR_UNSUPPORTED,
                         "only cond, switch and scan are differentiable so far");
    uint32_t n_in = e0->n_in, n_ops = n_in - 1, n_res = ir_cf_n_results(tr->g, node);
    cf_bwd c = {{ir_region(tr->g, node, 0), ir_region(tr->g, node, 1)}, n_ops, NULL, n_res, NULL};
    uint8_t *fo = calloc((size_t)n_ops + 1, 1), *fr = calloc((size_t)n_res + 1, 1);
    tj_tensor **args = calloc((size_t)(n_ops + n_res) + 1, sizeof *args);
    if (!fo || !fr || !args || !c.region[0] || !c.region[1]) {
        free(fo);
        free(fr);
        free(args);
        return ir_errorf(TJ_ERR_OOM, "cond gradient: out of memory");
    }
    c.float_op = fo;
    c.float_res = fr;
    uint32_t na = 0, n_float = 0;
    for (uint32_t k = 0; k < n_ops; k++) {
        args[na++] = e0->in[1 + k];
        fo[k] = ir_dtype_is_float(e0->in[1 + k]->dtype);
        n_float += fo[k];
    }
    tj_scope_begin();
    for (uint32_t i = first; i <= last; i++) /* the recorded (float) results */
        fr[tp->e[i].res] = 1;
    for (uint32_t r = 0; r < n_res; r++) { /* their output gradients, zeros where none */
        if (!fr[r])
            continue;
        tj_tensor *g = NULL;
        for (uint32_t i = first; i <= last && !g; i++)
            if (tp->e[i].res == r) {
                tj_tensor **gp = kmap_get(grads, tp->e[i].out_key);
                g = gp && *gp ? *gp
                              : tj_zeros((tj_dtype)tp->e[i].out->dtype, tp->e[i].out->rank,
                                         tp->e[i].out->dims);
            }
        args[na++] = g;
    }
    tj_status st = TJ_OK;
    if (n_float) {
        tj_tensor *r = tj_cond(e0->in[0], cf_then, cf_else, (int)na, args, &c);
        if (r->kind == RT_ERROR)
            st = ir_errorf(r->code, "%s", r->msg);
        for (uint32_t k = 0, j = 0; k < n_ops && !st; k++) {
            if (!fo[k])
                continue;
            tj_tensor *gk = n_float == 1 ? r : tj_tuple_get(r, (int)j);
            j++;
            if (e0->in_keys[1 + k])
                st = accumulate(grads, e0->in_keys[1 + k], gk);
        }
    }
    tj_scope_end();
    free(fo);
    free(fr);
    free(args);
    return st;
}

/* Checks seed against target (NULL: ones, and then the target must be a scalar) and adds it to
 * the target's gradient. */
static tj_status seed_target(tj_tape *tp, tj_tensor *target, tj_tensor *seed, kmap *grads) {
    const char *what = "tape_gradient";
    uint64_t tk = key_of(tp, target);
    tj_tensor *s = seed;
    if (!s) {
        if (target->numel != 1 || target->rank != 0)
            return ir_errorf(TJ_ERR_SHAPE,
                             "%s: the target must be a scalar without a seed, got %s with %d "
                             "dims (give the output gradient as `seed`)",
                             what, ir_dtype_name(target->dtype), target->rank);
        s = tj_ones((tj_dtype)target->dtype, 0, NULL);
    } else {
        char a[128], b[128];
        if (seed->kind == RT_ERROR)
            return fail(what, seed);
        if (seed->dtype != target->dtype || !(seed->rank == target->rank) ||
            memcmp(seed->dims, target->dims, sizeof(int64_t) * target->rank))
            return ir_errorf(
                TJ_ERR_SHAPE, "%s: seed %s%s does not match the target %s%s", what,
                ir_dtype_name(seed->dtype), ir_fmt_dims(a, sizeof a, seed->rank, seed->dims),
                ir_dtype_name(target->dtype), ir_fmt_dims(b, sizeof b, target->rank, target->dims));
    }
    /* a target that is not a value of this tape's trace: nothing depends on it */
    return tk ? accumulate(grads, tk, s) : TJ_OK;
}

/* Runs the backward pass from the seeded targets; every reached key's gradient is left in grads. */
static tj_status backward(tj_tape *tp, uint32_t n_t, tj_tensor *const *targets,
                          tj_tensor *const *seeds, kmap *grads) {
    const char *what = "tape_gradient";
    tj_status st = TJ_OK;
    for (uint32_t t = 0; t < n_t && !st; t++)
        st = seed_target(tp, targets[t], seeds ? seeds[t] : NULL, grads);
    for (size_t i = tp->n_e; i-- > 0 && !st;) {
        entry *e = &tp->e[i];
        tj_tensor **gp = kmap_get(grads, e->out_key);
        if (!gp || !*gp)
            continue;
        const rt_grad_rule *r = &rt_grad_rules[e->n.op];
        const char *op = ir_ops[e->n.op].name;
        if (r->kind == RT_GRAD_NONE)
            continue;
        if (r->kind == RT_GRAD_CF && e->first != UINT32_MAX) {
            /* every result of the node at once; then skip its other entries */
            st = cf_backward(tp, e->first, (uint32_t)i, grads);
            if (st)
                st = ir_errorf(st, "%s: gradient of '%s': %s", what, op, ir_last_error());
            i = e->first;
            continue;
        }
        if (r->kind != RT_GRAD_RULE)
            return ir_errorf(TJ_ERR_UNSUPPORTED, "%s: no gradient for op '%s'%s%s", what, op,
                             r->why ? ": " : " (no rule)", r->why ? r->why : "");
        tj_tensor *stack_gin[8] = {0},
                  **gin = e->n_in <= 8 ? stack_gin : calloc(e->n_in, sizeof *gin);
        if (!gin)
            return ir_errorf(TJ_ERR_OOM, "%s: out of memory", what);
        st = r->fn(&e->n, e->in, e->out, *gp, gin);
        if (st)
            st = ir_errorf(st, "%s: gradient of '%s': %s", what, op, ir_last_error());
        for (uint32_t k = 0; k < e->n_in && !st; k++) {
            if (!gin[k] || !e->in_keys[k] || !ir_dtype_is_float(e->in[k]->dtype))
                continue;
            char a[128], b[128];
            if (gin[k]->kind == RT_ERROR)
                st = ir_errorf(gin[k]->code, "%s: gradient of '%s' (input %u): %s", what, op, k,
                               gin[k]->msg);
            else if (gin[k]->dtype != e->in[k]->dtype || gin[k]->rank != e->in[k]->rank ||
                     memcmp(gin[k]->dims, e->in[k]->dims, sizeof(int64_t) * gin[k]->rank))
                st = ir_errorf(TJ_ERR_INVALID,
                               "%s: the rule of '%s' gave input %u a gradient %s%s for %s%s "
                               "(a bug in the rule)",
                               what, op, k, ir_dtype_name(gin[k]->dtype),
                               ir_fmt_dims(a, sizeof a, gin[k]->rank, gin[k]->dims),
                               ir_dtype_name(e->in[k]->dtype),
                               ir_fmt_dims(b, sizeof b, e->in[k]->rank, e->in[k]->dims));
            else
                st = accumulate(grads, e->in_keys[k], gin[k]);
        }
        if (gin != stack_gin)
            free(gin);
    }
    return st;
}

/* The sources of one gradient call: per source k, the keys whose gradients sum to it
 * (keys[off[k] .. off[k+1])) and its dtype and shape (for zeros). */
typedef struct source_keys {
    uint64_t *keys;
    uint32_t *off;
    uint8_t *dtype, *rank;
    const int64_t **dims;
} source_keys;

static tj_status gradient(tj_tape *tp, const char *what, uint32_t n_t, tj_tensor *const *targets,
                          tj_tensor *const *seeds, int n, const source_keys *sk,
                          tj_tensor **grads) {
    tj_status st = TJ_OK;
    kmap grads_of = {0};
    tp->busy = 1; /* its own backward pass is not recorded; other tapes record it */
    tj_scope_begin();
    st = backward(tp, n_t, targets, seeds, &grads_of);
    for (int k = 0; k < n && !st; k++) {
        tj_tensor *sum = NULL;
        for (uint32_t j = sk->off[k]; j < sk->off[k + 1] && !st; j++) {
            tj_tensor **g = kmap_get(&grads_of, sk->keys[j]);
            if (g && *g)
                sum = sum ? tj_add(sum, *g) : *g;
        }
        if (!sum && (tp->flags & TJ_TAPE_UNCONNECTED_ZERO) && ir_dtype_is_float(sk->dtype[k]))
            sum = tj_zeros((tj_dtype)sk->dtype[k], sk->rank[k], sk->dims[k]);
        if (sum && sum->kind == RT_ERROR)
            st = fail(what, sum);
        grads[k] = sum ? tj_retain(sum) : NULL;
    }
    tj_scope_end();
    tp->busy = 0;
    kmap_free(&grads_of);
    for (int k = 0; k < n; k++) {
        if (st) {
            tj_release(grads[k]);
            grads[k] = NULL;
        } else if (grads[k]) {
            rt_scoped(grads[k]);
        }
    }
    return st;
}

/* Checks the call's common arguments and clears grads. */
static tj_status check_call(tj_tape *tp, const char *what, tj_tensor *target, int n,
                            const void *list, tj_tensor **grads) {
    tj_status st = check_tape(tp, what);
    if (st)
        return st;
    if (n < 0 || (n > 0 && (!list || !grads)))
        return ir_errorf(TJ_ERR_INVALID, "%s: bad source list (n=%d)", what, n);
    for (int k = 0; k < n; k++)
        grads[k] = NULL;
    if (!target)
        return ir_errorf(TJ_ERR_INVALID, "%s: target is NULL", what);
    if (target->kind == RT_ERROR)
        return ir_errorf(target->code, "%s: the target is an error: %s", what, target->msg);
    if (target->kind == RT_TUPLE)
        return ir_errorf(TJ_ERR_INVALID, "%s: the target is a tuple, not a tensor", what);
    if (!ir_dtype_is_float(target->dtype))
        return ir_errorf(TJ_ERR_DTYPE, "%s: the target must be a float tensor, got %s", what,
                         ir_dtype_name(target->dtype));
    if (tp->serial != current_serial())
        return ir_errorf(TJ_ERR_STATE, "%s: the tape belongs to another trace", what);
    if (tp->busy)
        return ir_errorf(TJ_ERR_STATE, "%s: called from inside the same tape's gradient", what);
    return TJ_OK;
}

static int sk_alloc(source_keys *sk, int n, size_t n_keys) {
    sk->keys = malloc((n_keys + 1) * sizeof *sk->keys);
    sk->off = malloc(((size_t)n + 1) * sizeof *sk->off);
    sk->dtype = malloc((size_t)n + 1);
    sk->rank = malloc((size_t)n + 1);
    sk->dims = malloc(((size_t)n + 1) * sizeof *sk->dims);
    return sk->keys && sk->off && sk->dtype && sk->rank && sk->dims;
}

/* Source k of a gradient call: its key (or one no value has, when t is not the tape's), dtype
 * and shape. */
static void sk_source(source_keys *sk, const tj_tape *tape, uint32_t k, tj_tensor *t) {
    sk->off[k] = k;
    sk->keys[k] = key_of(tape, t);
    if (!sk->keys[k])
        sk->keys[k] = ~0ull; /* not a value of this tape: unconnected */
    sk->dtype[k] = t->dtype;
    sk->rank[k] = t->rank;
    sk->dims[k] = t->dims;
}

static void sk_free(source_keys *sk) {
    free(sk->keys);
    free(sk->off);
    free(sk->dtype);
    free(sk->rank);
    free(sk->dims);
}

tj_status tj_tape_gradient(tj_tape *tape, tj_tensor *target, tj_tensor *seed, int n,
                           tj_tensor *const *sources, tj_tensor **grads) {
    const char *what = "tape_gradient";
    tj_status st = check_call(tape, what, target, n, sources, grads);
    if (st)
        return st;
    source_keys sk;
    if (!sk_alloc(&sk, n, (size_t)n)) {
        sk_free(&sk);
        return ir_errorf(TJ_ERR_OOM, "%s: out of memory", what);
    }
    for (int k = 0; k < n && !st; k++) {
        tj_tensor *s = sources[k];
        if (!s)
            st = ir_errorf(TJ_ERR_INVALID, "%s: source %d is NULL", what, k);
        else if (s->kind == RT_ERROR)
            st = ir_errorf(s->code, "%s: source %d is an error: %s", what, k, s->msg);
        else if (s->kind != RT_CONCRETE && s->kind != RT_SYMBOLIC)
            st = ir_errorf(TJ_ERR_INVALID, "%s: source %d is not a tensor", what, k);
        if (st)
            break;
        sk_source(&sk, tape, (uint32_t)k, s);
    }
    sk.off[n] = (uint32_t)n;
    if (!st)
        st = gradient(tape, what, 1, &target, seed ? &seed : NULL, n, &sk, grads);
    sk_free(&sk);
    return st;
}

tj_status tj_tape_gradient_vars(tj_tape *tape, tj_tensor *target, tj_tensor *seed, int n,
                                tj_variable *const *vars, tj_tensor **grads) {
    const char *what = "tape_gradient_vars";
    tj_status st = check_call(tape, what, target, n, vars, grads);
    if (st)
        return st;
    for (int k = 0; k < n; k++)
        if ((st = rt_variable_check(vars[k], what)))
            return st;
    source_keys sk;
    if (!sk_alloc(&sk, n, (size_t)n * tape->n_reads)) {
        sk_free(&sk);
        return ir_errorf(TJ_ERR_OOM, "%s: out of memory", what);
    }
    uint32_t m = 0;
    for (int k = 0; k < n; k++) {
        sk.off[k] = m;
        for (size_t i = 0; i < tape->n_reads; i++)
            if (tape->reads[i].v == vars[k])
                sk.keys[m++] = tape->reads[i].key;
        sk.dtype[k] = vars[k]->dtype;
        sk.rank[k] = vars[k]->rank;
        sk.dims[k] = vars[k]->dims;
    }
    sk.off[n] = m;
    st = gradient(tape, what, 1, &target, seed ? &seed : NULL, n, &sk, grads);
    sk_free(&sk);
    return st;
}

tj_status rt_tape_vjp(tj_tape *tape, uint32_t n_t, tj_tensor *const *targets,
                      tj_tensor *const *seeds, uint32_t n, tj_tensor *const *sources,
                      tj_tensor **grads) {
    const char *what = "gradient";
    tj_status st = check_tape(tape, what);
    if (st)
        return st;
    source_keys sk;
    if (!sk_alloc(&sk, (int)n, n)) {
        sk_free(&sk);
        return ir_errorf(TJ_ERR_OOM, "%s: out of memory", what);
    }
    for (uint32_t k = 0; k < n; k++)
        sk_source(&sk, tape, k, sources[k]);
    sk.off[n] = n;
    for (uint32_t t = 0; t < n_t && !st; t++)
        if (!targets[t] || targets[t]->kind == RT_ERROR || targets[t]->kind == RT_TUPLE)
            st = ir_errorf(TJ_ERR_INVALID, "%s: target %u is not a tensor", what, t);
    if (!st)
        st = gradient(tape, what, n_t, targets, seeds, (int)n, &sk, grads);
    sk_free(&sk);
    return st;
}
