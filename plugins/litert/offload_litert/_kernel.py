"""One partition in LiteRT's ``Interpreter``: export and load once, then copy in, run, copy out.

The hot path is as thin as LiteRT's own Python loop: ``set_tensor`` for each boundary input (one
copy into LiteRT's buffer), ``invoke``, and for each boundary output one copy from a view of
LiteRT's buffer into an array this kernel keeps, made once per shape. A view of LiteRT's
buffer never outlives the line that reads it: LiteRT refuses to invoke while one exists.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

import offload
from offload import DelegateKernel
from offload.errors import DelegateError
from offload_litert._delegate import load_library
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
    raise litert_failure("could not load the partition", failure, log) from failure


class LiteRTKernel(DelegateKernel):
    """Runs one partition in LiteRT's Interpreter from its exported bytes."""

    def __init__(self, options: LiteRTOptions) -> None:
        self.options = options

    def init(self, subgraph: offload.Subgraph, partition: offload.Partition) -> None:
        self.exported = offload.export_partition(subgraph, partition)
        opts = self.options
        library = None
        if opts.external_delegate_path:
            library = load_library(opts.external_delegate_path, opts.external_delegate_options)
        self.engine = open_interpreter(self.exported.model_bytes, opts, library)
        self._inputs = [d["index"] for d in self.engine.get_input_details()]
        self._outputs = [d["index"] for d in self.engine.get_output_details()]
        self._positions = self.exported.input_positions
        # (LiteRT input index, position in invoke's arrays, shape LiteRT holds) per input.
        self._feeds: list[tuple[int, int, tuple[int, ...]]] = []
        self._views = [self.engine.tensor(i) for i in self._outputs]
        self._out: list[np.ndarray] = []
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
        with native_stderr() as log:
            try:
                engine.allocate_tensors()
            except Exception as exc:
                failure = exc
            else:
                failure = None
        if failure is not None:
            raise litert_failure(f"could not allocate for input shapes {shapes}", failure, log)
        self._feeds = list(zip(self._inputs, self._positions, shapes))
        self._out = [np.empty(d["shape"], d["dtype"]) for d in engine.get_output_details()]
        # String tensors have no view; LiteRT's get_tensor reads them.
        self._numeric = all(a.dtype.kind in "biufc" for a in self._out)

    def invoke(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        engine = self.engine
        set_tensor = engine.set_tensor
        for index, position, shape in self._feeds:
            array = inputs[position]
            if array.shape != shape:
                # A shape only the values settled (a RESHAPE to a computed shape upstream).
                self._allocate([inputs[p].shape for p in self._positions])
                return self.invoke(inputs)
            set_tensor(index, array)
        engine.invoke()
        self._invokes += 1
        out = self._out
        if not self._numeric:
            self._out = out = [engine.get_tensor(i) for i in self._outputs]
            return out
        for k, view in enumerate(self._views):
            value = view()
            if value.shape != out[k].shape:  # an output whose shape depends on values
                out[k] = np.empty_like(value)
            out[k][...] = value  # shapes equal: a plain copy, no broadcasting
            del value
        return out

    def reset_variables(self) -> None:
        # LiteRT's ResetVariableTensors: the partition's state (exported as variables of its
        # model) starts over, as in LiteRT running the whole model.
        self.engine.reset_all_variables()

    def memory_bytes(self) -> dict[str, int]:
        """Host: the exported model LiteRT reads its constants from, and the output arrays
        kept between invokes. LiteRT's own arena is not visible from Python: not counted."""
        held = len(self.exported.model_bytes) + sum(a.nbytes for a in self._out)
        return {"device": 0, "host": held}

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
