"""The litert kernel takes model inputs straight from set_tensor into LiteRT's buffers
(DelegateKernel.take_input): LiteRT's numbers, and every read of an input its value."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from .._models import fixture_models
from ._support import assert_identical, direct, inputs, run, through_offload

MODELS = [p for p, t in fixture_models() if p.stem in ("mobilenet_v2_float32", "lstm_float32")]


@pytest.mark.parametrize("path", MODELS, ids=lambda p: p.stem)
def test_taken_inputs_give_litert_numbers_and_read_back(path: Path) -> None:
    ours = through_offload("xnnpack", path)
    ref = direct("xnnpack", path)
    for seed in (0, 1, 1):
        arrays = inputs(ref, seed)
        assert_identical(run(ours, arrays), run(ref, arrays), f"{path.name} seed {seed}")
        for d, a in zip(ours.get_input_details(), arrays):
            np.testing.assert_array_equal(ours.get_tensor(d["index"]), a)
    # Invoked again without setting: LiteRT still holds the inputs.
    ours.invoke()
    ref.invoke()
    want = [ref.get_tensor(d["index"]) for d in ref.get_output_details()]
    got = [ours.get_tensor(d["index"]) for d in ours.get_output_details()]
    assert_identical(got, want, f"{path.name} invoked again")


def test_a_view_of_an_input_is_what_the_run_reads() -> None:
    path = MODELS[0]
    ours = through_offload("xnnpack", path)
    ref = direct("xnnpack", path)
    arrays = inputs(ref, 3)
    index = ours.get_input_details()[0]["index"]
    ours.set_tensor(index, inputs(ref, 4)[0])
    ours.tensor(index)()[...] = arrays[0]  # LiteRT users write inputs this way too
    assert_identical(run(ours, []), run(ref, arrays), "written through a view")
