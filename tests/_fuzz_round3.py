"""Fuzz targets for the reliability classes of issue 37 (round 3), registered in
``tests/_fuzz_targets.py``'s TARGETS: scale_edges, readonly_buffer, cache_damage, cli_files.

Each is ``target(case, delegate) -> outcome`` as described there: case N is made from N alone,
and the outcome is ``ok``, ``typed ...``, ``skip: ...`` or ``FINDING ...``. The helpers that
tell the script about a case (``record``, ``oracle_starts``) live in ``_fuzz_targets``, which
imports this module; they are imported here when a case runs, not at import time.

``sweep_isolation`` (issue 37 class 6, a configuration that kills its worker) is the slow
one: a case is two sweeps, one whose workers die and are restarted three times, seconds of
processes per case.
"""

from __future__ import annotations

import contextlib
import io
import os
import tempfile
import warnings
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from random import Random
from typing import Any
from unittest import mock

import numpy as np

import offload
from offload.errors import CacheError, OffloadError, ReadOnlyBufferError
from offload.model.builder import ModelBuilder

__all__ = ["ROUND3_TARGETS", "SWEEP_FIGURES"]

Target = Callable[[int, str | None], str]


def _fuzz() -> Any:
    """tests/_fuzz_targets.py, which imports this module (so only when a case runs)."""
    from . import _fuzz_targets

    return _fuzz_targets


def _available(delegate: str | None) -> str | None:
    """Why ``delegate`` cannot run here, or None."""
    if delegate is None:
        return None
    try:
        offload.load_delegate(delegate)
    except OffloadError as exc:
        return f"skip: {delegate} is not available here ({type(exc).__name__})"
    return None


@contextlib.contextmanager
def _private_cache() -> Iterator[Path]:
    """A fresh auto cache directory for the case, through the environment, with a short
    budget: a fuzz run neither reads nor fills the user's cache, and measures briefly."""
    with tempfile.TemporaryDirectory() as tmp:
        env = {"OFFLOAD_AUTO_CACHE_DIR": str(Path(tmp) / "cache"), "OFFLOAD_AUTO_BUDGET_S": "0.05"}
        with mock.patch.dict(os.environ, env):
            os.environ.pop("OFFLOAD_DELEGATES", None)
            yield Path(tmp)


# -- 1, 2. quantization scales at the edges ------------------------------------------------------

_REDUCE_OPS = ("MEAN", "SUM")
_ACTIVATIONS = ("NONE", "RELU", "RELU6", "RELU_N1_TO_1")


def _edge_scale(rng: Random) -> float:
    """A scale over the whole float32 range, often near its ends."""
    exponent = rng.choice([rng.uniform(-40, 38), rng.choice([-38, -30, -20, 20, 30, 37])])
    return float(np.float32(10.0 ** (exponent + rng.uniform(-0.5, 0.5))))


