"""Indexing against numpy (torch for scatter/scatter_reduce): __getitem__, __setitem__, gather, scatter,
scatter_reduce, masked_fill, masked_select, nonzero, one_hot.

numpy is the oracle; no expected value comes from zeptograd itself. The index table is applied to a numpy array
and to a Tensor of the same values; index tensors are written as `T(...)` (an integer Tensor for zeptograd, an
array for numpy) and bool masks as `M(...)`. The PYTHON device is an interpreter: its tests use at most 64
elements.
"""

from __future__ import annotations

import re
import warnings
from typing import Any

import numpy as np
import pytest

from zeptograd import Device, GlobalCounters, Tensor, dtypes
from zeptograd.dtype import DType

DEVICES = ["CPU", "PYTHON"]
NP = {dtypes.float32: np.float32, dtypes.float16: np.float16, dtypes.int32: np.int32, dtypes.bool: np.bool_}


class T:
    """An integer index: a Tensor for zeptograd, an array for numpy."""

    def __init__(self, a: Any, dtype: Any = np.int32):
        self.a = np.asarray(a, dtype)

    def __repr__(self) -> str:
        return f"T({self.a.tolist()})"


class M(T):
    """A bool mask index: a bool Tensor for zeptograd, a bool array for numpy."""

    def __init__(self, a: Any):
        super().__init__(a, np.bool_)

    def __repr__(self) -> str:
        return f"M({self.a.tolist()})"


class _Ix:
    """I[...] is the index tuple written between the brackets."""

    def __getitem__(self, idx: Any) -> Any:
        return idx


I = _Ix()  # noqa: E741


def np_index(idx: Any) -> Any:
    if isinstance(idx, tuple):
        return tuple(np_index(i) for i in idx)
    return idx.a if isinstance(idx, T) else idx


def zg_index(idx: Any, device: str) -> Any:
    if isinstance(idx, tuple):
        return tuple(zg_index(i, device) for i in idx)
    return Tensor(idx.a, device=device) if isinstance(idx, T) else idx


