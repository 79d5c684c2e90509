"""Export a model's Core ML partitions as ``.mlpackage`` files, on any platform.

Where the files go (``out_path``):

* a path ending in ``.mlpackage``: the model must yield exactly one program, written there;
  the manifest goes beside it as ``<OUT>.json`` (``model.mlpackage`` -> ``model.json``). A model
  that splits into several programs is refused with a message saying to pass a directory.
* any other path is a directory (created if missing): ``partition_<i>.mlpackage`` per program
  and ``manifest.json``.

The manifest says which TFLite nodes each program covers, how its inputs and outputs map to
TFLite tensors (name, index, shape; NHWC as in TFLite), which nodes stay on the CPU and why,
and how long each conversion took.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

import offload
from offload_coreml._convert import build_program, deployment_target, to_mlmodel
from offload_coreml._delegate import VERSION, CoreMLDelegate

__all__ = ["ExportError", "export_coreml", "add_export_command"]

MANIFEST_FORMAT = "offload-coreml-manifest/2"


class ExportError(offload.errors.OffloadError, ValueError):
    """The model cannot be exported the way it was asked (e.g. several programs, one path)."""


def _tensor_entry(sg: offload.Subgraph, t: int, name: str | None) -> dict[str, Any]:
    tensor = sg.tensors[t]
    entry: dict[str, Any] = {"tensor": t, "name": tensor.name, "shape": list(tensor.shape)}
    if name is not None:
        entry["coreml_name"] = name
    return entry


def export_coreml(
    model_path: str | os.PathLike[str],
    out_path: str | os.PathLike[str],
    options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Convert every partition the ``coreml`` delegate takes and write it as an .mlpackage.

    Works without a Mac: conversion needs only coremltools. ``options`` are the delegate's
    (``compute_precision``, ``coreml_version``, ``min_nodes_per_partition``, ...); the Neural
    Engine check does not apply to export. Returns the manifest (also written as JSON).
    """
    start = time.perf_counter()
    model_path = Path(model_path)
    out = Path(out_path)
    opts = {"enabled_devices": "all", **(options or {})}
    delegate = CoreMLDelegate(opts)
    interpreter = offload.Interpreter(model_path=str(model_path), experimental_delegates=[delegate])
    plan = interpreter.plan()
    sg = plan.subgraph
    partitions = [p for p in plan.partitions if p.delegate == delegate.name]
    rejection = plan.model_rejections.get(delegate.name)
    if rejection:
        raise ExportError(f"cannot export {model_path.name}: {rejection}")
    if not partitions:
        raise ExportError(
            f"cannot export {model_path.name}: the coreml delegate takes none of its "
            f"{len(sg.nodes)} nodes ({_why(plan)})"
        )
    converted = [build_program(sg, p, delegate.options.coreml_version) for p in partitions]
    single = out.suffix == ".mlpackage"
    if single and len(converted) != 1:
        raise ExportError(
            f"{out} holds one program, but {model_path.name} splits into {len(converted)} "
            "Core ML programs; pass a directory instead to get one .mlpackage per partition"
        )
    if single:
        out.parent.mkdir(parents=True, exist_ok=True)
        manifest_path = out.with_suffix(".json")
    else:
        out.mkdir(parents=True, exist_ok=True)
        manifest_path = out / "manifest.json"
    o = delegate.options
    programs = []
    for p, c in zip(partitions, converted):
        entry: dict[str, Any] = {
            "partition": p.index,
            "path": None,
            "nodes": list(p.nodes),
            "ops": _ops(sg, p.nodes),
            "inputs": [_tensor_entry(sg, t, n) for t, n in c.inputs],
            "outputs": [_tensor_entry(sg, t, n) for t, n in c.outputs],
        }
        target = out if single else out / f"partition_{p.index}.mlpackage"
        t0 = time.perf_counter()
        mlmodel = to_mlmodel(c.program, o.compute_precision, o.compute_units, o.coreml_version)
        _replace(target, mlmodel)
        entry["path"] = target.name
        entry["conversion_seconds"] = round(c.seconds + time.perf_counter() - t0, 3)
        programs.append(entry)
    manifest = {
        "format": MANIFEST_FORMAT,
        "model": model_path.name,
        "model_sha256": _sha256(model_path),
        "model_type": plan.model_type,
        "offload_coreml": VERSION,
        "coremltools": _coremltools_version(),
        "minimum_deployment_target": str(deployment_target(o.coreml_version).name),
        "compute_precision": o.compute_precision,
        "layout": "inputs and outputs keep TFLite's shapes (NHWC); programs run NCHW inside",
        "programs": programs,
        "cpu_nodes": plan.cpu_nodes(),
        # Run once by offload's core before planning (float16 / sparse weights): in no program.
        "folded_nodes": list(plan.folded),
        "cpu_reasons": {
            op: {reason: nodes for reason, nodes in entry["reasons"].get(delegate.name, {}).items()}
            for op, entry in plan.fallback_summary().items()
        },
        "conversion_seconds": round(time.perf_counter() - start, 3),
    }
    tmp = manifest_path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(manifest, indent=2))
    os.replace(tmp, manifest_path)
    manifest["manifest_path"] = str(manifest_path)
    return manifest


