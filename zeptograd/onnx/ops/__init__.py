"""The ONNX op table's functions, one module per kind of op; importing this package registers them all."""

from zeptograd.onnx.ops import control, elementwise, nn, shape  # noqa: F401
from zeptograd.onnx.ops import attention  # noqa: F401
