"""Shapes before anything is allocated: declared-shape correction, propagation, the budget.

A subgraph's tensor shapes are computed from its input shapes by each op's shape rule, in
file order, before planning and before any buffer exists. The same pass corrects declared
output shapes that the ops contradict, and holds every tensor to the memory budget
(``max_tensor_bytes``), so a crafted model fails with a typed error naming the tensor
instead of allocating it. Ops whose output shapes depend on input values are checked
against the budget at invoke instead, behind :func:`budgeted`. :class:`HeldShapes` is the
executor's side: the shapes it holds for the current input shapes.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from offload._graph import Subgraph, Tensor
from offload._partition import check_execution_order
from offload.errors import (
    MemoryBudgetError,
    OffloadError,
    TensorShapeError,
    UnsupportedOpError,
)
from offload.ops import kernel_class
from offload.ops._base import Shape, ShapeContext
from offload.ops._types import check_node_types
from offload.quant import rescale_limit

__all__ = [
    "DEFAULT_MAX_TENSOR_BYTES",
    "ConstantOf",
    "HeldShapes",
    "PropagatedShapes",
    "budgeted",
    "check_rescales",
    "check_tensor_size",
    "check_types",
    "correct_declared_shapes",
    "propagate_shapes",
]

# The default of ``max_tensor_bytes``: no tensor of a model run from Python needs more, and a
# crafted model asking for more (a FILL of 2^40 elements) fails before allocating it.
DEFAULT_MAX_TENSOR_BYTES = 2 * 2**30
# What a shape rule or a kernel's setup raises on inputs that cannot be valid; anything else
# escaping them is a bug in offload and is reported as one, still typed.
_INVALID_INPUT = (ValueError, IndexError, KeyError, TypeError, ZeroDivisionError, OverflowError)

# A tensor's constant value by index, or None where it has none a shape rule may read.
ConstantOf = Callable[[int], np.ndarray | None]


@dataclasses.dataclass(frozen=True)
class PropagatedShapes:
    """What :func:`propagate_shapes` computed.

    ``unknown``: tensors whose shapes stay unknown until invoke. ``value_shaped``: nodes whose
    output shapes depend on input values, to be held to the budget on every invoke.
    """

    shapes: list[Shape]
    unknown: set[int]
    value_shaped: set[int]
    # Node -> bytes of the arrays its CPU kernel prepares and makes (OpKernel.scratch_bytes),
    # where known.
    scratch: dict[int, int] = dataclasses.field(default_factory=dict)


def _shapes_str(tensors: Sequence[int], shapes: Sequence[Shape | None]) -> str:
    return ", ".join(
        "omitted" if t < 0 or shape is None else f"{list(shape)}"
        for t, shape in zip(tensors, shapes)
    )


def _invalid_inputs(
    node: Any, exc: Exception, in_shapes: Sequence[Shape | None]
) -> TensorShapeError:
    """The error for inputs that a node's shape or scratch rule cannot take."""
    return TensorShapeError(
        f"{node.describe()}: {exc} (inputs: {_shapes_str(node.inputs, in_shapes)})"
    )


def check_tensor_size(tensor: Tensor, shape: Shape, max_tensor_bytes: int | None) -> None:
    """Raise where ``shape`` is negative, or would take ``tensor`` past the memory budget."""
    if any(d < 0 for d in shape):
        raise TensorShapeError(
            f"tensor {tensor.index} ({tensor.name!r}): expected non-negative dimensions, "
            f"found shape {list(shape)}"
        )
    if max_tensor_bytes is None or tensor.is_constant or tensor.dtype.kind == "O":
        return  # constants are views of the file; they allocate nothing
    nbytes = math.prod(shape) * tensor.dtype.itemsize
    if nbytes > max_tensor_bytes:
        raise MemoryBudgetError(
            f"tensor {tensor.index} ({tensor.name!r}) of shape {list(shape)} and type "
            f"{tensor.dtype} needs {nbytes:,} bytes, more than max_tensor_bytes="
            f"{max_tensor_bytes:,}; pass a larger max_tensor_bytes (or None) to the "
            "Interpreter if this model really needs it"
        )


def _shapes_at(subgraph: Subgraph, input_shapes: Sequence[Shape]) -> list[Shape]:
    """The declared shapes, but the inputs' (in ``subgraph.inputs`` order): where
    :func:`propagate_shapes` starts for these input shapes."""
    shapes: list[Shape] = [t.shape for t in subgraph.tensors]
    for i, shape in zip(subgraph.inputs, input_shapes):
        shapes[i] = shape
    return shapes


