"""Hostile models and faulty delegates at allocate_tensors and invoke: typed errors, no garbage.

Each crafted model here is built with the model builder to carry one lie (a declared shape
its op cannot produce, a tensor too large to allocate); each faulty delegate fails one way.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Sequence

import numpy as np
import pytest

import offload
from offload import Capabilities, Delegate, DelegateKernel, ModelTypeSupport, OpCapability
from offload.errors import (
    DelegateError,
    InterpreterStateError,
    MemoryBudgetError,
    OffloadError,
    TensorShapeError,
)
from offload.model.builder import ModelBuilder

ALL_YES = {
    t: ModelTypeSupport(support="yes")
    for t in ("float32", "float16", "dynamic_range", "int8", "qat")
}


def _unary(op: str, in_shape: tuple[int, ...], out_shape: tuple[int, ...]) -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", shape=in_shape)
    y = b.add_tensor("y", shape=out_shape)
    b.add_operator(op, inputs=[x], outputs=[y])
    b.add_output(y)
    return b.build()


def _add_relu_add() -> bytes:
    """x -> ADD(x, x) -> RELU -> ADD(r, x) -> y: ADDs for a delegate, RELU on the CPU."""
    b = ModelBuilder()
    x = b.add_input("x", shape=(2, 3))
    a = b.add_tensor("a", shape=(2, 3))
    r = b.add_tensor("r", shape=(2, 3))
    y = b.add_tensor("y", shape=(2, 3))
    b.add_operator("ADD", inputs=[x, x], outputs=[a])
    b.add_operator("RELU", inputs=[a], outputs=[r])
    b.add_operator("ADD", inputs=[r, x], outputs=[y])
    b.add_output(y)
    return b.build()


def _single_add() -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", shape=(2, 3))
    y = b.add_tensor("y", shape=(2, 3))
    b.add_operator("ADD", inputs=[x, x], outputs=[y])
    b.add_output(y)
    return b.build()


def _run(interp: offload.Interpreter, x: np.ndarray) -> np.ndarray:
    interp.set_tensor(interp.get_input_details()[0]["index"], x)
    interp.invoke()
    return interp.get_tensor(interp.get_output_details()[0]["index"])


# -- shapes and sizes at allocate_tensors ------------------------------------------------------


@pytest.mark.parametrize("op", ["RELU", "SOFTMAX", "LOGISTIC"])
def test_declared_output_shape_is_replaced_by_the_computed_one(op: str) -> None:
    """A [64, 64] input declared to give a [1, 4] output runs as LiteRT runs it: the output
    has the shape the op computes, and the correction is reported."""
    litert = pytest.importorskip("ai_edge_litert.interpreter")
    content = _unary(op, (64, 64), (1, 4))
    x = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    interp = offload.Interpreter(model_content=content, delegates=[])
    interp.allocate_tensors()
    found = _run(interp, x)
    reference = litert.Interpreter(model_content=content)
    reference.allocate_tensors()
    expected = _run(reference, x)
    assert found.shape == expected.shape == (64, 64)
    np.testing.assert_allclose(found, expected, rtol=1e-6, atol=1e-7)
    corrections = interp.delegation_report()["shape_corrections"]
    assert corrections == [{"tensor": 1, "name": "y", "declared": [1, 4], "computed": [64, 64]}]


def test_broadcast_that_cannot_happen_is_refused() -> None:
    """ADD of [2, 3] and [4] is no broadcast: a typed error, not a numpy ValueError later."""
    b = ModelBuilder()
    x = b.add_input("x", shape=(2, 3))
    c = b.add_constant("c", np.ones(4, np.float32))
    y = b.add_tensor("y", shape=(2, 3))
    b.add_operator("ADD", inputs=[x, c], outputs=[y])
    b.add_output(y)
    interp = offload.Interpreter(model_content=b.build(), delegates=[])
    with pytest.raises(TensorShapeError, match=r"broadcast.*\[2, 3\] and \[4\]"):
        interp.allocate_tensors()


def test_reduction_axis_out_of_range_is_refused() -> None:
    """MEAN over axis 7 of a rank-2 tensor fails at allocate_tensors with the axis named."""
    b = ModelBuilder()
    x = b.add_input("x", shape=(2, 3))
    axis = b.add_constant("axis", np.array([7], np.int32))
    y = b.add_tensor("y", shape=(2,))
    b.add_operator("MEAN", inputs=[x, axis], outputs=[y], options={"keep_dims": False})
    b.add_output(y)
    with pytest.raises(TensorShapeError, match="axes in"):
        offload.Interpreter(model_content=b.build(), delegates=[]).allocate_tensors()


def test_pool_window_that_cannot_fit_is_refused() -> None:
    """A VALID max pool whose filter is far larger than its input fails typed (the window
    would read outside the input), where an empty-but-valid output is allowed."""
    model = ModelBuilder()
    x = model.add_input("x", shape=(1, 4, 4, 1))
    y = model.add_tensor("y", shape=(1, 1, 1, 1))
    model.add_operator(
        "MAX_POOL_2D",
        inputs=[x],
        outputs=[y],
        options={
            "padding": "VALID",
            "filter_height": 1000,
            "filter_width": 1000,
            "stride_h": 1,
            "stride_w": 1,
        },
    )
    model.add_output(y)
    with pytest.raises(TensorShapeError, match="window"):
        offload.Interpreter(model_content=model.build(), delegates=[]).allocate_tensors()


def test_tensor_over_the_memory_budget_is_refused_before_allocation() -> None:
    """A 16 GiB input fails with MemoryBudgetError naming the tensor and its bytes."""
    interp = offload.Interpreter(
        model_content=_unary("RELU", (65536, 65536), (65536, 65536)), delegates=[]
    )
    with pytest.raises(MemoryBudgetError, match=r"tensor 0 \('x'\).*17,179,869,184 bytes"):
        interp.allocate_tensors()


def test_memory_budget_is_configurable() -> None:
    """A budget below a model's needs fails; None lifts it; a bad value is refused."""
    content = _unary("RELU", (4, 4), (4, 4))
    with pytest.raises(MemoryBudgetError, match="max_tensor_bytes=32"):
        offload.Interpreter(
            model_content=content, max_tensor_bytes=32, delegates=[]
        ).allocate_tensors()
    offload.Interpreter(
        model_content=content, max_tensor_bytes=None, delegates=[]
    ).allocate_tensors()
    with pytest.raises(ValueError, match="max_tensor_bytes"):
        offload.Interpreter(model_content=content, max_tensor_bytes=-1, delegates=[])


