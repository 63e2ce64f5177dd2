/* objload.c — a small static linker-loader for the CPU backend's objects (what LLVM's
 * RuntimeDyld / JITLink do for ORC, for the narrow subset our code generator emits: PIC, small
 * code model, .text/.rodata* sections, PC-relative and absolute relocations, calls to libm).
 * Every object of a blob is laid out in one anonymous mapping: executable sections, then a
 * 16-byte stub per external function (`jmp *0(%rip)` + its address: libm may lie more than
 * 2 GiB away), then read-only sections and GOT slots, then writable ones. After relocation the
 * executable part becomes r-x and the read-only part r--. The object is checked before anything
 * is written; a blob is rejected whole. */
#include "runtime/objload.h"

#include <dlfcn.h>
#include <elf.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "runtime/runtime.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

struct rt_obj {
    unsigned char *base;
    size_t size;
};

enum { MAX_OBJS = 2 };

/* An object being linked: its bytes, headers, and where each section went. */
typedef struct elf_in {
    const unsigned char *p;
    size_t size;
    const Elf64_Ehdr *eh;
    const Elf64_Shdr *sh;
    uint32_t n_sh;
    const Elf64_Sym *sym;
    uint32_t n_sym;
    const char *str;
    size_t str_size;
    size_t *sec_off; /* per section: offset in the mapping, or SIZE_MAX when not loaded */
    size_t *ext;     /* per symbol: index+1 of its stub/GOT entry (externals), 0 otherwise */
} elf_in;

/* Externals the generated code calls: libm for exact math and frem, memset/memcpy for loops
 * LLVM recognised. Anything else is looked up in the process (dlsym). */
static const struct {
    const char *name;
    void *addr;
} known[] = {
    {"memset", (void *)memset}, {"memcpy", (void *)memcpy}, {"memmove", (void *)memmove},
    {"expf", (void *)expf},     {"exp", (void *)exp},       {"logf", (void *)logf},
    {"log", (void *)log},       {"sinf", (void *)sinf},     {"sin", (void *)sin},
    {"cosf", (void *)cosf},     {"cos", (void *)cos},       {"tanhf", (void *)tanhf},
    {"tanh", (void *)tanh},     {"powf", (void *)powf},     {"pow", (void *)pow},
    {"fmodf", (void *)fmodf},   {"fmod", (void *)fmod},     {"exp2f", (void *)exp2f},
    {"exp2", (void *)exp2},     {"ldexpf", (void *)ldexpf}, {"ldexp", (void *)ldexp},
    {"fmaf", (void *)fmaf},     {"fma", (void *)fma},       {"sincosf", (void *)sincosf},
    {"sincos", (void *)sincos}, {"atanf", (void *)atanf},   {"atan", (void *)atan},
    {"asinf", (void *)asinf},   {"asin", (void *)asin},     {"acosf", (void *)acosf},
    {"acos", (void *)acos},     {"erff", (void *)erff},     {"erf", (void *)erf},
};

static void *resolve_external(const char *name) {
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strcmp(known[i].name, name) == 0)
            return known[i].addr;
    return dlsym(RTLD_DEFAULT, name);
}

static tj_status corrupt(int k, const char *why, unsigned long long v) {
    return ir_errorf(TJ_ERR_CORRUPT, "object loader: object %d: %s (%llu)", k, why, v);
}

