"""Elementwise, activation and (de)quantization kernels agree with LiteRT on one-op models."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import pytest

import offload
from offload import load_model
from offload.errors import OpExecutionError, UnsupportedOpError
from offload.ops import kernel_class

litert = pytest.importorskip("ai_edge_litert.interpreter")
builder = pytest.importorskip("offload.model.builder", reason="needs offload.model.builder")

pytestmark = pytest.mark.litert
RNG = np.random.default_rng(7)


class In(NamedTuple):
    """One operator input: a runtime input unless ``const``; ``q`` is (scale, zero_point)."""

    value: np.ndarray
    q: tuple[float, int] | None = None
    const: bool = False


def floats(shape: tuple[int, ...], scale: float = 2.0) -> np.ndarray:
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def ints(shape: tuple[int, ...], dtype: Any = np.int8) -> np.ndarray:
    info = np.iinfo(dtype)
    return RNG.integers(info.min, info.max, shape, endpoint=True).astype(dtype)


def compare(
    op: str,
    ins: list[In],
    out_dtype: Any,
    out_q: tuple[float, int] | None = None,
    options: dict[str, Any] | None = None,
    version: int = 1,
) -> tuple[np.ndarray, np.ndarray]:
    """Build a one-op model, run it in LiteRT and in offload's kernel: (ours, LiteRT's)."""
    b = builder.ModelBuilder()
    idx = []
    for k, i in enumerate(ins):
        if i.const:
            idx.append(b.add_constant(f"c{k}", i.value, quantization=i.q))
        else:
            idx.append(b.add_input(f"x{k}", i.value.shape, i.value.dtype, quantization=i.q))
    y = b.add_tensor("y", (1,), out_dtype, quantization=out_q)
    b.add_operator(op, idx, [y], options or {}, version=version)
    b.add_output(y)
    content = b.build()

    ref = litert.Interpreter(
        model_content=content,
        experimental_op_resolver_type=litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
    )
    ref.allocate_tensors()
    runtime = [i for i in ins if not i.const]
    for detail, i in zip(ref.get_input_details(), runtime):
        ref.set_tensor(detail["index"], i.value)
    ref.invoke()
    want = ref.get_tensor(ref.get_output_details()[0]["index"])

    sg = load_model(model_content=content).main
    node = sg.nodes[0]
    kernel = kernel_class(node)(node, sg)
    got = np.asarray(kernel.run(*[i.value for i in ins]))
    assert got.dtype == want.dtype and got.shape == want.shape
    return got, want


def assert_float(got: np.ndarray, want: np.ndarray, rtol: float = 1e-6) -> None:
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * max(1.0, np.abs(want).max()))


def assert_quantized(got: np.ndarray, want: np.ndarray) -> None:
    diff = np.abs(got.astype(np.int64) - want.astype(np.int64))
    assert diff.max(initial=0) <= 1, f"max diff {diff.max()}"
    assert np.mean(diff == 0) >= 0.99, f"only {np.mean(diff == 0):.4f} exact"


# ---------------------------------------------------------------- float and integer binary ops


@pytest.mark.parametrize(
    "op",
    [
        "ADD",
        "SUB",
        "MUL",
        "DIV",
        "MAXIMUM",
        "MINIMUM",
        "SQUARED_DIFFERENCE",
        "FLOOR_DIV",
        "FLOOR_MOD",
        "POW",
    ],
)
def test_float_binary_broadcasts(op: str) -> None:
    """Float binary ops broadcast numpy-style and compute in float32."""
    a, b = floats((2, 3, 4)), floats((3, 1))
    if op == "POW":
        a = np.abs(a) + np.float32(0.1)
    got, want = compare(op, [In(a), In(b)], np.float32)
    assert_float(got, want)


@pytest.mark.parametrize("act", ["RELU", "RELU6", "RELU_N1_TO_1"])
@pytest.mark.parametrize("op", ["ADD", "SUB", "MUL", "DIV"])
def test_float_fused_activation(op: str, act: str) -> None:
    """ADD/SUB/MUL/DIV clamp their result with the fused activation."""
    got, want = compare(
        op,
        [In(floats((4, 5))), In(floats((4, 5)))],
        np.float32,
        options={"fused_activation_function": act},
    )
    assert_float(got, want)


@pytest.mark.parametrize("op", ["ADD", "SUB", "MUL", "DIV", "FLOOR_DIV", "FLOOR_MOD", "MAXIMUM"])
def test_int32_binary(op: str) -> None:
    """int32 arithmetic: DIV truncates, FLOOR_DIV floors, FLOOR_MOD takes the divisor's sign."""
    a = RNG.integers(-50, 50, (3, 4)).astype(np.int32)
    b = RNG.integers(1, 9, (4,)).astype(np.int32) * RNG.choice([-1, 1], (4,)).astype(np.int32)
    got, want = compare(op, [In(a), In(b)], np.int32)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    "op", ["EQUAL", "NOT_EQUAL", "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL"]
)
def test_float_comparisons(op: str) -> None:
    """Comparisons give bool, with broadcasting."""
    a = np.round(floats((3, 4)))
    got, want = compare(op, [In(a), In(np.round(floats((4,))))], np.bool_)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("op", ["EQUAL", "LESS", "GREATER_EQUAL"])
