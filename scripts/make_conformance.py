"""Generate the full-size conformance models with TensorFlow (a dev-only tool) into a cache.

These are the networks users run, too big to commit: Keras MobileNetV2 1.0/224,
MobileNetV3-Small 1.0/224, InceptionV3/299 (all 1000 classes) and a small encoder-decoder CNN
with TRANSPOSE_CONV, each converted six ways: the five model types of the capability table
plus ``int8_float_io`` (full integer with float inputs and outputs, so the input QUANTIZE and
the output DEQUANTIZE are part of the model), each from three weight seeds (``--seeds``; seed 0
keeps the plain file name, the others end in ``_seedN``). Weights are seeded random
(``weights=None``, batch-norm statistics randomised), calibration data too; nothing is
downloaded. All 72 take about an hour on two cores, once.

Run in a separate environment (``make conformance`` does all of this)::

    python -m venv build/tfenv
    build/tfenv/bin/pip install tensorflow tf-keras tensorflow-model-optimization
    build/tfenv/bin/python scripts/make_conformance.py --out build/conformance [MODEL ...]

A model already in ``--out`` with a matching recipe hash is not converted again.
Conversion uses the helpers of ``make_fixtures.py`` so the two corpora are made the same way.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import inspect
import json
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import make_fixtures as fx  # also sets TF_USE_LEGACY_KERAS before TensorFlow is imported
import numpy as np
import tensorflow as tf
import tf_keras as keras

VARIANTS = (
    "float32",
    "float16",
    "dynamic_range",
    "int8",
    "int8_float_io",
    "qat",
    "int8_calnormal",
)
# Built on request (--variants), not by default: full integer calibrated on N(0, 1) data instead
# of uniform [-1, 1], the calibration the auto issue's measurements used (wider activation
# ranges, so engines that round differently land further apart).
ON_REQUEST = ("int8_calnormal",)
# Weight draws per architecture: one draw can pass by luck (a QAT MobileNetV3-Small whose seed-0
# weights matched LiteRT exactly differed by 8 steps with other seeds).
SEEDS = 3


def mobilenet_v2_224(seed: int) -> keras.Model:
    inputs = keras.Input((224, 224, 3), batch_size=1, name="image")
    model = keras.applications.MobileNetV2(input_tensor=inputs, alpha=1.0, weights=None)
    return fx.randomise_batch_norm(model, seed)


def mobilenet_v3_small_224(seed: int) -> keras.Model:
    inputs = keras.Input((224, 224, 3), batch_size=1, name="image")
    model = keras.applications.MobileNetV3Small(
        input_tensor=inputs, alpha=1.0, weights=None, include_preprocessing=False
    )
    return fx.randomise_batch_norm(model, seed)


def inception_v3_299(seed: int) -> keras.Model:
    inputs = keras.Input((299, 299, 3), batch_size=1, name="image")
    model = keras.applications.InceptionV3(input_tensor=inputs, weights=None)
    return fx.randomise_batch_norm(model, seed)


def confident(model: keras.Model, seed: int, spread: float = 4.0) -> keras.Model:
    """Scale the last layer with weights (the logits' Dense or 1x1 conv, linear up to the
    softmax) so that the logits spread by ``spread`` (their standard deviation across classes
    on seeded inputs), as a trained classifier's do. With random weights they spread so
    little that every softmax output is about 1/1000: int8 outputs are all -128 and no
    engine's error or top-1 change can show."""
    last = next(layer for layer in reversed(model.layers) if layer.get_weights())
    x = np.stack(fx.samples(model, 4, seed + 3)).reshape(4, *model.input_shape[1:])
    log_probs = np.log(np.maximum(model.predict(x, verbose=0), 1e-30))
    factor = spread / float(np.mean(np.std(log_probs, axis=-1)))
    last.set_weights([w * factor for w in last.get_weights()])
    return model


def mobilenet_v2_224_confident(seed: int) -> keras.Model:
    return confident(mobilenet_v2_224(seed), seed)


def mobilenet_v3_small_224_confident(seed: int) -> keras.Model:
    return confident(mobilenet_v3_small_224(seed), seed)


def inception_v3_299_confident(seed: int) -> keras.Model:
    return confident(inception_v3_299(seed), seed)


def small_cnn(seed: int) -> keras.Model:
    return fx.small_cnn()  # no batch norm: its weights come from the global seed alone


