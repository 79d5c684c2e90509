"""The partitioner follows LiteRT's rules: acyclic, largest partitions, limits, determinism."""

from __future__ import annotations

import numpy as np
import pytest

import offload
from offload import Capabilities, Delegate, DelegateKernel, ModelTypeSupport, OpCapability
from offload._graph import Model, Node, Subgraph, Tensor
from offload._plan import make_plan
from offload.errors import DelegateOptionsError, InvalidGraphError, ModelLoadError
from offload.model.builder import ModelBuilder

YES = ModelTypeSupport(support="yes")


def _tensor(i: int, const: bool = False) -> Tensor:
    data = np.zeros(4, np.float32) if const else None
    return Tensor(i, f"t{i}", (4,), (4,), np.dtype(np.float32), "FLOAT32", None, None, data)


def graph(
    edges: list[tuple[str, list[int], list[int]]],
    n_tensors: int,
    inputs: list[int],
    outputs: list[int],
    consts: tuple[int, ...] = (),
) -> Model:
    """A model from (op, input tensors, output tensors) triples."""
    tensors = tuple(_tensor(i, i in consts) for i in range(n_tensors))
    nodes = tuple(
        Node(k, op, 1, tuple(ins), tuple(outs)) for k, (op, ins, outs) in enumerate(edges)
    )
    sg = Subgraph(0, "main", tensors, nodes, tuple(inputs), tuple(outputs))
    return Model(3, "", (sg,), (), {}, "float32", "test", "<test>")


def delegate(ops: tuple[str, ...], name: str = "fake", **options: object) -> Delegate:
    class Fake(Delegate):
        CAPABILITIES = Capabilities(
            ops=tuple(OpCapability(op=o) for o in ops),
            model_types={t: YES for t in ("float32", "float16", "dynamic_range", "int8", "qat")},
        )

        def create_kernel(self) -> DelegateKernel:
            return DelegateKernel()

    Fake.name = name
    return Fake(options)


def test_cycle_through_unsupported_node_splits_partition() -> None:
    """A->B->C and A->C with B unsupported: A and C cannot share a partition."""
    model = graph([("ADD", [0], [1]), ("EXP", [1], [2]), ("ADD", [1, 2], [3])], 4, [0], [3])
    plan = make_plan(model, model.main, [delegate(("ADD",))])
    assert [p.nodes for p in plan.partitions] == [(0,), (2,)]
    assert [(s.kind, s.index) for s in plan.steps] == [("delegate", 0), ("cpu", 1), ("delegate", 1)]


def test_independent_branches_merge_into_one_partition() -> None:
    """Supported nodes with no unsupported node between them form one partition."""
    model = graph(
        [("ADD", [0], [1]), ("EXP", [0], [2]), ("ADD", [1], [3]), ("ADD", [3, 2], [4])], 5, [0], [4]
    )
    plan = make_plan(model, model.main, [delegate(("ADD",))])
    assert [p.nodes for p in plan.partitions] == [(0, 2), (3,)]


def test_partition_boundary_lists_inputs_outputs_and_constants() -> None:
    """Partition inputs come from outside; outputs are read outside or are graph outputs."""
    model = graph(
        [("ADD", [0, 5], [1]), ("ADD", [1], [2]), ("EXP", [1], [3]), ("ADD", [2, 3], [4])],
        6,
        [0],
        [4],
        consts=(5,),
    )
    plan = make_plan(model, model.main, [delegate(("ADD",))])
    first = plan.partitions[0]
    assert first.nodes == (0, 1)
    assert first.inputs == (0,) and first.constants == (5,)
    assert set(first.outputs) == {1, 2}


def test_multi_output_node_outputs_are_all_exposed() -> None:
    """Every output of a multi-output node read outside the partition crosses the boundary."""
    model = graph([("SPLIT", [0], [1, 2]), ("EXP", [1], [3]), ("EXP", [2], [4])], 5, [0], [3, 4])
    plan = make_plan(model, model.main, [delegate(("SPLIT",))])
    assert plan.partitions[0].outputs == (1, 2)


def test_max_delegated_partitions_keeps_the_largest() -> None:
    """With a cap, the largest partitions are kept and the rest fall back with a reason."""
    model = graph(
        [("ADD", [0], [1]), ("EXP", [1], [2]), ("ADD", [2], [3]), ("ADD", [3], [4])], 5, [0], [4]
    )
    plan = make_plan(model, model.main, [delegate(("ADD",), max_delegated_partitions=1)])
    assert [p.nodes for p in plan.partitions] == [(2, 3)]
    assert "max_delegated_partitions=1" in plan.node_reasons["fake"][0]


def test_min_nodes_per_partition_drops_small_partitions() -> None:
    """Partitions below min_nodes_per_partition run on the CPU, each node with the reason."""
    model = graph(
        [("ADD", [0], [1]), ("EXP", [1], [2]), ("ADD", [2], [3]), ("ADD", [3], [4])], 5, [0], [4]
    )
    plan = make_plan(model, model.main, [delegate(("ADD",), min_nodes_per_partition=2)])
    assert [p.nodes for p in plan.partitions] == [(2, 3)]
    assert "min_nodes_per_partition=2" in plan.node_reasons["fake"][0]


