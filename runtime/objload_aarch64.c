/* objload_aarch64.c — the object loader's aarch64 part (objload_arch.h): the relocations LLVM
 * emits for PIC code in the small code model (ADRP + ADD/LDR pairs for constants and GOT slots,
 * BL/B for calls, data words), the MOVZ/MOVK ones of the large model, and a stub
 * `ldr x16, 8; br x16; .quad address` (x16 is the intra-procedure-call scratch register the ABI
 * gives veneers) that reaches a libm function beyond a BL's +-128 MiB. Instructions are
 * little-endian words; only their immediate fields are written. */
#include <elf.h>
#include <string.h>

#include "runtime/objload_arch.h"
#include "runtime/runtime.h"

static size_t a64_width(uint32_t type) {
    switch (type) {
    case R_AARCH64_NONE:
        return 0;
    case R_AARCH64_ABS64:
    case R_AARCH64_PREL64:
        return 8;
    case R_AARCH64_ABS32:
    case R_AARCH64_PREL32:
    case R_AARCH64_CALL26:
    case R_AARCH64_JUMP26:
    case R_AARCH64_CONDBR19:
    case R_AARCH64_TSTBR14:
    case R_AARCH64_LD_PREL_LO19:
    case R_AARCH64_ADR_PREL_LO21:
    case R_AARCH64_ADR_PREL_PG_HI21:
    case R_AARCH64_ADR_PREL_PG_HI21_NC:
    case R_AARCH64_ADD_ABS_LO12_NC:
    case R_AARCH64_LDST8_ABS_LO12_NC:
    case R_AARCH64_LDST16_ABS_LO12_NC:
    case R_AARCH64_LDST32_ABS_LO12_NC:
    case R_AARCH64_LDST64_ABS_LO12_NC:
    case R_AARCH64_LDST128_ABS_LO12_NC:
    case R_AARCH64_ADR_GOT_PAGE:
    case R_AARCH64_LD64_GOT_LO12_NC:
    case R_AARCH64_MOVW_UABS_G0:
    case R_AARCH64_MOVW_UABS_G0_NC:
    case R_AARCH64_MOVW_UABS_G1:
    case R_AARCH64_MOVW_UABS_G1_NC:
    case R_AARCH64_MOVW_UABS_G2:
    case R_AARCH64_MOVW_UABS_G2_NC:
    case R_AARCH64_MOVW_UABS_G3:
        return 4;
    default:
        return SIZE_MAX;
    }
}

static void a64_stub(unsigned char *at, uintptr_t target) {
    static const uint32_t code[2] = {0x58000050u,  /* ldr x16, #8 */
                                     0xd61f0200u}; /* br x16 */
    memcpy(at, code, 8);
    uint64_t t = target;
    memcpy(at + 8, &t, 8); /* 8-aligned: stubs start 16-aligned */
}

/* The instruction at P with `bits` bits at `shift` replaced by v's low bits. */
static void patch(unsigned char *P, uint32_t v, int shift, int bits) {
    uint32_t insn, mask = (bits == 32 ? ~0u : ((1u << bits) - 1)) << shift;
    memcpy(&insn, P, 4);
    insn = (insn & ~mask) | ((v << shift) & mask);
    memcpy(P, &insn, 4);
}

static int fits_signed(int64_t v, int bits) {
    return v >= -((int64_t)1 << (bits - 1)) && v < ((int64_t)1 << (bits - 1));
}

/* ADRP's 21-bit page offset: immlo at bits 29-30, immhi at bits 5-23. */
static void patch_adrp(unsigned char *P, int64_t pages) {
    uint32_t imm = (uint32_t)pages;
    patch(P, imm & 3, 29, 2);
    patch(P, imm >> 2, 5, 19);
}

static uint64_t page(uint64_t a) {
    return a & ~(uint64_t)0xfff;
}

static tj_status misaligned(const rt_reloc *r, unsigned align) {
    return ir_errorf(TJ_ERR_CORRUPT,
                     "object loader: object %d: relocation type %u of '%s' needs a target "
                     "aligned to %u bytes",
                     r->obj, r->type, r->name, align);
}

/* A PC-relative offset v counted in instructions: a signed `bits`-bit field at `shift` holds v/4
 * (B/BL, B.cond and LDR literal, TBZ). */
static tj_status word_offset(const rt_reloc *r, int64_t v, int shift, int bits, const char *what) {
    if (!fits_signed(v, bits + 2))
        return rt_obj_out_of_reach(r, what);
    if (v & 3)
        return misaligned(r, 4);
    patch(r->P, (uint32_t)(v >> 2), shift, bits);
    return TJ_OK;
}

