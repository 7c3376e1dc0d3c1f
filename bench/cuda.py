"""The CUDA device on the GPU it finds: memory bandwidth, matmul speed against torch (cuBLAS), and how long the first
call of a new kernel takes (a benchmark, not a test; it needs a GPU, NVRTC and, for the torch column, torch).

    PYTHONPATH=. python bench/cuda.py            # the full sizes (about a minute of GPU time)
    PYTHONPATH=. python bench/cuda.py --quick    # small sizes: a smoke test

1. elementwise  `a + b` on fp32 vectors of 2**26 elements (768 MiB moved): GB/s and the share of the GPU's peak
                memory bandwidth (`--peak-gbs`, 4800 for an H200; 3350 for an H100 SXM).
2. matmul       4096 x 4096 x 4096 in fp32 and in fp16 (fp16 inputs and output), GFLOP/s, next to torch's
                `a @ b` on the same GPU (cuBLAS; fp32 without TF32, torch's default) and the ratio; and fp16
                `x @ w.T` with w stored (n, k), as in a Linear layer.
   The fp16 rows include the copies of both operands into fragment order (schedule/layout.py).
   With --sweep: the copies timed alone, the matmul kernel alone under other tensor-core plans (TC tiles and warps
   a block), and with the heuristic's plan on the PTX and TRITON devices; with --experiments also under edits of
   its CUDA C (the k loop unrolled, the other choice of a minimum of blocks an SM), other plans for the copies, and
   a hand-written kernel that stages row-major operands through shared memory (bench/cuda_smem_matmul.cu):
   leads for the renderer.
   With --wgmma (an H100 or H200) only this: small fp16 and bf16 matmuls on the warpgroup MMA against numpy, in
   both of its layouts (B's tile K-major, or N-major reading row-major operands as they are), with its shared-memory
   descriptor's strides as rendered and exchanged (the second must fail); fp16 and bf16 `x @ y` and `x @ w.T` in
   each layout (wgmma_layouts; `--wgmma --layouts`: no more than these, about a minute); then the fp16 matmul with
   each warpgroup MMA shape of WGMMA_SHAPES (K-major):
   `x @ y` whole, and its kernel alone under each
   WGMMA_GROUPS (warpgroups a block) and, for the first, other unroll counts and one shared tile instead of two.
3. first call   a kernel never seen before (a fresh constant) on CUDA and on PTX: the whole first call, then its
                phases one by one (schedule, codegen, NVRTC's quick build, module load, launch, copy back), NVRTC to
                PTX with the driver's JIT instead of NVRTC's CUBIN, and the optimized build that replaces the quick
                one (ops_cuda.TieredKernel); NVRTC's compile of a tiny kernel alone.

A kernel is timed by launching it back to back on the default stream and waiting for the GPU once at the end:
the median of 5 such batches, each at least 0.2 s or 3 launches.
"""

from __future__ import annotations

import argparse
import ctypes
import dataclasses
import functools
import itertools
import re
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

from zeptograd import Device, Tensor, dtypes
from zeptograd.codegen import get_program
from zeptograd.codegen.opt import Opt, OptOps
from zeptograd.engine.facts import device_facts
from zeptograd.engine.realize import compiled
from zeptograd.runtime import ops_cuda
from zeptograd.runtime.buffer import buffer_for
from zeptograd.runtime.ops_cuda import compile_cuda
from zeptograd.schedule.kernelize import create_schedule
from zeptograd.uop.buffers import buffer_of

# the sweep's tiles: WMMA blocks a warp along m and n, warps a block along m and n
SWEEP_TILES = (
    (2, 8, 2, 4),
    (2, 8, 4, 2),
    (4, 4, 2, 4),
    (4, 8, 2, 2),
    (4, 8, 2, 4),
    (4, 8, 4, 2),
    (4, 8, 1, 4),
    (8, 4, 2, 2),
    (2, 16, 2, 2),
)