def data(shape: tuple[int, ...], dtype: DType, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype == dtypes.bool:
        return rng.random(shape) < 0.5
    if dtype == dtypes.int32:
        return rng.integers(-50, 50, size=shape).astype(np.int32)
    return (rng.integers(-64, 64, size=shape) / 8).astype(NP[dtype])  # exact in float16


def check(t: Tensor, expected: np.ndarray, dtype: DType | None = None, rtol: float = 0.0) -> None:
    expected = np.asarray(expected)
    if dtype is not None:
        assert t.dtype == dtype, f"dtype {t.dtype} != {dtype}"
    assert t.shape == expected.shape, f"shape {t.shape} != {expected.shape}"
    out = t.numpy()
    assert out.shape == expected.shape
    if rtol:
        np.testing.assert_allclose(out, expected.astype(out.dtype), rtol=rtol)
    else:
        np.testing.assert_array_equal(out, expected.astype(out.dtype))


# ---------------------------------------------------------------------------------------------------------------
# __getitem__: the index table, on an array of shape (3, 4, 5)

GETITEM = [
    # ints
    I[0],
    I[-1],
    I[2],
    I[1, 2],
    I[-1, -2, -3],
    I[0, 0, 0],
    # slices: steps, negative steps, clamped and empty bounds
    I[:],
    I[1:],
    I[:-1],
    I[::2],
    I[::-1],
    I[::-2],
    I[2:0:-1],
    I[-100:100],
    I[5:10],
    I[3:1],
    I[1:3:5],
    I[:, 1:4:2, ::-2],
    I[:, ::3, 4:0:-3],
    I[:, -1:-5:-1, -2::-2],
    I[1:2, :, 3:-10:-1],
    # None and Ellipsis
    I[...],
    I[()],
    I[None],
    I[..., 1],
    I[1, ...],
    I[..., None],
    I[None, ...],
    I[None, 1, None, ::2],
    I[:, None, 2],
    I[..., ::-1, None, 0],
    # lists
    I[[0, 2]],
    I[[-1, 0, -1]],
    I[[[0, 1], [2, 2]]],
    I[[0, 2], [1, 3]],
    I[:, [3, 0, 1]],
    I[[0, 2], :, [1, 4]],
    I[:, [1, 3], [0, 4]],
    I[0, :, [1, 2]],
    I[:, 1, [0, 2]],
    I[..., [0, -1]],
    I[[[0], [2]], :, [1, 2, 3]],
    I[[1, 0], ::2, 1],
    I[1, [0, 1], 1],
    I[[0], None, [0]],
    I[:, [0, 1], None, [1, 2]],
    I[[]],
    # integer tensors
    I[T([0, 2])],
    I[T([[1], [0]]), T([0, 3])],
    I[T([-1, -3]), ::-1],
    I[1:, T([3, 0, 3])],
    I[None, T([0, 1]), None, :],
    I[T(2)],
    I[T([], np.int32)],
    I[T([1, 2]), 1:4:2, T([[0], [4]])],
    I[T([0, 1], np.int64), T([1, 2], np.uint8)],
    I[T([[2, 1]], np.int16), [[0], [3]], T(4)],
    # bool masks (data-dependent shape: realizes the mask)
    I[M([True, False, True])],
    I[M([[True, False, False, True], [False] * 4, [True] * 4])],
    I[:, M([False, True, True, False])],
    I[[True, False, True], 1],
    I[1, M([True] * 4), 2],
    # a mask over every axis: masked_select's scatter of the values
    I[M((np.arange(60).reshape(3, 4, 5) % 3 == 0).tolist())],
    I[M(np.zeros((3, 4, 5), bool).tolist())],
]


@pytest.mark.parametrize("idx", GETITEM, ids=repr)
def test_getitem_table(idx: Any):
    a = data((3, 4, 5), dtypes.float32)
    check(Tensor(a)[zg_index(idx, Device.DEFAULT)], a[np_index(idx)], dtypes.float32)


@pytest.mark.parametrize("idx", GETITEM[::3], ids=repr)
def test_getitem_table_python(idx: Any):
    a = data((3, 4, 5), dtypes.int32)
    check(Tensor(a, device="PYTHON")[zg_index(idx, "PYTHON")], a[np_index(idx)], dtypes.int32)


@pytest.mark.parametrize("dtype", [dtypes.int32, dtypes.bool, dtypes.float16])
@pytest.mark.parametrize(
    "idx",
    [
        I[1, ::-2],
        I[[0, 2], 1:3],
        I[T([[1, -1]]), None, T([0])],
        I[M([True, False, True])],
        I[M((np.arange(60).reshape(3, 4, 5) % 7 < 3).tolist())],
    ],
)
def test_getitem_dtypes(dtype: DType, idx: Any):
    a = data((3, 4, 5), dtype, seed=1)
    check(Tensor(a)[zg_index(idx, Device.DEFAULT)], a[np_index(idx)], dtype)


# Non-contiguous inputs equal to a (3, 4, 5) array, built by movement ops from another layout.
VIEWS = {
    "permute": lambda a: Tensor(np.ascontiguousarray(a.transpose(2, 0, 1))).permute(1, 2, 0),
    "flip": lambda a: Tensor(np.ascontiguousarray(a[::-1, :, ::-1])).flip((0, 2)),
    "shrink": lambda a: Tensor(np.pad(a, ((1, 0), (0, 2), (3, 1)))).shrink(((1, 4), (0, 4), (3, 8))),
    "sliced": lambda a: Tensor(np.repeat(a, 2, axis=1))[:, ::2],
}


@pytest.mark.parametrize("view", VIEWS)
@pytest.mark.parametrize(
    "idx",
    [
        I[::-1, 1:3],
        I[..., ::-2],
        I[1, [0, 3], ::2],
        I[T([2, 0]), :, T([1, 1])],
        I[M((np.arange(60).reshape(3, 4, 5) % 4 == 1).tolist())],
    ],
    ids=repr,
)
def test_getitem_noncontiguous(view: str, idx: Any):
    a = data((3, 4, 5), dtypes.float32, seed=2)
    x = VIEWS[view](a)
    assert x.shape == (3, 4, 5)
    check(x[zg_index(idx, Device.DEFAULT)], a[np_index(idx)])


@pytest.mark.parametrize(
    "shape,idx",
    [
        ((0, 3), I[:, 1]),
        ((0, 3), I[::-1, ::2]),
        ((0, 3), I[None, ..., [0, 2]]),
        ((2, 0, 3), I[1, :, ::-1]),
        ((2, 0, 3), I[[1, 0], :, 2]),
        ((2, 0, 3), I[:, [], 0]),
        ((1, 4), I[0]),
        ((1, 4), I[-1:, ::3]),
        ((1, 4), I[[0, 0, 0], 1:]),
        ((1, 4), I[T([[0], [0]]), T([3, 2, 1])]),
        ((1,), I[0]),
        ((), I[()]),
        ((), I[None]),
        ((), I[...]),
    ],
    ids=repr,
)
@pytest.mark.parametrize("device", DEVICES)
def test_getitem_odd_shapes(shape: tuple[int, ...], idx: Any, device: str):
    a = data(shape, dtypes.float32, seed=3)
    x = Tensor(a, device=device) if shape else Tensor(float(a), device=device)
    check(x[zg_index(idx, device)], a[np_index(idx)], dtypes.float32)


def test_getitem_numpy_integer_index():
    a = data((3, 4), dtypes.int32)
    check(Tensor(a)[np.int64(-1), np.array([0, 3])], a[-1, [0, 3]])


def test_getitem_tensor_index_out_of_range_is_zero():
    # index tensors are data: out of range (after one wrap of negatives) gives 0, never an error or a bad read
    x = Tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    out = x[Tensor([0, 3, -1, -4, 100])]
    check(out, np.array([[1, 2], [0, 0], [5, 6], [0, 0], [0, 0]], np.float32))
    check(x[Tensor([2, 5]), Tensor([1, 0])], np.array([6, 0], np.float32))
    # an int64 index past 32 bits is out of range too (cast to 32 bits first, 2**32 + 1 would be row 1)
    wide = Tensor(np.array([2**32 + 1, 1, -(2**32) - 1], np.int64))
    check(x[wide], np.array([[0, 0], [3, 4], [0, 0]], np.float32))
    t = Tensor(np.zeros(3, np.float32)).realize()
    t[wide] = 7.0
    check(t, np.array([0, 7, 0], np.float32))


def test_getitem_inf_nan_do_not_leak():
    a = np.array([np.inf, -np.inf, np.nan, 2.0], np.float32)
    check(Tensor(a)[Tensor([3, 0, 3])], np.array([2.0, np.inf, 2.0], np.float32))
    out = Tensor(a)[Tensor([2, 1])].numpy()
    assert np.isnan(out[0]) and out[1] == -np.inf


def test_basic_slicing_launches_no_kernel():
    x = Tensor(data((6, 8), dtypes.float32)).realize()
    GlobalCounters.reset()
    y = x[1:3, ::-2][None, ..., 1:]
    z = x[-1][::3]
    assert GlobalCounters.kernel_count == 0
    assert y.shape == (1, 2, 3) and z.shape == (3,)
    GlobalCounters.reset()
    w = (x[1:3] + 1).realize()
    assert GlobalCounters.kernel_count == 1
    check(w, x.numpy()[1:3] + 1)


def test_getitem_tensor_index_is_one_kernel():
    x = Tensor(data((4, 5), dtypes.float32)).realize()
    idx = Tensor([3, 0, 2]).realize()
    GlobalCounters.reset()
    out = (x[idx, 1:] * 2).realize()
    assert GlobalCounters.kernel_count == 1
    check(out, x.numpy()[[3, 0, 2], 1:] * 2)


def test_getitem_is_lazy_for_tensor_indices():
    x = Tensor(data((4, 5), dtypes.float32)).realize()
    idx = Tensor([3, 0]).realize()
    GlobalCounters.reset()
    x[idx, T([1]).a.tolist()]
    x.gather(1, Tensor([[0], [1], [2], [3]]))
    x.masked_select(x > 0, size=3)
    x.nonzero(size=4)
    x.cast(dtypes.int32).one_hot(3)
    assert GlobalCounters.kernel_count == 0


# ---------------------------------------------------------------------------------------------------------------
# __setitem__: compared with numpy's in-place assignment

SETITEM = [
    (I[1], 7.5),
    (I[-1, 2], -1.0),
    (I[:, 1:3], 2.0),
    (I[::2], np.arange(20, dtype=np.float32).reshape(4, 5)),
    (I[::-1, ::-2], np.arange(3, dtype=np.float32).reshape(3, 1, 1)),
    (I[1:, 3:0:-2, 1::3], np.arange(8, dtype=np.float32).reshape(2, 2, 2)),
    (I[..., 4], np.arange(4, dtype=np.float32)),
    (I[None, 0], np.ones((1, 1, 4, 5), np.float32)),
    (I[...], 3.0),
    (I[5:], 9.0),
    (I[[0, 2]], np.arange(5, dtype=np.float32)),
    (I[:, [3, 0]], np.arange(6, dtype=np.float32).reshape(3, 2, 1)),
    (I[[0, 2], :, [1, -1]], np.arange(8, dtype=np.float32).reshape(2, 4)),
    (I[T([1, 1]), 2, T([0, 4])], np.array([10.0, 20.0], np.float32)),
    (I[1:, T([[3], [0]]), ::2], 4.0),
    (I[0, :, [1, 2]], np.arange(8, dtype=np.float32).reshape(2, 4)),
    (I[M([False, True, True])], -2.0),
    (I[:, M([True, False, False, True]), 1:3], np.arange(12, dtype=np.float32).reshape(3, 2, 2)),
    (I[[]], 1.0),
]


@pytest.mark.parametrize("idx,value", SETITEM, ids=lambda v: repr(v) if not isinstance(v, np.ndarray) else "arr")
@pytest.mark.parametrize("device", DEVICES)
def test_setitem_table(idx: Any, value: Any, device: str):
    a = data((3, 4, 5), dtypes.float32, seed=4)
    t = Tensor(a, device=device).realize()
    v = Tensor(value, device=device) if isinstance(value, np.ndarray) else value
    t[zg_index(idx, device)] = v
    want = a.copy()
    want[np_index(idx)] = value
    check(t, want, dtypes.float32)


def test_setitem_repeated_index_last_wins():
    t = Tensor.zeros(4).realize()
    t[[1, 3, 1, 1]] = Tensor([1.0, 2.0, 3.0, 4.0])
    check(t, np.array([0, 4, 0, 2], np.float32))
    t[Tensor([[0, 0], [0, 2]])] = Tensor([[5.0, 6.0], [7.0, 8.0]])
    check(t, np.array([7, 4, 8, 2], np.float32))


@pytest.mark.parametrize(
    "dtype,value",
    [(dtypes.int32, 2.9), (dtypes.int32, True), (dtypes.float16, 0.125), (dtypes.bool, 1), (dtypes.float16, "tensor")],
)
def test_setitem_casts_value(dtype: DType, value: Any):
    a = data((3, 4), dtype, seed=5)
    t = Tensor(a).realize()
    if value == "tensor":
        value_np = np.array([1.5, -2.0, 3.25], np.float32)
        t[:, 1] = Tensor(value_np)
        want = a.copy()
        want[:, 1] = value_np
    else:
        t[1:, ::2] = value
        want = a.copy()
        want[1:, ::2] = np.asarray(value).astype(NP[dtype])
    check(t, want, dtype)


def test_setitem_is_one_store_and_reads_before_see_old():
    a = data((4, 4), dtypes.float32)
    t = Tensor(a).realize()
    old = t * 1
    GlobalCounters.reset()
    t[1:3, ::2] = 5.0
    t.realize()
    assert GlobalCounters.kernel_count == 1
    want = a.copy()
    want[1:3, ::2] = 5
    check(t, want)
    check(old, a)


def test_setitem_value_reads_target():
    a = data((5,), dtypes.float32)
    t = Tensor(a).realize()
    t[1:] = t[:-1]
    want = a.copy()
    want[1:] = a[:-1].copy()
    check(t, want)


def test_setitem_lazy_target():
    t = Tensor(np.zeros((2, 3), np.float32)) + 1  # not realized: the setitem realizes it first
    t[0, 1] = 5
    check(t, np.array([[1, 5, 1], [1, 1, 1]], np.float32))


def test_setitem_bool_mask_value_broadcast_is_lazy():
    a = data((3, 4), dtypes.float32, seed=6)
    t = Tensor(a).realize()
    GlobalCounters.reset()
    t[t > 0] = 0.0
    assert GlobalCounters.kernel_count == 0
    want = a.copy()
    want[want > 0] = 0
    check(t, want)
    t[Tensor([True, False, True])] = Tensor([1.0, 2.0, 3.0, 4.0])
    want[[True, False, True]] = [1, 2, 3, 4]
    check(t, want)


# ---------------------------------------------------------------------------------------------------------------
# gather / scatter / scatter_reduce


def _torch():
    return pytest.importorskip("torch")


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("dtype", [dtypes.float32, dtypes.int32, dtypes.bool, dtypes.float16])
def test_gather(dim: int, dtype: DType):
    a = data((3, 4), dtype, seed=7)
    rng = np.random.default_rng(8)
    ishape = (2, 4) if dim == 0 else (3, 3)
    idx = rng.integers(0, a.shape[dim], size=ishape).astype(np.int32)
    # index smaller than the input on the other axis: take that part of the input (torch's rule)
    cut = a[tuple(slice(None) if d == dim % 2 else slice(0, ishape[d]) for d in range(2))]
    check(Tensor(a).gather(dim, Tensor(idx)), np.take_along_axis(cut, idx, axis=dim), dtype)


@pytest.mark.parametrize("device", DEVICES)
def test_gather_noncontiguous_and_odd(device: str):
    a = data((4, 3), dtypes.float32, seed=9)
    x = Tensor(np.ascontiguousarray(a.T), device=device).permute(1, 0)
    idx = np.array([[2, 0], [1, 1], [0, 2], [2, 2]], np.int32)
    check(x.gather(1, Tensor(idx, device=device).flip(0)), np.take_along_axis(a, idx[::-1], axis=1))
    check(x.gather(0, Tensor(np.zeros((0, 3), np.int32), device=device)), np.zeros((0, 3), np.float32))
    check(Tensor(2.5, device=device).gather(0, Tensor(0, device=device)), np.float32(2.5))
    # out of range (negative included) gives 0
    check(Tensor([1.0, 2.0], device=device).gather(0, Tensor([1, 2, -1], device=device)), np.array([2, 0, 0], "f"))


@pytest.mark.parametrize("reduce", [None, "add", "multiply"])
@pytest.mark.parametrize("device", DEVICES)
def test_scatter_vs_torch(reduce: str | None, device: str):
    torch = _torch()
    a = data((3, 5), dtypes.float32, seed=10)
    src = data((2, 4), dtypes.float32, seed=11)
    idx = np.array([[0, 1, 2, 0], [2, 0, 1, 1]], np.int64) if reduce else np.array([[0, 1, 2, 0], [2, 0, 1, 2]])
    for dim, ix in ((0, idx), (1, np.array([[4, 0, 2], [1, 3, 0]]))):
        kw = {"reduce": reduce} if reduce else {}
        with warnings.catch_warnings():  # torch deprecates reduce= with a tensor src; zeptograd keeps it
            warnings.simplefilter("ignore", UserWarning)
            want = torch.tensor(a).scatter(dim, torch.tensor(ix), torch.tensor(src[:, : ix.shape[1]]), **kw)
        out = Tensor(a, device=device).scatter(dim, Tensor(ix, device=device), Tensor(src, device=device), reduce)
        check(out, want.numpy(), dtypes.float32)
        want = torch.tensor(a).scatter(dim, torch.tensor(ix), value=2.0, **kw)
        check(Tensor(a, device=device).scatter(dim, Tensor(ix, device=device), value=2.0, reduce=reduce), want.numpy())


def test_scatter_repeated_last_wins_and_out_of_range():
    out = Tensor.zeros(3).scatter(0, Tensor([1, 1, 5, -1, 0]), Tensor([1.0, 2.0, 3.0, 4.0, 5.0]))
    check(out, np.array([5, 2, 0], np.float32))
    check(Tensor([1, 2, 3]).scatter(0, Tensor(np.zeros(0, np.int32)), 9), np.array([1, 2, 3], np.int32))


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dtype", [dtypes.float32, dtypes.int32])
def test_scatter_reduce_vs_torch(reduce: str, include_self: bool, dtype: DType):
    torch = _torch()
    a = data((4, 3), dtype, seed=12)
    src = data((5, 3), dtype, seed=13)
    if dtype == dtypes.float32:  # keep products exact
        a, src = np.round(a), np.round(src)
    idx = np.array([[0, 1, 3], [0, 1, 1], [3, 3, 1], [0, 1, 1], [3, 0, 1]], np.int64)  # row 2 never hit
    tt = {dtypes.float32: torch.float32, dtypes.int32: torch.int32}[dtype]
    want = torch.tensor(a, dtype=tt).scatter_reduce(
        0, torch.tensor(idx), torch.tensor(src, dtype=tt), reduce, include_self=include_self
    )
    out = Tensor(a).scatter_reduce(0, Tensor(idx), Tensor(src), reduce, include_self=include_self)
    check(out, want.numpy(), dtype, rtol=1e-6 if reduce == "mean" and dtype == dtypes.float32 else 0.0)


@pytest.mark.parametrize("reduce", ["prod", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("device", DEVICES)
def test_scatter_reduce_special_values_vs_torch(reduce: str, include_self: bool, device: str):
    # NaN, inf and -inf sent to a position and in self: a maximum's NaN wins, inf * 0 is NaN (the scatter that runs
    # these combines the values as the reduction it replaces does: closedform.scatter_form)
    torch = _torch()
    nan, inf = float("nan"), float("inf")
    a = np.array([[1.0, -2.0, 3.0], [nan, 4.0, -inf], [5.0, 6.0, 7.0], [0.5, inf, -1.0]], np.float32)
    src = np.array([[2.0, nan, -inf], [-3.0, 1.0, 2.0], [inf, -1.0, 0.5], [4.0, 0.0, nan], [-inf, 2.0, 8.0]], "f")
    idx = np.array([[0, 1, 3], [0, 1, 1], [3, 3, 1], [0, 1, 1], [3, 0, 1]], np.int64)  # row 2 never hit
    want = torch.tensor(a).scatter_reduce(0, torch.tensor(idx), torch.tensor(src), reduce, include_self=include_self)
    x, i, s = (Tensor(v, device=device) for v in (a, idx, src))
    np.testing.assert_array_equal(x.scatter_reduce(0, i, s, reduce, include_self=include_self).numpy(), want.numpy())


@pytest.mark.parametrize("reduce", ["sum", "prod", "amax", "amin"])
@pytest.mark.parametrize("dtype", ["int8", "uint8", "float16", "int64"])
def test_scatter_reduce_narrow_and_wide_dtypes_vs_torch(reduce: str, dtype: str):
    # int8 products wrap as torch's do (zeptograd multiplies small integers in int32: the same low bits); uint8's
    # minimum is a maximum of the values in reversed order (~x, not -x); float16's product is taken in float32
    torch = _torch()
    rng = np.random.default_rng(21)
    a = rng.integers(0, 12, (6, 5)).astype(dtype)
    src = rng.integers(0, 12, (30, 4)).astype(dtype)
    idx = rng.integers(0, 5, (30, 4))  # row 5 never hit, nor column 4 (the index is narrower than self)
    ta, ti, ts = torch.tensor(a), torch.tensor(idx), torch.tensor(src)
    for include_self in (True, False):
        want = ta.scatter_reduce(0, ti, ts, reduce, include_self=include_self)
        out = Tensor(a).scatter_reduce(0, Tensor(idx), Tensor(src), reduce, include_self=include_self)
        assert out.dtype == getattr(dtypes, dtype)
        if dtype == "float16" and reduce == "prod":  # torch multiplies in float16, rounding at each step
            np.testing.assert_allclose(out.numpy().astype(np.float32), want.float().numpy(), rtol=1e-2)
        else:
            np.testing.assert_array_equal(out.numpy(), want.numpy())


def test_scatter_reduce_dim1_python():
    torch = _torch()
    a = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], np.float32)
    src = np.array([[10.0, -1.0], [2.0, 8.0]], np.float32)
    idx = np.array([[2, 2], [0, 0]])
    for reduce in ("amax", "mean"):
        want = torch.tensor(a).scatter_reduce(1, torch.tensor(idx), torch.tensor(src), reduce)
        x, i, s = (Tensor(v, device="PYTHON") for v in (a, idx, src))
        check(x.scatter_reduce(1, i, s, reduce), want.numpy(), rtol=1e-6)


# ---------------------------------------------------------------------------------------------------------------
# masks, nonzero, one_hot


@pytest.mark.parametrize("dtype", [dtypes.float32, dtypes.int32, dtypes.bool, dtypes.float16])
def test_masked_fill(dtype: DType):
    a = data((3, 4), dtype, seed=14)
    m = data((4,), dtypes.bool, seed=15)
    check(Tensor(a).masked_fill(Tensor(m), 1), np.where(m, np.asarray(1).astype(NP[dtype]), a), dtype)
    check(Tensor(a).T.masked_fill(Tensor(m).reshape(4, 1), Tensor(0)), np.where(m[:, None], 0, a.T).astype(NP[dtype]))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [dtypes.float32, dtypes.int32, dtypes.bool])
