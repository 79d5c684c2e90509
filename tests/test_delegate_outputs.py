"""What the interpreter takes from a delegate kernel's invoke: an output whose shape only the
run settles at the shape the kernel gives (as LiteRT resizes such a tensor, and as a CPU
kernel returns it), held to the memory budget; a numpy scalar as the 0-d array it stands for;
anything else with a wrong dtype or shape refused, and the partition given back to the CPU."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence

import numpy as np
import pytest

import offload
from offload import Capabilities, Delegate, DelegateKernel, ModelTypeSupport, OpCapability
from offload.model.builder import ModelBuilder

from ._models import VALUE_SHAPES, computed_shape_model, scalar_model, value_shape_model

ALL_YES = {
    t: ModelTypeSupport(support="yes")
    for t in ("float32", "float16", "dynamic_range", "int8", "qat")
}
# What a kernel hands back for each output tensor (by name), given what it computed.
Mangle = Callable[[str, np.ndarray], object]


def _engine(mangle: Mangle | None = None) -> Delegate:
    """A delegate that takes MUL and ADD (float32) and runs its partition's nodes with numpy,
    as an engine would; ``mangle`` changes what it hands back."""

    class Kernel(DelegateKernel):
        def init(self, subgraph: offload.Subgraph, partition: offload.Partition) -> None:
            self.nodes = [subgraph.nodes[n] for n in partition.nodes]
            self.partition = partition
            self.names = {t.index: t.name for t in subgraph.tensors}

        def invoke(self, inputs: Sequence[np.ndarray]) -> list[object]:
            values = dict(zip(self.partition.inputs, inputs))
            for node in self.nodes:
                a, b = (values[t] for t in node.inputs)
                values[node.outputs[0]] = a * b if node.op == "MUL" else a + b
            out = [values[t] for t in self.partition.outputs]
            if mangle is None:
                return out
            return [mangle(self.names[t], v) for t, v in zip(self.partition.outputs, out)]

    class Engine(Delegate):
        name = "numpy_engine"
        CAPABILITIES = Capabilities(
            ops=(
                OpCapability(op="MUL", dtypes=("float32",)),
                OpCapability(op="ADD", dtypes=("float32",)),
            ),
            model_types=ALL_YES,
        )

        def create_kernel(self) -> DelegateKernel:
            return Kernel()

    return Engine()


def _interpreter(content: bytes, mangle: Mangle | None = None, **kw: object) -> offload.Interpreter:
    """The engine first, the CPU for what it does not take (RESHAPE, SHAPE, int32)."""
    interp = offload.Interpreter(
        model_content=content,
        experimental_delegates=[_engine(mangle)],
        **kw,  # type: ignore[arg-type]
    )
    interp.allocate_tensors()
    return interp


def _refused(
    content: bytes, mangle: Mangle, arrays: Sequence[np.ndarray], match: str, **kw: object
) -> None:
    """One invoke: the engine's partition goes back to the CPU with a warning matching
    ``match``, and the outputs are the CPU reference's all the same."""
    interp = _interpreter(content, mangle, **kw)
    assert [p.delegate for p in interp.plan().partitions] == ["numpy_engine"]
    with pytest.warns(UserWarning, match=match):
        got = _run(interp, arrays)
    assert list(interp.delegation_report()["restored_to_cpu"]) == ["0"]
    cpu = offload.Interpreter(model_content=content, delegates=[])
    cpu.allocate_tensors()
    for g, w in zip(got, _run(cpu, arrays)):
        np.testing.assert_array_equal(g, w)


