/* trace.c — the per-thread trace stack that ops record into while a function is traced.
 * A symbolic tensor names a node of the innermost trace; concrete tensors used inside a trace
 * are lifted to CONST nodes; variables used inside become capture slots (implicit inputs). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime.h"

static _Thread_local rt_trace *cur;
static atomic_uint_fast64_t next_serial = 1;

rt_trace *rt_trace_current(void) {
    return cur;
}

void rt_trace_push(rt_trace *t) {
    t->serial = atomic_fetch_add(&next_serial, 1);
    t->parent = cur;
    cur = t;
}

void rt_trace_pop(void) {
    if (cur)
        cur = cur->parent;
}

tj_tensor *rt_symbolic(rt_trace *tr, uint32_t id) {
    tj_tensor *t = calloc(1, sizeof *t);
    if (!t)
        return rt_errorf(TJ_ERR_OOM, "trace: out of memory");
    const ir_node *n = &tr->g->nodes[id];
    atomic_init(&t->rc, 1);
    t->kind = RT_SYMBOLIC;
    t->dtype = n->dtype == IR_VOID ? TJ_BOOL : n->dtype;
    t->rank = n->rank;
    t->numel = ir_numel(n->rank, n->dims);
    memcpy(t->dims, n->dims, sizeof t->dims);
    t->trace = tr;
    t->trace_serial = tr->serial;
    t->node = id;
    return t;
}

/* Serialises a concrete tensor into a CONST blob: raw elements, or for strings a uint64 length
 * followed by the bytes, per element. */
uint32_t rt_const_blob(ir_graph *g, const tj_tensor *t) {
    if (t->dtype != TJ_STRING)
        return ir_add_blob(g, t->data, (size_t)t->numel * ir_dtype_size(t->dtype));
    size_t size = 0;
    const tj_string *s = t->data;
    for (int64_t i = 0; i < t->numel; i++)
        size += 8 + s[i].len;
    char *buf = malloc(size ? size : 1), *p = buf;
    if (!buf)
        return 0;
    for (int64_t i = 0; i < t->numel; i++) {
        uint64_t len = s[i].len;
        memcpy(p, &len, 8);
        if (len)
            memcpy(p + 8, s[i].data, len);
        p += 8 + len;
    }
    uint32_t b = ir_add_blob(g, buf, size);
    free(buf);
    return b;
}

tj_tensor *rt_const_tensor(const ir_graph *g, const ir_node *n) {
    tj_tensor *t = rt_tensor_alloc(n->dtype, n->rank, n->dims);
    const ir_blob *b = ir_blob_get(g, n->a.blob);
    if (!t)
        return NULL;
    if (!b)
        return t;
    if (n->dtype != TJ_STRING) {
        size_t want = (size_t)t->numel * ir_dtype_size(n->dtype);
        if (b->size == want && want)
            memcpy(t->data, b->data, want);
        return t;
    }
    const char *p = b->data, *end = p + b->size;
    tj_string *s = t->data;
    for (int64_t i = 0; i < t->numel; i++) {
        uint64_t len = 0;
        if (p + 8 <= end)
            memcpy(&len, p, 8);
        if (p + 8 + len > end)
            len = 0;
        s[i].len = len;
        s[i].data = rt_strdup_len(p + 8, len);
        p += 8 + len;
    }
    return t;
}

uint32_t rt_trace_lift(rt_trace *tr, tj_tensor *t) {
    if (t->kind == RT_SYMBOLIC) {
        if (t->trace != tr || t->trace_serial != tr->serial) {
            ir_errorf(TJ_ERR_STATE, "a symbolic tensor from another trace was used (it escaped "
                                    "its function, or a value leaked between functions)");
            return IR_NONE;
        }
        return t->node;
    }
    if (t->kind != RT_CONCRETE) {
        ir_errorf(TJ_ERR_INVALID, "cannot record %s in a graph",
                  t->kind == RT_TUPLE ? "a tuple" : "an error tensor");
        return IR_NONE;
    }
    ir_node p;
    memset(&p, 0, sizeof p);
    p.op = IR_OP_CONST;
    p.dtype = t->dtype;
    p.rank = t->rank;
    memcpy(p.dims, t->dims, sizeof p.dims);
    p.a.blob = rt_const_blob(tr->g, t);
    return ir_add(tr->g, &p, NULL, 0);
}

uint32_t rt_trace_capture(rt_trace *tr, tj_variable *v) {
    for (uint32_t i = 0; i < tr->n_caps; i++)
        if (tr->caps[i] == v)
            return i;
    if (tr->n_caps == tr->cap_caps) {
        uint32_t cap = tr->cap_caps ? tr->cap_caps * 2 : 8;
        tj_variable **c = realloc(tr->caps, cap * sizeof *c);
        if (!c)
            return IR_NONE;
        tr->caps = c;
        uint32_t *cv = realloc(tr->cap_value, cap * sizeof *cv);
        if (!cv)
            return IR_NONE;
        tr->cap_value = cv;
        tr->cap_caps = cap;
    }
    tr->caps[tr->n_caps] = rt_variable_retain(v);
    tr->cap_value[tr->n_caps] = IR_NONE;
    return tr->n_caps++;
}

void rt_trace_fail(rt_trace *tr, tj_status code) {
    if (tr->err)
        return;
    tr->err = code ? code : TJ_ERR_INVALID;
    snprintf(tr->errmsg, sizeof tr->errmsg, "%s", ir_last_error());
}

int rt_trace_owner_active(const void *owner) {
    for (rt_trace *tr = cur; tr; tr = tr->parent)
        if (tr->owner == owner)
            return 1;
    return 0;
}

int rt_trace_is_live(const tj_tensor *t) {
    /* compare pointers and serials without dereferencing t->trace, which may be gone */
    for (rt_trace *tr = cur; tr; tr = tr->parent)
        if (tr == t->trace && tr->serial == t->trace_serial)
            return 1;
    return 0;
}
