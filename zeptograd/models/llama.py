"""A LLaMA-style decoder: a token embedding, pre-norm blocks (RMSNorm, causal grouped-query attention with rotary
position embeddings, a SwiGLU feed-forward), a final RMSNorm and an output head, no biases anywhere. Parameter
names follow Meta's reference implementation (`tok_embeddings`, `layers.0.attention.wq`, `layers.0.feed_forward.w1`,
`layers.0.attention_norm`, `norm`, `output`, ...), so a Meta LLaMA state dict of the same sizes loads as it is.

The rotary embedding is Meta's convention (not Hugging Face's `rotate_half`): the head dimension is read as
`head_dim // 2` interleaved pairs `(x[2i], x[2i + 1])`, each pair a complex number rotated by the angle
`position * rope_theta ** (-2i / head_dim)`. (Hugging Face checkpoints permute the rows of `wq` and `wk` to use
`rotate_half` instead; such weights need that permutation undone to load here.)

`Llama.from_gguf` builds a model from a llama.cpp GGUF file: the sizes from its metadata, the weights from its
tensors. llama.cpp's converter undoes Hugging Face's permutation, so a GGUF's `attn_q` and `attn_k` rotate adjacent
pairs (llama.cpp's "normal" rope), which is Meta's convention above: the weights load as they are.

>>> from zeptograd import Tensor
>>> model = Llama(LlamaConfig(vocab_size=16, dim=8, n_layers=1, n_heads=2, n_kv_heads=1, max_seq_len=8))
>>> model(Tensor([[1, 2, 3]])).shape
(1, 3, 16)
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from zeptograd import Tensor, nn
from zeptograd.helpers import ArgumentError
from zeptograd.nn.gguf import gguf_load
from zeptograd.nn.state import load_state_dict
from zeptograd.uop.ops import UOp


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
        self.max_seq_len = config.max_seq_len
        self.cache: nn.KVCache | None = None

    def __call__(self, x: Tensor, cos: Tensor, sin: Tensor, start_pos: int | UOp | None = None) -> Tensor:
        B, T, _ = x.shape
        q = self.wq(x).reshape(B, T, self.n_heads, self.head_dim)
        k = self.wk(x).reshape(B, T, self.n_kv_heads, self.head_dim)
        v = self.wv(x).reshape(B, T, self.n_kv_heads, self.head_dim)
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        if start_pos is None:
            y = q.transpose(1, 2).scaled_dot_product_attention(
                k.transpose(1, 2), v.transpose(1, 2), is_causal=True, enable_gqa=True
            )
        else:
            if self.cache is None or self.cache.shape[0] != B:
                self.cache = nn.KVCache(B, self.max_seq_len, self.n_kv_heads, self.head_dim, x.dtype, x.device)
            keys, values, seen = self.cache(k, v, start_pos)
            y = q.transpose(1, 2).scaled_dot_product_attention(keys, values, attn_mask=seen, enable_gqa=True)
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

    def __call__(self, x: Tensor, cos: Tensor, sin: Tensor, start_pos: int | UOp | None = None) -> Tensor:
        x = x + self.attention(self.attention_norm(x), cos, sin, start_pos)
        return x + self.feed_forward(self.ffn_norm(x))


class _RopeTables:
    """The rotary tables as realized Tensors, which a symbolic position slices: working memory, not state."""

    persistent = False

    def __init__(self, cos: np.ndarray, sin: np.ndarray) -> None:
        self.cos, self.sin = Tensor(cos).realize(), Tensor(sin).realize()


class Llama:
    """(B, T) token ids -> (B, T, vocab_size) logits, T at most `config.max_seq_len`.

    With `start_pos` (an int, or a bound `Variable` for one TinyJit capture of every step) the tokens sit at
    positions [start_pos, start_pos + T) after those of earlier calls: each attention layer keeps its keys and
    values in a `KVCache`, so decoding a token costs one position, not the whole sequence again."""

    def __init__(self, config: LlamaConfig):
        self.config = config
        self.tok_embeddings = nn.Embedding(config.vocab_size, config.dim)
        self.layers = [TransformerBlock(config) for _ in range(config.n_layers)]
        self.norm = nn.RMSNorm(config.dim, eps=config.norm_eps)
        self.output = nn.Linear(config.dim, config.vocab_size, bias=False)
        # numpy arrays, not Tensors: constants, not part of the state dict
        self.rope_cos, self.rope_sin = rope_tables(config.head_dim, config.max_seq_len, config.rope_theta)
        self._rope: _RopeTables | None = None  # made on the first cached call

    def __call__(self, tokens: Tensor, start_pos: int | UOp | None = None) -> Tensor:
        if tokens.ndim != 2 or tokens.shape[1] > self.config.max_seq_len:
            raise ValueError(
                f"Llama: expected (batch, tokens) ids with at most {self.config.max_seq_len} tokens, got {tokens.shape}"
            )
        T = tokens.shape[1]
        if start_pos is None:
            cos, sin = Tensor(self.rope_cos[:T]), Tensor(self.rope_sin[:T])
        else:
            if self._rope is None:
                self._rope = _RopeTables(self.rope_cos, self.rope_sin)
            cos, sin = self._rope.cos[start_pos : start_pos + T], self._rope.sin[start_pos : start_pos + T]
        h = self.tok_embeddings(tokens)
        for layer in self.layers:
            h = layer(h, cos, sin, start_pos)
        return self.output(self.norm(h))

    @classmethod
    def from_gguf(cls, path: str | os.PathLike, max_seq_len: int | None = None) -> Llama:
        """The LLaMA stored in a GGUF file: its sizes from the metadata (`general.architecture` "llama"), its
        weights from the tensors, quantized ones dequantized to float32 (F32, F16, BF16 and every block format
        `gguf_load` reads). `max_seq_len` (None: the file's `llama.context_length`) bounds the rotary tables.
        Without an `output.weight`, the output head is the token embedding (tied).

        >>> import os, tempfile
        >>> from zeptograd.models.tiny_gguf import write_tiny_llama_gguf
        >>> path = write_tiny_llama_gguf(os.path.join(tempfile.mkdtemp(), "tiny.gguf"), dim=32, n_layers=1)
        >>> model = Llama.from_gguf(path)
        >>> model.config.n_layers, model(Tensor([[1, 2, 3]])).shape[-1] == model.config.vocab_size
        (1, True)
        """
        return cls.from_gguf_tensors(*gguf_load(path), max_seq_len=max_seq_len, source=str(path))

    @classmethod
    def from_gguf_tensors(
        cls,
        metadata: dict[str, Any],
        tensors: dict[str, Tensor],
        max_seq_len: int | None = None,
        source: str = "the GGUF tensors",
    ) -> Llama:
        """`from_gguf` on what `gguf_load` returned (the metadata and the tensors by their GGUF names).

        >>> import os, tempfile
        >>> from zeptograd.models.tiny_gguf import write_tiny_llama_gguf
        >>> path = write_tiny_llama_gguf(os.path.join(tempfile.mkdtemp(), "tiny.gguf"), dim=32, n_layers=1)
        >>> Llama.from_gguf_tensors(*gguf_load(path), max_seq_len=8).config.max_seq_len
        8
        """
        config = gguf_llama_config(metadata, tensors, max_seq_len, source)
        state, tied = _gguf_state_dict(config, tensors, source)
        model = cls(config)
        load_state_dict(model, state, strict=not tied)
        if tied:
            model.output.weight = model.tok_embeddings.weight
        return model


_OP = "Llama.from_gguf"


def _metadata_int(metadata: dict[str, Any], key: str, source: str, default: int | None = None) -> int:
    value = metadata.get(key, default)
    if value is None:
        raise ArgumentError(f"{_OP}: {source} has no metadata {key!r}, which a LLaMA needs")
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ArgumentError(f"{_OP}: {source}: metadata {key!r} must be a positive integer, got {value!r}")
    return value


def _metadata_float(metadata: dict[str, Any], key: str, source: str, default: float) -> float:
    value = metadata.get(key, default)
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
        raise ArgumentError(f"{_OP}: {source}: metadata {key!r} must be a positive number, got {value!r}")
    return float(value)


def gguf_llama_config(
    metadata: dict[str, Any], tensors: dict[str, Tensor], max_seq_len: int | None = None, source: str = "the GGUF"
) -> LlamaConfig:
    """The LlamaConfig a GGUF's metadata describes (the `llama.*` keys; the vocabulary size is the number of rows
    of `token_embd.weight`).

    >>> import numpy as np
    >>> meta = {"general.architecture": "llama", "llama.embedding_length": 8, "llama.block_count": 1,
    ...         "llama.attention.head_count": 2, "llama.feed_forward_length": 16}
    >>> config = gguf_llama_config(meta, {"token_embd.weight": Tensor(np.zeros((5, 8), np.float32))})
    >>> config.vocab_size, config.kv_heads, config.hidden_dim, config.max_seq_len
    (5, 2, 16, 2048)
    """
    arch = metadata.get("general.architecture")
    if arch != "llama":
        raise ArgumentError(f"{_OP}: {source} holds a {arch!r} model (general.architecture), not a 'llama'")
    dim = _metadata_int(metadata, "llama.embedding_length", source)
    n_heads = _metadata_int(metadata, "llama.attention.head_count", source)
    if dim % n_heads:
        raise ArgumentError(f"{_OP}: {source}: embedding_length {dim} is not a multiple of head_count {n_heads}")
    rope_dims = _metadata_int(metadata, "llama.rope.dimension_count", source, dim // n_heads)
    if rope_dims != dim // n_heads:
        raise ArgumentError(
            f"{_OP}: {source}: llama.rope.dimension_count is {rope_dims}, the head width {dim // n_heads}; a rotary "
            "embedding over part of each head is not supported"
        )
    scaling = metadata.get("llama.rope.scaling.type", "none")
    if scaling != "none" or "rope_freqs.weight" in tensors:
        what = f"llama.rope.scaling.type {scaling!r}" if scaling != "none" else "rope_freqs.weight (frequency factors)"
        raise ArgumentError(f"{_OP}: {source} scales its rotary embedding ({what}), which is not supported")
    if "token_embd.weight" not in tensors:
        raise ArgumentError(f"{_OP}: {source} has no tensor 'token_embd.weight' (the token embedding)")
    context = _metadata_int(metadata, "llama.context_length", source, 2048)
    return LlamaConfig(
        vocab_size=tensors["token_embd.weight"].shape[0],
        dim=dim,
        n_layers=_metadata_int(metadata, "llama.block_count", source),
        n_heads=n_heads,
        n_kv_heads=_metadata_int(metadata, "llama.attention.head_count_kv", source, n_heads),
        hidden_dim=_metadata_int(metadata, "llama.feed_forward_length", source),
        norm_eps=_metadata_float(metadata, "llama.attention.layer_norm_rms_epsilon", source, 1e-5),
        rope_theta=_metadata_float(metadata, "llama.rope.freq_base", source, 10000.0),
        max_seq_len=context if max_seq_len is None else max_seq_len,
    )


# GGUF tensor name -> Meta's name, per block and for the whole model
_BLOCK_NAMES = {
    "attn_norm": "attention_norm",
    "attn_q": "attention.wq",
    "attn_k": "attention.wk",
    "attn_v": "attention.wv",
    "attn_output": "attention.wo",
    "ffn_norm": "ffn_norm",
    "ffn_gate": "feed_forward.w1",
    "ffn_down": "feed_forward.w2",
    "ffn_up": "feed_forward.w3",
}
_MODEL_NAMES = {"token_embd": "tok_embeddings", "output_norm": "norm", "output": "output"}


def gguf_to_meta_name(name: str) -> str | None:
    """Meta's parameter name for a GGUF tensor name of a LLaMA (`blk.0.attn_q.weight` -> `layers.0.attention.wq
    .weight`), None for a name that is not one.

    >>> gguf_to_meta_name("blk.3.ffn_gate.weight"), gguf_to_meta_name("output_norm.weight")
    ('layers.3.feed_forward.w1.weight', 'norm.weight')
    """
    if not name.endswith(".weight"):
        return None
    stem = name[: -len(".weight")]
    if stem in _MODEL_NAMES:
        return f"{_MODEL_NAMES[stem]}.weight"
    parts = stem.split(".")
    if len(parts) == 3 and parts[0] == "blk" and parts[1].isdigit() and parts[2] in _BLOCK_NAMES:
        return f"layers.{int(parts[1])}.{_BLOCK_NAMES[parts[2]]}.weight"
    return None


def _gguf_state_dict(config: LlamaConfig, tensors: dict[str, Tensor], source: str) -> tuple[dict[str, Tensor], bool]:
    """The model's state dict by Meta's names from the GGUF tensors, and whether the output head is tied to the
    embedding. Every tensor is checked first, so the error lists all that is missing, unknown or misshapen."""
    head, kv, hidden = config.n_heads * config.head_dim, config.kv_heads * config.head_dim, config.ffn_hidden_dim
    block_shapes = {
        "attn_norm": (config.dim,),
        "attn_q": (head, config.dim),
        "attn_k": (kv, config.dim),
        "attn_v": (kv, config.dim),
        "attn_output": (config.dim, head),
        "ffn_norm": (config.dim,),
        "ffn_gate": (hidden, config.dim),
        "ffn_down": (config.dim, hidden),
        "ffn_up": (hidden, config.dim),
    }
    expected = {
        "token_embd.weight": (config.vocab_size, config.dim),
        "output_norm.weight": (config.dim,),
        "output.weight": (config.vocab_size, config.dim),
    }
    for i in range(config.n_layers):
        expected.update({f"blk.{i}.{stem}.weight": shape for stem, shape in block_shapes.items()})
    tied = "output.weight" not in tensors
    missing = [name for name in expected if name not in tensors and name != "output.weight"]
    unknown = [name for name in tensors if name not in expected]
    misshapen = [
        f"{name} is {tuple(tensors[name].shape)}, expected {shape}"
        for name, shape in expected.items()
        if name in tensors and tuple(tensors[name].shape) != shape
    ]
    problems = []
    if missing:
        problems.append(f"missing tensors {missing}")
    if unknown:
        problems.append(f"tensors a LLaMA of {config.n_layers} blocks does not have {unknown}")
    if misshapen:
        problems.append("mismatched shapes: " + "; ".join(misshapen))
    if problems:
        raise ArgumentError(f"{_OP}: {source}: " + "; ".join(problems))
    return {str(gguf_to_meta_name(name)): value for name, value in tensors.items()}, tied
