"""Tensor-op speed of zeptograd against numpy and torch (a benchmark, not a test).

    python bench/ops.py                 # everything, at full size (a few minutes on 2 cores)
    python bench/ops.py --quick         # small sizes and short budgets: a smoke test in seconds
    python bench/ops.py --only matmul   # some benchmarks, comma-separated (relu, sum, softmax, matmul, conv2d, pool,
                                        # unary, overhead, setitem, gather, select, scatter, compile)
    python bench/ops.py --repeats 5     # a fixed number of timed runs instead of a time budget
    DEVICE=LLVM python bench/ops.py     # zeptograd's rows on another device (LLVM, CL, WEBGPU, CUDA, ...);
                                        # bench/devices.py puts a device next to the CPU in one table

Benchmarks (float32 throughout; all three libraries get the same inputs):

1. relu    fused `relu(a*b+c)` over 2^24 elements (zeptograd: `(a*b+c).maximum(0)`, one kernel). Every run
           makes a new output tensor (64 MiB), as numpy and torch do: the previous run's is freed, so this row
           also measures the caching allocator (a fresh 64 MiB buffer costs more in page faults than the kernel).
2. sum     full reduction of 2^24 elements.
3. softmax row softmax of a 4096x4096 matrix. zeptograd: `Tensor.softmax` (max, exp of x-max, sum, divide);
           numpy: the same with `np.exp`; torch: `torch.softmax`.
4. matmul  square `a @ b` for n = 256, 512, 1024, 2048; the notes give GFLOP/s (2*n^3 flops a run).
5. conv2d  input (8, 64, 56, 56), 64 filters of 3x3, padding 1, stride 1, no bias (a ResNet layer). zeptograd:
           `Tensor.conv2d`; torch: `torch.nn.functional.conv2d`; numpy: im2col, the 3x3 windows of the padded
           input as a strided view (`sliding_window_view`) contracted with the filters by `np.tensordot` (one
           BLAS matmul of (8*56*56, 64*9) by (64*9, 64)), then made contiguous in NCHW. Notes give GFLOP/s
           (2 * N * Cout * H * W * Cin * 9 flops a run). A second row runs zeptograd's convolution with `WINO=1`
           (Winograd F(4x4, 3x3)) against the same numpy and torch times.
   pool    max_pool2d of a (8, 64, 112, 112) input (a ResNet stem's size): 2x2 windows of stride 2, and 3x3 of
           stride 2 with padding 1; torch: `torch.nn.functional.max_pool2d`; numpy: the maximum over the
           windows of a strided view (`sliding_window_view`, the padded input for the second).
6. unary   exp, sin and tanh (one row each) over 2^22 elements; inputs standard normal (exp), times 3 (sin),
           times 2 (tanh).
7. overhead per-op overhead: `x = (x + 1).realize()` on a (4,) tensor, many steps in a row; the time is per
           op (numpy and torch: `x = x + 1`). A second row runs the same steps while 1000 other realized
           tensors are alive (as a model's parameters and optimizer state are).
8. setitem a write through a view, `x[1::2, ::3] += 1`, in place on a realized 4096x4096 matrix (one element
           in six). All three libraries touch only the view's elements (zeptograd: one kernel over the view,
           storing through its index arithmetic).
   gather  a read through an index tensor, `x[idx]`: 1000 random rows of a (65536, 64) table (an embedding
           lookup's shape; numpy and torch: the same indexing).
   select  a read through a bool mask, `x[x > 0]` on 2^20 floats (about half of them true; the output's length
           is data: zeptograd realizes the mask's count, then scatters each true element to its running count).
   scatter `scatter_reduce(0, idx, src, "amax")`: 2^20 floats sent to 2^14 random positions of a vector (a graph
           network's max aggregation; numpy: `np.maximum.at` on a copy).
9. compile first-call time of kernels no cache has seen (a fresh ZEPTOGRAD_CACHE_DIR, and a different
           expression each trial): build, schedule, generate code, compile and run. The notes give the time of
           the same expression's second call (cache hit), so cold - warm is about the compile cost, and the
           time of the last expression with new constants (the first of them compiles once more: then the
           kernel reads its constants from a buffer). zeptograd only.

How zeptograd is timed: inputs are realized before timing; each timed run builds the lazy expression and calls
`.realize()` (kernels run synchronously on the CPU); one untimed warm-up run comes first (compiles). numpy and
torch are timed the same way (one warm-up, then their own runs). Every time is the median over N runs; N is
chosen so that each library spends about 2 s (--quick: 0.2 s) per row on timed runs, at least 3 (1 when a single
run takes over 5 s) and at most 50, unless `--repeats` fixes it. The libraries take turns: a row's timed runs
are split into 5 rounds, and in each round every library gets its share, so that all three see the same phases
of a shared machine (this one's speed drifts by tens of percent within seconds: the same convolution kernel took
8 and 15 ms a minute apart). Each turn starts with a 0.3 s pause (torch's OpenMP threads and the BLAS threads
spin for a while after a library's last op, and would share the cores with the next turn) and one untimed run
(it wakes the library's threads and warms the caches).
The zeptograd warm-up results are checked against numpy, computed in float64; a mismatch shows in the notes.

Columns of the final table:

    benchmark   what ran, at what size
    zeptograd   median time of one run (overhead: of one op), with a unit (us, ms, s)
    numpy       the same for numpy
    torch       the same for torch (torch.set_num_threads(os.cpu_count())); "-" when torch is not importable
    zg/np       zeptograd time / numpy time: below 1 zeptograd is faster, above 1 it is slower
    zg/torch    zeptograd time / torch time
    zg peak     the most device memory one zeptograd run held beyond what was held when it started (so: its
                output and its intermediates, not the inputs), the largest over the row's runs: from
                `GlobalCounters.mem_peak` after a `GlobalCounters.reset()` before each run. "-" for compile
    notes       correctness check (ok, or the error), GFLOP/s for matmul, the warm time for compile, and NOISY
                when other processes kept at least a quarter of a cpu busy during the row (from /proc/stat):
                multithreaded code (BLAS, torch) slows down badly when it has to share the cores

The script imports zeptograd from the checkout it lives in (its parent directory goes first on sys.path), and
before that sets ZEPTOGRAD_CACHE_DIR to a fresh temporary directory (removed at exit), so no kernel comes from an
earlier run's disk cache.
"""

