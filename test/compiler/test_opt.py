"""The kernel optimizer: plans (lists of `Opt`) applied to kernel ASTs, checked against numpy.

The fuzz test applies random plans to random kernels (elementwise, reductions, matmul-shaped, padded and
strided reads) and runs them on the CPU and the PYTHON device; every plan either gives numpy's answer or is
refused with an OptError before any code is made.
"""

from __future__ import annotations

import copy
import math
import os
import random
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from zeptograd import Context, Device, Tensor
from zeptograd.codegen import get_program
from zeptograd.codegen.heuristic import hand_coded_opts
from zeptograd.codegen.kernel_shape import global_reads
from zeptograd.codegen.lowering import _any_lane
from zeptograd.codegen.opt import KernelInfo, Opt, OptError, OptOps, apply_opts, output_axes, reduce_axes
from zeptograd.dtype import dtypes
from zeptograd.engine.facts import device_facts
from zeptograd.renderer import Renderer
from zeptograd.runtime.buffer import buffer_for
from zeptograd.schedule.kernelize import create_schedule
from zeptograd.uop.ops import Ops, UOp


def _cpu_float_lanes() -> int:
    """The float32 lanes of the CPU device's vectors (8 with AVX2, 16 with AVX-512)."""
    return Device["CPU"].renderer.max_lanes(Ops.ADD, dtypes.float32)


def _kernel(t: Tensor, device: str = "CPU"):
    items, _ = create_schedule([t.uop], [device], device_facts)
    assert len(items) == 1, "the test expressions are one kernel each"
    return items[0]


def run_plan(t: Tensor, opts: list[Opt], device: str = "CPU") -> np.ndarray:
    """The value of one-kernel expression `t`, computed by its kernel with plan `opts`."""
    _kernel(t, device)  # one kernel
    return run_last_plan(t, opts, device)


def run_last_plan(t: Tensor, opts: list[Opt], device: str = "CPU", planned: int = -1) -> np.ndarray:
    """The value of `t`, its last kernel (or kernel number `planned`) run with plan `opts` (the other kernels,
    copies, with their own)."""
    items, _ = create_schedule([t.uop], [device], device_facts)
    planned %= len(items)
    for i, item in enumerate(items):
        program = get_program(item.ast, Device[device].renderer, opts if i == planned else None)
        bufs = [buffer_for(b) for b in item.bufs]
        for b in bufs:
            b.array()
        Device[device].runner(program)(bufs)
    return bufs[0].numpy()[: int(np.prod(t.shape))].reshape(t.shape)


def _cpu_renderer(**facts: int):
    """The CPU device's renderer with some of its facts (cache sizes) another machine's."""
    renderer = copy.copy(Device["CPU"].renderer)
    for name, value in facts.items():
        setattr(renderer, name, value)
    return renderer


def _inputs(*shapes: tuple[int, ...], seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float32) for s in shapes]


# (name, numpy inputs, zeptograd expression, numpy oracle): each is one kernel
def _cases():
    a, b = _inputs((12, 10), (10, 8))
    yield "matmul", (a, b), lambda x, y: x @ y, lambda x, y: x @ y
    (c,) = _inputs((6, 16))
    yield "elementwise", (c,), lambda x: (x * 2 + 1).maximum(0), lambda x: np.maximum(x * 2 + 1, 0)
    yield "sum rows", (c,), lambda x: x.sum(1), lambda x: x.sum(1)
    yield "sum cols", (c,), lambda x: x.sum(0), lambda x: x.sum(0)
    yield "max rows", (c,), lambda x: x.max(1), lambda x: x.max(1)
    (d,) = _inputs((7, 9))
    yield "padded", (d,), lambda x: x.pad(((1, 2), (0, 3))) * 3, lambda x: np.pad(x, ((1, 2), (0, 3))) * 3
    yield "strided", (d,), lambda x: x[::2, ::-1] + 1, lambda x: x[::2, ::-1] + 1
    yield "transpose sum", (d,), lambda x: (x.T * x.T).sum(1), lambda x: (x.T * x.T).sum(1)
    e, f = _inputs((3, 5, 6), (3, 6, 4))
    yield "batched matmul", (e, f), lambda x, y: x @ y, lambda x, y: x @ y
    (g,) = _inputs((15,))
    yield "odd 1d", (g,), lambda x: x * x - 2, lambda x: x * x - 2
    (h,) = _inputs((4, 6, 5))
    yield "sum middle", (h,), lambda x: x.sum(1) * 2, lambda x: x.sum(1) * 2


CASES = list(_cases())


def _random_opt(rng: random.Random, ast) -> Opt:
    outs, reds = output_axes(ast), reduce_axes(ast)
    op = rng.choice([OptOps.UPCAST, OptOps.UPCAST, OptOps.UNROLL, OptOps.THREAD, OptOps.SWAP, OptOps.PADTO])
    if op is OptOps.UNROLL:
        return Opt(op, rng.randrange(max(len(reds), 1) + 1), rng.choice([0, 2, 3, 4, 5, 8]))
    if op is OptOps.SWAP:
        return Opt(op, rng.randrange(max(len(outs), 1) + 1), rng.randrange(max(len(outs), 1) + 1))
    if op is OptOps.PADTO:
        return Opt(op, rng.randrange(len(outs) + len(reds) + 1), rng.choice([2, 3, 4, 8]))
    return Opt(op, rng.randrange(max(len(outs), 1) + 1), rng.choice([0, 2, 3, 4, 6, 8, 16]))


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_random_plans_match_numpy(case):
    name, arrays, expr, oracle = case
    expected = oracle(*[x.astype(np.float64) for x in arrays])
    rng = random.Random(name)
    for trial in range(12):
        device = "PYTHON" if trial % 4 == 3 else "CPU"
        tensors = [Tensor(x, device=device).realize() for x in arrays]
        t = expr(*tensors)
        ast = _kernel(t, device).ast
        plan: list[Opt] = []
        for _ in range(rng.randrange(1, 5)):
            opt = _random_opt(rng, ast)
            try:
                ast = apply_opts(ast, [opt])
            except OptError as e:
                assert opt.op.name in str(e)  # refused, and the message names the opt
                continue
            plan.append(opt)
        got = run_plan(t, plan, device)
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5, err_msg=f"{name} {device} {plan}")


def test_invalid_plans_are_refused_naming_the_opt_and_axis():
    x = Tensor(np.ones((6, 10), np.float32)).realize()
    ast = _kernel(x.sum(1)).ast
    with pytest.raises(OptError, match=r"UPCAST, 0, 4\).*4 does not divide the axis size 6"):
        apply_opts(ast, [Opt(OptOps.UPCAST, 0, 4)])
    with pytest.raises(OptError, match=r"UPCAST, 3, 2\).*axis 3 out of range: the kernel has 1 output axes"):
        apply_opts(ast, [Opt(OptOps.UPCAST, 3, 2)])
    with pytest.raises(OptError, match=r"UNROLL, 1, 2\).*axis 1 out of range"):
        apply_opts(ast, [Opt(OptOps.UNROLL, 1, 2)])
    with pytest.raises(OptError, match="the CPU does not have it"):
        apply_opts(ast, [Opt(OptOps.LOCAL, 0, 2)])
    with pytest.raises(OptError, match="split across threads already"):
        apply_opts(ast, [Opt(OptOps.THREAD, 0, 2), Opt(OptOps.THREAD, 0, 3)])
    with pytest.raises(OptError, match="SWAP needs another output axis"):
        apply_opts(ast, [Opt(OptOps.SWAP, 0, 0)])
    with pytest.raises(TypeError, match="Opt"):
        apply_opts(ast, [("UPCAST", 0, 2)])  # type: ignore[list-item]


def test_plan_is_recorded_on_the_sink_and_shown_with_debug_3(capsys):
    a, b = (Tensor(x).realize() for x in _inputs((8, 8), (8, 16)))
    item = _kernel(a @ b)
    plan = [Opt(OptOps.UPCAST, 0, 2), Opt(OptOps.UNROLL, 0, 4)]
    sink = apply_opts(item.ast, plan)
    assert isinstance(sink.arg, KernelInfo) and sink.arg.opts == tuple(plan) and sink.arg.name == "r_8_16"
    with Context(DEBUG=3):
        program = get_program(item.ast, Device["CPU"].renderer, plan)
    assert program.opts == tuple(plan)
    assert "r_8_16: [Opt(OptOps.UPCAST, 0, 2), Opt(OptOps.UNROLL, 0, 4)]" in capsys.readouterr().out


def test_noopt_gives_scalar_kernels_and_the_same_values():
    a, b = _inputs((16, 32), (32, 16))
    with Context(NOOPT=1):
        item = _kernel(Tensor(a).realize() @ Tensor(b).realize())
        program = get_program(item.ast, Device["CPU"].renderer)
        plain = (Tensor(a) @ Tensor(b)).numpy()
    assert program.opts == () and program.chunks == 1
    assert not any(u.dtype.count > 1 for u in program.uops)
    optimized = (Tensor(a) @ Tensor(b)).numpy()
    np.testing.assert_allclose(plain, a.astype(np.float64) @ b, rtol=1e-5)
    np.testing.assert_allclose(optimized, plain, rtol=1e-5, atol=1e-6)


def test_heuristic_tiles_matmul_and_vectorizes():
    a, b = (Tensor(x).realize() for x in _inputs((64, 32), (32, 64)))
    item = _kernel(a @ b)
    renderer = Device["CPU"].renderer
    with Context(THREADS=2):
        opts = hand_coded_opts(item.ast, renderer)
    # a tile of rows x two vectors: 6 x 16 with AVX2 (16 registers; 64 rows padded to 66), 8 x 32 with AVX-512 (32)
    lanes = _cpu_float_lanes()
    rows = 8 if lanes == 16 else 6
    assert Opt(OptOps.UPCAST, 0, rows) in opts and Opt(OptOps.UPCAST, 1, 2 * lanes) in opts
    assert (Opt(OptOps.PADTO, 0, 6) in opts) == (rows == 6), opts
    src = get_program(item.ast, renderer, opts).src
    assert f"float{lanes} acc0[1];" in src and "vfmaddps" in src  # vector accumulators, fused multiply-adds
    assert re.search(rf"\(\*\(const float{lanes}_u\*\)&data2\[", src)  # a contiguous vector load of the B tile
    assert src.count("vfmaddps") == 2 * rows  # the inner loop: one FMA per accumulator


def test_threads_do_not_change_elementwise_results_and_reductions_are_deterministic(monkeypatch):
    monkeypatch.setattr(Device["CPU"].renderer, "thread_min_work", 0)  # split however small
    (x,) = _inputs((64, 4096))
    results = {}
    for threads in (1, 2, 4):
        with Context(THREADS=threads, NOOPT=0):
            t = Tensor(x)
            item = _kernel((t * 3 - 1).exp2())
            program = get_program(item.ast, Device["CPU"].renderer)
            # THREADS cores take the kernel's chunks: a few a core, or one call where there is one core
            assert program.chunks % threads == 0 and (program.chunks > 1) == (threads > 1), program.chunks
            results[threads] = ((Tensor(x) * 3 - 1).exp2().numpy(), Tensor(x).sum(1).numpy())
    for threads in (2, 4):
        np.testing.assert_array_equal(results[threads][0], results[1][0])
    np.testing.assert_allclose(results[2][1], x.astype(np.float64).sum(1), rtol=1e-5, atol=1e-4)
    with Context(THREADS=2, NOOPT=0):
        again = [Tensor(x).sum(1).numpy() for _ in range(3)]
    for r in again:
        np.testing.assert_array_equal(r, results[2][1])