def test_masked_select(device: str, dtype: DType):
    a = data((3, 4), dtype, seed=16)
    m = data((3, 4), dtypes.bool, seed=17)
    x = Tensor(a, device=device)
    check(x.masked_select(Tensor(m, device=device)), a[m], dtype)
    want = a[m][:3] if m.sum() >= 3 else np.concatenate([a[m], np.full(3 - m.sum(), 0, a.dtype)])
    check(x.masked_select(Tensor(m, device=device), size=3), want, dtype)
    check(x.T.masked_select(Tensor(m[0], device=device).reshape(4, 1)), a.T[np.broadcast_to(m[0][:, None], (4, 3))])


def test_masked_select_size_fill():
    x = Tensor([[1.0, 2.0], [3.0, 4.0]])
    check(x.masked_select(x > 1.5, size=5, fill_value=-1.0), np.array([2, 3, 4, -1, -1], np.float32))
    check(x.masked_select(x > 1.5, size=2), np.array([2, 3], np.float32))
    check(x.masked_select(x > 9), np.zeros(0, np.float32))
    check(Tensor.zeros(0, 3).masked_select(Tensor([True, False, True])), np.zeros(0, np.float32))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape", [(7,), (3, 4), (2, 3, 2), (0, 3), (3, 0), (1, 1)])
