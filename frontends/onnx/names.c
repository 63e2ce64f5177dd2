/* names.c — a map from ONNX value names (borrowed strings) to indices: open addressing on an
 * FNV-1a hash, grown at half full. Checking a model, finding the inputs read as values and
 * looking names up while tracing were linear scans per name (quadratic in the model: a chain of
 * 10,000 nodes took 1.6 s to load); with the map each is linear. */
#include "internal.h"

static uint64_t name_hash(const char *s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

bool ox_names_get(const ox_names *t, const char *name, uint32_t *v) {
    if (!t->cap || !name)
        return false;
    for (uint32_t i = (uint32_t)name_hash(name) & (t->cap - 1);; i = (i + 1) & (t->cap - 1)) {
        if (!t->keys[i])
            return false;
        if (!strcmp(t->keys[i], name)) {
            if (v)
                *v = t->vals[i];
            return true;
        }
    }
}

static bool put_slot(const char **keys, uint32_t *vals, uint32_t cap, const char *name,
                     uint32_t v) { /* true when the name is new */
    for (uint32_t i = (uint32_t)name_hash(name) & (cap - 1);; i = (i + 1) & (cap - 1)) {
        if (!keys[i]) {
            keys[i] = name, vals[i] = v;
            return true;
        }
        if (!strcmp(keys[i], name)) {
            vals[i] = v;
            return false;
        }
    }
}

int ox_names_put(ox_names *t, const char *name, uint32_t v) {
    if (!name)
        return -1;
    if ((t->n + 1) * 2 > t->cap) {
        uint32_t cap = t->cap ? 2 * t->cap : 64;
        const char **keys = calloc(cap, sizeof *keys);
        uint32_t *vals = calloc(cap, sizeof *vals);
        if (!keys || !vals || cap < t->cap) {
            free(keys);
            free(vals);
            return -1;
        }
        for (uint32_t i = 0; i < t->cap; i++)
            if (t->keys[i])
                put_slot(keys, vals, cap, t->keys[i], t->vals[i]);
        free(t->keys);
        free(t->vals);
        t->keys = keys, t->vals = vals, t->cap = cap;
    }
    t->n += put_slot(t->keys, t->vals, t->cap, name, v);
    return 0;
}

void ox_names_free(ox_names *t) {
    free(t->keys);
    free(t->vals);
    *t = (ox_names){0};
}
