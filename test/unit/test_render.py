"""Printing: the infix form evaluates like the graph, the listing names every node, pyrender round-trips."""

from __future__ import annotations

import math

import pytest

from zeptograd.dtype import AddrSpace, dtypes
from zeptograd.uop import PYRENDER_GLOBALS, Ops, UOp, pyrender, render_listing

x = UOp.variable("x", -5, 5)
y = UOp.variable("y", 1, 4)


@pytest.mark.parametrize(
    ("expr", "text"),
    [
        ((x * 4 + 3) // 4, "(x*4+3)//4"),
        (x - y, "x-y"),
        (x - 3, "x-3"),
        (-x, "-x"),
        (x - (x + y), "x-(x+y)"),
        (x // (y + 1), "x//(y+1)"),
        ((x < 3).ne(True), "(x<3)!=True"),
        ((x < 3) & (y < 2), "(x<3)&(y<2)"),
        (x.maximum(y), "max(x, y)"),
        ((x < 0).where(y, x), "where(x<0, y, x)"),
    ],
)
def test_infix_text_is_python_that_agrees_with_the_graph(expr: UOp, text: str):
    assert str(expr) == text
    # the text is Python: evaluated with Python's floor // and %, it matches the simplified graph
    for xv in range(-5, 6):
        for yv in range(1, 5):
            env = {"x": xv, "y": yv, "max": max, "where": lambda c, a, b: a if c else b}
            bound = expr.substitute({x: UOp.const(dtypes.index, xv), y: UOp.const(dtypes.index, yv)})
            assert eval(text, env) == bound.simplify().arg


def test_listing_has_one_line_per_node():
    e = (x * 4 + y) // 4
    lines = render_listing(e).splitlines()
    assert len(lines) == len(e.toposort())
    assert lines[-1].split()[1] == "IDIV" and "src=(" in lines[-1]
    assert "arg=('x', -5, 5)" in render_listing(e)


def test_repr_is_short():
    assert repr(x * 4) == "<MUL dtypes.index x*4>"
    long = x
    for _ in range(100):
        long = long + y
    assert len(repr(long)) < 120


def roundtrip(u: UOp) -> UOp:
    return eval(pyrender(u), dict(PYRENDER_GLOBALS))


def test_pyrender_round_trip_is_identity():
    ptr = UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(16), (), 0)
    reg = UOp(Ops.DEFINE_REG, dtypes.float32.ptr(4, AddrSpace.REG), (), 1)
    graphs = [
        (x * 4 + y) // 4,
        UOp.const(dtypes.float32, math.inf),
        UOp.const(dtypes.float32, -math.inf),
        UOp.const(dtypes.float32, math.nan),
        UOp.const(dtypes.float32, -0.0),
        UOp.const(dtypes.bool, True),
        UOp.const(dtypes.float32.vec(4), 1.5),
        ptr.index(UOp.range(16, 0)).store(ptr.index(UOp.range(16, 0)).load() * 2.0),
        reg.store(UOp.const(dtypes.float32, 0.0)),
        UOp(Ops.REDUCE_AXIS, dtypes.float32, (UOp(Ops.BUFFER, dtypes.float32, (), (0, "CPU", 8)),), (Ops.ADD, (0,))),
        UOp(Ops.GEP, dtypes.float32, (UOp.const(dtypes.float32.vec(2), 1.0),), (1,)),
    ]
    for g in graphs:
        assert roundtrip(g) is g
    assert str(roundtrip(UOp.const(dtypes.float32, -0.0)).arg) == "-0.0"


def test_pyrender_keeps_shared_subgraphs_shared():
    shared = x * 3
    e = shared
    for _ in range(30):
        e = e + e  # 2**30 paths, 61 nodes
    text = pyrender(e)
    assert text.count("UOp(") == len(e.toposort())
    assert roundtrip(e) is e
    # the infix text would be 2**30 terms long: it is cut, and repr stays short
    assert len(str(e)) < 300_000 and "..." in str(e)
    assert len(repr(e)) < 120


@pytest.mark.no_roundtrip  # its graph is the one pyrender must refuse
def test_pyrender_rejects_args_it_cannot_write():
    with pytest.raises(TypeError, match="cannot write an arg of type frozenset"):
        pyrender(UOp(Ops.SINK, dtypes.void, (), frozenset({1})))
