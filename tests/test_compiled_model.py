"""offload.CompiledModel on its own: hardware kinds, options, and bad input as typed errors.

These need no engine: the CPU set always has the CPU reference, and the checks of buffers,
signatures and options are offload's. Comparisons with LiteRT are in
test_compiled_model_parity.py; the GPU set on an OpenCL device in tests/opencl.
"""

from __future__ import annotations

import numpy as np
import pytest

import offload
from offload import compiled_model as cm
from offload.errors import (
    CapabilityDeclarationError,
    CpuFallbackError,
    InterpreterStateError,
    ReadOnlyBufferError,
    SignatureError,
    TensorShapeError,
    TensorTypeError,
    UsageError,
)
from tests._models import FIXTURES, relative_error

MODEL = FIXTURES / "small_cnn_float32.tflite"


@pytest.fixture(autouse=True)
def _static_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OFFLOAD_AUTO_BUDGET_S", "0")


@pytest.fixture
def model() -> cm.CompiledModel:
    return cm.CompiledModel.from_file(str(MODEL))


def _reference(x: np.ndarray) -> np.ndarray:
    it = offload.Interpreter(model_path=str(MODEL), delegates=[])
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    return it.get_tensor(it.get_output_details()[0]["index"])


def _image(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).random((1, 64, 64, 3), dtype=np.float32)


def test_cpu_set_runs_and_agrees_with_the_reference(model: cm.CompiledModel):
    ins, outs = model.create_input_buffers(0), model.create_output_buffers(0)
    x = _image()
    ins[0].write(x)
    model.run_by_index(0, ins, outs)
    got = outs[0].read(64 * 64 * 3, np.float32).reshape(1, 64, 64, 3)
    assert relative_error(got, _reference(x)) <= 1e-4
    # A second write into the same buffer is what the next run reads: the buffer is the
    # model's input array, not a copy taken at creation.
    y = _image(1)
    ins[0].write(y)
    model.run_by_index(0, ins, outs)
    assert (
        relative_error(outs[0].read(64 * 64 * 3, np.float32).reshape(y.shape), _reference(y))
        <= 1e-4
    )


def test_reference_kernel_mode_runs_the_cpu_reference_alone():
    options = cm.Options(
        cm.HardwareAccelerator.CPU,
        cpu_options=cm.CpuOptions(kernel_mode=cm.CpuKernelMode.REFERENCE),
    )
    model = cm.CompiledModel.from_file(str(MODEL), options=options)
    report = model.delegation_report()
    assert report["delegates"] == {}
    assert report["compiled_model"]["delegate_kinds"] == []
    assert model.is_fully_accelerated() is False  # every node on the CPU reference
    ins, outs = model.create_input_buffers(0), model.create_output_buffers(0)
    x = _image(2)
    ins[0].write(x)
    model.run_by_index(0, ins, outs)
    np.testing.assert_array_equal(outs[0].read(12288, np.float32).reshape(x.shape), _reference(x))


def test_npu_alone_is_litert_s_error_with_reasons_per_node():
    """No NPU delegate here (Core ML runs on macOS only): LiteRT's message, and why not."""
    with pytest.raises(CpuFallbackError) as info:
        cm.CompiledModel.from_file(str(MODEL), hardware_accel=cm.HardwareAccelerator.NPU)
    text = str(info.value)
    assert text.startswith("Some ops are not accelerated. Add kLiteRtHwAcceleratorCpu")
    assert "hardware_accel=NPU" in text
    assert "CONV_2D x" in text  # per op, with the count of nodes
    assert isinstance(info.value, RuntimeError)  # what LiteRT raises


