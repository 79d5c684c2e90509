"""Interpreter introspection: memory_report() gives real byte counts; delegates report their own."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import offload
from offload._introspect import held_bytes
from offload.errors import DelegateError, MemoryBudgetError
from offload.model import ModelBuilder

offload_dummy = pytest.importorskip("offload_dummy", reason="the dummy delegate is not installed")


def _chain_model() -> bytes:
    """x -> ADD -> RELU -> ADD -> y on (1, 8) float32: two intermediates in the arena."""
    b = ModelBuilder()
    x = b.add_input("x", shape=(1, 8))
    one = b.add_constant("one", np.ones((1, 8), np.float32))
    t0, t1, y = (b.add_tensor(name, shape=(1, 8)) for name in ("t0", "t1", "y"))
    b.add_operator("ADD", [x, one], [t0])
    b.add_operator("RELU", [t0], [t1])
    b.add_operator("ADD", [t1, one], [y])
    b.add_output(y)
    return b.build()


def _conv_model() -> tuple[bytes, int]:
    """A 3x3 CONV_2D with constant filter and bias; returns the model and its constant bytes."""
    b = ModelBuilder()
    x = b.add_input("x", shape=(1, 8, 8, 4))
    filt = np.random.default_rng(0).standard_normal((16, 3, 3, 4)).astype(np.float32)
    bias = np.zeros(16, np.float32)
    f, c = b.add_constant("filter", filt), b.add_constant("bias", bias)
    y = b.add_tensor("y", shape=(1, 8, 8, 16))
    b.add_operator("CONV_2D", [x, f, c], [y], {"padding": "SAME", "stride_w": 1, "stride_h": 1})
    b.add_output(y)
    return b.build(), filt.nbytes + bias.nbytes


class _ReportingKernel(offload_dummy.DummyKernel):
    def memory_bytes(self) -> dict[str, int]:
        return {"device": 1000, "host": 24}

    def stats(self) -> dict[str, Any]:
        return {"program": "built"}


class _ReportingDelegate(offload_dummy.DummyDelegate):
    name = "reporting"

    def create_kernel(self) -> _ReportingKernel:
        return _ReportingKernel()


def test_arena_bytes_are_the_planned_arena() -> None:
    """The arena figure is the block's size: two 32-byte slots, the first padded to 64."""
    interp = offload.Interpreter(model_content=_chain_model(), delegates=[])
    assert interp.memory_report()["arena"] == 0
    interp.allocate_tensors()
    assert interp.memory_report()["arena"] == 64 + 32


def test_conv_kernel_buffers_hold_its_weights() -> None:
    """A float CONV_2D keeps its filter in GEMM layout: at least the filter's bytes."""
    content, constant_bytes = _conv_model()
    interp = offload.Interpreter(model_content=content, delegates=[])
    interp.allocate_tensors()
    report = interp.memory_report()
    assert report["cpu_kernel_buffers"] >= constant_bytes - 16 * 4
    assert report["constant_tensors"] == constant_bytes


def test_tensors_count_inputs_outputs_and_constants() -> None:
    """After invoke, tensors hold the input, the output and the constants, each once."""
    interp = offload.Interpreter(model_content=_chain_model(), delegates=[])
    interp.allocate_tensors()
    interp.set_tensor(interp.get_input_details()[0]["index"], np.zeros((1, 8), np.float32))
    interp.invoke()
    report = interp.memory_report()
    assert report["constant_tensors"] == 32
    assert report["tensors"] == 3 * 32


def test_views_of_foreign_memory_and_repeated_views_count_once() -> None:
    """held_bytes counts owned allocations once, never views of bytes (the model file)."""
    owned = np.zeros(100, np.float32)
    foreign = np.frombuffer(b"\0" * 64, np.float32)
    holder = {"a": owned, "b": owned[10:].reshape(10, 9), "c": [foreign, (owned.T,)]}
    assert held_bytes([holder]) == 400
    assert held_bytes([holder], exclude=[owned[:5]]) == 0


