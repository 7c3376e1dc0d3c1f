"""Optimizers (zeptograd.nn.optim): updates equal torch.optim's, kernel counts of step(), no recompiles when
the learning rate changes, skipping parameters without a gradient, and bad arguments."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from zeptograd import GlobalCounters, Tensor, dtypes
from zeptograd.engine import realize as engine
from zeptograd.nn.optim import LAMB, LARS, SGD, Adam, AdamW, Muon, Optimizer, OptimizerGroup
from zeptograd.uop.buffers import buffer_of

SHAPES = [(3, 4), (4,), (2, 1, 3)]
RTOL, ATOL = 1e-5, 1e-6


def _data(steps: int, seed: int = 0) -> tuple[list[np.ndarray], list[list[np.ndarray]]]:
    rng = np.random.default_rng(seed)
    init = [rng.standard_normal(s).astype(np.float32) for s in SHAPES]
    grads = [[rng.standard_normal(s).astype(np.float32) for s in SHAPES] for _ in range(steps)]
    return init, grads


# (zeptograd optimizer, its kwargs, torch.optim class name, its kwargs)
CONFIGS = {
    "sgd": (SGD, {"lr": 0.1}, "SGD", {"lr": 0.1}),
    "sgd_wd": (SGD, {"lr": 0.1, "weight_decay": 0.05}, "SGD", {"lr": 0.1, "weight_decay": 0.05}),
    "momentum": (SGD, {"lr": 0.1, "momentum": 0.9}, "SGD", {"lr": 0.1, "momentum": 0.9}),
    "momentum_wd": (
        SGD,
        {"lr": 0.05, "momentum": 0.8, "weight_decay": 0.1},
        "SGD",
        {"lr": 0.05, "momentum": 0.8, "weight_decay": 0.1},
    ),
    "nesterov": (
        SGD,
        {"lr": 0.1, "momentum": 0.9, "nesterov": True},
        "SGD",
        {"lr": 0.1, "momentum": 0.9, "nesterov": True},
    ),
    "nesterov_wd": (
        SGD,
        {"lr": 0.1, "momentum": 0.5, "nesterov": True, "weight_decay": 0.2},
        "SGD",
        {"lr": 0.1, "momentum": 0.5, "nesterov": True, "weight_decay": 0.2},
    ),
    "adam": (Adam, {"lr": 0.01}, "Adam", {"lr": 0.01}),
    "adam_wd": (Adam, {"lr": 0.01, "weight_decay": 0.1}, "Adam", {"lr": 0.01, "weight_decay": 0.1}),
    "adam_betas": (
        Adam,
        {"lr": 0.03, "b1": 0.3, "b2": 0.6, "eps": 1e-3},
        "Adam",
        {"lr": 0.03, "betas": (0.3, 0.6), "eps": 1e-3},
    ),
    "adamw": (AdamW, {"lr": 0.01}, "AdamW", {"lr": 0.01}),
    "adamw_betas": (
        AdamW,
        {"lr": 0.02, "betas": (0.8, 0.99), "eps": 1e-6, "weight_decay": 0.3},
        "AdamW",
        {"lr": 0.02, "betas": (0.8, 0.99), "eps": 1e-6, "weight_decay": 0.3},
    ),
}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_steps_match_torch(name: str):
    torch = pytest.importorskip("torch")
    cls, kwargs, torch_name, torch_kwargs = CONFIGS[name]
    init, grads = _data(4)
    params = [Tensor(a) for a in init]
    ref = [torch.tensor(a, requires_grad=True) for a in init]
    opt, ref_opt = cls(params, **kwargs), getattr(torch.optim, torch_name)(ref, **torch_kwargs)
    for step_grads in grads:
        for p, r, g in zip(params, ref, step_grads):
            p.grad, r.grad = Tensor(g), torch.tensor(g)
        opt.step()
        ref_opt.step()
        for p, r in zip(params, ref):
            np.testing.assert_allclose(p.numpy(), r.detach().numpy(), rtol=RTOL, atol=ATOL)
    if cls is not SGD:
        assert opt.t.tolist() == [4.0] * len(SHAPES)


class _MLP:
    """A two-layer model with Tensor attributes, from fixed numpy weights."""

    def __init__(self, w1: np.ndarray, w2: np.ndarray):
        self.w1, self.w2 = Tensor(w1), Tensor(w2)

    def __call__(self, x: Tensor) -> Tensor:
        return (x @ self.w1).tanh() @ self.w2


@pytest.mark.parametrize("name", ["momentum_wd", "adam_wd", "adamw"])
def test_training_steps_match_torch(name: str):
    """The same model and loss in both: backward fills the gradients, step() updates; the loss read after
    the step is the one from before it (reads made before an assignment see the old values)."""
    torch = pytest.importorskip("torch")
    cls, kwargs, torch_name, torch_kwargs = CONFIGS[name]
    rng = np.random.default_rng(1)
    w1, w2 = rng.standard_normal((3, 5)).astype(np.float32), rng.standard_normal((5, 2)).astype(np.float32)
    x, y = rng.standard_normal((6, 3)).astype(np.float32), rng.standard_normal((6, 2)).astype(np.float32)
    model = _MLP(w1, w2)
    opt = cls([model.w1, model.w2], **kwargs)
    tw1, tw2 = torch.tensor(w1, requires_grad=True), torch.tensor(w2, requires_grad=True)
    ref_opt = getattr(torch.optim, torch_name)([tw1, tw2], **torch_kwargs)
    for _ in range(3):
        opt.zero_grad()
        loss = (model(Tensor(x)) - Tensor(y)).square().mean()
        loss.backward()
        opt.step()
        ref_opt.zero_grad()
        ref_loss = ((torch.tensor(x) @ tw1).tanh() @ tw2 - torch.tensor(y)).square().mean()
        ref_loss.backward()
        ref_opt.step()
        np.testing.assert_allclose(loss.item(), ref_loss.item(), rtol=RTOL)
        np.testing.assert_allclose(model.w1.numpy(), tw1.detach().numpy(), rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(model.w2.numpy(), tw2.detach().numpy(), rtol=RTOL, atol=ATOL)


def test_float16_params_match_torch():
    torch = pytest.importorskip("torch")
    init, grads = _data(3)
    params = [Tensor(a.astype(np.float16)) for a in init]
    ref = [torch.tensor(a.astype(np.float16), requires_grad=True) for a in init]
    opt, ref_opt = Adam(params, lr=0.01, weight_decay=0.1), torch.optim.Adam(ref, lr=0.01, weight_decay=0.1)
    for step_grads in grads:
        for p, r, g in zip(params, ref, step_grads):
            p.grad, r.grad = Tensor(g.astype(np.float16)), torch.tensor(g.astype(np.float16))
        opt.step()
        ref_opt.step()
    for p, r in zip(params, ref):
        assert p.dtype is dtypes.float16
        # each op rounds to float16 in both: a last-place difference at most
        np.testing.assert_allclose(p.numpy(), r.detach().numpy(), rtol=2e-3, atol=2e-3)


# *** kernel counts and compiles ***

P = len(SHAPES)


@pytest.mark.parametrize(
    "name, expected",
    [
        ("sgd", P),
        ("sgd_wd", P),
        ("momentum", 2 * P),
        ("nesterov_wd", 2 * P),
        ("adam", 3 * P + 1),
        ("adam_wd", 3 * P + 1),
        ("adamw_betas", 3 * P + 1),
    ],
)
def test_step_kernel_count_and_no_recompile(name: str, expected: int):
    """The update phase of step() (gradients already realized) runs exactly the documented number of
    kernels; the second and third steps compile nothing new."""
    cls, kwargs, _, _ = CONFIGS[name]
    init, grads = _data(3)
    params = [Tensor(a) for a in init]
    opt = cls(params, **kwargs)
    for i, step_grads in enumerate(grads):
        for p, g in zip(params, step_grads):
            p.grad = Tensor(g)
        Tensor.realize(*(p.grad for p in params))
        compiled = len(engine._programs)
        GlobalCounters.reset()
        opt.step()
        assert GlobalCounters.kernel_count == expected
        if i > 0:
            assert len(engine._programs) == compiled


def test_skipped_params_kernel_count():
    """k of the P parameters have a gradient: SGD with momentum 2k kernels, Adam 3k + 1."""
    init, grads = _data(1)
    for cls, kwargs, per_param, extra in ((SGD, {"momentum": 0.9}, 2, 0), (Adam, {}, 3, 1)):
        params = [Tensor(a) for a in init]
        opt = cls(params, lr=0.1, **kwargs)
        params[1].grad = Tensor(grads[0][1]).realize()
        GlobalCounters.reset()
        opt.step()
        assert GlobalCounters.kernel_count == per_param * 1 + extra


def test_changing_lr_recompiles_nothing():
    torch = pytest.importorskip("torch")
    init, grads = _data(4)
    params = [Tensor(a) for a in init]
    ref = [torch.tensor(a, requires_grad=True) for a in init]
    opt, ref_opt = Adam(params, lr=0.01), torch.optim.Adam(ref, lr=0.01)
    for i, (lr, step_grads) in enumerate(zip([0.01, 0.05, 0.002, 0.3], grads)):
        opt.lr = lr
        ref_opt.param_groups[0]["lr"] = lr
        for p, r, g in zip(params, ref, step_grads):
            p.grad, r.grad = Tensor(g).realize(), torch.tensor(g)
        compiled = len(engine._programs)
        GlobalCounters.reset()
        opt.step()
        ref_opt.step()
        assert GlobalCounters.kernel_count == 3 * P + 1  # setting lr launched nothing
        if i > 0:
            assert len(engine._programs) == compiled
        for p, r in zip(params, ref):
            np.testing.assert_allclose(p.numpy(), r.detach().numpy(), rtol=RTOL, atol=ATOL)
    assert opt.lr.item() == pytest.approx(0.3)


def test_lr_as_tensor():
    """A Tensor learning rate (at construction, by the setter, or assigned to opt.lr) is copied in."""
    w = Tensor([1.0, 2.0])
    opt = SGD([w], lr=Tensor([0.5]))
    assert opt.lr.shape == () and opt.lr.item() == 0.5
    w.grad = Tensor([1.0, 1.0])
    opt.step()
    assert w.tolist() == [0.5, 1.5]
    opt.lr = Tensor(0.25) * 2  # a lazy value: realized by the next step, before the updates read it
    w.grad = Tensor([1.0, 1.0])
    opt.step()
    assert w.tolist() == [0.0, 1.0]
    opt.lr.assign(Tensor(np.array(0.125, np.float32)))
    w.grad = Tensor([8.0, 8.0])
    opt.step()
    assert w.tolist() == [-1.0, 0.0]
    with pytest.raises(ValueError, match=r"SGD: lr must be a number or a one-element tensor, got .* \(2,\)"):
        opt.lr = Tensor([0.1, 0.2])
    with pytest.raises(TypeError, match=r"SGD: lr must be a number or a numeric tensor, got .* dtypes.bool"):
        opt.lr = Tensor(True)
    with pytest.raises(ValueError, match=r"SGD: lr must be >= 0, got -1.0"):
        opt.lr = -1
    assert opt.lr.item() == 0.125


def test_lr_dtype_follows_float64_params():
    assert SGD([Tensor([1.0])]).lr.dtype is dtypes.float32
    assert SGD([Tensor([1.0]), Tensor(np.array([1.0]))]).lr.dtype is dtypes.float64


def test_training_loss_falls():
    """A short training run: a linear model fit by Adam; the loss falls by far."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((16, 4)).astype(np.float32)
    y = x @ rng.standard_normal((4, 1)).astype(np.float32) + 0.5
    w, b = Tensor(np.zeros((4, 1), np.float32)), Tensor(np.zeros(1, np.float32))
    opt = Adam([w, b], lr=0.1)
    losses = []
    for _ in range(30):
        opt.zero_grad()
        loss = ((Tensor(x) @ w + b - Tensor(y)) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.05 * losses[0]
    assert all(b < a for a, b in itertools.pairwise(losses[:11]))


# *** zero_grad, skipping, parameters and buffers ***


def test_zero_grad():
    w, b = Tensor([1.0, 2.0]), Tensor([0.5])
    opt = SGD([w, b], lr=0.1)
    (w * b).sum().backward()
    assert w.grad is not None and b.grad is not None
    opt.zero_grad()
    assert w.grad is None and b.grad is None
    opt.step()  # nothing to do
    assert w.tolist() == [1.0, 2.0] and b.tolist() == [0.5]


def test_backward_accumulates_until_zero_grad():
    w = Tensor([1.0])
    opt = SGD([w], lr=1.0)
    (w * 3).sum().backward()
    (w * 4).sum().backward()
    opt.step()
    assert w.tolist() == [-6.0]
    opt.zero_grad()
    (w * 2).sum().backward()
    opt.step()
    assert w.tolist() == [-8.0]


def test_params_without_grad_are_skipped_like_torch():
    """Parameter 1 has no gradient in the first two steps: it and its state stay as they are, and its own
    step count starts later (Adam's bias correction), as torch's per-parameter state does."""
    torch = pytest.importorskip("torch")
    init, grads = _data(4)
    for cls, torch_cls in ((Adam, torch.optim.Adam), (SGD, torch.optim.SGD)):
        params = [Tensor(a) for a in init]
        ref = [torch.tensor(a, requires_grad=True) for a in init]
        kwargs = {"lr": 0.05, "momentum": 0.9} if cls is SGD else {"lr": 0.05}
        opt, ref_opt = cls(params, **kwargs), torch_cls(ref, **kwargs)
        for step, step_grads in enumerate(grads):
            for i, (p, r, g) in enumerate(zip(params, ref, step_grads)):
                skip = i == 1 and step < 2
                p.grad, r.grad = (None, None) if skip else (Tensor(g), torch.tensor(g))
            opt.step()
            ref_opt.step()
            if step < 2:
                assert params[1].numpy().tolist() == init[1].tolist()
            for p, r in zip(params, ref):
                np.testing.assert_allclose(p.numpy(), r.detach().numpy(), rtol=RTOL, atol=ATOL)
        if cls is Adam:
            assert opt.t.tolist() == [4.0, 2.0, 4.0]


def test_params_dedupe_requires_grad_and_realize():
    w = Tensor([1.0, 2.0]) + 1  # lazy: the optimizer realizes it into a buffer
    frozen = Tensor([3.0]).requires_grad_(False)
    count = Tensor(np.zeros((), np.int64))
    opt = SGD([w, w, frozen, count], lr=0.5)
    assert opt.params == [w] and opt.buffers == [frozen, count]
    assert w.requires_grad is True and frozen.requires_grad is False and count.requires_grad is None
    assert buffer_of(w.uop) is not None
    (w * frozen).sum().backward()
    assert frozen.grad is None
    opt.step()
    assert w.tolist() == [0.5, 1.5]


def test_step_realizes_buffers():
    """Tensors the optimizer keeps as buffers (running statistics) are realized by step(), with the grads."""
    w = Tensor([1.0, 2.0])
    running = Tensor([0.0, 0.0]).requires_grad_(False)
    opt = SGD([w, running], lr=0.5)
    loss = (w * w).sum()
    running.assign(running * 0.9 + w * 0.1)  # reads w before the update
    loss.backward()
    opt.step()
    assert buffer_of(running.uop) is not None
    np.testing.assert_allclose(running.numpy(), [0.1, 0.2])
    assert w.tolist() == [0.0, 0.0]


def test_step_computes_the_loss_with_the_gradients(monkeypatch):
    """A loss that backward() ran from is computed by step() with the gradients, from the weights before the
    update, and nothing is copied aside for it (read after the step, it needed a copy of every weight it reads);
    its value and the update are numpy's."""
    rng = np.random.default_rng(3)
    xn, yn, wn = (rng.standard_normal(s).astype(np.float32) for s in ((8, 5), (8, 3), (5, 3)))
    w = Tensor(wn).requires_grad_()
    opt = SGD([w], lr=0.1)
    loss = ((Tensor(xn) @ w - Tensor(yn)) ** 2).mean()
    loss.backward()
    copies = []
    monkeypatch.setattr(engine, "copy_buffers", lambda bufs: copies.append(bufs))
    opt.step()
    assert buffer_of(loss.uop) is not None and not copies
    x64, y64, w64 = (a.astype(np.float64) for a in (xn, yn, wn))
    r = x64 @ w64 - y64
    np.testing.assert_allclose(loss.item(), (r**2).mean(), rtol=1e-5)
    np.testing.assert_allclose(w.numpy(), w64 - 0.1 * (2 * x64.T @ r / r.size), rtol=1e-5, atol=1e-6)


def test_gradient_of_a_broadcast_parameter_keeps_no_lazy_base():
    """The gradient of a parameter broadcast over a batch (a bias) is a sum reshaped back: a tensor of its own, not
    a view whose lazy base (the sum) would stay alive after the gradient is computed and be walked by every later
    realize. Its value is numpy's."""
    rng = np.random.default_rng(4)
    xn, bn = rng.standard_normal((6, 4)).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    b = Tensor(bn).requires_grad_()
    before = {id(t) for t in engine.lazy_tensors.tensors()}
    ((Tensor(xn) + b) ** 2).sum().backward()
    assert b.grad._base is None
    b.grad.realize()
    new = [t for t in engine.lazy_tensors.tensors() if id(t) not in before]
    assert not [t for t in new if t.shape in ((1, 4), (4,))], [t.shape for t in new]
    np.testing.assert_allclose(b.grad.numpy(), (2 * (xn + bn)).sum(0), rtol=1e-5)


def test_params_on_two_devices():
    """The learning rate and Adam's counters live on the first parameter's device; others get copies."""
    torch = pytest.importorskip("torch")
    a, b = np.array([1.0, -2.0], np.float32), np.array([0.5], np.float32)
    ga, gb = np.array([0.3, -0.1], np.float32), np.array([2.0], np.float32)
    params = [Tensor(a), Tensor(b, device="PYTHON")]
    ref = [torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)]
    opt, ref_opt = AdamW(params, lr=0.1), torch.optim.AdamW(ref, lr=0.1)
    for _ in range(2):
        params[0].grad, params[1].grad = Tensor(ga), Tensor(gb, device="PYTHON")
        ref[0].grad, ref[1].grad = torch.tensor(ga), torch.tensor(gb)
        opt.step()
        ref_opt.step()
    assert params[1].device == "PYTHON"
    for p, r in zip(params, ref):
        np.testing.assert_allclose(p.numpy(), r.detach().numpy(), rtol=RTOL, atol=ATOL)


