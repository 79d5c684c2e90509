"""Whole models through offload and the openvino delegate: float outputs within 1e-4 relative
of LiteRT's builtin kernels, quantized outputs no further from them than LiteRT's own XNNPACK
path, the same top-1; what OpenVINO cannot run stays on the CPU with the reason."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
from ai_edge_litert import interpreter as litert

import offload

from .._models import fixture_models, public_models, random_inputs, relative_error
from ._support import inputs, oracle, run, through_openvino

FLOAT = [p for p in public_models() if not p.name.startswith("star_trek")]
FLOAT += [p for p, t in fixture_models() if t in ("float32", "float16")]
QUANTIZED = [p for p, t in fixture_models() if t in ("int8", "qat")]


@pytest.mark.parametrize("path", FLOAT, ids=lambda p: p.stem)
def test_float_models_agree_with_litert(path: Path) -> None:
    """Two inputs; every output within 1e-4 of LiteRT's (max |a-b| / max |b|). Models without
    an LSTM run as one OpenVINO partition (strict: nothing left on the CPU)."""
    lstm = "lstm" in path.name
    ours = through_openvino(path, strict=not lstm)
    if not lstm:
        assert [p.delegate for p in ours.plan().partitions] == ["openvino"]
    ref = oracle(path)
    for seed in (0, 1):
        arrays = inputs(ref, seed)
        for k, (got, want) in enumerate(zip(run(ours, arrays), run(ref, arrays))):
            assert got.dtype == want.dtype and got.shape == want.shape
            assert relative_error(got, want) <= 1e-4, f"{path.name} output {k} seed {seed}"
    assert not ours.delegation_report()["restored_to_cpu"]  # none given back at invoke


def _worst(got: list[np.ndarray], want: list[np.ndarray]) -> float:
    return max(
        float(np.abs(g.astype(np.float64) - w.astype(np.float64)).max()) for g, w in zip(got, want)
    )


@pytest.mark.parametrize("path", QUANTIZED, ids=lambda p: p.stem)
def test_quantized_models_are_no_further_from_litert_than_xnnpack(path: Path) -> None:
    """int8 and QAT fixtures on four image-like inputs: the largest difference from LiteRT's
    builtin kernels over them is at most what LiteRT's XNNPACK path shows over the same inputs
    (or one output step, or 1e-6, where XNNPACK happens to agree exactly), and the top-1 class
    is the same on each. (On a single input OpenVINO can be a step further where XNNPACK is
    exact: measured on mobilenet_v2_qat and small_cnn_qat.)"""
    ours = through_openvino(path, strict="lstm" not in path.name)
    ref = oracle(path)
    xnnpack = litert.Interpreter(model_path=str(path))
    xnnpack.allocate_tensors()
    details = ref.get_output_details()
    step = max((d["quantization"][0] for d in details), default=0.0)
    slack = 1.0 if details[0]["dtype"] in (np.int8, np.uint8) else max(step, 1e-6)
    mine = theirs = 0.0
    for seed in range(4):
        arrays = random_inputs(ref.get_input_details(), seed, "image")
        want = run(ref, arrays)
        got = run(ours, arrays)
        mine = max(mine, _worst(got, want))
        theirs = max(theirs, _worst(run(xnnpack, arrays), want))
        for g, w in zip(got, want):
            if g.ndim == 2 and g.shape[-1] > 1:
                np.testing.assert_array_equal(g.argmax(-1), w.argmax(-1))
    assert mine <= max(theirs, slack), f"{path.name}: {mine} vs XNNPACK's {theirs}"
    assert not ours.delegation_report()["restored_to_cpu"]  # none given back at invoke


def test_lstm_stays_on_the_cpu_with_the_reason() -> None:
    """The TensorFlow Lite frontend has no translator for the LSTM: the planner says so for
    that node, and the rest of the model runs in OpenVINO."""
    path = next(p for p, _ in fixture_models() if p.name == "lstm_float32.tflite")
    interp = through_openvino(path, strict=False)
    reasons = interp.plan().node_reasons["openvino"]
    assert any("no translator for UNIDIRECTIONAL_SEQUENCE_LSTM" in r for r in reasons.values())


def test_dynamic_range_models_are_refused_unless_asked_for() -> None:
    """dynamic_range='refuse' (default): every node stays on the CPU with the reason; 'float'
    runs the model in OpenVINO, its numbers near LiteRT's but not equal (hybrid kernels
    quantize activations on the fly)."""
    path = next(p for p, _ in fixture_models() if p.name == "mobilenet_v2_dynamic_range.tflite")
    refused = through_openvino(path, strict=False)
    assert not refused.plan().partitions
    reason = offload.load_delegate("openvino").model_type_reason(offload.load_model(path))
    assert reason is not None and "dequantized weights" in reason
    floated = through_openvino(path, dynamic_range="float")
    assert [p.delegate for p in floated.plan().partitions] == ["openvino"]
    ref = oracle(path)
    arrays = inputs(ref, 0)
    got, want = run(floated, arrays), run(ref, arrays)
    assert relative_error(got[0], want[0]) < 0.3


def test_word_model_runs_with_the_shapes_only_a_run_settles() -> None:
    """The word-activation model frames its signal with sizes computed from values (SHAPE,
    then SLICE and RESHAPE to them) and takes its spectrogram in complex numbers: the complex
    ops stay on the CPU by plan, and OpenVINO's partitions give the framing's [1, 43, 1, 2048]
    where [1, 1, 1, 2048] is declared. None goes back to the CPU at invoke (no warning), and
    the outputs are LiteRT's, on two inputs."""
    path = next((p for p in public_models() if p.name.startswith("star_trek")), None)
    if path is None:
        pytest.skip("word-activation-recognition is not installed")
    ref = oracle(path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ours = through_openvino(path, strict=False)
        assert ours.plan().nodes_of("openvino")
        for seed in (0, 1):
            arrays = inputs(ref, seed)
            for g, w in zip(run(ours, arrays), run(ref, arrays)):
                assert relative_error(g, w) <= 1e-4
    assert not ours.delegation_report()["restored_to_cpu"]
