"""Tensor cores: the TC opt, the WMMA op and its renderings.

Without a GPU (CI): the kernels the TC opt makes run on the PYTHON device's interpreter, which executes WMMA by its
definition (codegen/tensor_cores.py) with the work-items of a group in step, against numpy in float64: every
layout the opt produces (either operand as A, transposed operands, several blocks a warp, several warps a block,
work after the sum). The layouts themselves are checked to cover each matrix once. The CUDA C of those kernels is
compiled by NVRTC for sm_80 and sm_90, and their PTX assembled by ptxas, where those are installed.

With a GPU: fp16 matmuls on the CUDA and PTX devices (whose heuristic picks TC) against numpy.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from zeptograd import Device, Tensor, dtypes
from zeptograd.codegen import get_program
from zeptograd.codegen.opt import Opt, OptError, OptOps, apply_opts
from zeptograd.codegen.tensor_cores import MMA_M16N8K16_F16, WMMA_16_16_16_F16_RDNA3, tensor_cores
from zeptograd.engine.facts import device_facts
from zeptograd.renderer.cuda import CUDARenderer
from zeptograd.renderer.ptx import PTXRenderer
from zeptograd.runtime.buffer import buffer_for
from zeptograd.runtime.device import device_tensor_cores
from zeptograd.runtime.ops_cuda import compile_cuda, nvrtc_problem
from zeptograd.runtime.ops_python import PythonProgram
from zeptograd.schedule.kernelize import create_schedule
from zeptograd.schedule.layout import fragment_core, fragment_permutation

sys.path.insert(0, str(Path(__file__).parent))
from test_ptx import PTXAS, assembled, needs_ptxas

RNG = np.random.default_rng(16)
TC, UPCAST, LOCAL = OptOps.TC, OptOps.UPCAST, OptOps.LOCAL


def half(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float16)


def host(x: np.ndarray) -> Tensor:
    """A tensor in the host's memory whatever DEVICE says: the interpreter reads and writes its buffers."""
    return Tensor(x, device="CPU")


def item_of(out: Tensor):
    items, _ = create_schedule([out.uop], ["CPU"], device_facts)
    (item,) = [it for it in items if it.ast is not None][-1:]
    return item


def emulated(out: Tensor, opts: list[Opt] | None, renderer=None) -> tuple[np.ndarray, tuple[Opt, ...]]:
    """`out`'s last kernel made for the CUDA renderer (with `opts`, else its heuristic's plan) and run by the PYTHON
    device's interpreter; the result and the plan."""
    item = item_of(out)
    program = get_program(item.ast, renderer or CUDARenderer(), opts)
    bufs = [buffer_for(b).allocate() for b in item.bufs]
    PythonProgram(program.uops)(bufs)
    return bufs[0].array().reshape(out.shape).astype(np.float64), program.opts


@pytest.mark.parametrize("layout", [MMA_M16N8K16_F16, WMMA_16_16_16_F16_RDNA3], ids=lambda tc: tc.name)
def test_layouts_cover_each_matrix_evenly(layout) -> None:
    # every element of A, B and C is held by the same number of lanes: once (NVIDIA), or twice for RDNA3's A and B
    # (lanes 16..31 repeat lanes 0..15); C and D exactly once
    m, n, k = layout.dims
    for pos, shape, count in ((layout.a, (m, k), 0), (layout.b, (k, n), 1), (layout.c, (m, n), 2)):
        seen = np.zeros(shape, int)
        for lane in range(layout.threads):
            for i in range(layout.elements[count]):
                seen[pos(lane, i)] += 1
        copies = layout.threads * layout.elements[count] // seen.size
        assert (seen == copies).all() and (count < 2 or copies == 1), f"{layout.name}: operand {'abc'[count]}"


def test_wmma_definition_against_numpy() -> None:
    tc = MMA_M16N8K16_F16
    m, n, k = tc.dims
    a, b, c = half(m, k), half(k, n), RNG.standard_normal((m, n)).astype(np.float32)
    frag = lambda big, pos, count: [tuple(big[pos(lane, i)] for i in range(count)) for lane in range(tc.threads)]
    d = tc.execute(frag(a, tc.a, 8), frag(b, tc.b, 4), frag(c, tc.c, 4))
    want = a.astype(np.float64) @ b + c
    for lane in range(tc.threads):
        for i in range(4):
            assert d[lane][i] == pytest.approx(want[tc.c(lane, i)], rel=1e-6, abs=1e-6)


