"""Movement ops become index arithmetic: the tensor graph of one kernel, read at a symbolic index.

`INDEX(x, *idx, gate)` with x a tensor-graph node and the dtype of x means "the value of x at the index
`idx` (one index per dimension of x), where `gate` holds"; it exists only inside this pass. The rules push
it from the kernel's output down to the buffers the kernel reads:

    INDEX(alu(a, b), i)       -> alu(INDEX(a, i), INDEX(b, i))
    INDEX(RESHAPE(x), i)      -> INDEX(x, unravel(ravel(i)))
    INDEX(PERMUTE(x), i)      -> INDEX(x, i permuted back)
    INDEX(EXPAND(x), i)       -> INDEX(x, 0 on the expanded axes)
    INDEX(PAD(x), i)          -> where(valid, INDEX(x, i - before, gate & valid), 0)
    INDEX(SHRINK(x), i)       -> INDEX(x, i + start)

(a SHRINK's or PAD's symbolic starts, its sources after x, add to `start` and `before`)
    INDEX(FLIP(x), i)         -> INDEX(x, n - 1 - i on the flipped axes)
    INDEX(REDUCE_AXIS(x), i)  -> REDUCE(INDEX(x, i with a new RANGE on each reduced axis), ranges)
    INDEX(BUFFER, i)          -> LOAD(INDEX(DEFINE_GLOBAL, i[, gate])[, 0])

so no movement op survives into a kernel, and every read of padding is gated: a generated kernel never
reads outside its buffers.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from zeptograd.dtype import dtypes
from zeptograd.uop.alu import identity_element
from zeptograd.uop.ops import GroupOp, Ops, UOp
from zeptograd.uop.pattern import PatternMatcher, UPat
from zeptograd.uop.shape import strides_for


@dataclass
class IndexingContext:
    """What lowering one kernel collects: its buffers (in argument order) and a counter for loop axes."""

    buffers: list[UOp] = field(default_factory=list)
    globals: dict[UOp, UOp] = field(default_factory=dict)
    next_axis: int = 0

    def global_for(self, buf: UOp) -> UOp:
        """The DEFINE_GLOBAL argument that stands for `buf` in this kernel (one per buffer)."""
        if buf not in self.globals:
            arg = len(self.buffers)
            self.buffers.append(buf)
            self.globals[buf] = UOp(Ops.DEFINE_GLOBAL, buf.dtype.ptr(buf.arg[2]), (), arg)
        return self.globals[buf]

    def new_range(self, size: int) -> UOp:
        self.next_axis += 1
        return UOp.range(size, self.next_axis - 1)


def _idx(c: int) -> UOp:
    return UOp.const(dtypes.index, c)


def at(x: UOp, idx: tuple[UOp, ...], gate: UOp) -> UOp:
    """The value of tensor-graph node `x` at `idx` where `gate` holds (the INDEX of this pass)."""
    return UOp(Ops.INDEX, x.dtype, (x, *idx, gate))


def _and(gate: UOp, valid: UOp) -> UOp:
    return valid if gate.op is Ops.CONST and gate.arg is True else gate & valid


def _split(i: UOp) -> tuple[UOp, tuple[UOp, ...], UOp]:
    return i.src[0], i.src[1:-1], i.src[-1]


def push_elementwise(i: UOp, x: UOp) -> UOp:
    _, idx, gate = _split(i)
    return x.replace(src=tuple(at(s, idx, gate) for s in x.src))


def push_reshape(i: UOp, x: UOp) -> UOp:
    _, idx, gate = _split(i)
    src = x.src[0]
    while src.op is Ops.RESHAPE:  # a reshape of a reshape is one reshape (row-major order): unravel once, not twice
        src = src.src[0]
    flat = _idx(0)
    for ix, st, size in zip(idx, strides_for(x.shape), x.shape):
        if size != 1:
            flat = flat + ix * st
    # the outermost axis takes no `% size`: where the read happens, flat is inside the tensor, so flat // st is
    # already below the size (and where a gate is false nothing is read; padding's reads are gated)
    outer = next((a for a, size in enumerate(src.shape) if size != 1), None)
    new = tuple(
        _idx(0) if size == 1 else flat // st if a == outer else (flat // st) % size
        for a, (st, size) in enumerate(zip(strides_for(src.shape), src.shape))
    )
    return at(src, new, gate)


def push_permute(i: UOp, x: UOp) -> UOp:
    _, idx, gate = _split(i)
    new = [idx[0]] * len(idx)
    for out_axis, in_axis in enumerate(x.arg):
        new[in_axis] = idx[out_axis]
    return at(x.src[0], tuple(new), gate)


def push_expand(i: UOp, x: UOp) -> UOp:
    _, idx, gate = _split(i)
    src = x.src[0]
    return at(src, tuple(ix if s == o else _idx(0) for ix, s, o in zip(idx, src.shape, x.shape)), gate)


def _starts(x: UOp) -> tuple[UOp | int, ...]:
    """Each axis's symbolic start of a SHRINK or PAD (its sources after the input), or 0 where it has none."""
    return x.src[1:] if len(x.src) > 1 else (0,) * len(x.arg)


