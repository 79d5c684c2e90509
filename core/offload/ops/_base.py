"""The contract every CPU reference kernel follows.

A kernel is built once per node when the interpreter plans execution (``allocate_tensors``):
``setup`` reads options and pre-transforms constant inputs; ``_run`` then does only the
arithmetic on every invoke. ``run``, which callers use, wraps ``_run`` as onnx's
``OpRun.run`` wraps its ``_run``: it holds each output to the type and shape of the tensor it
writes and names the node in any failure, once, for every kernel.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, TypeGuard, TypeVar

import numpy as np

from offload._deprecation import deprecation, warn_deprecated
from offload.errors import OffloadError, OpExecutionError

if TYPE_CHECKING:
    from offload._graph import Node, Subgraph, Tensor
    from offload.ops._types import OpTypes

__all__ = ["OpKernel", "KernelResult", "Shape", "ShapeContext", "check_shape", "present"]

KernelResult = np.ndarray | Sequence[np.ndarray]
Shape = tuple[int, ...]
_T = TypeVar("_T")

_RUN_OVERRIDE = deprecation(
    "OpKernel-run-override",
    old="an OpKernel subclass overriding run()",
    new="_run(), which OpKernel.run() calls, checking its outputs and naming the node in errors",
    since="0.2.0",
    removal="0.3.0",
)


def check_shape(condition: bool, message: str) -> None:
    """Raise the error shape rules raise: a ValueError saying what was expected and found."""
    if not condition:
        raise ValueError(message)


def present(value: _T | None, what: str, where: str = "") -> _T:
    """``value``, which the caller cannot do without: an omitted input, or a tensor's missing
    quantization, is a malformed model (model files are untrusted), so None raises
    OpExecutionError saying ``what`` was expected, prefixed by ``where`` (the node's
    description; :meth:`OpKernel.required` passes it)."""
    if value is None:
        raise OpExecutionError(f"{where}: " * bool(where) + f"expected {what}, found none")
    return value


class ShapeContext:
    """What a shape rule sees of a node before any kernel is built: the input shapes the
    interpreter has inferred so far, the node's options, and the values of constant inputs;
    for :meth:`OpKernel.scratch_bytes`, also the input tensors' types and quantization."""

    __slots__ = ("node", "shapes", "_constant", "_tensors")

    def __init__(
        self,
        node: Node,
        shapes: Sequence[Shape | None],
        constant: Callable[[int], np.ndarray | None],
        tensors: Sequence[Tensor] | None = None,
    ) -> None:
        self.node = node
        self.shapes = tuple(shapes)
        self._constant = constant
        self._tensors = tensors

    def tensor(self, position: int) -> Tensor | None:
        """Input ``position``'s tensor, for its type and quantization (its shape is
        :meth:`shape`'s), where the caller gave the subgraph's tensors; else None, and a
        scratch rule assumes the widest types the op takes."""
        if self._tensors is None or not self.has(position):
            return None
        index = self.node.inputs[position]
        return self._tensors[index] if 0 <= index < len(self._tensors) else None

    @property
    def options(self) -> Any:
        return self.node.options

    def shape(self, position: int) -> Shape:
        """The shape of input ``position``; an omitted or missing required input is an error."""
        check_shape(
            position < len(self.shapes) and self.shapes[position] is not None,
            f"expected input {position} to be present, found "
            + (f"{len(self.shapes)} inputs" if position >= len(self.shapes) else "it omitted"),
        )
        shape = self.shapes[position]
        assert shape is not None
        return shape

    def has(self, position: int) -> bool:
        return position < len(self.shapes) and self.shapes[position] is not None

    def constant(self, position: int) -> np.ndarray | None:
        """The value of input ``position`` when it is known before invoke, else None."""
        if not self.has(position):
            return None
        return self._constant(position)


