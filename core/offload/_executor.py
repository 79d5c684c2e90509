"""The executor: plans one subgraph, allocates it and runs its flat step list.

``allocate`` does the work LiteRT's ``AllocateTensors`` does: it computes shapes (see
:mod:`offload._shape_pass`), partitions, builds CPU kernels, pre-transforms weights, folds
constants, initialises delegate partitions, allocates input buffers, the liveness table and
the arena of intermediates (see :mod:`offload._arena`). ``invoke`` only runs the steps, and
gives a delegate partition that fails back to the CPU.
"""

from __future__ import annotations

import math
import shlex
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any, cast

import numpy as np

from offload._arena import StepTensors, plan_arena
from offload._delegate import Delegate, DelegateKernel
from offload._fold import fold_constants
from offload._graph import Model, Subgraph
from offload._litert_compat import litert_message
from offload._partition import Partition, node_ranges
from offload._plan import Plan, Step, make_plan
from offload._plan_cost import fragmentation, splitting_ops
from offload._shape_pass import (
    DEFAULT_MAX_TENSOR_BYTES,
    budgeted,
    check_tensor_size,
    correct_declared_shapes,
    propagate_shapes,
)
from offload._tensor_details import variable_initial_value
from offload.errors import (
    CpuFallbackError,
    DelegateError,
    InterpreterStateError,
    OffloadError,
    OpExecutionError,
    PartitionCostWarning,
)
from offload.ops import kernel_class
from offload.ops._base import OpKernel, Shape

__all__ = ["CompiledStep", "Executor"]


class CompiledStep:
    __slots__ = (
        "run",
        "inputs",
        "outputs",
        "release",
        "step",
        "label",
        "single",
        "kernel",
        "expected",
        "fresh",
        "delegate",
    )

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
        # A delegate partition's outputs as the interpreter holds them, (dtype, shape) each,
        # and whether its kernel hands over arrays of its own (fresh_outputs): set at allocate.
        self.expected: tuple[tuple[np.dtype, tuple[int, ...]], ...] = ()
        self.fresh = False
        self.delegate: DelegateKernel | None = None


