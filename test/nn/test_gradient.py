"""Gradients of the Tensor API (zeptograd/gradient.py and the ops' stated derivatives) against torch's autograd.

Each check builds the same function in zeptograd and in torch, takes the gradient of a random-weighted sum of
the output with respect to every float input, and compares values and gradients (float32: rtol 1e-4, atol 1e-5
unless a test says why not). Inputs stay away from kinks and ties unless the test is about them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from zeptograd import GlobalCounters, Tensor, dtypes

torch = pytest.importorskip("torch")
F = torch.nn.functional

# measured: a 2-layer MLP's loss (log_softmax) and its 4 parameter gradients realize in 15 kernels (the two
# forward matmuls, 6 small per-row reductions and elementwise passes, the gradient matmuls and bias sums, and two
# stored values: exp(x - max), read by the forward sum and the backward pass, and the logits' gradient, read by the
# three gradient reductions; see STORE_COST)
MLP_BACKWARD_KERNELS = 15


# ---------------------------------------------------------------------------------------------------------------
# helpers


def rand(*shape: int, lo: float = -2.0, hi: float = 2.0, seed: int = 0, away: float = 0.0) -> np.ndarray:
    """Uniform float32 values in [lo, hi); with `away`, none closer than that to 0 (so no kink of abs, relu...)."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(lo, hi, size=shape)
    if away:
        x = np.where(np.abs(x) < away, np.copysign(away, x) + x, x)
    return x.astype(np.float32)


def distinct(*shape: int, seed: int = 0, scale: float = 0.5) -> np.ndarray:
    """A random permutation of 0..n-1 times `scale`, shifted to straddle 0: no two values tie."""
    n = int(np.prod(shape))
    rng = np.random.default_rng(seed)
    return ((rng.permutation(n) - n / 2) * scale).reshape(shape).astype(np.float32)


def _to_torch(a: np.ndarray) -> Any:
    t = torch.tensor(a)
    if a.dtype.kind == "f":
        t.requires_grad_(True)
    return t


def assert_close(got: np.ndarray, want: Any, rtol: float, atol: float, what: str) -> None:
    want = want.detach().numpy() if isinstance(want, torch.Tensor) else np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    np.testing.assert_allclose(
        got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True, err_msg=what
    )


def check(
    zfn: Callable[..., Tensor],
    tfn: Callable[..., Any],
    *arrays: np.ndarray,
    rtol: float = 1e-4,
    atol: float = 1e-5,
    seed: int = 1,
) -> None:
    """zfn on Tensors of `arrays` and tfn on torch tensors of them give the same value, and the same gradient of
    sum(out * w) (w random) with respect to every float input (an input torch's graph does not use must get
    zeros), each in that input's shape and dtype."""
    zs = [Tensor(a) for a in arrays]
    ts = [_to_torch(a) for a in arrays]
    zout, tout = zfn(*zs), tfn(*ts)
    w = np.random.default_rng(seed).standard_normal(tuple(tout.shape)).astype(np.float32)
    wanted = [i for i, a in enumerate(arrays) if a.dtype.kind == "f"]
    grads = (zout * Tensor(w).cast(zout.dtype)).sum().gradient(*[zs[i] for i in wanted])
    Tensor.realize(zout, *grads)
    tgrads = torch.autograd.grad(
        (tout * torch.tensor(w).to(tout.dtype)).sum(), [ts[i] for i in wanted], allow_unused=True
    )
    assert_close(zout.numpy(), tout, rtol, atol, "value")
    for i, g, tg in zip(wanted, grads, tgrads):
        assert g.shape == zs[i].shape and g.dtype == zs[i].dtype, f"gradient {i}: {g.shape} {g.dtype!r}"
        assert_close(g.numpy(), torch.zeros_like(ts[i]) if tg is None else tg, rtol, atol, f"gradient of input {i}")


# ---------------------------------------------------------------------------------------------------------------
# elementwise: unary ops (one shape for all, so each op compiles once)

X = rand(3, 5, away=0.1)  # in [-2, 2), |x| >= 0.1
POS = rand(3, 5, lo=0.2, hi=3.0)  # positive
UNIT = rand(3, 5, lo=-0.9, hi=0.9, away=0.05)  # inside (-1, 1)
ABOVE1 = rand(3, 5, lo=1.2, hi=4.0)

UNARY: list[tuple[str, Callable[[Tensor], Tensor], Callable[[Any], Any], np.ndarray]] = [
    ("neg", lambda x: -x, lambda x: -x, X),
    ("abs", lambda x: x.abs(), torch.abs, X),
    ("sign", lambda x: x.sign(), torch.sign, X),
    ("floor", lambda x: x.floor(), torch.floor, X),
    ("ceil", lambda x: x.ceil(), torch.ceil, X),
    ("round", lambda x: x.round(), torch.round, X),
    ("trunc", lambda x: x.trunc(), torch.trunc, X),
    ("sqrt", lambda x: x.sqrt(), torch.sqrt, POS),
    ("rsqrt", lambda x: x.rsqrt(), torch.rsqrt, POS),
    ("exp", lambda x: x.exp(), torch.exp, X),
    ("exp2", lambda x: x.exp2(), torch.exp2, X),
    ("expm1", lambda x: x.expm1(), torch.expm1, X),
    ("log", lambda x: x.log(), torch.log, POS),
    ("log2", lambda x: x.log2(), torch.log2, POS),
    ("log10", lambda x: x.log10(), torch.log10, POS),
    ("log1p", lambda x: x.log1p(), torch.log1p, UNIT),
    ("sin", lambda x: x.sin(), torch.sin, X),
    ("cos", lambda x: x.cos(), torch.cos, X),
    ("tan", lambda x: x.tan(), torch.tan, UNIT),
    ("asin", lambda x: x.asin(), torch.asin, UNIT),
    ("acos", lambda x: x.acos(), torch.acos, UNIT),
    ("atan", lambda x: x.atan(), torch.atan, X * 2),
    ("sinh", lambda x: x.sinh(), torch.sinh, X),
    ("cosh", lambda x: x.cosh(), torch.cosh, X),
    ("tanh", lambda x: x.tanh(), torch.tanh, X),
    ("asinh", lambda x: x.asinh(), torch.asinh, X * 2),
    ("acosh", lambda x: x.acosh(), torch.acosh, ABOVE1),
    ("atanh", lambda x: x.atanh(), torch.atanh, UNIT),
    ("erf", lambda x: x.erf(), torch.erf, X),
    ("erfc", lambda x: x.erfc(), torch.erfc, X),
    ("sigmoid", lambda x: x.sigmoid(), torch.sigmoid, X * 3),
    ("logsigmoid", lambda x: x.logsigmoid(), F.logsigmoid, X * 3),
    ("softplus", lambda x: x.softplus(), F.softplus, X * 3),
    ("softplus_beta", lambda x: x.softplus(beta=2.0, threshold=3.0), lambda x: F.softplus(x, 2.0, 3.0), X * 2),
    ("relu", lambda x: x.relu(), torch.relu, X),
    ("relu6", lambda x: x.relu6(), F.relu6, X * 4),
    ("leaky_relu", lambda x: x.leaky_relu(0.2), lambda x: F.leaky_relu(x, 0.2), X),
    ("elu", lambda x: x.elu(0.7), lambda x: F.elu(x, 0.7), X),
    ("celu", lambda x: x.celu(1.5), lambda x: F.celu(x, 1.5), X),
    ("selu", lambda x: x.selu(), torch.selu, X),
    ("gelu_tanh", lambda x: x.gelu(), lambda x: F.gelu(x, approximate="tanh"), X * 2),
    ("gelu_erf", lambda x: x.gelu(approximate="none"), lambda x: F.gelu(x, approximate="none"), X * 2),
    ("quick_gelu", lambda x: x.quick_gelu(), lambda x: x * torch.sigmoid(1.702 * x), X * 2),
    ("silu", lambda x: x.silu(), F.silu, X * 2),
    ("swish", lambda x: x.swish(), F.silu, X * 2),
    ("mish", lambda x: x.mish(), F.mish, X * 2),
    ("hardsigmoid", lambda x: x.hardsigmoid(), F.hardsigmoid, X * 2.5),
    ("hardswish", lambda x: x.hardswish(), F.hardswish, X * 2.5),
    ("hardtanh", lambda x: x.hardtanh(), F.hardtanh, X),
    ("hardtanh_range", lambda x: x.hardtanh(-0.5, 1.5), lambda x: F.hardtanh(x, -0.5, 1.5), X),
    ("softsign", lambda x: x.softsign(), F.softsign, X),
    ("square", lambda x: x.square(), torch.square, X),
    ("reciprocal", lambda x: x.reciprocal(), torch.reciprocal, X),
]


