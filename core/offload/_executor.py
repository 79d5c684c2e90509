"""The executor: plans one subgraph, allocates it and runs its flat step list.

``allocate`` does the work LiteRT's ``AllocateTensors`` does: it computes shapes (see
:mod:`offload._shape_pass`), partitions, builds CPU kernels, pre-transforms weights, folds
constants (:mod:`offload._fold`), initialises delegate partitions, allocates input buffers,
the liveness table and the arena of intermediates (:mod:`offload._memory_layout`), and
compiles the plan into steps (:mod:`offload._steps`). ``invoke`` only runs the steps.

Three parts are base classes of the executor, each with the state it keeps: the shapes it
holds (:class:`offload._shape_pass.HeldShapes`), the model inputs handed to delegate kernels
(:mod:`offload._hand_over`, which set_tensor calls before every invoke), and the check of
what delegate partitions return with the recovery of one that fails (:mod:`offload._recovery`,
which invoke calls).
"""

from __future__ import annotations

import shlex
import threading
import time
import warnings
from collections.abc import Sequence

import numpy as np

from offload._delegate import Delegate, DelegateKernel
from offload._fold import fold_constants, fold_state, state_tensors
from offload._graph import Model, Subgraph
from offload._hand_over import InputHandOver
from offload._litert_compat import litert_message
from offload._memory_layout import allocate_buffers, assign_liveness, attach_arena
from offload._partition import node_ranges
from offload._plan import Plan, Step, make_plan
from offload._plan_cost import fragmentation, splitting_ops
from offload._plan_report import fallback_rows
from offload._recovery import PartitionFailed, PartitionRecovery
from offload._report_text import fallback_lines
from offload._shape_pass import DEFAULT_MAX_TENSOR_BYTES, HeldShapes, budgeted
from offload._steps import CompiledStep
from offload._steps import partition_runner as _partition_runner  # a benchmark patches it here
from offload._tensor_details import variable_initial_value
from offload.errors import (
    CpuFallbackError,
    InterpreterStateError,
    OffloadError,
    OpExecutionError,
    PartitionCostWarning,
)
from offload.ops import kernel_class
from offload.ops._base import OpKernel

__all__ = ["CompiledStep", "Executor"]


class Executor(HeldShapes, InputHandOver, PartitionRecovery):
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
        super().__init__()
        self.model = model
        self.subgraph = subgraph
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
        # Outputs of nodes run once at allocate (see offload._fold.fold_state), by tensor index.
        self.folded: dict[int, np.ndarray] = {}
        self.folded_nodes: set[int] = set()
        self.delegate_kernels: dict[int, DelegateKernel] = {}
        self.allocated = False
        self.profile: dict[int, list[float]] | None = None
        self.arena: np.ndarray | None = None  # the block behind every arena slot
        # Set by the Interpreter when the program named the delegates: a fragmented plan then
        # gets one PartitionCostWarning (auto and the default reject such plans instead).
        self.warn_partition_cost = False
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
            raise CpuFallbackError(
                f"allow_cpu_fallback=False, but {len(fallback)} node(s) were taken by no "
                f"delegate ({', '.join(plan.delegates)}):\n"
                + "\n".join(fallback_lines(fallback_rows(plan)))
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
        return state_tensors(self.subgraph, nodes)

    # -- folding (offload._fold) -------------------------------------------------------------

    def _fold_static(self) -> None:
        """Fold DEQUANTIZE / DENSIFY of constants into constants of ``self.subgraph``, once,
        after the declared shapes are corrected (and held to the memory budget) and before
        planning: the planner, the CPU kernels and every delegate then see plain constants."""
        if self.static_folded is not None:
            return
        folding = fold_constants(self.subgraph, self.max_tensor_bytes)
        self.subgraph = folding.subgraph
        self.static_folded = folding.nodes

    # -- allocating -------------------------------------------------------------------------

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
        allocate_buffers(sg, self.shapes, self.buffers)
        fold_state(
            sg, plan.state_init, self._cpu_kernel, self.buffers, self.folded, self.folded_nodes
        )
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
        keep = assign_liveness(compiled, sg, self.folded, self.preserve_all_tensors)
        self.arena = None  # the old block may go before the new one is allocated
        self.arena = attach_arena(
            compiled, sg, self.shapes, self.value_shaped, keep, self.preserve_all_tensors
        )
        self.compiled = compiled
        self._find_takers(compiled)
        only = compiled[0] if len(compiled) == 1 else None
        self.sole = only if only is not None and only.delegate is not None else None
        self.allocated = True

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
                pos = self._give_back_to_cpu(PartitionFailed(0, sole, exc))
            else:
                bufs = self.buffers
                for t, value in zip(sole.outputs, values):
                    bufs[t] = value
                return
        while pos < len(self.compiled):
            try:
                self._run_from(pos)
                return
            except PartitionFailed as failure:
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
                    raise PartitionFailed(pos, cs, exc) from exc
                raise  # OpKernel.run named the node
            for t, value in zip(cs.outputs, values):
                if t >= 0:
                    bufs[t] = value
            for t in cs.release:
                bufs[t] = None


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
