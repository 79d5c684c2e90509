"""The bias types of CONV_2D, DEPTHWISE_CONV_2D, TRANSPOSE_CONV and FULLY_CONNECTED against
LiteRT's builtin kernels: where LiteRT's Prepare refuses a bias type (or a
``quantized_bias_type`` that does not match it), offload refuses it at allocate_tensors with a
TensorTypeError; where LiteRT runs it, the same bits; where LiteRT runs it by reading the bias
as another type (offload.ops._bias), offload refuses it too, and LiteRT is not run."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ai_edge_litert.interpreter")

from _one_op import Operand, build, describe_mismatch, run_litert  # noqa: E402

import offload  # noqa: E402
from offload.errors import TensorTypeError  # noqa: E402

pytestmark = pytest.mark.litert

CHANNELS = 4
_VERSIONS = {"CONV_2D": 8, "DEPTHWISE_CONV_2D": 7, "TRANSPOSE_CONV": 5, "FULLY_CONNECTED": 12}


def _model(op: str, x_dtype, bias_dtype, bias_type: str | None, filter_zp: int = 0):
    """A one-op model with a constant int8 filter and bias, 4 output channels."""
    rng = np.random.default_rng(5)
    big = 20000 if x_dtype == np.int16 else 100
    x = rng.integers(-big, big, (1, 4, 4, 2)).astype(x_dtype)
    scales = np.full(CHANNELS, 0.01, np.float32)
    bias = rng.integers(-5000, 5000, CHANNELS).astype(bias_dtype)
    window = {"padding": "SAME", "stride_w": 1, "stride_h": 1, "fused_activation_function": "NONE"}
    dilated = {**window, "dilation_w_factor": 1, "dilation_h_factor": 1}
    b = Operand(bias, True, (scales * 0.01, 0))
    if op == "CONV_2D":
        w = rng.integers(-127, 128, (CHANNELS, 3, 3, 2)).astype(np.int8)
        ins = [Operand(x, q=(0.01, 0)), Operand(w, True, (scales, filter_zp)), b]
        out, options = (1, 4, 4, CHANNELS), dilated
    elif op == "DEPTHWISE_CONV_2D":
        w = rng.integers(-127, 128, (1, 3, 3, CHANNELS)).astype(np.int8)
        ins = [Operand(x, q=(0.01, 0)), Operand(w, True, (scales, filter_zp), 3), b]
        out, options = (1, 4, 4, CHANNELS), {**dilated, "depth_multiplier": 2}
    elif op == "TRANSPOSE_CONV":
        w = rng.integers(-127, 128, (CHANNELS, 3, 3, 2)).astype(np.int8)
        shape = Operand(np.array([1, 4, 4, CHANNELS], np.int32), True)
        ins = [shape, Operand(w, True, (scales, filter_zp)), Operand(x, q=(0.01, 0)), b]
        out, options = (1, 4, 4, CHANNELS), window
    else:
        w = rng.integers(-127, 128, (CHANNELS, 16)).astype(np.int8)
        fc_bias = Operand(bias, True, (0.0001, 0))
        ins = [Operand(x.reshape(2, 16), q=(0.01, 0)), Operand(w, True, (0.01, filter_zp)), fc_bias]
        out, options = (2, CHANNELS), {"fused_activation_function": "NONE"}
    if bias_type is not None:
        options = {**options, "quantized_bias_type": bias_type}
    return build(op, ins, out, x_dtype, options, version=_VERSIONS[op], out_q=(0.01, 0))


def _offload(content: bytes, feeds: list[np.ndarray]) -> np.ndarray:
    interp = offload.Interpreter(model_content=content, delegates=[])
    interp.allocate_tensors()
    for detail, value in zip(interp.get_input_details(), feeds):
        interp.set_tensor(detail["index"], value)
    interp.invoke()
    return interp.get_tensor(interp.get_output_details()[0]["index"])


I16, I32, I64, I8 = np.int16, np.int32, np.int64, np.int8

# (op, input, bias, quantized_bias_type) LiteRT runs, with an answer of its own.
SAME = [
    ("CONV_2D", I16, I32, "INT32"),
    ("CONV_2D", I16, I64, None),
    ("CONV_2D", I16, I64, "INT64"),
    ("CONV_2D", I8, I32, None),
    ("DEPTHWISE_CONV_2D", I16, I64, None),
    ("TRANSPOSE_CONV", I16, I32, "INT32"),
    ("TRANSPOSE_CONV", I16, I64, None),
    ("FULLY_CONNECTED", I16, I32, None),  # ruy's int32 kernel: the option is not needed
    ("FULLY_CONNECTED", I16, I32, "INT32"),
    ("FULLY_CONNECTED", I16, I64, "INT64"),
]

# ... and those its Prepare refuses.
REFUSED = [
    ("CONV_2D", I16, I32, "INT64"),
    ("CONV_2D", I16, I64, "INT32"),
    ("CONV_2D", I16, I32, "UINT8"),
    ("CONV_2D", I8, I64, None),
    ("DEPTHWISE_CONV_2D", I16, I32, None),
    ("DEPTHWISE_CONV_2D", I8, I64, None),
    ("TRANSPOSE_CONV", I16, I32, "INT64"),
    ("TRANSPOSE_CONV", I16, I64, "INT32"),
    ("TRANSPOSE_CONV", I8, I64, None),
    ("FULLY_CONNECTED", I16, I32, "INT64"),
    ("FULLY_CONNECTED", I16, I64, "INT32"),
    ("FULLY_CONNECTED", I16, I32, "UINT8"),
]

# ... and those it runs by reading the bias as another type: without quantized_bias_type
# INT32, 16x8 CONV_2D and TRANSPOSE_CONV (and FULLY_CONNECTED's reference kernel, which a
# filter zero point selects) read an INT32 bias as int64, the upper channels' from past its
# end (the CPU reference was off by about the next channel's bias, or saturated); int8
# FULLY_CONNECTED reads an INT64 bias as int32.
MISREAD = [
    ("CONV_2D", I16, I32, None, 0),
    ("TRANSPOSE_CONV", I16, I32, None, 0),
    ("FULLY_CONNECTED", I16, I32, None, 3),
    ("FULLY_CONNECTED", I8, I64, None, 0),
]


def _id(case) -> str:
    op, x, b, option = case[:4]
    return f"{op}-{np.dtype(x).name}-{np.dtype(b).name}-{option}" + (
        f"-zp{case[4]}" if len(case) > 4 else ""
    )


@pytest.mark.parametrize("case", SAME, ids=_id)
def test_bias_litert_runs_gives_litert_bits(case) -> None:
    """A bias type LiteRT prepares and reads as it is: offload gives its bits."""
    content, feeds = _model(*case)
    got, want = _offload(content, feeds), run_litert(content, feeds)
    assert got.dtype == want.dtype and np.array_equal(got, want), describe_mismatch(got, want)


@pytest.mark.parametrize("case", REFUSED, ids=_id)
def test_bias_litert_refuses_is_a_type_error(case) -> None:
    """A bias type (or quantized_bias_type) LiteRT's Prepare refuses: TensorTypeError at
    allocate_tensors naming the op, the type found and what is taken."""
    content, feeds = _model(*case)
    with pytest.raises(RuntimeError, match="failed to prepare"):
        run_litert(content, feeds)
    with pytest.raises(TensorTypeError) as refused:
        offload.Interpreter(model_content=content, delegates=[]).allocate_tensors()
    message = str(refused.value)
    assert case[0] in message and ("takes" in message or "asks for" in message), message


@pytest.mark.parametrize("case", MISREAD, ids=_id)
def test_bias_litert_misreads_is_refused(case) -> None:
    """A bias LiteRT would read as another type: TensorTypeError at allocate_tensors on every
    path, saying which bias type the op takes."""
    content, _ = _model(*case)
    for delegates in ([], None):
        with pytest.raises(TensorTypeError, match="input [23] .* is INT(32|64); .* takes an INT"):
            offload.Interpreter(model_content=content, delegates=delegates).allocate_tensors()


def test_int16_conv_int32_bias_names_the_option() -> None:
    """The refusal of a 16x8 CONV_2D's INT32 bias says how to make the model valid."""
    content, _ = _model("CONV_2D", I16, I32, None)
    with pytest.raises(TensorTypeError, match="quantized_bias_type INT32 in its options"):
        offload.Interpreter(model_content=content, delegates=[]).allocate_tensors()
