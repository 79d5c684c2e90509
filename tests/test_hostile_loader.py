"""Hostile models: the loader refuses what it cannot trust, with a typed error, and no more.

Each crafted model is built with the model builder; what the builder will not write (negative
dimensions) is patched into its bytes. Where LiteRT refuses the same model at load, a test
says so with LiteRT as the oracle.
"""

from __future__ import annotations

import dataclasses
import math
import os
import socket
import struct
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
import tflite
from ai_edge_litert import interpreter as litert

import offload
from offload._graph import Quantization
from offload.errors import ModelLoadError
from offload.model.builder import ModelBuilder

MARK = 7777  # a dimension to patch after building: its int32 bytes occur once in the model


def _patch_dim(content: bytes, value: int) -> bytes:
    mark = struct.pack("<i", MARK)
    assert content.count(mark) == 1, "the marker dimension must occur exactly once"
    return content.replace(mark, struct.pack("<i", value))


def _q(scale: object, zero_point: object, axis: int = 0) -> Quantization:
    """Quantization written as given: the builder does not check what the loader must."""
    return Quantization(
        np.asarray(scale, np.float32).ravel(), np.asarray(zero_point, np.int64).ravel(), axis
    )


def _loads_within(load: Callable[[], object], seconds: float = 10.0) -> BaseException | None:
    """Run ``load`` in a thread; fail the test (instead of hanging it) if it blocks."""
    outcome: list[BaseException | None] = []

    def target() -> None:
        try:
            load()
            outcome.append(None)
        except BaseException as exc:  # handed back to the test thread
            outcome.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert outcome, f"loading blocked for more than {seconds}s"
    return outcome[0]


# -- 1. model_path must be a regular file ---------------------------------------------------


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A directory with a short path: a Unix socket's path is limited to ~107 bytes."""
    with tempfile.TemporaryDirectory(prefix="offload-") as d:
        yield Path(d)


def _fifo(d: Path) -> Path:
    path = d / "model.tflite"
    os.mkfifo(path)
    return path


def _socket(d: Path) -> Path:
    path = d / "model.tflite"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    sock.close()  # the socket file stays behind, unopenable
    return path


def _directory(d: Path) -> Path:
    path = d / "model.tflite"
    path.mkdir()
    return path


NOT_REGULAR = {
    "FIFO": (_fifo, "FIFO"),
    "socket": (_socket, "socket"),
    "directory": (_directory, "directory"),
    "character device": (lambda d: Path(os.devnull), "character device"),
}


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs POSIX FIFOs and sockets")
@pytest.mark.parametrize("kind", sorted(NOT_REGULAR))
def test_model_path_must_be_a_regular_file(short_dir: Path, kind: str) -> None:
    """A FIFO, socket, directory or device as model_path is refused at once, by kind; a FIFO
    with no writer must not block the open."""
    make, found = NOT_REGULAR[kind]
    path = make(short_dir)
    for load in (
        lambda: offload.load_model(path),
        lambda: offload.Interpreter(model_path=path, delegates=[]),
    ):
        error = _loads_within(load)
        assert isinstance(error, ModelLoadError), error
        assert "expected a .tflite file" in str(error) and found in str(error)


# -- 2. quantization parameters -------------------------------------------------------------


def _int8_model(x_q: Quantization, w_q: Quantization, *, dtype: object = np.int8) -> bytes:
    """x (1, 4) -> FULLY_CONNECTED with constant weights w (3, 4) -> y (1, 3)."""
    b = ModelBuilder()
    x = b.add_input("x", (1, 4), dtype, quantization=x_q)
    w = b.add_constant("w", np.ones((3, 4), np.int8), quantization=w_q)
    y = b.add_tensor("y", (1, 3), dtype, quantization=_q(0.5, 0))
    b.add_operator("FULLY_CONNECTED", [x, w, -1], [y])
    b.add_output(y)
    return b.build()


PER_TENSOR = _q(0.1, 0)
PER_CHANNEL = _q([0.1, 0.2, 0.3], [0, 0, 0])

