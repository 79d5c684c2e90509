"""The bias types of the convolution family (CONV_2D, DEPTHWISE_CONV_2D, TRANSPOSE_CONV,
FULLY_CONNECTED), which follow the input's type and, for 16x8, the ``quantized_bias_type``
option: the ``across`` rule of their :class:`~offload.ops._types.OpTypes`, so every engine
refuses at ``allocate_tensors`` what LiteRT's Prepare refuses.

Where LiteRT prepares a bias but then reads its bytes as another type, offload refuses it too
(as it refuses PRELU's misread alpha): a 16x8 CONV_2D or TRANSPOSE_CONV without
``quantized_bias_type`` INT32 reads an INT32 bias as int64, channel c from the values 2c and
2c + 1 and the upper half of the channels from past the buffer's end; an int8 or uint8
FULLY_CONNECTED reads an INT64 bias as int32, the halves of its values.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from offload._graph import Node, Tensor

# How an op's 16x8 kernel takes its bias: "int64" only (DEPTHWISE_CONV_2D); int64, or int32
# with quantized_bias_type INT32 ("requested": CONV_2D, TRANSPOSE_CONV, whose kernels read
# the bias as int64 unless that option says INT32); "either" (FULLY_CONNECTED, whose int32
# kernel runs whenever the bias is int32).
Int16Bias = Literal["int64", "requested", "either"]

# TensorType numbers of the option's values, for a model whose options were read as numbers.
_TENSOR_TYPES = {0: "FLOAT32", 2: "INT32", 4: "INT64"}


def _requested(node: Node) -> str:
    """The node's quantized_bias_type as a TensorType name; FLOAT32 (the default) when unset."""
    options = node.options
    value = options.get("quantized_bias_type", "FLOAT32") if options is not None else "FLOAT32"
    return _TENSOR_TYPES.get(value, str(value)) if isinstance(value, int) else str(value)


def bias_types(
    data: int, bias: int, int16: Int16Bias, *, option: bool = True
) -> Callable[[Node, Sequence[Tensor]], str | None]:
    """The rule for a bias at input ``bias`` of an op whose data input is at ``data``: float
    inputs (hybrid ones too) take a FLOAT32 bias, int8 and uint8 ones INT32, int16 ones as
    ``int16`` says. ``option``: the op has quantized_bias_type, which LiteRT checks for int16
    inputs (INT32 or INT64 when set, and then the bias's type)."""

    def check(node: Node, tensors: Sequence[Tensor]) -> str | None:
        x, b = _tensor(node.inputs, data, tensors), _tensor(node.inputs, bias, tensors)
        if x is None:
            return None
        kind = x.type_name
        requested = "FLOAT32"
        if option and kind == "INT16":
            out = _tensor(node.outputs, 0, tensors)
            # FULLY_CONNECTED reads the option only for int16 in and int16 out.
            if node.op != "FULLY_CONNECTED" or (out is not None and out.type_name == "INT16"):
                requested = _requested(node)
        found = "" if b is None else f"input {bias} ({b.name!r}) is {b.type_name}"
        mode = int16
        if mode == "either" and _offset(_tensor(node.inputs, 1, tensors)):
            # A filter zero point sends FULLY_CONNECTED to its reference kernel, which reads
            # the bias as int64 unless the option says INT32.
            mode = "requested"
        allowed = _allowed(kind, mode, requested)
        if b is not None and allowed is not None and b.type_name not in allowed[0]:
            why = ""
            if node.op == "FULLY_CONNECTED" and b.type_name == "INT64":
                why = " (LiteRT reads an INT64 bias there as int32 values, the halves of its own)"
            return f"{found}; {node.op} with {kind} input takes {allowed[1]}{why}"
        if requested == "FLOAT32":
            return None
        if requested not in ("INT32", "INT64"):
            return (
                f"quantized_bias_type is {requested}; {node.op} with INT16 input takes "
                "INT32 or INT64 there, or FLOAT32 (unset)"
            )
        if b is not None and b.type_name != requested:
            return f"{found}; quantized_bias_type asks for an {requested} bias"
        return None

    return check


def _offset(weights: Tensor | None) -> bool:
    """Whether per-tensor ``weights`` have a nonzero zero point (LiteRT's params.zero_point,
    which only a tensor with one scale carries)."""
    q = None if weights is None else weights.quantization
    return q is not None and q.zero_point.size == 1 and int(q.zero_point[0]) != 0


def _tensor(indices: Sequence[int], position: int, tensors: Sequence[Tensor]) -> Tensor | None:
    if position >= len(indices) or indices[position] < 0:
        return None
    return tensors[indices[position]]


def _allowed(kind: str, int16: Int16Bias, requested: str) -> tuple[tuple[str, ...], str] | None:
    """(bias types allowed, how to say so) for an input of type ``kind``; None when the input
    type is not one this rule covers (the op's own type rules refuse it)."""
    if kind == "FLOAT32":
        return ("FLOAT32",), "a FLOAT32 bias"
    if kind in ("INT8", "UINT8"):
        return ("INT32",), "an INT32 bias"
    if kind != "INT16":
        return None
    if int16 == "int64":
        return ("INT64",), "an INT64 bias"
    if int16 == "either" or requested == "INT32":
        return ("INT32", "INT64"), "an INT32 or INT64 bias"
    return (
        ("INT64",),
        "an INT64 bias, or an INT32 one with quantized_bias_type INT32 in its options "
        "(without it LiteRT reads an INT32 bias as int64, past the bias's end)",
    )
