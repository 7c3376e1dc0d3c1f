"""Reductions with a closed form, folded before any loop is built.

A sum over a range r of `where(cond(r), v, 0)`, with v free of r and cond a bound on `r + y`, adds v once for
each r in the bound: it is v times a count, computed without the loop. `Tensor.arange` is such a sum (the
running count of ones, `cumsum` of a window), so it runs as one elementwise kernel, not an O(n**2) reduction.

>>> from zeptograd.dtype import dtypes
>>> from zeptograd.uop.ops import UOp, Ops
>>> i, r = UOp.range(10, 0), UOp.range(10, 1)
>>> total = UOp(Ops.REDUCE, dtypes.int32, ((i + r).lt(9).where(UOp.const(dtypes.int32, 1), 0), r), Ops.ADD)
>>> fold_closed_forms(total).op is Ops.REDUCE
False
"""

from __future__ import annotations

from zeptograd.dtype import dtypes
from zeptograd.uop.ops import Ops, UOp
from zeptograd.uop.pattern import PatternMatcher, UPat
from zeptograd.uop.rewrite import graph_rewrite


def _depends(e: UOp, r: UOp) -> bool:
    """Does `e` read `r`? (by identity: == on UOps builds a comparison)"""
    return any(u is r for u in e.toposort())


def _offset(e: UOp, r: UOp) -> UOp | None:
    """y where e = r + y and y does not depend on r (None if e is not of that form)."""
    if e is r:
        return UOp.const(dtypes.index, 0)
    if e.op is Ops.ADD:
        for a, b in (e.src, e.src[::-1]):
            if a is r and not _depends(b, r):
                return b
    return None


def _count(cond: UOp, r: UOp) -> UOp | None:
    """How many r in [0, n) satisfy `cond` (an index UOp), for cond = `k < r + y` or `r + y < k`."""
    if cond.op is not Ops.CMPLT:
        return None
    lhs, rhs = cond.src
    n = r.src[0]
    if (y := _offset(rhs, r)) is not None and not _depends(lhs, r):
        # k < r + y  <=>  r >= k - y + 1: all of [0, n) but the first clamp(k - y + 1) values
        return n - (lhs - y + 1).maximum(0).minimum(n)
    if (y := _offset(lhs, r)) is not None and not _depends(rhs, r):
        # r + y < k  <=>  r < k - y: the first clamp(k - y) values
        return (rhs - y).maximum(0).minimum(n)
    return None


def _counted_sum(red: UOp, cond: UOp, v: UOp) -> UOp | None:
    if red.arg is not Ops.ADD or len(red.src) != 2:
        return None
    r = red.src[1]
    if r.op is not Ops.RANGE or _depends(v, r) or (count := _count(cond, r)) is None:
        return None
    return v * count.cast(v.dtype)


closed_forms = PatternMatcher(
    [
        # sum over r of where(k < r + y, v, 0) -> v * (n - clamp(k - y + 1, 0, n)); likewise r + y < k
        (
            UPat(
                Ops.REDUCE,
                src=(UPat(Ops.WHERE, src=(UPat.var("cond"), UPat.var("v"), UPat.cvar("zero"))),),
                allow_any_len=True,
                name="red",
            ),
            lambda red, cond, v, zero: _counted_sum(red, cond, v) if zero.arg == 0 else None,
            "sum of an indicator -> count",
        ),
    ]
)


def fold_closed_forms(sink: UOp) -> UOp:
    """The kernel with its closed-form reductions folded (unchanged when it has none)."""
    if not any(u.op is Ops.REDUCE for u in sink.toposort()):
        return sink
    return graph_rewrite(sink, closed_forms, name="closed forms")
