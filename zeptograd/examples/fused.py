"""An example: one fused kernel, the C it compiles to, and its speed next to numpy's.

    python -m zeptograd.examples.fused

`relu(a * b + c)` over 4M floats is three ops and one kernel: zeptograd reads a, b and c once and writes
the result once, where numpy makes a temporary array for each op.
"""

from __future__ import annotations

import statistics
import time

import numpy as np

from zeptograd import Context, GlobalCounters, Tensor

N = 1 << 22


def median_time(fn, repeats: int = 15) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    rng = np.random.default_rng(0)
    a_np, b_np, c_np = (rng.standard_normal(N, dtype=np.float32) for _ in range(3))
    a, b, c = (Tensor(x).realize() for x in (a_np, b_np, c_np))

    print(f"relu(a * b + c) over {N:,} float32 values\n")
    print("the kernel zeptograd generates (DEBUG=4 prints it, DEBUG=2 the timing line):\n")
    GlobalCounters.reset()
    with Context(DEBUG=4):
        out = (a * b + c).relu().realize()
    print(f"kernels launched: {GlobalCounters.kernel_count}")

    expected = np.maximum(a_np * b_np + c_np, 0)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-6, atol=1e-6)
    print("matches numpy: yes\n")

    ours = median_time(lambda: (a * b + c).relu().realize())
    theirs = median_time(lambda: np.maximum(a_np * b_np + c_np, 0))
    print(f"zeptograd  {ours * 1e3:8.2f} ms")
    print(f"numpy      {theirs * 1e3:8.2f} ms")
    print(f"zeptograd is {theirs / ours:.2f}x numpy's speed")


if __name__ == "__main__":
    main()
