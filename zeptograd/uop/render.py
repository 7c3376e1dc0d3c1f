"""Printing graphs: an infix expression (`str(uop)`), a listing one node a line (`render`), and Python
source that rebuilds the graph (`pyrender`).

>>> x = UOp.variable("x", 0, 10)
>>> str((x * 4 + 3) // 4)
'(x*4+3)//4'
>>> eval(x.pyrender(), PYRENDER_GLOBALS) is x
True
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from enum import Enum
from typing import Any

from zeptograd.dtype import AddrSpace, DType, dtypes
from zeptograd.uop.kernel_info import KernelInfo, Opt, OptOps
from zeptograd.uop.ops import Ops, UOp

# infix operators and their binding strength (higher binds tighter), as in Python
_INFIX: dict[Ops, tuple[str, int]] = {
    Ops.CMPLT: ("<", 1),
    Ops.CMPNE: ("!=", 1),
    Ops.CMPEQ: ("==", 1),
    Ops.OR: ("|", 2),
    Ops.XOR: ("^", 3),
    Ops.AND: ("&", 4),
    Ops.SHL: ("<<", 5),
    Ops.SHR: (">>", 5),
    Ops.ADD: ("+", 6),
    Ops.SUB: ("-", 6),
    Ops.MUL: ("*", 7),
    Ops.IDIV: ("//", 7),
    Ops.FDIV: ("/", 7),
    Ops.MOD: ("%", 7),
}
_ATOM = 10
_UNARY_MINUS = 8


def _const_text(value: Any) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return repr(value)


def _node_text(u: UOp, parts: list[tuple[str, int]]) -> tuple[str, int]:
    """The text of `u` and its binding strength, from its sources' texts."""

    def wrap(i: int, strength: int) -> str:
        text, s = parts[i]
        return text if s >= strength else f"({text})"

    op = u.op
    if op is Ops.CONST:
        text = _const_text(u.arg)
        return text, (_UNARY_MINUS if text.startswith("-") else _ATOM)
    if op is Ops.DEFINE_VAR:
        return str(u.arg[0]), _ATOM
    if op is Ops.RANGE:
        return f"r{u.arg}", _ATOM
    if op is Ops.SPECIAL:
        return str(u.arg), _ATOM
    if op is Ops.UNROLL:
        return f"u{u.arg}", _ATOM
    if op is Ops.MUL and u.src[1].op is Ops.CONST and u.src[1].arg == -1 and not isinstance(u.src[1].arg, bool):
        return f"-{wrap(0, _UNARY_MINUS)}", _UNARY_MINUS
    if op is Ops.ADD and u.src[1].op is Ops.MUL and u.src[1].src[1].op is Ops.CONST and u.src[1].src[1].arg == -1:
        # a + b*-1 reads as a - b
        return f"{wrap(0, 6)}-{parts[1][0][1:] if parts[1][1] == _UNARY_MINUS else parts[1][0]}", 6
    if op is Ops.ADD and u.src[1].op is Ops.CONST and isinstance(u.src[1].arg, (int, float)) and u.src[1].arg < 0:
        return f"{wrap(0, 6)}-{_const_text(-u.src[1].arg)}", 6
    if op in _INFIX:
        sym, strength = _INFIX[op]
        # left-associative: the right operand of a same-strength operator needs parentheses; comparisons
        # chain in Python (a<b!=c is a<b and b!=c), so a comparison inside one needs them on both sides
        left = strength + 1 if op in (Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ) else strength
        return f"{wrap(0, left)}{sym}{wrap(1, strength + 1)}", strength
    if op is Ops.MAX:
        return f"max({parts[0][0]}, {parts[1][0]})", _ATOM
    if op is Ops.WHERE:
        return f"where({parts[0][0]}, {parts[1][0]}, {parts[2][0]})", _ATOM
    if op in (Ops.CAST, Ops.BITCAST):
        return f"{op.name.lower()}({parts[0][0]}, {u.dtype!r})", _ATOM
    inner = [p[0] for p in parts] + ([repr(u.arg)] if u.arg is not None else [])
    return f"{op.name}({', '.join(inner)})", _ATOM


