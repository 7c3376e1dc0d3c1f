"""The symbolic rules: constant folding, identities, sums, division and modulo, comparisons, `where`.

Every rule here must be exact, and the tests check them (random expressions evaluated before and after,
and z3 proofs). Where a rule holds only for mathematical integers it is limited to the `index` dtype, whose
arithmetic never wraps; fixed-width integers wrap, and for them only the rules of modular arithmetic
(sums, products, constants) apply. Float rules are limited to those IEEE arithmetic keeps exact: `x*1`
is `x`, but `x+0` is not (-0.0) and `x*0` is not (NaN, inf).

>>> x, y = UOp.variable("x", 0, 100), UOp.variable("y", 0, 3)
>>> str(((x * 4 + y) // 4).simplify()), str(((x * 4 + y) % 4).simplify())
('x', 'y')
>>> str((x * 2 + x * 3 + 1).simplify())
'x*5+1'
"""

from __future__ import annotations

import math
from typing import Any

from zeptograd.dtype import dtypes
from zeptograd.uop.alu import exec_alu
from zeptograd.uop.ops import GroupOp, Ops, UOp
from zeptograd.uop.pattern import PatternMatcher, UPat

INTS = (*dtypes.ints, dtypes.index)
"""The dtypes whose sums are normalized (modular arithmetic keeps the ring laws)."""


# *** helpers ***


def _is_scalar_int(u: UOp) -> bool:
    return u.dtype.count == 1 and dtypes.is_int(u.dtype)


def _split_term(t: UOp) -> tuple[UOp | None, int]:
    """A term of a sum as (base, coefficient): `x*3 -> (x, 3)`, `5 -> (None, 5)`, `x -> (x, 1)`."""
    if t.op is Ops.CONST:
        return None, t.arg
    if t.op is Ops.MUL:
        if t.src[1].op is Ops.CONST:
            return t.src[0], t.src[1].arg
        if t.src[0].op is Ops.CONST:
            return t.src[1], t.src[0].arg
    return t, 1


def split_const(a: UOp) -> tuple[UOp | None, int]:
    """`a` as (x, c) with a == x + c for a constant c (x None when `a` is a constant): the shape simplify gives a
    sum, its constant last.

    >>> x = UOp.variable("x", 0, 9)
    >>> split_const(x + 3)[1], split_const(UOp.const(dtypes.index, 4))
    (3, (None, 4))
    """
    if a.op is Ops.CONST:
        return None, a.arg
    if a.op is Ops.ADD and a.src[1].op is Ops.CONST:
        return a.src[0], a.src[1].arg
    return a, 0


def _sum_terms(u: UOp) -> list[UOp]:
    """The terms of a chain of ADDs, left to right."""
    terms: list[UOp] = []
    stack = [u]
    while stack:
        t = stack.pop()
        if t.op is Ops.ADD and t.dtype is u.dtype:
            stack.extend(reversed(t.src))
        else:
            terms.append(t)
    return terms


def _decompose(u: UOp) -> tuple[dict[UOp, int], int]:
    """A sum as {base: coefficient} and a constant, like terms added up."""
    coeffs: dict[UOp, int] = {}
    const = 0
    for t in _sum_terms(u):
        base, c = _split_term(t)
        if base is None:
            const += c
        else:
            coeffs[base] = coeffs.get(base, 0) + c
    return {b: k for b, k in coeffs.items() if k != 0}, const


def _ordered_bases(coeffs: dict[UOp, int]) -> list[UOp]:
    return sorted((b for b, c in coeffs.items() if c != 0), key=lambda b: b.order_key)


def _is_built_sum(u: UOp, coeffs: dict[UOp, int], const: int) -> bool:
    """Whether `u` already is `_build_sum(u, coeffs, const)`, checked without building any node."""
    bases = _ordered_bases(coeffs)
    if not bases:
        return False
    node = u
    if const != 0:
        if node.op is not Ops.ADD or node.src[1].op is not Ops.CONST or node.src[1].arg != const:
            return False
        node = node.src[0]
    for i in range(len(bases) - 1, -1, -1):
        term = node
        if i > 0:
            if node.op is not Ops.ADD:
                return False
            term, node = node.src[1], node.src[0]
        base, c = bases[i], coeffs[bases[i]]
        if not _is_term(term, base, c):
            return False
    return True


