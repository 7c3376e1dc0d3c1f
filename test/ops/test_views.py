"""Writes through views: a tensor made by movement ops of another shares its memory, as in numpy and PyTorch.

A write to a view (`assign`, `__setitem__`, `+=`) lands in the base's buffer at the view's elements; every view of
that base, made before or after, reads the new contents; a computation made before the write reads the old ones.
The oracles: numpy's in-place semantics on its views (basic slices, transposes, flips, reshapes that numpy makes
as views), torch for what numpy lacks (writes through `expand`, `diagonal`, `unfold`, the refusal of a write where
two elements of the view share one location, pad/repeat/roll returning copies). The examples run on CPU and on
the PYTHON interpreter (small tensors); the property test writes through random chains of views at random points
of random programs and compares every read with numpy.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from zeptograd import Tensor, dtypes
from zeptograd.helpers import ArgumentError
from zeptograd.schedule.kernelize import create_schedule
from zeptograd.uop.ops import Ops

try:
    import torch
except ImportError:  # the views numpy has are still checked against numpy
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="torch is the oracle for this view: pip install torch")

DEVICES = ["CPU", "PYTHON"]


def grid(*shape: int) -> np.ndarray:
    return np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)


def same(t: Tensor, ref) -> None:
    """t holds ref's values and shape (ref: numpy data or a torch tensor)."""
    ref = np.asarray(ref)
    assert t.shape == ref.shape
    np.testing.assert_array_equal(t.numpy(), ref)


def assign(dst, src):
    """`dst.assign(src)` for zeptograd, its PyTorch equivalent `copy_` for torch."""
    return dst.assign(src) if isinstance(dst, Tensor) else dst.copy_(src)


# ---------------------------------------------------------------------------------------------------------------
# numpy doing the same writes on its views


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("realized", [True, False], ids=["realized", "lazy"])
def test_setitem_of_a_row(device: str, realized: bool):
    a = grid(3, 4)
    t = Tensor(a, device=device)
    if realized:
        t.realize()
    t[1][2] = 7
    a[1][2] = 7
    same(t, a)


@pytest.mark.parametrize("device", DEVICES)
def test_assign_to_a_slice(device: str):
    a, b = grid(4, 3), -grid(2, 3) - 1
    t = Tensor(a, device=device).realize()
    out = t[0:2].assign(Tensor(b, device=device))
    a[0:2] = b
    same(t, a)
    same(out, a[0:2])


@pytest.mark.parametrize("device", DEVICES)
def test_assign_to_a_transpose(device: str):
    a, c = grid(3, 4), grid(4, 3) * 10
    t = Tensor(a, device=device).realize()
    t.T.assign(Tensor(c, device=device))
    a.T[...] = c
    same(t, a)


@pytest.mark.parametrize("device", DEVICES)
def test_iadd_on_a_strided_slice(device: str):
    a = grid(7)
    t = Tensor(a, device=device)
    t[::2] += 1
    a[::2] += 1
    same(t, a)


@pytest.mark.parametrize("device", DEVICES)
def test_setitem_through_a_flip(device: str):
    a, v = grid(5, 2), grid(4, 2) + 100
    t = Tensor(a, device=device).realize()
    t.flip(0)[1:] = Tensor(v, device=device)
    np.flip(a, 0)[1:] = v
    same(t, a)


@pytest.mark.parametrize("device", DEVICES)
def test_setitem_through_a_permute(device: str):
    a, v = grid(3, 4), grid(3) - 50
    t = Tensor(a, device=device).realize()
    t.permute(1, 0)[0] = Tensor(v, device=device)
    a.transpose(1, 0)[0] = v
    same(t, a)


@pytest.mark.parametrize("device", DEVICES)
def test_swap_rows(device: str):
    a = grid(3, 2)
    t = Tensor(a, device=device).realize()
    t[[0, 1]] = t[[1, 0]]
    a[[0, 1]] = a[[1, 0]]
    same(t, a)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("first", [0, 1])
def test_overlapping_slice_writes_in_either_order(device: str, first: int):
    a = grid(8)
    t = Tensor(a, device=device).realize()
    writes = [(slice(0, 5), 1.0), (slice(3, 8), 2.0)]
    for s, v in writes[first:] + writes[:first]:
        t[s] = v
        a[s] = v
    same(t, a)


