"""PAD with zeros (rank <= 4), one output element per item. A zero PAD of H and W that only
convolutions read is folded into their padding, and one of channels before a residual ADD is
absorbed into the convolution's epilogue (see _fusion): neither reaches this lowering."""

from __future__ import annotations

import numpy as np

from offload import Node, Subgraph
from offload_gpu_opencl._ir import Lowering, elements, pad4
from offload_gpu_opencl._ops._spec import OpSpec
from offload_gpu_opencl._shapes import constant_ints, need, required

__all__ = ["SPECS"]


def limits(node: Node, sg: Subgraph) -> None:
    """Constant paddings (read on the host), rank <= 4 (the pad kernel's)."""
    constant_ints(sg, required(node, sg, 1, "paddings"), "paddings (input 1)")
    rank = len(required(node, sg, 0, "input").shape)
    need(rank <= 4, f"input must have rank <= 4, found {rank}")


def lower(lw: Lowering, node: Node) -> None:
    x = node.inputs[0]
    pads = np.asarray(lw.tensor(node.inputs[1]).constant_value(), np.int64).reshape(-1, 2)
    before = [0] * (4 - len(pads)) + [int(p) for p in pads[:, 0]]
    i4, o4 = pad4(lw.tensor(x).shape), pad4(lw.tensor(node.outputs[0]).shape)
    total = elements(o4)
    lw.launch(
        node, "pad", (total,), lw.ref(x), lw.out(node), total, *i4, o4[1], o4[2], o4[3], *before
    )
    # The output holds input values and zeros: on the grid already, no fake quantization.


SPECS = (
    OpSpec(op="PAD", lower=lower, limits=limits, quantized_versions=(1, 2), constant_inputs=(1,)),
)