@pytest.mark.parametrize("name,zfn,tfn,x", UNARY, ids=[u[0] for u in UNARY])
def test_unary(name: str, zfn: Callable, tfn: Callable, x: np.ndarray) -> None:
    # the kinks of hardsigmoid (+-3), hardswish (+-3), hardtanh (+-1, -0.5, 1.5), relu6 (0, 6) are not hit
    check(zfn, tfn, x)


def test_unary_at_kinks() -> None:
    # torch's choices at the kinks: relu'(0) = 0, abs'(0) = 0, leaky_relu'(0) = slope; the hardtanh family
    # (hardtanh, relu6, hardsigmoid, hardswish) has gradient 0 at its bounds, clamp 1; steps have 0 everywhere
    x = np.array([-3.0, -1.0, 0.0, 0.0, 1.0, 3.0, 6.0, -0.5, 1.5], dtype=np.float32)
    check(lambda t: t.relu(), torch.relu, x)
    check(lambda t: t.abs(), torch.abs, x)
    check(lambda t: t.leaky_relu(0.1), lambda t: F.leaky_relu(t, 0.1), x)
    check(lambda t: t.hardtanh(), F.hardtanh, x)
    check(lambda t: t.hardtanh(-0.5, 1.5), lambda t: F.hardtanh(t, -0.5, 1.5), x)
    check(lambda t: t.relu6(), F.relu6, x)
    check(lambda t: t.hardsigmoid(), F.hardsigmoid, x)
    check(lambda t: t.hardswish(), F.hardswish, x)
    check(lambda t: t.clamp(-1.0, 1.0), lambda t: t.clamp(-1.0, 1.0), x)
    check(lambda t: t.maximum(0.0), lambda t: torch.maximum(t, torch.tensor(0.0)), x)  # a tie: half
    check(lambda t: t.elu() + t.celu(0.5) + t.selu(), lambda t: F.elu(t) + F.celu(t, 0.5) + F.selu(t), x)
    check(
        lambda t: t.sign() + t.floor() + t.ceil() + t.round() + t.trunc(),
        lambda t: t.sign() + t.floor() + t.ceil() + t.round() + t.trunc(),
        x,
    )


@pytest.mark.no_roundtrip  # big graphs: the pyrender round trip alone takes seconds
def test_unary_far_out() -> None:
    # large arguments: saturated activations have finite (mostly 0) gradients; elu's exponential branch must
    # not overflow where it is not taken (0 * inf would be NaN)
    x = np.array([-200.0, -30.0, -10.0, 10.0, 30.0, 100.0], dtype=np.float32)
    for zfn, tfn in [
        (lambda t: t.elu(0.7), lambda t: F.elu(t, 0.7)),
        (lambda t: t.celu(0.5), lambda t: F.celu(t, 0.5)),
        (lambda t: t.selu(), torch.selu),
        (lambda t: t.sigmoid(), torch.sigmoid),
        (lambda t: t.logsigmoid(), F.logsigmoid),
        (lambda t: t.softplus(), F.softplus),
        (lambda t: t.tanh(), torch.tanh),
        (lambda t: t.gelu(), lambda t: F.gelu(t, approximate="tanh")),
        (lambda t: t.gelu(approximate="none"), F.gelu),
        (lambda t: t.silu(), F.silu),
        (lambda t: t.mish(), F.mish),
        (lambda t: t.erf(), torch.erf),
        (lambda t: t.erfc(), torch.erfc),
        (lambda t: t.atan(), torch.atan),
        (lambda t: t.softsign(), F.softsign),
        (lambda t: (t * 0.1).expm1(), lambda t: (t * 0.1).expm1()),
    ]:
        check(zfn, tfn, x, rtol=2e-4)


def test_unary_at_domain_edges() -> None:
    # infinite derivatives where torch's are infinite too
    edge = np.array([1.0, -1.0], dtype=np.float32)
    check(lambda t: t.asin(), torch.asin, edge)
    check(lambda t: t.acos(), torch.acos, edge)
    check(lambda t: t.atanh(), torch.atanh, edge)
    zero = np.array([0.0, 4.0], dtype=np.float32)
    check(lambda t: t.sqrt(), torch.sqrt, zero)
    check(lambda t: t.log(), torch.log, zero)
    check(lambda t: t.rsqrt(), torch.rsqrt, zero)
    check(lambda t: (t - 1).log1p(), lambda t: (t - 1).log1p(), zero)  # log1p'(-1) = inf


def test_unary_float_inputs_of_other_dtypes() -> None:
    # float16 and float64 inputs: the gradient has the input's dtype
    check(lambda t: t.exp() * t.tanh(), lambda t: t.exp() * t.tanh(), X.astype(np.float16), rtol=5e-3, atol=5e-3)
    check(lambda t: t.sigmoid().log() + t.sin(), lambda t: t.sigmoid().log() + t.sin(), X.astype(np.float64), rtol=1e-6)


# ---------------------------------------------------------------------------------------------------------------
# elementwise: binary ops, with broadcasting and Python scalars

A = rand(3, 4, away=0.2, seed=2)
B = rand(4, away=0.3, seed=3)  # broadcasts against A
COL = rand(3, 1, away=0.3, seed=4)

