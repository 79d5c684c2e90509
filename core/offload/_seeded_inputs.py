"""Seeded random inputs for a model: what the per-node diff, ``offload sweep``'s ``random``
data set and the command line's benchmarks feed a model when the user gives none.

Each maker takes input details as :meth:`offload.Interpreter.get_input_details` returns them
(``name``, ``shape``, ``dtype``, ``quantization``) and a numpy generator, so the same seed
gives the same arrays wherever they are drawn.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from offload.errors import UsageError

__all__ = ["INPUT_KINDS", "random_inputs", "input_arrays"]


def random_inputs(details: Sequence[dict[str, Any]], rng: np.random.Generator) -> list[np.ndarray]:
    """One random array per input: Gaussian floats, quantized properly for int8/uint8 inputs."""
    arrays = []
    for d in details:
        shape = tuple(int(s) for s in d["shape"])
        dtype = np.dtype(d["dtype"])
        if dtype.kind == "f":
            arrays.append(rng.standard_normal(shape).astype(dtype))
        elif dtype in (np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.int16)):
            scale, zero_point = d["quantization"]
            info = np.iinfo(dtype)
            values = rng.standard_normal(shape)
            if scale:
                q = np.round(values / scale) + zero_point
            else:
                q = rng.integers(info.min, int(info.max) + 1, size=shape)
            arrays.append(np.clip(q, info.min, info.max).astype(dtype))
        elif dtype == np.dtype(bool):
            arrays.append(rng.random(shape) < 0.5)
        elif dtype.kind in "iu":
            arrays.append(rng.integers(0, 10, size=shape).astype(dtype))
        else:
            raise UsageError(
                f"input {d['name']!r} has dtype {dtype}; random inputs are made only for "
                "numeric and bool tensors"
            )
    return arrays


# What each ``--input`` kind draws for float inputs; integer inputs quantize the same draw.
INPUT_KINDS: dict[str, str] = {
    "normal": "N(0,1)",
    "uniform": "U(-1,1)",
    "image": "U(0,1), image-like",
    "wide": "N(0,1)*100, a large dynamic range",
}


def _float_draw(kind: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    if kind == "normal":
        return rng.standard_normal(shape)
    if kind == "uniform":
        return rng.uniform(-1.0, 1.0, shape)
    if kind == "image":
        return rng.random(shape)
    if kind == "wide":
        return rng.standard_normal(shape) * 100.0
    raise UsageError(f"input kind must be one of {', '.join(INPUT_KINDS)}, found {kind!r}")


def input_arrays(
    details: Sequence[dict[str, Any]], rng: np.random.Generator, kind: str = "normal"
) -> list[np.ndarray]:
    """One random array per input, drawn as ``kind`` says (see :data:`INPUT_KINDS`).

    Quantized int8/uint8/int16 inputs get the float draw quantized with the input's scale and
    zero point, clipped to the type's range: the same values a float model would see, so a
    quantized and a float variant of one model can be fed alike. With ``kind="normal"`` the
    arrays are exactly :func:`random_inputs`' for the same generator state.
    """
    if kind == "normal":
        return random_inputs(details, rng)
    arrays = []
    for d in details:
        shape = tuple(int(s) for s in d["shape"])
        dtype = np.dtype(d["dtype"])
        scale, zero_point = d["quantization"]
        if dtype.kind == "f":
            arrays.append(_float_draw(kind, shape, rng).astype(dtype))
        elif dtype in (np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.int16)) and scale:
            info = np.iinfo(dtype)
            q = np.round(_float_draw(kind, shape, rng) / scale) + zero_point
            arrays.append(np.clip(q, info.min, info.max).astype(dtype))
        else:  # not quantized (indices, masks, raw codes): no float draw to quantize
            arrays.extend(random_inputs([d], rng))
    return arrays
