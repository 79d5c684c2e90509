"""Static magnitude bounds, and the float clamp of ADD / SUB / MUL they let a kernel skip.

The clamp matters only where a result can overflow to inf: those cases must still give
+-FLT_MAX as LiteRT does, while a DEQUANTIZE -> MUL chain bounded far inside float32 skips it.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from _one_op import run_litert

import offload
from offload.model.builder import ModelBuilder
from offload.ops._bounds import SAFE_MAGNITUDE, magnitude_bound

FLT_MAX = np.finfo(np.float32).max


def _chain(scale: float, factor: float) -> bytes:
    """int8 x -> DEQUANTIZE -> MUL by a constant ``factor`` -> output; also MUL by 2 then ADD
    a float graph input, and RELU6 of that, as side outputs."""
    b = ModelBuilder()
    x = b.add_input("x", (1, 4, 4, 8), np.int8, quantization=(scale, 3))
    f = b.add_input("f", (1, 4, 4, 8), np.float32)
    d = b.add_tensor("d", (1, 4, 4, 8))
    b.add_operator("DEQUANTIZE", [x], [d])
    k = b.add_constant("k", np.full(8, factor, np.float32))
    scaled = b.add_tensor("scaled", (1, 4, 4, 8))
    b.add_operator("MUL", [d, k], [scaled], {"fused_activation_function": "NONE"})
    two = b.add_constant("two", np.array(2.0, np.float32))
    doubled = b.add_tensor("doubled", (1, 4, 4, 8))
    b.add_operator("MUL", [d, two], [doubled], {"fused_activation_function": "NONE"})
    summed = b.add_tensor("summed", (1, 4, 4, 8))
    b.add_operator("ADD", [doubled, f], [summed], {"fused_activation_function": "NONE"})
    capped = b.add_tensor("capped", (1, 4, 4, 8))
    b.add_operator("RELU6", [summed], [capped])
    for t in (scaled, summed, capped):
        b.add_output(t)
    return b.build()


def test_bounds_follow_the_graph() -> None:
    model = offload.load_model(model_content=_chain(0.5, 4.0)).main
    by_name = {t.name: t.index for t in model.tensors}
    # int8 less zero point 3 reaches -131; times 0.5.
    assert magnitude_bound(model, by_name["d"]) == pytest.approx(65.5)
    assert magnitude_bound(model, by_name["scaled"]) == pytest.approx(262.0)
    assert magnitude_bound(model, by_name["doubled"]) == pytest.approx(131.0)
    assert magnitude_bound(model, by_name["f"]) == math.inf  # a graph input: anything
    assert magnitude_bound(model, by_name["summed"]) == math.inf
    assert magnitude_bound(model, by_name["capped"]) == 6.0


@pytest.mark.parametrize("factor", [float("inf"), float("nan")])
def test_a_constant_without_a_finite_bound_bounds_nothing(factor: float) -> None:
    model = offload.load_model(model_content=_chain(0.5, factor)).main
    by_name = {t.name: t.index for t in model.tensors}
    assert magnitude_bound(model, by_name["k"]) == math.inf
    assert magnitude_bound(model, by_name["scaled"]) == math.inf


@pytest.mark.parametrize("scale,factor", [(0.5, 4.0), (1e30, 1e10), (0.05, -3e38)])
def test_mul_add_clamp_as_litert(scale: float, factor: float) -> None:
    """Bounded chains (first case: the clamp is skipped) and chains that overflow (the clamp
    stays and gives +-FLT_MAX) agree with LiteRT."""
    content = _chain(scale, factor)
    rng = np.random.default_rng(0)
    feeds = [
        rng.integers(-128, 128, (1, 4, 4, 8)).astype(np.int8),
        (rng.standard_normal((1, 4, 4, 8)) * 1e38).astype(np.float32),
    ]
    ours = offload.Interpreter(model_content=content, delegates=[])
    ours.allocate_tensors()
    for detail, value in zip(ours.get_input_details(), feeds):
        ours.set_tensor(detail["index"], value)
    ours.invoke()
    scaled = ours.get_tensor(ours.get_output_details()[0]["index"])
    np.testing.assert_array_equal(scaled, run_litert(content, feeds))
    graph = offload.load_model(model_content=content).main
    scaled_index = next(t.index for t in graph.tensors if t.name == "scaled")
    skipped = magnitude_bound(graph, scaled_index) <= SAFE_MAGNITUDE
    assert skipped == (scale == 0.5)  # the others overflow on some codes
    if not skipped:
        assert np.isfinite(scaled).all() and np.abs(scaled).max() == FLT_MAX
