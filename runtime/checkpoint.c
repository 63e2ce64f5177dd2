/* checkpoint.c — variables saved and restored by name (S29, tf.train.Checkpoint). One file:
 *   "TJCKPT\0\1" | u32 version (1) | u32 count |
 *   count x (u16 name length | name | u8 dtype | u8 rank | rank x i64 dim | u64 bytes | bytes) |
 *   u64 FNV-1a of everything before it
 * little-endian, written to "<path>.tmp.<pid>" and renamed over path (a reader sees the old
 * checkpoint or the new one, never half of one). Restoring reads and checks the whole file —
 * magic, version, every size against the end, the checksum — and matches every variable before
 * it assigns any: a missing name, a dtype or shape that differs, or (unless expect_partial, as
 * TensorFlow's assert_consumed / expect_partial) a saved name no variable takes is an error
 * naming the file and the variable, and nothing is assigned. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/runtime.h"

static const char MAGIC[8] = {'T', 'J', 'C', 'K', 'P', 'T', 0, 1};
enum { VERSION = 1, MAX_FILE = 1 << 30 };

static uint64_t fnv1a(const unsigned char *p, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

typedef struct wbuf {
    unsigned char *p;
    size_t n, cap;
} wbuf;

static int put(wbuf *b, const void *src, size_t n) {
    if (b->n + n > b->cap) {
        size_t cap = (b->cap + n) * 2;
        unsigned char *q = realloc(b->p, cap);
        if (!q)
            return -1;
        b->p = q, b->cap = cap;
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
    return 0;
}

/* The arguments both entry points take: a path, n live variables, outside any trace. */
static tj_status check_args(const char *what, const char *path, int n, tj_variable *const *vars) {
    if (!path || !*path)
        return ir_errorf(TJ_ERR_INVALID, "%s: the path is NULL or empty", what);
    if (n < 0 || (n > 0 && !vars))
        return ir_errorf(TJ_ERR_INVALID, "%s: bad variable list (n=%d)", what, n);
    if (rt_tracing)
        return ir_errorf(TJ_ERR_STATE, "%s: called inside a trace (call it between calls)", what);
    tj_status st = TJ_OK;
    for (int k = 0; k < n && !st; k++)
        st = rt_variable_check(vars[k], what);
    return st;
}

tj_status tj_checkpoint_save(const char *path, int n, tj_variable *const *vars) {
    const char *what = "checkpoint_save";
    tj_status st = check_args(what, path, n, vars);
    if (st)
        return st;
    for (int k = 0; k < n; k++) {
        const char *nm = vars[k]->name;
        if (strlen(nm) > UINT16_MAX) /* every variable has a name (tj_variable_new) */
            return ir_errorf(TJ_ERR_INVALID, "%s: variable %d's name is longer than %d bytes", what,
                             k, UINT16_MAX);
        if (vars[k]->dtype == TJ_STRING)
            return ir_errorf(TJ_ERR_DTYPE,
                             "%s: variable '%s' holds strings, which checkpoints do "
                             "not store",
                             what, nm);
        for (int j = 0; j < k; j++)
            if (strcmp(vars[j]->name, nm) == 0)
                return ir_errorf(TJ_ERR_INVALID, "%s: two variables are named '%s'", what, nm);
    }
    wbuf b = {NULL, 0, 0};
    uint32_t ver = VERSION, cnt = (uint32_t)n;
    int bad = put(&b, MAGIC, 8) || put(&b, &ver, 4) || put(&b, &cnt, 4);
    for (int k = 0; k < n && !bad; k++) {
        tj_tensor *v = rt_variable_get(vars[k]);
        if (!v || v->kind != RT_CONCRETE) { /* a device's copy that could not come back */
            rt_release(v);
            free(b.p);
            return ir_last_code() ? ir_last_code() : TJ_ERR_STATE;
        }
        uint16_t len = (uint16_t)strlen(vars[k]->name);
        uint8_t dt = v->dtype, rank = v->rank;
        uint64_t bytes = (uint64_t)v->numel * ir_dtype_size(v->dtype);
        bad = put(&b, &len, 2) || put(&b, vars[k]->name, len) || put(&b, &dt, 1) ||
              put(&b, &rank, 1) || put(&b, v->dims, 8 * (size_t)rank) || put(&b, &bytes, 8) ||
              (bytes && put(&b, v->data, (size_t)bytes));
        rt_release(v);
    }
    uint64_t h = bad ? 0 : fnv1a(b.p, b.n);
    if (bad || put(&b, &h, 8)) {
        free(b.p);
        return ir_errorf(TJ_ERR_OOM, "%s: out of memory", what);
    }
    char tmp[4200];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp) {
        free(b.p);
        return ir_errorf(TJ_ERR_INVALID, "%s: the path is too long", what);
    }
    FILE *f = fopen(tmp, "wb");
    st = TJ_OK;
    if (!f)
        st = ir_errorf(TJ_ERR_IO, "%s: cannot write %s: %s", what, tmp, strerror(errno));
    else if (fwrite(b.p, 1, b.n, f) != b.n || fflush(f) != 0 || fsync(fileno(f)) != 0)
        st = ir_errorf(TJ_ERR_IO, "%s: writing %s failed: %s", what, tmp, strerror(errno));
    if (f && fclose(f) != 0 && !st)
        st = ir_errorf(TJ_ERR_IO, "%s: writing %s failed: %s", what, tmp, strerror(errno));
    if (!st && rename(tmp, path) != 0)
        st = ir_errorf(TJ_ERR_IO, "%s: cannot rename %s to %s: %s", what, tmp, path,
                       strerror(errno));
    if (st && f)
        unlink(tmp);
    free(b.p);
    return st;
}

