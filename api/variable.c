/* variable.c — the variables' entry points (runtime/variable.c holds the variables). Inside a
 * trace, reads and assigns record VAR_READ/ASSIGN nodes on a capture slot, so a variable is an
 * implicit input of the compiled function (S10); creating one is allowed only on a function's
 * first trace (S11), and the traced function then owns it. Eagerly they act at once, under the
 * variable's lock; recording tapes watch the variables read. */
#include <stdlib.h>
#include <string.h>

#include "runtime/device.h"
#include "api/grad.h"

tj_variable *tj_variable_new(tj_tensor *init, const char *name) {
    if (!init)
        return (void)ir_errorf(TJ_ERR_INVALID, "variable_new: init is NULL"), NULL;
    if (init->kind == RT_ERROR)
        return (void)ir_errorf(init->code, "%s", init->msg), NULL;
    if (init->kind == RT_TUPLE)
        return (void)ir_errorf(TJ_ERR_INVALID, "variable_new: init is a tuple"), NULL;
    if (!rt_on_host(init))
        return (void)ir_errorf(TJ_ERR_INVALID,
                               "variable_new: init is on %s; variables live on the host: "
                               "tj_to_device(init, \"cpu\") first",
                               rt_buffer_device(init->buf)->name),
               NULL;
    rt_trace *tr = api_trace_current();
    tj_tensor *value = NULL;
    if (tr) {
        if (tr->is_region) {
            ir_errorf(TJ_ERR_STATE, "variable_new: variables cannot be created inside a "
                                    "control-flow body (cond, while_loop, for_range, scan); "
                                    "create them outside it");
            api_trace_fail(tr, TJ_ERR_STATE);
            return NULL;
        }
        if (!tr->allow_var_create) {
            ir_errorf(TJ_ERR_STATE,
                      "variable_new: a traced function tried to create a variable on a non-first "
                      "trace; create variables outside the function, or only on its first call");
            api_trace_fail(tr, TJ_ERR_STATE);
            return NULL;
        }
        if (init->kind == RT_SYMBOLIC) {
            if (!tr->args) {
                ir_errorf(TJ_ERR_STATE, "variable_new: the initial value depends on the function's "
                                        "inputs, which are unknown while tracing for a spec");
                api_trace_fail(tr, TJ_ERR_STATE);
                return NULL;
            }
            value = rt_eval_node(tr->g, init->node, tr->args, tr->n_args, tr->caps);
            if (!value) {
                api_trace_fail(tr, ir_last_code());
                return NULL;
            }
        }
    } else if (init->kind == RT_SYMBOLIC) {
        ir_errorf(TJ_ERR_STATE, "variable_new: init is a symbolic tensor outside its trace");
        return NULL;
    }
    if (!value && !(value = rt_tensor_plain(init))) /* a value, never a host scalar */
        return NULL;
    tj_variable **created = NULL;
    if (tr &&
        !(created = realloc(tr->created, (size_t)(tr->n_vars_created + 1) * sizeof *created))) {
        rt_release(value);
        ir_errorf(TJ_ERR_OOM, "variable_new: out of memory");
        api_trace_fail(tr, TJ_ERR_OOM);
        return NULL;
    }
    if (tr)
        tr->created = created;
    tj_variable *v = rt_variable_create(value, name, tr != NULL);
    if (!v) {
        if (tr)
            api_trace_fail(tr, TJ_ERR_OOM);
        return NULL;
    }
    if (tr) /* the trace's function owns this reference */
        tr->created[tr->n_vars_created++] = v;
    return v;
}

