/* data.c — the IDX format (MNIST and Fashion-MNIST, as Debian's dataset-fashion-mnist ships
 * them: gzip-compressed) and seeded random batch indices. The file is untrusted input: the header
 * is checked field by field, the element count against TJ_MAX_NUMEL, the payload against its
 * length, and every error names the file and the byte offset. zlib reads plain and gzip files
 * alike. */
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "api/api.h"

static tj_tensor *fail(gzFile f, const char *path, tj_status code, const char *fmt, long long off,
                       const char *extra) {
    if (f)
        gzclose(f);
    char msg[256];
    snprintf(msg, sizeof msg, fmt, off, extra ? extra : "");
    return rt_scoped(rt_errorf(code, "idx_load: %s: %s", path, msg));
}

/* Reads exactly n bytes; returns how many were read. */
static size_t read_full(gzFile f, void *buf, size_t n) {
    size_t got = 0;
    while (got < n) {
        unsigned chunk = n - got > (1u << 30) ? (1u << 30) : (unsigned)(n - got);
        int r = gzread(f, (char *)buf + got, chunk);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    return got;
}

tj_tensor *tj_idx_load(const char *path) {
    if (!path)
        return rt_scoped(rt_errorf(TJ_ERR_INVALID, "idx_load: path is NULL"));
    gzFile f = gzopen(path, "rb");
    if (!f)
        return rt_scoped(rt_errorf(TJ_ERR_IO, "idx_load: %s: cannot open", path));
    unsigned char h[4];
    if (read_full(f, h, 4) != 4)
        return fail(f, path, TJ_ERR_CORRUPT, "truncated header at byte %lld%s", 0, NULL);
    if (h[0] || h[1])
        return fail(f, path, TJ_ERR_CORRUPT, "bad magic at byte %lld (expected 0x0000)%s", 0, NULL);
    int type = h[2], rank = h[3], esize, dt;
    switch (type) {
    case 0x08: /* unsigned byte */
    case 0x09: /* signed byte */
        esize = 1, dt = TJ_I32;
        break;
    case 0x0B:
        esize = 2, dt = TJ_I32;
        break;
    case 0x0C:
        esize = 4, dt = TJ_I32;
        break;
    case 0x0D:
        esize = 4, dt = TJ_F32;
        break;
    case 0x0E:
        esize = 8, dt = TJ_F64;
        break;
    default:
        return fail(f, path, TJ_ERR_CORRUPT, "unknown element type at byte %lld%s", 2, NULL);
    }
    if (rank > TJ_MAX_RANK)
        return fail(f, path, TJ_ERR_CORRUPT, "rank at byte %lld exceeds the maximum%s", 3, NULL);
    int64_t dims[TJ_MAX_RANK];
    for (int d = 0; d < rank; d++) {
        unsigned char b[4];
        if (read_full(f, b, 4) != 4)
            return fail(f, path, TJ_ERR_CORRUPT, "truncated dimension at byte %lld%s", 4 + 4LL * d,
                        NULL);
        dims[d] = (int64_t)b[0] << 24 | (int64_t)b[1] << 16 | (int64_t)b[2] << 8 | b[3];
    }
    if (ir_check_shape("idx_load", rank, dims, false)) {
        gzclose(f);
        return rt_scoped(rt_errorf(TJ_ERR_CORRUPT, "idx_load: %s: %s", path, ir_last_error()));
    }
    int64_t n = ir_numel(rank, dims);
    size_t bytes = (size_t)n * (size_t)esize;
    unsigned char *raw = malloc(bytes ? bytes : 1);
    if (!raw) {
        gzclose(f);
        return rt_scoped(
            rt_errorf(TJ_ERR_OOM, "idx_load: %s: out of memory (%zu bytes)", path, bytes));
    }
    long long off = 4 + 4LL * rank;
    size_t got = read_full(f, raw, bytes);
    if (got != bytes) {
        free(raw);
        return fail(f, path, TJ_ERR_CORRUPT, "truncated data at byte %lld%s", off + (long long)got,
                    NULL);
    }
    unsigned char extra;
    if (read_full(f, &extra, 1) == 1) {
        free(raw);
        return fail(f, path, TJ_ERR_CORRUPT, "unexpected bytes after the data at byte %lld%s",
                    off + (long long)bytes, NULL);
    }
    int zerr;
    const char *zmsg = gzerror(f, &zerr);
    if (zerr != Z_OK && zerr != Z_STREAM_END) {
        free(raw);
        return fail(f, path, TJ_ERR_CORRUPT, "bad compressed data near byte %lld (%s)", off, zmsg);
    }
    gzclose(f);
    tj_tensor *t = rt_tensor_alloc_uninit(dt, rank, dims);
    if (!t) {
        free(raw);
        return rt_scoped(rt_error_from_status(0));
    }
    for (int64_t i = 0; i < n; i++) {
        const unsigned char *p = raw + (size_t)i * (size_t)esize;
        uint64_t be = 0;
        for (int k = 0; k < esize; k++)
            be = be << 8 | p[k];
        switch (type) {
        case 0x08:
            ((int32_t *)t->data)[i] = (int32_t)be;
            break;
        case 0x09:
            ((int32_t *)t->data)[i] = (int8_t)be;
            break;
        case 0x0B:
            ((int32_t *)t->data)[i] = (int16_t)be;
            break;
        case 0x0C:
            ((int32_t *)t->data)[i] = (int32_t)(uint32_t)be;
            break;
        case 0x0D: {
            uint32_t u = (uint32_t)be;
            memcpy((float *)t->data + i, &u, 4);
            break;
        }
        default:
            memcpy((double *)t->data + i, &be, 8);
        }
    }
    free(raw);
    return rt_scoped(t);
}

/* splitmix64: the stream of a seed */
static uint64_t next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

tj_tensor *tj_random_indices(int64_t n, int64_t count, uint64_t seed) {
    if (n < 1 || count < 0)
        return rt_scoped(rt_errorf(TJ_ERR_INVALID,
                                   "random_indices: need n >= 1 and count >= 0, got n=%lld "
                                   "count=%lld",
                                   (long long)n, (long long)count));
    int64_t dims[1] = {count};
    if (ir_check_shape("random_indices", 1, dims, false))
        return rt_scoped(rt_error_from_status(0));
    tj_tensor *t = rt_tensor_alloc_uninit(TJ_I64, 1, dims);
    if (!t)
        return rt_scoped(rt_error_from_status(0));
    uint64_t s = seed, range = (uint64_t)n, limit = UINT64_MAX - UINT64_MAX % range;
    for (int64_t i = 0; i < count; i++) {
        uint64_t r;
        do /* rejection: every index equally likely */
            r = next(&s);
        while (r >= limit);
        ((int64_t *)t->data)[i] = (int64_t)(r % range);
    }
    return rt_scoped(t);
}