class Executor:
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
        self.compiled: list[CompiledStep] = []
        self.cpu_kernels: dict[int, OpKernel] = {}
        # Outputs of nodes run once at planning time (see _fold_constants), by tensor index.
        self.folded: dict[int, np.ndarray] = {}
        self.folded_nodes: set[int] = set()
        self.delegate_kernels: dict[int, DelegateKernel] = {}
        self.restored: dict[int, str] = {}
        # Delegate outputs copied into arrays the interpreter owns, per tensor, kept across
        # invokes (see _checked_partition_outputs).
        self.partition_outputs: dict[int, np.ndarray] = {}
        self.allocated = False
        self.profile: dict[int, list[float]] | None = None
        self.arena: np.ndarray | None = None  # the block behind every arena slot
        # Nodes whose output shapes depend on input values (a FILL of a computed size): their
        # shapes, and so the memory budget, are checked on every invoke before they run.
        self.value_shaped: set[int] = set()
        # Node -> bytes of temporaries its CPU kernel makes at these shapes (scratch_bytes).
        self.scratch: dict[int, int] = {}
        # Set by the Interpreter when the program named the delegates: a fragmented plan then
        # gets one PartitionCostWarning (auto and the default reject such plans instead).
        self.warn_partition_cost = False
        # Model inputs a delegate kernel can take straight from set_tensor (DelegateKernel.
        # take_input): tensor -> (kernel, input position), from the latest allocate; those it
        # holds now, whose buffer here is stale until taken back; and those never to hand over
        # again, since a view of their buffer is out.
        self.takers: dict[int, tuple[DelegateKernel, int]] = {}
        self.handed: dict[int, tuple[DelegateKernel, int]] = {}
        self.viewed: set[int] = set()
        # (input shapes, the tensors only a run can shape at them): see _runtime_shaped.
        self._unknown_at: tuple[tuple[Shape, ...], set[int]] | None = None
        # The takers' tensors with the dtype and shape a value must have to be offered as it
        # is, and the taker (none with a view out).
        self.direct: dict[int, tuple[np.dtype, tuple[int, ...], tuple[DelegateKernel, int]]] = {}
        # The plan's one step when it is a delegate partition (a whole model on one engine).
        self.sole: CompiledStep | None = None

    # -- planning ---------------------------------------------------------------------------

    def _make_plan(self) -> Plan:
        self._correct_declared_shapes()
        self._fold_static()
        plan = make_plan(self.model, self.subgraph, self.delegates, folded=self.static_folded)
        if self.warn_partition_cost and plan.partitions:
            _warn_partition_cost(plan, self.model.source)
        fallback = plan.fallback_nodes()
        if self.delegates and not self.allow_cpu_fallback and fallback:
            lines = []
            for op, entry in plan.fallback_summary().items():
                reasons = (
                    "; ".join(f"{d}: {r}" for d, by in entry["reasons"].items() for r in by)
                    or "no delegate took it"
                )
                lines.append(f"  {op} x{entry['count']}: {reasons}")
            raise CpuFallbackError(
                f"allow_cpu_fallback=False, but {len(fallback)} node(s) were taken by no "
                f"delegate ({', '.join(plan.delegates)}):\n" + "\n".join(lines)
            )
        return plan

    def planned(self) -> Plan:
        """The partition plan, made on first use (by ``allocate`` or ``Interpreter.plan()``)."""
        if self.plan is None:
            self.plan = self._make_plan()
        return self.plan

    def _cpu_kernel(self, node_index: int) -> OpKernel:
        """The node's CPU kernel (set-up failures name the node: OpKernel), holding its
        outputs to the shapes held for their tensors now."""
        node = self.subgraph.nodes[node_index]
        kernel = self.cpu_kernels.get(node_index)
        if kernel is None:
            kernel = self.cpu_kernels[node_index] = kernel_class(node)(
                node, self.subgraph, self.folded
            )
        runtime_shaped = self._runtime_shaped()
        kernel.expect_outputs(
            [None if t < 0 or t in runtime_shaped else self.shapes[t] for t in node.outputs]
        )
        return kernel

    def state_inputs(self, nodes: Sequence[int]) -> set[int]:
        """Tensors that these nodes' ops update in place (OpKernel.state_inputs)."""
        written: set[int] = set()
        for n in nodes:
            node = self.subgraph.nodes[n]
            try:
                positions = kernel_class(node).state_inputs(node.options)
            except OffloadError:  # an op the reference lacks: it declares no state here
                continue
            written.update(node.inputs[k] for k in positions if k < len(node.inputs))
        written.discard(-1)
        return written

    # -- shapes -----------------------------------------------------------------------------

    # -- shapes (computed by offload._shape_pass) -------------------------------------------

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
        start: list[Shape] = [t.shape for t in sg.tensors]
        for i in sg.inputs:
            start[i] = self.shapes[i]
        propagated = propagate_shapes(sg, start, self._constant_of, self.max_tensor_bytes)
        self.shapes = propagated.shapes
        # What _runtime_shaped would compute again for these input shapes; the CPU kernels
        # are told it at every allocate (see _cpu_kernel).
        self._unknown_at = (tuple(self.shapes[i] for i in sg.inputs), propagated.unknown)
        self.value_shaped = propagated.value_shaped
        self.scratch = propagated.scratch

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

    def _restore_to_cpu(
        self, partition: Partition, context: str, exc: Exception, failed: str = "to prepare"
    ) -> None:
        """Give a partition whose delegate failed back to the CPU, with one warning."""
        message = (
            f"delegate {partition.delegate!r} failed {failed} partition {partition.index} "
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
        for index in plan.state_init:  # in file order, so a chain reads what it just made
            if index in self.folded_nodes:
                continue
            node = sg.nodes[index]
            kernel = self._cpu_kernel(node.index)
            args = [self.folded.get(i, self.buffers[i]) if i >= 0 else None for i in node.inputs]
            try:
                result = kernel.run(*args)
            except OpExecutionError as exc:
                exc.add_note("while folding constants at allocate_tensors")
                raise
            values = [result] if isinstance(result, np.ndarray) else list(result)
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
        # Kernels may be prepared again below, and their engines' buffers with them.
        self.take_back_all()
        self._infer_shapes()
        plan = self.planned()
        sg = self.subgraph  # after planning: folding at planning time replaces it
        self._allocate_buffers()
        self._fold_constants(plan)
        for t, value in self.folded.items():
            self.buffers[t] = value
        compiled: list[CompiledStep] = []
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
                    # State (variable tensors, and inputs an op overwrites, as a BASIC LSTM
                    # does its previous activation) is updated in place by a delegate as by a
                    # CPU kernel; every other input it may only read.
                    written = self.state_inputs(partition.nodes)
                    variable = [sg.tensors[t].is_variable or t in written for t in partition.inputs]
                    cs = CompiledStep(
                        _partition_runner(kernel, variable),
                        partition.inputs,
                        partition.outputs,
                        step,
                        f"{partition.delegate} partition {partition.index}",
                    )
                    cs.expected = tuple(
                        (sg.tensors[t].dtype, tuple(self.shapes[t])) for t in partition.outputs
                    )
                    cs.fresh = bool(getattr(kernel, "fresh_outputs", False))
                    cs.delegate = kernel
                    compiled.append(cs)
                    continue
                cpu_nodes = partition.nodes
            else:
                cpu_nodes = (step.index,)
            for n in cpu_nodes:
                if n in self.folded_nodes:
                    continue
                node = sg.nodes[n]
                cpu = self._cpu_kernel(n)
                run = cpu.run
                if n in self.value_shaped and self.max_tensor_bytes is not None:
                    run = budgeted(node, cpu, sg.tensors, self.max_tensor_bytes)
                compiled.append(
                    CompiledStep(
                        run, node.inputs, node.outputs, Step("cpu", n), node.describe(), cpu
                    )
                )
        keep = self._assign_liveness(compiled)
        self._attach_arena(compiled, keep)
        self.compiled = compiled
        self.takers = self._find_takers(compiled)
        self.direct = {
            t: (sg.tensors[t].dtype, tuple(self.shapes[t]), taker)
            for t, taker in self.takers.items()
            if t not in self.viewed
        }
        only = compiled[0] if len(compiled) == 1 else None
        self.sole = only if only is not None and only.delegate is not None else None
        self.allocated = True

    def _find_takers(self, compiled: list[CompiledStep]) -> dict[int, tuple[DelegateKernel, int]]:
        """The model inputs that one delegate partition alone reads, once, and whose kernel
        takes inputs (:meth:`DelegateKernel.take_input`)."""
        sg = self.subgraph
        readers: dict[int, int] = {}
        for cs in compiled:
            for t in cs.inputs:
                readers[t] = readers.get(t, 0) + 1
        takers: dict[int, tuple[DelegateKernel, int]] = {}
        for cs in compiled:
            kernel = self.delegate_kernels.get(cs.step.index) if cs.kernel is None else None
            if kernel is None or type(kernel).take_input is DelegateKernel.take_input:
                continue
            for position, t in enumerate(cs.inputs):
                tensor = sg.tensors[t] if t >= 0 else None
                if (
                    tensor is not None
                    and t in sg.inputs
                    and t not in sg.outputs
                    and readers[t] == 1
                    and not tensor.is_variable
                ):
                    takers[t] = (kernel, position)
        return takers

    # -- inputs held by a delegate kernel -----------------------------------------------------

    def hand_over(self, t: int, value: np.ndarray) -> bool:
        """Offer model input ``t``'s new value to the kernel that alone reads it; True when
        it took it (the buffer here is then stale until :meth:`take_back`)."""
        taker = self.takers.get(t)
        if taker is None or t in self.viewed:
            self.handed.pop(t, None)
            return False
        return self.offer(t, value, taker)

    def offer(self, t: int, value: np.ndarray, taker: tuple[DelegateKernel, int]) -> bool:
        """:meth:`hand_over` once ``taker`` is known to be input ``t``'s (see :attr:`direct`)."""
        kernel, position = taker
        try:
            taken = bool(kernel.take_input(position, _read_only(value)))
        except Exception:  # the copy the interpreter makes instead is always right
            taken = False
        if taken:
            self.handed[t] = taker
        else:
            self.handed.pop(t, None)
        return taken

    def take_back(self, t: int) -> None:
        """Bring input ``t``'s value back from the kernel holding it into its buffer here."""
        taker = self.handed.pop(t, None)
        if taker is None:
            return
        kernel, position = taker
        tensor = self.subgraph.tensors[t]
        buf = self.buffers[t]
        try:
            value = np.asarray(kernel.read_input(position))
        except Exception as exc:
            raise DelegateError(
                f"input tensor {t} ({tensor.name!r}) was taken by a delegate kernel "
                f"({type(kernel).__name__}), which could not give it back: "
                f"{type(exc).__name__}: {exc}; set it again"
            ) from exc
        if buf is None or value.shape != buf.shape or value.dtype != buf.dtype:
            raise DelegateError(
                f"input tensor {t} ({tensor.name!r}): the delegate kernel that took it gave "
                f"back {value.dtype}{list(value.shape)}, expected "
                f"{tensor.dtype}{list(self.shapes[t])}; set it again"
            )
        np.copyto(buf, value)

    def take_back_all(self) -> None:
        for t in list(self.handed):
            self.take_back(t)

    def _attach_arena(self, compiled: list[CompiledStep], keep: set[int]) -> None:
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
                # Held by the kernel rather than bound into cs.run with functools.partial:
                # OpKernel.run then passes it on without building keyword arguments twice.
                cs.kernel.expect_outputs([view.shape], out=view)

    def _assign_liveness(self, compiled: list[CompiledStep]) -> set[int]:
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
                held = self.buffers[t.index]
                if held is None or held.shape != self.shapes[t.index]:
                    self.buffers[t.index] = variable_initial_value(t, self.shapes[t.index])
            elif t.is_constant:
                if t.sparsity is None and (t.dtype != np.dtype(object) or t.type_name == "STRING"):
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
                self.buffers[t.index] = variable_initial_value(t, self.shapes[t.index])
        # State a delegate keeps itself (an exported partition's variables inside another
        # runtime) starts over too; a kernel that cannot reset gives its partition back to the
        # CPU, which starts from the variables just reset.
        restored = False
        for index, kernel in list(self.delegate_kernels.items()):
            try:
                kernel.reset_variables()
            except Exception as exc:
                assert self.plan is not None
                partition = self.plan.partitions[index]
                self._restore_to_cpu(
                    partition, f"(nodes {node_ranges(partition.nodes)})", exc, "to reset"
                )
                restored = True
        if self.folded_nodes:
            # Folded state (an LSTM state dequantized from constants) starts over too.
            self.folded.clear()
            self.folded_nodes.clear()
            restored = True
        if restored and self.plan is not None and self.allocated:
            self.allocate()

    # -- running ----------------------------------------------------------------------------

    def invoke(self) -> None:
        if not self.allocated:
            raise InterpreterStateError(
                litert_message(
                    "not_ready",
                    "invoke() called before allocate_tensors(); call allocate_tensors() first "
                    "(and again after resize_tensor_input())",
                )
            )
        pos = 0
        sole = self.sole
        if sole is not None and len(self.handed) == len(sole.inputs) and self.profile is None:
            # A whole model on one engine, its inputs in it already (take_input): the kernel's
            # invoke and the check of its outputs, no more. What _run_from does besides costs
            # ~1% of a model LiteRT runs in 2 ms, caches cold.
            try:
                result = sole.delegate.invoke([None] * len(sole.inputs))  # type: ignore[union-attr,list-item]
                values = self._checked_partition_outputs(sole, result)
            except Exception as exc:
                pos = self._give_back_to_cpu(_PartitionFailed(0, sole, exc))
            else:
                bufs = self.buffers
                for t, value in zip(sole.outputs, values):
                    bufs[t] = value
                return
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
        handed = self.handed
        for pos in range(first, len(compiled)):
            cs = compiled[pos]
            if handed and cs.kernel is None:  # the values its kernel took are in it already
                args = [None if i in handed else bufs[i] for i in cs.inputs]
            else:
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
                elif cs.single:  # OpKernel.run checked it, and gives one output as its array
                    values = [result]
                else:
                    values = result
            except Exception as exc:
                if cs.kernel is None:  # a delegate partition: its own policy
                    raise _PartitionFailed(pos, cs, exc) from exc
                raise  # OpKernel.run named the node
            for t, value in zip(cs.outputs, values):
                if t >= 0:
                    bufs[t] = value
            for t in cs.release:
                bufs[t] = None

    def _checked_partition_outputs(self, cs: CompiledStep, result: Any) -> list[np.ndarray]:
        """A delegate's outputs, held to the tensors' dtypes and inferred shapes (but where
        only the run settles a shape, see _runtime_shaped), as arrays the interpreter owns:
        base ndarrays (an ndarray subclass such as np.matrix reshapes by rules of its own),
        copied into buffers kept per tensor unless the kernel declares ``fresh_outputs``, so
        nothing it writes after returning reaches a later node or the user."""
        # What a kernel returns on every run (a list of base arrays with the dtype objects
        # numpy itself uses) is checked in a few operations: on a model LiteRT runs in 1-2 ms,
        # each operation on this path costs as much as ~0.3% of the run, caches cold.
        expected = cs.expected
        if type(result) is list and len(result) == len(expected):
            for value, (dtype, shape) in zip(result, expected):
                if (
                    type(value) is not np.ndarray
                    or value.dtype is not dtype
                    or value.shape != shape
                ):
                    break
            else:
                return result if cs.fresh else self._owned(cs, result)
        sg = self.subgraph
        if isinstance(result, np.ndarray) or not isinstance(result, Sequence):
            raise DelegateError(
                f"expected a sequence of {len(cs.outputs)} arrays, found {type(result).__name__}"
            )
        if len(result) != len(cs.outputs):
            raise DelegateError(f"expected {len(cs.outputs)} outputs, found {len(result)}")
        runtime_shaped: set[int] | None = None
        values = list(result)
        for k, (t, value) in enumerate(zip(cs.outputs, result)):
            tensor = sg.tensors[t]
            if isinstance(value, np.generic):
                # numpy gives a 0-d result as a scalar (np.float32(9.0)): arithmetic on 0-d
                # arrays does, and so does LiteRT's get_tensor. It is the 0-d array it stands
                # for, and is checked as one below.
                value = values[k] = np.asarray(value)
            if not isinstance(value, np.ndarray):
                raise DelegateError(
                    f"output tensor {t} ({tensor.name!r}): expected a numpy array, found "
                    f"{type(value).__name__}"
                )
            shape = tuple(value.shape)
            if value.dtype == tensor.dtype and shape != tuple(self.shapes[t]):
                if runtime_shaped is None:
                    runtime_shaped = self._runtime_shaped()
                if t in runtime_shaped:
                    # A shape only the run settles (self.shapes holds a placeholder there):
                    # the engine's is taken, as LiteRT resizes such a tensor at invoke and a
                    # CPU kernel returns what it computes; held to the budget as those are.
                    check_tensor_size(tensor, shape, self.max_tensor_bytes)
                    continue
            if value.dtype != tensor.dtype or shape != tuple(self.shapes[t]):
                raise DelegateError(
                    f"output tensor {t} ({tensor.name!r}): expected {tensor.dtype}"
                    f"{list(self.shapes[t])}, found {value.dtype}{list(value.shape)}"
                )
        if runtime_shaped is not None:
            # The next invoke giving the same shapes takes the fast path above.
            cs.expected = tuple(
                (sg.tensors[t].dtype, tuple(v.shape)) for t, v in zip(cs.outputs, values)
            )
        if cs.fresh:
            return [v if type(v) is np.ndarray else np.asarray(v) for v in values]
        return self._owned(cs, values)

    def _runtime_shaped(self) -> set[int]:
        """The tensors whose shapes are unknown until invoke at the current input shapes
        (:func:`~offload._shape_pass.propagate_shapes`' ``unknown``: outputs of ops whose
        shapes depend on values or that have no shape rule, and all computed from them).

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
        start: list[Shape] = [t.shape for t in sg.tensors]
        for i, shape in zip(sg.inputs, key):
            start[i] = shape
        unknown = propagate_shapes(sg, start, self._constant_of, None).unknown
        self._unknown_at = (key, unknown)
        return unknown

    def _owned(self, cs: CompiledStep, result: Sequence[np.ndarray]) -> list[np.ndarray]:
        """``result`` copied into the buffers kept for the partition's outputs."""
        owned = []
        for t, value in zip(cs.outputs, result):
            held = self.partition_outputs.get(t)
            if held is None or held.shape != value.shape or held.dtype != value.dtype:
                held = self.partition_outputs[t] = np.empty(value.shape, value.dtype)
            np.copyto(held, value)
            owned.append(held)
        return owned

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
            f"(nodes {node_ranges(partition.nodes)}): {type(exc).__name__}: {exc}"
        )
        if not self.allow_cpu_fallback:
            raise DelegateError(message) from exc
        self.take_back_all()  # the CPU reads the inputs the kernel held from here on
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


