"""What a choice of ``delegates="auto"`` or of the default delegates reports in
``auto_selection`` (see :mod:`offload._auto`): a row for each candidate, and the summary of a
static, measured, default or cached choice."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from offload._auto_candidates import COST_FORMULA, CPU, static_cost
from offload._auto_measure import GATE_VERSION
from offload._plan_cost import plan_figures

if TYPE_CHECKING:
    from offload._auto_cache import Lookup
    from offload._auto_measure import GateInput, Trial
    from offload._delegate import Delegate
    from offload._settings import AutoSettings

__all__ = ["ChoiceReport", "cached_summary", "default_summary", "setting_note"]


def _row(trial: Trial) -> dict[str, Any]:
    row: dict[str, Any] = {
        "label": trial.label,
        "delegates": [d.name for d in trial.delegates],
        "status": trial.status,
        "reason": trial.reason,
    }
    if trial.plan is not None:
        f = plan_figures(trial.plan)
        row.update(
            partitions=f.partitions,
            delegated_nodes=f.delegated_nodes,
            cpu_nodes=f.cpu_nodes,
            bytes_copied_per_invoke=f.bytes_copied,
            static_cost=static_cost(trial.plan, trial.delegates),
        )
    if trial.prepare_s is not None or trial.first_s is not None:
        row.update(trial.timing())
    if trial.error is not None:
        row["error"] = dict(trial.error)
        row["error_by_input"] = {k: dict(v) for k, v in trial.error_by_input.items()}
    if trial.notes:
        row["warnings"] = trial.notes[:5]
    return row


def _cache_summary(lookup: Lookup | None) -> dict[str, Any]:
    return lookup.summary() if lookup is not None else {"status": "not used"}


@dataclass
class ChoiceReport:
    """The candidates of one static or measured choice and the circumstances it was made in:
    what every summary of it states besides the winner and why."""

    reference: Trial
    trials: Sequence[Trial]
    skipped: list[dict[str, Any]]
    settings: AutoSettings
    started: float
    lookup: Lookup | None

    def summary(
        self,
        mode: str,
        best: Trial,
        reason: str,
        measure_s: float | None = None,
        gate: Sequence[GateInput] = (),
    ) -> dict[str, Any]:
        candidates = [_row(t) for t in (self.reference, *self.trials)]
        prepared = [t.prepare_s for t in (self.reference, *self.trials) if t.prepare_s is not None]
        summary: dict[str, Any] = {
            "mode": mode,
            "chosen": [d.name for d in best.delegates] or [CPU],
            "label": best.label,
            "reason": reason,
            "from_cache": False,
            "cache": _cache_summary(self.lookup),
            "budget_s": self.settings.budget_s,
            "measure_s": measure_s,
            "prepare_s": sum(prepared) if prepared else None,
            "choosing_s": time.perf_counter() - self.started,
            "accuracy": self.settings.policy.describe(),
            "gate": _gate_summary(self.settings, gate),
            "candidates": candidates,
            "skipped": self.skipped,
            "formula": COST_FORMULA,
        }
        if mode == "measured":
            summary["setting"] = setting_note(best, self.trials)
        return summary


def setting_note(best: Trial, trials: Sequence[Trial]) -> dict[str, Any] | None:
    """Which setting of the winning delegates won, and by how much over their next-best
    setting measured (another variant or thread count of the same delegates); None where
    the winner is the CPU reference or its delegates had no other setting."""
    names = [d.name for d in best.delegates]
    if not names:
        return None
    others = [t for t in trials if t is not best and [d.name for d in t.delegates] == names]
    if not others:
        return None
    timed = [t for t in others if t.status == "measured" and t.median_s is not None]
    who = "+".join(names)
    if not timed or not best.median_s:
        untimed = ", ".join(f"{t.label}: {t.status}" for t in others)
        return {
            "label": best.label,
            "versus": None,
            "ratio": None,
            "text": f"{best.label}: no other setting of {who} was timed ({untimed})",
        }
    runner_up = min(timed, key=lambda t: t.median_s or 0.0)
    ratio = best.median_s / (runner_up.median_s or best.median_s)
    return {
        "label": best.label,
        "versus": runner_up.label,
        "ratio": ratio,
        "text": (
            f"{best.label} took {ratio:.2f}x the time of {runner_up.label}, the next-best "
            f"setting of {who}"
        ),
    }


def _gate_summary(settings: AutoSettings, gate: Sequence[GateInput]) -> dict[str, Any]:
    return {
        "version": GATE_VERSION,
        "inputs": [g.name for g in gate],
        "samples": len(settings.samples or ()),
        "statistic": (
            "worst case: a candidate is kept only if it agrees on every input set; its error "
            "is the largest over the sets"
        ),
    }


def cached_summary(lookup: Lookup, settings: AutoSettings, started: float) -> dict[str, Any]:
    """The stored choice's own summary, updated to say it came from the cache."""
    record = lookup.record or {}
    stored = dict(record.get("summary") or {})
    stored.update(
        mode="cached",
        from_cache=True,
        cache=lookup.summary(),
        choosing_s=time.perf_counter() - started,
        measured_choosing_s=stored.get("choosing_s"),
        stored_at=record.get("stored_at"),
        budget_s=settings.budget_s,
    )
    return stored


def default_summary(
    engine: Delegate, why: str, settings: AutoSettings, started: float, lookup: Lookup | None
) -> dict[str, Any]:
    """The default engine's summary: ``why`` no stored choice applied, and that it applies."""
    return {
        "mode": "default",
        "chosen": [engine.name],
        "label": engine.name,
        "reason": (
            f"{why}; {engine.name} is installed, so it applies, as LiteRT applies XNNPACK by "
            'default (delegates="auto" measures and remembers the fastest)'
        ),
        "from_cache": False,
        "cache": _cache_summary(lookup),
        "budget_s": settings.budget_s,
        "choosing_s": time.perf_counter() - started,
        "candidates": [],
    }
