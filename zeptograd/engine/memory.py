"""The memory planner: intermediate buffers of one schedule share memory when their lifetimes do not overlap.

An *intermediate* is a buffer the schedule itself makes (the output of a CONTIGUOUS, of a reduction that must be
stored, of a copy, the scratch buffer of an in-place hazard) that no tensor keeps once the schedule has run: only
later kernels of the same schedule read it. Its lifetime is the span of schedule items from its first use (the
kernel that writes it) to its last (the last kernel that reads it), both included, so a kernel's inputs and its
output never share bytes. The planner lays the intermediates of each device out in one arena, a byte buffer of
its own: each gets an offset such that two buffers whose lifetimes overlap get disjoint byte ranges. A chain of
N intermediates, each read only by the next kernel, needs two slots, not N.

The arena is allocated when the first of its buffers is, and goes back to the pool when the last of them dies
(each view keeps its base alive), so the same schedule run again (a training step) reuses it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

from zeptograd.dtype import dtypes
from zeptograd.runtime.buffer import Buffer, buffer_for
from zeptograd.schedule.kernelize import ScheduleItem
from zeptograd.uop.ops import UOp

ALIGN = 64  # bytes: every buffer starts on a cache line, so vector loads stay aligned as in a fresh allocation


def _round_up(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def lifetimes(items: Sequence[ScheduleItem], bufs: Iterable[UOp]) -> dict[UOp, tuple[int, int]]:
    """For each of `bufs` that a schedule item uses: the positions of the first and the last item that uses it."""
    wanted = set(bufs)
    spans: dict[UOp, tuple[int, int]] = {}
    for i, item in enumerate(items):
        for b in item.bufs:
            if b in wanted:
                spans[b] = (spans[b][0], i) if b in spans else (i, i)
    return spans


def can_share(items: Sequence[ScheduleItem]) -> bool:
    """Could any two buffers the schedule writes share memory: does one's last use come before another's first
    write? (When none does, as in a convolution whose input and weight copies are both read by its last kernel,
    the planner and the walk of live tensors that finds the intermediates are skipped.)

    >>> from zeptograd.schedule.kernelize import ScheduleItem as Item
    >>> can_share([Item(None, ("a", "x")), Item(None, ("b", "a")), Item(None, ("c", "b"))])  # a dies before c
    True
    >>> can_share([Item(None, ("a", "x")), Item(None, ("b", "x")), Item(None, ("c", "a", "b"))])
    False
    """
    spans = lifetimes(items, (item.bufs[0] for item in items))
    if not spans:
        return False
    return min(last for _, last in spans.values()) < max(first for first, _ in spans.values())


def assign_offsets(blocks: Sequence[tuple[int, int, int]]) -> tuple[list[int], int]:
    """Byte offsets for blocks `(nbytes, first, last)` such that two blocks whose spans `first..last` (both
    included) overlap have disjoint byte ranges, and the size of the arena that holds them all.

    Greedy by size: the largest block goes first, each one to the lowest offset that clears every block already
    placed whose span overlaps its own (first fit).

    >>> assign_offsets([(64, 0, 1), (64, 1, 2), (64, 2, 3)])  # the first and the third never live together
    ([0, 64, 0], 128)
    """
    order = sorted(range(len(blocks)), key=lambda i: (-blocks[i][0], blocks[i][1], i))
    placed: list[tuple[int, int, int, int]] = []  # (offset, nbytes, first, last)
    offsets = [0] * len(blocks)
    for i in order:
        nbytes, first, last = blocks[i]
        clashes = sorted((o, n) for o, n, f, lst in placed if f <= last and first <= lst)
        offset = 0
        for o, n in clashes:
            if o >= offset + nbytes:
                break  # the gap below this block fits
            offset = max(offset, o + n)
        offsets[i] = offset
        placed.append((offset, nbytes, first, last))
    return offsets, max((o + n for o, n, _, _ in placed), default=0)


def plan_memory(items: Sequence[ScheduleItem], intermediates: Iterable[UOp]) -> int:
    """Place the buffers `intermediates` (BUFFER nodes used only inside this schedule, not allocated yet) in one
    arena per device, sharing bytes where their lifetimes allow. Returns the bytes saved against giving each its
    own allocation. A device whose intermediates cannot share anything keeps separate allocations (then each
    comes from the pool by its own size, which is as good)."""
    spans = lifetimes(items, intermediates)
    by_device: dict[str, list[Buffer]] = defaultdict(list)
    nodes: dict[int, UOp] = {}
    for b in spans:
        buf = buffer_for(b)
        if buf.allocated or buf.nbytes == 0:
            continue
        by_device[buf.device].append(buf)
        nodes[id(buf)] = b
    saved = 0
    for device, bufs in by_device.items():
        blocks = [(_round_up(buf.nbytes), *spans[nodes[id(buf)]]) for buf in bufs]
        offsets, size = assign_offsets(blocks)
        if size >= sum(n for n, _, _ in blocks):
            continue
        arena = Buffer(device, size, dtypes.uint8)
        for buf, offset in zip(bufs, offsets):
            buf.place(arena, offset)
        saved += sum(buf.nbytes for buf in bufs) - size
    return saved
