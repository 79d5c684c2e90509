"""Values a program hands to ``set_tensor`` (or a signature runner), taken as LiteRT takes them.

LiteRT names types by TensorType in its messages ("Got value of type FLOAT64 but expected type
FLOAT32"), accepts numpy ``str``, ``bytes`` and object arrays for a string tensor, and holds a
string tensor's elements as ``bytes``. offload holds string tensors as object arrays of
``bytes``, which every kernel (the CPU reference's and the engines' through LiteRT) reads.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from offload._graph import Tensor
from offload._litert_compat import litert_message
from offload._loader import TENSOR_TYPES
from offload.errors import TensorShapeError, TensorTypeError

__all__ = ["checked_input", "litert_type_name"]

_NAMES: dict[np.dtype, str] = {}
for _name, _dtype in TENSOR_TYPES.values():
    _NAMES.setdefault(_dtype, _name)


def litert_type_name(dtype: np.dtype) -> str:
    """The TensorType name LiteRT's messages give a numpy dtype (``STRING`` for text)."""
    if dtype.kind in "USO":
        return "STRING"
    return _NAMES.get(dtype, str(dtype).upper())


def checked_input(t: Tensor, value: Any, expected_shape: tuple[int, ...], what: str) -> np.ndarray:
    """``value`` as the array tensor ``t`` holds, or LiteRT's error for it.

    ``what`` names the input in messages ("input 0", "signature input 'x'"). A string tensor
    takes only numpy arrays, as LiteRT's does; numbers may come as anything numpy reads.
    """
    if t.type_name == "STRING":
        value = _strings(t, value, what)
    else:
        value = np.asarray(value)
        if value.dtype != t.dtype:
            raise TensorTypeError(
                litert_message(
                    "set_dtype",
                    f"Cannot set {what} ({t.name!r}): expected dtype {t.dtype}, "
                    f"found {value.dtype}",
                    found=litert_type_name(value.dtype),
                    expected=t.type_name,
                    index=t.index,
                    name=t.name,
                )
            )
    found = tuple(value.shape)
    if found != tuple(expected_shape):
        detail = (
            f"Cannot set {what} ({t.name!r}): expected shape {list(expected_shape)}, found "
            f"{list(found)}; call resize_tensor_input() first to change it"
        )
        if len(found) != len(expected_shape):
            message = litert_message(
                "set_rank", detail, found=len(found), expected=len(expected_shape), index=t.index
            )
        else:
            dim = next(d for d, (a, b) in enumerate(zip(found, expected_shape)) if a != b)
            message = litert_message(
                "set_dim",
                detail,
                found=found[dim],
                expected=expected_shape[dim],
                dim=dim,
                index=t.index,
            )
        raise TensorShapeError(message)
    return value


def _strings(t: Tensor, value: Any, what: str) -> np.ndarray:
    """A numpy array of text as the object array of ``bytes`` a string tensor holds.

    ``str`` elements are encoded as UTF-8. A 0-d ``bytes`` array keeps all its bytes, trailing
    NULs included, as LiteRT keeps them; elements of a larger one are numpy's (without the
    padding NULs of its fixed width), as in LiteRT.
    """
    if not isinstance(value, np.ndarray):
        raise TensorTypeError(
            litert_message(
                "not_array",
                f"{what} ({t.name!r}) is a string tensor: expected a numpy array of str or "
                f"bytes, found {type(value).__name__}",
                type=type(value).__name__,
            )
        )
    if value.dtype.kind not in "USO":
        raise TensorTypeError(
            litert_message(
                "set_dtype",
                f"Cannot set {what} ({t.name!r}): expected a numpy array of str or bytes, "
                f"found {value.dtype}",
                found=litert_type_name(value.dtype),
                expected="STRING",
                index=t.index,
                name=t.name,
            )
        )
    out = np.empty(value.shape, dtype=object)
    if value.ndim == 0 and value.dtype.kind == "S":
        out[()] = value.tobytes()
        return out
    flat = out.reshape(-1)
    for k, item in enumerate(value.reshape(-1).tolist()):
        if isinstance(item, str):
            item = item.encode("utf-8")
        elif not isinstance(item, bytes):
            raise TensorTypeError(
                f"Cannot set {what} ({t.name!r}): a string tensor's elements must be str or "
                f"bytes, found {type(item).__name__} at flat position {k}"
            )
        flat[k] = item
    return out
