"""The ONNX op table's functions, one module per kind of op; importing this package registers them all."""

from zeptograd.onnx.ops import (  # noqa: F401
    control,
    elementwise,
    nn,
    rnn,
    sequence,
    shape,
    signal,
)
