"""Compare offload's CPU kernels with LiteRT node by node on a real model.

LiteRT runs the whole model once with every intermediate tensor preserved; then each node's
kernel is fed LiteRT's own inputs for that node and its outputs are compared with LiteRT's.
This localises a disagreement to one node instead of one model.

    python scripts/nodewise.py MODEL.tflite [--seed N] [--only OP[,OP]]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
from ai_edge_litert.interpreter import Interpreter as LiteRT
from ai_edge_litert.interpreter import OpResolverType

from offload import load_model
from offload.ops import kernel_class


def random_input(detail: dict, rng: np.random.Generator) -> np.ndarray:
    shape, dtype = detail["shape"], detail["dtype"]
    if np.issubdtype(dtype, np.floating):
        return rng.standard_normal(shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(max(info.min, -100), min(info.max, 100), size=shape, endpoint=True).astype(
        dtype
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", default="")
    args = parser.parse_args(argv)
    only = {s.strip().upper() for s in args.only.split(",") if s.strip()}

    model = load_model(args.model)
    sg = model.main
    ref = LiteRT(
        model_path=args.model,
        experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
        experimental_preserve_all_tensors=True,
    )
    ref.allocate_tensors()
    rng = np.random.default_rng(args.seed)
    for detail in ref.get_input_details():
        ref.set_tensor(detail["index"], random_input(detail, rng))
    ref.invoke()

    failures = 0
    for node in sg.nodes:
        if only and node.op not in only:
            continue
        try:
            kernel = kernel_class(node)(node, sg)
            ins = []
            for i in node.inputs:
                if i < 0:
                    ins.append(None)
                elif sg.tensors[i].is_constant and sg.tensors[i].sparsity is None:
                    ins.append(sg.tensors[i].constant_value())
                else:
                    ins.append(ref.get_tensor(i))
            result = kernel.run(*ins)
            outs = [result] if isinstance(result, np.ndarray) else list(result)
        except Exception as exc:  # report and go on: the point is to see every node
            print(f"FAIL {node.describe()}: {type(exc).__name__}: {exc}")
            failures += 1
            continue
        for pos, t in enumerate(node.outputs):
            want = ref.get_tensor(t)
            got = np.asarray(outs[pos])
            if got.shape != want.shape or got.dtype != want.dtype:
                print(
                    f"FAIL {node.describe()} out {pos}: shape/dtype {got.shape} {got.dtype}, "
                    f"LiteRT {want.shape} {want.dtype}"
                )
                failures += 1
                continue
            if np.issubdtype(want.dtype, np.floating):
                denom = max(float(np.max(np.abs(want))), 1e-30) if want.size else 1.0
                err = (
                    float(np.max(np.abs(got.astype(np.float64) - want))) / denom
                    if want.size
                    else 0.0
                )
                ok = err <= 1e-5
                what = f"rel err {err:.2e}"
            else:
                diff = np.abs(got.astype(np.int64) - want.astype(np.int64))
                ok = diff.size == 0 or diff.max() <= 1
                what = f"max diff {diff.max() if diff.size else 0}, exact {np.mean(diff == 0):.4f}"
            if not ok:
                failures += 1
            print(f"{'ok  ' if ok else 'FAIL'} {node.describe()} out {pos}: {what}")
    print(f"{failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
