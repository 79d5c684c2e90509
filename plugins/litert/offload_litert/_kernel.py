"""One partition in LiteRT's ``Interpreter``: export and load once, then copy in, run, copy out.

The hot path is as thin as LiteRT's own Python loop: ``set_tensor`` for each boundary input (one
copy into LiteRT's buffer), ``invoke``, and for each boundary output LiteRT's ``get_tensor``
(one copy into a new array), which the interpreter takes as it is (``fresh_outputs``). A view
of LiteRT's buffer never outlives the line that writes through it: LiteRT refuses to invoke
while one exists.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

import offload
from offload import DelegateKernel
from offload.errors import DelegateError
from offload_litert._engine import litert, logged_errors, native_stderr

if TYPE_CHECKING:
    from offload_litert._delegate import LiteRTOptions

__all__ = ["LiteRTKernel", "litert_failure", "open_interpreter"]


def litert_failure(what: str, exc: Exception | str, log: list[str]) -> DelegateError:
    """LiteRT's failure ``exc`` as a DelegateError, led by the errors it logged meanwhile
    (its exceptions often carry only a source location)."""
    raised = exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}"
    raised = " ".join(raised.split())
    said = logged_errors(log)
    return DelegateError(
        f"LiteRT {what}: {said} (raised {raised})" if said else f"LiteRT {what}: {raised}"
    )


def open_interpreter(model: bytes, options: LiteRTOptions, library: Any = None) -> Any:
    """LiteRT's Interpreter for ``model`` with the options' threads, kernels and C delegate.

    What LiteRT logs while building it is kept out of the user's terminal (an "XNNPACK
    delegate created" line per partition says nothing); when building fails, LiteRT's logged
    errors come with the :class:`~offload.errors.DelegateError` raised.
    """
    assert litert is not None
    resolvers = {
        "xnnpack": litert.OpResolverType.AUTO,
        "builtin": litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
    }
    with native_stderr() as log:
        try:
            return litert.Interpreter(
                model_content=model,
                num_threads=options.num_threads,
                experimental_op_resolver_type=resolvers[options.kernels],
                experimental_delegates=None if library is None else [library],
            )
        except Exception as exc:
            failure = exc
    try:
        raise litert_failure("could not load the partition", failure, log) from failure
    finally:
        # This frame is in failure's traceback: holding failure too would make a cycle that
        # keeps LiteRT's half-built interpreter, and the C delegate instance it holds, alive
        # until the garbage collector runs, not until the last user lets go.
        del failure


class LiteRTKernel(DelegateKernel):
    """Runs one partition in LiteRT's Interpreter from its exported bytes."""

    # Each invoke copies LiteRT's outputs into new arrays and never touches them again, so the
    # interpreter takes them as they are instead of copying them once more: as the default
    # delegate, this path is what a program swapped from LiteRT pays on every invoke.
    fresh_outputs = True

    def __init__(self, options: LiteRTOptions, library: Any = None) -> None:
        self.options = options
        # The delegate's one C delegate instance (LiteRT's Delegate), shared with every other
        # partition and interpreter; LiteRT's Interpreter keeps it alive while it uses it.
        self.library = library

    def init(self, subgraph: offload.Subgraph, partition: offload.Partition) -> None:
        self.exported = offload.export_partition(subgraph, partition)
        opts = self.options
        self.engine = open_interpreter(self.exported.model_bytes, opts, self.library)
        self._inputs = [d["index"] for d in self.engine.get_input_details()]
        self._outputs = [d["index"] for d in self.engine.get_output_details()]
        self._positions = self.exported.input_positions
        # (LiteRT input index, position in invoke's arrays, shape LiteRT holds) per input.
        self._feeds: list[tuple[int, int, tuple[int, ...]]] = []
        self._invokes = 0

    def prepare(self, input_shapes: Sequence[tuple[int, ...]]) -> None:
        self._allocate([tuple(input_shapes[p]) for p in self._positions])

    def _allocate(self, shapes: list[tuple[int, ...]]) -> None:
        """Resize LiteRT's inputs to ``shapes`` (when they changed) and allocate."""
        if self._feeds and shapes == [shape for _, _, shape in self._feeds]:
            return
        engine = self.engine
        for d, shape in zip(engine.get_input_details(), shapes):
            if shape != tuple(d["shape"]):
                engine.resize_tensor_input(d["index"], shape)
        failure: Exception | None
        with native_stderr() as log:
            try:
                engine.allocate_tensors()
            except Exception as exc:
                failure = exc
            else:
                failure = None
        if failure is not None:
            try:
                raise litert_failure(f"could not allocate for input shapes {shapes}", failure, log)
            finally:
                del failure  # no cycle through this frame (see open_interpreter)
        self._feeds = list(zip(self._inputs, self._positions, shapes))
        # LiteRT's get_tensor gives a 0-d output as a numpy scalar; found once here, those are
        # made the 0-d arrays offload holds, so every invoke keeps the interpreter's fast check.
        self._scalar_outputs = [
            k for k, d in enumerate(engine.get_output_details()) if len(d["shape"]) == 0
        ]
        self._feed_at = {position: k for k, position in enumerate(self._positions)}
        # Numeric inputs are copied into a view of LiteRT's buffer: the interpreter hands its
        # inputs over read-only, and LiteRT's set_tensor copies a read-only array twice (it
        # takes 11 us instead of 6 for a 128x128x3 float image). String tensors have no view,
        # and a 0-d tensor's "view" is a numpy scalar, a copy nothing can be written through:
        # LiteRT's set_tensor and get_tensor handle them.
        self._writers: list[Callable[[np.ndarray], None]] = [
            _copier(engine.tensor(d["index"]))
            if np.dtype(d["dtype"]).kind in "biufc" and len(shape) > 0
            else functools.partial(engine.set_tensor, d["index"])
            for d, shape in zip(engine.get_input_details(), shapes)
        ]

    def take_input(self, position: int, value: np.ndarray) -> bool:
        # Straight from set_tensor into LiteRT's buffer: the one copy LiteRT itself makes.
        k = self._feed_at.get(position)
        if k is None or value.shape != self._feeds[k][2]:
            return False
        self._writers[k](value)
        return True

    def read_input(self, position: int) -> np.ndarray:
        return np.asarray(self.engine.get_tensor(self._feeds[self._feed_at[position]][0]))

    def invoke(self, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        engine = self.engine
        for (_, position, shape), write in zip(self._feeds, self._writers):
            array = inputs[position]
            if array is None:  # taken by take_input: in LiteRT's buffer already
                continue
            if array.shape != shape:
                # A shape only the values settled (a RESHAPE to a computed shape upstream).
                self._reallocate(inputs)
                return self.invoke(inputs)
            write(array)
        engine.invoke()
        self._invokes += 1
        # LiteRT's get_tensor copies into a new array: one pybind call, cheaper than copying
        # from a view (1.1 against 1.8 us warm, 23 against 33 us cold for two outputs).
        # (A 0-d output comes back as a numpy scalar, which the interpreter takes as the 0-d
        # array it stands for.)
        outputs = [engine.get_tensor(i) for i in self._outputs]
        for k in self._scalar_outputs:
            outputs[k] = np.asarray(outputs[k])
        return outputs

    def _reallocate(self, inputs: Sequence[np.ndarray | None]) -> None:
        """Allocate for the shapes of ``inputs``, keeping the values LiteRT holds for the
        positions it took (None), which allocating may not keep."""
        held = {
            k: self.engine.get_tensor(index)
            for k, (index, position, _) in enumerate(self._feeds)
            if inputs[position] is None
        }
        shapes = []
        for _, position, shape in self._feeds:
            array = inputs[position]
            shapes.append(shape if array is None else tuple(array.shape))
        self._allocate(shapes)
        for k, value in held.items():
            self._writers[k](value)

    def reset_variables(self) -> None:
        # LiteRT's ResetVariableTensors: the partition's state (exported as variables of its
        # model) starts over, as in LiteRT running the whole model.
        self.engine.reset_all_variables()

    def memory_bytes(self) -> dict[str, int]:
        """Host: the exported model LiteRT reads its constants from. The outputs are new
        arrays each invoke, the interpreter's from then on (counted with its tensors), and
        LiteRT's own arena is not visible from Python: neither is counted here."""
        return {"device": 0, "host": len(self.exported.model_bytes)}

    def stats(self) -> dict[str, Any]:
        opts = self.options
        return {
            "engine": "Interpreter",
            "kernels": opts.kernels,
            "num_threads": opts.num_threads,
            "external_delegate": opts.external_delegate_path,
            "model_bytes": len(self.exported.model_bytes),
            "invokes": self._invokes,
        }


def _copier(view: Callable[[], np.ndarray]) -> Callable[[np.ndarray], None]:
    """Copy an array into the LiteRT buffer ``view`` gives; the view is gone when it returns
    (LiteRT refuses to invoke while one exists). Same dtype and shape only, as set_tensor."""

    def write(array: np.ndarray) -> None:
        np.copyto(view(), array, casting="no")

    return write
