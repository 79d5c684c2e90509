"""Every setting of an engine as one of auto's candidates: its declared variants and fewer
threads than allowed, each labelled by its options; the winning setting and its margin over
the next-best setting of the same delegate; and a key that changes with the candidate set."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

import offload
from offload import Capabilities, DelegateKernel, _auto, _auto_candidates
from offload._auto import AutoSettings
from offload._cli import main
from offload._loader import load_model
from offload._report_text import render_auto
from tests._auto_fakes import (
    FAST,
    TWO_SETTINGS,
    ExactOptions,
    FakeKernel,
    chain_model,
    fake_delegate,
    install,
    slow_reference,
)


class ThreadsKernel(FakeKernel):
    """Slower above two threads: an engine whose pool costs more than small layers gain
    (XNNPACK at 16 threads on a face model took 1.1-1.3x its time at 8)."""

    def __init__(self, num_threads: int) -> None:
        self.delay_s = 0.004 if num_threads > 2 else 0.0


class _Threads(fake_delegate("threads", FakeKernel)):  # type: ignore[misc]
    def create_kernel(self) -> DelegateKernel:
        return ThreadsKernel(self.options.num_threads)


class _LossOptions(ExactOptions):
    precision_loss_allowed: bool = False


class _Lossy(fake_delegate("lossy", FakeKernel)):  # type: ignore[misc]
    Options = _LossOptions


class _OnGpu(fake_delegate("ongpu", FakeKernel)):  # type: ignore[misc]
    CAPABILITIES = Capabilities(
        ops=FAST.CAPABILITIES.ops,
        model_types=FAST.CAPABILITIES.model_types,
        hardware="gpu",
        expected_speedup=2.0,
        partition_overhead=1.0,
    )


def _candidates(settings: AutoSettings) -> list[offload.Delegate]:
    model = load_model(model_content=chain_model())
    return _auto.candidate_delegates(model, settings)[0]


def _labels(delegates: Sequence[offload.Delegate]) -> list[str]:
    return [_auto_candidates.label([d]) for d in delegates]


def test_thread_counts_are_the_most_allowed_and_half_as_many():
    assert _auto_candidates.thread_counts(0) == [0]  # an engine's "choose for me"
    assert _auto_candidates.thread_counts(1) == [1]
    assert _auto_candidates.thread_counts(2) == [2, 1]
    assert _auto_candidates.thread_counts(3) == [3, 1]
    assert _auto_candidates.thread_counts(16) == [16, 8]


def test_fewer_threads_than_allowed_are_candidates_of_every_setting(monkeypatch):
    """num_threads is the most a plan may use: each setting (the plain one and each declared
    variant) is also a candidate at half the threads, after all those at the threads allowed;
    with one thread allowed there is nothing fewer to try."""
    install(monkeypatch, TWO_SETTINGS, FAST)
    built = _candidates(AutoSettings(num_threads=4))
    assert _labels(built) == [
        "settings",
        "settings(exact=True)",
        "settings(num_threads=2)",
        "settings(exact=True, num_threads=2)",
        "fast",
        "fast(num_threads=2)",
    ]
    assert [d.options.num_threads for d in built] == [4, 4, 2, 2, 4, 2]
    assert _labels(_candidates(AutoSettings(num_threads=1))) == [
        "settings",
        "settings(exact=True)",
        "fast",
    ]
    assert _labels(_candidates(AutoSettings())) == ["settings", "settings(exact=True)", "fast"]


def test_fewer_threads_keep_every_other_option_and_so_the_precision(monkeypatch):
    """A thread-count candidate differs from its setting in num_threads alone: the lossy
    setting stays lossy, the exact one exact, all judged by the one accuracy policy."""
    install(monkeypatch, _Lossy)
    built = _candidates(AutoSettings(num_threads=2, precision_loss_allowed=True))
    dumped = [d.options.model_dump() for d in built]
    assert [(o["precision_loss_allowed"], o["num_threads"]) for o in dumped] == [
        (True, 2),
        (False, 2),
        (True, 1),
        (False, 1),
    ]
    for fewer, allowed in zip(dumped[2:], dumped[:2]):
        assert {**fewer, "num_threads": allowed["num_threads"]} == allowed


def test_a_delegate_on_a_device_gets_no_fewer_thread_candidate(monkeypatch):
    """Its threads only run what the device leaves to the CPU: not worth a candidate."""
    install(monkeypatch, _OnGpu)
    assert _labels(_candidates(AutoSettings(num_threads=4))) == ["ongpu"]


def test_the_winning_setting_and_its_margin_are_reported(monkeypatch, auto_cache):
    """At two threads of the four allowed the engine wins; auto_selection says which setting
    won and by how much over the delegate's next-best setting, offload check prints it, and
    the remembered choice keeps the thread count."""
    install(monkeypatch, _Threads)
    slow_reference(monkeypatch)
    interp = offload.Interpreter(model_content=chain_model(), delegates="auto", num_threads=4)
    interp.allocate_tensors()
    summary = interp.auto_selection
    assert summary["label"] == "threads(num_threads=2)"
    assert interp.delegates[0].options.num_threads == 2
    setting = summary["setting"]
    assert setting["label"] == "threads(num_threads=2)" and setting["versus"] == "threads"
    assert 0 < setting["ratio"] < 1
    assert setting["text"] == (
        f"threads(num_threads=2) took {setting['ratio']:.2f}x the time of threads, the "
        "next-best setting of threads"
    )
    assert f"setting: {setting['text']}" in render_auto(summary)
    again = offload.Interpreter(model_content=chain_model(), delegates="auto", num_threads=4)
    again.allocate_tensors()
    assert again.auto_selection["from_cache"] and again.auto_selection["setting"] == setting
    assert again.delegates[0].options.num_threads == 2


def test_a_winner_with_no_other_setting_timed_says_so(monkeypatch, auto_cache):
    """The exact setting wins where the plain one misses the policy: no margin to give, and
    the note says why; a delegate with a single setting gets no note at all."""
    install(monkeypatch, TWO_SETTINGS)
    slow_reference(monkeypatch)
    interp = offload.Interpreter(model_content=chain_model(), delegates="auto")
    interp.allocate_tensors()
    setting = interp.auto_selection["setting"]
    assert setting["label"] == "settings(exact=True)" and setting["ratio"] is None
    assert setting["text"] == (
        "settings(exact=True): no other setting of settings was timed (settings: inaccurate)"
    )
    install(monkeypatch, FAST)
    alone = offload.Interpreter(model_content=chain_model(), delegates="auto")
    alone.allocate_tensors()
    assert alone.auto_selection["label"] == "fast" and alone.auto_selection["setting"] is None


def test_offload_check_prints_the_winning_setting(
    monkeypatch: pytest.MonkeyPatch, auto_cache: Path, tmp_path: Path, capsys
) -> None:
    install(monkeypatch, TWO_SETTINGS)
    slow_reference(monkeypatch)
    path = tmp_path / "chain.tflite"
    path.write_bytes(chain_model())
    assert main(["check", str(path), "--delegate", "auto", "--auto_budget_s", "0.3"]) == 0
    out = capsys.readouterr().out
    assert "setting: settings(exact=True): no other setting of settings was timed" in out


def test_a_new_candidate_changes_the_key(monkeypatch, auto_cache):
    """The key lists every candidate by its label: a delegate that declares a new setting
    (or a program allowing more threads) measures again, and the report says what moved."""
    install(monkeypatch, _Lossy)
    slow_reference(monkeypatch)
    first = offload.Interpreter(model_content=chain_model(), delegates="auto")
    first.allocate_tensors()
    assert not first.auto_selection["from_cache"]
    monkeypatch.setattr(_Lossy, "auto_variants", classmethod(lambda cls: ({"exact": True},)))
    second = offload.Interpreter(model_content=chain_model(), delegates="auto")
    second.allocate_tensors()
    cache = second.auto_selection["cache"]
    assert cache["status"] == "changed" and not second.auto_selection["from_cache"]
    moved = {d["key"]: (d["stored"], d["now"]) for d in cache["differences"]}
    assert moved == {"options.candidates": ("lossy", "lossy,lossy(exact=True)")}


def test_the_static_rule_keeps_the_threads_allowed(monkeypatch, auto_cache):
    """Without timing nothing shows fewer threads win: the plain setting stays."""
    install(monkeypatch, FAST)
    interp = offload.Interpreter(
        model_content=chain_model(), delegates="auto", num_threads=4, auto_budget_s=0
    )
    interp.allocate_tensors()
    assert interp.auto_selection["mode"] == "static"
    assert [d.options.num_threads for d in interp.delegates] in ([4], [])
    x = np.linspace(-1, 1, 16, dtype=np.float32).reshape(1, 16)
    interp.set_tensor(interp.get_input_details()[0]["index"], x)
    interp.invoke()
