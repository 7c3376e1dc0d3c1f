"""Elementwise Tensor ops: arithmetic, comparisons, bitwise ops, math functions, activations and casts.

>>> (Tensor([1.0, -2.0]) * 3).relu().tolist()
[3.0, 0.0]

Everything here is built from the IR's ALU ops (EXP2 EXP TANH LOG2 SIN COS TAN SQRT RECIPROCAL NEG TRUNC, the binary
ops, WHERE), CAST and BITCAST, so it fuses into whatever kernel reads it and runs on every device.

Numerics, in short (test/ops/test_tensor_elementwise.py checks each claim against float64 references):

- Math on integers and bool computes in float32. float16 inputs compute in float32 and round once at the
  end (within 1 ulp of float16), float64 inputs compute in float64.
- float32 and float16 `/` divide in float64 and round once: correctly rounded, as in PyTorch. float64 `/` is
  x * (1/y).
- `exp` is the EXP op, which reduces its argument exactly (Cody-Waite: x = n*ln2 + r) before the exp2
  polynomial: within 2 ulp over the whole float32 range, denormal results included. `log` is LOG2 times ln2 (2 ulp).
- `sin` is the SIN op, which codegen/transcendental.py turns into an exact argument reduction and a polynomial:
  within 1 ulp for any float32 |x|, and in float64 for |x| < 1.6e9. `cos` (the COS op) is the same code with the
  quadrant shifted by one (as accurate). `tan` (the TAN op) is sin's reduction and a tan polynomial (within 2 ulp:
  1.27 measured).
- `expm1`, `log1p`, `tanh`, `sinh`, `asinh`, `atanh`, `sigmoid`, `softplus`, `logsigmoid`, `elu`, `erfc`
  keep their relative accuracy near 0 (or in the tail) and do not overflow where the result is finite
  (sigmoid(-400) is 0, softplus(400) is 400): within about 5 ulp in float32.
- `asin`, `acos`, `atan`, `erf`, `erfc` use polynomial fits made for this file (relative error below 1e-8
  on the reduced ranges): within a few float32 ulp, in every dtype (float64 included: float32 accuracy).
- `//`, `%`, `fmod` and div(rounding_mode=...) on float16/float32 compute their remainder exactly in float64
  (float32: while |a/b| < 2**154, i.e. for every float32 a once |b| >= 1.5e-8), so they match numpy and
  PyTorch bit for bit. On integers they are exact and never trap: C's division raises SIGFPE for a zero
  divisor and for INT64_MIN / -1, so the divisor is guarded; x // 0 and x % 0 give 0 (numpy's answer), and
  INT64_MIN // -1 wraps to INT64_MIN.
- `pow` with a float result computes exp2(y*log2|x|) in float64 for float32 inputs (float32 for float16)
  with C's special cases (0**0 = 1, 1**nan = 1, negative bases with integer exponents, infinities); integer
  powers are exact (wrapping) products.
"""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from zeptograd.dtype import DType, category, dtypes, result_type
from zeptograd.engine.disk import disk_bitcast, is_disk
from zeptograd.gradient import custom_gradient
from zeptograd.helpers import ArgumentError, DTypeError
from zeptograd.mixin.args import compute_dtype, tensor_dtype
from zeptograd.uop.ops import Ops, UOp

if TYPE_CHECKING:
    from zeptograd.tensor import Tensor

# the unsigned dtype of each element size: bitcasts between sizes move bits through them
_UINT_OF_SIZE = {1: dtypes.uint8, 2: dtypes.uint16, 4: dtypes.uint32, 8: dtypes.uint64}

# ---------------------------------------------------------------------------------------------------------------
# constants

LN2 = math.log(2)
LOG2E = 1 / LN2
# polynomial fits (weighted least squares, then iteratively reweighted towards minimax) made for this file
# atan(t) = t * P(t^2) on |t| <= tan(pi/8); relative error 6e-10
_ATAN = (0.9999999993966271, -0.3333330762458611, 0.19998216888986192, -0.14240082050477554)
_ATAN += (0.10573473419300211, -0.060347754547890875)
# asin(t) = t * P(t^2) on |t| <= 0.5; relative error 2.5e-10
_ASIN = (1.000000000254573, 0.166666569456753, 0.07500604061110372, 0.04450309300837905)
_ASIN += (0.03190075481198465, 0.01413966687294612, 0.03788534913615485)
# erf(t) = t * P(t^2) on |t| <= 1; relative error 1.2e-9
_ERF = (1.128379165726634, -0.37612625823688234, 0.11283585142425584, -0.026853811676378403)
_ERF += (0.005188327193812486, -0.0008010189304026166, 7.853847086732035e-05)
# erfc(t) = exp(-t^2) * P(t - 1.5) on 0.5 <= t <= 2.5; relative error 3.7e-9
_ERFC = (0.3215854152841437, -0.16362292050219493, 0.0761511265184792, -0.032930866812993446)
_ERFC += (0.013376313992568264, -0.005146023251919308, 0.001890535653760246, -0.0006623578449450433)
_ERFC += (0.0002149061638782382, -7.109331104665148e-05, 3.0054968162197826e-05, -8.727585047038633e-06)
# erfc(t) = exp(-t^2) / t * P(1/t^2) on t >= 2.5; relative error 3.2e-9
_ERFC_TAIL = (0.5641895836419638, -0.2820938268518549, 0.4229699652862369, -1.0473252595161424)
_ERFC_TAIL += (3.3840462432455545, -11.048767164052183, 26.825262271585473, -32.08379079113204)

# the signed int of each float's width: its sign bit is the int's
_BITS = {
    dtypes.fp8e4m3: dtypes.int8,
    dtypes.fp8e5m2: dtypes.int8,
    dtypes.float16: dtypes.int16,
    dtypes.bfloat16: dtypes.int16,
    dtypes.float32: dtypes.int32,
    dtypes.float64: dtypes.int64,
}
_ROUNDING_MODES = (None, "trunc", "floor")


