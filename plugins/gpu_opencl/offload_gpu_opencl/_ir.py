"""What a partition lowers to, and the context every op's lowering writes into.

A lowered partition is a flat list of :class:`Launch` (kernel, NDRange, arguments) over
buffers named by :class:`Ref`: runtime tensors, or pre-transformed constants kept in
:attr:`Lowering.consts`. Every tensor is seen through a *float view*: quantized tensors hold
the real values they stand for (``scale * (q - zero_point)``), constants (folded ones too, see
_constants) are uploaded once. Pre-transformed arrays are produced through
:meth:`Lowering.const`, which takes them from the serialization cache when it has them, so a
warm start never repeats the work.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from offload import Node, Partition, Subgraph, Tensor
from offload_gpu_opencl._constants import foldable, folded_value
from offload_gpu_opencl._errors import ShapeCheckError

if TYPE_CHECKING:
    from offload_gpu_opencl._tiling import GemmChooser

__all__ = [
    "ACTIVATIONS",
    "BLOCKS",
    "FINITE",
    "HARD_SWISH",
    "FINITE_OPS",
    "INT_MAX",
    "LAUNCH_SHAPES",
    "LINEAR",
    "MAX_ELEMENTS",
    "QUANTIZED",
    "RELU6_SIXTH",
    "RELU_FINITE",
    "SLACK",
    "Epilogue",
    "GroupShape",
    "Launch",
    "LaunchShapes",
    "Lowering",
    "Ref",
    "Shape",
    "act",
    "clamped",
    "elements",
    "kernel_act",
    "pad4",
    "pad_last",
]

Shape = tuple[int, ...]
SLACK = 16  # elements past the end of every buffer, so 8-wide loads stay inside it
# The kernels compute indices in 32-bit int: every index they form must stay below 2**31.
INT_MAX = 2**31 - 1
MAX_ELEMENTS = INT_MAX - SLACK

# Fused activation codes, as the kernels' act1 / act8 (cl/prelude.cl) number them. Code 5
# (sigmoid) has no TFLite activation name: the schema has no SIGMOID, so nothing lowers to it.
ACTIVATIONS = {"NONE": 0, "RELU": 1, "RELU_N1_TO_1": 2, "RELU6": 3, "TANH": 4}
# NONE and RELU as the ops of FINITE_OPS apply them: clamped to the finite range as well.
FINITE, RELU_FINITE = 6, 7
# A HARD_SWISH node run in the epilogue of the convolution before it (_fusion), as an
# activation code of act1 / act8 (prelude.cl).
HARD_SWISH = 8
# A RELU6 convolution followed by a MUL by the constant 1/6 (MobileNetV3's hard sigmoid), the
# MUL run in the epilogue (_fusion).
RELU6_SIXTH = 9
# The ops whose float kernels LiteRT clamps to [lowest, max] whatever the fused activation (its
# ActivationFunctionWithMinMax over the activation's range, NONE's being the finite range), as
# the CPU reference does (float_clamp): an overflow or an infinite input gives +-FLT_MAX, NaN
# passes through. The convolutions, and a hybrid FULLY_CONNECTED, apply the activation alone.
FINITE_OPS = frozenset({"ADD", "SUB", "MUL", "FULLY_CONNECTED", "AVERAGE_POOL_2D", "MAX_POOL_2D"})
QUANTIZED = {np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.int16)}

# Work-group shapes. PoCL compiles a work-group function per (kernel, local size) at the first
# enqueue, so the CPU family gives each kernel family one fixed shape (measured: compiles fall
# from 44 to 8 per model; the group size itself hardly matters there, ~2 ns per group). A GPU
# compiles once per kernel whatever the launch, and wants other shapes (see LAUNCH_SHAPES).
# Dimension 0 of the blocked kernels (channel blocks) and the last dimension of row kernels
# (image rows) are exact; the others are rounded up to the group size and guarded by the kernels.
LINEAR = (64,)  # 1-D kernels over elements (or 8-element vectors), in either family
BLOCKS = (1, 16)  # matmul / conv2d (CPU family only): (channel blocks, pixel blocks)


@dataclass(frozen=True)
class GroupShape:
    """A work-group of ``items`` work-items over a launch's first two dimensions: dimension 0
    takes the power of two that just covers the launch's count there, kept within
    [``least``, ``most``]; dimension 1 takes the rest of the group."""

    items: int
    least: int
    most: int

    def split(self, count: int) -> tuple[int, int]:
        first = 1 << (max(int(count), 1) - 1).bit_length()
        first = min(self.most, max(self.least, first))
        return first, self.items // first


@dataclass(frozen=True)
class LaunchShapes:
    """One kernel family's groups for the kernels outside the GEMMs (those tile their own).

    ``rows``: dw3x3 / dwconv / pool / resize_bilinear over (channel blocks, x, N*OH), the last
    dimension exact (a group of 1 there). ``lanes``: binary8 / lstm_gates over (8-element
    blocks of a row, rows)."""

    rows: GroupShape
    lanes: GroupShape

    def rows_local(self, channel_blocks: int) -> tuple[int, int, int]:
        return (*self.rows.split(channel_blocks), 1)

    def lanes_local(self, blocks: int) -> tuple[int, int]:
        return self.lanes.split(blocks)


# Per kernel family (_tiling.FAMILIES, resolved). CPU: today's fixed shapes, (1, 16, 1) and
# (16, 1), one work-group function per kernel on PoCL. GPU: groups of 64, a multiple of the
# 32-item warp (and of AMD's 64-item wavefront), small enough that a small image still spreads
# over every compute unit; neighbouring items take neighbouring 8-channel blocks, so a warp
# reads whole pixels (consecutive addresses) rather than pixels 4*S*C floats apart, and
# dimension 0 is only as wide as the channel blocks need so few items idle on narrow tensors.
LAUNCH_SHAPES = {
    "cpu": LaunchShapes(rows=GroupShape(16, 1, 1), lanes=GroupShape(16, 16, 16)),
    "gpu": LaunchShapes(rows=GroupShape(64, 1, 32), lanes=GroupShape(64, 1, 64)),
}


@dataclass(frozen=True)
class Ref:
    """A buffer argument: a runtime tensor (``kind == "t"``) or a named constant (``"c"``)."""

    kind: str
    key: int | str


@dataclass
class Launch:
    """One kernel enqueue: function name, NDRange, arguments in signature order."""

    kernel: str
    global_size: tuple[int, ...]
    local_size: tuple[int, ...]
    args: list[Ref | np.int32 | np.float32]
    node: int

    @property
    def buffers(self) -> list[Ref]:
        """Buffer arguments: inputs first, the written buffer last."""
        return [a for a in self.args if isinstance(a, Ref)]


@dataclass
class Epilogue:
    """What a convolution's launch applies after accumulating: its own activation, then the
    nodes fused into it (a residual ADD, RELU-type ops, a PRELU). ``out`` is the tensor the
    launch writes: the output of the last fused node."""

    out: int
    act: int = 0
    residual: int = -1  # tensor added by a fused ADD, -1 for none
    channels: int = 0  # residual channels; fewer than the output's when a channel PAD was absorbed
    act2: int = 0  # the ADD's activation (or a RELU-type op after it), as kernel_act gives it
    alpha: int = -1  # constant PRELU slopes, -1 for none
    # GPU family: the MAX_POOL_2D whose output the residual is, -1 for none. ``residual`` is
    # then the pool's input, and the tiled kernels take each window's maximum themselves.
    pool: int = -1


def _grid(counts: tuple[int, ...], local: tuple[int, ...]) -> tuple[int, ...]:
    """Global size covering ``counts`` items per dimension, rounded up to ``local``."""
    return tuple(-(-max(int(c), 1) // size) * size for c, size in zip(counts, local))


@dataclass
class Lowering:
    """A partition being lowered (see _lower.lower): its launches, constants and aliases."""

    subgraph: Subgraph
    partition: Partition
    cached: dict[str, np.ndarray] = field(default_factory=dict)
    launches: list[Launch] = field(default_factory=list)
    consts: dict[str, np.ndarray] = field(default_factory=dict)
    alias: dict[int, int] = field(default_factory=dict)
    misses: int = 0
    # Fusion plan (made before lowering, see _fusion): nodes that emit nothing, the epilogue
    # of each convolution that absorbed them, spatial PADs folded into convolutions.
    skip: set[int] = field(default_factory=set)
    epilogues: dict[int, Epilogue] = field(default_factory=dict)
    pad_folds: dict[int, tuple[int, int, int, int, int]] = field(default_factory=dict)
    params: set[str] = field(default_factory=set)
    # Storages that a launch overwrites although they belong to a node input (the previous
    # activation and state of a BASIC LSTM): a partition input among them is read back.
    writebacks: set[int] = field(default_factory=set)
    # The GPU kernel family's tile choice for CONV_2D / FULLY_CONNECTED (_tiling), None for
    # the CPU family's register-blocked kernels.
    gemm: GemmChooser | None = None
    # The work-group shapes of every other kernel, for the same family (LAUNCH_SHAPES).
    shapes: LaunchShapes = LAUNCH_SHAPES["cpu"]
    # Float32 work buffers by name (elements): split-K partial sums, written and read by
    # launches of this partition only. Referenced as constants (``Ref("c", name)``) but made
    # by the kernel at setup, never uploaded or cached.
    scratch: dict[str, int] = field(default_factory=dict)
    # Tensors written straight into a CONCATENATION's output (GPU family, see _fusion): tensor
    # -> (the concatenation's output, its channels, this input's channel offset).
    placed: dict[int, tuple[int, int, int]] = field(default_factory=dict)
    # Nodes lowered early (see _fusion): convolution -> the residual's producer, lowered just
    # before it so that its output is there for the convolution's fused ADD.
    hoisted: dict[int, int] = field(default_factory=dict)
    # GPU family with fuse_depthwise: 1x1 CONV_2D -> the DEPTHWISE_CONV_2D whose output is its
    # input, computed inside the product's A loader (tdw_*) with this activation code.
    fuse_depthwise: bool = False
    depthwise_into: dict[int, tuple[int, int]] = field(default_factory=dict)
    # GPU family: 1x1 CONV_2D -> (x, gate, activation code) of the MUL x * gate whose output
    # is its input, gate holding one value per image and channel (a squeeze-excite block):
    # computed inside the product's A loader (tgemm's gate).
    fuse_gates: bool = False
    gated: dict[int, tuple[int, int, int]] = field(default_factory=dict)
    # GPU family with fuse_gates: the second 1x1 CONV_2D of a squeeze-excite gate -> (the
    # MEAN, the first 1x1 CONV_2D) before it: the three run as one se_gate launch.
    squeezes: dict[int, tuple[int, int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.producers = self.subgraph.producers()

    @property
    def gpu_family(self) -> bool:
        """Lowering for the GPU kernel family (ops with a kernel of their own there ask)."""
        return self.shapes is LAUNCH_SHAPES["gpu"]

    # -- tensors and constants ----------------------------------------------------------------

    def tensor(self, t: int) -> Tensor:
        return self.subgraph.tensors[t]

    def is_folded(self, t: int) -> bool:
        return foldable(self.subgraph, t)

    def value(self, t: int) -> np.ndarray:
        return folded_value(self.subgraph, t)

    def const(self, name: str, make: Callable[[], np.ndarray], param: bool = False) -> Ref:
        """A pre-transformed constant: from the cache if present, else made now (float32).

        ``param``: a convolution parameter (weights, bias, PRELU slopes; kernels read it as
        ``param_t``), which may be stored in another precision than tensors (_source)."""
        if param:
            self.params.add(name)
        if name not in self.consts:
            arr = self.cached.get(name)
            if arr is None:
                self.misses += 1
                arr = np.ascontiguousarray(make(), dtype=np.float32)
            self.consts[name] = arr
        return Ref("c", name)

    def zeros(self, count: int) -> Ref:
        """A constant of at least ``count`` zeros (rounded up to limit distinct sizes)."""
        size = max(64, 1 << (max(count, 1) - 1).bit_length())
        # A parameter: in whichever precision, zero bits are zeros of both types, and a float32
        # buffer holds at least as many halves.
        return self.const(f"zeros{size}", lambda: np.zeros(size, np.float32), param=True)

    def work(self, name: str, count: int) -> Ref:
        """A float32 work buffer of at least ``count`` elements, shared by every launch that
        asks for ``name`` (launches run in order, so one use ends before the next begins).
        Zeroed once at setup: a launch that counts in it (split-K arrivals) leaves it zero."""
        self.scratch[name] = max(self.scratch.get(name, 0), int(count))
        return Ref("c", name)

    def root(self, t: int) -> int:
        while t in self.alias:
            t = self.alias[t]
        return t

    def ref(self, t: int) -> Ref:
        """A buffer for tensor ``t`` as a kernel input (folded tensors are uploaded once)."""
        if self.is_folded(t):
            return self.const(f"t{t}", lambda: self.value(t))
        return Ref("t", self.root(t))

    def out(self, node: Node, pos: int = 0) -> Ref:
        return Ref("t", node.outputs[pos])

    def launch(
        self,
        node: Node,
        kernel: str,
        counts: tuple[int, ...],
        *args: object,
        local: tuple[int, ...] = LINEAR,
    ) -> None:
        """Enqueue ``kernel`` over ``counts`` work-items per dimension, in groups of ``local``."""
        values: list[Ref | np.int32 | np.float32] = []
        for a in args:
            if isinstance(a, Ref):
                values.append(a)
            elif isinstance(a, float):
                values.append(np.float32(a))
            else:
                value = int(a)  # type: ignore[call-overload]
                if not -INT_MAX - 1 <= value <= INT_MAX:
                    raise ShapeCheckError(
                        f"kernel {kernel} would get argument {value}, past the 32-bit int its "
                        "indices are computed in"
                    )
                values.append(np.int32(value))
        self.launches.append(Launch(kernel, _grid(counts, local), local, values, node.index))

    def held(self, ref: Ref) -> int:
        """Elements of the buffer behind ``ref`` before its slack: a constant's array, or
        the declared shape of the tensor (the storage the kernel allocates for it)."""
        if ref.kind == "c":
            name = str(ref.key)
            return self.scratch[name] if name in self.scratch else int(self.consts[name].size)
        return elements(self.tensor(int(ref.key)).shape)

    def finish(self, node: Node) -> None:
        """After a node that computes new values: fake-quantize a quantized output so it holds
        representable values. (Ops that only move values, such as a max pool or a PAD, do not
        call it: their outputs are already on the grid.)"""
        t = node.outputs[0]
        tensor = self.tensor(t)
        q = tensor.quantization
        if tensor.dtype not in QUANTIZED or q is None or q.per_channel:
            return
        info = np.iinfo(tensor.dtype)
        zero = int(q.zero_point[0]) if q.zero_point.size else 0
        ref = Ref("t", self.root(t))
        size = elements(tensor.shape)
        self.launch(
            node,
            "fake_quant",
            (size,),
            ref,
            ref,
            size,
            float(q.scale[0]),
            float(zero),
            float(info.min),
            float(info.max),
        )

    # -- convolution helpers ------------------------------------------------------------------

    def conv_input(self, t: int) -> tuple[int, tuple[int, ...], int, int, int, int]:
        """(tensor to read, its NHWC shape, pad top, pad left, padded H, padded W) of a
        convolution input; a folded spatial PAD is read through (see _fusion)."""
        if t in self.pad_folds:
            src, top, left, hp, wp = self.pad_folds[t]
            return src, self.tensor(src).shape, top, left, hp, wp
        shape = self.tensor(t).shape
        return t, shape, 0, 0, int(shape[1]), int(shape[2])

    def epilogue(self, node: Node) -> tuple[list[Ref], list[int]]:
        """Buffer arguments (residual, alpha, output) and int arguments (act, RC, act2, prelu)
        of the node's epilogue; absent parts point at a zero constant and are switched off."""
        ep = self.epilogues.get(node.index) or Epilogue(
            out=node.outputs[0], act=kernel_act(node, self.subgraph)
        )
        zero = self.zeros(8)
        res = self.ref(ep.residual) if ep.residual >= 0 else zero
        alpha = zero
        if ep.alpha >= 0:
            a = ep.alpha
            alpha = self.const(
                f"a{node.index}", lambda: pad_last(self.value(a).reshape(-1)), param=True
            )
        return [res, alpha, Ref("t", ep.out)], [ep.act, ep.channels, ep.act2, int(ep.alpha >= 0)]

    def residual_pool(self, node: Node) -> list[int]:
        """The tiled kernels' pooled-residual arguments (RP, ROW) of the node's epilogue:
        the pool's window (= stride, 2) and the output's width; zeros where the residual, if
        any, is read as it is."""
        ep = self.epilogues.get(node.index)
        if ep is None or ep.pool < 0:
            return [0, 0]
        pool = self.subgraph.nodes[ep.pool]
        return [int(pool.options.filter_height), int(self.tensor(pool.outputs[0]).shape[2])]


