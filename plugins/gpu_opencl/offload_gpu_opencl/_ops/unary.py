"""One-input elementwise ops: RELU, RELU6, LOGISTIC, EXP, HARD_SWISH, 8 elements per item
(unary8)."""

from __future__ import annotations

import numpy as np

from offload import Node, Subgraph
from offload_gpu_opencl._ir import ACTIVATIONS, Lowering, elements
from offload_gpu_opencl._ops._spec import FLOAT_DTYPES, OpSpec

__all__ = ["CODES", "COPY", "FOR_ACTIVATION", "SPECS"]

# unary8's `op` codes (cl/unary.cl); COPY copies.
CODES = {
    "RELU": 0,
    "RELU6": 1,
    "RELU_N1_TO_1": 2,
    "LOGISTIC": 3,
    "TANH": 4,
    "EXP": 5,
    "HARD_SWISH": 7,
}
COPY = 6
# The unary8 code applying each fused activation (by its ACTIVATIONS code).
FOR_ACTIVATION = {
    ACTIVATIONS[activation]: CODES[op]
    for activation, op in (
        ("RELU", "RELU"),
        ("RELU_N1_TO_1", "RELU_N1_TO_1"),
        ("RELU6", "RELU6"),
        ("TANH", "TANH"),
    )
}


def lower(lw: Lowering, node: Node) -> None:
    x = node.inputs[0]
    total = elements(lw.tensor(x).shape)
    lw.launch(node, "unary8", (-(-total // 8),), lw.ref(x), lw.out(node), total, CODES[node.op])
    lw.finish(node)


def _logistic_check(node: Node, subgraph: Subgraph) -> str | None:
    if subgraph.tensors[node.inputs[0]].dtype == np.float16:
        # LiteRT rounds each step of a float16 LOGISTIC to half; this kernel computes in float
        # and lands up to 2 half steps away, so the node stays on the CPU reference, which
        # follows LiteRT bit for bit.
        return "float16 LOGISTIC: LiteRT rounds every step to half, this kernel does not"
    return None


SPECS = (
    OpSpec(op="RELU", lower=lower, quantized_versions=(1, 2)),
    OpSpec(op="RELU6", lower=lower, quantized_versions=(1, 2)),
    OpSpec(op="LOGISTIC", lower=lower, quantized_versions=(1, 2), check=_logistic_check),
    OpSpec(op="EXP", lower=lower),
    # Float only: LiteRT's int8 HARD_SWISH is a 16-bit fixed-point algorithm of its own.
    OpSpec(op="HARD_SWISH", lower=lower, dtypes=FLOAT_DTYPES),
)