PLANS = [
    [Opt(TC, 0, 0)],
    [Opt(TC, 1, 0)],  # the other operand as A: the output's rows are the tensor core's n
    [Opt(TC, 0, 0), Opt(UPCAST, 0, 2)],
    [Opt(TC, 0, 0), Opt(UPCAST, 1, 2), Opt(UPCAST, 0, 2), Opt(LOCAL, 0, 2)],
    [Opt(TC, 0, 0), Opt(LOCAL, 1, 2), Opt(LOCAL, 0, 2)],
]


@pytest.mark.parametrize("plan", PLANS, ids=lambda p: "-".join(f"{o.op.name}{o.axis}.{o.amount}" for o in p))
@pytest.mark.parametrize("out_dtype", [dtypes.float32, dtypes.float16], ids=lambda d: d.name)
def test_tc_plans_match_numpy(plan: list[Opt], out_dtype) -> None:
    a, b = half(64, 48), half(48, 32)
    out = host(a).matmul(host(b), dtype=out_dtype)
    got, opts = emulated(out, plan)
    assert opts[0].op is TC
    want = a.astype(np.float64) @ b
    tol = 1e-5 if out_dtype is dtypes.float32 else 2e-3
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * 8)


@pytest.mark.parametrize(
    "case", ["a_transposed", "b_transposed", "bias_relu", "batched", "product_in_half", "heuristic"]
)
def test_tc_layouts_of_operands(case: str) -> None:
    a, b = half(32, 64), half(64, 16)
    ta, tb = host(a), host(b)
    want = a.astype(np.float64) @ b
    plan: list[Opt] | None = [Opt(TC, 0, 0), Opt(UPCAST, 0, 2)]
    if case == "a_transposed":  # A stored k-major
        out = host(np.ascontiguousarray(a.T)).realize().T.matmul(tb, dtype=dtypes.float32)
    elif case == "b_transposed":  # x @ w.T with w stored (n, k)
        out = ta.matmul(host(np.ascontiguousarray(b.T)).realize().T, dtype=dtypes.float32)
    elif case == "bias_relu":
        bias = RNG.standard_normal(16).astype(np.float32)
        out = (ta.matmul(tb, dtype=dtypes.float32) + host(bias)).relu()
        want = np.maximum(want + bias, 0)
    elif case == "batched":
        a3, b3 = half(3, 32, 64), half(3, 64, 16)
        out = host(a3).matmul(host(b3), dtype=dtypes.float32)
        want = a3.astype(np.float64) @ b3
        plan = [Opt(TC, 0, 0), Opt(UPCAST, 1, 2), Opt(LOCAL, 0, 3)]
    elif case == "product_in_half":  # fp16 @ fp16: cast(sum(cast(a * b))) -> half
        out = ta @ tb
    else:  # the CUDA heuristic's own plan
        out, plan = ta.matmul(tb, dtype=dtypes.float32), None
    got, opts = emulated(out, plan)
    assert opts[0].op is TC, opts
    np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-2 if case == "product_in_half" else 1e-4)


def test_tc_refusals() -> None:
    tcs = tensor_cores("CUDA")
    mm = item_of(host(half(32, 32)).matmul(host(half(32, 32)), dtype=dtypes.float32)).ast
    with pytest.raises(OptError, match="no tensor cores"):
        apply_opts(mm, [Opt(TC, 0, 0)], 1024)
    with pytest.raises(OptError, match="not multiples"):
        apply_opts(
            item_of(host(half(20, 32)).matmul(host(half(32, 32)), dtype=dtypes.float32)).ast,
            [Opt(TC, 0, 0)],
            1024,
            tcs,
        )
    with pytest.raises(OptError, match="float16"):  # float32 operands: no fp32 tensor core here
        apply_opts(
            item_of(host(np.ones((32, 32), np.float32)) @ host(np.ones((32, 32), np.float32))).ast,
            [Opt(TC, 0, 0)],
            1024,
            tcs,
        )
    with pytest.raises(OptError, match="one sum"):
        apply_opts(item_of(host(half(32, 32)) + 1).ast, [Opt(TC, 0, 0)], 1024, tcs)
    with pytest.raises(OptError, match="TC comes first"):
        apply_opts(mm, [Opt(UPCAST, 0, 2), Opt(TC, 0, 0)], 1024, tcs)
    with pytest.raises(OptError, match="UNROLL after TC"):
        apply_opts(mm, [Opt(TC, 0, 0), Opt(OptOps.UNROLL, 0, 2)], 1024, tcs)
    with pytest.raises(OptError, match="axis 5 out of range"):
        apply_opts(mm, [Opt(TC, 5, 0)], 1024, tcs)
    with pytest.raises(OptError, match="warp of 32"):
        apply_opts(mm, [Opt(TC, 0, 0)], 16, tcs)


