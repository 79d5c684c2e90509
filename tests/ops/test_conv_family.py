"""The convolution family and pooling kernels against LiteRT on single-op models, plus a few
numpy re-derivations of the rules they share (padding, windows, hybrid input quantization)."""

from __future__ import annotations

import numpy as np
import pytest
from _one_op import Operand, build, run_offload

import offload
from offload.geometry import geometry
from offload.ops import kernel_class
from offload.ops._conv import quantize_rows

builder = pytest.importorskip("offload.model.builder", reason="needs offload.model.builder")
litert = pytest.importorskip("ai_edge_litert.interpreter")

RNG = np.random.default_rng(7)


# One op input (value, constant or not, quantization): the shared single-op builder's.
In = Operand


def _build(op: str, ins: list[In], out_shape, out_dtype, options, version, out_q):
    return build(op, ins, out_shape, out_dtype, options, version=version, out_q=out_q)


def check(op, ins, out_shape, out_dtype, options, version=1, out_q=None, int_tol=0):
    """Run one op in LiteRT (builtin kernels) and in offload; assert they agree."""
    content, feeds = _build(op, ins, out_shape, out_dtype, options, version, out_q)
    ref = litert.Interpreter(
        model_content=content,
        experimental_op_resolver_type=litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
    )
    ref.allocate_tensors()
    for detail, value in zip(ref.get_input_details(), feeds):
        ref.set_tensor(detail["index"], value)
    ref.invoke()
    want = ref.get_tensor(ref.get_output_details()[0]["index"])
    got = run_offload(content, feeds)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape)
    if np.issubdtype(want.dtype, np.floating):
        err = np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-30)
        assert err <= 1e-5, f"rel err {err:.2e}\nours {got.ravel()[:8]}\nLiteRT {want.ravel()[:8]}"
    else:
        diff = np.abs(got.astype(np.int64) - want)
        assert diff.max() <= int_tol, f"max diff {diff.max()}, exact {np.mean(diff == 0):.4f}"


def f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def ints(dtype, *shape: int, lo: int = -100, hi: int = 100) -> np.ndarray:
    return RNG.integers(lo, hi, size=shape, endpoint=True).astype(dtype)


def conv_opts(padding="SAME", stride=1, dilation=1, act="NONE") -> dict:
    return {
        "padding": padding,
        "stride_h": stride,
        "stride_w": stride,
        "dilation_h_factor": dilation,
        "dilation_w_factor": dilation,
        "fused_activation_function": act,
    }


# --- numpy re-derivations -------------------------------------------------------------------


def test_same_padding_puts_the_odd_pixel_after() -> None:
    """SAME padding splits the total evenly, the extra pixel at the bottom/right."""
    g = geometry("SAME", (6, 6), (3, 3), (2, 2))
    assert (g.out_h, g.pad_top, g.pad_bottom) == (3, 0, 1)
    g = geometry("VALID", (7, 7), (3, 3), (2, 2), (2, 2))
    assert (g.out_h, g.pad_top, g.pad_bottom) == (2, 0, 0)


def test_float_conv_matches_a_direct_loop() -> None:
    """CONV_2D float equals the textbook sum over taps and input channels."""
    x, w, bias = f32(1, 5, 6, 3), f32(4, 3, 3, 3), f32(4)
    node_opts = conv_opts("SAME", stride=2)
    content, _ = _build(
        "CONV_2D",
        [In(x), In(w, True), In(bias, True)],
        (1, 3, 3, 4),
        np.float32,
        node_opts,
        1,
        None,
    )
    model = offload.load_model(model_content=content)
    node = model.main.nodes[0]
    got = kernel_class(node)(node, model.main).run(x, w, bias)
    g = geometry("SAME", (5, 6), (3, 3), (2, 2))
    xp = np.pad(x, ((0, 0), (g.pad_top, g.pad_bottom), (g.pad_left, g.pad_right), (0, 0)))
    want = np.zeros((1, 3, 3, 4), np.float64)
    for oy in range(3):
        for ox in range(3):
            win = xp[0, oy * 2 : oy * 2 + 3, ox * 2 : ox * 2 + 3, :]
            want[0, oy, ox] = np.tensordot(w, win, axes=([1, 2, 3], [0, 1, 2])) + bias
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_symmetric_row_quantization_spans_127() -> None:
    """Symmetric hybrid quantization maps each row's max magnitude to +-127."""
    q, scale, offset = quantize_rows(np.array([[0.5, -2.0, 1.0], [0, 0, 0]], np.float32), False)
    assert q[0].tolist() == [32, -127, 64] and q[1].tolist() == [0, 0, 0]
    assert scale[1] == 1 and not offset.any()
    np.testing.assert_allclose(scale[0], 2.0 / 127)


