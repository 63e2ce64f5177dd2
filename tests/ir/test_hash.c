/* test_hash.c — ir_hash_bytes and the structural graph hash: independent of node numbering
 * (branches built in either order, commutative operands, orphan blobs), sensitive to constants,
 * dtypes, attributes, output/effect order, and able to tell equal random nodes apart. */
#include "check.h"
#include "ir/ir.h"

static uint32_t param(ir_graph *g, int idx) {
    ir_node p = {.op = IR_OP_PARAM, .dtype = TJ_F32, .rank = 1, .dims = {4}};
    p.a.i[0] = idx;
    return ir_add(g, &p, NULL, 0);
}
static uint32_t op1(ir_graph *g, int op, uint32_t a) {
    return ir_add(g, &(ir_node){.op = (uint16_t)op}, &a, 1);
}
static uint32_t op2(ir_graph *g, int op, uint32_t a, uint32_t b) {
    uint32_t in[2] = {a, b};
    return ir_add(g, &(ir_node){.op = (uint16_t)op}, in, 2);
}
static uint32_t cst(ir_graph *g, int dt, const void *data, size_t n) {
    ir_node p = {.op = IR_OP_CONST, .dtype = (uint8_t)dt};
    p.a.blob = ir_add_blob(g, data, n);
    return ir_add(g, &p, NULL, 0);
}
static bool heq(const ir_graph *a, const ir_graph *b) {
    ir_hash128 x = ir_graph_hash(a), y = ir_graph_hash(b);
    return x.lo == y.lo && x.hi == y.hi;
}

/* (exp(p0) op log(p1)) * c, with the two branches built in either order */
static ir_graph *build(bool swap, int op, float c, bool orphan) {
    ir_graph *g = ir_graph_new(swap ? "b" : "a");
    if (orphan)
        ir_add_blob(g, "junk", 4);
    uint32_t p0, p1, e, l;
    if (!swap) {
        p0 = param(g, 0), p1 = param(g, 1);
        e = op1(g, IR_OP_EXP, p0), l = op1(g, IR_OP_LOG, p1);
    } else {
        p1 = param(g, 1), p0 = param(g, 0);
        l = op1(g, IR_OP_LOG, p1), e = op1(g, IR_OP_EXP, p0);
    }
    uint32_t k = cst(g, TJ_F32, &c, sizeof c);
    uint32_t r = op2(g, op, e, l);
    uint32_t out = op2(g, IR_OP_MUL, swap ? k : r, swap ? r : k);
    ir_add_output(g, out);
    ir_node pr = {.op = IR_OP_PRINT};
    pr.a.blob = ir_add_blob(g, "v", 2);
    ir_add(g, &pr, &out, 1);
    return g;
}

