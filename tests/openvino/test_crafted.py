"""Crafted models through the openvino delegate: a result or a typed offload error, never a
crashed process. OpenVINO's TensorFlow Lite frontend parses what it is handed natively (an
options table without the vector it reads ends the process), so the models go through it in a
child process, where a crash fails this test instead of ending the session."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# A spread of the search tests/litert/test_crafted.py runs, on the same mutations.
SEEDS = [192, 3293, 3554, 4118, *range(0, 1200, 25)]

CHILD = textwrap.dedent(
    """
    import json, random, sys, warnings
    import numpy as np
    import offload
    from offload.errors import OffloadError
    from tests._models import fixture_models, public_models
    from tests._mutate import mutate

    warnings.simplefilter("ignore")
    seeds = [p for p in public_models() if p.stat().st_size < 400_000]
    seeds += [p for p, _ in fixture_models() if p.stat().st_size < 400_000]
    for s in json.loads(sys.argv[1]):
        rnd = random.Random(s)
        seed_model = rnd.choice(seeds)
        content = mutate(seed_model.read_bytes(), random.Random(s), rnd.randint(1, 3))
        print(json.dumps({"seed": s, "model": seed_model.name}), flush=True)
        try:
            delegate = offload.load_delegate("openvino", {"cache_dir": ""})
            interp = offload.Interpreter(model_content=content, experimental_delegates=[delegate])
            interp.allocate_tensors()
            rng = np.random.default_rng(0)
            for d in interp.get_input_details():
                shape, dtype = tuple(d["shape"]), np.dtype(d["dtype"])
                value = rng.standard_normal(shape) if dtype.kind == "f" else np.zeros(shape)
                interp.set_tensor(d["index"], value.astype(dtype))
            interp.invoke()
            outcome = "ran"
        except OffloadError:
            outcome = "typed"
        except Exception as exc:
            outcome = f"untyped {type(exc).__name__}: {exc}"
        print(json.dumps({"seed": s, "outcome": outcome}), flush=True)
    """
)


def test_mutated_models_never_crash_the_process() -> None:
    """Real models with 1-3 numbers rewritten (shapes, indices, buffers, types,
    quantization), run with the openvino delegate: the process survives every one, and each
    ends in a result or an OffloadError."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(SEEDS)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    started = [line for line in lines if "model" in line]
    assert done.returncode == 0, (
        f"the process died (exit {done.returncode}) on seed {started[-1] if started else '?'}:"
        f"\n{done.stderr[-2000:]}"
    )
    outcomes = {line["seed"]: line["outcome"] for line in lines if "outcome" in line}
    assert sorted(outcomes) == sorted(set(SEEDS))
    untyped = {s: o for s, o in outcomes.items() if o not in ("ran", "typed")}
    assert not untyped
    assert list(outcomes.values()).count("ran") >= 5
