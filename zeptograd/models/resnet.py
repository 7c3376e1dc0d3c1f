"""ResNets (He et al. 2015, torchvision's "v1.5": a Bottleneck strides in its 3x3 convolution): BasicBlock for
ResNet-18/34, Bottleneck for ResNet-50/101/152. Two stems: "imagenet" (7x7 stride-2 convolution, BatchNorm, ReLU,
3x3 stride-2 max pool) and "cifar" (3x3 stride-1 convolution, BatchNorm, ReLU, no pool). `width` is the channels
of the first stage (64 in the paper; the stages have width, 2, 4 and 8 times width), so tests can run tiny ones.

Parameter and buffer names are torchvision's (`conv1`, `bn1`, `layer1.0.conv1`, `layer2.0.downsample.0`,
`layer2.0.downsample.1.running_mean`, ..., `fc`), so a torchvision state dict of the same sizes loads as it is
(`zeptograd.nn.state.load_state_dict`).

>>> from zeptograd import Tensor
>>> model = resnet18(num_classes=10, stem="cifar", width=8)
>>> model(Tensor.ones(2, 3, 16, 16)).shape
(2, 10)
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from zeptograd import Tensor, nn

STEMS = ("imagenet", "cifar")


def host_rng() -> np.random.Generator:
    """A numpy generator seeded from zeptograd's random generator (so `Tensor.manual_seed` fixes what it draws).
    The convolutions' weights are drawn from it on the host: drawn on the device, every weight shape of a model
    would compile a random kernel of its own (a ResNet-50 has over twenty)."""
    return np.random.default_rng(int(Tensor.randint(1, low=0, high=2**31 - 1).item()))


class Conv2d:
    """A bias-free convolution with padding kernel_size // 2, as a ResNet's: `weight` is (out_channels,
    in_channels, kernel_size, kernel_size), initialized as torchvision's ResNet does (kaiming-normal for a ReLU
    by fan-out: std sqrt(2 / (out_channels * kernel_size**2))), drawn from `rng` (a `host_rng()` when None).

    >>> from zeptograd import Tensor
    >>> conv = Conv2d(3, 8, 3, stride=2)
    >>> conv(Tensor.ones(1, 3, 8, 8)).shape, conv.weight.shape
    ((1, 8, 4, 4), (8, 3, 3, 3))
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        stride: int = 1,
        rng: np.random.Generator | None = None,
    ):
        self.in_channels, self.out_channels, self.kernel_size = in_channels, out_channels, kernel_size
        self.stride, self.padding = stride, kernel_size // 2
        std = math.sqrt(2 / (out_channels * kernel_size * kernel_size))
        shape = (out_channels, in_channels, kernel_size, kernel_size)
        w = (rng if rng is not None else host_rng()).standard_normal(shape, dtype=np.float32) * np.float32(std)
        self.weight = Tensor(w, requires_grad=True)

    def __call__(self, x: Tensor) -> Tensor:
        return x.conv2d(self.weight, None, 1, self.stride, 1, self.padding)


class BasicBlock:
    """Two 3x3 convolutions (the first strided), each followed by BatchNorm, the first by ReLU, plus the input
    (through `downsample`, a 1x1 strided convolution and BatchNorm, where the shape changes), then ReLU.

    >>> from zeptograd import Tensor
    >>> BasicBlock(8, 16, stride=2)(Tensor.ones(2, 8, 8, 8)).shape
    (2, 16, 4, 4)
    """

    expansion = 1

    def __init__(self, in_channels: int, planes: int, stride: int = 1, rng: np.random.Generator | None = None):
        rng = rng if rng is not None else host_rng()
        self.conv1 = Conv2d(in_channels, planes, 3, stride, rng=rng)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = Conv2d(planes, planes, 3, rng=rng)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample: list[Any] | None = None
        if stride != 1 or in_channels != planes * self.expansion:
            out = planes * self.expansion
            self.downsample = [Conv2d(in_channels, out, 1, stride, rng=rng), nn.BatchNorm2d(out)]

    def last_bn(self) -> nn.BatchNorm:
        """The BatchNorm before the residual sum (zeroed by `zero_init_residual`)."""
        return self.bn2

    def __call__(self, x: Tensor) -> Tensor:
        out = self.bn1(self.conv1(x)).relu()
        out = self.bn2(self.conv2(out))
        identity = x if self.downsample is None else self.downsample[1](self.downsample[0](x))
        return (out + identity).relu()


class Bottleneck:
    """A 1x1 convolution down to `planes` channels, a 3x3 (strided) convolution, a 1x1 convolution up to
    4 * planes, each followed by BatchNorm (and ReLU but the last), plus the input (through `downsample` where
    the shape changes), then ReLU.

    >>> from zeptograd import Tensor
    >>> Bottleneck(8, 4, stride=2)(Tensor.ones(2, 8, 8, 8)).shape
    (2, 16, 4, 4)
    """

    expansion = 4

    def __init__(self, in_channels: int, planes: int, stride: int = 1, rng: np.random.Generator | None = None):
        rng = rng if rng is not None else host_rng()
        self.conv1 = Conv2d(in_channels, planes, 1, rng=rng)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = Conv2d(planes, planes, 3, stride, rng=rng)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = Conv2d(planes, planes * self.expansion, 1, rng=rng)
        self.bn3 = nn.BatchNorm2d(planes * self.expansion)
        self.downsample: list[Any] | None = None
        if stride != 1 or in_channels != planes * self.expansion:
            out = planes * self.expansion
            self.downsample = [Conv2d(in_channels, out, 1, stride, rng=rng), nn.BatchNorm2d(out)]

    def last_bn(self) -> nn.BatchNorm:
        """The BatchNorm before the residual sum (zeroed by `zero_init_residual`)."""
        return self.bn3

    def __call__(self, x: Tensor) -> Tensor:
        out = self.bn1(self.conv1(x)).relu()
        out = self.bn2(self.conv2(out)).relu()
        out = self.bn3(self.conv3(out))
        identity = x if self.downsample is None else self.downsample[1](self.downsample[0](x))
        return (out + identity).relu()


