/* const.c — CONST payloads: a concrete tensor as a graph blob (what a trace records for a value it
 * captures and the constant folder writes) and back (what every executor reads). Numbers are
 * their raw elements; strings a uint64 length followed by the bytes, per element. */
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime.h"

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
