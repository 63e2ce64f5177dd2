/* trace.c — the per-thread trace stack that ops record into while a function is traced.
 * A symbolic tensor names a node of the innermost trace; concrete tensors used inside a trace
 * are lifted to CONST nodes; variables used inside become capture slots (implicit inputs). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"

static _Thread_local rt_trace *cur;
static atomic_uint_fast64_t next_serial = 1;

rt_trace *api_trace_current(void) {
    return cur;
}

/* The runtime is told the mode, never asks: rt_tracing follows cur. */
static void set_cur(rt_trace *t) {
    cur = t;
    rt_tracing = t != NULL;
}

/* ---- symbolic tensors as the runtime sees them (rt_symbolic_ops) ----------------------------- */
static void symbolic_name(const tj_tensor *t, char *buf, size_t size) {
    if (!rt_trace_is_live(t)) {
        snprintf(buf, size, "<escaped>:0"); /* its trace has ended: the graph is gone */
        return;
    }
    const rt_trace *tr = t->trace;
    const ir_node *n = tr && tr->g && t->node < tr->g->n_nodes ? &tr->g->nodes[t->node] : NULL;
    if (n && n->op == IR_OP_PARAM) {
        int64_t k = n->a.i[0];
        if (tr->arg_names && tr->arg_names[k])
            snprintf(buf, size, "%s:0", tr->arg_names[k]);
        else
            snprintf(buf, size, "x%lld:0", (long long)k);
    } else if (n) {
        snprintf(buf, size, "%s_%u:0", ir_ops[n->op].name, t->node);
    } else {
        snprintf(buf, size, "?:0");
    }
}

static void symbolic_refused(const tj_tensor *t) {
    if (cur && rt_trace_is_live(t))
        api_trace_fail(cur, ir_last_code());
}

static const rt_symbolic_ops symbolic_ops = {symbolic_name, symbolic_refused};
static pthread_once_t ops_once = PTHREAD_ONCE_INIT;
static void register_ops(void) {
    rt_set_symbolic_ops(&symbolic_ops);
}

void api_trace_push(rt_trace *t) {
    pthread_once(&ops_once, register_ops); /* before the first symbolic tensor */
    t->serial = atomic_fetch_add(&next_serial, 1);
    t->parent = cur;
    set_cur(t);
}

rt_trace *api_trace_suspend(void) {
    rt_trace *t = cur;
    set_cur(NULL);
    return t;
}

void api_trace_resume(rt_trace *t) {
    set_cur(t);
}

static _Thread_local rt_trace *init_stack[64];
static _Thread_local int init_depth;

void tj_init_scope_begin(void) {
    rt_trace *t = api_trace_suspend();
    if (init_depth < 64)
        init_stack[init_depth] = t;
    init_depth++;
}

void tj_init_scope_end(void) {
    if (init_depth == 0)
        return;
    init_depth--;
    api_trace_resume(init_depth < 64 ? init_stack[init_depth] : NULL);
}

void api_trace_pop(void) {
    if (cur)
        set_cur(cur->parent);
}

tj_tensor *api_symbolic(rt_trace *tr, uint32_t id) {
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

/* A symbolic tensor of an enclosing trace, used inside region tr: the value becomes an operand
 * of the control-flow node (lifted into the parent first, recursively) and a param here. */
static uint32_t capture_outer(rt_trace *tr, tj_tensor *t) {
    uint32_t outer = api_trace_lift(tr->parent, t);
    if (outer == IR_NONE)
        return IR_NONE;
    api_captures *c = tr->captures;
    for (uint32_t j = 0; j < c->n; j++)
        if (c->outer[j] == outer)
            return api_region_capture_param(tr, j);
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
    return api_region_capture_param(tr, c->n - 1);
}

uint32_t api_trace_lift(rt_trace *tr, tj_tensor *t) {
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

uint32_t api_trace_capture(rt_trace *tr, tj_variable *v) {
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

void api_trace_free_state(rt_trace *tr) {
    free(tr->cap_value);
    free(tr->cap_version);
    free(tr->capture_param);
    tr->cap_value = tr->cap_version = tr->capture_param = NULL;
    tr->n_var_state = tr->n_capture_param = 0;
}

void api_trace_fail(rt_trace *tr, tj_status code) {
    if (tr->err)
        return;
    tr->err = code ? code : TJ_ERR_INVALID;
    snprintf(tr->errmsg, sizeof tr->errmsg, "%s", ir_last_error());
}

int api_trace_owner_active(const void *owner) {
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
