"""Reductions, scans and sorting against numpy (and torch where numpy has no equivalent: logcumsumexp, cummax
with NaN, topk and sort semantics with NaN and descending ties).

No expected value comes from zeptograd itself. References are computed in float64 (or int64) and cast to the
dtype zeptograd must produce. Float16 inputs are multiples of 1/8 in [-2, 2], so their sums are exact in the
float32 accumulator and the result is the correctly rounded float16. Tests on the PYTHON device (an
interpreter) keep their tensors at 64 elements or fewer.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from dtype_support import needs_dtype

from zeptograd import GlobalCounters, Tensor, dtypes
from zeptograd.dtype import NARROW_INTS, DType

DEVICES = ["CPU", "PYTHON"]
DTYPES = [dtypes.float32, dtypes.float16, dtypes.int32, dtypes.bool]
NP = {dtypes.float32: np.float32, dtypes.float16: np.float16, dtypes.int32: np.int32, dtypes.bool: np.bool_}
TOL = {dtypes.float32: {"rtol": 2e-5, "atol": 1e-5}, dtypes.float16: {"rtol": 2e-3, "atol": 1e-3}}


def data(shape: tuple[int, ...], dtype: DType, seed: int = 0, small: bool = False) -> np.ndarray:
    """Deterministic test data; `small` keeps products of a few dozen values in range (ints in [-2, 2])."""
    rng = np.random.default_rng(seed)
    if dtype == dtypes.bool:
        return rng.random(shape) < 0.5
    if dtype == dtypes.int32:
        return rng.integers(-2 if small else -10, 3 if small else 11, size=shape).astype(np.int32)
    if dtype == dtypes.float16:
        return (rng.integers(-16, 17, size=shape) / 8).astype(np.float16)
    lo, hi = (0.5, 1.5) if small else (-2, 2)
    sign = np.where(rng.random(shape) < 0.5, -1, 1)
    return (rng.uniform(lo, hi, size=shape) * sign).astype(np.float32)


def wide(a: np.ndarray) -> np.ndarray:
    return a.astype(np.float64 if a.dtype.kind == "f" else np.int64)


def check(t: Tensor, expected: Any, dtype: DType, **tol: float) -> None:
    """t has expected's shape, the dtype `dtype` and expected's values (within tolerance for floats)."""
    expected = np.asarray(expected)
    assert t.dtype == dtype, f"dtype {t.dtype} != {dtype}"
    assert t.shape == expected.shape, f"shape {t.shape} != {expected.shape}"
    out = t.numpy()
    assert out.dtype == NP[dtype]
    if dtypes.is_float(dtype):
        with np.errstate(all="ignore"):
            want = expected.astype(np.float64).astype(NP[dtype]).astype(np.float64)
        np.testing.assert_allclose(out.astype(np.float64), want, equal_nan=True, **(tol or TOL[dtype]))
    else:
        np.testing.assert_array_equal(out, expected.astype(NP[dtype]))


def np_logsumexp(a: np.ndarray, axis: Any, keepdims: bool) -> np.ndarray:
    with np.errstate(all="ignore"):
        m = np.max(a, axis=axis, keepdims=True, initial=-np.inf)  # the initial value: -inf over an empty axis
        m = np.where(np.isfinite(m), m, 0)
        out = np.log(np.sum(np.exp(a - m), axis=axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis=axis)


def float_out(dtype: DType) -> DType:
    return dtype if dtypes.is_float(dtype) else dtypes.float32


def int_out(dtype: DType) -> DType:
    return dtypes.int32 if dtype in (dtypes.bool, dtypes.int32) else dtype


# op name -> (reference over a float64/int64/bool array, the result dtype for an input dtype)
REDUCTIONS: dict[str, tuple[Callable[..., np.ndarray], Callable[[DType], DType]]] = {
    "sum": (lambda a, axis, kd: np.sum(a, axis=axis, keepdims=kd), int_out),
    "prod": (lambda a, axis, kd: np.prod(a, axis=axis, keepdims=kd), int_out),
    "max": (lambda a, axis, kd: np.max(a, axis=axis, keepdims=kd), lambda dt: dt),
    "min": (lambda a, axis, kd: np.min(a, axis=axis, keepdims=kd), lambda dt: dt),
    "mean": (lambda a, axis, kd: np.mean(a, axis=axis, keepdims=kd), float_out),
    "var": (lambda a, axis, kd: np.var(a, axis=axis, keepdims=kd, ddof=1), float_out),
    "std": (lambda a, axis, kd: np.std(a, axis=axis, keepdims=kd, ddof=1), float_out),
    "any": (lambda a, axis, kd: np.any(a, axis=axis, keepdims=kd), lambda dt: dtypes.bool),
    "all": (lambda a, axis, kd: np.all(a, axis=axis, keepdims=kd), lambda dt: dtypes.bool),
    "logsumexp": (lambda a, axis, kd: np_logsumexp(a.astype(np.float64), axis, kd), float_out),
}


def reference(op: str, a: np.ndarray, axis: Any, keepdim: bool) -> np.ndarray:
    src = a if a.dtype == np.bool_ and op in ("max", "min", "any", "all") else wide(a)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # numpy warns about the mean and var of empty slices
        return REDUCTIONS[op][0](src, axis, keepdim)


# ---------------------------------------------------------------------------------------------------------------
# reductions


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op", list(REDUCTIONS))
def test_reduction_matches_numpy(op: str, dtype: DType, device: str):
    needs_dtype(device, dtype)
    a = data((2, 3, 4), dtype, seed=len(op), small=op == "prod")
    t = Tensor(a, device=device)
    for axis, keepdim in [(None, False), (0, True), ((-1, 0), False)]:
        out = getattr(t, op)(axis=axis, keepdim=keepdim)
        check(out, reference(op, a, axis, keepdim), REDUCTIONS[op][1](dtype))


@pytest.mark.parametrize("op", list(REDUCTIONS))
def test_dim_alias_and_positional_axis(op: str):
    a = data((3, 5), dtypes.float32, seed=7, small=True)
    t = Tensor(a)
    want = reference(op, a, 1, False)
    check(getattr(t, op)(dim=1), want, dtypes.float32 if op not in ("any", "all") else dtypes.bool)
    check(getattr(t, op)(1), want, dtypes.float32 if op not in ("any", "all") else dtypes.bool)
    check(getattr(t, op)(dim=(0, 1), keepdim=True), reference(op, a, (0, 1), True), getattr(t, op)().dtype)
    with pytest.raises(TypeError, match=f"{op}.*axis.*dim"):
        getattr(t, op)(axis=0, dim=1)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape", [(0,), (0, 3), (3, 0), (2, 0, 4)], ids=str)
def test_reductions_over_empty_axes(shape: tuple[int, ...], device: str):
    # as torch: sum 0, prod 1, mean/var/std nan, any False, all True, logsumexp -inf
    a = np.zeros(shape, np.float32)
    t = Tensor(a, device=device)
    for axis in [None, 0, tuple(range(len(shape)))]:
        for op in ["sum", "prod", "mean", "var", "std", "any", "all", "logsumexp"]:
            dt = dtypes.bool if op in ("any", "all") else dtypes.float32
            want = reference(op, a, axis, True)
            check(getattr(t, op)(axis=axis, keepdim=True), want, dt)
    i = Tensor(np.zeros(shape, np.int32), device=device)
    check(i.prod(axis=0), np.ones(shape[1:], np.int64), dtypes.int32)
    check(i.mean(axis=0), np.full(shape[1:], np.nan), dtypes.float32)
    check(Tensor(np.zeros(shape, np.bool_), device=device).sum(axis=0), np.zeros(shape[1:]), dtypes.int32)


@pytest.mark.parametrize("op", ["max", "min", "argmax", "argmin"])
def test_max_min_argmax_of_empty_axis_raise(op: str):
    t = Tensor.ones(2, 0, 3)
    with pytest.raises(IndexError, match=rf"{op}.*axis 1.*\(2, 0, 3\)"):
        getattr(t, op)(axis=1)
    with pytest.raises(IndexError, match=rf"{op}.*axis 1.*\(2, 0, 3\)"):
        getattr(t, op)(dim=-2, keepdim=True)
    with pytest.raises(RuntimeError, match=rf"{op}.*\(2, 0, 3\)"):
        getattr(t, op)()
    # a non-empty axis of a tensor with an empty dimension is fine: an empty result
    assert getattr(t, op)(axis=2).shape == (2, 0)


@pytest.mark.parametrize("device", DEVICES)
def test_size_one_axes_and_0d(device: str):
    a = data((1, 5, 1), dtypes.float32, seed=3, small=True)
    t = Tensor(a, device=device)
    for op in ["sum", "prod", "max", "min", "mean", "logsumexp", "any", "all"]:
        for axis in [0, 2, (0, 2), -1]:
            check(getattr(t, op)(axis=axis), reference(op, a, axis, False), getattr(t, op)(axis=axis).dtype)
    check(t.var(axis=0), np.full((5, 1), np.nan), dtypes.float32)  # n - 1 = 0: nan, as torch
    check(t.var(axis=0, correction=0), np.zeros((5, 1)), dtypes.float32)
    check(t.argmax(axis=0), np.zeros((5, 1)), dtypes.int32)
    s = Tensor(2.5, device=device)
    check(s.sum(), np.array(2.5), dtypes.float32)
    check(s.mean(), np.array(2.5), dtypes.float32)
    check(s.prod(axis=0), np.array(2.5), dtypes.float32)
    check(s.argmax(), np.array(0), dtypes.int32)
    check(s.argmax(axis=0), np.array(0), dtypes.int32)
    check(s.logsumexp(), np.array(2.5), dtypes.float32)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("view", ["transpose", "flip", "shrink"])
def test_reductions_of_noncontiguous_inputs(view: str, device: str):
    base = data((5, 6), dtypes.float32, seed=11, small=True)
    views: dict[str, tuple[np.ndarray, Callable[[Tensor], Tensor]]] = {
        "transpose": (base.T, lambda t: t.permute(1, 0)),
        "flip": (base[::-1, ::-1], lambda t: t.flip((0, 1))),
        "shrink": (base[1:4, 2:6], lambda t: t.shrink(((1, 4), (2, 6)))),
    }
    a, fn = views[view]
    t = fn(Tensor(base, device=device))
    for op in ["sum", "prod", "max", "min", "mean", "var", "std", "logsumexp"]:
        for axis in [0, 1, None]:
            check(getattr(t, op)(axis=axis), reference(op, a, axis, False), dtypes.float32)
    for axis in [0, 1]:
        check(t.argmax(axis=axis), a.argmax(axis=axis), dtypes.int32)
        check(t.argmin(axis=axis), a.argmin(axis=axis), dtypes.int32)
        check(t.cumsum(axis=axis), np.cumsum(wide(a), axis=axis), dtypes.float32)
        check(t.cummax(axis=axis).values, np.maximum.accumulate(a, axis=axis), dtypes.float32)


def test_result_dtypes():
    needs_dtype(None, dtypes.float16, dtypes.uint8)
    i, b, h = Tensor([[1, 2], [3, 4]]), Tensor([[True, False], [True, True]]), Tensor([1.0, 2.0], dtype="float16")
    assert i.prod().dtype == dtypes.int32 and i.sum().dtype == dtypes.int32
    assert b.sum().dtype == dtypes.int32 and b.prod().dtype == dtypes.int32
    assert i.mean().dtype == dtypes.float32 and b.mean().dtype == dtypes.float32
    assert i.var().dtype == dtypes.float32 and i.std().dtype == dtypes.float32 and i.logsumexp().dtype == dtypes.float32
    assert i.any().dtype == dtypes.bool and i.all().dtype == dtypes.bool and h.any().dtype == dtypes.bool
    assert i.argmax().dtype == dtypes.int32 and h.argmin(0).dtype == dtypes.int32
    assert h.sum().dtype == dtypes.float16 and h.prod().dtype == dtypes.float16 and h.mean().dtype == dtypes.float16
    assert h.var().dtype == dtypes.float16 and h.std_mean()[1].dtype == dtypes.float16
    assert i.cumsum().dtype == dtypes.int32 and b.cumsum().dtype == dtypes.int32 and h.cumsum().dtype == dtypes.float16
    assert i.cumprod().dtype == dtypes.int32 and i.cummax().values.dtype == dtypes.int32
    assert b.cummin().values.dtype == dtypes.bool and b.cummin().indices.dtype == dtypes.int32
    assert i.logcumsumexp().dtype == dtypes.float32
    u8 = Tensor(np.array([200, 100], np.uint8))
    assert u8.sum().item() == 300 and u8.cumsum().tolist() == [200, 300]
    check(i.sum(dtype=dtypes.float32), np.array(10.0), dtypes.float32)
    check(i.cumsum(0, dtype=dtypes.float32), np.cumsum([[1, 2], [3, 4]], 0), dtypes.float32)


@pytest.mark.no_roundtrip
@pytest.mark.parametrize("np_dtype", [np.uint8, np.int8, np.int64, np.float64], ids=lambda d: d.__name__)
def test_other_dtypes(np_dtype: Any):
    needs_dtype(None, getattr(dtypes, np.dtype(np_dtype).name))
    a = (np.random.default_rng(14).standard_normal((3, 7)) * 40).astype(np_dtype)
    t = Tensor(a)
    kind = np.dtype(np_dtype).kind
    acc = {"u": np.uint32, "i": np.int32 if np.dtype(np_dtype).itemsize < 4 else np.int64, "f": np.float64}[kind]
    out = t.sum(axis=1).numpy()
    assert out.dtype == acc
    np.testing.assert_array_equal(out, a.astype(np.int64 if kind != "f" else np.float64).sum(1).astype(acc))
    np.testing.assert_array_equal(t.cumsum(1).numpy(), np.cumsum(a, 1, dtype=acc))
    for op in ["max", "min", "argmax", "argmin"]:
        np.testing.assert_array_equal(getattr(t, op)(axis=0).numpy(), getattr(a, op)(axis=0))
    np.testing.assert_array_equal(t.cummin(1).values.numpy(), np.minimum.accumulate(a, 1))
    for descending in (False, True):
        values, indices = t.sort(descending=descending)
        assert values.dtype == t.dtype and indices.dtype == dtypes.int32
        want = np.argsort(-a.astype(np.float64) if descending else a, axis=1, kind="stable")
        np.testing.assert_array_equal(indices.numpy(), want)
        np.testing.assert_array_equal(values.numpy(), np.take_along_axis(a, want, 1))


def test_float16_accumulates_in_float32():
    # 4096 * fp16(0.1): a float16 accumulator would stop growing at 256; the mean too must be ~0.1
    needs_dtype(None, dtypes.float16)
    a = np.full(4096, 0.1, np.float16)
    exact = a.astype(np.float64)
    check(Tensor(a).mean(), np.array(exact.mean()), dtypes.float16, rtol=1e-3, atol=0)
    check(Tensor(a).cumsum(), exact.cumsum(), dtypes.float16, rtol=1e-3, atol=0)
    check(Tensor(a).var(), np.array(exact.var(ddof=1)), dtypes.float16, rtol=0, atol=1e-6)
    # a sum over the float16 range divided back into it: the mean does not overflow
    big = np.full(8, 60000, np.float16)
    check(Tensor(big).mean(), np.array(60000.0), dtypes.float16, rtol=1e-3, atol=0)
    p = np.full(20, 1.5, np.float16)
    check(Tensor(p).prod(), np.array(1.5**20), dtypes.float16, rtol=1e-3, atol=0)


@pytest.mark.parametrize("device", DEVICES)
def test_argmax_argmin_ties_nan_and_flatten(device: str):
    a = np.array([[1, 7, 7, 0], [3, 3, 3, 3], [-1, -5, 2, -5]], np.int32)
    t = Tensor(a, device=device)
    for axis in [0, 1, -1]:
        check(t.argmax(axis=axis), a.argmax(axis=axis), dtypes.int32)  # numpy also gives the first on ties
        check(t.argmin(axis=axis), a.argmin(axis=axis), dtypes.int32)
        check(t.argmax(dim=axis, keepdim=True), np.expand_dims(a.argmax(axis=axis), axis), dtypes.int32)
    check(t.argmax(), np.array(a.argmax()), dtypes.int32)  # over the flattened tensor
    check(t.argmin(), np.array(a.argmin()), dtypes.int32)
    check(t.argmax(keepdim=True), np.array(a.argmax()).reshape(1, 1), dtypes.int32)
    f = np.array([[1.0, np.nan, 3.0, np.nan], [-np.inf, -np.inf, -1.0, 5.0], [2.0, 2.0, 2.0, 2.0]], np.float32)
    tf = Tensor(f, device=device)
    check(tf.argmax(axis=1), np.array([1, 3, 0]), dtypes.int32)  # NaN is the max (numpy and torch)
    check(tf.argmin(axis=1), np.array([1, 0, 0]), dtypes.int32)  # and the min
    check(tf.argmax(axis=0), np.nanargmax(np.where(np.isnan(f), np.inf, f), axis=0), dtypes.int32)
    b = np.array([[False, True, True], [False, False, False]])
    check(Tensor(b, device=device).argmax(axis=1), b.argmax(axis=1), dtypes.int32)
    check(Tensor(b, device=device).argmin(axis=1), b.argmin(axis=1), dtypes.int32)


@pytest.mark.parametrize("device", DEVICES)
def test_argmax_argmin_float16(device: str):
    needs_dtype(device, dtypes.float16)
    h = np.array([0.5, -2.0, 1.75, 1.75], np.float16)
    check(Tensor(h, device=device).argmax(), np.array(2), dtypes.int32)
    check(Tensor(h, device=device).argmin(), np.array(1), dtypes.int32)


@pytest.mark.parametrize("device", DEVICES)
def test_max_min_with_nan(device: str):
    f = np.array([[1.0, np.nan, 3.0], [-1.0, 0.0, 2.0]], np.float32)
    t = Tensor(f, device=device)
    check(t.max(axis=1), np.max(f, axis=1), dtypes.float32)
    check(t.min(axis=1), np.min(f, axis=1), dtypes.float32)
    check(t.max(), np.array(np.nan), dtypes.float32)
    check(t.min(axis=0), np.min(f, axis=0), dtypes.float32)


@pytest.mark.parametrize("device", DEVICES)
def test_logsumexp_is_stable(device: str):
    inf = math.inf
    f = np.array([[1000.0, 1000.0, -1000.0], [-1000.0, -1000.0, -1000.0], [-inf, -inf, -inf], [inf, 1.0, -inf]])
    t = Tensor(f.astype(np.float32), device=device)
    want = np.array([1000.0 + math.log(2), -1000.0 + math.log(3), -inf, inf])
    check(t.logsumexp(axis=1), want, dtypes.float32)
    check(t.logsumexp(axis=1, keepdim=True), want[:, None], dtypes.float32)
    check(t.logsumexp(axis=0), np_logsumexp(f, 0, False), dtypes.float32)
    nan_row = Tensor([[1.0, np.nan]], device=device)
    check(nan_row.logsumexp(axis=1), np.array([np.nan]), dtypes.float32)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.filterwarnings("ignore:.*degrees of freedom")  # torch warns about n - correction <= 0
def test_var_std_correction(device: str):
    torch = pytest.importorskip("torch")
    a = data((3, 7), dtypes.float32, seed=21)
    t, ta = Tensor(a, device=device), torch.tensor(a, dtype=torch.float64)
    for correction in [0, 1, 2, 7, 9]:  # 7 and 9: n - correction <= 0 gives inf/nan, as torch
        for axis in [1, None, (0, 1)]:
            check(t.var(axis, correction=correction), ta.var(axis, correction=correction).numpy(), dtypes.float32)
            check(t.std(dim=axis, correction=correction), ta.std(axis, correction=correction).numpy(), dtypes.float32)
    check(t.var(1, unbiased=False), a.astype(np.float64).var(1), dtypes.float32)
    v, m = t.var_mean(1, keepdim=True)
    tv, tm = torch.var_mean(ta, 1, keepdim=True)
    check(v, tv.numpy(), dtypes.float32)
    check(m, tm.numpy(), dtypes.float32)
    s, m = t.std_mean(dim=0, correction=0)
    ts, tm = torch.std_mean(ta, 0, correction=0)
    check(s, ts.numpy(), dtypes.float32)
    check(m, tm.numpy(), dtypes.float32)
    s, m = t.std_mean()
    check(s, np.array(a.astype(np.float64).std(ddof=1)), dtypes.float32)
    check(m, np.array(a.astype(np.float64).mean()), dtypes.float32)


def test_any_all_values():
    f = np.array([[0.0, -0.0, np.nan], [0.0, 0.0, 0.0], [1.0, 2.0, -3.0]], np.float32)
    t = Tensor(f)
    check(t.any(axis=1), np.any(f, axis=1), dtypes.bool)  # NaN is nonzero; -0.0 is zero
    check(t.all(axis=1), np.all(f, axis=1), dtypes.bool)
    check(t.all(axis=0, keepdim=True), np.all(f, axis=0, keepdims=True), dtypes.bool)
    i = np.array([[0, 5], [0, 0]], np.int32)
    check(Tensor(i).any(axis=0), np.any(i, axis=0), dtypes.bool)
    check(Tensor(i).all(), np.array(False), dtypes.bool)


def test_plain_reductions_are_one_kernel():
    t = Tensor(data((6, 9), dtypes.float32, seed=5)).realize()
    for fn in [lambda: t.mean(axis=1), lambda: t.sum(axis=0), lambda: t.max(dim=1), lambda: t.prod(), lambda: t.any()]:
        GlobalCounters.reset()
        fn().realize()
        assert GlobalCounters.kernel_count == 1
    GlobalCounters.reset()
    t.logsumexp(axis=1).realize()
    assert GlobalCounters.kernel_count == 2  # the max, then the shifted sum of exp


# ---------------------------------------------------------------------------------------------------------------
# scans


def _values(out: Any) -> Any:
    """A scan's values: cummax and cummin return (values, indices), as PyTorch's."""
    return out.values if isinstance(out, tuple) else out


SCANS: dict[str, Callable[[np.ndarray, int], np.ndarray]] = {
    "cumsum": lambda a, axis: np.cumsum(wide(a), axis=axis),
    "cumprod": lambda a, axis: np.cumprod(wide(a), axis=axis),
    "cummax": lambda a, axis: np.maximum.accumulate(a, axis=axis),
    "cummin": lambda a, axis: np.minimum.accumulate(a, axis=axis),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op", list(SCANS))
def test_scan_matches_numpy(op: str, dtype: DType, device: str):
    needs_dtype(device, dtype)
    a = data((3, 4, 5), dtype, seed=len(op) + 40, small=op == "cumprod")
    t = Tensor(a, device=device)
    out_dt = int_out(dtype) if op in ("cumsum", "cumprod") else dtype
    check(_values(getattr(t, op)()), SCANS[op](a, 0), out_dt)  # tinygrad's default axis is 0
    check(_values(getattr(t, op)(-1)), SCANS[op](a, -1), out_dt)
    check(_values(getattr(t, op)(dim=1)), SCANS[op](a, 1), out_dt)


@pytest.mark.parametrize("device", DEVICES)
def test_scan_sizes_zero_one_and_0d(device: str):
    for op in [*SCANS, "logcumsumexp"]:
        for shape in [(0,), (3, 0), (0, 4), (1,), (4, 1)]:
            a = data(shape, dtypes.float32, seed=2)
            want = SCANS[op](a, -1) if op != "logcumsumexp" else np.logaddexp.accumulate(wide(a), axis=-1)
            check(_values(getattr(Tensor(a, device=device), op)(-1)), want, dtypes.float32)
        check(_values(getattr(Tensor(1.5, device=device), op)(0)), np.array(1.5), dtypes.float32)


def test_scan_with_nan_and_inf():
    torch = pytest.importorskip("torch")
    f = np.array([[1.0, np.nan, 3.0, 0.5], [-np.inf, 2.0, np.inf, 1.0], [5.0, 4.0, np.nan, 6.0]], np.float32)
    t, tt = Tensor(f), torch.tensor(f)
    check(t.cummax(1).values, torch.cummax(tt, 1).values.numpy(), dtypes.float32)  # NaN propagates, as torch
    check(t.cummin(1).values, torch.cummin(tt, 1).values.numpy(), dtypes.float32)
    check(t.cummax(1).indices, torch.cummax(tt, 1).indices.numpy(), dtypes.int32)  # the last NaN so far
    check(t.cummin(1).indices, torch.cummin(tt, 1).indices.numpy(), dtypes.int32)
    with np.errstate(invalid="ignore"):
        check(t.cumsum(1), np.cumsum(f.astype(np.float64), 1), dtypes.float32)
    check(t.logcumsumexp(1), torch.logcumsumexp(tt.double(), 1).numpy(), dtypes.float32)


@pytest.mark.parametrize("device", DEVICES)
def test_logcumsumexp_matches_torch(device: str):
    needs_dtype(device, dtypes.float16)
    torch = pytest.importorskip("torch")
    inf = math.inf
    f = np.array(
        [[-1000.0, 1000.0, 0.0, 1000.0], [-inf, -inf, 0.0, -inf], [0.5, -0.25, 2.0, 1.0], [-inf, -inf, -inf, -inf]]
    )
    t, tt = Tensor(f.astype(np.float32), device=device), torch.tensor(f)
    for axis in [0, 1, -1]:
        check(t.logcumsumexp(axis), torch.logcumsumexp(tt, axis).numpy(), dtypes.float32)
    check(t.logcumsumexp(dim=1), torch.logcumsumexp(tt, 1).numpy(), dtypes.float32)
    h = data((2, 8), dtypes.float16, seed=9)
    check(
        Tensor(h, device=device).logcumsumexp(1), torch.logcumsumexp(torch.tensor(wide(h)), 1).numpy(), dtypes.float16
    )
    i = data((2, 5), dtypes.int32, seed=10)
    check(
        Tensor(i, device=device).logcumsumexp(1),
        torch.logcumsumexp(torch.tensor(wide(i)).double(), 1).numpy(),
        dtypes.float32,
    )


@pytest.mark.no_roundtrip
def test_long_scans_run_in_blocks():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(8)
    # sizes around the block size (64) and the second level (64 * 64), and 10k
    for n in [63, 64, 65, 129, 4096, 4097, 10_000]:
        f = rng.standard_normal(n).astype(np.float32)
        GlobalCounters.reset()
        out = Tensor(f).cumsum().numpy()
        assert GlobalCounters.kernel_count <= 7  # a few block levels, not a kernel per element or per block
        np.testing.assert_allclose(out, f.astype(np.float64).cumsum(), rtol=0, atol=2e-4)
        i = rng.integers(-1000, 1000, n).astype(np.int32)
        check(Tensor(i).cumsum(), i.astype(np.int64).cumsum(), dtypes.int32)
        check(Tensor(f).cummax().values, np.maximum.accumulate(f), dtypes.float32)
        check(Tensor(i).cummin().values, np.minimum.accumulate(i), dtypes.int32)
        check(Tensor(i).cummax().indices, torch.cummax(torch.tensor(i), 0).indices.numpy(), dtypes.int32)
    f = rng.standard_normal((2, 3000)).astype(np.float32) * 30
    check(Tensor(f).logcumsumexp(1), torch.logcumsumexp(torch.tensor(wide(f)), 1).numpy(), dtypes.float32, rtol=1e-5)
    check(Tensor(f.T).logcumsumexp(0), torch.logcumsumexp(torch.tensor(wide(f.T)), 0).numpy(), dtypes.float32)
    p = (1 + rng.standard_normal(1000) * 1e-3).astype(np.float32)
    check(Tensor(p).cumprod(0), np.cumprod(wide(p)), dtypes.float32, rtol=1e-4)


@pytest.mark.no_roundtrip
def test_long_float32_cumsum_precision():
    f = np.random.default_rng(12).random(10_000).astype(np.float32)  # all positive: the running sum reaches 5000
    want = f.astype(np.float64).cumsum()
    out = Tensor(f).cumsum().numpy().astype(np.float64)
    assert np.max(np.abs(out - want) / want) < 1e-5


# ---------------------------------------------------------------------------------------------------------------
# sort, argsort, topk


def check_sort(values: Tensor, indices: Tensor, a: np.ndarray, axis: int, want_values: np.ndarray) -> None:
    """values equal want_values exactly; indices are int32, a permutation along the axis, and pick the values."""
    assert indices.dtype == dtypes.int32
    v, i = values.numpy(), indices.numpy()
    assert v.dtype == a.dtype
    np.testing.assert_array_equal(v, want_values)
    np.testing.assert_array_equal(np.take_along_axis(a, i.astype(np.int64), axis=axis), v)
    np.testing.assert_array_equal(
        np.sort(i, axis=axis),
        np.broadcast_to(
            np.arange(a.shape[axis]).reshape([-1 if d == axis % a.ndim else 1 for d in range(a.ndim)]), a.shape
        ),
    )


@pytest.mark.no_roundtrip  # large sorting-network graphs; test_sort_descending_ties_and_nan_as_torch round-trips one
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_sort_matches_numpy(dtype: DType, device: str):
    needs_dtype(device, dtype)
    a = data((3, 4, 5), dtype, seed=60)  # int32/float16/bool have many ties
    t = Tensor(a, device=device)
    values, indices = t.sort()
    check_sort(values, indices, a, -1, np.sort(a, axis=-1))
    # the sort is stable: equal values keep their order, so the indices are numpy's stable argsort
    np.testing.assert_array_equal(indices.numpy(), np.argsort(a, axis=-1, kind="stable"))
    down_v, down_i = t.sort(0, descending=True)
    check_sort(down_v, down_i, a, 0, np.flip(np.sort(a, axis=0), 0))
    check(t.argsort(dim=0), np.argsort(a, axis=0, kind="stable"), dtypes.int32)


def test_sort_descending_ties_and_nan_as_torch():
    torch = pytest.importorskip("torch")
    f = np.array([[3.0, np.nan, 1.0, -np.inf, np.inf, 1.0, np.nan, 2.0, 1.0, -1.0, 0.5]], np.float32)
    t, tt = Tensor(f), torch.tensor(f)
    for descending in (False, True):
        v, i = t.sort(descending=descending)
        tv, ti = torch.sort(tt, descending=descending, stable=True)
        np.testing.assert_array_equal(v.numpy(), tv.numpy())  # NaN last ascending, first descending
        np.testing.assert_array_equal(i.numpy(), ti.numpy())  # and stable, as torch's stable sort
    i = np.array([[5, 1, 5, 5, 0, 1, 7]], np.int32)
    v, idx = Tensor(i).sort(descending=True)
    tv, ti = torch.sort(torch.tensor(i), descending=True, stable=True)
    np.testing.assert_array_equal(v.numpy(), tv.numpy())
    np.testing.assert_array_equal(idx.numpy(), ti.numpy())


@pytest.mark.no_roundtrip  # large sorting-network graphs; test_sort_descending_ties_and_nan_as_torch round-trips one
@pytest.mark.parametrize("device", DEVICES)
def test_sort_sizes_and_views(device: str):
    rng = np.random.default_rng(61)
    for n in [0, 1, 2, 3, 5, 8, 13]:  # not powers of two: the padding must sort to the end and be cut off
        a = rng.standard_normal((2, n)).astype(np.float32)
        values, indices = Tensor(a, device=device).sort()
        assert values.shape == (2, n) and indices.shape == (2, n)
        check_sort(values, indices, a, -1, np.sort(a, axis=-1))
    v, i = Tensor(4.0, device=device).sort()
    assert v.shape == () and v.item() == 4.0 and i.item() == 0
    base = rng.standard_normal((6, 7)).astype(np.float32)
    for a, fn in [
        (base.T, lambda x: x.permute(1, 0)),
        (base[::-1, ::-1], lambda x: x.flip((0, 1))),
        (base[1:5, 2:7], lambda x: x.shrink(((1, 5), (2, 7)))),
    ]:
        values, indices = fn(Tensor(base, device=device)).sort(0)
        check_sort(values, indices, np.ascontiguousarray(a), 0, np.sort(a, axis=0))
    extremes = np.array([3, -(2**31), 2**31 - 1, 0, -(2**31), 2**31 - 1], np.int32)  # the padding value is no issue
    values, indices = Tensor(extremes, device=device).sort()
    check_sort(values, indices, extremes, 0, np.sort(extremes))


@pytest.mark.no_roundtrip
def test_sort_large():
    a = np.random.default_rng(62).standard_normal((3, 700)).astype(np.float32)
    a[0, ::7] = a[0, 1]  # ties
    values, indices = Tensor(a).sort()
    check_sort(values, indices, a, -1, np.sort(a, axis=-1))
    np.testing.assert_array_equal(indices.numpy(), np.argsort(a, axis=-1, kind="stable"))


@pytest.mark.no_roundtrip  # large sorting-network graphs; test_sort_descending_ties_and_nan_as_torch round-trips one
@pytest.mark.parametrize("device", DEVICES)
def test_topk_matches_torch(device: str):
    torch = pytest.importorskip("torch")
    a = data((4, 9), dtypes.float32, seed=70)
    a[1, :4] = a[1, 5]  # ties
    t, ta = Tensor(a, device=device), torch.tensor(a)
    for k, dim, largest in [(0, 1, True), (1, -1, True), (3, 1, False), (9, -1, True), (4, 0, True), (2, 0, False)]:
        v, i = t.topk(k, dim=dim, largest=largest)
        tv, _ = torch.topk(ta, k, dim=dim, largest=largest)
        np.testing.assert_array_equal(v.numpy(), tv.numpy())
        assert i.dtype == dtypes.int32
        np.testing.assert_array_equal(np.take_along_axis(a, i.numpy().astype(np.int64), axis=dim), tv.numpy())
    f = np.array([1.0, np.nan, 5.0, 5.0, -np.inf], np.float32)
    v, i = Tensor(f, device=device).topk(3)
    tv, _ = torch.topk(torch.tensor(f), 3)
    np.testing.assert_array_equal(v.numpy(), tv.numpy())  # NaN counts as the largest
    assert i.numpy()[0] == 1 and sorted(i.numpy()[1:].tolist()) == [2, 3]
    iv, ii = Tensor(np.array([3, 9, 1, 9], np.int32), device=device).topk(2, largest=False)
    assert iv.tolist() == [1, 3] and ii.tolist() == [2, 0] and iv.dtype == dtypes.int32


# ---------------------------------------------------------------------------------------------------------------
# errors

ALL_AXIS_OPS = [*REDUCTIONS, "argmax", "argmin", *SCANS, "logcumsumexp"]


@pytest.mark.parametrize("op", ALL_AXIS_OPS)
def test_axis_out_of_range_names_op_and_axis(op: str):
    with pytest.raises(IndexError, match=rf"{op}.*axis 2.*\(3, 4\)"):
        getattr(Tensor.ones(3, 4), op)(2)
    with pytest.raises(IndexError, match=rf"{op}.*axis -3"):
        getattr(Tensor.ones(3, 4), op)(dim=-3)


@pytest.mark.parametrize("op", ["sort", "argsort", "topk"])
def test_sort_errors(op: str):
    call: Callable[..., Any] = (lambda t, **kw: t.topk(1, **kw)) if op == "topk" else getattr(Tensor, op)
    with pytest.raises(IndexError, match=rf"{op}.*axis 2.*\(3, 4\)"):
        call(Tensor.ones(3, 4), dim=2)
    with pytest.raises(TypeError, match=op):
        call(Tensor.ones(3, 4), dim=(0, 1))


def test_topk_k_out_of_range():
    for k in [4, -1]:
        with pytest.raises(RuntimeError, match=rf"topk.*k={k}.*size 3.*\(2, 3\)"):
            Tensor.ones(2, 3).topk(k)
    with pytest.raises(RuntimeError, match=r"topk.*k=3.*size 2"):
        Tensor.ones(2, 3).topk(3, dim=0)


def test_argument_errors():
    with pytest.raises(TypeError, match="cumsum.*axis.*dim"):
        Tensor.ones(3).cumsum(0, dim=0)
    with pytest.raises(TypeError, match="cumsum.*one int axis"):
        Tensor.ones(3, 2).cumsum((0, 1))
    with pytest.raises(TypeError, match="argmax.*one int axis"):
        Tensor.ones(3, 2).argmax((0, 1))
    with pytest.raises(ValueError, match="sum.*repeats"):
        Tensor.ones(3, 2).sum((0, 0))
    with pytest.raises(TypeError, match="mean.*axis"):
        Tensor.ones(3, 2).mean(axis=0, dim=0)


# *** robustness: a non-int axis fails naming the op ***


@pytest.mark.parametrize("op", ["sum", "prod", "max", "min", "mean", "var", "std", "any", "all", "logsumexp"])
@pytest.mark.parametrize("bad", [1.5, object()])
def test_axis_of_wrong_type(op: str, bad: Any) -> None:
    x = Tensor.ones(2, 3)
    with pytest.raises(TypeError, match=rf"{op}: axis must be an int or a sequence of ints, got"):
        getattr(x, op)(bad)
    with pytest.raises(TypeError, match=rf"{op}: axis must be an int or a sequence of ints, got"):
        getattr(x, op)(dim=bad)


@pytest.mark.parametrize("op", ["var", "std", "var_mean", "std_mean"])
def test_correction_of_wrong_type(op: str) -> None:
    with pytest.raises(TypeError, match=rf"{op}: correction must be a number, got 'a'"):
        getattr(Tensor.ones(2, 3), op)(1, correction="a")


def test_sum_dtype_name_names_the_op() -> None:
    with pytest.raises(TypeError, match=r"sum: unknown dtype name 'bogus'"):
        Tensor.ones(2, 3).sum(dtype="bogus")
    for op in ("prod", "cumsum", "cumprod"):
        with pytest.raises(TypeError, match=rf"{op}: unknown dtype name 'bogus'"):
            getattr(Tensor.ones(2, 3), op)(0, dtype="bogus")


# ---------------------------------------------------------------------------------------------------------------
# cummax/cummin indices, sum/prod dtype= in every spelling


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op", ["cummax", "cummin"])
def test_cummax_cummin_indices_match_torch(op: str, dtype: DType, device: str):
    needs_dtype(device, dtype)
    torch = pytest.importorskip("torch")
    a = data((3, 4, 5), dtype, seed=len(op) + 7, small=True)  # small ints and bools: many ties
    for axis in (0, 1, -1):
        values, indices = getattr(Tensor(a, device=device), op)(axis)
        want = getattr(torch, op)(torch.tensor(a), axis)
        check(values, want.values.numpy(), dtype)
        check(indices, want.indices.numpy(), dtypes.int32)


def test_cummax_indices_long_axis_and_named_fields():
    torch = pytest.importorskip("torch")
    i = np.random.default_rng(3).integers(-5, 6, (2, 300)).astype(np.int32)  # ties across the 64-element blocks
    out = Tensor(i).cummin(dim=1)
    want = torch.cummin(torch.tensor(i), dim=1)
    check(out.values, want.values.numpy(), dtypes.int32)
    check(out.indices, want.indices.numpy(), dtypes.int32)
    empty, scalar = Tensor(np.zeros((2, 0), np.float32)).cummax(1), Tensor(4.0).cummax(0)
    assert empty.indices.shape == (2, 0) and scalar.indices.shape == () and scalar.indices.item() == 0


SUM_DTYPES = ["float64", "int16", "int64", "uint8", "float16", "int32"]


@pytest.mark.parametrize("name", SUM_DTYPES)
def test_sum_prod_dtype_every_spelling_matches_torch(name: str):
    needs_dtype(None, getattr(dtypes, name))
    torch = pytest.importorskip("torch")
    a = np.array([[100, 27, 3], [-4, 5, 90]], np.int32)
    tt = torch.tensor(a)
    for spelling in (name, getattr(dtypes, name), np.dtype(name), getattr(np, name), getattr(torch, name)):
        for op in ("sum", "prod"):
            got = getattr(Tensor(a), op)(1, dtype=spelling)
            want = getattr(tt, op)(1, dtype=getattr(torch, name)).numpy()
            assert got.dtype == getattr(dtypes, name), (op, spelling)
            np.testing.assert_array_equal(got.numpy(), want)


def test_unknown_dtype_spellings_are_type_errors():
    torch = pytest.importorskip("torch")
    for bad in (np.complex64, torch.complex64, "float128", 3):
        with pytest.raises(TypeError):
            Tensor([1.0]).sum(dtype=bad)


def test_dtype_min_max_match_numpy():
    for dt in dtypes.ints:
        if dt in NARROW_INTS:
            continue  # numpy has no int4: test_narrow_int.py checks them against ml_dtypes
        info = np.iinfo(np.dtype(dt.name))
        assert (dt.min, dt.max) == (int(info.min), int(info.max)), dt
    assert (dtypes.bool.min, dtypes.bool.max) == (False, True)
    for dt in (dtypes.float16, dtypes.float32, dtypes.float64):
        assert dt.min == -math.inf and dt.max == math.inf  # tinygrad's: a float's range ends at infinity