from __future__ import annotations

import argparse
import atexit
import gc
import math
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

# benchmark the checkout this script lives in, not whatever `zeptograd` an install points at
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
_CACHE_DIR = tempfile.mkdtemp(prefix="zeptograd-bench-cache-")
os.environ["ZEPTOGRAD_CACHE_DIR"] = _CACHE_DIR
atexit.register(shutil.rmtree, _CACHE_DIR, ignore_errors=True)

from zeptograd import Context, Device, GlobalCounters, Tensor  # noqa: E402  (after ZEPTOGRAD_CACHE_DIR is set)

try:
    import torch
except ImportError:
    torch = None

LIBS = ("zeptograd", "numpy", "torch")
BENCHMARKS = (
    "relu",
    "sum",
    "softmax",
    "matmul",
    "conv2d",
    "pool",
    "unary",
    "overhead",
    "setitem",
    "gather",
    "select",
    "scatter",
    "compile",
)
SLOW_RUN_S = 5.0  # a single run slower than this is timed once (after the warm-up), not at least 3 times
ROUNDS = 5  # the timed runs of a row, in rounds that take turns between the libraries
# a pause before each library's turn: torch's OpenMP and numpy's BLAS threads spin for a while after their last
# op, and a turn that starts meanwhile shares the cores with them (exp on 256K: 0.24 ms alone, 3.7 ms right after
# torch)
SETTLE_S = 0.3
BUSY_WARN_CPUS = 0.25  # a row during which other processes kept this many cpus busy is marked NOISY
MIN_WIDTHS = (38, 10, 10, 10, 7, 8, 9)  # table columns before the notes, so progress lines line up with the table


@dataclass
class Config:
    quick: bool
    repeats: int | None  # fixed number of timed runs; None: as many as fit in budget_s (at least 3)
    budget_s: float  # time each library may spend on the timed runs of one row
    max_runs: int
    elementwise_n: int
    softmax_n: int
    matmul_sizes: tuple[int, ...]
    conv: tuple[int, int, int, int, int]  # batch, input channels, height, width, filters (3x3, padding 1)
    pool: tuple[int, int, int, int]  # batch, channels, height, width of the max_pool2d input
    unary_n: int
    overhead_steps: int
    compile_trials: int


@dataclass
class Row:
    name: str
    times: dict[str, float | None] = field(default_factory=dict)  # median seconds; None: failed or not run
    notes: list[str] = field(default_factory=list)
    peak: int | None = None  # bytes: the most one zeptograd run held beyond what was held when it started


def make_config(quick: bool, repeats: int | None) -> Config:
    if quick:
        conv, pool = (2, 8, 14, 14, 8), (2, 8, 28, 28)
        return Config(True, repeats, 0.2, 10, 1 << 20, 512, (64, 128, 256), conv, pool, 1 << 18, 100, 2)
    conv, pool = (8, 64, 56, 56, 64), (8, 64, 112, 112)
    return Config(False, repeats, 2.0, 50, 1 << 24, 4096, (256, 512, 1024, 2048), conv, pool, 1 << 22, 1000, 5)


