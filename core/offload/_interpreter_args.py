"""The Interpreter's arguments: offload 0.1's positional ``delegates`` (deprecated), and the
checked settings its session is built with."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from typing import Any, Literal, TypeVar

from offload._deprecation import deprecation, warn_deprecated
from offload._litert_compat import OpResolverType, check_litert_options, check_num_threads
from offload._settings import AutoSettings, budget_from

__all__ = ["interpreter_settings", "positional_delegates"]

F = TypeVar("F", bound=Callable[..., Any])

_POSITIONAL_DELEGATES = deprecation(
    "interpreter-positional-delegates",
    old="Interpreter(model_path, model_content, experimental_delegates, num_threads, delegates)",
    new="Interpreter(..., delegates=...): the fifth positional parameter is LiteRT's "
    "experimental_op_resolver_type, and offload's own parameters are keyword-only",
    since="0.2.0",
    removal="0.3.0",
)


def positional_delegates(init: F) -> F:
    """Keep offload 0.1's ``Interpreter(path, None, None, None, delegates)`` working, with a
    DeprecationWarning, where LiteRT's fifth positional parameter now stands.

    LiteRT's is the op resolver type, an enum member: a str, list, tuple or None in that place
    is offload 0.1's ``delegates``. The wrapper keeps ``__init__``'s signature (functools.wraps),
    which the parity test and the public-API snapshot read.
    """

    @functools.wraps(init)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> None:
        if len(args) >= 5 and (args[4] is None or isinstance(args[4], (str, list, tuple))):
            if "delegates" in kwargs:
                raise TypeError(
                    "Interpreter() got delegates twice: as the fifth positional argument "
                    "(offload 0.1's place for it) and by keyword; pass delegates= only"
                )
            warn_deprecated(_POSITIONAL_DELEGATES)
            kwargs["delegates"] = args[4]
            args = args[:4] + (OpResolverType.AUTO,) + args[5:]
        init(self, *args, **kwargs)

    return wrapper  # type: ignore[return-value]  # same call signature, by functools.wraps


def interpreter_settings(
    litert_options: dict[str, Any],
    *,
    num_threads: int | None,
    allow_cpu_fallback: bool,
    preserve_all_tensors: bool,
    max_tensor_bytes: int | None,
    auto_budget_s: float | None,
    auto_precision_loss_allowed: bool,
    auto_cache_dir: str | os.PathLike[str] | Literal[False] | None,
    auto_inputs: Sequence[Any] | None,
) -> tuple[dict[str, Any], AutoSettings]:
    """LiteRT's options checked, and the complete settings of the Interpreter's session: each
    argument checked before the model is read, so a wrong one costs no load."""
    checked = check_litert_options(litert_options)
    num_threads = check_num_threads(num_threads)
    if max_tensor_bytes is not None and (
        not isinstance(max_tensor_bytes, int) or max_tensor_bytes <= 0
    ):
        raise ValueError(
            f"max_tensor_bytes must be a positive int or None, found {max_tensor_bytes!r}"
        )
    settings = AutoSettings(
        budget_s=budget_from(auto_budget_s),
        precision_loss_allowed=bool(auto_precision_loss_allowed),
        num_threads=num_threads,
        allow_cpu_fallback=allow_cpu_fallback,
        preserve_all_tensors=preserve_all_tensors,
        max_tensor_bytes=max_tensor_bytes,
        cache_dir=auto_cache_dir or None,
        use_cache=auto_cache_dir is not False,
        samples=auto_inputs,
    )
    return checked, settings
