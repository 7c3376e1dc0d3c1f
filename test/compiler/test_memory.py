"""Memory: the caching allocator (runtime/buffer.py's pool), GlobalCounters.mem_used / mem_peak, and the memory
planner (engine/memory.py) that lets a schedule's intermediate buffers share memory. Values are checked against
numpy; the planner's layouts against the rule it must keep (buffers alive at the same time never share a byte)."""

from __future__ import annotations

import gc
import random

import numpy as np
import pytest

from zeptograd import Context, GlobalCounters, Tensor
from zeptograd.dtype import dtypes
from zeptograd.engine.memory import assign_offsets, lifetimes, plan_memory
from zeptograd.engine.realize import _intermediates, run_schedule
from zeptograd.runtime.buffer import Buffer, _Pool, buffer_for
from zeptograd.schedule.kernelize import create_schedule
from zeptograd.uop.buffers import buffer_of

MiB = 1 << 20


# *** the pool ***


def test_freed_buffer_memory_is_reused_by_the_next_allocation_of_that_size():
    n = 12_345  # a size no other test allocates, so the pool's free list for it starts empty
    a = Buffer("CPU", n, dtypes.float32)
    a.array()[:] = 7
    address = a.address
    del a
    b = Buffer("CPU", n, dtypes.float32)
    b.array()
    assert b.address == address
    # a different dtype of the same byte size takes the same memory too: the pool keeps bytes
    del b
    c = Buffer("CPU", n, dtypes.int32)
    c.array()
    assert c.address == address


def test_pool_is_per_device():
    n = 12_346
    a = Buffer("CPU", n, dtypes.float32)
    a.array()
    address = a.address
    del a
    b = Buffer("PYTHON", n, dtypes.float32)
    b.array()
    assert b.address != address
    c = Buffer("CPU", n, dtypes.float32)
    c.array()
    assert c.address == address


def test_pool_keeps_at_most_its_limit():
    p = _Pool(limit=100)
    a, b, c = (np.empty(64, np.uint8) for _ in range(3))
    p.give("CPU", a, 64)
    p.give("CPU", b, 64)  # 128 > 100: dropped
    assert p.held == 64
    assert p.take("CPU", 64) is a
    assert p.held == 0
    assert p.take("CPU", 64) is not b  # nothing kept: a fresh allocation
    p.give("CPU", c, 64)
    p.clear()
    assert p.held == 0 and p.take("CPU", 64) is not c


@pytest.mark.no_roundtrip  # the round-trip check records (and so keeps alive) every node a test builds
def test_tensor_memory_comes_back_from_the_pool():
    n = 3 * MiB // 4 + 11
    x = Tensor(np.ones(n, np.float32)).realize()
    y = (x * 2).realize()
    address = buffer_for(buffer_of(y.uop)).address
    del y
    gc.collect()
    z = (x * 3).realize()
    assert buffer_for(buffer_of(z.uop)).address == address
    np.testing.assert_array_equal(z.numpy(), np.full(n, 3, np.float32))


# *** mem_used and mem_peak ***


def test_mem_peak_follows_allocations_and_reset_starts_it_again():
    gc.collect()
    GlobalCounters.reset()
    used = GlobalCounters.mem_used
    assert GlobalCounters.mem_peak == used
    a = Buffer("CPU", MiB, dtypes.uint8)
    a.array()
    assert GlobalCounters.mem_used == used + MiB and GlobalCounters.mem_peak == used + MiB
    del a
    assert GlobalCounters.mem_used == used and GlobalCounters.mem_peak == used + MiB
    GlobalCounters.reset()
    assert GlobalCounters.mem_peak == used


# *** offsets: buffers alive together never share a byte ***


def _check_layout(blocks: list[tuple[int, int, int]], offsets: list[int], size: int) -> None:
    for i, (n, first, last) in enumerate(blocks):
        assert 0 <= offsets[i] and offsets[i] + n <= size
        for j in range(i):
            m, f, lst = blocks[j]
            if first <= lst and f <= last:  # alive at the same time
                assert offsets[i] + n <= offsets[j] or offsets[j] + m <= offsets[i], (blocks[i], blocks[j])


