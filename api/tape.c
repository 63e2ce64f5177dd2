/* tape.c — gradient tapes (tf.GradientTape). A recording tape sees every op of its thread
 * (api_apply calls api_tape_on_op) and keeps those whose inputs it already knows: watched tensors,
 * variables read while it records, and the results of ops it kept. tj_tape_gradient walks the
 * kept entries backwards, calling each op's rule (grad.c) and summing the gradients that reach a
 * value. The rules are tracejit ops, so the backward pass is eager on an eager tape and recorded
 * into the same graph on a tape inside a trace, and any other recording tape records it too.
 *
 * Values are named by keys: inside a trace (serial s) the node of the value, (1 << 63 | s << 32
 * | node), so that interned nodes (one value reached twice) share a key; eagerly the tensor's
 * address, which stays valid because the tape holds a reference to every tensor it names.
 *
 * This file records and owns tapes; tape_grad.c runs the backward pass, tape_cf.c differentiates
 * control-flow nodes. */
#include <stdlib.h>
#include <string.h>

#include "api/tape.h"

_Thread_local int api_tape_n_active;
static _Thread_local tj_tape *active;
static rt_arena tape_arena = RT_ARENA_INIT(256);

_Static_assert(sizeof(struct tj_tape) <= 256, "a tape fits its arena slot");

tj_status api_tape_check(const tj_tape *t, const char *what) {
    if (!t)
        return ir_errorf(TJ_ERR_INVALID, "%s: tape is NULL", what);
    if (!rt_arena_holds(&tape_arena, t) || t->magic != TAPE_MAGIC)
        return ir_errorf(TJ_ERR_STATE, "%s: the tape was freed (or is not a tape)", what);
    return TJ_OK;
}

/* ---- keys and the map ------------------------------------------------------------------------ */
uint64_t api_tape_node_key(uint64_t serial, uint32_t id) {
    return (1ull << 63) | (serial << 32) | id;
}

uint64_t api_tape_serial_now(void) {
    rt_trace *tr = api_trace_current();
    return tr ? tr->serial : 0;
}

/* The key of t as the tape sees it, or 0 (t is not a value of the tape's trace). */
uint64_t api_tape_key(const tj_tape *tp, tj_tensor *t) {
    if (!t || (t->kind != RT_CONCRETE && t->kind != RT_SYMBOLIC))
        return 0;
    if (!tp->serial)
        return t->kind == RT_CONCRETE ? (uint64_t)(uintptr_t)t : 0;
    rt_trace *tr = api_trace_current();
    if (!tr || tr->serial != tp->serial)
        return 0;
    if (t->kind == RT_SYMBOLIC)
        return t->trace_serial == tp->serial ? api_tape_node_key(tp->serial, t->node) : 0;
    uint32_t id = api_trace_lift(tr, t); /* a concrete tensor inside the trace: its CONST node */
    return id == IR_NONE ? 0 : api_tape_node_key(tp->serial, id);
}

static size_t slot_of(const kmap *m, uint64_t k) {
    size_t i = (size_t)((k * 0x9e3779b97f4a7c15ull) >> 20) & (m->cap - 1);
    while (m->k[i] && m->k[i] != k)
        i = (i + 1) & (m->cap - 1);
    return i;
}

int api_kmap_has(const kmap *m, uint64_t k) {
    return m->cap && m->k[slot_of(m, k)] == k;
}

tj_tensor **api_kmap_get(kmap *m, uint64_t k) {
    if (!m->cap)
        return NULL;
    size_t i = slot_of(m, k);
    return m->k[i] == k ? &m->v[i] : NULL;
}

