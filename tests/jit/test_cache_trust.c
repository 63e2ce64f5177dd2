/* test_cache_trust.c — the disk cache as untrusted ground (issue 9, items 15, 18, 20): a FIFO, a
 * symlink or a foreign or world-writable file in place of an entry is refused without blocking;
 * a directory others can write is not used; a long TJ_CACHE_DIR is used whole or refused, never
 * truncated into another directory; the disk level stays under its byte bound, dropping the
 * least recently used entries. Works on jit_cache_get/put directly: no compiler needed. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "jit/jit.h"

static char base[] = "/tmp/tj-cache-trust-XXXXXX";

/* The one entry file in dir (path written to out); 0 if there is not exactly one. */
static int only_entry(const char *dir, char *out, size_t n) {
    DIR *d = opendir(dir);
    int count = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strstr(e->d_name, ".tjc") && !strstr(e->d_name, ".tmp.")) {
            snprintf(out, n, "%s/%s", dir, e->d_name);
            count++;
        }
    if (d)
        closedir(d);
    return count == 1;
}

static long dir_bytes(const char *dir, int *n_files) {
    DIR *d = opendir(dir);
    long total = 0;
    *n_files = 0;
    struct dirent *e;
    char p[4200];
    while (d && (e = readdir(d))) {
        struct stat st;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (strstr(e->d_name, ".tjc") && stat(p, &st) == 0)
            total += st.st_size, (*n_files)++;
    }
    if (d)
        closedir(d);
    return total;
}

static int get_ok(const char *key, size_t want) {
    void *data = NULL;
    size_t size = 0;
    jit_cache_clear_memory(); /* go to disk */
    tj_status st = jit_cache_get(key, &data, &size);
    int ok = st == TJ_OK && size == want;
    free(data);
    return ok;
}

static void on_alarm(int sig) {
    (void)sig;
    static const char msg[] = "test_cache_trust: blocked (a FIFO entry?)\n";
    (void)!write(2, msg, sizeof msg - 1);
    _exit(1);
}

int main(void) {
    CHECK(mkdtemp(base) != NULL);
    signal(SIGALRM, on_alarm);
    alarm(60);
    char dir[4200], path[4300];
    static char payload[4096];
    memset(payload, 7, sizeof payload);

    /* ---- 15, 20: entries that are not regular files of ours ---- */
    snprintf(dir, sizeof dir, "%s/c", base);
    jit_cache_configure(dir, 1, 0);
    CHECK_EQ_INT(jit_cache_put("k-fifo", payload, 100), TJ_OK);
    CHECK(get_ok("k-fifo", 100));
    CHECK(only_entry(dir, path, sizeof path));
    unlink(path);
    CHECK(mkfifo(path, 0600) == 0);
    CHECK(!get_ok("k-fifo", 100)); /* refused at once, not blocked in open() */
    struct stat st;
    CHECK(lstat(path, &st) != 0); /* and removed */
    /* a symlink to a valid entry elsewhere */
    CHECK_EQ_INT(jit_cache_put("k-fifo", payload, 100), TJ_OK);
    char real[4400];
    snprintf(real, sizeof real, "%s/elsewhere.bin", base);
    CHECK(rename(path, real) == 0);
    CHECK(symlink(real, path) == 0);
    CHECK(!get_ok("k-fifo", 100));
    CHECK(lstat(path, &st) != 0);
    /* an entry others can write */
    CHECK_EQ_INT(jit_cache_put("k-fifo", payload, 100), TJ_OK);
    CHECK(chmod(path, 0666) == 0);
    CHECK(!get_ok("k-fifo", 100));
    /* an entry owned by another user (we may only test this as root) */
    CHECK_EQ_INT(jit_cache_put("k-fifo", payload, 100), TJ_OK);
    if (geteuid() == 0) {
        CHECK(chown(path, 12345, 12345) == 0);
        CHECK(!get_ok("k-fifo", 100));
    }
    CHECK_EQ_INT(jit_cache_put("k-fifo", payload, 100), TJ_OK);
    CHECK(get_ok("k-fifo", 100)); /* rebuilt entries are fine again */

    /* ---- 20: a directory others can write is not used ---- */
    snprintf(dir, sizeof dir, "%s/open", base);
    CHECK(mkdir(dir, 0777) == 0 && chmod(dir, 0777) == 0);
    jit_cache_configure(dir, 1, 0);
    CHECK_EQ_INT(jit_cache_put("k-open", payload, 10), TJ_ERR_IO);
    int nf;
    dir_bytes(dir, &nf);
    CHECK_EQ_INT(nf, 0);
    CHECK(chmod(dir, 0700) == 0);
    jit_cache_configure(dir, 1, 0);
    CHECK_EQ_INT(jit_cache_put("k-open", payload, 10), TJ_OK);
    CHECK(get_ok("k-open", 10));

    /* ---- 15: long directories: used whole, or refused, never truncated ---- */
    size_t len = (size_t)snprintf(dir, sizeof dir, "%s", base);
    while (len < 1100) /* components of 200 characters */
        len += (size_t)snprintf(dir + len, sizeof dir - len, "/%0200d", 0);
    jit_cache_configure(dir, 1, 0);
    CHECK_EQ_INT(jit_cache_put("k-long", payload, 10), TJ_OK);
    CHECK(only_entry(dir, path, sizeof path));
    CHECK(get_ok("k-long", 10));
    while (len < 4150)
        len += (size_t)snprintf(dir + len, sizeof dir - len, "/%0200d", 1);
    jit_cache_configure(dir, 1, 0);
    CHECK_EQ_INT(jit_cache_put("k-longer", payload, 10), TJ_ERR_IO);
    CHECK(!get_ok("k-longer", 10));

    /* ---- 18: the disk level stays under its bound, least recently used out first ---- */
    snprintf(dir, sizeof dir, "%s/bounded", base);
    jit_cache_configure(dir, 1, 0);
    jit_cache_set_disk_bound(64 * 1024);
    char key[32];
    for (int i = 0; i < 40; i++) {
        snprintf(key, sizeof key, "k-%d", i);
        CHECK_EQ_INT(jit_cache_put(key, payload, sizeof payload), TJ_OK);
        if (i >= 2)
            CHECK(get_ok("k-0", sizeof payload)); /* k-0 is used all along: it stays */
        usleep(2000);                             /* distinct mtimes */
    }
    long total = dir_bytes(dir, &nf);
    CHECK_MSG(total <= 64 * 1024, "%ld bytes on disk", total);
    CHECK(nf >= 10);
    CHECK(get_ok("k-0", sizeof payload));
    CHECK(get_ok("k-39", sizeof payload));
    CHECK(!get_ok("k-1", sizeof payload));
    jit_cache_set_disk_bound(0);

    jit_cache_configure(NULL, -1, 0);
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", base);
    CHECK(system(cmd) == 0);
    return check_done();
}