def batch_time(launch: Callable[[], Any], sync: Callable[[], Any], min_s: float = 0.2) -> float:
    """Seconds per launch: the median of 5 batches of back-to-back launches, the GPU waited for after each batch.
    Kernels are timed in their optimized build (ops_cuda.TieredKernel): the background builds are waited for."""
    ops_cuda.wait_for_compiles()
    launch()
    sync()
    t0 = time.perf_counter()
    launch()
    sync()
    once = time.perf_counter() - t0
    n = max(3, int(min_s / max(once, 1e-6)))
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            launch()
        sync()
        times.append((time.perf_counter() - t0) / n)
    return statistics.median(times)


def kernels_of(out: Tensor) -> tuple[Callable[[], None], list[Any], Any]:
    """A function that launches every kernel that computes `out` (its inputs realized), the programs, and the output
    buffer."""
    items, _ = create_schedule([out.uop], ["CUDA"], device_facts)
    steps = []
    for item in items:
        assert item.ast is not None, "the benchmark's expressions need no copies"
        program, run = compiled("CUDA", item.ast)
        steps.append((program, run, [buffer_for(b).allocate() for b in item.bufs]))

    def launch() -> None:
        for _, run, bufs in steps:
            run(bufs)

    return launch, [p for p, _, _ in steps], steps[-1][2][0]


def _run_all(steps: list[tuple[Callable[[Any], None], list[Any]]]) -> None:
    for run, bufs in steps:
        run(bufs)


# experiments on the CUDA C of a tile's kernel (not plans zeptograd makes): the k loop unrolled otherwise than the
# renderer's `#pragma unroll` (TC_UNROLL), and the other choice of register budget (the renderer asks for 512
# threads an SM in tiles of at most 16 WMMAs, none above)
EXPERIMENT_TILES = ((2, 8, 2, 4), (4, 8, 2, 2), (4, 8, 2, 4), (8, 4, 2, 2))
# other plans for the copies into fragment order: values a thread (UPCAST) and threads a block (LOCAL)
COPY_PLANS = ((1, 256), (2, 256), (4, 256), (8, 256), (8, 128), (2, 128), (2, 512), (16, 64))


def _unrolled(times: int) -> Callable[[str, int], str]:
    def edit(src: str, threads: int) -> str:
        return re.sub(r"#pragma unroll \d+", f"#pragma unroll {times}", src)

    return edit


def _other_minimum(src: str, threads: int) -> str:
    """A minimum of blocks an SM where the renderer asked for none, none where it asked for one."""
    plain = f"__launch_bounds__({threads})"
    if plain in src:
        return src.replace(plain, f"__launch_bounds__({threads}, {max(1, 512 // threads)})")
    return re.sub(rf"__launch_bounds__\({threads}, \d+\)", plain, src)


SOURCE_VARIANTS: dict[str, Callable[[str, int], str]] = {
    "as rendered": lambda src, threads: src,
    "not unrolled": _unrolled(1),
    "unroll 2": _unrolled(2),
    "unroll 8": _unrolled(8),
    "other minimum": _other_minimum,
}