def _run(interp: offload.Interpreter, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
    for d, a in zip(interp.get_input_details(), arrays):
        interp.set_tensor(d["index"], a)
    interp.invoke()
    return [interp.get_tensor(d["index"]) for d in interp.get_output_details()]


def _reshape_then_static_mul() -> bytes:
    """value_shape_model's y = MUL(RESHAPE(x, s)) beside w = MUL(x, x), whose [1, 8] is known."""
    b = ModelBuilder()
    x = b.add_input("x", (1, 8))
    s = b.add_input("s", (3,), np.int32)
    r = b.add_tensor("r", (1, 1, 8), shape_signature=(-1, -1, -1))
    y = b.add_tensor("y", (1, 1, 8), shape_signature=(-1, -1, -1))
    w = b.add_tensor("w", (1, 8))
    b.add_operator("RESHAPE", [x, s], [r])
    b.add_operator("MUL", [r, r], [y])
    b.add_operator("MUL", [x, x], [w])
    b.add_output(y)
    b.add_output(w)
    return b.build()


X = np.linspace(-2, 2, 8, dtype=np.float32).reshape(1, 8)


def test_an_output_shaped_by_values_is_taken_at_the_kernels_shape() -> None:
    """A MUL of a RESHAPE to the shape the program feeds: declared [1, 1, 8], each invoke's
    output has the shape s asks for (the same twice in a row too), strict mode, no warning."""
    interp = _interpreter(value_shape_model())
    assert [p.delegate for p in interp.plan().partitions] == ["numpy_engine"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for shape in (*VALUE_SHAPES, VALUE_SHAPES[-1]):
            (y,) = _run(interp, [X, np.array(shape, np.int32)])
            np.testing.assert_array_equal(y, (X * X).reshape(shape))
    assert not interp.delegation_report()["restored_to_cpu"]


def test_an_output_shaped_from_the_input_shape_follows_a_resize() -> None:
    """The MUL after a RESHAPE to a size computed from SHAPE: [b, 4, 2] at batch 1, 3, 1."""
    interp = _interpreter(computed_shape_model())
    for batch in (1, 3, 1):
        interp.resize_tensor_input(interp.get_input_details()[0]["index"], (batch, 8))
        interp.allocate_tensors()
        x = np.arange(batch * 8, dtype=np.float32).reshape(batch, 8)
        y, z = _run(interp, [x])
        np.testing.assert_array_equal(y, (x * x).reshape(batch, 4, 2))
        np.testing.assert_array_equal(z, x[:, :4])
    assert not interp.delegation_report()["restored_to_cpu"]


def test_a_wrong_dtype_is_refused_even_where_the_shape_is_the_runs() -> None:
    """Only the shape is the run's to settle: a float64 output is refused, naming both."""
    _refused(
        value_shape_model(),
        lambda name, v: v.astype(np.float64),
        [X, np.array((1, 4, 2), np.int32)],
        r"'y'\): expected float32\[1, 1, 8\], found float64",
    )


def test_a_wrong_shape_is_refused_where_the_shape_is_known() -> None:
    """In the same partition, w's [1, 8] is known before the run: [8] instead is refused,
    while y takes the shape s gives it."""

    def flatten_w(name: str, value: np.ndarray) -> np.ndarray:
        return value.reshape(-1) if name == "w" else value

    _refused(
        _reshape_then_static_mul(),
        flatten_w,
        [X, np.array((2, 2, 2), np.int32)],
        r"'w'\): expected float32\[1, 8\], found float32\[8\]",
    )


def test_an_output_shaped_by_values_is_held_to_the_memory_budget() -> None:
    """A kernel giving 2 KiB where max_tensor_bytes is 1 KiB is refused with the budget's
    error, as a CPU kernel of a value-shaped op is."""

    def grow(name: str, value: np.ndarray) -> np.ndarray:
        return np.zeros((64, 8), np.float32)

    _refused(
        value_shape_model(),
        grow,
        [X, np.array((1, 4, 2), np.int32)],
        "MemoryBudgetError.*max_tensor_bytes=1,024",
        max_tensor_bytes=1024,
    )


def test_numpy_scalars_stand_for_0d_arrays() -> None:
    """numpy gives a 0-d product as a scalar (np.float32): taken for a 0-d output, and the
    interpreter reads it back as LiteRT does; a scalar for y[3] is refused."""
    content = scalar_model()
    cpu = offload.Interpreter(model_content=content, delegates=[])
    cpu.allocate_tensors()
    feed = [np.array(1.5, np.float32), np.arange(3, dtype=np.float32), np.array(7, np.int32)]
    interp = _interpreter(content, lambda name, v: v[()])  # every 0-d array as a scalar
    assert [p.delegate for p in interp.plan().partitions] == ["numpy_engine"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = _run(interp, feed)
    for g, w in zip(got, _run(cpu, feed)):
        assert type(g) is type(w) and g.dtype == w.dtype and np.shape(g) == np.shape(w)
        np.testing.assert_array_equal(g, w)
    assert not interp.delegation_report()["restored_to_cpu"]

    def scalar_y(name: str, value: np.ndarray) -> object:
        return value[0] if name == "y" else value

    _refused(content, scalar_y, feed, r"'y'\): expected float32\[3\], found float32\[\]")