BINARY: list[tuple[str, Callable, Callable, tuple[np.ndarray, ...]]] = [
    ("add", lambda a, b: a + b, lambda a, b: a + b, (A, B)),
    ("sub", lambda a, b: a - b, lambda a, b: a - b, (A, COL)),
    ("mul", lambda a, b: a * b, lambda a, b: a * b, (COL, B)),
    ("div", lambda a, b: a / b, lambda a, b: a / b, (A, B)),
    ("div_same", lambda a, b: a / a + b, lambda a, b: a / a + b, (A, B)),
    ("rsub_scalar", lambda a, b: 2.5 - a + b, lambda a, b: 2.5 - a + b, (A, B)),
    ("rdiv_scalar", lambda a, b: 3.0 / a * b, lambda a, b: 3.0 / a * b, (A, B)),
    ("scalars", lambda a, b: (a * 2 + 1) / 4 - b * 0.5, lambda a, b: (a * 2 + 1) / 4 - b * 0.5, (A, B)),
    ("floordiv", lambda a, b: a // b + a, lambda a, b: torch.div(a, b, rounding_mode="floor") + a, (A * 3, B)),
    ("mod", lambda a, b: a % b, lambda a, b: torch.remainder(a, b), (A * 3, B)),
    ("mod_scalar", lambda a, b: a % 0.7 + b, lambda a, b: torch.remainder(a, 0.7) + b, (A * 3, B)),
    ("fmod", lambda a, b: a.fmod(b), torch.fmod, (A * 3, B)),
    ("maximum", lambda a, b: a.maximum(b), torch.maximum, (A, B)),
    ("minimum", lambda a, b: a.minimum(b), torch.minimum, (A, COL)),
    ("maximum_scalar", lambda a, b: a.maximum(0.5) + b, lambda a, b: a.clamp(min=0.5) + b, (A, B)),
    ("copysign", lambda a, b: a.copysign(b), torch.copysign, (A, B)),
    ("logaddexp", lambda a, b: a.logaddexp(b), torch.logaddexp, (A, B)),
    ("lerp_scalar", lambda a, b: a.lerp(b, 0.3), lambda a, b: torch.lerp(a, b.expand(3, 4), 0.3), (A, B)),
    ("lerp_big_weight", lambda a, b: a.lerp(b, 0.8), lambda a, b: torch.lerp(a, b.expand(3, 4), 0.8), (A, B)),
    ("where", lambda a, b: (a > 0).where(a * 2, b), lambda a, b: torch.where(a > 0, a * 2, b), (A, B)),
    ("where_scalar", lambda a, b: (b > 0).where(a, 1.5), lambda a, b: torch.where(b > 0, a, 1.5), (A, B)),
    ("clamp", lambda a, b: a.clamp(-0.5, 0.7) + b, lambda a, b: a.clamp(-0.5, 0.7) + b, (A, B)),
    ("clip_min", lambda a, b: a.clip(min_=0.1) * b, lambda a, b: a.clip(min=0.1) * b, (A, B)),
    ("clamp_tensor", lambda a, b: a.clamp(b - 0.5, b + 0.5), lambda a, b: a.clamp(b - 0.5, b + 0.5), (A, B)),
]


@pytest.mark.parametrize("name,zfn,tfn,arrays", BINARY, ids=[b[0] for b in BINARY])
def test_binary(name: str, zfn: Callable, tfn: Callable, arrays: tuple[np.ndarray, ...]) -> None:
    check(zfn, tfn, *arrays)


def test_lerp_tensor_weight() -> None:
    w = rand(3, 4, lo=-0.5, hi=1.5, seed=5)
    check(lambda a, b, w: a.lerp(b, w), lambda a, b, w: torch.lerp(a, b.expand(3, 4), w), A, B, w)


def test_ties_split_the_gradient() -> None:
    # maximum/minimum ties: torch gives each side half; so does clamp's... no: clamp passes it to x at a bound
    a = np.array([1.0, 2.0, -3.0, 0.5], dtype=np.float32)
    b = np.array([1.0, 1.0, -3.0, 0.7], dtype=np.float32)
    check(lambda a, b: a.maximum(b), torch.maximum, a, b)
    check(lambda a, b: a.minimum(b), torch.minimum, a, b)
    check(lambda a, b: a.clamp(b, b + 1), lambda a, b: a.clamp(b, b + 1), a, b)
    check(lambda a: a.clamp(-3.0, 1.0), lambda a: a.clamp(-3.0, 1.0), a)
    check(lambda a, b: a.logaddexp(b), torch.logaddexp, a, b)


POW_BASE = rand(3, 4, lo=0.3, hi=2.5, seed=6)
NEG_BASE = np.array([[-2.0, -1.5, -0.5, 1.5], [-3.0, 2.0, -1.25, 0.75]], dtype=np.float32)
INT_EXP = np.array([[2.0, 3.0, -1.0, 2.5], [-2.0, 4.0, 3.0, -0.5]], dtype=np.float32)  # integers at negative bases


@pytest.mark.parametrize("e", [2.5, -1.5, 0.5, 1, 2, 3, -1, -2, 0, 4, 7], ids=lambda e: f"e{e}")
def test_pow_scalar_exponent(e: float) -> None:
    # 0, 1, 2, 3, -1, -2, 0.5 take the exact shortcuts; 4 and 7 are integer powers through exp2/log2
    check(lambda x: x**e, lambda x: x**e, POW_BASE)


def test_pow_negative_base_integer_exponent() -> None:
    check(lambda x: x**3, lambda x: x**3, NEG_BASE)
    check(lambda x: x**4, lambda x: x**4, NEG_BASE)
    check(lambda x: x**-3, lambda x: x**-3, NEG_BASE)
    check(lambda x: x ** (-2.0), lambda x: x ** (-2.0), NEG_BASE)
    # tensor exponents: the base's gradient is finite; the exponent's is nan at negative bases (log), as in torch
    check(lambda x, e: x**e, lambda x, e: x**e, NEG_BASE, INT_EXP)


def test_pow_tensor_exponent() -> None:
    e = rand(3, 4, lo=-1.5, hi=2.5, seed=7)
    check(lambda x, e: x**e, lambda x, e: x**e, POW_BASE, e)
    check(lambda x, e: x.pow(e[0]), lambda x, e: x.pow(e[0]), POW_BASE, e)  # broadcast exponent
    check(lambda x: 2.0**x, lambda x: 2.0**x, e)  # a scalar base
    check(lambda x: 0.5**x, lambda x: 0.5**x, e)


def test_pow_zero_base() -> None:
    base = np.array([0.0, 0.0, 0.0, 0.0, 2.0], dtype=np.float32)
    e = np.array([0.0, 1.0, 2.5, 3.0, 0.0], dtype=np.float32)
    check(lambda b, e: b**e, lambda b, e: b**e, base, e)  # d/de is 0 where base is 0 <= e, d/db 0 where e is 0
    check(lambda b: b**2.5, lambda b: b**2.5, base)
    check(lambda b: b**2, lambda b: b**2, base)
    check(lambda b: b**0.5, lambda b: b**0.5, base)  # inf at 0, as torch


def test_cast_between_float_dtypes() -> None:
    check(lambda x: x.cast(dtypes.float16).cast(dtypes.float32) * x, lambda x: x.half().float() * x, X, rtol=1e-3)
    check(lambda x: x.cast(dtypes.float64).exp(), lambda x: x.double().exp(), X)
    check(lambda x: x.float().square(), lambda x: x.float().square(), X.astype(np.float16), rtol=1e-3)
    check(lambda x: x.half() * 3, lambda x: x.half() * 3, X.astype(np.float64), rtol=1e-3, atol=1e-3)
    # an int cast cuts the gradient: nothing flows back through it
    check(lambda x: x.cast(dtypes.int32).cast(dtypes.float32) + x, lambda x: x.int().float() + x, X * 3)


# ---------------------------------------------------------------------------------------------------------------
# reductions and scans

R = rand(3, 6, seed=8, away=0.2)
RD = distinct(3, 6, seed=9)  # no ties

REDUCE: list[tuple[str, Callable, Callable, np.ndarray]] = [
    ("sum", lambda x: x.sum(), lambda x: x.sum(), R),
    ("sum_axis", lambda x: x.sum(axis=1), lambda x: x.sum(1), R),
    ("sum_keepdim", lambda x: x.sum(0, keepdim=True) * x, lambda x: x.sum(0, keepdim=True) * x, R),
    ("mean", lambda x: x.mean(), lambda x: x.mean(), R),
    ("mean_axis", lambda x: x.mean(axis=0), lambda x: x.mean(0), R),
    ("prod", lambda x: x.prod(axis=1), lambda x: x.prod(1), R),
    ("prod_all", lambda x: x.prod(), lambda x: x.prod(), R * 0 + 1.1 * np.sign(R)),
    ("max", lambda x: x.max(), lambda x: x.max(), RD),
    ("max_axis", lambda x: x.max(axis=1), lambda x: x.amax(1), RD),
    ("min_axis", lambda x: x.min(axis=0, keepdim=True), lambda x: x.amin(0, keepdim=True), RD),
    ("var", lambda x: x.var(axis=1), lambda x: x.var(1), R),
    ("var_c0", lambda x: x.var(correction=0), lambda x: x.var(correction=0), R),
    ("std", lambda x: x.std(axis=0), lambda x: x.std(0), R),
    ("std_c2", lambda x: x.std(axis=1, correction=2, keepdim=True), lambda x: x.std(1, correction=2, keepdim=True), R),
    ("var_mean", lambda x: Tensor.stack(*x.var_mean(axis=1)), lambda x: torch.stack(torch.var_mean(x, 1)), R),
    ("logsumexp", lambda x: x.logsumexp(axis=1), lambda x: x.logsumexp(1), R * 3),
    ("logsumexp_all", lambda x: x.logsumexp(), lambda x: x.logsumexp((0, 1)), R * 3),
    ("cumsum", lambda x: x.cumsum(axis=1), lambda x: x.cumsum(1), R),
    ("cumsum_axis0", lambda x: x.cumsum(axis=0), lambda x: x.cumsum(0), R),
    ("cumprod", lambda x: x.cumprod(axis=1), lambda x: x.cumprod(1), R),
    ("cummax", lambda x: x.cummax(axis=1).values, lambda x: x.cummax(1).values, RD),
    ("cummin", lambda x: x.cummin(axis=0).values, lambda x: x.cummin(0).values, RD),
    ("logcumsumexp", lambda x: x.logcumsumexp(axis=1), lambda x: x.logcumsumexp(1), R * 3),
    ("sort", lambda x: x.sort(dim=1)[0], lambda x: x.sort(1).values, RD),
    ("sort_desc", lambda x: x.sort(dim=0, descending=True)[0], lambda x: x.sort(0, descending=True).values, RD),
    ("topk", lambda x: x.topk(2, dim=1)[0], lambda x: x.topk(2, 1).values, RD),
    ("topk_smallest", lambda x: x.topk(3, dim=0, largest=False)[0], lambda x: x.topk(3, 0, largest=False).values, RD),
    ("softmax", lambda x: x.softmax(axis=1), lambda x: x.softmax(1), R * 2),
    ("softmax_axis0", lambda x: x.softmax(axis=0), lambda x: x.softmax(0), R * 2),
    ("log_softmax", lambda x: x.log_softmax(axis=1), lambda x: x.log_softmax(1), R * 2),
    ("softmin", lambda x: x.softmin(axis=1), lambda x: F.softmin(x, 1), R * 2),
    ("normalize", lambda x: x.normalize(dim=1), lambda x: F.normalize(x, dim=1), R),
    ("normalize_p1", lambda x: x.normalize(p=1, dim=0), lambda x: F.normalize(x, p=1.0, dim=0), R),
    ("normalize_p3", lambda x: x.normalize(p=3, dim=1), lambda x: F.normalize(x, p=3.0, dim=1), R),
    ("normalize_inf", lambda x: x.normalize(p=math.inf, dim=1), lambda x: F.normalize(x, p=math.inf, dim=1), RD),
]


@pytest.mark.parametrize("name,zfn,tfn,x", REDUCE, ids=[r[0] for r in REDUCE])
def test_reduce(name: str, zfn: Callable, tfn: Callable, x: np.ndarray) -> None:
    check(zfn, tfn, x)


def test_prod_with_zeros() -> None:
    # one zero in a row: only it gets a gradient (the product of the others); two zeros: no gradient at all
    x = np.array([[1.5, 0.0, -2.0, 3.0], [0.0, 2.0, 0.0, 1.0], [1.0, 2.0, 3.0, 4.0]], dtype=np.float32)
    check(lambda t: t.prod(axis=1), lambda t: t.prod(1), x)
    check(lambda t: t.prod(axis=0), lambda t: t.prod(0), x)
    check(lambda t: t.prod(), lambda t: t.prod(), x[:1])
    check(lambda t: t.cumprod(axis=1), lambda t: t.cumprod(1), x)


def test_max_min_ties_split_evenly() -> None:
    # as torch's amax/amin and full max()/min(): the gradient is shared equally by the elements that tie
    x = np.array([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 2.0, -1.0], [-4.0, 0.5, -4.0, -4.0]], dtype=np.float32)
    check(lambda t: t.max(axis=1), lambda t: t.amax(1), x)
    check(lambda t: t.min(axis=1), lambda t: t.amin(1), x)
    check(lambda t: t.max(), lambda t: t.max(), x)
    check(lambda t: t.min(), lambda t: t.min(), x)
    check(lambda t: t.max(axis=0, keepdim=True), lambda t: t.amax(0, keepdim=True), x)


