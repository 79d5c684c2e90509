"""Shape checks: the core's shape rule for every op, and gpu_opencl's own limits around it.

Nothing the lowering does trusts a shape the model declares. On PoCL device memory is the host
heap, so a kernel sized from a lying shape corrupts the process. Every node's output shapes
come from the core's rule (:func:`offload.ops.output_shapes`, LiteRT's Prepare checks), whose
refusal of an invalid node is the reason given; each op adds only the limits of gpu_opencl's
kernels (constant parameters, 32-bit windows, masks it cannot take), and
:func:`checked_shapes` what holds for every op (no empty tensors, nothing past 32-bit
indices, rank <= 4), all raising :class:`ShapeCheckError`. The delegate's support check turns
a refusal into a reason (the node stays on the CPU reference, which raises its own error
where the model is invalid), and at init a partition whose declared output shapes differ from
the rule's is refused (_ops.check_declared).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from offload import Node, Subgraph, Tensor
from offload.errors import TensorShapeError, UnsupportedOpError
from offload.geometry import geometry, window_options
from offload.ops import output_shapes
from offload_gpu_opencl._constants import foldable
from offload_gpu_opencl._errors import ShapeCheckError
from offload_gpu_opencl._ir import INT_MAX, MAX_ELEMENTS, Shape, elements

__all__ = [
    "Limits",
    "checked_shapes",
    "constant_ints",
    "need",
    "required",
    "rule_reason",
    "window",
    "window_limits",
]

# An op's limits beyond the core's rule: raises ShapeCheckError for what its kernels cannot take.
# Called after the core's rule accepted the node (its output shapes may still be unknown, None,
# where they depend on an input the kernels need constant).
Limits = Callable[[Node, Subgraph], None]


def need(condition: bool, message: str) -> None:
    if not condition:
        raise ShapeCheckError(message)


def required(node: Node, sg: Subgraph, pos: int, what: str) -> Tensor:
    """A required input: present, not omitted (-1)."""
    need(
        pos < len(node.inputs) and node.inputs[pos] >= 0,
        f"{what} (input {pos}) is "
        + ("omitted" if pos < len(node.inputs) else f"missing ({len(node.inputs)} inputs)")
        + ", but the kernel reads it",
    )
    return sg.tensors[node.inputs[pos]]


def constant_ints(sg: Subgraph, t: Tensor, what: str) -> list[int]:
    need(foldable(sg, t.index), f"{what} must be constant")
    need(np.issubdtype(t.dtype, np.integer), f"{what} must be integers, found {t.type_name}")
    return [int(v) for v in np.asarray(t.constant_value()).ravel()]


def window_limits(node: Node, sg: Subgraph, filter_hw: tuple[int, int]) -> None:
    """A convolution's or pool's window (the core's rule has checked it) within the 32-bit
    indices the kernels compute in. The input is input 0, or input 2 for TRANSPOSE_CONV."""
    x = sg.tensors[node.inputs[2 if node.op == "TRANSPOSE_CONV" else 0]]
    stride, dilation, _, _ = window_options(node.options)
    for size, k, s, d in zip(x.shape[1:3], filter_hw, stride, dilation):
        span = (int(k) - 1) * int(d) + 1
        need(span + int(size) + int(s) <= INT_MAX // 4, f"a window of {span} pixels is too large")


def window(
    node: Node, in_hw: tuple[int, int], filter_hw: tuple[int, int], folded: tuple[int, int]
) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int], tuple[int, int]]:
    """(stride, dilation, output size, padding before) of a convolution or pool, by TFLite's
    SAME / VALID rule (the core's), plus the top/left padding of a PAD folded into it."""
    stride, dilation, padding, _ = window_options(node.options)
    g = geometry(padding, in_hw, filter_hw, stride, dilation)
    return stride, dilation, (g.out_h, g.out_w), (g.pad_top + folded[0], g.pad_left + folded[1])


def _is_parameter(t: Tensor) -> bool:
    """An integer constant read on the host (a shape, paddings, slice bounds), not data."""
    return t.is_constant and np.issubdtype(t.dtype, np.integer) and t.quantization is None


def checked_shapes(node: Node, subgraph: Subgraph, limits: Limits | None = None) -> list[Shape]:
    """The shape of each output by the core's rule for the node's op, within ``limits``.

    Raises :class:`ShapeCheckError` with the core's message where the node is invalid, and
    where the kernels cannot compute it: unsupported parameters, empty tensors, more elements
    than 32-bit indices reach, rank above 4, an output shape known only at invoke."""
    for pos, t in enumerate(node.inputs):
        tensor = subgraph.tensors[t] if t >= 0 else None
        if tensor is None or _is_parameter(tensor):
            continue
        need(
            all(int(d) >= 1 for d in tensor.shape) and elements(tensor.shape) <= MAX_ELEMENTS,
            f"input {pos} has shape {list(tensor.shape)}: empty tensors and tensors of more "
            f"than {MAX_ELEMENTS} elements are not supported",
        )
    try:
        rule = output_shapes(node, subgraph)
    except (TensorShapeError, UnsupportedOpError) as exc:
        raise ShapeCheckError(str(exc)) from None
    if limits is not None:
        limits(node, subgraph)
    need(rule is not None, f"the CPU reference has no shape rule for {node.op}")
    assert rule is not None
    need(
        len(rule) == len(node.outputs),
        f"expected {len(rule)} output(s), found {len(node.outputs)}",
    )
    shapes: list[Shape] = []
    for pos, shape in enumerate(rule):
        need(
            shape is not None,
            f"output {pos}'s shape depends on values known only at invoke; gpu_opencl sizes "
            "its buffers at init",
        )
        assert shape is not None
        need(
            all(d >= 1 for d in shape) and elements(shape) <= MAX_ELEMENTS and len(shape) <= 4,
            f"output {pos} would have shape {list(shape)}: empty outputs, rank above 4 and more "
            f"than {MAX_ELEMENTS} elements are not supported",
        )
        shapes.append(shape)
    return shapes


def rule_reason(node: Node, subgraph: Subgraph, limits: Limits | None = None) -> str | None:
    """Why the kernels cannot take this node's shapes and parameters, or None."""
    try:
        checked_shapes(node, subgraph, limits)
    except ShapeCheckError as exc:
        return str(exc)
    return None
