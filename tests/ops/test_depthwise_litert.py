"""DEPTHWISE_CONV_2D bit for bit against LiteRT's builtin kernels, at the shapes and with the
quantization of the layers of MobileNetV2/V3 where offload used to disagree (issue 13)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ai_edge_litert.interpreter")

from _one_op import Operand, describe_mismatch, run_both  # noqa: E402

from offload.geometry import window_geometry  # noqa: E402

pytestmark = pytest.mark.litert


def _options(padding: str, stride: int, multiplier: int = 1, act: str = "NONE") -> dict:
    return {
        "padding": padding,
        "stride_w": stride,
        "stride_h": stride,
        "depth_multiplier": multiplier,
        "fused_activation_function": act,
        "dilation_w_factor": 1,
        "dilation_h_factor": 1,
    }


def _out_shape(x_shape, k: int, stride: int, padding: str, channels: int) -> tuple[int, ...]:
    g = window_geometry(padding, x_shape[1:3], (k, k), (stride, stride), (1, 1))
    return (x_shape[0], g.out_h, g.out_w, channels)


def _assert_same(got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape)
    assert np.array_equal(got.view(np.uint8), want.view(np.uint8)), describe_mismatch(got, want)


@pytest.mark.parametrize(
    "x_shape, k, stride, act",
    [
        ((1, 112, 112, 32), 3, 1, "RELU6"),  # MobileNetV2's first depthwise layer
        ((1, 28, 28, 96), 5, 2, "NONE"),  # MobileNetV3-Small, 5x5 stride 2
        ((2, 9, 9, 7), 3, 1, "NONE"),  # a batch, channels left over by every vector width
    ],
)
def test_float_starts_from_the_bias(x_shape, k, stride, act) -> None:
    """Float: LiteRT's accumulator starts at the bias, then adds each tap's product (a float32
    multiply, then a float32 add, taps row by row); adding the bias last rounds differently."""
    rng = np.random.default_rng(11)
    c = x_shape[3]
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal((1, k, k, c)).astype(np.float32)
    b = rng.standard_normal(c).astype(np.float32)
    got, want = run_both(
        "DEPTHWISE_CONV_2D",
        [Operand(x), Operand(w, True), Operand(b, True)],
        _out_shape(x_shape, k, stride, "SAME", c),
        np.float32,
        _options("SAME", stride, act=act),
    )
    _assert_same(got, want)


def test_float_depth_multiplier_and_runtime_weights() -> None:
    """Float with a depth multiplier of 2 and weights and bias fed at run time."""
    rng = np.random.default_rng(12)
    x = rng.standard_normal((1, 10, 10, 3)).astype(np.float32)
    w = rng.standard_normal((1, 3, 3, 6)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    got, want = run_both(
        "DEPTHWISE_CONV_2D",
        [Operand(x), Operand(w), Operand(b)],
        _out_shape(x.shape, 3, 2, "VALID", 6),
        np.float32,
        _options("VALID", 2, multiplier=2),
    )
    _assert_same(got, want)


@pytest.mark.parametrize(
    "x_shape, stride",
    [
        ((1, 56, 56, 144), 2),  # MobileNetV2 dynamic range, node 11
        ((1, 7, 7, 960), 1),  # node 51
        ((2, 14, 14, 22), 1),  # a batch (a scale each); channels left over by 4-wide lanes
    ],
)
def test_hybrid_quantizes_and_scales_like_litert(x_shape, stride) -> None:
    """Hybrid (float input, int8 per-channel weights): the input quantized per batch the way
    LiteRT's NEON code does on x86 (float32 +-0.5 then truncation), exact integer sums, then
    ``acc * filter_scale * input_scale + bias`` in that order in 4-channel lanes."""
    rng = np.random.default_rng(13)
    c = x_shape[3]
    # ReLU6 outputs, as these layers receive: exact zeros and sixes, no negative values.
    x = np.clip(rng.standard_normal(x_shape) * 3, 0, 6).astype(np.float32)
    w = rng.integers(-127, 128, (1, 3, 3, c)).astype(np.int8)
    scales = (rng.random(c) * 3e-4 + 2e-4).astype(np.float32)
    b = (rng.standard_normal(c) * 0.1).astype(np.float32)
    got, want = run_both(
        "DEPTHWISE_CONV_2D",
        [Operand(x), Operand(w, True, q=(scales, 0), qdim=3), Operand(b, True)],
        _out_shape(x_shape, 3, stride, "SAME", c),
        np.float32,
        _options("SAME", stride, act="RELU6"),
        version=6,
    )
    _assert_same(got, want)


def _int8_case(rng, x_shape, k, stride, out_scale, channel_scales):
    c = x_shape[3]
    x = rng.integers(-128, 128, x_shape).astype(np.int8)
    w = rng.integers(-127, 128, (1, k, k, c)).astype(np.int8)
    in_scale = np.float32(2.0**-8)
    bias = rng.integers(-3000, 3000, c).astype(np.int32)
    operands = [
        Operand(x, q=(in_scale, -34)),
        Operand(w, True, q=(channel_scales, 0), qdim=3),
        Operand(bias, True, q=(channel_scales * in_scale, 0)),
    ]
    return operands, _out_shape(x_shape, k, stride, "SAME", c)


@pytest.mark.parametrize(
    "x_shape, k, stride",
    [
        ((1, 28, 28, 96), 5, 2),  # MobileNetV3-Small int8, node 18
        ((1, 14, 14, 22), 3, 1),  # 16 channels in NEON lanes, 6 in the scalar loop
    ],
)
def test_int8_rounds_halves_like_neon_lanes(x_shape, k, stride) -> None:
    """int8 per channel: LiteRT requantizes 8 channels at a time in NEON lanes whose rounding
    shift sends halves up, the leftover channels with the reference (halves away from zero).
    Power-of-two scales make the multiplier exactly 2**30, so halves are frequent."""
    rng = np.random.default_rng(14)
    c = x_shape[3]
    channel_scales = (2.0 ** -rng.integers(1, 5, c)).astype(np.float32)
    operands, out_shape = _int8_case(rng, x_shape, k, stride, 2.0**-4, channel_scales)
    got, want = run_both(
        "DEPTHWISE_CONV_2D",
        operands,
        out_shape,
        np.int8,
        _options("SAME", stride),
        version=3,
        out_q=(2.0**-4, 3),
    )
    _assert_same(got, want)


def test_int8_at_real_scales() -> None:
    """int8 with MobileNetV3-Small's node 18 scales (not powers of two) and a fused RELU6."""
    rng = np.random.default_rng(15)
    channel_scales = (rng.random(96) * 2e-4 + 2.5e-4).astype(np.float32)
    operands, out_shape = _int8_case(rng, (1, 28, 28, 96), 5, 2, 0.00269735, channel_scales)
    got, want = run_both(
        "DEPTHWISE_CONV_2D",
        operands,
        out_shape,
        np.int8,
        _options("SAME", 2, act="RELU6"),
        version=3,
        out_q=(0.00269735, -128),
    )
    _assert_same(got, want)