# --- against LiteRT -------------------------------------------------------------------------


@pytest.mark.litert
@pytest.mark.parametrize(
    "padding, stride, dilation, act",
    [
        ("SAME", 1, 1, "NONE"),
        ("SAME", 2, 1, "RELU6"),
        ("VALID", 2, 1, "RELU"),
        ("SAME", 1, 2, "RELU_N1_TO_1"),
        ("VALID", 1, 2, "NONE"),
    ],
)
def test_conv_float(padding, stride, dilation, act) -> None:
    """CONV_2D float: padding, stride, dilation and fused activation follow TFLite."""
    x, w, b = f32(2, 9, 8, 5), f32(6, 3, 3, 5), f32(6)
    g = geometry(padding, (9, 8), (3, 3), (stride, stride), (dilation, dilation))
    check(
        "CONV_2D",
        [In(x), In(w, True), In(b, True)],
        (2, g.out_h, g.out_w, 6),
        np.float32,
        conv_opts(padding, stride, dilation, act),
    )


@pytest.mark.litert
def test_conv_float_runtime_weights() -> None:
    """CONV_2D accepts runtime (non-constant) weights and bias, as float16 models feed them."""
    x, w, b = f32(1, 6, 6, 4), f32(3, 1, 1, 4), f32(3)
    check("CONV_2D", [In(x), In(w), In(b)], (1, 6, 6, 3), np.float32, conv_opts())


@pytest.mark.litert
def test_fc_float_without_bias() -> None:
    """FULLY_CONNECTED v6 runs with its bias omitted."""
    x, w = f32(3, 8), f32(4, 8)
    check(
        "FULLY_CONNECTED",
        [In(x), In(w, True), In(None)],
        (3, 4),
        np.float32,
        {"fused_activation_function": "NONE"},
        version=6,
    )


@pytest.mark.litert
def test_conv_float_grouped() -> None:
    """Grouped CONV_2D (filter depth a divisor of the input depth) convolves per group."""
    x, w, b = f32(1, 6, 6, 8), f32(6, 3, 3, 4), f32(6)
    check(
        "CONV_2D",
        [In(x), In(w, True), In(b, True)],
        (1, 6, 6, 6),
        np.float32,
        conv_opts(),
        version=6,
    )


@pytest.mark.litert
@pytest.mark.parametrize("act", ["NONE", "RELU"])
def test_conv_int8_per_channel(act) -> None:
    """CONV_2D int8: per-channel weights, int32 bias, zero points, fixed-point output."""
    x, w = ints(np.int8, 1, 7, 7, 8, lo=-128, hi=127), ints(np.int8, 16, 3, 3, 8, lo=-127, hi=127)
    b = ints(np.int32, 16, lo=-5000, hi=5000)
    ws = RNG.uniform(0.002, 0.01, 16).astype(np.float32)
    check(
        "CONV_2D",
        [In(x, q=(0.05, 3)), In(w, True, (ws, 0)), In(b, True, (ws * 0.05, 0))],
        (1, 4, 4, 16),
        np.int8,
        conv_opts("SAME", 2, act=act),
        version=3,
        out_q=(0.2, -5),
    )


@pytest.mark.litert
def test_conv_uint8_per_tensor() -> None:
    """CONV_2D uint8: per-tensor weights with a weight zero point."""
    x, w = ints(np.uint8, 1, 6, 6, 3, lo=0, hi=255), ints(np.uint8, 4, 3, 3, 3, lo=0, hi=255)
    b = ints(np.int32, 4, lo=-3000, hi=3000)
    check(
        "CONV_2D",
        [In(x, q=(0.03, 128)), In(w, True, (0.01, 120)), In(b, True, (0.0003, 0))],
        (1, 6, 6, 4),
        np.uint8,
        conv_opts(act="RELU6"),
        out_q=(0.05, 10),
    )


