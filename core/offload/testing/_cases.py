"""The conformance cases: single-op models that the CPU reference passes, as data.

Each case names an op, its operands in the op's own input order (runtime tensors fed with
seeded random values, constants made from the seed, or ``None`` for an omitted optional
input), its outputs and its options; the model is built with :mod:`offload.model.builder`.
Expected values come from the CPU reference (itself checked against LiteRT in offload's own
test suite), so any delegate can be held to them without LiteRT installed.

Shapes are chosen to catch the usual slips: non-square inputs (H and W swapped), batch 2
(a kernel that assumes batch 1), SAME padding whose before and after differ (pad-before and
pad-after swapped), omitted bias, FULLY_CONNECTED keeping its leading dimensions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from offload.model.builder import ModelBuilder

__all__ = ["CASES", "KIT_GAPS", "OpCase", "Runtime", "build_case"]

Quant = tuple[float, int] | None
ConstantMaker = Callable[[np.random.Generator], "np.ndarray | tuple[np.ndarray, Any]"]


@dataclass(frozen=True)
class Runtime:
    """A runtime tensor of a case: an input fed with seeded random values, or an output.

    ``dtype`` None means the case's dtype. ``values``, for an input, makes its values from the
    seeded generator instead (every pair of int8 codes, say); they must have the shape.
    """

    shape: tuple[int, ...]
    quant: Quant = None
    dtype: str | None = None
    values: Callable[[np.random.Generator], np.ndarray] | None = None


Operand = Runtime | ConstantMaker | None


@dataclass(frozen=True)
class OpCase:
    """One single-op model: operands in the op's input order, outputs, options, tolerance.

    An operand is a :class:`Runtime` input, a constant maker (called with the seeded
    generator; it returns an array, or ``(int array, (scale, zero_point, axis))`` for a
    quantized constant) or ``None`` for an omitted optional input.
    """

    name: str
    op: str
    dtype: str
    inputs: Sequence[Operand]
    outputs: Sequence[Runtime]
    options: Mapping[str, Any] = field(default_factory=dict)
    version: int = 1
    atol: float = 1e-5
    rtol: float = 1e-4


# Ops a delegate may declare that no case can build yet; claiming one is reported, not failed.
KIT_GAPS: Mapping[str, str] = {
    "DENSIFY": (
        "DENSIFY only ever reads a sparse constant, which the core folds before planning, so "
        "no delegate is offered one"
    ),
}


def _w(*shape: int, scale: float = 0.5) -> ConstantMaker:
    return lambda rng: (rng.standard_normal(shape) * scale).astype(np.float32)


def _i32(values: Sequence[Any]) -> ConstantMaker:
    return lambda rng: np.array(values, np.int32)


def _q8w(*shape: int, axis: int = 0) -> ConstantMaker:
    def make(rng: np.random.Generator) -> tuple[np.ndarray, Any]:
        values = rng.integers(-127, 128, size=shape).astype(np.int8)
        scales = (rng.random(shape[axis]) * 0.01 + 0.005).astype(np.float32)
        return values, (scales, np.zeros(shape[axis], np.int64), axis)

    return make


def _bias32(n: int, scale: float) -> ConstantMaker:
    return lambda rng: (rng.integers(-500, 500, size=n).astype(np.int32), (scale, 0, 0))


def _r(*shape: int, quant: Quant = None, dtype: str | None = None) -> Runtime:
    return Runtime(tuple(shape), quant, dtype)


def _same(stride_h: int = 1, stride_w: int = 1, **extra: Any) -> dict[str, Any]:
    return {"padding": "SAME", "stride_h": stride_h, "stride_w": stride_w, **extra}


def _valid(stride_h: int = 1, stride_w: int = 1, **extra: Any) -> dict[str, Any]:
    return {"padding": "VALID", "stride_h": stride_h, "stride_w": stride_w, **extra}


def _window(h: int, w: int) -> dict[str, int]:
    return {"filter_height": h, "filter_width": w}


def _unary(name: str, op: str, shape: tuple[int, ...] = (2, 5, 7, 3)) -> OpCase:
    return OpCase(name, op, F, [_r(*shape)], [_r(*shape)])


F = "float32"
IMG = (1, 8, 8, 4)
B2 = (2, 5, 7, 3)  # batch 2, H != W
Q_IN: Quant = (0.05, -3)
Q_OUT: Quant = (0.1, 2)

_ELEMENTWISE: tuple[OpCase, ...] = (
    OpCase("add", "ADD", F, [_r(*IMG), _r(*IMG)], [_r(*IMG)]),
    OpCase("add_batch2", "ADD", F, [_r(*B2), _r(*B2)], [_r(*B2)]),
    OpCase(
        "add_relu6_channel_broadcast",
        "ADD",
        F,
        [_r(*B2), _r(1, 1, 1, 3)],
        [_r(*B2)],
        options={"fused_activation_function": "RELU6"},
    ),
    OpCase("sub", "SUB", F, [_r(*IMG), _r(*IMG)], [_r(*IMG)]),
    OpCase("sub_batch2", "SUB", F, [_r(*B2), _r(*B2)], [_r(*B2)]),
    OpCase("mul_channel_broadcast", "MUL", F, [_r(*IMG), _w(4)], [_r(*IMG)]),
    OpCase(
        "mul_batch2_pixel_broadcast_relu",
        "MUL",
        F,
        [_r(*B2), _r(2, 5, 7, 1)],
        [_r(*B2)],
        options={"fused_activation_function": "RELU"},
    ),
    OpCase("maximum", "MAXIMUM", F, [_r(*B2), _r(*B2)], [_r(*B2)]),
    OpCase("minimum", "MINIMUM", F, [_r(*B2), _r(*B2)], [_r(*B2)]),
    OpCase(
        "logical_and",
        "LOGICAL_AND",
        "bool",
        [_r(2, 4, 5, 3), _r(2, 4, 5, 3)],
        [_r(2, 4, 5, 3)],
    ),
    _unary("relu", "RELU"),
    _unary("relu6", "RELU6"),
    _unary("relu_n1_to_1", "RELU_N1_TO_1"),
    _unary("logistic", "LOGISTIC"),
    _unary("tanh", "TANH"),
    _unary("exp", "EXP"),
    _unary("hard_swish", "HARD_SWISH"),
    OpCase("prelu", "PRELU", F, [_r(*B2), _w(1, 1, 3)], [_r(*B2)]),
    OpCase("softmax", "SOFTMAX", F, [_r(1, 10)], [_r(1, 10)], options={"beta": 1.0}),
    OpCase("softmax_rank3", "SOFTMAX", F, [_r(2, 3, 10)], [_r(2, 3, 10)], options={"beta": 1.0}),
)

_CONV: tuple[OpCase, ...] = (
    OpCase(
        "conv_same_relu",
        "CONV_2D",
        F,
        [_r(*IMG), _w(6, 3, 3, 4), _w(6)],
        [_r(1, 8, 8, 6)],
        options=_same(fused_activation_function="RELU"),
    ),
    OpCase(
        "conv_valid_stride2",
        "CONV_2D",
        F,
        [_r(*IMG), _w(5, 3, 3, 4), _w(5)],
        [_r(1, 3, 3, 5)],
        options=_valid(2, 2),
    ),
    # SAME, 3x3, stride 2 on 8: 1 row and column of padding, all of it after.
    OpCase(
        "conv_same_stride2_asymmetric",
        "CONV_2D",
        F,
        [_r(*IMG), _w(5, 3, 3, 4), _w(5)],
        [_r(1, 4, 4, 5)],
        options=_same(2, 2),
    ),
    # SAME with an even 2x4 kernel: pads H by (0, 1) and W by (1, 2); batch 2, H != W.
    OpCase(
        "conv_same_even_kernel_batch2",
        "CONV_2D",
        F,
        [_r(2, 7, 9, 3), _w(4, 2, 4, 3), _w(4)],
        [_r(2, 7, 9, 4)],
        options=_same(),
    ),
    OpCase(
        "conv_same_strides_h2_w3_batch2",
        "CONV_2D",
        F,
        [_r(2, 6, 9, 3), _w(4, 3, 2, 3), _w(4)],
        [_r(2, 3, 3, 4)],
        options=_same(2, 3, fused_activation_function="RELU6"),
    ),
    OpCase(
        "conv_dilated",
        "CONV_2D",
        F,
        [_r(*IMG), _w(2, 3, 3, 4), _w(2)],
        [_r(1, 8, 8, 2)],
        options=_same(dilation_w_factor=2, dilation_h_factor=2),
    ),
    OpCase(
        "conv_no_bias",
        "CONV_2D",
        F,
        [_r(1, 6, 5, 3), _w(4, 3, 3, 3), None],
        [_r(1, 6, 5, 4)],
        options=_same(),
    ),
    OpCase(
        "depthwise_same",
        "DEPTHWISE_CONV_2D",
        F,
        [_r(*IMG), _w(1, 3, 3, 4), _w(4)],
        [_r(*IMG)],
        options=_same(depth_multiplier=1),
    ),
    OpCase(
        "depthwise_stride2_relu6",
        "DEPTHWISE_CONV_2D",
        F,
        [_r(*IMG), _w(1, 3, 3, 4), _w(4)],
        [_r(1, 4, 4, 4)],
        options=_same(2, 2, depth_multiplier=1, fused_activation_function="RELU6"),
    ),
    # An even 2x2 kernel: pad (0, 1) on both axes.
    OpCase(
        "depthwise_same_even_kernel_batch2",
        "DEPTHWISE_CONV_2D",
        F,
        [_r(*B2), _w(1, 2, 2, 3), _w(3)],
        [_r(*B2)],
        options=_same(depth_multiplier=1),
    ),
    OpCase(
        "depthwise_multiplier2_batch2",
        "DEPTHWISE_CONV_2D",
        F,
        [_r(2, 6, 7, 3), _w(1, 3, 3, 6), _w(6)],
        [_r(2, 3, 4, 6)],
        options=_same(2, 2, depth_multiplier=2),
        version=2,
    ),
    OpCase(
        "transpose_conv",
        "TRANSPOSE_CONV",
        F,
        [_i32([1, 16, 16, 3]), _w(3, 3, 3, 4), _r(*IMG)],
        [_r(1, 16, 16, 3)],
        options=_same(2, 2),
    ),
    OpCase(
        "transpose_conv_valid_batch2",
        "TRANSPOSE_CONV",
        F,
        [_i32([2, 7, 9, 3]), _w(3, 3, 3, 2), _r(2, 3, 4, 2)],
        [_r(2, 7, 9, 3)],
        options=_valid(2, 2),
    ),
)

_FULLY_CONNECTED: tuple[OpCase, ...] = (
    OpCase("fully_connected", "FULLY_CONNECTED", F, [_r(1, 16), _w(8, 16), _w(8)], [_r(1, 8)]),
    OpCase(
        "fully_connected_batch3_relu",
        "FULLY_CONNECTED",
        F,
        [_r(3, 16), _w(8, 16), _w(8)],
        [_r(3, 8)],
        options={"fused_activation_function": "RELU"},
    ),
    OpCase(
        "fully_connected_no_bias",
        "FULLY_CONNECTED",
        F,
        [_r(1, 16), _w(8, 16), None],
        [_r(1, 8)],
    ),
    OpCase(
        "fully_connected_keep_num_dims",
        "FULLY_CONNECTED",
        F,
        [_r(2, 3, 16), _w(8, 16), _w(8)],
        [_r(2, 3, 8)],
        options={"keep_num_dims": True},
    ),
    # A 4-D input flattened to rows of 16 (keep_num_dims False).
    OpCase(
        "fully_connected_flattens_4d",
        "FULLY_CONNECTED",
        F,
        [_r(1, 2, 2, 4), _w(8, 16), _w(8)],
        [_r(1, 8)],
    ),
)

_POOL: tuple[OpCase, ...] = (
    OpCase(
        "average_pool",
        "AVERAGE_POOL_2D",
        F,
        [_r(*IMG)],
        [_r(1, 4, 4, 4)],
        options=_valid(2, 2, **_window(2, 2)),
    ),
    # SAME, window 2x4: pads H by (0, 1) and W by (1, 2); padded cells are not averaged.
    OpCase(
        "average_pool_same_asymmetric_batch2",
        "AVERAGE_POOL_2D",
        F,
        [_r(2, 6, 7, 3)],
        [_r(2, 6, 7, 3)],
        options=_same(**_window(2, 4)),
    ),
    OpCase(
        "max_pool_same",
        "MAX_POOL_2D",
        F,
        [_r(*IMG)],
        [_r(1, 4, 4, 4)],
        options=_same(2, 2, **_window(3, 3)),
    ),
    OpCase(
        "max_pool_valid_batch2",
        "MAX_POOL_2D",
        F,
        [_r(2, 7, 9, 3)],
        [_r(2, 3, 4, 3)],
        options=_valid(2, 2, **_window(3, 2)),
    ),
    OpCase(
        "max_pool_same_asymmetric_batch2",
        "MAX_POOL_2D",
        F,
        [_r(2, 6, 7, 3)],
        [_r(2, 3, 4, 3)],
        options=_same(2, 2, **_window(2, 3)),
    ),
)

_SHAPE: tuple[OpCase, ...] = (
    OpCase(
        "concatenation_channels",
        "CONCATENATION",
        F,
        [_r(*IMG), _r(1, 8, 8, 2)],
        [_r(1, 8, 8, 6)],
        options={"axis": 3},
    ),
    OpCase(
        "concatenation_axis1_batch2",
        "CONCATENATION",
        F,
        [_r(2, 3, 4, 2), _r(2, 5, 4, 2)],
        [_r(2, 8, 4, 2)],
        options={"axis": 1},
    ),
    OpCase(
        "concatenation_negative_axis",
        "CONCATENATION",
        F,
        [_r(2, 3, 4), _r(2, 3, 1)],
        [_r(2, 3, 5)],
        options={"axis": -1},
    ),
    OpCase("reshape", "RESHAPE", F, [_r(*IMG), _i32([1, 256])], [_r(1, 256)]),
    OpCase("reshape_batch2", "RESHAPE", F, [_r(*B2), _i32([2, 35, 3])], [_r(2, 35, 3)]),
    OpCase(
        "pad_hw",
        "PAD",
        F,
        [_r(*IMG), _i32([[0, 0], [1, 1], [2, 2], [0, 0]])],
        [_r(1, 10, 12, 4)],
    ),
    OpCase(
        "pad_asymmetric_batch2",
        "PAD",
        F,
        [_r(2, 4, 5, 3), _i32([[0, 0], [0, 2], [1, 0], [0, 0]])],
        [_r(2, 6, 6, 3)],
    ),
    OpCase(
        "padv2_value",
        "PADV2",
        F,
        [
            _r(1, 4, 5, 3),
            _i32([[0, 0], [1, 0], [2, 1], [0, 0]]),
            lambda rng: np.array(0.75, np.float32),
        ],
        [_r(1, 5, 8, 3)],
    ),
    OpCase(
        "mirror_pad_reflect",
        "MIRROR_PAD",
        F,
        [_r(1, 5, 6, 3), _i32([[0, 0], [1, 2], [2, 1], [0, 0]])],
        [_r(1, 8, 9, 3)],
        options={"mode": "REFLECT"},
    ),
    OpCase(
        "mirror_pad_symmetric_batch2",
        "MIRROR_PAD",
        F,
        [_r(2, 4, 5, 3), _i32([[0, 0], [2, 0], [0, 1], [0, 0]])],
        [_r(2, 6, 6, 3)],
        options={"mode": "SYMMETRIC"},
    ),
    OpCase(
        "mean_hw",
        "MEAN",
        F,
        [_r(*IMG), _i32([1, 2])],
        [_r(1, 1, 1, 4)],
        options={"keep_dims": True},
    ),
    OpCase(
        "mean_hw_batch2_drop_dims",
        "MEAN",
        F,
        [_r(*B2), _i32([1, 2])],
        [_r(2, 3)],
        options={"keep_dims": False},
    ),
    OpCase(
        "resize_bilinear",
        "RESIZE_BILINEAR",
        F,
        [_r(*IMG), _i32([16, 16])],
        [_r(1, 16, 16, 4)],
    ),
    OpCase(
        "resize_bilinear_half_pixel",
        "RESIZE_BILINEAR",
        F,
        [_r(1, 5, 7, 3), _i32([8, 10])],
        [_r(1, 8, 10, 3)],
        options={"half_pixel_centers": True},
        version=3,
    ),
    OpCase(
        "resize_bilinear_align_corners_batch2",
        "RESIZE_BILINEAR",
        F,
        [_r(2, 4, 5, 2), _i32([7, 9])],
        [_r(2, 7, 9, 2)],
        options={"align_corners": True},
    ),
    OpCase(
        "depth_to_space_batch2",
        "DEPTH_TO_SPACE",
        F,
        [_r(2, 3, 4, 12)],
        [_r(2, 6, 8, 3)],
        options={"block_size": 2},
    ),
    OpCase(
        "strided_slice",
        "STRIDED_SLICE",
        F,
        [_r(*IMG), _i32([0, 0, 0, 0]), _i32([1, 8, 8, 4]), _i32([1, 2, 2, 1])],
        [_r(1, 4, 4, 4)],
    ),
    OpCase(
        "strided_slice_masks_batch2",
        "STRIDED_SLICE",
        F,
        [_r(2, 6, 8, 3), _i32([0, 1, 0, 0]), _i32([0, 5, 8, 2]), _i32([1, 2, 3, 1])],
        [_r(2, 2, 3, 2)],
        options={"begin_mask": 1, "end_mask": 1},
    ),
)

_QUANTIZED: tuple[OpCase, ...] = (
    # A runtime float16 input: DEQUANTIZE of a float16 constant is folded by the core before
    # any delegate is asked, so only this form can reach one.
    OpCase(
        "dequantize_fp16",
        "DEQUANTIZE",
        "float16",
        [_r(2, 4, 5, 3)],
        [_r(2, 4, 5, 3, dtype=F)],
        version=3,
    ),
    OpCase(
        "dequantize_int8",
        "DEQUANTIZE",
        "int8",
        [_r(2, 4, 5, 3, quant=Q_IN)],
        [_r(2, 4, 5, 3, dtype=F)],
        version=2,
    ),
    OpCase(
        "quantize_int8",
        "QUANTIZE",
        "int8",
        [_r(2, 4, 5, 3, dtype=F)],
        [_r(2, 4, 5, 3, quant=Q_OUT)],
        version=2,
        atol=1.0,
    ),
    OpCase(
        "add_int8",
        "ADD",
        "int8",
        [_r(*IMG, quant=Q_IN), _r(*IMG, quant=Q_IN)],
        [_r(*IMG, quant=Q_OUT)],
        version=2,
        atol=1.0,
    ),
    OpCase(
        "conv_int8_per_channel",
        "CONV_2D",
        "int8",
        [_r(*IMG, quant=Q_IN), _q8w(3, 3, 3, 4), _bias32(3, 0.0005)],
        [_r(1, 8, 8, 3, quant=Q_OUT)],
        options=_same(),
        version=3,
        atol=1.0,
    ),
    OpCase(
        "fully_connected_int8",
        "FULLY_CONNECTED",
        "int8",
        [_r(1, 16, quant=Q_IN), _q8w(4, 16), _bias32(4, 0.0005)],
        [_r(1, 4, quant=Q_OUT)],
        version=4,
        atol=1.0,
    ),
    # Dynamic-range (hybrid) ops: float activations, int8 weights. The reference quantizes the
    # input per row as LiteRT does, so a delegate computing in float differs by rounding only;
    # one that reads the int8 codes as floats is off by the weight scale (about 100x).
    OpCase(
        "fully_connected_hybrid",
        "FULLY_CONNECTED",
        F,
        [_r(2, 16), _q8w(4, 16), _w(4)],
        [_r(2, 4)],
        version=12,
        atol=0.1,
        rtol=0.05,
    ),
    OpCase(
        "conv_2d_hybrid",
        "CONV_2D",
        F,
        [_r(*IMG), _q8w(3, 3, 3, 4), _w(3)],
        [_r(1, 8, 8, 3)],
        options=_same(),
        version=5,
        atol=0.1,
        rtol=0.05,
    ),
    OpCase(
        "average_pool_int8_batch2",
        "AVERAGE_POOL_2D",
        "int8",
        [_r(2, 6, 7, 3, quant=Q_IN)],
        [_r(2, 3, 4, 3, quant=Q_IN)],
        options=_same(2, 2, **_window(3, 3)),
        version=2,
        atol=1.0,
    ),
)

# Scales that make rounding ties common: every real multiplier of these cases is a power of
# two (or three times one), so the fixed-point products land exactly on halves. A delegate
# that rounds halves another way than LiteRT's kernel for the op fails them under --exact.
# The multipliers are 1/8, 1/16, 3/32 and 1/32 per channel: the rounding right shifts are
# short, so many negative outputs sit on a tie, and small weights keep them in range.
Q_TIE_IN: Quant = (2.0**-4, 3)
Q_TIE_OUT: Quant = (2.0**-6, -2)
_TIE_FILTER_SCALES = (2.0**-5, 2.0**-6, 3 * 2.0**-7, 2.0**-7)


def _q8w_ties(*shape: int, axis: int = 0, magnitude: int = 1) -> ConstantMaker:
    """int8 weights in [-magnitude, magnitude] with power-of-two scales per channel."""

    def make(rng: np.random.Generator) -> tuple[np.ndarray, Any]:
        values = rng.integers(-magnitude, magnitude + 1, size=shape).astype(np.int8)
        cycle = np.resize(np.array(_TIE_FILTER_SCALES, np.float32), shape[axis])
        return values, (cycle, np.zeros(shape[axis], np.int64), axis)

    return make


def _bias_ties(n: int) -> ConstantMaker:
    """An int32 bias per channel, scaled input scale times filter scale as LiteRT expects."""
    assert Q_TIE_IN is not None
    scales = Q_TIE_IN[0] * np.resize(np.array(_TIE_FILTER_SCALES, np.float32), n)

    def make(rng: np.random.Generator) -> tuple[np.ndarray, Any]:
        values = rng.integers(-40, 41, size=n).astype(np.int32)
        return values, (scales.astype(np.float32), np.zeros(n, np.int64), 0)

    return make


def _q8(*values: float, scale: float = 0.02, zero_point: int = 0) -> ConstantMaker:
    """A per-tensor quantized int8 constant drawn from the seed (PRELU's alpha)."""

    def make(rng: np.random.Generator) -> tuple[np.ndarray, Any]:
        codes = rng.integers(-127, 128, size=tuple(int(v) for v in values)).astype(np.int8)
        return codes, (scale, zero_point, 0)

    return make


I8 = "int8"
_CODES = np.arange(-128, 128, dtype=np.int8)
# Scales on which LiteRT's x86 lanes and its reference differ on a dozen pairs each.
_ADD_Q1: Quant = (0.02838, -12)
_ADD_Q2: Quant = (0.02859, -7)
_ADD_QO: Quant = (0.01892, -18)
Q_SOFTMAX_OUT: Quant = (1.0 / 256, -128)  # LiteRT's required int8 LOGISTIC / SOFTMAX output

# int8 versions of every op that our delegates or LiteRT's GPU and Core ML delegates take in
# a quantized form; the convolutions and ADD with scales that make rounding ties common.
_INT8: tuple[OpCase, ...] = (
    OpCase(
        "conv_int8_rounding_ties",
        "CONV_2D",
        I8,
        [_r(2, 6, 5, 4, quant=Q_TIE_IN), _q8w_ties(5, 3, 3, 4), _bias_ties(5)],
        [_r(2, 3, 3, 5, quant=Q_TIE_OUT)],
        options=_same(2, 2),
        version=3,
        atol=1.0,
    ),
    OpCase(
        "fully_connected_int8_rounding_ties",
        "FULLY_CONNECTED",
        I8,
        [_r(4, 32, quant=Q_TIE_IN), _q8w_ties(8, 32), _bias_ties(8)],
        [_r(4, 8, quant=Q_TIE_OUT)],
        version=4,
        atol=1.0,
    ),
    # 27 channels: LiteRT requantizes 16, then 8 in vector lanes, the last 3 one by one.
    OpCase(
        "depthwise_int8_rounding_ties",
        "DEPTHWISE_CONV_2D",
        I8,
        [_r(1, 5, 6, 27, quant=Q_TIE_IN), _q8w_ties(1, 3, 3, 27, axis=3), _bias_ties(27)],
        [_r(1, 5, 6, 27, quant=Q_TIE_OUT)],
        options=_same(depth_multiplier=1),
        version=3,
        atol=1.0,
    ),
    OpCase(
        "depthwise_int8_multiplier2_batch2",
        "DEPTHWISE_CONV_2D",
        I8,
        [_r(2, 6, 7, 5, quant=Q_IN), _q8w(1, 3, 3, 10, axis=3), _bias32(10, 0.0005)],
        [_r(2, 3, 4, 10, quant=Q_OUT)],
        options=_same(2, 2, depth_multiplier=2, fused_activation_function="RELU6"),
        version=3,
        atol=1.0,
    ),
    # Two input scales a power of two apart and an output scale that halves their sum; the
    # second input broadcast over channels (LiteRT's scalar-broadcast lanes, then leftovers).
    OpCase(
        "add_int8_rounding_ties_broadcast",
        "ADD",
        I8,
        [_r(2, 3, 4, 19, quant=(0.0625, 1)), _r(2, 3, 4, 1, quant=(0.03125, -5))],
        [_r(2, 3, 4, 19, quant=(0.125, 0))],
        version=2,
        atol=1.0,
    ),
    # Every pair of int8 codes, on scales where LiteRT's x86 lanes and its reference differ
    # on a few pairs: once element by element, once against a broadcast column.
    OpCase(
        "add_int8_every_pair",
        "ADD",
        I8,
        [
            Runtime((1, 256, 256), _ADD_Q1, values=lambda rng: _CODES.repeat(256)),
            Runtime((1, 256, 256), _ADD_Q2, values=lambda rng: np.tile(_CODES, 256)),
        ],
        [_r(1, 256, 256, quant=_ADD_QO)],
        version=2,
        atol=1.0,
    ),
    OpCase(
        "add_int8_every_pair_scalar_broadcast",
        "ADD",
        I8,
        [
            Runtime((256, 256), _ADD_Q1, values=lambda rng: np.tile(_CODES, 256)),
            Runtime((256, 1), _ADD_Q2, values=lambda rng: _CODES),
        ],
        [_r(256, 256, quant=_ADD_QO)],
        version=2,
        atol=1.0,
    ),
    OpCase(
        "add_int8_relu_odd_scales",
        "ADD",
        I8,
        [_r(2, 5, 7, 3, quant=(0.0371, -7)), _r(2, 5, 7, 3, quant=(0.0913, 4))],
        [_r(2, 5, 7, 3, quant=(0.0517, -20))],
        options={"fused_activation_function": "RELU"},
        version=2,
        atol=1.0,
    ),
    OpCase(
        "sub_int8",
        "SUB",
        I8,
        [_r(2, 5, 7, 3, quant=Q_IN), _r(2, 5, 7, 3, quant=(0.07, 5))],
        [_r(2, 5, 7, 3, quant=Q_OUT)],
        version=2,
        atol=1.0,
    ),
    OpCase(
        "mul_int8_channel_broadcast",
        "MUL",
        I8,
        [_r(2, 5, 7, 3, quant=Q_IN), _r(1, 1, 1, 3, quant=(0.07, 5))],
        [_r(2, 5, 7, 3, quant=Q_OUT)],
        version=2,
        atol=1.0,
    ),
    OpCase(
        "max_pool_int8_same_batch2",
        "MAX_POOL_2D",
        I8,
        [_r(2, 6, 7, 3, quant=Q_IN)],
        [_r(2, 3, 4, 3, quant=Q_IN)],
        options=_same(2, 2, **_window(2, 3), fused_activation_function="RELU"),
        version=2,
        atol=1.0,
    ),
    OpCase(
        "maximum_int8",
        "MAXIMUM",
        I8,
        [_r(2, 5, 7, 3, quant=Q_IN), _r(2, 5, 7, 3, quant=Q_IN)],
        [_r(2, 5, 7, 3, quant=Q_IN)],
        version=2,
        atol=1.0,
    ),
    OpCase(
        "minimum_int8",
        "MINIMUM",
        I8,
        [_r(2, 5, 7, 3, quant=Q_IN), _r(2, 5, 7, 3, quant=Q_IN)],
        [_r(2, 5, 7, 3, quant=Q_IN)],
        version=2,
        atol=1.0,
    ),
    OpCase(
        "concatenation_int8_channels",
        "CONCATENATION",
        I8,
        [_r(1, 4, 5, 3, quant=Q_IN), _r(1, 4, 5, 2, quant=Q_IN)],
        [_r(1, 4, 5, 5, quant=Q_IN)],
        options={"axis": 3},
        version=2,
        atol=1.0,
    ),
    OpCase(
        "reshape_int8",
        "RESHAPE",
        I8,
        [_r(2, 5, 7, 3, quant=Q_IN), _i32([2, 105])],
        [_r(2, 105, quant=Q_IN)],
        atol=1.0,
    ),
    OpCase(
        "pad_int8",
        "PAD",
        I8,
        [_r(2, 4, 5, 3, quant=Q_IN), _i32([[0, 0], [0, 2], [1, 0], [0, 0]])],
        [_r(2, 6, 6, 3, quant=Q_IN)],
        version=2,
        atol=1.0,
    ),
    OpCase(
        "depth_to_space_int8",
        "DEPTH_TO_SPACE",
        I8,
        [_r(1, 3, 3, 16, quant=Q_IN)],
        [_r(1, 6, 6, 4, quant=Q_IN)],
        options={"block_size": 2},
        atol=1.0,
    ),
    OpCase(
        "strided_slice_int8",
        "STRIDED_SLICE",
        I8,
        [_r(2, 6, 8, 3, quant=Q_IN), _i32([0, 1, 0, 0]), _i32([2, 5, 8, 2]), _i32([1, 2, 3, 1])],
        [_r(2, 2, 3, 2, quant=Q_IN)],
        version=2,
        atol=1.0,
    ),
    OpCase(
        "mean_int8_hw",
        "MEAN",
        I8,
        [_r(2, 5, 7, 3, quant=Q_IN), _i32([1, 2])],
        [_r(2, 1, 1, 3, quant=Q_OUT)],
        options={"keep_dims": True},
        version=2,
        atol=1.0,
    ),
    OpCase(
        "resize_bilinear_int8",
        "RESIZE_BILINEAR",
        I8,
        [_r(1, 4, 5, 3, quant=Q_IN), _i32([7, 9])],
        [_r(1, 7, 9, 3, quant=Q_IN)],
        version=2,
        atol=1.0,
    ),
    OpCase(
        "relu_int8",
        "RELU",
        I8,
        [_r(2, 5, 7, 3, quant=Q_IN)],
        [_r(2, 5, 7, 3, quant=Q_OUT)],
        version=2,
        atol=1.0,
    ),
    OpCase(
        "relu6_int8",
        "RELU6",
        I8,
        [_r(2, 5, 7, 3, quant=Q_IN)],
        [_r(2, 5, 7, 3, quant=(0.03, -100))],
        version=2,
        atol=1.0,
    ),
    OpCase(
        "logistic_int8",
        "LOGISTIC",
        I8,
        [_r(2, 5, 7, 3, quant=Q_OUT)],
        [_r(2, 5, 7, 3, quant=Q_SOFTMAX_OUT)],
        version=2,
        atol=1.0,
    ),
    OpCase(
        "softmax_int8",
        "SOFTMAX",
        I8,
        [_r(2, 10, quant=Q_OUT)],
        [_r(2, 10, quant=Q_SOFTMAX_OUT)],
        options={"beta": 1.0},
        version=2,
        atol=1.0,
    ),
    OpCase(
        "hard_swish_int8",
        "HARD_SWISH",
        I8,
        [_r(2, 5, 7, 3, quant=Q_OUT)],
        [_r(2, 5, 7, 3, quant=(0.05, -60))],
        atol=1.0,
    ),
    OpCase(
        "exp_int8",
        "EXP",
        I8,
        [_r(2, 5, 7, 3, quant=Q_IN)],
        [_r(2, 5, 7, 3, quant=(0.1, -128))],
        version=2,
        atol=1.0,
    ),
    OpCase(
        "prelu_int8",
        "PRELU",
        I8,
        [_r(2, 5, 7, 3, quant=Q_IN), _q8(1, 1, 3)],
        [_r(2, 5, 7, 3, quant=Q_OUT)],
        atol=1.0,
    ),
    OpCase(
        "transpose_conv_int8",
        "TRANSPOSE_CONV",
        I8,
        [_i32([1, 9, 11, 3]), _q8w(3, 3, 3, 4), _r(1, 5, 6, 4, quant=Q_IN)],
        [_r(1, 9, 11, 3, quant=Q_OUT)],
        options=_same(2, 2),
        version=2,
        atol=1.0,
    ),
)

# LiteRT's BASIC LSTM cell (op version 2): input, previous activation, weights, bias,
# previous state; outputs activation, state and the two temporaries, batch 2.
_LSTM = OpCase(
    "lstm_basic_batch2",
    "LSTM",
    F,
    [_r(2, 5), _r(2, 7), _w(28, 12), _w(28, scale=0.3), _r(2, 7)],
    [_r(2, 7), _r(2, 7), _r(2, 12), _r(2, 28)],
    options={
        "fused_activation_function": "TANH",
        "cell_clip": 0.0,
        "proj_clip": 0.0,
        "kernel_type": "BASIC",
    },
    version=2,
)

CASES: tuple[OpCase, ...] = (
    *_ELEMENTWISE,
    *_CONV,
    *_FULLY_CONNECTED,
    *_POOL,
    *_SHAPE,
    *_QUANTIZED,
    *_INT8,
    _LSTM,
)

_NUMPY = {
    "float32": np.float32,
    "float16": np.float16,
    "int8": np.int8,
    "uint8": np.uint8,
    "bool": np.bool_,
    "int32": np.int32,
    "int64": np.int64,
    "complex64": np.complex64,
}


def _random(rng: np.random.Generator, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    if dtype is np.bool_:
        return rng.random(shape) < 0.5
    if dtype in (np.int8, np.uint8):
        info = np.iinfo(dtype)
        return rng.integers(info.min, int(info.max) + 1, size=shape).astype(dtype)
    if dtype in (np.int32, np.int64):
        # Small values: wide ones would overflow the products and sums most ops compute.
        return rng.integers(-100, 101, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def build_case(case: OpCase, seed: int = 0) -> tuple[bytes, list[np.ndarray]]:
    """The case's model bytes and seeded input arrays (one per runtime input, in order)."""
    rng = np.random.default_rng(seed)
    b = ModelBuilder()
    tensors: list[int] = []
    arrays: list[np.ndarray] = []
    for k, operand in enumerate(case.inputs):
        if operand is None:
            tensors.append(-1)
        elif isinstance(operand, Runtime):
            dtype = _NUMPY[operand.dtype or case.dtype]
            tensors.append(
                b.add_input(f"in{k}", shape=operand.shape, dtype=dtype, quantization=operand.quant)
            )
            if operand.values is None:
                arrays.append(_random(rng, operand.shape, dtype))
            else:
                arrays.append(np.asarray(operand.values(rng), dtype).reshape(operand.shape))
        else:
            made = operand(rng)
            if isinstance(made, tuple):
                values, (scale, zero_point, axis) = made
                tensors.append(
                    b.add_constant(
                        f"c{k}", values, quantization=(scale, zero_point), quantized_dimension=axis
                    )
                )
            else:
                tensors.append(b.add_constant(f"c{k}", made))
    outputs = [
        b.add_tensor(
            f"out{k}", shape=o.shape, dtype=_NUMPY[o.dtype or case.dtype], quantization=o.quant
        )
        for k, o in enumerate(case.outputs)
    ]
    b.add_operator(
        case.op, inputs=tensors, outputs=outputs, options=dict(case.options), version=case.version
    )
    for out in outputs:
        b.add_output(out)
    return b.build(), arrays
