"""Edge values on gpu_opencl (issue 25 fuzz findings): infinities, NaN and the ends of the float
range come out as LiteRT's kernels give them (the CPU reference follows those kernels, so it is
the oracle here), and quantized MAXIMUM / MINIMUM copy raw codes or stay on the CPU."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

import offload
from offload.model import ModelBuilder
from offload_gpu_opencl._lower import lower

F = np.float32
F32_MAX = np.finfo(F).max
# Every pair of these meets in the binary tests: overflow (3e38 + 3e38), inf - inf, inf * 0,
# NaN, signed zeros, a subnormal and ordinary numbers.
EDGES = np.array([np.inf, -np.inf, np.nan, 3e38, -3e38, 1e38, -0.0, 0.0, 1.5, -2.5, 1e-40, 7.0], F)
N = EDGES.size


def _run(content: bytes, inputs: Sequence[np.ndarray], family: str | None) -> list[np.ndarray]:
    """Outputs of ``content`` on ``inputs``: on the CPU reference (``family`` None), or with
    every node on gpu_opencl's ``family`` of kernels ("auto", "cpu", "gpu")."""
    delegates = []
    if family is not None:
        delegates = [offload.load_delegate("gpu_opencl", options={"kernel_family": family})]
    interp = offload.Interpreter(
        model_content=content, delegates=delegates, allow_cpu_fallback=family is None
    )
    interp.allocate_tensors()
    if delegates:
        assert [p.delegate for p in interp.plan().partitions] == ["gpu_opencl"]
    for detail, value in zip(interp.get_input_details(), inputs):
        interp.set_tensor(detail["index"], value)
    with np.errstate(all="ignore"):
        interp.invoke()
    return [interp.get_tensor(d["index"]) for d in interp.get_output_details()]


def _same_as_reference(
    content: bytes, inputs: Sequence[np.ndarray], rtol: float = 0.0, family: str = "auto"
) -> np.ndarray:
    """gpu_opencl's single output, asserted equal to the CPU reference's: NaN where it has
    NaN, the same infinities, the same numbers (within ``rtol``: OpenCL's tanh is not numpy's
    to the last bit, and a product may add in another order)."""
    (got,) = _run(content, inputs, family)
    (want,) = _run(content, inputs, None)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=0, equal_nan=True)
    return got


def _fused_kernels(content: bytes) -> list[str]:
    """The kernels gpu_opencl launches for ``content``, all of it one partition."""
    interp = offload.Interpreter(
        model_content=content, delegates=["gpu_opencl"], allow_cpu_fallback=False
    )
    interp.allocate_tensors()
    (partition,) = interp.plan().partitions
    return [launch.kernel for launch in lower(interp.model.main, partition).launches]


# Both kernel families: the CPU one's register-blocked epilogue8 and the GPU one's tiled
# epilogue1 (PoCL runs either).
FAMILIES = ["cpu", "gpu"]


def _binary(op: str, b_shape: tuple[int, ...], activation: str) -> bytes:
    b = ModelBuilder()
    x = b.add_input("a", (N, N))
    other = b.add_input("b", b_shape)
    y = b.add_tensor("y", (N, N))
    options = {"fused_activation_function": activation} if op in ("ADD", "SUB", "MUL") else None
    b.add_operator(op, [x, other], [y], options)
    b.add_output(y)
    return b.build()


def _pairs(b_shape: tuple[int, ...]) -> list[np.ndarray]:
    """Inputs (a, b) such that every pair of EDGES meets once: the per-channel operand (N,)
    varies along a row, the (N, 1) one along a column, and ``a`` the other way."""
    if b_shape == (N, 1):
        return [np.tile(EDGES, (N, 1)), EDGES.reshape(N, 1).copy()]
    a = np.repeat(EDGES.reshape(N, 1), N, axis=1)
    return [a, np.tile(EDGES, (N, 1)) if b_shape == (N, N) else EDGES.copy()]


