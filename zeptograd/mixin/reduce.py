"""Reductions over axes: sums, extrema, statistics, scans and sorting.

>>> from zeptograd import Tensor
>>> Tensor([[1, 2], [3, 4]]).sum(axis=1).tolist()
[3, 7]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from zeptograd.dtype import DType, dtypes
from zeptograd.uop.ops import Ops, UOp
from zeptograd.uop.shape import prod

if TYPE_CHECKING:
    from zeptograd.tensor import Tensor

SPLIT_SUM = 1 << 14  # float sums over more elements than this add in two stages (see _float_sum)


class ReduceMixin:
    """Ops that combine the elements along axes."""

    __slots__ = ()

    def sum(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
        """The sum over `axis` (all axes when None). Small integers and bool sum in int32, float16 adds in
        float32 and rounds back.

        >>> Tensor([[1, 2], [3, 4]]).sum(axis=0).tolist()
        [4, 6]
        """
        dt = self.dtype
        if dtypes.is_bool(dt) or (dtypes.is_int(dt) and dt.itemsize < 4):
            acc = dtypes.uint32 if dtypes.is_unsigned(dt) else dtypes.int32
            return self._reduce(Ops.ADD, axis, keepdim, "sum", acc)
        if dt in (dtypes.float16, dtypes.bfloat16):
            return self._float_sum(axis, keepdim, dtypes.float32).cast(dt)
        if dtypes.is_float(dt):
            return self._float_sum(axis, keepdim, dt)
        return self._reduce(Ops.ADD, axis, keepdim, "sum", dt)

    def _float_sum(self, axis: Any, keepdim: bool, acc: DType) -> Tensor:
        """A float sum over many elements adds in two stages, sums of about sqrt(n) elements each, then their
        sum: one long chain of float adds loses precision (2**25 ones would sum to 2**24)."""
        axes = self._axes(axis, "sum")
        n = prod(self.shape[a] for a in axes)
        if n <= SPLIT_SUM:
            return self._reduce(Ops.ADD, axis, keepdim, "sum", acc)
        kept = [i for i in range(self.ndim) if i not in axes]
        kept_shape = tuple(self.shape[i] for i in kept)
        x = self.cast(acc).permute(*kept, *axes).reshape(*kept_shape, n)
        chunk = 1 << (n.bit_length() // 2)
        padded = -(-n // chunk) * chunk
        if padded != n:
            x = x.pad(((0, 0),) * len(kept) + ((0, padded - n),))
        partial = x.reshape(*kept_shape, padded // chunk, chunk)._reduce(Ops.ADD, -1, False, "sum", acc)
        total = partial._reduce(Ops.ADD, -1, False, "sum", acc)
        return total.reshape(tuple(1 if i in axes else s for i, s in enumerate(self.shape))) if keepdim else total

    def max(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
        """The maximum over `axis` (all axes when None); an empty axis has no maximum.

        >>> Tensor([[1, 5], [3, 4]]).max(axis=1).tolist()
        [5, 4]
        """
        axes = self._axes(axis, "max")
        if any(self.shape[a] == 0 for a in axes):
            raise ValueError(f"max: cannot reduce over an axis of size 0 (shape {self.shape}, axis {axis})")
        return self._reduce(Ops.MAX, axis, keepdim, "max", self.dtype)

    def min(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
        """The minimum over `axis` (all axes when None), as the maximum of the values in reversed order.

        >>> Tensor([[1, 5], [3, 4]], dtype="uint8").min(axis=1).tolist()
        [1, 3]
        """
        return self._order_reversed().max(axis, keepdim)._order_reversed()

    def _order_reversed(self) -> Tensor:
        """An order-reversing bijection of the dtype: -x for floats, `not` for bool, and for integers ~x
        (negation would wrap: -INT_MIN is INT_MIN, and -0 is the smallest unsigned value, not the largest)."""
        dt = self.dtype
        if dtypes.is_float(dt) or dtypes.is_bool(dt):
            return self.neg()
        ones = UOp.const(dt, dtypes.max(dt) if dtypes.is_unsigned(dt) else -1)
        return self._new(self.uop.alu(Ops.XOR, ones))
