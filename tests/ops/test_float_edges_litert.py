"""Edge values the op_types fuzz target found answered differently from LiteRT's builtin
kernels (issue 25): float overflow, NaN and signed zeros, float16 rounding, and scalars (GELU
runs them; LiteRT's LOG_SOFTMAX reads one out of bounds). Outputs are compared bit for bit."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

pytest.importorskip("ai_edge_litert.interpreter")

from _one_op import Operand, build, describe_mismatch, run_both, run_litert  # noqa: E402

import offload  # noqa: E402
from offload.errors import TensorShapeError, UnsupportedOpError  # noqa: E402

pytestmark = pytest.mark.litert

BIG = np.float32(3e38)  # two of them overflow float32
NAN, INF = np.float32(np.nan), np.float32(np.inf)


def _assert_same(got: np.ndarray, want: np.ndarray) -> None:
    """Equal bits, any NaN matching any NaN (LiteRT's NaN payloads are not the point here)."""
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape)
    both_nan = np.isnan(got) & np.isnan(want) if want.dtype.kind == "f" else False
    unsigned = f"u{want.dtype.itemsize}"
    same = (got.view(unsigned) == want.view(unsigned)) | both_nan
    assert same.all(), describe_mismatch(np.where(both_nan, 0, got), np.where(both_nan, 0, want))


@pytest.mark.parametrize("activation", ["NONE", "RELU", "RELU_N1_TO_1"])
def test_float_fully_connected_clamps_to_flt_max(activation: str) -> None:
    """Float FULLY_CONNECTED clamps to [lowest, max] in its GEMM: a row that overflows gives
    +-FLT_MAX, not inf; inf inputs do too; NaN passes through."""
    x = np.array(
        [[BIG, BIG, 1, 0], [-BIG, -BIG, 0, 1], [NAN, 1, 1, 1], [INF, 0, 0, 0], [-INF, 0, 0, 0]],
        np.float32,
    )
    w = np.array([[1, 1, 0, 0], [1, 0, 1, 0], [0, 0, 0, 1]], np.float32)
    bias = np.array([0, 1, -BIG], np.float32)
    options = {"fused_activation_function": activation}
    operands = [Operand(x), Operand(w, const=True), Operand(bias, const=True)]
    got, want = run_both("FULLY_CONNECTED", operands, (5, 3), np.float32, options)
    _assert_same(got, want)


@pytest.mark.parametrize("activation", ["TANH", "SIGN_BIT"])
def test_float_fully_connected_refuses_what_litert_refuses(activation: str) -> None:
    """A non-clamp fused activation on float FULLY_CONNECTED fails LiteRT's prepare, and
    offload's allocate with it."""
    x, w = np.ones((2, 4), np.float32), np.ones((3, 4), np.float32)
    content, _ = build(
        "FULLY_CONNECTED",
        [Operand(x), Operand(w, const=True)],
        (2, 3),
        np.float32,
        {"fused_activation_function": activation},
    )
    interp = offload.Interpreter(model_content=content, delegates=[])
    with pytest.raises(UnsupportedOpError, match=f"found {activation}"):
        interp.allocate_tensors()


def _pool_input(nan: bool) -> np.ndarray:
    rows = [
        [BIG, BIG, -BIG, -BIG],
        [INF, 1, NAN if nan else 7, 1],
        [1e38, 1e38, 2, 2],
        [-INF, INF if nan else 3, 0, 0],
    ]
    x = np.array(rows, np.float32).reshape(1, 4, 4, 1)
    return np.concatenate([x, x[:, :, ::-1]], axis=3)


@pytest.mark.parametrize("activation", ["NONE", "RELU", "TANH"])
@pytest.mark.parametrize("op", ["AVERAGE_POOL_2D", "L2_POOL_2D", "MAX_POOL_2D"])
def test_float_pools_clamp_to_flt_max(op: str, activation: str) -> None:
    """Float pools end with a clamp to the activation's range, [lowest, max] unless RELU,
    RELU6 or RELU_N1_TO_1: a sum that overflows and an inf maximum give +-FLT_MAX, and TANH
    is not applied at all (LiteRT keeps only its range)."""
    options = {
        "filter_height": 2,
        "filter_width": 2,
        "stride_h": 2,
        "stride_w": 2,
        "padding": "VALID",
        "fused_activation_function": activation,
    }
    x = _pool_input(nan=op != "MAX_POOL_2D")
    got, want = run_both(op, [Operand(x)], (1, 2, 2, 2), np.float32, options)
    _assert_same(got, want)