# (N, N): binary8 over the whole tensor; (N,): binary8 per-channel rows; (N, 1): binary.
SHAPES = [(N, N), (N,), (N, 1)]


@pytest.mark.parametrize("b_shape", SHAPES, ids=["same", "per_channel", "broadcast"])
@pytest.mark.parametrize(
    "op, activation",
    [
        ("ADD", "NONE"),
        ("ADD", "RELU"),
        ("ADD", "RELU6"),
        ("ADD", "RELU_N1_TO_1"),
        ("ADD", "TANH"),
        ("SUB", "NONE"),
        ("SUB", "RELU"),
        ("MUL", "NONE"),
        ("MUL", "RELU"),
        ("MAXIMUM", "NONE"),
        ("MINIMUM", "NONE"),
    ],
)
def test_float_binary_edges_match_reference(op: str, activation: str, b_shape: tuple) -> None:
    """ADD, SUB and MUL clamp to [-FLT_MAX, FLT_MAX] (fuzz cases 114 and 1327: inf where LiteRT
    gives FLT_MAX, 0 where it gives NaN); MAXIMUM and MINIMUM pass infinities on."""
    rtol = 1e-6 if activation == "TANH" else 0.0
    got = _same_as_reference(_binary(op, b_shape, activation), _pairs(b_shape), rtol)
    if op in ("ADD", "SUB", "MUL"):
        assert not np.isinf(got).any()
        assert activation not in ("NONE", "RELU") or (got == F32_MAX).any()
    else:
        assert np.isinf(got).any()


@pytest.mark.parametrize("op", ["RELU", "RELU6"])
def test_relu_passes_nan(op: str) -> None:
    """The RELU family keeps NaN (TFLite's max(v, lo) returns v when v is NaN) and
    infinities."""
    b = ModelBuilder()
    x = b.add_input("x", (4, N))
    y = b.add_tensor("y", (4, N))
    b.add_operator(op, [x], [y])
    b.add_output(y)
    got = _same_as_reference(b.build(), [np.tile(EDGES, (4, 1))])
    assert np.isnan(got).sum() == 4


def _conv_residual(activation: str, relu_after: bool) -> bytes:
    """A 1x1 CONV_2D whose output a runtime residual is added to (fused into its epilogue)."""
    rng = np.random.default_rng(0)
    b = ModelBuilder()
    x = b.add_input("x", (1, 4, 3, 5))
    residual = b.add_input("r", (1, 4, 3, N))
    wt = b.add_constant("w", rng.uniform(-1, 1, (N, 1, 1, 5)).astype(F))
    bias = b.add_constant("bias", rng.uniform(-1, 1, N).astype(F))
    c = b.add_tensor("c", (1, 4, 3, N))
    conv = {"padding": "SAME", "stride_h": 1, "stride_w": 1, "fused_activation_function": "NONE"}
    b.add_operator("CONV_2D", [x, wt, bias], [c], conv)
    s = b.add_tensor("s", (1, 4, 3, N))
    b.add_operator("ADD", [c, residual], [s], {"fused_activation_function": activation})
    if relu_after:
        y = b.add_tensor("y", (1, 4, 3, N))
        b.add_operator("RELU", [s], [y])
        s = y
    b.add_output(s)
    return b.build()


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize(
    "activation, relu_after",
    [("NONE", False), ("RELU", False), ("NONE", True), ("RELU6", False)],
    ids=["none", "relu", "relu_op_after", "relu6"],
)
def test_fused_residual_add_clamps(activation: str, relu_after: bool, family: str) -> None:
    """The residual ADD fused into a convolution clamps as the ADD alone does: an infinite
    residual gives +-FLT_MAX, NaN passes; a RELU op after it keeps the clamp."""
    content = _conv_residual(activation, relu_after)
    kernels = _fused_kernels(content)
    assert not {"binary8", "binary", "unary8"} & set(kernels), kernels  # all in the epilogue
    rng = np.random.default_rng(1)
    inputs = [rng.uniform(-1, 1, (1, 4, 3, 5)).astype(F), np.tile(EDGES, (1, 4, 3, 1))]
    # The convolution itself may round differently from the CPU's; the edges may not differ.
    got = _same_as_reference(content, inputs, rtol=1e-5, family=family)
    assert not np.isinf(got).any()
    if activation == "NONE" and not relu_after:
        assert (got == -F32_MAX).any() and (got == F32_MAX).any()