# *** operands copied into fragment order (schedule/layout.py), loaded a fragment at a time (devectorizer.fragment) ***


def fragment_stored(x: np.ndarray | Tensor, a_side: bool) -> tuple[Tensor, Tensor]:
    """`x` copied into the m16n8k16 fragment order as an A (else a B) operand: the stored copy, realized in the
    host's memory, and the view of it that reads back as `x` (what matmul on a tensor-core device makes)."""
    tc = MMA_M16N8K16_F16
    bm, bn, bk = tc.dims
    order = tc.a_order if a_side else tc.b_order
    assert order is not None
    split, perm = fragment_permutation(x.shape, (bm, bk) if a_side else (bk, bn), order, a_side)
    inverse = tuple(perm.index(i) for i in range(len(perm)))
    stored = (x if isinstance(x, Tensor) else host(x)).reshape(*split).permute(*perm).contiguous().realize()
    return stored, stored.permute(*inverse).reshape(x.shape)


@pytest.mark.parametrize("a_side", [True, False], ids=["A", "B"])
def test_fragment_order_puts_each_lanes_fragment_together(a_side: bool) -> None:
    # brute force against the layout's position functions: in every block, lane l's element i of the fragment is
    # element l * count + i of the stored block
    tc = MMA_M16N8K16_F16
    x = half(48, 32) if a_side else half(32, 24)
    stored, view = fragment_stored(x, a_side)
    np.testing.assert_array_equal(view.numpy(), x)
    rows, cols = (16, 16) if a_side else (16, 8)
    count, position = (tc.elements[0], tc.a) if a_side else (tc.elements[1], tc.b)
    flat = stored.numpy().reshape(-1)
    blocks = [(r, c) for r in range(x.shape[0] // rows) for c in range(x.shape[1] // cols)]
    if not a_side:  # B's blocks are stored a column of blocks after another
        blocks.sort(key=lambda rc: (rc[1], rc[0]))
    for n, (r, c) in enumerate(blocks):
        for lane in range(tc.threads):
            for i in range(count):
                row, col = position(lane, i)
                assert flat[n * rows * cols + lane * count + i] == x[r * rows + row, c * cols + col]


@pytest.mark.parametrize("shape", [(64, 32, 256), (32, 48, 128), (2, 32, 64, 128)], ids=str)
def test_fragment_ordered_operands_are_whole_fragment_loads(shape: tuple[int, ...], tmp_path: Path) -> None:
    *batch, m, k, n = shape
    a, b = half(*batch, m, k), half(*batch, k, n)
    (_, fa), (_, fb) = fragment_stored(a, True), fragment_stored(b, False)
    out = fa @ fb
    item = item_of(out)
    got, opts = emulated(out, None)
    assert opts[0].op is TC
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=4e-3, atol=4e-2)
    # every fragment is one load: 16 bytes of A, 8 of B (a tile's WMMAs share them along its rows and columns)
    src = get_program(item.ast, CUDARenderer()).src
    wmmas = src.count("zg_mma_m16n8k16_f16_f32(val")
    a_loads, b_loads = src.count("reinterpret_cast<const zg_half8*>"), src.count("reinterpret_cast<const zg_half4*>")
    assert "const half val" not in src and a_loads * b_loads == wmmas, (a_loads, b_loads, wmmas)
    ptx = get_program(item.ast, PTXRenderer()).src
    assert ptx.count("ld.global.v4.b32") == a_loads and ptx.count("ld.global.v2.b32") == b_loads
    if nvrtc_problem() is None:
        assert "mma.sync.aligned.m16n8k16" in compile_cuda(src, "sm_90").ptx
    if PTXAS is not None:
        assembled([ptx], tmp_path)


def test_fragment_loads_only_where_aligned() -> None:
    a, b = half(32, 32), half(32, 16)
    # a row-major A: a lane's elements are pairs 8 rows apart, so they stay loads of their own
    src = get_program(item_of(host(a) @ fragment_stored(b, False)[1]).ast, CUDARenderer()).src
    assert "zg_half8*" not in src and "const half val" in src and "zg_half4*" in src
    # a fragment-ordered B one element into its buffer: each fragment contiguous, but not on a boundary of its
    # size, where a GPU's vector load would fault
    stored, _ = fragment_stored(b, False)
    shifted = host(np.concatenate([half(1), stored.numpy().reshape(-1)])).realize()[1:].reshape(stored.shape)
    perm = fragment_permutation(b.shape, (16, 8), MMA_M16N8K16_F16.b_order, False)[1]
    view = shifted.permute(*(perm.index(i) for i in range(len(perm)))).reshape(b.shape)
    out = host(a).matmul(view, dtype=dtypes.float32)
    src = get_program(item_of(out).ast, CUDARenderer()).src
    assert "zg_half4*" not in src and "const half val" in src
    got, _ = emulated(out, None)
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


def test_matmul_copies_operands_on_tensor_core_devices_only() -> None:
    def fake(shape: tuple[int, ...], dtype=dtypes.float16) -> SimpleNamespace:
        return SimpleNamespace(shape=shape, dtype=dtype)

    def core(a, b, dtype, device: str = "CUDA"):
        return fragment_core(a, b, dtype, device_tensor_cores(device))

    big = fake((256, 256))
    # an H100's CUDA device (sm_90a) copies for its warpgroup MMA; any other, and a device not opened, for mma.sync
    opened = getattr(Device._opened.get("CUDA"), "renderer", None)
    assert core(big, big, dtypes.float16) is (opened.tensor_cores[0] if opened else MMA_M16N8K16_F16)
    assert core(big, big, dtypes.float16, "PTX")
    assert core(big, big, dtypes.float16, "CPU") is None
    assert core(big, big, dtypes.float32) is None  # summed in float32 operands: no tensor core
    assert core(fake((256, 256), dtypes.float32), fake((256, 256), dtypes.float32), dtypes.float32) is None
    assert core(fake((64, 64)), fake((64, 64)), dtypes.float16) is None  # too little work to pay
    assert core(fake((264, 256)), big, dtypes.float16) is None  # m not a multiple of 16
    # HIP's RDNA3 layout has no fragment order: it is compiled, never run
    assert core(big, big, dtypes.float16, "HIP") is None


def test_tensor_core_kernels_ask_for_four_blocks_an_sm() -> None:
    a, b = host(half(128, 64)), host(half(64, 256))
    item = item_of(a @ b)
    plan = [Opt(TC, 0, 0), Opt(UPCAST, 0, 2), Opt(LOCAL, 0, 2), Opt(UPCAST, 1, 8), Opt(LOCAL, 1, 2)]
    assert "__launch_bounds__(128, 4)" in get_program(item.ast, CUDARenderer(), plan).src
    wide = [Opt(TC, 0, 0), Opt(UPCAST, 0, 2), Opt(LOCAL, 0, 2), Opt(UPCAST, 1, 16), Opt(LOCAL, 1, 2)]
    assert "__launch_bounds__(128)" in get_program(item.ast, CUDARenderer(), wide).src  # 32 WMMAs: the cap spills
    assert ", 4)" not in get_program(item_of(a + 1).ast, CUDARenderer()).src  # no tensor core: no minimum


def _tc_kernels(kind: str) -> list:
    """Tensor-core kernels of fp16 (`kind` "f16") or bfloat16 ("bf16") operands: float32 and narrow outputs, and
    work after the sum."""
    if kind == "f16":
        a, b = host(half(64, 64)), host(half(64, 32))
    else:
        (x, _), (y, _) = bf16(64, 64), bf16(64, 32)
        a, b = Tensor(x, dtype="bfloat16", device="CPU"), Tensor(y, dtype="bfloat16", device="CPU")
    return [
        item_of(a.matmul(b, dtype=dtypes.float32)),
        item_of(a @ b),
        item_of((a.matmul(b, dtype=dtypes.float32) + 1).relu()),
    ]


def _instruction(kind: str) -> str:
    return f"mma.sync.aligned.m16n8k16.row.col.f32.{kind}.{kind}.f32"


@pytest.mark.skipif(nvrtc_problem() is not None, reason="NVRTC is not installed (pip install -e '.[cuda]')")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("kind", ["f16", "bf16"])
def test_cuda_c_with_tensor_cores_compiles(kind: str, arch: str) -> None:
    for item in _tc_kernels(kind):
        program = get_program(item.ast, CUDARenderer())
        assert program.opts[0].op is TC and program.opts[0].amount == ["f16", "bf16"].index(kind), program.opts
        assert _instruction(kind) in program.src and _instruction(kind) in compile_cuda(program.src, arch).ptx


@needs_ptxas
@pytest.mark.parametrize("kind", ["f16", "bf16"])
def test_ptx_with_tensor_cores_assembles(kind: str, tmp_path: Path) -> None:
    srcs = [get_program(item.ast, PTXRenderer()).src for item in _tc_kernels(kind)]
    assert all(_instruction(kind) in src for src in srcs)
    assembled(srcs, tmp_path)


def test_ptx_plan_runs_in_emulation() -> None:
    a, b = half(32, 32), half(32, 16)
    got, opts = emulated(host(a).matmul(host(b), dtype=dtypes.float32), None, PTXRenderer())
    assert opts[0].op is TC
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("device", ["CUDA", "PTX"])
@pytest.mark.parametrize("shape", [(64, 32, 48), (256, 512, 128), (2, 128, 64, 96), (2, 256, 256, 256)], ids=str)
def test_fp16_matmul_on_gpu(device: str, shape: tuple[int, ...]) -> None:
    if not Device.usable(device):
        pytest.skip(f"no usable {device} device here")
    *batch, m, n, k = shape
    a, b = half(*batch, m, k), half(*batch, k, n)
    want = a.astype(np.float64) @ b
    got32 = Tensor(a, device=device).matmul(Tensor(b, device=device), dtype=dtypes.float32).numpy()
    np.testing.assert_allclose(got32, want, rtol=1e-3, atol=1e-3)
    got16 = (Tensor(a, device=device) @ Tensor(b, device=device)).numpy().astype(np.float64)
    np.testing.assert_allclose(got16, want, rtol=4e-3, atol=4e-2)


@pytest.mark.parametrize("device", ["CUDA", "PTX"])
def test_fp16_matmul_of_a_transposed_view_on_gpu(device: str) -> None:
    # the operands are copied into fragment order whatever view they are (here B = w.T)
    if not Device.usable(device):
        pytest.skip(f"no usable {device} device here")
    a, w = half(512, 256), half(384, 256)
    got = (Tensor(a, device=device) @ Tensor(w, device=device).T).numpy().astype(np.float64)
    np.testing.assert_allclose(got, a.astype(np.float64) @ w.T.astype(np.float64), rtol=4e-3, atol=4e-2)


# ---- bfloat16 tensor cores: mma.sync with `.bf16` operands, which the IR carries as their 16-bit patterns ----


def bf16(*shape: int) -> tuple[np.ndarray, np.ndarray]:
    """float32 values and those values rounded to bfloat16 (torch's conversion, the oracle's), as float64."""
    torch = pytest.importorskip("torch")
    x = RNG.standard_normal(shape).astype(np.float32)
    return x, torch.from_numpy(x).bfloat16().double().numpy()


BF16_PLANS = [
    [Opt(TC, 0, 1)],
    [Opt(TC, 1, 1)],
    [Opt(TC, 0, 1), Opt(UPCAST, 1, 2), Opt(UPCAST, 0, 2), Opt(LOCAL, 0, 2)],
    None,  # the CUDA heuristic's plan
]


@pytest.mark.parametrize("plan", BF16_PLANS, ids=lambda p: "heuristic" if p is None else "-".join(map(str, p)))
@pytest.mark.parametrize("out_dtype", [dtypes.float32, dtypes.bfloat16], ids=lambda d: d.name)
def test_bfloat16_tc_plans_match_numpy(plan: list[Opt] | None, out_dtype) -> None:
    torch = pytest.importorskip("torch")
    (a, a64), (b, b64) = bf16(64, 48), bf16(48, 32)
    x, y = Tensor(a, dtype="bfloat16", device="CPU"), Tensor(b, dtype="bfloat16", device="CPU")
    got, opts = emulated(x.matmul(y, dtype=out_dtype), plan)
    assert opts[0] == Opt(TC, opts[0].axis, 1), opts  # the bfloat16 tensor core
    want = a64 @ b64  # exact products summed: what the tensor core computes, up to float32 sums
    if out_dtype is dtypes.bfloat16:  # rounded once at the end, as torch rounds; the buffer holds the bits
        got = (got.astype(np.uint32) << 16).view(np.float32)
        want = torch.from_numpy(want).bfloat16().double().numpy()
        np.testing.assert_allclose(got, want, rtol=2**-7, atol=1e-2)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_bfloat16_matmul_products_are_exact_on_every_device() -> None:
    # a bfloat16 product is exact in float32 and summed there (as torch and a tensor core compute it), not rounded to
    # bfloat16 before the sum: the result is the float64 sum rounded once, bit for bit here where no sum rounds
    a = np.array([[1 + 2**-7, 1 + 2**-7]], np.float32)  # exactly representable in bfloat16
    b = np.array([[1 + 2**-7], [-1.0]], np.float32)
    got = (Tensor(a, dtype="bfloat16") @ Tensor(b, dtype="bfloat16")).float().numpy()
    # (1 + 2**-7)**2 - (1 + 2**-7) = 2**-7 + 2**-14; rounding the product first would give 2**-7
    assert got[0, 0] == np.float32(2**-7 + 2**-14)


def test_ptx_bfloat16_plan_runs_in_emulation() -> None:
    (a, a64), (b, b64) = bf16(32, 32), bf16(32, 16)
    x, y = Tensor(a, dtype="bfloat16", device="CPU"), Tensor(b, dtype="bfloat16", device="CPU")
    got, opts = emulated(x.matmul(y, dtype=dtypes.float32), None, PTXRenderer())
    assert opts[0].op is TC and opts[0].amount == 1
    np.testing.assert_allclose(got, a64 @ b64, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("device", ["CUDA", "PTX"])
@pytest.mark.parametrize("shape", [(64, 32, 48), (256, 512, 128), (2, 256, 256, 256)], ids=str)
def test_bfloat16_matmul_on_gpu(device: str, shape: tuple[int, ...]) -> None:
    torch = pytest.importorskip("torch")
    if not Device.usable(device):
        pytest.skip(f"no usable {device} device here")
    *batch, m, n, k = shape
    (a, a64), (b, b64) = bf16(*batch, m, k), bf16(*batch, k, n)
    x, y = Tensor(a, dtype="bfloat16", device=device), Tensor(b, dtype="bfloat16", device=device)
    np.testing.assert_allclose(x.matmul(y, dtype=dtypes.float32).numpy(), a64 @ b64, rtol=1e-4, atol=1e-4)
    want = torch.from_numpy(a64 @ b64).bfloat16().double().numpy()
    np.testing.assert_allclose((x @ y).float().numpy(), want, rtol=2**-7, atol=1e-2)


def test_fragment_ordered_bfloat16_operands_are_whole_fragment_loads() -> None:
    (a, a64), (b, b64) = bf16(64, 32), bf16(32, 256)
    x, y = Tensor(a, dtype="bfloat16", device="CPU"), Tensor(b, dtype="bfloat16", device="CPU")
    out = fragment_stored(x, True)[1].matmul(fragment_stored(y, False)[1], dtype=dtypes.float32)
    got, opts = emulated(out, None)
    assert opts[0] == Opt(TC, opts[0].axis, 1), opts
    np.testing.assert_allclose(got, a64 @ b64, rtol=1e-5, atol=1e-5)
    src = get_program(item_of(out).ast, CUDARenderer()).src
    assert "reinterpret_cast<const zg_ushort8*>" in src and "reinterpret_cast<const zg_ushort4*>" in src
