"""The ViT of the model suite against the same ViT in torch (written as timm's: a strided Conv2d patch embedding,
class token, learned position embedding, pre-norm blocks, exact-GELU MLP), weights copied in: outputs,
gradients, and the losses of five optimizer steps, at several depths."""

from __future__ import annotations

import numpy as np
import pytest
from model_oracle import check_against_torch, cross_entropy, torch

from zeptograd.helpers import Context
from zeptograd.models.vit import ViT, ViTConfig

tnn = torch.nn
# a model's graphs are thousands of nodes: the pyrender round trip of every graph built (conftest) is the IR tests'
pytestmark = pytest.mark.no_roundtrip


class TorchPatchEmbed(tnn.Module):
    def __init__(self, c: ViTConfig):
        super().__init__()
        self.proj = tnn.Conv2d(c.in_channels, c.dim, kernel_size=c.patch_size, stride=c.patch_size)

    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2)


class TorchAttention(tnn.Module):
    def __init__(self, c: ViTConfig):
        super().__init__()
        self.n_heads, self.head_dim = c.n_heads, c.dim // c.n_heads
        self.qkv = tnn.Linear(c.dim, 3 * c.dim)
        self.proj = tnn.Linear(c.dim, c.dim)

    def forward(self, x):
        B, N, D = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.n_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        attn = (q @ k.transpose(-2, -1)) * self.head_dim**-0.5
        y = attn.softmax(dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(B, N, D))


class TorchMlp(tnn.Module):
    def __init__(self, c: ViTConfig):
        super().__init__()
        self.fc1 = tnn.Linear(c.dim, int(c.dim * c.mlp_ratio))
        self.fc2 = tnn.Linear(int(c.dim * c.mlp_ratio), c.dim)

    def forward(self, x):
        return self.fc2(tnn.functional.gelu(self.fc1(x)))


class TorchBlock(tnn.Module):
    def __init__(self, c: ViTConfig):
        super().__init__()
        self.norm1, self.attn = tnn.LayerNorm(c.dim, eps=c.norm_eps), TorchAttention(c)
        self.norm2, self.mlp = tnn.LayerNorm(c.dim, eps=c.norm_eps), TorchMlp(c)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class TorchViT(tnn.Module):
    def __init__(self, c: ViTConfig):
        super().__init__()
        self.patch_embed = TorchPatchEmbed(c)
        self.cls_token = tnn.Parameter(0.5 * torch.randn(1, 1, c.dim))
        self.pos_embed = tnn.Parameter(0.5 * torch.randn(1, c.num_patches + 1, c.dim))
        self.blocks = tnn.ModuleList(TorchBlock(c) for _ in range(c.depth))
        self.norm = tnn.LayerNorm(c.dim, eps=c.norm_eps)
        self.head = tnn.Linear(c.dim, c.num_classes)

    def forward(self, x):
        x = self.patch_embed(x)
        x = torch.cat((self.cls_token.expand(x.shape[0], -1, -1), x), dim=1) + self.pos_embed
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x)[:, 0])


def _check(config: ViTConfig, batch: int = 2, **kw) -> None:
    torch.manual_seed(0)
    twin = TorchViT(config)
    with torch.no_grad():  # LayerNorm gains and shifts away from ones and zeros, so that one applied wrongly shows
        for name, p in twin.named_parameters():
            if "norm" in name:
                p.add_(0.2 * torch.randn_like(p))
    rng = np.random.default_rng(0)
    images = rng.standard_normal((batch, config.in_channels, config.image_size, config.image_size)).astype(np.float32)
    labels = rng.integers(0, config.num_classes, (batch,)).astype(np.int32)
    check_against_torch(ViT(config), twin, (images,), cross_entropy, labels, **kw)


def _config(depth: int) -> ViTConfig:
    # 16 patches of 4x4 plus the class token: 17 tokens
    return ViTConfig(image_size=16, patch_size=4, in_channels=3, num_classes=10, dim=32, depth=depth, n_heads=4)


# SGD at every depth; Adam's update does not depend on the depth (the gradients it reads are checked at every
# depth), so it runs at two: a 12-block Adam case costs another ~10 s of compiling, and both files keep to ~2 min
@pytest.mark.parametrize(
    ("depth", "optimizer"),
    [(1, "sgd"), (1, "adam"), (2, "sgd"), (3, "sgd"), (3, "adam"), (6, "sgd"), (12, "sgd")],
)
def test_vit_matches_torch_at_depth(depth: int, optimizer: str):
    _check(_config(depth), optimizer=optimizer, lr=1e-2 if optimizer == "sgd" else 1e-3)


@pytest.mark.parametrize("depth", [1, 3])
def test_vit_matches_torch_unoptimized(depth: int):
    with Context(NOOPT=1):
        _check(_config(depth))
