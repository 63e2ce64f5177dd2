/* conformance.c — ONNX's own backend tests on tracejit (Debian's libonnx-testdata, ONNX 1.12).
 * Every test directory holds model.onnx and test_data_set_N/ with input_K.pb and output_K.pb;
 * each data set is run through the imported function and compared as ONNX's runner does: the
 * same number of outputs, equal dtypes and shapes, |out - ref| <= 1e-7 + 1e-3 |ref| with NaN
 * equal to NaN. A test passes when every data set does; is unsupported when the importer refuses
 * the model (an op, attribute or dtype tracejit lacks; the reason is kept); fails otherwise.
 *
 *   conformance DATA_DIR [--report FILE.md] [--check EXPECTED] [--write EXPECTED]
 *
 * --report writes the summary (per category and per tier) and one row per test; --check fails
 * (exit 1) when a test listed in EXPECTED no longer passes; --write stores the passing tests as
 * the new EXPECTED (on purpose, by hand). Tiers (issue 13): T1 elementwise, activations,
 * products, reductions, softmax, shape ops; T2 adds convolution, pooling, normalization, Resize;
 * T3 is control flow, sequences, strings, quantized ops and everything else. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "onnx.pb-c.h"
#include "tj_onnx.h"

static const char *T1[] = {"Abs",
                           "Acos",
                           "Acosh",
                           "Add",
                           "And",
                           "ArgMax",
                           "ArgMin",
                           "Asin",
                           "Asinh",
                           "Atan",
                           "Atanh",
                           "BitShift",
                           "Cast",
                           "CastLike",
                           "Ceil",
                           "Celu",
                           "Clip",
                           "Compress",
                           "Concat",
                           "Constant",
                           "ConstantOfShape",
                           "Cos",
                           "Cosh",
                           "CumSum",
                           "DepthToSpace",
                           "Det",
                           "Div",
                           "Dropout",
                           "Einsum",
                           "Elu",
                           "Equal",
                           "Erf",
                           "Exp",
                           "Expand",
                           "EyeLike",
                           "Flatten",
                           "Floor",
                           "Gather",
                           "GatherElements",
                           "GatherND",
                           "Gemm",
                           "Greater",
                           "GreaterOrEqual",
                           "HardSigmoid",
                           "HardSwish",
                           "Hardmax",
                           "Identity",
                           "IsInf",
                           "IsNaN",
                           "LeakyRelu",
                           "Less",
                           "LessOrEqual",
                           "Log",
                           "LogSoftmax",
                           "MatMul",
                           "Max",
                           "Mean",
                           "Min",
                           "Mish",
                           "Mod",
                           "Mul",
                           "Neg",
                           "NonZero",
                           "Not",
                           "OneHot",
                           "Or",
                           "PRelu",
                           "Pad",
                           "Pow",
                           "Range",
                           "Reciprocal",
                           "ReduceL1",
                           "ReduceL2",
                           "ReduceLogSum",
                           "ReduceLogSumExp",
                           "ReduceMax",
                           "ReduceMean",
                           "ReduceMin",
                           "ReduceProd",
                           "ReduceSum",
                           "ReduceSumSquare",
                           "Relu",
                           "Reshape",
                           "Round",
                           "ScatterElements",
                           "ScatterND",
                           "Selu",
                           "Shape",
                           "Shrink",
                           "Sigmoid",
                           "Sign",
                           "Sin",
                           "Sinh",
                           "Size",
                           "Slice",
                           "Softmax",
                           "Softplus",
                           "Softsign",
                           "SpaceToDepth",
                           "Split",
                           "Sqrt",
                           "Squeeze",
                           "Sub",
                           "Sum",
                           "Tan",
                           "Tanh",
                           "ThresholdedRelu",
                           "Tile",
                           "TopK",
                           "Transpose",
                           "Trilu",
                           "Unique",
                           "Unsqueeze",
                           "Where",
                           "Xor",
                           "SoftmaxCrossEntropyLoss",
                           "NegativeLogLikelihoodLoss",
                           NULL};
static const char *T2[] = {"Conv",
                           "ConvTranspose",
                           "MaxPool",
                           "AveragePool",
                           "GlobalAveragePool",
                           "GlobalMaxPool",
                           "LpPool",
                           "GlobalLpPool",
                           "BatchNormalization",
                           "InstanceNormalization",
                           "LayerNormalization",
                           "LpNormalization",
                           "MeanVarianceNormalization",
                           "LRN",
                           "Resize",
                           "Upsample",
                           "MaxUnpool",
                           "RoiAlign",
                           "GridSample",
                           "Col2Im",
                           NULL};

static int in_list(const char *const *l, const char *s) {
    for (; *l; l++)
        if (!strcmp(*l, s))
            return 1;
    return 0;
}

typedef struct result {
    char name[160];
    char category[32];
    char ops[256];
    int tier;   /* 1, 2, 3 */
    int status; /* 0 pass, 1 fail, 2 unsupported */
    char why[320];
} result;