def _is_term(term: UOp, base: UOp, c: int) -> bool:
    """Whether `term` is the canonical term `base*c` (`base` itself when c is 1)."""
    if c == 1:
        return term is base
    return term.op is Ops.MUL and term.src[0] is base and term.src[1].op is Ops.CONST and term.src[1].arg == c


def _build_sum(like: UOp, coeffs: dict[UOp, int], const: int) -> UOp:
    """The canonical sum: terms in a fixed order, coefficients after their base, the constant last."""
    ret: UOp | None = None
    for base in _ordered_bases(coeffs):
        c = coeffs[base]
        term = base if c == 1 else base * c
        ret = term if ret is None else ret + term
    if ret is None:
        return like.const_like(const)
    return ret + const if const != 0 else ret


def _merge_divmod_pairs(coeffs: dict[UOp, int]) -> dict[UOp, int]:
    """`(x//c)*c*k + (x%c)*k -> x*k` (floor division: x = (x//c)*c + x%c)."""
    if not any(b.op is Ops.MOD for b in coeffs):
        return coeffs  # no pair to merge (and no node built to find out)
    for base in list(coeffs):
        if base not in coeffs or base.op is not Ops.IDIV or base.src[1].op is not Ops.CONST:
            continue
        x, c = base.src[0], base.src[1].arg
        if c <= 0:
            continue
        remainder = UOp(Ops.MOD, base.dtype, (x, base.src[1]))
        k = coeffs.get(remainder)
        if k is not None and k != 0 and coeffs[base] == c * k:
            del coeffs[base], coeffs[remainder]
            coeffs[x] = coeffs.get(x, 0) + k
    return coeffs


# *** rule functions ***


def fold_constants(a: UOp) -> UOp | None:
    """An ALU op on constants is a constant (None where the result is undefined, like x//0)."""
    value = exec_alu(a.op, a.dtype, [s.arg for s in a.src])
    return None if value is None else UOp.const(a.dtype, value)


def fold_cast(a: UOp, c: UOp) -> UOp | None:
    """A cast of a constant is a constant (not where C leaves it undefined: NaN, inf or out of range)."""
    value, target = c.arg, a.dtype
    if target.count != 1 or not (dtypes.is_float(target) or dtypes.is_int(target) or dtypes.is_bool(target)):
        return None
    if dtypes.is_bool(target):
        return UOp.const(target, value != 0)
    if dtypes.is_int(target) and isinstance(value, float):
        if not math.isfinite(value) or not dtypes.min(target) <= math.trunc(value) <= dtypes.max(target):
            return None
        value = math.trunc(value)
    return UOp.const(target, value)


def fold_by_range(a: UOp) -> UOp | None:
    """An integer or bool node whose range is a single value is that constant."""
    if a.dtype.count != 1 or not (dtypes.is_int(a.dtype) or dtypes.is_bool(a.dtype)):
        return None
    lo, hi = a.vmin, a.vmax
    return a.const_like(lo) if lo == hi and not isinstance(lo, float) else None


def canonical_order(a: UOp) -> UOp | None:
    """Commutative ops put their sources in a fixed order, constants last (int sums have their own rule)."""
    if a.op is Ops.ADD and _is_scalar_int(a):
        return None
    x, y = a.src

    def key(u: UOp) -> tuple:
        return (u.op is Ops.CONST, u.order_key)

    return a.replace(src=(y, x)) if key(y) < key(x) else None


def normalize_sum(a: UOp) -> UOp | None:
    """An integer sum is rebuilt canonically: like terms combined (`x*2+x*3 -> x*5`), constants
    added up, `(x//c)*c + x%c -> x`, terms ordered."""
    if not _is_scalar_int(a):
        return None
    coeffs, const = _decompose(a)
    coeffs = _merge_divmod_pairs(coeffs)
    return None if _is_built_sum(a, coeffs, const) else _build_sum(a, coeffs, const)


def distribute_const(a: UOp, c: UOp) -> UOp | None:
    """`(x + y) * c -> x*c + y*c` for integers, so sums stay sums of terms."""
    if not _is_scalar_int(a):
        return None
    coeffs, const = _decompose(a)
    return _build_sum(a, {b: k * c.arg for b, k in coeffs.items()}, const * c.arg)


