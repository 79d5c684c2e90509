"""The conformance cases: single-op models that the CPU reference passes, as data.

Each case names an op, a dtype, the runtime inputs, the constants and the options; the model
is built with :mod:`offload.model.builder`. Expected values come from the CPU reference (which
is itself checked against LiteRT in offload's own test suite), so any delegate can be held to
them without LiteRT installed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from offload.model.builder import ModelBuilder

__all__ = ["OpCase", "CASES", "build_case"]

Quant = tuple[float, int] | None


@dataclass(frozen=True)
class OpCase:
    """One single-op model: runtime inputs, constants (made from ``seed``), options, output."""

    name: str
    op: str
    dtype: str
    inputs: Sequence[tuple[tuple[int, ...], Quant]]
    output: tuple[tuple[int, ...], Quant]
    constants: Sequence[Callable[[np.random.Generator], np.ndarray | tuple[np.ndarray, Any]]] = ()
    options: Mapping[str, Any] = field(default_factory=dict)
    version: int = 1
    atol: float = 1e-5
    rtol: float = 1e-4


def _w(*shape: int, scale: float = 0.5) -> Callable[[np.random.Generator], np.ndarray]:
    return lambda rng: (rng.standard_normal(shape) * scale).astype(np.float32)


def _i32(values: Sequence[int]) -> Callable[[np.random.Generator], np.ndarray]:
    return lambda rng: np.array(values, np.int32)


def _q8w(*shape: int, axis: int = 0) -> Callable[[np.random.Generator], tuple[np.ndarray, Any]]:
    def make(rng: np.random.Generator) -> tuple[np.ndarray, Any]:
        values = rng.integers(-127, 128, size=shape).astype(np.int8)
        scales = (rng.random(shape[axis]) * 0.01 + 0.005).astype(np.float32)
        return values, (scales, np.zeros(shape[axis], np.int64), axis)

    return make


def _bias32(n: int, scale: float) -> Callable[[np.random.Generator], tuple[np.ndarray, Any]]:
    return lambda rng: (rng.integers(-500, 500, size=n).astype(np.int32), (scale, 0, 0))


F = "float32"
IMG = (1, 8, 8, 4)
Q_IN: Quant = (0.05, -3)
Q_OUT: Quant = (0.1, 2)

CASES: tuple[OpCase, ...] = (
    OpCase("add", "ADD", F, [(IMG, None), (IMG, None)], (IMG, None)),
    OpCase(
        "add_relu6_broadcast",
        "ADD",
        F,
        [(IMG, None), ((1, 1, 1, 4), None)],
        (IMG, None),
        options={"fused_activation_function": "RELU6"},
    ),
    OpCase("sub", "SUB", F, [(IMG, None), (IMG, None)], (IMG, None)),
    OpCase("mul_channel_broadcast", "MUL", F, [(IMG, None)], (IMG, None), constants=[_w(4)]),
    OpCase("maximum", "MAXIMUM", F, [(IMG, None), (IMG, None)], (IMG, None)),
    OpCase("minimum", "MINIMUM", F, [(IMG, None), (IMG, None)], (IMG, None)),
    OpCase("relu", "RELU", F, [(IMG, None)], (IMG, None)),
    OpCase("relu6", "RELU6", F, [(IMG, None)], (IMG, None)),
    OpCase("logistic", "LOGISTIC", F, [(IMG, None)], (IMG, None)),
    OpCase("tanh", "TANH", F, [(IMG, None)], (IMG, None)),
    OpCase("exp", "EXP", F, [(IMG, None)], (IMG, None)),
    OpCase("hard_swish", "HARD_SWISH", F, [(IMG, None)], (IMG, None)),
    OpCase("prelu", "PRELU", F, [(IMG, None)], (IMG, None), constants=[_w(1, 1, 4)]),
    OpCase("softmax", "SOFTMAX", F, [((1, 10), None)], ((1, 10), None), options={"beta": 1.0}),
    OpCase(
        "conv_same_relu",
        "CONV_2D",
        F,
        [(IMG, None)],
        ((1, 8, 8, 6), None),
        constants=[_w(6, 3, 3, 4), _w(6)],
        options={
            "padding": "SAME",
            "stride_w": 1,
            "stride_h": 1,
            "fused_activation_function": "RELU",
        },
    ),
    OpCase(
        "conv_valid_stride2",
        "CONV_2D",
        F,
        [(IMG, None)],
        ((1, 3, 3, 5), None),
        constants=[_w(5, 3, 3, 4), _w(5)],
        options={"padding": "VALID", "stride_w": 2, "stride_h": 2},
    ),
    OpCase(
        "conv_dilated",
        "CONV_2D",
        F,
        [(IMG, None)],
        ((1, 8, 8, 2), None),
        constants=[_w(2, 3, 3, 4), _w(2)],
        options={
            "padding": "SAME",
            "stride_w": 1,
            "stride_h": 1,
            "dilation_w_factor": 2,
            "dilation_h_factor": 2,
        },
    ),
    OpCase(
        "depthwise_same",
        "DEPTHWISE_CONV_2D",
        F,
        [(IMG, None)],
        (IMG, None),
        constants=[_w(1, 3, 3, 4), _w(4)],
        options={"padding": "SAME", "stride_w": 1, "stride_h": 1, "depth_multiplier": 1},
    ),
    OpCase(
        "depthwise_stride2_relu6",
        "DEPTHWISE_CONV_2D",
        F,
        [(IMG, None)],
        ((1, 4, 4, 4), None),
        constants=[_w(1, 3, 3, 4), _w(4)],
        options={
            "padding": "SAME",
            "stride_w": 2,
            "stride_h": 2,
            "depth_multiplier": 1,
            "fused_activation_function": "RELU6",
        },
    ),
    OpCase(
        "fully_connected",
        "FULLY_CONNECTED",
        F,
        [((1, 16), None)],
        ((1, 8), None),
        constants=[_w(8, 16), _w(8)],
    ),
    OpCase(
        "transpose_conv",
        "TRANSPOSE_CONV",
        F,
        [(IMG, None)],
        ((1, 16, 16, 3), None),
        constants=[_i32([1, 16, 16, 3]), _w(3, 3, 3, 4)],
        options={"padding": "SAME", "stride_w": 2, "stride_h": 2},
        version=1,
    ),
    OpCase(
        "average_pool",
        "AVERAGE_POOL_2D",
        F,
        [(IMG, None)],
        ((1, 4, 4, 4), None),
        options={
            "padding": "VALID",
            "stride_w": 2,
            "stride_h": 2,
            "filter_width": 2,
            "filter_height": 2,
        },
    ),
    OpCase(
        "max_pool_same",
        "MAX_POOL_2D",
        F,
        [(IMG, None)],
        ((1, 4, 4, 4), None),
        options={
            "padding": "SAME",
            "stride_w": 2,
            "stride_h": 2,
            "filter_width": 3,
            "filter_height": 3,
        },
    ),
    OpCase(
        "concatenation_channels",
        "CONCATENATION",
        F,
        [(IMG, None), ((1, 8, 8, 2), None)],
        ((1, 8, 8, 6), None),
        options={"axis": 3},
    ),
    OpCase("reshape", "RESHAPE", F, [(IMG, None)], ((1, 256), None), constants=[_i32([1, 256])]),
    OpCase(
        "pad_hw",
        "PAD",
        F,
        [(IMG, None)],
        ((1, 10, 12, 4), None),
        constants=[lambda rng: np.array([[0, 0], [1, 1], [2, 2], [0, 0]], np.int32)],
    ),
    OpCase(
        "mean_hw",
        "MEAN",
        F,
        [(IMG, None)],
        ((1, 1, 1, 4), None),
        constants=[_i32([1, 2])],
        options={"keep_dims": True},
    ),
    OpCase(
        "resize_bilinear",
        "RESIZE_BILINEAR",
        F,
        [(IMG, None)],
        ((1, 16, 16, 4), None),
        constants=[_i32([16, 16])],
    ),
    OpCase(
        "strided_slice",
        "STRIDED_SLICE",
        F,
        [(IMG, None)],
        ((1, 4, 4, 4), None),
        constants=[_i32([0, 0, 0, 0]), _i32([1, 8, 8, 4]), _i32([1, 2, 2, 1])],
    ),
    OpCase(
        "dequantize_fp16",
        "DEQUANTIZE",
        F,
        [],
        ((4, 4), None),
        constants=[lambda rng: rng.standard_normal((4, 4)).astype(np.float16)],
    ),
    OpCase("add_int8", "ADD", "int8", [(IMG, Q_IN), (IMG, Q_IN)], (IMG, Q_OUT), version=2),
    OpCase(
        "conv_int8_per_channel",
        "CONV_2D",
        "int8",
        [(IMG, Q_IN)],
        ((1, 8, 8, 3), Q_OUT),
        constants=[_q8w(3, 3, 3, 4), _bias32(3, 0.0005)],
        options={"padding": "SAME", "stride_w": 1, "stride_h": 1},
        version=3,
        atol=1.0,
    ),
    OpCase(
        "fully_connected_int8",
        "FULLY_CONNECTED",
        "int8",
        [((1, 16), Q_IN)],
        ((1, 4), Q_OUT),
        constants=[_q8w(4, 16), _bias32(4, 0.0005)],
        version=4,
        atol=1.0,
    ),
)


def _quantized_dtype(case: OpCase) -> Any:
    return np.int8 if case.dtype == "int8" else np.float32


def build_case(case: OpCase, seed: int = 0) -> tuple[bytes, list[np.ndarray]]:
    """The case's model bytes and seeded input arrays."""
    rng = np.random.default_rng(seed)
    b = ModelBuilder()
    dtype = _quantized_dtype(case)
    tensors: list[int] = []
    arrays: list[np.ndarray] = []
    for k, (shape, quant) in enumerate(case.inputs):
        tensors.append(b.add_input(f"in{k}", shape=shape, dtype=dtype, quantization=quant))
        if dtype is np.int8:
            arrays.append(rng.integers(-128, 128, size=shape).astype(np.int8))
        else:
            arrays.append(rng.standard_normal(shape).astype(np.float32))
    for k, make in enumerate(case.constants):
        made = make(rng)
        if isinstance(made, tuple):
            values, (scale, zero_point, axis) = made
            tensors.append(
                b.add_constant(
                    f"c{k}", values, quantization=(scale, zero_point), quantized_dimension=axis
                )
            )
        else:
            tensors.append(b.add_constant(f"c{k}", made))
    out_shape, out_quant = case.output
    out = b.add_tensor("out", shape=out_shape, dtype=dtype, quantization=out_quant)
    b.add_operator(
        case.op, inputs=tensors, outputs=[out], options=dict(case.options), version=case.version
    )
    b.add_output(out)
    return b.build(), arrays
