/* ops_nn.c — ONNX's neural-network ops as tracejit ops: losses (NegativeLogLikelihoodLoss,
 * SoftmaxCrossEntropyLoss), normalizations (BatchNormalization in inference, LayerNormalization,
 * InstanceNormalization), global pooling, and the matrix helpers Trilu, EyeLike, Hardmax, OneHot.
 * ONNX is channels-first (NCHW); tracejit's convolutions are NHWC: layouts are transposed here. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

const ox_op ox_ops_nn[] = {
    {NULL, NULL, 0, 0, 0},
};