static tj_status a64_apply(const rt_reloc *r) {
    uint64_t P = (uintptr_t)r->P, X = r->S + (uint64_t)r->A;
    int64_t v;
    switch (r->type) {
    case R_AARCH64_ABS64:
        memcpy(r->P, &X, 8);
        return TJ_OK;
    case R_AARCH64_PREL64:
        v = (int64_t)(X - P);
        memcpy(r->P, &v, 8);
        return TJ_OK;
    case R_AARCH64_ABS32:
        if (!fits_signed((int64_t)X, 33)) /* a signed or an unsigned 32-bit value */
            return rt_obj_out_of_reach(r, "32-bit absolute");
        memcpy(r->P, &(uint32_t){(uint32_t)X}, 4);
        return TJ_OK;
    case R_AARCH64_PREL32:
        v = (int64_t)(X - P);
        if (!fits_signed(v, 33))
            return rt_obj_out_of_reach(r, "32-bit PC-relative");
        memcpy(r->P, &(uint32_t){(uint32_t)v}, 4);
        return TJ_OK;
    case R_AARCH64_CALL26:
    case R_AARCH64_JUMP26:
        v = (int64_t)(X - P);
        if (!fits_signed(v, 28) && r->stub) /* a far external function: through its stub */
            v = (int64_t)((uintptr_t)r->stub + (uint64_t)r->A - P);
        return word_offset(r, v, 0, 26, "26-bit branch");
    case R_AARCH64_CONDBR19:
    case R_AARCH64_LD_PREL_LO19:
        return word_offset(r, (int64_t)(X - P), 5, 19, "19-bit PC-relative");
    case R_AARCH64_TSTBR14:
        return word_offset(r, (int64_t)(X - P), 5, 14, "14-bit test-and-branch");
    case R_AARCH64_ADR_PREL_LO21:
        v = (int64_t)(X - P);
        if (!fits_signed(v, 21))
            return rt_obj_out_of_reach(r, "21-bit ADR");
        patch(r->P, (uint32_t)v & 3, 29, 2);
        patch(r->P, (uint32_t)(v >> 2), 5, 19);
        return TJ_OK;
    case R_AARCH64_ADR_PREL_PG_HI21:
    case R_AARCH64_ADR_PREL_PG_HI21_NC:
        v = (int64_t)(page(X) - page(P)) >> 12;
        if (r->type == R_AARCH64_ADR_PREL_PG_HI21 && !fits_signed(v, 21))
            return rt_obj_out_of_reach(r, "ADRP page");
        patch_adrp(r->P, v);
        return TJ_OK;
    case R_AARCH64_ADD_ABS_LO12_NC:
    case R_AARCH64_LDST8_ABS_LO12_NC:
    case R_AARCH64_LDST16_ABS_LO12_NC:
    case R_AARCH64_LDST32_ABS_LO12_NC:
    case R_AARCH64_LDST64_ABS_LO12_NC:
    case R_AARCH64_LDST128_ABS_LO12_NC: {
        int sh = r->type == R_AARCH64_LDST16_ABS_LO12_NC    ? 1
                 : r->type == R_AARCH64_LDST32_ABS_LO12_NC  ? 2
                 : r->type == R_AARCH64_LDST64_ABS_LO12_NC  ? 3
                 : r->type == R_AARCH64_LDST128_ABS_LO12_NC ? 4
                                                            : 0;
        if (X & ((1u << sh) - 1))
            return misaligned(r, 1u << sh);
        patch(r->P, (uint32_t)(X & 0xfff) >> sh, 10, 12);
        return TJ_OK;
    }
    case R_AARCH64_ADR_GOT_PAGE:
    case R_AARCH64_LD64_GOT_LO12_NC: {
        if (!r->got)
            return ir_errorf(TJ_ERR_CORRUPT,
                             "object loader: object %d: a GOT relocation of '%s', which has no "
                             "slot",
                             r->obj, r->name);
        memcpy(r->got, &X, 8);
        uint64_t G = (uintptr_t)r->got;
        if (r->type == R_AARCH64_LD64_GOT_LO12_NC) {
            patch(r->P, (uint32_t)(G & 0xfff) >> 3, 10, 12); /* slots are 8-aligned */
            return TJ_OK;
        }
        v = (int64_t)(page(G) - page(P)) >> 12;
        if (!fits_signed(v, 21))
            return rt_obj_out_of_reach(r, "ADRP GOT page");
        patch_adrp(r->P, v);
        return TJ_OK;
    }
    case R_AARCH64_MOVW_UABS_G0:
    case R_AARCH64_MOVW_UABS_G0_NC:
    case R_AARCH64_MOVW_UABS_G1:
    case R_AARCH64_MOVW_UABS_G1_NC:
    case R_AARCH64_MOVW_UABS_G2:
    case R_AARCH64_MOVW_UABS_G2_NC:
    case R_AARCH64_MOVW_UABS_G3: {
        int g = (int)(r->type - R_AARCH64_MOVW_UABS_G0) / 2; /* G0, G0_NC, G1, ... */
        int checked = ((r->type - R_AARCH64_MOVW_UABS_G0) & 1) == 0 && g < 3;
        if (checked && (X >> (16 * (g + 1))) != 0)
            return rt_obj_out_of_reach(r, "MOVZ/MOVK group");
        patch(r->P, (uint32_t)(X >> (16 * g)) & 0xffff, 5, 16);
        return TJ_OK;
    }
    default:
        return ir_errorf(TJ_ERR_UNSUPPORTED,
                         "object loader: object %d: aarch64 relocation type %u is not handled",
                         r->obj, r->type);
    }
}

const rt_obj_arch rt_obj_aarch64 = {"aarch64", EM_AARCH64, a64_width, a64_stub, a64_apply};