def sweep(size: int, sync: Callable[[], Any], rng: np.random.Generator, experiments: bool = False) -> None:
    """The fp16 matmul under several tensor-core plans on CUDA, and the heuristic's on PTX and TRITON. The operands'
    copies into fragment order (schedule/layout.py) run once first; the plans time the matmul kernel alone, and the
    copies are timed on their own."""
    x_np = rng.standard_normal((size, size)).astype(np.float16)
    y_np = rng.standard_normal((size, size)).astype(np.float16)
    want = x_np[:64].astype(np.float32) @ y_np.astype(np.float32)
    tc, up, lo = OptOps.TC, OptOps.UPCAST, OptOps.LOCAL
    plans: list[tuple[str, list[Opt] | None]] = [("heuristic", None)]
    for um, un, wm, wn in SWEEP_TILES:
        plans.append(
            (
                f"tile {um}x{un} warps {wm}x{wn}",
                [Opt(tc, 0, 0), Opt(up, 0, um), Opt(lo, 0, wm), Opt(up, 1, un), Opt(lo, 1, wn)],
            )
        )
    for device in [d for d in ("CUDA", "PTX", "TRITON") if Device.usable(d)]:
        dev = Device[device]
        # these plans are mma.sync's (its tiles of blocks a warp): on an H100 the warpgroup MMA is set aside for them,
        # and its own sweep is --wgmma
        offered = getattr(dev.renderer, "tensor_cores", ())
        if offered:
            dev.renderer.tensor_cores = tuple(tc for tc in offered if not tc.warpgroup)
        x, y = Tensor(x_np, device=device).realize(), Tensor(y_np, device=device).realize()
        items, _ = create_schedule([(x @ y).uop], [device], device_facts)
        *copies, item = items
        steps = []
        for c in copies:
            assert c.ast is not None
            program, run = compiled(device, c.ast)
            steps.append((run, [buffer_for(b).allocate() for b in c.bufs]))
        for run, bufs in steps:
            run(bufs)
        for i, step in enumerate(steps):
            s = batch_time(functools.partial(_run_all, [step]), sync, 0.2)
            print(f"  {device} fragment-order copy {i}: {s * 1e6:.0f} us")
        if device == "CUDA" and experiments:
            for i, (c, (_, bufs)) in enumerate(zip(copies, steps)):
                for upcast, local in COPY_PLANS:
                    plan = [o for o in (Opt(up, 0, upcast), Opt(lo, 0, local)) if o.amount != 1]
                    run = dev.runner(get_program(c.ast, dev.renderer, plan))
                    s = batch_time(functools.partial(run, bufs), sync, 0.2)
                    print(f"  experiment copy {i} upcast {upcast} local {local}: {s * 1e6:.0f} us")
        bufs = [buffer_for(b).allocate() for b in item.bufs]
        for name, opts in plans if device == "CUDA" else plans[:1]:
            try:
                program = get_program(item.ast, dev.renderer, [o for o in opts if o.amount != 1] if opts else None)
                run = dev.runner(program)
            except Exception as e:
                print(f"  {device} {name}: {type(e).__name__}: {str(e)[:300]}")
                continue
            s = batch_time(functools.partial(run, bufs), sync, 0.3)
            got = bufs[0].numpy().reshape(size, size)[:64].astype(np.float32)
            err = float(np.abs(got - want).max() / np.abs(want).max())
            print(
                f"  {device} fp16 matmul {size}^3 {name:<22} {2 * size**3 / s * 1e-12:7.1f} TFLOP/s  rel err {err:.1e}"
            )
        if device == "CUDA" and experiments:
            for tile in EXPERIMENT_TILES:
                um, un, wm, wn = tile
                opts = [Opt(tc, 0, 0), Opt(up, 0, um), Opt(lo, 0, wm), Opt(up, 1, un), Opt(lo, 1, wn)]
                program = get_program(item.ast, dev.renderer, [o for o in opts if o.amount != 1])
                for variant, edit in SOURCE_VARIANTS.items():
                    run = dev.runner(dataclasses.replace(program, src=edit(program.src, wm * wn * 32)))
                    s = batch_time(functools.partial(run, bufs), sync, 0.3)
                    got = bufs[0].numpy().reshape(size, size)[:64].astype(np.float32)
                    err = float(np.abs(got - want).max() / np.abs(want).max())
                    tflops = 2 * size**3 / s * 1e-12
                    print(f"  experiment tile {tile} {variant:<18} {tflops:7.1f} TFLOP/s  rel err {err:.1e}")
        if device == "CUDA" and experiments:
            hand_written_smem(size, x, y, sync)
        if device == "CUDA":
            # the heuristic's kernel compiled without NVRTC's compile-time options (ops_cuda.FAST_OPTIONS)
            saved, ops_cuda.FAST_OPTIONS = ops_cuda.FAST_OPTIONS, ()
            ops_cuda._compiled.clear()
            dev._functions.clear()
            run = dev.runner(get_program(item.ast, dev.renderer))
            s = batch_time(functools.partial(run, bufs), sync, 0.3)
            print(f"  CUDA fp16 matmul {size}^3 heuristic, no FAST_OPTIONS {2 * size**3 / s * 1e-12:7.1f} TFLOP/s")
            ops_cuda.FAST_OPTIONS = saved
            ops_cuda._compiled.clear()
            dev._functions.clear()
        if offered:
            dev.renderer.tensor_cores = offered