/* The model's op types (distinct, in order) and its tier. */
static void model_ops(const char *path, result *r) {
    size_t n = 0;
    unsigned char *p = (unsigned char *)check_slurp_n(path, &n);
    Onnx__ModelProto *m = p ? onnx__model_proto__unpack(NULL, n, p) : NULL;
    r->tier = 1;
    r->ops[0] = 0;
    for (size_t i = 0; m && m->graph && i < m->graph->n_node; i++) {
        const char *op = m->graph->node[i]->op_type;
        char key[64];
        snprintf(key, sizeof key, "%s", op);
        if (!strstr(r->ops, key) && strlen(r->ops) + strlen(op) + 2 < sizeof r->ops)
            snprintf(r->ops + strlen(r->ops), sizeof r->ops - strlen(r->ops), "%s%s",
                     r->ops[0] ? " " : "", op);
        int t = in_list(T1, op) ? 1 : in_list(T2, op) ? 2 : 3;
        if (t > r->tier)
            r->tier = t;
    }
    if (m)
        onnx__model_proto__free_unpacked(m, NULL);
    free(p);
}

/* ONNX 1.12's test data stores bfloat16 tensors as uint16 (the bits): read as the model declares
 * them (both belong to the caller's scope). */
static tj_tensor *as_declared(tj_tensor *t, const tj_spec *s) {
    if (tj_status_of(t) || s->dtype != TJ_BF16 || tj_tensor_dtype(t) != TJ_U16)
        return t;
    return tj_tensor_from_data(TJ_BF16, tj_tensor_rank(t), tj_tensor_dims(t), tj_tensor_data(t));
}

/* Compares got with want; 0 or writes why. */
static int compare(const tj_tensor *got, const tj_tensor *want, int k, char *why, size_t cap) {
    if (tj_tensor_dtype(got) != tj_tensor_dtype(want)) {
        snprintf(why, cap, "output %d: dtype %s, expected %s", k,
                 tj_dtype_name(tj_tensor_dtype(got)), tj_dtype_name(tj_tensor_dtype(want)));
        return 1;
    }
    int r = tj_tensor_rank(got);
    int same = r == tj_tensor_rank(want);
    for (int d = 0; same && d < r; d++)
        same = tj_tensor_dims(got)[d] == tj_tensor_dims(want)[d];
    if (!same) {
        snprintf(why, cap, "output %d: rank %d shape differs from the expected (rank %d)", k, r,
                 tj_tensor_rank(want));
        return 1;
    }
    int64_t n = tj_tensor_numel(want);
    for (int64_t i = 0; i < n; i++) {
        double a = tj_tensor_get_f64(got, i), b = tj_tensor_get_f64(want, i);
        if (isnan(a) && isnan(b))
            continue;
        if (a == b)
            continue;
        if (!(fabs(a - b) <= 1e-7 + 1e-3 * fabs(b))) {
            snprintf(why, cap, "output %d: element %lld is %.9g, expected %.9g", k, (long long)i, a,
                     b);
            return 1;
        }
    }
    return 0;
}

static int count_files(const char *dir, const char *prefix) {
    int n = 0;
    char path[1600];
    for (;; n++) {
        struct stat st;
        snprintf(path, sizeof path, "%s/%s_%d.pb", dir, prefix, n);
        if (stat(path, &st))
            return n;
    }
}

