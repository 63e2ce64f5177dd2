/* S28: graphs as Graphviz DOT. A function with a parameter, constants, a variable read and
 * assignment, a print, a tj_cond and fused elementwise kernels is drawn before the passes, after
 * them, and with the CPU backend's kernels as clusters; each picture is checked for what a reader
 * needs to see, and rendered by Graphviz's `dot` where it is installed. TJ_DUMP writes the same
 * pictures beside the text IR. Bad arguments are errors. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "jit/jit.h"

static tj_variable *v;

static tj_tensor *double_it(int n, tj_tensor *const *a, void *u) {
    return tj_mul(a[0], tj_scalar_f32(2));
}
static tj_tensor *negate(int n, tj_tensor *const *a, void *u) {
    return tj_neg(a[0]);
}

static tj_tensor *body(tj_tensor *x) {
    /* (1 + 2) folds away after the passes; tanh(x * 3 + 1) is one fused kernel */
    tj_tensor *k = tj_add(tj_scalar_f32(1), tj_scalar_f32(2));
    tj_tensor *y = tj_tanh(tj_add(tj_mul(x, k), tj_scalar_f32(1)));
    tj_tensor *s = tj_sum(y, 0, NULL, 0);
    tj_print("s", 1, &s);
    tj_assign(v, tj_add(tj_variable_read(v), s));
    return tj_cond(tj_greater(s, tj_scalar_f32(0)), double_it, negate, 1, &y, NULL);
}

static void renders(const char *dot, const char *what) {
    if (system("command -v dot > /dev/null 2>&1") != 0)
        return; /* Graphviz is not installed: the text checks still ran */
    char path[] = "/tmp/tj-dot-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    CHECK(write(fd, dot, strlen(dot)) == (ssize_t)strlen(dot));
    close(fd);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "dot -Tsvg %s -o /dev/null", path);
    CHECK_MSG(system(cmd) == 0, "dot rejects the %s picture", what);
    unlink(path);
}

static int dump_files(const char *dir, const char *suffix) {
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    while (d && (e = readdir(d))) {
        size_t l = strlen(e->d_name), ls = strlen(suffix);
        n += l > ls && strcmp(e->d_name + l - ls, suffix) == 0;
    }
    if (d)
        closedir(d);
    return n;
}

int main(void) {
    char dir[] = "/tmp/tj-dump-XXXXXX";
    if (!mkdtemp(dir))
        return 77;
    setenv("TJ_DUMP", dir, 1); /* read once, at the first call */
    tj_tensor *zero = tj_scalar_f32(0);
    v = tj_variable_new(zero, "acc");
    tj_release(zero);
    tj_function *f = tj_function_new("pic \"quoted\"", (void *)body, 1, NULL);
    tj_spec spec = {TJ_F32, 1, {8}, NULL};
    tj_concrete *c = tj_function_get_concrete(f, 1, &spec);
    CHECK_MSG(c != NULL, "%s", tj_last_error());
    if (!c)
        return check_done();

    char *traced = tj_concrete_graph_dot(c, TJ_GRAPH_TRACED);
    char *opt = tj_concrete_graph_dot(c, TJ_GRAPH_OPTIMIZED);
    char *kern = tj_concrete_graph_dot(c, TJ_GRAPH_KERNELS);
    CHECK(traced && opt && kern);
    if (traced && opt && kern) {
        CHECK_HAS(opt, "digraph \"pic \\\"quoted\\\"\""); /* the name, escaped */
        /* one box per node of the optimized graph, whose first line names it */
        CHECK_EQ_INT(check_count_of(opt, " [shape="), tj_concrete_node_count(c) + 1 /* result 0 */);
        CHECK(check_count_of(traced, " [shape=") >
              check_count_of(opt, " [shape=")); /* 1 + 2 folded */
        CHECK_HAS(traced, "add\\nf32[]");
        CHECK_HAS(opt, "shape=invhouse"); /* the parameter */
        CHECK_HAS(opt, "param 0\\nf32[8]");
        CHECK_HAS(opt, "shape=cylinder"); /* the variable read */
        CHECK_HAS(opt, "var_read v0");
        CHECK_HAS(opt, "assign v0");
        CHECK_HAS(opt, "print\\nvoid");
        CHECK_EQ_INT(check_count_of(opt, "penwidth=2"), 2); /* the print and the assignment */
        CHECK_HAS(opt, "style=dashed");                     /* side effects in program order */
        CHECK_HAS(opt, "shape=box3d");                      /* the cond, with its regions */
        CHECK_HAS(opt, "then: 3 nodes\\nelse: 2 nodes");    /* param, const, mul | param, neg */
        CHECK_HAS(opt, "result 0");
        CHECK_EQ_INT(check_count_of(opt, "subgraph cluster_"), 0);
        /* the kernels: mul add tanh fused into one cluster (a build without LLVM interprets) */
        if (!tj_backend_unavailable("cpu")) {
            CHECK(check_count_of(kern, "subgraph cluster_") >= 1);
            CHECK_HAS(kern, ": mul add tanh"); /* the kernel's label lists its ops */
        }
        CHECK_HAS(kern, "tanh");
        CHECK_EQ_INT(check_count_of(kern, " [shape="), check_count_of(opt, " [shape="));
        renders(traced, "traced");
        renders(opt, "optimized");
        renders(kern, "kernels");
    }
    free(traced);
    free(opt);
    free(kern);
    /* TJ_DUMP wrote both pictures beside the text IR */
    CHECK_EQ_INT(dump_files(dir, ".traced.dot"), 1);
    CHECK_EQ_INT(dump_files(dir, ".kernels.dot"), 1);
    CHECK(dump_files(dir, ".tjir") > 0);

    CHECK(tj_concrete_graph_dot(NULL, TJ_GRAPH_OPTIMIZED) == NULL);
    CHECK_HAS(tj_last_error(), "concrete_graph_dot: the concrete function is NULL");
    CHECK(tj_concrete_graph_dot(c, (tj_graph_stage)7) == NULL);
    CHECK_HAS(tj_last_error(), "stage 7 is not traced (0), optimized (1) or kernels (2)");

    tj_function_free(f);
    tj_variable_free(v);
    check_rm_dir(dir);
    return check_done();
}
