"""Should LLVM be the default CPU compiler? The LLVM device against the CPU device (gcc), in one run (a benchmark,
not a test).

    python bench/llvm.py            # compile times and kernel speed, 3 rounds, medians
    python bench/llvm.py --quick    # small sizes: a smoke test

1. compile  the same kernels compiled by each device's compiler, nothing cached: `cc` on the C source (a fresh
            ZEPTOGRAD_CACHE_DIR) against llvmlite on the LLVM IR (parse, O2, machine code), each timed alone,
            and the whole first call (codegen + compile + run) of a new expression on each device.
2. kernels  the rows of bench/ops.py (relu, sum, softmax, matmul, exp, sin) on CPU and on LLVM: each round times
            both devices alternately (so noise from the other processes on the machine hits both), the ratio is
            LLVM time / CPU time (below 1: LLVM is faster), and numpy's time is given for scale.

Every figure is the median over the rounds (3 unless --rounds), each round the median of its runs.
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

os.environ["ZEPTOGRAD_CACHE_DIR"] = tempfile.mkdtemp(prefix="zeptograd-bench-llvm-")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

from zeptograd import Device, Tensor
from zeptograd.codegen import get_program
from zeptograd.schedule.kernelize import create_schedule


def median_time(fn: Callable[[], Any], runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def kernel_asts(seed: int) -> list[Any]:
    """The kernel ASTs of a few expressions (elementwise chain, reduction, softmax, matmul) with fresh constants."""
    rng = np.random.default_rng(seed)
    x = Tensor(rng.standard_normal((256, 256)).astype(np.float32)).realize()
    k = float(rng.uniform(0.5, 2.0))
    outs = [((x * k + 1).maximum(0) * k).exp(), (x * k).sum(axis=1), (x * k).softmax(axis=1), (x * k) @ x]
    asts = []
    for out in outs:
        items, _ = create_schedule([out.uop], ["CPU"])
        asts += [item.ast for item in items if item.ast is not None]
    return asts


def bench_compile(rounds: int) -> None:
    cpu, llvm = Device["CPU"], Device["LLVM"]
    gcc_t, llvm_t, cold = [], [], {"CPU": [], "LLVM": []}
    for r in range(rounds):
        asts = kernel_asts(r)
        for ast in asts:
            c_src = get_program(ast, cpu.renderer).src
            ll = get_program(ast, llvm.renderer)
            t0 = time.perf_counter()
            cpu.compiler.library(c_src)
            gcc_t.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            llvm.compiler.function(ll.src, ll.name)
            llvm_t.append(time.perf_counter() - t0)
        for dev in ("CPU", "LLVM"):
            x = Tensor(np.ones(1000 + r, np.float32), device=dev).realize()
            t0 = time.perf_counter()
            ((x * (1.5 + r) + 0.25 * r).maximum(0) * 3.0).realize()
            cold[dev].append(time.perf_counter() - t0)
    print(
        f"compile, {len(gcc_t)} kernels: cc {statistics.median(gcc_t) * 1e3:.1f} ms, llvmlite "
        f"{statistics.median(llvm_t) * 1e3:.1f} ms (median per kernel; ratio llvm/cc "
        f"{statistics.median(llvm_t) / statistics.median(gcc_t):.2f})"
    )
    print(
        f"first call of a new expression: CPU {statistics.median(cold['CPU']) * 1e3:.1f} ms, "
        f"LLVM {statistics.median(cold['LLVM']) * 1e3:.1f} ms"
    )


def rows(quick: bool) -> list[tuple[str, Callable[[str], Callable[[], Any]], Callable[[], Any]]]:
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

    return [
        (f"relu(a*b+c) 2^{n.bit_length() - 1}", relu, lambda: np.maximum(a * b + c, 0)),
        (f"sum 2^{n.bit_length() - 1}", total, lambda: a.sum()),
        (f"softmax {side}x{side}", softmax, np_softmax),
        (f"matmul {m}", matmul, lambda: ma @ mb),
        (f"exp 2^{n.bit_length() - 3}", exp, lambda: np.exp(u)),
        (f"sin 2^{n.bit_length() - 3}", sin, lambda: np.sin(u * 3)),
    ]


def bench_kernels(quick: bool, rounds: int) -> None:
    runs = 3 if quick else 5
    print(f"{'row':<22} {'CPU':>10} {'LLVM':>10} {'numpy':>10} {'LLVM/CPU':>9} {'CPU/np':>7} {'LLVM/np':>8}")
    for name, make, np_fn in rows(quick):
        fns = {dev: make(dev) for dev in ("CPU", "LLVM")}
        for fn in fns.values():
            fn()  # compile
        per: dict[str, list[float]] = {"CPU": [], "LLVM": [], "numpy": []}
        for _ in range(rounds):
            for dev, fn in fns.items():
                per[dev].append(median_time(fn, runs))
            per["numpy"].append(median_time(np_fn, runs))
        t = {k: statistics.median(v) for k, v in per.items()}
        ratio = statistics.median(x / y for x, y in zip(per["LLVM"], per["CPU"]))
        print(
            f"{name:<22} {t['CPU'] * 1e3:8.2f}ms {t['LLVM'] * 1e3:8.2f}ms {t['numpy'] * 1e3:8.2f}ms "
            f"{ratio:9.2f} {t['CPU'] / t['numpy']:7.2f} {t['LLVM'] / t['numpy']:8.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", choices=["compile", "kernels"])
    args = parser.parse_args()
    if args.only != "kernels":
        bench_compile(args.rounds)
    if args.only != "compile":
        bench_kernels(args.quick, args.rounds)


if __name__ == "__main__":
    main()
