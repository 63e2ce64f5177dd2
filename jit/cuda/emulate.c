/* emulate.c — the CUDA backend's kernels compiled for the host (TJ_CUDA_EMULATE names the C
 * compiler), so that CI, which has no GPU, runs the very source the backend hands NVRTC: the
 * prelude's shim (source.c) maps threadIdx, blockIdx, __shared__ and __syncthreads onto host
 * threads, and the tests' fake driver (tests/cuda/fake_cuda.c) loads the shared object named by
 * the image and runs each launch's grid. A test hook, like TJ_CUDA_DRIVER: it runs a compiler. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jit/cuda/cuda.h"

/* The compiler's messages, the first few hundred bytes, into buf. */
static void read_log(const char *path, char *buf, size_t n) {
    FILE *f = fopen(path, "r");
    size_t got = f ? fread(buf, 1, n - 1, f) : 0;
    buf[got] = 0;
    if (f)
        fclose(f);
}

tj_status jit_cuda_emulate_build(const char *compiler, const char *source, char **image) {
    *image = NULL;
    const char *tmp = getenv("TMPDIR");
    char dir[512], c_path[600], so_path[600], log_path[600];
    snprintf(dir, sizeof dir, "%s/tj_cuda_emu_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir))
        return ir_errorf(TJ_ERR_IO, "cuda emulation: cannot make a directory in %s: %s",
                         tmp && *tmp ? tmp : "/tmp", strerror(errno));
    snprintf(c_path, sizeof c_path, "%s/k.c", dir);
    snprintf(so_path, sizeof so_path, "%s/k.so", dir);
    snprintf(log_path, sizeof log_path, "%s/log", dir);
    FILE *f = fopen(c_path, "w");
    bool wrote = f && fputs("#define TJ_EMULATE 1\n", f) >= 0 && fputs(source, f) >= 0;
    if (f && fclose(f) != 0)
        wrote = false;
    tj_status st = TJ_OK;
    if (!wrote) {
        st = ir_errorf(TJ_ERR_IO, "cuda emulation: cannot write %s", c_path);
    } else {
        char cmd[2400];
        snprintf(cmd, sizeof cmd,
                 "%s -std=gnu11 -O1 -w -fPIC -shared -o '%s' '%s' -lm -lpthread > '%s' 2>&1",
                 compiler, so_path, c_path, log_path);
        int rc = system(cmd);
        if (rc != 0 || !WIFEXITED(rc) || WEXITSTATUS(rc) != 0) {
            char log[600];
            read_log(log_path, log, sizeof log);
            st = ir_errorf(TJ_ERR_RUNTIME, "cuda emulation: %s failed on the kernels: %s", compiler,
                           log);
        }
    }
    unlink(c_path);
    unlink(log_path);
    if (!st) {
        size_t n = strlen(so_path) + 8;
        if (!(*image = malloc(n)))
            st = ir_errorf(TJ_ERR_OOM, "cuda emulation: out of memory");
        else
            snprintf(*image, n, "TJEMU\n%s", so_path);
    }
    if (st) {
        unlink(so_path);
        rmdir(dir);
    }
    return st;
}
