"""What the Core ML delegate takes: LiteRT's Core ML op list, as data plus per-node checks.

The declarative part (op names, versions, dtypes, rank, fused activations) is checked by
offload's core. The rest, which data cannot express, is :func:`check_node`: LiteRT's
``IsNodeSupportedByDelegate`` constraints (constant weights, the four broadcast shapes,
channel-only concatenation, H/W-only padding, single-batch FULLY_CONNECTED), each failing with
a reason a person can act on.

Weights may be constants or *foldable* tensors: float16 constants behind DEQUANTIZE (the
float16 model type), possibly behind DENSIFY (sparse float16 weights). The converter folds
those at conversion time, so a folded tensor never crosses the partition boundary at run time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from offload import Capabilities, ModelTypeSupport, Node, OpCapability, Subgraph

__all__ = ["CAPABILITIES", "FUSED_ACTIVATIONS", "Folder", "check_node"]

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


_ACT = {"fused_activations": FUSED_ACTIVATIONS}
_BROADCAST = "broadcast only of [B,H,W,C] with itself, [B,1,1,C], [B,H,W,1] or [B,1,1,1]"
_POOL = {"fused_activations": ("NONE",), "constraints": ("4-D input",)}

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
            "DEQUANTIZE",
            (1, 3),
            dtypes=("float16", "float32"),
            constraints=("float16 constant input only (folded into the program's weights)",),
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
            support="yes", reason="float16 weights are folded into the program's constants"
        ),
        "dynamic_range": _QUANTIZED,
        "int8": _QUANTIZED,
        "qat": _QUANTIZED,
    },
    platforms=("darwin",),
    precisions=("float32", "float16"),
    expected_speedup=4.0,
    partition_overhead=20.0,
)


class Folder:
    """Finds and computes *foldable* tensors of one subgraph: values known before any invoke.

    A tensor is foldable when it is a dense constant, or the output of DEQUANTIZE of a float16
    foldable tensor, or of DENSIFY of a sparse constant.
    """

    def __init__(self, subgraph: Subgraph) -> None:
        self.subgraph = subgraph
        self.producers = subgraph.producers()
        self._known: dict[int, bool] = {}
        self._values: dict[int, np.ndarray] = {}

    def foldable(self, t: int) -> bool:
        if t < 0:
            return False
        if t not in self._known:
            self._known[t] = self._foldable(t)
        return self._known[t]

    def _foldable(self, t: int) -> bool:
        tensor = self.subgraph.tensors[t]
        if tensor.is_variable:
            return False
        if tensor.is_constant:
            return tensor.sparsity is None
        p = self.producers.get(t)
        if p is None:
            return False
        node = self.subgraph.nodes[p]
        if node.op == "DENSIFY":
            source = self.subgraph.tensors[node.inputs[0]]
            return source.is_constant and source.sparsity is not None
        if node.op == "DEQUANTIZE":
            source = self.subgraph.tensors[node.inputs[0]]
            return source.dtype == np.float16 and self.foldable(node.inputs[0])
        return False

    def value(self, t: int) -> np.ndarray:
        """The folded value of ``t`` (float32 for dequantized weights)."""
        if t in self._values:
            return self._values[t]
        if not self.foldable(t):
            raise ValueError(f"tensor {t} is computed at run time and cannot be folded")
        tensor = self.subgraph.tensors[t]
        if tensor.is_constant:
            value = np.asarray(tensor.constant_value())
        else:
            node = self.subgraph.nodes[self.producers[t]]
            if node.op == "DEQUANTIZE":
                value = self.value(node.inputs[0]).astype(np.float32)
            else:  # DENSIFY: the CPU reference expands the sparse storage
                from offload.ops import kernel_class

                value = np.asarray(kernel_class(node)(node, self.subgraph).run(None))
        self._values[t] = value
        return value


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


def check_node(node: Node, subgraph: Subgraph, folder: Folder) -> str | None:
    """Constraints of LiteRT's Core ML delegate that capabilities cannot express."""
    tensors = subgraph.tensors
    shape = [tensors[i].shape if i >= 0 else None for i in node.inputs]
    first = 2 if node.op == "TRANSPOSE_CONV" else 0
    if node.op != "DEQUANTIZE" and tensors[node.inputs[first]].dtype != np.float32:
        return f"input {first} is {tensors[node.inputs[first]].dtype}, Core ML takes float32 only"
    check = _CHECKS.get(node.op)
    return check(node, subgraph, folder, shape) if check else None


def _constant(folder: Folder, node: Node, positions: tuple[int, ...], what: str) -> str | None:
    for pos in positions:
        t = node.inputs[pos] if pos < len(node.inputs) else -1
        if t >= 0 and not folder.foldable(t):
            return f"{what} (input {pos}) must be constant, found a tensor computed at run time"
    return None


