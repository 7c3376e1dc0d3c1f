"""Assignment is a STORE into the tensor's buffer: ordering, hazards, `+=`, and errors.

The rules checked here: a read of `t` made before `t.assign(...)` sees the old values and a read made after sees
the new ones, whichever is realized first; an assignment whose value reads the target through another index
pattern (transpose, flip, a reduce broadcast back, a shift) computes from the old values only, as if the whole
value were computed before the first element is written. numpy, working on copies, is the oracle.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from zeptograd import Tensor, dtypes
from zeptograd.helpers import GlobalCounters

DEVICES = ["CPU", "PYTHON"]
ORDERS = ["assign_first", "old_read_first", "new_read_first", "together", "numpy_only"]


def eq(t: Tensor, ref: np.ndarray | list, dtype=dtypes.float32) -> None:
    ref = np.asarray(ref)
    assert t.dtype == dtype
    assert t.shape == ref.shape
    np.testing.assert_array_equal(t.numpy(), ref.astype(t.numpy().dtype))


def grid(n: int = 4) -> np.ndarray:
    return np.arange(n * n, dtype=np.float32).reshape(n, n)


# ---------------------------------------------------------------------------------------------------------------
# reads before and after


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("order", ORDERS)
def test_reads_before_see_old_reads_after_see_new(order: str, device: str):
    t = Tensor([1.0, 2, 3, 4], device=device).realize()
    r = t * 2  # made before the assign
    out = t.assign(t + 1)
    u = t * 3  # made after
    assert out is t
    if order == "assign_first":
        t.realize()
        r.realize()
        u.realize()
    elif order == "old_read_first":
        r.realize()
        t.realize()
        u.realize()
    elif order == "new_read_first":
        u.realize()
        r.realize()
        t.realize()
    elif order == "together":
        Tensor.realize(u, r, t)
    eq(r, [2, 4, 6, 8])
    eq(t, [2, 3, 4, 5])
    eq(u, [6, 9, 12, 15])


@pytest.mark.parametrize("device", DEVICES)
def test_reads_of_several_assigned_buffers_see_old_values_from_one_copy_each(device: str, monkeypatch):
    # two lazy reads of two buffers that one realize assigns: both keep the old contents, and each buffer is
    # copied aside once for all its readers
    import zeptograd.engine.realize as engine

    copies = []
    real_copy = engine.copy_buffers
    monkeypatch.setattr(engine, "copy_buffers", lambda bufs: copies.append(bufs) or real_copy(bufs))
    a = Tensor([1.0, 2, 3], device=device).realize()
    b = Tensor([10.0, 20, 30], device=device).realize()
    both = a * b + 1
    total = (a + b).sum()
    Tensor.realize(a.assign(a + 100), b.assign(b * 2))
    assert len(copies) == 2
    eq(both, [11, 41, 91])
    eq(total, 66)
    eq(a, [101, 102, 103])
    eq(b, [20, 40, 60])


@pytest.mark.parametrize("device", DEVICES)
def test_view_made_before_sees_new_values(device: str):
    # a view shares the buffer (as in PyTorch and numpy): it reads what the buffer holds after the assign;
    # a computation made before (the sum) read the old values
    a = grid()
    t = Tensor(a, device=device).realize()
    v = t.T  # a movement op of the buffer, made before
    s = t.sum(axis=0)
    t.assign(t * 10)
    eq(t, a * 10)
    eq(v, (a * 10).T)
    eq(s, a.sum(axis=0))


@pytest.mark.parametrize("device", DEVICES)
def test_assign_to_unrealized_data_tensor(device: str):
    t = Tensor([1.0, 2.0, 3.0], device=device)  # never realized by hand
    t.assign(t * t)
    eq(t, [1, 4, 9])


@pytest.mark.parametrize("device", DEVICES)
def test_assign_from_other_tensor(device: str):
    t = Tensor([1.0, 2.0, 3.0], device=device).realize()
    x = Tensor([7.0, 8.0, 9.0], device=device).realize()
    t.assign(x)
    eq(t, [7, 8, 9])
    eq(x, [7, 8, 9])
    x.assign(x + 1)  # t holds its own copy: x's later change does not reach it
    eq(x, [8, 9, 10])
    eq(t, [7, 8, 9])


# ---------------------------------------------------------------------------------------------------------------
# hazards: the value reads the target through another index pattern

HAZARDS: list[tuple[str, Callable[[Tensor], Tensor], Callable[[np.ndarray], np.ndarray]]] = [
    ("transpose", lambda t: t.T + 1, lambda a: a.T + 1),
    ("flip0", lambda t: t.flip(0), lambda a: a[::-1]),
    ("flip_both_times_self", lambda t: t.flip((0, 1)) * t, lambda a: a[::-1, ::-1] * a),
    (
        "sum_broadcast_back",
        lambda t: t.sum(axis=0, keepdim=True).expand(4, 4),
        lambda a: np.broadcast_to(a.sum(axis=0, keepdims=True), (4, 4)),
    ),
    ("minus_row_max", lambda t: t - t.max(axis=1, keepdim=True), lambda a: a - a.max(axis=1, keepdims=True)),
    (
        "shift_up",
        lambda t: t.shrink(((1, 4), None)).pad(((0, 1), None)),
        lambda a: np.pad(a[1:], ((0, 1), (0, 0))),
    ),
    (
        "shift_down",
        lambda t: t.shrink(((0, 3), None)).pad(((1, 0), None)),
        lambda a: np.pad(a[:3], ((1, 0), (0, 0))),
    ),
    ("reversed_flat", lambda t: t.reshape(16).flip(0).reshape(4, 4), lambda a: a.reshape(16)[::-1].reshape(4, 4)),
    ("matmul_self", lambda t: t @ t, lambda a: a @ a),
    ("transpose_plus_self", lambda t: t.T + t, lambda a: a.T + a),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(("name", "t_fn", "np_fn"), HAZARDS, ids=[h[0] for h in HAZARDS])
def test_assign_hazard(name: str, t_fn: Callable, np_fn: Callable, device: str):
    a = grid()
    t = Tensor(a, device=device).realize()
    t.assign(t_fn(t))
    eq(t, np_fn(a.astype(np.float64)))


@pytest.mark.parametrize(("name", "t_fn", "np_fn"), HAZARDS[:4], ids=[h[0] for h in HAZARDS[:4]])
def test_assign_hazard_float64_input(name: str, t_fn: Callable, np_fn: Callable):
    # np.arange(16.) is float64: the hazard with a float64 source
    a = np.arange(16.0).reshape(4, 4)
    t = Tensor(a).realize()
    t.assign(t_fn(t))
    np.testing.assert_allclose(t.numpy(), np_fn(a), rtol=1e-6)


def test_assign_transpose_large():
    # a bigger square: any tiling, vectorization or threading of the kernel must still read only old values
    a = np.arange(64 * 64, dtype=np.float32).reshape(64, 64)
    t = Tensor(a).realize()
    t.assign(t.T + 1)
    eq(t, a.T + 1)
    b = np.arange(33 * 33, dtype=np.float32).reshape(33, 33)
    t2 = Tensor(b).realize()
    t2.assign(t2.flip((0, 1)) - t2)
    eq(t2, b[::-1, ::-1] - b)


def _random_value(rng: np.random.Generator, t: Tensor, a: np.ndarray) -> tuple[list[str], Tensor, np.ndarray]:
    """A random expression of t (movement ops, elementwise ops, reductions), brought back to t's shape."""
    steps: list[str] = []
    for _ in range(int(rng.integers(2, 6))):
        kind = str(rng.choice(["permute", "flip", "shrink_pad", "reshape", "reduce", "ew"]))
        if kind == "permute":
            t, a = t.T, a.T
        elif kind == "flip":
            ax = int(rng.integers(0, 2))
            t, a = t.flip(ax), np.flip(a, ax)
        elif kind == "shrink_pad":  # shift the rows or columns by k, filling with a constant
            ax, k, v = int(rng.integers(0, 2)), int(rng.integers(1, 3)), float(rng.integers(-3, 4))
            n = a.shape[ax]
            sh = [(0, s) for s in a.shape]
            pd = [(0, 0), (0, 0)]
            sh[ax], pd[ax] = (k, n), (0, k)
            t = t.shrink(tuple(sh)).pad(tuple(pd), value=v)
            a = np.pad(a[tuple(slice(lo, hi) for lo, hi in sh)], pd, constant_values=v)
            kind = f"shift(axis={ax}, k={k}, value={v})"
        elif kind == "reshape":
            t, a = t.reshape(-1).flip(0).reshape(a.shape), a.reshape(-1)[::-1].reshape(a.shape)
        elif kind == "reduce":
            ax = int(rng.integers(0, 2))
            t, a = t.sum(axis=ax, keepdim=True).expand(a.shape), np.broadcast_to(a.sum(axis=ax, keepdims=True), a.shape)
        else:
            b = rng.integers(-3, 4, size=a.shape).astype(np.float32)
            t, a = t * 2 - Tensor(b, device=t.device), a * 2 - b
        steps.append(kind)
    return steps, t, a


