"""Float kernels bit for bit against LiteRT's builtin kernels where their arithmetic is
deterministic (issue 23): the C library's expf, logf, sinf, cosf and expm1f (EXP, LOG, SIN,
COS, ELU), Eigen's fast-math tanh (TANH), the order in which MEAN and SUM add, and Eigen's
matrix-vector product for a single-filter CONV_2D and a one-row FULLY_CONNECTED where float
results are quantized again (a QAT graph). In a quantized graph a float that differs in its
last bit can move a code by a whole step downstream, so "within 1e-6" is not enough."""

from __future__ import annotations

import ctypes
import ctypes.util

import numpy as np
import pytest

pytest.importorskip("ai_edge_litert.interpreter")

from _one_op import Operand, describe_mismatch, run_both  # noqa: E402

import offload  # noqa: E402
from offload.model.builder import ModelBuilder  # noqa: E402
from offload.ops import _libm  # noqa: E402

pytestmark = pytest.mark.litert

INF, NAN = np.float32(np.inf), np.float32(np.nan)


def _assert_same(got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape)
    both_nan = np.isnan(got) & np.isnan(want)
    differ = (got.view(np.int32) != want.view(np.int32)) & ~both_nan
    assert not differ.any(), describe_mismatch(got, want)


def _values(shape: tuple[int, ...], seed: int, scale: float, edges: list[float]) -> np.ndarray:
    x = (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)
    x.flat[: len(edges)] = edges
    return x


UNARY = [
    ("EXP", 6.0, [0.0, -0.0, 88.7, 88.8, -103.0, -104.5, -200.0, INF, -INF, NAN, 1e-30]),
    ("LOG", 0.0, [1.0, 0.0, -0.0, -1.0, 1e-45, 1e-38, 3e38, INF, NAN, 0.5]),
    ("SIN", 8.0, [0.0, -0.0, 1e6, -3e5, 1e-30, INF, NAN, 3.1415927]),
    ("COS", 8.0, [0.0, -0.0, 1e6, -3e5, 1e-30, INF, NAN, 3.1415927]),
    ("ELU", 4.0, [0.0, -0.0, -1e-8, -20.0, -100.0, INF, -INF, NAN]),
    ("TANH", 4.0, [0.0, -0.0, 3e-4, -5e-4, 7.9, 7.91, -8.5, 30.0, INF, -INF, NAN]),
]


@pytest.mark.parametrize("op, scale, edges", UNARY, ids=[u[0] for u in UNARY])
@pytest.mark.parametrize("shape", [(1, 32, 32, 37), (1003,), (2, 3)])
def test_float_unary_is_litert_bit_for_bit(op, scale, edges, shape) -> None:
    """Whole tensors, a tail past the last packet of 4, and one shorter than a packet; with
    zeros, infinities, NaN, saturation and the edges of the clamps."""
    x = _values(shape, 31, scale, edges if np.prod(shape) > len(edges) else [])
    if op == "LOG":
        x = np.abs(x) * np.float32(np.exp(np.random.default_rng(3).uniform(-20, 20, shape)))
        x.flat[: min(len(edges), x.size)] = edges[: x.size]
    got, want = run_both(op, [Operand(x)], shape, np.float32)
    _assert_same(got, want)


@pytest.mark.parametrize("name", ["expf", "logf", "sinf", "cosf"])
def test_the_windowed_c_functions_equal_the_c_library_everywhere(name) -> None:
    """The float64 shortcut is taken only where it cannot round otherwise than the C library:
    on 50,000 inputs over a wide range, every result equals the library's, called one by
    one. Needs no LiteRT: this is the rule the kernels rest on."""
    library = ctypes.util.find_library("m")
    if library is None:
        pytest.skip("no C math library to compare with (ctypes.util.find_library('m'))")
    reference = getattr(ctypes.CDLL(library), name)
    reference.argtypes, reference.restype = [ctypes.c_float], ctypes.c_float
    rng = np.random.default_rng(7)
    x = (rng.standard_normal(50_000) * np.exp(rng.uniform(-8, 5, 50_000))).astype(np.float32)
    if name == "logf":
        x = np.abs(x)
    want = np.array([reference(float(v)) for v in x], np.float32)
    _assert_same(getattr(_libm, name)(x), want)


