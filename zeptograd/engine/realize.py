"""Realize: schedule a set of tensors, compile each kernel (once, with BEAM search's plan where BEAM=n asks for one),
run the kernels, and make every live tensor that depended on a computed value read its buffer instead.

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

import functools
import operator
import time
import weakref
from collections.abc import Collection, Iterable
from typing import Any, Protocol

from zeptograd.codegen import ProgramSpec, get_program
from zeptograd.dtype import dtypes
from zeptograd.engine.constants import CONST_BUFFERS_KEPT, LIFTING_DEVICES, constant_buffer, lift_constants
from zeptograd.engine.facts import device_facts
from zeptograd.engine.memory import can_share, plan_memory
from zeptograd.engine.search import beam_opts
from zeptograd.helpers import BEAM, DEBUG, NO_MEMORY_PLANNER, NOOPT, SPEC, STORE_COST, THREADS, GlobalCounters
from zeptograd.runtime.buffer import Buffer, VariableValue, buffer_for
from zeptograd.runtime.device import Device
from zeptograd.schedule.kernelize import ScheduleItem, create_schedule
from zeptograd.uop.buffers import buffer_of, new_buffer, view_of
from zeptograd.uop.ops import Ops, UOp, is_bound_variable
from zeptograd.uop.render import render_listing
from zeptograd.uop.spec import tensor_spec, verify


class Lazy(Protocol):
    uop: UOp
    device: str


live_tensors: weakref.WeakSet[Any] = weakref.WeakSet()


class _TensorRef(weakref.ref):
    """A weak reference to a tensor with the key it is held under (the tensor's id)."""

    __slots__ = ("key",)
    key: int


class TensorRefs:
    """A set of live tensors, by identity, that does not keep them alive. (A WeakSet compares two references to
    one tensor with `==`, which a tensor computes elementwise: adding a member twice, or discarding one, would
    raise.)

    >>> from zeptograd import Tensor
    >>> refs, t = TensorRefs(), Tensor([1.0, 2.0])
    >>> refs.add(t); refs.add(t); [u is t for u in refs.tensors()]
    [True]
    >>> del t; len(refs)
    0
    """

    __slots__ = ("_refs",)

    def __init__(self) -> None:
        self._refs: dict[int, _TensorRef] = {}

    def _forget(self, ref: _TensorRef) -> None:
        if self._refs.get(ref.key) is ref:
            del self._refs[ref.key]

    def add(self, t: Any) -> None:
        key = id(t)
        if key not in self._refs:
            ref = _TensorRef(t, self._forget)
            ref.key = key
            self._refs[key] = ref

    def discard(self, t: Any) -> None:
        self._refs.pop(id(t), None)

    def tensors(self) -> list[Any]:
        """The members, as a list (copied first: a tensor dying meanwhile changes nothing)."""
        return [t for r in list(self._refs.values()) if (t := r()) is not None]

    def __len__(self) -> int:
        return len(self._refs)


# the live tensors whose graph may not be a buffer yet (every such tensor is in it, a realized one may be too):
# the end of a realize points these, and only these, at what it computed. A program holds many realized tensors
# (parameters, optimizer state, data), and visiting each at every realize made a realize cost O(live tensors):
# a tiny op's realize beside 1000 realized tensors took several times as long as beside none
lazy_tensors = TensorRefs()
# TinyJit's recorder (engine/jit.py): while it is a list, every launch and every buffer copy that realize makes is
# appended to it as (runner, its buffers, program or None for a copy), so that a capture can replay them
capturing: list[tuple[Any, list[Any], ProgramSpec | None]] | None = None
# while a list (bench/models.py's roofline): every kernel launch appends its program and the seconds it ran
kernel_log: list[tuple[ProgramSpec, float]] | None = None
_programs: dict[tuple[str, UOp, int, int, int], tuple[ProgramSpec, Any]] = {}
# kernels whose constants come from a buffer (engine/constants.py): a kernel AST -> the program of its structure, its
# runner and the buffer of its values (bounded: a loop over new constants makes a new AST at each step)
_lifted: dict[tuple[str, UOp, int, int, int], tuple[ProgramSpec, Any, tuple[Any, ...]]] = {}
# the structures (kernel ASTs with their constants lifted) -> the kernel that was compiled with its constants in
# its code (the first of each structure)
_baked: dict[tuple[str, UOp, int, int, int], UOp] = {}


def _compile(device: str, ast: UOp) -> tuple[ProgramSpec, Any]:
    dev = Device[device]
    program = get_program(ast, dev.renderer, beam_opts(ast, dev.renderer))
    if DEBUG >= 4:
        print(program.src)
    if DEBUG >= 5:
        print(render_listing(program.uops))
    return program, dev.runner(program)


def _structure_seen(device: str, ast: UOp, flags: tuple[int, int, int]) -> tuple[UOp, tuple[float, ...]] | None:
    """`ast` with its constants lifted, and their values, when its structure was compiled (or is to be) with other
    constants in the code: then it takes the lifted program. Else None: the first kernel of its structure (noted
    here) keeps its constants in its code."""
    if device not in LIFTING_DEVICES:
        return None
    lifted, values = lift_constants(ast)
    if not values:
        return None
    first = _baked.setdefault((device, lifted, *flags), ast)
    return None if first is ast else (lifted, values)


def compiled(device: str, ast: UOp) -> tuple[ProgramSpec, Any, tuple[Any, ...]]:
    """The program and runner of a kernel AST on a device, compiled on first use (and again when the flags that
    choose its plan change), and the buffers to pass after the kernel's own: none, or its constants
    (engine/constants.py) where a kernel of its structure was compiled with other constants before."""
    flags = (NOOPT.value, BEAM.value, THREADS.value)
    key = (device, ast, *flags)
    if (program_run := _programs.get(key)) is not None:
        return (*program_run, ())
    if (hit := _lifted.get(key)) is not None:
        return hit
    if (seen := _structure_seen(device, ast, flags)) is None:
        _programs[key] = _compile(device, ast)
        return (*_programs[key], ())
    lifted, values = seen
    structure = (device, lifted, *flags)
    if structure not in _programs:
        _programs[structure] = _compile(device, lifted)
    if len(_lifted) >= CONST_BUFFERS_KEPT:
        _lifted.clear()
    _lifted[key] = (*_programs[structure], (constant_buffer(device, values),))
    return _lifted[key]


def compile_schedule(items: Iterable[ScheduleItem]) -> None:
    """Compile the kernels of `items` that are not compiled yet, on each device all at once where the device can
    (the CPU compiles them as one file: one gcc run instead of one a kernel). A kernel whose structure was compiled
    with other constants is left to `compiled`, which gives it the program that reads them from a buffer."""
    todo: dict[tuple, tuple[str, UOp]] = {}
    flags = (NOOPT.value, BEAM.value, THREADS.value)
    for item in items:
        if item.ast is not None:
            device = item.bufs[0].arg[1]
            key = (device, item.ast, *flags)
            new = key not in _programs and key not in _lifted and key not in todo
            if new and _structure_seen(device, item.ast, flags) is None:
                todo[key] = (device, item.ast)
    if len(todo) < 2:
        return  # one kernel: compiled() does it when it runs
    for device in dict.fromkeys(d for d, _ in todo.values()):
        dev = Device[device]
        keys = [k for k, (d, _) in todo.items() if d == device]
        programs = [get_program(todo[k][1], dev.renderer, beam_opts(todo[k][1], dev.renderer)) for k in keys]
        runners = dev.runners(programs) if hasattr(dev, "runners") else [dev.runner(p) for p in programs]
        for key, program, run in zip(keys, programs, runners):
            if DEBUG >= 4:
                print(program.src)
            if DEBUG >= 5:
                print(render_listing(program.uops))
            _programs[key] = (program, run)


def unbind_variables(roots: list[UOp], nodes: list[UOp]) -> tuple[list[UOp], dict[UOp, int], dict[UOp, UOp]]:
    """The graph of `roots` (whose toposort is `nodes`) with every bound variable replaced by its variable, the
    variables' values, and the rebuilt nodes (old -> new). The schedule, the kernels and their cache keys then hold
    the variable, never its value: one schedule and one compiled kernel serve every value in its range."""
    # locals, no call per node: this runs at every realize of a graph that assigns (each eager optimizer step)
    STORE, DEFINE_VAR = Ops.STORE, Ops.DEFINE_VAR
    bound = [u for u in nodes if u.op is STORE and u.src[0].op is DEFINE_VAR and is_bound_variable(u)]
    if not bound:
        return roots, {}, {}
    values: dict[UOp, int] = {}
    names: dict[str, UOp] = {}
    for b in bound:
        var, value = b.unbind()
        if names.setdefault(var.arg[0], var) is not var:
            raise ValueError(f"realize: two variables named {var.arg[0]!r} (with different ranges) in one computation")
        if values.setdefault(var, value) != value:
            raise ValueError(
                f"realize: variable {var.arg[0]!r} is bound to both {values[var]} and {value} in one computation"
            )
    rebuilt: dict[UOp, UOp] = {}
    mapping = {b: b.src[0] for b in bound}
    return [r.substitute(mapping, rebuilt) for r in roots], values, rebuilt


def _variable_values(program: ProgramSpec, device: str, var_vals: dict[UOp, int]) -> list[VariableValue]:
    if not getattr(Device[device], "variables", False):
        raise NotImplementedError(
            f"{program.name} takes the symbolic variables {', '.join(v.arg[0] for v in program.variables)}: the "
            f"{device} device does not pass variables to kernels yet (CPU, LLVM and PYTHON do)"
        )
    # by name: the kernel's variables have their index dtype committed to a machine integer by then
    by_name = {v.arg[0]: value for v, value in var_vals.items()}
    missing = [v.arg[0] for v in program.variables if v.arg[0] not in by_name]
    if missing:
        raise ValueError(f"realize: variable {', '.join(map(repr, missing))} has no value: bind it (v.bind(n))")
    return [VariableValue(v, by_name[v.arg[0]]) for v in program.variables]


def run_schedule(items: Iterable[ScheduleItem], var_vals: dict[UOp, int] | None = None) -> None:
    """Run each item in order: kernels on the device of their output buffer, copies between devices. `var_vals`
    gives the symbolic variables' values, passed to the kernels that take them."""
    debug = DEBUG.value
    for item in items:
        bufs: list[Any] = [buffer_for(b) for b in item.bufs]  # then the variables' values (VariableValue)
        if item.ast is None:
            copy_buffers(bufs)
            continue
        device = bufs[0].device
        program, run, extra = compiled(device, item.ast)
        for b in bufs:
            b.allocate()
        if extra:
            bufs.extend(extra)
        if program.variables:
            bufs.extend(_variable_values(program, device, var_vals or {}))
        start = time.perf_counter()
        run(bufs)
        bufs[0].version += 1
        if capturing is not None:
            capturing.append((run, bufs, program))
        elapsed = time.perf_counter() - start
        GlobalCounters.kernel_count += 1
        GlobalCounters.global_ops += program.flops
        GlobalCounters.global_mem += program.mem_bytes
        GlobalCounters.time_sum_s += elapsed
        if kernel_log is not None:
            kernel_log.append((program, elapsed))
        if debug >= 2:
            gflops = program.flops / elapsed * 1e-9 if elapsed else 0.0
            gbs = program.mem_bytes / elapsed * 1e-9 if elapsed else 0.0
            size = "x".join(map(str, program.global_size)) or "1"
            print(
                f"*** {device:<6} {GlobalCounters.kernel_count:4d} {program.name:<28} global {size:<14} "
                f"{elapsed * 1e6:9.1f} us {gflops:8.2f} GFLOP/s {gbs:8.2f} GB/s"
            )


def _live_tensors() -> list[Any]:
    """The live tensors, as a list: from the WeakSet's own set of references (its iterator is a Python generator
    with a guard, several times slower), copied first so that a tensor dying meanwhile changes nothing."""
    refs: set[weakref.ref[Any]] = live_tensors.data  # type: ignore[attr-defined]
    return [t for r in list(refs) if (t := r()) is not None]


def copy_buffers(bufs: list[Any]) -> None:
    """Copy buffer `bufs[1]` into `bufs[0]` (between any two devices)."""
    bufs[0].copy_from(bufs[1])
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


def _snapshot_stale_reads(pending: list[Any]) -> bool:
    """Copy aside the old contents of each buffer that `pending` assigns while a live tensor still reads them, and
    point those reads at the copy (one copy a buffer, shared by its readers). Returns whether any tensor was
    changed."""
    roots = UOp(Ops.SINK, src=tuple(t.uop for t in pending))
    stores = [u for u in roots.toposort() if u.op is Ops.STORE and u.src[0].op is Ops.BUFFER]
    if not stores:
        return False
    targets = {store.src[0] for store in stores}
    olds: dict[UOp, UOp] = {}

    def old_of(b: UOp) -> UOp:
        if b not in olds:
            olds[b] = new_buffer(b.arg[1], b.arg[2], b.dtype)
            copy_buffers([buffer_for(olds[b]), buffer_for(b)])
        return olds[b]

    changed = False
    redirected: dict[UOp, UOp] = {}  # a graph without assignments -> the same graph reading the copies
    assigning: list[Any] = []  # live tensors whose graphs assign too
    mentions: dict[UOp, set[UOp]] = {}  # their graphs -> the assigned buffers each mentions
    for t in _live_tensors():
        if (b := buffer_of(t.uop)) is not None:
            # a realized tensor reads its buffer and nothing else: no walk (a program holds many of these, and an
            # optimizer's step assigns at every step)
            mentioned: Collection[UOp] = (b,) if b in targets else ()
        else:
            graph = t.uop.toposort()
            mentioned = {u for u in graph if u.op is Ops.BUFFER} & targets
            if mentioned and any(u.op is Ops.STORE for u in graph):
                assigning.append(t)
                mentions[t.uop] = mentioned
                continue
        if not mentioned:
            continue
        # no assignment in the graph: every mention of an assigned buffer is a read of its old contents (the walk
        # above is the only one this tensor costs: a loss that reads every parameter an optimizer updates)
        if t.uop not in redirected:
            redirected[t.uop] = t.uop.substitute({b: old_of(b) for b in mentioned})
        t.uop = redirected[t.uop]
        if b is None:  # a realized tensor stays one (a view of the copy)
            lazy_tensors.add(t)
        changed = True
    # a graph that assigns: its reads of b through the assignments that run before the STORE to b (the STORE's own
    # value) read what those leave, so only the others are pointed at the copy
    for store in stores:
        b = store.src[0]
        before = {u for u in store.toposort() if u.op is Ops.STORE}
        readers = [t for t in assigning if b in mentions[t.uop] and _reads(t.uop, b, before)]
        cache: dict[UOp, UOp] = {}
        for t in readers:
            t.uop = _read_from(t.uop, b, old_of(b), store, cache)
            lazy_tensors.add(t)
            mentions[t.uop] = {u for u in t.uop.toposort() if u.op is Ops.BUFFER} & targets
            changed = True
    return changed


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

    for t in lazy_tensors.tensors():
        if buffer_of(t.uop) is None:
            visited.update(t.uop.toposort(gate=enter))
    kept = {buffer_of(views[u]) for u in reached if u in views}
    return made - kept


# *** the schedule cache ***
#
# A training or inference loop realizes the same graph on other buffers at every step. The schedule (which nodes
# become kernels, their ASTs, the fresh buffers they write) depends only on the graph's structure: its nodes with
# the BUFFER leaves abstracted to their device, size and dtype, and which leaves are the same buffer. So the first
# realize of a structure runs create_schedule, and every later one rebuilds its items from the cached recipe with
# the new leaves and fresh buffers in their places.


class _Recipe:
    """A schedule with its buffers replaced by references: i < len(leaves) is the i-th BUFFER leaf of the graph
    (in toposort order), the rest are fresh buffers (`new`: device, size, dtype each)."""

    __slots__ = ("new", "items", "views")

    def __init__(self, new: tuple, items: tuple, views: tuple) -> None:
        self.new = new  # ((device, size, dtype), ...)
        self.items = items  # ((ast or None, (ref, ...)), ...)
        self.views = views  # ((position of the realized node in the toposort, ref, shape), ...)


_schedules: dict[tuple, _Recipe] = {}
SCHEDULE_CACHE_SIZE = 1024
schedule_cache_stats = {"hits": 0, "misses": 0}


def _structure(roots: list[UOp]) -> tuple[tuple, list[UOp], list[UOp], bool]:
    """The structure key of the graph of `roots` (each node as its own part of its hash-consing key, `UOp._local`:
    id(op), dtype and arg, and the positions of its sources; a BUFFER as its device, size and dtype only; then the
    roots' positions), its nodes in toposort order, its BUFFER leaves, and whether it assigns (has a STORE). Two
    distinct buffers are two nodes and one buffer read twice is one, so the key tells aliasing apart."""
    BUFFER, STORE = Ops.BUFFER, Ops.STORE  # locals: on Python 3.11 `Ops.X` costs 0.1 us (EnumType.__getattr__)
    # the nodes in toposort order (each after its sources, src[0]'s first), then each node's part: one walk that
    # only orders, and one loop that only builds (a walk that did both took 37 us for conv2d's 29 nodes, these 25)
    seen: set[UOp] = set()
    nodes: list[UOp] = []
    stack: list[tuple[UOp, bool]] = [(r, False) for r in reversed(roots)]
    push, pop = stack.append, stack.pop
    while stack:
        u, expanded = pop()
        if expanded:
            nodes.append(u)
        elif u not in seen:
            seen.add(u)
            push((u, True))
            for s in reversed(u.src):
                if s not in seen:
                    push((s, False))
    at = {u: i for i, u in enumerate(nodes)}.__getitem__
    parts: list[tuple] = []
    leaves: list[UOp] = []
    assigns = False
    for u in nodes:
        op = u.op
        if op is BUFFER:
            parts.append((id(op), u.dtype, u.arg[1], u.arg[2]))
            leaves.append(u)
            continue
        if op is STORE:
            assigns = True
        # the node's own part of its hash-consing key: 1, 1.0 and True (and 0.0 and -0.0) are different constants
        parts.append((u._local, tuple(map(at, u.src))))
    parts.append(tuple(map(at, roots)))
    return tuple(parts), nodes, leaves, assigns


def _record(items: list[ScheduleItem], views: dict[UOp, UOp], nodes: list[UOp], leaves: list[UOp]) -> _Recipe:
    refs = {b: i for i, b in enumerate(leaves)}
    new: list[tuple[str, int, Any]] = []

    def ref(b: UOp) -> int:
        if b not in refs:
            refs[b] = len(leaves) + len(new)
            new.append((b.arg[1], b.arg[2], b.dtype))
        return refs[b]

    recipe_items = tuple((item.ast, tuple(ref(b) for b in item.bufs)) for item in items)
    position = {u: i for i, u in enumerate(nodes)}
    recipe_views = []
    for u, v in views.items():
        b = buffer_of(v)
        assert b is not None, "a realized node's view is a view of its buffer"
        recipe_views.append((position[u], ref(b), v.shape))
    return _Recipe(tuple(new), recipe_items, tuple(recipe_views))


def _replay(recipe: _Recipe, nodes: list[UOp], leaves: list[UOp]) -> tuple[list[ScheduleItem], dict[UOp, UOp]]:
    bufs = leaves + [new_buffer(device, size, dtype) for device, size, dtype in recipe.new]
    items = [ScheduleItem(ast, tuple([bufs[r] for r in refs])) for ast, refs in recipe.items]
    views = {nodes[p]: view_of(bufs[r], shape) for p, r, shape in recipe.views}
    return items, views


def schedule(
    roots: list[UOp], devices: list[str], structure: tuple[tuple, list[UOp], list[UOp], bool] | None = None
) -> tuple[list[ScheduleItem], dict[UOp, UOp]]:
    """create_schedule(roots, devices), from the schedule cache when a graph of the same structure was scheduled
    before (`structure`: `_structure(roots)` if the caller has it)."""
    parts, nodes, leaves, _ = structure or _structure(roots)
    key = (parts, tuple(devices), STORE_COST.value)
    if (recipe := _schedules.get(key)) is not None:
        schedule_cache_stats["hits"] += 1
        if SPEC.value:
            verify(UOp(Ops.SINK, dtypes.void, tuple(roots)), tensor_spec, "tensor graph")
        return _replay(recipe, nodes, leaves)
    schedule_cache_stats["misses"] += 1
    items, views = create_schedule(roots, devices, device_facts)
    compile_schedule(items)
    if len(_schedules) >= SCHEDULE_CACHE_SIZE:
        _schedules.clear()
    _schedules[key] = _record(items, views, nodes, leaves)
    return items, views


def _chain_below(v: UOp, most: int = 8) -> set[int]:
    """The ids of the nodes under `v` along its chain of single sources (movement ops, a cast): each lies below v in
    the graph, so it cannot hold v (ids: `==` on UOps builds a comparison)."""
    chain: set[int] = set()
    while len(v.src) == 1 and len(chain) < most:
        v = v.src[0]
        chain.add(id(v))
    return chain


def device_name(device: str | None) -> str:
    """The registry's name for `device` (`'cpu'` and `'CPU:0'` are `'CPU'`; None is the default device). A device
    whose package is missing raises DeviceUnavailable naming what to install.

    >>> device_name("cpu")
    'CPU'
    """
    return Device.canonicalize(device)


def buffer_of_view(u: UOp) -> Buffer:
    """The Buffer that a realized tensor's node `u` (a buffer, or a reshape of one) holds its values in."""
    buf = buffer_of(u)
    if buf is None:
        raise ValueError(f"buffer_of_view takes a realized node, got {u.op.name}")
    return buffer_for(buf)


def realize(tensors: Iterable[Lazy]) -> None:
    """Compute every tensor of `tensors` that is not a buffer yet, in one schedule."""
    # a DISK tensor is a view of its file, realized as it is (the DISK device runs no kernels)
    pending = [t for t in tensors if buffer_of(t.uop) is None and t.device[:5] != "DISK:"]
    if not pending:
        return
    roots = list(dict.fromkeys(t.uop for t in pending))
    structure = _structure(roots)
    if structure[3] and _snapshot_stale_reads(pending):
        roots = list(dict.fromkeys(t.uop for t in pending))
        structure = _structure(roots)
    device_of = {t.uop: t.device for t in pending}
    devices = [device_of[r] for r in roots]
    var_vals: dict[UOp, int] = {}
    if structure[3]:  # a bound variable is an assignment (STORE) of the variable
        roots, var_vals, rebuilt = unbind_variables(roots, structure[1])
        if var_vals:
            structure = _structure(roots)
    items, views = schedule(roots, devices, structure)
    # two intermediates can share only if one dies before the other is written: that takes 3 items at least
    if len(items) >= 3 and not NO_MEMORY_PLANNER and can_share(items):
        saved = plan_memory(items, _intermediates(roots, items, views))
        if DEBUG >= 2 and saved:
            print(f"*** memory planner: intermediates share memory, {saved / (1 << 20):.2f} MiB saved")
    run_schedule(items, var_vals)
    if var_vals:  # the realized nodes as the tensors hold them: with their variables bound
        original = {new: old for old, new in rebuilt.items()}
        views = {original.get(u, u): v for u, v in views.items()}
    cache: dict[UOp, UOp] = {}
    for t in pending:  # the realized tensors themselves, whether or not a registry holds them (one may come twice)
        if (v := views.get(t.uop)) is not None:
            t.uop = v
    # a lazy graph can hold a realized node only if it reads every buffer that node reads (UOp.leaf_bits): the
    # others are not walked, so many lazy tensors realized in turn do not cost a walk each. A realized node
    # that reads no buffer (an arange) could be anywhere: then every graph is walked
    wanted = [v.leaf_bits() for v in views]
    filtered = all(wanted)
    common = functools.reduce(operator.and_, wanted, -1)  # the bits of every realized node: a first, cheaper test
    # nor can a graph below a realized node hold it: the base it moves (`x[idx]` is a permute of the gather, `y.T` of
    # y), which a view keeps alive and which can be large (a gather's whole table)
    below = [_chain_below(v) for v in views]
    for t in lazy_tensors.tensors():
        u = t.uop
        if (v := views.get(u)) is not None:
            t.uop = v  # the common case, a realized root: no walk
        elif buffer_of(u) is None:
            have = u.leaf_bits() if filtered else 0
            if filtered and have & common != common:
                continue
            if all(id(u) in low or (filtered and have & b != b) for b, low in zip(wanted, below)):
                continue
            t.uop = u.substitute(views, cache)
        if buffer_of(t.uop) is not None:
            lazy_tensors.discard(t)
