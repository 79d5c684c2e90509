"""The executor's compiled steps: what ``invoke`` runs, in order.

``allocate_tensors`` compiles the plan into a flat list of :class:`CompiledStep`: a CPU
node's kernel, or a delegate partition's kernel behind :func:`partition_runner`, which hands
it read-only views of every input but its state. ``invoke`` calls each step's ``run`` on its
input buffers, stores what it returns, and releases the intermediates it read last.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

import numpy as np

from offload._delegate import DelegateKernel
from offload._plan import Step

__all__ = ["CompiledStep", "partition_runner", "read_only"]


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


def read_only(array: np.ndarray) -> np.ndarray:
    """``array`` as a view that cannot be made writable again: numpy lets anyone set
    ``flags.writeable`` back on a plain view of a writable array, but not on one made over a
    read-only buffer (about 1 us either way)."""
    return np.asarray(memoryview(array).toreadonly())  # type: ignore[arg-type]  # numpy stubs lack Buffer


def partition_runner(kernel: DelegateKernel, variable: Sequence[bool]) -> Callable[..., Any]:
    """The step that invokes ``kernel``, its inputs handed over as read-only views (but its
    state): a delegate that writes into one fails, instead of changing the user's input tensor
    or another node's result behind the interpreter's back."""

    def run(*inputs: np.ndarray | None) -> Sequence[np.ndarray]:
        views = [
            array if writable or array is None else read_only(array)
            for array, writable in zip(inputs, variable)
        ]
        # None only where the kernel took the value (take_input), which it then expects.
        return kernel.invoke(cast(list[np.ndarray], views))

    return run