def test_unused_options_are_kept_and_reported():
    options = cm.Options(
        cm.HardwareAccelerator.CPU,
        cpu_options=cm.CpuOptions(num_threads=2, enable_ynnpack=True),
        gpu_options=cm.GpuOptions(benchmark_mode=True),
        qualcomm_options=cm.QualcommOptions(log_level=cm.QualcommOptions.LOG_LEVEL.INFO),
    )
    with pytest.warns(UserWarning, match="kept and unused: cpu_options.enable_ynnpack=True"):
        model = cm.CompiledModel.from_file(str(MODEL), options=options)
    unused = model.delegation_report()["compiled_model"]["unused_options"]
    assert unused[0] == "cpu_options.enable_ynnpack=True"
    assert any(u.startswith("gpu_options.benchmark_mode=True") for u in unused)
    assert any(u.startswith("qualcomm_options.log_level=") for u in unused)


def test_options_are_read_as_the_delegates_options():
    translation = cm.Options(
        cm.HardwareAccelerator.CPU | cm.HardwareAccelerator.GPU,
        cpu_options=cm.CpuOptions(num_threads=3, kernel_mode=cm.CpuKernelMode.BUILTIN),
        gpu_options=cm.GpuOptions(enforce_f32=True),
        intel_openvino_options=cm.IntelOpenVinoOptions(
            performance_mode=cm.IntelOpenVinoOptions.PERFORMANCE_MODE.THROUGHPUT
        ),
    )
    from offload._compiled_options import translate

    t = translate(translation)
    assert t.kinds == ("cpu", "gpu") and t.reference_allowed
    assert t.num_threads == 3
    assert t.kind_options["gpu"] == {"precision_loss_allowed": False}
    assert t.delegate_options == {
        "litert": {"kernels": "builtin"},
        "openvino": {"performance_hint": "THROUGHPUT"},
    }
    assert t.unused == []
    # LiteRT's default GPU options let the GPU compute in float16.
    assert translate(cm.Options(cm.HardwareAccelerator.GPU)).precision_loss_allowed


def test_capabilities_hardware_defaults_to_cpu_and_is_checked():
    """A declaration written before the field keeps loading, as a CPU delegate."""
    caps = offload.Capabilities(
        ops=(offload.OpCapability(op="ADD"),),
        model_types=dict.fromkeys(
            ("float32", "float16", "dynamic_range", "int8", "qat"),
            offload.ModelTypeSupport(support="yes"),
        ),
    )
    assert caps.hardware == "cpu"
    with pytest.raises(CapabilityDeclarationError, match="hardware"):
        offload.Capabilities(ops=(), model_types=caps.model_types, hardware="tpu")
    assert offload.Delegate.options_for_hardware.__func__  # documented hook, a classmethod
    dummy = offload.load_delegate("dummy")
    assert type(dummy).options_for_hardware("cpu") == {}
    assert type(dummy).options_for_hardware("gpu") is None


# -- bad input ----------------------------------------------------------------------------------


def test_buffers_of_the_wrong_size_or_dtype(model: cm.CompiledModel):
    ins, outs = model.create_input_buffers(0), model.create_output_buffers(0)
    with pytest.raises(TensorTypeError, match="expected dtype float32, found float64"):
        ins[0].write(np.zeros((1, 64, 64, 3)))
    with pytest.raises(TensorShapeError, match="expected 12288 elements"):
        ins[0].write(np.zeros(5, np.float32))
    with pytest.raises(TensorTypeError, match="expects a numpy array, found list"):
        ins[0].write([1.0])  # type: ignore[arg-type]
    small = cm.TensorBuffer.create_from_host_memory(np.zeros(7, np.float32))
    with pytest.raises(TensorShapeError, match="expected a buffer of 12288 elements"):
        model.run_by_index(0, [small], outs)
    ints = cm.TensorBuffer.create_from_host_memory(np.zeros(12288, np.int8))
    with pytest.raises(TensorTypeError, match="expected a float32 buffer, found int8"):
        model.run_by_index(0, [ints], outs)
    with pytest.raises(TensorTypeError, match="expected a TensorBuffer"):
        model.run_by_index(0, [np.zeros(12288, np.float32)], outs)
    with pytest.raises(TensorShapeError, match="C-contiguous"):
        cm.TensorBuffer.create_from_host_memory(np.zeros((4, 4), np.float32)[:, ::2])