def _offset(static: int, start: UOp | int) -> UOp | int:
    """`static + start`, an int where the start is none."""
    if isinstance(start, int):
        return static + start
    return start + static if static else start


def push_pad(i: UOp, x: UOp) -> UOp:
    _, idx, gate = _split(i)
    src = x.src[0]
    valid: UOp | None = None
    new = []
    for ix, (before, after), size, start in zip(idx, x.arg, src.shape, _starts(x)):
        # a symbolic start moves the padding: `start` more before, as many fewer after
        shift = _offset(before, start)
        new.append(ix if isinstance(shift, int) and shift == 0 else ix - shift)
        if before or after:
            inside = ((shift - 1) < ix) & (ix < shift + size)
            valid = inside if valid is None else valid & inside
    if valid is None:
        return at(src, tuple(new), gate)
    return valid.where(at(src, tuple(new), _and(gate, valid)), UOp.const(x.dtype, 0))


def push_shrink(i: UOp, x: UOp) -> UOp:
    _, idx, gate = _split(i)
    offsets = [_offset(b, start) for (b, _), start in zip(x.arg, _starts(x))]
    return at(x.src[0], tuple(ix if isinstance(o, int) and o == 0 else ix + o for ix, o in zip(idx, offsets)), gate)


def push_flip(i: UOp, x: UOp) -> UOp:
    _, idx, gate = _split(i)
    return at(x.src[0], tuple((size - 1) - ix if f else ix for ix, f, size in zip(idx, x.arg, x.shape)), gate)


def push_reduce(ctx: IndexingContext, i: UOp, x: UOp) -> UOp:
    _, idx, gate = _split(i)
    src = x.src[0]
    op, axes = x.arg
    if any(src.shape[a] == 0 for a in axes):
        return identity_element(op, x.dtype)  # a reduction over nothing: no loop, no read
    ranges = []
    new = list(idx)
    for a in axes:
        if src.shape[a] == 1:
            new[a] = _idx(0)
        else:
            new[a] = ctx.new_range(src.shape[a])
            ranges.append(new[a])
    value = at(src, tuple(new), gate)
    return UOp(Ops.REDUCE, x.dtype, (value, *ranges), op) if ranges else value


def load_buffer(ctx: IndexingContext, i: UOp, x: UOp) -> UOp:
    _, idx, gate = _split(i)
    ptr = ctx.global_for(x)
    if gate.op is Ops.CONST and gate.arg is True:
        return ptr.index(idx[0]).load()
    return ptr.index(idx[0], gate).load(UOp.const(x.dtype, 0))


def _index_of(op: Ops | Iterable[Ops]) -> UPat:
    return UPat(Ops.INDEX, src=(UPat(op, name="x"),), allow_any_len=True, name="i")


indexing = PatternMatcher(
    [
        (
            _index_of(GroupOp.ALU | {Ops.CAST, Ops.BITCAST}),
            push_elementwise,
            "INDEX(alu(a, b)) -> alu(INDEX(a), INDEX(b))",
        ),
        (_index_of(Ops.RESHAPE), push_reshape, "INDEX(RESHAPE(x), i) -> INDEX(x, unravel(ravel(i)))"),
        (_index_of(Ops.PERMUTE), push_permute, "INDEX(PERMUTE(x), i) -> INDEX(x, permuted i)"),
        (_index_of(Ops.EXPAND), push_expand, "INDEX(EXPAND(x), i) -> INDEX(x, 0 on expanded axes)"),
        (_index_of(Ops.PAD), push_pad, "INDEX(PAD(x), i) -> where(valid, INDEX(x, i-before, gated), 0)"),
        (_index_of(Ops.SHRINK), push_shrink, "INDEX(SHRINK(x), i) -> INDEX(x, i+start)"),
        (_index_of(Ops.FLIP), push_flip, "INDEX(FLIP(x), i) -> INDEX(x, n-1-i)"),
        (_index_of(Ops.REDUCE_AXIS), push_reduce, "INDEX(REDUCE_AXIS(x), i) -> REDUCE(INDEX(x, i+ranges), ranges)"),
        (_index_of(Ops.BUFFER), load_buffer, "INDEX(BUFFER, i) -> LOAD(INDEX(DEFINE_GLOBAL, i, gate))"),
        (_index_of((Ops.CONST, Ops.DEFINE_VAR)), lambda i, x: x, "INDEX(const) -> const"),
        (
            _index_of((Ops.CONTIGUOUS, Ops.DETACH, Ops.CUSTOM_GRAD)),
            lambda i, x: at(x.src[0], i.src[1:-1], i.src[-1]),
            "INDEX(DETACH(x)) -> INDEX(x), INDEX(CUSTOM_GRAD(x, inputs...)) -> INDEX(x)",
        ),
    ]
)
