"""Folded constants: DEQUANTIZE and DENSIFY of constants, run once by the core before planning.

A float16 model stores its weights as float16 constants behind DEQUANTIZE nodes, a sparse one
as sparse constants behind DENSIFY. LiteRT evaluates those nodes once and keeps the result.
offload goes one step further and folds them before any delegate is asked anything: the
planner and every delegate see a subgraph in which each folded output is a plain dense
constant (``Tensor.data`` set, float32 for dequantized weights), and the folding nodes are
neither offered to delegates nor planned into partitions. Node and tensor indices do not
change: they are LiteRT's.

Not folded (left to the interpreter, which runs them with :func:`fold_state` once at
``allocate_tensors`` and again after ``reset_all_variables``): outputs that are variables, or
that a stateful op updates in place (an LSTM state dequantized from float16 zeros carries over
between invokes).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from offload._graph import Subgraph, Tensor
from offload.errors import OffloadError, OpExecutionError
from offload.ops import kernel_class
from offload.ops._base import OpKernel

__all__ = ["FOLDABLE_OPS", "Folding", "fold_constants", "fold_state", "state_tensors"]

FOLDABLE_OPS = frozenset({"DEQUANTIZE", "DENSIFY"})


@dataclass(frozen=True)
class Folding:
    """The subgraph with folded outputs as constants, and the nodes that were folded."""

    subgraph: Subgraph
    nodes: tuple[int, ...]

    @property
    def tensors(self) -> tuple[int, ...]:
        """The tensors that became constants."""
        return tuple(t for n in self.nodes for t in self.subgraph.nodes[n].outputs if t >= 0)


def state_tensors(subgraph: Subgraph, nodes: Iterable[int] | None = None) -> set[int]:
    """Tensors that these nodes (all by default) update in place (``OpKernel.state_inputs``)."""
    found: set[int] = set()
    for node in subgraph.nodes if nodes is None else (subgraph.nodes[n] for n in nodes):
        try:
            positions = kernel_class(node).state_inputs(node.options)
        except OffloadError:
            continue  # no CPU kernel: the planner reports it; it declares no state here
        found.update(node.inputs[p] for p in positions if p < len(node.inputs))
    found.discard(-1)
    return found


def _value(tensor: Tensor, folded: dict[int, np.ndarray]) -> np.ndarray | None:
    if tensor.index in folded:
        return folded[tensor.index]
    if tensor.sparsity is not None:
        return None  # DENSIFY reads the sparse storage from the tensor itself
    return tensor.constant_value()


def fold_constants(subgraph: Subgraph, max_tensor_bytes: int | None = None) -> Folding:
    """Run every DEQUANTIZE / DENSIFY whose inputs are constants (chains too), in file order.

    Outputs larger than ``max_tensor_bytes`` are left to run time, where the interpreter's
    memory budget refuses them by name; so is a node whose kernel fails here (the interpreter
    then raises its typed error at ``allocate_tensors``).
    """
    tensors = subgraph.tensors
    state = state_tensors(subgraph)
    folded: dict[int, np.ndarray] = {}
    nodes: list[int] = []
    for node in subgraph.nodes:
        if node.op not in FOLDABLE_OPS or node.is_custom:
            continue
        if not node.inputs or not node.outputs or min((*node.inputs, *node.outputs)) < 0:
            continue
        inputs = [tensors[i] for i in node.inputs]
        outputs = [tensors[t] for t in node.outputs]
        if not all((t.is_constant or t.index in folded) and not t.is_variable for t in inputs):
            continue
        if any(t.is_variable or t.index in state or t.dtype.kind == "O" for t in outputs):
            continue
        if max_tensor_bytes is not None and any(
            math.prod(t.shape) * t.dtype.itemsize > max_tensor_bytes for t in outputs
        ):
            continue
        try:
            kernel = kernel_class(node)(node, subgraph, folded)
            result = kernel.run(*(_value(t, folded) for t in inputs))
        except Exception:
            continue
        values = [result] if isinstance(result, np.ndarray) else list(result)
        if len(values) != len(outputs):
            continue
        ready = []
        for t, value in zip(outputs, values):
            value = np.asarray(value)
            if value.dtype != t.dtype or value.size != math.prod(t.shape):
                break
            value = value.reshape(t.shape)
            if value.flags.writeable:
                # Shared by every kernel and delegate that reads it: nobody may write it.
                value = value.copy()
                value.flags.writeable = False
            ready.append((t.index, value))
        else:
            folded.update(ready)
            nodes.append(node.index)
    if not nodes:
        return Folding(subgraph, ())
    replaced = list(tensors)
    for index, value in folded.items():
        replaced[index] = dataclasses.replace(tensors[index], data=value)
    return Folding(dataclasses.replace(subgraph, tensors=tuple(replaced)), tuple(nodes))


def fold_state(
    subgraph: Subgraph,
    nodes: Iterable[int],
    kernel_of: Callable[[int], OpKernel],
    buffers: Sequence[np.ndarray | None],
    folded: dict[int, np.ndarray],
    folded_nodes: set[int],
) -> None:
    """Run the DEQUANTIZE / DENSIFY of constants that :func:`fold_constants` left, those of
    ``nodes`` not in ``folded_nodes`` yet, into ``folded`` (once per reset).

    These are the ones whose outputs are state: LiteRT evaluates them once into a
    persistent buffer that a stateful op (an LSTM state dequantized from float16 zeros)
    then updates in place across invokes, until reset_all_variables starts it over.
    """
    for index in nodes:  # in file order, so a chain reads what it just made
        if index in folded_nodes:
            continue
        node = subgraph.nodes[index]
        kernel = kernel_of(node.index)
        args = [folded.get(i, buffers[i]) if i >= 0 else None for i in node.inputs]
        try:
            result = kernel.run(*args)
        except OpExecutionError as exc:
            exc.add_note("while folding constants at allocate_tensors")
            raise
        values = [result] if isinstance(result, np.ndarray) else list(result)
        for t, value in zip(node.outputs, values):
            folded[t] = np.array(value, copy=True)
        folded_nodes.add(node.index)
