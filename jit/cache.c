/* cache.c — the artifact cache: compiled code (object files) keyed by a full key string that
 * names everything that changes the code (kernel structural hash, signature, backend, target CPU
 * and features, compiler and tracejit versions, codegen options, format version).
 * Two levels: memory (LRU, bounded by bytes) and disk ($TJ_CACHE_DIR, else
 * $XDG_CACHE_HOME/tracejit, else ~/.cache/tracejit). A disk entry is
 *   magic "TJCACHE1" | u32 format | u32 key length | u64 payload size | u64 checksum | key |
 * payload written to a temporary file and renamed, so readers never see half an entry. An entry
 * whose magic, format, key, size or checksum disagrees is deleted and reported as a miss: it is
 * never loaded. The checksum catches accidents, not tampering: the directory is trusted like
 * JAX's cache, so it is used only if this user owns it and nobody else can write it, and an entry
 * only if it is a regular file this user owns that nobody else can write (as ssh treats its
 * keys); anything else is refused (TJ_LOG=cache says why). The disk level is bounded by bytes
 * (TJ_CACHE_MAX_BYTES, default 1 GiB): past the bound the least recently used entries go (a hit
 * refreshes an entry's mtime). TJ_CACHE=0 turns both levels off. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "jit/jit.h"

#define CACHE_MAGIC "TJCACHE1"
#define CACHE_FORMAT 1u
#define MEM_BOUND_DEFAULT ((size_t)256 << 20)

typedef struct entry {
    char *key;
    uint64_t key_hash;
    void *data;
    size_t size;
    uint64_t stamp;
    struct entry *next;
} entry;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static entry *entries;
static size_t mem_bytes, mem_bound = MEM_BOUND_DEFAULT;
static uint64_t clock_stamp;
static jit_cache_stats stats;
static char dir_override[PATH_MAX];
static int enabled_override = -1;
static size_t disk_bound;          /* 0: TJ_CACHE_MAX_BYTES or the default */
static int64_t disk_bytes = -1;    /* estimated bytes of entries on disk; -1: not counted yet */
static char refused_dir[PATH_MAX]; /* the last directory refused, logged once */

#define ENTRY_PATH_MAX (PATH_MAX + 64)
#define MAX_ENTRY_BYTES ((uint64_t)1 << 30)

static uint64_t checksum(const void *key, size_t key_len, const void *data, size_t size) {
    return ir_hash_mix(ir_hash_bytes(key, key_len, 0x6b6579), ir_hash_bytes(data, size, 0x646174));
}

static int cache_enabled(void) {
    return enabled_override >= 0 ? enabled_override : rt_config_get()->cache_enabled;
}

static void refuse_dir(const char *dir, const char *why) {
    if (strcmp(refused_dir, dir) == 0)
        return;
    snprintf(refused_dir, sizeof refused_dir, "%s", dir);
    rt_log(RT_LOG_CACHE, "disk cache off: %s %s", dir, why);
}

/* Whether st describes something this user owns and nobody else may write. */
static int trusted(const struct stat *st) {
    return st->st_uid == geteuid() && (st->st_mode & (S_IWGRP | S_IWOTH)) == 0;
}

/* The cache directory (created on demand, mode 0700); "" if none can be determined or it is not
 * trusted. Under mu. */
static const char *cache_dir(char *buf, size_t n) {
    const char *d = dir_override[0] ? dir_override : rt_config_get()->cache_dir;
    int len;
    if (d && *d) {
        len = snprintf(buf, n, "%s", d);
    } else {
        const char *x = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
        if (x && *x)
            len = snprintf(buf, n, "%s/tracejit", x);
        else if (home && *home)
            len = snprintf(buf, n, "%s/.cache/tracejit", home);
        else
            return "";
    }
    if (len < 0 || (size_t)len >= n || (size_t)len + 40 >= PATH_MAX) { /* never truncated */
        refuse_dir(d && *d ? d : "(default)", "is too long a path");
        return "";
    }
    /* mkdir -p */
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        mkdir(buf, 0700);
        *p = '/';
    }
    mkdir(buf, 0700);
    struct stat st;
    if (stat(buf, &st) != 0 || !S_ISDIR(st.st_mode)) {
        refuse_dir(buf, "is not a directory");
        return "";
    }
    if (!trusted(&st)) {
        refuse_dir(buf, "is owned by another user or writable by others (the cache holds native "
                        "code: it must be trusted)");
        return "";
    }
    return buf;
}