@pytest.mark.no_roundtrip
@pytest.mark.parametrize(("device", "n", "count"), [("CPU", 4, 40), ("CPU", 9, 30), ("PYTHON", 4, 15)])
def test_random_assign_programs(device: str, n: int, count: int):
    # t.assign(f(t)) for random f that reads t through other index patterns: the result is f of the old values
    rng = np.random.default_rng(3000 + n)
    for i in range(count):
        old = rng.integers(-9, 10, size=(n, n)).astype(np.float32)
        t = Tensor(old, device=device).realize()
        before = t * 1  # a read made before the assign
        steps, value, ref = _random_value(rng, t, old.copy())
        t.assign(value)
        after = t + 0
        assert np.array_equal(t.numpy(), ref), f"assign program {i} on {device}, n={n}: {steps}"
        assert np.array_equal(after.numpy(), ref), f"read after, program {i}: {steps}"
        assert np.array_equal(before.numpy(), old), f"read before, program {i}: {steps}"


# ---------------------------------------------------------------------------------------------------------------
# +=, chains, several targets


@pytest.mark.parametrize("device", DEVICES)
def test_iadd_keeps_the_object(device: str):
    a = grid()
    t = Tensor(a, device=device).realize()
    alias = t
    before = id(t)
    t += Tensor(np.ones(4, np.float32), device=device)  # broadcast (4,) onto (4, 4)
    assert id(t) == before and t is alias
    eq(t, a + 1)
    t += 2.5
    assert t is alias
    eq(alias, a + 3.5)


