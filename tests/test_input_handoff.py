"""A delegate kernel takes model inputs straight from set_tensor (DelegateKernel.take_input):
one copy per input instead of two, and every path that reads an input still sees its value."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
import pytest

import offload
from offload import Capabilities, Delegate, DelegateKernel, ModelTypeSupport, OpCapability
from offload.errors import DelegateError

from ._models import add_then_exp_model

ALL_YES = {
    t: ModelTypeSupport(support="yes")
    for t in ("float32", "float16", "dynamic_range", "int8", "qat")
}
X = np.arange(6, dtype=np.float32).reshape(1, 6) - 2.5


def _model(x_read_twice: bool = False) -> bytes:
    return add_then_exp_model(x_read_twice)


class TakingKernel(DelegateKernel):
    """Holds a taken input in an "engine" of its own, and records what invoke received."""

    fail_take = False
    fail_invoke = False
    fail_read = False

    def init(self, subgraph, partition) -> None:  # noqa: ANN001
        self.engine: dict[int, np.ndarray] = {}
        self.takes = 0
        self.received: list[list[bool]] = []

    def take_input(self, position: int, value: np.ndarray) -> bool:
        if self.fail_take:
            raise RuntimeError("no room")
        assert not value.flags.writeable  # the caller's array, read-only
        self.engine[position] = np.array(value)
        self.takes += 1
        return True

    def read_input(self, position: int) -> np.ndarray:
        if self.fail_read:
            raise RuntimeError("engine lost it")
        return np.array(self.engine[position])

    def invoke(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        self.received.append([a is None for a in inputs])
        if self.fail_invoke:
            raise RuntimeError("device lost")
        values = [self.engine[p] if a is None else a for p, a in enumerate(inputs)]
        # ADD(x, x) reads one tensor; the second model's last ADD reads two.
        return [values[0] + values[-1]]


def _delegate(**flags: bool) -> tuple[Delegate, list[TakingKernel]]:
    made: list[TakingKernel] = []

    class Adds(Delegate):
        name = "adds"
        CAPABILITIES = Capabilities(ops=(OpCapability(op="ADD"),), model_types=ALL_YES)

        def create_kernel(self) -> DelegateKernel:
            kernel = TakingKernel()
            for key, value in flags.items():
                setattr(kernel, key, value)
            made.append(kernel)
            return kernel

    return Adds(), made


def _interpreter(delegate: Delegate, **kwargs: object) -> offload.Interpreter:
    interp = offload.Interpreter(
        model_content=kwargs.pop("content", _model()), experimental_delegates=[delegate], **kwargs
    )
    interp.allocate_tensors()
    return interp


def _reference(value: np.ndarray, content: bytes | None = None) -> np.ndarray:
    interp = offload.Interpreter(model_content=content or _model(), delegates=[])
    interp.allocate_tensors()
    interp.set_tensor(interp.get_input_details()[0]["index"], value)
    interp.invoke()
    return interp.get_tensor(interp.get_output_details()[0]["index"])


def _run(interp: offload.Interpreter, value: np.ndarray | None) -> np.ndarray:
    if value is not None:
        interp.set_tensor(interp.get_input_details()[0]["index"], value)
    interp.invoke()
    return interp.get_tensor(interp.get_output_details()[0]["index"])


def test_a_taken_input_reaches_the_kernel_once_and_gives_the_reference() -> None:
    delegate, made = _delegate()
    interp = _interpreter(delegate)
    out = _run(interp, X)
    (kernel,) = made
    assert kernel.takes == 1 and kernel.received == [[True]]
    np.testing.assert_array_equal(out, _reference(X))
    # Invoked again without a new value: the kernel still holds it.
    np.testing.assert_array_equal(_run(interp, None), _reference(X))
    assert kernel.received[-1] == [True]


def test_the_callers_array_is_copied_at_set_tensor() -> None:
    delegate, _ = _delegate()
    interp = _interpreter(delegate)
    value = X.copy()
    interp.set_tensor(interp.get_input_details()[0]["index"], value)
    value[...] = 100.0  # after set_tensor: must not reach the run, as in LiteRT
    np.testing.assert_array_equal(_run(interp, None), _reference(X))


def test_get_tensor_of_a_taken_input_gives_its_value_back() -> None:
    delegate, made = _delegate()
    interp = _interpreter(delegate)
    index = interp.get_input_details()[0]["index"]
    interp.set_tensor(index, X)
    np.testing.assert_array_equal(interp.get_tensor(index), X)
    # Taken back into the interpreter's buffer: the next run passes it as usual.
    np.testing.assert_array_equal(_run(interp, None), _reference(X))
    assert made[0].received[-1] == [False]


def test_an_input_with_a_view_out_is_never_handed_over() -> None:
    delegate, made = _delegate()
    interp = _interpreter(delegate)
    index = interp.get_input_details()[0]["index"]
    view = interp.tensor(index)
    interp.set_tensor(index, X)
    np.testing.assert_array_equal(view(), X)  # the view shows what was set
    view()[...] = X * 2  # and writing through it is what the run reads
    np.testing.assert_array_equal(_run(interp, None), _reference(X * 2))
    assert made[0].takes == 0 and made[0].received == [[False]]


def test_an_input_another_node_reads_too_is_not_offered() -> None:
    content = _model(x_read_twice=True)
    delegate, made = _delegate()
    interp = _interpreter(delegate, content=content)
    np.testing.assert_array_equal(_run(interp, X), _reference(X, content))
    assert made and all(kernel.takes == 0 for kernel in made)


def test_a_kernel_whose_take_fails_gets_the_copy_as_before() -> None:
    delegate, made = _delegate(fail_take=True)
    interp = _interpreter(delegate)
    np.testing.assert_array_equal(_run(interp, X), _reference(X))
    assert made[0].received == [[False]]


def test_the_cpu_taking_over_a_failed_partition_reads_the_taken_input() -> None:
    delegate, made = _delegate(fail_invoke=True)
    interp = _interpreter(delegate)
    with pytest.warns(UserWarning, match="failed in invoke"):
        out = _run(interp, X)
    np.testing.assert_array_equal(out, _reference(X))
    np.testing.assert_array_equal(_run(interp, X + 1), _reference(X + 1))


def test_a_kernel_that_cannot_give_a_value_back_is_a_typed_error() -> None:
    delegate, _ = _delegate(fail_read=True)
    interp = _interpreter(delegate)
    index = interp.get_input_details()[0]["index"]
    interp.set_tensor(index, X)
    with pytest.raises(DelegateError, match="could not give it back.*set it again"):
        interp.get_tensor(index)


def test_resizing_keeps_nothing_stale() -> None:
    delegate, made = _delegate()
    interp = _interpreter(delegate)
    index = interp.get_input_details()[0]["index"]
    interp.set_tensor(index, X)
    interp.allocate_tensors()  # taken back before the kernel is prepared again
    np.testing.assert_array_equal(interp.get_tensor(index), X)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(_run(interp, X * 3), _reference(X * 3))
    assert made[0].takes == 2


class _Marked(np.ndarray):
    """An ndarray subclass: offered through set_tensor's full checks, not its quick path."""