def render_expr(root: UOp, limit: int = 100_000) -> str:
    """`root` as an infix expression, Python-like (`(x*4+3)//4`). Shared subexpressions are written out
    each time they are used, so a subexpression longer than `limit` characters is written `...` (a DAG's
    text can grow exponentially with its depth)."""
    texts: dict[UOp, tuple[str, int]] = {}
    for node in root.toposort():
        text, strength = _node_text(node, [texts[s] for s in node.src])
        texts[node] = (text, strength) if len(text) <= limit else ("...", _ATOM)
    return texts[root][0]


def short_repr(u: UOp) -> str:
    """A one-line repr: op, dtype, and the expression (cut at 80 characters)."""
    text = render_expr(u, limit=200)
    if len(text) > 80:
        text = text[:77] + "..."
    return f"<{u.op.name} {u.dtype!r} {text}>"


def render_listing(root: UOp | Sequence[UOp]) -> str:
    """One line per node (of a graph, or of a linear program in its order), sources by line number:

    `   2 MUL          dtypes.index      src=(0, 1)`
    """
    nodes = root.toposort() if isinstance(root, UOp) else list(root)
    number = {node: i for i, node in enumerate(nodes)}
    lines = []
    for i, node in enumerate(nodes):
        line = f"{i:4d} {node.op.name:<13} {node.dtype!r:<24}"
        if node.src:
            line += f" src=({', '.join(str(number[s]) for s in node.src)})"
        if node.arg is not None:
            line += f" arg={_pyrepr(node.arg)}"
        lines.append(line.rstrip())
    return "\n".join(lines)


def _pyrepr(x: Any) -> str:
    """Python source for an arg or dtype, exact for the values UOps hold."""
    if isinstance(x, float):
        if math.isnan(x):
            return "math.nan"
        if math.isinf(x):
            return "math.inf" if x > 0 else "-math.inf"
        return repr(x)
    if isinstance(x, tuple):
        inner = ", ".join(_pyrepr(v) for v in x)
        return f"({inner},)" if len(x) == 1 else f"({inner})"
    if isinstance(x, (DType, Enum, bool, int, str, KernelInfo, Opt)) or x is None:
        return repr(x)
    if hasattr(x, "pyrender_arg"):  # an arg of a later stage's (a WMMA's tensor core): it names itself
        return x.pyrender_arg()
    raise TypeError(f"pyrender cannot write an arg of type {type(x).__name__}: {x!r}")


PYRENDER_GLOBALS: dict[str, Any] = {"UOp": UOp, "Ops": Ops, "dtypes": dtypes, "AddrSpace": AddrSpace, "math": math}
PYRENDER_GLOBALS.update(KernelInfo=KernelInfo, Opt=Opt, OptOps=OptOps)
"""The names pyrender's source uses; `eval(u.pyrender(), PYRENDER_GLOBALS) is u`. A module whose objects are args
(codegen/tensor_cores.py) adds the name its `pyrender_arg` writes."""


def pyrender(root: UOp) -> str:
    """A Python expression that rebuilds `root` (names: UOp, Ops, dtypes, AddrSpace, math).

    Each node is bound once with `:=`, so shared subgraphs stay shared and the text grows linearly.
    """
    nodes = root.toposort()
    number = {node: i for i, node in enumerate(nodes)}
    lines = []
    for i, node in enumerate(nodes):
        src = ", ".join(f"u{number[s]}" for s in node.src) + ("," if len(node.src) == 1 else "")
        lines.append(f"  u{i} := UOp({node.op!r}, {node.dtype!r}, ({src}), {_pyrepr(node.arg)}),")
    return "(\n" + "\n".join(lines) + "\n)[-1]"
