/* S27: the seed's DemoModule. addprint(5.0) prints 6; the module is saved; loaded again (no C
 * body is involved: the loaded module runs the saved graph) its addprint(5.0) prints 11, and so
 * does the command-line tool in another process (run) — which also shows the signatures. After
 * loading, assignments update the loaded variables. Refused: saving a host callback; loading a
 * changed graph, a broken manifest or a missing directory; calls that do not match the
 * signature. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include <tracejit.h>

static tj_variable *x;
static char printed[256];

static void sink(const char *line, void *user) {
    (void)user;
    snprintf(printed, sizeof printed, "%s", line);
}

static tj_tensor *addprint(tj_tensor *a) {
    tj_assign_add(x, a);
    tj_tensor *v = tj_variable_read(x);
    tj_print(NULL, 1, &v);
    return v;
}

static tj_tensor *square(tj_tensor *a) {
    return tj_mul(a, a);
}

static void cb(void *user, int n, tj_tensor *const *xs) {
    (void)user, (void)n, (void)xs;
}
static tj_tensor *calls_back(tj_tensor *a) {
    tj_host_callback((void *)cb, NULL, 1, &a);
    return a;
}

static double call1(tj_module *m, const char *fn, float v) {
    tj_tensor *a = tj_scalar_f32(v);
    tj_tensor *r = tj_module_call(m, fn, 1, &a);
    CHECK_MSG(tj_status_of(r) == TJ_OK, "%s", tj_error_message(r));
    double out = tj_status_of(r) ? -1 : tj_tensor_get_f64(r, 0);
    tj_release(r);
    tj_release(a);
    return out;
}

/* ---- saved native code ---------------------------------------------------------------------- */
uint64_t rt_fnv1a(const void *p, size_t n); /* the manifest's checksum (runtime/checkpoint.c) */

static unsigned char *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    unsigned char *p = NULL;
    if (f && !fseek(f, 0, SEEK_END) && (*n = (size_t)ftell(f)) > 0 && !fseek(f, 0, SEEK_SET) &&
        (p = malloc(*n)) && fread(p, 1, *n, f) != *n) {
        free(p);
        p = NULL;
    }
    if (f)
        fclose(f);
    return p;
}

/* Writes text as dir/module.tjm; when seal, with the checksum line a saved manifest ends with
 * (a forger's edit: the loader must still refuse what disagrees with the graph). */
static void write_manifest(const char *dir, const char *text, int seal) {
    char path[700];
    snprintf(path, sizeof path, "%s/module.tjm", dir);
    FILE *f = fopen(path, "w");
    fputs(text, f);
    if (seal)
        fprintf(f, "checksum %016llx\n", (unsigned long long)rt_fnv1a(text, strlen(text)));
    fclose(f);
}
/* dir/module.tjm without its checksum line (caller frees) */
static char *read_manifest(const char *dir) {
    char path[700];
    snprintf(path, sizeof path, "%s/module.tjm", dir);
    char *man = check_slurp(path), *last = man ? strstr(man, "checksum ") : NULL;
    CHECK(last != NULL);
    if (last)
        *last = 0;
    return man;
}
/* s with the first `from` replaced by `to` (a new string) */
static char *replaced(const char *s, const char *from, const char *to) {
    const char *at = strstr(s, from);
    CHECK_MSG(at != NULL, "'%s' not in the manifest", from);
    if (!at)
        return strdup(s);
    char *out = malloc(strlen(s) + strlen(to) + 1);
    sprintf(out, "%.*s%s%s", (int)(at - s), s, to, at + strlen(from));
    return out;
}

/* The file of the native code saved in dir (its manifest's "native <file> <sum> <backend>" line:
 * named by backend and target, "addprint.cpu.x86_64-linux-gnu.tjx"), or "" when none. */
static const char *native_file(const char *dir, char *out, size_t n) {
    char path[700];
    snprintf(path, sizeof path, "%s/module.tjm", dir);
    char *man = check_slurp(path), *at = man ? strstr(man, "\nnative ") : NULL;
    out[0] = 0;
    if (at)
        sscanf(at + 8, "%255s", out);
    free(man);
    return out;
}