/* ---- restoring ------------------------------------------------------------------------------- */
typedef struct entry {
    const char *name; /* not terminated: name_len bytes */
    uint16_t name_len;
    uint8_t dtype, rank;
    int64_t dims[TJ_MAX_RANK];
    const unsigned char *data;
    uint64_t bytes;
    int used;
} entry;

/* Walks the entries of a file whose header was checked (entries point into p): the first
 * field that does not fit, named with its offset. */
static tj_status walk(const char *path, const unsigned char *p, size_t size, entry **out,
                      uint32_t *n_out) {
    const char *what = "checkpoint_restore";
    uint32_t cnt;
    memcpy(&cnt, p + 12, 4);
    size_t end = size - 8, off = 16;
    if (cnt > end / 12)
        return ir_errorf(TJ_ERR_CORRUPT,
                         "%s: %s is truncated or corrupt (at offset 12: %u variables cannot fit in "
                         "%zu bytes)",
                         what, path, cnt, size);
    entry *e = calloc(cnt + 1, sizeof *e);
    if (!e)
        return ir_errorf(TJ_ERR_OOM, "%s: out of memory", what);
    for (uint32_t k = 0; k < cnt; k++) {
        entry *x = &e[k];
        if (end - off < 2)
            goto trunc;
        memcpy(&x->name_len, p + off, 2);
        off += 2;
        if (end - off < (size_t)x->name_len + 2)
            goto trunc;
        x->name = (const char *)p + off;
        off += x->name_len;
        x->dtype = p[off], x->rank = p[off + 1];
        off += 2;
        if (x->dtype >= TJ_N_DTYPES || x->dtype == TJ_STRING || x->rank > TJ_MAX_RANK) {
            tj_status bad = ir_errorf(TJ_ERR_CORRUPT,
                                      "%s: %s: variable %u has a bad dtype %u or rank %u "
                                      "(offset %zu)",
                                      what, path, k, x->dtype, x->rank, off - 2);
            free(e);
            return bad;
        }
        if (end - off < 8 * (size_t)x->rank + 8)
            goto trunc;
        memcpy(x->dims, p + off, 8 * (size_t)x->rank);
        off += 8 * (size_t)x->rank;
        memcpy(&x->bytes, p + off, 8);
        off += 8;
        int64_t numel = 1;
        for (int d = 0; d < x->rank; d++) {
            if (x->dims[d] < 0 || (x->dims[d] && numel > INT64_MAX / 16 / x->dims[d])) {
                free(e);
                return ir_errorf(TJ_ERR_CORRUPT, "%s: %s: variable %u has a bad shape (offset %zu)",
                                 what, path, k, off);
            }
            numel *= x->dims[d];
        }
        if (x->bytes != (uint64_t)numel * ir_dtype_size(x->dtype) || x->bytes > end - off) {
            tj_status bad = ir_errorf(TJ_ERR_CORRUPT,
                                      "%s: %s: variable %u's %llu bytes do not fit its "
                                      "shape or the file (offset %zu)",
                                      what, path, k, (unsigned long long)x->bytes, off);
            free(e);
            return bad;
        }
        x->data = p + off;
        off += (size_t)x->bytes;
    }
    if (off != end) {
        free(e);
        return ir_errorf(TJ_ERR_CORRUPT, "%s: %s has %zu bytes after its last variable", what, path,
                         end - off);
    }
    *out = e;
    *n_out = cnt;
    return TJ_OK;
trunc:
    free(e);
    return ir_errorf(TJ_ERR_CORRUPT, "%s: %s is truncated (at offset %zu)", what, path, off);
}

