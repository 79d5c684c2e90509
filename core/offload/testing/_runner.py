"""Run the conformance cases against a delegate and judge its declaration op by op.

Per case, the delegate's own answer (the plan it makes for the single-op model) is set beside
what its declaration alone says (``delegate.capabilities`` checked by the core):

* taken: the outputs are compared with the CPU reference -> ``pass``, ``fail`` or ``error``
  (the delegate raised). A case taken although the declaration rejects it is run and judged
  on its numbers; the result notes the too-narrow declaration, which is not a failure.
* declared but refused (the delegate's ``check_node`` said no) -> ``refused``, with the reason.
* not declared and not taken -> ``not-claimed``, with the declaration's reason.
* named in ``exclusions`` -> ``excluded``, with the reason given.

With ``exact``, integer and bool outputs must equal the reference's bit for bit (0 steps),
whatever the case's tolerance: for integer delegates that claim LiteRT's arithmetic. Float
outputs keep the case's tolerance (a float kernel may sum in another order).

Per op the delegate declares, :class:`OpReport` counts the cases and gives a verdict. Strict
mode also fails an op that is declared but that no case exercises, or that every case its
declaration accepts was refused: such a declaration is unchecked, and a run that says nothing
about it must not look green.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, cast

import numpy as np

from offload._capabilities import Capabilities, check_node
from offload._delegate import Delegate
from offload._graph import ModelType
from offload._interpreter import Interpreter
from offload._plan import Plan
from offload._tolerance import excess
from offload.errors import PartitionCostWarning
from offload.testing._cases import CASES, KIT_GAPS, OpCase, build_case

__all__ = [
    "CaseResult",
    "ConformanceReport",
    "OpReport",
    "run_case",
    "run_conformance",
    "summarize",
]

TAKEN = ("pass", "fail", "error")
# Verdicts that fail a run: always, and only under strict.
FAILING = ("fail",)
STRICT_FAILING = ("fail", "never-exercised", "all-refused")


@dataclass(frozen=True)
class CaseResult:
    """One case on one delegate: ``status`` is pass, fail, error, refused, not-claimed or
    excluded; ``declared`` is whether the delegate's declaration alone accepts the case."""

    case: str
    op: str
    dtype: str
    status: str
    detail: str = ""
    declared: bool = True


@dataclass(frozen=True)
class OpReport:
    """What the cases say about one declared (or taken) op.

    ``verdict``: ``ok`` (at least one case passed, none failed), ``fail``, ``never-exercised``
    (declared, but no case falls inside the declaration), ``all-refused`` (every case inside
    the declaration was refused), ``excluded``, ``no-kit-case`` (an op the kit cannot build a
    case for yet, see ``KIT_GAPS``) or ``undeclared`` (taken by the delegate, not declared).
    """

    op: str
    declared: bool
    passed: int
    failed: int
    refused: int
    not_claimed: int
    excluded: int
    verdict: str
    detail: str = ""
    refusals: tuple[str, ...] = ()

    def fails(self, strict: bool) -> bool:
        return self.verdict in (STRICT_FAILING if strict else FAILING)


@dataclass(frozen=True)
class ConformanceReport:
    """Every case result and the per-op verdicts of one delegate."""

    delegate: str
    results: tuple[CaseResult, ...]
    ops: tuple[OpReport, ...]

    def failures(self, strict: bool = True) -> list[str]:
        """One line per failing case and per failing op; empty when the run passes."""
        lines = [
            f"{r.case} ({r.op} {r.dtype}): {r.status}: {r.detail}"
            for r in self.results
            if r.status in ("fail", "error")
        ]
        lines += [
            f"{o.op}: {o.verdict}: {o.detail}"
            for o in self.ops
            if o.fails(strict) and o.verdict != "fail"
        ]
        return lines

    def ok(self, strict: bool = True) -> bool:
        return not self.failures(strict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "delegate": self.delegate,
            "cases": [asdict(r) for r in self.results],
            "ops": [asdict(o) for o in self.ops],
        }


def _without_partition_limits(delegate: Delegate) -> Delegate:
    """A copy whose single-node partitions are kept: every case is one node, and a
    ``min_nodes_per_partition`` of 2 (Core ML's default) would refuse them all for a reason
    that says nothing about the op."""
    options = delegate.options
    fields = getattr(type(options), "model_fields", {})
    update = {
        k: v
        for k, v in (("min_nodes_per_partition", 1), ("max_delegated_partitions", None))
        if k in fields and getattr(options, k) != v
    }
    if not update:
        return delegate
    clone = copy.copy(delegate)
    clone.options = options.model_copy(update=update)
    return clone


