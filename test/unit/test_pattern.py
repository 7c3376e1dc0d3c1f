"""UPat and PatternMatcher: matching, captures, permutations, indexing by op, and bad rules."""

from __future__ import annotations

import pytest

from zeptograd.dtype import dtypes
from zeptograd.uop import Ops, PatternMatcher, UOp, UPat

x = UOp.variable("x", 0, 9)
y = UOp.variable("y", 0, 9)


def matches(pat: UPat, u: UOp) -> list[dict[str, UOp]]:
    return pat.match(u, {})


def test_op_dtype_arg_and_name():
    assert matches(UPat(Ops.ADD), x + y)
    assert not matches(UPat(Ops.MUL), x + y)
    assert matches(UPat((Ops.MUL, Ops.ADD)), x + y)
    assert matches(UPat(dtype=dtypes.index), x) and not matches(UPat(dtype=dtypes.int32), x)
    assert matches(UPat(dtype=dtypes.float32), UOp.const(dtypes.float32.vec(4), 1.0))  # a vector of float matches
    assert matches(UPat.const(None, 3), UOp.const(dtypes.index, 3))
    assert matches(UPat.const(None, 3), UOp.const(dtypes.float32, 3.0))
    assert not matches(UPat.const(None, 1), UOp.const(dtypes.bool, True))  # True is not the number 1 here
    assert not matches(UPat.const(dtypes.int32, 3), UOp.const(dtypes.index, 3))
    assert matches(UPat.var("v"), x) == [{"v": x}]


def test_ordered_and_permuted_sources():
    e = x * 3
    ordered = UPat(Ops.MUL, src=(UPat.var("a"), UPat.cvar("c")))
    assert matches(ordered, e) == [{"a": x, "c": UOp.const(dtypes.index, 3)}]
    swapped = UOp(Ops.MUL, dtypes.index, (UOp.const(dtypes.index, 3), x))
    assert not matches(ordered, swapped)
    permuted = UPat(Ops.MUL, src=[UPat.var("a"), UPat.cvar("c")])
    assert matches(permuted, swapped) == [{"a": x, "c": UOp.const(dtypes.index, 3)}]
    # a list tries every ordering: both bindings of a*b are found
    both = matches(UPat(Ops.MUL, src=[UPat.var("a"), UPat.var("b")]), x * y)
    assert {(d["a"], d["b"]) for d in both} == {(x, y), (y, x)}


def test_same_name_must_bind_the_same_node():
    double = UPat.var("a") + UPat.var("a")
    assert matches(double, x + x) and not matches(double, x + y)


def test_each_src_and_any_len():
    all_consts = UPat(Ops.SINK, src=UPat(Ops.CONST))
    c1, c2 = UOp.const(dtypes.index, 1), UOp.const(dtypes.index, 2)
    assert matches(all_consts, UOp(Ops.SINK, dtypes.void, (c1, c2)))
    assert not matches(all_consts, UOp(Ops.SINK, dtypes.void, (c1, x)))
    prefix = UPat(Ops.SINK, src=(UPat(Ops.CONST, name="first"),), allow_any_len=True)
    assert matches(prefix, UOp(Ops.SINK, dtypes.void, (c1, x, y))) == [{"first": c1}]
    assert not matches(UPat(Ops.SINK, src=(UPat(Ops.CONST),)), UOp(Ops.SINK, dtypes.void, (c1, x)))


