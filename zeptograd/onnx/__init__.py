"""Run ONNX models: `OnnxRunner(path_or_model)({"input": x})` returns the outputs by name, as lazy Tensors.

Needs the onnx package (`pip install -e ".[onnx]"`). Each ONNX op is one small function of Tensor ops in
`zeptograd/onnx/ops/`, registered by op type and opset in the table of `zeptograd/onnx/registry.py`;
`zeptograd.onnx.backend` is the `onnx.backend.base.Backend` that ONNX's conformance suite runs.

A model is a path, bytes or an `onnx.ModelProto`; inputs are numpy arrays or Tensors (a sequence input is a list,
an empty optional None). Everything is checked when the runner is made: an op, opset, attribute or dtype that
zeptograd lacks raises `OnnxError` naming the node before anything runs.

>>> import numpy as np
>>> from onnx import TensorProto, helper
>>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])
>>> y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n"])
>>> nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Neg", ["r"], ["y"])]
>>> model = helper.make_model(helper.make_graph(nodes, "g", [x], [y]))
>>> run = OnnxRunner(model.SerializeToString())
>>> run({"x": np.array([-1.0, 2.0], np.float32)})["y"].tolist()
[-0.0, -2.0]
>>> bad = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="r", alpha=1.0)],
...                                           "g", [x], [y]))
>>> OnnxRunner(bad)
Traceback (most recent call last):
  ...
zeptograd.onnx.registry.OnnxError: node 'r' (Relu, opset ...): unsupported attribute alpha

Shape arithmetic (Shape -> Gather -> Concat -> Reshape) is read back to Python once per input shape, so a model
wrapped in TinyJit is captured whole and replays with nothing read back.
"""

from zeptograd.onnx import ops as _ops  # noqa: F401 (registers the op table)
from zeptograd.onnx.registry import OnnxError, onnx_op, registered
from zeptograd.onnx.runner import OnnxRunner

__all__ = ["OnnxError", "OnnxRunner", "onnx_op", "registered"]
