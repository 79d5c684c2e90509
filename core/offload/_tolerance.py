"""One tolerance model: how far a candidate tensor is from the reference's, in the units its
type is judged in, and whether that is within limits.

Every comparison of outputs in the house goes through here: auto's accuracy policy, the
per-node diff, ``offload sweep``'s agreement, the conformance kit and the fuzz targets. Each
keeps its own limits and its own report; the units and the rules below are this module's.

Units (:func:`distance`):

* **relative** -- floats and complex: max |candidate - reference| over the values finite in
  both, relative to max |reference| there; against a reference with no magnitude (all zeros,
  or nothing finite) any difference is infinitely relative, unless the limits say to hold the
  absolute difference instead (:attr:`Limits.absolute_at_zero`).
* **steps** -- quantized integer codes: max |candidate - reference| in codes (computed without
  wrapping, whatever the integer type); floats that dequantize an integer tensor: in steps of
  that tensor's scale (a float's rounding of the dequantized values is allowed
  :data:`DEQUANTIZED_SLACK` of a step). Integers and booleans whose quantization the caller
  does not know are counted in steps too.
* **exact** -- integers known not to be quantized, booleans so known, strings and other
  objects: equal or not.

NaN against NaN, and an infinity against the same infinity, are no difference; a NaN or an
infinity against anything else is a mismatch (:attr:`Distance.nan_mismatch`,
:attr:`Distance.inf_mismatch`) and exceeds every limit. Arrays of another shape or dtype are
not measured (:attr:`Distance.mismatch`).

:func:`excess` is the same distance per value against numpy's ``allclose`` rule (``atol +
rtol |reference|``), for a judge that counts the values out of tolerance (the conformance kit).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

__all__ = ["DEQUANTIZED_SLACK", "Distance", "Limits", "Unit", "differences", "distance", "excess"]

Unit = Literal["relative", "steps", "exact"]
# Floats that dequantize an integer tensor: the float rounding of the dequantized values.
DEQUANTIZED_SLACK = 1e-3


@dataclass(frozen=True)
class Distance:
    """How far a candidate array is from the reference array of one tensor (see the module).

    ``max_abs``: max |candidate - reference| over the values finite in both (integers: codes).
    ``peak``: max |reference| over the same values. ``equal``: the fraction of values equal
    (floats: bit-identical, so -0.0 against 0.0 or two NaN payloads are told apart).
    ``compared``: how many values are finite in both. ``step``: the value of one step (1 for
    integer codes). ``mismatch``: ``"shape"`` or ``"dtype"`` when the arrays differ in that,
    and nothing else is measured.
    """

    unit: Unit
    max_abs: float = 0.0
    peak: float = 0.0
    equal: float = 1.0
    compared: int = 0
    step: float = 1.0
    nan_mismatch: bool = False
    inf_mismatch: bool = False
    mismatch: Literal["", "shape", "dtype"] = ""

    @property
    def special_mismatch(self) -> bool:
        """A NaN or an infinity against anything but itself."""
        return self.nan_mismatch or self.inf_mismatch

    @property
    def relative(self) -> float:
        """``max_abs`` relative to ``peak``; with ``peak`` 0, inf for any difference."""
        if self.peak > 0:
            return self.max_abs / self.peak
        return np.inf if self.max_abs > 0 else 0.0

    @property
    def steps(self) -> float:
        """``max_abs`` in steps."""
        return self.max_abs / self.step


@dataclass(frozen=True)
class Limits:
    """The largest distance a user accepts: ``relative`` for floats, ``steps`` for quantized
    values; exact values must be equal, and a mismatch of shape, dtype, NaN or infinity is
    never within limits. ``absolute_at_zero``: against a reference with no magnitude, hold
    the absolute difference to ``relative`` (else any difference there exceeds it)."""

    relative: float
    steps: float
    absolute_at_zero: bool = False

    def within(self, d: Distance) -> bool:
        if d.mismatch or d.special_mismatch:
            return False
        if d.unit == "relative":
            at_zero = self.absolute_at_zero and d.peak == 0
            return (d.max_abs if at_zero else d.relative) <= self.relative
        if d.unit == "steps":  # integer codes are whole steps: the slack is for floats
            return d.steps <= self.steps + DEQUANTIZED_SLACK
        return d.equal == 1.0


def _unit(dtype: np.dtype, quantized: bool | None, step: float) -> Unit:
    if dtype.kind in "fc":
        return "steps" if step > 0 else "relative"
    if dtype.kind in "iub":
        return "exact" if quantized is False else "steps"
    return "exact"


def differences(ref: np.ndarray, cand: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """|cand - ref| per value as float64 (integers without wrapping), and where a NaN or an
    infinity meets anything but itself (its difference is then inf; NaN against NaN and an
    infinity against itself are 0)."""
    if ref.dtype.kind in "iub":
        a, b = ref.astype(np.uint64), cand.astype(np.uint64)  # two's complement: exact below
        larger = ref >= cand
        diff = np.where(larger, a - b, b - a).astype(np.float64)
        return diff, np.zeros(ref.shape, bool)
    wide = np.complex128 if ref.dtype.kind == "c" else np.float64
    a, b = ref.astype(wide), cand.astype(wide)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(a - b)
        same_special = (np.isnan(a) & np.isnan(b)) | ((a == b) & ~np.isfinite(a))
    special = ~(np.isfinite(a) & np.isfinite(b))
    mismatch = special & ~same_special
    diff = np.where(special, np.where(mismatch, np.inf, 0.0), diff)
    return diff, mismatch


def distance(
    reference: np.ndarray,
    candidate: np.ndarray,
    *,
    quantized: bool | None = None,
    step: float = 0.0,
) -> Distance:
    """How far ``candidate`` is from ``reference``, in the units the module describes.

    ``quantized``: whether an integer (or boolean) tensor holds quantized codes (``None``:
    not known, counted in steps). ``step``: for a float tensor that dequantizes an integer
    tensor, that tensor's scale (the distance is then in its steps).
    """
    ref, cand = np.asarray(reference), np.asarray(candidate)
    unit = _unit(ref.dtype, quantized, step)
    if ref.shape != cand.shape:
        return Distance(unit, mismatch="shape")
    if ref.dtype != cand.dtype:
        return Distance(unit, mismatch="dtype")
    if ref.size == 0:
        return Distance(unit, step=step or 1.0)
    if ref.dtype.kind not in "fciub":  # strings and other objects: equal or not
        same = ref == cand
        equal = float(np.mean(same))
        return Distance(unit, 0.0 if equal == 1.0 else np.inf, equal=equal, compared=ref.size)
    diff, mismatch = differences(ref, cand)
    if ref.dtype.kind == "f":
        bits = np.dtype(f"u{ref.dtype.itemsize}")
        equal = float(np.mean(ref.view(bits) == cand.view(bits)))
    else:
        equal = float(np.mean(ref == cand))
    if ref.dtype.kind in "iub":
        return Distance(unit, float(diff.max()), equal=equal, compared=ref.size)
    wide = ref.astype(np.complex128 if ref.dtype.kind == "c" else np.float64)
    finite = np.isfinite(wide) & np.isfinite(cand)
    nan_mismatch = not np.array_equal(np.isnan(wide), np.isnan(cand))
    compared = int(np.count_nonzero(finite))
    return Distance(
        unit,
        float(diff[finite].max(initial=0.0)),
        float(np.abs(wide[finite]).max(initial=0.0)),
        equal,
        compared,
        step or 1.0,
        nan_mismatch,
        bool(np.any(mismatch & ~(np.isnan(wide) | np.isnan(cand)))),
    )


def excess(reference: np.ndarray, candidate: np.ndarray, atol: float, rtol: float) -> np.ndarray:
    """Per value, how far |candidate - reference| is past ``atol + rtol |reference|`` (numpy's
    ``allclose`` rule): above 0 is out of tolerance. A NaN or an infinity against anything but
    itself is ``inf``; against itself ``-inf``. The arrays must have one shape and dtype."""
    ref, cand = np.asarray(reference), np.asarray(candidate)
    diff, mismatch = differences(ref, cand)
    with np.errstate(invalid="ignore", over="ignore"):
        magnitude = np.abs(ref.astype(np.complex128 if ref.dtype.kind == "c" else np.float64))
        over = diff - (atol + rtol * magnitude)
    return np.where(mismatch, np.inf, np.where(np.isfinite(magnitude), over, -np.inf))
