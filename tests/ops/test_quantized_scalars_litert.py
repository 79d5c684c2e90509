"""Quantized elementwise ops on rank-0 tensors, through offload's interpreter and LiteRT's
builtin kernels (issue 25, fuzz target op_types): a lookup table or fixed-point rule indexed
with a 0-d array gave a numpy scalar, which the executor failed on with an IndexError."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("ai_edge_litert.interpreter")

from _one_op import Operand, build, run_litert  # noqa: E402

import offload  # noqa: E402

pytestmark = pytest.mark.litert

# Input quantization by type: a zero point inside the range, int16's symmetric as LiteRT
# requires; the output's differs, so the scalar goes through a real rescale.
IN_Q = {np.int8: (0.05, 3), np.uint8: (0.1, 128), np.int16: (0.01, 0)}
OUT_Q = {np.int8: (0.07, -5), np.uint8: (0.07, 120), np.int16: (0.008, 0)}
# Output quantization LiteRT's kernel insists on.
FIXED_OUT_Q = {
    ("LOGISTIC", np.int8): (1 / 256, -128),
    ("LOGISTIC", np.uint8): (1 / 256, 0),
    ("TANH", np.int8): (1 / 128, 0),
    ("TANH", np.uint8): (1 / 128, 128),
}
OPTIONS: dict[str, dict[str, Any]] = {"LEAKY_RELU": {"alpha": 0.2}}
BINARY = ("ADD", "MUL", "PRELU")

# The quantized types LiteRT runs each op on and offload implements.
CASES = [
    *[(op, t) for op in ("RELU", "RELU6") for t in (np.int8, np.uint8, np.int16)],
    *[(op, t) for op in ("RELU_N1_TO_1", "TANH", "LOGISTIC") for t in (np.int8, np.uint8)],
    ("SQRT", np.int8),
    ("SQRT", np.int16),
    ("ELU", np.int8),
    *[(op, t) for op in ("LEAKY_RELU", *BINARY) for t in (np.int8, np.uint8, np.int16)],
]


def _run_offload(content: bytes, feeds: list[np.ndarray]) -> np.ndarray:
    """The output through the interpreter, whose executor is where a numpy scalar failed."""
    interp = offload.Interpreter(model_content=content, delegates=[])
    interp.allocate_tensors()
    for detail, value in zip(interp.get_input_details(), feeds):
        interp.set_tensor(detail["index"], value)
    interp.invoke()
    return interp.get_tensor(interp.get_output_details()[0]["index"])


@pytest.mark.parametrize("op, dtype", CASES, ids=[f"{op}-{np.dtype(t)}" for op, t in CASES])
def test_quantized_scalar_runs_as_litert(op: str, dtype: Any) -> None:
    """A rank-0 quantized RELU, RELU6, RELU_N1_TO_1, TANH, SQRT, LOGISTIC, ELU, LEAKY_RELU,
    ADD, MUL or PRELU gives a rank-0 array equal to LiteRT's, for values across the type's
    range (and, for a binary op, a second scalar of either sign)."""
    info = np.iinfo(dtype)
    values = [info.min, -7, 0, 9, 100, info.max]
    if op == "SQRT":  # LiteRT fails the invoke on a negative real value
        values = [v for v in values if v >= IN_Q[dtype][1]]
    out_q = FIXED_OUT_Q.get((op, dtype), OUT_Q[dtype])
    # int16 PRELU is LiteRT's 16x8 kernel: it reads alpha as int8, whatever its type.
    other_type = np.int8 if (op, dtype) == ("PRELU", np.int16) else dtype
    other_info = np.iinfo(other_type)
    for k, value in enumerate(np.clip(values, info.min, info.max)):
        x = np.array(value, dtype)
        operands = [Operand(x, q=IN_Q[dtype])]
        if op in BINARY:
            other = np.array(other_info.min // 3 if k % 2 else other_info.max // 5, other_type)
            operands.append(Operand(other, q=OUT_Q[dtype]))
        content, feeds = build(op, operands, (), dtype, OPTIONS.get(op), out_q=out_q)
        got = _run_offload(content, feeds)
        want = run_litert(content, feeds)
        # A 0-d value comes back as LiteRT gives it: a numpy scalar of the tensor's type.
        assert type(got) is type(want) and np.shape(got) == () and got.dtype == want.dtype
        assert got == want, f"{op} of {value}: offload {got}, LiteRT {want}"