def _declared_reason(capabilities: Capabilities, plan: Plan) -> str | None:
    """Why the declaration alone rejects the case's node, or None if it accepts it."""
    support = capabilities.model_types.get(cast(ModelType, plan.model_type))
    if support is not None and support.support == "no":
        why = f" ({support.reason})" if support.reason else ""
        return f"declares no support for {plan.model_type} models{why}"
    node = plan.subgraph.nodes[0]
    return check_node(capabilities.op(node.op), node, plan.subgraph)


def _run(content: bytes, arrays: list[np.ndarray], delegate: Delegate | None) -> list[np.ndarray]:
    interp = Interpreter(
        model_content=content,
        # No delegate: the CPU reference alone, never offload's default delegates.
        delegates=[delegate] if delegate is not None else [],
        allow_cpu_fallback=delegate is None,
    )
    interp.allocate_tensors()
    for detail, value in zip(interp.get_input_details(), arrays):
        # A copy: ops such as LSTM write their new state back into an input.
        interp.set_tensor(detail["index"], value.copy())
    interp.invoke()
    return [interp.get_tensor(d["index"]).copy() for d in interp.get_output_details()]


def _tolerance(case: OpCase, dtype: np.dtype, exact: bool) -> tuple[float, float]:
    """(atol, rtol) of an output: the case's, or none for integer and bool outputs when
    ``exact``."""
    if exact and (np.issubdtype(dtype, np.integer) or dtype == np.bool_):
        return 0.0, 0.0
    return case.atol, case.rtol


def _compare(
    case: OpCase, got: Sequence[np.ndarray], want: Sequence[np.ndarray], exact: bool = False
) -> str | None:
    """None when every output is within its tolerance (:func:`_tolerance`, per value as numpy's
    ``allclose`` has it: :func:`offload._tolerance.excess`), else what differs."""
    if len(got) != len(want):
        return f"got {len(got)} outputs, reference {len(want)}"
    for k, (g, w) in enumerate(zip(got, want)):
        if g.shape != w.shape or g.dtype != w.dtype:
            return f"output {k}: got {g.dtype}{list(g.shape)}, reference {w.dtype}{list(w.shape)}"
        atol, rtol = _tolerance(case, w.dtype, exact)
        over = excess(w, g, atol, rtol)  # a NaN or infinity against anything else: inf
        bad = over > 0
        if np.any(bad):
            worst = int(np.argmax(over))
            where = np.unravel_index(worst, g.shape) if g.ndim else ()
            return (
                f"output {k}: {int(np.count_nonzero(bad))} of {g.size} values off, worst at "
                f"{list(map(int, where))}: got {g.ravel()[worst]}, reference {w.ravel()[worst]} "
                f"({'exact' if (atol, rtol) == (0.0, 0.0) else f'atol {atol}, rtol {rtol}'})"
            )
    return None


def run_case(
    case: OpCase,
    delegate: Delegate,
    exclusions: Mapping[str, str] | None = None,
    seed: int = 0,
    *,
    exact: bool = False,
) -> CaseResult:
    """Run one case on ``delegate`` and compare with the CPU reference.

    ``exclusions`` maps case names, or op names (all of that op's cases), to a reason.
    ``exact``: integer and bool outputs must match bit for bit (see the module docstring).
    """
    exclusions = exclusions or {}
    for key in (case.name, case.op):
        if key in exclusions:
            return CaseResult(case.name, case.op, case.dtype, "excluded", exclusions[key])
    delegate = _without_partition_limits(delegate)

    def result(status: str, detail: str = "", declared: bool = True) -> CaseResult:
        return CaseResult(case.name, case.op, case.dtype, status, detail, declared)

    content, arrays = build_case(case, seed)
    with warnings.catch_warnings():
        # A one-node plan is "fragmented" by design; the cost warning says nothing here.
        warnings.simplefilter("ignore", PartitionCostWarning)
        return _judge(case, delegate, content, arrays, result, exact)


