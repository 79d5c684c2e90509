"""``offload demo``: build a small image classifier with the model builder and run it.

It runs on the CPU reference and on every installed, available delegate, and prints the
outputs, their agreement with the CPU, the timing, and who ran which node.
"""

from __future__ import annotations

import statistics
import time

import numpy as np

from offload._interpreter import Interpreter
from offload._plugins import list_delegates, load_delegate
from offload.model.builder import ModelBuilder

__all__ = ["build_demo_model", "main"]


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


def _time_runs(interp: Interpreter, image: np.ndarray, runs: int) -> tuple[np.ndarray, float]:
    index = interp.get_input_details()[0]["index"]
    out_index = interp.get_output_details()[0]["index"]
    times = []
    for _ in range(runs):
        interp.set_tensor(index, image)
        start = time.perf_counter()
        interp.invoke()
        times.append(time.perf_counter() - start)
    return interp.get_tensor(out_index), statistics.median(times)


def main(runs: int = 20) -> int:
    content = build_demo_model()
    image = np.random.default_rng(1).random((1, 32, 32, 3), dtype=np.float32)
    print(f"demo model: {len(content)} bytes, built with offload.model.builder")
    configs: list[tuple[str, list]] = [("cpu", [])]
    for record in list_delegates():
        if record.availability.available:
            configs.append((record.name, [load_delegate(record.name)]))
        else:
            print(f"delegate {record.name}: unavailable here ({record.availability.reason})")
    reference = None
    for name, delegates in configs:
        start = time.perf_counter()
        interp = Interpreter(model_content=content, experimental_delegates=delegates)
        interp.allocate_tensors()
        init_ms = 1000 * (time.perf_counter() - start)
        probs, median = _time_runs(interp, image, runs)
        plan = interp.plan()
        taken = sum(len(p.nodes) for p in plan.partitions)
        line = (
            f"{name:>12}: init {init_ms:8.1f} ms, invoke median {1000 * median:7.3f} ms, "
            f"{taken}/{len(plan.subgraph.nodes)} nodes delegated in {len(plan.partitions)} "
            f"partition(s)"
        )
        if reference is None:
            reference = probs
            print(line)
            print(
                f"{'':>14}top class {int(np.argmax(probs))}, probabilities {np.round(probs[0], 4)}"
            )
        else:
            diff = float(np.max(np.abs(probs - reference)))
            print(f"{line}, max |diff| vs cpu {diff:.2e}")
    return 0
