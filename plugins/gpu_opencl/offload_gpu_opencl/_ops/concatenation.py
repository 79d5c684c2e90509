"""CONCATENATION: one copy_block launch per input (any axis), except inputs a product's launch
already wrote in place (GPU family, see _fusion)."""

from __future__ import annotations

from offload import Node
from offload_gpu_opencl._ir import Lowering, act, elements
from offload_gpu_opencl._ops._spec import OpSpec
from offload_gpu_opencl._ops.unary import FOR_ACTIVATION

__all__ = ["SPECS"]


def lower(lw: Lowering, node: Node) -> None:
    out_shape = lw.tensor(node.outputs[0]).shape
    axis = node.options.axis % len(out_shape)
    inner_out = elements(out_shape[axis:])
    offset = 0
    for t in node.inputs:
        shape = lw.tensor(t).shape
        inner = elements(shape[axis:])
        if t in lw.placed:
            offset += inner
            continue
        lw.launch(
            node,
            "copy_block",
            (elements(shape),),
            lw.ref(t),
            lw.out(node),
            elements(shape),
            inner,
            inner_out,
            offset,
        )
        offset += inner
    activation = act(node)
    if activation:
        ref = lw.out(node)
        total = elements(out_shape)
        lw.launch(node, "unary8", (-(-total // 8),), ref, ref, total, FOR_ACTIVATION[activation])
    # The output holds input values: on the grid already, no fake quantization.


SPECS = (
    OpSpec(
        op="CONCATENATION",
        lower=lower,
        quantized_versions=(1, 2),
        fused_activations=("NONE",),
        constraints=("no fused activation (LiteRT's kernel rejects one)",),
    ),
)
