"""A plan for named delegates that is fragmented gets one warning with the numbers, the ops
that split it and the command that shows the plan; auto rejects such plans instead."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import offload
from offload._plan import make_plan
from offload._plan_cost import fragmentation, node_work, plan_figures
from offload.errors import PartitionCostWarning
from offload.model.builder import ModelBuilder
from tests._auto_fakes import ADD_ONLY, chain_model, install


def _fragmented(tmp_path) -> str:  # type: ignore[no-untyped-def]
    path = tmp_path / "split.tflite"
    path.write_bytes(chain_model(("ADD", "TANH") * 10))
    return str(path)


def test_many_partitions_warn_once_with_numbers_ops_and_command(tmp_path):
    """10 ADD partitions split by TANH: one warning naming them and `offload check`."""
    path = _fragmented(tmp_path)
    with pytest.warns(PartitionCostWarning) as caught:
        interp = offload.Interpreter(model_path=path, delegates=[ADD_ONLY()])
        interp.allocate_tensors()
        interp.allocate_tensors()
        interp.plan()
    assert len(caught) == 1
    text = str(caught[0].message)
    assert "10 partitions for 20 nodes" in text
    assert "TANH x10" in text and "op TANH is not supported" in text
    assert f"offload check {path} --delegate addonly" in text


def test_auto_and_the_default_do_not_warn_they_reject(tmp_path, monkeypatch, auto_cache):
    """Only a plan the program asked for by name is warned about."""
    install(monkeypatch, ADD_ONLY)
    path = _fragmented(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PartitionCostWarning)
        offload.Interpreter(model_path=path, delegates="auto").allocate_tensors()
        offload.Interpreter(model_path=path).allocate_tensors()
        offload.Interpreter(model_path=path, delegates=[]).allocate_tensors()


def test_a_few_partitions_do_not_warn(tmp_path):
    """Eight partitions are within the limit."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", PartitionCostWarning)
        content = chain_model(("ADD", "TANH") * 8)
        offload.Interpreter(model_content=content, delegates=[ADD_ONLY()]).allocate_tensors()


def _adds(size: int) -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", shape=(1, size))
    y = b.add_tensor("y", shape=(1, size))
    b.add_operator("ADD", inputs=[x, x], outputs=[y])
    b.add_output(y)
    return b.build()


def test_boundary_copies_that_dominate_warn():
    """One ADD on 64 Ki floats: 768 KiB copied for 64 Ki additions is copy-bound."""
    with pytest.warns(PartitionCostWarning, match="boundary copies dominate"):
        offload.Interpreter(model_content=_adds(1 << 16), delegates=[ADD_ONLY()]).plan()
    with warnings.catch_warnings():  # a small copy is not worth a warning
        warnings.simplefilter("error", PartitionCostWarning)
        offload.Interpreter(model_content=_adds(256), delegates=[ADD_ONLY()]).plan()


def test_work_counts_multiply_adds_of_products():
    """A convolution's work is its multiply-adds; an elementwise op's its outputs."""
    b = ModelBuilder()
    x = b.add_input("x", shape=(1, 8, 8, 3))
    w = b.add_constant("w", np.ones((4, 3, 3, 3), np.float32))
    bias = b.add_constant("b", np.zeros(4, np.float32))
    y = b.add_tensor("y", shape=(1, 8, 8, 4))
    b.add_operator("CONV_2D", inputs=[x, w, bias], outputs=[y], options={"padding": "SAME"})
    z = b.add_tensor("z", shape=(1, 8, 8, 4))
    b.add_operator("RELU", inputs=[y], outputs=[z])
    b.add_output(z)
    model = offload.load_model(model_content=b.build())
    conv, relu = model.main.nodes
    assert node_work(conv, model.main) == 8 * 8 * 4 * 27
    assert node_work(relu, model.main) == 8 * 8 * 4
    plan = make_plan(model, model.main, [])
    assert plan_figures(plan).partitions == 0 and fragmentation(plan) is None