def test_quantized_comparisons_rescale(op: str) -> None:
    """Quantized comparisons compare real values, each input on its own scale."""
    a, b = ints((64,)), ints((64,))
    got, want = compare(op, [In(a, (0.05, 3)), In(b, (0.1, -7))], np.bool_)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("op", ["LOGICAL_AND", "LOGICAL_OR"])
def test_logical_binary(op: str) -> None:
    """LOGICAL_AND / LOGICAL_OR on bools, with broadcasting."""
    a, b = RNG.random((3, 4)) > 0.5, RNG.random((4,)) > 0.5
    got, want = compare(op, [In(a), In(b)], np.bool_)
    np.testing.assert_array_equal(got, want)


def test_logical_not() -> None:
    """LOGICAL_NOT flips every bool."""
    got, want = compare("LOGICAL_NOT", [In(RNG.random((5,)) > 0.5)], np.bool_)
    np.testing.assert_array_equal(got, want)


def test_select_rank_one_condition_picks_rows() -> None:
    """SELECT with a vector condition selects whole rows of x or y."""
    cond = RNG.random((3,)) > 0.5
    got, want = compare("SELECT", [In(cond), In(floats((3, 4))), In(floats((3, 4)))], np.float32)
    np.testing.assert_array_equal(got, want)


def test_select_v2_broadcasts() -> None:
    """SELECT_V2 broadcasts condition, x and y together."""
    cond = RNG.random((3, 1)) > 0.5
    got, want = compare("SELECT_V2", [In(cond), In(floats((1, 4))), In(floats((3, 4)))], np.float32)
    np.testing.assert_array_equal(got, want)


# ---------------------------------------------------------------------------- float unary ops

UNARY = {
    "RELU": floats,
    "RELU6": lambda s: floats(s, 5),
    "RELU_N1_TO_1": floats,
    "RELU_0_TO_1": floats,
    "ELU": floats,
    "LOGISTIC": floats,
    "TANH": floats,
    "HARD_SWISH": lambda s: floats(s, 4),
    "GELU": floats,
    "EXP": floats,
    "LOG": lambda s: np.abs(floats(s)) + np.float32(0.01),
    "SQRT": lambda s: np.abs(floats(s)),
    "RSQRT": lambda s: np.abs(floats(s)) + np.float32(0.01),
    "SQUARE": floats,
    "ABS": floats,
    "NEG": floats,
    "SIN": floats,
    "COS": floats,
    "FLOOR": floats,
    "CEIL": floats,
    "ROUND": lambda s: np.round(floats(s) * 2) / 2,
}


@pytest.mark.parametrize("op", sorted(UNARY))
def test_float_unary(op: str) -> None:
    """Float unary ops match LiteRT to float32 precision."""
    got, want = compare(op, [In(UNARY[op]((2, 50)))], np.float32)
    assert_float(got, want, rtol=2e-6)


def test_leaky_relu_float() -> None:
    """LEAKY_RELU multiplies negatives by alpha."""
    got, want = compare("LEAKY_RELU", [In(floats((40,)))], np.float32, options={"alpha": 0.3})
    assert_float(got, want)


