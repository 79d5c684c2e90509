"""The openvino delegate at fewer threads than allowed, as one of auto's candidates."""

from __future__ import annotations

import offload

from .._models import FIXTURES


def test_fewer_threads_than_allowed_are_measured_and_as_exact():
    """With two threads allowed, auto also weighs OpenVINO at one, with every other option
    unchanged (f32, unpinned), so the numbers stay within the same accuracy policy."""
    auto = {"delegates": "auto", "auto_cache_dir": False, "auto_budget_s": 0.5}
    interp = offload.Interpreter(FIXTURES / "small_cnn_int8.tflite", num_threads=2, **auto)
    interp.allocate_tensors()
    rows = {row["label"]: row for row in interp.auto_selection["candidates"]}
    fewer, allowed = rows["openvino(num_threads=1)"], rows["openvino"]
    assert fewer["delegates"] == allowed["delegates"] == ["openvino"]
    assert fewer["status"] != "inaccurate", fewer
    if interp.auto_selection["chosen"] == ["openvino"]:
        assert interp.delegates[0].options.num_threads in (1, 2)
        assert interp.delegates[0].options.inference_precision is None