def _warn_partition_cost(plan: Plan, source: str) -> None:
    """One PartitionCostWarning for a fragmented plan: figures, splitting ops, the command."""
    why = fragmentation(plan)
    if why is None:
        return
    model = source if source and not source.startswith("<") else "MODEL"
    flags = " ".join(f"--delegate {name.split('#')[0]}" for name in plan.delegates)
    warnings.warn(
        PartitionCostWarning(
            f"the plan for {', '.join(plan.delegates)} is fragmented: {why}. The ops that "
            f"split it: {splitting_ops(plan)}. It may run slower than the CPU alone; see the "
            f"plan with: offload check {shlex.quote(model)} {flags} (or let "
            'delegates="auto" measure the alternatives)'
        ),
        stacklevel=5,
    )


class _PartitionFailed(Exception):
    """A delegate partition raised or returned bad outputs during invoke (internal signal)."""

    def __init__(self, position: int, step: CompiledStep, error: Exception) -> None:
        super().__init__(str(error))
        self.position = position
        self.step = step
        self.error = error


def _read_only(array: np.ndarray) -> np.ndarray:
    """``array`` as a view that cannot be made writable again: numpy lets anyone set
    ``flags.writeable`` back on a plain view of a writable array, but not on one made over a
    read-only buffer (about 1 us either way)."""
    return np.asarray(memoryview(array).toreadonly())  # type: ignore[arg-type]  # numpy stubs lack Buffer


def _partition_runner(kernel: DelegateKernel, variable: Sequence[bool]) -> Callable[..., Any]:
    """The step that invokes ``kernel``, its inputs handed over as read-only views (but its
    state): a delegate that writes into one fails, instead of changing the user's input tensor
    or another node's result behind the interpreter's back."""

    def run(*inputs: np.ndarray | None) -> Sequence[np.ndarray]:
        views = [
            array if writable or array is None else _read_only(array)
            for array, writable in zip(inputs, variable)
        ]
        # None only where the kernel took the value (take_input), which it then expects.
        return kernel.invoke(cast(list[np.ndarray], views))

    return run
