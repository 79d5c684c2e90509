"""What a per-node diff finds (:func:`offload.diff_per_node`): how two arrays of one tensor
differ (:class:`TensorComparison`), one row per node output (:class:`NodeDiff`) and the whole
result with its verdicts and JSON (:class:`PerNodeDiff`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np

from offload._formatting import json_safe
from offload._tolerance import Limits, distance

__all__ = [
    "TensorComparison",
    "compare_tensors",
    "NodeDiff",
    "PerNodeDiff",
    "Status",
    "Locality",
    "format_shape",
]

Status = Literal["agree", "diverged", "failed", "hidden", "not_run"]
Locality = Literal["local", "inherited", "n/a"]


# -- comparing two arrays -------------------------------------------------------------------


@dataclass(frozen=True)
class TensorComparison:
    """How a candidate array differs from the reference array of the same tensor.

    ``kind`` is ``"float"`` (also complex) or ``"integer"`` (also bool; quantized tensors are
    compared on their integer codes, so an error is a number of quantization steps).
    ``max_error``: floats, max |candidate - reference|; integers, max |steps|.
    ``relative_error``: floats only, ``max_error / max |reference|``.
    ``equal``: the fraction of elements bit-identical (floats) or exact (integers).
    ``exceeds``: over the tolerance (also true for a shape or dtype mismatch, with ``note``).
    """

    kind: Literal["float", "integer", "other"]
    max_error: float | None
    relative_error: float | None
    equal: float | None
    exceeds: bool
    note: str = ""


def compare_tensors(
    reference: np.ndarray, candidate: np.ndarray, tolerance: float, tolerance_steps: int
) -> TensorComparison:
    """Compare one tensor's values (:func:`offload._tolerance.distance`); floats against
    ``tolerance`` (relative to the largest reference magnitude), integers against
    ``tolerance_steps``. A NaN or an infinity against anything but itself is an infinite
    error."""
    ref, cand = np.asarray(reference), np.asarray(candidate)
    kind: Literal["float", "integer", "other"] = (
        "float" if ref.dtype.kind in "fc" else "integer" if ref.dtype.kind in "biu" else "other"
    )
    d = distance(ref, cand)
    if d.mismatch == "shape":
        note = f"shape {format_shape(cand.shape)}, reference {format_shape(ref.shape)}"
        return TensorComparison(kind, None, None, None, True, note)
    if d.mismatch == "dtype":
        note = f"dtype {cand.dtype}, reference {ref.dtype}"
        return TensorComparison(kind, None, None, None, True, note)
    exceeds = not Limits(tolerance, tolerance_steps).within(d)
    if kind == "float":
        max_error = np.inf if d.special_mismatch else d.max_abs
        relative = np.inf if d.special_mismatch else d.relative
        return TensorComparison(kind, max_error, relative, d.equal, exceeds)
    if kind == "integer":
        return TensorComparison(kind, d.max_abs, None, d.equal, exceeds)
    return TensorComparison(kind, 0.0 if ref.size == 0 else None, None, d.equal, exceeds)


# -- results --------------------------------------------------------------------------------


@dataclass(frozen=True)
class NodeDiff:
    """One output tensor of one node, as the two configurations computed it.

    ``status``: ``agree``; ``diverged`` (over tolerance, or a shape/dtype mismatch);
    ``failed`` (this configuration stopped with an error here: the first node whose output
    it lacks); ``hidden`` (inside a delegate partition of either configuration, see
    ``note``); ``not_run`` (after a failure).
    ``locality`` (divergent rows only): ``local``, ``inherited`` or ``n/a``.
    ``local``: the candidate's CPU kernel re-run on the reference's inputs, compared with
    the reference's output (when it was computed).
    """

    node: int
    op: str
    tensor: int
    name: str
    shape: tuple[int, ...]
    dtype: str
    status: Status
    comparison: TensorComparison | None = None
    locality: Locality | None = None
    local: TensorComparison | None = None
    note: str = ""

    @property
    def diverged(self) -> bool:
        return self.status in ("diverged", "failed")

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["shape"] = list(self.shape)
        return data


def _inexact_float(row: NodeDiff) -> bool:
    """A float row whose values were compared and are not all bit-identical."""
    cmp = row.comparison
    return cmp is not None and cmp.kind == "float" and cmp.equal is not None and cmp.equal < 1


@dataclass(frozen=True)
class PerNodeDiff:
    """The result of :func:`diff_per_node`: every row, in execution order, and the verdicts."""

    model: str
    reference: str
    candidate: str
    seed: int
    input_kind: str
    tolerance: float
    tolerance_steps: int
    subgraphs: int
    rows: tuple[NodeDiff, ...]
    # "reference" / "candidate" -> the error its invoke stopped with
    errors: dict[str, str] = field(default_factory=dict)
    # whether divergent rows were re-run on the reference's inputs (candidate "cpu" only)
    locality_checked: bool = False
    # "reference" / "candidate" -> for an offload configuration: per delegate its "nodes",
    # "partitions" and "rejected_model" reason, and "cpu_nodes"
    delegation: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def divergent_rows(self) -> list[NodeDiff]:
        return [r for r in self.rows if r.diverged]

    @property
    def first_divergence(self) -> NodeDiff | None:
        """The first row, in execution order, over tolerance (or where a run failed)."""
        return next(iter(self.divergent_rows), None)

    @property
    def first_local_divergence(self) -> NodeDiff | None:
        """The first divergent row whose node disagrees even on the reference's inputs."""
        return next((r for r in self.divergent_rows if r.locality == "local"), None)

    @property
    def first_inexact_float(self) -> NodeDiff | None:
        """The first float tensor, before the first divergence, that is not bit-identical,
        however far under ``tolerance``: the likely culprit when the first divergence is not
        local (``inherited``, or ``n/a``); ``None`` otherwise, or when every observable float
        tensor before it is bit-identical.

        A QUANTIZE (or a hybrid op quantizing its input) fed by float ops turns a last-bit
        difference into a whole step, so an integer tensor can diverge while every float
        before it is within tolerance; no node is then local, and this names where the
        numbers first parted.
        """
        first = self.first_divergence
        if first is None or first.locality == "local":
            return None  # nothing to explain, or the divergent node is wrong by itself
        for row in self.rows:
            if row is first:
                return None
            if _inexact_float(row):
                return row
        return None

    @property
    def diverged(self) -> bool:
        return bool(self.divergent_rows or self.errors)

    def summary(self) -> dict[str, int]:
        counts = {s: 0 for s in ("agree", "diverged", "failed", "hidden", "not_run")}
        for r in self.rows:
            counts[r.status] += 1
        for loc in ("local", "inherited", "n/a"):
            counts[loc] = sum(r.locality == loc for r in self.rows)
        counts["rows"] = len(self.rows)
        return counts

    def to_dict(self) -> dict[str, Any]:
        first, first_local = self.first_divergence, self.first_local_divergence
        inexact = self.first_inexact_float
        return {
            "model": self.model,
            "reference": self.reference,
            "candidate": self.candidate,
            "seed": self.seed,
            "input": self.input_kind,
            "tolerance": self.tolerance,
            "tolerance_steps": self.tolerance_steps,
            "subgraphs": self.subgraphs,
            "compared_subgraph": 0,
            "diverged": self.diverged,
            "errors": dict(self.errors),
            "locality_checked": self.locality_checked,
            "delegation": self.delegation,
            "summary": self.summary(),
            "first_divergence": first.to_dict() if first else None,
            "first_local_divergence": first_local.to_dict() if first_local else None,
            "first_inexact_float": inexact.to_dict() if inexact else None,
            "rows": [r.to_dict() for r in self.rows],
        }

    def to_json(self, indent: int | None = 2) -> str:
        """The result as JSON; infinities and NaN (no JSON spelling) become null."""
        return json.dumps(json_safe(self.to_dict()), indent=indent, allow_nan=False)


def format_shape(shape: Sequence[int]) -> str:
    """A shape as the reports write it: ``1x224x224x3``, or ``scalar``."""
    return "x".join(str(int(d)) for d in shape) if len(shape) else "scalar"