# the warpgroup MMA's sweep (sm_90a): its n and k, and warpgroups a block along m and n
WGMMA_SHAPES = ((128, 32), (128, 16), (128, 64), (64, 64), (256, 16))
WGMMA_GROUPS = ((2, 1), (1, 1), (1, 2), (4, 1))


def wgmma_check(rng: np.random.Generator) -> None:
    """Small fp16 and bf16 matmuls whose kernels use the warpgroup MMA, against numpy: the layouts of
    codegen/tensor_cores.py's wgmma (B's tile K-major, and N-major with k renumbered: `row_major`) and the
    shared-memory descriptor's strides (renderer/cuda.py) on the hardware, with the two strides as written and
    exchanged (the second must fail)."""
    from zeptograd.codegen.tensor_cores import wgmma
    from zeptograd.renderer import cuda

    dev = Device["CUDA"]
    saved = cuda.wgmma_strides
    for row_major, exchanged in itertools.product((False, True), (False, True)):
        cuda.wgmma_strides = (lambda tc: saved(tc)[::-1]) if exchanged else saved
        strides = ("exchanged" if exchanged else "as written") + (" row-major" if row_major else " K-major")
        for n, k in ((128, 16), (64, 32), (256, 16), (128, 32), (64, 64)):
            for dt in (dtypes.float16, dtypes.bfloat16):
                tc = wgmma(n, k, dt, row_major)
                x_np = rng.standard_normal((128, 64)).astype(np.float32)
                y_np = rng.standard_normal((64, 256)).astype(np.float32)
                x = Tensor(x_np, device="CUDA").cast(dt).realize()
                y = Tensor(y_np, device="CUDA").cast(dt).realize()
                want = x.cast(dtypes.float32).numpy().astype(np.float64) @ y.cast(dtypes.float32).numpy()
                items, _ = create_schedule([(x @ y).cast(dtypes.float32).uop], ["CUDA"], device_facts)
                (item,) = items
                assert item.ast is not None
                renderer = cuda.CUDARenderer(dev.arch)
                renderer.tensor_cores = (tc,)
                try:
                    program = get_program(item.ast, renderer, [Opt(OptOps.TC, 0, 0)])
                    bufs = [buffer_for(b).allocate() for b in item.bufs]
                    dev.runner(program)(bufs)
                    got = bufs[0].numpy().reshape(want.shape)
                    bad = np.argwhere(np.abs(got - want) > 1e-2 * np.abs(want).max())
                    err = f"max rel err {np.abs(got - want).max() / np.abs(want).max():.1e}, {len(bad)} wrong"
                    err += f" (first {bad[:4].tolist()})" if len(bad) else ""
                except Exception as e:
                    err = f"{type(e).__name__}: {str(e)[:400]}"
                print(f"  wgmma check strides {strides} {tc.name}: {err}")
    cuda.wgmma_strides = saved


