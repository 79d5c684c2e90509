"""``delegates="auto"`` and offload's default delegates: which installed delegates run a model
here, chosen by measurement, remembered, and explained.

**Candidates.** The CPU reference alone; each installed delegate that is available here,
whose platforms include this one and whose capability for the model's type is not "no",
alone with CPU fallback; and up to :data:`MAX_PAIRS` priority pairs ``[a, b]`` where ``a``
leaves nodes on the CPU that ``b`` takes (ranked by the static cost below). Each delegate
gets its default options, plus the Interpreter's ``num_threads`` when its options have a
``num_threads`` field, and ``precision_loss_allowed=True`` when precision loss is allowed and
its options have that field (then that delegate's exact setting is a candidate of its own too).

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

**The default** (no delegate named): the remembered choice for this key where there is one;
otherwise ``litert`` where it is installed and available (LiteRT applies XNNPACK by default,
and offload applies LiteRT), else the static rule. Nothing is timed unless asked for.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from offload._auto_cache import DecisionStore, Lookup, ModelSource, versions_memo
from offload._auto_cache import device_identity as _device_identity
from offload._auto_cache import machine_identity as _machine_identity
from offload._auto_measure import (
    GATE_VERSION,
    AccuracyPolicy,
    GateInput,
    Trial,
    Unmeasurable,
    checked_samples,
    gate_inputs,
    measure,
)
from offload._executor import Executor
from offload._plan import Plan, make_plan
from offload._plan_cost import fragmentation, plan_figures
from offload._plugins import delegate_class, list_delegates, list_plugins

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

COST_FORMULA = "cpu_nodes + delegated_nodes / expected_speedup + partitions * partition_overhead"
DEFAULT_BUDGET_S = 2.0
MAX_PAIRS = 2
# Applied by default while no measured choice is stored: LiteRT's own kernels, as LiteRT
# applies XNNPACK by default.
DEFAULT_ENGINE = "litert"
CPU = "cpu"


def plan_cost(
    node_count: int, cpu_nodes: int, partition_sizes: list[int], speedup: float, overhead: float
) -> float:
    return cpu_nodes + sum(partition_sizes) / speedup + len(partition_sizes) * overhead


def _platform_ok(platforms: tuple[str, ...]) -> bool:
    return "any" in platforms or any(sys.platform.startswith(p) for p in platforms)


@dataclass
class AutoSettings:
    """What the Interpreter passes to the choice (all of it is part of a decision's key)."""

    budget_s: float = DEFAULT_BUDGET_S
    precision_loss_allowed: bool = False
    num_threads: int | None = None
    allow_cpu_fallback: bool = True
    preserve_all_tensors: bool = False
    max_tensor_bytes: int | None = None
    cache_dir: str | os.PathLike[str] | None = None
    use_cache: bool = True
    # offload.CompiledModel(hardware_accel=...): the kinds of hardware a delegate may compute
    # on (None: any), whether the CPU reference may run nodes (CPU in the set), and options
    # for the delegates of each kind and by name (CpuOptions, GpuOptions, vendor options).
    hardware: tuple[str, ...] | None = None
    reference_allowed: bool = True
    kind_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    delegate_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    # auto_inputs=: the user's own input sets for the accuracy gate, in the main subgraph's
    # input order, checked against the model's inputs (offload._auto_inputs).
    samples: Any = None

    @property
    def policy(self) -> AccuracyPolicy:
        return AccuracyPolicy(self.precision_loss_allowed)


@dataclass
class Selection:
    """The delegates chosen, the figures behind the choice, and, when the winner was measured,
    its prepared executor (so the interpreter does not prepare it twice)."""

    delegates: list[Delegate]
    summary: dict[str, Any]
    executor: Executor | None = None


# -- candidates ------------------------------------------------------------------------------


def _options_for(cls: type[Delegate], settings: AutoSettings, kind: str | None) -> dict[str, Any]:
    fields = cls.Options.model_fields
    options: dict[str, Any] = {}
    if settings.num_threads is not None and "num_threads" in fields:
        options["num_threads"] = settings.num_threads
    if settings.precision_loss_allowed and "precision_loss_allowed" in fields:
        options["precision_loss_allowed"] = True
    if kind is not None:
        options.update(
            (k, v) for k, v in settings.kind_options.get(kind, {}).items() if k in fields
        )
    return options


def _variants(
    cls: type[Delegate], settings: AutoSettings
) -> tuple[list[tuple[str | None, dict[str, Any]]], str]:
    """(kind, options) for each hardware kind asked for that ``cls`` can run on (one variant
    of no kind when any hardware goes), or ([], why none) ."""
    if settings.hardware is None:
        return [(None, {})], ""
    variants: list[tuple[str | None, dict[str, Any]]] = []
    for kind in settings.hardware:
        try:
            options = cls.options_for_hardware(kind)
        except Exception as exc:  # a broken hook must not break the choice
            return [], f"options_for_hardware({kind!r}) failed: {type(exc).__name__}: {exc}"
        if options is not None:
            variants.append((kind, dict(options)))
    if variants:
        return variants, ""
    declared = cls.CAPABILITIES.hardware
    return [], f"runs on {declared.upper()}, not on {' | '.join(settings.hardware).upper()}"


def candidate_delegates(
    model: Model, settings: AutoSettings
) -> tuple[list[Delegate], list[dict[str, Any]], dict[str, Any]]:
    """The installed delegates that may run ``model`` here, each built with its options;
    the others with why not; and every installed delegate's availability (for the key)."""
    chosen: list[Delegate] = []
    skipped: list[dict[str, Any]] = []
    availability: dict[str, Any] = {}
    for record in list_delegates():
        availability[record.name] = record.availability.available
        if not record.availability.available:
            skipped.append(
                {"delegate": record.name, "reason": f"unavailable: {record.availability.reason}"}
            )
            continue
        caps = record.cls.CAPABILITIES
        if not _platform_ok(caps.platforms):
            reason = f"platform {sys.platform} not in {list(caps.platforms)}"
            skipped.append({"delegate": record.name, "reason": reason})
            continue
        if caps.model_types[model.model_type].support == "no":
            reason = f"does not support {model.model_type} models"
            skipped.append({"delegate": record.name, "reason": reason})
            continue
        variants, why_not = _variants(record.cls, settings)
        if why_not:
            skipped.append({"delegate": record.name, "reason": why_not})
        extra, why_not = _auto_variants(record.cls)
        if why_not:
            skipped.append({"delegate": record.name, "reason": why_not})
        if settings.precision_loss_allowed and "precision_loss_allowed" in (
            record.cls.Options.model_fields
        ):
            # The exact setting stays a candidate: the fastest exact plan is the floor a
            # lossy one must beat (OpenVINO in f32 ran a face detector at 0.63x LiteRT's time,
            # while its bf16 missed the policy).
            extra.append({"precision_loss_allowed": False})
        for kind, hardware_options in variants:
            built: list[dict[str, Any]] = []
            for extra_options in ({}, *extra):
                options = {
                    **_options_for(record.cls, settings, kind),
                    **hardware_options,
                    **extra_options,
                    **settings.delegate_options.get(record.name, {}),
                }
                if options in built:
                    continue  # the user's own options made the variant the plain delegate
                built.append(options)
                try:
                    delegate = record.cls(options)
                except Exception as exc:  # one broken delegate must not break the choice
                    reason = f"could not be created: {type(exc).__name__}: {exc}"
                    if kind is not None:
                        reason = f"on {kind.upper()}: {reason}"
                    skipped.append({"delegate": record.name, "reason": reason})
                    continue
                found = delegate.capabilities.hardware
                if kind is not None and found != kind:
                    reason = (
                        f"with options {options} it runs on {found.upper()}, not {kind.upper()}"
                    )
                    skipped.append({"delegate": record.name, "reason": reason})
                    continue
                if extra_options:
                    _VARIANT_OF[delegate] = extra_options
                chosen.append(delegate)
    return chosen, skipped, availability


def _auto_variants(cls: type[Delegate]) -> tuple[list[dict[str, Any]], str]:
    """The delegate's declared extra option sets (Delegate.auto_variants), or why none."""
    try:
        declared = [dict(v) for v in cls.auto_variants()]
    except Exception as exc:  # a broken hook must not break the choice
        return [], f"auto_variants() failed: {type(exc).__name__}: {exc}"
    return [v for v in declared if v], ""


def _static_cost(plan: Plan, delegates: Sequence[Delegate]) -> float:
    by_name = dict(zip(plan.delegates, delegates))
    cost = float(len(plan.fallback_nodes()))
    for p in plan.partitions:
        caps = by_name[p.delegate].capabilities
        cost += len(p.nodes) / caps.expected_speedup + caps.partition_overhead
    return cost


# The extra options a candidate was built with (Delegate.auto_variants), for its label: two
# candidates of one delegate are told apart in every report by them.
_VARIANT_OF: weakref.WeakKeyDictionary[Delegate, dict[str, Any]] = weakref.WeakKeyDictionary()


def _label(delegates: Sequence[Delegate]) -> str:
    return "+".join(_name(d) for d in delegates) or CPU


def _name(delegate: Delegate) -> str:
    variant = _VARIANT_OF.get(delegate)
    if not variant:
        return delegate.name
    return f"{delegate.name}({', '.join(f'{k}={v}' for k, v in sorted(variant.items()))})"


def _plan_trial(model: Model, delegates: list[Delegate], settings: AutoSettings) -> Trial:
    trial = Trial(_label(delegates), delegates)
    try:
        trial.plan = make_plan(model, model.main, delegates)
    except Exception as exc:  # a broken delegate hook must not break the choice
        trial.status, trial.reason = "rejected", f"planning failed: {type(exc).__name__}: {exc}"
        return trial
    plan = trial.plan
    if not delegates:
        return trial
    taken = {p.delegate for p in plan.partitions}
    idle = [name for name in plan.delegates if name not in taken]
    if idle:
        why = plan.model_rejections.get(idle[0]) or "it takes no node of this model"
        trial.status, trial.reason = "rejected", f"{idle[0]} takes no node: {why}"
        return trial
    fragmented = fragmentation(plan)
    if fragmented:
        trial.status, trial.reason = "rejected", f"fragmented plan: {fragmented}"
        return trial
    fallback = plan.fallback_nodes()
    if fallback and not settings.allow_cpu_fallback:
        trial.status = "rejected"
        trial.reason = f"leaves {len(fallback)} node(s) on the CPU, and allow_cpu_fallback=False"
    return trial


def plan_trials(
    model: Model, delegates: Sequence[Delegate], settings: AutoSettings
) -> tuple[Trial, list[Trial]]:
    """The reference's trial and every other candidate's, planned (rejected ones marked)."""
    reference = _plan_trial(model, [], settings)
    singles = [_plan_trial(model, [d], settings) for d in delegates]
    viable = [t for t in singles if t.status != "rejected"]
    pairs: list[tuple[float, Trial]] = []
    for first in viable:
        assert first.plan is not None
        left = set(first.plan.fallback_nodes())
        if not left:
            continue
        for second in viable:
            if second is first:
                continue
            other = second.delegates[0]
            if other.name == first.delegates[0].name:
                continue  # two settings of one delegate: a plan names delegates by name
            nodes = first.plan.subgraph.nodes
            if not any(_takes(other, nodes[n], first.plan) for n in left):
                continue
            pair = _plan_trial(model, [first.delegates[0], other], settings)
            if pair.status != "rejected" and pair.plan is not None:
                pairs.append((_static_cost(pair.plan, pair.delegates), pair))
    pairs.sort(key=lambda item: item[0])
    return reference, singles + [t for _, t in pairs[:MAX_PAIRS]]


def _takes(delegate: Delegate, node: Any, plan: Plan) -> bool:
    try:
        return delegate.is_node_supported(node, plan.subgraph) is None
    except Exception:
        return False


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
            static_cost=_static_cost(trial.plan, trial.delegates),
        )
    if trial.prepare_s is not None or trial.first_s is not None:
        row.update(trial.timing())
    if trial.error is not None:
        row["error"] = dict(trial.error)
        row["error_by_input"] = {k: dict(v) for k, v in trial.error_by_input.items()}
    if trial.notes:
        row["warnings"] = trial.notes[:5]
    return row


