"""The UOp node: hash-consing, construction errors, graph operations, symbolic operators, value ranges."""

from __future__ import annotations

import itertools
import pickle
import sys

import pytest

from zeptograd.dtype import dtypes
from zeptograd.helpers import Context
from zeptograd.uop import GroupOp, Ops, UOp, smax, smin
from zeptograd.uop.spec import SpecError


def idx(v: int) -> UOp:
    return UOp.const(dtypes.index, v)


def test_hash_consing():
    a = UOp(Ops.ADD, dtypes.index, (idx(1), idx(2)))
    assert a is UOp(Ops.ADD, dtypes.index, (idx(1), idx(2)))
    assert a is not UOp(Ops.ADD, dtypes.index, (idx(2), idx(1)))
    assert UOp.variable("x", 0, 3) is UOp.variable("x", 0, 3)
    assert UOp.variable("x", 0, 3) is not UOp.variable("x", 0, 4)
    # constants of different dtypes, and 0.0 / -0.0, are different nodes
    assert UOp.const(dtypes.int32, 1) is not UOp.const(dtypes.index, 1)
    assert UOp.const(dtypes.float32, 0.0) is not UOp.const(dtypes.float32, -0.0)
    assert UOp.const(dtypes.float32, float("nan")) is UOp.const(dtypes.float32, float("nan"))
    # 1 == 1.0 == True in Python, but as args they differ (a float32 CONST holding an int is a spec error)
    one = UOp.const(dtypes.float32, 1.0)
    with Context(SPEC=0):  # a float32 CONST holding an int is illegal: built here only to check the key
        assert UOp(Ops.CONST, dtypes.float32, (), 1) is not one and UOp(Ops.CONST, dtypes.float32, (), 1).arg == 1
        assert type(UOp(Ops.CONST, dtypes.float32, (), True).arg) is bool
    assert pickle.loads(pickle.dumps(a)) is a


def test_immutable():
    a = idx(1)
    with pytest.raises(AttributeError, match="immutable"):
        a.arg = 2
    with pytest.raises(AttributeError, match="immutable"):
        a.op = Ops.ADD


def test_bad_construction_is_a_clear_error():
    with pytest.raises(TypeError, match="unknown op 'ADD'"):
        UOp("ADD", dtypes.index)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"src\[1\] must be a UOp, got int"):
        UOp(Ops.ADD, dtypes.index, (idx(1), 2))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="src must be a tuple"):
        UOp(Ops.SINK, dtypes.void, idx(1))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="dtype must be a DType"):
        UOp(Ops.CONST, "float32", (), 1.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"Ops.ADD\) takes 2 source"):
        UOp(Ops.ADD, dtypes.index, (idx(1),))
    with pytest.raises(TypeError, match="arg must be hashable"):
        UOp(Ops.CONST, dtypes.index, (), [1])
    with pytest.raises(TypeError, match="ADD of dtypes.index and dtypes.int32"):
        UOp.variable("x", 0, 3) + UOp.const(dtypes.int32, 1)
    with pytest.raises(TypeError, match="float 1.5 is not a constant of the integer dtype"):
        UOp.variable("x", 0, 3) + 1.5
    with pytest.raises(ValueError, match="min 4 is greater than max 3"):
        UOp.variable("x", 4, 3)
    with pytest.raises(TypeError, match="bounds must be ints"):
        UOp.variable("x", 0, 3.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="unknown field"):
        idx(1).replace(ops=Ops.ADD)
    with pytest.raises(TypeError, match="two Python values"):
        UOp.const(dtypes.bool, True).where(1, 2)


def test_src_list_is_accepted_as_tuple():
    assert UOp(Ops.SINK, dtypes.void, [idx(1)]).src == (idx(1),)  # type: ignore[arg-type]


def test_toposort_order_and_sharing():
    x = UOp.variable("x", 0, 3)
    a = x + 1
    b = a * a
    order = b.toposort()
    assert order[-1] is b
    assert len(order) == len({id(u) for u in order}) == 4  # x, 1, x+1, (x+1)*(x+1)
    pos = {u: i for i, u in enumerate(order)}
    assert all(pos[s] < pos[u] for u in order for s in u.src)


def test_toposort_deep_chain_has_no_recursion_limit():
    x = UOp.variable("x", 0, 3)
    node = x
    depth = 100_000
    for _ in range(depth):
        node = UOp(Ops.NEG, dtypes.index, (node,))
    assert depth > sys.getrecursionlimit()
    order = node.toposort()
    assert len(order) == depth + 1 and order[0] is x and order[-1] is node
    assert (node.vmin, node.vmax) == (0, 3)  # ranges are computed iteratively too (an even number of NEGs)


