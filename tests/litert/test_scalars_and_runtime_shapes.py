"""0-d tensors and outputs whose shapes only a run settles pass through the litert delegate as
LiteRT passes them: no partition goes back to the CPU at invoke (strict mode), and the values
are LiteRT's own with the same kernels, and the CPU reference's."""

from __future__ import annotations

import numpy as np
import pytest

import offload

from .._models import (
    VALUE_SHAPES,
    computed_shape_model,
    scalar_chain_model,
    scalar_feeds,
    scalar_model,
    value_shape_model,
)
from ._support import assert_identical, direct, run, through_offload

KERNELS = ["builtin", "xnnpack"]


def _reference(content: bytes) -> offload.Interpreter:
    interp = offload.Interpreter(model_content=content, delegates=[])
    interp.allocate_tensors()
    return interp


@pytest.mark.parametrize("kernels", KERNELS)
def test_scalar_inputs_and_outputs_pass_through(kernels: str) -> None:
    """0-d inputs (LiteRT's view of a 0-d tensor is a numpy scalar, nothing to copy into) and
    0-d outputs (LiteRT's get_tensor gives numpy scalars), float32 and int32, in one partition:
    three invokes give LiteRT's values and the reference's, and nothing is restored."""
    content = scalar_model()
    ours = through_offload(kernels, content=content)
    assert [p.delegate for p in ours.plan().partitions] == ["litert"]
    ref, cpu = direct(kernels, content=content), _reference(content)
    for k, feed in enumerate(scalar_feeds()):
        got = run(ours, feed)
        assert [np.shape(g) for g in got] == [(), (3,), (), ()]
        assert_identical(got, run(ref, feed), f"{kernels} invoke {k} vs LiteRT")
        assert_identical(got, run(cpu, feed), f"{kernels} invoke {k} vs the reference")
    assert not ours.delegation_report()["restored_to_cpu"]


@pytest.mark.parametrize("kernels", KERNELS)
def test_scalars_cross_partition_boundaries(kernels: str) -> None:
    """dummy's ADD, litert's MUL, dummy's SUB: litert reads a 0-d array another partition made
    (copied in at invoke, not taken from set_tensor) and hands a 0-d output to the next one."""
    content = scalar_chain_model()
    delegates = [
        offload.load_delegate("dummy"),
        offload.load_delegate("litert", {"kernels": kernels}),
    ]
    ours = offload.Interpreter(
        model_content=content, experimental_delegates=delegates, allow_cpu_fallback=False
    )
    ours.allocate_tensors()
    assert [p.delegate for p in ours.plan().partitions] == ["dummy", "litert", "dummy"]
    ref, cpu = direct(kernels, content=content), _reference(content)
    for value in (3.0, -0.5):
        feed = [np.array(value, np.float32)]
        got = run(ours, feed)
        assert_identical(got, run(ref, feed), f"{kernels} x={value} vs LiteRT")
        assert_identical(got, run(cpu, feed), f"{kernels} x={value} vs the reference")
    assert not ours.delegation_report()["restored_to_cpu"]


@pytest.mark.parametrize("kernels", KERNELS)
def test_outputs_shaped_from_the_input_shape_pass_through(kernels: str) -> None:
    """A RESHAPE and a SLICE to sizes computed from the input's shape, declared [1, 1, 2] and
    [1, 1]: LiteRT's [b, 4, 2] and [b, 4] are taken, at batch 1, 3 and 1 again."""
    content = computed_shape_model()
    ours = through_offload(kernels, content=content)
    ref, cpu = direct(kernels, content=content), _reference(content)
    for batch in (1, 3, 1):
        for interp in (ours, ref, cpu):
            interp.resize_tensor_input(interp.get_input_details()[0]["index"], (batch, 8))
            interp.allocate_tensors()
        feed = [np.random.default_rng(batch).standard_normal((batch, 8)).astype(np.float32)]
        got = run(ours, feed)
        assert [g.shape for g in got] == [(batch, 4, 2), (batch, 4)]
        assert_identical(got, run(ref, feed), f"{kernels} batch {batch} vs LiteRT")
        assert_identical(got, run(cpu, feed), f"{kernels} batch {batch} vs the reference")
    assert not ours.delegation_report()["restored_to_cpu"]


@pytest.mark.parametrize("kernels", KERNELS)
def test_outputs_shaped_by_input_values_pass_through(kernels: str) -> None:
    """A RESHAPE to a shape the program feeds, the input shapes unchanged: each invoke's
    output has the shape its values ask for, LiteRT's, and the same shape twice in a row is
    taken again."""
    content = value_shape_model()
    ours = through_offload(kernels, content=content)
    ref, cpu = direct(kernels, content=content), _reference(content)
    x = np.linspace(-2, 2, 8, dtype=np.float32).reshape(1, 8)
    for shape in (*VALUE_SHAPES, VALUE_SHAPES[-1]):
        feed = [x, np.array(shape, np.int32)]
        got = run(ours, feed)
        assert got[0].shape == shape
        assert_identical(got, run(ref, feed), f"{kernels} {shape} vs LiteRT")
        assert_identical(got, run(cpu, feed), f"{kernels} {shape} vs the reference")
    assert not ours.delegation_report()["restored_to_cpu"]
