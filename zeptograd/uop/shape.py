"""Shapes of tensor-graph nodes.

A tensor-graph node's shape follows from its op, its arg and its sources' shapes: a BUFFER is flat (its
arg is `(id, device, size)`), a CONST is a scalar, elementwise ops keep their (already broadcast) sources'
shape, movement ops say their new shape in their arg, and REDUCE_AXIS keeps the reduced axes as size 1
(`keepdim`). An assignment `STORE(BUFFER, value)` has the value's shape: the node is the buffer after the
write, seen in the shape it was assigned in.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from zeptograd.uop.ops import GroupOp, Ops

if TYPE_CHECKING:
    from zeptograd.uop.ops import UOp

Shape = tuple[int, ...]


def compute_shape(u: UOp) -> Shape:
    """The shape of `u`, from its sources' shapes (which must already be known)."""
    rule = _RULES.get(u.op)
    if rule is None:
        raise ValueError(f"{u.op.name} is not a tensor-graph node with a shape")
    return rule(u)


def _first(u: UOp) -> Shape:
    """The shape of `u`'s first source: where it has none, `u` is not a tensor-graph node."""
    if not u.src or (shape := u.src[0]._shape) is None:
        raise ValueError(f"{u.op.name} is not a tensor-graph node with a shape")
    return shape


def _second(u: UOp) -> Shape:
    shape = u.src[1]._shape
    assert shape is not None
    return shape


def _permute(u: UOp) -> Shape:
    src = _first(u)
    return tuple([src[i] for i in u.arg])


def _pad(u: UOp) -> Shape:
    return tuple([s + b + a for s, (b, a) in zip(_first(u), u.arg)])


def _shrink(u: UOp) -> Shape:
    _first(u)  # (the arg alone gives the shape, but a SHRINK of nothing is no tensor-graph node)
    return tuple([e - b for b, e in u.arg])


def _reduce(u: UOp) -> Shape:
    axes = u.arg[1]
    return tuple([1 if i in axes else s for i, s in enumerate(_first(u))])


# op -> its shape rule: this runs once for every tensor-graph node built, and on Python 3.11 each `Ops.X` lookup
# costs 0.1 us (a chain of `op is Ops.X` tests took 1 us of the 4 us it costs to build a node)
_RULES: dict[Ops, Callable[[UOp], Shape]] = {
    Ops.BUFFER: lambda u: (u.arg[2],),
    Ops.CONST: lambda u: (),
    Ops.DEFINE_VAR: lambda u: (),
    Ops.RESHAPE: lambda u: tuple(u.arg),
    Ops.EXPAND: lambda u: tuple(u.arg),
    Ops.PERMUTE: _permute,
    Ops.PAD: _pad,
    Ops.SHRINK: _shrink,
    Ops.REDUCE_AXIS: _reduce,
    # an assignment has its value's shape, a `where` its branches'
    Ops.STORE: _second,
    Ops.WHERE: _second,
    # elementwise ops (their sources are broadcast already) and the ops that keep the value's shape
    **dict.fromkeys(
        (*GroupOp.ALU, Ops.FLIP, Ops.CAST, Ops.BITCAST, Ops.CONTIGUOUS, Ops.DETACH, Ops.CUSTOM_GRAD, Ops.COPY), _first
    ),
}


def prod(shape: Iterable[int]) -> int:
    """The number of elements of `shape`."""
    return math.prod(shape)


def inverse_permutation(order: Iterable[int]) -> Shape:
    """The permutation that undoes `order`: permuting by `order`, then by this, gives the axes back.

    >>> inverse_permutation((2, 0, 1))
    (1, 2, 0)
    """
    order = tuple(order)
    inverse = [0] * len(order)
    for i, axis in enumerate(order):
        inverse[axis] = i
    return tuple(inverse)


def strides_for(shape: Shape) -> Shape:
    """Row-major (C order) element strides of `shape`.

    >>> strides_for((2, 3, 4))
    (12, 4, 1)
    """
    strides = []
    acc = 1
    for s in reversed(shape):
        strides.append(acc)
        acc *= s
    return tuple(reversed(strides))