@pytest.mark.parametrize("activation", ["NONE", "RELU", "RELU_N1_TO_1"])
def test_float_max_pool_skips_nan(activation: str) -> None:
    """Float MAX_POOL_2D: a NaN tap loses to the running maximum, which starts at lowest, so
    {NaN, 5, 1, 2} gives 5 and an all-NaN window lowest before the activation (fuzz case
    4100); NaN never comes out."""
    options = {
        "filter_height": 2,
        "filter_width": 2,
        "stride_h": 2,
        "stride_w": 2,
        "fused_activation_function": activation,
    }
    # Windows {NaN, 5, 1, 2}, all NaN, all NaN, and NaN with -inf.
    windows = [[NAN, 5, NAN, NAN], [1, 2, NAN, NAN], [NAN, NAN, NAN, NAN], [NAN, NAN, NAN, -INF]]
    third = np.array(windows, np.float32).reshape(1, 4, 4, 1)
    x = np.concatenate([_pool_input(nan=True), third], axis=3)
    got, want = run_both("MAX_POOL_2D", [Operand(x)], (1, 2, 2, 3), np.float32, options)
    _assert_same(got, want)
    assert not np.isnan(got).any()


@pytest.mark.parametrize("padding", ["SAME", "VALID"])
def test_float_max_pool_nan_and_zeros_as_litert(padding: str) -> None:
    """Float MAX_POOL_2D, 3x3 windows at stride 2 over NaN, infinities and signed zeros: NaN
    taps are skipped and of 0.0 and -0.0 the first in window order wins (LiteRT's running
    maximum keeps itself on a tie), with padding taking no part."""
    rng = np.random.default_rng(4100)
    x = rng.choice(np.array([NAN, INF, -INF, 0.0, -0.0, -1.0], np.float32), (2, 9, 8, 5))
    x[1] = NAN
    options = {
        "filter_height": 3,
        "filter_width": 3,
        "stride_h": 2,
        "stride_w": 2,
        "padding": padding,
    }
    out_hw = (5, 4) if padding == "SAME" else (4, 3)
    got, want = run_both("MAX_POOL_2D", [Operand(x)], (2, *out_hw, 5), np.float32, options)
    _assert_same(got, want)


@pytest.mark.parametrize("keep_dims", [False, True])
@pytest.mark.parametrize("axes", [[1], [0], [3], [0, 2], [1, 3], [-1, 0, 2], [0, 1, 2, 3]])
@pytest.mark.parametrize("op", ["REDUCE_MIN", "REDUCE_MAX"])
def test_float_reduce_min_max_fold_nan_as_litert(op: str, axes: list[int], keep_dims: bool) -> None:
    """Float REDUCE_MIN/MAX fold each output's elements in memory order from the first one,
    so a NaN is replaced by the next element (NaN only where it comes last) and of 0.0 and
    -0.0 the later wins."""
    rng = np.random.default_rng(2359)
    x = rng.integers(-3, 4, (2, 3, 4, 5)).astype(np.float32)
    spots = rng.random(x.shape)
    x[spots < 0.15] = np.nan
    x[(spots >= 0.15) & (spots < 0.3)] = -0.0
    x[0, 0, 0, 4] = x[1, 2, 3, 4] = np.nan  # rows whose last element is NaN
    reduced = {a % x.ndim for a in axes}
    if keep_dims:
        shape = tuple(1 if i in reduced else d for i, d in enumerate(x.shape))
    else:
        shape = tuple(d for i, d in enumerate(x.shape) if i not in reduced)
    axis = Operand(np.array(axes, np.int32), const=True)
    got, want = run_both(op, [Operand(x), axis], shape, np.float32, {"keep_dims": keep_dims})
    _assert_same(got, want)


