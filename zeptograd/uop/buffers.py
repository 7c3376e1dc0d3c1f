"""Tensor-graph BUFFER nodes: a fresh buffer, the buffer a node is a plain view of, and a buffer seen in a shape.

A BUFFER's `arg` is (unique id, device, number of elements); its own shape is (elements,), and a tensor of another
shape is a RESHAPE of it. The front end, the scheduler and the engine build and read buffers with these.

>>> from zeptograd.dtype import dtypes
>>> buf = new_buffer("CPU", 6, dtypes.float32)
>>> view = view_of(buf, (2, 3))
>>> view.shape, buffer_of(view) is buf, buffer_of(view + 1) is None
((2, 3), True, True)
"""

from __future__ import annotations

import itertools

from zeptograd.dtype import DType
from zeptograd.uop.ops import Ops, UOp

_buffer_ids = itertools.count()

# module constants for the hot paths: on Python 3.11 `Ops.X` goes through EnumType.__getattr__ (0.3 us a lookup)
_RESHAPE, _BUFFER = Ops.RESHAPE, Ops.BUFFER


def new_buffer(device: str, size: int, dtype: DType) -> UOp:
    """A fresh BUFFER node of `size` elements of `dtype` on `device`, unequal to every other buffer (its id is new).

    >>> from zeptograd.dtype import dtypes
    >>> a, b = new_buffer("CPU", 4, dtypes.int32), new_buffer("CPU", 4, dtypes.int32)
    >>> a is b, a.arg[1:], a.shape
    (False, ('CPU', 4), (4,))
    """
    return UOp(_BUFFER, dtype, (), (next(_buffer_ids), device, size))


def buffer_of(u: UOp) -> UOp | None:
    """The BUFFER that `u` is a plain view of (the buffer itself, or reshapes of it), else None."""
    while u.op is _RESHAPE:
        u = u.src[0]
    return u if u.op is _BUFFER else None


def view_of(buf: UOp, shape: tuple[int, ...]) -> UOp:
    """`buf` seen in `shape` (a RESHAPE of it, or the buffer itself where the shape is its own)."""
    if buf.op is _BUFFER and len(shape) == 1 and shape[0] == buf.arg[2]:
        return buf  # a buffer's own shape is (size,): no shape computation
    return buf if buf.shape == shape else UOp(_RESHAPE, buf.dtype, (buf,), shape)
