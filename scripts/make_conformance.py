"""Generate the full-size conformance models with TensorFlow (a dev-only tool) into a cache.

These are the networks users run, too big to commit: Keras MobileNetV2 1.0/224,
MobileNetV3-Small 1.0/224, InceptionV3/299 (all 1000 classes) and a small encoder-decoder CNN
with TRANSPOSE_CONV, each converted six ways: the five model types of the capability table
plus ``int8_float_io`` (full integer with float inputs and outputs, so the input QUANTIZE and
the output DEQUANTIZE are part of the model). Weights are seeded random (``weights=None``,
batch-norm statistics randomised), nothing is downloaded.

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

VARIANTS = ("float32", "float16", "dynamic_range", "int8", "int8_float_io", "qat")


def mobilenet_v2_224() -> keras.Model:
    inputs = keras.Input((224, 224, 3), batch_size=1, name="image")
    model = keras.applications.MobileNetV2(input_tensor=inputs, alpha=1.0, weights=None)
    return fx.randomise_batch_norm(model, fx.SEED)


def mobilenet_v3_small_224() -> keras.Model:
    inputs = keras.Input((224, 224, 3), batch_size=1, name="image")
    model = keras.applications.MobileNetV3Small(
        input_tensor=inputs, alpha=1.0, weights=None, include_preprocessing=False
    )
    return fx.randomise_batch_norm(model, fx.SEED)


def inception_v3_299() -> keras.Model:
    inputs = keras.Input((299, 299, 3), batch_size=1, name="image")
    model = keras.applications.InceptionV3(input_tensor=inputs, weights=None)
    return fx.randomise_batch_norm(model, fx.SEED)


MODELS: dict[str, Callable[[], keras.Model]] = {
    "mobilenet_v2_224": mobilenet_v2_224,
    "mobilenet_v3_small_224": mobilenet_v3_small_224,
    "inception_v3_299": inception_v3_299,
    "small_cnn": fx.small_cnn,
}


def convert(model: keras.Model, variant: str) -> bytes:
    if variant == "int8_float_io":
        return fx.convert(model, model.name, "int8", int8_io=False)
    return fx.convert(model, model.name, variant, int8_io=True)


def _code(function: Callable) -> str:
    """A function's code as its syntax tree: reformatting or comments do not change it."""
    return ast.dump(ast.parse(textwrap.dedent(inspect.getsource(function))))


def recipe_hash(name: str, variant: str) -> str:
    """Changes when the model's builder, the conversion code or TensorFlow changes."""
    parts = [
        _code(MODELS[name]),
        _code(fx.convert),
        _code(fx.qat_model),
        _code(fx.randomise_batch_norm),
        _code(fx.samples),
        variant,
        tf.__version__,
        str(fx.SEED),
    ]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", choices=[[], *MODELS], help="default: all")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--out", type=Path, default=Path("build/conformance"))
    args = parser.parse_args(argv)
    variants = [v for v in args.variants.split(",") if v]
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown:
        parser.error(f"unknown variants {unknown}; expected some of {list(VARIANTS)}")
    args.out.mkdir(parents=True, exist_ok=True)
    manifest_path = args.out / "MANIFEST.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    for name in args.models or list(MODELS):
        for variant in variants:
            filename = f"{name}_{variant}.tflite"
            recipe = recipe_hash(name, variant)
            path = args.out / filename
            entry = manifest.get(filename, {})
            if path.exists() and entry.get("recipe") == recipe:
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
                if digest == entry.get("sha256"):
                    print(f"{filename}: up to date", flush=True)
                    continue
            keras.backend.clear_session()
            keras.utils.set_random_seed(fx.SEED)
            np.random.seed(fx.SEED)
            print(f"{filename}: converting", flush=True)
            content = convert(MODELS[name](), variant)
            path.write_bytes(content)
            manifest[filename] = {
                "model": name,
                "variant": variant,
                "model_type": "int8" if variant == "int8_float_io" else variant,
                "recipe": recipe,
                **fx.describe(content),
                "bytes": len(content),
                "sha256": hashlib.sha256(content).hexdigest(),
            }
            manifest_path.write_text(json.dumps(dict(sorted(manifest.items())), indent=2) + "\n")
            print(f"  {len(content) / 1e6:.1f} MB", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