@pytest.mark.litert
@pytest.mark.parametrize("bias_dtype", [np.int64, np.int32])
def test_conv_16x8(bias_dtype) -> None:
    """CONV_2D 16x8: int16 activations, int8 weights, int64 (or int32) bias."""
    x = ints(np.int16, 1, 6, 6, 4, lo=-30000, hi=30000)
    w = ints(np.int8, 5, 3, 3, 4, lo=-127, hi=127)
    ws = RNG.uniform(0.002, 0.01, 5).astype(np.float32)
    b = ints(bias_dtype, 5, lo=-50000, hi=50000)
    opts = conv_opts()
    opts["quantized_bias_type"] = 2 if bias_dtype == np.int32 else 0  # TensorType INT32
    check(
        "CONV_2D",
        [In(x, q=(0.001, 0)), In(w, True, (ws, 0)), In(b, True, (ws * 0.001, 0))],
        (1, 6, 6, 5),
        np.int16,
        opts,
        version=8 if bias_dtype == np.int32 else 4,
        out_q=(0.01, 0),
    )


@pytest.mark.litert
@pytest.mark.parametrize("per_channel", [False, True])
def test_conv_hybrid(per_channel) -> None:
    """Hybrid CONV_2D quantizes the input per batch (asymmetric when per-channel)."""
    x, w, b = f32(2, 7, 7, 4), ints(np.int8, 6, 3, 3, 4, lo=-127, hi=127), f32(6)
    ws = RNG.uniform(0.01, 0.02, 6).astype(np.float32) if per_channel else np.float32(0.015)
    check(
        "CONV_2D",
        [In(x), In(w, True, (ws, 0)), In(b, True)],
        (2, 4, 4, 6),
        np.float32,
        conv_opts("SAME", 2, act="RELU"),
        version=5 if per_channel else 2,
    )


@pytest.mark.litert
@pytest.mark.parametrize("mult, dilation, stride", [(1, 1, 1), (2, 1, 2), (3, 2, 1)])
def test_depthwise_float(mult, dilation, stride) -> None:
    """DEPTHWISE_CONV_2D float: channel c feeds outputs c*multiplier..c*multiplier+m-1."""
    x, w, b = f32(1, 9, 9, 4), f32(1, 3, 3, 4 * mult), f32(4 * mult)
    g = geometry("SAME", (9, 9), (3, 3), (stride, stride), (dilation, dilation))
    opts = conv_opts("SAME", stride, dilation, "RELU6") | {"depth_multiplier": mult}
    check(
        "DEPTHWISE_CONV_2D",
        [In(x), In(w, True), In(b, True)],
        (1, g.out_h, g.out_w, 4 * mult),
        np.float32,
        opts,
        version=2 if dilation > 1 else 1,
    )


@pytest.mark.litert
def test_depthwise_int8() -> None:
    """DEPTHWISE_CONV_2D int8 with per-channel weights and an input zero point."""
    x, w = ints(np.int8, 1, 8, 8, 6, lo=-128, hi=127), ints(np.int8, 1, 3, 3, 6, lo=-127, hi=127)
    b = ints(np.int32, 6, lo=-2000, hi=2000)
    ws = RNG.uniform(0.005, 0.02, 6).astype(np.float32)
    opts = conv_opts("VALID", 1, act="RELU") | {"depth_multiplier": 1}
    check(
        "DEPTHWISE_CONV_2D",
        [In(x, q=(0.04, -7)), In(w, True, (ws, 0), 3), In(b, True, (ws * 0.04, 0))],
        (1, 6, 6, 6),
        np.int8,
        opts,
        version=3,
        out_q=(0.08, 4),
    )


@pytest.mark.litert
def test_depthwise_16x8() -> None:
    """DEPTHWISE_CONV_2D 16x8 accumulates in int64 with an int64 bias."""
    x = ints(np.int16, 1, 6, 6, 3, lo=-30000, hi=30000)
    w = ints(np.int8, 1, 3, 3, 6, lo=-127, hi=127)
    ws = RNG.uniform(0.005, 0.02, 6).astype(np.float32)
    b = ints(np.int64, 6, lo=-90000, hi=90000)
    opts = conv_opts() | {"depth_multiplier": 2}
    check(
        "DEPTHWISE_CONV_2D",
        [In(x, q=(0.001, 0)), In(w, True, (ws, 0), 3), In(b, True, (ws * 0.001, 0))],
        (1, 6, 6, 6),
        np.int16,
        opts,
        version=5,
        out_q=(0.01, 0),
    )


