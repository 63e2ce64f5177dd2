/* variable.c — variables: a named, lock-protected slot holding an immutable tensor that an
 * assignment replaces; what programs read (VAR_READ) and write (ASSIGN). The public entry points
 * that read, assign and create them, eagerly or recording into a trace, are api/variable.c. A
 * variable created outside a trace belongs to its creator (tj_variable_free); one created while
 * tracing belongs to the traced function and is released with it. Variables live in an rt_arena:
 * a freed one is recognised, so tj_variable_free and every accessor report a stale handle instead
 * of using it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/device.h"
#include "runtime/runtime.h"

static atomic_uint_fast64_t next_id = 1;
static rt_arena var_arena = RT_ARENA_INIT(256);
_Static_assert(sizeof(tj_variable) <= 256, "tj_variable outgrew its handle slot");

tj_status rt_variable_check(const tj_variable *v, const char *what) {
    if (!v)
        return ir_errorf(TJ_ERR_INVALID, "%s: variable is NULL", what);
    if (!rt_arena_holds(&var_arena, v))
        return ir_errorf(TJ_ERR_INVALID, "%s: not a tj_variable made by tj_variable_new", what);
    if (v->magic != RT_VAR_MAGIC)
        return ir_errorf(TJ_ERR_STATE, "%s: the variable was freed", what);
    return TJ_OK;
}

tj_variable *rt_variable_retain(tj_variable *v) {
    if (v)
        atomic_fetch_add(&v->rc, 1);
    return v;
}

void rt_variable_release(tj_variable *v) {
    if (!v || atomic_fetch_sub(&v->rc, 1) != 1)
        return;
    rt_release(v->value);
    rt_release(v->dev_value);
    free(v->name);
    pthread_mutex_destroy(&v->mu);
    pthread_mutex_destroy(&v->update_mu);
    rt_arena_release(&var_arena, v, sizeof *v);
}

tj_tensor *rt_variable_get(tj_variable *v) {
    pthread_mutex_lock(&v->mu);
    if (!v->value) { /* assigned on a device: copied back once */
        tj_tensor *h = rt_tensor_to_device(v->dev_value, rt_device_host());
        if (!h) {
            pthread_mutex_unlock(&v->mu);
            return rt_error_from_status(ir_last_code() ? ir_last_code() : TJ_ERR_RUNTIME);
        }
        v->value = h;
    }
    tj_tensor *t = rt_retain(v->value);
    pthread_mutex_unlock(&v->mu);
    return t;
}

tj_tensor *rt_variable_get_on(tj_variable *v, rt_device *d) {
    pthread_mutex_lock(&v->mu);
    tj_tensor *t = v->dev_value && rt_buffer_device(v->dev_value->buf) == d ? v->dev_value : NULL;
    if (!t) {
        t = rt_tensor_to_device(v->value, d); /* value is current when dev_value is elsewhere */
        if (t) {
            rt_release(v->dev_value);
            v->dev_value = t;
        }
    }
    t = rt_retain(t);
    pthread_mutex_unlock(&v->mu);
    return t;
}

tj_status rt_variable_set_device(tj_variable *v, tj_tensor *value) {
    if (value->kind != RT_CONCRETE || rt_on_host(value))
        return rt_variable_set(v, value);
    tj_status st = rt_variable_check_value(v, value->dtype, value->rank, value->dims);
    if (st)
        return st;
    pthread_mutex_lock(&v->mu);
    tj_tensor *old = v->value, *old_dev = v->dev_value;
    v->value = NULL;
    v->dev_value = rt_retain(value);
    pthread_mutex_unlock(&v->mu);
    rt_release(old);
    rt_release(old_dev);
    return TJ_OK;
}

void rt_variable_lock(tj_variable *v) {
    pthread_mutex_lock(&v->update_mu);
}
void rt_variable_unlock(tj_variable *v) {
    pthread_mutex_unlock(&v->update_mu);
}

tj_status rt_variable_check_value(const tj_variable *v, int dtype, int rank, const int64_t *dims) {
    char a[96], b[96];
    if (dtype != v->dtype || rank != v->rank ||
        memcmp(dims, v->dims, (size_t)rank * sizeof(int64_t)) != 0)
        return ir_errorf(dtype != v->dtype ? TJ_ERR_DTYPE : TJ_ERR_SHAPE,
                         "assign: variable '%s' is %s%s, value is %s%s", v->name,
                         ir_dtype_name(v->dtype), ir_fmt_dims(a, sizeof a, v->rank, v->dims),
                         ir_dtype_name(dtype), ir_fmt_dims(b, sizeof b, rank, dims));
    return TJ_OK;
}

tj_status rt_variable_set(tj_variable *v, tj_tensor *value) {
    if (value->kind != RT_CONCRETE)
        return ir_errorf(TJ_ERR_INVALID, "assign: variable '%s': value is not a concrete tensor",
                         v->name);
    tj_status st = rt_variable_check_value(v, value->dtype, value->rank, value->dims);
    if (st)
        return st;
    if (!rt_on_host(value)) /* variables live on the host (their checkpoints read them there) */
        return ir_errorf(TJ_ERR_INVALID,
                         "assign: variable '%s': the value is on %s; variables live on the host: "
                         "tj_to_device(value, \"cpu\") first",
                         v->name, rt_buffer_device(value->buf)->name);
    if (!(value = rt_tensor_plain(value))) /* a value, never a host scalar */
        return ir_last_code();
    pthread_mutex_lock(&v->mu);
    tj_tensor *old = v->value, *old_dev = v->dev_value;
    v->value = value;
    v->dev_value = NULL; /* a device's copy is stale now */
    pthread_mutex_unlock(&v->mu);
    rt_release(old);
    rt_release(old_dev);
    return TJ_OK;
}

tj_variable *rt_variable_create(tj_tensor *value, const char *name, int owned_by_trace) {
    tj_variable *v = rt_arena_alloc(&var_arena);
    if (!v) {
        rt_release(value);
        return NULL;
    }
    v->magic = RT_VAR_MAGIC;
    atomic_init(&v->rc, 1);
    atomic_init(&v->user_ref, owned_by_trace ? 0 : 1);
    v->owned_by_trace = owned_by_trace != 0;
    pthread_mutex_init(&v->mu, NULL);
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&v->update_mu, &attr);
    pthread_mutexattr_destroy(&attr);
    v->value = value;
    v->dtype = v->value->dtype;
    v->rank = v->value->rank;
    memcpy(v->dims, v->value->dims, sizeof v->dims);
    v->id = atomic_fetch_add(&next_id, 1);
    if (name && *name) {
        v->name = strdup(name);
    } else {
        char buf[32];
        snprintf(buf, sizeof buf, "Variable_%llu", (unsigned long long)v->id);
        v->name = strdup(buf);
    }
    return v;
}

void tj_variable_free(tj_variable *v) {
    if (rt_variable_check(v, "variable_free"))
        return; /* NULL is fine; a freed or foreign handle leaves its error in tj_last_error */
    if (v->owned_by_trace) {
        ir_errorf(TJ_ERR_STATE,
                  "variable_free: '%s' was created while tracing a function, which owns it: it "
                  "is freed with the function",
                  v->name);
        return;
    }
    if (!atomic_exchange(&v->user_ref, 0)) {
        ir_errorf(TJ_ERR_STATE, "variable_free: '%s' was already freed", v->name);
        return;
    }
    rt_variable_release(v);
}
const char *tj_variable_name(const tj_variable *v) {
    return rt_variable_check(v, "variable_name") ? "" : v->name;
}
