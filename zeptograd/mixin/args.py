"""Argument handling shared by the Tensor's ops: shapes given as varargs or one sequence, dtypes a tensor can have.

>>> shape_arg((2, 3), "zeros"), shape_arg(((2, 3),), "zeros")
((2, 3), (2, 3))
"""

from __future__ import annotations

from zeptograd.dtype import ConstType, DType, to_dtype

Scalar = ConstType


def shape_arg(shape: tuple, op: str) -> tuple[int, ...]:
    """A shape given as varargs `(2, 3)` or one sequence `((2, 3),)`."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    for s in shape:
        if not isinstance(s, int) or isinstance(s, bool):
            raise TypeError(f"{op}: sizes must be ints, got {shape}")
    return tuple(shape)


def tensor_dtype(dtype: DType | str, op: str) -> DType:
    """A dtype a tensor can have: one the devices can store and compute in (every one but bfloat16 today)."""
    dt = to_dtype(dtype)
    if dt.fmt is None:
        raise TypeError(f"{op}: {dt!r} tensors are not supported on the CPU and PYTHON devices yet")
    return dt
