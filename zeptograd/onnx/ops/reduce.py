"""ONNX ops: reductions (ReduceSum, ReduceMax, ... over axes), ArgMax/ArgMin, and the running sums CumSum/CumProd.

The reductions take their axes as an attribute up to opset 17 (ReduceSum: 12) and as an optional input after;
no axes reduce every axis, unless `noop_with_empty_axes`, where the reduction is over no axis (each element
reduced alone). The result keeps the input's dtype; reduced axes stay as size 1 with `keepdims`.

>>> import numpy as np
>>> from onnx import TensorProto, helper
>>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])
>>> y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 1])
>>> node = helper.make_node("ReduceMax", ["x"], ["y"], axes=[1])
>>> model = helper.make_model(helper.make_graph([node], "g", [x], [y]), opset_imports=[helper.make_opsetid("", 13)])
>>> from zeptograd.onnx import OnnxRunner
>>> OnnxRunner(model)({"x": np.array([[1, 5], [7, 2]], np.float32)})["y"].tolist()
[[5.0], [7.0]]
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from zeptograd.dtype import DType, dtypes
from zeptograd.onnx.registry import OnnxError, onnx_op
from zeptograd.tensor import Tensor


def _axes(x: Tensor, axes: Any, noop_with_empty_axes: int) -> tuple[int, ...]:
    """The axes to reduce, normalized: none given (None or []) means all of them, or none with noop."""
    if isinstance(axes, int):
        axes = [axes]
    if not axes:
        return () if noop_with_empty_axes else tuple(range(x.ndim))
    out = []
    for a in axes:
        if not -x.ndim <= a < max(x.ndim, 1):
            raise OnnxError(f"axis {a} is out of range for a tensor of shape {x.shape}")
        out.append(a % x.ndim if x.ndim else 0)
    if len(set(out)) != len(out):
        raise OnnxError(f"axes {list(axes)} repeat an axis")
    return tuple(sorted(set(out))) if x.ndim else ()


def _kept(x: Tensor, axes: tuple[int, ...], keepdims: int) -> tuple[int, ...]:
    return tuple(1 if i in axes else s for i, s in enumerate(x.shape) if keepdims or i not in axes)


def _lowest(dt: DType) -> Any:
    """The identity of max in dtype `dt`: -inf for floats, the smallest value for integers, False for bool."""
    return dtypes.min(dt)


def _highest(dt: DType) -> Any:
    return dtypes.max(dt)


def _sum(x: Tensor, axes: tuple[int, ...], keep: bool) -> Tensor:
    if not axes:  # a reduction over no axis: each element alone
        return x
    return x.sum(axes, keepdim=keep).cast(x.dtype)


def _prod(x: Tensor, axes: tuple[int, ...], keep: bool) -> Tensor:
    return x.prod(axes, keepdim=keep).cast(x.dtype) if axes else x


def _extreme(x: Tensor, axes: tuple[int, ...], keep: bool, largest: bool) -> Tensor:
    if any(x.shape[a] == 0 for a in axes):  # the max of nothing is the dtype's lowest value (ONNX, numpy's identity)
        value = _lowest(x.dtype) if largest else _highest(x.dtype)
        return Tensor.full(_kept(x, axes, keep), value, dtype=x.dtype, device=x.device)
    if not axes:
        return x
    return x.max(axes, keepdim=keep) if largest else x.min(axes, keepdim=keep)


def _mean(x: Tensor, axes: tuple[int, ...], keep: bool) -> Tensor:
    if not axes:
        return x
    if dtypes.is_float(x.dtype):
        return x.mean(axes, keepdim=keep).cast(x.dtype)
    n = math.prod(x.shape[a] for a in axes)
    # integers: the sum in the dtype, divided as numpy's mean with dtype= does (truncated toward zero)
    return x.sum(axes, keepdim=keep).cast(x.dtype).div(max(n, 1), rounding_mode="trunc").cast(x.dtype)


def _log_sum_exp(x: Tensor, axes: tuple[int, ...], keep: bool) -> Tensor:
    if not axes:  # each element alone: log(exp(x)) is x (the stable form computes it exactly)
        return x
    if any(x.shape[a] == 0 for a in axes):
        return Tensor.full(_kept(x, axes, keep), -math.inf, dtype=x.dtype, device=x.device)
    return x.logsumexp(axes, keepdim=keep).cast(x.dtype)


# ONNX's name -> the reduction over `axes` (a tuple, possibly empty) keeping dims or not, in the input's dtype
_REDUCTIONS: dict[str, tuple[Callable[[Tensor, tuple[int, ...], bool], Tensor], str]] = {
    "ReduceSum": (_sum, "the sum"),
    "ReduceSumSquare": (lambda x, ax, k: _sum(x * x, ax, k), "the sum of the squares"),
    "ReduceL1": (lambda x, ax, k: _sum(x.abs(), ax, k), "the sum of the absolute values"),
    "ReduceL2": (lambda x, ax, k: _sum(x * x, ax, k).cast(dtypes.float64).sqrt().cast(x.dtype), "sqrt(sum(x**2))"),
    "ReduceLogSum": (lambda x, ax, k: _sum(x, ax, k).log().cast(x.dtype), "log(sum(x))"),
    "ReduceLogSumExp": (_log_sum_exp, "log(sum(exp(x))), without overflow"),
    "ReduceMean": (_mean, "the mean"),
    "ReduceProd": (_prod, "the product"),
    "ReduceMax": (lambda x, ax, k: _extreme(x, ax, k, True), "the maximum (the dtype's lowest over nothing)"),
    "ReduceMin": (lambda x, ax, k: _extreme(x, ax, k, False), "the minimum (the dtype's highest over nothing)"),
}


def _register(name: str, input_since: int) -> None:
    """Register reduction `name`: axes as an attribute before opset `input_since`, as an input from it on."""
    fn, what = _REDUCTIONS[name]

    def reduce_attr(data: Tensor, *, axes: list[int] | None = None, keepdims: int = 1) -> Tensor:
        return fn(data, _axes(data, axes, 0), bool(keepdims))

    def reduce_input(data: Tensor, axes: Any = None, *, keepdims: int = 1, noop_with_empty_axes: int = 0) -> Tensor:
        return fn(data, _axes(data, axes, noop_with_empty_axes), bool(keepdims))

    snake = "".join("_" + c.lower() if c.isupper() else c for c in name).lstrip("_")
    for f, form in ((reduce_attr, "the axes an attribute"), (reduce_input, "the axes an optional input")):
        f.__name__ = f.__qualname__ = f"{snake}_{'attr' if f is reduce_attr else 'input'}"
        f.__doc__ = f"{name}: {what} over the axes ({form}; none: every axis)."
    onnx_op(name, 1)(reduce_attr)
    onnx_op(name, input_since, static=(1,))(reduce_input)


for _name in _REDUCTIONS:
    _register(_name, 13 if _name == "ReduceSum" else 18)


# *** arg max / min ***


def _arg(x: Tensor, axis: int, keepdims: int, select_last_index: int, largest: bool) -> Tensor:
    if not -x.ndim <= axis < max(x.ndim, 1):
        raise OnnxError(f"axis {axis} is out of range for a tensor of shape {x.shape}")
    axis = axis % x.ndim if x.ndim else 0
    if x.ndim == 0:
        return Tensor.zeros((), dtype=dtypes.int64, device=x.device)
    if select_last_index:  # the first index in the reversed order is the last one
        n = x.shape[axis]
        flipped = x.flip(axis)
        idx = flipped.argmax(axis, keepdim=bool(keepdims)) if largest else flipped.argmin(axis, keepdim=bool(keepdims))
        return (n - 1 - idx.cast(dtypes.int64)).cast(dtypes.int64)
    idx = x.argmax(axis, keepdim=bool(keepdims)) if largest else x.argmin(axis, keepdim=bool(keepdims))
    return idx.cast(dtypes.int64)


@onnx_op("ArgMax")
def arg_max(data: Tensor, *, axis: int = 0, keepdims: int = 1) -> Tensor:
    """ArgMax (opsets 1-11): the int64 index of the first maximum along `axis`."""
    return _arg(data, axis, keepdims, 0, True)


@onnx_op("ArgMax", 12)
def arg_max_12(data: Tensor, *, axis: int = 0, keepdims: int = 1, select_last_index: int = 0) -> Tensor:
    """ArgMax: the int64 index of the first (or with `select_last_index` the last) maximum along `axis`."""
    return _arg(data, axis, keepdims, select_last_index, True)


@onnx_op("ArgMin")
def arg_min(data: Tensor, *, axis: int = 0, keepdims: int = 1) -> Tensor:
    """ArgMin (opsets 1-11): the int64 index of the first minimum along `axis`."""
    return _arg(data, axis, keepdims, 0, False)


@onnx_op("ArgMin", 12)
def arg_min_12(data: Tensor, *, axis: int = 0, keepdims: int = 1, select_last_index: int = 0) -> Tensor:
    """ArgMin: the int64 index of the first (or with `select_last_index` the last) minimum along `axis`."""
    return _arg(data, axis, keepdims, select_last_index, False)


# *** running sums and products ***


def _scan(x: Tensor, axis: Any, exclusive: int, reverse: int, product: bool) -> Tensor:
    if isinstance(axis, list):
        if len(axis) != 1:
            raise OnnxError(f"axis must be one value, got {axis}")
        axis = axis[0]
    if not -x.ndim <= axis < max(x.ndim, 1):
        raise OnnxError(f"axis {axis} is out of range for a tensor of shape {x.shape}")
    axis = axis % x.ndim
    if reverse:
        x = x.flip(axis)
    if exclusive:  # each running value leaves out its own element: the inclusive scan of the values moved one on
        pads = tuple((1, -1) if i == axis else (0, 0) for i in range(x.ndim))
        x = x.pad(pads, value=1 if product else 0)
    out = (x.cumprod(axis) if product else x.cumsum(axis)).cast(x.dtype)
    return out.flip(axis) if reverse else out


@onnx_op("CumSum", 11, static=(1,))
def cum_sum(x: Tensor, axis: Any, *, exclusive: int = 0, reverse: int = 0) -> Tensor:
    """CumSum: the running sum along `axis` (leaving out each element itself with `exclusive`; from the end with
    `reverse`)."""
    return _scan(x, axis, exclusive, reverse, False)


@onnx_op("CumProd", 26, static=(1,))
def cum_prod(x: Tensor, axis: Any, *, exclusive: int = 0, reverse: int = 0) -> Tensor:
    """CumProd: the running product along `axis` (leaving out each element itself with `exclusive`; from the end
    with `reverse`)."""
    return _scan(x, axis, exclusive, reverse, True)
