"""Unmodified programs in each LiteRT import style under ``offload run --delegate gpu_opencl``:
the GPU delegate takes every node of the model and the outputs are LiteRT's within the float
tolerance of the fixture tests (1e-4 relative)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from opencl_support import relative_error

from tests._apps import IMPORTS, litert_outputs, ran_on_offload, run_app

pytest.importorskip("ai_edge_litert.interpreter", reason="ai-edge-litert is the oracle")

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "small_cnn_float32.tflite"


@pytest.mark.parametrize("style", sorted(IMPORTS))
def test_app_runs_on_gpu_opencl(tmp_path: Path, style: str):
    """The app's interpreter is offload's, gpu_opencl runs all 8 nodes, outputs match LiteRT."""
    inputs = [np.random.default_rng(3).uniform(0, 1, (1, 64, 64, 3)).astype(np.float32)]
    stand_in = ["--tensorflow-stand-in"] if style == "tf.lite" else []  # TensorFlow absent
    done, outputs = run_app(
        tmp_path, style, FIXTURE, inputs, [*stand_in, "--delegate", "gpu_opencl", "--report"]
    )
    assert ran_on_offload(done)
    assert "gpu_opencl: 8 of 8 nodes in 1 partition(s)" in done.stderr, done.stderr
    expected = litert_outputs(FIXTURE, inputs)
    assert relative_error(outputs[0], expected[0]) <= 1e-4