@pytest.mark.parametrize("device", DEVICES)
def test_slice_assigned_from_an_overlapping_slice(device: str):
    a = grid(8)
    t = Tensor(a, device=device).realize()
    t[0:5] = t[2:7]
    a[0:5] = a[2:7]
    same(t, a)
    t[3:8].assign(t[1:6])
    a[3:8] = a[1:6]
    same(t, a)


@pytest.mark.parametrize("device", DEVICES)
def test_slice_write_then_full_read(device: str):
    a = grid(4, 4)
    t = Tensor(a, device=device).realize()
    t[1:3, 1:3] = 0
    a[1:3, 1:3] = 0
    same(t.sum(axis=0), a.sum(axis=0))
    same(t, a)


@pytest.mark.parametrize("device", DEVICES)
def test_iadd_on_a_slice_of_a_slice(device: str):
    a = grid(9)
    t = Tensor(a, device=device).realize()
    t[1:][::2] += 10
    a[1:][::2] += 10
    same(t, a)
    v = t[2:8]
    v[1:][::-2] *= 3
    a[2:8][1:][::-2] *= 3
    same(t, a)


# ---------------------------------------------------------------------------------------------------------------
# ordering: views read the new contents, computations made before read the old


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("realize_view", [True, False])
def test_views_see_the_write_computations_before_do_not(device: str, realize_view: bool):
    a = grid(4, 3)
    t = Tensor(a, device=device).realize()
    row, col = t[1], t[:, 2]
    if realize_view:
        row.realize()  # a view read (and so computed into a buffer) before the write still aliases t
    before = row * 1 + col.sum()
    ref_before = a[1] * 1 + a[:, 2].sum()
    col[1:] = -1
    a[:, 2][1:] = -1
    after = row * 1 + col.sum()
    same(row, a[1])
    same(col, a[:, 2])
    same(before, ref_before)
    same(after, a[1] * 1 + a[:, 2].sum())
    same(t, a)


@needs_torch
@pytest.mark.parametrize("device", DEVICES)
def test_write_to_a_view_of_a_lazy_value(device: str):
    src = grid(2, 3)
    a = Tensor(src, device=device).realize()
    x = a + 1  # no buffer yet
    v = x[:, 1:]
    v[0] = 50
    ref = torch.tensor(src) + 1
    ref[:, 1:][0] = 50
    same(x, ref)
    same(v, ref[:, 1:])
    same(a, src)  # the input of the lazy value is untouched


@pytest.mark.parametrize("device", DEVICES)
def test_two_equal_lazy_values_are_two_tensors(device: str):
    # `a + 1` twice is one graph node; each result is still a tensor of its own, as in torch
    src = grid(4)
    a = Tensor(src, device=device).realize()
    x, y = a + 1, a + 1
    x[0] = 100
    y[1] = 200
    for _ in range(2):  # each read lands its write first: the other tensor must not see it
        same(x, [100, 2, 3, 4])
        same(y, [1, 200, 3, 4])
    z1, z2 = Tensor.zeros(3, device=device), Tensor.zeros(3, device=device)
    z1[0:2] = 5
    z2[1:] = 6
    for _ in range(2):
        same(z2, [0, 6, 6])
        same(z1, [5, 5, 0])


@pytest.mark.parametrize("device", DEVICES)
def test_base_assign_reaches_views_made_before(device: str):
    a = grid(2, 3)
    t = Tensor(a, device=device).realize()
    v, w = t.T, t.reshape(6)[::2]
    t.assign(t * 2)
    a *= 2
    same(v, a.T)
    same(w, a.reshape(6)[::2])


@pytest.mark.parametrize("device", DEVICES)
def test_reshape_view_write(device: str):
    a = grid(3, 4)
    t = Tensor(a, device=device).realize()
    t.reshape(2, 6)[1, ::5] = -3
    a.reshape(2, 6)[1, ::5] = -3
    same(t, a)


@pytest.mark.parametrize("device", DEVICES)
def test_reshape_of_a_transpose_is_a_view(device: str):
    # deliberately tinygrad's semantics (numpy and PyTorch copy here): the oracle is the element positions, the
    # reshape of the transposed positions saying which element of the base each view element is
    a = grid(3, 4)
    t = Tensor(a, device=device).realize()
    pos = np.arange(12).reshape(3, 4).T.reshape(2, 6)
    t.T.reshape(2, 6)[1, 1:4] = -1
    a.reshape(-1)[pos[1, 1:4]] = -1
    same(t, a)


