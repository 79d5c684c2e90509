"""Scratch memory of the convolutions (issue 25, class 5): every array a CPU kernel makes
beyond its tensors, the weights it prepares in setup included, is declared from shapes
(``OpKernel.scratch_bytes``), held to ``max_tensor_bytes`` at ``allocate_tensors``, and not
exceeded at invoke; the work done in pieces to stay under it gives the same bits."""

from __future__ import annotations

import math
import threading
import tracemalloc
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

import offload
from offload.errors import MemoryBudgetError, TensorShapeError
from offload.geometry import window_geometry
from offload.model import ModelBuilder
from offload.ops import conv_2d, depthwise_conv_2d, transpose_conv

# The interpreter's own objects (plans, Python objects) beside the kernel's arrays.
_SLACK_BYTES = 256 << 10
_INPUT = {
    "float32": (np.float32, None),
    "hybrid": (np.float32, None),
    "int8": (np.int8, (0.05, 3)),
    "uint8": (np.uint8, (0.05, 120)),
    "int16": (np.int16, (0.002, 0)),
}


@dataclass(frozen=True)
class Conv:
    """A one-node convolution: op, arithmetic (float32, hybrid, int8, uint8, int16), NHWC
    input and filter shapes (OHWI, or [1, H, W, C*M] for DEPTHWISE_CONV_2D), window options."""

    op: str
    kind: str
    x: tuple[int, int, int, int]
    f: tuple[int, int, int, int]
    stride: int = 1
    padding: str = "SAME"
    dilation: int = 1
    activation: str = "NONE"
    runtime_filter: bool = False

    def model(self) -> tuple[bytes, list[np.ndarray]]:
        """The model and the values of its runtime inputs."""
        rng = np.random.default_rng(0)
        dtype, x_q = _INPUT[self.kind]
        depthwise = self.op == "DEPTHWISE_CONV_2D"
        channels = self.f[3] if depthwise else self.f[0]
        scales = rng.uniform(0.001, 0.02, channels).astype(np.float32)
        b = ModelBuilder()
        x = b.add_input("x", self.x, dtype, quantization=x_q)
        if self.kind == "float32":
            weights, w_q = rng.standard_normal(self.f).astype(np.float32), None
        elif self.kind == "uint8":
            weights, w_q = rng.integers(0, 256, self.f).astype(np.uint8), (float(scales[0]), 128)
            scales[:] = scales[0]
        else:
            weights = rng.integers(-127, 128, self.f).astype(np.int8)
            w_q = (scales, np.zeros(channels, np.int64))
        feeds = [_values(rng, self.x, dtype)]
        if self.runtime_filter:
            w = b.add_input(
                "w", self.f, weights.dtype, quantization=w_q, quantized_dimension=3 * depthwise
            )
            feeds.append(weights)
        else:
            w = b.add_constant("w", weights, quantization=w_q, quantized_dimension=3 * depthwise)
        if x_q is None:
            bias = b.add_constant("b", rng.standard_normal(channels).astype(np.float32))
        else:
            wide = np.int64 if self.kind == "int16" else np.int32
            bias_q = (scales * x_q[0], np.zeros(channels, np.int64))
            values = rng.integers(-2000, 2000, channels).astype(wide)
            bias = b.add_constant("b", values, quantization=bias_q)
        out_q = None if x_q is None else (0.1, 0 if dtype != np.uint8 else 128)
        options: dict[str, Any] = {
            "padding": self.padding,
            "stride_h": self.stride,
            "stride_w": self.stride,
            "fused_activation_function": self.activation,
        }
        n, h, width, _ = self.x
        if self.op == "TRANSPOSE_CONV":
            if self.padding == "SAME":
                out = (n, h * self.stride, width * self.stride, channels)
            else:
                size = (h - 1) * self.stride + self.f[1], (width - 1) * self.stride + self.f[2]
                out = (n, *size, channels)
            y = b.add_tensor("y", out, dtype, quantization=out_q)
            sizes = b.add_constant("output_shape", np.array(out, np.int32))
            b.add_operator(self.op, [sizes, w, x, bias], [y], options, version=3)
        else:
            options |= {"dilation_h_factor": self.dilation, "dilation_w_factor": self.dilation}
            g = window_geometry(
                self.padding,
                (h, width),
                self.f[1:3],
                (self.stride, self.stride),
                (self.dilation, self.dilation),
            )
            y = b.add_tensor("y", (n, g.out_h, g.out_w, channels), dtype, quantization=out_q)
            b.add_operator(self.op, [x, w, bias], [y], options)
        b.add_output(y)
        return b.build(), feeds


