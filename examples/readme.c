/* readme.c — the README's quick example, built and run as a test so it stays true. */
#include <stdio.h>
#include <tracejit.h>

static tj_tensor *dense(tj_tensor *x, tj_tensor *w, tj_tensor *b) {
    return tj_relu(tj_add(tj_matmul(x, w), b)); // intermediates belong to the trace scope
}

int main(void) {
    tj_tensor *(*fast)(tj_tensor *, tj_tensor *, tj_tensor *) =
        tj_jit_compile((void *)dense, 3, NULL);
    int64_t d[2] = {2, 2};
    float one[4] = {1, 1, 1, 1};
    tj_tensor *x = tj_tensor_from_data(TJ_F32, 2, d, one);
    tj_tensor *y = fast(x, x, x); // 1st call per signature: trace + optimize + compile
    int bad = tj_status_of(y) != TJ_OK;
    if (bad)
        fprintf(stderr, "%s\n", tj_error_message(y));
    else
        tj_tensor_fprint(stdout, y); // tj.Tensor([[3 3] [3 3]], shape=(2, 2), dtype=float32)
    tj_release(y);
    tj_release(x);
    tj_jit_free((void *)fast);
    return bad;
}