/* Headers, section table and symbol table of object k, checked. */
static tj_status parse(elf_in *e, int k) {
    if (e->size < sizeof(Elf64_Ehdr) || memcmp(e->p, ELFMAG, SELFMAG) != 0)
        return corrupt(k, "not an ELF object; bytes", e->size);
    e->eh = (const Elf64_Ehdr *)e->p;
    const Elf64_Ehdr *h = e->eh;
    if (h->e_ident[EI_CLASS] != ELFCLASS64 || h->e_ident[EI_DATA] != ELFDATA2LSB ||
        h->e_machine != EM_X86_64)
        return ir_errorf(TJ_ERR_UNSUPPORTED,
                         "object loader: object %d is not x86-64 ELF64 (machine %u); this loader "
                         "links x86-64 code only",
                         k, h->e_machine);
    if (h->e_type != ET_REL)
        return corrupt(k, "not a relocatable object; type", h->e_type);
    if (h->e_shentsize != sizeof(Elf64_Shdr) || h->e_shnum == 0 || h->e_shoff > e->size ||
        (e->size - h->e_shoff) / sizeof(Elf64_Shdr) < h->e_shnum || h->e_shoff % 8 != 0)
        return corrupt(k, "a bad section header table; sections", h->e_shnum);
    e->sh = (const Elf64_Shdr *)(e->p + h->e_shoff);
    e->n_sh = h->e_shnum;
    for (uint32_t i = 0; i < e->n_sh; i++) {
        const Elf64_Shdr *s = &e->sh[i];
        if (s->sh_type != SHT_NOBITS && (s->sh_type != SHT_NULL || (s->sh_flags & SHF_ALLOC)) &&
            (s->sh_offset > e->size || s->sh_size > e->size - s->sh_offset))
            return corrupt(k, "a section lies outside the object; section", i);
        if (s->sh_addralign > 4096 || (s->sh_addralign & (s->sh_addralign - 1)))
            return corrupt(k, "a bad section alignment; section", i);
        if ((s->sh_flags & SHF_ALLOC) && s->sh_size > ((size_t)1 << 30))
            return corrupt(k, "a section over 1 GiB; section", i);
        if ((s->sh_flags & SHF_TLS) || s->sh_type == SHT_INIT_ARRAY ||
            s->sh_type == SHT_FINI_ARRAY || s->sh_type == SHT_PREINIT_ARRAY)
            return ir_errorf(TJ_ERR_UNSUPPORTED,
                             "object loader: object %d: section %u is thread-local or a "
                             "constructor list, which generated kernels never have",
                             k, i);
        if (s->sh_type == SHT_SYMTAB) {
            if (e->sym)
                return corrupt(k, "two symbol tables; section", i);
            if (s->sh_entsize != sizeof(Elf64_Sym) || s->sh_link >= e->n_sh ||
                s->sh_offset % 8 != 0 || e->sh[s->sh_link].sh_type != SHT_STRTAB)
                return corrupt(k, "a bad symbol table; section", i);
            e->sym = (const Elf64_Sym *)(e->p + s->sh_offset);
            e->n_sym = (uint32_t)(s->sh_size / sizeof(Elf64_Sym));
            const Elf64_Shdr *st = &e->sh[s->sh_link];
            e->str = (const char *)e->p + st->sh_offset;
            e->str_size = st->sh_size;
            if (!e->str_size || e->str[e->str_size - 1] != 0)
                return corrupt(k, "an unterminated string table; section", s->sh_link);
        }
    }
    if (!e->sym)
        return corrupt(k, "no symbol table; sections", e->n_sh);
    for (uint32_t i = 0; i < e->n_sym; i++) {
        const Elf64_Sym *s = &e->sym[i];
        if (s->st_name >= e->str_size)
            return corrupt(k, "a symbol name outside the string table; symbol", i);
        if (s->st_shndx == SHN_COMMON)
            return ir_errorf(TJ_ERR_UNSUPPORTED, "object loader: object %d: common symbol '%s'", k,
                             e->str + s->st_name);
        if (s->st_shndx != SHN_UNDEF && s->st_shndx != SHN_ABS && s->st_shndx >= e->n_sh)
            return corrupt(k, "a symbol in a section that does not exist; symbol", i);
    }
    return TJ_OK;
}

static size_t align_up(size_t v, size_t a) {
    return a > 1 ? (v + a - 1) & ~(a - 1) : v;
}

/* Which part of the mapping a section goes to: 0 text, 1 read-only, 2 writable, -1 none. */
static int part_of(const Elf64_Shdr *s) {
    if (!(s->sh_flags & SHF_ALLOC) || s->sh_size == 0)
        return -1;
    return (s->sh_flags & SHF_EXECINSTR) ? 0 : (s->sh_flags & SHF_WRITE) ? 2 : 1;
}