def fold_divmod(d: UOp, x: UOp, c: UOp) -> UOp | None:
    """Floor division and modulo of an index by a positive constant, from ranges and sums:
    `x//c -> k` and `x%c -> x-k*c` when x lies in [k*c, k*c+c);
    `(a*c+b)//c -> a+b//c` and `(a*c+b)%c -> b%c`, and for a coefficient k > c,
    `(a*k+b)%c -> (a*(k%c)+b)%c` (with the whole c's added to the quotient);
    `(a*g + r)//(c*g) -> a//c` and `(a*g + r)%(c*g) -> (a%c)*g + r` for 0 <= r < g, r a constant or a sum of
    terms that lies in [0, g)."""
    cval = c.arg
    if d.dtype is not dtypes.index or cval <= 0:
        return None
    lo, hi = x.vmin, x.vmax
    if isinstance(lo, int) and isinstance(hi, int) and lo // cval == hi // cval:
        k = lo // cval
        return d.const_like(k) if d.op is Ops.IDIV else x - k * cval
    coeffs, const = _decompose(x)
    g = math.gcd(cval, *coeffs.values())
    if g > 1 and coeffs:
        # x = g*t + r with 0 <= r < g: floor division by c = g*m never sees r, (g*t + r)//(g*m) = t//m, and the
        # remainder is (t%m)*g + r (a vector's lanes 16*i + 0..15 over 64: one i//4 for all of them)
        q, r = divmod(const, g)
        reduced = _build_sum(x, {b: k // g for b, k in coeffs.items()}, q)
        if d.op is Ops.IDIV:
            return reduced // (cval // g)
        return (reduced % (cval // g)) * g + r
    # x = g*t + s with g dividing c and s in [0, g): floor division by c never sees s, x//c = t//(c/g) and
    # x%c = (t%(c/g))*g + s (a weight panel's index 4096*i + 256*lane + k, k < 256, over 8192: one i//2 for all lanes)
    for g in sorted({k for k in coeffs.values() if 1 < k < cval and cval % k == 0}, reverse=True):
        small = _build_sum(x, {b: k for b, k in coeffs.items() if k % g != 0}, const)
        if not (isinstance(small.vmin, int) and isinstance(small.vmax, int) and small.vmin >= 0 and small.vmax < g):
            continue
        t = _build_sum(x, {b: k // g for b, k in coeffs.items() if k % g == 0}, 0)
        if d.op is Ops.IDIV:
            return t // (cval // g)
        return (t % (cval // g)) * g + small
    # a coefficient k = q*c + r comes out as q whole c's, r stays (k a multiple of c, or larger than c)
    whole = {b: k // cval for b, k in coeffs.items() if k % cval == 0 or k > cval}
    if not whole and 0 <= const < cval:
        return None
    rest = _build_sum(x, {b: k % cval if k > cval else k for b, k in coeffs.items() if k % cval != 0}, const % cval)
    if d.op is Ops.MOD:
        return rest % cval
    return _build_sum(x, whole, const // cval) + rest // cval


def fold_divmod_by_factor(d: UOp, x: UOp, y: UOp) -> UOp | None:
    """Floor division and modulo of an index sum by a symbolic divisor y that cannot be zero:
    `(a*y + b)//y -> a + b//y` and `(a*y + b)%y -> b%y` (the terms with the factor y come out)."""
    if d.dtype is not dtypes.index or y.op is Ops.CONST or y.vmin <= 0 <= y.vmax:
        return None
    coeffs, const = _decompose(x)
    whole: dict[UOp, int] = {}
    whole_const = 0
    rest: dict[UOp, int] = {}
    for base, k in coeffs.items():
        if base is y:
            whole_const += k
        elif base.op is Ops.MUL and (base.src[0] is y or base.src[1] is y):
            other = base.src[1] if base.src[0] is y else base.src[0]
            whole[other] = whole.get(other, 0) + k
        else:
            rest[base] = k
    if not whole and whole_const == 0:
        return None
    remainder = _build_sum(x, rest, const)
    if d.op is Ops.MOD:
        return remainder % y
    quotient = _build_sum(x, whole, whole_const)
    return quotient if not rest and const == 0 else quotient + remainder // y


def fold_nested_div(x: UOp, a: UOp, b: UOp) -> UOp | None:
    """`(x//a)//b -> x//(a*b)` for positive a and b (floor division nests)."""
    if x.dtype is not dtypes.index or a.arg <= 0 or b.arg <= 0:
        return None
    return x // (a.arg * b.arg)


def fold_mod_then_div(x: UOp, c: UOp, d: UOp) -> UOp | None:
    """`(x%c)//d -> (x//d)%(c//d)` when d divides c (both positive): the division comes first, where the
    div/mod rules of sums can fold it."""
    if x.dtype is not dtypes.index or c.arg <= 0 or d.arg <= 0 or c.arg % d.arg != 0:
        return None
    return (x // d.arg) % (c.arg // d.arg)


def fold_div_lt(x: UOp, c: UOp, d: UOp) -> UOp | None:
    """`x//c < d -> x < c*d` for a positive c (floor division: x//c < d exactly when x < c*d)."""
    if x.dtype is not dtypes.index or c.arg <= 0:
        return None
    return x < c.arg * d.arg


def fold_nested_mod(x: UOp, a: UOp, b: UOp) -> UOp | None:
    """`(x%(b*k))%b -> x%b` for positive b and k."""
    if x.dtype is not dtypes.index or b.arg <= 0 or a.arg <= 0 or a.arg % b.arg != 0:
        return None
    return x % b.arg


def _factored_sum(x: UOp) -> tuple[UOp, int, int] | None:
    """An index sum as (s, g, k) with x = s*g + k and g the common factor of its terms; None when there is
    nothing to factor (g is 1 and k is 0) or no term."""
    if x.dtype is not dtypes.index:
        return None
    coeffs, const = _decompose(x)
    if not coeffs:
        return None
    g = math.gcd(*coeffs.values())
    if g == 1 and const == 0:
        return None
    return _build_sum(x, {b: k // g for b, k in coeffs.items()}, 0), g, const


def fold_compare_sum(cmp: UOp, x: UOp, c: UOp) -> UOp | None:
    """Comparisons of an index sum with a constant divide out the common factor and move the constant:
    `x*g+k < c -> x < ceil((c-k)/g)`, `x*g+k != c -> x != (c-k)/g` (or True when g does not divide)."""
    if (factored := _factored_sum(x)) is None:
        return None
    lhs, g, const = factored
    target = c.arg - const
    if cmp.op is Ops.CMPLT:
        return lhs < -((-target) // g)  # ceil division
    if target % g != 0:
        return cmp.const_like(cmp.op is Ops.CMPNE)
    return lhs.alu(cmp.op, target // g)


def fold_const_lt_sum(c: UOp, x: UOp) -> UOp | None:
    """`c < x*g+k -> (c-k)//g < x` for index values (x*g+k > c holds exactly when x > (c-k)/g)."""
    if (factored := _factored_sum(x)) is None:
        return None
    rhs, g, const = factored
    return c.const_like((c.arg - const) // g) < rhs


def fold_not_lt(x: UOp, y: UOp) -> UOp | None:
    """`not (x < y) -> y < x+1` for index values (both are x >= y)."""
    return (y < x + 1) if x.dtype is dtypes.index else None


def fold_compare_difference(cmp: UOp, x: UOp, y: UOp) -> UOp | None:
    """`x < y -> True` (or False) when x - y is a constant, for index values (`x-1 < x -> True`)."""
    if x.dtype is not dtypes.index or y.op is Ops.CONST:
        return None
    coeffs, const = _decompose(x)
    for base, k in _decompose(y)[0].items():
        coeffs[base] = coeffs.get(base, 0) - k
    if any(k != 0 for k in coeffs.values()):
        return None
    return cmp.const_like(exec_alu(cmp.op, dtypes.bool, (const - _decompose(y)[1], 0)))


def fold_self_divmod(d: UOp, x: UOp) -> UOp | None:
    """`x // x -> 1` and `x % x -> 0` when x cannot be zero."""
    if not dtypes.is_int(x.dtype) or x.vmin <= 0 <= x.vmax:
        return None
    return d.const_like(1 if d.op is Ops.IDIV else 0)


def fold_max(a: UOp, x: UOp, y: UOp) -> UOp | None:
    """`max(x, y) -> x` when x >= y over their whole ranges (and the other way round)."""
    if not (dtypes.is_int(a.dtype) or dtypes.is_bool(a.dtype)):
        return None
    if x.vmin >= y.vmax:
        return x
    if y.vmin >= x.vmax:
        return y
    return None


def fold_where_const(cond: UOp, x: UOp, y: UOp) -> UOp | None:
    """`where(True, x, y) -> x`, `where(False, x, y) -> y`, also when the range of the condition decides."""
    if cond.dtype.count != 1:
        return None
    if cond.vmin == cond.vmax:
        return x if cond.vmin else y
    return None


def _and_terms(x: UOp) -> set[UOp]:
    """The terms of a conjunction `a & b & ...` (x itself when it is no AND)."""
    if x.op is not Ops.AND:
        return {x}
    return _and_terms(x.src[0]) | _and_terms(x.src[1])


def fold_where_gated_load(c: UOp, ld: UOp, a: UOp) -> UOp | None:
    """`where(c, load(p[i] if c & g else a), a) -> load(p[i] if c & g else a)`: where c is false, the load's gate is
    false too and the load already gives a (a padded read: the gate that keeps the read inside the buffer is the
    padding's own condition)."""
    index = ld.src[0]
    if len(ld.src) != 2 or ld.src[1] is not a or index.op is not Ops.INDEX or len(index.src) != 3:
        return None
    return ld if _and_terms(c) <= _and_terms(index.src[2]) else None


def _int_only(fn: Any) -> Any:
    """Apply `fn` only to integer (and bool) nodes: the rule is not exact for floats."""

    def rule(x: UOp) -> Any:
        return fn(x) if not dtypes.is_float(x.dtype) else None

    return rule


symbolic = PatternMatcher(
    [
        # ** constants **
        (UPat(GroupOp.ALU, src=UPat(Ops.CONST), name="a"), fold_constants, "fold constants"),
        (UPat(Ops.CAST, src=(UPat.cvar("c"),), name="a"), fold_cast, "cast(c) -> c'"),
        (UPat(GroupOp.ALU, name="a"), fold_by_range, "vmin == vmax -> const"),
        # ** identities **
        # x + 0 -> x (not for floats: -0.0 + 0 is 0.0)
        (UPat.var("x") + 0, _int_only(lambda x: x), "x+0 -> x"),
        # x * 1 -> x
        (UPat.var("x") * 1, lambda x: x, "x*1 -> x"),
        # x * 0 -> 0 (not for floats: NaN * 0 is NaN)
        (UPat.var("x") * 0, _int_only(lambda x: x.const_like(0)), "x*0 -> 0"),
        # x // 1 -> x
        (UPat.var("x") // 1, lambda x: x, "x//1 -> x"),
        # x % 1 -> 0
        (UPat.var("x") % 1, lambda x: x.const_like(0), "x%1 -> 0"),
        # x & x -> x, x | x -> x, max(x, x) -> x
        (UPat(GroupOp.Idempotent, src=[UPat.var("x"), UPat.var("x")]), lambda x: x, "x op x -> x"),
        # x ^ x -> 0
        (UPat.var("x") ^ UPat.var("x"), lambda x: x.const_like(0), "x^x -> 0"),
        # x & True -> x, x | False -> x, x ^ False -> x
        (UPat.var("x", dtypes.bool) & True, lambda x: x, "x&True -> x"),
        (UPat.var("x", dtypes.bool) | False, lambda x: x, "x|False -> x"),
        (UPat.var("x", dtypes.bool) ^ False, lambda x: x, "x^False -> x"),
        # x & False -> False, x | True -> True
        (UPat.var("x", dtypes.bool) & False, lambda x: x.const_like(False), "x&False -> False"),
        (UPat.var("x", dtypes.bool) | True, lambda x: x.const_like(True), "x|True -> True"),
        # x ^ 0 -> x, x | 0 -> x, x << 0 -> x, x >> 0 -> x (integers)
        (
            UPat((Ops.XOR, Ops.OR, Ops.SHL, Ops.SHR), INTS, src=(UPat.var("x"), UPat.cvar("c")), name="a"),
            lambda a, x, c: x if c.arg == 0 else None,
            "x^0 -> x",
        ),
        # x & 0 -> 0 (integers)
        (UPat.var("x", INTS) & 0, lambda x: x.const_like(0), "x&0 -> 0"),
        # not not x -> x
        (UPat.var("x", dtypes.bool).ne(True).ne(True), lambda x: x, "not not x -> x"),
        # x < x -> False, x != x -> False, x == x -> True (integers: a NaN float differs from itself)
        (UPat.var("x") < UPat.var("x"), _int_only(lambda x: UOp.const(dtypes.bool, False)), "x<x -> False"),
        (UPat.var("x").ne(UPat.var("x")), _int_only(lambda x: UOp.const(dtypes.bool, False)), "x!=x -> False"),
        (UPat.var("x").eq(UPat.var("x")), _int_only(lambda x: UOp.const(dtypes.bool, True)), "x==x -> True"),
        # ** canonical forms **
        (UPat(GroupOp.Commutative, src=(UPat(), UPat()), name="a"), canonical_order, "canonical order"),
        (UPat(Ops.ADD, name="a"), normalize_sum, "normalize sum"),
        # (x * c1) * c2 -> x * (c1*c2)
        (
            UPat.var("x", INTS) * UPat.cvar("c1") * UPat.cvar("c2"),
            lambda x, c1, c2: x * exec_alu(Ops.MUL, x.dtype, (c1.arg, c2.arg)),
            "(x*c1)*c2 -> x*(c1*c2)",
        ),
        # (x + y) * c -> x*c + y*c
        (UPat(Ops.ADD, INTS, name="a") * UPat.cvar("c"), distribute_const, "(x+y)*c -> x*c+y*c"),
        # ** division and modulo (index) **
        (UPat((Ops.IDIV, Ops.MOD), src=(UPat.var("x"), UPat.cvar("c")), name="d"), fold_divmod, "fold div/mod"),
        (UPat((Ops.IDIV, Ops.MOD), src=(UPat.var("x"), UPat.var("x")), name="d"), fold_self_divmod, "x//x -> 1"),
        (
            UPat((Ops.IDIV, Ops.MOD), src=(UPat.var("x"), UPat.var("y")), name="d"),
            fold_divmod_by_factor,
            "(a*y+b)//y -> a+b//y",
        ),
        (UPat.var("x") // UPat.cvar("a") // UPat.cvar("b"), fold_nested_div, "(x//a)//b -> x//(a*b)"),
        (UPat.var("x") % UPat.cvar("a") % UPat.cvar("b"), fold_nested_mod, "(x%(b*k))%b -> x%b"),
        (UPat.var("x") % UPat.cvar("c") // UPat.cvar("d"), fold_mod_then_div, "(x%c)//d -> (x//d)%(c//d)"),
        ((UPat.var("x") // UPat.cvar("c")).lt(UPat.cvar("d")), fold_div_lt, "x//c < d -> x < c*d"),
        # ** comparisons (index) **
        (
            UPat((Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ), src=(UPat.var("x"), UPat.cvar("c")), name="cmp"),
            fold_compare_sum,
            "x*g+k < c -> x < ceil((c-k)/g)",
        ),
        (
            UPat((Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ), src=(UPat.var("x"), UPat.var("y")), name="cmp"),
            fold_compare_difference,
            "x < y -> const when x-y is const",
        ),
        (UPat.cvar("c").lt(UPat.var("x")), fold_const_lt_sum, "c < x*g+k -> (c-k)//g < x"),
        (UPat.var("x").lt(UPat.var("y")).ne(True), fold_not_lt, "not (x<y) -> y<x+1"),
        (UPat(Ops.MAX, src=(UPat.var("x"), UPat.var("y")), name="a"), fold_max, "max(x,y) -> x if x>=y"),
        # ** where **
        (UPat.var("cond").where(UPat.var("x"), UPat.var("y")), fold_where_const, "where(const, x, y) -> x|y"),
        # where(c, x, x) -> x
        (UPat.var("c").where(UPat.var("x"), UPat.var("x")), lambda c, x: x, "where(c, x, x) -> x"),
        # where(c, load(p[i] if c & g else a), a) -> the load
        (
            UPat.var("c").where(UPat(Ops.LOAD, name="ld"), UPat.var("a")),
            fold_where_gated_load,
            "where(c, load gated by c, a) -> load",
        ),
        # where(c, True, False) -> c
        (UPat.var("c").where(True, False), lambda c: c, "where(c, True, False) -> c"),
        # where(c, False, True) -> not c
        (UPat.var("c").where(False, True), lambda c: c.logical_not(), "where(c, False, True) -> not c"),
        # where(not c, x, y) -> where(c, y, x)
        (UPat.var("c").ne(True).where(UPat.var("x"), UPat.var("y")), lambda c, x, y: c.where(y, x), "where(!c,x,y)"),
    ]
)
