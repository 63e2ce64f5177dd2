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

rt_trace *rt_trace_suspend(void) {
    rt_trace *t = cur;
    cur = NULL;
    return t;
}

void rt_trace_resume(rt_trace *t) {
    cur = t;
}

static _Thread_local rt_trace *init_stack[64];
static _Thread_local int init_depth;

void tj_init_scope_begin(void) {
    rt_trace *t = rt_trace_suspend();
    if (init_depth < 64)
        init_stack[init_depth] = t;
    init_depth++;
}

void tj_init_scope_end(void) {
    if (init_depth == 0)
        return;
    init_depth--;
    rt_trace_resume(init_depth < 64 ? init_stack[init_depth] : NULL);
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

static void buffer_unref(void *buf) {
    rt_buffer_release(buf);
}

/* A concrete tensor as a CONST blob: an immutable buffer (tj_tensor_adopt, a graph's constant)
 * shared, one more reference to it; otherwise its raw elements copied, or for strings a uint64
 * length followed by the bytes, per element. */
uint32_t rt_const_blob(ir_graph *g, const tj_tensor *t) {
    size_t size = t->dtype == TJ_STRING ? 0 : (size_t)t->numel * ir_dtype_size(t->dtype);
    if (size && t->buf && t->buf->immutable) { /* shared, not copied: a model's weights */
        atomic_fetch_add(&t->buf->rc, 1);
        uint32_t b = ir_add_blob_borrowed(g, t->data, size, buffer_unref, t->buf);
        if (!b)
            rt_buffer_release(t->buf);
        return b;
    }
    if (t->dtype != TJ_STRING)
        return ir_add_blob(g, t->data, size);
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
    const ir_blob *b = ir_blob_get(g, n->a.blob);
    /* numbers borrow the blob's payload (immutable, reference counted): no copy of a model's
     * weights per program, no first touch of fresh pages on a first call */
    if (b && n->dtype != TJ_STRING && b->size &&
        b->size == (size_t)ir_numel(n->rank, n->dims) * ir_dtype_size(n->dtype)) {
        void *token = ir_blob_ref(b);
        tj_tensor *t =
            token ? rt_tensor_wrap(n->dtype, n->rank, n->dims, b->data, ir_blob_unref, token)
                  : NULL;
        if (!t)
            ir_blob_unref(token);
        return t;
    }
    tj_tensor *t = rt_tensor_alloc(n->dtype, n->rank, n->dims);
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

/* A symbolic tensor of an enclosing trace, used inside region tr: the value becomes an operand
 * of the control-flow node (lifted into the parent first, recursively) and a param here. */
static uint32_t capture_outer(rt_trace *tr, tj_tensor *t) {
    uint32_t outer = rt_trace_lift(tr->parent, t);
    if (outer == IR_NONE)
        return IR_NONE;
    rt_captures *c = tr->captures;
    for (uint32_t j = 0; j < c->n; j++)
        if (c->outer[j] == outer)
            return rt_region_capture_param(tr, j);
    if (c->n == c->cap) {
        uint32_t cap = c->cap ? 2 * c->cap : 8;
        uint32_t *o = realloc(c->outer, cap * sizeof *o);
        if (!o) {
            ir_errorf(TJ_ERR_OOM, "trace: out of memory");
            return IR_NONE;
        }
        c->outer = o;
        c->cap = cap;
    }
    c->outer[c->n++] = outer;
    return rt_region_capture_param(tr, c->n - 1);
}

uint32_t rt_trace_lift(rt_trace *tr, tj_tensor *t) {
    if (t->kind == RT_SYMBOLIC) {
        if ((t->trace != tr || t->trace_serial != tr->serial) && tr->is_region &&
            rt_trace_is_live(t))
            return capture_outer(tr, t);
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

/* Grows tr's per-slot variable state to n slots (new slots: no value, version 0). */
static bool var_state(rt_trace *tr, uint32_t n) {
    if (n <= tr->n_var_state)
        return true;
    uint32_t *cv = realloc(tr->cap_value, n * sizeof *cv);
    if (cv)
        tr->cap_value = cv;
    uint32_t *ver = cv ? realloc(tr->cap_version, n * sizeof *ver) : NULL;
    if (!ver)
        return false;
    tr->cap_version = ver;
    for (uint32_t i = tr->n_var_state; i < n; i++) {
        cv[i] = IR_NONE;
        ver[i] = 0;
    }
    tr->n_var_state = n;
    return true;
}

uint32_t rt_trace_capture(rt_trace *tr, tj_variable *v) {
    rt_trace *root = tr;
    while (root->is_region && root->parent)
        root = root->parent;
    uint32_t slot = IR_NONE;
    for (uint32_t i = 0; i < root->n_caps && slot == IR_NONE; i++)
        if (root->caps[i] == v)
            slot = i;
    if (slot == IR_NONE) {
        if (root->n_caps == root->cap_caps) {
            uint32_t cap = root->cap_caps ? root->cap_caps * 2 : 8;
            tj_variable **c = realloc(root->caps, cap * sizeof *c);
            if (!c)
                return IR_NONE;
            root->caps = c;
            root->cap_caps = cap;
        }
        root->caps[root->n_caps] = rt_variable_retain(v);
        slot = root->n_caps++;
    }
    return var_state(tr, slot + 1) ? slot : IR_NONE;
}

void rt_trace_free_state(rt_trace *tr) {
    free(tr->cap_value);
    free(tr->cap_version);
    free(tr->capture_param);
    tr->cap_value = tr->cap_version = tr->capture_param = NULL;
    tr->n_var_state = tr->n_capture_param = 0;
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
