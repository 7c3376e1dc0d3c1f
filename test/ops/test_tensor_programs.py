"""Random programs over the whole Tensor API against numpy: chains of elementwise ops, movement ops, reductions,
scans, joins and indexing, realized at random points, so ops meet each other in every fusion the scheduler
makes (a pad under a reduction under a flip, a gather of a cumsum, ...)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from zeptograd import Tensor

Step = Callable[[np.random.Generator, Tensor, np.ndarray], tuple[Tensor, np.ndarray]]


def _axis(rng: np.random.Generator, a: np.ndarray) -> int:
    return int(rng.integers(a.ndim))


def unary(rng, t, a):
    k = int(rng.integers(5))
    if k == 0:
        return (t * 2.5 - 1).relu(), np.maximum(a * 2.5 - 1, 0)
    if k == 1:
        return t.clip(-2, 2).exp(), np.exp(np.clip(a, -2, 2))
    if k == 2:
        return t.abs().sqrt(), np.sqrt(np.abs(a))
    if k == 3:
        return t.sin() * t, np.sin(a) * a
    return t.tanh(), np.tanh(a)


def binary(rng, t, a):
    # a partner broadcast along a random subset of axes
    shape = tuple(1 if rng.random() < 0.4 else s for s in a.shape)
    b = rng.uniform(-2, 2, shape).astype(np.float32)
    if rng.random() < 0.5:
        return t + Tensor(b, device=t.device), a + b
    return t.maximum(Tensor(b, device=t.device)) * 0.5, np.maximum(a, b) * 0.5


def permute(rng, t, a):
    order = tuple(int(i) for i in rng.permutation(a.ndim))
    return t.permute(order), a.transpose(order)


def flip(rng, t, a):
    ax = _axis(rng, a)
    return t.flip(ax), np.flip(a, ax)


def slice_step(rng, t, a):
    ax = _axis(rng, a)
    step = int(rng.choice([-2, -1, 2, 3]))
    idx = tuple(slice(None, None, step) if i == ax else slice(None) for i in range(a.ndim))
    return t[idx], a[idx]


def pad(rng, t, a):
    ax = _axis(rng, a)
    if a.shape[ax] < 3:
        return t, a
    mode = str(rng.choice(["constant", "reflect", "replicate", "circular"]))
    flat = [0, 0] * (a.ndim - ax - 1) + [1, 2]  # torch's flat form: the last axis first
    widths = [(0, 0)] * a.ndim
    widths[ax] = (1, 2)
    np_mode = {"constant": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}[mode]
    return t.pad(flat, mode=mode), np.pad(a, widths, mode=np_mode)


def reduce_keep(rng, t, a):
    ax = _axis(rng, a)
    if rng.random() < 0.5:
        return t.sum(ax, keepdim=True) - t, a.sum(ax, keepdims=True) - a
    return t - t.max(ax, keepdim=True), a - a.max(ax, keepdims=True)


def scan(rng, t, a):
    ax = _axis(rng, a)
    return t.cumsum(ax) * 0.25, np.cumsum(a, ax) * 0.25


def join(rng, t, a):
    ax = _axis(rng, a)
    return t.cat(t * 2, dim=ax), np.concatenate([a, a * 2], ax)


def roll(rng, t, a):
    ax = _axis(rng, a)
    shift = int(rng.integers(-3, 4))
    return t.roll(shift, ax), np.roll(a, shift, ax)


def gather(rng, t, a):
    ax = _axis(rng, a)
    idx = rng.integers(0, a.shape[ax], a.shape).astype(np.int32)
    return t.gather(ax, Tensor(idx, device=t.device)), np.take_along_axis(a, idx.astype(np.int64), ax)


def take(rng, t, a):
    idx = rng.integers(-a.shape[0], a.shape[0], int(rng.integers(1, 5)))
    return t[Tensor(idx.astype(np.int32), device=t.device)], a[idx]


def realize(rng, t, a):
    return t.contiguous(), a


STEPS: list[Step] = [
    unary,
    binary,
    permute,
    flip,
    slice_step,
    pad,
    reduce_keep,
    scan,
    join,
    roll,
    gather,
    take,
    realize,
]


def run_program(seed: int, device: str, max_side: int) -> None:
    rng = np.random.default_rng(seed)
    shape = tuple(int(s) for s in rng.integers(1, max_side + 1, int(rng.integers(1, 4))))
    a = rng.uniform(-2, 2, shape).astype(np.float32)
    t = Tensor(a, device=device)
    trace = []
    for _ in range(int(rng.integers(3, 7))):
        step = STEPS[int(rng.integers(len(STEPS)))]
        t, a = step(rng, t, a)
        a = a.astype(np.float32)
        trace.append(step.__name__)
        if a.size > 4096:  # joins double the size: keep programs small
            break
    got = t.numpy()
    assert got.shape == a.shape, trace
    np.testing.assert_allclose(got, a, rtol=2e-4, atol=2e-4, err_msg=f"seed {seed}: {' -> '.join(trace)}")


@pytest.mark.no_roundtrip
@pytest.mark.parametrize("seed", range(60))
def test_random_programs_cpu(seed: int):
    run_program(seed, "CPU", 6)


@pytest.mark.no_roundtrip
@pytest.mark.parametrize("seed", range(100, 112))
def test_random_programs_python_device(seed: int):
    run_program(seed, "PYTHON", 3)