@pytest.mark.parametrize("device", DEVICES)
def test_iadd_dtypes(device: str):
    h = Tensor(np.array([1.0, 2.0], np.float16), device=device).realize()
    h += 0.5
    eq(h, [1.5, 2.5], dtypes.float16)
    i = Tensor([1, 2, 3], device=device).realize()
    i += 10
    eq(i, [11, 12, 13], dtypes.int32)
    i.assign(i * i)
    eq(i, [121, 144, 169], dtypes.int32)
    b = Tensor([True, False], device=device).realize()
    b.assign(b == Tensor([False, False], device=device))  # logical not
    eq(b, [False, True], dtypes.bool)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("realize_between", [False, True])
def test_two_assigns_in_a_row(realize_between: bool, device: str):
    a = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    t = Tensor(a, device=device).realize()
    t.assign(t + 1)
    r1 = t + 0
    if realize_between:
        t.realize()
    t.assign(t * 2)
    r2 = t + 0
    eq(r2, (a + 1) * 2)
    eq(r1, a + 1)
    eq(t, (a + 1) * 2)


@pytest.mark.parametrize("device", DEVICES)
def test_many_assigns_accumulate(device: str):
    t = Tensor([0.0, 0.0, 0.0], device=device).realize()
    for _ in range(10):
        t += 1
    eq(t, [10, 10, 10])
    for _ in range(3):
        t.assign(t * 2).realize()
    eq(t, [80, 80, 80])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("order", ["together", "a_first", "b_first"])
def test_assign_reads_another_target_before_its_write(order: str, device: str):
    # a takes b's old value; b's own assign must not land before a has read it
    a0, b0 = np.array([1.0, 2.0], np.float32), np.array([10.0, 20.0], np.float32)
    a = Tensor(a0, device=device).realize()
    b = Tensor(b0, device=device).realize()
    a.assign(b * 1)
    b.assign(b + 5)
    if order == "together":
        Tensor.realize(a, b)
    elif order == "a_first":
        a.realize()
        b.realize()
    else:
        b.realize()
        a.realize()
    eq(a, b0)
    eq(b, b0 + 5)


@pytest.mark.parametrize("device", DEVICES)
def test_assign_whose_value_reads_a_pending_assign_that_reads_it(device: str):
    # p's new value reads b's new value, which reads p's old one (an optimizer's state update, then the
    # parameter's): b's STORE lands before p's, once, and sees the old p
    p = Tensor([1.0, 2.0], device=device).realize()
    b = Tensor([0.0, 0.0], device=device).realize()
    b.assign(b + p)
    p.assign(p - b)
    GlobalCounters.reset()
    Tensor.realize(b, p)
    assert GlobalCounters.kernel_count == 2
    eq(b, [1.0, 2.0])
    eq(p, [0.0, 0.0])