def test_prelu_float_broadcasts_alpha() -> None:
    """PRELU broadcasts a per-channel alpha."""
    got, want = compare(
        "PRELU", [In(floats((1, 4, 4, 3))), In(floats((1, 1, 3)), const=True)], np.float32
    )
    assert_float(got, want)


@pytest.mark.parametrize("beta", [1.0, 0.5])
def test_softmax_and_log_softmax_float(beta: float) -> None:
    """SOFTMAX (with beta) and LOG_SOFTMAX normalise over the last axis."""
    x = floats((3, 10))
    got, want = compare("SOFTMAX", [In(x)], np.float32, options={"beta": beta})
    assert_float(got, want, rtol=1e-5)
    got, want = compare("LOG_SOFTMAX", [In(x)], np.float32)
    assert_float(got, want, rtol=1e-5)


# ------------------------------------------------------------------------------ quantized ops


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
@pytest.mark.parametrize("op", ["ADD", "SUB", "MUL"])
@pytest.mark.parametrize("act", ["NONE", "RELU"])
def test_quantized_add_sub_mul(op: str, dtype: Any, act: str) -> None:
    """8-bit ADD/SUB/MUL use TFLite's fixed-point rescaling, with broadcasting."""
    zp = 0 if dtype == np.int8 else 128
    a, b = ints((2, 8, 8), dtype), ints((8, 1), dtype)
    got, want = compare(
        op,
        [In(a, (0.04, zp + 3)), In(b, (0.07, zp - 5))],
        dtype,
        (0.09 if op != "MUL" else 0.2, zp - 10),
        options={"fused_activation_function": act},
    )
    assert_quantized(got, want)


@pytest.mark.parametrize("pot", [True, False])
@pytest.mark.parametrize("op", ["ADD", "SUB"])
def test_int16_add_sub(op: str, pot: bool) -> None:
    """int16 ADD/SUB: power-of-two scales shift, general scales use a 15-bit left shift."""
    a, b = ints((64,), np.int16), ints((64,), np.int16)
    scales = (2.0**-10, 2.0**-12, 2.0**-10) if pot else (0.0003, 0.0005, 0.0009)
    got, want = compare(
        op,
        [In(a, (scales[0], 0)), In(b, (scales[1], 0))],
        np.int16,
        (scales[2], 0),
        options={"pot_scale_int16": pot},
        version=3,
    )
    assert_quantized(got, want)


def test_int16_mul() -> None:
    """int16 MUL rescales the product by the combined multiplier."""
    a, b = ints((64,), np.int16), ints((64,), np.int16)
    got, want = compare(
        "MUL", [In(a, (0.001, 0)), In(b, (0.002, 0))], np.int16, (0.03, 0), version=5
    )
    assert_quantized(got, want)


LUT_OPS = {
    # op: (input q, output q)
    "LOGISTIC": ((0.06, 5), (1 / 256, -128)),
    "TANH": ((0.05, -3), (1 / 128, 0)),
    "ELU": ((0.05, 10), (0.04, 40)),
    "GELU": ((0.05, 0), (0.03, -20)),
    "HARD_SWISH": ((0.05, 2), (0.03, -30)),
    "RELU": ((0.05, 2), (0.03, -128)),
    "RELU6": ((0.05, 2), (0.03, -128)),
    "RELU_N1_TO_1": ((0.02, 2), (0.01, 0)),
    "LEAKY_RELU": ((0.05, 2), (0.04, -10)),
    "ABS": ((0.05, 2), (0.03, -128)),
    "EXP": ((0.02, 0), (0.1, -128)),
    "LOG": ((0.05, -128), (0.05, 40)),
    "SQRT": ((0.05, -128), (0.05, -128)),
}


@pytest.mark.parametrize("op", sorted(LUT_OPS))
def test_int8_unary(op: str) -> None:
    """int8 unary ops follow TFLite's tables / fixed-point rules for every input value."""
    x = np.arange(-128, 128, dtype=np.int8)
    qi, qo = LUT_OPS[op]
    options = {"alpha": 0.2} if op == "LEAKY_RELU" else None
    version = 2 if op in ("LOGISTIC", "TANH", "ABS", "EXP", "LOG", "SQRT", "LEAKY_RELU") else 1
    got, want = compare(op, [In(x, qi)], np.int8, qo, options=options, version=version)
    assert_quantized(got, want)