MODELS: dict[str, Callable[[int], keras.Model]] = {
    "mobilenet_v2_224": mobilenet_v2_224,
    "mobilenet_v3_small_224": mobilenet_v3_small_224,
    "inception_v3_299": inception_v3_299,
    "small_cnn": small_cnn,
    "mobilenet_v2_224_confident": mobilenet_v2_224_confident,
    "mobilenet_v3_small_224_confident": mobilenet_v3_small_224_confident,
    "inception_v3_299_confident": inception_v3_299_confident,
}
# Built on request (named on the command line), not by default.
MODELS_ON_REQUEST = (
    "mobilenet_v2_224_confident",
    "mobilenet_v3_small_224_confident",
    "inception_v3_299_confident",
)


def normal_calibrated(model: keras.Model, seed: int) -> bytes:
    """Full integer (int8 inputs and outputs) calibrated on seeded N(0, 1) inputs."""
    rng = np.random.default_rng(seed + 1)
    shape = tuple(model.input_shape)
    data = [rng.standard_normal(shape).astype(np.float32) for _ in range(fx.CALIBRATION_SAMPLES)]
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = lambda: ([x] for x in data)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    converter.inference_input_type = tf.int8
    converter.inference_output_type = tf.int8
    return converter.convert()


def convert(model: keras.Model, variant: str, seed: int) -> bytes:
    if variant == "int8_calnormal":
        return normal_calibrated(model, seed)
    if variant == "int8_float_io":
        return fx.convert(model, model.name, "int8", int8_io=False, seed=seed)
    return fx.convert(model, model.name, variant, int8_io=True, seed=seed)


def filename(name: str, variant: str, seed: int) -> str:
    """Seed 0 keeps the plain name that benchmarks and the README use."""
    return f"{name}_{variant}.tflite" if seed == 0 else f"{name}_{variant}_seed{seed}.tflite"


def _code(function: Callable) -> str:
    """A function's code as its syntax tree: reformatting or comments do not change it."""
    return ast.dump(ast.parse(textwrap.dedent(inspect.getsource(function))))


def recipe_hash(name: str, variant: str, seed: int) -> str:
    """Changes when the model's builder, the conversion code or TensorFlow changes."""
    parts = [
        _code(MODELS[name]),
        _code(fx.convert),
        _code(fx.qat_model),
        _code(fx.randomise_batch_norm),
        _code(fx.samples),
        _code(fx.representative_dataset),
        _code(normal_calibrated),
        _code(confident),
        variant,
        tf.__version__,
        str(seed),
    ]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def build(name: str, variant: str, seed: int, out: Path, manifest: dict) -> None:
    file = filename(name, variant, seed)
    recipe = recipe_hash(name, variant, seed)
    path = out / file
    entry = manifest.get(file, {})
    if path.exists() and entry.get("recipe") == recipe:
        if hashlib.sha256(path.read_bytes()).hexdigest() == entry.get("sha256"):
            print(f"{file}: up to date", flush=True)
            return
    keras.backend.clear_session()
    keras.utils.set_random_seed(seed)
    np.random.seed(seed)
    print(f"{file}: converting", flush=True)
    content = convert(MODELS[name](seed), variant, seed)
    path.write_bytes(content)
    manifest[file] = {
        "model": name,
        "variant": variant,
        "seed": seed,
        "model_type": "int8" if variant.startswith("int8") else variant,
        "recipe": recipe,
        **fx.describe(content),
        "bytes": len(content),
        "sha256": hashlib.sha256(content).hexdigest(),
    }
    print(f"  {len(content) / 1e6:.1f} MB", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", choices=[[], *MODELS], help="default: all")
    parser.add_argument("--variants", default=",".join(v for v in VARIANTS if v not in ON_REQUEST))
    parser.add_argument("--out", type=Path, default=Path("build/conformance"))
    parser.add_argument(
        "--seeds",
        default=",".join(str(fx.SEED + i) for i in range(SEEDS)),
        help="weight and calibration seeds, one model per seed (default: %(default)s)",
    )
    args = parser.parse_args(argv)
    variants = [v for v in args.variants.split(",") if v]
    try:
        seeds = [int(s) for s in args.seeds.split(",") if s]
    except ValueError:
        parser.error(f"--seeds takes integers separated by commas, got {args.seeds!r}")
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown:
        parser.error(f"unknown variants {unknown}; expected some of {list(VARIANTS)}")
    args.out.mkdir(parents=True, exist_ok=True)
    manifest_path = args.out / "MANIFEST.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    for name in args.models or [m for m in MODELS if m not in MODELS_ON_REQUEST]:
        for seed in seeds:
            for variant in variants:
                build(name, variant, seed, args.out, manifest)
                manifest_path.write_text(
                    json.dumps(dict(sorted(manifest.items())), indent=2) + "\n"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
