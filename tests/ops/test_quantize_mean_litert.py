"""QUANTIZE, MEAN, HARD_SWISH and int8 ADD bit for bit against LiteRT's builtin kernels, at the
shapes and with the quantization of the InceptionV3 and MobileNet layers that used to disagree
(issue 13), plus the hybrid kernels' input quantization rule."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ai_edge_litert.interpreter")

from _one_op import Operand, describe_mismatch, run_both  # noqa: E402

from offload.ops._quant import (  # noqa: E402
    multiply_by_quantized_multiplier_lanes,
    quantize_rows,
    round_half_away_neon,
)
from offload.quant import (  # noqa: E402
    multiply_by_quantized_multiplier,
    saturating_rounding_doubling_high_mul,
)


def _assert_same(got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape)
    assert np.array_equal(got.view(np.uint8), want.view(np.uint8)), describe_mismatch(got, want)


# --- rules, without LiteRT --------------------------------------------------------------------


def test_neon_rounding_adds_the_half_in_float32() -> None:
    """x86's NEON RoundToNearest adds +-0.5 in float32 before truncating: the sum itself rounds,
    so the largest float32 below one half becomes 1, not 0."""
    below_half = np.nextafter(np.float32(0.5), np.float32(0))
    values = np.array([below_half, -below_half, 0.5, -0.5, 1.5, 2.4999998], np.float32)
    assert round_half_away_neon(values).tolist() == [1, -1, 1, -1, 2, 2]


def test_lanes_requantize_like_vrshl_and_like_the_reference() -> None:
    """Vector lanes round the final shift's halves up, the scalar channels away from zero; both
    after the same rounding doubling high multiply."""
    rng = np.random.default_rng(1)
    multiplier = rng.integers(2**30, 2**31, 12)
    multiplier[:2] = 2**30  # exact halves
    shift = rng.integers(-12, 2, 12)
    acc = rng.integers(-(2**20), 2**20, (400, 12))
    got = multiply_by_quantized_multiplier_lanes(acc, multiplier, shift, 8)
    left, right = np.maximum(shift, 0), np.maximum(-shift, 0)
    high = saturating_rounding_doubling_high_mul(acc * (1 << left), multiplier)
    assert np.array_equal(got[:, :8], ((high + ((1 << right) >> 1)) >> right)[:, :8])
    reference = multiply_by_quantized_multiplier(acc, multiplier, shift)
    assert np.array_equal(got[:, 8:], reference[:, 8:])


# --- against LiteRT ---------------------------------------------------------------------------


@pytest.mark.litert
@pytest.mark.parametrize("dtype, zero_point", [(np.int8, -1), (np.uint8, 127), (np.int16, 0)])
def test_quantize_float_input_like_affine_quantize(dtype, zero_point) -> None:
    """QUANTIZE float32 -> integer, InceptionV3's image input (scale 2/255): LiteRT multiplies
    blocks of 8 by float32(1/scale) and rounds to nearest even, and divides the tail in double
    rounding halves away from zero: values on halves of the scale tell the two apart."""
    rng = np.random.default_rng(2)
    pixels = rng.integers(0, 256, (1, 299, 299, 3))
    x = (pixels / np.float32(127.5) - 1).astype(np.float32)
    # and a third of the values on exact halves of the scale
    halves = (rng.integers(-128, 127, x.size // 3) + 0.5) * np.float32(0.00784313)
    x.flat[: x.size // 3] = halves.astype(np.float32)
    got, want = run_both(
        "QUANTIZE", [Operand(x)], x.shape, dtype, None, out_q=(0.00784313, zero_point)
    )
    _assert_same(got, want)


@pytest.mark.litert
def test_quantize_tail_and_out_of_range() -> None:
    """The last size % 8 values take the scalar path; values beyond int32 (and NaN) convert to
    INT32_MIN on x86 and so clamp to the minimum."""
    scale = np.float32(0.0123)
    x = ((np.arange(-20, 23) + 0.5) * scale).astype(np.float32)
    x[3], x[4], x[-1] = 1e12, np.nan, -1e12
    got, want = run_both("QUANTIZE", [Operand(x)], x.shape, np.int8, None, out_q=(scale, 3))
    _assert_same(got, want)


def _sums_on_negative_halves(rng: np.random.Generator, channels: int) -> np.ndarray:
    """(1, 14, 14, channels) int8 values whose per-channel sums are -128 - 256 * j: scaled by
    2**-8 they land on negative halves, where rounding up and away from zero disagree."""
    count = 14 * 14
    x = rng.integers(-60, 61, (count, channels))
    delta = -128 - 256 * rng.integers(0, 8, channels) - x.sum(axis=0)
    x += delta // count  # spread the correction, each value staying within int8
    x += np.arange(count)[:, None] < (delta % count)[None, :]
    return x.reshape(1, 14, 14, channels).astype(np.int8)


@pytest.mark.litert
@pytest.mark.parametrize(
    "channels, in_q, out_q",
    [
        (120, (0.00169801, -23), (0.00167539, -24)),  # MobileNetV3-Small int8, node 52
        # Scales whose ratio is 196 * 2**-8: the rescale is 2**-8 (multiplier 2**30).
        (120, (196 * 2.0**-15, -23), (2.0**-7, -24)),
        (40, (196 * 2.0**-15, 5), (2.0**-7, 0)),
    ],
)
def test_mean_over_height_width_rounds_like_neon_lanes(channels, in_q, out_q) -> None:
    """MEAN over H and W (int8, keep_dims): LiteRT's Mean4D rescales 16 channels at a time in
    NEON lanes (halves up), the channels left over with the reference (halves away from zero)."""
    rng = np.random.default_rng(3)
    if in_q[0] == 196 * 2.0**-15:
        x = _sums_on_negative_halves(rng, channels)
    else:
        x = rng.integers(-128, 128, (1, 14, 14, channels)).astype(np.int8)
    axis = np.array([1, 2], np.int32)
    got, want = run_both(
        "MEAN",
        [Operand(x, q=in_q), Operand(axis, True)],
        (1, 1, 1, channels),
        np.int8,
        {"keep_dims": True},
        version=2,
        out_q=out_q,
    )
    _assert_same(got, want)


@pytest.mark.litert
@pytest.mark.parametrize("shape", [(1, 112, 112, 16), (1, 7, 7, 5)])
def test_float_hard_swish_multiplies_in_litert_order(shape) -> None:
    """Float HARD_SWISH: (x * 1/6) * relu6(x + 3) in 4-wide lanes, (x * relu6(x + 3)) * 1/6 for
    the elements left over (MobileNetV3-Small's first activation, and a size that leaves some)."""
    x = (np.random.default_rng(4).standard_normal(shape) * 4).astype(np.float32)
    got, want = run_both("HARD_SWISH", [Operand(x)], shape, np.float32)
    _assert_same(got, want)


@pytest.mark.litert
@pytest.mark.parametrize("dtype, zero_points", [(np.int8, (-5, -30)), (np.uint8, (120, 100))])
@pytest.mark.parametrize("shape", [(1, 112, 112, 16), (1, 15, 15, 13)])
def test_quantized_hard_swish_by_byte_pairs(shape, dtype, zero_points) -> None:
    """8-bit HARD_SWISH looks inputs up two bytes at a time: every pair of codes, and an odd
    size's last byte on its own, give LiteRT's values (MobileNetV3-Small's first activation,
    and a size with one element left over)."""
    info = np.iinfo(dtype)
    x = np.random.default_rng(5).integers(info.min, info.max + 1, shape).astype(dtype)
    (zi, zo) = zero_points
    got, want = run_both("HARD_SWISH", [Operand(x, q=(0.05, zi))], shape, dtype, out_q=(0.03, zo))
    _assert_same(got, want)


@pytest.mark.litert
def test_hybrid_input_quantization_matches_litert() -> None:
    """quantize_rows (asymmetric) is the input quantization LiteRT's hybrid kernels run: checked
    through a 1x1 hybrid depthwise with unit weights and scales, whose outputs are then
    (q - offset) * input_scale. ReLU6 inputs peaking at 6.0 give the scale 6/255; two values
    are chosen to scale to 0.49999997 (float32 +0.5 makes it 1) and to 2.5000002 (adding the
    offset -128 in float32 first would make it the half -125.5)."""
    rng = np.random.default_rng(5)
    x = np.clip(rng.standard_normal((1, 9, 9, 13)) * 3, 0, 6).astype(np.float32)
    x.flat[0] = 6.0
    x.flat[10] = np.float32(0.011764705)
    x.flat[20] = np.float32(0.058823533)
    w = np.ones((1, 1, 1, 13), np.int8)
    got, want = run_both(
        "DEPTHWISE_CONV_2D",
        [
            Operand(x),
            Operand(w, True, q=(np.ones(13, np.float32), 0), qdim=3),
            Operand(np.zeros(13, np.float32), True),
        ],
        x.shape,
        np.float32,
        {"padding": "VALID", "stride_w": 1, "stride_h": 1, "depth_multiplier": 1},
        version=6,
    )
    _assert_same(got, want)
    q, scale, offset = quantize_rows(x.reshape(1, -1), asymmetric=True)
    assert (q[0, 10], q[0, 20], offset[0]) == (-127, -125, -128)
    expected = ((q - offset[:, None]).astype(np.float32) * scale[:, None]).reshape(x.shape)
    _assert_same(expected, want)


def _identity_hybrid(op: str, x: np.ndarray, asymmetric: bool) -> np.ndarray:
    """LiteRT's outputs of a hybrid op with identity int8 weights of scale 1 (and a zero bias)
    on ``x``: its quantized input (q - offset) * input_scale, per row of a FULLY_CONNECTED, per
    batch of a 1x1 per-tensor CONV_2D (symmetric) or DEPTHWISE_CONV_2D (asymmetric). offload's
    run of the same model must agree."""
    depth = x.shape[-1]
    eye = np.eye(depth, dtype=np.int8)
    bias = Operand(np.zeros(depth, np.float32), True)
    if op == "FULLY_CONNECTED":
        operands = [Operand(eye, True, q=(np.float32(1), 0))]
        options = {"fused_activation_function": "NONE", "asymmetric_quantize_inputs": asymmetric}
        version = 9
    elif op == "CONV_2D":
        operands = [Operand(eye.reshape(depth, 1, 1, depth), True, q=(np.float32(1), 0)), bias]
        options = {"padding": "VALID", "stride_w": 1, "stride_h": 1}
        version = 2
    else:
        ones = Operand(
            np.ones((1, 1, 1, depth), np.int8), True, q=(np.ones(depth, np.float32), 0), qdim=3
        )
        operands = [ones, bias]
        options = {"padding": "VALID", "stride_w": 1, "stride_h": 1, "depth_multiplier": 1}
        version = 6
    x_operand = Operand(x)
    got, want = run_both(op, [x_operand, *operands], x.shape, np.float32, options, version=version)
    _assert_same(got, want)
    return want


@pytest.mark.litert
@pytest.mark.parametrize(
    "op, shape, asymmetric",
    [
        # Short rows, several to a block, each with a scalar tail of 3.
        ("FULLY_CONNECTED", (80, 1003), False),
        ("FULLY_CONNECTED", (80, 1003), True),
        # One row of 106875 in two blocks, and a tail of 3.
        ("CONV_2D", (1, 75, 75, 19), False),
        ("DEPTHWISE_CONV_2D", (1, 75, 75, 19), True),
    ],
)
def test_hybrid_input_quantization_in_blocks_matches_litert(op, shape, asymmetric) -> None:
    """quantize_rows works through cache-sized blocks, whole short rows at a time or a long
    row in pieces, and still quantizes every row as LiteRT's hybrid kernels do."""
    rng = np.random.default_rng(11)
    x = (rng.standard_normal(shape) * rng.uniform(0.1, 10, (shape[0], 1))).astype(np.float32)
    if shape[0] > 3:
        x[3] = 0  # an all-zero row takes the scale-1 shortcut
    want = _identity_hybrid(op, x, asymmetric)
    q, scale, offset = quantize_rows(x.reshape(shape[0], -1), asymmetric)
    assert q.dtype == np.int8
    expected = (q - offset[:, None]).astype(np.float32) * scale[:, None]
    _assert_same(expected.reshape(want.shape), want)


@pytest.mark.litert
@pytest.mark.parametrize(
    "shape_a, shape_b",
    [
        ((1, 56, 56, 24), (1, 56, 56, 24)),  # MobileNetV2's residuals
        ((1, 7, 7, 161), (1, 7, 7, 161)),  # a tail of size % 16
        ((1, 28, 28, 32), (1, 1, 1, 32)),  # broadcast inner runs of 32
        ((1, 28, 28, 20), (1, 28, 28, 1)),  # scalar-broadcast runs of 20: 8 + 8 + a tail of 4
    ],
)
def test_int8_add_like_neon_lanes(shape_a, shape_b) -> None:
    """int8 ADD: 16 elements at a time LiteRT shifts each input by 20 plus its multiplier's
    exponent before one rounding multiply; against a broadcast value, 8 at a time, it shifts
    right after the multiply; each run's tail and the reference round twice."""
    rng = np.random.default_rng(6)
    a = rng.integers(-128, 128, shape_a).astype(np.int8)
    b = rng.integers(-128, 128, shape_b).astype(np.int8)
    got, want = run_both(
        "ADD",
        [Operand(a, q=(0.0123, 3)), Operand(b, q=(0.0456, -5))],
        np.broadcast_shapes(shape_a, shape_b),
        np.int8,
        {"fused_activation_function": "NONE"},
        version=2,
        out_q=(0.05, 1),
    )
    _assert_same(got, want)


@pytest.mark.litert
@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
def test_average_pool_integer_mean_at_inception_shape(dtype) -> None:
    """AVERAGE_POOL_2D on integers (InceptionV3's 3x3 SAME pools): the windows summed in
    float32, exactly, and ``(sum +- count // 2) / count`` truncated; edges average fewer taps."""
    info = np.iinfo(dtype)
    x = np.random.default_rng(7).integers(info.min, info.max + 1, (1, 35, 35, 288)).astype(dtype)
    q = (0.02, 0 if dtype == np.int8 else 128)
    options = {
        "padding": "SAME",
        "stride_w": 1,
        "stride_h": 1,
        "filter_width": 3,
        "filter_height": 3,
        "fused_activation_function": "RELU6",
    }
    got, want = run_both(
        "AVERAGE_POOL_2D", [Operand(x, q=q)], x.shape, dtype, options, version=2, out_q=q
    )
    _assert_same(got, want)
