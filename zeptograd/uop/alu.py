"""What each ALU op means, in Python: the reference semantics of the IR.

Constant folding uses it, the PYTHON device will execute programs with it, and every compiled backend must
agree with it. Integer ops compute exactly and wrap to the dtype's width (`index` never wraps); float ops
compute in double precision and round to the dtype, which is exact for + - * / and sqrt on float32 and
float16. `//` and `%` are floor division and floor modulo, as in Python, numpy and PyTorch.

>>> exec_alu(Ops.IDIV, dtypes.int32, (-7, 2)), exec_alu(Ops.MOD, dtypes.int32, (-7, 2))
(-4, 1)
>>> exec_alu(Ops.ADD, dtypes.uint8, (250, 10))
4
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from zeptograd.dtype import DType, dtypes, truncate
from zeptograd.uop.ops import Ops, UOp


def _idiv(a: int, b: int) -> int | None:
    return None if b == 0 else a // b


def _mod(a: int, b: int) -> int | None:
    return None if b == 0 else a % b


def _max(a: Any, b: Any) -> Any:
    # NaN wins, as in numpy.maximum and torch.maximum
    if isinstance(a, float) and math.isnan(a):
        return a
    if isinstance(b, float) and math.isnan(b):
        return b
    return a if a > b else b  # max(0.0, -0.0): IEEE 754 leaves the sign of the zero open


def _exp2(a: float) -> float:
    try:
        return 2.0**a
    except OverflowError:
        return math.inf


def _exp(a: float) -> float:
    try:
        return math.exp(a)
    except OverflowError:
        return math.inf


def _log2(a: float) -> float:
    if math.isnan(a) or a < 0:
        return math.nan
    if a == 0:
        return -math.inf
    return math.log2(a)


def _sin(a: float) -> float:
    return math.nan if math.isinf(a) else math.sin(a)


def _cos(a: float) -> float:
    return math.nan if math.isinf(a) else math.cos(a)


def _tan(a: float) -> float:
    return math.nan if math.isinf(a) else math.tan(a)  # (no float is a multiple of pi/2: tan is finite)


def _sqrt(a: float) -> float:
    if math.isnan(a) or a < 0:
        return math.nan
    return math.sqrt(a)


def _reciprocal(a: float) -> float:
    if a == 0:
        return math.copysign(math.inf, a)
    return 1.0 / a


def _fdiv(a: float, b: float) -> float:
    # IEEE division (Python raises on a zero divisor): x/0 is inf with the sign of x times the sign of 0
    if b == 0:
        if a == 0 or math.isnan(a):
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b


def _trunc(a: Any) -> Any:
    if isinstance(a, float):
        # C's trunc keeps the sign of zero: trunc(-0.5) is -0.0
        return a if not math.isfinite(a) else math.copysign(float(math.trunc(a)), a)
    return type(a)(math.trunc(a))


def _shift_amount_ok(b: int, dtype: DType) -> bool:
    # shifting by a negative amount or by the width or more is undefined in C: never fold it
    return 0 <= b < (8 * dtype.itemsize if dtype is not dtypes.index else 64)


def fused_multiply_add(a: float, b: float, c: float, dtype: DType) -> float:
    """a * b + c rounded once to `dtype` (an FMA instruction's result)."""
    if not all(math.isfinite(x) for x in (a, b, c)):
        return truncate(a * b + c, dtype)  # infinities and NaNs: the same as the unfused form
    if dtype.itemsize < 8:
        # a*b is exact in float64 for float32 operands, so a*b+c is rounded once to float64; rounding that to
        # float32 again gives the correctly rounded result unless it landed exactly on a float32 midpoint
        wide = a * b + c
        near = truncate(wide, dtype)
        if wide == near or not math.isfinite(near) or (near + _neighbour(near, wide, dtype)) / 2 != wide:
            return near if wide != 0 or near != 0 else wide
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    if exact == 0:
        return truncate(a * b + c, dtype)  # the sign of an exact zero
    try:
        wide = float(exact)  # int / int in Python rounds correctly
    except OverflowError:
        return math.inf if exact > 0 else -math.inf  # (copysign would convert `exact` to float, and overflow)
    if dtype.itemsize == 8:
        return wide
    near = truncate(wide, dtype)
    other = _neighbour(near, wide, dtype)
    # the tie case: pick the nearer of the two neighbours exactly, ties to the even mantissa
    d_near, d_other = abs(Fraction(near) - exact), abs(Fraction(other) - exact)
    if d_other < d_near or (d_other == d_near and _odd_mantissa(near, dtype)):
        return other
    return near


def _neighbour(x: float, toward: float, dtype: DType) -> float:
    """The next value of `dtype` after `x` in the direction of `toward`."""
    nt = np.float16 if dtype.itemsize == 2 else np.float32
    return float(np.nextafter(nt(x), nt(math.inf if toward > x else -math.inf)))


def _odd_mantissa(x: float, dtype: DType) -> bool:
    nt, bits = (np.float16, np.uint16) if dtype.itemsize == 2 else (np.float32, np.uint32)
    return bool(int(np.array(x, nt).view(bits)) & 1)


# op -> (function on Python values); None from the function means "undefined, do not fold"
python_alu: dict[Ops, Callable[..., Any]] = {
    Ops.NEG: lambda a: not a if isinstance(a, bool) else -a,
    Ops.EXP2: _exp2,
    Ops.EXP: _exp,
    Ops.TANH: lambda a: float(np.tanh(a)),  # numpy's rounding (math.tanh is 1 ulp off it in places)
    Ops.LOG2: _log2,
    Ops.SIN: _sin,
    Ops.COS: _cos,
    Ops.TAN: _tan,
    Ops.SQRT: _sqrt,
    Ops.RECIPROCAL: _reciprocal,
    Ops.TRUNC: _trunc,
    Ops.ADD: lambda a, b: a + b,
    Ops.SUB: lambda a, b: a - b,
    Ops.MUL: lambda a, b: a * b,
    Ops.IDIV: _idiv,
    Ops.FDIV: _fdiv,
    Ops.MOD: _mod,
    Ops.MAX: _max,
    Ops.CMPLT: lambda a, b: a < b,
    Ops.CMPNE: lambda a, b: a != b,
    Ops.CMPEQ: lambda a, b: a == b,
    Ops.AND: lambda a, b: a & b,
    Ops.OR: lambda a, b: a | b,
    Ops.XOR: lambda a, b: a ^ b,
    Ops.SHL: lambda a, b: a << b,
    Ops.SHR: lambda a, b: a >> b,
    Ops.WHERE: lambda c, a, b: a if c else b,
    Ops.MULACC: lambda a, b, c: a * b + c,
}

_FLOAT_ONLY = {Ops.EXP2, Ops.EXP, Ops.TANH, Ops.LOG2, Ops.SIN, Ops.COS, Ops.TAN, Ops.SQRT, Ops.RECIPROCAL, Ops.FDIV}
_INT_ONLY = {Ops.IDIV, Ops.MOD, Ops.SHL, Ops.SHR, Ops.AND, Ops.OR, Ops.XOR}


def exec_alu(op: Ops, dtype: DType, operands: Sequence[Any]) -> Any:
    """The value of `op` on Python `operands`, as a scalar of `dtype`; None where the result is undefined
    (division by zero, an out-of-range shift, an op the dtype does not have)."""
    if op not in python_alu:
        raise ValueError(f"{op!r} is not an ALU op")
    scalar = dtype.scalar()
    if op in _FLOAT_ONLY and not dtypes.is_float(scalar):
        return None
    if op in _INT_ONLY and dtypes.is_float(scalar):
        return None
    if op in (Ops.SHL, Ops.SHR) and not _shift_amount_ok(operands[1], scalar):
        return None
    if op is Ops.MULACC and dtypes.is_float(scalar):
        a, b, c = operands
        return fused_multiply_add(a, b, c, scalar)
    ret = python_alu[op](*operands)
    if ret is None:
        return None
    return truncate(ret, scalar)


def identity_element(op: Ops, dtype: DType) -> UOp:
    """The constant a reduction by `op` starts from: 0 for ADD, 1 for MUL, the dtype's minimum for MAX.

    >>> identity_element(Ops.MUL, dtypes.int32).arg, identity_element(Ops.MAX, dtypes.int8).arg
    (1, -128)
    """
    value = {Ops.ADD: 0, Ops.MUL: 1}.get(op)
    return UOp.const(dtype, dtypes.min(dtype.scalar()) if value is None else value)
