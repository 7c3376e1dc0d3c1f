"""Training-step speed of zeptograd against torch (a benchmark, not a test).

    python bench/train.py              # MLP 784-256-10, batch 128, plain SGD: steps per second
    python bench/train.py --quick      # a few steps: a smoke test

One step is what a training loop does: forward, cross-entropy loss, backward, SGD update of every parameter, and
reading the loss back (`loss.item()`). Both libraries start from the same weights and see the same batches
(random images and labels, fixed per step), so after the timed steps their losses must agree: the notes say ok
when the last losses match to 1e-4 (relative). zeptograd's first steps compile the kernels (the warm-up, untimed);
the kernel cache starts empty (a fresh ZEPTOGRAD_CACHE_DIR). torch runs with torch.set_num_threads(os.cpu_count()).
The figure is the median steps/s over windows of 10 steps. The TinyJit row runs the same step under TinyJit: its
first two steps run normally (the second is captured), the others replay the captured kernels.

zeptograd's line also gives "kernels only": the time its kernels ran in one step (`GlobalCounters.time_sum_s`,
the sum of the kernel launches, reset each step), the same median over windows. Wall time minus kernel time is
what the step spends in Python: building the graph, scheduling, and looking up compiled kernels.
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

from zeptograd import GlobalCounters, Tensor, TinyJit, nn  # noqa: E402
from zeptograd.nn import optim  # noqa: E402

IN, HIDDEN, OUT, BATCH, LR = 784, 256, 10, 128, 0.01


def batches(steps: int) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(0)
    return [
        (rng.random((BATCH, IN), dtype=np.float32), rng.integers(0, OUT, BATCH).astype(np.int32)) for _ in range(steps)
    ]


def run_zeptograd(
    data, warmup: int, jit: bool = False
) -> tuple[list[float], list[float], list[float], int, list[np.ndarray]]:
    Tensor.manual_seed(0)
    l1, l2 = nn.Linear(IN, HIDDEN), nn.Linear(HIDDEN, OUT)
    init = [p.numpy().copy() for p in (l1.weight, l1.bias, l2.weight, l2.bias)]
    opt = optim.SGD([l1.weight, l1.bias, l2.weight, l2.bias], lr=LR)

    def step(x: Tensor, y: Tensor) -> Tensor:
        loss = l2(l1(x).relu()).sparse_categorical_crossentropy(y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    train_step = TinyJit(step) if jit else step
    times, kernel_times, losses, kernels = [], [], [], 0
    for i, (x, y) in enumerate(data):
        start = time.perf_counter()
        GlobalCounters.reset()
        loss = train_step(Tensor(x), Tensor(y))
        losses.append(loss.item())
        kernels = GlobalCounters.kernel_count
        if i >= warmup:
            times.append(time.perf_counter() - start)
            kernel_times.append(GlobalCounters.time_sum_s)
    return times, kernel_times, losses, kernels, init


def run_torch(data, init, warmup: int) -> tuple[list[float], list[float]]:
    import torch

    torch.set_num_threads(os.cpu_count() or 1)
    l1, l2 = torch.nn.Linear(IN, HIDDEN), torch.nn.Linear(HIDDEN, OUT)
    with torch.no_grad():
        for p, v in zip((l1.weight, l1.bias, l2.weight, l2.bias), init):
            p.copy_(torch.from_numpy(v))
    opt = torch.optim.SGD([*l1.parameters(), *l2.parameters()], lr=LR)
    times, losses = [], []
    for i, (x, y) in enumerate(data):
        start = time.perf_counter()
        loss = torch.nn.functional.cross_entropy(l2(l1(torch.from_numpy(x)).relu()), torch.from_numpy(y).long())
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if i >= warmup:
            times.append(time.perf_counter() - start)
    return times, losses


def median_step(times: list[float]) -> float:
    """The median over windows of 10 steps of the mean time of a step in the window."""
    windows = [sum(times[i : i + 10]) / len(times[i : i + 10]) for i in range(0, len(times), 10)]
    return statistics.median(windows)


def steps_per_second(times: list[float]) -> float:
    return 1 / median_step(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--steps", type=int, default=60)
    args = parser.parse_args()
    warmup = 3
    steps = 6 if args.quick else args.steps
    data = batches(steps + warmup)
    rows = {}
    for name, jit in (("zeptograd", False), ("TinyJit", True)):
        times, kernel_times, losses, kernels, init = run_zeptograd(data, warmup, jit)
        rows[name] = (steps_per_second(times), 1e3 * median_step(kernel_times), losses, kernels)
    try:
        torch_times, torch_losses = run_torch(data, init, warmup)
    except ImportError:
        torch_times, torch_losses = [], []
    print(f"MLP {IN}-{HIDDEN}-{OUT}, batch {BATCH}, SGD: one training step (forward, backward, update, loss.item())")
    print(f"{'':12}{'steps/s':>10}{'ms/step':>10}{'kernels only':>14}")
    for name, (sps, kernel_ms, _, kernels) in rows.items():
        print(f"{name:12}{sps:10.1f}{1e3 / sps:10.2f}{kernel_ms:11.2f} ms   {kernels} kernels a step")
    if torch_times:
        th = steps_per_second(torch_times)
        print(f"{'torch':12}{th:10.1f}{1e3 / th:10.2f}")
        for name, (sps, _, losses, _) in rows.items():
            match = np.allclose(losses, torch_losses, rtol=1e-4)
            ok = "ok" if match else "NO"
            print(f"{name} against torch eager: {sps / th:.2f}x the steps/s   losses match torch: {ok}")
            if not match:
                print(name, losses[-3:], "torch", torch_losses[-3:])


if __name__ == "__main__":
    try:
        main()
    finally:
        shutil.rmtree(_cache, ignore_errors=True)
