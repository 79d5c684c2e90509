"""LiteRT 2.x's ``Environment`` and ``TensorBuffer`` over host memory: the buffers a
``CompiledModel`` reads its inputs from and writes its outputs to, and the check that a
buffer fits the tensor it is bound to."""

from __future__ import annotations

import functools
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from offload._executor import Executor
from offload.errors import (
    InterpreterStateError,
    ReadOnlyBufferError,
    TensorShapeError,
    TensorTypeError,
    UsageError,
)

__all__ = [
    "DTYPE_NAMES",
    "HOST_MEMORY",
    "Environment",
    "EnvironmentOptions",
    "SignatureBinding",
    "TensorBuffer",
    "bound_array",
    "check_writable",
    "described",
]


class SignatureBinding(Protocol):
    """A signature as a CompiledModel binds buffers to it: its key and (name, tensor) pairs."""

    key: str
    inputs: list[tuple[str, int]]
    outputs: list[tuple[str, int]]


# LiteRT's kLiteRtTensorBufferTypeHostMemory: every offload buffer is host memory.
HOST_MEMORY = 1
# The numpy dtypes a TensorBuffer holds: LiteRT 2.3's six, and int64 and int16, which LiteRT's
# Python TensorBuffer refuses although models have such tensors (offload's kernels take them).
DTYPE_NAMES = {
    np.dtype(name): name
    for name in ("float32", "float16", "int32", "int8", "uint8", "bool", "int64", "int16")
}
# LiteRT 2.3 also holds these ml_dtypes types, byte for byte (its sub-byte and other float8
# types it refuses). offload does not depend on ml_dtypes: an array or dtype of one of these
# exists only once ml_dtypes is imported, so they are looked up in sys.modules, never imported.
_ML_DTYPES = ("bfloat16", "float8_e4m3fn", "float8_e5m2")


@functools.cache
def _with_ml_dtypes(module: Any) -> dict[np.dtype, str]:
    found = {np.dtype(getattr(module, n)): n for n in _ML_DTYPES if hasattr(module, n)}
    return {**DTYPE_NAMES, **found}


def _buffer_dtypes() -> dict[np.dtype, str]:
    """The dtypes a TensorBuffer takes here: ``DTYPE_NAMES``, and ``_ML_DTYPES`` once ml_dtypes is
    imported (by the program, or by a package such as ai-edge-litert or jax)."""
    module = sys.modules.get("ml_dtypes")
    return DTYPE_NAMES if module is None else _with_ml_dtypes(module)


def _dtype_name(dtype: Any, what: str) -> tuple[str, np.dtype]:
    known = _buffer_dtypes()
    try:
        resolved = np.dtype(dtype)
    except (TypeError, ValueError):
        resolved = None
    if resolved is None or resolved not in known:
        hint = "" if known is not DTYPE_NAMES else f"; {', '.join(_ML_DTYPES)} with ml_dtypes"
        raise TensorTypeError(
            f"{what}: unsupported dtype {dtype!r}; expected one of {list(known.values())}{hint}"
        )
    return known[resolved], resolved


# -- environment ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class EnvironmentOptions:
    """LiteRT's environment options. offload loads no runtime, compiler plugin or dispatch
    library, so the paths are kept (``Environment.options``) and otherwise unused."""

    runtime_path: str | None = None
    compiler_plugin_path: str = ""
    dispatch_library_path: str = ""


class Environment:
    """LiteRT's shared runtime environment. offload's delegates keep their own state, so this
    only holds the options; it exists so that programs that make one keep working."""

    def __init__(self, capsule: Any, options: EnvironmentOptions) -> None:
        self._capsule = capsule
        self._options = options

    def __enter__(self) -> Environment:
        return self

    def __exit__(self, exc_type: Any, exc_val: Any, exc_tb: Any) -> None:
        self.close()

    def close(self) -> None:
        self._capsule = None

    @classmethod
    def create(
        cls,
        *,
        options: EnvironmentOptions | str | None = None,
        runtime_path: str | None = None,
        compiler_plugin_path: str = "",
        dispatch_library_path: str = "",
    ) -> Environment:
        if isinstance(options, str):
            if runtime_path is not None:
                raise UsageError("Environment.create: runtime_path was given twice")
            runtime_path, options = options, None
        if options is not None and (
            runtime_path is not None or compiler_plugin_path or dispatch_library_path
        ):
            raise UsageError("Environment.create: pass either options or the path shortcuts")
        if options is None:
            options = EnvironmentOptions(runtime_path, compiler_plugin_path, dispatch_library_path)
        return cls(object(), options)

    @property
    def options(self) -> EnvironmentOptions:
        return self._options

    @property
    def capsule(self) -> Any:
        if self._capsule is None:
            raise InterpreterStateError("the Environment is closed")
        return self._capsule