int main(void) {
    /* bytes */
    uint64_t h1 = ir_hash_bytes("hello", 5, 0), h2 = ir_hash_bytes("hello", 5, 0);
    CHECK(h1 == h2);
    CHECK(h1 != ir_hash_bytes("hello", 5, 1));
    CHECK(h1 != ir_hash_bytes("hellp", 5, 0));
    CHECK(h1 != ir_hash_bytes("hello", 4, 0));
    CHECK(ir_hash_bytes("", 0, 0) != ir_hash_bytes("\0", 1, 0));
    unsigned char buf[32] = {0};
    uint64_t seen[33];
    for (int n = 0; n <= 32; n++) {
        seen[n] = ir_hash_bytes(buf, (size_t)n, 7);
        for (int m = 0; m < n; m++)
            CHECK(seen[m] != seen[n]);
    }
    buf[17] = 1;
    CHECK(ir_hash_bytes(buf, 32, 7) != seen[32]);
    /* long inputs run four chains: every byte, every length, the order of words within a
     * 32-byte step and the order of the steps all count */
    unsigned char big[256];
    for (int i = 0; i < 256; i++)
        big[i] = (unsigned char)(i * 37 + 11);
    uint64_t base = ir_hash_bytes(big, 256, 7);
    for (int i = 0; i < 256; i++) {
        big[i] ^= 0x10;
        CHECK(ir_hash_bytes(big, 256, 7) != base);
        big[i] ^= 0x10;
    }
    for (int n = 60; n < 200; n++)
        CHECK(ir_hash_bytes(big, (size_t)n, 7) != ir_hash_bytes(big, (size_t)n + 1, 7));
    unsigned char sw[256];
    memcpy(sw, big, 256);
    memcpy(sw + 64, big + 72, 8); /* two words of one step trade places */
    memcpy(sw + 72, big + 64, 8);
    CHECK(ir_hash_bytes(sw, 256, 7) != base);
    memcpy(sw, big, 256);
    memcpy(sw + 32, big + 64, 32); /* two steps trade places */
    memcpy(sw + 64, big + 32, 32);
    CHECK(ir_hash_bytes(sw, 256, 7) != base);
    CHECK(ir_hash_bytes(big, 256, 8) != base);

    /* renumbering invariance */
    ir_graph *a = build(false, IR_OP_ADD, 2.0f, false), *b = build(true, IR_OP_ADD, 2.0f, true);
    CHECK(a->n_nodes == b->n_nodes);
    CHECK(a->nodes[5].op != b->nodes[5].op || a->nodes[3].op != b->nodes[3].op);
    CHECK(heq(a, b));
    CHECK(heq(a, a));
    ir_graph *ac = ir_graph_clone(a);
    CHECK(heq(a, ac));
    ir_graph_free(ac);
    /* non-commutative op: operand order matters, ids do not */
    ir_graph *s1 = build(false, IR_OP_SUB, 2.0f, false), *s2 = build(true, IR_OP_SUB, 2.0f, false);
    CHECK(heq(s1, s2));
    CHECK(!heq(s1, a));
    ir_graph *c = build(false, IR_OP_ADD, 3.0f, false);
    CHECK(!heq(a, c)); /* different constant */
    /* the parsed text form hashes the same */
    char *t = ir_print(b);
    ir_graph *pb = ir_parse(t);
    CHECK(pb && heq(a, pb));
    free(t);
    ir_graph_free(pb);
    /* outputs matter, in order */
    ir_add_output(c, 0);
    ir_graph *c2 = build(false, IR_OP_ADD, 3.0f, false);
    CHECK(!heq(c, c2));
    ir_add_output(c2, 0);
    CHECK(heq(c, c2));
    ir_graph *c3 = build(false, IR_OP_ADD, 3.0f, false);
    c3->outputs[0] = 0;
    ir_add_output(c3, c2->outputs[0]);
    CHECK(!heq(c2, c3));

    /* dtype and attrs matter */
    ir_graph *d1 = ir_graph_new("d"), *d2 = ir_graph_new("d");
    int32_t iv = 0;
    float fv = 0;
    ir_add_output(d1, cst(d1, TJ_I32, &iv, 4));
    ir_add_output(d2, cst(d2, TJ_F32, &fv, 4));
    CHECK(!heq(d1, d2));
    ir_node sm = {.op = IR_OP_SUM};
    uint32_t x1 = param(d1, 0), x2 = param(d2, 0);
    sm.a.i[0] = 1;
    ir_add(d1, &sm, &x1, 1);
    sm.a.i[0] = 0;
    ir_add(d2, &sm, &x2, 1);
    d2->outputs[0] = d1->outputs[0] = d1->n_nodes - 1;
    CHECK(!heq(d1, d2));

    /* equal random nodes are told apart: add(r1, r2) != add(r1, r1) */
    ir_graph *r1 = ir_graph_new("r"), *r2 = ir_graph_new("r");
    ir_node rn = {.op = IR_OP_RANDOM_NORMAL, .dtype = TJ_F32, .rank = 1, .dims = {4}};
    rn.a.f[1] = 1;
    uint32_t u1 = ir_add(r1, &rn, NULL, 0), u2 = ir_add(r1, &rn, NULL, 0);
    ir_add_output(r1, op2(r1, IR_OP_SUB, u1, u2));
    uint32_t w1 = ir_add(r2, &rn, NULL, 0);
    ir_add(r2, &rn, NULL, 0);
    ir_add_output(r2, op2(r2, IR_OP_SUB, w1, w1));
    CHECK(!heq(r1, r2));
    /* two identical prints count twice */
    ir_graph *e1 = build(false, IR_OP_ADD, 2.0f, false);
    ir_node pr = {.op = IR_OP_PRINT};
    pr.a.blob = ir_add_blob(e1, "v", 2);
    uint32_t last = e1->outputs[0];
    ir_add(e1, &pr, &last, 1);
    CHECK(!heq(a, e1));
    CHECK(ir_graph_hash(NULL).lo != 0);

    ir_graph *gs[] = {a, b, s1, s2, c, c2, c3, d1, d2, r1, r2, e1};
    for (size_t i = 0; i < sizeof gs / sizeof gs[0]; i++) {
        CHECK_MSG(ir_verify(gs[i]) == TJ_OK, "%s", ir_last_error());
        ir_graph_free(gs[i]);
    }
    return check_done();
}
