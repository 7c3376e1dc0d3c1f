"""torchvision's ResNets and a BERT-sized transformer encoder written with torch.nn (torchvision itself is not
needed): the reference models of the model tests, the ONNX example and bench/onnx.py.

Needs torch (`pip install -e ".[interop]"`).

>>> model = torch_resnet("resnet18", num_classes=10, width=8).eval()
>>> tuple(model(torch.zeros(1, 3, 32, 32)).shape)
(1, 10)
"""

from __future__ import annotations

import torch

tnn = torch.nn


def conv(cin: int, cout: int, k: int, stride: int = 1) -> tnn.Conv2d:
    return tnn.Conv2d(cin, cout, k, stride=stride, padding=k // 2, bias=False)


class TorchBasicBlock(tnn.Module):
    expansion = 1

    def __init__(self, cin: int, planes: int, stride: int = 1):
        super().__init__()
        self.conv1, self.bn1 = conv(cin, planes, 3, stride), tnn.BatchNorm2d(planes)
        self.conv2, self.bn2 = conv(planes, planes, 3), tnn.BatchNorm2d(planes)
        self.relu = tnn.ReLU()
        self.downsample = None
        if stride != 1 or cin != planes:
            self.downsample = tnn.Sequential(conv(cin, planes, 1, stride), tnn.BatchNorm2d(planes))

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + (x if self.downsample is None else self.downsample(x)))


class TorchBottleneck(tnn.Module):
    expansion = 4

    def __init__(self, cin: int, planes: int, stride: int = 1):
        super().__init__()
        self.conv1, self.bn1 = conv(cin, planes, 1), tnn.BatchNorm2d(planes)
        self.conv2, self.bn2 = conv(planes, planes, 3, stride), tnn.BatchNorm2d(planes)
        self.conv3, self.bn3 = conv(planes, planes * 4, 1), tnn.BatchNorm2d(planes * 4)
        self.relu = tnn.ReLU()
        self.downsample = None
        if stride != 1 or cin != planes * 4:
            self.downsample = tnn.Sequential(conv(cin, planes * 4, 1, stride), tnn.BatchNorm2d(planes * 4))

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + (x if self.downsample is None else self.downsample(x)))


class TorchResNet(tnn.Module):
    """torchvision.models.ResNet's modules and forward, with the CIFAR stem as an option."""

    def __init__(self, block, layers, num_classes: int, stem: str, width: int):
        super().__init__()
        self.conv1 = conv(3, width, 7, 2) if stem == "imagenet" else conv(3, width, 3)
        self.bn1 = tnn.BatchNorm2d(width)
        self.relu = tnn.ReLU()
        self.maxpool = tnn.MaxPool2d(3, 2, 1) if stem == "imagenet" else tnn.Identity()
        cin = width
        for i, n in enumerate(layers):
            planes, blocks = width * 2**i, []
            for j in range(n):
                blocks.append(block(cin, planes, (1 if i == 0 else 2) if j == 0 else 1))
                cin = planes * block.expansion
            setattr(self, f"layer{i + 1}", tnn.Sequential(*blocks))
        self.avgpool = tnn.AdaptiveAvgPool2d(1)
        self.fc = tnn.Linear(cin, num_classes)
        # torchvision's init of the convolutions (kaiming-normal by fan-out), and BatchNorm's affine parameters and
        # buffers away from their 1/0 defaults so that a swapped or ignored one shows; each block's last BatchNorm
        # scaled small (as torchvision's zero_init_residual, not quite zero): a deep stack of residual branches at
        # full scale makes a few training steps chaotic (float32 and float64 torch runs part in the loss)
        with torch.no_grad():
            for name, m in self.named_modules():
                if isinstance(m, tnn.Conv2d):
                    tnn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                if isinstance(m, tnn.BatchNorm2d):
                    last = name.endswith(("bn2", "bn3")) and name.endswith(f"bn{2 if block is TorchBasicBlock else 3}")
                    m.weight.uniform_(0.1, 0.3) if last else m.weight.uniform_(0.5, 1.5)
                    m.bias.uniform_(-0.5, 0.5)
                    m.running_mean.normal_(0.0, 0.2)
                    m.running_var.uniform_(0.5, 1.5)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


BLOCKS = {"resnet18": (TorchBasicBlock, (2, 2, 2, 2)), "resnet50": (TorchBottleneck, (3, 4, 6, 3))}


def torch_resnet(
    arch: str = "resnet18", num_classes: int = 1000, stem: str = "imagenet", width: int = 64
) -> TorchResNet:
    """torchvision's ResNet-18 or ResNet-50 (`arch`) with random weights; `width` 64 is torchvision's."""
    block, layers = BLOCKS[arch]
    return TorchResNet(block, layers, num_classes, stem, width)


def torch_encoder(d_model: int = 768, heads: int = 12, ff: int = 3072, layers: int = 12) -> tnn.TransformerEncoder:
    """A BERT-sized transformer encoder (post-norm, GELU, batch first) with random weights: inputs (N, T, d_model).

    >>> tuple(torch_encoder(16, 2, 32, 1).eval()(torch.zeros(2, 5, 16)).shape)
    (2, 5, 16)
    """
    layer = tnn.TransformerEncoderLayer(d_model, heads, ff, dropout=0.0, activation="gelu", batch_first=True)
    return tnn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
