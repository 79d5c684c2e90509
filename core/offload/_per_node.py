"""Per-node diff: one model through two configurations, every intermediate compared.

A configuration is ``"litert"`` (LiteRT's builtin kernels, without its default XNNPACK
delegate: the oracle), ``"cpu"`` (offload's CPU reference), or delegates for an offload
Interpreter (a name or path :func:`offload.load_delegate` accepts, ``"auto"``, or
:class:`offload.Delegate` objects). Both configurations keep every intermediate
(``experimental_preserve_all_tensors``) and are fed the same input values once; then each
node's outputs are compared in execution order (node order: a .tflite subgraph is stored in
the order it runs).

Nodes inside a delegate partition have no observable outputs except those the partition
hands back: such a row says ``inside <delegate> partition``, never that it agrees.

A divergent row is *local* when the candidate's own CPU kernel for that node, fed the
reference's values of its inputs, still disagrees (the node is wrong by itself), and
*inherited* when it then agrees (the node only carries an earlier difference forward). That
re-run needs the candidate's kernels, so it is done only for the ``"cpu"`` candidate; other
candidates say ``n/a``.

Only the main subgraph (0) is compared; nodes that call other subgraphs are compared by their
outputs.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np

from offload._delegate import Delegate
from offload._fold import state_tensors
from offload._graph import Node, Subgraph
from offload._interpreter import Interpreter
from offload._loader import load_model
from offload._per_node_result import (
    Locality,
    NodeDiff,
    PerNodeDiff,
    Status,
    TensorComparison,
    compare_tensors,
)
from offload._seeded_inputs import INPUT_KINDS, input_arrays
from offload.errors import InterpreterStateError, OffloadError, UsageError
from offload.ops import kernel_class

__all__ = [
    "LITERT",
    "CPU",
    "Configuration",
    "TensorComparison",
    "NodeDiff",
    "PerNodeDiff",
    "diff_per_node",
    "compare_tensors",
]

LITERT = "litert"
CPU = "cpu"

# A configuration: "litert", "cpu", a delegate name / path / "auto", or delegate objects.
Configuration = str | Delegate | Sequence[Delegate]

_LITERT_INSTALL = "pip install ai-edge-litert"


# -- running one configuration --------------------------------------------------------------


@dataclass
class _Run:
    """One configuration after one invoke: how to read a tensor, and what it could not show."""

    label: str
    value: Callable[[int], np.ndarray | None]
    hidden: dict[int, str] = field(default_factory=dict)  # tensor -> "inside X partition"
    error: str | None = None
    subgraph: Subgraph | None = None  # offload's planned subgraph (folded constants included)
    delegation: dict[str, Any] | None = None  # offload configurations: who ran what


def _litert_interpreter_module() -> Any:
    try:
        return importlib.import_module("ai_edge_litert.interpreter")
    except ImportError:
        raise UsageError(
            "the 'litert' configuration needs LiteRT, the reference interpreter, which is not "
            f"installed; install it with: {_LITERT_INSTALL}"
        ) from None


def _run_litert(
    path: str, inputs: Sequence[np.ndarray], subgraph: Subgraph, num_threads: int | None
) -> _Run:
    lite = _litert_interpreter_module()
    try:
        it = lite.Interpreter(
            model_path=path,
            num_threads=num_threads,
            experimental_op_resolver_type=lite.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
            experimental_preserve_all_tensors=True,
        )
        it.allocate_tensors()
    except (RuntimeError, ValueError) as exc:  # no reference to compare with: nothing to do
        raise UsageError(f"LiteRT cannot run {path!r}: {type(exc).__name__}: {exc}") from exc
    for index, array in zip(subgraph.inputs, inputs):
        it.set_tensor(index, array)
    error: str | None = None
    unrun: set[int] = set()
    try:
        it.invoke()
    except (RuntimeError, ValueError) as exc:
        error = f"{type(exc).__name__}: {exc}".strip()
        # LiteRT names the node that failed ("Node number 5 (CONV_2D) failed to invoke");
        # its outputs and every later node's hold stale memory, not values.
        match = re.search(r"Node number (\d+)", error)
        first_unrun = int(match.group(1)) if match else 0
        unrun = {t for n in subgraph.nodes[first_unrun:] for t in n.outputs}

    def value(t: int) -> np.ndarray | None:
        if t in unrun:
            return None
        try:
            return it.get_tensor(t)
        except ValueError:  # no data behind this tensor
            return None

    return _Run(LITERT, value, error=error)


def _run_offload(
    path: str,
    config: Configuration,
    label: str,
    inputs: Sequence[np.ndarray],
    subgraph: Subgraph,
    num_threads: int | None,
) -> _Run:
    if isinstance(config, Delegate):
        delegates: Any = [config]
    elif config == CPU:
        delegates = []  # the CPU reference alone, not offload's default delegates
    else:
        delegates = config  # a name, a path, "auto", or Delegate objects
    it = Interpreter(
        model_path=path,
        delegates=delegates,
        num_threads=num_threads,
        experimental_preserve_all_tensors=True,
    )
    it.allocate_tensors()
    for index, array in zip(subgraph.inputs, inputs):
        it.set_tensor(index, array)
    error: str | None = None
    try:
        it.invoke()
    except OffloadError as exc:
        error = f"{type(exc).__name__}: {exc}"
    plan = it.plan()
    restored = {int(k) for k in it.delegation_report()["restored_to_cpu"]}
    hidden: dict[int, str] = {}
    for part in plan.partitions:
        if part.index in restored:
            continue
        exposed = set(part.outputs)
        for n in part.nodes:
            for t in plan.subgraph.nodes[n].outputs:
                if t >= 0 and t not in exposed:
                    hidden[t] = f"inside {part.delegate} partition {part.index}"

    def value(t: int) -> np.ndarray | None:
        if t in hidden:
            return None
        try:
            return it.get_tensor(t)
        except InterpreterStateError:  # never computed: after a failure
            return None

    delegation = {
        "delegates": {
            name: {
                "nodes": sum(
                    len(p.nodes)
                    for p in plan.partitions
                    if p.delegate == name and p.index not in restored
                ),
                "partitions": sum(
                    p.delegate == name and p.index not in restored for p in plan.partitions
                ),
                "rejected_model": plan.model_rejections.get(name),
                "restored_to_cpu": sum(
                    p.delegate == name and p.index in restored for p in plan.partitions
                ),
            }
            for name in plan.delegates
        },
        "cpu_nodes": len(plan.cpu_nodes())
        + sum(len(p.nodes) for p in plan.partitions if p.index in restored),
    }
    if isinstance(config, str) and config != CPU:  # a path or "auto": say what it loaded
        names = "+".join(plan.delegates)
        label = f"auto ({names or 'no delegate'})" if config == "auto" else names or label
    return _Run(label, value, hidden, error, plan.subgraph, delegation)


def _label(config: Configuration) -> str:
    if isinstance(config, Delegate):
        return config.name
    if isinstance(config, str):
        return config
    names = [d.name for d in config]
    if not names:
        return CPU
    return "+".join(names)


def _open(
    config: Configuration,
    path: str,
    inputs: Sequence[np.ndarray],
    subgraph: Subgraph,
    num_threads: int | None,
) -> _Run:
    if isinstance(config, str) and config == LITERT:
        return _run_litert(path, inputs, subgraph, num_threads)
    if isinstance(config, str) and not config:
        raise UsageError("a configuration must be 'litert', 'cpu' or a delegate, found ''")
    return _run_offload(path, config, _label(config), inputs, subgraph, num_threads)


# -- the local check ------------------------------------------------------------------------


@dataclass(frozen=True)
class _Rerun:
    """A node's CPU kernel re-run on the reference's inputs: its outputs, or why there are
    none (``raised``: the kernel itself failed on inputs the reference computed with)."""

    outputs: list[np.ndarray] | None
    why: str = ""
    raised: bool = False


def _rerun_on_reference(node: Node, subgraph: Subgraph, reference: _Run) -> _Rerun:
    """The candidate's CPU kernel for ``node`` fed the reference's inputs."""
    cls = kernel_class(node)
    if cls.state_inputs(node.options) or any(
        t >= 0 and subgraph.tensors[t].is_variable for t in node.inputs
    ):
        # After the run, a state tensor holds the state the node left, not what it read.
        return _Rerun(None, "stateful node: its inputs before the run are not kept")
    args: list[np.ndarray | None] = []
    for t in node.inputs:
        tensor = subgraph.tensors[t] if t >= 0 else None
        if tensor is None or tensor.sparsity is not None:
            args.append(None)  # omitted, or a sparse constant its kernel reads in setup
        elif tensor.is_constant:
            args.append(tensor.constant_value())
        else:
            got = reference.value(t)
            if got is None:
                return _Rerun(None, f"the reference's input tensor {t} is not observable")
            args.append(np.array(got, copy=True))  # a kernel must not alter the reference
    try:
        result = cls(node, subgraph).run(*args)
    except Exception as exc:  # a report, not a crash: the row says why there is no verdict
        return _Rerun(None, f"re-run failed: {type(exc).__name__}: {exc}", raised=True)
    return _Rerun([result] if isinstance(result, np.ndarray) else list(result))


def _with_locality(
    row: NodeDiff,
    pos: int,
    reference_value: np.ndarray,
    rerun: _Rerun | None,
    tolerance: float,
    tolerance_steps: int,
) -> NodeDiff:
    """``row`` with the re-run's verdict: ``local`` comparison, and ``locality`` if divergent."""
    if rerun is None:  # no re-run for this candidate
        return replace(row, locality="n/a") if row.diverged else row
    outs = rerun.outputs
    if outs is None or pos >= len(outs):
        why = rerun.why or f"the re-run gave {0 if outs is None else len(outs)} outputs"
        note = f"{row.note}; {why}" if row.note else why
        # A kernel that fails on inputs the reference computed with is wrong by itself.
        locality: Locality | None = "local" if rerun.raised else "n/a"
        return replace(row, locality=locality if row.diverged else None, note=note)
    local = compare_tensors(reference_value, np.asarray(outs[pos]), tolerance, tolerance_steps)
    locality = "local" if local.exceeds else "inherited"
    return replace(row, local=local, locality=locality if row.diverged else None)


