/* S28: a run traced to Chrome trace JSON. A new signature records its trace, passes and compile;
 * each call records a call event and one event per kernel of the compiled program (named by its
 * label, with the function, output shape and bytes); the interpreter (unknown dims) records one
 * event per node and eager ops one each; an eager call (TJ_EAGER, tj_call_eager) records a call
 * event too. Every file is valid JSON (tests/json_check.h), also when a function's name holds a
 * quote, a backslash, a tab, a newline or bytes that are not UTF-8. Nothing is recorded while no
 * profile runs. Misuse is an error. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "native_first.h"
#include "json_check.h"
#include <tracejit.h>

static tj_tensor *f_body(tj_tensor *x) {
    return tj_sum(tj_tanh(tj_add(tj_mul(x, x), tj_scalar_f32(1))), 0, NULL, 0);
}

static void valid_json(const char *path) {
    char *s = check_slurp(path);
    const char *err = s ? check_json(s) : "unreadable";
    CHECK_MSG(err == NULL, "%s is not valid JSON: %s", path, err);
    free(s);
}

/* Functions named with characters JSON must escape (and bytes that are not UTF-8): compiled
 * (trace, passes, compile, call and kernel events name them), then eager. */
static void hostile_names(const char *path) {
    static const char *names[] = {"quote\"d", "back\\slash", "tab\there", "new\nline",
                                  "bytes\xff\xc3("};
    int64_t d[1] = {64};
    tj_tensor *x = tj_random_uniform(TJ_F32, 1, d, -1, 1, 4);
    CHECK_EQ_INT(tj_profile_start(path), TJ_OK);
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        tj_function *f = tj_function_new(names[k], (void *)f_body, 1, NULL);
        tj_release(tj_call(f, 1, &x));
        tj_release(tj_call_eager(f, 1, &x));
        tj_function_free(f);
    }
    CHECK_EQ_INT(tj_profile_stop(), TJ_OK);
    valid_json(path);
    char *s = check_slurp(path);
    if (!tj_backend_unavailable("cpu")) /* kernel events name the function */
        CHECK_HAS(s, "\"function\":\"quote\\\"d\"");
    CHECK_HAS(s, "\"name\":\"new\\u000aline\",\"cat\":\"call\"");
    CHECK_HAS(s, "\"name\":\"tab\\u0009here\",\"cat\":\"call\",\"ph\":\"X\"");
    CHECK_HAS(s, "bytes\\ufffd\\ufffd(");
    free(s);

    /* TJ_EAGER's switch: each call is an event naming the function, its ops events of their own */
    tj_function *f = tj_function_new("eager_fn", (void *)f_body, 1, NULL);
    tj_set_eager(1);
    CHECK_EQ_INT(tj_profile_start(path), TJ_OK);
    tj_release(tj_call(f, 1, &x));
    tj_release(tj_call(f, 1, &x));
    CHECK_EQ_INT(tj_profile_stop(), TJ_OK);
    tj_set_eager(0);
    valid_json(path);
    s = check_slurp(path);
    CHECK_EQ_INT(check_count_of(s, "\"name\":\"eager_fn\",\"cat\":\"call\""), 2);
    CHECK_EQ_INT(check_count_of(s, "\"eager\":1}"), 2);
    CHECK(check_count_of(s, "\"name\":\"tanh\",\"cat\":\"op\"") == 2);
    free(s);
    tj_function_free(f);
    tj_release(x);
}

/* The validator itself refuses what is not JSON. */
static void validator(void) {
    CHECK(check_json("{\"a\":[1,2.5e3,-0,\"x\\n\",true,null]}") == NULL);
    CHECK(check_json("{\"a\":\"tab\there\"}") != NULL);
    CHECK(check_json("{\"a\":1,}") != NULL);
    CHECK(check_json("{\"a\":\"q\"d\"}") != NULL);
    CHECK(check_json("[\"\xff\"]") != NULL);
    CHECK(check_json("[1] 2") != NULL);
}

/* An eager tape runs only the gradient kernels its sources need (api_grad_want): with w watched
 * alone, conv2d's and matmul's input gradients are not computed; watched too, they are. */
