"""``delegates="auto"`` and offload's default delegates: which installed delegates run a model
here, chosen by measurement, remembered, and explained.

**Candidates** (:mod:`offload._auto_candidates`). The CPU reference alone; each installed
delegate that is available here, whose platforms include this one and whose capability for
the model's type is not "no", alone with CPU fallback; and up to :data:`MAX_PAIRS` priority
pairs ``[a, b]`` where ``a`` leaves nodes on the CPU that ``b`` takes (ranked by the static
cost below). Each delegate gets its default options, plus the Interpreter's ``num_threads``
when its options have a ``num_threads`` field, and ``precision_loss_allowed=True`` when
precision loss is allowed and its options have that field (then that delegate's exact
setting is a candidate of its own too); each option set it declares
(``Delegate.auto_variants``) is a candidate of its own; and where more than one thread is
allowed, each of these settings again at half the threads
(:func:`~offload._auto_candidates.thread_counts`: ``num_threads`` is the most a plan may use).

**Rejected without timing**, with the reason: a plan that takes no node, a fragmented plan
(:mod:`offload._plan_cost`: more than 8 partitions, or boundary copies larger than the work),
and, with ``allow_cpu_fallback=False``, a plan that leaves nodes on the CPU.

**Measured** (:mod:`offload._auto_measure`) within the budget (``auto_budget_s``, default
:data:`DEFAULT_BUDGET_S` seconds of runs; preparations are timed apart): the fastest candidate
whose outputs agree with the CPU reference's by the accuracy policy wins; the CPU reference
wins when nothing beats it.

**The static rule** (budget 0, or when the model cannot be measured): each single candidate's
estimated cost, in units of one CPU-reference node, is :data:`COST_FORMULA` (figures from the
delegate's Capabilities), the CPU alone costs the node count, and the cheapest wins; ties go
to the CPU.

**Remembered** (:mod:`offload._auto_cache`): a measured choice is stored under its key; a
later interpreter with an equal key takes it without timing, and one whose key differs
measures again and says which part changed.

**Explained** (:mod:`offload._auto_summary`): ``auto_selection`` gives the winner, why, a
row for every candidate, measured or not, and (``setting``) how the winning setting compares
with the next-best setting of the same delegates.

**The default** (no delegate named): the remembered choice for this key where there is one;
otherwise ``litert`` where it is installed and available (LiteRT applies XNNPACK by default,
and offload applies LiteRT), else the static rule. Nothing is timed unless asked for.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from offload._auto_cache import DecisionStore, Lookup, ModelSource, versions_memo
from offload._auto_cache import device_identity as _device_identity
from offload._auto_cache import machine_identity as _machine_identity
from offload._auto_candidates import (
    COST_FORMULA,
    MAX_PAIRS,
    candidates_among,
    fewer_threads,
    label,
    plan_cost,
    plan_trials,
    static_cost,
)
from offload._auto_measure import (
    GATE_VERSION,
    GateInput,
    Trial,
    Unmeasurable,
    checked_samples,
    gate_inputs,
    measure,
)
from offload._auto_summary import ChoiceReport, cached_summary, default_summary
from offload._executor import Executor
from offload._plugins import delegate_class, list_delegates, list_plugins
from offload._settings import DEFAULT_BUDGET_S, AutoSettings

if TYPE_CHECKING:
    from offload._delegate import Delegate
    from offload._graph import Model

__all__ = [
    "COST_FORMULA",
    "DEFAULT_BUDGET_S",
    "DEFAULT_ENGINE",
    "MAX_PAIRS",
    "AutoSettings",
    "Selection",
    "choose_delegates",
    "plan_cost",
    "select",
]

# Applied by default while no measured choice is stored: LiteRT's own kernels, as LiteRT
# applies XNNPACK by default.
DEFAULT_ENGINE = "litert"


@dataclass
class Selection:
    """The delegates chosen, the figures behind the choice, and, when the winner was measured,
    its prepared executor (so the interpreter does not prepare it twice)."""

    delegates: list[Delegate]
    summary: dict[str, Any]
    executor: Executor | None = None
    # Per candidate delegate, its reason for each node it left on the CPU in its own plans:
    # the chosen plan names only the delegates it uses, and a refusal names them all.
    refusals: dict[str, dict[int, str]] = field(default_factory=dict)


def _refusals(trials: Sequence[Trial]) -> dict[str, dict[int, str]]:
    out: dict[str, dict[int, str]] = {}
    for trial in trials:
        if trial.plan is None:
            continue
        for delegate, reasons in trial.plan.refusals().items():
            mine = out.setdefault(delegate, {})
            for node, reason in reasons.items():
                mine.setdefault(node, reason)
    return out


# -- candidates ------------------------------------------------------------------------------


def candidate_delegates(
    model: Model, settings: AutoSettings
) -> tuple[list[Delegate], list[dict[str, Any]], dict[str, Any]]:
    """The installed delegates that may run ``model`` here, each built with its options;
    the others with why not; and every installed delegate's availability (for the key)."""
    return candidates_among(list_delegates(), model, settings)


