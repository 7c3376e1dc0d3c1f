"""The ONNX op table's functions, one module per kind of op; importing this package registers them all."""

from zeptograd.onnx.ops import attention, control, elementwise, indexing, nn, quantize, reduce, rnn, sequence, shape, signal  # noqa: F401
