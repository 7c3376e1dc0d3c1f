"""ONNX ops: elementwise."""

from __future__ import annotations

from zeptograd.onnx.registry import onnx_op
from zeptograd.tensor import Tensor


@onnx_op("Relu")
def relu(x: Tensor) -> Tensor:
    """Relu(x) = max(x, 0)."""
    return x.relu()


@onnx_op("Neg")
def neg(x: Tensor) -> Tensor:
    """Neg(x) = -x."""
    return -x


@onnx_op("Add")
def add(a: Tensor, b: Tensor) -> Tensor:
    """Add(a, b) = a + b, broadcast numpy-style."""
    return a + b
