"""Reading and writing a model's tensors through LiteRT's Interpreter calls: ``get_tensor``'s
checked path, ``set_tensor``'s, ``tensor()``'s live views and ``resize_tensor_input``.

The Interpreter keeps the fast paths of ``set_tensor`` and ``get_tensor`` inline (they run
around every invoke); what is here runs when those do not apply, and says what was wrong.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from offload._executor import Executor
from offload._graph import Model, Subgraph, Tensor
from offload._litert_compat import litert_message
from offload._tensor_values import checked_input
from offload.errors import (
    NoTensorValueError,
    SubgraphIndexError,
    TensorIndexError,
    TensorShapeError,
    TensorTypeError,
)

__all__ = [
    "ViewToken",
    "subgraph_index_of",
    "tensor_at",
    "read_main_tensor",
    "read_subgraph_tensor",
    "resize_input",
    "store_input",
    "tensor_view",
    "value_of",
    "write_input",
]


def tensor_at(model: Model, index: Any, subgraph_index: int = 0) -> Tensor:
    """The tensor ``index`` names in a subgraph (checked with :func:`subgraph_index_of`),
    else LiteRT's error, a TensorIndexError."""
    tensors = model.subgraphs[subgraph_index].tensors
    if not isinstance(index, (int, np.integer)) or not 0 <= int(index) < len(tensors):
        where = f" of subgraph {subgraph_index}" if subgraph_index else ""
        raise TensorIndexError(
            litert_message(
                "tensor_index",
                f"expected a tensor index in 0..{len(tensors) - 1}{where}, found {index!r}",
                index=index,
                count=len(tensors),
            )
        )
    return tensors[int(index)]


def subgraph_index_of(model: Model, subgraph_index: Any) -> int:
    """``subgraph_index`` as an int once it names a subgraph, else LiteRT's error."""
    count = len(model.subgraphs)
    if not isinstance(subgraph_index, (int, np.integer)) or not 0 <= subgraph_index < count:
        raise SubgraphIndexError(
            litert_message(
                "subgraph_index",
                f"expected 0..{count - 1}, found {subgraph_index!r}",
                index=subgraph_index,
                count=count,
            )
        )
    return int(subgraph_index)


def value_of(buf: np.ndarray) -> Any:
    """A copy of a tensor's value as LiteRT's get_tensor gives it: a 0-d tensor as a numpy
    scalar, except for a string tensor, which stays a 0-d object array."""
    if buf.ndim:
        return np.array(buf, copy=True)
    return np.array(buf, copy=True) if buf.dtype == object else buf[()]


def read_main_tensor(ex: Executor, t: Tensor) -> Any:
    """``get_tensor`` of a main-subgraph tensor when its fast path did not apply: taken back
    from a delegate kernel that holds it, or a typed error saying why it has no value."""
    if t.index in ex.handed:
        ex.take_back(t.index)
    buf = ex.buffers[t.index]
    if buf is None:
        if t.sparsity is not None:
            raise NoTensorValueError(
                f"tensor {t.index} ({t.name!r}) is a sparse constant; it has no dense value"
            )
        if not ex.allocated:
            raise NoTensorValueError(
                litert_message(
                    "no_tensor_data",
                    f"tensor {t.index} ({t.name!r}) has no value: call allocate_tensors() first",
                )
            )
        raise NoTensorValueError(
            f"tensor {t.index} ({t.name!r}) has no value: intermediates are freed after "
            "their last use; create the Interpreter with "
            "experimental_preserve_all_tensors=True "
            "to keep them"
        )
    return value_of(buf)


def read_subgraph_tensor(executor: Executor | None, t: Tensor, subgraph_index: int) -> Any:
    """A tensor of another subgraph: a constant, or a value its signature runner left."""
    buf = None if executor is None else executor.buffers[t.index]
    if buf is None and t.is_dense_constant:
        buf = t.constant_value()
    if buf is None:
        raise NoTensorValueError(
            f"tensor {t.index} ({t.name!r}) of subgraph {subgraph_index} has no value: "
            "run the signature runner of that subgraph first"
        )
    return value_of(buf)


