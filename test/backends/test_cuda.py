"""The CUDA device.

Without a GPU (CI): the kernels of a representative op set (elementwise in every dtype the renderer claims, casts,
bit casts, where, transcendentals, reductions, matmul, softmax, gathers, grouped reductions through shared
memory) are rendered as CUDA C and compiled by NVRTC for sm_80 and sm_90 to PTX and CUBIN (NVRTC runs ptxas for
the CUBIN); where a standalone ptxas that reads NVRTC's PTX version is installed, it assembles the PTX too. These
tests skip when NVRTC is missing (`pip install -e ".[cuda]"`).

With a GPU (`Device.usable("CUDA")`): the same op families run on it against numpy and torch, with copies between
the GPU and the host. The whole op suite runs with `DEVICE=CUDA pytest test/ops/test_tensor_*.py`.
"""

from __future__ import annotations

import gc
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from zeptograd import Device, Tensor, dtypes
from zeptograd.codegen import get_program
from zeptograd.dtype import DType
from zeptograd.engine.facts import device_facts
from zeptograd.renderer.cuda import CUDARenderer
from zeptograd.runtime import ops_cuda
from zeptograd.runtime.device import DeviceUnavailable
from zeptograd.runtime.ops_cuda import _nvidia_dirs, compile_cuda, nvrtc_problem
from zeptograd.schedule.kernelize import create_schedule

sys.path.insert(0, str(Path(__file__).parent))  # the emulator module next to this file
needs_nvrtc = pytest.mark.skipif(
    nvrtc_problem() is not None, reason="NVRTC is not installed (pip install -e '.[cuda]')"
)
RNG = np.random.default_rng(14)
ARCHS = ("sm_80", "sm_90")


def kernels(*outs: Tensor) -> list[str]:
    """The CUDA C of every kernel that computes `outs` (scheduled on the CPU: a kernel AST names no device)."""
    items, _ = create_schedule([o.uop for o in outs], ["CPU"], device_facts)
    return [get_program(it.ast, CUDARenderer()).src for it in items if it.ast is not None]


def _ptxas() -> tuple[str, tuple[int, int]] | None:
    """A standalone ptxas and the newest PTX ISA version it reads (None when there is none)."""
    # the pip wheel's, then PATH's, then a toolkit's (the GPU machine has /usr/local/cuda/bin, not always on PATH)
    toolkits = [os.environ.get("CUDA_HOME", ""), "/usr/local/cuda"]
    candidates = [str(d / "ptxas") for d in _nvidia_dirs("bin")] + [shutil.which("ptxas") or ""]
    candidates += [f"{home}/bin/ptxas" for home in toolkits if home]
    for path in candidates:
        if not path or not Path(path).is_file():
            continue
        out = subprocess.run([path, "--version"], capture_output=True, text=True).stdout
        if (m := re.search(r"release (\d+)\.(\d+)", out)) is not None:
            # CUDA 13.0 reads PTX ISA 9.0, 13.1 9.1, ...; 12.x reads 8.x
            major, minor = int(m.group(1)), int(m.group(2))
            return path, (major - 4, minor)
    return None


PTXAS = _ptxas()


def accepted(src: str, tmp_path: Path) -> None:
    """NVRTC compiles `src` for each arch (PTX and CUBIN), and a standalone ptxas assembles the PTX when it can."""
    for arch in ARCHS:
        out = compile_cuda(src, arch)
        assert f".target {arch}" in out.ptx and len(out.cubin) > 0
        version = re.search(r"\.version (\d+)\.(\d+)", out.ptx)
        assert version is not None
        if PTXAS is not None and (int(version.group(1)), int(version.group(2))) <= PTXAS[1]:
            ptx = tmp_path / f"k_{arch}.ptx"
            ptx.write_text(out.ptx)
            run = subprocess.run(
                [PTXAS[0], f"-arch={arch}", str(ptx), "-o", str(tmp_path / "k.cubin")], capture_output=True, text=True
            )
            assert run.returncode == 0, f"ptxas rejected the PTX:\n{run.stderr}\n{src}"