def test_python_device_agrees_with_cpu_bit_for_bit_on_vector_kernels():
    # the same linear program on both devices, fused multiply-adds and vector accumulators included
    a, b = _inputs((8, 12), (12, 16), seed=3)
    plan = [Opt(OptOps.UPCAST, 0, 2), Opt(OptOps.UPCAST, 1, 8), Opt(OptOps.UNROLL, 0, 4), Opt(OptOps.THREAD, 0, 2)]
    got = {
        d: run_plan(Tensor(a, device=d).realize() @ Tensor(b, device=d).realize(), plan, d) for d in ("CPU", "PYTHON")
    }
    np.testing.assert_array_equal(got["CPU"], got["PYTHON"])
    np.testing.assert_allclose(got["CPU"], a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)


def test_padto_gates_the_extra_iterations():
    (x,) = _inputs((5, 7))
    t = Tensor(x).realize()
    for plan in (
        [Opt(OptOps.PADTO, 0, 8), Opt(OptOps.UPCAST, 0, 8)],
        [Opt(OptOps.PADTO, 1, 4), Opt(OptOps.UNROLL, 0, 4)],
    ):
        np.testing.assert_allclose(run_plan(t.max(1), plan), x.max(1), rtol=1e-6)
        np.testing.assert_allclose(run_plan((t * 2).exp2().sum(1), plan), np.exp2(x * 2.0).sum(1), rtol=1e-5)
    item = _kernel(t.sum(1))
    program = get_program(item.ast, Device["CPU"].renderer, [Opt(OptOps.PADTO, 1, 4)])
    # the padded iterations add the identity: their gated-off loads read as 0 (the gate is the padding's, so no
    # WHERE is left around the load)
    gated = [u for u in _global_loads(program) if len(u.src[0].src) == 3]
    assert gated and all(u.src[1].op is Ops.CONST and u.src[1].arg == 0 for u in gated)
    # max's identity is not the load's fallback 0: there the padded iterations still take -inf
    program = get_program(_kernel(t.max(1)).ast, Device["CPU"].renderer, [Opt(OptOps.PADTO, 1, 4)])
    assert any(u.op is Ops.WHERE and u.src[2].op is Ops.CONST and u.src[2].arg == -math.inf for u in program.uops)


@pytest.mark.parametrize("device", ["CPU", "PYTHON"])
def test_vector_ops_are_exact(device):
    # every op the C renderer does on vectors (masks, selects, int max, shifts, sqrt, trunc, casts), in kernels
    # the heuristic upcasts to 8 lanes, bit for bit against numpy: NaN, infinities and signed zeros included
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((2, 16, 64)).astype(np.float32)
    x[0, :5] = [np.nan, np.inf, -np.inf, 0.0, -0.0]
    xi = rng.integers(-100, 100, (16, 64)).astype(np.int32)
    b = rng.random((16, 64)) < 0.5
    X, Y, XI, B = (Tensor(v, device=device) for v in (x, y, xi, b))
    cases = [
        ((X > Y).where(X, Y * 2), np.where(x > y, x, y * 2)),
        (X.maximum(Y), np.maximum(x, y)),
        (XI.maximum(XI * 3 - 5), np.maximum(xi, xi * 3 - 5)),
        (XI << 3, xi << 3),
        (X.abs().sqrt(), np.sqrt(np.abs(x))),
        (X.trunc(), np.trunc(x)),
        (X != X, x != x),
        ((X > 0).float() + XI.float(), (x > 0).astype(np.float32) + xi.astype(np.float32)),
        (
            (X.double() > Y.double()).where(X.double(), 1.0),
            np.where(x.astype(np.float64) > y, x.astype(np.float64), 1.0),
        ),
        (B < True, b < True),
        (B.maximum(B == False), np.maximum(b, ~b)),  # noqa: E712
        (X.max(1), x.max(1)),
    ]
    for got, want in cases:
        out = got.numpy()
        assert out.dtype == want.dtype
        np.testing.assert_array_equal(out, want)
        if out.dtype.kind == "f":
            np.testing.assert_array_equal(np.signbit(out[~np.isnan(out)]), np.signbit(want[~np.isnan(want)]))


def test_beam_search_finds_a_plan_and_caches_it(monkeypatch, tmp_path):
    from zeptograd.engine import realize as engine
    from zeptograd.engine import search

    monkeypatch.setenv("ZEPTOGRAD_CACHE_DIR", str(tmp_path))
    a, b = _inputs((8, 8), (8, 16), seed=5)
    item = _kernel(Tensor(a).realize() @ Tensor(b).realize())
    timed: list[list[Opt]] = []
    time_plan = search._Timer.time

    def fake_time(self, opts, runs=3):
        # compile and run each plan for real, but score it by its length up to 2 opts: the search must then return
        # a plan of 2 opts (real timings on a shared machine would make the winner a coin toss)
        timed.append(opts)
        time_plan(self, opts, 1)
        return 1.0 / (1 + min(len(opts), 2))

    monkeypatch.setattr(search._Timer, "time", fake_time)
    with Context(BEAM=2):
        plan = search.beam_search(item.ast, Device["CPU"].renderer, 2)
        assert len(timed) > 10 and len(plan) == 2
        got = run_plan(Tensor(a).realize() @ Tensor(b).realize(), plan)
        np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
        assert list(tmp_path.glob("beam/cpu_*.json"))
        timed.clear()
        assert search.beam_search(item.ast, Device["CPU"].renderer, 2) == plan and not timed  # from the disk cache
        monkeypatch.setattr(engine, "kernel_log", [])
        out = (Tensor(a) @ Tensor(b)).numpy()  # BEAM=2 through realize: the engine compiles with the cached plan
        assert not timed and [program.opts for program, _ in engine.kernel_log] == [tuple(plan)]
    np.testing.assert_allclose(out, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("device", ["CPU", "PYTHON"])
def test_threads_on_loops_no_count_divides(device, monkeypatch):
    # 7 rows and 3 threads: the row loop is padded to 9 and gated; the gate is the same for the 8 lanes of a
    # row's vectors, so the reads and writes stay vector accesses
    unknown = Renderer()  # a device nothing is known of: 8-lane vectors
    unknown.thread_min_work = 0  # a small kernel, split all the same
    (x,) = _inputs((7, 64), seed=9)
    t = Tensor(x, device=device).realize()
    with Context(THREADS=3, NOOPT=0):
        item = _kernel(t * 3 - 1, device)
        opts = hand_coded_opts(item.ast, unknown)
        assert opts == [Opt(OptOps.UPCAST, 1, 8), Opt(OptOps.PADTO, 0, 3), Opt(OptOps.THREAD, 0, 3)]
        program = get_program(item.ast, Device[device].renderer, opts)
        np.testing.assert_array_equal(run_plan(t * 3 - 1, opts, device), x * 3 - 1)
    if device == "CPU":
        assert re.search(r"\? \(\*\(const float8_u\*\)&data1\[", program.src)  # a gated vector load
        assert program.chunks == 3  # 9 rows of 448 element operations: too little for more chunks


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_runs_threaded_kernels():
    # the parent's pool threads do not exist in a child: it must make its own (and not hang on the old one)
    (x,) = _inputs((64, 4096), seed=11)
    with Context(THREADS=2, NOOPT=0):
        np.testing.assert_allclose((Tensor(x) * 2).numpy(), x * 2)  # the pool is made here
        pid = os.fork()
        if pid == 0:
            ok = np.allclose((Tensor(x) * 3).numpy(), x * 3)
            os._exit(0 if ok else 1)
    deadline = time.monotonic() + 60
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    if done[0] == 0:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        pytest.fail("the forked child hung running a threaded kernel")
    assert os.WIFEXITED(done[1]) and os.WEXITSTATUS(done[1]) == 0


@pytest.mark.parametrize(
    "l1, l2, tile",
    [
        (8 << 10, 1 << 20, [4, 64]),  # the 36 KiB panel of all 64 channels within a quarter of L2: 4 x 4 vectors
        (8 << 10, 64 << 10, [2, 8, 16]),  # not within it: one vector by 2 rows by the row's 8 columns
        (1 << 30, 1 << 20, [8, 32]),  # an L1 that holds the 2-vector panel: 2 vectors by 8 columns
    ],
)
def test_convolution_tile_follows_where_its_weight_panel_fits(l1, l2, tile, monkeypatch):
    """A convolution summing 16 channels x 9 taps into 64, its weight channels-last: a panel of 32 output channels (18
    KiB of weights) overflows an 8 KiB L1. Where the panel of all 64 output channels (36 KiB) stays in L2, the tile is 4
    vectors of channels by 4 columns (each broadcast input serves 4 FMAs from a register); else one vector of 16
    channels by 2 output rows (which the weight ignores: each weight vector serves twice the FMAs) by the columns; with
    an L1 that holds the 2-vector panel, the tile stays 2 vectors wide. The values are numpy's whichever plan,
    on the CPU and on the PYTHON device (the reference semantics)."""
    from zeptograd.schedule import layout

    x, w = _inputs((1, 16, 2, 8), (64, 16, 3, 3), seed=31)
    windows = np.lib.stride_tricks.sliding_window_view(np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1))), (3, 3), (2, 3))
    want = np.einsum("ncyxij,ocij->noyx", windows.astype(np.float64), w)
    monkeypatch.setattr(layout, "PAD_COPY_MIN", 0)  # a large convolution's layouts for a small input too
    t = Tensor(x).realize().conv2d(Tensor(w).realize(), padding=1)
    items, _ = create_schedule([t.uop], ["CPU"], device_facts)
    opts = hand_coded_opts(items[-1].ast, _cpu_renderer(l1_bytes=l1, l2_bytes=l2), 16)
    assert sorted(o.amount for o in opts if o.op is OptOps.UPCAST) == tile, opts
    for device in ("CPU", "PYTHON"):
        np.testing.assert_allclose(run_last_plan(t, opts, device), want, rtol=1e-4, atol=1e-4)


def _conv_oracle(x: np.ndarray, w: np.ndarray, pad: int, stride: int) -> np.ndarray:
    """Cross-correlation in float64 by numpy: every window of the zero-padded input times the weight."""
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    windows = np.lib.stride_tricks.sliding_window_view(xp, w.shape[2:], (2, 3))[:, :, ::stride, ::stride]
    return np.einsum("ncyxij,ocij->noyx", windows, w)