def _values(rng: np.random.Generator, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, int(info.max) + 1, shape).astype(dtype)


def _run(content: bytes, feeds: list[np.ndarray], **kwargs: Any) -> offload.Interpreter:
    interp = offload.Interpreter(model_content=content, delegates=[], **kwargs)
    interp.allocate_tensors()
    for detail, value in zip(interp.get_input_details(), feeds):
        interp.set_tensor(detail["index"], value)
    interp.invoke()
    return interp


def _output(content: bytes, feeds: list[np.ndarray]) -> np.ndarray:
    interp = _run(content, feeds)
    return interp.get_tensor(interp.get_output_details()[0]["index"])


def _measured(content: bytes, feeds: list[np.ndarray]) -> tuple[int, int, int]:
    """(traced peak growth over allocate_tensors and one invoke, the model's tensor bytes,
    the declared scratch), on a fresh thread: the kernels' per-thread work arrays start
    empty there, as on the first invoke."""
    result: dict[str, Any] = {}

    def measure() -> None:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        interp = _run(content, feeds)
        result["peak"] = tracemalloc.get_traced_memory()[1] - base
        result["interp"] = interp

    _run(content, feeds)  # imports and caches, once
    tracemalloc.start()
    try:
        thread = threading.Thread(target=measure)
        thread.start()
        thread.join()
    finally:
        tracemalloc.stop()
    interp = result["interp"]
    tensors = sum(
        math.prod(int(d) for d in detail["shape"]) * np.dtype(detail["dtype"]).itemsize
        for detail in interp.get_tensor_details()
    )
    return result["peak"], tensors, interp.memory_report()["cpu_kernel_scratch"]


# In brackets, what each made and declared before issue 25's fix (peak growth / scratch).
DECLARED_CASES = [
    # fuzz case 0: tap weights tiled over the output width, 9.9 MB [12.6 MB / 0.57 MB]
    Conv("DEPTHWISE_CONV_2D", "float32", (1, 6, 34, 32), (1, 52, 39, 64), stride=2),
    # a 1 KB view per tap, the group weights twice [4.8 MB / 0.19 MB]
    Conv("DEPTHWISE_CONV_2D", "int8", (1, 34, 5, 16), (1, 37, 34, 48), stride=3),
    # fuzz case 1092: the whole GEMM product [22.7 MB / 4.0 MB]
    Conv("TRANSPOSE_CONV", "float32", (1, 33, 29, 3), (16, 40, 9, 3), 2, "VALID"),
    # the exact path's float64 product, rounded and cast whole [3.3 MB / 0.09 MB]
    Conv("TRANSPOSE_CONV", "uint8", (1, 15, 15, 3), (24, 1, 3, 3), stride=3, activation="RELU"),
    # 16x8: float64 patches and int64 passes over the whole output [30.1 MB / 14.9 MB]
    Conv("CONV_2D", "int16", (1, 16, 32, 16), (4, 30, 15, 16), activation="RELU"),
    # float64 chunks of patches where float32 was counted [16.5 MB / 9.6 MB], [18.1 / 7.4]
    Conv("CONV_2D", "uint8", (1, 31, 39, 8), (16, 33, 28, 8), stride=2, dilation=2),
    Conv("CONV_2D", "hybrid", (1, 7, 15, 16), (24, 34, 32, 16), activation="TANH"),
    # within their declarations before too: the sub-pixel path, a grouped float product
    Conv("TRANSPOSE_CONV", "int8", (1, 12, 12, 16), (16, 3, 3, 16), stride=2),
    Conv("CONV_2D", "float32", (1, 20, 20, 16), (16, 3, 3, 4)),
]


