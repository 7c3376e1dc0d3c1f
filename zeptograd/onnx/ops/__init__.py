"""The ONNX op table's functions, one module per kind of op; importing this package registers them all."""

from zeptograd.onnx.ops import (  # noqa: F401
    attention,
    control,
    elementwise,
    indexing,
    nn,
    quantize,
    reduce,
    rnn,
    sequence,
    shape,
    signal,
)
