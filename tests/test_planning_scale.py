"""Planning scales to tens of thousands of nodes without changing a single placement or step.

Speed itself is measured in benchmarks/plan_scaling.py; these tests pin the algorithm: the
faster planner gives what the straightforward one gave, counts of the work it does stay
linear, and 20,000-node graphs plan and run.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import offload
from offload import Capabilities, Delegate, DelegateKernel, ModelTypeSupport, OpCapability
from offload._arena import ArenaPlan, StepTensors, place, plan_arena
from offload._graph import Model, Node, Subgraph, Tensor
from offload._plan import make_plan
from offload.model.builder import ModelBuilder

# -- the straightforward planner, as it was before issue 11: the oracle ---------------------


def _reference_place(
    lifetimes: Mapping[int, tuple[int, int]], nbytes: Mapping[int, int]
) -> ArenaPlan:
    offsets: dict[int, int] = {}
    size = 0
    for t in sorted(lifetimes, key=lambda t: (-nbytes[t], lifetimes[t][0], t)):
        start, stop = lifetimes[t]
        need = nbytes[t]
        busy = sorted(
            (offsets[o], offsets[o] + nbytes[o])
            for o in offsets
            if lifetimes[o][0] <= stop and start <= lifetimes[o][1]
        )
        candidate = 0
        for lo, hi in busy:
            if candidate + need <= lo:
                break
            candidate = max(candidate, -(-hi // 64) * 64)
        offsets[t] = candidate
        size = max(size, candidate + need)
    return ArenaPlan(offsets, size)


def _reference_plan_arena(
    steps: list[StepTensors], nbytes: Mapping[int, int], keep: set[int]
) -> ArenaPlan:
    last_use: dict[int, int] = {}
    for pos, step in enumerate(steps):
        for t in (*step.inputs, *step.outputs):
            if t >= 0:
                last_use[t] = pos
    roots: dict[int, frozenset[int]] = {}
    first_def: dict[int, int] = {}
    for pos, step in enumerate(steps):
        if step.writes_into:
            for t in step.outputs:
                if t >= 0 and t in nbytes and t not in keep and len(step.outputs) == 1:
                    first_def.setdefault(t, pos)
                    roots[t] = frozenset((t,))
            continue
        shared = frozenset().union(*(roots.get(i, frozenset()) for i in step.inputs if i >= 0))
        for t in step.outputs:
            if t >= 0:
                roots[t] = roots.get(t, frozenset()) | shared
    end = {t: last_use.get(t, first_def[t]) for t in first_def}
    excluded: set[int] = set()
    for t, shared in roots.items():
        for root in shared:
            if root == t:
                continue
            if t in keep:
                excluded.add(root)
            else:
                end[root] = max(end[root], last_use.get(t, end[root]))
    lifetimes = {t: (first_def[t], end[t]) for t in first_def if t not in excluded}
    return _reference_place(lifetimes, nbytes)


# -- same results ---------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 12), st.integers(0, 5), st.sampled_from([32, 64, 100, 256])),
        min_size=1,
        max_size=40,
    )
)
def test_place_matches_the_reference_first_fit(specs: list[tuple[int, int, int]]) -> None:
    """Indexed placement gives the offsets and size of the scan over every placed tensor."""
    lifetimes = {t: (start, start + length) for t, (start, length, _) in enumerate(specs)}
    nbytes = {t: size for t, (_, _, size) in enumerate(specs)}
    assert place(lifetimes, nbytes) == _reference_place(lifetimes, nbytes)


@st.composite
def _step_lists(draw: st.DrawFn) -> tuple[list[StepTensors], dict[int, int], set[int]]:
    """Steps in execution order, each tensor written once: what make_plan produces."""
    inputs = draw(st.integers(1, 3))
    tensors = inputs
    steps: list[StepTensors] = []
    for _ in range(draw(st.integers(1, 25))):
        reads = tuple(draw(st.lists(st.integers(-1, tensors - 1), min_size=1, max_size=3)))
        count = draw(st.sampled_from([1, 1, 1, 2]))
        writes = tuple(range(tensors, tensors + count))
        tensors += count
        steps.append(StepTensors(reads, writes, draw(st.booleans())))
    sizes = st.sampled_from([64, 128, 200])
    nbytes = {t: draw(sizes) for t in range(inputs, tensors) if draw(st.integers(0, 4)) > 0}
    keep = set(range(inputs)) | set(draw(st.lists(st.integers(inputs, tensors - 1), max_size=3)))
    return steps, nbytes, keep


@settings(max_examples=300, deadline=None)
@given(_step_lists())
def test_plan_arena_matches_the_reference(
    case: tuple[list[StepTensors], dict[int, int], set[int]],
) -> None:
    """Lifetimes extended through views in one backward pass equal those of the root sets."""
    steps, nbytes, keep = case
    assert plan_arena(steps, nbytes, keep) == _reference_plan_arena(steps, nbytes, keep)


# -- linear work ----------------------------------------------------------------------------


class _CountingMapping(Mapping[int, tuple[int, int]]):
    def __init__(self, data: dict[int, tuple[int, int]]) -> None:
        self.data = data
        self.reads = 0

    def __getitem__(self, key: int) -> tuple[int, int]:
        self.reads += 1
        return self.data[key]

    def __iter__(self) -> Iterator[int]:
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)


def test_place_looks_only_at_lifetimes_that_overlap() -> None:
    """On a chain, placing each tensor reads a bounded number of lifetimes, not all placed."""
    n = 2000
    lifetimes = _CountingMapping({t: (t, t + 1) for t in range(n)})
    plan = place(lifetimes, {t: 100 for t in range(n)})
    assert plan.size == 128 + 100  # two slots alternate along the chain
    assert lifetimes.reads <= 3 * n  # the scan over placed tensors read about n * n / 2


class _CountingNodes(tuple):
    """A node table that counts full passes over it."""

    scans = 0

    def __iter__(self) -> Iterator[Node]:
        self.scans += 1
        return super().__iter__()


_YES = ModelTypeSupport(support="yes")


class _AddDelegate(Delegate):
    name = "adds"
    CAPABILITIES = Capabilities(
        ops=(OpCapability(op="ADD"),),
        model_types={t: _YES for t in ("float32", "float16", "dynamic_range", "int8", "qat")},
    )

    def create_kernel(self) -> DelegateKernel:
        return DelegateKernel()


def _chain(n: int, ops: tuple[str, ...], nodes_type: type = tuple) -> Model:
    """x -> op -> op -> ... with one (4,) float32 tensor between nodes."""
    tensors = tuple(
        Tensor(i, f"t{i}", (4,), (4,), np.dtype(np.float32), "FLOAT32", None, None, None)
        for i in range(n + 1)
    )
    nodes = nodes_type(Node(k, ops[k % len(ops)], 1, (k,), (k + 1,)) for k in range(n))
    sg = Subgraph(0, "main", tensors, nodes, (0,), (n,))
    return Model(3, "", (sg,), (), {}, "float32", "test", "<test>")


def test_partitioning_scans_the_node_table_a_fixed_number_of_times() -> None:
    """Finishing a partition no longer scans the whole graph: passes do not grow with them."""
    scans = []
    for n in (200, 2000):
        model = _chain(n, ("ADD", "RELU"), _CountingNodes)
        plan = make_plan(model, model.main, [_AddDelegate()])
        assert len(plan.partitions) == n // 2
        scans.append(model.main.nodes.scans)
    assert scans[0] == scans[1]


# -- 20,000 nodes ---------------------------------------------------------------------------


def test_a_wide_graph_of_20k_nodes_plans_in_node_order() -> None:
    """20,000 independent nodes of two kinds: waves and steps come out lowest node first."""
    n = 20000
    tensors = tuple(
        Tensor(i, f"t{i}", (4,), (4,), np.dtype(np.float32), "FLOAT32", None, None, None)
        for i in range(n + 1)
    )
    nodes = tuple(Node(k, ("ADD", "RELU")[k % 2], 1, (0,), (k + 1,)) for k in range(n))
    sg = Subgraph(0, "main", tensors, nodes, (0,), tuple(range(1, n + 1)))
    model = Model(3, "", (sg,), (), {}, "float32", "test", "<test>")
    plan = make_plan(model, sg, [_AddDelegate()])
    assert [p.nodes for p in plan.partitions] == [tuple(range(0, n, 2))]
    assert [(s.kind, s.index) for s in plan.steps] == [("delegate", 0)] + [
        ("cpu", k) for k in range(1, n, 2)
    ]


def test_a_20k_node_chain_plans_and_runs_with_the_dummy_delegate() -> None:
    """An ADD/RELU chain of 20,000 nodes: 10,000 partitions, an arena of two slots, results."""
    n = 20000
    b = ModelBuilder()
    x = b.add_input("x", shape=(1, 8))
    one = b.add_constant("one", np.ones((1, 8), np.float32))
    for k in range(n):
        y = b.add_tensor(f"t{k}", shape=(1, 8))
        b.add_operator("ADD" if k % 2 == 0 else "RELU", [x, one] if k % 2 == 0 else [x], [y])
        x = y
    b.add_output(x)
    interp = offload.Interpreter(model_content=b.build(), delegates=["dummy"])
    interp.allocate_tensors()
    plan = interp.plan()
    assert len(plan.partitions) == n // 2
    assert [s.kind for s in plan.steps[:4]] == ["delegate", "cpu", "delegate", "cpu"]
    # Two slots: a delegate step may return a view of its input, so a RELU output stays
    # reserved until the next RELU has read the partition after it.
    assert interp.memory_report()["arena"] == 64 + 32
    start = np.linspace(-1, 1, 8, dtype=np.float32).reshape(1, 8)
    interp.set_tensor(interp.get_input_details()[0]["index"], start)
    interp.invoke()
    out = interp.get_tensor(interp.get_output_details()[0]["index"])
    np.testing.assert_allclose(out, np.maximum(start + 1, 0) + (n // 2 - 1), rtol=1e-6)
