"""Elementwise Tensor ops (zeptograd/mixin/elementwise.py) against numpy, and torch where numpy has no
equivalent (the activations, div(rounding_mode="trunc"), lerp).

References are computed in float64 from the very values the tensor holds and rounded once to the result dtype,
so "within n ulp" means n units in the last place of the correctly rounded answer. Special values (inf, -inf,
nan, -0.0, +-400 for the activations) are checked exactly: same NaNs, same infinities, the same sign of zero
where the op defines it.

The PYTHON device is an interpreter: tests that run on it keep their tensors at 64 elements or fewer.
"""

from __future__ import annotations

import math
import operator
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from dtype_support import needs_dtype

from zeptograd import Device, GlobalCounters, Tensor, dtypes
from zeptograd.dtype import DType

NP = {
    dtypes.float32: np.float32,
    dtypes.float16: np.float16,
    dtypes.float64: np.float64,
    dtypes.int8: np.int8,
    dtypes.uint8: np.uint8,
    dtypes.int16: np.int16,
    dtypes.int32: np.int32,
    dtypes.int64: np.int64,
    dtypes.uint32: np.uint32,
    dtypes.bool: np.bool_,
}
INF, NAN = math.inf, math.nan
SPECIALS = [NAN, INF, -INF, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1e-30, -1e-30, 3.0, -3.0]


# ---------------------------------------------------------------------------------------------------------------
# helpers


def assert_ulp(
    got: np.ndarray, ref: np.ndarray, max_ulp: float | np.ndarray, atol: float = 0.0, zero_sign: bool = False
) -> None:
    """got (of some float dtype) is within max_ulp ulp (plus atol; one bound, or one per element of ref) of the
    float64 reference rounded to that dtype; NaNs and infinities must match exactly, and with zero_sign so must
    the sign of zero results."""
    got = np.asarray(got)
    ref = np.asarray(ref, dtype=np.float64)
    assert got.shape == ref.shape, f"shape {got.shape} != {ref.shape}"
    with np.errstate(over="ignore", invalid="ignore"):
        want = ref.astype(got.dtype)
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan, err_msg="NaNs differ")
    inf = np.isinf(want)
    np.testing.assert_array_equal(got[inf], want[inf], err_msg="infinities differ")
    fin = ~nan & ~inf
    g, r, w = got[fin].astype(np.float64), ref[fin], want[fin]
    tol = np.broadcast_to(max_ulp, ref.shape)[fin] * np.spacing(np.abs(w)).astype(np.float64) + atol
    err = np.abs(g - r)
    bad = ~(err <= tol)
    if bad.any():
        i = np.argmax(err / np.maximum(tol, 1e-300))
        raise AssertionError(f"{bad.sum()} values off by more than {max_ulp} ulp + {atol}: got {g[i]!r}, want {r[i]!r}")
    if zero_sign:
        z = fin & (want == 0)
        np.testing.assert_array_equal(np.signbit(got[z]), np.signbit(want[z]), err_msg="signs of zero differ")


def has_float64(t: Tensor) -> bool:
    """Whether t's device computes float64: the float32 ops that go through float64 (pow, //, %, fmod) are held
    to float64's accuracy there, and to the stated float32 accuracy (codegen/demote.py) on a device without."""
    supported = getattr(Device[t.device].renderer, "supported_dtypes", None)  # the PYTHON device has all
    return supported is None or dtypes.float64 in supported()


def pow_ulp(t: Tensor, ref: np.ndarray) -> float | np.ndarray:
    """The ulp bound for float32 pow results `ref` computed on t's device: 1 with float64; without (WEBGPU),
    r = exp2(y*log2|x|) with the exponent t = y*log2|x| in float32, whose rounding (product and log2, together
    under 3 * 2**-24 relative, so |dt| <= 3 * 2**-24 * |t|) moves r by ln2 * |dt| relative: 2 * 2**-24 * |t|,
    at most 4 * |t| ulp of r (an ulp is at least 2**-24 relative), plus exp2's own ulp; so 4 * (1 + |log2 r|)."""
    if has_float64(t):
        return 1
    with np.errstate(all="ignore"):
        bound = 4 * (1 + np.abs(np.log2(np.abs(np.asarray(ref, np.float64)))))
    return np.where(np.isfinite(bound), bound, 4.0)


def assert_exact(t: Tensor, want: Any, dtype: DType) -> None:
    """t has want's shape and values exactly (NaN matching NaN, the sign of zero included), and the dtype."""
    want = np.asarray(want)
    assert t.dtype == dtype, f"dtype {t.dtype!r} != {dtype!r}"
    assert t.shape == want.shape, f"shape {t.shape} != {want.shape}"
    out = t.numpy()
    assert out.dtype == NP[dtype]
    want = want.astype(NP[dtype])
    np.testing.assert_array_equal(out, want)
    if out.dtype.kind == "f":  # the sign of a NaN is left open (the PYTHON device's NaN has none)
        num = ~np.isnan(want)
        np.testing.assert_array_equal(np.signbit(out[num]), np.signbit(want[num]), err_msg="signs differ")


def rand(shape: tuple[int, ...] | int, lo: float, hi: float, seed: int = 0, dtype: Any = np.float32) -> np.ndarray:
    return np.random.default_rng(seed).uniform(lo, hi, shape).astype(dtype)


def logspace(n: int, lo: float, hi: float, seed: int = 0) -> np.ndarray:
    """Positive float32 values spread over [e**lo, e**hi] by exponent."""
    return np.exp(np.random.default_rng(seed).uniform(lo, hi, n)).astype(np.float32)


