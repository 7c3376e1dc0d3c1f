"""Layouts: the scheduler's pass that decides when a contraction reads an operand from a copy in another layout.

How fast a contraction runs depends on how its operands lie in memory as much as on its plan, and which layout
pays depends on the machine: a CPU's vector width, a GPU's tensor cores. The Tensor front end builds one graph on
every host (a matmul is a broadcast multiply and a sum over the last axis; a convolution the same over windows of
its padded input, marked by its `CUSTOM_GRAD`). This pass, run by the scheduler with the facts of the device that
computes each contraction (`LayoutFacts`, which the engine reads from its renderer), rewrites the operands to be
read from copies where that pays. Every copy is a view of the same values, so a rule can change speed, never a result:

`matmul_layouts` (a sum over the last axis of A[..., M, 1, K] * B^T[..., 1, N, K]):

- panels: a large CPU matmul's right operand B (K, N) is read from N / PANEL panels of K x PANEL values, each
  contiguous (PANEL is two vectors). The kernel's register tile (rows by two vectors, codegen/heuristic.py) then
  walks one panel straight through memory, instead of reading a few vectors from every row of B (rows 4 KiB apart
  in a 1024-wide matrix, which the caches cannot hold). Not when B is a transposed view (`x @ w.T`) and A too is
  read in order along the sum: the kernel then reads both operands along it. Where A is not (attention heads
  transposed back before a projection), B is read from panels all the same: the register tile would otherwise
  gather each vector of B from a column, one scalar load a lane.
- fragment order: a large fp16 matmul on a device with tensor cores reads both operands in fragment order
  (codegen/tensor_cores.py): a lane's fragment of a block is one aligned load and a warp's loads one contiguous
  run, instead of 2-byte loads from rows far apart. A tensor core that reads row-major operands 16 bytes a load
  (`reads_row_major`) copies only an operand not stored so.

`convolution_layouts` (a convolution, `CUSTOM_GRAD` "conv", and its weight gradient, "conv_weight"):

- channels last: a large dense convolution reads its weight from a channels-last copy, contiguous along the output
  channels (in panels, as matmul's B): it is then a matmul whose register tile is vectors of output channels by
  output positions. Its input comes from a padded channels-last copy, contiguous along the channels it sums over,
  unless the device reads a convolution's input where it lies (`reads_padded_in_place`: the padding as gated
  loads). The weight gradient reads the channels-last copy even then: with the border's gated loads its sum over
  the images and positions ran at 17 GFLOP/s.
- a padded copy: a large convolution too narrow for channels-last (grouped, or few channels) reads its input with
  the zero border written out, so its loads need no gate. One of few input channels but enough output channels
  (an image's first convolution) still reads its weight channels-last.

>>> from zeptograd import Tensor
>>> a, b = Tensor.ones(64, 256), Tensor.ones(256, 256)
>>> facts = LayoutFacts(vector_layouts=True, float_lanes=8, reads_padded_in_place=False, tensor_cores=())
>>> laid_out = layouts((a @ b).uop.sink(), lambda u: facts)
>>> sum(u.op is Ops.CONTIGUOUS for u in laid_out.toposort())  # B in panels
1
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from zeptograd.codegen.opt import address_stride
from zeptograd.codegen.tensor_cores import FragmentOrder, TensorCore
from zeptograd.dtype import DType, dtypes
from zeptograd.schedule.indexing import (
    at,
    push_elementwise,
    push_expand,
    push_flip,
    push_pad,
    push_permute,
    push_reshape,
    push_shrink,
)
from zeptograd.uop.movement import movement_uop, padded_spatially, stored_as
from zeptograd.uop.ops import GroupOp, Ops, UOp
from zeptograd.uop.pattern import PatternMatcher, UPat
from zeptograd.uop.rewrite import graph_rewrite
from zeptograd.uop.shape import inverse_permutation, strides_for


@dataclass(frozen=True)
class LayoutFacts:
    """What decides the layouts a device's contractions read (the engine reads them from the device's renderer,
    engine/facts.py)."""

    vector_layouts: bool  # kernels run on a CPU in vectors: layouts made for its caches pay (panels, copies)
    float_lanes: int  # float32 lanes of a vector (a panel is two vectors wide)
    reads_padded_in_place: bool  # a large convolution reads its input where it lies, the padding as gated loads
    tensor_cores: tuple[TensorCore, ...]  # the tensor cores the device's kernels can use

    @property
    def panel(self) -> int:
        """The width of a matmul's B panel: two vectors of float32."""
        return 2 * self.float_lanes


