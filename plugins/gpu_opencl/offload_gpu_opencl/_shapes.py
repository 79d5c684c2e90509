"""Shape rules: what every op's rule (in _ops) is built from, and the checks around them all.

Nothing the lowering does trusts a shape the model declares. On PoCL device memory is the host
heap, so a kernel sized from a lying shape corrupts the process. Every op has a shape rule that
computes its outputs from its inputs and options and raises :class:`ShapeCheckError` for
parameters the kernels cannot take; :func:`checked_shapes` adds what holds for every op (no
empty tensors, nothing past 32-bit indices, rank <= 4). The delegate's support check turns a
refusal into a reason (the node stays on the CPU reference, which raises its own error where
the model is invalid), and at init a partition whose declared output shapes differ from the
rules' is refused (_ops.check_declared).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from offload import Node, Subgraph, Tensor
from offload.geometry import geometry, window_options
from offload_gpu_opencl._constants import foldable
from offload_gpu_opencl._errors import ShapeCheckError
from offload_gpu_opencl._ir import INT_MAX, MAX_ELEMENTS, Shape, elements

__all__ = [
    "ShapeRule",
    "bias",
    "checked_shapes",
    "constant_ints",
    "dims",
    "need",
    "nhwc",
    "optional",
    "required",
    "rule_reason",
    "same_shape",
    "window",
    "window_shape",
]

ShapeRule = Callable[[Node, Subgraph], list[Shape]]


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


def optional(node: Node, sg: Subgraph, pos: int) -> Tensor | None:
    present = pos < len(node.inputs) and node.inputs[pos] >= 0
    return sg.tensors[node.inputs[pos]] if present else None


def dims(t: Tensor, rank: int, what: str) -> Shape:
    need(len(t.shape) == rank, f"{what} must have rank {rank}, found shape {list(t.shape)}")
    return tuple(int(d) for d in t.shape)


def nhwc(t: Tensor, what: str) -> Shape:
    need(len(t.shape) == 4, f"{what} must be 4-D NHWC, found rank {len(t.shape)}")
    return tuple(int(d) for d in t.shape)


def constant_ints(sg: Subgraph, t: Tensor, what: str) -> list[int]:
    need(foldable(sg, t.index), f"{what} must be constant")
    need(np.issubdtype(t.dtype, np.integer), f"{what} must be integers, found {t.type_name}")
    return [int(v) for v in np.asarray(t.constant_value()).ravel()]


def bias(node: Node, sg: Subgraph, pos: int, channels: int) -> None:
    """An optional bias holds one value per output channel."""
    b = optional(node, sg, pos)
    if b is not None:
        need(
            elements(b.shape) == channels,
            f"bias (input {pos}) must hold one value per output channel ({channels}), "
            f"found shape {list(b.shape)}",
        )


def window_shape(node: Node, in_hw: Shape, filter_hw: Shape) -> Shape:
    """(OH, OW) of a convolution or pool by TFLite's rule; refuses strides, dilations and
    filter sizes below 1, and windows that leave no output (VALID with a filter larger than
    the input: TFLite's output size would be <= 0) or overflow 32-bit indices."""
    stride, dilation, padding, _ = window_options(node.options)
    for name, pair in (("stride", stride), ("dilation", dilation), ("filter size", filter_hw)):
        need(all(int(v) >= 1 for v in pair), f"{name} must be >= 1, found {list(pair)}")
    need(padding in ("SAME", "VALID"), f"padding must be SAME or VALID, found {padding!r}")
    stride = (int(stride[0]), int(stride[1]))
    dilation = (int(dilation[0]), int(dilation[1]))
    for size, k, s, d in zip(in_hw, filter_hw, stride, dilation):
        span = (int(k) - 1) * d + 1
        need(span + size + s <= INT_MAX // 4, f"a window of {span} pixels is too large")
        if padding == "VALID":
            need(
                span <= size,
                f"a {k}-tap filter (dilation {d}) spans {span} pixels, more than the {size} of "
                "the input with VALID padding: TFLite's output size would be "
                f"{(size + s - span) // s}",
            )
    g = geometry(
        padding,
        (int(in_hw[0]), int(in_hw[1])),
        (int(filter_hw[0]), int(filter_hw[1])),
        stride,
        dilation,
    )
    return g.out_h, g.out_w


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


def checked_shapes(node: Node, subgraph: Subgraph, rule: ShapeRule) -> list[Shape]:
    """The shape of each output by ``rule``, the node's op's rule.

    Raises :class:`ShapeCheckError` when the kernels cannot compute it: invalid or unsupported
    parameters, omitted inputs, empty tensors, more elements than 32-bit indices reach."""
    for pos, t in enumerate(node.inputs):
        tensor = subgraph.tensors[t] if t >= 0 else None
        if tensor is None or _is_parameter(tensor):
            continue
        need(
            all(int(d) >= 1 for d in tensor.shape) and elements(tensor.shape) <= MAX_ELEMENTS,
            f"input {pos} has shape {list(tensor.shape)}: empty tensors and tensors of more "
            f"than {MAX_ELEMENTS} elements are not supported",
        )
    shapes = [tuple(int(d) for d in s) for s in rule(node, subgraph)]
    need(
        len(shapes) == len(node.outputs),
        f"expected {len(shapes)} output(s), found {len(node.outputs)}",
    )
    for pos, shape in enumerate(shapes):
        need(
            all(d >= 1 for d in shape) and elements(shape) <= MAX_ELEMENTS and len(shape) <= 4,
            f"output {pos} would have shape {list(shape)}: empty outputs, rank above 4 and more "
            f"than {MAX_ELEMENTS} elements are not supported",
        )
    return shapes


def rule_reason(node: Node, subgraph: Subgraph, rule: ShapeRule) -> str | None:
    """Why the kernels cannot take this node's shapes and parameters by ``rule``, or None."""
    try:
        checked_shapes(node, subgraph, rule)
    except ShapeCheckError as exc:
        return str(exc)
    return None


def same_shape(node: Node, sg: Subgraph) -> list[Shape]:
    """Elementwise one-input ops (and QUANTIZE / DEQUANTIZE): the input's shape."""
    return [tuple(required(node, sg, 0, "input").shape)]
