/* golden.c — golden-file tests of the passes: every tests/passes/NAME.tjir (not *.expected.tjir)
 * is parsed, run through the pipeline with the selection named by a "# passes: SPEC" line in
 * the file (default pipeline without one; "# fold_max_bytes: N" sets the budget) and the test
 * evaluator, and compared as text with ir_print(ir_parse(NAME.expected.tjir)).
 * TJ_GOLDEN_OUT=dir writes each actual result to dir/NAME.actual.tjir for review. */
#include <dirent.h>
#include <stdlib.h>

#include "check.h"
#include "ptest.h"

/* the value of a "# key: value" line, copied into out; false if absent */
static bool directive(const char *text, const char *key, char *out, size_t n) {
    char pat[64];
    snprintf(pat, sizeof pat, "# %s:", key);
    const char *p = strstr(text, pat);
    if (!p)
        return false;
    p += strlen(pat);
    while (*p == ' ')
        p++;
    size_t k = 0;
    while (p[k] && p[k] != '\n' && k + 1 < n) {
        out[k] = p[k];
        k++;
    }
    while (k && out[k - 1] == ' ')
        k--;
    out[k] = '\0';
    return true;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void run_case(const char *dir, const char *name, const char *out_dir) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.tjir", dir, name);
    char *in_text = check_slurp(path);
    snprintf(path, sizeof path, "%s/%s.expected.tjir", dir, name);
    char *exp_text = check_slurp(path);
    CHECK_MSG(in_text && exp_text, "%s: missing input or %s", name, path);
    ir_graph *in = in_text ? ir_parse(in_text) : NULL;
    ir_graph *ex = exp_text ? ir_parse(exp_text) : NULL;
    CHECK_MSG(!in_text || in, "%s: input does not parse: %s", name, ir_last_error());
    CHECK_MSG(!exp_text || ex, "%s: expected does not parse: %s", name, ir_last_error());
    if (in && ex) {
        char spec[256], budget[64];
        bool has_spec = directive(in_text, "passes", spec, sizeof spec);
        pass_options o = ptest_opts(has_spec ? spec : NULL);
        if (directive(in_text, "fold_max_bytes", budget, sizeof budget))
            o.fold_max_bytes = strtoull(budget, NULL, 0);
        pass_stats s;
        ir_graph *r = pass_pipeline_run(in, &o, &s);
        CHECK_MSG(r != NULL, "%s: pipeline failed: %s", name, ir_last_error());
        if (r) {
            char *got = ir_print(r), *want = ir_print(ex);
            CHECK_MSG(got && want && strcmp(got, want) == 0,
                      "%s (passes %s):\n--- got\n%s--- want\n%s", name, has_spec ? spec : "default",
                      got ? got : "?", want ? want : "?");
            ir_hash128 a = ir_graph_hash(r), b = ir_graph_hash(ex);
            CHECK_MSG(a.lo == b.lo && a.hi == b.hi, "%s: graph hashes differ", name);
            if (out_dir && got) {
                snprintf(path, sizeof path, "%s/%s.actual.tjir", out_dir, name);
                FILE *f = fopen(path, "w");
                if (f) {
                    fputs(got, f);
                    fclose(f);
                }
            }
            free(got);
            free(want);
        }
        ir_graph_free(r);
    }
    ir_graph_free(in);
    ir_graph_free(ex);
    free(in_text);
    free(exp_text);
}

int main(void) {
    const char *dir = TJ_SOURCE_DIR "/tests/passes"; /* "passes" from tests/, the ctest cwd */
    DIR *d = opendir(dir);
    if (!d) {
        dir = "passes";
        d = opendir(dir);
    }
    CHECK_MSG(d != NULL, "cannot open the golden directory");
    if (!d)
        return check_done();
    char *names[512];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 512) {
        size_t len = strlen(e->d_name);
        if (len < 6 || strcmp(e->d_name + len - 5, ".tjir") != 0 ||
            strstr(e->d_name, ".expected.") || strstr(e->d_name, ".actual."))
            continue;
        names[n++] = strndup(e->d_name, len - 5);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    const char *out_dir = getenv("TJ_GOLDEN_OUT");
    for (int i = 0; i < n; i++) {
        run_case(dir, names[i], out_dir);
        free(names[i]);
    }
    printf("golden: %d cases\n", n);
    CHECK(n >= 20);
    return check_done();
}