def test_cummax_cummin_ties_follow_torch_indices() -> None:
    # each running maximum's gradient goes to the position torch's cummax/cummin index names: the last that ties
    x = np.array([[1.0, 1.0, 0.5, 2.0, 2.0, -1.0], [0.5, 0.5, 0.5, 0.2, 0.2, 3.0]], dtype=np.float32)
    check(lambda t: t.cummax(axis=1).values, lambda t: t.cummax(1).values, x)
    check(lambda t: t.cummin(axis=1).values, lambda t: t.cummin(1).values, x)
    check(lambda t: t.cummax(axis=0).values, lambda t: t.cummax(0).values, x)


def test_norms_at_zero() -> None:
    # a zero vector or zero entries: torch's norm gradient is 0 at a zero norm and |x|**p has gradient 0 at 0,
    # so normalize's gradient is finite (1/eps for the zero vector); std of constant values has gradient 0
    x = np.array([[0.0, 0.0, 0.0], [0.0, 1.0, -2.0], [3.0, 0.0, 0.5]], dtype=np.float32)
    for p in (1, 1.5, 2, 3, math.inf):
        check(lambda t, p=p: t.normalize(p=p, dim=1), lambda t, p=p: F.normalize(t, p=float(p), dim=1), x)
    c = np.array([[1.5, 1.5, 1.5], [0.0, 0.0, 0.0], [1.0, 2.0, 4.0]], dtype=np.float32)
    check(lambda t: t.std(axis=1), lambda t: t.std(1), c)
    check(lambda t: t.std_mean(axis=1)[0], lambda t: torch.std_mean(t, 1)[0], c)
    check(lambda t: t.var(axis=1), lambda t: t.var(1), c)


def test_softmax_family_with_infinities() -> None:
    # masked attention: -inf entries get gradient 0; large finite values do not overflow
    x = np.array([[3.0, 1.0, 2.0, 0.5], [1000.0, 999.0, -1000.0, 2.0]], dtype=np.float32)
    mask = np.array([[True, False, False, True], [False, False, True, False]])
    tm = torch.tensor(mask)
    check(
        lambda t: t.masked_fill(Tensor(mask), -math.inf).softmax(1),
        lambda t: t.masked_fill(tm, -math.inf).softmax(1),
        x,
    )
    check(
        lambda t: t.masked_fill(Tensor(mask), -math.inf).log_softmax(1).masked_fill(Tensor(mask), 0.0),
        lambda t: t.masked_fill(tm, -math.inf).log_softmax(1).masked_fill(tm, 0.0),
        x,
    )
    check(
        lambda t: t.masked_fill(Tensor(mask), -math.inf).logsumexp(1),
        lambda t: t.masked_fill(tm, -math.inf).logsumexp(1),
        x,
    )
    check(lambda t: t.log_softmax(0), lambda t: t.log_softmax(0), x)
    check(lambda t: t.logcumsumexp(1), lambda t: t.logcumsumexp(1), x)


def test_cumsum_long_axis() -> None:
    # more than 64 elements: the blocked scan (blocks, a scan of their totals, the combination)
    x = rand(2, 150, seed=10)
    check(lambda t: t.cumsum(axis=1), lambda t: t.cumsum(1), x, rtol=1e-4, atol=1e-4)
    check(lambda t: t.cumsum(axis=0), lambda t: t.cumsum(0), x.T.copy(), rtol=1e-4, atol=1e-4)


@pytest.mark.no_roundtrip
def test_long_scans() -> None:
    x = rand(1, 100, seed=11, lo=0.9, hi=1.1)
    check(lambda t: t.cumprod(axis=1), lambda t: t.cumprod(1), x, rtol=1e-4, atol=1e-4)
    check(lambda t: t.logcumsumexp(axis=1), lambda t: t.logcumsumexp(1), x * 4, rtol=1e-4, atol=1e-4)
    d = distinct(1, 100, seed=12)
    check(lambda t: t.cummax(axis=1).values, lambda t: t.cummax(1).values, d)


# ---------------------------------------------------------------------------------------------------------------
# movement

M = rand(2, 3, 4, seed=13)
M2 = rand(3, 4, seed=14)

