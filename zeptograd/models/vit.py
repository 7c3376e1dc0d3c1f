"""A Vision Transformer classifier: the image cut into patches by a Conv2d of stride = kernel = patch size, a
learned class token put before the patches, a learned position embedding added, pre-norm encoder blocks
(LayerNorm, multi-head self-attention, LayerNorm, an exact-GELU MLP), a final LayerNorm, and a Linear head on the
class token. Parameter names follow timm's `VisionTransformer` (`patch_embed.proj`, `cls_token`, `pos_embed`,
`blocks.0.attn.qkv`, `blocks.0.mlp.fc1`, `norm`, `head`, ...), so a timm state dict of the same sizes loads as
it is.

>>> from zeptograd import Tensor
>>> model = ViT(ViTConfig(image_size=8, patch_size=4, num_classes=3, dim=8, depth=1, n_heads=2))
>>> model(Tensor.ones(2, 3, 8, 8)).shape
(2, 3)
"""

from __future__ import annotations

from dataclasses import dataclass

from zeptograd import Tensor, nn


@dataclass(frozen=True)
class ViTConfig:
    """The sizes of a ViT: square `image_size` images of `in_channels` channels cut into square patches of
    `patch_size` (which must divide `image_size`), `dim` wide, `depth` blocks of `n_heads` heads, an MLP
    `mlp_ratio` times `dim` wide, LayerNorms of epsilon `norm_eps` (timm's 1e-6), `num_classes` logits.

    >>> ViTConfig(image_size=32, patch_size=8).num_patches
    16
    """

    image_size: int = 224
    patch_size: int = 16
    in_channels: int = 3
    num_classes: int = 1000
    dim: int = 768
    depth: int = 12
    n_heads: int = 12
    mlp_ratio: float = 4.0
    norm_eps: float = 1e-6

    @property
    def num_patches(self) -> int:
        """The number of patches of one image."""
        return (self.image_size // self.patch_size) ** 2


class PatchEmbed:
    """(B, C, H, W) images -> (B, patches, dim): one Conv2d (`proj`) with kernel and stride the patch size, its
    output grid flattened in row-major order."""

    def __init__(self, config: ViTConfig):
        if config.image_size % config.patch_size:
            raise ValueError(f"ViT: patch_size {config.patch_size} does not divide image_size {config.image_size}")
        p = config.patch_size
        self.proj = nn.Conv2d(config.in_channels, config.dim, kernel_size=p, stride=p)

    def __call__(self, x: Tensor) -> Tensor:
        return self.proj(x).flatten(2).transpose(1, 2)


class Attention:
    """Multi-head self-attention over all tokens: one Linear makes the queries, keys and values (`qkv`), another
    mixes the heads' outputs (`proj`)."""

    def __init__(self, config: ViTConfig):
        if config.dim % config.n_heads:
            raise ValueError(f"ViT: dim {config.dim} is not a multiple of n_heads {config.n_heads}")
        self.n_heads = config.n_heads
        self.qkv = nn.Linear(config.dim, 3 * config.dim)
        self.proj = nn.Linear(config.dim, config.dim)

    def __call__(self, x: Tensor) -> Tensor:
        B, N, D = x.shape
        q, k, v = self.qkv(x).split(D, dim=-1)
        q, k, v = (t.reshape(B, N, self.n_heads, D // self.n_heads).transpose(1, 2) for t in (q, k, v))
        y = q.scaled_dot_product_attention(k, v)
        return self.proj(y.transpose(1, 2).reshape(B, N, D))


class Mlp:
    """Linear to `mlp_ratio * dim` (`fc1`), exact GELU (torch's nn.GELU default), Linear back (`fc2`)."""

    def __init__(self, config: ViTConfig):
        hidden = int(config.dim * config.mlp_ratio)
        self.fc1 = nn.Linear(config.dim, hidden)
        self.fc2 = nn.Linear(hidden, config.dim)

    def __call__(self, x: Tensor) -> Tensor:
        return self.fc2(self.fc1(x).gelu(approximate="none"))


class Block:
    """x + attn(norm1(x)), then x + mlp(norm2(x))."""

    def __init__(self, config: ViTConfig):
        self.norm1 = nn.LayerNorm(config.dim, eps=config.norm_eps)
        self.attn = Attention(config)
        self.norm2 = nn.LayerNorm(config.dim, eps=config.norm_eps)
        self.mlp = Mlp(config)

    def __call__(self, x: Tensor) -> Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class ViT:
    """(B, in_channels, image_size, image_size) images -> (B, num_classes) logits, read off the class token."""

    def __init__(self, config: ViTConfig):
        self.config = config
        self.patch_embed = PatchEmbed(config)
        self.cls_token = (Tensor.normal(1, 1, config.dim) * 0.02).contiguous().realize().requires_grad_(True)
        self.pos_embed = (
            (Tensor.normal(1, config.num_patches + 1, config.dim) * 0.02).contiguous().realize().requires_grad_(True)
        )
        self.blocks = [Block(config) for _ in range(config.depth)]
        self.norm = nn.LayerNorm(config.dim, eps=config.norm_eps)
        self.head = nn.Linear(config.dim, config.num_classes)

    def __call__(self, images: Tensor) -> Tensor:
        c = self.config
        if images.ndim != 4 or images.shape[1:] != (c.in_channels, c.image_size, c.image_size):
            raise ValueError(
                f"ViT: expected (batch, {c.in_channels}, {c.image_size}, {c.image_size}) images, got {images.shape}"
            )
        x = self.patch_embed(images)
        x = self.cls_token.expand(x.shape[0], 1, c.dim).cat(x, dim=1) + self.pos_embed
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x)[:, 0])