/* Replaces dir's native code by img[0..n) and, when fix, its checksum in module.tjm. */
static void put_native(const char *dir, const unsigned char *img, size_t n, int fix) {
    char path[700], file[256], line[300];
    native_file(dir, file, sizeof file);
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *f = fopen(path, "wb");
    fwrite(img, 1, n, f);
    fclose(f);
    snprintf(path, sizeof path, "%s/module.tjm", dir);
    snprintf(line, sizeof line, "native %s ", file);
    char *man = check_slurp(path), *at = man ? strstr(man, line) : NULL;
    CHECK(at != NULL);
    if (at && fix) {
        char sum[17];
        snprintf(sum, sizeof sum, "%016llx", (unsigned long long)rt_fnv1a(img, n));
        memcpy(at + strlen(line), sum, 16);
        *strstr(man, "checksum ") = 0;
        write_manifest(dir, man, 1);
    }
    free(man);
}

/* A module reading two variables of different shapes, its manifest forged (resealed) to bind
 * them the other way round, to return nothing, to return other types; and edited without
 * resealing. Each is refused naming what disagrees, with the native code and graph-only. */
static tj_variable *va, *vb;
static tj_tensor *two_vars(tj_tensor *s) {
    return tj_add(
        tj_add(tj_sum(tj_variable_read(va), 0, NULL, 0), tj_sum(tj_variable_read(vb), 0, NULL, 0)),
        s);
}
static void forged_manifests(const char *dir0) {
    char dir[600];
    snprintf(dir, sizeof dir, "%s/forged", dir0);
    tj_tensor *one = tj_scalar_f32(1), *two = tj_scalar_f32(2);
    tj_tensor *a = tj_fill(1, (int64_t[]){4}, one);
    tj_tensor *b = tj_fill(2, (int64_t[]){8, 4}, two);
    tj_release(one);
    tj_release(two);
    va = tj_variable_new(a, "a");
    vb = tj_variable_new(b, "b");
    tj_function *f = tj_function_new("two_vars", (void *)two_vars, 1, NULL);
    tj_spec scalar = {TJ_F32, 0, {0}, NULL};
    tj_module *m = tj_module_new("forged");
    CHECK_EQ_INT(tj_module_add_function(m, "two_vars", f, 1, &scalar), TJ_OK);
    CHECK_EQ_INT(tj_module_save(m, dir), TJ_OK);
    char *man = read_manifest(dir);
    const struct {
        const char *from, *to, *want;
    } forge[] = {
        {"cap b\ncap a\n", "cap a\ncap b\n",
         "variable slot 0 is float32[8,4] in the graph but module.tjm binds it to 'a' "
         "(float32[4])"},
        {"cap b\ncap a\n", "cap b\ncap b\n", "binds it to 'b' (float32[8,4])"},
        {" 1 1 2\n", " 0 1 2\n", "has 1 results; module.tjm says the function returns none"},
        {"out f32 0\n", "out f32 1 2\n", "result 0 does not match the 'out' lines of module.tjm"},
        {"out f32 0\n", "out f32 0\nout f32 0\n", "does not match the 'out' lines"},
        {"tracejit-module 2", "tracejit-module 1",
         "a module of format 1 (a manifest without a checksum"},
    };
    for (size_t k = 0; man && k < sizeof forge / sizeof forge[0]; k++)
        for (int graph_only = 0; graph_only < 2; graph_only++) {
            char *t = replaced(man, forge[k].from, forge[k].to);
            write_manifest(dir, t, 1);
            tj_module *l = tj_module_load_opts(dir, graph_only ? TJ_MODULE_GRAPH_ONLY : 0);
            CHECK_MSG(l == NULL, "forgery %zu loaded", k);
            CHECK_HAS(tj_last_error(), forge[k].want);
            tj_module_free(l);
            free(t);
        }
    /* edited, not resealed: the manifest's own checksum */
    char *t = man ? replaced(man, "cap b\ncap a\n", "cap a\ncap a\n") : NULL;
    if (t) {
        write_manifest(dir, t, 0);
        char path[700];
        snprintf(path, sizeof path, "%s/module.tjm", dir);
        FILE *fp = fopen(path, "a"); /* the old checksum line back */
        fprintf(fp, "checksum %016llx\n", (unsigned long long)rt_fnv1a(man, strlen(man)));
        fclose(fp);
        CHECK(tj_module_load(dir) == NULL);
        CHECK_HAS(tj_last_error(), "module.tjm does not match its checksum (changed or corrupt)");
        write_manifest(dir, man, 0); /* no checksum line at all: cut short */
        CHECK(tj_module_load(dir) == NULL);
        CHECK_HAS(tj_last_error(), "its last line is not 'checksum <hex>'");
    }
    free(t);
    /* the manifest as saved loads and runs: 1*4 + 2*32 + 3 */
    write_manifest(dir, man ? man : "", 1);
    tj_module *l = tj_module_load(dir);
    CHECK_MSG(l != NULL, "%s", tj_last_error());
    if (l)
        CHECK_NEAR(call1(l, "two_vars", 3), 71, 0);
    tj_module_free(l);
    free(man);
    check_rm_dir(dir);
    tj_module_free(m);
    tj_function_free(f);
    tj_variable_free(va);
    tj_variable_free(vb);
    tj_release(a);
    tj_release(b);
}

