"""Fuzz targets for ``scripts/fuzz_models.py``: mutated real models, and one target per
reliability class of issue 25 (here) and of issue 37 (``tests/_fuzz_round3.py``).

A target is ``target(case, delegate) -> outcome``. It builds its case from ``case`` alone
(``random.Random(case)``, ``np.random.default_rng(case)``), so a case number replays the
same case, runs it on offload (the CPU reference, or ``delegate`` where the class concerns
delegates), and judges it:

* ``"ok ..."``: the case ran, and where there is an oracle it agreed;
* ``"typed <ErrorName> ..."``: offload refused the case with a typed error;
* ``"skip: <why>"``: the case needs something this machine lacks;
* ``"FINDING <text>"``: a wrong answer without an error, a case run that must be refused,
  memory over the budget, raw control characters on the terminal, an error of the wrong kind.

The script counts an outcome by its text before the first colon (a finding as FINDING); the
rest is detail. An exception that escapes
a target is the script's to report: an ``OffloadError`` is a typed outcome, anything else an
untyped error. LiteRT is the oracle where the class has one; it runs in this process only on
cases it is known to survive (LiteRT segfaults or aborts on much of what is fuzzed here), and
:func:`record` and :func:`oracle_starts` tell the script which file a case ran and when LiteRT
took over, so that a crash is filed against the right engine.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import io
import json
import math
import re
import struct
import sysconfig
import tempfile
import tracemalloc
import unicodedata
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from random import Random
from types import ModuleType
from typing import Any, get_args
from unittest import mock

import numpy as np
import tflite

import offload
from offload import Capabilities, Delegate, DelegateKernel, ModelTypeSupport, OpCapability
from offload._graph import Quantization
from offload._schema import OPTION2_TYPES, OPTION_TYPES, option_field_map, options_type_for
from offload._tolerance import differences, distance
from offload.errors import OffloadError, UnsupportedOpError
from offload.model import _writer
from offload.model.builder import ModelBuilder

from . import _mutate
from ._fuzz_round3 import ROUND3_TARGETS
from ._models import fixture_models, public_models

__all__ = ["TARGETS", "SEEDS", "LOG", "ArtifactRecorded", "mutate_seed", "oracle_starts", "record"]

ROOT = Path(__file__).resolve().parent.parent
OP_TYPES_FIXTURE = ROOT / "tests" / "fixtures" / "litert_op_types.json"

SEEDS = [p for p in public_models() if p.stat().st_size < 400_000]
SEEDS += [p for p, _ in fixture_models() if p.stat().st_size < 400_000]

Target = Callable[[int, str | None], str]


# -- what the script learns about a case besides its outcome ------------------------------


class ArtifactRecorded(BaseException):
    """Raised by :func:`record` when only the case's file is wanted: a BaseException, so
    that no target's ``except Exception`` runs the case on."""


@dataclasses.dataclass
class CaseLog:
    """The file the running case handed to offload (a model, or a would-be delegate
    library) with its suffix; whether to stop there; what to do before LiteRT runs."""

    artifact: tuple[bytes, str] | None = None
    stop_at_artifact: bool = False
    before_oracle: Callable[[], None] | None = None


LOG = CaseLog()


def record(data: bytes, suffix: str = ".tflite") -> bytes:
    """Note the file this case runs, for the script to save beside a finding."""
    LOG.artifact = (data, suffix)
    if LOG.stop_at_artifact:
        raise ArtifactRecorded
    return data


def oracle_starts() -> None:
    """Called right before LiteRT runs a case, after offload is done with it: a crash from
    here on is LiteRT's."""
    if LOG.before_oracle is not None:
        LOG.before_oracle()


# -- shared helpers --------------------------------------------------------------------------


def _delegates(delegate: str | None) -> list[str]:
    return [delegate] if delegate else []  # none named: the CPU reference alone


def _typed(exc: BaseException, note: str = "") -> str:
    """A typed outcome: the error's name and ``note`` are counted, the message is detail."""
    message = " ".join(str(exc).split())[:300]
    return f"typed {type(exc).__name__}{note}: {message}"


def _litert() -> ModuleType | None:
    try:
        from ai_edge_litert import interpreter
    except ImportError:
        return None
    return interpreter


