"""The int8 GEMM kernels (CONV_2D, FULLY_CONNECTED, TRANSPOSE_CONV) bit for bit against LiteRT
at the shapes and quantization parameters of real models, and the exact float requantization
they share against the int64 rule it replaces."""

from __future__ import annotations

import numpy as np
import pytest
from _one_op import describe_mismatch, run_both
from test_conv_family import In, check, conv_opts, ints

import offload
from offload.ops._conv import (
    RuyRequantizer,
    eigen_order_gemv,
    eigen_order_matmul,
    gemm_dtype,
    requantize_ruy,
)
from offload.quant import quantize_multipliers

litert = pytest.importorskip("ai_edge_litert.interpreter")

RNG = np.random.default_rng(13)


# --- the exact float requantization ---------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
def test_float_requantization_equals_ruy_rounding(dtype) -> None:
    """RuyRequantizer gives requantize_ruy's result, clamped, on every accumulator near an
    output step (ties included) and far outside the clamp range."""
    info = np.iinfo(dtype)
    checked = 0
    for _ in range(300):
        channels = int(RNG.integers(1, 6))
        real = np.exp(RNG.uniform(np.log(2e-5), np.log(1.5), channels))
        multiplier, shift = quantize_multipliers(real)
        offset = RNG.integers(-(2**22), 2**22, channels)
        zero_point = int(RNG.integers(info.min, info.max + 1))
        lo = int(RNG.integers(info.min, info.max + 1))
        hi = int(RNG.integers(lo, info.max + 1))
        requantize = RuyRequantizer.build(multiplier, shift, offset, zero_point, (lo, hi), dtype)
        if requantize is None:
            continue
        # Accumulators around every output value's first accumulator, and some huge ones.
        steps = (RNG.integers(lo - 3, hi + 4, (500, channels)) - zero_point) / real
        acc = np.round(steps).astype(np.int64) + RNG.integers(-3, 4, (500, channels))
        acc[::9] = RNG.integers(-(2**30), 2**30, acc[::9].shape)
        want = np.clip(requantize_ruy(acc, multiplier, shift) + zero_point, lo, hi)
        got = np.empty(acc.shape, dtype)
        requantize((acc - offset).astype(np.float64), got)
        np.testing.assert_array_equal(got, want.astype(dtype))
        checked += 1
    assert checked > 150  # most random layers qualify; a build that refuses all tests nothing


def test_float_requantization_refuses_what_it_cannot_hold() -> None:
    """A multiplier so small that 2**53 cannot hold an output step's numerator is refused
    (the kernel keeps its int64 path) rather than rounded."""
    multiplier, shift = quantize_multipliers(np.array([2.0**-20]))
    assert RuyRequantizer.build(multiplier, shift, np.array([0]), 0, (-128, 127), np.int8) is None


def test_gemm_dtype_bounds_every_partial_sum() -> None:
    """float32 only while |x| * sum|w| per column stays below 2**24."""
    assert gemm_dtype(np.int8, np.full((1024, 2), 127.0)) == np.float32  # 128*127*1024 < 2**24
    assert gemm_dtype(np.int8, np.full((1040, 2), 127.0)) == np.float64
    assert gemm_dtype(np.uint8, np.full((515, 1), 127.0)) == np.float32
    assert gemm_dtype(np.uint8, np.full((520, 1), 127.0)) == np.float64


# --- real shapes against LiteRT -------------------------------------------------------------


@pytest.mark.litert
def test_transpose_conv_int8_rounds_like_ruy() -> None:
    """small_cnn's int8 TRANSPOSE_CONV (16x16x32 -> 32x32x16, 3x3, stride 2, its own scales):
    LiteRT's optimized kernel rounds halves up in the second rounding step, like ruy; TFLite's
    reference rounding (halves away from zero) was one step off on ~0.1% of the outputs."""
    w_scales = np.array(
        [0.000927128, 0.000927578, 0.000926026, 0.000926075, 0.000924285, 0.00092578,
         0.000927206, 0.000926382, 0.000924317, 0.000927368, 0.000918317, 0.000927136,
         0.000921457, 0.000921535, 0.000925987, 0.000927323],
        np.float32,
    )  # fmt: skip
    x = ints(np.int8, 1, 16, 16, 32, lo=-128, hi=127)
    w = ints(np.int8, 16, 3, 3, 32, lo=-127, hi=127)
    check(
        "TRANSPOSE_CONV",
        [
            In(np.array([1, 32, 32, 16], np.int32), True),
            In(w, True, (w_scales, 0)),
            In(x, q=(0.003254069946706295, -128)),
        ],
        (1, 32, 32, 16),
        np.int8,
        {"padding": "SAME", "stride_h": 2, "stride_w": 2},
        version=3,
        out_q=(0.002886715577915311, 12),
    )