def test_uint8_per_tensor() -> None:
    """uint8 (per-tensor, filter zero point): LiteRT's lanes round like the reference here."""
    rng = np.random.default_rng(16)
    x = rng.integers(0, 256, (1, 14, 14, 24)).astype(np.uint8)
    w = rng.integers(0, 256, (1, 3, 3, 24)).astype(np.uint8)
    bias = rng.integers(-500, 500, 24).astype(np.int32)
    got, want = run_both(
        "DEPTHWISE_CONV_2D",
        [
            Operand(x, q=(2.0**-6, 120)),
            Operand(w, True, q=(2.0**-5, 130)),
            Operand(bias, True, q=(2.0**-11, 0)),
        ],
        (1, 14, 14, 24),
        np.uint8,
        _options("SAME", 1),
        out_q=(2.0**-2, 128),
    )
    _assert_same(got, want)


@pytest.mark.parametrize(
    "stride, dilation, multiplier, padding",
    [
        (2, 1, 2, "VALID"),  # a multiplier: each input channel read twice
        (1, 2, 1, "SAME"),  # dilated taps: one phase, rows and columns two apart
        (2, 3, 1, "SAME"),  # odd dilation over two phases: taps alternate between them
    ],
)
@pytest.mark.parametrize("runtime", [False, True])
def test_int8_tap_groups(stride, dilation, multiplier, padding, runtime) -> None:
    """int8 sums each stride phase's taps in one einsum over a strided view and requantizes in
    float64 (int64 when weights and bias arrive at run time): the same integers as LiteRT for
    strides, dilations and depth multipliers that change which taps share a phase."""
    rng = np.random.default_rng(17)
    x = rng.integers(-128, 128, (1, 23, 19, 12)).astype(np.int8)
    c = 12 * multiplier
    w = rng.integers(-127, 128, (1, 3, 3, c)).astype(np.int8)
    scales = (rng.random(c) * 2e-3 + 5e-4).astype(np.float32)
    in_scale = np.float32(0.02)
    bias = rng.integers(-3000, 3000, c).astype(np.int32)
    options = _options(padding, stride, multiplier=multiplier)
    options["dilation_w_factor"] = options["dilation_h_factor"] = dilation
    g = window_geometry(padding, x.shape[1:3], (3, 3), (stride, stride), (dilation, dilation))
    got, want = run_both(
        "DEPTHWISE_CONV_2D",
        [
            Operand(x, q=(in_scale, 5)),
            Operand(w, not runtime, q=(scales, 0), qdim=3),
            Operand(bias, not runtime, q=(scales * in_scale, 0)),
        ],
        (1, g.out_h, g.out_w, c),
        np.int8,
        options,
        version=3,
        out_q=(0.05, -7),
    )
    _assert_same(got, want)