def test_nonzero(device: str, shape: tuple[int, ...]):
    a = data(shape, dtypes.int32, seed=18) * data(shape, dtypes.bool, seed=19)
    out = Tensor(a, device=device).nonzero()
    check(out, np.argwhere(a).astype(np.int32), dtypes.int32)
    n = int(np.count_nonzero(a))
    want = np.concatenate([np.argwhere(a), np.full((2, len(shape)), -1)])[: n + 2].astype(np.int32)
    check(Tensor(a, device=device).nonzero(size=n + 2, fill_value=-1), want, dtypes.int32)
    if n:
        check(Tensor(a, device=device).nonzero(size=1), np.argwhere(a)[:1].astype(np.int32))


def test_nonzero_dtypes_and_fill_per_axis():
    check(Tensor([[0.0, np.nan], [-0.0, 2.0]]).nonzero(), np.array([[0, 1], [1, 1]], np.int32))
    check(Tensor([True, False, True]).nonzero(), np.array([[0], [2]], np.int32))
    check(Tensor([[0, 1], [0, 0]]).nonzero(size=2, fill_value=(7, 8)), np.array([[0, 1], [7, 8]], np.int32))
    check(Tensor(3.0).nonzero(), np.zeros((1, 0), np.int32))
    a = np.array([[0, 2, 0], [1, 0, 3]], np.int32)
    cols = Tensor(a).nonzero(as_tuple=True)
    assert isinstance(cols, tuple) and len(cols) == 2
    for c, want in zip(cols, np.nonzero(a)):
        check(c, want.astype(np.int32), dtypes.int32)
    check(Tensor(0).nonzero(), np.zeros((0, 0), np.int32))


