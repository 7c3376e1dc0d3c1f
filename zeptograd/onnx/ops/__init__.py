"""The ONNX op table's functions, one module per kind of op; importing this package registers them all."""

import zeptograd.onnx.ops.attention  # noqa: F401
from zeptograd.onnx.ops import control, elementwise, nn, shape  # noqa: F401
