"""Realize: schedule a set of tensors, compile each kernel (once), run the kernels, and make every live
tensor that depended on a computed value read its buffer instead.

Assignment ordering. `t.assign(x)` builds `STORE(BUFFER b, x)`; a tensor that read `b` before the
assignment must keep seeing the old contents. When a STORE to `b` is realized while such a read is still
pending anywhere (a lazy tensor, or a view of `b`), the old contents are copied to a fresh buffer first and
the pending reads are pointed at the copy. When no stale read is pending (the common case:
`p.assign(p - lr * g)`), nothing is copied.

Memory. Buffers that only this schedule's own kernels read (`_intermediates`) share memory where their
lifetimes do not overlap (`memory.plan_memory`); the outputs, and anything a live tensor still refers to, get
their own. `NO_MEMORY_PLANNER=1` gives every buffer its own allocation (to measure what the planner saves).
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Iterable
from typing import Any, Protocol

from zeptograd.codegen import ProgramSpec, get_program
from zeptograd.engine.memory import plan_memory
from zeptograd.helpers import BEAM, DEBUG, NO_MEMORY_PLANNER, NOOPT, THREADS, GlobalCounters
from zeptograd.runtime.buffer import buffer_for
from zeptograd.runtime.device import Device
from zeptograd.schedule.kernelize import ScheduleItem, buffer_of, create_schedule, new_buffer
from zeptograd.uop.ops import Ops, UOp
from zeptograd.uop.render import render_listing


class Lazy(Protocol):
    uop: UOp
    device: str


live_tensors: weakref.WeakSet[Any] = weakref.WeakSet()
# TinyJit's recorder (engine/jit.py): while it is a list, every launch and every buffer copy that realize makes is
# appended to it as (runner, its buffers, program or None for a copy), so that a capture can replay them
capturing: list[tuple[Any, list[Any], ProgramSpec | None]] | None = None
_programs: dict[tuple[str, UOp, int, int, int], tuple[ProgramSpec, Any]] = {}


def compiled(device: str, ast: UOp) -> tuple[ProgramSpec, Any]:
    """The program and runner of a kernel AST on a device, compiled on first use (and again when the flags that
    choose its plan change)."""
    key = (device, ast, NOOPT.value, BEAM.value, THREADS.value)
    if key not in _programs:
        dev = Device[device]
        program = get_program(ast, dev.renderer)
        if DEBUG >= 4:
            print(program.src)
        if DEBUG >= 5:
            print(render_listing(program.uops))
        _programs[key] = (program, dev.runner(program))
    return _programs[key]


def run_schedule(items: Iterable[ScheduleItem]) -> None:
    """Run each item in order: kernels on the device of their output buffer, copies between devices."""
    for item in items:
        bufs = [buffer_for(b) for b in item.bufs]
        if item.ast is None:
            copy_buffers(bufs)
            continue
        device = bufs[0].device
        program, run = compiled(device, item.ast)
        for b in bufs:
            b.array()
        start = time.perf_counter()
        run(bufs)
        if capturing is not None:
            capturing.append((run, bufs, program))
        elapsed = time.perf_counter() - start
        GlobalCounters.kernel_count += 1
        GlobalCounters.global_ops += program.flops
        GlobalCounters.global_mem += program.mem_bytes
        GlobalCounters.time_sum_s += elapsed
        if DEBUG >= 2:
            gflops = program.flops / elapsed * 1e-9 if elapsed else 0.0
            gbs = program.mem_bytes / elapsed * 1e-9 if elapsed else 0.0
            size = "x".join(map(str, program.global_size)) or "1"
            print(
                f"*** {device:<6} {GlobalCounters.kernel_count:4d} {program.name:<28} global {size:<14} "
                f"{elapsed * 1e6:9.1f} us {gflops:8.2f} GFLOP/s {gbs:8.2f} GB/s"
            )


def copy_buffers(bufs: list[Any]) -> None:
    """Copy buffer `bufs[1]` into `bufs[0]` (both devices keep their bytes in host memory)."""
    bufs[0].array()[:] = bufs[1].array()
    if capturing is not None:
        capturing.append((copy_buffers, bufs, None))


def _read_from(root: UOp, b: UOp, old: UOp, store: UOp, cache: dict[UOp, UOp]) -> UOp:
    """`root` reading buffer `old` where it read `b`: not inside `store`, and never as a STORE's target."""
    for node in root.toposort(gate=lambda n: n not in cache and n is not store):
        if node is b:
            cache[node] = old
            continue
        src = tuple(s if node.op is Ops.STORE and i == 0 else cache.get(s, s) for i, s in enumerate(node.src))
        cache[node] = node if all(x is y for x, y in zip(src, node.src)) else node.replace(src=src)
    return cache.get(root, root)