@pytest.mark.parametrize("bad", [0, -1])
def test_max_delegated_partitions_rejects_zero_or_less(bad: int) -> None:
    """Zero or fewer partitions is an error naming the delegate and the option."""
    with pytest.raises(DelegateOptionsError, match="'fake'.*max_delegated_partitions"):
        delegate(("ADD",), max_delegated_partitions=bad)


def test_unknown_option_is_rejected_with_valid_names() -> None:
    """An unknown option key names the delegate, the key and the valid options."""
    with pytest.raises(DelegateOptionsError, match="bogus: unknown option.*valid options"):
        delegate(("ADD",), bogus=1)


def test_second_delegate_is_offered_what_the_first_left() -> None:
    """Delegates in priority order: the first takes what it supports, the next gets the rest."""
    model = graph(
        [("ADD", [0], [1]), ("EXP", [1], [2]), ("MUL", [2], [3]), ("ADD", [3], [4])], 5, [0], [4]
    )
    plan = make_plan(
        model, model.main, [delegate(("ADD", "EXP"), "first"), delegate(("MUL", "ADD"), "second")]
    )
    owners = {p.delegate: p.nodes for p in plan.partitions}
    assert plan.partitions[0].delegate == "first" and plan.partitions[0].nodes == (0, 1)
    assert owners["second"] == (2,)
    assert [p.nodes for p in plan.partitions if p.delegate == "first"] == [(0, 1), (3,)]


def test_partitioning_is_deterministic() -> None:
    """The same model and delegates give the same plan every time."""
    edges = [
        ("ADD", [0], [1]),
        ("EXP", [0], [2]),
        ("ADD", [1, 2], [3]),
        ("EXP", [3], [4]),
        ("ADD", [4, 1], [5]),
    ]
    model = graph(edges, 6, [0], [5])
    plans = [make_plan(model, model.main, [delegate(("ADD",))]).to_dict() for _ in range(5)]
    assert all(p == plans[0] for p in plans)


def test_unsupported_model_type_rejects_every_node_once() -> None:
    """A delegate that does not take the model type gets one reason, not one per node."""

    class Int8Only(Delegate):
        name = "int8only"
        CAPABILITIES = Capabilities(
            ops=(OpCapability(op="ADD"),),
            model_types={
                "float32": ModelTypeSupport(support="no", reason="int8 only"),
                **{t: YES for t in ("float16", "dynamic_range", "int8", "qat")},
            },
        )

    model = graph([("ADD", [0], [1]), ("ADD", [1], [2])], 3, [0], [2])
    plan = make_plan(model, model.main, [Int8Only()])
    assert plan.partitions == []
    assert plan.model_rejections == {
        "int8only": "int8only does not support float32 models: int8 only"
    }
    assert "int8only" not in plan.node_reasons


def test_two_nodes_reading_each_others_output_are_a_model_error() -> None:
    """A cycle is a malformed model: a typed error naming both nodes and the tensor."""
    model = graph([("ADD", [0, 2], [1]), ("RELU", [1], [2])], 3, [0], [2])
    with pytest.raises(InvalidGraphError) as info:
        make_plan(model, model.main, [delegate(("ADD",))])
    message = str(info.value)
    assert "ADD v1 (node 0) reads tensor 2 ('t2')" in message
    assert "written only by RELU v1 (node 1), which comes after it" in message
    assert "expected operators in execution order" in message


def test_reading_a_tensor_a_later_node_writes_is_refused() -> None:
    """Out of file order without a cycle is refused too: LiteRT would read an unwritten slot."""
    model = graph([("RELU", [1], [2]), ("EXP", [0], [1])], 3, [0], [2])
    with pytest.raises(InvalidGraphError, match=r"RELU v1 \(node 0\) reads tensor 1 \('t1'\)"):
        make_plan(model, model.main, [])


def test_a_node_reading_its_own_output_is_refused() -> None:
    """A self-loop names the node and says it writes the tensor itself."""
    model = graph([("ADD", [0, 1], [1])], 2, [0], [1])
    with pytest.raises(
        InvalidGraphError, match=r"reads tensor 1 \('t1'\), which is written only by itself"
    ):
        make_plan(model, model.main, [])


def test_a_tensor_written_by_two_nodes_is_refused() -> None:
    """Each tensor has one writer; the error names the tensor and both nodes."""
    model = graph([("RELU", [0], [1]), ("EXP", [0], [1])], 2, [0], [1])
    with pytest.raises(
        InvalidGraphError,
        match=r"tensor 1 \('t1'\) is written by RELU v1 \(node 0\) and again by "
        r"EXP v1 \(node 1\)",
    ):
        make_plan(model, model.main, [])


def test_allocate_tensors_on_a_cyclic_model_file_raises_a_model_error() -> None:
    """Through the Interpreter, a crafted cyclic .tflite fails with a ModelLoadError, not a bug."""
    b = ModelBuilder()
    x = b.add_input("x", shape=(1, 4))
    t1 = b.add_tensor("t1", shape=(1, 4))
    t2 = b.add_tensor("t2", shape=(1, 4))
    b.add_operator("ADD", [x, t2], [t1])
    b.add_operator("RELU", [t1], [t2])
    b.add_output(t2)
    interp = offload.Interpreter(model_content=b.build(), delegates=["dummy"])
    with pytest.raises(ModelLoadError, match=r"ADD v1 \(node 0\) reads tensor 2 \('t2'\)"):
        interp.allocate_tensors()
