"""delegates="auto" measures candidate plans and keeps the fastest that agrees with the CPU
reference; failures are dropped with their reason, never raised; the budget bounds it."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import numpy as np
import pytest

import offload
from offload import _auto, _auto_measure
from offload._auto import AutoSettings
from offload._auto_measure import AccuracyPolicy
from offload._loader import load_model
from offload.errors import NoTensorValueError
from offload.model.builder import ModelBuilder
from tests._auto_fakes import (
    ADD_ONLY,
    BROKEN,
    FAST,
    FLAKY,
    INITS,
    SLOW,
    TWO_SETTINGS,
    WRONG,
    FakeKernel,
    chain_model,
    fake_delegate,
    install,
    slow_reference,
)


def _rows(interp: offload.Interpreter) -> dict[str, dict]:
    return {c["label"]: c for c in interp.auto_selection["candidates"]}


def _outputs(interp: offload.Interpreter, x: np.ndarray) -> np.ndarray:
    interp.allocate_tensors()
    interp.set_tensor(interp.get_input_details()[0]["index"], x)
    interp.invoke()
    return interp.get_tensor(interp.get_output_details()[0]["index"])


X = np.linspace(-1, 1, 16, dtype=np.float32).reshape(1, 16)


def test_keeps_the_fastest_accurate_candidate_and_drops_the_rest_with_reasons(
    monkeypatch,
    auto_cache,
):
    """The fastest accurate candidate wins; failing, inaccurate and slow ones are reported."""
    install(monkeypatch, FAST, SLOW, WRONG, BROKEN, FLAKY)
    slow_reference(monkeypatch)
    content = chain_model()
    interp = offload.Interpreter(model_content=content, delegates="auto")
    got = _outputs(interp, X)
    auto = interp.auto_selection
    assert auto["mode"] == "measured" and auto["chosen"] == ["fast"]
    rows = _rows(interp)
    assert rows["fast"]["status"] == "chosen" and rows["fast"]["runs"] >= 3
    assert rows["wrong"]["status"] == "inaccurate" and "max |a - b|" in rows["wrong"]["reason"]
    assert rows["broken"]["status"] == "failed"
    assert "failed to prepare" in rows["broken"]["reason"]
    assert "no device today" in rows["broken"]["reason"]
    assert rows["flaky"]["status"] == "failed" and "lost the device" in rows["flaky"]["reason"]
    assert rows["slow"]["median_ms"] > rows["fast"]["median_ms"]
    assert rows["cpu"]["median_ms"] is not None
    assert [d.name for d in interp.delegates] == ["fast"]
    want = _outputs(offload.Interpreter(model_content=content, delegates=[]), X)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert interp.delegation_report()["auto"] is auto


def test_every_candidate_failing_leaves_the_cpu_reference(monkeypatch, auto_cache):
    """Bad candidates never raise: auto still returns a working plan, the CPU reference."""
    install(monkeypatch, BROKEN, FLAKY, WRONG)
    content = chain_model()
    interp = offload.Interpreter(model_content=content, delegates="auto")
    got = _outputs(interp, X)
    assert interp.auto_selection["chosen"] == ["cpu"] and interp.delegates == []
    assert interp.plan().partitions == []
    want = _outputs(offload.Interpreter(model_content=content, delegates=[]), X)
    np.testing.assert_array_equal(got, want)


def test_never_slower_than_the_cpu_reference(monkeypatch, auto_cache):
    """A candidate slower than the CPU reference is measured and not kept."""
    install(monkeypatch, SLOW)
    interp = offload.Interpreter(model_content=chain_model(), delegates="auto")
    interp.allocate_tensors()
    assert interp.auto_selection["chosen"] == ["cpu"]
    assert _rows(interp)["slow"]["status"] == "measured"


def test_the_winner_is_prepared_once(monkeypatch, auto_cache):
    """The measured winner's prepared kernels are the interpreter's: nothing is prepared twice."""
    install(monkeypatch, FAST)
    slow_reference(monkeypatch)
    INITS.clear()
    interp = offload.Interpreter(model_content=chain_model(), delegates="auto")
    interp.allocate_tensors()
    interp.allocate_tensors()
    assert interp.auto_selection["chosen"] == ["fast"]
    assert INITS["FakeKernel"] == 1


def test_state_and_inputs_start_fresh_after_measuring(monkeypatch, auto_cache):
    """After the choice, inputs read zeros (the measuring runs leave nothing behind) and take
    what the program sets; before allocate_tensors, set_tensor is refused, as in LiteRT."""
    install(monkeypatch, FAST)
    slow_reference(monkeypatch)
    interp = offload.Interpreter(model_content=chain_model(), delegates="auto")
    index = interp.get_input_details()[0]["index"]
    with pytest.raises(NoTensorValueError, match="Tensor is unallocated"):
        interp.set_tensor(index, X)
    interp.allocate_tensors()
    assert not interp.get_tensor(index).any()
    interp.set_tensor(index, X)
    np.testing.assert_array_equal(interp.get_tensor(index), X)
    other = offload.Interpreter(model_content=chain_model(), delegates="auto", auto_cache_dir=False)
    other.allocate_tensors()
    assert not other.get_tensor(index).any()


def test_no_candidate_runs_while_the_references_helper_threads_spin(monkeypatch, auto_cache):
    """numpy's BLAS threads spin on after the CPU reference's products: no other candidate is
    run until they have stopped, so none is timed (or dropped) for sharing the cores."""
    # As fast as each other, so the reference is timed in the rounds too.
    install(monkeypatch, PACED)
    slow_reference(monkeypatch, delay_s=PacedKernel.delay_s)
    # One helper, as a BLAS pool has its threads: each reference run makes it spin 0.1 s more.
    helper: list[threading.Thread] = []
    spin_until = [0.0]
    run = _auto_measure._run

    def spin() -> None:
        while time.perf_counter() < spin_until[0]:
            pass

    def reference_leaving_helpers(executor, inputs):  # type: ignore[no-untyped-def]
        result = run(executor, inputs)
        if not executor.delegates:  # the reference: its helper spins on 0.1 s, as BLAS's do
            spin_until[0] = time.perf_counter() + 0.1
            if not helper or not helper[0].is_alive():
                helper[:] = [threading.Thread(target=spin, daemon=True)]
                helper[0].start()
        elif helper and helper[0].is_alive():
            overlapped.append(executor.delegates[0].name)
        return result

    overlapped: list[str] = []
    monkeypatch.setattr(_auto_measure, "_run", reference_leaving_helpers)
    interp = offload.Interpreter(model_content=chain_model(), delegates="auto")
    interp.allocate_tensors()
    assert not overlapped, f"{len(overlapped)} candidate runs while the reference's helper spun"
    assert _rows(interp)["paced"]["runs"] >= 3


class PacedKernel(FakeKernel):
    delay_s = 0.002


class Paced5Kernel(FakeKernel):
    delay_s = 0.005


PACED = fake_delegate("paced", PacedKernel)


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


class ColdKernel(FakeKernel):
    """Slow for its first COLD_RUNS runs after each of auto's waits (where the machine idles: a
    thread pool goes to sleep, the cores' clocks drop), then far faster than PacedKernel."""

    COLD_RUNS, COLD_S = 2, 0.01
    waits = 0  # auto's waits so far (counted by the test)

    def __init__(self) -> None:
        self.seen_waits = -1
        self.cold_left = 0

    def invoke(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        if self.seen_waits != ColdKernel.waits:
            self.seen_waits, self.cold_left = ColdKernel.waits, self.COLD_RUNS
        if self.cold_left:
            self.cold_left -= 1
            _spin(self.COLD_S)
        return super().invoke(inputs)


def test_a_candidate_slow_after_each_pause_is_judged_by_its_steady_runs(monkeypatch, auto_cache):
    """auto pauses before each candidate's runs (the wait for a quiet process): a candidate
    whose first runs after a pause are slow is warmed up for a while, and each timed block
    starts with an untimed run, so its steady speed decides, not its cold start."""
    install(monkeypatch, fake_delegate("cold", ColdKernel), PACED)
    slow_reference(monkeypatch)
    wait = _auto_measure.wait_for_quiet

    def counted_wait(*args, **kwargs):  # type: ignore[no-untyped-def]
        ColdKernel.waits += 1
        return wait(*args, **kwargs)

    monkeypatch.setattr(_auto_measure, "wait_for_quiet", counted_wait)
    interp = offload.Interpreter(model_content=chain_model(), delegates="auto")
    interp.allocate_tensors()
    rows = _rows(interp)
    assert interp.auto_selection["chosen"] == ["cold"], rows
    assert rows["cold"]["warm_ms"] < 1e3 * PacedKernel.delay_s
    assert rows["cold"]["median_ms"] < 1e3 * PacedKernel.delay_s


def test_budget_bounds_the_timed_runs(monkeypatch, auto_cache):
    """The timed runs stay within the budget (to within one candidate's warm-up), and a
    candidate whose turn comes after the budget is spent is not measured at all."""
    install(monkeypatch, SLOW, FAST)
    slow_reference(monkeypatch, delay_s=0.03)
    interp = offload.Interpreter(model_content=chain_model(), delegates="auto", auto_budget_s=0.05)
    interp.allocate_tensors()
    auto = interp.auto_selection
    rows = _rows(interp)
    assert auto["budget_s"] == 0.05
    # The reference's two warm-up runs (0.06 s) spend the budget: nobody else is timed.
    assert rows["fast"]["status"] == rows["slow"]["status"] == "not measured"
    assert "budget" in rows["fast"]["reason"] and "prepare_ms" not in rows["fast"]
    assert auto["measure_s"] < 0.05 + 2 * 0.03 + 0.1  # the reference's warm-up, and slack
    assert auto["chosen"] == ["cpu"]

    roomy = offload.Interpreter(model_content=chain_model(), delegates="auto", auto_budget_s=0.5)
    roomy.allocate_tensors()
    spent = roomy.auto_selection["measure_s"]
    # Past the budget by at most one warm-up of the slow candidate (three 20 ms runs: 30 ms of
    # warm-up after the first), and what a loaded machine adds to runs the rounds were sized by.
    assert spent <= 0.5 + 3 * 0.02 + 0.1
    assert _rows(roomy)["fast"]["runs"] >= 1
    # 20 ms a run against the fast candidate's microseconds: not timed past its warm-up.
    assert "not timed further: its warm-up runs took" in _rows(roomy)["slow"]["reason"]


def test_a_near_candidate_is_timed_unless_a_round_would_overrun_the_budget(monkeypatch, auto_cache):
    """A candidate whose warm-up took 2.5x the best one's (within WARM_FAR_FACTOR) is timed
    when a round of every candidate fits the budget, and then stops on its timed runs; when a
    round would overrun the budget its warm-up decides and it is not timed."""
    install(monkeypatch, PACED, fake_delegate("paced5", Paced5Kernel))
    slow_reference(monkeypatch)
    roomy = offload.Interpreter(model_content=chain_model(), delegates="auto")
    roomy.allocate_tensors()
    rows = _rows(roomy)
    assert rows["paced5"]["reason"].startswith("stopped after 3 runs"), rows["paced5"]
    assert roomy.auto_selection["chosen"] == ["paced"]

    # The warm-ups (30 ms or so each: 0.1 s) leave too little of 0.12 s for a round of the
    # three (4 runs each: 48 ms): the warm-ups decide who is timed.
    tight = offload.Interpreter(model_content=chain_model(), delegates="auto", auto_budget_s=0.12)
    tight.allocate_tensors()
    rows = _rows(tight)
    assert "not timed further: its warm-up runs took" in rows["paced5"]["reason"], rows
    assert rows["paced5"]["runs"] == 0
    assert tight.auto_selection["chosen"] == ["paced"]


def test_budget_zero_is_the_static_rule(monkeypatch, auto_cache):
    """auto_budget_s=0 times nothing and stores nothing: the static cost rule decides."""
    install(monkeypatch, FAST, BROKEN)
    INITS.clear()
    interp = offload.Interpreter(model_content=chain_model(), delegates="auto", auto_budget_s=0)
    assert interp.auto_selection["mode"] == "static"
    # 12 nodes: CPU 12, fast 12/2 + 1 = 7; broken has the same figures, and ties keep the first.
    assert interp.auto_selection["chosen"] == ["fast"]
    assert all("median_ms" not in c for c in interp.auto_selection["candidates"])
    assert INITS["FakeKernel"] == 0
    assert not auto_cache.exists() or not list(auto_cache.glob("*.decision"))


def test_budget_from_the_environment(monkeypatch, auto_cache):
    """$OFFLOAD_AUTO_BUDGET_S sets the budget when the program does not; bad values raise."""
    install(monkeypatch, FAST)
    monkeypatch.setenv("OFFLOAD_AUTO_BUDGET_S", "0")
    assert (
        offload.Interpreter(model_content=chain_model(), delegates="auto").auto_selection["mode"]
        == "static"
    )
    monkeypatch.setenv("OFFLOAD_AUTO_BUDGET_S", "soon")
    with pytest.raises(ValueError, match="OFFLOAD_AUTO_BUDGET_S"):
        offload.Interpreter(model_content=chain_model(), delegates="auto")
    with pytest.raises(ValueError, match="auto_budget_s"):
        offload.Interpreter(model_content=chain_model(), delegates="auto", auto_budget_s=-1)


def test_fragmented_plans_are_rejected_without_timing(monkeypatch, auto_cache):
    """A plan of more than 8 partitions is rejected before timing, with the figures."""
    install(monkeypatch, ADD_ONLY)
    content = chain_model(("ADD", "TANH") * 10)
    interp = offload.Interpreter(model_content=content, delegates="auto")
    interp.allocate_tensors()
    row = _rows(interp)["addonly"]
    assert row["status"] == "rejected"
    assert "10 partitions for 20 nodes" in row["reason"] and "prepare_ms" not in row
    assert interp.auto_selection["chosen"] == ["cpu"]


def test_pairs_are_candidates_when_the_first_leaves_nodes_the_second_takes(
    monkeypatch,
    auto_cache,
):
    """[addonly, fast] is planned: addonly leaves the MULs, which fast takes."""
    install(monkeypatch, ADD_ONLY, FAST)
    content = chain_model(("ADD",) * 6 + ("MUL",) * 2)
    interp = offload.Interpreter(model_content=content, delegates="auto", auto_budget_s=0.2)
    interp.allocate_tensors()
    rows = _rows(interp)
    assert rows["addonly+fast"]["delegates"] == ["addonly", "fast"]
    assert rows["addonly+fast"]["partitions"] == 2


def test_auto_and_experimental_delegates_do_not_mix():
    """'auto' chooses the delegates itself: naming others too is an error, not a guess."""
    dummy = offload.load_delegate("dummy")
    with pytest.raises(ValueError, match="not both"):
        offload.Interpreter(
            model_content=chain_model(), delegates="auto", experimental_delegates=[dummy]
        )


def test_strict_mode_rejects_plans_that_leave_cpu_nodes(monkeypatch, auto_cache):
    """With allow_cpu_fallback=False a candidate leaving nodes on the CPU is rejected."""
    install(monkeypatch, ADD_ONLY)
    content = chain_model(("ADD", "MUL"))
    interp = offload.Interpreter(model_content=content, delegates="auto", allow_cpu_fallback=False)
    interp.allocate_tensors()
    row = _rows(interp)["addonly"]
    assert row["status"] == "rejected" and "allow_cpu_fallback=False" in row["reason"]


# -- the accuracy policy --------------------------------------------------------------------


def _subgraph(dtype: str, scale: float | None, dequantized: bool = False) -> offload.Subgraph:
    b = ModelBuilder()
    quant = (scale, 0) if scale else None
    x = b.add_input("x", shape=(4,), dtype=dtype, quantization=quant)
    if dequantized:
        y = b.add_tensor("y", shape=(4,), dtype="float32")
        b.add_operator("DEQUANTIZE", inputs=[x], outputs=[y])
    else:
        y = b.add_tensor("y", shape=(4,), dtype=dtype, quantization=quant)
        b.add_operator("RELU", inputs=[x], outputs=[y])
    b.add_output(y)
    return offload.load_model(model_content=b.build()).main


def test_policy_floats_within_1e_4_of_the_largest_magnitude():
    """Floats: 1e-4 of max |reference| (1e-2 with precision loss); NaN must match NaN."""
    sg = _subgraph("float32", None)
    ref = np.array([1.0, -2.0, 0.5, 0.0])
    strict, lossy = AccuracyPolicy(), AccuracyPolicy(precision_loss_allowed=True)
    assert strict.check(sg, [ref + 1e-4], [ref]) is None
    assert "policy allows 0.0001" in strict.check(sg, [ref + 1e-3], [ref])
    assert lossy.check(sg, [ref + 1e-2], [ref]) is None
    nan = ref.copy()
    nan[0] = np.nan
    assert "NaN" in strict.check(sg, [ref], [nan])
    assert strict.check(sg, [nan], [nan]) is None


def test_policy_quantized_outputs_within_one_step():
    """Quantized integers: 1 step (4 with precision loss); plain integers must be equal;
    a float that dequantizes an integer tensor is judged in that tensor's steps."""
    q = _subgraph("int8", 0.5)
    ref = np.array([1, -2, 3, 0], np.int8)
    assert AccuracyPolicy().check(q, [ref + np.int8(1)], [ref]) is None
    assert "2 step" in AccuracyPolicy().check(q, [ref + np.int8(2)], [ref])
    assert AccuracyPolicy(True).check(q, [ref + np.int8(4)], [ref]) is None
    plain = _subgraph("int32", None)
    ref32 = ref.astype(np.int32)
    assert "not quantized" in AccuracyPolicy().check(plain, [ref32 + 1], [ref32])
    deq = _subgraph("int8", 0.25, dequantized=True)
    floats = np.array([0.25, -0.5, 1.0, 0.0], np.float32)
    assert AccuracyPolicy().check(deq, [floats + np.float32(0.25)], [floats]) is None
    assert "steps of the integer tensor" in AccuracyPolicy().check(
        deq, [floats + np.float32(0.75)], [floats]
    )


def test_seeded_inputs_are_the_same_for_every_candidate():
    """Every candidate gets the same inputs: floats in [-1, 1), integers 0..3."""
    sg = offload.load_model(model_content=chain_model()).main
    shapes = [t.shape for t in sg.tensors]
    a, b = _auto_measure.seeded_inputs(sg, shapes), _auto_measure.seeded_inputs(sg, shapes)
    np.testing.assert_array_equal(a[0], b[0])
    assert a[0].dtype == np.float32 and -1 <= a[0].min() and a[0].max() < 1


def test_an_exact_setting_is_a_candidate_of_its_own(monkeypatch, auto_cache):
    """A delegate's auto_variants are measured beside it: where its default setting misses
    the accuracy policy, its exact one wins over the CPU reference, labelled by its options."""
    install(monkeypatch, TWO_SETTINGS)
    slow_reference(monkeypatch)
    interp = offload.Interpreter(model_content=chain_model(), delegates="auto")
    interp.allocate_tensors()
    summary = interp.auto_selection
    rows = {row["label"]: row for row in summary["candidates"]}
    assert rows["settings"]["status"] == "inaccurate"
    assert rows["settings(exact=True)"]["status"] == "chosen"
    assert summary["chosen"] == ["settings"]
    assert interp.delegates[0].options.exact is True
    # Remembered with its options: a second interpreter takes the exact setting unmeasured.
    again = offload.Interpreter(model_content=chain_model(), delegates="auto")
    again.allocate_tensors()
    assert again.auto_selection["from_cache"] and again.delegates[0].options.exact is True


def test_a_variant_the_user_s_options_undo_is_measured_once(monkeypatch, auto_cache):
    """The user's own options for a delegate win over its variants; one that comes out the
    same as the plain delegate is not a second candidate."""
    install(monkeypatch, TWO_SETTINGS)
    slow_reference(monkeypatch)
    settings = AutoSettings(budget_s=0.5, delegate_options={"settings": {"exact": False}})
    delegates, _, _ = _auto.candidate_delegates(load_model(model_content=chain_model()), settings)
    assert [d.options.exact for d in delegates] == [False]


def test_each_candidate_reports_its_error_in_the_policy_s_units(monkeypatch, auto_cache):
    """auto_selection gives each measured candidate's distance from the reference: an exact
    one 0, a wrong one by how much it missed (relative to the largest magnitude)."""
    install(monkeypatch, FAST, WRONG)
    slow_reference(monkeypatch)
    interp = offload.Interpreter(model_content=chain_model(), delegates="auto")
    interp.allocate_tensors()
    rows = _rows(interp)
    assert rows["fast"]["error"] == {"relative": 0.0}
    missed = rows["wrong"]["error"]["relative"]
    assert missed > interp.auto_selection["accuracy"]["float_relative"]
    assert rows["wrong"]["status"] == "inaccurate" and f"{missed:.2e}" in rows["wrong"]["reason"]
    assert "error" not in rows["cpu"]