def wgmma_layouts(size: int, sync: Callable[[], Any], rng: np.random.Generator) -> None:
    """fp16 `x @ y` (and bf16, and `x @ w.T`) with the warpgroup MMA of WGMMA_SHAPE in its two layouts: K-major with
    both operands copied into fragment order (the default), and row-major (WGMMA_ROW_MAJOR=1) with realized operands
    read as they are, or copied all the same (layout_pass.stored_row_major patched): the whole product, its kernels,
    and its error against torch where it is installed, else numpy."""
    from zeptograd.codegen.tensor_cores import wgmma
    from zeptograd.renderer import cuda
    from zeptograd.schedule import layout as layout_pass

    dev = Device["CUDA"]
    saved, stored = dev.renderer.tensor_cores, layout_pass.stored_row_major
    x_np = rng.standard_normal((size, size)).astype(np.float16)
    y_np = rng.standard_normal((size, size)).astype(np.float16)
    x, y = Tensor(x_np, device="CUDA").realize(), Tensor(y_np, device="CUDA").realize()
    w = Tensor(np.ascontiguousarray(y_np.T), device="CUDA").realize()
    cases = {"x @ y": lambda: x @ y, "x @ w.T": lambda: x @ w.T}
    cases["bf16 x @ y"] = lambda: x.cast(dtypes.bfloat16).realize() @ y.cast(dtypes.bfloat16).realize()
    want = {name: x_np[:64].astype(np.float32) @ y_np.astype(np.float32) for name in cases}
    try:
        import torch

        bf = torch.from_numpy(x_np[:64]).bfloat16().float() @ torch.from_numpy(y_np).bfloat16().float()
        want["bf16 x @ y"] = bf.numpy()
        tx, ty = torch.from_numpy(x_np).cuda(), torch.from_numpy(y_np).cuda()
        st = batch_time(functools.partial(torch.matmul, tx, ty), torch.cuda.synchronize, 0.3)
        print(f"  torch fp16 x @ y: {2 * size**3 / st * 1e-12:7.1f} TFLOP/s")
    except ImportError:
        pass
    layouts = (("K-major, copies", False, False), ("row-major", True, False), ("row-major, copies", True, True))
    for layout, row_major, copy_all in layouts:
        dev.renderer.tensor_cores = (
            tuple(wgmma(*cuda.WGMMA_SHAPE, dt, row_major) for dt in (dtypes.float16, dtypes.bfloat16)) + saved
        )
        if copy_all:
            layout_pass.stored_row_major = lambda u: False
        try:
            for name, product in cases.items():
                launch, programs, out = kernels_of(product())  # (bf16: the casts realized, not timed)
                s = batch_time(launch, sync, 0.3)
                got = out.numpy().reshape(size, size)[:64].astype(np.float32)
                err = float(np.abs(got - want[name]).max() / np.abs(want[name]).max())
                tflops = 2 * size**3 / s * 1e-12
                print(
                    f"  {layout:<18} {name:<10} {len(programs)} kernels {s * 1e6:6.0f} us {tflops:6.1f} TFLOP/s "
                    f"({100 * tflops / 989:4.1f}% of 989)  rel err {err:.1e}"
                )
        except Exception as e:
            print(f"  {layout}: {type(e).__name__}: {str(e)[:300]}")
        finally:
            layout_pass.stored_row_major = stored
    dev.renderer.tensor_cores = saved