# *** matmul ***

PACK_MIN_WORK = 1 << 21  # M * N * K of a matmul whose B is read from panels
FRAGMENT_MIN_WORK = 1 << 24  # M * N * K of an fp16 matmul whose operands are copied into fragment order


def _under_reshapes(u: UOp) -> UOp:
    """`u` with the broadcast and the reshapes that put it into a product's shape (they add or drop axes of size 1)
    taken off."""
    if u.op is Ops.EXPAND:
        u = u.src[0]
    while u.op is Ops.RESHAPE and [d for d in u.shape if d != 1] == [d for d in u.src[0].shape if d != 1]:
        u = u.src[0]
    return u


def _swaps_last_two(u: UOp) -> bool:
    nd = len(u.shape)
    return u.op is Ops.PERMUTE and nd >= 2 and u.arg == (*range(nd - 2), nd - 1, nd - 2)


def matmul_operands(r: UOp) -> tuple[UOp, UOp] | None:
    """(A, B) when REDUCE_AXIS `r` is the product of A (..., M, K) and B (..., K, N) as matmul builds it: the last
    axis of A[..., M, 1, K] * B^T[..., 1, N, K] summed (with a cast between where the sum is wider); else None."""
    if r.arg[0] is not Ops.ADD or tuple(r.arg[1]) != (len(r.shape) - 1,) or len(r.shape) < 3:
        return None
    product = r.src[0].src[0] if r.src[0].op is Ops.CAST else r.src[0]
    if product.op is not Ops.MUL:
        return None
    a, bt = (_under_reshapes(s) for s in product.src)
    if not _swaps_last_two(bt) or len(a.shape) < 2:
        return None
    b = bt.src[0]
    *_, m, n, k = product.shape
    if a.shape[-2:] != (m, k) or b.shape[-2:] != (k, n):
        return None
    return a, b