@pytest.mark.parametrize("device", DEVICES)
def test_int_and_bool_views(device: str):
    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    t = Tensor(a, device=device)
    t.T[1:] -= 7
    a.T[1:] -= 7
    same(t, a)
    m = np.zeros((3, 2), dtype=np.bool_)
    b = Tensor(m, device=device)
    b[:, 1][::2] = True
    m[:, 1][::2] = True
    same(b, m)
    assert b.dtype is dtypes.bool


# ---------------------------------------------------------------------------------------------------------------
# views numpy does not have (or does not write through): torch is the oracle


@needs_torch
@pytest.mark.parametrize("device", DEVICES)
def test_write_through_diagonal_and_unfold(device: str):
    src = grid(3, 3)
    t, ref = Tensor(src, device=device).realize(), torch.tensor(src)
    t.diagonal()[:] = 0
    ref.diagonal()[:] = 0
    same(t, ref)
    u = Tensor(grid(7), device=device)
    uref = torch.tensor(grid(7))
    u.unfold(0, 2, 3)[1] = -1
    uref.unfold(0, 2, 3)[1] = -1
    same(u, uref)


@needs_torch
@pytest.mark.parametrize("device", DEVICES)
def test_write_through_an_expand_without_overlap(device: str):
    src = grid(1, 4)
    t, ref = Tensor(src, device=device).realize(), torch.tensor(src)
    t.expand(3, 4)[2] = 9
    ref.expand(3, 4)[2] = 9
    same(t, ref)


@needs_torch
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "write",
    [
        lambda x: assign(x.expand(3, 4), x.expand(3, 4) + 1),
        lambda x: x.expand(3, 4)[:, 1].__setitem__(slice(None), 5),
        lambda x: x.expand(3, 4).__iadd__(1),
    ],
    ids=["assign", "setitem", "iadd"],
)
def test_write_through_an_overlapping_expand_is_refused(device: str, write):
    src = grid(1, 4)
    with pytest.raises(RuntimeError, match="single memory location"):
        write(torch.tensor(src))
    t = Tensor(src, device=device).realize()
    with pytest.raises(ArgumentError, match="single memory location"):
        write(t)
    same(t, src)  # nothing was written


@needs_torch
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "op",
    [
        (lambda x: x.pad((1, 1)), lambda x: torch.nn.functional.pad(x, (1, 1))),
        (lambda x: x.repeat(2, 1), lambda x: x.repeat(2, 1)),
        (lambda x: x.roll(1, 1), lambda x: x.roll(1, 1)),
        (lambda x: x.repeat_interleave(2, 1), lambda x: x.repeat_interleave(2, 1)),
        (lambda x: x.contiguous(), lambda x: x.contiguous()),
        (lambda x: x.T.contiguous(), lambda x: x.T.contiguous()),
        (lambda x: x.clone(), lambda x: x.clone()),
        (lambda x: Tensor.cat(x), lambda x: torch.cat([x])),
        (lambda x: x.cat(x[:0], dim=0), lambda x: torch.cat([x, x[:0]], dim=0)),
        (lambda x: Tensor.stack(x)[0], lambda x: torch.stack([x])[0]),
    ],
    ids=[
        "pad",
        "repeat",
        "roll",
        "repeat_interleave",
        "contiguous",
        "T_contiguous",
        "clone",
        "cat1",
        "cat0",
        "stack1",
    ],
)
def test_copies_are_not_views(device: str, op):
    src = grid(2, 3)
    t, ref = Tensor(src, device=device).realize(), torch.tensor(src)
    out, rout = op[0](t), op[1](ref)
    out[0] = 77
    rout[0] = 77
    same(out, rout)
    same(t, ref)


@pytest.mark.parametrize("device", DEVICES)
def test_view_assign_checks_the_value(device: str):
    t = Tensor(grid(3, 4), device=device).realize()
    with pytest.raises(ArgumentError, match="shape"):
        t[1:].assign(Tensor(grid(3, 4), device=device))
    with pytest.raises(TypeError, match="dtype"):
        t.T.assign(Tensor(grid(4, 3).astype(np.int32), device=device))
    same(t, grid(3, 4))


# ---------------------------------------------------------------------------------------------------------------
# a write through a view is one kernel over the view's elements, not over the whole base (kernelize.written_view)


def visits(t: Tensor) -> list[int]:
    """For each kernel of the schedule that would realize t (built, not run): how many elements its loops visit."""
    items, _ = create_schedule([t.uop], [t.device])
    return [math.prod(u.src[0].arg for u in i.ast.toposort() if u.op is Ops.RANGE) for i in items if i.ast is not None]