MOVEMENT: list[tuple[str, Callable, Callable, tuple[np.ndarray, ...]]] = [
    ("reshape", lambda x: x.reshape(6, 4) * 2, lambda x: x.reshape(6, 4) * 2, (M,)),
    ("permute", lambda x: x.permute(2, 0, 1), lambda x: x.permute(2, 0, 1), (M,)),
    ("transpose", lambda x: x.transpose(0, 2), lambda x: x.transpose(0, 2), (M,)),
    ("T", lambda x: x.T * x.T, lambda x: x.T * x.T, (M2,)),
    ("expand", lambda x: x.reshape(3, 1, 4).expand(3, 5, 4), lambda x: x.reshape(3, 1, 4).expand(3, 5, 4), (M2,)),
    ("expand_new_axes", lambda x: x.expand(2, 2, 3, 4), lambda x: x.expand(2, 2, 3, 4), (M2,)),
    ("broadcast", lambda a, b: a * b, lambda a, b: a * b, (M, M2)),
    ("pad_constant", lambda x: x.pad((1, 2, 0, 1)), lambda x: F.pad(x, (1, 2, 0, 1)), (M,)),
    (
        "pad_value",
        lambda x: x.pad((1, 1), value=2.0) * x.pad((2, 0)),
        lambda x: F.pad(x, (1, 1), value=2.0) * F.pad(x, (2, 0)),
        (M,),
    ),
    ("pad_crop", lambda x: x.pad((-1, 2, 1, -1)), lambda x: F.pad(x, (-1, 2, 1, -1)), (M,)),
    (
        "pad_reflect",
        lambda x: x.pad((2, 1, 1, 2), mode="reflect"),
        lambda x: F.pad(x, (2, 1, 1, 2), mode="reflect"),
        (M,),
    ),
    (
        "pad_replicate",
        lambda x: x.pad((3, 1, 0, 2), mode="replicate"),
        lambda x: F.pad(x, (3, 1, 0, 2), mode="replicate"),
        (M,),
    ),
    (
        "pad_circular",
        lambda x: x.pad((2, 3, 1, 0), mode="circular"),
        lambda x: F.pad(x, (2, 3, 1, 0), mode="circular"),
        (M,),
    ),
    ("shrink", lambda x: x.shrink(((0, 1), (1, 3), None)), lambda x: x[0:1, 1:3, :], (M,)),
    ("flip", lambda x: x.flip(0, 2) * x, lambda x: x.flip(0, 2) * x, (M,)),
    ("cat", lambda a, b: a.cat(b * 2, a, dim=0), lambda a, b: torch.cat([a, b * 2, a], 0), (M2, rand(2, 4, seed=15))),
    ("cat_dim1", lambda a, b: Tensor.cat(a, b, dim=1), lambda a, b: torch.cat([a, b], 1), (M2, rand(3, 2, seed=16))),
    (
        "stack",
        lambda a, b: Tensor.stack(a, b, a, dim=1),
        lambda a, b: torch.stack([a, b, a], 1),
        (M2, rand(3, 4, seed=17)),
    ),
    ("repeat", lambda x: x.repeat(2, 1, 3), lambda x: x.repeat(2, 1, 3), (M2,)),
    ("tile", lambda x: x.tile(2), lambda x: x.tile(2), (M2,)),
    ("repeat_interleave", lambda x: x.repeat_interleave(3, dim=1), lambda x: x.repeat_interleave(3, dim=1), (M2,)),
    ("repeat_interleave_flat", lambda x: x.repeat_interleave(2), lambda x: x.repeat_interleave(2), (M2,)),
    (
        "split",
        lambda x: x.split([1, 3], dim=1)[1] * 2 + x.split(2)[0].sum(),
        lambda x: x.split([1, 3], 1)[1] * 2 + x.split(2)[0].sum(),
        (M2,),
    ),
    (
        "chunk",
        lambda x: x.chunk(2, dim=1)[0] * x.chunk(2, dim=1)[1],
        lambda x: x.chunk(2, 1)[0] * x.chunk(2, 1)[1],
        (M2,),
    ),
    ("roll", lambda x: x.roll(1, 0) + x.roll((2, -1), (1, 2)), lambda x: x.roll(1, 0) + x.roll((2, -1), (1, 2)), (M,)),
    ("roll_flat", lambda x: x.roll(5), lambda x: x.roll(5), (M2,)),
    ("unfold_overlap", lambda x: x.unfold(1, 3, 1), lambda x: x.unfold(1, 3, 1), (M2,)),
    ("unfold_step", lambda x: x.unfold(2, 2, 3), lambda x: x.unfold(2, 2, 3), (M,)),
    ("diag_of_matrix", lambda x: x.diag(1), lambda x: x.diag(1), (M2,)),
    ("diag_of_vector", lambda x: x.diag(-1), lambda x: x.diag(-1), (rand(4, seed=18),)),
    ("diagonal", lambda x: x.diagonal(0, 1, 2), lambda x: x.diagonal(0, 1, 2), (M,)),
    (
        "squeeze_unsqueeze",
        lambda x: x.reshape(3, 1, 4).squeeze(1).unsqueeze(0) * 3,
        lambda x: x.reshape(3, 1, 4).squeeze(1).unsqueeze(0) * 3,
        (M2,),
    ),
    ("movedim", lambda x: x.movedim(0, -1), lambda x: x.movedim(0, -1), (M,)),
    ("narrow", lambda x: x.narrow(2, 1, 2), lambda x: x.narrow(2, 1, 2), (M,)),
    (
        "flatten_unflatten",
        lambda x: x.flatten(1).unflatten(1, (2, 6)),
        lambda x: x.flatten(1).unflatten(1, (2, 6)),
        (M,),
    ),
    ("tril", lambda x: x.tril(), lambda x: x.tril(), (M2,)),
    ("triu", lambda x: x.triu(1), lambda x: x.triu(1), (M,)),
    ("tril_neg", lambda x: x.tril(-1), lambda x: x.tril(-1), (M2,)),
]


@pytest.mark.parametrize("name,zfn,tfn,arrays", MOVEMENT, ids=[m[0] for m in MOVEMENT])
def test_movement(name: str, zfn: Callable, tfn: Callable, arrays: tuple[np.ndarray, ...]) -> None:
    check(zfn, tfn, *arrays)


# ---------------------------------------------------------------------------------------------------------------
# indexing

IX = rand(4, 5, seed=19)
IDX = np.array([[0, 2, 2], [3, 0, 3]], dtype=np.int32)  # repeated indices: their gradients add up

GETITEM: list[tuple[str, Callable[[Any], Any], Callable[[Any], Any]]] = [
    ("int", lambda x: x[1], lambda x: x[1]),
    ("negative_int", lambda x: x[-1, -2], lambda x: x[-1, -2]),
    ("slice", lambda x: x[1:3, 2:], lambda x: x[1:3, 2:]),
    ("step", lambda x: x[::2, 1::3], lambda x: x[::2, 1::3]),
    # torch has no negative steps: the same elements by lists
    ("negative_step", lambda x: x[::-1, 3:0:-2], lambda x: x[[3, 2, 1, 0]][:, [3, 1]]),
    ("none_ellipsis", lambda x: x[None, ..., 1], lambda x: x[None, ..., 1]),
    ("mixed", lambda x: x[2:, None, ::-2], lambda x: x[2:, None][:, :, [4, 2, 0]]),
]


@pytest.mark.parametrize("name,zindex,tindex", GETITEM, ids=[g[0] for g in GETITEM])
def test_getitem_basic(name: str, zindex: Callable, tindex: Callable) -> None:
    check(zindex, tindex, IX)


def test_getitem_tensor_indices() -> None:
    # advanced indices with repeats: torch's index_put accumulates; so must we
    check(lambda x: x[Tensor(IDX)], lambda x: x[torch.tensor(IDX, dtype=torch.long)], IX)
    rows, cols = np.array([0, 3, 3, 1], dtype=np.int32), np.array([4, 0, 0, 2], dtype=np.int32)
    check(
        lambda x: x[Tensor(rows), Tensor(cols)] * 2,
        lambda x: x[torch.tensor(rows, dtype=torch.long), torch.tensor(cols, dtype=torch.long)] * 2,
        IX,
    )
    check(lambda x: x[1:, Tensor(cols)], lambda x: x[1:, torch.tensor(cols, dtype=torch.long)], IX)
    check(lambda x: x[[2, 2, 0]], lambda x: x[[2, 2, 0]], IX)


def test_getitem_bool_mask() -> None:
    mask = IX > 0.3
    check(lambda x: x[Tensor(mask)], lambda x: x[torch.tensor(mask)], IX)
    check(lambda x: x[Tensor(mask[:, 0])], lambda x: x[torch.tensor(mask[:, 0])], IX)


def test_gather() -> None:
    idx = np.array([[0, 4, 4], [1, 1, 0], [3, 2, 3]], dtype=np.int32)
    check(lambda x: x.gather(1, Tensor(idx)), lambda x: x.gather(1, torch.tensor(idx, dtype=torch.long)), IX)
    idx0 = np.array([[3, 0, 3, 1, 0], [3, 3, 2, 2, 0]], dtype=np.int32)
    check(lambda x: x.gather(0, Tensor(idx0)), lambda x: x.gather(0, torch.tensor(idx0, dtype=torch.long)), IX)


