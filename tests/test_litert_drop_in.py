"""What LiteRT's own interpreter tests expect of its Python API, checked on offload: string
tensors, argument checks, LiteRT's positional order, 0-d values, live views of tensor memory,
and the private inspection methods model-inspection code calls. Where LiteRT is installed,
each behaviour is also checked against it, so a change in LiteRT shows here."""

from __future__ import annotations

import struct
import warnings

import numpy as np
import pytest

import offload
from offload import interpreter as ours
from offload.errors import InterpreterStateError, TensorTypeError
from offload.model.builder import ModelBuilder

PERMUTATION = np.eye(4, dtype=np.float32)[::-1].copy()


def _strings(items: list[bytes]) -> bytes:
    """A STRING constant's buffer: count, offsets, then the bytes (TFLite's layout)."""
    offsets = [4 * (len(items) + 2)]
    for item in items:
        offsets.append(offsets[-1] + len(item))
    return struct.pack(f"<{len(items) + 2}i", len(items), *offsets) + b"".join(items)


def _permute() -> bytes:
    b = ModelBuilder(signature_key=None)
    x = b.add_input("input", (1, 4))
    w = b.add_constant("weights", PERMUTATION)
    y = b.add_tensor("output", (1, 4))
    b.add_operator("FULLY_CONNECTED", inputs=[x, w, -1], outputs=[y])
    b.add_output(y)
    return b.build()


def _gather_strings() -> bytes:
    b = ModelBuilder(signature_key=None)
    x = b.add_input("text", (5,), "STRING")
    i = b.add_input("indices", (3,), np.int64)
    y = b.add_tensor("picked", (3,), "STRING")
    b.add_operator("GATHER", inputs=[x, i], outputs=[y], options={"axis": 0})
    b.add_output(y)
    return b.build()


def _scalar_string_input() -> bytes:
    """A 0-d string input beside a GATHER of a string constant (LiteRT's gather_0d shape)."""
    b = ModelBuilder(signature_key=None)
    b.add_input("text", (), "STRING")
    c = b.add_constant("word", _strings([b"abcd"]), dtype="STRING", shape=(1,))
    i = b.add_input("indices", (2,), np.int64)
    y = b.add_tensor("picked", (2,), "STRING")
    b.add_operator("GATHER", inputs=[c, i], outputs=[y], options={"axis": 0})
    b.add_output(y)
    return b.build()


def _scalar_add() -> bytes:
    b = ModelBuilder(signature_key=None)
    x = b.add_input("x", ())
    y = b.add_tensor("y", ())
    b.add_operator("ADD", inputs=[x, x], outputs=[y])
    b.add_output(y)
    return b.build()


def _sum_of_any_length() -> bytes:
    b = ModelBuilder(signature_key="serving_default")
    x = b.add_input("x", (1,), shape_signature=(-1,))
    axis = b.add_constant("axis", np.array([0], np.int32))
    y = b.add_tensor("y", ())
    b.add_operator("SUM", inputs=[x, axis], outputs=[y])
    b.add_output(y)
    return b.build()


def _litert():
    return pytest.importorskip("ai_edge_litert.interpreter", reason="ai-edge-litert is absent")


# -- strings --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        np.array(["a", "bb", "ccc", "d", "e"]),
        np.array([b"a", b"bb", b"ccc", b"d", b"e"]),
        np.array(["a", b"bb", "ccc", b"d", "e"], dtype=object),
    ],
    ids=["str", "bytes", "object"],
)
@pytest.mark.parametrize("delegates", [[], ["litert"]], ids=["reference", "litert"])
def test_string_tensors_take_numpy_text_and_give_bytes(text, delegates):
    """A string tensor is numpy.bytes_ in its details, takes str, bytes and object arrays,
    and gives an object array of bytes back, on the reference and through litert."""
    if delegates:
        pytest.importorskip("offload_litert", reason="offload-litert is not installed")
    interp = offload.Interpreter(model_content=_gather_strings(), delegates=delegates)
    interp.allocate_tensors()
    text_in, indices = interp.get_input_details()
    assert text_in["dtype"] is np.bytes_
    assert interp.get_output_details()[0]["dtype"] is np.bytes_
    interp.set_tensor(indices["index"], np.array([1, 2, 4]))
    interp.set_tensor(text_in["index"], text)
    interp.invoke()
    picked = interp.get_tensor(interp.get_output_details()[0]["index"])
    assert picked.dtype == object and list(picked) == [b"bb", b"ccc", b"e"]
    assert interp.delegation_report()["restored_to_cpu"] == {}
    if delegates:
        assert interp.delegation_report()["cpu"]["nodes"] == []


