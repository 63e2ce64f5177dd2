/* S27: saved native code runs without LLVM. Built twice: with PRODUCER against the full
 * library, it traces and compiles `model` (an OpenBLAS product with a fused epilogue, a softmax,
 * a reduction, a strided view, a while loop whose body is compiled, a variable update) at a
 * second batch size (so its broadcasting kernels are shape-generic) into a module and saves it with
 * its native code, and beside it what the same C function gives run eagerly (the same ops on the
 * reference kernels: want.f32). Without PRODUCER it is linked against tracejit_rt only, the library
 * of ir/ and runtime/ alone (no tracer, no ops, no backend: so this half cannot run `model` itself;
 * no libLLVM on its link line, and none mapped: checked through /proc/self/maps), loads that
 * module, and checks that every function runs the saved code, read by the runtime from the image's
 * steps, and matches the eager values. Loading the graph only must fall back to the interpreter
 * here, and say so; so must an image for a CPU with other features; a cut image is an error naming
 * its file, and a call with another signature one naming the input. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include <tracejit.h>

enum { B = 64, K = 256, N = 128 };

#ifdef PRODUCER
static tj_variable *w, *bias, *steps;

static tj_tensor *keep_going(int n, tj_tensor *const *a, void *user) {
    (void)n, (void)user;
    tj_tensor *limit = tj_scalar_f32(40.0f);
    return tj_less(tj_sum(a[0], 0, NULL, 0), limit);
}
static tj_tensor *halve_add(int n, tj_tensor *const *a, void *user) {
    (void)n, (void)user;
    tj_tensor *h = tj_scalar_f32(0.5f), *one = tj_scalar_f32(1.0f);
    return tj_add(tj_mul(a[0], h), one);
}

/* The C function the producer traces, and runs eagerly for the values the consumer compares. */
static tj_tensor *model(tj_tensor *x) {
    tj_tensor *h = tj_tanh(tj_add(tj_matmul(x, tj_variable_read(w)), tj_variable_read(bias)));
    tj_tensor *s = tj_softmax(h, 1);
    int ax1 = 1;
    tj_tensor *r = tj_sum(tj_mul(s, h), 1, &ax1, 0);
    tj_tensor *t = tj_transpose(h, NULL); /* [N, B] */
    int ax0 = 0;
    tj_tensor *cols = tj_sum(t, 1, &ax0, 0); /* [B] */
    tj_tensor *init = tj_mul(r, r);          /* [B], a loop variable */
    tj_tensor *loop = tj_while_loop(keep_going, halve_add, 1, &init, NULL);
    tj_tensor *one = tj_scalar_f32(1.0f);
    tj_assign_add(steps, one);
    return tj_add(tj_add(r, cols), loop);
}
#endif

static tj_tensor *ramp(int rank, const int64_t *dims, float scale) {
    int64_t n = 1;
    for (int d = 0; d < rank; d++)
        n *= dims[d];
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++)
        v[i] = scale * (float)((i * 37) % 101 - 50) / 50.0f;
    tj_tensor *t = tj_tensor_from_data(TJ_F32, rank, dims, v);
    free(v);
    return t;
}

#ifdef PRODUCER
static void make_vars(void) {
    int64_t wd[2] = {K, N}, bd[1] = {N};
    tj_tensor *wt = ramp(2, wd, 0.05f), *bt = ramp(1, bd, 0.1f), *z = tj_scalar_f32(0);
    w = tj_variable_new(wt, "dense/w");
    bias = tj_variable_new(bt, "dense/b");
    steps = tj_variable_new(z, "steps");
    tj_release(wt);
    tj_release(bt);
    tj_release(z);
}

