"""The MLP classifier of the model suite against the same MLP in torch, weights copied in: outputs, gradients and
the losses of five optimizer steps, with each activation, several depths, SGD and Adam, and NOOPT=1."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from model_oracle import check_against_torch, copy_weights, cross_entropy, torch

from zeptograd import Tensor
from zeptograd.helpers import Context
from zeptograd.models.mlp import MLP, MLPConfig

tnn = torch.nn
# a model's graphs are thousands of nodes: the pyrender round trip of every graph built (conftest) is the IR tests'
pytestmark = pytest.mark.no_roundtrip

TORCH_ACTIVATIONS = {
    "relu": tnn.ReLU,
    "gelu": tnn.GELU,
    "gelu_tanh": lambda: tnn.GELU(approximate="tanh"),
}


class TorchMLP(tnn.Module):
    def __init__(self, c: MLPConfig):
        super().__init__()
        sizes = (c.in_features, *c.hidden, c.num_classes)
        self.layers = tnn.ModuleList(tnn.Linear(a, b, bias=c.bias) for a, b in itertools.pairwise(sizes))
        self.act = TORCH_ACTIVATIONS[c.activation]()

    def forward(self, x):
        x = torch.flatten(x, 1)
        for layer in self.layers[:-1]:
            x = self.act(layer(x))
        return self.layers[-1](x)


def _check(config: MLPConfig, input_shape: tuple[int, ...], batch: int = 8, **kw) -> None:
    torch.manual_seed(0)
    twin = TorchMLP(config)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, *input_shape)).astype(np.float32)
    labels = rng.integers(0, config.num_classes, (batch,)).astype(np.int32)
    check_against_torch(MLP(config), twin, (x,), cross_entropy, labels, **kw)


@pytest.mark.parametrize("activation", ["relu", "gelu_tanh"])  # exact GELU: below
def test_mlp_activations_sgd(activation: str):
    _check(MLPConfig(in_features=20, hidden=(32, 16), num_classes=5, activation=activation), (20,))


@pytest.mark.parametrize("hidden", [(), (32, 32, 32, 16)])
def test_mlp_depths_adam(hidden: tuple[int, ...]):
    _check(MLPConfig(in_features=20, hidden=hidden, num_classes=7), (20,), optimizer="adam", lr=1e-3)


def test_mlp_flattens_images_without_bias():
    """(N, C, H, W) images flattened as torch.flatten(x, 1); Linears without biases; the exact GELU."""
    _check(MLPConfig(in_features=48, hidden=(32,), num_classes=10, activation="gelu", bias=False), (3, 4, 4), batch=4)


def test_mlp_unoptimized():
    with Context(NOOPT=1):
        _check(MLPConfig(in_features=20, hidden=(32, 16), num_classes=5, activation="gelu"), (20,))


def test_mlp_state_dict_names_and_inference():
    """The torch twin's keys load strictly; the output outside training mode matches torch's."""
    config = MLPConfig(in_features=12, hidden=(16, 8), num_classes=3, activation="gelu_tanh")
    torch.manual_seed(1)
    twin, model = TorchMLP(config).eval(), MLP(config)
    copy_weights(model, twin)
    x = np.random.default_rng(1).standard_normal((5, 12)).astype(np.float32)
    with torch.no_grad():
        expected = twin(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(model(Tensor(x)).numpy(), expected, rtol=2e-3, atol=2e-4)
    assert sorted(twin.state_dict()) == [f"layers.{i}.{p}" for i in range(3) for p in ("bias", "weight")]


def test_mlp_rejects_bad_config_and_input():
    with pytest.raises(ValueError, match="activation"):
        MLP(MLPConfig(in_features=4, hidden=(), num_classes=2, activation="tanh"))
    with pytest.raises(ValueError, match="4 values"):
        MLP(MLPConfig(in_features=4, hidden=(), num_classes=2))(Tensor.zeros(2, 5))
