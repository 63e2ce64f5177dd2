/* s09_eager_switch.c — SEMANTICS S9: with eager mode forced (tj_set_eager(1), tj_call_eager,
 * the `eager` option, or TJ_EAGER=1 in the environment) the user's C code runs on every call, op
 * by op, and gives the same results as the compiled code. The environment part re-runs this
 * binary with TJ_EAGER=1 and the argument "--child-eager". */
#include <sys/wait.h>
#include <unistd.h>

#include <tracejit.h>

#include "check.h"

static int n_runs, n_symbolic, n_printed;
static void sink(const char *line, void *user) {
    (void)user;
    if (strncmp(line, "x =", 3) == 0)
        n_printed++;
}

/* relu(x) * 2 - mean(x) */
static tj_tensor *body(tj_tensor *x) {
    n_runs++;
    n_symbolic += tj_tensor_is_symbolic(x);
    tj_print("x =", 1, &x);
    return tj_sub(tj_mul(tj_relu(x), tj_scalar_f32(2.0f)), tj_mean(x, 0, NULL, 0));
}

static const float input[4] = {-1.0f, 2.0f, 3.0f, -4.0f};
static const double want[4] = {0.0, 4.0, 6.0, 0.0}; /* mean is 0 */

static int check_result(tj_tensor *r) {
    int ok = tj_status_of(r) == TJ_OK && tj_tensor_numel(r) == 4;
    for (int i = 0; ok && i < 4; i++)
        ok = fabs(tj_tensor_get_f64(r, i) - want[i]) < 1e-6;
    return ok;
}

static tj_tensor *arg(void) {
    int64_t d[1] = {4};
    return tj_tensor_from_data(TJ_F32, 1, d, input);
}

/* the child: TJ_EAGER=1 from the environment, no tj_set_eager call */
static int child(void) {
    tj_scope_begin();
    tj_set_print_sink(sink, NULL);
    CHECK_EQ_INT(tj_get_eager(), 1);
    tj_function *f = tj_function_new("body", (void *)body, 1, NULL);
    for (int i = 0; i < 3; i++)
        CHECK(check_result(tj_call(f, 1, (tj_tensor *[]){arg()})));
    CHECK_EQ_INT(n_runs, 3);
    CHECK_EQ_INT(n_symbolic, 0);
    CHECK_EQ_INT(n_printed, 3);
    CHECK_EQ_INT(tj_function_trace_count(f), 0);
    tj_function_free(f);
    tj_set_print_sink(NULL, NULL);
    tj_scope_end();
    return check_done();
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--child-eager") == 0)
        return child();
    tj_scope_begin();
    tj_set_print_sink(sink, NULL);
    tj_set_eager(0); /* whatever TJ_EAGER says for the parent */
    tj_function *f = tj_function_new("body", (void *)body, 1, NULL);

    /* compiled: the C code runs once, the print op every call */
    for (int i = 0; i < 3; i++)
        CHECK(check_result(tj_call(f, 1, (tj_tensor *[]){arg()})));
    CHECK_EQ_INT(n_runs, 1);
    CHECK_EQ_INT(n_symbolic, 1);
    CHECK_EQ_INT(n_printed, 3);
    CHECK_EQ_INT(tj_function_trace_count(f), 1);

    /* tj_set_eager(1): the C code runs on every call with concrete tensors, same results */
    n_runs = n_symbolic = n_printed = 0;
    tj_set_eager(1);
    CHECK_EQ_INT(tj_get_eager(), 1);
    for (int i = 0; i < 3; i++)
        CHECK(check_result(tj_call(f, 1, (tj_tensor *[]){arg()})));
    CHECK_EQ_INT(n_runs, 3);
    CHECK_EQ_INT(n_symbolic, 0);
    CHECK_EQ_INT(n_printed, 3);
    CHECK_EQ_INT(tj_function_trace_count(f), 1);
    /* a new signature does not trace in eager mode */
    CHECK_EQ_INT(tj_status_of(tj_call(f, 1, (tj_tensor *[]){tj_scalar_f32(1.0f)})), TJ_OK);
    CHECK_EQ_INT(tj_function_trace_count(f), 1);
    tj_set_eager(0);
    CHECK_EQ_INT(tj_get_eager(), 0);

    /* back to compiled: the cached trace is reused */
    n_runs = n_symbolic = n_printed = 0;
    CHECK(check_result(tj_call(f, 1, (tj_tensor *[]){arg()})));
    CHECK_EQ_INT(n_runs, 0);
    CHECK_EQ_INT(n_printed, 1);

    /* tj_call_eager: always op by op */
    for (int i = 0; i < 2; i++)
        CHECK(check_result(tj_call_eager(f, 1, (tj_tensor *[]){arg()})));
    CHECK_EQ_INT(n_runs, 2);
    CHECK_EQ_INT(n_symbolic, 0);
    CHECK_EQ_INT(n_printed, 3);
    CHECK_EQ_INT(tj_function_trace_count(f), 1);
    tj_function_free(f);

    /* the per-function option */
    n_runs = n_symbolic = n_printed = 0;
    f = tj_function_new("body", (void *)body, 1, &(tj_function_options){.eager = 1});
    for (int i = 0; i < 2; i++)
        CHECK(check_result(tj_call(f, 1, (tj_tensor *[]){arg()})));
    CHECK_EQ_INT(n_runs, 2);
    CHECK_EQ_INT(n_symbolic, 0);
    CHECK_EQ_INT(tj_function_trace_count(f), 0);
    tj_function_free(f);

    /* TJ_EAGER=1 in the environment, in a child process running this binary */
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        setenv("TJ_EAGER", "1", 1);
        execl("/proc/self/exe", argv[0], "--child-eager", (char *)NULL);
        _exit(99);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);

    tj_set_print_sink(NULL, NULL);
    tj_scope_end();
    return check_done();
}