static void run_test(const char *dir, result *r) {
    char path[1600];
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    model_ops(path, r);
    tj_onnx_model *m = tj_onnx_load(path, NULL);
    if (!m) {
        r->status = 2;
        const char *e = tj_last_error();
        const char *tail = strstr(e, "onnx: ");
        snprintf(r->why, sizeof r->why, "%s", tail ? tail + 6 : e);
        return;
    }
    r->status = 0;
    for (int set = 0; !r->status; set++) {
        char sd[1400];
        snprintf(sd, sizeof sd, "%s/test_data_set_%d", dir, set);
        struct stat st;
        if (stat(sd, &st))
            break;
        int ni = count_files(sd, "input"), no = count_files(sd, "output");
        tj_tensor **in = calloc((size_t)ni + 1, sizeof *in),
                  **want = calloc((size_t)no + 1, sizeof *want);
        for (int k = 0; k < ni && !r->status; k++) {
            snprintf(path, sizeof path, "%s/input_%d.pb", sd, k);
            in[k] = tj_onnx_read_tensor(path);
            tj_spec s;
            if (k < tj_onnx_n_inputs(m) && tj_onnx_input(m, k, &s))
                in[k] = as_declared(in[k], &s);
            if (tj_status_of(in[k])) {
                r->status = 2;
                snprintf(r->why, sizeof r->why, "input %d: %s", k, tj_error_message(in[k]));
            }
        }
        for (int k = 0; k < no && !r->status; k++) {
            snprintf(path, sizeof path, "%s/output_%d.pb", sd, k);
            want[k] = tj_onnx_read_tensor(path);
            tj_spec s;
            if (k < tj_onnx_n_outputs(m) && tj_onnx_output(m, k, &s))
                want[k] = as_declared(want[k], &s);
            if (tj_status_of(want[k])) {
                r->status = 2;
                snprintf(r->why, sizeof r->why, "output %d: %s", k, tj_error_message(want[k]));
            }
        }
        if (!r->status && ni != tj_onnx_n_inputs(m)) {
            r->status = 2;
            snprintf(r->why, sizeof r->why, "%d inputs given for %d (optional inputs)", ni,
                     tj_onnx_n_inputs(m));
        }
        tj_tensor *got = r->status ? NULL : tj_onnx_call(m, ni, in);
        if (got && tj_status_of(got)) {
            const char *e = tj_error_message(got), *tail = strstr(e, "onnx: ");
            /* the importer refusing something at trace time is "unsupported", not wrong */
            r->status = tj_status_of(got) == TJ_ERR_UNSUPPORTED ? 2 : 1;
            snprintf(r->why, sizeof r->why, "%s", tail ? tail + 6 : e);
        } else if (got) {
            if (tj_onnx_n_outputs(m) != no) {
                r->status = 1;
                snprintf(r->why, sizeof r->why, "%d outputs, expected %d", tj_onnx_n_outputs(m),
                         no);
            }
            for (int k = 0; k < no && !r->status; k++)
                r->status = compare(no == 1 ? got : tj_tuple_get(got, k), want[k], k, r->why,
                                    sizeof r->why);
        }
        free(in); /* the tensors: the caller's scope owns them */
        free(want);
    }
    tj_onnx_free(m);
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: conformance DATA_DIR [--report F.md] [--check F] [--write F]\n");
        return 2;
    }
    const char *root = argv[1], *report = NULL, *check = NULL, *write = NULL;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--report"))
            report = argv[i + 1];
        else if (!strcmp(argv[i], "--check"))
            check = argv[i + 1];
        else if (!strcmp(argv[i], "--write"))
            write = argv[i + 1];
    }
    struct stat st;
    if (stat(root, &st)) {
        fprintf(stderr, "conformance: %s not found (Debian's libonnx-testdata); skipped\n", root);
        return 77;
    }
    static const char *cats[] = {"node", "simple", "pytorch-converted", "pytorch-operator"};
    result *res = NULL;
    int n = 0, cap = 0;
    for (int c = 0; c < 4; c++) {
        char cd[1024];
        snprintf(cd, sizeof cd, "%s/%s", root, cats[c]);
        DIR *d = opendir(cd);
        if (!d)
            continue;
        char **names = NULL;
        int nn = 0;
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.')
                continue;
            names = realloc(names, (size_t)(nn + 1) * sizeof *names);
            names[nn++] = strdup(e->d_name);
        }
        closedir(d);
        qsort(names, (size_t)nn, sizeof *names, cmp_str);
        for (int k = 0; k < nn; k++) {
            char td[1200], mp[1400];
            snprintf(td, sizeof td, "%s/%s", cd, names[k]);
            snprintf(mp, sizeof mp, "%s/model.onnx", td);
            if (!stat(mp, &st)) {
                if (n == cap)
                    res = realloc(res, (size_t)(cap = cap ? 2 * cap : 256) * sizeof *res);
                result *r = &res[n++];
                memset(r, 0, sizeof *r);
                snprintf(r->name, sizeof r->name, "%s", names[k]);
                snprintf(r->category, sizeof r->category, "%s", cats[c]);
                tj_scope_begin();
                run_test(td, r);
                tj_scope_end();
            }
            free(names[k]);
        }
        free(names);
    }
    /* the summary */
    int by_cat[4][3] = {{0}}, by_tier[3][3] = {{0}};
    for (int i = 0; i < n; i++) {
        for (int c = 0; c < 4; c++)
            if (!strcmp(res[i].category, cats[c]))
                by_cat[c][res[i].status]++;
        by_tier[res[i].tier - 1][res[i].status]++;
    }
    FILE *out = report ? fopen(report, "w") : NULL;
    FILE *sinks[2] = {stdout, out};
    for (int s = 0; s < 2; s++) {
        FILE *f = sinks[s];
        if (!f)
            continue;
        fprintf(f, "| set | pass | fail | unsupported | pass rate |\n|---|---:|---:|---:|---:|\n");
        for (int c = 0; c < 4; c++) {
            int t = by_cat[c][0] + by_cat[c][1] + by_cat[c][2];
            fprintf(f, "| %s | %d | %d | %d | %.1f%% |\n", cats[c], by_cat[c][0], by_cat[c][1],
                    by_cat[c][2], t ? 100.0 * by_cat[c][0] / t : 0);
        }
        for (int t = 0; t < 3; t++) {
            int tot = by_tier[t][0] + by_tier[t][1] + by_tier[t][2];
            fprintf(f, "| tier T%d | %d | %d | %d | %.1f%% |\n", t + 1, by_tier[t][0],
                    by_tier[t][1], by_tier[t][2], tot ? 100.0 * by_tier[t][0] / tot : 0);
        }
    }
    if (out) {
        fprintf(out,
                "\n| test | set | tier | ops | result | reason |\n|---|---|---|---|---|---|\n");
        for (int i = 0; i < n; i++) {
            const result *r = &res[i];
            char why[340];
            snprintf(why, sizeof why, "%s", r->why);
            for (char *p = why; *p; p++)
                if (*p == '|' || *p == '\n')
                    *p = ' ';
            fprintf(out, "| %s | %s | T%d | %s | %s | %s |\n", r->name, r->category, r->tier,
                    r->ops, (const char *[]){"pass", "FAIL", "unsupported"}[r->status], why);
        }
        fclose(out);
    }
    int rc = 0;
    if (check) {
        size_t len = 0;
        char *text = check_slurp_n(check, &len);
        int regressions = 0, listed = 0;
        for (char *line = text ? strtok(text, "\n") : NULL; line; line = strtok(NULL, "\n")) {
            int found = 0;
            listed++;
            for (int i = 0; i < n && !found; i++) {
                char key[200];
                snprintf(key, sizeof key, "%s/%s", res[i].category, res[i].name);
                if (!strcmp(key, line)) {
                    found = 1;
                    if (res[i].status != 0) {
                        printf("REGRESSION %s: %s\n", key, res[i].why);
                        regressions++;
                    }
                }
            }
            if (!found) {
                printf("REGRESSION %s: not run\n", line);
                regressions++;
            }
        }
        free(text);
        printf("%d expected passes checked, %d regressions\n", listed, regressions);
        rc = regressions ? 1 : 0;
    }
    if (write) {
        FILE *f = fopen(write, "w");
        for (int i = 0; f && i < n; i++)
            if (res[i].status == 0)
                fprintf(f, "%s/%s\n", res[i].category, res[i].name);
        if (f)
            fclose(f);
    }
    free(res);
    return rc;
}