def _judge(
    case: OpCase,
    delegate: Delegate,
    content: bytes,
    arrays: list[np.ndarray],
    result: Callable[..., CaseResult],
    exact: bool,
) -> CaseResult:
    """Plan the case's model with ``delegate``, run it both ways and compare."""
    try:
        plan = Interpreter(model_content=content, experimental_delegates=[delegate]).plan()
        declared_reason = _declared_reason(delegate.capabilities, plan)
    except Exception as exc:  # a delegate's own hooks may raise; that is a result
        return result("error", f"planning raised {type(exc).__name__}: {exc}")
    name = plan.delegates[0]
    if not plan.steps:  # the core computed the node before planning; a kit case, not a claim
        return result("not-claimed", "folded into a constant by the core before planning", False)
    if 0 not in plan.nodes_of(name):
        reason = plan.model_rejections.get(name) or plan.node_reasons.get(name, {}).get(0, "")
        if declared_reason is not None:
            return result("not-claimed", declared_reason, declared=False)
        return result("refused", reason or "not taken (no reason given)")
    note = (
        ""
        if declared_reason is None
        else f" (taken although its declaration rejects it: {declared_reason})"
    )
    try:
        want = _run(content, arrays, None)
        got = _run(content, arrays, delegate)
    except Exception as exc:  # a crashing delegate is a result to report, not a crash
        return result("error", f"{type(exc).__name__}: {exc}{note}", declared_reason is None)
    problem = _compare(case, got, want, exact)
    if problem is not None:
        return result("fail", problem + note, declared_reason is None)
    return result("pass", note.strip(" ()"), declared_reason is None)


def _op_report(
    op: str, declared: bool, results: list[CaseResult], excluded_op: str | None
) -> OpReport:
    def count(*statuses: str) -> int:
        return sum(r.status in statuses for r in results)

    passed, failed, refused = count("pass"), count("fail", "error"), count("refused")
    refusals = tuple(dict.fromkeys(r.detail for r in results if r.status == "refused"))
    counts = (passed, failed, refused, count("not-claimed"), count("excluded"))
    if failed:
        names = ", ".join(r.case for r in results if r.status in ("fail", "error"))
        verdict, detail = "fail", f"wrong or crashed on {names}"
    elif excluded_op is not None:
        verdict, detail = "excluded", excluded_op
    elif not declared:
        verdict, detail = "undeclared", "taken by the delegate but absent from its declaration"
    elif passed:
        verdict, detail = "ok", ""
    elif refused:
        verdict = "all-refused"
        detail = f"declared, but every case inside the declaration was refused: {refusals[0]}"
    elif op in KIT_GAPS:
        verdict, detail = "no-kit-case", KIT_GAPS[op]
    else:
        outside = [r for r in results if r.status == "not-claimed"]
        why = f"; e.g. {outside[0].case}: {outside[0].detail}" if outside else ""
        verdict = "never-exercised"
        detail = (
            f"declared, but no case falls inside the declaration ({len(results)} case(s) of "
            f"{op}{why}); add a case (run_conformance(cases=...)) or exclude the op with a reason"
        )
    return OpReport(op, declared, *counts, verdict=verdict, detail=detail, refusals=refusals)


def summarize(
    delegate: Delegate,
    results: Iterable[CaseResult],
    exclusions: Mapping[str, str] | None = None,
) -> ConformanceReport:
    """Per-op verdicts for the ops ``delegate`` declares and the ops it took."""
    results = tuple(results)
    exclusions = exclusions or {}
    declared = [cap.op for cap in delegate.capabilities.ops]
    taken = [r.op for r in results if r.status in TAKEN and r.op not in declared]
    ops = tuple(
        _op_report(
            op,
            op in declared,
            [r for r in results if r.op == op],
            exclusions.get(op),
        )
        for op in dict.fromkeys([*declared, *taken])
    )
    return ConformanceReport(delegate.name, results, ops)


def run_conformance(
    delegate: Delegate,
    exclusions: Mapping[str, str] | None = None,
    cases: Iterable[OpCase] = CASES,
    seed: int = 0,
    *,
    exact: bool = False,
) -> ConformanceReport:
    """Every case in order, then the per-op verdicts; see :class:`ConformanceReport`.
    ``exact``: integer and bool outputs must match the reference bit for bit."""
    results = [run_case(case, delegate, exclusions, seed, exact=exact) for case in cases]
    return summarize(delegate, results, exclusions)
