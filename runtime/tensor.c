/* tensor.c — tensors, buffers, tuples, error tensors and scopes.
 * A tensor is an immutable header over a reference-counted buffer (64-byte aligned). Every
 * public constructor passes its result through rt_scoped (lifetime.c), so a reference belongs to
 * the innermost open scope or, with none open, to the caller. String tensors own their elements
 * through the buffer (n_strings). */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/rt_pool.h"
#include "runtime/device.h"

/* ---- buffers --------------------------------------------------------------------------------- */
/* One allocation holds the buffer header and its data (data 64-byte aligned after the header). */
#define BUF_HEAD ((sizeof(rt_buffer) + 63) & ~(size_t)63)
_Static_assert(sizeof(rt_buffer) <= 64, "a buffer's header is one cache line before its data");
static size_t block_size(size_t size) {
    return BUF_HEAD + (size ? (size + 63) & ~(size_t)63 : 64);
}

static rt_buffer *buffer_new(size_t size, int zeroed) {
    /* the caching allocator: a freed result's memory serves the next call (no page faults) */
    char *block = zeroed ? rt_alloc_zeroed(block_size(size)) : rt_alloc(block_size(size));
    if (!block)
        return NULL;
    if (!zeroed)
        memset(block, 0, BUF_HEAD); /* the header; the data stays as it was */
    rt_buffer *b = (rt_buffer *)block;
    b->data = block + BUF_HEAD;
    b->size = size;
    b->inline_data = 1;
    atomic_init(&b->rc, 1);
    return b;
}

void rt_buffer_release(rt_buffer *b) {
    if (!b || atomic_fetch_sub(&b->rc, 1) != 1)
        return;
    if (b->release) {
        b->release(b->user);
    } else if (b->device_data) {
        b->device->vt->free(b->device, b->data, b->size);
    } else {
        tj_string *s = b->data;
        for (int64_t i = 0; i < b->n_strings; i++)
            free(s[i].data);
        if (!b->inline_data)
            free(b->data);
    }
    if (b->inline_data)
        rt_free(b, block_size(b->size));
    else
        free(b);
}

static tj_tensor *header_new(int kind) {
    tj_tensor *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    atomic_init(&t->rc, 1);
    t->kind = (uint8_t)kind;
    return t;
}

static void set_shape(tj_tensor *t, int dtype, int rank, const int64_t *dims) {
    t->dtype = (uint8_t)dtype;
    t->rank = (uint8_t)rank;
    t->numel = 1;
    for (int i = 0; i < rank; i++) {
        t->dims[i] = dims[i];
        t->numel *= dims[i];
    }
}

static tj_status check_shape(const char *op, int dtype, int rank, const int64_t *dims) {
    if (dtype < 0 || dtype >= TJ_N_DTYPES)
        return ir_errorf(TJ_ERR_DTYPE, "%s: bad dtype %d", op, dtype);
    return ir_check_shape(op, rank, dims, false);
}

tj_tensor *rt_tensor_header(int dtype, int rank, const int64_t *dims) {
    if (check_shape("alloc", dtype, rank, dims))
        return NULL;
    tj_tensor *t = header_new(RT_CONCRETE);
    if (!t)
        return (void)ir_errorf(TJ_ERR_OOM, "alloc: out of memory"), NULL;
    set_shape(t, dtype, rank, dims);
    return t;
}

static tj_tensor *tensor_alloc(int dtype, int rank, const int64_t *dims, int zeroed) {
    if (check_shape("alloc", dtype, rank, dims))
        return NULL;
    tj_tensor *t = header_new(RT_CONCRETE);
    if (!t)
        return (void)ir_errorf(TJ_ERR_OOM, "alloc: out of memory"), NULL;
    set_shape(t, dtype, rank, dims);
    t->buf = buffer_new((size_t)t->numel * ir_dtype_size(dtype), zeroed || dtype == TJ_STRING);
    if (!t->buf) {
        ir_errorf(TJ_ERR_OOM, "alloc: out of memory for %lld elements", (long long)t->numel);
        free(t);
        return NULL;
    }
    if (dtype == TJ_STRING)
        t->buf->n_strings = t->numel;
    t->data = t->buf->data;
    return t;
}

