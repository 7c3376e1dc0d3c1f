"""The CL device (OpenCL through PoCL on the host's CPU) against the CPU device (gcc), in one run (a benchmark,
not a test): the rows of bench/devices.py (elementwise, full and row-wise sums, softmax, matmul, exp, sin).

    python bench/cl.py              # full sizes, 3 rounds, medians
    python bench/cl.py --quick      # small sizes: a smoke test

`CL/CPU` is CL time / CPU time (below 1: CL is faster); `CPU thr.` is CL's throughput as a fraction of the CPU
device's (at least 0.5 on the elementwise and reduction rows is the bar CL is held to).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import devices

if __name__ == "__main__":
    devices.main(devices=["CL"])
