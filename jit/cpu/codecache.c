/* codecache.c — sharing and caching the CPU backend's compiled code, at two grains.
 *
 * Programs. A program's kernels are keyed by a string naming everything that changes the code:
 * its kernels' structural keys (jit_cpu_kernels_hash: extents only where the code depends on
 * them, so a new shape whose kernels are extent-free finds the code another shape compiled), the
 * target (triple, CPU, features, LLVM version), tracejit's version, the code generator's sources
 * (TJ_CODEGEN_ID, cmake/codegen_id.cmake), the codegen options and the format. Lookup order: the
 * process table (two functions that trace to the same graph share their code), then the disk
 * cache (jit/cache.c, in the payload format of payload.c).
 *
 * Kernels. On a program miss, each kernel is looked up by its symbol among the objects loaded in
 * this process (jit_cpu_shared_begin): a kernel's symbol hashes its structural key and the
 * options (plan_decide.c), so an equal kernel of another function, or of another signature of
 * the same function, has the same symbol and its code serves both. Only the kernels not found are
 * compiled (generate.c), into a new object; the program holds a reference on every object its
 * kernels live in (jit_cpu_shared_finish). Its disk entry and saved modules hold those objects as
 * one container (rt_obj_parts), which a new process maps whole. An object lives while a program
 * holds it; its kernels are found while it lives. */
#include <stdlib.h>
#include <string.h>

#include "jit/cpu/cpu.h"
#include "jit/jit.h"
#include "runtime/objload.h"
#include "tj_codegen_id.h"

/* A loaded object and the kernels it exports (found by jit_cpu_shared_begin while it lives). */
typedef struct kobj {
    int rc; /* programs (and drafts) holding it; under mu */
    jit_cpu_code *code;
    uint32_t n, n_parts;
    char **syms;
    uint64_t *h; /* each symbol's hash: compared before the name */
    void **addrs;
    struct kobj *next;
} kobj;

