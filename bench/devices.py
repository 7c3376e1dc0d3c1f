"""Every device against the CPU device (gcc), row by row, in one run (a benchmark, not a test).

    python bench/devices.py                  # every device this host has but PYTHON, 3 rounds, medians
    python bench/devices.py --device CL      # one device against the CPU
    python bench/devices.py --quick          # small sizes: a smoke test

Rows: elementwise `relu(a*b+c)` and a full `sum` over 2^24 float32 elements, a row-wise `sum(axis=1)` of a
4096x4096 matrix, a 4096x4096 softmax, a 1024 matmul, and `exp` and `sin` over 2^22 elements. Each round times
numpy, waits 0.1 s (numpy's BLAS threads spin on the cores after a matmul: the CPU device timed right after
them took twice its time), then the CPU and the other device, which goes first in every other round (so noise
from the other processes on the machine hits both); each time is the median of its runs, each figure the
median over the rounds. `X/CPU` is the device's time over the CPU's
(below 1: the device is faster); `CPU thr.` is the device's throughput as a fraction of the CPU's; numpy's time
is given for scale. The first call of each row (compile) is not timed, and its result is checked against numpy.
bench/llvm.py and bench/cl.py run this for their device.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("ZEPTOGRAD_CACHE_DIR", tempfile.mkdtemp(prefix="zeptograd-bench-devices-"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

from zeptograd import Device, Tensor
from zeptograd.codegen import UnsupportedDType

Row = tuple[str, Callable[[str], Callable[[], Any]], Callable[[], Any]]


def median_time(fn: Callable[[], Any], runs: int) -> float:
    """The median wall time of `runs` calls of `fn`."""
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def rows(quick: bool) -> list[Row]:
    """(name, device -> timed function on that device's tensors, numpy's function) for each row."""
    rng = np.random.default_rng(0)
    n = 1 << (18 if quick else 24)
    a, b, c = (rng.standard_normal(n).astype(np.float32) for _ in range(3))
    side = 512 if quick else 4096
    s = rng.standard_normal((side, side)).astype(np.float32)
    m = 256 if quick else 1024
    ma, mb = rng.standard_normal((m, m)).astype(np.float32), rng.standard_normal((m, m)).astype(np.float32)
    u = rng.standard_normal(n >> 2).astype(np.float32)

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

    def exp(dev: str) -> Callable[[], Any]:
        (tu,) = on(dev, u)
        return lambda: tu.exp().realize()

    def sin(dev: str) -> Callable[[], Any]:
        (tu,) = on(dev, u * 3)
        return lambda: tu.sin().realize()

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
        (f"exp 2^{bits - 2}", exp, lambda: np.exp(u)),
        (f"sin 2^{bits - 2}", sin, lambda: np.sin(u * 3)),
    ]


def synchronized(device: str, fn: Callable[[], Any]) -> Callable[[], Any]:
    """`fn`, waiting for the device's queue where launches are asynchronous (CUDA, WEBGPU), so the time is the
    kernel's and not only its submission's."""
    dev = Device[device]
    if not hasattr(dev, "synchronize"):
        return fn

    def run() -> Any:
        out = fn()
        dev.synchronize()
        return out

    return run


def compare(device: str, quick: bool = False, rounds: int = 3) -> None:
    """Print each row's time on the CPU, on `device` and in numpy, and the ratios."""
    runs = 3 if quick else 5
    x = f"{device}/CPU"
    print(f"{'row':<22} {'CPU':>10} {device:>10} {'numpy':>10} {x:>9} {'CPU thr.':>8} {'CPU/np':>7} {'X/np':>7}")
    for name, make, np_fn in rows(quick):
        fns = {dev: synchronized(dev, make(dev)) for dev in ("CPU", device)}
        want = np.asarray(np_fn(), np.float64)
        try:
            fns[device]()
        except UnsupportedDType as e:  # a row the device refuses (sin on WEBGPU: 64-bit ints)
            print(f"{name:<22} {device}: {e}")
            continue
        for dev, fn in fns.items():
            got = fn().numpy()  # compiles; checked against numpy
            if not np.allclose(got, want, rtol=1e-3, atol=1e-3 * max(1.0, float(np.abs(want).max()))):
                print(f"  {dev} result differs from numpy on {name}")
        per: dict[str, list[float]] = {"CPU": [], device: [], "numpy": []}
        for i in range(rounds):
            per["numpy"].append(median_time(np_fn, runs))
            # numpy's BLAS threads spin on the cores for a while after a matmul: let them sleep before our runs
            time.sleep(0.1)
            # each device first in every other round: neither always runs on the cores the other warmed up
            for dev in list(fns) if i % 2 == 0 else list(fns)[::-1]:
                per[dev].append(median_time(fns[dev], runs))
        t = {k: statistics.median(v) for k, v in per.items()}
        ratio = statistics.median(d / cpu for d, cpu in zip(per[device], per["CPU"]))
        print(
            f"{name:<22} {t['CPU'] * 1e3:8.2f}ms {t[device] * 1e3:8.2f}ms {t['numpy'] * 1e3:8.2f}ms {ratio:9.2f} "
            f"{1 / ratio:8.2f} {t['CPU'] / t['numpy']:7.2f} {t[device] / t['numpy']:7.2f}"
        )


def main(argv: Sequence[str] | None = None, devices: Sequence[str] = ()) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--device", action="append", help="a device to compare with the CPU (repeatable)")
    args = parser.parse_args(argv)
    chosen = args.device or devices or [d for d in Device.get_available_devices() if d not in ("CPU", "PYTHON")]
    for device in chosen:
        print(f"\n{device} against the CPU device")
        compare(Device.canonicalize(device), args.quick, args.rounds)


if __name__ == "__main__":
    main()