tj_tensor *rt_tensor_alloc(int dtype, int rank, const int64_t *dims) {
    return tensor_alloc(dtype, rank, dims, 1);
}

/* Debug builds (the sanitizer tests) fill the buffer with 0xff bytes (NaN, -1) so that an
 * element a kernel forgets to write shows up in the results instead of hiding as a zero. */
tj_tensor *rt_tensor_alloc_uninit(int dtype, int rank, const int64_t *dims) {
    tj_tensor *t = tensor_alloc(dtype, rank, dims, 0);
#ifndef NDEBUG
    if (t && dtype != TJ_STRING && t->numel)
        memset(t->data, 0xff, (size_t)t->numel * ir_dtype_size(dtype));
#endif
    return t;
}

char *rt_strdup_len(const char *s, size_t n) {
    char *p = malloc(n + 1);
    if (!p)
        return NULL;
    if (n)
        memcpy(p, s, n);
    p[n] = 0;
    return p;
}

/* ---- errors ---------------------------------------------------------------------------------- */
static tj_tensor *error_new(tj_status code, const char *msg) {
    tj_tensor *t = header_new(RT_ERROR);
    if (!t)
        return NULL;                            /* callers treat NULL as an error too */
    t->code = code < 0 ? code : TJ_ERR_INVALID; /* an error is negative, whatever was asked */
    t->msg = strdup(msg ? msg : "");
    rt_callback_note_error(t->code, t->msg);
    return t;
}

tj_tensor *rt_error_from_status(tj_status code) {
    return error_new(code ? code : ir_last_code(), ir_last_error());
}

tj_tensor *rt_errorf(tj_status code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    ir_verrorf(code, fmt, ap);
    va_end(ap);
    return error_new(code, ir_last_error());
}

tj_tensor *tj_error_new(tj_status code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    ir_verrorf(code, fmt, ap);
    va_end(ap);
    return rt_scoped(error_new(code, ir_last_error()));
}

tj_status tj_status_of(const tj_tensor *t) {
    if (!t)
        return TJ_ERR_INVALID;
    if (rt_is_freed(t, "status_of"))
        return TJ_ERR_STATE;
    return t->kind == RT_ERROR ? t->code : TJ_OK;
}

const char *tj_error_message(const tj_tensor *t) {
    if (!t)
        return "NULL tensor";
    return t->kind == RT_ERROR ? t->msg : "";
}

tj_status tj_set_error(tj_status code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    ir_verrorf(code, fmt, ap);
    va_end(ap);
    return code;
}

const char *tj_last_error(void) {
    return ir_last_error();
}

const char *tj_status_name(tj_status s) {
    switch (s) {
    case TJ_OK:
        return "TJ_OK";
    case TJ_ERR_INVALID:
        return "TJ_ERR_INVALID";
    case TJ_ERR_DTYPE:
        return "TJ_ERR_DTYPE";
    case TJ_ERR_SHAPE:
        return "TJ_ERR_SHAPE";
    case TJ_ERR_OOM:
        return "TJ_ERR_OOM";
    case TJ_ERR_STATE:
        return "TJ_ERR_STATE";
    case TJ_ERR_SIGNATURE:
        return "TJ_ERR_SIGNATURE";
    case TJ_ERR_RUNTIME:
        return "TJ_ERR_RUNTIME";
    case TJ_ERR_IO:
        return "TJ_ERR_IO";
    case TJ_ERR_UNSUPPORTED:
        return "TJ_ERR_UNSUPPORTED";
    case TJ_ERR_CORRUPT:
        return "TJ_ERR_CORRUPT";
    default:
        return "TJ_ERR_UNKNOWN";
    }
}

