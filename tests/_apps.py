"""Small LiteRT programs in each import style, run unmodified under ``offload run``.

Each app loads a model, feeds the inputs saved in an .npz (by position), invokes, saves the
outputs to another .npz and prints the modules its interpreter class comes from, so that a
test can tell offload ran it and compare the numbers with LiteRT.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

IMPORTS = {
    "tflite_runtime": "from tflite_runtime.interpreter import Interpreter\n",
    "ai_edge_litert": "from ai_edge_litert.interpreter import Interpreter\n",
    "tf.lite": "import tensorflow as tf\n\nInterpreter = tf.lite.Interpreter\n",
}
# Programs that choose their backend by probing for TensorFlow first, as audio apps on PyPI
# do: TensorFlow means a SavedModel (no stand-in has one), its absence tflite_runtime. Each
# prints the branch it took.
PROBES = {
    "probe_import": """try:
    import tensorflow as tf
except ImportError:
    from tflite_runtime.interpreter import Interpreter

    print("branch: tflite_runtime")
else:
    print("branch: tensorflow")
    tf.saved_model.load("saved_model")
""",
    "probe_find_spec": """import importlib.util

if importlib.util.find_spec("tensorflow") is not None:
    import tensorflow as tf

    print("branch: tensorflow")
    tf.saved_model.load("saved_model")
else:
    from tflite_runtime.interpreter import Interpreter

    print("branch: tflite_runtime")
""",
}
# LiteRT 2.x's CompiledModel API (style "compiled_model"): the hardware it names chooses the
# delegates, so it is not among the interpreter styles above that take --delegate.
COMPILED_MODEL_IMPORT = (
    "from ai_edge_litert.compiled_model import CompiledModel, HardwareAccelerator\n"
)

BODY = """
import sys

import numpy as np

model, inputs, outputs = sys.argv[1:4]
interpreter = Interpreter(model_path=model)
interpreter.allocate_tensors()
feeds = np.load(inputs)
for position, detail in enumerate(interpreter.get_input_details()):
    interpreter.set_tensor(detail["index"], feeds[f"arr_{position}"])
interpreter.invoke()
np.savez(outputs, *[interpreter.get_tensor(d["index"]) for d in interpreter.get_output_details()])
print("interpreter:", [c.__module__ for c in type(interpreter).__mro__])
"""


# LiteRT 2.x's CompiledModel API: buffers in, run, buffers out.
COMPILED_MODEL_BODY = """
import sys

import numpy as np

model, inputs, outputs = sys.argv[1:4]
compiled = CompiledModel.from_file(model, hardware_accel=HardwareAccelerator.CPU)
ins, outs = compiled.create_input_buffers(0), compiled.create_output_buffers(0)
feeds = np.load(inputs)
for position, buffer in enumerate(ins):
    buffer.write(feeds[f"arr_{position}"])
compiled.run_by_index(0, ins, outs)
key = next(iter(compiled.get_signature_list()))
details = compiled.get_output_tensor_details(key).values()
np.savez(
    outputs,
    *[
        b.read(int(np.prod(d["shape"])), np.dtype(d["dtype"])).reshape(d["shape"])
        for b, d in zip(outs, details)
    ],
)
print("interpreter:", [c.__module__ for c in type(compiled).__mro__])
"""


def write_app(directory: Path, style: str) -> Path:
    path = directory / f"app_{style.replace('.', '_')}.py"
    if style == "compiled_model":
        path.write_text(COMPILED_MODEL_IMPORT + COMPILED_MODEL_BODY)
    elif style in PROBES:
        path.write_text(PROBES[style] + BODY)
    else:
        path.write_text(IMPORTS[style] + BODY)
    return path


def run_app(
    directory: Path,
    style: str,
    model: Path,
    inputs: list[np.ndarray],
    offload_args: list[str],
    timeout: float = 300,
) -> tuple[subprocess.CompletedProcess[str], list[np.ndarray]]:
    """``offload run OFFLOAD_ARGS -- python app.py``; the process and the app's outputs."""
    app = write_app(directory, style)
    feeds, outputs = directory / "inputs.npz", directory / "outputs.npz"
    np.savez(feeds, *inputs)
    command = [sys.executable, "-m", "offload", "run", *offload_args, "--"]
    command += [sys.executable, str(app), str(model), str(feeds), str(outputs)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    with np.load(outputs) as saved:
        return done, [saved[f"arr_{i}"] for i in range(len(saved.files))]


def litert_outputs(model: Path, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """LiteRT's builtin kernels on the same inputs: the oracle."""
    from ai_edge_litert import interpreter as litert

    it = litert.Interpreter(
        model_path=str(model),
        experimental_op_resolver_type=litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
    )
    it.allocate_tensors()
    for detail, value in zip(it.get_input_details(), inputs):
        it.set_tensor(detail["index"], value)
    it.invoke()
    return [it.get_tensor(d["index"]) for d in it.get_output_details()]


def ran_on_offload(done: subprocess.CompletedProcess[str]) -> bool:
    """Whether the app's interpreter class derives from offload's."""
    return "'offload._interpreter'" in done.stdout
