/* nvrtc.h — CUDA C compiled to GPU code by NVRTC, opened with dlopen (nvrtc.c): the compiler half
 * of the CUDA backend (issue 27), usable without a GPU (NVRTC needs none), absent without the
 * CUDA toolkit (then a sentence says why). TJ_NVRTC names the library to open instead of
 * libnvrtc.so (any version from 12 on). */
#ifndef TJ_JIT_CUDA_NVRTC_H
#define TJ_JIT_CUDA_NVRTC_H

#include <stddef.h>

#include "ir/ir.h"

/* NULL when NVRTC is loaded; otherwise why not (static). */
const char *jit_nvrtc_unavailable(void);
/* "nvrtc 13.0" (static; "" when unavailable): part of every CUDA artifact's cache key. */
const char *jit_nvrtc_version(void);

/* What one compile made: PTX text (always), and the device code for the architecture asked
 * (cubin, sm_NN) when NVRTC made one; both malloc'd, owned by the caller (jit_nvrtc_free). */
typedef struct jit_nvrtc_out {
    char *ptx;
    size_t ptx_size;
    void *cubin;
    size_t cubin_size;
    double ms; /* the compile's wall time */
} jit_nvrtc_out;

/* Compiles `source` (CUDA C; `name` names it in messages) for compute capability `sm` (80 for
 * sm_80, 90 for sm_90): PTX for compute_NN and, through NVRTC's assembler, a cubin for sm_NN.
 * TJ_OK, or an error naming `name` and carrying NVRTC's log (a source that does not compile is
 * TJ_ERR_RUNTIME; no NVRTC is TJ_ERR_UNSUPPORTED). */
tj_status jit_nvrtc_compile(const char *source, const char *name, int sm, jit_nvrtc_out *out);
void jit_nvrtc_free(jit_nvrtc_out *out);

/* ---- cached (cache.c) ---------------------------------------------------------------------- */
/* jit_nvrtc_compile through the artifact cache (jit/cache.c: memory, then disk): *from is 1 when
 * the output came from the cache (no compile), 0 when compiled (and stored). */
tj_status jit_nvrtc_compile_cached(const char *source, const char *name, int sm, jit_nvrtc_out *out,
                                   int *from);
/* The cache key of source for sm: tracejit's and NVRTC's versions, the architecture and the
 * source's 128-bit content hash. */
void jit_nvrtc_key(const char *source, int sm, char *key, size_t n);
/* An entry's payload (malloc'd, *size bytes; NULL on OOM), and back: TJ_ERR_CORRUPT for bytes
 * that are not one written for sm (every size checked). */
unsigned char *jit_nvrtc_payload(const jit_nvrtc_out *o, int sm, size_t *size);
tj_status jit_nvrtc_parse(const unsigned char *p, size_t size, int sm, jit_nvrtc_out *out);

#endif /* TJ_JIT_CUDA_NVRTC_H */
