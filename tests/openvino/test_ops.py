"""The declaration holds: every op the openvino delegate declares passes single-op models
through OpenVINO against the CPU reference (the conformance kit, strict, with the cases of
_cases.py added); what it declines it declines with the reason."""

from __future__ import annotations

import numpy as np
import pytest

import offload
from offload.model import ModelBuilder
from offload.testing import CASES, run_conformance
from offload_openvino import OpenVINODelegate

from ._cases import EXTRA_CASES


@pytest.fixture(scope="module")
def report() -> offload.testing.ConformanceReport:
    delegate = OpenVINODelegate({"cache_dir": ""})
    return run_conformance(delegate, cases=[*CASES, *EXTRA_CASES])


def test_every_declared_op_passes_its_single_op_models(report) -> None:  # noqa: ANN001
    """Strict: each declared op has a case inside the declaration, and every case it takes
    matches the CPU reference (one quantization step for the int8 ones)."""
    assert report.ok(strict=True), "\n".join(report.failures(strict=True))
    declared = {cap.op for cap in OpenVINODelegate.CAPABILITIES.ops}
    passed = {r.op for r in report.results if r.status == "pass"}
    assert declared <= passed, f"declared but never passed: {sorted(declared - passed)}"


def test_the_kit_cases_it_declines_say_why(report) -> None:  # noqa: ANN001
    """The kit's RESHAPE with both a shape input and an empty new_shape option is refused with
    OpenVINO's reading of it; LSTM and the hybrid (dynamic-range) cases are not claimed, with
    the reason."""
    by_case = {r.case: r for r in report.results}
    assert by_case["reshape"].status == "refused"
    assert "takes the option over the input" in by_case["reshape"].detail
    assert by_case["lstm_basic_batch2"].status == "not-claimed"
    assert "dynamic-range" in by_case["fully_connected_hybrid"].detail


def _no_table(op: str, inputs: int) -> offload.Model:
    """A one-op model whose operator carries no options table (a converter may omit it)."""
    b = ModelBuilder()
    xs = [b.add_input(f"x{k}", shape=(2, 3)) for k in range(inputs)]
    y = b.add_tensor("y", shape=(2, 3))
    b.add_operator(op, xs, [y])
    b.operators[-1].options_type = None
    b.operators[-1].options = {}
    b.add_output(y)
    return offload.load_model(model_content=b.build())


def test_nodes_without_the_options_table_openvino_reads_are_declined() -> None:
    """ADD without AddOptions: OpenVINO's frontend would refuse the whole partition ("Chosen
    Builtin Option is not accessible"), so the node stays on the CPU, named; an op whose table
    has no fields (SQUARED_DIFFERENCE) is taken."""
    delegate = OpenVINODelegate({"cache_dir": ""})
    add = _no_table("ADD", 2)
    assert add.main.nodes[0].options.type_name == "NoOptions"
    reason = delegate.is_node_supported(add.main.nodes[0], add.main)
    assert reason is not None and "fused_activation_function" in reason
    diff = _no_table("SQUARED_DIFFERENCE", 2)
    assert delegate.is_node_supported(diff.main.nodes[0], diff.main) is None


def test_types_openvino_is_not_handed_stay_on_the_cpu() -> None:
    """An int16 tensor (16x8 quantization) is declined with its type named."""
    b = ModelBuilder()
    x = b.add_input("x", shape=(4,), dtype=np.int16, quantization=(0.01, 0))
    y = b.add_tensor("y", shape=(4,), dtype=np.int16, quantization=(0.01, 0))
    b.add_operator("RESHAPE", [x, b.add_constant("s", np.array([4], np.int32))], [y])
    b.add_output(y)
    model = offload.load_model(model_content=b.build())
    reason = OpenVINODelegate({"cache_dir": ""}).is_node_supported(model.main.nodes[0], model.main)
    assert reason is not None and "int16" in reason.lower()
