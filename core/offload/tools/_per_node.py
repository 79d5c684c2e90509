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
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np

from offload._delegate import Delegate
from offload._graph import Node, Subgraph
from offload._interpreter import Interpreter
from offload._loader import load_model
from offload.errors import InterpreterStateError, OffloadError
from offload.ops import kernel_class
from offload.tools._common import INPUT_KINDS, UsageError, input_arrays, json_safe

__all__ = [
    "LITERT",
    "CPU",
    "Configuration",
    "TensorComparison",
    "NodeDiff",
    "PerNodeDiff",
    "diff_per_node",
    "compare_tensors",
    "format_text",
]

LITERT = "litert"
CPU = "cpu"

# A configuration: "litert", "cpu", a delegate name / path / "auto", or delegate objects.
Configuration = str | Delegate | Sequence[Delegate]

Status = Literal["agree", "diverged", "failed", "hidden", "not_run"]
Locality = Literal["local", "inherited", "n/a"]

_LITERT_INSTALL = "pip install ai-edge-litert"


# -- comparing two arrays -------------------------------------------------------------------


@dataclass(frozen=True)
class TensorComparison:
    """How a candidate array differs from the reference array of the same tensor.

    ``kind`` is ``"float"`` (also complex) or ``"integer"`` (also bool; quantized tensors are
    compared on their integer codes, so an error is a number of quantization steps).
    ``max_error``: floats, max |candidate - reference|; integers, max |steps|.
    ``relative_error``: floats only, ``max_error / max |reference|``.
    ``equal``: the fraction of elements bit-identical (floats) or exact (integers).
    ``exceeds``: over the tolerance (also true for a shape or dtype mismatch, with ``note``).
    """

    kind: Literal["float", "integer", "other"]
    max_error: float | None
    relative_error: float | None
    equal: float | None
    exceeds: bool
    note: str = ""


def compare_tensors(
    reference: np.ndarray, candidate: np.ndarray, tolerance: float, tolerance_steps: int
) -> TensorComparison:
    """Compare one tensor's values; floats against ``tolerance`` (relative to the largest
    reference magnitude), integers against ``tolerance_steps``."""
    ref, cand = np.asarray(reference), np.asarray(candidate)
    kind: Literal["float", "integer", "other"] = (
        "float" if ref.dtype.kind in "fc" else "integer" if ref.dtype.kind in "biu" else "other"
    )
    if ref.shape != cand.shape:
        note = f"shape {_shape(cand.shape)}, reference {_shape(ref.shape)}"
        return TensorComparison(kind, None, None, None, True, note)
    if ref.dtype != cand.dtype:
        note = f"dtype {cand.dtype}, reference {ref.dtype}"
        return TensorComparison(kind, None, None, None, True, note)
    if ref.size == 0:
        return TensorComparison(kind, 0.0, 0.0 if kind == "float" else None, 1.0, False)
    if kind == "float":
        return _compare_floats(ref, cand, tolerance)
    if kind == "integer":
        steps = np.abs(ref.astype(np.int64) - cand.astype(np.int64))
        worst = int(steps.max())
        return TensorComparison(
            kind, float(worst), None, float(np.mean(steps == 0)), worst > tolerance_steps
        )
    same = ref == cand  # strings and other objects: equal or not
    return TensorComparison(kind, None, None, float(np.mean(same)), not bool(same.all()))


def _compare_floats(ref: np.ndarray, cand: np.ndarray, tolerance: float) -> TensorComparison:
    # Bit patterns, not values: -0.0 against 0.0 or two NaN payloads are told apart here,
    # while the error below treats NaN against NaN (and inf against inf) as no error.
    if ref.dtype.kind == "f":
        bits = np.dtype(f"u{ref.dtype.itemsize}")
        identical = ref.view(bits) == cand.view(bits)
    else:
        identical = ref == cand
    a, b = ref.astype(np.complex128 if ref.dtype.kind == "c" else np.float64), cand
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(a - b)
        same_special = (np.isnan(a) & np.isnan(b)) | ((a == b) & ~np.isfinite(a))
    diff = np.where(same_special, 0.0, np.where(np.isnan(diff), np.inf, diff))
    max_error = float(diff.max())
    finite = np.abs(a[np.isfinite(a)])
    scale = float(finite.max()) if finite.size else 0.0
    if max_error == 0.0:
        relative = 0.0
    else:
        relative = max_error / scale if scale > 0.0 else float("inf")
    return TensorComparison(
        "float", max_error, relative, float(np.mean(identical)), relative > tolerance
    )


