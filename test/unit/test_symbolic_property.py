"""Property tests of the symbolic rules and the value ranges, against an evaluator written here.

`evaluate` below is an independent reference for the integer and bool ops (it does not use
zeptograd.uop.alu): it walks a graph and computes every node's Python value from variable bindings,
wrapping fixed-width integers to their dtype (`index` never wraps). Random expression trees are then
checked on the corners of their variables' ranges and on random points:

  (a) the tree and `tree.simplify()` have the same value (and the same dtype), and
  (b) every node of both graphs lies in its [vmin, vmax] (the ranges the rules fold with are sound).

A binding on which the ORIGINAL tree divides by zero is skipped; a simplified tree that divides by zero
where the original did not is a failure. The targeted tests at the end check known answers, and that the
operators (`-`, `minimum`, `<=`, ...) build graphs that have the values of the Python operators.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from typing import Any

import pytest

from zeptograd.dtype import DType, dtypes
from zeptograd.uop.ops import Ops, UOp

# *** the reference evaluator ***


class Undefined(Exception):
    """The expression has no value on this binding (division by zero, an out-of-range shift)."""


def wrap(value: Any, dt: DType) -> Any:
    """`value` as a scalar of `dt` holds it: two's complement wrap-around for fixed-width integers."""
    if dt is dtypes.bool:
        return bool(value)
    value = int(value)
    if dt is dtypes.index:
        return value
    bits = 8 * dt.itemsize
    value &= (1 << bits) - 1
    if dt not in dtypes.uints and value >= 1 << (bits - 1):
        value -= 1 << bits
    return value


def _shift_amount(b: int, dt: DType) -> int:
    width = 64 if dt is dtypes.index else 8 * dt.itemsize
    if not 0 <= b < width:
        raise Undefined(f"shift by {b}")
    return b


def _floordiv(a: int, b: int) -> int:
    if b == 0:
        raise Undefined("division by zero")
    return a // b


def _floormod(a: int, b: int) -> int:
    if b == 0:
        raise Undefined("modulo by zero")
    return a % b


_BINARY: dict[Ops, Callable[[Any, Any], Any]] = {
    Ops.ADD: lambda a, b: a + b,
    Ops.SUB: lambda a, b: a - b,
    Ops.MUL: lambda a, b: a * b,
    Ops.IDIV: _floordiv,
    Ops.MOD: _floormod,
    Ops.MAX: lambda a, b: a if a >= b else b,
    Ops.CMPLT: lambda a, b: a < b,
    Ops.CMPNE: lambda a, b: a != b,
    Ops.CMPEQ: lambda a, b: a == b,
    Ops.AND: lambda a, b: a & b,
    Ops.OR: lambda a, b: a | b,
    Ops.XOR: lambda a, b: a ^ b,
}


def evaluate(root: UOp, env: dict[UOp, int]) -> dict[UOp, Any]:
    """The value of every node of `root`'s graph; `env` binds the DEFINE_VARs and RANGEs."""
    vals: dict[UOp, Any] = {}
    for n in root.toposort():
        op, dt = n.op, n.dtype
        if op is Ops.CONST:
            v = n.arg
        elif op in (Ops.DEFINE_VAR, Ops.RANGE):
            v = env[n]
        else:
            s = [vals[x] for x in n.src]
            if op in _BINARY:
                v = _BINARY[op](s[0], s[1])
            elif op is Ops.NEG:
                v = (not s[0]) if dt is dtypes.bool else -s[0]  # -x of a bool is `not x`
            elif op is Ops.SHL:
                v = s[0] << _shift_amount(s[1], dt)
            elif op is Ops.SHR:
                v = s[0] >> _shift_amount(s[1], dt)
            elif op is Ops.WHERE:
                v = s[1] if s[0] else s[2]
            elif op is Ops.CAST:
                v = s[0] != 0 if dt is dtypes.bool else int(s[0])
            else:
                raise NotImplementedError(f"the reference evaluator has no {op!r}")
        vals[n] = wrap(v, dt)
    return vals


def variables(root: UOp) -> list[UOp]:
    """The DEFINE_VARs and RANGEs of the graph, in a deterministic order."""
    return sorted((n for n in root.toposort() if n.op in (Ops.DEFINE_VAR, Ops.RANGE)), key=lambda n: n.order_key)


