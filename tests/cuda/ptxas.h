/* ptxas.h — the CUDA toolkit's ptxas as a test oracle for generated PTX (tests/jit/test_nvrtc.c,
 * test_cuda_kernels.c): PTX that NVRTC emitted must also assemble with the toolkit's own
 * assembler for the architecture. Where the toolkit is absent the check says so and passes. */
#ifndef TJ_TEST_CUDA_PTXAS_H
#define TJ_TEST_CUDA_PTXAS_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"

/* The toolkit's ptxas assembles ptx for sm (skipped, and said, where it is not installed). */
static __attribute__((unused)) void ptxas_accepts(const char *ptx, int sm) {
    const char *cands[] = {"/usr/local/cuda/bin/ptxas", "/usr/bin/ptxas"};
    const char *ptxas = NULL;
    for (size_t i = 0; i < 2 && !ptxas; i++)
        if (access(cands[i], X_OK) == 0)
            ptxas = cands[i];
    if (!ptxas) {
        printf("no ptxas: the PTX is checked by NVRTC's own cubin only\n");
        return;
    }
    char path[] = "/tmp/tj-ptx-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    FILE *f = fdopen(fd, "w");
    fputs(ptx, f);
    fclose(f);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s -arch=sm_%d %s -o /dev/null", ptxas, sm, path);
    CHECK_MSG(system(cmd) == 0, "%s", cmd);
    unlink(path);
}

#endif /* TJ_TEST_CUDA_PTXAS_H */
