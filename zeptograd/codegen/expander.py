"""Expand: upcast and unrolled axes (UNROLL lanes) become vector dtypes.

After `opt`, a kernel reads lane indices `u` (UNROLL, over [0, n)) in its index arithmetic. Every value that
depends on some lanes becomes a vector with one element per combination of them (row-major over the lanes in
axis order, so the last upcast axis varies fastest):

- index arithmetic and gates stay scalar: an INDEX gets one address (and gate) per lane, each the scalar
  expression with the lanes replaced by constants, simplified: `INDEX(p, VECTORIZE(i0, i1, ...))`;
- a LOAD through such an INDEX, and every ALU op, CAST and BITCAST over vectors, is the same op on vectors;
  an operand with fewer lanes is broadcast to the op's lanes (GEP, or VECTORIZE of a scalar);
- a STORE writes each lane to its address;
- a REDUCE over unrolled lanes keeps a vector of partial results (one accumulator lane each) and combines
  the lanes after the loop, halving each reduced axis with one vector op over all the outputs' lanes;
- a WMMA (the TC opt) is a vector over its lane index, the C elements one work-item of the warp holds.

Whether a vector of addresses is one contiguous vector access, and how wide the vectors of the target are,
is decided later, in `devectorize`.
"""

from __future__ import annotations

import math
from functools import reduce

from zeptograd.dtype import dtypes
from zeptograd.uop.ops import Ops, UOp
from zeptograd.uop.symbolic import split_const

_INDEX_LEAVES = (Ops.CONST, Ops.RANGE, Ops.UNROLL, Ops.SPECIAL, Ops.DEFINE_VAR)


def _coords(sizes: list[int]) -> list[tuple[int, ...]]:
    """Every combination of values below `sizes`, the last fastest (the lane order of axes of those sizes)."""
    coords: list[tuple[int, ...]] = [()]
    for n in sizes:
        coords = [c + (i,) for c in coords for i in range(n)]
    return coords


def _lane_coords(axes: tuple[UOp, ...]) -> list[tuple[int, ...]]:
    """Every combination of lane values of `axes`, the last axis fastest."""
    return _coords([a.src[0].arg for a in axes])


def _gep(x: UOp, lanes: tuple[int, ...]) -> UOp:
    """Lanes `lanes` of vector `x`, as one vector (x itself when that is all of it, in order)."""
    if lanes == tuple(range(x.dtype.count)):
        return x
    return UOp(Ops.GEP, x.dtype.scalar().vec(len(lanes)) if len(lanes) > 1 else x.dtype.scalar(), (x,), lanes)


def _sorted_axes(*groups: tuple[UOp, ...]) -> tuple[UOp, ...]:
    return tuple(sorted({a for g in groups for a in g}, key=lambda a: a.arg))


