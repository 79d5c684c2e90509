"""Tiny classifiers and an image folder for the sweep tests (small enough to run 1,000 images
through several configurations in a second or two)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from offload.model import ModelBuilder

# Ten prototype colours; an 8x8 image of colour k belongs to class k.
COLOURS = np.array(
    [
        [255, 0, 0],
        [0, 255, 0],
        [0, 0, 255],
        [255, 255, 0],
        [255, 0, 255],
        [0, 255, 255],
        [0, 0, 0],
        [255, 255, 255],
        [128, 128, 128],
        [255, 128, 0],
    ]
)


def colour_classifier(path: Path, shift: float = 0.0) -> Path:
    """MEAN over H, W then FULLY_CONNECTED: the nearest prototype colour wins. With ``shift``,
    an ADD of a constant first (a node the dummy delegate takes), which moves every logit
    by the same amount and so changes no ranking."""
    protos = (COLOURS.astype(np.float32) - 127.5) / 127.5
    b = ModelBuilder()
    x = b.add_input("image", (1, 8, 8, 3))
    if shift:
        c = b.add_constant("shift", np.full((1, 8, 8, 3), shift, np.float32))
        y = b.add_tensor("shifted", (1, 8, 8, 3))
        b.add_operator("ADD", [x, c], [y])
        x = y
    axes = b.add_constant("axes", np.array([1, 2], np.int32))
    m = b.add_tensor("mean", (1, 3))
    b.add_operator("MEAN", [x, axes], [m], {"keep_dims": False})
    w = b.add_constant("w", 2 * protos)
    bias = b.add_constant("b", -(protos**2).sum(axis=1) - 2 * protos.sum(axis=1) * shift)
    logits = b.add_tensor("logits", (1, 10))
    b.add_operator("FULLY_CONNECTED", [m, w, bias], [logits])
    b.add_output(logits)
    b.save(path)
    return path


def image_folder(folder: Path, count: int, seed: int = 0) -> list[int]:
    """``count`` noisy 8x8 images of random prototype colours, and their labels file; some
    labels are wrong on purpose, so accuracy is neither 0 nor 1."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    labels = rng.integers(0, len(COLOURS), count)
    for k, label in enumerate(labels):
        noise = rng.integers(-60, 61, (8, 8, 3))
        pixels = np.clip(COLOURS[label] + noise, 0, 255).astype(np.uint8)
        Image.fromarray(pixels).save(folder / f"{k:05d}.png")
    truth = [int(v) if k % 10 else int((v + 1) % 10) for k, v in enumerate(labels)]
    (folder.parent / f"{folder.name}_labels.txt").write_text("\n".join(map(str, truth)) + "\n")
    return truth
