"""State and shapes through the litert delegate: an LSTM's variables live in LiteRT across
invokes and start over with reset_all_variables, as in LiteRT; resized inputs reach LiteRT."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import offload

from .._models import fixture_models
from ._support import assert_identical, direct, dynamic_batch_model, inputs, run, through_offload

LSTMS = [path for path, _ in fixture_models() if path.name.startswith("lstm_")]


@pytest.mark.parametrize("kernels", ["builtin", "xnnpack"])
@pytest.mark.parametrize("path", LSTMS, ids=lambda p: p.stem)
def test_lstm_state_persists_and_resets_like_litert(path: Path, kernels: str) -> None:
    """Three invokes, a reset, two more: every output equals LiteRT's in the same sequence,
    and the same input gives a different output the second time (state was carried)."""
    ours = through_offload(kernels, path)
    (partition,) = ours.plan().partitions
    exported = ours.delegate_kernels()[partition.index].exported
    assert exported.state, "the LSTM's state should live in LiteRT, not cross the boundary"
    ref = direct(kernels, path)
    feeds = [inputs(ref, seed) for seed in (0, 0, 1)]
    for step, arrays in enumerate(feeds):
        assert_identical(run(ours, arrays), run(ref, arrays), f"{path.name} invoke {step}")
    first, again = run(ours, feeds[0]), run(ours, feeds[0])
    run(ref, feeds[0]), run(ref, feeds[0])
    assert any(not np.array_equal(a, b) for a, b in zip(first, again)), "no state carried"
    ours.reset_all_variables()
    ref.reset_all_variables()
    for step, arrays in enumerate(feeds[:2]):
        assert_identical(run(ours, arrays), run(ref, arrays), f"{path.name} after reset {step}")


@pytest.mark.parametrize("kernels", ["builtin", "xnnpack"])
def test_resized_inputs_reach_litert(kernels: str) -> None:
    """resize_tensor_input to batch 5, then 2, then 5 again: LiteRT's inputs follow, and the
    outputs equal LiteRT's resized the same way."""
    content = dynamic_batch_model()
    ours = through_offload(kernels, content=content)
    ref = direct(kernels, content=content)
    rng = np.random.default_rng(0)
    for batch in (5, 2, 5):
        for interp in (ours, ref):
            interp.resize_tensor_input(interp.get_input_details()[0]["index"], (batch, 4))
            interp.allocate_tensors()
        x = rng.standard_normal((batch, 4)).astype(np.float32)
        got, want = run(ours, [x]), run(ref, [x])
        assert got[0].shape == (batch, 3)
        assert_identical(got, want, f"batch {batch}")
    assert [p.delegate for p in ours.plan().partitions] == ["litert"]


def test_outputs_are_new_arrays_the_interpreter_keeps() -> None:
    """The kernel copies LiteRT's outputs into new arrays each invoke and declares
    fresh_outputs, so the interpreter takes them without copying them again; what get_tensor
    returned stays the caller's."""
    content = dynamic_batch_model()
    ours = through_offload("builtin", content=content)
    kernel = next(iter(ours.delegate_kernels().values()))
    assert kernel.fresh_outputs
    x = np.ones((1, 4), np.float32)
    first = kernel.invoke([x])
    kept = run(ours, [x])[0]
    second = kernel.invoke([2 * x])
    assert all(a is not b for a, b in zip(first, second))
    assert not np.array_equal(kept, second[0])
    assert isinstance(ours.delegate_kernels()[0], offload.DelegateKernel)
