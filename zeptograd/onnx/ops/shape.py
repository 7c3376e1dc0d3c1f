"""ONNX ops: shape."""

from __future__ import annotations

from typing import Any

from zeptograd.onnx.registry import onnx_op
from zeptograd.tensor import Tensor


@onnx_op("Identity")
def identity(x: Any) -> Any:
    """Identity(x) = x (a tensor, a sequence or an optional)."""
    return x


@onnx_op("Reshape", 5, static=(1,))
def reshape(data: Tensor, shape: list[int], *, allowzero: int = 0) -> Tensor:
    """Reshape: 0 in `shape` copies the input's size there (unless `allowzero`), -1 is inferred."""
    if not allowzero:
        shape = [data.shape[i] if s == 0 else s for i, s in enumerate(shape)]
    return data.reshape(shape)