def test_scatter() -> None:
    # unique indices (with repeats, which write wins is unspecified in torch, and its gradient goes to all)
    idx = np.array([[0, 4, 2], [1, 3, 0]], dtype=np.int32)
    src = rand(2, 3, seed=20)
    ti = torch.tensor(idx, dtype=torch.long)
    check(lambda x, s: x.scatter(1, Tensor(idx), s), lambda x, s: x.scatter(1, ti, s), IX, src)
    check(lambda x: x.scatter(1, Tensor(idx), 2.0), lambda x: x.scatter(1, ti, 2.0), IX)


def test_scatter_repeated_index_gradient_goes_to_the_written_value() -> None:
    # where an index repeats, the last write wins (zeptograd's documented choice; torch leaves it unspecified,
    # and its gradient, grad.gather(index), also goes to the values that were overwritten): only the written
    # value affects the output, so only it gets a gradient
    idx = np.array([[1, 1, 3]], dtype=np.int32)
    x, src = Tensor(IX[:1].copy()), Tensor(np.array([[5.0, 6.0, 7.0]], np.float32))
    w = rand(1, 5, seed=46)
    out = x.scatter(1, Tensor(idx), src)
    gx, gs = (out * Tensor(w)).sum().gradient(x, src)
    np.testing.assert_array_equal(out.numpy(), [[IX[0, 0], 6.0, IX[0, 2], 7.0, IX[0, 4]]])
    np.testing.assert_array_equal(gs.numpy(), [[0.0, w[0, 1], w[0, 3]]])
    np.testing.assert_array_equal(gx.numpy(), w * np.array([[1, 0, 1, 0, 1]], np.float32))


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce(reduce: str, include_self: bool) -> None:
    # repeated indices; distinct values, so amax/amin have one winner per position
    idx = np.array([[0, 4, 4], [1, 1, 0], [3, 3, 3]], dtype=np.int32)
    x = distinct(4, 5, seed=21, scale=0.3)
    src = distinct(3, 3, seed=22, scale=0.7) + 0.1
    ti = torch.tensor(idx, dtype=torch.long)
    check(
        lambda x, s: x.scatter_reduce(1, Tensor(idx), s, reduce, include_self=include_self),
        lambda x, s: x.scatter_reduce(1, ti, s, reduce, include_self=include_self),
        x,
        src,
    )


def test_masked_fill_and_select() -> None:
    mask = np.array([[True, False, False, True, False]], dtype=bool)  # broadcasts over rows
    check(lambda x: x.masked_fill(Tensor(mask), 0.5), lambda x: x.masked_fill(torch.tensor(mask), 0.5), IX)
    m2 = IX < 0
    check(lambda x: x.masked_select(Tensor(m2)), lambda x: x.masked_select(torch.tensor(m2)), IX)
    n = int(m2.sum())
    check(
        lambda x: x.masked_select(Tensor(m2), size=n),
        lambda x: x.masked_select(torch.tensor(m2)),
        IX,
    )


def test_one_hot_does_not_carry_gradient() -> None:
    # one_hot of an index tensor is data: the loss depends on x only through the product
    idx = np.array([1, 0, 4, 2], dtype=np.int32)
    check(
        lambda x: x * Tensor(idx).one_hot(5).cast(dtypes.float32),
        lambda x: x * F.one_hot(torch.tensor(idx, dtype=torch.long), 5).float(),
        IX,
    )


# ---------------------------------------------------------------------------------------------------------------
# functional

MA, MB = rand(3, 4, seed=23), rand(4, 5, seed=24)
VEC = rand(4, seed=25)
BATCH = rand(2, 3, 4, seed=26)

FUNCTIONAL: list[tuple[str, Callable, Callable, tuple[np.ndarray, ...]]] = [
    ("matmul", lambda a, b: a @ b, lambda a, b: a @ b, (MA, MB)),
    ("matmul_batched", lambda a, b: a @ b, lambda a, b: a @ b, (BATCH, MB)),
    ("matmul_batched_both", lambda a, b: a.matmul(b), lambda a, b: a.matmul(b), (BATCH, rand(2, 4, 2, seed=27))),
    (
        "matmul_broadcast_batch",
        lambda a, b: a @ b,
        lambda a, b: a @ b,
        (rand(2, 1, 3, 4, seed=28), rand(3, 4, 2, seed=29)),
    ),
    ("matvec", lambda a, v: a @ v, lambda a, v: a @ v, (MA, VEC)),
    ("vecmat", lambda v, b: v @ b, lambda v, b: v @ b, (VEC, MB)),
    ("vecvec", lambda v, w: v.dot(w), lambda v, w: v.dot(w), (VEC, rand(4, seed=30))),
    ("dot_matrix", lambda a, b: a.dot(b), lambda a, b: a.mm(b), (MA, MB)),
    (
        "einsum_mm",
        lambda a, b: Tensor.einsum("ij,jk->ik", a, b),
        lambda a, b: torch.einsum("ij,jk->ik", a, b),
        (MA, MB),
    ),
    ("einsum_trace", lambda a: Tensor.einsum("ii->", a), lambda a: torch.einsum("ii->", a), (rand(4, 4, seed=31),)),
    (
        "einsum_outer",
        lambda v, w: Tensor.einsum("i,j", v, w),
        lambda v, w: torch.einsum("i,j", v, w),
        (VEC, rand(3, seed=32)),
    ),
    (
        "einsum_batch",
        lambda a, b: Tensor.einsum("bij,jk->bki", a, b),
        lambda a, b: torch.einsum("bij,jk->bki", a, b),
        (BATCH, MB),
    ),
    (
        "einsum_diag_sum",
        lambda a: Tensor.einsum("bii->b", a),
        lambda a: torch.einsum("bii->b", a),
        (rand(2, 3, 3, seed=33),),
    ),
    # tinygrad's linear takes weight (in, out); torch's (out, in)
    ("linear", lambda x, w, b: x.linear(w, b), lambda x, w, b: F.linear(x, w.T, b), (BATCH, MB, rand(5, seed=34))),
    ("linear_nobias", lambda x, w: x.linear(w), lambda x, w: F.linear(x, w.T), (MA, MB)),
    ("interp_linear", lambda x: x.interpolate((7,)), lambda x: F.interpolate(x, size=(7,), mode="linear"), (BATCH,)),
    (
        "interp_linear_down",
        lambda x: x.interpolate((3,), align_corners=True),
        lambda x: F.interpolate(x, size=(3,), mode="linear", align_corners=True),
        (BATCH,),
    ),
    (
        "interp_bilinear",
        lambda x: x.interpolate((5, 3), mode="bilinear"),
        lambda x: F.interpolate(x, size=(5, 3), mode="bilinear"),
        (rand(1, 2, 3, 4, seed=35),),
    ),
    (
        "interp_nearest",
        lambda x: x.interpolate((7,), mode="nearest"),
        lambda x: F.interpolate(x, size=(7,), mode="nearest"),
        (BATCH,),
    ),
    (
        "interp_nearest_exact",
        lambda x: x.interpolate((5, 3), mode="nearest-exact"),
        lambda x: F.interpolate(x, size=(5, 3), mode="nearest-exact"),
        (rand(1, 2, 3, 4, seed=35),),
    ),
]


@pytest.mark.parametrize("name,zfn,tfn,arrays", FUNCTIONAL, ids=[f[0] for f in FUNCTIONAL])
def test_functional(name: str, zfn: Callable, tfn: Callable, arrays: tuple[np.ndarray, ...]) -> None:
    check(zfn, tfn, *arrays)


@pytest.mark.no_roundtrip  # big graphs: the pyrender round trip alone takes seconds
def test_dropout_in_training() -> None:
    # the mask is random: recover it from the output (x has no zeros), then torch computes the same function
    x = rand(4, 8, seed=36, away=0.1)
    Tensor.manual_seed(3)
    with Tensor.train():
        zx = Tensor(x)
        out = zx.dropout(0.25)
        w = rand(4, 8, seed=37)
        (g,) = (out * Tensor(w)).sum().gradient(zx)
        Tensor.realize(out, g)
    keep = out.numpy() != 0
    assert 0 < keep.sum() < keep.size
    tx = _to_torch(x)
    tout = tx * torch.tensor(keep, dtype=torch.float32) / 0.75
    (tg,) = torch.autograd.grad((tout * torch.tensor(w)).sum(), [tx])
    assert_close(out.numpy(), tout, 1e-6, 0, "value")
    assert_close(g.numpy(), tg, 1e-6, 0, "gradient")
    with Tensor.train(False):
        zx = Tensor(x)
        assert zx.dropout(0.25) is zx  # not training: identity, gradient 1 (checked by the elementwise tests)


