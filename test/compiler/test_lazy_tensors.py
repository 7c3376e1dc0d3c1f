"""What a realize updates besides its own tensors: every live tensor whose graph read a node it computed reads the
node's buffer afterwards. A realize visits only the tensors that may still be lazy (`engine.realize.lazy_tensors`),
so the registry must hold every tensor whose graph is not a buffer: these tests check that invariant through the
ways a tensor's graph changes (ops, views, shallow copies, assignment, writes through views, stale-read snapshots,
TinyJit), and the values against numpy."""

from __future__ import annotations

import copy

import numpy as np

from zeptograd import Tensor, TinyJit
from zeptograd.engine.realize import lazy_tensors, live_tensors
from zeptograd.uop.buffers import buffer_of
from zeptograd.uop.ops import Ops


def _registered(t: Tensor) -> bool:
    return any(u is t for u in lazy_tensors.tensors())


def assert_every_lazy_tensor_registered() -> None:
    lazy = {id(t) for t in lazy_tensors.tensors()}
    missing = [t for t in list(live_tensors) if buffer_of(t.uop) is None and id(t) not in lazy]
    assert not missing, f"{len(missing)} lazy tensors are not in lazy_tensors: {[t.uop.op for t in missing][:5]}"


def test_realized_tensors_leave_the_registry_and_data_never_enters_it() -> None:
    data = [Tensor(np.full(3, i, np.float32)) for i in range(50)]
    assert not any(_registered(t) for t in data)
    y = data[0] + 1
    assert _registered(y)
    y.realize()
    assert not _registered(y)
    np.testing.assert_array_equal(y.numpy(), np.full(3, 1, np.float32))
    assert_every_lazy_tensor_registered()


def test_lazy_reader_of_a_realized_node_reads_its_buffer_beside_many_realized_tensors() -> None:
    rng = np.random.default_rng(0)
    held = [Tensor(rng.standard_normal(4).astype(np.float32)).realize() for _ in range(300)]
    xn = rng.standard_normal(8).astype(np.float32)
    x = Tensor(xn)
    y = x * 2
    z = y + 1  # lazy, built from y's lazy graph
    y.realize()
    y_buffer = buffer_of(y.uop)
    assert y_buffer is not None
    graph = z.uop.toposort()
    assert any(u is y_buffer for u in graph), "z still recomputes y instead of reading its buffer"
    assert not any(u.op is Ops.MUL for u in graph)
    np.testing.assert_array_equal(z.numpy(), xn * 2 + 1)
    assert len(held) == 300


def test_registry_holds_every_lazy_tensor_through_views_and_assignments() -> None:
    an = np.arange(12, dtype=np.float32).reshape(3, 4)
    a = Tensor(an.copy()).realize()
    view = a[1:3]  # a view of a: a write to a refreshes it
    reader = a * 10  # a lazy reader of a's old contents
    assert_every_lazy_tensor_registered()
    a.assign(a + 1)  # a's graph becomes a STORE: lazy again
    assert _registered(a)
    shallow = copy.copy(a)  # another tensor of the same pending STORE
    assert_every_lazy_tensor_registered()
    view[0, 1:3] = Tensor(np.array([100.0, 200.0], np.float32))  # a write through a view: one STORE of a
    assert_every_lazy_tensor_registered()
    a.realize()
    assert_every_lazy_tensor_registered()
    want = an + 1
    want[1, 1:3] = [100.0, 200.0]
    np.testing.assert_array_equal(a.numpy(), want)
    np.testing.assert_array_equal(shallow.numpy(), want)  # it shares a's memory, and the STORE ran once
    np.testing.assert_array_equal(view.numpy(), want[1:3])
    np.testing.assert_array_equal(reader.numpy(), an * 10)  # it read a before the assignments
    assert_every_lazy_tensor_registered()


