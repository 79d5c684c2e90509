"""Single-op cases for the ops the openvino delegate declares beyond the conformance kit's own.

Each is an ``offload.testing.OpCase``: the kit builds the one-op model, runs it through the
delegate and through the CPU reference, and compares. With the kit's cases they give every op
the delegate declares at least one case (the declaration test runs the kit strictly).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from offload.testing import OpCase, Runtime

F = "float32"
X = (2, 5, 7, 3)  # batch 2, H != W
Q = (0.05, -3)  # an int8 tensor's (scale, zero point)


def r(*shape: int, dtype: str | None = None, quant: tuple[float, int] | None = None) -> Runtime:
    return Runtime(tuple(shape), quant, dtype)


def const(values: Any, dtype: Any = np.int32) -> Any:
    return lambda rng: np.array(values, dtype)


def weights(*shape: int) -> Any:
    return lambda rng: (rng.standard_normal(shape) * 0.5).astype(np.float32)


def positive(*shape: int) -> Any:
    return lambda rng: (rng.random(shape) + 0.5).astype(np.float32)


def unary(op: str, shape: Sequence[int] = X, **options: Any) -> OpCase:
    return OpCase(op.lower(), op, F, [r(*shape)], [r(*shape)], options=options)


def binary(op: str, out: str | None = None, second: Any = None) -> OpCase:
    rhs = r(*X) if second is None else second
    return OpCase(op.lower(), op, F, [r(*X), rhs], [r(*X, dtype=out)])


def reduce(op: str, keep_dims: bool) -> OpCase:
    out = (2, 1, 1, 3) if keep_dims else (2, 3)
    options = {"keep_dims": keep_dims}
    return OpCase(op.lower(), op, F, [r(*X), const([1, 2])], [r(*out)], options=options)


EXTRA_CASES: tuple[OpCase, ...] = (
    # elementwise, one input
    unary("ABS"),
    unary("CEIL"),
    unary("COS"),
    unary("ELU"),
    unary("FLOOR"),
    unary("GELU", approximate=False),
    OpCase("gelu_approximate", "GELU", F, [r(*X)], [r(*X)], options={"approximate": True}),
    unary("LEAKY_RELU", alpha=0.2),
    OpCase("log", "LOG", F, [positive(*X)], [r(*X)]),
    OpCase("log_runtime", "LOG", F, [r(*X)], [r(*X)]),
    unary("LOG_SOFTMAX"),
    unary("NEG"),
    unary("ROUND"),
    OpCase("rsqrt", "RSQRT", F, [r(*X)], [r(*X)]),
    unary("SIGN"),
    unary("SIN"),
    OpCase("sqrt", "SQRT", F, [r(*X)], [r(*X)]),
    unary("SQUARE"),
    unary("ZEROS_LIKE"),
    unary("RELU_0_TO_1"),
    unary("RELU_N1_TO_1"),
    # elementwise, two inputs
    binary("DIV"),
    OpCase(
        "div_relu",
        "DIV",
        F,
        [r(*X), positive(1, 1, 1, 3)],
        [r(*X)],
        options={"fused_activation_function": "RELU"},
    ),
    OpCase("pow", "POW", F, [positive(*X), r(*X)], [r(*X)]),
    binary("SQUARED_DIFFERENCE"),
    OpCase("floor_div", "FLOOR_DIV", F, [r(*X), positive(1, 1, 1, 3)], [r(*X)]),
    OpCase("floor_mod", "FLOOR_MOD", F, [r(*X), positive(1, 1, 1, 3)], [r(*X)]),
    binary("EQUAL", "bool"),
    binary("NOT_EQUAL", "bool"),
    binary("LESS", "bool"),
    binary("LESS_EQUAL", "bool"),
    binary("GREATER", "bool"),
    binary("GREATER_EQUAL", "bool"),
    OpCase("logical_or", "LOGICAL_OR", "bool", [r(*X), r(*X)], [r(*X)]),
    OpCase("logical_not", "LOGICAL_NOT", "bool", [r(*X)], [r(*X)]),
    OpCase("select_v2", "SELECT_V2", F, [r(*X, dtype="bool"), r(*X), r(*X)], [r(*X)]),
    OpCase("add_n", "ADD_N", F, [r(*X), r(*X), r(*X)], [r(*X)]),
    # shapes and layout
    OpCase(
        "reshape_new_shape",
        "RESHAPE",
        F,
        [r(1, 8, 8, 4), const([1, 256])],
        [r(1, 256)],
        options={"new_shape": (1, 256)},
    ),
    OpCase(
        "reshape_options_only",
        "RESHAPE",
        F,
        [r(*X)],
        [r(2, 35, 3)],
        options={"new_shape": (2, 35, 3)},
    ),
    OpCase("squeeze", "SQUEEZE", F, [r(2, 1, 7, 1)], [r(2, 7, 1)], options={"squeeze_dims": (1,)}),
    OpCase("expand_dims", "EXPAND_DIMS", F, [r(*X), const([1])], [r(2, 1, 5, 7, 3)]),
    OpCase("transpose", "TRANSPOSE", F, [r(*X), const([0, 3, 1, 2])], [r(2, 3, 5, 7)]),
    OpCase(
        "pack", "PACK", F, [r(5, 7), r(5, 7)], [r(5, 2, 7)], options={"values_count": 2, "axis": 1}
    ),
    OpCase("unpack", "UNPACK", F, [r(5, 2, 7)], [r(5, 7), r(5, 7)], options={"num": 2, "axis": 1}),
    OpCase(
        "split",
        "SPLIT",
        F,
        [const(3), r(2, 5, 7, 6)],
        [r(2, 5, 7, 3), r(2, 5, 7, 3)],
        options={"num_splits": 2},
    ),
    OpCase(
        "split_v",
        "SPLIT_V",
        F,
        [r(2, 5, 7, 6), const([2, 4]), const(3)],
        [r(2, 5, 7, 2), r(2, 5, 7, 4)],
        options={"num_splits": 2},
    ),
    OpCase(
        "slice", "SLICE", F, [r(*X), const([0, 1, 2, 0]), const([2, 3, -1, 2])], [r(2, 3, 5, 2)]
    ),
    OpCase("tile", "TILE", F, [r(2, 5, 7, 1), const([1, 1, 1, 3])], [r(*X)]),
    OpCase("gather", "GATHER", F, [r(*X), const([4, 0, 2])], [r(2, 5, 3, 3)], options={"axis": 2}),
    OpCase("gather_nd", "GATHER_ND", F, [r(5, 7, 3), const([[1, 2], [4, 0]])], [r(2, 3)]),
    OpCase(
        "depth_to_space",
        "DEPTH_TO_SPACE",
        F,
        [r(2, 3, 4, 8)],
        [r(2, 6, 8, 2)],
        options={"block_size": 2},
    ),
    OpCase(
        "space_to_depth",
        "SPACE_TO_DEPTH",
        F,
        [r(2, 6, 8, 2)],
        [r(2, 3, 4, 8)],
        options={"block_size": 2},
    ),
    OpCase("broadcast_to", "BROADCAST_TO", F, [r(1, 5, 1, 3), const([2, 5, 7, 3])], [r(*X)]),
    OpCase("shape", "SHAPE", F, [r(*X)], [r(4, dtype="int32")], options={"out_type": "INT32"}),
    OpCase("fill", "FILL", F, [const([2, 3]), lambda rng: np.array(1.5, np.float32)], [r(2, 3)]),
    OpCase("reverse_v2", "REVERSE_V2", F, [r(*X), const([1])], [r(*X)]),
    OpCase(
        "cast_to_int32",
        "CAST",
        F,
        [r(*X)],
        [r(*X, dtype="int32")],
        options={"in_data_type": "FLOAT32", "out_data_type": "INT32"},
    ),
    OpCase(
        "batch_to_space_nd",
        "BATCH_TO_SPACE_ND",
        F,
        [r(4, 3, 4, 2), const([2, 2]), const([[0, 0], [0, 0]])],
        [r(1, 6, 8, 2)],
    ),
    OpCase(
        "space_to_batch_nd",
        "SPACE_TO_BATCH_ND",
        F,
        [r(1, 6, 8, 2), const([2, 2]), const([[0, 0], [0, 0]])],
        [r(4, 3, 4, 2)],
    ),
    # int32 shape arithmetic, as converters write it around SHAPE
    OpCase("add_int32", "ADD", "int32", [r(2, 3), const([[1, 2, 3]])], [r(2, 3)]),
    OpCase("mul_int32", "MUL", "int32", [r(2, 3), const([[1, -2, 3]])], [r(2, 3)]),
    OpCase("floor_div_int32", "FLOOR_DIV", "int32", [r(2, 3), const([[2, -3, 5]])], [r(2, 3)]),
    OpCase(
        "pack_int32",
        "PACK",
        "int32",
        [r(3), r(3)],
        [r(2, 3)],
        options={"values_count": 2, "axis": 0},
    ),
    OpCase(
        "strided_slice_int32",
        "STRIDED_SLICE",
        "int32",
        [r(4), const([1]), const([3]), const([1])],
        [r(2)],
    ),
    OpCase("reduce_prod_int32", "REDUCE_PROD", "int32", [r(2, 3), const([1])], [r(2)]),
    OpCase(
        "reshape_int32",
        "RESHAPE",
        "int32",
        [r(2, 3), const([3, 2])],
        [r(3, 2)],
        options={"new_shape": (3, 2)},
    ),
    # reductions
    reduce("SUM", False),
    reduce("REDUCE_MAX", True),
    reduce("REDUCE_MIN", False),
    reduce("REDUCE_PROD", True),
    OpCase(
        "arg_max",
        "ARG_MAX",
        F,
        [r(*X), const([3])],
        [r(2, 5, 7, dtype="int32")],
        options={"output_type": "INT32"},
    ),
    OpCase(
        "arg_min",
        "ARG_MIN",
        F,
        [r(*X), const([1])],
        [r(2, 7, 3, dtype="int32")],
        options={"output_type": "INT32"},
    ),
    OpCase("cumsum", "CUMSUM", F, [r(*X), const(2)], [r(*X)]),
    # networks
    OpCase("l2_normalization", "L2_NORMALIZATION", F, [r(*X)], [r(*X)]),
    OpCase(
        "resize_nearest_neighbor",
        "RESIZE_NEAREST_NEIGHBOR",
        F,
        [r(*X), const([10, 14])],
        [r(2, 10, 14, 3)],
    ),
    OpCase(
        "resize_nearest_half_pixel",
        "RESIZE_NEAREST_NEIGHBOR",
        F,
        [r(*X), const([9, 11])],
        [r(2, 9, 11, 3)],
        options={"half_pixel_centers": True},
    ),
    OpCase("batch_matmul", "BATCH_MATMUL", F, [r(2, 5, 7), r(2, 7, 3)], [r(2, 5, 3)]),
    OpCase(
        "batch_matmul_adj_y_weights",
        "BATCH_MATMUL",
        F,
        [r(2, 5, 7), weights(2, 3, 7)],
        [r(2, 5, 3)],
        options={"adj_y": True},
    ),
    # quantized
    OpCase(
        "requantize_int8", "QUANTIZE", "int8", [r(*X, quant=Q)], [r(*X, quant=(0.1, 4))], atol=1.0
    ),
    OpCase("relu_int8", "RELU", "int8", [r(*X, quant=Q)], [r(*X, quant=Q)], version=2),
    OpCase(
        "logistic_int8",
        "LOGISTIC",
        "int8",
        [r(*X, quant=Q)],
        [r(*X, quant=(1 / 256, -128))],
        version=2,
    ),
    OpCase(
        "softmax_int8",
        "SOFTMAX",
        "int8",
        [r(2, 10, quant=Q)],
        [r(2, 10, quant=(1 / 256, -128))],
        options={"beta": 1.0},
        version=2,
    ),
)
