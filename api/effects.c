/* effects.c — the side-effecting ops' entry points: print (S12) and host callbacks (S13).
 * Eagerly they act at once (runtime/effects.c); inside a trace they record PRINT / HOST_CALLBACK
 * nodes, which every execution of the compiled function performs in program order. */
#include <stdlib.h>
#include <string.h>

#include "api/api.h"

/* Checks the arguments of a side-effect op. */
static tj_status effect_args(const char *name, int n, tj_tensor *const *xs) {
    if (n < 0 || (n > 0 && !xs))
        return ir_errorf(TJ_ERR_INVALID, "%s: bad tensor list (n=%d)", name, n);
    for (int i = 0; i < n; i++) {
        if (!xs[i])
            return ir_errorf(TJ_ERR_INVALID, "%s: argument %d is NULL", name, i);
        if (rt_is_freed(xs[i], name))
            return TJ_ERR_STATE;
        if (xs[i]->kind == RT_ERROR)
            return ir_errorf(xs[i]->code, "%s", xs[i]->msg);
        if (xs[i]->kind == RT_TUPLE)
            return ir_errorf(TJ_ERR_INVALID, "%s: argument %d is a tuple", name, i);
        if (xs[i]->kind == RT_SYMBOLIC && !rt_trace_is_live(xs[i]))
            return ir_errorf(TJ_ERR_STATE, "%s: argument %d is a symbolic tensor outside its trace",
                             name, i);
    }
    return TJ_OK;
}

/* Records a side-effect node in trace tr. */
static tj_status record_effect(rt_trace *tr, int op, const void *blob, size_t blob_size, int n,
                               tj_tensor *const *xs) {
    const char *name = ir_ops[op].name;
    uint32_t stack_ids[16], *ids = n <= 16 ? stack_ids : malloc((size_t)n * sizeof *ids);
    if (!ids)
        return ir_errorf(TJ_ERR_OOM, "%s: out of memory", name);
    tj_status st = TJ_OK;
    for (int i = 0; i < n && !st; i++)
        if ((ids[i] = api_trace_lift(tr, xs[i])) == IR_NONE)
            st = ir_last_code();
    if (!st) {
        ir_node p;
        memset(&p, 0, sizeof p);
        p.op = (uint16_t)op;
        p.dtype = IR_VOID;
        p.a.blob = ir_add_blob(tr->g, blob, blob_size);
        if (ir_add(tr->g, &p, ids, (uint32_t)n) == IR_NONE)
            st = ir_last_code();
    }
    if (ids != stack_ids)
        free(ids);
    return st;
}

/* Records a side-effect node when tracing (1 is returned eagerly: the caller performs the effect
 * at once). Any failure inside a trace fails the trace: the compiled function must not run
 * without the effect. */
static tj_status effect(int op, const void *blob, size_t blob_size, int n, tj_tensor *const *xs) {
    rt_trace *tr = api_trace_current();
    tj_status st = effect_args(ir_ops[op].name, n, xs);
    if (!st && !tr)
        return 1;
    if (!st)
        st = record_effect(tr, op, blob, blob_size, n, xs);
    if (st && tr)
        api_trace_fail(tr, st);
    return st;
}

tj_status tj_print(const char *prefix, int n, tj_tensor *const *xs) {
    const char *p = prefix ? prefix : "";
    tj_status st = effect(IR_OP_PRINT, p, strlen(p) + 1, n, xs);
    return st == 1 ? rt_do_print(p, xs, (uint32_t)n) : st;
}

tj_status tj_host_callback(void *fn, void *user, int n, tj_tensor *const *xs) {
    if (!fn) {
        tj_status st = ir_errorf(TJ_ERR_INVALID, "host_callback: function is NULL");
        if (api_trace_current())
            api_trace_fail(api_trace_current(), st);
        return st;
    }
    void *blob[2] = {fn, user};
    tj_status st = effect(IR_OP_HOST_CALLBACK, blob, sizeof blob, n, xs);
    return st == 1 ? rt_do_callback(fn, user, xs, (uint32_t)n) : st;
}
