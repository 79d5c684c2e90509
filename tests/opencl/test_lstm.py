"""The BASIC LSTM cell (op version 2) on gpu_opencl: delegated, equal to LiteRT over several
invokes with the state carried, and the nodes LiteRT's GPU delegate refuses left on the CPU."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from opencl_support import relative_error

import offload
from offload.model import ModelBuilder

litert = pytest.importorskip("ai_edge_litert.interpreter")

RNG = np.random.default_rng(11)
# Relative to each output's largest magnitude (relative_error), per storage precision.
TOLERANCE = {False: 1e-4, True: 1e-2}


def basic_lstm(
    batch: int,
    n_input: int,
    n_output: int,
    *,
    state_inputs: bool = False,
    options: dict | None = None,
    runtime_weights: bool = False,
    quantized: bool = False,
    constant_state: bool = False,
    version: int = 2,
) -> bytes:
    """One BASIC LSTM node; its previous activation and state are variable tensors, or model
    inputs with ``state_inputs``. All four outputs are model outputs."""
    b = ModelBuilder()
    total = n_input + n_output
    act_t, state_t = (np.uint8, np.int16) if quantized else (np.float32, np.float32)
    act_q = (1 / 128, 128) if quantized else None
    state_q = (2.0**-11, 0) if quantized else None
    x = b.add_input("x", (batch, n_input), act_t, quantization=act_q)

    def state(name: str, dtype: type, q: tuple | None) -> int:
        if state_inputs:
            return b.add_input(name, (batch, n_output), dtype, quantization=q)
        return b.add_tensor(name, (batch, n_output), dtype, quantization=q, is_variable=True)

    h = state("prev_activ", act_t, act_q)
    if constant_state:
        c = b.add_constant("prev_state", np.zeros((batch, n_output), np.float32))
    else:
        c = state("prev_state", state_t, state_q)
    if quantized:
        w = b.add_constant(
            "w",
            RNG.integers(0, 256, (4 * n_output, total)).astype(np.uint8),
            quantization=(0.02, 119),
        )
        bias = b.add_constant(
            "b",
            RNG.integers(-3000, 3000, 4 * n_output).astype(np.int32),
            quantization=(0.02 / 128, 0),
        )
    elif runtime_weights:
        w = b.add_input("w", (4 * n_output, total))
        bias = b.add_constant("b", RNG.standard_normal(4 * n_output).astype(np.float32) * 0.3)
    else:
        w = b.add_constant("w", RNG.standard_normal((4 * n_output, total)).astype(np.float32) * 0.5)
        bias = b.add_constant("b", RNG.standard_normal(4 * n_output).astype(np.float32) * 0.3)
    outs = [
        b.add_tensor("activ_out", (batch, n_output), act_t, quantization=act_q),
        b.add_tensor("state_out", (batch, n_output), state_t, quantization=state_q),
        b.add_tensor("concat_temp", (batch, total), act_t, quantization=act_q),
        b.add_tensor(
            "activ_temp",
            (batch, 4 * n_output),
            state_t,
            quantization=(2.0**-12, 0) if quantized else None,
        ),
    ]
    opts = {
        "fused_activation_function": "TANH",
        "cell_clip": 0.0,
        "proj_clip": 0.0,
        "kernel_type": "BASIC",
        **(options or {}),
    }
    b.add_operator("LSTM", [x, h, w, bias, c], outs, opts, version=version)
    for o in outs:
        b.add_output(o)
    return b.build()


def reference(content: bytes):
    interp = litert.Interpreter(
        model_content=content,
        experimental_op_resolver_type=litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
    )
    interp.allocate_tensors()
    return interp


def on_gpu(content: bytes, precision_loss: bool = False) -> offload.Interpreter:
    delegate = offload.load_delegate(
        "gpu_opencl", options={"precision_loss_allowed": precision_loss}
    )
    interp = offload.Interpreter(
        model_content=content, delegates=[delegate], allow_cpu_fallback=False
    )
    interp.allocate_tensors()
    return interp


SHAPES = {"batch-1": (1, 3, 4), "batch-3": (3, 5, 7), "wide": (2, 16, 24), "odd": (5, 9, 13)}


@pytest.mark.litert
@pytest.mark.parametrize("precision_loss", [False, True], ids=["float32", "half"])
@pytest.mark.parametrize("state_inputs", [False, True], ids=["variables", "fed-back"])
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_basic_lstm_matches_litert_over_invokes(
    shape: str, state_inputs: bool, precision_loss: bool
) -> None:
    """The BASIC LSTM is one gpu_opencl partition and its four outputs stay within 1e-4
    (float32) / 1e-2 (half storage) of LiteRT over four invokes, the state carried in the
    variable tensors or fed back through the state inputs, which the cell also updates."""
    content = basic_lstm(*SHAPES[shape], state_inputs=state_inputs)
    ours = on_gpu(content, precision_loss)
    plan = ours.plan()
    assert plan.nodes_of("gpu_opencl") == [0], plan.node_reasons
    ref = reference(content)
    inputs, outputs = ref.get_input_details(), ref.get_output_details()
    feeds = {d["index"]: RNG.uniform(-1, 1, d["shape"]).astype(np.float32) for d in inputs}
    tolerance = TOLERANCE[precision_loss]
    for step in range(4):
        feeds[inputs[0]["index"]] = RNG.uniform(-1, 1, inputs[0]["shape"]).astype(np.float32)
        for interp in (ref, ours):
            for index, value in feeds.items():
                interp.set_tensor(index, value)
            interp.invoke()
        for d in outputs:
            want, got = ref.get_tensor(d["index"]), ours.get_tensor(d["index"])
            assert got.shape == want.shape and got.dtype == want.dtype
            rel = relative_error(got, want)
            assert rel <= tolerance, f"step {step}, {d['name']}: {rel:.3e}\n{got}\n{want}"
        if state_inputs:
            # The cell writes its new activation and state into its inputs, as LiteRT does.
            for d in inputs[1:]:
                rel = relative_error(ours.get_tensor(d["index"]), ref.get_tensor(d["index"]))
                assert rel <= tolerance, f"step {step}, input {d['name']}: {rel:.3e}"
            feeds[inputs[1]["index"]] = ref.get_tensor(outputs[0]["index"])
            feeds[inputs[2]["index"]] = ref.get_tensor(outputs[1]["index"])


def lstm_between_dense_layers(batch: int = 3, n_input: int = 6, n_output: int = 10) -> bytes:
    """FULLY_CONNECTED -> BASIC LSTM (variable state) -> FULLY_CONNECTED on its activation:
    the cell inside a partition, its state outputs read by nobody."""
    b = ModelBuilder()
    total = n_input + n_output
    x = b.add_input("x", (batch, 5))
    xi = b.add_tensor("xi", (batch, n_input))
    b.add_operator(
        "FULLY_CONNECTED",
        [x, b.add_constant("w0", RNG.uniform(-1, 1, (n_input, 5)).astype(np.float32)), -1],
        [xi],
        {"fused_activation_function": "RELU"},
    )
    h = b.add_tensor("h", (batch, n_output), is_variable=True)
    c = b.add_tensor("c", (batch, n_output), is_variable=True)
    w = b.add_constant("w", RNG.standard_normal((4 * n_output, total)).astype(np.float32) * 0.5)
    bias = b.add_constant("b", RNG.standard_normal(4 * n_output).astype(np.float32) * 0.3)
    shapes = [(batch, n_output), (batch, n_output), (batch, total), (batch, 4 * n_output)]
    outs = [b.add_tensor(f"o{k}", s) for k, s in enumerate(shapes)]
    options = {"fused_activation_function": "TANH", "kernel_type": "BASIC"}
    b.add_operator("LSTM", [xi, h, w, bias, c], outs, options, version=2)
    y = b.add_tensor("y", (batch, 4))
    w1 = b.add_constant("w1", RNG.uniform(-1, 1, (4, n_output)).astype(np.float32))
    b.add_operator("FULLY_CONNECTED", [outs[0], w1, -1], [y])
    b.add_output(y)
    return b.build()


@pytest.mark.litert
def test_basic_lstm_inside_a_partition_matches_litert() -> None:
    """Between two dense layers, in one partition, the cell keeps its state across invokes."""
    content = lstm_between_dense_layers()
    ours = on_gpu(content)
    assert ours.plan().nodes_of("gpu_opencl") == [0, 1, 2]
    ref = reference(content)
    (x,), (y,) = ref.get_input_details(), ref.get_output_details()
    for step in range(4):
        value = RNG.uniform(-1, 1, x["shape"]).astype(np.float32)
        for interp in (ref, ours):
            interp.set_tensor(x["index"], value)
            interp.invoke()
        rel = relative_error(ours.get_tensor(y["index"]), ref.get_tensor(y["index"]))
        assert rel <= TOLERANCE[False], f"step {step}: {rel:.3e}"


def test_basic_lstm_state_resets_with_the_variables() -> None:
    """reset_all_variables restarts the cell: the first step repeats exactly."""
    content = basic_lstm(2, 3, 4)
    interp = on_gpu(content)
    x = RNG.uniform(-1, 1, (2, 3)).astype(np.float32)
    index = interp.get_input_details()[0]["index"]
    out = interp.get_output_details()[0]["index"]
    interp.set_tensor(index, x)
    interp.invoke()
    first = interp.get_tensor(out).copy()
    interp.invoke()
    assert not np.array_equal(interp.get_tensor(out), first)
    interp.reset_all_variables()
    interp.invoke()
    np.testing.assert_array_equal(interp.get_tensor(out), first)


@pytest.mark.parametrize(
    "kwargs,reason",
    [
        ({"options": {"fused_activation_function": "RELU"}}, "RELU is not among ['TANH']"),
        ({"options": {"cell_clip": 0.5}}, "cell_clip must be 0.0, found 0.5"),
        ({"options": {"proj_clip": 0.25}}, "proj_clip must be 0.0, found 0.25"),
        ({"runtime_weights": True}, "weights (input 2) must be constant, found a runtime tensor"),
        ({"quantized": True}, "input 0 is uint8, supported ['float32']"),
        ({"constant_state": True}, "previous state (input 4) must be a runtime tensor"),
        ({"options": {"kernel_type": "FULL"}}, "kernel_type must be 'BASIC', found 'FULL'"),
        ({"version": 1}, "op version 1 is outside the supported range 2-2"),
    ],
    ids=[
        "relu",
        "cell-clip",
        "proj-clip",
        "runtime-weights",
        "uint8",
        "constant-state",
        "full-kernel",
        "version-1",
    ],
)
def test_unsupported_basic_lstm_stays_on_cpu(kwargs: dict, reason: str) -> None:
    """A BASIC LSTM outside LiteRT's GPU limits is left to the CPU with a reason naming what
    was expected and what was found."""
    content = basic_lstm(2, 3, 4, **kwargs)
    # Asked of the delegate itself: the core refuses some of these models at planning
    # (a FULL kernel needs 20 inputs) before any delegate is consulted.
    subgraph = offload.load_model(model_content=content).main
    found = offload.load_delegate("gpu_opencl").is_node_supported(subgraph.nodes[0], subgraph)
    assert found is not None and reason in found


def test_lstm_declaration_follows_litert() -> None:
    """LSTM is declared as LiteRT's GPU delegate takes it: op version 2 (BASIC), float32,
    fused TANH, no clipping; with or without enable_quant."""
    for enable_quant in (True, False):
        cap = offload.load_delegate("gpu_opencl", options={"enable_quant": enable_quant})
        lstm = cap.capabilities.op("LSTM")
        assert lstm.versions == (2, 2) and lstm.dtypes == ("float32",)
        assert lstm.fused_activations == ("TANH",)
        assert lstm.options == {"kernel_type": "BASIC", "cell_clip": 0.0, "proj_clip": 0.0}


FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def float16_basic_lstm(batch: int = 2, n_input: int = 3, n_output: int = 4) -> bytes:
    """A BASIC LSTM as a float16 converter writes it: weights and biases float16 constants
    behind DEQUANTIZE, and the previous activation and state DEQUANTIZE outputs of float16
    zeros, which the cell then updates in place (state, not weights)."""
    b = ModelBuilder()
    total = n_input + n_output
    x = b.add_input("x", (batch, n_input))

    def dequantized(name: str, value: np.ndarray) -> int:
        half = b.add_constant(f"{name}_fp16", value.astype(np.float16))
        out = b.add_tensor(name, value.shape)
        b.add_operator("DEQUANTIZE", [half], [out], version=3)
        return out

    h = dequantized("prev_activ", np.zeros((batch, n_output)))
    c = dequantized("prev_state", np.zeros((batch, n_output)))
    w = dequantized("w", RNG.standard_normal((4 * n_output, total)) * 0.5)
    bias = dequantized("b", RNG.standard_normal(4 * n_output) * 0.3)
    shapes = [(batch, n_output), (batch, n_output), (batch, total), (batch, 4 * n_output)]
    outs = [b.add_tensor(f"o{k}", s) for k, s in enumerate(shapes)]
    options = {"fused_activation_function": "TANH", "kernel_type": "BASIC"}
    b.add_operator("LSTM", [x, h, w, bias, c], outs, options, version=2)
    b.add_output(outs[0])
    return b.build()


def steps(interp: offload.Interpreter, x: np.ndarray, count: int) -> list[np.ndarray]:
    """The first output after each of ``count`` invokes on the same input."""
    index, out = interp.get_input_details()[0]["index"], interp.get_output_details()[0]["index"]
    found = []
    for _ in range(count):
        interp.set_tensor(index, x)
        interp.invoke()
        found.append(interp.get_tensor(out).copy())
    return found


def test_float16_basic_lstm_carries_and_resets_its_dequantized_state() -> None:
    """Float16 weights arrive folded, so the cell runs on gpu_opencl, even in strict mode; its
    dequantized state stays with the core (offered to no delegate), carries over between
    invokes as on the CPU reference, and restarts at reset_all_variables."""
    content = float16_basic_lstm()
    ours = offload.Interpreter(
        model_content=content, delegates=["gpu_opencl"], allow_cpu_fallback=False
    )
    cpu = offload.Interpreter(model_content=content, delegates=[])
    for interp in (ours, cpu):
        interp.allocate_tensors()
    lstm = 4  # after the four DEQUANTIZE nodes
    plan = ours.plan()
    assert plan.nodes_of("gpu_opencl") == [lstm], plan.node_reasons
    assert plan.state_init == (0, 1) and plan.fallback_nodes() == []
    assert not {0, 1} & set(plan.node_reasons["gpu_opencl"])
    x = RNG.uniform(-1, 1, (2, 3)).astype(np.float32)
    want, got = steps(cpu, x, 3), steps(ours, x, 3)
    for step, (a, b) in enumerate(zip(got, want)):
        assert relative_error(a, b) <= TOLERANCE[False], f"step {step}: {a}\n{b}"
    assert not np.array_equal(got[0], got[1])
    ours.reset_all_variables()
    np.testing.assert_array_equal(steps(ours, x, 1)[0], got[0])


def test_float16_lstm_fixture_state_resets_with_gpu_opencl() -> None:
    """The float16 LSTM fixture (UNIDIRECTIONAL_SEQUENCE_LSTM on the CPU, its dense layer on
    gpu_opencl): the dequantized states 17 and 29 are never delegated, so the sequence state
    carries over between invokes and restarts at reset_all_variables, as without delegates."""
    path = FIXTURES / "lstm_float16.tflite"
    if not path.exists():
        pytest.skip("the lstm fixtures are not generated")
    ours = offload.Interpreter(model_path=str(path), delegates=["gpu_opencl"])
    cpu = offload.Interpreter(model_path=str(path), delegates=[])
    plan = ours.plan()
    nodes = plan.subgraph.nodes
    delegated = {t for p in plan.partitions for n in p.nodes for t in nodes[n].outputs}
    assert plan.partitions and not {17, 29} & delegated
    for interp in (ours, cpu):
        interp.allocate_tensors()
    shape = ours.get_input_details()[0]["shape"]
    x = RNG.standard_normal(shape).astype(np.float32)
    want, got = steps(cpu, x, 2), steps(ours, x, 2)
    for step, (a, b) in enumerate(zip(got, want)):
        assert relative_error(a, b) <= TOLERANCE[False], f"step {step}"
    assert not np.array_equal(got[0], got[1])
    ours.reset_all_variables()
    np.testing.assert_array_equal(steps(ours, x, 1)[0], got[0])