def test_string_tensor_refuses_what_is_not_text():
    """Numbers or a list for a string tensor: LiteRT's ValueError and text."""
    interp = offload.Interpreter(model_content=_gather_strings(), delegates=[])
    interp.allocate_tensors()
    with pytest.raises(TensorTypeError, match="expected type STRING"):
        interp.set_tensor(0, np.arange(5))
    with pytest.raises(ValueError, match="Passed in value type is not a numpy array"):
        interp.set_tensor(0, ["a"] * 5)
    with pytest.raises(TensorTypeError, match="raw view"):
        interp.tensor(0)()


def test_scalar_bytes_keep_every_byte():
    """A 0-d bytes value keeps its trailing NULs, and reads back as a 0-d object array."""
    interp = offload.Interpreter(model_content=_scalar_string_input(), delegates=[])
    interp.allocate_tensors()
    data = b"abcd" + bytes(16)
    interp.set_tensor(0, np.array(data))
    value = interp.get_tensor(0)
    assert value.shape == () and value.item(0) == data
    interp.set_tensor(2, np.array([0, 0]))
    interp.invoke()
    assert list(interp.get_tensor(interp.get_output_details()[0]["index"])) == [b"abcd"] * 2


def test_strings_match_litert():
    """The same values and dtypes as LiteRT for each kind of text array."""
    litert = _litert()
    model = _gather_strings()
    for text in (np.array(["x", "yy", "z", "", "w"]), np.array([b"\x00a", b"b", b"c", b"", b"e"])):
        got = []
        for module in (litert, ours):
            interp = module.Interpreter(model_content=model)
            interp.allocate_tensors()
            interp.set_tensor(1, np.array([0, 3, 1]))
            interp.set_tensor(0, text)
            interp.invoke()
            out = interp.get_tensor(2)
            got.append((out.dtype, out.tolist(), interp.get_input_details()[0]["dtype"]))
        assert got[0] == got[1]


# -- arguments ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_threads": -1}, "num_threads should >= 1"),
        ({"num_threads": 0}, "num_threads should >= 1"),
        ({"num_threads": 4.2}, "type of num_threads should be int"),
        ({"num_threads": np.int64(2)}, "type of num_threads should be int"),
        ({"experimental_op_resolver_type": "test"}, "Unrecognized passed in op resolver type"),
        ({"experimental_op_resolver_type": 3}, "Unrecognized passed in op resolver type"),
    ],
)
def test_bad_arguments_are_litert_s_value_errors(kwargs, message):
    """num_threads and the resolver type are checked as LiteRT checks them, with its text."""
    with pytest.raises(ValueError, match=message):
        offload.Interpreter(model_content=_permute(), **kwargs)
    litert = _litert()
    with pytest.raises(ValueError, match=message):
        litert.Interpreter(model_content=_permute(), **kwargs)


def test_litert_positional_order():
    """LiteRT's fifth positional parameter is the resolver type: the reference alone runs."""
    interp = offload.Interpreter(
        None, _permute(), None, 1, ours.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES, True
    )
    interp.allocate_tensors()
    assert interp.delegates == []
    assert interp.delegation_report()["default"]["mode"] == "reference"


def test_positional_delegates_still_work_with_a_warning():
    """offload 0.1's Interpreter(path, None, None, None, delegates) warns and still applies."""
    with pytest.warns(DeprecationWarning, match=r"removed in offload 0\.3\.0.*delegates="):
        interp = offload.Interpreter(None, _permute(), None, None, [])
    interp.allocate_tensors()
    assert interp.delegates == []
    with pytest.raises(TypeError, match="delegates twice"):
        offload.Interpreter(None, _permute(), None, None, [], delegates=[])


def test_offload_parameters_are_keyword_only():
    """Nothing of offload's own can be reached positionally after LiteRT's eleven."""
    with pytest.raises(TypeError):
        offload.Interpreter(None, _permute(), None, None, ours.OpResolverType.AUTO, *[False] * 7)


# -- 0-d values -----------------------------------------------------------------------------


@pytest.mark.parametrize("delegates", [[], None], ids=["reference", "default"])
def test_scalar_tensors_come_back_as_numpy_scalars(delegates):
    """get_tensor and tensor()() of a 0-d tensor give a numpy scalar, as LiteRT's do."""
    interp = offload.Interpreter(model_content=_scalar_add(), delegates=delegates)
    interp.allocate_tensors()
    interp.set_tensor(0, np.array(2.5, np.float32))
    interp.set_tensor(0, np.float32(3.0))
    interp.invoke()
    out = interp.get_tensor(1)
    assert type(out) is np.float32 and out == 6.0
    assert type(interp.tensor(1)()) is np.float32
    assert interp.delegation_report()["restored_to_cpu"] == {}


