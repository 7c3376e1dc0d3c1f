"""Gradient clipping and learning rate schedules (zeptograd.nn.optim): clip_grad_norm_ against
torch.nn.utils.clip_grad_norm_, the schedulers' learning rates against torch.optim.lr_scheduler's, and a TinyJit
training step with both against the same steps in torch."""

from __future__ import annotations

import math

import numpy as np
import pytest

from zeptograd import Tensor, TinyJit
from zeptograd.helpers import ArgumentError
from zeptograd.nn.optim import (
    SGD,
    AdamW,
    CosineAnnealingLR,
    LinearLR,
    LRScheduler,
    WarmupCosineLR,
    clip_grad_norm_,
)

SHAPES = [(3, 4), (5,), (2, 1, 3)]


def _grads(seed: int, scale: float) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(s) * scale).astype(np.float32) for s in SHAPES]


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, math.inf])
@pytest.mark.parametrize("max_norm", [0.5, 1e3])
def test_clip_grad_norm_matches_torch(norm_type: float, max_norm: float):
    torch = pytest.importorskip("torch")
    grads = _grads(0, 2.0)
    params = [Tensor(np.zeros(g.shape, np.float32), requires_grad=True) for g in grads]
    ref = [torch.zeros(g.shape, requires_grad=True) for g in grads]
    for p, r, g in zip(params, ref, grads):
        p.grad, r.grad = Tensor(g), torch.tensor(g)
    total = clip_grad_norm_(params, max_norm, norm_type)
    ref_total = torch.nn.utils.clip_grad_norm_(ref, max_norm, norm_type)
    np.testing.assert_allclose(total.item(), ref_total.item(), rtol=1e-5)
    for p, r in zip(params, ref):
        np.testing.assert_allclose(p.grad.numpy(), r.grad.numpy(), rtol=1e-5, atol=1e-7)


def test_clip_grad_norm_skips_params_without_grad_and_counts_tied_once():
    torch = pytest.importorskip("torch")
    grads = _grads(1, 3.0)
    params = [Tensor(np.zeros(g.shape, np.float32), requires_grad=True) for g in grads]
    ref = [torch.zeros(g.shape, requires_grad=True) for g in grads]
    for p, r, g in list(zip(params, ref, grads))[:2]:
        p.grad, r.grad = Tensor(g), torch.tensor(g)
    # the first parameter twice (a tied weight listed under two names) counts once, as torch's dedupe does not:
    # torch is given it once
    total = clip_grad_norm_([params[0], *params], 1.0)
    ref_total = torch.nn.utils.clip_grad_norm_(ref, 1.0)
    np.testing.assert_allclose(total.item(), ref_total.item(), rtol=1e-5)
    assert params[2].grad is None
    np.testing.assert_allclose(params[0].grad.numpy(), ref[0].grad.numpy(), rtol=1e-5, atol=1e-7)
    assert clip_grad_norm_([params[2]], 1.0).item() == 0.0


@pytest.mark.parametrize(
    "call,exc,match",
    [
        (lambda p: clip_grad_norm_(p, -1.0), ArgumentError, "max_norm must be >= 0"),
        (lambda p: clip_grad_norm_(p, 1.0, norm_type=0), ArgumentError, "norm_type must be > 0"),
        (lambda p: clip_grad_norm_([p, 3], 1.0), TypeError, "parameter 1 is a int"),
        (lambda p: clip_grad_norm_(5, 1.0), TypeError, "must be a Tensor or an iterable"),
    ],
)
def test_clip_grad_norm_bad_arguments(call, exc, match):
    with pytest.raises(exc, match=match):
        call(Tensor([1.0], requires_grad=True))


def _lrs(sched: LRScheduler, steps: int) -> list[float]:
    out = [sched.optimizer.lr.item()]
    for _ in range(steps):
        sched.step()
        out.append(sched.optimizer.lr.item())
    return out


def _torch_lrs(torch, make, lr: float, steps: int) -> list[float]:
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=lr)
    sched = make(opt)
    out = [opt.param_groups[0]["lr"]]
    for _ in range(steps):
        opt.step()
        sched.step()
        out.append(opt.param_groups[0]["lr"])
    return out


def _check(ours: list[float], theirs: list[float], lr: float) -> None:
    # our learning rate buffer is float32; theirs a Python float
    np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=lr * 1e-7)


def test_linear_lr_matches_torch():
    torch = pytest.importorskip("torch")
    lr = 0.3
    ours = _lrs(LinearLR(SGD([Tensor([1.0])], lr=lr), start_factor=0.1, end_factor=0.9, total_iters=7), 12)
    sched = torch.optim.lr_scheduler.LinearLR
    _check(ours, _torch_lrs(torch, lambda o: sched(o, start_factor=0.1, end_factor=0.9, total_iters=7), lr, 12), lr)


@pytest.mark.parametrize("eta_min", [0.0, 0.01])
def test_cosine_annealing_matches_torch(eta_min: float):
    torch = pytest.importorskip("torch")
    lr, t_max = 0.1, 13
    ours = _lrs(CosineAnnealingLR(SGD([Tensor([1.0])], lr=lr), T_max=t_max, eta_min=eta_min), t_max)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR
    _check(ours, _torch_lrs(torch, lambda o: sched(o, T_max=t_max, eta_min=eta_min), lr, t_max), lr)


