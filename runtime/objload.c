/* objload.c — a small static linker-loader for the CPU backend's objects (what LLVM's
 * RuntimeDyld / JITLink do for ORC, for the narrow subset our code generator emits: PIC, small
 * code model, .text/.rodata* sections, PC-relative and absolute relocations, calls to libm).
 * Every object of a blob is laid out in one anonymous mapping: executable sections, then a
 * 16-byte stub per external function (libm may lie beyond a call's direct reach), then read-only
 * sections and GOT slots, then writable ones. After relocation the instruction cache is made to
 * see the code, the executable part becomes r-x and the read-only part r--. The object is checked
 * before anything is written; a blob is rejected whole. What differs per architecture (the ELF
 * machine, the stub, the relocations) is in objload_<arch>.c; the host's part links. With
 * TJ_PERF_MAP=1 every loaded function is appended to /tmp/perf-<pid>.map, where `perf report`
 * finds the names of JIT code. */
#include "runtime/objload.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "runtime/objload_arch.h"
#include "runtime/runtime.h"

#if defined(__x86_64__)
#include <cpuid.h>
#elif defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif

const rt_obj_arch *rt_obj_arch_host(void) {
#if defined(__x86_64__)
    return &rt_obj_x86_64;
#elif defined(__aarch64__)
    return &rt_obj_aarch64;
#else
    return NULL;
#endif
}

struct rt_obj {
    unsigned char *base;
    size_t size;
};

enum { MAX_OBJS = RT_OBJ_MAX_PARTS };

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
    size_t *ext;     /* per symbol: index+1 of its stub/GOT entry (externals and globals) or 0 */
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
static tj_status parse(elf_in *e, int k, const rt_obj_arch *arch) {
    if (e->size < sizeof(Elf64_Ehdr) || memcmp(e->p, ELFMAG, SELFMAG) != 0)
        return corrupt(k, "not an ELF object; bytes", e->size);
    e->eh = (const Elf64_Ehdr *)e->p;
    const Elf64_Ehdr *h = e->eh;
    if (h->e_ident[EI_CLASS] != ELFCLASS64 || h->e_ident[EI_DATA] != ELFDATA2LSB ||
        h->e_machine != arch->machine)
        return ir_errorf(TJ_ERR_UNSUPPORTED,
                         "object loader: object %d is not %s ELF64 (machine %u); this machine "
                         "links %s code",
                         k, arch->name, h->e_machine, arch->name);
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

tj_status rt_obj_out_of_reach(const rt_reloc *r, const char *what) {
    return ir_errorf(TJ_ERR_UNSUPPORTED,
                     "object loader: object %d: '%s' is out of reach of a %s relocation", r->obj,
                     r->name, what);
}

/* Applies the relocations of every SHT_RELA section of object k through the architecture's
 * part. stubs and got are where the externals' entries start; e->ext numbers them. */
static tj_status relocate(elf_in *objs, int n, int k, unsigned char *base, size_t stubs, size_t got,
                          const rt_obj_arch *arch) {
    elf_in *e = &objs[k];
    for (uint32_t r = 0; r < e->n_sh; r++) {
        const Elf64_Shdr *rs = &e->sh[r];
        if (rs->sh_type == SHT_REL)
            return ir_errorf(TJ_ERR_UNSUPPORTED,
                             "object loader: object %d: REL relocations (%s code uses RELA)", k,
                             arch->name);
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
            size_t width = arch->width(type);
            if (width == 0)
                continue;
            if (width == SIZE_MAX)
                return ir_errorf(TJ_ERR_UNSUPPORTED,
                                 "object loader: object %d: %s relocation type %u is not handled",
                                 k, arch->name, type);
            if (si >= e->n_sym || si == 0)
                return corrupt(k, "a relocation of a symbol that does not exist; symbol", si);
            if (rel[j].r_offset > ts->sh_size || ts->sh_size - rel[j].r_offset < width)
                return corrupt(k, "a relocation outside its section; offset", rel[j].r_offset);
            rt_reloc rl = {.type = type,
                           .P = base + e->sec_off[rs->sh_info] + rel[j].r_offset,
                           .A = rel[j].r_addend,
                           .name = sym_name(e, si),
                           .obj = k};
            void *ext = NULL;
            tj_status st = sym_addr(objs, n, k, base, si, &rl.S, &ext);
            if (st)
                return st;
            size_t slot = e->ext[si];
            if (slot) {
                rl.got = base + got + 8 * (slot - 1);
                if (ext)
                    rl.stub = base + stubs + RT_OBJ_STUB * (slot - 1);
            }
            if ((st = arch->apply(&rl)))
                return st;
        }
    }
    return TJ_OK;
}

/* The objects of a blob: one ELF object, or a container (of a split compile, or of the objects
 * a program's kernels came from). */
