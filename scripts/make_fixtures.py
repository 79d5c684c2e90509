"""Generate the committed fixture models in tests/fixtures/ with TensorFlow (a dev-only tool).

TensorFlow is never a dependency of offload. Run this in a separate environment::

    python -m venv /tmp/tfenv
    /tmp/tfenv/bin/pip install tensorflow tf-keras tensorflow-model-optimization
    /tmp/tfenv/bin/python scripts/make_fixtures.py            # all fixtures
    /tmp/tfenv/bin/python scripts/make_fixtures.py lstm       # only the models named

Nothing is downloaded: every Keras application is built with ``weights=None`` and seeded random
weights (batch-norm statistics are randomised too, so folding them is not a no-op). Inputs have a
fixed batch of 1. Each model is converted five ways, one per row of the capability table:

* ``float32``: the plain converter;
* ``float16``: ``Optimize.DEFAULT`` with ``supported_types=[tf.float16]``;
* ``dynamic_range``: ``Optimize.DEFAULT`` without a representative dataset;
* ``int8``: full integer with a seeded random representative dataset (int8 model inputs and
  outputs where ``INT8_IO`` says so, float inputs and outputs otherwise);
* ``qat``: the model wrapped in fake-quant ops by tensorflow-model-optimization's
  ``quantize_model`` (ranges set by a few seeded forward passes in training mode), converted
  with ``Optimize.DEFAULT``; the converter then records QUANTIZATION_AWARE_TRAINING.

tests/fixtures/MANIFEST.json lists every file with its expected model_type, ops, inputs,
outputs, size and sha256. Tested with tensorflow 2.21, tf-keras 2.21, tfmot 0.8.1.
"""

from __future__ import annotations

import os

# tensorflow-model-optimization needs Keras 2 (tf-keras); set before TensorFlow is imported.
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import argparse  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
from collections.abc import Callable, Iterator  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf_keras as keras  # noqa: E402
from tensorflow.lite.python import schema_py_generated as schema  # noqa: E402

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures"
VARIANTS = ("float32", "float16", "dynamic_range", "int8", "qat")
# Models whose int8 variant takes and returns int8 tensors (the others keep float I/O).
INT8_IO = {"mobilenet_v2", "inception_v3_mini"}
SEED = 0
CALIBRATION_SAMPLES = 8


# -- models ----------------------------------------------------------------------------------


def randomise_batch_norm(model: keras.Model, seed: int) -> keras.Model:
    """Give every BatchNormalization layer seeded non-trivial statistics."""
    rng = np.random.default_rng(seed)
    draw = {
        "gamma": lambda shape: rng.uniform(0.5, 1.5, shape),
        "beta": lambda shape: rng.normal(0.0, 0.1, shape),
        "moving_mean": lambda shape: rng.normal(0.0, 0.1, shape),
        "moving_variance": lambda shape: rng.uniform(0.5, 1.5, shape),
    }
    for layer in model.layers:
        if isinstance(layer, keras.layers.BatchNormalization):
            for weight in layer.weights:
                kind = weight.name.rsplit("/", 1)[-1].split(":")[0]
                weight.assign(draw[kind](weight.shape).astype(np.float32))
    return model


def mobilenet_v2() -> keras.Model:
    """Keras MobileNetV2, alpha 0.35, 96x96, 10 classes (the 1280-wide last conv is kept)."""
    inputs = keras.Input((96, 96, 3), batch_size=1, name="image")
    model = keras.applications.MobileNetV2(
        input_tensor=inputs, alpha=0.35, weights=None, classes=10
    )
    return randomise_batch_norm(model, SEED)


def mobilenet_v3_small() -> keras.Model:
    """Keras MobileNetV3Small, alpha 0.35, not minimalistic (SE blocks, HARD_SWISH), 96x96.

    Built without the classifier head (whose 1024-wide 1x1 conv alone would double the file) and
    finished with global average pooling and a 10-way Dense softmax.
    """
    inputs = keras.Input((96, 96, 3), batch_size=1, name="image")
    base = keras.applications.MobileNetV3Small(
        input_tensor=inputs,
        alpha=0.35,
        minimalistic=False,
        weights=None,
        include_top=False,
        include_preprocessing=False,
    )
    x = keras.layers.GlobalAveragePooling2D()(base.output)
    outputs = keras.layers.Dense(10, activation="softmax", name="predictions")(x)
    return randomise_batch_norm(keras.Model(inputs, outputs, name="mobilenet_v3_small"), SEED)


