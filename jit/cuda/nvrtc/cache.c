/* cache.c — NVRTC's output cached like the CPU backend's objects (jit/cache.c: memory, then
 * disk), keyed by the source's content hash, the NVRTC version, the architecture and tracejit's
 * version. An entry's payload is "TJN1" | u32 sm | u64 ptx size | u64 cubin size | PTX | cubin;
 * one that does not parse (a damaged or foreign entry) is a miss, compiled again. */
#include <stdlib.h>
#include <string.h>

#include "jit/cuda/nvrtc/nvrtc.h"
#include "jit/jit.h"

void jit_nvrtc_key(const char *source, int sm, char *key, size_t n) {
    size_t len = strlen(source);
    snprintf(key, n, "tjnvrtc;fmt=1;tj=%s;%s;sm=%d;src=%016llx%016llx", tj_version(),
             jit_nvrtc_version(), sm, (unsigned long long)ir_hash_bytes(source, len, 0x6e76),
             (unsigned long long)ir_hash_bytes(source, len, 0x72746321));
}

unsigned char *jit_nvrtc_payload(const jit_nvrtc_out *o, int sm, size_t *size) {
    uint32_t s = (uint32_t)sm;
    uint64_t np = o->ptx_size, nc = o->cubin_size;
    *size = 4 + 4 + 8 + 8 + np + nc;
    unsigned char *p = malloc(*size);
    if (!p)
        return NULL;
    memcpy(p, "TJN1", 4);
    memcpy(p + 4, &s, 4);
    memcpy(p + 8, &np, 8);
    memcpy(p + 16, &nc, 8);
    memcpy(p + 24, o->ptx, np);
    if (nc)
        memcpy(p + 24 + np, o->cubin, nc);
    return p;
}

tj_status jit_nvrtc_parse(const unsigned char *p, size_t size, int sm, jit_nvrtc_out *out) {
    memset(out, 0, sizeof *out);
    uint32_t s;
    uint64_t np, nc;
    if (size < 24 || memcmp(p, "TJN1", 4) != 0)
        return ir_errorf(TJ_ERR_CORRUPT, "nvrtc cache: not an NVRTC entry");
    memcpy(&s, p + 4, 4);
    memcpy(&np, p + 8, 8);
    memcpy(&nc, p + 16, 8);
    if (s != (uint32_t)sm || np > size - 24 || nc != size - 24 - np || np == 0 ||
        memchr(p + 24, 0, np) != NULL)
        return ir_errorf(TJ_ERR_CORRUPT, "nvrtc cache: a damaged entry (%zu bytes)", size);
    if (!(out->ptx = malloc(np + 1)) || (nc && !(out->cubin = malloc(nc)))) {
        jit_nvrtc_free(out);
        return ir_errorf(TJ_ERR_OOM, "nvrtc cache: out of memory");
    }
    memcpy(out->ptx, p + 24, np);
    out->ptx[np] = 0;
    out->ptx_size = np;
    if (nc)
        memcpy(out->cubin, p + 24 + np, nc);
    out->cubin_size = nc;
    return TJ_OK;
}

tj_status jit_nvrtc_compile_cached(const char *source, const char *name, int sm, jit_nvrtc_out *out,
                                   int *from) {
    *from = 0;
    memset(out, 0, sizeof *out);
    const char *why = jit_nvrtc_unavailable();
    if (why) /* the key names NVRTC's version: no NVRTC, no key */
        return ir_errorf(TJ_ERR_UNSUPPORTED, "cuda: %s", why);
    if (!source || !name)
        return ir_errorf(TJ_ERR_INVALID, "nvrtc: the source or its name is NULL");
    char key[256];
    jit_nvrtc_key(source, sm, key, sizeof key);
    void *data = NULL;
    size_t size = 0;
    if (jit_cache_get(key, &data, &size) == TJ_OK) {
        tj_status st = jit_nvrtc_parse(data, size, sm, out);
        free(data);
        if (!st) {
            *from = 1;
            return TJ_OK;
        }
        ir_clear_error(); /* a bad entry is a miss */
    }
    tj_status st = jit_nvrtc_compile(source, name, sm, out);
    if (st)
        return st;
    unsigned char *p = jit_nvrtc_payload(out, sm, &size);
    if (p && jit_cache_put(key, p, size) != TJ_OK)
        ir_clear_error(); /* the cache is an optimisation; the compile succeeded */
    free(p);
    return TJ_OK;
}
