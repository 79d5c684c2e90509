"""Seeded inputs for a model: the one maker behind auto's accuracy gate, the per-node diff,
``offload sweep``'s ``random`` data set, the command line's benchmarks, the demo and the
benchmark scripts.

:func:`draw_inputs` fills each input from a numpy generator as a :class:`Family` says: float
inputs from the family's real-valued draw, quantized integer inputs with that draw quantized
with their own scale and zero point (or over their full code range), other integers small and
non-negative (safe as indices and sizes), booleans at random. The families are data:

* auto's gate (:data:`GATE_FAMILIES`, :data:`FULL_CODE_RANGE`): uniform(-1, 1),
  uniform(0, 1), N(0, 1), N(0, 4), and the full code range of quantized inputs;
* the tools' (:data:`INPUT_FAMILIES`, one per ``--input`` kind of :data:`INPUT_KINDS`): N(0, 1)
  by default (:func:`random_inputs`), U(-1, 1), U(0, 1) and N(0, 1) * 100.

The same seed gives the same arrays wherever they are drawn, and each family draws, value for
value, what its user drew before the families met here: auto's stored decisions and the
tools' runs across versions compare alike.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from offload.errors import UsageError

if TYPE_CHECKING:
    from offload._graph import Subgraph

__all__ = [
    "Family",
    "FULL_CODE_RANGE",
    "GATE_FAMILIES",
    "INPUT_FAMILIES",
    "INPUT_KINDS",
    "InputSpec",
    "draw_inputs",
    "input_arrays",
    "input_specs",
    "random_inputs",
    "subgraph_specs",
]

RealDraw = Callable[[np.random.Generator, tuple[int, ...]], np.ndarray]
# The integer types whose codes the tools quantize (other integer types are indices there).
_TOOL_CODE_TYPES = (np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.int16))


@dataclass(frozen=True)
class InputSpec:
    """What the maker reads of one input: its name, shape, dtype and per-tensor quantization
    (``scale`` 0 when it has none)."""

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    scale: float = 0.0
    zero_point: int = 0

    @property
    def quantized(self) -> bool:
        """An integer input with a scale: its values are codes of real numbers."""
        return self.dtype.kind in "iu" and self.scale > 0


@dataclass(frozen=True)
class Family:
    """How one family of seeded inputs fills each kind of input.

    ``real`` draws float inputs; quantized integer inputs get the same draw quantized with
    their own scale and zero point (clipped to the type's range), or with ``codes`` values over
    their full code range. Other integers draw ``0 .. indices - 1``; booleans are true where a
    uniform draw is above 0.5 (below it with ``true_below_half``).

    ``code_types``, where given, are the only integer types read as quantized (an input of
    another integer type is an index even with a scale), and one of them without a scale draws
    its full code range after an unused N(0, 1) draw: the tools' rule, kept so that their
    arrays stay what they were. ``None``: every integer type with a scale is quantized.
    """

    name: str
    real: RealDraw
    codes: bool = False
    indices: int = 4
    true_below_half: bool = False
    code_types: tuple[np.dtype, ...] | None = None


def _uniform(low: float, high: float) -> RealDraw:
    return lambda rng, shape: rng.uniform(low, high, shape)


def _normal(std: float) -> RealDraw:
    if std == 1.0:
        return lambda rng, shape: rng.standard_normal(shape)
    return lambda rng, shape: std * rng.standard_normal(shape)


# auto's gate, in order: the first is the set every timed run uses. Image-like [0, 1) inputs
# were what exposed OpenVINO's bf16 (23% of the largest magnitude off on a face detector) where
# [-1, 1) passed; N(0, 4) reaches past the range models are calibrated on.
GATE_FAMILIES: tuple[Family, ...] = (
    Family("uniform(-1,1)", _uniform(-1.0, 1.0)),
    Family("uniform(0,1)", _uniform(0.0, 1.0)),
    Family("normal(0,1)", _normal(1.0)),
    Family("normal(0,4)", _normal(4.0)),
)
# Quantized inputs over their full code range (float inputs draw uniform(-1, 1)).
FULL_CODE_RANGE = Family("full code range", _uniform(-1.0, 1.0), codes=True)


def _tools(name: str, real: RealDraw) -> Family:
    return Family(name, real, indices=10, true_below_half=True, code_types=_TOOL_CODE_TYPES)


# What each ``--input`` kind draws for float inputs; quantized inputs quantize the same draw.
INPUT_KINDS: dict[str, str] = {
    "normal": "N(0,1)",
    "uniform": "U(-1,1)",
    "image": "U(0,1), image-like",
    "wide": "N(0,1)*100, a large dynamic range",
}
INPUT_FAMILIES: Mapping[str, Family] = {
    "normal": _tools("normal", _normal(1.0)),
    "uniform": _tools("uniform", _uniform(-1.0, 1.0)),
    "image": _tools("image", lambda rng, shape: rng.random(shape)),
    "wide": _tools("wide", lambda rng, shape: rng.standard_normal(shape) * 100.0),
}


def input_specs(details: Sequence[Mapping[str, Any]]) -> list[InputSpec]:
    """Specs from input details as :meth:`offload.Interpreter.get_input_details` (or LiteRT's)
    returns them: ``name``, ``shape``, ``dtype`` and ``quantization`` (scale, zero point)."""
    specs = []
    for d in details:
        scale, zero_point = d.get("quantization", (0.0, 0))
        specs.append(
            InputSpec(
                str(d.get("name", "")),
                tuple(int(s) for s in d["shape"]),
                np.dtype(d["dtype"]),
                float(scale),
                int(zero_point),
            )
        )
    return specs


def subgraph_specs(subgraph: Subgraph, shapes: Sequence[tuple[int, ...]]) -> list[InputSpec]:
    """Specs of ``subgraph``'s inputs at ``shapes`` (indexed by tensor); a tensor quantized per
    channel, or with a scale that is not positive, counts as not quantized."""
    specs = []
    for i in subgraph.inputs:
        t = subgraph.tensors[i]
        scale, zero_point = t.quantization.as_tuple() if t.quantization is not None else (0.0, 0)
        if not scale > 0:
            scale, zero_point = 0.0, 0
        specs.append(InputSpec(t.name, tuple(shapes[i]), t.dtype, scale, zero_point))
    return specs


def draw_inputs(
    specs: Sequence[InputSpec], rng: np.random.Generator, family: Family
) -> list[np.ndarray]:
    """One array per input, in order, drawn from ``rng`` as ``family`` says. Raises
    :class:`~offload.errors.UsageError` for an input that is not numeric or bool."""
    return [_draw(spec, rng, family) for spec in specs]


def _draw(spec: InputSpec, rng: np.random.Generator, family: Family) -> np.ndarray:
    shape, dtype = spec.shape, spec.dtype
    if dtype.kind == "f":
        return family.real(rng, shape).astype(dtype)
    if dtype.kind == "b":
        draw = rng.random(shape)
        return draw < 0.5 if family.true_below_half else draw > 0.5
    if dtype.kind not in "iu":
        raise UsageError(
            f"input {spec.name!r} has dtype {dtype}; random inputs are made only for "
            "numeric and bool tensors"
        )
    info = np.iinfo(dtype)
    code_type = family.code_types is None or dtype in family.code_types
    if code_type and spec.quantized:
        if family.codes:
            return rng.integers(info.min, int(info.max) + 1, shape).astype(dtype)
        values = np.round(family.real(rng, shape) / spec.scale) + spec.zero_point
        return np.clip(values, info.min, info.max).astype(dtype)
    if family.code_types is not None and code_type:  # the tools' raw codes
        rng.standard_normal(shape)  # unused: the tools have always drawn it first
        return rng.integers(info.min, int(info.max) + 1, shape).astype(dtype)
    return rng.integers(0, family.indices, shape).astype(dtype)


def random_inputs(
    details: Sequence[Mapping[str, Any]], rng: np.random.Generator
) -> list[np.ndarray]:
    """One random array per input: Gaussian floats, quantized properly for int8/uint8/int16
    inputs (the tools' default, ``input_arrays(..., "normal")``)."""
    return draw_inputs(input_specs(details), rng, INPUT_FAMILIES["normal"])


def input_arrays(
    details: Sequence[Mapping[str, Any]], rng: np.random.Generator, kind: str = "normal"
) -> list[np.ndarray]:
    """One random array per input, drawn as ``kind`` says (see :data:`INPUT_KINDS`).

    Quantized int8/uint8/int16 inputs get the float draw quantized with the input's scale and
    zero point, clipped to the type's range: the same values a float model would see, so a
    quantized and a float variant of one model can be fed alike. With ``kind="normal"`` the
    arrays are exactly :func:`random_inputs`' for the same generator state.
    """
    if kind not in INPUT_FAMILIES:
        raise UsageError(f"input kind must be one of {', '.join(INPUT_KINDS)}, found {kind!r}")
    return draw_inputs(input_specs(details), rng, INPUT_FAMILIES[kind])
