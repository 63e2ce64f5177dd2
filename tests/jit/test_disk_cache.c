/* The CPU backend's artifact cache across processes (issue 4): a first process compiles and
 * stores; a second process finds the entry and compiles nothing; two functions that trace to the
 * same graph in one process share one compiled object; a corrupted entry is rebuilt; TJ_CACHE=0
 * (here: disabled) always compiles. Children are this executable re-run with "child DIR". */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "native_first.h"
#include "jit/cpu/cpu.h"
#include "jit/jit.h"

static tj_tensor *poly(tj_tensor *x) {
    return tj_sub(tj_mul(tj_add(tj_mul(x, tj_scalar_f32(2)), tj_scalar_f32(1)), x),
                  tj_scalar_f32(3));
}

/* Calls poly once on a fresh function; returns how the kernels were obtained (0/1/2) or -1. */
static int call_once(void) {
    tj_function *f = tj_function_new("poly", (void *)poly, 1, NULL);
    int64_t d[1] = {1000};
    float xs[1000];
    for (int i = 0; i < 1000; i++)
        xs[i] = (float)i * 0.01f;
    tj_tensor *x = tj_tensor_from_data(TJ_F32, 1, d, xs);
    tj_tensor *y = tj_call(f, 1, &x);
    int from = jit_cpu_last_stats().from_cache;
    const float *p = tj_tensor_data(y);
    int ok = p && p[0] == -3.0f && p[999] > 0; /* 9.99*2+1 = 20.98; *9.99 - 3 */
    tj_release(y);
    tj_release(x);
    tj_function_free(f);
    return ok ? from : -1;
}

static int run_child(const char *self, const char *dir, int enabled) {
    pid_t pid = fork();
    if (pid == 0) {
        execl(self, self, "child", dir, enabled ? "1" : "0", (char *)NULL);
        _exit(99);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) - 10 : -100;
}

static void corrupt_entries(const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (!strstr(e->d_name, ".tjc"))
            continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "r+b");
        if (!f)
            continue;
        fseek(f, -10, SEEK_END);
        fputc(0x5a, f);
        fclose(f);
    }
    if (d)
        closedir(d);
}

int main(int argc, char **argv) {
    check_untiered();
    if (!jit_cpu_available()) {
        printf("no LLVM: skipped\n");
        return 77;
    }
    if (argc == 4 && strcmp(argv[1], "child") == 0) {
        jit_cache_configure(argv[2], atoi(argv[3]), 0);
        int from = call_once();
        return 10 + from;
    }
    char dir[] = "/tmp/tj-disk-cache-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    const char *self = "/proc/self/exe";
    char exe[1024];
    ssize_t n = readlink(self, exe, sizeof exe - 1);
    CHECK(n > 0);
    exe[n > 0 ? n : 0] = 0;

    CHECK_EQ_INT(run_child(exe, dir, 1), 0); /* a fresh cache: compiled */
    CHECK_EQ_INT(run_child(exe, dir, 1), 2); /* a second process: loaded from disk, no compile */
    CHECK_EQ_INT(run_child(exe, dir, 1), 2);
    corrupt_entries(dir);
    CHECK_EQ_INT(run_child(exe, dir, 1), 0); /* the damaged entry is discarded and rebuilt */
    CHECK_EQ_INT(run_child(exe, dir, 1), 2);
    CHECK_EQ_INT(run_child(exe, dir, 0), 0); /* cache off: always compiles */

    /* in one process: the second function with the same graph shares the first one's code */
    jit_cache_configure(dir, 0, 0);
    tj_function *keep = tj_function_new("poly", (void *)poly, 1, NULL);
    int64_t d[1] = {1000};
    tj_tensor *x = tj_zeros(TJ_F32, 1, d);
    tj_tensor *y = tj_call(keep, 1, &x);
    CHECK_EQ_INT(jit_cpu_last_stats().from_cache, 0);
    CHECK_EQ_INT(call_once(), 1);
    tj_release(y);
    tj_release(x);
    tj_function_free(keep);

    /* clean up */
    jit_cache_configure(dir, 1, 0);
    tj_cache_clear();
    rmdir(dir);
    return check_done();
}