# -- buffers -------------------------------------------------------------------------------------


class TensorBuffer:
    """A host-memory tensor buffer (LiteRT's ``TensorBuffer``): ``write`` an array in, ``read``
    elements out.

    Its ``capsule`` is the numpy array that holds the data. A buffer from
    ``CompiledModel.create_input_buffers`` is the array the model reads at run time, so
    ``write`` then ``run_by_index`` copies the data once. ``write`` takes exactly the buffer's
    dtype and element count, and ``read(n, dtype)`` its dtype and at most its element count:
    anything else is a :class:`~offload.errors.TensorTypeError` or
    :class:`~offload.errors.TensorShapeError` saying what was expected and found.

    It holds float32, float16, int32, int8, uint8, bool, int64 and int16 arrays, and, where
    ml_dtypes is imported, bfloat16, float8_e4m3fn and float8_e5m2 ones (LiteRT 2.3's set),
    bytes kept as they are. Whether a model computes in the buffer's dtype is checked when it
    runs: a buffer that does not match its tensor's dtype is a TensorTypeError there.

    A buffer over a read-only array (``create_from_host_memory(a)`` with ``a.flags.writeable``
    False: ``np.frombuffer`` of bytes, a read-only memory map) is for reading: an input the
    model only reads, as in LiteRT. ``write`` into it, or a run that would write it (as an
    output buffer, or an input the model updates in place), is a
    :class:`~offload.errors.ReadOnlyBufferError` before anything is written or run. (LiteRT
    2.3 writes through numpy's read-only flag into the array, or, where it had to align a
    copy, into the copy; offload keeps the flag's promise.)
    """

    def __init__(self, capsule: Any, environment: Any = None) -> None:
        if not isinstance(capsule, np.ndarray) or not capsule.flags.c_contiguous:
            raise TensorTypeError(
                "TensorBuffer expects a C-contiguous numpy array as its capsule, found "
                f"{type(capsule).__name__}; make buffers with CompiledModel.create_*_buffers or "
                "TensorBuffer.create_from_host_memory"
            )
        _dtype_name(capsule.dtype, "TensorBuffer")
        self._capsule: np.ndarray | None = capsule
        self._environment = environment

    @classmethod
    def create_from_host_memory(cls, data_array: np.ndarray) -> TensorBuffer:
        """A buffer over ``data_array``'s own memory (no copy): a C-contiguous numpy array of a
        supported dtype. Its shape reads back flat, as in LiteRT. A read-only array is taken,
        as LiteRT takes it, for a buffer that is only read (see the class docstring)."""
        if not isinstance(data_array, np.ndarray):
            raise TensorTypeError(
                f"create_from_host_memory expects a numpy array, found {type(data_array).__name__}"
            )
        if not data_array.flags.c_contiguous:
            raise TensorShapeError(
                "create_from_host_memory expects a C-contiguous array (it shares the memory), "
                "found a strided view; pass np.ascontiguousarray(a)"
            )
        return cls(data_array.reshape(-1))

    def _data(self, what: str = "TensorBuffer") -> np.ndarray:
        if self._capsule is None:
            raise InterpreterStateError(f"{what}: the TensorBuffer has been destroyed")
        return self._capsule

    def write(self, data_array: np.ndarray) -> None:
        """Copy ``data_array`` in: its dtype and element count must be the buffer's."""
        buf = self._data("TensorBuffer.write")
        if not isinstance(data_array, np.ndarray):
            raise TensorTypeError(
                f"TensorBuffer.write expects a numpy array, found {type(data_array).__name__}"
            )
        if data_array.dtype != buf.dtype:
            raise TensorTypeError(
                f"TensorBuffer.write: expected dtype {buf.dtype}, found {data_array.dtype}"
            )
        if data_array.size != buf.size:
            raise TensorShapeError(
                f"TensorBuffer.write: expected {buf.size} elements (shape {list(buf.shape)}), "
                f"found {data_array.size} (shape {list(data_array.shape)})"
            )
        if not buf.flags.writeable:
            raise ReadOnlyBufferError(
                f"TensorBuffer.write: expected a writable buffer, found the {described(buf)}; "
                "nothing was written. Make the buffer over a writable array (np.array(a) "
                "copies it), or with CompiledModel.create_input_buffers"
            )
        buf.reshape(-1)[...] = data_array.reshape(-1)

    def read(self, num_elements: int, output_dtype: Any) -> np.ndarray:
        """The first ``num_elements`` elements, flat, as a new array of the buffer's dtype."""
        buf = self._data("TensorBuffer.read")
        name, dtype = _dtype_name(output_dtype, "TensorBuffer.read")
        if dtype != buf.dtype:
            raise TensorTypeError(
                f"TensorBuffer.read: the buffer holds {buf.dtype}, found output_dtype {name}"
            )
        if (
            isinstance(num_elements, bool)
            or not isinstance(num_elements, (int, np.integer))
            or not 0 <= num_elements <= buf.size
        ):
            raise TensorShapeError(
                f"TensorBuffer.read: expected a count of elements in 0..{buf.size}, found "
                f"{num_elements!r}"
            )
        return np.array(buf.reshape(-1)[: int(num_elements)], copy=True)

    def get_tensor_details(self) -> dict[str, Any]:
        buf = self._data("TensorBuffer.get_tensor_details")
        return {"dtype": _buffer_dtypes()[buf.dtype], "shape": [int(d) for d in buf.shape]}

    def destroy(self) -> None:
        self._capsule = None
        self._environment = None

    @property
    def capsule(self) -> np.ndarray:
        return self._data("TensorBuffer.capsule")


