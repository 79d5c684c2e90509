"""Models that crashed LiteRT through the litert delegate in a 15-minute fuzz run
(scripts/fuzz_models.py --delegate litert), replayed from their case numbers: each now gives
a result or a typed offload error. Run in a child process, so a crash fails the test instead of
ending the session."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CHILD = textwrap.dedent(
    """
    import json, random, sys, warnings
    import numpy as np
    import offload
    from offload.errors import OffloadError
    from tests._mutate import mutate
    from tests.test_fuzz_models import SEEDS

    warnings.simplefilter("ignore")
    case = int(sys.argv[1])
    rng = random.Random(case)
    content = mutate(rng.choice(SEEDS).read_bytes(), rng, rng.randint(1, 3))
    try:
        interp = offload.Interpreter(model_content=content, delegates=["litert"])
        interp.allocate_tensors()
        for d in interp.get_input_details():
            interp.set_tensor(d["index"], np.zeros(tuple(d["shape"]), d["dtype"]))
        interp.invoke()
        report = interp.delegation_report()
        print(json.dumps({"outcome": "ok", "cpu": report["cpu"]["nodes"],
                          "fallback": report["fallback"]}))
    except OffloadError as exc:
        print(json.dumps({"outcome": type(exc).__name__, "message": str(exc)}))
    """
)


def _replay(case: int) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(case)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"case {case}: exit {done.returncode}\n{done.stderr[-2000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_strided_slice_without_strides_is_a_typed_error() -> None:
    """Case 304587: an int8 LSTM model whose STRIDED_SLICE lost its strides input (index 3
    rewritten to -1). LiteRT segfaulted in AllocateTensors; the shape pass now refuses the node
    first, as LiteRT's Prepare needs all four inputs."""
    result = _replay(304587)
    assert result["outcome"] == "TensorShapeError"
    assert "STRIDED_SLICE" in result["message"] and "input 3" in result["message"]


def test_add_whose_rescale_reaches_one_is_a_typed_error() -> None:
    """Case 306988: an int8 ADD whose input scale was rewritten to 1e30, so LiteRT's output
    multiplier passes 1 and its QuantizeMultiplierSmallerThanOneExp aborted the process. The
    litert delegate declines that ADD, and the model, which LiteRT does not run, is an
    UnsupportedOpError at allocate_tensors naming the multiplier and the scales (issue 37)."""
    result = _replay(306988)
    assert result["outcome"] == "UnsupportedOpError", result
    message = result["message"]
    assert "output multiplier, 2 * max(input scales) / (2**20 * output scale)" in message
    assert "1.0000000150474662e+30" in message


def test_lstm_without_a_gate_bias_stays_on_the_cpu() -> None:
    """Case 308619: a float LSTM whose input gate bias (input 12) was omitted. LiteRT read it
    unchecked and segfaulted; the litert delegate declines the LSTM, with the reason, and the
    CPU reference runs it with a zero bias."""
    result = _replay(308619)
    assert result["outcome"] == "ok", result
    reasons = result["fallback"]["UNIDIRECTIONAL_SEQUENCE_LSTM"]["reasons"]["litert"]
    assert any("gate bias input(s) [12] omitted" in r for r in reasons)
