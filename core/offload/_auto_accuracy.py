"""The accuracy policy of ``delegates="auto"`` (see :mod:`offload._auto_measure`): when a
candidate's outputs agree with the CPU reference's, and by how much they differ."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from offload._tolerance import Distance, Limits, distance

if TYPE_CHECKING:
    from offload._graph import Subgraph

__all__ = ["AccuracyPolicy"]


@dataclass(frozen=True)
class AccuracyPolicy:
    """When a candidate's outputs agree with the CPU reference's.

    Without precision loss: float outputs within ``1e-4`` of the reference's largest magnitude
    (max |a - b| <= 1e-4 max |ref|, the tolerance the tests hold every delegate to), quantized
    outputs within 1 quantization step, other integers and booleans equal. Float outputs that
    dequantize an integer tensor are judged in that tensor's steps. With precision loss
    allowed: ``1e-2`` and 4 steps (float16 storage and arithmetic, float views of quantized
    models). NaN must be NaN where the reference has it, infinities equal. The distances are
    the house's one tolerance model (:mod:`offload._tolerance`); the limits, the messages and
    the top-1 rule below are auto's.

    Quantized outputs are held to the reference in absolute steps, which equals LiteRT's
    builtin kernels: an engine that rounds differently (XNNPACK's int8 is 11-63 steps from
    them on full-size int8 networks) is not within the policy, and exact engines
    (``litert(kernels=builtin)``) are the candidates that meet it.

    Classifier outputs (made by SOFTMAX or LOG_SOFTMAX, through QUANTIZE, DEQUANTIZE,
    RESHAPE or SQUEEZE, with two or more classes on the last axis) must also keep each row's
    top-1 class: the class the candidate ranks first must score, in the reference, within
    twice the exact policy's tolerance of the reference's best (a near-tie is no change).
    Without precision loss the value check implies this; with it, a candidate within 1e-2
    can still change the answer a classifier gives, and is rejected.
    """

    precision_loss_allowed: bool = False

    @property
    def float_rel(self) -> float:
        return 1e-2 if self.precision_loss_allowed else 1e-4

    @property
    def steps(self) -> int:
        return 4 if self.precision_loss_allowed else 1

    def describe(self) -> dict[str, Any]:
        return {
            "precision_loss_allowed": self.precision_loss_allowed,
            "float_relative": self.float_rel,
            "quantized_steps": self.steps,
        }

    def check(
        self, subgraph: Subgraph, found: Sequence[np.ndarray], expected: Sequence[np.ndarray]
    ) -> str | None:
        """None if every output agrees, else the first disagreement, with both sides."""
        producers = subgraph.producers()
        for t, a, b in zip(subgraph.outputs, found, expected):
            why = self._output(subgraph, producers, t, a, b)
            if not why and _class_scores(subgraph, producers, t):
                changed = self._top1_changes(subgraph, producers, t, a, b)
                if changed:
                    rows = b.size // b.shape[-1]
                    why = (
                        f"the top-1 class changes on {changed} of {rows} row(s) (class scores: "
                        "the output of a SOFTMAX)"
                    )
            if why:
                return f"output {t} ({subgraph.tensors[t].name!r}): {why}"
        return None

    def _top1_changes(
        self, subgraph: Subgraph, producers: dict[int, int], t: int, a: np.ndarray, b: np.ndarray
    ) -> int:
        """Rows whose top-1 class in ``a`` scores, in the reference ``b``, below the
        reference's best by more than twice the exact policy's tolerance."""
        if a.shape != b.shape or not a.size or a.ndim == 0 or a.shape[-1] < 2:
            return 0
        a2 = np.nan_to_num(a.reshape(-1, a.shape[-1]).astype(np.float64), nan=-np.inf)
        b2 = np.nan_to_num(b.reshape(-1, b.shape[-1]).astype(np.float64), nan=-np.inf)
        exact = AccuracyPolicy(False)
        if a.dtype.kind in "iu":
            tie = 2.0 * exact.steps
        elif scale := _dequantized_scale(subgraph, producers, t):
            tie = 2.0 * exact.steps * scale
        else:
            finite = np.isfinite(b2)
            peak = float(np.max(np.abs(b2[finite]))) if finite.any() else 0.0
            tie = 2.0 * exact.float_rel * peak
        picked = b2[np.arange(b2.shape[0]), np.argmax(a2, axis=1)]
        return int(np.count_nonzero(picked < b2.max(axis=1) - tie))

    def deviation(
        self, subgraph: Subgraph, found: Sequence[np.ndarray], expected: Sequence[np.ndarray]
    ) -> dict[str, float]:
        """How far ``found`` is from the reference, in the policy's units, over all outputs:
        ``relative`` (max |a - b| / max |reference| of float outputs), ``steps`` (of
        quantized outputs, and of float outputs that dequantize an integer tensor) and
        ``top1_changes`` (rows of classifier outputs whose top-1 class changed); a unit no
        output is judged in is left out. Outputs of another shape or dtype, or non-finite
        values, are not measured here (:meth:`check` names them)."""
        producers = subgraph.producers()
        worst: dict[str, float] = {}

        def keep(unit: str, value: float) -> None:
            worst[unit] = max(worst.get(unit, 0.0), value)

        for t, a, b in zip(subgraph.outputs, found, expected):
            if a.shape != b.shape or a.dtype != b.dtype or not a.size or a.dtype.kind in "OSUb":
                continue
            if _class_scores(subgraph, producers, t):
                keep("top1_changes", float(self._top1_changes(subgraph, producers, t, a, b)))
            d = _distance(subgraph, producers, t, a, b)
            if d.compared and d.unit in ("steps", "relative"):
                keep(d.unit, d.steps if d.unit == "steps" else _relative(d))
        return worst

    def _output(
        self,
        subgraph: Subgraph,
        producers: dict[int, int],
        t: int,
        a: np.ndarray,
        b: np.ndarray,
    ) -> str | None:
        d = _distance(subgraph, producers, t, a, b)
        if Limits(self.float_rel, self.steps, absolute_at_zero=True).within(d):
            return None
        if d.mismatch:
            return f"{a.dtype}{list(a.shape)} where the reference has {b.dtype}{list(b.shape)}"
        if a.dtype.kind in "OSUb":
            return "differs (values must be equal)"
        if a.dtype.kind in "iu":
            limit = f"{self.steps} step(s)" if d.unit == "steps" else "equal values (not quantized)"
            return f"differs by up to {int(d.max_abs)} step(s); the policy allows {limit}"
        if d.nan_mismatch:
            return "NaN where the reference has a number, or the reverse"
        if d.inf_mismatch:
            return "an infinity where the reference differs"
        if d.unit == "steps":
            return (
                f"differs by {d.steps:.2f} steps of the integer tensor it dequantizes; the "
                f"policy allows {self.steps}"
            )
        return (
            f"max |a - b| = {d.max_abs:.3g} ({_relative(d):.2e} of max |reference| = "
            f"{d.peak:.3g}); the policy allows {self.float_rel:g}"
        )


def _distance(
    subgraph: Subgraph, producers: dict[int, int], t: int, a: np.ndarray, b: np.ndarray
) -> Distance:
    """Output ``t``'s distance from the reference in the policy's units: integer outputs in
    steps when quantized (else exact), float outputs that dequantize an integer tensor in its
    steps, other floats relative to the reference's largest magnitude."""
    q = subgraph.tensors[t].quantization
    quantized = q is not None and bool(q.scale.size) and float(q.scale.max()) > 0
    return distance(b, a, quantized=quantized, step=_dequantized_scale(subgraph, producers, t))


