/* format.c — text forms of tensors: NumPy/TensorFlow-style values ("[4 1]", "2.2", "True"),
 * the full repr `tj.Tensor(2, shape=(), dtype=int32)`, and the symbolic
 * `Tensor("a:0", shape=(), dtype=int32)` that a trace prints. Floats use the shortest text that
 * round-trips; tensors over 1000 elements are summarised with "..." as tf.print does. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/device.h"
#include "runtime/runtime.h"

typedef struct sbuf {
    char *p;
    size_t n, cap;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (k < 0)
        return;
    if (b->n + (size_t)k + 1 > b->cap) {
        size_t cap = (b->cap ? b->cap * 2 : 128) + (size_t)k;
        char *p = realloc(b->p, cap);
        if (!p)
            return;
        b->p = p;
        b->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(b->p + b->n, b->cap - b->n, fmt, ap);
    va_end(ap);
    b->n += (size_t)k;
}

static void fmt_float(sbuf *b, double v, int is_f32) {
    if (v != v)
        return sb_printf(b, "nan");
    if (v == __builtin_inf())
        return sb_printf(b, "inf");
    if (v == -__builtin_inf())
        return sb_printf(b, "-inf");
    char tmp[64];
    int prec = 1;
    for (; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, v);
        double back = strtod(tmp, NULL);
        if (is_f32 ? (float)back == (float)v : back == v)
            break;
    }
    /* the shortest digits that round-trip, positional where the magnitude allows (as tf.print and
     * NumPy: 10, 0.5, 1234), an exponent only outside [1e-4, 1e16): 1e+20, 1e-07 */
    int exp10 = v == 0 ? 0 : atoi(strchr(tmp, 'e') + 1);
    if (exp10 >= -4 && exp10 < 16)
        snprintf(tmp, sizeof tmp, "%.*f", prec - 1 - exp10 > 0 ? prec - 1 - exp10 : 0, v);
    sb_printf(b, "%s", tmp);
}

static void fmt_elem(sbuf *b, const tj_tensor *t, int64_t i, int quote) {
    switch (t->dtype) {
    case TJ_F32:
        fmt_float(b, ((const float *)t->data)[i], 1);
        break;
    case TJ_F64:
        fmt_float(b, ((const double *)t->data)[i], 0);
        break;
    case TJ_I32:
        sb_printf(b, "%d", ((const int32_t *)t->data)[i]);
        break;
    case TJ_I64:
        sb_printf(b, "%lld", (long long)((const int64_t *)t->data)[i]);
        break;
    case TJ_BOOL:
        sb_printf(b, "%s", ((const uint8_t *)t->data)[i] ? "True" : "False");
        break;
    case TJ_STRING: {
        const tj_string *s = &((const tj_string *)t->data)[i];
        sb_printf(b, quote ? "b'%s'" : "%s", s->data ? s->data : "");
        break;
    }
    case TJ_F16:
    case TJ_BF16:
        fmt_float(b, ir_half_to_f64(t->dtype, ((const uint16_t *)t->data)[i]), 1);
        break;
    default:
        if (ir_dtype_is_unsigned(t->dtype))
            sb_printf(b, "%llu", (unsigned long long)rt_int_load(t, i));
        else if (ir_dtype_is_int(t->dtype))
            sb_printf(b, "%lld", (long long)rt_int_load(t, i));
        else
            sb_printf(b, "?");
    }
}

static void fmt_rec(sbuf *b, const tj_tensor *t, int axis, int64_t off, int quote, int summarize) {
    if (axis == t->rank)
        return fmt_elem(b, t, off, quote);
    int64_t stride = 1;
    for (int k = axis + 1; k < t->rank; k++)
        stride *= t->dims[k];
    int64_t n = t->dims[axis];
    sb_printf(b, "[");
    for (int64_t i = 0; i < n; i++) {
        if (summarize && n > 6 && i == 3) {
            sb_printf(b, "... ");
            i = n - 4;
            continue;
        }
        fmt_rec(b, t, axis + 1, off + i * stride, quote, summarize);
        if (i + 1 < n)
            sb_printf(b, " ");
    }
    sb_printf(b, "]");
}

static void fmt_values(sbuf *b, const tj_tensor *t, int quote) {
    fmt_rec(b, t, 0, 0, quote, t->numel > 1000);
}