/* Parses and checks the whole file; entries point into p. Every error names an offset. */
static tj_status parse(const char *path, const unsigned char *p, size_t size, entry **out,
                       uint32_t *n_out) {
    const char *what = "checkpoint_restore";
    if (size < 24)
        return ir_errorf(TJ_ERR_CORRUPT,
                         "%s: %s is truncated (at offset %zu: the header and checksum alone take "
                         "24 bytes)",
                         what, path, size);
    if (memcmp(p, MAGIC, 8) != 0)
        return ir_errorf(TJ_ERR_CORRUPT,
                         "%s: %s is not a tracejit checkpoint (bad magic at offset 0)", what, path);
    uint32_t ver;
    memcpy(&ver, p + 8, 4);
    if (ver != VERSION)
        return ir_errorf(TJ_ERR_CORRUPT,
                         "%s: %s has format version %u (offset 8); this tracejit reads %d", what,
                         path, ver, VERSION);
    uint64_t h;
    memcpy(&h, p + size - 8, 8);
    if (fnv1a(p, size - 8) == h)
        return walk(path, p, size, out, n_out);
    /* say where: a cut file fails the walk at the offset where it ends */
    tj_status why = walk(path, p, size, out, n_out);
    if (why)
        return why;
    free(*out);
    *out = NULL;
    return ir_errorf(TJ_ERR_CORRUPT,
                     "%s: %s is corrupt (checksum mismatch: the checksum at offset %zu does not "
                     "match the %zu bytes before it)",
                     what, path, size - 8, size - 8);
}

tj_status rt_read_file(const char *what, const char *path, size_t max, unsigned char **out,
                       size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return ir_errorf(TJ_ERR_IO, "%s: cannot open %s: %s", what, path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode) || (uint64_t)sb.st_size > max) {
        fclose(f);
        return ir_errorf(TJ_ERR_IO, "%s: %s is not a regular file of at most %zu bytes", what, path,
                         max);
    }
    size_t n = (size_t)sb.st_size;
    unsigned char *p = malloc(n + 1);
    if (!p || fread(p, 1, n, f) != n) {
        fclose(f);
        free(p);
        return p ? ir_errorf(TJ_ERR_IO, "%s: reading %s failed", what, path)
                 : ir_errorf(TJ_ERR_OOM, "%s: out of memory for %zu bytes", what, n);
    }
    fclose(f);
    p[n] = 0; /* text files read as strings */
    *out = p;
    *size = n;
    return TJ_OK;
}

uint64_t rt_fnv1a(const void *p, size_t n) {
    return fnv1a(p, n);
}

tj_status rt_checkpoint_read(const char *path, uint32_t *n, char ***names, tj_tensor ***values) {
    const char *what = "checkpoint_read";
    size_t size;
    unsigned char *p = NULL;
    tj_status st = rt_read_file(what, path, MAX_FILE, &p, &size);
    entry *e = NULL;
    uint32_t cnt = 0;
    if (!st)
        st = parse(path, p, size, &e, &cnt);
    char **nm = st ? NULL : calloc(cnt + 1, sizeof *nm);
    tj_tensor **vs = st ? NULL : calloc(cnt + 1, sizeof *vs);
    if (!st && (!nm || !vs))
        st = ir_errorf(TJ_ERR_OOM, "%s: out of memory", what);
    for (uint32_t k = 0; k < cnt && !st; k++) {
        nm[k] = rt_strdup_len(e[k].name, e[k].name_len);
        vs[k] = rt_tensor_alloc_uninit(e[k].dtype, e[k].rank, e[k].dims);
        if (!nm[k] || !vs[k])
            st = ir_errorf(TJ_ERR_OOM, "%s: out of memory", what);
        else if (e[k].bytes)
            memcpy(vs[k]->data, e[k].data, (size_t)e[k].bytes);
    }
    if (st) {
        for (uint32_t k = 0; nm && vs && k < cnt; k++) {
            free(nm[k]);
            rt_release(vs[k]);
        }
        free(nm);
        free(vs);
    } else {
        *n = cnt, *names = nm, *values = vs;
    }
    free(e);
    free(p);
    return st;
}

