"""What the Core ML delegate takes: LiteRT's Core ML op list, as data plus per-node checks.

The declarative part (op names, versions, dtypes, rank, fused activations) is checked by
offload's core. The rest, which data cannot express, is :func:`check_node`: LiteRT's
``IsNodeSupportedByDelegate`` constraints (constant weights, the four broadcast shapes,
channel-only concatenation, H/W-only padding, single-batch FULLY_CONNECTED), each failing with
a reason a person can act on.

Weights must be constants. offload's core folds float16 weights (DEQUANTIZE of a constant)
and sparse ones (DENSIFY) into plain float32 constants before it plans, so a float16 model
reaches this delegate with its weights already constant and its DEQUANTIZE nodes gone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from offload import Capabilities, ModelTypeSupport, Node, OpCapability, Subgraph

__all__ = ["CAPABILITIES", "FUSED_ACTIVATIONS", "check_node", "constant_value"]

FUSED_ACTIVATIONS = ("NONE", "RELU", "RELU_N1_TO_1", "RELU6", "TANH")

_QUANTIZED = ModelTypeSupport(
    support="no",
    reason=(
        "Core ML programs are built in floating point and quantized TFLite tensors are not "
        "converted (LiteRT's Core ML delegate takes float32 and float16 models only)"
    ),
)


def _op(name: str, versions: tuple[int, int] = (1, 1), **kw: Any) -> OpCapability:
    kw.setdefault("max_rank", 4)
    return OpCapability(op=name, versions=versions, dtypes=kw.pop("dtypes", ("float32",)), **kw)


# Keyword bundles for _op.
_ACT: dict[str, Any] = {"fused_activations": FUSED_ACTIVATIONS}
_BROADCAST = "broadcast only of [B,H,W,C] with itself, [B,1,1,C], [B,H,W,1] or [B,1,1,1]"
_POOL: dict[str, Any] = {"fused_activations": ("NONE",), "constraints": ("4-D input",)}

CAPABILITIES = Capabilities(
    ops=(
        _op(
            "ADD",
            max_inputs=2,
            **_ACT,
            constraints=(_BROADCAST,),
        ),
        _op("AVERAGE_POOL_2D", **_POOL),
        _op(
            "CONCATENATION",
            fused_activations=("NONE",),
            constraints=("along the channel (last) axis only",),
        ),
        _op("CONV_2D", **_ACT, constraints=("weights and bias constant", "4-D input")),
        _op(
            "DEPTHWISE_CONV_2D",
            (1, 2),
            **_ACT,
            constraints=("weights and bias constant", "4-D input"),
        ),
        _op(
            "FULLY_CONNECTED",
            (1, 6),
            **_ACT,
            constraints=(
                "weights and bias constant",
                "batch 1: every input dimension but the last is 1",
                "default weights format",
            ),
        ),
        _op("HARD_SWISH"),
        _op("LOGISTIC"),
        _op("MAX_POOL_2D", **_POOL),
        _op("MEAN", constraints=("constant axes",)),
        _op(
            "MIRROR_PAD",
            constraints=("4-D input", "constant paddings on H and W only", "REFLECT mode only"),
        ),
        _op(
            "MUL",
            max_inputs=2,
            **_ACT,
            constraints=(_BROADCAST,),
        ),
        _op("PAD", constraints=("4-D input", "constant paddings on H and W only")),
        _op(
            "PADV2",
            constraints=("4-D input", "constant paddings on H and W only", "constant pad value"),
        ),
        _op("RELU"),
        _op("RELU_N1_TO_1"),
        _op("RELU6"),
        _op("RESHAPE", constraints=("static output shape",)),
        _op("RESIZE_BILINEAR", constraints=("4-D input", "constant size")),
        _op("SOFTMAX", options={"beta": 1.0}, constraints=("beta 1, along the last axis",)),
        _op("TANH"),
        _op(
            "TRANSPOSE_CONV",
            constraints=(
                "output shape and weights constant",
                "4-D input",
                "output inside the full result",
            ),
        ),
    ),
    model_types={
        "float32": ModelTypeSupport(support="yes"),
        "float16": ModelTypeSupport(
            support="yes", reason="offload's core folds float16 weights into float32 constants"
        ),
        "dynamic_range": _QUANTIZED,
        "int8": _QUANTIZED,
        "qat": _QUANTIZED,
    },
    platforms=("darwin",),
    precisions=("float32", "float16"),
    # Core ML places work on the Neural Engine where it can (compute_units ALL), which is what
    # LiteRT's HardwareAccelerator calls an NPU.
    hardware="npu",
    expected_speedup=4.0,
    partition_overhead=20.0,
)


def constant_value(subgraph: Subgraph, t: int) -> np.ndarray | None:
    """The value of tensor ``t`` when it is a dense constant (folded weights included), else
    None: a tensor computed at run time, an omitted input, or a variable."""
    if t < 0:
        return None
    tensor = subgraph.tensors[t]
    return tensor.constant_value() if tensor.is_dense_constant else None


def _pad4(shape: tuple[int, ...]) -> tuple[int, ...]:
    return (1,) * (4 - len(shape)) + tuple(shape)


def broadcast_reason(a: tuple[int, ...], b: tuple[int, ...]) -> str | None:
    """LiteRT's Core ML rule: the smaller operand is the same shape, per-channel, per-pixel or
    a scalar (NHWC: ``[B,H,W,C]``, ``[B,1,1,C]``, ``[B,H,W,1]``, ``[B,1,1,1]``)."""
    if a == b:
        return None
    big, small = (a, b) if int(np.prod(a)) >= int(np.prod(b)) else (b, a)
    if len(big) > 4 or len(small) > 4:
        return f"broadcast: rank above 4 ({list(a)}, {list(b)})"
    n, h, w, c = _pad4(big)
    sn, sh, sw, sc = _pad4(small)
    if sn in (n, 1) and ((sh, sw) == (1, 1) and sc in (c, 1) or sc == 1 and (sh, sw) == (h, w)):
        return None
    return (
        f"broadcast: shapes {list(a)} and {list(b)} are not among the ones Core ML broadcasts "
        "([B,H,W,C] with itself, [B,1,1,C], [B,H,W,1] or [B,1,1,1])"
    )


def _only_hw(paddings: np.ndarray) -> str | None:
    p = np.asarray(paddings).reshape(-1, 2)
    if p.shape[0] != 4:
        return f"paddings: expected 4 rows for a 4-D input, found {p.shape[0]}"
    if p[0].any() or p[3].any():
        return (
            f"paddings: only H and W may be padded, found batch {p[0].tolist()} and "
            f"channels {p[3].tolist()}"
        )
    if (p < 0).any():
        return f"paddings: negative paddings {p.tolist()}"
    return None


def check_node(node: Node, subgraph: Subgraph) -> str | None:
    """Constraints of LiteRT's Core ML delegate that capabilities cannot express."""
    tensors = subgraph.tensors
    shape = [tensors[i].shape if i >= 0 else None for i in node.inputs]
    first = 2 if node.op == "TRANSPOSE_CONV" else 0
    if tensors[node.inputs[first]].dtype != np.float32:
        return f"input {first} is {tensors[node.inputs[first]].dtype}, Core ML takes float32 only"
    check = _CHECKS.get(node.op)
    return check(node, subgraph, shape) if check else None


