"""One loaded model and what runs it: the delegate selection, the plan, one executor per
subgraph that runs, and the reports.

``Interpreter`` (LiteRT 1.x's API) and ``CompiledModel`` (LiteRT 2.x's) are adapters over a
Session: each builds one with complete settings (:class:`~offload._auto.AutoSettings`, never
changed afterwards) and speaks its own API over it, through the Session's public methods
only. The choice among delegates is made on first use (:meth:`Session.resolve`), when the
input shapes are known, and every subgraph runs the delegates chosen for the main one.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from offload._delegate import Delegate, DelegateKernel
from offload._executor import Executor
from offload._graph import Model
from offload._introspect import (
    array_root,
    delegate_profiles,
    held_bytes,
    reported_bytes,
    reported_stats,
    set_profiling,
)
from offload._litert_compat import OpResolverType
from offload._plan import Plan
from offload._roofline import plan_work
from offload._selection import DelegateSelection
from offload._settings import AutoSettings
from offload.errors import InterpreterStateError

__all__ = ["Session"]


class Session:
    """A model, its delegates (named, auto or the default) and the executors that run it.

    ``settings`` is complete when the Session is built: the auto choice, the executors' CPU
    fallback, preserved tensors and tensor budget all read it.
    """

    def __init__(
        self,
        model: Model,
        model_path: str | os.PathLike[str] | None,
        settings: AutoSettings,
        *,
        delegates: str | Sequence[str | Delegate] | None = None,
        experimental_delegates: Sequence[Delegate] | None = None,
        resolver: Any = OpResolverType.AUTO,
        profile: bool = False,
    ) -> None:
        self.model = model
        self.settings = settings
        self.selection = DelegateSelection(
            model, model_path, delegates, experimental_delegates, resolver, settings
        )
        self.executor = self._executor_of(0, list(self.selection.delegates))
        # A plan of many small partitions is warned about only when the program named the
        # delegates: auto and the default reject such plans instead.
        self.executor.warn_partition_cost = self.selection.mode == "explicit"
        if profile:
            self.executor.profile = {}
        self._subgraphs: dict[int, Executor] = {}

    def _executor_of(self, subgraph_index: int, delegates: list[Delegate]) -> Executor:
        s = self.settings
        return Executor(
            self.model,
            self.model.subgraphs[subgraph_index],
            delegates,
            s.allow_cpu_fallback,
            s.preserve_all_tensors,
            s.max_tensor_bytes,
        )

    # -- the choice and the executors -------------------------------------------------------

    def resolve(self) -> None:
        """Make the auto or default choice if it is still to be made; the main executor is
        the winner's from then on (prepared, when auto measured it)."""
        if self.selection.pending:
            self.executor = self.selection.resolve(self.executor)

    @property
    def delegates(self) -> list[Delegate]:
        """The delegates in priority order (the choice is made on first use)."""
        self.resolve()
        return list(self.selection.delegates)

    def executor_for(self, subgraph_index: int) -> Executor:
        """The executor of a subgraph: the main one for 0; for another, one made on first use
        with the delegates chosen for the main subgraph (the choice is made first)."""
        self.resolve()
        if subgraph_index == 0:
            return self.executor
        executor = self._subgraphs.get(subgraph_index)
        if executor is None:
            executor = self._executor_of(subgraph_index, list(self.selection.delegates))
            self._subgraphs[subgraph_index] = executor
        return executor

    def made_executor(self, subgraph_index: int) -> Executor | None:
        """The executor of a subgraph if one was made (the main one always), else None."""
        if subgraph_index == 0:
            return self.executor
        return self._subgraphs.get(subgraph_index)

    def plan(self) -> Plan:
        """The main subgraph's partition plan (computed on first use, or at allocation)."""
        self.resolve()
        return self.executor.planned()

    # -- reports ------------------------------------------------------------------------------

    def delegation_report(self) -> dict[str, Any]:
        """Per delegate: nodes, partitions, boundary tensors, bytes copied; fallback reasons;
        ``"default"`` (which delegates applied and why), ``"auto"`` (the choice's figures) and
        ``"work"`` (FLOPs and bytes per invoke, per partition and CPU; no timing)."""
        plan = self.plan()
        report = plan.to_dict()
        report["restored_to_cpu"] = {str(k): v for k, v in self.executor.restored.items()}
        report["shape_corrections"] = self.executor.shape_corrections or []
        report["model_type_reason"] = self.model.model_type_reason
        report["default"] = self.selection.describe()
        if self.selection.summary is not None:
            report["auto"] = self.selection.summary
        report["work"] = plan_work(plan, self.executor.shapes, self.executor.restored)
        return report

    def profile_report(self) -> list[dict[str, Any]]:
        """Per op (CPU) or partition (delegate): calls and total / mean milliseconds."""
        ex = self.executor
        if ex.profile is None:
            raise InterpreterStateError("create the Interpreter with profile=True to profile")
        rows: dict[str, dict[str, Any]] = {}
        for pos, times in ex.profile.items():
            cs = ex.compiled[pos]
            key = self.model.main.nodes[cs.step.index].op if cs.step.kind == "cpu" else cs.label
            row = rows.setdefault(key, {"name": key, "steps": 0, "calls": 0, "total_ms": 0.0})
            row["steps"] += 1
            row["calls"] += len(times)
            row["total_ms"] += 1000 * sum(times)
        return sorted(rows.values(), key=lambda r: -r["total_ms"])

    def memory_report(self) -> dict[str, int]:
        """Bytes the main subgraph holds now, by kind (``Interpreter.memory_report``)."""
        ex = self.executor
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
        on_cpu = set(ex.cpu_kernels)
        scratch = max(
            ((bytes_, n) for n, bytes_ in ex.scratch.items() if n in on_cpu), default=(0, -1)
        )
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
            "cpu_kernel_scratch": scratch[0],
            "cpu_kernel_scratch_node": scratch[1],
        }

    def delegate_kernels(self) -> dict[int, DelegateKernel]:
        """The delegate kernels running partitions now, by partition index."""
        return dict(self.executor.delegate_kernels)

    def delegate_kernel_stats(self) -> list[dict[str, Any]]:
        """Per delegate partition running now: delegate, nodes, reported memory and stats."""
        rows = []
        for index, kernel in sorted(self.executor.delegate_kernels.items()):
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

    def set_delegate_profiling(self, enabled: bool) -> list[int]:
        """Start or stop device profiles; the partitions whose kernel measures now."""
        ex = self.executor
        if not ex.allocated and not ex.delegate_kernels:
            raise InterpreterStateError(
                "set_delegate_profiling() needs the delegate kernels: call allocate_tensors() first"
            )
        return [i for i, k in sorted(ex.delegate_kernels.items()) if set_profiling(k, enabled)]

    def delegate_profile(self) -> list[dict[str, Any]]:
        """Per delegate: device time per kernel family, per invoke, since profiling started."""
        delegate_of = {p.index: p.delegate for p in self.plan().partitions}
        return delegate_profiles(self.executor.delegate_kernels, delegate_of)