@pytest.mark.litert
def test_depthwise_hybrid() -> None:
    """Hybrid DEPTHWISE_CONV_2D quantizes the input asymmetrically per batch."""
    x, w, b = f32(2, 6, 6, 4), ints(np.int8, 1, 3, 3, 4, lo=-127, hi=127), f32(4)
    ws = RNG.uniform(0.01, 0.02, 4).astype(np.float32)
    opts = conv_opts() | {"depth_multiplier": 1}
    check(
        "DEPTHWISE_CONV_2D",
        [In(x), In(w, True, (ws, 0), 3), In(b, True)],
        (2, 6, 6, 4),
        np.float32,
        opts,
        version=6,
    )


@pytest.mark.litert
@pytest.mark.parametrize("keep", [False, True])
def test_fc_float(keep) -> None:
    """FULLY_CONNECTED float flattens to rows of K, or keeps the leading dims."""
    x, w, b = f32(2, 3, 8), f32(5, 8), f32(5)
    shape = (2, 3, 5) if keep else (6, 5)
    check(
        "FULLY_CONNECTED",
        [In(x), In(w, True), In(b, True)],
        shape,
        np.float32,
        {"fused_activation_function": "RELU", "keep_num_dims": keep},
        version=5 if keep else 1,
    )


@pytest.mark.litert
@pytest.mark.parametrize("per_channel", [False, True])
def test_fc_int8(per_channel) -> None:
    """FULLY_CONNECTED int8, per-tensor or per-channel weights."""
    x, w = ints(np.int8, 4, 32, lo=-128, hi=127), ints(np.int8, 7, 32, lo=-127, hi=127)
    ws = RNG.uniform(0.002, 0.01, 7).astype(np.float32) if per_channel else np.float32(0.006)
    b = ints(np.int32, 7, lo=-5000, hi=5000)
    check(
        "FULLY_CONNECTED",
        [In(x, q=(0.05, 2)), In(w, True, (ws, 0)), In(b, True, (np.float32(0.05) * ws, 0))],
        (4, 7),
        np.int8,
        {"fused_activation_function": "NONE"},
        version=4,
        out_q=(0.1, -3),
    )


@pytest.mark.litert
def test_fc_uint8() -> None:
    """FULLY_CONNECTED uint8 with input and weight zero points."""
    x, w = ints(np.uint8, 3, 16, lo=0, hi=255), ints(np.uint8, 5, 16, lo=0, hi=255)
    b = ints(np.int32, 5, lo=-2000, hi=2000)
    check(
        "FULLY_CONNECTED",
        [In(x, q=(0.02, 128)), In(w, True, (0.01, 130)), In(b, True, (0.0002, 0))],
        (3, 5),
        np.uint8,
        {"fused_activation_function": "RELU"},
        out_q=(0.03, 0),
    )


@pytest.mark.litert
def test_fc_16x8() -> None:
    """FULLY_CONNECTED 16x8 with an int64 bias accumulates in int64."""
    x, w = ints(np.int16, 3, 16, lo=-30000, hi=30000), ints(np.int8, 5, 16, lo=-127, hi=127)
    b = ints(np.int64, 5, lo=-90000, hi=90000)
    check(
        "FULLY_CONNECTED",
        [In(x, q=(0.001, 0)), In(w, True, (0.01, 0)), In(b, True, (0.00001, 0))],
        (3, 5),
        np.int16,
        {"fused_activation_function": "NONE"},
        version=7,
        out_q=(0.02, 0),
    )


