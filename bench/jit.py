"""TinyJit replay cost (a benchmark, not a test).

    python bench/jit.py            # Python time per kernel launched by a replay
    python bench/jit.py --quick    # fewer calls: a smoke test

The function launches K kernels on 4-element tensors (each `.contiguous()` ends a kernel), so the kernels do
almost nothing and a replay's time per kernel is what the replay costs in Python: checking the input, giving the
output a fresh buffer, and calling each compiled kernel through ctypes. For scale, the same run also gives the
eager path's time per kernel (graph, schedule, lookups) and numpy's time for one `x + 1` on the same array.
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

K = 20  # kernels per call


def chain(x: Tensor) -> Tensor:
    for _ in range(K):
        x = (x + 1).contiguous()
    return x


def per_kernel(fn, calls: int) -> float:
    """Median over 3 repeats of the seconds per kernel of `calls` calls of fn."""
    x = Tensor(np.zeros(4, np.float32)).realize()
    for _ in range(3):
        fn(x)  # warm-up: compile, and capture for the JIT
    runs = []
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(calls):
            fn(x)
        runs.append((time.perf_counter() - start) / (calls * K))
    return statistics.median(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    calls = 20 if args.quick else 500
    jit = TinyJit(chain)
    replay = per_kernel(jit, calls)
    GlobalCounters.reset()
    jit(Tensor(np.zeros(4, np.float32)).realize())
    assert GlobalCounters.kernel_count == K, GlobalCounters.kernel_count
    eager = per_kernel(lambda x: chain(x).realize(), max(calls // 10, 5))
    a = np.zeros(4, np.float32)
    runs = []
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(calls * K):
            a + 1
        runs.append((time.perf_counter() - start) / (calls * K))
    numpy_op = statistics.median(runs)
    print(f"{K} tiny kernels a call, median of 3 repeats")
    print(f"{'TinyJit replay':18}{replay * 1e6:8.2f} us a kernel   ({replay / numpy_op:.1f}x numpy's x + 1)")
    print(f"{'eager realize':18}{eager * 1e6:8.2f} us a kernel   (replay is {eager / replay:.0f}x faster)")
    print(f"{'numpy x + 1':18}{numpy_op * 1e6:8.2f} us")


if __name__ == "__main__":
    try:
        main()
    finally:
        shutil.rmtree(_cache, ignore_errors=True)
