"""The candidates of ``delegates="auto"`` (see :mod:`offload._auto`): the installed delegates
that may run a model here, each built with its options and declared variants, the plans they
make (those rejected before timing, with why), and the static cost that ranks them."""

from __future__ import annotations

import sys
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from offload._auto_measure import Trial
from offload._plan import Plan, make_plan
from offload._plan_cost import fragmentation

if TYPE_CHECKING:
    from offload._delegate import Delegate
    from offload._graph import Model
    from offload._plugins import DelegateRecord
    from offload._settings import AutoSettings

__all__ = [
    "COST_FORMULA",
    "CPU",
    "MAX_PAIRS",
    "candidates_among",
    "fewer_threads",
    "label",
    "plan_cost",
    "plan_trials",
    "static_cost",
    "thread_counts",
]

COST_FORMULA = "cpu_nodes + delegated_nodes / expected_speedup + partitions * partition_overhead"
MAX_PAIRS = 2
CPU = "cpu"


# -- candidates ------------------------------------------------------------------------------


def _platform_ok(platforms: tuple[str, ...]) -> bool:
    return "any" in platforms or any(sys.platform.startswith(p) for p in platforms)


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


def candidates_among(
    records: Sequence[DelegateRecord], model: Model, settings: AutoSettings
) -> tuple[list[Delegate], list[dict[str, Any]], dict[str, Any]]:
    """Of the installed delegates' ``records``, those that may run ``model`` here, each built
    with its options; the others with why not; and every one's availability (for the key)."""
    chosen: list[Delegate] = []
    skipped: list[dict[str, Any]] = []
    availability: dict[str, Any] = {}
    for record in records:
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
            settings_of_kind = [
                (
                    {
                        **_options_for(record.cls, settings, kind),
                        **hardware_options,
                        **extra_options,
                        **settings.delegate_options.get(record.name, {}),
                    },
                    extra_options,
                )
                for extra_options in ({}, *extra)
            ]
            built: list[dict[str, Any]] = []
            for options, extra_options, fewer in _with_fewer_threads(record.cls, settings_of_kind):
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
                if fewer and found != "cpu":
                    continue  # its threads only run the ops the device leaves to the CPU
                if kind is not None and found != kind:
                    reason = (
                        f"with options {options} it runs on {found.upper()}, not {kind.upper()}"
                    )
                    skipped.append({"delegate": record.name, "reason": reason})
                    continue
                if extra_options:
                    _VARIANT_OF[delegate] = extra_options
                if fewer:
                    _FEWER_THREADS.add(delegate)
                chosen.append(delegate)
    return chosen, skipped, availability


def thread_counts(allowed: int) -> list[int]:
    """The thread counts auto measures where ``allowed`` threads are allowed: that many, and
    half as many. Measured on a 16-core Xeon, 7 face and MobileNet models, each engine alone,
    interleaved, twice: LiteRT's XNNPACK at 8 threads took 0.79-0.93x its time at 16 on the
    same five models both times (its pool's hand-offs cost more than small layers gain); 4
    threads beat 8 by at most 3%, and 1 thread never beat 2 (2 took 0.5-0.98x its time), so
    neither a third count nor always 1 earns its share of the budget. On this project's
    loaded 2-core VM, 1 thread of 2 took 0.60x (LiteRT) and 0.86x (OpenVINO) the time."""
    return [allowed] if allowed <= 1 else [allowed, allowed // 2]


def _with_fewer_threads(
    cls: type[Delegate], settings_of_kind: list[tuple[dict[str, Any], dict[str, Any]]]
) -> list[tuple[dict[str, Any], dict[str, Any], bool]]:
    """Each (options, variant) at the threads allowed, then each again at fewer (see
    :func:`thread_counts`; marked True) where the delegate has a ``num_threads`` option: the
    user's ``num_threads`` is the most threads a plan may use, not the count it must."""
    out = [(options, extra_options, False) for options, extra_options in settings_of_kind]
    field = cls.Options.model_fields.get("num_threads")
    if field is None:
        return out
    for options, extra_options in settings_of_kind:
        allowed = options.get("num_threads", field.default)
        if not isinstance(allowed, int) or isinstance(allowed, bool):
            continue
        for count in thread_counts(allowed)[1:]:
            fewer = {**extra_options, "num_threads": count}
            out.append(({**options, "num_threads": count}, fewer, True))
    return out


def fewer_threads(trial: Trial) -> bool:
    """Whether ``trial`` runs a delegate at fewer threads than allowed (measured after the
    candidates at the threads allowed, so a short budget spends itself on those first)."""
    return any(d in _FEWER_THREADS for d in trial.delegates)


def _auto_variants(cls: type[Delegate]) -> tuple[list[dict[str, Any]], str]:
    """The delegate's declared extra option sets (Delegate.auto_variants), or why none."""
    try:
        declared = [dict(v) for v in cls.auto_variants()]
    except Exception as exc:  # a broken hook must not break the choice
        return [], f"auto_variants() failed: {type(exc).__name__}: {exc}"
    return [v for v in declared if v], ""


# -- plans --------------------------------------------------------------------------------------


def plan_cost(
    node_count: int, cpu_nodes: int, partition_sizes: list[int], speedup: float, overhead: float
) -> float:
    return cpu_nodes + sum(partition_sizes) / speedup + len(partition_sizes) * overhead


def static_cost(plan: Plan, delegates: Sequence[Delegate]) -> float:
    by_name = dict(zip(plan.delegates, delegates))
    cost = float(len(plan.fallback_nodes()))
    for p in plan.partitions:
        caps = by_name[p.delegate].capabilities
        cost += len(p.nodes) / caps.expected_speedup + caps.partition_overhead
    return cost


# The extra options a candidate was built with (Delegate.auto_variants), for its label: two
# candidates of one delegate are told apart in every report by them.
_VARIANT_OF: weakref.WeakKeyDictionary[Delegate, dict[str, Any]] = weakref.WeakKeyDictionary()
# The candidates built at fewer threads than allowed (see thread_counts).
_FEWER_THREADS: weakref.WeakSet[Delegate] = weakref.WeakSet()


def label(delegates: Sequence[Delegate]) -> str:
    return "+".join(_name(d) for d in delegates) or CPU


def _name(delegate: Delegate) -> str:
    variant = _VARIANT_OF.get(delegate)
    if not variant:
        return delegate.name
    return f"{delegate.name}({', '.join(f'{k}={v}' for k, v in sorted(variant.items()))})"


def _plan_trial(model: Model, delegates: list[Delegate], settings: AutoSettings) -> Trial:
    trial = Trial(label(delegates), delegates)
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
                pairs.append((static_cost(pair.plan, pair.delegates), pair))
    pairs.sort(key=lambda item: item[0])
    return reference, singles + [t for _, t in pairs[:MAX_PAIRS]]


def _takes(delegate: Delegate, node: Any, plan: Plan) -> bool:
    try:
        return delegate.is_node_supported(node, plan.subgraph) is None
    except Exception:
        return False