def panels(b: UOp, width: int) -> UOp:
    """`b` (..., K, N), stored as N/width contiguous panels of K x width values, read back as (..., K, N)."""
    *batch, k, n = b.shape
    nb = len(batch)
    split = movement_uop(b, Ops.RESHAPE, (*batch, k, n // width, width))
    return movement_uop(stored_as(split, (*range(nb), nb + 1, nb, nb + 2)), Ops.RESHAPE, b.shape)


_PUSH_VIEW = {
    Ops.RESHAPE: push_reshape,
    Ops.PERMUTE: push_permute,
    Ops.EXPAND: push_expand,
    Ops.PAD: push_pad,
    Ops.SHRINK: push_shrink,
    Ops.FLIP: push_flip,
    Ops.DETACH: lambda i, x: at(x.src[0], i.src[1:-1], i.src[-1]),
}
_ELEMENTWISE = GroupOp.ALU | {Ops.CAST, Ops.BITCAST}


def _indexes_under(u: UOp) -> list[UOp]:
    """The INDEX nodes of `u`'s graph not under another INDEX."""
    found, seen, stack = [], set(), [u]
    while stack:
        if (node := stack.pop()) not in seen:
            seen.add(node)
            if node.op is Ops.INDEX:
                found.append(node)
            else:
                stack.extend(node.src)
    return found


def reads_in_order(x: UOp) -> bool:
    """Does a kernel computing `x` read memory in order along x's last axis: each value it reads from a node that is
    not a view (a buffer, or a result stored row-major in its own shape) one element further on as the last index
    counts up, or the same one? Views and elementwise ops are followed (schedule/indexing.py's rules), as a kernel
    reads through them; a symbolic shape is taken to be read in order.

    >>> from zeptograd import Tensor
    >>> h = Tensor.ones(4, 8, 16).contiguous()
    >>> reads_in_order(h.permute(1, 0, 2).uop), reads_in_order(h.permute(1, 0, 2).reshape(8, 64).uop)
    (True, False)
    """
    if not x.shape or not all(isinstance(n, int) for n in x.shape):
        return True
    ranges = tuple(UOp.range(size, -1 - axis) for axis, size in enumerate(x.shape))
    todo, seen = [at(x, ranges, UOp.const(dtypes.bool, True))], set()
    while todo:
        if (i := todo.pop()) in seen:
            continue
        seen.add(i)
        base, idx = i.src[0], i.src[1:-1]
        push = _PUSH_VIEW.get(base.op, push_elementwise if base.op in _ELEMENTWISE else None)
        if push is not None:
            todo.extend(_indexes_under(push(i, base)))
            continue
        if not all(isinstance(n, int) for n in base.shape):
            return True
        terms = [ix * st for ix, st, n in zip(idx, strides_for(base.shape), base.shape) if n != 1]
        address = sum(terms, UOp.const(dtypes.index, 0)).simplify()
        if address_stride(address, ranges[-1]) not in (0, 1):
            return False
    return True


def _packs(a: UOp, b: UOp, facts: LayoutFacts) -> bool:
    """Does the matmul of `a` and `b` read b from panels? A transposed view of B is contiguous along the sum: only
    where A is not read in order along it (its kernel then cannot read both operands along the sum)."""
    m, (k, n), width = a.shape[-2], b.shape[-2:], facts.panel
    big = n % width == 0 and n > width and m >= 4 and m * n * k >= PACK_MIN_WORK
    return facts.vector_layouts and big and (not _swaps_last_two(b) or not reads_in_order(a))


def fragment_core(a: UOp, b: UOp, dtype: DType, cores: tuple[TensorCore, ...]) -> TensorCore | None:
    """The tensor core of `cores` whose fragment order the matmul of `a` and `b` (summing products of `dtype`) reads
    its operands in (None: no copies): one for that dtype, sizes multiples of its blocks, and work enough to pay."""
    (m, k), n = a.shape[-2:], b.shape[-1]
    for tc in cores:
        bm, bn, bk = tc.dims
        fits = m % bm == 0 and n % bn == 0 and k % bk == 0 and m * n * k >= FRAGMENT_MIN_WORK
        ordered = tc.a_order is not None and tc.b_order is not None
        if fits and ordered and a.dtype == b.dtype == dtype == tc.dtype_in:
            return tc
    return None


def stored_row_major(u: UOp) -> bool:
    """Is `u` a buffer's values in the order they are stored, row-major (a realized tensor, a contiguous one, or a
    reshape of either)?"""
    while u.op is Ops.RESHAPE:
        u = u.src[0]
    return u.op in (Ops.BUFFER, Ops.CONTIGUOUS)


def fragment_permutation(
    shape: tuple[int, ...], block: tuple[int, int], order: FragmentOrder, rows_first: bool
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """How a (..., R, C) matrix is stored as blocks of `block`, each in fragment order `order`
    (codegen/tensor_cores.py), the blocks of a row of blocks next to each other (`rows_first`) or those of a
    column: the shape it is split into and the permutation of that shape which is stored contiguous.

    >>> fragment_permutation((16, 16), (16, 16), ((2, 8), (2, 4, 2), (1, 3, 2, 0, 4)), True)
    ((1, 2, 8, 1, 2, 4, 2), (0, 3, 2, 5, 4, 1, 6))
    """
    *batch, r, c = shape
    rows, cols, inner = order
    nb = len(batch)
    split = (*batch, r // block[0], *rows, c // block[1], *cols)
    row_axes = [nb + 1 + i for i in range(len(rows))]
    col_axes = [nb + 2 + len(rows) + i for i in range(len(cols))]
    row_block, col_block = nb, nb + 1 + len(rows)
    outer = (row_block, col_block) if rows_first else (col_block, row_block)
    return split, (*range(nb), *outer, *((row_axes + col_axes)[i] for i in inner))


def fragment_ordered(x: UOp, block: tuple[int, int], order: FragmentOrder, rows_first: bool) -> UOp:
    """`x` (..., R, C) read from a copy in fragment order (`fragment_permutation`), seen as (..., R, C)."""
    split, perm = fragment_permutation(x.shape, block, order, rows_first)
    stored = movement_uop(movement_uop(x, Ops.RESHAPE, split), Ops.PERMUTE, perm)
    # copied as one flat run (a kernel with one axis: whole work-groups on a GPU, not loops over seven small axes)
    flat = UOp(Ops.CONTIGUOUS, x.dtype, (movement_uop(stored, Ops.RESHAPE, (math.prod(x.shape),)),))
    back = movement_uop(movement_uop(flat, Ops.RESHAPE, stored.shape), Ops.PERMUTE, inverse_permutation(perm))
    return movement_uop(back, Ops.RESHAPE, x.shape)


# *** convolution ***

PAD_COPY_MIN = 1 << 16  # elements of a padded input from which a convolution's layouts pay
CHANNELS_LAST_MIN = 16  # input and output channels from which a dense convolution reads channels-last copies
CACHE_LINE = 64  # bytes


def _odd_lines_pad(row: int, itemsize: int) -> int:
    """The elements of padding that make rows of `row` elements an odd number of cache lines apart when they are a
    multiple of two lines (a channels-last weight's rows of 256 float32 channels: 16 lines -> 17); else 0. Rows a
    large power of two apart share a few cache sets: 1 KiB apart they fill 4 of L1's 64 sets, and 1/16 of L2."""
    per_line = max(CACHE_LINE // itemsize, 1)
    return per_line if row * itemsize % (2 * CACHE_LINE) == 0 else 0


def channels_last_weight(w: UOp, n: int, shape: tuple[int, ...], width: int) -> UOp:
    """A convolution's weight (Cout, Cin, *k) read from a channels-last copy, contiguous along Cout, seen in `shape`
    (the same elements): where Cout divides into panels of `width`, stored as Cout / width panels (*k, Cin, width),
    each a contiguous block the kernel's tile (two vectors of output channels by output positions) walks straight
    through, as matmul's B panels; else stored as (*k, Cin, Cout), its rows an odd number of cache lines apart."""
    cout, cin, kernel = w.shape[0], w.shape[1], w.shape[2:]
    if cout % width or cout == width:
        stored = stored_as(w, (*range(2, 2 + n), 1, 0), _odd_lines_pad(cout, w.dtype.itemsize))
    else:
        split = movement_uop(w, Ops.RESHAPE, (cout // width, width, cin, *kernel))
        stored = stored_as(split, (0, *range(3, 3 + n), 2, 1))
    return movement_uop(stored, Ops.RESHAPE, shape)  # one reshape from the stored view to the one the kernel reads


def _channels_last(padded: UOp, groups: int, cout: int, facts: LayoutFacts) -> bool:
    """Does a convolution of the padded input `padded` read channels-last copies (a dense one with enough channels
    on a CPU: large, or read in place, when only the weight is copied)?"""
    cin = padded.shape[1]
    wide = facts.vector_layouts and groups == 1 and min(cin, cout) >= CHANNELS_LAST_MIN
    return wide and (_large(padded) or facts.reads_padded_in_place)


def _weight_channels_last(padded: UOp, groups: int, cout: int, facts: LayoutFacts) -> bool:
    """Does a convolution read its weight from a channels-last copy? Every one that reads channels-last copies
    (`_channels_last`), and a dense one with enough output channels over fewer input channels (an RGB image's 3):
    its tile is then vectors of output channels by columns, as a wide one's (with the weight as it lies it was
    4 x 4 scalars), while its input, too narrow for channels-last, is read NCHW."""
    if _channels_last(padded, groups, cout, facts):
        return True
    return facts.vector_layouts and groups == 1 and cout >= CHANNELS_LAST_MIN and _large(padded)


def _large(padded: UOp) -> bool:
    return math.prod(padded.shape) >= PAD_COPY_MIN


def _input_copy(padded: UOp, pads: tuple, channels_last: bool, in_place: bool, facts: LayoutFacts) -> UOp | None:
    """The copy of a convolution's padded input it reads: channels-last, or with its zero border written out (None:
    it reads the input where it lies)."""
    if channels_last:
        return None if in_place else stored_as(padded, (0, *range(2, len(padded.shape)), 1))
    if facts.vector_layouts and any(p != (0, 0) for p in pads) and _large(padded):
        return UOp(Ops.CONTIGUOUS, padded.dtype, (padded,))
    return None


# *** the rules ***


class LayoutContext:
    """The pass's state: the facts of the device computing a node, and the nodes already laid out (a rule that
    rebuilt a contraction leaves it as it is when the rewrite enters the rebuilt node)."""

    def __init__(self, facts_of: Callable[[UOp], LayoutFacts]):
        self.facts_of = facts_of
        self.laid_out: set[UOp] = set()

    def done(self, u: UOp) -> UOp:
        self.laid_out.add(u)
        return u


_RESULTS = (Ops.CUSTOM_GRAD, Ops.CONTIGUOUS, Ops.COPY, Ops.STORE)  # nodes whose values other kernels compute


def _operands_replaced(value: UOp, copies: dict[UOp, UOp], stop: tuple[Ops, ...] = _RESULTS) -> UOp:
    """`value` with its reads of each key of `copies` replaced by the copy, up to the nodes of ops `stop`: the results
    of other computations (a gradient's stored input reads the forward's padded input too: those reads are the
    forward's to lay out)."""
    done: dict[UOp, UOp] = {}
    for node in value.toposort(gate=lambda n: n not in copies and (n is value or n.op not in stop)):
        src = tuple(copies.get(s, done.get(s, s)) for s in node.src)
        done[node] = node if all(a is b for a, b in zip(src, node.src)) else node.replace(src=src)
    return done[value]


def _matmul_layouts(ctx: LayoutContext, r: UOp) -> UOp | None:
    """sum(A * B^T) -> sum(A' * B'^T), A' and B' views of copies in the device's layouts (panels, fragments)."""
    if r in ctx.laid_out or (operands := matmul_operands(r)) is None:
        return None
    a, b = operands
    facts = ctx.facts_of(r)
    copies: dict[UOp, UOp] = {}
    if _packs(a, b, facts):
        copies[b] = panels(b, facts.panel)
    product = r.src[0].src[0] if r.src[0].op is Ops.CAST else r.src[0]
    if (tc := fragment_core(a, b, product.dtype, facts.tensor_cores)) is not None:
        assert tc.a_order is not None and tc.b_order is not None
        bm, bn, bk = tc.dims
        if not (tc.reads_row_major and stored_row_major(a)):
            copies[a] = fragment_ordered(a, (bm, bk), tc.a_order, True)
        if not (tc.reads_row_major and stored_row_major(b)):
            copies[b] = fragment_ordered(b, (bk, bn), tc.b_order, False)
    return ctx.done(_operands_replaced(r, copies, (*_RESULTS, Ops.REDUCE_AXIS))) if copies else None


def _convolution_layouts(ctx: LayoutContext, c: UOp) -> UOp | None:
    """conv(x, w) -> conv(x', w'), x' and w' views of copies in the device's layouts (channels-last, padded)."""
    name = c.arg[0] if isinstance(c.arg, tuple) else c.arg
    if name not in ("conv", "conv_weight") or c in ctx.laid_out:
        return None
    value, x, other = c.src
    groups, pads = c.arg[1], c.arg[4]
    facts = ctx.facts_of(c)
    padded = padded_spatially(x, pads)
    copies: dict[UOp, UOp] = {}
    if name == "conv":
        w = other
        cout, cin_g, kernel = w.shape[0], w.shape[1], w.shape[2:]
        n = len(kernel)
        last = _channels_last(padded, groups, cout, facts)
        if _weight_channels_last(padded, groups, cout, facts):
            wshape = (1, groups, cout // groups, cin_g, *(1,) * n, *kernel)
            copies[movement_uop(w, Ops.RESHAPE, wshape)] = channels_last_weight(w, n, wshape, facts.panel)
        in_place = facts.reads_padded_in_place and math.prod(kernel) > 1
    else:
        last = _channels_last(padded, groups, other.shape[1], facts)
        in_place = False
    if (copy := _input_copy(padded, pads, last, in_place, facts)) is not None:
        copies[padded] = copy
    if not copies:
        return None
    return ctx.done(c.replace(src=(_operands_replaced(value, copies), x, other)))


layout_rules = PatternMatcher(
    [
        # sum(A * B^T) -> sum(A' * B'^T): B in panels on a CPU, both in fragment order for tensor cores
        (UPat(Ops.REDUCE_AXIS, name="r"), _matmul_layouts, "matmul_layouts"),
        # conv(x, w) -> conv(x', w'), and its weight gradient: channels-last and padded copies
        (UPat(Ops.CUSTOM_GRAD, name="c"), _convolution_layouts, "convolution_layouts"),
    ]
)


def layouts(sink: UOp, facts_of: Callable[[UOp], LayoutFacts], memo: dict[UOp, UOp] | None = None) -> UOp:
    """`sink` with every contraction reading its operands in the layouts its device's facts (`facts_of(node)`)
    make pay. `memo`, when given, is filled with each node of `sink`'s graph and what it became."""
    return graph_rewrite(sink, layout_rules, LayoutContext(facts_of), name="layouts", memo=memo)
