"""Operator library written in te (TVM's topi counterpart), channels-last layouts.

Each function takes te tensors and returns the output tensor; build a PrimFunc with
``te.create_prim_func([inputs..., output])``. Operators that pad or normalise make
several computes (one block each), as topi does.
"""

from .conv import (
    conv1d_nwc,
    conv2d_nhwc,
    conv2d_transpose_nhwc,
    conv3d_ndhwc,
    depthwise_conv2d_nhwc,
    group_conv2d_nhwc,
)
from .elemwise import (
    add,
    bias_add,
    broadcast_shape,
    divide,
    exp,
    gelu,
    maximum,
    minimum,
    multiply,
    relu,
    sigmoid,
    subtract,
    tanh,
)
from .matmul import batch_matmul, dense, matmul
from .nn import layer_norm, softmax
from .pool import avg_pool2d, global_avg_pool2d, max_pool2d
from .quantized import quantized_dense, quantized_matmul, requantize, requantize_multiplier
from .quantized_conv import (
    quantized_conv2d_nchw,
    quantized_conv2d_nhwc,
    quantized_depthwise_conv2d_nchw,
    quantized_depthwise_conv2d_nhwc,
)
from .quantized_scale import dequantize_linear, quantize_linear, quantized_add
from .transform import pad, reshape, transpose

__all__ = [
    "add",
    "avg_pool2d",
    "batch_matmul",
    "bias_add",
    "broadcast_shape",
    "conv1d_nwc",
    "conv2d_nhwc",
    "conv2d_transpose_nhwc",
    "conv3d_ndhwc",
    "dense",
    "dequantize_linear",
    "depthwise_conv2d_nhwc",
    "divide",
    "exp",
    "gelu",
    "global_avg_pool2d",
    "group_conv2d_nhwc",
    "layer_norm",
    "matmul",
    "max_pool2d",
    "maximum",
    "minimum",
    "multiply",
    "pad",
    "quantize_linear",
    "quantized_add",
    "quantized_conv2d_nchw",
    "quantized_conv2d_nhwc",
    "quantized_dense",
    "quantized_depthwise_conv2d_nchw",
    "quantized_depthwise_conv2d_nhwc",
    "quantized_matmul",
    "relu",
    "requantize",
    "requantize_multiplier",
    "reshape",
    "sigmoid",
    "softmax",
    "subtract",
    "tanh",
    "transpose",
]
