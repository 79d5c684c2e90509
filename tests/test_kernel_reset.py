"""DelegateKernel.reset_variables: state a delegate keeps itself starts over with the
interpreter's reset_all_variables, and a kernel that cannot reset gives its partition back."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

import offload
from offload import Capabilities, Delegate, DelegateKernel, ModelTypeSupport, OpCapability
from offload.errors import DelegateError
from offload.model import ModelBuilder

ALL_YES = {t: ModelTypeSupport(support="yes") for t in offload.ModelType.__args__}


def _add_model() -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", shape=(1, 3))
    y = b.add_tensor("y", shape=(1, 3))
    b.add_operator("ADD", inputs=[x, x], outputs=[y])
    b.add_output(y)
    return b.build()


class _Counting(DelegateKernel):
    """x + x plus the number of earlier invokes since the last reset: state of its own."""

    fail_reset = False

    def init(self, subgraph: offload.Subgraph, partition: offload.Partition) -> None:
        self.calls = 0

    def invoke(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        out = inputs[0] + inputs[0] + np.float32(self.calls)
        self.calls += 1
        return [out]

    def reset_variables(self) -> None:
        if self.fail_reset:
            raise RuntimeError("cannot reset")
        self.calls = 0


class _Stateful(Delegate):
    name = "stateful"
    CAPABILITIES = Capabilities(ops=(OpCapability(op="ADD"),), model_types=ALL_YES)
    fail_reset = False

    def create_kernel(self) -> DelegateKernel:
        kernel = _Counting()
        kernel.fail_reset = self.fail_reset
        return kernel


def _outputs(interp: offload.Interpreter, runs: int) -> list[float]:
    x = np.ones((1, 3), np.float32)
    found = []
    for _ in range(runs):
        interp.set_tensor(interp.get_input_details()[0]["index"], x)
        interp.invoke()
        found.append(float(interp.get_tensor(interp.get_output_details()[0]["index"])[0, 0]))
    return found


def test_default_reset_does_nothing() -> None:
    """A kernel without state needs nothing: the base class's reset_variables is a no-op."""
    assert DelegateKernel().reset_variables() is None


def test_reset_all_variables_resets_the_delegates_state() -> None:
    """Interpreter.reset_all_variables calls each delegate kernel's reset_variables."""
    interp = offload.Interpreter(model_content=_add_model(), experimental_delegates=[_Stateful()])
    interp.allocate_tensors()
    assert _outputs(interp, 3) == [2.0, 3.0, 4.0]
    interp.reset_all_variables()
    assert _outputs(interp, 2) == [2.0, 3.0]


def test_a_kernel_that_cannot_reset_gives_its_partition_to_the_cpu() -> None:
    """A failing reset: one warning naming the delegate, and the CPU runs the partition."""
    delegate = _Stateful()
    delegate.fail_reset = True
    interp = offload.Interpreter(model_content=_add_model(), experimental_delegates=[delegate])
    interp.allocate_tensors()
    assert _outputs(interp, 2) == [2.0, 3.0]
    with pytest.warns(UserWarning, match="'stateful' failed to reset partition 0.*cannot reset"):
        interp.reset_all_variables()
    assert interp.delegate_kernels() == {}
    assert _outputs(interp, 2) == [2.0, 2.0]
    assert "0" in interp.delegation_report()["restored_to_cpu"]


def test_strict_mode_makes_a_failed_reset_an_error() -> None:
    """With allow_cpu_fallback=False a failed reset raises DelegateError."""
    delegate = _Stateful()
    delegate.fail_reset = True
    interp = offload.Interpreter(
        model_content=_add_model(), experimental_delegates=[delegate], allow_cpu_fallback=False
    )
    interp.allocate_tensors()
    with pytest.raises(DelegateError, match="failed to reset partition 0"):
        interp.reset_all_variables()
