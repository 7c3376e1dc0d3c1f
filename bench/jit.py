"""TinyJit replay cost (a benchmark, not a test).

    python bench/jit.py            # Python time per kernel launched by a replay
    python bench/jit.py --quick    # fewer calls: a smoke test

Two functions launch 1 and K kernels on 4-element tensors (each `.contiguous()` ends a kernel), so the kernels do
almost nothing and a replay's time is what it costs in Python. The difference between the two, over K - 1, is the
cost of one more kernel in a replay; what is left of the short one is the fixed cost of a call (checking the
input, a fresh output buffer and Tensor). For scale, the same run also gives the
eager path's time per kernel (graph, schedule, lookups), the time of one captured launch called directly (the
runner's own cost: what a replay cannot go below), and numpy's time for one `x + 1` on the same array.
Each figure is the median of 3 repeats.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np

_cache = tempfile.mkdtemp(prefix="zeptograd-bench-")
os.environ["ZEPTOGRAD_CACHE_DIR"] = _cache
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from zeptograd import GlobalCounters, Tensor, TinyJit  # noqa: E402

K = 20  # kernels per call of the long chain


def chain(k: int):
    def fn(x: Tensor) -> Tensor:
        for _ in range(k):
            x = (x + 1).contiguous()
        return x

    return fn


def seconds_per_call(fn, calls: int) -> float:
    """Median over 3 repeats of the seconds per call of `calls` calls of fn (after 3 calls of warm-up: compile,
    and capture for the JIT)."""
    x = Tensor(np.zeros(4, np.float32)).realize()
    for _ in range(3):
        fn(x)
    runs = []
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(calls):
            fn(x)
        runs.append((time.perf_counter() - start) / calls)
    return statistics.median(runs)


def median_loop(fn, n: int) -> float:
    runs = []
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        runs.append((time.perf_counter() - start) / n)
    return statistics.median(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    calls = 20 if args.quick else 1000
    long_jit, short_jit = TinyJit(chain(K)), TinyJit(chain(1))
    long_call = seconds_per_call(long_jit, calls)
    short_call = seconds_per_call(short_jit, calls)
    GlobalCounters.reset()
    long_jit(Tensor(np.zeros(4, np.float32)).realize())
    assert GlobalCounters.kernel_count == K, GlobalCounters.kernel_count
    per_kernel = (long_call - short_call) / (K - 1)  # what one more kernel adds to a replay
    per_call = short_call - per_kernel  # what a replay costs besides its kernels
    assert long_jit._capture is not None
    run, bufs = long_jit._capture.steps[0]
    launch = median_loop(lambda: run(bufs), calls * K)
    eager = seconds_per_call(lambda x: chain(K)(x).realize(), max(calls // 20, 5)) / K
    a = np.zeros(4, np.float32)
    numpy_op = median_loop(lambda: a + 1, calls * K)
    print(f"TinyJit replay of 1 and of {K} tiny kernels, median of 3 repeats (numpy's x + 1: {numpy_op * 1e6:.2f} us)")
    rows = [
        ("per kernel", per_kernel, "numpy's x + 1"),
        ("  the launch alone", launch, "(the compiled runner called directly)"),
        ("per call, besides", per_call, "(inputs, a fresh output)"),
        ("eager, per kernel", eager, f"(replay {eager / per_kernel:.0f}x faster)"),
    ]
    for name, seconds, note in rows:
        print(f"{name:22}{seconds * 1e6:8.2f} us   {seconds / numpy_op:5.1f}x  {note}")


if __name__ == "__main__":
    try:
        main()
    finally:
        shutil.rmtree(_cache, ignore_errors=True)
