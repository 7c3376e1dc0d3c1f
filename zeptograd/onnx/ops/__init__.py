"""The ONNX op table's functions, one module per kind of op; importing this package registers them all."""

import zeptograd.onnx.ops.ml
import zeptograd.onnx.ops.sequence_models
import zeptograd.onnx.ops.text  # noqa: F401
from zeptograd.onnx.ops import attention, control, elementwise, indexing, nn, quantize, reduce, shape  # noqa: F401