/* ---- constructors ---------------------------------------------------------------------------- */
static tj_tensor *from_data(tj_dtype dt, int rank, const int64_t *dims, const void *data) {
    if (check_shape("tensor_from_data", dt, rank, dims))
        return rt_error_from_status(0);
    tj_tensor *t = rt_tensor_alloc(dt, rank, dims);
    if (!t)
        return rt_error_from_status(0);
    if (t->numel && !data) {
        long long n = (long long)t->numel;
        rt_release(t);
        return rt_errorf(TJ_ERR_INVALID, "tensor_from_data: data is NULL for %lld elements", n);
    }
    if (dt == TJ_STRING) {
        const char *const *src = data;
        tj_string *dst = t->data;
        for (int64_t i = 0; i < t->numel; i++) {
            const char *s = src[i] ? src[i] : "";
            dst[i].len = strlen(s);
            dst[i].data = rt_strdup_len(s, dst[i].len);
        }
    } else if (t->numel) {
        memcpy(t->data, data, (size_t)t->numel * ir_dtype_size(dt));
    }
    return t;
}

tj_tensor *tj_tensor_from_data(tj_dtype dt, int rank, const int64_t *dims, const void *data) {
    return rt_scoped(from_data(dt, rank, dims, data));
}

tj_tensor *tj_tensor_empty(tj_dtype dt, int rank, const int64_t *dims) {
    if (check_shape("tensor_empty", dt, rank, dims))
        return rt_scoped(rt_error_from_status(0));
    tj_tensor *t = rt_tensor_alloc(dt, rank, dims);
    if (t && dt == TJ_STRING)
        for (int64_t i = 0; i < t->numel; i++)
            ((tj_string *)t->data)[i].data = rt_strdup_len("", 0);
    return rt_scoped(t ? t : rt_error_from_status(0));
}

static void borrow_noop(void *user) {
    (void)user;
}

/* A tensor over memory it does not own: release(user) when its last reference goes. */
static tj_tensor *wrap(int dt, int rank, const int64_t *dims, void *data,
                       void (*release)(void *user), void *user) {
    tj_tensor *t = header_new(RT_CONCRETE);
    rt_buffer *b = calloc(1, sizeof *b);
    if (!t || !b) {
        free(t);
        free(b);
        return NULL;
    }
    set_shape(t, dt, rank, dims);
    atomic_init(&b->rc, 1);
    b->data = data;
    b->size = (size_t)t->numel * ir_dtype_size(dt);
    b->release = release; /* never free memory we do not own */
    b->user = user;
    t->buf = b;
    t->data = data;
    return t;
}

tj_tensor *tj_tensor_borrow(tj_dtype dt, int rank, const int64_t *dims, void *data,
                            void (*release)(void *user), void *user) {
    if (check_shape("tensor_borrow", dt, rank, dims))
        return rt_scoped(rt_error_from_status(0));
    if (!data)
        return rt_scoped(rt_errorf(TJ_ERR_INVALID, "tensor_borrow: data is NULL"));
    size_t align = dt == TJ_STRING ? _Alignof(tj_string) : ir_dtype_size(dt);
    if ((uintptr_t)data % align)
        return rt_scoped(rt_errorf(TJ_ERR_INVALID,
                                   "tensor_borrow: data %p is not aligned to %zu bytes for %s",
                                   data, align, ir_dtype_name(dt)));
    tj_tensor *t = wrap(dt, rank, dims, data, release ? release : borrow_noop, user);
    return rt_scoped(t ? t : rt_errorf(TJ_ERR_OOM, "tensor_borrow: out of memory"));
}

tj_tensor *tj_tensor_adopt(tj_dtype dt, int rank, const int64_t *dims, const void *data,
                           void (*release)(void *user), void *user) {
    if (dt == TJ_STRING)
        return rt_scoped(rt_errorf(TJ_ERR_UNSUPPORTED,
                                   "tensor_adopt: string tensors own their elements: use "
                                   "tj_tensor_from_data"));
    tj_tensor *t = tj_tensor_borrow(dt, rank, dims, (void *)data, release, user);
    if (t && t->kind == RT_CONCRETE)
        t->buf->immutable = 1;
    return t;
}

tj_tensor *rt_tensor_wrap(int dtype, int rank, const int64_t *dims, void *data,
                          void (*release)(void *ctx), void *ctx) {
    tj_tensor *t = wrap(dtype, rank, dims, data, release, ctx);
    if (!t)
        ir_errorf(TJ_ERR_OOM, "tensor: out of memory");
    else
        t->buf->immutable = 1;
    return t;
}

