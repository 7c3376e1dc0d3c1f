"""Run ONNX models: `OnnxRunner(path_or_model)({"input": x})` returns the outputs by name, as lazy Tensors.

Needs the onnx package (`pip install -e ".[onnx]"`). Each ONNX op is one small function of Tensor ops in
`zeptograd/onnx/ops/`, registered by op type and opset in the table of `zeptograd/onnx/registry.py`;
`zeptograd.onnx.backend` is the `onnx.backend.base.Backend` that ONNX's conformance suite runs.
"""

from zeptograd.onnx import ops as _ops  # noqa: F401 (registers the op table)
from zeptograd.onnx.registry import OnnxError, onnx_op, registered
from zeptograd.onnx.runner import OnnxRunner

__all__ = ["OnnxError", "OnnxRunner", "onnx_op", "registered"]
