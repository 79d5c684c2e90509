"""Images as LiteRT's ImageNet-style evaluation reads them: labels files and preprocessing.

``offload eval classify`` and :func:`offload.sweep`'s image data sets both read an
ILSVRC-style folder (images in sorted file-name order, one ground-truth label per line) and
feed each image the way LiteRT's tool does: RGB, central crop, bilinear resize to the model's
input size; float inputs become ``(pixel - mean) / std``, uint8 inputs stay raw pixels and
int8 inputs are ``pixel - 128``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from offload._extras import require_extra
from offload.errors import UsageError

__all__ = ["IMAGE_SUFFIXES", "floats", "read_lines", "ground_truth", "preprocess"]

IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp", ".ppm"}


def floats(text: str | None, what: str, default: float) -> np.ndarray:
    if text is None:
        return np.array([default], np.float32)
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        raise UsageError(f"{what}: expected a number or R,G,B numbers, found {text!r}") from None
    return np.array(values, np.float32)


def read_lines(path: str, what: str) -> list[str]:
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"{what} {path!r}: no such file")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"{what} {path!r}: expected UTF-8 text, one label per line, found byte "
            f"{exc.object[exc.start]:#04x} at offset {exc.start} ({exc.reason})"
        ) from None
    except OSError as exc:
        raise UsageError(
            f"{what} {path!r}: expected a readable file, found {exc.strerror}"
        ) from None
    return [line.strip() for line in text.splitlines() if line.strip()]


def ground_truth(labels_file: str, model_output_labels: str | None, count: int) -> list[int]:
    """The class index of each of the first ``count`` images, from ``labels_file`` (indices,
    or names looked up in ``model_output_labels``, the model's classes in output order)."""
    labels = read_lines(labels_file, "--labels")
    if len(labels) < count:
        raise UsageError(
            f"--labels {labels_file!r} has {len(labels)} labels, but {count} images are "
            "evaluated; expected one label per image, in sorted file-name order"
        )
    labels = labels[:count]
    if model_output_labels:
        names = read_lines(model_output_labels, "--model_output_labels")
        index = {name: i for i, name in enumerate(names)}
        missing = sorted({lab for lab in labels if lab not in index})
        if missing:
            raise UsageError(
                f"ground-truth labels not found in --model_output_labels: {', '.join(missing[:5])}"
            )
        return [index[lab] for lab in labels]
    try:
        return [int(lab) for lab in labels]
    except ValueError:
        raise UsageError(
            "--labels holds class names; give --model_output_labels to map them to indices, or "
            "write class indices"
        ) from None


def preprocess(
    path: Path,
    size: tuple[int, int],
    channels: int,
    dtype: np.dtype,
    mean: np.ndarray,
    std: np.ndarray,
    crop_fraction: float,
) -> np.ndarray:
    image_mod = require_extra("PIL.Image", "offload eval classify")
    with image_mod.open(path) as img:
        img = img.convert("L" if channels == 1 else "RGB")
        if 0 < crop_fraction < 1:
            w, h = img.size
            cw, ch = max(1, round(w * crop_fraction)), max(1, round(h * crop_fraction))
            left, top = (w - cw) // 2, (h - ch) // 2
            img = img.crop((left, top, left + cw, top + ch))
        img = img.resize((size[1], size[0]), image_mod.BILINEAR)
        pixels = np.asarray(img, dtype=np.float32)
    if pixels.ndim == 2:
        pixels = pixels[:, :, None]
    if dtype.kind == "f":
        data = (pixels - mean) / std
    elif dtype == np.dtype(np.uint8):
        data = pixels
    elif dtype == np.dtype(np.int8):
        data = pixels - 128.0
    else:
        raise UsageError(f"image classifiers take float, uint8 or int8 input, found {dtype}")
    return data.astype(dtype)[None]
