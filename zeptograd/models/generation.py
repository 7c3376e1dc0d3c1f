"""Text generation with a decoder language model: the next token's logits from the ids so far, a token chosen from
them (`Sampler`), appended, and again.

`generate` runs the model through its KV caches (`CachedLogits`): the prompt once, then one token a step under one
TinyJit capture. `next_token_logits` runs the model on the whole sequence instead (any model of token ids). The
sequence is padded at the end to the next power of two
(at most the model's `max_seq_len`): a causal model's logits at a position do not depend on what follows it, and a
few lengths mean a few sets of kernels, compiled once and reused, where every new length would compile its own.
The logits of the last real position are picked by a Tensor index, so that the kernels do not change with it.

>>> import os, tempfile
>>> from zeptograd.models.llama import Llama
>>> from zeptograd.models.tiny_gguf import write_tiny_llama_gguf
>>> from zeptograd.models.tokenizer import Tokenizer
>>> path = write_tiny_llama_gguf(os.path.join(tempfile.mkdtemp(), "tiny.gguf"), dim=32, n_layers=1)
>>> model, tokenizer = Llama.from_gguf(path), Tokenizer.from_gguf(path)
>>> text = generate(model, tokenizer, "Once upon a time", max_new_tokens=4)
>>> isinstance(text, str)
True
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from zeptograd.dtype import dtypes
from zeptograd.engine.jit import TinyJit
from zeptograd.models.sampling import Sampler
from zeptograd.tensor import Tensor
from zeptograd.uop.ops import UOp, Variable

__all__ = ["CachedLogits", "generate", "generate_tokens", "next_token_logits"]


def next_token_logits(model: Any, ids: Sequence[int]) -> np.ndarray:
    """The logits (float32, the vocabulary's size) that `model` ((1, T) ids -> (1, T, vocab) logits, with a
    `config.max_seq_len`) gives the token after `ids`.

    >>> from zeptograd.models.llama import Llama, LlamaConfig
    >>> model = Llama(LlamaConfig(vocab_size=16, dim=8, n_layers=1, n_heads=2, max_seq_len=8))
    >>> next_token_logits(model, [1, 2, 3]).shape
    (16,)
    """
    n, limit = len(ids), model.config.max_seq_len
    if not 0 < n <= limit:
        raise ValueError(f"next_token_logits: {n} ids; the model takes 1 to {limit} (its max_seq_len)")
    padded = min(1 << (n - 1).bit_length(), limit)
    tokens = np.zeros((1, padded), np.int32)
    tokens[0, :n] = ids
    # the position is picked by a Tensor index, data rather than a constant of the graph, so that each step of one
    # padded length runs the same kernels
    return model(Tensor(tokens))[0][Tensor(np.array([n - 1], np.int32))].numpy()[0]


class CachedLogits:
    """`logits_of` for `generate_tokens` through the model's KV caches (a model called as `model(tokens,
    start_pos)`, as Llama and GPT are): the first call runs the prompt at position 0, padded at the end to a power
    of two (the padding's keys are written past the prompt, where the mask hides them until the step that overwrites
    each), and every later call runs only the newest token at its position, in one TinyJit capture with the
    position a bound `Variable`: from the third token on, a step replays the same kernels. A context that does not
    extend the last one by one token starts again from the prompt.

    >>> from zeptograd.models.llama import Llama, LlamaConfig
    >>> model = Llama(LlamaConfig(vocab_size=16, dim=8, n_layers=1, n_heads=2, max_seq_len=8))
    >>> logits_of = CachedLogits(model)
    >>> bool(np.allclose(logits_of([1, 2, 3]), next_token_logits(model, [1, 2, 3]), atol=1e-5))
    True
    >>> bool(np.allclose(logits_of([1, 2, 3, 4]), next_token_logits(model, [1, 2, 3, 4]), atol=1e-5))
    True
    """

    def __init__(self, model: Any) -> None:
        self.model = model
        config = model.config
        self.max_len = getattr(config, "max_seq_len", None) or config.context
        self.position = Variable("start_pos", 0, self.max_len - 1)
        self.step = TinyJit(self._step)
        self.context: list[int] = []

    def _step(self, token: Tensor, start_pos: UOp) -> Tensor:
        return self.model(token, start_pos)[0, -1].realize()

    def __call__(self, ids: Sequence[int]) -> np.ndarray:
        ids = [int(i) for i in ids]
        n = len(ids)
        if not 0 < n <= self.max_len:
            raise ValueError(f"CachedLogits: {n} ids; the model takes 1 to {self.max_len}")
        if n == len(self.context) + 1 and ids[:-1] == self.context:
            logits = self.step(Tensor([[ids[-1]]], dtype=dtypes.int32), self.position.bind(n - 1)).numpy()
        else:
            padded = min(1 << (n - 1).bit_length(), self.max_len)
            tokens = np.zeros((1, padded), np.int32)
            tokens[0, :n] = ids
            logits = self.model(Tensor(tokens), 0)[0][Tensor(np.array([n - 1], np.int32))].numpy()[0]
        self.context = ids
        return logits


def generate_tokens(
    logits_of: Callable[[list[int]], Any],
    ids: Sequence[int],
    max_new_tokens: int,
    sampler: Callable[[Any], int] | None = None,
    stop_ids: Sequence[int] = (),
) -> Iterator[int]:
    """Yield up to `max_new_tokens` new ids, each chosen by `sampler` (None: greedy) from `logits_of(ids so far)`,
    stopping after one of `stop_ids`.

    >>> table = np.eye(4)[[1, 2, 3, 0]]  # a model that always says the next id
    >>> list(generate_tokens(lambda ids: table[ids[-1]], [0], 5, stop_ids=[3]))
    [1, 2, 3]
    """
    if max_new_tokens < 0:
        raise ValueError(f"generate: max_new_tokens must be >= 0, got {max_new_tokens}")
    choose = sampler if sampler is not None else Sampler()
    context = [int(i) for i in ids]
    for _ in range(max_new_tokens):
        token = int(choose(logits_of(context)))
        context.append(token)
        yield token
        if token in stop_ids:
            return


def generate(
    model: Any,
    tokenizer: Any,
    prompt: str,
    max_new_tokens: int = 32,
    sampler: Callable[[Any], int] | None = None,
    stop_at_eos: bool = True,
) -> str:
    """The text `model` writes after `prompt` (encoded by `tokenizer`): up to `max_new_tokens` tokens, chosen by
    `sampler` (None: greedy), stopping at the tokenizer's EOS id unless `stop_at_eos` is False.

    >>> from zeptograd.models.llama import Llama, LlamaConfig
    >>> from zeptograd.models.tokenizer import Tokenizer
    >>> tokenizer = Tokenizer(["<s>", "▁a", "▁b"], token_types=[3, 1, 1], bos_id=0)
    >>> model = Llama(LlamaConfig(vocab_size=3, dim=8, n_layers=1, n_heads=2, max_seq_len=8))
    >>> set(generate(model, tokenizer, "a", max_new_tokens=3).split()) <= {"a", "b"}
    True
    """
    ids = tokenizer.encode(prompt)
    if len(ids) + max_new_tokens > model.config.max_seq_len:
        raise ValueError(
            f"generate: the prompt's {len(ids)} tokens and {max_new_tokens} new ones exceed the model's "
            f"max_seq_len {model.config.max_seq_len}"
        )
    stop = [tokenizer.eos_id] if stop_at_eos and tokenizer.eos_id is not None else []
    new = list(generate_tokens(CachedLogits(model), ids, max_new_tokens, sampler, stop))
    # decoded together with the prompt, so that a token's leading space and a character split over byte tokens
    # come out as they would in the whole text
    return tokenizer.decode(ids + new)[len(tokenizer.decode(ids)) :]
