"""auto's accuracy gate: every candidate is checked on several seeded input families and the
user's own samples, kept only if it agrees on every one, and its worst error is reported; a
classifier's top-1 class must not change."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

import offload
from offload import _auto_measure
from offload._auto_measure import GATE_FAMILIES, AccuracyPolicy, gate_inputs, seeded_inputs
from offload.errors import TensorShapeError, TensorTypeError
from offload.model.builder import ModelBuilder
from tests._auto_fakes import (
    FAST,
    FakeKernel,
    FakeOptions,
    chain_model,
    fake_delegate,
    install,
    slow_reference,
)


class ClippingKernel(FakeKernel):
    """Saturates its inputs at +-1: right on uniform(-1, 1) inputs, wrong on wider ones (an
    engine whose narrow format holds auto's first input set and nothing past it)."""

    limit = 1.0

    def invoke(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        return super().invoke([np.clip(x, -self.limit, self.limit) for x in inputs])


class FarClippingKernel(ClippingKernel):
    """Saturates at +-50: no seeded family reaches it; a user's sample can."""

    limit = 50.0


CLIPPING = fake_delegate("clipping", ClippingKernel)
FAR_CLIPPING = fake_delegate("farclip", FarClippingKernel)


def _rows(interp: offload.Interpreter) -> dict[str, dict]:
    return {c["label"]: c for c in interp.auto_selection["candidates"]}


def test_a_candidate_right_on_one_family_and_wrong_on_another_is_rejected(monkeypatch, auto_cache):
    install(monkeypatch, CLIPPING, FAST)
    slow_reference(monkeypatch)
    interp = offload.Interpreter(model_content=chain_model(), delegates="auto")
    interp.allocate_tensors()
    rows = _rows(interp)
    clipping = rows["clipping"]
    assert clipping["status"] == "inaccurate"
    assert "on input set 'normal(0,1)'" in clipping["reason"]
    by_input = clipping["error_by_input"]
    assert by_input["uniform(-1,1)"]["relative"] == 0.0 and by_input["uniform(0,1)"] == {
        "relative": 0.0
    }
    assert clipping["error"]["relative"] == by_input["normal(0,1)"]["relative"] > 1e-4
    assert rows["fast"]["status"] == "chosen"
    assert list(rows["fast"]["error_by_input"]) == [family.name for family in GATE_FAMILIES]
    gate = interp.auto_selection["gate"]
    assert gate["inputs"] == [family.name for family in GATE_FAMILIES]
    assert gate["statistic"].startswith("worst case")


def test_a_user_sample_that_exposes_an_error_is_honoured(monkeypatch, auto_cache):
    install(monkeypatch, FAR_CLIPPING)
    slow_reference(monkeypatch)
    content = chain_model()
    seeded = offload.Interpreter(model_content=content, delegates="auto")
    seeded.allocate_tensors()
    assert seeded.auto_selection["chosen"] == ["farclip"]

    sample = np.full((1, 16), 100.0, np.float32)
    interp = offload.Interpreter(model_content=content, delegates="auto", auto_inputs=[[sample]])
    interp.allocate_tensors()
    row = _rows(interp)["farclip"]
    assert row["status"] == "inaccurate" and "on input set 'sample 0'" in row["reason"]
    assert interp.auto_selection["chosen"] == ["cpu"]
    assert interp.auto_selection["gate"]["samples"] == 1
    # The samples are part of the key: the decision stored without them is not taken.
    assert interp.auto_selection["from_cache"] is False
    again = offload.Interpreter(model_content=content, delegates="auto", auto_inputs=[[sample]])
    again.allocate_tensors()
    assert again.auto_selection["from_cache"] is True
    assert again.auto_selection["chosen"] == ["cpu"]


def test_samples_by_name_or_as_one_array(monkeypatch, auto_cache):
    install(monkeypatch, FAR_CLIPPING)
    slow_reference(monkeypatch)
    sample = np.full((1, 16), 100.0, np.float32)
    for given in ([{"x": sample}], [sample]):
        interp = offload.Interpreter(
            model_content=chain_model(), delegates="auto", auto_inputs=given, auto_cache_dir=False
        )
        interp.allocate_tensors()
        assert _rows(interp)["farclip"]["status"] == "inaccurate"


@pytest.mark.parametrize(
    ("samples", "error", "words"),
    [
        (np.zeros((1, 16), np.float32), TensorTypeError, "a sequence of samples"),
        ([[np.zeros((1, 8), np.float32)]], TensorShapeError, "expected shape [1, 16]"),
        ([[np.zeros((1, 16), np.float64)]], TensorTypeError, "expected dtype float32"),
        ([[]], TensorTypeError, "has 0 array(s); the model has 1 input(s)"),
        ([{"y": np.zeros((1, 16), np.float32)}], TensorTypeError, "must name the model's"),
        ([3], TensorTypeError, "found int"),
    ],
)
def test_samples_that_do_not_fit_the_inputs_are_typed_errors(samples, error, words, auto_cache):
    interp = offload.Interpreter(model_content=chain_model(), delegates="auto", auto_inputs=samples)
    with pytest.raises(error) as caught:
        interp.allocate_tensors()
    assert words in str(caught.value)


def _quantized_input_model() -> offload.Subgraph:
    b = ModelBuilder()
    quant = (0.05, 3)
    x = b.add_input("x", shape=(1, 64), dtype=np.int8, quantization=quant)
    f = b.add_input("f", shape=(1, 4), dtype=np.float32)
    i = b.add_input("i", shape=(2,), dtype=np.int32)
    xo = b.add_tensor("xo", shape=(1, 64), dtype=np.int8, quantization=quant)
    b.add_operator("RELU", inputs=[x], outputs=[xo])
    fo = b.add_tensor("fo", shape=(1, 4))
    b.add_operator("RELU", inputs=[f], outputs=[fo])
    for t in (xo, fo, i):
        b.add_output(t)
    return offload.load_model(model_content=b.build()).main


def test_gate_families_cover_image_like_normal_wide_and_full_code_ranges():
    sg = _quantized_input_model()
    shapes = [t.shape for t in sg.tensors]
    gate = gate_inputs(sg, shapes)
    names = [g.name for g in gate]
    assert names == [family.name for family in GATE_FAMILIES] + ["full code range"]
    by = {g.name: g.arrays for g in gate}
    for got, want in zip(by["uniform(-1,1)"], seeded_inputs(sg, shapes)):
        np.testing.assert_array_equal(got, want)  # the timed set is the one auto always used
    floats = {name: arrays[1] for name, arrays in by.items()}
    assert floats["uniform(0,1)"].min() >= 0 and floats["uniform(0,1)"].max() < 1
    assert floats["normal(0,4)"].std() > floats["normal(0,1)"].std()
    codes = by["full code range"][0]
    assert codes.min() < -100 and codes.max() > 100  # scale 0.05: [-1, 1) reaches only +-23
    assert all(np.isin(arrays[2], [0, 1, 2, 3]).all() for arrays in by.values())
    other = gate_inputs(sg, shapes, seed=1)
    assert not np.array_equal(other[0].arrays[1], gate[0].arrays[1])


def _softmax_subgraph() -> offload.Subgraph:
    b = ModelBuilder()
    x = b.add_input("logits", shape=(2, 4))
    y = b.add_tensor("scores", shape=(2, 4))
    b.add_operator("SOFTMAX", inputs=[x], outputs=[y], options={"beta": 1.0})
    b.add_output(y)
    return offload.load_model(model_content=b.build()).main


def test_a_classifier_s_top1_must_not_change_within_the_looser_policy():
    sg = _softmax_subgraph()
    ref = np.array([[0.50, 0.497, 0.002, 0.001], [0.1, 0.2, 0.3, 0.4]])
    flipped = ref.copy()
    flipped[0, :2] = [0.497, 0.50]  # within 1e-2 of the largest magnitude; top-1 changes
    lossy = AccuracyPolicy(precision_loss_allowed=True)
    why = lossy.check(sg, [flipped], [ref])
    assert why and "top-1 class changes on 1 of 2 row(s)" in why
    assert lossy.deviation(sg, [flipped], [ref])["top1_changes"] == 1
    tie = ref.copy()
    tie[0, :2] = [0.50, 0.49995]
    swapped = tie.copy()
    swapped[0, :2] = [0.49995, 0.50]  # a tie within the exact policy is no change
    assert lossy.check(sg, [swapped], [tie]) is None
    assert AccuracyPolicy().deviation(sg, [ref], [ref]) == {"relative": 0.0, "top1_changes": 0.0}


def test_gate_sets_run_before_warm_up_so_state_matches_the_reference(monkeypatch, auto_cache):
    """Every candidate runs the gate's sets from a fresh state in the same order as the
    reference (a stateful model compares like with like): the runs are counted per trial."""
    install(monkeypatch, FAST)
    slow_reference(monkeypatch)
    seen: list[int] = []
    run = _auto_measure._run

    def counting(executor, inputs):
        seen.append(id(executor))
        return run(executor, inputs)

    monkeypatch.setattr(_auto_measure, "_run", counting)
    interp = offload.Interpreter(model_content=chain_model(), delegates="auto")
    interp.allocate_tensors()
    first_executor = seen[0]
    assert seen[: len(GATE_FAMILIES)] == [first_executor] * len(GATE_FAMILIES)


class LossyOptions(FakeOptions):
    precision_loss_allowed: bool = False


class LossyKernel(FakeKernel):
    """Past the looser policy when lossy (a bf16 engine on image-like inputs), exact when not."""

    def __init__(self, lossy: bool) -> None:
        self.offset = 0.5 if lossy else 0.0


class _Lossy(fake_delegate("lossy", FakeKernel)):  # type: ignore[misc]
    Options = LossyOptions

    def create_kernel(self) -> FakeKernel:
        return LossyKernel(self.options.precision_loss_allowed)


def test_with_precision_loss_the_exact_setting_stays_a_candidate(monkeypatch, auto_cache):
    """A delegate built lossy for auto_precision_loss_allowed is measured exact too: the
    looser policy never ends up with a slower plan than the exact one."""
    install(monkeypatch, _Lossy)
    slow_reference(monkeypatch)
    interp = offload.Interpreter(
        model_content=chain_model(), delegates="auto", auto_precision_loss_allowed=True
    )
    interp.allocate_tensors()
    rows = _rows(interp)
    assert rows["lossy"]["status"] == "inaccurate"
    assert interp.auto_selection["label"] == "lossy(precision_loss_allowed=False)"
    assert [d.options.precision_loss_allowed for d in interp.delegates] == [False]


def test_a_decision_measured_by_another_gate_is_measured_again(monkeypatch, auto_cache):
    """The gate's version is part of the key: a stored decision from an older gate is not
    taken, and the report says the options (where the gate lives) changed."""
    from offload import _auto

    install(monkeypatch, FAST)
    slow_reference(monkeypatch)
    monkeypatch.setattr(_auto, "GATE_VERSION", 1)
    old = offload.Interpreter(model_content=chain_model(), delegates="auto")
    old.allocate_tensors()
    assert old.auto_selection["cache"]["stored"]
    monkeypatch.setattr(_auto, "GATE_VERSION", 2)
    new = offload.Interpreter(model_content=chain_model(), delegates="auto")
    new.allocate_tensors()
    assert new.auto_selection["from_cache"] is False
    assert new.auto_selection["cache"]["status"] == "changed"
    assert any("options" in part for part in new.auto_selection["cache"]["changed"])
    stored = offload.Interpreter(model_content=chain_model(), delegates="auto")
    stored.allocate_tensors()
    assert stored.auto_selection["from_cache"] is True
    assert stored.auto_selection["gate"]["inputs"][0] == "uniform(-1,1)"
    assert "error_by_input" in {k for c in stored.auto_selection["candidates"] for k in c}
