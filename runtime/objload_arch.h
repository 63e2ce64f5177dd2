/* objload_arch.h — one architecture's part of the object loader (objload.c), one file per
 * architecture as IREE's embedded ELF loader is laid out: the ELF machine it links, the stub that
 * reaches an external function anywhere in the address space, and the relocations its code
 * generator emits. objload.c parses, lays out, maps and protects; it asks the host's part
 * (rt_obj_arch_host) for the rest. Every part is plain C and compiled on every host. */
#ifndef TJ_RT_OBJLOAD_ARCH_H
#define TJ_RT_OBJLOAD_ARCH_H

#include <stddef.h>
#include <stdint.h>

#include "tracejit.h"

/* One relocation, resolved: written at P (within its section: width(type) bytes are there). */
typedef struct rt_reloc {
    uint32_t type;
    unsigned char *P;
    uintptr_t S;         /* the symbol's address */
    int64_t A;           /* the addend */
    unsigned char *stub; /* the external's stub, or NULL (a symbol defined in the objects) */
    unsigned char *got;  /* its GOT slot, or NULL (no slot) */
    const char *name;    /* the symbol's name, for messages */
    int obj;             /* which object of the blob */
} rt_reloc;

typedef struct rt_obj_arch {
    const char *name; /* "x86-64", "aarch64" */
    uint16_t machine; /* EM_* */
    /* Bytes a relocation of this type writes: 0 for R_*_NONE, SIZE_MAX for a type this part
     * does not handle (TJ_ERR_UNSUPPORTED, naming it). */
    size_t (*width)(uint32_t type);
    /* Writes the RT_OBJ_STUB bytes at `at` that jump to target (through no register the callee
     * reads: calls reach externals through them when the target is out of direct reach). */
    void (*stub)(unsigned char *at, uintptr_t target);
    /* Applies r (the slot, if any, is written here); TJ_ERR_UNSUPPORTED when a target is out of
     * reach, TJ_ERR_CORRUPT when the object asks for something impossible (a misaligned
     * target of a scaled offset). */
    tj_status (*apply)(const rt_reloc *r);
} rt_obj_arch;

enum { RT_OBJ_STUB = 16 }; /* bytes per stub, 16-aligned */

extern const rt_obj_arch rt_obj_x86_64, rt_obj_aarch64;

/* The part for the machine this library was built for; NULL where there is none. */
const rt_obj_arch *rt_obj_arch_host(void);

/* "object loader: object <k>: '<name>' is out of reach of a <what> relocation". */
tj_status rt_obj_out_of_reach(const rt_reloc *r, const char *what);

#endif /* TJ_RT_OBJLOAD_ARCH_H */