# ---------------------------------------------------------------------------------------------------------------
# engine behaviour


def test_backward_fills_and_accumulates_grad() -> None:
    x = Tensor(X, requires_grad=True)
    w = Tensor(rand(3, 5, seed=38), requires_grad=True)
    (x * w).sum().backward()
    first = x.grad
    assert first is not None and w.grad is not None
    (x * x).sum().backward()  # adds to .grad
    tx, tw = _to_torch(X), _to_torch(rand(3, 5, seed=38))
    (tx * tw).sum().backward()
    (tx * tx).sum().backward()
    assert_close(x.grad.numpy(), tx.grad, 1e-5, 1e-6, "x.grad")
    assert_close(w.grad.numpy(), tw.grad, 1e-5, 1e-6, "w.grad")


def test_backward_fills_what_requires_grad_and_nothing_else() -> None:
    # as in torch and tinygrad: a tensor gets a .grad when it requires one (an intermediate too, as torch's
    # retain_grad()); one that was not asked (None) or refused (False) gets none
    x = Tensor(X, requires_grad=True)
    frozen = Tensor(rand(3, 5, seed=39)).requires_grad_(False)
    data = Tensor(rand(3, 5, seed=41))
    h = (x * frozen * data).tanh().requires_grad_()  # a live intermediate
    loss = (h * h).sum()
    loss.backward()
    assert frozen.grad is None and data.grad is None
    assert loss.grad is None  # the loss itself gets no .grad
    tx, tf = _to_torch(X), torch.tensor(rand(3, 5, seed=39))
    th = (tx * tf * torch.tensor(rand(3, 5, seed=41))).tanh()
    th.retain_grad()
    (th * th).sum().backward()
    assert_close(h.grad.numpy(), th.grad, 1e-5, 1e-6, "h.grad")
    assert_close(x.grad.numpy(), tx.grad, 1e-4, 1e-6, "x.grad")


def test_backward_with_nothing_to_differentiate_raises_as_torch_does() -> None:
    # torch raises when no tensor of the loss's graph requires a gradient; returning quietly left every .grad None
    # and the optimizer step a no-op. A realized tensor of more than one element is a buffer with no graph: the same
    data = Tensor(rand(3, 5, seed=43))
    with pytest.raises(RuntimeError):
        torch.tensor(rand(3, 5, seed=43)).sum().backward()
    with pytest.raises(RuntimeError, match="requires_grad=True"):
        (data * 2).sum().backward()
    w = Tensor(rand(3, 5, seed=45), requires_grad=True)
    out = (w * data).realize()
    with pytest.raises(RuntimeError, match="call backward\\(\\) before reading it"):
        out.backward(gradient=Tensor.ones(3, 5))
    assert w.grad is None


def test_a_loss_read_before_backward_keeps_its_graph() -> None:
    # torch code reads the loss for logging before backward(): `loss.item(); loss.backward()` gets the gradients
    # torch gets; a loss realized with others (Tensor.realize) too
    x_np, w_np = rand(4, 3, seed=47), rand(3, 2, seed=49)
    w, x = Tensor(w_np, requires_grad=True), Tensor(x_np)
    loss = (x @ w).tanh().square().mean()
    value = loss.item()
    loss.backward()
    tw = _to_torch(w_np)
    tloss = (torch.tensor(x_np) @ tw).tanh().square().mean()
    tloss.backward()
    assert abs(value - tloss.item()) < 1e-6
    assert_close(w.grad.numpy(), tw.grad, 1e-5, 1e-6, "w.grad after loss.item()")
    w.grad = None
    other = (x @ w).sum()
    Tensor.realize(loss, other)
    other.backward()
    assert_close(w.grad.numpy(), np.broadcast_to(x_np.sum(0)[:, None], (3, 2)), 1e-5, 1e-6, "w.grad after realize")


def test_a_training_loop_keeps_no_gradient_of_its_data() -> None:
    # a training loop: a batch X held across steps, and parameters an optimizer updates. X does not require a
    # gradient, so backward() gives it none; it used to get one, a lazy sum that grew by a term every step (400
    # steps: 10,000 nodes, and every step slower than the last, since every realize walked it)
    from zeptograd import nn
    from zeptograd.nn import optim

    Tensor.manual_seed(0)
    l1 = nn.Linear(4, 3)
    opt = optim.SGD([l1.weight, l1.bias], lr=0.1)
    x = Tensor(rand(8, 4, seed=42))
    for _ in range(3):
        loss = l1(x).relu().sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        loss.item()
        assert x.grad is None
        assert l1.weight.grad is not None and l1.bias.grad is not None


def test_detach_stops_gradient() -> None:
    tx = _to_torch(X)
    x = Tensor(X)
    (g,) = (x * x.detach() + x.detach().exp()).sum().gradient(x)
    (tg,) = torch.autograd.grad((tx * tx.detach() + tx.detach().exp()).sum(), [tx])
    assert_close(g.numpy(), tg, 1e-6, 0, "gradient")
    with pytest.raises(RuntimeError, match="target 0 .*not in the graph"):
        x.detach().sum().gradient(x)


def test_gradient_through_an_assigned_tensor() -> None:
    # after t.assign(v), reads of t are v: the gradient flows into v (and so into what v was made of)
    t = Tensor(np.zeros((3, 5), np.float32)).contiguous().realize()
    x = Tensor(X)
    t.assign(x * 2)
    (g,) = (t * t).sum().gradient(x)
    np.testing.assert_allclose(g.numpy(), 8 * X, rtol=1e-6)
    np.testing.assert_allclose(t.numpy(), 2 * X, rtol=1e-6)


def test_gradient_through_contiguous_clone_and_copy() -> None:
    # what only stores or moves a value passes its gradient through, back to the source's device
    x = Tensor(X)
    y = (x * 2).contiguous().clone().to("PYTHON") * x.to("PYTHON")
    (g,) = y.sum().gradient(x)
    assert g.device == "CPU"
    np.testing.assert_allclose(g.numpy(), 4 * X, rtol=1e-6)


def test_gradient_with_respect_to_an_assigned_tensor() -> None:
    t = Tensor(np.zeros((3, 5), np.float32)).contiguous().realize()
    t.assign(Tensor(X) * 2)
    (g,) = (t * t * 0.5).sum().gradient(t)
    np.testing.assert_allclose(g.numpy(), 2 * X, rtol=1e-6)


def test_seed_for_a_non_scalar_loss() -> None:
    x = Tensor(X)
    seed = rand(3, 5, seed=40)
    (g,) = x.sin().gradient(x, gradient=Tensor(seed))
    tx = _to_torch(X)
    (tg,) = torch.autograd.grad(tx.sin(), [tx], grad_outputs=torch.tensor(seed))
    assert_close(g.numpy(), tg, 1e-5, 1e-6, "gradient")
    x2 = Tensor(X, requires_grad=True)
    x2.exp().backward(gradient=Tensor(seed))
    assert_close(x2.grad.numpy(), seed * np.exp(X), 1e-5, 1e-6, "backward with a seed")


SECOND_ORDER: list[tuple[str, Callable, Callable]] = [
    ("cube", lambda x: x**3, lambda x: x**3),
    ("tanh", lambda x: x.tanh(), torch.tanh),
    ("sigmoid_mul", lambda x: x.sigmoid() * x.sin(), lambda x: x.sigmoid() * x.sin()),
    ("exp_pow", lambda x: (x * 0.5).exp() ** 2.5, lambda x: (x * 0.5).exp() ** 2.5),
    ("softmax", lambda x: x.softmax(axis=1) * x, lambda x: x.softmax(1) * x),
]


