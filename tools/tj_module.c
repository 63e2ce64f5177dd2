/* tj_module — saved_model_cli for tracejit modules (S27):
 *   tj_module show DIR                 every signature (what runs it, inputs, outputs) and the
 *                                      variables
 *   tj_module run DIR FUNCTION X...    calls FUNCTION and prints the result; each X is a number
 *                                      or a list "[1, 2, 3, 4]" (nesting brackets are ignored)
 *                                      with as many numbers as the input has elements, shaped
 *                                      and cast to the input's signature
 * --graph-only (anywhere): never run the saved native code; compile or interpret the graph.
 * Exit status: 0, 1 on an error (printed), 2 on bad usage. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tracejit.h>

static int usage(void) {
    fprintf(stderr, "usage: tj_module [--graph-only] show DIR\n"
                    "       tj_module [--graph-only] run DIR FUNCTION [X ...]\n"
                    "       X: a number, or a list of numbers such as [[1,2],[3,4]]\n");
    return 2;
}

/* Argument k from text s for input spec: NULL (message printed) when it does not fit. */
static tj_tensor *parse_arg(int k, const char *s, const tj_spec *spec) {
    int64_t numel = 1, n = 0;
    for (int d = 0; d < spec->rank; d++)
        numel *= spec->dims[d];
    double *v = malloc(((size_t)numel + 1) * sizeof *v);
    const char *p = s;
    while (v && *p) {
        if (*p == '[' || *p == ']' || *p == ',' || *p == ' ') {
            p++;
            continue;
        }
        char *end;
        double x = strtod(p, &end);
        if (end == p) {
            fprintf(stderr, "tj_module: argument %d: '%s' is not a number or a list of numbers\n",
                    k, s);
            free(v);
            return NULL;
        }
        if (n < numel)
            v[n] = x;
        n++;
        p = end;
    }
    if (!v || n != numel) {
        fprintf(stderr, "tj_module: argument %d has %lld numbers; its input has %lld elements\n", k,
                (long long)n, (long long)numel);
        free(v);
        return NULL;
    }
    tj_tensor *t = tj_tensor_from_data(TJ_F64, spec->rank, spec->dims, v);
    tj_tensor *c = tj_cast(t, spec->dtype);
    tj_release(t);
    free(v);
    return c;
}

static int run(tj_module *m, const char *fn, int n, char **xs) {
    tj_spec specs[64];
    int want = tj_module_signature(m, fn, 64, specs);
    if (want < 0) {
        fprintf(stderr, "tj_module: %s\n", tj_last_error());
        return 1;
    }
    if (want != n || n > 64) {
        fprintf(stderr, "tj_module: '%s' takes %d arguments, %d given\n", fn, want, n);
        return 2;
    }
    tj_tensor *args[64];
    int rc = 0;
    for (int k = 0; k < n; k++)
        if (!(args[k] = parse_arg(k, xs[k], &specs[k])))
            rc = 2;
    if (!rc) {
        tj_tensor *r = tj_module_call(m, fn, n, args);
        if (tj_status_of(r)) {
            fprintf(stderr, "tj_module: %s\n", tj_error_message(r));
            rc = 1;
        } else {
            char *s = tj_tensor_str(r);
            printf("%s\n", s ? s : "");
            free(s);
        }
        tj_release(r);
    }
    for (int k = 0; k < n; k++)
        tj_release(args[k]);
    return rc;
}

int main(int argc, char **argv) {
    unsigned flags = 0;
    int a = 0;
    for (int i = 1; i < argc; i++) { /* drop --graph-only from the positional arguments */
        if (!strcmp(argv[i], "--graph-only"))
            flags |= TJ_MODULE_GRAPH_ONLY;
        else
            argv[++a] = argv[i];
    }
    argc = a + 1;
    if (argc < 3 || (strcmp(argv[1], "show") && strcmp(argv[1], "run")) ||
        (!strcmp(argv[1], "run") && argc < 4))
        return usage();
    tj_module *m = tj_module_load_opts(argv[2], flags);
    if (!m) {
        fprintf(stderr, "tj_module: %s\n", tj_last_error());
        return 1;
    }
    int rc = 0;
    if (!strcmp(argv[1], "show")) {
        char *d = tj_module_describe(m);
        fputs(d ? d : "", stdout);
        free(d);
    } else {
        rc = run(m, argv[3], argc - 4, argv + 4);
    }
    tj_module_free(m);
    return rc;
}