# -- the static rule -----------------------------------------------------------------------------


def _static_choice(
    model: Model, reference: Trial, trials: Sequence[Trial], reference_allowed: bool = True
) -> tuple[Trial, str]:
    n = len(model.main.nodes)
    best, best_cost = reference, float(n) if reference_allowed else float("inf")
    for trial in trials:
        if trial.status == "rejected" or trial.plan is None or len(trial.delegates) != 1:
            continue
        cost = static_cost(trial.plan, trial.delegates)
        if cost < best_cost:
            best, best_cost = trial, cost
    reason = f"lowest estimated cost ({best_cost:g}; the CPU alone costs {n}) by the static rule"
    return best, reason


def choose_delegates(model: Model) -> tuple[list[Delegate], dict[str, Any]]:
    """The static rule's choice for ``model`` (zero or one delegate) and the figures behind it."""
    settings = AutoSettings(budget_s=0.0, use_cache=False)
    selection = _static_selection(model, settings, time.perf_counter(), None)
    return selection.delegates, selection.summary


def _static_selection(
    model: Model, settings: AutoSettings, started: float, lookup: Lookup | None, why: str = ""
) -> Selection:
    delegates, skipped, _ = candidate_delegates(model, settings)
    reference, trials = plan_trials(model, delegates, settings)
    best, reason = _static_choice(model, reference, trials, settings.reference_allowed)
    for trial in (reference, *trials):
        if trial.status != "rejected":
            trial.status = "chosen" if trial is best else "not chosen"
    report = ChoiceReport(reference, trials, skipped, settings, started, lookup)
    summary = report.summary("static", best, f"{why}; {reason}" if why else reason)
    return Selection(best.delegates, summary, refusals=_refusals(trials))


# -- the key ------------------------------------------------------------------------------------


def _samples_digest(samples: Sequence[Sequence[np.ndarray]]) -> str | None:
    """A digest of the user's gate samples (part of the key: other samples, another choice)."""
    if not samples:
        return None
    digest = hashlib.sha256()
    for sample in samples:
        for a in sample:
            digest.update(f"{a.dtype.str}{a.shape}".encode())
            digest.update(np.ascontiguousarray(a).tobytes())
    return digest.hexdigest()[:32]


def _distributions() -> dict[str, str]:
    """Plugin name -> the distribution that installed it."""
    return {p.name: p.distribution for p in list_plugins() if p.distribution}


