""":func:`offload.sweep`: models x configurations over a data set (``offload sweep`` is its
command line, in ``offload.tools._sweep``).

Every model runs under every configuration (delegate specs with their options; precisions are
the models' own variants and the delegates' precision options) on every item of one data
set, and each (model, configuration) gets one row: accuracy against labels, agreement with a
reference configuration, latency, memory. Work is cut into shards of items per model and run
by an engine (``_sweep_engines``): a local process pool, or Ray Data. Workers are in
``_sweep_worker``, data sets in ``_sweep_data``, gathering and output in ``_sweep_report``.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

from offload._config_spec import CPU_CHOICE, ConfigSpec, parse_config_spec
from offload._loader import load_model
from offload._plugins import delegate_class, load_delegate, plugin_manager
from offload._sweep_data import (
    DataSet,
    Preprocessing,
    image_folder,
    npz_arrays,
    random_items,
)
from offload._sweep_engines import Job, import_ray, run_local, run_ray
from offload._sweep_report import Collector, ModelEntry, SweepReport, SweepRow
from offload._sweep_worker import ModelTask, SweepShard
from offload.errors import UsageError

__all__ = [
    "sweep",
    "SweepReport",
    "SweepRow",
    "SweepShard",
    "default_reference",
    "LITERT_REFERENCE",
]

PathLike = str | os.PathLike[str]
# Shards per worker when --shard_size is not given: enough that a slow shard or a retried one
# does not leave the other workers idle at the end, few enough that per-shard costs vanish.
SHARDS_PER_WORKER = 4
MAX_SHARD = 256
# Items of the data set an "auto" configuration checks its candidates on, beside its own sets.
AUTO_SAMPLES = 3
# The reference when none is named: LiteRT's builtin kernels (the oracle offload is checked
# against) through the litert delegate where it runs here, else offload's CPU reference.
LITERT_REFERENCE = "litert:kernels=builtin"


def default_reference() -> str:
    try:
        load_delegate("litert", {"kernels": "builtin"})
    except Exception:
        return CPU_CHOICE
    return LITERT_REFERENCE


def _model_paths(models: PathLike | Sequence[PathLike]) -> list[str]:
    given = [models] if isinstance(models, (str, os.PathLike)) else list(models)
    if not given:
        raise UsageError("models: expected .tflite paths or a folder of them, found none")
    paths: list[str] = []
    for entry in given:
        p = Path(entry)
        if p.is_dir():
            found = sorted(str(f) for f in p.iterdir() if f.suffix == ".tflite" and f.is_file())
            if not found:
                raise UsageError(f"models: expected .tflite files in folder {str(p)!r}, found none")
            paths += found
        elif p.is_file():
            paths.append(str(p))
        else:
            raise UsageError(f"models: expected a .tflite file or a folder, found no {str(p)!r}")
    return list(dict.fromkeys(paths))


def _check_options(spec: ConfigSpec) -> None:
    """Options a delegate installed here rejects are a usage error now, not a row later."""
    for name, options in spec.pairs():
        if name in plugin_manager().delegates:
            try:
                delegate_class(name).parse_options(options)
            except Exception as exc:
                raise UsageError(f"configuration {spec.label!r}: {exc}") from None


def _configs(
    configs: Sequence[str | ConfigSpec], reference: str | ConfigSpec | None
) -> tuple[list[ConfigSpec], int]:
    specs = [c if isinstance(c, ConfigSpec) else parse_config_spec(c) for c in configs]
    if not specs:
        raise UsageError("configurations: expected at least one, such as 'cpu', found none")
    labels = [s.label for s in specs]
    repeated = sorted({label for label in labels if labels.count(label) > 1})
    if repeated:
        raise UsageError(f"configurations: expected each once, found {repeated} repeated")
    ref = reference if reference is not None else default_reference()
    ref_spec = ref if isinstance(ref, ConfigSpec) else parse_config_spec(ref)
    if ref_spec.label not in labels:
        specs.insert(0, ref_spec)  # compared against, so it runs, and its row is shown too
    for spec in specs:
        _check_options(spec)
    return specs, [s.label for s in specs].index(ref_spec.label)


def _data_set(
    images: PathLike | None,
    labels: PathLike | None,
    model_output_labels: PathLike | None,
    npz: PathLike | None,
    random: int | None,
    seed: int,
    limit: int,
    preprocessing: Preprocessing,
) -> DataSet:
    chosen = (("images", images), ("npz", npz), ("random", random))
    given = [name for name, v in chosen if v is not None]
    if len(given) != 1:
        raise UsageError(
            "data: expected exactly one of images (a folder, with labels), npz (a file) or "
            f"random (a count), found {', '.join(given) or 'none'}"
        )
    if labels is not None and images is None:
        raise UsageError("labels: expected with images (npz files carry a 'labels' array)")
    if images is not None:
        return image_folder(images, labels, model_output_labels, limit, preprocessing)
    if npz is not None:
        return npz_arrays(npz, limit)
    return random_items(int(random or 0) if not limit else min(int(random or 0), limit), seed)


def _models(paths: list[str]) -> list[ModelEntry]:
    entries = []
    for path in paths:
        try:
            entries.append(ModelEntry(path, load_model(model_path=path).model_type))
        except Exception as exc:  # one bad model is a row, not the end of the sweep
            entries.append(ModelEntry(path, "", f"{type(exc).__name__}: {exc}"))
    return entries


class _Progress:
    """A tqdm bar over shards on a terminal (stderr); nothing otherwise."""

    def __init__(self, total: int, enabled: bool) -> None:
        self.bar = None
        if enabled and sys.stderr.isatty():
            try:
                from tqdm import tqdm
            except ImportError:  # a progress bar is cosmetic
                return
            self.bar = tqdm(total=total, desc="sweep", unit="shard", file=sys.stderr)

    def update(self, result: SweepShard) -> None:
        if self.bar is not None:
            self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def sweep(
    models: PathLike | Sequence[PathLike],
    configs: Sequence[str] = ("cpu",),
    *,
    images: PathLike | None = None,
    labels: PathLike | None = None,
    model_output_labels: PathLike | None = None,
    npz: PathLike | None = None,
    random: int | None = None,
    seed: int = 0,
    limit: int = 0,
    reference: str | None = None,
    engine: Literal["local", "ray"] = "local",
    workers: int | None = None,
    shard_size: int | None = None,
    ray_address: str | None = None,
    num_threads: int | None = None,
    auto_budget_s: float | None = None,
    mean: Sequence[float] = (127.5,),
    std: Sequence[float] = (127.5,),
    crop_fraction: float = 0.875,
    progress: bool = False,
    on_shard: Callable[[SweepShard], None] | None = None,
) -> SweepReport:
    """Run every model under every configuration over one data set; one row per pair.

    Args:
        models: ``.tflite`` paths, or folders of them.
        configs: delegate specs, ``name[:key=value,...]`` joined by ``+`` in priority order
            (``"cpu"``, ``"litert"``, ``"openvino:num_threads=1"``, ``"auto"``,
            ``"default"``).
        images, labels, model_output_labels: an image folder and its ground truth, as
            ``offload eval classify`` reads them (``mean``, ``std``, ``crop_fraction`` too);
            or ``npz``: a ``.npz`` of input arrays, one row per item (a ``labels`` array
            gives class indices); or ``random``: that many seeded inputs (``seed``).
        limit: use the first ``limit`` items only (0: all).
        reference: the configuration others are compared with; by default LiteRT's builtin
            kernels (``litert:kernels=builtin``) where offload-litert runs here, else
            ``cpu``. Added to the rows when not among ``configs``.
        engine: ``"local"`` (a process pool; in this process with ``workers=1``) or
            ``"ray"`` (Ray Data actors; ``pip install 'offload[ray]'``).
        workers: processes or actors (local default: the CPU count; Ray default: an actor
            pool autoscaled up to the cluster's CPUs).
        shard_size: items per shard (per Ray batch).
        ray_address: a Ray cluster to join; without it, a Ray already initialised in this
            process, else a local one started for the sweep.
        on_shard: called in this process with each shard's result as it arrives.

    Accuracy and agreement figures are the same for either engine and any worker count;
    latency figures are per worker. A model that does not load, a configuration that is
    unavailable, or an item that cannot be read is reported in its rows with the reason.
    """
    if engine not in ("local", "ray"):
        raise UsageError(f"engine: expected 'local' or 'ray', found {engine!r}")
    if workers is not None and workers < 1:
        raise UsageError(f"workers: expected a number >= 1, found {workers}")
    if shard_size is not None and shard_size < 1:
        raise UsageError(f"shard_size: expected a number >= 1, found {shard_size}")
    if engine == "local" and ray_address:
        raise UsageError("ray_address: expected only with engine 'ray'")
    paths = _model_paths(models)
    specs, ref = _configs(configs, reference)
    prep = Preprocessing(tuple(map(float, mean)), tuple(map(float, std)), float(crop_fraction))
    data = _data_set(images, labels, model_output_labels, npz, random, seed, limit, prep)
    entries = _models(paths)
    if engine == "ray":
        import_ray()  # fail before any work when the extra is missing
    n = len(data.items)
    # Ray without --workers autoscales; its shards are sized as for two actors per model.
    pool = workers or ((os.cpu_count() or 1) if engine == "local" else 2)
    size = shard_size or max(1, min(MAX_SHARD, math.ceil(n / (pool * SHARDS_PER_WORKER))))
    shards = [data.items[i : i + size] for i in range(0, n, size)]
    local_workers = min(pool, max(1, len(entries) * len(shards)))
    jobs: list[Job] = [
        (
            ModelTask(
                m,
                e.path,
                tuple(specs),
                ref,
                data.spec,
                num_threads,
                auto_budget_s,
                auto_samples=tuple(data.items[:AUTO_SAMPLES]),
            ),
            shards,
        )
        for m, e in enumerate(entries)
        if not e.error
    ]
    bar = _Progress(len(jobs) * len(shards), progress)

    def on_result(result: SweepShard) -> None:
        bar.update(result)
        if on_shard is not None:
            on_shard(result)

    collector = Collector(entries, specs, ref, on_result)
    t0 = time.perf_counter()
    try:
        if engine == "local":
            # In this process only when asked for (workers=1): a pool cut down to one worker
            # because there is one shard still runs in a worker, where a configuration that
            # crashes its process takes down that worker, not the sweep.
            stats = run_local(jobs, local_workers, collector, in_process=workers == 1)
        else:
            stats = run_ray(jobs, workers, ray_address, collector)
    finally:
        bar.close()
    wall = time.perf_counter() - t0
    return SweepReport(
        rows=collector.rows(n),
        engine=engine,
        workers=workers if engine == "ray" else local_workers,
        shard_size=size,
        data=data.description,
        num_items=n,
        has_labels=data.has_labels,
        reference=specs[ref].label,
        wall_s=wall,
        retried_shards=stats.get("retried_shards"),
        duplicates_dropped=collector.duplicates,
        loads={entries[m].path: dict(v) for m, v in collector.loads.items()},
        shards_per_worker=dict(collector.shards_per_worker),
    )