def propagate_shapes(
    subgraph: Subgraph,
    shapes: Sequence[Shape],
    constant_of: ConstantOf,
    max_tensor_bytes: int | None,
) -> PropagatedShapes:
    """Compute the shapes of node outputs from ``shapes`` (input shapes set), in order.

    Unknown until invoke are the outputs that depend on input values (a RESHAPE to a
    computed shape), and everything computed from them, whose declared shapes are only
    placeholders (LiteRT resizes them at invoke too). Their nodes are checked on every
    invoke instead (see :func:`budgeted`). Raises TensorShapeError where a node's inputs
    cannot be valid for its op, and MemoryBudgetError where a tensor would exceed
    ``max_tensor_bytes``.
    """
    shapes = list(shapes)
    unknown: set[int] = set()
    value_shaped: set[int] = set()
    scratch: dict[int, int] = {}
    for node in subgraph.nodes:
        try:
            cls = kernel_class(node)
        except OffloadError:
            cls = None  # no CPU kernel: planning says so, or a delegate takes the node
        if cls is None or any(t in unknown for t in node.inputs):
            if cls is not None:
                value_shaped.add(node.index)
            unknown.update(t for t in node.outputs if t >= 0)
            continue
        in_shapes = [shapes[t] if t >= 0 else None for t in node.inputs]

        def constant(position: int, node: Any = node) -> np.ndarray | None:
            return constant_of(node.inputs[position])

        try:
            inferred = cls.output_shapes(ShapeContext(node, in_shapes, constant))
        except _INVALID_INPUT as exc:
            raise _invalid_inputs(node, exc, in_shapes) from exc
        if inferred is None or any(shape is None for shape in inferred):
            value_shaped.add(node.index)
        if inferred is None:
            unknown.update(t for t in node.outputs if t >= 0)
            continue
        if len(inferred) != len(node.outputs):
            raise TensorShapeError(
                f"{node.describe()}: expected {len(inferred)} output(s) for these inputs, "
                f"found {len(node.outputs)} in the model"
            )
        if all(shape is not None for shape in inferred):
            # The scratch rule also reads the input types (an int8 kernel works in wider ones).
            ctx = ShapeContext(node, in_shapes, constant, subgraph.tensors)
            try:
                need = cls.scratch_bytes(ctx, inferred)  # type: ignore[arg-type]
            except _INVALID_INPUT as exc:
                raise _invalid_inputs(node, exc, in_shapes) from exc
            scratch[node.index] = need
            if max_tensor_bytes is not None and need > max_tensor_bytes:
                raise MemoryBudgetError(
                    f"{node.describe()} would need {need:,} bytes of working arrays (prepared "
                    f"weights and temporaries) for inputs "
                    f"{_shapes_str(node.inputs, in_shapes)}, more than max_tensor_bytes="
                    f"{max_tensor_bytes:,}; pass a larger max_tensor_bytes (or None) to the "
                    "Interpreter if this model really needs it"
                )
        for t, shape in zip(node.outputs, inferred):
            if t < 0:
                continue
            if shape is None:
                unknown.add(t)
            else:
                shapes[t] = tuple(int(d) for d in shape)
    for tensor in subgraph.tensors:
        check_tensor_size(tensor, shapes[tensor.index], max_tensor_bytes)
    return PropagatedShapes(shapes, unknown, value_shaped, scratch)


def check_types(subgraph: Subgraph) -> None:
    """Raise TensorTypeError at the first node whose tensors have types its op does not take
    (``OpKernel.types``); ops offload has no kernel for are left to whoever takes them."""
    for node in subgraph.nodes:
        try:
            declared = kernel_class(node).types
        except OffloadError:
            continue
        if declared is not None:
            check_node_types(node, subgraph.tensors, declared)


def check_rescales(subgraph: Subgraph) -> None:
    """Raise UnsupportedOpError at the first node whose quantization scales LiteRT's Prepare
    aborts the process on or refuses (:func:`offload.quant.rescale_limit`): LiteRT does not
    run such a model, so neither does offload, on the CPU reference or on any delegate."""
    for node in subgraph.nodes:
        limit = rescale_limit(node, subgraph)
        if limit is not None and limit.stage == "prepare":
            raise UnsupportedOpError(f"{node.describe()}: {limit.message}")


def correct_declared_shapes(
    subgraph: Subgraph, constant_of: ConstantOf, max_tensor_bytes: int | None
) -> tuple[Subgraph, list[dict[str, Any]]]:
    """``subgraph`` with the declared output shapes that its ops contradict replaced, and a
    list of the corrections (tensor, name, declared, computed).

    A model file is untrusted, and converters also leave placeholders (a keyword-spotting
    model on PyPI declares RFFT2D's output [1, 1, 1, 2048] where the op gives
    [1, 1, 1, 1025]); LiteRT's Prepare resizes every output to what the op computes. So
    does offload, in a corrected copy of the subgraph that the planner, the CPU kernels and
    every delegate get: nothing downstream sizes a buffer from a declared shape that the
    graph does not produce.
    """
    check_execution_order(subgraph)  # shapes are propagated in file order
    check_types(subgraph)
    check_rescales(subgraph)
    propagated = propagate_shapes(
        subgraph, [t.shape for t in subgraph.tensors], constant_of, max_tensor_bytes
    )
    corrections: list[dict[str, Any]] = []
    tensors = list(subgraph.tensors)
    for t, shape in enumerate(propagated.shapes):
        if shape != tensors[t].shape and t not in propagated.unknown:
            corrections.append(
                {
                    "tensor": t,
                    "name": tensors[t].name,
                    "declared": list(tensors[t].shape),
                    "computed": list(shape),
                }
            )
            tensors[t] = dataclasses.replace(tensors[t], shape=shape)
    if corrections:
        subgraph = dataclasses.replace(subgraph, tensors=tuple(tensors))
    return subgraph, corrections