def test_resize_propagates_computed_shapes() -> None:
    """After resize_tensor_input the computed shapes replace the declared ones, as LiteRT's
    Prepare does, and output details report them."""
    interp = offload.Interpreter(model_content=_add_relu_add(), delegates=[])
    interp.resize_tensor_input(0, [5, 3])
    interp.allocate_tensors()
    assert list(interp.get_output_details()[0]["shape"]) == [5, 3]
    x = np.arange(15, dtype=np.float32).reshape(5, 3) - 7
    np.testing.assert_array_equal(_run(interp, x), np.maximum(x + x, 0) + x)


def test_block_size_is_in_quantization_parameters() -> None:
    """LiteRT's quantization_parameters has a block_size key; so do ours."""
    details = offload.Interpreter(model_content=_add_relu_add(), delegates=[]).get_input_details()[
        0
    ]
    assert details["quantization_parameters"]["block_size"] == 0


# -- delegates failing in invoke ------------------------------------------------------------


class _FlakyDelegate(Delegate):
    """Runs ADD nodes; its kernel behaves until ``fail_after`` invokes, then ``failure``."""

    name = "flaky"
    CAPABILITIES = Capabilities(ops=(OpCapability(op="ADD"),), model_types=ALL_YES)
    failure: Callable[[Sequence[np.ndarray]], Sequence[np.ndarray]]
    fail_after = 1
    calls = 0

    def create_kernel(self) -> DelegateKernel:
        delegate = self

        class Kernel(DelegateKernel):
            def init(self, subgraph, partition) -> None:  # noqa: ANN001
                self.n_inputs = len(partition.inputs)

            def invoke(self, inputs: Sequence[np.ndarray]) -> Sequence[np.ndarray]:
                type(delegate).calls += 1
                if type(delegate).calls > delegate.fail_after:
                    return delegate.failure(inputs)
                a = inputs[0]
                b = inputs[1] if len(inputs) > 1 else inputs[0]
                return [a + b]

        return Kernel()


def _raise_device_lost(inputs: Sequence[np.ndarray]) -> Sequence[np.ndarray]:
    raise OSError(5, "device lost")


FAILURES: dict[str, Callable[[Sequence[np.ndarray]], object]] = {
    "raises": _raise_device_lost,
    "returns None": lambda inputs: None,
    "returns []": lambda inputs: [],
    "wrong shape": lambda inputs: [np.zeros((1, 4), np.float32)],
    "wrong dtype": lambda inputs: [np.zeros((2, 3), np.float64)],
    "not an array": lambda inputs: [[0.0] * 6],
}


def _flaky(failure: Callable[..., object]) -> type[_FlakyDelegate]:
    return type("Flaky", (_FlakyDelegate,), {"failure": staticmethod(failure), "calls": 0})


