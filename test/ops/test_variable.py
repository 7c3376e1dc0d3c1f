"""Symbolic variables: `Variable(name, lo, hi).bind(n)` in slices, as a scalar, under TinyJit, against numpy at
every value of the range (its ends included), and one compiled kernel and one schedule for the whole range."""

from __future__ import annotations

import numpy as np
import pytest

from zeptograd import ArgumentError, Tensor, TinyJit, Variable
from zeptograd.engine import realize as engine
from zeptograd.uop.ops import UOp

DEVICES = ["CPU", "PYTHON"]
try:
    import llvmlite  # noqa: F401

    DEVICES.append("LLVM")
except ImportError:
    pass


def test_bind_checks_the_value():
    v = Variable("pos", 2, 5)
    assert v.bind(2).unbind() == (v, 2) and v.bind(5).unbind() == (v, 5)
    with pytest.raises(ValueError, match=r"6 is outside the range \[2, 5\] of variable 'pos'"):
        v.bind(6)
    with pytest.raises(TypeError, match="takes an int"):
        v.bind(2.0)
    with pytest.raises(TypeError, match="only a variable"):
        (v + 1).bind(3)
    with pytest.raises(ValueError, match="min 4 is greater than max 1"):
        Variable("bad", 4, 1)


def test_a_bound_variable_ranges_as_its_variable():
    b = Variable("n", 0, 9).bind(4)
    assert (b.vmin, b.vmax) == (0, 9)  # the value is not baked into shapes or kernels


@pytest.mark.parametrize("device", DEVICES)
def test_symbolic_slice_reads_every_value(device):
    data = np.arange(60, dtype=np.float32).reshape(10, 6)
    t = Tensor(data, device=device).realize()
    v = Variable("start", 0, 7)
    for n in range(8):
        b = v.bind(n)
        got = (t[b : b + 3] * 2 + 1).numpy()
        np.testing.assert_array_equal(got, data[n : n + 3] * 2 + 1)
        c = Variable("col", 0, 4).bind(n % 5)
        np.testing.assert_array_equal(t[:, c : c + 2].numpy(), data[:, n % 5 : n % 5 + 2])
        np.testing.assert_array_equal(t[b : b + 3, c : c + 2].numpy(), data[n : n + 3, n % 5 : n % 5 + 2])


@pytest.mark.parametrize("device", DEVICES)
def test_assign_through_symbolic_slice(device):
    cache = Tensor.zeros(3, 8, 2, device=device).contiguous().realize()
    expected = np.zeros((3, 8, 2), np.float32)
    v = Variable("pos", 0, 7)
    rng = np.random.default_rng(0)
    for n in list(range(8)) + [0, 7]:
        x = rng.standard_normal((3, 1, 2)).astype(np.float32)
        cache[:, v.bind(n) : v.bind(n) + 1].assign(Tensor(x, device=device)).realize()
        expected[:, n : n + 1] = x
        np.testing.assert_array_equal(cache.numpy(), expected)


def test_setitem_through_symbolic_slice():
    c = Tensor.zeros(6, 2).contiguous().realize()
    expected = np.zeros((6, 2), np.float32)
    v = Variable("p", 0, 5)
    for n in (0, 3, 5):
        c[v.bind(n) : v.bind(n) + 1] = Tensor([[n + 1.0, n + 2.0]])
        expected[n] = [n + 1, n + 2]
    np.testing.assert_array_equal(c.numpy(), expected)


def test_one_kernel_and_one_schedule_for_the_range():
    t = Tensor(np.arange(40, dtype=np.float32)).realize()
    v = Variable("i", 0, 36)
    (t[v.bind(0) : v.bind(0) + 4] * 3).realize()
    programs, hits = len(engine._programs), engine.schedule_cache_stats["hits"]
    for n in range(1, 37):
        got = (t[v.bind(n) : v.bind(n) + 4] * 3).numpy()
        np.testing.assert_array_equal(got, np.arange(n, n + 4, dtype=np.float32) * 3)
    assert len(engine._programs) == programs  # no kernel compiled for a new value
    assert engine.schedule_cache_stats["hits"] - hits == 36  # every value scheduled from the cache


def test_kernel_takes_the_variable_as_an_argument():
    from zeptograd.codegen import get_program
    from zeptograd.runtime.device import Device
    from zeptograd.schedule.kernelize import create_schedule

    t = Tensor(np.arange(8, dtype=np.float32)).realize()
    v = Variable("k", 0, 6)
    out = t[v.bind(2) : v.bind(2) + 2] + 1
    roots, _, _ = engine.unbind_variables([out.uop], out.uop.toposort())
    items, _ = create_schedule(roots, ["CPU"])
    (item,) = [i for i in items if i.ast is not None]
    program = get_program(item.ast, Device["CPU"].renderer)
    assert [u.arg[0] for u in program.variables] == ["k"]
    assert "k" in program.src.split("{")[0]  # a parameter of the C function


