"""DEPTH_TO_SPACE: each pixel's channels become a block x block tile (depth_to_space, 8 channels
of one output pixel per item). The shape rule and its checks are the core's."""

from __future__ import annotations

from offload import Node
from offload_gpu_opencl._ir import Lowering
from offload_gpu_opencl._ops._spec import OpSpec, raw_codes_reason

__all__ = ["SPECS"]


def lower(lw: Lowering, node: Node) -> None:
    x = node.inputs[0]
    n, oh, ow, co = lw.tensor(node.outputs[0]).shape
    cb = (co + 7) // 8
    bs = int(node.options.block_size)
    args = (lw.ref(x), lw.out(node), oh, ow, co, bs)
    lw.launch(node, "depth_to_space", (cb, ow, n * oh), *args, local=lw.shapes.rows_local(cb))
    # The output holds input values only (one scale: raw_codes_reason): no fake quantization.


SPECS = (
    OpSpec(op="DEPTH_TO_SPACE", lower=lower, quantized_versions=(1, 1), check=raw_codes_reason),
)