# -- results --------------------------------------------------------------------------------


@dataclass(frozen=True)
class NodeDiff:
    """One output tensor of one node, as the two configurations computed it.

    ``status``: ``agree``; ``diverged`` (over tolerance, or a shape/dtype mismatch);
    ``failed`` (this configuration stopped with an error here: the first node whose output
    it lacks); ``hidden`` (inside a delegate partition of either configuration, see
    ``note``); ``not_run`` (after a failure).
    ``locality`` (divergent rows only): ``local``, ``inherited`` or ``n/a``.
    ``local``: the candidate's CPU kernel re-run on the reference's inputs, compared with
    the reference's output (when it was computed).
    """

    node: int
    op: str
    tensor: int
    name: str
    shape: tuple[int, ...]
    dtype: str
    status: Status
    comparison: TensorComparison | None = None
    locality: Locality | None = None
    local: TensorComparison | None = None
    note: str = ""

    @property
    def diverged(self) -> bool:
        return self.status in ("diverged", "failed")

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["shape"] = list(self.shape)
        return data


def _inexact_float(row: NodeDiff) -> bool:
    """A float row whose values were compared and are not all bit-identical."""
    cmp = row.comparison
    return cmp is not None and cmp.kind == "float" and cmp.equal is not None and cmp.equal < 1


@dataclass(frozen=True)
class PerNodeDiff:
    """The result of :func:`diff_per_node`: every row, in execution order, and the verdicts."""

    model: str
    reference: str
    candidate: str
    seed: int
    input_kind: str
    tolerance: float
    tolerance_steps: int
    subgraphs: int
    rows: tuple[NodeDiff, ...]
    # "reference" / "candidate" -> the error its invoke stopped with
    errors: dict[str, str] = field(default_factory=dict)
    # whether divergent rows were re-run on the reference's inputs (candidate "cpu" only)
    locality_checked: bool = False
    # "reference" / "candidate" -> for an offload configuration: per delegate its "nodes",
    # "partitions" and "rejected_model" reason, and "cpu_nodes"
    delegation: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def divergent_rows(self) -> list[NodeDiff]:
        return [r for r in self.rows if r.diverged]

    @property
    def first_divergence(self) -> NodeDiff | None:
        """The first row, in execution order, over tolerance (or where a run failed)."""
        return next(iter(self.divergent_rows), None)

    @property
    def first_local_divergence(self) -> NodeDiff | None:
        """The first divergent row whose node disagrees even on the reference's inputs."""
        return next((r for r in self.divergent_rows if r.locality == "local"), None)

    @property
    def first_inexact_float(self) -> NodeDiff | None:
        """The first float tensor, before the first divergence, that is not bit-identical,
        however far under ``tolerance``: the likely culprit when the first divergence is not
        local (``inherited``, or ``n/a``); ``None`` otherwise, or when every observable float
        tensor before it is bit-identical.

        A QUANTIZE (or a hybrid op quantizing its input) fed by float ops turns a last-bit
        difference into a whole step, so an integer tensor can diverge while every float
        before it is within tolerance; no node is then local, and this names where the
        numbers first parted.
        """
        first = self.first_divergence
        if first is None or first.locality == "local":
            return None  # nothing to explain, or the divergent node is wrong by itself
        for row in self.rows:
            if row is first:
                return None
            if _inexact_float(row):
                return row
        return None

    @property
    def diverged(self) -> bool:
        return bool(self.divergent_rows or self.errors)

    def summary(self) -> dict[str, int]:
        counts = {s: 0 for s in ("agree", "diverged", "failed", "hidden", "not_run")}
        for r in self.rows:
            counts[r.status] += 1
        for loc in ("local", "inherited", "n/a"):
            counts[loc] = sum(r.locality == loc for r in self.rows)
        counts["rows"] = len(self.rows)
        return counts

    def to_dict(self) -> dict[str, Any]:
        first, first_local = self.first_divergence, self.first_local_divergence
        inexact = self.first_inexact_float
        return {
            "model": self.model,
            "reference": self.reference,
            "candidate": self.candidate,
            "seed": self.seed,
            "input": self.input_kind,
            "tolerance": self.tolerance,
            "tolerance_steps": self.tolerance_steps,
            "subgraphs": self.subgraphs,
            "compared_subgraph": 0,
            "diverged": self.diverged,
            "errors": dict(self.errors),
            "locality_checked": self.locality_checked,
            "delegation": self.delegation,
            "summary": self.summary(),
            "first_divergence": first.to_dict() if first else None,
            "first_local_divergence": first_local.to_dict() if first_local else None,
            "first_inexact_float": inexact.to_dict() if inexact else None,
            "rows": [r.to_dict() for r in self.rows],
        }

    def to_json(self, indent: int | None = 2) -> str:
        """The result as JSON; infinities and NaN (no JSON spelling) become null."""
        return json.dumps(json_safe(self.to_dict()), indent=indent, allow_nan=False)


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