static void fmt_shape(sbuf *b, const tj_tensor *t) {
    sb_printf(b, "(");
    for (int i = 0; i < t->rank; i++) {
        if (t->dims[i] < 0)
            sb_printf(b, "None");
        else
            sb_printf(b, "%lld", (long long)t->dims[i]);
        if (i + 1 < t->rank || t->rank == 1)
            sb_printf(b, t->rank == 1 ? "," : ", ");
    }
    sb_printf(b, ")");
}

static char *finish(sbuf *b) {
    if (!b->p)
        return strdup("");
    return b->p;
}

/* t's values where the host can read them: t, or (t on a device) a host copy in *copy (release
 * it after); NULL with the error set when the copy fails. */
static const tj_tensor *host_values(const tj_tensor *t, tj_tensor **copy) {
    *copy = NULL;
    if (!t->on_device)
        return t;
    return *copy = rt_tensor_to_device(t, NULL);
}

char *rt_values_str(const tj_tensor *t) {
    sbuf b = {0};
    tj_tensor *copy = NULL;
    const tj_tensor *v = NULL;
    if (!t)
        sb_printf(&b, "NULL");
    else if (t->kind == RT_CONCRETE && !(v = host_values(t, &copy)))
        sb_printf(&b, "<on %s: %s>", rt_buffer_device(t->buf)->name, ir_last_error());
    else if (t->kind == RT_CONCRETE)
        fmt_values(&b, v, 0);
    else if (t->kind == RT_ERROR)
        sb_printf(&b, "Error(%s: %s)", tj_status_name(t->code), t->msg);
    else if (t->kind == RT_TUPLE) {
        sb_printf(&b, "(");
        for (int i = 0; i < t->n_items; i++) {
            char *s = rt_values_str(t->items[i]);
            sb_printf(&b, "%s%s", i ? ", " : "", s);
            free(s);
        }
        sb_printf(&b, ")");
    } else
        sb_printf(&b, "<symbolic>");
    rt_release(copy);
    return finish(&b);
}

char *tj_tensor_values_str(const tj_tensor *t) {
    if (t && t->kind == RT_SYMBOLIC) {
        rt_refuse_host_read(t, "tensor_values_str");
        return strdup("<symbolic>");
    }
    return rt_values_str(t);
}

static const rt_symbolic_ops *symbolic_ops;

void rt_set_symbolic_ops(const rt_symbolic_ops *ops) {
    symbolic_ops = ops;
}

static void symbolic_name(sbuf *b, const tj_tensor *t) {
    char name[160] = "?:0";
    if (symbolic_ops)
        symbolic_ops->name(t, name, sizeof name);
    sb_printf(b, "%s", name);
}

void rt_refuse_host_read(const tj_tensor *t, const char *what) {
    sbuf b = {0};
    symbolic_name(&b, t);
    ir_errorf(TJ_ERR_STATE,
              "%s: the value of symbolic tensor '%s' is not known while tracing: host code (an "
              "if or while on a tensor's value) runs once, at trace time; decide on values "
              "inside the graph with tj_where",
              what, b.p ? b.p : "?");
    free(b.p);
    if (symbolic_ops)
        symbolic_ops->refused(t);
}

char *tj_tensor_str(const tj_tensor *t) {
    sbuf b = {0};
    if (!t) {
        sb_printf(&b, "NULL");
    } else if (t->kind == RT_CONCRETE) {
        tj_tensor *copy = NULL;
        const tj_tensor *v = host_values(t, &copy);
        sb_printf(&b, "tj.Tensor(");
        if (v)
            fmt_values(&b, v, 1);
        else
            sb_printf(&b, "<not copied: %s>", ir_last_error());
        sb_printf(&b, ", shape=");
        fmt_shape(&b, t);
        sb_printf(&b, ", dtype=%s", ir_dtype_name(t->dtype));
        if (t->on_device)
            sb_printf(&b, ", device=%s", rt_buffer_device(t->buf)->name);
        sb_printf(&b, ")");
        rt_release(copy);
    } else if (t->kind == RT_SYMBOLIC) {
        sb_printf(&b, "Tensor(\"");
        symbolic_name(&b, t);
        sb_printf(&b, "\", shape=");
        fmt_shape(&b, t);
        sb_printf(&b, ", dtype=%s)", ir_dtype_name(t->dtype));
    } else {
        free(b.p);
        return rt_values_str(t);
    }
    return finish(&b);
}

void tj_tensor_fprint(FILE *f, const tj_tensor *t) {
    char *s = tj_tensor_str(t);
    fprintf(f ? f : stdout, "%s\n", s ? s : "");
    free(s);
}
