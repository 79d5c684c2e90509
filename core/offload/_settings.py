"""A session's settings: what a front end (Interpreter, CompiledModel) asks of the delegate
choice and the executors, complete when the session is built and never changed afterwards."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from offload._auto_accuracy import AccuracyPolicy

__all__ = ["BUDGET_ENV", "DEFAULT_BUDGET_S", "AutoSettings", "budget_from"]

DEFAULT_BUDGET_S = 2.0
BUDGET_ENV = "OFFLOAD_AUTO_BUDGET_S"


@dataclass
class AutoSettings:
    """A session's settings: the choice's (all of it part of a decision's key), the CPU
    fallback, preserved tensors and the tensor budget the executors read."""

    budget_s: float = DEFAULT_BUDGET_S
    precision_loss_allowed: bool = False
    num_threads: int | None = None
    allow_cpu_fallback: bool = True
    preserve_all_tensors: bool = False
    max_tensor_bytes: int | None = None
    cache_dir: str | os.PathLike[str] | None = None
    use_cache: bool = True
    # offload.CompiledModel(hardware_accel=...): the kinds of hardware a delegate may compute
    # on (None: any), whether the CPU reference may run nodes (CPU in the set), and options
    # for the delegates of each kind and by name (CpuOptions, GpuOptions, vendor options).
    hardware: tuple[str, ...] | None = None
    reference_allowed: bool = True
    kind_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    delegate_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    # auto_inputs=: the user's own input sets for the accuracy gate, in the main subgraph's
    # input order, checked against the model's inputs (offload._auto_inputs).
    samples: Any = None

    @property
    def policy(self) -> AccuracyPolicy:
        return AccuracyPolicy(self.precision_loss_allowed)


def budget_from(value: Any) -> float:
    """``auto_budget_s`` as seconds: the argument, else ``$OFFLOAD_AUTO_BUDGET_S``, else 2."""
    source = "auto_budget_s"
    if value is None:
        env = os.environ.get(BUDGET_ENV)
        if not env:
            return DEFAULT_BUDGET_S
        source, value = f"${BUDGET_ENV}", env
        try:
            value = float(value)
        except ValueError:
            raise ValueError(f"{source} must be a number of seconds, found {env!r}") from None
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise ValueError(f"{source} must be a number of seconds >= 0, found {value!r}")
    seconds = float(value)
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"{source} must be a finite number of seconds >= 0, found {value!r}")
    return seconds
