"""EXP2, LOG2, SIN and tan as arithmetic (zeptograd/codegen/transcendental.py), and the Tensor functions built on
them.

The oracle is numpy in float64 (long double for float64 results), independent of the code under test. An error is
measured in ulp of the correctly rounded answer (the spacing of the float64 reference rounded to the result dtype,
denormal spacing included); infinities and NaNs must match exactly. The sweeps spread a few hundred thousand
values log-uniformly over the whole float32 range, both signs, plus the special values; the PYTHON device runs a
smaller sample and must agree with the CPU bit for bit (both run the same polynomial).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

import numpy as np
import pytest

from zeptograd import Device, Tensor, dtypes
from zeptograd.codegen import full_rewrite, get_program
from zeptograd.codegen.transcendental import Target, decompositions, target_of, xsin, xtan, xtanh
from zeptograd.helpers import Context
from zeptograd.renderer.wgsl import WGSLRenderer
from zeptograd.runtime.buffer import buffer_for
from zeptograd.runtime.ops_python import PythonProgram
from zeptograd.schedule.kernelize import create_schedule
from zeptograd.uop import Ops, UOp
from zeptograd.uop.rewrite import graph_rewrite
from zeptograd.uop.symbolic import symbolic

# the decomposed kernels are hundreds of nodes each: round-tripping every graph through pyrender (conftest.py) in
# every test would add 15 s here; the special-value tests keep it on for each decomposition
no_roundtrip = pytest.mark.no_roundtrip

TINY = np.float32(2.0**-149)  # the smallest float32 denormal
SPECIALS32 = np.array(
    [0.0, -0.0, np.inf, -np.inf, np.nan, TINY, -TINY, 2.0**-126, 2.0**-127, 3.4028235e38, -3.4028235e38, 1.0, -1.0],
    np.float32,
)


def max_ulp(got: np.ndarray, ref: np.ndarray) -> float:
    """The largest error of `got` in ulp of `ref` rounded to got's dtype; NaNs and infinities must match."""
    dt = got.dtype
    with np.errstate(over="ignore", invalid="ignore"):
        want = ref.astype(dt)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg="NaNs differ")
    inf = np.isinf(want) | np.isinf(got)
    np.testing.assert_array_equal(got[inf], want[inf], err_msg="infinities differ")
    fin = ~np.isnan(want) & ~inf
    err = np.abs(got[fin].astype(ref.dtype) - ref[fin]) / np.spacing(np.abs(want[fin])).astype(ref.dtype)
    return float(err.max()) if err.size else 0.0


def sweep32(n: int, lo: float, hi: float, seed: int, signs: bool = True) -> np.ndarray:
    """n float32 values with |x| log-uniform in [2**lo, 2**hi], both signs if `signs`, plus the special values."""
    rng = np.random.default_rng(seed)
    x = np.exp2(rng.uniform(lo, hi, n))
    if signs:
        x = x * rng.choice([-1.0, 1.0], n)
    return np.concatenate([x.astype(np.float32), SPECIALS32])


