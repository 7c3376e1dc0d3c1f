"""The HIP renderer: the lowering contract of each UOp it lists (golden tests on the rendered text), every kernel of
test_cuda.py's op set compiled by clang's AMDGPU backend for gfx1100 and gfx90a (skipped without such a clang:
`pip install -e ".[hip]"`), and RDNA3 tensor-core kernels checked against numpy on the PYTHON device's
interpreter (no AMD GPU is at hand to run them).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

from zeptograd import Device, Tensor, dtypes
from zeptograd.codegen import get_program
from zeptograd.codegen.opt import Opt, OptOps
from zeptograd.dtype import DType
from zeptograd.renderer.hip import HIPRenderer
from zeptograd.runtime.device import DeviceUnavailable
from zeptograd.runtime.ops_hip import HIPCompileError, compile_hip, hip_problem
from zeptograd.schedule.kernelize import create_schedule

sys.path.insert(0, str(Path(__file__).parent))
from test_cuda import CLAIMED, cast_ops, dtype_ops, family_ops
from test_wmma import bf16, emulated, half, host

needs_clang = pytest.mark.skipif(hip_problem() is not None, reason="no clang with the AMDGPU target")
ARCHS = ("gfx1100", "gfx90a")


def sources(*outs: Tensor, arch: str = "gfx1100") -> list[str]:
    """The HIP C of every kernel that computes `outs` (scheduled on the CPU: a kernel AST names no device)."""
    items, _ = create_schedule([o.uop for o in outs], ["CPU"])
    return [get_program(it.ast, HIPRenderer(arch)).src for it in items if it.ast is not None]


def one(out: Tensor) -> str:
    (src,) = sources(out)[-1:]
    return src


def cpu(x: np.ndarray) -> Tensor:
    return Tensor(x, device="CPU").realize()


# ---- the contract's lowerings, one UOp at a time


def test_kernel_head_and_parameters() -> None:
    src = one(cpu(np.ones(64, np.float32)) * 2)
    # DEFINE_GLOBAL: a parameter per buffer, the written one without const; the launch bound from the lidx sizes
    head = 'extern "C" __attribute__((global)) void __attribute__((amdgpu_flat_work_group_size(1, 64))) E_64('
    assert head + "float* __restrict__ data0, const float* __restrict__ data1)" in src
    assert "#include" not in src  # no ROCm headers: every device function is declared in the prelude


def test_special_lowerings() -> None:
    src = one(cpu(np.ones((64, 64), np.float32)) + 1)
    assert "const int gidx0 = (int)__ockl_get_group_id(0);" in src
    assert "const int lidx0 = (int)__ockl_get_local_id(0);" in src


def test_index_load_store_and_registers() -> None:
    src = one(cpu(np.ones((4, 64), np.float32)).sum(1))
    assert "float acc0[1];" in src  # DEFINE_REG: a register array
    assert re.search(r"for \(int ridx\d+ = 0; ridx\d+ < \d+; ridx\d+\+\+\) \{", src)  # RANGE
    assert re.search(r"\(\*\(data1\+alu\d+\)\)", src)  # LOAD of INDEX: (*(base+idx))
    assert re.search(r"\*\(data0\+\w+\) = val\d+;", src)  # STORE
    assert "AFTER" not in src and "GROUP" not in src  # AFTER and GROUP render as nothing


def test_gated_load_and_store() -> None:
    x = cpu(np.ones((6, 6), np.float32))
    src = one(x.pad(((1, 1), (1, 1))) + 1)
    assert re.search(r"\(alu\d+ \? \(\*\(data1\+alu\d+\)\) : 0\.0f\)", src)  # gated LOAD: (gate ? *ptr : fallback)
    grouped = one(cpu(np.ones(4096, np.float32)).sum())  # a GROUP plan: work-item 0 stores, inside an IF
    assert re.search(r"if \(alu\d+\) \{\n\s+\*\(data0\+0\) = val\d+;\n\s+\}", grouped)  # IF / STORE / ENDIF
    assert "__attribute__((shared)) float temp0[" in grouped  # DEFINE_LOCAL
    barrier = '__builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup"); __builtin_amdgcn_s_barrier();'
    assert barrier in grouped


def test_consts_casts_and_bitcasts() -> None:
    x = cpu(np.ones(64, np.float32))
    src = one((x.bitcast(dtypes.int32) >> 3).cast(dtypes.float32).maximum(float("inf")) + float("nan"))
    assert "#define INFINITY __builtin_inff()" in src and "#define NAN" in src
    assert "__builtin_bit_cast(int, (float)(val0))" in src  # BITCAST
    assert re.search(r"\(float\)\(alu\d+\)", src)  # CAST
    assert ">> 3" in src  # SHR
    assert "INFINITY" in src.split("{", 1)[1] and "NAN" in src.split("{", 1)[1]


def test_alu_compares_where_and_bitwise() -> None:
    a, b = cpu(np.ones(64, np.int32)), cpu(np.ones(64, np.int32))
    src = one(((a < b).where(a ^ b, a & b) | (a << 2)) - a * b)
    for text in ("<", "^", "&", "|", "<< 2", "*", "-", "?"):
        assert text in src, text


@pytest.mark.parametrize("dt", [dtypes.float16, dtypes.float32, dtypes.float64], ids=lambda d: d.name)
def test_math_is_ocml(dt: DType) -> None:
    width = {dtypes.float16: "f16", dtypes.float32: "f32", dtypes.float64: "f64"}[dt]
    x = cpu(np.ones(64, np.float32)).cast(dt)
    src = one(x.exp2() + x.log2() + x.sin() + x.cos() + x.tan() + x.sqrt())
    for fn in ("exp2", "log2", "sin", "cos", "tan", "sqrt"):
        # half's sin, cos and tan are computed in float (the Tensor's rule, as on every device)
        w = "f32" if dt is dtypes.float16 and fn in ("sin", "cos", "tan") else width
        assert f"__ocml_{fn}_{w}(" in src, fn
        assert re.search(rf'extern "C" __attribute__\(\(device, const\)\) \w+ __ocml_{fn}_{w}\(', src), fn


def test_wmma_vectorize_and_gep() -> None:
    src = one(host(half(32, 32)).matmul(host(half(32, 16)), dtype=dtypes.float32))
    assert "__WMMA_16_16_16_half_float(" in src  # WMMA: the helper around RDNA3's builtin
    assert "__builtin_amdgcn_wmma_f32_16x16x16_f16_w32(a, b, c)" in src
    assert "make_half16(" in src  # VECTORIZE: a make_<type> constructor
    assert re.search(r"val\d+\[7\]", src)  # GEP of a float8: [lane]
    assert "typedef float float8 __attribute__((ext_vector_type(8)));" in src


def test_hip_device_says_it_compiles_only() -> None:
    assert not Device.usable("HIP")
    with pytest.raises(DeviceUnavailable, match="renders and compiles AMD GPU kernels only"):
        Tensor([1.0], device="HIP")


# ---- clang's AMDGPU backend compiles every kernel


@needs_clang
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dtype", CLAIMED, ids=lambda d: d.name)
def test_every_claimed_dtype_compiles(arch: str, dtype: DType) -> None:
    for src in sources(*dtype_ops(dtype), arch=arch):
        assert compile_hip(src, arch)[:4] == b"\x7fELF"


@needs_clang
@pytest.mark.parametrize("arch", ARCHS)
def test_casts_and_op_families_compile(arch: str) -> None:
    outs = [t for group in cast_ops() for t in group] + family_ops()
    for src in sources(*outs, arch=arch):
        compile_hip(src, arch)


@needs_clang
def test_tensor_core_kernels_compile_for_rdna3() -> None:
    a, b = host(half(64, 64)), host(half(64, 32))
    for out in (a.matmul(b, dtype=dtypes.float32), a @ b, (a.matmul(b, dtype=dtypes.float32) + 1).relu()):
        src = one(out)
        assert "__WMMA_16_16_16_half_float(" in src
        assert compile_hip(src, "gfx1100")[:4] == b"\x7fELF"
    assert "WMMA" not in sources(a.matmul(b, dtype=dtypes.float32), arch="gfx90a")[-1]  # no MFMA rendering yet


@needs_clang
def test_bfloat16_tensor_core_kernels_compile_for_rdna3() -> None:
    (x, _), (y, _) = bf16(64, 64), bf16(64, 32)
    a, b = Tensor(x, dtype="bfloat16", device="CPU"), Tensor(y, dtype="bfloat16", device="CPU")
    for out in (a.matmul(b, dtype=dtypes.float32), a @ b, (a.matmul(b, dtype=dtypes.float32) + 1).relu()):
        src = one(out)
        # the operands are bfloat16 bits (ushort16), bit-cast to the shorts RDNA3's bf16 builtin takes
        assert "__WMMA_16_16_16_bf16_float(" in src and "__builtin_amdgcn_wmma_f32_16x16x16_bf16_w32(" in src
        assert "__WMMA_16_16_16_half_float" not in src
        assert compile_hip(src, "gfx1100")[:4] == b"\x7fELF"  # clang checks the builtin's operand types


@needs_clang
def test_compile_error_has_log_and_source() -> None:
    with pytest.raises(HIPCompileError, match="clang rejected the HIP kernel for gfx1100"):
        compile_hip('extern "C" __attribute__((global)) void k(float* a) { a[0] = undefined_name; }')


# ---- RDNA3 tensor cores, run by the PYTHON device's interpreter


@pytest.mark.parametrize(
    "plan",
    [[Opt(OptOps.TC, 0, 0)], [Opt(OptOps.TC, 1, 0)], [Opt(OptOps.TC, 0, 0), Opt(OptOps.UPCAST, 1, 2)], None],
    ids=["TC", "TC-other-A", "TC-UPCAST", "heuristic"],
)
def test_rdna3_tc_plans_match_numpy(plan: list[Opt] | None) -> None:
    a, b = half(32, 48), half(48, 32)
    got, opts = emulated(host(a).matmul(host(b), dtype=dtypes.float32), plan, HIPRenderer())
    assert opts[0].op is OptOps.TC
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize(
    "plan",
    [[Opt(OptOps.TC, 0, 1)], [Opt(OptOps.TC, 1, 1)], [Opt(OptOps.TC, 0, 1), Opt(OptOps.UPCAST, 1, 2)], None],
    ids=["TC", "TC-other-A", "TC-UPCAST", "heuristic"],
)
def test_rdna3_bfloat16_tc_plans_match_numpy(plan: list[Opt] | None) -> None:
    # RDNA3's bf16 WMMA (the second HIP tensor core) on bfloat16 bits, against the float64 product of the rounded
    # values: exact products summed in float32, as the hardware computes them
    (a, a64), (b, b64) = bf16(32, 48), bf16(48, 32)
    x, y = Tensor(a, dtype="bfloat16", device="CPU"), Tensor(b, dtype="bfloat16", device="CPU")
    got, opts = emulated(x.matmul(y, dtype=dtypes.float32), plan, HIPRenderer())
    assert opts[0] == Opt(OptOps.TC, opts[0].axis, 1), opts
    np.testing.assert_allclose(got, a64 @ b64, rtol=1e-5, atol=1e-5)
