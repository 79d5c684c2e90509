"""The machine's peak, measured: float32 FMA throughput and memory bandwidth.

Run as a script (``python -P _peak_probe.py THREADS SIZE COPY_BYTES SECONDS``) by
offload._machine_peak, in a process of its own whose BLAS thread variables say THREADS:
numpy's BLAS reads its thread count once, at import, so another count cannot be measured in
the process that asked. Imports numpy and the standard library only, so that the probe does
not pay for loading offload. Prints one JSON object: ``gflops``, ``gbps``, ``seconds``.

- FMA throughput: the best time of a float32 ``SIZE x SIZE`` matmul (compute-bound: 2 * SIZE**3
  FLOPs over 3 * SIZE**2 values), repeated for up to half of SECONDS.
- Bandwidth: the best time of ``np.copyto`` between two arrays of COPY_BYTES each (64 MiB by
  default: past the share of last-level cache a core gets on the machines measured; a copy of
  32 MiB ran from cache here), split across THREADS threads (numpy releases the GIL while it
  copies), counting bytes read plus bytes written.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable

import numpy as np

__all__ = ["measure"]


def _best(run: Callable[[], object], seconds: float, at_least: int = 3, at_most: int = 50) -> float:
    """The shortest of repeated runs: at least ``at_least``, then until ``seconds`` passed."""
    best = float("inf")
    start = time.perf_counter()
    for k in range(at_most):
        t0 = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - t0)
        if k + 1 >= at_least and time.perf_counter() - start >= seconds:
            break
    return max(best, 1e-9)


def measure(threads: int, size: int, copy_bytes: int, seconds: float) -> dict[str, float]:
    """GFLOP/s of a float32 matmul and GB/s of a copy, measured here and now."""
    started = time.perf_counter()
    rng = np.random.default_rng(0)
    a = rng.standard_normal((size, size), dtype=np.float32)
    b = rng.standard_normal((size, size), dtype=np.float32)
    out = np.empty((size, size), np.float32)
    np.matmul(a, b, out=out)  # the first call sets the BLAS threads up
    matmul_s = _best(lambda: np.matmul(a, b, out=out), seconds / 2)

    count = max(copy_bytes // 4, threads)
    src = np.ones(count, np.float32)
    dst = np.zeros(count, np.float32)  # written now, so no page is faulted in while timed
    bounds = [count * k // threads for k in range(threads + 1)]
    pieces = [(dst[lo:hi], src[lo:hi]) for lo, hi in zip(bounds, bounds[1:])]

    def copy() -> None:
        if threads == 1:
            np.copyto(dst, src)
            return
        workers = [threading.Thread(target=np.copyto, args=piece) for piece in pieces]
        for w in workers:
            w.start()
        for w in workers:
            w.join()

    copy_s = _best(copy, seconds / 2)
    return {
        "gflops": 2.0 * size**3 / matmul_s / 1e9,
        "gbps": 2.0 * src.nbytes / copy_s / 1e9,
        "seconds": time.perf_counter() - started,
    }


def main(argv: list[str]) -> int:
    threads, size, copy_bytes = (int(a) for a in argv[:3])
    print(json.dumps(measure(threads, size, copy_bytes, float(argv[3]))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
