"""zeptograd as an ONNX backend (`onnx.backend.base.Backend`): what ONNX's conformance suite drives.

>>> import onnx
>>> from onnx import TensorProto, helper
>>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
>>> y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
>>> model = helper.make_model(helper.make_graph([helper.make_node("Neg", ["x"], ["y"])], "g", [x], [y]))
>>> ZeptogradBackend.run_model(model, [np.array([1.0, -2.0], np.float32)])
[array([-1.,  2.], dtype=float32)]
"""

from __future__ import annotations

from typing import Any

import numpy as np  # noqa: F401 (the doctest's arrays)
from onnx.backend.base import Backend, BackendRep

from zeptograd.onnx.dtypes import to_numpy
from zeptograd.onnx.runner import OnnxRunner
from zeptograd.runtime.device import Device
from zeptograd.tensor import Tensor


def _numpy(value: Any) -> Any:
    if isinstance(value, Tensor):
        return to_numpy(value)
    if isinstance(value, list):
        return [_numpy(v) for v in value]
    return value


class ZeptogradRep(BackendRep):
    """A prepared model: `run(inputs)` takes the inputs in the graph's order and returns the outputs as numpy."""

    def __init__(self, runner: OnnxRunner):
        self.runner = runner

    def run(self, inputs: Any, **kwargs: Any) -> list[Any]:
        if isinstance(inputs, dict):
            named = dict(inputs)
        else:
            inputs = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
            named = {info.name: value for info, value in zip(self.runner.inputs, inputs, strict=False)}
        out = self.runner(named)
        return [_numpy(out[name]) for name in self.runner.outputs]


class ZeptogradBackend(Backend):
    """ONNX's backend interface over OnnxRunner; `device` is an ONNX device string ("CPU") or a zeptograd device."""

    @classmethod
    def prepare(cls, model: Any, device: str = "CPU", **kwargs: Any) -> ZeptogradRep:
        return ZeptogradRep(OnnxRunner(model, device=_device(device)))

    @classmethod
    def run_model(cls, model: Any, inputs: Any, device: str = "CPU", **kwargs: Any) -> list[Any]:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return device.split(":")[0].upper() in ("CPU", "CUDA") and Device.usable(_device(device) or Device.DEFAULT)


def _device(device: str) -> str | None:
    """ONNX says "CPU" or "CUDA"; zeptograd's default device serves "CPU" (DEVICE=LLVM runs the suite on LLVM)."""
    base = device.split(":")[0].upper()
    return None if base == "CPU" else base


prepare = ZeptogradBackend.prepare
run_model = ZeptogradBackend.run_model
supports_device = ZeptogradBackend.supports_device
