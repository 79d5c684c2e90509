"""What the READMEs claim for ``kernels="builtin"``, measured: bit-exact with the CPU reference
on quantized models (int8, QAT, dynamic-range), and within the stated relative bound on float
ones, on every public model and fixture.

Measured on a 2-core Xeon over 24 inputs per float model (4 kinds, 6 draws): at most 6.7e-6
(lstm_float32, N(0,1)x100 inputs), 5.6e-6 (face_detection_back); absolute differences reach
1e-3 on face_landmark's pixel coordinates and 4 on face_detection_front's box regressors,
whose values are ~1e6 on the widest inputs.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import offload

from .._models import INPUT_KINDS, fixture_models, public_models, random_inputs, relative_error
from ._support import run, through_offload

ROOT = Path(__file__).resolve().parents[2]
READMES = (ROOT / "README.md", ROOT / "plugins" / "litert" / "README.md")
QUANTIZED = [p for p, t in fixture_models() if t in ("int8", "qat", "dynamic_range")]
FLOAT = [*public_models(), *(p for p, t in fixture_models() if t in ("float32", "float16"))]


def _claim(readme: Path) -> str:
    """The README's text on kernels="builtin"'s agreement with the reference: the line that
    makes such a delegate, with the comment line after it, or the option's table row."""
    lines = readme.read_text().splitlines()
    for k, line in enumerate(lines):
        if '{"kernels": "builtin"}' in line and "#" in line:
            return " ".join(lines[k : k + 2])
        if line.startswith("| `kernels` |"):
            return line
    raise AssertionError(f"{readme} says nothing about kernels='builtin'")


def stated_float_bound() -> float:
    """The float bound both READMEs state ("within 1e-5 relative"), the same in each."""
    bounds = set()
    for readme in READMES:
        claim = _claim(readme)
        assert "bit-exact" in claim and "quantized" in claim, f"{readme}: {claim}"
        found = re.search(r"within (\d+(?:\.\d+)?e-\d+) relative", claim)
        assert found, f"{readme} states no float bound for kernels='builtin': {claim}"
        bounds.add(float(found.group(1)))
    assert len(bounds) == 1, f"the READMEs state different bounds: {sorted(bounds)}"
    return bounds.pop()


def _pair(path: Path) -> tuple[offload.Interpreter, offload.Interpreter]:
    cpu = offload.Interpreter(model_path=path, delegates=[])
    cpu.allocate_tensors()
    return through_offload("builtin", path), cpu


@pytest.mark.parametrize("path", QUANTIZED, ids=lambda p: p.stem)
def test_builtin_kernels_are_bit_exact_with_the_reference_on_quantized_models(path: Path) -> None:
    """Every output equal bit for bit, on one input of each kind (in sequence: an LSTM's
    state is carried alike)."""
    ours, cpu = _pair(path)
    for seed, kind in enumerate(INPUT_KINDS):
        arrays = random_inputs(cpu.get_input_details(), seed, kind)
        for k, (got, want) in enumerate(zip(run(ours, arrays), run(cpu, arrays))):
            assert got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_array_equal(got, want, err_msg=f"{path.name} {kind} output {k}")


@pytest.mark.parametrize("path", FLOAT, ids=lambda p: p.stem)
def test_builtin_kernels_are_within_the_stated_bound_on_float_models(path: Path) -> None:
    """Every float output within the READMEs' bound of the reference's (max |a-b| / max |b|),
    on one input of each kind."""
    bound = stated_float_bound()
    ours, cpu = _pair(path)
    for seed, kind in enumerate(INPUT_KINDS):
        arrays = random_inputs(cpu.get_input_details(), seed, kind)
        for k, (got, want) in enumerate(zip(run(ours, arrays), run(cpu, arrays))):
            assert got.dtype == want.dtype and got.shape == want.shape
            error = relative_error(got, want)
            assert error <= bound, f"{path.name} {kind} output {k}: {error:.2e} > {bound:.0e}"