@pytest.mark.parametrize("warmup,start_factor,min_lr", [(5, None, 0.0), (4, 0.2, 1e-3), (0, None, 1e-4)])
def test_warmup_cosine_matches_torch_sequential(warmup: int, start_factor: float | None, min_lr: float):
    torch = pytest.importorskip("torch")
    lr, total = 3e-3, 20
    opt = AdamW([Tensor([1.0])], lr=lr)
    ours = _lrs(WarmupCosineLR(opt, warmup, total, min_lr=min_lr, start_factor=start_factor), total + 3)
    sf = start_factor if start_factor is not None else 1.0 / max(warmup, 1)
    S = torch.optim.lr_scheduler

    def make(o):
        cosine = S.CosineAnnealingLR(o, T_max=total - warmup, eta_min=min_lr)
        if not warmup:
            return cosine
        return S.SequentialLR(o, [S.LinearLR(o, start_factor=sf, total_iters=warmup), cosine], milestones=[warmup])

    theirs = _torch_lrs(torch, make, lr, total)
    _check(ours[: total + 1], theirs, lr)
    # past total_steps ours stays at min_lr (torch's cosine would climb back)
    _check(ours[total:], [min_lr] * 4, lr)


@pytest.mark.parametrize(
    "make,exc,match",
    [
        (lambda o: WarmupCosineLR(o, 10, 10), ArgumentError, "must be greater than warmup_steps"),
        (lambda o: WarmupCosineLR(o, -1, 10), ArgumentError, "warmup_steps must be an int >= 0"),
        (lambda o: WarmupCosineLR(o, 2, 10, start_factor=0.0), ArgumentError, "start_factor must be in"),
        (lambda o: CosineAnnealingLR(o, T_max=0), ArgumentError, "T_max must be an int >= 1"),
        (lambda o: LinearLR(o, start_factor=1.5), ArgumentError, "start_factor must be in"),
        (lambda o: CosineAnnealingLR(o.params, T_max=3), TypeError, "optimizer must be an Optimizer"),
    ],
)
def test_scheduler_bad_arguments(make, exc, match):
    with pytest.raises(exc, match=match):
        make(SGD([Tensor([1.0])], lr=0.1))


def test_lr_scheduler_base_needs_lr_at():
    with pytest.raises(NotImplementedError, match="LRScheduler does not implement lr_at"):
        LRScheduler(SGD([Tensor([1.0])], lr=0.1))


@pytest.mark.parametrize("inside_jit", [True, False])
def test_jit_training_step_with_clip_and_schedule_matches_torch(inside_jit: bool):
    """A TinyJit step (AdamW, clipping, warmup then cosine) against torch: the replayed steps advance the schedule
    whether `sched.step()` is captured in the step or called outside it, and the capture is never redone."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    w1, w2 = rng.standard_normal((4, 8)).astype(np.float32), rng.standard_normal((8, 2)).astype(np.float32)
    xs = rng.standard_normal((10, 6, 4)).astype(np.float32)
    ys = rng.standard_normal((10, 6, 2)).astype(np.float32)
    lr, warmup, total, max_norm = 0.05, 3, 10, 0.5

    p1, p2 = Tensor(w1, requires_grad=True), Tensor(w2, requires_grad=True)
    opt = AdamW([p1, p2], lr=lr, weight_decay=0.1)
    sched = WarmupCosineLR(opt, warmup, total, min_lr=0.005)

    @TinyJit
    def step(x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
        loss = ((x @ p1).tanh() @ p2 - y).square().mean()
        opt.zero_grad()
        loss.backward()
        norm = clip_grad_norm_([p1, p2], max_norm)
        opt.step()
        if inside_jit:
            sched.step()
        return loss, norm

    t1, t2 = torch.tensor(w1, requires_grad=True), torch.tensor(w2, requires_grad=True)
    ref_opt = torch.optim.AdamW([t1, t2], lr=lr, weight_decay=0.1)
    S = torch.optim.lr_scheduler
    ref_sched = S.SequentialLR(
        ref_opt,
        [S.LinearLR(ref_opt, 1.0 / warmup, total_iters=warmup), S.CosineAnnealingLR(ref_opt, total - warmup, 0.005)],
        milestones=[warmup],
    )
    captures = []
    for i in range(len(xs)):
        loss, norm = step(Tensor(xs[i]), Tensor(ys[i]))
        if not inside_jit:
            sched.step()
        captures.append(step._capture)
        ref_loss = ((torch.tensor(xs[i]) @ t1).tanh() @ t2 - torch.tensor(ys[i])).square().mean()
        ref_opt.zero_grad()
        ref_loss.backward()
        ref_norm = torch.nn.utils.clip_grad_norm_([t1, t2], max_norm)
        ref_opt.step()
        ref_sched.step()
        np.testing.assert_allclose(loss.item(), ref_loss.item(), rtol=1e-5)
        np.testing.assert_allclose(norm.item(), ref_norm.item(), rtol=1e-5)
        np.testing.assert_allclose(opt.lr.item(), ref_opt.param_groups[0]["lr"], rtol=1e-6)
    assert captures[1] is not None and all(c is captures[1] for c in captures[2:])  # captured once, then replayed
    np.testing.assert_allclose(p1.numpy(), t1.detach().numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(p2.numpy(), t2.detach().numpy(), rtol=1e-4, atol=1e-5)
