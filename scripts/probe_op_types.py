"""Record which tensor types LiteRT's kernels accept, op by op.

    .venv/bin/python scripts/probe_op_types.py    # rewrites tests/fixtures/litert_op_types.json

The cases are ``tests/_op_type_cases.py``'s one-op models, every op in every type. LiteRT,
as users run it (its default resolver, which applies XNNPACK: that is what takes FLOAT16
activations in several ops whose builtin kernels refuse them), allocates and invokes each; the
case is ``ok`` when both succeed, ``refused`` when either raises, and ``crash`` when LiteRT
kills the process (each batch runs in a child process, so a crash costs only its case). The
file is what ``tests/test_op_types.py`` holds offload's declarations to, so a LiteRT upgrade
that changes a kernel's types shows up as a test failure after this script is run again.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests._op_type_cases import build, case_key, cases, sample  # noqa: E402

OUT = ROOT / "tests" / "fixtures" / "litert_op_types.json"


def worker(first: int) -> None:
    """Run cases from ``first`` in order, printing CASE before and the verdict after each."""
    from ai_edge_litert.interpreter import Interpreter

    for number, case in enumerate(cases()[first:], first):
        print(f"CASE {number}", flush=True)
        try:
            interp = Interpreter(model_content=build(*case))
            interp.allocate_tensors()
            for seed, d in enumerate(interp.get_input_details()):
                interp.set_tensor(d["index"], sample(tuple(d["shape"]), d["dtype"], seed))
            interp.invoke()
            verdict = "ok"
        except Exception:  # LiteRT's refusals are RuntimeError and ValueError alike
            verdict = "refused"
        print(f"DONE {number} {verdict}", flush=True)


def main() -> int:
    if sys.argv[1:2] == ["--worker"]:
        worker(int(sys.argv[2]))
        return 0
    all_cases = cases()
    verdicts: dict[str, str] = {}
    first = 0
    while first < len(all_cases):
        done = subprocess.run(
            [sys.executable, __file__, "--worker", str(first)], capture_output=True, text=True
        )
        started = first
        for line in done.stdout.splitlines():
            word, number, *rest = line.split()
            if word == "CASE":
                started = int(number)
            else:
                verdicts[case_key(*all_cases[int(number)])] = rest[0]
                first = int(number) + 1
        if done.returncode != 0:  # the case it started and never finished killed it
            verdicts[case_key(*all_cases[started])] = "crash"
            first = started + 1
    import ai_edge_litert

    version = getattr(ai_edge_litert, "__version__", "unknown")
    OUT.write_text(json.dumps({"litert": version, "cases": verdicts}, indent=1) + "\n")
    counts = {v: list(verdicts.values()).count(v) for v in set(verdicts.values())}
    print(f"{len(verdicts)} cases: {counts}; written to {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