def _snapshot_stale_reads(pending: list[Any]) -> None:
    roots = UOp(Ops.SINK, src=tuple(t.uop for t in pending))
    stores = [u for u in roots.toposort() if u.op is Ops.STORE and u.src[0].op is Ops.BUFFER]
    if not stores:
        return
    # the buffers each live tensor's graph mentions at all: only those that mention b can read it
    mentions: dict[UOp, set[UOp]] = {}
    for t in live_tensors:
        if t.uop not in mentions:
            mentions[t.uop] = {u for u in t.uop.toposort() if u.op is Ops.BUFFER}
    for store in stores:
        b = store.src[0]
        before = {u for u in store.toposort() if u.op is Ops.STORE}
        readers = [t for t in live_tensors if b in mentions[t.uop] and _reads(t.uop, b, before)]
        if not readers:
            continue
        old = new_buffer(b.arg[1], b.arg[2], b.dtype)
        copy_buffers([buffer_for(old), buffer_for(b)])
        cache: dict[UOp, UOp] = {}
        for t in readers:
            t.uop = _read_from(t.uop, b, old, store, cache)
            mentions[t.uop] = {u for u in t.uop.toposort() if u.op is Ops.BUFFER}


def _reads(root: UOp, b: UOp, before: set[UOp]) -> bool:
    """Does `root` read buffer `b` other than through `before`: the STORE to b and the assignments its value
    reads (those run before it, so whatever reads b through them reads the old contents anyway)?"""
    for node in root.toposort(gate=lambda n: n not in before):
        for i, s in enumerate(node.src):
            if s is b and not (node.op is Ops.STORE and i == 0):
                return True
    return root is b


def _intermediates(roots: list[UOp], items: list[ScheduleItem], views: dict[UOp, UOp]) -> set[UOp]:
    """The buffers the schedule makes (written by one of its items, not an assignment's target) that no tensor
    will refer to once live tensors read the realized values: no root, and no realized node that a live
    tensor's graph still reaches (through lazy nodes: a realized node's own graph is replaced by its buffer)."""
    made = {item.bufs[0] for item in items} - {u.src[0] for u in views if u.op is Ops.STORE}
    reached: set[UOp] = set(roots)
    visited: set[UOp] = set()

    def enter(node: UOp) -> bool:
        if node in views:
            reached.add(node)
            return False
        return node not in visited

    for t in list(live_tensors):
        if buffer_of(t.uop) is None:
            visited.update(t.uop.toposort(gate=enter))
    kept = {buffer_of(views[u]) for u in reached if u in views}
    return made - kept


def realize(tensors: Iterable[Lazy]) -> None:
    """Compute every tensor of `tensors` that is not a buffer yet, in one schedule."""
    pending = [t for t in tensors if buffer_of(t.uop) is None]
    if not pending:
        return
    _snapshot_stale_reads(pending)
    roots = list(dict.fromkeys(t.uop for t in pending))
    device_of = {t.uop: t.device for t in pending}
    items, views = create_schedule(roots, [device_of[r] for r in roots])
    # two intermediates can share only if one dies before the other is written: that takes 3 items at least
    if len(items) >= 3 and not NO_MEMORY_PLANNER:
        saved = plan_memory(items, _intermediates(roots, items, views))
        if DEBUG >= 2 and saved:
            print(f"*** memory planner: intermediates share memory, {saved / (1 << 20):.2f} MiB saved")
    run_schedule(items)
    cache: dict[UOp, UOp] = {}
    for t in list(live_tensors):
        if buffer_of(t.uop) is None:
            t.uop = t.uop.substitute(views, cache)
