"""The contract every CPU reference kernel follows.

A kernel is built once per node when the interpreter plans execution (``allocate_tensors``):
``setup`` reads options and pre-transforms constant inputs; ``run`` then does only the
arithmetic on every invoke. The interpreter wraps any failure with the node's description.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar

import numpy as np

if TYPE_CHECKING:
    from offload._graph import Node, Subgraph, Tensor

__all__ = ["OpKernel", "KernelResult"]

KernelResult = np.ndarray | Sequence[np.ndarray]


class OpKernel:
    """Base class of the CPU reference kernels: one subclass per builtin op.

    Class attributes:
        op: the TFLite builtin name (``"CONV_2D"``).
        max_version: the highest op version whose semantics this kernel implements.

    Attributes available in ``setup`` and ``run``:
        node: the :class:`~offload._graph.Node` being executed.
        subgraph: the subgraph it belongs to.
        inputs / outputs: the node's :class:`~offload._graph.Tensor` objects (None for an
            omitted optional input), with dtype, shape and quantization.
    """

    op: ClassVar[str] = ""
    max_version: ClassVar[int] = 1
    # True when ``run`` accepts ``out=``: a preallocated array (an arena slot) of the output
    # tensor's planned shape and dtype. The kernel then returns ``out`` filled, or a fresh
    # array when ``out`` does not fit the actual result; never a view of an input. May be
    # set per instance in ``setup`` (a kernel whose quantized path cannot write in place).
    writes_into: bool = False

    def __init__(
        self, node: Node, subgraph: Subgraph, folded: Mapping[int, np.ndarray] | None = None
    ) -> None:
        self.node = node
        self._folded = folded if folded is not None else {}
        self.subgraph = subgraph
        tensors = subgraph.tensors
        self.inputs: list[Tensor | None] = [tensors[i] if i >= 0 else None for i in node.inputs]
        self.outputs: list[Tensor] = [tensors[i] for i in node.outputs]
        self.options = node.options
        self.setup()

    def constant(self, position: int) -> np.ndarray | None:
        """The value of input ``position`` if it is constant, else None.

        Constant means a constant tensor of the model, or the output of a node the interpreter
        folded at planning time (DEQUANTIZE / DENSIFY of a constant, as LiteRT runs them once).
        """
        if position >= len(self.inputs):
            return None
        tensor = self.inputs[position]
        if tensor is not None and tensor.index in self._folded:
            return self._folded[tensor.index]
        if tensor is None or not tensor.is_constant or tensor.sparsity is not None:
            return None
        return tensor.constant_value()

    def setup(self) -> None:
        """Read options and pre-transform constant inputs. Called once, at planning time."""

    @staticmethod
    def fits(out: np.ndarray | None, shape: tuple[int, ...], dtype: np.dtype) -> bool:
        """Whether an ``out`` array given to a ``writes_into`` kernel can hold the result."""
        return out is not None and out.shape == tuple(shape) and out.dtype == dtype

    def run(self, *inputs: np.ndarray | None) -> KernelResult:
        """Compute the node's outputs from its input arrays (None for omitted inputs).

        Return one array for a single-output op, or a sequence with one array per output,
        with the output tensors' dtypes. Inputs of variable tensors (LSTM state) are the
        interpreter's persistent buffers: stateful kernels update them in place.
        """
        raise NotImplementedError(f"{type(self).__name__} needs run()")