def budgeted(
    node: Any, kernel: Any, tensors: Sequence[Tensor], max_tensor_bytes: int | None
) -> Callable[..., Any]:
    """``kernel.run`` behind a check of its output sizes, computed by the op's shape rule
    from this invoke's input values, against the memory budget."""
    rule = type(kernel).output_shapes

    def run(*args: Any, **kwargs: Any) -> Any:
        ctx = ShapeContext(
            node,
            [None if a is None else tuple(np.shape(a)) for a in args],
            lambda position: args[position],
        )
        try:
            shapes = rule(ctx)
        except _INVALID_INPUT as exc:
            raise TensorShapeError(f"{node.describe()}: {exc}") from exc
        for t, shape in zip(node.outputs, shapes or ()):
            if t >= 0 and shape is not None:
                check_tensor_size(tensors[t], tuple(int(d) for d in shape), max_tensor_bytes)
        return kernel.run(*args, **kwargs)

    return run


class HeldShapes:
    """The executor's shapes: the declared ones corrected once, every tensor's at the current
    input shapes, and the tensors whose shapes only a run settles. A part of
    :class:`offload._executor.Executor` (a base class of it), with the state it keeps."""

    if TYPE_CHECKING:  # the executor's, read here
        subgraph: Subgraph
        shapes: list[Shape]
        folded: dict[int, np.ndarray]
        max_tensor_bytes: int | None

    def __init__(self) -> None:
        super().__init__()
        # Declared output shapes the ops contradict, replaced by the computed ones in
        # ``self.subgraph`` before anything plans or allocates (see _correct_declared_shapes).
        self.shape_corrections: list[dict[str, Any]] | None = None
        # Nodes whose output shapes depend on input values (a FILL of a computed size): their
        # shapes, and so the memory budget, are checked on every invoke before they run.
        self.value_shaped: set[int] = set()
        # Node -> bytes of temporaries its CPU kernel makes at these shapes (scratch_bytes).
        self.scratch: dict[int, int] = {}
        # (input shapes, the tensors only a run can shape at them): see _runtime_shaped.
        self._unknown_at: tuple[tuple[Shape, ...], set[int]] | None = None

    def _constant_of(self, t: int) -> np.ndarray | None:
        if t in self.folded:
            return self.folded[t]
        tensor = self.subgraph.tensors[t]
        if not tensor.is_constant or tensor.sparsity is not None or tensor.dtype.kind == "O":
            return None
        return tensor.constant_value()

    def _correct_declared_shapes(self) -> None:
        """Replace declared output shapes that the ops contradict, once, before planning,
        in the subgraph everything downstream gets; ``delegation_report()`` lists them."""
        if self.shape_corrections is not None:
            return
        self.subgraph, self.shape_corrections = correct_declared_shapes(
            self.subgraph, self._constant_of, self.max_tensor_bytes
        )

    def _infer_shapes(self) -> None:
        """Every tensor's shape for the current input shapes, held to the memory budget."""
        self._correct_declared_shapes()
        sg = self.subgraph
        start = _shapes_at(sg, [self.shapes[i] for i in sg.inputs])
        propagated = propagate_shapes(sg, start, self._constant_of, self.max_tensor_bytes)
        self.shapes = propagated.shapes
        # What _runtime_shaped would compute again for these input shapes; the CPU kernels
        # are told it at every allocate (see Executor._cpu_kernel).
        self._unknown_at = (tuple(self.shapes[i] for i in sg.inputs), propagated.unknown)
        self.value_shaped = propagated.value_shaped
        self.scratch = propagated.scratch

    def _runtime_shaped(self) -> set[int]:
        """The tensors whose shapes are unknown until invoke at the current input shapes
        (:func:`propagate_shapes`' ``unknown``: outputs of ops whose shapes depend on values
        or that have no shape rule, and all computed from them).

        Kept for these input shapes, from allocate_tensors' own pass (the CPU kernels hold
        their outputs to the other tensors' shapes); computed again (0.2-3 ms on the public
        models) only when a delegate's output differs from the shape held for it after the
        input shapes changed, which the hot path does not pay.
        """
        sg = self.subgraph
        key = tuple(self.shapes[i] for i in sg.inputs)
        held = self._unknown_at
        if held is not None and held[0] == key:
            return held[1]
        unknown = propagate_shapes(sg, _shapes_at(sg, key), self._constant_of, None).unknown
        self._unknown_at = (key, unknown)
        return unknown
