"""Movement ops: reshape, permute, expand, pad, shrink, flip and what is built from them. They move no data:
the scheduler turns them into index arithmetic.

>>> from zeptograd import Tensor
>>> Tensor.arange(6).reshape(2, 3).T.tolist()
[[0, 3], [1, 4], [2, 5]]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from zeptograd.dtype import dtypes
from zeptograd.mixin.args import Scalar, shape_arg
from zeptograd.uop.ops import Ops, UOp
from zeptograd.uop.shape import prod

if TYPE_CHECKING:
    from zeptograd.tensor import Tensor


class MovementMixin:
    """Ops that change which element sits where, never the values."""

    __slots__ = ()

    def reshape(self, *shape: Any) -> Tensor:
        """The same values in a new shape (one size may be -1: inferred).

        >>> Tensor.arange(6).reshape(2, -1).shape
        (2, 3)
        """
        new = list(shape_arg(shape, "reshape"))
        if new.count(-1) > 1:
            raise ValueError(f"reshape: only one size may be -1, got {tuple(new)}")
        if any(s < -1 for s in new):
            raise ValueError(f"reshape: negative size in {tuple(new)}")
        if -1 in new:
            known = prod(s for s in new if s != -1)
            if known == 0 or self.numel() % known:
                raise ValueError(f"reshape: cannot reshape a tensor of shape {self.shape} into {tuple(new)}")
            new[new.index(-1)] = self.numel() // known
        target = tuple(new)
        if prod(target) != self.numel():
            raise ValueError(
                f"reshape: cannot reshape a tensor of shape {self.shape} ({self.numel()} elements) into {target}"
            )
        return self if target == self.shape else self._new(UOp(Ops.RESHAPE, self.dtype, (self.uop,), target))

    def permute(self, *order: Any) -> Tensor:
        """The axes in a new order.

        >>> Tensor.zeros(2, 3, 4).permute(2, 0, 1).shape
        (4, 2, 3)
        """
        axes = shape_arg(order, "permute")
        if sorted(a % self.ndim if self.ndim else a for a in axes) != list(range(self.ndim)) or len(axes) != self.ndim:
            raise ValueError(f"permute: {axes} is not a permutation of the {self.ndim} axes of shape {self.shape}")
        norm = tuple(a % self.ndim for a in axes)
        if norm == tuple(range(self.ndim)):
            return self
        return self._new(UOp(Ops.PERMUTE, self.dtype, (self.uop,), norm))

    def transpose(self, dim0: int = 1, dim1: int = 0) -> Tensor:
        """Swap two axes."""
        order = list(range(self.ndim))
        a, b = self._axes(dim0, "transpose")[0], self._axes(dim1, "transpose")[0]
        order[a], order[b] = order[b], order[a]
        return self.permute(order)

    @property
    def T(self) -> Tensor:
        """The axes reversed (a matrix transposed)."""
        return self.permute(tuple(reversed(range(self.ndim))))

    def expand(self, *shape: Any) -> Tensor:
        """The tensor broadcast to `shape` (size-1 axes repeat; -1 keeps an axis).

        >>> Tensor([[1], [2]]).expand(2, 3).tolist()
        [[1, 1, 1], [2, 2, 2]]
        """
        new = shape_arg(shape, "expand")
        if len(new) < self.ndim:
            raise ValueError(f"expand: cannot expand shape {self.shape} to fewer dimensions {new}")
        padded = (1,) * (len(new) - self.ndim) + self.shape
        target = tuple(p if n == -1 else n for p, n in zip(padded, new))
        for p, n in zip(padded, target):
            if p != n and p != 1:
                raise ValueError(f"expand: cannot expand shape {self.shape} to {new}")
        return self._broadcast_to(target)

    def pad(self, padding: Sequence[Any], value: Scalar = 0.0) -> Tensor:
        """Pad each axis with `value`: `padding` is ((before, after) or None) per axis, or PyTorch's flat
        (last_before, last_after, ...) form.

        >>> Tensor([1, 2]).pad(((1, 2),)).tolist()
        [0, 1, 2, 0, 0]
        """
        if all(isinstance(p, int) for p in padding):
            if len(padding) % 2 or len(padding) // 2 > self.ndim:
                raise ValueError(f"pad: flat padding {tuple(padding)} does not fit shape {self.shape}")
            pairs = [(0, 0)] * self.ndim
            for i in range(len(padding) // 2):
                pairs[self.ndim - 1 - i] = (padding[2 * i], padding[2 * i + 1])
        else:
            if len(padding) != self.ndim:
                raise ValueError(f"pad: padding {tuple(padding)} has {len(padding)} entries for shape {self.shape}")
            pairs = [(0, 0) if p is None else tuple(p) for p in padding]
        if any(len(p) != 2 or not all(isinstance(v, int) for v in p) for p in pairs):
            raise TypeError(f"pad: padding must be pairs of ints, got {tuple(padding)}")
        if any(b < 0 or a < 0 for b, a in pairs):
            shrunk = self.shrink(tuple((-min(b, 0), s + min(a, 0)) for (b, a), s in zip(pairs, self.shape)))
            return shrunk.pad(tuple((max(b, 0), max(a, 0)) for b, a in pairs), value)
        if all(p == (0, 0) for p in pairs):
            return self
        out = self._new(UOp(Ops.PAD, self.dtype, (self.uop,), tuple(pairs)))
        if value == 0:
            return out
        inside = self.ones(self.shape, dtype=dtypes.bool, device=self.device).pad(tuple(pairs))
        return inside.where(out, value)

    def shrink(self, arg: Sequence[tuple[int, int] | None]) -> Tensor:
        """The slice [start, end) of each axis (None keeps an axis whole).

        >>> Tensor([1, 2, 3, 4]).shrink(((1, 3),)).tolist()
        [2, 3]
        """
        if len(arg) != self.ndim:
            raise ValueError(f"shrink: {tuple(arg)} has {len(arg)} entries for shape {self.shape}")
        bounds = tuple((0, s) if a is None else tuple(a) for a, s in zip(arg, self.shape))
        for (b, e), s in zip(bounds, self.shape):
            if not 0 <= b <= e <= s:
                raise ValueError(f"shrink: bounds {tuple(arg)} are outside shape {self.shape}")
        if all(b == 0 and e == s for (b, e), s in zip(bounds, self.shape)):
            return self
        return self._new(UOp(Ops.SHRINK, self.dtype, (self.uop,), bounds))

    def flip(self, axis: int | Sequence[int]) -> Tensor:
        """The values in reverse order along `axis`.

        >>> Tensor([1, 2, 3]).flip(0).tolist()
        [3, 2, 1]
        """
        axes = self._axes(axis, "flip")
        if not axes:
            return self
        return self._new(UOp(Ops.FLIP, self.dtype, (self.uop,), tuple(i in axes for i in range(self.ndim))))