/* The name of symbol i of e. */
static const char *sym_name(const elf_in *e, uint32_t i) {
    return e->str + e->sym[i].st_name;
}

/* A defined global symbol `name` in any object: its address, or NULL. */
static void *find_global(elf_in *objs, int n, unsigned char *base, const char *name) {
    for (int k = 0; k < n; k++) {
        const elf_in *e = &objs[k];
        for (uint32_t i = 1; i < e->n_sym; i++) {
            const Elf64_Sym *s = &e->sym[i];
            int bind = ELF64_ST_BIND(s->st_info);
            if ((bind != STB_GLOBAL && bind != STB_WEAK) || s->st_shndx == SHN_UNDEF ||
                strcmp(sym_name(e, i), name) != 0)
                continue;
            if (s->st_shndx == SHN_ABS)
                return (void *)(uintptr_t)s->st_value;
            if (e->sec_off[s->st_shndx] == SIZE_MAX || s->st_value > e->sh[s->st_shndx].sh_size)
                return NULL;
            return base + e->sec_off[s->st_shndx] + s->st_value;
        }
    }
    return NULL;
}

/* Symbol i of object e: its address (S) and, for an external, its stub / GOT slot. */
static tj_status sym_addr(elf_in *objs, int n, int k, unsigned char *base, uint32_t i, uintptr_t *S,
                          void **resolved) {
    elf_in *e = &objs[k];
    const Elf64_Sym *s = &e->sym[i];
    if (s->st_shndx == SHN_ABS) {
        *S = (uintptr_t)s->st_value;
        return TJ_OK;
    }
    if (s->st_shndx != SHN_UNDEF) {
        if (e->sec_off[s->st_shndx] == SIZE_MAX)
            return corrupt(k, "a relocation against a section that is not loaded; symbol", i);
        /* in integers: a damaged st_value may point anywhere, and is only ever written */
        *S = (uintptr_t)base + e->sec_off[s->st_shndx] + (uintptr_t)s->st_value;
        return TJ_OK;
    }
    const char *name = sym_name(e, i);
    void *a = find_global(objs, n, base, name);
    if (!a)
        a = resolve_external(name);
    if (!a)
        return ir_errorf(TJ_ERR_UNSUPPORTED, "object loader: object %d: undefined symbol '%s'", k,
                         name);
    *S = (uintptr_t)a;
    *resolved = a;
    return TJ_OK;
}

static int fits32(int64_t v) {
    return v >= INT32_MIN && v <= INT32_MAX;
}

/* Applies the relocations of every SHT_RELA section of object k. stubs and got are where the
 * externals' entries start; e->ext numbers them. */
