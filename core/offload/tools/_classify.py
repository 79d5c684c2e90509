"""``offload eval classify``: LiteRT's ImageNet-style top-k accuracy evaluation.

``--images DIR`` holds the images; ``--labels FILE`` has one ground-truth label per line, in
the sorted order of the image file names (ILSVRC's layout). Labels are class indices, or
names found in ``--model_output_labels`` (one per line, in the model's output order).
Preprocessing as LiteRT's tool does it: RGB, central crop (``--crop_fraction``, 0.875),
bilinear resize to the model's input size; float inputs become ``(pixel - mean) / std``
(default 127.5 / 127.5), uint8 inputs stay raw pixels and int8 inputs are ``pixel - 128``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from offload._images import IMAGE_SUFFIXES, floats, ground_truth, preprocess
from offload._interpreter import Interpreter
from offload.tools._common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    UsageError,
    add_delegate_args,
    add_json_arg,
    fmt_g,
    interpreter_delegates,
    interpreter_options,
    latency_stats,
    print_json,
    progress,
    require_extra,
)

TOP_K = 10


def add_parser(sub: argparse._SubParsersAction) -> None:
    ev = sub.add_parser(
        "eval",
        help="accuracy evaluations (eval classify)",
        description="Accuracy evaluations over a data set.",
    )
    tasks = ev.add_subparsers(dest="task", metavar="TASK")
    ev.set_defaults(func=lambda args: _missing_task(ev))
    p = tasks.add_parser(
        "classify",
        help="top-1..top-10 accuracy of an image classifier (needs offload[tools])",
        description="Top-k accuracy on an ILSVRC-style folder of images and a labels file.",
    )
    p.add_argument("--graph", required=True, metavar="MODEL", help="path to a .tflite classifier")
    p.add_argument("--images", required=True, metavar="DIR", help="folder of images")
    p.add_argument(
        "--labels",
        required=True,
        metavar="FILE",
        help="ground truth, one label per line in sorted image order",
    )
    p.add_argument(
        "--model_output_labels",
        metavar="FILE",
        help="the model's class names, one per line, in output order",
    )
    p.add_argument("--num_images", type=int, default=0, help="evaluate the first N (0: all)")
    p.add_argument("--image_size", metavar="H,W", help="resize to H,W (default: the model input)")
    p.add_argument("--mean", default=None, help="float inputs: mean, one value or R,G,B (127.5)")
    p.add_argument("--std", default=None, help="float inputs: std, one value or R,G,B (127.5)")
    p.add_argument(
        "--crop_fraction",
        type=float,
        default=0.875,
        help="central crop before resizing (default 0.875; 1 = none)",
    )
    p.add_argument("--num_threads", type=int, default=None, help="passed to the Interpreter")
    p.add_argument(
        "--min_top1", type=float, default=None, help="exit 1 if the top-1 accuracy is below this"
    )
    add_delegate_args(p)
    add_json_arg(p)
    p.set_defaults(func=run)


def _missing_task(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return EXIT_USAGE


def _image_size(text: str | None, shape: tuple[int, ...]) -> tuple[int, int]:
    if text is None:
        if len(shape) != 4:
            raise UsageError(
                f"the model input has shape {list(shape)}, expected [1, H, W, C]; "
                "an image classifier takes one NHWC image"
            )
        return int(shape[1]), int(shape[2])
    try:
        h, w = (int(v) for v in text.split(","))
    except ValueError:
        raise UsageError(f"--image_size: expected H,W, found {text!r}") from None
    return h, w


def evaluate(args: argparse.Namespace, show: bool) -> dict[str, Any]:
    require_extra("PIL.Image", "offload eval classify")
    graph = Path(args.graph)
    if not graph.is_file():
        raise UsageError(f"model {args.graph!r}: no such file")
    folder = Path(args.images)
    if not folder.is_dir():
        raise UsageError(f"--images {args.images!r}: not a folder")
    images = sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
    if args.num_images:
        images = images[: args.num_images]
    if not images:
        raise UsageError(
            f"--images {args.images!r}: no images ({', '.join(sorted(IMAGE_SUFFIXES))})"
        )
    truth = ground_truth(args.labels, args.model_output_labels, len(images))
    it = Interpreter(
        model_path=str(graph),
        delegates=interpreter_delegates(args),
        num_threads=args.num_threads,
        **interpreter_options(args),
    )
    it.allocate_tensors()
    inp = it.get_input_details()[0]
    out = it.get_output_details()[0]
    shape = tuple(int(s) for s in inp["shape"])
    size = _image_size(args.image_size, shape)
    if args.image_size and (len(shape) != 4 or (shape[1], shape[2]) != size):
        it.resize_tensor_input(inp["index"], [1, size[0], size[1], shape[-1]])
        it.allocate_tensors()
    channels = shape[-1] if len(shape) == 4 else 3
    dtype = np.dtype(inp["dtype"])
    mean = floats(args.mean, "--mean", 127.5)
    std = floats(args.std, "--std", 127.5)
    hits = np.zeros(TOP_K, np.int64)
    pre_times: list[float] = []
    inf_times: list[float] = []
    num_classes = 0
    for path, label in progress(
        zip(images, truth), total=len(images), desc="classify", enabled=show
    ):
        t0 = time.perf_counter()
        try:
            data = preprocess(path, size, channels, dtype, mean, std, args.crop_fraction)
        except UsageError:
            raise
        except Exception as exc:  # PIL's many ways of refusing a file: one line naming it
            raise UsageError(
                f"--images: expected an image, found {str(path)!r} unreadable "
                f"({type(exc).__name__}: {exc})"
            ) from None
        t1 = time.perf_counter()
        it.set_tensor(inp["index"], data)
        it.invoke()
        t2 = time.perf_counter()
        scores = it.get_tensor(out["index"]).reshape(-1).astype(np.float64)
        num_classes = scores.size
        if not 0 <= label < num_classes:
            raise UsageError(
                f"ground-truth label {label} for {path.name} is outside the model's "
                f"{num_classes} classes"
            )
        ranked = np.argsort(-scores, kind="stable")[:TOP_K]
        position = np.nonzero(ranked == label)[0]
        if position.size:
            hits[int(position[0]) :] += 1
        pre_times.append(t1 - t0)
        inf_times.append(t2 - t1)
    accuracy = (hits / len(images)).tolist()
    return {
        "model": str(graph),
        "num_images": len(images),
        "num_classes": num_classes,
        "image_size": list(size),
        "preprocessing_latency_us": latency_stats(pre_times),
        "inference_latency_us": latency_stats(inf_times),
        "top_k_accuracy": accuracy,
    }


def run(args: argparse.Namespace) -> int:
    result = evaluate(args, show=not args.json)
    failed = args.min_top1 is not None and result["top_k_accuracy"][0] < args.min_top1
    result["min_top1"] = args.min_top1
    result["failed"] = failed
    if args.json:
        print_json(result)
    else:
        pre, inf = result["preprocessing_latency_us"], result["inference_latency_us"]
        print(f"Num evaluation runs: {result['num_images']}")
        print(
            f"Preprocessing latency: avg={fmt_g(pre['avg'])}(us), std_dev={fmt_g(pre['std'])}(us)"
        )
        print(f"Inference latency: avg={fmt_g(inf['avg'])}(us), std_dev={fmt_g(inf['std'])}(us)")
        for k, acc in enumerate(result["top_k_accuracy"], start=1):
            print(f"Top-{k} Accuracy: {fmt_g(acc)}")
        if failed:
            print(
                f"top-1 accuracy {fmt_g(result['top_k_accuracy'][0])} is below "
                f"--min_top1 {fmt_g(args.min_top1)}"
            )
    return EXIT_FAILED if failed else EXIT_OK
