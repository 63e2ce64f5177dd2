/* objload_x86_64.c — the object loader's x86-64 part (objload_arch.h): the relocations LLVM emits
 * for PIC code in the small code model, and a stub `jmp *0(%rip)` + the address, which reaches a
 * libm function that lies more than 2 GiB from the mapping. */
#include <elf.h>
#include <string.h>

#include "runtime/objload_arch.h"
#include "runtime/runtime.h"

static size_t x86_width(uint32_t type) {
    switch (type) {
    case R_X86_64_NONE:
        return 0;
    case R_X86_64_64:
    case R_X86_64_PC64:
        return 8;
    case R_X86_64_PC32:
    case R_X86_64_PLT32:
    case R_X86_64_GOTPCREL:
    case R_X86_64_GOTPCRELX:
    case R_X86_64_REX_GOTPCRELX:
    case R_X86_64_32:
    case R_X86_64_32S:
        return 4;
    default:
        return SIZE_MAX;
    }
}

static void x86_stub(unsigned char *at, uintptr_t target) {
    static const unsigned char jmp[6] = {0xff, 0x25, 0, 0, 0, 0}; /* jmp *0(%rip) */
    memcpy(at, jmp, 6);
    memcpy(at + 6, &target, 8);
    memset(at + 14, 0xcc, 2); /* int3 padding */
}

static int fits32(int64_t v) {
    return v >= INT32_MIN && v <= INT32_MAX;
}

static tj_status x86_apply(const rt_reloc *r) {
    uintptr_t P = (uintptr_t)r->P;
    int64_t v;
    switch (r->type) {
    case R_X86_64_64:
        v = (int64_t)(r->S + (uint64_t)r->A);
        memcpy(r->P, &v, 8);
        return TJ_OK;
    case R_X86_64_PC64:
        v = (int64_t)(r->S + (uint64_t)r->A - P);
        memcpy(r->P, &v, 8);
        return TJ_OK;
    case R_X86_64_PC32:
    case R_X86_64_PLT32:
        v = (int64_t)(r->S + (uint64_t)r->A - P);
        if (!fits32(v) && r->stub) /* a far external function: through its stub */
            v = (int64_t)((uintptr_t)r->stub + (uint64_t)r->A - P);
        if (!fits32(v))
            return rt_obj_out_of_reach(r, "32-bit PC-relative");
        memcpy(r->P, &(int32_t){(int32_t)v}, 4);
        return TJ_OK;
    case R_X86_64_GOTPCREL:
    case R_X86_64_GOTPCRELX:
    case R_X86_64_REX_GOTPCRELX:
        if (!r->got)
            return ir_errorf(TJ_ERR_CORRUPT,
                             "object loader: object %d: a GOT relocation of '%s', which has no "
                             "slot",
                             r->obj, r->name);
        memcpy(r->got, &r->S, 8);
        v = (int64_t)((uintptr_t)r->got + (uint64_t)r->A - P);
        if (!fits32(v))
            return rt_obj_out_of_reach(r, "32-bit GOT");
        memcpy(r->P, &(int32_t){(int32_t)v}, 4);
        return TJ_OK;
    case R_X86_64_32:
    case R_X86_64_32S:
        v = (int64_t)(r->S + (uint64_t)r->A);
        if (r->type == R_X86_64_32 ? (v < 0 || v > (int64_t)UINT32_MAX) : !fits32(v))
            return ir_errorf(TJ_ERR_UNSUPPORTED,
                             "object loader: object %d: an absolute 32-bit relocation of '%s' "
                             "(code not compiled as PIC)",
                             r->obj, r->name);
        memcpy(r->P, &(uint32_t){(uint32_t)v}, 4);
        return TJ_OK;
    default:
        return ir_errorf(TJ_ERR_UNSUPPORTED,
                         "object loader: object %d: x86-64 relocation type %u is not handled",
                         r->obj, r->type);
    }
}

const rt_obj_arch rt_obj_x86_64 = {"x86-64", EM_X86_64, x86_width, x86_stub, x86_apply};