static tj_status relocate(elf_in *objs, int n, int k, unsigned char *base, size_t stubs,
                          size_t got) {
    elf_in *e = &objs[k];
    for (uint32_t r = 0; r < e->n_sh; r++) {
        const Elf64_Shdr *rs = &e->sh[r];
        if (rs->sh_type == SHT_REL)
            return ir_errorf(TJ_ERR_UNSUPPORTED,
                             "object loader: object %d: REL relocations (x86-64 uses RELA)", k);
        if (rs->sh_type != SHT_RELA)
            continue;
        if (rs->sh_info >= e->n_sh || rs->sh_entsize != sizeof(Elf64_Rela) ||
            rs->sh_offset % 8 != 0)
            return corrupt(k, "a bad relocation section", r);
        const Elf64_Shdr *ts = &e->sh[rs->sh_info];
        if (e->sec_off[rs->sh_info] == SIZE_MAX)
            continue; /* relocations of a section not loaded (debug info) */
        const Elf64_Rela *rel = (const Elf64_Rela *)(e->p + rs->sh_offset);
        size_t nr = rs->sh_size / sizeof *rel;
        for (size_t j = 0; j < nr; j++) {
            uint32_t type = ELF64_R_TYPE(rel[j].r_info), si = ELF64_R_SYM(rel[j].r_info);
            size_t width = type == R_X86_64_64 || type == R_X86_64_PC64 ? 8 : 4;
            if (type == R_X86_64_NONE)
                continue;
            if (si >= e->n_sym || si == 0)
                return corrupt(k, "a relocation of a symbol that does not exist; symbol", si);
            if (rel[j].r_offset > ts->sh_size || ts->sh_size - rel[j].r_offset < width)
                return corrupt(k, "a relocation outside its section; offset", rel[j].r_offset);
            unsigned char *P = base + e->sec_off[rs->sh_info] + rel[j].r_offset;
            uintptr_t S = 0;
            void *ext = NULL;
            tj_status st = sym_addr(objs, n, k, base, si, &S, &ext);
            if (st)
                return st;
            int64_t A = rel[j].r_addend, v;
            size_t slot = e->ext[si];
            switch (type) {
            case R_X86_64_64:
                v = (int64_t)(S + (uint64_t)A);
                memcpy(P, &v, 8);
                break;
            case R_X86_64_PC64:
                v = (int64_t)(S + (uint64_t)A - (uintptr_t)P);
                memcpy(P, &v, 8);
                break;
            case R_X86_64_PC32:
            case R_X86_64_PLT32:
                v = (int64_t)(S + (uint64_t)A - (uintptr_t)P);
                if (!fits32(v) && slot && ext) /* a far external function: through its stub */
                    v = (int64_t)((uintptr_t)(base + stubs + 16 * (slot - 1)) + (uint64_t)A -
                                  (uintptr_t)P);
                if (!fits32(v))
                    return ir_errorf(TJ_ERR_UNSUPPORTED,
                                     "object loader: object %d: '%s' is out of reach of a 32-bit "
                                     "PC-relative relocation",
                                     k, sym_name(e, si));
                memcpy(P, &(int32_t){(int32_t)v}, 4);
                break;
            case R_X86_64_GOTPCREL:
            case R_X86_64_GOTPCRELX:
            case R_X86_64_REX_GOTPCRELX: {
                if (!slot)
                    return corrupt(k, "a GOT relocation without a slot; symbol", si);
                unsigned char *G = base + got + 8 * (slot - 1);
                memcpy(G, &S, 8);
                v = (int64_t)((uintptr_t)G + (uint64_t)A - (uintptr_t)P);
                memcpy(P, &(int32_t){(int32_t)v}, 4); /* within the mapping: fits */
                break;
            }
            case R_X86_64_32:
            case R_X86_64_32S:
                v = (int64_t)(S + (uint64_t)A);
                if (type == R_X86_64_32 ? (v < 0 || v > (int64_t)UINT32_MAX) : !fits32(v))
                    return ir_errorf(TJ_ERR_UNSUPPORTED,
                                     "object loader: object %d: an absolute 32-bit relocation of "
                                     "'%s' (code not compiled as PIC)",
                                     k, sym_name(e, si));
                memcpy(P, &(uint32_t){(uint32_t)v}, 4);
                break;
            default:
                return ir_errorf(TJ_ERR_UNSUPPORTED,
                                 "object loader: object %d: relocation type %u is not handled", k,
                                 type);
            }
        }
    }
    return TJ_OK;
}

/* The objects of a blob: one ELF object, or the container of a split compile. */
static int blob_objects(const unsigned char *p, size_t size, elf_in *objs) {
    if (size < 4 || memcmp(p, "TJO2", 4) != 0) {
        objs[0].p = p, objs[0].size = size;
        return 1;
    }
    uint32_t n;
    if (size < 8 || (memcpy(&n, p + 4, 4), n < 1 || n > MAX_OBJS) || size < 8 + 8 * (size_t)n)
        return 0;
    size_t off = 8 + 8 * (size_t)n;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t l;
        memcpy(&l, p + 8 + 8 * i, 8);
        if (l > size - off || off % 8 != 0)
            return 0;
        objs[i].p = p + off, objs[i].size = (size_t)l;
        off += (size_t)l;
    }
    return off == size ? (int)n : 0;
}

