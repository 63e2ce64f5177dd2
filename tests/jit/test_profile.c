/* S28: a run traced to Chrome trace JSON. A new signature records its trace, passes and compile;
 * each call records a call event and one event per kernel of the compiled program (named by its
 * label, with the function, output shape and bytes); the interpreter (unknown dims) records one
 * event per node and eager ops one each. The file is valid JSON (checked with Python's parser
 * where it is installed). Nothing is recorded while no profile runs. Misuse is an error. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include <tracejit.h>

static tj_tensor *f_body(tj_tensor *x) {
    return tj_sum(tj_tanh(tj_add(tj_mul(x, x), tj_scalar_f32(1))), 0, NULL, 0);
}

static void valid_json(const char *path) {
    if (system("command -v python3 > /dev/null 2>&1") != 0)
        return;
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); "
             "assert all(e[\"ph\"] in \"XM\" for e in d[\"traceEvents\"])' %s",
             path);
    CHECK_MSG(system(cmd) == 0, "%s is not valid trace JSON", path);
}

int main(void) {
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
    /* unknown dims: the interpreter runs it, node by node */
    tj_spec spec = {TJ_F32, 1, {-1}, NULL};
    tj_function_options o = {.n_input_signature = 1, .input_signature = &spec};
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
        /* mul add tanh sum: one kernel (or a chain) per call, with its ops in the name */
        CHECK(check_count_of(s, "\"cat\":\"kernel\"") >= 3);
        CHECK_HAS(s, "tanh");
        CHECK_HAS(s, "\"function\":\"prof_fn\"");
        CHECK_HAS(s, "\"bytes\":");
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

    unlink(path);
    tj_release(x);
    tj_function_free(f);
    tj_function_free(g);
    return check_done();
}