@pytest.mark.litert
@pytest.mark.parametrize(
    "x_dtype,bias_dtype",
    [(np.int8, np.int32), (np.int16, np.int32), (np.int16, np.int64)],
    ids=["int8", "16x8-int32-bias", "16x8-int64-bias"],
)
def test_transpose_conv_requantizes_the_last_channels_one_by_one(x_dtype, bias_dtype) -> None:
    """12 output channels: LiteRT's optimized TRANSPOSE_CONV requantizes the first 8 with
    ruy's rounding and the last 4 with TFLite's reference rounding; a 16x8 model with an
    int64 bias runs the reference kernel, with its own 16-bit multiplier throughout."""
    int8 = x_dtype == np.int8
    x = ints(x_dtype, 1, 16, 16, 8, lo=-128 if int8 else -20000, hi=127 if int8 else 20000)
    w = ints(np.int8, 12, 3, 3, 8, lo=-127, hi=127)
    w_scales = RNG.uniform(0.005, 0.02, 12).astype(np.float32)
    x_scale, out_scale = (0.05, 0.3) if int8 else (0.0005, 0.05)
    options = {"padding": "SAME", "stride_h": 2, "stride_w": 2}
    if not int8:
        options["quantized_bias_type"] = 2 if bias_dtype == np.int32 else 0  # TensorType INT32
    check(
        "TRANSPOSE_CONV",
        [
            In(np.array([1, 32, 32, 12], np.int32), True),
            In(w, True, (w_scales, 0)),
            In(x, q=(x_scale, -3 if int8 else 0)),
            In(ints(bias_dtype, 12, lo=-2000, hi=2000), True, (w_scales * x_scale, 0)),
        ],
        (1, 32, 32, 12),
        x_dtype,
        options,
        version=3,
        out_q=(out_scale, 4 if int8 else 0),
    )


@pytest.mark.litert
@pytest.mark.parametrize(
    "x_shape,kernel,strides,padding,out_hw",
    [
        ((2, 5, 7, 6), (4, 4), (2, 2), "SAME", (10, 14)),  # two batches, 4 taps a phase
        ((1, 6, 5, 3), (2, 3), (3, 2), "VALID", (17, 11)),  # strides differ, a kernel
        ((1, 4, 4, 5), (1, 2), (3, 3), "SAME", (12, 12)),  # smaller than its stride: empty
        ((1, 7, 3, 4), (5, 3), (1, 2), "SAME", (7, 6)),  # phases, padding cut mid-phase
    ],
    ids=["batch", "uneven", "sparse", "padded"],
)
def test_transpose_conv_phases(x_shape, kernel, strides, padding, out_hw) -> None:
    """The int8 TRANSPOSE_CONV scatters its taps into one grid per output phase (row and
    column mod stride) and interleaves them: geometries where phases get several taps, none,
    or start inside the padding, against LiteRT bit for bit."""
    cout = 9  # eight channels requantized like ruy, the last one the reference way
    w = ints(np.int8, cout, *kernel, x_shape[3], lo=-127, hi=127)
    w_scales = RNG.uniform(0.005, 0.02, cout).astype(np.float32)
    check(
        "TRANSPOSE_CONV",
        [
            In(np.array([x_shape[0], *out_hw, cout], np.int32), True),
            In(w, True, (w_scales, 0)),
            In(ints(np.int8, *x_shape, lo=-128, hi=127), q=(0.05, 7)),
            In(ints(np.int32, cout, lo=-2000, hi=2000), True, (w_scales * 0.05, 0)),
        ],
        (x_shape[0], *out_hw, cout),
        np.int8,
        {"padding": padding, "stride_h": strides[0], "stride_w": strides[1]},
        version=3,
        out_q=(0.2, -5),
    )


