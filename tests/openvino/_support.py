"""Shared helpers of the openvino tests: LiteRT's builtin kernels (the oracle) and offload with
the openvino delegate, run the same way."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from ai_edge_litert import interpreter as litert

import offload
from offload.model import ModelBuilder

from .._models import random_inputs


def oracle(path: Path | None = None, content: bytes | None = None) -> Any:
    """LiteRT's builtin kernels, without XNNPACK."""
    interp = litert.Interpreter(
        model_path=None if path is None else str(path),
        model_content=content,
        experimental_op_resolver_type=litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
    )
    interp.allocate_tensors()
    return interp


def through_openvino(
    path: Path | None = None, content: bytes | None = None, strict: bool = True, **options: Any
) -> offload.Interpreter:
    """offload with the openvino delegate (strict: a failed partition is an error)."""
    interp = offload.Interpreter(
        model_path=path,
        model_content=content,
        experimental_delegates=[offload.load_delegate("openvino", options)],
        allow_cpu_fallback=not strict,
    )
    interp.allocate_tensors()
    return interp


def run(interp: Any, arrays: list[np.ndarray]) -> list[np.ndarray]:
    for d, a in zip(interp.get_input_details(), arrays):
        interp.set_tensor(d["index"], a)
    interp.invoke()
    return [interp.get_tensor(d["index"]) for d in interp.get_output_details()]


def inputs(interp: Any, seed: int) -> list[np.ndarray]:
    return random_inputs(interp.get_input_details(), seed, "uniform")


def dynamic_batch_model() -> bytes:
    """x[-1, 4] -> FULLY_CONNECTED(3) -> ADD bias row -> y[-1, 3]."""
    b = ModelBuilder()
    x = b.add_input("x", shape=(1, 4), shape_signature=(-1, 4))
    w = b.add_constant("w", np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4))
    c = b.add_constant("c", np.array([[0.5, -0.25, 2.0]], np.float32))
    h = b.add_tensor("h", shape=(1, 3), shape_signature=(-1, 3))
    y = b.add_tensor("y", shape=(1, 3), shape_signature=(-1, 3))
    b.add_operator("FULLY_CONNECTED", [x, w, -1], [h])
    b.add_operator("ADD", [h, c], [y])
    b.add_output(y)
    return b.build()