@pytest.mark.parametrize("device", DEVICES)
def test_one_hot(device: str):
    a = np.array([[0, 3], [2, 1], [3, 3]], np.int32)
    check(Tensor(a, device=device).one_hot(), np.eye(4, dtype=np.int32)[a], dtypes.int32)
    check(Tensor(a, device=device).one_hot(6), np.eye(6, dtype=np.int32)[a], dtypes.int32)
    check(Tensor(a, device=device).T.one_hot(5), np.eye(5, dtype=np.int32)[a.T], dtypes.int32)
    check(Tensor([1, 7, -1], device=device).one_hot(3), np.array([[0, 1, 0], [0, 0, 0], [0, 0, 0]], np.int32))
    check(Tensor(np.zeros(0, np.int32), device=device).one_hot(2), np.zeros((0, 2), np.int32))
    check(Tensor([2], dtype=dtypes.uint8, device=device).one_hot(), np.array([[0, 0, 1]], np.int32))


# ---------------------------------------------------------------------------------------------------------------
# errors: class and message


def test_getitem_errors():
    x = Tensor.zeros(3, 4)
    with pytest.raises(IndexError, match=r"__getitem__: index 3 is out of bounds for axis 0 with size 3"):
        x[3]
    with pytest.raises(IndexError, match=r"index -5 is out of bounds for axis 1 with size 4"):
        x[0, -5]
    with pytest.raises(IndexError, match=r"index 4 is out of bounds for axis 1 with size 4"):
        x[:, [0, 4]]
    with pytest.raises(IndexError, match=r"index -4 is out of bounds for axis 0 with size 3"):
        x[[[-4]]]
    with pytest.raises(IndexError, match=r"too many indices for a tensor of 2 dimensions \(shape \(3, 4\)\)"):
        x[0, 0, 0]
    with pytest.raises(IndexError, match=r"single ellipsis"):
        x[..., ...]
    with pytest.raises(TypeError, match=r"__getitem__: index tensors must have an integer dtype, got dtypes.float32"):
        x[Tensor([0.0, 1.0])]
    with pytest.raises(TypeError, match=r"index sequences must hold ints or bools"):
        x[[0.5]]
    with pytest.raises(TypeError, match=r"unsupported index type str"):
        x["a"]
    with pytest.raises(TypeError, match=r"slice bounds"):
        x[0.5:]
    with pytest.raises(ValueError, match=r"slice step cannot be zero"):
        x[::0]
    with pytest.raises(TypeError, match=r"bool scalar"):
        x[True]
    with pytest.raises(IndexError, match=r"cannot be broadcast together"):
        x[[0, 1], [0, 1, 2]]
    with pytest.raises(IndexError, match=r"bool index of shape \(2,\) does not match .* shape \(3, 4\)"):
        x[Tensor([True, False])]
    with pytest.raises(RuntimeError, match=rf"index tensor is on PYTHON, the tensor on {Device.DEFAULT}"):
        x[Tensor([0], device="PYTHON")]


