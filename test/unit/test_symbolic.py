"""The symbolic rules, one by one: what each folds to, checked against brute-force evaluation, and the
float cases where a rule must not fire."""

from __future__ import annotations

import itertools
import math

import pytest

from zeptograd.dtype import dtypes
from zeptograd.uop import Ops, UOp, track_rewrites

x = UOp.variable("x", 0, 100)
y = UOp.variable("y", 0, 3)
z = UOp.variable("z", -20, 20)
n = UOp.variable("n", 1, 8)
VARS = (x, y, z, n)


def evaluate(e: UOp, binding: dict[str, int]) -> int | bool:
    """Evaluate an index expression by Python's own arithmetic on its printed form (// and % are floor)."""
    env = {"where": lambda c, a, b: a if c else b, "max": max, **binding}
    return eval(str(e), env)


def bindings(e: UOp):
    names = {u.arg[0]: u for u in e.toposort() if u.op is Ops.DEFINE_VAR}
    spans = [range(v.arg[1], v.arg[2] + 1) for v in names.values()]
    for values in itertools.product(*spans):
        yield dict(zip(names, values))


def assert_same_values(before: UOp, after: UOp):
    for b in bindings(before):
        assert evaluate(before, b) == evaluate(after, b), (str(before), str(after), b)


CASES = [
    # (expression, what it simplifies to)
    ((x * 4 + y) // 4, x),
    ((x * 4 + y) % 4, y),
    (x * 2 + x * 3, x * 5),
    (x + 3 + 4, x + 7),
    ((x + 1) * 4 - 4, x * 4),
    ((x // 4) * 4 + x % 4, x),
    (x // 2 // 3, x // 6),
    ((x % 12) % 4, x % 4),
    ((x % 12) // 4, (x // 4) % 3),
    ((x * 4 + y) % 16 // 4, x % 4),
    (x // 4 < 3, x < 12),
    ((x + 3) // 4 < 3, x < 9),
    ((x * 6 + 4) // 2, x * 3 + 2),
    ((x * 6 + 4) % 4, ((x * 3 + 2) % 2) * 2),
    ((y + 4) // 4, UOp.const(dtypes.index, 1)),
    ((y + 4) % 4, y),
    (y // 4, UOp.const(dtypes.index, 0)),
    (y % 4, y),
    ((x * n + n * 2) // n, x + 2),
    ((x * n + y) % n, y % n),
    ((x + 5) % (x + 5), UOp.const(dtypes.index, 0)),
    ((x + 5) // (x + 5), UOp.const(dtypes.index, 1)),
    (x * 4 + 2 < 10, x < 2),
    (x * 4 < 9, x < 3),
    (x - 1 < x, UOp.const(dtypes.bool, True)),
    (x < 101, UOp.const(dtypes.bool, True)),
    (x < 0, UOp.const(dtypes.bool, False)),
    (y.ne(7), UOp.const(dtypes.bool, True)),
    ((x * 2).ne(3), UOp.const(dtypes.bool, True)),
    ((x * 2).eq(4), x.eq(2)),
    (3 < x + 2, UOp.const(dtypes.index, 1) < x),
    (8 < x * 4, UOp.const(dtypes.index, 2) < x),
    ((x < 5).ne(True), UOp.const(dtypes.index, 4) < x),
    (x.maximum(y), x.maximum(y)),
    ((x + 4).maximum(y), x + 4),
    (y.maximum(x + 3), x + 3),
    ((x < 5).where(y, y), y),
    ((x < 5).where(True, False), x < 5),
    ((x < 200).where(x, y), x),
    ((x + y) - (y + x), UOp.const(dtypes.index, 0)),
    (x * 0 + y * 1, y),
    (x // 1 + x % 1, x),
    (-(-x), x),
    (x ^ 0, x),
    ((y * 8 + x) % 7, (y + x) % 7),
    ((y * 8 + x) // 7, y + (y + x) // 7),
    ((x * 9 + 20) % 7, (x * 2 + 6) % 7),
    # a vector's lanes 16*x + 0..15 over a block of 64: one x//4 for every lane, not a division a lane
    ((x * 16 + 5) // 64, x // 4),
    ((x * 16 + 5) % 64, (x % 4) * 16 + 5),
    ((x * 16 + 21) // 64, (x + 1) // 4),
    ((z * 8 + 3) // 16, z // 2),
    ((z * 8 + 3) % 16, (z % 2) * 8 + 3),
    ((x * 6 + y * 4 + 1) // 8, (x * 3 + y * 2) // 4),
    # a panel of 32 read 16 at a time: the terms below 16 (y*4 + 2 <= 14) never reach the panel's division
    ((x * 16 + y * 4 + 2) // 32, x // 2),
    ((x * 16 + y * 4 + 2) % 32, (x % 2) * 16 + y * 4 + 2),
    ((x * 256 + y * 64 + z + 20) // 512, x // 2),
    (x | 0, x),
    (x & 0, UOp.const(dtypes.index, 0)),
    (x.alu(Ops.SHL, UOp.const(dtypes.index, 0)), x),
    (x.alu(Ops.SHR, UOp.const(dtypes.index, 0)), x),
]


@pytest.mark.parametrize(("expr", "expected"), CASES, ids=[str(c[0]) for c in CASES])
def test_simplifies_to(expr: UOp, expected: UOp):
    out = expr.simplify()
    assert out is expected.simplify(), f"{expr} -> {out}, expected {expected}"
    if len(list(bindings(expr))) <= 20_000:
        assert_same_values(expr, out)


def test_simplify_is_idempotent_and_canonical():
    a = (y + x * 3 + 2 + z).simplify()
    b = (z + 2 + y + 3 * x).simplify()
    assert a is b and a.simplify() is a
    assert str(a) == "x*3+y+z+2"


def test_canonical_order_of_commutative_ops():
    assert (3 * x).simplify() is (x * 3)
    f = UOp(Ops.DEFINE_VAR, dtypes.int32, (), ("f", 0, 9))
    assert (UOp.const(dtypes.int32, 7) * f).simplify() is f * 7
    assert x.maximum(y).simplify() is y.maximum(x).simplify()


def test_fixed_width_ints_fold_with_wraparound():
    big = UOp.const(dtypes.int32, 2**31 - 1)
    assert (big + 1).simplify() is UOp.const(dtypes.int32, -(2**31))
    assert (UOp.const(dtypes.uint8, 200) * 2).simplify().arg == 144
    # a sum of int32 terms: like terms combine modulo 2**32
    v = UOp(Ops.DEFINE_VAR, dtypes.int32, (), ("v", -(2**31), 2**31 - 1))
    assert (v * 2 + v * 3).simplify() is v * 5
    # but division rules that need unbounded integers do not fire on int32: (v*4+1)//4 may have wrapped
    e = (v * 4 + 1) // 4
    assert e.simplify() is e


def test_float_rules_only_where_ieee_keeps_them_exact():
    f = UOp(Ops.DEFINE_VAR, dtypes.int32, (), ("f", 0, 9)).cast(dtypes.float32)
    assert (f * 1.0).simplify() is f
    assert (f + 0.0).simplify() is (f + 0.0)  # -0.0 + 0.0 is +0.0: not f
    assert (f * 0.0).simplify() is (f * 0.0)  # nan * 0 is nan: not 0
    assert (f < f).simplify() is (f < f)  # nan < nan is False but nan != nan is True: leave floats alone
    c = UOp.const(dtypes.float32, 0.1) + UOp.const(dtypes.float32, 0.2)
    assert c.simplify().arg == pytest.approx(0.3, rel=1e-7) and c.simplify().arg == float.fromhex("0x1.333334p-2")
    assert (UOp.const(dtypes.float32, 1.0) * 1e39).simplify().arg == math.inf  # rounds to float32 range


def test_cast_folding():
    assert UOp.const(dtypes.float32, -2.7).cast(dtypes.int32).simplify().arg == -2  # toward zero, as C
    assert UOp.const(dtypes.int32, 300).cast(dtypes.uint8).simplify().arg == 44
    assert UOp.const(dtypes.int32, 3).cast(dtypes.bool).simplify().arg is True
    assert UOp.const(dtypes.bool, True).cast(dtypes.float32).simplify().arg == 1.0
    nan_cast = UOp.const(dtypes.float32, math.nan).cast(dtypes.int32)
    assert nan_cast.simplify() is nan_cast  # undefined in C: not folded
    huge = UOp.const(dtypes.float32, 1e20).cast(dtypes.int32)
    assert huge.simplify() is huge


def test_division_by_zero_is_not_folded():
    e = UOp.const(dtypes.index, 4) // 0
    assert e.simplify() is e
    m = x % (y - y)
    assert m.simplify().op is Ops.MOD


def test_bool_rules():
    b = x < 5
    assert (b & True).simplify() is b and (b & False).simplify().arg is False
    assert (b | False).simplify() is b and (b | True).simplify().arg is True
    assert (b ^ False).simplify() is b and (b ^ b).simplify().arg is False
    assert (b & b).simplify() is b
    assert b.logical_not().logical_not().simplify() is b
    w = (x < 5).logical_not().where(y, z)
    assert w.simplify() is (UOp.const(dtypes.index, 4) < x).where(y, z)
    c = UOp(Ops.DEFINE_VAR, dtypes.int32, (), ("c", 0, 1)).cast(dtypes.bool)
    assert c.logical_not().where(y, z).simplify() is c.where(z, y)
    assert c.where(False, True).simplify() is c.logical_not()


def test_rules_have_names_in_traces():
    with track_rewrites() as events:
        ((x * 4 + y) // 4).simplify()
    assert {e.rule for e in events} >= {"fold div/mod"}


def test_lane_offsets_are_the_differences_of_the_addresses():
    """devectorize's lane offsets (each address minus the first, where that is one constant), its fast path for
    lanes of one expression plus constants included, against the addresses evaluated at every binding."""
    from zeptograd.codegen.devectorizer import _offsets

    base = x * 4 + y
    cases = [
        [base + c for c in (0, 1, 2, 3)],
        [base, base + 5, base + 2],
        [base + 7, base - 1],
        [UOp.const(dtypes.index, c) for c in (3, 7, 4)],
        [base + 1, (x + 1) * 4 + y, base + 9],  # the same sums in another form: the simplify path
        [base, base + z],  # not a constant
        [x // 3 + 1, (x + 1) // 3],  # not a constant
    ]
    for addrs in cases:
        every = addrs[0]
        for a in addrs[1:]:
            every = every + a  # one expression over every variable the addresses use
        diffs = {tuple(evaluate(a, b) - evaluate(addrs[0], b) for a in addrs) for b in bindings(every)}
        want = list(diffs.pop()) if len(diffs) == 1 else None
        assert _offsets(addrs) == want, (addrs, want)