def test_assign_offsets_never_overlaps_live_blocks():
    rng = random.Random(0)
    for _ in range(300):
        blocks = []
        for _ in range(rng.randint(0, 12)):
            first = rng.randint(0, 10)
            blocks.append((64 * rng.randint(1, 8), first, first + rng.randint(0, 4)))
        offsets, size = assign_offsets(blocks)
        _check_layout(blocks, offsets, size)
        # the arena is at least the most bytes alive at once and at most all of them
        peak = max((sum(n for n, f, lst in blocks if f <= i <= lst) for i in range(16)), default=0)
        assert peak <= size <= sum(n for n, _, _ in blocks)


def test_assign_offsets_chain_uses_two_slots():
    blocks = [(256, i, i + 1) for i in range(10)]
    offsets, size = assign_offsets(blocks)
    assert size == 512 and set(offsets) == {0, 256}


# *** the planner in realize ***


def _chain(x: Tensor, n: int) -> Tensor:
    for i in range(n):
        x = ((x + (i + 1)) * 0.5).contiguous()
    return x


def _chain_np(x: np.ndarray, n: int) -> np.ndarray:
    x = x.astype(np.float64)
    for i in range(n):
        x = (x + (i + 1)) * 0.5
    return x


@pytest.mark.no_roundtrip  # the round-trip check records (and so keeps alive) every node a test builds
@pytest.mark.parametrize("planner", [True, False])
def test_chain_of_intermediates_peaks_at_two_of_them(planner: bool):
    n, steps = MiB // 4, 8  # 1 MiB each
    a = np.random.default_rng(0).standard_normal(n, dtype=np.float32)
    x = Tensor(a).realize()
    gc.collect()
    GlobalCounters.reset()
    before = GlobalCounters.mem_used
    with Context(NO_MEMORY_PLANNER=0 if planner else 1):
        out = _chain(x, steps).sum().realize()
    peak = GlobalCounters.mem_peak - before
    np.testing.assert_allclose(out.numpy(), _chain_np(a, steps).sum(), rtol=1e-4)
    if planner:
        # each kernel reads one intermediate and writes the next: two slots, plus the partial sums of the reduction
        assert peak < 2.5 * MiB
    else:
        assert peak >= steps * MiB


@pytest.mark.no_roundtrip
def test_chain_on_the_python_device():
    a = np.arange(40, dtype=np.float32)
    x = Tensor(a, device="PYTHON").realize()
    gc.collect()
    GlobalCounters.reset()
    before = GlobalCounters.mem_used
    out = (_chain(x, 5) * 3).realize()
    np.testing.assert_allclose(out.numpy(), _chain_np(a, 5) * 3, rtol=1e-6)
    assert GlobalCounters.mem_peak - before <= 3 * _round64(40 * 4)  # two slots and the output


