"""Run the conformance cases against a delegate and report pass / fail / not claimed."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from offload._delegate import Delegate
from offload._interpreter import Interpreter
from offload.testing._cases import CASES, OpCase, build_case

__all__ = ["CaseResult", "run_case", "run_conformance"]


@dataclass(frozen=True)
class CaseResult:
    case: str
    op: str
    dtype: str
    status: str  # "pass", "fail", "not-claimed", "excluded", "error"
    detail: str = ""


def _run(content: bytes, arrays: list[np.ndarray], delegate: Delegate | None) -> list[np.ndarray]:
    interp = Interpreter(
        model_content=content,
        experimental_delegates=[delegate] if delegate is not None else None,
        allow_cpu_fallback=delegate is None,
    )
    interp.allocate_tensors()
    for detail, value in zip(interp.get_input_details(), arrays):
        interp.set_tensor(detail["index"], value)
    interp.invoke()
    return [interp.get_tensor(d["index"]) for d in interp.get_output_details()]


def run_case(
    case: OpCase, delegate: Delegate, exclusions: Mapping[str, str] | None = None, seed: int = 0
) -> CaseResult:
    """Run one case on ``delegate`` and compare with the CPU reference."""
    exclusions = exclusions or {}
    if case.name in exclusions:
        return CaseResult(case.name, case.op, case.dtype, "excluded", exclusions[case.name])
    content, arrays = build_case(case, seed)
    probe = Interpreter(model_content=content, experimental_delegates=[delegate])
    plan = probe.plan()
    if plan.cpu_nodes():
        reason = plan.model_rejections.get(plan.delegates[0]) or next(
            iter(plan.node_reasons.get(plan.delegates[0], {}).values()), "not taken"
        )
        return CaseResult(case.name, case.op, case.dtype, "not-claimed", reason)
    try:
        want = _run(content, arrays, None)
        got = _run(content, arrays, delegate)
    except Exception as exc:  # a crashing delegate is a result to report, not a crash
        return CaseResult(case.name, case.op, case.dtype, "error", f"{type(exc).__name__}: {exc}")
    for k, (g, w) in enumerate(zip(got, want)):
        if g.shape != w.shape or g.dtype != w.dtype:
            return CaseResult(
                case.name,
                case.op,
                case.dtype,
                "fail",
                f"output {k}: got {g.dtype}{list(g.shape)}, reference {w.dtype}{list(w.shape)}",
            )
        diff = np.abs(g.astype(np.float64) - w.astype(np.float64))
        limit = case.atol + case.rtol * np.abs(w.astype(np.float64))
        if np.any(diff > limit):
            worst = int(np.argmax(diff - limit))
            return CaseResult(
                case.name,
                case.op,
                case.dtype,
                "fail",
                f"output {k}: max |diff| {diff.max():.3g} at flat index {worst} "
                f"(got {g.ravel()[worst]}, reference {w.ravel()[worst]}; "
                f"atol {case.atol}, rtol {case.rtol})",
            )
    return CaseResult(case.name, case.op, case.dtype, "pass")


def run_conformance(
    delegate: Delegate, exclusions: Mapping[str, str] | None = None, cases: Iterable[OpCase] = CASES
) -> list[CaseResult]:
    """Every case, in order; a case the delegate does not claim is reported, not failed."""
    return [run_case(case, delegate, exclusions) for case in cases]


def results_as_dicts(results: Iterable[CaseResult]) -> list[dict[str, Any]]:
    return [asdict(r) for r in results]