@pytest.mark.litert
@pytest.mark.parametrize(
    "asymmetric, per_channel, version",
    [
        (False, False, 3),
        (True, False, 9),
        (False, True, 12),
        (True, True, 12),
    ],
)
def test_fc_hybrid(asymmetric, per_channel, version) -> None:
    """Hybrid FULLY_CONNECTED quantizes each input row on the fly, as LiteRT does."""
    x, w, b = f32(4, 24) * 3, ints(np.int8, 6, 24, lo=-127, hi=127), f32(6)
    x[1] = 0  # an all-zero row takes the scale-1 shortcut
    ws = RNG.uniform(0.01, 0.02, 6).astype(np.float32) if per_channel else np.float32(0.015)
    check(
        "FULLY_CONNECTED",
        [In(x), In(w, True, (ws, 0)), In(b, True)],
        (4, 6),
        np.float32,
        {"fused_activation_function": "NONE", "asymmetric_quantize_inputs": asymmetric},
        version=version,
    )


@pytest.mark.litert
@pytest.mark.parametrize(
    "padding, stride, out_hw",
    [
        ("SAME", 2, (10, 12)),
        ("VALID", 2, (11, 13)),
        ("SAME", 1, (5, 6)),
        ("VALID", 3, (15, 18)),
    ],
)
def test_transpose_conv_float(padding, stride, out_hw) -> None:
    """TRANSPOSE_CONV float scatters each input pixel through the filter, then crops."""
    x, w, b = f32(1, 5, 6, 3), f32(4, 3, 3, 3), f32(4)
    out_shape = np.array([1, *out_hw, 4], np.int32)
    check(
        "TRANSPOSE_CONV",
        [In(out_shape, True), In(w, True), In(x), In(b, True)],
        (1, *out_hw, 4),
        np.float32,
        {"padding": padding, "stride_h": stride, "stride_w": stride},
        version=3,
    )


@pytest.mark.litert
def test_transpose_conv_int8() -> None:
    """TRANSPOSE_CONV int8 with per-channel weights and an int32 bias."""
    x, w = ints(np.int8, 1, 4, 4, 3, lo=-128, hi=127), ints(np.int8, 5, 3, 3, 3, lo=-127, hi=127)
    ws = RNG.uniform(0.005, 0.02, 5).astype(np.float32)
    b = ints(np.int32, 5, lo=-2000, hi=2000)
    check(
        "TRANSPOSE_CONV",
        [
            In(np.array([1, 8, 8, 5], np.int32), True),
            In(w, True, (ws, 0)),
            In(x, q=(0.05, 1)),
            In(b, True, (ws * 0.05, 0)),
        ],
        (1, 8, 8, 5),
        np.int8,
        {"padding": "SAME", "stride_h": 2, "stride_w": 2},
        version=3,
        out_q=(0.1, 0),
    )


@pytest.mark.litert
def test_transpose_conv_hybrid() -> None:
    """Hybrid TRANSPOSE_CONV quantizes the input asymmetrically per batch."""
    x, w = f32(2, 4, 4, 3), ints(np.int8, 5, 3, 3, 3, lo=-127, hi=127)
    ws = RNG.uniform(0.005, 0.02, 5).astype(np.float32)
    check(
        "TRANSPOSE_CONV",
        [In(np.array([2, 8, 8, 5], np.int32), True), In(w, True, (ws, 0)), In(x), In(f32(5), True)],
        (2, 8, 8, 5),
        np.float32,
        {"padding": "SAME", "stride_h": 2, "stride_w": 2},
        version=3,
    )


@pytest.mark.litert
@pytest.mark.parametrize("adj_x, adj_y", [(False, False), (True, False), (False, True)])
def test_batch_matmul_float(adj_x, adj_y) -> None:
    """BATCH_MATMUL float broadcasts batch dims and honours adj_x / adj_y."""
    lhs = f32(2, 1, 4, 6) if not adj_x else f32(2, 1, 6, 4)
    rhs = f32(3, 6, 5) if not adj_y else f32(3, 5, 6)
    check(
        "BATCH_MATMUL",
        [In(lhs), In(rhs)],
        (2, 3, 4, 5),
        np.float32,
        {"adj_x": adj_x, "adj_y": adj_y},
    )