def wgmma_sweep(size: int, sync: Callable[[], Any], rng: np.random.Generator) -> None:
    """The fp16 matmul with the warpgroup MMA of each shape in WGMMA_SHAPES (its operands copied into that shape's
    fragment order), the kernel alone under each WGMMA_GROUPS and the source edits of SOURCE_VARIANTS, and the whole
    `x @ y` under the heuristic's plan."""
    from zeptograd.codegen.tensor_cores import wgmma
    from zeptograd.renderer import cuda

    dev = Device["CUDA"]
    saved = dev.renderer.tensor_cores
    x_np = rng.standard_normal((size, size)).astype(np.float16)
    y_np = rng.standard_normal((size, size)).astype(np.float16)
    want = x_np[:64].astype(np.float32) @ y_np.astype(np.float32)
    x, y = Tensor(x_np, device="CUDA").realize(), Tensor(y_np, device="CUDA").realize()
    for n, k in WGMMA_SHAPES:
        dev.renderer.tensor_cores = (wgmma(n, k), *saved)
        name = f"wgmma n{n} k{k}"
        launch, _, out = kernels_of(x @ y)
        s = batch_time(launch, sync, 0.2)
        got = out.numpy().reshape(size, size)[:64].astype(np.float32)
        err = float(np.abs(got - want).max() / np.abs(want).max())
        print(f"  {name} x @ y (copies and kernel): {2 * size**3 / s * 1e-12:7.1f} TFLOP/s  rel err {err:.1e}")
        items, _ = create_schedule([(x @ y).uop], ["CUDA"], device_facts)
        *copies, item = items
        for c in copies:
            assert c.ast is not None
            program, run = compiled("CUDA", c.ast)
            run([buffer_for(b).allocate() for b in c.bufs])
        bufs = [buffer_for(b).allocate() for b in item.bufs]
        for gm, gn in WGMMA_GROUPS:
            opts = [Opt(OptOps.TC, 0, 0), Opt(OptOps.LOCAL, 0, gm), Opt(OptOps.LOCAL, 1, gn)]
            variants: list[tuple[str, int, Any]] = [("as rendered", cuda.WGMMA_STAGES, None)]
            if (gm, gn) == WGMMA_GROUPS[0]:
                variants += [(v, cuda.WGMMA_STAGES, SOURCE_VARIANTS[v]) for v in ("not unrolled", "unroll 2")]
                variants.append(("other stages", 3 - cuda.WGMMA_STAGES, None))
            for variant, stages, edit in variants:
                saved_stages, cuda.WGMMA_STAGES = cuda.WGMMA_STAGES, stages
                try:
                    program = get_program(item.ast, dev.renderer, [o for o in opts if o.amount != 1])
                except Exception as e:
                    print(f"  {name} groups {gm}x{gn}: {type(e).__name__}: {str(e)[:200]}")
                    continue
                finally:
                    cuda.WGMMA_STAGES = saved_stages
                src = program.src if edit is None else edit(program.src, gm * gn * 128)
                try:
                    run = dev.runner(dataclasses.replace(program, src=src))
                except Exception as e:
                    print(f"  {name} groups {gm}x{gn} {variant}: {type(e).__name__}: {str(e)[:200]}")
                    continue
                try:
                    s = batch_time(functools.partial(run, bufs), sync, 0.1)
                except Exception as e:
                    print(f"  {name} groups {gm}x{gn} {variant}: {type(e).__name__}: {str(e)[:200]}")
                    continue
                got = bufs[0].numpy().reshape(size, size)[:64].astype(np.float32)
                err = float(np.abs(got - want).max() / np.abs(want).max())
                tflops = 2 * size**3 / s * 1e-12
                what = f"{name} groups {gm}x{gn} {variant:<14}"
                print(f"  {what} kernel {tflops:7.1f} TFLOP/s  rel err {err:.1e}")
    dev.renderer.tensor_cores = saved


# the hand-written shared-memory matmul's configurations: warps a block along m and n, columns of A (rows of B) a
# stage, stages in flight, a minimum of blocks an SM
SMEM_CONFIGS = ((4, 2, 32, 2, 2), (4, 2, 32, 4, 2), (4, 2, 64, 3, 2), (2, 4, 32, 3, 2), (4, 4, 32, 3, 1))


def _launch(dev: Any, fn: Any, grid: tuple[int, ...], block: tuple[int, ...], shared: int, params: Any) -> None:
    dev.driver.check(dev.driver.lib.cuLaunchKernel(fn, *grid, *block, shared, None, params, None), "launch")