static tj_tensor *scalar(tj_dtype dt, const void *v, int is_static) {
    tj_tensor *t = from_data(dt, 0, NULL, v);
    if (t && t->kind == RT_CONCRETE) {
        t->is_static = (uint8_t)is_static;
        t->host_scalar = 1;
    }
    return rt_scoped(t);
}

tj_tensor *tj_scalar_f32(float v) {
    return scalar(TJ_F32, &v, 0);
}
tj_tensor *tj_scalar_f64(double v) {
    return scalar(TJ_F64, &v, 0);
}
tj_tensor *tj_scalar_i32(int32_t v) {
    return scalar(TJ_I32, &v, 0);
}
tj_tensor *tj_scalar_i64(int64_t v) {
    return scalar(TJ_I64, &v, 0);
}
tj_tensor *tj_scalar_bool(int v) {
    uint8_t b = v != 0;
    return scalar(TJ_BOOL, &b, 0);
}
tj_tensor *tj_scalar_str(const char *s) {
    if (!s)
        return rt_scoped(rt_errorf(TJ_ERR_INVALID, "scalar_str: the string is NULL"));
    return scalar(TJ_STRING, &s, 0);
}
tj_tensor *tj_static_i64(int64_t v) {
    return scalar(TJ_I64, &v, 1);
}
tj_tensor *tj_static_f64(double v) {
    return scalar(TJ_F64, &v, 1);
}
tj_tensor *tj_static_bool(int v) {
    uint8_t b = v != 0;
    return scalar(TJ_BOOL, &b, 1);
}
tj_tensor *tj_static_str(const char *s) {
    if (!s)
        return rt_scoped(rt_errorf(TJ_ERR_INVALID, "static_str: the string is NULL"));
    return scalar(TJ_STRING, &s, 1);
}
int tj_is_static(const tj_tensor *t) {
    return t && t->kind == RT_CONCRETE && t->is_static;
}

tj_tensor *rt_tuple_new(int n, tj_tensor *const *items) {
    if (n < 0 || (n > 0 && !items))
        return rt_errorf(TJ_ERR_INVALID, "tuple: bad item list");
    for (int i = 0; i < n; i++)
        if (!items[i])
            return rt_errorf(TJ_ERR_INVALID, "tuple: item %d is NULL", i);
    tj_tensor *t = header_new(RT_TUPLE);
    if (!t)
        return rt_errorf(TJ_ERR_OOM, "tuple: out of memory");
    t->items = n ? calloc((size_t)n, sizeof *t->items) : NULL;
    if (n && !t->items) {
        free(t);
        return rt_errorf(TJ_ERR_OOM, "tuple: out of memory");
    }
    t->n_items = n;
    for (int i = 0; i < n; i++)
        t->items[i] = rt_retain(items[i]);
    return t;
}

tj_tensor *tj_tuple(int n, tj_tensor *const *items) {
    return rt_scoped(rt_tuple_new(n, items));
}

int tj_tuple_size(const tj_tensor *t) {
    return t && t->kind == RT_TUPLE ? t->n_items : -1;
}
tj_tensor *tj_tuple_get(const tj_tensor *t, int i) {
    if (t && t->kind == RT_ERROR) /* sticky: the error, not NULL (a result of "nothing") */
        return (tj_tensor *)t;
    return t && t->kind == RT_TUPLE && i >= 0 && i < t->n_items ? t->items[i] : NULL;
}