@pytest.mark.parametrize("how", sorted(FAILURES))
def test_partition_failing_in_invoke_moves_to_the_cpu_once(how: str) -> None:
    """A partition that fails in invoke (or returns bad outputs) is run on the CPU from then
    on, with one warning naming the delegate, the partition and its nodes; the failing
    invoke's outputs are still right and the delegate is not called again."""
    cls = _flaky(FAILURES[how])
    interp = offload.Interpreter(model_content=_add_relu_add(), experimental_delegates=[cls()])
    interp.allocate_tensors()
    assert len(interp.plan().partitions) == 2
    x = np.array([[1, -2, 3], [-4, 5, -6]], np.float32)
    expected = np.maximum(x + x, 0) + x
    np.testing.assert_array_equal(_run(interp, x), expected)  # first call: the delegate works
    with pytest.warns(UserWarning, match=r"'flaky' failed in invoke on partition 0 \(nodes 0\)"):
        np.testing.assert_array_equal(_run(interp, x), expected)
    calls = cls.calls
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(_run(interp, x), expected)
    # Partition 1 failed on its first call after the threshold too and was restored once.
    assert set(interp.delegation_report()["restored_to_cpu"]) == {"0", "1"}
    assert cls.calls == calls


def test_partition_failing_in_invoke_is_a_named_error_in_strict_mode() -> None:
    """With allow_cpu_fallback=False the failure is a DelegateError naming the delegate, the
    partition, its nodes and the original error."""
    cls = _flaky(_raise_device_lost)
    cls.fail_after = 0
    interp = offload.Interpreter(
        model_content=_single_add(), experimental_delegates=[cls()], allow_cpu_fallback=False
    )
    interp.allocate_tensors()
    with pytest.raises(DelegateError, match=r"'flaky'.*partition 0 \(nodes 0\).*device lost"):
        _run(interp, np.ones((2, 3), np.float32))


def test_stateful_steps_before_a_failing_partition_run_once() -> None:
    """Recovery goes on from the failed partition: earlier steps are not repeated."""
    cls = _flaky(_raise_device_lost)
    cls.fail_after = 1
    b = ModelBuilder()
    x = b.add_input("x", shape=(2, 3))
    r = b.add_tensor("r", shape=(2, 3))
    y = b.add_tensor("y", shape=(2, 3))
    b.add_operator("RELU", inputs=[x], outputs=[r])
    b.add_operator("ADD", inputs=[r, r], outputs=[y])
    b.add_output(y)
    interp = offload.Interpreter(model_content=b.build(), experimental_delegates=[cls()])
    interp.allocate_tensors()
    x_value = np.full((2, 3), 2.0, np.float32)
    _run(interp, x_value)
    with pytest.warns(UserWarning):
        out = _run(interp, x_value)
    np.testing.assert_array_equal(out, 2 * np.maximum(x_value, 0))
    relu_steps = [cs for cs in interp._executor.compiled if cs.label.startswith("RELU")]
    assert len(relu_steps) == 1


# -- one call at a time ------------------------------------------------------------------------


def test_second_thread_gets_a_typed_error_while_one_invokes() -> None:
    """While one thread is inside invoke(), another thread's invoke() or set_tensor() on the
    same Interpreter raises InterpreterStateError; afterwards both work again."""
    entered, release = threading.Event(), threading.Event()

    def blocking(inputs: Sequence[np.ndarray]) -> Sequence[np.ndarray]:
        entered.set()
        release.wait(timeout=30)
        return [inputs[0] + inputs[0]]

    cls = _flaky(blocking)
    cls.fail_after = 0
    interp = offload.Interpreter(model_content=_single_add(), experimental_delegates=[cls()])
    interp.allocate_tensors()
    worker = threading.Thread(target=interp.invoke)
    worker.start()
    try:
        assert entered.wait(timeout=30)
        with pytest.raises(InterpreterStateError, match="another thread"):
            interp.invoke()
        with pytest.raises(InterpreterStateError, match="another thread"):
            interp.set_tensor(0, np.zeros((2, 3), np.float32))
    finally:
        release.set()
        worker.join(timeout=30)
    np.testing.assert_array_equal(_run(interp, np.ones((2, 3), np.float32)), 2)


def test_every_setup_failure_is_an_offload_error() -> None:
    """A kernel whose setup meets impossible inputs fails typed, with the node named."""
    b = ModelBuilder()
    x = b.add_input("x", shape=(1, 4, 4, 3))
    w = b.add_constant("w", np.ones((2, 3, 3, 5), np.float32))  # 5 input channels, not 3
    bias = b.add_constant("bias", np.zeros(2, np.float32))
    y = b.add_tensor("y", shape=(1, 4, 4, 2))
    b.add_operator("CONV_2D", inputs=[x, w, bias], outputs=[y], options={"padding": "SAME"})
    b.add_output(y)
    with pytest.raises(OffloadError, match="CONV_2D v1 \\(node 0\\)"):
        offload.Interpreter(model_content=b.build(), delegates=[]).allocate_tensors()