def _number(value: Any, op: str, what: str, nonzero: bool = False) -> float:
    """A real-number parameter of an activation (alpha, beta, a slope...), checked at the public call."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{op}: {what} must be a number, got {value!r}")
    if nonzero and value == 0:
        raise ArgumentError(f"{op}: {what} must not be 0")
    return value


def _float_math(fn: Callable[..., Tensor]) -> Callable[..., Tensor]:
    """Runs `fn` on the input in its compute dtype (float32, or float64 for float64) and rounds the result to
    the output dtype (the input's float dtype; float32 for integers and bool)."""

    @functools.wraps(fn)
    def wrapper(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        out = self.dtype if dtypes.is_float(self.dtype) else dtypes.default_float
        return fn(self.cast(compute_dtype(self.dtype)), *args, **kwargs).cast(out)

    return wrapper


def _derivative(rule: Callable[[Tensor, Tensor], Tensor]) -> Callable[[Callable[..., Tensor]], Callable[..., Tensor]]:
    """States a unary op's derivative dy/dx = rule(x, y): its gradient is `g * rule(x, y)` (a CUSTOM_GRAD, see
    gradient.py), not traced through the bit tricks, fits and range reductions that compute y."""

    def backward(g: Tensor, y: Tensor, x: Tensor) -> tuple[Tensor]:
        return (g * rule(x, y).cast(g.dtype),)

    def decorate(fn: Callable[..., Tensor]) -> Callable[..., Tensor]:
        name = fn.__name__.lstrip("_")
        custom_gradient(name)(backward)

        @functools.wraps(fn)
        def wrapper(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
            return fn(self, *args, **kwargs)._custom_grad(name, self)

        return wrapper

    return decorate


@custom_gradient("pow")
def _pow_grad(g: Tensor, out: Tensor, base: Tensor, e: Tensor) -> tuple[Tensor, Tensor]:
    """d(b**e) = e * b**(e-1) db + b**e * log(b) de; 0 where e is 0 (for db) and where b is 0 <= e (for de), as
    PyTorch."""
    dbase = (e == 0).where(0.0, g * e * base.pow(e - 1))
    de = ((base == 0) & (e >= 0)).where(0.0, g * out * base.log())
    return dbase, de


@custom_gradient("fmod")
def _fmod_grad(g: Tensor, out: Tensor, a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    """fmod(a, b) = a - trunc(a / b) * b."""
    return g, -g * a.div(b, rounding_mode="trunc")


@custom_gradient("mod")
def _mod_grad(g: Tensor, out: Tensor, a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    """a % b = a - floor(a / b) * b."""
    return g, -g * a.div(b, rounding_mode="floor")


@custom_gradient("leaky_relu")
def _leaky_relu_grad(g: Tensor, out: Tensor, x: Tensor, slope: Tensor) -> tuple[Tensor, None]:
    """g where x > 0, else g * slope: the slope at 0 too, as PyTorch."""
    return (x > 0).where(g, g * slope), None


@custom_gradient("hardtanh")
def _hardtanh_grad(g: Tensor, out: Tensor, x: Tensor, low: Tensor, high: Tensor) -> tuple[Tensor, None, None]:
    """clamp(x, low, high) with PyTorch's hardtanh gradient: g strictly between the bounds, 0 at them (clamp's own
    gradient, like PyTorch's clamp, passes g at the bounds)."""
    return ((x > low) & (x < high)).where(g, 0.0), None, None


@custom_gradient("copysign")
def _copysign_grad(g: Tensor, out: Tensor, a: Tensor, b: Tensor) -> tuple[Tensor, None]:
    """copysign(a, b) = +-a: the gradient is +-g (0 at a = 0, as PyTorch); none flows to b."""
    return (a == 0).where(0.0, g * out / a), None


class ElementwiseMixin:
    """Ops that map each element (after broadcasting) to one result element."""

    __slots__ = ()

    # *** helpers ***

    def _const(self, value: Any, dtype: DType | None = None) -> Tensor:
        """A 0-d constant on this tensor's device (of this tensor's dtype unless `dtype` says otherwise)."""
        return self._new(UOp.const(dtype or self.dtype, value))

    def _alu(self, op: Ops, *others: Tensor) -> Tensor:
        """`op` on tensors that already share one dtype and shape."""
        return self._new(self.uop.alu(op, *(o.uop for o in others)))

    def _pair(self, x: Any, name: str, reverse: bool = False) -> tuple[Tensor, Tensor]:
        a, b = self._operands(name, x)
        return (b, a) if reverse else (a, b)

    def _check_dtype(self, name: str, *, floats: bool = True, bools: bool = True) -> None:
        dt = self.dtype
        if (not floats and dtypes.is_float(dt)) or (not bools and dtypes.is_bool(dt)):
            raise DTypeError(f"{name}: not supported for tensors of dtype {dt!r}")

    def _signbit(self) -> Tensor:
        """True where the sign bit is set (for floats that includes -0.0 and negative NaNs)."""
        if dtypes.is_float(self.dtype):
            return self.bitcast(_BITS[self.dtype]) < 0
        return self < 0

    def _with_sign_of(self, sign: Tensor) -> Tensor:
        """|self| with the sign bit of `sign` (both floats of one dtype): copysign."""
        it = _BITS[self.dtype]
        low = dtypes.max(it)  # every bit but the sign bit
        bits = (self.bitcast(it) & low) | (sign.bitcast(it) & dtypes.min(it))
        return bits.bitcast(self.dtype)

    def _poly(self, coeffs: tuple[float, ...]) -> Tensor:
        """coeffs[0] + coeffs[1]*x + ... by Horner's rule."""
        acc = self._const(coeffs[-1])
        for c in reversed(coeffs[:-1]):
            acc = acc * self + c
        return acc

    def _elementwise(self, fn: Callable[[UOp], UOp]) -> Tensor:
        """`fn`, a function that builds arithmetic on one scalar UOp (ALU, CAST, BITCAST and constants), applied
        to every element of self: its graph is rebuilt on self's, each new constant broadcast to self's shape."""
        from zeptograd.tensor import _broadcast_scalar  # tensor.py builds Tensor from this mixin

        ret = fn(self.uop)
        own = set(self.uop.toposort())  # self's graph: reached only through self
        built: dict[UOp, UOp] = {self.uop: self.uop}
        for u in ret.toposort():
            if u in built:
                continue
            if u.op is Ops.CONST:  # fn's constants (one may also appear in self's graph)
                built[u] = _broadcast_scalar(u.dtype, type(u.arg), u.arg, self.shape)
            elif u not in own:
                built[u] = UOp(u.op, u.dtype, tuple(built[s] for s in u.src), u.arg)
        return self._new(built[ret])

    def _with_hardtanh_grad(self, x: Tensor, low: float, high: float) -> Tensor:
        """This value (x clamped to [low, high]) with the gradient of PyTorch's hardtanh family: none at the
        bounds."""
        if not dtypes.is_float(self.dtype):
            return self
        return self._custom_grad("hardtanh", x, self._const(low), self._const(high))

    def _norm_sqrt(self) -> Tensor:
        """sqrt of a sum of squares (so never of -0.0) whose gradient at 0 is 0, PyTorch's choice for norms and
        std: sqrt's own is inf there, which times the 0 that flows into it would be NaN."""
        zero = self == 0
        return zero.where(0.0, zero.where(1.0, self).sqrt())

    def _fdiv(self, x: Tensor) -> Tensor:
        """self * (1/x): the division inside composed float math, in the compute dtype (`/` rounds correctly,
        through float64, which these formulas do not need)."""
        return self * x.reciprocal()

    def _inplace(self, value: Tensor, name: str) -> Tensor:
        """Assign `value` to self, cast to self's dtype when PyTorch would (never float to int, int to bool)."""
        if value.dtype is not self.dtype:
            if category(value.dtype) > category(self.dtype):
                raise TypeError(f"{name}: the result's dtype {value.dtype!r} can't be cast to {self.dtype!r} in place")
            value = value.cast(self.dtype)
        return self.assign(value)

    # *** arithmetic ***

    def add(self, x: Any, reverse: bool = False) -> Tensor:
        """self + x, with broadcasting and promotion.

        >>> Tensor([1, 2]).add(0.5).tolist()
        [1.5, 2.5]
        """
        return self._binary(Ops.ADD, x, "add", reverse)

    def sub(self, x: Any, reverse: bool = False) -> Tensor:
        """self - x (x - self when `reverse`).

        >>> Tensor([1, 2]).sub(3).tolist()
        [-2, -1]
        """
        return self._binary(Ops.SUB, x, "sub", reverse)

    def mul(self, x: Any, reverse: bool = False) -> Tensor:
        """self * x.

        >>> Tensor([1, 2]).mul(Tensor([[1], [10]])).tolist()
        [[1, 2], [10, 20]]
        """
        return self._binary(Ops.MUL, x, "mul", reverse)

    def div(self, x: Any, reverse: bool = False, rounding_mode: str | None = None) -> Tensor:
        """self / x. True division by default (integers divide as float32; the quotient is correctly rounded, as
        IEEE division is); `rounding_mode="trunc"` rounds the
        quotient toward zero (C's integer division), `"floor"` rounds it down (Python's `//`). Integer division
        by zero gives 0 with a rounding mode; float division by zero gives inf or nan, as in numpy.

        >>> Tensor([7, -7]).div(2).tolist(), Tensor([7, -7]).div(2, rounding_mode="trunc").tolist()
        ([3.5, -3.5], [3, -3])
        """
        if rounding_mode not in _ROUNDING_MODES:
            raise ArgumentError(f"div: rounding_mode must be None, 'trunc' or 'floor', not {rounding_mode!r}")
        a, b = self._pair(x, "div", reverse)
        if rounding_mode == "floor":
            return a._floordiv(b, "div")
        if rounding_mode == "trunc":
            return a._truncdiv(b)
        a, b = a._float(), b._float()
        return a._alu(Ops.FDIV, b)  # IEEE division: correctly rounded, as in PyTorch

    def _int_guard(self, b: Tensor) -> tuple[Tensor, Tensor, Tensor | None]:
        """The divisor `b` made safe for IDIV/MOD in C: 0 (a trap) becomes 1, and for 64-bit ints so does -1
        (INT64_MIN / -1 traps too). Returns (safe divisor, b == 0, b == -1 or None)."""
        zero = b == 0
        minus_one = (b == -1) if self.dtype in (dtypes.int64,) else None
        bad = zero if minus_one is None else zero | minus_one
        return bad.where(b._const(1), b), zero, minus_one

    def _int_floordiv(self, b: Tensor) -> Tensor:
        safe, zero, minus_one = self._int_guard(b)
        q = self._alu(Ops.IDIV, safe)
        if minus_one is not None:
            # x // -1 is -x; negate in uint64, where wrapping is defined (-INT64_MIN is INT64_MIN)
            q = minus_one.where((0 - self.cast(dtypes.uint64)).cast(self.dtype), q)
        return zero.where(self._const(0), q)

    def _int_mod(self, b: Tensor) -> Tensor:
        safe, zero, _ = self._int_guard(b)
        return zero.where(self._const(0), self._alu(Ops.MOD, safe))

    def _floordiv(self, b: Tensor, name: str) -> Tensor:
        """floor(self / b) for operands of one dtype, as Python and numpy compute it."""
        self._check_dtype(name, bools=False)
        if not dtypes.is_float(self.dtype):
            return self._int_floordiv(b)
        # numpy's and Python's algorithm, step by step in the dtype numpy computes in (float32 for float16), so
        # that the roundings are the same: mod = fmod(a, b) (exact), div = (a - mod) / b, one down if mod and b
        # differ in sign, then div rounded to the nearest integer (it is one, up to the rounding of the division)
        w, ct = dtypes.float64, compute_dtype(self.dtype)
        bw = b.cast(w)
        mod = self.cast(w)._fmod_wide(bw, self.dtype).cast(ct)
        a, b = self.cast(ct), b.cast(ct)
        div = ((a - mod).cast(w) * bw.reciprocal()).cast(ct)  # the division, correctly rounded to ct
        div = ((mod != 0) & ((b < 0) != (mod < 0))).where(div - 1, div)
        q = div.floor()
        q = (div - q > 0.5).where(q + 1, q)
        zero = (a._signbit() != b._signbit()).where(a._const(-0.0), a._const(0.0))  # copysign(0, a/b)
        q = (div == 0).where(zero, q)
        return (b == 0).where(a * b.reciprocal(), q).cast(self.dtype)

    def _truncdiv(self, b: Tensor) -> Tensor:
        """trunc(self / b): C's integer division; for floats the quotient rounded to the dtype, then truncated
        (PyTorch's rounding_mode="trunc")."""
        self._check_dtype("div", bools=False)
        dt = self.dtype
        if not dtypes.is_float(dt):
            q = self._int_floordiv(b)
            r = self._int_mod(b)
            return ((r != 0) & ((self < 0) != (b < 0))).where(q + 1, q)
        w, ct = dtypes.float64, compute_dtype(dt)
        q = (self.cast(w) * b.cast(w).reciprocal()).cast(ct)
        return q.trunc().cast(dt)

    def _fmod_wide(self, b: Tensor, orig: DType) -> Tensor:
        """C's fmod of self and b, which hold values of the float dtype `orig` in float64.

        fmod(|a|, |b|) by steps: x -> x mod |b|*2**k for k = ..., 51, 0 (reducing by a multiple of |b| keeps the
        remainder). A step computes q = trunc(x/B), off by at most one while x/B < 2**52, and r = x - q*B exactly:
        q splits into a high part with 29 significant bits and a low part below 2**23, so that with B's 24 bits
        both products are exact float64 numbers; then r moves into [0, B). So float32 remainders are exact while
        |a/b| < 2**154 (for any float32 a once |b| >= 1.5e-8), float16 ones always; float64 ones take one step
        with q*b rounded (exact for small quotients only)."""
        steps = {dtypes.float32: (102, 51, 0), dtypes.float16: (0,)}.get(orig)
        x, bb = self.abs(), b.abs()
        if steps is None:  # float64: one plain step
            q = (x * bb.reciprocal()).trunc()
            r = x - q * bb
            r = (r < 0).where(r + bb, r)
            x = (r >= bb).where(r - bb, r)
        else:
            rb = bb.reciprocal()
            for k in steps:
                big, inv = bb * 2.0**k, rb * 2.0**-k  # exact scalings
                q = (x * inv).trunc()
                qh = (q * 2.0**-23).trunc() * 2.0**23
                r = (x - qh * big) - (q - qh) * big
                r = (r < 0).where(r + big, r)
                x = (r >= big).where(r - big, r)
        x = self._signbit().where(-x, x)  # the dividend's sign, for a zero remainder too
        return (b.isinf() & self.isfinite()).where(self, x)

    def fmod(self, x: Any) -> Tensor:
        """The remainder of self / x with the sign of the dividend (C's fmod, PyTorch's fmod). Exact for floats;
        integers modulo 0 give 0.

        >>> Tensor([-7, 7]).fmod(3).tolist(), Tensor([-7.5, 7.5]).fmod(2).tolist()
        ([-1, 1], [-1.5, 1.5])
        """
        a, b = self._operands("fmod", x)
        a._check_dtype("fmod", bools=False)
        if not dtypes.is_float(a.dtype):
            r = a._int_mod(b)
            return ((r != 0) & ((r < 0) != (a < 0))).where(r - b, r)
        w = dtypes.float64
        return a.cast(w)._fmod_wide(b.cast(w), a.dtype).cast(a.dtype)._custom_grad("fmod", a, b)

    def mod(self, x: Any, reverse: bool = False) -> Tensor:
        """The remainder of self / x with the sign of the divisor (Python's and PyTorch's `%`, numpy's
        remainder). Exact for floats; integers modulo 0 give 0.

        >>> Tensor([-7, 7]).mod(3).tolist(), Tensor([-7.5, 7.5]).mod(-2).tolist()
        ([2, 1], [-1.5, -0.5])
        """
        a, b = self._pair(x, "mod", reverse)
        a._check_dtype("mod", bools=False)
        if not dtypes.is_float(a.dtype):
            return a._int_mod(b)
        w = dtypes.float64
        aw, bw = a.cast(w), b.cast(w)
        r = aw._fmod_wide(bw, a.dtype)
        r = ((r != 0) & ((bw < 0) != (r < 0))).where(r + bw, r)
        zero = (bw < 0).where(bw._const(-0.0), bw._const(0.0))  # a zero remainder has the divisor's sign
        r = (r == 0).where(zero, r)
        return r.cast(a.dtype)._custom_grad("mod", a, b)

    remainder = mod

    def floor_divide(self, x: Any) -> Tensor:
        """self // x, rounding down (numpy's and PyTorch's name).

        >>> Tensor([7, -7]).floor_divide(2).tolist()
        [3, -4]
        """
        return self.div(x, rounding_mode="floor")

    def _int_pow(self, e: Tensor) -> Tensor:
        """self ** e for integer tensors of one dtype: square-and-multiply over every bit of the exponent
        (products wrap, as in numpy and PyTorch). A negative exponent gives 1/self**|e| truncated: 1 for a base
        of 1, +-1 for -1, 0 otherwise (integer division by zero included)."""
        result, base, bits = self._const(1), self, 8 * self.dtype.itemsize - (0 if dtypes.is_unsigned(e.dtype) else 1)
        for i in range(bits):
            bit = ((e >> i) & 1) != 0
            result = bit.where(result * base, result)
            if i + 1 < bits:
                base = base * base
        if dtypes.is_unsigned(e.dtype):
            return result
        odd = (e & 1) != 0
        neg = (self == 1).where(1, (self == -1).where(odd.where(-1, 1), 0)).cast(self.dtype)
        return (e < 0).where(neg, result)

    def _static_int_pow(self, n: int) -> Tensor:
        """self ** n for a Python int n >= 0, unrolled (square-and-multiply at graph-building time)."""
        result: Tensor | None = None
        base = self
        while n:
            if n & 1:
                result = base if result is None else result * base
            n >>= 1
            if n:
                base = base * base
        return result if result is not None else self._const(1)._broadcast_to(self.shape)

    def pow(self, x: Any, reverse: bool = False) -> Tensor:
        """self ** x (x ** self when `reverse`). Integer ** integer stays integer (exact, wrapping; a negative
        Python-int exponent is an error); otherwise C's pow: 0 ** 0 = 1, 1 ** nan = 1, a negative base with an
        integer exponent keeps its sign by parity, a negative base with a non-integer exponent is nan.

        >>> (Tensor([2, -3]) ** 3).tolist(), (Tensor([-8.0, 4.0]) ** Tensor([2.0, 0.5])).tolist()
        ([8, -27], [64.0, 2.0])
        """
        base, e = self._pair(x, "pow", reverse)
        dt = base.dtype
        base._check_dtype("pow", bools=False)
        scalar = None if reverse or isinstance(x, type(self)) else x
        if not dtypes.is_float(dt):
            if isinstance(scalar, int) and not isinstance(scalar, bool):
                if scalar < 0:
                    raise ArgumentError(
                        f"pow: integers to negative integer powers are not allowed ({dt!r} ** {scalar})"
                    )
                return base._static_int_pow(scalar)
            return base._int_pow(e)
        # the cheap exact forms numpy and PyTorch also use for these Python-scalar exponents (x ** 0.5 is sqrt:
        # nan for -inf, -0.0 for -0.0, where C's pow gives inf and 0.0)
        if scalar is not None and scalar in (0, 1, 2, 3, -1, -2, 0.5):
            if scalar == 0.5:
                return base.sqrt()
            if scalar == 0:  # ones that still depend on base, so its gradient is zeros (as PyTorch), not an error
                return base._const(1.0)._broadcast_to(base.shape)._custom_grad("pow", base, e)
            if scalar > 0:
                return base._static_int_pow(int(scalar))
            return base._static_int_pow(-int(scalar)).reciprocal()
        w = dtypes.float32 if dt is dtypes.float16 else dtypes.float64
        b, y = base.cast(w), e.cast(w)
        r = (y * b.abs().log2()).exp2()
        y_int = y == y.trunc()  # inf counts as an (even) integer, as in C
        y_odd = y_int & y.isfinite() & ((y - (y * 0.5).trunc() * 2) != 0)
        r = (b._signbit() & y_odd).where(-r, r)
        r = ((b < 0) & b.isfinite() & (y_int.logical_not())).where(math.nan, r)
        r = ((b == -1) & y.isinf()).where(1.0, r)
        r = ((y == 0) | (b == 1)).where(1.0, r)
        return r.cast(dt)._custom_grad("pow", base, e)

    def square(self) -> Tensor:
        """self * self (bool squares as int32).

        >>> Tensor([-3, 2]).square().tolist()
        [9, 4]
        """
        x = self.cast(dtypes.int32) if dtypes.is_bool(self.dtype) else self
        return x * x

    def lerp(self, end: Any, weight: Any) -> Tensor:
        """self + weight * (end - self), computed from the nearer end so that weight 1 gives `end` exactly.

        >>> Tensor([1.0, 2.0]).lerp(Tensor([3.0, 6.0]), 0.5).tolist()
        [2.0, 4.0]
        """
        a, e, w = self._operands("lerp", end, weight)
        d = e - a
        return (w.abs() < 0.5).where(a + w * d, e - d * (1 - w))

    def copysign(self, x: Any) -> Tensor:
        """|self| with the sign of x (the sign bit: -0.0 counts as negative); integers promote to float32.

        >>> Tensor([1, 2]).copysign(Tensor([-0.0, 3.0])).tolist()
        [-1.0, 2.0]
        """
        a, b = self._operands("copysign", x)
        if not dtypes.is_float(a.dtype):
            a, b = a.cast(dtypes.default_float), b.cast(dtypes.default_float)
        return a._with_sign_of(b)._custom_grad("copysign", a, b)

    # *** comparisons and selection ***

    def __lt__(self, x: Any) -> Tensor:
        return self._binary(Ops.CMPLT, x, "<")

    def __gt__(self, x: Any) -> Tensor:
        return self._binary(Ops.CMPLT, x, ">", reverse=True)

    def __le__(self, x: Any) -> Tensor:
        return (self < x) | (self == x)  # not (x < self): NaN <= y is False

    def __ge__(self, x: Any) -> Tensor:
        return (self > x) | (self == x)

    def __eq__(self, x: Any) -> Tensor:  # type: ignore[override]
        return self._binary(Ops.CMPEQ, x, "==")

    def __ne__(self, x: Any) -> Tensor:  # type: ignore[override]
        return self._binary(Ops.CMPNE, x, "!=")

    def lt(self, x: Any) -> Tensor:
        """self < x, elementwise (a bool tensor).

        >>> Tensor([1, 3]).lt(2).tolist()
        [True, False]
        """
        return self < x

    def gt(self, x: Any) -> Tensor:
        """self > x.

        >>> Tensor([1, 3]).gt(2).tolist()
        [False, True]
        """
        return self > x

    def le(self, x: Any) -> Tensor:
        """self <= x.

        >>> Tensor([1, 2]).le(2).tolist()
        [True, True]
        """
        return self <= x

    def ge(self, x: Any) -> Tensor:
        """self >= x.

        >>> Tensor([1, 2]).ge(2).tolist()
        [False, True]
        """
        return self >= x

    def eq(self, x: Any) -> Tensor:
        """self == x.

        >>> Tensor([1.0, float("nan")]).eq(1).tolist()
        [True, False]
        """
        return self == x

    def ne(self, x: Any) -> Tensor:
        """self != x.

        >>> Tensor([1, 2]).ne(2).tolist()
        [True, False]
        """
        return self != x

    def where(self, x: Any, y: Any) -> Tensor:
        """`x` where this tensor is true (nonzero), else `y`; x and y promote together (Python scalars weakly).

        >>> (Tensor([1, -2]) > 0).where(1.0, 0.0).tolist()
        [1.0, 0.0]
        """
        cond = self.cast(dtypes.bool)
        if isinstance(x, type(self)):
            a, b = x._operands("where", y)
        elif isinstance(y, type(self)):
            b, a = y._operands("where", x)
        else:
            for v in (x, y):
                if not isinstance(v, (bool, int, float)):
                    raise TypeError(f"where: unsupported operand type {type(v).__name__}")
            dt = result_type(x, y)
            a, b = self._const(x, dt), self._const(y, dt)
        shape = self._broadcast_shape("where", cond.shape, a.shape, b.shape)
        cond, a, b = cond._broadcast_to(shape), a._broadcast_to(shape), b._broadcast_to(shape)
        return a._new(cond.uop.where(a.uop, b.uop))

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

    def clamp(self, min_: Any = None, max_: Any = None, *, min: Any = None, max: Any = None) -> Tensor:
        """Values below `min_` become `min_`, above `max_` become `max_` (PyTorch's `min=`/`max=` keywords work
        too); when min_ > max_ everything is max_, and NaN stays NaN. Bounds may be tensors.

        >>> Tensor([-2.0, 0.5, 3.0]).clamp(-1, 1).tolist(), Tensor([1, 5]).clip(max_=3).tolist()
        ([-1.0, 0.5, 1.0], [1, 3])
        """
        lo = min_ if min_ is not None else min
        hi = max_ if max_ is not None else max
        if lo is None and hi is None:
            raise RuntimeError("clamp: at least one of min_ and max_ must be given")
        bounds = [b for b in (lo, hi) if b is not None]
        x, *rest = self._operands("clamp", *bounds)
        if lo is not None:
            low = rest.pop(0)
            x = (x < low).where(low, x)
        if hi is not None:
            high = rest.pop(0)
            x = (x > high).where(high, x)
        return x

    def clip(self, min_: Any = None, max_: Any = None, *, min: Any = None, max: Any = None) -> Tensor:
        """`clamp` under numpy's name.

        >>> Tensor([-2, 0, 2]).clip(-1, 1).tolist()
        [-1, 0, 1]
        """
        return self.clamp(min_, max_, min=min, max=max)

    # *** bitwise and logical ops ***

    def _bitwise(self, op: Ops, x: Any, name: str, reverse: bool) -> Tensor:
        a, b = self._pair(x, name, reverse)
        a._check_dtype(name, floats=False)
        return a._alu(op, b)

    def bitwise_and(self, x: Any, reverse: bool = False) -> Tensor:
        """self & x, for integers and bool.

        >>> Tensor([12, 10]).bitwise_and(6).tolist()
        [4, 2]
        """
        return self._bitwise(Ops.AND, x, "bitwise_and", reverse)

    def bitwise_or(self, x: Any, reverse: bool = False) -> Tensor:
        """self | x, for integers and bool.

        >>> Tensor([12, 10]).bitwise_or(1).tolist()
        [13, 11]
        """
        return self._bitwise(Ops.OR, x, "bitwise_or", reverse)

    def bitwise_xor(self, x: Any, reverse: bool = False) -> Tensor:
        """self ^ x, for integers and bool.

        >>> Tensor([True, False]).bitwise_xor(True).tolist()
        [False, True]
        """
        return self._bitwise(Ops.XOR, x, "bitwise_xor", reverse)

    def bitwise_not(self) -> Tensor:
        """~self: every bit flipped for integers, logical not for bool.

        >>> Tensor([0, 5]).bitwise_not().tolist(), Tensor([True]).bitwise_not().tolist()
        ([-1, -6], [False])
        """
        self._check_dtype("bitwise_not", floats=False)
        if dtypes.is_bool(self.dtype):
            return self.logical_not()
        return self._alu(Ops.XOR, self._const(dtypes.max(self.dtype) if dtypes.is_unsigned(self.dtype) else -1))

    def _shift(self, x: Any, name: str, reverse: bool, left: bool) -> Tensor:
        a, b = self._pair(x, name, reverse)
        a._check_dtype(name, floats=False, bools=False)
        width = 8 * a.dtype.itemsize
        # C leaves shifts by a negative amount or by the width or more undefined; numpy's and PyTorch's answer
        # is 0 for left shifts and unsigned right shifts, all sign bits (a shift by width-1) for signed ones
        bad = (b < 0) | (b >= width)
        amount = bad.where(b._const(0), b)
        if left:
            return bad.where(a._const(0), a._alu(Ops.SHL, amount))
        if dtypes.is_unsigned(a.dtype):
            return bad.where(a._const(0), a._alu(Ops.SHR, amount))
        return a._alu(Ops.SHR, bad.where(b._const(width - 1), b))

    def lshift(self, x: Any, reverse: bool = False) -> Tensor:
        """self << x for integers (shifting by the width or more, or by a negative amount, gives 0).

        >>> Tensor([1, 3]).lshift(2).tolist()
        [4, 12]
        """
        return self._shift(x, "lshift", reverse, left=True)

    def rshift(self, x: Any, reverse: bool = False) -> Tensor:
        """self >> x for integers, arithmetic for signed ones (shifting by the width or more gives 0 or -1).

        >>> Tensor([-8, 8]).rshift(2).tolist()
        [-2, 2]
        """
        return self._shift(x, "rshift", reverse, left=False)

    bitwise_left_shift = lshift
    bitwise_right_shift = rshift

    def logical_not(self) -> Tensor:
        """not self (nonzero is true), as a bool tensor.

        >>> Tensor([0, 2]).logical_not().tolist()
        [True, False]
        """
        return self._new(self.cast(dtypes.bool).uop.alu(Ops.NEG))

    def logical_and(self, x: Any) -> Tensor:
        """self and x (nonzero is true), as a bool tensor.

        >>> Tensor([0, 1, 2]).logical_and(Tensor([1, 0, 3])).tolist()
        [False, False, True]
        """
        a, b = self._operands("logical_and", x)
        return a.cast(dtypes.bool) & b.cast(dtypes.bool)

    def logical_or(self, x: Any) -> Tensor:
        """self or x (nonzero is true), as a bool tensor.

        >>> Tensor([0, 1, 0]).logical_or(Tensor([0, 0, 2])).tolist()
        [False, True, True]
        """
        a, b = self._operands("logical_or", x)
        return a.cast(dtypes.bool) | b.cast(dtypes.bool)

    def logical_xor(self, x: Any) -> Tensor:
        """self xor x (nonzero is true), as a bool tensor.

        >>> Tensor([0, 1, 2]).logical_xor(Tensor([0, 0, 3])).tolist()
        [False, True, False]
        """
        a, b = self._operands("logical_xor", x)
        return a.cast(dtypes.bool) ^ b.cast(dtypes.bool)

    # *** unary ops that keep the dtype ***

    def neg(self) -> Tensor:
        """-self (logical not for bool).

        >>> Tensor([1.0, -2.0]).neg().tolist()
        [-1.0, 2.0]
        """
        return self._new(self.uop.alu(Ops.NEG))

    @_derivative(lambda x, y: x.sign())
    def abs(self) -> Tensor:
        """|self|, exact: abs(-0.0) is 0.0, NaN stays NaN (and the smallest integer stays itself, as in numpy).

        >>> Tensor([-1.5, 2.0]).abs().tolist(), Tensor([-3, 3]).abs().tolist()
        ([1.5, 2.0], [3, 3])
        """
        dt = self.dtype
        if dtypes.is_float(dt):
            it = _BITS[dt]
            return (self.bitcast(it) & dtypes.max(it)).bitcast(dt)  # clear the sign bit
        if dtypes.is_bool(dt) or dtypes.is_unsigned(dt):
            return self
        return (self < 0).where(-self, self)

    def sign(self) -> Tensor:
        """-1, 0 or 1 by the sign of self (NaN stays NaN, -0.0 gives 0.0; bool stays itself).

        >>> Tensor([-2.5, 0.0, 3.0]).sign().tolist()
        [-1.0, 0.0, 1.0]
        """
        if dtypes.is_bool(self.dtype):
            return self
        one = self._const(1)
        out = (self > 0).where(one, (self < 0).where(self._const(-1), self._const(0)))
        return (self != self).where(self, out) if dtypes.is_float(self.dtype) else out

    def trunc(self) -> Tensor:
        """self rounded toward zero (integers stay as they are).

        >>> Tensor([-1.7, 1.7]).trunc().tolist()
        [-1.0, 1.0]
        """
        return self._alu(Ops.TRUNC) if dtypes.is_float(self.dtype) else self

    def floor(self) -> Tensor:
        """The largest integer <= self.

        >>> Tensor([-1.5, 1.5]).floor().tolist()
        [-2.0, 1.0]
        """
        if not dtypes.is_float(self.dtype):
            return self
        t = self.trunc()
        return (self < t).where(t - 1, t)

    def ceil(self) -> Tensor:
        """The smallest integer >= self.

        >>> Tensor([-1.5, 1.5]).ceil().tolist()
        [-1.0, 2.0]
        """
        if not dtypes.is_float(self.dtype):
            return self
        t = self.trunc()
        return (self > t).where(t + 1, t)

    def round(self, decimals: int = 0) -> Tensor:
        """self rounded to the nearest integer, halves to the even one (numpy's and PyTorch's rounding);
        `decimals` rounds to that many decimal places instead.

        >>> Tensor([0.5, 1.5, 2.5, -0.5, -1.7]).round().tolist()
        [0.0, 2.0, 2.0, -0.0, -2.0]
        """
        if isinstance(decimals, bool) or not isinstance(decimals, numbers.Integral):
            raise TypeError(f"round: decimals must be an int, got {decimals!r}")
        if not dtypes.is_float(self.dtype):
            return self
        if decimals:
            scale = 10.0**decimals
            return (self * scale).round() / scale
        t = self.trunc()
        d = self - t  # exact
        odd = (t - (t * 0.5).trunc() * 2) != 0
        up = (d.abs() > 0.5) | ((d.abs() == 0.5) & odd)
        return up.where(t + (d < 0).where(t._const(-1.0), t._const(1.0)), t)

    def __abs__(self) -> Tensor:
        return self.abs()

    # *** float math (integers and bool compute in float32) ***

    def _unary_float(self, op: Ops) -> Tensor:
        x = self._float()
        return x._alu(op)

    def exp2(self) -> Tensor:
        """2 ** self.

        >>> Tensor([3.0, -1.0]).exp2().tolist()
        [8.0, 0.5]
        """
        return self._unary_float(Ops.EXP2)

    def log2(self) -> Tensor:
        """The base-2 logarithm (-inf at 0, nan below).

        >>> Tensor([8.0, 0.5]).log2().tolist()
        [3.0, -1.0]
        """
        return self._unary_float(Ops.LOG2)

    def sqrt(self) -> Tensor:
        """The square root (nan for negative values).

        >>> Tensor([4, 9]).sqrt().tolist()
        [2.0, 3.0]
        """
        return self._unary_float(Ops.SQRT)

    @_float_math
    def rsqrt(self) -> Tensor:
        """1 / sqrt(self).

        >>> Tensor([4.0, 0.25]).rsqrt().tolist()
        [0.5, 2.0]
        """
        return self._alu(Ops.SQRT)._alu(Ops.RECIPROCAL)

    @_float_math
    def sin(self) -> Tensor:
        """The sine (exact argument reduction: accurate for any |self|).

        >>> Tensor([0.0]).sin().tolist()
        [0.0]
        """
        return self._alu(Ops.SIN)

    def reciprocal(self) -> Tensor:
        """1 / self.

        >>> Tensor([2, -4]).reciprocal().tolist()
        [0.5, -0.25]
        """
        return self._unary_float(Ops.RECIPROCAL)

    @_derivative(lambda x, y: y)
    def _exp(self) -> Tensor:
        """e ** self for self in a compute dtype: one EXP op, whose exact range reduction (Cody-Waite: x = n*ln2
        + r) and polynomial the compiler writes (codegen/transcendental.py), so no error grows with the size of
        x and denormal results round once."""
        return self._alu(Ops.EXP)

    def _log(self) -> Tensor:
        return self._alu(Ops.LOG2) * LN2

    @_derivative(lambda x, y: x._exp())  # not y + 1, which cancels for very negative x (elu's gradient there)
    def _expm1(self) -> Tensor:
        """e ** self - 1 without cancellation near 0: the Taylor series for |x| < 1 (to x**11/11! in float32,
        x**18/18! in float64), exp(x) - 1 beyond (where the subtraction loses less than a bit)."""
        terms = 18 if self.dtype is dtypes.float64 else 11
        series = self * self._poly(tuple(1 / math.factorial(k + 1) for k in range(terms)))
        return (self.abs() < 1).where(series, self._exp() - 1)

    @_derivative(lambda x, y: (x + 1).reciprocal())
    def _log1p(self) -> Tensor:
        """log(1 + self) without cancellation near 0 (with u = 1 + x rounded, log(u) * x / (u - 1))."""
        u = self + 1
        ret = u._log() * self._fdiv(u - 1)
        ret = (u == math.inf).where(math.inf, ret)
        return (u == 1).where(self, ret)

    @_derivative(lambda x, y: y * (1 - y))
    def _sigmoid(self) -> Tensor:
        e = (-self.abs())._exp()  # in (0, 1]: no overflow for any x
        s = (1 + e).reciprocal()
        return (self >= 0).where(s, e * s)

    def _softplus(self) -> Tensor:
        return self.maximum(0) + (-self.abs())._exp()._log1p()

    @_derivative(lambda x, y: 1 - y * y)
    def _tanh(self) -> Tensor:
        if self.dtype is not dtypes.float64:
            return self._alu(Ops.TANH)  # one op: its polynomial and exp are the compiler's (transcendental.py)
        a = self.abs().minimum(20.0)  # tanh is 1.0 beyond
        u = (a * 2)._expm1()
        return u._fdiv(u + 2)._with_sign_of(self)

    @_float_math
    def exp(self) -> Tensor:
        """e ** self, within a few ulp over the whole range (denormal results included).

        >>> Tensor([0.0, 1.0]).exp().tolist()
        [1.0, 2.7182817459106445]
        """
        return self._exp()

    @_float_math
    def expm1(self) -> Tensor:
        """e ** self - 1, accurate near 0.

        >>> Tensor([0.0]).expm1().tolist()
        [0.0]
        """
        return self._expm1()

    @_float_math
    def log(self) -> Tensor:
        """The natural logarithm (-inf at 0, nan below).

        >>> Tensor([1.0, 4.0]).log().tolist()
        [0.0, 1.3862943649291992]
        """
        return self._log()

    @_float_math
    def log10(self) -> Tensor:
        """The base-10 logarithm.

        >>> Tensor([100.0]).log10().tolist()
        [2.0]
        """
        return self._alu(Ops.LOG2) * math.log10(2)

    @_float_math
    def log1p(self) -> Tensor:
        """log(1 + self), accurate near 0.

        >>> Tensor([0.0]).log1p().tolist()
        [0.0]
        """
        return self._log1p()

    @_float_math
    def cos(self) -> Tensor:
        """The cosine: one COS op, which the compiler computes as sin's code with the quarter turn added to the
        quadrant of its exact argument reduction (codegen/transcendental.py), not to x: as accurate as sin, for
        any |self| in float32.

        >>> Tensor([0.0]).cos().tolist()
        [1.0]
        """
        return self._alu(Ops.COS)

    @_float_math
    def tan(self) -> Tensor:
        """The tangent: one TAN op, which the compiler computes from sin's exact argument reduction and a
        polynomial for tan (or its reciprocal) of the reduced argument (codegen/transcendental.py): within 2 ulp
        for any |self| in float32.

        >>> Tensor([0.0]).tan().tolist()
        [0.0]
        """
        return self._alu(Ops.TAN)

    def _asin_small(self) -> Tensor:
        """asin on |x| <= 0.5 (the fit)."""
        return self * (self * self)._poly(_ASIN)

    @_derivative(lambda x, y: (1 - x * x).rsqrt())
    @_float_math
    def asin(self) -> Tensor:
        """The arcsine (nan outside [-1, 1]); |x| > 0.5 uses asin(x) = pi/2 - 2*asin(sqrt((1-x)/2)).

        >>> Tensor([0.0, 1.0]).asin().tolist()
        [0.0, 1.5707963705062866]
        """
        a = self.abs()
        big = math.pi / 2 - ((1 - a) * 0.5).sqrt()._asin_small() * 2
        return (a <= 0.5).where(a._asin_small(), big)._with_sign_of(self)

    @_derivative(lambda x, y: -(1 - x * x).rsqrt())
    @_float_math
    def acos(self) -> Tensor:
        """The arccosine (nan outside [-1, 1]), accurate near both ends.

        >>> Tensor([1.0, 0.0]).acos().tolist()
        [0.0, 1.5707963705062866]
        """
        near_one = ((1 - self) * 0.5).sqrt()._asin_small() * 2
        near_minus_one = math.pi - ((1 + self) * 0.5).sqrt()._asin_small() * 2
        middle = math.pi / 2 - self._asin_small()
        return (self > 0.5).where(near_one, (self < -0.5).where(near_minus_one, middle))

    @_derivative(lambda x, y: (1 + x * x).reciprocal())
    @_float_math
    def atan(self) -> Tensor:
        """The arctangent: |x| is reduced to |t| <= tan(pi/8) by atan(x) = pi/4 + atan((x-1)/(x+1)) and
        atan(x) = pi/2 - atan(1/x).

        >>> Tensor([0.0, 1.0]).atan().tolist()
        [0.0, 0.7853981852531433]
        """
        a = self.abs()
        mid = a > math.tan(math.pi / 8)
        big = a > math.tan(3 * math.pi / 8)
        t = big.where(-a.reciprocal(), mid.where((a - 1)._fdiv(a + 1), a))
        base = big.where(a._const(math.pi / 2), mid.where(a._const(math.pi / 4), a._const(0.0)))
        return (base + t * (t * t)._poly(_ATAN))._with_sign_of(self)

    @_derivative(lambda x, y: x.cosh())
    @_float_math
    def sinh(self) -> Tensor:
        """The hyperbolic sine: (u + u/(u+1)) / 2 with u = expm1(|x|), accurate near 0; e**(|x|/2) squared where
        e**|x| would overflow first.

        >>> Tensor([0.0]).sinh().tolist()
        [0.0]
        """
        a = self.abs()
        u = a._expm1()
        small = (u + u._fdiv(u + 1)) * 0.5
        e = (a * 0.5)._exp()
        return (a < 20).where(small, (e * 0.5) * e)._with_sign_of(self)

    @_derivative(lambda x, y: x.sinh())
    @_float_math
    def cosh(self) -> Tensor:
        """The hyperbolic cosine.

        >>> Tensor([0.0]).cosh().tolist()
        [1.0]
        """
        a = self.abs()
        e = a._exp()
        half = (a * 0.5)._exp()
        return (a < 20).where((e + e.reciprocal()) * 0.5, (half * 0.5) * half)

    @_float_math
    def tanh(self) -> Tensor:
        """The hyperbolic tangent, expm1(2|x|) / (expm1(2|x|) + 2) with the sign of x.

        >>> Tensor([0.0]).tanh().tolist()
        [0.0]
        """
        return self._tanh()

    @_derivative(lambda x, y: (x * x + 1).rsqrt())
    @_float_math
    def asinh(self) -> Tensor:
        """The inverse hyperbolic sine, log1p(a + a*a / (1 + sqrt(1 + a*a))), log(a) + ln2 for large a.

        >>> Tensor([0.0]).asinh().tolist()
        [0.0]
        """
        a = self.abs()
        small = (a + (a * a)._fdiv(1 + (a * a + 1).sqrt()))._log1p()
        return (a < 2.0**26).where(small, a._log() + LN2)._with_sign_of(self)

    @_derivative(lambda x, y: (x * x - 1).rsqrt())
    @_float_math
    def acosh(self) -> Tensor:
        """The inverse hyperbolic cosine (nan below 1), log1p((x-1) + sqrt((x-1)(x+1))), log(x) + ln2 for large x.

        >>> Tensor([1.0]).acosh().tolist()
        [0.0]
        """
        xm1 = self - 1
        small = (xm1 + (xm1 * (self + 1)).sqrt())._log1p()
        return (self < 2.0**26).where(small, self._log() + LN2)

    @_derivative(lambda x, y: (1 - x * x).reciprocal())
    @_float_math
    def atanh(self) -> Tensor:
        """The inverse hyperbolic tangent, log1p(2a / (1 - a)) / 2 with the sign of x (+-inf at +-1, nan beyond).

        >>> Tensor([0.0]).atanh().tolist()
        [0.0]
        """
        a = self.abs()
        return ((a * 2)._fdiv(1 - a)._log1p() * 0.5)._with_sign_of(self)

    def _erfc_large(self, precise: bool) -> Tensor:
        """erfc(a) for a >= 0.5 (self is a). With `precise`, exp(-a*a) is exp(-h*h) * exp(-(a-h)(a+h)) with h = a
        rounded to 8 fraction bits, so that h*h is exact and the rounding of a*a does not cost relative accuracy
        in the tail (erf only needs it to absolute accuracy)."""
        a = self
        if precise:
            h = (a * 256).trunc() * (1 / 256)
            e = (-(h * h))._exp() * (-((a - h) * (a + h)))._exp()
        else:
            e = (-(a * a))._exp()
        tail = e._fdiv(a) * (a * a).reciprocal()._poly(_ERFC_TAIL)
        return (a < 2.5).where(e * (a - 1.5)._poly(_ERFC), tail)

    @_derivative(lambda x, y: (-(x * x)).exp() * (-2 / math.sqrt(math.pi)))
    def _erfc(self) -> Tensor:
        a = self.abs().minimum(30.0)  # erfc(30) is 0 in float64 too; NaN stays NaN
        r = (a < 0.5).where(1 - a * (a * a)._poly(_ERF), a.maximum(0.5)._erfc_large(precise=True))
        return (self < 0).where(2 - r, r)

    @_float_math
    def erfc(self) -> Tensor:
        """The complementary error function 1 - erf(self), with relative accuracy in the tail.

        >>> Tensor([0.0, 30.0]).erfc().tolist()
        [1.0, 0.0]
        """
        return self._erfc()

    @_derivative(lambda x, y: (-(x * x)).exp() * (2 / math.sqrt(math.pi)))
    def _erf(self) -> Tensor:
        a = self.abs().minimum(6.0)  # erf(6) is 1 - 2e-17; NaN stays NaN
        ret = (a < 1).where(a * (a * a)._poly(_ERF), 1 - a.maximum(1)._erfc_large(precise=False))
        return ret._with_sign_of(self)

    @_float_math
    def erf(self) -> Tensor:
        """The error function (within a few ulp; relative accuracy near 0).

        >>> Tensor([0.0, 10.0]).erf().tolist()
        [0.0, 1.0]
        """
        return self._erf()

    # *** float predicates ***

    def isnan(self) -> Tensor:
        """True where self is NaN.

        >>> Tensor([1.0, float("nan")]).isnan().tolist()
        [False, True]
        """
        if not dtypes.is_float(self.dtype):
            return self.full(self.shape, False, dtype=dtypes.bool, device=self.device)
        return self != self

    def isinf(self, detect_positive: bool = True, detect_negative: bool = True) -> Tensor:
        """True where self is +inf (if detect_positive) or -inf (if detect_negative).

        >>> Tensor([1.0, float("inf"), float("-inf")]).isinf(detect_negative=False).tolist()
        [False, True, False]
        """
        false = self.full(self.shape, False, dtype=dtypes.bool, device=self.device)
        if not dtypes.is_float(self.dtype):
            return false
        pos = (self == math.inf) if detect_positive else false
        neg = (self == -math.inf) if detect_negative else false
        return pos | neg

    def isfinite(self) -> Tensor:
        """True where self is neither inf nor NaN.

        >>> Tensor([1.0, float("inf"), float("nan")]).isfinite().tolist()
        [True, False, False]
        """
        if not dtypes.is_float(self.dtype):
            return self.full(self.shape, True, dtype=dtypes.bool, device=self.device)
        return (self == self) & (self != math.inf) & (self != -math.inf)

    def isclose(self, other: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Tensor:
        """True where |self - other| <= atol + rtol * |other| (or the two are equal, infinities included), as
        PyTorch's `isclose`; NaN is close to NaN only with `equal_nan`. A tensor `other` must have this tensor's
        dtype (PyTorch refuses a mix); a Python scalar takes it. Integers compare in float64, so the tolerance
        never overflows them.

        >>> Tensor([1.0, 2.0, float("nan")]).isclose(Tensor([1.0 + 1e-9, 2.1, float("nan")])).tolist()
        [True, False, False]
        """
        for name, tol in (("rtol", rtol), ("atol", atol)):
            if isinstance(tol, bool) or not isinstance(tol, (int, float)):
                raise TypeError(f"isclose: {name} must be a number, got {tol!r}")
            if not tol >= 0:
                raise ArgumentError(f"isclose: {name} must be greater than or equal to zero, got {tol}")
        if isinstance(other, type(self)) and other.dtype is not self.dtype:
            raise ArgumentError(f"isclose: both inputs need the same dtype, got {self.dtype!r} and {other.dtype!r}")
        a, b = self._operands("isclose", other)
        exact = a == b  # equal values are close whatever the tolerance, and this is what matches an infinity
        if dtypes.is_bool(a.dtype):
            return exact
        wide = a.dtype if dtypes.is_float(a.dtype) else dtypes.float64
        a, b = a.cast(compute_dtype(wide)), b.cast(compute_dtype(wide))
        error = (a - b).abs()
        # an infinite error is never within tolerance (rtol * |inf| would admit -inf next to inf)
        close = exact | (error.isfinite() & (error <= atol + rtol * b.abs()))
        if equal_nan and dtypes.is_float(self.dtype):
            close = close | (a.isnan() & b.isnan())
        return close

    def allclose(self, other: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> bool:
        """Whether every element is `isclose` to `other` (a Python bool, as PyTorch's `allclose`; it runs now).

        >>> Tensor([1.0, 2.0]).allclose(Tensor([1.0, 2.0 + 1e-7]))
        True
        """
        return bool(self.isclose(other, rtol, atol, equal_nan).all().item())

    # *** activations ***

    @_derivative(lambda x, y: x > 0)
    def relu(self) -> Tensor:
        """max(self, 0) (NaN stays NaN).

        >>> Tensor([-1.0, 2.0]).relu().tolist()
        [0.0, 2.0]
        """
        return self.maximum(0)

    def relu6(self) -> Tensor:
        """min(max(self, 0), 6).

        >>> Tensor([-1.0, 3.0, 9.0]).relu6().tolist()
        [0.0, 3.0, 6.0]
        """
        return self.relu().minimum(6)._with_hardtanh_grad(self, 0, 6)

    def leaky_relu(self, neg_slope: float = 0.01) -> Tensor:
        """self where positive, neg_slope * self elsewhere.

        >>> Tensor([-2.0, 3.0]).leaky_relu(0.5).tolist()
        [-1.0, 3.0]
        """
        slope = _number(neg_slope, "leaky_relu", "neg_slope")
        out = (self < 0).where(self * slope, self)
        return out._custom_grad("leaky_relu", self, self._const(slope)) if dtypes.is_float(self.dtype) else out

    def _nonpositive(self) -> Tensor:
        """self where it is not positive (NaN included), else 0: the input of elu's exponential branch, which
        must stay finite where the other branch is taken (its gradient, 0 times inf there, would be NaN)."""
        return (self > 0).where(0.0, self)

    @_float_math
    def elu(self, alpha: float = 1.0) -> Tensor:
        """self where positive, alpha * (e**self - 1) elsewhere.

        >>> Tensor([0.0, 2.0]).elu().tolist()
        [0.0, 2.0]
        """
        return (self > 0).where(self, self._nonpositive()._expm1() * _number(alpha, "elu", "alpha"))

    @_float_math
    def celu(self, alpha: float = 1.0) -> Tensor:
        """self where positive, alpha * (e**(self/alpha) - 1) elsewhere.

        >>> Tensor([0.0, 2.0]).celu().tolist()
        [0.0, 2.0]
        """
        alpha = _number(alpha, "celu", "alpha", nonzero=True)
        return (self > 0).where(self, (self._nonpositive() * (1 / alpha))._expm1() * alpha)

    @_float_math
    def selu(self, alpha: float = 1.6732632423543772, gamma: float = 1.0507009873554805) -> Tensor:
        """gamma * elu(self, alpha), with the constants of the SELU paper (PyTorch's).

        >>> Tensor([0.0]).selu().tolist()
        [0.0]
        """
        alpha, gamma = _number(alpha, "selu", "alpha"), _number(gamma, "selu", "gamma")
        return (self > 0).where(self, self._nonpositive()._expm1() * alpha) * gamma

    @_float_math
    def sigmoid(self) -> Tensor:
        """1 / (1 + e**-self), computed from e**-|self| so that it never overflows (sigmoid(-400) is 0).

        >>> Tensor([0.0]).sigmoid().tolist()
        [0.5]
        """
        return self._sigmoid()

    @_float_math
    def logsigmoid(self) -> Tensor:
        """log(sigmoid(self)) = -softplus(-self), finite for every finite input.

        >>> Tensor([0.0]).logsigmoid().tolist()
        [-0.6931471824645996]
        """
        return -(-self)._softplus()

    @_float_math
    def hardsigmoid(self, alpha: float = 1 / 6, beta: float = 0.5) -> Tensor:
        """clamp(alpha * self + beta, 0, 1) (PyTorch's constants by default).

        >>> Tensor([-4.0, 0.0, 4.0]).hardsigmoid().tolist()
        [0.0, 0.5, 1.0]
        """
        u = self * _number(alpha, "hardsigmoid", "alpha") + _number(beta, "hardsigmoid", "beta")
        return u.clamp(0, 1)._with_hardtanh_grad(u, 0, 1)

    @_float_math
    def hardswish(self) -> Tensor:
        """self * relu6(self + 3) / 6.

        >>> Tensor([-4.0, 0.0, 4.0]).hardswish().tolist()
        [-0.0, 0.0, 4.0]
        """
        return self * (self + 3).relu6() * (1 / 6)

    def hardtanh(self, min_val: float = -1, max_val: float = 1) -> Tensor:
        """clamp(self, min_val, max_val); as in PyTorch, its gradient is 0 at the bounds (clamp's is 1 there).

        >>> Tensor([-2.0, 0.5, 2.0]).hardtanh().tolist()
        [-1.0, 0.5, 1.0]
        """
        min_val, max_val = _number(min_val, "hardtanh", "min_val"), _number(max_val, "hardtanh", "max_val")
        if min_val > max_val:
            raise ArgumentError(f"hardtanh: min_val {min_val} is greater than max_val {max_val}")
        return self.clamp(min_val, max_val)._with_hardtanh_grad(self, min_val, max_val)

    @_float_math
    def gelu(self, approximate: str = "tanh") -> Tensor:
        """The GELU, by default with the tanh approximation (as tinygrad; PyTorch's approximate="tanh"),
        0.5*x*(1 + tanh(u)) computed as x * sigmoid(2u); approximate="none" is 0.5*x*erfc(-x/sqrt(2)).

        >>> Tensor([0.0, 10.0]).gelu().tolist()
        [0.0, 10.0]
        """
        if approximate == "none":
            return self * 0.5 * (self * (-1 / math.sqrt(2)))._erfc()  # 1 + erf(x/sqrt 2), without cancellation
        if approximate != "tanh":
            raise ArgumentError(f"gelu: approximate must be 'tanh' or 'none', not {approximate!r}")
        u = (self + self * self * self * 0.044715) * math.sqrt(2 / math.pi)
        return self * (u * 2)._sigmoid()

    @_float_math
    def quick_gelu(self) -> Tensor:
        """self * sigmoid(1.702 * self).

        >>> Tensor([0.0]).quick_gelu().tolist()
        [0.0]
        """
        return self * (self * 1.702)._sigmoid()

    @_float_math
    def silu(self) -> Tensor:
        """self * sigmoid(self) (also called swish).

        >>> Tensor([0.0]).silu().tolist()
        [0.0]
        """
        return self * self._sigmoid()

    def swish(self) -> Tensor:
        """`silu`.

        >>> Tensor([0.0]).swish().tolist()
        [0.0]
        """
        return self.silu()

    @_float_math
    def mish(self) -> Tensor:
        """self * tanh(softplus(self)).

        >>> Tensor([0.0]).mish().tolist()
        [0.0]
        """
        return self * self._softplus()._tanh()

    @_float_math
    def softplus(self, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
        """log(1 + e**(beta*self)) / beta, computed stably (softplus(400) is 400); linear where beta*self >
        threshold, as in PyTorch.

        >>> Tensor([0.0]).softplus().tolist()
        [0.6931471824645996]
        """
        beta = _number(beta, "softplus", "beta", nonzero=True)
        threshold = _number(threshold, "softplus", "threshold")
        bx = self * beta
        return (bx > threshold).where(self, bx._softplus() * (1 / beta))

    @_float_math
    def softsign(self) -> Tensor:
        """self / (1 + |self|).

        >>> Tensor([1.0, -3.0]).softsign().tolist()
        [0.5, -0.75]
        """
        return self / (1 + self.abs())

    def logaddexp(self, x: Any) -> Tensor:
        """log(e**self + e**x), computed as max + log1p(e**-|self - x|) (no overflow; inf and -inf handled).

        >>> Tensor([0.0]).logaddexp(0.0).tolist()
        [0.6931471824645996]
        """
        a, b = self._operands("logaddexp", x)
        out = a.dtype if dtypes.is_float(a.dtype) else dtypes.default_float
        ct = compute_dtype(a.dtype)
        a, b = a.cast(ct), b.cast(ct)
        m = a.maximum(b)
        ret = m + (-(a - b).abs())._exp()._log1p()
        # equal infinities: a - b would be NaN. The mean of a and b is a there (halving is exact, and a denormal
        # lost in it is lost in + LN2 too); it gives each input half the gradient at a tie, as PyTorch
        return (a == b).where((a * 0.5 + b * 0.5) + LN2, ret).cast(out)

    # *** casts ***

    def bitcast(self, dtype: DType | str) -> Tensor:
        """The same bits read as `dtype` (bool is not allowed either way). To a dtype of another size, the last
        axis scales by the ratio of the sizes, as torch's `view(dtype)`.

        >>> Tensor([1.0]).bitcast("int32").tolist(), Tensor([1.0]).bitcast("uint16").tolist()
        ([1065353216], [0, 16256])
        """
        dt = tensor_dtype(dtype, "bitcast")
        if dtypes.is_bool(dt) or dtypes.is_bool(self.dtype):
            raise TypeError(f"bitcast: cannot bitcast {self.dtype!r} to {dt!r}: bool has no defined bit pattern")
        if is_disk(self.device):  # a file's bytes read as another dtype: a window of the same bytes
            return type(self)(disk_bitcast(self.uop, dt, self.device), device=self.device)
        if dt.itemsize != self.dtype.itemsize:
            return self._bitcast_resized(dt)
        return self._new(self.uop.bitcast(dt))

    def _bitcast_resized(self, dt: DType) -> Tensor:
        """bitcast to a dtype of another size: the last axis scales by the ratio of the sizes (as torch's
        `view(dtype)` and tinygrad's bitcast), bytes in little-endian order."""
        src, name = self.dtype, f"bitcast from {self.dtype!r} to {dt!r}"
        if not self.ndim:
            raise ArgumentError(f"{name}: the sizes differ, and a 0-d tensor has no last axis to scale")
        *lead, n = self.shape
        bits = self.bitcast(_UINT_OF_SIZE[src.itemsize])
        if src.itemsize > dt.itemsize:  # each element splits into `ratio` narrower ones, the low bytes first
            ratio, width = src.itemsize // dt.itemsize, 8 * dt.itemsize
            mask = (1 << width) - 1
            parts = [((bits >> (width * k)) & mask).cast(_UINT_OF_SIZE[dt.itemsize]) for k in range(ratio)]
            return parts[0].stack(*parts[1:], dim=-1).reshape(*lead, n * ratio).bitcast(dt)
        ratio, width = dt.itemsize // src.itemsize, 8 * src.itemsize
        if n % ratio:
            raise ArgumentError(f"{name}: the last axis ({n}) must be a multiple of {ratio}")
        groups = bits.reshape(*lead, n // ratio, ratio).cast(_UINT_OF_SIZE[dt.itemsize])
        out = groups[..., 0]
        for k in range(1, ratio):
            out = out | (groups[..., k] << (width * k))
        return out.bitcast(dt)

    # *** operators ***

    def __add__(self, x: Any) -> Tensor:
        return self.add(x)

    def __sub__(self, x: Any) -> Tensor:
        return self.sub(x)

    def __mul__(self, x: Any) -> Tensor:
        return self.mul(x)

    def __truediv__(self, x: Any) -> Tensor:
        return self.div(x)

    def __floordiv__(self, x: Any) -> Tensor:
        return self.div(x, rounding_mode="floor")

    def __mod__(self, x: Any) -> Tensor:
        return self.mod(x)

    def __pow__(self, x: Any) -> Tensor:
        return self.pow(x)

    def __and__(self, x: Any) -> Tensor:
        return self.bitwise_and(x)

    def __or__(self, x: Any) -> Tensor:
        return self.bitwise_or(x)

    def __xor__(self, x: Any) -> Tensor:
        return self.bitwise_xor(x)

    def __lshift__(self, x: Any) -> Tensor:
        return self.lshift(x)

    def __rshift__(self, x: Any) -> Tensor:
        return self.rshift(x)

    def __neg__(self) -> Tensor:
        return self.neg()

    def __invert__(self) -> Tensor:
        return self.bitwise_not()

    def __radd__(self, x: Any) -> Tensor:
        return self.add(x, reverse=True)

    def __rsub__(self, x: Any) -> Tensor:
        return self.sub(x, reverse=True)

    def __rmul__(self, x: Any) -> Tensor:
        return self.mul(x, reverse=True)

    def __rtruediv__(self, x: Any) -> Tensor:
        return self.div(x, reverse=True)

    def __rfloordiv__(self, x: Any) -> Tensor:
        return self.div(x, reverse=True, rounding_mode="floor")

    def __rmod__(self, x: Any) -> Tensor:
        return self.mod(x, reverse=True)

    def __rpow__(self, x: Any) -> Tensor:
        return self.pow(x, reverse=True)

    def __rand__(self, x: Any) -> Tensor:
        return self.bitwise_and(x, reverse=True)

    def __ror__(self, x: Any) -> Tensor:
        return self.bitwise_or(x, reverse=True)

    def __rxor__(self, x: Any) -> Tensor:
        return self.bitwise_xor(x, reverse=True)

    def __rlshift__(self, x: Any) -> Tensor:
        return self.lshift(x, reverse=True)

    def __rrshift__(self, x: Any) -> Tensor:
        return self.rshift(x, reverse=True)

    def __iadd__(self, x: Any) -> Tensor:
        return self._inplace(self + x, "+=")

    def __isub__(self, x: Any) -> Tensor:
        return self._inplace(self - x, "-=")

    def __imul__(self, x: Any) -> Tensor:
        return self._inplace(self * x, "*=")

    def __itruediv__(self, x: Any) -> Tensor:
        return self._inplace(self / x, "/=")

    def __ifloordiv__(self, x: Any) -> Tensor:
        return self._inplace(self // x, "//=")

    def __imod__(self, x: Any) -> Tensor:
        return self._inplace(self % x, "%=")

    def __ipow__(self, x: Any) -> Tensor:
        return self._inplace(self**x, "**=")

    def __iand__(self, x: Any) -> Tensor:
        return self._inplace(self & x, "&=")

    def __ior__(self, x: Any) -> Tensor:
        return self._inplace(self | x, "|=")

    def __ixor__(self, x: Any) -> Tensor:
        return self._inplace(self ^ x, "^=")

    def __ilshift__(self, x: Any) -> Tensor:
        return self._inplace(self << x, "<<=")

    def __irshift__(self, x: Any) -> Tensor:
        return self._inplace(self >> x, ">>=")

    # *** dtype shorthands (last in the class: their names shadow the builtins in the class body) ***

    def float(self) -> Tensor:
        """The values as float32.

        >>> Tensor([1, 2]).float().tolist()
        [1.0, 2.0]
        """
        return self.cast(dtypes.float32)

    def half(self) -> Tensor:
        """The values as float16.

        >>> Tensor([1.5]).half().dtype
        dtypes.float16
        """
        return self.cast(dtypes.float16)

    def double(self) -> Tensor:
        """The values as float64.

        >>> Tensor([1.5]).double().dtype
        dtypes.float64
        """
        return self.cast(dtypes.float64)

    def int(self) -> Tensor:
        """The values as int32 (floats truncate toward zero).

        >>> Tensor([1.7, -1.7]).int().tolist()
        [1, -1]
        """
        return self.cast(dtypes.int32)

    def long(self) -> Tensor:
        """The values as int64.

        >>> Tensor([3]).long().dtype
        dtypes.int64
        """
        return self.cast(dtypes.int64)

    def short(self) -> Tensor:
        """The values as int16.

        >>> Tensor([3]).short().dtype
        dtypes.int16
        """
        return self.cast(dtypes.int16)

    def byte(self) -> Tensor:
        """The values as uint8.

        >>> Tensor([3]).byte().dtype
        dtypes.uint8
        """
        return self.cast(dtypes.uint8)

    def bool(self) -> Tensor:
        """The values as bool (nonzero is True).

        >>> Tensor([0, 2]).bool().tolist()
        [False, True]
        """
        return self.cast(dtypes.bool)
