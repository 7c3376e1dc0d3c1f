"""Reductions at the numeric edges. Long float sums add in two stages (sums of about sqrt(n) elements, then
their sum), so they keep the precision numpy's pairwise sum has: a single chain of float32 adds stalls at
2**24. min and minimum hold at the ends of each integer dtype, where negation wraps."""

from __future__ import annotations

import numpy as np
import pytest

from zeptograd import GlobalCounters, Tensor


@pytest.mark.no_roundtrip
def test_sum_of_many_ones_is_exact():
    GlobalCounters.reset()
    assert Tensor(np.ones(1 << 25, np.float32)).sum().item() == 2.0**25
    assert GlobalCounters.kernel_count == 2  # the partial sums, then their sum


@pytest.mark.no_roundtrip
@pytest.mark.parametrize("n", [(1 << 14) + 1, 100_003, 1 << 20])  # just past the split, a prime, a power of 2
def test_long_sums_match_float64(n: int):
    x = np.random.default_rng(n).random(n).astype(np.float32)
    exact = x.astype(np.float64).sum()
    assert abs(Tensor(x).sum().item() - exact) / exact < 2e-6


@pytest.mark.no_roundtrip
def test_split_sum_over_axes_and_keepdim():
    x = np.random.default_rng(1).random((3, 20000)).astype(np.float32)
    t = Tensor(x)
    np.testing.assert_allclose(t.sum(axis=1).numpy(), x.astype(np.float64).sum(1), rtol=2e-6)
    assert t.sum(axis=1, keepdim=True).shape == (3, 1)
    tt = Tensor(np.ascontiguousarray(x.T))
    np.testing.assert_allclose(tt.sum(axis=0, keepdim=True).numpy(), x.astype(np.float64).sum(1)[None], rtol=2e-6)
    half = Tensor(x.astype(np.float16))
    assert half.sum(axis=1).dtype == half.dtype
    np.testing.assert_allclose(half.sum(axis=1).numpy(), x.astype(np.float16).astype(np.float64).sum(1), rtol=1e-3)


@pytest.mark.no_roundtrip
@pytest.mark.parametrize(
    "shape, axes, first",
    [
        ((8, 3, 56, 56), (0, 2, 3), 56 * 56),  # conv2d's weight gradient: the image's rows and columns, then images
        ((130, 3, 130), (0, 2), 130),  # axes apart: the inner one, then the outer one
        ((4, 2, 1 << 13), (0, 1, 2), 1 << 13),
    ],
)
def test_a_sum_over_several_axes_splits_between_them(shape, axes, first):
    """A long float sum over several axes takes its first stage over whole inner axes (the fewest whose elements
    reach sqrt(n)), not chunks of a flat index cut across them, whose division and remainder kept conv2d's weight
    gradient from any register tile (over 30x slower for bench/ops.py's layer). The values are numpy's in
    float64, with and without keepdim."""
    from zeptograd.codegen.opt import reduce_axes
    from zeptograd.schedule.kernelize import create_schedule

    x = np.random.default_rng(7).random(shape).astype(np.float32)
    want = x.astype(np.float64).sum(axes)
    t = Tensor(x)
    items, _ = create_schedule([t.sum(axes).uop], ["CPU"])
    assert len(items) == 2, [item.ast.arg for item in items]
    assert np.prod([r.src[0].arg for r in reduce_axes(items[0].ast)]) == first
    assert not any(u.op.name in ("IDIV", "MOD") for u in items[0].ast.toposort())  # no flat index taken apart
    np.testing.assert_allclose(t.sum(axes).numpy(), want, rtol=2e-6)
    np.testing.assert_allclose(t.sum(axes, keepdim=True).numpy(), np.expand_dims(want, axes), rtol=2e-6)


@pytest.mark.parametrize("dtype", [np.uint8, np.int32, np.float32, np.bool_])
def test_min_and_minimum_at_the_ends_of_the_dtype(dtype):
    # -x wraps for integers (-0 is the smallest uint, -INT_MIN is INT_MIN): min must not rely on it
    info = np.iinfo(dtype) if np.issubdtype(dtype, np.integer) else None
    values = [info.min, 0, 1, info.max] if info else ([-np.inf, -0.5, 0.0, 2.0] if dtype != np.bool_ else [1, 0])
    a = np.array(values, dtype)
    b = a[::-1].copy()
    t = Tensor(a)
    assert t.min().item() == a.min()
    np.testing.assert_array_equal(t.reshape(2, -1).min(axis=1).numpy(), a.reshape(2, -1).min(axis=1))
    np.testing.assert_array_equal(t.minimum(Tensor(b)).numpy(), np.minimum(a, b))
