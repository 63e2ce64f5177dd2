/* payload.c — the CPU backend's disk payload inside an artifact-cache entry:
 *   "TJK1" | u32 n_syms | n_syms x (u16 len, name bytes) | the object file
 * The symbol names must be the ones the loader will look up, so a payload written for another
 * program is refused before any code is loaded. No LLVM here: the fuzzer drives the parser
 * (tests/fuzz/fuzz_cache.c). */
#include <stdlib.h>
#include <string.h>

#include "jit/cpu/cpu.h"

unsigned char *jit_cpu_payload_encode(const char *const *syms, uint32_t n, const void *obj,
                                      size_t obj_size, size_t *size) {
    size_t total = 8 + obj_size;
    for (uint32_t i = 0; i < n; i++) {
        if (strlen(syms[i]) > UINT16_MAX)
            return NULL;
        total += 2 + strlen(syms[i]);
    }
    unsigned char *p = malloc(total);
    if (!p)
        return NULL;
    memcpy(p, "TJK1", 4);
    memcpy(p + 4, &n, 4);
    size_t off = 8;
    for (uint32_t i = 0; i < n; i++) {
        uint16_t len = (uint16_t)strlen(syms[i]);
        memcpy(p + off, &len, 2);
        memcpy(p + off + 2, syms[i], len);
        off += 2 + len;
    }
    memcpy(p + off, obj, obj_size);
    *size = total;
    return p;
}

size_t jit_cpu_payload_parse(const unsigned char *p, size_t size, const char *const *syms,
                             uint32_t n) {
    if (size < 8 || memcmp(p, "TJK1", 4) != 0)
        return 0;
    uint32_t m;
    memcpy(&m, p + 4, 4);
    if (m != n)
        return 0;
    size_t off = 8;
    for (uint32_t i = 0; i < n; i++) {
        uint16_t len;
        if (off + 2 > size)
            return 0;
        memcpy(&len, p + off, 2);
        off += 2;
        if (len > size - off || len != strlen(syms[i]) || memcmp(p + off, syms[i], len) != 0)
            return 0;
        off += len;
    }
    return off < size ? off : 0;
}