def _edge_model(rng: Random) -> tuple[bytes, str]:
    """One requantizing op of tests/_scale_edges.py (int8 or int16) with scales drawn over
    the float32 range, random zero points where the kernel takes them, and random shapes,
    axes and activations."""
    from ._scale_edges import BINARY, OPS

    op, dtype = rng.choice(OPS), rng.choice(["int8", "int16"])
    if op in ("SQUARED_DIFFERENCE", "HARD_SWISH") and rng.random() < 0.8:
        dtype = "int8"  # their int16 forms are refused for the type alone, a case soon told
    scales = [_edge_scale(rng) if rng.random() < 0.7 else 10 ** rng.uniform(-3, 1) for _ in "abc"]
    if rng.random() < 0.3:
        scales[1] = scales[0]
    if dtype == "int16":  # LiteRT's int16 kernels take zero points 0 only
        z_in = z_in2 = z_out = 0
    else:
        z_in, z_in2, z_out = (rng.randint(-128, 127) if rng.random() < 0.6 else 0 for _ in "abc")
        if op == "CONCATENATION":  # LiteRT's int8 kernel wants them equal
            z_in2 = z_out = z_in
    shape = tuple(rng.randint(1, 4) for _ in range(4))
    b = ModelBuilder()
    x = b.add_input("x", shape, dtype, quantization=(scales[0], z_in))
    options: dict[str, Any] = {}
    if op in BINARY or op == "CONCATENATION":
        x2 = b.add_input("x2", shape, dtype, quantization=(scales[1], z_in2))
    if op in BINARY:
        out_shape = shape
        inputs = [x, x2]
        if op != "SQUARED_DIFFERENCE" and rng.random() < 0.3:
            options["fused_activation_function"] = rng.choice(_ACTIVATIONS)
    elif op in _REDUCE_OPS:
        axes = sorted(rng.sample(range(4), rng.randint(1, 4)))
        keep = rng.random() < 0.5
        out_shape = tuple(
            1 if i in axes else d for i, d in enumerate(shape) if keep or i not in axes
        )
        inputs = [x, b.add_constant("axis", np.array(axes, np.int32))]
        options["keep_dims"] = keep
    elif op == "HARD_SWISH":
        out_shape, inputs = shape, [x]
    else:
        axis = rng.randint(0, 3)
        out_shape = tuple(d * 2 if i == axis else d for i, d in enumerate(shape))
        inputs, options = [x, x2], {"axis": axis}
    y = b.add_tensor("y", out_shape, dtype, quantization=(scales[2], z_out))
    b.add_operator(op, inputs, [y], options or None)
    b.add_output(y)
    what = f"{dtype} {op} scales {scales} zero points {(z_in, z_in2, z_out)} {options}"
    return b.build(), what


def _edge_interpreter(content: bytes, delegate: str | None, rng: Random) -> Any:
    """The path under test: the default (nothing named), or the delegate named (litert with
    its builtin kernels or XNNPACK, at random)."""
    if delegate is None:
        return offload.Interpreter(model_content=content)
    if delegate == "litert":
        kernels = rng.choice(["builtin", "xnnpack"])
        lite = offload.load_delegate("litert", {"kernels": kernels})
        return offload.Interpreter(model_content=content, experimental_delegates=[lite])
    return offload.Interpreter(model_content=content, delegates=[delegate])


