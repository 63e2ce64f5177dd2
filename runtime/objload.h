/* objload.h — tracejit's own linker for the code the CPU backend compiles (objload.c): loads
 * ELF64 relocatable objects for the host (x86-64 or aarch64: objload_<arch>.c) (the bytes LLVM
 * emits, as kept in the disk cache and in saved modules) into executable memory without LLVM, so a
 * runtime-only library runs saved native code. Kept apart from runtime.h: only the jit backend and
 * the module loader use it. */
#ifndef TJ_RT_OBJLOAD_H
#define TJ_RT_OBJLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "tracejit.h"

typedef struct rt_obj rt_obj;

/* The most objects a container holds. */
enum { RT_OBJ_MAX_PARTS = 64 };
/* The objects of blob: one ELF object (itself), or those of a "TJO2" container ("TJO2" | u32 n
 * (1 to RT_OBJ_MAX_PARTS) | n x u64 size | the objects, each at an offset that is a multiple of
 * 8): pointers into blob and sizes into part and len (room for RT_OBJ_MAX_PARTS); returns how
 * many, 0 for a malformed container. */
int rt_obj_parts(const void *blob, size_t size, const void **part, size_t *len);
/* The n objects part[0..n) (len bytes each; 1 <= n <= RT_OBJ_MAX_PARTS) as one blob: the object
 * itself when n is 1, else a container, each object padded to a multiple of 8. malloc'd, *size
 * bytes; NULL with the error set (TJ_ERR_INVALID for n out of range, TJ_ERR_OOM). */
void *rt_obj_join(const void *const *part, const size_t *len, int n, size_t *size);
/* Links the objects of blob (one ELF object, or a container, rt_obj_parts) into one mapping:
 * sections laid out text first (then call stubs), read-only data (then a GOT), writable data;
 * relocations applied; externals resolved among the objects, then against libm/libc (a fixed table,
 * then the process's symbols); text made read+execute and read-only data read-only. Looks up the n
 * global symbols syms into addrs. The blob is untrusted only in its structure: every offset, size,
 * index and relocation target is checked, and a malformed object is TJ_ERR_CORRUPT naming what is
 * wrong; a relocation type or section kind this linker does not handle is TJ_ERR_UNSUPPORTED. What
 * the code does when called is the blob author's: load only code you trust. Returns NULL with the
 * error set. Owned by the caller: rt_obj_free unmaps it (NULL is fine). blob is only read. */
rt_obj *rt_obj_load(const void *blob, size_t size, const char *const *syms, uint32_t n,
                    void **addrs);
void rt_obj_free(rt_obj *o);
/* Bytes mapped for o's code and data (for statistics). */
size_t rt_obj_mapped_bytes(const rt_obj *o);

/* The host's ISA features as raw CPUID words (leaf 1 ECX/EDX, leaf 7.0 EBX/ECX/EDX, leaf 7.1
 * EAX, leaf 0x80000001 ECX/EDX) and XCR0 (the register state the OS enables), words that vary
 * between identical machines masked out. Code compiled on a machine with features f runs on a
 * host whose features include f (rt_cpu_features_cover). On aarch64 the kernel's AT_HWCAP and
 * AT_HWCAP2 words; zeros on other architectures. */
enum { RT_CPU_WORDS = 9 };
void rt_cpu_features(uint32_t w[RT_CPU_WORDS]);
/* Whether every feature bit of need is set in have; else writes the first missing word and bits
 * to *word and *bits. */
int rt_cpu_features_cover(const uint32_t have[RT_CPU_WORDS], const uint32_t need[RT_CPU_WORDS],
                          int *word, uint32_t *bits);

#endif /* TJ_RT_OBJLOAD_H */
