"""A LLaMA-style decoder: a token embedding, pre-norm blocks (RMSNorm, causal grouped-query attention with rotary
position embeddings, a SwiGLU feed-forward), a final RMSNorm and an output head, no biases anywhere. Parameter
names follow Meta's reference implementation (`tok_embeddings`, `layers.0.attention.wq`, `layers.0.feed_forward.w1`,
`layers.0.attention_norm`, `norm`, `output`, ...), so a Meta LLaMA state dict of the same sizes loads as it is.

The rotary embedding is Meta's convention (not Hugging Face's `rotate_half`): the head dimension is read as
`head_dim // 2` interleaved pairs `(x[2i], x[2i + 1])`, each pair a complex number rotated by the angle
`position * rope_theta ** (-2i / head_dim)`. (Hugging Face checkpoints permute the rows of `wq` and `wk` to use
`rotate_half` instead; such weights need that permutation undone to load here.)

>>> from zeptograd import Tensor
>>> model = Llama(LlamaConfig(vocab_size=16, dim=8, n_layers=1, n_heads=2, n_kv_heads=1, max_seq_len=8))
>>> model(Tensor([[1, 2, 3]])).shape
(1, 3, 16)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from zeptograd import Tensor, nn


@dataclass(frozen=True)
class LlamaConfig:
    """The sizes of a LLaMA. `n_kv_heads` (None: `n_heads`) key/value heads are each shared by
    `n_heads // n_kv_heads` query heads (grouped-query attention; 1 is multi-query attention). The feed-forward
    width is Meta's: `int(2 * 4 * dim / 3)`, times `ffn_dim_multiplier` if given, rounded up to a multiple of
    `multiple_of`; `hidden_dim` overrides it.

    >>> LlamaConfig(dim=32, multiple_of=32).ffn_hidden_dim
    96
    """

    vocab_size: int = 32000
    dim: int = 4096
    n_layers: int = 32
    n_heads: int = 32
    n_kv_heads: int | None = None
    multiple_of: int = 256
    ffn_dim_multiplier: float | None = None
    hidden_dim: int | None = None
    norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    max_seq_len: int = 2048

    @property
    def kv_heads(self) -> int:
        """The number of key/value heads."""
        return self.n_heads if self.n_kv_heads is None else self.n_kv_heads

    @property
    def head_dim(self) -> int:
        """The width of one attention head."""
        return self.dim // self.n_heads

    @property
    def ffn_hidden_dim(self) -> int:
        """The inner width of the SwiGLU feed-forward."""
        if self.hidden_dim is not None:
            return self.hidden_dim
        hidden = int(2 * 4 * self.dim / 3)
        if self.ffn_dim_multiplier is not None:
            hidden = int(self.ffn_dim_multiplier * hidden)
        return self.multiple_of * -(-hidden // self.multiple_of)


def rope_tables(head_dim: int, max_seq_len: int, theta: float = 10000.0) -> tuple[np.ndarray, np.ndarray]:
    """The cosines and sines, each (max_seq_len, head_dim // 2) float32, of the rotary angles
    `position * theta ** (-2i / head_dim)`.

    >>> cos, sin = rope_tables(4, 3)
    >>> cos.shape, float(cos[0, 0]), float(sin[0, 1])
    ((3, 2), 1.0, 0.0)
    """
    freqs = 1.0 / theta ** (np.arange(0, head_dim, 2)[: head_dim // 2].astype(np.float64) / head_dim)
    angles = np.outer(np.arange(max_seq_len, dtype=np.float64), freqs)
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


def apply_rotary(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate each interleaved pair `(x[..., 2i], x[..., 2i + 1])` of `x` (batch, tokens, heads, head_dim) by the
    angle whose cosine and sine are `cos[t, i]` and `sin[t, i]` ((tokens, head_dim // 2) each), Meta's rotary
    embedding.

    >>> x = Tensor([[[[1.0, 0.0]]]])
    >>> apply_rotary(x, Tensor([[0.0]]), Tensor([[1.0]])).tolist()
    [[[[0.0, 1.0]]]]
    """
    B, T, H, D = x.shape
    pairs = x.reshape(B, T, H, D // 2, 2)
    re, im = pairs[..., 0], pairs[..., 1]
    cos, sin = cos.reshape(1, T, 1, D // 2), sin.reshape(1, T, 1, D // 2)
    return Tensor.stack(re * cos - im * sin, re * sin + im * cos, dim=-1).reshape(B, T, H, D)


class Attention:
    """Causal grouped-query attention: `wq` makes `n_heads` query heads, `wk` and `wv` make `n_kv_heads` key and
    value heads (each shared by `n_heads // n_kv_heads` query heads), queries and keys are rotated by position,
    and `wo` mixes the heads' outputs."""

    def __init__(self, config: LlamaConfig):
        if config.dim % config.n_heads:
            raise ValueError(f"Llama: dim {config.dim} is not a multiple of n_heads {config.n_heads}")
        if config.head_dim % 2:
            raise ValueError(f"Llama: the head width {config.head_dim} must be even for the rotary embedding")
        if config.kv_heads < 1 or config.n_heads % config.kv_heads:
            raise ValueError(f"Llama: n_kv_heads {config.kv_heads} does not divide n_heads {config.n_heads}")
        self.n_heads, self.n_kv_heads, self.head_dim = config.n_heads, config.kv_heads, config.head_dim
        self.wq = nn.Linear(config.dim, config.n_heads * config.head_dim, bias=False)
        self.wk = nn.Linear(config.dim, config.kv_heads * config.head_dim, bias=False)
        self.wv = nn.Linear(config.dim, config.kv_heads * config.head_dim, bias=False)
        self.wo = nn.Linear(config.n_heads * config.head_dim, config.dim, bias=False)

    def __call__(self, x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        B, T, _ = x.shape
        q = self.wq(x).reshape(B, T, self.n_heads, self.head_dim)
        k = self.wk(x).reshape(B, T, self.n_kv_heads, self.head_dim)
        v = self.wv(x).reshape(B, T, self.n_kv_heads, self.head_dim)
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        y = q.scaled_dot_product_attention(k, v, is_causal=True, enable_gqa=True)
        return self.wo(y.transpose(1, 2).reshape(B, T, self.n_heads * self.head_dim))


class FeedForward:
    """SwiGLU: `w2(silu(w1(x)) * w3(x))`."""

    def __init__(self, config: LlamaConfig):
        hidden = config.ffn_hidden_dim
        self.w1 = nn.Linear(config.dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, config.dim, bias=False)
        self.w3 = nn.Linear(config.dim, hidden, bias=False)

    def __call__(self, x: Tensor) -> Tensor:
        return self.w2(self.w1(x).silu() * self.w3(x))


class TransformerBlock:
    """x + attention(attention_norm(x)), then x + feed_forward(ffn_norm(x))."""

    def __init__(self, config: LlamaConfig):
        self.attention_norm = nn.RMSNorm(config.dim, eps=config.norm_eps)
        self.attention = Attention(config)
        self.ffn_norm = nn.RMSNorm(config.dim, eps=config.norm_eps)
        self.feed_forward = FeedForward(config)

    def __call__(self, x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        x = x + self.attention(self.attention_norm(x), cos, sin)
        return x + self.feed_forward(self.ffn_norm(x))


class Llama:
    """(B, T) token ids -> (B, T, vocab_size) logits, T at most `config.max_seq_len`."""

    def __init__(self, config: LlamaConfig):
        self.config = config
        self.tok_embeddings = nn.Embedding(config.vocab_size, config.dim)
        self.layers = [TransformerBlock(config) for _ in range(config.n_layers)]
        self.norm = nn.RMSNorm(config.dim, eps=config.norm_eps)
        self.output = nn.Linear(config.dim, config.vocab_size, bias=False)
        # numpy arrays, not Tensors: constants, not part of the state dict
        self.rope_cos, self.rope_sin = rope_tables(config.head_dim, config.max_seq_len, config.rope_theta)

    def __call__(self, tokens: Tensor) -> Tensor:
        if tokens.ndim != 2 or tokens.shape[1] > self.config.max_seq_len:
            raise ValueError(
                f"Llama: expected (batch, tokens) ids with at most {self.config.max_seq_len} tokens, got {tokens.shape}"
            )
        T = tokens.shape[1]
        cos, sin = Tensor(self.rope_cos[:T]), Tensor(self.rope_sin[:T])
        h = self.tok_embeddings(tokens)
        for layer in self.layers:
            h = layer(h, cos, sin)
        return self.output(self.norm(h))
