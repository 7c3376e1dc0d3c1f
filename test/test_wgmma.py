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
from zeptograd.mixin.functional import _fragment_core, fragment_permutation
from zeptograd.renderer import cuda
from zeptograd.renderer.cuda import CUDARenderer
from zeptograd.runtime.buffer import buffer_for
from zeptograd.runtime.ops_cuda import compile_cuda, nvrtc_problem
from zeptograd.runtime.ops_python import PythonProgram
from zeptograd.schedule.kernelize import create_schedule
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


def run(out: Tensor, opts: list[Opt] | None, renderer: CUDARenderer | None = None) -> tuple[np.ndarray, tuple]:
    """`out`'s last kernel made by the sm_90a renderer (with `opts`, else its heuristic's plan) and run by the PYTHON
    device's interpreter: the result in float64, and the program."""
    item = item_of(out)
    program = get_program(item.ast, renderer or CUDARenderer("sm_90a"), opts)
    bufs = [buffer_for(b).allocate() for b in item.bufs]
    PythonProgram(program.uops)(bufs)
    return bufs[0].array().reshape(out.shape).astype(np.float64), program


@pytest.mark.parametrize("n, k", SHAPES, ids=str)
def test_layouts_cover_each_matrix_once(n: int, k: int) -> None:
    tc = wgmma(n, k)
    assert tc.dims == (64, n, k) and tc.threads == 128 and tc.warpgroup
    for pos, shape, count in ((tc.a, (64, k), 0), (tc.b, (k, n), 1), (tc.c, (64, n), 2)):
        seen = np.zeros(shape, int)
        for lane in range(128):
            for i in range(tc.elements[count]):
                seen[pos(lane, i)] += 1
        assert (seen == 1).all(), f"operand {'abc'[count]}"


