"""The CL device (OpenCL C through pyopencl; PoCL on the CPU here): the source it renders, GPU-style launches
(work-group indices, LOCAL and GROUP opts with local memory and a barrier), every dtype the device supports,
copies, assignment, a training step and BEAM, each against numpy or torch; float16 on a device opened without
cl_khr_fp16 (stored as half, computed in float, rounded per op) bit for bit against numpy's float16 and the CPU
device's. The whole op suite runs on it with `DEVICE=CL pytest test/ops/test_tensor_*.py`."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

from zeptograd import Device, GlobalCounters, Tensor, dtypes
from zeptograd.codegen import UnsupportedDType, get_program
from zeptograd.codegen.opt import Opt, OptError, OptOps, apply_opts
from zeptograd.dtype import DType
from zeptograd.engine.facts import device_facts
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
    items, _ = create_schedule([out.uop], ["CL"], device_facts)
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
    items, _ = create_schedule([(cl(a).realize() * 2 + 1).uop], ["CL"], device_facts)
    program = get_program(items[-1].ast, Device["CL"].renderer)
    src = program.src
    assert re.search(r"^(__attribute__\(\(.*\)\) )?__kernel void ", src, re.MULTILINE), src
    assert "__global float* restrict data0" in src and "__global const float* restrict data1" in src
    assert "get_group_id(0)" in src and "get_local_id(0)" in src  # the heuristic gives work-groups
    lanes = re.search(r"vload(4|8|16)\(", src)  # vectors up to the device's preferred width
    assert lanes is not None and f"vstore{lanes[1]}(" in src and "fma(" in src  # x*2+1 is a fused multiply-add
    glob, local = program.launch_global, program.launch_local
    assert np.prod(glob) * int(lanes[1]) == a.size  # one work-item a vector of lanes
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
    items, _ = create_schedule([a.sum(axis=1).uop], ["CL"], device_facts)
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
    (item,) = [i for i in create_schedule([four.uop], ["CL"], device_facts)[0] if i.ast is not None]
    with pytest.raises(OptError, match="GROUP needs at most 3 output axes"):
        apply_opts(item.ast, [Opt(OptOps.GROUP, 0, 4)], 256)
    with pytest.raises(OptError, match="UPCAST after GROUP"):
        apply_opts(ast, [Opt(OptOps.GROUP, 0, 4), Opt(OptOps.UPCAST, 0, 2)], 256)


def test_heuristic_groups_a_long_full_reduction():
    a = data((4, 8192), dtypes.float32)
    items, _ = create_schedule([cl(a).realize().sum(axis=1).uop], ["CL"], device_facts)
    plans = [get_program(item.ast, Device["CL"].renderer).opts for item in items if item.ast is not None]
    assert any(o.op in (OptOps.GROUP, OptOps.GROUPTOP) for plan in plans for o in plan), plans
    close(cl(a).sum(axis=1), a.astype(np.float64).sum(axis=1).astype(np.float32), rtol=1e-5, atol=1e-3)


@pytest.mark.parametrize("shape", [(512, 1024), (64, 8, 96), (250, 300), (7, 33)])
def test_heuristic_row_sums_read_rows_contiguously(shape: tuple[int, ...]):
    # 4 rows a work-item, upcast before the unroll: each vector is a run of one row (vloadN), not one element of
    # each of 4 rows gathered, which PoCL runs at about half the speed
    a = data(shape, dtypes.float32)
    t = cl(a).realize()
    items, _ = create_schedule([t.sum(axis=-1).uop], ["CL"], device_facts)
    program = get_program(items[-1].ast, Device["CL"].renderer)
    kinds = [o.op for o in program.opts]
    if OptOps.UNROLL in kinds and OptOps.UPCAST in kinds:
        assert kinds.index(OptOps.UPCAST) < kinds.index(OptOps.UNROLL), program.opts
    lanes = Device["CL"].renderer.lanes
    if any(o.op is OptOps.UNROLL and o.amount % lanes == 0 for o in program.opts):
        assert f"vload{lanes}(" in program.src and not re.search(r"\(float\d+\)\(val", program.src), program.src
    # n float32 adds in any order are within n * eps of the sum of the magnitudes
    bound = shape[-1] * np.finfo(np.float32).eps * np.abs(a).astype(np.float64).sum(axis=-1).max()
    close(t.sum(axis=-1), a.astype(np.float64).sum(axis=-1).astype(np.float32), rtol=0, atol=bound)
    close(t.max(axis=-1), a.max(axis=-1), rtol=0, atol=0)


def test_full_sum_through_two_kernels_matches_numpy():
    a = data(((1 << 20) + 3,), dtypes.float32)  # split in two stages, the first padded
    # two float32 stages of about 1024 adds each: within 2048 eps of the sum of magnitudes
    bound = 2048 * np.finfo(np.float32).eps * np.abs(a).astype(np.float64).sum()
    close(cl(a).sum(), np.asarray(a.astype(np.float64).sum(), np.float32), rtol=0, atol=bound)


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


def cl_opened_without(monkeypatch: pytest.MonkeyPatch, *extensions: str) -> Any:
    """The CL device, for this test, opened as if it lacked `extensions` (so the test means the same on a device
    that has them), with no program compiled for the device as it was reused (realize caches them by name)."""
    from zeptograd.engine import realize
    from zeptograd.runtime.ops_cl import CLDevice

    dev = CLDevice(without=frozenset(extensions))
    monkeypatch.setitem(Device._opened, "CL", dev)
    monkeypatch.setattr(realize, "_programs", {})
    return dev


def test_missing_dtype_is_refused_naming_device_and_dtype(monkeypatch):
    renderer = cl_opened_without(monkeypatch, "cl_khr_fp64", "cl_khr_fp16").renderer
    # double needs cl_khr_fp64; half is stored by every OpenCL device (computed in float without cl_khr_fp16)
    assert dtypes.float64 not in renderer.supported_dtypes() and dtypes.float16 in renderer.supported_dtypes()
    with pytest.raises(UnsupportedDType, match=f"CL device does not support {dtypes.float64!r}"):
        (cl(np.ones(3, np.float32)).cast(dtypes.float64) + 1).realize()


def test_bitcast_and_casts_use_opencl_spellings():
    a = data((16,), dtypes.float32)
    close(cl(a).bitcast(dtypes.int32), a.view(np.int32))
    close(cl(a).cast(dtypes.int8), a.astype(np.int8))
    close(cl(a).cast(dtypes.uint8).cast(dtypes.float32), a.astype(np.uint8).astype(np.float32))


@pytest.mark.parametrize(
    "name, fn, ref",
    [
        ("exp", lambda t: t.exp(), lambda a: np.exp(a.astype(np.float64))),
        ("sin", lambda t: t.sin(), lambda a: np.sin(a.astype(np.float64))),
        (
            "where of compares",
            lambda t: (t > 0.5).where(t * 2, (t < -1).where(-t, t)),
            lambda a: np.where(a > 0.5, a * 2, np.where(a < -1, -a, a)),
        ),
        (
            "bools as floats",
            lambda t: (t > 0).cast(dtypes.float32) + (t != t).cast(dtypes.float32) * 7,
            lambda a: (a > 0).astype(np.float32) + np.isnan(a).astype(np.float32) * 7,
        ),
        (
            "logic of masks",
            lambda t: ((t > 0) & (t < 2) | (t == 1.5)).where(t, 0.25),
            lambda a: np.where((a > 0) & (a < 2) | (a == 1.5), a, np.float32(0.25)),
        ),
        (
            "bits and shifts",
            lambda t: ((t.bitcast(dtypes.int32) >> 23) & 255).cast(dtypes.float32),
            lambda a: ((a.view(np.int32) >> 23) & 255).astype(np.float32),
        ),
        ("trunc and sqrt", lambda t: t.trunc() + t.abs().sqrt(), lambda a: np.trunc(a) + np.sqrt(np.abs(a))),
    ],
)
def test_masks_and_bit_ops_stay_vectors(name, fn, ref):
    """Comparisons, WHERE, bool casts, shifts, bit casts and trunc are vector code on CL (a mask: int lanes of -1/0,
    as OpenCL's vector comparisons give), not lane by lane: the values are numpy's, special values included, and
    the kernel takes no lane out of a vector outside a rare branch (sin's large arguments) but the last two of its
    test for any lane in it."""
    a = data((4096,), dtypes.float32)
    a[:8] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.5, -1.0, 2.0]
    items, _ = create_schedule([fn(cl(a).realize()).uop], ["CL"], device_facts)
    src = get_program(items[-1].ast, Device["CL"].renderer).src
    top_level = [line for line in src.splitlines() if line.startswith("  const ")]
    assert re.search(r"vload(4|8|16)\(", src), src
    assert len([line for line in top_level if re.search(r"\.s[0-9a-f]\b", line)]) <= 2, src
    with np.errstate(all="ignore"):
        want = ref(a)
    np.testing.assert_allclose(fn(cl(a)).numpy(), want.astype(np.float32), rtol=2e-7, atol=0)


def test_pocl_kernels_on_x86_say_clwb_so_builtins_inline():
    """PoCL's builtins are built with CLWB; a kernel compiled for a CPU LLVM thinks lacks it calls them instead of
    inlining them. The attribute goes on PoCL CPU kernels where the host has CLWB, nowhere else."""
    import zeptograd.runtime.ops_cl as ops_cl
    from zeptograd.renderer.host import HostCPU

    cl_mod = ops_cl.pyopencl()

    class Fake:
        def __init__(self, platform: str, kind: int) -> None:
            self.platform = type("P", (), {"name": platform})()
            self.type = kind

    pocl, cpu, gpu = "Portable Computing Language", cl_mod.device_type.CPU, cl_mod.device_type.GPU
    clwb, plain = HostCPU(frozenset({"avx2", "clwb"})), HostCPU(frozenset({"avx2"}))
    assert ops_cl.pocl_kernel_attributes(Fake(pocl, cpu), clwb) == '__attribute__((target("clwb")))'
    assert ops_cl.pocl_kernel_attributes(Fake(pocl, gpu), clwb) == ""
    assert ops_cl.pocl_kernel_attributes(Fake("NVIDIA CUDA", gpu), clwb) == ""
    assert ops_cl.pocl_kernel_attributes(Fake(pocl, cpu), plain) == ""
    attrs = Device["CL"].renderer.kernel_attributes
    items, _ = create_schedule([(cl(data((64,), dtypes.float32)).realize() + 1).uop], ["CL"], device_facts)
    src = get_program(items[-1].ast, Device["CL"].renderer).src
    assert f"{attrs} __kernel void " in src if attrs else "\n__kernel void " in src


def test_a_cpu_driver_gets_the_cpus_layouts():
    """PoCL runs work-groups on the host's cores: a large matmul copies B into panels and a large convolution
    reads a padded channels-last copy of its input (and of its weight), as on the CPU device, one kernel more
    each; the values are numpy's and torch's."""
    torch = pytest.importorskip("torch")
    if not Device["CL"].renderer.runs_on_cpu:
        pytest.skip("this CL device is not a CPU")
    a, b = data((256, 256), dtypes.float32), data((256, 256), dtypes.float32)
    items, _ = create_schedule([(cl(a) @ cl(b)).uop], ["CL"], device_facts)
    assert len(items) == 2, [item.ast.arg if item.ast is not None else "copy" for item in items]
    close(cl(a) @ cl(b), a @ b, rtol=1e-4, atol=1e-4)
    x, w = data((4, 16, 32, 32), dtypes.float32), data((16, 16, 3, 3), dtypes.float32)
    items, _ = create_schedule([cl(x).conv2d(cl(w), padding=1).uop], ["CL"], device_facts)
    assert len(items) == 3, [item.ast.arg if item.ast is not None else "copy" for item in items]
    want = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w), padding=1).numpy()
    close(cl(x).conv2d(cl(w), padding=1), want, rtol=1e-4, atol=1e-4)


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
    from zeptograd.engine.search import beam_search

    a = data((4, 96), dtypes.float32)  # few candidates fit: each costs PoCL a compile
    t = cl(a).realize()
    items, _ = create_schedule([t.sum(axis=1).uop], ["CL"], device_facts)
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


# *** float16 on a device without cl_khr_fp16: stored as half, computed in float, rounded per op ***


@pytest.fixture
def no_fp16(monkeypatch):
    """The CL device opened as if it lacked cl_khr_fp16 (PoCL here lacks it anyway)."""
    dev = cl_opened_without(monkeypatch, "cl_khr_fp16")
    # half is emulated, not refused: the tests below compute it
    assert dtypes.float16 in dev.renderer.supported_dtypes()
    assert dev.renderer.emulated_floats == frozenset({dtypes.float16})
    return dev


def bits(a: np.ndarray) -> np.ndarray:
    return a.view(f"uint{8 * a.itemsize}") if a.dtype.kind == "f" else a


def same_bits(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_array_equal(bits(got), bits(want))


def on_cl_and_cpu(fn, *arrays: np.ndarray, either_zero: np.ndarray | None = None) -> np.ndarray:
    """fn on CL tensors of `arrays`, checked bit for bit against the same ops on the CPU device (its float16 is the
    hardware's: _Float16 in C), but for the lanes `either_zero`, where a zero of either sign is right."""
    got = fn(*(Tensor(a, device="CL") for a in arrays))
    assert got.device == "CL"
    out = got.numpy()
    cpu = fn(*(Tensor(a, device="CPU") for a in arrays)).numpy()
    same_bits(*drop_sign_of_zero(out, cpu, either_zero))
    return out


def drop_sign_of_zero(got: np.ndarray, want: np.ndarray, lanes: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """got and want with the zeros in `lanes` made +0.0, where both are zeros there."""
    if lanes is None:
        return got, want
    assert (got[lanes] == 0).all() and (want[lanes] == 0).all()
    got, want = got.copy(), want.copy()
    got[lanes] = want[lanes] = 0
    return got, want


H = np.float16
TINY = 2.0**-24  # the least float16 subnormal
# pairs (a, b) whose sums and products land on ties, in the subnormals, at the overflow threshold, on signed zeros
SPECIAL_PAIRS = [
    (1.0, 2.0**-11),  # 1 + 2**-11: a tie, to 1 (even)
    (1 + 2.0**-10, 2.0**-11),  # a tie, to 1 + 2**-9 (even)
    (2048.0, 1.0),  # 2049: a tie, to 2048
    (2050.0, 1.0),  # 2051: a tie, to 2052
    (65504.0, 16.0),  # 65520: the overflow tie, to inf
    (65504.0, 8.0),  # 65512: back to 65504
    (-65504.0, -16.0),
    (300.0, 300.0),  # 90000: overflow
    (TINY, TINY),
    (3 * TINY, 0.5),  # 1.5 units: a tie, to 2 units
    (TINY, 0.5),  # half a unit: a tie, to 0
    (2.0**-12, 2.0**-13),  # 2**-25: to 0
    (2.0**-14, -TINY),  # the least normal less a unit: the largest subnormal
    (-0.0, -0.0),
    (0.0, -0.0),
    (-0.0, 5.0),
    (np.inf, -np.inf),
    (np.inf, 2.0),
    (-np.inf, 0.0),
    (np.nan, 1.0),
    (-3.0, 0.0),
    (1023 * TINY, 3.0),
]


def half_pairs() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(23)
    scale = 2.0 ** rng.integers(-20, 12, (2, 500))
    a, b = (rng.standard_normal((2, 500)) * scale).astype(H)
    special_a, special_b = np.array(SPECIAL_PAIRS, np.float64).T.astype(H)
    return np.concatenate([a, special_a, special_b]), np.concatenate([b, special_b, special_a])


@pytest.mark.parametrize(
    "name, fn",
    [
        ("add", lambda a, b: a + b),
        ("sub", lambda a, b: a - b),
        ("mul", lambda a, b: a * b),
        ("div", lambda a, b: a / b),
        ("neg", lambda a, b: -a),
        ("sqrt", lambda a, b: a.sqrt() if isinstance(a, Tensor) else np.sqrt(a)),
        ("exp", lambda a, b: a.exp() if isinstance(a, Tensor) else np.exp(a)),
        ("maximum", lambda a, b: a.maximum(b) if isinstance(a, Tensor) else np.maximum(a, b)),
        ("where", lambda a, b: (a < b).where(a, b) if isinstance(a, Tensor) else np.where(a < b, a, b)),
    ],
)
@np.errstate(all="ignore")
def test_half_ops_without_fp16_are_numpys(no_fp16, name, fn):
    a, b = half_pairs()
    # max(0.0, -0.0) may be either zero (IEEE 754's maxNum): MAX is commutative, and which operand it returns on a
    # tie depends on the order the IR keeps them in (on every device and dtype; numpy's float32 and float16 differ)
    zero_tie = (a == 0) & (b == 0) & (np.signbit(a) != np.signbit(b)) if name == "maximum" else None
    got = on_cl_and_cpu(fn, a, b, either_zero=zero_tie)
    want = fn(a, b)
    assert want.dtype == H
    same_bits(*drop_sign_of_zero(got, want, zero_tie))


@np.errstate(all="ignore")
def test_half_comparisons_without_fp16(no_fp16):
    a, b = half_pairs()
    for fn in (lambda x, y: x < y, lambda x, y: x == y, lambda x, y: x != y, lambda x, y: x >= y):
        same_bits(on_cl_and_cpu(fn, a, b), fn(a, b))


@np.errstate(all="ignore")
def test_half_casts_without_fp16(no_fp16):
    a = np.concatenate(half_pairs())
    rng = np.random.default_rng(29)
    # float32 around every float16 tie and across the range, float64 just off ties (a float64 rounds once)
    wide32 = (rng.standard_normal(3000) * 2.0 ** rng.integers(-30, 20, 3000)).astype(np.float32)
    mids = (a.astype(np.float32) + np.nextafter(a, H(np.inf)).astype(np.float32)) / 2
    f32 = np.concatenate([wide32, mids, np.nextafter(mids, np.float32(0)), [65519.996, 65520, 1e6, -0.0, np.nan]])
    f64 = np.concatenate([mids.astype(np.float64) * (1 + 2.0**-40), mids.astype(np.float64) * (1 - 2.0**-40)])
    ints = np.array([0, 1, -1, 2049, 2051, 4097, 65504, 65519, 65520, -65536, 100000, 2**31 - 1], np.int32)
    finite = a[np.isfinite(a)]
    same_bits(on_cl_and_cpu(lambda x: x.cast(dtypes.float32), a), a.astype(np.float32))
    same_bits(on_cl_and_cpu(lambda x: x.cast(dtypes.float64), a), a.astype(np.float64))
    same_bits(on_cl_and_cpu(lambda x: x.cast(dtypes.float16), f32), f32.astype(H))
    same_bits(on_cl_and_cpu(lambda x: x.cast(dtypes.float16), f64), f64.astype(H))
    same_bits(on_cl_and_cpu(lambda x: x.cast(dtypes.float16), ints), ints.astype(H))
    same_bits(on_cl_and_cpu(lambda x: x.cast(dtypes.int32), finite), finite.astype(np.int32))
    same_bits(on_cl_and_cpu(lambda x: x.cast(dtypes.bool), a), a.astype(np.bool_))
    same_bits(on_cl_and_cpu(lambda x: (x > 0).cast(dtypes.float16), a), (a > 0).astype(H))
    same_bits(on_cl_and_cpu(lambda x: x.bitcast(dtypes.int16), a), a.view(np.int16))
    assert (f64.astype(np.float32).astype(H) != f64.astype(H)).any()  # the float64 cases are the hard ones


def test_fused_half_chain_rounds_every_op(no_fp16):
    rng = np.random.default_rng(31)
    a, b, c = (rng.standard_normal((3, 64, 33)) * 8).astype(H)
    ta, tb, tc = (Tensor(x, device="CL").realize() for x in (a, b, c))
    GlobalCounters.reset()
    got = ((ta * tb + tc) / (tb.abs() + 1) - ta).sqrt().numpy()
    assert GlobalCounters.kernel_count == 1
    with np.errstate(invalid="ignore"):
        want = np.sqrt((a * b + c) / (np.abs(b) + H(1)) - a)  # numpy rounds each op to float16
        same_bits(got, want)
        same_bits(got, ((Tensor(a) * Tensor(b) + Tensor(c)) / (Tensor(b).abs() + 1) - Tensor(a)).sqrt().numpy())
        # computed in float32 and rounded once, many differ: the per-op rounding is what is tested
        once = np.sqrt((a.astype(np.float32) * b + c) / (np.abs(b.astype(np.float32)) + 1) - a).astype(H)
    assert (bits(once) != bits(want)).sum() > 100


def exact_halves(shape: tuple[int, ...], scale: int, seed: int) -> np.ndarray:
    """k / scale for integers |k| <= 2 * scale: float16 values whose float32 sums (and sums of float16 products)
    here are exact, so that every order of adding gives the same float32 and one rounding to float16."""
    return (np.random.default_rng(seed).integers(-2 * scale, 2 * scale + 1, shape) / scale).astype(H)


def test_half_sum_and_max_without_fp16(no_fp16):
    # the CPU device sums float16 in float32 and rounds once (mixin/reduce.py): so does CL, its sum exact here
    a = exact_halves((37, 300), 512, 37)
    want = a.astype(np.float32).sum(axis=1).astype(H)
    same_bits(on_cl_and_cpu(lambda x: x.sum(axis=1), a), want)
    # the float32 sums are exact (float64's), so adding in any order gives them
    same_bits(want, a.sum(axis=1, dtype=np.float64).astype(H))
    same_bits(on_cl_and_cpu(lambda x: x.sum(), a), a.astype(np.float32).sum(keepdims=False).astype(H))
    same_bits(on_cl_and_cpu(lambda x: x.max(axis=0), a), a.max(axis=0))
    long = exact_halves((4, 8192), 1024, 41)  # a long row: the heuristic groups it across work-items
    items, _ = create_schedule([cl(long).realize().sum(axis=1).uop], ["CL"], device_facts)
    (plan,) = [get_program(item.ast, no_fp16.renderer).opts for item in items if item.ast is not None]
    assert any(o.op in (OptOps.GROUP, OptOps.GROUPTOP) for o in plan), plan
    same_bits(on_cl_and_cpu(lambda x: x.sum(axis=1), long), long.astype(np.float32).sum(axis=1).astype(H))


def test_half_matmul_without_fp16(no_fp16):
    # the product is float16 (rounded), the sum float32 (exact here), the result rounded once (mixin/functional.py)
    a, b = exact_halves((16, 64), 64, 43), exact_halves((64, 24), 64, 47)
    products = (a.astype(np.float32)[:, :, None] * b.astype(np.float32)[None, :, :]).astype(H)
    want = products.astype(np.float32).sum(axis=1).astype(H)
    got = on_cl_and_cpu(lambda x, y: x @ y, a, b)
    same_bits(got, want)
    assert (products != a[:, :, None].astype(np.float32) * b[None, :, :]).any()  # the products do round


def test_half_kernel_without_fp16_reads_and_writes_bits(no_fp16):
    patterns = np.arange(2**16, dtype=np.int64).astype(np.uint16)
    t = Tensor(patterns, device="CL").bitcast(dtypes.float16)
    # a copy moves bits (NaN payloads too); arithmetic keeps every value, the sign of zero, infinities and denormals
    same_bits(t.flip(0).contiguous().bitcast(dtypes.uint16).numpy(), patterns[::-1])
    values = ~np.isnan(patterns.view(H))
    same_bits((t * 1).bitcast(dtypes.uint16).numpy()[values], patterns[values])
    # padding and a bitcast to a smaller dtype read through gated loads, their fallback read as bits
    x = np.linspace(-3, 3, 12).astype(H)
    same_bits(on_cl_and_cpu(lambda t: t.pad(((2, 1),), value=-1.5), x), np.pad(x, (2, 1), constant_values=-1.5))
    same_bits(on_cl_and_cpu(lambda t: t.bitcast(dtypes.uint8), x), x.view(np.uint8))
    items, _ = create_schedule([(cl(np.ones(4, H)).realize() * 3).uop], ["CL"], device_facts)
    src = get_program(items[-1].ast, no_fp16.renderer).src
    assert "__global ushort* restrict data0" in src and "half" not in src and "cl_khr_fp16" not in src
