"""Differential fuzzing: random small graphs built with the builder agree with LiteRT."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import offload
from offload.model.builder import ModelBuilder

litert = pytest.importorskip("ai_edge_litert.interpreter", reason="ai-edge-litert is not installed")

UNARY = ["RELU", "RELU6", "TANH", "LOGISTIC", "EXP", "ABS", "NEG", "HARD_SWISH", "RELU_N1_TO_1"]
BINARY = ["ADD", "SUB", "MUL", "MAXIMUM", "MINIMUM", "SQUARED_DIFFERENCE"]
ACTIVATIONS = ["NONE", "RELU", "RELU6", "RELU_N1_TO_1"]


@st.composite
def graphs(draw: st.DrawFn) -> tuple[bytes, tuple[int, ...]]:
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=1, max_size=4)))
    b = ModelBuilder()
    live = [b.add_input("x", shape=shape)]
    for k in range(draw(st.integers(1, 8))):
        out = b.add_tensor(f"t{k}", shape=shape)
        if draw(st.booleans()):
            op = draw(st.sampled_from(UNARY))
            b.add_operator(op, inputs=[draw(st.sampled_from(live))], outputs=[out])
        else:
            op = draw(st.sampled_from(BINARY))
            lhs, rhs = draw(st.sampled_from(live)), draw(st.sampled_from(live))
            options = {}
            if op in ("ADD", "SUB", "MUL"):
                options["fused_activation_function"] = draw(st.sampled_from(ACTIVATIONS))
            b.add_operator(op, inputs=[lhs, rhs], outputs=[out], options=options)
        live.append(out)
    b.add_output(live[-1])
    return b.build(), shape


def _run(cls, content: bytes, x: np.ndarray, **kwargs) -> np.ndarray:  # noqa: ANN001
    interp = cls(model_content=content, **kwargs)
    interp.allocate_tensors()
    interp.set_tensor(interp.get_input_details()[0]["index"], x)
    interp.invoke()
    return interp.get_tensor(interp.get_output_details()[0]["index"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs(), st.integers(0, 2**16))
def test_random_graphs_match_litert(graph: tuple[bytes, tuple[int, ...]], seed: int) -> None:
    """Any chain of float elementwise ops gives LiteRT's numbers within 1e-5 relative."""
    content, shape = graph
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    want = _run(
        litert.Interpreter,
        content,
        x,
        experimental_op_resolver_type=litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
    )
    got = _run(offload.Interpreter, content, x, delegates=[])
    np.testing.assert_allclose(
        got, want, rtol=1e-5, atol=1e-6 * max(1.0, float(np.abs(want).max()))
    )