static void free_ins(elf_in *objs, int n) {
    for (int k = 0; k < n; k++) {
        free(objs[k].sec_off);
        free(objs[k].ext);
    }
}

static rt_obj *load_aligned(const void *blob, size_t size, const char *const *syms, uint32_t n_syms,
                            void **addrs);

/* The ELF structures are read in place: a blob at an address that is not 8-byte aligned (one
 * inside a program image, after sections of any length) is copied first. */
rt_obj *rt_obj_load(const void *blob, size_t size, const char *const *syms, uint32_t n_syms,
                    void **addrs) {
    if (!blob || ((uintptr_t)blob & 7) == 0)
        return load_aligned(blob, size, syms, n_syms, addrs);
    void *copy = malloc(size ? size : 1);
    if (!copy)
        return (void)ir_errorf(TJ_ERR_OOM, "object loader: out of memory (%zu bytes)", size), NULL;
    memcpy(copy, blob, size);
    rt_obj *o = load_aligned(copy, size, syms, n_syms, addrs);
    free(copy);
    return o;
}

static rt_obj *load_aligned(const void *blob, size_t size, const char *const *syms, uint32_t n_syms,
                            void **addrs) {
    elf_in objs[MAX_OBJS];
    memset(objs, 0, sizeof objs);
    if (!blob)
        return (void)ir_errorf(TJ_ERR_INVALID, "object loader: the object is NULL"), NULL;
    int n = blob_objects(blob, size, objs);
    if (!n)
        return (void)ir_errorf(TJ_ERR_CORRUPT,
                               "object loader: a malformed object container (%zu bytes)", size),
               NULL;
    tj_status st = TJ_OK;
    size_t page = (size_t)sysconf(_SC_PAGESIZE), part_end[3] = {0, 0, 0}, n_ext = 0;
    /* lay out: part 0 (text), then the stubs; part 1 (read-only), then the GOT; part 2 */
    for (int pass = 0; pass < 3 && !st; pass++) {
        size_t off = pass == 0 ? 0 : part_end[pass - 1];
        if (pass == 1)
            off = align_up(off + 16 * n_ext, page);
        else if (pass == 2)
            off = align_up(off + 8 * n_ext, page);
        for (int k = 0; k < n && !st; k++) {
            elf_in *e = &objs[k];
            if (pass == 0) {
                if ((st = parse(e, k)))
                    break;
                e->sec_off = malloc(e->n_sh * sizeof *e->sec_off);
                e->ext = calloc(e->n_sym + 1, sizeof *e->ext);
                if (!e->sec_off || !e->ext) {
                    st = ir_errorf(TJ_ERR_OOM, "object loader: out of memory");
                    break;
                }
                for (uint32_t i = 0; i < e->n_sh; i++)
                    e->sec_off[i] = SIZE_MAX;
                for (uint32_t i = 1; i < e->n_sym; i++)
                    if (e->sym[i].st_shndx == SHN_UNDEF && e->sym[i].st_name)
                        e->ext[i] = ++n_ext;
            }
            for (uint32_t i = 0; i < e->n_sh; i++) {
                if (part_of(&e->sh[i]) != pass)
                    continue;
                off = align_up(off, e->sh[i].sh_addralign);
                e->sec_off[i] = off;
                off += e->sh[i].sh_size;
            }
        }
        part_end[pass] = off;
    }
    size_t total = align_up(part_end[2] > 0 ? part_end[2] : 1, page);
    rt_obj *o = st ? NULL : calloc(1, sizeof *o);
    if (!st && !o)
        st = ir_errorf(TJ_ERR_OOM, "object loader: out of memory");
    if (!st) {
        void *m = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            st = ir_errorf(TJ_ERR_OOM, "object loader: cannot map %zu bytes", total);
        else
            o->base = m, o->size = total;
    }
    size_t stubs = part_end[0], got = part_end[1];
    for (int k = 0; k < n && !st; k++) {
        elf_in *e = &objs[k];
        for (uint32_t i = 0; i < e->n_sh; i++)
            if (e->sec_off[i] != SIZE_MAX && e->sh[i].sh_type != SHT_NOBITS)
                memcpy(o->base + e->sec_off[i], e->p + e->sh[i].sh_offset, e->sh[i].sh_size);
        /* the externals' stubs: jmp *0(%rip); .quad address */
        for (uint32_t i = 1; i < e->n_sym && !st; i++) {
            if (!e->ext[i])
                continue;
            uintptr_t S = 0;
            void *ext = NULL;
            if ((st = sym_addr(objs, n, k, o->base, i, &S, &ext)))
                break;
            unsigned char *stub = o->base + stubs + 16 * (e->ext[i] - 1);
            static const unsigned char jmp[6] = {0xff, 0x25, 0, 0, 0, 0};
            memcpy(stub, jmp, 6);
            memcpy(stub + 6, &S, 8);
            memset(stub + 14, 0xcc, 2); /* int3 padding */
        }
    }
    for (int k = 0; k < n && !st; k++)
        st = relocate(objs, n, k, o->base, stubs, got);
    for (uint32_t i = 0; i < n_syms && !st; i++)
        if (!(addrs[i] = find_global(objs, n, o ? o->base : NULL, syms[i])))
            st = ir_errorf(TJ_ERR_CORRUPT, "object loader: no symbol '%s' in the object", syms[i]);
    if (!st && (mprotect(o->base, align_up(stubs + 16 * n_ext, page), PROT_READ | PROT_EXEC) ||
                (part_end[1] > align_up(stubs + 16 * n_ext, page) &&
                 mprotect(o->base + align_up(stubs + 16 * n_ext, page),
                          align_up(got + 8 * n_ext, page) - align_up(stubs + 16 * n_ext, page),
                          PROT_READ))))
        st = ir_errorf(TJ_ERR_RUNTIME, "object loader: mprotect failed");
    free_ins(objs, n);
    if (st) {
        rt_obj_free(o);
        return NULL;
    }
    return o;
}

