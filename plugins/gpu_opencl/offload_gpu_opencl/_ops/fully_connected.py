"""FULLY_CONNECTED: the register-blocked matmul with the fused epilogue, or in the GPU kernel
family the tiled GEMM (split over K where the output is small, as a classifier's); weights
pre-transformed once to [K][Co8] for both."""

from __future__ import annotations

from offload import Node, Subgraph
from offload_gpu_opencl._ir import Lowering, elements, pad_last
from offload_gpu_opencl._ops._spec import (
    FUSED_ACTIVATIONS,
    OpSpec,
    bias_row,
    constant_weights_reason,
)
from offload_gpu_opencl._shapes import rule_reason
from offload_gpu_opencl._tiling import launch_matmul

__all__ = ["SPECS"]


def check(node: Node, subgraph: Subgraph) -> str | None:
    reason = constant_weights_reason(node, subgraph, (1, 2)) or rule_reason(node, subgraph)
    if reason is None and node.options.get("weights_format", 0) not in (0, "DEFAULT"):
        return f"weights_format {node.options.weights_format} is not supported"
    return reason


def lower(lw: Lowering, node: Node) -> None:
    x, w, b = node.inputs[0], node.inputs[1], node.inputs[2] if len(node.inputs) > 2 else -1
    co, k = lw.tensor(w).shape
    p = elements(lw.tensor(x).shape) // k
    wt = lw.const(f"w{node.index}", lambda: pad_last(lw.value(w).reshape(co, k).T), param=True)
    launch_matmul(lw, node, lw.ref(x), wt, bias_row(lw, node, b, co), lw.epilogue(node), p, k, co)
    if node.index not in lw.epilogues:
        lw.finish(node)


SPECS = (
    OpSpec(
        op="FULLY_CONNECTED",
        lower=lower,
        # Hybrid (dynamic-range) v3, v9 and v12 run as float matmuls on dequantized weights;
        # the int16 and sparse versions in between stay out through the dtype and
        # constant-weight checks.
        quantized_versions=(1, 12),
        fused_activations=FUSED_ACTIVATIONS,
        constraints=("weights and bias constant", "weights_format DEFAULT"),
        check=check,
    ),
)
