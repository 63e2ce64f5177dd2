/* signature.c — call signatures: per argument a dtype and shape (-1: any dim) or a static
 * value; their hash (the cache key of a call), matching, copying and text forms. The hash is the
 * same whether a signature comes from a call or from tj_function_get_concrete's specs. */
#include <stdlib.h>
#include <string.h>

#include "jit/jit.h"

uint64_t jit_hash_static(const tj_tensor *t, uint64_t h) {
    h = ir_hash_mix(h, t->dtype);
    if (t->dtype == TJ_STRING) {
        const tj_string *s = t->data;
        return ir_hash_mix(h, ir_hash_bytes(s->data, s->len, 7));
    }
    return ir_hash_mix(h, ir_hash_bytes(t->data, ir_dtype_size(t->dtype), 7));
}

/* One argument's contribution to a signature hash: a static value, or dtype, rank and dims. */
static uint64_t hash_arg(uint64_t h, const tj_tensor *value, int dtype, int rank,
                         const int64_t *dims) {
    if (value)
        return jit_hash_static(value, ir_hash_mix(h, 0x5a));
    h = ir_hash_mix(h, (uint64_t)dtype << 8 | (uint64_t)rank);
    for (int d = 0; d < rank; d++)
        h = ir_hash_mix(h, (uint64_t)dims[d]);
    return h;
}

/* The hash of a signature; calls and get_concrete use it alike, so a spec equal to an earlier
 * call's signature finds that call's concrete function. */
uint64_t jit_sig_hash(const jit_argsig *sig, int nargs) {
    uint64_t h = 0x7472616365u + (uint64_t)nargs;
    for (int i = 0; i < nargs; i++)
        h = hash_arg(h, sig[i].is_static ? sig[i].value : NULL, sig[i].dtype, sig[i].rank,
                     sig[i].dims);
    return h;
}

/* The hash of a call's arguments without building their signature (the cache-hit path); equal
 * to jit_sig_hash of jit_signature's result. */
uint64_t jit_args_hash(int nargs, tj_tensor *const *args) {
    uint64_t h = 0x7472616365u + (uint64_t)nargs;
    for (int i = 0; i < nargs; i++) {
        const tj_tensor *t = args[i];
        h = hash_arg(h, t->is_static ? t : NULL, t->dtype, t->rank, t->dims);
    }
    return h;
}

uint64_t jit_signature(int nargs, tj_tensor *const *args, jit_argsig *sig) {
    for (int i = 0; i < nargs; i++) {
        const tj_tensor *t = args[i];
        jit_argsig *s = &sig[i];
        s->is_static = t->is_static;
        s->dtype = t->dtype;
        s->rank = t->rank;
        s->value = t->is_static ? (tj_tensor *)t : NULL;
        memcpy(s->dims, t->dims, sizeof s->dims);
    }
    return jit_sig_hash(sig, nargs);
}

/* "(2, 3)", "(None,)", "()" as TensorFlow prints shapes. */
void jit_tf_shape(char *buf, size_t n, int rank, const int64_t *dims) {
    size_t l = (size_t)snprintf(buf, n, "(");
    for (int d = 0; d < rank && l < n; d++) {
        if (dims[d] < 0)
            l += (size_t)snprintf(buf + l, n - l, "None");
        else
            l += (size_t)snprintf(buf + l, n - l, "%lld", (long long)dims[d]);
        if (l < n && (d + 1 < rank || rank == 1))
            l += (size_t)snprintf(buf + l, n - l, rank == 1 ? "," : ", ");
    }
    if (l < n)
        snprintf(buf + l, n - l, ")");
}

static int static_equal(const tj_tensor *a, const tj_tensor *b) {
    if (a->dtype != b->dtype)
        return 0;
    if (a->dtype == TJ_STRING) {
        const tj_string *x = a->data, *y = b->data;
        return x->len == y->len && memcmp(x->data, y->data, x->len) == 0;
    }
    return memcmp(a->data, b->data, ir_dtype_size(a->dtype)) == 0;
}

/* Does a call's argument match a concrete signature entry (-1 dims match anything)? */
int jit_arg_matches(const jit_argsig *want, const tj_tensor *t) {
    if (want->is_static)
        return t->is_static && static_equal(want->value, t);
    if (t->is_static || want->dtype != t->dtype || want->rank != t->rank)
        return 0;
    for (int d = 0; d < t->rank; d++)
        if (want->dims[d] >= 0 && want->dims[d] != t->dims[d])
            return 0;
    return 1;
}

void jit_argsig_str(const jit_argsig *s, char *buf, size_t n) {
    if (s->is_static) {
        char *v = rt_values_str(s->value);
        snprintf(buf, n, "static %s", v ? v : "?");
        free(v);
        return;
    }
    char d[128];
    jit_tf_shape(d, sizeof d, s->rank, s->dims);
    snprintf(buf, n, "TensorSpec(shape=%s, dtype=%s)", d, ir_dtype_name(s->dtype));
}

void jit_sig_free(jit_argsig *sig, uint32_t n) {
    if (!sig)
        return;
    for (uint32_t i = 0; i < n; i++)
        rt_release(sig[i].value);
    free(sig);
}

tj_status jit_check_spec(const char *what, int i, const tj_spec *sp) {
    char buf[96];
    if ((int)sp->dtype < 0 || sp->dtype >= TJ_N_DTYPES)
        return ir_errorf(TJ_ERR_DTYPE, "%s %d: bad dtype %d", what, i, (int)sp->dtype);
    snprintf(buf, sizeof buf, "%s %d", what, i);
    return ir_check_shape(buf, sp->rank, sp->dims, true);
}

/* A copy of a signature with private copies of its static values (a caller's tensor can change
 * later; the signature must keep the value it was traced with). */
jit_argsig *jit_sig_copy(const jit_argsig *sig, uint32_t n) {
    jit_argsig *c = calloc(n ? n : 1, sizeof *c);
    if (!c)
        return NULL;
    memcpy(c, sig, n * sizeof *c);
    for (uint32_t i = 0; i < n; i++) {
        if (!sig[i].value)
            continue;
        if (!(c[i].value = rt_tensor_clone(sig[i].value))) {
            jit_sig_free(c, i);
            return NULL;
        }
    }
    return c;
}
