"""Whole models through offload and the litert delegate give LiteRT's own outputs, bit for
bit, with the same kernels: builtin (LiteRT without default delegates) and XNNPACK (LiteRT as
users run it), on every public model and fixture, in every model type."""

from __future__ import annotations

from pathlib import Path

import pytest

from .._models import fixture_models
from ._support import MODELS, assert_identical, direct, inputs, run, through_offload


def test_models_cover_every_model_type() -> None:
    """The fixtures hold all five model types, so the round trip covers each."""
    assert {t for _, t in fixture_models()} == {
        "float32",
        "float16",
        "dynamic_range",
        "int8",
        "qat",
    }


@pytest.mark.parametrize("kernels", ["builtin", "xnnpack"])
@pytest.mark.parametrize("path", MODELS, ids=lambda p: p.stem)
def test_whole_model_is_bit_identical_to_litert(path: Path, kernels: str) -> None:
    """One partition holds every node (strict mode), and two invokes on different inputs
    give exactly what LiteRT gives on the original model with the same kernels."""
    ours = through_offload(kernels, path)
    plan = ours.plan()
    assert [p.delegate for p in plan.partitions] == ["litert"]
    ref = direct(kernels, path)
    for seed in (0, 1):
        arrays = inputs(ref, seed)
        assert_identical(run(ours, arrays), run(ref, arrays), f"{path.name} {kernels} {seed}")