def test_read_checks_count_and_dtype(model: cm.CompiledModel):
    out = model.create_output_buffers(0)[0]
    with pytest.raises(TensorShapeError, match=r"count of elements in 0\.\.12288, found 12289"):
        out.read(12289, np.float32)
    with pytest.raises(TensorShapeError, match="found -1"):
        out.read(-1, np.float32)
    with pytest.raises(TensorTypeError, match="holds float32, found output_dtype int8"):
        out.read(3, np.int8)
    with pytest.raises(TensorTypeError, match="unsupported dtype"):
        out.read(3, np.complex128)
    assert out.read(3, np.float32).shape == (3,)


def test_signatures_that_do_not_exist(model: cm.CompiledModel):
    ins, outs = model.create_input_buffers(0), model.create_output_buffers(0)
    with pytest.raises(SignatureError, match="signature index 1 is out of range"):
        model.run_by_index(1, ins, outs)
    with pytest.raises(SignatureError, match="out of range"):
        model.get_signature_by_index(5)  # LiteRT's own check aborts the process here
    with pytest.raises(SignatureError, match="Signature not found: 'nope'"):
        model.run_by_name("nope", {}, {})
    with pytest.raises(SignatureError, match="Signature not found"):
        model.get_input_tensor_details("nope")
    with pytest.raises(SignatureError, match="has 1 input"):
        model.run_by_index(0, [], outs)
    with pytest.raises(SignatureError, match=r"expected input buffers for \['image'\]"):
        model.run_by_name("serving_default", {"imagex": ins[0]}, {"mask": outs[0]})
    with pytest.raises(SignatureError, match="has no input 'nope'"):
        model.create_input_buffer_by_name("serving_default", "nope")
    with pytest.raises(SignatureError, match="expected an index in 0..0"):
        model.get_input_buffer_requirements(3)
    with pytest.raises(SignatureError, match="expected an input index"):
        model.resize_input_tensor(4, [1, 2, 3, 4])
    with pytest.raises(TensorShapeError, match="strict resize"):
        model.resize_input_tensor(0, [2, 64, 64, 3])
    with pytest.raises(TensorShapeError, match="expected 4 non-negative dimensions"):
        model.resize_input_tensor(0, [1, 64], strict=False)


def test_a_closed_model_and_a_destroyed_buffer(model: cm.CompiledModel):
    ins, outs = model.create_input_buffers(0), model.create_output_buffers(0)
    with cm.CompiledModel.from_file(str(MODEL)) as other:
        assert other.get_num_signatures() == 1
    with pytest.raises(InterpreterStateError, match="closed"):
        other.get_num_signatures()
    model.close()
    with pytest.raises(InterpreterStateError, match="the CompiledModel is closed"):
        model.run_by_index(0, ins, outs)
    ins[0].destroy()
    with pytest.raises(InterpreterStateError, match="destroyed"):
        ins[0].write(_image())


def test_bad_arguments_to_from_file():
    with pytest.raises(UsageError, match="either options or hardware_accel"):
        cm.CompiledModel.from_file(
            str(MODEL), hardware_accel=cm.HardwareAccelerator.CPU, options=cm.Options()
        )
    with pytest.raises(UsageError, match="found 8"):
        cm.CompiledModel.from_file(str(MODEL), hardware_accel=8)
    with pytest.raises(UsageError, match="found 'GPU'"):
        cm.CompiledModel.from_file(str(MODEL), hardware_accel="GPU")
    with pytest.raises(offload.errors.ModelLoadError):
        cm.CompiledModel.from_buffer(b"garbage" * 10)
    with pytest.raises(UsageError, match="made by CompiledModel.from_file"):
        cm.CompiledModel(object(), None)


# -- ml_dtypes buffers ---------------------------------------------------------------------------

# The ml_dtypes types LiteRT 2.3's TensorBuffer holds (tried on the installed LiteRT); its other
# float8, float6, float4 and sub-byte integer types it refuses.
ML_DTYPE_NAMES = ("bfloat16", "float8_e4m3fn", "float8_e5m2")
OTHER_ML_DTYPE_NAMES = (
    "int2",
    "uint2",
    "int4",
    "uint4",
    "float8_e4m3",
    "float8_e4m3fnuz",
    "float8_e4m3b11fnuz",
    "float8_e5m2fnuz",
    "float8_e3m4",
    "float8_e8m0fnu",
    "float6_e2m3fn",
    "float6_e3m2fn",
    "float4_e2m1fn",
)


