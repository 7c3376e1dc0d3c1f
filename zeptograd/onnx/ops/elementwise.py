"""ONNX ops: elementwise math, comparisons, logic and bitwise ops, activations and casts.

Each op keeps ONNX's output dtype: the input's for arithmetic and activations, bool for comparisons and
predicates, the `to` attribute's for Cast. Binary ops broadcast numpy-style (opsets before 7 also take the
`broadcast`/`axis` attributes of ONNX's first broadcasting rule).

>>> import numpy as np
>>> from onnx import TensorProto, helper
>>> from zeptograd.onnx import OnnxRunner
>>> a = helper.make_tensor_value_info("a", TensorProto.INT32, [2])
>>> b = helper.make_tensor_value_info("b", TensorProto.INT32, [2])
>>> y = helper.make_tensor_value_info("y", TensorProto.INT32, [2])
>>> graph = helper.make_graph([helper.make_node("Div", ["a", "b"], ["y"])], "g", [a, b], [y])
>>> run = OnnxRunner(helper.make_model(graph))
>>> run({"a": np.array([7, -7], np.int32), "b": np.array([2, 2], np.int32)})["y"].tolist()
[3, -3]
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import reduce
from typing import Any

from zeptograd.dtype import DType, dtypes
from zeptograd.onnx.dtypes import onnx_dtype
from zeptograd.onnx.registry import OnnxError, onnx_op
from zeptograd.tensor import Tensor

# *** the first broadcasting rule (opsets 1 to 6) ***


def _legacy(b: Tensor, a: Tensor, broadcast: int, axis: int | None) -> Tensor:
    """B as opsets 1-6 broadcast it against A: with `broadcast` set and an `axis`, B's dimensions line up with
    A's from `axis` on (else from the end, numpy's rule); without `broadcast` the shapes must be equal."""
    if not broadcast:
        if a.shape != b.shape:
            raise OnnxError(f"shapes {a.shape} and {b.shape} differ and the node does not set broadcast=1")
        return b
    if axis is None or b.ndim == 0:
        return b
    axis = axis % a.ndim if a.ndim else 0
    trailing = a.ndim - axis - b.ndim
    if trailing < 0:
        raise OnnxError(f"cannot broadcast B of shape {b.shape} into A of shape {a.shape} from axis {axis}")
    return b.reshape(b.shape + (1,) * trailing)


# *** arithmetic ***


@onnx_op("Add")
def add(a: Tensor, b: Tensor, *, broadcast: int = 0, axis: int | None = None, consumed_inputs: Any = None) -> Tensor:
    """Add: a + b."""
    return a + _legacy(b, a, broadcast, axis)


@onnx_op("Add", 7)
def add_7(a: Tensor, b: Tensor) -> Tensor:
    """Add: a + b, broadcast numpy-style."""
    return a + b


@onnx_op("Sub")
def sub(a: Tensor, b: Tensor, *, broadcast: int = 0, axis: int | None = None, consumed_inputs: Any = None) -> Tensor:
    """Sub: a - b."""
    return a - _legacy(b, a, broadcast, axis)


@onnx_op("Sub", 7)
def sub_7(a: Tensor, b: Tensor) -> Tensor:
    """Sub: a - b, broadcast numpy-style."""
    return a - b


@onnx_op("Mul")
def mul(a: Tensor, b: Tensor, *, broadcast: int = 0, axis: int | None = None, consumed_inputs: Any = None) -> Tensor:
    """Mul: a * b."""
    return _mul(a, _legacy(b, a, broadcast, axis))


@onnx_op("Mul", 7)
def mul_7(a: Tensor, b: Tensor) -> Tensor:
    """Mul: a * b, broadcast numpy-style (bool, which ONNX does not allow, is refused by the schema)."""
    return _mul(a, b)


def _mul(a: Tensor, b: Tensor) -> Tensor:
    return a * b


def _div(a: Tensor, b: Tensor) -> Tensor:
    # integers divide as C does (the quotient truncated toward zero), floats as IEEE
    if dtypes.is_float(a.dtype):
        return a / b
    return a.div(b, rounding_mode="trunc")


@onnx_op("Div")
def div(a: Tensor, b: Tensor, *, broadcast: int = 0, axis: int | None = None, consumed_inputs: Any = None) -> Tensor:
    """Div: a / b (integers truncate toward zero)."""
    return _div(a, _legacy(b, a, broadcast, axis))


@onnx_op("Div", 7)
def div_7(a: Tensor, b: Tensor) -> Tensor:
    """Div: a / b, broadcast numpy-style (integers truncate toward zero)."""
    return _div(a, b)


@onnx_op("Mod", 10)
def mod(a: Tensor, b: Tensor, *, fmod: int = 0) -> Tensor:
    """Mod: a mod b with the divisor's sign (Python's %), or with the dividend's (C's fmod) when `fmod`."""
    return a.fmod(b) if fmod else a.mod(b)


@onnx_op("Pow")
def pow_(x: Tensor, y: Tensor, *, broadcast: int = 0, axis: int | None = None) -> Tensor:
    """Pow: x ** y."""
    return _pow(x, _legacy(y, x, broadcast, axis))


@onnx_op("Pow", 7)
def pow_7(x: Tensor, y: Tensor) -> Tensor:
    """Pow: x ** y, broadcast numpy-style; the result has x's dtype whatever y's is."""
    return _pow(x, y)


def _pow(x: Tensor, y: Tensor) -> Tensor:
    if dtypes.is_float(x.dtype) and not dtypes.is_float(y.dtype):
        y = y.cast(x.dtype) if x.dtype is dtypes.float64 else y.cast(dtypes.float32)
    elif not dtypes.is_float(x.dtype) and dtypes.is_float(y.dtype):
        # an integer base to a float power: in float64 (as numpy), truncated to the base's dtype; an integral
        # exponent takes the exact integer power instead, since a float64 pow a few ulps below an integer (729)
        # would truncate to the one below it
        wide = x.cast(dtypes.float64).pow(y.cast(dtypes.float64)).cast(x.dtype)
        integral = (y == y.trunc()) & y.isfinite()
        exact = x.pow(integral.where(y, y._const(0)).cast(x.dtype))
        return integral.where(exact, wide)
    elif not dtypes.is_float(x.dtype) and y.dtype is not x.dtype:
        y = y.cast(x.dtype)
    return x.pow(y).cast(x.dtype)


def _variadic(name: str, inputs: tuple[Tensor, ...], fn: Callable[[Tensor, Tensor], Tensor]) -> Tensor:
    if not inputs:
        raise OnnxError(f"{name} needs at least one input")
    return reduce(fn, inputs)


@onnx_op("Max")
def max_(*inputs: Tensor, consumed_inputs: Any = None) -> Tensor:
    """Max: the elementwise maximum of the inputs, broadcast together (NaN wins)."""
    return _variadic("Max", inputs, lambda a, b: a.maximum(b))


@onnx_op("Min")
def min_(*inputs: Tensor, consumed_inputs: Any = None) -> Tensor:
    """Min: the elementwise minimum of the inputs, broadcast together (NaN wins)."""
    return _variadic("Min", inputs, lambda a, b: a.minimum(b))


@onnx_op("Sum")
def sum_(*inputs: Tensor, consumed_inputs: Any = None) -> Tensor:
    """Sum: the elementwise sum of the inputs, broadcast together."""
    return _variadic("Sum", inputs, lambda a, b: a + b)


@onnx_op("Mean")
def mean(*inputs: Tensor, consumed_inputs: Any = None) -> Tensor:
    """Mean: the elementwise sum of the inputs, broadcast together, divided by their count."""
    return (_variadic("Mean", inputs, lambda a, b: a + b) / len(inputs)).cast(inputs[0].dtype)


@onnx_op("Clip")
def clip(x: Tensor, *, min: float | None = None, max: float | None = None, consumed_inputs: Any = None) -> Tensor:
    """Clip (opsets 1-10): min(max(x, min), max), the bounds as attributes (an absent one does not clip)."""
    return _clip(x, None if min is None else x._const(min), None if max is None else x._const(max))


@onnx_op("Clip", 6)
def clip_6(x: Tensor, *, min: float = -3.4028234663852886e38, max: float = 3.4028234663852886e38) -> Tensor:
    """Clip (opsets 6-10): min(max(x, min), max), the bounds as attributes (by default the float32 range)."""
    return _clip(x, x._const(min), x._const(max))


@onnx_op("Clip", 11)
def clip_11(x: Tensor, lo: Tensor | None = None, hi: Tensor | None = None) -> Tensor:
    """Clip: min(max(x, lo), hi), the bounds as optional inputs (an absent one does not clip)."""
    return _clip(x, lo, hi)


def _clip(x: Tensor, lo: Tensor | None, hi: Tensor | None) -> Tensor:
    # where lo > hi every value is hi (numpy's clip); NaN stays NaN
    if lo is not None:
        x = (x < lo).where(lo.cast(x.dtype), x)
    if hi is not None:
        x = (x > hi).where(hi.cast(x.dtype), x)
    return x


# *** unary math ***


@onnx_op("Abs")
def abs_(x: Tensor, *, consumed_inputs: Any = None) -> Tensor:
    """Abs: |x|."""
    return x.abs()


@onnx_op("Neg")
def neg(x: Tensor, *, consumed_inputs: Any = None) -> Tensor:
    """Neg: -x."""
    return -x


@onnx_op("Sign", 9)
def sign(x: Tensor) -> Tensor:
    """Sign: -1, 0 or 1 by the sign of x."""
    return x.sign()


@onnx_op("Ceil")
def ceil(x: Tensor, *, consumed_inputs: Any = None) -> Tensor:
    """Ceil: the smallest integer >= x."""
    return x.ceil()


@onnx_op("Floor")
def floor(x: Tensor, *, consumed_inputs: Any = None) -> Tensor:
    """Floor: the largest integer <= x."""
    return x.floor()


@onnx_op("Round", 11)
def round_(x: Tensor) -> Tensor:
    """Round: x to the nearest integer, halves to the even one."""
    return x.round()


@onnx_op("Reciprocal")
def reciprocal(x: Tensor, *, consumed_inputs: Any = None) -> Tensor:
    """Reciprocal: 1 / x."""
    return x.reciprocal()


@onnx_op("Sqrt")
def sqrt(x: Tensor, *, consumed_inputs: Any = None) -> Tensor:
    """Sqrt: x ** 0.5."""
    return x.sqrt()


@onnx_op("Exp")
def exp(x: Tensor, *, consumed_inputs: Any = None) -> Tensor:
    """Exp: e ** x."""
    return x.exp()


@onnx_op("Log")
def log(x: Tensor, *, consumed_inputs: Any = None) -> Tensor:
    """Log: the natural logarithm of x."""
    return x.log()


@onnx_op("Erf", 9)
def erf(x: Tensor) -> Tensor:
    """Erf: the error function, 2/sqrt(pi) * integral of e**-t**2 from 0 to x."""
    return x.erf()


def _trig(name: str, method: str) -> None:
    """Register the one-input float function `name` (opsets 7 and on) as the Tensor method `method`."""

    def op(x: Tensor) -> Tensor:
        return getattr(x, method)()

    op.__name__ = op.__qualname__ = method
    op.__doc__ = f"{name}: {method}(x)."
    onnx_op(name, 7 if name in ("Sin", "Cos", "Tan", "Asin", "Acos", "Atan") else 9)(op)


for _name in ("Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh"):
    _trig(_name, _name.lower())


@onnx_op("Tanh")
def tanh(x: Tensor, *, consumed_inputs: Any = None) -> Tensor:
    """Tanh: the hyperbolic tangent of x."""
    return x.tanh()


@onnx_op("IsNaN", 9)
def isnan(x: Tensor) -> Tensor:
    """IsNaN: x != x, as bool."""
    return x.isnan()


@onnx_op("IsInf", 10)
def isinf(x: Tensor, *, detect_negative: int = 1, detect_positive: int = 1) -> Tensor:
    """IsInf: x is +inf (when `detect_positive`) or -inf (when `detect_negative`), as bool."""
    return x.isinf(detect_positive=bool(detect_positive), detect_negative=bool(detect_negative))


# *** activations ***


@onnx_op("Relu")
def relu(x: Tensor, *, consumed_inputs: Any = None) -> Tensor:
    """Relu: max(x, 0)."""
    return x.relu()


@onnx_op("LeakyRelu")
def leaky_relu(x: Tensor, *, alpha: float = 0.01, consumed_inputs: Any = None) -> Tensor:
    """LeakyRelu: x where x >= 0, alpha * x elsewhere."""
    return x.leaky_relu(alpha)


@onnx_op("PRelu")
def prelu(x: Tensor, slope: Tensor, *, consumed_inputs: Any = None) -> Tensor:
    """PRelu: x where x >= 0, slope * x elsewhere; slope broadcasts to x (a 1-D slope of size C may also line
    up with x's one axis of size C, as opsets 1-6 allowed)."""
    if slope.ndim == 1 and slope.shape[0] != 1 and (x.ndim == 0 or x.shape[-1] != slope.shape[0]):
        where = [i for i, d in enumerate(x.shape) if d == slope.shape[0]]
        if len(where) == 1:
            slope = slope.reshape((slope.shape[0],) + (1,) * (x.ndim - 1 - where[0]))
    return (x < 0).where(x * slope, x).cast(x.dtype)


@onnx_op("ThresholdedRelu", 10)
def thresholded_relu(x: Tensor, *, alpha: float = 1.0) -> Tensor:
    """ThresholdedRelu: x where x > alpha, 0 elsewhere."""
    return (x > alpha).where(x, x._const(0))


@onnx_op("Elu")
def elu(x: Tensor, *, alpha: float = 1.0, consumed_inputs: Any = None) -> Tensor:
    """Elu: x where x > 0, alpha * (e**x - 1) elsewhere."""
    return x.elu(alpha)


@onnx_op("Celu", 12)
def celu(x: Tensor, *, alpha: float = 1.0) -> Tensor:
    """Celu: max(0, x) + min(0, alpha * (e**(x/alpha) - 1))."""
    return x.celu(alpha)


@onnx_op("Selu")
def selu(
    x: Tensor, *, alpha: float = 1.673200011253357, gamma: float = 1.0506999492645264, consumed_inputs: Any = None
) -> Tensor:
    """Selu (opsets 1-5, the paper's constants rounded): gamma * (x where x > 0, alpha * (e**x - 1) elsewhere)."""
    return x.selu(alpha, gamma)


@onnx_op("Selu", 6)
def selu_6(x: Tensor, *, alpha: float = 1.6732631921768188, gamma: float = 1.0507010221481323) -> Tensor:
    """Selu: gamma * (x where x > 0, alpha * (e**x - 1) elsewhere)."""
    return x.selu(alpha, gamma)


@onnx_op("Sigmoid")
def sigmoid(x: Tensor, *, consumed_inputs: Any = None) -> Tensor:
    """Sigmoid: 1 / (1 + e**-x)."""
    return x.sigmoid()


@onnx_op("HardSigmoid")
def hard_sigmoid(x: Tensor, *, alpha: float = 0.2, beta: float = 0.5, consumed_inputs: Any = None) -> Tensor:
    """HardSigmoid: max(0, min(1, alpha * x + beta))."""
    return x.hardsigmoid(alpha, beta)


@onnx_op("HardSwish", 14)
def hard_swish(x: Tensor) -> Tensor:
    """HardSwish: x * max(0, min(1, x / 6 + 1/2))."""
    return x.hardswish()


@onnx_op("Softplus")
def softplus(x: Tensor) -> Tensor:
    """Softplus: log(1 + e**x), without overflow."""
    return x.logaddexp(x._const(0.0)) if dtypes.is_float(x.dtype) else x.cast(dtypes.float32).softplus()


@onnx_op("Softsign")
def softsign(x: Tensor) -> Tensor:
    """Softsign: x / (1 + |x|)."""
    return x.softsign()


@onnx_op("Shrink", 9)
def shrink(x: Tensor, *, bias: float = 0.0, lambd: float = 0.5) -> Tensor:
    """Shrink: x + bias where x < -lambd, x - bias where x > lambd, 0 elsewhere."""
    return (x < -lambd).where(x + bias, (x > lambd).where(x - bias, 0)).cast(x.dtype)


@onnx_op("Gelu", 20)
def gelu(x: Tensor, *, approximate: str = "none") -> Tensor:
    """Gelu: x/2 * (1 + erf(x/sqrt(2))), or with the tanh approximation when approximate='tanh'."""
    if approximate not in ("none", "tanh"):
        raise OnnxError(f"approximate={approximate!r} is not supported: ONNX defines 'none' and 'tanh'")
    return x.gelu(approximate)


@onnx_op("Mish", 18)
def mish(x: Tensor) -> Tensor:
    """Mish: x * tanh(softplus(x))."""
    return x.mish()


@onnx_op("Swish", 24)
def swish(x: Tensor, *, alpha: float = 1.0) -> Tensor:
    """Swish: x * sigmoid(alpha * x)."""
    return x * (x * alpha).sigmoid()


@onnx_op("SwiGLU", 28)
def swiglu(a: Tensor, b: Tensor, *, alpha: float = 1.0) -> Tensor:
    """SwiGLU: a * sigmoid(alpha * a) * b, a and b of one shape."""
    if a.shape != b.shape:
        raise OnnxError(f"A and B must have the same shape (SwiGLU does not broadcast), got {a.shape} and {b.shape}")
    return a * (a * alpha).sigmoid() * b


# *** comparisons and logic (bool results) ***


def _compare(name: str, since: tuple[int, ...], fn: Callable[[Tensor, Tensor], Tensor]) -> None:
    """Register comparison `name`: the first opset with the old broadcasting attributes, the others without."""

    def legacy(a: Tensor, b: Tensor, *, broadcast: int = 0, axis: int | None = None) -> Tensor:
        return fn(a, _legacy(b, a, broadcast, axis))

    def op(a: Tensor, b: Tensor) -> Tensor:
        return fn(a, b)

    for f in (legacy, op):
        f.__name__ = f.__qualname__ = f"{name.lower()}_{f.__name__}"
        f.__doc__ = f"{name}: {fn.__doc__}, broadcast numpy-style."
    if since[0] == 1:
        onnx_op(name, 1)(legacy)
        since = since[1:]
    onnx_op(name, since[0])(op)


def _equal(a: Tensor, b: Tensor) -> Tensor:
    """a == b, as bool"""
    return a == b


def _greater(a: Tensor, b: Tensor) -> Tensor:
    """a > b, as bool"""
    return a > b


def _less(a: Tensor, b: Tensor) -> Tensor:
    """a < b, as bool"""
    return a < b


def _greater_equal(a: Tensor, b: Tensor) -> Tensor:
    """a >= b, as bool"""
    return a >= b


def _less_equal(a: Tensor, b: Tensor) -> Tensor:
    """a <= b, as bool"""
    return a <= b


def _and(a: Tensor, b: Tensor) -> Tensor:
    """a and b, as bool"""
    return a.logical_and(b)


def _or(a: Tensor, b: Tensor) -> Tensor:
    """a or b, as bool"""
    return a.logical_or(b)


def _xor(a: Tensor, b: Tensor) -> Tensor:
    """a xor b, as bool"""
    return a.logical_xor(b)


_compare("Equal", (1, 7), _equal)
_compare("Greater", (1, 7), _greater)
_compare("Less", (1, 7), _less)
_compare("GreaterOrEqual", (12,), _greater_equal)
_compare("LessOrEqual", (12,), _less_equal)
_compare("And", (1, 7), _and)
_compare("Or", (1, 7), _or)
_compare("Xor", (1, 7), _xor)


@onnx_op("Not")
def not_(x: Tensor) -> Tensor:
    """Not: the logical negation of x."""
    return x.logical_not()


@onnx_op("Where", 9)
def where(condition: Tensor, x: Tensor, y: Tensor) -> Tensor:
    """Where: x where condition, y elsewhere, the three broadcast together."""
    return condition.where(x, y)


# *** bitwise ops ***


@onnx_op("BitShift", 11)
def bit_shift(x: Tensor, y: Tensor, *, direction: str) -> Tensor:
    """BitShift: x << y (direction='LEFT') or x >> y (direction='RIGHT'), for unsigned integers (and signed ones,
    from opset 28: left shifts wrap, right shifts are arithmetic)."""
    if direction == "LEFT":
        return x.lshift(y.cast(x.dtype))
    if direction == "RIGHT":
        return x.rshift(y.cast(x.dtype))
    raise OnnxError(f"direction={direction!r} is not supported: ONNX defines 'LEFT' and 'RIGHT'")


@onnx_op("BitwiseAnd", 18)
def bitwise_and(a: Tensor, b: Tensor) -> Tensor:
    """BitwiseAnd: a & b."""
    return a.bitwise_and(b)


@onnx_op("BitwiseOr", 18)
def bitwise_or(a: Tensor, b: Tensor) -> Tensor:
    """BitwiseOr: a | b."""
    return a.bitwise_or(b)


@onnx_op("BitwiseXor", 18)
def bitwise_xor(a: Tensor, b: Tensor) -> Tensor:
    """BitwiseXor: a ^ b."""
    return a.bitwise_xor(b)


@onnx_op("BitwiseNot", 18)
def bitwise_not(x: Tensor) -> Tensor:
    """BitwiseNot: ~x."""
    return x.bitwise_not()


# *** casts ***

# the fp8 formats' saturation bounds (their largest finite values)
_FP8_MAX = {dtypes.fp8e4m3: 448.0, dtypes.fp8e5m2: 57344.0}


def cast_to(x: Tensor, dt: DType, saturate: int = 1) -> Tensor:
    """x converted to `dt` as ONNX's Cast converts: floats to integers truncate toward zero; to an fp8 format
    with `saturate`, values beyond its range (infinities too) become its largest value, and without it they
    become NaN (float8e4m3fn, which has no infinity) or infinity (float8e5m2)."""
    if dt is x.dtype and not (saturate and dt in _FP8_MAX):  # a saturating cast takes fp8's infinities to its max
        return x
    if dt in _FP8_MAX and x.dtype is not dtypes.bool:
        # compared and clamped in float32 (float64 stays): a bound written in a narrow dtype would round
        wide = x if x.dtype is dtypes.float64 else x.cast(dtypes.float32)
        top = _FP8_MAX[dt]
        if saturate:
            return wide.clamp(-top, top).cast(dt)
        if dt is dtypes.fp8e4m3:
            # 464 lies halfway between 448 and the next step (480, NaN's code), so it rounds to even (448);
            # anything beyond rounds out of the range: NaN
            return (wide.abs() > 464.0).where(math.nan, wide).cast(dt)
        return wide.cast(dt)
    return x.cast(dt)


@onnx_op("Cast")
def cast(x: Tensor, *, to: int | str, saturate: int = 1, round_mode: str = "up") -> Tensor:
    """Cast: x converted to the element type `to` (saturating fp8 conversions by default)."""
    if isinstance(to, str):  # opset 1 names the type ("FLOAT")
        from onnx import TensorProto

        to = TensorProto.DataType.Value(to.upper())
    return cast_to(x, onnx_dtype(to, "Cast to"), saturate)


@onnx_op("CastLike", 15)
def cast_like(x: Tensor, target: Tensor, *, saturate: int = 1, round_mode: str = "up") -> Tensor:
    """CastLike: x converted to target's element type."""
    return cast_to(x, target.dtype, saturate)


@onnx_op("BitCast", 26)
def bit_cast(x: Tensor, *, to: int) -> Tensor:
    """BitCast: x's bits read as the element type `to`, which must be as wide as x's."""
    dt = onnx_dtype(to, "BitCast to")
    if dt.itemsize != x.dtype.itemsize:
        raise OnnxError(f"BitCast needs types of one width: {x.dtype} is {8 * x.dtype.itemsize} bits, {dt} "
                        f"{8 * dt.itemsize}")  # fmt: skip
    if dtypes.is_bool(dt) or dtypes.is_bool(x.dtype):  # bool is one byte, 0 or 1
        return x.cast(dt)
    return x.bitcast(dt)


# *** random draws ***

_U32 = (1 << 32) - 1


def _uniform(shape: tuple[int, ...], seed: float | None, device: str | None) -> tuple[Tensor, Tensor]:
    """Two independent uniform float32 tensors in [0, 1) of `shape`: from zeptograd's random stream, or, with a
    `seed`, from a stream of that seed alone (the same draw every run), leaving the global stream as it was."""
    if seed is None:
        return Tensor.rand(*shape, device=device), Tensor.rand(*shape, device=device)
    n = math.prod(shape)
    key = int(seed) & ((1 << 64) - 1)
    counters = Tensor._counters(n, device)
    w0, w1 = Tensor._threefry2x32(counters, counters * 0, (key & _U32, key >> 32))
    return Tensor._unit_float(w0.reshape(shape), dtypes.float32), Tensor._unit_float(w1.reshape(shape), dtypes.float32)


def _normal(shape: tuple[int, ...], seed: float | None, device: str | None) -> Tensor:
    """Standard normal float32 numbers of `shape`, by the Box-Muller transform of two uniform draws."""
    u0, u1 = _uniform(shape, seed, device)
    return ((1 - u0).log() * -2).sqrt() * (u1 * (2 * math.pi)).sin()


def _random_dtype(dtype: int | None, like: Tensor | None) -> DType:
    dt = onnx_dtype(dtype, "dtype") if dtype is not None else like.dtype if like is not None else dtypes.float32
    if not dtypes.is_float(dt):
        raise OnnxError(f"random values of {dt} are not supported: ONNX draws them as float16, float32 or float64")
    return dt


@onnx_op("RandomUniform")
def random_uniform(
    *, shape: list[int], dtype: int = 1, high: float = 1.0, low: float = 0.0, seed: float | None = None
) -> Tensor:
    """RandomUniform: uniform random numbers in [low, high) of `shape`."""
    return (_uniform(tuple(shape), seed, None)[0] * (high - low) + low).cast(_random_dtype(dtype, None))


@onnx_op("RandomNormal")
def random_normal(
    *, shape: list[int], dtype: int = 1, mean: float = 0.0, scale: float = 1.0, seed: float | None = None
) -> Tensor:
    """RandomNormal: normal random numbers of `shape` with `mean` and standard deviation `scale`."""
    return (_normal(tuple(shape), seed, None) * scale + mean).cast(_random_dtype(dtype, None))


@onnx_op("RandomUniformLike")
def random_uniform_like(
    x: Tensor, *, dtype: int | None = None, high: float = 1.0, low: float = 0.0, seed: float | None = None
) -> Tensor:
    """RandomUniformLike: uniform random numbers in [low, high) of x's shape (and dtype, unless `dtype`)."""
    return (_uniform(x.shape, seed, x.device)[0] * (high - low) + low).cast(_random_dtype(dtype, x))


@onnx_op("RandomNormalLike")
def random_normal_like(
    x: Tensor, *, dtype: int | None = None, mean: float = 0.0, scale: float = 1.0, seed: float | None = None
) -> Tensor:
    """RandomNormalLike: normal random numbers of x's shape (and dtype, unless `dtype`), with `mean` and standard
    deviation `scale`."""
    return (_normal(x.shape, seed, x.device) * scale + mean).cast(_random_dtype(dtype, x))


@onnx_op("Bernoulli", 15)
def bernoulli(p: Tensor, *, dtype: int | None = None, seed: float | None = None) -> Tensor:
    """Bernoulli: 1 with probability p, else 0, in p's dtype (or `dtype`)."""
    dt = onnx_dtype(dtype, "dtype") if dtype is not None else p.dtype
    return (_uniform(p.shape, seed, p.device)[0] < p).cast(dt)
