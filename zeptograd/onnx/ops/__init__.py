"""The ONNX op table's functions, one module per kind of op; importing this package registers them all."""

import zeptograd.onnx.ops.quantize
import zeptograd.onnx.ops.reduce  # noqa: F401
from zeptograd.onnx.ops import control, elementwise, nn, shape  # noqa: F401