def _conv_bn(x: tf.Tensor, filters: int, kh: int, kw: int, strides: int = 1, padding: str = "same"):
    x = keras.layers.Conv2D(filters, (kh, kw), strides=strides, padding=padding, use_bias=False)(x)
    x = keras.layers.BatchNormalization(scale=False)(x)
    return keras.layers.Activation("relu")(x)


def inception_v3_mini(width: float = 0.125) -> keras.Model:
    """An InceptionV3-style model: Keras InceptionV3's own blocks, one of each kind, narrowed.

    The full InceptionV3 is ~22M parameters (87 MB as float32), far past the fixture budget,
    so this keeps its structure (same layer pattern as keras.applications.InceptionV3: stem,
    35x35 block "mixed0", grid reduction "mixed3", factorised 7x7 block "mixed4", grid
    reduction "mixed8", expanded-filter block "mixed9") with every width multiplied by
    ``width``, on a 75x75 input (InceptionV3's minimum).
    """

    def n(filters: int) -> int:
        return max(4, int(round(filters * width)))

    concat = keras.layers.Concatenate
    inputs = keras.Input((75, 75, 3), batch_size=1, name="image")
    # Stem.
    x = _conv_bn(inputs, n(32), 3, 3, strides=2, padding="valid")
    x = _conv_bn(x, n(32), 3, 3, padding="valid")
    x = _conv_bn(x, n(64), 3, 3)
    x = keras.layers.MaxPooling2D((3, 3), strides=(2, 2))(x)
    x = _conv_bn(x, n(80), 1, 1, padding="valid")
    x = _conv_bn(x, n(192), 3, 3, padding="valid")
    x = keras.layers.MaxPooling2D((3, 3), strides=(2, 2))(x)
    # mixed0: 35x35 block.
    b1 = _conv_bn(x, n(64), 1, 1)
    b5 = _conv_bn(_conv_bn(x, n(48), 1, 1), n(64), 5, 5)
    b3 = _conv_bn(_conv_bn(_conv_bn(x, n(64), 1, 1), n(96), 3, 3), n(96), 3, 3)
    bp = keras.layers.AveragePooling2D((3, 3), strides=(1, 1), padding="same")(x)
    bp = _conv_bn(bp, n(32), 1, 1)
    x = concat(axis=3, name="mixed0")([b1, b5, b3, bp])
    # mixed3: grid reduction.
    b3 = _conv_bn(x, n(384), 3, 3, strides=2, padding="valid")
    bd = _conv_bn(_conv_bn(x, n(64), 1, 1), n(96), 3, 3)
    bd = _conv_bn(bd, n(96), 3, 3, strides=2, padding="valid")
    bp = keras.layers.MaxPooling2D((3, 3), strides=(2, 2))(x)
    x = concat(axis=3, name="mixed3")([b3, bd, bp])
    # mixed4: factorised 7x7 convolutions.
    b1 = _conv_bn(x, n(192), 1, 1)
    b7 = _conv_bn(_conv_bn(_conv_bn(x, n(128), 1, 1), n(128), 1, 7), n(192), 7, 1)
    bd = _conv_bn(x, n(128), 1, 1)
    for filters, kh, kw in ((128, 7, 1), (128, 1, 7), (128, 7, 1), (192, 1, 7)):
        bd = _conv_bn(bd, n(filters), kh, kw)
    bp = keras.layers.AveragePooling2D((3, 3), strides=(1, 1), padding="same")(x)
    bp = _conv_bn(bp, n(192), 1, 1)
    x = concat(axis=3, name="mixed4")([b1, b7, bd, bp])
    # mixed8: grid reduction (a 3x3 map here, so SAME padding keeps it non-empty).
    b3 = _conv_bn(_conv_bn(x, n(192), 1, 1), n(320), 3, 3, strides=2)
    b7 = _conv_bn(x, n(192), 1, 1)
    b7 = _conv_bn(_conv_bn(b7, n(192), 1, 7), n(192), 7, 1)
    b7 = _conv_bn(b7, n(192), 3, 3, strides=2)
    bp = keras.layers.MaxPooling2D((3, 3), strides=(2, 2), padding="same")(x)
    x = concat(axis=3, name="mixed8")([b3, b7, bp])
    # mixed9: expanded filter bank.
    b1 = _conv_bn(x, n(320), 1, 1)
    b3 = _conv_bn(x, n(384), 1, 1)
    b3 = concat(axis=3)([_conv_bn(b3, n(384), 1, 3), _conv_bn(b3, n(384), 3, 1)])
    bd = _conv_bn(_conv_bn(x, n(448), 1, 1), n(384), 3, 3)
    bd = concat(axis=3)([_conv_bn(bd, n(384), 1, 3), _conv_bn(bd, n(384), 3, 1)])
    bp = keras.layers.AveragePooling2D((3, 3), strides=(1, 1), padding="same")(x)
    bp = _conv_bn(bp, n(192), 1, 1)
    x = concat(axis=3, name="mixed9")([b1, b3, bd, bp])
    x = keras.layers.GlobalAveragePooling2D()(x)
    outputs = keras.layers.Dense(10, activation="softmax", name="predictions")(x)
    return randomise_batch_norm(keras.Model(inputs, outputs, name="inception_v3_mini"), SEED)


