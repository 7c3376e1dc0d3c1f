"""Linear algebra and functional ops: matmul, einsum, linear, softmax and friends, interpolation.

>>> from zeptograd import Tensor
>>> (Tensor([[1.0, 2.0]]) @ Tensor([[3.0], [4.0]])).tolist()
[[11.0]]
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from zeptograd.dtype import least_upper_dtype

if TYPE_CHECKING:
    from zeptograd.tensor import Tensor


class FunctionalMixin:
    """Ops built from elementwise ops, reductions and movement: products, normalizations, resampling."""

    __slots__ = ()

    def __matmul__(self, x: Tensor) -> Tensor:
        return self.matmul(x)

    def __rmatmul__(self, x: Tensor) -> Tensor:
        return x.matmul(self)

    def matmul(self, x: Tensor) -> Tensor:
        """Matrix product, with numpy's rules for 1-D operands and broadcast batch axes: one fused kernel
        (a broadcast multiply and a sum).

        >>> (Tensor([[1.0, 2.0]]) @ Tensor([[3.0], [4.0]])).tolist()
        [[11.0]]
        """
        if not isinstance(x, type(self)):
            raise TypeError(f"matmul: expected a Tensor, got {type(x).__name__}")
        if self.ndim == 0 or x.ndim == 0:
            raise ValueError(f"matmul: both operands need at least 1 dimension, got shapes {self.shape} and {x.shape}")
        a = self.reshape(1, self.shape[0]) if self.ndim == 1 else self
        b = x.reshape(x.shape[0], 1) if x.ndim == 1 else x
        if a.shape[-1] != b.shape[-2]:
            raise ValueError(
                f"matmul: shapes {self.shape} and {x.shape} are not aligned ({a.shape[-1]} != {b.shape[-2]})"
            )
        try:
            self._broadcast_shape("matmul", a.shape[:-2], b.shape[:-2])
        except ValueError:
            raise ValueError(
                f"matmul: the batch axes of shapes {self.shape} and {x.shape} cannot be broadcast together"
            ) from None
        dt = least_upper_dtype(a.dtype, b.dtype)
        a3 = a.cast(dt).reshape(*a.shape[:-1], 1, a.shape[-1])
        bt = b.cast(dt).transpose(-1, -2)
        b3 = bt.reshape(*bt.shape[:-2], 1, *bt.shape[-2:])
        out = (a3 * b3).sum(axis=-1)
        if self.ndim == 1:
            out = out.reshape(*out.shape[:-2], out.shape[-1])
        if x.ndim == 1:
            out = out.reshape(out.shape[:-1])
        return out

    dot = matmul
