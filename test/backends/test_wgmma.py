"""The warpgroup MMA (`wgmma.mma_async`, sm_90a: an H100's or H200's tensor cores at full rate).

Without a GPU (CI): the layouts of codegen/tensor_cores.py's `wgmma` cover each matrix once; its fragment order puts
each lane's 16 bytes where the CUDA helper stores them; the kernels the TC opt makes with it run on the PYTHON
device's interpreter (WMMA by its definition) against numpy, in the plans the heuristic and the benchmark use; the
CUDA C the sm_90a renderer writes for them is compiled by NVRTC (with ptxas) for sm_90a; the operands copied into
fragment order are read 16 bytes a load. On an H100 the same layouts were checked against the hardware
(`bench/cuda.py --wgmma`), and test_wmma.py's GPU tests run the heuristic's wgmma kernels.
"""

from __future__ import annotations

import pickle
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from zeptograd import Device, Tensor, dtypes
from zeptograd.codegen import get_program
from zeptograd.codegen.opt import Opt, OptOps
from zeptograd.codegen.tensor_cores import MMA_M16N8K16_F16, tensor_core, wgmma
from zeptograd.helpers import Context
from zeptograd.renderer import cuda
from zeptograd.renderer.cuda import CUDARenderer
from zeptograd.runtime.buffer import buffer_for
from zeptograd.runtime.device import device_tensor_cores
from zeptograd.runtime.ops_cuda import compile_cuda, nvrtc_problem
from zeptograd.runtime.ops_python import PythonProgram
from zeptograd.schedule.kernelize import create_schedule
from zeptograd.schedule.layout import fragment_core, fragment_permutation, stored_row_major
from zeptograd.uop.shape import inverse_permutation

sys.path.insert(0, str(Path(__file__).parent))
from test_wmma import bf16, half


def host(x: np.ndarray) -> Tensor:
    """A tensor on the PYTHON device: its matmuls read their operands as they are (the CPU's copy B into panels)."""
    return Tensor(x, device="PYTHON")


def item_of(out: Tensor):
    (item,) = [it for it in create_schedule([out.uop], ["PYTHON"])[0] if it.ast is not None]
    return item


RNG = np.random.default_rng(90)
TC, UPCAST, LOCAL = OptOps.TC, OptOps.UPCAST, OptOps.LOCAL
SHAPES = [(64, 16), (128, 16), (128, 32), (256, 16), (64, 64)]
needs_nvrtc = pytest.mark.skipif(
    nvrtc_problem() is not None, reason="NVRTC is not installed (pip install -e '.[cuda]')"
)


def sm90a(row_major: bool = False) -> CUDARenderer:
    """The H100's renderer, offering the wgmma with the K-major B tile or the one that reads row-major operands."""
    with Context(WGMMA_ROW_MAJOR=int(row_major)):
        return CUDARenderer("sm_90a")


LAYOUTS = pytest.mark.parametrize("row_major", [False, True], ids=["k_major", "row_major"])


def run(out: Tensor, opts: list[Opt] | None, renderer: CUDARenderer | None = None) -> tuple[np.ndarray, tuple]:
    """`out`'s last kernel made by the sm_90a renderer (with `opts`, else its heuristic's plan) and run by the PYTHON
    device's interpreter: the result in float64, and the program."""
    item = item_of(out)
    program = get_program(item.ast, renderer or sm90a(), opts)
    bufs = [buffer_for(b).allocate() for b in item.bufs]
    PythonProgram(program.uops)(bufs)
    return bufs[0].array().reshape(out.shape).astype(np.float64), program


@LAYOUTS
@pytest.mark.parametrize("n, k", SHAPES, ids=str)
def test_layouts_cover_each_matrix_once(n: int, k: int, row_major: bool) -> None:
    tc = wgmma(n, k, row_major=row_major)
    assert tc.dims == (64, n, k) and tc.threads == 128 and tc.warpgroup
    for pos, shape, count in ((tc.a, (64, k), 0), (tc.b, (k, n), 1), (tc.c, (64, n), 2)):
        seen = np.zeros(shape, int)
        for lane in range(128):
            for i in range(tc.elements[count]):
                seen[pos(lane, i)] += 1
        assert (seen == 1).all(), f"operand {'abc'[count]}"