@pytest.mark.parametrize("pad, stride", [(1, 1), (1, 2), (0, 1)])
def test_a_convolution_reads_its_input_where_it_lies(pad, stride, monkeypatch):
    """On the CPU device a large convolution reads its NCHW input in place: one copy (of the weight, channels-last)
    before it, not two. Its tile is 4 columns by 4 vectors of output channels (30 columns padded to 32, 15 to 16),
    its loop over input channels innermost, and each input value is one scalar load (gated where the padding is)
    broadcast to a vector, not a lane of a vector load. The values are numpy's, on the CPU and on the PYTHON device (the
    reference semantics) with the same plan."""
    from zeptograd.engine import facts as facts_module
    from zeptograd.schedule import layout

    monkeypatch.setattr(layout, "PAD_COPY_MIN", 0)  # a small input takes the large one's path too
    monkeypatch.setattr(facts_module, "padded_reads_in_place", lambda device: True)  # as with AVX-512, any CPU
    # the 2-vector weight panel (18 KiB) overflows L1, the 4-vector one (36 KiB) fits a quarter of L2
    renderer = _cpu_renderer(l1_bytes=8 << 10, l2_bytes=1 << 20)
    x, w = _inputs((2, 16, 4, 30 + 2 * (1 - pad)), (64, 16, 3, 3), seed=41)
    t = Tensor(x).realize().conv2d(Tensor(w).realize(), padding=pad, stride=stride)
    items, _ = create_schedule([t.uop], ["CPU"], device_facts)
    assert len(items) == 2, [item.ast.arg for item in items]  # the weight's copy, then the convolution
    ast = items[-1].ast
    opts = hand_coded_opts(ast, renderer, 16)
    columns = t.shape[3]
    assert sorted(o.amount for o in opts if o.op is OptOps.UPCAST) == [4, 64], opts
    assert any(o.op is OptOps.PADTO for o in opts) == (columns % 4 != 0), opts
    program = get_program(ast, Device["CPU"].renderer, opts)
    inputs = [u for u in _global_loads(program) if u.src[0].src[0].arg == 1]
    assert inputs and all(u.dtype.count == 1 for u in inputs), [u.dtype for u in inputs]
    assert all(len(u.src[0].src) == 3 for u in inputs) == (pad == 1)  # gated where the padding is
    # the loop over the 16 input channels is the innermost one
    ranges = [u for u in program.uops if u.op is Ops.RANGE]
    assert ranges[-1].src[0].arg == 16, [r.src[0].arg for r in ranges]
    want = _conv_oracle(x, w, pad, stride)
    for device in ("CPU", "PYTHON"):
        np.testing.assert_allclose(run_last_plan(t, opts, device), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("lanes", [8, 16])
def test_a_value_of_the_input_channel_fused_into_a_convolution_keeps_its_tile(lanes):
    """A per-channel bias added to a convolution's input (an ONNX model's folded BatchNorm before a relu) fuses
    into the convolution as a read indexed by the input channel alone: it is neither the weight nor the input, and
    the plan is the one of the convolution of the relu alone (the register tile of columns by vectors of output
    channels). The values are numpy's."""
    x, w, b = _inputs((1, 16, 8, 32), (64, 16, 2, 2), (16,), seed=46)
    t = (Tensor(x).realize() + Tensor(b).realize().reshape(1, -1, 1, 1)).relu().conv2d(Tensor(w).realize(), stride=2)
    ast = create_schedule([t.uop], ["CPU"], device_facts)[0][-1].ast
    assert any(len(r.loops) and not any(o in r.loops for o in output_axes(ast)) for r in global_reads(ast))
    alone = Tensor(x).realize().relu().conv2d(Tensor(w).realize(), stride=2)
    alone_ast = create_schedule([alone.uop], ["CPU"], device_facts)[0][-1].ast
    opts = hand_coded_opts(ast, Device["CPU"].renderer, lanes)
    assert opts == hand_coded_opts(alone_ast, Device["CPU"].renderer, lanes), opts
    assert len([o for o in opts if o.op is OptOps.UPCAST]) == 2, opts
    want = _conv_oracle(np.maximum(x + b.reshape(1, -1, 1, 1), 0), w, 0, 2)
    np.testing.assert_allclose(run_last_plan(t, opts), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("lanes", [8, 16])
def test_a_one_by_one_convolution_tiles_vectors_of_its_output_channels(lanes):
    """A 1x1 convolution has one reduce axis (its input channels) and writes NCHW, where its output channels are not
    contiguous: its tile is still vectors of output channels (from its channels-last weight) by columns, not one
    vector accumulator. The values are numpy's."""
    x, w = _inputs((1, 64, 14, 14), (128, 64, 1, 1), seed=47)
    t = Tensor(x).realize().conv2d(Tensor(w).realize())
    ast = create_schedule([t.uop], ["CPU"], device_facts)[0][-1].ast
    assert len(reduce_axes(ast)) == 1
    opts = hand_coded_opts(ast, Device["CPU"].renderer, lanes)
    upcasts = {o.axis: o.amount for o in opts if o.op is OptOps.UPCAST}
    sizes = [r.src[0].arg for r in output_axes(ast)]
    channels = sizes.index(128)
    assert len(upcasts) >= 2 and upcasts[channels] % lanes == 0, opts
    np.testing.assert_allclose(run_last_plan(t, opts), _conv_oracle(x, w, 0, 1), rtol=1e-4, atol=1e-4)


def test_a_narrow_convolution_pads_an_odd_number_of_rows(monkeypatch):
    """A convolution whose weight panel overflows L1 tiles one vector of output channels by columns and by rows of
    the output (each weight vector then serves them all); a 7 x 7 map's 7 rows are padded to 8 for 4 rows of the 7
    columns, not left at one row. The values are numpy's, on the CPU and on the PYTHON device."""
    from zeptograd.schedule import layout

    monkeypatch.setattr(layout, "PAD_COPY_MIN", 0)  # a small input takes the large one's path too
    x, w = _inputs((1, 32, 7, 7), (64, 32, 3, 3), seed=48)
    t = Tensor(x).realize().conv2d(Tensor(w).realize(), padding=1)
    ast = create_schedule([t.uop], ["CPU"], device_facts)[0][-1].ast
    # a 36 KiB panel of 32 output channels overflows 8 KiB; 64 channels' 72 KiB is over a quarter of 64 KiB of L2
    opts = hand_coded_opts(ast, _cpu_renderer(l1_bytes=8 << 10, l2_bytes=64 << 10), 16)
    sizes = [r.src[0].arg for r in output_axes(ast)]
    rows = next(i for i, r in enumerate(output_axes(ast)) if r.src[0].arg == 7 and i != len(sizes) - 1)
    assert Opt(OptOps.PADTO, rows, 2) in opts, opts
    assert sorted(o.amount for o in opts if o.op is OptOps.UPCAST) == [4, 7, 16], opts
    for device in ("CPU", "PYTHON"):
        np.testing.assert_allclose(run_last_plan(t, opts, device), _conv_oracle(x, w, 1, 1), rtol=1e-4, atol=1e-4)


def test_a_convolution_tile_fits_sixteen_vector_registers(monkeypatch):
    """With 8-lane vectors (AVX2: 16 vector registers) a convolution whose 2-vector weight panel overflows L1 keeps
    the tile of 4 columns by 2 vectors of output channels (8 accumulators), not AVX-512's 4 by 4 (16 accumulators
    and the operands: spilled to the stack). The values are numpy's."""
    from zeptograd.schedule import layout

    monkeypatch.setattr(layout, "PAD_COPY_MIN", 0)  # a small input takes the large one's path too
    renderer = _cpu_renderer(l1_bytes=4 << 10, l2_bytes=1 << 20)  # the 2-vector panel (9 KiB) overflows L1
    x, w = _inputs((2, 16, 4, 32), (64, 16, 3, 3), seed=44)
    t = Tensor(x).realize().conv2d(Tensor(w).realize(), padding=1)
    ast = create_schedule([t.uop], ["CPU"], device_facts)[0][-1].ast
    opts = hand_coded_opts(ast, renderer, 8)
    assert sorted(o.amount for o in opts if o.op is OptOps.UPCAST) == [4, 16], opts
    wide = hand_coded_opts(ast, renderer, 16)
    assert sorted(o.amount for o in wide if o.op is OptOps.UPCAST) == [4, 64], wide
    np.testing.assert_allclose(run_last_plan(t, opts), _conv_oracle(x, w, 1, 1), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "shape, upcasts",
    [
        ((8, 16, 7, 7), [4, 16]),  # 7 columns: no divisor, so 4 images by 2 vectors of channels
        ((2, 16, 14, 14), [2, 2, 16]),  # 14 columns: 2 of them by 2 output rows by 2 vectors
    ],
)
def test_a_narrow_convolution_fills_its_tile_from_rows_or_images(shape, upcasts, monkeypatch):
    """With AVX2's tile of 4 rows by 2 vectors, a convolution whose output rows are too short for 4 columns takes
    the rest of its rows from an axis the weight ignores (output rows, or images), not a tile of 2 or fewer
    accumulators. The values are numpy's."""
    from zeptograd.schedule import layout

    monkeypatch.setattr(layout, "PAD_COPY_MIN", 0)  # a small input takes the large one's path too
    x, w = _inputs(shape, (32, 16, 3, 3), seed=45)
    t = Tensor(x).realize().conv2d(Tensor(w).realize(), padding=1)
    ast = create_schedule([t.uop], ["CPU"], device_facts)[0][-1].ast
    opts = hand_coded_opts(ast, Device["CPU"].renderer, 8)
    assert sorted(o.amount for o in opts if o.op is OptOps.UPCAST) == upcasts, opts
    np.testing.assert_allclose(run_last_plan(t, opts), _conv_oracle(x, w, 1, 1), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "shape, upcasts",
    [
        ((8, 16, 56, 56), [2, 2, 16]),  # 14 tiles a row: 2 of them by 2 rows of tiles by 2 vectors of channels
        ((8, 16, 28, 28), [4, 16]),  # 7 tiles a row: no divisor, so 4 images by 2 vectors
    ],
)
def test_a_winograd_matmul_fills_its_tile_from_rows_or_images(shape, upcasts):
    """Winograd's matmul of each of the 36 transformed positions (one reduce axis, the input channels) over tiles
    of (images, rows of tiles, tiles) takes the same AVX2 tile as a narrow convolution: 4 rows by 2 vectors, the
    rows from two output axes where the innermost alone has too few (bench/ops.py's layer, that kernel: 4.4-5.2 ->
    3.3-4.2 ms; 28x28 with 128 channels 9.6-10.0 -> 3.8-4.4). The values are numpy's direct convolution."""
    x, w = _inputs(shape, (32, shape[1], 3, 3), seed=47)
    with Context(WINO=1):
        t = Tensor(x).realize().conv2d(Tensor(w).realize(), padding=1)
        items = create_schedule([t.uop], ["CPU"], device_facts)[0]
    # the matmul: (6, 6, images, rows of tiles, tiles, 1, filters), summed over the input channels
    matmul = next(i for i, it in enumerate(items) if it.ast.arg.endswith(f"_1_{w.shape[0]}"))
    opts = hand_coded_opts(items[matmul].ast, Device["CPU"].renderer, 8)
    assert sorted(o.amount for o in opts if o.op is OptOps.UPCAST) == upcasts, opts
    with Context(WINO=1):
        got = run_last_plan(t, opts, planned=matmul)
    np.testing.assert_allclose(got, _conv_oracle(x, w, 1, 1), rtol=1e-3, atol=1e-3)


def test_a_swap_of_two_reductions_loops_is_refused():
    """A kernel with two reductions (a.sum(1) + b.sum(1)): SWAP of a loop of one with a loop of the other is refused
    with an error naming both axes, not a plan the linearizer cannot place (each REDUCE's loops nest inside it);
    the heuristic's plan for such a kernel gives numpy's values."""
    a, b = _inputs((4, 8), (4, 6), seed=46)
    t = Tensor(a).realize().sum(1) + Tensor(b).realize().sum(1)
    ast = _kernel(t).ast
    assert sum(u.op is Ops.REDUCE for u in ast.toposort()) == 2 and len(reduce_axes(ast)) == 2
    with pytest.raises(OptError, match="SWAP of reduce axes 1 and 2: they belong to different reductions"):
        apply_opts(ast, [Opt(OptOps.SWAP, 1, 2)])
    plan = hand_coded_opts(ast, Device["CPU"].renderer)
    want = a.astype(np.float64).sum(1) + b.astype(np.float64).sum(1)
    np.testing.assert_allclose(run_plan(t, plan), want, rtol=1e-5, atol=1e-6)


def test_a_padded_read_is_its_gated_load():
    """A read of zero padding is the load gated by the padding's condition, whose fallback is the 0 itself: no
    WHERE around it. Padding around a value that is not 0 at 0 (exp) keeps its WHERE. Values are numpy's."""
    (a,) = _inputs((3, 14), seed=43)
    t = Tensor(a).realize()
    padded = t.pad(((0, 0), (1, 1))) * 2
    program = get_program(_kernel(padded).ast, Device["CPU"].renderer, [])
    assert not any(u.op is Ops.WHERE for u in program.uops)
    np.testing.assert_array_equal(run_plan(padded, []), np.pad(a, ((0, 0), (1, 1))) * 2)
    padded_exp = t.exp().pad(((0, 0), (1, 1)))
    program = get_program(_kernel(padded_exp).ast, Device["CPU"].renderer, [])
    assert any(u.op is Ops.WHERE for u in program.uops)
    np.testing.assert_allclose(run_plan(padded_exp, []), np.pad(np.exp(a), ((0, 0), (1, 1))), rtol=1e-6)


@pytest.mark.parametrize(
    "shape, axis, by",
    [
        ((2, 16, 6, 7), 2, 2),  # two output rows (4 do not divide 6)
        ((2, 16, 4, 7), 2, 4),  # four rows of 7 columns: 28 accumulators
        ((2, 16, 3, 7), 0, 2),  # 3 rows, odd: two images instead
        ((4, 16, 3, 7), 0, 4),  # four images of 7 columns: 28 accumulators
        ((3, 16, 3, 7), None, 1),  # no even axis the weight ignores: the 7 columns alone
    ],
)
def test_convolution_of_one_channel_vector_takes_rows_the_weight_ignores(shape, axis, by, monkeypatch):
    """The narrow convolution tile (one vector of output channels, here forced by an 8 KiB L1) grows along an
    output axis that the weight does not depend on, up to 28 accumulators, so each weight vector it loads serves
    several times the FMAs; the values are numpy's on the CPU and on the PYTHON device (the reference semantics),
    whichever axis it takes."""
    from zeptograd.schedule import layout

    renderer = _cpu_renderer(l1_bytes=8 << 10)  # a 32-channel panel of 16 x 9 taps is 18 KiB
    monkeypatch.setattr(layout, "PAD_COPY_MIN", 0)  # a large convolution's layouts for a small input too
    x, w = _inputs(shape, (32, 16, 3, 3), seed=37)
    windows = np.lib.stride_tricks.sliding_window_view(np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1))), (3, 3), (2, 3))
    want = np.einsum("ncyxij,ocij->noyx", windows.astype(np.float64), w)
    t = Tensor(x).realize().conv2d(Tensor(w).realize(), padding=1)
    items, _ = create_schedule([t.uop], ["CPU"], device_facts)
    opts = hand_coded_opts(items[-1].ast, renderer, 16)
    rows = [(o.axis, o.amount) for o in opts if o.op is OptOps.UPCAST and o.amount in (2, 4)]
    assert rows == ([] if axis is None else [(axis, by)]), opts
    assert sorted(o.amount for o in opts if o.op is OptOps.UPCAST and o.amount not in (2, 4)) == [7, 16], opts
    for device in ("CPU", "PYTHON") if axis is not None else ("CPU",):
        np.testing.assert_allclose(run_last_plan(t, opts, device), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("device", ["CPU", "PYTHON"])
def test_padded_rows_tile_with_some_lanes_always_in_range(device):
    """A convolution's 8 output rows padded to 9 and tiled by 3: the gate of the tile's first two rows is always
    true (the value ranges fold it), the third's is not. The always-true gate's load must stay an 8-lane vector
    (it became a scalar load, and the C compiler refused the kernel)."""
    x, w = _inputs((2, 2, 10, 10), (8, 2, 3, 3), seed=7)
    t = Tensor(x).realize().conv2d(Tensor(w).realize())
    plan = [Opt(OptOps.PADTO, 2, 3), Opt(OptOps.UPCAST, 1, 4), Opt(OptOps.UPCAST, 2, 3), Opt(OptOps.UPCAST, 3, 8)]
    windows = np.lib.stride_tricks.sliding_window_view(x.astype(np.float64), (3, 3), axis=(2, 3))
    want = np.einsum("ncyxij,ocij->noyx", windows, w)
    np.testing.assert_allclose(run_plan(t, plan, device), want, rtol=1e-5, atol=1e-5)


def test_padded_loop_reads_inside_their_buffer_need_no_gate():
    # rows 0..6 of an 8-row buffer, the row loop padded to 8: the padded row reads row 7 (inside the buffer) and
    # is never stored, so only the store is gated; the read of a 7-row buffer would leave it, so it stays gated
    (a,) = _inputs((8, 16), seed=8)
    base = Tensor(a).realize()
    for src, reads_gated in ((base[:7], False), (Tensor(a[:7]).realize(), True)):
        t = src * 2 + 1
        plan = [Opt(OptOps.PADTO, 0, 4), Opt(OptOps.UPCAST, 1, 8)]
        np.testing.assert_allclose(run_plan(t, plan), a[:7] * 2 + 1, rtol=1e-6)
        program = get_program(_kernel(t).ast, Device["CPU"].renderer, plan).uops
        gated_loads = [u for u in program if u.op is Ops.LOAD and len(u.src[0].src) == 3]
        assert bool(gated_loads) is reads_gated
        assert any(u.op is Ops.IF for u in program)  # the store of the padded row is skipped


@pytest.mark.parametrize("device", ["CPU", "PYTHON"])
def test_a_padded_output_loop_clamps_its_strided_reads_inside_a_reduction(device):
    """An output loop padded by PADTO, its reads inside a reduction: a read that walks the loop with a stride (rows
    of a row sum, 16 apart) takes the loop clamped to its last real iteration instead of a gate, which would be
    tested at every step of the reduction; a read contiguous along the loop (columns of a column sum) keeps its gate
    (a masked vector load where the loop is upcast). Both read only inside their buffers (7 rows of 7 or 10 columns
    of 10, the loop padded to 8 and 12), store only the real outputs, and give numpy's sums."""
    (a,) = _inputs((7, 16), seed=48)
    rows = Tensor(a).realize().sum(1)
    plan = [Opt(OptOps.PADTO, 0, 4)]
    np.testing.assert_allclose(run_plan(rows, plan, device), a.astype(np.float64).sum(1), rtol=1e-5)
    uops = get_program(_kernel(rows).ast, Device["CPU"].renderer, plan).uops
    loads = [u for u in uops if u.op is Ops.LOAD and u.src[0].src[0].op is Ops.DEFINE_GLOBAL]
    assert loads and all(len(u.src[0].src) == 2 for u in loads)  # no gate
    assert all(u.src[0].src[1].vmax < a.size for u in loads)
    assert any(u.op is Ops.IF for u in uops)  # the padded row's store is skipped
    (b,) = _inputs((16, 10), seed=49)
    cols = Tensor(b).realize().sum(0)
    plan = [Opt(OptOps.PADTO, 0, 4)]
    np.testing.assert_allclose(run_plan(cols, plan, device), b.astype(np.float64).sum(0), rtol=1e-5)
    uops = get_program(_kernel(cols).ast, Device["CPU"].renderer, plan).uops
    assert any(u.op is Ops.LOAD and len(u.src[0].src) == 3 for u in uops)


@pytest.mark.parametrize(
    "shape, padto, upcasts",
    [
        ((8, 64, 17, 10), True, [2, 3, 16]),
        ((8, 64, 12, 12), False, [6, 16]),
        ((8, 32, 17, 16), True, [2, 3, 16]),
        ((8, 16, 17, 16), False, [4, 16]),
    ],
)
def test_an_avx2_convolution_tile_is_six_outputs_by_two_vectors(shape, padto, upcasts):
    """AVX2's tile for a convolution summing 256 products or more (32 input channels of a 3x3 kernel): 6 outputs by
    two vectors of 8 output channels (12 accumulators of 16 registers): 6 columns where they divide the width, else 2
    columns by 3 rows, the rows padded to a multiple of 3 (17 -> 18) with the padded row's reads clamped inside the
    image; over 16 input channels (144 products) the 4 x 2 vector tile stays. The values are numpy's direct
    convolution, the extra rows never stored."""
    x, w = _inputs(shape, (16, shape[1], 3, 3), seed=50)
    t = Tensor(x).realize().conv2d(Tensor(w).realize(), padding=1)
    items = create_schedule([t.uop], ["CPU"], device_facts)[0]
    opts = hand_coded_opts(items[-1].ast, Device["CPU"].renderer, 8)
    assert sorted(o.amount for o in opts if o.op is OptOps.UPCAST) == upcasts, opts
    assert any(o.op is OptOps.PADTO and o.amount == 3 for o in opts) == padto, opts
    np.testing.assert_allclose(run_last_plan(t, opts), _conv_oracle(x, w, 1, 1), rtol=1e-3, atol=1e-3)


def test_a_tile_stores_neighbouring_outputs_in_pairs_under_their_gate():
    """The 6-output convolution tile (2 columns by 3 rows, the rows padded 17 -> 18) stores its 96 outputs as 48
    pairs of neighbouring columns, one two-lane store each, those of the padded row under their row's gate, not
    lane by lane; taken from the accumulators pair by pair, so gcc keeps all 12 in registers (in address order
    it spilled accumulators in the loop, twice as slow). The values are numpy's direct
    convolution, the extra row never stored."""
    x, w = _inputs((8, 64, 17, 10), (16, 64, 3, 3), seed=51)
    t = Tensor(x).realize().conv2d(Tensor(w).realize(), padding=1)
    items = create_schedule([t.uop], ["CPU"], device_facts)[0]
    opts = hand_coded_opts(items[-1].ast, Device["CPU"].renderer, 8)
    assert sorted(o.amount for o in opts if o.op is OptOps.UPCAST) == [2, 3, 16], opts
    src = get_program(items[-1].ast, Device["CPU"].renderer, opts).src
    stores = [line.strip() for line in src.splitlines() if line.strip().startswith(("data0[", "(*("))]
    assert len(stores) == 48 and all(s.startswith("(*(float2_u*)&data0[") for s in stores), stores
    assert src.count("if (") >= 16, src  # the padded row's 16 pairs, each under its gate
    np.testing.assert_allclose(run_last_plan(t, opts), _conv_oracle(x, w, 1, 1), rtol=1e-3, atol=1e-3)
    # LLVM, given the pairs' order, spilled an accumulator in the loop: it keeps the tile's stores
    # lane by lane (`paired_gated_stores`)
    from zeptograd.renderer.llvmir import LLVMRenderer

    program = get_program(items[-1].ast, LLVMRenderer(), opts)
    stores = [u for u in program.uops if u.op is Ops.STORE and u.src[0].op is Ops.INDEX]
    lanes = [u.src[1].dtype.count for u in stores if u.src[0].src[0].op is Ops.DEFINE_GLOBAL]
    assert lanes and set(lanes) == {1}, lanes


def test_avx2_width_when_avx512_is_turned_off(tmp_path):
    """ZG_AVX512=0 keeps 256-bit vectors on an AVX-512 machine (and is what an AVX2-only CPU gets): the matmul
    tile is 4 x 16 there, and a packed matmul and the vector builtins (FMA, NaN-propagating max, sqrt, trunc)
    give numpy's values. (On an AVX-512 machine the rest of this file runs the 512-bit forms.)"""
    script = """
import numpy as np
from zeptograd import Device, Tensor
from zeptograd.codegen.heuristic import hand_coded_opts
from zeptograd.codegen.kernel_shape import global_reads
from zeptograd.codegen.lowering import _any_lane
from zeptograd.codegen.opt import Opt, OptOps
from zeptograd.dtype import dtypes
from zeptograd.engine.facts import device_facts
from zeptograd.schedule.kernelize import create_schedule
from zeptograd.uop.ops import Ops
assert Device["CPU"].renderer.max_lanes(Ops.ADD, dtypes.float32) == 8
rng = np.random.default_rng(0)
a, b = rng.standard_normal((2, 128, 128)).astype(np.float32)
got = (Tensor(a) @ Tensor(b)).numpy()
np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
ta, tb = Tensor(a).realize(), Tensor(b).realize()
item = create_schedule([(ta @ tb).uop], ["CPU"], device_facts)[0][-1]
opts = hand_coded_opts(item.ast, Device["CPU"].renderer)
assert opts[:3] == [Opt(OptOps.PADTO, 0, 6), Opt(OptOps.UPCAST, 0, 6), Opt(OptOps.UPCAST, 1, 16)], opts
# a tile of one vector of n (8 wide) takes the most rows that divide m within 8: 4 for m = 20
c, d = rng.standard_normal((20, 8)).astype(np.float32), rng.standard_normal((8, 8)).astype(np.float32)
tc, td = Tensor(c).realize(), Tensor(d).realize()
item = create_schedule([(tc.reshape(20, 8, 1) * td.reshape(1, 8, 8)).sum(1).uop], ["CPU"], device_facts)[0][-1]
opts = hand_coded_opts(item.ast, Device["CPU"].renderer)
assert [o.amount for o in opts if o.op is OptOps.UPCAST] == [4, 8], opts
x = a.copy(); x[0, :4] = [np.nan, np.inf, -np.inf, -0.0]
X = Tensor(x)
cases = [(X.maximum(Tensor(b)), np.maximum(x, b)), (X.abs().sqrt(), np.sqrt(np.abs(x))), (X.trunc(), np.trunc(x))]
for got, want in cases:
    np.testing.assert_array_equal(got.numpy(), want)
print("ok")
"""
    env = {**os.environ, "ZG_AVX512": "0", "ZEPTOGRAD_CACHE_DIR": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-3000:]


@pytest.mark.parametrize("rows, tile", [(14, 7), (6, 6), (12, 6), (40, 8), (11, None)])
def test_a_register_tile_takes_as_many_rows_as_divide(rows, tile):
    """The matmul tile's rows are the largest divisor of m up to the register budget (8 rows with AVX-512, 4 with
    AVX2): 7 for m = 14 (the 14 tile columns of a Winograd convolution, whose transform is faster so), not 2;
    none when only 1 divides. The values match numpy's matmul."""
    a, b = _inputs((5, rows, 64), (5, 64, 32), seed=17)
    ta, tb = Tensor(a).realize(), Tensor(b).realize()
    t = (ta.reshape(5, rows, 64, 1) * tb.reshape(5, 1, 64, 32)).sum(2)
    renderer = Device["CPU"].renderer
    lanes = renderer.max_lanes(Ops.MULACC, dtypes.float32)
    if lanes < 16:
        pytest.skip("the 8-row tile is AVX-512's")
    opts = hand_coded_opts(_kernel(t).ast, renderer)
    upcasts = [o.amount for o in opts if o.op is OptOps.UPCAST]  # m first, then two vectors of n
    assert upcasts == [*([tile] if tile else []), 2 * lanes], opts
    np.testing.assert_allclose(run_plan(t, opts), a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape", [(128, 784, 256), (12, 40, 20), (5, 48, 7)])
def test_matmul_with_a_transposed_weight_reads_both_operands_along_the_sum(shape):
    """x @ w.T with w stored (out, in), as nn.Linear does: both operands are contiguous along the sum, so w.T is
    not copied into panels (one kernel) and the plan vectorizes the sum (UNROLL) under a 4 x 4 tile of outputs."""
    m, k, n = shape
    x, w = _inputs((m, k), (n, k), seed=12)
    tx, tw = Tensor(x).realize(), Tensor(w).realize()
    item = _kernel(tx @ tw.T)
    opts = hand_coded_opts(item.ast, Device["CPU"].renderer)
    if k % 8 == 0:
        assert any(o.op is OptOps.UNROLL for o in opts), opts
    with Context(THREADS=2):
        np.testing.assert_allclose((tx @ tw.T).numpy(), x.astype(np.float64) @ w.T, rtol=1e-4, atol=1e-4)


def test_lanes_of_a_vector_load_are_read_as_scalars():
    """A tile's broadcast operand contiguous along the tile's rows (x in the weight gradient g.T @ x) is read one
    element at a time (a broadcasting load), not as a vector load taken apart lane by lane."""
    g, x = _inputs((16, 16), (16, 48), seed=13)
    item = _kernel(Tensor(g).realize().T @ Tensor(x).realize())
    program = get_program(item.ast, Device["CPU"].renderer)
    lanes_of_loads = [
        u
        for u in program.uops
        if u.op is Ops.GEP and u.src[0].op is Ops.LOAD and u.src[0].src[0].src[0].op is Ops.DEFINE_GLOBAL
    ]
    assert program.opts and not lanes_of_loads
    got = run_plan(Tensor(g).realize().T @ Tensor(x).realize(), list(program.opts))
    np.testing.assert_allclose(got, g.T.astype(np.float64) @ x, rtol=1e-4, atol=1e-4)
    tg, tx = Tensor(g, device="PYTHON").realize(), Tensor(x, device="PYTHON").realize()
    np.testing.assert_array_equal(run_plan(tg.T @ tx, list(program.opts), "PYTHON"), got)


def _evaluate_lanes(u: UOp) -> list[bool]:
    """The lanes of a graph of CONST, VECTORIZE, GEP and OR, evaluated directly."""
    if u.op is Ops.CONST:
        return [bool(u.arg)]
    if u.op is Ops.VECTORIZE:
        return [lane for s in u.src for lane in _evaluate_lanes(s)]
    if u.op is Ops.GEP:
        lanes = _evaluate_lanes(u.src[0])
        return [lanes[i] for i in u.arg]
    assert u.op is Ops.OR, u.op
    return [a or b for a, b in zip(*(_evaluate_lanes(s) for s in u.src))]


@pytest.mark.parametrize("width", range(1, 10))
def test_any_lane_sees_every_lane(width: int):
    """A RARE branch runs when any lane of its condition is true (lowering._any_lane halves the vector): every
    lane counts, the last one of an odd width too, and no lane true means no branch."""
    for lane in [None, *range(width)]:
        consts = [UOp.const(dtypes.bool, i == lane) for i in range(width)]
        cond = UOp(Ops.VECTORIZE, dtypes.bool.vec(width), tuple(consts)) if width > 1 else consts[0]
        any_lane = _any_lane(cond)
        assert any_lane.dtype is dtypes.bool and _evaluate_lanes(any_lane) == [lane is not None]


@pytest.mark.parametrize("runs_on_cpu, grouped", [(False, OptOps.GROUP), (True, OptOps.GROUPTOP)])
def test_few_long_reductions_on_a_renderer_without_vectors(runs_on_cpu: bool, grouped: OptOps):
    """WGSL has no vector types: on a GPU a group's threads read a row interleaved (GROUP, coalesced); on a CPU
    adapter (lavapipe) each work-item reads a contiguous run, as PoCL's do (GROUPTOP). Interleaved on lavapipe,
    a sum was over ten times slower."""
    from zeptograd.renderer.wgsl import WGSLRenderer

    renderer = WGSLRenderer()
    renderer.runs_on_cpu = runs_on_cpu
    item = _kernel(Tensor(np.ones((16, 8192), np.float32)).sum(1), "CPU")
    opts = hand_coded_opts(item.ast, renderer)
    assert opts and opts[0].op is grouped, opts


def _global_loads(program) -> list[UOp]:
    return [u for u in program.uops if u.op is Ops.LOAD and u.src[0].src[0].op is Ops.DEFINE_GLOBAL]


@pytest.mark.parametrize("device", ["CPU", "PYTHON"])
@pytest.mark.parametrize("lanes", [16, 8, 4, 2])
def test_reads_of_every_other_element_are_vector_loads(device, lanes):
    """x[:, ::2] - x[:, 1::2] upcast along the row: each chunk of lanes is two vector loads (the second one
    ending at the chunk's last element, so the last row's odd elements read nothing past the buffer) and a
    shuffle, not one load per lane; a row padded above and below reads through one gate for all its lanes."""
    (a,) = _inputs((5, 64), seed=21)
    x = Tensor(a, device=device).realize()
    padded = x.pad(((1, 1), (0, 0)))
    cases = [
        (x[:, ::2] - x[:, 1::2], a[:, ::2] - a[:, 1::2]),
        (padded[:, 1::2] - padded[:, ::2], np.pad(a, ((1, 1), (0, 0)))[:, 1::2] - np.pad(a, ((1, 1), (0, 0)))[:, ::2]),
    ]
    for t, want in cases:
        plan = [Opt(OptOps.UPCAST, 1, lanes)]
        np.testing.assert_array_equal(run_plan(t, plan, device), want.astype(np.float32))
        loads = _global_loads(get_program(_kernel(t, device).ast, Device[device].renderer, plan))
        if device == "CPU" and 4 <= lanes <= _cpu_float_lanes():  # (2 lanes: two scalar loads)
            assert loads and all(u.dtype.count == lanes for u in loads), [u.dtype for u in loads]


@pytest.mark.parametrize("device", ["CPU", "PYTHON"])
def test_lanes_that_read_a_contiguous_run_in_another_order_are_one_vector_load(device):
    """A 2x2 window unrolled before its row is upcast: the lanes of one load chunk are (tap, column) with the
    columns every other element, together one contiguous run read out of order: one vector load and a shuffle.
    The window's sum then adds whole vectors (the unrolled taps vary slowest), in the order numpy's pairwise
    tree would not fix, so it is checked against float64 within float32 rounding."""
    (a,) = _inputs((2, 3, 8, 32), seed=22)
    x = Tensor(a, device=device).realize()
    t = x.avg_pool2d(2)
    plan = [Opt(OptOps.UNROLL, 0, 2), Opt(OptOps.UNROLL, 0, 2), Opt(OptOps.UPCAST, 3, 8)]
    want = a.astype(np.float64).reshape(2, 3, 4, 2, 16, 2).mean((3, 5))
    np.testing.assert_allclose(run_plan(t, plan, device), want, rtol=1e-6, atol=1e-6)
    if device == "CPU":
        loads = _global_loads(get_program(_kernel(t).ast, Device["CPU"].renderer, plan))
        width = min(16, _cpu_float_lanes())  # the run of 16 is one vector, or one per register's width
        assert loads and all(u.dtype.count == width for u in loads), [u.dtype for u in loads]


def test_pooling_windows_are_unrolled_and_vectorized_along_the_row():
    """The heuristic's plan for max_pool2d: the window's loops unrolled, the output row upcast to vectors; its
    values (NaN propagation included) match torch."""
    torch = pytest.importorskip("torch")
    (a,) = _inputs((2, 4, 16, 32), seed=23)
    a[0, 0, 3, 5] = np.nan
    x = Tensor(a).realize()
    for kernel, stride, padding in ((2, 2, 0), (3, 2, 1), (3, 1, 1)):
        t = x.max_pool2d(kernel, stride, padding=padding)
        opts = hand_coded_opts(_kernel(t).ast, Device["CPU"].renderer)
        assert [o.op for o in opts][:3] == [OptOps.UNROLL, OptOps.UNROLL, OptOps.UPCAST], opts
        want = torch.nn.functional.max_pool2d(torch.from_numpy(a), kernel, stride, padding=padding).numpy()
        np.testing.assert_array_equal(t.numpy(), want)


@pytest.mark.parametrize(
    "shape, perm",
    [
        ((64, 48), (1, 0)),
        ((2, 16, 7, 58), (0, 2, 3, 1)),
        ((3, 32, 30), (0, 2, 1)),
        ((16, 16), (1, 0)),
        ((2, 6, 56, 32), (0, 3, 1, 2)),  # NHWC -> NCHW, 56 wide: half the lanes each way
        ((2, 3, 40, 24), (0, 3, 1, 2)),
    ],
)
def test_transposing_copies_take_a_tile_of_vectors_each_way(shape, perm):
    """A transposing copy is planned as a tile of lanes x lanes, or half the lanes each way where the output's
    contiguous axis is not a multiple of them (a channels-last convolution output of width 56 back to NCHW:
    3x faster); where the output's axis takes whole cache lines (16 values) and a vector is narrower, the tile
    is as many values, a line of the output by the rest (AVX2: 4 x 16, each output row stored as a whole line); the
    read's contiguous axis padded to the tile where it does not divide, by at most a quarter. Its stores are whole
    vectors, and every element lands where numpy's transpose puts it."""
    (a,) = _inputs(shape, seed=31)
    t = Tensor(a).realize().permute(*perm).contiguous()
    item = _kernel(t)
    renderer = Device["CPU"].renderer
    opts = hand_coded_opts(item.ast, renderer)
    lanes = renderer.max_lanes(Ops.MULACC, dtypes.float32)
    if lanes < 4:
        pytest.skip("no vectors on this CPU")
    side = lanes if t.shape[-1] % lanes == 0 else lanes // 2
    out_side = 16 if side < 16 and t.shape[-1] % 16 == 0 else side
    upcasts = [o.amount for o in opts if o.op is OptOps.UPCAST]
    assert upcasts == [side * side // out_side, out_side], opts
    program = get_program(item.ast, renderer, opts)
    stores = [u for u in program.uops if u.op is Ops.STORE and u.src[0].op is Ops.INDEX]
    width = min(out_side, lanes)
    assert stores and all(u.src[1].dtype.count == width for u in stores), [u.src[1].dtype for u in stores]
    np.testing.assert_array_equal(run_plan(t, opts), a.transpose(perm))
    np.testing.assert_array_equal(
        run_plan(Tensor(a, device="PYTHON").permute(*perm).contiguous(), opts, "PYTHON"), a.transpose(perm)
    )


@pytest.mark.parametrize("shape", [(1, 64, 14, 14), (2, 32, 7, 7), (1, 48, 13, 13), (1, 16, 6, 5)])
def test_a_channels_last_copy_of_a_narrow_map_takes_a_tile_along_its_rows(shape):
    """NCHW -> NHWC of a map narrower than the tile's side (a 14- or 7-wide map of a ResNet's last stages): the rows
    the input is contiguous along are padded up to a shorter side (a half or a quarter), by at most a quarter, and
    tiled with a vector of channels; a row too short for that (5 wide) is left as an elementwise copy. Every element
    lands where numpy's transpose puts it, as in the unoptimized kernel's copy."""
    (a,) = _inputs(shape, seed=38)
    t = Tensor(a).realize().permute(0, 2, 3, 1).contiguous()
    renderer = Device["CPU"].renderer
    lanes = renderer.max_lanes(Ops.MULACC, dtypes.float32)
    if lanes < 4:
        pytest.skip("no vectors on this CPU")
    opts = hand_coded_opts(_kernel(t).ast, renderer)
    width = shape[3]
    rows_axis = sum(n > 1 for n in shape[:1] + shape[2:3])  # the kernel's loops leave out axes of size 1
    pads = [o.amount for o in opts if o.op is OptOps.PADTO and o.axis == rows_axis]
    upcasts = [o.amount for o in opts if o.op is OptOps.UPCAST]
    if width * 5 < 8 * 4:  # no side of 4 or more pads it by a quarter at most
        assert not pads, opts
    else:
        padded = pads[0] if pads else width
        assert padded * 4 <= width * 5 and padded % upcasts[0] == 0 and upcasts[0] >= 4, opts
        assert len(upcasts) == 2 and shape[1] % upcasts[1] == 0, opts
    want = a.transpose(0, 2, 3, 1)
    np.testing.assert_array_equal(run_plan(t, opts), want)
    with Context(NOOPT=1):
        plain = Tensor(a).realize().permute(0, 2, 3, 1).contiguous().numpy()
    np.testing.assert_array_equal(plain, want)


@pytest.mark.parametrize("shape, perm", [((2, 32, 7, 40), (0, 2, 3, 1)), ((48, 64), (1, 0)), ((3, 32, 48), (0, 2, 1))])
def test_a_transposing_copy_nests_its_loops_as_the_input_lies(shape, perm):
    """After its tile, a transposing copy's loops go outer to inner in the order of the input's strides (a
    channels-last copy: images, channel tiles, rows, column tiles), so its reads walk the input planes in
    order; numpy's strides of the input are the oracle, and every element lands where numpy's transpose puts it."""
    (a,) = _inputs(shape, seed=37)
    t = Tensor(a).realize().permute(*perm).contiguous()
    renderer = Device["CPU"].renderer
    if renderer.max_lanes(Ops.MULACC, dtypes.float32) < 4:
        pytest.skip("no vectors on this CPU")
    opts = hand_coded_opts(_kernel(t).ast, renderer)
    tile = {o.axis: o.amount for o in opts if o.op is OptOps.UPCAST}
    padded = {o.axis: o.amount for o in opts if o.op is OptOps.PADTO}
    loops = list(range(len(shape)))  # output axes, outer to inner, as the plan's SWAPs leave them
    for o in opts:
        if o.op is OptOps.SWAP:
            loops[o.axis], loops[o.amount] = loops[o.amount], loops[o.axis]
    sizes = {k: padded.get(k, t.shape[k]) // tile.get(k, 1) for k in loops}
    strides = [a.strides[perm[k]] * tile.get(k, 1) for k in loops if sizes[k] > 1]
    assert strides == sorted(strides, reverse=True), (opts, strides)
    np.testing.assert_array_equal(run_plan(t, opts), a.transpose(perm))
    np.testing.assert_array_equal(
        run_plan(Tensor(a, device="PYTHON").permute(*perm).contiguous(), opts, "PYTHON"), a.transpose(perm)
    )


@pytest.mark.parametrize("run, pieces", [(14, (8, 4, 2)), (7, (4, 2, 1))])
def test_a_transposed_tile_stores_runs_of_any_length_as_vectors(run, pieces):
    """A tile of 16 columns x `run` rows of a transposed copy, whose output rows are `run` long (a convolution's
    tile of 14 output columns, 16 channels): each row is stored as the powers of two its length holds, each a
    vector taken from the tile's vectors by shuffles (C's __builtin_shufflevector, not a vector built lane by
    lane), where it was 7 or 14 stores of 2 lanes or 1. Values against numpy, on the CPU and the PYTHON device."""
    (a,) = _inputs((3 * run, 16), seed=41)
    if Device["CPU"].renderer.max_lanes(Ops.STORE, dtypes.float32) < 16:
        pytest.skip("needs 16-lane vectors")
    opts = [Opt(OptOps.UPCAST, 1, run), Opt(OptOps.UPCAST, 0, 16)]
    t = Tensor(a).realize().permute(1, 0).contiguous()
    program = get_program(_kernel(t).ast, Device["CPU"].renderer, opts)
    stores = [u.src[1].dtype.count for u in program.uops if u.op is Ops.STORE and u.src[0].op is Ops.INDEX]
    assert sorted(stores) == sorted(pieces * 16), stores
    assert "__builtin_shufflevector" in program.src
    assert not re.search(r"\(float\d+\)\{[^}]*lane", program.src), "a vector built lane by lane"
    np.testing.assert_array_equal(run_plan(t, opts), a.T)
    np.testing.assert_array_equal(run_plan(Tensor(a, device="PYTHON").permute(1, 0).contiguous(), opts, "PYTHON"), a.T)


@pytest.mark.parametrize("device", ["CPU", "PYTHON"])
def test_a_store_to_a_contiguous_run_in_another_order_is_one_vector_store(device):
    """Rows of 2 with the column upcast first and 8 rows after: the 16 lanes are (column, row), so the addresses
    are the even then the odd elements of one run of 16; the run is stored by one vector store of the lanes
    shuffled into place, and every element lands where numpy puts it."""
    (a,) = _inputs((64, 2), seed=24)
    t = Tensor(a, device=device).realize() * 2
    plan = [Opt(OptOps.UPCAST, 1, 2), Opt(OptOps.UPCAST, 0, 8)]
    np.testing.assert_array_equal(run_plan(t, plan, device), a * 2)
    if device == "CPU":
        program = get_program(_kernel(t).ast, Device["CPU"].renderer, plan)
        stores = [u for u in program.uops if u.op is Ops.STORE and u.src[0].op is Ops.INDEX]
        width = min(16, _cpu_float_lanes())  # the run of 16 is one vector, or one per register's width
        assert len(stores) == 16 // width, [u.src[1].dtype for u in stores]
        assert all(u.src[1].dtype.count == width for u in stores), [u.src[1].dtype for u in stores]


@pytest.mark.parametrize("device", ["CPU", "PYTHON"])
def test_an_unrolled_any_is_a_reduction_not_index_math(device, monkeypatch):
    """A write through an expanded view (`x.expand(3, 4)[2] = 9`) is one kernel with an any() over the 3 rows
    that hit each element: a REDUCE of bools whose sources are only lane indices and constants. With its loop
    unrolled, the expander took it for index arithmetic, kept the unrolled lanes on it, and refused the STORE."""
    import zeptograd.codegen as codegen
    from zeptograd.engine import realize

    plan = [Opt(OptOps.UNROLL, 0, 3), Opt(OptOps.UNROLL, 0, 3), Opt(OptOps.UPCAST, 0, 4)]
    monkeypatch.setattr(realize, "_programs", {})  # compiled here with this plan, not taken from an earlier test
    monkeypatch.setattr(codegen, "hand_coded_opts", lambda ast, renderer=None: plan if ast.arg == "r_1_4" else [])
    t = Tensor(np.arange(4, dtype=np.float32).reshape(1, 4), device=device).realize()
    t.expand(3, 4)[2] = 9
    np.testing.assert_array_equal(t.numpy(), np.full((1, 4), 9, np.float32))


@pytest.mark.parametrize("device", ["CPU", "PYTHON"])
def test_a_padded_row_is_read_by_masked_vector_loads(device):
    """Rows of 14 padded to 16: the first and last lane of each 16-lane read are gated off, the first row's
    first lane addresses the element before the buffer and the last row's last one the element after it. With
    masked loads (AVX-512 on the CPU; the PYTHON device reads only the lanes whose gate is true and checks their
    addresses) the row is one vector load; the padding reads as 0."""
    (a,) = _inputs((3, 14), seed=26)
    t = Tensor(a, device=device).realize().pad(((0, 0), (1, 1))) * 2
    plan = [Opt(OptOps.UPCAST, 1, 16)]
    np.testing.assert_array_equal(run_plan(t, plan, device), np.pad(a, ((0, 0), (1, 1))) * 2)
    renderer = Device[device].renderer
    loads = _global_loads(get_program(_kernel(t, device).ast, renderer, plan))
    width = min(16, renderer.max_lanes(Ops.LOAD, dtypes.float32))
    if renderer.masked_load(dtypes.float32.vec(width)):
        assert loads and all(u.src[0].src[2].dtype.count == width for u in loads), [u.src[0] for u in loads]


@pytest.mark.parametrize("device", ["CPU", "PYTHON"])
@pytest.mark.parametrize("tile", [16, 8, 4])
def test_a_transposed_tile_is_loaded_and_stored_as_vectors(device, tile):
    """x.T with both axes upcast (a tile x tile square, the read's contiguous axis fastest): each row of the tile is
    one vector load, and the stores, whose lanes are scattered through the lane order, are regrouped by address
    into one vector store per output row, its lanes gathered from every loaded vector by two-vector shuffles."""
    (a,) = _inputs((32, 48), seed=27)
    t = Tensor(a, device=device).realize().T * 1
    plan = [Opt(OptOps.UPCAST, 1, tile), Opt(OptOps.UPCAST, 0, tile)]
    np.testing.assert_array_equal(run_plan(t, plan, device), a.T)
    renderer = Device[device].renderer
    if tile == renderer.max_lanes(Ops.STORE, dtypes.float32):  # (a narrower tile: its rows are half vectors)
        program = get_program(_kernel(t, device).ast, renderer, plan)
        stores = [u for u in program.uops if u.op is Ops.STORE and u.src[0].op is Ops.INDEX]
        assert stores and all(u.src[1].dtype.count == tile for u in stores), [u.src[1].dtype for u in stores]
        assert all(u.dtype.count == tile for u in _global_loads(program))


@pytest.mark.parametrize("device", ["CPU", "PYTHON"])
@pytest.mark.parametrize("shape, pads", [((2, 16, 14, 14), (1, 1)), ((1, 24, 9, 30), (2, 0)), ((2, 8, 6, 6), (0, 2))])
def test_a_padded_channels_last_copy_reads_its_tile_as_vector_loads(device, shape, pads):
    """A convolution's channels-last copy of a padded input, under the CPU's plan (a tile of channels x padded
    columns): each column run of the tile is one vector load, masked where its lanes have gates of their own
    (the padded border, the columns the tile's padding adds), and the tile is turned around by shuffles; it was a
    scalar load per element, a third slower. Every element lands where numpy puts it."""
    (a,) = _inputs(shape, seed=43)
    width = ((0, 0), (0, 0), pads, pads)

    def copy(dev: str) -> Tensor:
        return Tensor(a, device=dev).realize().pad(width).permute(0, 2, 3, 1).contiguous()

    t, cpu = copy(device), Device["CPU"].renderer
    opts = hand_coded_opts(_kernel(copy("CPU")).ast, cpu)
    tile = [o.amount for o in opts if o.op is OptOps.UPCAST]
    if len(tile) != 2 or not cpu.masked_load(dtypes.float32.vec(tile[0])):
        pytest.skip(f"no transposing tile with masked loads on this CPU: {opts}")
    np.testing.assert_array_equal(run_plan(t, opts, device), np.pad(a, width).transpose(0, 2, 3, 1))
    renderer = Device[device].renderer
    loads = _global_loads(get_program(_kernel(t, device).ast, renderer, opts))
    # a column run wider than the device's vectors (16 lanes under AVX-512, the PYTHON device's 8) is several loads
    width = min(tile[0], renderer.max_lanes(Ops.LOAD, dtypes.float32))
    assert loads and all(u.dtype.count == width for u in loads), [u.dtype for u in loads]


@pytest.mark.parametrize("lanes", [4, 8, 16])
@pytest.mark.parametrize("shape", [(4096, 4096), (64, 64, 512), (1000, 300)])
def test_row_sums_on_an_opencl_renderer_load_contiguous_vectors(lanes: int, shape: tuple[int, ...]):
    """Rows summed along contiguous memory on a renderer with vectors (OpenCL): 4 rows a work-item, upcast
    before the reduce axis is unrolled, so each vector is a contiguous run of one row (`vloadN`). Upcast after
    it, a vector gathered one element from each of the 4 rows (16 scalar loads a vector): PoCL took 2.5 ms for a
    4096x4096 row sum instead of 1.4 (1000x300: 93 us instead of 38)."""
    from zeptograd.renderer.opencl import OpenCLRenderer

    renderer = OpenCLRenderer(frozenset(), lanes)
    item = _kernel(Tensor(np.ones(shape, np.float32)).sum(axis=-1), "CPU")
    opts = hand_coded_opts(item.ast, renderer)
    kinds = [o.op for o in opts]
    assert kinds[:2] == [OptOps.UPCAST, OptOps.UNROLL] and opts[0] == Opt(OptOps.UPCAST, len(shape) - 2, 4), opts
    assert OptOps.LOCAL in kinds, opts
    if opts[1].amount % lanes == 0:  # rows of 300 unroll by 4: a vector of 16 lanes holds 4 runs of 4 then
        src = get_program(item.ast, renderer).src
        assert f"vload{lanes}(" in src, src
        assert not re.search(r"\(float\d+\)\(val", src), src  # no vector built from scalar loads


def test_a_dot_on_an_opencl_renderer_gets_no_upcast_after_its_unroll():
    """x @ w.T on OpenCL keeps the CPU's tile (4 x 4 outputs, vectors along the reduce axis): a further UPCAST of
    the output after the UNROLL interleaved rows into the vectors, which PoCL ran slower."""
    from zeptograd.renderer.opencl import OpenCLRenderer

    item = _kernel(Tensor(np.ones((128, 784), np.float32)) @ Tensor(np.ones((256, 784), np.float32)).T, "CPU")
    opts = hand_coded_opts(item.ast, OpenCLRenderer(frozenset(), 16))
    unroll = next(i for i, o in enumerate(opts) if o.op is OptOps.UNROLL)
    assert all(o.op is not OptOps.UPCAST for o in opts[unroll:]), opts


def test_unrolled_lanes_are_combined_a_vector_at_a_time():
    """x @ w.T (nn.Linear's forward) under its 4 x 4 tile of accumulators along the sum: after the loop the 16
    lanes of each of the 16 outputs are combined by halving all 256 lanes at once (vector adds and shuffles; no
    scalar add, where lane by lane took 240 of them). The values are numpy's, and the PYTHON device's bit for bit."""
    x, w = _inputs((8, 64), (8, 64), seed=21)
    plan = [Opt(OptOps.UPCAST, 0, 4), Opt(OptOps.UPCAST, 1, 4), Opt(OptOps.UNROLL, 0, 16)]
    item = _kernel(Tensor(x).realize() @ Tensor(w).realize().T)
    program = get_program(item.ast, Device["CPU"].renderer, plan)
    scalar_adds = [u for u in program.uops if u.op is Ops.ADD and u.dtype is dtypes.float32]
    assert program.opts == tuple(plan) and not scalar_adds
    got = run_plan(Tensor(x).realize() @ Tensor(w).realize().T, plan)
    np.testing.assert_allclose(got, x.astype(np.float64) @ w.T, rtol=1e-5, atol=1e-5)
    px, pw = Tensor(x, device="PYTHON").realize(), Tensor(w, device="PYTHON").realize()
    np.testing.assert_array_equal(run_plan(px @ pw.T, plan, "PYTHON"), got)


@pytest.mark.parametrize(
    "op, plan",
    [
        ("sum", [Opt(OptOps.UPCAST, 0, 4), Opt(OptOps.UNROLL, 0, 12)]),  # halved twice, then 3 lanes one by one
        ("max", [Opt(OptOps.UPCAST, 0, 2), Opt(OptOps.UNROLL, 0, 6)]),
        ("sum", [Opt(OptOps.UNROLL, 0, 3)]),  # odd: lane by lane only
        ("max", [Opt(OptOps.UNROLL, 0, 4), Opt(OptOps.UNROLL, 0, 2), Opt(OptOps.UPCAST, 0, 4)]),  # two unrolled axes
        ("sum", [Opt(OptOps.UNROLL, 0, 2), Opt(OptOps.UPCAST, 0, 8)]),  # the reduced axis first in lane order
    ],
)
def test_unrolled_reductions_of_any_lane_layout_match_numpy(op: str, plan: list[Opt]):
    (x,) = _inputs((8, 48), seed=22)
    x[1, 5], x[2, 7] = np.inf, -np.inf
    t = getattr(Tensor(x).realize(), op)(1)
    want = getattr(x.astype(np.float64), op)(1)
    got = run_plan(t, plan)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(run_plan(getattr(Tensor(x, device="PYTHON").realize(), op)(1), plan, "PYTHON"), got)


@pytest.mark.parametrize("n", [784, 1000, 96])
def test_matmul_tile_of_three_vectors_pads_n(n: int):
    """The weight gradient of nn.Linear(784, ...), g.T @ x with x (batch, 784): 784 is 49 vectors, no multiple of
    two; with 32 vector registers the tile is 8 rows by three vectors (48 floats), n padded to 816 (the extra
    columns gated off), which uses the registers two vectors leave idle. With AVX2 (16 registers) the tile
    stays two vectors wide."""
    g, x = _inputs((64, 32), (64, n), seed=23)
    tg, tx = Tensor(g).realize(), Tensor(x).realize()
    item = _kernel(tg.T @ tx)
    opts = hand_coded_opts(item.ast, Device["CPU"].renderer)
    lanes = _cpu_float_lanes()
    if lanes == 16:
        wide = [Opt(OptOps.UPCAST, 0, 8), Opt(OptOps.UPCAST, 1, 48)]
        assert opts[: 3 if n % 48 else 2] == ([Opt(OptOps.PADTO, 1, 48)] if n % 48 else []) + wide, opts
    else:
        assert not any(o.op is OptOps.PADTO for o in opts), opts
    want = g.T.astype(np.float64) @ x
    np.testing.assert_allclose(run_plan(tg.T @ tx, opts), want, rtol=1e-4, atol=1e-4)
    with Context(THREADS=2):
        np.testing.assert_allclose((tg.T @ tx).numpy(), want, rtol=1e-4, atol=1e-4)
    with Context(NOOPT=1):
        np.testing.assert_allclose((tg.T @ tx).numpy(), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("m, padded", [(100, True), (96, False), (20, False)])
def test_an_avx2_matmul_tile_is_six_rows_by_two_vectors(m, padded):
    """AVX2's matmul tile: 6 rows by two vectors of 8 (12 accumulators of 16 registers, 6 broadcasts and 2 loads for
    12 FMAs), m padded up to a multiple of 6 where at most a sixteenth of it is padding (100 -> 102; 20 -> 24 is too
    much: 4 rows), the padded rows' reads of A clamped to its last row and their stores skipped. The values are
    numpy's."""
    a, b = _inputs((m, 48), (48, 32), seed=51)
    t = Tensor(a).realize() @ Tensor(b).realize()
    items = create_schedule([t.uop], ["CPU"], device_facts)[0]
    opts = hand_coded_opts(items[-1].ast, Device["CPU"].renderer, 8)
    rows = 6 if m % 6 == 0 or padded else 4
    assert Opt(OptOps.UPCAST, 0, rows) in opts and (Opt(OptOps.PADTO, 0, 6) in opts) == padded, opts
    np.testing.assert_allclose(run_last_plan(t, opts), a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


def test_a_convolution_weight_gradient_reads_a_channels_last_copy_and_takes_a_register_tile():
    """The weight's gradient of a large convolution reads a padded channels-last copy of the input on every CPU,
    also where the forward reads the input in place (AVX-512): summed over the images and positions from in-place
    reads, its kernel took a plan of one vector and no register tile (bench/ops.py's layer on an AVX-512 Zen 4: 107
    ms, 17 GFLOP/s; with the copy 8.9-12.9 ms). The gradients are torch's."""
    torch = pytest.importorskip("torch")
    x, w, g = _inputs((2, 32, 40, 40), (32, 32, 3, 3), (2, 32, 40, 40), seed=53)
    tx, tw = Tensor(x).realize().requires_grad_(), Tensor(w).realize().requires_grad_()
    (tx.conv2d(tw, padding=1) * Tensor(g).realize()).sum().backward()
    items = create_schedule([tw.grad.uop], ["CPU"], device_facts)[0]
    copies = [it for it in items if it.ast is not None and not reduce_axes(it.ast) and len(it.bufs) == 2]
    planned = next(it for it in items if it.ast is not None and len(reduce_axes(it.ast)) >= 2)
    opts = hand_coded_opts(planned.ast, Device["CPU"].renderer)
    assert any(it.bufs[0].arg[2] == 2 * 42 * 42 * 32 for it in copies), [it.bufs[0].arg for it in copies]
    assert len([o for o in opts if o.op is OptOps.UPCAST]) >= 2, opts
    rx, rw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    (torch.nn.functional.conv2d(rx, rw, padding=1) * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(tw.grad.numpy(), rw.grad.numpy(), rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(tx.grad.numpy(), rx.grad.numpy(), rtol=1e-4, atol=1e-4)


def test_convolution_gradients_of_a_broadcast_upstream_gradient_take_register_tiles():
    """Under `conv(x, w).sum().backward()` the upstream gradient is a broadcast of ones: read lazily by the input's
    and the weight's gradient kernels, it left both untiled ((8,128,28,28) 3x3 on an AVX-512 Zen 4: 1035 and 50 ms
    at 0.2 GFLOP/s). Stored first, both kernels are the convolutions they are, with register tiles. The gradients
    are torch's."""
    torch = pytest.importorskip("torch")
    x, w = _inputs((2, 32, 40, 40), (32, 32, 3, 3), seed=54)
    tx, tw = Tensor(x).realize().requires_grad_(), Tensor(w).realize().requires_grad_()
    tx.conv2d(tw, padding=1).sum().backward()
    items = create_schedule([tx.grad.uop, tw.grad.uop], ["CPU", "CPU"], device_facts)[0]
    sums = [it for it in items if it.ast is not None and reduce_axes(it.ast)]
    plans = [hand_coded_opts(it.ast, Device["CPU"].renderer) for it in sums]
    assert len(sums) == 2 and all(len([o for o in p if o.op is OptOps.UPCAST]) >= 2 for p in plans), plans
    rx, rw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    torch.nn.functional.conv2d(rx, rw, padding=1).sum().backward()
    np.testing.assert_allclose(tx.grad.numpy(), rx.grad.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(tw.grad.numpy(), rw.grad.numpy(), rtol=1e-4, atol=1e-3)


def test_a_convolution_weight_gradient_takes_avx2_six_row_tile():
    """A convolution's weight gradient (a sum over the images' rows and columns of the output gradient times the
    input's windows, per image) takes AVX2's matmul tile: 6 output channels by two vectors of input channels, the
    40 output channels padded to 42 (the padded rows' reads clamped, their stores skipped). bench/ops.py's layer,
    that kernel alone, is faster than with the 4 x 16 tile. The values are numpy's."""
    x, w, g = _inputs((8, 16, 24, 24), (40, 16, 3, 3), (8, 40, 24, 24), seed=52)
    tx, tw = Tensor(x).realize().requires_grad_(), Tensor(w).realize().requires_grad_()
    (tx.conv2d(tw, padding=1) * Tensor(g).realize()).sum().backward()
    items = create_schedule([tw.grad.uop], ["CPU"], device_facts)[0]
    planned = next(i for i, it in enumerate(items) if len(reduce_axes(it.ast)) >= 2)
    opts = hand_coded_opts(items[planned].ast, Device["CPU"].renderer, 8)
    sixes = [(o.op, o.axis) for o in opts if o.amount == 6]
    assert len(sixes) == 2 and sixes[0][0] is OptOps.PADTO and sixes[1][0] is OptOps.UPCAST, opts
    assert Opt(OptOps.UPCAST, sixes[1][1] + 1, 16) in opts, opts  # the input channels: two vectors
    windows = np.lib.stride_tricks.sliding_window_view(
        np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1))), (3, 3), axis=(2, 3)
    )
    want = np.einsum("noyx,ncyxij->ocij", g.astype(np.float64), windows)
    np.testing.assert_allclose(run_last_plan(tw.grad, opts, planned=planned), want, rtol=1e-3, atol=1e-3)


def test_matmul_too_narrow_for_three_vectors_keeps_its_tile():
    """n = 28 (a 1x1 convolution's output row, or any narrow B): padding to 48 would waste most of the tile, so
    the plan stays what it was: rows of m only (16 with AVX-512, 8 with AVX2), no PADTO."""
    g, x = _inputs((64, 32), (64, 28), seed=26)
    tg, tx = Tensor(g).realize(), Tensor(x).realize()
    opts = hand_coded_opts(_kernel(tg.T @ tx).ast, Device["CPU"].renderer)
    rows = 8 if _cpu_float_lanes() == 16 else 4
    assert opts[0] == Opt(OptOps.UPCAST, 0, 2 * rows) and not any(o.op is OptOps.PADTO for o in opts), opts
    np.testing.assert_allclose(run_plan(tg.T @ tx, opts), g.T.astype(np.float64) @ x, rtol=1e-4, atol=1e-4)


def test_a_matmul_with_b_in_panels_keeps_the_tile_of_two_vectors():
    """Tensor.matmul stores a large B in panels of two vectors' width: a wider tile would straddle two panels."""
    a, b = (Tensor(v).realize() for v in _inputs((256, 256), (256, 256), seed=24))
    items, _ = create_schedule([(a @ b).uop], ["CPU"], device_facts)
    opts = hand_coded_opts(items[-1].ast, Device["CPU"].renderer)
    lanes = _cpu_float_lanes()
    padded = [o.axis for o in opts if o.op is OptOps.PADTO]  # AVX2 pads m (256 -> 258) for its 6 rows, never n
    assert Opt(OptOps.UPCAST, 1, 2 * lanes) in opts and 1 not in padded, opts


@pytest.mark.parametrize("m, n", [(128, 256), (512, 64)])
def test_matmul_splits_the_loop_of_its_biggest_operand_across_cores(m: int, n: int):
    """x @ w.T (k = 784): the cores split the output loop that the biggest operand depends on, so each core reads
    half of it: w's rows when w is the bigger (nn.Linear(784, 256) on a batch of 128, whose w each core then finds
    in its own cache after the SGD step that updated its half), x's rows when x is."""
    x, w = _inputs((m, 784), (n, 784), seed=25)
    tx, tw = Tensor(x).realize(), Tensor(w).realize()
    item = _kernel(tx @ tw.T)
    with Context(THREADS=2):
        opts = hand_coded_opts(item.ast, Device["CPU"].renderer)
        threads = [o for o in opts if o.op is OptOps.THREAD]
        assert [o.axis for o in threads] == [1 if n > m else 0] and threads[0].amount % 2 == 0, opts
        np.testing.assert_allclose(run_plan(tx @ tw.T, opts), x.astype(np.float64) @ w.T, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose((tx @ tw.T).numpy(), x.astype(np.float64) @ w.T, rtol=1e-4, atol=1e-4)


def test_lanes_of_a_gathered_operand_are_its_loads():
    """a @ b with a (m, k) row-major: the tile's broadcast operand, 8 rows of a at one k, is 8 loads k floats
    apart (a gather); each lane is broadcast straight from its load, not put into a vector and taken out again
    (that round trip cost the 8 x 48 tile a fifth of its time)."""
    a, b = _inputs((16, 24), (24, 100), seed=27)
    ta, tb = Tensor(a).realize(), Tensor(b).realize()
    plan = [Opt(OptOps.PADTO, 1, 48), Opt(OptOps.UPCAST, 0, 8), Opt(OptOps.UPCAST, 1, 48)]
    program = get_program(_kernel(ta @ tb).ast, Device["CPU"].renderer, plan)
    assert not [u for u in program.uops if u.op is Ops.GEP and u.src[0].op is Ops.VECTORIZE]
    got = run_plan(ta @ tb, plan)
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    pa, pb = Tensor(a, device="PYTHON").realize(), Tensor(b, device="PYTHON").realize()
    np.testing.assert_array_equal(run_plan(pa @ pb, plan, "PYTHON"), got)


def test_a_long_scans_last_kernel_loads_each_block_total_once_a_vector():
    """A cumsum over 2^16 elements adds to each block of 64 the totals of the blocks before it, from three levels of
    block sums. Its lanes are 16*i + 0..15 of a block of 64: (16*i + k)//64 is i//4 for every lane, so each level's
    total is one load a vector, not a division and a load a lane (the combining kernel of 2^20 floats: 2.6 ->
    0.2 ms). The values are numpy's in float64."""
    (a,) = _inputs((1 << 16,), seed=61)
    t = Tensor(a).realize().cumsum(0)
    items, _ = create_schedule([t.uop], ["CPU"], device_facts)
    program = get_program(items[-1].ast, Device["CPU"].renderer)
    lanes = _cpu_float_lanes()
    divisions = [u for u in program.uops if u.op in (Ops.IDIV, Ops.MOD)]
    assert Opt(OptOps.UPCAST, 0, lanes) in program.opts and len(divisions) <= 4, (program.opts, len(divisions))
    np.testing.assert_allclose(t.numpy(), np.cumsum(a.astype(np.float64)), rtol=1e-4, atol=1e-3)


def test_sums_side_by_side_are_each_unrolled():
    """`silu(x @ w1.T) * (x @ w3.T)` for one row x is one kernel of two sums side by side, each a dot product along
    contiguous memory: both are unrolled (a plan that unrolled one left the other a scalar loop, 5x slower). The
    values are numpy's, unrolled or not, on the CPU and on the PYTHON device."""
    x, w1, w3 = _inputs((1, 96), (40, 96), (40, 96), seed=5)
    a, b = x @ w1.T.astype(np.float64), x @ w3.T.astype(np.float64)
    want = a / (1 + np.exp(-a)) * b
    t = (Tensor(x).realize() @ Tensor(w1).realize().T).silu() * (Tensor(x).realize() @ Tensor(w3).realize().T)
    items, _ = create_schedule([t.uop], ["CPU"], device_facts)
    assert len(reduce_axes(items[-1].ast)) == 2
    opts = hand_coded_opts(items[-1].ast, Device["CPU"].renderer)
    assert sorted(o.axis for o in opts if o.op is OptOps.UNROLL) == [0, 1], opts
    for device in ("CPU", "PYTHON"):
        np.testing.assert_allclose(run_last_plan(t, opts, device), want, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(run_last_plan(t, [], device), want, rtol=1e-4, atol=1e-4)
