"""The record each op module registers, and checks shared by op families."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from offload import DTypeName, Node, OpCapability, Subgraph
from offload.quant import scale_zero_point
from offload_gpu_opencl._constants import foldable
from offload_gpu_opencl._ir import QUANTIZED, Lowering, Ref, pad_last
from offload_gpu_opencl._shapes import Limits, rule_reason

__all__ = [
    "FLOAT_DTYPES",
    "FUSED_ACTIVATIONS",
    "QUANT_DTYPES",
    "OpSpec",
    "bias_row",
    "constant_weights_reason",
    "raw_codes_reason",
]

# LiteRT's GPU delegate: these fused activations, rank <= 4, float tensors (8-bit ones only
# with quantization on). LiteRT's list also has its C-level SIGMOID, which the flatbuffer
# schema cannot hold, so no node ever carries it: not declared.
FUSED_ACTIVATIONS = ("NONE", "RELU", "RELU_N1_TO_1", "RELU6", "TANH")
FLOAT_DTYPES: tuple[DTypeName, ...] = ("float32", "float16")
QUANT_DTYPES: tuple[DTypeName, ...] = ("float32", "float16", "int8", "uint8")
MAX_RANK = 4

Lower = Callable[[Lowering, Node], None]
Check = Callable[[Node, Subgraph], str | None]


@dataclass(frozen=True)
class OpSpec:
    """What gpu_opencl knows about one op: its declaration, its support check, its kernels'
    limits and its lowering.

    Output shapes are the core's (:func:`offload.ops.output_shapes`). ``limits``: what the
    kernels cannot take beyond the core's rule, raising ShapeCheckError (``None``: nothing).
    ``lower``: appends the node's launches to the lowering. ``check``: the whole support check
    beyond the declaration (``None``: the core's rule and ``limits`` alone). Declaration:
    ``versions`` without quantization, ``quantized_versions`` with it (``None``: the same);
    ``dtypes`` (``None``: float, plus int8/uint8 with quantization); ``quantized_only``:
    declared only with quantization on; the other fields as in :class:`offload.OpCapability`.
    """

    op: str
    lower: Lower
    limits: Limits | None = None
    versions: tuple[int, int] = (1, 1)
    quantized_versions: tuple[int, int] | None = None
    dtypes: tuple[DTypeName, ...] | None = None
    fused_activations: tuple[str, ...] | None = None
    constant_inputs: tuple[int, ...] = ()
    max_inputs: int | None = None
    options: Mapping[str, object] = field(default_factory=dict)
    constraints: tuple[str, ...] = ()
    quantized_only: bool = False
    check: Check | None = None

    def capability(self, enable_quant: bool) -> OpCapability | None:
        """The declaration with quantization on or off; None when not declared then."""
        if self.quantized_only and not enable_quant:
            return None
        versions = self.versions
        if enable_quant and self.quantized_versions is not None:
            versions = self.quantized_versions
        return OpCapability(
            op=self.op,
            versions=versions,
            dtypes=self.dtypes or (QUANT_DTYPES if enable_quant else FLOAT_DTYPES),
            max_rank=MAX_RANK,
            fused_activations=self.fused_activations,
            constant_inputs=self.constant_inputs,
            max_inputs=self.max_inputs,
            options=dict(self.options),
            constraints=self.constraints,
        )

    def reason(self, node: Node, subgraph: Subgraph) -> str | None:
        """Why gpu_opencl does not take this node (its declaration already holds), or None."""
        if self.check is not None:
            return self.check(node, subgraph)
        return rule_reason(node, subgraph, self.limits)


def constant_weights_reason(
    node: Node, subgraph: Subgraph, positions: tuple[int, ...]
) -> str | None:
    """Convolution-type ops read their weights and bias as pre-transformed constants: each
    present input at ``positions`` (weights first, then bias) must fold, and not be INT4."""
    for pos in positions:
        if pos < len(node.inputs) and node.inputs[pos] >= 0:
            what = "weights" if pos == 1 else "bias"
            if subgraph.tensors[node.inputs[pos]].type_name == "INT4":
                return f"INT4 {what} are not supported"
            if not foldable(subgraph, node.inputs[pos]):
                return f"{what} (input {pos}) must be constant, found a runtime tensor"
    return None


def bias_row(lw: Lowering, node: Node, bias: int, channels: int) -> Ref:
    """The node's optional constant bias (input index ``bias``, -1 when absent: zeros) as
    the (1, channels) parameter row the conv and matmul epilogues read."""

    def row() -> np.ndarray:
        if bias < 0:
            return pad_last(np.zeros((1, channels), np.float32))
        return pad_last(lw.value(bias).reshape(1, channels))

    return lw.const(f"b{node.index}", row, param=True)


def raw_codes_reason(node: Node, sg: Subgraph, limits: Limits | None = None) -> str | None:
    """For ops that copy quantized values without rescaling (MAXIMUM, MINIMUM, DEPTH_TO_SPACE):
    LiteRT (and the CPU reference) move the raw codes to the output. The float view moves real
    values, which gives the same codes only when the inputs and the output share one per-tensor
    scale and zero point (as converters write them); any other node stays on the CPU reference.
    The core's rule and ``limits`` first."""
    reason = rule_reason(node, sg, limits)
    tensors = [sg.tensors[t] for t in (*node.inputs, *node.outputs) if t >= 0]
    if reason is not None or not any(t.dtype in QUANTIZED for t in tensors):
        return reason
    if any(t.quantization is None or t.quantization.scale.size != 1 for t in tensors):
        return f"quantized {node.op} needs per-tensor quantization on its inputs and output"
    params = {scale_zero_point(t) for t in tensors}
    if len(params) > 1:
        found = ", ".join(f"{float(s):g}/{z}" for s, z in (scale_zero_point(t) for t in tensors))
        return (
            f"quantized {node.op} copies raw codes without rescaling (LiteRT), which the float "
            f"view reproduces only when inputs and output share one scale and zero point; "
            f"found {found} (scale/zero point of each input, then the output)"
        )
    return None