static void entry_path(char *out, size_t n, const char *dir, const char *key) {
    uint64_t a = ir_hash_bytes(key, strlen(key), 1), b = ir_hash_bytes(key, strlen(key), 2);
    snprintf(out, n, "%s/%016llx%016llx.tjc", dir, (unsigned long long)a, (unsigned long long)b);
}

/* ---- memory level ---------------------------------------------------------------------------- */
static void mem_evict_to(size_t bound) {
    while (mem_bytes > bound && entries) {
        entry **oldest = &entries;
        for (entry **e = &entries; *e; e = &(*e)->next)
            if ((*e)->stamp < (*oldest)->stamp)
                oldest = e;
        entry *victim = *oldest;
        *oldest = victim->next;
        mem_bytes -= victim->size;
        free(victim->key);
        free(victim->data);
        free(victim);
    }
}

static void mem_put(const char *key, uint64_t kh, const void *data, size_t size) {
    if (size > mem_bound)
        return;
    for (entry *e = entries; e; e = e->next)
        if (e->key_hash == kh && strcmp(e->key, key) == 0)
            return;
    entry *e = calloc(1, sizeof *e);
    if (!e || !(e->key = strdup(key)) || !(e->data = malloc(size ? size : 1))) {
        if (e)
            free(e->key);
        free(e);
        return;
    }
    memcpy(e->data, data, size);
    e->size = size;
    e->key_hash = kh;
    e->stamp = ++clock_stamp;
    e->next = entries;
    entries = e;
    mem_bytes += size;
    mem_evict_to(mem_bound);
}

/* ---- disk level ------------------------------------------------------------------------------ */
typedef struct header {
    char magic[8];
    uint32_t format;
    uint32_t key_len;
    uint64_t size;
    uint64_t sum;
} header;

static int read_all(int fd, void *p, size_t n) {
    char *c = p;
    while (n) {
        ssize_t k = read(fd, c, n);
        if (k <= 0) {
            if (k < 0 && errno == EINTR)
                continue;
            return -1;
        }
        c += k;
        n -= (size_t)k;
    }
    return 0;
}

static int write_all(int fd, const void *p, size_t n) {
    const char *c = p;
    while (n) {
        ssize_t k = write(fd, c, n);
        if (k <= 0) {
            if (k < 0 && errno == EINTR)
                continue;
            return -1;
        }
        c += k;
        n -= (size_t)k;
    }
    return 0;
}

void *jit_cache_encode(const char *key, const void *payload, size_t size, size_t *n) {
    header h;
    memcpy(h.magic, CACHE_MAGIC, 8);
    h.format = CACHE_FORMAT;
    h.key_len = (uint32_t)strlen(key);
    h.size = size;
    h.sum = checksum(key, h.key_len, payload, size);
    char *file = malloc(sizeof h + h.key_len + size);
    if (!file)
        return NULL;
    memcpy(file, &h, sizeof h);
    memcpy(file + sizeof h, key, h.key_len);
    if (size)
        memcpy(file + sizeof h + h.key_len, payload, size);
    *n = sizeof h + h.key_len + size;
    return file;
}

tj_status jit_cache_decode(const void *file, size_t n, const char *key, size_t *off, size_t *size) {
    header h;
    size_t key_len = strlen(key);
    if (n < sizeof h)
        return ir_errorf(TJ_ERR_CORRUPT, "cache entry: %zu bytes, shorter than its header", n);
    memcpy(&h, file, sizeof h);
    if (memcmp(h.magic, CACHE_MAGIC, 8) != 0 || h.format != CACHE_FORMAT)
        return ir_errorf(TJ_ERR_CORRUPT, "cache entry: bad magic or format %u", h.format);
    if (h.key_len != key_len || n - sizeof h < key_len || n - sizeof h - key_len != h.size)
        return ir_errorf(TJ_ERR_CORRUPT, "cache entry: sizes do not add up (%zu bytes)", n);
    const char *k = (const char *)file + sizeof h, *payload = k + key_len;
    if (memcmp(k, key, key_len) != 0)
        return ir_errorf(TJ_ERR_CORRUPT, "cache entry: written for another key");
    if (checksum(key, key_len, payload, h.size) != h.sum)
        return ir_errorf(TJ_ERR_CORRUPT, "cache entry: checksum mismatch");
    *off = sizeof h + key_len;
    *size = h.size;
    return TJ_OK;
}

/* 1: found (data malloc'd); 0: absent; -1: present but corrupt, foreign or not a regular file
 * (deleted). */