def decision_key(
    store: DecisionStore,
    source: ModelSource,
    model: Model,
    shapes: Sequence[tuple[int, ...]],
    delegates: Sequence[Delegate],
    availability: dict[str, Any],
    settings: AutoSettings,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The key a decision is stored under (see :mod:`offload._auto_cache`), and the versions
    memo to store beside it."""
    plugin_of = {r.name: r.plugin for r in list_delegates()}
    dists = _distributions()
    wanted = sorted({dists[plugin_of[d.name]] for d in delegates if plugin_of.get(d.name) in dists})
    versions = store.versions(source, wanted)
    identities: dict[str, Any] = {}
    for d in delegates:
        try:
            identities[d.name] = {str(k): str(v) for k, v in dict(d.device_identity()).items()}
        except Exception as exc:  # a probe that fails is a fact about this machine too
            identities[d.name] = {"identity_error": f"{type(exc).__name__}: {exc}"}
    sg = model.main
    key = {
        "model": store.model_hash(source),
        "inputs": [[list(shapes[i]), str(sg.tensors[i].dtype)] for i in sg.inputs],
        "machine": _machine_identity(),
        "devices": {**_device_identity(), "delegates": identities, "available": availability},
        "versions": {
            **versions,
            "delegates": {d.name: d.version for d in delegates},
        },
        "options": {
            # Each delegate's options at its plain setting, and every candidate's label (its
            # variant's options): a new variant or thread count is a new key, measured again.
            "delegates": _plain_options(delegates),
            "candidates": [label([d]) for d in delegates],
            "num_threads": settings.num_threads,
            "accuracy": settings.policy.describe(),
            "allow_cpu_fallback": settings.allow_cpu_fallback,
            "hardware": list(settings.hardware) if settings.hardware is not None else None,
            "reference_allowed": settings.reference_allowed,
            "gate": {"version": GATE_VERSION, "samples": _samples_digest(settings.samples or ())},
        },
        "budget": settings.budget_s,
    }
    return key, versions_memo(wanted, versions)


def _plain_options(delegates: Sequence[Delegate]) -> dict[str, Any]:
    """Each delegate's options as its first candidate has them (its plain setting)."""
    out: dict[str, Any] = {}
    for d in delegates:
        out.setdefault(d.name, d.options.model_dump(mode="json"))
    return out


def _rebuild(record: dict[str, Any]) -> list[Delegate]:
    built = []
    for item in record["chosen"]:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise ValueError(f"a stored choice names no delegate: {item!r}")
        options = item.get("options") or {}
        if not isinstance(options, dict):
            raise ValueError(f"stored options of {item['name']!r} are not a mapping")
        built.append(delegate_class(item["name"])(options))
    return built


# -- the choice -------------------------------------------------------------------------------


def select(
    model: Model,
    source: ModelSource,
    shapes: Sequence[tuple[int, ...]],
    settings: AutoSettings,
    *,
    default: bool = False,
    strict_cache: bool = False,
) -> Selection:
    """The delegates for ``model`` with these input ``shapes``: measured (``default=False``,
    ``delegates="auto"``) or the default's (stored choice, else litert, else static rule).

    ``strict_cache``: a fault of the decision cache raises CacheError (the program asked for
    ``"auto"`` and named ``settings.cache_dir``); otherwise it warns once and the choice is
    made without the cache, measured where asked but not stored."""
    started = time.perf_counter()
    if settings.samples is not None:
        settings.samples = checked_samples(model.main, shapes, settings.samples)
    if not default and settings.budget_s == 0:
        return _static_selection(model, settings, started, None, "auto_budget_s=0")
    delegates, skipped, availability = candidate_delegates(model, settings)
    store = DecisionStore(settings.cache_dir, strict=strict_cache) if settings.use_cache else None
    lookup: Lookup | None = None
    key: dict[str, Any] = {}
    memo: dict[str, Any] = {}
    if store is not None:
        key, memo = decision_key(store, source, model, shapes, delegates, availability, settings)
        lookup = store.lookup(source, key)
        if lookup.status == "hit" and lookup.record is not None:
            try:
                chosen = _rebuild(lookup.record)
            except Exception as exc:
                lookup = Lookup(
                    "rejected",
                    detail=f"the stored choice could not be rebuilt: {type(exc).__name__}: {exc}",
                    path=lookup.path,
                )
            else:
                store.refresh_memos(source, memo)
                return Selection(chosen, cached_summary(lookup, settings, started))
    if default:
        return _default_selection(model, settings, started, lookup, delegates)
    return _measured_selection(
        model, shapes, settings, started, lookup, delegates, skipped, store, source, key, memo
    )


def _default_selection(
    model: Model,
    settings: AutoSettings,
    started: float,
    lookup: Lookup | None,
    delegates: Sequence[Delegate],
) -> Selection:
    why = lookup.detail if lookup is not None else "the decision cache is off"
    engine = next((d for d in delegates if d.name == DEFAULT_ENGINE), None)
    if engine is None:
        reason = f"{DEFAULT_ENGINE} is not installed or not available here"
        return _static_selection(model, settings, started, lookup, f"{why}; {reason}")
    summary = default_summary(engine, why, settings, started, lookup)
    return Selection([engine], summary)


def _promise(trial: Trial) -> tuple[bool, float]:
    """The order candidates are measured in, most promising first by the static estimate:
    when the budget runs out on a large model, the ones left unmeasured are the least likely
    to have won. Those at fewer threads than allowed come after all those at the threads
    allowed: on the largest model measured on 16 cores (MobileNetV2) the most threads won."""
    assert trial.plan is not None
    return fewer_threads(trial), static_cost(trial.plan, trial.delegates)


def _measured_selection(
    model: Model,
    shapes: Sequence[tuple[int, ...]],
    settings: AutoSettings,
    started: float,
    lookup: Lookup | None,
    delegates: Sequence[Delegate],
    skipped: list[dict[str, Any]],
    store: DecisionStore | None,
    source: ModelSource,
    key: dict[str, Any],
    memo: dict[str, Any],
) -> Selection:
    reference, trials = plan_trials(model, delegates, settings)
    report = ChoiceReport(reference, trials, skipped, settings, started, lookup)
    candidates = sorted(
        (t for t in trials if t.status != "rejected" and t.plan is not None), key=_promise
    )
    if not candidates:
        reference.status = "chosen"
        why = (
            "no installed delegate is a candidate here"
            if not trials
            else ("every candidate was rejected before timing")
        )
        summary = report.summary(
            "measured", reference, f"{why}; the CPU reference runs the model", 0.0
        )
        return Selection([], summary, refusals=_refusals(trials))
    policy = settings.policy

    def make_executor(trial: Trial) -> Executor:
        ex = Executor(
            model,
            model.main,
            trial.delegates,
            settings.allow_cpu_fallback,
            settings.preserve_all_tensors,
            settings.max_tensor_bytes,
        )
        for i in model.main.inputs:
            ex.shapes[i] = tuple(shapes[i])
        return ex

    gate: list[GateInput] = []
    try:
        gate = gate_inputs(model.main, shapes, settings.samples or ())
        spent = measure(reference, candidates, make_executor, gate, settings.budget_s, policy)
    except Unmeasurable as exc:
        for t in (reference, *trials):
            t.release()
        return _static_selection(model, settings, started, lookup, f"not measured: {exc}")
    eligible = (reference, *candidates) if settings.reference_allowed else candidates
    measured = [
        t for t in eligible if t.status in ("measuring", "measured") and t.median_s is not None
    ]
    if not measured:  # only where the reference may not win: every candidate failed
        for t in (reference, *trials):
            t.release()
        reference.status = "measured"
        why = "no candidate of the hardware asked for ran and agreed with the CPU reference"
        summary = report.summary("measured", reference, why, spent, gate)
        return Selection([], summary)
    best = min(measured, key=lambda t: t.median_s or 0.0)
    for t in measured:
        t.status = "chosen" if t is best else "measured"
    for t in (reference, *trials):
        if t is not best:
            t.release()
    ref_ms = 1e3 * (reference.median_s or 0.0)
    if best is reference:
        reason = (
            f"the CPU reference was fastest ({ref_ms:.3g} ms) of {len(measured)} measured "
            "candidate(s) that agree with it"
        )
    else:
        reason = (
            f"fastest of {len(measured)} measured candidate(s) that agree with the CPU "
            f"reference on all {len(gate)} input sets: {1e3 * (best.median_s or 0.0):.3g} ms "
            f"against the reference's {ref_ms:.3g} ms"
        )
    summary = report.summary("measured", best, reason, spent, gate)
    if store is not None and key:
        record = {
            "chosen": [
                {"name": d.name, "options": d.options.model_dump(mode="json")}
                for d in best.delegates
            ],
            "label": best.label,
            "summary": summary,
        }
        summary["cache"]["stored"] = store.save(source, key, record, memo)
    executor = best.executor
    best.release()
    return Selection(best.delegates, summary, executor, _refusals(trials))