def test_a_and_d_are_mma_fragments_a_warp_at_a_time() -> None:
    # the PTX ISA's wgmma register fragments: warp w holds rows 16w .. 16w + 15, as mma.m16n8k16 holds its 16 rows
    tc = wgmma(128, 32)
    for lane in range(128):
        warp, lane32 = divmod(lane, 32)
        for i in range(16):
            row, col = MMA_M16N8K16_F16.a(lane32, i % 8)
            assert tc.a(lane, i) == (16 * warp + row, 16 * (i // 8) + col)
        for i in range(64):
            row, col = MMA_M16N8K16_F16.c(lane32, i % 4)
            assert tc.c(lane, i) == (16 * warp + row, 8 * (i // 4) + col)


@pytest.mark.parametrize("n, k", SHAPES, ids=str)
def test_b_is_the_shared_tile_of_core_matrices(n: int, k: int) -> None:
    # brute force: lane l's elements 8j .. 8j + 7 are 16-byte row 128 j + l of the tile the helper stores, whose
    # element (k, n) sits at 16N (k // 16) + 128 (n // 8) + 64 (k // 8 % 2) + 8 (n % 8) + k % 8 (no swizzle, K-major)
    tc = wgmma(n, k)
    for lane in range(128):
        for i in range(tc.elements[1]):
            kk, nn = tc.b(lane, i)
            offset = 16 * n * (kk // 16) + 128 * (nn // 8) + 64 * (kk // 8 % 2) + 8 * (nn % 8) + kk % 8
            assert offset == (128 * (i // 8) + lane) * 8 + i % 8


@pytest.mark.parametrize("n, k", SHAPES, ids=str)
@pytest.mark.parametrize("a_side", [True, False], ids=["A", "B"])
def test_fragment_order_puts_each_lanes_16_bytes_in_turn(n: int, k: int, a_side: bool) -> None:
    # the copy into fragment order (functional.py) of one block: lane l's elements 8j .. 8j + 7 are its
    # (128 j + l)-th 16 bytes, so a warp's 16-byte loads read 512 contiguous bytes
    tc = wgmma(n, k)
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


@pytest.mark.parametrize("plan", PLANS, ids=lambda p: "heuristic" if p is None else "-".join(map(str, p)))
@pytest.mark.parametrize("out_dtype", [dtypes.float32, dtypes.float16], ids=lambda d: d.name)
def test_plans_match_numpy(plan: list[Opt] | None, out_dtype) -> None:
    a, b = half(128, 64), half(64, 256)
    got, program = run(host(a).matmul(host(b), dtype=out_dtype), plan)
    assert program.opts[0] == Opt(TC, program.opts[0].axis, 0)  # the wgmma, the sm_90a renderer's first
    assert "zg_wgmma_m64n128k32_f16_f32(" in program.src
    tol = 1e-5 if out_dtype is dtypes.float32 else 2e-3
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=tol, atol=tol * 8)


@pytest.mark.parametrize("case", ["bfloat16", "bias_relu", "batched", "b_transposed"])
def test_operands_and_work_after_the_sum(case: str) -> None:
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
    got, program = run(out, None)
    assert "wgmma_m64n128k32" in program.src, program.opts
    np.testing.assert_allclose(got, want, rtol=2e-3, atol=1e-4)


def test_fragment_ordered_operands_are_16_byte_loads() -> None:
    # what `x @ y` on an H100 computes: both operands copied into the wgmma's fragment order (functional.py)
    tc = wgmma(*cuda.WGMMA_SHAPE)
    a, b = half(128, 64), half(64, 256)
    views = []
    for x, block, order, rows_first in ((a, (64, 32), tc.a_order, True), (b, (32, 128), tc.b_order, False)):
        split, perm = fragment_permutation(x.shape, block, order, rows_first)
        stored = host(x).reshape(*split).permute(*perm).contiguous().realize()
        views.append(stored.permute(*inverse_permutation(perm)).reshape(x.shape))
    got, program = run(views[0].matmul(views[1], dtype=dtypes.float32), None)
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    # each lane's A (16 values: 2 loads) and B (32: 4 loads) a step, each load 16 bytes; no load of one value
    assert program.src.count("reinterpret_cast<const zg_half8*>") == 6 and "const half val" not in program.src


def test_the_sm90a_renderer_offers_the_warpgroup_mma_first() -> None:
    assert not any(tc.warpgroup for tc in CUDARenderer().tensor_cores)  # sm_80 (the default): mma.sync only
    tcs = CUDARenderer("sm_90a").tensor_cores
    assert tcs[:2] == (wgmma(*cuda.WGMMA_SHAPE), wgmma(*cuda.WGMMA_SHAPE, dtypes.bfloat16))
    assert MMA_M16N8K16_F16 in tcs
    # sizes the warpgroup MMA does not divide (m 32) fall back to mma.sync
    _, program = run(host(half(32, 32)).matmul(host(half(32, 128)), dtype=dtypes.float32), None)
    assert "zg_mma_m16n8k16_f16_f32(" in program.src and "wgmma" not in program.src


def test_an_open_sm90a_device_copies_operands_for_its_warpgroup_mma(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(Device._opened, "CUDA", SimpleNamespace(renderer=CUDARenderer("sm_90a")))
    big = SimpleNamespace(shape=(256, 256), dtype=dtypes.float16, device="CUDA")
    assert _fragment_core(big, big, dtypes.float16) is wgmma(*cuda.WGMMA_SHAPE)


def test_more_shared_memory_than_a_block_declares_is_refused() -> None:
    # 4 warpgroups of 2 tiles of 32 x 128 halves: 64 KiB
    item = item_of(host(half(256, 64)).matmul(host(half(64, 128)), dtype=dtypes.float32))
    with pytest.raises(ValueError, match="65536 bytes of shared memory"):
        get_program(item.ast, CUDARenderer("sm_90a"), [Opt(TC, 0, 0), Opt(LOCAL, 0, 4)])


def test_shapes_and_names() -> None:
    tc = wgmma(128, 32, dtypes.bfloat16)
    assert tensor_core(tc.name) is tc and pickle.loads(pickle.dumps(tc)) is tc
    assert wgmma(128, 32) is wgmma(128, 32, dtypes.float16) is not tc
    for n, k in ((96, 16), (32, 16), (128, 8), (512, 16)):
        with pytest.raises(ValueError, match="power of two"):
            wgmma(n, k)


@needs_nvrtc
@pytest.mark.parametrize("kind", [dtypes.float16, dtypes.bfloat16], ids=lambda d: d.name)
def test_cuda_c_with_the_warpgroup_mma_compiles_for_sm90a(kind) -> None:
    x = Tensor(RNG.standard_normal((128, 64)).astype(np.float32), dtype=kind, device="PYTHON")
    y = Tensor(RNG.standard_normal((64, 256)).astype(np.float32), dtype=kind, device="PYTHON")
    for out in (x.matmul(y, dtype=dtypes.float32), (x @ y).relu()):
        src = get_program(item_of(out).ast, CUDARenderer("sm_90a")).src
        compiled = compile_cuda(src, "sm_90a")  # NVRTC and its ptxas: a CUBIN
        assert compiled.cubin is not None and compiled.cubin[:4] == b"\x7fELF"
        name = "bf16" if kind is dtypes.bfloat16 else "f16"
        # two instructions a step of 32 (the k loop of 2 steps unrolled or not)
        assert compiled.ptx.count(f"wgmma.mma_async.sync.aligned.m64n128k16.f32.{name}.{name}") in (2, 4)
        assert "fence.proxy.async.shared::cta" in compiled.ptx and "wgmma.wait_group.sync.aligned 0" in compiled.ptx