void rt_obj_free(rt_obj *o) {
    if (!o)
        return;
    if (o->base)
        munmap(o->base, o->size);
    free(o);
}

size_t rt_obj_mapped_bytes(const rt_obj *o) {
    return o ? o->size : 0;
}

/* ---- host features --------------------------------------------------------------------------- */
void rt_cpu_features(uint32_t w[RT_CPU_WORDS]) {
    memset(w, 0, RT_CPU_WORDS * sizeof *w);
#if defined(__x86_64__)
    unsigned a, b, c, d, max = __get_cpuid_max(0, NULL);
    if (max >= 1 && __get_cpuid(1, &a, &b, &c, &d)) {
        w[0] = c & ~(1u << 31); /* bit 31: running under a hypervisor, not an ISA feature */
        w[1] = d;
    }
    if (max >= 7) {
        __cpuid_count(7, 0, a, b, c, d);
        w[2] = b, w[3] = c, w[4] = d;
        __cpuid_count(7, 1, a, b, c, d);
        w[5] = a;
    }
    if (__get_cpuid_max(0x80000000u, NULL) >= 0x80000001u &&
        __get_cpuid(0x80000001u, &a, &b, &c, &d))
        w[6] = c, w[7] = d;
    if (w[0] & (1u << 27)) { /* OSXSAVE: XCR0 says which register state the OS saves */
        uint32_t lo, hi;
        __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
        w[8] = lo;
    }
#endif
}

int rt_cpu_features_cover(const uint32_t have[RT_CPU_WORDS], const uint32_t need[RT_CPU_WORDS],
                          int *word, uint32_t *bits) {
    for (int i = 0; i < RT_CPU_WORDS; i++)
        if (need[i] & ~have[i]) {
            *word = i;
            *bits = need[i] & ~have[i];
            return 0;
        }
    return 1;
}
