"""The CL device (OpenCL C through pyopencl; PoCL on the CPU here): the source it renders, GPU-style launches
(work-group indices, LOCAL and GROUP opts with local memory and a barrier), every dtype the device supports,
copies, assignment, a training step and BEAM, each against numpy or torch. The whole op suite runs on it with
`DEVICE=CL pytest test/test_tensor_*.py`."""

from __future__ import annotations

import numpy as np
import pytest

from zeptograd import Device, GlobalCounters, Tensor, dtypes
from zeptograd.codegen import UnsupportedDType, get_program
from zeptograd.codegen.opt import Opt, OptError, OptOps, apply_opts
from zeptograd.dtype import DType
from zeptograd.helpers import Context
from zeptograd.runtime.buffer import buffer_for
from zeptograd.schedule.kernelize import create_schedule

pytest.importorskip("pyopencl", reason='the CL device needs pyopencl: pip install -e ".[opencl]"')

RNG = np.random.default_rng(17)


def cl(a: np.ndarray) -> Tensor:
    return Tensor(a, device="CL")


def data(shape: tuple[int, ...], dtype: DType, low: float = -3, high: float = 3) -> np.ndarray:
    np_dtype = np.dtype(dtype.fmt) if dtype is not dtypes.bool else np.bool_
    if dtype is dtypes.bool:
        return RNG.random(shape) < 0.5
    if dtypes.is_float(dtype):
        return RNG.uniform(low, high, shape).astype(np_dtype)
    if dtypes.is_unsigned(dtype):
        return RNG.integers(0, int(high) * 10, shape).astype(np_dtype)
    return RNG.integers(int(low) * 10, int(high) * 10, shape).astype(np_dtype)


def close(t: Tensor, want: np.ndarray, rtol: float = 1e-6, atol: float = 1e-6) -> None:
    assert t.device == "CL"
    got = t.numpy()
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol)


def run_with_opts(out: Tensor, opts: list[Opt]) -> tuple[np.ndarray, str]:
    """`out` computed by its (last) kernel planned with `opts` on CL: (the result, the kernel's source)."""
    items, _ = create_schedule([out.uop], ["CL"])
    for item in items[:-1]:
        raise AssertionError(f"expected one kernel, got {len(items)}: {item}")
    item = items[-1]
    program = get_program(item.ast, Device["CL"].renderer, opts)
    bufs = [buffer_for(b) for b in item.bufs]
    Device["CL"].runner(program)(bufs)
    return bufs[0].numpy(), program.src


@pytest.fixture
def on_cl():
    """Tensors made without a device (a layer's parameters) go to CL."""
    old = Device.DEFAULT
    Device.DEFAULT = "CL"
    try:
        yield
    finally:
        Device.DEFAULT = old


def test_cl_is_listed_and_used():
    assert "CL" in Device.get_available_devices()
    assert Device["CL"].renderer.device == "CL" and Device["CL"].renderer.has_local
    t = cl(np.ones(3, np.float32)) + 1
    assert t.device == "CL" and t.tolist() == [2.0, 2.0, 2.0]


def test_renders_opencl_c_with_work_group_indices():
    a = data((64, 32), dtypes.float32)
    items, _ = create_schedule([(cl(a).realize() * 2 + 1).uop], ["CL"])
    program = get_program(items[-1].ast, Device["CL"].renderer)
    src = program.src
    assert src.startswith("__kernel void ") or "\n__kernel void " in src
    assert "__global float* restrict data0" in src and "__global const float* restrict data1" in src
    assert "get_group_id(0)" in src and "get_local_id(0)" in src  # the heuristic gives work-groups
    assert "vload4" in src and "vstore4" in src and "fma(" in src  # x*2+1 is a fused multiply-add
    glob, local = program.launch_global, program.launch_local
    assert np.prod(glob) * 4 == a.size * 2 // 2 or np.prod(glob) * 8 == a.size  # one work-item a vector of lanes
    assert all(g % n == 0 for g, n in zip(glob, local))


def test_fused_kernel_is_one_launch():
    a, b, c = data((64, 65), dtypes.float32), data((64, 65), dtypes.float32), data((65,), dtypes.float32)
    ta, tb, tc = cl(a).realize(), cl(b).realize(), cl(c).realize()
    GlobalCounters.reset()
    out = ((ta * tb + tc).relu() * 2 - 1).sum(axis=1)
    got = out.numpy()
    assert GlobalCounters.kernel_count == 1
    np.testing.assert_allclose(got, (np.maximum(a * b + c, 0) * 2 - 1).sum(axis=1), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "opts",
    [
        [],
        [Opt(OptOps.GROUP, 0, 16)],
        [Opt(OptOps.GROUPTOP, 0, 16)],
        [Opt(OptOps.GROUPTOP, 0, 8), Opt(OptOps.UNROLL, 0, 4)],
        [Opt(OptOps.UNROLL, 0, 4), Opt(OptOps.GROUP, 0, 32)],
        [Opt(OptOps.GROUP, 0, 4096)],  # the whole axis: no loop left, one element a work-item
    ],
    ids=str,
)
def test_full_reduction_with_group_opts_matches_numpy(opts: list[Opt]):
    a = data((4096,), dtypes.float32)
    t = cl(a).realize()
    limit = Device["CL"].renderer.max_local_size
    if any(o.amount > limit for o in opts if o.op in (OptOps.GROUP, OptOps.GROUPTOP)):
        with pytest.raises(OptError, match="work-group of more than"):
            run_with_opts(t.sum(), opts)
        return
    got, src = run_with_opts(t.sum(), opts)
    np.testing.assert_allclose(got, [a.astype(np.float64).sum()], rtol=1e-5, atol=1e-4)
    if opts:
        assert "__local float temp0[" in src and "barrier(CLK_LOCAL_MEM_FENCE);" in src