def test_registry_through_tinyjit_replays() -> None:
    w = Tensor(np.ones(4, np.float32)).realize()

    @TinyJit
    def step(x: Tensor) -> Tensor:
        w.assign(w * 2)
        return (x + w).sum()

    for i in range(4):
        out = step(Tensor(np.full(4, i, np.float32)).realize())
        assert_every_lazy_tensor_registered()
        np.testing.assert_allclose(out.numpy(), 4 * i + 4 * 2.0 ** (i + 1))
    later = w + 1  # built after the replays: lazy, registered
    assert _registered(later)
    np.testing.assert_array_equal(later.numpy(), np.full(4, 2.0**4 + 1, np.float32))


def test_a_realize_walks_only_the_lazy_graphs_that_can_hold_what_it_computed(monkeypatch) -> None:
    # each lazy graph reads its own buffer: realizing one cannot change the others, which are not walked
    # (UOp.leaf_bits; a graph whose buffer shares a's bit, one of 1024, is walked for nothing: not asked here); a
    # graph that shares a realized node inside the schedule (the sum, stored since it is broadcast) is walked and
    # reads that node's buffer afterwards
    from zeptograd.uop.ops import UOp

    rng = np.random.default_rng(1)
    xs = [rng.standard_normal(6).astype(np.float32) for _ in range(40)]
    lazy = [(Tensor(a) + 1) * 2 for a in xs]
    an = rng.standard_normal(6).astype(np.float32)
    a = Tensor(an)
    centered, scaled = a - a.sum(), a / a.sum()
    a_bits = a.uop.leaf_bits()
    others = {id(t.uop) for t in lazy if not t.uop.leaf_bits() & a_bits}  # all 40 but a collision's 1 in 1024 each
    assert len(others) >= 30
    shared = id(scaled.uop)
    walked: list[int] = []
    substitute = UOp.substitute
    monkeypatch.setattr(UOp, "substitute", lambda u, *args: walked.append(id(u)) or substitute(u, *args))
    centered.realize()
    assert shared in walked and not others & set(walked)
    assert not any(u.op is Ops.REDUCE_AXIS for u in scaled.uop.toposort())
    np.testing.assert_allclose(centered.numpy(), an - an.sum(dtype=np.float32), rtol=1e-6)
    np.testing.assert_allclose(scaled.numpy(), an / an.sum(dtype=np.float32), rtol=1e-6)
    for t, x in zip(lazy, xs):
        np.testing.assert_array_equal(t.numpy(), (x + 1) * 2)


def test_a_realize_does_not_walk_the_base_its_result_moves(monkeypatch) -> None:
    # `y = b.T` keeps b alive as its base: b lies below y, so it cannot hold y and is not walked; b is still right
    # afterwards
    from zeptograd.uop.ops import UOp

    rng = np.random.default_rng(2)
    an = rng.standard_normal((5, 7)).astype(np.float32)
    table = rng.standard_normal((50, 4)).astype(np.float32)
    idx = rng.integers(0, 50, 9).astype(np.int32)
    ((Tensor(an) + 1).T.realize(), Tensor(table)[Tensor(idx)].realize())  # scheduled once: later, replayed
    walked: list[int] = []
    substitute = UOp.substitute
    monkeypatch.setattr(UOp, "substitute", lambda u, *args: walked.append(id(u)) or substitute(u, *args))
    b = Tensor(an) + 1
    y = b.T
    g = Tensor(table)[Tensor(idx)]  # a permute of the gather's sum
    bases = {id(b.uop), *(id(u) for u in g.uop.src)}
    y.realize()
    g.realize()
    assert not bases & set(walked)
    np.testing.assert_array_equal(y.numpy(), (an + 1).T)
    np.testing.assert_array_equal(b.numpy(), an + 1)
    np.testing.assert_array_equal(g.numpy(), table[idx])


def test_a_realized_node_that_reads_no_buffer_is_replaced_in_every_graph() -> None:
    # an arange reads no buffer: no graph can be skipped, and its readers read its buffer afterwards
    r = Tensor.arange(8) * 3
    s = r + 1
    r.realize()
    assert not any(u.op is Ops.MUL for u in s.uop.toposort())
    np.testing.assert_array_equal(s.numpy(), np.arange(8) * 3 + 1)