def described(array: np.ndarray) -> str:
    """A buffer as a message names it: a host-memory buffer has no name of its own."""
    return f"TensorBuffer over a read-only {array.dtype} array of {array.size} elements"


def bound_array(ex: Executor, t: int, buffer: Any, name: str, what: str) -> np.ndarray:
    """The buffer's array shaped as tensor ``t`` (a view), once its dtype and size fit."""
    if not isinstance(buffer, TensorBuffer):
        raise TensorTypeError(
            f"{what} {name!r}: expected a TensorBuffer, found {type(buffer).__name__}"
        )
    array = buffer._data(f"{what} {name!r}")
    tensor = ex.subgraph.tensors[t]
    shape = tuple(ex.shapes[t])
    if array.dtype != tensor.dtype:
        # A buffer is made in any dtype it can hold (bfloat16 among them); whether the model
        # computes in it is known here, where the buffer meets the tensor: no kernel converts.
        raise TensorTypeError(
            f"{what} {name!r}: expected a {np.dtype(tensor.dtype)} buffer, found {array.dtype}; "
            f"tensor {tensor.name!r} is {np.dtype(tensor.dtype)} in the model (make its buffer "
            f"with create_{what}_buffers, or convert the data with astype)"
        )
    if array.size != math.prod(shape):
        raise TensorShapeError(
            f"{what} {name!r}: expected a buffer of {math.prod(shape)} elements (shape "
            f"{list(shape)}), found {array.size} (shape {list(array.shape)}); after a resize, "
            "make new buffers"
        )
    return array if array.shape == shape else array.reshape(shape)


def check_writable(
    ex: Executor,
    sig: SignatureBinding,
    arrays: Sequence[np.ndarray],
    targets: Sequence[np.ndarray],
) -> None:
    """Every buffer the run writes is writable, checked with the other buffer checks: numpy
    would refuse the write only after the nodes ran, losing the run (and, for an input updated
    in place, leaving the model's state half-updated)."""
    for (name, _), target in zip(sig.outputs, targets):
        if not target.flags.writeable:
            raise ReadOnlyBufferError(
                f"output {name!r} of signature {sig.key!r}: expected a writable buffer, found "
                f"the {described(target)}; nothing was run. Make it with "
                "create_output_buffers, or over a writable array (np.array(a) copies it)"
            )
    frozen = [(n, t, a) for (n, t), a in zip(sig.inputs, arrays) if not a.flags.writeable]
    if not frozen:
        return
    # An input's buffer is the array the model reads (no copy), so an input the run updates
    # in place (a variable tensor, a recurrent op's state) is written there. Worked out only
    # when a read-only input is given: an input the model only reads may be read-only.
    sg = ex.subgraph
    written = ex.state_inputs(range(len(sg.nodes)))
    for name, t, array in frozen:
        if sg.tensors[t].is_variable or t in written:
            raise ReadOnlyBufferError(
                f"input {name!r} of signature {sig.key!r}: expected a writable buffer, found "
                f"the {described(array)}; tensor {sg.tensors[t].name!r} is updated in place "
                "by the run (state), so its buffer is written; nothing was run. Make it with "
                "create_input_buffers, or over a writable array (np.array(a) copies it)"
            )
