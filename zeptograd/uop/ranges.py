"""Value ranges: the interval [vmin, vmax] every integer and bool UOp is known to lie in.

The rules of `symbolic.py` fold comparisons, divisions and modulos with these ranges, so each bound here
must be sound: a value outside [vmin, vmax] is a miscompile. Fixed-width integers wrap, so a result that
might leave its dtype's range gets the dtype's whole range. `index` never wraps and has no bounds: an
unknown index is (-inf, inf), so bounds are ints or the float infinities, and the arithmetic below treats
the infinities as limits (0 * inf is 0: the interval [0, 0] times anything is 0). Floats get (-inf, inf)
unless constant.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from zeptograd.dtype import DType, dtypes
from zeptograd.uop.ops import GroupOp, Ops

if TYPE_CHECKING:
    from zeptograd.uop.ops import UOp

Range = tuple[Any, Any]


def _finite(*bounds: Any) -> bool:
    return all(not isinstance(b, float) or math.isfinite(b) for b in bounds)


def _floor_div(x: Any, y: Any) -> Any:
    """floor(x / y) for bounds that may be infinite (y is never 0)."""
    if _finite(x, y):
        return x // y
    if not _finite(x):
        if not _finite(y):
            return math.nan  # inf / inf: unknown
        return x if y > 0 else -x
    # a finite x over an infinite y: the limit of x // y
    return (0 if x >= 0 else -1) if y > 0 else (0 if x <= 0 else -1)


def _floordiv_range(a: Range, b: Range) -> Range | None:
    if b[0] <= 0 <= b[1]:
        return None  # the divisor may be zero
    quotients = [_floor_div(x, y) for x in a for y in b]
    if any(isinstance(q, float) and math.isnan(q) for q in quotients):
        return None
    return min(quotients), max(quotients)


def _mod_range(a: Range, b: Range) -> Range | None:
    if b[0] == b[1] and b[0] > 0 and _finite(*a) and a[0] // b[0] == a[1] // b[0]:
        return a[0] % b[0], a[1] % b[0]  # all of `a` lies in one period: the modulo is a shift
    if b[0] > 0:
        return 0, (min(b[1] - 1, a[1]) if a[0] >= 0 else b[1] - 1)
    if b[1] < 0:
        return b[0] + 1, 0
    return None  # the divisor may be zero


def _times(x: Any, y: Any) -> Any:
    return 0 if x == 0 or y == 0 else x * y


def _mul_range(a: Range, b: Range) -> Range:
    products = [_times(x, y) for x in a for y in b]
    return min(products), max(products)


def _bitwise_range(op: Ops, a: Range, b: Range) -> Range | None:
    if a[0] < 0 or b[0] < 0 or not _finite(a[1], b[1]):
        return None
    if op is Ops.AND:
        return 0, min(a[1], b[1])
    # OR and XOR of non-negative numbers stay below the next power of two of the larger bound
    top = (1 << max(a[1], b[1]).bit_length()) - 1
    return (max(a[0], b[0]) if op is Ops.OR else 0), top


def _cmp_range(op: Ops, a: Range, b: Range) -> Range:
    if op is Ops.CMPLT:
        if a[1] < b[0]:
            return True, True
        if a[0] >= b[1]:
            return False, False
        return False, True
    disjoint = a[1] < b[0] or b[1] < a[0]
    same_constant = a[0] == a[1] == b[0] == b[1]
    if op is Ops.CMPNE:
        return (True, True) if disjoint else (False, False) if same_constant else (False, True)
    return (False, False) if disjoint else (True, True) if same_constant else (False, True)


_BOOL_FN = {Ops.AND: lambda a, b: a and b, Ops.OR: lambda a, b: a or b, Ops.XOR: lambda a, b: a != b}


def _alu_range(u: UOp, r: list[Range]) -> Range | None:
    op = u.op
    if op is Ops.ADD:
        return r[0][0] + r[1][0], r[0][1] + r[1][1]
    if op is Ops.SUB:
        return r[0][0] - r[1][1], r[0][1] - r[1][0]
    if op is Ops.NEG:
        if dtypes.is_bool(u.dtype):
            return not r[0][1], not r[0][0]  # the NEG of a bool is its negation
        return -r[0][1], -r[0][0]
    if op is Ops.MUL:
        return _mul_range(r[0], r[1])
    if op is Ops.MULACC:
        lo, hi = _mul_range(r[0], r[1])
        return lo + r[2][0], hi + r[2][1]
    if op is Ops.IDIV:
        return _floordiv_range(r[0], r[1])
    if op is Ops.MOD:
        return _mod_range(r[0], r[1])
    if op is Ops.MAX:
        return max(r[0][0], r[1][0]), max(r[0][1], r[1][1])
    if op in (Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ):
        return _cmp_range(op, r[0], r[1])
    if op is Ops.WHERE:
        if r[0] == (True, True):
            return r[1]
        if r[0] == (False, False):
            return r[2]
        return min(r[1][0], r[2][0]), max(r[1][1], r[2][1])
    if op in (Ops.AND, Ops.OR, Ops.XOR):
        if dtypes.is_bool(u.dtype):
            # a bool range lists every value it can take: try them all
            values = {_BOOL_FN[op](x, y) for x in set(r[0]) for y in set(r[1])}
            return min(values), max(values)
        return _bitwise_range(op, r[0], r[1])
    if op is Ops.SHL and r[1][0] == r[1][1] and 0 <= r[1][0] < 64:
        return _times(r[0][0], 2 ** r[1][0]), _times(r[0][1], 2 ** r[1][0])
    if op is Ops.SHR and r[1][0] == r[1][1] and 0 <= r[1][0] < 64:
        return _floor_div(r[0][0], 2 ** r[1][0]), _floor_div(r[0][1], 2 ** r[1][0])
    return None


_FULL: dict[DType, Range] = {}


def _full(dt: DType) -> Range:
    if (r := _FULL.get(dt)) is None:
        r = _FULL[dt] = (dtypes.min(dt), dtypes.max(dt))
    return r


def _int_like(dt: DType) -> bool:
    return dtypes.is_int(dt) or dtypes.is_bool(dt)


def compute_range(u: UOp) -> Range:
    """The range of `u`, from its sources' ranges (which must already be known)."""
    dt = u.dtype.scalar()
    op = u.op
    if op is Ops.CONST:
        return (u.arg, u.arg) if isinstance(u.arg, (int, float)) else _full(dt)
    if not _int_like(dt):
        return _full(dt)
    ret: Range | None = None
    if op in GroupOp.ALU:
        src_ranges = []
        for s in u.src:
            if not _int_like(s.dtype):
                return _full(dt)
            src_ranges.append(s._min_max)
        ret = _alu_range(u, src_ranges)
    elif op is Ops.DEFINE_VAR:
        ret = u.arg[1], u.arg[2]
    elif op is Ops.STORE and u.src[0].op is Ops.DEFINE_VAR:
        ret = u.src[0].vmin, u.src[0].vmax  # a bound variable ranges as its variable: the value is not baked in
    elif op in (Ops.RANGE, Ops.SPECIAL, Ops.UNROLL):
        ret = 0, max(0, u.src[0].vmax - 1)
    elif op is Ops.CAST and _int_like(u.src[0].dtype):
        ret = u.src[0].vmin, u.src[0].vmax
        if dt is dtypes.bool:
            ret = (False, False) if ret == (0, 0) else (True, True) if ret[0] > 0 or ret[1] < 0 else (False, True)
    if ret is None:
        return _full(dt)
    lo, hi = ret
    if dt is dtypes.bool:
        return bool(lo), bool(hi)
    if dt is not dtypes.index:
        full = _full(dt)
        if lo < full[0] or hi > full[1]:
            return full  # it may wrap around: anything is possible
    return (int(lo) if _finite(lo) else lo), (int(hi) if _finite(hi) else hi)