@pytest.mark.litert
@pytest.mark.parametrize("dtype, version", [(np.int8, 2), (np.int16, 3)])
def test_batch_matmul_quantized(dtype, version) -> None:
    """BATCH_MATMUL int8 / int16 requantize with lhs_scale * rhs_scale / out_scale."""
    lo, hi = (-128, 127) if dtype == np.int8 else (-3000, 3000)
    zp = 3 if dtype == np.int8 else 0
    lhs, rhs = ints(dtype, 2, 4, 16, lo=lo, hi=hi), ints(dtype, 2, 16, 5, lo=lo, hi=hi)
    check(
        "BATCH_MATMUL",
        [In(lhs, q=(0.05, zp)), In(rhs, q=(0.02, -zp))],
        (2, 4, 5),
        dtype,
        {"adj_x": False, "adj_y": False},
        version=version,
        out_q=(0.5, zp),
    )


@pytest.mark.litert
@pytest.mark.parametrize("asymmetric", [False, True])
def test_batch_matmul_hybrid(asymmetric) -> None:
    """Hybrid BATCH_MATMUL quantizes each lhs row on the fly against constant int8 rhs."""
    lhs, rhs = f32(2, 4, 16), ints(np.int8, 16, 5, lo=-127, hi=127)
    check(
        "BATCH_MATMUL",
        [In(lhs), In(rhs, True, (0.02, 0))],
        (2, 4, 5),
        np.float32,
        {"adj_x": False, "adj_y": False, "asymmetric_quantize_inputs": asymmetric},
        version=4 if asymmetric else 1,
    )


def pool_opts(padding, size, stride, act="NONE") -> dict:
    return {
        "padding": padding,
        "filter_height": size,
        "filter_width": size,
        "stride_h": stride,
        "stride_w": stride,
        "fused_activation_function": act,
    }


@pytest.mark.litert
@pytest.mark.parametrize("op", ["AVERAGE_POOL_2D", "MAX_POOL_2D", "L2_POOL_2D"])
@pytest.mark.parametrize("padding, size, stride", [("SAME", 3, 2), ("VALID", 2, 2), ("SAME", 3, 1)])
def test_pool_float(op, padding, size, stride) -> None:
    """Float pooling reduces over the in-bounds taps of each window only."""
    x = f32(2, 7, 8, 3)
    g = geometry(padding, (7, 8), (size, size), (stride, stride))
    check(
        op,
        [In(x)],
        (2, g.out_h, g.out_w, 3),
        np.float32,
        pool_opts(padding, size, stride, "RELU6" if op != "L2_POOL_2D" else "NONE"),
    )


@pytest.mark.litert
@pytest.mark.parametrize("op", ["AVERAGE_POOL_2D", "MAX_POOL_2D"])
@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16])
def test_pool_quantized(op, dtype) -> None:
    """Integer pooling: averages round half away from zero; results clamp to the activation."""
    info = np.iinfo(dtype)
    x = ints(dtype, 1, 7, 7, 4, lo=int(info.min), hi=int(info.max))
    zp = 0 if dtype == np.int16 else (5 if dtype == np.int8 else 128)
    q = (0.05, zp)
    version = 3 if dtype == np.int16 else (2 if dtype == np.int8 else 1)
    check(
        op,
        [In(x, q=q)],
        (1, 4, 4, 4),
        dtype,
        pool_opts("SAME", 3, 2, "RELU"),
        version=version,
        out_q=q,
    )


@pytest.mark.litert
@pytest.mark.parametrize("bias", [0, 2_000_000_000])
def test_fc_int8_accumulator_wraps_as_litert(bias: int) -> None:
    """An int8 FULLY_CONNECTED whose int32 accumulator overflows: LiteRT's sum wraps modulo
    2**32 (x86 int32 arithmetic), and so does the reference's. K = 70,000 products of 255 x 127
    (input zero point -128) reach 2.27e9, past int32's 2.15e9; one row in three stays in range."""
    k = 70_000
    x = np.full((3, k), 127, np.int8)
    x[1] = -128  # x - zero point = 0: no overflow in this row
    w = np.full((2, k), 127, np.int8)
    w[1, ::2] = -127
    b = np.array([bias, -bias], np.int32)
    check(
        "FULLY_CONNECTED",
        [In(x, q=(0.5, -128)), In(w, True, (0.01, 0)), In(b, True, (0.005, 0))],
        (3, 2),
        np.int8,
        {"fused_activation_function": "NONE"},
        version=4,
        out_q=(1e6, 0),
    )
