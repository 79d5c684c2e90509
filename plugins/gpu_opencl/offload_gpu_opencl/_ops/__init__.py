"""Every op gpu_opencl runs, one module per op family, each registering an :class:`OpSpec`:
its declaration, support check, shape rule and lowering in one place.

The registry below lists the modules explicitly. The delegate builds its capabilities from
it (:func:`capabilities_ops`), answers ``check_node`` through it, and the lowering dispatches
each node to its spec.
"""

from __future__ import annotations

from offload import Node, OpCapability, Subgraph
from offload_gpu_opencl._errors import ShapeCheckError
from offload_gpu_opencl._ir import Shape
from offload_gpu_opencl._ops import (
    alias,
    binary,
    concatenation,
    conv,
    depth_to_space,
    depthwise,
    fully_connected,
    lstm,
    pad,
    pool,
    quantize,
    resize,
    softmax,
    strided_slice,
    transpose_conv,
    unary,
)
from offload_gpu_opencl._ops._spec import OpSpec
from offload_gpu_opencl._shapes import checked_shapes, need

__all__ = [
    "SPECS",
    "OpSpec",
    "capabilities_ops",
    "check_declared",
    "output_shapes",
    "shape_reason",
]

_MODULES = (
    conv,
    depthwise,
    fully_connected,
    transpose_conv,
    pool,
    depth_to_space,
    binary,
    unary,
    alias,
    pad,
    concatenation,
    lstm,
    resize,
    softmax,
    strided_slice,
    quantize,
)
SPECS: dict[str, OpSpec] = {spec.op: spec for module in _MODULES for spec in module.SPECS}


def capabilities_ops(enable_quant: bool) -> tuple[OpCapability, ...]:
    """The declaration of every op with quantization on or off, by op name."""
    declared = (SPECS[op].capability(enable_quant) for op in sorted(SPECS))
    return tuple(cap for cap in declared if cap is not None)


def output_shapes(node: Node, subgraph: Subgraph) -> list[Shape]:
    """The shape of each output by the core's rule (:func:`offload.ops.output_shapes`).

    Raises :class:`ShapeCheckError` when the node is invalid (the core's message) or the
    kernels cannot compute it: unsupported parameters, empty tensors, more elements than
    32-bit indices reach."""
    spec = SPECS.get(node.op)
    need(spec is not None, f"gpu_opencl has no shape rule for {node.op}")
    assert spec is not None
    return checked_shapes(node, subgraph, spec.limits)


def shape_reason(node: Node, subgraph: Subgraph) -> str | None:
    """Why the lowering cannot take this node's shapes and parameters, or None."""
    try:
        output_shapes(node, subgraph)
    except ShapeCheckError as exc:
        return str(exc)
    return None


def check_declared(node: Node, subgraph: Subgraph) -> None:
    """Raise :class:`ShapeCheckError` unless every declared output shape of the node is the
    one its rule computes: buffers are sized, and kernels launched, from declared shapes."""
    shapes = output_shapes(node, subgraph)
    for pos, (t, shape) in enumerate(zip(node.outputs, shapes)):
        tensor = subgraph.tensors[t]
        if tuple(tensor.shape) != shape:
            ins = ", ".join(
                "omitted" if i < 0 else str(list(subgraph.tensors[i].shape)) for i in node.inputs
            )
            raise ShapeCheckError(
                f"output {pos} (tensor {t}, {tensor.name!r}) is declared with shape "
                f"{list(tensor.shape)}, but inputs {ins} and the node's options give "
                f"{list(shape)}; the model is inconsistent, so gpu_opencl sizes no buffer "
                "from it"
            )
