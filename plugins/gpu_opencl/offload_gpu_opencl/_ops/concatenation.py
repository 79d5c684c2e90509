"""CONCATENATION: one copy_block launch per input (any axis), except inputs a product's launch
already wrote in place (GPU family, see _fusion)."""

from __future__ import annotations

from offload import Node, Subgraph
from offload_gpu_opencl._ir import Lowering, Shape, act, elements
from offload_gpu_opencl._ops._spec import OpSpec
from offload_gpu_opencl._ops.unary import FOR_ACTIVATION
from offload_gpu_opencl._shapes import need, required

__all__ = ["SPECS"]


def shapes(node: Node, sg: Subgraph) -> list[Shape]:
    need(len(node.inputs) >= 1, "expected at least one input")
    operands = [
        tuple(int(d) for d in required(node, sg, pos, "operand").shape)
        for pos in range(len(node.inputs))
    ]
    rank = len(operands[0])
    axis = int(node.options.get("axis", 0))
    need(rank >= 1, "inputs must have at least one dimension")
    need(-rank <= axis < rank, f"axis {axis} is outside rank {rank}")
    axis %= rank
    for s in operands:
        need(
            len(s) == rank
            and all(a == b for d, (a, b) in enumerate(zip(s, operands[0])) if d != axis),
            f"inputs {[list(s) for s in operands]} differ outside axis {axis}",
        )
    out = list(operands[0])
    out[axis] = sum(s[axis] for s in operands)
    return [tuple(out)]


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
        shapes=shapes,
        lower=lower,
        quantized_versions=(1, 2),
        fused_activations=("NONE",),
        constraints=("no fused activation (LiteRT's kernel rejects one)",),
    ),
)
