"""offload behind LiteRT's module: the names of ``ai_edge_litert.interpreter``.

``from offload import interpreter as tflite`` stands where ``from ai_edge_litert import
interpreter as tflite`` (or ``tflite_runtime.interpreter``) stood: ``Interpreter``,
``SignatureRunner``, ``load_delegate``, ``OpResolverType``, ``Delegate`` and
``InterpreterWithCustomOps`` with LiteRT 2.3's parameters. It is also what ``offload run`` and
:func:`offload.patch_litert` put behind those imports in a program that cannot be edited.

Where offload differs from LiteRT, :data:`DIFFERENCES` says how, one entry per member.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from typing import Any

from offload._delegate import Delegate
from offload._interpreter import Interpreter
from offload._litert_compat import DIFFERENCES, OpResolverType, litert_message
from offload._plugins import load_delegate
from offload._signature_runner import SignatureRunner
from offload.errors import IncompatibleOptionError

__all__ = [
    "DIFFERENCES",
    "Delegate",
    "Interpreter",
    "InterpreterWithCustomOps",
    "OpResolverType",
    "SignatureRunner",
    "load_delegate",
]


def _check_registerer_name(name: str) -> None:
    """LiteRT's error for a registerer named by a symbol it cannot find: ``module.Symbol`` is
    looked up in ``module.so``, a bare name in the process. One that is found still cannot be
    called by offload (the caller raises for it)."""
    library, _, symbol = name.rpartition(".")
    try:
        handle = ctypes.CDLL(f"{library}.so" if library else None)
    except OSError as exc:
        raise IncompatibleOptionError(
            litert_message(
                "registerer_library",
                f"custom_op_registerers: {name!r} names a symbol of {library}.so",
                library=f"{library}.so",
                error=exc,
            )
        ) from None
    if not hasattr(handle, symbol):
        raise IncompatibleOptionError(
            litert_message(
                "registerer_symbol",
                f"custom_op_registerers: {name!r} is not a symbol this process has loaded",
                name=symbol,
            )
        )


class InterpreterWithCustomOps(Interpreter):
    """LiteRT's Interpreter that registers custom ops; offload cannot call the registerers.

    ``custom_op_registerers`` are C++ functions (or their symbol names) that add kernels to
    LiteRT's op resolver. offload's kernels are Python, so any registerer raises
    :class:`~offload.errors.IncompatibleOptionError`; a custom op runs on offload through a
    delegate that declares it, or through the litert delegate with LiteRT's own resolver.
    """

    def __init__(
        self,
        custom_op_registerers: Sequence[str | Callable[..., Any]] | None = None,
        **kwargs: Any,
    ) -> None:
        for registerer in custom_op_registerers or ():
            if isinstance(registerer, str):
                _check_registerer_name(registerer)
        if custom_op_registerers:
            raise IncompatibleOptionError(
                f"InterpreterWithCustomOps: custom_op_registerers {list(custom_op_registerers)!r}"
                " register C++ kernels in LiteRT's op resolver, which offload does not have; "
                "run the custom op with an offload delegate that declares it, or leave the "
                "program on LiteRT (see offload.interpreter.DIFFERENCES)"
            )
        super().__init__(**kwargs)
