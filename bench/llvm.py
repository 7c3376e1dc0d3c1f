"""Should LLVM be the default CPU compiler? The LLVM device against the CPU device (gcc), in one run (a benchmark,
not a test).

    python bench/llvm.py            # compile times and kernel speed, 3 rounds, medians
    python bench/llvm.py --quick    # small sizes: a smoke test

1. compile  the same kernels compiled by each device's compiler, nothing cached: `cc` on the C source (a fresh
            ZEPTOGRAD_CACHE_DIR) against llvmlite on the LLVM IR (parse, O2, machine code), each timed alone,
            and the whole first call (codegen + compile + run) of a new expression on each device.
2. kernels  the rows of bench/devices.py (relu, sums, softmax, matmul, exp, sin) on CPU and on LLVM: each round times
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
from pathlib import Path
from typing import Any

os.environ["ZEPTOGRAD_CACHE_DIR"] = tempfile.mkdtemp(prefix="zeptograd-bench-llvm-")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import devices
import numpy as np

from zeptograd import Device, Tensor
from zeptograd.codegen import get_program
from zeptograd.engine.facts import device_facts
from zeptograd.schedule.kernelize import create_schedule


def kernel_asts(seed: int) -> list[Any]:
    """The kernel ASTs of a few expressions (elementwise chain, reduction, softmax, matmul) with fresh constants."""
    rng = np.random.default_rng(seed)
    x = Tensor(rng.standard_normal((256, 256)).astype(np.float32)).realize()
    k = float(rng.uniform(0.5, 2.0))
    outs = [((x * k + 1).maximum(0) * k).exp(), (x * k).sum(axis=1), (x * k).softmax(axis=1), (x * k) @ x]
    asts = []
    for out in outs:
        items, _ = create_schedule([out.uop], ["CPU"], device_facts)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", choices=["compile", "kernels"])
    args = parser.parse_args()
    if args.only != "kernels":
        bench_compile(args.rounds)
    if args.only != "compile":
        devices.compare("LLVM", args.quick, args.rounds)


if __name__ == "__main__":
    main()