def _relative(d: Distance) -> float:
    """The policy's relative error: against an all-zero reference, the absolute difference."""
    return d.relative if d.peak > 0 else d.max_abs


_SCORE_PASSTHROUGH = ("QUANTIZE", "DEQUANTIZE", "RESHAPE", "SQUEEZE")


def _class_scores(subgraph: Subgraph, producers: dict[int, int], t: int) -> bool:
    """Whether output ``t`` holds class scores (see :class:`AccuracyPolicy`)."""
    shape = subgraph.tensors[t].shape
    if len(shape) == 0 or shape[-1] < 2:
        return False
    seen = 0
    while t in producers and seen < 8:
        node = subgraph.nodes[producers[t]]
        if node.op in ("SOFTMAX", "LOG_SOFTMAX"):
            return True
        if node.op not in _SCORE_PASSTHROUGH or not node.inputs or node.inputs[0] < 0:
            return False
        t, seen = node.inputs[0], seen + 1
    return False


def _dequantized_scale(subgraph: Subgraph, producers: dict[int, int], t: int) -> float:
    """The step of the integer tensor a DEQUANTIZE output ``t`` is made from, else 0."""
    node = subgraph.nodes[producers[t]] if t in producers else None
    if node is None or node.op != "DEQUANTIZE" or not node.inputs or node.inputs[0] < 0:
        return 0.0
    source = subgraph.tensors[node.inputs[0]]
    q = source.quantization
    if source.dtype.kind not in "iu" or q is None or not q.scale.size:
        return 0.0
    return float(np.max(q.scale))