static int disk_get(const char *key, void **data, size_t *size) {
    char dir[PATH_MAX], path[ENTRY_PATH_MAX];
    if (!*cache_dir(dir, sizeof dir))
        return 0;
    entry_path(path, sizeof path, dir, key);
    /* never block (a FIFO), never follow a link */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) {
        if (errno == ENOENT)
            return 0;
        rt_log(RT_LOG_CACHE, "refused %s: %s", path, strerror(errno));
        unlink(path);
        return -1;
    }
    struct stat stt;
    int is_file = fstat(fd, &stt) == 0 && S_ISREG(stt.st_mode);
    if (is_file && !trusted(&stt)) {
        rt_log(RT_LOG_CACHE, "refused %s: owned by another user or writable by others", path);
        is_file = 0;
    } else if (!is_file) {
        rt_log(RT_LOG_CACHE, "refused %s: not a regular file", path);
    }
    /* the whole file, then decoded in memory (jit_cache_decode: the fuzzed reader) */
    size_t n = is_file && stt.st_size > 0 && (uint64_t)stt.st_size <= MAX_ENTRY_BYTES
                   ? (size_t)stt.st_size
                   : 0;
    char *file = n ? malloc(n) : NULL;
    size_t off = 0, psize = 0;
    int ok =
        file && read_all(fd, file, n) == 0 && jit_cache_decode(file, n, key, &off, &psize) == TJ_OK;
    if (ok) /* least recently used is by mtime: a hit refreshes it */
        futimens(fd, NULL);
    close(fd);
    if (!ok) {
        free(file);
        unlink(path); /* never load a damaged or foreign entry; it will be rebuilt */
        return -1;
    }
    memmove(file, file + off, psize); /* the payload, at the start of its own allocation */
    *data = file;
    *size = psize;
    return 1;
}

static size_t bound_bytes(void) {
    return disk_bound ? disk_bound : rt_config_get()->cache_max_bytes;
}

typedef struct disk_file {
    char name[64];
    struct timespec mtime;
    int64_t size;
} disk_file;

static int by_mtime(const void *a, const void *b) {
    const disk_file *x = a, *y = b;
    if (x->mtime.tv_sec != y->mtime.tv_sec)
        return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
    if (x->mtime.tv_nsec != y->mtime.tv_nsec)
        return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* Counts the entries' bytes and, past the bound, deletes the least recently used down to 3/4 of
 * it; temporary files older than an hour (a writer that died) go too. Under mu. */
static void disk_trim(const char *dir) {
    DIR *dp = opendir(dir);
    if (!dp)
        return;
    disk_file *fs = NULL;
    size_t n = 0, cap = 0;
    int64_t total = 0;
    time_t now = time(NULL);
    struct dirent *de;
    int dfd = dirfd(dp);
    while ((de = readdir(dp))) {
        size_t l = strlen(de->d_name);
        int is_entry = l > 4 && l < sizeof fs->name && strcmp(de->d_name + l - 4, ".tjc") == 0;
        int is_tmp = strstr(de->d_name, ".tjc.tmp.") != NULL;
        struct stat st;
        if ((!is_entry && !is_tmp) || fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
            continue;
        if (is_tmp) {
            if (now - st.st_mtime > 3600)
                unlinkat(dfd, de->d_name, 0);
            continue;
        }
        if (n == cap) {
            disk_file *g = realloc(fs, (cap = cap ? cap * 2 : 256) * sizeof *g);
            if (!g)
                break;
            fs = g;
        }
        memcpy(fs[n].name, de->d_name, l + 1); /* l < sizeof name: checked above */
        fs[n].mtime = st.st_mtim;
        fs[n].size = (int64_t)st.st_size;
        total += fs[n].size;
        n++;
    }
    int64_t bound = (int64_t)bound_bytes();
    if (total > bound) {
        qsort(fs, n, sizeof *fs, by_mtime);
        for (size_t i = 0; i < n && total > bound / 4 * 3; i++)
            if (unlinkat(dfd, fs[i].name, 0) == 0)
                total -= fs[i].size;
        rt_log(RT_LOG_CACHE, "disk cache over %lld bytes: trimmed to %lld", (long long)bound,
               (long long)total);
    }
    closedir(dp);
    free(fs);
    disk_bytes = total;
}

static tj_status disk_put(const char *key, const void *data, size_t size) {
    char dir[PATH_MAX], path[ENTRY_PATH_MAX], tmp[ENTRY_PATH_MAX + 64];
    if (!*cache_dir(dir, sizeof dir))
        return ir_errorf(TJ_ERR_IO, "cache: no usable cache directory (TJ_LOG=cache says why)");
    entry_path(path, sizeof path, dir, key);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%lu", path, (long)getpid(),
             (unsigned long)pthread_self());
    size_t n = 0;
    void *file = jit_cache_encode(key, data, size, &n);
    if (!file)
        return ir_errorf(TJ_ERR_OOM, "cache: out of memory");
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        free(file);
        return ir_errorf(TJ_ERR_IO, "cache: cannot write %s: %s", tmp, strerror(errno));
    }
    int ok = write_all(fd, file, n) == 0;
    free(file);
    ok = close(fd) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return ir_errorf(TJ_ERR_IO, "cache: cannot write %s: %s", path, strerror(errno));
    }
    if (disk_bytes >= 0)
        disk_bytes += (int64_t)n;
    if (disk_bytes < 0 || disk_bytes > (int64_t)bound_bytes())
        disk_trim(dir); /* counts on the first store, trims past the bound */
    return TJ_OK;
}

