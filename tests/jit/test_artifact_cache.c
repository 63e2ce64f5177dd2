/* The artifact cache (issue 4): memory and disk levels, a fresh "process" (memory cleared) finding
 * the disk entry, and entries corrupted on purpose (flipped byte, truncated, wrong key, wrong
 * format version, garbage) detected, deleted and reported as misses, never returned. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "jit/jit.h"

static char dir[256];

/* The single .tjc file in the cache dir. */
static int entry_file(char *out, size_t n) {
    DIR *d = opendir(dir);
    struct dirent *e;
    int found = 0;
    while (d && (e = readdir(d)))
        if (strstr(e->d_name, ".tjc") && !strstr(e->d_name, ".tmp")) {
            snprintf(out, n, "%s/%s", dir, e->d_name);
            found++;
        }
    if (d)
        closedir(d);
    return found;
}

static void store_fresh(const char *key, const char *payload) {
    tj_cache_clear();
    CHECK(jit_cache_put(key, payload, strlen(payload) + 1) == TJ_OK);
    jit_cache_clear_memory(); /* as a new process would start */
}

static int lookup_is(const char *key, const char *payload) {
    void *data;
    size_t size;
    if (jit_cache_get(key, &data, &size) != TJ_OK)
        return 0;
    int ok = size == strlen(payload) + 1 && memcmp(data, payload, size) == 0;
    free(data);
    return ok;
}

static void patch(const char *path, long off, int whence, unsigned char v) {
    FILE *f = fopen(path, "r+b");
    CHECK(f != NULL);
    if (!f)
        return;
    fseek(f, off, whence);
    fputc(v, f);
    fclose(f);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/tj-cache-test-%d", (int)getpid());
    jit_cache_configure(dir, 1, 0);
    const char *key = "backend=cpu;cpu=test;llvm=19;tj=0.1.0;format=1;kernel=00ff";
    const char *obj = "pretend this is an ELF object file";
    char path[512];
    jit_cache_stats s0, s1;

    /* memory hit, then disk hit after the memory level is dropped */
    tj_cache_clear();
    jit_cache_get_stats(&s0);
    CHECK(jit_cache_put(key, obj, strlen(obj) + 1) == TJ_OK);
    CHECK(lookup_is(key, obj));
    jit_cache_clear_memory();
    CHECK(lookup_is(key, obj));
    jit_cache_get_stats(&s1);
    CHECK(s1.mem_hits == s0.mem_hits + 1 && s1.disk_hits == s0.disk_hits + 1);
    CHECK(entry_file(path, sizeof path) == 1);
    CHECK(!lookup_is("backend=cpu;other", obj)); /* absent key: a miss */

    /* a flipped payload byte */
    store_fresh(key, obj);
    CHECK(entry_file(path, sizeof path) == 1);
    patch(path, -3, SEEK_END, 'X');
    CHECK(!lookup_is(key, obj));
    CHECK(entry_file(path, sizeof path) == 0); /* deleted, so it gets rebuilt */
    jit_cache_get_stats(&s0);
    CHECK(s0.corrupt >= 1);

    /* truncated */
    store_fresh(key, obj);
    entry_file(path, sizeof path);
    struct stat st;
    stat(path, &st);
    CHECK(truncate(path, st.st_size - 5) == 0);
    CHECK(!lookup_is(key, obj));

    /* wrong format version (bytes 8..11 of the header) */
    store_fresh(key, obj);
    entry_file(path, sizeof path);
    patch(path, 8, SEEK_SET, 99);
    CHECK(!lookup_is(key, obj));

    /* wrong key: an entry whose stored key differs (a hash collision or a renamed file) */
    store_fresh(key, obj);
    entry_file(path, sizeof path);
    patch(path, 32, SEEK_SET, 'Z'); /* first byte of the stored key */
    CHECK(!lookup_is(key, obj));

    /* garbage and an empty file */
    store_fresh(key, obj);
    entry_file(path, sizeof path);
    FILE *f = fopen(path, "wb");
    fputs("garbage", f);
    fclose(f);
    CHECK(!lookup_is(key, obj));
    store_fresh(key, obj);
    entry_file(path, sizeof path);
    f = fopen(path, "wb");
    fclose(f);
    CHECK(!lookup_is(key, obj));

    /* rebuilt after corruption: a store then a lookup works again */
    CHECK(jit_cache_put(key, obj, strlen(obj) + 1) == TJ_OK);
    jit_cache_clear_memory();
    CHECK(lookup_is(key, obj));

    /* memory bound: entries beyond it are evicted (LRU), the disk keeps them */
    jit_cache_configure(dir, 1, 64);
    char big[40];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = 0;
    CHECK(jit_cache_put("k1", big, sizeof big) == TJ_OK);
    CHECK(jit_cache_put("k2", big, sizeof big) == TJ_OK);
    jit_cache_get_stats(&s1);
    CHECK(s1.mem_bytes <= 64);
    CHECK(lookup_is("k1", big)); /* from disk */

    /* disabled: nothing is stored or found */
    jit_cache_configure(dir, 0, 0);
    CHECK(jit_cache_put("k3", big, sizeof big) == TJ_OK);
    CHECK(!lookup_is("k3", big));
    jit_cache_configure(dir, 1, 0);

    tj_cache_clear();
    CHECK(entry_file(path, sizeof path) == 0);
    rmdir(dir);
    return check_done();
}
