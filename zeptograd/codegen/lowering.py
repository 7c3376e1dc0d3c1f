"""Codegen passes from the kernel AST towards the linear program, each a named graph_rewrite.

- `reduce_to_accumulator`: REDUCE becomes a DEFINE_REG accumulator: set to the identity before the loop,
  updated inside it through an AFTER that orders each read after the initialisation, and read after the
  loop's END through another AFTER.
- `rare_branches`: `WHERE(c, a, b)` marked RARE (c is rarely true, `a` is expensive) computes `a` only when some
  lane of c is true: b goes to a register, and IF(any lane of c) the register takes `where(c, a, b)`.
- `gated_stores`: a gated STORE becomes IF / STORE / ENDIF, so the store itself is unconditional.
- `commit_index_dtype`: the unbounded `index` dtype becomes int32 where every index value of the kernel
  fits, else int64 (a walk over the graph, see its docstring).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from zeptograd.dtype import AddrSpace, DType, dtypes
from zeptograd.uop.alu import identity_element
from zeptograd.uop.ops import Ops, UOp, is_zero
from zeptograd.uop.pattern import PatternMatcher, UPat


def live_ranges(root: UOp) -> dict[UOp, frozenset[UOp]]:
    """For each node, the loops (RANGE) and conditionals (IF) it sits inside: those it depends on, less
    those an END or ENDIF below it has closed (or a REDUCE, in a kernel AST: its value is reduced over them)."""
    blocks: dict[UOp, frozenset[UOp]] = {}
    for u in root.toposort():
        inside: set[UOp] = set()
        for s in u.src:
            inside |= blocks[s]
        if u.op in (Ops.RANGE, Ops.IF):
            inside.add(u)
        elif u.op in (Ops.END, Ops.REDUCE):
            inside -= set(u.src[1:])
        elif u.op is Ops.ENDIF:
            inside.discard(u.src[0])
        blocks[u] = frozenset(inside)
    return blocks


@dataclass
class AccumulatorContext:
    count: int = 0
    blocks: dict[UOp, frozenset[UOp]] = field(default_factory=dict)


def accumulate(op: Ops, acc: UOp, value: UOp) -> UOp:
    """A reduction's step: `acc` combined with `value` by `op` (a scatter's step too, closedform.scatter_form)."""
    return acc.maximum(value) if op is Ops.MAX else acc.alu(op, value)


def reduce_to_accumulator(ctx: AccumulatorContext, r: UOp) -> UOp:
    value, ranges = r.src[0], r.src[1:]
    if value not in ctx.blocks:
        ctx.blocks.update(live_ranges(value))
    outer = sorted(ctx.blocks[value] - set(ranges), key=lambda b: b.arg if b.op is Ops.RANGE else -1)
    acc = UOp(Ops.DEFINE_REG, r.dtype.ptr(1, AddrSpace.REG), (), ctx.count)
    ctx.count += 1
    zero = UOp.const(dtypes.index, 0)
    # the accumulator is reset inside the loops that enclose the reduction, before its own loops
    init = (acc.after(*outer) if outer else acc).index(zero).store(identity_element(r.arg, r.dtype))
    inside = acc.after(init, *ranges).index(zero)
    current = inside.load()
    updated = accumulate(r.arg, current, value)
    end = UOp(Ops.END, dtypes.void, (inside.store(updated), *ranges))
    return acc.after(end).index(zero).load()


# the arg of a WHERE whose condition is rarely true and whose true branch is expensive to compute
RARE = "rare"


def _any_lane(cond: UOp) -> UOp:
    """A scalar bool: is any lane of `cond` true?"""
    odd_lanes = []  # the last lane of a vector of odd width, ORed in at the end
    while (count := cond.dtype.count) > 1:
        half = count // 2
        if count % 2:
            odd_lanes.append(cond.gep(count - 1))
        low, high = (UOp(Ops.GEP, cond.dtype.scalar().vec(half), (cond,), tuple(range(i, i + half))) for i in (0, half))
        cond = low.alu(Ops.OR, high)  # log2(n) vector ORs, not n lane extractions
    return functools.reduce(lambda a, b: a.alu(Ops.OR, b), odd_lanes, cond)


def rare_to_branch(ctx: AccumulatorContext, w: UOp) -> UOp:
    """WHERE(c, a, b) marked RARE -> reg = b; IF(any(c)) reg = where(c, a, reg) ENDIF; reg. The work only `a`
    needs moves inside the IF: each of its sources that is computed anyway (for c or b) is read through an
    AFTER the IF, so everything built on it sits inside the conditional block."""
    cond, rare, common = w.src
    reg = UOp(Ops.DEFINE_REG, w.dtype.ptr(1, AddrSpace.REG), (), ctx.count)
    ctx.count += 1
    zero = UOp.const(dtypes.index, 0)
    init = reg.index(zero).store(common)
    branch = UOp(Ops.IF, dtypes.void, (_any_lane(cond), init))
    computed = set(cond.toposort()) | set(common.toposort())
    frontier = {
        s: s.after(branch)
        for u in rare.toposort(gate=lambda n: n not in computed)
        for s in u.src
        if s in computed and s.op is not Ops.CONST
    }
    if rare in computed:
        frontier[rare] = rare.after(branch)
    inside = reg.after(branch).index(zero)
    update = inside.store(cond.where(rare.substitute(frontier), inside.load()))
    return reg.after(UOp(Ops.ENDIF, dtypes.void, (branch, update))).index(zero).load()


def _accumulate_in_wmma(acc: UOp, w: UOp) -> UOp | None:
    a, b, c = w.src
    return UOp(Ops.WMMA, w.dtype, (a, b, acc), w.arg) if is_zero(c) else None


accumulators = PatternMatcher(
    [
        (UPat(Ops.REDUCE, name="r"), reduce_to_accumulator, "REDUCE -> DEFINE_REG accumulator"),
        # acc + WMMA(a, b, 0) -> WMMA(a, b, acc): the tensor core adds to the accumulator itself
        (
            UPat(Ops.ADD, src=[UPat.var("acc"), UPat(Ops.WMMA, name="w")]),
            _accumulate_in_wmma,
            "acc + WMMA(a, b, 0) -> WMMA(a, b, acc)",
        ),
        # WHERE(c, a, b) rarely c -> reg = b; IF(any(c)) reg = where(c, a, reg) ENDIF
        (UPat(Ops.WHERE, arg=RARE, name="w"), rare_to_branch, "rare WHERE -> branch over the lanes"),
    ]
)


def _ungated_load(index: UOp, ld: UOp) -> UOp:
    return index.src[0].index(index.src[1]).load(dtype=ld.dtype)  # a vector load stays one


def _lane(v: UOp, k: int) -> UOp:
    """Lane k of vector `v`: the lane itself when v is built lane by lane."""
    return v.src[k] if v.op is Ops.VECTORIZE else v.gep(k)


def _lane_load(g: UOp, ld: UOp, i: UOp) -> UOp | None:
    ptr = i.src[0].dtype
    if ld.dtype.count == 1 or len(set(g.arg)) != 1 or getattr(ptr, "base", ptr).count != 1:
        return None
    k = g.arg[0]
    if len(i.src) == 2:
        lane = i.src[0].index(i.src[1] + k).load(dtype=ld.dtype.scalar())
    else:
        # a masked load (a gate per lane): the element with its own gate and its lane of the fallback
        alt = (_lane(ld.src[1], k),) if len(ld.src) > 1 else ()
        lane = i.src[0].index(i.src[1] + k, _lane(i.src[2], k)).load(*alt, dtype=ld.dtype.scalar())
    return lane if len(g.arg) == 1 else UOp(Ops.VECTORIZE, g.dtype, (lane,) * len(g.arg))


def _broadcast_picked_lane(v: UOp) -> UOp | None:
    x = v.src[0]
    if len(v.src) < 2 or any(s is not x for s in v.src) or x.op is not Ops.GEP or len(x.arg) != 1:
        return None
    inner = x.src[0]
    if inner.op is not Ops.GEP or inner.src[0].op is not Ops.LOAD:
        return None
    return UOp(Ops.VECTORIZE, v.dtype, (UOp(Ops.GEP, x.dtype, inner.src, (inner.arg[x.arg[0]],)),) * len(v.src))


# one lane of a vector load is a load of that element: a tile's broadcast operand, contiguous along the tile's
# rows, is then read by broadcasting loads (a load port) instead of a vector load and a shuffle per lane (the
# shuffle port, which also runs half the FMAs: the weight gradient of a linear layer ran at a third of the speed)
lane_loads = PatternMatcher(
    [
        # VECTORIZE(GEP(GEP(LOAD, lanes), k), ...) -> VECTORIZE(GEP(LOAD, lanes[k]), ...): the broadcast of a lane
        # of the lanes a strided load picks is the broadcast of a lane of the load (then a load of its own, below:
        # a stride-2 convolution's input)
        (UPat(Ops.VECTORIZE, name="v"), _broadcast_picked_lane, "broadcast of a picked lane -> of the load's lane"),
        # GEP(LOAD(INDEX(p, i)), k) -> LOAD(INDEX(p, i + k)); GEP(LOAD(INDEX(p, i)), (k, k, ...)) -> its broadcast
        (
            UPat(
                Ops.GEP,
                src=(UPat(Ops.LOAD, src=(UPat(Ops.INDEX, name="i"),), allow_any_len=True, name="ld"),),
                name="g",
            ),
            _lane_load,
            "one lane of a vector load (or its broadcast) -> a load of that element",
        ),
    ]
)


# a gate the value ranges decided: once simplification folds it to a constant, the gate goes
constant_gates = PatternMatcher(
    [
        # LOAD(INDEX(p, i, true), alt) -> LOAD(INDEX(p, i))
        (
            UPat(Ops.LOAD, src=(UPat(Ops.INDEX, src=(UPat(), UPat(), UPat.cvar("g")), name="i"), UPat()), name="ld"),
            lambda i, g, ld: _ungated_load(i, ld) if g.arg is True else None,
            "load with an always-true gate -> plain load",
        ),
        # LOAD(INDEX(p, i, false), alt) -> alt
        (
            UPat(Ops.LOAD, src=(UPat(Ops.INDEX, src=(UPat(), UPat(), UPat.cvar("g"))), UPat.var("alt"))),
            lambda g, alt: alt if g.arg is False else None,
            "load with an always-false gate -> its fallback",
        ),
        # STORE(INDEX(p, i, true), v) -> STORE(INDEX(p, i), v)
        (
            UPat(Ops.STORE, src=(UPat(Ops.INDEX, src=(UPat(), UPat(), UPat.cvar("g")), name="i"), UPat.var("v"))),
            lambda i, g, v: i.src[0].index(i.src[1]).store(v) if g.arg is True else None,
            "store with an always-true gate -> plain store",
        ),
    ]
)


def lower_gated_store(st: UOp) -> UOp:
    index, value = st.src[0], st.src[1]
    ungated = index.src[0].index(index.src[1])
    cond = UOp(Ops.IF, dtypes.void, (index.src[2], ungated, value))
    return UOp(Ops.ENDIF, dtypes.void, (cond, UOp(Ops.STORE, dtypes.void, (ungated, value, cond))))


gated_stores = PatternMatcher(
    [
        (
            UPat(Ops.STORE, src=(UPat(Ops.INDEX, src=(UPat(), UPat(), UPat())), UPat()), name="st"),
            lower_gated_store,
            "STORE(INDEX(p, i, gate), v) -> IF(gate) STORE(INDEX(p, i), v) ENDIF",
        )
    ]
)


def index_dtype_for(root: UOp) -> DType:
    """int32 when every index value of the graph fits in it, else int64."""
    lo, hi = dtypes.min(dtypes.int32), dtypes.max(dtypes.int32)
    for u in root.toposort():
        if u.dtype is dtypes.index and not (lo <= u.vmin and u.vmax <= hi):
            return dtypes.int64
    return dtypes.int32


def commit_index_dtype(root: UOp, dt: DType) -> UOp:
    """`root` with every `index` node (and vector of index lanes) rebuilt in `dt`. A walk, not rules: a node and
    its sources change dtype together, so no half-converted node (an int32 MUL of index operands) is ever built."""
    done: dict[UOp, UOp] = {}
    for u in root.toposort():
        src = tuple(done[s] for s in u.src)
        if u.dtype.scalar() is not dtypes.index:
            done[u] = u if all(a is b for a, b in zip(src, u.src)) else u.replace(src=src)
        elif u.op is Ops.CONST and u.dtype is dtypes.index:
            done[u] = UOp.const(dt, u.arg)
        else:
            done[u] = UOp(u.op, dt.vec(u.dtype.count) if u.dtype.count > 1 else dt, src, u.arg)
    return done[root]


def merge_loops(root: UOp) -> UOp:
    """ENDs that close the same loops become one END of a GROUP: the chunks of a devectorized reduction each
    have an accumulator, updated in one loop. (Two ENDs of one loop cannot both be its end.)"""
    while True:
        ends: dict[tuple[UOp, ...], list[UOp]] = {}
        for u in root.toposort():
            if u.op is Ops.END:
                ends.setdefault(u.src[1:], []).append(u)
        group = next((g for g in ends.values() if len(g) > 1), None)
        if group is None:
            return root
        merged = UOp(
            Ops.END, dtypes.void, (UOp(Ops.GROUP, dtypes.void, tuple(e.src[0] for e in group)), *group[0].src[1:])
        )
        root = root.substitute(dict.fromkeys(group, merged))