@pytest.mark.parametrize("case", DECLARED_CASES, ids=lambda c: f"{c.op}-{c.kind}-{c.f}")
def test_a_convolution_makes_no_more_than_it_declares(case: Conv) -> None:
    """A convolution's kernel, set up and run once, grows the traced memory by no more than
    its tensors (twice: the caller's copies), its declared scratch and a small slack."""
    peak, tensors, declared = _measured(*case.model())
    assert peak <= 2 * tensors + declared + _SLACK_BYTES, (
        f"peak growth {peak:,} bytes, declared scratch {declared:,}, tensors {tensors:,}"
    )


def test_depthwise_prepared_weights_stay_within_the_budget() -> None:
    """Fuzz case 0: a 519 KB depthwise filter over 17 output columns under a 4 MiB budget
    runs with the kernel's own arrays within the budget (tiled tap weights took 9.9 MB), and
    memory_report()'s scratch counts them."""
    case = Conv("DEPTHWISE_CONV_2D", "float32", (1, 6, 34, 32), (1, 52, 39, 64), stride=2)
    interp = _run(*case.model(), max_tensor_bytes=4 << 20)
    report = interp.memory_report()
    assert report["cpu_kernel_buffers"] <= report["cpu_kernel_scratch"] <= 4 << 20, report
    assert report["cpu_kernel_scratch_node"] == 0


def test_transpose_conv_product_is_refused_by_the_budget() -> None:
    """Fuzz case 1092: a float TRANSPOSE_CONV whose GEMM product takes 21 MB is refused under
    an 8 MiB budget at allocate_tensors, naming the node and the bytes (it ran with 4.0 MB
    declared)."""
    content, _ = Conv(
        "TRANSPOSE_CONV", "float32", (1, 33, 29, 3), (16, 40, 9, 3), 2, "VALID"
    ).model()
    interp = offload.Interpreter(model_content=content, delegates=[], max_tensor_bytes=8 << 20)
    with pytest.raises(MemoryBudgetError, match=r"TRANSPOSE_CONV v3 \(node 0\) would need [\d,]+"):
        interp.allocate_tensors()