def _four_d(shape: list[Any], pos: int = 0) -> str | None:
    if len(shape[pos]) != 4:
        return f"input {pos} must be 4-D, found rank {len(shape[pos])}"
    return None


def _check_binary(node: Node, sg: Subgraph, folder: Folder, shape: list[Any]) -> str | None:
    if len(node.inputs) != 2:
        return f"expected 2 inputs, found {len(node.inputs)}"
    return broadcast_reason(shape[0], shape[1])


def _check_conv(node: Node, sg: Subgraph, folder: Folder, shape: list[Any]) -> str | None:
    return _four_d(shape) or _constant(folder, node, (1, 2), "weights and bias")


def _check_transpose_conv(node: Node, sg: Subgraph, folder: Folder, shape: list[Any]) -> str | None:
    reason = _four_d(shape, 2) or _constant(folder, node, (0, 1, 3), "output shape and weights")
    if reason:
        return reason
    out = [int(v) for v in folder.value(node.inputs[0]).reshape(-1)]
    (_, h_in, w_in, _), (_, kh, kw, _) = shape[2], shape[1]
    o = node.options
    for size, k, s, name in ((h_in, kh, o.stride_h, "height"), (w_in, kw, o.stride_w, "width")):
        full = (size - 1) * s + k
        target = out[1] if name == "height" else out[2]
        if target > full:
            return f"output {name} {target} exceeds the full transposed result {full}"
    return None


def _check_fc(node: Node, sg: Subgraph, folder: Folder, shape: list[Any]) -> str | None:
    reason = _constant(folder, node, (1, 2), "weights and bias")
    if reason:
        return reason
    if node.options.get("weights_format", "DEFAULT") not in ("DEFAULT", 0):
        return f"weights_format {node.options.get('weights_format')} (only DEFAULT)"
    k = shape[1][-1]
    if int(np.prod(shape[0])) != k:
        return f"batch 1 only: input {list(shape[0])} holds more than one row of {k}"
    return None


def _check_concat(node: Node, sg: Subgraph, folder: Folder, shape: list[Any]) -> str | None:
    rank = len(shape[0])
    axis = node.options.axis
    if axis not in (-1, rank - 1):
        return f"axis {axis}: Core ML concatenates along the channel (last) axis only"
    return None


def _check_pad(node: Node, sg: Subgraph, folder: Folder, shape: list[Any]) -> str | None:
    reason = _four_d(shape) or _constant(folder, node, (1,), "paddings")
    if reason:
        return reason
    if node.op == "PADV2":
        reason = _constant(folder, node, (2,), "the pad value")
        if reason:
            return reason
    if node.op == "MIRROR_PAD" and node.options.get("mode") != "REFLECT":
        return f"mode {node.options.get('mode')}: Core ML mirrors in REFLECT mode only"
    return _only_hw(folder.value(node.inputs[1]))


def _check_mean(node: Node, sg: Subgraph, folder: Folder, shape: list[Any]) -> str | None:
    return _constant(folder, node, (1,), "axes")


def _check_reshape(node: Node, sg: Subgraph, folder: Folder, shape: list[Any]) -> str | None:
    out = sg.tensors[node.outputs[0]]
    if not out.shape or any(d <= 0 for d in out.shape):
        return f"output shape {list(out.shape)} is not a static shape"
    return None


def _check_resize(node: Node, sg: Subgraph, folder: Folder, shape: list[Any]) -> str | None:
    reason = _four_d(shape) or _constant(folder, node, (1,), "size")
    if reason:
        return reason
    if node.options.get("align_corners") and node.options.get("half_pixel_centers"):
        return "align_corners and half_pixel_centers together"
    return None


def _check_dequantize(node: Node, sg: Subgraph, folder: Folder, shape: list[Any]) -> str | None:
    source = sg.tensors[node.inputs[0]]
    if source.dtype != np.float16:
        return f"input is {source.dtype}: only float16 weights are dequantized (folded)"
    if not folder.foldable(node.inputs[0]):
        return "input is computed at run time: only constant float16 weights are folded"
    return None


_Check = Callable[[Node, Subgraph, Folder, list[Any]], "str | None"]
_CHECKS: dict[str, _Check] = {
    "ADD": _check_binary,
    "MUL": _check_binary,
    "AVERAGE_POOL_2D": lambda n, sg, f, s: _four_d(s),
    "MAX_POOL_2D": lambda n, sg, f, s: _four_d(s),
    "CONCATENATION": _check_concat,
    "CONV_2D": _check_conv,
    "DEPTHWISE_CONV_2D": _check_conv,
    "DEQUANTIZE": _check_dequantize,
    "FULLY_CONNECTED": _check_fc,
    "MEAN": _check_mean,
    "MIRROR_PAD": _check_pad,
    "PAD": _check_pad,
    "PADV2": _check_pad,
    "RESHAPE": _check_reshape,
    "RESIZE_BILINEAR": _check_resize,
    "TRANSPOSE_CONV": _check_transpose_conv,
}
