"""Elementwise Tensor ops: arithmetic, comparisons, bitwise ops, math functions and activations.

>>> from zeptograd import Tensor
>>> (Tensor([1.0, -2.0]) * 3).relu().tolist()
[3.0, 0.0]
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from zeptograd.dtype import dtypes, result_type
from zeptograd.uop.ops import Ops, UOp

if TYPE_CHECKING:
    from zeptograd.tensor import Tensor


class ElementwiseMixin:
    """Ops that map each element (after broadcasting) to one result element."""

    __slots__ = ()

    def add(self, x: Any, reverse: bool = False) -> Tensor:
        return self._binary(Ops.ADD, x, "add", reverse)

    def sub(self, x: Any, reverse: bool = False) -> Tensor:
        return self._binary(Ops.SUB, x, "sub", reverse)

    def mul(self, x: Any, reverse: bool = False) -> Tensor:
        return self._binary(Ops.MUL, x, "mul", reverse)

    def div(self, x: Any, reverse: bool = False) -> Tensor:
        """True division: integers divide as floats (`Tensor([1, 2]) / 2` is float32)."""
        a, b = self._operands("div", x)
        if reverse:
            a, b = b, a
        a, b = a._float(), b._float()
        return a * b.reciprocal()

    def maximum(self, x: Any) -> Tensor:
        """The elementwise maximum (NaN wins, as in numpy and PyTorch).

        >>> Tensor([-1.0, 2.0]).maximum(0).tolist()
        [0.0, 2.0]
        """
        return self._binary(Ops.MAX, x, "maximum")

    def minimum(self, x: Any) -> Tensor:
        """The elementwise minimum (NaN wins).

        >>> Tensor([1, 5]).minimum(3).tolist()
        [1, 3]
        """
        a, b = self._operands("minimum", x)
        return a._new(a.uop.minimum(b.uop))

    def where(self, x: Any, y: Any) -> Tensor:
        """`x` where this (bool) tensor is true, else `y`.

        >>> (Tensor([1, -2]) > 0).where(1.0, 0.0).tolist()
        [1.0, 0.0]
        """
        cond = self.cast(dtypes.bool)
        if isinstance(x, type(self)):
            a, b = x._operands("where", y)
        elif isinstance(y, type(self)):
            b, a = y._operands("where", x)
        else:
            dt = result_type(x, y)
            a, b = self._new(UOp.const(dt, x)), self._new(UOp.const(dt, y))
        shape = self._broadcast_shape("where", cond.shape, a.shape, b.shape)
        cond, a, b = cond._broadcast_to(shape), a._broadcast_to(shape), b._broadcast_to(shape)
        return a._new(cond.uop.where(a.uop, b.uop))

    def __lt__(self, x: Any) -> Tensor:
        return self._binary(Ops.CMPLT, x, "<")

    def __gt__(self, x: Any) -> Tensor:
        return self._binary(Ops.CMPLT, x, ">", reverse=True)

    def __le__(self, x: Any) -> Tensor:
        return (self < x) | (self == x)

    def __ge__(self, x: Any) -> Tensor:
        return (self > x) | (self == x)

    def __eq__(self, x: Any) -> Tensor:  # type: ignore[override]
        return self._binary(Ops.CMPEQ, x, "==")

    def __ne__(self, x: Any) -> Tensor:  # type: ignore[override]
        return self._binary(Ops.CMPNE, x, "!=")

    def __or__(self, x: Any) -> Tensor:
        return self._binary(Ops.OR, x, "|")

    def __and__(self, x: Any) -> Tensor:
        return self._binary(Ops.AND, x, "&")

    def neg(self) -> Tensor:
        """-x (logical not for bool)."""
        return self._new(self.uop.alu(Ops.NEG))

    def _unary_float(self, op: Ops) -> Tensor:
        x = self._float()
        return x._new(x.uop.alu(op))

    def exp2(self) -> Tensor:
        """2 ** x."""
        return self._unary_float(Ops.EXP2)

    def log2(self) -> Tensor:
        return self._unary_float(Ops.LOG2)

    def sqrt(self) -> Tensor:
        return self._unary_float(Ops.SQRT)

    def sin(self) -> Tensor:
        return self._unary_float(Ops.SIN)

    def reciprocal(self) -> Tensor:
        """1 / x."""
        return self._unary_float(Ops.RECIPROCAL)

    def relu(self) -> Tensor:
        """max(x, 0)."""
        return self.maximum(0)

    def exp(self) -> Tensor:
        return (self._float() * (1 / math.log(2))).exp2()

    def log(self) -> Tensor:
        return self.log2() * math.log(2)

    def __add__(self, x: Any) -> Tensor:
        return self.add(x)

    def __mul__(self, x: Any) -> Tensor:
        return self.mul(x)

    def __sub__(self, x: Any) -> Tensor:
        return self.sub(x)

    def __truediv__(self, x: Any) -> Tensor:
        return self.div(x)

    def __neg__(self) -> Tensor:
        return self.neg()

    def __radd__(self, x: Any) -> Tensor:
        return self.add(x, reverse=True)

    def __rmul__(self, x: Any) -> Tensor:
        return self.mul(x, reverse=True)

    def __rsub__(self, x: Any) -> Tensor:
        return self.sub(x, reverse=True)

    def __rtruediv__(self, x: Any) -> Tensor:
        return self.div(x, reverse=True)

    def __iadd__(self, x: Any) -> Tensor:
        return self.assign(self + x)

    def __isub__(self, x: Any) -> Tensor:
        return self.assign(self - x)

    def __imul__(self, x: Any) -> Tensor:
        return self.assign(self * x)

    def __itruediv__(self, x: Any) -> Tensor:
        return self.assign(self / x)

    def __invert__(self) -> Tensor:
        if not dtypes.is_bool(self.dtype):
            raise TypeError(f"~ is defined on bool here, not {self.dtype!r}")
        return self.neg()