def _invoke(interp: Any, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Set ``inputs``, invoke, and return the outputs: one run on an allocated interpreter
    (offload's or LiteRT's)."""
    for d, value in zip(interp.get_input_details(), inputs):
        interp.set_tensor(d["index"], value)
    interp.invoke()
    return [interp.get_tensor(d["index"]) for d in interp.get_output_details()]


def _litert_outputs(content: bytes, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """LiteRT's builtin kernels (no XNNPACK) on ``inputs``: the reference kernels offload's
    CPU reference follows."""
    lite = _litert()
    assert lite is not None
    oracle_starts()
    interp = lite.Interpreter(
        model_content=content,
        experimental_op_resolver_type=lite.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
    )
    interp.allocate_tensors()
    return _invoke(interp, inputs)


def _difference(got: np.ndarray, want: np.ndarray, exact: bool = False) -> str | None:
    """How ``got`` misses ``want`` (LiteRT's), or None within the fuzz tolerance: floats to
    1e-5 relative (float16 to one float16 step), integers to one step (``exact``: none),
    NaN and infinities where LiteRT has them (the house's tolerance model, offload._tolerance)."""
    got, want = np.asarray(got), np.asarray(want)
    if want.dtype.kind == "c" and got.dtype == want.dtype and got.shape == want.shape:
        return _difference(got.real, want.real) or _difference(got.imag, want.imag)
    d = distance(want, got)
    if d.mismatch:
        return f"{got.dtype}{list(got.shape)} where LiteRT gives {want.dtype}{list(want.shape)}"
    if d.nan_mismatch:
        return "NaN where LiteRT has a number, or a number where it has NaN"
    if d.inf_mismatch:
        return "an infinity where LiteRT has another value"
    if want.dtype == np.float16:  # in float16 steps (units in the last place) of LiteRT's values
        finite = np.isfinite(want)
        ulps = differences(want, got)[0][finite] / np.spacing(np.abs(want[finite]))
        worst = float(ulps.astype(np.float64).max(initial=0.0))
        return None if worst <= 1.0 else f"{worst:.3g} float16 steps from LiteRT's"
    if d.unit == "relative":
        return None if d.relative <= 1e-5 else f"relative error {d.relative:.3g} against LiteRT"
    allowed = 0 if exact else 1
    return None if d.steps <= allowed else f"{int(d.max_abs)} steps from LiteRT's answer"


def _shape(rng: Random, max_rank: int = 4) -> list[int]:
    return [rng.randint(1, 5) for _ in range(rng.randint(0, max_rank))]


def _partner(rng: Random, shape: list[int]) -> tuple[list[int], bool]:
    """A second operand for ``shape``: the same (often), one that broadcasts against it (some
    dimensions 1, leading ones dropped or added), or one that cannot; and whether it fits."""
    roll = rng.random()
    if roll < 0.4:
        return list(shape), True
    sized = [i for i, d in enumerate(shape) if d > 1]
    if roll < 0.85 or not sized:
        other = [1 if rng.random() < 0.5 else d for d in shape]
        if rng.random() < 0.2:  # a leading dimension the output gains
            other = [rng.randint(1, 3), *other]
        else:
            other = other[rng.randint(0, len(other)) :]
        return other, True
    other = list(shape)
    other[rng.choice(sized)] += rng.randint(1, 3)
    return other, False


_QUANT_RANGE = {"INT8": (-128, 127), "UINT8": (0, 255), "INT16": (-32768, 32767)}


def _sane_quant(rng: Random, type_name: str) -> tuple[float, int]:
    """Parameters a converter could write: int16 symmetric, as LiteRT's int16 kernels need."""
    scale = 10 ** rng.uniform(-3, 0)
    if type_name == "INT16":
        return scale / 100, 0
    middle = 0 if type_name == "INT8" else 128
    return scale, middle + rng.randint(-30, 30)


def _odd_quant(rng: Random) -> Quantization:
    """Parameters no converter writes: written as given (the builder checks nothing)."""
    scale, zero_point = rng.choice(
        [
            (0.0, 0),
            (-0.1, 0),
            (math.nan, 0),
            (math.inf, 0),
            (1e-45, 0),
            (1e30, 0),
            (0.1, 300),
            (0.1, -40_000),
            (0.1, 2**40),
            ([0.1, 0.2], [0, 0]),
            ([0.1], [0, 1]),
        ]
    )
    return Quantization(
        np.asarray(scale, np.float32).ravel(),
        np.asarray(zero_point, np.int64).ravel(),
        rng.choice([0, 0, 1, 7]),
    )


def _values(
    nrng: np.random.Generator,
    shape: Sequence[int],
    dtype: Any,
    avoid: int | None = None,
) -> np.ndarray:
    """Inputs that reach the edges: floats over many magnitudes with some specials, integers
    over their type's range (int32/int64 often small). ``avoid``: a value left out (a
    divisor's zero, in stored units)."""
    dtype = np.dtype(dtype)
    shape = tuple(int(d) for d in shape)
    if dtype == np.bool_:
        return np.asarray(nrng.random(shape) < 0.5)
    if dtype.kind == "f":
        # np.asarray: a generator gives a Python float, not an array, for shape ().
        values = np.asarray(nrng.standard_normal(shape) * 10.0 ** nrng.integers(-1, 3))
        if nrng.random() < 0.2 and values.size:
            specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 3e38, -3e38, 1e-40])
            spots = np.asarray(nrng.random(shape) < 0.2)
            values[spots] = nrng.choice(specials, size=int(spots.sum()))
        with np.errstate(over="ignore"):
            return values.astype(dtype)
    if dtype.kind == "c":
        parts = nrng.standard_normal((2, *shape)) * 10.0 ** nrng.integers(-1, 3)
        return np.asarray(parts[0] + 1j * parts[1]).astype(dtype)
    info = np.iinfo(dtype)
    low, high = int(info.min), int(info.max)
    if dtype.itemsize >= 4 and nrng.random() < 0.6:
        low, high = max(low, -1000), min(high, 1000)
    values = nrng.integers(low, high, size=shape, endpoint=True).astype(dtype)
    if avoid is not None:
        values[values == avoid] = avoid + 1 if avoid < high else avoid - 1
    return values


def _op_cases() -> ModuleType:
    """tests/_op_type_cases.py: the one-op models whose LiteRT verdicts the fixture records
    (imported when first needed: only two targets use it)."""
    from . import _op_type_cases

    return _op_type_cases


@functools.cache
def _verdicts() -> dict[str, str]:
    """LiteRT's verdict (ok, refused, crash) per op-types case key."""
    return dict(json.loads(OP_TYPES_FIXTURE.read_text())["cases"])


# -- models: the mutation fuzzing of the test suite's short run ------------------------------


def models(case: int, delegate: str | None) -> str:
    """A real model with one to three numbers rewritten (tests/_mutate.py) runs on zeros or
    fails typed."""
    rng = Random(case)
    content = record(mutate_seed(rng))
    interp = offload.Interpreter(model_content=content, delegates=_delegates(delegate))
    interp.allocate_tensors()
    for d in interp.get_input_details():
        interp.set_tensor(d["index"], np.zeros(tuple(d["shape"]), d["dtype"]))
    interp.invoke()
    return "ok"


def mutate_seed(rng: Random) -> bytes:
    """The mutant the ``models`` target runs for ``rng``: unchanged from the first fuzz runs,
    so their case numbers replay."""
    return _mutate.mutate(rng.choice(SEEDS).read_bytes(), rng, rng.randint(1, 3))


# -- 1. op x tensor type ---------------------------------------------------------------------


def op_types(case: int, delegate: str | None) -> str:
    """An (op, type, quantized) case of the LiteRT fixture, with random shapes (broadcasting
    or not) and quantization (odd at times): offload must not run what LiteRT refuses or
    crashes on, and where both run the answers must agree."""
    op_cases, verdicts = _op_cases(), _verdicts()
    rng, nrng = Random(case), np.random.default_rng(case)
    known = [c for c in op_cases.cases() if op_cases.case_key(*c) in verdicts]
    op, type_name, quantized = rng.choice(known)
    key = op_cases.case_key(op, type_name, quantized)
    verdict = verdicts[key]
    if op in (*op_cases.UNARY, *op_cases.BINARY, *op_cases.COMPARISON):
        content, what, plain = _elementwise(op_cases, rng, op, type_name, quantized)
    else:  # the recorded model itself: the case exactly as LiteRT was probed
        content, what, plain = op_cases.build(op, type_name, quantized), "the recorded model", True
    record(content)
    named = f"{key} ({what})"
    try:
        interp = offload.Interpreter(model_content=content, delegates=_delegates(delegate))
        interp.allocate_tensors()
        inputs = []
        for i, d in enumerate(interp.get_input_details()):
            divisor = i == 1 and op in ("DIV", "FLOOR_DIV", "FLOOR_MOD")
            zero = int(d["quantization"][1]) if divisor else None
            inputs.append(_values(nrng, d["shape"], d["dtype"], avoid=zero))
        outputs = _invoke(interp, inputs)
    except OffloadError as exc:
        if verdict == "ok" and plain and _litert() is not None:
            return _typed(exc, _litert_verdict(content, _litert_inputs(content, nrng)))
        return _typed(exc)
    if verdict != "ok":
        return (
            f"FINDING {named}: LiteRT {'crashes on' if verdict == 'crash' else 'refuses'} "
            f"{key} (tests/fixtures/litert_op_types.json), and offload ran it"
        )
    if not plain:
        return "ok: not compared (odd parameters, which LiteRT may abort on)"
    if _litert() is None:
        return "ok: not compared (ai_edge_litert is not installed)"
    try:
        want = _litert_outputs(content, inputs)
    except Exception:  # LiteRT refuses at prepare or invoke: RuntimeError and ValueError alike
        return "ok: LiteRT refuses these shapes or parameters"
    for i, (got, expected) in enumerate(zip(outputs, want)):
        why = _difference(got, expected)
        if why is not None:
            return f"FINDING {named}: garbage result in output {i}: {why}"
    return "ok"


def _litert_inputs(content: bytes, nrng: np.random.Generator) -> list[np.ndarray]:
    """Inputs for a model offload refused, from LiteRT's own input details."""
    lite = _litert()
    assert lite is not None
    oracle_starts()
    details = lite.Interpreter(model_content=content).get_input_details()
    return [_values(nrng, d["shape"], d["dtype"]) for d in details]


def _litert_verdict(content: bytes, inputs: list[np.ndarray]) -> str:
    """Whether LiteRT runs a case that offload refused (in a plain case it is known to run
    with the fixture's parameters): a refusal LiteRT does not make is worth a look."""
    try:
        _litert_outputs(content, inputs)
    except Exception:  # LiteRT refuses too: RuntimeError and ValueError alike
        return ""
    return " where LiteRT runs it"


def _elementwise(
    op_cases: ModuleType, rng: Random, op: str, type_name: str, quantized: bool
) -> tuple[bytes, str, bool]:
    """A one-op model of the recorded kind with random shapes and quantization; its
    description; and whether it is plain (shapes that broadcast, parameters a converter
    writes), the cases where LiteRT is run in this process."""
    shape = _shape(rng)
    shapes, fits = [shape], True
    if op not in op_cases.UNARY:
        other, fits = _partner(rng, shape)
        if op == "PRELU":  # alpha broadcasts into the input's shape, never beyond it
            other = other[-len(shape) :] if shape else []
            fits = fits and _broadcasts(shape, other)
            fits = fits and np.broadcast_shapes(tuple(shape), tuple(other)) == tuple(shape)
        shapes.append(other)
    out_shape = list(np.broadcast_shapes(*map(tuple, shapes))) if fits else shape
    odd = quantized and rng.random() < 0.3
    quants: list[Any] = []
    for _ in shapes:
        if not quantized:
            quants.append(None)
        elif odd:
            quants.append(_odd_quant(rng))
        elif quants and rng.random() < 0.5:
            quants.append(quants[0])
        else:
            quants.append(_sane_quant(rng, type_name))
    out_type = "BOOL" if op in op_cases.COMPARISON else type_name
    out_quant = None
    if quantized and out_type != "BOOL":
        fixed = op_cases.FIXED_OUTPUT.get((op, type_name))
        out_quant = fixed or (quants[0] if rng.random() < 0.5 else _sane_quant(rng, type_name))
    options = dict(op_cases.OPTIONS.get(op) or {})
    if op in ("ADD", "SUB", "MUL", "DIV") and rng.random() < 0.3:
        options["fused_activation_function"] = rng.choice(["RELU", "RELU6", "RELU_N1_TO_1"])
    b = ModelBuilder()
    inputs = [
        b.add_input(f"x{i}", s, type_name, quantization=q)
        for i, (s, q) in enumerate(zip(shapes, quants))
    ]
    y = b.add_tensor("y", out_shape, out_type, quantization=out_quant)
    b.add_operator(op, inputs, [y], options or None)
    b.add_output(y)
    shown = [q.scale.tolist() if isinstance(q, Quantization) else q for q in quants]
    what = f"shapes {shapes} -> {out_shape}, quantization {shown} -> {out_quant}"
    if options:
        what += f", options {options}"
    return b.build(), what, fits and not odd


# -- 2. integer division by zero -------------------------------------------------------------

_DIVISIONS = ("DIV", "FLOOR_DIV", "FLOOR_MOD")


def division(case: int, delegate: str | None) -> str:
    """Integer DIV, FLOOR_DIV or FLOOR_MOD whose divisor holds zeros (its zero point, when
    quantized), as an input or a constant: a typed error, never a result (LiteRT fails the
    invoke with 'Division by 0')."""
    rng, nrng = Random(case), np.random.default_rng(case)
    op_cases, verdicts = _op_cases(), _verdicts()
    choices = [
        (op, t, q)
        for op, t, q in op_cases.cases()
        if op in _DIVISIONS and t in ("INT8", "UINT8", "INT16", "INT32", "INT64")
        if verdicts.get(op_cases.case_key(op, t, q)) == "ok"
    ]
    if not choices:
        return "skip: the LiteRT record runs no integer division"
    op, type_name, quantized = rng.choice(choices)
    dtype = np.dtype(type_name.lower())
    shape = _shape(rng)
    other, _ = _partner(rng, shape)
    while not _broadcasts(shape, other):
        other, _ = _partner(rng, shape)
    quant = _sane_quant(rng, type_name) if quantized else None
    zero = quant[1] if quant else 0
    dividend = _values(nrng, shape, dtype)
    divisor = _values(nrng, other, dtype, avoid=zero)
    spots = np.asarray(nrng.random(divisor.shape) < rng.choice([0.05, 0.3, 1.0]))
    spots.flat[nrng.integers(divisor.size)] = True  # one zero at least
    divisor[spots] = zero
    # A constant operand may be folded at load: the refusal must hold there too.
    constant = rng.choice(["none", "divisor", "dividend", "both"])
    b = ModelBuilder()
    inputs, feeds = [], []
    for role, value in (("dividend", dividend), ("divisor", divisor)):
        if constant in (role, "both"):
            inputs.append(b.add_constant(role, value, quantization=quant))
        else:
            inputs.append(b.add_input(role, value.shape, type_name, quantization=quant))
            feeds.append(value)
    out_shape = list(np.broadcast_shapes(tuple(shape), tuple(other)))
    y = b.add_tensor("y", out_shape, type_name, quantization=quant)
    b.add_operator(op, inputs, [y])
    b.add_output(y)
    content = record(b.build())
    interp = offload.Interpreter(model_content=content, delegates=_delegates(delegate))
    interp.allocate_tensors()
    result = _invoke(interp, feeds)[0]
    kind = f"{op} {type_name}{' quantized' * quantized}"
    return (
        f"FINDING {kind}: a divisor {list(other)} with {int(spots.sum())} of {divisor.size} "
        f"elements {zero} (constant: {constant}) gave {result.ravel()[:4].tolist()}... "
        "instead of an error (LiteRT: 'Division by 0')"
    )


def _broadcasts(a: Sequence[int], b: Sequence[int]) -> bool:
    try:
        np.broadcast_shapes(tuple(a), tuple(b))
    except ValueError:
        return False
    return True


# -- 3. an options table of another op's type ------------------------------------------------

_UNARY_HOSTS = ("RELU", "EXP", "LOGISTIC", "TANH", "SOFTMAX", "LEAKY_RELU")
_BINARY_HOSTS = ("ADD", "SUB", "MUL", "DIV", "MAXIMUM")
_SHAPED_HOSTS = ("CONCATENATION", "RESHAPE", "MEAN", "SUM", "GATHER", "FULLY_CONNECTED")
_HOSTS = (*_UNARY_HOSTS, *_BINARY_HOSTS, *_SHAPED_HOSTS)


def foreign_options(case: int, delegate: str | None) -> str:
    """A node carrying an options table of another op's type (from either union, randomly
    filled): ignored as LiteRT ignores it, so the node runs as with its own table's defaults
    (and as LiteRT runs it), and the load report lists it."""
    rng, nrng = Random(case), np.random.default_rng(case)
    op = rng.choice(_HOSTS)
    own = options_type_for(op)
    pool = OPTION2_TYPES if rng.random() < 0.2 else OPTION_TYPES
    foreign = rng.choice(sorted(set(pool) - {"NONE", own or ""}))
    fields = _random_options(rng, foreign)
    plain = _host_model(op).build()
    b = _host_model(op)
    b.operators[0] = dataclasses.replace(b.operators[0], options_type=foreign, options=fields)
    content = record(b.build())
    named = f"{op} with a {foreign} table {fields}"
    model = offload.load_model(model_content=content)
    reasons = [entry["reason"] for entry in model.load_report()["ignored_options"]]
    if not any(foreign in reason for reason in reasons):
        return f"FINDING {named}: the load report does not list the table ({reasons})"
    interp = offload.Interpreter(model_content=content, delegates=_delegates(delegate))
    interp.allocate_tensors()
    # Ordinary values: an overflow would test the arithmetic, not which table is read.
    details = interp.get_input_details()
    inputs = [nrng.uniform(-3, 3, d["shape"]).astype(np.float32) for d in details]
    got = _invoke(interp, inputs)
    reference = offload.Interpreter(model_content=plain, delegates=_delegates(delegate))
    reference.allocate_tensors()
    for g, w in zip(got, _invoke(reference, inputs)):
        if not np.array_equal(g, w, equal_nan=True):
            return f"FINDING {named}: runs differently from {op} with its own default table"
    if _litert() is None:
        return "ok: not compared with LiteRT (ai_edge_litert is not installed)"
    for i, (g, w) in enumerate(zip(got, _litert_outputs(content, inputs))):
        why = _difference(g, w)
        if why is not None:
            return f"FINDING {named}: output {i} {why}"
    return "ok"


def _host_model(op: str) -> ModelBuilder:
    """A float32 ``op`` node with its own options at their defaults."""
    b = ModelBuilder()
    x = b.add_input("x", (2, 3, 4))
    inputs = [x]
    out: tuple[int, ...] = (2, 3, 4)
    if op in (*_BINARY_HOSTS, "CONCATENATION"):
        inputs.append(b.add_input("x2", (2, 3, 4)))
        out = (4, 3, 4) if op == "CONCATENATION" else out  # axis 0 by default
    elif op == "RESHAPE":
        inputs.append(b.add_constant("shape", np.array([6, 4], np.int32)))
        out = (6, 4)
    elif op in ("MEAN", "SUM"):
        inputs.append(b.add_constant("axes", np.array([1], np.int32)))
        out = (2, 4)
    elif op == "GATHER":
        inputs.append(b.add_constant("indices", np.array([1, 0], np.int32)))
    elif op == "FULLY_CONNECTED":
        weights = np.linspace(-1, 1, 20, dtype=np.float32).reshape(5, 4)
        inputs.append(b.add_constant("w", weights))
        inputs.append(b.add_constant("bias", np.arange(5, dtype=np.float32)))
        out = (6, 5)
    y = b.add_tensor("y", out)
    b.add_operator(op, inputs, [y])
    b.add_output(y)
    return b


def _random_options(rng: Random, type_name: str) -> dict[str, Any]:
    """Some fields of a ``type_name`` table, with values that would change an op's answer
    if they were read (fused activations, axes, shapes, flags)."""
    fields: dict[str, Any] = {}
    for name, field in option_field_map(type_name).items():
        if field.kind == "table" or rng.random() < 0.3:
            continue
        if field.kind == "string":
            fields[name] = rng.choice(["", "x", "relu"])
        elif field.kind == "vector":
            fields[name] = [rng.randint(0, 4) for _ in range(rng.randint(0, 4))]
        elif field.choices:
            fields[name] = rng.choice(sorted(field.choices.values()))
        elif field.number_type == "Bool":
            fields[name] = rng.random() < 0.5
        elif field.number_type in ("Float32", "Float64"):
            fields[name] = rng.choice([0.0, -1.0, 2.5, 1e30])
        else:
            fields[name] = rng.choice([0, 1, 2, 3])
    return fields


# -- 4. CAST out of range and NaN ------------------------------------------------------------

_CAST_TARGETS = ("INT8", "UINT8", "INT16", "UINT16", "INT32", "UINT32", "INT64", "BOOL")


def cast(case: int, delegate: str | None) -> str:
    """CAST from float (or a wider integer) holding NaN, infinities and values past the
    target's ends: exactly LiteRT's answer (floats saturate, NaN to the maximum, integers
    wrap)."""
    rng, nrng = Random(case), np.random.default_rng(case)
    source = rng.choice(["FLOAT32"] * 6 + ["FLOAT16", "FLOAT64", "INT32", "INT64"])
    target = rng.choice(_CAST_TARGETS)
    shape = [rng.randint(1, 6) for _ in range(rng.randint(1, 3))]
    b = ModelBuilder()
    x = b.add_input("x", shape, source)
    y = b.add_tensor("y", shape, target)
    b.add_operator("CAST", [x], [y])
    b.add_output(y)
    content = record(b.build())
    value = _edges(nrng, shape, np.dtype(source.lower()), np.dtype(target.lower()))
    interp = offload.Interpreter(model_content=content, delegates=_delegates(delegate))
    interp.allocate_tensors()
    (got,) = _invoke(interp, [value])
    if _litert() is None:
        return "ok: not compared (ai_edge_litert is not installed)"
    (want,) = _litert_outputs(content, [value])
    why = _difference(got, want, exact=True)
    if why is None:
        return "ok"
    wrong = np.flatnonzero(got.ravel() != want.ravel())[:3]
    shown = ", ".join(
        f"{value.ravel()[i]!r} -> {got.ravel()[i]!r} (LiteRT {want.ravel()[i]!r})" for i in wrong
    )
    return f"FINDING CAST {source} -> {target}: {why}: {shown}"


def _edges(nrng: np.random.Generator, shape: list[int], source: np.dtype, target: np.dtype) -> Any:
    """Values at and past the target type's ends, NaN and infinities (for a float source),
    fractions either side of zero, among ordinary ones."""
    size = math.prod(shape)
    if target == np.bool_:
        ends = [0.0, 1.0, -1.0]
    else:
        info = np.iinfo(target)
        low, high = float(info.min), float(info.max)
        ends = [low, high, low - 1, high + 1, low * 2 - 1, high * 2 + 2, low - 0.5, high + 0.5]
    picks: list[float] = [*ends, 0.5, -0.5, 0.999, -0.999, -0.0, 2.5, -2.5, 3e9, -3e9]
    if source.kind == "f":
        picks += [math.nan, math.inf, -math.inf, 1e30, -1e30, 3e38]
        wide = np.where(
            nrng.random(size) < 0.7,
            nrng.choice(np.array(picks), size),
            nrng.standard_normal(size) * 10.0 ** nrng.integers(0, 12, size),
        )
        with np.errstate(over="ignore", invalid="ignore"):
            return wide.astype(source).reshape(shape)
    info = np.iinfo(source)
    ints = [int(min(max(p, info.min), info.max)) for p in picks if math.isfinite(p)]
    return np.array([ints[i] for i in nrng.integers(len(ints), size=size)], source).reshape(shape)


# -- 5. scratch memory of convolutions -------------------------------------------------------

_SLACK_BYTES = 4 << 20  # the interpreter's own bookkeeping, plans and Python objects


def scratch(case: int, delegate: str | None) -> str:
    """CONV_2D, DEPTHWISE_CONV_2D or TRANSPOSE_CONV with kernels up to 64x64 under a small
    max_tensor_bytes: refused with MemoryBudgetError, or run within the budget. Run within
    means the traced peak (numpy's arrays included) grows by at most the model's tensors
    twice (a transformed copy of the weights, the caller's input and output copies), one
    budget of scratch, and a fixed slack."""
    rng, nrng = Random(case), np.random.default_rng(case)
    op = rng.choice(["CONV_2D", "DEPTHWISE_CONV_2D", "TRANSPOSE_CONV"])
    budget = 1 << rng.randint(16, 23)
    content, what = _conv_model(rng, nrng, op)
    record(content)
    _warm(delegate)
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        interp = offload.Interpreter(
            model_content=content, delegates=_delegates(delegate), max_tensor_bytes=budget
        )
        interp.allocate_tensors()
        inputs = [_values(nrng, d["shape"], d["dtype"]) for d in interp.get_input_details()]
        _invoke(interp, inputs)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        if started:
            tracemalloc.stop()
    tensors = sum(
        math.prod(int(n) for n in d["shape"]) * np.dtype(d["dtype"]).itemsize
        for d in interp.get_tensor_details()
    )
    allowed = 2 * tensors + budget + _SLACK_BYTES
    if peak > allowed:
        held = interp.memory_report()
        return (
            f"FINDING {op} {what}, max_tensor_bytes={budget:,}: the run's peak grew by "
            f"{peak:,} bytes, over {allowed:,} (tensors {tensors:,} twice, one budget, "
            f"{_SLACK_BYTES:,} slack); memory_report: cpu_kernel_buffers "
            f"{held['cpu_kernel_buffers']:,}, cpu_kernel_scratch {held['cpu_kernel_scratch']:,}"
        )
    return "ok"


@functools.cache
def _warm(delegate: str | None) -> None:
    """Run each convolution once through ``delegate`` before any case is measured: its
    one-time start in a process (gpu_opencl: the OpenCL context and its first program builds,
    about 13 MB traced) belongs to no case's scratch."""
    if delegate is None:
        return
    for seed, op in enumerate(["CONV_2D", "DEPTHWISE_CONV_2D", "TRANSPOSE_CONV"]):
        content, _ = _conv_model(Random(seed), np.random.default_rng(seed), op)
        with contextlib.suppress(OffloadError):
            interp = offload.Interpreter(model_content=content, delegates=_delegates(delegate))
            interp.allocate_tensors()
            _invoke(interp, [np.zeros(d["shape"], d["dtype"]) for d in interp.get_input_details()])


def _conv_model(rng: Random, nrng: np.random.Generator, op: str) -> tuple[bytes, str]:
    """A one-node convolution with a large kernel, float32 or int8 (per-channel weights)."""
    height, width = rng.randint(1, 96), rng.randint(1, 96)
    channels, out_channels = rng.choice([1, 3, 8, 16, 32]), rng.choice([1, 4, 16, 64])
    kh, kw = rng.randint(1, 64), rng.randint(1, 64)
    stride, dilation = rng.randint(1, 3), rng.choice([1, 1, 2])
    padding = rng.choice(["SAME", "VALID"])
    int8 = rng.random() < 0.25
    dtype = np.int8 if int8 else np.float32
    if op == "DEPTHWISE_CONV_2D":
        multiplier = rng.choice([1, 2])
        out_channels = channels * multiplier
        filter_shape = (1, kh, kw, out_channels)
        options: dict[str, Any] = {"depth_multiplier": multiplier}
    else:
        filter_shape = (out_channels, kh, kw, channels)
        options = {}
    options |= {"padding": padding, "stride_h": stride, "stride_w": stride}
    if op != "TRANSPOSE_CONV":
        options |= {"dilation_h_factor": dilation, "dilation_w_factor": dilation}

    def size(n: int, k: int) -> int:
        if op == "TRANSPOSE_CONV":
            return n * stride if padding == "SAME" else (n - 1) * stride + k
        span = (k - 1) * dilation + 1
        return -(-n // stride) if padding == "SAME" else max(-(-(n - span + 1) // stride), 1)

    out_shape = (1, size(height, kh), size(width, kw), out_channels)
    in_q = (0.05, 0) if int8 else None
    w_scales = nrng.uniform(0.001, 0.02, out_channels if op != "TRANSPOSE_CONV" else 1)
    w_axis = 3 if op == "DEPTHWISE_CONV_2D" else 0
    w_q = (w_scales, np.zeros_like(w_scales, np.int64)) if int8 else None
    weights = nrng.integers(-127, 128, filter_shape) if int8 else nrng.standard_normal(filter_shape)
    b = ModelBuilder()
    x = b.add_input("x", (1, height, width, channels), dtype, quantization=in_q)
    w = b.add_constant("w", weights.astype(dtype), quantization=w_q, quantized_dimension=w_axis)
    bias_q = (w_scales * 0.05, np.zeros_like(w_scales, np.int64)) if int8 else None
    bias = b.add_constant(
        "bias",
        np.zeros(out_channels, np.int32 if int8 else np.float32),
        quantization=bias_q if op != "TRANSPOSE_CONV" or not int8 else None,
    )
    y = b.add_tensor("y", out_shape, dtype, quantization=(0.1, 0) if int8 else None)
    if op == "TRANSPOSE_CONV":
        sizes = b.add_constant("output_shape", np.array(out_shape, np.int32))
        b.add_operator(op, [sizes, w, x, bias], [y], options)
    else:
        b.add_operator(op, [x, w, bias], [y], options)
    b.add_output(y)
    what = (
        f"{'int8' if int8 else 'float32'} input [1, {height}, {width}, {channels}], filter "
        f"{list(filter_shape)}, {padding} stride {stride} dilation {dilation}"
    )
    return b.build(), what


# -- 6. API misuse ---------------------------------------------------------------------------


def api(case: int, delegate: str | None) -> str:
    """An API call with arguments out of range or of the wrong kind, on a model with two
    subgraphs and a signature (or a model whose signature lies): an error of the family
    LiteRT raises (offload's typed errors are also ValueError, IndexError and so on), never
    a silent result where LiteRT refuses."""
    rng = Random(case)
    if rng.random() < 0.35:
        return _lying_signature(rng, delegate)
    content = record(_two_subgraphs())
    description, call = rng.choice(_MISUSES)(rng)

    def ours() -> Any:
        interp = offload.Interpreter(model_content=content, delegates=_delegates(delegate))
        interp.allocate_tensors()
        return call(interp)

    mine = _attempt(ours)
    if mine is not None and not isinstance(mine, (OffloadError, ValueError, TypeError)):
        raise mine  # an error of no family a LiteRT caller expects: the script's to report
    lite = _litert()
    if lite is None:
        return "ok" if mine is None else _typed(mine)
    oracle_starts()

    def theirs() -> Any:
        interp = lite.Interpreter(model_content=content)
        interp.allocate_tensors()
        return call(interp)

    their = _attempt(theirs)
    if their is None:
        return "ok" if mine is None else _typed(mine, ": LiteRT returns")
    family = _family(their)
    if family is TypeError and isinstance(mine, OffloadError):
        # LiteRT's binding rejects what is no C int (a string, 2**31) before LiteRT looks:
        # offload's index checks name the argument instead, which is as good.
        return _typed(mine, ": LiteRT's binding refuses the argument's type")
    if mine is None:
        return f"FINDING {description}: LiteRT raises {family.__name__} ({their}), offload returns"
    if not isinstance(mine, family):
        return (
            f"FINDING {description}: LiteRT raises {family.__name__} ({str(their)[:80]}), "
            f"offload {type(mine).__name__}, not a {family.__name__} ({str(mine)[:80]})"
        )
    return _typed(mine)


def _attempt(call: Callable[[], Any]) -> Exception | None:
    try:
        call()
    except Exception as exc:  # the outcome compared, whatever it is
        return exc
    return None


def _family(exc: Exception) -> type[Exception]:
    """The built-in exception class a LiteRT caller would catch ``exc`` by."""
    for cls in type(exc).__mro__:
        if cls.__module__ == "builtins" and issubclass(cls, Exception):
            return cls
    return Exception


def _two_subgraphs() -> bytes:
    """x -> ADD -> y -> RELU -> z in the main subgraph (y an intermediate), a RELU body in
    another, and the builder's serving_default signature."""
    b = ModelBuilder()
    extra = b.add_subgraph("extra")
    u, v = extra.add_input("u", (3,)), extra.add_tensor("v", (3,))
    extra.add_operator("RELU", [u], [v])
    extra.add_output(v)
    x, y, z = b.add_input("x", (2,)), b.add_tensor("y", (2,)), b.add_tensor("z", (2,))
    b.add_operator("ADD", [x, x], [y])
    b.add_operator("RELU", [y], [z])
    b.add_output(z)
    return b.build()


def _index(rng: Random, count: int) -> Any:
    """A tensor or subgraph index: in range, at its edges, far out, or not an int at all."""
    if rng.random() < 0.1:
        return rng.choice([None, "0", 1.0, np.int64(1), -(2**63), 2**64])
    return rng.choice([-1, 0, 1, count - 1, count, count + 1, 2**31 - 1, 2**31, -(2**31)])


def _misuse_get_tensor(rng: Random) -> tuple[str, Callable[[Any], Any]]:
    i, k = _index(rng, 3), (_index(rng, 2) if rng.random() < 0.7 else 0)
    return f"get_tensor({i!r}, subgraph_index={k!r})", lambda it: it.get_tensor(i, k)


def _misuse_set_tensor(rng: Random) -> tuple[str, Callable[[Any], Any]]:
    i = _index(rng, 3)
    value = np.zeros(rng.choice([(2,), (3,), (1, 2)]), rng.choice([np.float32, np.int32]))
    text = f"set_tensor({i!r}, {value.dtype}{list(value.shape)})"
    return text, lambda it: it.set_tensor(i, value)


def _misuse_details(rng: Random) -> tuple[str, Callable[[Any], Any]]:
    k = _index(rng, 2)
    return f"get_tensor_details({k!r})", lambda it: it.get_tensor_details(k)


def _misuse_signature(rng: Random) -> tuple[str, Callable[[Any], Any]]:
    key = rng.choice(["", "nope", "serving_default ", "SERVING_DEFAULT", "x", 0])
    return f"get_signature_runner({key!r})", lambda it: it.get_signature_runner(key)


def _misuse_runner(rng: Random) -> tuple[str, Callable[[Any], Any]]:
    names = rng.choice([[], ["w"], ["x", "q"], ["z"], ["y"], ["u"]])
    dtype = rng.choice([np.float32, np.float32, np.int32])
    inputs = {n: np.ones(2, dtype) for n in names}
    text = f"serving_default runner({', '.join(f'{n}={np.dtype(dtype)}[2]' for n in names)})"
    return text, lambda it: it.get_signature_runner()(**inputs)


def _misuse_tensor(rng: Random) -> tuple[str, Callable[[Any], Any]]:
    i = _index(rng, 3)
    return f"tensor({i!r})()", lambda it: it.tensor(i)()


_MISUSES = (
    _misuse_get_tensor,
    _misuse_get_tensor,
    _misuse_set_tensor,
    _misuse_details,
    _misuse_signature,
    _misuse_runner,
    _misuse_tensor,
)


def _lying_signature(rng: Random, delegate: str | None) -> str:
    """A signature whose subgraph or tensor index is out of range, or whose input names the
    main subgraph's intermediate: refused with a typed error (LiteRT segfaults on the first,
    raises ValueError on the others), never run. LiteRT does not run these here."""
    lie = rng.choice(["subgraph", "input index", "output index", "intermediate input"])
    subgraph, tensor_in, tensor_out = 0, 0, 2
    if lie == "subgraph":
        subgraph = rng.choice([2, 3, 2**31 - 1, 2**32 - 1])
    elif lie == "input index":
        tensor_in = rng.choice([3, 4, 100, 2**31 - 1, 2**32 - 1])
    elif lie == "output index":
        tensor_out = rng.choice([3, 4, 100, 2**31 - 1, 2**32 - 1])
    else:
        tensor_in = 1  # y, which ADD writes
    content = record(_with_signature(_two_subgraphs, subgraph, tensor_in, tensor_out))
    named = f"a signature whose {lie} is a lie (subgraph {subgraph}, x={tensor_in}, z={tensor_out})"
    interp = offload.Interpreter(model_content=content, delegates=_delegates(delegate))
    interp.allocate_tensors()
    try:
        runner = interp.get_signature_runner("serving_default")
        result = runner(x=np.ones(2, np.float32))
    except (OffloadError, ValueError) as exc:  # ValueError: what LiteRT raises for these
        return _typed(exc)
    return f"FINDING {named}: the runner returned {result}"


def _with_signature(make: Callable[[], bytes], subgraph: int, x: int, z: int) -> bytes:
    """``make()``'s model with a serving_default signature of x -> z written as given."""

    def write(b: Any, key: str, sg: Any) -> int:
        maps = []
        for name, index in (("x", x), ("z", z)):
            text = b.CreateString(name)
            tflite.TensorMapStart(b)
            tflite.TensorMapAddName(b, text)
            tflite.TensorMapAddTensorIndex(b, index)
            maps.append(_writer._vector_of_tables(b, [tflite.TensorMapEnd(b)]))
        key_offset = b.CreateString(key)
        tflite.SignatureDefStart(b)
        tflite.SignatureDefAddInputs(b, maps[0])
        tflite.SignatureDefAddOutputs(b, maps[1])
        tflite.SignatureDefAddSignatureKey(b, key_offset)
        tflite.SignatureDefAddSubgraphIndex(b, subgraph)
        return tflite.SignatureDefEnd(b)

    # The builder writes only honest signatures; its writer's one signature hook is swapped
    # for the duration of this build.
    with mock.patch.object(_writer, "_write_signature", write):
        return make()


# -- 7. delegate kernels that scribble -------------------------------------------------------

_BINARY_NUMPY: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "ADD": np.add,
    "SUB": np.subtract,
    "MUL": np.multiply,
    "MAXIMUM": np.maximum,
}
_FAULTS = (
    "none",
    "write input",
    "unlock and write input",
    "matrix",
    "masked array",
    "keep output, write after invoke",
    "keep output, write next invoke",
    "wrong dtype",
    "wrong shape",
    "extra output",
    "missing output",
    "not an array",
    "raise",
)


class _Scribbler(DelegateKernel):
    """Computes its partition right (numpy) and misbehaves in one way."""

    def __init__(self, fault: str, rng: Random, kept: list[np.ndarray]) -> None:
        self.fault, self.rng, self.kept = fault, rng, kept

    def init(self, subgraph: Any, partition: Any) -> None:
        self.nodes = [subgraph.nodes[n] for n in partition.nodes]
        self.partition = partition

    def invoke(self, inputs: Sequence[np.ndarray]) -> list[Any]:
        fault = self.fault
        # The answer comes from copies: a scribble may only show through what it changed in
        # the interpreter's arrays, not through this kernel's own answer.
        values = {t: np.array(a, copy=True) for t, a in zip(self.partition.inputs, inputs)}
        if fault == "write input":
            inputs[0][...] = 100.0
        elif fault == "unlock and write input":
            with contextlib.suppress(ValueError):  # a view numpy will not unlock is the aim
                inputs[0].flags.writeable = True
            inputs[0][...] = 100.0
        elif fault == "keep output, write next invoke":
            for kept in self.kept:
                kept[...] = -7.0
        for node in self.nodes:
            a, b = (values[t] for t in node.inputs)
            values[node.outputs[0]] = _BINARY_NUMPY[node.op](a, b)
        outs = [values[t] for t in self.partition.outputs]
        if fault == "raise":
            raise self.rng.choice([RuntimeError, ValueError, MemoryError, KeyError])("scribbled")
        if fault in ("keep output, write after invoke", "keep output, write next invoke"):
            self.kept.extend(outs)
        if fault == "matrix":
            return [np.asmatrix(o) if o.ndim <= 2 else o for o in outs]
        if fault == "masked array":
            return [np.ma.masked_array(o, mask=np.ones(o.shape, bool)) for o in outs]
        if fault == "wrong dtype":
            return [o.astype(self.rng.choice([np.float64, np.float16, np.int32])) for o in outs]
        if fault == "wrong shape":
            return [self.rng.choice([o.reshape(-1), o[..., None], o[:0], o.T]) for o in outs]
        if fault == "extra output":
            return [*outs, outs[0]]
        if fault == "missing output":
            return outs[:-1]
        if fault == "not an array":
            return [self.rng.choice([o.tolist(), None, 1.5, "x"]) for o in outs]
        return outs


def scribble(case: int, delegate: str | None) -> str:
    """A delegate kernel that writes into its inputs, returns np.matrix or the wrong dtype or
    shape, keeps its output and writes it later, or raises: over two invokes the user's
    outputs and inputs are the CPU reference's, or the error is typed."""
    rng, nrng = Random(case), np.random.default_rng(case)
    fault = rng.choice(_FAULTS)
    content, ops = _chain(rng)
    record(content)
    kept: list[np.ndarray] = []

    class Scribbler(Delegate):
        name = "scribbler"
        CAPABILITIES = Capabilities(
            ops=tuple(OpCapability(op=op) for op in sorted(ops)),
            model_types={t: ModelTypeSupport(support="yes") for t in get_args(offload.ModelType)},
        )

        def create_kernel(self) -> DelegateKernel:
            return _Scribbler(fault, rng, kept)

    strict = rng.random() < 0.1
    interp = offload.Interpreter(
        model_content=content,
        experimental_delegates=[Scribbler()],
        allow_cpu_fallback=not strict,
        experimental_preserve_all_tensors=rng.random() < 0.5,
    )
    reference = offload.Interpreter(model_content=content, delegates=[])
    reference.allocate_tensors()
    named = f"fault {fault!r} on a delegate of {sorted(ops)}"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fallback's warning is the isolation working
        interp.allocate_tensors()
        for run in range(2):
            # Small values: squared six times they stay finite, so no overflow separates the
            # CPU's clamped float arithmetic from the kernel's numpy.
            x = nrng.uniform(-2, 2, interp.get_input_details()[0]["shape"]).astype(np.float32)
            (got,) = _invoke(interp, [x])
            if fault == "keep output, write after invoke":
                for array in kept:
                    array[...] = -7.0
            (want,) = _invoke(reference, [x])
            after = interp.get_tensor(interp.get_output_details()[0]["index"])
            back = interp.get_tensor(interp.get_input_details()[0]["index"])
            for what, value in (("output", got), ("output read again", after)):
                if type(value) is not np.ndarray or value.shape != want.shape:
                    return (
                        f"FINDING {named}, invoke {run}: the {what} is {type(value).__name__}"
                        f"{list(np.shape(value))}, the CPU reference's {list(want.shape)}"
                    )
                if not np.allclose(value, want, rtol=1e-6, atol=0, equal_nan=True):
                    return f"FINDING {named}, invoke {run}: the {what} differs from the CPU's"
            if not np.array_equal(back, x):
                return f"FINDING {named}, invoke {run}: the user's input tensor changed"
    return "ok"


def _chain(rng: Random) -> tuple[bytes, set[str]]:
    """x[1, n] through 2-6 nodes: binary ops of x and the value so far (some delegated)
    between CPU ops, a RESHAPE to [n] among them so that a matrix's two dimensions show."""
    n = rng.randint(2, 8)
    delegated = set(rng.sample(sorted(_BINARY_NUMPY), rng.randint(1, 3)))
    b = ModelBuilder()
    x = b.add_input("x", (1, n))
    value, flat = x, False
    for i in range(rng.randint(2, 6)):
        op = rng.choice([*sorted(_BINARY_NUMPY), "RELU", "ABS", "NEG", "TANH", "RESHAPE"])
        shape = (n,) if flat != (op == "RESHAPE") else (1, n)
        out = b.add_tensor(f"t{i}", shape)
        if op == "RESHAPE":
            target = b.add_constant(f"s{i}", np.array(shape, np.int32))
            b.add_operator(op, [value, target], [out])
            flat = not flat
        elif op in _BINARY_NUMPY:
            b.add_operator(op, [value, value if flat or rng.random() < 0.5 else x], [out])
        else:
            b.add_operator(op, [value], [out])
        value = out
    if not flat and rng.random() < 0.5:
        out = b.add_tensor("flat", (n,))
        b.add_operator("RESHAPE", [value, b.add_constant("sf", np.array([n], np.int32))], [out])
        value = out
    b.add_output(value)
    return b.build(), delegated


# -- 8. files given as external delegates ----------------------------------------------------


def external_delegate(case: int, delegate: str | None) -> str:
    """Random bytes, a truncated or corrupted shared library, text or broken Python, given to
    load_delegate, to --external_delegate_path, or loaded and applied: a typed error (or a
    delegate that then runs or fails typed), never a bare exception or a crash."""
    rng = Random(case)
    data, kind = _library_bytes(rng)
    suffix = rng.choice([".so", ".so", ".so.1", ".dylib", ".dll", ".py", ".py", "", ".bin"])
    record(data, suffix or ".raw")
    how = rng.choice(["load_delegate", "--external_delegate_path", "Interpreter"])
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"fuzz_delegate{suffix}"
        path.write_bytes(data)
        if how == "--external_delegate_path":
            from offload.tools._common import (
                add_delegate_args,
                build_delegates,
                requested_delegates,
            )

            parser = argparse.ArgumentParser()
            add_delegate_args(parser)
            args = parser.parse_args(["--external_delegate_path", str(path)])
            build_delegates(requested_delegates(args))
            return f"ok: {kind} named {path.name} was accepted"
        loaded = offload.load_delegate(str(path))
        if how == "Interpreter":
            b = ModelBuilder()
            x, y = b.add_input("x", (4,)), b.add_tensor("y", (4,))
            b.add_operator("ADD", [x, x], [y])
            b.add_output(y)
            interp = offload.Interpreter(model_content=b.build(), experimental_delegates=[loaded])
            interp.allocate_tensors()
            _invoke(interp, [np.ones(4, np.float32)])
    return f"ok: {kind} named {path.name} loaded"


@functools.cache
def _real_libraries() -> list[Path]:
    """Small shared libraries of this Python (its extension modules): real ELF files to cut
    and bend."""
    folder = Path(sysconfig.get_config_var("DESTSHARED") or Path(np.__file__).parent)
    found = sorted(folder.rglob("*.so"), key=lambda p: (p.stat().st_size, p.name))
    return found[:8]


def _library_bytes(rng: Random) -> tuple[bytes, str]:
    """A file that is not a working delegate, and what kind it is."""
    kind = rng.choice(
        ["random bytes", "empty", "text", "broken python", "python raising", "python, no delegate"]
        + ["truncated library", "corrupted library", "whole library"] * 2
    )
    libraries = _real_libraries()
    if kind.endswith("library") and not libraries:
        kind = "random bytes"
    if kind == "random bytes":
        return rng.randbytes(rng.randint(1, 4096)), kind
    if kind == "empty":
        return b"", kind
    if kind == "text":
        return "".join(rng.choice("abc xyz\n\t{}();=") for _ in range(200)).encode(), kind
    if kind == "broken python":
        return b"def delegate(:\n    return\n", kind
    if kind == "python raising":
        line = rng.choice(["raise SystemExit(3)", "raise ImportError('no')", "x = 1 / 0"])
        return f"import offload\n{line}\n".encode(), kind
    if kind == "python, no delegate":
        return b"import offload\nclass NotADelegate:\n    name = 'x'\n", kind
    library = rng.choice(libraries)
    data = bytearray(library.read_bytes())
    if kind == "truncated library":
        cut = rng.choice([rng.randint(0, 64), rng.randint(64, 4096), rng.randint(0, len(data))])
        return bytes(data[:cut]), f"{library.name} cut to {cut} bytes"
    if kind == "corrupted library":
        for _ in range(rng.randint(1, 8)):
            data[rng.randint(0, min(len(data), 4096) - 1)] = rng.randrange(256)
        return bytes(data), f"{library.name} with header bytes changed"
    return bytes(data), library.name


# -- 9. model strings on the terminal --------------------------------------------------------

_NASTY = (
    [chr(c) for c in range(0x20) if chr(c) not in "\n\t"]
    + ["\x7f", *[chr(c) for c in range(0x80, 0xA0)]]
    + ["\x1b[2J", "\x1b]0;owned\x07", "\x1b[1A\x1b[2K all nodes on GPU", "\x9b31m", "\r"]
    + ["\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068"]
    + ["\u2069", "\u200e", "\u200f", "\u061c", "\u200b", "\u200c", "\u200d", "\u2060"]
    + ["\ufeff", "\u180e", "\u2028", "\u2029", "\u00ad", "\u2061", "\u2064", "\ufff9"]
    + ["\U000e0001", "\U000e0041", "\U000e007f", "\U0001d173", "\U0001bca0", "\n"]
)
# Format characters that show as a glyph (Arabic and Syriac signs spanning the digits that
# follow; Egyptian hieroglyph layout controls): visible, so not hidden text.
_VISIBLE_FORMAT = re.compile(
    "[\u0600-\u0605\u06dd\u070f\u0890\u0891\u08e2\U000110bd\U000110cd\U00013430-\U0001343f]"
)


def terminal(case: int, delegate: str | None) -> str:
    """Names in a model (tensors, subgraph, custom op code, signature key and names,
    metadata, description) holding control, escape, bidirectional and invisible formatting
    characters: ``offload check`` prints none of them raw (newlines and tabs are its own
    layout), and its JSON still parses."""
    from offload._cli import main

    rng = Random(case)

    def name(base: str) -> str:
        pieces = [base, *(rng.choice(_NASTY) for _ in range(rng.randint(0, 4)))]
        rng.shuffle(pieces)
        return "".join(pieces)

    b = ModelBuilder(description=name("desc"), signature_key=name("sig"))
    x = b.add_input(name("x"), (1, 4))
    y = b.add_tensor(name("y"), (1, 4))
    z = b.add_tensor(name("z"), (1, 4))
    b.add_operator("ADD", [x, b.add_constant(name("c"), np.ones((1, 4), np.float32))], [y])
    b.add_operator(name("op"), [y], [z], custom=True)
    b.add_output(z)
    b.name = name("main")
    b.add_metadata(name("meta"), name("value").encode())
    content = record(b.build())
    flags = rng.choice([[], ["--json"], ["--delegate", "cpu"], ["--delegate", "dummy"]])
    flags = flags + (["--strict"] if rng.random() < 0.2 else [])
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "model.tflite"
        path.write_bytes(content)
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main(["check", str(path), *flags])
            except SystemExit:  # argparse's and --strict's exits: the text is what matters
                pass
    command = " ".join(["offload check", *flags])
    for stream, text in (("stdout", out.getvalue()), ("stderr", err.getvalue())):
        raw = sorted({f"U+{ord(c):04X}" for c in text if _unsafe(c)})
        if raw:
            return f"FINDING {command}: {stream} holds raw {', '.join(raw)}"
    if "--json" in flags:
        try:
            json.loads(out.getvalue())
        except ValueError as exc:
            return f"FINDING {command}: the JSON does not parse ({exc})"
    return "ok"


def _unsafe(c: str) -> bool:
    """A character that must not reach a terminal raw: a control (C0, DEL, C1) other than
    newline and tab, an invisible format character (bidirectional, zero-width, tag, soft
    hyphen: Unicode's Cf but the visible ones), a line or paragraph separator."""
    if c in "\n\t" or _VISIBLE_FORMAT.match(c):
        return False
    return unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp")


# -- 10. quantization the CPU reference rejects, on a delegate -------------------------------

_QUANT_SEEDS = ("small_cnn_int8", "small_cnn_qat", "lstm_int8", "mobilenet_v3_small_int8")


def quant_refusal(case: int, delegate: str | None) -> str:
    """A quantized model with odd parameters (crafted, or a real int8 model with one or two
    quantization numbers rewritten): where the CPU reference refuses it with a typed error,
    the delegate (gpu_opencl unless ``--delegate`` names another) must not run it."""
    name = delegate or "gpu_opencl"
    try:
        offload.load_delegate(name)
    except OffloadError as exc:
        return f"skip: {name} is not available here ({type(exc).__name__})"
    rng = Random(case)
    seeds = [p for p, _ in fixture_models() if p.stem in _QUANT_SEEDS]
    if seeds and rng.random() < 0.4:
        content, what = _requantized(rng, rng.choice(seeds))
    else:
        content, what = _odd_quantized(rng)
    record(content)

    def run(delegates: list[str]) -> None:
        interp = offload.Interpreter(model_content=content, delegates=delegates)
        interp.allocate_tensors()
        nrng = np.random.default_rng(case)  # the same inputs for both runs
        _invoke(interp, [_values(nrng, d["shape"], d["dtype"]) for d in interp.get_input_details()])

    try:
        run([])
    except UnsupportedOpError as exc:
        return _typed(exc, ": the CPU reference has no kernel, which a delegate may have")
    except OffloadError as refused:
        try:
            run([name])
        except OffloadError as exc:
            return _typed(exc)
        return (
            f"FINDING {what}: the CPU reference refuses it ({type(refused).__name__}: "
            f"{str(refused)[:200]}), {name} ran it"
        )
    return "ok: the CPU reference runs it"


def _requantized(rng: Random, path: Path) -> tuple[bytes, str]:
    """A real quantized model with one or two scales, zero points or quantized dimensions
    rewritten, by tests/_mutate.py's rules."""
    content = bytearray(path.read_bytes())
    sites = _mutate._sites(bytes(content))
    kinds = sorted(k for k in ("scale", "zero_point", "qdim") if k in sites)
    changed = []
    for _ in range(rng.randint(1, 2)):
        kind = rng.choice(kinds)
        fmt, offset = rng.choice(sites[kind])
        (old,) = struct.unpack_from(fmt, content, offset)
        new = _mutate._new_value(fmt, old, rng)
        struct.pack_into(fmt, content, offset, new)
        changed.append(f"{kind} {old!r} -> {new!r}")
    return bytes(content), f"{path.name} with {'; '.join(changed)}"


def _odd_quantized(rng: Random) -> tuple[bytes, str]:
    """A small int8 model (an op gpu_opencl takes quantized) with one tensor's quantization
    bent: odd scales and zero points, per-channel where per-tensor belongs, a dimension out
    of range, weights with a zero point, a bias whose scale is not input x weight."""
    op = rng.choice(
        ["ADD", "SUB", "MUL", "MAXIMUM", "CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"]
        + ["AVERAGE_POOL_2D", "MAX_POOL_2D", "SOFTMAX", "LOGISTIC", "RELU", "CONCATENATION"]
    )
    params: dict[str, Any] = {
        "x": Quantization(np.array([0.05], np.float32), np.array([3], np.int64)),
        "y": Quantization(np.array([0.1], np.float32), np.array([-2], np.int64)),
    }
    if op in ("SOFTMAX", "LOGISTIC"):
        params["y"] = Quantization(np.array([1 / 256], np.float32), np.array([-128], np.int64))
    weighted = op in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED")
    if weighted:
        axis = 3 if op == "DEPTHWISE_CONV_2D" else 0
        params["w"] = Quantization(np.full(4, 0.01, np.float32), np.zeros(4, np.int64), axis)
        params["bias"] = Quantization(np.full(4, 0.0005, np.float32), np.zeros(4, np.int64))
    bent = rng.choice(sorted(params))
    # The loader refuses most odd numbers itself; the kernels' own refusals (a tensor that
    # lacks its quantization, a filter's zero points) are reached by bending the structure.
    params[bent] = _odd_quant(rng) if rng.random() < 0.4 else _bent_structure(rng)
    b = ModelBuilder()
    shape = (1, 4, 4, 4) if op not in ("FULLY_CONNECTED",) else (2, 4)
    x = b.add_input("x", shape, np.int8, quantization=params["x"])
    inputs = [x]
    out_shape: tuple[int, ...] = shape
    options: dict[str, Any] = {}
    if op in ("ADD", "SUB", "MUL", "MAXIMUM", "CONCATENATION"):
        inputs.append(b.add_input("x2", shape, np.int8, quantization=params["x"]))
        if op == "CONCATENATION":
            options, out_shape = {"axis": 3}, (1, 4, 4, 8)
    elif weighted:
        w_shape = {"CONV_2D": (4, 3, 3, 4), "DEPTHWISE_CONV_2D": (1, 3, 3, 4)}.get(op, (4, 4))
        w = np.arange(math.prod(w_shape)).reshape(w_shape) % 7 - 3
        inputs.append(b.add_constant("w", w.astype(np.int8), quantization=params["w"]))
        bias = np.arange(4, dtype=np.int32) * 10
        inputs.append(b.add_constant("bias", bias, quantization=params["bias"]))
        if op != "FULLY_CONNECTED":
            options = {"padding": "SAME", "stride_h": 1, "stride_w": 1}
        out_shape = (2, 4) if op == "FULLY_CONNECTED" else shape
    elif op in ("AVERAGE_POOL_2D", "MAX_POOL_2D"):
        options = {"padding": "VALID", "stride_h": 2, "stride_w": 2}
        options |= {"filter_height": 2, "filter_width": 2}
        out_shape = (1, 2, 2, 4)
    elif op == "SOFTMAX":
        options = {"beta": 1.0}
    y = b.add_tensor("y", out_shape, np.int8, quantization=params["y"])
    b.add_operator(op, inputs, [y], options or None)
    b.add_output(y)
    shown = params[bent]
    text = "none" if shown is None else f"{shown.scale.tolist()} / {shown.zero_point.tolist()}"
    return b.build(), f"int8 {op} with {bent}'s quantization {text}"


def _bent_structure(rng: Random) -> Quantization | None:
    """Quantization whose shape is wrong rather than its numbers: per-channel on a tensor
    that has no such channel count, a dimension out of range, or none at all."""
    return rng.choice(
        [
            Quantization(np.full(3, 0.05, np.float32), np.zeros(3, np.int64), 0),
            Quantization(np.full(4, 0.05, np.float32), np.zeros(4, np.int64), 9),
            Quantization(np.full(4, 0.05, np.float32), np.arange(4, dtype=np.int64), 3),
            Quantization(np.array([0.05], np.float32), np.array([5], np.int64), 0),
            None,
            None,
        ]
    )


TARGETS: dict[str, Target] = {
    "models": models,
    "op_types": op_types,
    "division": division,
    "foreign_options": foreign_options,
    "cast": cast,
    "scratch": scratch,
    "api": api,
    "scribble": scribble,
    "external_delegate": external_delegate,
    "terminal": terminal,
    "quant_refusal": quant_refusal,
    **ROUND3_TARGETS,  # the classes of issue 37: scale_edges, readonly_buffer, ...
}