def test_without_a_c_library_the_result_is_correctly_rounded(monkeypatch) -> None:
    """Nothing to ask (no C library found): the float64 value rounded once, within one ULP of
    LiteRT's and equal to it away from rounding midpoints."""
    monkeypatch.setattr(_libm, "_c_function", lambda *name_and_arity: None)
    x = _values((4096,), 5, 6.0, [])
    got, want = run_both("EXP", [Operand(x)], x.shape, np.float32)
    steps = np.abs(got.view(np.int32).astype(np.int64) - want.view(np.int32))
    assert steps.max() <= 1
    assert np.array_equal(got, np.exp(x.astype(np.float64)).astype(np.float32))


REDUCTIONS = [
    ((1, 14, 14, 37), [1, 2]),
    ((1, 14, 14, 37), [3]),
    ((1, 14, 14, 37), [2, 3]),
    ((1, 14, 14, 37), [0, 3]),
    ((1, 14, 14, 37), [1, 2, 3]),
    ((1, 14, 14, 37), [0, 1, 2, 3]),
    ((2, 14, 14, 37), [1, 2, 3]),
    ((1, 14, 14, 37), [1, 3]),
    ((3, 14, 37), [0, 1]),
    ((3, 14, 37), [0, 2]),
    ((3, 37, 1), [1]),
    ((5, 37), [-1]),
    ((1, 1, 1, 1003), [3]),
]


@pytest.mark.parametrize("op", ["MEAN", "SUM"])
@pytest.mark.parametrize("keep_dims", [False, True])
@pytest.mark.parametrize("shape, axes", REDUCTIONS, ids=[f"{s}-{a}" for s, a in REDUCTIONS])
def test_float_mean_and_sum_add_in_litert_order(op, keep_dims, shape, axes) -> None:
    """SUM adds each output's elements in input order; MEAN takes Eigen's column sums when
    the reduced axes are the innermost (size-1 axes aside), else the same ordered sum."""
    x = _values(shape, 41, 3.0, [])
    resolved = sorted(a % len(shape) for a in axes)
    out = tuple(
        1 if i in resolved else d for i, d in enumerate(shape) if keep_dims or i not in resolved
    )
    operands = [Operand(x), Operand(np.array(axes, np.int32), const=True)]
    got, want = run_both(op, operands, out, np.float32, {"keep_dims": keep_dims})
    _assert_same(got, want)


def _requantized(
    op: str, x: np.ndarray, weights: np.ndarray, bias: np.ndarray, out_shape, options: dict
) -> bytes:
    """``op`` in float, its output also fed to a QUANTIZE: the QAT pattern in which the float
    result's last bit decides codes."""
    b = ModelBuilder()
    xi = b.add_input("x", x.shape, np.float32)
    wi = b.add_constant("w", weights)
    bi = b.add_constant("b", bias)
    y = b.add_tensor("y", out_shape, np.float32)
    q = b.add_tensor("q", out_shape, np.int8, quantization=(0.05, 3))
    b.add_operator(op, [xi, wi, bi], [y], options)
    b.add_operator("QUANTIZE", [y], [q], {})
    b.add_output(y)
    b.add_output(q)
    return b.build()


def _both(content: bytes, x: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray]]:
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    runs = []
    for interp in (
        offload.Interpreter(model_content=content, delegates=[]),
        Interpreter(
            model_content=content,
            experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
            num_threads=1,
        ),
    ):
        interp.allocate_tensors()
        interp.set_tensor(interp.get_input_details()[0]["index"], x)
        interp.invoke()
        runs.append([interp.get_tensor(d["index"]) for d in interp.get_output_details()])
    return runs[0], runs[1]