@pytest.mark.parametrize(
    "case",
    [
        Conv("DEPTHWISE_CONV_2D", "float32", (1, 9, 11, 3), (1, 3, 4, 6), activation="RELU6"),
        Conv("DEPTHWISE_CONV_2D", "float32", (2, 7, 8, 4), (1, 3, 3, 8), runtime_filter=True),
        Conv("DEPTHWISE_CONV_2D", "int8", (1, 10, 9, 8), (1, 5, 3, 16), stride=2, dilation=2),
        Conv("DEPTHWISE_CONV_2D", "uint8", (1, 8, 8, 3), (1, 3, 3, 3)),
        Conv("DEPTHWISE_CONV_2D", "int16", (1, 8, 7, 4), (1, 4, 3, 8), padding="VALID"),
        Conv("DEPTHWISE_CONV_2D", "hybrid", (2, 9, 6, 5), (1, 3, 3, 5), stride=2),
    ],
    ids=lambda c: f"{c.kind}{'-runtime' if c.runtime_filter else ''}",
)
def test_depthwise_weights_a_tap_at_a_time_give_the_same_bits(
    case: Conv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the limit on tiled tap weights, one row refilled per tap gives the same bits."""
    content, feeds = case.model()
    tiled = _output(content, feeds)
    monkeypatch.setattr(depthwise_conv_2d, "_TILED_WEIGHTS_MAX_BYTES", 0)
    assert _output(content, feeds).tobytes() == tiled.tobytes()


@pytest.mark.parametrize(
    "case",
    [
        Conv("TRANSPOSE_CONV", "uint8", (2, 7, 6, 3), (8, 3, 4, 3), stride=2),
        Conv("TRANSPOSE_CONV", "int16", (1, 9, 5, 4), (12, 3, 3, 4), 2, "VALID"),
        Conv("TRANSPOSE_CONV", "int8", (1, 6, 6, 2), (4, 5, 5, 2), stride=3),
        Conv("TRANSPOSE_CONV", "hybrid", (2, 5, 7, 3), (8, 3, 3, 3), runtime_filter=True),
    ],
    ids=lambda c: c.kind,
)
def test_transpose_conv_exact_sums_in_pieces_give_the_same_bits(
    case: Conv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The exact integer path, one input row at a time and a few output values requantized
    at a time, gives the bits of one piece."""
    content, feeds = case.model()
    whole = _output(content, feeds)
    monkeypatch.setattr(transpose_conv, "_CHUNK_BYTES", 1)
    monkeypatch.setattr(transpose_conv, "_REQUANTIZE_BLOCK", 1)
    assert _output(content, feeds).tobytes() == whole.tobytes()


@pytest.mark.parametrize(
    "case",
    [
        Conv("CONV_2D", "int16", (1, 30, 31, 8), (6, 3, 3, 8), activation="RELU"),
        Conv("CONV_2D", "int8", (1, 48, 48, 8), (8, 3, 3, 4), stride=2),  # two groups
        Conv("CONV_2D", "int16", (1, 40, 20, 16), (4, 1, 1, 16)),  # pointwise
    ],
    ids=lambda c: f"{c.kind}-{c.f}",
)
def test_conv_exact_path_in_chunks_gives_the_same_bits(
    case: Conv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CONV_2D's exact integer path (16x8, grouped int8), chunk by chunk of output rows,
    gives the bits of one chunk."""
    content, feeds = case.model()
    monkeypatch.setattr(conv_2d, "ROWS_PER_CHUNK_ELEMENTS", 1 << 40)
    whole = _output(content, feeds)
    monkeypatch.setattr(conv_2d, "ROWS_PER_CHUNK_ELEMENTS", 1)
    assert _output(content, feeds).tobytes() == whole.tobytes()


@pytest.mark.parametrize("kind", ["float32", "int8", "int16", "hybrid"])
def test_conv_with_an_empty_output_returns_it(kind: str) -> None:
    """A CONV_2D window wider than its VALID input gives an empty output, as in LiteRT (fuzz
    case 2960 of the scratch target: a ZeroDivisionError sizing the chunks of output rows)."""
    case = Conv("CONV_2D", kind, (1, 55, 12, 16), (4, 55, 14, 16), 2, "VALID")
    assert _output(*case.model()).shape == (1, 1, 0, 4)


def test_transpose_conv_with_an_empty_output_is_refused() -> None:
    """A TRANSPOSE_CONV output_shape of height or width 0 is refused at allocate_tensors, as
    LiteRT's Prepare refuses it (the int8 kernel failed on it at invoke)."""
    b = ModelBuilder()
    x = b.add_input("x", (1, 2, 3, 4), np.int8, quantization=(0.05, 0))
    scales = np.full(8, 0.01, np.float32)
    w = b.add_constant(
        "w", np.ones((8, 3, 3, 4), np.int8), quantization=(scales, np.zeros(8, np.int64))
    )
    y = b.add_tensor("y", (1, 0, 6, 8), np.int8, quantization=(0.1, 0))
    sizes = b.add_constant("output_shape", np.array([1, 0, 6, 8], np.int32))
    b.add_operator("TRANSPOSE_CONV", [sizes, w, x], [y], {"stride_h": 2, "stride_w": 2}, version=3)
    b.add_output(y)
    interp = offload.Interpreter(model_content=b.build(), delegates=[])
    with pytest.raises(TensorShapeError, match="positive height and width, found \\[1, 0, 6, 8\\]"):
        interp.allocate_tensors()