@pytest.mark.parametrize("op", ["LOGISTIC", "TANH", "RELU", "HARD_SWISH", "GELU"])
def test_uint8_unary(op: str) -> None:
    """uint8 unary ops follow the same rules over all 256 inputs."""
    x = np.arange(256, dtype=np.uint8)
    qo = {"LOGISTIC": (1 / 256, 0), "TANH": (1 / 128, 128)}.get(op, (0.03, 100))
    got, want = compare(op, [In(x, (0.05, 120))], np.uint8, qo)
    assert_quantized(got, want)


@pytest.mark.parametrize("op", ["LOGISTIC", "TANH"])
def test_int16_logistic_tanh_refused(op: str) -> None:
    """int16 LOGISTIC/TANH are refused by name rather than approximated."""
    b = builder.ModelBuilder()
    x = b.add_input("x", (4,), np.int16, quantization=(2.0**-12, 0))
    y = b.add_tensor("y", (4,), np.int16, quantization=(2.0**-15, 0))
    b.add_operator(op, [x], [y], version=3)
    b.add_output(y)
    sg = load_model(model_content=b.build()).main
    with pytest.raises(UnsupportedOpError, match="int16"):
        kernel_class(sg.nodes[0])(sg.nodes[0], sg)


def test_int16_gelu_lut() -> None:
    """int16 GELU uses TFLite's interpolated 513-entry table."""
    x = ints((4096,), np.int16)
    got, want = compare("GELU", [In(x, (0.0003, 0))], np.int16, (0.0002, 0), version=3)
    assert_quantized(got, want)


def test_quantized_prelu() -> None:
    """int8 PRELU: negative inputs multiply by the quantized, broadcast alpha."""
    x, alpha = ints((1, 4, 4, 3)), ints((1, 1, 3))
    got, want = compare(
        "PRELU", [In(x, (0.05, 3)), In(alpha, (0.01, 0), const=True)], np.int8, (0.04, -2)
    )
    assert_quantized(got, want)


def test_quantized_squared_difference() -> None:
    """int8 SQUARED_DIFFERENCE squares the difference on a 7-bit shifted common scale."""
    got, want = compare(
        "SQUARED_DIFFERENCE",
        [In(ints((64,)), (0.05, 3)), In(ints((64,)), (0.04, -2))],
        np.int8,
        (0.2, -128),
        version=2,
    )
    assert_quantized(got, want)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
def test_quantized_softmax(dtype: Any) -> None:
    """8-bit SOFTMAX: float exp table, rounded onto the fixed 1/256 output scale."""
    zp = -128 if dtype == np.int8 else 0
    x = ints((4, 20), dtype)
    got, want = compare(
        "SOFTMAX",
        [In(x, (0.1, 0 if dtype == np.int8 else 128))],
        dtype,
        (1 / 256, zp),
        options={"beta": 1.0},
        version=2,
    )
    assert_quantized(got, want)


def test_quantized_log_softmax() -> None:
    """int8 LOG_SOFTMAX: float path on the fixed 16/256 output scale."""
    got, want = compare(
        "LOG_SOFTMAX", [In(ints((4, 20)), (0.1, 0))], np.int8, (16 / 256, 127), version=2
    )
    assert_quantized(got, want)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16])
def test_quantize_float(dtype: Any) -> None:
    """QUANTIZE float -> integer rounds halves away from zero and saturates."""
    x = np.concatenate([floats((200,), 3), np.array([0.25, -0.25, 0.75, 1e6, -1e6], np.float32)])
    zp = {np.int8: 3, np.uint8: 130, np.int16: 0}[dtype]
    got, want = compare(
        "QUANTIZE", [In(x)], dtype, (0.5 if dtype != np.int16 else 0.001, zp), version=3
    )
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("src,dst", [(np.int8, np.uint8), (np.uint8, np.int8), (np.int8, np.int8)])
def test_requantize(src: Any, dst: Any) -> None:
    """QUANTIZE between integer types rescales with a fixed-point multiplier."""
    x = np.arange(np.iinfo(src).min, np.iinfo(src).max + 1).astype(src)
    zp_out = 0 if dst == np.int8 else 128
    got, want = compare(
        "QUANTIZE", [In(x, (0.05, 3 if src == np.int8 else 131))], dst, (0.07, zp_out), version=2
    )
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16])
def test_dequantize(dtype: Any) -> None:
    """DEQUANTIZE computes scale * (q - zero_point) in float32."""
    zp = {np.int8: -3, np.uint8: 128, np.int16: 0}[dtype]
    got, want = compare(
        "DEQUANTIZE",
        [In(ints((301,), dtype), (0.0123, zp))],
        np.float32,
        version=2 if dtype != np.int16 else 4,
    )
    np.testing.assert_array_equal(got, want)


