/* device.c — the device interface (device.h) and its first device, the host. */
#include <stdlib.h>
#include <string.h>

#include "runtime/cuda.h"
#include "runtime/device.h"
#include "runtime/rt_pool.h"

static void *host_alloc(rt_device *d, size_t size) {
    (void)d;
    void *p = rt_alloc(size);
    if (!p)
        ir_errorf(TJ_ERR_OOM, "cpu: out of memory for %zu bytes", size);
    return p;
}
static void host_free(rt_device *d, void *p, size_t size) {
    (void)d;
    rt_free(p, size);
}
static tj_status host_copy(rt_device *d, void *dst, const void *src, size_t size) {
    (void)d;
    if (size)
        memmove(dst, src, size);
    return TJ_OK;
}
static tj_status host_sync(rt_device *d) {
    (void)d;
    return TJ_OK;
}

static const rt_device_vt host_vt = {host_alloc, host_free, host_copy,
                                     host_copy,  host_copy, host_sync};
static rt_device host = {&host_vt, "cpu", 1};

rt_device *rt_device_host(void) {
    return &host;
}

rt_device *rt_buffer_device(const rt_buffer *b) {
    return b && b->device ? b->device : &host;
}

tj_tensor *rt_tensor_alloc_on(rt_device *d, int dtype, int rank, const int64_t *dims) {
    if (!d || d->host)
        return rt_tensor_alloc_uninit(dtype, rank, dims);
    if (dtype == TJ_STRING)
        return (void)ir_errorf(TJ_ERR_DTYPE, "alloc: strings live on the host, not on %s", d->name),
               NULL;
    tj_tensor *t = rt_tensor_header(dtype, rank, dims);
    rt_buffer *b = t ? calloc(1, sizeof *b) : NULL;
    size_t size = t ? (size_t)t->numel * ir_dtype_size(dtype) : 0;
    void *data = b ? d->vt->alloc(d, size) : NULL;
    if (!data) {
        if (t && !b)
            ir_errorf(TJ_ERR_OOM, "alloc: out of memory");
        free(b);
        rt_release(t);
        return NULL;
    }
    atomic_init(&b->rc, 1);
    b->data = data;
    b->size = size;
    b->device = d;
    b->device_data = 1;
    t->buf = b;
    t->data = data;
    t->on_device = 1;
    return t;
}

tj_tensor *rt_tensor_to_device(const tj_tensor *t, rt_device *d) {
    if (!t || t->kind != RT_CONCRETE)
        return (void)ir_errorf(TJ_ERR_INVALID, "to_device: not a concrete tensor"), NULL;
    d = d ? d : &host;
    rt_device *from = rt_buffer_device(t->buf);
    if (from == d)
        return rt_retain((tj_tensor *)t);
    if (t->dtype == TJ_STRING)
        return (void)ir_errorf(TJ_ERR_DTYPE, "to_device: strings live on the host, not on %s",
                               d->name),
               NULL;
    size_t size = (size_t)t->numel * ir_dtype_size(t->dtype);
    if (!from->host && !d->host) { /* between two devices: through the host */
        tj_tensor *h = rt_tensor_to_device(t, &host);
        tj_tensor *r = h ? rt_tensor_to_device(h, d) : NULL;
        rt_release(h);
        return r;
    }
    tj_tensor *r = rt_tensor_alloc_on(d, t->dtype, t->rank, t->dims);
    if (!r)
        return NULL;
    tj_status st = d->host ? from->vt->copy_out(from, r->data, t->data, size)
                           : d->vt->copy_in(d, r->data, t->data, size);
    if (!st && d->host) /* the values must be there when the host reads them */
        st = from->vt->sync(from);
    if (st) {
        rt_release(r);
        return NULL;
    }
    return r;
}

tj_status rt_check_host(const char *what, tj_tensor *const *in, uint32_t n) {
    for (uint32_t k = 0; k < n; k++)
        if (!rt_on_host(in[k]))
            return ir_errorf(TJ_ERR_INVALID, "%s: input %u is on %s; it runs on %s", what, k,
                             rt_buffer_device(in[k]->buf)->name, host.name);
    return TJ_OK;
}

/* ---- the public device API (tracejit.h) ------------------------------------------------------ */
/* The device called name: "cpu", "cuda" (cuda:0) or "cuda:N"; NULL with the error set. */
static rt_device *device_named(const char *name) {
    if (!name)
        return (void)ir_errorf(TJ_ERR_INVALID, "device: the name is NULL"), NULL;
    if (!strcmp(name, "cpu"))
        return &host;
    if (!strncmp(name, "cuda", 4) && (!name[4] || name[4] == ':')) {
        int ord = 0, digits = 0;
        for (const char *p = name[4] ? name + 5 : ""; *p && digits >= 0; p++, digits++)
            digits =
                *p >= '0' && *p <= '9' && ord < 100000 ? (ord = ord * 10 + (*p - '0'), digits) : -2;
        if (digits > 0 || (!name[4] && digits == 0))
            return rt_cuda_device(ord);
    }
    return (void)ir_errorf(TJ_ERR_INVALID, "device: unknown device '%s' (cpu, cuda, cuda:N)", name),
           NULL;
}

const char *tj_device_unavailable(const char *device) {
    static _Thread_local char why[512];
    if (device_named(device))
        return NULL;
    snprintf(why, sizeof why, "%s", ir_last_error());
    return why;
}

int tj_device_count(const char *kind) {
    return !kind ? 0 : !strcmp(kind, "cpu") ? 1 : !strcmp(kind, "cuda") ? rt_cuda_count() : 0;
}

tj_status tj_device_synchronize(const char *device) {
    rt_device *d = device_named(device);
    return d ? d->vt->sync(d) : ir_last_code();
}

tj_tensor *tj_to_device(tj_tensor *t, const char *device) {
    if (!t)
        return rt_scoped(rt_errorf(TJ_ERR_INVALID, "to_device: the tensor is NULL"));
    if (t->kind == RT_ERROR)
        return rt_scoped(rt_retain(t)); /* errors stay sticky */
    if (t->kind == RT_SYMBOLIC)
        return rt_scoped(rt_errorf(TJ_ERR_STATE,
                                   "to_device: inside a traced function a tensor's device is the "
                                   "backend's choice; move tensors before the call"));
    if (t->kind != RT_CONCRETE)
        return rt_scoped(rt_errorf(TJ_ERR_INVALID, "to_device: not a tensor (a tuple?)"));
    rt_device *d = device_named(device);
    if (!d)
        return rt_scoped(rt_errorf(ir_last_code(), "to_device: %s", ir_last_error()));
    tj_tensor *r = rt_tensor_to_device(t, d);
    return rt_scoped(r ? r : rt_error_from_status(0));
}

const char *tj_tensor_device(const tj_tensor *t) {
    return t && t->kind == RT_CONCRETE ? rt_buffer_device(t->buf)->name : NULL;
}
