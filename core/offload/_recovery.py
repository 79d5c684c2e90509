"""Delegate partitions held to account: their outputs checked, and a failing one given back.

A delegate partition's kernel is third-party code. What it returns at invoke is held to the
tensors' dtypes and shapes and copied into arrays the interpreter owns; a kernel that fails
to initialise, to prepare, to reset or to run (or returns what the model does not allow) has
its partition given back to the CPU with one warning, or a DelegateError where the program
said ``allow_cpu_fallback=False``. A partition that fails in invoke goes on from its first
CPU step in the same invoke: the steps before it are not run again.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from offload._delegate import Delegate, DelegateKernel
from offload._partition import Partition, node_ranges
from offload._shape_pass import check_tensor_size
from offload._steps import CompiledStep
from offload.errors import DelegateError

if TYPE_CHECKING:
    from offload._graph import Subgraph
    from offload._plan import Plan
    from offload.ops._base import Shape

__all__ = ["PartitionFailed", "PartitionRecovery"]


class PartitionFailed(Exception):
    """A delegate partition raised or returned bad outputs during invoke (internal signal)."""

    def __init__(self, position: int, step: CompiledStep, error: Exception) -> None:
        super().__init__(str(error))
        self.position = position
        self.step = step
        self.error = error


class PartitionRecovery:
    """The executor's delegate partitions: set up, checked, and given back to the CPU. A part
    of :class:`offload._executor.Executor` (a base class of it) rather than an object of its
    own: invoke checks every partition's outputs, where each call and attribute lookup costs.
    """

    if TYPE_CHECKING:  # the executor's, read here
        subgraph: Subgraph
        shapes: list[Shape]
        plan: Plan | None
        compiled: list[CompiledStep]
        delegates: list[Delegate]
        delegate_kernels: dict[int, DelegateKernel]
        allow_cpu_fallback: bool
        max_tensor_bytes: int | None

        def allocate(self) -> None: ...
        def take_back_all(self) -> None: ...
        def _runtime_shaped(self) -> set[int]: ...

    def __init__(self) -> None:
        super().__init__()
        # Partitions given back to the CPU, with why, by partition index.
        self.restored: dict[int, str] = {}
        # Delegate outputs copied into arrays the interpreter owns, per tensor, kept across
        # invokes (see _checked_partition_outputs).
        self.partition_outputs: dict[int, np.ndarray] = {}

    def _init_partition(self, partition: Partition) -> DelegateKernel | None:
        assert self.plan is not None
        delegate = self.delegates[self.plan.delegates.index(partition.delegate)]
        try:
            kernel = delegate.create_kernel()
            kernel.init(self.subgraph, partition)
            kernel.prepare([self.shapes[t] for t in partition.inputs])
        except Exception as exc:
            self._restore_to_cpu(partition, f"({len(partition.nodes)} nodes)", exc)
            return None
        return kernel

    def _reprepare(self, partition: Partition, kernel: DelegateKernel) -> DelegateKernel | None:
        """Prepare an initialised partition for new shapes; on failure, hand it to the CPU."""
        try:
            kernel.prepare([self.shapes[t] for t in partition.inputs])
        except Exception as exc:
            self._restore_to_cpu(partition, "for new shapes", exc)
            return None
        return kernel

    def _restore_to_cpu(
        self,
        partition: Partition,
        context: str,
        exc: Exception,
        failed: str = "to prepare",
        mid_invoke: bool = False,
    ) -> None:
        """Give a partition whose delegate failed back to the CPU, with one warning."""
        message = (
            f"delegate {partition.delegate!r} failed {failed} partition {partition.index} "
            f"{context}: {type(exc).__name__}: {exc}"
        )
        if not self.allow_cpu_fallback:
            raise DelegateError(message) from exc
        if mid_invoke:
            self.take_back_all()  # the CPU reads the inputs the kernel held from here on
            then = "for the rest of this interpreter's life"
        else:
            then = "instead"
        warnings.warn(f"{message}; running that partition on the CPU {then}", stacklevel=5)
        self.restored[partition.index] = message
        self.delegate_kernels.pop(partition.index, None)

    def _give_back_to_cpu(self, failure: PartitionFailed) -> int:
        """Run a partition whose delegate failed in invoke on the CPU from now on.

        Returns where this invoke goes on: the first CPU step of that partition. The steps
        before it have run and are not repeated (stateful ops must not step twice), and the
        partition's inputs are still held, since they are released only after it runs.
        """
        assert self.plan is not None
        partition = self.plan.partitions[failure.step.step.index]
        context = f"(nodes {node_ranges(partition.nodes)})"
        self._restore_to_cpu(partition, context, failure.error, "in invoke on", mid_invoke=True)
        self.allocate()
        members = set(partition.nodes)
        for pos, cs in enumerate(self.compiled):
            if cs.step.kind == "cpu" and cs.step.index in members:
                return pos
        raise AssertionError("a restored partition has no CPU steps; this is a bug in offload")

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