/* Inserts k (value NULL) if absent; returns its value slot (NULL on OOM). */
tj_tensor **api_kmap_put(kmap *m, uint64_t k) {
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
void api_kmap_free(kmap *m) {
    for (size_t i = 0; i < m->cap; i++)
        if (m->k[i])
            rt_release(m->v[i]);
    free(m->k);
    free(m->v);
    memset(m, 0, sizeof *m);
}

/* ---- recording ------------------------------------------------------------------------------- */
static int records_here(const tj_tape *tp) {
    return tp->recording && !tp->busy && tp->serial == api_tape_serial_now();
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
    tp->held[tp->n_held++] = rt_retain(t);
    return 1;
}

static void add_entry(tj_tape *tp, const ir_node *n, const uint64_t *keys, tj_tensor *const *vals,
                      uint32_t n_in, uint64_t out_key, tj_tensor *out) {
    if (tp->n_e == tp->cap_e) {
        size_t c = tp->cap_e ? tp->cap_e * 2 : 64;
        entry *e = realloc(tp->e, c * sizeof *e);
        if (!e) {
            tp->lost = 1; /* out of memory: a gradient from this tape would miss the op */
            return;
        }
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
    tj_tensor **slot = api_kmap_put(&tp->known, out_key);
    if (!e->in_keys || !e->in || !slot) {
        free(e->in_keys);
        free(e->in);
        tp->lost = 1;
        return;
    }
    for (uint32_t k = 0; k < n_in; k++) {
        e->in_keys[k] = keys[k];
        e->in[k] = vals ? rt_retain(vals[k]) : NULL;
    }
    e->out_key = out_key;
    e->out = rt_retain(out);
    e->first = UINT32_MAX;
    tp->n_e++;
}

void api_tape_on_op(const ir_node *n, tj_tensor *const *orig, tj_tensor *const *vals, uint32_t n_in,
                    const uint32_t *ids, tj_tensor *res) {
    if (!res || res->kind == RT_ERROR || res->kind == RT_TUPLE || !ir_dtype_is_float(res->dtype))
        return;
    for (tj_tape *tp = active; tp; tp = tp->next) {
        if (!records_here(tp))
            continue;
        uint64_t stack_keys[8], *keys = n_in <= 8 ? stack_keys : malloc(n_in * sizeof *keys);
        if (!keys) {
            tp->lost = 1;
            continue;
        }
        int hit = 0;
        for (uint32_t k = 0; k < n_in; k++) {
            keys[k] = ids ? api_tape_node_key(tp->serial, ids[k]) : api_tape_key(tp, orig[k]);
            /* an input the tape does not know gets no gradient; forgetting its key also keeps
             * an eager address that is later reused from meaning this input */
            if (!keys[k] || !api_kmap_has(&tp->known, keys[k]))
                keys[k] = 0;
            hit |= keys[k] != 0;
        }
        uint64_t ok = api_tape_key(tp, res);
        /* a result the tape knows already is the same value reached again (an interned node) */
        if (hit && ok && !api_kmap_has(&tp->known, ok))
            add_entry(tp, n, keys, vals, n_in, ok, res);
        if (keys != stack_keys)
            free(keys);
    }
}

void api_tape_on_alias(tj_tensor *src, tj_tensor *alias) {
    if (!src || !alias || src == alias || alias->kind != RT_CONCRETE)
        return;
    ir_node n;
    memset(&n, 0, sizeof n);
    n.op = IR_OP_RESHAPE;
    n.dtype = alias->dtype;
    n.rank = alias->rank;
    memcpy(n.dims, alias->dims, sizeof(int64_t) * alias->rank);
    api_tape_on_op(&n, &src, &src, 1, NULL, alias);
}

void api_tape_on_var_read(tj_variable *v, tj_tensor *res) {
    if (!res || res->kind == RT_ERROR || !ir_dtype_is_float(res->dtype))
        return;
    for (tj_tape *tp = active; tp; tp = tp->next) {
        if (!records_here(tp))
            continue;
        uint64_t k = api_tape_key(tp, res);
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
            if (!r) {
                tp->lost = 1;
                continue;
            }
            tp->reads = r;
            tp->cap_reads = c;
        }
        if (!api_kmap_put(&tp->known, k) || !hold(tp, res)) {
            tp->lost = 1;
            continue;
        }
        tp->reads[tp->n_reads++] = (var_read){rt_variable_retain(v), k};
    }
}

void api_tape_on_cf(rt_trace *tr, const ir_node *node, const uint32_t *in, uint32_t n_in,
                    tj_tensor *const *outs, uint32_t n_out) {
    for (tj_tape *tp = active; tp; tp = tp->next) {
        if (!records_here(tp) || tp->serial != tr->serial)
            continue;
        int hit = 0;
        for (uint32_t k = 0; k < n_in && !hit; k++)
            hit = api_kmap_has(&tp->known, api_tape_node_key(tp->serial, in[k]));
        if (!hit)
            continue;
        /* one entry per float result, all with the node's operands (symbolic tensors) */
        tj_tensor **vals = calloc((size_t)n_in + 1, sizeof *vals);
        uint64_t *keys = calloc((size_t)n_in + 1, sizeof *keys);
        if (!vals || !keys)
            tp->lost = 1;
        for (uint32_t k = 0; vals && keys && k < n_in; k++) {
            vals[k] = api_symbolic(tr, in[k]);
            keys[k] = api_tape_node_key(tp->serial, in[k]);
            if (!api_kmap_has(&tp->known, keys[k]))
                keys[k] = 0;
        }
        uint32_t first = (uint32_t)tp->n_e;
        for (uint32_t k = 0; vals && keys && k < n_out; k++) {
            uint64_t ok = api_tape_key(tp, outs[k]);
            size_t before = tp->n_e;
            if (ok && ir_dtype_is_float(outs[k]->dtype) && !api_kmap_has(&tp->known, ok))
                add_entry(tp, node, keys, vals, n_in, ok, outs[k]);
            if (tp->n_e > before) {
                tp->e[before].res = k;
                tp->e[before].first = first;
            }
        }
        for (uint32_t k = 0; vals && k < n_in; k++)
            rt_release(vals[k]);
        free(vals);
        free(keys);
    }
}

int api_tape_wants_eager(int n, tj_tensor *const *args) {
    if (!api_tape_n_active || api_trace_current())
        return 0;
    for (tj_tape *tp = active; tp; tp = tp->next)
        for (int k = 0; k < n && records_here(tp); k++)
            if (api_kmap_has(&tp->known, api_tape_key(tp, args[k])))
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
    api_tape_n_active--;
}

tj_tape *tj_tape_new(unsigned flags) {
    if (flags & ~(unsigned)TJ_TAPE_UNCONNECTED_ZERO)
        return (void)ir_errorf(TJ_ERR_INVALID, "tape_new: unknown flags 0x%x", flags), NULL;
    tj_tape *tp = rt_arena_alloc(&tape_arena);
    if (!tp)
        return NULL;
    tp->magic = TAPE_MAGIC;
    tp->flags = flags;
    tp->serial = api_tape_serial_now();
    tp->recording = 1;
    tp->next = active;
    active = tp;
    api_tape_n_active++;
    return tp;
}

tj_status tj_tape_watch(tj_tape *tape, tj_tensor *x) {
    tj_status st = api_tape_check(tape, "tape_watch");
    if (st)
        return st;
    if (!x)
        return ir_errorf(TJ_ERR_INVALID, "tape_watch: tensor is NULL");
    if (x->kind == RT_ERROR)
        return ir_errorf(x->code, "tape_watch: %s", x->msg);
    if (x->kind == RT_TUPLE || (x->kind != RT_CONCRETE && x->kind != RT_SYMBOLIC))
        return ir_errorf(TJ_ERR_INVALID, "tape_watch: expected a tensor, got a tuple");
    if (tape->serial != api_tape_serial_now())
        return ir_errorf(TJ_ERR_STATE, "tape_watch: the tape belongs to another trace (a tape "
                                       "made inside a traced function records only that trace)");
    uint64_t k = api_tape_key(tape, x);
    if (!k)
        return ir_errorf(TJ_ERR_STATE, "tape_watch: the tensor is not a value of this trace");
    if (api_kmap_has(&tape->known, k))
        return TJ_OK;
    if (!api_kmap_put(&tape->known, k) || !hold(tape, x))
        return ir_errorf(TJ_ERR_OOM, "tape_watch: out of memory");
    return TJ_OK;
}

tj_status tj_tape_stop(tj_tape *tape) {
    tj_status st = api_tape_check(tape, "tape_stop");
    if (st)
        return st;
    unlink_tape(tape);
    return TJ_OK;
}

void tj_tape_free(tj_tape *tape) {
    if (!tape || api_tape_check(tape, "tape_free"))
        return;
    unlink_tape(tape);
    for (size_t i = 0; i < tape->n_e; i++) {
        entry *e = &tape->e[i];
        for (uint32_t k = 0; k < e->n_in; k++)
            rt_release(e->in[k]);
        rt_release(e->out);
        free(e->in);
        free(e->in_keys);
    }
    free(tape->e);
    for (size_t i = 0; i < tape->n_held; i++)
        rt_release(tape->held[i]);
    free(tape->held);
    for (size_t i = 0; i < tape->n_reads; i++)
        rt_variable_release(tape->reads[i].v);
    free(tape->reads);
    free(tape->known.k);
    free(tape->known.v);
    tape->magic = 0;
    rt_arena_release(&tape_arena, tape, sizeof *tape);
}

/* Adds g (scoped or borrowed) into the gradient of key k. */
tj_status api_tape_accumulate(kmap *grads, uint64_t k, tj_tensor *g) {
    tj_tensor **slot = api_kmap_put(grads, k);
    if (!slot)
        return ir_errorf(TJ_ERR_OOM, "gradient: out of memory");
    tj_tensor *sum = *slot ? tj_add(*slot, g) : g;
    if (sum->kind == RT_ERROR)
        return ir_errorf(sum->code, "gradient: %s", sum->msg);
    rt_release(*slot);
    *slot = rt_retain(sum);
    return TJ_OK;
}