def test_dequantize_float16_constant() -> None:
    """DEQUANTIZE of a float16 constant is converted once and cached."""
    w = floats((3, 4)).astype(np.float16)
    got, want = compare("DEQUANTIZE", [In(w, const=True)], np.float32, version=3)
    np.testing.assert_array_equal(got, want)


# ----------------------------------------------------------------------------- type plumbing


@pytest.mark.parametrize(
    "src,dst",
    [
        (np.float32, np.int32),
        (np.int32, np.float32),
        (np.float32, np.bool_),
        (np.bool_, np.float32),
        (np.int32, np.int64),
        (np.uint8, np.float32),
        (np.int32, np.bool_),
    ],
)
def test_cast(src: Any, dst: Any) -> None:
    """CAST truncates floats toward zero and maps nonzero to true."""
    x = floats((20,), 5).astype(src) if src != np.bool_ else RNG.random((20,)) > 0.5
    got, want = compare("CAST", [In(x)], dst)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dst", [np.int32, np.int16, np.uint8, np.int64, np.int8])
def test_cast_float_to_int_saturates_like_litert(dst: Any) -> None:
    """Out-of-range floats and infinities go to the nearest end of the integer range and NaN
    to its maximum, as LiteRT's CAST does (a bare astype gave INT_MIN or wrapped)."""
    edges = [1e10, -1e10, np.nan, np.inf, -np.inf, 3.7, -3.7, -0.5, 2.0**31, -(2.0**31)]
    edges += [2147483520.0, 40000.0, -40000.0, 300.0, 255.9, 128.0, -129.0, 2.0**63, 1e30]
    x = np.array(edges, np.float32)
    got, want = compare("CAST", [In(x)], dst)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("op", ["DIV", "FLOOR_DIV", "FLOOR_MOD"])
def test_integer_division_by_zero_fails_the_invoke(op: str) -> None:
    """An int32 divisor holding a zero fails the invoke with a typed error naming the node,
    as LiteRT fails it ("Division by 0"); it used to return 0."""
    b = builder.ModelBuilder()
    x = b.add_input("x", (3,), np.int32)
    y = b.add_tensor("y", (3,), np.int32)
    b.add_operator(op, [x, b.add_constant("d", np.array([2, 0, 5], np.int32))], [y])
    b.add_output(y)
    content = b.build()
    ref = litert.Interpreter(model_content=content)
    ref.allocate_tensors()
    ref.set_tensor(ref.get_input_details()[0]["index"], np.array([7, -7, 5], np.int32))
    with pytest.raises(RuntimeError):
        ref.invoke()
    interp = offload.Interpreter(model_content=content, delegates=[])
    interp.allocate_tensors()
    interp.set_tensor(interp.get_input_details()[0]["index"], np.array([7, -7, 5], np.int32))
    with pytest.raises(OpExecutionError, match=rf"{op} v1 \(node 0\).*division by 0"):
        interp.invoke()


def test_complex_abs() -> None:
    """COMPLEX_ABS gives float32 magnitudes."""
    z = (floats((10,)) + 1j * floats((10,))).astype(np.complex64)
    got, want = compare("COMPLEX_ABS", [In(z)], np.float32)
    assert_float(got, want)


def test_zeros_like_and_add_n() -> None:
    """ZEROS_LIKE keeps shape and dtype; ADD_N sums all inputs."""
    x = floats((2, 3))
    got, want = compare("ZEROS_LIKE", [In(x)], np.float32)
    np.testing.assert_array_equal(got, want)
    got, want = compare("ADD_N", [In(x), In(floats((2, 3))), In(floats((2, 3)))], np.float32)
    assert_float(got, want)