def elements(shape: Iterable[int]) -> int:
    """Element count as a Python int: never a fixed-width product that wraps."""
    return math.prod(int(d) for d in shape)


def pad4(shape: tuple[int, ...]) -> tuple[int, int, int, int]:
    """A shape of rank <= 4 as 4-D, ones in front."""
    s = (1,) * (4 - len(shape)) + tuple(int(d) for d in shape)
    return s  # type: ignore[return-value]


def act(node: Node) -> int:
    """The node's fused activation as a kernel code (:data:`ACTIVATIONS`)."""
    return ACTIVATIONS[node.options.get("fused_activation_function") or "NONE"]


def clamped(code: int) -> int:
    """Activation ``code`` with the clamp to the finite range added: NONE and RELU change,
    RELU6, RELU_N1_TO_1 and TANH already land inside that range."""
    return {ACTIVATIONS["NONE"]: FINITE, ACTIVATIONS["RELU"]: RELU_FINITE}.get(code, code)


def kernel_act(node: Node, subgraph: Subgraph) -> int:
    """The activation code the kernel applies for ``node``: its fused activation, clamped to
    the finite range for the ops of :data:`FINITE_OPS` (in the activation's own clamp, so the
    common path pays no extra pass)."""
    code = act(node)
    if node.op not in FINITE_OPS:
        return code
    if node.op == "FULLY_CONNECTED" and subgraph.tensors[node.inputs[1]].dtype.kind != "f":
        return code  # hybrid: LiteRT applies the activation to the float output, no clamp
    return clamped(code)


def pad_last(arr: np.ndarray, multiple: int = 8) -> np.ndarray:
    """Zero-pad the last axis to a multiple of ``multiple`` (channel blocks of 8)."""
    extra = -arr.shape[-1] % multiple
    if extra:
        arr = np.pad(arr, [(0, 0)] * (arr.ndim - 1) + [(0, extra)])
    return arr
