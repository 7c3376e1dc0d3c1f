"""ONNX ops: linear quantization (QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear) and the integer matrix
products over quantized values (MatMulInteger, QLinearMatMul).

A quantized value q stands for (q - zero_point) * scale; quantizing rounds x / scale half-to-even, adds the zero
point and saturates to the integer type's range (to an fp8 format, it converts as Cast does). The scale and the
zero point are one value, one per slice along `axis`, or (from opset 21) one per block of `block_size` elements
along it.

>>> import numpy as np
>>> from onnx import TensorProto, helper
>>> from zeptograd.onnx import OnnxRunner
>>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
>>> y = helper.make_tensor_value_info("y", TensorProto.UINT8, [4])
>>> scale = helper.make_tensor("scale", TensorProto.FLOAT, [], [0.5])
>>> node = helper.make_node("QuantizeLinear", ["x", "scale"], ["y"])
>>> run = OnnxRunner(helper.make_model(helper.make_graph([node], "g", [x], [y], [scale])))
>>> run({"x": np.array([0.25, 0.75, -1.0, 200.0], np.float32)})["y"].tolist()
[0, 2, 0, 255]
"""

from __future__ import annotations

from zeptograd.dtype import DType, dtypes
from zeptograd.onnx.dtypes import onnx_dtype
from zeptograd.onnx.ops.elementwise import cast_to
from zeptograd.onnx.registry import OnnxError, onnx_op
from zeptograd.tensor import Tensor