def _constant(sg: Subgraph, node: Node, positions: tuple[int, ...], what: str) -> str | None:
    for pos in positions:
        t = node.inputs[pos] if pos < len(node.inputs) else -1
        if t >= 0 and constant_value(sg, t) is None:
            return f"{what} (input {pos}) must be constant, found a tensor computed at run time"
    return None


def _four_d(shape: list[Any], pos: int = 0) -> str | None:
    if len(shape[pos]) != 4:
        return f"input {pos} must be 4-D, found rank {len(shape[pos])}"
    return None


def _check_binary(node: Node, sg: Subgraph, shape: list[Any]) -> str | None:
    if len(node.inputs) != 2:
        return f"expected 2 inputs, found {len(node.inputs)}"
    return broadcast_reason(shape[0], shape[1])


def _check_conv(node: Node, sg: Subgraph, shape: list[Any]) -> str | None:
    return _four_d(shape) or _constant(sg, node, (1, 2), "weights and bias")


def _check_transpose_conv(node: Node, sg: Subgraph, shape: list[Any]) -> str | None:
    reason = _four_d(shape, 2) or _constant(sg, node, (0, 1, 3), "output shape and weights")
    if reason:
        return reason
    out = [int(v) for v in sg.tensors[node.inputs[0]].constant_value().reshape(-1)]
    (_, h_in, w_in, _), (_, kh, kw, _) = shape[2], shape[1]
    o = node.options
    for size, k, s, name in ((h_in, kh, o.stride_h, "height"), (w_in, kw, o.stride_w, "width")):
        full = (size - 1) * s + k
        target = out[1] if name == "height" else out[2]
        if target > full:
            return f"output {name} {target} exceeds the full transposed result {full}"
    return None