# name -> (model, tensor named in the error, text of the bad value, LiteRT refuses it too)
INVALID_QUANTIZATION = {
    "no zero point": (_int8_model(_q(0.1, []), PER_TENSOR), "'x'", "0 zero point", True),
    "2 zero points for 3 scales": (
        _int8_model(PER_TENSOR, _q([0.1, 0.2, 0.3], [0, 0])),
        "'w'",
        "2 zero point",
        True,
    ),
    "axis past the rank": (_int8_model(_q(0.1, 0, 2), PER_TENSOR), "'x'", "dimension 2", True),
    "negative axis": (_int8_model(PER_TENSOR, _q(0.1, 0, -1)), "'w'", "dimension -1", True),
    "scales not matching the axis": (
        _int8_model(PER_TENSOR, _q([0.1, 0.2, 0.3, 0.4], [0] * 4, 0)),
        "'w'",
        "4 quantization scales",
        True,
    ),
    "zero activation scale": (_int8_model(_q(0.0, 0), PER_TENSOR), "'x'", "= 0.0", False),
    "negative activation scale": (_int8_model(_q(-0.1, 0), PER_TENSOR), "'x'", "= -0.1", False),
    "NaN weight scale": (
        _int8_model(PER_TENSOR, _q([0.1, np.nan, 0.3], [0] * 3)),
        "'w'",
        "nan",
        False,
    ),
    "infinite weight scale": (_int8_model(PER_TENSOR, _q(np.inf, 0)), "'w'", "= inf", False),
    "negative weight channel scale": (
        _int8_model(PER_TENSOR, _q([0.1, 0.2, -0.3], [0] * 3)),
        "'w'",
        "scale[2] = -0.3",
        False,
    ),
    "int8 zero point 128": (_int8_model(_q(0.1, 128), PER_TENSOR), "'x'", "= 128", False),
    "uint8 zero point -1": (
        _int8_model(_q(0.1, -1), PER_TENSOR, dtype=np.uint8),
        "'x'",
        "= -1",
        False,
    ),
    "zero point past int32": (_int8_model(_q(0.1, 2**40), PER_TENSOR), "'x'", str(2**40), False),
}


@pytest.mark.parametrize("case", sorted(INVALID_QUANTIZATION))
def test_invalid_quantization_is_refused_at_load(case: str) -> None:
    """Bad quantization parameters raise ModelLoadError naming the tensor and the bad value."""
    content, tensor, value, _ = INVALID_QUANTIZATION[case]
    with pytest.raises(ModelLoadError) as info:
        offload.load_model(model_content=content)
    message = str(info.value)
    assert tensor in message and value in message, message
    assert "expected" in message


def test_litert_refuses_the_same_quantization_layouts() -> None:
    """The layout rules (counts, axis) are LiteRT's own: it refuses these models at load."""
    litert = pytest.importorskip("ai_edge_litert.interpreter")
    for content, _, _, litert_refuses in INVALID_QUANTIZATION.values():
        if litert_refuses:
            with pytest.raises(ValueError, match="invalid quantization parameters"):
                litert.Interpreter(model_content=content)


def _float_with(q: Quantization) -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", (1, 4), quantization=q)
    y = b.add_tensor("y", (1, 4))
    b.add_operator("RELU", [x], [y])
    b.add_output(y)
    return b.build()


VALID_QUANTIZATION = {
    # Converters write a zero scale for a weight channel that is all zero; LiteRT runs it.
    "zero scale on a constant's channel": _int8_model(PER_TENSOR, _q([0.1, 0.0, 0.3], [0] * 3)),
    "zero scale on a per-tensor constant": _int8_model(PER_TENSOR, _q(0.0, 0)),
    # No kernel reads a float tensor's parameters, and LiteRT loads and runs these.
    "float tensor with scale 0": _float_with(_q(0.0, 0)),
    "float tensor with NaN scale and a wide zero point": _float_with(_q(np.nan, 2**40)),
    # One zero point for every channel: offload broadcasts it (LiteRT wants one per scale).
    "one zero point for three channels": _int8_model(PER_TENSOR, _q([0.1, 0.2, 0.3], [0])),
}


@pytest.mark.parametrize("case", sorted(VALID_QUANTIZATION))
def test_unusual_but_valid_quantization_still_loads(case: str) -> None:
    """What real converters write, or what LiteRT runs, is not refused."""
    model = offload.load_model(model_content=VALID_QUANTIZATION[case])
    for t in model.main.tensors:
        q = t.quantization
        assert q is None or q.zero_point.shape == q.scale.shape


def test_zero_weight_channel_runs_like_litert() -> None:
    """A zero-scale weight channel contributes nothing, in offload as in LiteRT's builtin
    kernels (XNNPACK, LiteRT's default delegate, refuses the model instead)."""
    content = VALID_QUANTIZATION["zero scale on a constant's channel"]
    x = np.full((1, 4), 100, np.int8)
    interp = offload.Interpreter(model_content=content, delegates=[])
    interp.allocate_tensors()
    interp.set_tensor(0, x)
    interp.invoke()
    got = interp.get_tensor(interp.get_output_details()[0]["index"])
    # 400 accumulated * 0.1 (x) * channel scale / 0.5 (y): channels 0.1, 0 and 0.3.
    assert got.tolist() == [[8, 0, 24]]
    litert = pytest.importorskip("ai_edge_litert.interpreter")
    oracle = litert.Interpreter(
        model_content=content,
        experimental_op_resolver_type=litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
    )
    oracle.allocate_tensors()
    oracle.set_tensor(oracle.get_input_details()[0]["index"], x)
    oracle.invoke()
    assert np.array_equal(got, oracle.get_tensor(oracle.get_output_details()[0]["index"]))


