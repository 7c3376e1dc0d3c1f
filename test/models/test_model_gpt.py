"""The GPT of the model suite against the same GPT in torch, weights copied in: outputs, gradients, and the
losses of five optimizer steps, at several depths, tied and untied."""

from __future__ import annotations

import numpy as np
import pytest
from model_oracle import check_against_torch, cross_entropy, torch

from zeptograd import Tensor
from zeptograd.helpers import Context
from zeptograd.models.gpt import GPT, GPTConfig

tnn = torch.nn
# a model's graphs are thousands of nodes: the pyrender round trip of every graph built (conftest) is the IR tests'
pytestmark = pytest.mark.no_roundtrip


class TorchAttention(tnn.Module):
    def __init__(self, c: GPTConfig):
        super().__init__()
        self.n_heads = c.n_heads
        self.c_attn = tnn.Linear(c.d_model, 3 * c.d_model)
        self.c_proj = tnn.Linear(c.d_model, c.d_model)

    def forward(self, x):
        B, T, D = x.shape
        q, k, v = self.c_attn(x).split(D, dim=-1)
        q, k, v = (t.reshape(B, T, self.n_heads, D // self.n_heads).transpose(1, 2) for t in (q, k, v))
        y = tnn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).reshape(B, T, D))


class TorchMLP(tnn.Module):
    def __init__(self, c: GPTConfig):
        super().__init__()
        self.c_fc = tnn.Linear(c.d_model, 4 * c.d_model)
        self.c_proj = tnn.Linear(4 * c.d_model, c.d_model)

    def forward(self, x):
        return self.c_proj(tnn.functional.gelu(self.c_fc(x), approximate="tanh"))


class TorchBlock(tnn.Module):
    def __init__(self, c: GPTConfig):
        super().__init__()
        self.ln_1, self.attn = tnn.LayerNorm(c.d_model), TorchAttention(c)
        self.ln_2, self.mlp = tnn.LayerNorm(c.d_model), TorchMLP(c)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class TorchGPT(tnn.Module):
    def __init__(self, c: GPTConfig):
        super().__init__()
        self.wte, self.wpe = tnn.Embedding(c.vocab_size, c.d_model), tnn.Embedding(c.context, c.d_model)
        self.h = tnn.ModuleList(TorchBlock(c) for _ in range(c.n_layers))
        self.ln_f = tnn.LayerNorm(c.d_model)
        self.lm_head = tnn.Linear(c.d_model, c.vocab_size, bias=False)
        if c.tied:
            self.lm_head.weight = self.wte.weight

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def _check(config: GPTConfig, batch: int = 2, tokens: int = 8, **kw) -> None:
    torch.manual_seed(0)
    twin = TorchGPT(config)
    rng = np.random.default_rng(0)
    ids = rng.integers(0, config.vocab_size, (batch, tokens)).astype(np.int32)
    targets = rng.integers(0, config.vocab_size, (batch, tokens)).astype(np.int32)
    check_against_torch(GPT(config), twin, (ids,), cross_entropy, targets, **kw)


@pytest.mark.parametrize("layers", [1, 2, 3, 6, 12])
def test_gpt_matches_torch_at_depth(layers: int):
    _check(GPTConfig(vocab_size=32, context=16, d_model=16, n_heads=2, n_layers=layers))


@pytest.mark.parametrize("tied", [True, False])
def test_gpt_tied_and_untied_head(tied: bool):
    _check(
        GPTConfig(vocab_size=48, context=16, d_model=32, n_heads=4, n_layers=2, tied=tied), optimizer="adam", lr=1e-3
    )


@pytest.mark.parametrize("layers", [1, 3])
def test_gpt_matches_torch_unoptimized(layers: int):
    with Context(NOOPT=1):
        _check(GPTConfig(vocab_size=32, context=16, d_model=16, n_heads=2, n_layers=layers))


def test_three_blocks_of_width_64_forward_match_torch():
    """Three pre-norm blocks at d_model 64, batch 4, 32 tokens: a residual sum that each next block's LayerNorm and
    qkv product read keeps the matmul that feeds it in its own kernel (fused into a reader, that matmul sat
    inside the qkv matmul's reduction and its kernel could not be linearized)."""
    config = GPTConfig(vocab_size=64, context=32, d_model=64, n_heads=2, n_layers=3)
    torch.manual_seed(0)
    twin = TorchGPT(config)
    model = GPT(config)
    from model_oracle import copy_weights

    from zeptograd import Tensor

    copy_weights(model, twin)
    ids = np.random.default_rng(1).integers(0, 64, (4, 32)).astype(np.int32)
    expected = twin(torch.from_numpy(ids).long()).detach().numpy()
    np.testing.assert_allclose(model(Tensor(ids)).numpy(), expected, rtol=2e-3, atol=2e-4)


def test_gpt_starts_from_gpt2_initialization():
    # GPT-2's: weights normal(0, 0.02), the residual projections' 0.02 / sqrt(2 * n_layers), biases zero; so an
    # untrained model's loss is near log(vocab_size) (uniform guesses), not the ~20 of torch's default inits
    c = GPTConfig(vocab_size=64, context=16, d_model=64, n_heads=2, n_layers=4)
    model = GPT(c)
    assert abs(float(model.wte.weight.numpy().std()) - 0.02) < 0.002
    assert abs(float(model.h[0].mlp.c_fc.weight.numpy().std()) - 0.02) < 0.002
    assert abs(float(model.h[3].attn.c_proj.weight.numpy().std()) - 0.02 / 8**0.5) < 0.001
    assert not model.h[1].mlp.c_proj.bias.numpy().any()
    ids = np.random.default_rng(1).integers(0, 64, (4, 16)).astype(np.int32)
    loss = cross_entropy(model(Tensor(ids[:, :-1])), Tensor(ids[:, 1:])).item()
    assert abs(loss - np.log(64)) < 0.1, loss