class _Expander:
    def __init__(self) -> None:
        self.new: dict[UOp, UOp] = {}
        self.axes: dict[UOp, tuple[UOp, ...]] = {}
        self.symbolic: set[UOp] = set()  # index arithmetic and gates: kept scalar, substituted per lane
        self.lane_cache: dict[tuple[UOp, tuple[UOp, ...]], UOp] = {}
        self.wmmas: dict[UOp, tuple[tuple[UOp, ...], list[UOp]]] = {}

    def per_lane(self, u: UOp, axes: tuple[UOp, ...]) -> list[UOp]:
        """The scalar expression `u` once per lane of `axes`, lanes replaced by constants and simplified."""
        if not self.axes[u]:
            return [u] * math.prod(a.src[0].arg for a in axes)
        if (coefficients := self.affine(u)) is not None:
            # u = rest + sum(c * lane): simplified once with every lane at 0, each lane's value is that plus a
            # constant (a matmul's 8 x 32 tile: 0.1 s of codegen in a simplify per lane)
            rest, base = split_const(u.substitute({a: UOp.const(dtypes.index, 0) for a in self.axes[u]}).simplify())
            out = []
            for coord in _lane_coords(axes):
                k = base + sum(coefficients.get(a, 0) * c for a, c in zip(axes, coord))
                if rest is None:
                    out.append(UOp.const(dtypes.index, k))
                else:
                    out.append(rest + k if k else rest)
            return out
        out = []
        for coord in _lane_coords(axes):
            mapping = {a: UOp.const(dtypes.index, c) for a, c in zip(axes, coord) if a in set(self.axes[u])}
            out.append(u.substitute(mapping).simplify())
        return out

    def affine(self, u: UOp) -> dict[UOp, int] | None:
        """u's coefficient on each lane axis it reads, when it reads them only through sums and products with
        constants (u = rest + sum(c * lane)); None otherwise (a quotient, a remainder or a comparison of lanes)."""
        memo: dict[UOp, dict[UOp, int] | None] = {}

        def walk(x: UOp) -> dict[UOp, int] | None:
            if x in memo:
                return memo[x]
            if x.op is Ops.UNROLL:
                out: dict[UOp, int] | None = {x: 1}
            elif not self.axes.get(x):
                out = {}
            elif x.op is Ops.ADD:
                a, b = walk(x.src[0]), walk(x.src[1])
                out = None if a is None or b is None else {k: a.get(k, 0) + b.get(k, 0) for k in {*a, *b}}
            elif x.op is Ops.MUL and any(s.op is Ops.CONST for s in x.src):
                const, other = (x.src[0], x.src[1]) if x.src[0].op is Ops.CONST else (x.src[1], x.src[0])
                c = walk(other)
                out = None if c is None else {k: v * const.arg for k, v in c.items()}
            else:
                out = None
            memo[x] = out
            return out

        if u.dtype is not dtypes.index:
            return None
        return walk(u)

    def lanes(self, u: UOp, axes: tuple[UOp, ...]) -> UOp:
        """The expanded form of source `u`, broadcast to the lanes of `axes` (a superset of its own)."""
        own = self.axes[u]
        if u in self.symbolic:
            if not own:
                return u if not axes else self.broadcast(u, len(_lane_coords(axes)))
            key = (u, axes)
            if key not in self.lane_cache:
                lanes = tuple(self.per_lane(u, axes))
                self.lane_cache[key] = UOp(Ops.VECTORIZE, u.dtype.vec(len(lanes)), lanes)
            return self.lane_cache[key]
        new = self.new[u]
        if _same(own, axes):
            return new
        width = len(_lane_coords(axes))
        if not own:
            return self.broadcast(new, width)
        position = {a: i for i, a in enumerate(axes)}
        sizes = [a.src[0].arg for a in own]
        picks = []
        for coord in _lane_coords(axes):
            flat = 0
            for a, size in zip(own, sizes):
                flat = flat * size + coord[position[a]]
            picks.append(flat)
        if picks == list(range(len(picks))):
            return new
        return UOp(Ops.GEP, new.dtype.scalar().vec(width), (new,), tuple(picks))

    @staticmethod
    def broadcast(x: UOp, width: int) -> UOp:
        return x if width == 1 else UOp(Ops.VECTORIZE, x.dtype.vec(width), (x,) * width)

    def visit(self, u: UOp) -> None:
        axes = _sorted_axes(*(self.axes[s] for s in u.src)) if u.op is not Ops.UNROLL else (u,)
        # (a REDUCE of bools, an any() over unrolled lanes, is a reduction, not index math)
        is_index = u.dtype.scalar() in (dtypes.index, dtypes.bool) and u.op not in (
            Ops.LOAD,
            Ops.CAST,
            Ops.BITCAST,
            Ops.REDUCE,
        )
        if u.op in _INDEX_LEAVES or (is_index and all(s in self.symbolic for s in u.src) and u.src):
            self.symbolic.add(u)
            self.axes[u] = axes
            self.new[u] = u
            return
        if u.op is Ops.REDUCE:
            self.expand_reduce(u)
            return
        if u.op is Ops.WMMA:
            self.expand_wmma(u)
            return
        if u.op is Ops.INDEX:
            ptr, *rest = u.src
            idx = tuple(self.lanes(s, axes) for s in rest)
            self.axes[u] = axes
            self.new[u] = u.replace(src=(self.new[ptr], *idx))
            return
        if u.op in (Ops.END, Ops.SINK, Ops.GROUP, Ops.BARRIER):
            self.axes[u] = ()
            self.new[u] = u.replace(src=tuple(self.new[s] if s not in self.symbolic else s for s in u.src))
            return
        if u.op is Ops.STORE and u.src[0].op is Ops.INDEX:
            index_axes = self.axes[u.src[0]]
            if not set(self.axes[u.src[1]]) <= set(index_axes):
                raise RuntimeError("expand: a STORE's value varies along lanes its address does not")
            value = self.lanes(u.src[1], index_axes)
            self.axes[u] = ()
            self.new[u] = u.replace(src=(self.new[u.src[0]], value))
            return
        width = len(_lane_coords(axes))
        src = tuple(self.lanes(s, axes) if s.op is not Ops.DEFINE_GLOBAL else self.new[s] for s in u.src)
        self.axes[u] = axes
        # a node without lanes keeps its dtype (a LOAD of a vector, a WMMA operand's VECTORIZE)
        dtype = u.dtype if width == 1 else u.dtype.scalar().vec(width)
        self.new[u] = u.replace(src=src, dtype=dtype) if (_changed(src, u.src) or dtype is not u.dtype) else u

    def expand_wmma(self, u: UOp) -> None:
        """WMMA(a, b, c, element): a lane's D is a vector over its C elements, the lane index `element`. Where the
        operands vary along other lanes too (an UPCAST after TC: several output blocks a warp), there is one WMMA
        for each combination of those lanes (`self.wmmas`), and the value is their D elements in lane order."""
        a, b, c, element = u.src
        other = tuple(x for x in _sorted_axes(*(self.axes[s] for s in (*a.src, *b.src, c))) if x is not element)
        parts = []
        for j in range(len(_lane_coords(other))):

            def fragment(v: UOp, j: int = j) -> UOp:
                lanes = [self.lanes(s, other) for s in v.src]
                picked = tuple(x if x.dtype.count == 1 else x.gep(j) for x in lanes)
                return UOp(Ops.VECTORIZE, v.dtype, picked)

            c_lanes = self.lanes(c, other)
            acc = self.broadcast(c_lanes if c_lanes.dtype.count == 1 else c_lanes.gep(j), element.src[0].arg)
            parts.append(UOp(Ops.WMMA, u.dtype.vec(element.src[0].arg), (fragment(a), fragment(b), acc), u.arg))
        self.wmmas[u] = (other, parts)
        self.axes[u] = _sorted_axes(other, (element,))
        self.new[u] = self.gather(parts, other, element, self.axes[u])

    @staticmethod
    def gather(parts: list[UOp], other: tuple[UOp, ...], element: UOp, axes: tuple[UOp, ...]) -> UOp:
        """The lanes of `axes` from one vector per combination of the `other` lanes, each over `element`."""
        if len(parts) == 1:
            return parts[0]
        lanes = []
        for coord in _lane_coords(axes):
            at = dict(zip(axes, coord))
            j = 0
            for x in other:
                j = j * x.src[0].arg + at[x]
            lanes.append(parts[j].gep(at[element]))
        return UOp(Ops.VECTORIZE, parts[0].dtype.scalar().vec(len(lanes)), tuple(lanes))

    def expand_reduce(self, r: UOp) -> None:
        value = r.src[0]
        loops = tuple(s for s in r.src[1:] if s.op is Ops.RANGE)
        reduced = tuple(s for s in r.src[1:] if s.op is Ops.UNROLL)
        axes = _sorted_axes(self.axes[value], reduced)
        kept = tuple(a for a in axes if a not in set(reduced))
        self.axes[r] = kept
        if value in self.wmmas and not reduced:
            # one accumulator per WMMA: the tensor core adds into it (lowering's acc + WMMA(a, b, 0) rule)
            other, parts = self.wmmas[value]
            partials = [UOp(Ops.REDUCE, p.dtype, (p, *loops), r.arg) if loops else p for p in parts]
            self.new[r] = self.gather(partials, other, value.src[3], axes)
            return
        vec = self.lanes(value, axes)
        partial = UOp(Ops.REDUCE, vec.dtype, (vec, *loops), r.arg) if loops else vec
        if not reduced:
            self.new[r] = partial
            return
        # halve a reduced axis at a time with one vector op over every output's lanes (lanes i and i + n/2 of the
        # axis): 16 outputs of 16 lanes each take 15 vector adds and their shuffles, not 240 scalar adds and 256
        # lane extractions, which made nn.Linear's forward kernel a third slower
        sizes = [a.src[0].arg for a in axes]
        is_reduced = [a in set(reduced) for a in axes]
        while (k := next((i for i, n in enumerate(sizes) if is_reduced[i] and n % 2 == 0), None)) is not None:
            half = sizes[k] // 2
            where = {c: i for i, c in enumerate(_coords(sizes))}
            sizes[k] = half
            first = tuple(where[c] for c in _coords(sizes))
            second = tuple(where[c[:k] + (c[k] + half,) + c[k + 1 :]] for c in _coords(sizes))
            partial = _combine(r.arg, _gep(partial, first), _gep(partial, second))
        # combine the lanes left (an odd count) that differ only in the reduced axes, pairwise (a tree: fewer
        # rounding steps)
        groups: dict[tuple[int, ...], list[int]] = {}
        for lane, coord in enumerate(_coords(sizes)):
            groups.setdefault(tuple(c for c, red in zip(coord, is_reduced) if not red), []).append(lane)
        if all(len(lanes) == 1 for lanes in groups.values()):
            self.new[r] = partial  # one lane an output, in output order
            return
        slices = list(zip(*groups.values()))  # slices[j]: lane j of every group, in the kept lanes' order
        if all(list(sl) == list(range(sl[0], sl[0] + len(sl))) for sl in slices):
            # the reduced axes left vary slowest (a 3x3 pooling window unrolled before its row is upcast): each
            # value of them is a run of lanes, so the same tree combines whole vectors, lane for lane
            parts = [_gep(partial, sl) for sl in slices]
            while len(parts) > 1:
                paired = [_combine(r.arg, parts[i], parts[i + 1]) for i in range(0, len(parts) - 1, 2)]
                parts = paired + ([parts[-1]] if len(parts) % 2 else [])
            self.new[r] = parts[0]
            return
        outs = []
        for lanes in groups.values():
            parts = [partial.gep(i) for i in lanes]
            while len(parts) > 1:
                paired = [_combine(r.arg, parts[i], parts[i + 1]) for i in range(0, len(parts) - 1, 2)]
                parts = paired + ([parts[-1]] if len(parts) % 2 else [])
            outs.append(parts[0])
        self.new[r] = outs[0] if len(outs) == 1 else UOp(Ops.VECTORIZE, r.dtype.vec(len(outs)), tuple(outs))


def _same(a: tuple[UOp, ...], b: tuple[UOp, ...]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b))


def _changed(a: tuple[UOp, ...], b: tuple[UOp, ...]) -> bool:
    return any(x is not y for x, y in zip(a, b))


def _combine(op: Ops, a: UOp, b: UOp) -> UOp:
    return reduce(lambda x, y: x.maximum(y) if op is Ops.MAX else x.alu(op, y), (b,), a)


def expand(sink: UOp) -> UOp:
    """`sink` with every value that depends on UNROLL lanes turned into vectors (see the module docstring)."""
    if not any(u.op is Ops.UNROLL for u in sink.toposort()):
        return sink
    ex = _Expander()
    for u in sink.toposort():
        ex.visit(u)
    return ex.new[sink]