# -- the static rule ----------------------------------------------------------------------------


def _static_choice(
    model: Model, reference: Trial, trials: Sequence[Trial], reference_allowed: bool = True
) -> tuple[Trial, str]:
    n = len(model.main.nodes)
    best, best_cost = reference, float(n) if reference_allowed else float("inf")
    for trial in trials:
        if trial.status == "rejected" or trial.plan is None or len(trial.delegates) != 1:
            continue
        cost = _static_cost(trial.plan, trial.delegates)
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
    summary = _summary(
        "static",
        best,
        f"{why}; {reason}" if why else reason,
        reference,
        trials,
        skipped,
        settings,
        started,
        lookup,
    )
    return Selection(best.delegates, summary)


def _summary(
    mode: str,
    best: Trial,
    reason: str,
    reference: Trial,
    trials: Sequence[Trial],
    skipped: list[dict[str, Any]],
    settings: AutoSettings,
    started: float,
    lookup: Lookup | None,
    measure_s: float | None = None,
    gate: Sequence[GateInput] = (),
) -> dict[str, Any]:
    candidates = [_row(t) for t in (reference, *trials)]
    prepared = [t.prepare_s for t in (reference, *trials) if t.prepare_s is not None]
    return {
        "mode": mode,
        "chosen": [d.name for d in best.delegates] or [CPU],
        "label": best.label,
        "reason": reason,
        "from_cache": False,
        "cache": lookup.summary() if lookup is not None else {"status": "not used"},
        "budget_s": settings.budget_s,
        "measure_s": measure_s,
        "prepare_s": sum(prepared) if prepared else None,
        "choosing_s": time.perf_counter() - started,
        "accuracy": settings.policy.describe(),
        "gate": _gate_summary(settings, gate),
        "candidates": candidates,
        "skipped": skipped,
        "formula": COST_FORMULA,
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


# -- the key ------------------------------------------------------------------------------------


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
            "delegates": {d.name: d.options.model_dump(mode="json") for d in delegates},
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
                return Selection(chosen, _cached_summary(lookup, settings, started))
    if default:
        return _default_selection(model, settings, started, lookup, delegates)
    return _measured_selection(
        model, shapes, settings, started, lookup, delegates, skipped, store, source, key, memo
    )


def _cached_summary(lookup: Lookup, settings: AutoSettings, started: float) -> dict[str, Any]:
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
    summary = {
        "mode": "default",
        "chosen": [engine.name],
        "label": engine.name,
        "reason": (
            f"{why}; {engine.name} is installed, so it applies, as LiteRT applies XNNPACK by "
            'default (delegates="auto" measures and remembers the fastest)'
        ),
        "from_cache": False,
        "cache": lookup.summary() if lookup is not None else {"status": "not used"},
        "budget_s": settings.budget_s,
        "choosing_s": time.perf_counter() - started,
        "candidates": [],
    }
    return Selection([engine], summary)


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
    # The most promising first by the static estimate: when the budget runs out on a large
    # model, the candidates left unmeasured are the least likely to have won.
    candidates = sorted(
        (t for t in trials if t.status != "rejected" and t.plan is not None),
        key=lambda t: _static_cost(t.plan, t.delegates),  # type: ignore[arg-type]
    )
    if not candidates:
        reference.status = "chosen"
        why = (
            "no installed delegate is a candidate here"
            if not trials
            else ("every candidate was rejected before timing")
        )
        summary = _summary(
            "measured",
            reference,
            f"{why}; the CPU reference runs the model",
            reference,
            trials,
            skipped,
            settings,
            started,
            lookup,
            0.0,
        )
        return Selection([], summary)
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
        summary = _summary(
            "measured",
            reference,
            "no candidate of the hardware asked for ran and agreed with the CPU reference",
            reference,
            trials,
            skipped,
            settings,
            started,
            lookup,
            spent,
            gate,
        )
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
    summary = _summary(
        "measured", best, reason, reference, trials, skipped, settings, started, lookup, spent, gate
    )
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
    return Selection(best.delegates, summary, executor)