static double load_call(const char *dir, unsigned flags, const char *runs_on) {
    tj_module *m = tj_module_load_opts(dir, flags);
    CHECK_MSG(m != NULL, "%s", tj_last_error());
    if (!m)
        return -1;
    CHECK_HAS(tj_module_runs_on(m, "addprint"), runs_on);
    tj_tensor *a = tj_scalar_f32(5);
    tj_tensor *r = tj_module_call(m, "addprint", 1, &a);
    double v = tj_status_of(r) ? -1 : tj_tensor_get_f64(r, 0);
    tj_release(r);
    tj_release(a);
    tj_module_free(m);
    return v;
}

/* The saved native code runs when this build and CPU can run it; else the graph is compiled and
 * the reason given; a damaged or mismatched file is an error naming it. */
static void native_code(const char *dir, tj_function *f, const tj_spec *scalar) {
    char path[700], file[256], msg[400];
    size_t n = 0;
    /* named by backend and target: addprint.cpu.<arch>-<system>.tjx */
    native_file(dir, file, sizeof file);
    CHECK_MSG(strncmp(file, "addprint.cpu.", 13) == 0 && strstr(file, "-linux-gnu.tjx"), "%s",
              file);
    snprintf(path, sizeof path, "%s/%s", dir, file);
    unsigned char *img = read_all(path, &n), *bad = malloc(n + 1);
    CHECK_MSG(img != NULL, "no native code saved: %s", path);
    if (!img || !bad) {
        free(img);
        free(bad);
        return;
    }
    CHECK_NEAR(load_call(dir, 0, "saved native code"), 11, 0);
    CHECK_NEAR(
        load_call(dir, TJ_MODULE_GRAPH_ONLY, "compiled from the graph (graph only, as asked)"), 11,
        0);
    /* compiled for a CPU with features this one lacks: every bit of a CPUID word */
    memcpy(bad, img, n);
    uint32_t cg_len, be_len, tgt_len; /* the envelope: codegen id, backend, target, CPU words */
    memcpy(&cg_len, img + 8, 4);
    memcpy(&be_len, img + 12 + cg_len, 4);
    memcpy(&tgt_len, img + 16 + cg_len + be_len, 4);
    memset(bad + 16 + cg_len + be_len + 4 + tgt_len + 8, 0xff, 4);
    put_native(dir, bad, n, 1);
    CHECK_NEAR(load_call(dir, 0,
                         "compiled from the graph (cpu image: compiled for a CPU with "
                         "features this one lacks"),
               11, 0);
    /* damaged: the checksum no longer matches; truncated with a matching checksum */
    bad[n - 1] ^= 1;
    put_native(dir, bad, n, 0);
    CHECK(tj_module_load(dir) == NULL);
    snprintf(msg, sizeof msg, "%s does not match its checksum", file);
    CHECK_HAS(tj_last_error(), msg);
    put_native(dir, img, n / 2, 1);
    CHECK(tj_module_load(dir) == NULL);
    snprintf(msg, sizeof msg, "%s: cpu image:", file);
    CHECK_HAS(tj_last_error(), msg);
    /* another function's native code under this one's name */
    char dir2[600];
    snprintf(dir2, sizeof dir2, "%s/other", dir);
    tj_module *m2 = tj_module_new("other");
    CHECK_EQ_INT(tj_module_add_function(m2, "addprint", f, 1, scalar), TJ_OK);
    tj_spec vec = {TJ_F32, 1, {3}, NULL};
    CHECK_EQ_INT(tj_module_add_function(m2, "addprint", f, 1, &vec), TJ_ERR_INVALID);
    tj_module_free(m2);
    m2 = tj_module_new("other");
    tj_function *sq = tj_function_new("square", (void *)square, 1, NULL);
    CHECK_EQ_INT(tj_module_add_function(m2, "addprint", sq, 1, scalar), TJ_OK);
    CHECK_EQ_INT(tj_module_save(m2, dir2), TJ_OK);
    snprintf(path, sizeof path, "%s/%s", dir2, native_file(dir2, msg, sizeof msg));
    size_t n2 = 0;
    unsigned char *other = read_all(path, &n2);
    CHECK(other != NULL);
    if (other) {
        put_native(dir, other, n2, 1);
        CHECK(tj_module_load(dir) == NULL);
        snprintf(msg, sizeof msg, "%s: cpu image: compiled for another graph", file);
        CHECK_HAS(tj_last_error(), msg);
    }
    put_native(dir, img, n, 1);
    CHECK_NEAR(load_call(dir, 0, "saved native code"), 11, 0);
    /* the backend that wrote it: one this build lacks means the graph; none named means "cpu"
     * (manifests saved before backends were named) */
    char *man = read_manifest(dir), *t;
    snprintf(msg, sizeof msg, "%016llx cpu\n", (unsigned long long)rt_fnv1a(img, n));
    char to[64];
    snprintf(to, sizeof to, "%016llx tpu\n", (unsigned long long)rt_fnv1a(img, n));
    write_manifest(dir, t = replaced(man, msg, to), 1);
    free(t);
    CHECK_NEAR(load_call(dir, 0,
                         "compiled from the graph (saved for backend 'tpu', which this build "
                         "lacks)"),
               11, 0);
    snprintf(to, sizeof to, "%016llx\n", (unsigned long long)rt_fnv1a(img, n));
    write_manifest(dir, t = replaced(man, msg, to), 1);
    free(t);
    CHECK_NEAR(load_call(dir, 0, "saved native code"), 11, 0);
    write_manifest(dir, man, 1);
    free(man);
    check_rm_dir(dir2);
    tj_module_free(m2);
    tj_function_free(sq);
    free(other);
    free(img);
    free(bad);
}

