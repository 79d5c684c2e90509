"""Model inputs handed to a delegate kernel: set_tensor's value goes straight into its engine.

A delegate kernel that takes inputs (:meth:`DelegateKernel.take_input`) is offered the new
value of each model input that its partition alone reads, once: one copy instead of two. The
interpreter's buffer for an input the kernel took is stale until :meth:`take_back` reads the
value back (``get_tensor``, a view, a new ``allocate_tensors``, a partition given back to the
CPU). An input a view of whose buffer is out is never handed over again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from offload._delegate import DelegateKernel
from offload._steps import CompiledStep, read_only
from offload.errors import DelegateError

if TYPE_CHECKING:
    from offload._graph import Subgraph
    from offload.ops._base import Shape

__all__ = ["InputHandOver"]

Taker = tuple[DelegateKernel, int]


class InputHandOver:
    """The executor's inputs held by delegate kernels. A part of :class:`offload._executor.
    Executor` (a base class of it) rather than an object of its own: set_tensor calls
    :meth:`offer` or :meth:`hand_over` before every invoke, where each call and attribute
    lookup costs."""

    if TYPE_CHECKING:  # the executor's, read here
        subgraph: Subgraph
        shapes: list[Shape]
        buffers: list[np.ndarray | None]
        delegate_kernels: dict[int, DelegateKernel]

    def __init__(self) -> None:
        super().__init__()
        # Model inputs a delegate kernel can take straight from set_tensor (DelegateKernel.
        # take_input): tensor -> (kernel, input position), from the latest allocate; those it
        # holds now, whose buffer here is stale until taken back; and those never to hand over
        # again, since a view of their buffer is out.
        self.takers: dict[int, Taker] = {}
        self.handed: dict[int, Taker] = {}
        self.viewed: set[int] = set()
        # The takers' tensors with the dtype and shape a value must have to be offered as it
        # is, and the taker (none with a view out).
        self.direct: dict[int, tuple[np.dtype, tuple[int, ...], Taker]] = {}

    def _find_takers(self, compiled: list[CompiledStep]) -> None:
        """Note the model inputs that one delegate partition alone reads, once, and whose
        kernel takes inputs (:meth:`DelegateKernel.take_input`)."""
        sg = self.subgraph
        readers: dict[int, int] = {}
        for cs in compiled:
            for t in cs.inputs:
                readers[t] = readers.get(t, 0) + 1
        takers: dict[int, Taker] = {}
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
        self.takers = takers
        self.direct = {
            t: (sg.tensors[t].dtype, tuple(self.shapes[t]), taker)
            for t, taker in takers.items()
            if t not in self.viewed
        }

    def hand_over(self, t: int, value: np.ndarray) -> bool:
        """Offer model input ``t``'s new value to the kernel that alone reads it; True when
        it took it (the buffer here is then stale until :meth:`take_back`)."""
        taker = self.takers.get(t)
        if taker is None or t in self.viewed:
            self.handed.pop(t, None)
            return False
        return self.offer(t, value, taker)

    def offer(self, t: int, value: np.ndarray, taker: Taker) -> bool:
        """:meth:`hand_over` once ``taker`` is known to be input ``t``'s (see :attr:`direct`)."""
        kernel, position = taker
        try:
            taken = bool(kernel.take_input(position, read_only(value)))
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