def bounds(v: UOp) -> tuple[int, int]:
    if v.op is Ops.DEFINE_VAR:
        return v.arg[1], v.arg[2]
    assert v.op is Ops.RANGE and v.src[0].op is Ops.CONST, "the generator only makes RANGEs with constant ends"
    return 0, v.src[0].arg - 1


def bindings(root: UOp, rng: random.Random, n_random: int, max_corners: int = 64) -> list[dict[UOp, int]]:
    """Every corner of the variables' ranges (a random subset past `max_corners`) and random points."""
    vs = variables(root)
    rs = [bounds(v) for v in vs]
    corners = list(itertools.product(*[sorted({lo, hi}) for lo, hi in rs]))
    if len(corners) > max_corners:
        corners = rng.sample(corners, max_corners)
    points = [dict(zip(vs, c)) for c in corners]
    for _ in range(n_random):
        points.append(
            {
                v: rng.choice((lo, hi, rng.randint(lo, hi), rng.randint(lo, min(hi, lo + 3))))
                for v, (lo, hi) in zip(vs, rs)
            }
        )
    return points


# *** random expression trees ***


def _vars(dt: DType, prefix: str) -> dict[str, UOp]:
    big = 2 ** (8 * dt.itemsize - 1) if dt is not dtypes.index else 10**6
    spec = {
        "x": (0, 100),
        "y": (0, 3),
        "z": (-5, 5),
        "w": (0, 1000),
        "o": (0, 0),
        "e": (1, 1),
        "n": (-20, -3),
        "t": (-1, 1),
    }
    if dt in dtypes.uints:
        spec = {k: (lo, hi) for k, (lo, hi) in spec.items() if lo >= 0}
        spec["h"] = (2 ** (8 * dt.itemsize) - 6, 2 ** (8 * dt.itemsize) - 1)
    else:
        spec["h"] = (big - 6, big - 1)
        spec["m"] = (-big, -big + 5)
    if dt.itemsize == 1:  # int8/uint8: keep the ranges inside the dtype
        spec = {k: (max(lo, dtypes.min(dt)), min(hi, dtypes.max(dt))) for k, (lo, hi) in spec.items()}
    return {k: UOp.variable(f"{prefix}{k}", lo, hi, dt) for k, (lo, hi) in spec.items()}


def _nonzero_vars(dt: DType, prefix: str) -> list[UOp]:
    ret = [UOp.variable(f"{prefix}p", 1, 8, dt), UOp.variable(f"{prefix}d", 3, 3, dt)]
    if dt not in dtypes.uints:
        ret.append(UOp.variable(f"{prefix}q", -8, -1, dt))
    return ret