def test_variable_as_a_scalar():
    v = Variable("p", 0, 7)
    for n in (0, 3, 7):
        mask = Tensor.arange(8) <= Tensor(v.bind(n))
        np.testing.assert_array_equal(mask.numpy(), np.arange(8) <= n)
        assert (Tensor(v.bind(n)) * 3 + 1).item() == 3 * n + 1


def test_gradient_through_symbolic_slice():
    x = Tensor(np.arange(12, dtype=np.float32).reshape(6, 2), requires_grad=True)
    v = Variable("s", 0, 4)
    for n in (0, 2, 4):
        x.grad = None
        (x[v.bind(n) : v.bind(n) + 2] * Tensor([[1.0, 2.0], [3.0, 4.0]])).sum().backward()
        expected = np.zeros((6, 2), np.float32)
        expected[n : n + 2] = [[1, 2], [3, 4]]
        np.testing.assert_array_equal(x.grad.numpy(), expected)


def test_errors_name_the_variable_and_its_range():
    t = Tensor(np.zeros(10, np.float32))
    v = Variable("pos", 0, 9)
    with pytest.raises(IndexError, match=r"reaches \[0, 11\)"):
        t[v.bind(3) : v.bind(3) + 2]  # pos up to 9 would read 9..10
    with pytest.raises(NotImplementedError, match="symbolic length"):
        t[: v.bind(3) + 1]
    with pytest.raises(IndexError, match="step 1"):
        t[v.bind(1) : v.bind(1) + 4 : 2]
    w = Variable("pos", 0, 5)
    with pytest.raises(ValueError, match="two variables named 'pos'"):
        (t[v.bind(1) : v.bind(1) + 1] + t[w.bind(1) : w.bind(1) + 1]).realize()
    with pytest.raises(ValueError, match="bound to both 1 and 2"):
        (t[v.bind(1) : v.bind(1) + 1] + t[v.bind(2) : v.bind(2) + 1]).realize()


def test_unbound_variable_has_no_value():
    v = Variable("free", 0, 3)
    with pytest.raises(ValueError, match="'free' has no value"):
        (Tensor.arange(4) + Tensor(v)).realize()


def test_tinyjit_replays_one_capture_for_every_value():
    size = 12
    cache = Tensor.zeros(size, 3).contiguous().realize()
    v = Variable("pos", 0, size - 1)

    @TinyJit
    def step(x: Tensor, pos: UOp) -> Tensor:
        cache[pos : pos + 1].assign(x).realize()
        seen = (Tensor.arange(size) <= Tensor(pos)).reshape(size, 1)
        return seen.where(cache, 0.0).sum(0)

    rng = np.random.default_rng(1)
    expected = np.zeros((size, 3), np.float32)
    captures, programs = [], None
    for n in range(size):
        x = rng.standard_normal((1, 3)).astype(np.float32)
        expected[n] = x
        got = step(Tensor(x), v.bind(n)).numpy()
        np.testing.assert_allclose(got, expected[: n + 1].sum(0), rtol=1e-6, atol=1e-6)
        if step.captured:
            captures.append(step._capture)
            programs = len(engine._programs) if programs is None else programs
    assert len({id(c) for c in captures}) == 1  # captured once (on the second call), replayed after
    assert len(engine._programs) == programs  # replays compile nothing


def test_tinyjit_checks_the_variable_argument():
    v = Variable("pos", 0, 3)
    t = Tensor(np.arange(6, dtype=np.float32)).realize()

    @TinyJit
    def f(pos: UOp) -> Tensor:
        return t[pos : pos + 2] + 1

    for n in range(3):
        np.testing.assert_array_equal(f(v.bind(n)).numpy(), np.arange(n, n + 2) + 1)
    with pytest.raises(ArgumentError, match="Variable 'pos'"):
        f(2)


def test_beam_search_times_a_kernel_with_a_variable(tmp_path, monkeypatch):
    from zeptograd import Context

    monkeypatch.setenv("ZEPTOGRAD_CACHE_DIR", str(tmp_path))
    t = Tensor(np.arange(64, dtype=np.float32).reshape(8, 8)).realize()
    v = Variable("row", 0, 6)
    with Context(BEAM=1):
        for n in (0, 6):
            got = (t[v.bind(n) : v.bind(n) + 2] * 2).sum(axis=0).numpy()
            np.testing.assert_allclose(got, (np.arange(64, dtype=np.float32).reshape(8, 8)[n : n + 2] * 2).sum(0))