static const char *sh(const char *cmd, char *out, size_t n) {
    FILE *p = popen(cmd, "r");
    size_t k = p ? fread(out, 1, n - 1, p) : 0;
    out[k] = 0;
    if (p)
        pclose(p);
    return out;
}

int main(void) {
    tj_set_print_sink(sink, NULL);
    char dir[] = "/tmp/tj-module-XXXXXX";
    if (!mkdtemp(dir))
        return 77;
    tj_tensor *one = tj_scalar_f32(1);
    x = tj_variable_new(one, "demo_module/x");
    tj_function *f = tj_function_new("addprint", (void *)addprint, 1, NULL);
    tj_spec scalar = {TJ_F32, 0, {0}, NULL};
    tj_module *m = tj_module_new("demo_module");
    CHECK_EQ_INT(tj_module_add_variable(m, x), TJ_OK);
    CHECK_EQ_INT(tj_module_add_function(m, "addprint", f, 1, &scalar), TJ_OK);
    CHECK_NEAR(call1(m, "addprint", 5), 6, 0);
    CHECK(strcmp(printed, "6") == 0);
    CHECK_EQ_INT(tj_module_save(m, dir), TJ_OK);

    /* loaded: the saved graph and variable */
    tj_module *m2 = tj_module_load(dir);
    CHECK_MSG(m2 != NULL, "%s", tj_last_error());
    if (m2) {
        printed[0] = 0;
        CHECK_NEAR(call1(m2, "addprint", 5), 11, 0);
        CHECK(strcmp(printed, "11") == 0);
        /* assignments after loading update the loaded variable, not the original */
        tj_tensor *h = tj_scalar_f32(100);
        tj_release(tj_assign(tj_module_variable(m2, "demo_module/x"), h));
        tj_release(h);
        CHECK_NEAR(call1(m2, "addprint", 1), 101, 0);
        tj_tensor *orig = tj_variable_read(x);
        CHECK_NEAR(tj_tensor_get_f64(orig, 0), 6, 0);
        tj_release(orig);
        char *d = tj_module_describe(m2);
        CHECK_HAS(d, "signature 'addprint':");
        CHECK_HAS(d, "x0: dtype float32, shape []");
        CHECK_HAS(d, "output_0: dtype float32, shape []");
        CHECK_HAS(d, "demo_module/x: dtype float32, shape []");
        free(d);
        /* calls that do not fit */
        tj_tensor *i = tj_scalar_i32(5);
        tj_tensor *r = tj_module_call(m2, "addprint", 1, &i);
        CHECK_HAS(tj_error_message(r), "cannot compute addprint as input #0(zero-based) was "
                                       "expected to be a float32 tensor but is a int32 tensor");
        tj_release(r);
        r = tj_module_call(m2, "nope", 1, &i);
        CHECK_HAS(tj_error_message(r), "has no function 'nope'");
        tj_release(r);
        tj_release(i);
        tj_module_free(m2);
    }

    /* another process: the command-line tool, linked without this test's C code */
    char cmd[512], out[4096];
    snprintf(cmd, sizeof cmd, "%s run %s addprint 5 2>&1", TJ_MODULE_CLI, dir);
    const char *o = sh(cmd, out, sizeof out);
    CHECK_HAS(o, "11"); /* the print and the result */
    snprintf(cmd, sizeof cmd, "%s show %s 2>&1", TJ_MODULE_CLI, dir);
    o = sh(cmd, out, sizeof out);
    CHECK_HAS(o, "signature 'addprint'");
    int native = !tj_backend_unavailable("cpu"); /* a build without LLVM saves no native code */
    if (native)
        CHECK_HAS(o, "runs on: saved native code");
    CHECK_HAS(o, "demo_module/x");
    snprintf(cmd, sizeof cmd, "%s --graph-only show %s 2>&1", TJ_MODULE_CLI, dir);
    if (native)
        CHECK_HAS(sh(cmd, out, sizeof out),
                  "runs on: compiled from the graph (graph only, as asked)");
    snprintf(cmd, sizeof cmd, "%s run %s addprint '[1, 2]' 2>&1", TJ_MODULE_CLI, dir);
    CHECK_HAS(sh(cmd, out, sizeof out), "argument 0 has 2 numbers; its input has 1 elements");
    snprintf(cmd, sizeof cmd, "%s run %s addprint '[5]' 2>&1", TJ_MODULE_CLI, dir);
    CHECK_HAS(sh(cmd, out, sizeof out), "11");

    if (native)
        native_code(dir, f, &scalar);
    forged_manifests(dir);

    /* refused at save time: a host callback */
    tj_function *g = tj_function_new("calls_back", (void *)calls_back, 1, NULL);
    tj_module *mb = tj_module_new("bad");
    CHECK_EQ_INT(tj_module_add_function(mb, "calls_back", g, 1, &scalar), TJ_OK);
    char dir2[600];
    snprintf(dir2, sizeof dir2, "%s/bad", dir);
    CHECK_EQ_INT(tj_module_save(mb, dir2), TJ_ERR_UNSUPPORTED);
    CHECK_HAS(tj_last_error(), "function 'calls_back' calls a host callback");
    CHECK(access(dir2, F_OK) != 0); /* nothing written */
    CHECK_EQ_INT(tj_module_add_function(mb, "calls_back", g, 0, NULL), TJ_ERR_SIGNATURE);
    tj_spec open_dim = {TJ_F32, 1, {-1}, NULL};
    CHECK_EQ_INT(tj_module_add_function(mb, "open", f, 1, &open_dim), TJ_ERR_SIGNATURE);
    CHECK_HAS(tj_last_error(), "'open' argument 0: dim 0 is unknown (-1); a saved function needs "
                               "a fixed input signature");
    tj_module_free(mb);

    /* untrusted input: a changed graph, a broken manifest, a missing directory */
    char p[700];
    snprintf(p, sizeof p, "%s/addprint.tjir", dir);
    FILE *fp = fopen(p, "a");
    fputs("\n", fp);
    fclose(fp);
    CHECK(tj_module_load(dir) == NULL);
    CHECK_HAS(tj_last_error(), "addprint.tjir does not match its checksum");
    write_manifest(dir, "tracejit-module 2\nname demo\nvariables\n", 1);
    CHECK(tj_module_load(dir) == NULL);
    CHECK_HAS(tj_last_error(), "module.tjm line 3: a 'variables' line was expected");
    CHECK(tj_module_load("/nonexistent-dir") == NULL);
    CHECK_HAS(tj_last_error(), "cannot open /nonexistent-dir/module.tjm");

    check_rm_dir(dir);
    tj_module_free(m);
    tj_function_free(f);
    tj_function_free(g);
    tj_variable_free(x);
    tj_release(one);
    return check_done();
}