def erf_ref(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def erfc_ref(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erfc, otypes=[np.float64])(x)


# ---------------------------------------------------------------------------------------------------------------
# float math: accuracy over wide ranges (float32, CPU), special values, and the ulp bounds the module claims

N = 3000


def _mix(*parts: np.ndarray) -> np.ndarray:
    return np.concatenate([np.asarray(p, np.float32).ravel() for p in parts])


# op -> (float64 reference, float32 inputs, max ulp, absolute slack, zero sign is defined)
MATH: dict[str, tuple[Callable[[np.ndarray], np.ndarray], np.ndarray, float, float, bool]] = {
    "exp": (np.exp, _mix(rand(N, -103.9, 88.7), rand(N, -1, 1), rand(300, -103.9, -87.5)), 2, 0, False),
    "exp2": (np.exp2, _mix(rand(N, -149.5, 127.9), rand(N, -1, 1)), 1, 0, False),
    "expm1": (np.expm1, _mix(rand(N, -20, 88), rand(N, -1e-3, 1e-3), rand(N, -1, 1)), 5, 0, True),
    "log": (np.log, _mix(logspace(N, -103, 88), rand(N, 0.5, 2)), 2, 0, False),
    "log2": (np.log2, _mix(logspace(N, -103, 88), rand(N, 0.5, 2)), 1, 0, False),
    "log10": (np.log10, _mix(logspace(N, -103, 88), rand(N, 0.5, 2)), 2, 0, False),
    "log1p": (np.log1p, _mix(logspace(N, -30, 80), -logspace(N, -30, -1e-3), rand(N, -1e-3, 1e-3)), 5, 0, True),
    "sqrt": (np.sqrt, _mix(logspace(N, -103, 88)), 0.5, 0, True),
    "rsqrt": (lambda x: 1 / np.sqrt(x), _mix(logspace(N, -80, 80)), 2, 0, False),
    "reciprocal": (lambda x: 1 / x, _mix(logspace(N, -80, 80), -logspace(N, -80, 80)), 0.5, 0, True),
    "sin": (np.sin, _mix(rand(N, -1e4, 1e4), rand(N, -4, 4), rand(N, -1e-3, 1e-3)), 1, 0, True),
    "cos": (np.cos, _mix(rand(N, -5e4, 5e4), rand(N, -4, 4), rand(N, -1e-3, 1e-3)), 1, 0, False),
    # tan: one reduction, a polynomial and its Newton-refined reciprocal: 1.27 ulp over every float32 below 2**20
    "tan": (np.tan, _mix(rand(N, -1e3, 1e3), rand(N, -1.5, 1.5)), 2, 0, True),
    "asin": (np.arcsin, _mix(rand(N, -1, 1), rand(N, -1e-3, 1e-3)), 4, 0, True),
    "acos": (np.arccos, _mix(rand(N, -1, 1), 1 - logspace(N, -16, -1e-3)), 3, 0, False),
    "atan": (np.arctan, _mix(rand(N, -5, 5), logspace(N, -20, 40), -logspace(N, -20, 40)), 4, 0, True),
    "sinh": (np.sinh, _mix(rand(N, -89, 89), rand(N, -1e-2, 1e-2)), 5, 0, True),
    "cosh": (np.cosh, _mix(rand(N, -89, 89), rand(N, -1e-2, 1e-2)), 4, 0, False),
    "tanh": (np.tanh, _mix(rand(N, -12, 12), rand(N, -1e-3, 1e-3)), 6, 0, True),
    "asinh": (np.arcsinh, _mix(rand(N, -5, 5), logspace(N, -20, 80), -logspace(N, -20, 80)), 5, 0, True),
    "acosh": (np.arccosh, _mix(1 + logspace(N, -16, 2), logspace(N, 0, 80)), 5, 0, False),
    "atanh": (np.arctanh, _mix(rand(N, -1, 1), rand(N, -1e-3, 1e-3)), 5, 0, True),
    "erf": (erf_ref, _mix(rand(N, -5, 5), rand(N, -1e-3, 1e-3)), 4, 0, True),
    "erfc": (erfc_ref, _mix(rand(N, -5, 10), rand(N, -1e-3, 1e-3), rand(N, -1, 1)), 5, 0, False),
    "sigmoid": (lambda x: 1 / (1 + np.exp(-x)), _mix(rand(N, -100, 100), rand(N, -4, 4)), 3, 0, False),
}


@pytest.mark.no_roundtrip  # test_math_on_python_device / test_activations_on_python_device round-trip these graphs
@pytest.mark.parametrize("op", list(MATH))
def test_float32_accuracy(op: str):
    ref_fn, x, max_ulp, atol, zero_sign = MATH[op]
    x = _mix(x, SPECIALS)
    with np.errstate(all="ignore"):
        ref = ref_fn(x.astype(np.float64))
    out = getattr(Tensor(x), op)()
    assert out.dtype == dtypes.float32 and out.shape == x.shape
    assert_ulp(out.numpy(), ref, max_ulp, atol, zero_sign)


@pytest.mark.no_roundtrip  # test_math_on_python_device / test_activations_on_python_device round-trip these graphs
@pytest.mark.parametrize("op", list(MATH))
def test_float16_rounds_once(op: str):
    """float16 computes in float32 and rounds once: within 1 ulp of float16 (half an ulp plus the float32 error)."""
    needs_dtype(None, dtypes.float16)
    ref_fn, x, _, _, zero_sign = MATH[op]
    with np.errstate(over="ignore"):
        x16 = _mix(x[::8], SPECIALS).astype(np.float16)
    with np.errstate(all="ignore"):
        ref = ref_fn(x16.astype(np.float64))
    out = getattr(Tensor(x16), op)()
    assert out.dtype == dtypes.float16
    assert_ulp(out.numpy(), ref, 1, 0, zero_sign)


# op -> integer inputs in its domain
INT_DOMAIN = {
    "exp": [-5, 0, 3, 88],
    "exp2": [-3, 0, 5],
    "expm1": [-5, 0, 3],
    "log": [1, 2, 100, 0, -1],
    "log2": [1, 8, 0],
    "log10": [1, 1000],
    "log1p": [0, 5, -1],
    "sqrt": [0, 4, 7, -1],
    "rsqrt": [1, 4, 0],
    "reciprocal": [1, -4, 3, 0],
    "sin": [0, 1, -3, 10000],
    "cos": [0, 1, -3, 10000],
    "tan": [0, 1, -3],
    "asin": [0, 1, -1, 2],
    "acos": [0, 1, -1, 2],
    "atan": [0, 1, -30],
    "sinh": [0, 1, -3],
    "cosh": [0, 1, -3],
    "tanh": [0, 1, -3],
    "asinh": [0, 1, -3],
    "acosh": [1, 3, 0],
    "atanh": [0, 1, -1, 2],
    "erf": [0, 1, -2, 5],
    "erfc": [0, 1, -2, 5],
    "sigmoid": [0, 1, -3],
}


@pytest.mark.no_roundtrip  # test_math_on_python_device / test_activations_on_python_device round-trip these graphs
@pytest.mark.parametrize("device", ["CPU", "PYTHON"])
@pytest.mark.parametrize("op", list(MATH))
def test_int_and_bool_inputs_promote_to_float32(op: str, device: str):
    ref_fn, _, max_ulp, atol, _ = MATH[op]
    ints = np.array(INT_DOMAIN[op], np.int32)
    with np.errstate(all="ignore"):
        ref = ref_fn(ints.astype(np.float64))
    out = getattr(Tensor(ints, device=device), op)()
    assert out.dtype == dtypes.float32
    assert_ulp(out.numpy(), ref, max_ulp, atol)
    if device == "CPU":
        b = np.array([True, False])
        with np.errstate(all="ignore"):
            ref = ref_fn(b.astype(np.float64))
        out = getattr(Tensor(b), op)()
        assert out.dtype == dtypes.float32
        assert_ulp(out.numpy(), ref, max_ulp, atol)


@pytest.mark.parametrize("op", list(MATH))
def test_math_on_python_device(op: str):
    """The PYTHON device agrees with the references too (a small sample of each range, and the special values)."""
    ref_fn, x, max_ulp, atol, zero_sign = MATH[op]
    x = _mix(x[:: len(x) // 20][:20], SPECIALS)
    with np.errstate(all="ignore"):
        ref = ref_fn(x.astype(np.float64))
    assert_ulp(getattr(Tensor(x, device="PYTHON"), op)().numpy(), ref, max_ulp, atol, zero_sign)


def test_float64_inputs_compute_in_float64():
    needs_dtype(None, dtypes.float64)
    x = np.array([-700.0, -1.0, 1e-10, 0.5, 1.0, 700.0, 1e5])
    for op, ref in (("exp", np.exp), ("log", np.log), ("sin", np.sin), ("cos", np.cos), ("tanh", np.tanh)):
        out = getattr(Tensor(x), op)()
        assert out.dtype == dtypes.float64
        with np.errstate(all="ignore"):
            want = ref(x)
        assert_ulp(out.numpy(), want, 8 if op != "cos" else 4, 1e-15 if op == "cos" else 0)


def test_sin_and_cos_at_large_arguments():
    """sin and cos reduce exactly at any size (Cody-Waite below 2**20, Payne-Hanek beyond)."""
    x = np.array([1e4, -1e4, 12345.678, 50000.0, 3e4 + 0.5, 2.0**14 * math.pi], np.float32)
    assert_ulp(Tensor(x).sin().numpy(), np.sin(x.astype(np.float64)), 1)
    assert_ulp(Tensor(x).cos().numpy(), np.cos(x.astype(np.float64)), 1)
    big = np.array([1e10, 3e30, -1e38], np.float32)
    assert_ulp(Tensor(big).sin().numpy(), np.sin(big.astype(np.float64)), 1)
    assert_ulp(Tensor(big).cos().numpy(), np.cos(big.astype(np.float64)), 1)


def test_exp_denormal_results_and_saturation():
    x = np.array([-87.5, -100.0, -103.0, -103.9, -104.5, -200.0, 88.7, 88.8, 1000.0, -INF, INF, NAN], np.float32)
    with np.errstate(all="ignore"):
        ref = np.exp(x.astype(np.float64))
    out = Tensor(x).exp().numpy()
    assert_ulp(out, ref, 2)
    assert out[4] == 0 and out[5] == 0 and np.isinf(out[7]) and np.isinf(out[8])


# ---------------------------------------------------------------------------------------------------------------
# exact unary ops: abs, sign, neg, trunc, floor, ceil, round, predicates

EXACT_F = np.array([NAN, INF, -INF, 0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 0.49999997, -1.7, 3.2, 1e30, -1e30])
EXACT_UNARY: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "abs": np.abs,
    "neg": np.negative,
    "trunc": np.trunc,
    "floor": np.floor,
    "ceil": np.ceil,
    "round": np.round,
    "square": np.square,
}


@pytest.mark.parametrize("device", ["CPU", "PYTHON"])
@pytest.mark.parametrize("dtype", [dtypes.float32, dtypes.float16])
@pytest.mark.parametrize("op", list(EXACT_UNARY))
def test_exact_unary_floats(op: str, dtype: DType, device: str):
    needs_dtype(device, dtype)
    with np.errstate(all="ignore"):
        x = EXACT_F.astype(NP[dtype])  # 1e30 is inf in float16
        want = EXACT_UNARY[op](x)
    out = getattr(Tensor(x, device=device), op)()
    assert_exact(out, want, dtype)


def test_python_device_trunc_keeps_the_sign_of_zero():
    """C's truncf(-0.5) is -0.0; the reference interpreter used to give float(math.trunc(-0.5)) = 0.0."""
    out = Tensor([-0.5, -0.0], device="PYTHON").trunc().numpy()
    assert np.signbit(out).all()


def test_sign_of_special_values():
    """sign: -1, 0 or 1; sign(-0.0) is 0.0, sign(nan) is nan (numpy; PyTorch 2.x returns 0 for nan)."""
    x = np.array([NAN, INF, -INF, 0.0, -0.0, 1e-30, -1e-30, 2.5, -2.5], np.float32)
    assert_exact(Tensor(x).sign(), [NAN, 1, -1, 0, 0, 1, -1, 1, -1], dtypes.float32)
    assert_exact(Tensor([-3, 0, 7]).sign(), [-1, 0, 1], dtypes.int32)
    assert_exact(Tensor([True, False]).sign(), [True, False], dtypes.bool)


@pytest.mark.parametrize("device", ["CPU", "PYTHON"])
def test_exact_unary_ints(device: str):
    x = np.array([-(2**31), -7, -1, 0, 1, 7, 2**31 - 1], np.int32)
    t = Tensor(x, device=device)
    for op in ("abs", "neg", "trunc", "floor", "ceil", "round", "sign", "square"):
        fn = {"trunc": lambda a: a, "floor": lambda a: a, "ceil": lambda a: a, "round": lambda a: a}.get(op)
        with np.errstate(all="ignore"):
            want = fn(x) if fn else getattr(np, op if op != "neg" else "negative")(x)
        assert_exact(getattr(t, op)(), want, dtypes.int32)
    assert_exact(Tensor([200, 3], dtype="uint8", device=device).abs(), [200, 3], dtypes.uint8)


def test_round_half_to_even_and_decimals():
    x = np.arange(-40, 41, dtype=np.float32) / 4  # every quarter: the halves are ties
    assert_exact(Tensor(x).round(), np.round(x), dtypes.float32)
    big = np.array([2.0**23 + 1, 2.0**24 - 1, -(2.0**23) - 1, 8388607.5], np.float32)
    assert_exact(Tensor(big).round(), np.round(big), dtypes.float32)
    y = np.array([1.2345, -2.5551, 0.125], np.float32)
    np.testing.assert_allclose(Tensor(y).round(2).numpy(), np.round(y.astype(np.float64), 2), atol=1e-6)


@pytest.mark.parametrize("dtype", [dtypes.float32, dtypes.float16], ids=str)
def test_float_predicates(dtype: DType):
    needs_dtype(None, dtype)
    x = np.array([NAN, INF, -INF, 0.0, -0.0, 1.0, -1e38], np.float32)
    with np.errstate(over="ignore"):
        xd = x.astype(NP[dtype])  # -1e38 is -inf in float16
    t = Tensor(xd)
    assert_exact(t.isnan(), np.isnan(xd), dtypes.bool)
    assert_exact(t.isinf(), np.isinf(xd), dtypes.bool)
    assert_exact(t.isinf(detect_negative=False), np.isposinf(xd), dtypes.bool)
    assert_exact(t.isinf(detect_positive=False), np.isneginf(xd), dtypes.bool)
    assert_exact(t.isinf(False, False), np.zeros(7, bool), dtypes.bool)
    assert_exact(t.isfinite(), np.isfinite(xd), dtypes.bool)


def test_float_predicates_of_ints():
    i = Tensor([1, -2, 0])
    assert_exact(i.isnan(), [False] * 3, dtypes.bool)
    assert_exact(i.isinf(), [False] * 3, dtypes.bool)
    assert_exact(i.isfinite(), [True] * 3, dtypes.bool)


def test_logical_ops():
    needs_dtype(None, dtypes.int64, dtypes.float64)
    a = np.array([0, 1, 2, 0, -3])
    b = np.array([0.0, 0.0, 5.0, 1.5, NAN])
    assert_exact(Tensor(a).logical_not(), np.logical_not(a), dtypes.bool)
    assert_exact(Tensor(b).logical_not(), np.logical_not(b), dtypes.bool)
    assert_exact(Tensor(a).logical_and(Tensor(b)), np.logical_and(a, b), dtypes.bool)
    assert_exact(Tensor(a).logical_or(Tensor(b)), np.logical_or(a, b), dtypes.bool)
    assert_exact(Tensor(a).logical_xor(Tensor(b)), np.logical_xor(a, b), dtypes.bool)


# ---------------------------------------------------------------------------------------------------------------
# odd shapes and non-contiguous inputs (shape handling is shared; a few ops from each family)

VIEWS: dict[str, tuple[tuple[int, ...], Callable[[np.ndarray], np.ndarray], Callable[[Tensor], Tensor]]] = {
    "permute": ((4, 3), lambda a: a.T, lambda t: t.permute(1, 0)),
    "flip": ((3, 4), lambda a: np.flip(a, (0, 1)), lambda t: t.flip((0, 1))),
    "shrink": ((5, 7), lambda a: a[1:4, 2:6], lambda t: t.shrink(((1, 4), (2, 6)))),
    "expand": ((1, 4), lambda a: np.broadcast_to(a, (3, 4)), lambda t: t.expand(3, 4)),
}
VIEW_OPS: dict[str, tuple[Callable[[Tensor], Tensor], Callable[[np.ndarray], np.ndarray]]] = {
    "exp": (lambda t: t.exp(), np.exp),
    "cos": (lambda t: t.cos(), np.cos),
    "floor": (lambda t: t.floor(), np.floor),
    "abs": (lambda t: t.abs(), np.abs),
    "mod": (lambda t: t % 0.75, lambda a: np.remainder(a, np.float32(0.75))),
    "pow": (lambda t: t.abs() ** 1.5, lambda a: np.abs(a) ** 1.5),
}


@pytest.mark.parametrize("device", ["CPU", "PYTHON"])
@pytest.mark.parametrize("view", list(VIEWS))
@pytest.mark.parametrize("op", list(VIEW_OPS))
def test_non_contiguous_inputs(op: str, view: str, device: str):
    base_shape, np_view, t_view = VIEWS[view]
    base = rand(base_shape, -3, 3, seed=3)
    a = np.array(np_view(base))
    t_fn, np_fn = VIEW_OPS[op]
    out = t_fn(t_view(Tensor(base, device=device)))
    assert out.shape == (3, 4)
    assert_ulp(out.numpy(), np_fn(a.astype(np.float64)), 4, 1e-7)


@pytest.mark.parametrize("device", ["CPU", "PYTHON"])
@pytest.mark.parametrize("shape", [(0,), (3, 0), (0, 1, 2), (1,), (1, 1), ()])
def test_size_zero_and_size_one(shape: tuple[int, ...], device: str):
    x = rand(shape, 0.5, 2, seed=4) if shape else np.float32(1.25)
    t = Tensor(x, device=device)
    for fn, ref in ((lambda t: t.exp(), np.exp), (lambda t: t.sigmoid(), lambda a: 1 / (1 + np.exp(-a)))):
        out = fn(t)
        assert out.shape == shape
        assert_ulp(out.numpy(), ref(np.asarray(x, np.float64)), 3)
    out = (t // 0.3) + (t % 0.3) + t.fmod(0.3) + (t**2.5) + t.clamp(0.6, 1.5)
    assert out.shape == shape
    a = np.asarray(x)
    with np.errstate(all="ignore"):
        want = np.floor_divide(a, np.float32(0.3)) + np.remainder(a, np.float32(0.3)) + np.fmod(a, np.float32(0.3))
        want = want.astype(np.float64) + a.astype(np.float64) ** 2.5 + np.clip(a, 0.6, 1.5)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-6)
    assert (Tensor(np.zeros((2, 0), np.int32), device=device) << 3).shape == (2, 0)


@pytest.mark.parametrize("device", ["CPU", "PYTHON"])
def test_broadcasting_binary_ops(device: str):
    a = rand((3, 1, 4), -3, 3, seed=5)
    b = rand((2, 1), 0.5, 2, seed=6)
    ta, tb = Tensor(a, device=device), Tensor(b, device=device)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    for name, out, want in (
        ("//", ta // tb, np.floor_divide(a, b)),
        ("%", ta % tb, np.remainder(a, b)),
        ("fmod", ta.fmod(tb), np.fmod(a, b)),
        ("pow", tb.pow(ta), np.power(b64, a64)),
        ("copysign", tb.copysign(ta), np.copysign(b, a)),
        ("logaddexp", ta.logaddexp(tb), np.logaddexp(a64, b64)),
        ("maximum", ta.maximum(tb), np.maximum(a, b)),
        ("minimum", ta.minimum(tb), np.minimum(a, b)),
    ):
        assert out.shape == (3, 2, 4), name
        assert_ulp(out.numpy(), want, 2)
    assert_exact(ta.clamp(-tb, tb), np.clip(a, -b, b), dtypes.float32)
    assert_exact((ta < tb), a < b, dtypes.bool)
    assert_exact((ta > 0).where(ta, tb), np.where(a > 0, a, b), dtypes.float32)


# ---------------------------------------------------------------------------------------------------------------
# division family: //, %, fmod, div(rounding_mode=...)

DIV_A = np.array([7.0, -7.0, 7.5, -7.5, 0.0, -0.0, 1.0, 1.0, -1.0, 1e30, 3.0, INF, -INF, NAN, 5.0, 1e-30, 0.5, 6.0])
DIV_B = np.array([2.0, 2.0, -2.0, -2.0, 3.0, 3.0, 0.1, INF, INF, 3e-7, 0.0, 2.0, 2.0, 1.0, NAN, 1.0, -0.0, -3.0])


def assert_remainder(t: Tensor, want: Any, a: np.ndarray, b: np.ndarray, dtype: DType) -> None:
    """fmod or % of a and b: exact on a device with float64. Without (WEBGPU, codegen/demote.py) the reduction
    x - q*|b| is computed in float32 with q*|b| rounded (lavapipe's fma is not fused either): each step moves
    the remainder by up to an ulp of what it reduces, so the result is within two ulp of |a| of the exact one,
    modulo |b| (a remainder just below |b| may come out as 0: fmod(1, 0.1f) = 0.09999999 comes out 0); where
    |a/b| >= 2**23 that is the only bound (the result may even lie outside [0, |b|))."""
    if has_float64(t) or dtype is not dtypes.float32:
        assert_exact(t, want, dtype)
        return
    out, want = t.numpy().astype(np.float64), np.asarray(want).astype(np.float64)
    np.testing.assert_array_equal(np.isnan(out), np.isnan(want))
    num = ~np.isnan(want)
    err, tol = np.abs(out[num] - want[num]), 2 * np.spacing(np.abs(a[num])).astype(np.float64)
    with np.errstate(invalid="ignore"):  # inf - inf where the exact result is an infinity
        ok = (out[num] == want[num]) | (err <= tol) | (np.abs(err - np.abs(b[num].astype(np.float64))) <= tol)
    assert ok.all()


def assert_floordiv(t: Tensor, want: Any, a: np.ndarray, b: np.ndarray, dtype: DType) -> None:
    """a // b: exact on a device with float64; without (WEBGPU), the float32 remainder above can move a quotient
    within 2**-22 relative of an integer by one, or by two float32 ulp where it is that large (1 // 0.1f is 10
    there, 9 in numpy); exact elsewhere."""
    if has_float64(t) or dtype is not dtypes.float32:
        assert_exact(t, want, dtype)
        return
    out, want = t.numpy().astype(np.float64), np.asarray(want).astype(np.float64)
    with np.errstate(all="ignore"):
        q = a.astype(np.float64) / b
        near = np.abs(q - np.round(q)) <= np.abs(q) * 2.0**-22
    np.testing.assert_array_equal(np.isnan(out), np.isnan(want))
    num = ~np.isnan(want)
    np.testing.assert_array_equal(out[num & ~near], want[num & ~near])
    o, w = out[num & near], want[num & near]
    with np.errstate(invalid="ignore"):  # inf - inf where the quotient overflows
        assert ((o == w) | (np.abs(o - w) <= np.maximum(1, 2 * np.spacing(np.abs(w).astype(np.float32))))).all()


def _div_inputs(dtype: DType) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    a = np.concatenate([DIV_A, rng.uniform(-100, 100, 40), rng.integers(-50, 50, 10) * 0.5])
    b = np.concatenate([DIV_B, rng.uniform(-10, 10, 40), rng.choice([-0.5, 0.5, 1.5, -2.5], 10)])
    with np.errstate(over="ignore"):
        return a.astype(NP[dtype]), b.astype(NP[dtype])


@pytest.mark.parametrize("device", ["CPU", "PYTHON"])
@pytest.mark.parametrize("dtype", [dtypes.float32, dtypes.float16])
def test_float_floordiv_mod_fmod_match_numpy(dtype: DType, device: str):
    needs_dtype(device, dtype)
    a, b = _div_inputs(dtype)
    ta, tb = Tensor(a, device=device), Tensor(b, device=device)
    with np.errstate(all="ignore"):
        assert_floordiv(ta // tb, np.floor_divide(a, b), a, b, dtype)
        assert_floordiv(ta.div(tb, rounding_mode="floor"), np.floor_divide(a, b), a, b, dtype)
        assert_floordiv(ta.floor_divide(tb), np.floor_divide(a, b), a, b, dtype)
        assert_remainder(ta % tb, np.remainder(a, b), a, b, dtype)
        assert_remainder(ta.remainder(tb), np.remainder(a, b), a, b, dtype)
        assert_remainder(ta.fmod(tb), np.fmod(a, b), a, b, dtype)


def test_float_remainder_is_exact_for_large_quotients():
    """fmod and % are exact (no a - floor(a/b)*b rounding) for float32 quotients up to 2**154, and // rounds
    exactly as numpy's float32 algorithm does (on a device with float64; see assert_remainder for one without)."""
    rng = np.random.default_rng(8)
    a = np.exp(rng.uniform(-20, 88, 400)) * rng.choice([-1.0, 1.0], 400)
    b = np.exp(rng.uniform(-15, 15, 400)) * rng.choice([-1.0, 1.0], 400)
    a, b = a.astype(np.float32), b.astype(np.float32)
    assert (np.abs(a.astype(np.float64) / b) < 2.0**154).all()
    ta, tb = Tensor(a), Tensor(b)
    assert_remainder(ta.fmod(tb), np.fmod(a, b), a, b, dtypes.float32)
    assert_remainder(ta % tb, np.remainder(a, b), a, b, dtypes.float32)
    with np.errstate(all="ignore"):  # quotients beyond float32's range are inf
        assert_floordiv(ta // tb, np.floor_divide(a, b), a, b, dtypes.float32)
    x = np.array([1e20, 3e38, -3e38, 16777217.0, -1e30], np.float32)
    one, tiny = np.ones_like(x), np.full_like(x, 3e-7)
    assert_remainder(Tensor(x) % 1.0, np.remainder(x, np.float32(1)), x, one, dtypes.float32)
    assert_remainder(Tensor(x).fmod(3e-7), np.fmod(x, np.float32(3e-7)), x, tiny, dtypes.float32)


def test_float_trunc_division_matches_torch():
    needs_dtype(None, dtypes.float16)
    torch = pytest.importorskip("torch")
    for dtype in (dtypes.float32, dtypes.float16):
        a, b = _div_inputs(dtype)
        want = torch.div(torch.from_numpy(a), torch.from_numpy(b), rounding_mode="trunc").numpy()
        assert_exact(Tensor(a).div(Tensor(b), rounding_mode="trunc"), want, dtype)


@pytest.mark.parametrize("device", ["CPU", "PYTHON"])
@pytest.mark.parametrize("dtype", [dtypes.int32, dtypes.int8, dtypes.int64, dtypes.uint8])
def test_integer_division_family(dtype: DType, device: str):
    needs_dtype(device, dtype)
    info = np.iinfo(NP[dtype])
    vals = [info.min, info.min + 1, -7, -6, -1, 0, 1, 5, 7, info.max]
    a = np.array([v for v in vals for _ in range(5)], dtype=np.int64)
    b = np.array(([-3, -1, 2, 3, 7] if info.min < 0 else [1, 2, 3, 7, 255]) * len(vals), dtype=np.int64)
    a, b = a.clip(info.min, info.max).astype(NP[dtype]), b.clip(info.min, info.max).astype(NP[dtype])
    ta, tb = Tensor(a, device=device), Tensor(b, device=device)
    with np.errstate(all="ignore"):
        assert_exact(ta // tb, np.floor_divide(a, b), dtype)
        assert_exact(ta % tb, np.remainder(a, b), dtype)
        assert_exact(ta.fmod(tb), np.fmod(a, b), dtype)
    bits = 8 * np.dtype(NP[dtype]).itemsize
    trunc = [abs(x) // abs(y) * (1 if (x < 0) == (y < 0) else -1) for x, y in zip(a.tolist(), b.tolist())]
    trunc = [(v - info.min) % 2**bits + info.min for v in trunc]  # wraps: INT_MIN / -1 is INT_MIN
    assert_exact(ta.div(tb, rounding_mode="trunc"), np.array(trunc, dtype=NP[dtype]), dtype)
    assert_ulp(ta.div(tb).numpy(), a.astype(np.float64) / b.astype(np.float64), 0.5)  # true division: float32


@pytest.mark.parametrize("device", ["CPU", "PYTHON"])
def test_integer_division_by_zero_is_zero(device: str):
    """Integer // 0, % 0, fmod(., 0) and trunc division by 0 give 0 (numpy's answer; C would trap)."""
    needs_dtype(device, dtypes.int64)
    a = Tensor([7, -7, 0, -(2**31)], device=device)
    z = Tensor([0, 0, 0, 0], device=device)
    for out in (a // z, a % z, a.fmod(z), a.div(z, rounding_mode="trunc"), a // 0, 7 // z, a % 0):
        assert_exact(out, [0, 0, 0, 0], dtypes.int32)
    assert_exact(Tensor([-(2**63)], dtype="int64", device=device) // -1, [-(2**63)], dtypes.int64)
    assert_exact(Tensor([-(2**63)], dtype="int64", device=device) % -1, [0], dtypes.int64)
    assert_exact(Tensor([-(2**31)], device=device) // -1, [-(2**31)], dtypes.int32)


def test_integer_division_by_zero_does_not_crash_the_process():
    """A SIGFPE would take the interpreter down: run the divisions in a child process and check it survives."""
    renderer = getattr(Device[Device.DEFAULT], "renderer", None)
    if dtypes.int64 not in getattr(renderer, "supported_dtypes", lambda: {dtypes.int64})():
        pytest.skip(f"the {Device.DEFAULT} device has no int64 (the child process divides int64 tensors)")
    code = (
        "from zeptograd import Tensor\n"
        "a = Tensor([5, -5, -2**31]); z = Tensor([0, 0, -1])\n"
        "b = Tensor([-2**63, 3], dtype='int64'); m = Tensor([-1, 0], dtype='int64')\n"
        "print((a // z).tolist(), (a % z).tolist(), a.fmod(z).tolist(), (b // m).tolist(), (b % m).tolist())\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[0, 0, -2147483648] [0, 0, 0] [0, 0, 0] [-9223372036854775808, 0] [0, 0]"


@pytest.mark.parametrize("device", ["CPU", "PYTHON"])
@pytest.mark.parametrize("dtype", [dtypes.float32, dtypes.float16, dtypes.float64])
def test_true_division_is_correctly_rounded(dtype: DType, device: str):
    """`/` is IEEE division (the FDIV op), not x * (1/y): -6/7 and friends round once, in every float dtype."""
    needs_dtype(device, dtype)
    rng = np.random.default_rng(7)
    n = 64 if device == "PYTHON" else 4096
    np_dt = np.float64 if dtype is dtypes.float64 else NP[dtype]
    a = np.concatenate([[-6.0, 1.0, 0.0, -0.0, np.inf, 1.0], rng.standard_normal(n - 6)]).astype(np_dt)
    b = np.concatenate([[7.0, 3.0, 0.0, 5.0, 2.0, -0.0], rng.standard_normal(n - 6)]).astype(np_dt)
    with np.errstate(all="ignore"):
        want = a / b
    got = (Tensor(a, device=device) / Tensor(b, device=device)).numpy()
    assert got.dtype == np_dt
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got[~np.isnan(want)]), np.signbit(want[~np.isnan(want)]))


def test_division_dtypes_and_reflected():
    t = Tensor([7, -7])
    assert (t // 2).dtype == dtypes.int32 and (t // 2.0).dtype == dtypes.float32
    assert_exact(t // 2.5, np.floor_divide(np.array([7, -7], np.float32), 2.5), dtypes.float32)
    assert_exact(20 // t, [2, -3], dtypes.int32)
    assert_exact(20 % t, [6, -1], dtypes.int32)
    assert_exact(20.5 % Tensor([7.0, -7.0]), np.remainder(20.5, np.array([7.0, -7.0], np.float32)), dtypes.float32)
    h = Tensor(np.array([7.5, -7.5], np.float16))
    assert (h // 2).dtype == dtypes.float16 and (h % 2.0).dtype == dtypes.float16
    assert_exact(t.div(2, rounding_mode=None), [3.5, -3.5], dtypes.float32)
    assert_exact(t.div(2, reverse=True, rounding_mode="floor"), [0, -1], dtypes.int32)


# ---------------------------------------------------------------------------------------------------------------
# pow

POW_B = [-INF, -2.0, -1.0, -0.5, -0.0, 0.0, 0.5, 1.0, 2.0, INF, NAN]
POW_E = [-INF, -3.0, -2.5, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0, 3.0, INF, NAN]


@pytest.mark.parametrize("device", ["CPU", "PYTHON"])
def test_pow_special_values_match_numpy(device: str):
    """Every base x exponent pair of the special values, as C's pow (numpy) defines them (two tensors)."""
    b, e = np.meshgrid(np.array(POW_B, np.float32), np.array(POW_E, np.float32))
    b, e = b.ravel()[:64], e.ravel()[:64]  # the PYTHON device keeps to 64 elements
    if device == "CPU":
        b, e = np.meshgrid(np.array(POW_B, np.float32), np.array(POW_E, np.float32))
    with np.errstate(all="ignore"):
        want = np.power(b.astype(np.float64), e.astype(np.float64))
    assert_exact(Tensor(b, device=device) ** Tensor(e, device=device), want, dtypes.float32)


def _pow_inputs() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(9)
    b = np.concatenate([np.exp(rng.uniform(-40, 40, 2000)), -rng.integers(1, 30, 100)]).astype(np.float32)
    e = np.concatenate([rng.uniform(-3, 3, 2000), rng.integers(-20, 20, 100)]).astype(np.float32)
    return b, e


def test_pow_accuracy_float32():
    b, e = _pow_inputs()
    with np.errstate(all="ignore"):
        want = np.power(b.astype(np.float64), e.astype(np.float64))
    assert_ulp((Tensor(b) ** Tensor(e)).numpy(), want, pow_ulp(Tensor(b), want))


def test_pow_accuracy_float16():
    needs_dtype(None, dtypes.float16)
    b, e = _pow_inputs()
    with np.errstate(over="ignore"):
        b16, e16 = b[:500].astype(np.float16), (e[:500] / 2).astype(np.float16)
    with np.errstate(all="ignore"):
        want = np.power(b16.astype(np.float64), e16.astype(np.float64))
    out = Tensor(b16) ** Tensor(e16)
    assert out.dtype == dtypes.float16
    assert_ulp(out.numpy(), want, 1)


def test_pow_scalar_exponents():
    x = np.array([-3.0, -0.5, -0.0, 0.0, 0.5, 2.0, INF, -INF, NAN], np.float32)
    t = Tensor(x)
    for p in (0, 1, 2, 3, -1, -2, 0.5, 1.5, -0.5, 2.0, 10, -3, 0.0):
        with np.errstate(all="ignore"):
            want = np.power(x, np.float32(p)) if p != 0.5 else np.sqrt(x)
        assert_ulp((t**p).numpy(), want.astype(np.float64), pow_ulp(t, want), zero_sign=True)
    with np.errstate(all="ignore"):
        want = np.power(2.0, x.astype(np.float64))
        assert_ulp((2.0 ** Tensor(x)).numpy(), want, pow_ulp(t, want))
        want = np.power(np.abs(x).astype(np.float64), 0.25)
        assert_ulp((Tensor(x).abs() ** 0.25).numpy(), want, pow_ulp(t, want))


@pytest.mark.parametrize("device", [pytest.param("CPU", marks=pytest.mark.no_roundtrip), "PYTHON"])
def test_integer_pow_is_exact_and_wraps(device: str):
    needs_dtype(device, dtypes.int8)
    b = np.array([-3, -2, -1, 0, 1, 2, 3, 7, 10, 12], np.int32)
    e = np.array([0, 1, 2, 3, 5, 31, 30, 11, 9, 17], np.int32)
    t = Tensor(b, device=device)
    with np.errstate(all="ignore"):
        assert_exact(t ** Tensor(e, device=device), np.power(b, e), dtypes.int32)
        assert_exact(t**3, np.power(b, 3), dtypes.int32)
        assert_exact(t**0, np.ones(10, np.int32), dtypes.int32)
        assert_exact(2 ** Tensor(e, device=device), np.power(np.int32(2), e), dtypes.int32)
    # negative exponents: 1/b**|e| truncated (PyTorch's integer pow)
    neg = Tensor([2, -1, -1, 1, 0, 5], device=device) ** Tensor([-1, -3, -2, -5, -1, 0], device=device)
    assert_exact(neg, [0, -1, 1, 1, 0, 1], dtypes.int32)
    assert_exact(Tensor([3, 4], dtype="int8", device=device) ** 5, np.power(np.array([3, 4], np.int8), 5), dtypes.int8)


def test_pow_dtypes():
    assert (Tensor([2, 3]) ** 2).dtype == dtypes.int32
    assert_exact(Tensor([4, 9]) ** 0.5, [2.0, 3.0], dtypes.float32)
    assert_exact(Tensor([2, 3]) ** 2.0, [4.0, 9.0], dtypes.float32)
    assert (Tensor(np.array([2], np.float16)) ** 3.5).dtype == dtypes.float16
    assert_exact(Tensor([True, False]) ** 2, [1, 0], dtypes.int32)
    assert_exact(Tensor([1, 2]).pow(Tensor([3.0, 0.5])), [1.0, math.sqrt(2)], dtypes.float32)


# ---------------------------------------------------------------------------------------------------------------
# activations (PyTorch is the reference: torch.nn.functional in float64 on the same values)

ACT_X = _mix(rand(40, -30, 30, seed=10), rand(20, -3, 3, seed=11), [400, -400, 88.0, -88.0, 1e-30, -1e-30, 0.0, -0.0])
ACT_X = _mix(ACT_X, [1e-3, -1e-3, 6.0, -6.0, 3.0, -3.0, 25.0, -25.0, INF, -INF, NAN])


def _activations(torch: Any) -> dict[str, tuple[Callable[[Tensor], Tensor], Callable[[Any], Any]]]:
    F = torch.nn.functional
    return {
        "relu": (lambda t: t.relu(), F.relu),
        "relu6": (lambda t: t.relu6(), F.relu6),
        "leaky_relu": (lambda t: t.leaky_relu(), F.leaky_relu),
        "leaky_relu_0.2": (lambda t: t.leaky_relu(neg_slope=0.2), lambda x: F.leaky_relu(x, 0.2)),
        "elu": (lambda t: t.elu(), F.elu),
        "elu_0.5": (lambda t: t.elu(alpha=0.5), lambda x: F.elu(x, 0.5)),
        "celu": (lambda t: t.celu(), F.celu),
        "celu_2": (lambda t: t.celu(alpha=2.0), lambda x: F.celu(x, 2.0)),
        "selu": (lambda t: t.selu(), F.selu),
        # torch's own gelu formulas cancel (1 + tanh(u) near -1) even in float64: the same functions, written
        # stably (x * sigmoid(2u) is 0.5 * x * (1 + tanh(u)); 0.5 * x * erfc(-x/sqrt 2) is 0.5 * x * (1 + erf))
        "gelu": (lambda t: t.gelu(), lambda x: x * torch.sigmoid(2 * math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))),
        "gelu_erf": (lambda t: t.gelu(approximate="none"), lambda x: 0.5 * x * torch.special.erfc(-x / math.sqrt(2))),
        "quick_gelu": (lambda t: t.quick_gelu(), lambda x: x * torch.sigmoid(1.702 * x)),
        "silu": (lambda t: t.silu(), F.silu),
        "swish": (lambda t: t.swish(), F.silu),
        "mish": (lambda t: t.mish(), F.mish),
        "sigmoid": (lambda t: t.sigmoid(), torch.sigmoid),
        "logsigmoid": (lambda t: t.logsigmoid(), F.logsigmoid),
        "hardsigmoid": (lambda t: t.hardsigmoid(), F.hardsigmoid),
        "hardswish": (lambda t: t.hardswish(), F.hardswish),
        "hardtanh": (lambda t: t.hardtanh(), F.hardtanh),
        "hardtanh_2": (lambda t: t.hardtanh(min_val=-2, max_val=3), lambda x: F.hardtanh(x, -2, 3)),
        "softplus": (lambda t: t.softplus(), F.softplus),
        "softplus_b2": (lambda t: t.softplus(beta=2.0), lambda x: F.softplus(x, beta=2.0)),
        "softsign": (lambda t: t.softsign(), F.softsign),
        "tanh": (lambda t: t.tanh(), torch.tanh),
        "logaddexp_1": (lambda t: t.logaddexp(1.0), lambda x: torch.logaddexp(x, torch.ones_like(x))),
        "erf": (lambda t: t.erf(), torch.erf),
    }


ACT_NAMES = [
    "relu relu6 leaky_relu leaky_relu_0.2 elu elu_0.5 celu celu_2 selu gelu gelu_erf quick_gelu silu swish mish",
    "sigmoid logsigmoid hardsigmoid hardswish hardtanh hardtanh_2 softplus softplus_b2 softsign tanh logaddexp_1 erf",
]
ACT_NAMES = " ".join(ACT_NAMES).split()


def _check_activation(name: str, dtype: DType, device: str, x: np.ndarray) -> None:
    torch = pytest.importorskip("torch")
    t_fn, ref_fn = _activations(torch)[name]
    xs = x.astype(NP[dtype])
    ref = ref_fn(torch.from_numpy(xs.astype(np.float64))).numpy()
    out = t_fn(Tensor(xs, device=device))
    assert out.dtype == dtype
    got = out.numpy()
    # the values torch finds finite are finite here too (no overflow to inf or nan inside the formula)
    with np.errstate(over="ignore"):
        finite = np.isfinite(ref.astype(NP[dtype]))
    assert np.isfinite(got[finite]).all(), f"{name}: non-finite result at {xs[finite][~np.isfinite(got[finite])]}"
    # formulas like gelu's amplify their argument's rounding: a relative tolerance, not a few ulp
    if dtype is dtypes.float16:
        assert_ulp(got, ref, 1.5, 1e-7)
    else:
        with np.errstate(all="ignore"):
            want = ref.astype(np.float32)
        # gelu's exp(2u) and quick_gelu's exp(1.702x) amplify the rounding of their argument by up to ~100
        rtol = 3e-5 if name in ("gelu", "gelu_erf", "quick_gelu") else 2e-6
        np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-37, equal_nan=True, err_msg=name)


@pytest.mark.no_roundtrip  # test_math_on_python_device / test_activations_on_python_device round-trip these graphs
@pytest.mark.parametrize("name", ACT_NAMES)
def test_activations_match_torch(name: str):
    _check_activation(name, dtypes.float32, "CPU", ACT_X)


@pytest.mark.no_roundtrip  # test_math_on_python_device / test_activations_on_python_device round-trip these graphs
@pytest.mark.parametrize("name", ACT_NAMES)
def test_activations_float16(name: str):
    _check_activation(name, dtypes.float16, "CPU", ACT_X)


@pytest.mark.parametrize("name", ACT_NAMES)
def test_activations_on_python_device(name: str):
    _check_activation(name, dtypes.float32, "PYTHON", ACT_X[::2])


def test_stable_activations_at_400():
    x = Tensor(np.array([400.0, -400.0, 1e4, -1e4], np.float32))
    assert x.sigmoid().tolist() == [1.0, 0.0, 1.0, 0.0]
    assert x.softplus().tolist() == [400.0, 0.0, 1e4, 0.0]
    assert x.logsigmoid().tolist() == [0.0, -400.0, 0.0, -1e4]
    assert x.tanh().tolist() == [1.0, -1.0, 1.0, -1.0]
    assert x.silu().tolist() == [400.0, -0.0, 1e4, -0.0]
    assert x.elu().tolist() == [400.0, -1.0, 1e4, -1.0]
    want = np.array([400.0 + math.log(2), -400.0 + math.log(2), 1e4 + math.log(2), -1e4 + math.log(2)], np.float32)
    assert x.logaddexp(x).tolist() == want.tolist()
    assert Tensor([INF, -INF]).logaddexp(Tensor([INF, -INF])).tolist() == [INF, -INF]
    assert Tensor([INF, -INF]).logaddexp(Tensor([1.0, 1.0])).tolist() == [INF, 1.0]


def test_activations_keep_integer_relus_integer():
    assert_exact(Tensor([-3, 2, 9]).relu(), [0, 2, 9], dtypes.int32)
    assert_exact(Tensor([-3, 2, 9]).relu6(), [0, 2, 6], dtypes.int32)
    out = Tensor([-3, 2]).sigmoid()
    assert out.dtype == dtypes.float32
    assert_ulp(out.numpy(), 1 / (1 + np.exp(np.array([3.0, -2.0]))), 2)


# ---------------------------------------------------------------------------------------------------------------
# bitwise ops

BITWISE: dict[str, tuple[Callable[[Any, Any], Any], Callable[[Any, Any], Any]]] = {
    "&": (operator.and_, np.bitwise_and),
    "|": (operator.or_, np.bitwise_or),
    "^": (operator.xor, np.bitwise_xor),
    "bitwise_and": (lambda a, b: a.bitwise_and(b), np.bitwise_and),
    "bitwise_or": (lambda a, b: a.bitwise_or(b), np.bitwise_or),
    "bitwise_xor": (lambda a, b: a.bitwise_xor(b), np.bitwise_xor),
}


@pytest.mark.parametrize("device", ["CPU", "PYTHON"])
@pytest.mark.parametrize("dtype", [dtypes.int32, dtypes.uint8, dtypes.int8, dtypes.bool])
@pytest.mark.parametrize("op", list(BITWISE))
def test_bitwise_binary(op: str, dtype: DType, device: str):
    needs_dtype(device, dtype)
    rng = np.random.default_rng(12)
    if dtype is dtypes.bool:
        a, b = rng.random((3, 4)) < 0.5, rng.random((1, 4)) < 0.5
    else:
        info = np.iinfo(NP[dtype])
        a = rng.integers(info.min, info.max, (3, 4), endpoint=True).astype(NP[dtype])
        b = rng.integers(info.min, info.max, (1, 4), endpoint=True).astype(NP[dtype])
    t_fn, np_fn = BITWISE[op]
    assert_exact(t_fn(Tensor(a, device=device), Tensor(b, device=device)), np_fn(a, b), dtype)


def test_bitwise_reflected_and_scalars():
    a = np.array([12, -7, 0, 255], np.int32)
    t = Tensor(a)
    assert_exact(5 & t, 5 & a, dtypes.int32)
    assert_exact(5 | t, 5 | a, dtypes.int32)
    assert_exact(5 ^ t, 5 ^ a, dtypes.int32)
    assert_exact(t & 5, a & 5, dtypes.int32)
    assert_exact(True & Tensor([True, False]), [True, False], dtypes.bool)
    assert_exact(Tensor([True, False]) ^ True, [False, True], dtypes.bool)
    assert_exact(t.bitwise_and(5, reverse=True), 5 & a, dtypes.int32)


@pytest.mark.parametrize("device", ["CPU", "PYTHON"])
def test_bitwise_not(device: str):
    needs_dtype(device, dtypes.uint8, dtypes.int8, dtypes.int64)
    for dtype in (dtypes.int32, dtypes.uint8, dtypes.int8, dtypes.int64):
        info = np.iinfo(NP[dtype])
        a = np.array([info.min, -1 if info.min < 0 else 1, 0, 5, info.max], NP[dtype])
        assert_exact(~Tensor(a, device=device), np.invert(a), dtype)
        assert_exact(Tensor(a, device=device).bitwise_not(), np.invert(a), dtype)
    assert_exact(~Tensor([True, False], device=device), [False, True], dtypes.bool)


@pytest.mark.parametrize("device", ["CPU", "PYTHON"])
@pytest.mark.parametrize("dtype", [dtypes.int32, dtypes.int8, dtypes.uint8, dtypes.int64])
def test_shifts(dtype: DType, device: str):
    needs_dtype(device, dtype)
    info = np.iinfo(NP[dtype])
    width = 8 * np.dtype(NP[dtype]).itemsize
    amounts = [0, 1, width - 1, width, width + 3] + ([-1] if info.min < 0 else [2])
    a = np.array([1, 3, -5 if info.min < 0 else 5, info.max, info.min, 0] * len(amounts), NP[dtype])
    s = np.array([v for v in amounts for _ in range(6)], NP[dtype])
    ta, ts = Tensor(a, device=device), Tensor(s, device=device)
    ok = (s >= 0) & (s < width)
    with np.errstate(all="ignore"):
        left = np.where(ok, np.left_shift(a, np.where(ok, s, 0)), 0).astype(NP[dtype])
        sign = np.where(a < 0, -1, 0) if info.min < 0 else np.zeros_like(a)
        right = np.where(ok, np.right_shift(a, np.where(ok, s, 0)), sign).astype(NP[dtype])
    assert_exact(ta << ts, left, dtype)
    assert_exact(ta.lshift(ts), left, dtype)
    assert_exact(ta >> ts, right, dtype)
    assert_exact(ta.rshift(ts), right, dtype)
    assert_exact(Tensor(a[:6], device=device) << 2, np.left_shift(a[:6], NP[dtype](2)), dtype)


def test_shift_reflected_and_scalar_amounts():
    assert_exact(1 << Tensor([0, 3, 31, 32]), [1, 8, -(2**31), 0], dtypes.int32)
    assert_exact(-64 >> Tensor([0, 3, 40]), [-64, -8, -1], dtypes.int32)
    assert_exact(Tensor([-8, 8]) >> 1, [-4, 4], dtypes.int32)
    assert_exact(Tensor([1], dtype="uint32") << 31, [2**31], dtypes.uint32)
    assert_exact(Tensor([True, False]) << 2, [4, 0], dtypes.int32)  # bool and a Python int: int32


# ---------------------------------------------------------------------------------------------------------------
# comparisons, where, maximum/minimum, clamp, lerp, copysign

CMP: dict[str, tuple[Callable[[Any, Any], Any], Callable[[Any, Any], Any]]] = {
    "<": (operator.lt, np.less),
    ">": (operator.gt, np.greater),
    "<=": (operator.le, np.less_equal),
    ">=": (operator.ge, np.greater_equal),
    "==": (operator.eq, np.equal),
    "!=": (operator.ne, np.not_equal),
    "lt": (lambda a, b: a.lt(b), np.less),
    "gt": (lambda a, b: a.gt(b), np.greater),
    "le": (lambda a, b: a.le(b), np.less_equal),
    "ge": (lambda a, b: a.ge(b), np.greater_equal),
    "eq": (lambda a, b: a.eq(b), np.equal),
    "ne": (lambda a, b: a.ne(b), np.not_equal),
}


@pytest.mark.parametrize("device", ["CPU", "PYTHON"])
@pytest.mark.parametrize("op", list(CMP))
def test_comparisons_broadcast_and_promote(op: str, device: str):
    needs_dtype(device, dtypes.float16)
    t_fn, np_fn = CMP[op]
    f = np.array([[NAN, -0.0, 1.5, -INF], [INF, 0.0, 2.0, 3.0]], np.float32)
    i = np.array([[0], [2]], np.int32)
    h = np.array([1.5, 0.0, 2.0, NAN], np.float16)
    tf, ti, th = Tensor(f, device=device), Tensor(i, device=device), Tensor(h, device=device)
    assert_exact(t_fn(tf, ti), np_fn(f, i), dtypes.bool)  # int32 and float32: float32
    assert_exact(t_fn(ti, tf), np_fn(i, f), dtypes.bool)
    assert_exact(t_fn(th, tf), np_fn(h.astype(np.float32), f), dtypes.bool)  # float16 and float32
    assert_exact(t_fn(ti, 1.5), np_fn(i, 1.5), dtypes.bool)  # a float scalar promotes the int tensor
    assert_exact(t_fn(tf, 0), np_fn(f, 0), dtypes.bool)
    assert_exact(t_fn(Tensor([True, False], device=device), True), np_fn(np.array([True, False]), True), dtypes.bool)


def test_reflected_comparisons():
    t = Tensor([1, 2, 3])
    assert_exact(2 < t, [False, False, True], dtypes.bool)
    assert_exact(2 >= t, [True, True, False], dtypes.bool)
    assert_exact(2 == t, [False, True, False], dtypes.bool)


@pytest.mark.parametrize("n", [3, 5, 13, 37, 1000])
def test_where_float16_against_a_constant(n: int):
    # a float16 picked by a condition or zero is a masked half-precision store on CPUs with AVX512-FP16
    needs_dtype(None, dtypes.float16)
    x = np.random.default_rng(n).standard_normal(n).astype(np.float16)
    out = (Tensor(x) > 0.5).where(Tensor(x), 0.0).numpy()
    np.testing.assert_array_equal(out, np.where(x > 0.5, x, np.float16(0)))


def test_where_scalar_and_tensor_mixes():
    needs_dtype(None, dtypes.float16)
    c = Tensor([True, False, True])
    f16 = Tensor(np.array([1.5, 2.5, 3.5], np.float16))
    i32 = Tensor([1, 2, 3])
    f32 = Tensor([0.25, 0.5, 0.75])
    cases = [
        (c.where(1, 2), [1, 2, 1], dtypes.int32),
        (c.where(1, 2.5), [1.0, 2.5, 1.0], dtypes.float32),
        (c.where(True, False), [True, False, True], dtypes.bool),
        (c.where(f16, 2.0), [1.5, 2.0, 3.5], dtypes.float16),
        (c.where(2.0, f16), [2.0, 2.5, 2.0], dtypes.float16),
        (c.where(i32, 2.5), [1.0, 2.5, 3.0], dtypes.float32),
        (c.where(i32, 7), [1, 7, 3], dtypes.int32),
        (c.where(f16, f32), [1.5, 0.5, 3.5], dtypes.float32),
        (c.where(i32, f16), [1.0, 2.5, 3.0], dtypes.float16),
        (Tensor([0, 3, -1]).where(1.0, 0.0), [0.0, 1.0, 1.0], dtypes.float32),  # nonzero is true
        (Tensor([0.0, NAN, -0.0]).where(1, 0), [0, 1, 0], dtypes.int32),
    ]
    for out, want, dtype in cases:
        assert_exact(out, want, dtype)
    assert_exact(c.where(Tensor(5.0), f16), [5.0, 2.5, 5.0], dtypes.float16)  # a 0-d tensor is weak too
    out = Tensor([[True], [False]]).where(Tensor([1, 2, 3]), Tensor(0))
    assert_exact(out, [[1, 2, 3], [0, 0, 0]], dtypes.int32)


def test_maximum_minimum():
    a = np.array([NAN, 1.0, -0.0, INF, -3.0], np.float32)
    b = np.array([1.0, NAN, 2.0, 5.0, -INF], np.float32)
    assert_exact(Tensor(a).maximum(Tensor(b)), np.maximum(a, b), dtypes.float32)
    assert_exact(Tensor(a).minimum(Tensor(b)), np.minimum(a, b), dtypes.float32)
    assert_exact(Tensor([1, 5]).maximum(2.5), [2.5, 5.0], dtypes.float32)
    assert_exact(Tensor([-(2**31), 0], dtype="int32").minimum(3), [-(2**31), 0], dtypes.int32)


def test_maximum_minimum_uint8():
    needs_dtype(None, dtypes.uint8)
    assert_exact(Tensor([0, 255], dtype="uint8").minimum(Tensor([1, 7], dtype="uint8")), [0, 7], dtypes.uint8)


def test_clamp_and_clip():
    x = np.array([-2.0, -0.5, 0.5, 3.0, NAN, INF, -INF], np.float32)
    t = Tensor(x)
    assert_exact(t.clamp(-1, 1), np.clip(x, -1, 1), dtypes.float32)
    assert_exact(t.clip(-1, 1), np.clip(x, -1, 1), dtypes.float32)
    assert_exact(t.clamp(min_=0), np.maximum(x, 0), dtypes.float32)
    assert_exact(t.clamp(max_=0), np.minimum(x, 0), dtypes.float32)
    assert_exact(t.clamp(min=0, max=1), np.clip(x, 0, 1), dtypes.float32)  # PyTorch's keywords
    assert_exact(t.clamp(None, 2), np.minimum(x, 2), dtypes.float32)
    assert_exact(t.clamp(2, 1), np.where(np.isnan(x), NAN, 1.0), dtypes.float32)  # min > max: all max (not NaN)
    assert_exact(Tensor([1, 5, 9]).clamp(2, 6), [2, 5, 6], dtypes.int32)
    assert_exact(Tensor([1, 5, 9]).clamp(2.5), [2.5, 5, 9], dtypes.float32)  # a float bound promotes, as in torch
    lo, hi = Tensor([[0.0], [1.0]]), Tensor([0.5, 2.0, 2.5, 2.5, 2.5, 2.5, 2.5])
    want = np.minimum(np.maximum(x, [[0.0], [1.0]]), [0.5, 2.0, 2.5, 2.5, 2.5, 2.5, 2.5])
    assert_exact(t.clamp(lo, hi), np.where(np.isnan(x), NAN, want), dtypes.float32)


def test_clamp_float16():
    needs_dtype(None, dtypes.float16)
    assert_exact(Tensor(np.array([1, 5], np.float16)).clamp(2.0), [2.0, 5.0], dtypes.float16)


def test_lerp_matches_torch():
    torch = pytest.importorskip("torch")
    s = rand(20, -5, 5, seed=13)
    e = rand(20, -5, 5, seed=14)
    w = _mix(rand(16, -1, 2, seed=15), [0.0, 1.0, 0.5, -0.5])
    want = torch.lerp(torch.from_numpy(s), torch.from_numpy(e), torch.from_numpy(w)).numpy()
    got = Tensor(s).lerp(Tensor(e), Tensor(w)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    assert got[17] == e[17]  # weight 1 is exactly end
    want = torch.lerp(torch.from_numpy(s), torch.from_numpy(e), 0.25).numpy()
    np.testing.assert_allclose(Tensor(s).lerp(Tensor(e), 0.25).numpy(), want, rtol=1e-6, atol=1e-6)
    assert_exact(Tensor([1, 2]).lerp(Tensor([3, 6]), 0.5), [2.0, 4.0], dtypes.float32)


def test_copysign():
    a = np.array([1.0, 2.0, -3.0, NAN, 0.0, INF, 5.0], np.float32)
    b = np.array([-0.0, 0.0, 1.0, -1.0, -2.0, -1.0, -NAN], np.float32)
    assert_exact(Tensor(a).copysign(Tensor(b)), np.copysign(a, b), dtypes.float32)
    assert_exact(Tensor([1, -2]).copysign(-1), [-1.0, -2.0], dtypes.float32)  # integers promote to float32


def test_copysign_float16():
    needs_dtype(None, dtypes.float16)
    h = np.array([1.5, -2.0], np.float16)
    assert_exact(Tensor(h).copysign(Tensor(np.array([-1.0, 3.0], np.float16))), [-1.5, 2.0], dtypes.float16)


# ---------------------------------------------------------------------------------------------------------------
# casts


def test_cast_shorthands():
    needs_dtype(None, dtypes.int64, dtypes.int16, dtypes.float16, dtypes.float64, dtypes.uint8)
    t = Tensor([1.7, -1.7, 0.0])
    assert_exact(t.int(), [1, -1, 0], dtypes.int32)
    assert_exact(t.long(), [1, -1, 0], dtypes.int64)
    assert_exact(t.short(), [1, -1, 0], dtypes.int16)
    assert_exact(t.bool(), [True, True, False], dtypes.bool)
    assert_exact(t.half(), np.array([1.7, -1.7, 0.0], np.float16), dtypes.float16)
    assert_exact(t.double(), np.array([1.7, -1.7, 0.0], np.float32).astype(np.float64), dtypes.float64)
    assert_exact(Tensor([1, 2]).float(), [1.0, 2.0], dtypes.float32)
    assert_exact(Tensor([300, 2]).byte(), [44, 2], dtypes.uint8)
    assert_exact(Tensor([1.5]).cast("int32"), [1], dtypes.int32)


@pytest.mark.parametrize("device", ["CPU", "PYTHON"])
def test_bitcast(device: str):
    needs_dtype(device, dtypes.float16, dtypes.int16, dtypes.int64, dtypes.float64)
    f = np.array([1.0, -2.5, 0.0, -0.0, INF, NAN], np.float32)
    t = Tensor(f, device=device)
    assert_exact(t.bitcast(dtypes.int32), f.view(np.int32), dtypes.int32)
    assert_exact(t.bitcast("uint32"), f.view(np.uint32), dtypes.uint32)
    assert_exact(t.bitcast(dtypes.int32).bitcast(dtypes.float32), f, dtypes.float32)
    h = np.array([1.0, -2.5, 65504.0], np.float16)
    assert_exact(Tensor(h, device=device).bitcast(dtypes.int16), h.view(np.int16), dtypes.int16)
    i = np.array([1, -1, 2**40], np.int64)
    assert_exact(Tensor(i, device=device).bitcast(dtypes.float64), i.view(np.float64), dtypes.float64)


# ---------------------------------------------------------------------------------------------------------------
# in-place operators


@pytest.mark.parametrize("device", ["CPU", "PYTHON"])
def test_inplace_operators(device: str):
    a = np.array([7, -7, 12, 5], np.int32)
    for iop, op, operand in (
        (operator.ifloordiv, operator.floordiv, 2),
        (operator.imod, operator.mod, 3),
        (operator.ipow, operator.pow, 2),
        (operator.iand, operator.and_, 6),
        (operator.ior, operator.or_, 1),
        (operator.ixor, operator.xor, 5),
        (operator.ilshift, operator.lshift, 2),
        (operator.irshift, operator.rshift, 1),
        (operator.iadd, operator.add, 1),
        (operator.isub, operator.sub, 1),
        (operator.imul, operator.mul, 3),
    ):
        t = Tensor(a, device=device).realize()
        old = t + 0
        assert iop(t, operand) is t  # in place: the same tensor object, now holding the new values
        assert_exact(t, op(a, NP[dtypes.int32](operand)), dtypes.int32)
        assert_exact(old, a, dtypes.int32)  # a read made before still sees the old ones
    f = Tensor(np.array([7.5, -7.5], np.float32), device=device).realize()
    f //= 2
    f %= 1.5
    assert_exact(f, np.remainder(np.floor_divide(np.array([7.5, -7.5], np.float32), 2), 1.5), dtypes.float32)


def test_inplace_casts_like_torch():
    needs_dtype(None, dtypes.float16)
    h = Tensor(np.array([1.0, 2.0], np.float16)).realize()
    h += Tensor([0.5, 0.25])  # float32 operand: the result goes back to float16
    assert_exact(h, [1.5, 2.25], dtypes.float16)
    i = Tensor([1, 2]).realize()
    i += True
    assert_exact(i, [2, 3], dtypes.int32)
    with pytest.raises(TypeError, match=r"/=.*float32.*int32"):
        i /= 2
    with pytest.raises(TypeError, match=r"\+=.*float32.*int32"):
        i += 0.5


# ---------------------------------------------------------------------------------------------------------------
# laziness and fusion: elementwise ops build graphs, and a chain of them is one kernel


def test_ops_are_lazy_and_fuse_into_one_kernel():
    x = Tensor(rand((4, 5), -3, 3, seed=16)).realize()
    GlobalCounters.reset()
    out = (x.sigmoid() * 2).cos() + (x % 0.3) + x.erf().atan() + x.abs() ** 2.5 + x.gelu() + x.tanh()
    assert GlobalCounters.kernel_count == 0
    out.realize()
    assert GlobalCounters.kernel_count == 1


# ---------------------------------------------------------------------------------------------------------------
# errors: the class, and a message that names the op and the dtype or shapes


@pytest.mark.parametrize(
    ("fn", "pattern"),
    [
        (lambda: Tensor([1.0]) & Tensor([1.0]), r"bitwise_and.*float32"),
        (lambda: Tensor([1.0]) | 1, r"bitwise_or.*float32"),
        (lambda: Tensor([1]) ^ 1.5, r"bitwise_xor.*float32"),
        (lambda: ~Tensor([1.0]), r"bitwise_not.*float32"),
        (lambda: Tensor(np.array([1.0], np.float16)).bitwise_not(), r"bitwise_not.*float16"),
        (lambda: Tensor([1.0]) << 1, r"lshift.*float32"),
        (lambda: Tensor([1]) >> 1.0, r"rshift.*float32"),
        (lambda: Tensor([True]) << Tensor([True]), r"lshift.*bool"),
        (lambda: Tensor([True]) // Tensor([True]), r"div.*bool"),
        (lambda: Tensor([True]) % Tensor([True]), r"mod.*bool"),
        (lambda: Tensor([True]).fmod(Tensor([True])), r"fmod.*bool"),
        (lambda: Tensor([True]) ** Tensor([True]), r"pow.*bool"),
        (lambda: Tensor([1.0]).bitcast(dtypes.bool), r"bitcast.*bool"),
        (lambda: Tensor([1]) + "a", r"add.*str"),
        (lambda: Tensor([1]).where("a", 1), r"where.*str"),
    ],
)
def test_type_errors(fn: Callable[[], Any], pattern: str):
    with pytest.raises(TypeError, match=pattern):
        fn()


@pytest.mark.parametrize(
    ("fn", "pattern"),
    [
        (lambda: Tensor([1, 2, 3], dtype="int16").bitcast(dtypes.int32), r"bitcast.*int16.*int32.*last axis \(3\)"),
        (lambda: Tensor(1.0).bitcast(dtypes.int16), r"bitcast.*float32.*int16.*0-d"),
        (lambda: Tensor([1.0]).div(2, rounding_mode="round"), r"div.*rounding_mode.*'round'"),
        (lambda: Tensor([1.0]).gelu(approximate="fast"), r"gelu.*'fast'"),
        (lambda: Tensor([2]) ** -1, r"pow.*int32 \*\* -1"),
        (lambda: Tensor([1.0, 2.0]) // Tensor([1.0, 2.0, 3.0]), r"div.*\(2,\).*\(3,\)"),
        (lambda: Tensor([1.0, 2.0]) % Tensor([1.0, 2.0, 3.0]), r"mod.*\(2,\).*\(3,\)"),
        (lambda: Tensor([1.0, 2.0]).fmod(Tensor([1.0, 2.0, 3.0])), r"fmod.*\(2,\).*\(3,\)"),
        (lambda: Tensor([1.0, 2.0]) ** Tensor([1.0, 2.0, 3.0]), r"pow.*\(2,\).*\(3,\)"),
        (lambda: Tensor([1, 2]) << Tensor([1, 2, 3]), r"lshift.*\(2,\).*\(3,\)"),
        (lambda: Tensor([1.0, 2.0]).lerp(Tensor([1.0, 2.0, 3.0]), 0.5), r"lerp.*\(2,\).*\(3,\)"),
        (lambda: Tensor([1.0, 2.0]).clamp(Tensor([1.0, 2.0, 3.0])), r"clamp.*\(2,\).*\(3,\)"),
        (lambda: Tensor([1.0, 2.0]).copysign(Tensor([1.0, 2.0, 3.0])), r"copysign.*\(2,\).*\(3,\)"),
        (lambda: Tensor([True, False]).where(Tensor([1, 2, 3]), 0), r"where.*\(2,\).*\(3,\)"),
        (lambda: Tensor([1.0, 2.0]).logaddexp(Tensor([1.0, 2.0, 3.0])), r"logaddexp.*\(2,\).*\(3,\)"),
    ],
)
def test_value_errors(fn: Callable[[], Any], pattern: str):
    with pytest.raises(ValueError, match=pattern):
        fn()


def test_clamp_without_bounds_is_an_error():
    with pytest.raises(RuntimeError, match=r"clamp.*min_.*max_"):
        Tensor([1.0]).clamp()


# *** robustness: bad parameters fail at the public call, naming the op ***


@pytest.mark.parametrize(
    "call, exc, match",
    [
        (lambda x: x.celu(alpha=0), ValueError, r"celu: alpha must not be 0"),
        (lambda x: x.softplus(beta=0), ValueError, r"softplus: beta must not be 0"),
        (lambda x: x.hardtanh(2.0, 1.0), ValueError, r"hardtanh: min_val 2.0 is greater than max_val 1.0"),
        (lambda x: x.elu(alpha=None), TypeError, r"elu: alpha must be a number, got None"),
        (lambda x: x.leaky_relu("a"), TypeError, r"leaky_relu: neg_slope must be a number, got 'a'"),
        (lambda x: x.selu(gamma="a"), TypeError, r"selu: gamma must be a number"),
        (lambda x: x.hardsigmoid(alpha=None), TypeError, r"hardsigmoid: alpha must be a number"),
        (lambda x: x.round("a"), TypeError, r"round: decimals must be an int, got 'a'"),
        (lambda x: x.round(1.5), TypeError, r"round: decimals must be an int, got 1.5"),
        (lambda x: x.cast("bogus"), TypeError, r"cast: unknown dtype name 'bogus'"),
        (lambda x: x.bitcast(None), TypeError, r"bitcast: .*NoneType"),
    ],
)
def test_bad_parameters_name_the_op(call: Callable, exc: type, match: str) -> None:
    with pytest.raises(exc, match=match):
        call(Tensor([[1.0, -2.0, 3.0]]))


# ---------------------------------------------------------------------------------------------------------------
# isclose / allclose, against torch

ISCLOSE_CASES = [
    ({}, np.float32),
    ({"rtol": 0.1}, np.float32),
    ({"atol": 0.5, "rtol": 0.0}, np.float32),
    ({"equal_nan": True}, np.float32),
    ({"atol": 1e-3}, np.float16),
    ({"rtol": 1e-12, "atol": 0.0}, np.float64),
]


@pytest.mark.parametrize("device", ["CPU", "PYTHON"])
@pytest.mark.parametrize("kwargs,np_dtype", ISCLOSE_CASES, ids=repr)
def test_isclose_matches_torch(kwargs: dict, np_dtype: Any, device: str):
    needs_dtype(device, getattr(dtypes, np.dtype(np_dtype).name))
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    a = rng.standard_normal((4, 6)).astype(np_dtype)
    b = a + (rng.standard_normal((4, 6)) * np.logspace(-9, 0, 6)).astype(np_dtype)  # from equal to far apart
    special = np.array([np.inf, -np.inf, np.nan, np.inf, np.nan, 0.0], np_dtype)
    a[0], b[0] = special, np.array([np.inf, np.inf, np.nan, 1.0, 0.0, -0.0], np_dtype)
    got = Tensor(a, device=device).isclose(Tensor(b, device=device), **kwargs)
    want = torch.isclose(torch.tensor(a), torch.tensor(b), **kwargs).numpy()
    assert got.dtype == dtypes.bool
    np.testing.assert_array_equal(got.numpy(), want)
    row = Tensor(a, device=device).isclose(Tensor(b[1], device=device), **kwargs)  # broadcasting
    np.testing.assert_array_equal(row.numpy(), torch.isclose(torch.tensor(a), torch.tensor(b[1]), **kwargs).numpy())
    assert Tensor(a, device=device).allclose(Tensor(b, device=device), **kwargs) == torch.allclose(
        torch.tensor(a), torch.tensor(b), **kwargs
    )


def test_isclose_ints_bools_and_scalars():
    torch = pytest.importorskip("torch")
    i, j = np.array([2**31 - 1, 5, -7, 0], np.int32), np.array([-(2**31), 6, -7, 3], np.int32)
    for kwargs in ({}, {"atol": 1}, {"atol": 2**33}, {"rtol": 0.5}):
        want = torch.isclose(torch.tensor(i), torch.tensor(j), **kwargs).numpy()
        np.testing.assert_array_equal(Tensor(i).isclose(Tensor(j), **kwargs).numpy(), want)
    m, n = np.array([True, False, True]), np.array([True, True, False])
    np.testing.assert_array_equal(Tensor(m).isclose(Tensor(n)).numpy(), torch.isclose(torch.tensor(m), torch.tensor(n)))
    np.testing.assert_array_equal(Tensor([1.0, 2.0, 2.00001]).isclose(2.0).numpy(), [False, True, True])
    assert Tensor([1.0, 2.0]).allclose(Tensor([1.0, 2.0])) is True


def test_isclose_refuses_what_torch_refuses():
    from zeptograd.helpers import ArgumentError

    torch = pytest.importorskip("torch")
    for kwargs in ({"rtol": -1.0}, {"atol": -1e-3}):
        with pytest.raises(RuntimeError):
            torch.isclose(torch.ones(2), torch.ones(2), **kwargs)
        with pytest.raises(ArgumentError, match="isclose"):
            Tensor.ones(2).isclose(Tensor.ones(2), **kwargs)
    with pytest.raises(RuntimeError):
        torch.isclose(torch.ones(2), torch.ones(2, dtype=torch.int32))
    with pytest.raises(ArgumentError, match="same dtype"):
        Tensor.ones(2).isclose(Tensor.ones(2, dtype=dtypes.int32))


BITCAST_DTYPES = ["uint8", "int8", "int16", "float16", "int32", "uint32", "float32", "int64", "uint64", "float64"]


@pytest.mark.parametrize("device", ["CPU", "PYTHON"])
@pytest.mark.parametrize("src", BITCAST_DTYPES)
def test_bitcast_between_sizes_matches_numpy_view(src: str, device: str):
    # the last axis scales (numpy's .view and torch's view(dtype)); random bytes, NaN patterns too
    needs_dtype(device, *(getattr(dtypes, d) for d in BITCAST_DTYPES))
    raw = np.random.default_rng(len(src)).integers(0, 256, (2, 16), dtype=np.uint8)
    a = raw.view(src)
    for dst in BITCAST_DTYPES:
        want = a.view(dst)
        got = Tensor(a, device=device).bitcast(dst)
        assert got.shape == want.shape and got.dtype.name == dst
        assert got.numpy().tobytes() == want.tobytes(), (src, dst)