def test_delegate_bytes_come_from_memory_bytes() -> None:
    """A delegate kernel's memory_bytes() is summed into delegate_*_buffers."""
    interp = offload.Interpreter(
        model_content=_chain_model(), experimental_delegates=[_ReportingDelegate()]
    )
    interp.allocate_tensors()
    report = interp.memory_report()
    kernels = len(interp.delegate_kernels())
    assert kernels == 2
    assert report["delegate_device_buffers"] == 1000 * kernels
    assert report["delegate_host_buffers"] == 24 * kernels
    assert report["delegate_buffers"] == 1024 * kernels


def test_delegate_without_memory_bytes_reports_zero() -> None:
    """A kernel that reports nothing counts 0, not a guess."""
    interp = offload.Interpreter(model_content=_chain_model(), delegates=["dummy"])
    interp.allocate_tensors()
    assert interp.memory_report()["delegate_buffers"] == 0
    assert all(row["memory"] == {"device": 0, "host": 0} for row in interp.delegate_kernel_stats())


def test_delegate_kernel_defaults_report_nothing() -> None:
    """DelegateKernel's optional memory_bytes() and stats() default to empty mappings, which
    the reports read as zero bytes and no figures."""
    kernel = offload.DelegateKernel()
    assert dict(kernel.memory_bytes()) == {} and dict(kernel.stats()) == {}
    interp = offload.Interpreter(model_content=_chain_model(), delegates=["dummy"])
    interp.allocate_tensors()
    assert all(row["stats"] == {} for row in interp.delegate_kernel_stats())


def test_delegate_kernel_report_that_is_not_a_mapping_is_named() -> None:
    """A memory_bytes() that returns something else is a DelegateError naming the kernel,
    the method and what it found."""

    class _Wrong(offload_dummy.DummyKernel):
        def memory_bytes(self) -> Any:
            return 1000

    class _WrongDelegate(offload_dummy.DummyDelegate):
        name = "wrong"

        def create_kernel(self) -> _Wrong:
            return _Wrong()

    interp = offload.Interpreter(
        model_content=_chain_model(), experimental_delegates=[_WrongDelegate()]
    )
    interp.allocate_tensors()
    with pytest.raises(
        DelegateError, match=r"_Wrong.memory_bytes\(\) must return a mapping, found int"
    ):
        interp.memory_report()


def test_delegate_kernel_stats_name_partitions_and_stats() -> None:
    """delegate_kernel_stats() gives each running partition's delegate, nodes and stats()."""
    interp = offload.Interpreter(
        model_content=_chain_model(), experimental_delegates=[_ReportingDelegate()]
    )
    interp.allocate_tensors()
    rows = interp.delegate_kernel_stats()
    assert [(r["partition"], r["delegate"], r["nodes"]) for r in rows] == [
        (0, "reporting", [0]),
        (1, "reporting", [2]),
    ]
    assert rows[0]["stats"] == {"program": "built"}


def _conv(x_shape: tuple[int, ...], k: int, out_ch: int = 8) -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", x_shape)
    w = b.add_constant("w", np.ones((out_ch, k, k, x_shape[3]), np.float32))
    y = b.add_tensor("y", (*x_shape[:3], out_ch))
    b.add_operator(
        "CONV_2D",
        [x, w, b.add_constant("b", np.zeros(out_ch, np.float32))],
        [y],
        {"padding": "SAME", "stride_h": 1, "stride_w": 1},
    )
    b.add_output(y)
    return b.build()


def test_scratch_of_a_convolution_counts_against_the_budget() -> None:
    """A 64x64 window over a 96x96x16 image needs a 2.4 GB patch matrix while every tensor
    of the model fits in a few MB: allocate_tensors refuses it by the budget (issue 25), it
    does not build it."""
    content = _conv((1, 96, 96, 16), 64)
    interp = offload.Interpreter(model_content=content, delegates=[], max_tensor_bytes=8 << 20)
    with pytest.raises(MemoryBudgetError, match=r"CONV_2D v1 \(node 0\) would need [\d,]+ bytes"):
        interp.allocate_tensors()


def test_memory_report_shows_the_largest_scratch() -> None:
    """memory_report() names the largest temporary a CPU kernel makes and its node."""
    interp = offload.Interpreter(model_content=_conv((1, 10, 10, 4), 3), delegates=[])
    interp.allocate_tensors()
    report = interp.memory_report()
    patches = 100 * 3 * 3 * 4 * 4
    assert report["cpu_kernel_scratch_node"] == 0
    assert report["cpu_kernel_scratch"] >= patches