def _along(v: Tensor, x: Tensor, axis: int, block_size: int, what: str) -> Tensor:
    """A scale or zero point shaped to broadcast against x: one value as is, one per slice along `axis` (1-D),
    or one per block of `block_size` along it (x's rank, each block's value repeated over its elements)."""
    if v.numel() == 1 and not block_size:
        return v.reshape(())
    if not -x.ndim <= axis < x.ndim:
        raise OnnxError(f"axis {axis} is out of range for an input of shape {x.shape}")
    axis %= x.ndim
    if not block_size:
        if v.ndim != 1 or v.shape[0] != x.shape[axis]:
            raise OnnxError(f"{what} of shape {v.shape} must be one value or one per slice along axis {axis} "
                            f"(size {x.shape[axis]}) of the input of shape {x.shape}")  # fmt: skip
        return v.reshape(tuple(v.shape[0] if i == axis else 1 for i in range(x.ndim)))
    if block_size < 0:
        raise OnnxError(f"block_size must be positive, got {block_size}")
    blocks = -(-x.shape[axis] // block_size)
    want = tuple(blocks if i == axis else s for i, s in enumerate(x.shape))
    if v.shape != want:
        raise OnnxError(f"{what} of shape {v.shape} does not fit blocks of {block_size} along axis {axis} of the "
                        f"input of shape {x.shape} (expected {want})")  # fmt: skip
    # each block's value repeated block_size times along the axis, the last (partial) block cut to x's size
    rep = v.unsqueeze(axis + 1).expand(*v.shape[: axis + 1], block_size, *v.shape[axis + 1 :])
    rep = rep.reshape(tuple(blocks * block_size if i == axis else s for i, s in enumerate(v.shape)))
    return rep.shrink(tuple((0, s) for s in x.shape))


def _quantized_type(zero_point: Tensor | None, output_dtype: int) -> DType:
    if zero_point is not None:
        if output_dtype and onnx_dtype(output_dtype, "output_dtype") is not zero_point.dtype:
            raise OnnxError(f"output_dtype {onnx_dtype(output_dtype)} differs from the zero point's {zero_point.dtype}")
        return zero_point.dtype
    return onnx_dtype(output_dtype, "output_dtype") if output_dtype else dtypes.uint8


def _quantize(
    x: Tensor, scale: Tensor, zero_point: Tensor | None, axis: int, saturate: int, block_size: int,
    output_dtype: int, precision: int,
) -> Tensor:  # fmt: skip
    dt = _quantized_type(zero_point, output_dtype)
    s = _along(scale, x, axis, block_size, "y_scale")
    if precision:
        p = onnx_dtype(precision, "precision")
        q = x.cast(p) / s.cast(p)
    else:
        q = x / s.cast(x.dtype) if scale.dtype is x.dtype else x.cast(dtypes.float32) / s.cast(dtypes.float32)
    if dtypes.is_float(dt):
        if zero_point is not None:
            q = q + _along(zero_point, x, axis, block_size, "y_zero_point").cast(q.dtype)
        return cast_to(q, dt, saturate)
    if not dtypes.is_int(dt) or dt.itemsize > 2:
        raise OnnxError(f"cannot quantize to {dt}: ONNX quantizes to 2-, 4-, 8- and 16-bit integers and fp8")
    qi = q.round().cast(dtypes.int32)
    if zero_point is not None:
        qi = qi + _along(zero_point, x, axis, block_size, "y_zero_point").cast(dtypes.int32)
    return qi.clamp(dtypes.min(dt), dtypes.max(dt)).cast(dt)


@onnx_op("QuantizeLinear", 10)
def quantize_linear(x: Tensor, y_scale: Tensor, y_zero_point: Tensor | None = None, *, axis: int = 1) -> Tensor:
    """QuantizeLinear (opsets 10-18): saturate(round(x / y_scale) + y_zero_point)."""
    return _quantize(x, y_scale, y_zero_point, axis, 1, 0, 0, 0)


@onnx_op("QuantizeLinear", 19)
def quantize_linear_19(
    x: Tensor, y_scale: Tensor, y_zero_point: Tensor | None = None, *, axis: int = 1, saturate: int = 1
) -> Tensor:
    """QuantizeLinear (opsets 19-20): saturate(round(x / y_scale) + y_zero_point), fp8 outputs as Cast."""
    return _quantize(x, y_scale, y_zero_point, axis, saturate, 0, 0, 0)


@onnx_op("QuantizeLinear", 21)
def quantize_linear_21(
    x: Tensor, y_scale: Tensor, y_zero_point: Tensor | None = None, *, axis: int = 1, saturate: int = 1,
    block_size: int = 0, output_dtype: int = 0, precision: int = 0,
) -> Tensor:  # fmt: skip
    """QuantizeLinear: saturate(round(x / y_scale) + y_zero_point), per tensor, axis or block; x / y_scale in
    the dtype `precision` names (from opset 23)."""
    return _quantize(x, y_scale, y_zero_point, axis, saturate, block_size, output_dtype, precision)


def _dequantize(
    x: Tensor, scale: Tensor, zero_point: Tensor | None, axis: int, block_size: int, output_dtype: int
) -> Tensor:
    out = onnx_dtype(output_dtype, "output_dtype") if output_dtype else scale.dtype
    dx = x.cast(dtypes.float32)
    if zero_point is not None and not dtypes.is_float(x.dtype):
        if zero_point.dtype is not x.dtype:
            raise OnnxError(f"x_zero_point is {zero_point.dtype}, but x is {x.dtype}: they must be of one type")
        dx = dx - _along(zero_point, x, axis, block_size, "x_zero_point").cast(dtypes.float32)
    return (dx * _along(scale, x, axis, block_size, "x_scale").cast(dtypes.float32)).cast(out)


@onnx_op("DequantizeLinear", 10)
def dequantize_linear(x: Tensor, x_scale: Tensor, x_zero_point: Tensor | None = None, *, axis: int = 1) -> Tensor:
    """DequantizeLinear (opsets 10-20): (x - x_zero_point) * x_scale, in the scale's dtype."""
    return _dequantize(x, x_scale, x_zero_point, axis, 0, 0)


@onnx_op("DequantizeLinear", 21)
def dequantize_linear_21(
    x: Tensor, x_scale: Tensor, x_zero_point: Tensor | None = None, *, axis: int = 1, block_size: int = 0,
    output_dtype: int = 0,
) -> Tensor:  # fmt: skip
    """DequantizeLinear: (x - x_zero_point) * x_scale per tensor, axis or block, in the scale's dtype (or
    `output_dtype`, from opset 23)."""
    return _dequantize(x, x_scale, x_zero_point, axis, block_size, output_dtype)


@onnx_op("DynamicQuantizeLinear", 11)
def dynamic_quantize_linear(x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """DynamicQuantizeLinear: x quantized to uint8 over the range [min(x, 0), max(x, 0)]; returns (y, y_scale,
    y_zero_point)."""
    x32 = x.cast(dtypes.float32)
    hi, lo = x32.max().maximum(0.0), x32.min().minimum(0.0)
    scale = (hi == lo).where(1.0, hi - lo) / 255.0
    zero_point = (0.0 - lo / scale).clamp(0.0, 255.0).round()
    y = ((x32 / scale).round() + zero_point).clamp(0.0, 255.0).cast(dtypes.uint8)
    return y, scale.cast(x.dtype), zero_point.cast(dtypes.uint8)


def _centered(v: Tensor, zero_point: Tensor | None, per_row: bool) -> Tensor:
    """v - zero_point in int32; a 1-D zero point of A is one per row (so it lines up with A's rows)."""
    v = v.cast(dtypes.int32)
    if zero_point is None:
        return v
    zp = zero_point.cast(dtypes.int32)
    if per_row and zp.ndim >= 1 and zp.numel() > 1:
        zp = zp.reshape(*zp.shape, 1)
    return v - zp


@onnx_op("MatMulInteger", 10)
def matmul_integer(
    a: Tensor, b: Tensor, a_zero_point: Tensor | None = None, b_zero_point: Tensor | None = None
) -> Tensor:
    """MatMulInteger: (a - a_zero_point) @ (b - b_zero_point) in int32 (zero points per tensor, per row of a or
    per column of b)."""
    return _centered(a, a_zero_point, True).matmul(_centered(b, b_zero_point, False), dtype=dtypes.int32)


@onnx_op("QLinearMatMul", 10)
def qlinear_matmul(
    a: Tensor, a_scale: Tensor, a_zero_point: Tensor, b: Tensor, b_scale: Tensor, b_zero_point: Tensor,
    y_scale: Tensor, y_zero_point: Tensor,
) -> Tensor:  # fmt: skip
    """QLinearMatMul: saturate(round((a - a_zp) @ (b - b_zp) * a_scale * b_scale / y_scale) + y_zp), in y_zp's
    dtype."""
    acc = _centered(a, a_zero_point, True).matmul(_centered(b, b_zero_point, False), dtype=dtypes.int32)
    a_s = a_scale.reshape(*a_scale.shape, 1) if a_scale.ndim >= 1 and a_scale.numel() > 1 else a_scale
    factor = (a_s * b_scale / y_scale).cast(dtypes.float64)  # the scales combine in their dtype, as numpy
    y = (acc.cast(dtypes.float64) * factor + y_zero_point.cast(dtypes.float64)).round()
    dt = y_zero_point.dtype
    return y.clamp(dtypes.min(dt), dtypes.max(dt)).cast(dt)