class ResNet:
    """(N, 3, H, W) images -> (N, num_classes) logits: a stem, four stages of `layers[i]` blocks (the first block
    of stages 2-4 strides 2), global average pooling and a Linear `fc`.

    `block` is BasicBlock or Bottleneck; `stem` "imagenet" or "cifar"; `width` the first stage's channels (64 as
    torchvision); `zero_init_residual` zeroes each block's last BatchNorm weight (as torchvision's option).

    >>> from zeptograd import Tensor
    >>> model = ResNet(BasicBlock, (1, 1, 1, 1), num_classes=4, stem="cifar", width=4)
    >>> model(Tensor.ones(2, 3, 8, 8)).shape, model.fc.weight.shape
    ((2, 4), (4, 32))
    """

    def __init__(
        self,
        block: type[BasicBlock] | type[Bottleneck],
        layers: tuple[int, int, int, int] | list[int],
        num_classes: int = 1000,
        stem: str = "imagenet",
        width: int = 64,
        in_channels: int = 3,
        zero_init_residual: bool = False,
    ):
        if stem not in STEMS:
            raise ValueError(f"ResNet: stem must be one of {STEMS}, got {stem!r}")
        if len(layers) != 4 or any(n < 1 for n in layers):
            raise ValueError(f"ResNet: layers must be four positive block counts, got {layers!r}")
        if width < 1 or num_classes < 1:
            raise ValueError(f"ResNet: width and num_classes must be positive, got {width} and {num_classes}")
        self.stem = stem
        rng = host_rng()
        self.conv1 = (
            Conv2d(in_channels, width, 7, 2, rng) if stem == "imagenet" else Conv2d(in_channels, width, 3, 1, rng)
        )
        self.bn1 = nn.BatchNorm2d(width)
        channels = width
        stages = []
        for i, n in enumerate(layers):
            planes, stride = width * 2**i, 1 if i == 0 else 2
            stage = []
            for j in range(n):
                stage.append(block(channels, planes, stride if j == 0 else 1, rng))
                channels = planes * block.expansion
            stages.append(stage)
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.fc = nn.Linear(channels, num_classes)
        if zero_init_residual:
            for stage in stages:
                for b in stage:
                    bn = b.last_bn()
                    assert bn.weight is not None
                    bn.weight = Tensor(np.zeros(bn.weight.shape, np.float32), requires_grad=True)

    def features(self, x: Tensor) -> Tensor:
        """The last stage's (N, C, H', W') feature maps, before pooling."""
        if x.ndim != 4 or x.shape[1] != self.conv1.in_channels:
            raise ValueError(f"ResNet: expected (N, {self.conv1.in_channels}, H, W) images, got {x.shape}")
        x = self.bn1(self.conv1(x)).relu()
        if self.stem == "imagenet":
            x = x.max_pool2d(3, stride=2, padding=1)
        for stage in (self.layer1, self.layer2, self.layer3, self.layer4):
            for b in stage:
                x = b(x)
        return x

    def __call__(self, x: Tensor) -> Tensor:
        return self.fc(self.features(x).mean((2, 3)))


def resnet18(num_classes: int = 1000, stem: str = "imagenet", width: int = 64, **kwargs: Any) -> ResNet:
    """ResNet-18: BasicBlocks, (2, 2, 2, 2) per stage.

    >>> resnet18(num_classes=10, stem="cifar", width=8).fc.weight.shape
    (10, 64)
    """
    return ResNet(BasicBlock, (2, 2, 2, 2), num_classes, stem, width, **kwargs)


def resnet34(num_classes: int = 1000, stem: str = "imagenet", width: int = 64, **kwargs: Any) -> ResNet:
    """ResNet-34: BasicBlocks, (3, 4, 6, 3) per stage.

    >>> len(resnet34(num_classes=10, stem="cifar", width=4).layer3)
    6
    """
    return ResNet(BasicBlock, (3, 4, 6, 3), num_classes, stem, width, **kwargs)


def resnet50(num_classes: int = 1000, stem: str = "imagenet", width: int = 64, **kwargs: Any) -> ResNet:
    """ResNet-50: Bottlenecks, (3, 4, 6, 3) per stage.

    >>> resnet50(num_classes=10, stem="cifar", width=8).fc.weight.shape
    (10, 256)
    """
    return ResNet(Bottleneck, (3, 4, 6, 3), num_classes, stem, width, **kwargs)


def resnet101(num_classes: int = 1000, stem: str = "imagenet", width: int = 64, **kwargs: Any) -> ResNet:
    """ResNet-101: Bottlenecks, (3, 4, 23, 3) per stage.

    >>> len(resnet101(num_classes=10, stem="cifar", width=4).layer3)
    23
    """
    return ResNet(Bottleneck, (3, 4, 23, 3), num_classes, stem, width, **kwargs)


def resnet152(num_classes: int = 1000, stem: str = "imagenet", width: int = 64, **kwargs: Any) -> ResNet:
    """ResNet-152: Bottlenecks, (3, 8, 36, 3) per stage.

    >>> len(resnet152(num_classes=10, stem="cifar", width=4).layer2)
    8
    """
    return ResNet(Bottleneck, (3, 8, 36, 3), num_classes, stem, width, **kwargs)