@pytest.mark.parametrize("op", ["sum", "max", "min", "prod"])
def test_grouped_row_reductions_match_numpy(op: str):
    a = data((6, 96), dtypes.float32, 0.5, 1.5)
    want = getattr(a.astype(np.float64), op)(axis=1).astype(np.float32)
    for opts in ([Opt(OptOps.GROUP, 0, 8)], [Opt(OptOps.GROUPTOP, 0, 16), Opt(OptOps.LOCAL, 0, 2)]):
        if opts[-1].op is OptOps.LOCAL:
            with pytest.raises(OptError, match="LOCAL after GROUP"):
                run_with_opts(getattr(cl(a).realize(), op)(axis=1), opts)
            continue
        got, _ = run_with_opts(getattr(cl(a).realize(), op)(axis=1), opts)
        np.testing.assert_allclose(got, want, rtol=1e-5)


def test_group_then_local_on_another_axis_and_a_matmul():
    a, b = data((8, 64), dtypes.float32, -1, 1), data((64, 12), dtypes.float32, -1, 1)
    want = (a.astype(np.float64) @ b).astype(np.float32)
    ta, tb = cl(a).realize(), cl(b).realize()
    for opts in (
        [Opt(OptOps.LOCAL, 0, 4), Opt(OptOps.LOCAL, 1, 3)],
        [Opt(OptOps.LOCAL, 1, 4), Opt(OptOps.GROUP, 0, 8)],
        [Opt(OptOps.UPCAST, 1, 4), Opt(OptOps.LOCAL, 0, 8), Opt(OptOps.UNROLL, 0, 4)],
    ):
        got, src = run_with_opts(ta @ tb, opts)
        np.testing.assert_allclose(got.reshape(want.shape), want, rtol=1e-5, atol=1e-5)
        assert "get_local_id(" in src


def test_invalid_gpu_opts_raise_clear_errors():
    a = cl(data((16, 24), dtypes.float32)).realize()
    items, _ = create_schedule([a.sum(axis=1).uop], ["CL"])
    ast = items[-1].ast
    with pytest.raises(OptError, match="LOCAL needs a GPU-style device"):
        apply_opts(ast, [Opt(OptOps.LOCAL, 0, 4)])  # no work-groups (the CPU)
    with pytest.raises(OptError, match="5 does not divide the axis size 24"):
        apply_opts(ast, [Opt(OptOps.GROUP, 0, 5)], 256)
    with pytest.raises(OptError, match="axis 1 out of range"):
        apply_opts(ast, [Opt(OptOps.GROUP, 1, 4)], 256)
    with pytest.raises(OptError, match="work-group of more than 8"):
        apply_opts(ast, [Opt(OptOps.LOCAL, 0, 4), Opt(OptOps.GROUP, 0, 4)], 8)
    with pytest.raises(OptError, match="THREAD splits a kernel across CPU cores"):
        apply_opts(ast, [Opt(OptOps.THREAD, 0, 2)], 256)
    four = cl(data((2, 3, 2, 2, 8), dtypes.float32)).realize().sum(axis=4)
    (item,) = [i for i in create_schedule([four.uop], ["CL"])[0] if i.ast is not None]
    with pytest.raises(OptError, match="GROUP needs at most 3 output axes"):
        apply_opts(item.ast, [Opt(OptOps.GROUP, 0, 4)], 256)
    with pytest.raises(OptError, match="UPCAST after GROUP"):
        apply_opts(ast, [Opt(OptOps.GROUP, 0, 4), Opt(OptOps.UPCAST, 0, 2)], 256)


def test_heuristic_groups_a_long_full_reduction():
    a = data((4, 8192), dtypes.float32)
    items, _ = create_schedule([cl(a).realize().sum(axis=1).uop], ["CL"])
    plans = [get_program(item.ast, Device["CL"].renderer).opts for item in items if item.ast is not None]
    assert any(o.op in (OptOps.GROUP, OptOps.GROUPTOP) for plan in plans for o in plan), plans
    close(cl(a).sum(axis=1), a.astype(np.float64).sum(axis=1).astype(np.float32), rtol=1e-5, atol=1e-3)


def supported() -> list[DType]:
    return sorted(Device["CL"].renderer.supported_dtypes(), key=lambda d: d.name)


