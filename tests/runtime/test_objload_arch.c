/* The object loader's architecture parts, on every host: each aarch64 and x86-64 relocation the
 * loader handles is applied to an instruction at a known address and compared with what an
 * assembler gives for the resolved instruction (the expected words are llvm-mc-19's encodings of
 * `adrp x0, #0x12345000` and the like), including negative offsets, the stub route of a far
 * call, GOT slots, targets out of reach (TJ_ERR_UNSUPPORTED naming the symbol) and misaligned
 * scaled offsets (TJ_ERR_CORRUPT). scripts/aarch64.sh runs whole compiled programs through the
 * aarch64 part under qemu; this test keeps its arithmetic checked on x86-64 CI too. */
#include <elf.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "runtime/objload_arch.h"
#include "runtime/runtime.h"

static unsigned char *buf; /* page-aligned; P is buf + at */

/* Applies relocation type at buf+at over instruction word insn, for a target at P + delta. */
static tj_status apply(const rt_obj_arch *a, uint32_t type, size_t at, uint32_t insn, int64_t delta,
                       unsigned char *stub, unsigned char *got, uint32_t *out) {
    memcpy(buf + at, &insn, 4);
    rt_reloc r = {.type = type,
                  .P = buf + at,
                  .S = (uintptr_t)(buf + at) + (uintptr_t)delta,
                  .stub = stub,
                  .got = got,
                  .name = "sym",
                  .obj = 0};
    tj_status st = a->apply(&r);
    memcpy(out, buf + at, 4);
    return st;
}

#define WORD(a, type, insn, delta, want)                                                           \
    do {                                                                                           \
        uint32_t got_;                                                                             \
        CHECK_EQ_INT(apply(a, type, 0x100, insn, delta, NULL, NULL, &got_), TJ_OK);                \
        CHECK_MSG(got_ == (want), "type %u: %08x, want %08x", (unsigned)(type), got_,              \
                  (unsigned)(want));                                                               \
    } while (0)

static void aarch64(void) {
    const rt_obj_arch *a = &rt_obj_aarch64;
    CHECK_EQ_INT(a->machine, EM_AARCH64);
    CHECK_EQ_INT(a->width(R_AARCH64_NONE), 0);
    CHECK_EQ_INT(a->width(R_AARCH64_ABS64), 8);
    CHECK_EQ_INT(a->width(R_AARCH64_CALL26), 4);
    CHECK(a->width(9999) == SIZE_MAX);
    /* the relocations of P (= buf + 0x100, in the page at buf) */
    WORD(a, R_AARCH64_ADR_PREL_PG_HI21, 0x90000000u, 0x12345000 - 0x100 + 0x678, 0xb0091a20u);
    WORD(a, R_AARCH64_ADR_PREL_PG_HI21, 0x90000000u, -0x1000, 0xf0ffffe0u);
    WORD(a, R_AARCH64_ADR_PREL_PG_HI21_NC, 0x90000000u, -0x1000, 0xf0ffffe0u);
    WORD(a, R_AARCH64_ADD_ABS_LO12_NC, 0x91000000u, 0x678 - 0x100, 0x9119e000u);
    WORD(a, R_AARCH64_LDST64_ABS_LO12_NC, 0xf9400001u, 0x678 - 0x100, 0xf9433c01u);
    WORD(a, R_AARCH64_LDST128_ABS_LO12_NC, 0x3dc00000u, 0x670 - 0x100, 0x3dc19c00u);
    WORD(a, R_AARCH64_CALL26, 0x94000000u, 0x1000, 0x94000400u);
    WORD(a, R_AARCH64_CALL26, 0x94000000u, -8, 0x97fffffeu);
    WORD(a, R_AARCH64_JUMP26, 0x94000000u, 0x40, 0x94000010u);
    WORD(a, R_AARCH64_CONDBR19, 0x54000000u, 0x100, 0x54000800u);
    uint32_t w;
    /* out of reach: a page 2^33 bytes away; a call 256 MiB away without, then with, a stub */
    CHECK_EQ_INT(
        apply(a, R_AARCH64_ADR_PREL_PG_HI21, 0x100, 0x90000000u, (int64_t)1 << 33, NULL, NULL, &w),
        TJ_ERR_UNSUPPORTED);
    CHECK_HAS(tj_last_error(), "'sym'");
    CHECK_EQ_INT(apply(a, R_AARCH64_CALL26, 0x100, 0x94000000u, (int64_t)1 << 28, NULL, NULL, &w),
                 TJ_ERR_UNSUPPORTED);
    CHECK_EQ_INT(
        apply(a, R_AARCH64_CALL26, 0x100, 0x94000000u, (int64_t)1 << 28, buf + 0x140, NULL, &w),
        TJ_OK);
    CHECK_MSG(w == 0x94000010u, "bl through the stub: %08x", w);
    /* a misaligned target of a scaled offset, and a GOT relocation without a slot */
    CHECK_EQ_INT(
        apply(a, R_AARCH64_LDST32_ABS_LO12_NC, 0x100, 0xb9400001u, 0x67a - 0x100, NULL, NULL, &w),
        TJ_ERR_CORRUPT);
    CHECK_EQ_INT(apply(a, R_AARCH64_ADR_GOT_PAGE, 0x100, 0x90000000u, 0, NULL, NULL, &w),
                 TJ_ERR_CORRUPT);
    /* GOT: the slot (two pages on, at +8) gets the address; ADRP its page, LDR its offset */
    unsigned char *slot = buf + 0x2008;
    memset(slot, 0, 8);
    CHECK_EQ_INT(apply(a, R_AARCH64_ADR_GOT_PAGE, 0x100, 0x90000000u, 0x777, NULL, slot, &w),
                 TJ_OK);
    CHECK_MSG(w == 0xd0000000u, "adrp of the GOT page: %08x", w);
    uint64_t v;
    memcpy(&v, slot, 8);
    CHECK(v == (uint64_t)(uintptr_t)(buf + 0x100 + 0x777));
    CHECK_EQ_INT(apply(a, R_AARCH64_LD64_GOT_LO12_NC, 0x100, 0xf9400000u, 0x777, NULL, slot, &w),
                 TJ_OK);
    CHECK_MSG(w == 0xf9400400u, "ldr of the GOT slot: %08x", w);
    /* MOVK of bits 16..31 of an absolute address; a checked MOVZ G0 of a wider one refuses */
    rt_reloc r = {.type = R_AARCH64_MOVW_UABS_G1_NC,
                  .P = buf + 0x100,
                  .S = (uintptr_t)0x123456789abcull,
                  .name = "sym"};
    memcpy(buf + 0x100, &(uint32_t){0xf2a00000u}, 4);
    CHECK_EQ_INT(a->apply(&r), TJ_OK);
    memcpy(&w, buf + 0x100, 4);
    CHECK_MSG(w == 0xf2aacf00u, "movk: %08x", w);
    r.type = R_AARCH64_MOVW_UABS_G0;
    r.S = 0x12345;
    CHECK_EQ_INT(a->apply(&r), TJ_ERR_UNSUPPORTED);
    /* data words */
    r = (rt_reloc){.type = R_AARCH64_ABS64, .P = buf + 0x200, .S = 0x1122334455ull, .A = 3};
    CHECK_EQ_INT(a->apply(&r), TJ_OK);
    memcpy(&v, buf + 0x200, 8);
    CHECK(v == 0x1122334458ull);
    r = (rt_reloc){.type = R_AARCH64_PREL32, .P = buf + 0x200, .S = (uintptr_t)buf + 0x100};
    CHECK_EQ_INT(a->apply(&r), TJ_OK);
    int32_t d;
    memcpy(&d, buf + 0x200, 4);
    CHECK_EQ_INT(d, -0x100);
    /* the stub: ldr x16, #8; br x16; the address */
    a->stub(buf + 0x300, (uintptr_t)0xdeadbeef1234ull);
    uint32_t code[2];
    memcpy(code, buf + 0x300, 8);
    memcpy(&v, buf + 0x308, 8);
    CHECK_MSG(code[0] == 0x58000050u && code[1] == 0xd61f0200u, "stub %08x %08x", code[0], code[1]);
    CHECK(v == 0xdeadbeef1234ull);
}

