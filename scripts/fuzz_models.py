"""Fuzz offload with mutated real models, each batch in a memory-limited process.

    .venv/bin/python scripts/fuzz_models.py --minutes 15            # CPU reference
    .venv/bin/python scripts/fuzz_models.py --minutes 15 --delegate gpu_opencl

The mutations are those of the test suite's short run (``tests/_mutate.py``): one to three
numbers of a real model rewritten where the schema keeps them (shapes, node indices, buffer
indices, types, quantization), or raw bytes flipped. A case passes when the model runs or
raises an ``offload.errors.OffloadError``. Anything else is a finding: an untyped exception,
a crash (the process killed by a signal), or a hang (no answer within ``--timeout`` seconds).
Each finding's mutated model is written to ``--out`` for reproduction, and the exit status is
1 if there was any. Workers run under an address-space limit (``--memory-gib``, 4 by default),
so a model that makes offload allocate without bound fails the case instead of the machine.
"""

from __future__ import annotations

import argparse
import random
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def worker(start: int, count: int, delegate: str | None) -> None:
    """Run cases start..start+count, printing CASE before and the outcome after each."""
    import numpy as np

    import offload
    from offload.errors import OffloadError
    from tests._mutate import mutate
    from tests.test_fuzz_models import SEEDS

    delegates = [delegate] if delegate else []  # none named: the CPU reference alone
    for case in range(start, start + count):
        rng = random.Random(case)
        content = mutate(rng.choice(SEEDS).read_bytes(), rng, rng.randint(1, 3))
        print(f"CASE {case}", flush=True)
        try:
            interp = offload.Interpreter(model_content=content, delegates=delegates)
            interp.allocate_tensors()
            for d in interp.get_input_details():
                interp.set_tensor(d["index"], np.zeros(tuple(d["shape"]), d["dtype"]))
            interp.invoke()
            outcome = "ok"
        except OffloadError as exc:
            outcome = f"typed {type(exc).__name__}"
        except Exception as exc:  # the finding this script exists for
            outcome = f"UNTYPED {type(exc).__name__}: {str(exc)[:200]!r}"
        print(f"DONE {case} {outcome}", flush=True)


def mutant(case: int) -> bytes:
    from tests._mutate import mutate
    from tests.test_fuzz_models import SEEDS

    rng = random.Random(case)
    return mutate(rng.choice(SEEDS).read_bytes(), rng, rng.randint(1, 3))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=1.0)
    parser.add_argument("--first-case", type=int, default=0)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per case")
    parser.add_argument("--memory-gib", type=float, default=4.0)
    parser.add_argument("--delegate", default=None, help="e.g. gpu_opencl (default: CPU only)")
    parser.add_argument("--out", type=Path, default=Path("fuzz-findings"))
    parser.add_argument("--worker", nargs=2, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker[0], args.worker[1], args.delegate)
        return 0

    limit = int(args.memory_gib * 2**30)

    def limit_memory() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    deadline = time.monotonic() + 60 * args.minutes
    case, findings, outcomes = args.first_case, 0, {}
    while time.monotonic() < deadline:
        command = [sys.executable, __file__, "--worker", str(case), str(args.batch)]
        if args.delegate:
            command += ["--delegate", args.delegate]
        try:
            done = subprocess.run(
                command,
                capture_output=True,
                text=True,
                timeout=args.timeout * args.batch,
                preexec_fn=limit_memory,
            )
            stdout, status = done.stdout, done.returncode
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout or b""
            stdout = out.decode() if isinstance(out, bytes) else out
            status = None
        finished: set[int] = set()
        started: list[int] = []
        for line in stdout.splitlines():
            word, _, rest = line.partition(" ")
            if word == "CASE":
                started.append(int(rest))
            elif word == "DONE":
                number, _, outcome = rest.partition(" ")
                finished.add(int(number))
                kind = outcome.split(":")[0]
                outcomes[kind] = outcomes.get(kind, 0) + 1
                if outcome.startswith("UNTYPED"):
                    findings += 1
                    _save(args.out, int(number), outcome)
        unfinished = [c for c in started if c not in finished]
        if unfinished:
            why = "hang" if status is None else f"crash (exit status {status})"
            findings += 1
            outcomes[why] = outcomes.get(why, 0) + 1
            _save(args.out, unfinished[0], why)
            case = unfinished[0] + 1
        else:
            case += args.batch
    print(
        f"cases {args.first_case}..{case - 1}: "
        + ", ".join(f"{n} {k}" for k, n in sorted(outcomes.items(), key=lambda kv: -kv[1]))
    )
    print(f"{findings} finding(s)" + (f", written to {args.out}/" if findings else ""))
    return 1 if findings else 0


def _save(out: Path, case: int, why: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / f"case-{case}.tflite").write_bytes(mutant(case))
    (out / f"case-{case}.txt").write_text(why + "\n")
    print(f"finding: case {case}: {why}", flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
