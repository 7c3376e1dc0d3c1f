"""Kernelize: cut the lazy tensor graph into kernels.

First the layout pass (layout.py) lets each contraction read its operands from copies in the layouts its device's
facts make pay (a matmul's B panels, a convolution's channels-last copies); each copy is a CONTIGUOUS, so a kernel
of its own. Then a node gets its own buffer (it is *realized*) when

- it is a root being realized, a CONTIGUOUS, an assignment (`STORE(BUFFER, value)`) or a device COPY;
- it is a REDUCE_AXIS whose result is broadcast back (reaches an EXPAND) or feeds another reduction:
  fusing it there would recompute the whole reduction for every element that reads it;
- it is a REDUCE_AXIS read by more than one kernel: a reduction is never computed twice;
- it is an elementwise value read by more than one kernel and expensive to compute (`_worth_storing`);
- it is a matmul operand of a few ops (moved into a product that a large reduction sums), broadcast over many
  outputs (the relu-masked gradient in a weight gradient), which its kernel would recompute for every tile.

Everything else fuses into the kernel that reads it: elementwise chains into each other, elementwise
producers into the reduction that consumes them and elementwise consumers into the reduction's output.
A cheap elementwise value read by two kernels is recomputed in each, which costs less than a round trip
through memory. Each realized node becomes one kernel: its value, read at the output's loop indices
(`indexing.py` turns movement ops into index arithmetic), stored to its buffer.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from typing import NamedTuple

from zeptograd.codegen.closedform import scatter_form
from zeptograd.dtype import dtypes
from zeptograd.helpers import SPEC, STORE_COST
from zeptograd.schedule.indexing import IndexingContext, at, indexing
from zeptograd.schedule.layout import LayoutFacts, layouts
from zeptograd.uop.buffers import buffer_of, new_buffer, view_of
from zeptograd.uop.ops import GroupOp, Ops, UOp
from zeptograd.uop.rewrite import graph_rewrite
from zeptograd.uop.shape import prod, strides_for
from zeptograd.uop.spec import tensor_spec, verify
from zeptograd.uop.symbolic import symbolic

# a module constant for the hot paths: on Python 3.11 `Ops.X` goes through EnumType.__getattr__ (0.3 us a lookup)
_RESHAPE = Ops.RESHAPE


class DeviceFacts(NamedTuple):
    """What the scheduler needs to know of a device. The engine reads them from the device's renderer
    (engine/facts.py) and hands them to `create_schedule`: the scheduler itself knows no device."""

    layout: LayoutFacts  # which layouts its contractions read (layout.py)
    runs_in_order: bool  # it runs a kernel's loops one iteration after another (no launch grid), as a scatter's must


# the facts of a device the caller says nothing about: no layout copies and no scatters (a schedule that is right,
# if slower, on every device)
NO_FACTS = DeviceFacts(LayoutFacts(False, float_lanes=1, reads_padded_in_place=False, tensor_cores=()), False)


class ScheduleItem(NamedTuple):
    """One step of a schedule: a kernel (`ast`, its buffers with the output first) or a copy (`ast` None,
    buffers (destination, source)). A NamedTuple: a cached schedule rebuilds its items at every realize, and a
    frozen dataclass costs several times more to make."""

    ast: UOp | None
    bufs: tuple[UOp, ...]


def device_of(u: UOp, cache: dict[UOp, str | None] | None = None) -> str | None:
    """The device whose memory tensor-graph node `u` computes into: its buffers', or its COPY's target."""
    cache = {} if cache is None else cache
    for node in u.toposort(gate=lambda n: n not in cache):
        if node.op is Ops.BUFFER:
            cache[node] = node.arg[1]
        elif node.op is Ops.COPY:
            cache[node] = node.arg
        else:
            cache[node] = next((d for s in node.src if (d := cache[s]) is not None), None)
    return cache[u]


def _counts_a_constant(r: UOp) -> bool:
    """Is `r` a sum of one constant seen through movement ops (arange's running count of ones)? The codegen folds
    it to a closed form (codegen/closedform.py), so it costs what an elementwise op costs wherever it fuses."""
    return r.arg[0] is Ops.ADD and all(u.op is Ops.CONST or u.op in GroupOp.Movement for u in r.src[0].toposort())


def _plain_reshape(u: UOp) -> bool:
    """Does RESHAPE `u` only add or remove axes of size 1 (so every index stays what it was)?"""
    return [d for d in u.shape if d != 1] == [d for d in u.src[0].shape if d != 1]


def _count_meets_reduction_reshaped(r: UOp, consumers: dict[UOp, list[UOp]], realized: dict[UOp, None]) -> bool:
    """Does constant count `r` reach a reduction through a movement that changes its index (a pad, a flip, a
    reshape that splits or merges axes) in a kernel that computes it? Its closed form needs the index to be a bound
    on a loop: through `arange(n) == idx` (a broadcast) it is, and a shrink only adds a constant to it (a column of
    `nonzero`'s coordinates), but inside another reduction's window (a scan, a pool) a modulo comes in and the fold
    does not apply, which would leave one reduction nested in another.
    A realized node's kernel is the last that can compute it: what reads that node reads a buffer."""
    stack, seen = [(r, False)], {(r, False)}
    while stack:
        node, moved = stack.pop()
        for c in consumers[node]:
            if c.op is Ops.REDUCE_AXIS and moved:
                return True
            if c in realized:
                continue
            plain = c.op in GroupOp.ALU or c.op in (Ops.CAST, Ops.EXPAND, Ops.PERMUTE, Ops.SHRINK, Ops.REDUCE_AXIS)
            plain = plain or (c.op is Ops.RESHAPE and _plain_reshape(c))
            if (c, moved or not plain) not in seen:
                seen.add((c, moved or not plain))
                stack.append((c, moved or not plain))
    return False


# a reduction read by its kernel at more elements than it has is computed more than once for each: it is stored
# first where that repeated work is at least this many multiply-adds (a matmul's output read as rotary pairs)
REPEATED_REDUCE_MIN_WORK = 1 << 14
_WINDOWS = (Ops.SHRINK, Ops.PAD, Ops.FLIP)


def _reduce_must_realize(r: UOp, consumers: dict[UOp, list[UOp]], realized: dict[UOp, None]) -> bool:
    # a constant's count fuses into its readers wherever its closed form applies
    if _counts_a_constant(r):
        return _count_meets_reduction_reshaped(r, consumers, realized)
    kernels: set[UOp] = set()
    windows = 0  # the windows (shrinks, pads, flips) through which the kernel reads r
    stack, seen = [r], {r}
    while stack:
        for c in consumers[stack.pop()]:
            if c.op in (Ops.EXPAND, Ops.REDUCE_AXIS):
                return True
            if c in realized:
                kernels.add(c)
            elif c not in seen:
                seen.add(c)
                windows += c.op in _WINDOWS
                stack.append(c)
    if len(kernels) > 1:
        return True
    return len(kernels) == 1 and _read_repeatedly(r, windows, next(iter(kernels)))


def _read_repeatedly(r: UOp, windows: int, out: UOp) -> bool:
    """Does the kernel that computes `out` compute reduction `r` more than once per element, in a sum of enough
    work? Each of the `windows` views of r that reach `out` reads r once per element of out: reads beyond r's own
    elements are repeats (rotary pairs: the real and imaginary halves of a product each read by both outputs of a
    pair, every dot product computed twice). Views that split r into parts (a fused q, k, v) read each element
    once: no repeats."""
    size = math.prod(r.shape)
    reads = max(windows, 1) * math.prod(out.shape)
    work = math.prod(r.src[0].shape)
    return reads > size and work * (reads - size) // max(size, 1) >= REPEATED_REDUCE_MIN_WORK


# what computing one element of an op costs, in cheap vectorized ALU ops (an add, a compare, a cast cost 1).
# libm's exp2f/log2f/sinf are scalar calls (measured: ~60 cheap ops for exp2f); a vectorized polynomial is ~20;
# divisions and square roots vectorize at a few times an add's cost. Loads are not counted here: storing a value
# replaces the reads of its inputs in each reader with one read of the stored value.
_OP_COST: dict[Ops, int] = {
    **dict.fromkeys((Ops.EXP2, Ops.EXP, Ops.TANH, Ops.LOG2, Ops.SIN, Ops.COS, Ops.TAN), 32),
    **dict.fromkeys((Ops.SQRT, Ops.RECIPROCAL, Ops.FDIV, Ops.IDIV, Ops.MOD), 4),
}
_ELEMENTWISE = GroupOp.ALU | {Ops.CAST, Ops.BITCAST}


def _compute_cost(u: UOp, realized: dict[UOp, None], enough: int) -> int:
    """What recomputing `u` in a kernel that reads it costs per element: the cost of the nodes that would fuse
    into that kernel with it (counting stops at buffers, realized nodes and reductions, and at `enough`)."""
    cost = 0
    stack, seen = [u], {u}
    while stack and cost < enough:
        node = stack.pop()
        if node.op in _ELEMENTWISE:
            cost += _OP_COST.get(node.op, 1)
        for s in _reads(node):
            if s not in seen and s not in realized and s.op is not Ops.REDUCE_AXIS:
                seen.add(s)
                stack.append(s)
    return cost


# a value a reduction reads broadcast over this many outputs or more (a matmul operand) is stored first when it
# costs more than BROADCAST_MIN_COST ops: the matmul's kernel would recompute it for every tile of the other axis
BROADCAST_MIN = 16
BROADCAST_MIN_COST = 3
BROADCAST_MIN_WORK = 1 << 16  # a smaller reduction recomputes less than one more kernel launch costs


# ops whose value is their first source's (a cast only changes its type): a value seen through them is still itself.
# An activation with a stated derivative (relu, gelu, tanh) is the CUSTOM_GRAD of its value
_SAME_VALUE = frozenset({Ops.CAST, Ops.DETACH, Ops.CUSTOM_GRAD})


def _broadcast_into_reduce(
    u: UOp, consumers: dict[UOp, list[UOp]], realized: dict[UOp, None], through_pad: bool = False
) -> bool:
    """Does elementwise `u` reach a reduction, in the same kernel, whose input has at least BROADCAST_MIN times
    u's elements (u broadcast into it: the relu mask of a gradient in the weight gradient `g.T @ x`, recomputed
    for each of x's 784 columns), while u itself is no bigger than what it reads (a one-hot `arange == idx` is a
    broadcast of its index: storing it would write a table, not save work)? With `through_pad`, only a reduction
    that reads u through a PAD counts (see `_stored_for_broadcast`)."""
    size = max(1, math.prod(u.shape))
    if size > _largest_read(u, realized):
        return False
    # u as a matmul or convolution operand: moved (padded, windowed), cast or wrapped (_SAME_VALUE) into a product
    # that a reduction sums, nothing else in between (an index compared with a counter, a gather's one-hot, is not
    # one: its reduction folds away, codegen/closedform)
    stack, seen = [(c, False, False) for c in consumers[u]], set()
    while stack:
        node, multiplied, padded = stack.pop()
        if (node, multiplied, padded) in seen:
            continue
        seen.add((node, multiplied, padded))
        # a reduction is looked at even when it is realized: its kernel is the one that would recompute u
        if node.op is Ops.REDUCE_AXIS:
            work = math.prod(node.src[0].shape)
            if (
                multiplied
                and (padded or not through_pad)
                and work >= BROADCAST_MIN * size
                and work >= BROADCAST_MIN_WORK
            ):
                return True
            continue
        if node in realized:
            continue
        if node.op is Ops.MUL and not multiplied:
            multiplied = True
        elif node.op not in GroupOp.Movement and node.op not in _SAME_VALUE:
            continue
        padded = padded or node.op is Ops.PAD
        stack.extend((c, multiplied, padded) for c in consumers[node])
    return False


def _stored_for_broadcast(u: UOp, consumers: dict[UOp, list[UOp]], realized: dict[UOp, None]) -> bool:
    """Is elementwise `u` a matmul or convolution operand worth storing before the reduction that reads it
    broadcast (`_broadcast_into_reduce`)? One that costs BROADCAST_MIN_COST ops or more always is. A cheaper one
    (a relu, a bias add) is where the reduction reads it through a PAD: a convolution's padding or its overlapping
    windows (`_overlapping_windows` pads its rows), where each tap reads it again at other indices, gated, a lane
    at a time: the kernel recomputes it for every tap and every tile of output channels, and its lanes are packed
    into vectors for the ops where a stored value is one broadcast load (docs/performance.md has the figures)."""
    if u.op not in _ELEMENTWISE:
        return False
    if _compute_cost(u, realized, BROADCAST_MIN_COST) >= BROADCAST_MIN_COST:
        return _broadcast_into_reduce(u, consumers, realized)
    return _broadcast_into_reduce(u, consumers, realized, through_pad=True)


def _largest_read(u: UOp, realized: dict[UOp, None]) -> int:
    """The most elements of one buffer, realized value or reduction (a kernel's output either way) that computing
    `u` in a kernel reads."""
    largest = 0
    stack, seen = [u], {u}
    while stack:
        node = stack.pop()
        if node.op is Ops.BUFFER:
            largest = max(largest, node.arg[2])
            continue
        if node is not u and (node in realized or node.op is Ops.REDUCE_AXIS):
            largest = max(largest, math.prod(node.shape))
            continue
        for s in _reads(node):
            if s not in seen:
                seen.add(s)
                stack.append(s)
    return largest


def _fuses_a_reduction(u: UOp, realized: dict[UOp, None]) -> bool:
    """Does computing `u` in its kernel compute a reduction (one that is not realized on its own)?"""
    stack, seen = [u], {u}
    while stack:
        for s in _reads(stack.pop()):
            if s in seen or s in realized:
                continue
            if s.op is Ops.REDUCE_AXIS:
                return True
            seen.add(s)
            stack.append(s)
    return False


def _worth_storing(u: UOp, readers: int, realized: dict[UOp, None]) -> bool:
    """Is elementwise `u`, read by `readers` kernels, cheaper to store once than to recompute in each? Storing
    costs one more write and read of each element, STORE_COST cheap ops (measured); recomputing costs
    `readers - 1` more computations of `u`."""
    if u.op not in _ELEMENTWISE or readers < 2:
        return False
    return (readers - 1) * _compute_cost(u, realized, STORE_COST.value) >= STORE_COST.value


def _readers(u: UOp, consumers: dict[UOp, list[UOp]], readers: dict[UOp, frozenset[UOp]]) -> frozenset[UOp]:
    """The kernels that read `u`'s value: the union of its consumers' (each consumer's set is known)."""
    sets = {readers[c] for c in consumers[u]}
    return frozenset().union(*sets) if len(sets) != 1 else sets.pop()


def kernel_name(shape: tuple[int, ...], ast: UOp) -> str:
    """A kernel's name says what it is: `E_` elementwise or `r_` reducing, then its output shape."""
    reduces = any(u.op is Ops.REDUCE for u in ast.toposort())
    return ("r_" if reduces else "E_") + "_".join(str(s) for s in shape)


# kernels already lowered, keyed by their graph with each buffer replaced by a placeholder of its position:
# the same computation on other buffers (every step of a training loop) is lowered once
_lowered: dict[tuple[UOp, UOp], tuple[UOp, tuple[int, ...]]] = {}
LOWERED_CACHE_SIZE = 4096


def lower_kernel(out: UOp, value: UOp) -> tuple[UOp, tuple[UOp, ...]]:
    """The kernel AST that stores tensor-graph `value` into buffer `out`, and its buffers (output first):
    `SINK(END(STORE(INDEX(DEFINE_GLOBAL 0, i), value at i), ranges))`, index arithmetic simplified."""
    bufs = [out, *(u for u in value.toposort() if u.op is Ops.BUFFER and u is not out)]
    placeholders = {b: UOp(Ops.BUFFER, b.dtype, (), (-1 - i, "", b.arg[2])) for i, b in enumerate(bufs)}
    key = (placeholders[out], value.substitute(placeholders))
    if key not in _lowered:
        if len(_lowered) >= LOWERED_CACHE_SIZE:
            _lowered.clear()
        ast, used = _lower(*key)
        _lowered[key] = (ast, tuple(-1 - b.arg[0] for b in used))
    ast, positions = _lowered[key]
    return ast, tuple(bufs[p] for p in positions)


def _all_true(u: UOp) -> bool:
    """Is `u` the constant True broadcast to its shape (reshapes and expands of it)?"""
    while u.op in (_RESHAPE, Ops.EXPAND):
        u = u.src[0]
    return u.op is Ops.CONST and u.arg is True


def _undo_placement(view: UOp, op: Ops, arg, in_shape: tuple[int, ...], starts: tuple[UOp, ...]) -> UOp | None:
    """The movement op that takes `view` (the output of placement op `op`) back to the placement's input: the inverse
    of the op a write through a view undid (`Tensor._write_through`); None for anything else (an expand's sum).
    `starts` are a symbolic shrink's starts, which its inverse pad takes too."""
    if op is _RESHAPE:
        return UOp(_RESHAPE, view.dtype, (view,), in_shape)
    if op is Ops.PERMUTE:
        return UOp(Ops.PERMUTE, view.dtype, (view,), tuple(sorted(range(len(arg)), key=lambda i: arg[i])))
    if op is Ops.FLIP:
        return UOp(Ops.FLIP, view.dtype, (view,), arg)
    if op is Ops.PAD:  # the view shrank the buffer
        return UOp(Ops.SHRINK, view.dtype, (view, *starts), tuple((b, b + s) for (b, _), s in zip(arg, in_shape)))
    if op is Ops.SHRINK:  # the view padded the buffer (a strided slice pads up to a multiple of its step)
        return UOp(Ops.PAD, view.dtype, (view, *starts), tuple((b, n - e) for (b, e), n in zip(arg, in_shape)))
    return None


def written_view(out: UOp, value: UOp) -> tuple[UOp, UOp] | None:
    """`(view, x)` when assigning `value` to buffer `out` writes `x` to the elements of a view of `out` and keeps the
    rest: `value` is `where(P(True), P(x), out)` with P one chain of reshapes, permutes, flips, pads and shrinks
    (what a write through a view builds, `Tensor._write_through`), and `view` is out seen through P undone. The
    kernel then loops over x's elements only, storing each where the view puts it (`t[1::2, ::3] += 1` touches a
    sixth of t), gated where the view is padding (its writes are dropped):

        STORE(out, where(P(True), P(x), out)) -> STORE(INDEX(out, index of view, valid), x)

    None for any other value: its kernel writes the whole buffer."""
    if value.op is not Ops.WHERE or buffer_of(value.src[2]) is not out:
        return None
    hit, placed, view = value.src
    while not _all_true(hit):
        same_starts = len(hit.src) == len(placed.src) and all(x is y for x, y in zip(hit.src[1:], placed.src[1:]))
        if hit.op is not placed.op or hit.arg != placed.arg or not same_starts:
            return None
        undone = _undo_placement(view, hit.op, hit.arg, hit.src[0].shape, hit.src[1:])
        if undone is None:
            return None
        hit, placed, view = hit.src[0], placed.src[0], undone
    return (view, placed) if view.shape == placed.shape else None


def _lower(out: UOp, value: UOp) -> tuple[UOp, tuple[UOp, ...]]:
    ctx = IndexingContext()
    ctx.global_for(out)
    written = written_view(out, value)
    if written is not None:
        view, value = written
    shape = value.shape
    ranges = tuple(ctx.new_range(s) if s != 1 else UOp.const(dtypes.index, 0) for s in shape)
    true = UOp.const(dtypes.bool, True)
    lowered = graph_rewrite(at(value, ranges, true), indexing, ctx, name="indexing")
    if written is None:
        flat = UOp.const(dtypes.index, 0)
        for r, st in zip(ranges, strides_for(shape)):
            if r.op is Ops.RANGE:
                flat = flat + r * st
        target = ctx.globals[out].index(flat)
    else:
        # where the view puts each element: the INDEX (gated where the view is padding) that a read of it would load
        read = graph_rewrite(at(view, ranges, true), indexing, ctx, name="indexing")
        target = next(u for u in read.toposort() if u.op is Ops.LOAD).src[0]
    store = target.store(lowered)
    loops = tuple(r for r in ranges if r.op is Ops.RANGE)
    body = UOp(Ops.END, dtypes.void, (store, *loops)) if loops else store
    ast = graph_rewrite(body.sink(), symbolic, name="simplify indices")
    ast = ast.replace(arg=kernel_name(shape, ast))
    # a read that lies wholly in padding folds away with its buffer: number the buffers that are left 0, 1, ...
    used = sorted((u for u in ast.toposort() if u.op is Ops.DEFINE_GLOBAL), key=lambda u: u.arg)
    if len(used) != len(ctx.buffers):
        ast = ast.substitute({g: g.replace(arg=i) for i, g in enumerate(used) if g.arg != i})
    return ast, tuple(ctx.buffers[g.arg] for g in used)


def _scattered(out: UOp, value: UOp, u: UOp, in_order: bool) -> list[ScheduleItem] | None:
    """The kernels that compute `value` into `out` as a scatter (`closedform.scatter_form`: the gradient of a
    gather adds each source row into the one row it picks): its fill (zeros) first, then the scatter. None when it is
    not one, or when the device does not run loops `in_order` but as parallel work-items (two adds to one element
    would race)."""
    if not in_order:
        return None
    ast, bufs = lower_kernel(out, value)
    if (form := scatter_form(ast)) is None:
        return None
    scatter, fill = form
    if u.shape:
        fill = UOp(Ops.EXPAND, u.dtype, (UOp(_RESHAPE, u.dtype, (fill,), (1,) * len(u.shape)),), u.shape)
    return [ScheduleItem(*lower_kernel(out, fill)), ScheduleItem(scatter, bufs)]


def _reads_elsewhere(ast: UOp) -> bool:
    """Does the kernel read its output buffer anywhere but the element it writes? (Then writing in place
    would clobber values it has yet to read.)"""
    nodes = ast.toposort()
    written = {u.src[0].src[1] for u in nodes if u.op is Ops.STORE and u.src[0].src[0].arg == 0}
    for u in nodes:
        reads_output = u.op is Ops.LOAD and u.src[0].src[0].op is Ops.DEFINE_GLOBAL and u.src[0].src[0].arg == 0
        if reads_output and u.src[0].src[1] not in written:
            return True
    return False


def _reads(u: UOp) -> tuple[UOp, ...]:
    """The sources whose values computing `u` reads: CUSTOM_GRAD's inputs are there for the gradient only."""
    return u.src[:1] if u.op is Ops.CUSTOM_GRAD else u.src


def _computed(sink: UOp) -> list[UOp]:
    """The nodes whose values computing `sink` needs, each after the ones it reads (a toposort along _reads)."""
    order: list[UOp] = []
    seen: set[UOp] = set()
    stack: list[tuple[UOp, bool]] = [(sink, False)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
        elif node not in seen:
            seen.add(node)
            stack.append((node, True))
            stack.extend((s, False) for s in reversed(_reads(node)) if s not in seen)
    return order


def _reshaped_buffer_value(u: UOp) -> UOp | None:
    """The node that `u` reshapes (through one or more RESHAPEs) when that node always gets a fresh buffer of its
    own (CONTIGUOUS, COPY), else None. (A STORE's value is its target's buffer already.)"""
    if u.op is not _RESHAPE:
        return None
    while u.op is _RESHAPE:
        u = u.src[0]
    return u if u.op in (Ops.CONTIGUOUS, Ops.COPY) else None


_CONTRACTIONS = (Ops.REDUCE_AXIS, Ops.CUSTOM_GRAD)  # the ops the layout pass looks at


def _laid_out(
    sink: UOp, devices: list[str], facts: Callable[[str], DeviceFacts]
) -> tuple[UOp, dict[UOp, UOp], set[UOp]]:
    """`sink` with its contractions reading their operands in their devices' layouts (layout.py); a map from each
    node that pass rebuilt back to the node of `sink` it stands for, and the nodes of `sink`."""
    device_cache: dict[UOp, str | None] = {}

    def facts_of(u: UOp) -> LayoutFacts:
        return facts(device_of(u, device_cache) or devices[0]).layout

    memo: dict[UOp, UOp] = {}
    laid = layouts(sink, facts_of, memo)
    if laid is sink:
        return sink, {}, set()
    original = set(sink.toposort())
    return laid, {memo[u]: u for u in original if memo[u] is not u}, original


def create_schedule(
    roots: list[UOp], devices: list[str], facts: Callable[[str], DeviceFacts] | None = None
) -> tuple[list[ScheduleItem], dict[UOp, UOp]]:
    """The kernels (and copies) that compute `roots` on `devices`, in an order that respects every dependency, and
    a map from each realized tensor-graph node to the buffer view that now holds its value. `facts` tells what each
    device is (the engine's `device_facts`); without it every device has NO_FACTS.

    >>> from zeptograd import Tensor
    >>> x = Tensor.ones(4).contiguous().realize()
    >>> items, views = create_schedule([(x * 2).uop], ["CPU"])
    >>> len(items), items[0].ast.arg
    (1, 'E_4')
    """
    known: dict[str, DeviceFacts] = {}

    def facts_of(device: str) -> DeviceFacts:
        if device not in known:
            known[device] = NO_FACTS if facts is None else facts(device)
        return known[device]

    sink = UOp(Ops.SINK, dtypes.void, tuple(roots))
    if SPEC.value:
        verify(sink, tensor_spec, "tensor graph")
    nodes = _computed(sink)[:-1]
    back: dict[UOp, UOp] = {}
    if any(u.op in _CONTRACTIONS for u in nodes):
        sink, back, original = _laid_out(sink, devices, facts_of)
        if back:
            roots = list(sink.src)
            nodes = _computed(sink)[:-1]
    consumers: dict[UOp, list[UOp]] = defaultdict(list)
    for u in nodes:
        for s in _reads(u):
            consumers[s].append(u)
    realized: dict[UOp, None] = {}
    device_cache: dict[UOp, str | None] = {}
    root_device = dict(zip(roots, devices))
    # a root that only reshapes a value with a buffer of its own anyway (`x.contiguous().reshape(...)`) is a view of
    # that buffer, not a copy of it
    reshaped = {u: inner for u in roots if (inner := _reshaped_buffer_value(u)) is not None}
    for u in nodes:
        if u in root_device and buffer_of(u) is None and u not in reshaped:
            realized[u] = None
        if u.op in (Ops.CONTIGUOUS, Ops.STORE, Ops.COPY):
            realized[u] = None
        if u.op is Ops.COPY and buffer_of(u.src[0]) is None:
            realized[u.src[0]] = None
    # consumers before producers, so each decision sees the final kernels that read the node
    readers: dict[UOp, frozenset[UOp]] = {}  # node -> the realized nodes (kernels) that read its value
    stored: dict[UOp, int] = {}  # elementwise values realized because they are expensive -> kernels reading them
    for u in reversed(nodes):
        if u in realized:
            readers[u] = frozenset((u,))
            continue
        readers[u] = _readers(u, consumers, readers)
        if u.op is Ops.REDUCE_AXIS and _reduce_must_realize(u, consumers, realized):
            realized[u] = None
        elif _worth_storing(u, len(readers[u]), realized):
            realized[u] = None
            stored[u] = len(readers[u])
        elif _stored_for_broadcast(u, consumers, realized):
            realized[u] = None
        if u in realized:
            readers[u] = frozenset((u,))
    # a value's cost was counted before the producers it reads were decided: one of them may since have been
    # stored itself (softmax's exp below its gradient), leaving too little to recompute to pay for a store. A value
    # that a reduction fused into stays: the reduction was left unrealized because this value was stored, and its
    # readers would recompute it (inside their own reductions, when they are matmuls). So does one that a large
    # reduction reads broadcast (a convolution's input): unstored, that kernel recomputes it for every output tile
    for u, n in reversed(stored.items()):
        if _worth_storing(u, n, realized) or _fuses_a_reduction(u, realized):
            continue
        del realized[u]
        if _stored_for_broadcast(u, consumers, realized):
            realized[u] = None

    views: dict[UOp, UOp] = {}  # realized node -> the view of its buffer
    cut_cache: dict[UOp, UOp] = {}

    def cut(u: UOp) -> UOp:
        """`u` with every node realized so far replaced by the view of its buffer."""
        return u.substitute(views, cut_cache)

    items: list[ScheduleItem] = []
    for u in nodes:
        if u not in realized:
            continue
        device = root_device.get(u) or device_of(u, device_cache) or devices[0]
        if u.op is Ops.COPY:
            src = buffer_of(cut(u.src[0]))
            assert src is not None
            out = new_buffer(u.arg, src.arg[2], u.dtype)
            items.append(ScheduleItem(None, (out, src)))
            views[u] = view_of(out, u.shape)
            continue
        if u.op is Ops.STORE:
            out, value = u.src[0], cut(u.src[1])
        else:
            value = cut(u.src[0]) if u.op is Ops.CONTIGUOUS else u.replace(src=tuple(cut(s) for s in u.src))
            out = new_buffer(device, prod(u.shape), u.dtype)
        views[u] = view_of(out, u.shape)
        if prod(u.shape) == 0:
            continue
        scattered = None if u.op is Ops.STORE else _scattered(out, value, u, facts_of(device).runs_in_order)
        if scattered is not None:
            items.extend(scattered)
            continue
        written = written_view(out, value) if u.op is Ops.STORE else None
        if written is not None and prod(written[1].shape) == 0:
            continue  # a write to an empty view changes nothing
        ast, bufs = lower_kernel(out, value)
        if u.op is Ops.STORE and _reads_elsewhere(ast):
            # an in-place hazard (t.assign(t.T), t[1:] = t[:-1]): compute the value (a written view's elements only)
            # into a fresh buffer, then copy it over
            x = value if written is None else written[1]
            tmp = new_buffer(device, prod(x.shape), u.dtype)
            tmp_ast, tmp_bufs = lower_kernel(tmp, x)
            items.append(ScheduleItem(tmp_ast, tmp_bufs))
            copied = view_of(tmp, x.shape)
            ast, bufs = lower_kernel(out, copied if written is None else value.substitute({x: copied}))
        items.append(ScheduleItem(ast, bufs))
    for u, inner in reshaped.items():
        buf = buffer_of(views[inner])
        assert buf is not None, "a realized node's view is a view of its buffer"
        views[u] = view_of(buf, u.shape)
    _view_reshaped_sources(views)
    if back:
        # the realized nodes as the caller knows them; a layout's copy is an intermediate no tensor holds
        views = {back.get(u, u): v for u, v in views.items() if u in back or u in original}
    return items, views


def _view_reshaped_sources(views: dict[UOp, UOp]) -> None:
    """A realized RESHAPE's buffer holds its source's values too, in the same order: a reshape keeps row-major
    order. So the lazy nodes under a realized chain of RESHAPEs become views of that buffer, and a tensor that holds
    one (the base of the view `t.sum(1).reshape(...)` returned) reads it instead of a graph to substitute."""
    for u, v in list(views.items()):
        buf = buffer_of(v)
        while u.op is _RESHAPE and buf is not None:
            u = u.src[0]
            if u in views or buffer_of(u) is not None:
                break
            views[u] = view_of(buf, u.shape)