@pytest.mark.parametrize(
    "cin, kernel, size", [(1, 3, 13), (8, 3, 12), (3, 3, 9), (32, 1, 9), (128, 3, 6)]
)
def test_a_single_filter_conv_in_a_qat_graph_is_litert_bit_for_bit(cin, kernel, size) -> None:
    """One output channel: Eigen's matrix-vector product per pixel (4-float lanes, reduced
    (0 + 2) + (1 + 3), then the leftover depth), bias after; depths 9 to 1152."""
    rng = np.random.default_rng(cin)
    x = (rng.standard_normal((1, size, size, cin)) * 3).astype(np.float32)
    w = (rng.standard_normal((1, kernel, kernel, cin)) * 0.5).astype(np.float32)
    bias = np.array([0.1], np.float32)
    options = {"padding": 0, "stride_w": 1, "stride_h": 1}
    content = _requantized("CONV_2D", x, w, bias, (1, size, size, 1), options)
    ours, theirs = _both(content, x)
    _assert_same(ours[0], theirs[0])
    np.testing.assert_array_equal(ours[1], theirs[1])


@pytest.mark.parametrize("depth, units", [(1280, 1000), (64, 37), (3, 3), (1001, 10)])
def test_a_one_row_fully_connected_in_a_qat_graph_is_litert_bit_for_bit(depth, units) -> None:
    """One row: Eigen's matrix-vector product; the classifier heads included."""
    rng = np.random.default_rng(depth)
    x = (rng.standard_normal((1, depth)) * 2).astype(np.float32)
    w = (rng.standard_normal((units, depth)) * 0.1).astype(np.float32)
    bias = (rng.standard_normal(units) * 0.1).astype(np.float32)
    content = _requantized("FULLY_CONNECTED", x, w, bias, (1, units), {})
    ours, theirs = _both(content, x)
    _assert_same(ours[0], theirs[0])
    np.testing.assert_array_equal(ours[1], theirs[1])


@pytest.mark.parametrize(
    "per_channel, bias, stride, kernel, padding",
    [
        (False, True, 2, 3, 0),
        (True, True, 2, 4, 0),
        (True, False, 1, 3, 1),
        (False, False, 3, 2, 1),
    ],
)
def test_hybrid_transpose_conv_adds_each_product_in_litert_order(
    per_channel, bias, stride, kernel, padding
) -> None:
    """Float input, int8 filter: LiteRT's reference loop, every product scaled to float and
    added in turn (there is no GEMM), the bias after. Per-tensor and per-channel scales,
    SAME and VALID padding."""
    rng = np.random.default_rng(kernel * 10 + stride)
    n, size, cin, cout = 2, 7, 12, 6
    x = (rng.standard_normal((n, size, size, cin)) * 2).astype(np.float32)
    codes = rng.integers(-127, 128, (cout, kernel, kernel, cin)).astype(np.int8)
    scale = rng.uniform(1e-3, 1e-2, cout if per_channel else 1).astype(np.float32)
    out_size = size * stride if padding == 0 else (size - 1) * stride + kernel
    operands = [
        Operand(np.array([n, out_size, out_size, cout], np.int32), const=True),
        Operand(codes, const=True, q=(scale, np.zeros(scale.size, np.int64))),
        Operand(x),
    ]
    if bias:
        operands.append(Operand((rng.standard_normal(cout) * 0.1).astype(np.float32), const=True))
    options = {"padding": padding, "stride_w": stride, "stride_h": stride}
    got, want = run_both(
        "TRANSPOSE_CONV",
        operands,
        (n, out_size, out_size, cout),
        np.float32,
        options,
        version=3 if bias else 2,
    )
    _assert_same(got, want)


@pytest.mark.parametrize("approximate", [False, True])
@pytest.mark.parametrize("shape", [(1, 32, 32, 37), (1003,)])
def test_float_gelu_is_eigens(approximate, shape) -> None:
    """float32 GELU is an Eigen expression in LiteRT: Eigen's erfc (exact form) or its cube
    and tanh (approximation), packet tails included."""
    x = _values(shape, 51, 3.0, [0.0, -0.0, 12.0, -12.0, 1.0, -1.0, INF, -INF, NAN])
    got, want = run_both("GELU", [Operand(x)], shape, np.float32, {"approximate": approximate})
    _assert_same(got, want)


