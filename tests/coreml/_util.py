"""Shared helpers of the Core ML tests: plan a model, convert its partitions, evaluate them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import offload
from offload_coreml import CoreMLDelegate, build_program
from offload_coreml._mil_eval import evaluate

from .._models import relative_error

TOLERANCE = 1e-4  # relative, float32 compute precision


def delegate(**options: Any) -> CoreMLDelegate:
    """The delegate built directly (no availability check), as export does on any platform."""
    return CoreMLDelegate({"enabled_devices": "all", **options})


@dataclass
class Checked:
    plan: offload.Plan
    errors: dict[tuple[int, int], float]  # (partition, output tensor) -> relative error
    programs: list[Any]


def check_partitions(
    model: str | Path | bytes, seed: int = 0, low: float = -1.0, high: float = 1.0, **options: Any
) -> Checked:
    """Convert every partition and evaluate it with numpy on the CPU reference's own boundary
    tensors (random model inputs); return the relative error of every boundary output."""
    source = {"model_content": model} if isinstance(model, bytes) else {"model_path": str(model)}
    d = delegate(**options)
    plan = offload.Interpreter(**source, experimental_delegates=[d]).plan()
    sg = plan.subgraph
    ref = offload.Interpreter(**source, delegates=[], experimental_preserve_all_tensors=True)
    ref.allocate_tensors()
    rng = np.random.default_rng(seed)
    for det in ref.get_input_details():
        ref.set_tensor(det["index"], rng.uniform(low, high, det["shape"]).astype(np.float32))
    ref.invoke()
    errors: dict[tuple[int, int], float] = {}
    programs = []
    for part in plan.partitions:
        converted = build_program(sg, part, d.options.coreml_version)
        programs.append(converted)
        out = evaluate(converted.program, {name: ref.get_tensor(t) for t, name in converted.inputs})
        for t, name in converted.outputs:
            want = ref.get_tensor(t)
            assert out[name].shape == want.shape, (name, out[name].shape, want.shape)
            errors[(part.index, t)] = relative_error(out[name], want)
    return Checked(plan, errors, programs)