def _state_tensors(subgraph: Subgraph) -> set[int]:
    """Tensors that hold state: variables, and inputs a stateful kernel updates in place.
    After the run they hold the state the last node left, not what their producer made."""
    state = {t.index for t in subgraph.tensors if t.is_variable}
    for node in subgraph.nodes:
        positions = kernel_class(node).state_inputs(node.options)
        state.update(node.inputs[p] for p in positions if p < len(node.inputs))
    return state - {-1}


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


def _shape(shape: Sequence[int]) -> str:
    return "x".join(str(int(d)) for d in shape) if len(shape) else "scalar"


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

    state = _state_tensors(cand.subgraph) if rerun_possible and cand.subgraph else set()
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


# -- text -----------------------------------------------------------------------------------


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _num(value: float | None, integer: bool = False) -> str:
    if value is None:
        return "-"
    if integer:
        return str(int(value))
    return "0" if value == 0 else f"{value:.3g}"


def _percent(fraction: float | None) -> str:
    if fraction is None:
        return "-"
    text = f"{100 * fraction:.2f}%"
    return "99.99%" if fraction < 1 and text == "100.00%" else text  # never round up to all


def _verdict(row: NodeDiff) -> str:
    if row.status == "diverged":
        return f"DIVERGED ({row.locality})" + (f": {row.note}" if row.note else "")
    if row.status == "agree":
        return "agree"
    return row.note or row.status


def _cells(row: NodeDiff) -> list[str]:
    cmp = row.comparison
    integer = cmp is not None and cmp.kind == "integer"
    name = row.name if len(row.name) <= 40 else row.name[:37] + "..."
    return [
        str(row.node),
        row.op,
        name,
        _shape(row.shape),
        row.dtype,
        _num(cmp.max_error if cmp else None, integer),
        _num(cmp.relative_error if cmp else None),
        _percent(cmp.equal if cmp else None),
        _verdict(row),
    ]


def _head(row: NodeDiff) -> str:
    """How a verdict line names a row: node, op, tensor, shape and dtype."""
    where = f"node {row.node} {row.op}, tensor {row.tensor} {row.name!r}"
    return f"{where} [{_shape(row.shape)} {row.dtype}]"


def _describe(row: NodeDiff) -> str:
    cmp = row.comparison
    head = _head(row)
    if row.status == "failed" or cmp is None:
        return f"{head}: {row.note}"
    if cmp.note:
        return f"{head}: {cmp.note} ({row.locality})"
    if cmp.kind == "integer":
        err = f"max |steps| {_num(cmp.max_error, True)}, {_percent(cmp.equal)} exact"
    elif cmp.kind == "float":
        err = (
            f"max abs err {_num(cmp.max_error)}, rel err {_num(cmp.relative_error)}, "
            f"{_percent(cmp.equal)} bit-identical"
        )
    else:
        err = f"{_percent(cmp.equal)} equal"
    return f"{head}: {err} ({row.locality})"


