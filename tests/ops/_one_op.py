"""Run one builder-made operator through LiteRT's builtin kernels and through offload's kernel.

The helpers return both outputs so that a test can ask for what it means (bit-exact, a number
of quantization steps, a relative error) and say which elements differ when it fails.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

import offload
from offload.model.builder import ModelBuilder
from offload.ops import kernel_class


@dataclass
class Operand:
    """One op input: its value, whether it is a constant, and its quantization."""

    value: np.ndarray | None
    const: bool = False
    q: Any = None
    qdim: int = 0


def build(
    op: str,
    operands: list[Operand],
    out_shape: tuple[int, ...],
    out_dtype: Any,
    options: dict[str, Any] | None = None,
    version: int = 1,
    out_q: Any = None,
) -> tuple[bytes, list[np.ndarray]]:
    """A one-operator model and the values to feed its runtime inputs, in order."""
    b = ModelBuilder()
    indices, feeds = [], []
    for k, spec in enumerate(operands):
        if spec.value is None:
            indices.append(-1)
        elif spec.const:
            indices.append(
                b.add_constant(
                    f"c{k}", spec.value, quantization=spec.q, quantized_dimension=spec.qdim
                )
            )
        else:
            indices.append(
                b.add_input(
                    f"x{k}",
                    spec.value.shape,
                    spec.value.dtype,
                    quantization=spec.q,
                    quantized_dimension=spec.qdim,
                )
            )
            feeds.append(spec.value)
    y = b.add_tensor("y", out_shape, out_dtype, quantization=out_q)
    b.add_operator(op, indices, [y], options or {}, version=version)
    b.add_output(y)
    return b.build(), feeds


def run_litert(content: bytes, feeds: list[np.ndarray]) -> np.ndarray:
    """The model's first output from LiteRT's builtin kernels (no XNNPACK), one thread."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    ref = Interpreter(
        model_content=content,
        experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
        num_threads=1,
    )
    ref.allocate_tensors()
    for detail, value in zip(ref.get_input_details(), feeds):
        ref.set_tensor(detail["index"], value)
    ref.invoke()
    return ref.get_tensor(ref.get_output_details()[0]["index"])


def run_offload(content: bytes, feeds: list[np.ndarray]) -> np.ndarray:
    """The operator's output from offload's CPU kernel, set up as the interpreter sets it up."""
    model = offload.load_model(model_content=content)
    sg = model.main
    node = sg.nodes[0]
    kernel = kernel_class(node)(node, sg)
    feed = iter(feeds)
    args = [
        None
        if i < 0
        else (sg.tensors[i].constant_value() if sg.tensors[i].is_constant else next(feed))
        for i in node.inputs
    ]
    return np.asarray(kernel.run(*args))


def run_both(*args: Any, **kwargs: Any) -> tuple[np.ndarray, np.ndarray]:
    """(offload's output, LiteRT's output) for :func:`build`'s arguments."""
    content, feeds = build(*args, **kwargs)
    return run_offload(content, feeds), run_litert(content, feeds)


def describe_mismatch(got: np.ndarray, want: np.ndarray) -> str:
    """Where and by how much two same-shaped outputs differ, for an assertion message."""
    if np.issubdtype(want.dtype, np.floating):
        differ = (
            got.view(np.int32) != want.view(np.int32) if want.dtype == np.float32 else got != want
        )
    else:
        differ = got != want
    where = np.argwhere(differ)
    head = [
        (tuple(int(i) for i in p), got[tuple(p)].item(), want[tuple(p)].item()) for p in where[:5]
    ]
    return f"{len(where)} of {want.size} elements differ; first (index, ours, LiteRT): {head}"