def _replace(target: Path, mlmodel: Any) -> None:
    """Save ``mlmodel`` to ``target`` through a temporary sibling, replacing what was there."""
    import shutil

    tmp = target.with_name(f".tmp-{target.name}")  # coremltools wants the .mlpackage suffix
    if tmp.exists():
        shutil.rmtree(tmp)
    mlmodel.save(str(tmp))
    if target.exists():
        shutil.rmtree(target)
    os.rename(tmp, target)


def _ops(sg: offload.Subgraph, nodes: tuple[int, ...]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for n in nodes:
        counts[sg.nodes[n].op] = counts.get(sg.nodes[n].op, 0) + 1
    return counts


def _why(plan: offload.Plan) -> str:
    parts = []
    for op, entry in plan.fallback_summary().items():
        reasons = "; ".join(r for by in entry["reasons"].values() for r in by)
        parts.append(f"{op}: {reasons}")
    return ", ".join(parts[:5]) or "no reason recorded"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _coremltools_version() -> str:
    import coremltools

    return coremltools.__version__


# -- command line ----------------------------------------------------------------------------


def add_export_command(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "export-coreml",
        help="convert a model's Core ML partitions to .mlpackage files (any platform)",
        description=(
            "Convert every partition the coreml delegate takes into a Core ML ML Program. "
            "OUT ending in .mlpackage takes a model that converts to one program (manifest "
            "beside it as OUT.json); any other OUT is a directory with partition_<i>.mlpackage "
            "and manifest.json."
        ),
    )
    parser.add_argument("model", help="the .tflite model")
    parser.add_argument("out", help="OUT.mlpackage or a directory")
    parser.add_argument("--compute-precision", choices=["float16", "float32"], default=None)
    parser.add_argument(
        "--coreml-version",
        type=int,
        default=None,
        help="oldest Core ML to target (2-8; ML Programs need 5)",
    )
    parser.add_argument("--min-nodes-per-partition", type=int, default=None)
    parser.add_argument("--max-delegated-partitions", type=int, default=None)
    parser.set_defaults(func=_run_export)


def _run_export(args: argparse.Namespace) -> int:
    options = {
        key: value
        for key, value in (
            ("compute_precision", args.compute_precision),
            ("coreml_version", args.coreml_version),
            ("min_nodes_per_partition", args.min_nodes_per_partition),
            ("max_delegated_partitions", args.max_delegated_partitions),
        )
        if value is not None
    }
    try:
        manifest = export_coreml(args.model, args.out, options)
    except offload.errors.OffloadError as exc:
        print(f"offload export-coreml: {exc}")
        return 1
    for program in manifest["programs"]:
        if program["path"]:
            print(
                f"partition {program['partition']}: {len(program['nodes'])} nodes -> "
                f"{program['path']} ({program['conversion_seconds']:.2f} s)"
            )
    print(
        f"{len(manifest['cpu_nodes'])} node(s) stay on the CPU; manifest: "
        f"{manifest['manifest_path']}; total {manifest['conversion_seconds']:.2f} s"
    )
    return 0
