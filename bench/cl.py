"""The CL device (OpenCL through PoCL on this machine's CPU) against the CPU device (gcc), in one run (a benchmark,
not a test).

    python bench/cl.py              # full sizes, 3 rounds, medians
    python bench/cl.py --quick      # small sizes: a smoke test

Rows: elementwise `relu(a*b+c)` and a full `sum` over 2^24 float32 elements, a row-wise `sum(axis=1)` of a
4096x4096 matrix, a 4096x4096 softmax, and a 1024 matmul. Each round times CPU and CL alternately (so noise
from the other processes on the machine hits both); each time is the median of its runs, each figure the median
over the rounds. `CL/CPU` is CL time / CPU time (below 1: CL is faster); `CPU thr.` is CL's throughput as a
fraction of the CPU device's (CPU time / CL time: the issue's target is at least 0.5 for the elementwise and
reduction rows); numpy's time is given for scale. The first call of each row (compile) is not timed, and its
result is checked against numpy.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ["ZEPTOGRAD_CACHE_DIR"] = tempfile.mkdtemp(prefix="zeptograd-bench-cl-")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

from zeptograd import Tensor

DEVICES = ("CPU", "CL")


def median_time(fn: Callable[[], Any], runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


Row = tuple[str, Callable[[str], Callable[[], Any]], Callable[[], Any]]


def rows(quick: bool) -> list[Row]:
    rng = np.random.default_rng(0)
    n = 1 << (18 if quick else 24)
    a, b, c = (rng.standard_normal(n).astype(np.float32) for _ in range(3))
    side = 512 if quick else 4096
    s = rng.standard_normal((side, side)).astype(np.float32)
    m = 256 if quick else 1024
    ma, mb = rng.standard_normal((m, m)).astype(np.float32), rng.standard_normal((m, m)).astype(np.float32)

    def on(dev: str, *arrays: np.ndarray) -> list[Tensor]:
        return [Tensor(x, device=dev).realize() for x in arrays]

    def relu(dev: str) -> Callable[[], Any]:
        ta, tb, tc = on(dev, a, b, c)
        return lambda: (ta * tb + tc).maximum(0).realize()

    def total(dev: str) -> Callable[[], Any]:
        (ta,) = on(dev, a)
        return lambda: ta.sum().realize()

    def rowsum(dev: str) -> Callable[[], Any]:
        (ts,) = on(dev, s)
        return lambda: ts.sum(axis=1).realize()

    def softmax(dev: str) -> Callable[[], Any]:
        (ts,) = on(dev, s)
        return lambda: ts.softmax(axis=1).realize()

    def matmul(dev: str) -> Callable[[], Any]:
        ta, tb = on(dev, ma, mb)
        return lambda: (ta @ tb).realize()

    def np_softmax() -> Any:
        e = np.exp(s - s.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    bits = n.bit_length() - 1
    return [
        (f"relu(a*b+c) 2^{bits}", relu, lambda: np.maximum(a * b + c, 0)),
        (f"sum 2^{bits}", total, lambda: a.sum()),
        (f"sum(axis=1) {side}^2", rowsum, lambda: s.sum(axis=1)),
        (f"softmax {side}x{side}", softmax, np_softmax),
        (f"matmul {m}", matmul, lambda: ma @ mb),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    runs = 3 if args.quick else 5
    print(f"{'row':<22} {'CPU':>10} {'CL':>10} {'numpy':>10} {'CL/CPU':>7} {'CPU thr.':>8} {'CPU/np':>7} {'CL/np':>7}")
    for name, make, np_fn in rows(args.quick):
        fns = {dev: make(dev) for dev in DEVICES}
        want = np.asarray(np_fn(), np.float64)
        for dev, fn in fns.items():
            got = fn().numpy()  # compiles; checked against numpy
            if not np.allclose(got, want, rtol=1e-3, atol=1e-3 * max(1.0, float(np.abs(want).max()))):
                print(f"  {dev} result differs from numpy on {name}")
        per: dict[str, list[float]] = {"CPU": [], "CL": [], "numpy": []}
        for _ in range(args.rounds):
            for dev, fn in fns.items():
                per[dev].append(median_time(fn, runs))
            per["numpy"].append(median_time(np_fn, runs))
        t = {k: statistics.median(v) for k, v in per.items()}
        ratio = statistics.median(x / y for x, y in zip(per["CL"], per["CPU"]))
        print(
            f"{name:<22} {t['CPU'] * 1e3:8.2f}ms {t['CL'] * 1e3:8.2f}ms {t['numpy'] * 1e3:8.2f}ms {ratio:7.2f} "
            f"{1 / ratio:8.2f} {t['CPU'] / t['numpy']:7.2f} {t['CL'] / t['numpy']:7.2f}"
        )


if __name__ == "__main__":
    main()
