"""The C library's float functions that LiteRT's float kernels call through ``std::exp``,
``std::log``, ``std::sin``, ``std::cos`` and ``std::expm1`` (EXP, LOG, SIN, COS, ELU, and the
scalar tails of Eigen's packet functions): ``expf``, ``logf``, ``sinf``, ``cosf`` and
``expm1f`` of the process's own C library, so offload rounds as LiteRT does on the same
machine.

Calling the C library once per element would make these ops a hundred times slower, and
numpy's own float32 functions differ from it in the last bit or two. glibc and musl compute
these functions in double and round once, within a stated bound of the true value (0.502 ULP
for expf, 0.818 for logf, 0.56 for sinf and cosf), so the float64 value rounded to float32
(what numpy gives) is the library's answer except where the true value lies within
``bound - 0.5`` ULP of a rounding midpoint. Only those elements, and results that are not
finite or not normal, are asked of the C library: about 1% of elements for exp, 14% for sin
and cos, 64% for log. Where no C library can be loaded, the correctly rounded value stands.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import math
from collections.abc import Callable

import numpy as np

__all__ = ["expf", "expm1f", "logf", "sinf", "cosf", "tanhf", "erfcf", "powf"]

_F = np.float32
_TINY = np.finfo(_F).tiny


@functools.cache
def _c_function(name: str, arity: int = 1) -> Callable[..., float] | None:
    """The C library's float function ``name`` of ``arity`` float arguments, or None where
    there is none to load."""
    candidates = [ctypes.util.find_library("m"), ctypes.util.find_library("c"), None]
    for library in candidates:
        try:
            fn = getattr(ctypes.CDLL(library), name)
        except (OSError, AttributeError, TypeError):
            continue
        fn.argtypes = [ctypes.c_float] * arity
        fn.restype = ctypes.c_float
        return fn  # type: ignore[no-any-return]
    return None


def _settle(name: str, wide: np.ndarray, window: float, *operands: np.ndarray) -> np.ndarray:
    """``wide`` (the float64 value) rounded to float32, with the elements a library within
    ``0.5 + window`` ULP may round otherwise recomputed by the C library's ``name`` from
    ``operands`` (float32, of ``wide``'s shape), one call each."""
    result = wide.astype(_F)
    fn = _c_function(name, len(operands))
    if fn is not None:
        flat, columns = result.reshape(-1), [o.reshape(-1) for o in operands]
        for i in np.flatnonzero(_undecided(wide, result, window)).tolist():
            flat[i] = fn(*(float(c[i]) for c in columns))
    return result


def _undecided(exact: np.ndarray, rounded: np.ndarray, window: float) -> np.ndarray:
    """Where a library within ``0.5 + window`` ULP may round ``exact`` (float64) otherwise
    than ``rounded`` (its float32 rounding): near a midpoint, or not a finite normal float."""
    r64 = rounded.astype(np.float64)
    direction = np.where(exact >= r64, _F(np.inf), _F(-np.inf))
    step = np.abs(np.nextafter(rounded, direction).astype(np.float64) - r64)
    offset = np.abs(exact - r64) / step  # in [0, 0.5] ULP from the float32 it rounded to
    decided = (offset < 0.5 - window) & np.isfinite(rounded) & (np.abs(rounded) >= _TINY)
    return ~decided


def _make(name: str, exact: Callable[[np.ndarray], np.ndarray], window: float):
    def apply(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        x = np.asarray(x)
        if x.dtype != _F:  # float16 and others: LiteRT has no C-library path to follow
            return exact(x) if out is None else exact(x, out=out)  # type: ignore[call-arg]
        with np.errstate(all="ignore"):
            result = _settle(name, exact(x.astype(np.float64)), window, x)
        if out is None:
            return result
        out[...] = result
        return out

    apply.__name__ = name
    apply.__doc__ = f"float32 ``{name}`` as the C library computes it (see the module notes)."
    apply.takes_out = True  # type: ignore[attr-defined]
    return apply


# Windows: the library's error bound above half an ULP, with a margin.
expf = _make("expf", np.exp, 0.005)
logf = _make("logf", np.log, 0.32)
sinf = _make("sinf", np.sin, 0.07)
cosf = _make("cosf", np.cos, 0.07)
# glibc's expm1f, tanhf and erfcf state no bound under 1 ULP: every element asks the library.
expm1f = _make("expm1f", np.expm1, 0.5)
tanhf = _make("tanhf", np.tanh, 0.5)
erfcf = _make("erfcf", np.vectorize(math.erfc, otypes=[np.float64]), 0.5)


def powf(base: np.ndarray, exponent: np.ndarray) -> np.ndarray:
    """float32 ``powf`` (std::pow in LiteRT's POW), broadcast: the float64 power where glibc's
    bound (0.82 ULP) cannot round it otherwise, the C library's for the rest."""
    a, b = np.broadcast_arrays(np.asarray(base, _F), np.asarray(exponent, _F))
    with np.errstate(all="ignore"):
        return _settle("powf", np.power(a.astype(np.float64), b.astype(np.float64)), 0.32, a, b)
