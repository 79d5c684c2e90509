"""The one tolerance model (offload._tolerance) and the one seeded-input maker
(offload._seeded_inputs) that auto, the per-node diff, the kit, the tools and the fuzz targets
share."""

from __future__ import annotations

import hashlib

import numpy as np

import offload
from offload._auto_measure import gate_inputs
from offload._seeded_inputs import input_arrays, random_inputs
from offload._tolerance import Limits, distance, excess
from offload.model.builder import ModelBuilder


def test_floats_are_relative_to_the_largest_reference_magnitude() -> None:
    """max |a - b| / max |ref|; against an all-zero reference any difference is infinitely
    relative, unless the limits hold the absolute difference there (auto's policy)."""
    d = distance(np.array([2.0, -4.0], np.float32), np.array([2.0, -4.04], np.float32))
    assert d.unit == "relative" and abs(d.relative - 0.01) < 1e-6 and d.equal == 0.5
    zero = distance(np.zeros(3), np.array([0.0, 1e-7, 0.0]))
    assert zero.relative == np.inf and not Limits(1e-5, 0).within(zero)
    assert Limits(1e-5, 0, absolute_at_zero=True).within(zero)


def test_nan_and_infinities_count_only_against_something_else() -> None:
    """NaN against NaN and an infinity against itself are no difference; anything else
    meeting them is a mismatch that no limit accepts."""
    ref = np.array([1.0, np.nan, np.inf])
    assert Limits(0, 0).within(distance(ref, ref.copy()))
    nan = distance(ref, np.array([1.0, 2.0, np.inf]))
    inf = distance(ref, np.array([1.0, np.nan, 5.0]))
    assert nan.nan_mismatch and inf.inf_mismatch and not inf.nan_mismatch
    assert not Limits(np.inf, np.inf).within(inf)
    assert list(excess(ref, np.array([1.5, np.nan, 5.0]), 0.1, 0.1)) == [0.3, -np.inf, np.inf]


def test_integers_are_steps_exact_when_known_unquantized_and_never_wrap() -> None:
    """Codes count in steps; a tensor known not to be quantized must be equal; uint64 ends
    do not wrap."""
    a, b = np.array([0, 5], np.int8), np.array([1, 5], np.int8)
    assert distance(a, b).unit == "steps" and Limits(0, 1).within(distance(a, b))
    assert not Limits(1, 1).within(distance(a, b, quantized=False))
    big = distance(np.array([0], np.uint64), np.array([2**64 - 1], np.uint64))
    assert big.steps > 1e19
    assert distance(np.zeros(2), np.zeros(3)).mismatch == "shape"


def test_dequantized_floats_are_judged_in_the_integer_tensor_s_steps() -> None:
    d = distance(np.array([0.5]), np.array([0.5 + 2 / 256]), step=1 / 256)
    assert d.unit == "steps" and abs(d.steps - 2) < 1e-9
    assert Limits(0, 2).within(d) and not Limits(1.0, 1).within(d)


def _digest(arrays: list[np.ndarray]) -> str:
    h = hashlib.sha256()
    for a in arrays:
        h.update(a.tobytes())
    return h.hexdigest()[:16]


DETAILS = [
    {"name": "f", "shape": (3, 5), "dtype": np.float32, "quantization": (0.0, 0)},
    {"name": "q", "shape": (40,), "dtype": np.int8, "quantization": (0.05, 3)},
    {"name": "r", "shape": (40,), "dtype": np.int8, "quantization": (0.0, 0)},
    {"name": "b", "shape": (9,), "dtype": np.bool_, "quantization": (0.0, 0)},
    {"name": "i", "shape": (6,), "dtype": np.int32, "quantization": (0.0, 0)},
]

# The gate's sets for DETAILS (seed 0), as auto drew them before the maker was shared.
GATE_DIGESTS = [
    "fcd5a1142f1f1789",
    "27ec25ba86b16dbf",
    "b11d8064fb475d97",
    "a56136b326fec4b4",
    "82db26aeff849425",
]


def test_the_tools_draws_stay_what_they_were() -> None:
    """Sweeps and benchmarks compare runs across versions: a seed gives the same arrays."""
    assert _digest(random_inputs(DETAILS, np.random.default_rng(7))) == "d87bf7a3bc4af88d"
    assert _digest(input_arrays(DETAILS, np.random.default_rng(7), "image")) == "0168f98033ac8449"


def test_auto_s_gate_draws_stay_what_they_were() -> None:
    """Stored decisions are keyed by the gate's version: its sets must not move under it."""
    b = ModelBuilder()
    for d in DETAILS:
        q = d["quantization"] if d["quantization"][0] else None
        b.add_output(b.add_input(d["name"], shape=d["shape"], dtype=d["dtype"], quantization=q))
    sg = offload.load_model(model_content=b.build()).main
    gate = gate_inputs(sg, [t.shape for t in sg.tensors])
    assert [_digest(g.arrays) for g in gate] == GATE_DIGESTS
