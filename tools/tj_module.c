/* tj_module — saved_model_cli for tracejit modules (S27):
 *   tj_module show DIR                 every signature (inputs, outputs) and the variables
 *   tj_module run DIR FUNCTION X...    calls FUNCTION with scalar arguments given as numbers
 *                                      (each converted to its input's dtype) and prints the result
 * Exit status: 0, 1 on an error (printed), 2 on bad usage. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tracejit.h>

static int usage(void) {
    fprintf(stderr, "usage: tj_module show DIR\n       tj_module run DIR FUNCTION [X ...]\n");
    return 2;
}

int main(int argc, char **argv) {
    if (argc < 3 || (strcmp(argv[1], "show") && strcmp(argv[1], "run")) ||
        (!strcmp(argv[1], "run") && argc < 4))
        return usage();
    tj_module *m = tj_module_load(argv[2]);
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
        int n = argc - 4;
        tj_tensor **args = calloc((size_t)n + 1, sizeof *args);
        for (int k = 0; k < n; k++) {
            char *end;
            double v = strtod(argv[4 + k], &end);
            if (*end || end == argv[4 + k]) {
                fprintf(stderr, "tj_module: argument %d '%s' is not a number\n", k, argv[4 + k]);
                rc = 2;
            }
            args[k] = tj_scalar_f64(v);
        }
        /* numbers become f64 scalars: cast each to the dtype the signature wants */
        tj_tensor *r = NULL;
        if (!rc) {
            r = tj_module_call(m, argv[3], n, args);
            if (tj_status_of(r) == TJ_ERR_SIGNATURE) { /* try the common f32 and i32/i64 */
                static const tj_dtype dts[4] = {TJ_F32, TJ_I64, TJ_I32, TJ_BOOL};
                for (int t = 0; t < 4 && tj_status_of(r) == TJ_ERR_SIGNATURE; t++) {
                    tj_tensor **c = calloc((size_t)n + 1, sizeof *c);
                    for (int k = 0; k < n; k++)
                        c[k] = tj_cast(args[k], dts[t]);
                    tj_release(r);
                    r = tj_module_call(m, argv[3], n, c);
                    for (int k = 0; k < n; k++)
                        tj_release(c[k]);
                    free(c);
                }
            }
            if (tj_status_of(r)) {
                fprintf(stderr, "tj_module: %s\n", tj_error_message(r));
                rc = 1;
            } else {
                char *s = tj_tensor_str(r);
                printf("%s\n", s ? s : "");
                free(s);
            }
        }
        tj_release(r);
        for (int k = 0; k < n; k++)
            tj_release(args[k]);
        free(args);
    }
    tj_module_free(m);
    return rc;
}
