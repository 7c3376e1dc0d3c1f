"""The PTX renderer and the PTX device.

Without a GPU (CI): the kernels of test_cuda.py's representative op set (every claimed dtype, casts and bit
casts between every pair, the op families: reductions through shared memory, matmul, softmax, gathers, padding)
are rendered as PTX and assembled by a standalone ptxas for sm_80 and sm_90. A test fails when ptxas rejects
what zeptograd generated. They skip when no ptxas is installed (`pip install -e ".[test]"` brings one).

With a GPU (`Device.usable("PTX")`): the same kernels run through the driver's PTX JIT and are compared with
numpy, and the whole op suite runs with `DEVICE=PTX pytest test/ops/test_tensor_*.py`.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from zeptograd import Device, Tensor, dtypes
from zeptograd.codegen import get_program
from zeptograd.dtype import DType
from zeptograd.renderer.ptx import PTXRenderer
from zeptograd.schedule.kernelize import create_schedule

sys.path.insert(0, str(Path(__file__).parent))
from test_cuda import CLAIMED, PTXAS, cast_ops, dtype_ops, family_ops

ARCHS = ("sm_80", "sm_90")
needs_ptxas = pytest.mark.skipif(PTXAS is None, reason="no standalone ptxas (pip install nvidia-cuda-nvcc)")


def kernels(*outs: Tensor, arch: str = "sm_80") -> list[str]:
    """The PTX of every kernel that computes `outs` (scheduled on the CPU: a kernel AST names no device)."""
    items, _ = create_schedule([o.uop for o in outs], ["CPU"])
    return [get_program(it.ast, PTXRenderer(arch)).src for it in items if it.ast is not None]


def assembled(srcs: list[str], tmp_path: Path) -> None:
    """ptxas assembles every PTX source for sm_80 and sm_90 (each rendered for its own target)."""
    assert PTXAS is not None
    for i, src in enumerate(srcs):
        for arch in ARCHS:
            ptx = tmp_path / f"k{i}_{arch}.ptx"
            ptx.write_text(src.replace(".target sm_80", f".target {arch}"))
            run = subprocess.run(
                [PTXAS[0], f"-arch={arch}", str(ptx), "-o", str(tmp_path / "k.cubin")], capture_output=True, text=True
            )
            assert run.returncode == 0, f"ptxas rejected the PTX for {arch}:\n{run.stderr}\n{src}"


@needs_ptxas
@pytest.mark.parametrize("dtype", CLAIMED, ids=lambda d: d.name)
def test_every_claimed_dtype_assembles(dtype: DType, tmp_path: Path) -> None:
    srcs = kernels(*dtype_ops(dtype))
    assert srcs
    assembled(srcs, tmp_path)


@needs_ptxas
def test_casts_between_every_pair_assemble(tmp_path: Path) -> None:
    assembled([src for group in cast_ops() for src in kernels(*group)], tmp_path)


@needs_ptxas
def test_op_families_assemble(tmp_path: Path) -> None:
    srcs = [src for o in family_ops() for src in kernels(o)]
    assert any(".shared" in s and "bar.sync 0;" in s for s in srcs)
    assert any("%ctaid.x" in s and "%tid.x" in s for s in srcs)
    assert any("fma.rn.f32" in s for s in srcs)  # the matmul's multiply-add
    assert any("@%p" in s and "ld.global" in s for s in srcs)  # a gated load
    assembled(srcs, tmp_path)


def test_rendered_kernel_shape() -> None:
    x = Tensor(np.arange(12, dtype=np.float32).reshape(3, 4)).realize()
    (src,) = kernels(x / (x + 1))
    assert src.startswith(".version 8.0\n.target sm_80\n.address_size 64")
    assert ".visible .entry E_" in src and "ld.param.u64" in src and "cvta.to.global.u64" in src
    assert "div.rn.f32" in src and "add.rn.f32" in src and "st.global.b32" in src
    (src,) = kernels(x.cast(dtypes.int32))
    assert "cvt.rzi.s32.f32" in src  # float -> int truncates, as in C
    (src,) = kernels(x > 3)
    assert "selp.u16" in src and "st.global.u8" in src  # a bool is a predicate in registers, a byte in memory


def test_renderer_matches_cuda_plans() -> None:
    from zeptograd.renderer.cuda import CUDARenderer

    ptx, cuda = PTXRenderer(), CUDARenderer()
    assert (ptx.has_local, ptx.max_local_size, ptx.local_size) == (cuda.has_local, cuda.max_local_size, cuda.local_size)
    assert ptx.supported_dtypes() == cuda.supported_dtypes()


def test_missing_gpu_names_the_driver() -> None:
    from zeptograd.runtime.device import DeviceUnavailable

    if Device.usable("PTX"):
        pytest.skip("this host has a usable GPU")
    with pytest.raises(DeviceUnavailable, match="PTX device needs an NVIDIA GPU"):
        Tensor([1.0], device="PTX")


def test_bytes_stay_extended_in_16_bit_registers() -> None:
    a = Tensor(np.arange(-4, 4, dtype=np.int8)).realize()
    (src,) = kernels(a * 100)
    assert "mul.lo.s16" in src and "cvt.s8.s16" in src  # the product is brought back into its byte
    (src,) = kernels(a.cast(dtypes.float32).cast(dtypes.uint8))
    assert "cvt.rzi.s32.f32" in src and "cvt.u8.s32" in src  # through int32, as the CPU devices do


# ---- on the GPU ----

needs_gpu = pytest.mark.skipif(not Device.usable("PTX"), reason="no usable CUDA GPU here (driver and GPU)")


def gpu(a: np.ndarray) -> Tensor:
    return Tensor(a, device="PTX")


RNG = np.random.default_rng(15)


@needs_gpu
@pytest.mark.parametrize("dtype", CLAIMED, ids=lambda d: d.name)
def test_elementwise_every_dtype(dtype: DType) -> None:
    npdt = np.dtype(dtype.fmt) if dtype.fmt is not None else None
    assert npdt is not None
    if dtype is dtypes.bool:
        a, b = RNG.random(1000) < 0.5, RNG.random(1000) < 0.5
        np.testing.assert_array_equal((gpu(a) & gpu(b)).numpy(), a & b)
        np.testing.assert_array_equal((gpu(a) != gpu(b)).numpy(), a != b)
        np.testing.assert_array_equal(gpu(a).where(gpu(b), gpu(a)).numpy(), np.where(a, b, a))
        return
    lo, hi = (0, 50) if dtypes.is_unsigned(dtype) else (-50, 50)
    a = RNG.uniform(lo, hi, 1000).astype(npdt)
    b = RNG.uniform(1, hi, 1000).astype(npdt)
    rtol = 1e-3 if dtype is dtypes.float16 else 1e-7
    with np.errstate(over="ignore"):
        np.testing.assert_allclose((gpu(a) + gpu(b)).numpy(), a + b, rtol=rtol)
        np.testing.assert_allclose((gpu(a) * gpu(b)).numpy(), a * b, rtol=rtol)
    np.testing.assert_array_equal(gpu(a).maximum(gpu(b)).numpy(), np.maximum(a, b))
    np.testing.assert_array_equal((gpu(a) < gpu(b)).numpy(), a < b)
    np.testing.assert_array_equal((gpu(a) < gpu(b)).where(gpu(a), gpu(b)).numpy(), np.where(a < b, a, b))
    if dtypes.is_float(dtype):
        np.testing.assert_allclose((gpu(a) / gpu(b)).numpy(), a / b, rtol=rtol)
    else:
        np.testing.assert_array_equal((gpu(a) // gpu(b)).numpy(), a // b)
        np.testing.assert_array_equal((gpu(a) % gpu(b)).numpy(), a % b)


@needs_gpu
def test_casts_reductions_and_matmul() -> None:
    a = RNG.uniform(-300, 300, 999).astype(np.float32)
    np.testing.assert_array_equal(gpu(a).cast(dtypes.int32).numpy(), a.astype(np.int32))
    np.testing.assert_array_equal(gpu(a).cast(dtypes.float16).numpy(), a.astype(np.float16))
    np.testing.assert_array_equal(gpu(a).cast(dtypes.bool).numpy(), a.astype(np.bool_))
    np.testing.assert_array_equal(gpu(a).bitcast(dtypes.int32).numpy(), a.view(np.int32))
    np.testing.assert_array_equal(gpu(a).cast(dtypes.int64).numpy(), a.astype(np.int64))
    x = RNG.standard_normal((64, 48)).astype(np.float32)
    w = RNG.standard_normal((48, 40)).astype(np.float32)
    big = RNG.standard_normal((2, 16384)).astype(np.float32)
    np.testing.assert_allclose((gpu(x) @ gpu(w)).numpy(), x @ w, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(gpu(big).sum(1).numpy(), big.sum(1), rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(gpu(x).max(1).numpy(), x.max(1))
    np.testing.assert_allclose(gpu(x).exp().numpy(), np.exp(x), rtol=2e-6)
    e = np.exp(x - x.max(-1, keepdims=True))
    np.testing.assert_allclose(gpu(x).softmax(-1).numpy(), e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(gpu(x).pad(((1, 2), (0, 3))).numpy(), np.pad(x, ((1, 2), (0, 3))))
    np.testing.assert_array_equal(gpu(x).argmax(1).numpy(), x.argmax(1))


@needs_gpu
def test_same_results_as_the_cuda_c_device() -> None:
    if not Device.usable("CUDA"):
        pytest.skip("NVRTC is not installed: no CUDA C device to compare with")
    a = RNG.standard_normal(4096).astype(np.float32)
    b = RNG.standard_normal(4096).astype(np.float32)

    def program(dev: str) -> list[np.ndarray]:
        x, y = Tensor(a, device=dev), Tensor(b, device=dev)
        return [t.numpy() for t in (x * y + 0.1, x / y, y.abs().sqrt(), (x * 7).cast(dtypes.int32) // 4)]

    for got, want in zip(program("PTX"), program("CUDA"), strict=True):
        np.testing.assert_array_equal(got, want)