def write_input(ex: Executor, sg: Subgraph, t: Tensor, value: Any) -> None:
    """``set_tensor`` when its fast path did not apply: every check, then the value handed to
    the engine that alone reads it, or kept in the executor's buffer."""
    if t.index not in sg.inputs and not t.is_variable:
        raise TensorIndexError(
            f"tensor {t.index} ({t.name!r}) is not an input of the model; inputs are "
            f"{list(sg.inputs)}"
        )
    if not ex.allocated and ex.buffers[t.index] is None:
        raise NoTensorValueError(
            litert_message(
                "set_unallocated",
                f"tensor {t.index} ({t.name!r}) has no memory yet: call allocate_tensors() "
                "before set_tensor()",
            )
        )
    value = checked_input(t, value, ex.shapes[t.index], f"tensor {t.index}")
    if ex.allocated and ex.hand_over(t.index, value):
        return  # copied straight into the engine of the partition that alone reads it
    store_input(ex, t.index, value)


def store_input(ex: Executor, index: int, value: np.ndarray) -> None:
    """Keep a checked input value in the executor's own buffer."""
    buf = ex.buffers[index]
    if buf is None or buf.shape != value.shape or not buf.flags.writeable:
        ex.buffers[index] = np.array(value, copy=True)
    else:
        np.copyto(buf, value)


def resize_input(
    ex: Executor, sg: Subgraph, t: Tensor, tensor_size: Sequence[int], strict: bool
) -> None:
    """``resize_tensor_input``: the new shape checked against the input's rank and, when
    ``strict``, its shape signature; the executor allocates again on next use."""
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
    ex.shapes[t.index] = new_shape
    ex.allocated = False


class ViewToken:
    """What every array from ``Interpreter.tensor`` holds: while any such array (or a slice of
    it) lives, the token's reference count is above 2, and the calls that may move tensor
    memory refuse to run, as LiteRT's arrays hold its interpreter."""

    __slots__ = ()


class _TensorView:
    """The base of an array ``tensor()`` returns: it exposes the tensor's buffer and holds
    the interpreter's token. numpy gives every slice of that array this object as its base
    too (a base that is not an ndarray is kept), so a slice counts as a view."""

    __slots__ = ("__array_interface__", "_buffer", "_token")

    def __init__(self, buffer: np.ndarray, token: ViewToken) -> None:
        self.__array_interface__ = buffer.__array_interface__
        self._buffer = buffer
        self._token = token


def tensor_view(ex: Executor, t: Tensor, token_of: Callable[[], ViewToken]) -> Callable[[], Any]:
    """``tensor()``: a function giving a live view of ``t``'s buffer. From now on the
    tensor's value stays in that buffer: no delegate kernel holds it.

    The function holds ``token_of``, not the token: only the arrays it returns count as
    views, and a program may keep the function across calls that move memory."""
    ex.viewed.add(t.index)
    ex.direct.pop(t.index, None)
    ex.take_back(t.index)

    def view() -> Any:
        buf = ex.buffers[t.index]
        if buf is None:
            raise NoTensorValueError(
                f"tensor {t.index} ({t.name!r}) has no value: call allocate_tensors() "
                "first, or create the Interpreter with "
                "experimental_preserve_all_tensors=True to keep intermediates"
            )
        if buf.dtype == object:
            # LiteRT's tensor() of a string tensor crashes the process; its values are
            # Python objects, not memory a numpy view could alias.
            raise TensorTypeError(
                f"tensor {t.index} ({t.name!r}) is a {t.type_name} tensor: expected a "
                "tensor of numbers for a raw view; read it with get_tensor()"
            )
        if buf.ndim == 0:
            return buf[()]  # LiteRT gives a 0-d tensor's value as a numpy scalar
        return np.asarray(_TensorView(buf, token_of()))

    return view
