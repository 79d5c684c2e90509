"""0-d tensors and outputs whose shapes only a run settles pass through the openvino delegate as
LiteRT passes them: no partition goes back to the CPU at invoke, and the values are LiteRT's
(its builtin kernels) and the CPU reference's. Nodes OpenVINO declines (int32 CONCATENATION,
a RESHAPE whose shape is an input) stay on the CPU by plan, named; none is restored."""

from __future__ import annotations

import warnings

import numpy as np

import offload

from .._models import (
    VALUE_SHAPES,
    computed_shape_model,
    scalar_chain_model,
    scalar_feeds,
    scalar_model,
    value_shape_model,
)
from ._support import oracle, run


def _openvino(content: bytes, *names: str) -> offload.Interpreter:
    """offload with ``names`` (default openvino alone); a partition restored at invoke warns,
    and the warning is an error here."""
    delegates = [
        offload.load_delegate(n, {"cache_dir": ""} if n == "openvino" else None)
        for n in names or ("openvino",)
    ]
    interp = offload.Interpreter(model_content=content, experimental_delegates=delegates)
    interp.allocate_tensors()
    return interp


def _reference(content: bytes) -> offload.Interpreter:
    interp = offload.Interpreter(model_content=content, delegates=[])
    interp.allocate_tensors()
    return interp


def _same(got: list[np.ndarray], want: list[np.ndarray], what: str) -> None:
    assert len(got) == len(want), what
    for k, (g, w) in enumerate(zip(got, want)):
        assert np.shape(g) == np.shape(w) and g.dtype == w.dtype, f"{what} output {k}"
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=0, err_msg=f"{what} output {k}")


def test_scalar_inputs_and_outputs_pass_through() -> None:
    """0-d float32 and int32 inputs and outputs in one OpenVINO partition, three invokes."""
    content = scalar_model()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ours = _openvino(content)
        assert [p.delegate for p in ours.plan().partitions] == ["openvino"]
        ref, cpu = oracle(content=content), _reference(content)
        for k, feed in enumerate(scalar_feeds()):
            got = run(ours, feed)
            assert [np.shape(g) for g in got] == [(), (3,), (), ()]
            _same(got, run(ref, feed), f"invoke {k} vs LiteRT")
            _same(got, run(cpu, feed), f"invoke {k} vs the reference")
    assert not ours.delegation_report()["restored_to_cpu"]


def test_scalars_cross_partition_boundaries() -> None:
    """dummy's ADD, OpenVINO's MUL, dummy's SUB: 0-d arrays in and out of an OpenVINO
    partition between two others."""
    content = scalar_chain_model()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ours = _openvino(content, "dummy", "openvino")
        assert [p.delegate for p in ours.plan().partitions] == ["dummy", "openvino", "dummy"]
        ref, cpu = oracle(content=content), _reference(content)
        for value in (3.0, -0.5):
            feed = [np.array(value, np.float32)]
            got = run(ours, feed)
            _same(got, run(ref, feed), f"x={value} vs LiteRT")
            _same(got, run(cpu, feed), f"x={value} vs the reference")
    assert not ours.delegation_report()["restored_to_cpu"]


def test_outputs_shaped_from_the_input_shape_pass_through() -> None:
    """OpenVINO's SLICE to a size computed from the input's shape gives [b, 4] where [1, 1] is
    declared (the word model's framing), and its MUL reads the CPU's RESHAPE to a computed
    shape: taken as they come, at batch 1, 3 and 1 again."""
    content = computed_shape_model()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ours = _openvino(content)
        assert {p.delegate for p in ours.plan().partitions} == {"openvino"}
        ref, cpu = oracle(content=content), _reference(content)
        for batch in (1, 3, 1):
            for interp in (ours, ref, cpu):
                interp.resize_tensor_input(interp.get_input_details()[0]["index"], (batch, 8))
                interp.allocate_tensors()
            feed = [np.random.default_rng(batch).standard_normal((batch, 8)).astype(np.float32)]
            got = run(ours, feed)
            assert [g.shape for g in got] == [(batch, 4, 2), (batch, 4)]
            _same(got, run(ref, feed), f"batch {batch} vs LiteRT")
            _same(got, run(cpu, feed), f"batch {batch} vs the reference")
    assert not ours.delegation_report()["restored_to_cpu"]


def test_outputs_shaped_by_input_values_pass_through() -> None:
    """A RESHAPE (on the CPU) to a shape the program feeds, then OpenVINO's MUL: each invoke's
    output has the shape the values ask for, the input shapes unchanged."""
    content = value_shape_model()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ours = _openvino(content)
        assert [p.delegate for p in ours.plan().partitions] == ["openvino"]
        ref, cpu = oracle(content=content), _reference(content)
        x = np.linspace(-2, 2, 8, dtype=np.float32).reshape(1, 8)
        for shape in (*VALUE_SHAPES, VALUE_SHAPES[-1]):
            feed = [x, np.array(shape, np.int32)]
            got = run(ours, feed)
            assert got[0].shape == shape
            _same(got, run(ref, feed), f"{shape} vs LiteRT")
            _same(got, run(cpu, feed), f"{shape} vs the reference")
    assert not ours.delegation_report()["restored_to_cpu"]