@LAYOUTS
def test_d_is_mma_fragments_a_warp_at_a_time(row_major: bool) -> None:
    # the PTX ISA's wgmma accumulators: warp w holds rows 16w .. 16w + 15, each 8 columns as mma.m16n8k16 holds C
    tc = wgmma(128, 32, row_major=row_major)
    for lane in range(128):
        warp, lane32 = divmod(lane, 32)
        for i in range(64):
            row, col = MMA_M16N8K16_F16.c(lane32, i % 4)
            assert tc.c(lane, i) == (16 * warp + row, 8 * (i // 4) + col)


def hardware_product(
    n: int, k: int, a_lanes: list, b_lanes: list, strides: tuple[int, int], n_major: bool
) -> np.ndarray:
    """What the tensor core computes from each lane's A registers and B values, as the PTX ISA describes wgmma with A
    in registers and B in shared memory without swizzle: A's element j of k chunk c (lane element 8c + j) at
    mma.m16n8k16's fragment position, warp w 16 rows down, column 16c on; the helper stores lane l's B values
    8j .. 8j + 7 as the (128 j + l)-th 16 bytes of the tile, and the instruction for chunk c (32n bytes on) reads its
    B element (kk, nn) at byte k_stride (kk // 8) + n_stride (nn // 8) + 16 (kk % 8) + 2 (nn % 8) if the tile is
    N-major (imm-trans-b 1), else at k_stride (kk // 8) + n_stride (nn // 8) + 16 (nn % 8) + 2 (kk % 8)."""
    a_hw, b_hw, tile = np.zeros((64, k)), np.zeros((k, n)), {}
    for lane in range(128):
        for i, value in enumerate(a_lanes[lane]):
            row, col = MMA_M16N8K16_F16.a(lane % 32, i % 8)
            a_hw[16 * (lane // 32) + row, 16 * (i // 8) + col] = value
        for j in range(len(b_lanes[lane]) // 8):
            for e in range(8):  # 16-bit values: the tile's halves
                tile[(128 * j + lane) * 8 + e] = b_lanes[lane][8 * j + e]
    k_stride, n_stride = strides
    for kk in range(k):
        chunk, r = divmod(kk, 16)
        for nn in range(n):
            row, within = (r % 8, nn % 8) if n_major else (nn % 8, r % 8)  # a core matrix's 16-byte row, its half
            byte = 32 * n * chunk + k_stride * (r // 8) + n_stride * (nn // 8) + 16 * row + 2 * within
            b_hw[kk, nn] = tile.get(byte // 2, np.nan)  # beyond the tile: not the product's
    return a_hw @ b_hw


@LAYOUTS
@pytest.mark.parametrize("n, k", SHAPES, ids=str)
def test_the_hardware_computes_a_at_b_from_the_lanes_values(n: int, k: int, row_major: bool) -> None:
    # each lane's values where tc.a and tc.b put them (row-major: A's k renumbered as B's, so the instruction's sum
    # over its own k is the product's)
    tc = wgmma(n, k, row_major=row_major)
    a, b = RNG.standard_normal((64, k)), RNG.standard_normal((k, n))
    a_lanes = [[a[tc.a(lane, i)] for i in range(tc.elements[0])] for lane in range(128)]
    b_lanes = [[b[tc.b(lane, i)] for i in range(tc.elements[1])] for lane in range(128)]
    strides = cuda.wgmma_strides(tc)
    got = hardware_product(n, k, a_lanes, b_lanes, strides, row_major)
    np.testing.assert_allclose(got, a @ b, rtol=1e-12, atol=1e-12)
    # the two strides exchanged (bench/cuda.py --wgmma's check that fails on the GPU) read B elsewhere
    wrong = hardware_product(n, k, a_lanes, b_lanes, strides[::-1], row_major)
    assert not np.allclose(wrong, a @ b)


@pytest.mark.parametrize("n, k", SHAPES, ids=str)
def test_a_lanes_row_values_are_contiguous_k(n: int, k: int) -> None:
    # lane 32w + 4g + t's A values of row 16w + g (and of 16w + g + 8) are k 4Ct .. 4Ct + 4C - 1 (C = k / 16): one
    # row-major A is read 16 bytes a load; each 16-byte row of B it stores is 8 contiguous columns of one row of k
    tc = wgmma(n, k, row_major=True)
    for lane in range(128):
        positions = [tc.a(lane, i) for i in range(tc.elements[0])]
        for row in {r for r, _ in positions}:
            cols = sorted(c for r, c in positions if r == row)
            assert cols == list(range(cols[0], cols[0] + len(cols))) and cols[0] % len(cols) == 0
        for j in range(tc.elements[1] // 8):
            rows_cols = [tc.b(lane, 8 * j + e) for e in range(8)]
            assert len({r for r, _ in rows_cols}) == 1
            assert [c for _, c in rows_cols] == list(range(rows_cols[0][1], rows_cols[0][1] + 8))


@LAYOUTS
@pytest.mark.parametrize("n, k", SHAPES, ids=str)
@pytest.mark.parametrize("a_side", [True, False], ids=["A", "B"])
def test_fragment_order_puts_each_lanes_16_bytes_in_turn(n: int, k: int, a_side: bool, row_major: bool) -> None:
    # the copy into fragment order (schedule/layout.py) of one block: lane l's elements 8j .. 8j + 7 are its
    # (128 j + l)-th 16 bytes, so a warp's 16-byte loads read 512 contiguous bytes
    tc = wgmma(n, k, row_major=row_major)
    block = (64, k) if a_side else (k, n)
    order, position, count = (tc.a_order, tc.a, tc.elements[0]) if a_side else (tc.b_order, tc.b, tc.elements[1])
    assert order is not None
    split, perm = fragment_permutation(block, block, order, a_side)
    x = np.arange(block[0] * block[1]).reshape(block)
    stored = x.reshape(split).transpose(perm).reshape(-1)
    for lane in range(128):
        for i in range(count):
            assert stored[(128 * (i // 8) + lane) * 8 + i % 8] == x[position(lane, i)]


def test_definition_against_numpy() -> None:
    tc = wgmma(64, 32)
    a, b, c = half(64, 32), half(32, 64), RNG.standard_normal((64, 64)).astype(np.float32)
    frag = lambda big, pos, count: [tuple(big[pos(lane, i)] for i in range(count)) for lane in range(128)]
    d = tc.execute(frag(a, tc.a, 16), frag(b, tc.b, 16), frag(c, tc.c, 32))
    want = a.astype(np.float64) @ b + c
    for lane in range(128):
        for i in range(32):
            assert d[lane][i] == pytest.approx(want[tc.c(lane, i)], rel=1e-6, abs=1e-6)


PLANS = [
    None,  # the heuristic's: TC and 2 warpgroups a block along m
    [Opt(TC, 0, 0)],
    [Opt(TC, 1, 0)],  # the other operand as A
    [Opt(TC, 0, 0), Opt(LOCAL, 1, 2)],
    [Opt(TC, 0, 0), Opt(UPCAST, 0, 2)],  # two WMMAs a step, each with its own tile in turn
]


@LAYOUTS
@pytest.mark.parametrize("plan", PLANS, ids=lambda p: "heuristic" if p is None else "-".join(map(str, p)))
@pytest.mark.parametrize("out_dtype", [dtypes.float32, dtypes.float16], ids=lambda d: d.name)
def test_plans_match_numpy(plan: list[Opt] | None, out_dtype, row_major: bool) -> None:
    a, b = half(128, 64), half(64, 256)
    got, program = run(host(a).matmul(host(b), dtype=out_dtype), plan, sm90a(row_major))
    assert program.opts[0] == Opt(TC, program.opts[0].axis, 0)  # the wgmma, the sm_90a renderer's first
    assert f"zg_{wgmma(128, 32, row_major=row_major).name}(" in program.src
    tol = 1e-5 if out_dtype is dtypes.float32 else 2e-3
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=tol, atol=tol * 8)


@LAYOUTS
@pytest.mark.parametrize("case", ["bfloat16", "bias_relu", "batched", "b_transposed"])
def test_operands_and_work_after_the_sum(case: str, row_major: bool) -> None:
    a, b = half(128, 32), half(32, 128)
    want = a.astype(np.float64) @ b
    if case == "bfloat16":
        (x, x64), (y, y64) = bf16(128, 32), bf16(32, 128)
        ta, tb = Tensor(x, dtype="bfloat16", device="PYTHON"), Tensor(y, dtype="bfloat16", device="PYTHON")
        out = ta.matmul(tb, dtype=dtypes.float32)
        want = x64 @ y64
    elif case == "bias_relu":
        bias = RNG.standard_normal(128).astype(np.float32)
        out = (host(a).matmul(host(b), dtype=dtypes.float32) + host(bias)).relu()
        want = np.maximum(want + bias, 0)
    elif case == "batched":
        a3, b3 = half(2, 64, 32), half(2, 32, 128)
        out = host(a3).matmul(host(b3), dtype=dtypes.float32)
        want = a3.astype(np.float64) @ b3
    else:  # x @ w.T with w stored (n, k)
        out = host(a).matmul(host(np.ascontiguousarray(b.T)).realize().T, dtype=dtypes.float32)
    got, program = run(out, None, sm90a(row_major))
    assert "wgmma_m64n128k32" in program.src, program.opts
    np.testing.assert_allclose(got, want, rtol=2e-3, atol=1e-4)


@LAYOUTS
def test_fragment_ordered_operands_are_16_byte_loads(row_major: bool) -> None:
    # what `x @ y` on an H100 computes where it copies both operands into the wgmma's fragment order (the layout pass)
    tc = wgmma(*cuda.WGMMA_SHAPE, row_major=row_major)
    a, b = half(128, 64), half(64, 256)
    views = []
    for x, block, order, rows_first in ((a, (64, 32), tc.a_order, True), (b, (32, 128), tc.b_order, False)):
        split, perm = fragment_permutation(x.shape, block, order, rows_first)
        stored = host(x).reshape(*split).permute(*perm).contiguous().realize()
        views.append(stored.permute(*inverse_permutation(perm)).reshape(x.shape))
    got, program = run(views[0].matmul(views[1], dtype=dtypes.float32), None, sm90a(row_major))
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    # each lane's A (16 values: 2 loads) and B (32: 4 loads) a step, each load 16 bytes; no load of one value
    assert program.src.count("reinterpret_cast<const zg_half8*>") == 6 and "const half val" not in program.src


def test_row_major_operands_are_read_as_they_are_16_bytes_a_load() -> None:
    # what `x @ y` of two realized tensors computes on an H100 with WGMMA_ROW_MAJOR=1: no copies, the k of A
    # renumbered as B's
    a, b = half(128, 64), half(64, 256)
    got, program = run(host(a).matmul(host(b), dtype=dtypes.float32), None, sm90a(row_major=True))
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    assert program.src.count("reinterpret_cast<const zg_half8*>") == 6 and "const half val" not in program.src


def test_which_operands_are_stored_row_major() -> None:
    x = host(half(64, 32)).realize()
    assert stored_row_major(x.uop) and stored_row_major(x.reshape(32, 64).uop)
    assert stored_row_major((x + 1).contiguous().uop)
    assert not stored_row_major(x.T.uop) and not stored_row_major((x + 1).uop) and not stored_row_major(x[1:].uop)


def test_the_sm90a_renderer_offers_the_warpgroup_mma_first() -> None:
    assert not any(tc.warpgroup for tc in CUDARenderer().tensor_cores)  # sm_80 (the default): mma.sync only
    tcs = sm90a().tensor_cores
    assert tcs[:2] == (wgmma(*cuda.WGMMA_SHAPE), wgmma(*cuda.WGMMA_SHAPE, dtypes.bfloat16))
    assert MMA_M16N8K16_F16 in tcs
    assert sm90a(row_major=True).tensor_cores[:2] == tuple(
        wgmma(*cuda.WGMMA_SHAPE, dt, row_major=True) for dt in (dtypes.float16, dtypes.bfloat16)
    )
    # sizes the warpgroup MMA does not divide (m 32) fall back to mma.sync
    _, program = run(host(half(32, 32)).matmul(host(half(32, 128)), dtype=dtypes.float32), None)
    assert "zg_mma_m16n8k16_f16_f32(" in program.src and "wgmma" not in program.src


@LAYOUTS
def test_an_open_sm90a_device_copies_operands_for_its_warpgroup_mma(
    monkeypatch: pytest.MonkeyPatch, row_major: bool
) -> None:
    monkeypatch.setitem(Device._opened, "CUDA", SimpleNamespace(renderer=sm90a(row_major)))
    big = SimpleNamespace(shape=(256, 256), dtype=dtypes.float16)
    tc = fragment_core(big, big, dtypes.float16, device_tensor_cores("CUDA"))
    assert tc is wgmma(*cuda.WGMMA_SHAPE, row_major=row_major) and tc.reads_row_major == row_major


def test_more_shared_memory_than_a_block_declares_is_refused() -> None:
    # 4 warpgroups of 2 tiles of 32 x 128 halves: 64 KiB
    item = item_of(host(half(256, 64)).matmul(host(half(64, 128)), dtype=dtypes.float32))
    with pytest.raises(ValueError, match="65536 bytes of shared memory"):
        get_program(item.ast, sm90a(), [Opt(TC, 0, 0), Opt(LOCAL, 0, 4)])


def test_shapes_and_names() -> None:
    tc = wgmma(128, 32, dtypes.bfloat16)
    assert tensor_core(tc.name) is tc and pickle.loads(pickle.dumps(tc)) is tc
    assert wgmma(128, 32) is wgmma(128, 32, dtypes.float16) is not tc
    rows = wgmma(128, 32, dtypes.bfloat16, row_major=True)
    assert tensor_core(rows.name) is rows is not tc and pickle.loads(pickle.dumps(rows)) is rows
    for n, k in ((96, 16), (32, 16), (128, 8), (512, 16)):
        with pytest.raises(ValueError, match="power of two"):
            wgmma(n, k)


@needs_nvrtc
@LAYOUTS
@pytest.mark.parametrize("kind", [dtypes.float16, dtypes.bfloat16], ids=lambda d: d.name)
def test_cuda_c_with_the_warpgroup_mma_compiles_for_sm90a(kind, row_major: bool) -> None:
    x = Tensor(RNG.standard_normal((128, 64)).astype(np.float32), dtype=kind, device="PYTHON")
    y = Tensor(RNG.standard_normal((64, 256)).astype(np.float32), dtype=kind, device="PYTHON")
    for out in (x.matmul(y, dtype=dtypes.float32), (x @ y).relu()):
        src = get_program(item_of(out).ast, sm90a(row_major)).src
        compiled = compile_cuda(src, "sm_90a")  # NVRTC and its ptxas: a CUBIN
        assert compiled.cubin is not None and compiled.cubin[:4] == b"\x7fELF"
        name = "bf16" if kind is dtypes.bfloat16 else "f16"
        # two instructions a step of 32 (the k loop of 2 steps unrolled or not)
        instruction = f"wgmma.mma_async.sync.aligned.m64n128k16.f32.{name}.{name}"
        assert compiled.ptx.count(instruction) in (2, 4)
        assert all(
            line.rstrip().endswith(f", {int(row_major)};") for line in compiled.ptx.splitlines() if instruction in line
        )
        assert "fence.proxy.async.shared::cta" in compiled.ptx and "wgmma.wait_group.sync.aligned 0" in compiled.ptx
