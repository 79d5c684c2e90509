"""Work-group shapes of the kernels outside the GEMMs, per kernel family (_ir.LAUNCH_SHAPES).

The CPU family keeps PoCL's fixed shapes (one work-group function per kernel). The GPU family
launches depthwise, pooling, resize and elementwise kernels in groups of a multiple of 32
items whose neighbours take neighbouring channel blocks; rounding the NDRange up to those
groups leaves items past the tensor, which the kernels must skip. ``kernel_family="gpu"``
forces those shapes onto PoCL, where the results must still agree with LiteRT.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from opencl_support import random_inputs, relative_error, run_litert

import offload
from offload.model import ModelBuilder
from offload_gpu_opencl._ir import LAUNCH_SHAPES

RNG = np.random.default_rng(21)
F = np.float32
CPU_ROWS, CPU_LANES = (1, 16, 1), (16, 1)  # the CPU family's shapes before the GPU family's
ROW_KERNELS = ("dw3x3_s1", "dwconv", "pool", "resize_bilinear")


def uniform(*shape: int) -> np.ndarray:
    return RNG.uniform(-1, 1, shape).astype(F)


def depthwise_pool_add() -> bytes:
    """Two images of 44 channels (6 channel blocks, the last one partial) through a 3x3
    depthwise (dw3x3), a 5x5 stride-2 one (dwconv), an average pool, an ADD of a second input
    (binary8 over the whole tensor), an ADD of per-channel constants (binary8 over rows of
    44) and a bilinear resize: every row and lane kernel, none fused into another."""
    b = ModelBuilder()
    c = 44
    x = b.add_input("x", (2, 13, 11, c))
    dw = {"padding": "SAME", "stride_h": 1, "stride_w": 1, "depth_multiplier": 1}
    d1 = b.add_tensor("d1", (2, 13, 11, c))
    b.add_operator(
        "DEPTHWISE_CONV_2D",
        [x, b.add_constant("w1", uniform(1, 3, 3, c)), b.add_constant("b1", uniform(c))],
        [d1],
        {**dw, "fused_activation_function": "RELU6"},
    )
    d2 = b.add_tensor("d2", (2, 7, 6, c))
    b.add_operator(
        "DEPTHWISE_CONV_2D",
        [d1, b.add_constant("w2", uniform(1, 5, 5, c)), b.add_constant("b2", uniform(c))],
        [d2],
        {**dw, "stride_h": 2, "stride_w": 2},
    )
    p = b.add_tensor("p", (2, 7, 6, c))
    pool = {"padding": "SAME", "stride_h": 1, "stride_w": 1, "filter_height": 3, "filter_width": 3}
    b.add_operator("AVERAGE_POOL_2D", [d2], [p], pool)
    r = b.add_input("r", (2, 7, 6, c))
    s = b.add_tensor("s", (2, 7, 6, c))
    b.add_operator("ADD", [p, r], [s], {"fused_activation_function": "RELU"})
    t = b.add_tensor("t", (2, 7, 6, c))
    b.add_operator("ADD", [s, b.add_constant("bias", uniform(c))], [t])
    y = b.add_tensor("y", (2, 12, 9, c))
    size = b.add_constant("size", np.array([12, 9], np.int32))
    b.add_operator("RESIZE_BILINEAR", [t, size], [y], {"half_pixel_centers": True})
    b.add_output(y)
    return b.build()


def run(content: bytes, inputs: list[np.ndarray], family: str) -> tuple[list[np.ndarray], list]:
    """Outputs and the (kernel name, global size, local size) of every launch enqueued."""
    delegate = offload.load_delegate("gpu_opencl", options={"kernel_family": family})
    interp = offload.Interpreter(model_content=content, delegates=[delegate])
    interp.allocate_tensors()
    assert not interp.delegation_report()["restored_to_cpu"]
    for detail, value in zip(interp.get_input_details(), inputs):
        interp.set_tensor(detail["index"], value)
    interp.invoke()
    (kernel,) = interp.delegate_kernels().values()
    calls = [(k.function_name, tuple(g), tuple(loc)) for k, g, loc in kernel.calls]
    return [interp.get_tensor(d["index"]) for d in interp.get_output_details()], calls


def test_the_table_keeps_the_cpu_shapes_and_gives_gpu_groups_of_64() -> None:
    """The CPU family's shapes whatever the channel count; the GPU family's dimension 0 just
    covers the channel blocks (at most 32 of them), the group staying 64 items."""
    cpu, gpu = LAUNCH_SHAPES["cpu"], LAUNCH_SHAPES["gpu"]
    for blocks in (1, 3, 6, 40, 1000):
        assert cpu.rows_local(blocks) == CPU_ROWS and cpu.lanes_local(blocks) == CPU_LANES
    assert [gpu.rows_local(cb) for cb in (1, 3, 6, 40)] == [
        (1, 64, 1),
        (4, 16, 1),
        (8, 8, 1),
        (32, 2, 1),
    ]
    assert [gpu.lanes_local(n) for n in (1, 6, 64, 5000)] == [(1, 64), (8, 8), (64, 1), (64, 1)]


@pytest.mark.litert
@pytest.mark.parametrize("family", ["cpu", "gpu"])
def test_row_and_lane_kernels_launch_with_the_family_shapes(family: str) -> None:
    """CPU family: today's (1, 16, 1) and (16, 1). GPU family: groups of a multiple of 32
    items, dimension 0 (channel blocks) wide enough for all 6, rows exact; both agree with
    LiteRT, so the items past the tensor that the rounded-up NDRange adds write nothing."""
    content = depthwise_pool_add()
    details = offload.Interpreter(model_content=content, delegates=[]).get_input_details()
    inputs = random_inputs(details, seed=5)
    found, calls = run(content, inputs, family)
    names = [name for name, _, _ in calls]
    assert sorted(names) == sorted([*ROW_KERNELS, "binary8", "binary8"]), names
    for name, global_size, local in calls:
        assert all(g % size == 0 for g, size in zip(global_size, local)), (name, global_size)
        if family == "cpu":
            assert local == (CPU_LANES if name == "binary8" else CPU_ROWS), (name, local)
            continue
        assert math.prod(local) % 32 == 0 and 64 <= math.prod(local) <= 256, (name, local)
        if name in ROW_KERNELS:
            assert local[0] == 8 and local[2] == 1, (name, local)  # 6 channel blocks, rows exact
            assert global_size[2] == 2 * {"dw3x3_s1": 13, "resize_bilinear": 12}.get(name, 7)
    expected = run_litert(None, inputs, content)
    rel = relative_error(found[0], expected[0])
    assert rel <= 1e-5, f"max|a-b|/max|b| = {rel:.3e}"