def _runs_per_round(first: float, cfg: Config) -> list[int]:
    """How many timed runs each of the ROUNDS rounds gets, after a first timed run that took `first` seconds."""
    if cfg.repeats is not None:
        total = cfg.repeats
    elif first > SLOW_RUN_S:
        total = 1
    else:
        total = max(3, min(cfg.max_runs, int(cfg.budget_s / max(first, 1e-9))))
    total = max(total - 1, 0)  # the first timed run counts
    return [total // ROUNDS + (r < total % ROUNDS) for r in range(ROUNDS)]


def run_row(
    row: Row, fns: dict[str, Callable[[], Any]], cfg: Config, peak_rows: dict[str, Row] | None = None
) -> dict[str, Any]:
    """Time each function of `fns` (keyed by library) into `row.times`: one untimed warm-up call and one timed call
    each, then ROUNDS rounds in which each function in turn gets its share of its runs, so that every library sees
    the same phases of a shared machine (whose speed drifts by tens of percent within seconds). Keys that start
    with "zeptograd" also record their peak memory, in `row` or in `peak_rows[key]`. A function that raises is
    reported in the notes and dropped; the others go on. Returns the warm-up results."""
    peak_rows = peak_rows or {}
    live = {
        key: with_peak(peak_rows.get(key, row), fn) if key.startswith("zeptograd") else fn for key, fn in fns.items()
    }
    samples: dict[str, list[float]] = {key: [] for key in fns}
    warm: dict[str, Any] = dict.fromkeys(fns)

    def call(key: str) -> tuple[float, Any] | None:
        """(seconds, result) of one call of `key`; None when it raised (the key is dropped)."""
        try:
            t0 = time.perf_counter()
            out = live[key]()
            return time.perf_counter() - t0, out
        except Exception as e:
            del live[key]
            row.notes.append(f"{key} failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:100])
            print(f"--- {key} failed in {row.name!r}:", file=sys.stderr)
            traceback.print_exc(file=sys.stderr)
            return None

    for key in list(live):
        time.sleep(SETTLE_S)
        if (got := call(key)) is not None:  # the warm-up (it compiles); its result is returned
            warm[key] = got[1]
            gc.collect()
            if (got := call(key)) is not None:
                samples[key].append(got[0])
    plan = {key: _runs_per_round(samples[key][0], cfg) for key in live}
    for r in range(ROUNDS):
        for key in list(live):
            if not plan[key][r]:
                continue
            time.sleep(SETTLE_S)
            if call(key) is None:  # untimed: it wakes the library's threads and caches
                continue
            for _ in range(plan[key][r]):
                if (got := call(key)) is None:
                    break
                samples[key].append(got[0])
    for key in fns:
        row.times[key] = statistics.median(samples[key]) if key in live and samples[key] else None
    return warm


def check_close(got: np.ndarray, want: np.ndarray, rtol: float, atol: float) -> str:
    """'ok', or a short description of how `got` differs from `want`."""
    got = np.asarray(got)
    if got.shape != want.shape:
        return f"shape {got.shape} != {want.shape}"
    if not np.allclose(got, want, rtol=rtol, atol=atol):
        err = np.abs(got.astype(np.float64) - want.astype(np.float64))
        return f"MISMATCH (max abs err {np.nanmax(err):.3g}, {int(np.sum(~np.isclose(got, want, rtol, atol)))} bad)"
    return "ok"


def with_peak(row: Row, fn: Callable[[], Any]) -> Callable[[], Any]:
    """`fn`, also recording in `row.peak` the most device memory it held beyond what was held when it started."""

    def run() -> Any:
        GlobalCounters.reset()
        start = GlobalCounters.mem_used
        out = fn()
        row.peak = max(row.peak or 0, GlobalCounters.mem_peak - start)
        return out

    return run


def check_zg(row: Row, warm: Any, want: np.ndarray, rtol: float = 1e-4, atol: float = 1e-6) -> None:
    """Compare zeptograd's warm-up result (a Tensor) with `want`; record the verdict in the notes."""
    if warm is None:
        return
    try:
        verdict = check_close(warm.numpy(), want, rtol, atol)
    except Exception as e:
        verdict = f".numpy() failed: {type(e).__name__}: {e}"[:100]
        traceback.print_exc(file=sys.stderr)
    row.notes.insert(0, verdict)


def to_torch(a: np.ndarray) -> Any:
    return torch.from_numpy(a) if torch is not None else None


def bench_relu(cfg: Config, rng: np.random.Generator) -> Iterator[Row]:
    n = cfg.elementwise_n
    a, b, c = (rng.standard_normal(n, dtype=np.float32) for _ in range(3))
    row = Row(f"relu(a*b+c) {n // (1 << 20)}M")
    za, zb, zc = (Tensor(x).realize() for x in (a, b, c))
    fns = {"zeptograd": lambda: (za * zb + zc).maximum(0).realize(), "numpy": lambda: np.maximum(a * b + c, 0)}
    if torch is not None:
        ta, tb, tc = to_torch(a), to_torch(b), to_torch(c)
        fns["torch"] = lambda: torch.relu(ta * tb + tc)
    warm = run_row(row, fns, cfg)
    check_zg(row, warm["zeptograd"], np.maximum(a * b + c, 0))
    yield row


def bench_sum(cfg: Config, rng: np.random.Generator) -> Iterator[Row]:
    n = cfg.elementwise_n
    # uniform [0, 1): the sum is large (~n/2), so lost or doubled elements and float32 accumulation error show
    a = rng.random(n, dtype=np.float32)
    row = Row(f"sum {n // (1 << 20)}M")
    za = Tensor(a).realize()
    fns = {"zeptograd": lambda: za.sum().realize(), "numpy": lambda: a.sum()}
    if torch is not None:
        ta = to_torch(a)
        fns["torch"] = lambda: ta.sum()
    results = run_row(row, fns, cfg)
    exact = a.sum(dtype=np.float64)
    # a float32 sum of 2^24 terms is rarely exact: "ok" means within 1e-3; the notes give each library's error
    check_zg(row, results["zeptograd"], np.asarray(exact, dtype=np.float32), rtol=1e-3, atol=0.0)
    errors = []
    for lib, result in results.items():
        try:
            value = float(result.numpy() if lib != "numpy" else result)
            errors.append(f"{lib} {abs(value - exact) / exact:.1e}")
        except Exception:  # failed already (None) or cannot convert; run_row or check_zg reported it
            errors.append(f"{lib} ?")
    row.notes.append("rel err vs float64: " + ", ".join(errors))
    yield row


def bench_softmax(cfg: Config, rng: np.random.Generator) -> Iterator[Row]:
    n = cfg.softmax_n
    x = rng.standard_normal((n, n), dtype=np.float32) * 4

    def zg_softmax(t: Any) -> Any:
        return t.softmax(axis=1).realize()

    def np_softmax(v: np.ndarray) -> np.ndarray:
        e = np.exp(v - v.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    row = Row(f"softmax {n}x{n}")
    zx = Tensor(x).realize()
    fns = {"zeptograd": lambda: zg_softmax(zx), "numpy": lambda: np_softmax(x)}
    if torch is not None:
        tx = to_torch(x)
        fns["torch"] = lambda: torch.softmax(tx, dim=1)
    warm = run_row(row, fns, cfg)
    check_zg(row, warm["zeptograd"], np_softmax(x.astype(np.float64)).astype(np.float32), rtol=1e-3, atol=1e-7)
    yield row


def bench_matmul(cfg: Config, rng: np.random.Generator) -> Iterator[Row]:
    for n in cfg.matmul_sizes:
        a = rng.standard_normal((n, n), dtype=np.float32)
        b = rng.standard_normal((n, n), dtype=np.float32)
        row = Row(f"matmul {n}")
        za, zb = Tensor(a).realize(), Tensor(b).realize()
        fns = {"zeptograd": lambda za=za, zb=zb: (za @ zb).realize(), "numpy": lambda a=a, b=b: a @ b}
        if torch is not None:
            ta, tb = to_torch(a), to_torch(b)
            fns["torch"] = lambda ta=ta, tb=tb: ta @ tb
        warm = run_row(row, fns, cfg)["zeptograd"]
        # float32 dot products of length n: the error grows with n, so compare against float64 loosely
        check_zg(row, warm, (a.astype(np.float64) @ b).astype(np.float32), rtol=1e-3, atol=1e-3 * math.sqrt(n))
        flops = 2 * n**3
        rates = [f"{lib} {flops / t / 1e9:.1f}" for lib in LIBS if (t := row.times.get(lib))]
        row.notes.append("GFLOP/s " + ", ".join(rates))
        yield row


def conv2d_np(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Cross-correlation with 3x3 filters, padding 1, stride 1, NCHW: im2col as a strided view, then one BLAS
    matmul (tensordot over input channel and window), then the output made contiguous in NCHW."""
    kh, kw = w.shape[2:]
    xp = np.pad(x, ((0, 0), (0, 0), (kh // 2, kh // 2), (kw // 2, kw // 2)))
    windows = np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), axis=(2, 3))  # (N, Cin, H, W, kh, kw)
    out = np.tensordot(windows, w, axes=([1, 4, 5], [1, 2, 3]))  # (N, H, W, Cout)
    return np.ascontiguousarray(out.transpose(0, 3, 1, 2))


def bench_conv2d(cfg: Config, rng: np.random.Generator) -> Iterator[Row]:
    n, cin, h, wd, cout = cfg.conv
    x = rng.standard_normal((n, cin, h, wd), dtype=np.float32)
    w = rng.standard_normal((cout, cin, 3, 3), dtype=np.float32) / math.sqrt(cin * 9)
    row = Row(f"conv2d {n}x{cin}x{h}x{wd}, {cout} 3x3 pad 1")
    zx, zw = Tensor(x).realize(), Tensor(w).realize()
    wino = Row(f"conv2d {n}x{cin}x{h}x{wd}, WINO=1")

    def zg_wino() -> Any:
        with Context(WINO=1):
            return zx.conv2d(zw, padding=1).realize()

    # the same convolution as Winograd F(4x4, 3x3) (WINO=1) takes its turns with the others, against the same
    # numpy and torch runs
    fns = {
        "zeptograd": lambda: zx.conv2d(zw, padding=1).realize(),
        "zeptograd WINO=1": zg_wino,
        "numpy": lambda: conv2d_np(x, w),
    }
    if torch is not None:
        tx, tw = to_torch(x), to_torch(w)
        fns["torch"] = lambda: torch.nn.functional.conv2d(tx, tw, padding=1)
    warm = run_row(row, fns, cfg, peak_rows={"zeptograd WINO=1": wino})
    wino.times = {lib: row.times.get(lib) for lib in LIBS}
    wino.times["zeptograd"] = row.times.pop("zeptograd WINO=1")
    want = conv2d_np(x.astype(np.float64), w.astype(np.float64)).astype(np.float32)
    check_zg(row, warm["zeptograd"], want, rtol=1e-3, atol=1e-4)
    check_zg(wino, warm["zeptograd WINO=1"], want, rtol=1e-3, atol=1e-4)
    flops = 2 * n * cout * h * wd * cin * 9
    for r in (row, wino):
        rates = [f"{lib} {flops / t / 1e9:.1f}" for lib in LIBS if (t := r.times.get(lib))]
        r.notes.append("GFLOP/s " + ", ".join(rates) + (" (direct-conv FLOPs)" if r is wino else ""))
    yield row
    yield wino


def max_pool_np(x: np.ndarray, k: int, stride: int, pad: int) -> np.ndarray:
    """max_pool2d as numpy can: the maximum over the k x k windows (every `stride`-th) of a strided view of the
    input padded with -inf."""
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)), constant_values=-np.inf) if pad else x
    windows = np.lib.stride_tricks.sliding_window_view(xp, (k, k), axis=(2, 3))[:, :, ::stride, ::stride]
    return windows.max(axis=(4, 5))


def bench_pool(cfg: Config, rng: np.random.Generator) -> Iterator[Row]:
    n, c, h, wd = cfg.pool
    x = rng.standard_normal((n, c, h, wd), dtype=np.float32)
    zx = Tensor(x).realize()
    tx = to_torch(x) if torch is not None else None
    for k, stride, pad in ((2, 2, 0), (3, 2, 1)):
        row = Row(f"max_pool2d {n}x{c}x{h}x{wd}, {k}x{k} s{stride}" + (f" pad {pad}" if pad else ""))
        fns = {
            "zeptograd": lambda k=k, s=stride, p=pad: zx.max_pool2d(k, s, padding=p).realize(),
            "numpy": lambda k=k, s=stride, p=pad: max_pool_np(x, k, s, p),
        }
        if tx is not None:
            pool_fn = torch.nn.functional.max_pool2d
            fns["torch"] = lambda k=k, s=stride, p=pad, f=pool_fn: f(tx, k, s, padding=p)
        warm = run_row(row, fns, cfg)
        check_zg(row, warm["zeptograd"], max_pool_np(x, k, stride, pad), rtol=0, atol=0)
        yield row


def bench_unary(cfg: Config, rng: np.random.Generator) -> Iterator[Row]:
    n = cfg.unary_n
    for name, scale in (("exp", 1.0), ("sin", 3.0), ("tanh", 2.0)):
        a = rng.standard_normal(n, dtype=np.float32) * np.float32(scale)
        row = Row(f"{name} {fmt_count(n)}")
        za = Tensor(a).realize()
        np_fn = getattr(np, name)
        fns = {
            "zeptograd": lambda za=za, name=name: getattr(za, name)().realize(),
            "numpy": lambda a=a, np_fn=np_fn: np_fn(a),
        }
        if torch is not None:
            ta, torch_fn = to_torch(a), getattr(torch, name)
            fns["torch"] = lambda ta=ta, torch_fn=torch_fn: torch_fn(ta)
        warm = run_row(row, fns, cfg)
        check_zg(row, warm["zeptograd"], np_fn(a.astype(np.float64)).astype(np.float32), rtol=1e-5, atol=1e-6)
        yield row


def bench_overhead(cfg: Config, rng: np.random.Generator) -> Iterator[Row]:
    steps = cfg.overhead_steps
    row = Row(f"overhead: x+1 on (4,), {steps} ops")

    def zg_steps() -> Any:
        x = Tensor(np.zeros(4, dtype=np.float32)).realize()
        for _ in range(steps):
            x = (x + 1).realize()
        return x

    def np_steps() -> np.ndarray:
        x = np.zeros(4, dtype=np.float32)
        for _ in range(steps):
            x = x + 1
        return x

    def torch_steps() -> Any:
        x = torch.zeros(4, dtype=torch.float32)
        for _ in range(steps):
            x = x + 1
        return x

    fns = {"zeptograd": zg_steps, "numpy": np_steps}
    if torch is not None:
        fns["torch"] = torch_steps
    final = run_row(row, fns, cfg)
    row.times = {lib: (t / steps if t is not None else None) for lib, t in row.times.items()}
    check_zg(row, final["zeptograd"], np.full(4, steps, dtype=np.float32), rtol=0.0, atol=0.0)
    row.notes.append("times are per op")
    yield row

    # the same steps while a program holds many other tensors (a model's parameters and optimizer state): a
    # realize must not cost more for each tensor alive
    held_n = 1000
    held = Row(f"overhead beside {held_n} live tensors")
    zg_held = [Tensor(np.zeros(4, dtype=np.float32)).realize() for _ in range(held_n)]
    np_held = [np.zeros(4, dtype=np.float32) for _ in range(held_n)]
    torch_held = [torch.zeros(4) for _ in range(held_n)] if torch is not None else []
    final = run_row(held, fns, cfg)
    held.times = {lib: (t / steps if t is not None else None) for lib, t in held.times.items()}
    check_zg(held, final["zeptograd"], np.full(4, steps, dtype=np.float32), rtol=0.0, atol=0.0)
    held.notes.append(f"times are per op; {len(zg_held) + len(np_held) + len(torch_held)} tensors held in all")
    yield held


def bench_setitem(cfg: Config, rng: np.random.Generator) -> Iterator[Row]:
    """A write through a view: `x[1::2, ::3] += 1` on a realized square matrix (one element in six), in place."""
    n = int(cfg.elementwise_n**0.5)
    a = rng.standard_normal((n, n), dtype=np.float32)
    row = Row(f"x[1::2, ::3] += 1 on ({n}, {n})")
    zx, nx = Tensor(a).realize(), a.copy()

    def zg_write() -> Any:
        v = zx[1::2, ::3]
        v += 1
        return zx.realize()

    def np_write() -> np.ndarray:
        nx[1::2, ::3] += 1
        return nx

    fns: dict[str, Callable[[], Any]] = {"zeptograd": zg_write, "numpy": np_write}
    if torch is not None:
        tx = to_torch(a.copy())

        def torch_write() -> Any:
            tx[1::2, ::3] += 1
            return tx

        fns["torch"] = torch_write
    warm = run_row(row, fns, cfg)
    check_zg(row, None if warm["zeptograd"] is None else _one_write(a), _one_write_np(a))
    yield row


def _one_write(a: np.ndarray) -> Any:
    """The benchmarked write once, on a fresh copy (the timed runs wrote a number of times of their own)."""
    x = Tensor(a.copy()).realize()
    x[1::2, ::3] += 1
    return x


def _one_write_np(a: np.ndarray) -> np.ndarray:
    x = a.copy()
    x[1::2, ::3] += 1
    return x


def bench_gather(cfg: Config, rng: np.random.Generator) -> Iterator[Row]:
    """`x[idx]`: rows of a table picked by an index tensor (a one-hot sum that the codegen folds to a read)."""
    rows = 1 << 16 if not cfg.quick else 1 << 12
    table = rng.standard_normal((rows, 64), dtype=np.float32)
    idx = rng.integers(0, rows, 1000).astype(np.int32)
    row = Row(f"x[idx]: 1000 rows of ({rows}, 64)")
    zt, zi = Tensor(table).realize(), Tensor(idx).realize()
    fns: dict[str, Callable[[], Any]] = {"zeptograd": lambda: zt[zi].realize(), "numpy": lambda: table[idx]}
    if torch is not None:
        tt, ti = to_torch(table), torch.from_numpy(idx.astype(np.int64))
        fns["torch"] = lambda: tt[ti]
    warm = run_row(row, fns, cfg)
    check_zg(row, warm["zeptograd"], table[idx])
    yield row


def bench_select(cfg: Config, rng: np.random.Generator) -> Iterator[Row]:
    """`x[x > 0]`: the elements a bool mask selects (a scatter of each to its running count of the mask)."""
    n = 1 << 20 if not cfg.quick else 1 << 14
    a = rng.standard_normal(n, dtype=np.float32)
    row = Row(f"x[x > 0]: {n} floats")
    za = Tensor(a).realize()
    fns: dict[str, Callable[[], Any]] = {"zeptograd": lambda: za[za > 0].realize(), "numpy": lambda: a[a > 0]}
    if torch is not None:
        ta = to_torch(a)
        fns["torch"] = lambda: ta[ta > 0]
    warm = run_row(row, fns, cfg)
    check_zg(row, warm["zeptograd"], a[a > 0], rtol=0.0, atol=0.0)
    yield row


def bench_scatter(cfg: Config, rng: np.random.Generator) -> Iterator[Row]:
    """`scatter_reduce(..., "amax")`: the maximum of the values each position receives (a scatter in index order)."""
    n, m = (1 << 20, 1 << 14) if not cfg.quick else (1 << 14, 1 << 8)
    base = rng.standard_normal(m, dtype=np.float32)
    src = rng.standard_normal(n, dtype=np.float32)
    idx = rng.integers(0, m, n).astype(np.int32)
    row = Row(f"scatter_reduce amax: {n} into {m}")
    zb, zi, zs = Tensor(base).realize(), Tensor(idx).realize(), Tensor(src).realize()

    def np_amax() -> np.ndarray:
        out = base.copy()
        np.maximum.at(out, idx, src)
        return out

    fns: dict[str, Callable[[], Any]] = {
        "zeptograd": lambda: zb.scatter_reduce(0, zi, zs, "amax").realize(),
        "numpy": np_amax,
    }
    if torch is not None:
        tb, ti, ts = to_torch(base), torch.from_numpy(idx.astype(np.int64)), to_torch(src)
        fns["torch"] = lambda: tb.scatter_reduce(0, ti, ts, "amax")
    warm = run_row(row, fns, cfg)
    check_zg(row, warm["zeptograd"], np_amax(), rtol=0.0, atol=0.0)
    yield row


def cache_files(path: str) -> int:
    return sum(len(files) for _, _, files in os.walk(path))


def bench_compile(cfg: Config, rng: np.random.Generator) -> Iterator[Row]:
    """Each trial builds an expression no earlier trial built: a chain whose length depends on the trial, with
    random constants (so the kernel source differs even if constants are baked in), over a shape of its own."""
    trial_rng = random.Random()  # unseeded: a rerun builds other kernels too
    row = Row(f"compile: first call, {cfg.compile_trials} new kernels")
    cold: list[float] = []
    warm: list[float] = []
    new_consts: list[float] = []
    verdict = "ok"
    try:
        # one unrelated kernel first, so one-time setup (finding the compiler, first imports) is not counted
        (Tensor(np.ones(7, dtype=np.float32)).realize() * 3).realize()
        for trial in range(cfg.compile_trials):
            n = 1000 + trial
            x_np = rng.standard_normal(n, dtype=np.float32)
            consts = [(trial_rng.uniform(0.5, 2.0), trial_rng.uniform(-1.0, 1.0)) for _ in range(trial + 2)]
            x = Tensor(x_np).realize()

            def build(x: Any = x, consts: list[tuple[float, float]] = consts) -> Any:
                y = x
                for k, c in consts:
                    y = (y * k + c).maximum(0)
                return y

            t0 = time.perf_counter()
            out = build().realize()
            cold.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            build().realize()
            warm.append(time.perf_counter() - t0)
            want = x_np.astype(np.float64)
            for k, c in consts:
                want = np.maximum(want * np.float32(k) + np.float32(c), 0)
            if verdict == "ok":
                verdict = check_close(out.numpy(), want.astype(np.float32), rtol=1e-5, atol=1e-6)
        # the last structure again with new constants: the first compiles the program that reads them from a
        # buffer (engine/constants.py), the others reuse it
        for _ in range(cfg.compile_trials + 1):
            consts = [(trial_rng.uniform(0.5, 2.0), trial_rng.uniform(-1.0, 1.0)) for _ in consts]
            t0 = time.perf_counter()
            build(x, consts).realize()
            new_consts.append(time.perf_counter() - t0)
    except Exception as e:
        row.notes.append(f"zeptograd failed: {type(e).__name__}: {e}"[:100])
        traceback.print_exc(file=sys.stderr)
    if cold:
        row.times["zeptograd"] = statistics.median(cold)
        row.notes.insert(0, verdict)
        row.notes.append(f"second call {fmt_time(statistics.median(warm))}")
        if new_consts:
            first, rest = new_consts[0], new_consts[1:]
            row.notes.append(f"new constants {fmt_time(statistics.median(rest))} (the first {fmt_time(first)})")
        row.notes.append(f"cold {'/'.join(fmt_time(t) for t in cold)}")
    if cache_files(_CACHE_DIR) == 0:
        row.notes.append("ZEPTOGRAD_CACHE_DIR is still empty")
    yield row


def fmt_time(t: float | None) -> str:
    if t is None:
        return "-"
    if t < 1e-3:
        return f"{t * 1e6:.1f} us"
    if t < 1.0:
        return f"{t * 1e3:.2f} ms"
    return f"{t:.2f} s"


def fmt_count(n: int) -> str:
    return f"{n / (1 << 20):g}M" if n >= 1 << 20 else f"{n / 1024:g}K"


def fmt_bytes(n: int | None) -> str:
    if n is None:
        return "-"
    if n < 1024:
        return f"{n} B"
    if n < 1 << 20:
        return f"{n / 1024:.1f} KiB"
    return f"{n / (1 << 20):.1f} MiB"


def fmt_ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}x" if a is not None and b is not None else "-"


def table_lines(rows: list[Row]) -> list[str]:
    header = ["benchmark", "zeptograd", "numpy", "torch", "zg/np", "zg/torch", "zg peak", "notes"]
    cells = [
        [
            r.name,
            fmt_time(r.times.get("zeptograd")),
            fmt_time(r.times.get("numpy")),
            fmt_time(r.times.get("torch")),
            fmt_ratio(r.times.get("zeptograd"), r.times.get("numpy")),
            fmt_ratio(r.times.get("zeptograd"), r.times.get("torch")),
            fmt_bytes(r.peak),
            "; ".join(r.notes),
        ]
        for r in rows
    ]
    widths = [max(w, *(len(line[i]) for line in [header, *cells])) for i, w in enumerate(MIN_WIDTHS)]

    def join(line: list[str]) -> str:
        left = line[0].ljust(widths[0])
        middle = "  ".join(cell.rjust(w) for cell, w in zip(line[1:-1], widths[1:]))
        return f"{left}  {middle}  {line[-1]}".rstrip()

    lines = [join(header)]
    lines.append("-" * len(lines[0]))
    lines.extend(join(line) for line in cells)
    return lines


def print_progress(row: Row) -> None:
    print(table_lines([row])[-1], flush=True)


BENCH_FNS: dict[str, Callable[[Config, np.random.Generator], Iterator[Row]]] = {
    "relu": bench_relu,
    "sum": bench_sum,
    "softmax": bench_softmax,
    "matmul": bench_matmul,
    "conv2d": bench_conv2d,
    "pool": bench_pool,
    "unary": bench_unary,
    "overhead": bench_overhead,
    "setitem": bench_setitem,
    "gather": bench_gather,
    "select": bench_select,
    "scatter": bench_scatter,
    "compile": bench_compile,
}


def other_cpu_seconds() -> float | None:
    """CPU seconds that all processes but this one and its children have used since boot (Linux /proc/stat), or
    None elsewhere. Other work on the machine during a run makes its times noisy: multithreaded code suffers most."""
    try:
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    busy = (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")
    own = os.times()  # this process and the children it waited for (the C compiler)
    return busy - (own.user + own.system + own.children_user + own.children_system)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes and budgets (a smoke test)")
    parser.add_argument("--only", help="comma-separated benchmarks to run, in the usual order (default: all)")
    parser.add_argument("--repeats", type=int, help="timed runs per library and row (default: a time budget)")
    args = parser.parse_args()
    if args.repeats is not None and args.repeats < 1:
        parser.error("--repeats must be at least 1")
    only = BENCHMARKS if args.only is None else tuple(args.only.split(","))
    if unknown := [name for name in only if name not in BENCHMARKS]:
        parser.error(f"--only: unknown benchmark {', '.join(unknown)} (choose from {', '.join(BENCHMARKS)})")
    cfg = make_config(args.quick, args.repeats)

    torch_note = "not importable, skipped"
    if torch is not None:
        torch.set_num_threads(os.cpu_count() or 1)
        torch_note = f"{torch.__version__}, {torch.get_num_threads()} threads"
    print(
        f"python {platform.python_version()}, {os.cpu_count()} cpus, numpy {np.__version__}, torch {torch_note}; "
        f"{'quick' if cfg.quick else 'full'} run; zeptograd on {Device.DEFAULT}; ZEPTOGRAD_CACHE_DIR={_CACHE_DIR}",
        flush=True,
    )

    rng = np.random.default_rng(0)
    rows: list[Row] = []
    t_start = time.perf_counter()
    busy_start = busy = other_cpu_seconds()
    for name in [name for name in BENCHMARKS if name in only]:
        t_row = time.perf_counter()
        for row in BENCH_FNS[name](cfg, rng):
            busy_now = other_cpu_seconds()
            if busy is not None and busy_now is not None:
                others = (busy_now - busy) / (time.perf_counter() - t_row)
                if others >= BUSY_WARN_CPUS:
                    row.notes.append(f"NOISY: other processes used {others:.1f} cpus")
            print_progress(row)
            rows.append(row)
            gc.collect()
            busy, t_row = other_cpu_seconds(), time.perf_counter()
    elapsed = time.perf_counter() - t_start
    busy_end = other_cpu_seconds()
    load_note = ""
    if busy_start is not None and busy_end is not None:
        load_note = f"; other processes used {(busy_end - busy_start) / elapsed:.2f} cpus"
    print(f"\ntotal {elapsed:.1f} s{load_note}; times are medians, zg/np > 1 means zeptograd is slower\n")
    print("\n".join(table_lines(rows)))


if __name__ == "__main__":
    main()
