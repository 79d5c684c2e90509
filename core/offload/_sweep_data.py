"""The data sets of ``offload sweep``: an image folder with labels, an ``.npz``, seeded inputs.

A data set is a list of :class:`Item`; an item carries what every model needs to build its
inputs, so any worker on any machine can run any shard of it: an image's path and label, one
row of each ``.npz`` array, or only its index (seeded inputs are drawn from ``(seed,
index)`` for the model at hand, so they do not depend on which worker draws them).
Images are read and preprocessed in the worker, for each model's own input size and dtype.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from offload._images import IMAGE_SUFFIXES, floats, ground_truth, preprocess
from offload._seeded_inputs import random_inputs
from offload.errors import UsageError

__all__ = [
    "Item",
    "DataSet",
    "DataSpec",
    "item_inputs",
    "Preprocessing",
    "image_folder",
    "npz_arrays",
    "random_items",
]

# ``.npz`` key that holds ground-truth class indices instead of an input.
LABELS_KEY = "labels"


@dataclass(frozen=True)
class Item:
    """One example: its index in the data set, an image path or input arrays, its label."""

    index: int
    path: str = ""
    label: int = -1  # -1: no label
    arrays: tuple[tuple[str, np.ndarray], ...] = ()


@dataclass(frozen=True)
class Preprocessing:
    """Image preprocessing, as ``offload eval classify`` (LiteRT's tool) does it."""

    mean: tuple[float, ...] = (127.5,)
    std: tuple[float, ...] = (127.5,)
    crop_fraction: float = 0.875


@dataclass(frozen=True)
class DataSpec:
    """What a worker needs, beyond the items, to turn an item into inputs."""

    kind: str  # "images", "npz" or "random"
    seed: int = 0
    preprocessing: Preprocessing = field(default_factory=Preprocessing)


@dataclass(frozen=True)
class DataSet:
    spec: DataSpec
    description: str
    items: list[Item]
    has_labels: bool


def image_folder(
    images: str | os.PathLike[str],
    labels: str | os.PathLike[str] | None,
    model_output_labels: str | os.PathLike[str] | None = None,
    limit: int = 0,
    preprocessing: Preprocessing | None = None,
) -> DataSet:
    """Every image in ``images`` (sorted by name), with ``labels`` read as eval classify does."""
    folder = Path(images)
    if not folder.is_dir():
        raise UsageError(f"images {str(images)!r}: expected a folder, found none")
    paths = sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
    if limit:
        paths = paths[:limit]
    if not paths:
        raise UsageError(
            f"images {str(images)!r}: expected image files ({', '.join(sorted(IMAGE_SUFFIXES))})"
            ", found none"
        )
    truth: Sequence[int] = [-1] * len(paths)
    if labels is not None:
        other = None if model_output_labels is None else str(model_output_labels)
        truth = ground_truth(str(labels), other, len(paths))
    items = [Item(k, str(p), int(t)) for k, (p, t) in enumerate(zip(paths, truth))]
    where = f"{len(items)} images in {folder}" + (f", labels {labels}" if labels else "")
    spec = DataSpec("images", 0, preprocessing or Preprocessing())
    return DataSet(spec, where, items, labels is not None)


def npz_arrays(path: str | os.PathLike[str], limit: int = 0) -> DataSet:
    """One item per row of the arrays in ``path``; a ``labels`` array gives class indices.

    Arrays are matched to a model's inputs by name where every input has one, else in the
    file's order. Each row is reshaped to the input's shape at run time, so (N, H, W, C) and
    (N, 1, H, W, C) both feed a [1, H, W, C] input.
    """
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"npz {str(path)!r}: expected a file, found none")
    arrays = _read_npz(p, str(path))
    labels = arrays.pop(LABELS_KEY, None)
    if not arrays:
        raise UsageError(f"npz {str(path)!r}: expected input arrays, found none")
    counts = {key: (a.shape[0] if a.ndim else 0) for key, a in arrays.items()}
    if labels is not None:
        counts[LABELS_KEY] = labels.shape[0] if labels.ndim else 0
    if len(set(counts.values())) != 1 or not next(iter(counts.values())):
        raise UsageError(
            f"npz {str(path)!r}: expected arrays with the same number of rows (one per item) "
            f"along their first axis, found {counts}"
        )
    if labels is not None and (labels.dtype.kind not in "iu" or labels.ndim != 1):
        raise UsageError(
            f"npz {str(path)!r}: expected '{LABELS_KEY}' to hold integer class indices, one per "
            f"item, found dtype {labels.dtype} and shape {list(labels.shape)}"
        )
    count = next(iter(counts.values()))
    if limit:
        count = min(count, limit)
    items = [
        Item(
            k,
            label=-1 if labels is None else int(labels[k]),
            arrays=tuple((key, a[k]) for key, a in arrays.items()),
        )
        for k in range(count)
    ]
    where = f"{count} rows of {', '.join(arrays)} in {p}"
    return DataSet(DataSpec("npz"), where, items, labels is not None)