struct jit_cpu_shared {
    int rc;    /* under mu */
    char *key; /* NULL: a draft (jit_cpu_shared_begin), not in the table */
    kobj **objs;
    uint32_t n_objs, n_parts;
    uint32_t n;
    void **addrs; /* the program's kernels, in its symbols' order */
    void *blob;   /* the objects as one container when there are several; else NULL */
    size_t blob_size;
    struct jit_cpu_shared *next;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static jit_cpu_shared *table;
static kobj *objects;

void jit_cpu_code_key(ir_hash128 kernels, bool contract, char *key, size_t n) {
    snprintf(key, n, "tjcpu;fmt=5;tj=%s;cg=%s;target=%s;contract=%d;kernels=%016llx%016llx",
             tj_version(), TJ_CODEGEN_ID, jit_cpu_target_id(), contract ? 1 : 0,
             (unsigned long long)kernels.hi, (unsigned long long)kernels.lo);
}

static uint64_t sym_hash(const char *s) {
    return ir_hash_bytes(s, strlen(s), 0x73796d);
}

/* ---- objects (under mu) ---------------------------------------------------------------------- */
static void kobj_free(kobj *o) {
    if (!o)
        return;
    jit_cpu_code_free(o->code);
    for (uint32_t i = 0; o->syms && i < o->n; i++)
        free(o->syms[i]);
    free(o->syms);
    free(o->h);
    free(o->addrs);
    free(o);
}

/* Registers code (owned from now on, freed on failure) exporting syms at addrs; rc 0. */
static kobj *kobj_new(jit_cpu_code *code, const char *const *syms, uint32_t n, void *const *addrs) {
    kobj *o = calloc(1, sizeof *o);
    if (!o) {
        jit_cpu_code_free(code);
        return NULL;
    }
    o->code = code;
    o->syms = calloc(n + 1, sizeof *o->syms);
    o->h = calloc(n + 1, sizeof *o->h);
    o->addrs = calloc(n + 1, sizeof *o->addrs);
    if (!o->syms || !o->h || !o->addrs) {
        kobj_free(o);
        return NULL;
    }
    o->n = n;
    for (uint32_t i = 0; i < n; i++) {
        if (!(o->syms[i] = strdup(syms[i]))) {
            kobj_free(o);
            return NULL;
        }
        o->h[i] = sym_hash(syms[i]);
        o->addrs[i] = addrs[i];
    }
    size_t size = 0;
    const void *blob = jit_cpu_code_object(code, &size), *part[RT_OBJ_MAX_PARTS];
    size_t len[RT_OBJ_MAX_PARTS];
    o->n_parts = (uint32_t)rt_obj_parts(blob, size, part, len);
    o->next = objects;
    objects = o;
    return o;
}

static void kobj_release(kobj *o) {
    if (--o->rc > 0)
        return;
    for (kobj **pp = &objects; *pp; pp = &(*pp)->next)
        if (*pp == o) {
            *pp = o->next;
            break;
        }
    kobj_free(o);
}

/* The address of kernel sym (hash h) in object o; NULL if o lacks it. */
static void *kobj_sym(const kobj *o, const char *sym, uint64_t h) {
    for (uint32_t i = 0; i < o->n; i++)
        if (o->h[i] == h && strcmp(o->syms[i], sym) == 0)
            return o->addrs[i];
    return NULL;
}

/* The address of kernel sym in a live object, and that object; NULL if none has it. */
static void *kernel_find(const char *sym, kobj **in) {
    uint64_t h = sym_hash(sym);
    for (kobj *o = objects; o; o = o->next) {
        void *a = kobj_sym(o, sym, h);
        if (a) {
            *in = o;
            return a;
        }
    }
    return NULL;
}

/* ---- programs (under mu) --------------------------------------------------------------------- */
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

static void shared_free(jit_cpu_shared *s) {
    for (uint32_t i = 0; i < s->n_objs; i++)
        kobj_release(s->objs[i]);
    free(s->objs);
    free(s->key);
    free(s->addrs);
    free(s->blob);
    free(s);
}

static jit_cpu_shared *draft_new(uint32_t max_objs) {
    jit_cpu_shared *s = calloc(1, sizeof *s);
    if (s && !(s->objs = calloc(max_objs + 1, sizeof *s->objs))) {
        free(s);
        s = NULL;
    }
    if (s)
        s->rc = 1;
    return s;
}

static bool holds(const jit_cpu_shared *s, const kobj *o) {
    for (uint32_t i = 0; i < s->n_objs; i++)
        if (s->objs[i] == o)
            return true;
    return false;
}

static void hold(jit_cpu_shared *s, kobj *o) {
    if (holds(s, o))
        return;
    o->rc++;
    s->objs[s->n_objs++] = o;
    s->n_parts += o->n_parts;
}

/* s's objects as one container (every part of every object: rt_obj_join), into s->blob. */
static tj_status make_blob(jit_cpu_shared *s) {
    const void *part[RT_OBJ_MAX_PARTS];
    size_t len[RT_OBJ_MAX_PARTS];
    uint32_t n = 0;
    for (uint32_t i = 0; i < s->n_objs; i++) {
        size_t size = 0;
        const void *b = jit_cpu_code_object(s->objs[i]->code, &size);
        int k = n + s->objs[i]->n_parts <= RT_OBJ_MAX_PARTS
                    ? rt_obj_parts(b, size, part + n, len + n)
                    : 0;
        if (!k)
            return ir_errorf(TJ_ERR_UNSUPPORTED, "cpu jit: more than %d objects in one program",
                             RT_OBJ_MAX_PARTS);
        n += (uint32_t)k;
    }
    if (!(s->blob = rt_obj_join(part, len, (int)n, &s->blob_size)))
        return ir_last_code();
    return TJ_OK;
}

static void store(const char *key, const char *const *syms, uint32_t n, const void *obj,
                  size_t obj_size) {
    size_t size = 0;
    unsigned char *p = obj ? jit_cpu_payload_encode(syms, n, obj, obj_size, &size) : NULL;
    if (p && jit_cache_put(key, p, size) != TJ_OK) {
        rt_log(RT_LOG_COMPILE, "cpu: could not store the compiled code on disk: %s",
               ir_last_error());
        ir_clear_error(); /* the disk cache is an optimisation; compiling still succeeded */
    }
    free(p);
}

/* ---- the interface (cpu.h) ------------------------------------------------------------------- */
jit_cpu_shared *jit_cpu_shared_find(const char *key, const char *const *syms, uint32_t n,
                                    void **addrs, bool disk, int *from) {
    *from = 0;
    pthread_mutex_lock(&mu);
    jit_cpu_shared *s = table_find(key);
    if (s) {
        *from = 1;
        s = take(s, n, addrs);
        pthread_mutex_unlock(&mu);
        return s;
    }
    pthread_mutex_unlock(&mu);
    if (!disk)
        return NULL;
    void *data = NULL;
    size_t size = 0;
    if (jit_cache_get(key, &data, &size) == TJ_OK) { /* read and linked outside the lock */
        size_t off = jit_cpu_payload_parse(data, size, syms, n);
        jit_cpu_code *code =
            off ? jit_cpu_code_load((char *)data + off, size - off, syms, n, addrs) : NULL;
        if (code && (s = jit_cpu_shared_finish(jit_cpu_shared_begin(NULL, 0, NULL, NULL), key, code,
                                               syms, addrs, n, syms, n, addrs, false)))
            *from = 2;
        ir_clear_error(); /* a bad entry is a miss: the caller compiles */
    }
    free(data);
    return s;
}

jit_cpu_shared *jit_cpu_shared_begin(const char *const *syms, uint32_t n, void **addrs,
                                     uint8_t *found) {
    pthread_mutex_lock(&mu);
    jit_cpu_shared *d = draft_new(n + 1);
    for (uint32_t i = 0; d && i < n; i++) {
        kobj *in = NULL;
        void *a = kernel_find(syms[i], &in);
        /* room is kept in the container for the new object's parts */
        if (a &&
            (holds(d, in) || d->n_parts + in->n_parts + JIT_CPU_MAX_PARTS <= RT_OBJ_MAX_PARTS)) {
            hold(d, in);
            addrs[i] = a;
            found[i] = 1;
        }
    }
    pthread_mutex_unlock(&mu);
    if (!d)
        ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory");
    return d;
}

jit_cpu_shared *jit_cpu_shared_finish(jit_cpu_shared *d, const char *key, jit_cpu_code *code,
                                      const char *const *fresh, void *const *fresh_addrs,
                                      uint32_t n_fresh, const char *const *syms, uint32_t n,
                                      void **addrs, bool to_disk) {
    if (!d) {
        jit_cpu_code_free(code);
        return NULL;
    }
    pthread_mutex_lock(&mu);
    jit_cpu_shared *s = table_find(key);
    if (s) { /* another thread made the same program meanwhile: use that one */
        shared_free(d);
        jit_cpu_code_free(code);
        s = take(s, n, addrs);
        pthread_mutex_unlock(&mu);
        return s;
    }
    tj_status st = TJ_OK;
    kobj *o = code ? kobj_new(code, fresh, n_fresh, fresh_addrs) : NULL;
    if (code && !o)
        st = ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory");
    if (o) {
        o->rc++; /* the draft's now */
        d->objs[d->n_objs++] = o;
        d->n_parts += o->n_parts;
    }
    d->n = n;
    if (!st && (!(d->key = strdup(key)) || !(d->addrs = calloc(n + 1, sizeof *d->addrs))))
        st = ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory");
    for (uint32_t i = 0; i < n && !st; i++) { /* every kernel in one of the program's objects */
        uint64_t h = sym_hash(syms[i]);
        for (uint32_t k = 0; k < d->n_objs && !d->addrs[i]; k++)
            d->addrs[i] = kobj_sym(d->objs[k], syms[i], h);
        if (!d->addrs[i])
            st = ir_errorf(TJ_ERR_RUNTIME, "cpu jit: kernel %s is in none of its objects", syms[i]);
    }
    if (!st && d->n_objs > 1)
        st = make_blob(d);
    if (st) {
        shared_free(d);
        pthread_mutex_unlock(&mu);
        return NULL;
    }
    memcpy(addrs, d->addrs, n * sizeof *addrs);
    d->next = table;
    table = d;
    if (to_disk) {
        size_t size = 0;
        const void *obj = jit_cpu_shared_object(d, &size);
        store(key, syms, n, obj, size);
    }
    pthread_mutex_unlock(&mu);
    return d;
}

jit_cpu_shared *jit_cpu_shared_add(const char *key, jit_cpu_code *code, const char *const *syms,
                                   uint32_t n, void **addrs, bool to_disk) {
    return jit_cpu_shared_finish(jit_cpu_shared_begin(NULL, 0, NULL, NULL), key, code, syms, addrs,
                                 n, syms, n, addrs, to_disk);
}

uint32_t jit_cpu_shared_objects(const jit_cpu_shared *s) {
    return s ? s->n_objs : 0;
}

const void *jit_cpu_shared_object(const jit_cpu_shared *s, size_t *size) {
    if (s->blob) {
        *size = s->blob_size;
        return s->blob;
    }
    return s->n_objs ? jit_cpu_code_object(s->objs[0]->code, size) : (*size = 0, NULL);
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
        shared_free(s);
    }
    pthread_mutex_unlock(&mu);
}
