"""A tiny LLaMA with random weights in a GGUF file, with a SentencePiece-style tokenizer in its metadata: a model
file for examples and doctests that need no download. The weights are random, so what it generates is not text
anyone would write; what it shows is the path from file to tokens.

>>> import os, tempfile
>>> path = write_tiny_llama_gguf(os.path.join(tempfile.mkdtemp(), "tiny.gguf"), dim=32, n_layers=1)
>>> from zeptograd.nn.gguf import gguf_load
>>> metadata, tensors = gguf_load(path)
>>> metadata["general.architecture"], tensors["blk.0.attn_q.weight"].shape
('llama', (32, 32))
"""

from __future__ import annotations

import os
from collections import Counter

import numpy as np

from zeptograd.models.tokenizer import BYTE, CONTROL, NORMAL, UNKNOWN
from zeptograd.nn.gguf import gguf_save

__all__ = ["tiny_vocabulary", "write_tiny_llama_gguf"]

_CORPUS = (
    "Hello world. The quick brown fox jumps over the lazy dog. A tensor library with a compiler inside turns "
    "the graph of a model into kernels, and the kernels into numbers. Once upon a time there was a little model "
    "that read the weights of a file and wrote the next word, then the next, until the story was done."
)


def tiny_vocabulary(merges: int = 96) -> tuple[list[str], list[float], list[int]]:
    """The tokens, scores and token types of a small SentencePiece-style vocabulary: `<unk>`, `<s>`, `</s>`, the
    256 byte tokens `<0xNN>`, the printable ASCII characters and "▁", and `merges` pieces learned by BPE from a
    built-in paragraph (each pair merged is the most frequent; a later merge scores lower).

    >>> tokens, scores, types = tiny_vocabulary(merges=4)
    >>> tokens[:3], tokens[3], len(tokens)
    (['<unk>', '<s>', '</s>'], '<0x00>', 358)
    """
    tokens = ["<unk>", "<s>", "</s>", *(f"<0x{b:02X}>" for b in range(256))]
    types = [UNKNOWN, CONTROL, CONTROL] + [BYTE] * 256
    scores = [0.0] * len(tokens)
    chars = ["\u2581", *(chr(c) for c in range(33, 127))]
    tokens += chars
    types += [NORMAL] * len(chars)
    scores += [-1000.0 - i for i in range(len(chars))]
    words = Counter(("\u2581" + w) for w in _CORPUS.split(" "))
    split = {w: list(w) for w in words}
    for rank in range(merges):
        pairs: Counter[tuple[str, str]] = Counter()
        for w, count in words.items():
            for pair in zip(split[w], split[w][1:]):
                pairs[pair] += count
        if not pairs:
            break
        (left, right), _ = pairs.most_common(1)[0]
        for w in words:
            parts, out, k = split[w], [], 0
            while k < len(parts):
                if k + 1 < len(parts) and (parts[k], parts[k + 1]) == (left, right):
                    out.append(left + right)
                    k += 2
                else:
                    out.append(parts[k])
                    k += 1
            split[w] = out
        if left + right not in tokens:
            tokens.append(left + right)
            types.append(NORMAL)
            scores.append(-float(rank))
    return tokens, scores, types


def write_tiny_llama_gguf(
    path: str | os.PathLike,
    dim: int = 64,
    n_layers: int = 2,
    n_heads: int = 4,
    n_kv_heads: int = 2,
    hidden_dim: int | None = None,
    context_length: int = 256,
    tied: bool = False,
    seed: int = 0,
) -> str:
    """Write a LLaMA of the given sizes with random float32 weights (`hidden_dim` None: 2 * dim), GGUF's tensor
    names and `llama.*` metadata, and `tiny_vocabulary`'s tokenizer; `tied` leaves out `output.weight`. Returns the
    path.

    >>> import os, tempfile
    >>> path = write_tiny_llama_gguf(os.path.join(tempfile.mkdtemp(), "t.gguf"), dim=16, n_layers=1, n_heads=2)
    >>> os.path.getsize(path) > 16 * 16 * 4
    True
    """
    hidden = 2 * dim if hidden_dim is None else hidden_dim
    head_dim = dim // n_heads
    tokens, scores, types = tiny_vocabulary()
    vocab = len(tokens)
    rng = np.random.default_rng(seed)

    def linear(rows: int, cols: int) -> np.ndarray:
        return (rng.standard_normal((rows, cols)) / np.sqrt(cols)).astype(np.float32)

    def norm() -> np.ndarray:
        return (1.0 + 0.1 * rng.standard_normal(dim)).astype(np.float32)

    tensors = {"token_embd.weight": rng.standard_normal((vocab, dim)).astype(np.float32)}
    for i in range(n_layers):
        tensors.update(
            {
                f"blk.{i}.attn_norm.weight": norm(),
                f"blk.{i}.attn_q.weight": linear(n_heads * head_dim, dim),
                f"blk.{i}.attn_k.weight": linear(n_kv_heads * head_dim, dim),
                f"blk.{i}.attn_v.weight": linear(n_kv_heads * head_dim, dim),
                f"blk.{i}.attn_output.weight": linear(dim, n_heads * head_dim),
                f"blk.{i}.ffn_norm.weight": norm(),
                f"blk.{i}.ffn_gate.weight": linear(hidden, dim),
                f"blk.{i}.ffn_up.weight": linear(hidden, dim),
                f"blk.{i}.ffn_down.weight": linear(dim, hidden),
            }
        )
    tensors["output_norm.weight"] = norm()
    if not tied:
        tensors["output.weight"] = linear(vocab, dim)
    metadata = {
        "general.architecture": "llama",
        "general.name": "tiny random llama",
        "llama.context_length": context_length,
        "llama.embedding_length": dim,
        "llama.block_count": n_layers,
        "llama.feed_forward_length": hidden,
        "llama.attention.head_count": n_heads,
        "llama.attention.head_count_kv": n_kv_heads,
        "llama.rope.dimension_count": head_dim,
        "llama.rope.freq_base": 10000.0,
        "llama.attention.layer_norm_rms_epsilon": 1e-5,
        "tokenizer.ggml.model": "llama",
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.scores": scores,
        "tokenizer.ggml.token_type": types,
        "tokenizer.ggml.bos_token_id": 1,
        "tokenizer.ggml.eos_token_id": 2,
        "tokenizer.ggml.unknown_token_id": 0,
        "tokenizer.ggml.add_bos_token": True,
    }
    gguf_save(path, metadata, tensors)
    return os.fspath(path)