def test_setitem_errors():
    t = Tensor.zeros(3, 4).realize()
    with pytest.raises(
        ValueError,
        match=r"__setitem__: cannot broadcast a value of shape \(3,\) to the indexed shape \(2, 4\)",
    ):
        t[1:] = Tensor([1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match=r"shape \(2, 2\) .* indexed shape \(2,\)"):
        t[[0, 1], 0] = Tensor([[1.0, 2.0], [3.0, 4.0]])
    with pytest.raises(IndexError, match=r"__setitem__: index 9 is out of bounds for axis 1 with size 4"):
        t[0, 9] = 1.0
    with pytest.raises(TypeError, match=r"__setitem__: index tensors must have an integer dtype"):
        t[Tensor([1.5])] = 1.0
    check(t, np.zeros((3, 4), np.float32))


def test_gather_scatter_errors():
    x = Tensor.zeros(3, 4)
    with pytest.raises(IndexError, match=r"gather: dim 2 is out of range for a tensor of 2 dimensions"):
        x.gather(2, Tensor([[0]]))
    with pytest.raises(TypeError, match=r"gather: index tensors must have an integer dtype, got dtypes.float32"):
        x.gather(0, Tensor([[0.0]]))
    with pytest.raises(RuntimeError, match=r"gather: the index has 1 dimensions \(shape \(2,\)\), the tensor 2"):
        x.gather(0, Tensor([0, 1]))
    with pytest.raises(RuntimeError, match=r"gather: the index of shape \(1, 5\) is larger .* \(3, 4\) on dim 1"):
        x.gather(0, Tensor([[0, 0, 0, 0, 0]]))
    with pytest.raises(IndexError, match=r"scatter: dim -3 is out of range"):
        x.scatter(-3, Tensor([[0]]), 1.0)
    with pytest.raises(
        RuntimeError,
        match=r"scatter: the index of shape \(2, 2\) is larger than src of shape \(1, 4\)",
    ):
        x.scatter(0, Tensor([[0, 1], [1, 0]]), Tensor([[1.0, 2.0, 3.0, 4.0]]))
    with pytest.raises(TypeError, match=r"scatter: give exactly one of src and value"):
        x.scatter(0, Tensor([[0]]))
    with pytest.raises(ValueError, match=r"scatter: reduce must be None, 'add' or 'multiply', got 'max'"):
        x.scatter(0, Tensor([[0]]), 1.0, reduce="max")
    with pytest.raises(ValueError, match=r"scatter_reduce: reduce must be one of .*, got 'max'"):
        x.scatter_reduce(0, Tensor([[0]]), Tensor([[1.0]]), "max")
    with pytest.raises(TypeError, match=r"scatter_reduce: index tensors must have an integer dtype, got dtypes.bool"):
        x.scatter_reduce(0, Tensor([[True]]), Tensor([[1.0]]), "sum")


def test_mask_and_one_hot_errors():
    x = Tensor.zeros(3, 4)
    with pytest.raises(TypeError, match=r"masked_fill: mask must be a bool tensor, got dtypes.int32"):
        x.masked_fill(Tensor([1, 0, 1, 0]), 1.0)
    with pytest.raises(RuntimeError, match=r"masked_fill: value must be a scalar or a 0-d tensor, got shape \(2,\)"):
        x.masked_fill(Tensor([True]), Tensor([1.0, 2.0]))
    with pytest.raises(ValueError, match=r"masked_fill|where"):
        x.masked_fill(Tensor([True, False]), 1.0)
    with pytest.raises(TypeError, match=r"masked_select: mask must be a bool tensor, got dtypes.float32"):
        x.masked_select(x)
    with pytest.raises(ValueError, match=r"masked_select: shapes \(3, 4\) and \(2,\) cannot be broadcast"):
        x.masked_select(Tensor([True, False]))
    with pytest.raises(ValueError, match=r"nonzero: size must be a non-negative int, got -1"):
        x.nonzero(size=-1)
    with pytest.raises(ValueError, match=r"nonzero: fill_value has 3 entries for 2 dimensions"):
        x.nonzero(size=2, fill_value=(0, 0, 0))
    with pytest.raises(TypeError, match=r"one_hot: the tensor must have an integer dtype, got dtypes.float32"):
        x.one_hot(3)
    with pytest.raises(ValueError, match=r"one_hot: cannot infer num_classes from an empty tensor \(shape \(0,\)\)"):
        Tensor(np.zeros(0, np.int32)).one_hot()
    with pytest.raises(ValueError, match=r"one_hot: num_classes must be -1 or a non-negative int, got -2"):
        Tensor([1]).one_hot(-2)


def test_error_messages_name_the_op():
    # every IndexError/TypeError above starts with the op's name; spot-check the format once more
    with pytest.raises(IndexError) as e:
        Tensor.zeros(2)[2]
    assert re.match(r"__getitem__: index 2 is out of bounds for axis 0 with size 2", str(e.value))


# *** robustness: iteration, `in`, and bad values ***


def test_iterating_a_0d_tensor_is_an_error() -> None:
    # Python's fallback iteration through __getitem__ would make a 0-d tensor look empty
    with pytest.raises(TypeError, match=r"iteration over a 0-d tensor"):
        list(Tensor(1.5))
    a = np.arange(6, dtype=np.float32).reshape(3, 2)
    assert [r.tolist() for r in Tensor(a)] == a.tolist()
    assert list(Tensor.zeros(0, 2)) == []


def test_contains() -> None:
    a = np.array([[1, 2], [3, 4]], dtype=np.int32)
    assert (3 in Tensor(a)) == (3 in a)
    assert (5.0 in Tensor(a)) == (5.0 in a)
    assert Tensor([1.0, 2.0]) in Tensor([[1.0, 2.0], [3.0, 4.0]])
    with pytest.raises(TypeError, match=r"__contains__: expected a scalar or a Tensor, got NoneType"):
        _ = None in Tensor(a)


def test_setitem_value_of_wrong_type() -> None:
    t = Tensor.zeros(2, 3).realize()
    with pytest.raises(TypeError, match=r"__setitem__: cannot assign a value of type str"):
        t[0] = "a"
    with pytest.raises(TypeError, match=r"__setitem__: cannot assign a value of type NoneType"):
        t[0] = None


def test_masked_fill_errors_name_masked_fill() -> None:
    x = Tensor.ones(2, 3)
    with pytest.raises(TypeError, match=r"masked_fill: value must be a scalar or a 0-d tensor, got NoneType"):
        x.masked_fill(x > 0, None)
    with pytest.raises(ValueError, match=r"masked_fill: shapes \(2, 3\) and \(2,\) cannot be broadcast"):
        x.masked_fill(Tensor([True, False]), 1.0)
    assert x.masked_fill(x > 0, np.float32(2.0)).tolist() == np.full((2, 3), 2.0).tolist()


@pytest.mark.parametrize(
    "build",
    [
        lambda a, b: (1, a, slice(None), b),  # separated by a slice, after an int
        lambda a, b: (slice(None), a, slice(None), b),
        lambda a, b: (a, slice(1, 3), b),
        lambda a, b: (a, slice(None), slice(None), b),
        lambda a, b: (slice(None), a, b),  # adjacent: the index dims stay in place
        lambda a, b: (Ellipsis, a, slice(None), b),
        lambda a, b: (a.reshape(3, 1), slice(None), None, b),
    ],
)
def test_separated_index_tensors_go_first_as_torch(build: Any):
    # index tensors separated by a slice (or an int) put their broadcast dims first
    torch = pytest.importorskip("torch")
    x = np.arange(2 * 5 * 3 * 4, dtype=np.float32).reshape(2, 5, 3, 4)
    ia, ib = np.array([0, 1, 1]), np.array([2, 0, 1])
    want = torch.tensor(x)[build(torch.tensor(ia), torch.tensor(ib))].numpy()
    got = Tensor(x)[build(Tensor(ia), Tensor(ib))]
    assert got.shape == want.shape
    np.testing.assert_array_equal(got.numpy(), want)
