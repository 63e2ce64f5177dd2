/* main.c — the install test's ONNX consumer: uses only the installed <tracejit.h>, <tj_onnx.h>
 * and libraries. Loads a one-node model (Relu on float32[4], its 64 protobuf bytes below),
 * writes it to argv[1] when given (for the installed tj_onnx tool), runs it and checks
 * relu([-1, 2, -3, 4]) == [0, 2, 0, 4]; exits non-zero otherwise. */
#include <stdio.h>
#include <tj_onnx.h>
#include <tracejit.h>

static const unsigned char model[64] = {
    0x08, 0x08, 0x3a, 0x36, 0x0a, 0x0c, 0x0a, 0x01, 0x78, 0x12, 0x01, 0x79, 0x22, 0x04, 0x52, 0x65,
    0x6c, 0x75, 0x12, 0x04, 0x72, 0x65, 0x6c, 0x75, 0x5a, 0x0f, 0x0a, 0x01, 0x78, 0x12, 0x0a, 0x0a,
    0x08, 0x08, 0x01, 0x12, 0x04, 0x0a, 0x02, 0x08, 0x04, 0x62, 0x0f, 0x0a, 0x01, 0x79, 0x12, 0x0a,
    0x0a, 0x08, 0x08, 0x01, 0x12, 0x04, 0x0a, 0x02, 0x08, 0x04, 0x42, 0x04, 0x0a, 0x00, 0x10, 0x0d};

int main(int argc, char **argv) {
    if (argc > 1) {
        FILE *f = fopen(argv[1], "wb");
        if (!f || fwrite(model, 1, sizeof model, f) != sizeof model || fclose(f) != 0) {
            fprintf(stderr, "consumer_onnx: cannot write %s\n", argv[1]);
            return 1;
        }
    }
    tj_onnx_model *m = tj_onnx_load_bytes(model, sizeof model, "relu.onnx", NULL);
    if (!m) {
        fprintf(stderr, "consumer_onnx: %s\n", tj_last_error());
        return 1;
    }
    const float xv[4] = {-1, 2, -3, 4}, want[4] = {0, 2, 0, 4};
    int64_t d[1] = {4};
    tj_tensor *x = tj_tensor_from_data(TJ_F32, 1, d, xv);
    tj_tensor *y = tj_onnx_call(m, 1, &x);
    int ok = tj_status_of(y) == TJ_OK && tj_tensor_numel(y) == 4;
    for (int i = 0; ok && i < 4; i++)
        ok = tj_tensor_get_f64(y, i) == want[i];
    printf("consumer_onnx: relu([-1 2 -3 4]) %s\n", ok                ? "= [0 2 0 4]"
                                                    : tj_status_of(y) ? tj_error_message(y)
                                                                      : "is wrong");
    tj_release(y);
    tj_release(x);
    tj_onnx_free(m);
    return ok ? 0 : 1;
}