def test_adam_betas_alias():
    opt = Adam([Tensor([1.0])], betas=(0.5, 0.75))
    assert (opt.b1, opt.b2) == (0.5, 0.75)
    assert AdamW([Tensor([1.0])]).weight_decay == 0.01


# *** errors ***


@pytest.mark.parametrize(
    "make, exc, match",
    [
        (lambda: SGD([]), ValueError, r"SGD: the parameter list is empty"),
        (lambda: Adam([Tensor([1.0]).requires_grad_(False)]), ValueError, r"Adam: the parameter list is empty"),
        (lambda: SGD(Tensor([1.0])), TypeError, r"SGD: params must be an iterable of Tensors"),
        (lambda: SGD([Tensor([1.0]), np.ones(2)]), TypeError, r"SGD: parameter 1 is a ndarray, not a Tensor"),
        (lambda: SGD([Tensor([1, 2])]), TypeError, r"SGD: no floating-point parameter.*0 \(dtypes.int32\)"),
        (
            lambda: AdamW([Tensor([1.0]), Tensor([1, 2]).requires_grad_()]),
            TypeError,
            r"AdamW: parameter 1 \(shape \(2,\)\) has dtype dtypes.int32 and requires_grad True",
        ),
        (lambda: SGD([Tensor([1.0])], lr=-0.1), ValueError, r"SGD: lr must be >= 0, got -0.1"),
        (lambda: Adam([Tensor([1.0])], lr=float("nan")), ValueError, r"Adam: lr must not be nan"),
        (lambda: Adam([Tensor([1.0])], lr="0.1"), TypeError, r"Adam: lr must be a number, got str"),
        (lambda: SGD([Tensor([1.0])], momentum=-0.5), ValueError, r"SGD: momentum must be >= 0, got -0.5"),
        (lambda: SGD([Tensor([1.0])], weight_decay=-1), ValueError, r"SGD: weight_decay must be >= 0"),
        (lambda: SGD([Tensor([1.0])], nesterov=True), ValueError, r"SGD: nesterov=True needs a momentum > 0"),
        (lambda: Adam([Tensor([1.0])], b1=1.0), ValueError, r"Adam: b1 \(betas\[0\]\) must be in \[0, 1\), got 1.0"),
        (lambda: Adam([Tensor([1.0])], b2=-0.1), ValueError, r"Adam: b2 \(betas\[1\]\) must be in \[0, 1\)"),
        (lambda: AdamW([Tensor([1.0])], betas=(0.9, 1.5)), ValueError, r"AdamW: b2 \(betas\[1\]\) must be in"),
        (lambda: AdamW([Tensor([1.0])], betas=(0.9,)), ValueError, r"AdamW: betas must be a pair"),
        (lambda: Adam([Tensor([1.0])], eps=-1e-8), ValueError, r"Adam: eps must be >= 0"),
        (lambda: AdamW([Tensor([1.0])], weight_decay=-0.01), ValueError, r"AdamW: weight_decay must be >= 0"),
    ],
)
def test_bad_arguments(make, exc, match):
    with pytest.raises(exc, match=match):
        make()


