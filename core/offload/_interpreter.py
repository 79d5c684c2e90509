"""LiteRT's Python Interpreter API over offload's planner, CPU reference and delegates.

A program written for ``ai_edge_litert.interpreter.Interpreter`` runs unchanged with
``from offload import Interpreter``. Work is split as LiteRT splits it: ``allocate_tensors``
plans (partitions, builds kernels, pre-transforms weights, initialises delegate partitions,
allocates input buffers, the liveness table and the arena of intermediates, see
:mod:`offload._arena`); ``invoke`` only runs the flat step list.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import os
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from offload._arena import StepTensors, plan_arena
from offload._auto import choose_delegates
from offload._delegate import Delegate, DelegateKernel
from offload._fold import FOLDABLE_OPS, fold_constants
from offload._graph import Model, Subgraph, Tensor
from offload._introspect import array_root, held_bytes, reported_bytes, reported_stats
from offload._loader import load_model
from offload._partition import Partition, check_execution_order
from offload._plan import Plan, Step, make_plan
from offload._plugins import load_delegate
from offload.errors import (
    CpuFallbackError,
    DelegateError,
    InterpreterStateError,
    MemoryBudgetError,
    OffloadError,
    OpExecutionError,
    TensorIndexError,
    TensorShapeError,
    TensorTypeError,
)
from offload.ops import kernel_class
from offload.ops._base import Shape, ShapeContext

__all__ = ["Interpreter", "SignatureRunner"]

DelegatesArg = str | Sequence[str | Delegate] | None
# The default of ``max_tensor_bytes``: no tensor of a model run from Python needs more, and a
# crafted model asking for more (a FILL of 2^40 elements) fails before allocating it.
DEFAULT_MAX_TENSOR_BYTES = 2 * 2**30
# What a shape rule or a kernel's setup raises on inputs that cannot be valid; anything else
# escaping them is a bug in offload and is reported as one, still typed.
_INVALID_INPUT = (ValueError, IndexError, KeyError, TypeError, ZeroDivisionError, OverflowError)


def _shapes_str(tensors: Sequence[int], shapes: Sequence[Shape | None]) -> str:
    return ", ".join(
        "omitted" if t < 0 or shape is None else f"{list(shape)}"
        for t, shape in zip(tensors, shapes)
    )


def _shape_str(a: Any) -> str:
    if a is None:
        return "None"
    return f"{a.dtype}{list(a.shape)}" if isinstance(a, np.ndarray) else type(a).__name__


class _CompiledStep:
    __slots__ = ("run", "inputs", "outputs", "release", "step", "label", "single", "kernel")

    def __init__(
        self,
        run: Callable[..., Any],
        inputs: tuple[int, ...],
        outputs: tuple[int, ...],
        step: Step,
        label: str,
        kernel: Any = None,
    ) -> None:
        self.run = run
        self.kernel = kernel  # the CPU kernel; None for a delegate partition
        self.inputs = inputs
        self.outputs = outputs
        self.release: tuple[int, ...] = ()
        self.step = step
        self.label = label
        self.single = len(outputs) == 1


class _Executor:
    """Plans and runs one subgraph."""

    def __init__(
        self,
        model: Model,
        subgraph: Subgraph,
        delegates: Sequence[Delegate],
        allow_cpu_fallback: bool,
        preserve_all_tensors: bool,
        max_tensor_bytes: int | None = DEFAULT_MAX_TENSOR_BYTES,
    ) -> None:
        self.model = model
        self.subgraph = subgraph
        # Declared output shapes the ops contradict, replaced by the computed ones in
        # ``self.subgraph`` before anything plans or allocates (see _correct_declared_shapes).
        self.shape_corrections: list[dict[str, Any]] | None = None
        # Nodes folded into constants of ``self.subgraph`` before planning (see _fold_static).
        self.static_folded: tuple[int, ...] | None = None
        self.delegates = list(delegates)
        self.allow_cpu_fallback = allow_cpu_fallback
        self.preserve_all_tensors = preserve_all_tensors
        self.max_tensor_bytes = max_tensor_bytes
        # Held for the length of every call that reads or changes the executor's state, so a
        # second thread gets a typed error instead of silently mixing its tensors with ours.
        self.busy = threading.Lock()
        self.shapes: list[tuple[int, ...]] = [t.shape for t in subgraph.tensors]
        self.buffers: list[np.ndarray | None] = [None] * len(subgraph.tensors)
        self.plan: Plan | None = None
        self.compiled: list[_CompiledStep] = []
        self.cpu_kernels: dict[int, Any] = {}
        # Outputs of nodes run once at planning time (see _fold_constants), by tensor index.
        self.folded: dict[int, np.ndarray] = {}
        self.folded_nodes: set[int] = set()
        self.delegate_kernels: dict[int, DelegateKernel] = {}
        self.restored: dict[int, str] = {}
        self.allocated = False
        self.profile: dict[int, list[float]] | None = None
        self.arena: np.ndarray | None = None  # the block behind every arena slot
        # Nodes whose output shapes depend on input values (a FILL of a computed size): their
        # shapes, and so the memory budget, are checked on every invoke before they run.
        self.value_shaped: set[int] = set()

    # -- planning ---------------------------------------------------------------------------

    def _make_plan(self) -> Plan:
        self._correct_declared_shapes()
        self._fold_static()
        plan = make_plan(self.model, self.subgraph, self.delegates, folded=self.static_folded)
        if self.delegates and not self.allow_cpu_fallback and plan.cpu_nodes():
            lines = []
            for op, entry in plan.fallback_summary().items():
                reasons = (
                    "; ".join(f"{d}: {r}" for d, by in entry["reasons"].items() for r in by)
                    or "no delegate took it"
                )
                lines.append(f"  {op} x{entry['count']}: {reasons}")
            raise CpuFallbackError(
                f"allow_cpu_fallback=False, but {len(plan.cpu_nodes())} node(s) were taken by no "
                f"delegate ({', '.join(plan.delegates)}):\n" + "\n".join(lines)
            )
        return plan

    def _cpu_kernel(self, node_index: int) -> Any:
        kernel = self.cpu_kernels.get(node_index)
        if kernel is None:
            node = self.subgraph.nodes[node_index]
            cls = kernel_class(node)
            try:
                kernel = cls(node, self.subgraph, self.folded)
            except OffloadError:
                raise
            except Exception as exc:
                raise OpExecutionError(
                    f"{node.describe()} could not be set up: {type(exc).__name__}: {exc} "
                    f"(inputs: {self._describe_inputs(node.inputs)})"
                ) from exc
            self.cpu_kernels[node_index] = kernel
        return kernel

    def _describe_inputs(self, tensors: Sequence[int]) -> str:
        sg = self.subgraph
        return ", ".join(
            "omitted" if t < 0 else f"{sg.tensors[t].dtype}{list(self.shapes[t])}" for t in tensors
        )

    # -- shapes -----------------------------------------------------------------------------

    def _constant_of(self, t: int) -> np.ndarray | None:
        if t in self.folded:
            return self.folded[t]
        tensor = self.subgraph.tensors[t]
        if not tensor.is_constant or tensor.sparsity is not None or tensor.dtype.kind == "O":
            return None
        return tensor.constant_value()

    def _correct_declared_shapes(self) -> None:
        """Replace declared output shapes that the ops contradict, once, before planning.

        A model file is untrusted, and converters also leave placeholders (a keyword-spotting
        model on PyPI declares RFFT2D's output [1, 1, 1, 2048] where the op gives
        [1, 1, 1, 1025]); LiteRT's Prepare resizes every output to what the op computes. So
        does offload, in a corrected copy of the subgraph that the planner, the CPU kernels and
        every delegate get: nothing downstream sizes a buffer from a declared shape that the
        graph does not produce. Each correction is listed in ``delegation_report()``.
        """
        if self.shape_corrections is not None:
            return
        sg = self.subgraph
        check_execution_order(sg)  # shapes are propagated in file order
        shapes, unknown = self._propagate_shapes([t.shape for t in sg.tensors])
        corrections: list[dict[str, Any]] = []
        tensors = list(sg.tensors)
        for t, shape in enumerate(shapes):
            if shape != tensors[t].shape and t not in unknown:
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
            self.subgraph = dataclasses.replace(sg, tensors=tuple(tensors))
        self.shape_corrections = corrections

    def _infer_shapes(self) -> None:
        """Every tensor's shape for the current input shapes, held to the memory budget."""
        self._correct_declared_shapes()
        sg = self.subgraph
        start: list[Shape] = [t.shape for t in sg.tensors]
        for i in sg.inputs:
            start[i] = self.shapes[i]
        self.shapes, _ = self._propagate_shapes(start)

    def _propagate_shapes(self, shapes: list[Shape]) -> tuple[list[Shape], set[int]]:
        """Compute the shapes of node outputs from ``shapes`` (input shapes set), in order.

        Returns the shapes and the tensors whose shapes stay unknown until invoke: outputs
        that depend on input values (a RESHAPE to a computed shape), and everything computed
        from them, whose declared shapes are only placeholders (LiteRT resizes them at
        invoke too). Their nodes are checked on every invoke instead (see ``_budgeted``).
        Raises TensorShapeError where a node's inputs cannot be valid for its op, and
        MemoryBudgetError where a tensor would exceed ``max_tensor_bytes``.
        """
        sg = self.subgraph
        shapes = list(shapes)
        unknown: set[int] = set()
        self.value_shaped = set()
        for node in sg.nodes:
            try:
                cls = kernel_class(node)
            except OffloadError:
                cls = None  # no CPU kernel: planning says so, or a delegate takes the node
            if cls is None or any(t in unknown for t in node.inputs):
                if cls is not None:
                    self.value_shaped.add(node.index)
                unknown.update(t for t in node.outputs if t >= 0)
                continue
            in_shapes = [shapes[t] if t >= 0 else None for t in node.inputs]

            def constant(position: int, node: Any = node) -> np.ndarray | None:
                return self._constant_of(node.inputs[position])

            try:
                inferred = cls.output_shapes(ShapeContext(node, in_shapes, constant))
            except _INVALID_INPUT as exc:
                raise TensorShapeError(
                    f"{node.describe()}: {exc} (inputs: {_shapes_str(node.inputs, in_shapes)})"
                ) from exc
            if inferred is None or any(shape is None for shape in inferred):
                self.value_shaped.add(node.index)
            if inferred is None:
                unknown.update(t for t in node.outputs if t >= 0)
                continue
            if len(inferred) != len(node.outputs):
                raise TensorShapeError(
                    f"{node.describe()}: expected {len(inferred)} output(s) for these inputs, "
                    f"found {len(node.outputs)} in the model"
                )
            for t, shape in zip(node.outputs, inferred):
                if t < 0:
                    continue
                if shape is None:
                    unknown.add(t)
                else:
                    shapes[t] = tuple(int(d) for d in shape)
        for tensor in sg.tensors:
            self._check_size(tensor, shapes[tensor.index])
        return shapes, unknown

    def _budgeted(self, node: Any, kernel: Any) -> Callable[..., Any]:
        """``kernel.run`` behind a check of its output sizes, computed by the op's shape rule
        from this invoke's input values, against the memory budget."""
        rule = type(kernel).output_shapes
        tensors = self.subgraph.tensors

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
                    self._check_size(tensors[t], tuple(int(d) for d in shape))
            return kernel.run(*args, **kwargs)

        return run

    def _check_size(self, tensor: Tensor, shape: Shape) -> None:
        if any(d < 0 for d in shape):
            raise TensorShapeError(
                f"tensor {tensor.index} ({tensor.name!r}): expected non-negative dimensions, "
                f"found shape {list(shape)}"
            )
        if self.max_tensor_bytes is None or tensor.is_constant or tensor.dtype.kind == "O":
            return  # constants are views of the file; they allocate nothing
        nbytes = math.prod(shape) * tensor.dtype.itemsize
        if nbytes > self.max_tensor_bytes:
            raise MemoryBudgetError(
                f"tensor {tensor.index} ({tensor.name!r}) of shape {list(shape)} and type "
                f"{tensor.dtype} needs {nbytes:,} bytes, more than max_tensor_bytes="
                f"{self.max_tensor_bytes:,}; pass a larger max_tensor_bytes (or None) to the "
                "Interpreter if this model really needs it"
            )

    def _init_partition(self, partition: Partition) -> DelegateKernel | None:
        delegate = self._delegate_named(partition.delegate)
        try:
            kernel = delegate.create_kernel()
            kernel.init(self.subgraph, partition)
            kernel.prepare([self.shapes[t] for t in partition.inputs])
        except Exception as exc:
            self._restore_to_cpu(partition, f"({len(partition.nodes)} nodes)", exc)
            return None
        return kernel

    def _restore_to_cpu(self, partition: Partition, context: str, exc: Exception) -> None:
        """Give a partition whose delegate failed back to the CPU, with one warning."""
        message = (
            f"delegate {partition.delegate!r} failed to prepare partition {partition.index} "
            f"{context}: {type(exc).__name__}: {exc}"
        )
        if not self.allow_cpu_fallback:
            raise DelegateError(message) from exc
        warnings.warn(f"{message}; running that partition on the CPU instead", stacklevel=5)
        self.restored[partition.index] = message
        self.delegate_kernels.pop(partition.index, None)

    def _reprepare(self, partition: Partition, kernel: DelegateKernel) -> DelegateKernel | None:
        """Prepare an initialised partition for new shapes; on failure, hand it to the CPU."""
        try:
            kernel.prepare([self.shapes[t] for t in partition.inputs])
        except Exception as exc:
            self._restore_to_cpu(partition, "for new shapes", exc)
            return None
        return kernel

    def _delegate_named(self, name: str) -> Delegate:
        assert self.plan is not None
        return self.delegates[self.plan.delegates.index(name)]

    def _fold_static(self) -> None:
        """Fold DEQUANTIZE / DENSIFY of constants into constants of ``self.subgraph``, once,
        after the declared shapes are corrected (and held to the memory budget) and before
        planning: the planner, the CPU kernels and every delegate then see plain constants."""
        if self.static_folded is not None:
            return
        folding = fold_constants(self.subgraph, self.max_tensor_bytes)
        self.subgraph = folding.subgraph
        self.static_folded = folding.nodes

    def _fold_constants(self, plan: Plan) -> None:
        """Run the DEQUANTIZE / DENSIFY of constants that _fold_static left, once per reset.

        These are the ones whose outputs are state: LiteRT evaluates them once into a
        persistent buffer that a stateful op (an LSTM state dequantized from float16 zeros)
        then updates in place across invokes, until reset_all_variables starts it over.
        """
        sg = self.subgraph
        for step in plan.steps:
            if step.kind != "cpu" or step.index in self.folded_nodes:
                continue
            node = sg.nodes[step.index]
            if node.op not in FOLDABLE_OPS or not all(
                i < 0 or sg.tensors[i].is_constant or i in self.folded for i in node.inputs
            ):
                continue
            kernel = self._cpu_kernel(node.index)
            args = [self.folded.get(i, self.buffers[i]) if i >= 0 else None for i in node.inputs]
            try:
                result = kernel.run(*args)
                values = [result] if isinstance(result, np.ndarray) else list(result)
            except OffloadError:
                raise
            except Exception as exc:
                raise OpExecutionError(
                    f"{node.describe()} failed while folding constants at allocate_tensors: "
                    f"{type(exc).__name__}: {exc} (inputs: {self._describe_inputs(node.inputs)})"
                ) from exc
            for t, value in zip(node.outputs, values):
                self.folded[t] = np.array(value, copy=True)
            self.folded_nodes.add(node.index)

    def allocate(self) -> None:
        try:
            self._allocate()
        except OffloadError:
            raise
        except Exception as exc:
            # Every known failure is typed where it happens; what reaches here is a model
            # inconsistency no check names yet (or a bug): still typed, with the cause kept.
            raise OpExecutionError(
                f"allocate_tensors failed: {type(exc).__name__}: {exc}; the model is "
                "inconsistent in a way offload does not check by name yet (please report it)"
            ) from exc

    def _allocate(self) -> None:
        self._infer_shapes()
        if self.plan is None:
            self.plan = self._make_plan()
        sg = self.subgraph
        self._allocate_buffers()
        self._fold_constants(self.plan)
        for t, value in self.folded.items():
            self.buffers[t] = value
        plan = self.plan
        compiled: list[_CompiledStep] = []
        for step in plan.steps:
            if step.kind == "delegate":
                partition = plan.partitions[step.index]
                kernel = self.delegate_kernels.get(step.index)
                if kernel is None and step.index not in self.restored:
                    kernel = self._init_partition(partition)
                    if kernel is not None:
                        self.delegate_kernels[step.index] = kernel
                elif kernel is not None:
                    kernel = self._reprepare(partition, kernel)
                if kernel is not None:
                    compiled.append(
                        _CompiledStep(
                            _partition_runner(kernel),
                            partition.inputs,
                            partition.outputs,
                            step,
                            f"{partition.delegate} partition {partition.index}",
                        )
                    )
                    continue
                cpu_nodes = partition.nodes
            else:
                cpu_nodes = (step.index,)
            for n in cpu_nodes:
                if n in self.folded_nodes:
                    continue
                node = sg.nodes[n]
                kernel = self._cpu_kernel(n)
                run = kernel.run
                if n in self.value_shaped and self.max_tensor_bytes is not None:
                    run = self._budgeted(node, kernel)
                compiled.append(
                    _CompiledStep(
                        run,
                        node.inputs,
                        node.outputs,
                        Step("cpu", n),
                        node.describe(),
                        kernel,
                    )
                )
        keep = self._assign_liveness(compiled)
        self._attach_arena(compiled, keep)
        self.compiled = compiled
        self.allocated = True

    def _attach_arena(self, compiled: list[_CompiledStep], keep: set[int]) -> None:
        """Give kernels that can write into a preallocated array their output's arena slot.

        Planned from the model's static shapes, so only while every input still has its
        model shape: after a resize the intermediate shapes are known only at invoke, and
        kernels allocate their outputs (LiteRT re-plans its arena the same way on resize).
        """
        self.arena = None
        sg = self.subgraph
        if self.preserve_all_tensors or any(
            self.shapes[i] != sg.tensors[i].shape for i in sg.inputs
        ):
            return
        nbytes: dict[int, int] = {}
        for cs in compiled:
            if cs.kernel is None or not cs.kernel.writes_into or not cs.single:
                continue
            if cs.step.index in self.value_shaped:
                continue
            t = sg.tensors[cs.outputs[0]]
            shape = self.shapes[t.index]
            if t.dtype.kind in "biuf" and all(d > 0 for d in shape):
                nbytes[t.index] = math.prod(shape) * t.dtype.itemsize
        steps = [
            StepTensors(cs.inputs, cs.outputs, cs.kernel is not None and cs.kernel.writes_into)
            for cs in compiled
        ]
        plan = plan_arena(steps, nbytes, keep)
        if not plan.offsets:
            return
        self.arena, views = plan.views(
            {t: self.shapes[t] for t in plan.offsets},
            {t: sg.tensors[t].dtype for t in plan.offsets},
        )
        for cs in compiled:
            view = views.get(cs.outputs[0]) if cs.kernel is not None and cs.single else None
            if view is not None:
                cs.run = functools.partial(cs.kernel.run, out=view)

    def _assign_liveness(self, compiled: list[_CompiledStep]) -> set[int]:
        """Release each intermediate after its last use; returns the tensors always kept."""
        sg = self.subgraph
        keep = set(sg.inputs) | set(sg.outputs)
        keep |= {t.index for t in sg.tensors if t.is_constant or t.is_variable}
        keep |= set(self.folded)
        if self.preserve_all_tensors:
            return keep
        last_use: dict[int, int] = {}
        for pos, cs in enumerate(compiled):
            for t in (*cs.inputs, *cs.outputs):
                if t >= 0 and t not in keep:
                    last_use[t] = pos
        releases: dict[int, list[int]] = {}
        for t, pos in last_use.items():
            releases.setdefault(pos, []).append(t)
        for pos, cs in enumerate(compiled):
            cs.release = tuple(releases.get(pos, ()))
        return keep

    def _allocate_buffers(self) -> None:
        sg = self.subgraph
        for t in sg.tensors:
            if t.is_variable:
                if (
                    self.buffers[t.index] is None
                    or self.buffers[t.index].shape != self.shapes[t.index]
                ):
                    self.buffers[t.index] = _variable_initial_value(t, self.shapes[t.index])
            elif t.is_constant:
                if t.sparsity is None and t.dtype != np.dtype(object):
                    self.buffers[t.index] = t.constant_value()
        for i in sg.inputs:
            t = sg.tensors[i]
            shape = self.shapes[i]
            buf = self.buffers[i]
            if buf is None or buf.shape != shape or buf.dtype != t.dtype:
                self.buffers[i] = np.zeros(shape, dtype=t.dtype)

    def reset_variables(self) -> None:
        for t in self.subgraph.tensors:
            if t.is_variable:
                self.buffers[t.index] = _variable_initial_value(t, self.shapes[t.index])
        if self.folded_nodes:
            # Folded state (an LSTM state dequantized from constants) starts over too.
            self.folded.clear()
            self.folded_nodes.clear()
            if self.plan is not None and self.allocated:
                self.allocate()

    # -- running ----------------------------------------------------------------------------

    def invoke(self) -> None:
        if not self.allocated:
            raise InterpreterStateError(
                "invoke() called before allocate_tensors(); call allocate_tensors() first "
                "(and again after resize_tensor_input())"
            )
        pos = 0
        while pos < len(self.compiled):
            try:
                self._run_from(pos)
                return
            except _PartitionFailed as failure:
                pos = self._give_back_to_cpu(failure)

    def _run_from(self, first: int) -> None:
        bufs = self.buffers
        profile = self.profile
        compiled = self.compiled
        for pos in range(first, len(compiled)):
            cs = compiled[pos]
            args = [bufs[i] if i >= 0 else None for i in cs.inputs]
            try:
                if profile is None:
                    result = cs.run(*args)
                else:
                    start = time.perf_counter()
                    result = cs.run(*args)
                    profile.setdefault(pos, []).append(time.perf_counter() - start)
                if cs.kernel is None:
                    values = self._checked_partition_outputs(cs, result)
                elif cs.single:
                    values = [result if isinstance(result, np.ndarray) else result[0]]
                else:
                    values = list(result)
            except Exception as exc:
                if cs.kernel is None:  # a delegate partition: its own policy
                    raise _PartitionFailed(pos, cs, exc) from exc
                if isinstance(exc, OffloadError):
                    raise
                shapes = ", ".join(_shape_str(a) for a in args)
                raise OpExecutionError(
                    f"{cs.label} failed: {type(exc).__name__}: {exc} (inputs: {shapes})"
                ) from exc
            for t, value in zip(cs.outputs, values):
                if t >= 0:
                    bufs[t] = value
            for t in cs.release:
                bufs[t] = None

    def _checked_partition_outputs(self, cs: _CompiledStep, result: Any) -> list[np.ndarray]:
        """A delegate's outputs, held to the tensors' dtypes and inferred shapes."""
        sg = self.subgraph
        if isinstance(result, np.ndarray) or not isinstance(result, Sequence):
            raise DelegateError(
                f"expected a sequence of {len(cs.outputs)} arrays, found {type(result).__name__}"
            )
        if len(result) != len(cs.outputs):
            raise DelegateError(f"expected {len(cs.outputs)} outputs, found {len(result)}")
        for t, value in zip(cs.outputs, result):
            tensor = sg.tensors[t]
            if not isinstance(value, np.ndarray):
                raise DelegateError(
                    f"output tensor {t} ({tensor.name!r}): expected a numpy array, found "
                    f"{type(value).__name__}"
                )
            if value.dtype != tensor.dtype or tuple(value.shape) != tuple(self.shapes[t]):
                raise DelegateError(
                    f"output tensor {t} ({tensor.name!r}): expected {tensor.dtype}"
                    f"{list(self.shapes[t])}, found {value.dtype}{list(value.shape)}"
                )
        return list(result)

    def _give_back_to_cpu(self, failure: _PartitionFailed) -> int:
        """Run a partition whose delegate failed in invoke on the CPU from now on.

        Returns where this invoke goes on: the first CPU step of that partition. The steps
        before it have run and are not repeated (stateful ops must not step twice), and the
        partition's inputs are still held, since they are released only after it runs.
        """
        assert self.plan is not None
        partition = self.plan.partitions[failure.step.step.index]
        exc = failure.error
        message = (
            f"delegate {partition.delegate!r} failed in invoke on partition {partition.index} "
            f"(nodes {_node_ranges(partition.nodes)}): {type(exc).__name__}: {exc}"
        )
        if not self.allow_cpu_fallback:
            raise DelegateError(message) from exc
        warnings.warn(
            f"{message}; running that partition on the CPU for the rest of this interpreter's life",
            stacklevel=4,
        )
        self.restored[partition.index] = message
        self.delegate_kernels.pop(partition.index, None)
        self.allocate()
        members = set(partition.nodes)
        for pos, cs in enumerate(self.compiled):
            if cs.step.kind == "cpu" and cs.step.index in members:
                return pos
        raise AssertionError("a restored partition has no CPU steps; this is a bug in offload")