# What a file starts with: a zip archive (an .npz is one), or a single array from np.save.
_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")
_NPY_MAGIC = b"\x93NUMPY"


def _read_npz(p: Path, shown: str) -> dict[str, np.ndarray]:
    """Every array of the .npz at ``p``; any way the file is not one is a UsageError (numpy
    raises a different exception for each: BadZipFile, EOFError, ValueError, TypeError)."""
    try:
        with p.open("rb") as fh:
            head = fh.read(len(_NPY_MAGIC))
    except OSError as exc:
        raise UsageError(f"npz {shown!r}: expected a readable file, found {exc.strerror}") from None
    if not head.startswith(_ZIP_MAGIC):
        found = (
            "a single .npy array (np.save): save the arrays with np.savez"
            if head.startswith(_NPY_MAGIC)
            else "an empty file"
            if not head
            else f"a file that is no zip archive (it starts {head[:4]!r})"
        )
        raise UsageError(f"npz {shown!r}: expected a numpy .npz file (np.savez), found {found}")
    try:
        with np.load(p, allow_pickle=False) as data:
            arrays = {key: data[key] for key in data.files}
    except Exception as exc:  # a damaged archive, object arrays: whatever numpy or zipfile raised
        raise UsageError(
            f"npz {shown!r}: expected a numpy .npz file (np.savez), found one numpy cannot read "
            f"({type(exc).__name__}: {exc})"
        ) from None
    stray = sorted(key for key, value in arrays.items() if not isinstance(value, np.ndarray))
    if stray:  # numpy hands a member that is not a .npy array back as its raw bytes
        raise UsageError(
            f"npz {shown!r}: expected .npy arrays only, found other files in it: {stray}"
        )
    return arrays


def random_items(count: int, seed: int) -> DataSet:
    if count < 1:
        raise UsageError(f"random: expected a number of inputs >= 1, found {count}")
    items = [Item(k) for k in range(count)]
    where = f"{count} seeded random inputs (seed {seed})"
    return DataSet(DataSpec("random", seed), where, items, False)


# -- in the worker: one item's inputs for one model -------------------------------------------


def item_inputs(spec: DataSpec, item: Item, details: Sequence[dict[str, Any]]) -> list[np.ndarray]:
    """The input arrays of ``item`` for a model with input ``details``; raises what is wrong."""
    if spec.kind == "random":
        return random_inputs(details, np.random.default_rng([spec.seed, item.index]))
    if spec.kind == "images":
        return [_image_input(item, details, spec.preprocessing)]
    return _npz_inputs(item, details)


def _image_input(item: Item, details: Sequence[dict[str, Any]], prep: Preprocessing) -> np.ndarray:
    if len(details) != 1:
        raise UsageError(f"the model has {len(details)} inputs; an image data set feeds one")
    shape = tuple(int(s) for s in details[0]["shape"])
    if len(shape) != 4:
        raise UsageError(
            f"the model input has shape {list(shape)}; an image data set feeds [1, H, W, C]"
        )
    mean = floats(",".join(map(str, prep.mean)), "mean", 127.5)
    std = floats(",".join(map(str, prep.std)), "std", 127.5)
    dtype = np.dtype(details[0]["dtype"])
    try:
        return preprocess(
            Path(item.path), (shape[1], shape[2]), shape[3], dtype, mean, std, prep.crop_fraction
        )
    except UsageError:
        raise
    except Exception as exc:  # PIL's many ways of refusing a file: all one per-item failure
        raise UsageError(
            f"{Path(item.path).name}: cannot read the image ({type(exc).__name__}: {exc})"
        ) from None


def _npz_inputs(item: Item, details: Sequence[dict[str, Any]]) -> list[np.ndarray]:
    given = dict(item.arrays)
    names = [d["name"] for d in details]
    if all(n in given for n in names):
        chosen = [(n, given[n]) for n in names]
    elif len(given) == len(details):
        chosen = list(item.arrays)
    else:
        raise UsageError(
            f"the model has inputs {names}; the npz has arrays {list(given)}: expected one "
            "array per input, named as the inputs or in their order"
        )
    arrays = []
    for (key, value), d in zip(chosen, details):
        shape = tuple(int(s) for s in d["shape"])
        dtype = np.dtype(d["dtype"])
        if value.size != int(np.prod(shape)):
            raise UsageError(
                f"npz array {key!r}: a row has shape {list(value.shape)}, the input "
                f"{d['name']!r} takes {list(shape)}"
            )
        if value.dtype != dtype and value.dtype.kind != dtype.kind:
            raise UsageError(
                f"npz array {key!r} has dtype {value.dtype}; the input {d['name']!r} takes {dtype}"
            )
        arrays.append(value.reshape(shape).astype(dtype, copy=False))
    return arrays