def t(shape: tuple[int, ...], dtype: DType = dtypes.float32) -> Tensor:
    return Tensor(RNG.uniform(-3, 3, shape).astype(np.float32)).cast(dtype).realize()


CLAIMED = sorted(CUDARenderer().supported_dtypes(), key=lambda d: d.name)


# the representative op set, shared with test_ptx.py: each function gives the tensors whose kernels are compiled


def dtype_ops(dtype: DType) -> list[Tensor]:
    """Elementwise ops, casts, reductions and division in one dtype."""
    a, b = t((37, 5), dtype), t((37, 5), dtype)
    outs = [a + b, a * b, a.maximum(b), (a < b).where(a, b), a.cast(dtypes.float32), a.sum(1), a.max(0)]
    if dtype is not dtypes.bool:
        outs += [a - b, -a if not dtypes.is_unsigned(dtype) else a]
    if dtypes.is_float(dtype):
        outs += [a / b, a.sqrt(), a.exp(), a.log(), a.sin(), a.trunc()]
    else:
        outs += [a // (b.abs() + 1) if dtype is not dtypes.bool else a & b]
    return outs


def cast_ops() -> list[list[Tensor]]:
    """Casts between every pair of claimed dtypes and bit casts between every pair of one size (groups of tensors
    scheduled together)."""
    groups = []
    for src_dt in CLAIMED:
        a = t((3, 5), src_dt)
        groups.append([a.cast(dst) for dst in CLAIMED if dst is not src_dt])
        if src_dt.itemsize in (2, 4, 8) and src_dt is not dtypes.bool:
            same = [d for d in CLAIMED if d.itemsize == src_dt.itemsize and d is not src_dt and d is not dtypes.bool]
            groups.append([a.bitcast(d) for d in same])
    return groups


def family_ops() -> list[Tensor]:
    """Op families: fused chains, reductions (grouped through shared memory), matmul, softmax, gathers, padding."""
    x, w, idx = t((64, 48)), t((48, 40)), Tensor(RNG.integers(0, 64, (10,)).astype(np.int32))
    big = t((2, 16384))
    return [
        (x * 2 + 1).relu().exp2().log2(),  # elementwise chain, fused
        x.sum(),
        x.mean(0),
        x.max(1),
        big.sum(1),  # few outputs, long reduction: grouped through shared memory and a barrier
        x @ w,
        x.softmax(-1),
        x[idx],  # a gather
        x.pad(((1, 2), (0, 3))),  # gated loads
        x.bitcast(dtypes.int32),
        x.cast(dtypes.float16).cast(dtypes.bfloat16).cast(dtypes.float32),
        x.cast(dtypes.int64).cast(dtypes.uint8),
        x.cumsum(1),
        x.argmax(1),
        (x > 0).where(x.tanh(), x.sigmoid()),
        x.pow(2.5),
        x.float().div(w[:, :1].T.expand(64, 48) + 4, rounding_mode="floor"),
    ]


@needs_nvrtc
@pytest.mark.parametrize("dtype", CLAIMED, ids=lambda d: d.name)
def test_every_claimed_dtype_compiles(dtype: DType, tmp_path: Path) -> None:
    srcs = kernels(*dtype_ops(dtype))
    assert srcs
    for src in srcs:
        accepted(src, tmp_path)


@needs_nvrtc
def test_casts_between_every_pair_compile(tmp_path: Path) -> None:
    srcs = [src for group in cast_ops() for src in kernels(*group)]
    for src in srcs:
        accepted(src, tmp_path)


@needs_nvrtc
def test_op_families_compile(tmp_path: Path) -> None:
    srcs = [src for o in family_ops() for src in kernels(o)]
    assert any("__shared__" in s and "__syncthreads();" in s for s in srcs)
    assert any("blockIdx.x" in s and "threadIdx.x" in s for s in srcs)
    for src in srcs:
        accepted(src, tmp_path)


@needs_nvrtc
def test_rendered_kernel_shape() -> None:
    (src,) = kernels(t((64, 33)).cast(dtypes.float16) * 2)
    assert src.startswith("#include <cuda_fp16.h>")
    assert re.search(r'extern "C" __global__ void __launch_bounds__\(\d+\) E_\w+\(half\* __restrict__ data0', src)
    (src,) = kernels(t((8,)).bitcast(dtypes.int32))
    assert "__float_as_int(" in src and "cuda_fp16" not in src


@needs_nvrtc
def test_launch_dimension_over_cuda_limit_moves_to_x(tmp_path: Path) -> None:
    from zeptograd.helpers import Context
    from zeptograd.runtime.ops_cuda import launch_dims

    x = Tensor.empty(3, 100_000).T.contiguous()  # unoptimized: 3 blocks on dimension 0, 100000 on dimension 1
    items, _ = create_schedule([x.uop], ["CPU"], device_facts)
    ast = items[-1].ast
    assert ast is not None
    with Context(NOOPT=1):
        program = get_program(ast, CUDARenderer())
    assert "gidx1 = (int)blockIdx.x" in program.src and "gidx0 = (int)blockIdx.y" in program.src
    assert launch_dims(program) == ((100_000, 3, 1), (1, 1, 1))
    accepted(program.src, tmp_path)


@needs_nvrtc
def test_compile_error_has_log_and_source() -> None:
    from zeptograd.runtime.ops_cuda import CUDACompileError

    with pytest.raises(CUDACompileError, match="(?s)undefined.*--- source ---"):
        compile_cuda('extern "C" __global__ void k(float* a) { a[0] = nope; }', "sm_90")


def test_missing_cuda_names_what_to_install() -> None:
    if Device.usable("CUDA"):
        pytest.skip("this host has a usable CUDA device")
    with pytest.raises(DeviceUnavailable, match="CUDA"):
        Tensor([1.0], device="CUDA")


# ---- on the GPU ----

needs_gpu = pytest.mark.skipif(not Device.usable("CUDA"), reason="no usable CUDA GPU here (driver, GPU and NVRTC)")


def cuda(a: np.ndarray) -> Tensor:
    return Tensor(a, device="CUDA")


@needs_gpu
def test_copies_round_trip() -> None:
    a = RNG.standard_normal((3, 5)).astype(np.float32)
    x = cuda(a)
    assert x.device == "CUDA"
    np.testing.assert_array_equal(x.numpy(), a)
    np.testing.assert_array_equal(x.to("CPU").numpy(), a)
    np.testing.assert_array_equal(Tensor(a).to("CUDA").to("CPU").to("CUDA").numpy(), a)
    np.testing.assert_array_equal((x + 0).to("CPU").numpy(), a)  # a kernel's output copied to the host


@needs_gpu
@pytest.mark.parametrize("dtype", CLAIMED, ids=lambda d: d.name)
def test_elementwise_every_dtype(dtype: DType) -> None:
    npdt = np.dtype(dtype.fmt) if dtype.fmt is not None else None
    assert npdt is not None
    if dtype is dtypes.bool:
        a, b = RNG.random(1000) < 0.5, RNG.random(1000) < 0.5
        np.testing.assert_array_equal((cuda(a) & cuda(b)).numpy(), a & b)
        np.testing.assert_array_equal((cuda(a) != cuda(b)).numpy(), a != b)
        return
    lo, hi = (0, 50) if dtypes.is_unsigned(dtype) else (-50, 50)
    a = RNG.uniform(lo, hi, 1000).astype(npdt)
    b = RNG.uniform(1, hi, 1000).astype(npdt)
    rtol = 1e-3 if dtype is dtypes.float16 else 1e-7
    np.testing.assert_allclose((cuda(a) + cuda(b)).numpy(), a + b, rtol=rtol)
    np.testing.assert_allclose((cuda(a) * cuda(b)).numpy(), a * b, rtol=rtol)
    np.testing.assert_array_equal(cuda(a).maximum(cuda(b)).numpy(), np.maximum(a, b))
    np.testing.assert_array_equal((cuda(a) < cuda(b)).numpy(), a < b)
    np.testing.assert_array_equal((cuda(a) < cuda(b)).where(cuda(a), cuda(b)).numpy(), np.where(a < b, a, b))
    if dtypes.is_float(dtype):
        np.testing.assert_allclose((cuda(a) / cuda(b)).numpy(), a / b, rtol=1e-3 if dtype is dtypes.float16 else 1e-7)
    else:
        np.testing.assert_array_equal((cuda(a) // cuda(b)).numpy(), a // b)
        np.testing.assert_array_equal((cuda(a) % cuda(b)).numpy(), a % b)


@needs_gpu
def test_casts_and_bitcast() -> None:
    a = RNG.uniform(-300, 300, 999).astype(np.float32)
    np.testing.assert_array_equal(cuda(a).cast(dtypes.int32).numpy(), a.astype(np.int32))
    np.testing.assert_array_equal(cuda(a).cast(dtypes.float16).numpy(), a.astype(np.float16))
    np.testing.assert_array_equal(cuda(a).cast(dtypes.float64).numpy(), a.astype(np.float64))
    np.testing.assert_array_equal(cuda(a).cast(dtypes.bool).numpy(), a.astype(np.bool_))
    np.testing.assert_array_equal(cuda(a).bitcast(dtypes.int32).numpy(), a.view(np.int32))
    np.testing.assert_array_equal(cuda(a).cast(dtypes.int64).numpy(), a.astype(np.int64))


@needs_gpu
def test_transcendentals() -> None:
    a = RNG.uniform(-20, 20, 4099).astype(np.float32)
    p = np.abs(a) + 0.1
    np.testing.assert_allclose(cuda(a).exp().numpy(), np.exp(a), rtol=2e-6)
    np.testing.assert_allclose(cuda(p).log().numpy(), np.log(p), rtol=2e-6, atol=1e-7)
    np.testing.assert_allclose(cuda(a).sin().numpy(), np.sin(a), atol=2e-6)
    np.testing.assert_allclose(cuda(p).sqrt().numpy(), np.sqrt(p), rtol=1e-7)
    np.testing.assert_allclose(cuda(a).tanh().numpy(), np.tanh(a), atol=2e-6)


@needs_gpu
@pytest.mark.parametrize("shape", [(1,), (1000,), (3, 4099), (257, 3), (2, 70000), (4, 5, 6, 7)])
def test_reductions(shape: tuple[int, ...]) -> None:
    a = RNG.standard_normal(shape).astype(np.float32)
    np.testing.assert_allclose(cuda(a).sum().numpy(), a.sum(dtype=np.float64), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(cuda(a).sum(-1).numpy(), a.sum(-1, dtype=np.float64), rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(cuda(a).max(0).numpy(), a.max(0))
    np.testing.assert_array_equal(cuda(a).argmax(-1).numpy(), a.argmax(-1))


@needs_gpu
@pytest.mark.parametrize("n", [1, 17, 64, 257])
def test_matmul_and_softmax_against_torch(n: int) -> None:
    torch = pytest.importorskip("torch")
    a = RNG.standard_normal((n, 96)).astype(np.float32)
    b = RNG.standard_normal((96, 33)).astype(np.float32)
    want = (torch.from_numpy(a).double() @ torch.from_numpy(b).double()).numpy()
    np.testing.assert_allclose((cuda(a) @ cuda(b)).numpy(), want, rtol=1e-4, atol=1e-4)
    sm = torch.from_numpy(a).softmax(-1).numpy()
    np.testing.assert_allclose(cuda(a).softmax(-1).numpy(), sm, rtol=1e-5, atol=1e-7)
    h = (cuda(a).half() @ cuda(b).half()).float().numpy()
    np.testing.assert_allclose(h, want, rtol=2e-2, atol=2e-1)


@needs_gpu
def test_gather_pad_assign_and_training_step() -> None:
    a = RNG.standard_normal((50, 8)).astype(np.float32)
    idx = RNG.integers(0, 50, (20,)).astype(np.int32)
    np.testing.assert_array_equal(cuda(a)[cuda(idx)].numpy(), a[idx])
    np.testing.assert_array_equal(cuda(a).pad(((1, 2), (3, 0))).numpy(), np.pad(a, ((1, 2), (3, 0))))
    x = cuda(a)
    x.assign(x * 2 + 1)
    np.testing.assert_allclose(x.numpy(), a * 2 + 1)
    x[3:5] = 0.0
    want = a * 2 + 1
    want[3:5] = 0.0
    np.testing.assert_allclose(x.numpy(), want)
    # one SGD step of a linear layer, against numpy's gradient
    w = Tensor(np.ones((8, 1), np.float32), device="CUDA", requires_grad=True)
    loss = (cuda(a) @ w).square().mean()
    loss.backward()
    assert w.grad is not None
    grad = 2 * a.T @ (a @ np.ones((8, 1), np.float32)) / 50
    np.testing.assert_allclose(w.grad.numpy(), grad, rtol=1e-4)


@needs_gpu
def test_large_launch() -> None:
    a = RNG.standard_normal(1 << 24).astype(np.float32)
    np.testing.assert_allclose((cuda(a) * 3 + 1).numpy(), a * 3 + 1, rtol=1e-6, atol=1e-6)  # an FMA or not
    b = RNG.standard_normal((300, 70001)).astype(np.float32)  # a launch dimension that is not a power of two
    np.testing.assert_allclose((cuda(b) + 1).sum(0).numpy(), (b + 1).sum(0, dtype=np.float64), rtol=1e-4, atol=1e-3)


# ---- without a GPU: the CUDA C run on the CPU (test/backends/cuda_emulator.py) ----

needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="the CUDA emulator compiles with g++")


@pytest.fixture
def emulated() -> Iterator[Any]:
    """ "CUDA" as the emulator: the CUDA renderer's kernels compiled by g++ and launched block by block on the CPU,
    with buffers behind an allocator (the device-memory path of Buffer runs too)."""
    if Device.usable("CUDA"):
        pytest.skip("a real CUDA device is here: the GPU tests above cover this")
    from cuda_emulator import EmulatedCUDA

    from zeptograd.engine import realize

    dev = EmulatedCUDA()
    Device._opened["CUDA"], Device._usable["CUDA"] = dev, True
    try:
        yield dev
    finally:
        gc.collect()
        del Device._opened["CUDA"]
        Device._usable.pop("CUDA")
        for key in [k for k in realize._programs if k[0] == "CUDA"]:
            del realize._programs[key]


@needs_gxx
def test_device_memory_buffers(emulated: Any) -> None:
    a = RNG.standard_normal((6, 5)).astype(np.float32)
    x = Tensor(a, device="CUDA")
    np.testing.assert_array_equal(x.numpy(), a)
    assert emulated.allocator.live, "the buffer's memory came from the device's allocator"
    np.testing.assert_array_equal(x.to("CPU").numpy(), a)
    np.testing.assert_array_equal(Tensor(a).to("CUDA").numpy(), a)
    np.testing.assert_allclose(
        ((x * 2 + 1).exp().sum(1) + x.max(1)).numpy(), np.exp(a * 2 + 1).sum(1) + a.max(1), rtol=1e-5
    )
    np.testing.assert_allclose((x @ x.T).numpy(), a @ a.T, rtol=1e-5, atol=1e-5)
    y = (x + 1).contiguous()
    np.testing.assert_array_equal(y.to("CUDA").numpy(), a + 1)  # a copy between two buffers of the device
    x.assign(x * 3)
    x[1:3] = 0.0
    want = a * 3
    want[1:3] = 0.0
    np.testing.assert_array_equal(x.numpy(), want)
    r = Tensor.rand(1000, device="CUDA").numpy()
    assert r.shape == (1000,) and 0 <= r.min() and r.max() < 1
    w = Tensor(np.ones((5, 1), np.float32), device="CUDA", requires_grad=True)
    ((Tensor(a, device="CUDA") @ w).square().mean()).backward()
    assert w.grad is not None
    np.testing.assert_allclose(w.grad.numpy(), 2 * a.T @ (a @ np.ones((5, 1), np.float32)) / 6, rtol=1e-5)
    with pytest.raises(RuntimeError, match="CUDA memory"):
        x._buffer().array()  # no host view of device memory: .numpy() copies


@needs_gxx
def test_emulated_kernels_match_numpy(emulated: Any) -> None:
    """The CUDA C of a representative op set, run by the emulator, against numpy: shared memory and barriers (a
    grouped reduction), half, int8 and bool buffers, casts, bit casts, gathers, a matmul and a softmax."""
    a = RNG.standard_normal((7, 300)).astype(np.float32)
    x = cuda(a)
    long = RNG.standard_normal((2, 16384)).astype(np.float32)  # few outputs, one long reduction: GROUPTOP
    np.testing.assert_allclose(cuda(long).sum(1).numpy(), long.sum(1, dtype=np.float64), rtol=1e-5, atol=1e-4)
    assert any("__syncthreads" in p.src for p, _ in _cuda_programs()), "the long reduction was grouped"
    np.testing.assert_allclose(x.softmax(-1).numpy(), np.exp(a) / np.exp(a).sum(-1, keepdims=True), rtol=1e-5)
    np.testing.assert_allclose((x @ x.T).numpy(), a @ a.T, rtol=1e-4, atol=1e-4)
    h = a.astype(np.float16)
    np.testing.assert_array_equal((cuda(h) * cuda(h)).numpy(), h * h)
    np.testing.assert_array_equal(x.cast(dtypes.float16).numpy(), h)
    i8 = RNG.integers(-100, 100, 50).astype(np.int8)
    np.testing.assert_array_equal((cuda(i8) + cuda(i8)).numpy(), i8 + i8)
    np.testing.assert_array_equal((cuda(i8) // 7).numpy(), i8 // 7)
    np.testing.assert_array_equal((x > 0).numpy(), a > 0)
    np.testing.assert_array_equal(x.bitcast(dtypes.int32).numpy(), a.view(np.int32))
    idx = RNG.integers(0, 7, 11).astype(np.int32)
    np.testing.assert_array_equal(x[cuda(idx)].numpy(), a[idx])
    np.testing.assert_allclose(x.exp2().numpy(), np.exp2(a), rtol=2e-6)
    np.testing.assert_array_equal(x.max(0).numpy(), a.max(0))


def _cuda_programs() -> list[Any]:
    from zeptograd.engine import realize

    return [v for k, v in realize._programs.items() if k[0] == "CUDA"]


@pytest.mark.skipif(nvrtc_problem() is not None, reason="NVRTC is not installed (pip install -e '.[cuda]')")
def test_an_nvrtc_without_the_compile_time_options_still_compiles(monkeypatch: pytest.MonkeyPatch) -> None:
    # FAST_OPTIONS are for compile time only: an NVRTC that rejects one compiles without them
    monkeypatch.setattr(ops_cuda, "FAST_OPTIONS", ("--no-such-nvrtc-option",))
    src = 'extern "C" __global__ void k(float* a) { a[threadIdx.x] *= 3.0f; }'
    assert compile_cuda(src, "sm_90").cubin[:4] == b"\x7fELF"


def test_a_tiered_kernel_launches_its_quick_build_until_the_optimized_one_is_ready() -> None:
    gate = threading.Event()
    optimized = ops_cuda._background.submit(lambda: b"optimized" if gate.wait(10) else b"timed out")
    loaded: list[bytes] = []

    def load(cubin: bytes) -> str:
        loaded.append(cubin)
        return f"function of {cubin.decode()}"

    kernel = ops_cuda.TieredKernel("quick function", optimized, load)
    assert kernel.current() == "quick function" and not loaded  # the optimized build is still compiling
    gate.set()
    ops_cuda.wait_for_compiles()
    assert kernel.current() == "function of optimized"
    assert kernel.current() == "function of optimized" and loaded == [b"optimized"]  # loaded once


def test_an_optimized_build_that_fails_raises_at_the_next_launch() -> None:
    def rejected() -> bytes:
        raise ops_cuda.CUDACompileError("NVRTC rejected k.cu")

    kernel = ops_cuda.TieredKernel("quick function", ops_cuda._background.submit(rejected), lambda cubin: cubin)
    ops_cuda.wait_for_compiles()
    with pytest.raises(ops_cuda.CUDACompileError, match="rejected k.cu"):
        kernel.current()


@needs_nvrtc
def test_the_quick_build_is_a_compile_of_its_own_and_the_optimized_one_goes_to_the_disk_cache(tmp_path: Path) -> None:
    src = f'extern "C" __global__ void k(float* a) {{ a[threadIdx.x] = expf(a[threadIdx.x]) * {os.getpid()}.0f; }}'
    quick, optimized = compile_cuda(src, "sm_90", quick=True), compile_cuda(src, "sm_90")
    assert quick is not optimized and quick.cubin[:4] == optimized.cubin[:4] == b"\x7fELF"
    assert ops_cuda._compile_to_cache(src, "sm_90", "k", tmp_path / "k.cubin") == optimized.cubin
    assert (tmp_path / "k.cubin").read_bytes() == optimized.cubin


@needs_gpu
def test_a_new_kernel_computes_the_same_in_its_quick_and_its_optimized_build() -> None:
    a = RNG.standard_normal((300, 700)).astype(np.float32)
    k = 1.0 + int.from_bytes(os.urandom(3), "little") / 2**24  # a fresh constant: a kernel no cache has seen
    x = cuda(a)
    # the background worker (one thread) is held until the quick build has run: the optimized build cannot finish
    # first (under load it did, and the first launch then ran the optimized one)
    gate = threading.Event()
    ops_cuda._background.submit(gate.wait)
    try:
        quick = ((x * k + 1).exp() * k).sum(1).numpy()
        program, _ = _cuda_programs()[-1]  # the kernel just compiled
        assert Device["CUDA"].function(program.src, program.name).pending is not None  # still the quick build
    finally:
        gate.set()
    ops_cuda.wait_for_compiles()
    optimized = ((x * k + 1).exp() * k).sum(1).numpy()
    assert Device["CUDA"].function(program.src, program.name).pending is None
    np.testing.assert_array_equal(quick, optimized)
    np.testing.assert_allclose(optimized, (np.exp(a.astype(np.float64) * k + 1) * k).sum(1), rtol=1e-5)


@needs_gxx
@pytest.mark.parametrize("dtype, lanes", [(np.float16, 2), (np.uint8, 4), (np.int16, 2), (np.float32, 1)])
def test_threads_of_narrow_elementwise_kernels_take_four_bytes(emulated: Any, dtype: Any, lanes: int) -> None:
    # the heuristic's UPCAST for 1- and 2-byte values (each thread moves 4 bytes, as the GPU's loads like):
    # the plan, and what the kernel computes (odd sizes too: an UPCAST that does not divide is not taken)
    for n in (4096, 4094, 4093):
        a = (RNG.standard_normal(n) * 20).astype(dtype)
        b = (RNG.standard_normal(n) * 20).astype(dtype)
        np.testing.assert_array_equal((cuda(a) + cuda(b)).numpy(), a + b)
        program, _ = _cuda_programs()[-1]
        upcast = [o.amount for o in program.opts if o.op.name == "UPCAST"]
        assert upcast == ([lanes] if lanes > 1 and n % lanes == 0 else []), (n, program.opts)


def test_a_tensor_core_kernels_k_loop_is_unrolled_by_nvcc() -> None:
    a, b = Tensor.empty(256, 256, dtype=dtypes.float16), Tensor.empty(256, 256, dtype=dtypes.float16)
    items, _ = create_schedule([(a @ b).cast(dtypes.float32).uop], ["CPU"], device_facts)
    programs = [get_program(it.ast, CUDARenderer()) for it in items if it.ast is not None]
    (tc,) = [p for p in programs if "mma.sync" in p.src]
    assert re.search(r"#pragma unroll 4\n\s*for \(int ridx", tc.src), tc.src
    plain = kernels(Tensor.empty(64, 64).sum(1))[0]
    assert "#pragma" not in plain and "for (int ridx" in plain  # only tensor-core kernels
