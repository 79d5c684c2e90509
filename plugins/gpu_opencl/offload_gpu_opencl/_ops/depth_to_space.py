"""DEPTH_TO_SPACE: each pixel's channels become a block x block tile (depth_to_space, one
output element per item). The shape rule and its checks are the core's."""

from __future__ import annotations

from offload import Node
from offload_gpu_opencl._ir import Lowering, elements
from offload_gpu_opencl._ops._spec import OpSpec, raw_codes_reason

__all__ = ["SPECS"]


def lower(lw: Lowering, node: Node) -> None:
    x = node.inputs[0]
    _, oh, ow, co = lw.tensor(node.outputs[0]).shape
    total = elements(lw.tensor(node.outputs[0]).shape)
    bs = int(node.options.block_size)
    lw.launch(node, "depth_to_space", (total,), lw.ref(x), lw.out(node), total, oh, ow, co, bs)
    # The output holds input values only (one scale: raw_codes_reason): no fake quantization.


SPECS = (
    OpSpec(op="DEPTH_TO_SPACE", lower=lower, quantized_versions=(1, 1), check=raw_codes_reason),
)
