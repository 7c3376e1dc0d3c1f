"""The UNet of the model suite against the same UNet in torch, weights copied in: outputs, gradients, and the losses of
five optimizer steps (mean squared error against a random target): two and three levels with SGD; max-pool and strided
convolution downsampling, SiLU and ReLU; Adam and NOOPT=1 in one test (compiling dominates: the cases share kernels)."""

from __future__ import annotations

import numpy as np
import pytest
from model_oracle import check_against_torch, mse, torch

from zeptograd.helpers import Context
from zeptograd.models.unet import UNet, UNetConfig

tnn = torch.nn
# a model's graphs are thousands of nodes: the pyrender round trip of every graph built (conftest) is the IR tests'
pytestmark = pytest.mark.no_roundtrip


class TorchBlock(tnn.Module):
    def __init__(self, cin: int, cout: int, groups: int, activation: str):
        super().__init__()
        self.conv1, self.norm1 = tnn.Conv2d(cin, cout, 3, padding=1), tnn.GroupNorm(groups, cout)
        self.conv2, self.norm2 = tnn.Conv2d(cout, cout, 3, padding=1), tnn.GroupNorm(groups, cout)
        self.act = tnn.SiLU() if activation == "silu" else tnn.ReLU()

    def forward(self, x):
        x = self.act(self.norm1(self.conv1(x)))
        return self.act(self.norm2(self.conv2(x)))


class TorchUNet(tnn.Module):
    def __init__(self, c: UNetConfig):
        super().__init__()
        self.depth, self.maxpool = c.depth, c.downsample == "maxpool"
        chans = [c.base_channels * 2**i for i in range(c.depth + 1)]
        self.enc = tnn.ModuleList(
            TorchBlock(c.in_channels if i == 0 else chans[i - 1], chans[i], c.groups, c.activation)
            for i in range(c.depth)
        )
        self.down = tnn.ModuleList(
            [] if self.maxpool else [tnn.Conv2d(chans[i], chans[i], 3, stride=2, padding=1) for i in range(c.depth)]
        )
        self.mid = TorchBlock(chans[-2], chans[-1], c.groups, c.activation)
        self.up = tnn.ModuleList(tnn.ConvTranspose2d(chans[i + 1], chans[i], 2, stride=2) for i in range(c.depth))
        self.dec = tnn.ModuleList(TorchBlock(2 * chans[i], chans[i], c.groups, c.activation) for i in range(c.depth))
        self.out = tnn.Conv2d(chans[0], c.out_channels, 1)

    def forward(self, x):
        skips = []
        for i, block in enumerate(self.enc):
            x = block(x)
            skips.append(x)
            x = tnn.functional.max_pool2d(x, 2) if self.maxpool else self.down[i](x)
        x = self.mid(x)
        for i in reversed(range(self.depth)):
            x = self.dec[i](torch.cat([self.up[i](x), skips[i]], dim=1))
        return self.out(x)


def _check(config: UNetConfig, batch: int = 2, side: int = 16, **kw) -> None:
    torch.manual_seed(0)
    twin = TorchUNet(config)
    rng = np.random.default_rng(0)
    images = rng.standard_normal((batch, config.in_channels, side, side)).astype(np.float32)
    target = rng.standard_normal((batch, config.out_channels, side, side)).astype(np.float32)
    check_against_torch(UNet(config), twin, (images,), mse, target, **kw)


@pytest.mark.parametrize("depth", [2, 3])
def test_unet_matches_torch_sgd(depth: int):
    # one config but the depth: the three-level UNet's top two levels are the two-level one's, their kernels compiled
    # once for both (compiling dominates these tests)
    _check(UNetConfig(in_channels=3, out_channels=2, base_channels=4, depth=depth, groups=2))


def test_unet_unoptimized_relu_strided_conv_down_adam():
    config = UNetConfig(
        in_channels=3, out_channels=2, base_channels=4, depth=2, groups=2, activation="relu", downsample="conv"
    )
    with Context(NOOPT=1):
        _check(config, optimizer="adam", lr=1e-3)