def _check_fc(node: Node, sg: Subgraph, shape: list[Any]) -> str | None:
    reason = _constant(sg, node, (1, 2), "weights and bias")
    if reason:
        return reason
    if node.options.get("weights_format", "DEFAULT") not in ("DEFAULT", 0):
        return f"weights_format {node.options.get('weights_format')} (only DEFAULT)"
    k = shape[1][-1]
    if int(np.prod(shape[0])) != k:
        return f"batch 1 only: input {list(shape[0])} holds more than one row of {k}"
    return None


def _check_concat(node: Node, sg: Subgraph, shape: list[Any]) -> str | None:
    rank = len(shape[0])
    axis = node.options.axis
    if axis not in (-1, rank - 1):
        return f"axis {axis}: Core ML concatenates along the channel (last) axis only"
    return None


def _check_pad(node: Node, sg: Subgraph, shape: list[Any]) -> str | None:
    reason = _four_d(shape) or _constant(sg, node, (1,), "paddings")
    if reason:
        return reason
    if node.op == "PADV2":
        reason = _constant(sg, node, (2,), "the pad value")
        if reason:
            return reason
    if node.op == "MIRROR_PAD" and node.options.get("mode") != "REFLECT":
        return f"mode {node.options.get('mode')}: Core ML mirrors in REFLECT mode only"
    return _only_hw(sg.tensors[node.inputs[1]].constant_value())


def _check_mean(node: Node, sg: Subgraph, shape: list[Any]) -> str | None:
    return _constant(sg, node, (1,), "axes")


def _check_reshape(node: Node, sg: Subgraph, shape: list[Any]) -> str | None:
    out = sg.tensors[node.outputs[0]]
    if not out.shape or any(d <= 0 for d in out.shape):
        return f"output shape {list(out.shape)} is not a static shape"
    return None


def _check_resize(node: Node, sg: Subgraph, shape: list[Any]) -> str | None:
    reason = _four_d(shape) or _constant(sg, node, (1,), "size")
    if reason:
        return reason
    if node.options.get("align_corners") and node.options.get("half_pixel_centers"):
        return "align_corners and half_pixel_centers together"
    return None


_Check = Callable[[Node, Subgraph, list[Any]], "str | None"]
_CHECKS: dict[str, _Check] = {
    "ADD": _check_binary,
    "MUL": _check_binary,
    "AVERAGE_POOL_2D": lambda n, sg, s: _four_d(s),
    "MAX_POOL_2D": lambda n, sg, s: _four_d(s),
    "CONCATENATION": _check_concat,
    "CONV_2D": _check_conv,
    "DEPTHWISE_CONV_2D": _check_conv,
    "FULLY_CONNECTED": _check_fc,
    "MEAN": _check_mean,
    "MIRROR_PAD": _check_pad,
    "PAD": _check_pad,
    "PADV2": _check_pad,
    "RESHAPE": _check_reshape,
    "RESIZE_BILINEAR": _check_resize,
    "TRANSPOSE_CONV": _check_transpose_conv,
}
