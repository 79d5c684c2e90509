"""A mixed plan: gpu_opencl first, the litert delegate for what it leaves. The numbers are
LiteRT's within the GPU delegate's tolerance, and the report names each partition's owner."""

from __future__ import annotations

import numpy as np
import pytest

import offload
from offload.model import ModelBuilder

pytest.importorskip("offload_litert", reason="offload-litert is not installed")
litert = pytest.importorskip("ai_edge_litert.interpreter", reason="ai-edge-litert is not installed")


def _model() -> bytes:
    """x -> ADD c -> SQUARE -> MUL c -> y: gpu_opencl has ADD and MUL, not SQUARE."""
    b = ModelBuilder()
    x = b.add_input("x", shape=(1, 4, 4, 8))
    c = b.add_constant("c", np.linspace(-1, 1, 8, dtype=np.float32))
    a, s, y = (b.add_tensor(n, shape=(1, 4, 4, 8)) for n in ("a", "s", "y"))
    b.add_operator("ADD", [x, c], [a])
    b.add_operator("SQUARE", [a], [s])
    b.add_operator("MUL", [s, c], [y])
    b.add_output(y)
    return b.build()


def test_gpu_opencl_then_litert_gives_litert_numbers() -> None:
    """[gpu_opencl, litert]: ADD and MUL on the GPU delegate, SQUARE in LiteRT; nothing on
    the CPU reference; outputs within 1e-5 of LiteRT's."""
    delegates = [offload.load_delegate("gpu_opencl"), offload.load_delegate("litert")]
    interp = offload.Interpreter(
        model_content=_model(), experimental_delegates=delegates, allow_cpu_fallback=False
    )
    interp.allocate_tensors()
    owners = [(p.delegate, p.nodes) for p in interp.plan().partitions]
    assert owners == [("gpu_opencl", (0,)), ("litert", (1,)), ("gpu_opencl", (2,))]
    report = interp.delegation_report()["delegates"]
    assert report["litert"]["nodes"] == [1] and report["gpu_opencl"]["nodes"] == [0, 2]
    x = np.random.default_rng(0).standard_normal((1, 4, 4, 8)).astype(np.float32)
    interp.set_tensor(interp.get_input_details()[0]["index"], x)
    interp.invoke()
    got = interp.get_tensor(interp.get_output_details()[0]["index"])
    ref = litert.Interpreter(model_content=_model())
    ref.allocate_tensors()
    ref.set_tensor(ref.get_input_details()[0]["index"], x)
    ref.invoke()
    want = ref.get_tensor(ref.get_output_details()[0]["index"])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
