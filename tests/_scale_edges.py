"""One-op quantized models at the edges of the scale range, and the runners that try them.

Each case is one requantizing op (ADD, SUB, MUL, SQUARED_DIFFERENCE, MEAN, SUM, HARD_SWISH,
CONCATENATION) in int8 or int16 whose input and output scales stand ``10**exponent`` apart,
placed three ways: split evenly (inputs ``10**(e/2)``, output ``10**(-e/2)``), all on the
inputs (output scale 1) or all on the output (input scales 1); binary ops also get a skew
between their two inputs (``1`` and ``10**e``, output 1). LiteRT computes these ops'
multipliers from such ratios at Prepare, where it aborts the process on some of them.

``run_cases`` runs a list of (case, engine) pairs in child processes, one batch per child,
and gives each its outcome: ``ok`` with the output values, ``refused`` with the error's type
and message, or ``crash`` when the engine killed the child (the child is restarted after the
case that killed it). ``scripts/probe_scale_edges.py`` records LiteRT's own outcomes;
``tests/test_scale_edges.py`` holds offload to them.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from offload.model.builder import ModelBuilder

ROOT = Path(__file__).resolve().parents[1]

OPS = (
    "ADD",
    "SUB",
    "MUL",
    "SQUARED_DIFFERENCE",
    "MEAN",
    "SUM",
    "HARD_SWISH",
    "CONCATENATION",
)
BINARY = ("ADD", "SUB", "MUL", "SQUARED_DIFFERENCE")
DTYPES = ("int8", "int16")
EXPONENTS = (-30, -20, -10, -5, -2, 0, 2, 5, 10, 20, 30)
PLACEMENTS = ("split", "inputs", "output", "skew")
SHAPE = (1, 2, 3, 4)

# The engines a case can be run on: LiteRT itself (its builtin kernels; its default resolver,
# which applies XNNPACK) and offload's paths (default, CPU reference, each engine delegate).
ENGINES = (
    "litert_builtin",
    "litert_xnnpack",
    "offload_default",
    "offload_cpu",
    "offload_litert_builtin",
    "offload_litert_xnnpack",
    "offload_openvino",
)


class Case(NamedTuple):
    op: str
    dtype: str
    placement: str
    exponent: int

    @property
    def key(self) -> str:
        return f"{self.op}/{self.dtype}/{self.placement}/{self.exponent:+d}"

    def scales(self) -> tuple[float, float, float]:
        """(first input, second input, output) scales, as float32 values."""
        e = self.exponent
        if self.placement == "split":
            s = (10.0 ** (e / 2), 10.0 ** (e / 2), 10.0 ** (-e / 2))
        elif self.placement == "inputs":
            s = (10.0**e, 10.0**e, 1.0)
        elif self.placement == "output":
            s = (1.0, 1.0, 10.0**-e)
        else:
            s = (1.0, 10.0**e, 1.0)
        f = np.float32
        return float(f(s[0])), float(f(s[1])), float(f(s[2]))


def cases(ops: tuple[str, ...] = OPS) -> list[Case]:
    """Every case: op x type x placement x exponent (skew for binary ops only)."""
    return [
        Case(op, dtype, placement, e)
        for op in ops
        for dtype in DTYPES
        for placement in PLACEMENTS
        if placement != "skew" or op in BINARY
        for e in EXPONENTS
    ]


def build(case: Case) -> bytes:
    """The case's one-op model: runtime inputs of shape SHAPE, one output."""
    s1, s2, so = case.scales()
    # int16 kernels need zero points 0; int8 ones get nonzero ones (equal for CONCATENATION,
    # whose int8 kernel wants them so).
    z_in, z_out = (0, 0) if case.dtype == "int16" else (2, 2 if case.op == "CONCATENATION" else -3)
    b = ModelBuilder()
    x = b.add_input("x", SHAPE, case.dtype, quantization=(s1, z_in))
    if case.op in BINARY or case.op == "CONCATENATION":
        x2 = b.add_input("x2", SHAPE, case.dtype, quantization=(s2, z_in))
    if case.op in BINARY:
        y = b.add_tensor("y", SHAPE, case.dtype, quantization=(so, z_out))
        b.add_operator(case.op, [x, x2], [y])
    elif case.op in ("MEAN", "SUM"):
        axis = b.add_constant("axis", np.array([1, 2], np.int32))
        y = b.add_tensor("y", (1, 1, 1, 4), case.dtype, quantization=(so, z_out))
        b.add_operator(case.op, [x, axis], [y], {"keep_dims": True})
    elif case.op == "HARD_SWISH":
        y = b.add_tensor("y", SHAPE, case.dtype, quantization=(so, z_out))
        b.add_operator(case.op, [x], [y])
    else:
        y = b.add_tensor("y", (1, 2, 3, 8), case.dtype, quantization=(so, z_out))
        b.add_operator(case.op, [x, x2], [y], {"axis": 3})
    b.add_output(y)
    return b.build()