static void gradients_wanted(const char *path) {
    int64_t dx[4] = {2, 6, 6, 3}, dw[4] = {3, 3, 3, 4}, dm[2] = {4, 5};
    tj_tensor *x = tj_random_uniform(TJ_F32, 4, dx, -1, 1, 5),
              *w = tj_random_uniform(TJ_F32, 4, dw, -1, 1, 6),
              *m = tj_random_uniform(TJ_F32, 2, dm, -1, 1, 7);
    for (int both = 0; both < 2; both++) {
        tj_scope_begin(); /* the forward's intermediates */
        CHECK_EQ_INT(tj_profile_start(path), TJ_OK);
        tj_tape *tp = tj_tape_new(0);
        tj_tape_watch(tp, w);
        if (both)
            tj_tape_watch(tp, x);
        int64_t flat[2] = {2 * 4 * 4, 4};
        tj_tensor *y =
            tj_sum(tj_matmul(tj_reshape(tj_conv2d(x, w, NULL, TJ_PAD_VALID, NULL), 2, flat), m), 0,
                   NULL, 0);
        tj_tape_stop(tp);
        tj_tensor *src[2] = {w, x}, *g[2] = {NULL, NULL};
        CHECK_EQ_INT(tj_tape_gradient(tp, y, NULL, both ? 2 : 1, src, g), TJ_OK);
        CHECK(g[0] != NULL && (both ? g[1] != NULL : 1));
        tj_tape_free(tp);
        tj_scope_end();
        CHECK_EQ_INT(tj_profile_stop(), TJ_OK);
        char *s = check_slurp(path);
        CHECK(s != NULL);
        if (s) {
            CHECK_EQ_INT(check_count_of(s, "\"name\":\"conv2d_grad_filter\""), 1);
            CHECK_EQ_INT(check_count_of(s, "\"name\":\"conv2d_grad_input\""), both);
            /* the product's gradient for its left operand only: m is not watched */
            CHECK_EQ_INT(check_count_of(s, "\"name\":\"matmul\""), 2);
        }
        free(s);
    }
    tj_release(x);
    tj_release(w);
    tj_release(m);
}

int main(void) {
    check_untiered();
    char path[] = "/tmp/tj-profile-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return 77;
    close(fd);
    tj_function *f = tj_function_new("prof_fn", (void *)f_body, 1, NULL);
    int64_t d[1] = {1000};
    tj_tensor *x = tj_random_uniform(TJ_F32, 1, d, -1, 1, 3);

    CHECK_EQ_INT(tj_profile_start(path), TJ_OK);
    for (int i = 0; i < 3; i++)
        tj_release(tj_call(f, 1, &x));
    tj_release(tj_exp(x)); /* an eager op */
    /* the interpreter backend runs it, node by node */
    tj_function_options o = {.backend = "interp"};
    tj_function *g = tj_function_new("prof_interp", (void *)f_body, 1, &o);
    tj_release(tj_call(g, 1, &x));
    CHECK_EQ_INT(tj_profile_stop(), TJ_OK);

    char *s = check_slurp(path);
    CHECK(s != NULL);
    if (s) {
        CHECK_HAS(s, "\"traceEvents\"");
        CHECK_EQ_INT(check_count_of(s, "\"cat\":\"call\""), 4);
        CHECK_EQ_INT(check_count_of(s, "\"name\":\"prof_fn\",\"cat\":\"trace\""), 1);
        CHECK_EQ_INT(check_count_of(s, "\"name\":\"prof_fn\",\"cat\":\"passes\""), 1);
        CHECK_EQ_INT(check_count_of(s, "\"name\":\"prof_fn\",\"cat\":\"compile\""), 1);
        /* mul add tanh sum: one kernel (or a chain) per call, with its ops in the name (a build
         * without LLVM interprets) */
        if (!tj_backend_unavailable("cpu")) {
            CHECK(check_count_of(s, "\"cat\":\"kernel\"") >= 3);
            CHECK_HAS(s, "\"function\":\"prof_fn\"");
            CHECK_HAS(s, "\"bytes\":");
        }
        CHECK_HAS(s, "tanh");
        CHECK_HAS(s, "\"name\":\"exp\",\"cat\":\"op\"");
        CHECK_HAS(s, "\"eager\":1,\"out\":\"f32[1000]\"");
        CHECK_HAS(s, "\"name\":\"tanh\",\"cat\":\"op\""); /* the interpreter's node */
        CHECK_HAS(s, "\"tid\":");
        free(s);
    }
    valid_json(path);

    /* off: calls record nothing */
    tj_release(tj_call(f, 1, &x));
    CHECK_EQ_INT(tj_profile_start(path), TJ_OK);
    CHECK_EQ_INT(tj_profile_stop(), TJ_OK);
    s = check_slurp(path);
    CHECK(s && check_count_of(s, "\"cat\":\"call\"") == 0 &&
          check_count_of(s, "\"cat\":\"kernel\"") == 0);
    free(s);
    valid_json(path);

    /* misuse */
    CHECK_EQ_INT(tj_profile_start(NULL), TJ_ERR_INVALID);
    CHECK_HAS(tj_last_error(), "profile_start: the path is NULL or empty");
    CHECK_EQ_INT(tj_profile_stop(), TJ_ERR_INVALID);
    CHECK_HAS(tj_last_error(), "profile_stop: no profile is being recorded");
    CHECK_EQ_INT(tj_profile_start(path), TJ_OK);
    CHECK_EQ_INT(tj_profile_start(path), TJ_ERR_INVALID);
    CHECK_HAS(tj_last_error(), "a profile is already being recorded");
    CHECK_EQ_INT(tj_profile_stop(), TJ_OK);
    CHECK_EQ_INT(tj_profile_start("/nonexistent-dir/p.json"), TJ_OK);
    CHECK_EQ_INT(tj_profile_stop(), TJ_ERR_IO);
    CHECK_HAS(tj_last_error(), "profile_stop: cannot write /nonexistent-dir/p.json");

    validator();
    hostile_names(path);
    unlink(path);
    tj_release(x);
    tj_function_free(f);
    tj_function_free(g);
    gradients_wanted(path);
    return check_done();
}
