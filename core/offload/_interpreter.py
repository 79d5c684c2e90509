"""LiteRT's Python Interpreter API over offload's planner, CPU reference and delegates.

A program written for ``ai_edge_litert.interpreter.Interpreter`` runs unchanged with
``from offload import Interpreter``. Work is split as LiteRT splits it: ``allocate_tensors``
plans and allocates, ``invoke`` only runs the flat step list; both are the executor's
(:mod:`offload._executor`). This module is the front end: argument checks, tensor access,
signatures and offload's reports.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, Literal

import numpy as np

from offload._delegate import Delegate, DelegateKernel
from offload._executor import Executor
from offload._graph import Model, Tensor
from offload._interpreter_args import interpreter_settings, positional_delegates
from offload._litert_compat import (
    OpResolverType,
    check_litert_options,
    compress_zero_points,
    litert_message,
)
from offload._loader import load_model
from offload._plan import Plan
from offload._session import Session
from offload._shape_pass import DEFAULT_MAX_TENSOR_BYTES
from offload._signature_runner import (
    SignatureRunner,
    busy_error,
    check_signature,
    exclusive,
    signature_named,
)
from offload._tensor_access import (
    ViewToken,
    read_main_tensor,
    read_subgraph_tensor,
    resize_input,
    store_input,
    subgraph_index_of,
    tensor_at,
    tensor_view,
    value_of,
    write_input,
)
from offload._tensor_details import op_details, shape_now, tensor_details
from offload.errors import InterpreterStateError

__all__ = ["Interpreter", "interpreter_over"]

DelegatesArg = str | Sequence[str | Delegate] | None


class Interpreter:
    """Run a .tflite model: LiteRT's ``Interpreter`` API, with offload's delegates.

    Args:
        model_path: path to a .tflite file (memory-mapped).
        model_content: the model's bytes, instead of a path.
        experimental_delegates: delegate objects in priority order (as returned by
            :func:`offload.load_delegate`), as in LiteRT.
        num_threads: LiteRT's thread count. The numpy reference uses numpy's threads; a
            delegate offload builds for you (the default, ``"auto"``) gets it as its
            ``num_threads`` option where it has one (litert, openvino); None keeps their
            default, 1, as LiteRT's.
        delegates: which delegates run the model (see "Delegates" below): names or delegate
            objects in priority order, ``[]`` for the CPU reference alone, ``"auto"`` for the
            fastest plan measured here, or None (the default) for offload's default delegates.
        allow_cpu_fallback: False makes planning fail when a node is left to the CPU.
        profile: record per-step time; read it with :meth:`profile_report`.
        experimental_preserve_all_tensors: keep every intermediate for :meth:`get_tensor`.
        max_tensor_bytes: the most bytes any one non-constant tensor may take (2 GiB by
            default; None for no limit). Checked from the computed shapes at
            ``allocate_tensors``, and by kernels whose output size depends on input values,
            before anything is allocated; a larger tensor raises
            :class:`~offload.errors.MemoryBudgetError` naming it.
        auto_budget_s: seconds of timed runs ``"auto"`` may spend choosing (preparing each
            candidate is timed apart); 0 applies the static cost rule instead of measuring.
            Default: ``$OFFLOAD_AUTO_BUDGET_S``, else 2. Part of a stored decision's key.
        auto_precision_loss_allowed: let ``"auto"`` accept candidates within 1e-2 (float) or
            4 quantization steps of the CPU reference, instead of 1e-4 and 1 step, and build
            candidates with ``precision_loss_allowed`` where they have that option; a
            classifier's top-1 class (an output made by SOFTMAX) must still not change.
        auto_cache_dir: where ``"auto"`` and the default keep measured decisions (default
            ``$OFFLOAD_AUTO_CACHE_DIR``, else ``~/.cache/offload/auto``); False keeps none.
            A fault of that cache (refused, a damaged key file, an I/O error) is a
            :class:`~offload.errors.CacheError` only with ``delegates="auto"`` and this
            argument given; otherwise one CacheWarning, and the choice is made without it.
        auto_inputs: the program's own inputs for ``"auto"``'s accuracy check, beside its
            seeded sets (image-like, [-1, 1], N(0, 1), N(0, 4), and the full code range of
            quantized inputs): a sequence of samples, each a sequence of arrays in input order,
            a mapping from input name to array, or an array for a one-input model, with the
            dtypes and shapes ``allocate_tensors`` gives the inputs (else TensorTypeError or
            TensorShapeError there). A candidate is kept only if it agrees with the CPU
            reference on every set. Part of a stored decision's key.

    Delegates. Named delegates run what they take, in priority order, and the CPU reference
    the rest (an empty ``experimental_delegates`` names none, as in LiteRT; ``delegates=[]``
    does). ``delegates="auto"`` plans candidates (the CPU reference, each available
    delegate alone, priority pairs), rejects fragmented plans, checks the rest against the
    CPU reference on several seeded input sets and ``auto_inputs``, times the ones that agree
    on every set within ``auto_budget_s`` at ``allocate_tensors``, keeps the fastest, and
    remembers it (a later process takes it without
    timing); ``auto_selection`` explains the choice. With nothing named, as LiteRT applies
    XNNPACK by default, offload applies its default delegates: the stored ``"auto"`` decision
    for this model where there is one, else ``litert`` where offload-litert is installed, else
    the static rule; nothing is timed. ``delegates=[]``, or
    ``experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES`` (or
    ``BUILTIN_REF``), gives the CPU reference alone; ``$OFFLOAD_DELEGATES`` (``auto``,
    ``cpu``, or names separated by commas) sets the default for programs that cannot be
    edited. ``delegation_report()["default"]`` says which applied and why.

    One call at a time: an Interpreter is not shared between threads. A call made while
    another thread is inside ``invoke``, ``allocate_tensors``, ``set_tensor``,
    ``resize_tensor_input`` or ``reset_all_variables`` of the same Interpreter raises
    :class:`~offload.errors.InterpreterStateError` instead of mixing the two threads' tensors.
    Use one Interpreter per thread (they share nothing but the loaded model's bytes).

    A delegate partition that fails during ``invoke`` (raises, or returns outputs of the
    wrong count, dtype or shape) runs on the CPU from then on, with one warning naming the
    delegate, the partition and its nodes; with ``allow_cpu_fallback=False`` it raises
    :class:`~offload.errors.DelegateError` instead.
    """

    @positional_delegates
    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        model_content: bytes | None = None,
        experimental_delegates: Sequence[Delegate] | None = None,
        num_threads: int | None = None,
        experimental_op_resolver_type: Any = OpResolverType.AUTO,
        experimental_preserve_all_tensors: bool = False,
        experimental_disable_delegate_clustering: bool = False,
        experimental_default_delegate_latest_features: bool = False,
        experimental_compress_quantization_zero_points: bool = False,
        experimental_disable_delegate_node_fusion: bool = False,
        experimental_force_delegate_node_profiling: bool = False,
        *,
        delegates: DelegatesArg = None,
        allow_cpu_fallback: bool = True,
        profile: bool = False,
        max_tensor_bytes: int | None = DEFAULT_MAX_TENSOR_BYTES,
        auto_budget_s: float | None = None,
        auto_precision_loss_allowed: bool = False,
        auto_cache_dir: str | os.PathLike[str] | Literal[False] | None = None,
        auto_inputs: Sequence[Any] | None = None,
    ) -> None:
        litert_options = {
            "experimental_op_resolver_type": experimental_op_resolver_type,
            "experimental_disable_delegate_clustering": experimental_disable_delegate_clustering,
            "experimental_default_delegate_latest_features": (
                experimental_default_delegate_latest_features
            ),
            "experimental_compress_quantization_zero_points": (
                experimental_compress_quantization_zero_points
            ),
            "experimental_disable_delegate_node_fusion": experimental_disable_delegate_node_fusion,
            "experimental_force_delegate_node_profiling": (
                experimental_force_delegate_node_profiling
            ),
        }
        litert_options, settings = interpreter_settings(
            litert_options,
            num_threads=num_threads,
            allow_cpu_fallback=allow_cpu_fallback,
            preserve_all_tensors=experimental_preserve_all_tensors,
            max_tensor_bytes=max_tensor_bytes,
            auto_budget_s=auto_budget_s,
            auto_precision_loss_allowed=auto_precision_loss_allowed,
            auto_cache_dir=auto_cache_dir,
            auto_inputs=auto_inputs,
        )
        model = load_model(model_path=model_path, model_content=model_content)
        session = Session(
            model,
            model_path,
            settings,
            delegates=delegates,
            experimental_delegates=experimental_delegates,
            resolver=litert_options["experimental_op_resolver_type"],
            profile=profile,
        )
        self._adapt(session, litert_options)

    def _adapt(self, session: Session, litert_options: dict[str, Any]) -> None:
        """Speak LiteRT's Interpreter API over ``session`` (see :func:`interpreter_over`)."""
        self._session = session
        self._model = session.model
        self._litert_options = litert_options
        self._view_token = ViewToken()
        self._signature_runners: dict[str, SignatureRunner] = {}

    @property
    def _executor(self) -> Executor:
        # The session's main executor, replaced once by the auto or default choice.
        return self._session.executor

    @property
    def _delegates(self) -> list[Delegate]:
        # LiteRT's own tests read interpreter._delegates[0]._library: kept for them.
        return self._session.delegates

    # -- LiteRT API -------------------------------------------------------------------------

    @property
    def model(self) -> Model:
        return self._model

    def allocate_tensors(self) -> None:
        self._ensure_no_views("allocate_tensors()")
        with exclusive(self._executor, "allocate_tensors()"):
            self._resolve()
            self._executor.allocate()

    def _resolve(self) -> None:
        """Make the auto or default choice if it is still to be made (see the class doc)."""
        self._session.resolve()

    def invoke(self) -> None:
        if sys.getrefcount(self._view_token) > 2:
            self._ensure_no_views("invoke()")
        ex = self._session.executor  # once: invoke is the hot path, the property costs
        busy = ex.busy
        if not busy.acquire(blocking=False):
            raise busy_error("invoke()")
        try:
            ex.invoke()
        finally:
            busy.release()

    def _check_index(self, index: int) -> Tensor:
        return tensor_at(self._model, index)

    def get_input_details(self) -> list[dict[str, Any]]:
        sg = self._model.main
        return [self._details(sg.tensors[i], self._executor.shapes[i]) for i in sg.inputs]

    def get_output_details(self) -> list[dict[str, Any]]:
        sg = self._model.main
        ex = self._executor
        return [self._details(sg.tensors[i], shape_now(sg.tensors[i], ex)) for i in sg.outputs]

    def get_tensor_details(self, subgraph_index: int = 0) -> list[dict[str, Any]]:
        """LiteRT's details (name, index, shape, shape_signature, dtype, quantization,
        quantization_parameters, sparsity_parameters) of every tensor of a subgraph.

        Shapes are the current ones: after ``allocate_tensors`` (or a signature runner's call,
        for another subgraph) the computed shapes, before it the declared ones.
        """
        executor = self._subgraph_executor(subgraph_index)
        live = executor is self._executor
        tensors = self._model.subgraphs[int(subgraph_index)].tensors
        return [self._details(t, shape_now(t, executor, live=live)) for t in tensors]

    def num_subgraphs(self) -> int:
        """How many subgraphs the model has (the main one, signatures' and control flow's)."""
        return len(self._model.subgraphs)

    # -- LiteRT's private inspection methods, which model-inspection code calls -------------

    def _get_tensor_details(self, tensor_index: int, subgraph_index: int) -> dict[str, Any]:
        """One tensor's details (LiteRT's private method, used by inspection tools)."""
        if not isinstance(tensor_index, (int, np.integer)) or not isinstance(
            subgraph_index, (int, np.integer)
        ):
            raise TypeError(
                "_get_tensor_details() expects int tensor_index and subgraph_index, found "
                f"{type(tensor_index).__name__} and {type(subgraph_index).__name__}"
            )
        executor = self._subgraph_executor(subgraph_index)
        t = tensor_at(self._model, tensor_index, int(subgraph_index))
        return self._details(t, shape_now(t, executor, live=executor is self._executor))

    def _get_op_details(self, op_index: int) -> dict[str, Any]:
        """One node of the main subgraph as LiteRT describes it: ``index``, ``op_name``,
        ``inputs`` and ``outputs`` (int32 arrays, -1 for an omitted input), and the dtypes of
        the tensors present (``operand_types``, ``result_types``)."""
        nodes = self._model.main.nodes
        if not isinstance(op_index, (int, np.integer)) or not 0 <= op_index < len(nodes):
            raise ValueError(
                litert_message(
                    "node_index",
                    f"expected a node index in 0..{len(nodes) - 1}, found {op_index!r}",
                )
            )
        return op_details(
            nodes[int(op_index)],
            int(op_index),
            lambda i: self._get_tensor_details(i, 0)["dtype"],
        )

    def _get_ops_details(self) -> list[dict[str, Any]]:
        """:meth:`_get_op_details` of every node of the main subgraph, in order. LiteRT also
        lists the nodes its delegates put in; offload's plan says where each node runs."""
        return [self._get_op_details(i) for i in range(len(self._model.main.nodes))]

    @property
    def experimental_compress_quantization_zero_points(self) -> bool:
        """Whether tensor details give equal per-channel zero points once (LiteRT's option)."""
        return bool(self._litert_options["experimental_compress_quantization_zero_points"])

    def _details(self, t: Tensor, shape: tuple[int, ...]) -> dict[str, Any]:
        details = tensor_details(t, shape)
        if self._litert_options["experimental_compress_quantization_zero_points"]:
            return compress_zero_points(details)
        return details

    def _subgraph_executor(self, subgraph_index: int) -> Executor | None:
        """The executor that runs subgraph ``subgraph_index``: the main one for 0, the signature
        runner's for another subgraph, None when no runner has been made for it."""
        index = subgraph_index_of(self._model, subgraph_index)
        return self._session.made_executor(index)

    def set_tensor(self, tensor_index: int, value: Any) -> None:
        ex = self._session.executor
        busy = ex.busy
        if not busy.acquire(blocking=False):
            raise busy_error("set_tensor()")
        try:
            # An array of exactly the dtype and shape that the delegate kernel taking this
            # input expects is offered to it in a few operations: _set_tensor's checks, made
            # once at allocate. This runs before every invoke, where each operation costs, with
            # caches cold, as much as ~0.3% of a model LiteRT runs in 2 ms.
            direct = ex.direct.get(tensor_index) if type(tensor_index) is int else None
            if (
                direct is not None
                and type(value) is np.ndarray
                and value.dtype is direct[0]
                and value.shape == direct[1]
                and ex.allocated
            ):
                if not ex.offer(tensor_index, value, direct[2]):
                    self._store_input(tensor_index, value)
                return
            self._set_tensor(tensor_index, value)
        finally:
            busy.release()

    def _set_tensor(self, tensor_index: int, value: Any) -> None:
        write_input(self._executor, self._model.main, self._check_index(tensor_index), value)

    def _store_input(self, index: int, value: np.ndarray) -> None:
        store_input(self._executor, index, value)

    def get_tensor(self, tensor_index: int, subgraph_index: int = 0) -> np.ndarray:
        # A plain index of a main-subgraph tensor that holds a value here, as after every
        # invoke, in a few operations (see set_tensor); anything else goes the checked way.
        ex = self._executor
        if (
            type(tensor_index) is int
            and type(subgraph_index) is int
            and subgraph_index == 0
            and 0 <= tensor_index < len(ex.buffers)
            and tensor_index not in ex.handed
        ):
            buf = ex.buffers[tensor_index]
            if buf is not None:
                return np.array(buf, copy=True) if buf.ndim else value_of(buf)
        # Only an int 0 is the main subgraph: 0.0 or "0" goes on to the index check, which
        # refuses it, as LiteRT's binding refuses what is not an int.
        if not isinstance(subgraph_index, (int, np.integer)) or subgraph_index != 0:
            return self._get_subgraph_tensor(tensor_index, subgraph_index)
        return read_main_tensor(self._executor, self._check_index(tensor_index))

    def _get_subgraph_tensor(self, tensor_index: int, subgraph_index: int) -> np.ndarray:
        """A tensor of another subgraph: a constant, or a value its signature runner left."""
        executor = self._subgraph_executor(subgraph_index)
        t = tensor_at(self._model, tensor_index, int(subgraph_index))
        return read_subgraph_tensor(executor, t, int(subgraph_index))

    def tensor(self, tensor_index: int) -> Callable[[], Any]:
        # A view writes and reads the tensor's buffer directly: a kernel must not hold it.
        return tensor_view(
            self._executor, self._check_index(tensor_index), lambda: self._view_token
        )

    def _safe_to_run(self) -> bool:
        """Whether no array from :meth:`tensor` is alive (LiteRT's private check, kept for the
        programs and tests that call it): only then may tensor memory move."""
        return sys.getrefcount(self._view_token) == 2

    def _ensure_no_views(self, call: str) -> None:
        """LiteRT's refusal of ``call`` while an array from :meth:`tensor` is alive: the call
        may move the memory that array points into."""
        if sys.getrefcount(self._view_token) > 2:
            raise InterpreterStateError(
                litert_message(
                    "view_held",
                    f"{call} refused: drop the arrays tensor()'s functions returned (and their "
                    "slices) first; keep the functions instead",
                )
            )

    def resize_tensor_input(
        self, input_index: int, tensor_size: Sequence[int], strict: bool = False
    ) -> None:
        self._ensure_no_views("resize_tensor_input()")
        with exclusive(self._executor, "resize_tensor_input()"):
            self._resize_tensor_input(input_index, tensor_size, strict)

    def _resize_tensor_input(
        self, input_index: int, tensor_size: Sequence[int], strict: bool
    ) -> None:
        t = self._check_index(input_index)
        resize_input(self._executor, self._model.main, t, tensor_size, strict)

    def reset_all_variables(self) -> None:
        with exclusive(self._executor, "reset_all_variables()"):
            self._executor.reset_variables()

    def get_signature_list(self) -> dict[str, dict[str, list[str]]]:
        return {
            s.key: {"inputs": sorted(s.inputs), "outputs": sorted(s.outputs)}
            for s in self._model.signatures
        }

    def get_signature_runner(self, signature_key: str | None = None) -> SignatureRunner:
        sig = signature_named(self._model, signature_key)
        signature_key = sig.key
        if signature_key not in self._signature_runners:
            check_signature(self._model, sig)  # before any choice is made for it
            # Every subgraph runs the delegates chosen for the main one (chosen now).
            executor = self._session.executor_for(sig.subgraph_index)
            self._signature_runners[signature_key] = SignatureRunner._bound(
                sig, executor, self.experimental_compress_quantization_zero_points
            )
        return self._signature_runners[signature_key]

    # -- offload's additions ----------------------------------------------------------------

    @property
    def delegates(self) -> list[Delegate]:
        """The delegates in priority order (the auto or default choice is made on first use)."""
        return self._session.delegates

    @property
    def auto_selection(self) -> dict[str, Any] | None:
        """The figures behind the auto or default choice (made on first use), else None: the
        mode, the choice and why, the cache's status, and every candidate's plan, timing or
        rejection and measured error (docs/introspection.md, docs/delegate-authors.md)."""
        self._resolve()
        return self._session.selection.summary

    def plan(self) -> Plan:
        """The partition plan (computed on first use, or by allocate_tensors)."""
        return self._session.plan()

    def delegation_report(self) -> dict[str, Any]:
        """Per delegate: nodes, partitions, boundary tensors, bytes copied; fallback reasons;
        ``"default"`` (which delegates applied and why) and ``"auto"`` (:attr:`auto_selection`)
        when there is one. Every report's keys: docs/introspection.md."""
        return self._session.delegation_report()

    def profile_report(self) -> list[dict[str, Any]]:
        """Per op (CPU) or partition (delegate): calls and total / mean milliseconds."""
        return self._session.profile_report()

    def memory_report(self) -> dict[str, int]:
        """Bytes the main subgraph holds now, by kind: tensors, constants, the arena, CPU
        kernels' buffers and largest scratch, delegates' reported device and host bytes
        (docs/introspection.md, "memory_report()")."""
        return self._session.memory_report()

    def delegate_kernels(self) -> dict[int, DelegateKernel]:
        """The delegate kernels running partitions now, by partition index (filled by
        ``allocate_tensors``; a partition handed back to the CPU has none). Read them for a
        delegate's own figures; ``init``, ``prepare`` and ``invoke`` are the interpreter's."""
        return self._session.delegate_kernels()

    def delegate_kernel_stats(self) -> list[dict[str, Any]]:
        """Per delegate partition running now: delegate, nodes, ``memory`` (the kernel's
        ``memory_bytes()``) and ``stats`` (its ``stats()``, ``{}`` when it has none)."""
        return self._session.delegate_kernel_stats()

    def set_delegate_profiling(self, enabled: bool = True) -> list[int]:
        """Start (from zero) or stop measuring device time in every delegate partition; the
        partitions that measure now (those whose kernel can). Measuring costs time per launch
        on most devices: time runs with it off. Call after ``allocate_tensors()``."""
        ex = self._executor
        with exclusive(ex, "set_delegate_profiling()"):
            return self._session.set_delegate_profiling(enabled)

    def delegate_profile(self) -> list[dict[str, Any]]:
        """Per delegate: device time per kernel family, per invoke, since profiling started
        (docs/introspection.md, "Device profiles")."""
        return self._session.delegate_profile()


def interpreter_over(session: Session) -> Interpreter:
    """An Interpreter over an existing session: LiteRT's API on a model another front end
    (CompiledModel) built, sharing its delegates, executors and state."""
    interpreter = Interpreter.__new__(Interpreter)
    interpreter._adapt(session, check_litert_options({}))
    return interpreter
