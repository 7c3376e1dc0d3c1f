"""Choosing the next token from a language model's logits: greedy, or a draw at a temperature from the top-k
tokens and the top-p probability mass (nucleus sampling), reproducible from a seed.

The logits of one position are a vector of a vocabulary's size, so the choice runs on the host in numpy, in
float64: what it costs is one copy of that vector per token.

>>> import numpy as np
>>> sample_token(np.array([0.1, 2.0, -1.0]))
1
>>> sampler = Sampler(temperature=0.8, top_k=2, seed=0)
>>> sampler(np.array([0.1, 2.0, -1.0])) in (0, 1)
True
"""

from __future__ import annotations

from typing import Any

import numpy as np


def sample_token(
    logits: Any,
    temperature: float = 0.0,
    top_k: int = 0,
    top_p: float = 1.0,
    rng: np.random.Generator | None = None,
) -> int:
    """The id of the next token from `logits` (a 1-D array or Tensor over the vocabulary).

    `temperature` 0 picks the most likely token (the first of equals). Otherwise the logits are divided by the
    temperature, only the `top_k` most likely tokens are kept (0: all), then only the smallest set of the most
    likely whose probabilities sum to at least `top_p`, and one token is drawn from what is left with `rng`.

    >>> sample_token([1.0, 3.0, 2.0])
    1
    >>> sample_token([1.0, 3.0, 2.0], temperature=1.0, top_k=1, rng=np.random.default_rng(0))
    1
    """
    if temperature < 0:
        raise ValueError(f"sample_token: temperature must be >= 0, got {temperature}")
    if top_k < 0:
        raise ValueError(f"sample_token: top_k must be >= 0 (0 keeps every token), got {top_k}")
    if not 0.0 < top_p <= 1.0:
        raise ValueError(f"sample_token: top_p must be in (0, 1], got {top_p}")
    values = np.asarray(logits.numpy() if hasattr(logits, "numpy") else logits, dtype=np.float64)
    if values.ndim != 1 or values.size == 0:
        raise ValueError(f"sample_token: expected the 1-D logits of one position, got shape {values.shape}")
    if temperature == 0.0:
        return int(np.argmax(values))
    order = np.argsort(-values, kind="stable")
    if top_k:
        order = order[:top_k]
    scaled = values[order] / temperature
    probs = np.exp(scaled - scaled.max())
    probs /= probs.sum()
    if top_p < 1.0:
        # keep every token up to and including the one that brings the mass to top_p
        keep = int(np.searchsorted(np.cumsum(probs), top_p)) + 1
        order, probs = order[:keep], probs[:keep] / probs[:keep].sum()
    generator = rng if rng is not None else np.random.default_rng()
    return int(order[generator.choice(len(order), p=probs)])


class Sampler:
    """`sample_token` with its settings and a generator of its own, seeded: the same seed draws the same tokens.

    >>> a, b = Sampler(temperature=1.0, seed=3), Sampler(temperature=1.0, seed=3)
    >>> [a([0.0, 0.5, 1.0]) for _ in range(5)] == [b([0.0, 0.5, 1.0]) for _ in range(5)]
    True
    """

    def __init__(self, temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0, seed: int | None = None):
        self.temperature, self.top_k, self.top_p = temperature, top_k, top_p
        self.rng = np.random.default_rng(seed)
        sample_token([0.0], temperature, top_k, top_p, np.random.default_rng(0))  # the settings' errors come here

    def __call__(self, logits: Any) -> int:
        return sample_token(logits, self.temperature, self.top_k, self.top_p, self.rng)