class _PartitionFailed(Exception):
    """A delegate partition raised or returned bad outputs during invoke (internal signal)."""

    def __init__(self, position: int, step: _CompiledStep, error: Exception) -> None:
        super().__init__(str(error))
        self.position = position
        self.step = step
        self.error = error


def _node_ranges(nodes: Sequence[int]) -> str:
    """``3-7, 9``: a partition's nodes, compactly."""
    ordered = sorted(nodes)
    spans: list[str] = []
    start = prev = ordered[0]
    for n in [*ordered[1:], None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        spans.append(f"{start}-{prev}" if prev != start else f"{start}")
        if n is not None:
            start = prev = n
    return ", ".join(spans)


def _partition_runner(kernel: DelegateKernel) -> Callable[..., Any]:
    def run(*inputs: np.ndarray) -> Sequence[np.ndarray]:
        return kernel.invoke(inputs)

    return run


@contextlib.contextmanager
def _exclusive(executor: _Executor, call: str) -> Iterator[None]:
    if not executor.busy.acquire(blocking=False):
        raise InterpreterStateError(
            f"{call} was called while another thread is inside a call on this Interpreter; "
            "an Interpreter runs one call at a time: use one Interpreter per thread"
        )
    try:
        yield
    finally:
        executor.busy.release()


def _variable_initial_value(t: Tensor, shape: tuple[int, ...]) -> np.ndarray:
    if t.is_constant and t.sparsity is None:
        return np.array(t.constant_value(), copy=True)
    q = t.quantization
    if t.dtype == np.int8 and q is not None and q.zero_point.size:
        # LiteRT's ResetVariableTensor starts int8 state at its zero point (real 0.0); other
        # types start at 0 bytes.
        return np.full(shape, int(q.zero_point[0]), np.int8)
    return np.zeros(shape, dtype=t.dtype)


def _tensor_details(t: Tensor, shape: tuple[int, ...]) -> dict[str, Any]:
    q = t.quantization
    if q is None:
        quantization: tuple[float, int] = (0.0, 0)
        params = {
            "scales": np.zeros(0, np.float32),
            "zero_points": np.zeros(0, np.int32),
            "quantized_dimension": 0,
            "block_size": 0,
        }
    else:
        quantization = q.as_tuple()
        params = {
            "scales": np.array(q.scale, np.float32),
            "zero_points": np.array(q.zero_point, np.int32),
            "quantized_dimension": q.quantized_dimension,
            "block_size": 0,  # LiteRT's key; blockwise quantization is not read yet
        }
    sparsity: dict[str, Any] = {}
    if t.sparsity is not None:
        sparsity = {
            "traversal_order": np.array(t.sparsity.traversal_order, np.int32),
            "block_map": np.array(t.sparsity.block_map, np.int32),
            "dim_metadata": [
                {"format": 0 if d.format == "DENSE" else 1, "dense_size": d.dense_size}
                if d.format == "DENSE"
                else {
                    "format": 1,
                    "array_segments": d.array_segments,
                    "array_indices": d.array_indices,
                }
                for d in t.sparsity.dim_metadata
            ],
        }
    return {
        "name": t.name,
        "index": t.index,
        "shape": np.array(shape, np.int32),
        "shape_signature": np.array(t.shape_signature, np.int32),
        "dtype": t.dtype.type,
        "quantization": quantization,
        "quantization_parameters": params,
        "sparsity_parameters": sparsity,
    }


class Interpreter:
    """Run a .tflite model: LiteRT's ``Interpreter`` API, with offload's delegates.

    Args:
        model_path: path to a .tflite file (memory-mapped).
        model_content: the model's bytes, instead of a path.
        experimental_delegates: delegate objects in priority order (as returned by
            :func:`offload.load_delegate`), as in LiteRT.
        num_threads: accepted for compatibility; the numpy reference uses numpy's threads.
        delegates: ``"auto"`` to pick from installed delegates by the capability matrix and
            the cost rule in :mod:`offload._auto`, or names / delegate objects in priority order.
        allow_cpu_fallback: False makes planning fail when a node is left to the CPU.
        profile: record per-step time; read it with :meth:`profile_report`.
        experimental_preserve_all_tensors: keep every intermediate for :meth:`get_tensor`.
        max_tensor_bytes: the most bytes any one non-constant tensor may take (2 GiB by
            default; None for no limit). Checked from the computed shapes at
            ``allocate_tensors``, and by kernels whose output size depends on input values,
            before anything is allocated; a larger tensor raises
            :class:`~offload.errors.MemoryBudgetError` naming it.

    One call at a time: an Interpreter is not shared between threads. A call made while
    another thread is inside ``invoke``, ``allocate_tensors``, ``set_tensor``,
    ``resize_tensor_input`` or ``reset_all_variables`` of the same Interpreter raises
    :class:`~offload.errors.InterpreterStateError` instead of mixing the two threads' tensors.
    Use one Interpreter per thread (they share nothing but the loaded model's bytes).

    A delegate partition that fails during ``invoke`` (raises, or returns outputs of the
    wrong count, dtype or shape) runs on the CPU from then on, with one warning naming the
    delegate, the partition and its nodes; with ``allow_cpu_fallback=False`` it raises
    :class:`~offload.errors.DelegateError` instead.
    """

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        model_content: bytes | None = None,
        experimental_delegates: Sequence[Delegate] | None = None,
        num_threads: int | None = None,
        delegates: DelegatesArg = None,
        *,
        allow_cpu_fallback: bool = True,
        profile: bool = False,
        experimental_preserve_all_tensors: bool = False,
        max_tensor_bytes: int | None = DEFAULT_MAX_TENSOR_BYTES,
        **litert_options: Any,
    ) -> None:
        if max_tensor_bytes is not None and (
            not isinstance(max_tensor_bytes, int) or max_tensor_bytes <= 0
        ):
            raise ValueError(
                f"max_tensor_bytes must be a positive int or None, found {max_tensor_bytes!r}"
            )
        self._max_tensor_bytes = max_tensor_bytes
        self._model = load_model(model_path=model_path, model_content=model_content)
        self._num_threads = num_threads
        self._allow_cpu_fallback = allow_cpu_fallback
        self._preserve = experimental_preserve_all_tensors
        self._litert_options = litert_options
        self.auto_selection: dict[str, Any] | None = None
        chosen: list[Delegate] = list(experimental_delegates or [])
        for d in chosen:
            if not isinstance(d, Delegate):
                raise TypeError(
                    "experimental_delegates expects offload.Delegate objects, "
                    f"found {type(d).__name__}"
                )
        if isinstance(delegates, str) and delegates == "auto":
            picked, self.auto_selection = choose_delegates(self._model)
            chosen.extend(picked)
        elif isinstance(delegates, str):
            chosen.append(load_delegate(delegates))
        elif delegates is not None:
            for d in delegates:
                chosen.append(d if isinstance(d, Delegate) else load_delegate(d))
        self._delegates = chosen
        self._executor = _Executor(
            self._model,
            self._model.main,
            chosen,
            allow_cpu_fallback,
            experimental_preserve_all_tensors,
            max_tensor_bytes,
        )
        if profile:
            self._executor.profile = {}
        self._signature_runners: dict[str, SignatureRunner] = {}

    # -- LiteRT API -------------------------------------------------------------------------

    @property
    def model(self) -> Model:
        return self._model

    def allocate_tensors(self) -> None:
        with _exclusive(self._executor, "allocate_tensors()"):
            self._executor.allocate()

    def invoke(self) -> None:
        with _exclusive(self._executor, "invoke()"):
            self._executor.invoke()

    def _check_index(self, index: int) -> Tensor:
        tensors = self._model.main.tensors
        if not isinstance(index, (int, np.integer)) or not 0 <= int(index) < len(tensors):
            raise TensorIndexError(
                f"expected a tensor index in 0..{len(tensors) - 1}, found {index!r}"
            )
        return tensors[int(index)]

    def get_input_details(self) -> list[dict[str, Any]]:
        sg = self._model.main
        return [_tensor_details(sg.tensors[i], self._executor.shapes[i]) for i in sg.inputs]

    def get_output_details(self) -> list[dict[str, Any]]:
        sg = self._model.main
        return [_tensor_details(sg.tensors[i], self._current_shape(i)) for i in sg.outputs]

    def get_tensor_details(self) -> list[dict[str, Any]]:
        return [_tensor_details(t, self._current_shape(t.index)) for t in self._model.main.tensors]

    def _current_shape(self, index: int) -> tuple[int, ...]:
        buf = self._executor.buffers[index]
        return tuple(buf.shape) if buf is not None else self._executor.shapes[index]

    def set_tensor(self, tensor_index: int, value: Any) -> None:
        with _exclusive(self._executor, "set_tensor()"):
            self._set_tensor(tensor_index, value)

    def _set_tensor(self, tensor_index: int, value: Any) -> None:
        t = self._check_index(tensor_index)
        ex = self._executor
        if t.index not in self._model.main.inputs and not t.is_variable:
            raise TensorIndexError(
                f"tensor {t.index} ({t.name!r}) is not an input of the model; inputs are "
                f"{list(self._model.main.inputs)}"
            )
        value = np.asarray(value)
        if value.dtype != t.dtype:
            raise TensorTypeError(
                f"Cannot set tensor {t.index} ({t.name!r}): expected dtype {t.dtype}, "
                f"found {value.dtype}"
            )
        expected = ex.shapes[t.index]
        if tuple(value.shape) != tuple(expected):
            raise TensorShapeError(
                f"Cannot set tensor {t.index} ({t.name!r}): expected shape {list(expected)}, "
                f"found {list(value.shape)}; call resize_tensor_input() first to change it"
            )
        buf = ex.buffers[t.index]
        if buf is None or buf.shape != value.shape or not buf.flags.writeable:
            ex.buffers[t.index] = np.array(value, copy=True)
        else:
            np.copyto(buf, value)

    def get_tensor(self, tensor_index: int, subgraph_index: int = 0) -> np.ndarray:
        t = self._check_index(tensor_index)
        buf = self._executor.buffers[t.index]
        if buf is None:
            if t.sparsity is not None:
                raise InterpreterStateError(
                    f"tensor {t.index} ({t.name!r}) is a sparse constant; it has no dense value"
                )
            if not self._executor.allocated:
                raise InterpreterStateError(
                    f"tensor {t.index} ({t.name!r}) has no value: call allocate_tensors() first"
                )
            raise InterpreterStateError(
                f"tensor {t.index} ({t.name!r}) has no value: intermediates are freed after "
                "their last use; create the Interpreter with "
                "experimental_preserve_all_tensors=True "
                "to keep them"
            )
        return np.array(buf, copy=True)

    def tensor(self, tensor_index: int) -> Callable[[], np.ndarray]:
        t = self._check_index(tensor_index)
        ex = self._executor

        def view() -> np.ndarray:
            buf = ex.buffers[t.index]
            if buf is None:
                raise InterpreterStateError(f"tensor {t.index} ({t.name!r}) has no value yet")
            return buf

        return view

    def resize_tensor_input(
        self, input_index: int, tensor_size: Sequence[int], strict: bool = False
    ) -> None:
        with _exclusive(self._executor, "resize_tensor_input()"):
            self._resize_tensor_input(input_index, tensor_size, strict)

    def _resize_tensor_input(
        self, input_index: int, tensor_size: Sequence[int], strict: bool
    ) -> None:
        t = self._check_index(input_index)
        sg = self._model.main
        if t.index not in sg.inputs:
            raise TensorIndexError(
                f"tensor {t.index} ({t.name!r}) is not an input; inputs are {list(sg.inputs)}"
            )
        new_shape = tuple(int(d) for d in tensor_size)
        if len(new_shape) != len(t.shape) and t.shape:
            raise TensorShapeError(
                f"resize of input {t.index} ({t.name!r}): expected rank {len(t.shape)}, "
                f"found shape {list(new_shape)}"
            )
        if strict:
            for want, got in zip(t.shape_signature, new_shape):
                if want != -1 and want != got:
                    raise TensorShapeError(
                        f"strict resize of input {t.index} ({t.name!r}): only dimensions that "
                        f"are -1 in shape_signature {list(t.shape_signature)} may change, "
                        f"found {list(new_shape)}"
                    )
        if any(d < 0 for d in new_shape):
            raise TensorShapeError(f"resize of input {t.index}: negative size in {list(new_shape)}")
        self._executor.shapes[t.index] = new_shape
        self._executor.allocated = False

    def reset_all_variables(self) -> None:
        with _exclusive(self._executor, "reset_all_variables()"):
            self._executor.reset_variables()

    def get_signature_list(self) -> dict[str, dict[str, list[str]]]:
        return {
            s.key: {"inputs": sorted(s.inputs), "outputs": sorted(s.outputs)}
            for s in self._model.signatures
        }

    def get_signature_runner(self, signature_key: str | None = None) -> SignatureRunner:
        sigs = {s.key: s for s in self._model.signatures}
        if signature_key is None:
            if len(sigs) != 1:
                raise ValueError(
                    f"signature_key is required when the model has {len(sigs)} signatures "
                    f"({sorted(sigs)})"
                )
            signature_key = next(iter(sigs))
        if signature_key not in sigs:
            raise ValueError(
                f"no signature {signature_key!r}; the model has {sorted(sigs) or 'none'}"
            )
        if signature_key not in self._signature_runners:
            sig = sigs[signature_key]
            if sig.subgraph_index == 0:
                executor = self._executor
            else:
                executor = _Executor(
                    self._model,
                    self._model.subgraphs[sig.subgraph_index],
                    self._delegates,
                    self._allow_cpu_fallback,
                    self._preserve,
                    self._max_tensor_bytes,
                )
            self._signature_runners[signature_key] = SignatureRunner(sig, executor)
        return self._signature_runners[signature_key]

    # -- offload's additions ----------------------------------------------------------------

    @property
    def delegates(self) -> list[Delegate]:
        return list(self._delegates)

    def plan(self) -> Plan:
        """The partition plan (computed on first use, or by allocate_tensors)."""
        if self._executor.plan is None:
            self._executor.plan = self._executor._make_plan()
        return self._executor.plan

    def delegation_report(self) -> dict[str, Any]:
        """Per delegate: nodes, partitions, boundary tensors, bytes copied; and fallback reasons."""
        report = self.plan().to_dict()
        report["restored_to_cpu"] = {str(k): v for k, v in self._executor.restored.items()}
        report["shape_corrections"] = self._executor.shape_corrections or []
        report["model_type_reason"] = self._model.model_type_reason
        if self.auto_selection is not None:
            report["auto"] = self.auto_selection
        return report

    def profile_report(self) -> list[dict[str, Any]]:
        """Per op (CPU) or partition (delegate): calls and total / mean milliseconds."""
        ex = self._executor
        if ex.profile is None:
            raise InterpreterStateError("create the Interpreter with profile=True to profile")
        rows: dict[str, dict[str, Any]] = {}
        for pos, times in ex.profile.items():
            cs = ex.compiled[pos]
            key = self._model.main.nodes[cs.step.index].op if cs.step.kind == "cpu" else cs.label
            row = rows.setdefault(key, {"name": key, "steps": 0, "calls": 0, "total_ms": 0.0})
            row["steps"] += 1
            row["calls"] += len(times)
            row["total_ms"] += 1000 * sum(times)
        return sorted(rows.values(), key=lambda r: -r["total_ms"])

    def memory_report(self) -> dict[str, int]:
        """Bytes the main subgraph holds now, by kind (see ``docs/introspection.md``).

        ``tensors``: the arrays behind tensor values (inputs, outputs, variables, constants,
        folded constants, intermediates not in the arena), each allocation counted once;
        ``constant_tensors``: the constants among them (model constants are views of the
        model file); ``arena``: the block intermediates share (0 before ``allocate_tensors``,
        after a resize, or with preserved tensors); ``cpu_kernel_buffers``: arrays the CPU
        kernels own (weights in their compute layout, tables); ``delegate_device_buffers`` and
        ``delegate_host_buffers``: what delegate kernels report through ``memory_bytes()``,
        ``delegate_buffers`` their sum (0 for kernels that report nothing).
        """
        ex = self._executor
        arena_id = None if ex.arena is None else id(array_root(ex.arena))
        tensors = constants = 0
        seen: set[Any] = set()
        held: list[np.ndarray] = []
        for t, buf in enumerate(ex.buffers):
            if buf is None:
                continue
            held.append(buf)
            root = array_root(buf)
            if id(root) == arena_id:
                continue
            # An owned root is one allocation; a view of the model file counts its own span.
            key = id(root) if root.flags.owndata else (buf.ctypes.data, buf.nbytes)
            if key in seen:
                continue
            seen.add(key)
            size = root.nbytes if root.flags.owndata else buf.nbytes
            tensors += size
            if ex.subgraph.tensors[t].is_constant or t in ex.folded:
                constants += size
        held.extend(ex.folded.values())
        if ex.arena is not None:
            held.append(ex.arena)
        device = host = 0
        for kernel in ex.delegate_kernels.values():
            reported = reported_bytes(kernel)
            device += reported["device"]
            host += reported["host"]
        return {
            "tensors": tensors,
            "constant_tensors": constants,
            "arena": 0 if ex.arena is None else int(ex.arena.nbytes),
            "cpu_kernel_buffers": held_bytes(ex.cpu_kernels.values(), exclude=held),
            "delegate_device_buffers": device,
            "delegate_host_buffers": host,
            "delegate_buffers": device + host,
        }

    def delegate_kernels(self) -> dict[int, DelegateKernel]:
        """The delegate kernels running partitions now, by partition index.

        Filled by ``allocate_tensors``; a partition handed back to the CPU has none. Read
        them for a delegate's own figures; ``init``, ``prepare`` and ``invoke`` are the
        interpreter's to call.
        """
        return dict(self._executor.delegate_kernels)

    def delegate_kernel_stats(self) -> list[dict[str, Any]]:
        """Per delegate partition running now: delegate, nodes, reported memory and stats.

        ``memory`` is the kernel's ``memory_bytes()`` (``{"device": .., "host": ..}``, zeros
        when it reports nothing); ``stats`` its ``stats()`` (a delegate's own figures, such
        as whether its program came from the cache), ``{}`` when it has none.
        """
        ex = self._executor
        rows = []
        for index, kernel in sorted(ex.delegate_kernels.items()):
            partition = self.plan().partitions[index]
            rows.append(
                {
                    "partition": index,
                    "delegate": partition.delegate,
                    "nodes": list(partition.nodes),
                    "memory": reported_bytes(kernel),
                    "stats": reported_stats(kernel),
                }
            )
        return rows