# -- 3. sizes: Python ints, no negative dimensions -----------------------------------------

# 4 * (2**62 + 1) == 2**64 + 4: this shape's element count wraps to 4 in 64-bit arithmetic.
WRAPPING_SHAPE = (20, 5581, 8681, 49477, 384773)


def _with_constant(data: bytes, dtype: object, shape: tuple[int, ...]) -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", (1, 4))
    b.add_constant("c", data, dtype=dtype, shape=shape)
    y = b.add_tensor("y", (1, 4))
    b.add_operator("RELU", [x], [y])
    b.add_output(y)
    return b.build()


def _with_runtime(shape: tuple[int, ...], signature: tuple[int, ...] | None = None) -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", (1, 4))
    b.add_tensor("z", shape, shape_signature=signature)
    y = b.add_tensor("y", (1, 4))
    b.add_operator("RELU", [x], [y])
    b.add_output(y)
    return b.build()


BAD_SIZES = {
    "constant whose element count wraps to its byte count": (
        _with_constant(b"\x01\x02\x03\x04", np.uint8, WRAPPING_SHAPE),
        f"holds {math.prod(WRAPPING_SHAPE)} elements",
    ),
    "runtime tensor past what an array can address": (
        _with_runtime((2**31 - 1,) * 3),
        "expected at most",
    ),
    "constant with a negative dimension": (
        _patch_dim(_with_constant(b"\x00" * 16, np.float32, (MARK,)), -1),
        "shape [-1]",
    ),
    "runtime tensor with -1 in shape": (
        _patch_dim(_with_runtime((MARK, 4)), -1),
        "shape [-1, 4]",
    ),
    "packed INT4 constant one byte short": (
        _with_constant(b"\x11" * 5, "INT4", (3, 4)),
        "at least 6 bytes",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_SIZES))
def test_bad_sizes_are_refused_at_load(case: str) -> None:
    """Sizes are computed with Python ints and negative dimensions are refused, for constants
    and runtime tensors alike; LiteRT refuses every one of these at load too."""
    content, text = BAD_SIZES[case]
    with pytest.raises(ModelLoadError, match=r"tensor \d+ \('[cz]'\)") as info:
        offload.load_model(model_content=content)
    assert text in str(info.value)
    litert = pytest.importorskip("ai_edge_litert.interpreter")
    with pytest.raises(ValueError):
        litert.Interpreter(model_content=content)


def test_dynamic_dimensions_belong_in_shape_signature() -> None:
    """-1 in shape_signature (with a concrete shape) is how a dynamic tensor loads."""
    model = offload.load_model(model_content=_with_runtime((1, 4), signature=(-1, 4)))
    z = next(t for t in model.main.tensors if t.name == "z")
    assert z.shape == (1, 4) and z.shape_signature == (-1, 4)


def test_an_options_table_of_another_op_is_ignored_as_litert_does() -> None:
    """An ADD carrying a Conv2DOptions table with a fused RELU: LiteRT asks the union for
    AddOptions, finds none and adds without an activation; offload does the same (it used the
    foreign table's RELU) and lists the table in the model's load report."""
    b = ModelBuilder()
    x = b.add_input("x", (6,))
    y = b.add_tensor("y", (6,))
    b.add_operator("ADD", [x, x], [y], {"fused_activation_function": "NONE"})
    b.add_output(y)
    relu = int(tflite.ActivationFunctionType.RELU)
    b.operators[0] = dataclasses.replace(
        b.operators[0],
        options_type="Conv2DOptions",
        options={"fused_activation_function": relu, "stride_w": 1, "stride_h": 1},
    )
    content = b.build()
    value = np.array([-3, -1, 0, 1, 2, -5], np.float32)
    ref = litert.Interpreter(
        model_content=content,
        experimental_op_resolver_type=litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
    )
    ref.allocate_tensors()
    ref.set_tensor(ref.get_input_details()[0]["index"], value)
    ref.invoke()
    want = ref.get_tensor(ref.get_output_details()[0]["index"])
    np.testing.assert_array_equal(want, value + value)  # no RELU in LiteRT
    model = offload.load_model(model_content=content)
    (ignored,) = model.load_report()["ignored_options"]
    assert (
        ignored["node"] == 0
        and "Conv2DOptions table where ADD reads AddOptions" in ignored["reason"]
    )
    assert model.main.nodes[0].options["fused_activation_function"] == "NONE"
    interp = offload.Interpreter(model_content=content, delegates=[])
    interp.allocate_tensors()
    interp.set_tensor(interp.get_input_details()[0]["index"], value)
    interp.invoke()
    np.testing.assert_array_equal(interp.get_tensor(interp.get_output_details()[0]["index"]), want)
