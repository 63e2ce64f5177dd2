/* codecache.c — sharing and caching the CPU backend's compiled code. A program's kernels are
 * keyed by a string naming everything that changes the code: its kernels' structural keys
 * (jit_cpu_kernels_hash: extents only where the code depends on them, so a new shape whose
 * kernels are extent-free finds the code another shape compiled), the target (triple, CPU,
 * features, LLVM version), tracejit's version, the code generator's sources (TJ_CODEGEN_ID,
 * cmake/codegen_id.cmake), the codegen options and the format. Kernel symbols are derived from the
 * key, so the same graph gets the same names in every process. Lookup order: the process table (two
 * functions that trace to the same graph share one loaded object), then the disk cache
 * (jit/cache.c), else the caller compiles and registers the result, which is also written to disk,
 * in the payload format of payload.c. */
#include <stdlib.h>
#include <string.h>

#include "jit/cpu/cpu.h"
#include "jit/jit.h"
#include "tj_codegen_id.h"

struct jit_cpu_shared {
    int rc; /* under mu */
    char *key;
    jit_cpu_code *code;
    uint32_t n;
    void **addrs;
    struct jit_cpu_shared *next;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static jit_cpu_shared *table;

void jit_cpu_code_key(ir_hash128 kernels, bool contract, char *key, size_t n) {
    snprintf(key, n, "tjcpu;fmt=4;tj=%s;cg=%s;target=%s;contract=%d;kernels=%016llx%016llx",
             tj_version(), TJ_CODEGEN_ID, jit_cpu_target_id(), contract ? 1 : 0,
             (unsigned long long)kernels.hi, (unsigned long long)kernels.lo);
}

static jit_cpu_shared *table_find(const char *key) {
    for (jit_cpu_shared *s = table; s; s = s->next)
        if (strcmp(s->key, key) == 0)
            return s;
    return NULL;
}

static jit_cpu_shared *take(jit_cpu_shared *s, uint32_t n, void **addrs) {
    s->rc++;
    memcpy(addrs, s->addrs, n * sizeof *addrs);
    return s;
}

static jit_cpu_shared *table_add(const char *key, jit_cpu_code *code, uint32_t n, void **addrs) {
    jit_cpu_shared *s = calloc(1, sizeof *s);
    if (!s || !(s->key = strdup(key)) || !(s->addrs = malloc((n ? n : 1) * sizeof *s->addrs))) {
        if (s)
            free(s->key);
        free(s);
        return NULL;
    }
    s->code = code;
    s->n = n;
    s->rc = 1;
    memcpy(s->addrs, addrs, n * sizeof *addrs);
    s->next = table;
    table = s;
    return s;
}

jit_cpu_shared *jit_cpu_shared_find(const char *key, const char *const *syms, uint32_t n,
                                    void **addrs, int *from) {
    *from = 0;
    pthread_mutex_lock(&mu);
    jit_cpu_shared *s = table_find(key);
    if (s) {
        *from = 1;
        s = take(s, n, addrs);
        pthread_mutex_unlock(&mu);
        return s;
    }
    void *data = NULL;
    size_t size = 0;
    if (jit_cache_get(key, &data, &size) == TJ_OK) {
        size_t off = jit_cpu_payload_parse(data, size, syms, n);
        jit_cpu_code *code =
            off ? jit_cpu_code_load((char *)data + off, size - off, syms, n, addrs) : NULL;
        if (code && (s = table_add(key, code, n, addrs)))
            *from = 2;
        else if (code)
            jit_cpu_code_free(code);
        ir_clear_error(); /* a bad entry is a miss: the caller compiles */
    }
    free(data);
    pthread_mutex_unlock(&mu);
    return s;
}

jit_cpu_shared *jit_cpu_shared_add(const char *key, jit_cpu_code *code, const char *const *syms,
                                   uint32_t n, void **addrs, bool store) {
    pthread_mutex_lock(&mu);
    jit_cpu_shared *s = table_find(key);
    if (s) { /* another thread compiled the same graph meanwhile: use that one */
        jit_cpu_code_free(code);
        s = take(s, n, addrs);
        pthread_mutex_unlock(&mu);
        return s;
    }
    s = table_add(key, code, n, addrs);
    if (!s) {
        pthread_mutex_unlock(&mu);
        jit_cpu_code_free(code);
        ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory");
        return NULL;
    }
    size_t obj_size = 0, size = 0;
    const void *obj = jit_cpu_code_object(code, &obj_size);
    unsigned char *p = obj && store ? jit_cpu_payload_encode(syms, n, obj, obj_size, &size) : NULL;
    if (p) {
        if (jit_cache_put(key, p, size) != TJ_OK) {
            rt_log(RT_LOG_COMPILE, "cpu: could not store the compiled code on disk: %s",
                   ir_last_error());
            ir_clear_error(); /* the disk cache is an optimisation; compiling still succeeded */
        }
        free(p);
    }
    pthread_mutex_unlock(&mu);
    return s;
}

const void *jit_cpu_shared_object(const jit_cpu_shared *s, size_t *size) {
    return jit_cpu_code_object(s->code, size);
}

void jit_cpu_shared_release(jit_cpu_shared *s) {
    if (!s)
        return;
    pthread_mutex_lock(&mu);
    if (--s->rc == 0) {
        for (jit_cpu_shared **pp = &table; *pp; pp = &(*pp)->next)
            if (*pp == s) {
                *pp = s->next;
                break;
            }
        jit_cpu_code_free(s->code);
        free(s->key);
        free(s->addrs);
        free(s);
    }
    pthread_mutex_unlock(&mu);
}