def _describe_inexact(row: NodeDiff) -> str:
    """``row`` as the culprit of a non-local divergence: how far and how many differ."""
    cmp = row.comparison
    assert cmp is not None and cmp.equal is not None  # _inexact_float rows only
    total = int(np.prod(row.shape))
    # ``equal`` is a mean over ``total`` booleans: the count comes back exactly.
    differ = total - round(cmp.equal * total)
    return (
        f"{_head(row)}: max |diff| {_num(cmp.max_error)} (rel {_num(cmp.relative_error)}), "
        f"{differ} of {total} values differ"
    )


def format_text(result: PerNodeDiff, show_all: bool = False) -> str:
    """The report ``offload diff --per-node`` prints: verdicts first, then the table."""
    from offload.tools._common import format_table

    s = result.summary()
    subgraphs = (
        f"; {result.subgraphs} subgraphs, only the main one (0) is compared"
        if result.subgraphs > 1
        else ""
    )
    lines = [
        f"model: {result.model}{subgraphs}",
        f"reference: {result.reference}   candidate: {result.candidate}",
        f"inputs: {result.input_kind} ({INPUT_KINDS[result.input_kind]}), seed {result.seed}",
        f"tolerance: relative error {result.tolerance:g} (floats), "
        f"{result.tolerance_steps} steps (integers)",
        f"tensors: {s['rows']}: {s['agree']} agree, {s['diverged'] + s['failed']} diverge "
        f"({s['local']} local, {s['inherited']} inherited, {s['n/a']} n/a), "
        f"{s['hidden']} inside a delegate partition, {s['not_run']} not run",
    ]
    for role, report in result.delegation.items():
        parts = []
        for name, d in report["delegates"].items():
            text = f"{name} runs {_count(d['nodes'], 'node')} in "
            text += _count(d["partitions"], "partition")
            if d["restored_to_cpu"]:
                failed = _count(d["restored_to_cpu"], "partition")
                text += f" ({failed} failed and ran on the CPU)"
            if d["rejected_model"]:
                text += f" (it rejected the model: {d['rejected_model']})"
            parts.append(text)
        on_cpu = _count(report["cpu_nodes"], "node")
        lines.append(f"{role}: {'; '.join(parts)}; {on_cpu} on the CPU reference")
    for role, error in result.errors.items():
        label = result.reference if role == "reference" else result.candidate
        lines.append(f"{role} ({label}) failed: {error}")
    first, first_local = result.first_divergence, result.first_local_divergence
    lines.append("first divergence: " + (_describe(first) if first else "none"))
    if first is not None:
        local_text = _describe(first_local) if first_local else "none"
        if not result.locality_checked:
            local_text = "n/a (the candidate's kernels are re-run only when it is 'cpu')"
        lines.append("first local divergence: " + local_text)
        if first.locality != "local":
            # Same condition as first_inexact_float: here "none" is itself an answer (every
            # float before the divergence is bit-identical), not a question left unasked.
            inexact = result.first_inexact_float
            culprit = _describe_inexact(inexact) if inexact else "none"
            if inexact is None:
                culprit += " (every observable float tensor before it is bit-identical)"
            lines.append("first float tensor not bit-identical: " + culprit)
    shown = [r for r in result.rows if show_all or r.diverged]
    if shown:
        lines += [
            "",
            "max err: max |candidate - reference| for floats, max |steps| for integers; "
            "rel err: max err / max |reference|; equal: bit-identical (floats) or exact "
            "(integers)",
            format_table(
                [
                    "node",
                    "op",
                    "tensor",
                    "shape",
                    "dtype",
                    "max err",
                    "rel err",
                    "equal",
                    "verdict",
                ],
                [_cells(r) for r in shown],
            ),
        ]
    return "\n".join(lines)
