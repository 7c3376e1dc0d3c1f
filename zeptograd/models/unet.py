"""A small UNet: an encoder of conv blocks (two 3x3 convolutions, each followed by GroupNorm and an activation), each
level but the first entered by a 2x downsampling (a 2x2 max pool or a stride-2 3x3 convolution); a bottleneck block
at the lowest resolution; a decoder that doubles the resolution with a stride-2 ConvTranspose2d, concatenates the
encoder's output of that level along the channels (the skip connection) and runs a conv block; a final 1x1
convolution. Level i has `base_channels * 2**i` channels, the bottleneck `base_channels * 2**depth`.

Parameter names are those of a torch module holding `nn.ModuleList`s `enc`, `down` (stride-2 convolutions only),
`up` and `dec` indexed by level, a `mid` block and an `out` convolution, each block with `conv1`, `norm1`, `conv2`,
`norm2` (`enc.0.conv1.weight`, `up.1.bias`, `mid.norm2.weight`, `out.weight`, ...).

>>> from zeptograd import Tensor
>>> model = UNet(UNetConfig(in_channels=1, out_channels=2, base_channels=4, depth=2, groups=2))
>>> model(Tensor.ones(1, 1, 8, 8)).shape
(1, 2, 8, 8)
"""

from __future__ import annotations

from dataclasses import dataclass

from zeptograd import Tensor, nn

ACTIVATIONS = ("silu", "relu")
DOWNSAMPLES = ("maxpool", "conv")


@dataclass(frozen=True)
class UNetConfig:
    """The shape of a UNet: images of `in_channels` to maps of `out_channels`, `depth` downsamplings (so inputs'
    sides must be multiples of 2**depth), `base_channels` at full resolution doubling at each level, GroupNorms of
    `groups` groups (dividing `base_channels`). `activation` is "silu" or "relu"; `downsample` "maxpool" (2x2) or
    "conv" (a stride-2 3x3 convolution keeping the channels)."""

    in_channels: int = 3
    out_channels: int = 3
    base_channels: int = 32
    depth: int = 3
    groups: int = 8
    activation: str = "silu"
    downsample: str = "maxpool"

    def __post_init__(self):
        if self.depth < 1:
            raise ValueError(f"UNet: depth must be at least 1, got {self.depth}")
        if self.base_channels % self.groups:
            raise ValueError(f"UNet: base_channels {self.base_channels} is not a multiple of groups {self.groups}")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"UNet: activation must be one of {ACTIVATIONS}, got {self.activation!r}")
        if self.downsample not in DOWNSAMPLES:
            raise ValueError(f"UNet: downsample must be one of {DOWNSAMPLES}, got {self.downsample!r}")


class ConvBlock:
    """conv1 (3x3) -> norm1 -> activation -> conv2 (3x3) -> norm2 -> activation, the size kept."""

    def __init__(self, cin: int, cout: int, groups: int, activation: str):
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.norm1 = nn.GroupNorm(groups, cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.norm2 = nn.GroupNorm(groups, cout)
        self.activation = activation

    def _act(self, x: Tensor) -> Tensor:
        return x.silu() if self.activation == "silu" else x.relu()

    def __call__(self, x: Tensor) -> Tensor:
        x = self._act(self.norm1(self.conv1(x)))
        return self._act(self.norm2(self.conv2(x)))


class UNet:
    """(N, in_channels, H, W) images -> (N, out_channels, H, W), H and W multiples of 2**depth."""

    def __init__(self, config: UNetConfig):
        self.config = config
        c, g, act = config.base_channels, config.groups, config.activation
        chans = [c * 2**level for level in range(config.depth + 1)]  # the last: the bottleneck's
        self.enc = [
            ConvBlock(config.in_channels if i == 0 else chans[i - 1], chans[i], g, act) for i in range(config.depth)
        ]
        self.down = (
            [nn.Conv2d(chans[i], chans[i], 3, stride=2, padding=1) for i in range(config.depth)]
            if config.downsample == "conv"
            else []
        )
        self.mid = ConvBlock(chans[-2], chans[-1], g, act)
        # up[i] takes level i + 1 (or the bottleneck) to level i's size and channels; dec[i] reads it with the skip
        self.up = [nn.ConvTranspose2d(chans[i + 1], chans[i], 2, stride=2) for i in range(config.depth)]
        self.dec = [ConvBlock(2 * chans[i], chans[i], g, act) for i in range(config.depth)]
        self.out = nn.Conv2d(chans[0], config.out_channels, 1)

    def _down(self, x: Tensor, level: int) -> Tensor:
        return self.down[level](x) if self.down else x.max_pool2d(2)

    def __call__(self, x: Tensor) -> Tensor:
        side = 2**self.config.depth
        if x.ndim != 4 or x.shape[2] % side or x.shape[3] % side:
            raise ValueError(f"UNet: expected (N, C, H, W) images with H and W multiples of {side}, got {x.shape}")
        skips = []
        for level, block in enumerate(self.enc):
            x = block(x)
            skips.append(x)
            x = self._down(x, level)
        x = self.mid(x)
        for level in reversed(range(self.config.depth)):
            x = self.dec[level](self.up[level](x).cat(skips[level], dim=1))
        return self.out(x)