def _every_bit_pattern(dtype: np.dtype) -> np.ndarray:
    """Every value of a 1- or 2-byte type, NaNs and infinities among them: a round trip
    through float32 would change some of these bytes, a byte-for-byte copy none."""
    bits = np.uint8 if dtype.itemsize == 1 else np.uint16
    return np.arange(2 ** (8 * dtype.itemsize), dtype=bits).view(dtype)


@pytest.mark.parametrize("name", ML_DTYPE_NAMES)
def test_ml_dtype_buffers_keep_every_byte(name: str):
    """bfloat16 and the two float8 types are held, written and read bit for bit."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    dtype = np.dtype(getattr(ml_dtypes, name))
    data = _every_bit_pattern(dtype)
    buf = cm.TensorBuffer.create_from_host_memory(data)
    assert buf.get_tensor_details() == {"dtype": name, "shape": [data.size]}
    assert np.shares_memory(buf.capsule, data)  # the array's own memory, as for numpy's types
    for output_dtype in (getattr(ml_dtypes, name), dtype, name):
        got = buf.read(data.size, output_dtype)
        assert got.dtype == dtype and got.tobytes() == data.tobytes()
    backwards = _every_bit_pattern(dtype)[::-1]  # strided: still written byte for byte
    buf.write(backwards)
    assert buf.read(data.size, dtype).tobytes() == backwards.tobytes()
    with pytest.raises(TensorTypeError, match=f"expected dtype {name}, found float32"):
        buf.write(np.zeros(data.size, np.float32))
    with pytest.raises(TensorTypeError, match=f"holds {name}, found output_dtype float32"):
        buf.read(3, np.float32)


@pytest.mark.parametrize("name", OTHER_ML_DTYPE_NAMES)
def test_other_ml_dtypes_are_refused_when_the_buffer_is_made(name: str):
    """The ml_dtypes types LiteRT's TensorBuffer refuses: a TensorTypeError (a ValueError, as
    LiteRT's) listing the types a buffer holds."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    if not hasattr(ml_dtypes, name):
        pytest.skip(f"this ml_dtypes has no {name}")
    with pytest.raises(TensorTypeError, match="unsupported dtype.*'bfloat16'") as info:
        cm.TensorBuffer.create_from_host_memory(np.zeros(4, getattr(ml_dtypes, name)))
    assert isinstance(info.value, ValueError)


