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

from zeptograd.codegen.lowering import accumulate
from zeptograd.dtype import DType, dtypes
from zeptograd.uop.alu import identity_element
from zeptograd.uop.ops import Ops, UOp
from zeptograd.uop.pattern import PatternMatcher, UPat
from zeptograd.uop.rewrite import graph_rewrite
from zeptograd.uop.symbolic import symbolic


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


def _keeps_indices(src: DType, dst: DType) -> bool:
    """Does a cast from integer `src` to `dst` keep every index value (a kernel's indices fit 32 signed bits)?"""
    if not (dtypes.is_int(src) and dtypes.is_int(dst)) or dst is dtypes.index:
        return dtypes.is_int(src) and dst is dtypes.index
    return dst.itemsize >= 4 and (src is dtypes.index or dst.itemsize >= src.itemsize)


def _solve(e: UOp, r: UOp, target: UOp) -> UOp | None:
    """The value of r (in target's dtype) at which `e == target`, for e an offset of r (`r + c`, `r - c`, through
    casts that keep every index: an arange's closed form), else None. One r at most: e is one-to-one in r."""
    while e is not r:
        if e.op in (Ops.ADD, Ops.SUB):
            a, b = e.src
            if e.op is Ops.ADD and _depends(b, r):
                a, b = b, a
            if _depends(b, r):
                return None
            # in target's dtype: computing in e's (the index) would widen every index of the kernel to its range
            c = b if b.dtype is target.dtype else b.cast(target.dtype)
            target = target - c if e.op is Ops.ADD else target + c
            e = a
        elif e.op is Ops.CAST and _keeps_indices(e.src[0].dtype, e.dtype):
            e = e.src[0]
        else:
            return None
    return target


def _within(at: UOp, r: UOp) -> tuple[UOp, UOp]:
    """Whether solved value `at` of loop r lies in r's range, and `at` clamped into it as an index: the read or
    write at it happens whatever the gate (a select evaluates both sides), and stays in bounds."""
    n = r.src[0] if at.dtype is dtypes.index else r.src[0].cast(at.dtype)
    clamped = at.maximum(0).minimum(n - 1)
    return (at < n) & (at < 0).logical_not(), clamped if at.dtype is dtypes.index else clamped.cast(dtypes.index)


def _picked(red: UOp, cond: UOp, v: UOp, zero: UOp) -> UOp | None:
    """sum over r of where(e == f(r), v(r), 0), f an offset and e free of r: the one r = f^-1(e) is picked."""
    if red.arg is not Ops.ADD or len(red.src) != 2 or cond.op is not Ops.CMPEQ:
        return None
    r = red.src[1]
    if r.op is not Ops.RANGE:
        return None
    for side, e in (cond.src, cond.src[::-1]):
        if not _depends(e, r) and (at := _solve(side, r, e)) is not None:
            inside, index = _within(at, r)
            return inside.where(v.substitute({r: index}), zero)
    return None


def _cast_into_pick(red: UOp) -> UOp | None:
    """A sum of cast(where(c, v, 0)) as the sum of where(c, cast(v), 0), and a product of cast(where(c, v, 1)) as
    the product of where(c, cast(v), 1): a pick of small integers reduced in a wider accumulator (int8 values, an
    int32 sum) is a pick of the widened values. None for any other node (a maximum's least value is not the wider
    dtype's)."""
    if red.op is not Ops.REDUCE or red.arg not in (Ops.ADD, Ops.MUL) or (cast := red.src[0]).op is not Ops.CAST:
        return None
    if cast.src[0].op is not Ops.WHERE:
        return None
    cond, v, other = cast.src[0].src
    identity = identity_element(red.arg, cast.dtype)
    if other.op is not Ops.CONST or other.arg != identity.arg:
        return None
    return red.replace(src=(cond.where(v.cast(cast.dtype), identity), *red.src[1:]))