class SignatureRunner:
    """Runs one signature: ``runner(**inputs) -> {output_name: array}`` (LiteRT's API)."""

    def __init__(self, signature: Any, executor: _Executor) -> None:
        self._signature = signature
        self._executor = executor

    def get_input_details(self) -> dict[str, dict[str, Any]]:
        ex = self._executor
        return {
            name: _tensor_details(ex.subgraph.tensors[i], ex.shapes[i])
            for name, i in self._signature.inputs.items()
        }

    def get_output_details(self) -> dict[str, dict[str, Any]]:
        ex = self._executor
        return {
            name: _tensor_details(ex.subgraph.tensors[i], ex.shapes[i])
            for name, i in self._signature.outputs.items()
        }

    def __call__(self, **inputs: Any) -> dict[str, np.ndarray]:
        with _exclusive(self._executor, "a signature runner call"):
            return self._call(inputs)

    def _call(self, inputs: dict[str, Any]) -> dict[str, np.ndarray]:
        ex = self._executor
        expected = set(self._signature.inputs)
        if set(inputs) != expected:
            raise ValueError(
                f"signature {self._signature.key!r} expects inputs {sorted(expected)}, "
                f"found {sorted(inputs)}"
            )
        resized = False
        for name, value in inputs.items():
            index = self._signature.inputs[name]
            t = ex.subgraph.tensors[index]
            value = np.asarray(value)
            if value.dtype != t.dtype:
                raise TensorTypeError(
                    f"signature input {name!r}: expected dtype {t.dtype}, found {value.dtype}"
                )
            if tuple(value.shape) != ex.shapes[index]:
                ex.shapes[index] = tuple(value.shape)
                resized = True
        if resized or not ex.allocated:
            ex.allocate()
        for name, value in inputs.items():
            ex.buffers[self._signature.inputs[name]] = np.array(value, copy=True)
        ex.invoke()
        return {
            name: np.array(ex.buffers[i], copy=True) for name, i in self._signature.outputs.items()
        }