/* ---- accessors ------------------------------------------------------------------------------- */
tj_dtype tj_tensor_dtype(const tj_tensor *t) {
    return t ? (tj_dtype)t->dtype : TJ_F32;
}
int tj_tensor_rank(const tj_tensor *t) {
    return t ? t->rank : -1;
}
const int64_t *tj_tensor_dims(const tj_tensor *t) {
    return t ? t->dims : NULL;
}
int64_t tj_tensor_numel(const tj_tensor *t) {
    return t ? t->numel : -1;
}
const void *tj_tensor_data(const tj_tensor *t) {
    if (t && t->kind == RT_SYMBOLIC)
        rt_refuse_host_read(t, "tensor_data");
    if (t && t->kind == RT_CONCRETE && t->on_device) /* its pointer is the device's */
        return (void)ir_errorf(TJ_ERR_INVALID,
                               "tensor_data: the tensor is on %s, not in host memory: "
                               "tj_to_device(t, \"cpu\") first",
                               rt_buffer_device(t->buf)->name),
               NULL;
    return t && t->kind == RT_CONCRETE ? t->data : NULL;
}
int tj_tensor_is_symbolic(const tj_tensor *t) {
    return t && t->kind == RT_SYMBOLIC;
}

double tj_tensor_get_f64(const tj_tensor *t, int64_t i) {
    if (t && t->kind == RT_SYMBOLIC)
        rt_refuse_host_read(t, "tensor_get_f64");
    if (!t || t->kind != RT_CONCRETE || i < 0 || i >= t->numel)
        return __builtin_nan("");
    if (t->on_device && t->dtype != TJ_STRING) { /* the one element, copied to the host */
        rt_device *d = rt_buffer_device(t->buf);
        size_t es = ir_dtype_size(t->dtype);
        _Alignas(16) unsigned char tmp[16];
        if (es > sizeof tmp ||
            d->vt->copy_out(d, tmp, (const char *)t->data + es * (size_t)i, es) || d->vt->sync(d))
            return __builtin_nan("");
        tj_tensor h;
        rt_header_copy(&h, t);
        h.data = tmp, h.numel = 1, h.on_device = 0, h.buf = NULL;
        return tj_tensor_get_f64(&h, 0);
    }
    switch (t->dtype) {
    case TJ_F32:
        return ((const float *)t->data)[i];
    case TJ_F64:
        return ((const double *)t->data)[i];
    case TJ_I32:
        return ((const int32_t *)t->data)[i];
    case TJ_I64:
        return (double)((const int64_t *)t->data)[i];
    case TJ_BOOL:
        return ((const uint8_t *)t->data)[i];
    case TJ_F16:
    case TJ_BF16:
        return ir_half_to_f64(t->dtype, ((const uint16_t *)t->data)[i]);
    default:
        if (t->dtype == TJ_U64)
            return (double)(uint64_t)rt_int_load(t, i);
        return ir_dtype_is_int(t->dtype) ? (double)rt_int_load(t, i) : __builtin_nan("");
    }
}

void rt_desc(const tj_tensor *t, ir_node *desc) {
    memset(desc, 0, sizeof *desc);
    desc->op = IR_OP_PARAM;
    desc->dtype = t->dtype;
    desc->rank = t->rank;
    memcpy(desc->dims, t->dims, sizeof desc->dims);
}

const char *tj_dtype_name(tj_dtype dt) {
    return ir_dtype_name(dt);
}
size_t tj_dtype_size(tj_dtype dt) {
    return ir_dtype_size(dt);
}
const char *tj_version(void) {
    return "0.1.0";
}

tj_tensor *rt_tensor_clone(const tj_tensor *t) {
    if (!t || t->kind != RT_CONCRETE)
        return (void)ir_errorf(TJ_ERR_INVALID, "clone: not a concrete tensor"), NULL;
    tj_tensor *c = rt_tensor_alloc_uninit(t->dtype, t->rank, t->dims);
    if (!c)
        return NULL;
    if (t->dtype == TJ_STRING) {
        const tj_string *s = t->data;
        tj_string *d = c->data;
        for (int64_t i = 0; i < t->numel; i++)
            if ((d[i].data = rt_strdup_len(s[i].data ? s[i].data : "", s[i].len)))
                d[i].len = s[i].len;
    } else if (t->numel) {
        memcpy(c->data, t->data, (size_t)t->numel * ir_dtype_size(t->dtype));
    }
    c->is_static = t->is_static;
    c->host_scalar = t->host_scalar;
    return c;
}

tj_tensor *rt_tensor_plain(tj_tensor *t) {
    if (!t || t->kind != RT_CONCRETE || (!t->host_scalar && !t->is_static))
        return rt_retain(t);
    return rt_tensor_alias(t);
}