closed_forms = PatternMatcher(
    [
        # sum over r of cast(where(c, v, 0)) -> sum over r of where(c, cast(v), 0); a product's 1 likewise
        (
            UPat(Ops.REDUCE, src=(UPat(Ops.CAST, src=(UPat(Ops.WHERE),)),), allow_any_len=True, name="red"),
            _cast_into_pick,
            "reduction of a cast pick -> reduction of a pick of the cast",
        ),
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


picks = PatternMatcher(
    [
        # sum over r of 0 -> 0 (a pick that simplification proved never hits)
        (
            UPat(Ops.REDUCE, src=(UPat.cvar("zero"),), allow_any_len=True, name="red"),
            lambda red, zero: zero if red.arg is Ops.ADD and zero.arg == 0 else None,
            "sum of zeros -> 0",
        ),
        # sum over r of where(e == r + c, v(r), 0) -> where(0 <= e - c < n, v(e - c), 0): a gather's one-hot pick
        (
            UPat(
                Ops.REDUCE,
                src=(UPat(Ops.WHERE, src=(UPat(Ops.CMPEQ, name="cond"), UPat.var("v"), UPat.cvar("zero"))),),
                allow_any_len=True,
                name="red",
            ),
            lambda red, cond, v, zero: _picked(red, cond, v, zero) if zero.arg == 0 else None,
            "sum of a one-hot pick -> indexed read",
        ),
    ]
)


def fold_closed_forms(sink: UOp) -> UOp:
    """The kernel with its closed-form reductions folded (unchanged when it has none): counts first, then the
    one-hot picks, whose counter (an arange, itself a count) is simplified to `r + c` over its range in between."""
    if not any(u.op is Ops.REDUCE for u in sink.toposort()):
        return sink
    sink = graph_rewrite(sink, closed_forms, name="closed forms")
    if any(_one_hot_reduce(u) for u in sink.toposort()):
        sink = graph_rewrite(sink, symbolic, name="simplify counts")
        sink = graph_rewrite(sink, picks, name="one-hot picks")
    return sink


def _one_hot_reduce(u: UOp) -> bool:
    """Is `u` a reduction (over one loop or more) of `where(x == y, v, identity)`: a sum of `where(x == y, v, 0)`,
    a product of `where(x == y, v, 1)` or a maximum of `where(x == y, v, least)` (least: the dtype's least value,
    -inf for floats)?"""
    if u.op is not Ops.REDUCE or len(u.src) < 2 or u.src[0].op is not Ops.WHERE or u.src[0].src[0].op is not Ops.CMPEQ:
        return False
    other = u.src[0].src[2]
    reduces = u.arg in (Ops.ADD, Ops.MUL, Ops.MAX)
    return reduces and other.op is Ops.CONST and other.arg == identity_element(u.arg, u.dtype).arg


def scatters(ast: UOp) -> bool:
    """Does the kernel store through an index it loads (a scatter)? Its loops then run in their order: a plan
    (threads, vectors, unrolling) could let two of its writes to one element race or overwrite each other."""
    return any(u.op is Ops.STORE and any(x.op is Ops.LOAD for x in u.src[0].toposort()) for u in ast.toposort())


def scatter_form(ast: UOp) -> tuple[UOp, UOp] | None:
    """`ast` as a scatter, when each output element is a one-hot sum picked by the element's own position:
    out[r, e] = sum over b of where(a(b) == r + c, v(b, e), 0), with a free of r (the gradient of a gather, such as
    an embedding's; b may be several loops). Each b adds to the one r = a(b) - c, so a loop over (e, b) adds v into
    that element, in b's order (the sum's own order: the same float result), once the output is zeros (the
    caller's kernel before):

        out[r, e] = sum_b where(a(b) == r + c, v(b, e), 0) -> out[a(b) - c, e] += v(b, e) where 0 <= a(b) - c < n

    That is O(b * e) work instead of O(r * e * b). A maximum of `where(a(b) == r + c, v, least)` is one too (`out =
    max(out, v)`, from least: -inf for floats), and a product of `where(a(b) == r + c, v, 1)` (`out *= v`, from 1):
    torch's scatter_reduce "amax", "amin" and "prod". Returns the scatter and the value to fill the output with
    first (the reduction's identity); None when the kernel is not of that form."""
    top = ast.src[0] if ast.op is Ops.SINK and len(ast.src) == 1 else None
    if top is None or top.op is not Ops.END or top.src[0].op is not Ops.STORE:
        return None
    value = top.src[0].src[1]
    widened = _cast_into_pick(value)
    if not _one_hot_reduce(value if widened is None else widened):
        return None
    ast = fold_closed_forms(ast)  # the arange (a count) simplified to r + c
    top = ast.src[0]
    store, ranges = top.src[0], top.src[1:]
    if store.op is not Ops.STORE or not _one_hot_reduce(store.src[1]) or len(store.src[0].src) != 2:
        return None
    red = store.src[1]
    (cond, v, zero), bs = red.src[0].src, red.src[1:]
    for a, y in (cond.src, cond.src[::-1]):
        if not any(_depends(a, b) for b in bs) or any(_depends(y, b) for b in bs):
            continue
        for r in ranges:
            if r.op is not Ops.RANGE or _depends(a, r) or (at := _solve(y, r, a)) is None:
                continue
            inside, at_index = _within(at, r)
            pick = {r: at_index}
            buf, index = store.src[0].src
            target = buf.index(index.substitute(pick), inside)
            old, new = target.load(zero), v.substitute(pick)
            # the reduction's own step, in its order: a product rounds as the reduction does, and a maximum's NaN
            # wins either way (the reduction's max(acc, least) at a miss keeps a NaN too)
            added = target.store(accumulate(red.arg, old, new))
            loops = (*(x for x in ranges if x is not r), *bs)
            body = UOp(Ops.END, dtypes.void, (added, *loops)).sink()
            return graph_rewrite(body, symbolic, name="scatter").replace(arg=ast.arg), zero
    return None
