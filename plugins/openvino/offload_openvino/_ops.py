"""What OpenVINO's TensorFlow Lite frontend converts, as the delegate declares it.

Written down, not read from OpenVINO: the frontend has no list of its translators to ask, and
having a translator is not the same as converting correctly. Every op here passes a single-op
model through the conformance kit against the CPU reference (tests/openvino/test_ops.py runs the
kit strictly, with the cases of tests/openvino/_cases.py added). Versions: 1, and up to the
highest version the converter wrote in the real models this delegate is tested on (the face
and word models, the fixtures and the full-size networks, int8 and QAT included); a node of a
version beyond that stays on the CPU with the version named.

Not declared, with the reason: ops the frontend has no translator for (LSTM and the other
recurrent ops, the resource variables and hash tables, the StableHLO ops, RELU_N1_TO_1); ops
offload's CPU reference does not run, so no case can check them (SIGN, TOPK_V2, WHERE and
others); RFFT2D and COMPLEX_ABS (the frontend leaves RFFT2D unconverted when a SQUEEZE sits
between the two, as in the word-activation model's spectrogram, and OpenVINO has no complex
tensor to take in or hand out of a partition).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from offload import DTypeName, OpCapability

__all__ = ["DECLARED", "NOT_DECLARED", "TENSOR_TYPES"]

F: tuple[DTypeName, ...] = ("float32",)
# float, and integer-quantized (the frontend dequantizes)
Q: tuple[DTypeName, ...] = ("float32", "int8", "uint8")
FI: tuple[DTypeName, ...] = ("float32", "int32")  # float, and int32 (shape arithmetic)
QI: tuple[DTypeName, ...] = (*Q, "int32")
B: tuple[DTypeName, ...] = ("bool",)

# (op, highest version, runtime dtypes, extra OpCapability fields)
_TABLE: tuple[tuple[str, int, tuple[DTypeName, ...], Mapping[str, Any]], ...] = (
    # elementwise, one input
    ("ABS", 1, F, {}),
    ("CEIL", 1, F, {}),
    ("COS", 1, F, {}),
    ("ELU", 1, F, {}),
    ("EXP", 1, F, {}),
    ("FLOOR", 1, F, {}),
    ("GELU", 1, F, {}),
    ("HARD_SWISH", 1, Q, {}),
    ("LEAKY_RELU", 1, F, {}),
    ("LOG", 1, F, {}),
    ("LOG_SOFTMAX", 1, F, {}),
    ("LOGISTIC", 2, Q, {}),
    ("NEG", 1, F, {}),
    ("RELU", 2, Q, {}),
    ("RELU6", 1, F, {}),
    ("RELU_0_TO_1", 1, F, {}),
    ("ROUND", 1, F, {}),
    ("RSQRT", 1, F, {}),
    ("SIN", 1, F, {}),
    ("SOFTMAX", 2, Q, {}),
    ("SQRT", 1, F, {}),
    ("SQUARE", 1, F, {}),
    ("TANH", 1, F, {}),
    ("ZEROS_LIKE", 1, F, {}),
    # elementwise, several inputs
    ("ADD", 2, QI, {}),
    ("ADD_N", 1, F, {}),
    ("DIV", 1, F, {}),
    ("FLOOR_DIV", 1, FI, {}),
    ("FLOOR_MOD", 1, F, {}),
    ("MAXIMUM", 1, F, {}),
    ("MINIMUM", 1, F, {}),
    ("MUL", 2, QI, {}),
    ("POW", 1, F, {}),
    ("PRELU", 1, F, {}),
    ("SQUARED_DIFFERENCE", 1, F, {}),
    ("SUB", 1, F, {}),
    ("SELECT_V2", 1, ("bool", "float32"), {}),
    ("EQUAL", 1, F, {"output_dtypes": B}),
    ("NOT_EQUAL", 1, F, {"output_dtypes": B}),
    ("GREATER", 1, F, {"output_dtypes": B}),
    ("GREATER_EQUAL", 1, F, {"output_dtypes": B}),
    ("LESS", 1, F, {"output_dtypes": B}),
    ("LESS_EQUAL", 1, F, {"output_dtypes": B}),
    ("LOGICAL_AND", 1, B, {}),
    ("LOGICAL_NOT", 1, B, {}),
    ("LOGICAL_OR", 1, B, {}),
    # shapes and layout
    ("BATCH_TO_SPACE_ND", 1, F, {}),
    ("BROADCAST_TO", 1, F, {}),
    ("CAST", 1, FI, {}),
    ("CONCATENATION", 2, Q, {}),
    ("DEPTH_TO_SPACE", 1, F, {}),
    ("EXPAND_DIMS", 1, F, {}),
    ("FILL", 1, FI, {}),
    ("GATHER", 1, F, {}),
    ("GATHER_ND", 1, F, {}),
    ("MIRROR_PAD", 1, F, {}),
    ("PACK", 1, FI, {}),
    ("PAD", 1, F, {}),
    ("PADV2", 1, F, {}),
    ("RESHAPE", 1, QI, {}),
    ("REVERSE_V2", 1, F, {}),
    ("SHAPE", 1, F, {"output_dtypes": ("int32",)}),
    ("SLICE", 1, FI, {}),
    ("SPACE_TO_BATCH_ND", 1, F, {}),
    ("SPACE_TO_DEPTH", 1, F, {}),
    ("SPLIT", 1, F, {}),
    ("SPLIT_V", 1, F, {}),
    ("SQUEEZE", 1, F, {}),
    ("STRIDED_SLICE", 2, QI, {}),
    ("TILE", 1, F, {}),
    ("TRANSPOSE", 1, F, {}),
    ("UNPACK", 1, F, {}),
    # reductions
    ("ARG_MAX", 1, F, {"output_dtypes": ("int32", "int64")}),
    ("ARG_MIN", 1, F, {"output_dtypes": ("int32", "int64")}),
    ("CUMSUM", 1, F, {}),
    ("MEAN", 2, Q, {}),
    ("REDUCE_MAX", 1, F, {}),
    ("REDUCE_MIN", 1, F, {}),
    ("REDUCE_PROD", 1, FI, {}),
    ("SUM", 1, F, {}),
    # networks
    ("AVERAGE_POOL_2D", 2, Q, {}),
    ("BATCH_MATMUL", 1, F, {}),
    ("CONV_2D", 5, Q, {}),
    ("DEPTHWISE_CONV_2D", 6, Q, {}),
    ("FULLY_CONNECTED", 12, Q, {}),
    ("L2_NORMALIZATION", 1, F, {}),
    ("MAX_POOL_2D", 2, Q, {}),
    ("RESIZE_BILINEAR", 3, Q, {}),
    # OpenVINO's frontend ignores half_pixel_centers here (measured: 258 of 594 values off).
    ("RESIZE_NEAREST_NEIGHBOR", 1, F, {"options": {"half_pixel_centers": False}}),
    ("TRANSPOSE_CONV", 2, Q, {}),
    # quantization
    ("DEQUANTIZE", 3, ("int8", "uint8", "float16"), {"output_dtypes": F}),
    ("QUANTIZE", 1, Q, {"output_dtypes": ("int8", "uint8")}),
)

DECLARED: tuple[OpCapability, ...] = tuple(
    OpCapability(op=op, versions=(1, top), dtypes=dtypes, **extra)
    for op, top, dtypes, extra in _TABLE
)

# Ops asked about often, and why they are not declared (the planner's reason names the op).
NOT_DECLARED: Mapping[str, str] = {
    "LSTM": "OpenVINO's TensorFlow Lite frontend has no translator for LSTM",
    "UNIDIRECTIONAL_SEQUENCE_LSTM": (
        "OpenVINO's TensorFlow Lite frontend has no translator for UNIDIRECTIONAL_SEQUENCE_LSTM"
    ),
    "RELU_N1_TO_1": "OpenVINO's TensorFlow Lite frontend has no translator for RELU_N1_TO_1",
}

# Tensor types the frontend is handed (Tensor.type_name); the rest (INT16, INT4, STRING,
# FLOAT64, ...) stay on the CPU, named.
TENSOR_TYPES = frozenset({"FLOAT32", "FLOAT16", "INT32", "INT64", "INT8", "UINT8", "BOOL"})