@pytest.mark.parametrize("dtype", supported(), ids=str)
def test_every_supported_dtype_against_numpy(dtype: DType):
    a, b = data((5, 37), dtype), data((5, 37), dtype)
    if dtype is dtypes.bool:
        close(cl(a) | cl(b), a | b)
        close((cl(a) != cl(b)).sum(axis=1), (a != b).sum(axis=1).astype(np.int32))
        return
    close(cl(a) + cl(b), a + b)
    close(cl(a) * cl(b), a * b)
    close(cl(a).maximum(cl(b)), np.maximum(a, b))
    close(cl(a) < cl(b), a < b)
    close(cl(a).cast(dtypes.float32), a.astype(np.float32))
    close(cl(data((5, 37), dtypes.float32)).cast(dtype).cast(dtypes.int32) * 0 + 1, np.ones((5, 37), np.int32))
    close(cl(a).max(axis=1), a.max(axis=1))


def test_missing_dtype_is_refused_naming_device_and_dtype():
    renderer = Device["CL"].renderer
    lacking = [d for d in (dtypes.float16, dtypes.float64) if d not in renderer.supported_dtypes()]
    if not lacking:
        pytest.skip("this OpenCL device has every dtype")
    with pytest.raises(UnsupportedDType, match=f"CL device does not support {lacking[0]!r}"):
        (cl(np.ones(3, np.float32)).cast(lacking[0]) + 1).realize()


def test_bitcast_and_casts_use_opencl_spellings():
    a = data((16,), dtypes.float32)
    close(cl(a).bitcast(dtypes.int32), a.view(np.int32))
    close(cl(a).cast(dtypes.int8), a.astype(np.int8))
    close(cl(a).cast(dtypes.uint8).cast(dtypes.float32), a.astype(np.uint8).astype(np.float32))


def test_copies_between_cl_and_every_other_device():
    a = data((7, 9), dtypes.float32)
    t = cl(a) * 2
    for dev in ("CPU", "PYTHON"):
        other = t.to(dev)
        assert other.device == dev
        np.testing.assert_array_equal(other.numpy(), a * 2)
        back = (other + 1).to("CL")
        close(back, a * 2 + 1)


def test_softmax_matmul_and_conv2d():
    torch = pytest.importorskip("torch")
    x = data((8, 100), dtypes.float32)
    close(cl(x).softmax(axis=1), torch.softmax(torch.tensor(x), 1).numpy(), rtol=1e-5)
    xi, w = data((2, 3, 12, 12), dtypes.float32), data((8, 3, 3, 3), dtypes.float32)
    want = torch.nn.functional.conv2d(torch.tensor(xi), torch.tensor(w), padding=1).numpy()
    close(cl(xi).conv2d(cl(w), padding=1), want, rtol=1e-4, atol=1e-4)
    a, b = data((130, 200), dtypes.float32, -1, 1), data((200, 96), dtypes.float32, -1, 1)
    close(cl(a) @ cl(b), (torch.tensor(a) @ torch.tensor(b)).numpy(), rtol=1e-4, atol=1e-4)


def test_beam_search_on_cl(tmp_path, monkeypatch):
    monkeypatch.setenv("ZEPTOGRAD_CACHE_DIR", str(tmp_path))
    from zeptograd.codegen.search import beam_search

    a = data((4, 96), dtypes.float32)  # few candidates fit: each costs PoCL a compile
    t = cl(a).realize()
    items, _ = create_schedule([t.sum(axis=1).uop], ["CL"])
    plan = beam_search(items[-1].ast, Device["CL"].renderer, 1)
    got, _ = run_with_opts(t.sum(axis=1), plan)
    np.testing.assert_allclose(got, a.astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-4)
    assert list((tmp_path / "beam").glob("cl_*.json"))  # the winner is cached per device
    b = data((6,), dtypes.float32)
    with Context(BEAM=1):
        close(cl(b) * 3 + 1, b * np.float32(3) + 1, rtol=1e-6)


@pytest.mark.parametrize(
    "plan",
    [
        [Opt(OptOps.GROUP, 0, 4), Opt(OptOps.UNROLL, 1, 2), Opt(OptOps.UNROLL, 0, 4)],
        [Opt(OptOps.GROUPTOP, 0, 4), Opt(OptOps.UNROLL, 0, 2), Opt(OptOps.UNROLL, 1, 4)],
    ],
)
def test_unrolls_around_a_group_read_through_scalar_addresses(plan):
    # the devectorizer built the reads of local memory after the barrier on the pointer it was given, not on the
    # devectorized one: the vector loads before the barrier came back with vector addresses, which PoCL refused
    # ("array subscript is not an integer"; a BEAM search on CL hit it now and then)
    a = data((4, 96), dtypes.float32)
    got, src = run_with_opts(cl(a).realize().sum(axis=1), plan)
    assert "[vec" not in src
    np.testing.assert_allclose(got, a.astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-4)


def test_debug4_prints_the_opencl_source(capsys):
    a = data((16,), dtypes.float32)
    with Context(DEBUG=4):
        out = (cl(a) * 3.25 + 1).numpy()
    text = capsys.readouterr().out
    assert "__kernel void " in text and "fma(" in text
    np.testing.assert_array_equal(out, (a.astype(np.float64) * 3.25 + 1).astype(np.float32))  # fma: one rounding