def _round64(n: int) -> int:
    return -(-n // 64) * 64


def test_intermediate_a_tensor_keeps_is_not_shared():
    a = np.random.default_rng(1).standard_normal(4096, dtype=np.float32)
    x = Tensor(a).realize()
    first = (x + 1).contiguous()  # a live tensor: realized with the rest, and must keep its value
    later = (first * 5).contiguous()  # lazy tensor reading another intermediate: that one must be kept too
    deep = _chain(later, 4)
    total = deep.sum().realize()
    np.testing.assert_allclose(total.numpy(), _chain_np((a + 1.0) * 5, 4).sum(), rtol=1e-4)
    np.testing.assert_allclose(first.numpy(), a + 1, rtol=1e-6)
    np.testing.assert_allclose(later.numpy(), (a + 1.0) * 5, rtol=1e-6)
    np.testing.assert_allclose(deep.numpy(), _chain_np((a + 1.0) * 5, 4), rtol=1e-5)


def test_overlapping_lifetimes_get_distinct_memory():
    a = np.random.default_rng(2).standard_normal(1000, dtype=np.float32)
    x = Tensor(a).realize()
    x1 = (x + 1).contiguous()
    x2 = (x1 * 2).contiguous()
    x3 = (x2 - 3).contiguous()
    x4 = (x3 * x1).contiguous()  # x1 lives across x2 and x3
    x5 = (x4 * 2).contiguous()
    x6 = (x5 + x2).contiguous()  # x2 lives across x3, x4 and x5
    root = x6.sum().uop
    del x1, x2, x3, x4, x5, x6
    items, views = create_schedule([root], ["CPU"])
    inter = _intermediates([root], items, views)
    assert len(inter) == 6
    plan_memory(items, inter)
    run_schedule(items)
    spans = lifetimes(items, inter)
    bufs = list(spans)
    assert len({buffer_for(b).base for b in bufs}) == 1  # one arena
    for i, b in enumerate(bufs):
        for c in bufs[:i]:
            (f1, l1), (f2, l2) = spans[b], spans[c]
            bb, cb = buffer_for(b), buffer_for(c)
            if f1 <= l2 and f2 <= l1:
                assert bb.offset + bb.nbytes <= cb.offset or cb.offset + cb.nbytes <= bb.offset
    # x1 (or x3) and x5 never live together, so the arena is smaller than the six buffers
    assert buffer_for(bufs[0]).base.nbytes < 6 * 4000
    result = buffer_for(buffer_of(views[root])).numpy()
    x1n = a.astype(np.float64) + 1
    x2n = x1n * 2
    np.testing.assert_allclose(result, ((x2n - 3) * x1n * 2 + x2n).sum(), rtol=1e-4)


def test_schedule_whose_buffers_all_live_to_the_end_skips_the_planner(monkeypatch):
    # two copies read only by the last kernel (a convolution's input and weight copies): no two buffers can share,
    # so the realize does not plan (nor walk the live tensors for intermediates); the value is still right
    import zeptograd.engine.realize as engine

    calls = []
    monkeypatch.setattr(engine, "plan_memory", lambda *a: calls.append(a) or 0)
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((64, 32), dtype=np.float32), rng.standard_normal((32, 64), dtype=np.float32)
    x, y = Tensor(a).realize(), Tensor(b).realize()
    out = x.T.contiguous() + (y * 2).contiguous()  # three kernels: two copies, then the sum that reads both
    np.testing.assert_allclose(out.numpy(), a.T + b * 2, rtol=1e-6)
    assert calls == []
    # a chain, where the first intermediate dies before the third is written, is planned
    chain = ((x + 1).contiguous() * 2).contiguous()
    (chain - 3).contiguous().sum().realize()
    assert len(calls) == 1


@pytest.mark.no_roundtrip
def test_same_schedule_again_reuses_the_arena():
    a = np.random.default_rng(3).standard_normal(MiB // 4, dtype=np.float32)
    x = Tensor(a).realize()
    addresses = []
    for _ in range(3):
        y = _chain(x, 4) * 1  # the planner works on the chain's buffers; the product is the output
        root = y.uop
        del y
        items, views = create_schedule([root], ["CPU"])
        plan_memory(items, _intermediates([root], items, views))
        run_schedule(items)
        bases = {buffer_for(b).base for item in items for b in item.bufs} - {None}
        assert len(bases) == 1
        addresses.append(bases.pop().address)
        np.testing.assert_allclose(buffer_for(buffer_of(views[root])).numpy(), _chain_np(a, 4), rtol=1e-5)
        del items, views, root, bases
        gc.collect()
    assert addresses[1] == addresses[2]


def test_assign_target_is_never_planned():
    a = np.random.default_rng(4).standard_normal(512, dtype=np.float32)
    t = Tensor(a.copy()).realize()
    t.assign(_chain(t, 4) + 1).realize()
    np.testing.assert_allclose(t.numpy(), _chain_np(a, 4) + 1, rtol=1e-5)
    t.assign(_chain(t.flip(0), 3)).realize()  # reads the target elsewhere: a scratch buffer, then a copy
    np.testing.assert_allclose(t.numpy(), _chain_np((_chain_np(a, 4) + 1)[::-1], 3), rtol=1e-5)
