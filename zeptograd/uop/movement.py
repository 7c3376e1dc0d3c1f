"""Tensor-graph movement nodes built directly, without the Tensor front end's checks: the front end's products
(conv2d, matmul) and the scheduler's layout pass build their graphs with them.

>>> from zeptograd.dtype import dtypes
>>> x = UOp.const(dtypes.float32, 1.0)
>>> stored_as(movement_uop(x, Ops.RESHAPE, (1, 1)), (1, 0)).op.name
'PERMUTE'
"""

from __future__ import annotations

from typing import Any

from zeptograd.uop.ops import Ops, UOp
from zeptograd.uop.shape import inverse_permutation


def movement_uop(u: UOp, op: Ops, arg: Any) -> UOp:
    """Movement op `op` of tensor-graph node `u`, built with no checks (the caller's shapes are right); none where
    it would change nothing. Ops that build their graph as UOps use it (conv2d, matmul).

    >>> from zeptograd.dtype import dtypes
    >>> c = UOp.const(dtypes.float32, 1.0)
    >>> movement_uop(c, Ops.RESHAPE, ()) is c, movement_uop(c, Ops.RESHAPE, (1, 1)).shape
    (True, (1, 1))
    """
    if (op is _RESHAPE or op is _EXPAND) and arg == u.shape:
        return u
    if op is _PERMUTE and arg == tuple(range(len(arg))):
        return u
    if op is _SHRINK and all(b == 0 and e == n for (b, e), n in zip(arg, u.shape)):
        return u
    return UOp(op, u.dtype, (u,), arg)


# module constants: on Python 3.11 `Ops.X` goes through EnumType.__getattr__ (0.1 us a lookup), and conv2d and
# matmul build their graphs through movement_uop
_RESHAPE, _EXPAND, _PERMUTE, _SHRINK = Ops.RESHAPE, Ops.EXPAND, Ops.PERMUTE, Ops.SHRINK


def stored_as(u: UOp, order: tuple[int, ...], row_pad: int = 0) -> UOp:
    """`u` read from a copy stored with its axes in `order` (what `t.permute(order).contiguous()` stores), seen in
    its own axis order again: a layout chosen for the kernels that read it (a convolution's channels-last input,
    a matmul's B panels). `row_pad` elements of padding end each row of the copy (its last axis), which the view
    leaves out: rows a large power of two apart share a few cache sets, so a kernel walking down a column evicts
    its own lines long before the cache is full."""
    permuted = movement_uop(u, Ops.PERMUTE, order)
    shape = permuted.shape
    if row_pad:
        permuted = movement_uop(permuted, Ops.PAD, (*((0, 0),) * (len(shape) - 1), (0, row_pad)))
    stored = UOp(Ops.CONTIGUOUS, u.dtype, (permuted,))
    if row_pad:
        stored = movement_uop(stored, Ops.SHRINK, tuple((0, n) for n in shape))
    return movement_uop(stored, Ops.PERMUTE, inverse_permutation(order))


def padded_spatially(x: UOp, pads: tuple[tuple[int, int], ...] | list[tuple[int, int]]) -> UOp:
    """`x` (N, C, *spatial) zero-padded by `pads` (each >= 0) on its spatial axes: a convolution's padded input, the
    node that conv2d builds and the scheduler's layout pass looks for (`x` itself where nothing is padded)."""
    if all(tuple(p) == (0, 0) for p in pads):
        return x
    return movement_uop(x, Ops.PAD, ((0, 0), (0, 0), *(tuple(p) for p in pads)))


def _reshaped(u: UOp, shape: tuple[int, ...]) -> UOp:
    """`u` reshaped to `shape`, a reshape of a reshape folded into one (a view that is contiguous in the end stays a
    plain reshape of its buffer)."""
    while u.op is _RESHAPE:
        u = u.src[0]
    return movement_uop(u, _RESHAPE, shape)


def strided_view(flat: UOp, sizes: tuple[int, ...], strides: tuple[int, ...]) -> UOp | None:
    """The elements `flat[sum(i[k] * strides[k])]` of 1-D node `flat` in shape `sizes` (numpy's `as_strided`, in
    elements), built of movement ops: for each axis, by stride from the largest, the row so far is cut (or padded)
    to `size * stride` elements and split into `size` rows of `stride`; then the axes are permuted back and the
    axes of stride 0 expanded. None when the layout overlaps itself (an element of one row is read from the next
    row: `as_strided` windows), which movement ops cannot express; `flat` must hold the last element read.

    >>> from zeptograd.dtype import dtypes
    >>> from zeptograd.uop.buffers import new_buffer
    >>> strided_view(new_buffer("CPU", 6, dtypes.float32), (3, 2), (1, 3)).shape
    (3, 2)
    >>> strided_view(new_buffer("CPU", 4, dtypes.float32), (3, 2), (1, 1)) is None
    True
    """
    if 0 in sizes:
        return _reshaped(movement_uop(flat, _SHRINK, ((0, 0),)), sizes)
    if any(s < 0 for s in strides):
        return None
    kept = [k for k in range(len(sizes)) if sizes[k] > 1 and strides[k] > 0]
    order = sorted(kept, key=lambda k: -strides[k])
    # each axis's rows must hold every element the axes below it read
    for j, k in enumerate(order):
        if 1 + sum((sizes[m] - 1) * strides[m] for m in order[j + 1 :]) > strides[k]:
            return None
    done: list[int] = []  # the sizes of the axes split off so far
    x, row = flat, flat.shape[0]
    for k in order:
        n, s = sizes[k], strides[k]
        if row > n * s:
            x = movement_uop(x, _SHRINK, (*((0, d) for d in done), (0, n * s)))
        elif row < n * s:
            x = movement_uop(x, Ops.PAD, (*((0, 0) for _ in done), (0, n * s - row)))
        x = _reshaped(x, (*done, n, s))
        done, row = [*done, n], s
    if row > 1:
        x = movement_uop(x, _SHRINK, (*((0, d) for d in done), (0, 1)))
    x = _reshaped(x, tuple(done))
    # the kept axes in their own order, then the others (size 1, or stride 0) as 1s, expanded
    x = movement_uop(x, _PERMUTE, tuple(order.index(k) for k in kept))
    x = _reshaped(x, tuple(sizes[k] if k in kept else 1 for k in range(len(sizes))))
    return movement_uop(x, _EXPAND, tuple(sizes))
