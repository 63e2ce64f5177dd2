/* fuzz_cache.c — libFuzzer target for the artifact cache's disk reader: the entry decoder
 * (jit_cache_decode: magic, format, sizes, key, checksum) and the CPU payload parser behind it
 * (jit_cpu_payload_parse: the symbol table in front of the object file). The first input byte
 * picks the mode: even, the rest is a whole entry file as read from disk (checksums make a
 * valid one rare); odd, the rest is a payload, wrapped by jit_cache_encode into a valid entry
 * so the payload parsers see every input (the CPU's, and NVRTC's: jit_nvrtc_parse). Decoded offsets
 * must stay inside the input; a broken invariant aborts. No code is ever loaded. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jit/cpu/cpu.h"
#include "jit/cuda/nvrtc/nvrtc.h"
#include "jit/jit.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const syms[2] = {"tj_0123456789abcdef_k0", "tj_0123456789abcdef_k1"};
static const char key[] = "tjcpu;fmt=2;fuzz";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > (1u << 20))
        return 0;
    size_t n = size - 1;
    void *owned = NULL;
    const uint8_t *file = data + 1;
    if (data[0] & 1) {
        owned = jit_cache_encode(key, data + 1, n, &n);
        if (!owned)
            return 0;
        file = owned;
    }
    /* a private copy of exactly n bytes, so a read past the end is a sanitizer report */
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf) {
        free(owned);
        return 0;
    }
    memcpy(buf, file, n);
    size_t off = 0, psize = 0;
    if (jit_cache_decode(buf, n, key, &off, &psize) == TJ_OK) {
        if (off > n || psize > n - off) {
            fprintf(stderr, "fuzz_cache: payload [%zu, +%zu) outside %zu bytes\n", off, psize, n);
            abort();
        }
        if ((data[0] & 1) && (off + psize != n || memcmp(buf + off, data + 1, psize) != 0)) {
            fprintf(stderr, "fuzz_cache: an encoded entry did not decode to its payload\n");
            abort();
        }
        for (uint32_t k = 0; k <= 2; k++) { /* expecting 0, 1 or 2 symbols */
            size_t obj = jit_cpu_payload_parse(buf + off, psize, syms, k);
            if (obj > psize) {
                fprintf(stderr, "fuzz_cache: object offset %zu past %zu\n", obj, psize);
                abort();
            }
        }
        jit_nvrtc_out o; /* the same bytes as an NVRTC entry for sm_90 */
        if (jit_nvrtc_parse(buf + off, psize, 90, &o) == TJ_OK &&
            (24 + o.ptx_size + o.cubin_size != psize || strlen(o.ptx) != o.ptx_size)) {
            fprintf(stderr, "fuzz_cache: an NVRTC entry of %zu bytes parsed to %zu + %zu\n", psize,
                    o.ptx_size, o.cubin_size);
            abort();
        }
        jit_nvrtc_free(&o);
    } else if (data[0] & 1) {
        fprintf(stderr, "fuzz_cache: an entry made by jit_cache_encode was refused: %s\n",
                ir_last_error());
        abort();
    }
    free(buf);
    free(owned);
    return 0;
}
