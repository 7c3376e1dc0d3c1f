"""Shapes of tensor-graph nodes.

A tensor-graph node's shape follows from its op, its arg and its sources' shapes: a BUFFER is flat (its
arg is `(id, device, size)`), a CONST is a scalar, elementwise ops keep their (already broadcast) sources'
shape, movement ops say their new shape in their arg, and REDUCE_AXIS keeps the reduced axes as size 1
(`keepdim`). An assignment `STORE(BUFFER, value)` has the value's shape: the node is the buffer after the
write, seen in the shape it was assigned in.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING

from zeptograd.uop.ops import GroupOp, Ops

if TYPE_CHECKING:
    from zeptograd.uop.ops import UOp

Shape = tuple[int, ...]


def compute_shape(u: UOp) -> Shape:
    """The shape of `u`, from its sources' shapes (which must already be known)."""
    op, arg = u.op, u.arg
    if op is Ops.BUFFER:
        return (arg[2],)
    if op in (Ops.CONST, Ops.DEFINE_VAR):
        return ()
    if op in (Ops.RESHAPE, Ops.EXPAND):
        return tuple(arg)
    src = u.src[0]._shape if u.src else None
    if src is None:
        raise ValueError(f"{op.name} is not a tensor-graph node with a shape")
    if op is Ops.PERMUTE:
        return tuple(src[i] for i in arg)
    if op is Ops.PAD:
        return tuple(s + b + a for s, (b, a) in zip(src, arg))
    if op is Ops.SHRINK:
        return tuple(e - b for b, e in arg)
    if op is Ops.REDUCE_AXIS:
        return tuple(1 if i in arg[1] else s for i, s in enumerate(src))
    if op is Ops.STORE:
        value = u.src[1]._shape
        assert value is not None
        return value
    if op is Ops.WHERE:
        value = u.src[1]._shape
        assert value is not None
        return value
    if op in GroupOp.ALU or op in (
        Ops.FLIP,
        Ops.CAST,
        Ops.BITCAST,
        Ops.CONTIGUOUS,
        Ops.DETACH,
        Ops.CUSTOM_GRAD,
        Ops.COPY,
    ):
        return src
    raise ValueError(f"{op.name} is not a tensor-graph node with a shape")


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