def ref64(fn: Callable[[np.ndarray], np.ndarray], x: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return fn(x.astype(np.float64))


# ---------------------------------------------------------------------------------------------------------------
# float32 over the whole range (the documented bound: 2 ulp)

N = 200_000
# op -> (oracle, inputs)
FLOAT32 = {
    "exp2": (
        np.exp2,
        np.concatenate([np.random.default_rng(1).uniform(-152, 130, N).astype(np.float32), sweep32(N, -149, 8, 2)]),
    ),
    "log2": (np.log2, sweep32(N, -149, 128, 3, signs=False)),
    "sin": (np.sin, sweep32(N, -149, 128, 4)),
    "cos": (np.cos, sweep32(N, -149, 128, 5)),
    "tan": (np.tan, sweep32(N, -149, 128, 24)),
}


@no_roundtrip
@pytest.mark.parametrize("op", list(FLOAT32))
def test_float32_whole_range(op: str):
    oracle, x = FLOAT32[op]
    assert max_ulp(getattr(Tensor(x), op)().numpy(), ref64(oracle, x)) <= 2


def test_exp2_special_values_and_denormals():
    x = np.array([128.0, 127.99999, -149.0, -149.5, -149.9, -150.0, -150.1, -126.5, -140.25, 0.0, -0.0], np.float32)
    x = np.concatenate([x, np.arange(-149, 128, dtype=np.float32), [np.inf, -np.inf, np.nan]]).astype(np.float32)
    out = Tensor(x).exp2().numpy()
    assert max_ulp(out, ref64(np.exp2, x)) <= 1
    ints = np.arange(-149, 128)
    np.testing.assert_array_equal(out[11:-3], np.ldexp(np.float32(1), ints))  # exact powers of two, denormals too
    assert out[0] == np.inf and out[2] == TINY and out[3] == TINY and out[5] == 0 and out[6] == 0
    assert out[-3] == np.inf and out[-2] == 0 and np.isnan(out[-1])


def test_log2_special_values_and_denormals():
    x = np.array([0.0, -0.0, -1.0, -TINY, np.inf, -np.inf, np.nan, TINY, 2.0**-130, 3.4028235e38, 1.0], np.float32)
    out = Tensor(x).log2().numpy()
    assert out[0] == -np.inf and out[1] == -np.inf and np.isnan(out[2:4]).all() and out[4] == np.inf
    assert np.isnan(out[5]) and np.isnan(out[6]) and out[7] == -149 and out[8] == -130 and out[10] == 0
    powers = np.ldexp(np.float32(1), np.arange(-149, 128)).astype(np.float32)
    np.testing.assert_array_equal(Tensor(powers).log2().numpy(), np.arange(-149, 128, dtype=np.float32))
    denormals = np.random.default_rng(6).integers(1, 1 << 23, 5000).astype(np.uint32).view(np.float32)
    assert max_ulp(Tensor(denormals).log2().numpy(), ref64(np.log2, denormals)) <= 2


def test_sin_cos_tan_special_values():
    x = np.array([0.0, -0.0, TINY, -TINY, 1e-20, np.inf, -np.inf, np.nan], np.float32)
    s, c, t = Tensor(x).sin().numpy(), Tensor(x).cos().numpy(), Tensor(x).tan().numpy()
    for v in (s, t):  # sin(x) and tan(x) round to x: the sign of 0 and the denormals exact
        np.testing.assert_array_equal(v[:5], x[:5])
        np.testing.assert_array_equal(np.signbit(v[:5]), np.signbit(x[:5]))
    assert np.isnan(s[5:]).all() and np.isnan(c[5:]).all() and np.isnan(t[5:]).all() and (c[:5] == 1).all()


@no_roundtrip
def test_sin_cos_tan_near_multiples_of_half_pi():
    """The float32 values nearest k*pi/2 (where the reduction cancels most, and tan is largest or smallest): Cody-Waite
    for |k| < 2**20, Payne-Hanek beyond, and the largest floats."""
    k = np.concatenate([np.arange(1, 3000), np.random.default_rng(7).integers(3000, 1 << 23, 3000)])
    near = (k * (math.pi / 2)).astype(np.float32)
    x = np.concatenate([near, np.nextafter(near, np.float32(0)), np.nextafter(near, np.float32(np.inf))])
    x = np.concatenate([x, -x, np.array([1e10, 3e30, -1e38, 16367173 * 2.0**72], np.float32)])
    for op, oracle in (("sin", np.sin), ("cos", np.cos), ("tan", np.tan)):
        assert max_ulp(getattr(Tensor(x), op)().numpy(), ref64(oracle, x)) <= 2


@no_roundtrip
def test_sin_cos_tan_where_the_reduction_switches():
    """Fused multiply-adds below 2**20, Payne-Hanek from there: every float32 in a window on each side of the
    switch, and a log-uniform sample of the fused range's top binades (where k*p2 is largest, and k = round(x*2/pi)
    rounded in float32 leaves |r| up to 0.87). sin and cos within 1 ulp, tan within 2."""
    edge = np.float32(2.0**20).view(np.uint32)
    window = np.arange(edge - 50_000, edge + 50_000, dtype=np.uint32).view(np.float32)
    x = np.concatenate([window, sweep32(100_000, 15, 20, 10)])
    for op, oracle, bound in (("sin", np.sin, 1), ("cos", np.cos, 1), ("tan", np.tan, 2)):
        assert max_ulp(getattr(Tensor(x), op)().numpy(), ref64(oracle, x)) <= bound


@no_roundtrip
def test_tan_every_float32_in_four_binades():
    """Every float32 in [0.5, 8): tan's polynomial part is largest relative to tan near |r| = pi/4, and its
    reciprocal (odd k) takes over beyond; within 2 ulp (1.27 measured over every float32 below 2**20, 1.16 here)."""
    start, stop = (int(np.float32(v).view(np.uint32)) for v in (0.5, 8.0))
    for lo in range(start, stop, 1 << 22):
        x = np.arange(lo, min(lo + (1 << 22), stop), dtype=np.uint32).view(np.float32)
        assert max_ulp(Tensor(x).tan().numpy(), ref64(np.tan, x)) <= 2


# ---------------------------------------------------------------------------------------------------------------
# the polynomials are IR: the PYTHON interpreter runs the CPU's program bit for bit (the PYTHON device itself
# computes EXP2/LOG2/SIN exactly)


def run_cpu_program_in_python(t: Tensor) -> np.ndarray:
    """The value of one-kernel expression `t`, by the CPU's linear program executed on the PYTHON interpreter."""
    (item,), _ = create_schedule([t.uop], ["PYTHON"])
    program = get_program(item.ast, Device["CPU"].renderer)
    bufs = [buffer_for(b) for b in item.bufs]
    for b in bufs:
        b.array()
    PythonProgram(program.uops)(bufs)
    return bufs[0].numpy().reshape(t.shape)


@no_roundtrip
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("op", ["exp2", "log2", "sin", "cos", "tan"])
def test_python_device_agrees_bit_for_bit(op: str, dtype: type):
    x = np.concatenate([sweep32(12, -20, 30 if op != "exp2" else 7, 8), [1e7, -3e30, 0.5, -149.7, 1e-40]])
    with np.errstate(over="ignore"):  # float16: 1e7 and 3e30 are inf
        x = x.astype(dtype) if op != "log2" else np.abs(x).astype(dtype)
    cpu = getattr(Tensor(x, device="CPU"), op)().numpy()  # the CPU device whatever DEVICE says
    python = run_cpu_program_in_python(getattr(Tensor(x, device="PYTHON").realize(), op)())
    np.testing.assert_array_equal(
        cpu.view(f"u{cpu.itemsize}")[~np.isnan(cpu)], python.view(f"u{cpu.itemsize}")[~np.isnan(cpu)]
    )
    np.testing.assert_array_equal(np.isnan(cpu), np.isnan(python))


# ---------------------------------------------------------------------------------------------------------------
# float64 (against long double) and float16 (every value)


@no_roundtrip
@pytest.mark.skipif(np.finfo(np.longdouble).nmant < 63, reason="needs an extended long double as the float64 oracle")
@pytest.mark.parametrize(
    "op, oracle, lo, hi, signs",
    [
        ("exp2", np.exp2, -1075, 1025, True),
        ("log2", np.log2, -1074, 1024, False),
        ("sin", np.sin, -1074, 30.5, True),
        ("cos", np.cos, -1074, 30.5, True),
        ("tan", np.tan, -1074, 30.5, True),
    ],
)
def test_float64(op: str, oracle: Callable, lo: float, hi: float, signs: bool):
    """float64 within 2 ulp (tan: 1.07 measured), sin, cos and tan for |x| < 1.6e9 (the Cody-Waite range: beyond
    it float64 is a fallback)."""
    rng = np.random.default_rng(9)
    if op == "exp2":
        x = rng.uniform(lo, hi, 50_000)
    else:
        x = np.exp2(rng.uniform(lo, hi, 50_000)) * (rng.choice([-1.0, 1.0], 50_000) if signs else 1)
    x = np.concatenate([x, [0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, 1.0, 1024.0, -1075.0, -1074.5]])
    with np.errstate(all="ignore"):
        ref = oracle(x.astype(np.longdouble))
    assert max_ulp(getattr(Tensor(x), op)().numpy(), ref) <= 2


@no_roundtrip
@pytest.mark.parametrize(
    "op, oracle", [("exp2", np.exp2), ("log2", np.log2), ("sin", np.sin), ("cos", np.cos), ("tan", np.tan)]
)
def test_float16_every_value(op: str, oracle: Callable):
    """float16 computes in float32 and rounds once: within 1 ulp of float16 for all 65536 inputs."""
    x = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    out = getattr(Tensor(x), op)().numpy()
    assert out.dtype == np.float16
    assert max_ulp(out, ref64(oracle, x)) <= 1


# ---------------------------------------------------------------------------------------------------------------
# the functions built on them (mixin/elementwise.py), on CPU and on the PYTHON device

DERIVED = {
    # op -> (oracle, inputs, max ulp)
    "exp": (np.exp, sweep32(20_000, -20, 7, 10), 2),
    "log": (np.log, sweep32(20_000, -149, 128, 11, signs=False), 2),
    "cos": (np.cos, sweep32(20_000, -30, 128, 12), 2),
    "tan": (np.tan, sweep32(20_000, -30, 128, 13), 2),
    "sigmoid": (lambda x: 1 / (1 + np.exp(-x)), sweep32(20_000, -20, 7, 14), 3),
    "tanh": (np.tanh, sweep32(20_000, -20, 7, 15), 2),
}


@no_roundtrip
@pytest.mark.parametrize("op", list(DERIVED))
def test_derived_functions(op: str):
    oracle, x, bound = DERIVED[op]
    assert max_ulp(getattr(Tensor(x), op)().numpy(), ref64(oracle, x)) <= bound
    small = x[:: len(x) // 24]
    assert max_ulp(getattr(Tensor(small, device="PYTHON"), op)().numpy(), ref64(oracle, small)) <= bound


@no_roundtrip
def test_pow():
    rng = np.random.default_rng(16)
    b = np.exp2(rng.uniform(-20, 20, 20_000)).astype(np.float32)
    e = rng.uniform(-6, 6, 20_000).astype(np.float32)
    assert max_ulp((Tensor(b) ** Tensor(e)).numpy(), b.astype(np.float64) ** e.astype(np.float64)) <= 1
    bs, es = b[:24], e[:24]
    out = (Tensor(bs, device="PYTHON") ** Tensor(es, device="PYTHON")).numpy()
    assert max_ulp(out, bs.astype(np.float64) ** es.astype(np.float64)) <= 1


# ---------------------------------------------------------------------------------------------------------------
# what the pass leaves


def test_no_transcendental_ops_or_libm_calls_are_left():
    x = Tensor(np.linspace(-3, 3, 16, dtype=np.float32)).realize()
    out = (x.exp2() + x.exp() + x.tanh() + x.log2() + x.sin() + x.cos() + x.tan() + x.sqrt()).uop
    (item,) = create_schedule([out], ["CPU"])[0]
    ops = {u.op for u in full_rewrite(item.ast)}
    assert (
        not ops & {Ops.EXP2, Ops.EXP, Ops.TANH, Ops.LOG2, Ops.SIN, Ops.COS, Ops.TAN} and Ops.SQRT in ops
    )  # sqrt is one instruction: it stays
    src = get_program(item.ast, Device["CPU"].renderer).src
    assert not re.search(r"\b(exp2|exp|tanh|log2|sin|cos|tan)f?\(", src)  # no libm call
    assert "sqrtf(" in src or "__builtin_ia32_sqrtps" in src  # sqrt: one instruction, scalar or vector


@no_roundtrip
@pytest.mark.parametrize("op", ["sin", "cos", "tan"])
@pytest.mark.parametrize("where", [None, 0, 7, 8, 1000, 4095])
def test_sin_branches_per_vector(op: str, where: int | None):
    """sin reduces |x| < 2**20 the short way; larger arguments are computed in a branch that runs only for the
    vectors where some lane needs it (lowering.rare_to_branch). One large, inf or nan argument at a time, at a
    vector's first or last lane, among small ones: every lane must still be right."""
    x = np.random.default_rng(9).uniform(-20, 20, 4096).astype(np.float32)
    specials = {0: np.float32(3e4), 7: np.float32(-5e6), 8: np.float32(np.inf), 1000: np.float32(np.nan)}
    if where is not None:
        x[where] = specials.get(where, np.float32(1.5e20))
    assert max_ulp(getattr(Tensor(x), op)().numpy(), ref64(getattr(np, op), x)) <= 2


# SIN, COS and TAN are three ops: whatever evaluates one (the decompositions, the PYTHON device's exec_alu, the
# constant folder) must not compute another
ANGLES = np.array([0.5, -1.25, 2.0, 3.0, -100.0, 1e7, 0.0, -0.0], np.float32)


@pytest.mark.parametrize("op", ["sin", "cos", "tan"])
def test_each_evaluator_computes_its_own_function(op: str):
    """The CPU (the decompositions: tan within 2 ulp), the PYTHON device and the constant folder (both exec_alu,
    Python's math rounded once) each give their op's function of the same angles, against numpy."""
    ref = ref64(getattr(np, op), ANGLES)
    assert max_ulp(getattr(Tensor(ANGLES, device="CPU"), op)().numpy(), ref) <= 2
    assert max_ulp(getattr(Tensor(ANGLES, device="PYTHON"), op)().numpy(), ref) <= 1
    folded = [graph_rewrite(getattr(UOp.const(dtypes.float32, float(v)), op)(), symbolic) for v in ANGLES]
    assert all(u.op is Ops.CONST for u in folded)
    assert max_ulp(np.array([u.arg for u in folded], np.float32), ref) <= 1
    # a constant tensor's op is folded in the kernel: the folder's value on the CPU
    const = getattr(Tensor.full((4,), float(ANGLES[1])), op)().numpy()
    np.testing.assert_array_equal(const, np.full(4, folded[1].arg, np.float32))


def test_cos_and_tan_build_as_cheaply_as_sin():
    """COS and TAN are single ops until the compiler lowers them: building cos or tan adds one node, as sin does
    (it was the whole reduction and polynomial, ~1.6 ms of Python per call)."""
    x = Tensor(np.linspace(-3, 3, 8, dtype=np.float32)).realize()
    for op in ("sin", "cos", "tan"):
        out = getattr(x, op)().uop
        assert out.op is getattr(Ops, op.upper()) and out.src == (x.uop,)


def test_sin_takes_a_branch_for_large_arguments():
    x = Tensor(np.linspace(-3, 3, 64, dtype=np.float32)).realize()
    (item,) = create_schedule([x.sin().uop], ["CPU"])[0]
    program = full_rewrite(item.ast, Device["CPU"].renderer)
    assert sum(u.op is Ops.IF for u in program) == 1  # |x| >= 2**20 (and inf, nan): Payne-Hanek


# ---------------------------------------------------------------------------------------------------------------
# targets without a fused multiply-add or without 64-bit integers (WEBGPU has neither): sin's reductions for them,
# run on the CPU and the PYTHON device, so they are checked where WEBGPU is missing (test_webgpu.py runs them there)


def near_half_pi() -> np.ndarray:
    """The float32 values nearest k*pi/2 for k up to 2**23 and their neighbours, both signs, and the largest floats
    (16367173 * 2**72 is the float32 nearest a multiple of pi/2, relative to its size)."""
    k = np.concatenate([np.arange(1, 3000), np.random.default_rng(7).integers(3000, 1 << 23, 3000)])
    near = (k * (math.pi / 2)).astype(np.float32)
    x = np.concatenate([near, np.nextafter(near, np.float32(0)), np.nextafter(near, np.float32(np.inf))])
    largest = np.arange(0x7F7FFFFF - 2000, 0x7F7FFFFF + 1, dtype=np.uint32).view(np.float32)
    x = np.concatenate([x, largest, np.array([1e10, 3e30, 16367173 * 2.0**72], np.float32)])
    return np.concatenate([x, -x])


TARGETS = {
    "no fused fma": Target(fused_mulacc=False),
    "no int64": Target(int64=False),
    "neither": Target(fused_mulacc=False, int64=False),
}


def on_target(x: np.ndarray, op: str, target: Target, device: str = "CPU") -> np.ndarray:
    """sin, cos or tan of float32 `x` with the reductions `target` gets, as arithmetic on `device`."""
    if op == "tan":
        return Tensor(x, device=device)._elementwise(lambda u: xtan(u, target)).numpy()
    return Tensor(x, device=device)._elementwise(lambda u: xsin(u, int(op == "cos"), target)).numpy()


def test_target_of_renderers():
    assert target_of(None) == Target() == target_of(Device["CPU"].renderer) == target_of(Device["PYTHON"].renderer)
    assert target_of(WGSLRenderer()) == Target(fused_mulacc=False, int64=False)


def test_decompositions_without_a_target_are_the_default():
    x = Tensor(np.linspace(-3, 3, 16, dtype=np.float32)).realize()
    (item,) = create_schedule([x.sin().uop], ["CPU"])[0]
    assert graph_rewrite(item.ast, decompositions) is graph_rewrite(item.ast, decompositions, Target())
    assert graph_rewrite(item.ast, decompositions) is not graph_rewrite(item.ast, decompositions, TARGETS["neither"])


@no_roundtrip
@pytest.mark.parametrize("op", ["sin", "cos", "tan"])
def test_wgsl_program_has_no_64_bit_integers(op: str):
    """The WGSL renderer's sin, cos and tan compile (they used 64-bit integers: UnsupportedDType), with no int64."""
    x = Tensor(np.linspace(-3, 3, 64, dtype=np.float32)).realize()
    target = target_of(WGSLRenderer())
    fn = {"sin": lambda u: xsin(u, 0, target), "cos": lambda u: xsin(u, 1, target), "tan": lambda u: xtan(u, target)}
    out = x._elementwise(fn[op])
    for item in create_schedule([out.uop], ["CPU"])[0]:
        program = get_program(item.ast, WGSLRenderer())
        assert not {u.dtype.scalar() for u in program.uops} & {dtypes.int64, dtypes.uint64}
        assert "Payne" not in program.src  # a program, not an error message


@no_roundtrip
@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize("op", ["sin", "cos", "tan"])
def test_reductions_without_fma_or_int64(op: str, target: str):
    """The whole float32 range and the values nearest multiples of pi/2: sin and cos within 1 ulp (0.85 measured);
    tan within 2 (0.98 measured here; every float32 below 2**20: 1.17 without a fused MULACC, 1.27 with)."""
    x = np.concatenate([sweep32(200_000, -149, 128, 18), near_half_pi()])
    bound = 2 if op == "tan" else 1
    assert max_ulp(on_target(x, op, TARGETS[target]), ref64(getattr(np, op), x)) <= bound


@no_roundtrip
@pytest.mark.parametrize("target", ["default", "no fused fma"])
def test_tanh_on_both_targets(target: str):
    """tanh's e**2a takes fused multiply-adds where MULACC is fused, else exp's Cody-Waite reduction: either is
    within 2 ulp on every 5th float32 from 2**-20 to 12 (past the switch to 1 - 2/(e**2a + 1) at 0.625, where
    the error peaks: 1.36 ulp measured with the fused form), and the special values keep their sign."""
    a = np.arange(np.float32(2.0**-20).view(np.uint32), np.float32(12).view(np.uint32), 5, dtype=np.uint32)
    x = np.concatenate([a.view(np.float32), SPECIALS32, np.float32([1e30, 3.4e38])])
    x = np.concatenate([x, -x])
    chosen = Target() if target == "default" else TARGETS[target]
    out = Tensor(x)._elementwise(lambda u: xtanh(u, chosen)).numpy()
    assert max_ulp(out, ref64(np.tanh, x)) <= 2
    np.testing.assert_array_equal(np.signbit(out[~np.isnan(x)]), np.signbit(x[~np.isnan(x)]))


@no_roundtrip
@pytest.mark.parametrize("op", ["sin", "cos", "tan"])
def test_fma_free_reductions_with_products_rounded(op: str):
    """No product the FMA-free reductions (and tan's residual) add is inexact, so they hold whether a device fuses
    a*b + c (MULACC on the CPU) or rounds the product first (NOOPT: no MULACC at all), as WGSL may; every float32
    in a window on each side of 2**20, where Payne-Hanek takes over, included. sin and cos within 1 ulp, tan
    within 2 (every float32 below 2**20 with NOOPT: 1.21 measured)."""
    edge = np.float32(2.0**20).view(np.uint32)
    window = np.arange(edge - 20_000, edge + 20_000, dtype=np.uint32).view(np.float32)
    x = np.concatenate([sweep32(100_000, -30, 30, 19), near_half_pi(), window])
    with Context(NOOPT=1):
        assert max_ulp(on_target(x, op, TARGETS["neither"]), ref64(getattr(np, op), x)) <= (2 if op == "tan" else 1)


@no_roundtrip
@pytest.mark.parametrize("op", ["sin", "cos", "tan"])
def test_python_device_runs_the_reductions_without_fma_or_int64(op: str):
    """The PYTHON device interprets the same arithmetic: within 1 ulp (tan: 2), and the CPU's result bit for bit."""
    x = np.concatenate([sweep32(150, -149, 128, 20), near_half_pi()[::100]])
    target = TARGETS["neither"]
    python = on_target(x, op, target, "PYTHON")
    assert max_ulp(python, ref64(getattr(np, op), x)) <= (2 if op == "tan" else 1)
    cpu = on_target(x, op, target, "CPU")
    np.testing.assert_array_equal(np.isnan(cpu), np.isnan(python))
    np.testing.assert_array_equal(cpu[~np.isnan(cpu)].view(np.uint32), python[~np.isnan(cpu)].view(np.uint32))
