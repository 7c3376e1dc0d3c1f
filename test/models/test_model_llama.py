"""The LLaMA of the model suite against the same LLaMA in torch (written as Meta's reference: complex rotary
embedding, explicit key/value head repetition and causal mask), weights copied in: outputs, gradients, and the
losses of five optimizer steps, at several depths, with grouped-, multi-head and multi-query attention."""

from __future__ import annotations

import numpy as np
import pytest
from model_oracle import check_against_torch, cross_entropy, torch

from zeptograd.helpers import Context
from zeptograd.models.llama import Llama, LlamaConfig

tnn = torch.nn
# a model's graphs are thousands of nodes: the pyrender round trip of every graph built (conftest) is the IR tests'
pytestmark = pytest.mark.no_roundtrip


def precompute_freqs_cis(dim: int, end: int, theta: float):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: dim // 2].float() / dim))
    freqs = torch.outer(torch.arange(end, dtype=torch.float32), freqs)
    return torch.polar(torch.ones_like(freqs), freqs)


def apply_rotary_emb(xq, xk, freqs_cis):
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    freqs_cis = freqs_cis.view(1, xq_.shape[1], 1, xq_.shape[-1])
    xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)
    xk_out = torch.view_as_real(xk_ * freqs_cis).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)


class TorchRMSNorm(tnn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = tnn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class TorchAttention(tnn.Module):
    def __init__(self, c: LlamaConfig):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_dim = c.n_heads, c.kv_heads, c.dim // c.n_heads
        self.wq = tnn.Linear(c.dim, c.n_heads * self.head_dim, bias=False)
        self.wk = tnn.Linear(c.dim, c.kv_heads * self.head_dim, bias=False)
        self.wv = tnn.Linear(c.dim, c.kv_heads * self.head_dim, bias=False)
        self.wo = tnn.Linear(c.n_heads * self.head_dim, c.dim, bias=False)

    def forward(self, x, freqs_cis, mask):
        B, T, _ = x.shape
        xq = self.wq(x).view(B, T, self.n_heads, self.head_dim)
        xk = self.wk(x).view(B, T, self.n_kv_heads, self.head_dim)
        xv = self.wv(x).view(B, T, self.n_kv_heads, self.head_dim)
        xq, xk = apply_rotary_emb(xq, xk, freqs_cis)
        n_rep = self.n_heads // self.n_kv_heads
        xk = xk[:, :, :, None, :].expand(B, T, self.n_kv_heads, n_rep, self.head_dim).reshape(B, T, -1, self.head_dim)
        xv = xv[:, :, :, None, :].expand(B, T, self.n_kv_heads, n_rep, self.head_dim).reshape(B, T, -1, self.head_dim)
        xq, xk, xv = xq.transpose(1, 2), xk.transpose(1, 2), xv.transpose(1, 2)
        scores = torch.matmul(xq, xk.transpose(2, 3)) / self.head_dim**0.5 + mask
        scores = tnn.functional.softmax(scores.float(), dim=-1).type_as(xq)
        out = torch.matmul(scores, xv).transpose(1, 2).contiguous().view(B, T, -1)
        return self.wo(out)


class TorchFeedForward(tnn.Module):
    def __init__(self, c: LlamaConfig):
        super().__init__()
        self.w1 = tnn.Linear(c.dim, c.ffn_hidden_dim, bias=False)
        self.w2 = tnn.Linear(c.ffn_hidden_dim, c.dim, bias=False)
        self.w3 = tnn.Linear(c.dim, c.ffn_hidden_dim, bias=False)

    def forward(self, x):
        return self.w2(tnn.functional.silu(self.w1(x)) * self.w3(x))


class TorchBlock(tnn.Module):
    def __init__(self, c: LlamaConfig):
        super().__init__()
        self.attention, self.feed_forward = TorchAttention(c), TorchFeedForward(c)
        self.attention_norm = TorchRMSNorm(c.dim, c.norm_eps)
        self.ffn_norm = TorchRMSNorm(c.dim, c.norm_eps)

    def forward(self, x, freqs_cis, mask):
        h = x + self.attention(self.attention_norm(x), freqs_cis, mask)
        return h + self.feed_forward(self.ffn_norm(h))


class TorchLlama(tnn.Module):
    def __init__(self, c: LlamaConfig):
        super().__init__()
        self.tok_embeddings = tnn.Embedding(c.vocab_size, c.dim)
        self.layers = tnn.ModuleList(TorchBlock(c) for _ in range(c.n_layers))
        self.norm = TorchRMSNorm(c.dim, c.norm_eps)
        self.output = tnn.Linear(c.dim, c.vocab_size, bias=False)
        self.freqs_cis = precompute_freqs_cis(c.dim // c.n_heads, c.max_seq_len, c.rope_theta)  # not a state entry

    def forward(self, tokens):
        T = tokens.shape[1]
        h = self.tok_embeddings(tokens)
        mask = torch.triu(torch.full((T, T), float("-inf")), diagonal=1)
        for layer in self.layers:
            h = layer(h, self.freqs_cis[:T], mask)
        return self.output(self.norm(h)).float()


def _check(config: LlamaConfig, batch: int = 2, tokens: int = 16, **kw) -> None:
    torch.manual_seed(0)
    twin = TorchLlama(config)
    with torch.no_grad():  # norm weights away from ones, so that a gain applied wrongly shows
        for name, p in twin.named_parameters():
            if name.endswith("norm.weight"):
                p.add_(0.2 * torch.randn_like(p))
    rng = np.random.default_rng(0)
    ids = rng.integers(0, config.vocab_size, (batch, tokens)).astype(np.int32)
    targets = rng.integers(0, config.vocab_size, (batch, tokens)).astype(np.int32)
    check_against_torch(Llama(config), twin, (ids,), cross_entropy, targets, **kw)


def _config(layers: int, n_kv_heads: int = 2) -> LlamaConfig:
    return LlamaConfig(
        vocab_size=48, dim=32, n_layers=layers, n_heads=4, n_kv_heads=n_kv_heads, multiple_of=32, max_seq_len=16
    )


# SGD at every depth; Adam's update does not depend on the depth (the gradients it reads are checked at every
# depth), so it runs at two: a 12-block Adam case costs another ~10 s of compiling, and both files keep to ~2 min
@pytest.mark.parametrize(
    ("layers", "optimizer"),
    [(1, "sgd"), (1, "adam"), (2, "sgd"), (3, "sgd"), (3, "adam"), (6, "sgd"), (12, "sgd")],
)
def test_llama_matches_torch_at_depth(layers: int, optimizer: str):
    _check(_config(layers), optimizer=optimizer, lr=1e-2 if optimizer == "sgd" else 1e-3)


@pytest.mark.parametrize("n_kv_heads", [4, 1])
def test_llama_multi_head_and_multi_query_attention(n_kv_heads: int):
    _check(_config(1, n_kv_heads=n_kv_heads), optimizer="adam", lr=1e-3)


@pytest.mark.parametrize("layers", [1, 3])
def test_llama_matches_torch_unoptimized(layers: int):
    with Context(NOOPT=1):
        _check(_config(layers))