static int blob_objects(const unsigned char *p, size_t size, elf_in *objs) {
    const void *part[MAX_OBJS];
    size_t len[MAX_OBJS];
    int n = rt_obj_parts(p, size, part, len);
    for (int i = 0; i < n; i++)
        objs[i].p = part[i], objs[i].size = len[i];
    return n;
}

int rt_obj_parts(const void *blob, size_t size, const void **part, size_t *len) {
    const unsigned char *p = blob;
    if (size < 4 || memcmp(p, "TJO2", 4) != 0) {
        part[0] = p, len[0] = size;
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
        part[i] = p + off, len[i] = (size_t)l;
        off += (size_t)l;
    }
    return off == size ? (int)n : 0;
}

void *rt_obj_join(const void *const *part, const size_t *len, int n, size_t *size) {
    if (n < 1 || n > MAX_OBJS)
        return (void)ir_errorf(TJ_ERR_INVALID, "object loader: %d objects to join (1 to %d)", n,
                               MAX_OBJS),
               NULL;
    size_t total = n > 1 ? 8 + 8 * (size_t)n : 0;
    for (int i = 0; i < n; i++)
        total += n > 1 ? (len[i] + 7) & ~(size_t)7 : len[i];
    unsigned char *p = calloc(1, total ? total : 1);
    if (!p)
        return (void)ir_errorf(TJ_ERR_OOM, "object loader: out of memory joining %d objects", n),
               NULL;
    *size = total;
    if (n == 1) {
        memcpy(p, part[0], len[0]);
        return p;
    }
    uint32_t nn = (uint32_t)n;
    memcpy(p, "TJO2", 4);
    memcpy(p + 4, &nn, 4);
    size_t off = 8 + 8 * (size_t)n;
    for (int i = 0; i < n; i++) {
        uint64_t l = (len[i] + 7) & ~(size_t)7;
        memcpy(p + 8 + 8 * i, &l, 8);
        memcpy(p + off, part[i], len[i]);
        off += l;
    }
    return p;
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

static void perf_map(const elf_in *objs, int n, const unsigned char *base);

static rt_obj *load_aligned(const void *blob, size_t size, const char *const *syms, uint32_t n_syms,
                            void **addrs) {
    const rt_obj_arch *arch = rt_obj_arch_host();
    if (!arch)
        return (void)ir_errorf(TJ_ERR_UNSUPPORTED,
                               "object loader: no linker for this architecture (x86-64 and "
                               "aarch64 have one)"),
               NULL;
    if (!blob)
        return (void)ir_errorf(TJ_ERR_INVALID, "object loader: the object is NULL"), NULL;
    elf_in *objs = calloc(MAX_OBJS, sizeof *objs); /* a container holds up to MAX_OBJS */
    if (!objs)
        return (void)ir_errorf(TJ_ERR_OOM, "object loader: out of memory"), NULL;
    int n = blob_objects(blob, size, objs);
    if (!n) {
        free(objs);
        return (void)ir_errorf(TJ_ERR_CORRUPT,
                               "object loader: a malformed object container (%zu bytes)", size),
               NULL;
    }
    tj_status st = TJ_OK;
    size_t page = (size_t)sysconf(_SC_PAGESIZE), part_end[3] = {0, 0, 0}, n_ext = 0;
    /* lay out: part 0 (text), then the stubs (16-aligned); part 1 (read-only), then the GOT;
     * part 2. Undefined symbols get a stub and a GOT slot, defined globals a GOT slot (PIC code
     * may reach a global through the GOT). */
    for (int pass = 0; pass < 3 && !st; pass++) {
        size_t off = pass == 0 ? 0 : part_end[pass - 1];
        if (pass == 1)
            off = align_up(off + RT_OBJ_STUB * n_ext, page);
        else if (pass == 2)
            off = align_up(off + 8 * n_ext, page);
        for (int k = 0; k < n && !st; k++) {
            elf_in *e = &objs[k];
            if (pass == 0) {
                if ((st = parse(e, k, arch)))
                    break;
                e->sec_off = malloc(e->n_sh * sizeof *e->sec_off);
                e->ext = calloc(e->n_sym + 1, sizeof *e->ext);
                if (!e->sec_off || !e->ext) {
                    st = ir_errorf(TJ_ERR_OOM, "object loader: out of memory");
                    break;
                }
                for (uint32_t i = 0; i < e->n_sh; i++)
                    e->sec_off[i] = SIZE_MAX;
                for (uint32_t i = 1; i < e->n_sym; i++) {
                    int bind = ELF64_ST_BIND(e->sym[i].st_info);
                    if (e->sym[i].st_name &&
                        (e->sym[i].st_shndx == SHN_UNDEF || bind == STB_GLOBAL || bind == STB_WEAK))
                        e->ext[i] = ++n_ext;
                }
            }
            for (uint32_t i = 0; i < e->n_sh; i++) {
                if (part_of(&e->sh[i]) != pass)
                    continue;
                off = align_up(off, e->sh[i].sh_addralign);
                e->sec_off[i] = off;
                off += e->sh[i].sh_size;
            }
        }
        part_end[pass] = pass == 0 ? align_up(off, RT_OBJ_STUB) : align_up(off, 8);
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
    size_t stubs = part_end[0], got = part_end[1], text_end = stubs + RT_OBJ_STUB * n_ext;
    for (int k = 0; k < n && !st; k++) {
        elf_in *e = &objs[k];
        for (uint32_t i = 0; i < e->n_sh; i++)
            if (e->sec_off[i] != SIZE_MAX && e->sh[i].sh_type != SHT_NOBITS)
                memcpy(o->base + e->sec_off[i], e->p + e->sh[i].sh_offset, e->sh[i].sh_size);
        for (uint32_t i = 1; i < e->n_sym && !st; i++) { /* the externals' stubs */
            if (!e->ext[i] || e->sym[i].st_shndx != SHN_UNDEF)
                continue;
            uintptr_t S = 0;
            void *ext = NULL;
            if ((st = sym_addr(objs, n, k, o->base, i, &S, &ext)))
                break;
            arch->stub(o->base + stubs + RT_OBJ_STUB * (e->ext[i] - 1), S);
        }
    }
    for (int k = 0; k < n && !st; k++)
        st = relocate(objs, n, k, o->base, stubs, got, arch);
    for (uint32_t i = 0; i < n_syms && !st; i++)
        if (!(addrs[i] = find_global(objs, n, o ? o->base : NULL, syms[i])))
            st = ir_errorf(TJ_ERR_CORRUPT, "object loader: no symbol '%s' in the object", syms[i]);
    if (!st) /* the code was written as data: the instruction cache must see it (not on x86) */
        __builtin___clear_cache((char *)o->base, (char *)o->base + text_end);
    size_t exec_end = align_up(text_end, page);
    if (!st &&
        (mprotect(o->base, exec_end, PROT_READ | PROT_EXEC) ||
         (part_end[1] > exec_end &&
          mprotect(o->base + exec_end, align_up(got + 8 * n_ext, page) - exec_end, PROT_READ))))
        st = ir_errorf(TJ_ERR_RUNTIME, "object loader: mprotect failed");
    if (!st)
        perf_map(objs, n, o->base);
    free_ins(objs, n);
    free(objs);
    if (st) {
        rt_obj_free(o);
        return NULL;
    }
    return o;
}

/* TJ_PERF_MAP=1: "<start> <size> tracejit:<name>" per function of the objects, appended to
 * /tmp/perf-<pid>.map (the file perf reads for JIT code). Lines are written whole (O_APPEND, one
 * write each), so loads on several threads interleave only between lines. */
static void perf_map(const elf_in *objs, int n, const unsigned char *base) {
    const char *v = getenv("TJ_PERF_MAP"); /* read per load: a load is milliseconds anyway */
    if (!v || !*v || strcmp(v, "0") == 0)
        return;
    char path[64];
    snprintf(path, sizeof path, "/tmp/perf-%ld.map", (long)getpid());
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0)
        return; /* a profiling aid: never an error of the load */
    for (int k = 0; k < n; k++) {
        const elf_in *e = &objs[k];
        for (uint32_t i = 1; i < e->n_sym; i++) {
            const Elf64_Sym *s = &e->sym[i];
            if (ELF64_ST_TYPE(s->st_info) != STT_FUNC || s->st_shndx == SHN_UNDEF ||
                s->st_shndx >= e->n_sh || e->sec_off[s->st_shndx] == SIZE_MAX || !s->st_size)
                continue;
            char line[320];
            int len =
                snprintf(line, sizeof line, "%lx %lx tracejit:%.200s\n",
                         (unsigned long)(uintptr_t)(base + e->sec_off[s->st_shndx] + s->st_value),
                         (unsigned long)s->st_size, sym_name(e, i));
            if (len > 0 && write(fd, line, (size_t)len) < 0)
                break;
        }
    }
    close(fd);
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
#elif defined(__aarch64__) && defined(__linux__)
    w[0] = (uint32_t)getauxval(AT_HWCAP); /* the kernel's HWCAP bits: ASIMD, SVE, dot product... */
    w[1] = (uint32_t)(getauxval(AT_HWCAP) >> 32);
    w[2] = (uint32_t)getauxval(AT_HWCAP2);
    w[3] = (uint32_t)(getauxval(AT_HWCAP2) >> 32);
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