def lstm() -> keras.Model:
    """keras.layers.LSTM (fused to UNIDIRECTIONAL_SEQUENCE_LSTM) then a Dense layer.

    32 features and 32 units give 32x32 per-gate weight matrices: 1024 elements, the
    converter's threshold for quantizing a weight in the dynamic-range variant.
    """
    inputs = keras.Input((8, 32), batch_size=1, name="sequence")
    x = keras.layers.LSTM(32, name="lstm")(inputs)
    outputs = keras.layers.Dense(4, name="logits")(x)
    return keras.Model(inputs, outputs, name="lstm")


def small_cnn() -> keras.Model:
    """Encoder-decoder on 64x64x3: strided convs down, TRANSPOSE_CONV up, a skip ADD and a
    sigmoid output (LOGISTIC)."""
    layers = keras.layers
    inputs = keras.Input((64, 64, 3), batch_size=1, name="image")
    e1 = layers.Conv2D(16, 3, strides=2, padding="same", activation="relu")(inputs)
    e2 = layers.Conv2D(32, 3, strides=2, padding="same", activation="relu")(e1)
    d1 = layers.Conv2DTranspose(16, 3, strides=2, padding="same", activation="relu")(e2)
    d1 = layers.Add()([d1, e1])
    d2 = layers.Conv2DTranspose(8, 4, strides=2, padding="same")(d1)
    outputs = layers.Conv2D(3, 1, activation="sigmoid", name="mask")(d2)
    return keras.Model(inputs, outputs, name="small_cnn")


MODELS: dict[str, Callable[[], keras.Model]] = {
    "mobilenet_v2": mobilenet_v2,
    "mobilenet_v3_small": mobilenet_v3_small,
    "inception_v3_mini": inception_v3_mini,
    "lstm": lstm,
    "small_cnn": small_cnn,
}


# -- conversion ------------------------------------------------------------------------------


def samples(model: keras.Model, count: int, seed: int) -> list[np.ndarray]:
    """Seeded random inputs in [-1, 1] (the range MobileNet preprocessing produces)."""
    rng = np.random.default_rng(seed)
    shape = tuple(model.input_shape)
    return [rng.uniform(-1.0, 1.0, shape).astype(np.float32) for _ in range(count)]


def representative_dataset(
    model: keras.Model, seed: int = SEED
) -> Callable[[], Iterator[list[np.ndarray]]]:
    data = samples(model, CALIBRATION_SAMPLES, seed + 1)

    def gen() -> Iterator[list[np.ndarray]]:
        for x in data:
            yield [x]

    return gen