VIEW_WRITES = {
    # name: (the write on a tensor or a numpy array of grid(12, 12), the view's number of elements)
    "strided slice +=": (lambda a: a[1::2, ::3].__iadd__(1), 6 * 4),
    "row": (lambda a: a.__setitem__(3, 7), 12),
    "element": (lambda a: a.__setitem__((3, 5), 7), 1),
    "transposed, flipped, strided": (lambda a: a.T[2:5, ::-2].__setitem__(slice(None), -1), 3 * 6),
    "reshaped row": (lambda a: a.reshape(4, 36)[1, 10:20].__imul__(-2), 10),
    "negative step *=": (lambda a: a[::-3, 2:9:4].__imul__(3), 4 * 2),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", VIEW_WRITES)
def test_a_write_through_a_view_visits_the_view_only(device: str, name: str):
    write, size = VIEW_WRITES[name]
    a, t = grid(12, 12), Tensor(grid(12, 12), device=device).realize()
    write(a)
    write(t)
    assert visits(t) == [size]
    same(t, a)


@pytest.mark.parametrize("device", DEVICES)
def test_a_view_written_from_elsewhere_in_its_base_copies_the_view_aside(device: str):
    # the value reads elements the write changes: it is computed into a buffer of the view's size first
    a, t = grid(12, 12), Tensor(grid(12, 12), device=device).realize()
    a[1:] = a[:-1].copy()
    t[1:] = t[:-1]
    assert visits(t) == [11 * 12, 11 * 12]
    same(t, a)
    a[::2] += a[1::2] * a[::-2]
    t[::2] += t[1::2] * t[::-2]
    same(t, a)


@pytest.mark.parametrize("device", DEVICES)
def test_a_where_that_keeps_the_base_outside_a_view_writes_the_view_only(device: str):
    # the rule looks at the value, not at how it was made: `where(pad(True), pad(x), t)` is `t[1:] = x`
    a, x = grid(4, 3), grid(3, 3) * -1
    t, tx = Tensor(a, device=device).realize(), Tensor(x, device=device)
    inside = Tensor.ones(3, 3, dtype=dtypes.bool, device=device).pad(((1, 0), (0, 0)))
    t.assign(inside.where(tx.pad(((1, 0), (0, 0))), t))
    assert visits(t) == [3 * 3]
    same(t, np.concatenate([a[:1], x]))
    # the mask and the value moved differently: not a view's write, the whole buffer is computed
    t = Tensor(a, device=device).realize()
    t.assign(inside.where(tx.pad(((0, 1), (0, 0))), t))
    assert visits(t) == [4 * 3]
    same(t, np.concatenate([a[:1], x[1:], np.zeros((1, 3), np.float32)]))


# ---------------------------------------------------------------------------------------------------------------
# property: random chains of views written at random points of random programs, every read checked with numpy


def _overlaps(a: np.ndarray) -> bool:
    """Two elements of numpy view `a` on one location (a stride-0 axis longer than 1: an expand)."""
    return a.size > 1 and any(st == 0 and n > 1 for st, n in zip(a.strides, a.shape))


def _random_index(rng: np.random.Generator, shape: tuple[int, ...]) -> tuple:
    idx: list = []
    for n in shape:
        r = rng.random()
        if r < 0.2 and n:
            idx.append(int(rng.integers(-n, n)))
        elif r < 0.35:
            idx.append(slice(None))
        else:
            bound = [None, *range(-n - 1, n + 2)]
            start, stop = (bound[int(rng.integers(len(bound)))] for _ in range(2))
            steps = [None, 1, 2, 3, -1, -2]
            idx.append(slice(start, stop, steps[int(rng.integers(len(steps)))]))
    return tuple(idx)


def _random_view(rng: np.random.Generator, base: np.ndarray, a: np.ndarray, t: Tensor):
    """A random movement op applied to numpy view `a` and tensor `t` alike; None when numpy cannot make it a view."""
    kind = rng.choice(["slice", "permute", "flip", "reshape", "expand"])
    if kind == "slice":
        idx = _random_index(rng, a.shape)
        return a[(*idx, ...)], t[idx]  # the Ellipsis keeps numpy's result a (0-d) view
    if kind == "permute" and a.ndim > 1:
        order = tuple(int(i) for i in rng.permutation(a.ndim))
        return a.transpose(order), t.permute(order)
    if kind == "flip" and a.ndim:
        axes = tuple(int(i) for i in np.flatnonzero(rng.random(a.ndim) < 0.6)) or (0,)
        return np.flip(a, axes), t.flip(axes)
    if kind == "reshape":
        shape = list(a.shape)
        if rng.random() < 0.5 and len(shape) > 1:  # merge two neighbouring axes
            i = int(rng.integers(len(shape) - 1))
            shape[i : i + 2] = [shape[i] * shape[i + 1]]
        else:  # split an axis into (d, n // d), or add an axis of 1
            i = int(rng.integers(len(shape) + 1))
            n = shape[i] if i < len(shape) else 1
            divisors = [d for d in range(1, n + 1) if n % d == 0] or [1]
            d = divisors[int(rng.integers(len(divisors)))]
            shape[i : i + 1] = [d, n // d] if i < len(shape) else [1]
        r = a.reshape(shape)
        if r.size and not np.shares_memory(r, base):
            return None  # numpy copies here (PyTorch's view() refuses): not a view to write through
        return r, t.reshape(tuple(shape))
    if kind == "expand":
        ones = [i for i, n in enumerate(a.shape) if n == 1]
        if not ones:
            return None
        i = ones[int(rng.integers(len(ones)))]
        shape = a.shape[:i] + (int(rng.integers(2, 4)),) + a.shape[i + 1 :]
        strides = a.strides[:i] + (0,) + a.strides[i + 1 :]
        return np.lib.stride_tricks.as_strided(a, shape, strides), t.expand(shape)
    return None


def _values(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return rng.integers(-9, 10, size=shape).astype(np.float32)


def _write(rng: np.random.Generator, a: np.ndarray, t: Tensor, device: str) -> None:
    """One random write to the view (numpy `a`, tensor `t`); a write numpy makes through overlapping elements
    must be refused by zeptograd (and leave everything as it was)."""
    kind = rng.choice(["assign", "setitem", "iadd", "imul", "self"])
    if kind == "setitem":
        idx = _random_index(rng, a.shape)
        target = a[(*idx, ...)]
        s = float(rng.integers(-9, 10))
        if _overlaps(target):
            with pytest.raises(ArgumentError, match="single memory location"):
                t[idx] = s
            return
        target[...] = s
        t[idx] = s
        return
    if _overlaps(a):
        with pytest.raises(ArgumentError, match="single memory location"):
            t.assign(Tensor(_values(rng, a.shape), device=device))
        return
    if kind == "assign":
        v = _values(rng, a.shape)
        a[...] = v
        t.assign(Tensor(v, device=device))
    elif kind == "iadd":
        a += 3
        t += 3
    elif kind == "imul":
        a *= -2
        t *= -2
    elif a.ndim:  # a value that reads the view itself, through another index pattern
        a[...] = np.flip(a, 0) - a
        t.assign(t.flip(0) - t)


def _random_program(seed: int, device: str, steps: int = 10) -> None:
    rng = np.random.default_rng(seed)
    shape = tuple(int(n) for n in rng.integers(1, 5, size=int(rng.integers(1, 4))))
    base = _values(rng, shape)
    t = Tensor(base.copy(), device=device)
    if rng.random() < 0.3:
        t = t * 1  # a lazy base: no buffer until it is written or read
    elif rng.random() < 0.5:
        t.realize()
    views: list[tuple[np.ndarray, Tensor]] = [(base, t)]
    computed: list[tuple[np.ndarray, Tensor]] = []  # reads made before later writes
    for _ in range(steps):
        a, v = views[int(rng.integers(len(views)))]
        r = rng.random()
        if r < 0.4:
            made = _random_view(rng, base, a, v)
            if made is not None:
                views.append(made)
        elif r < 0.75:
            _write(rng, a, v, device)
        elif r < 0.85:
            computed.append((a * 2 + 1, v * 2 + 1))
        elif r < 0.95:
            np.testing.assert_array_equal(v.numpy(), a, err_msg=f"seed {seed}")
        else:
            v.realize()
    for a, v in views + computed:
        assert v.shape == a.shape, f"seed {seed}"
        np.testing.assert_array_equal(v.numpy(), a, err_msg=f"seed {seed}")


@pytest.mark.parametrize("chunk", range(4))
def test_random_writes_through_views_cpu(chunk: int):
    for seed in range(chunk * 60, (chunk + 1) * 60):
        _random_program(seed, "CPU")


@pytest.mark.parametrize("chunk", range(2))
def test_random_writes_through_views_python(chunk: int):
    for seed in range(1000 + chunk * 30, 1000 + (chunk + 1) * 30):
        _random_program(seed, "PYTHON")