tj_status rt_checkpoint_parse(const unsigned char *p, size_t size, uint32_t *n) {
    entry *e = NULL;
    tj_status st = parse("<input>", p, size, &e, n);
    free(e);
    return st;
}

tj_status tj_checkpoint_restore(const char *path, int n, tj_variable *const *vars,
                                int expect_partial) {
    const char *what = "checkpoint_restore";
    tj_status st = check_args(what, path, n, vars);
    if (st)
        return st;
    size_t size;
    unsigned char *p = NULL;
    if ((st = rt_read_file(what, path, MAX_FILE, &p, &size)))
        return st;
    entry *e = NULL;
    uint32_t cnt = 0;
    st = parse(path, p, size, &e, &cnt);
    int *match = st ? NULL : calloc((size_t)n + 1, sizeof *match);
    if (!st && !match)
        st = ir_errorf(TJ_ERR_OOM, "%s: out of memory", what);
    /* match every variable before assigning any */
    for (int k = 0; k < n && !st; k++) {
        const tj_variable *v = vars[k];
        const char *nm = v->name ? v->name : "";
        match[k] = -1;
        for (uint32_t j = 0; j < cnt; j++)
            if (e[j].name_len == strlen(nm) && memcmp(e[j].name, nm, e[j].name_len) == 0)
                match[k] = (int)j;
        if (match[k] < 0) {
            if (!expect_partial)
                st = ir_errorf(TJ_ERR_INVALID,
                               "%s: %s has no variable '%s' (pass expect_partial "
                               "to leave it as it is)",
                               what, path, nm);
            continue;
        }
        entry *x = &e[match[k]];
        x->used = 1;
        if (x->dtype != v->dtype || x->rank != v->rank ||
            memcmp(x->dims, v->dims, 8 * (size_t)x->rank) != 0) {
            char a[128], b[128];
            st =
                ir_errorf(x->dtype != v->dtype ? TJ_ERR_DTYPE : TJ_ERR_SHAPE,
                          "%s: variable '%s' is %s%s but %s holds %s%s", what, nm,
                          ir_dtype_name(v->dtype), ir_fmt_dims(a, sizeof a, v->rank, v->dims), path,
                          ir_dtype_name(x->dtype), ir_fmt_dims(b, sizeof b, x->rank, x->dims));
        }
    }
    for (uint32_t j = 0; j < cnt && !st && !expect_partial; j++)
        if (!e[j].used)
            st = ir_errorf(TJ_ERR_INVALID,
                           "%s: %s holds '%.*s', which none of the %d variables "
                           "given is (pass expect_partial to ignore it)",
                           what, path, (int)e[j].name_len, e[j].name, n);
    for (int k = 0; k < n && !st; k++) {
        if (match[k] < 0)
            continue;
        const entry *x = &e[match[k]];
        tj_scope_begin();
        tj_tensor *t = tj_tensor_from_data((tj_dtype)x->dtype, x->rank, x->dims, x->data);
        if (tj_status_of(t)) {
            st = ir_errorf(tj_status_of(t), "%s: %s", what, tj_error_message(t));
        } else { /* an eager assignment, as one update */
            rt_variable_lock(vars[k]);
            st = rt_variable_set(vars[k], t);
            rt_variable_unlock(vars[k]);
            if (st) {
                char msg[600];
                snprintf(msg, sizeof msg, "%s", ir_last_error());
                st = ir_errorf(st, "%s: %s", what, msg);
            }
        }
        tj_scope_end();
    }
    free(match);
    free(e);
    free(p);
    return st;
}
