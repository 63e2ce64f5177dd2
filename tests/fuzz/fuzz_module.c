/* fuzz_module.c — libFuzzer target for the module loader (jit/module.c): the manifest's lines,
 * the graph file it names (text IR through the parser and the verifier, parameters against the
 * signature) and the variables it binds. The input is "manifest \0 graph": the graph is written
 * as g.tjir with its true checksum substituted for the word CHECKSUM in the manifest (so inputs
 * get past the checksum test), beside a fixed valid variables.ckpt holding an f32 scalar "x"
 * (CKSUM_VARS in the manifest is replaced by its checksum). The manifest is sealed with its own
 * checksum line, as tj_module_save writes it. Graphs run on the interpreter. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/runtime.h"
#include <tracejit.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[64];
static unsigned long long vars_sum;

static void cleanup(void) {
    const char *files[3] = {"variables.ckpt", "g.tjir", "module.tjm"};
    for (int k = 0; k < 3; k++) {
        char p[128];
        snprintf(p, sizeof p, "%s/%s", dir, files[k]);
        unlink(p);
    }
    rmdir(dir);
}

static void setup(void) {
    setenv("TJ_BACKEND", "interp", 1); /* before the first call: read once */
    setenv("TJ_CACHE", "0", 1);
    snprintf(dir, sizeof dir, "/tmp/tj-fuzz-module-%ld", (long)getpid());
    mkdir(dir, 0700);
    atexit(cleanup);
    char p[128];
    snprintf(p, sizeof p, "%s/variables.ckpt", dir);
    tj_tensor *t = tj_scalar_f32(1);
    tj_variable *x = tj_variable_new(t, "x");
    tj_checkpoint_save(p, 1, &x);
    tj_variable_free(x);
    tj_release(t);
    unsigned char *ck;
    size_t n;
    if (rt_read_file("fuzz", p, 1 << 20, &ck, &n) == TJ_OK) {
        vars_sum = (unsigned long long)rt_fnv1a(ck, n);
        free(ck);
    }
}

/* s with every `word` replaced by the 16 hex digits of v (a new string) */
static char *subst(const char *s, const char *word, unsigned long long v) {
    size_t wl = strlen(word), n = 0;
    for (const char *p = s; (p = strstr(p, word)); p += wl)
        n++;
    char *out = malloc(strlen(s) + n * 16 + 1), *o = out;
    if (!out)
        return NULL;
    for (const char *p = s;;) {
        const char *q = strstr(p, word);
        size_t k = q ? (size_t)(q - p) : strlen(p);
        memcpy(o, p, k);
        o += k;
        if (!q)
            break;
        o += sprintf(o, "%016llx", v);
        p = q + wl;
    }
    *o = 0;
    return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!dir[0])
        setup();
    if (size > (1u << 16))
        return 0;
    char *in = malloc(size + 2);
    if (!in)
        return 0;
    memcpy(in, data, size);
    in[size] = in[size + 1] = 0;
    const char *man = in, *graph = in + strlen(in) + (strlen(in) < size ? 1 : 0);
    char *m1 = subst(man, "CHECKSUM", (unsigned long long)rt_fnv1a(graph, strlen(graph)));
    char *m2 = m1 ? subst(m1, "CKSUM_VARS", vars_sum) : NULL;
    char p[128];
    snprintf(p, sizeof p, "%s/g.tjir", dir);
    FILE *f = fopen(p, "wb");
    if (f) {
        fputs(graph, f);
        fclose(f);
    }
    snprintf(p, sizeof p, "%s/module.tjm", dir);
    f = m2 ? fopen(p, "wb") : NULL;
    if (f) { /* sealed as a saved manifest is: its checksum on a last line of its own */
        size_t n = strlen(m2);
        int nl = n > 0 && m2[n - 1] != '\n';
        fputs(m2, f);
        if (nl)
            fputc('\n', f);
        unsigned long long sum = rt_fnv1a(m2, n);
        if (nl) /* FNV-1a over one more byte */
            sum = (sum ^ '\n') * 0x100000001b3ull;
        fprintf(f, "checksum %016llx\n", sum);
        fclose(f);
        tj_module *m = tj_module_load(dir);
        if (m) { /* call what loaded, with zeros of its first signature when it is a scalar */
            tj_tensor *z = tj_scalar_f32(0);
            tj_release(tj_module_call(m, "f", 1, &z));
            tj_release(z);
            tj_module_free(m);
        }
        ir_clear_error();
    }
    free(m1);
    free(m2);
    free(in);
    return 0;
}
