/* backend.c — the backend registry: the backends this build holds, in order of preference, and
 * the choice among them (TJ_BACKEND, tj_function_options.backend). The list comes from CMake
 * (TJ_BACKENDS, written into gen/tj_backends.h as TJ_BACKEND_ENTRY(name) lines), so this file
 * names no backend. */
#include <string.h>

#include "jit/backend.h"
#include "jit/jit.h"

#define TJ_BACKEND_ENTRY(name) extern const jit_backend jit_backend_##name;
#include "tj_backends.h"
#undef TJ_BACKEND_ENTRY

static const jit_backend *const registry[] = {
#define TJ_BACKEND_ENTRY(name) &jit_backend_##name,
#include "tj_backends.h"
#undef TJ_BACKEND_ENTRY
};
enum { N_BACKENDS = sizeof registry / sizeof registry[0] };

uint32_t jit_backend_count(void) {
    return N_BACKENDS;
}

const jit_backend *jit_backend_at(uint32_t i) {
    return i < N_BACKENDS ? registry[i] : NULL;
}

const jit_backend *jit_backend_find(const char *name) {
    for (uint32_t i = 0; name && i < N_BACKENDS; i++)
        if (strcmp(registry[i]->name, name) == 0)
            return registry[i];
    return NULL;
}

const jit_backend *jit_backend_of(const rt_program *p) {
    return p ? jit_backend_find(p->vt->name) : NULL;
}

const jit_backend *jit_backend_interpreter(void) {
    return registry[N_BACKENDS - 1]; /* CMake puts the interpreter last */
}

static bool available(const jit_backend *b) {
    return !b->unavailable || !b->unavailable();
}

void jit_backend_list_available(char *buf, size_t n) {
    size_t at = 0;
    buf[0] = 0;
    for (uint32_t i = 0; i < N_BACKENDS && at < n; i++)
        if (available(registry[i])) {
            int w = snprintf(buf + at, n - at, "%s%s", at ? ", " : "", registry[i]->name);
            at += w > 0 ? (size_t)w : 0;
        }
}

/* The names this build knows, available or not ("cpu, interp"). */
static void list_known(char *buf, size_t n) {
    size_t at = 0;
    buf[0] = 0;
    for (uint32_t i = 0; i < N_BACKENDS && at < n; i++) {
        int w = snprintf(buf + at, n - at, "%s%s", i ? ", " : "", registry[i]->name);
        at += w > 0 ? (size_t)w : 0;
    }
}

tj_status jit_backend_select(const char *spec, const char *what, const jit_backend **out) {
    *out = NULL;
    char avail[256], known[256];
    jit_backend_list_available(avail, sizeof avail);
    if (!spec || !*spec) {
        for (uint32_t i = 0; i < N_BACKENDS && !*out; i++)
            if (available(registry[i]))
                *out = registry[i];
        return TJ_OK; /* the interpreter, last, is always available */
    }
    /* every name must be known, even past the one chosen: a typo is an error, not a fallback */
    const jit_backend *first = NULL, *first_unavailable = NULL;
    const char *p = spec;
    while (*p) {
        size_t len = strcspn(p, ",");
        char name[64];
        if (len == 0 || len >= sizeof name) {
            list_known(known, sizeof known);
            return ir_errorf(TJ_ERR_INVALID,
                             "%s: '%s' is not a backend name or a comma-separated list of them "
                             "(this build has: %s)",
                             what, spec, known);
        }
        memcpy(name, p, len);
        name[len] = 0;
        const jit_backend *b = jit_backend_find(name);
        if (!b) {
            list_known(known, sizeof known);
            return ir_errorf(TJ_ERR_INVALID,
                             "%s: no backend '%s' in this build (it has: %s; available here: %s)",
                             what, name, known, avail);
        }
        if (!first && available(b))
            first = b;
        if (!first_unavailable && !available(b))
            first_unavailable = b;
        p += len;
        if (*p == ',')
            p++;
    }
    if (!first)
        return ir_errorf(TJ_ERR_INVALID,
                         "%s: backend '%s' is not available here: %s (available here: %s; list a "
                         "fallback as \"%s,interp\")",
                         what, first_unavailable->name, first_unavailable->unavailable(), avail,
                         spec);
    *out = first;
    return TJ_OK;
}

/* ---- the public listing ---------------------------------------------------------------------- */
const char *tj_backend_name(int i) {
    return i >= 0 && i < N_BACKENDS ? registry[i]->name : NULL;
}

const char *tj_backend_unavailable(const char *name) {
    const jit_backend *b = jit_backend_find(name);
    if (!b)
        return "this build has no backend of that name (tj_backend_name lists them)";
    return b->unavailable ? b->unavailable() : NULL;
}
