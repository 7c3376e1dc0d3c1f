"""What the ONNX tests share: building a model with onnx.helper, running it on onnxruntime (the oracle), and
test-only stand-ins for ops the op table may not have yet, installed into the table only for the test that asks
(`install(monkeypatch, opset)`) and only where no implementation is registered."""

from __future__ import annotations

from typing import Any

import onnx
import pytest
from onnx import helper

from zeptograd import Tensor
from zeptograd.dtype import dtypes
from zeptograd.onnx import registry


def info(name: str, elem: int, shape: list | None) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, shape)


def model(nodes: list, inputs: list, outputs: list, inits: list = (), opset: int = 17) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8  # what onnxruntime reads
    return m


def ort_run(m: onnx.ModelProto, feeds: dict) -> list:
    """The model's outputs from onnxruntime (the test skips without it)."""
    ort = pytest.importorskip("onnxruntime")
    return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def _shape(x: Tensor, *, start: int = 0, end: int | None = None) -> Tensor:
    return Tensor(list(x.shape)[start:end], dtype=dtypes.int64, device=x.device)


def _gather(data: Tensor, indices: Tensor, *, axis: int = 0) -> Tensor:
    return data.movedim(axis, 0)[indices].movedim(0, axis) if axis else data[indices]


def _concat(*xs: Tensor, axis: int) -> Tensor:
    return Tensor.cat(*xs, dim=axis)


def _matmul(a: Tensor, b: Tensor) -> Tensor:
    return a @ b


def _less(a: Tensor, b: Tensor) -> Tensor:
    return a < b


def _mul(a: Tensor, b: Tensor) -> Tensor:
    return a * b


STAND_INS: dict[str, Any] = {
    "Shape": _shape, "Gather": _gather, "Concat": _concat, "MatMul": _matmul, "Less": _less, "Mul": _mul,
}  # fmt: skip


def install(monkeypatch: pytest.MonkeyPatch, opset: int) -> None:
    """Register the stand-ins missing from the op table at `opset` for one test (monkeypatch undoes it)."""
    for op, fn in STAND_INS.items():
        if registry.lookup("", op, opset) is None:
            attributes, _ = registry._attributes(fn)
            monkeypatch.setitem(registry._OPS, ("", op), [registry.OnnxOp(op, "", 1, fn, (), attributes)])