@pytest.mark.litert
@pytest.mark.parametrize("kind", ["int8", "hybrid"])
@pytest.mark.parametrize(
    "x_shape,kernel,strides,padding,out_hw",
    [
        ((2, 4, 5, 6), (3, 3), (2, 2), "SAME", (8, 10)),  # 4, 2, 2 and 1 taps a phase
        ((1, 5, 4, 3), (5, 4), (3, 2), "VALID", (17, 10)),  # 5 = 3 + 2: 2 and 1 taps
        ((2, 3, 4, 5), (2, 1), (3, 4), "SAME", (9, 16)),  # kernel < stride: tapless phases
        ((1, 6, 6, 4), (3, 3), (2, 2), "SAME", (11, 11)),  # an output shape that crops a row
        ((1, 6, 6, 4), (3, 3), (2, 2), "VALID", (14, 13)),  # a row past the last tap
        ((1, 6, 5, 4), (4, 4), (2, 2), "SAME", (11, 10)),  # the crop starts mid-cell
        ((1, 1, 1, 3), (3, 3), (100, 100), "SAME", (7, 5)),  # a stride past the output
        ((1, 5, 5, 4), (3, 3), (1, 1), "SAME", (5, 5)),  # stride 1: one phase, 3x3 windows
    ],
    ids=["batch", "uneven", "tapless", "crop", "past-taps", "mid-cell", "huge-stride", "stride-1"],
)
def test_transpose_conv_subpixel(kind, x_shape, kernel, strides, padding, out_hw) -> None:
    """The integer TRANSPOSE_CONV sums each output cell's window of input pixels in one GEMM
    for all stride phases (zero weights where a phase has no tap), then interleaves the
    phases and crops: geometries where phases get unequal taps or none, the crop cuts cells
    or keeps a sliver of a huge stride; int8 bit for bit against LiteRT, hybrid within
    float32 rounding (LiteRT's hybrid kernel rounds in another order, before and after)."""
    cout = 9  # eight channels requantized like ruy, the last one the reference way
    w = ints(np.int8, cout, *kernel, x_shape[3], lo=-127, hi=127)
    w_scales = RNG.uniform(0.005, 0.02, cout).astype(np.float32)
    if kind == "int8":
        x = In(ints(np.int8, *x_shape, lo=-128, hi=127), q=(0.05, 7))
        bias = In(ints(np.int32, cout, lo=-2000, hi=2000), True, (w_scales * 0.05, 0))
        out_dtype, out_q = np.int8, (0.2, -5)
    else:
        x = In(RNG.standard_normal(x_shape).astype(np.float32))
        bias = In(RNG.standard_normal(cout).astype(np.float32), True)
        out_dtype, out_q = np.float32, None
    got, want = run_both(
        "TRANSPOSE_CONV",
        [
            In(np.array([x_shape[0], *out_hw, cout], np.int32), True),
            In(w, True, (w_scales, 0)),
            x,
            bias,
        ],
        (x_shape[0], *out_hw, cout),
        out_dtype,
        {"padding": padding, "stride_h": strides[0], "stride_w": strides[1]},
        version=3,
        out_q=out_q,
    )
    if kind == "int8":
        assert np.array_equal(got, want), describe_mismatch(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


@pytest.mark.litert
@pytest.mark.parametrize(
    "x_shape,filters,stride,padding",
    [
        ((1, 112, 112, 16), (96, 1, 1), 1, "SAME"),  # MobileNetV2's widest pointwise conv
        ((1, 225, 225, 3), (32, 3, 3), 2, "SAME"),  # its first conv, padded on one side
        ((1, 19, 19, 288), (384, 3, 3), 2, "VALID"),  # InceptionV3's K = 2592: split K
    ],
    ids=["pointwise", "first-conv", "deep"],
)
def test_conv_int8_at_real_shapes(x_shape, filters, stride, padding) -> None:
    """CONV_2D int8 per-channel at MobileNetV2 / InceptionV3 shapes: the exact float GEMM on
    the raw input (padded with its zero point) and the float64 requantization, bit for bit.
    Full-range weights push InceptionV3's depth past float32's exact bound (two K ranges)."""
    cout, kh, kw = filters
    x = ints(np.int8, *x_shape, lo=-128, hi=127)
    w = ints(np.int8, cout, kh, kw, x_shape[3], lo=-127, hi=127)
    w_scales = RNG.uniform(0.0005, 0.004, cout).astype(np.float32)
    x_scale = 0.0235
    bias = ints(np.int32, cout, lo=-30000, hi=30000)
    out_hw = [(n - (kh if padding == "VALID" else 1)) // stride + 1 for n in x_shape[1:3]]
    check(
        "CONV_2D",
        [
            In(x, q=(x_scale, -128)),
            In(w, True, (w_scales, 0)),
            In(bias, True, (w_scales * x_scale, 0)),
        ],
        (1, *out_hw, cout),
        np.int8,
        conv_opts(padding, stride, act="RELU6"),
        version=3,
        out_q=(0.0235, -128),
    )


@pytest.mark.litert
def test_fc_int8_classifier() -> None:
    """FULLY_CONNECTED int8 1280 -> 1000 (MobileNetV2's classifier), input zero point folded
    into a per-channel constant."""
    x = ints(np.int8, 1, 1280, lo=-128, hi=127)
    w = ints(np.int8, 1000, 1280, lo=-127, hi=127)
    check(
        "FULLY_CONNECTED",
        [
            In(x, q=(0.02, -128)),
            In(w, True, (0.0005, 0)),
            In(ints(np.int32, 1000), True, (1e-5, 0)),
        ],
        (1, 1000),
        np.int8,
        {"fused_activation_function": "NONE"},
        version=4,
        out_q=(0.09, -20),
    )


@pytest.mark.litert
@pytest.mark.parametrize(
    "x_shape,filters,stride",
    [((1, 56, 56, 24), (48, 3, 3), 2), ((2, 9, 9, 512), (16, 3, 3), 1)],
    ids=["padded", "deep-batched"],
)
def test_conv_hybrid_at_real_shapes(x_shape, filters, stride) -> None:
    """Hybrid CONV_2D per-channel (asymmetric input codes, padding with each batch's zero
    point), its GEMM over the int8 codes in float32 (K split past the exact bound, then
    summed in float64) and one rounding of the accumulator to float32, as LiteRT's int32 ->
    float conversion."""
    cout, kh, kw = filters
    x = RNG.standard_normal(x_shape).astype(np.float32)
    x[0] += 0.7  # asymmetric ranges: a nonzero input zero point
    w = ints(np.int8, cout, kh, kw, x_shape[3], lo=-127, hi=127)
    w_scales = RNG.uniform(0.01, 0.02, cout).astype(np.float32)
    out_hw = [(n - 1) // stride + 1 for n in x_shape[1:3]]
    check(
        "CONV_2D",
        [In(x), In(w, True, (w_scales, 0)), In(RNG.standard_normal(cout).astype(np.float32), True)],
        (x_shape[0], *out_hw, cout),
        np.float32,
        conv_opts("SAME", stride, act="RELU"),
        version=5,
    )


# --- LiteRT's float accumulation order ------------------------------------------------------


def _litert_pointwise(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """LiteRT's float CONV_2D of pixels ``x`` (M, K) with weights ``w`` (K, N) as a 1x1 conv."""
    from offload.model.builder import ModelBuilder

    (m, k), n = x.shape, w.shape[1]
    mb = ModelBuilder()
    xi = mb.add_input("x", (1, 1, m, k), np.float32)
    wi = mb.add_constant("w", np.ascontiguousarray(w.T).reshape(n, 1, 1, k))
    bi = mb.add_constant("b", b)
    y = mb.add_tensor("y", (1, 1, m, n), np.float32)
    mb.add_operator("CONV_2D", [xi, wi, bi], [y], conv_opts("VALID"))
    mb.add_output(y)
    ref = litert.Interpreter(
        model_content=mb.build(),
        experimental_op_resolver_type=litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
    )
    ref.allocate_tensors()
    ref.set_tensor(ref.get_input_details()[0]["index"], x.reshape(1, 1, m, k))
    ref.invoke()
    return ref.get_tensor(ref.get_output_details()[0]["index"]).reshape(m, n)


@pytest.mark.litert
@pytest.mark.parametrize(
    "m,k,n",
    [(12544, 27, 32), (4097, 32, 16), (515, 100, 13), (258, 9, 4), (301, 230, 23), (87, 28, 3)],
)
def test_eigen_order_matmul_is_litert_float_conv(m, k, n) -> None:
    """eigen_order_matmul + bias is LiteRT's float CONV_2D bit for bit: packets of 8
    channels, a half packet of 4, the last 1-3 channels, and a last M % 4 pixels each summed
    in their own order."""
    x = RNG.standard_normal((m, k)).astype(np.float32)
    w = (RNG.standard_normal((k, n)) * 0.3).astype(np.float32)
    b = RNG.standard_normal(n).astype(np.float32)
    got = eigen_order_matmul(x, w, np.empty((m, n), np.float32)) + b
    want = _litert_pointwise(x, w, b)
    differ = np.flatnonzero(got != want)
    assert differ.size == 0, f"{differ.size} of {want.size} differ, first at {differ[:5]}"


@pytest.mark.litert
@pytest.mark.parametrize(
    "k,n", [(16, 8), (8, 16), (3, 5), (17, 24), (100, 3), (576, 144), (1000, 100)]
)
def test_eigen_order_gemv_is_litert_single_pixel_conv(k, n) -> None:
    """A single output pixel (MobileNetV3's squeeze-excite 1x1 convolutions on 1x1xC, float
    in a dynamic-range model): Eigen's matrix-vector product, 4-float lanes reduced
    (0 + 2) + (1 + 3), then the k past the last multiple of 4. A plain chain over k, as for
    the GEMM's packets, differs on a quarter of the outputs at K=16."""
    x = RNG.standard_normal((1, k)).astype(np.float32)
    w = (RNG.standard_normal((k, n)) * 0.3).astype(np.float32)
    b = RNG.standard_normal(n).astype(np.float32)
    got = eigen_order_gemv(x[0], w, np.empty(n, np.float32)) + b
    want = _litert_pointwise(x, w, b)[0]
    differ = np.flatnonzero(got != want)
    assert differ.size == 0, f"{differ.size} of {want.size} differ, first at {differ[:5]}"


@pytest.mark.litert
def test_float_conv_before_a_hybrid_conv_is_bit_exact() -> None:
    """In a dynamic-range graph a float CONV_2D (MobileNetV2's 1x1 32 -> 16 at 112x112, too
    small to be quantized) feeds a hybrid CONV_2D that quantizes its input: summed in BLAS's
    order, last-bit differences moved whole input codes and the output by ~1e-3 of its
    range. In LiteRT's order both are bit-exact."""
    from offload.model.builder import ModelBuilder

    x = RNG.standard_normal((1, 112, 112, 32)).astype(np.float32)
    w1 = (RNG.standard_normal((16, 1, 1, 32)) * 0.3).astype(np.float32)
    w2 = ints(np.int8, 96, 1, 1, 16, lo=-127, hi=127)
    w2_scales = RNG.uniform(0.01, 0.02, 96).astype(np.float32)
    mb = ModelBuilder()
    xi = mb.add_input("x", x.shape, np.float32)
    h = mb.add_tensor("h", (1, 112, 112, 16), np.float32)
    y = mb.add_tensor("y", (1, 112, 112, 96), np.float32)
    mb.add_operator(
        "CONV_2D",
        [
            xi,
            mb.add_constant("w1", w1),
            mb.add_constant("b1", RNG.standard_normal(16).astype(np.float32)),
        ],
        [h],
        conv_opts(),
    )
    w2i = mb.add_constant("w2", w2, quantization=(w2_scales, 0))
    b2i = mb.add_constant("b2", RNG.standard_normal(96).astype(np.float32))
    mb.add_operator("CONV_2D", [h, w2i, b2i], [y], conv_opts(), version=5)
    mb.add_output(y)
    content = mb.build()
    ref = litert.Interpreter(
        model_content=content,
        experimental_op_resolver_type=litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
    )
    ref.allocate_tensors()
    ref.set_tensor(ref.get_input_details()[0]["index"], x)
    ref.invoke()
    want = ref.get_tensor(ref.get_output_details()[0]["index"])
    ours = offload.Interpreter(model_content=content, delegates=[])
    ours.allocate_tensors()
    ours.set_tensor(ours.get_input_details()[0]["index"], x)
    ours.invoke()
    got = ours.get_tensor(ours.get_output_details()[0]["index"])
    differ = np.flatnonzero(got != want)
    assert differ.size == 0, (
        f"{differ.size} of {want.size} differ, max {np.abs(got - want).max():.2e}"
    )
