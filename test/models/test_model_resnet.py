"""The ResNets of the model suite against the same ResNets in torch (zeptograd/examples/torch_models.py:
torch.nn as torchvision writes them; torchvision itself is not needed), weights and BatchNorm buffers copied in:
in training mode the output, every gradient and the losses of five optimizer steps (BatchNorm normalizing with the
batch's statistics), then the running statistics those steps left, then the eval-mode output (BatchNorm with the
running statistics). ResNet-18 (BasicBlock) and ResNet-50 (Bottleneck), each with the CIFAR and the ImageNet stem,
at tiny widths."""

from __future__ import annotations

import numpy as np
import pytest
from model_oracle import check_against_torch, copy_weights, cross_entropy, torch

from zeptograd import Tensor
from zeptograd.examples.torch_models import TorchBasicBlock, TorchBottleneck, TorchResNet
from zeptograd.helpers import Context
from zeptograd.models.resnet import ResNet, resnet18, resnet50
from zeptograd.nn.state import get_state_dict

# a model's graphs are thousands of nodes: the pyrender round trip of every graph built (conftest) is the IR tests'
pytestmark = pytest.mark.no_roundtrip


ARCHS = {"resnet18": (resnet18, TorchBasicBlock, (2, 2, 2, 2)), "resnet50": (resnet50, TorchBottleneck, (3, 4, 6, 3))}


def _models(arch: str, stem: str, width: int, classes: int) -> tuple[ResNet, TorchResNet]:
    make, block, layers = ARCHS[arch]
    torch.manual_seed(0)
    return make(num_classes=classes, stem=stem, width=width), TorchResNet(block, layers, classes, stem, width)


def _check(
    arch: str, stem: str, size: int, *, width: int = 8, batch: int = 4, classes: int = 10, eval_too: bool = True, **kw
) -> None:
    model, twin = _models(arch, stem, width, classes)
    rng = np.random.default_rng(0)
    images = rng.standard_normal((batch, 3, size, size)).astype(np.float32)
    labels = rng.integers(0, classes, (batch,)).astype(np.int32)
    check_against_torch(model, twin, (images,), cross_entropy, labels, **kw)

    # the running statistics after the five training steps (each model updated its own from its own batches)
    zstate = get_state_dict(model)
    Tensor.realize(*zstate.values())  # the last step's pending updates, in one schedule
    for name, buf in twin.named_buffers():
        np.testing.assert_allclose(
            zstate[name].numpy(), buf.numpy(), rtol=2e-3, atol=2e-4, err_msg=f"buffer {name} after the steps"
        )
    if not eval_too:
        return
    # eval mode: BatchNorm normalizes with the running statistics (the twin's, after its steps, copied over)
    copy_weights(model, twin)
    twin.eval()
    with torch.no_grad():
        expected = twin(torch.from_numpy(images)).numpy()
    assert not Tensor.training
    np.testing.assert_allclose(model(Tensor(images)).numpy(), expected, rtol=2e-3, atol=2e-4, err_msg="eval forward")


def test_state_dict_names_are_torchvisions():
    """Every parameter and buffer name and shape of the torchvision-style twin, and no other (also what a
    torchvision checkpoint of the same sizes has: conv1, bn1, layerN.M.convK/bnK, layerN.0.downsample.0/1, fc)."""
    for arch in ARCHS:
        for stem in ("cifar", "imagenet"):
            model, twin = _models(arch, stem, 4, 7)
            zshapes = {k: v.shape for k, v in get_state_dict(model).items()}
            assert zshapes == {k: tuple(v.shape) for k, v in twin.state_dict().items()}
    assert "layer2.0.downsample.1.running_var" in zshapes and "layer1.0.downsample.0.weight" in zshapes


# both ResNet-18s train with Adam and both ResNet-50s with SGD: each optimizer's update kernels are compiled for one
# architecture's parameter shapes only (compiling the kernels is most of these tests' time)


def test_resnet18_cifar_stem_adam():
    _check("resnet18", "cifar", 16, optimizer="adam", lr=1e-3, eval_too=False)


def test_resnet18_imagenet_stem_adam():
    _check("resnet18", "imagenet", 64, optimizer="adam", lr=1e-3)


def test_resnet50_cifar_stem_sgd():
    _check("resnet50", "cifar", 16, lr=1e-3)


def test_resnet50_imagenet_stem_sgd():
    _check("resnet50", "imagenet", 64, eval_too=False)


def test_resnet18_cifar_stem_unoptimized():
    with Context(NOOPT=1):
        _check("resnet18", "cifar", 16, eval_too=False)