def _quantized_extreme(
    op: str, dtype: type, inputs: list[tuple[float, int]], output: tuple[float, int]
) -> bytes:
    b = ModelBuilder()
    xs = [b.add_input(f"x{i}", (2, 9), dtype, quantization=q) for i, q in enumerate(inputs)]
    y = b.add_tensor("y", (2, 9), dtype, quantization=output)
    b.add_operator(op, xs, [y], version=2)
    b.add_output(y)
    return b.build()


def _codes(dtype: type) -> list[np.ndarray]:
    info = np.iinfo(dtype)
    rng = np.random.default_rng(2)
    return [rng.integers(info.min, info.max, (2, 9), endpoint=True).astype(dtype) for _ in "ab"]


RAW = {"MAXIMUM": np.maximum, "MINIMUM": np.minimum}


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("op", sorted(RAW))
def test_quantized_extreme_shared_quantization_is_raw(op: str, dtype: type) -> None:
    """With one scale and zero point on both inputs and the output (as converters write it),
    gpu_opencl runs quantized MAXIMUM / MINIMUM and gives exactly the raw codes' extreme."""
    q = (0.2098, 152) if dtype == np.uint8 else (0.05, -3)
    inputs = _codes(dtype)
    got = _same_as_reference(_quantized_extreme(op, dtype, [q, q], q), inputs)
    np.testing.assert_array_equal(got, RAW[op](*inputs))


@pytest.mark.parametrize(
    "inputs, output",
    [
        # Fuzz case 834 of op_types: the output scale differs from the inputs' (49 steps off).
        ([(0.2098, 152), (0.2098, 152)], (0.4809, 125)),
        ([(0.2098, 152), (0.1, 152)], (0.2098, 152)),  # the inputs' scales differ
        ([(0.2098, 152), (0.2098, 150)], (0.2098, 152)),  # ... or their zero points
    ],
    ids=["output", "input_scale", "input_zero_point"],
)
@pytest.mark.parametrize("op", sorted(RAW))
def test_quantized_extreme_other_quantization_stays_on_cpu(
    op: str, inputs: list, output: tuple
) -> None:
    """LiteRT copies raw codes even where quantizations differ, which the float view cannot
    reproduce: gpu_opencl declines the node with a reason, and the model's answer is the raw
    codes' extreme."""
    content = _quantized_extreme(op, np.uint8, inputs, output)
    subgraph = offload.load_model(model_content=content).main
    reason = offload.load_delegate("gpu_opencl").is_node_supported(subgraph.nodes[0], subgraph)
    assert reason is not None and "raw codes" in reason, reason
    codes = _codes(np.uint8)
    interp = offload.Interpreter(model_content=content, delegates=["gpu_opencl"])
    interp.allocate_tensors()
    assert not interp.plan().partitions
    for detail, value in zip(interp.get_input_details(), codes):
        interp.set_tensor(detail["index"], value)
    interp.invoke()
    got = interp.get_tensor(interp.get_output_details()[0]["index"])
    np.testing.assert_array_equal(got, RAW[op](*codes))


def _pool(op: str, activation: str) -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", (1, 4, 4, N))
    y = b.add_tensor("y", (1, 2, 2, N))
    options = {"padding": "VALID", "stride_h": 2, "stride_w": 2, "filter_height": 2}
    options |= {"filter_width": 2, "fused_activation_function": activation}
    b.add_operator(op, [x], [y], options)
    b.add_output(y)
    return b.build()


