"""The litert delegate's exact setting as one of auto's candidates."""

from __future__ import annotations

import pytest

import offload
from tests._models import FIXTURES

pytest.importorskip("offload_litert", reason="offload-litert is not installed")


def test_builtin_kernels_are_measured_and_accurate():
    """auto weighs LiteRT's builtin kernels beside XNNPACK on an int8 model; being LiteRT's
    own reference kernels, they meet the accuracy policy (one step)."""
    interp = offload.Interpreter(
        model_path=FIXTURES / "small_cnn_int8.tflite",
        delegates="auto",
        auto_cache_dir=False,
        auto_budget_s=0.5,
    )
    interp.allocate_tensors()
    rows = {row["label"]: row for row in interp.auto_selection["candidates"]}
    assert "litert" in rows
    builtin = rows["litert(kernels=builtin)"]
    assert builtin["status"] in ("chosen", "measured", "not measured"), builtin
    assert builtin["delegates"] == ["litert"]


def test_fewer_threads_than_allowed_are_measured_and_as_exact():
    """With two threads allowed, auto also weighs each LiteRT setting at one: the same
    kernels on fewer threads, so the same numbers (XNNPACK splits work by output tiles)."""
    interp = offload.Interpreter(
        model_path=FIXTURES / "small_cnn_int8.tflite",
        delegates="auto",
        auto_cache_dir=False,
        auto_budget_s=0.5,
        num_threads=2,
    )
    interp.allocate_tensors()
    rows = {row["label"]: row for row in interp.auto_selection["candidates"]}
    assert [rows[k]["delegates"] for k in ("litert(num_threads=1)", "litert")] == [["litert"]] * 2
    fewer, allowed = rows["litert(num_threads=1)"], rows["litert"]
    assert fewer["status"] != "inaccurate", fewer
    if fewer.get("error") is not None and allowed.get("error") is not None:
        assert fewer["error"] == allowed["error"]
    assert "litert(kernels=builtin, num_threads=1)" in rows