int main(int argc, char **argv) {
    if (argc != 2)
        return 2;
    if (tj_backend_unavailable("cpu")) { /* a build without LLVM saves no native code */
        printf("skipped: %s\n", tj_backend_unavailable("cpu"));
        return 77;
    }
    check_rm_dir(argv[1]);
    make_vars();
    tj_function *f = tj_function_new("model", (void *)model, 1, NULL);
    /* a first signature at another batch size: the module's is then the function's second, whose
     * broadcasting kernels (the bias added in the product's epilogue) are shape-generic, so the
     * runtime alone must make their geometry from the graph */
    int64_t hd[2] = {B / 2, K};
    tj_tensor *half = ramp(2, hd, 1.0f);
    tj_tensor *hr = tj_call(f, 1, &half);
    CHECK_MSG(tj_status_of(hr) == TJ_OK, "%s", tj_error_message(hr));
    tj_release(hr);
    tj_release(half);
    tj_tensor *zero = tj_scalar_f32(0); /* the count starts at 0 again for the consumer */
    tj_release(tj_assign(steps, zero));
    tj_release(zero);
    tj_spec spec = {TJ_F32, 2, {B, K}, NULL};
    tj_module *m = tj_module_new("native");
    CHECK_EQ_INT(tj_module_add_function(m, "model", f, 1, &spec), TJ_OK);
    CHECK_MSG(tj_module_save(m, argv[1]) == TJ_OK, "%s", tj_last_error());
    /* the manifest names the native code's file, by backend and target */
    char path[4096], line[512];
    snprintf(path, sizeof path, "%s/module.tjm", argv[1]);
    FILE *fp = fopen(path, "r");
    int native = 0;
    while (fp && fgets(line, sizeof line, fp))
        native |= strncmp(line, "native model.cpu.", 17) == 0 && strstr(line, ".tjx ") &&
                  strstr(line, " cpu\n");
    if (fp)
        fclose(fp);
    CHECK_MSG(native, "no native code saved in %s", path);
    /* what the function gives eagerly, for the consumer, which has no ops to compute it */
    int64_t xd[2] = {B, K};
    tj_tensor *x = ramp(2, xd, 1.0f);
    tj_scope_begin();
    tj_tensor *want = tj_keep(model(x));
    tj_scope_end();
    CHECK_MSG(tj_status_of(want) == TJ_OK, "%s", tj_error_message(want));
    snprintf(path, sizeof path, "%s/want.f32", argv[1]);
    fp = tj_status_of(want) == TJ_OK ? fopen(path, "wb") : NULL;
    CHECK(fp && fwrite(tj_tensor_data(want), 4, B, fp) == B);
    if (fp)
        fclose(fp);
    tj_release(want);
    tj_release(x);
    tj_module_free(m);
    tj_function_free(f);
    tj_variable_free(w);
    tj_variable_free(bias);
    tj_variable_free(steps);
    return check_done();
}
#else
/* Whether a library whose name contains `name` is mapped into this process. */
static int mapped(const char *name) {
    FILE *f = fopen("/proc/self/maps", "r");
    char line[4096];
    int found = 0;
    while (f && fgets(line, sizeof line, f))
        found |= strstr(line, name) != NULL;
    if (f)
        fclose(f);
    return found;
}

static uint64_t fnv1a(const unsigned char *p, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

static void put_file(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(p, 1, n, f) == n);
    if (f)
        fclose(f);
}

/* A copy of the module in src as dst, its native image changed by damage(image, &size) and the
 * manifest's checksums made to match (what a hostile or foreign image looks like once past the
 * file checks). */
static void copy_damaged(const char *src, const char *dst,
                         void (*damage)(unsigned char *, size_t *)) {
    const char *files[] = {"variables.ckpt", "model.tjir", NULL};
    char a[4096], b[4096], img_name[512] = "";
    check_rm_dir(dst);
    mkdir(dst, 0755);
    for (int k = 0; files[k]; k++) {
        size_t n = 0;
        snprintf(a, sizeof a, "%s/%s", src, files[k]);
        snprintf(b, sizeof b, "%s/%s", dst, files[k]);
        char *p = check_slurp_n(a, &n);
        put_file(b, p, n);
        free(p);
    }
    snprintf(a, sizeof a, "%s/module.tjm", src);
    char *man = check_slurp(a), *line = man ? strstr(man, "\nnative ") : NULL;
    CHECK(line && sscanf(line + 8, "%511s", img_name) == 1);
    if (!line)
        return free(man);
    size_t n = 0;
    snprintf(a, sizeof a, "%s/%s", src, img_name);
    unsigned char *img = (unsigned char *)check_slurp_n(a, &n);
    damage(img, &n);
    snprintf(b, sizeof b, "%s/%s", dst, img_name);
    put_file(b, img, n);
    /* the native line's checksum, then the manifest's own (its last line) */
    char *sum = line + 8 + strlen(img_name) + 1, hex[17];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)fnv1a(img, n));
    memcpy(sum, hex, 16);
    char *last = strstr(man, "checksum ");
    while (last && strstr(last + 1, "checksum "))
        last = strstr(last + 1, "checksum ");
    snprintf(hex, sizeof hex, "%016llx",
             (unsigned long long)fnv1a((unsigned char *)man, (size_t)(last - man)));
    memcpy(last + 9, hex, 16);
    snprintf(b, sizeof b, "%s/module.tjm", dst);
    put_file(b, man, strlen(man));
    free(img);
    free(man);
}

/* The image's CPU feature words, every bit of one set: compiled for a CPU this one is not. */
static void other_cpu(unsigned char *img, size_t *n) {
    size_t at = 8;
    for (int s = 0; s < 3; s++) { /* code generator id, backend, target */
        uint32_t len;
        memcpy(&len, img + at, 4);
        at += 4 + len;
    }
    if (at + 12 <= *n)
        memset(img + at + 8, 0xff, 4);
}

/* The image cut inside its sections. */
static void cut_short(unsigned char *img, size_t *n) {
    (void)img;
    *n = *n * 2 / 3;
}

