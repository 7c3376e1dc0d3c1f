"""KVCache and cached decoding: a GPT decoding one token at a time through its caches, under one TinyJit capture
with a bound Variable position, gives the logits of the full causal forward (and of torch's attention)."""

from __future__ import annotations

import numpy as np
import pytest

from zeptograd import ArgumentError, Tensor, TinyJit, Variable, nn
from zeptograd.engine import realize as engine
from zeptograd.models.gpt import GPT, GPTConfig
from zeptograd.nn.state import get_state_dict

torch = pytest.importorskip("torch")


def test_cache_stores_and_masks_against_numpy():
    rng = np.random.default_rng(0)
    cache = nn.KVCache(batch=2, max_len=6, heads=3, head_dim=4)
    pos = Variable("pos", 0, 4)
    keys_ref = np.zeros((2, 6, 3, 4), np.float32)
    for start, T in ((0, 2), (2, 1), (3, 2)):
        k = rng.standard_normal((2, T, 3, 4)).astype(np.float32)
        v = rng.standard_normal((2, T, 3, 4)).astype(np.float32)
        start_pos = start if T > 1 else pos.bind(start)
        keys, values, seen = cache(Tensor(k), Tensor(v), start_pos)
        keys_ref[:, start : start + T] = k
        np.testing.assert_array_equal(keys.numpy(), keys_ref.transpose(0, 2, 1, 3))
        np.testing.assert_array_equal(values.numpy()[:, :, start : start + T], v.transpose(0, 2, 1, 3))
        expected = np.arange(6)[None, :] <= (start + np.arange(T))[:, None]
        np.testing.assert_array_equal(seen.numpy(), expected)


def test_cache_checks_its_arguments():
    cache = nn.KVCache(1, 4, 2, 8)
    with pytest.raises(ArgumentError, match="outside"):
        cache(Tensor.zeros(1, 2, 2, 8), Tensor.zeros(1, 2, 2, 8), 3)
    with pytest.raises(ArgumentError, match="batch, T, heads, head_dim"):
        cache(Tensor.zeros(1, 1, 3, 8), Tensor.zeros(1, 1, 3, 8), 0)
    with pytest.raises(ArgumentError, match="max_len must be a positive int"):
        nn.KVCache(1, 0, 2, 8)


def test_cache_is_not_model_state():
    model = GPT(GPTConfig(vocab_size=16, context=8, d_model=8, n_heads=2, n_layers=1))
    before = set(get_state_dict(model))
    model(Tensor([[1, 2]]), start_pos=0)
    assert model.h[0].attn.cache is not None and set(get_state_dict(model)) == before


def _torch_gpt_logits(model: GPT, tokens: np.ndarray) -> np.ndarray:
    """The same GPT's full causal forward written with torch ops on the model's weights: the oracle."""
    w = {k: torch.tensor(v.numpy()) for k, v in get_state_dict(model).items()}
    x = torch.tensor(tokens)
    T = x.shape[1]
    h = w["wte.weight"][x] + w["wpe.weight"][:T]
    n_heads = model.config.n_heads
    for i in range(model.config.n_layers):
        p = f"h.{i}."
        a = torch.nn.functional.layer_norm(h, h.shape[-1:], w[p + "ln_1.weight"], w[p + "ln_1.bias"])
        q, k, v = (a @ w[p + "attn.c_attn.weight"].T + w[p + "attn.c_attn.bias"]).split(h.shape[-1], dim=-1)
        q, k, v = (t.reshape(*t.shape[:2], n_heads, -1).transpose(1, 2) for t in (q, k, v))
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        h = h + y.transpose(1, 2).reshape(h.shape) @ w[p + "attn.c_proj.weight"].T + w[p + "attn.c_proj.bias"]
        m = torch.nn.functional.layer_norm(h, h.shape[-1:], w[p + "ln_2.weight"], w[p + "ln_2.bias"])
        m = torch.nn.functional.gelu(m @ w[p + "mlp.c_fc.weight"].T + w[p + "mlp.c_fc.bias"], approximate="tanh")
        h = h + m @ w[p + "mlp.c_proj.weight"].T + w[p + "mlp.c_proj.bias"]
    h = torch.nn.functional.layer_norm(h, h.shape[-1:], w["ln_f.weight"], w["ln_f.bias"])
    return (h @ w["lm_head.weight"].T).numpy()


def test_gpt_decodes_through_its_cache_with_one_capture():
    config = GPTConfig(vocab_size=40, context=24, d_model=32, n_heads=4, n_layers=2)
    model = GPT(config)
    tokens = np.random.default_rng(3).integers(0, 40, (2, 16))
    expected = _torch_gpt_logits(model, tokens)
    np.testing.assert_allclose(model(Tensor(tokens)).numpy(), expected, rtol=1e-4, atol=1e-4)

    pos = Variable("pos", 0, config.context - 1)

    @TinyJit
    def decode(token: Tensor, start_pos) -> Tensor:
        return model(token, start_pos).realize()

    prompt = 5  # the prompt in one call (an int start), then one token a step
    got = [model(Tensor(tokens[:, :prompt]), 0).numpy()]
    captures, programs = set(), None
    for i in range(prompt, tokens.shape[1]):
        got.append(decode(Tensor(tokens[:, i : i + 1]), pos.bind(i)).numpy())
        if decode.captured:
            captures.add(id(decode._capture))
            programs = len(engine._programs) if programs is None else programs
    np.testing.assert_allclose(np.concatenate(got, axis=1), expected, rtol=1e-4, atol=1e-4)
    assert len(captures) == 1 and len(engine._programs) == programs  # one capture, nothing compiled after it