def scale_edges(case: int, delegate: str | None) -> str:
    """A one-op quantized model (ADD, SUB, MUL, SQUARED_DIFFERENCE, MEAN, SUM, HARD_SWISH,
    CONCATENATION; int8 or int16) with scales anywhere in the float32 range, on the default
    path or the delegate named. Pass: no crash on any path; where LiteRT's Prepare aborts or
    refuses (``offload.quant.rescale_limit`` says stage "prepare", the rule
    tests/test_scale_edges.py holds to LiteRT's record; or LiteRT refuses it here) a typed
    error, never an answer; where LiteRT answers, an answer within one step of its builtin
    kernels' wherever a delegate ran the node, and wherever the CPU reference ran it with the
    scales inside the rule's bounds (no stage). A refusal at allocate naming the scales where
    LiteRT answers is a finding too."""
    from offload.quant import rescale_limit

    fuzz = _fuzz()
    if why := _available(delegate):
        return why
    if fuzz._litert() is None:
        return "skip: ai-edge-litert (the oracle) is not installed"
    rng = Random(case)
    content, what = _edge_model(rng)
    fuzz.record(content)
    nrng = np.random.default_rng(case)
    with _private_cache(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = offload.load_model(model_content=content)
        limit = rescale_limit(model.main.nodes[0], model.main)
        stage = None if limit is None else limit.stage
        tensors = [model.main.tensors[t] for t in model.main.inputs]
        inputs = [fuzz._values(nrng, t.shape, t.dtype) for t in tensors]
        try:
            interp = _edge_interpreter(content, delegate, rng)
            interp.allocate_tensors()
            got = fuzz._invoke(interp, inputs)
            ran_on = "cpu" if interp.delegation_report()["cpu"]["nodes"] else "delegate"
        except OffloadError as refused:
            if stage == "prepare":
                return fuzz._typed(refused, " where LiteRT aborts or refuses")
            if "expected LiteRT's" not in str(refused):
                return fuzz._typed(refused)
            try:  # a refusal naming the scales: does LiteRT run it?
                fuzz._litert_outputs(content, inputs)
            except Exception:
                return fuzz._typed(refused, " where LiteRT refuses")
            return f"FINDING {what}: refused at allocate ({refused}) where LiteRT runs it"
    if stage == "prepare":
        return f"FINDING {what}: answered on {ran_on} where LiteRT's Prepare aborts or refuses"
    try:
        want = fuzz._litert_outputs(content, inputs)
    except Exception as exc:  # LiteRT's refusals are RuntimeError and ValueError alike
        return f"FINDING {what}: answered on {ran_on} where LiteRT refuses ({exc})"
    if ran_on == "cpu" and stage is not None:
        return f"ok: the CPU reference ran it at the {stage} edge (not compared)"
    if diff := fuzz._difference(got[0], want[0]):
        return f"FINDING {what}: {ran_on} answered {diff}"
    return f"ok: {ran_on} agrees with LiteRT"


# -- 3. read-only arrays in TensorBuffer ---------------------------------------------------------


def _rnn(rng: Random) -> bytes:
    """x[1, 3] -> RNN -> y[1, 4], its hidden state h[1, 4] a signature input that the RNN
    updates in place (as tests/test_compiled_model.py's)."""
    nrng = np.random.default_rng(rng.randrange(2**32))
    b = ModelBuilder()
    x = b.add_input("x", shape=(1, 3))
    w = b.add_constant("w", nrng.uniform(-1, 1, (4, 3)).astype(np.float32))
    r = b.add_constant("r", nrng.uniform(-1, 1, (4, 4)).astype(np.float32))
    bias = b.add_constant("bias", np.zeros(4, np.float32))
    h = b.add_input("h", shape=(1, 4))
    y = b.add_tensor("y", shape=(1, 4))
    options = {"fused_activation_function": rng.choice(["TANH", "RELU", "NONE"])}
    b.add_operator("RNN", inputs=[x, w, r, bias, h], outputs=[y], options=options)
    b.add_output(y)
    return b.build()


def _float_chain(rng: Random) -> tuple[bytes, list[tuple[int, ...]], int, set[int]]:
    """A float32 model of one to three elementwise ops over one or two inputs, with one or
    two outputs, or an RNN whose state is an input: (model, input shapes, output count,
    the inputs the run updates in place)."""
    if rng.random() < 0.25:
        return _rnn(rng), [(1, 3), (1, 4)], 1, {1}
    shape = tuple(rng.randint(1, 4) for _ in range(rng.randint(1, 3)))
    b = ModelBuilder()
    inputs = [b.add_input(f"x{i}", shape) for i in range(rng.randint(1, 2))]
    live = list(inputs)
    outs = []
    for k in range(rng.randint(1, 3)):
        out = b.add_tensor(f"t{k}", shape)
        op = rng.choice(["ADD", "MUL", "SUB", "TANH", "RELU"])
        if op in ("TANH", "RELU"):
            b.add_operator(op, [rng.choice(live)], [out])
        else:
            b.add_operator(op, [rng.choice(live), rng.choice(live)], [out])
        live.append(out)
        outs.append(out)
    chosen = [outs[-1]] + ([outs[0]] if len(outs) > 1 and rng.random() < 0.5 else [])
    for out in chosen:
        b.add_output(out)
    return b.build(), [shape] * len(inputs), len(chosen), set()


def _frozen(rng: Random, array: np.ndarray) -> np.ndarray:
    """``array``'s values in a read-only array, made one of the ways a user meets one."""
    way = rng.choice(["frombuffer", "flag", "view"])
    if way == "frombuffer":
        return np.frombuffer(array.tobytes(), array.dtype)
    copy = np.array(array).reshape(-1)
    if way == "view":
        copy = copy[:]
    copy.setflags(write=False)
    return copy


def readonly_buffer(case: int, delegate: str | None) -> str:
    """A CompiledModel (CPU hardware: it chooses among the installed CPU delegates itself,
    with a private cache; ``delegate`` only needs to be available) run with a random mix of
    read-only and writable TensorBuffers, and write() into random ones; the model is an
    elementwise chain, or an RNN whose hidden state is an input it updates in place. Pass:
    write() into a read-only buffer is ReadOnlyBufferError and leaves it as it was; a run
    with a read-only output buffer, or a read-only state input, is ReadOnlyBufferError before
    anything runs (every output and state buffer unchanged); a run whose read-only buffers
    are only inputs it reads gives the CPU reference's answer (within 1e-5 relative) and
    leaves those inputs as they were."""
    from offload import compiled_model as cm

    fuzz = _fuzz()
    if why := _available(delegate):
        return why
    rng = Random(case)
    nrng = np.random.default_rng(case)
    content, shapes, n_out, state = _float_chain(rng)
    fuzz.record(content)
    values = [nrng.standard_normal(s).astype(np.float32) for s in shapes]
    ref = offload.Interpreter(model_content=content, delegates=[])
    ref.allocate_tensors()
    want = fuzz._invoke(ref, values)
    with _private_cache(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = cm.CompiledModel.from_buffer(content)
        ins = model.create_input_buffers(0)
        outs = model.create_output_buffers(0)
        frozen_in = [rng.random() < 0.5 for _ in ins]
        frozen_out = [rng.random() < 0.3 for _ in outs]
        for i, v in enumerate(values):
            if frozen_in[i]:
                ins[i] = cm.TensorBuffer.create_from_host_memory(_frozen(rng, v))
            else:
                ins[i].write(v)
        sentinel = [np.full(o.capsule.size, 7.0, np.float32) for o in outs]
        for i, s in enumerate(sentinel):
            if frozen_out[i]:
                outs[i] = cm.TensorBuffer.create_from_host_memory(_frozen(rng, s))
            else:
                outs[i].write(s)
        for i in rng.sample(range(len(ins)), rng.randint(0, len(ins))):  # writes into some
            before = ins[i].capsule.copy()
            try:
                ins[i].write(np.zeros(before.size, np.float32))
            except ReadOnlyBufferError:
                if frozen_in[i] and np.array_equal(ins[i].capsule, before):
                    continue  # refused, nothing written: as it must
                return f"FINDING write() refused into a writable buffer {i}, or changed it"
            if frozen_in[i]:
                return f"FINDING write() into read-only input buffer {i} did not raise"
            ins[i].capsule.reshape(-1)[...] = values[i].reshape(-1)  # back to the case's values
        try:
            model.run_by_index(0, ins, outs)
        except ReadOnlyBufferError as exc:
            if not any(frozen_out) and not any(frozen_in[i] for i in state):
                return f"FINDING ReadOnlyBufferError with only read-only inputs it reads: {exc}"
            changed = [
                f"output {i}"
                for i, o in enumerate(outs)
                if not np.array_equal(o.capsule.ravel(), sentinel[i])
            ] + [
                f"input {i}"
                for i in state
                if not np.array_equal(ins[i].capsule.reshape(values[i].shape), values[i])
            ]
            if changed:
                return f"FINDING refused with a read-only buffer, yet {changed} changed"
            return fuzz._typed(exc)
        if any(frozen_out) or any(frozen_in[i] for i in state):
            return f"FINDING a run with read-only buffers (out {frozen_out}, in {frozen_in}) ran"
        for i, v in enumerate(values):
            if i not in state and not np.array_equal(ins[i].capsule.reshape(v.shape), v):
                return f"FINDING input buffer {i} changed by the run"
        for i in range(n_out):
            got = outs[i].read(outs[i].capsule.size, np.float32).reshape(want[i].shape)
            if diff := fuzz._difference(got, want[i]):
                return f"FINDING output {i}: {diff}"
    return f"ok: read-only inputs {frozen_in}"


# -- 4. damaged auto caches ----------------------------------------------------------------------


def _damage(rng: Random, where: Path, model: bytes) -> tuple[Path, str]:
    """A cache directory under ``where`` damaged one way (after a healthy cache made by
    delegates="auto", for damage to its entries): (the path to name, the damage)."""
    from offload.cache import _KEY_FILE as KEY_FILE

    path = where / "cache"
    kind = rng.choice(
        ["empty key", "garbage key", "loose key", "key dir", "key link", "dir file", "dir link"]
        + ["shared dir", "under a file", "entry bytes", "entry cut", "entry dir", "entry mode"]
        + ["stray files"]
    )
    if kind.startswith(("entry", "stray")):
        interp = offload.Interpreter(
            model_content=model, delegates="auto", auto_budget_s=0.05, auto_cache_dir=path
        )
        interp.allocate_tensors()
        entries = [
            p for p in path.rglob("*") if p.is_file() and p.name != KEY_FILE and p.parent != path
        ] or [p for p in path.rglob("*") if p.is_file() and p.name != KEY_FILE]
        if not entries:
            return path, f"{kind}: (no entry was stored)"
        entry = rng.choice(entries)
        data = bytearray(entry.read_bytes())
        if kind == "entry bytes" and data:
            for _ in range(rng.randint(1, 8)):
                data[rng.randrange(len(data))] = rng.randrange(256)
            entry.write_bytes(bytes(data))
        elif kind == "entry cut":
            entry.write_bytes(bytes(data[: rng.randrange(len(data) + 1)]))
        elif kind == "entry dir":
            entry.unlink()
            entry.mkdir()
        elif kind == "entry mode":
            entry.chmod(rng.choice([0o644, 0o666, 0o000, 0o700]))
        else:
            (entry.parent / f"junk{rng.randrange(99)}").write_bytes(rng.randbytes(40))
            (path / "zz").write_bytes(b"")
        return path, f"{kind} ({entry.relative_to(path)})"
    if kind == "under a file":
        (where / "file").write_bytes(b"")
        return where / "file" / "cache", kind
    if kind == "dir file":
        path.write_bytes(rng.randbytes(rng.randint(0, 40)))
        return path, kind
    if kind == "dir link":
        (where / "real").mkdir(mode=0o700)
        path.symlink_to(where / "real")
        return path, kind
    path.mkdir(mode=0o777 if kind == "shared dir" else 0o700)
    if kind == "shared dir":
        path.chmod(rng.choice([0o777, 0o770, 0o707, 0o755 | 0o020]))
    key = path / KEY_FILE
    if kind == "key dir":
        key.mkdir()
    elif kind == "key link":
        (where / "elsewhere.key").write_bytes(os.urandom(32))
        (where / "elsewhere.key").chmod(0o600)
        key.symlink_to(where / "elsewhere.key")
    elif kind != "shared dir":
        size = {"empty key": 0, "loose key": 32}.get(kind, rng.choice([1, 31, 33, 64, 200]))
        key.write_bytes(rng.randbytes(size))
        key.chmod(rng.choice([0o644, 0o604, 0o640, 0o666]) if kind == "loose key" else 0o600)
    return path, kind


def _listing(path: Path) -> list[str]:
    """What is in the cache path (names, sizes, modes): what a fault must leave alone."""
    if path.is_symlink() or not path.is_dir():
        return [f"{path.name}:{path.lstat().st_mode:o}"] if os.path.lexists(path) else []
    return sorted(
        f"{p.relative_to(path)}:{p.lstat().st_size}:{p.lstat().st_mode:o}" for p in path.rglob("*")
    )


def cache_damage(case: int, delegate: str | None) -> str:
    """An auto cache damaged one way (its key file empty, garbage, loose, a directory or a
    link; the directory a file, a link, shared or under a file; an entry's bytes changed, cut
    short, made a directory or loosened; stray files), reached one way: the default
    Interpreter with the directory from the environment or ``auto_cache_dir=``,
    delegates="auto" with it from the environment, ``$OFFLOAD_DELEGATES=auto``, a
    CompiledModel, the delegate named (where one is), or delegates="auto" with
    ``auto_cache_dir=`` given. Pass: every way but the last runs and gives the CPU reference's
    answer (1e-5 relative); the last may raise CacheError, and nothing else; where a warning
    said the cache is off for the fault, the directory is left as it was (a damaged entry is
    discarded and rebuilt, by design)."""
    from offload import compiled_model as cm
    from offload.cache import CacheWarning

    from ._auto_fakes import chain_model

    fuzz = _fuzz()
    if why := _available(delegate):
        return why
    rng = Random(case)
    model = chain_model(seed=case % 1000)
    x = np.random.default_rng(case).standard_normal((1, 16)).astype(np.float32)
    ref = offload.Interpreter(model_content=model, delegates=[])
    ref.allocate_tensors()
    (want,) = fuzz._invoke(ref, [x])
    ways = ["default env", "default arg", "auto env", "env auto", "compiled", "auto arg"]
    way = rng.choice(ways + (["named"] * 2 if delegate else []))
    with _private_cache() as tmp, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        path, damage = _damage(rng, tmp, model)
        caught.clear()
        before = _listing(path)
        env = {"OFFLOAD_AUTO_CACHE_DIR": str(path)}
        if way == "env auto":
            env["OFFLOAD_DELEGATES"] = "auto"
        try:
            with mock.patch.dict(os.environ, env):
                if way == "compiled":
                    compiled = cm.CompiledModel.from_buffer(model)
                    ins, outs = compiled.create_input_buffers(0), compiled.create_output_buffers(0)
                    ins[0].write(x)
                    compiled.run_by_index(0, ins, outs)
                    got = outs[0].read(16, np.float32).reshape(want.shape)
                else:
                    arguments: dict[str, dict[str, Any]] = {
                        "default env": {},
                        "default arg": {"auto_cache_dir": path},
                        "auto env": {"delegates": "auto", "auto_budget_s": 0.05},
                        "env auto": {"auto_budget_s": 0.05, "auto_cache_dir": path},
                        "named": {"delegates": [delegate]},
                        "auto arg": {
                            "delegates": "auto",
                            "auto_budget_s": 0.05,
                            "auto_cache_dir": path,
                        },
                    }
                    interp = offload.Interpreter(model_content=model, **arguments[way])
                    interp.allocate_tensors()
                    (got,) = fuzz._invoke(interp, [x])
        except CacheError as exc:
            if way == "auto arg":
                return fuzz._typed(exc, " (asked for this directory)")
            return f"FINDING {damage}, {way}: CacheError where the cache was not asked for: {exc}"
        except Exception as exc:
            return f"FINDING {damage}, {way}: {type(exc).__name__}: {str(exc)[:300]}"
        warned = [w for w in caught if issubclass(w.category, CacheWarning)]
        # A damaged entry is discarded and rebuilt, by design; a fault that turns the cache
        # off ("running without remembering") leaves the damage for the user to look at.
        off = [w for w in warned if "without remembering" in str(w.message)]
        if off and _listing(path) != before:
            return (
                f"FINDING {damage}, {way}: warned of a fault ({str(off[0].message)[:200]}), "
                "then changed the directory"
            )
    if diff := fuzz._difference(got, want):
        return f"FINDING {damage}, {way}: {diff} (the CPU reference's answer)"
    return f"ok: {'warned' if warned else 'ran'}"


# -- 5. CLI data and report files ----------------------------------------------------------------


def _npz_fault(rng: Random, folder: Path, nrng: np.random.Generator) -> Path:
    """A file given as --npz that is not what it reads, or is only nearly: random bytes, a
    good archive cut or with bytes changed, a .npy, text, an empty file, a zip of something
    else, arrays of odd names, shapes and types, odd labels, a folder, nothing."""
    path = folder / rng.choice(["data.npz", "data", "data.npy", "d a t a.npz"])
    good = io.BytesIO()
    arrays: dict[str, Any] = {"x": nrng.standard_normal((3, 1, 4)).astype(np.float32)}
    kind = rng.randrange(10)
    if kind == 0:
        arrays = {rng.choice(["x", "y", "labels", "x_0"]): arrays["x"]}
        arrays[rng.choice(["labels", "x", "z"])] = rng.choice(
            [
                np.zeros((3, 2), int),
                np.array(["a", "b", "c"]),
                np.zeros(3, np.float32) + 0.5,
                np.zeros(0, int),
                np.arange(5),
                np.array(-1),
            ]
        )
    elif kind == 1:
        dtype = rng.choice([np.int8, np.float64, np.complex64, np.bool_, np.float16, np.uint8])
        shape = rng.choice([(3, 1, 4), (3, 4), (0, 1, 4), (3, 2, 4), (1,), ()])
        arrays = {"x": np.zeros(shape, dtype)}
    np.savez(good, **arrays)
    data = bytearray(good.getvalue())
    if kind == 2:
        data = data[: rng.randrange(len(data))]
    elif kind == 3:
        for _ in range(rng.randint(1, 10)):
            data[rng.randrange(len(data))] = rng.randrange(256)
    elif kind == 4:
        data = bytearray(rng.randbytes(rng.randint(0, 300)))
    elif kind == 5:
        saved = io.BytesIO()
        np.save(saved, arrays["x"])
        data = bytearray(saved.getvalue())
    elif kind == 6:
        zipped = io.BytesIO()
        with zipfile.ZipFile(zipped, "w") as z:
            z.writestr(rng.choice(["x.npy", "x.txt", "x"]), rng.randbytes(rng.randint(0, 64)))
        data = bytearray(zipped.getvalue())
    elif kind == 7:
        data = bytearray(rng.choice([b"", b"a,b\n1,2\n", "ünïcode".encode(), b"PK\x03\x04"]))
    elif kind == 8:
        path.mkdir()
        return path
    elif kind == 9 and rng.random() < 0.5:
        return folder / "missing" / "data.npz"
    path.write_bytes(bytes(data))
    return path


def _report_fault(rng: Random, folder: Path, suffix: str) -> Path:
    """A report file that cannot be written: in a missing folder, a folder itself, under a
    regular file, a name that is empty after the folder; or, sometimes, one that can."""
    (folder / "a_file").write_bytes(b"")
    return rng.choice(
        [
            folder / "missing" / f"r{suffix}",
            folder / "missing" / "deeper" / f"r{suffix}",
            folder,
            folder / "a_file" / f"r{suffix}",
            folder / f"ok{suffix}",
        ]
    )


def cli_files(case: int, delegate: str | None) -> str:
    """``offload sweep --npz`` on a damaged or odd data file, or ``offload sweep``/``check``
    with a report file (--csv, --html, --svg) that cannot be written, run in this process
    through the CLI's main (the CPU reference, or the delegate named, as the configuration).
    Pass: main returns 0 (the file was usable), 1, or 2; with 2, stderr is exactly one line
    starting "error: "; never a traceback, an exception out of main, or a folder created for
    a report that failed."""
    from offload._cli import main

    if why := _available(delegate):
        return why
    rng = Random(case)
    nrng = np.random.default_rng(case)
    with tempfile.TemporaryDirectory() as tmp, _private_cache():
        folder = Path(tmp) / "work"
        folder.mkdir()
        model = folder / "m.tflite"
        b = ModelBuilder()
        x = b.add_input("x", (1, 4))
        c = b.add_constant("c", np.ones((1, 4), np.float32))
        y = b.add_tensor("y", (1, 4))
        b.add_operator(rng.choice(["ADD", "MUL", "SUB"]), [x, c], [y])
        b.add_output(y)
        b.save(model)
        config = delegate or "cpu"
        sweep = ["sweep", str(model), "-c", config, "--reference", "cpu", "--workers", "1"]
        roll = rng.random()
        if roll < 0.5:
            argv = [*sweep, "--npz", str(_npz_fault(rng, folder, nrng))]
        elif roll < 0.75:
            flag, suffix = rng.choice([("--csv", ".csv"), ("--html", ".html")])
            argv = [*sweep, "--random", "2", flag, str(_report_fault(rng, folder, suffix))]
        else:
            flag, suffix = rng.choice([("--svg", ".svg"), ("--html", ".html")])
            argv = ["check", str(model), flag, str(_report_fault(rng, folder, suffix))]
            argv += ["--delegate", delegate] if delegate else []
        shown = " ".join(a.replace(tmp, "$TMP") for a in argv)
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    status = main(argv)
                except SystemExit as exc:  # argparse's usage errors
                    status = exc.code if isinstance(exc.code, int) else 1
                except Exception as exc:
                    return f"FINDING offload {shown}: {type(exc).__name__} out of main: {exc}"
        text = err.getvalue()
        if "Traceback" in text:
            return f"FINDING offload {shown}: a traceback: {text[-300:]!r}"
        if status not in (0, 1, 2):
            return f"FINDING offload {shown}: exit {status}"
        lines = text.strip().splitlines()
        if status == 2 and not (len(lines) == 1 and lines[0].startswith("error: ")):
            return f"FINDING offload {shown}: exit 2 with {len(lines)} lines: {text[:300]!r}"
        if (folder / "missing").exists():
            return f"FINDING offload {shown}: made the missing folder"
    return f"ok: exit {status}"


# -- 6. a configuration that kills its worker --------------------------------------------------

SWEEP_FIGURES = (
    "status",
    "items",
    "failed_items",
    "top1",
    "top1_agreement",
    "max_error",
    "max_steps",
)


def sweep_isolation(case: int, delegate: str | None) -> str:
    """``offload.sweep`` over 1-3 tiny classifiers and seeded random data, with a configuration
    that kills its worker (``tests._crash_delegate``, at kernel init or at invoke, on models with
    an ADD) among ``cpu`` and the delegate named, at a random place in the list, with 2 or 3
    worker processes and random shard sizes. Pass: every (model, configuration) row exactly
    once; the crashing configuration's rows fail, after its retries, on the models it takes a
    node of and are ok on the others; every other row equals, figure for figure, a sweep of
    the same models and data without the crashing configuration."""
    from tests._sweep_models import colour_classifier

    if why := _available(delegate):
        return why
    rng = Random(case)
    crasher = f"tests._crash_delegate:when={rng.choice(['init', 'invoke'])}"
    others = ["cpu", *([delegate] if delegate else [])]
    configs = list(others)
    configs.insert(rng.randrange(len(configs) + 1), crasher)
    kwargs: dict[str, Any] = {
        "random": rng.randint(1, 8),
        "seed": case,
        "reference": "cpu",
        # workers=1 runs the sweep in the calling process, documented as unprotected.
        "workers": rng.choice([2, 3]),
        "shard_size": rng.randint(1, 4),
    }
    env = {} if delegate else {"OFFLOAD_DISABLE_PLUGIN_AUTOLOAD": "1"}  # workers start faster
    with tempfile.TemporaryDirectory() as tmp, _private_cache(), mock.patch.dict(os.environ, env):
        shifts = [rng.choice([0.0, 0.25, -0.5]) for _ in range(rng.randint(1, 3))]
        paths = [colour_classifier(Path(tmp) / f"m{k}.tflite", s) for k, s in enumerate(shifts)]
        shown = f"models with shifts {shifts}, configs {configs}, {kwargs}"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                report = offload.sweep(paths, configs, **kwargs)
                clean = offload.sweep(paths, others, **kwargs)
            except Exception as exc:
                return f"FINDING offload sweep ({shown}): {type(exc).__name__}: {exc}"
    keys = [(Path(r.model).name, r.config) for r in report.rows]
    if sorted(keys) != sorted({(p.name, c) for p in paths for c in configs}):
        return f"FINDING offload sweep ({shown}): rows {sorted(keys)}"
    for path, shift in zip(paths, shifts):
        row = report.row(path.name, crasher)
        crashes = shift != 0.0
        if crashes and not (row.status == "failed" and "worker process died" in row.reason):
            return (
                f"FINDING offload sweep ({shown}): {path.name} {crasher}: {row.status} {row.reason}"
            )
        if not crashes and row.status != "ok":
            return (
                f"FINDING offload sweep ({shown}): {path.name} {crasher} (takes no node): "
                f"{row.reason}"
            )
    for row in clean.rows:
        got = report.row(row.model, row.config)
        want_figures = [getattr(row, k) for k in SWEEP_FIGURES]
        got_figures = [getattr(got, k) for k in SWEEP_FIGURES]
        if got_figures != want_figures:
            return (
                f"FINDING offload sweep ({shown}): {row.model} {row.config}: {got_figures} "
                f"beside the crashing configuration, {want_figures} without it"
            )
    return f"ok: {sum(s != 0.0 for s in shifts)} of {len(shifts)} model(s) crash their worker"


ROUND3_TARGETS: dict[str, Target] = {
    "scale_edges": scale_edges,
    "readonly_buffer": readonly_buffer,
    "cache_damage": cache_damage,
    "cli_files": cli_files,
    "sweep_isolation": sweep_isolation,
}