def test_bad_lr_changes_nothing():
    w = Tensor([1.0]) * 2
    with pytest.raises(ValueError, match="Adam: lr must be >= 0"):
        Adam([w], lr=-1.0)
    assert w.requires_grad is None


def test_bad_grads_at_step():
    w = Tensor([1.0, 2.0])
    opt = Adam([w], lr=0.1)
    w.grad = Tensor([1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match=r"Adam.step: parameter 0 has shape \(2,\) but its .grad has shape \(3,\)"):
        opt.step()
    w.grad = np.ones(2)
    with pytest.raises(TypeError, match=r"Adam.step: parameter 0 has a .grad of type ndarray"):
        opt.step()
    w.grad = Tensor([1.0, 1.0], device="PYTHON")
    with pytest.raises(RuntimeError, match=r"Adam.step: parameter 0 is on CPU but its .grad is on PYTHON"):
        opt.step()
    assert w.tolist() == [1.0, 2.0] and opt.t.tolist() == [0.0]


def test_base_optimizer_has_no_update():
    w = Tensor([1.0])
    opt = Optimizer([w], lr=0.1)
    w.grad = Tensor([1.0])
    with pytest.raises(NotImplementedError, match="Optimizer does not implement _updates"):
        opt.step()


# *** LAMB, LARS, Muon: against numpy written from each paper's update rule, in float64 ***


def _ref_lamb(p, g, st, lr, b1=0.9, b2=0.999, eps=1e-6, wd=0.0, adam=False):
    """LAMB (You et al. 2019, algorithm 2) with the trust ratio phi(||x||) / ||r + lambda x||, phi the identity."""
    st["t"] = st.get("t", 0) + 1
    st["m"] = b1 * st.get("m", 0.0) + (1 - b1) * g
    st["v"] = b2 * st.get("v", 0.0) + (1 - b2) * g * g
    m_hat, v_hat = st["m"] / (1 - b1 ** st["t"]), st["v"] / (1 - b2 ** st["t"])
    up = m_hat / (np.sqrt(v_hat) + eps) + wd * p
    r1, r2 = np.linalg.norm(p), np.linalg.norm(up)
    ratio = 1.0 if adam or r1 == 0 or r2 == 0 else r1 / r2
    return p - lr * ratio * up


def _ref_lars(p, g, st, lr, momentum=0.9, wd=1e-4, nesterov=False, classic=True, tcoef=0.001):
    """LARS (You et al. 2017, algorithm 1): local lr = tcoef * ||w|| / (||g|| + wd * ||w||), momentum on the
    scaled step (classic) or on the raw one."""
    r1, r2 = np.linalg.norm(p), np.linalg.norm(g)
    ratio = tcoef * r1 / (r2 + wd * r1) if tcoef and r1 > 0 and r2 > 0 else 1.0
    d = g + wd * p
    if classic:
        d = d * lr * ratio
    if momentum:
        st["b"] = momentum * st.get("b", 0.0) + d
        d = d + momentum * st["b"] if nesterov else st["b"]
    if not classic:
        d = d * lr * ratio
    return p - d


def _ref_muon(p, g, st, lr, momentum=0.95, wd=0.0, ns_steps=5, nesterov=True, eps=1e-7):
    """Muon (Keller Jordan 2024): EMA momentum, quintic Newton-Schulz on the (rows, rest) matrix, the
    sqrt(max(1, rows / cols)) scale, decoupled weight decay."""
    a, b, c = 3.4445, -4.7750, 2.0315
    if momentum:
        st["b"] = momentum * st.get("b", 0.0) + (1 - momentum) * g
        g = (1 - momentum) * g + momentum * st["b"] if nesterov else st["b"]
    x = g.reshape(g.shape[0], -1)
    tall = x.shape[0] > x.shape[1]
    x = x.T if tall else x
    x = x / max(np.linalg.norm(x), eps)
    for _ in range(ns_steps):
        gram = x @ x.T
        x = a * x + (b * gram + c * gram @ gram) @ x
    x = (x.T if tall else x).reshape(p.shape)
    scale = np.sqrt(max(1.0, p.shape[0] / (p.size // p.shape[0])))
    return p * (1 - lr * wd) - lr * scale * x


PAPER_CONFIGS = {
    "lamb": (LAMB, {"lr": 0.01}, _ref_lamb, {"lr": 0.01}),
    "lamb_wd": (LAMB, {"lr": 0.02, "weight_decay": 0.1, "b1": 0.8}, _ref_lamb, {"lr": 0.02, "wd": 0.1, "b1": 0.8}),
    "lamb_adam": (LAMB, {"lr": 0.01, "adam": True}, _ref_lamb, {"lr": 0.01, "adam": True}),
    "lars": (LARS, {"lr": 0.5}, _ref_lars, {"lr": 0.5}),
    "lars_popular": (
        LARS,
        {"lr": 0.5, "classic": False, "nesterov": True, "weight_decay": 0.01, "tcoef": 0.02},
        _ref_lars,
        {"lr": 0.5, "classic": False, "nesterov": True, "wd": 0.01, "tcoef": 0.02},
    ),
    "lars_no_ratio": (LARS, {"lr": 0.1, "tcoef": 0.0}, _ref_lars, {"lr": 0.1, "tcoef": 0.0}),
    "muon": (Muon, {"lr": 0.02}, _ref_muon, {"lr": 0.02}),
    "muon_wd": (
        Muon,
        {"lr": 0.05, "weight_decay": 0.1, "nesterov": False, "momentum": 0.8},
        _ref_muon,
        {"lr": 0.05, "wd": 0.1, "nesterov": False, "momentum": 0.8},
    ),
}
MATRIX_SHAPES = [(3, 4), (5, 2), (2, 1, 3)]  # Muon needs matrices: wide, tall, and a conv-like 3-d weight


@pytest.mark.parametrize("name", list(PAPER_CONFIGS))
def test_paper_optimizers_match_numpy(name: str):
    cls, kwargs, ref_step, ref_kwargs = PAPER_CONFIGS[name]
    rng = np.random.default_rng(len(name))
    init = [rng.standard_normal(s).astype(np.float32) for s in MATRIX_SHAPES]
    params = [Tensor(a) for a in init]
    ref = [a.astype(np.float64) for a in init]
    states: list[dict] = [{} for _ in init]
    opt = cls(params, **kwargs)
    for _ in range(4):
        grads = [rng.standard_normal(s).astype(np.float32) for s in MATRIX_SHAPES]
        for p, g in zip(params, grads):
            p.grad = Tensor(g)
        opt.step()
        ref = [ref_step(r, g.astype(np.float64), st, **ref_kwargs) for r, g, st in zip(ref, grads, states)]
        for p, r in zip(params, ref):
            np.testing.assert_allclose(p.numpy(), r, rtol=1e-4, atol=2e-6)


def test_lamb_and_lars_zero_parameter_keep_the_plain_step():
    # a zero parameter has no norm to scale by: the trust ratio is 1, as the papers' implementations define
    w, v = Tensor(np.zeros(3, np.float32)), Tensor(np.zeros(3, np.float32))
    lamb, lars = LAMB([w], lr=0.1), LARS([v], lr=0.1, momentum=0.0, weight_decay=0.0)
    w.grad = v.grad = Tensor([1.0, -2.0, 0.5])
    lamb.step()
    lars.step()
    np.testing.assert_allclose(w.numpy(), _ref_lamb(np.zeros(3), np.array([1.0, -2.0, 0.5]), {}, 0.1), rtol=1e-5)
    np.testing.assert_allclose(v.numpy(), [-0.1, 0.2, -0.05], rtol=1e-6)


def test_muon_close_to_torch_muon():
    # torch.optim.Muon runs Newton-Schulz in bfloat16: a loose match, but the same rule (momentum, scale, decay)
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    init = [rng.standard_normal(s).astype(np.float32) for s in [(6, 4), (3, 8)]]
    params, ref = [Tensor(a) for a in init], [torch.tensor(a, requires_grad=True) for a in init]
    opt, ref_opt = Muon(params, lr=0.02, weight_decay=0.1), torch.optim.Muon(ref, lr=0.02, weight_decay=0.1)
    for _ in range(3):
        for p, r in zip(params, ref):
            g = rng.standard_normal(p.shape).astype(np.float32)
            p.grad, r.grad = Tensor(g), torch.tensor(g)
        opt.step()
        ref_opt.step()
    for p, r, a in zip(params, ref, init):
        moved, ref_moved = p.numpy() - a, r.detach().numpy() - a
        assert np.linalg.norm(moved - ref_moved) < 0.05 * np.linalg.norm(ref_moved)


def test_optimizer_group_steps_each_in_one_schedule():
    rng = np.random.default_rng(4)
    init = [rng.standard_normal(s).astype(np.float32) for s in [(3, 4), (4,), (2, 3)]]
    grads = [rng.standard_normal(a.shape).astype(np.float32) for a in init]
    together = [Tensor(a) for a in init]
    apart = [Tensor(a) for a in init]
    group = OptimizerGroup(Muon([together[0], together[2]], lr=0.05), AdamW([together[1]], lr=0.01))
    single = [Muon([apart[0], apart[2]], lr=0.05), AdamW([apart[1]], lr=0.01)]
    assert len(group) == 2 and isinstance(group[1], AdamW) and len(group.params) == 3
    for _ in range(2):
        for t, a, g in zip(together, apart, grads):
            t.grad, a.grad = Tensor(g), Tensor(g)
        group.step()
        for o in single:
            o.step()
    for t, a in zip(together, apart):
        np.testing.assert_array_equal(t.numpy(), a.numpy())
    group.zero_grad()
    assert all(t.grad is None for t in together)


@pytest.mark.parametrize(
    "make, exc, match",
    [
        (lambda: Muon([Tensor([1.0, 2.0])]), ValueError, r"Muon: parameter 0 has shape \(2,\).*AdamW"),
        (lambda: Muon([Tensor([[1.0]])], ns_steps=-1), ValueError, r"Muon: ns_steps"),
        (lambda: Muon([Tensor([[1.0]])], ns_coefficients=(1.0, 2.0)), ValueError, r"Muon: ns_coefficients"),
        (lambda: LARS([Tensor([1.0])], tcoef=-1), ValueError, r"LARS: tcoef must be >= 0"),
        (lambda: LARS([Tensor([1.0])], momentum=0, nesterov=True), ValueError, r"LARS: nesterov=True needs"),
        (lambda: LAMB([Tensor([1.0])], b1=1.5), ValueError, r"LAMB: b1"),
        (lambda: OptimizerGroup(), ValueError, r"OptimizerGroup: needs at least one"),
        (lambda: OptimizerGroup(SGD([Tensor([1.0])]), "adam"), TypeError, r"OptimizerGroup: argument 1 is a str"),
    ],
)
def test_paper_optimizer_bad_arguments(make, exc, match):
    with pytest.raises(exc, match=match):
        make()


def test_optimizer_group_refuses_a_shared_parameter():
    w = Tensor([1.0])
    with pytest.raises(ValueError, match="more than one"):
        OptimizerGroup(SGD([w]), Adam([w]))


# *** fused=True: one flat state buffer per kind, the same values as unfused (and as torch) ***


@pytest.mark.parametrize("name", ["sgd_wd", "momentum_wd", "nesterov", "adam_wd", "adamw_betas"])
def test_fused_steps_match_torch_and_unfused(name: str):
    torch = pytest.importorskip("torch")
    cls, kwargs, torch_name, torch_kwargs = CONFIGS[name]
    init, grads = _data(3, seed=5)
    plain, fused = [Tensor(a) for a in init], [Tensor(a) for a in init]
    ref = [torch.tensor(a, requires_grad=True) for a in init]
    opt_plain, opt_fused = cls(plain, **kwargs), cls(fused, fused=True, **kwargs)
    ref_opt = getattr(torch.optim, torch_name)(ref, **torch_kwargs)
    for step_grads in grads:
        for p, q, r, g in zip(plain, fused, ref, step_grads):
            p.grad, q.grad, r.grad = Tensor(g), Tensor(g), torch.tensor(g)
        opt_plain.step()
        opt_fused.step()
        ref_opt.step()
        for p, q, r in zip(plain, fused, ref):
            np.testing.assert_array_equal(q.numpy(), p.numpy())
            np.testing.assert_allclose(q.numpy(), r.detach().numpy(), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("name,expected", [("sgd", P + 1), ("momentum", P + 2), ("adam", P + 5)])
def test_fused_step_kernel_count(name: str, expected: int):
    # one copy of the flat parameters, one kernel per kind of state (and Adam's counters), one write per
    # parameter; Adam's flat update (a square root and divisions) is stored once, not recomputed by each write
    cls, kwargs, _, _ = CONFIGS[name]
    init, grads = _data(2, seed=6)
    params = [Tensor(a) for a in init]
    opt = cls(params, fused=True, **kwargs)
    for step_grads in grads:
        for p, g in zip(params, step_grads):
            p.grad = Tensor(g).realize()
        GlobalCounters.reset()
        opt.step()
        assert GlobalCounters.kernel_count == expected


def test_fused_errors():
    with pytest.raises(ValueError, match="fused=True needs parameters of one dtype"):
        Adam([Tensor([1.0]), Tensor([1.0], dtype=dtypes.float64)], fused=True)
    w, b = Tensor([1.0, 2.0]), Tensor([3.0])
    opt = SGD([w, b], lr=0.1, fused=True)
    w.grad = Tensor([1.0, 1.0])
    with pytest.raises(ValueError, match=r"fused=True needs a gradient for every parameter; parameters \[1\]"):
        opt.step()
    assert w.tolist() == [1.0, 2.0]
    for make in (
        lambda: LAMB([w], fused=True),
        lambda: LARS([w], fused=True),
        lambda: Muon([Tensor([[1.0]])], fused=True),
    ):
        with pytest.raises(ValueError, match="fused=True is not supported"):
            make()