@pytest.mark.parametrize("approximate", [False, True])
def test_float16_gelu_rounds_every_step(approximate: bool) -> None:
    """float16 GELU: every float16 value, the way LiteRT's Eigen::half arithmetic rounds
    each step to half (fuzz case 809 was 3 float16 steps off)."""
    x = np.arange(65536, dtype=np.uint16).view(np.float16)
    x = x[~np.isnan(x)]
    x = np.concatenate([x, np.array([np.nan], np.float16)])
    options: dict[str, Any] = {"approximate": approximate}
    got, want = run_both("GELU", [Operand(x)], x.shape, np.float16, options)
    _assert_same(got, want)


def test_float16_logistic_matches_every_half() -> None:
    """float16 LOGISTIC: every float16 value, as Eigen's generic functor on Eigen::half
    computes it, e^x / (1 + e^x) rounded to half at each step (fuzz case 6440: 1 / (1 + e^-x)
    gave 0 below about -11.1, where e^-x overflows half, and was up to 255 steps off)."""
    x = np.arange(65536, dtype=np.uint16).view(np.float16)
    # An odd length, so some values also go through the element-wise tail after the packets.
    x = np.concatenate([x, np.array([-11.5, -17.25, 4.883e-4], np.float16)])
    got, want = run_both("LOGISTIC", [Operand(x)], x.shape, np.float16)
    _assert_same(got, want)


@pytest.mark.parametrize(
    "dtype, q",
    [(np.float32, None), (np.float16, None), (np.uint8, (0.1, 128)), (np.int16, (0.01, 0))],
)
def test_scalar_gelu_runs_as_litert(dtype: Any, q: Any) -> None:
    """A rank-0 GELU runs through the interpreter (an array back, not a numpy scalar, which
    the executor failed on: fuzz cases 2204, 4346) and matches LiteRT."""
    x = np.array(-0.5 if q is None else 120, dtype)
    content, feeds = build("GELU", [Operand(x, q=q)], (), dtype, {}, out_q=q)
    interp = offload.Interpreter(model_content=content, delegates=[])
    interp.allocate_tensors()
    interp.set_tensor(interp.get_input_details()[0]["index"], x)
    interp.invoke()
    got = interp.get_tensor(interp.get_output_details()[0]["index"])
    _assert_same(np.asarray(got), np.asarray(run_litert(content, feeds)))


@pytest.mark.parametrize(
    "op, dtype, q, out_q",
    [
        ("LOG_SOFTMAX", np.float32, None, None),
        ("LOG_SOFTMAX", np.int8, (0.1, 0), (16 / 256, 127)),
        ("LOG_SOFTMAX", np.uint8, (0.1, 0), (16 / 256, 255)),
        ("SOFTMAX", np.float32, None, None),
        ("SOFTMAX", np.int8, (0.1, 0), (1 / 256, -128)),
    ],
)
def test_scalar_softmax_is_refused_at_allocate(op: str, dtype: Any, q: Any, out_q: Any) -> None:
    """A scalar has no last axis: LiteRT's LOG_SOFTMAX reads one out of bounds (garbage for
    float, a crash for int8/uint8: fuzz cases 397, 986, 1505) and its SOFTMAX refuses at
    prepare, so offload refuses both at allocate. LiteRT is not run: it may crash."""
    x = np.array(3, dtype)
    options = {"beta": 1.0} if op == "SOFTMAX" else {}
    content, _ = build(op, [Operand(x, q=q)], (), dtype, options, out_q=out_q)
    interp = offload.Interpreter(model_content=content, delegates=[])
    with pytest.raises(TensorShapeError, match="rank >= 1"):
        interp.allocate_tensors()


def test_log_softmax_keeps_vectors_of_one() -> None:
    """Rank 1 of length 1 is LiteRT's smallest LOG_SOFTMAX input: its answer is 0."""
    x = np.array([math.pi], np.float32)
    got, want = run_both("LOG_SOFTMAX", [Operand(x)], (1,), np.float32)
    _assert_same(got, want)


def test_float_add_n_clamps_every_partial_sum() -> None:
    """ADD_N clamps after each addition: 3e38 + 3e38 - 3e38 is FLT_MAX - 3e38, not inf; an
    infinite summand clamps too; NaN passes through."""
    a = np.array([BIG, NAN, 1, -BIG], np.float32)
    b = np.array([BIG, 1, INF, -BIG], np.float32)
    c = np.array([-BIG, 2, -INF, 1], np.float32)
    got, want = run_both("ADD_N", [Operand(a), Operand(b), Operand(c)], (4,), np.float32)
    _assert_same(got, want)