def sample(shape: tuple[int, ...], dtype: str, seed: int) -> np.ndarray:
    """Values over the whole range of ``dtype``, both ends included."""
    info = np.iinfo(dtype)
    count = int(np.prod(shape))
    values = np.linspace(info.min, info.max, count).round()[:: -1 if seed % 2 else 1]
    return values.astype(dtype).reshape(shape)


# The child: reads its batch (a JSON list of [number, case, engine]) from stdin, prints
# "CASE n" before and "DONE n <json>" after each.
_CHILD = textwrap.dedent(
    """
    import json, sys, warnings
    warnings.simplefilter("ignore")
    sys.path.insert(0, sys.argv[1])
    from tests._scale_edges import Case, run_one
    for number, case, engine in json.loads(sys.stdin.read()):
        print(f"CASE {number}", flush=True)
        result = run_one(Case(*case), engine)
        print(f"DONE {number} {json.dumps(result)}", flush=True)
    """
)


def _interpreter(content: bytes, engine: str) -> Any:
    if engine.startswith("litert_"):
        from ai_edge_litert import interpreter as litert

        resolver = (
            litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
            if engine == "litert_builtin"
            else litert.OpResolverType.AUTO
        )
        return litert.Interpreter(model_content=content, experimental_op_resolver_type=resolver)
    import offload

    if engine == "offload_default":
        return offload.Interpreter(model_content=content)
    if engine == "offload_cpu":
        return offload.Interpreter(model_content=content, delegates=[])
    if engine == "offload_openvino":
        return offload.Interpreter(model_content=content, delegates=["openvino"])
    kernels = engine.rsplit("_", 1)[1]
    delegate = offload.load_delegate("litert", {"kernels": kernels})
    return offload.Interpreter(model_content=content, experimental_delegates=[delegate])


def run_one(case: Case, engine: str) -> dict[str, Any]:
    """Build, allocate and invoke the case on ``engine``; its outcome (in this process)."""
    try:
        interp = _interpreter(build(case), engine)
        interp.allocate_tensors()
        for seed, d in enumerate(interp.get_input_details()):
            interp.set_tensor(d["index"], sample(tuple(d["shape"]), case.dtype, seed))
        interp.invoke()
        out = interp.get_tensor(interp.get_output_details()[0]["index"])
    except Exception as exc:  # LiteRT refuses with RuntimeError and ValueError alike
        from offload.errors import OffloadError

        return {
            "outcome": "refused",
            "error": type(exc).__name__,
            "typed": isinstance(exc, OffloadError),
            "message": str(exc)[:600],
        }
    result: dict[str, Any] = {"outcome": "ok", "values": out.ravel().tolist()}
    if engine.startswith("offload_"):
        # Which engine ran the node: the delegate that took it, or the CPU reference.
        report = interp.delegation_report()
        result["ran_on"] = "cpu" if report["cpu"]["nodes"] else "delegate"
        result["reasons"] = [
            r for why in report["fallback"].values() for rs in why["reasons"].values() for r in rs
        ]
    return result


def run_cases(
    work: list[tuple[Case, str]], timeout: float = 600, env: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    """Each (case, engine)'s outcome, run in child processes (with ``env``, else this
    process's environment); ``crash`` where it killed one."""
    results: list[dict[str, Any] | None] = [None] * len(work)
    first = 0
    while first < len(work):
        batch = [[n, list(work[n][0]), work[n][1]] for n in range(first, len(work))]
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, str(ROOT)],
            input=json.dumps(batch),
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=ROOT,
            env=env,
        )
        started = first
        for line in done.stdout.splitlines():
            word, _, rest = line.partition(" ")
            if word == "CASE":
                started = int(rest)
            elif word == "DONE":
                number, _, text = rest.partition(" ")
                results[int(number)] = json.loads(text)
                first = int(number) + 1
        if done.returncode != 0 and results[started] is None:
            tail = done.stderr.strip().splitlines()[-3:]
            results[started] = {"outcome": "crash", "exit": done.returncode, "stderr": tail}
            first = started + 1
        elif done.returncode != 0:  # it died after its last case: nothing left to blame
            raise RuntimeError(f"child exited {done.returncode}: {done.stderr[-2000:]}")
    return [r for r in results if r is not None]