def qat_model(model: keras.Model, seed: int = SEED) -> keras.Model:
    """Wrap the model in fake-quant ops (tfmot) and set their ranges with seeded data."""
    import tensorflow_model_optimization as tfmot

    quantize = tfmot.quantization.keras
    try:
        qmodel = quantize.quantize_model(model)
    except Exception as exc:  # layers tfmot cannot quantize (TFOpLambda ops in MobileNetV3)
        print(f"  quantize_model failed ({type(exc).__name__}); annotating supported layers only")
        registry = quantize.default_8bit.Default8BitQuantizeRegistry()

        def annotate(layer: keras.layers.Layer) -> keras.layers.Layer:
            if registry.supports(layer):
                return quantize.quantize_annotate_layer(
                    layer.__class__.from_config(layer.get_config())
                )
            return layer.__class__.from_config(layer.get_config())

        annotated = keras.models.clone_model(model, clone_function=annotate)
        annotated.set_weights(model.get_weights())
        with quantize.quantize_scope():
            qmodel = quantize.quantize_apply(annotated)
    for x in samples(model, CALIBRATION_SAMPLES, seed + 2):
        qmodel(x, training=True)  # moves the activation ranges; weights are not trained
    return qmodel


def convert(
    model: keras.Model, name: str, variant: str, int8_io: bool | None = None, seed: int = SEED
) -> bytes:
    """The converted model; ``int8_io`` (default: ``name in INT8_IO``) gives an int8 model
    int8 inputs and outputs instead of float ones. ``seed`` draws the calibration data."""
    if variant == "qat":
        model = qat_model(model, seed)
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    if variant != "float32":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    if variant == "float16":
        converter.target_spec.supported_types = [tf.float16]
    elif variant == "int8":
        converter.representative_dataset = representative_dataset(model, seed)
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        if (name in INT8_IO) if int8_io is None else int8_io:
            converter.inference_input_type = tf.int8
            converter.inference_output_type = tf.int8
    return converter.convert()


# -- manifest --------------------------------------------------------------------------------

_OP_NAMES = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
_TYPE_NAMES = {v: k for k, v in vars(schema.TensorType).items() if not k.startswith("_")}


def describe(content: bytes) -> dict[str, object]:
    """Ops, inputs and outputs of a converted model, read from its flatbuffer."""
    model = schema.ModelT.InitFromPackedBuf(bytearray(content), 0)
    ops: dict[str, int] = {}
    for sg in model.subgraphs:
        for op in sg.operators:
            code = model.operatorCodes[op.opcodeIndex]
            builtin = max(code.builtinCode, code.deprecatedBuiltinCode)
            # Custom ops by their custom code, as offload's Model.op_histogram() counts them.
            is_custom = builtin == schema.BuiltinOperator.CUSTOM
            key = code.customCode.decode() if is_custom else _OP_NAMES[builtin]
            ops[key] = ops.get(key, 0) + 1
    main = model.subgraphs[0]

    def tensors(indices: list[int]) -> list[dict[str, object]]:
        return [
            {
                "name": main.tensors[i].name.decode(),
                "dtype": _TYPE_NAMES[main.tensors[i].type],
                "shape": [int(d) for d in main.tensors[i].shape],
            }
            for i in indices
        ]

    return {
        "ops": dict(sorted(ops.items())),
        "inputs": tensors(list(main.inputs)),
        "outputs": tensors(list(main.outputs)),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", choices=[[], *MODELS], help="default: all")
    parser.add_argument("--out", type=Path, default=FIXTURES)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    manifest_path = args.out / "MANIFEST.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    manifest.pop("_about", None)
    for name in args.models or list(MODELS):
        for variant in VARIANTS:
            keras.backend.clear_session()  # layer names restart, whatever was built before
            keras.utils.set_random_seed(SEED)
            model = MODELS[name]()
            print(f"{name}_{variant}: converting", flush=True)
            content = convert(model, name, variant)
            filename = f"{name}_{variant}.tflite"
            (args.out / filename).write_bytes(content)
            manifest[filename] = {
                "model": name,
                "variant": variant,
                "model_type": variant,
                **describe(content),
                "bytes": len(content),
                "sha256": hashlib.sha256(content).hexdigest(),
            }
            print(f"  {filename}: {len(content) / 1e6:.2f} MB", flush=True)
    about = {
        "_about": (
            "Generated by scripts/make_fixtures.py (TensorFlow "
            f"{tf.__version__}, tf-keras {keras.__version__}); model_type is what "
            "offload.load_model(path).model_type must say."
        )
    }
    ordered = about | dict(sorted(manifest.items()))
    manifest_path.write_text(json.dumps(ordered, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
