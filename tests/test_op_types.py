"""Each op's declared tensor types (``OpKernel.types``) against what LiteRT's kernels accept.

``tests/fixtures/litert_op_types.json`` records LiteRT's verdict on the one-op models of
``tests/_op_type_cases.py`` (``scripts/probe_op_types.py``; LiteRT's crashes are recorded,
not run here). offload refuses at ``allocate_tensors`` every case LiteRT refuses or crashes
on, and accepts every case LiteRT accepts except the ones listed below, each with its reason.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import offload
from offload.errors import OffloadError, TensorTypeError
from offload.model.builder import ModelBuilder

from ._op_type_cases import build, case_key, cases

RECORD = json.loads((Path(__file__).parent / "fixtures" / "litert_op_types.json").read_text())[
    "cases"
]

# LiteRT runs these 8/16-bit integer activations without quantization parameters through its
# quantized kernels, with a scale of 0, and returns zeros or saturated values (measured on
# these cases against the plain integer answer): offload refuses them.
NO_SCALE_GARBAGE = {
    f"{op} {t}"
    for op, kinds in {
        "ELU": "INT8",
        "EXP": "INT8 INT16",
        "GELU": "INT8 UINT8 INT16",
        "HARD_SWISH": "INT8 UINT8",
        "LEAKY_RELU": "INT8 UINT8 INT16",
        "RELU": "INT8 UINT8 INT16",
        "RELU6": "INT8 UINT8 INT16",
        "RELU_0_TO_1": "INT8 UINT8",
        "RELU_N1_TO_1": "INT8 UINT8",
        "TANH": "INT8 UINT8",
        "SOFTMAX": "UINT8",
        "MUL": "INT8 UINT8",
        "DIV": "INT8 UINT8 INT16",
        "PRELU": "INT8 UINT8 INT16",
        "MEAN": "INT8 UINT8 INT16",
        "SUM": "INT8 UINT8 INT16",
        "BATCH_MATMUL": "INT8 INT16",
    }.items()
    for t in kinds.split()
}
# LiteRT's int16 PRELU reads an INT16 alpha as int8 bytes and returns garbage: refused.
MISREAD = {"PRELU INT16 quantized"}
# LiteRT accepts UINT8 for REDUCE_PROD only without quantization parameters; one rule per
# type cannot say that, and offload refuses UINT8 products altogether.
STRICTER = {"REDUCE_PROD UINT8"}


def _allocate(content: bytes) -> None:
    offload.Interpreter(model_content=content, delegates=[]).allocate_tensors()


@pytest.mark.parametrize("case", cases(), ids=lambda c: case_key(*c))
def test_declared_types_match_litert(case: tuple[str, str, bool]) -> None:
    key = case_key(*case)
    litert = RECORD[key]
    if litert != "ok" or key in NO_SCALE_GARBAGE | MISREAD | STRICTER:
        with pytest.raises(TensorTypeError) as refused:
            _allocate(build(*case))
        assert case[0] in str(refused.value) and case[1] in str(refused.value)
        return
    try:
        _allocate(build(*case))
    except TensorTypeError as exc:
        pytest.fail(f"LiteRT accepts {key}, offload refuses its type: {exc}")
    except OffloadError:
        pass  # a kernel offload lacks for this type says so in its own words (planning)


def test_record_covers_every_case() -> None:
    assert set(RECORD) == {case_key(*c) for c in cases()}


def test_message_names_node_op_type_found_and_types_allowed() -> None:
    with pytest.raises(TensorTypeError) as refused:
        _allocate(build("SQRT", "INT32", False))
    message = str(refused.value)
    assert "SQRT" in message and "node 0" in message
    assert "input 0 ('x0') is INT32" in message
    assert "FLOAT16, FLOAT32" in message and "INT16, INT8 with quantization parameters" in message


def test_missing_quantization_is_named() -> None:
    with pytest.raises(TensorTypeError, match="INT8 without quantization parameters"):
        _allocate(build("RELU", "INT8", False))


def test_inputs_of_a_binary_op_share_one_type() -> None:
    model = ModelBuilder()
    a = model.add_input("a", [2], np.float32)
    b = model.add_input("b", [2], np.int32)
    out = model.add_tensor("y", [2], np.float32)
    model.add_operator("ADD", [a, b], [out])
    model.add_output(out)
    with pytest.raises(TensorTypeError, match=r"input 1 \('b'\) is INT32; ADD takes inputs of"):
        _allocate(model.build())


def test_output_type_is_checked() -> None:
    model = ModelBuilder()
    a = model.add_input("a", [2], np.float32)
    out = model.add_tensor("y", [2], np.int32)
    model.add_operator("RELU", [a], [out])
    model.add_output(out)
    with pytest.raises(TensorTypeError, match=r"output 0 \('y'\) is INT32"):
        _allocate(model.build())


@pytest.mark.parametrize("n", [2, 3])
def test_every_input_of_a_variadic_op_is_checked(n: int) -> None:
    model = ModelBuilder()
    inputs = [model.add_input(f"x{i}", [2], np.float32) for i in range(n - 1)]
    inputs.append(model.add_input("odd", [2], "BFLOAT16"))
    out = model.add_tensor("y", [2 * n], np.float32)
    model.add_operator("CONCATENATION", inputs, [out], {"axis": 0})
    model.add_output(out)
    with pytest.raises(TensorTypeError, match=f"input {n - 1} \\('odd'\\) is BFLOAT16"):
        _allocate(model.build())