/* ---- API ------------------------------------------------------------------------------------- */
tj_status jit_cache_get(const char *key, void **data, size_t *size) {
    *data = NULL;
    *size = 0;
    if (!cache_enabled())
        return TJ_ERR_INVALID;
    uint64_t kh = ir_hash_bytes(key, strlen(key), 3);
    pthread_mutex_lock(&mu);
    for (entry *e = entries; e; e = e->next) {
        if (e->key_hash != kh || strcmp(e->key, key) != 0)
            continue;
        *data = malloc(e->size ? e->size : 1);
        if (*data) {
            memcpy(*data, e->data, e->size);
            *size = e->size;
            e->stamp = ++clock_stamp;
            stats.mem_hits++;
        }
        pthread_mutex_unlock(&mu);
        return *data ? TJ_OK : TJ_ERR_OOM;
    }
    int r = disk_get(key, data, size);
    if (r == 1) {
        stats.disk_hits++;
        mem_put(key, kh, *data, *size);
    } else {
        stats.misses++;
        if (r < 0)
            stats.corrupt++;
    }
    pthread_mutex_unlock(&mu);
    return r == 1 ? TJ_OK : TJ_ERR_INVALID;
}

tj_status jit_cache_put(const char *key, const void *data, size_t size) {
    if (!cache_enabled())
        return TJ_OK;
    uint64_t kh = ir_hash_bytes(key, strlen(key), 3);
    pthread_mutex_lock(&mu);
    mem_put(key, kh, data, size);
    tj_status st = disk_put(key, data, size);
    stats.stores++;
    pthread_mutex_unlock(&mu);
    return st;
}

void jit_cache_get_stats(jit_cache_stats *out) {
    pthread_mutex_lock(&mu);
    *out = stats;
    out->mem_bytes = mem_bytes;
    pthread_mutex_unlock(&mu);
}

void jit_cache_set_disk_bound(size_t bytes) {
    pthread_mutex_lock(&mu);
    disk_bound = bytes;
    disk_bytes = -1;
    pthread_mutex_unlock(&mu);
}

void jit_cache_configure(const char *dir, int enabled, size_t mem_bound_bytes) {
    pthread_mutex_lock(&mu);
    snprintf(dir_override, sizeof dir_override, "%s", dir ? dir : "");
    disk_bytes = -1; /* another directory: count again */
    refused_dir[0] = 0;
    enabled_override = enabled;
    if (mem_bound_bytes)
        mem_bound = mem_bound_bytes;
    mem_evict_to(mem_bound);
    pthread_mutex_unlock(&mu);
}

void jit_cache_clear_memory(void) {
    pthread_mutex_lock(&mu);
    mem_evict_to(0);
    pthread_mutex_unlock(&mu);
}

tj_status tj_cache_clear(void) {
    jit_cache_clear_memory();
    char dir[PATH_MAX];
    pthread_mutex_lock(&mu);
    const char *d = cache_dir(dir, sizeof dir);
    pthread_mutex_unlock(&mu);
    if (!*d)
        return TJ_OK;
    char cmd_path[ENTRY_PATH_MAX];
    DIR *dp = opendir(d);
    if (!dp)
        return ir_errorf(TJ_ERR_IO, "cache_clear: cannot open %s", d);
    struct dirent *de;
    while ((de = readdir(dp))) {
        size_t l = strlen(de->d_name);
        if (l > 4 && strcmp(de->d_name + l - 4, ".tjc") == 0) {
            snprintf(cmd_path, sizeof cmd_path, "%s/%s", d, de->d_name);
            unlink(cmd_path);
        }
    }
    closedir(dp);
    pthread_mutex_lock(&mu);
    disk_bytes = -1;
    pthread_mutex_unlock(&mu);
    return TJ_OK;
}

__attribute__((destructor)) static void cache_free_all(void) {
    jit_cache_clear_memory();
}
