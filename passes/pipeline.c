/* pipeline.c — runs the passes in a fixed order until nothing changes (bounded), with the
 * verifier after each pass, TJ_DUMP-style text dumps and per-pass statistics.
 *
 *   input ──verify──▶ fold ─▶ cse ─▶ simplify ─▶ prune ──┐      (after each: verify, dump)
 *                      ▲                                 │
 *                      └── again while anything changed ◀┘      (at most max_iters times)
 *
 * fold turns constant subgraphs into CONSTs (every rebuild interns, so what became identical
 * merges right there; cse then only checks), simplify removes the identities folding exposed
 * (x*1, x+0), prune drops the dead. A pass that finds nothing to do returns its input (a scan,
 * no rebuild), so the confirming last iteration is cheap. The input graph is never modified. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "passes/passes.h"

typedef ir_graph *(*pass_fn)(const ir_graph *, const pass_options *, pass_stat *);

static const char *const names[PASS_N] = {"simplify", "fold", "cse", "prune", "fusion"};
static const pass_fn fns[PASS_N] = {pass_simplify_run, pass_fold_run, pass_cse_run, pass_prune_run,
                                    NULL};
static const pass_id order[] = {PASS_FOLD, PASS_CSE, PASS_SIMPLIFY, PASS_PRUNE};

const char *pass_name(pass_id id) {
    return id < PASS_N ? names[id] : "?";
}

/* The public passes always return a new graph. */
static ir_graph *fresh(const ir_graph *g, ir_graph *r) {
    return r == g ? ir_graph_clone(g) : r;
}
ir_graph *pass_simplify(const ir_graph *g, const pass_options *o, pass_stat *st) {
    return fresh(g, pass_simplify_run(g, o, st));
}
ir_graph *pass_fold(const ir_graph *g, const pass_options *o, pass_stat *st) {
    return fresh(g, pass_fold_run(g, o, st));
}
ir_graph *pass_cse(const ir_graph *g, const pass_options *o, pass_stat *st) {
    return fresh(g, pass_cse_run(g, o, st));
}
ir_graph *pass_prune(const ir_graph *g, const pass_options *o, pass_stat *st) {
    return fresh(g, pass_prune_run(g, o, st));
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

tj_status pass_parse_spec(const char *spec, unsigned *mask_out) {
    unsigned mask = PASS_DEFAULT_MASK;
    bool first = true;
    const char *p = spec ? spec : "";
    while (*p) {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        if (!*p)
            break;
        const char *e = p;
        while (*e && *e != ',')
            e++;
        const char *end = e;
        while (end > p && (end[-1] == ' ' || end[-1] == '\t'))
            end--;
        int sign = 0;
        if (*p == '-' || *p == '+')
            sign = *p++ == '-' ? -1 : 1;
        size_t len = (size_t)(end - p);
        if (first && sign == 0)
            mask = 0;
        first = false;
        unsigned bits = 0;
        if ((len == 3 && !memcmp(p, "all", 3)) || (len == 7 && !memcmp(p, "default", 7)))
            bits = PASS_DEFAULT_MASK;
        else if (len == 4 && !memcmp(p, "none", 4))
            bits = PASS_DEFAULT_MASK, sign = -1;
        for (int i = 0; i < PASS_N && !bits; i++)
            if (strlen(names[i]) == len && !memcmp(names[i], p, len))
                bits = PASS_BIT(i);
        if (!bits)
            return ir_errorf(TJ_ERR_INVALID,
                             "passes: unknown pass '%.*s' in \"%s\" (known: simplify, fold, cse, "
                             "prune, fusion, all, none; '-name' disables)",
                             (int)len, p, spec);
        mask = sign < 0 ? mask & ~bits : mask | bits;
        p = e;
    }
    *mask_out = mask;
    return TJ_OK;
}

/* ---- dumps ----------------------------------------------------------------------------------- */
static tj_status dump_graph(const pass_options *o, const ir_graph *g, int seq, const char *what) {
    char fn[96];
    const char *name = o->function ? o->function : (g->name && *g->name ? g->name : "graph");
    size_t k = 0;
    for (; name[k] && k + 1 < sizeof fn; k++) {
        char c = name[k];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '_' || c == '-' || c == '.';
        fn[k] = ok ? c : '_';
    }
    fn[k] = '\0';
    if (mkdir(o->dump_dir, 0777) != 0 && errno != EEXIST)
        return ir_errorf(TJ_ERR_IO, "passes: cannot create dump directory %s: %s", o->dump_dir,
                         strerror(errno));
    size_t plen = strlen(o->dump_dir) + strlen(fn) + strlen(what) + 48;
    char *path = malloc(plen);
    if (!path)
        return ir_errorf(TJ_ERR_OOM, "passes: out of memory");
    snprintf(path, plen, "%s/%s.%016llx.%02d.%s.tjir", o->dump_dir, fn,
             (unsigned long long)o->sig_hash, seq, what);
    char *text = ir_print(g);
    if (!text) {
        free(path);
        return ir_last_code() ? ir_last_code() : TJ_ERR_OOM;
    }
    tj_status st = TJ_OK;
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0)
        st = ir_errorf(TJ_ERR_IO, "passes: cannot write dump %s: %s", path, strerror(errno));
    if (f && fclose(f) != 0 && st == TJ_OK)
        st = ir_errorf(TJ_ERR_IO, "passes: cannot write dump %s: %s", path, strerror(errno));
    free(text);
    free(path);
    return st;
}

