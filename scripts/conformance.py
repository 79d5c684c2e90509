"""Compare every model in the given folders with LiteRT, node by node, and print a table.

The second half of ``make conformance`` (the first makes the full-size models with
TensorFlow). Each model runs on several seeds and input distributions through LiteRT's builtin
kernels and offload's CPU reference with ``offload.diff_per_node``; a model conforms when,
on every input:

* int8, QAT and dynamic-range models (integer arithmetic, which LiteRT's kernels fix exactly):
  every output is bit-identical to LiteRT's, 0 steps and 0 relative error;
* float32 and float16 models: integer outputs (and float outputs that are a DEQUANTIZE of an
  integer tensor) are within 1 step of LiteRT with at least 99% of elements exact, and float
  outputs within 1e-4 of LiteRT relative to the largest reference magnitude;

and the per-node columns say how close the intermediates are (one row per model and type, its
weight seeds together, each column the worst of them): the number of nodes whose
integer outputs are not bit-exact or whose float outputs differ by more than 1e-5 relative,
and the first of them (the place to start with ``offload diff --per-node``).

    python scripts/conformance.py build/conformance tests/fixtures [--kinds normal,wide]
        [--draws 2] [--models NAME_SUBSTRING ...] [--markdown FILE] [--json FILE]

Exit status 1 when any model does not conform.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import offload
from offload import PerNodeDiff, diff_per_node

KINDS = ("normal", "uniform", "image", "wide")
DRAWS = 2
FLOAT_TOLERANCE = 1e-4
NODE_TOLERANCE = 1e-5
MAX_STEPS = 1
MIN_EXACT = 0.99
# Model types whose outputs must equal LiteRT's bit for bit.
EXACT_TYPES = ("int8", "qat", "dynamic_range")


@dataclass
class Verdict:
    model: str
    model_type: str
    runs: int = 0
    worst_steps: float = 0.0
    worst_exact: float = 1.0
    worst_relative: float = 0.0
    divergent_nodes: int = 0
    first_divergence: str = ""
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)
    folder: str = ""  # the corpus: fixtures and full-size models share names

    @property
    def conforms(self) -> bool:
        if self.errors:
            return False
        if self.model_type in EXACT_TYPES:
            return self.worst_steps == 0 and self.worst_exact == 1 and self.worst_relative == 0
        return (
            self.worst_steps <= MAX_STEPS
            and self.worst_exact >= MIN_EXACT
            and self.worst_relative <= FLOAT_TOLERANCE
        )

    def output_text(self) -> str:
        parts = []
        if self.worst_relative or self.model_type in ("float32", "float16", "dynamic_range"):
            parts.append(f"rel {self.worst_relative:.1e}")
        if self.worst_steps or self.worst_exact < 1 or self.model_type in ("int8", "qat"):
            parts.append(f"{self.worst_steps:g} steps, {self.worst_exact:.2%} exact")
        return "; ".join(parts)


def output_rows(path: Path, result: PerNodeDiff) -> list:
    """The row of each model output, or of the integer tensor a DEQUANTIZE output came from
    (so an int8 model with float outputs is judged in steps, as its integer outputs are)."""
    subgraph = offload.load_model(path).main
    producers = {t: node for node in subgraph.nodes for t in node.outputs}
    by_tensor = {row.tensor: row for row in result.rows}
    rows = []
    for t in subgraph.outputs:
        node = producers.get(t)
        if node is not None and node.op == "DEQUANTIZE":
            source = subgraph.tensors[node.inputs[0]]
            if source.quantization is not None and source.dtype.kind in "iu":
                t = node.inputs[0]
        rows.append(by_tensor.get(t))
    return rows


def check_model(path: Path, model_type: str, kinds: list[str], draws: int) -> Verdict:
    verdict = Verdict(path.name, model_type, folder=path.parent.name)
    start = time.perf_counter()
    for seed, kind in enumerate(kind for kind in kinds for _ in range(draws)):
        result = diff_per_node(
            path, "litert", "cpu", seed=seed, input_kind=kind, tolerance=NODE_TOLERANCE
        )
        verdict.runs += 1
        verdict.errors += [f"{kind}: {k}: {v}" for k, v in result.errors.items()]
        for row in output_rows(path, result):
            if row is None or row.comparison is None:
                verdict.errors.append(f"{kind}: an output was not compared")
                continue
            c = row.comparison
            if c.exceeds and c.max_error is None:
                verdict.errors.append(f"{kind}: {row.name}: {c.note}")
            elif c.kind == "float":
                verdict.worst_relative = max(verdict.worst_relative, c.relative_error or 0.0)
            else:
                verdict.worst_steps = max(verdict.worst_steps, c.max_error or 0.0)
                verdict.worst_exact = min(
                    verdict.worst_exact, c.equal if c.equal is not None else 0
                )
        divergent = result.divergent_rows
        if len(divergent) > verdict.divergent_nodes or (divergent and not verdict.first_divergence):
            first = result.first_divergence
            verdict.divergent_nodes = len({row.node for row in divergent})
            if first is not None:
                where = first.locality or "?"
                verdict.first_divergence = f"{kind}: node {first.node} {first.op} ({where})"
    verdict.seconds = time.perf_counter() - start
    return verdict


def models_in(folders: list[Path], filters: list[str]) -> list[tuple[Path, str]]:
    found = []
    for folder in folders:
        manifest = json.loads((folder / "MANIFEST.json").read_text())
        for name, entry in sorted(manifest.items()):
            if not name.endswith(".tflite") or (filters and not any(f in name for f in filters)):
                continue
            path = folder / name
            if path.exists():
                found.append((path, entry["model_type"]))
    return found


def markdown(verdicts: list[Verdict], kinds: list[str], draws: int) -> str:
    lines = [
        f"Inputs per model: {', '.join(kinds)}, {draws} draws each (input seeds "
        f"0..{len(kinds) * draws - 1}). Outputs: worst over "
        f"the inputs; nodes: intermediates not bit-exact (integers) or over "
        f"{NODE_TOLERANCE:g} relative (floats).",
        "",
        "| model | type | weight seeds | outputs vs LiteRT | nodes differing | first difference "
        "| verdict |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, group in by_architecture(verdicts).items():
        worst = merged(name, group)
        failed = [v for v in group if not v.conforms]
        outcome = "ok" if not failed else "FAIL: " + ", ".join(v.model for v in failed)
        if worst.errors:
            outcome += " (" + "; ".join(worst.errors) + ")"
        lines.append(
            f"| {name} | {worst.model_type} | {len(group)} | {worst.output_text()} "
            f"| {worst.divergent_nodes} | {worst.first_divergence or '-'} | {outcome} |"
        )
    passed = sum(v.conforms for v in verdicts)
    lines += ["", f"{passed} of {len(verdicts)} models conform."]
    return "\n".join(lines)


def by_architecture(verdicts: list[Verdict]) -> dict[str, list[Verdict]]:
    """The verdicts grouped by model and type, the weight seeds of one together; with several
    folders, each row names its folder."""
    groups: dict[tuple[str, str], list[Verdict]] = {}
    for v in verdicts:
        name = re.sub(r"_seed\d+$", "", v.model.removesuffix(".tflite"))
        groups.setdefault((v.folder, name), []).append(v)
    return (
        {name: group for (_, name), group in groups.items()}
        if len({folder for folder, _ in groups}) == 1
        else {f"{name} ({folder})": group for (folder, name), group in groups.items()}
    )


def merged(name: str, group: list[Verdict]) -> Verdict:
    """One row for several weight seeds: the worst figure of each column."""
    firsts = [v.first_divergence for v in group if v.first_divergence]
    return Verdict(
        model=name,
        model_type=group[0].model_type,
        runs=sum(v.runs for v in group),
        worst_steps=max(v.worst_steps for v in group),
        worst_exact=min(v.worst_exact for v in group),
        worst_relative=max(v.worst_relative for v in group),
        divergent_nodes=max(v.divergent_nodes for v in group),
        first_divergence=firsts[0] if firsts else "",
        errors=[e for v in group for e in v.errors],
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path, help="folders with a MANIFEST.json")
    parser.add_argument("--kinds", default=",".join(KINDS), help="input distributions")
    parser.add_argument(
        "--draws", type=int, default=DRAWS, help="input seeds per distribution (%(default)s)"
    )
    parser.add_argument("--models", nargs="*", default=[], help="only names containing these")
    parser.add_argument("--markdown", type=Path, help="also write the table to this file")
    parser.add_argument("--json", type=Path, help="also write the verdicts as JSON")
    args = parser.parse_args(argv)
    kinds = [k for k in args.kinds.split(",") if k]
    if args.draws < 1:
        parser.error(f"--draws takes a count of at least 1, got {args.draws}")
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown:
        parser.error(f"unknown input kinds {unknown}; expected some of {list(KINDS)}")
    verdicts = []
    for path, model_type in models_in(args.folders, args.models):
        verdict = check_model(path, model_type, kinds, args.draws)
        mark = "ok  " if verdict.conforms else "FAIL"
        print(
            f"{mark} {path.name}: {verdict.output_text()}, {verdict.divergent_nodes} nodes "
            f"differ ({verdict.seconds:.1f} s)",
            flush=True,
        )
        verdicts.append(verdict)
    table = markdown(verdicts, kinds, args.draws)
    print()
    print(table)
    if args.markdown:
        args.markdown.write_text(table + "\n")
    if args.json:
        data = [v.__dict__ | {"conforms": v.conforms} for v in verdicts]
        args.json.write_text(json.dumps(data, indent=2) + "\n")
    return 0 if all(v.conforms for v in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
