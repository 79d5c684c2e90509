"""openvino at the quantization scale edges (issue 37): OpenVINO requantizes through float32
real intervals, which lose the zero point under 1e-6 and leave float32 at the top, so the
delegate declines those nodes (``offload.check_engine_node(..., float_rescale=True)``) and
the model's answer is LiteRT's builtin kernels'."""

from __future__ import annotations

from random import Random

import numpy as np
import pytest

import offload
from offload.model import ModelBuilder
from tests._fuzz_round3 import _edge_model

from ._support import oracle, run, through_openvino


def _full_range(interp: offload.Interpreter, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    arrays = []
    for d in interp.get_input_details():
        info = np.iinfo(d["dtype"])
        a = rng.integers(info.min, info.max + 1, tuple(d["shape"])).astype(d["dtype"])
        a.flat[0], a.flat[-1] = info.min, info.max
        arrays.append(a)
    return arrays


# scale_edges fuzz cases where openvino answered up to 239 steps from LiteRT: HARD_SWISH onto
# an output scale of 1.6e37, MEAN onto 1.5e38, MUL onto 4.3e36, ADD with scales near 1e-30.
@pytest.mark.parametrize("case", [204, 208, 355, 2071])
def test_edge_scales_are_declined_and_the_answer_is_litert(case: int):
    """A node whose quantized intervals OpenVINO's float32 arithmetic cannot follow stays on
    the CPU reference, with the reason naming the interval, and the answer is LiteRT's."""
    content, what = _edge_model(Random(case))
    interp = through_openvino(content=content, strict=False)
    report = interp.delegation_report()
    assert report["cpu"]["nodes"], f"openvino took {what}"
    reasons = str(report["fallback"])
    assert "expected each end 0 or between 1e-06 and 1e+30" in reasons, reasons
    arrays = _full_range(interp, case)
    got = run(interp, arrays)[0]
    want = run(oracle(content=content), arrays)[0]
    diff = np.abs(got.astype(np.int64) - want.astype(np.int64)).max()
    assert diff <= 1, f"{what}: {diff} steps from LiteRT\n{got.ravel()}\n{want.ravel()}"


@pytest.mark.parametrize(
    ("scales", "zero_points", "taken"),
    [
        ((1e-3, 2e-3, 4e-3), (5, -9, -110), True),
        ((1e-6, 1e-6, 4e-6), (0, 40, 0), True),
        ((1e-9, 1e-9, 4e-9), (0, 20, 0), False),  # OpenVINO would drop x2's zero point: 6 steps
        ((1e-8, 1e-8, 4e-8), (0, -40, 0), False),  # x2 from -8.8e-7: 23 steps
    ],
)
def test_interval_rule_on_add(scales, zero_points, taken):
    """An int8 ADD goes to OpenVINO exactly where every runtime interval's ends are 0 or
    between 1e-6 and 1e30, and wherever it goes, it answers within one step of LiteRT."""
    b = ModelBuilder()
    x = b.add_input("x", (1, 2, 3, 4), np.int8, quantization=(scales[0], zero_points[0]))
    x2 = b.add_input("x2", (1, 2, 3, 4), np.int8, quantization=(scales[1], zero_points[1]))
    y = b.add_tensor("y", (1, 2, 3, 4), np.int8, quantization=(scales[2], zero_points[2]))
    b.add_operator("ADD", [x, x2], [y])
    b.add_output(y)
    content = b.build()
    interp = through_openvino(content=content, strict=False)
    assert (not interp.delegation_report()["cpu"]["nodes"]) == taken
    arrays = _full_range(interp, 0)
    got = run(interp, arrays)[0]
    want = run(oracle(content=content), arrays)[0]
    assert np.abs(got.astype(np.int64) - want.astype(np.int64)).max() <= 1