def test_empty_input_through_a_signature_runner():
    """A zero-length input to a signature runner sums to 0 (LiteRT's empty-tensor test)."""
    interp = offload.Interpreter(model_content=_sum_of_any_length(), delegates=[])
    out = interp.get_signature_runner()(x=np.zeros(0, np.float32))
    assert out["y"] == 0.0


# -- views ----------------------------------------------------------------------------------


def test_live_views_stop_calls_that_move_memory():
    """While an array from tensor() (or a slice of it) lives, allocate_tensors, invoke and
    resize_tensor_input raise LiteRT's RuntimeError; holding the function is fine."""
    interp = offload.Interpreter(model_content=_permute(), delegates=[])
    interp.allocate_tensors()
    assert interp._safe_to_run()
    accessor = interp.tensor(0)
    assert interp._safe_to_run()
    view = accessor()
    view[...] = [[1, 2, 3, 4]]
    part = view[0, 1:]
    del view
    assert not interp._safe_to_run()
    for call in (
        interp.invoke,
        interp.allocate_tensors,
        lambda: interp.resize_tensor_input(0, [1, 4]),
    ):
        with pytest.raises(InterpreterStateError, match="There is at least 1 reference"):
            call()
    del part
    interp.invoke()
    assert interp.get_tensor(2).tolist() == [[4, 3, 2, 1]]


# -- LiteRT's private inspection methods ----------------------------------------------------


def test_private_inspection_methods_match_litert():
    """_get_ops_details, _get_op_details and _get_tensor_details as LiteRT gives them."""
    interp = offload.Interpreter(model_content=_permute(), delegates=[])
    interp.allocate_tensors()
    (op,) = interp._get_ops_details()
    assert op["op_name"] == "FULLY_CONNECTED" and op["index"] == 0
    assert op["inputs"].tolist() == [0, 1, -1] and op["outputs"].tolist() == [2]
    assert op["operand_types"] == [np.float32, np.float32] and op["result_types"] == [np.float32]
    with pytest.raises(ValueError, match="Invalid node index"):
        interp._get_op_details(1)
    with pytest.raises(ValueError, match="Invalid tensor index 3 exceeds max tensor index 3"):
        interp._get_tensor_details(3, 0)
    with pytest.raises(ValueError, match="subgraph_index is out of range"):
        interp._get_tensor_details(0, 1)
    litert = _litert()
    theirs = litert.Interpreter(
        model_content=_permute(),
        experimental_op_resolver_type=litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
    )
    theirs.allocate_tensors()
    for mine, ref in zip(interp._get_ops_details(), theirs._get_ops_details(), strict=True):
        assert mine.keys() == ref.keys()
        for key in mine:
            assert (
                np.array_equal(mine[key], ref[key])
                if key in ("inputs", "outputs")
                else (mine[key] == ref[key])
            )
    for t in range(3):
        mine, ref = interp._get_tensor_details(t, 0), theirs._get_tensor_details(t, 0)
        assert mine["name"] == ref["name"] and mine["dtype"] == ref["dtype"]
        assert mine["shape"].tolist() == ref["shape"].tolist()


def test_no_deprecation_warning_for_litert_calls():
    """A LiteRT-shaped call warns about nothing."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        offload.Interpreter(model_content=_permute(), num_threads=2).allocate_tensors()


@pytest.mark.parametrize("op", ["ARG_MAX", "ARG_MIN"])
def test_arg_reductions_of_a_vector_give_a_scalar(op):
    """ARG_MAX/ARG_MIN of a 1-D input: a 0-d output, LiteRT's value (numpy's argmax gives a
    scalar there, which the reference once failed on)."""
    b = ModelBuilder(signature_key=None)
    x = b.add_input("x", (5,))
    axis = b.add_constant("axis", np.array([0], np.int32))
    y = b.add_tensor("y", (), np.int64)
    b.add_operator(op, inputs=[x, axis], outputs=[y], options={"output_type": "INT64"})
    b.add_output(y)
    model = b.build()
    values = np.array([1, 5, 2, 3, 0], np.float32)
    interp = offload.Interpreter(model_content=model, delegates=[])
    interp.allocate_tensors()
    interp.set_tensor(0, values)
    interp.invoke()
    got = interp.get_tensor(2)
    assert got == (np.argmax(values) if op == "ARG_MAX" else np.argmin(values))
    litert = _litert()
    theirs = litert.Interpreter(model_content=model)
    theirs.allocate_tensors()
    theirs.set_tensor(0, values)
    theirs.invoke()
    assert type(got) is type(theirs.get_tensor(2)) and got == theirs.get_tensor(2)