@pytest.mark.parametrize(
    "form",
    ["exact", "numpy int index", "strided view", "subclass", "read-only", "float64"],
)
def test_every_form_of_a_value_goes_the_same_way(form: str) -> None:
    """set_tensor offers an exact float32 array of the input's shape in a few operations and
    anything else after its full checks: every form that LiteRT accepts reaches the kernel
    (taken once) and gives the reference, and one it refuses is the same typed error."""
    delegate, made = _delegate()
    interp = _interpreter(delegate)
    index: object = interp.get_input_details()[0]["index"]
    wide = np.repeat(X, 2, axis=1)
    readonly = X.copy()
    readonly.flags.writeable = False
    value = {
        "exact": X.copy(),
        "numpy int index": X.copy(),
        "strided view": wide[:, ::2],
        "subclass": X.copy().view(_Marked),
        "read-only": readonly,
        "float64": X.astype(np.float64),
    }[form]
    if form == "numpy int index":
        index = np.int64(index)  # type: ignore[call-overload]
    if form == "float64":
        with pytest.raises(offload.errors.TensorTypeError, match="expected dtype float32"):
            interp.set_tensor(index, value)  # type: ignore[arg-type]
        assert made[0].takes == 0
        return
    interp.set_tensor(index, value)  # type: ignore[arg-type]
    assert made[0].takes == 1
    np.testing.assert_array_equal(_run(interp, None), _reference(X))
    np.testing.assert_array_equal(interp.get_tensor(int(index)), X)  # type: ignore[call-overload]


