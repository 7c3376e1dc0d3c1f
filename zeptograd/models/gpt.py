"""A GPT: token and position embeddings, pre-norm transformer blocks (causal self-attention, a GELU MLP), a final
LayerNorm and a language-model head, tied to the token embedding or not. Parameter names follow GPT-2's
(`wte`, `wpe`, `h.0.attn.c_attn`, ...), so a GPT-2 state dict of the same sizes loads as it is.

>>> from zeptograd import Tensor
>>> model = GPT(GPTConfig(vocab_size=16, context=8, d_model=8, n_heads=2, n_layers=1))
>>> model(Tensor([[1, 2, 3]])).shape
(1, 3, 16)
"""

from __future__ import annotations

from dataclasses import dataclass

from zeptograd import Tensor, nn
from zeptograd.uop.ops import UOp


@dataclass(frozen=True)
class GPTConfig:
    """The sizes of a GPT. `tied` shares the token embedding with the head (GPT-2 does)."""

    vocab_size: int = 50257
    context: int = 1024
    d_model: int = 768
    n_heads: int = 12
    n_layers: int = 12
    tied: bool = True


class CausalSelfAttention:
    """Multi-head attention of each position over itself and the positions before it: one Linear makes the
    queries, keys and values (`c_attn`), another mixes the heads' outputs (`c_proj`)."""

    def __init__(self, config: GPTConfig):
        if config.d_model % config.n_heads:
            raise ValueError(f"GPT: d_model {config.d_model} is not a multiple of n_heads {config.n_heads}")
        self.n_heads, self.context = config.n_heads, config.context
        self.c_attn = nn.Linear(config.d_model, 3 * config.d_model)
        self.c_proj = nn.Linear(config.d_model, config.d_model)
        self.cache: nn.KVCache | None = None

    def __call__(self, x: Tensor, start_pos: int | UOp | None = None) -> Tensor:
        B, T, D = x.shape
        q, k, v = self.c_attn(x).split(D, dim=-1)
        q, k, v = (t.reshape(B, T, self.n_heads, D // self.n_heads) for t in (q, k, v))
        if start_pos is None:
            y = q.transpose(1, 2).scaled_dot_product_attention(k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        else:
            if self.cache is None or self.cache.shape[0] != B:
                self.cache = nn.KVCache(B, self.context, self.n_heads, D // self.n_heads, x.dtype, x.device)
            keys, values, seen = self.cache(k, v, start_pos)
            y = q.transpose(1, 2).scaled_dot_product_attention(keys, values, attn_mask=seen)
        return self.c_proj(y.transpose(1, 2).reshape(B, T, D))


class MLP:
    """Linear to 4 * d_model, GELU (tanh approximation, as GPT-2), Linear back."""

    def __init__(self, config: GPTConfig):
        self.c_fc = nn.Linear(config.d_model, 4 * config.d_model)
        self.c_proj = nn.Linear(4 * config.d_model, config.d_model)

    def __call__(self, x: Tensor) -> Tensor:
        return self.c_proj(self.c_fc(x).gelu())


class Block:
    """x + attn(ln_1(x)), then x + mlp(ln_2(x))."""

    def __init__(self, config: GPTConfig):
        self.ln_1 = nn.LayerNorm(config.d_model)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.d_model)
        self.mlp = MLP(config)

    def __call__(self, x: Tensor, start_pos: int | UOp | None = None) -> Tensor:
        x = x + self.attn(self.ln_1(x), start_pos)
        return x + self.mlp(self.ln_2(x))


class GPT:
    """(B, T) token ids -> (B, T, vocab_size) logits, T at most `config.context`.

    With `start_pos` (an int, or a bound `Variable` for one TinyJit capture of every step) the tokens sit at
    positions [start_pos, start_pos + T) after those of earlier calls: each attention layer keeps its keys and
    values in a `KVCache`, so decoding a token costs one position, not the whole sequence again."""

    def __init__(self, config: GPTConfig):
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.d_model)
        self.wpe = nn.Embedding(config.context, config.d_model)
        self.h = [Block(config) for _ in range(config.n_layers)]
        self.ln_f = nn.LayerNorm(config.d_model)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        if config.tied:
            self.lm_head.weight = self.wte.weight
        self._init_weights()

    def _init_weights(self) -> None:
        """GPT-2's initialization: every weight normal with std 0.02 (the residual projections' divided by
        sqrt(2 * n_layers), so the residual stream's variance does not grow with the depth), biases zero. torch's
        defaults (normal(0, 1) embeddings, which the tied head reuses) start the loss far above log(vocab_size)."""
        residual_std = 0.02 / (2 * self.config.n_layers) ** 0.5

        def normal(t: Tensor, std: float) -> Tensor:
            return (Tensor.randn(*t.shape, dtype=t.dtype) * std).realize().requires_grad_(True)

        self.wte.weight = normal(self.wte.weight, 0.02)
        self.wpe.weight = normal(self.wpe.weight, 0.02)
        self.lm_head.weight = self.wte.weight if self.config.tied else normal(self.lm_head.weight, 0.02)
        for block in self.h:
            for layer in (block.attn.c_attn, block.attn.c_proj, block.mlp.c_fc, block.mlp.c_proj):
                std = residual_std if layer in (block.attn.c_proj, block.mlp.c_proj) else 0.02
                layer.weight = normal(layer.weight, std)
                if layer.bias is not None:
                    layer.bias = Tensor.zeros(*layer.bias.shape, dtype=layer.bias.dtype).contiguous().realize()
                    layer.bias.requires_grad_(True)

    def __call__(self, idx: Tensor, start_pos: int | UOp | None = None) -> Tensor:
        if idx.ndim != 2 or idx.shape[1] > self.config.context:
            raise ValueError(
                f"GPT: expected (batch, tokens) ids with at most {self.config.context} tokens, got {idx.shape}"
            )
        positions = Tensor.arange(idx.shape[1])
        if start_pos is not None:
            positions = positions + (Tensor(start_pos) if isinstance(start_pos, UOp) else start_pos)
        x = self.wte(idx) + self.wpe(positions)
        for block in self.h:
            x = block(x, start_pos)
        return self.lm_head(self.ln_f(x))
