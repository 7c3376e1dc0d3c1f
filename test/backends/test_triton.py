"""The TRITON device.

Without a GPU (CI): the kernels of test_cuda.py's op set (every dtype the renderer claims, every cast and bit cast,
the op families) are rendered as Triton programs and compiled by Triton for sm_80 and sm_90 (it needs no GPU for
that); and what they compute is checked against numpy by running them in Triton's own interpreter
(`TRITON_INTERPRET=1`: the same programs, executed with numpy on the CPU). The tests skip without Triton
(`pip install -e ".[triton]"`).

With a GPU (`Device.usable("TRITON")`): the op families run on it against numpy. The whole op suite runs with
`DEVICE=TRITON pytest test/ops/test_tensor_*.py`.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

from zeptograd import Device, Tensor, dtypes
from zeptograd.codegen import get_program
from zeptograd.codegen.opt import Opt, OptError, OptOps
from zeptograd.dtype import DType
from zeptograd.renderer.triton import TritonRenderer, signature
from zeptograd.runtime.ops_triton import TritonCompileError, TritonDevice, compile_triton, num_warps, triton_problem
from zeptograd.schedule.kernelize import create_schedule

sys.path.insert(0, str(Path(__file__).parent))
from test_cuda import CLAIMED, cast_ops, dtype_ops, family_ops

needs_triton = pytest.mark.skipif(triton_problem() is not None, reason="Triton is not installed")
needs_gpu = pytest.mark.skipif(not Device.usable("TRITON"), reason="no usable TRITON device (Triton and a GPU)")
RNG = np.random.default_rng(17)


def programs(*outs: Tensor) -> list:
    items, _ = create_schedule([o.uop for o in outs], ["CPU"])
    return [get_program(it.ast, TritonRenderer()) for it in items if it.ast is not None]


def compiled_all(*outs: Tensor) -> None:
    for p in programs(*outs):
        for arch in ("sm_80", "sm_90"):
            kernel = compile_triton(p.src, p.name, signature(p.uops), arch, num_warps(p.uops))
            assert kernel.cubin[:4] == b"\x7fELF" and kernel.name == p.name


def test_rendered_kernel_shape() -> None:
    x = Tensor(np.ones((6, 6), np.float32), device="CPU").realize()
    (p,) = programs(x.pad(((1, 1), (1, 1))) + 1)
    assert "@triton.jit" in p.src and f"def {p.name}(data0, data1):" in p.src
    assert "tl.program_id(0)" in p.src and "tl.arange(0, " in p.src
    assert "tl.load(data1 + " in p.src and "mask=" in p.src and "tl.store(data0 + " in p.src
    assert signature(p.uops) == {"data0": "*fp32", "data1": "*fp32"}


def test_group_is_refused() -> None:
    x = Tensor(np.ones(4096, np.float32), device="CPU").realize()
    (item,), _ = create_schedule([x.sum().uop], ["CPU"])
    with pytest.raises(OptError, match="no local memory"):
        get_program(item.ast, TritonRenderer(), [Opt(OptOps.GROUP, 0, 16)])
    assert not any(o.op is OptOps.GROUP for o in get_program(item.ast, TritonRenderer()).opts)


@needs_triton
@pytest.mark.parametrize("dtype", CLAIMED, ids=lambda d: d.name)
def test_every_claimed_dtype_compiles(dtype: DType) -> None:
    compiled_all(*dtype_ops(dtype))


@needs_triton
def test_casts_between_every_pair_compile() -> None:
    compiled_all(*[t for group in cast_ops() for t in group])


@needs_triton
def test_op_families_compile() -> None:
    compiled_all(*family_ops())


@needs_triton
def test_compile_error_has_source() -> None:
    src = "import triton\n\n\n@triton.jit\ndef k(data0):\n    undefined_name(data0)\n"
    with pytest.raises(TritonCompileError, match="Triton rejected k"):
        compile_triton(src, "k", {"data0": "*fp32"}, "sm_90")


def interpreted(out: Tensor) -> np.ndarray:
    """`out` computed by its kernels rendered for Triton and run in Triton's interpreter, on host buffers."""
    torch = pytest.importorskip("torch")  # the interpreter's buffers are torch tensors
    from triton_interpreter import load_interpreted

    from zeptograd.runtime.buffer import buffer_for

    folder = Path(tempfile.mkdtemp(prefix="zeptograd-triton-test-"))
    items, _ = create_schedule([out.uop], ["CPU"])
    for item in items:
        program = get_program(item.ast, TritonRenderer())
        kernel = load_interpreted(program.src, program.name, folder)
        bufs = [buffer_for(b).allocate() for b in item.bufs]
        used = sorted(u.arg for u in program.uops if u.op.name == "DEFINE_GLOBAL")
        grid = tuple(g // n for g, n in zip(program.launch_global, program.launch_local)) or (1,)
        kernel[grid](*[torch.from_numpy(bufs[i].array()) for i in used])
    return bufs[0].array().reshape(out.shape)


def host(a: np.ndarray) -> Tensor:
    return Tensor(a, device="CPU").realize()


A = RNG.standard_normal((33, 65)).astype(np.float32)
S = RNG.standard_normal((6, 8)).astype(np.float32)  # for the long programs: the interpreter runs each op in numpy
N = (RNG.standard_normal((33, 65)) * 50).astype(np.int32)
CASES = {
    "affine": (lambda: host(A) * 2 + 1, lambda: A * 2 + 1),
    "row_sum": (lambda: host(A).sum(1), lambda: A.sum(1)),
    "col_max": (lambda: host(A).max(0), lambda: A.max(0)),
    "exp2_sin": (lambda: host(S).exp2().sin(), lambda: np.sin(np.exp2(S))),
    "softmax": (
        lambda: host(A).softmax(-1),
        lambda: np.exp(A - A.max(-1, keepdims=True)) / np.exp(A - A.max(-1, keepdims=True)).sum(-1, keepdims=True),
    ),
    "floordiv_mod": (lambda: (host(N) // -3) + (host(N) % 7), lambda: (N // -3) + (N % 7)),
    "pad": (lambda: host(A).pad(((1, 1), (2, 2))) + 1, lambda: np.pad(A, ((1, 1), (2, 2))) + 1),
    "matmul": (lambda: host(S) @ host(S.T.copy()), lambda: S @ S.T),
    "half_cast": (
        lambda: host(A).cast(dtypes.float16).sqrt().float(),
        lambda: np.sqrt(A.astype(np.float16)).astype(np.float32),
    ),
    "bitcast_shift": (lambda: host(A).bitcast(dtypes.int32) >> 3, lambda: A.view(np.int32) >> 3),
    "where_bool": (lambda: (host(A) > 0).where(host(A), -host(A)), lambda: np.abs(A)),
    # a gated load whose address is the same for every work-item: Triton takes a block mask with a block of
    # pointers only (it rejected 52 such kernels of the movement, ops and indexing suites)
    "cat_columns": (
        lambda: host(S[:2, :3].copy()).cat(host(S[2:4, :1].copy()), host(S[4:6, :2].copy()), dim=1),
        lambda: np.concatenate([S[:2, :3], S[2:4, :1], S[4:6, :2]], 1),
    ),
}


@needs_triton
@pytest.mark.parametrize("case", list(CASES))
def test_programs_in_triton_interpreter(case: str) -> None:
    make, want = CASES[case]
    got = interpreted(make())
    np.testing.assert_allclose(got, want(), rtol=2e-3 if case == "half_cast" else 1e-5, atol=1e-5, equal_nan=True)


def triton(a: np.ndarray) -> Tensor:
    return Tensor(a, device="TRITON")


@needs_gpu
@pytest.mark.parametrize("dtype", [dtypes.float32, dtypes.float16, dtypes.int32, dtypes.int8, dtypes.bool], ids=str)
def test_elementwise_on_gpu(dtype: DType) -> None:
    np_dt = np.dtype(dtype.name if dtype is not dtypes.bool else "bool")
    a = (RNG.standard_normal((33, 65)) * 50).astype(np_dt)
    b = (RNG.standard_normal((33, 65)) * 50 + 1).astype(np_dt)
    ta, tb = triton(a), triton(b)
    if dtype is dtypes.bool:
        np.testing.assert_array_equal((ta ^ tb).numpy(), a ^ b)
        return
    # a * b + a is a multiply-add (MULACC), as on every device: for float32 one fused multiply-add, the exact value
    # rounded once (a * b + a cancels for some elements, where two roundings differ from it by far more than an
    # ulp); for half the product is rounded to half first, as numpy's half does (the C-style renderers' half)
    want = (a.astype(np.float64) * b + a).astype(np_dt) if dtype is dtypes.float32 else a * b + a
    np.testing.assert_allclose((ta * tb + ta).numpy(), want, rtol=2e-3 if dtype is dtypes.float16 else 1e-6)
    np.testing.assert_array_equal((ta < tb).numpy(), a < b)
    if dtypes.is_int(dtype):
        nz = np.where(b == 0, 1, b).astype(np_dt)
        np.testing.assert_array_equal((ta // triton(nz)).numpy(), a // nz)  # floor division, negative operands too
        np.testing.assert_array_equal((ta % triton(nz)).numpy(), a % nz)


@needs_gpu
def test_reductions_matmul_softmax_on_gpu() -> None:
    a = RNG.standard_normal((128, 300)).astype(np.float32)
    b = RNG.standard_normal((300, 64)).astype(np.float32)
    ta = triton(a)
    np.testing.assert_allclose(ta.sum(1).numpy(), a.sum(1), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(ta.max(0).numpy(), a.max(0))
    np.testing.assert_allclose((ta @ triton(b)).numpy(), a @ b, rtol=1e-4, atol=1e-3)
    e = np.exp(a - a.max(-1, keepdims=True))
    np.testing.assert_allclose(ta.softmax(-1).numpy(), e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ta.sqrt().exp2().sin().numpy(), np.sin(np.exp2(np.sqrt(a))), rtol=1e-4, atol=1e-5)


@needs_triton
def test_signed_zeros_in_triton_interpreter() -> None:
    # Triton reads `-0.0` as `0 - 0.0` and `-x` as `0 - x`: both lose the sign of zero, which // and neg keep
    z = np.array([-0.0, 0.0, -0.0, 0.0] * 4, np.float32)
    three = np.full(16, 3.0, np.float32)
    got = interpreted(host(z) // host(three))
    np.testing.assert_array_equal(np.signbit(got), np.signbit(np.floor_divide(z, three)))
    np.testing.assert_array_equal(np.signbit(interpreted(-host(z))), np.signbit(-z))


@needs_triton
def test_compiled_kernels_are_kept_per_parameter_types() -> None:
    # `x * x` is the same Triton text for float16 and float32 buffers: the device keeps a kernel per signature (it
    # kept one per text, and float16 squares came out of the float32 kernel as garbage on the GPU)
    dev = TritonDevice.__new__(TritonDevice)
    dev.arch, dev._kernels = "sm_90", {}
    half, single = (
        programs(Tensor([1.0, 2.0], dtype=dt, device="CPU") ** 2)[0] for dt in (dtypes.float16, dtypes.float32)
    )
    assert half.src == single.src
    (key16, k16), (key32, k32) = dev.kernel(half), dev.kernel(single)
    assert key16 != key32 and k16 is not k32
    assert "ld.global.b16" in k16.ptx and "ld.global.b16" not in k32.ptx
    assert dev.kernel(half)[1] is k16


@needs_triton
def test_padded_matmul_with_gated_stores_compiles() -> None:
    # the plan pads 65 rows to 66: the padded row's stores sit in an IF, a STORE with the IF as a third source,
    # which the renderer took for a malformed store
    a, b = (
        host(RNG.standard_normal((65, 130)).astype(np.float32)),
        host(RNG.standard_normal((130, 33)).astype(np.float32)),
    )
    (p,) = programs(a @ b)
    assert any(o.op is OptOps.PADTO for o in p.opts)
    compiled_all(a @ b)
    compiled_all(CASES["cat_columns"][0]())  # the interpreter takes a scalar pointer with a block mask; Triton not