def test_a_value_set_after_a_resize_is_kept_until_allocate() -> None:
    """Between resize_tensor_input and allocate_tensors the quick path stands aside: the value
    is checked against the new shape and kept by the interpreter."""
    delegate, made = _delegate()
    interp = _interpreter(delegate)
    index = interp.get_input_details()[0]["index"]
    interp.resize_tensor_input(index, [1, 6])
    interp.set_tensor(index, X)
    assert made[0].takes == 0
    interp.allocate_tensors()
    np.testing.assert_array_equal(interp.get_tensor(index), X)
    np.testing.assert_array_equal(_run(interp, None), _reference(X))


def _one_add_model() -> bytes:
    """x[1, 6] -> ADD(x, x) -> y: a delegate that claims ADD takes the whole model."""
    from offload.model.builder import ModelBuilder

    b = ModelBuilder()
    x = b.add_input("x", (1, 6))
    y = b.add_tensor("y", (1, 6))
    b.add_operator("ADD", [x, x], [y])
    b.add_output(y)
    return b.build()


def test_a_whole_model_on_one_kernel_runs_as_any_plan() -> None:
    """A plan of one delegate partition whose inputs the kernel holds runs by its own short
    path: the same numbers, the inputs handed as None, and without a new value the kernel's."""
    content = _one_add_model()
    delegate, made = _delegate()
    interp = _interpreter(delegate, content=content)
    assert interp._executor.sole is not None  # the path under test
    np.testing.assert_array_equal(_run(interp, X), X + X)
    np.testing.assert_array_equal(_run(interp, None), X + X)
    np.testing.assert_array_equal(_run(interp, X * 2), X * 4)
    assert made[0].takes == 2 and made[0].received == [[True]] * 3


@pytest.mark.parametrize("failure", ["raises", "wrong dtype"])
def test_a_whole_model_kernel_failing_in_invoke_gives_way_to_the_cpu(failure: str) -> None:
    """On that short path a kernel that raises or returns the wrong dtype is given back to the
    CPU with the usual warning, which reads the input the kernel held; strict mode raises."""
    content = _one_add_model()

    def broken() -> Delegate:
        delegate, made = _delegate(fail_invoke=failure == "raises")
        if failure == "wrong dtype":
            original = TakingKernel.invoke

            def wide(self: TakingKernel, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
                return [a.astype(np.float64) for a in original(self, inputs)]

            delegate.create_kernel = lambda: _patched(made, wide)  # type: ignore[method-assign]
        return delegate

    interp = _interpreter(broken(), content=content)
    with pytest.warns(UserWarning, match="failed in invoke"):
        np.testing.assert_array_equal(_run(interp, X), X + X)
    np.testing.assert_array_equal(_run(interp, X + 1), (X + 1) * 2)
    strict = _interpreter(broken(), content=content, allow_cpu_fallback=False)
    strict.set_tensor(strict.get_input_details()[0]["index"], X)
    with pytest.raises(DelegateError, match="failed in invoke"):
        strict.invoke()


def _patched(made: list[TakingKernel], invoke: object) -> TakingKernel:
    kernel = TakingKernel()
    kernel.invoke = invoke.__get__(kernel)  # type: ignore[attr-defined,method-assign]
    made.append(kernel)
    return kernel