@pytest.mark.parametrize("activation", ["NONE", "RELU", "RELU6"])
@pytest.mark.parametrize("op", ["AVERAGE_POOL_2D", "MAX_POOL_2D"])
def test_pool_edges_match_reference(op: str, activation: str) -> None:
    """LiteRT's float pools clamp to [-FLT_MAX, FLT_MAX] too (op_types case 2752: an average
    whose sum overflowed was inf); MAX_POOL_2D skips NaN taps."""
    # Channel c of pixel (i, j) holds EDGES[(4i + j + c) % N]: every window mixes several.
    index = (np.arange(4)[:, None, None] * 4 + np.arange(4)[None, :, None] + np.arange(N)) % N
    got = _same_as_reference(_pool(op, activation), [EDGES[index][None]], rtol=1e-6)
    assert not np.isinf(got).any()
    assert activation != "NONE" or (got == F32_MAX).any()


def _fully_connected(
    weights: np.ndarray, relu_after: bool, quantization: tuple[float, int] | None = None
) -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", (2, 4))
    w = b.add_constant("w", weights, quantization=quantization)
    y = b.add_tensor("y", (2, 3))
    b.add_operator("FULLY_CONNECTED", [x, w, -1], [y], {"fused_activation_function": "NONE"})
    if relu_after:
        z = b.add_tensor("z", (2, 3))
        b.add_operator("RELU", [y], [z])
        y = z
    b.add_output(y)
    return b.build()


# Row 0 overflows upwards, row 1 downwards (whatever order the matmul adds in).
FC_INPUT = np.array([[3e38, 3e38, 1.0, 2.0], [-3e38, -1e38, -1e38, 5.0]], F)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("relu_after", [False, True], ids=["alone", "relu_op_after"])
def test_fully_connected_clamps(relu_after: bool, family: str) -> None:
    """A float FULLY_CONNECTED clamps as LiteRT's does (an overflow gives +-FLT_MAX), and a
    RELU op fused into its epilogue keeps the clamp."""
    weights = np.array([[1, 1, 1, 1], [0.5, 0.5, 0.5, 0.5], [2, 2, 2, 2]], F)
    content = _fully_connected(weights, relu_after)
    kernels = _fused_kernels(content)
    assert "unary8" not in kernels, kernels  # the RELU runs in the matmul's epilogue
    got = _same_as_reference(content, [FC_INPUT], rtol=1e-6, family=family)
    assert got[0, 0] == F32_MAX and got[1, 0] == (0 if relu_after else -F32_MAX)


def test_hybrid_fully_connected_does_not_clamp() -> None:
    """A hybrid FULLY_CONNECTED (int8 weights, float input) applies its activation alone, as
    LiteRT's and the CPU reference's do: an overflow stays inf."""
    # Every output overflows (the hybrid product of the CPU reference quantizes its input, so
    # finite outputs would differ from gpu_opencl's float product by more than rounding).
    weights = np.array([[100] * 4, [90] * 4, [127] * 4], np.int8)
    content = _fully_connected(weights, False, quantization=(0.01, 0))
    got = _same_as_reference(content, [FC_INPUT], rtol=1e-6)
    np.testing.assert_array_equal(got, [[np.inf] * 3, [-np.inf] * 3])


def test_resize_bilinear_2x_is_pairwise_means() -> None:
    """An exact 2x RESIZE_BILINEAR (neither option set) is TFLite's pairwise means, to the
    bit: an infinite input stays infinite (op_types case 7710: the weighted sum's inf * 0 gave
    NaN)."""
    b = ModelBuilder()
    x = b.add_input("x", (1, 3, 4, N))
    size = b.add_constant("size", np.array([6, 8], np.int32))
    y = b.add_tensor("y", (1, 6, 8, N))
    b.add_operator("RESIZE_BILINEAR", [x, size], [y])
    b.add_output(y)
    index = (np.arange(3)[:, None, None] * 5 + np.arange(4)[None, :, None] + np.arange(N)) % N
    got = _same_as_reference(b.build(), [EDGES[index][None]])
    assert np.isinf(got[0, 0::2, 0::2]).sum() == np.isinf(EDGES[index]).sum()
