"""Fuzz offload with mutated real models and crafted cases, each batch in a memory-limited process.

    .venv/bin/python scripts/fuzz_models.py --minutes 15                       # mutated models
    .venv/bin/python scripts/fuzz_models.py --minutes 15 --delegate gpu_opencl
    .venv/bin/python scripts/fuzz_models.py --minutes 30 --target all          # every target
    .venv/bin/python scripts/fuzz_models.py --target division --replay 1234    # one case, here

A target makes case N from N alone (``tests/_fuzz_targets.py``). ``models``, the default, runs
the mutations of the test suite's short run (``tests/_mutate.py``): one to three numbers of a
real model rewritten where the schema keeps them, or raw bytes flipped. The other targets are
the reliability classes of issue 25: op_types, division, foreign_options, cast, scratch, api,
scribble, external_delegate, terminal and quant_refusal; then those of issue 37
(``tests/_fuzz_round3.py``): scale_edges, readonly_buffer, cache_damage and cli_files. Each
has its own pass rule (see its docstring). ``--target`` is repeatable; several targets (or
``all``) share the case numbers round-robin, case N going to target N mod their count.

A case passes when it runs (and agrees with its oracle, where the target has one) or raises an
``offload.errors.OffloadError``. Anything else is a finding: a target's own verdict (a wrong
answer, a case run that must be refused, memory over the budget...), an untyped exception, a
crash (the process killed by a signal), or a hang (no answer within ``--timeout`` seconds). A
crash while LiteRT, the oracle, runs a case is LiteRT's: it is saved and counted apart, not as
a finding. Each finding is written to ``--out`` as case-N.txt (target, verdict, how to replay)
with the file the case ran beside it (case-N.tflite, or the would-be delegate library), and
the exit status is 1 if there was any. Workers run under an address-space limit
(``--memory-gib``, 4 by default), so a case that makes offload allocate without bound fails
the case instead of the machine.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time
import traceback
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def worker(start: int, count: int, targets: list[str], delegate: str | None, out: Path) -> None:
    """Run cases start..start+count, printing CASE before each, ORACLE when LiteRT takes
    over, and DONE with the outcome after; a finding's file goes to ``out``."""
    from offload.errors import OffloadError
    from tests import _fuzz_targets as fuzz

    warnings.simplefilter("ignore")  # fallback warnings and the like are not outcomes
    for case in range(start, start + count):
        print(f"CASE {case}", flush=True)
        fuzz.LOG.artifact = None
        fuzz.LOG.before_oracle = lambda case=case: print(f"ORACLE {case}", flush=True)
        try:
            outcome = fuzz.TARGETS[target_of(case, targets)](case, delegate)
        except OffloadError as exc:
            outcome = f"typed {type(exc).__name__}"
        except Exception as exc:  # the finding this script exists for
            outcome = f"UNTYPED {type(exc).__name__}: {str(exc)[:200]!r}"
        if outcome.startswith(("FINDING", "UNTYPED")) and fuzz.LOG.artifact is not None:
            data, suffix = fuzz.LOG.artifact
            out.mkdir(parents=True, exist_ok=True)
            (out / f"case-{case}{suffix}").write_bytes(data)
        outcome = " ".join(outcome.splitlines())  # one line, whatever a message holds
        print(f"DONE {case} {outcome}", flush=True)


def target_of(case: int, targets: list[str]) -> str:
    return targets[case % len(targets)]


def save_artifact(case: int, target: str, delegate: str | None, out: Path) -> None:
    """Write the file case ``case`` of ``target`` runs (if it runs one) to ``out``, stopping
    the case right there."""
    from tests import _fuzz_targets as fuzz

    fuzz.LOG.stop_at_artifact = True
    warnings.simplefilter("ignore")
    try:
        fuzz.TARGETS[target](case, delegate)
    except fuzz.ArtifactRecorded:
        pass
    except Exception:  # a case that fails before its file exists has nothing to save
        return
    if fuzz.LOG.artifact is not None:
        data, suffix = fuzz.LOG.artifact
        out.mkdir(parents=True, exist_ok=True)
        (out / f"case-{case}{suffix}").write_bytes(data)


def replay(case: int, target: str, delegate: str | None) -> int:
    """Run one case in this process and print its outcome, with the traceback of an untyped
    error; 1 if it is a finding."""
    from offload.errors import OffloadError
    from tests._fuzz_targets import TARGETS

    print(f"case {case} of target {target}" + (f" on {delegate}" if delegate else ""))
    try:
        outcome = TARGETS[target](case, delegate)
    except OffloadError as exc:
        outcome = f"typed {type(exc).__name__}: {exc}"
    except Exception:
        traceback.print_exc()
        return 1
    print(outcome)
    return 1 if outcome.startswith("FINDING") else 0