/* The value of v: an unscoped new reference (an error tensor on failure). */
static tj_tensor *read_value(tj_variable *v) {
    if (rt_variable_check(v, "variable_read"))
        return rt_error_from_status(0);
    rt_trace *tr = api_trace_current();
    if (!tr)
        return rt_variable_get(v);
    uint32_t slot = api_trace_capture(tr, v);
    if (slot == IR_NONE)
        return rt_errorf(TJ_ERR_OOM, "variable_read: out of memory");
    if (tr->cap_value[slot] != IR_NONE)
        return api_symbolic(tr, tr->cap_value[slot]);
    ir_node p;
    memset(&p, 0, sizeof p);
    p.op = IR_OP_VAR_READ;
    p.a.i[0] = slot;
    p.a.i[1] = tr->cap_version[slot];
    p.dtype = v->dtype;
    p.rank = v->rank;
    memcpy(p.dims, v->dims, sizeof p.dims);
    uint32_t id = ir_add(tr->g, &p, NULL, 0);
    if (id == IR_NONE)
        return rt_error_from_status(0);
    return api_symbolic(tr, id);
}

tj_tensor *tj_variable_read(tj_variable *v) {
    tj_tensor *r = read_value(v);
    if (api_tape_n_active) {
        /* recording tapes watch the variables read; eagerly the read gets an identity of its
         * own, so a tensor that is also the variable's value (its initial value, say) is not
         * mistaken for the variable */
        if (r->kind == RT_CONCRETE) {
            tj_tensor *a = rt_tensor_alias(r);
            if (a) {
                rt_release(r);
                r = a;
            }
        }
        api_tape_on_var_read(v, r);
    }
    return rt_scoped(r);
}

tj_tensor *tj_assign(tj_variable *v, tj_tensor *value) {
    if (rt_variable_check(v, "assign"))
        return rt_scoped(rt_error_from_status(0));
    if (!value)
        return rt_scoped(rt_errorf(TJ_ERR_INVALID, "assign: value is NULL"));
    if (value->kind == RT_ERROR)
        return rt_scoped(rt_retain(value));
    rt_trace *tr = api_trace_current();
    if (!tr) {
        rt_variable_lock(v);
        tj_status st = rt_variable_set(v, value);
        rt_variable_unlock(v);
        return rt_scoped(st ? rt_error_from_status(st) : rt_retain(value));
    }
    uint32_t slot = api_trace_capture(tr, v);
    uint32_t in = slot == IR_NONE ? IR_NONE : api_trace_lift(tr, value);
    if (in == IR_NONE)
        return rt_scoped(rt_error_from_status(0));
    const ir_node *vn = &tr->g->nodes[in];
    tj_status bad = rt_variable_check_value(v, vn->dtype, vn->rank, vn->dims);
    if (bad) {
        api_trace_fail(tr, bad);
        return rt_scoped(rt_error_from_status(bad));
    }
    ir_node p;
    memset(&p, 0, sizeof p);
    p.op = IR_OP_ASSIGN;
    p.a.i[0] = slot;
    uint32_t id = ir_add(tr->g, &p, &in, 1);
    if (id == IR_NONE)
        return rt_scoped(rt_error_from_status(0));
    tr->cap_value[slot] = id;
    return rt_scoped(api_symbolic(tr, id));
}

static tj_tensor *assign_op(tj_variable *v, tj_tensor *delta, int sub) {
    if (rt_variable_check(v, sub ? "assign_sub" : "assign_add"))
        return rt_scoped(rt_error_from_status(0));
    int eager = api_trace_current() == NULL;
    if (eager)
        rt_variable_lock(v); /* read, add and assign as one update */
    tj_scope_begin();
    tj_tensor *cur = tj_variable_read(v);
    tj_tensor *nv = sub ? tj_sub(cur, delta) : tj_add(cur, delta);
    tj_tensor *r = tj_keep(tj_assign(v, nv));
    tj_scope_end();
    if (eager)
        rt_variable_unlock(v);
    return r; /* tj_keep already handed it to the enclosing scope or the caller */
}

tj_tensor *tj_assign_add(tj_variable *v, tj_tensor *delta) {
    return assign_op(v, delta, 0);
}
tj_tensor *tj_assign_sub(tj_variable *v, tj_tensor *delta) {
    return assign_op(v, delta, 1);
}