# -- the diff -------------------------------------------------------------------------------


def _op_name(node: Node) -> str:
    return f"custom {node.custom_code}" if node.is_custom else f"{node.op} v{node.version}"


def _input_details(subgraph: Subgraph) -> list[dict[str, Any]]:
    details = []
    for i in subgraph.inputs:
        t = subgraph.tensors[i]
        quant = t.quantization.as_tuple() if t.quantization is not None else (0.0, 0)
        details.append({"name": t.name, "shape": t.shape, "dtype": t.dtype, "quantization": quant})
    return details


def diff_per_node(
    model_path: str | Path,
    reference: Configuration = LITERT,
    candidate: Configuration = CPU,
    *,
    seed: int = 0,
    input_kind: str = "normal",
    tolerance: float = 1e-5,
    tolerance_steps: int = 0,
    check_locality: Literal["divergent", "all"] = "divergent",
    num_threads: int | None = None,
) -> PerNodeDiff:
    """Run ``model_path`` through ``reference`` and ``candidate`` on the same random inputs
    and compare every node's outputs.

    Args:
        reference, candidate: ``"litert"``, ``"cpu"``, a delegate name or path, ``"auto"``,
            or :class:`offload.Delegate` objects (see the module docstring).
        seed, input_kind: the inputs: one draw of ``input_kind`` (``normal`` N(0,1),
            ``uniform`` U(-1,1), ``image`` U(0,1), ``wide`` N(0,1)*100) from
            ``numpy.random.default_rng(seed)``; quantized integer inputs get that draw
            quantized with their scale and zero point, clipped.
        tolerance: a float tensor diverges when max |candidate - reference| exceeds this
            fraction of max |reference|.
        tolerance_steps: an integer tensor diverges when any element differs by more than
            this many steps (0: bit-exact).
        check_locality: ``"divergent"`` re-runs the candidate's CPU kernel on the
            reference's inputs for divergent rows only; ``"all"`` for every row (the
            ``local`` field of each row), as a node-by-node audit of the CPU kernels.

    Raises:
        UsageError: a bad argument, or ``"litert"`` asked for without LiteRT installed.
        OffloadError: a configuration cannot load or plan the model.
    """
    path = str(model_path)
    if not Path(path).is_file():
        raise UsageError(f"model {path!r}: no such file")
    if input_kind not in INPUT_KINDS:
        raise UsageError(
            f"input kind must be one of {', '.join(INPUT_KINDS)}, found {input_kind!r}"
        )
    if not tolerance >= 0 or tolerance_steps < 0:
        raise UsageError(
            f"tolerances must be non-negative, found {tolerance} and {tolerance_steps} steps"
        )
    for config in (reference, candidate):
        if isinstance(config, str) and config == LITERT:
            _litert_interpreter_module()  # fail before any long run
    model = load_model(path)
    sg = model.main
    inputs = input_arrays(_input_details(sg), np.random.default_rng(seed), input_kind)
    ref = _open(reference, path, inputs, sg, num_threads)
    cand = _open(candidate, path, inputs, sg, num_threads)
    rerun_possible = isinstance(candidate, str) and candidate == CPU and cand.subgraph is not None

    # Variables, and inputs a stateful kernel updates in place: after the run they hold the
    # state the last node left, not what their producer made.
    state = (
        {t.index for t in cand.subgraph.tensors if t.is_variable} | state_tensors(cand.subgraph)
        if rerun_possible and cand.subgraph
        else set()
    )
    rows: list[NodeDiff] = []
    failure_reported: set[int] = set()  # id() of a run whose failing row is already in
    for node in sg.nodes:
        rerun: _Rerun | None = None
        for pos, t in enumerate(node.outputs):
            if t < 0:
                continue
            tensor = sg.tensors[t]
            a, b = ref.value(t), cand.value(t)
            row = NodeDiff(
                node=node.index,
                op=_op_name(node),
                tensor=t,
                name=tensor.name,
                shape=tuple(int(d) for d in (a.shape if a is not None else tensor.shape)),
                dtype=str(a.dtype if a is not None else tensor.dtype),
                status="agree",
            )
            where = ref.hidden.get(t) or cand.hidden.get(t)
            if where is not None:
                owner = ref.label if t in ref.hidden else cand.label
                rows.append(replace(row, status="hidden", note=f"{owner}: {where}"))
                continue
            if a is None or b is None:
                lacking = ref if a is None else cand
                if lacking.error is not None and id(lacking) not in failure_reported:
                    failure_reported.add(id(lacking))
                    note = f"{lacking.label} failed: {lacking.error}"
                    row = replace(row, status="failed", note=note)
                else:
                    row = replace(row, status="not_run", note=f"not computed by {lacking.label}")
            else:
                cmp = compare_tensors(a, b, tolerance, tolerance_steps)
                status: Status = "diverged" if cmp.exceeds else "agree"
                row = replace(row, status=status, comparison=cmp, note=cmp.note)
            if a is not None and (row.diverged or check_locality == "all"):
                if rerun_possible and rerun is None:
                    assert cand.subgraph is not None
                    rerun = _rerun_on_reference(cand.subgraph.nodes[node.index], cand.subgraph, ref)
                # A state tensor's reference value is what a later node left in it.
                stale = _Rerun(None, "its value is state a later node updates in place")
                row_rerun = stale if t in state else rerun
                row = _with_locality(row, pos, a, row_rerun, tolerance, tolerance_steps)
            rows.append(row)
    errors = {
        role: run.error
        for role, run in (("reference", ref), ("candidate", cand))
        if run.error is not None
    }
    return PerNodeDiff(
        model=path,
        reference=ref.label,
        candidate=cand.label,
        seed=seed,
        input_kind=input_kind,
        tolerance=tolerance,
        tolerance_steps=tolerance_steps,
        subgraphs=len(model.subgraphs),
        rows=tuple(rows),
        errors=errors,
        locality_checked=rerun_possible,
        delegation={
            role: run.delegation
            for role, run in (("reference", ref), ("candidate", cand))
            if run.delegation is not None and run.delegation["delegates"]
        },
    )