def main() -> int:
    from tests._fuzz_targets import TARGETS

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=1.0)
    parser.add_argument("--first-case", type=int, default=0)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per case")
    parser.add_argument("--memory-gib", type=float, default=4.0)
    parser.add_argument("--delegate", default=None, help="e.g. gpu_opencl (default: CPU only)")
    parser.add_argument(
        "--target",
        action="append",
        choices=[*TARGETS, "all"],
        help="what to fuzz (repeatable; 'all': every target, round-robin); default: models",
    )
    parser.add_argument(
        "--replay", type=int, metavar="N", help="run case N of one target here and show it"
    )
    parser.add_argument("--out", type=Path, default=Path("fuzz-findings"))
    parser.add_argument("--worker", nargs=2, type=int, help=argparse.SUPPRESS)
    parser.add_argument("--save-artifact", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    targets = list(TARGETS) if "all" in (args.target or []) else args.target or ["models"]
    if args.worker:
        worker(args.worker[0], args.worker[1], targets, args.delegate, args.out)
        return 0
    if args.save_artifact is not None:
        save_artifact(args.save_artifact, targets[0], args.delegate, args.out)
        return 0
    if args.replay is not None:
        if len(targets) != 1:
            parser.error("--replay takes one --target (the one the case was found with)")
        return replay(args.replay, targets[0], args.delegate)

    limit = int(args.memory_gib * 2**30)

    def limit_memory() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    def child(arguments: list[str], timeout: float) -> tuple[str, int | None]:
        command = [sys.executable, __file__, *arguments]
        for target in targets:
            command += ["--target", target]
        if args.delegate:
            command += ["--delegate", args.delegate]
        try:
            done = subprocess.run(
                command,
                capture_output=True,
                text=True,
                timeout=timeout,
                preexec_fn=limit_memory,
            )
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout or b""
            return (out.decode() if isinstance(out, bytes) else out), None
        return done.stdout, done.returncode

    def save(case: int, why: str, crashed: bool = False) -> None:
        target = target_of(case, targets)
        args.out.mkdir(parents=True, exist_ok=True)
        again = f"{Path(__file__).relative_to(ROOT)} --target {target} --replay {case}"
        if args.delegate:
            again += f" --delegate {args.delegate}"
        (args.out / f"case-{case}.txt").write_text(
            f"target {target}, case {case}\n{why}\nreplay: {again}\n"
        )
        if crashed:  # the worker died before it could write the case's file: make it again
            delegate = ["--delegate", args.delegate] if args.delegate else []
            subprocess.run(
                [sys.executable, __file__, "--save-artifact", str(case), "--target", target]
                + ["--out", str(args.out), *delegate],
                capture_output=True,
                timeout=args.timeout,
                preexec_fn=limit_memory,
            )
        print(f"finding: case {case} ({target}): {why}", flush=True)

    deadline = time.monotonic() + 60 * args.minutes
    case, findings = args.first_case, 0
    outcomes: dict[tuple[str, str], int] = {}

    def count(target: str, kind: str) -> None:
        outcomes[target, kind] = outcomes.get((target, kind), 0) + 1

    while True:  # at least one batch, so that --minutes 0 runs --batch cases
        stdout, status = child(
            ["--worker", str(case), str(args.batch), "--out", str(args.out)],
            args.timeout * args.batch,
        )
        finished: set[int] = set()
        started: list[int] = []
        last = ""
        for line in stdout.splitlines():
            word, _, rest = line.partition(" ")
            if word in ("CASE", "ORACLE", "DONE"):  # LiteRT may print lines of its own
                last = word
            if word == "CASE":
                started.append(int(rest))
            elif word == "DONE":
                number, _, outcome = rest.partition(" ")
                finished.add(int(number))
                target = target_of(int(number), targets)
                finding = outcome.startswith(("FINDING", "UNTYPED"))
                count(target, "FINDING" if outcome.startswith("FINDING") else _kind(outcome))
                if finding:
                    findings += 1
                    save(int(number), outcome)
        unfinished = [c for c in started if c not in finished]
        if unfinished:
            crashed = unfinished[0]
            kind = "hang" if status is None else "crash"
            why = kind if status is None else f"crash (exit status {status})"
            if last == "ORACLE":  # LiteRT died on a case offload had run: not offload's
                count(target_of(crashed, targets), f"oracle {kind}")
                _save_oracle(args.out, crashed, target_of(crashed, targets), f"LiteRT: {why}")
            else:
                findings += 1
                count(target_of(crashed, targets), kind)
                save(crashed, why, crashed=True)
            case = crashed + 1
        else:
            case += args.batch
        if time.monotonic() >= deadline:
            break
    print(
        f"cases {args.first_case}..{case - 1}" + (f" on {args.delegate}" if args.delegate else "")
    )
    for target in dict.fromkeys(t for t, _ in outcomes):
        kinds = {k: n for (t, k), n in outcomes.items() if t == target}
        shown = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items(), key=lambda kv: -kv[1]))
        print(f"  {target}: {sum(kinds.values())} cases: {shown}")
    print(f"{findings} finding(s)" + (f", written to {args.out}/" if findings else ""))
    return 1 if findings else 0


def _kind(outcome: str) -> str:
    """What an outcome is counted as: its text before any detail."""
    return outcome.split(":")[0].strip()


def _save_oracle(out: Path, case: int, target: str, why: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / f"oracle-case-{case}.txt").write_text(f"target {target}, case {case}\n{why}\n")
    print(f"oracle: case {case} ({target}): {why}", flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