static void compare(tj_tensor *got, tj_tensor *want) {
    CHECK_EQ_INT(tj_tensor_numel(got), tj_tensor_numel(want));
    const float *a = tj_tensor_data(got), *b = tj_tensor_data(want);
    double worst = 0;
    for (int64_t i = 0; a && b && i < tj_tensor_numel(want); i++) {
        double d = (a[i] - b[i]) / (1e-3 + (b[i] < 0 ? -b[i] : b[i]));
        worst = d < 0 ? (-d > worst ? -d : worst) : (d > worst ? d : worst);
    }
    CHECK_MSG(worst < 1e-4, "saved code vs eager: relative difference %g", worst);
}

int main(int argc, char **argv) {
    if (argc != 2)
        return 2;
    char manifest[4096];
    snprintf(manifest, sizeof manifest, "%s/module.tjm", argv[1]);
    FILE *saved = fopen(manifest, "rb");
    if (!saved) { /* the producer was skipped: a build without LLVM saves no native code */
        printf("skipped: nothing saved in %s\n", argv[1]);
        return 77;
    }
    fclose(saved);
    CHECK(!mapped("libLLVM"));
    tj_module *m = tj_module_load(argv[1]);
    CHECK_MSG(m != NULL, "%s", tj_last_error());
    if (!m)
        return check_done();
    CHECK_HAS(tj_module_runs_on(m, "model"), "saved native code");
    int64_t xd[2] = {B, K};
    tj_tensor *x = ramp(2, xd, 1.0f);
    tj_tensor *got = tj_module_call(m, "model", 1, &x);
    CHECK_MSG(tj_status_of(got) == TJ_OK, "%s", tj_error_message(got));
    tj_tensor *got2 = tj_module_call(m, "model", 1, &x);
    tj_tensor *n = tj_variable_read(tj_module_variable(m, "steps"));
    CHECK_NEAR(tj_tensor_get_f64(n, 0), 2, 0); /* the saved code's assignments */
    tj_release(n);

    float eager[B] = {0}; /* the producer's eager values */
    snprintf(manifest, sizeof manifest, "%s/want.f32", argv[1]);
    FILE *fw = fopen(manifest, "rb");
    CHECK_MSG(fw && fread(eager, 4, B, fw) == B, "cannot read %s", manifest);
    if (fw)
        fclose(fw);
    tj_tensor *want = tj_tensor_from_data(TJ_F32, 1, (int64_t[]){B}, eager);
    compare(got, want);
    compare(got2, want);

    /* the graph only: no LLVM here, so the interpreter runs it, and says why */
    tj_module *mg = tj_module_load_opts(argv[1], TJ_MODULE_GRAPH_ONLY);
    CHECK_MSG(mg != NULL, "%s", tj_last_error());
    if (mg) {
        CHECK_HAS(tj_module_runs_on(mg, "model"), "interpreter (graph only, as asked)");
        tj_tensor *gi = tj_module_call(mg, "model", 1, &x);
        compare(gi, want);
        tj_release(gi);
        tj_module_free(mg);
    }
    /* an image for a CPU with other features: the graph on the interpreter, saying why */
    char dir2[4200];
    snprintf(dir2, sizeof dir2, "%s-damaged", argv[1]);
    copy_damaged(argv[1], dir2, other_cpu);
    tj_module *mc = tj_module_load(dir2);
    CHECK_MSG(mc != NULL, "%s", tj_last_error());
    if (mc) {
        CHECK_HAS(tj_module_runs_on(mc, "model"), "interpreter (");
        CHECK_HAS(tj_module_runs_on(mc, "model"),
                  "compiled for a CPU with features this one lacks");
        tj_tensor *gc = tj_module_call(mc, "model", 1, &x);
        compare(gc, want);
        tj_release(gc);
        tj_module_free(mc);
    }
    /* a damaged image is an error naming the file, never run */
    copy_damaged(argv[1], dir2, cut_short);
    CHECK(tj_module_load(dir2) == NULL);
    CHECK_HAS(tj_last_error(), "module_load: ");
    CHECK_HAS(tj_last_error(), ".tjx: ");
    CHECK_HAS(tj_last_error(), "lies past the end");
    /* a call with another signature names the input */
    int64_t bad_d[2] = {B, K + 1};
    tj_tensor *bad = ramp(2, bad_d, 1.0f), *r = tj_module_call(m, "model", 1, &bad);
    CHECK_EQ_INT(tj_status_of(r), TJ_ERR_SIGNATURE);
    CHECK_HAS(tj_error_message(r), "input #0(zero-based)");
    tj_release(r);
    tj_release(bad);
    check_rm_dir(dir2);
    CHECK(!mapped("libLLVM"));
    tj_release(want);
    tj_release(got);
    tj_release(got2);
    tj_release(x);
    tj_module_free(m);
    return check_done();
}
#endif
