"""One-op models of every op and tensor type, the cases of the op-type declarations' record.

Each case is a model of one op whose data tensors all have one type, the 8- and 16-bit
integers once with quantization parameters and once without (comparisons give BOOL, the rest
their input type unless the op fixes it). ``scripts/probe_op_types.py`` records LiteRT's
verdict on each in ``tests/fixtures/litert_op_types.json``; ``tests/test_op_types.py`` holds
offload's declarations (``OpKernel.types``) to that record.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from offload.model.builder import ModelBuilder

UNARY = (
    "ABS CEIL COS ELU EXP FLOOR GELU HARD_SWISH L2_NORMALIZATION LEAKY_RELU "
    "LOCAL_RESPONSE_NORMALIZATION LOG LOGICAL_NOT LOGISTIC LOG_SOFTMAX NEG RELU RELU6 "
    "RELU_0_TO_1 RELU_N1_TO_1 ROUND RSQRT SIN SOFTMAX SQRT SQUARE TANH ZEROS_LIKE"
).split()
BINARY = (
    "ADD SUB MUL DIV FLOOR_DIV FLOOR_MOD MAXIMUM MINIMUM POW SQUARED_DIFFERENCE PRELU "
    "LOGICAL_AND LOGICAL_OR"
).split()
COMPARISON = "EQUAL NOT_EQUAL GREATER GREATER_EQUAL LESS LESS_EQUAL".split()

# Ops with one data input (position 0 unless noted) and constant int32 operands, by op:
# (data shape, {position: constant}, options, output type or None for the data type).
I32 = "INT32"
POOL = {"filter_height": 2, "filter_width": 2, "stride_h": 2, "stride_w": 2}
STRUCTURAL: dict[str, tuple[list[int], dict[int, Any], dict[str, Any], str | None]] = {
    "RESHAPE": ([1, 2, 3, 4], {1: [6, 4]}, {}, None),
    "SQUEEZE": ([1, 2, 3, 4], {}, {"squeeze_dims": [0]}, None),
    "EXPAND_DIMS": ([1, 2, 3, 4], {1: [0]}, {}, None),
    "TRANSPOSE": ([1, 2, 3, 4], {1: [0, 2, 1, 3]}, {}, None),
    "PAD": ([1, 2, 3, 4], {1: [[0, 0], [1, 1], [0, 0], [0, 0]]}, {}, None),
    "MIRROR_PAD": ([1, 2, 3, 4], {1: [[0, 0], [1, 1], [0, 0], [0, 0]]}, {"mode": "REFLECT"}, None),
    "GATHER": ([1, 2, 3, 4], {1: [0, 1]}, {"axis": 2}, None),
    "GATHER_ND": ([2, 3, 4], {1: [[0], [1]]}, {}, None),
    "TILE": ([1, 2, 3, 4], {1: [1, 1, 1, 2]}, {}, None),
    "SLICE": ([1, 2, 3, 4], {1: [0, 0, 1, 0], 2: [1, 2, 2, 4]}, {}, None),
    "STRIDED_SLICE": ([1, 2, 3, 4], {1: [0, 0, 0, 0], 2: [1, 2, 3, 4], 3: [1, 1, 2, 1]}, {}, None),
    "REVERSE_V2": ([1, 2, 3, 4], {1: [1]}, {}, None),
    "BROADCAST_TO": ([1, 1, 3, 4], {1: [2, 2, 3, 4]}, {}, None),
    "DEPTH_TO_SPACE": ([1, 2, 2, 4], {}, {"block_size": 2}, None),
    "SPACE_TO_DEPTH": ([1, 4, 4, 2], {}, {"block_size": 2}, None),
    "BATCH_TO_SPACE_ND": ([4, 2, 2, 1], {1: [2, 2], 2: [[0, 0], [0, 0]]}, {}, None),
    "SPACE_TO_BATCH_ND": ([1, 4, 4, 1], {1: [2, 2], 2: [[0, 0], [0, 0]]}, {}, None),
    "MEAN": ([1, 2, 3, 4], {1: [1]}, {"keep_dims": False}, None),
    "SUM": ([1, 2, 3, 4], {1: [1]}, {"keep_dims": False}, None),
    "REDUCE_MAX": ([1, 2, 3, 4], {1: [1]}, {"keep_dims": False}, None),
    "REDUCE_MIN": ([1, 2, 3, 4], {1: [1]}, {"keep_dims": False}, None),
    "REDUCE_PROD": ([1, 2, 3, 4], {1: [1]}, {"keep_dims": False}, None),
    "REDUCE_ANY": ([1, 2, 3, 4], {1: [1]}, {"keep_dims": False}, None),
    "REDUCE_ALL": ([1, 2, 3, 4], {1: [1]}, {"keep_dims": False}, None),
    "ARG_MAX": ([1, 2, 3, 4], {1: [3]}, {"output_type": "INT32"}, I32),
    "ARG_MIN": ([1, 2, 3, 4], {1: [3]}, {"output_type": "INT32"}, I32),
    "AVERAGE_POOL_2D": (
        [1, 4, 4, 2],
        {},
        POOL,
        None,
    ),
    "MAX_POOL_2D": (
        [1, 4, 4, 2],
        {},
        POOL,
        None,
    ),
    "L2_POOL_2D": (
        [1, 4, 4, 2],
        {},
        POOL,
        None,
    ),
    "RESIZE_BILINEAR": ([1, 2, 2, 2], {1: [4, 4]}, {}, None),
    "RESIZE_NEAREST_NEIGHBOR": ([1, 2, 2, 2], {1: [4, 4]}, {}, None),
    "CUMSUM": ([1, 2, 3, 4], {1: 1}, {}, None),
    "UNPACK": ([1, 2, 3, 4], {}, {"num": 2, "axis": 1}, None),
    "SPLIT": ([1, 2, 3, 4], {0: 3}, {"num_splits": 2}, None),
    "SPLIT_V": ([1, 2, 3, 4], {1: [1, 3], 2: 3}, {"num_splits": 2}, None),
    "TOPK_V2": ([1, 2, 3, 4], {1: 2}, {}, None),
    "SHAPE": ([1, 2, 3, 4], {}, {"out_type": "INT32"}, I32),
    "RANK": ([1, 2, 3, 4], {}, {}, I32),
    "CONCATENATION": ([1, 2, 3, 4], {1: "data"}, {"axis": 3}, None),
    "PACK": ([1, 2, 3, 4], {1: "data"}, {"values_count": 2, "axis": 0}, None),
    "ADD_N": ([1, 2, 3, 4], {1: "data"}, {}, None),
    "SELECT": ([1, 2, 3, 4], {0: "cond", 2: "data"}, {}, None),
    "SELECT_V2": ([1, 2, 3, 4], {0: "cond", 2: "data"}, {}, None),
    "FILL": ([], {0: [2, 3]}, {}, None),
    "BATCH_MATMUL": ([1, 2, 3, 4], {1: "data4x2"}, {}, None),
}
# The output shapes of each structural case (the types are the data input's, or the one
# STRUCTURAL names; TOPK_V2's indices are INT32).
OUTPUT_SHAPES: dict[str, list[list[int]]] = {
    "RESHAPE": [[6, 4]],
    "SQUEEZE": [[2, 3, 4]],
    "EXPAND_DIMS": [[1, 1, 2, 3, 4]],
    "TRANSPOSE": [[1, 3, 2, 4]],
    "PAD": [[1, 4, 3, 4]],
    "MIRROR_PAD": [[1, 4, 3, 4]],
    "GATHER": [[1, 2, 2, 4]],
    "GATHER_ND": [[2, 3, 4]],
    "TILE": [[1, 2, 3, 8]],
    "SLICE": [[1, 2, 2, 4]],
    "STRIDED_SLICE": [[1, 2, 2, 4]],
    "REVERSE_V2": [[1, 2, 3, 4]],
    "BROADCAST_TO": [[2, 2, 3, 4]],
    "DEPTH_TO_SPACE": [[1, 4, 4, 1]],
    "SPACE_TO_DEPTH": [[1, 2, 2, 8]],
    "BATCH_TO_SPACE_ND": [[1, 4, 4, 1]],
    "SPACE_TO_BATCH_ND": [[4, 2, 2, 1]],
    "MEAN": [[1, 3, 4]],
    "SUM": [[1, 3, 4]],
    "REDUCE_MAX": [[1, 3, 4]],
    "REDUCE_MIN": [[1, 3, 4]],
    "REDUCE_PROD": [[1, 3, 4]],
    "REDUCE_ANY": [[1, 3, 4]],
    "REDUCE_ALL": [[1, 3, 4]],
    "ARG_MAX": [[1, 2, 3]],
    "ARG_MIN": [[1, 2, 3]],
    "AVERAGE_POOL_2D": [[1, 2, 2, 2]],
    "MAX_POOL_2D": [[1, 2, 2, 2]],
    "L2_POOL_2D": [[1, 2, 2, 2]],
    "RESIZE_BILINEAR": [[1, 4, 4, 2]],
    "RESIZE_NEAREST_NEIGHBOR": [[1, 4, 4, 2]],
    "CUMSUM": [[1, 2, 3, 4]],
    "UNPACK": [[1, 3, 4], [1, 3, 4]],
    "SPLIT": [[1, 2, 3, 2], [1, 2, 3, 2]],
    "SPLIT_V": [[1, 2, 3, 1], [1, 2, 3, 3]],
    "TOPK_V2": [[1, 2, 3, 2], [1, 2, 3, 2]],
    "SHAPE": [[4]],
    "RANK": [[]],
    "CONCATENATION": [[1, 2, 3, 8]],
    "PACK": [[2, 1, 2, 3, 4]],
    "ADD_N": [[1, 2, 3, 4]],
    "SELECT": [[1, 2, 3, 4]],
    "SELECT_V2": [[1, 2, 3, 4]],
    "FILL": [[2, 3]],
    "BATCH_MATMUL": [[1, 2, 3, 2]],
}
# Op versions LiteRT's resolver needs (it registers BROADCAST_TO from version 2).
VERSION = {"BROADCAST_TO": 2}
# The data input's position, where it is not 0.
DATA_POSITION = {"SPLIT": 1, "SELECT": 1, "SELECT_V2": 1, "FILL": 1}
TYPES = (
    "FLOAT32 FLOAT16 BFLOAT16 FLOAT64 COMPLEX64 INT4 INT8 UINT8 INT16 UINT16 INT32 UINT32 "
    "INT64 BOOL"
).split()
QUANTIZABLE = ("INT8", "UINT8", "INT16")
OPTIONS: dict[str, dict[str, Any]] = {
    "SOFTMAX": {"beta": 1.0},
    "LEAKY_RELU": {"alpha": 0.2},
    "LOCAL_RESPONSE_NORMALIZATION": {"radius": 1, "bias": 1.0, "alpha": 1.0, "beta": 0.5},
}
# Output quantization the op's quantized kernel insists on, by op and type; others use the
# input's, so that a refusal is about the type and not about the parameters.
FIXED_OUTPUT = {
    ("LOGISTIC", "INT8"): (1 / 256, -128),
    ("LOGISTIC", "UINT8"): (1 / 256, 0),
    ("LOGISTIC", "INT16"): (1 / 32768, 0),
    ("SOFTMAX", "INT8"): (1 / 256, -128),
    ("SOFTMAX", "UINT8"): (1 / 256, 0),
    ("SOFTMAX", "INT16"): (1 / 32768, 0),
    ("TANH", "INT8"): (1 / 128, 0),
    ("TANH", "UINT8"): (1 / 128, 128),
    ("TANH", "INT16"): (1 / 32768, 0),
    ("LOG_SOFTMAX", "INT8"): (16 / 256, 127),
    ("LOG_SOFTMAX", "UINT8"): (16 / 256, 255),
    ("L2_NORMALIZATION", "INT8"): (1 / 128, 0),
    ("L2_NORMALIZATION", "UINT8"): (1 / 128, 128),
}


def cases() -> list[tuple[str, str, bool]]:
    """(op, type, quantized) for every op and type."""
    return [
        (op, type_name, quantized)
        for op in UNARY + BINARY + COMPARISON + list(STRUCTURAL)
        for type_name in TYPES
        for quantized in ((False, True) if type_name in QUANTIZABLE else (False,))
    ]


def case_key(op: str, type_name: str, quantized: bool) -> str:
    return f"{op} {type_name}{' quantized' * quantized}"


def build(op: str, type_name: str, quantized: bool) -> bytes:
    """The one-op model of a case."""
    shape = [1, 2, 3, 4]
    quant = ((0.1 if type_name != "INT16" else 0.01), 0) if quantized else None
    model = ModelBuilder()
    if op in STRUCTURAL:
        shape, constants, options, out_type = STRUCTURAL[op]
        position = DATA_POSITION.get(op, 0)
        inputs: dict[int, int] = {}
        inputs[position] = model.add_input("x", shape, type_name, quantization=quant)
        for where, value in constants.items():
            if value == "data":
                inputs[where] = model.add_input("x2", shape, type_name, quantization=quant)
            elif value == "data4x2":
                inputs[where] = model.add_input("x2", [1, 2, 4, 2], type_name, quantization=quant)
            elif value == "cond":
                inputs[where] = model.add_input("c", shape, np.bool_)
            else:
                inputs[where] = model.add_constant(f"c{where}", np.array(value, np.int32))
        types = [out_type or type_name for _ in OUTPUT_SHAPES[op]]
        if op == "TOPK_V2":
            types[1] = I32
        outs = [
            model.add_tensor(f"y{i}", out_shape, t, quantization=quant if t == type_name else None)
            for i, (out_shape, t) in enumerate(zip(OUTPUT_SHAPES[op], types))
        ]
        model.add_operator(
            op,
            [inputs[i] for i in sorted(inputs)],
            outs,
            options or None,
            version=VERSION.get(op, 1),
        )
        for out in outs:
            model.add_output(out)
        return model.build()
    arity = 1 if op in UNARY else 2
    operands = [
        model.add_input(f"x{i}", shape, type_name, quantization=quant) for i in range(arity)
    ]
    out_type = "BOOL" if op in COMPARISON else type_name
    out_quant = FIXED_OUTPUT.get((op, type_name), quant) if quantized else None
    out = model.add_tensor("y", shape, out_type, quantization=out_quant)
    model.add_operator(op, operands, [out], OPTIONS.get(op))
    model.add_output(out)
    return model.build()


def sample(shape: tuple[int, ...], dtype: Any, seed: int) -> Any:
    rng = np.random.default_rng(seed)
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if np.issubdtype(dtype, np.integer):
        return rng.integers(1, 4, shape).astype(dtype)  # nonzero: a divisor stays valid
    return rng.uniform(0.5, 2.0, shape).astype(dtype)