@pytest.mark.parametrize("name,zfn,tfn", SECOND_ORDER, ids=[s[0] for s in SECOND_ORDER])
def test_second_order(name: str, zfn: Callable, tfn: Callable) -> None:
    # the gradient of (the weighted sum of) a gradient: gradients are ordinary graphs, so they differentiate
    w = rand(3, 5, seed=41)
    x = Tensor(X)
    (g,) = zfn(x).sum().gradient(x)
    (gg,) = (g * Tensor(w)).sum().gradient(x)
    tx = _to_torch(X)
    (tg,) = torch.autograd.grad(tfn(tx).sum(), [tx], create_graph=True)
    (tgg,) = torch.autograd.grad((tg * torch.tensor(w)).sum(), [tx])
    Tensor.realize(g, gg)
    assert_close(g.numpy(), tg, 1e-4, 1e-5, "first order")
    assert_close(gg.numpy(), tgg, 1e-4, 1e-4, "second order")


def test_target_used_twice() -> None:
    # x reaches the loss along several paths (and twice as the same operand): the gradients add up
    check(lambda x: x * x + (x * 3).exp() * x.sin() - x, lambda x: x * x + (x * 3).exp() * x.sin() - x, X)
    x = Tensor(X)
    loss = (x * 2).sum()
    (seed,) = loss.gradient(loss)  # the loss with respect to itself: the seed, 1
    assert seed.item() == 1.0
    gs = loss.gradient(x, x)
    assert len(gs) == 2
    np.testing.assert_array_equal(gs[0].numpy(), np.full(X.shape, 2, np.float32))
    np.testing.assert_array_equal(gs[1].numpy(), np.full(X.shape, 2, np.float32))


@pytest.mark.no_roundtrip  # big graphs: the pyrender round trip alone takes seconds
@pytest.mark.parametrize("dt", [np.float16, np.float64], ids=["float16", "float64"])
def test_float16_float64_gradients(dt: type) -> None:
    tol = {np.float16: (3e-3, 3e-3), np.float64: (1e-10, 1e-12)}[dt]
    a, b = X.astype(dt), rand(5, 2, seed=42).astype(dt)

    def f(a, b):
        return ((a @ b).tanh() * 2 + a.sum(1, keepdim=True)).softmax(1)

    check(f, f, a, b, rtol=tol[0], atol=tol[1])
    check(lambda a: a.exp().log1p() / (a * a + 1), lambda a: a.exp().log1p() / (a * a + 1), a, rtol=tol[0], atol=tol[1])


@pytest.mark.no_roundtrip  # big graphs: the pyrender round trip alone takes seconds
def test_python_device_matches_cpu() -> None:
    xs, ws = rand(2, 3, seed=43), rand(3, 2, seed=44)
    out = {}
    for dev in ("CPU", "PYTHON"):
        x, w = Tensor(xs, device=dev), Tensor(ws, device=dev)
        loss = ((x @ w).relu() + x.sum(1, keepdim=True).sigmoid()).logsumexp(1).mean() + x.max() * w.abs().mean()
        gx, gw = loss.gradient(x, w)
        Tensor.realize(gx, gw)
        assert gx.device == dev
        out[dev] = (gx.numpy(), gw.numpy())
    for c, p in zip(out["CPU"], out["PYTHON"]):
        np.testing.assert_allclose(p, c, rtol=1e-5, atol=1e-6)


@pytest.mark.no_roundtrip
def test_mlp_backward_kernel_count() -> None:
    # a 2-layer MLP's loss and all 4 parameter gradients: a handful of fused kernels, not one per op
    rng = np.random.default_rng(45)
    xs, w1s, b1s, w2s = (rng.standard_normal(s).astype(np.float32) for s in ((8, 6), (6, 16), (16,), (16, 3)))
    b2s = rng.standard_normal(3).astype(np.float32)
    params = [Tensor(a).contiguous().realize() for a in (w1s, b1s, w2s, b2s)]
    x = Tensor(xs).realize()
    w1, b1, w2, b2 = params
    loss = x.linear(w1, b1).relu().linear(w2, b2).log_softmax(1)[:, 0].mean().neg()
    grads = loss.gradient(*params)
    GlobalCounters.reset()
    Tensor.realize(loss, *grads)
    kernels = GlobalCounters.kernel_count
    tp = [_to_torch(a) for a in (w1s, b1s, w2s, b2s)]
    tloss = -F.linear(F.linear(torch.tensor(xs), tp[0].T, tp[1]).relu(), tp[2].T, tp[3]).log_softmax(1)[:, 0].mean()
    tgrads = torch.autograd.grad(tloss, tp)
    assert_close(loss.numpy(), tloss, 1e-5, 1e-6, "loss")
    for g, tg in zip(grads, tgrads):
        assert_close(g.numpy(), tg, 1e-4, 1e-5, "gradient")
    assert kernels <= MLP_BACKWARD_KERNELS, f"{kernels} kernels"


# ---------------------------------------------------------------------------------------------------------------
# errors


def test_errors() -> None:
    x = Tensor(X)
    with pytest.raises(RuntimeError, match=r"gradient: the loss has shape \(3, 5\), not one element"):
        (x * 2).gradient(x)
    with pytest.raises(RuntimeError, match=r"backward: the loss has shape \(3, 5\)"):
        (x * 2).backward()
    with pytest.raises(TypeError, match="gradient: the loss has dtype dtypes.int32"):
        (x > 0).sum().gradient(x)
    i = Tensor([1, 2, 3])
    with pytest.raises(TypeError, match="gradient: target 0 has dtype dtypes.int32"):
        (i * 2.0).sum().gradient(i)
    other = Tensor(X)
    with pytest.raises(RuntimeError, match=r"gradient: target 1 \(shape \(3, 5\)\) is not in the graph"):
        (x * 2).sum().gradient(x, other)
    with pytest.raises(ValueError, match=r"gradient: gradient has shape \(5,\), the loss has shape \(3, 5\)"):
        (x * 2).gradient(x, gradient=Tensor(np.ones(5, np.float32)))
    with pytest.raises(ValueError, match=r"backward: gradient has shape \(\), the loss has shape \(3, 5\)"):
        (x * 2).backward(gradient=Tensor(1.0))
    with pytest.raises(TypeError, match="gradient: target 0 is a ndarray"):
        (x * 2).sum().gradient(X)


def test_gradient_after_realize() -> None:
    # realize replaces a tensor's graph with a buffer: a loss built from the realized y no longer depends on x. A
    # realized one-element loss of a tensor that requires a gradient keeps the graph it had: d/dx sum(3x) = 3
    x = Tensor(X, requires_grad=True)
    y = (x * 2).realize()
    with pytest.raises(RuntimeError, match="target 0 .*not in the graph.*realized"):
        y.sum().gradient(x)
    loss = (x * 3).sum()
    loss.realize()
    (dx,) = loss.gradient(x)
    np.testing.assert_array_equal(dx.numpy(), np.full(X.shape, 3.0, np.float32))
    plain = Tensor(X)  # nothing requires a gradient: the loss keeps no graph
    loss = (plain * 3).sum()
    loss.realize()
    with pytest.raises(RuntimeError, match="target 0 .*not in the graph"):
        loss.gradient(plain)


def test_constants_clone_and_accumulation_follow_torch() -> None:
    # a constant with requires_grad gets a gradient, clone() keeps .grad (tinygrad), and two
    # backward() calls add up (torch)
    c, tc = Tensor(3.0, requires_grad=True), torch.tensor(3.0, requires_grad=True)
    (c * c * 2).backward()
    (tc * tc * 2).backward()
    assert c.grad is not None and c.grad.item() == tc.grad.item()
    w, tw = Tensor([1.0, -2.0], requires_grad=True), torch.tensor([1.0, -2.0], requires_grad=True)
    for _ in range(2):
        (w * w * w).sum().backward()
        (tw * tw * tw).sum().backward()
    assert w.grad is not None
    np.testing.assert_array_equal(w.grad.numpy(), tw.grad.numpy())
    copy = w.clone()
    assert copy.grad is not None and copy.grad is not w.grad
    np.testing.assert_array_equal(copy.grad.numpy(), w.grad.numpy())
    w.grad = None
    assert copy.grad is not None  # its own copy
