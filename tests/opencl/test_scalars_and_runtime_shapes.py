"""0-d tensors through gpu_opencl: in and out of its partitions, none given back to the CPU at
invoke, the CPU reference's values. Outputs whose shapes only a run settles are not yet
gpu_opencl's: it builds each partition for the shapes known at allocate_tensors, so one fed a
shape the values settle goes back to the CPU at its first invoke (pinned below)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import offload
from tests._models import computed_shape_model, scalar_chain_model, scalar_feeds, scalar_model


def _pair(content: bytes, names: tuple[str, ...]) -> tuple[offload.Interpreter, ...]:
    ours = offload.Interpreter(
        model_content=content, experimental_delegates=[offload.load_delegate(n) for n in names]
    )
    cpu = offload.Interpreter(model_content=content, delegates=[])
    for interp in (ours, cpu):
        interp.allocate_tensors()
    return ours, cpu


def _run(interp: offload.Interpreter, arrays: list[np.ndarray]) -> list[np.ndarray]:
    for d, a in zip(interp.get_input_details(), arrays):
        interp.set_tensor(d["index"], a)
    interp.invoke()
    return [interp.get_tensor(d["index"]) for d in interp.get_output_details()]


@pytest.mark.parametrize(
    ("model", "names", "feeds"),
    [
        (scalar_model, ("gpu_opencl",), scalar_feeds()),
        (scalar_chain_model, ("gpu_opencl",), [[np.array(3.0, np.float32)]]),
        (scalar_chain_model, ("dummy", "gpu_opencl"), [[np.array(-0.5, np.float32)]]),
    ],
    ids=["scalar_model", "chain", "chain_after_dummy"],
)
def test_scalar_tensors_pass_through(model, names, feeds) -> None:  # noqa: ANN001
    """gpu_opencl's MUL and ADD on 0-d tensors (the rest on the CPU or dummy): the
    reference's values (float32 mode), and nothing restored."""
    ours, cpu = _pair(model(), names)
    assert ours.plan().nodes_of("gpu_opencl")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for feed in feeds:
            for g, w in zip(_run(ours, feed), _run(cpu, feed)):
                assert np.shape(g) == np.shape(w) and g.dtype == w.dtype
                np.testing.assert_allclose(g, w, rtol=1e-6)
    assert not ours.delegation_report()["restored_to_cpu"]


@pytest.mark.xfail(
    strict=True,
    reason="gpu_opencl takes a MUL whose input shape only the run settles (a RESHAPE to a "
    "computed shape on the CPU) and built it for the declared placeholder",
)
def test_a_partition_reading_a_shape_the_run_settles_stays_on_gpu_opencl() -> None:
    """computed_shape_model: gpu_opencl's MUL reads the CPU's RESHAPE to [1, 4, 2]."""
    ours, _ = _pair(computed_shape_model(), ("gpu_opencl",))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _run(ours, [np.ones((1, 8), np.float32)])
