"""Argument handling shared by the Tensor's ops: shapes given as varargs or one sequence, dtypes a tensor can have.

>>> shape_arg((2, 3), "zeros"), shape_arg(((2, 3),), "zeros"), shape_arg((np.int64(4),), "zeros")
((2, 3), (2, 3), (4,))
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

from zeptograd.dtype import NARROW, ConstType, DType, dtypes, to_dtype

Scalar = ConstType


def shape_arg(shape: tuple, op: str) -> tuple[int, ...]:
    """A shape given as varargs `(2, 3)` or one sequence `((2, 3),)`."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    if all(type(s) is int for s in shape):  # plain ints, the common case: nothing to convert (bool is not int here)
        return tuple(shape)
    out = []
    for s in shape:
        # anything with __index__ is an int (numpy integers too, as in PyTorch); bools and floats are not
        if isinstance(s, bool) or not hasattr(s, "__index__"):
            raise TypeError(f"{op}: sizes must be ints, got {shape}")
        out.append(operator.index(s))
    return tuple(out)


def axis_arg(axis: Any, op: str) -> Any:
    """Checks that `axis` is None, an int or a sequence of ints (the elements are checked by `Tensor._axes`), so a
    float or None element fails naming the op rather than deep inside the axis normalization."""
    # the common types are tested first: they need no ABC check (a microsecond)
    common = axis is None or type(axis) in (int, tuple, list)
    if common or isinstance(axis, int) or (isinstance(axis, Sequence) and not isinstance(axis, str)):
        return axis
    raise TypeError(f"{op}: axis must be an int or a sequence of ints, got {axis!r}")


def compute_dtype(dt: DType) -> DType:
    """The dtype float math computes in: float64 for float64, float32 for everything else (ints, bool and the
    16-bit floats round once, at the end)."""
    return dtypes.float64 if dt is dtypes.float64 else dtypes.float32


def tensor_dtype(dtype: DType | str, op: str) -> DType:
    """A dtype a tensor can have: any scalar dtype but `void` and `index`."""
    try:
        dt = to_dtype(dtype)
    except TypeError as e:  # an unknown name or a non-dtype: say which op was given it
        raise TypeError(f"{op}: {e}") from None
    if dt.fmt is None and dt not in NARROW:
        raise TypeError(f"{op}: there are no {dt!r} tensors")
    return dt


def int_arg(x: Any, op: str, what: str) -> int:
    """An int argument (numpy integers too, bools not)."""
    if isinstance(x, bool):
        raise TypeError(f"{op}: {what} must be an int, got {x!r}")
    try:
        return operator.index(x)
    except TypeError:
        raise TypeError(f"{op}: {what} must be an int, got {x!r}") from None