@pytest.mark.parametrize("approximate", [False, True])
@pytest.mark.parametrize("dtype, scale, zero", [(np.int8, 0.05, -3), (np.int16, 0.001, 0)])
def test_quantized_gelu_tabulates_the_c_library_functions(approximate, dtype, scale, zero) -> None:
    """The quantized GELU's table is LiteRT's scalar GeluTransform: erfcf or tanhf."""
    info = np.iinfo(dtype)
    x = np.arange(info.min, info.max + 1, dtype=dtype)
    q = (np.array([scale], np.float32), np.array([zero], np.int64))
    got, want = run_both(
        "GELU",
        [Operand(x, q=q)],
        x.shape,
        dtype,
        {"approximate": approximate},
        out_q=(np.array([scale * 0.9], np.float32), np.array([zero], np.int64)),
    )
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("shape", [(4, 37), (8, 9), (6, 3), (3, 1000), (2, 7, 9)])
def test_float_log_softmax_is_litert_bit_for_bit(shape) -> None:
    """Per row, Eigen's exp and sum with packets from the row's first element (the
    expression has no known alignment), then logf; rows shorter than a packet included."""
    x = _values(shape, 61, 3.0, [])
    got, want = run_both("LOG_SOFTMAX", [Operand(x)], shape, np.float32)
    _assert_same(got, want)


@pytest.mark.parametrize("shape", [(1, 14, 14, 37), (3, 1000), (5, 3)])
def test_float_l2_normalization_adds_squares_in_order(shape) -> None:
    """LiteRT's loop: each vector's squares added one after another, sqrt, then a divide."""
    x = _values(shape, 71, 3.0, [])
    got, want = run_both("L2_NORMALIZATION", [Operand(x)], shape, np.float32)
    _assert_same(got, want)


def test_float_pow_is_the_c_librarys_powf() -> None:
    """POW calls std::pow: the C library's powf, broadcast, with zeros, negatives and
    infinities among the bases and exponents."""
    rng = np.random.default_rng(81)
    base = (np.abs(rng.standard_normal((1, 12, 12, 19))) * 3).astype(np.float32)
    base.flat[:8] = [0.0, -0.0, -2.0, INF, 1.0, NAN, 1e-30, 3e30]
    exponent = (rng.standard_normal((1, 1, 1, 19)) * 2).astype(np.float32)
    exponent.flat[:4] = [0.0, -1.0, 2.0, 0.5]
    got, want = run_both(
        "POW", [Operand(base), Operand(exponent, const=True)], base.shape, np.float32
    )
    _assert_same(got, want)


def test_the_windowed_powf_equals_the_c_library_everywhere() -> None:
    library = ctypes.util.find_library("m")
    if library is None:
        pytest.skip("no C math library to compare with (ctypes.util.find_library('m'))")
    reference = ctypes.CDLL(library).powf
    reference.argtypes, reference.restype = [ctypes.c_float, ctypes.c_float], ctypes.c_float
    rng = np.random.default_rng(82)
    a = np.abs(rng.standard_normal(20_000) * np.exp(rng.uniform(-5, 5, 20_000))).astype(np.float32)
    b = (rng.standard_normal(20_000) * 4).astype(np.float32)
    want = np.array([reference(float(x), float(y)) for x, y in zip(a, b)], np.float32)
    _assert_same(_libm.powf(a, b), want)


@pytest.mark.parametrize(
    "cin, cout, kernel", [(288, 96, 1), (576, 24, 1), (1152, 12, 1), (128, 20, 3), (3000, 16, 1)]
)
def test_a_deep_conv_in_a_qat_graph_sums_eigens_depth_blocks(cin, cout, kernel) -> None:
    """Past one of Eigen's depth blocks (kc, from the L1 data cache), each block is summed
    in LiteRT's order and the blocks added in turn: channel groups of 8, 4 and the rest."""
    rng = np.random.default_rng(cin + cout)
    size = 5
    x = rng.standard_normal((1, size, size, cin)).astype(np.float32)
    w = (rng.standard_normal((cout, kernel, kernel, cin)) * 0.1).astype(np.float32)
    bias = (rng.standard_normal(cout) * 0.1).astype(np.float32)
    options = {"padding": 0, "stride_w": 1, "stride_h": 1}
    content = _requantized("CONV_2D", x, w, bias, (1, size, size, cout), options)
    ours, theirs = _both(content, x)
    _assert_same(ours[0], theirs[0])
    np.testing.assert_array_equal(ours[1], theirs[1])