def test_ml_dtypes_is_not_imported_by_offload():
    """ml_dtypes is no core dependency: offload takes its types where a program has them and
    never imports it (a fresh interpreter, as any import in this one may have loaded it)."""
    import subprocess
    import sys

    code = (
        "import sys, numpy as np, offload\n"
        "from offload.compiled_model import TensorBuffer\n"
        "TensorBuffer.create_from_host_memory(np.zeros(2, np.float32)).read(2, np.float32)\n"
        "assert 'ml_dtypes' not in sys.modules, 'offload imported ml_dtypes'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_without_ml_dtypes_its_names_are_refused_with_a_hint(monkeypatch: pytest.MonkeyPatch):
    """Where ml_dtypes is not loaded, asking for bfloat16 says what would make it work."""
    import sys

    monkeypatch.setitem(sys.modules, "ml_dtypes", None)  # as if never imported
    buf = cm.TensorBuffer.create_from_host_memory(np.zeros(4, np.float32))
    with pytest.raises(
        TensorTypeError, match="bfloat16, float8_e4m3fn, float8_e5m2 with ml_dtypes"
    ):
        buf.read(4, "bfloat16")


def test_a_bfloat16_buffer_is_refused_when_the_model_runs(model: cm.CompiledModel):
    """A buffer is made in any dtype it can hold; a model that does not compute in it says so
    at run time, naming the tensor and the dtype it wants."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    ins, outs = model.create_input_buffers(0), model.create_output_buffers(0)
    half = cm.TensorBuffer.create_from_host_memory(np.zeros(12288, ml_dtypes.bfloat16))
    with pytest.raises(TensorTypeError, match="input 'image': expected a float32 buffer, found"):
        model.run_by_index(0, [half], outs)
    with pytest.raises(TensorTypeError, match="output 'mask': expected a float32 buffer, found"):
        model.run_by_name("serving_default", {"image": ins[0]}, {"mask": half})
    ins[0].write(_image())
    model.run_by_index(0, ins, outs)  # the model itself is unharmed


# -- signature keys ------------------------------------------------------------------------------


def test_the_empty_key_is_the_first_signature(model: cm.CompiledModel):
    """LiteRT's GetSignatureIndex takes "" for signature 0, so every call that looks a key up
    does; resize_input_tensor_by_name checks the key itself in LiteRT and refuses ""."""
    assert model.get_signature_index("") == 0
    assert model.get_input_tensor_details("") == model.get_input_tensor_details("serving_default")
    assert model.get_output_tensor_details("") == model.get_output_tensor_details("serving_default")
    x = _image(3)
    image = model.create_input_buffer_by_name("", "image")
    mask = model.create_output_buffer_by_name("", "mask")
    image.write(x)
    model.run_by_name("", {"image": image}, {"mask": mask})
    assert relative_error(mask.read(12288, np.float32).reshape(x.shape), _reference(x)) <= 1e-4
    with pytest.raises(SignatureError, match="Signature not found: ''"):
        model.resize_input_tensor_by_name("", "image", [1, 64, 64, 3])


def test_a_model_without_signatures_answers_for_its_placeholder(tmp_path):
    """The one signature of a model that declares none is LiteRT's placeholder, index 0."""
    from offload.model.builder import ModelBuilder

    b = ModelBuilder(signature_key=None)
    x, y = b.add_input("x", (4,), np.float32), b.add_input("y", (4,), np.float32)
    total = b.add_tensor("total", (4,), np.float32)
    b.add_operator("ADD", inputs=[x, y], outputs=[total])
    b.add_output(total)
    path = tmp_path / "add.tflite"
    b.save(path)
    model = cm.CompiledModel.from_file(str(path))
    key = cm.PLACEHOLDER_SIGNATURE
    assert model.get_signature_list() == {key: {"inputs": ["x", "y"], "outputs": ["total"]}}
    assert model.get_signature_index(key) == 0
    assert model.get_signature_index("serving_default") == -1
    ins = {n: model.create_input_buffer_by_name(key, n) for n in ("x", "y")}
    out = model.create_output_buffer_by_name(key, "total")
    ins["x"].write(np.arange(4, dtype=np.float32))
    ins["y"].write(np.full(4, 10, np.float32))
    model.run_by_name(key, ins, {"total": out})
    np.testing.assert_array_equal(out.read(4, np.float32), [10, 11, 12, 13])


# -- read-only arrays ---------------------------------------------------------------------------


def _read_only(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


def _count_runs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    from offload._executor import Executor

    runs: list[int] = []
    invoke = Executor.invoke

    def counted(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        runs.append(1)
        return invoke(self, *args, **kwargs)

    monkeypatch.setattr(Executor, "invoke", counted)
    return runs


def test_write_into_a_read_only_buffer_is_a_typed_error_naming_it():
    """write() into a buffer over a read-only array is ReadOnlyBufferError (a ValueError),
    naming the buffer, and the array is left as it was."""
    a = _read_only(np.zeros(6, np.float32))
    buffer = cm.TensorBuffer.create_from_host_memory(a)  # taken, as LiteRT takes it
    with pytest.raises(ReadOnlyBufferError, match="read-only float32 array of 6 elements") as info:
        buffer.write(np.ones(6, np.float32))
    assert isinstance(info.value, ValueError)
    assert "expected a writable buffer" in str(info.value)
    np.testing.assert_array_equal(a, 0)
    np.testing.assert_array_equal(buffer.read(6, np.float32), 0)  # reading it is fine


def test_a_read_only_output_buffer_is_refused_before_the_model_runs(
    model: cm.CompiledModel, monkeypatch: pytest.MonkeyPatch
):
    """A read-only output buffer fails with the other buffer checks: no node runs, and the
    model runs afterwards with writable buffers."""
    ins = model.create_input_buffers(0)
    ins[0].write(_image())
    target = _read_only(np.zeros(12288, np.float32))
    runs = _count_runs(monkeypatch)
    with pytest.raises(ReadOnlyBufferError, match=r"output 'mask'.*nothing was run"):
        model.run_by_index(0, ins, [cm.TensorBuffer.create_from_host_memory(target)])
    assert runs == [] and not target.any()
    name = model.get_signature_by_index(0)["outputs"][0]
    with pytest.raises(ReadOnlyBufferError, match="nothing was run"):
        model.run_by_name(
            "", {"image": ins[0]}, {name: cm.TensorBuffer.create_from_host_memory(target)}
        )
    assert runs == []
    outs = model.create_output_buffers(0)
    model.run_by_index(0, ins, outs)
    assert runs == [1]
    assert (
        relative_error(outs[0].read(12288, np.float32).reshape(1, 64, 64, 3), _reference(_image()))
        <= 1e-4
    )


def test_a_read_only_input_the_model_only_reads_runs(model: cm.CompiledModel):
    """A read-only input is read, not written: it runs, as in LiteRT, and stays unchanged."""
    x = _image(3)
    frozen = _read_only(x.reshape(-1).copy())
    outs = model.create_output_buffers(0)
    model.run_by_index(0, [cm.TensorBuffer.create_from_host_memory(frozen)], outs)
    got = outs[0].read(12288, np.float32).reshape(x.shape)
    assert relative_error(got, _reference(x)) <= 1e-4
    np.testing.assert_array_equal(frozen, x.reshape(-1))


def _rnn_model() -> bytes:
    """x[1, 3] -> RNN -> y[1, 4], its hidden state h[1, 4] a signature input that the RNN
    updates in place."""
    from offload.model.builder import ModelBuilder

    rng = np.random.default_rng(0)
    b = ModelBuilder()
    x = b.add_input("x", shape=(1, 3))
    w = b.add_constant("w", rng.uniform(-1, 1, (4, 3)).astype(np.float32))
    r = b.add_constant("r", rng.uniform(-1, 1, (4, 4)).astype(np.float32))
    bias = b.add_constant("bias", np.zeros(4, np.float32))
    h = b.add_input("h", shape=(1, 4))
    y = b.add_tensor("y", shape=(1, 4))
    b.add_operator(
        "RNN", inputs=[x, w, r, bias, h], outputs=[y], options={"fused_activation_function": "TANH"}
    )
    b.add_output(y)
    return b.build()


def test_a_read_only_input_the_run_updates_is_refused_before_the_model_runs(
    monkeypatch: pytest.MonkeyPatch,
):
    """An input the run writes (a recurrent state) must be writable too: refused, naming it,
    before any node runs; a writable one is updated in place."""
    model = cm.CompiledModel.from_buffer(_rnn_model())
    ins, outs = model.create_input_buffers(0), model.create_output_buffers(0)
    ins[0].write(np.ones(3, np.float32))
    frozen = _read_only(np.zeros(4, np.float32))
    runs = _count_runs(monkeypatch)
    with pytest.raises(ReadOnlyBufferError, match=r"input 'h'.*updated in place.*nothing was run"):
        model.run_by_index(0, [ins[0], cm.TensorBuffer.create_from_host_memory(frozen)], outs)
    assert runs == [] and not frozen.any() and not outs[0].read(4, np.float32).any()
    state = np.zeros(4, np.float32)
    model.run_by_index(0, [ins[0], cm.TensorBuffer.create_from_host_memory(state)], outs)
    np.testing.assert_array_equal(state, outs[0].read(4, np.float32))
    assert state.any()
