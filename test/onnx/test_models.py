"""Models exported from PyTorch to ONNX run by OnnxRunner against onnxruntime on the same file and inputs: a
ResNet (convolutions, BatchNorm folded or not, pooling, Gemm) and a transformer encoder (attention's shape
arithmetic: Shape -> Gather -> Concat -> Reshape), eagerly and under TinyJit with new inputs each call."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
torch = pytest.importorskip("torch")

from zeptograd import Tensor, TinyJit  # noqa: E402
from zeptograd.examples.onnx_resnet import export  # noqa: E402
from zeptograd.examples.torch_models import torch_encoder, torch_resnet  # noqa: E402
from zeptograd.onnx import OnnxRunner  # noqa: E402

pytestmark = pytest.mark.no_roundtrip  # whole models: the IR round trip of every graph is the IR tests' job


def _session(path: str):
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    return lambda x: session.run(["y"], {"x": x})[0]


@pytest.fixture(scope="module")
def resnet(tmp_path_factory) -> str:
    torch.manual_seed(0)
    example = np.zeros((1, 3, 32, 32), np.float32)
    return export(
        torch_resnet("resnet18", num_classes=10, width=8), example, str(tmp_path_factory.mktemp("m") / "r.onnx")
    )


@pytest.fixture(scope="module")
def encoder(tmp_path_factory) -> str:
    torch.manual_seed(0)
    example = np.zeros((1, 6, 32), np.float32)
    return export(torch_encoder(32, 4, 64, 2), example, str(tmp_path_factory.mktemp("m") / "e.onnx"))


@pytest.mark.parametrize("model", ["resnet", "encoder"])
def test_matches_onnxruntime(model: str, request: pytest.FixtureRequest):
    path = request.getfixturevalue(model)
    shape = (2, 3, 32, 32) if model == "resnet" else (2, 6, 32)
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    out = OnnxRunner(path)({"x": x})["y"]
    np.testing.assert_allclose(out.numpy(), _session(path)(x), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("model", ["resnet", "encoder"])
def test_tinyjit_replays_with_new_inputs(model: str, request: pytest.FixtureRequest):
    path = request.getfixturevalue(model)
    shape = (3, 3, 32, 32) if model == "resnet" else (3, 6, 32)
    runner, reference = OnnxRunner(path), _session(path)
    step = TinyJit(lambda x: runner({"x": x})["y"])
    rng = np.random.default_rng(2)
    for _ in range(4):  # run, capture, replay twice: each call's input is new
        x = rng.standard_normal(shape).astype(np.float32)
        np.testing.assert_allclose(step(Tensor(x)).numpy(), reference(x), rtol=1e-4, atol=1e-4)