static void x86_64(void) {
    const rt_obj_arch *a = &rt_obj_x86_64;
    CHECK_EQ_INT(a->machine, EM_X86_64);
    CHECK_EQ_INT(a->width(R_X86_64_NONE), 0);
    CHECK(a->width(9999) == SIZE_MAX);
    int32_t d;
    rt_reloc r = {.type = R_X86_64_PLT32,
                  .P = buf + 0x100,
                  .S = (uintptr_t)buf + 0x1104,
                  .A = -4,
                  .name = "sym"};
    CHECK_EQ_INT(a->apply(&r), TJ_OK);
    memcpy(&d, buf + 0x100, 4);
    CHECK_EQ_INT(d, 0x1000);
    r.S = (uintptr_t)buf + ((uintptr_t)1 << 40); /* a far function: out of reach, then a stub */
    CHECK_EQ_INT(a->apply(&r), TJ_ERR_UNSUPPORTED);
    CHECK_HAS(tj_last_error(), "'sym'");
    r.stub = buf + 0x140;
    CHECK_EQ_INT(a->apply(&r), TJ_OK);
    memcpy(&d, buf + 0x100, 4);
    CHECK_EQ_INT(d, 0x3c);
    r = (rt_reloc){.type = R_X86_64_REX_GOTPCRELX,
                   .P = buf + 0x100,
                   .S = 0x1234,
                   .A = -4,
                   .got = buf + 0x2000,
                   .name = "sym"};
    CHECK_EQ_INT(a->apply(&r), TJ_OK);
    memcpy(&d, buf + 0x100, 4);
    CHECK_EQ_INT(d, 0x2000 - 0x100 - 4);
    uint64_t v;
    memcpy(&v, buf + 0x2000, 8);
    CHECK(v == 0x1234);
    a->stub(buf + 0x300, (uintptr_t)0xdeadbeef1234ull);
    CHECK(buf[0x300] == 0xff && buf[0x301] == 0x25);
    memcpy(&v, buf + 0x306, 8);
    CHECK(v == 0xdeadbeef1234ull);
}

int main(void) {
    if (posix_memalign((void **)&buf, 4096, 0x4000))
        return 1;
    memset(buf, 0, 0x4000);
    aarch64();
    x86_64();
    const rt_obj_arch *host = rt_obj_arch_host();
#if defined(__x86_64__)
    CHECK(host == &rt_obj_x86_64);
#elif defined(__aarch64__)
    CHECK(host == &rt_obj_aarch64);
#endif
    printf("host linker: %s\n", host ? host->name : "none");
    free(buf);
    return check_done();
}