tj_tensor *rt_tensor_alias(tj_tensor *t) {
    return t && t->kind == RT_CONCRETE ? rt_tensor_view(t, t->rank, t->dims) : rt_retain(t);
}

tj_tensor *rt_tensor_view(tj_tensor *t, int rank, const int64_t *dims) {
    tj_tensor *a = header_new(RT_CONCRETE);
    if (!a)
        return (void)ir_errorf(TJ_ERR_OOM, "out of memory"), NULL;
    set_shape(a, t->dtype, rank, dims);
    a->buf = t->buf;
    a->on_device = t->on_device;
    atomic_fetch_add(&t->buf->rc, 1);
    a->data = t->data;
    return a;
}

tj_status rt_check_output(const tj_tensor *t, const char *what, int k) {
    if (!t)
        return ir_errorf(TJ_ERR_INVALID, "%s: output %d is NULL", what, k);
    if (t->kind == RT_SYMBOLIC)
        return ir_errorf(TJ_ERR_STATE,
                         "%s: output %d is a symbolic tensor (of a trace), not a concrete tensor "
                         "that can receive values",
                         what, k);
    if (t->kind != RT_CONCRETE)
        return ir_errorf(TJ_ERR_INVALID, "%s: output %d is %s, not a concrete tensor", what, k,
                         t->kind == RT_ERROR ? "an error tensor" : "a tuple");
    if (t->is_static)
        return ir_errorf(TJ_ERR_INVALID,
                         "%s: output %d is a static value (tj_static_*), which is immutable", what,
                         k);
    if (t->buf && t->buf->immutable)
        return ir_errorf(TJ_ERR_INVALID,
                         "%s: output %d holds immutable data (tj_tensor_adopt, or a graph's "
                         "constant), which is never written",
                         what, k);
    if (t->buf && atomic_load(&t->buf->rc) > 1)
        return ir_errorf(TJ_ERR_INVALID,
                         "%s: output %d shares its memory with another tensor (a view of it), "
                         "which writing it would change too",
                         what, k);
    return TJ_OK;
}

tj_status rt_copy_into(tj_tensor *dst, const tj_tensor *src) {
    char a[128], b[128];
    if (!dst || dst->kind != RT_CONCRETE)
        return ir_errorf(TJ_ERR_INVALID, "output is not a concrete tensor");
    if (dst->dtype != src->dtype || dst->rank != src->rank ||
        memcmp(dst->dims, src->dims, src->rank * sizeof(int64_t)) != 0)
        return ir_errorf(TJ_ERR_SIGNATURE, "output is %s%s but the result is %s%s",
                         ir_dtype_name(dst->dtype), ir_fmt_dims(a, sizeof a, dst->rank, dst->dims),
                         ir_dtype_name(src->dtype), ir_fmt_dims(b, sizeof b, src->rank, src->dims));
    if (src->dtype == TJ_STRING)
        return ir_errorf(TJ_ERR_UNSUPPORTED, "cannot write a string result into a tensor");
    size_t size = (size_t)src->numel * ir_dtype_size(src->dtype);
    if (!rt_on_host(dst) || !rt_on_host(src)) { /* a device's memory: through its copies */
        rt_device *dd = rt_buffer_device(dst->buf), *sd = rt_buffer_device(src->buf);
        if (dd == sd)
            return dst->data == src->data ? TJ_OK : dd->vt->copy(dd, dst->data, src->data, size);
        if (dd->host)
            return sd->vt->copy_out(sd, dst->data, src->data, size) ?: sd->vt->sync(sd);
        if (sd->host)
            return dd->vt->copy_in(dd, dst->data, src->data, size);
        tj_tensor *h = rt_tensor_to_device(src, rt_device_host()); /* two devices */
        tj_status st = h ? dd->vt->copy_in(dd, dst->data, h->data, size) : ir_last_code();
        rt_release(h);
        return st;
    }
    if (dst->data != src->data)
        memcpy(dst->data, src->data, size);
    return TJ_OK;
}