class OpKernel:
    """Base class of the CPU reference kernels: one subclass per builtin op.

    Class attributes:
        op: the TFLite builtin name (``"CONV_2D"``).
        max_version: the highest op version whose semantics this kernel implements.
        types: the tensor types the op accepts, as LiteRT's kernel checks them in Prepare.

    A kernel implements ``setup`` (optional) and ``_run``; callers call ``run``.

    Attributes available in ``setup`` and ``_run``:
        node: the :class:`~offload._graph.Node` being executed.
        subgraph: the subgraph it belongs to.
        inputs / outputs: the node's :class:`~offload._graph.Tensor` objects (None for an
            omitted optional input), with dtype, shape and quantization.
    """

    op: ClassVar[str] = ""
    max_version: ClassVar[int] = 1
    # The tensor types the op accepts (offload.ops._types), checked for every node of a model
    # at allocate_tensors; None for an op that declares none.
    types: ClassVar[OpTypes | None] = None
    # True when ``_run`` accepts ``out=``: a preallocated array (an arena slot) of the output
    # tensor's planned shape and dtype. The kernel then returns ``out`` filled, or a fresh
    # array when ``out`` does not fit the actual result; never a view of an input. May be
    # set per instance in ``setup`` (a kernel whose quantized path cannot write in place).
    writes_into: bool = False
    # What run holds the outputs to (see expect_outputs): per output, (dtype, shape or None),
    # or None for an omitted one; the single output's dtype and shape, or None; its array.
    _held: tuple[tuple[np.dtype, Shape | None] | None, ...]
    _held_dtype: np.dtype | None
    _held_shape: Shape | None
    _held_out: np.ndarray | None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "run" in vars(cls):
            # A kernel written when kernels overrode run(): its run becomes the computing
            # method, so its outputs are checked and its errors named like every other's.
            warn_deprecated(_RUN_OVERRIDE, f"{cls.__module__}.{cls.__qualname__} overrides it")
            cls._run = vars(cls)["run"]  # type: ignore[method-assign]
            cls.run = OpKernel.run  # type: ignore[method-assign]

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
        self.expect_outputs([None] * len(self.outputs))
        try:
            self.setup()
        except OffloadError:
            raise  # typed where it was raised, the node named already
        except Exception as exc:
            inputs = ", ".join(
                "omitted" if t is None else f"{t.dtype}{list(t.shape)}" for t in self.inputs
            )
            raise OpExecutionError(
                f"{node.describe()} could not be set up: {type(exc).__name__}: {exc} "
                f"(inputs: {inputs})"
            ) from exc

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

    def input_tensor(self, position: int) -> Tensor:
        """Input ``position``, which this op requires: OpExecutionError naming the node when the
        model omits it (LiteRT's kernels fail to prepare such a node)."""
        tensor = self.inputs[position] if 0 <= position < len(self.inputs) else None
        if tensor is None:
            found = f"{len(self.inputs)} inputs" if position >= len(self.inputs) else "it omitted"
            raise OpExecutionError(
                f"{self.node.describe()}: expected input {position} to be present, found {found}"
            )
        return tensor

    def required(self, value: _T | None, what: str) -> _T:
        """``value`` (an input array, a tensor's quantization), which the kernel needs:
        OpExecutionError naming the node and saying ``what`` was expected when it is None."""
        return value if value is not None else present(value, what, self.node.describe())

    @classmethod
    def output_shapes(cls, ctx: ShapeContext) -> Sequence[Shape | None] | None:
        """The node's output shapes computed from its input shapes, options and constants.

        Called by ``allocate_tensors`` for every node, in order, before any kernel or
        delegate is set up: the interpreter checks the result against the shapes the model
        declares (a model file is untrusted) and sizes buffers from it. Return one shape per
        output, None for an output whose shape depends on values known only at invoke (a
        non-constant RESHAPE shape), or None overall for an op without a rule (its declared
        shapes are then used as they are). Raise ValueError (see :func:`check_shape`) when
        the inputs cannot be valid for this op, saying what was expected and found.
        """
        return None

    @classmethod
    def scratch_bytes(cls, ctx: ShapeContext, outputs: Sequence[Shape]) -> int:
        """Bytes of the arrays the kernel makes beyond its tensors, at their peak: what
        ``setup`` prepares and keeps (weights in a compute layout, padded-input buffers,
        tiled constants) plus the temporaries of ``run`` (an im2col patch matrix, a product
        before requantization), from the node's shapes, types and constants alone, before
        the kernel is built. ``allocate_tensors`` holds each node's scratch to
        ``max_tensor_bytes`` as it holds tensors, so a kernel must not make more than it
        declares here (or must work in pieces of a fixed size), and ``memory_report()``
        shows the largest. 0 (the default) for kernels whose arrays are at most the size of
        a tensor of the node.
        """
        return 0

    @classmethod
    def state_inputs(cls, options: Any) -> tuple[int, ...]:
        """Input positions whose arrays ``run`` updates in place: a recurrent cell's state.

        The interpreter keeps such inputs in persistent, writable buffers, and never folds
        them into constants even when they start from one (an LSTM state dequantized from
        float16 zeros carries over between invokes and restarts at reset_all_variables).
        """
        return ()

    def setup(self) -> None:
        """Read options and pre-transform constant inputs. Called once, at planning time."""

    @staticmethod
    def fits(
        out: np.ndarray | None, shape: tuple[int, ...], dtype: np.dtype | type
    ) -> TypeGuard[np.ndarray]:
        """Whether an ``out`` array given to a ``writes_into`` kernel can hold the result."""
        return out is not None and out.shape == tuple(shape) and out.dtype == dtype

    def expect_outputs(self, shapes: Sequence[Shape | None], out: np.ndarray | None = None) -> None:
        """Hold :meth:`run`'s outputs to ``shapes`` from now on, one per output (None: a shape
        only the run settles), as the caller holds the output tensors at the current input
        shapes; the interpreter says so at every ``allocate_tensors``. Each output's type is
        held to its tensor's whatever the shapes; until this is called, the shapes are not.

        ``out``: for a ``writes_into`` kernel, an array of its single output's held shape and
        type (an arena slot) that ``run`` has ``_run`` write into when the call passes no
        ``out=`` of its own; None, the kernel makes its outputs.
        """
        self._held = tuple(
            None if t < 0 else (tensor.dtype, None if shape is None else tuple(shape))
            for t, tensor, shape in zip(self.node.outputs, self.outputs, shapes, strict=True)
        )
        # None (no array's dtype is None) sends every result to run's slow path.
        only = self._held[0] if len(self._held) == 1 else None
        self._held_dtype, self._held_shape = (
            (None, None) if only is None or only[1] is None else only
        )
        # run trusts the array it hands to _run and gets back as it is: checked here, once.
        if out is not None and (
            not self.writes_into
            or only is None
            or only[1] is None
            or not self.fits(out, only[1], only[0])
        ):
            raise ValueError(
                f"{self.node.describe()}: expected an out array of a writes_into kernel's "
                f"held shape and type, found {_array_str(out)}"
            )
        self._held_out = out

    def run(self, *inputs: Any, **kwargs: Any) -> KernelResult:
        """The node's outputs from its input arrays (None for omitted inputs): :meth:`_run`'s,
        each held to its tensor's type and to the shape :meth:`expect_outputs` holds it to.

        Returns the array of a single-output op (a sequence of one that ``_run`` returned
        included), else a sequence with one array per output. ``out=`` is passed on to a
        ``writes_into`` kernel. Raises :class:`~offload.errors.OpExecutionError` naming the
        node, its failure and its inputs when ``_run`` fails or returns the wrong outputs; an
        :class:`~offload.errors.OffloadError` that ``_run`` raises (it names the node
        already) passes through as it is.
        """
        # Paid by every node on every invoke: ~0.1 us over calling _run for a kernel that
        # filled the array held for it (checked once, in expect_outputs), ~0.2 us for one
        # whose array passes three comparisons of what is at hand; anything else takes
        # _checked_outputs.
        out = self._held_out
        try:
            if out is not None and not kwargs:
                result = self._run(*inputs, out=out)
                if result is out:
                    return result
            else:
                result = self._run(*inputs, **kwargs)
        except OffloadError:
            raise
        except Exception as exc:
            raise self._run_failed(f"{type(exc).__name__}: {exc}", inputs) from exc
        if (
            type(result) is _ndarray
            and result.dtype is self._held_dtype
            and result.shape == self._held_shape
        ):
            return result
        return self._checked_outputs(result, inputs)

    def _checked_outputs(self, result: Any, inputs: Sequence[Any]) -> KernelResult:
        """``result`` held to the outputs' types and shapes, a numpy scalar as the 0-d array
        it stands for (numpy gives reductions to one value as scalars), a single output as
        its array."""
        expected = self._held
        one = isinstance(result, (np.ndarray, np.generic))
        if not one and not isinstance(result, Sequence):
            raise self._run_failed(
                f"expected {len(expected)} output array(s), found {type(result).__name__}",
                inputs,
            )
        values = [result] if one else list(result)
        if len(values) != len(expected):
            raise self._run_failed(f"expected {len(expected)} outputs, found {len(values)}", inputs)
        for k, (value, held) in enumerate(zip(values, expected)):
            if isinstance(value, np.generic):
                value = values[k] = np.asarray(value)
            if held is None:
                continue  # an omitted output: nothing reads it
            t = self.outputs[k]
            if not isinstance(value, np.ndarray):
                raise self._run_failed(
                    f"output {k} (tensor {t.index}, {t.name!r}): expected a numpy array, "
                    f"found {type(value).__name__}",
                    inputs,
                )
            dtype, shape = held
            if value.dtype != dtype or (shape is not None and value.shape != shape):
                want = f"{dtype}{list(shape) if shape is not None else ''}"
                raise self._run_failed(
                    f"output {k} (tensor {t.index}, {t.name!r}): expected {want}, found "
                    f"{value.dtype}{list(value.shape)}",
                    inputs,
                )
        return values[0] if len(values) == 1 else values

    def _run_failed(self, what: str, inputs: Sequence[Any]) -> OpExecutionError:
        shapes = ", ".join(_array_str(a) for a in inputs)
        return OpExecutionError(f"{self.node.describe()} failed: {what} (inputs: {shapes})")

    # ``*inputs: Any, **kwargs: Any`` is the signature mypy accepts any override of: each
    # kernel names its own positional input arrays (and ``out=`` when it ``writes_into``).
    def _run(self, *inputs: Any, **kwargs: Any) -> KernelResult:
        """Compute the node's outputs from its input arrays (None for omitted inputs): what
        each kernel implements, and only :meth:`run` calls.

        Return one array for a single-output op, or a sequence with one array per output,
        with the output tensors' dtypes. Inputs of variable tensors (LSTM state) are the
        interpreter's persistent buffers: stateful kernels update them in place.
        """
        raise NotImplementedError(f"{type(self).__name__} needs _run()")


_ndarray = np.ndarray  # a module global: run's fast path reads it without an attribute lookup


def _array_str(a: Any) -> str:
    if a is None:
        return "None"
    return f"{a.dtype}{list(a.shape)}" if isinstance(a, np.ndarray) else type(a).__name__