def test_toposort_gate():
    x, y = UOp.variable("x", 0, 3), UOp.variable("y", 0, 3)
    e = (x + y) * 2
    assert x not in set(e.toposort(gate=lambda u: u is not x))


def test_replace_and_substitute():
    x, y, z = UOp.variable("x", 0, 3), UOp.variable("y", 0, 3), UOp.variable("z", 0, 9)
    e = (x + y) * x
    assert e.replace(op=Ops.ADD) is UOp(Ops.ADD, dtypes.index, e.src)
    assert e.substitute({x: z}) is (z + y) * z
    assert e.substitute({x + y: z}) is z * x
    assert e.substitute({e: x}) is x
    assert e.substitute({}) is e


def test_operators_build_the_documented_ops():
    x, y = UOp.variable("x", 0, 3), UOp.variable("y", 1, 3)
    assert (x + y).op is Ops.ADD and (x * y).op is Ops.MUL and (x // y).op is Ops.IDIV and (x % y).op is Ops.MOD
    assert (x - y) is x + y * -1 and (-x) is x * -1 and (3 - x) is UOp.const(dtypes.index, 3) + x * -1
    assert (x < y).op is Ops.CMPLT and (x < y).dtype is dtypes.bool
    assert (x > y) is (y < x)
    assert (x == y).op is Ops.CMPEQ and (x != y).op is Ops.CMPNE
    assert (x <= y) is (y < x).ne(True) and (x >= y) is (x < y).ne(True)
    assert (x & y).op is Ops.AND and (x | y).op is Ops.OR and (x ^ y).op is Ops.XOR
    assert (x << y).op is Ops.SHL and (x >> y).op is Ops.SHR
    assert x.maximum(y).op is Ops.MAX and x.minimum(y) is -((-x).maximum(-y))
    assert (x < y).where(x, 0) is UOp(Ops.WHERE, dtypes.index, (x < y, x, UOp.const(dtypes.index, 0)))
    assert (2 + x).src[0].arg == 2 and (2 * x).op is Ops.MUL and (7 // x).src[0].arg == 7 and (7 % x).op is Ops.MOD
    b = UOp.variable("b", 0, 1, dtypes.int32).cast(dtypes.bool)
    assert (-b) is b.ne(True)


def test_python_int_semantics_of_floor_ops():
    # the IR's // and % are floor division and modulo, as in Python (brute force over small ints)
    for a, b in itertools.product(range(-9, 10), [d for d in range(-4, 5) if d != 0]):
        assert (UOp.const(dtypes.index, a) // b).simplify().arg == a // b
        assert (UOp.const(dtypes.index, a) % b).simplify().arg == a % b
        assert (UOp.const(dtypes.int32, a) // b).simplify().arg == a // b


def test_bool_of_uop():
    x = UOp.variable("x", 0, 10)
    assert bool(x + 1 == 1 + x)
    assert not bool(x < 0)
    assert bool(x < 11)
    with pytest.raises(TypeError, match="truth value"):
        bool(x < 5)
    with pytest.raises(TypeError, match="truth value"):
        if x == UOp.variable("y", 0, 10):
            pass


def brute_range(expr: UOp, variables: list[UOp]) -> tuple[int, int]:
    values = []
    for binding in itertools.product(*(range(v.arg[1], v.arg[2] + 1) for v in variables)):
        subst = {v: UOp.const(v.dtype, b) for v, b in zip(variables, binding)}
        values.append(expr.substitute(subst).simplify().arg)
    return min(values), max(values)


@pytest.mark.parametrize(
    "make",
    [
        lambda x, y: x + y,
        lambda x, y: x * y,
        lambda x, y: x * -3 + y,
        lambda x, y: x // 3,
        lambda x, y: x // -3,
        lambda x, y: (x + 7) % 5,
        lambda x, y: x % -4,
        lambda x, y: x // y,
        lambda x, y: x.maximum(y * 2),
        lambda x, y: x.minimum(y),
        lambda x, y: (x < 2).where(y, x * 2),
        lambda x, y: x & 6,
        lambda x, y: x << 2,
    ],
)
def test_value_ranges_are_sound_and_tight_enough(make):
    x, y = UOp.variable("x", -4, 6), UOp.variable("y", 1, 3)
    e = make(x, y)
    lo, hi = brute_range(e, [x, y])
    assert e.vmin <= lo and hi <= e.vmax
    if e.op in (Ops.ADD, Ops.MUL, Ops.IDIV, Ops.MAX, Ops.SHL):
        assert (e.vmin, e.vmax) == (lo, hi)  # interval arithmetic is exact on a single op of independent vars


def test_value_ranges_of_special_nodes():
    r = UOp.range(10, 0)
    assert (r.vmin, r.vmax) == (0, 9)
    assert ((r < 10).vmin, (r < 10).vmax) == (True, True)
    assert (UOp.const(dtypes.float32, 2.5).vmin, UOp.const(dtypes.float32, 2.5).vmax) == (2.5, 2.5)
    f = UOp(Ops.DEFINE_VAR, dtypes.int8, (), ("f", -128, 127))
    assert ((f + 1).vmin, (f + 1).vmax) == (-128, 127)  # may wrap: the whole range
    small = UOp.variable("s", 0, 100, dtypes.int8)
    assert ((small + 1).vmin, (small + 1).vmax) == (1, 101)
    assert (small.cast(dtypes.bool).vmin, small.cast(dtypes.bool).vmax) == (False, True)


def test_smax_smin():
    x = UOp.variable("x", 0, 3)
    assert smax(1, 5, 3) == 5 and smin([4, 2]) == 2
    assert smax(x, 2) is x.maximum(2) and smin(x, 2) is x.minimum(2)


def test_groupops():
    assert Ops.ADD in GroupOp.Commutative and Ops.IDIV not in GroupOp.Commutative
    assert GroupOp.ALU == GroupOp.Unary | GroupOp.Binary | GroupOp.Ternary
    assert GroupOp.Movement == {Ops.RESHAPE, Ops.PERMUTE, Ops.EXPAND, Ops.PAD, Ops.SHRINK, Ops.FLIP}
    assert not hasattr(Ops, "ASSIGN")


def test_store_forms():
    buf = UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(4), (), 0)
    v = UOp.const(dtypes.float32, 1.0)
    write = buf.index(idx(0)).store(v)
    assert write.op is Ops.STORE and write.dtype is dtypes.void
    reg = UOp(Ops.DEFINE_REG, dtypes.float32.ptr(1, __import__("zeptograd").AddrSpace.REG), (), 0)
    assert reg.store(v).dtype is reg.dtype
    with pytest.raises(ValueError, match="cannot STORE to a CONST"):
        v.store(v)


def test_comparisons_and_minimum_by_dtype():
    # brute force over constant operands: the built graph, folded, agrees with Python
    floats = [0.0, -1.5, 2.0, float("nan"), float("inf")]
    for a in floats:
        for b in floats:
            ua, ub = UOp.const(dtypes.float32, a), UOp.const(dtypes.float32, b)
            assert (ua <= ub).simplify().arg == (a <= b), (a, b)
            assert (ua >= ub).simplify().arg == (a >= b), (a, b)
    for a in range(0, 256, 15):
        for b in range(0, 256, 17):
            ua, ub = UOp.const(dtypes.uint8, a), UOp.const(dtypes.uint8, b)
            assert ua.minimum(ub).simplify().arg == min(a, b), (a, b)
            assert (ua <= ub).simplify().arg == (a <= b)
    for a in range(-20, 20, 3):
        for b in range(-20, 20, 7):
            ua, ub = UOp.const(dtypes.int8, a), UOp.const(dtypes.int8, b)
            assert ua.minimum(ub).simplify().arg == min(a, b) and ua.maximum(ub).simplify().arg == max(a, b)
    t, f = UOp.const(dtypes.bool, True), UOp.const(dtypes.bool, False)
    assert t.minimum(f).simplify().arg is False and t.maximum(f).simplify().arg is True


def test_spec_on_build_catches_a_malformed_node_where_it_is_made():
    x = UOp.variable("x", 0, 3)
    f = UOp.const(dtypes.float32, 1.0)
    with Context(SPEC=1), pytest.raises(SpecError, match="ADD of mixed dtypes"):
        UOp(Ops.ADD, dtypes.index, (x, f))
    with Context(SPEC=1), pytest.raises(SpecError, match="a STORE target must be an INDEX"):
        UOp(Ops.STORE, dtypes.index, (x + 1, x))
    with Context(SPEC=0):
        assert UOp(Ops.ADD, dtypes.index, (x, f)).op is Ops.ADD  # off: built, for the stage specs to judge
