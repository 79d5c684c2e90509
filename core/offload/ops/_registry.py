"""Explicit op-name -> kernel-class registry of the CPU reference.

Each op lives in ``offload/ops/<op_name_lower>.py`` and defines one :class:`OpKernel` subclass
decorated with :func:`register`. The list of op modules is ``OP_MODULES`` below; an op is
imported the first time a model needs it, so loading offload stays cheap.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from offload.errors import TensorShapeError, UnsupportedOpError
from offload.ops._base import Shape, ShapeContext

if TYPE_CHECKING:
    from offload._graph import Node, Subgraph
    from offload.ops._base import OpKernel

__all__ = [
    "register",
    "kernel_class",
    "output_shapes",
    "supported_ops",
    "OP_MODULES",
    "UNSUPPORTED_CONTROL_FLOW",
]

# What a shape rule raises on inputs that cannot be valid for its op (see OpKernel.output_shapes).
_INVALID = (ValueError, IndexError, KeyError, TypeError, ZeroDivisionError, OverflowError)

# The op modules of the CPU reference, one per TFLite builtin op (module name = op name, lower):
# every module of this package without a leading underscore, which
# tests/ops/test_op_registry.py holds this list to (a module left out has no kernel, silently).
OP_MODULES: tuple[str, ...] = (
    "abs",
    "add",
    "add_n",
    "arg_max",
    "arg_min",
    "average_pool_2d",
    "batch_matmul",
    "batch_to_space_nd",
    "broadcast_to",
    "cast",
    "ceil",
    "complex_abs",
    "concatenation",
    "conv_2d",
    "cos",
    "cumsum",
    "densify",
    "depth_to_space",
    "depthwise_conv_2d",
    "dequantize",
    "div",
    "elu",
    "embedding_lookup",
    "equal",
    "exp",
    "expand_dims",
    "fill",
    "floor",
    "floor_div",
    "floor_mod",
    "fully_connected",
    "gather",
    "gather_nd",
    "gelu",
    "greater",
    "greater_equal",
    "hard_swish",
    "l2_normalization",
    "l2_pool_2d",
    "leaky_relu",
    "less",
    "less_equal",
    "local_response_normalization",
    "log",
    "log_softmax",
    "logical_and",
    "logical_not",
    "logical_or",
    "logistic",
    "lstm",
    "max_pool_2d",
    "maximum",
    "mean",
    "minimum",
    "mirror_pad",
    "mul",
    "neg",
    "not_equal",
    "one_hot",
    "ones_like",
    "pack",
    "pad",
    "padv2",
    "pow",
    "prelu",
    "quantize",
    "range",
    "rank",
    "reduce_all",
    "reduce_any",
    "reduce_max",
    "reduce_min",
    "reduce_prod",
    "relu",
    "relu6",
    "relu_0_to_1",
    "relu_n1_to_1",
    "reshape",
    "resize_bilinear",
    "resize_nearest_neighbor",
    "reverse_v2",
    "rfft2d",
    "rnn",
    "round",
    "rsqrt",
    "select",
    "select_v2",
    "shape",
    "sin",
    "slice",
    "softmax",
    "space_to_batch_nd",
    "space_to_depth",
    "split",
    "split_v",
    "sqrt",
    "square",
    "squared_difference",
    "squeeze",
    "strided_slice",
    "sub",
    "sum",
    "tanh",
    "tile",
    "topk_v2",
    "transpose",
    "transpose_conv",
    "unidirectional_sequence_lstm",
    "unidirectional_sequence_rnn",
    "unpack",
    "where",
    "zeros_like",
)

# Ops we know and deliberately do not run yet; reported by name rather than as "unknown".
UNSUPPORTED_CONTROL_FLOW = ("WHILE", "IF", "CALL_ONCE", "CALL")

_KERNELS: dict[str, type[OpKernel]] = {}


def register(cls: type[OpKernel]) -> type[OpKernel]:
    """Class decorator: make ``cls`` the kernel for ``cls.op``."""
    if not cls.op:
        raise TypeError(f"{cls.__name__} must set the class attribute `op`")
    if cls.op in _KERNELS and _KERNELS[cls.op] is not cls:
        raise TypeError(f"two kernels registered for {cls.op}: {_KERNELS[cls.op]} and {cls}")
    _KERNELS[cls.op] = cls
    return cls


def _import(op: str) -> None:
    if op in _KERNELS:
        return
    module = op.lower()
    if module in OP_MODULES or not OP_MODULES:
        try:
            importlib.import_module(f"offload.ops.{module}")
        except ModuleNotFoundError as exc:
            if exc.name != f"offload.ops.{module}":
                raise


def supported_ops() -> dict[str, int]:
    """Every op the CPU reference runs, with the highest version it implements."""
    for module in OP_MODULES:
        _import(module.upper())
    return {name: cls.max_version for name, cls in sorted(_KERNELS.items())}


def kernel_class(node: Node) -> type[OpKernel]:
    """The kernel class for ``node``, or :class:`UnsupportedOpError` saying why there is none."""
    if node.is_custom:
        raise UnsupportedOpError(
            f"{node.describe()}: custom op {node.custom_code!r} has no kernel in offload's CPU "
            "reference; register one or run the node through a delegate that implements it"
        )
    if node.op in UNSUPPORTED_CONTROL_FLOW:
        raise UnsupportedOpError(
            f"{node.describe()}: control-flow op {node.op} is not supported by offload yet"
        )
    _import(node.op)
    cls = _KERNELS.get(node.op)
    if cls is None:
        raise UnsupportedOpError(
            f"{node.describe()}: op {node.op} has no kernel in offload's CPU reference; "
            f"supported ops are {', '.join(sorted(_KERNELS)) or '(none loaded)'}"
        )
    if node.version > cls.max_version:
        raise UnsupportedOpError(
            f"{node.describe()}: expected {node.op} version <= {cls.max_version}, "
            f"found version {node.version}"
        )
    return cls


def output_shapes(
    node: Node, subgraph: Subgraph, input_shapes: Sequence[Shape | None] | None = None
) -> list[Shape | None] | None:
    """The output shapes the CPU reference computes for ``node``, after LiteRT's Prepare checks.

    ``input_shapes`` default to the shapes the subgraph declares (None for an omitted input);
    constant inputs (folded ones included) are read from the subgraph. Returns one shape per
    output, None for an output whose shape depends on values known only at invoke, or None
    overall for an op without a shape rule. Raises :class:`~offload.errors.TensorShapeError`
    naming the node when the inputs cannot be valid for the op, and
    :class:`~offload.errors.UnsupportedOpError` when the CPU reference has no kernel for it.
    """
    cls = kernel_class(node)
    tensors = subgraph.tensors
    if input_shapes is None:
        input_shapes = [tensors[t].shape if t >= 0 else None for t in node.inputs]

    def constant(position: int) -> np.ndarray | None:
        tensor = tensors[node.inputs[position]]
        if not tensor.is_constant or tensor.sparsity is not None or tensor.dtype.kind == "O":
            return None
        return tensor.constant_value()

    try:
        shapes = cls.output_shapes(ShapeContext(node, input_shapes, constant))
    except _INVALID as exc:
        raise TensorShapeError(f"{node.describe()}: {exc}") from exc
    if shapes is None:
        return None
    return [None if s is None else tuple(int(d) for d in s) for s in shapes]
