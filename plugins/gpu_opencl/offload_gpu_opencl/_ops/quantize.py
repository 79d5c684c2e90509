"""QUANTIZE (with quantization on): in the float view, a fake-quantize onto the output's grid."""

from __future__ import annotations

import numpy as np

from offload import Node, Subgraph
from offload_gpu_opencl._ir import Lowering, elements
from offload_gpu_opencl._ops._spec import QUANT_DTYPES, OpSpec
from offload_gpu_opencl._shapes import rule_reason

__all__ = ["SPECS"]


def check(node: Node, subgraph: Subgraph) -> str | None:
    reason = rule_reason(node, subgraph)
    if reason is not None:
        return reason
    q = subgraph.tensors[node.outputs[0]].quantization
    if q is None or q.per_channel:
        return "output must be quantized per tensor"
    return None


def lower(lw: Lowering, node: Node) -> None:
    x, t = node.inputs[0], node.outputs[0]
    tensor = lw.tensor(t)
    q = tensor.quantization
    assert q is not None
    info = np.iinfo(tensor.dtype)
    zero = int(q.zero_point[0]) if q.zero_point.size else 0
    total = elements(tensor.shape)
    lw.launch(
        node,
        "fake_quant",
        (total,),
        lw.ref(x),
        lw.out(node),
        total,
        float(q.scale[0]),
        float(zero),
        float(info.min),
        float(info.max),
    )


SPECS = (
    OpSpec(
        op="QUANTIZE",
        lower=lower,
        versions=(1, 2),
        dtypes=QUANT_DTYPES,
        quantized_only=True,
        check=check,
    ),
)