class TreeGen:
    """Random integer and bool expressions of one integer dtype over a fixed set of bounded variables."""

    def __init__(
        self,
        rng: random.Random,
        dt: DType,
        bitwise: bool = True,
        shifts: bool = True,
        huge: bool = False,
        bool_neg: bool = False,
    ):
        """`bitwise`: int AND/OR/XOR; `shifts`: SHL/SHR by constants; `huge`: index constants past the int64
        range (index never wraps); `bool_neg`: NEG nodes of dtype bool (NEG of a bool is `not`, as in alu)."""
        self.rng, self.dt = rng, dt
        self.bitwise, self.shifts, self.huge, self.bool_neg = bitwise, shifts, huge, bool_neg
        prefix = "" if dt is dtypes.index else dt.name[0] + dt.name[-1]  # i2, u8, i8
        self.vars = list(_vars(dt, prefix).values())
        self.nonzero = _nonzero_vars(dt, prefix)
        if dt is dtypes.index:
            self.vars += [UOp.range(4, 0), UOp.range(1, 1), UOp.range(37, 2)]
        self.signed = dt not in dtypes.uints

    # ** leaves **

    def small(self, lo: int = -12, hi: int = 12) -> int:
        return self.rng.randint(lo, hi) if self.signed else self.rng.randint(0, hi)

    def const_value(self) -> int:
        r = self.rng.random()
        if r < 0.7:
            return self.small()
        if r < 0.85:
            return self.rng.choice([16, 32, 64, 100, 128, 1000, 255, 256, -100, -64, -1000])
        if self.dt is dtypes.index:
            if self.huge and self.rng.random() < 0.5:
                return self.rng.choice([2**62, 2**63, 2**64, -(2**64), 3 * 2**62, 10**20])
            return self.rng.choice([10**6, -(10**6), 2**31, 10**9 + 7, 2**40])
        lo, hi = dtypes.min(self.dt), dtypes.max(self.dt)
        return self.rng.choice([lo, hi, lo + 1, hi - 1, hi // 2 + 1, (hi + 1) // 3 + 1])

    def divisor(self) -> int:
        c = self.rng.choice([1, 2, 2, 3, 4, 4, 5, 6, 7, 8, 8, 16, 12, 32, 100])
        return -c if self.signed and self.rng.random() < 0.25 else c

    def const(self, v: int | None = None) -> UOp:
        return UOp.const(self.dt, self.const_value() if v is None else v)

    def leaf(self) -> UOp:
        r = self.rng.random()
        if r < 0.65:
            return self.rng.choice(self.vars)
        if r < 0.75:
            return self.rng.choice(self.nonzero)
        return self.const()

    def nonzero_divisor(self, depth: int) -> UOp:
        """A symbolic divisor whose range excludes zero (or, rarely, any expression: bindings on which it is
        zero are skipped)."""
        r = self.rng.random()
        y = self.rng.choice(self.nonzero)
        if r < 0.6:
            return y
        if r < 0.75:
            return y * self.divisor()
        if r < 0.85:
            return y + (self.rng.randint(0, 5) if y.vmin > 0 else -self.rng.randint(0, 5))
        return self.int_(max(depth - 1, 0))

    # ** integer nodes **

    def int_(self, depth: int) -> UOp:
        rng = self.rng
        if depth <= 0 or rng.random() < 0.12:
            return self.leaf()
        d = depth - 1
        kinds = [
            "add", "add", "sub", "rawsub", "mulc", "mulc", "mul", "neg", "rawneg",
            "divc", "divc", "modc", "modc", "divy", "mody", "lin_div", "lin_div", "lin_mod", "lin_mod",
            "lin_divy", "lin_mody", "gcd_div", "gcd_mod", "recombine", "nested_div", "nested_mod",
            "max", "min", "where", "where", "cast",
        ]  # fmt: skip
        if self.bitwise:
            kinds += ["and", "or", "xor"]
        if self.shifts:
            kinds += ["shl", "shr"]
        kind = rng.choice(kinds)
        a = self.int_(d)
        if kind == "add":
            return a + self.int_(d)
        if kind == "sub":
            return a - self.int_(d)
        if kind == "rawsub":
            return UOp(Ops.SUB, self.dt, (a, self.int_(d)))
        if kind == "mulc":
            return a * self.const_value()
        if kind == "mul":
            return a * self.int_(max(d - 1, 0))
        if kind == "neg":
            return -a
        if kind == "rawneg":
            return UOp(Ops.NEG, self.dt, (a,))
        if kind == "divc":
            return a // self.divisor()
        if kind == "modc":
            return a % self.divisor()
        if kind == "divy":
            return a // self.nonzero_divisor(d)
        if kind == "mody":
            return a % self.nonzero_divisor(d)
        if kind in ("lin_div", "lin_mod"):  # (a*c + b) // c, (a*c + b) % c
            c = self.divisor()
            e = a * c + self.int_(max(d - 1, 0))
            return e // c if kind == "lin_div" else e % c
        if kind in ("lin_divy", "lin_mody"):  # (a*y + b) // y, (a*y + b) % y
            y = rng.choice(self.nonzero)
            e = (a * y if rng.random() < 0.5 else y * a) + self.int_(max(d - 1, 0))
            return e // y if kind == "lin_divy" else e % y
        if kind in ("gcd_div", "gcd_mod"):  # (a*g*k1 + b*g*k2 + g*k3) // (c*g)
            g, c = rng.choice([2, 3, 4]), self.divisor()
            e = a * (g * self.small(-3, 3)) + self.int_(max(d - 1, 0)) * (g * self.small(1, 4)) + g * self.small()
            return e // (c * g) if kind == "gcd_div" else e % (c * g)
        if kind == "recombine":  # (a//c)*c*k + (a%c)*k
            c, k = abs(self.divisor()), rng.choice([1, 1, 2, 3, -1])
            return (a // c) * (c * k) + (a % c) * k if rng.random() < 0.5 else (a % c) * k + (a // c) * c * k
        if kind == "nested_div":
            return a // self.divisor() // self.divisor()
        if kind == "nested_mod":
            b = self.divisor()
            return a % (b * rng.choice([1, 2, 3, 4, -2])) % b
        if kind == "max":
            return a.maximum(self.int_(d))
        if kind == "min":
            return a.minimum(self.int_(d))
        if kind == "where":
            return self.bool_(d).where(a, self.int_(d) if rng.random() < 0.8 else self.const())
        if kind == "cast":
            return self.bool_(d).cast(self.dt)
        if kind == "and":
            return a & (self.int_(d) if rng.random() < 0.5 else self.const(rng.choice([1, 3, 7, 15, 255])))
        if kind == "or":
            return a | self.int_(d)
        if kind == "xor":
            return a ^ self.int_(d)
        if kind == "shl":
            return a << rng.randint(0, 4)
        if kind == "shr":
            return a >> rng.randint(0, 4)
        raise AssertionError(kind)

    # ** bool nodes **

    def compare(self, a: UOp, b: UOp) -> UOp:
        kind = self.rng.choice(["lt", "gt", "le", "ge", "ne", "eq"])
        return {"lt": a.lt, "gt": a.__gt__, "le": a.__le__, "ge": a.__ge__, "ne": a.ne, "eq": a.eq}[kind](b)

    def bool_(self, depth: int) -> UOp:
        rng = self.rng
        if depth <= 0:
            return (
                self.compare(self.leaf(), self.const())
                if rng.random() < 0.9
                else UOp.const(dtypes.bool, rng.random() < 0.5)
            )
        d = depth - 1
        kind = rng.choice(
            ["cmp", "cmp", "cmpc", "cmpc", "cmp_lin", "cmp_lin", "const_lt", "not", "and", "or", "xor",
             "where", "cast", "bcmp", "bmax", "bmin"] + (["bneg", "bneg"] if self.bool_neg else [])
        )  # fmt: skip
        if kind == "cmp":
            return self.compare(self.int_(d), self.int_(d))
        if kind == "cmpc":
            return self.compare(self.int_(d), self.const())
        if kind == "cmp_lin":  # x*g + y*2g + k (cmp) c, and two sums that differ by a constant
            g = rng.choice([2, 3, 4, -2, 6]) if self.signed else rng.choice([2, 3, 4])
            a = self.int_(max(d - 1, 0))
            if rng.random() < 0.7:
                return self.compare(a * g + self.small() + self.int_(max(d - 2, 0)) * (g * 2), self.const())
            b = self.int_(max(d - 1, 0))
            return self.compare(a + b * g + self.small(), b * g + a + self.small(-2, 2))
        if kind == "const_lt":
            return self.const().lt(self.int_(d) * rng.choice([1, 2, 3, 4]) + self.small())
        if kind == "not":
            return self.bool_(d).logical_not()
        if kind == "and":
            return self.bool_(d) & self.bool_(d)
        if kind == "or":
            return self.bool_(d) | self.bool_(d)
        if kind == "xor":
            return self.bool_(d) ^ self.bool_(d)
        if kind == "where":
            return self.bool_(d).where(self.bool_(d), self.bool_(d) if rng.random() < 0.7 else rng.random() < 0.5)
        if kind == "cast":
            return self.int_(d).cast(dtypes.bool)
        if kind == "bcmp":
            return self.compare(self.bool_(d), self.bool_(d))
        if kind == "bmax":
            return self.bool_(d).maximum(self.bool_(d))
        if kind == "bmin":
            return self.bool_(d).minimum(self.bool_(d))
        if kind == "bneg":
            return UOp(Ops.NEG, dtypes.bool, (self.bool_(d),))
        raise AssertionError(kind)

    def tree(self, max_depth: int = 6) -> UOp:
        depth = self.rng.randint(1, max_depth)
        return self.bool_(depth) if self.rng.random() < 0.3 else self.int_(depth)


# *** the checks ***


def legend(u: UOp) -> str:
    return ", ".join(
        f"{v.arg[0]}:{v.arg[1]}..{v.arg[2]}" if v.op is Ops.DEFINE_VAR else f"r{v.arg}:0..{v.src[0].arg - 1}"
        for v in variables(u)
    )


def _show(env: dict[UOp, int]) -> str:
    return "{" + ", ".join(f"{v.arg[0] if v.op is Ops.DEFINE_VAR else f'r{v.arg}'}={x}" for v, x in env.items()) + "}"


def check_tree(tree: UOp, rng: random.Random, n_random: int) -> tuple[int, list[str]]:
    """Check (a) and (b) on `tree`; returns the number of bindings checked and the failures found."""
    problems: list[str] = []
    head = f"tree {tree}  [{legend(tree)}]"
    try:
        simple = tree.simplify()
    except Exception as e:
        return 0, [f"{head}: simplify raised {type(e).__name__}: {e}"]
    if simple.dtype is not tree.dtype:
        problems.append(f"{head}: simplify changed the dtype {tree.dtype!r} -> {simple.dtype!r} ({simple})")
    checked = 0
    for env in bindings(tree, rng, n_random):
        try:
            before = evaluate(tree, env)
        except Undefined:
            continue  # the original has no value here
        checked += 1
        # (b) interval soundness, every node of the original and of the simplified graph
        for n, v in before.items():
            if not n.vmin <= v <= n.vmax:
                problems.append(f"{head} at {_show(env)}: node {n} = {v} outside [{n.vmin}, {n.vmax}]")
                break
        # (a) the same value
        try:
            after = evaluate(simple, env)
        except Undefined as e:
            problems.append(f"{head} at {_show(env)}: simplified {simple} is undefined ({e}), the original is not")
            continue
        if after[simple] != before[tree] or type(after[simple]) is not type(before[tree]):
            problems.append(
                f"{head} at {_show(env)}: expected {before[tree]!r}, simplified {simple} gives {after[simple]!r}"
            )
        for n, v in after.items():
            if not n.vmin <= v <= n.vmax:
                problems.append(f"{head} at {_show(env)}: simplified node {n} = {v} outside [{n.vmin}, {n.vmax}]")
                break
        if len(problems) >= 3:
            break
    return checked, problems


def run_trees(dt: DType, seed: int, n_trees: int, n_random: int, max_depth: int = 6, **gen_options: bool) -> None:
    rng = random.Random(seed)
    gen = TreeGen(rng, dt, **gen_options)
    failures: list[str] = []
    checked_trees = checked_bindings = 0
    for _ in range(n_trees):
        tree = gen.tree(max_depth)
        n, problems = check_tree(tree, rng, n_random)
        failures += problems
        checked_trees += n > 0
        checked_bindings += n
    assert not failures, f"{len(failures)} failure(s) in {n_trees} trees; the first:\n" + "\n".join(failures[:8])
    # the generator must exercise the trees, not skip them all for division by zero
    assert checked_trees >= 0.9 * n_trees, (checked_trees, n_trees)
    assert checked_bindings >= 8 * checked_trees


INDEX_CHUNKS, INDEX_TREES = 12, 250  # 3000 index trees
INT32_CHUNKS, INT32_TREES = 4, 250  # 1000 int32 trees


@pytest.mark.parametrize("chunk", range(INDEX_CHUNKS))
def test_random_index_trees(chunk: int):
    run_trees(dtypes.index, seed=1000 + chunk, n_trees=INDEX_TREES, n_random=12)


@pytest.mark.parametrize("chunk", range(INT32_CHUNKS))
def test_random_int32_trees(chunk: int):
    run_trees(dtypes.int32, seed=2000 + chunk, n_trees=INT32_TREES, n_random=12)


@pytest.mark.parametrize("dt", [dtypes.int8, dtypes.uint8, dtypes.uint32, dtypes.int64], ids=lambda dt: dt.name)
def test_random_other_int_trees(dt: DType):
    run_trees(dt, seed=3000 + dt.priority, n_trees=150, n_random=10)


def test_random_index_trees_beyond_int64():
    """`index` is unbounded: values past the int64 range must stay inside [vmin, vmax] too."""
    run_trees(dtypes.index, seed=4000, n_trees=300, n_random=12, huge=True)


def test_random_trees_with_bool_neg():
    """NEG of a bool is `not` (see alu.python_alu); its range and the folds that use it must agree."""
    run_trees(dtypes.index, seed=5000, n_trees=200, n_random=12, bool_neg=True)


# *** the evaluator itself ***


def test_evaluator_reference_values():
    x = UOp.variable("x", -10, 10, dtypes.int32)
    b = UOp.variable("b", 0, 255, dtypes.uint8)
    i = UOp.variable("i", -(10**30), 10**30)
    assert evaluate(x // 2, {x: -7})[x // 2] == -4
    assert evaluate(x % 2, {x: -7})[x % 2] == 1
    assert evaluate(x % -3, {x: 7})[x % -3] == -2
    big = x * (2**30)
    assert evaluate(big, {x: 2})[big] == -(2**31)  # wraps
    assert evaluate(b + 10, {b: 250})[b + 10] == 4
    assert evaluate(i * i, {i: 10**20})[i * i] == 10**40  # index never wraps
    e = (x < 3).where(x, x * 2)
    assert evaluate(e, {x: 5})[e] == 10
    assert evaluate((x < 3).cast(dtypes.int32), {x: 1})[(x < 3).cast(dtypes.int32)] == 1
    nb = UOp(Ops.NEG, dtypes.bool, (x < 3,))
    assert evaluate(nb, {x: 1})[nb] is False and evaluate(nb, {x: 5})[nb] is True
    with pytest.raises(Undefined):
        evaluate(x // (x - x), {x: 1})


# *** targeted tests with brute-forced answers ***

X = UOp.variable("x", 0, 100)
Y = UOp.variable("y", 0, 3)
Z = UOp.variable("z", -5, 5)


def brute(e: UOp) -> list[Any]:
    """The value of `e` on every binding of its variables."""
    vs = variables(e)
    return [
        evaluate(e, dict(zip(vs, c)))[e] for c in itertools.product(*[range(lo, hi + 1) for lo, hi in map(bounds, vs)])
    ]


def assert_same_everywhere(e: UOp, s: UOp) -> None:
    """`e` and `s` agree, and every node of both lies in its range, on every binding where `e` is defined."""
    vs = sorted(set(variables(e)) | set(variables(s)), key=lambda n: n.order_key)
    for c in itertools.product(*[range(lo, hi + 1) for lo, hi in map(bounds, vs)]):
        env = dict(zip(vs, c))
        try:
            before = evaluate(e, env)
        except Undefined:
            continue
        after = evaluate(s, env)
        assert before[e] == after[s], f"{e} is {before[e]} at {_show(env)}, but its simplified form {s} is {after[s]}"
        for n, v in (before | after).items():
            assert n.vmin <= v <= n.vmax, f"{n} = {v} at {_show(env)}, outside its range [{n.vmin}, {n.vmax}]"


@pytest.mark.parametrize(
    "build, expected",
    [
        (lambda: (X * 4 + Y) // 4, lambda: X),
        (lambda: (X * 4 + Y) % 4, lambda: Y),
        (lambda: (Y + X * 4) // 4, lambda: X),
        (lambda: X * 2 + X * 3, lambda: X * 5),
        (lambda: (X // 4) * 4 + X % 4, lambda: X),
        (lambda: X % 4 + (X // 4) * 4, lambda: X),
        (lambda: X // 2 // 3, lambda: X // 6),
        (lambda: X % 12 % 4, lambda: X % 4),
        (lambda: (X * 6 + 4) // 2, lambda: X * 3 + 2),
        (lambda: X + 0, lambda: X),
        (lambda: X * 1, lambda: X),
        (lambda: X - X, lambda: UOp.const(dtypes.index, 0)),
        (lambda: Y // 4, lambda: UOp.const(dtypes.index, 0)),
        (lambda: Y % 4, lambda: Y),
        (lambda: X.maximum(Y - 5), lambda: X),
    ],
)
def test_known_simplifications(build, expected):
    e, want = build(), expected()
    s = e.simplify()
    assert s is want, f"{e} simplified to {s}, expected {want}"
    assert_same_everywhere(e, s)


@pytest.mark.parametrize(
    "build",
    [
        lambda: X.lt(101),
        lambda: X.lt(0),
        lambda: X >= 0,
        lambda: X > 100,
        lambda: X <= 100,
        lambda: Y.ne(7),
        lambda: X.eq(-1),
        lambda: (X + Y).lt(104),
        lambda: (X * 2).lt(0),
        lambda: (X * 4 + Y).lt(404),
        lambda: (X % 4).lt(4),
        lambda: (X // 4).lt(26),
        lambda: (X // 4) > 25,
        lambda: (Z - 1).lt(Z),
        lambda: X.lt(X + 1),
        lambda: (X * 2 + 1).ne(X * 2),
        lambda: (X * 2).eq(7),
        lambda: (X * 2 + 1).eq(4),
        lambda: (Z % 3) >= 0,
        lambda: (Z // 6) >= -1,
        lambda: X.maximum(Y).lt(101),
        lambda: (Y < 2).where(X, X + 200).lt(301),
    ],
)
def test_range_decided_comparisons_fold(build):
    e = build()
    values = set(brute(e))
    assert len(values) == 1, f"{e} is not constant: the test is wrong"
    (want,) = values
    s = e.simplify()
    assert s.op is Ops.CONST and s.dtype is dtypes.bool and s.arg is want, f"{e} simplified to {s}, expected {want}"


@pytest.mark.parametrize(
    "build",
    [
        lambda: X // 4,
        lambda: X % 4,
        lambda: X * 3 - 7,
        lambda: Z // 2,
        lambda: Z % 3,
        lambda: Z % -3,
        lambda: Z // -2,
        lambda: Z * -4 + X,
        lambda: X.maximum(Z * 30),
        lambda: (X + 3) % 4,
        lambda: (X * 4 + Y) // 4,
        lambda: (Z + 5) // 5,
        lambda: Y & 1,
        lambda: Y << 2,
        lambda: X >> 3,
    ],
)
def test_ranges_of_simple_expressions_are_exact(build):
    e = build()
    values = brute(e)
    assert (e.vmin, e.vmax) == (min(values), max(values)), str(e)
    assert_same_everywhere(e, e.simplify())


def test_symbolic_divisor_folding():
    p = UOp.variable("p", 1, 8)
    q = UOp.variable("q", -8, -1)
    for y in (p, q):
        for e in ((X * y + Y) // y, (X * y + Y) % y, (y * X + Z) // y, (Z + y * 3) % y, y // y, y % y):
            assert_same_everywhere(e, e.simplify())
    assert ((X * p) // p).simplify() is X
    assert ((X * p + Y * p) % p).simplify() is UOp.const(dtypes.index, 0)
    assert (p // p).simplify() is UOp.const(dtypes.index, 1)


def test_bool_neg_range_is_sound():
    """NEG of a bool is `not` (alu: `not a`); its range must be [not vmax, not vmin], never (True, False)."""
    b = X.lt(Y)
    n = UOp(Ops.NEG, dtypes.bool, (b,))
    assert evaluate(n, {X: 1, Y: 0})[n] is True and evaluate(n, {X: 0, Y: 1})[n] is False
    assert (n.vmin, n.vmax) == (False, True), f"NEG({b}) has the range [{n.vmin}, {n.vmax}]"
    e = n.ne(True)  # not not (x < y), which is x < y
    assert_same_everywhere(e, e.simplify())


def test_index_ranges_past_int64_are_sound():
    """`index` never wraps, so a range that is not known must not be cut to the int64 bounds."""
    v = UOp.variable("v", -1, 1)
    e = UOp.const(dtypes.index, 2**63) // v  # 2**63 at v=1, -(2**63) at v=-1
    assert evaluate(e, {v: 1})[e] == 2**63
    assert e.vmin <= -(2**63) and e.vmax >= 2**63, f"{e} has the range [{e.vmin}, {e.vmax}]"
    c = e.lt(2**63)  # False at v=1
    assert_same_everywhere(c, c.simplify())
    z = UOp.variable("z", -5, 5)
    a = (z * 2**64) & z  # -5 * 2**64 at z=-5
    assert_same_everywhere(a.lt(-(2**63)), a.lt(-(2**63)).simplify())


# *** the operators build graphs that mean what they say ***

_INT_OPERATORS: dict[str, tuple[Callable[[UOp, UOp], UOp], Callable[[int, int], Any]]] = {
    "a+b": (lambda a, b: a + b, lambda x, y: x + y),
    "a-b": (lambda a, b: a - b, lambda x, y: x - y),
    "a*b": (lambda a, b: a * b, lambda x, y: x * y),
    "-a": (lambda a, b: -a, lambda x, y: -x),
    "a//b": (lambda a, b: a // b, lambda x, y: x // y),
    "a%b": (lambda a, b: a % b, lambda x, y: x % y),
    "max": (lambda a, b: a.maximum(b), max),
    "min": (lambda a, b: a.minimum(b), min),
    "a<b": (lambda a, b: a < b, lambda x, y: x < y),
    "a>b": (lambda a, b: a > b, lambda x, y: x > y),
    "a<=b": (lambda a, b: a <= b, lambda x, y: x <= y),
    "a>=b": (lambda a, b: a >= b, lambda x, y: x >= y),
    "a!=b": (lambda a, b: a.ne(b), lambda x, y: x != y),
    "a==b": (lambda a, b: a.eq(b), lambda x, y: x == y),
    "a&b": (lambda a, b: a & b, lambda x, y: x & y),
    "a|b": (lambda a, b: a | b, lambda x, y: x | y),
    "a^b": (lambda a, b: a ^ b, lambda x, y: x ^ y),
}


@pytest.mark.parametrize(
    "dt",
    [dtypes.index, dtypes.int8, dtypes.uint8, dtypes.int32, dtypes.uint32, dtypes.int64],
    ids=lambda dt: dt.name,
)
def test_operators_mean_what_they_say(dt: DType):
    """`a.minimum(b)` is min(a, b), `a - b` is a - b wrapped to the dtype, and so on: the graphs the operators
    build (and their simplified forms) have the values of the Python operators, at the edges of the dtype."""
    if dt is dtypes.index:
        lo, hi = -(10**20), 10**20
        values = [lo, -7, -1, 0, 1, 2, 7, hi]
    else:
        lo, hi = int(dtypes.min(dt)), int(dtypes.max(dt))
        values = sorted(v for v in {lo, lo + 1, -7, -1, 0, 1, 2, 7, hi - 1, hi} if lo <= v <= hi)
    a, b = UOp.variable("a", lo, hi, dt), UOp.variable("b", lo, hi, dt)
    for name, (build, py) in _INT_OPERATORS.items():
        e = build(a, b)
        s = e.simplify()
        for x, y in itertools.product(values, values):
            if name in ("a//b", "a%b") and y == 0:
                continue
            want = py(x, y)
            want = want if isinstance(want, bool) else wrap(want, dt)
            env = {a: x, b: y}
            got, got_simple = evaluate(e, env)[e], evaluate(s, env)[s]
            assert got == want and got_simple == want, f"{name} of {dt!r} at a={x}, b={y}: {want}, got {got} ({e})"


def test_bool_operators_mean_what_they_say():
    p, q = UOp.variable("p", 0, 1), UOp.variable("q", 0, 1)
    a, b = p.eq(1), q.eq(1)
    bool_ops: dict[str, tuple[UOp, Callable[[bool, bool], bool]]] = {
        "max": (a.maximum(b), lambda x, y: x or y),
        "min": (a.minimum(b), lambda x, y: x and y),
        "-a": (-a, lambda x, y: not x),
        "not a": (a.logical_not(), lambda x, y: not x),
        "a&b": (a & b, lambda x, y: x and y),
        "a|b": (a | b, lambda x, y: x or y),
        "a^b": (a ^ b, lambda x, y: x != y),
        "a<b": (a < b, lambda x, y: x < y),
        "a>b": (a > b, lambda x, y: x > y),
        "a<=b": (a <= b, lambda x, y: x <= y),
        "a>=b": (a >= b, lambda x, y: x >= y),
        "a!=b": (a.ne(b), lambda x, y: x != y),
        "a==b": (a.eq(b), lambda x, y: x == y),
        "where": (a.where(b, a), lambda x, y: y if x else x),
    }
    for name, (e, py) in bool_ops.items():
        assert e.dtype is dtypes.bool, name
        s = e.simplify()
        for x, y in itertools.product((0, 1), (0, 1)):
            env = {p: x, q: y}
            want = py(bool(x), bool(y))
            got, got_simple = evaluate(e, env)[e], evaluate(s, env)[s]
            assert got is want and got_simple is want, f"{name} at a={bool(x)}, b={bool(y)}: {want}, got {got} ({e})"


@pytest.mark.parametrize("dt", [dtypes.int8, dtypes.int32, dtypes.int64], ids=lambda dt: dt.name)
def test_signed_minimum_at_the_smallest_value(dt: DType):
    """min(a, b) must not be built as -max(-a, -b) for fixed-width signed ints: -INT_MIN wraps to INT_MIN."""
    lo = int(dtypes.min(dt))
    for x, y in ((lo, 0), (lo, lo + 1), (lo + 1, lo), (lo, lo)):
        e = UOp.const(dt, x).minimum(UOp.const(dt, y))
        assert evaluate(e, {})[e] == min(x, y), f"min({x}, {y}) of {dt!r} is built as {e}"
        s = e.simplify()
        assert s.op is Ops.CONST and s.arg == min(x, y), f"min({x}, {y}) of {dt!r} simplifies to {s}"
