"""Token sampling against brute force: the kept set and the frequencies of many draws."""

from __future__ import annotations

import numpy as np
import pytest

from zeptograd import Tensor
from zeptograd.models.sampling import Sampler, sample_token


def _allowed(logits: np.ndarray, temperature: float, top_k: int, top_p: float) -> dict[int, float]:
    """Brute force: the tokens that may be drawn and their probabilities."""
    ranked = sorted(range(len(logits)), key=lambda i: (-logits[i], i))
    if top_k:
        ranked = ranked[:top_k]
    weights = [np.exp((logits[i] - logits[ranked[0]]) / temperature) for i in ranked]
    total = sum(weights)
    kept, mass = [], 0.0
    for i, w in zip(ranked, weights):
        kept.append((i, w / total))
        mass += w / total
        if mass >= top_p:
            break
    norm = sum(p for _, p in kept)
    return {i: p / norm for i, p in kept}


def test_greedy_is_argmax_first_of_equals():
    assert sample_token(np.array([0.5, 2.0, 2.0, -1.0])) == 1
    assert sample_token(Tensor([0.5, -2.0, 3.5])) == 2


@pytest.mark.parametrize("temperature,top_k,top_p", [(1.0, 0, 1.0), (0.7, 3, 1.0), (1.3, 0, 0.8), (1.0, 4, 0.6)])
def test_draw_frequencies_match_brute_force(temperature, top_k, top_p):
    logits = np.random.default_rng(1).standard_normal(8)
    expected = _allowed(logits, temperature, top_k, top_p)
    sampler = Sampler(temperature, top_k, top_p, seed=0)
    n = 20000
    counts = np.bincount([sampler(logits) for _ in range(n)], minlength=8) / n
    for token in range(8):
        assert counts[token] == pytest.approx(expected.get(token, 0.0), abs=0.015), token
    assert all(counts[t] == 0 for t in range(8) if t not in expected)


def test_same_seed_same_tokens():
    logits = np.linspace(-1, 1, 16)
    a, b = Sampler(1.0, seed=7), Sampler(1.0, seed=7)
    assert [a(logits) for _ in range(50)] == [b(logits) for _ in range(50)]


@pytest.mark.parametrize(
    "kwargs,match", [({"temperature": -1.0}, "temperature"), ({"top_k": -2}, "top_k"), ({"top_p": 0.0}, "top_p")]
)
def test_bad_settings_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Sampler(**kwargs)


def test_logits_must_be_one_position():
    with pytest.raises(ValueError, match="1-D logits"):
        sample_token(np.zeros((2, 3)))
