/* cache.c — the artifact cache: compiled code (object files) keyed by a full key string that
 * names everything that changes the code (kernel structural hash, signature, backend, target CPU
 * and features, compiler and tracejit versions, codegen options, format version).
 * Two levels: memory (LRU, bounded by bytes) and disk ($TJ_CACHE_DIR, else
 * $XDG_CACHE_HOME/tracejit, else ~/.cache/tracejit). A disk entry is
 *   magic "TJCACHE1" | u32 format | u32 key length | u64 payload size | u64 checksum | key |
 * payload written to a temporary file and renamed, so readers never see half an entry. An entry
 * whose magic, format, key, size or checksum disagrees is deleted and reported as a miss: it is
 * never loaded. TJ_CACHE=0 turns both levels off. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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
static char dir_override[1024];
static int enabled_override = -1;

static uint64_t checksum(const void *key, size_t key_len, const void *data, size_t size) {
    return ir_hash_mix(ir_hash_bytes(key, key_len, 0x6b6579), ir_hash_bytes(data, size, 0x646174));
}

static int cache_enabled(void) {
    return enabled_override >= 0 ? enabled_override : rt_config_get()->cache_enabled;
}

/* The cache directory (created on demand); "" if none can be determined. */
static const char *cache_dir(char *buf, size_t n) {
    const char *d = dir_override[0] ? dir_override : rt_config_get()->cache_dir;
    if (d && *d) {
        snprintf(buf, n, "%s", d);
    } else {
        const char *x = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
        if (x && *x)
            snprintf(buf, n, "%s/tracejit", x);
        else if (home && *home)
            snprintf(buf, n, "%s/.cache/tracejit", home);
        else
            return "";
    }
    /* mkdir -p */
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        mkdir(buf, 0755);
        *p = '/';
    }
    mkdir(buf, 0755);
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

/* 1: found (data malloc'd); 0: absent; -1: present but corrupt (deleted). */
static int disk_get(const char *key, void **data, size_t *size) {
    char dir[1024], path[1200];
    if (!*cache_dir(dir, sizeof dir))
        return 0;
    entry_path(path, sizeof path, dir, key);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    header h;
    size_t key_len = strlen(key);
    struct stat stt;
    char *kbuf = NULL, *payload = NULL;
    int ok = fstat(fd, &stt) == 0 && read_all(fd, &h, sizeof h) == 0 &&
             memcmp(h.magic, CACHE_MAGIC, 8) == 0 && h.format == CACHE_FORMAT &&
             h.key_len == key_len && (uint64_t)stt.st_size == sizeof h + h.key_len + h.size;
    if (ok) {
        kbuf = malloc(key_len + 1);
        payload = malloc(h.size ? h.size : 1);
        ok = kbuf && payload && read_all(fd, kbuf, key_len) == 0 &&
             memcmp(kbuf, key, key_len) == 0 && read_all(fd, payload, h.size) == 0 &&
             checksum(key, key_len, payload, h.size) == h.sum;
    }
    close(fd);
    free(kbuf);
    if (!ok) {
        free(payload);
        unlink(path); /* never load a damaged or foreign entry; it will be rebuilt */
        return -1;
    }
    *data = payload;
    *size = h.size;
    return 1;
}

static tj_status disk_put(const char *key, const void *data, size_t size) {
    char dir[1024], path[1200], tmp[1300];
    if (!*cache_dir(dir, sizeof dir))
        return ir_errorf(TJ_ERR_IO, "cache: no cache directory (set TJ_CACHE_DIR)");
    entry_path(path, sizeof path, dir, key);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%lu", path, (long)getpid(),
             (unsigned long)pthread_self());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return ir_errorf(TJ_ERR_IO, "cache: cannot write %s: %s", tmp, strerror(errno));
    header h;
    memcpy(h.magic, CACHE_MAGIC, 8);
    h.format = CACHE_FORMAT;
    h.key_len = (uint32_t)strlen(key);
    h.size = size;
    h.sum = checksum(key, h.key_len, data, size);
    int ok = write_all(fd, &h, sizeof h) == 0 && write_all(fd, key, h.key_len) == 0 &&
             write_all(fd, data, size) == 0;
    ok = close(fd) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return ir_errorf(TJ_ERR_IO, "cache: cannot write %s: %s", path, strerror(errno));
    }
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

void jit_cache_configure(const char *dir, int enabled, size_t mem_bound_bytes) {
    pthread_mutex_lock(&mu);
    snprintf(dir_override, sizeof dir_override, "%s", dir ? dir : "");
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
    char dir[1024];
    pthread_mutex_lock(&mu);
    const char *d = cache_dir(dir, sizeof dir);
    pthread_mutex_unlock(&mu);
    if (!*d)
        return TJ_OK;
    char cmd_path[1200];
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
    return TJ_OK;
}

__attribute__((destructor)) static void cache_free_all(void) {
    jit_cache_clear_memory();
}
