/* s24_grappler.c — S24: constant folding, CSE and arithmetic simplification are visible in the
 * IR dumped before/after each pass (files <dir>/<function>.<sighash>.<NN>.<pass>.tjir), the
 * statistics count them, and the optimized graph is the expected one:
 *   out = (x * (2 + 3)) + (x * (8 - 3)) * 1   ->   m = x * 5; out = m + m */
#include <dirent.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "ptest.h"

static int count_lines(const char *text, const char *needle) {
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

static void rm_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    char path[512];
    while ((e = readdir(d)))
        if (e->d_name[0] != '.') {
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
    closedir(d);
    rmdir(dir);
}

int main(void) {
    int64_t d4[1] = {4};
    ir_graph *g = ir_graph_new("s24");
    uint32_t x = b_param(g, 0, TJ_F32, 1, d4);
    uint32_t five_a = b_bin(g, IR_OP_ADD, b_f32(g, 2), b_f32(g, 3));
    uint32_t five_b = b_bin(g, IR_OP_SUB, b_f32(g, 8), b_f32(g, 3));
    uint32_t m1 = b_bin(g, IR_OP_MUL, x, five_a);
    uint32_t m2 = b_bin(g, IR_OP_MUL, x, five_b);
    CHECK(m1 != m2); /* distinct before folding */
    uint32_t out = b_bin(g, IR_OP_ADD, m1, b_bin(g, IR_OP_MUL, m2, b_f32(g, 1)));
    ir_add_output(g, out);
    uint32_t n_before = g->n_nodes;

    char dir[] = "/tmp/tj_s24_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    pass_options o = ptest_opts(NULL);
    o.dump_dir = dir;
    o.function = "s24 fn"; /* the space is made file-name safe */
    o.sig_hash = 0xabcull;
    pass_stats s;
    ir_graph *r = pass_pipeline_run(g, &o, &s);
    CHECK_MSG(r != NULL, "%s", ir_last_error());
    if (!r) {
        rm_dir(dir);
        ir_graph_free(g);
        return check_done();
    }
    /* the result: param, const 5, mul, add */
    CHECK_EQ_INT(r->n_nodes, 4);
    CHECK_EQ_INT(count_op(r, IR_OP_MUL), 1);
    CHECK_EQ_INT(count_op(r, IR_OP_ADD), 1);
    CHECK_EQ_INT(count_op(r, IR_OP_SUB), 0);
    const ir_node *o0 = &r->nodes[r->outputs[0]];
    CHECK_EQ_INT(o0->op, IR_OP_ADD);
    const uint32_t *oi = ir_inputs(r, o0);
    CHECK(oi[0] == oi[1]); /* m + m: both products merged */
    const ir_node *mul = &r->nodes[oi[0]];
    CHECK_EQ_INT(mul->op, IR_OP_MUL);
    const uint32_t *mi = ir_inputs(r, mul);
    const float *five = const_f32(r, mi[0]) ? const_f32(r, mi[0]) : const_f32(r, mi[1]);
    CHECK(five && *five == 5.0f);

    CHECK(s.pass[PASS_FOLD].folded >= 2);
    /* interning merges as soon as both factors fold to the same constant: during fold */
    CHECK(s.pass[PASS_FOLD].merged + s.pass[PASS_CSE].merged >= 1);
    CHECK(s.pass[PASS_SIMPLIFY].simplified >= 1);
    CHECK(s.pass[PASS_PRUNE].removed >= 1);
    CHECK_EQ_INT(s.nodes_in, n_before);
    CHECK_EQ_INT(s.nodes_out, 4);
    CHECK(s.iterations >= 1 && s.iterations <= PASS_DEFAULT_MAX_ITERS);
    char buf[512];
    const char *line = buf;
    pass_stats_format(&s, buf, sizeof buf);
    CHECK_HAS(line, "fold ");
    CHECK_HAS(line, "folded");
    CHECK_HAS(line, "merged");
    CHECK_HAS(line, "simplified");
    CHECK_HAS(line, "removed");

    /* the dumps: input, then one file per pass run, in order (fold, cse, simplify, prune), the
     * second iteration confirming the fixed point */
    const char *seq[] = {"input", "fold", "cse", "simplify", "prune", "fold"};
    char *text[6] = {NULL};
    for (int i = 0; i < 6; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/s24_fn.0000000000000abc.%02d.%s.tjir", dir, i, seq[i]);
        text[i] = check_slurp(path);
        CHECK_MSG(text[i] != NULL, "missing dump %s", path);
    }
    if (text[0] && text[1] && text[2] && text[3] && text[4] && text[5]) {
        /* fold: the adds/subs of constants are gone, and the two products x*5 are one node
         * (interning merges them as soon as their factors are the same constant) */
        CHECK_EQ_INT(count_lines(text[0], "= mul"), 3);
        CHECK_EQ_INT(count_lines(text[0], "= sub"), 1);
        CHECK_EQ_INT(count_lines(text[1], "= sub"), 0);
        CHECK_EQ_INT(count_lines(text[1], "= mul"), 2);
        CHECK_HAS(text[1], "const [5] : f32[]");
        CHECK_MSG(strcmp(text[1], text[2]) == 0, "cse found more after fold's rebuild");
        /* simplify: m * 1 is m */
        CHECK_MSG(strcmp(text[2], text[3]) != 0, "simplify changed nothing in the dump");
        CHECK_EQ_INT(count_lines(text[3], "= mul"), 1);
        /* prune: the dead constants go */
        CHECK_MSG(strcmp(text[3], text[4]) != 0, "prune changed nothing in the dump");
        CHECK_EQ_INT(count_lines(text[4], "= const"), 1);
        CHECK_MSG(strcmp(text[4], text[5]) == 0, "the second iteration changed the graph");
        /* every dump is valid text IR that parses back to a verified graph */
        for (int i = 0; i < 6; i++) {
            ir_graph *p = ir_parse(text[i]);
            CHECK_MSG(p != NULL, "dump %d does not parse: %s", i, ir_last_error());
            if (p)
                CHECK_MSG(ir_verify(p) == TJ_OK, "dump %d: %s", i, ir_last_error());
            ir_graph_free(p);
        }
        /* the final dump is the result */
        char *final = ir_print(r);
        CHECK(final && strcmp(final, text[5]) == 0);
        free(final);
    }
    for (int i = 0; i < 6; i++)
        free(text[i]);

    /* No dump directory, same result; an unwritable directory is an I/O error. */
    pass_options o2 = ptest_opts(NULL);
    ir_graph *r2 = pass_pipeline_run(g, &o2, NULL);
    CHECK(r2 && ir_graph_hash(r2).lo == ir_graph_hash(r).lo);
    ir_graph_free(r2);
    o2.dump_dir = "/nonexistent-tj-dir/sub";
    r2 = pass_pipeline_run(g, &o2, NULL);
    CHECK(r2 == NULL);
    CHECK_EQ_INT(ir_last_code(), TJ_ERR_IO);
    CHECK_HAS(ir_last_error(), "/nonexistent-tj-dir/sub");
    ir_graph_free(r2);

    /* the input graph was not modified */
    CHECK_EQ_INT(g->n_nodes, n_before);
    CHECK(ir_verify(g) == TJ_OK);
    rm_dir(dir);
    ir_graph_free(r);
    ir_graph_free(g);
    return check_done();
}