def hand_written_smem(size: int, x: Tensor, y: Tensor, sync: Callable[[], Any]) -> None:
    """bench/cuda_smem_matmul.cu on x @ y (row-major operands, no copies) under SMEM_CONFIGS: TFLOP/s and the error
    against numpy on 64 rows."""
    dev = Device["CUDA"]
    lib, check = dev.driver.lib, dev.driver.check
    lib.cuFuncSetAttribute.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
    lib.cuFuncSetAttribute.restype = ctypes.c_int
    out = Tensor.zeros(size, size, dtype=dtypes.float16, device="CUDA").contiguous().realize()
    addresses = [buffer_for(buffer_of(t.uop)).address for t in (out, x, y)]
    want = x[:64].numpy().astype(np.float32) @ y.numpy().astype(np.float32)
    text = (Path(__file__).parent / "cuda_smem_matmul.cu").read_text()
    for wm, wn, bk, stages, min_blocks in SMEM_CONFIGS:
        sizes = {"M": size, "N": size, "K": size, "WM": wm, "WN": wn, "BK": bk, "STAGES": stages, "MINB": min_blocks}
        src = "".join(f"#define {k} {v}\n" for k, v in sizes.items()) + text
        shared = stages * (wm * 32 * (bk + 8) + bk * (wn * 64 + 8)) * 2
        kernel = dev.function(src, "smem_matmul")
        ops_cuda.wait_for_compiles()
        fn = kernel.current()
        check(lib.cuFuncSetAttribute(fn, 8, shared), "cuFuncSetAttribute")  # 8: the dynamic shared memory allowed
        values = [ctypes.c_uint64(a) for a in addresses]
        params = (ctypes.c_void_p * 3)(*[ctypes.addressof(v) for v in values])
        grid, block = (size // (wn * 64), size // (wm * 32), 1), (32, wm, wn)
        s = batch_time(functools.partial(_launch, dev, fn, grid, block, shared, params), sync, 0.3)
        got = out[:64].numpy().astype(np.float32)
        err = float(np.abs(got - want).max() / np.abs(want).max())
        tflops = 2 * size**3 / s * 1e-12
        name = f"warps {wm}x{wn} BK {bk} stages {stages} min blocks {min_blocks}"
        print(f"  experiment hand-written smem matmul {name:<38} {tflops:7.1f} TFLOP/s  rel err {err:.1e}")


def first_call(device: str, rng: np.random.Generator) -> tuple[float, str]:
    """The first call of `((z * k + 1).exp() * k).sum(1)` with a fresh constant k on `device`, from the expression to
    numpy (seconds), and, for another fresh k, the phases one by one (text)."""
    dev = Device[device]
    z = Tensor(rng.standard_normal((1000, 1000)).astype(np.float32), device=device).realize()
    dev.synchronize()
    k = float(rng.uniform(1, 2))
    t0 = time.perf_counter()
    ((z * k + 1).exp() * k).sum(1).numpy()
    total = time.perf_counter() - t0
    k = float(rng.uniform(1, 2))
    t = [time.perf_counter()]
    out = ((z * k + 1).exp() * k).sum(1)
    (item,), _ = create_schedule([out.uop], [device], device_facts)
    t.append(time.perf_counter())
    program = get_program(item.ast, dev.renderer)
    t.append(time.perf_counter())
    if device == "CUDA":
        compile_cuda(program.src, dev.arch, program.name, quick=True)  # the first build (ops_cuda.TieredKernel)
    t.append(time.perf_counter())
    run = dev.runner(program)
    t.append(time.perf_counter())
    bufs = [buffer_for(b).allocate() for b in item.bufs]
    run(bufs)
    dev.synchronize()
    t.append(time.perf_counter())
    bufs[0].numpy()
    t.append(time.perf_counter())
    names = ("schedule", "codegen", "NVRTC", "load", "alloc+run", "to host")
    phases = ", ".join(f"{n} {(b - a) * 1e3:.1f}" for n, a, b in zip(names, t, t[1:]))
    if device == "CUDA":
        # the same kernel compiled again (a new text) by NVRTC to PTX only, which the driver JIT-compiles
        src = program.src + f"\n// {rng.random()}\n"
        t0 = time.perf_counter()
        ptx = compile_cuda(src, "compute_" + dev.arch[3:], program.name).ptx
        t1 = time.perf_counter()
        module = ctypes.c_void_p()
        dev.driver.check(dev.driver.lib.cuModuleLoadData(ctypes.byref(module), ptx.encode()), "load PTX")
        t2 = time.perf_counter()
        phases += f"; NVRTC to PTX {(t1 - t0) * 1e3:.1f} + driver JIT {(t2 - t1) * 1e3:.1f}"
        t0 = time.perf_counter()
        compile_cuda(src, dev.arch, program.name)
        phases += f"; the optimized build (background) {(time.perf_counter() - t0) * 1e3:.1f}"
    return total, phases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes")
    parser.add_argument("--peak-gbs", type=float, default=4800.0, help="the GPU's memory bandwidth (H200: 4800)")
    parser.add_argument("--sweep", action="store_true", help="the fp16 matmul under other tensor-core plans")
    parser.add_argument("--experiments", action="store_true", help="with --sweep: edits of the matmul's CUDA C")
    parser.add_argument("--wgmma", action="store_true", help="only the warpgroup MMA's check and sweep (sm_90a)")
    parser.add_argument("--layouts", action="store_true", help="with --wgmma: its check and its two layouts only")
    args = parser.parse_args()
    dev = Device["CUDA"]
    sync = dev.synchronize
    print(f"GPU: {dev.driver.name} ({dev.arch})")
    if args.wgmma:
        rng = np.random.default_rng(0)
        wgmma_check(rng)
        wgmma_layouts(1024 if args.quick else 4096, sync, rng)
        if not args.layouts:
            wgmma_sweep(1024 if args.quick else 4096, sync, rng)
        return
    rows: list[tuple[str, str, str, str]] = []
    rng = np.random.default_rng(0)

    # 1. elementwise bandwidth
    n = 1 << (20 if args.quick else 26)
    a_np, b_np = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    a, b = Tensor(a_np, device="CUDA"), Tensor(b_np, device="CUDA")
    launch, programs, out = kernels_of(a + b)
    s = batch_time(launch, sync)
    np.testing.assert_array_equal(out.numpy(), a_np + b_np)  # the timed kernel computes the right thing
    gbs = 3 * n * 4 / s * 1e-9
    rows.append(("fp32 a + b", f"{n} elements", f"{gbs:.0f} GB/s", f"{100 * gbs / args.peak_gbs:.0f}% of peak"))
    print(f"  elementwise plan: {[p.opts for p in programs]}")

    # 2. matmul against torch
    try:
        import torch

        has_torch = torch.cuda.is_available()
    except ImportError:
        has_torch = False
    size = 1024 if args.quick else 4096
    flop = 2 * size**3
    cases = ((dtypes.float32, "fp32", False), (dtypes.float16, "fp16", False), (dtypes.float16, "fp16", True))
    for dt, name, weight in cases:
        np_dt = np.float32 if dt is dtypes.float32 else np.float16
        x_np = rng.standard_normal((size, size)).astype(np_dt)
        w_np = rng.standard_normal((size, size)).astype(np_dt)
        y_np = np.ascontiguousarray(w_np.T) if weight else w_np  # the same product; y is w.T's view when `weight`
        x, w = Tensor(x_np, device="CUDA"), Tensor(w_np, device="CUDA")
        launch, programs, out = kernels_of(x @ w.T if weight else x @ w)
        s = batch_time(launch, sync, 0.5)
        ours = flop / s * 1e-9
        ref = ""
        if has_torch:
            tx, tw = torch.from_numpy(x_np).cuda(), torch.from_numpy(w_np).cuda()
            ty = tw.T if weight else tw
            st = batch_time(functools.partial(torch.matmul, tx, ty), torch.cuda.synchronize, 0.5)
            theirs = flop / st * 1e-9
            ref = f"torch {theirs:.0f} GFLOP/s, ours/torch {ours / theirs:.2f}"
            got = out.numpy().reshape(size, size)[:64].astype(np.float32)
            want = (tx[:64].float() @ ty.float()).cpu().numpy()
            err = float(np.abs(got - want).max() / np.abs(want).max())
            ref += f", max rel err {err:.1e}"
        else:
            want = x_np[:64].astype(np.float32) @ y_np.astype(np.float32)
            err = float(np.abs(out.numpy().reshape(size, size)[:64] - want).max() / np.abs(want).max())
            ref = f"max rel err {err:.1e}"
        label = f"{name} x @ w.T" if weight else f"{name} matmul"
        rows.append((label, f"{size}^3", f"{ours:.0f} GFLOP/s", ref))
        print(f"  {label} plan: {[p.opts for p in programs]}")

    if args.sweep:
        sweep(size, sync, rng, args.experiments)

    # 3. first call of a new kernel
    for device in [d for d in ("CUDA", "PTX") if Device.usable(d)]:
        total, phases = first_call(device, rng)
        rows.append((f"first call {device}", "new kernel", f"{total * 1e3:.1f} ms", phases))
    fresh = f'extern "C" __global__ void k(float* a) {{ a[threadIdx.x] *= {rng.uniform(1, 2)}f; }}'
    t0 = time.perf_counter()
    compile_cuda(fresh, dev.arch)
    rows.append(("NVRTC", "tiny kernel", f"{(time.perf_counter() - t0) * 1e3:.1f} ms", ""))

    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)))


if __name__ == "__main__":
    main()