static bool verify_ok(const ir_graph *g, const char *after) {
    if (ir_verify(g) == TJ_OK)
        return true;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", ir_last_error());
    ir_errorf(TJ_ERR_INVALID, "passes: invalid graph after %s: %s", after, msg);
    return false;
}

static uint64_t changes(const pass_stat *s) {
    return s->folded + s->merged + s->simplified + s->removed;
}

ir_graph *pass_pipeline_run(const ir_graph *g, const pass_options *opts, pass_stats *stats) {
    uint64_t t0 = now_ns();
    pass_options def;
    if (!opts) {
        memset(&def, 0, sizeof def);
        opts = &def;
    }
    pass_stats local;
    pass_stats *s = stats ? stats : &local;
    memset(s, 0, sizeof *s);
    if (!g) {
        ir_errorf(TJ_ERR_INVALID, "passes: graph is NULL");
        return NULL;
    }
    s->nodes_in = s->nodes_out = g->n_nodes;
    unsigned mask;
    if (pass_parse_spec(opts->passes, &mask) != TJ_OK)
        return NULL;
    if (opts->verify && !verify_ok(g, "input (before any pass)"))
        return NULL;
    int seq = 0;
    if (opts->dump_dir && dump_graph(opts, g, seq++, "input") != TJ_OK)
        return NULL;
    /* cur is g until the first pass changes something; owned graphs are freed when replaced */
    ir_graph *cur = (ir_graph *)g;
    /* the regions of control flow first, through the same passes (their params and results keep
     * their types, so the nodes owning them stay valid): the passes here then see optimized
     * bodies, so a node an inner loop moved out of its body can move on out of the outer one */
    if (g->n_subs) {
        if (!(cur = ir_graph_clone(g)))
            return NULL;
        pass_options ro = *opts;
        ro.dump_dir = NULL;
        for (uint32_t i = 0; i < cur->n_subs; i++) {
            pass_stats rs;
            ir_graph *r = pass_pipeline_run(cur->subs[i], &ro, &rs);
            if (!r) {
                ir_graph_free(cur);
                return NULL;
            }
            ir_graph_free(cur->subs[i]);
            cur->subs[i] = r;
            for (int k = 0; k < PASS_N; k++) {
                s->pass[k].folded += rs.pass[k].folded;
                s->pass[k].merged += rs.pass[k].merged;
                s->pass[k].simplified += rs.pass[k].simplified;
                s->pass[k].removed += rs.pass[k].removed;
            }
        }
    }
    int max_iters = opts->max_iters > 0 ? opts->max_iters : PASS_DEFAULT_MAX_ITERS;
    bool failed = false;
    for (int it = 0; it < max_iters && !failed; it++) {
        uint64_t changed = 0;
        bool ran = false;
        for (size_t k = 0; k < sizeof order / sizeof order[0] && !failed; k++) {
            pass_id id = order[k];
            if (!(mask & PASS_BIT(id)) || !fns[id])
                continue;
            pass_stat *ps = &s->pass[id];
            uint64_t before = changes(ps), t1 = now_ns();
            ir_graph *next = fns[id](cur, opts, ps);
            ps->ns += now_ns() - t1;
            ps->runs++;
            ran = true;
            if (!next) {
                failed = true;
                break;
            }
            if (next != cur) {
                if (cur != g)
                    pass_spare_put(cur); /* the next rebuild reuses its storage */
                cur = next;
                changed += changes(ps) - before;
                if (opts->verify && !verify_ok(cur, names[id]))
                    failed = true;
            }
            if (!failed && opts->dump_dir && dump_graph(opts, cur, seq++, names[id]) != TJ_OK)
                failed = true;
        }
        if (!ran)
            break;
        s->iterations++;
        if (!changed)
            break;
    }
    pass_spare_put(NULL);
    if (failed) {
        if (cur != g)
            ir_graph_free(cur);
        return NULL;
    }
    if (cur == g && !(cur = ir_graph_clone(g)))
        return NULL;
    s->nodes_out = cur->n_nodes;
    s->total_ns = now_ns() - t0;
    return cur;
}

int pass_stats_format(const pass_stats *s, char *buf, size_t n) {
    char tmp[1024];
    size_t off = 0;
#define PUT(...)                                                                                   \
    do {                                                                                           \
        if (off < sizeof tmp) {                                                                    \
            int w_ = snprintf(tmp + off, sizeof tmp - off, __VA_ARGS__);                           \
            off += w_ > 0 ? (size_t)w_ : 0;                                                        \
        }                                                                                          \
    } while (0)
    PUT("passes: %u -> %u nodes, %u iters, %.3f ms", s->nodes_in, s->nodes_out, s->iterations,
        (double)s->total_ns / 1e6);
    for (int i = 0; i < PASS_N; i++) {
        const pass_stat *p = &s->pass[i];
        if (!p->runs)
            continue;
        const uint64_t v[5] = {p->simplified, p->folded, p->merged, p->removed, p->fold_failed};
        static const char *const what[5] = {"simplified", "folded", "merged", "removed",
                                            "fold failures"};
        PUT("; %s", names[i]);
        bool any = false;
        for (int k = 0; k < 5; k++)
            if (v[k] || k == i) { /* the pass's own counter always, the others when non-zero */
                PUT("%s %llu %s", any ? "," : "", (unsigned long long)v[k], what[k]);
                any = true;
            }
        PUT(" %.3f ms", (double)p->ns / 1e6);
    }
#undef PUT
    if (buf && n)
        snprintf(buf, n, "%s", tmp);
    return (int)(off < sizeof tmp ? off : sizeof tmp - 1);
}
