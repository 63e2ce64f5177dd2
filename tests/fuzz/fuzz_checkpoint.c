/* fuzz_checkpoint.c — libFuzzer target for the checkpoint reader (runtime/checkpoint.c: magic,
 * version, counts, names, dtypes, ranks, dims, sizes against the end of the file, checksum). The
 * first input byte picks the mode: even, the rest is a whole file as read from disk (the
 * checksum makes a valid one rare); odd, the rest gets its FNV-1a checksum appended, so the
 * structure behind the checksum is reached by every input. Nothing is assigned. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > (1u << 20))
        return 0;
    size_t n = size - 1 + (data[0] & 1 ? 8 : 0);
    /* a private copy of exactly n bytes, so a read past the end is a sanitizer report */
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf)
        return 0;
    memcpy(buf, data + 1, size - 1);
    if (data[0] & 1) { /* the checksum tj_checkpoint_save writes */
        uint64_t h = 0xcbf29ce484222325ull;
        for (size_t i = 0; i < size - 1; i++)
            h = (h ^ buf[i]) * 0x100000001b3ull;
        memcpy(buf + size - 1, &h, 8);
    }
    uint32_t count = 0;
    if (rt_checkpoint_parse(buf, n, &count) == TJ_OK && count > n)
        abort(); /* every variable takes bytes */
    ir_clear_error();
    free(buf);
    return 0;
}