@pytest.mark.parametrize("device", DEVICES)
def test_assign_full(device: str):
    t = Tensor(grid(), device=device).realize()
    r = t + 0
    t.assign(Tensor.full(t.shape, 5.0, device=device))
    eq(t, np.full((4, 4), 5.0))
    eq(r, grid())
    z = Tensor([1, 2, 3], device=device).realize()
    z.assign(Tensor.zeros(3, dtype=dtypes.int32, device=device))
    eq(z, [0, 0, 0], dtypes.int32)


def test_assign_is_one_kernel():
    t = Tensor(np.arange(8, dtype=np.float32)).realize()
    x = Tensor(np.ones(8, np.float32)).realize()
    t.assign(t * 2 + x)
    GlobalCounters.reset()
    t.realize()
    assert GlobalCounters.kernel_count == 1
    eq(t, np.arange(8) * 2 + 1)
    GlobalCounters.reset()
    t.realize()  # nothing left to do
    assert GlobalCounters.kernel_count == 0


# ---------------------------------------------------------------------------------------------------------------
# errors


def _shape_in(msg: str, shape: tuple[int, ...]) -> bool:
    inner = ", ".join(str(s) for s in shape)
    return any(s in msg for s in (f"({inner})" if len(shape) != 1 else f"({inner},)", f"[{inner}]"))


@pytest.mark.parametrize("device", DEVICES)
def test_assign_shape_mismatch(device: str):
    t = Tensor([1.0, 2.0, 3.0, 4.0], device=device).realize()
    with pytest.raises((ValueError, RuntimeError)) as e:
        t.assign(Tensor.ones(5, device=device)).realize()
    assert _shape_in(str(e.value), (4,)) and _shape_in(str(e.value), (5,)), str(e.value)
    with pytest.raises((ValueError, RuntimeError)) as e:
        t.assign(Tensor.ones(2, 2, device=device)).realize()  # same size, different shape
    assert _shape_in(str(e.value), (4,)) and _shape_in(str(e.value), (2, 2)), str(e.value)
    with pytest.raises((ValueError, RuntimeError)):
        t.assign(Tensor.ones(2, 4, device=device)).realize()  # the target does not broadcast to the value
    eq(t, [1, 2, 3, 4])  # a failed assign leaves the target as it was


@pytest.mark.parametrize("device", DEVICES)
def test_assign_broadcasts_the_value_and_casts_python_data(device: str):
    # tinygrad and torch's copy_ broadcast the value to the target; Python data takes the target's dtype
    torch = pytest.importorskip("torch")
    t = Tensor.zeros(2, 3, device=device).contiguous().realize()
    want = np.zeros((2, 3), np.float32)
    t.assign(Tensor([1.0, 2.0, 3.0], device=device))
    want[...] = [1.0, 2.0, 3.0]
    np.testing.assert_array_equal(t.numpy(), want)
    t.assign(Tensor([[4.0], [5.0]], device=device)).realize()
    want[...] = [[4.0], [5.0]]
    np.testing.assert_array_equal(t.numpy(), want)
    t[0].assign(7.5)
    want[0] = 7.5
    np.testing.assert_array_equal(t.numpy(), want)
    i = Tensor([1, 2, 3], device=device).realize()
    i.assign([1.7, -2.5, 3.2])
    ti = torch.tensor([1, 2, 3], dtype=torch.int32).copy_(torch.tensor([1.7, -2.5, 3.2]))
    assert i.dtype is dtypes.int32
    np.testing.assert_array_equal(i.numpy(), ti.numpy())


@pytest.mark.parametrize("device", DEVICES)
def test_assign_dtype_mismatch(device: str):
    t = Tensor([1.0, 2.0], device=device).realize()
    with pytest.raises((TypeError, RuntimeError)) as e:
        t.assign(Tensor([1, 2], device=device)).realize()
    assert "float32" in str(e.value) and "int32" in str(e.value), str(e.value)
    i = Tensor([1, 2], device=device).realize()
    with pytest.raises((TypeError, RuntimeError)) as e:
        i += 2.5  # int32 + 2.5 is float32
    assert "float32" in str(e.value) and "int32" in str(e.value), str(e.value)
    with pytest.raises((TypeError, RuntimeError)) as e:
        t.assign(Tensor([1.0, 2.0], dtype=dtypes.float16, device=device)).realize()
    assert "float32" in str(e.value) and "float16" in str(e.value), str(e.value)
    eq(t, [1, 2])
    eq(i, [1, 2], dtypes.int32)