def test_arithmetic_on_upats_reads_like_the_algebra():
    pat = UPat.var("x") * 2 + 1
    assert matches(pat, x * 2 + 1)
    assert matches(pat, UOp(Ops.ADD, dtypes.index, (UOp.const(dtypes.index, 1), x * 2)))  # ADD is commutative
    assert matches(UPat.var("a") // 4, x // 4) and not matches(UPat.var("a") // 4, x % 4)
    assert matches(UPat.var("a") - UPat.var("b"), x - y)
    assert matches(UPat.var("a") < 3, x < 3) and matches(UPat.var("a").ne(True), (x < 3).ne(True))
    assert matches(UPat.var("c").where(UPat.var("a"), 0), (x < 3).where(y, 0))


def test_rule_functions_get_captures_and_ctx():
    seen = []

    def rule(a, c, ctx):
        seen.append(ctx)
        return a

    pm = PatternMatcher([(UPat(Ops.MUL, src=[UPat.var("a"), UPat.cvar("c")]), rule)])
    assert pm.rewrite(x * 5, ctx="context") is x
    assert seen == ["context"]
    assert pm.rewrite(x + 5) is None


def test_first_non_none_result_wins_and_indexing_by_op():
    calls = []
    pm = PatternMatcher(
        [
            (UPat(Ops.ADD, name="a"), lambda a: calls.append("add-none")),
            (UPat(Ops.MUL, name="m"), lambda m: calls.append("mul") or m),
            (UPat(Ops.ADD, name="a"), lambda a: a.src[0]),
        ]
    )
    assert pm.rewrite(x + y) is x
    assert calls == ["add-none"]  # the MUL rule is never tried on an ADD
    assert len(pm.by_op[Ops.ADD]) == 2 and len(pm.by_op[Ops.MUL]) == 1 and len(pm.by_op[Ops.CONST]) == 0


def test_matchers_compose_with_plus():
    a = PatternMatcher([(UPat.var("x") + 0, lambda x: x, "x+0")])
    b = PatternMatcher([(UPat.var("x") * 1, lambda x: x, "x*1")])
    both = a + b
    assert len(both) == 2 and both.rewrite(x + 0) is x and both.rewrite(x * 1) is x


def test_rule_names():
    def fold(x):
        return x

    pm = PatternMatcher(
        [(UPat.var("x") + 0, lambda x: x, "x+0 -> x"), (UPat.var("x") * 1, fold), (UPat.var("x") * 2, lambda x: x)]
    )
    names = [r.name for r in pm.rules]
    assert names[0] == "x+0 -> x"
    assert names[1].startswith("fold (test_pattern.py:")
    assert names[2].startswith("test_pattern.py:")


def test_malformed_patterns_are_clear_errors():
    with pytest.raises(TypeError, match="op must be Ops, got str"):
        UPat("ADD")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"src\[1\] must be a UPat, got int"):
        UPat(Ops.ADD, src=(UPat.var("x"), 0))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="dtype must be DType"):
        UPat(Ops.ADD, dtype="float32")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="identifier"):
        UPat.var("not a name")
    with pytest.raises(ValueError, match="'ctx'"):
        UPat.var("ctx")
    with pytest.raises(TypeError, match="src must be"):
        UPat(Ops.ADD, src=UOp.const(dtypes.index, 1))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="allow_any_len needs src given as a tuple"):
        UPat(Ops.ADD, src=[UPat()], allow_any_len=True)


def test_rule_signature_mismatch_is_caught_when_the_matcher_is_built():
    with pytest.raises(ValueError, match=r"takes \['y'\], which the pattern does not bind"):
        PatternMatcher([(UPat.var("x") + 0, lambda y: y)])
    with pytest.raises(ValueError, match=r"does not take \['c'\], which the pattern binds"):
        PatternMatcher([(UPat.var("x") * UPat.cvar("c"), lambda x: x)])
    with pytest.raises(ValueError, match="x\\+0 -> x"):
        PatternMatcher([(UPat.var("x") + 0, lambda z: z, "x+0 -> x")])
    with pytest.raises(TypeError, match="a rule is"):
        PatternMatcher([(UPat.var("x"),)])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="must be a UPat"):
        PatternMatcher([(Ops.ADD, lambda: None)])  # type: ignore[list-item]
    # defaults and **kwargs are fine
    PatternMatcher([(UPat.var("x") + 0, lambda x, unused=1: x), (UPat.var("x") * 1, lambda **kw: kw["x"])])
