"""Optimizers: SGD (momentum, Nesterov, weight decay), Adam and AdamW, with torch.optim's update rules; LAMB, LARS
and Muon from their papers (as tinygrad has them); OptimizerGroup steps several optimizers in one schedule.

>>> from zeptograd.nn.optim import SGD
>>> w = Tensor([1.0, 2.0])
>>> opt = SGD([w], lr=0.5)
>>> _ = (w * w).sum().backward()
>>> opt.step()
>>> w.tolist()
[0.0, 0.0]

Every update is an assignment (`Tensor.assign`, a STORE into the parameter's or the state's buffer).
`step()` realizes the gradients first, then all the updates (the state: momentum buffers, m, v, the step
counters; and the parameters) in one schedule. (The loss the caller still holds reads the parameters; once
the gradients are computed it reads those realized values instead of the parameters, so the updates rarely
need the old parameter values copied aside.)

Kernels of the update phase, for k parameters that have a gradient (gradients already realized): each
STORE is a kernel, and the scalars (the learning rate, the bias corrections) are computed inside the
kernels that use them, so

- SGD without momentum: k (the parameter);
- SGD with momentum (Nesterov or not): 2k (the momentum buffer, then the parameter);
- Adam and AdamW: 3k + 1 (m, v, the parameter, and one kernel for the step counters of all parameters).

Weight decay adds no kernel. Setting the learning rate (`opt.lr = 0.01`) launches none. With `fused=True`
(SGD, Adam, AdamW; parameters of one dtype and device, each with a gradient at every step) the state is one
flat buffer per kind: one copy of the flat parameters, one kernel per kind of state, one write per parameter
(k + 1 for SGD, k + 2 with momentum, k + 5 for Adam), with the same values as unfused.

Nothing that changes between steps is compiled into a kernel: the learning rate is a 0-d buffer (`opt.lr`,
float32, or float64 when a parameter is float64) and Adam's step counters and the powers b1**t, b2**t are a
float64 buffer, so a training loop compiles its kernels on the first step and reuses them after, whatever
it does with the learning rate. Adam's bias corrections are computed in float64 (torch computes them in
Python floats) and rounded to the parameter's dtype where they meet it, as in torch.

`clip_grad_norm_` scales the gradients down to a maximum total norm, as torch.nn.utils.clip_grad_norm_, without
reading anything back. The learning rate schedulers (`LinearLR`, `CosineAnnealingLR`, `WarmupCosineLR`, or a
subclass of `LRScheduler`) keep their step count in a buffer and compute the learning rate from it with kernels
that assign it into `opt.lr`: called inside a TinyJit training step, a replay advances the schedule too.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from zeptograd.dtype import dtypes, np_dtype
from zeptograd.helpers import ArgumentError
from zeptograd.tensor import Tensor, lazy_losses

__all__ = [
    "Optimizer",
    "OptimizerGroup",
    "SGD",
    "Adam",
    "AdamW",
    "LAMB",
    "LARS",
    "Muon",
    "clip_grad_norm_",
    "LRScheduler",
    "LinearLR",
    "CosineAnnealingLR",
    "WarmupCosineLR",
]


def _number(value: Any, opt: str, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{opt}: {name} must be a number, got {type(value).__name__}")
    value = float(value)
    if math.isnan(value):
        raise ArgumentError(f"{opt}: {name} must not be nan")
    return value


def _at_least_zero(value: Any, opt: str, name: str) -> float:
    value = _number(value, opt, name)
    if value < 0:
        raise ArgumentError(f"{opt}: {name} must be >= 0, got {value}")
    return value


def _check_lr(value: Any, opt: str) -> float | Tensor:
    if isinstance(value, Tensor):
        if value.numel() != 1:
            raise ArgumentError(
                f"{opt}: lr must be a number or a one-element tensor, got a tensor of shape {value.shape}"
            )
        if not (dtypes.is_float(value.dtype) or dtypes.is_int(value.dtype)):
            raise TypeError(f"{opt}: lr must be a number or a numeric tensor, got a tensor of dtype {value.dtype!r}")
        return value
    return _at_least_zero(value, opt, "lr")


def _beta(value: Any, opt: str, name: str) -> float:
    value = _number(value, opt, name)
    if not 0.0 <= value < 1.0:
        raise ArgumentError(f"{opt}: {name} must be in [0, 1), got {value}")
    return value


class Optimizer:
    """The base of the optimizers: the parameters, the learning rate, `zero_grad()` and `step()`.

    Parameters are deduplicated and realized into buffers of their own; those whose `requires_grad` is None
    get True (so `backward()` fills their `.grad`). Tensors with `requires_grad` False, and integer or bool
    tensors with None (BatchNorm's `num_batches_tracked`), are not trained but kept as `buffers`: `step()`
    realizes them with the gradients, as tinygrad does, so `SGD(get_parameters(model))` also lands
    BatchNorm's pending running statistics. A parameter whose `.grad` is None at `step()` is skipped, as in
    torch. Subclasses implement `_updates`.

    >>> w = Tensor([1.0, 2.0])
    >>> opt = Optimizer([w, Tensor([0]), Tensor([1.0]).requires_grad_(False)], lr=0.5)
    >>> len(opt.params), len(opt.buffers), opt.lr.item(), w.requires_grad
    (1, 2, 0.5, True)
    """

    def __init__(self, params: Iterable[Tensor], lr: float | Tensor, fused: bool = False):
        name = type(self).__name__
        if isinstance(params, Tensor) or not isinstance(params, Iterable):
            raise TypeError(
                f"{name}: params must be an iterable of Tensors (a list: [w, b] or get_parameters(model)), "
                f"got {type(params).__name__}"
            )
        lr = _check_lr(lr, name)  # before anything changes
        given = list(params)
        for i, p in enumerate(given):
            if not isinstance(p, Tensor):
                raise TypeError(f"{name}: parameter {i} is a {type(p).__name__}, not a Tensor")
            if p.requires_grad and not dtypes.is_float(p.dtype):
                raise TypeError(
                    f"{name}: parameter {i} (shape {p.shape}) has dtype {p.dtype!r} and requires_grad True; "
                    "only floating-point tensors can be optimized"
                )
        unique = list(dict.fromkeys(given))  # dedupes by identity (a Tensor hashes by identity)
        params = [p for p in unique if p.requires_grad is not False and dtypes.is_float(p.dtype)]
        self.buffers: list[Tensor] = [p for p in unique if p.requires_grad is False or not dtypes.is_float(p.dtype)]
        if not params:
            ints = [f"{i} ({p.dtype!r})" for i, p in enumerate(given) if not dtypes.is_float(p.dtype)]
            if ints:
                raise TypeError(
                    f"{name}: no floating-point parameter to optimize (parameters {', '.join(ints)} are not "
                    "floating-point; only floating-point tensors can be optimized)"
                )
            raise ArgumentError(f"{name}: the parameter list is empty (no tensor with requires_grad True or None)")
        for p in params:
            if p.requires_grad is None:
                p.requires_grad = True
        self.fused = bool(fused)
        if self.fused and len({(p.dtype, p.device) for p in params}) > 1:
            kinds = ", ".join(sorted({f"{p.dtype!r} on {p.device}" for p in params}))
            raise ArgumentError(f"{name}: fused=True needs parameters of one dtype on one device, got {kinds}")
        # parameters must be buffers: the updates assign into them
        Tensor.realize(*params)
        self.params: list[Tensor] = params
        self.device: str = params[0].device
        lr_dtype = dtypes.float64 if any(p.dtype is dtypes.float64 for p in params) else dtypes.default_float
        self._lr = self._buffer(np.array(0.0), lr_dtype)
        self.lr = lr

    def _buffer(self, value: np.ndarray, dtype: Any = dtypes.float64) -> Tensor:
        """A buffer on the optimizer's device holding `value` (copied in: no kernel)."""
        return Tensor(np.asarray(value), dtype=dtype, device=self.device)

    def _zeros_like_params(self) -> list[Tensor]:
        """A zero buffer per parameter, of its shape and dtype (the momentum and moment state), made on the
        host: no kernel to compile or run. Fused: one flat buffer for all of them."""
        if self.fused:
            p0, total = self.params[0], sum(p.numel() for p in self.params)
            return [Tensor(np.zeros(total, np_dtype(p0.dtype)), dtype=p0.dtype, device=p0.device)]
        return [Tensor(np.zeros(p.shape, np_dtype(p.dtype)), dtype=p.dtype, device=p.device) for p in self.params]

    def _write(self, p: Tensor, value: Tensor) -> list[Tensor]:
        """Assign a parameter's new value; fused, `p` is all of them flattened and each gets its slice."""
        if not self.fused:
            return [p.assign(value)]
        out, start = [], 0
        for param in self.params:
            n = param.numel()
            out.append(param.assign(value[start : start + n].reshape(param.shape)))
            start += n
        return out

    def _no_fused(self, fused: bool) -> bool:
        if fused:
            raise ArgumentError(
                f"{type(self).__name__}: fused=True is not supported: its update scales each parameter by its own "
                "norms, which a flat fused step would mix"
            )
        return False

    @property
    def lr(self) -> Tensor:
        """The learning rate: a 0-d tensor in a buffer of its own, which the kernels read. Set it with
        `opt.lr = 0.01`: that compiles and launches nothing. A Tensor works too (`opt.lr = t`, or
        `opt.lr.assign(t)`): it is copied in by a kernel before the next step's updates.

        >>> opt = Optimizer([Tensor([1.0])], lr=0.1)
        >>> opt.lr = 0.25
        >>> opt.lr.item(), opt.lr.dtype
        (0.25, dtypes.float32)
        """
        return self._lr

    @lr.setter
    def lr(self, value: float | Tensor) -> None:
        value = _check_lr(value, type(self).__name__)
        if isinstance(value, Tensor):
            # lazy: step() realizes it before the updates read it
            self._lr.assign(value.to(self.device).cast(self._lr.dtype).reshape(()))
            return
        # a fresh buffer, not a STORE of a constant (which would put the value in a kernel's source): reads of
        # the old learning rate still pending keep the old buffer, as an assignment would have them do
        self._lr.uop = self._buffer(np.array(value), self._lr.dtype).uop

    def _lr_on(self, p: Tensor) -> Tensor:
        return self._lr if p.device == self.device else self._lr.to(p.device)

    def zero_grad(self) -> None:
        """Set every parameter's `.grad` to None (the next `backward()` starts from zero).

        >>> w = Tensor([1.0])
        >>> opt = Optimizer([w], lr=0.1)
        >>> _ = (w * 2).sum().backward()
        >>> opt.zero_grad()
        >>> w.grad is None
        True
        """
        for p in self.params:
            p.grad = None

    def _with_grads(self) -> list[tuple[int, Tensor, Tensor]]:
        """(index, parameter, gradient) of each parameter that has a gradient, checked against it."""
        name = type(self).__name__
        out = []
        for i, p in enumerate(self.params):
            g = p.grad
            if g is None:
                continue
            if not isinstance(g, Tensor):
                raise TypeError(f"{name}.step: parameter {i} has a .grad of type {type(g).__name__}, not a Tensor")
            if g.shape != p.shape:
                raise ArgumentError(f"{name}.step: parameter {i} has shape {p.shape} but its .grad has shape {g.shape}")
            if g.device != p.device:
                raise RuntimeError(f"{name}.step: parameter {i} is on {p.device} but its .grad is on {g.device}")
            out.append((i, p, g))
        return out

    def step(self) -> None:
        """Update every parameter that has a gradient: realize the gradients (and the buffers), then all the
        updates (`schedule_step` builds them without realizing).

        >>> w = Tensor([3.0])
        >>> opt = SGD([w], lr=0.25)
        >>> _ = (w * w).sum().backward()
        >>> opt.step()
        >>> w.tolist()
        [1.5]
        """
        if updates := self.schedule_step():
            Tensor.realize(*updates)

    def _grads_to_realize(self) -> list[Tensor]:
        return [g for _, _, g in self._with_grads()] + [self._lr, *self.buffers, *lazy_losses()]

    def schedule_step(self) -> list[Tensor]:
        """Realize the gradients (and the buffers), then assign every update lazily; return the assigned tensors
        (realizing them is the step: `OptimizerGroup` realizes those of several optimizers together)."""
        items = self._with_grads()
        if self.fused and items and len(items) != len(self.params):
            missing = [i for i, p in enumerate(self.params) if p.grad is None]
            raise ArgumentError(
                f"{type(self).__name__}.step: fused=True needs a gradient for every parameter; parameters {missing} "
                "have none"
            )
        # the buffers with the gradients: BatchNorm's running statistics then reuse the batch statistics the
        # backward pass computes, and they read the parameters before the updates change them; so do the losses
        Tensor.realize(*(g for _, _, g in items), self._lr, *self.buffers, *lazy_losses())
        if not items:
            return []
        if self.fused:  # one flat parameter and gradient: every update rule here is elementwise
            # the flat copy of the parameters is realized first (one kernel): read lazily through the cat by a
            # state update and the parameter writes of one schedule, it gives wrong values today
            flat_p = Tensor.cat(*(p.flatten() for _, p, _ in items)).realize()
            flat_g = Tensor.cat(*(g.cast(p.dtype).flatten() for _, p, g in items))
            items = [(0, flat_p, flat_g)]
        state, params = self._updates(items)
        return [*state, *params]

    def _updates(self, items: list[tuple[int, Tensor, Tensor]]) -> tuple[list[Tensor], list[Tensor]]:
        """Assign the new values of the parameters in `items` (index, parameter, gradient) and of their state;
        return the assigned state tensors and the assigned parameters."""
        raise NotImplementedError(f"{type(self).__name__} does not implement _updates")


class SGD(Optimizer):
    """Stochastic gradient descent, as torch.optim.SGD (dampening 0): with weight decay wd the gradient is
    g + wd * p; with momentum the buffer b becomes momentum * b + g (b starts at zero, so the first step gives
    b = g, torch's convention); the step is p -= lr * b, or p -= lr * (g + momentum * b) when `nesterov`.

    >>> w = Tensor([1.0, -1.0])
    >>> opt = SGD([w], lr=0.1, momentum=0.9)
    >>> for _ in range(2):
    ...     opt.zero_grad()
    ...     _ = (w * w).sum().backward()
    ...     opt.step()
    >>> [round(v, 4) for v in w.tolist()]
    [0.46, -0.46]
    """

    def __init__(
        self,
        params: Iterable[Tensor],
        lr: float | Tensor = 0.001,
        momentum: float = 0.0,
        weight_decay: float = 0.0,
        nesterov: bool = False,
        fused: bool = False,
    ):
        momentum = _at_least_zero(momentum, "SGD", "momentum")
        weight_decay = _at_least_zero(weight_decay, "SGD", "weight_decay")
        if nesterov and momentum == 0:
            raise ArgumentError("SGD: nesterov=True needs a momentum > 0")
        super().__init__(params, lr, fused)
        self.momentum, self.weight_decay, self.nesterov = momentum, weight_decay, bool(nesterov)
        self.b: list[Tensor] = self._zeros_like_params() if momentum else []

    def _updates(self, items: list[tuple[int, Tensor, Tensor]]) -> tuple[list[Tensor], list[Tensor]]:
        state, params = [], []
        for i, p, g in items:
            g = g.cast(p.dtype)
            if self.weight_decay:
                g = g + self.weight_decay * p
            if self.momentum:
                b = self.b[i].assign(self.b[i] * self.momentum + g)
                g = g + self.momentum * b if self.nesterov else b
                state.append(b)
            params += self._write(p, p - self._lr_on(p) * g)
        return state, params


class Adam(Optimizer):
    """Adam, as torch.optim.Adam: weight decay wd is L2 (the gradient becomes g + wd * p); then
    m = lerp(m, g, 1 - b1), v = b2 * v + (1 - b2) * g * g, and
    p -= lr / (1 - b1**t) * m / (sqrt(v) / sqrt(1 - b2**t) + eps), with t the parameter's own step count
    (a parameter skipped for lack of a gradient does not advance it, as in torch). PyTorch's `betas=(b1, b2)`
    works too.

    >>> w = Tensor([1.0, -1.0])
    >>> opt = Adam([w], lr=0.1)
    >>> _ = (w * w).sum().backward()
    >>> opt.step()
    >>> [round(v, 4) for v in w.tolist()]
    [0.9, -0.9]
    """

    def __init__(
        self,
        params: Iterable[Tensor],
        lr: float | Tensor = 0.001,
        b1: float = 0.9,
        b2: float = 0.999,
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        *,
        betas: tuple[float, float] | None = None,
        fused: bool = False,
    ):
        name = type(self).__name__
        if betas is not None:
            if not isinstance(betas, (tuple, list)) or len(betas) != 2:
                raise ArgumentError(f"{name}: betas must be a pair (b1, b2), got {betas!r}")
            b1, b2 = betas
        b1 = _beta(b1, name, "b1 (betas[0])")
        b2 = _beta(b2, name, "b2 (betas[1])")
        eps = _at_least_zero(eps, name, "eps")
        weight_decay = _at_least_zero(weight_decay, name, "weight_decay")
        super().__init__(params, lr, fused)
        self.b1, self.b2, self.eps, self.weight_decay = b1, b2, eps, weight_decay
        self.decoupled_weight_decay = False
        self.m: list[Tensor] = self._zeros_like_params()
        self.v: list[Tensor] = self._zeros_like_params()
        # per parameter: b1**t, b2**t and t; one kernel advances the rows of the parameters that have a gradient
        n = 1 if self.fused else len(self.params)
        self.t_state: Tensor = self._buffer(np.tile([1.0, 1.0, 0.0], (n, 1)))
        self._advance_mul = self._buffer(np.array([b1, b2, 1.0]))
        self._advance_add = self._buffer(np.array([0.0, 0.0, 1.0]))
        self._mask_cache: tuple[tuple[bool, ...], Tensor] | None = None

    @property
    def t(self) -> Tensor:
        """The step count of each parameter (float64, lazy: `opt.t.tolist()`).

        >>> w = Tensor([1.0])
        >>> opt = Adam([w])
        >>> _ = (w * 2).sum().backward()
        >>> opt.step()
        >>> opt.t.tolist()
        [1.0]
        """
        return self.t_state[:, 2]

    def _advance(self, items: list[tuple[int, Tensor, Tensor]]) -> Tensor:
        """Advance the step state of the parameters in `items` (one kernel, whichever they are)."""
        has_grad = [False] * (1 if self.fused else len(self.params))
        for i, _, _ in items:
            has_grad[i] = True
        key = tuple(has_grad)
        if self._mask_cache is None or self._mask_cache[0] != key:
            # a buffer, not a constant, so the kernel does not change with the set of parameters stepped
            self._mask_cache = (key, self._buffer(np.array(key).reshape(-1, 1), dtypes.bool))
        mask = self._mask_cache[1]
        s = self.t_state
        return s.assign(mask.where(s * self._advance_mul + self._advance_add, s))

    def _decay(self, p: Tensor) -> Tensor:
        """The parameter before the Adam step: AdamW's decoupled weight decay shrinks it."""
        if not (self.decoupled_weight_decay and self.weight_decay):
            return p
        return p * (1.0 - self._lr_on(p) * self.weight_decay)

    def _updates(self, items: list[tuple[int, Tensor, Tensor]]) -> tuple[list[Tensor], list[Tensor]]:
        counters = self._advance(items)
        state, params = [counters], []
        b1, b2 = self.b1, self.b2
        for i, p, g in items:
            g = g.cast(p.dtype)
            row = counters if p.device == self.device else counters.to(p.device)
            b1_t, b2_t = row[i, 0], row[i, 1]
            if self.weight_decay and not self.decoupled_weight_decay:
                g = g + self.weight_decay * p
            m, v = self.m[i], self.v[i]
            # torch's lerp: the formula it picks by the weight's size
            w = 1.0 - b1
            m = m.assign(m + w * (g - m) if w < 0.5 else g - (g - m) * (1.0 - w))
            v = v.assign(v * b2 + ((1.0 - b2) * g) * g)
            step_size = self._lr_on(p) / (1.0 - b1_t)
            denom = v.sqrt() / (1.0 - b2_t).sqrt() + self.eps
            state += [m, v]
            params += self._write(p, self._decay(p) + (-step_size * m) / denom)
        return state, params


class AdamW(Adam):
    """AdamW, as torch.optim.AdamW: decoupled weight decay, p *= 1 - lr * weight_decay before the Adam step
    (whose gradient is left alone).

    >>> w = Tensor([1.0, -1.0])
    >>> opt = AdamW([w], lr=0.1, weight_decay=0.5)
    >>> _ = (w * w).sum().backward()
    >>> opt.step()
    >>> [round(v, 4) for v in w.tolist()]
    [0.85, -0.85]
    """

    def __init__(
        self,
        params: Iterable[Tensor],
        lr: float | Tensor = 0.001,
        b1: float = 0.9,
        b2: float = 0.999,
        eps: float = 1e-8,
        weight_decay: float = 0.01,
        *,
        betas: tuple[float, float] | None = None,
        fused: bool = False,
    ):
        super().__init__(params, lr, b1, b2, eps, weight_decay, betas=betas, fused=fused)
        self.decoupled_weight_decay = True


def _trust_ratio(num: Tensor, den: Tensor) -> Tensor:
    """num / den where both norms are positive, else 1 (a zero parameter or update keeps the plain step)."""
    return (num > 0).where((den > 0).where(num / den, 1.0), 1.0)


class LAMB(Adam):
    """LAMB (You et al. 2019, "Large Batch Optimization for Deep Learning"), as tinygrad's: Adam's moments with
    bias correction, the update u = m_hat / (sqrt(v_hat) + eps) + weight_decay * p, scaled per parameter by the
    trust ratio ||p|| / ||u|| (1 when either norm is 0): p -= lr * ratio * u. `adam=True` leaves the ratio at 1.

    >>> w = Tensor([3.0, -4.0])
    >>> opt = LAMB([w], lr=0.1)
    >>> _ = (w * w).sum().backward()
    >>> opt.step()
    >>> [round(v, 4) for v in w.tolist()]
    [2.6464, -3.6464]
    """

    def __init__(
        self,
        params: Iterable[Tensor],
        lr: float | Tensor = 0.001,
        b1: float = 0.9,
        b2: float = 0.999,
        eps: float = 1e-6,
        weight_decay: float = 0.0,
        adam: bool = False,
        *,
        betas: tuple[float, float] | None = None,
        fused: bool = False,
    ):
        super().__init__(params, lr, b1, b2, eps, weight_decay, betas=betas, fused=self._no_fused(fused))
        self.adam = bool(adam)

    def _updates(self, items: list[tuple[int, Tensor, Tensor]]) -> tuple[list[Tensor], list[Tensor]]:
        counters = self._advance(items)
        state, params = [counters], []
        for i, p, g in items:
            g = g.cast(p.dtype)
            row = counters if p.device == self.device else counters.to(p.device)
            m = self.m[i].assign(self.m[i] * self.b1 + g * (1.0 - self.b1))
            v = self.v[i].assign(self.v[i] * self.b2 + (g * g) * (1.0 - self.b2))
            m_hat = m / (1.0 - row[i, 0]).cast(p.dtype)
            v_hat = v / (1.0 - row[i, 1]).cast(p.dtype)
            up = m_hat / (v_hat.sqrt() + self.eps) + self.weight_decay * p
            step = self._lr_on(p).cast(p.dtype) * up
            if not self.adam:
                step = step * _trust_ratio(p.square().sum().sqrt(), up.square().sum().sqrt())
            state += [m, v]
            params.append(p.assign(p - step))
        return state, params


class LARS(Optimizer):
    """LARS (You et al. 2017, "Large Batch Training of Convolutional Networks"), as tinygrad's: the local rate
    ratio = tcoef * ||p|| / (||g|| + weight_decay * ||p||) (1 when a norm is 0; `tcoef=0` turns it off), the
    gradient g + weight_decay * p, and momentum b = momentum * b + step. `classic` (the paper's) scales by
    lr * ratio before the momentum, otherwise after it; `nesterov` steps by g + momentum * b.

    >>> w = Tensor([3.0, -4.0])
    >>> opt = LARS([w], lr=1.0, momentum=0.0, weight_decay=0.0, tcoef=0.1)
    >>> _ = (w * w).sum().backward()
    >>> opt.step()
    >>> [round(v, 4) for v in w.tolist()]
    [2.7, -3.6]
    """

    def __init__(
        self,
        params: Iterable[Tensor],
        lr: float | Tensor = 0.001,
        momentum: float = 0.9,
        weight_decay: float = 1e-4,
        nesterov: bool = False,
        classic: bool = True,
        tcoef: float = 0.001,
        fused: bool = False,
    ):
        momentum = _at_least_zero(momentum, "LARS", "momentum")
        weight_decay = _at_least_zero(weight_decay, "LARS", "weight_decay")
        tcoef = _at_least_zero(tcoef, "LARS", "tcoef")
        if nesterov and momentum == 0:
            raise ArgumentError("LARS: nesterov=True needs a momentum > 0")
        super().__init__(params, lr, self._no_fused(fused))
        self.momentum, self.weight_decay, self.nesterov = momentum, weight_decay, bool(nesterov)
        self.classic, self.tcoef = bool(classic), tcoef
        self.b: list[Tensor] = self._zeros_like_params() if momentum else []

    def _updates(self, items: list[tuple[int, Tensor, Tensor]]) -> tuple[list[Tensor], list[Tensor]]:
        state, params = [], []
        for i, p, g in items:
            g = g.cast(p.dtype)
            scale = self._lr_on(p).cast(p.dtype)
            if self.tcoef:
                norm_p, norm_g = p.square().sum().sqrt(), g.square().sum().sqrt()
                scale = scale * _trust_ratio(self.tcoef * norm_p, norm_g + self.weight_decay * norm_p)
            if self.weight_decay:
                g = g + self.weight_decay * p
            if self.classic:
                g = g * scale
            if self.momentum:
                b = self.b[i].assign(self.b[i] * self.momentum + g)
                g = g + self.momentum * b if self.nesterov else b
                state.append(b)
            if not self.classic:
                g = g * scale
            params.append(p.assign(p - g))
        return state, params


def _newton_schulz(g: Tensor, steps: int, coefficients: tuple[float, float, float], eps: float) -> Tensor:
    """The nearest semi-orthogonal matrix to g (rows, cols), approximately: Muon's quintic Newton-Schulz
    iteration X <- a X + (b A + c A A) X with A = X X^T, from X = g / max(||g||, eps) (on the wide orientation)."""
    a, b, c = coefficients
    wide = g.shape[0] <= g.shape[1]
    x = g if wide else g.T
    x = x / x.square().sum().sqrt().maximum(eps)
    for _ in range(steps):
        gram = x @ x.T
        # each iterate is stored once: the next reads it three times, and fusing the whole chain would recompute
        # every earlier iterate in each of them (and, at four steps or more, fails to linearize today)
        x = (a * x + (b * gram + c * (gram @ gram)) @ x).contiguous()
    return x if wide else x.T


class Muon(Optimizer):
    """Muon (Keller Jordan, 2024, "Muon: an optimizer for hidden layers"), with torch.optim.Muon's update rule:
    momentum b = lerp(b, g, 1 - momentum), the step direction lerp(g, b, momentum) (`nesterov`, the default) or
    b, viewed as a matrix (rows, the rest) and orthogonalized by `ns_steps` Newton-Schulz iterations (in the
    parameter's dtype; torch's run in bfloat16), scaled by sqrt(max(1, rows / cols)); then
    p = p * (1 - lr * weight_decay) - lr * direction. Parameters must have at least 2 dims (optimize biases and
    norms with AdamW, as the paper does).

    >>> w = Tensor([[3.0, 0.0], [0.0, -4.0]])
    >>> opt = Muon([w], lr=0.1, momentum=0.0, nesterov=False)
    >>> _ = (w * w).sum().backward()
    >>> opt.step()
    >>> [[round(v, 2) for v in row] for row in w.tolist()]
    [[2.93, 0.0], [0.0, -3.89]]
    """

    def __init__(
        self,
        params: Iterable[Tensor],
        lr: float | Tensor = 0.02,
        momentum: float = 0.95,
        weight_decay: float = 0.0,
        ns_steps: int = 5,
        ns_coefficients: tuple[float, float, float] = (3.4445, -4.7750, 2.0315),
        nesterov: bool = True,
        eps: float = 1e-7,
        fused: bool = False,
    ):
        momentum = _at_least_zero(momentum, "Muon", "momentum")
        weight_decay = _at_least_zero(weight_decay, "Muon", "weight_decay")
        if isinstance(ns_steps, bool) or not isinstance(ns_steps, int) or ns_steps < 0:
            raise ArgumentError(f"Muon: ns_steps must be an int >= 0, got {ns_steps!r}")
        if not isinstance(ns_coefficients, (tuple, list)) or len(ns_coefficients) != 3:
            raise ArgumentError(f"Muon: ns_coefficients must be three numbers (a, b, c), got {ns_coefficients!r}")
        coefficients = tuple(_number(c, "Muon", "ns_coefficients") for c in ns_coefficients)
        eps = _at_least_zero(eps, "Muon", "eps")
        if nesterov and momentum == 0:
            raise ArgumentError("Muon: nesterov=True needs a momentum > 0")
        given = list(params) if isinstance(params, Iterable) and not isinstance(params, Tensor) else params
        if isinstance(given, list):
            for i, p in enumerate(given):
                if isinstance(p, Tensor) and p.requires_grad is not False and dtypes.is_float(p.dtype) and p.ndim < 2:
                    raise ArgumentError(
                        f"Muon: parameter {i} has shape {p.shape}; Muon orthogonalizes matrices (2 or more dims): "
                        "optimize 0-d and 1-d parameters with another optimizer (AdamW)"
                    )
        super().__init__(given, lr, self._no_fused(fused))
        self.momentum, self.weight_decay, self.nesterov = momentum, weight_decay, bool(nesterov)
        self.ns_steps, self.ns_coefficients = ns_steps, (coefficients[0], coefficients[1], coefficients[2])
        self.eps = eps
        self.b: list[Tensor] = self._zeros_like_params() if momentum else []

    def _updates(self, items: list[tuple[int, Tensor, Tensor]]) -> tuple[list[Tensor], list[Tensor]]:
        state, params = [], []
        for i, p, g in items:
            g = g.cast(p.dtype)
            if self.momentum:
                b = self.b[i].assign(self.b[i] + (g - self.b[i]) * (1.0 - self.momentum))
                g = g + (b - g) * self.momentum if self.nesterov else b
                state.append(b)
            rows = p.shape[0]
            cols = p.numel() // rows if rows else 0
            direction = _newton_schulz(g.reshape(rows, cols), self.ns_steps, self.ns_coefficients, self.eps)
            direction = direction.reshape(p.shape) * math.sqrt(max(1.0, rows / max(cols, 1)))
            lr = self._lr_on(p).cast(p.dtype)
            kept = p * (1.0 - lr * self.weight_decay) if self.weight_decay else p
            params.append(p.assign(kept - lr * direction))
        return state, params


class OptimizerGroup:
    """Several optimizers stepped as one, as tinygrad's OptimizerGroup (for example Muon for the matrices and
    AdamW for the rest): `zero_grad()` and `step()` call every optimizer's, and `step()` realizes all their
    updates in one schedule. `group[i]` is the i-th optimizer; `params` all their parameters.

    >>> w, b = Tensor([[1.0, 2.0]]), Tensor([1.0])
    >>> group = OptimizerGroup(SGD([w], lr=0.5), SGD([b], lr=0.25))
    >>> _ = ((w * w).sum() + (b * b).sum()).backward()
    >>> group.step()
    >>> w.tolist(), b.tolist()
    ([[0.0, 0.0]], [0.5])
    """

    def __init__(self, *optimizers: Optimizer):
        if not optimizers:
            raise ArgumentError("OptimizerGroup: needs at least one optimizer")
        for i, o in enumerate(optimizers):
            if not isinstance(o, (Optimizer, OptimizerGroup)):
                raise TypeError(f"OptimizerGroup: argument {i} is a {type(o).__name__}, not an optimizer")
        self.optimizers = list(optimizers)
        self.params: list[Tensor] = [p for o in self.optimizers for p in o.params]
        self.buffers: list[Tensor] = [b for o in self.optimizers for b in o.buffers]
        if len(set(map(id, self.params))) != len(self.params):
            raise ArgumentError("OptimizerGroup: a parameter belongs to more than one of the optimizers")

    def __getitem__(self, i: int) -> Optimizer | OptimizerGroup:
        return self.optimizers[i]

    def __len__(self) -> int:
        return len(self.optimizers)

    def zero_grad(self) -> None:
        """Set every parameter's `.grad` to None, in every optimizer."""
        for o in self.optimizers:
            o.zero_grad()

    def schedule_step(self) -> list[Tensor]:
        """Every optimizer's `schedule_step`, gradients first: the updates of none of them can change a parameter
        before another optimizer's gradient has read it."""
        Tensor.realize(*(t for o in self.optimizers for t in o._grads_to_realize() if isinstance(o, Optimizer)))
        return [t for o in self.optimizers for t in o.schedule_step()]

    def step(self) -> None:
        """Step every optimizer; all the updates run in one schedule."""
        if updates := self.schedule_step():
            Tensor.realize(*updates)


def clip_grad_norm_(parameters: Iterable[Tensor] | Tensor, max_norm: float, norm_type: float = 2.0) -> Tensor:
    """Scale the gradients of `parameters` so that their total norm (the `norm_type` norm of all of them together,
    as if concatenated into one vector) is at most `max_norm`, as torch.nn.utils.clip_grad_norm_: each gradient is
    multiplied by min(1, max_norm / (total + 1e-6)). Parameters without a gradient are skipped. Returns the total
    norm before clipping as a lazy 0-d tensor; nothing is read back to the host, so it works inside TinyJit.
    Each `.grad` is replaced by the scaled (lazy) gradient, which the optimizer's `step()` realizes.

    >>> w = Tensor([3.0, 4.0], requires_grad=True)
    >>> _ = (w * Tensor([3.0, 4.0])).sum().backward()
    >>> clip_grad_norm_([w], max_norm=1.0).item()
    5.0
    >>> [round(v, 4) for v in w.grad.tolist()]
    [0.6, 0.8]
    """
    params = [parameters] if isinstance(parameters, Tensor) else parameters
    if not isinstance(params, Iterable):
        raise TypeError(f"clip_grad_norm_: parameters must be a Tensor or an iterable of Tensors, got {type(params)}")
    params = list(dict.fromkeys(params))  # a tied weight counts once
    for i, p in enumerate(params):
        if not isinstance(p, Tensor):
            raise TypeError(f"clip_grad_norm_: parameter {i} is a {type(p).__name__}, not a Tensor")
    max_norm = _at_least_zero(max_norm, "clip_grad_norm_", "max_norm")
    norm_type = _number(norm_type, "clip_grad_norm_", "norm_type")
    if norm_type <= 0:
        raise ArgumentError(f"clip_grad_norm_: norm_type must be > 0 (or inf), got {norm_type}")
    with_grad = [p for p in params if p.grad is not None]
    if not with_grad:
        return Tensor(0.0)
    for p in with_grad:
        # stored once, then read by the norm and by the update: left lazy, each norm's reduction would recompute the
        # gradient inside it (a weight's gradient is a matmul: one reduction nested in another, on one core)
        p.grad = p.grad.contiguous()
    device = with_grad[0].grad.device
    if math.isinf(norm_type):
        parts = [p.grad.abs().max().cast(dtypes.float32).to(device) for p in with_grad]
        total = Tensor.stack(*parts).max()
    else:
        parts = [(p.grad.abs() ** norm_type if norm_type != 2.0 else p.grad.square()).sum() for p in with_grad]
        total = Tensor.stack(*(t.cast(dtypes.float32).to(device) for t in parts)).sum() ** (1.0 / norm_type)
    scale = (max_norm / (total + 1e-6)).minimum(1.0)
    for p in with_grad:
        p.grad = p.grad * scale.to(p.grad.device).cast(p.grad.dtype)
    return total


class LRScheduler:
    """A learning rate schedule for an optimizer: the step count lives in a buffer (`step_count`, int32, 0-d),
    and `step()` advances it and assigns `lr_at(step_count)` into the optimizer's learning rate buffer with
    kernels, so nothing is read back or compiled anew at each step, and a `step()` inside a TinyJit training step
    is replayed with it. Made, it sets the learning rate of step 0; call `step()` after each `opt.step()`, as in
    torch. `base_lr` is the optimizer's learning rate when the scheduler is made. Subclasses define `lr_at`, the
    learning rate as a Tensor function of the step (a float64 0-d tensor).

    >>> class Halving(LRScheduler):
    ...     def lr_at(self, step: Tensor) -> Tensor:
    ...         return self.base_lr * 0.5**step
    >>> opt = SGD([Tensor([1.0])], lr=1.0)
    >>> sched = Halving(opt)
    >>> sched.step(); sched.step()
    >>> opt.lr.item(), sched.step_count.item()
    (0.25, 2)
    """

    def __init__(self, optimizer: Optimizer):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(self).__name__}: optimizer must be an Optimizer, got {type(optimizer).__name__}")
        self.optimizer = optimizer
        self.base_lr: float = float(optimizer.lr.item())
        self.step_count: Tensor = Tensor(np.array(0, np.int32), device=optimizer.device)
        self._assign_lr()

    def lr_at(self, step: Tensor) -> Tensor:
        """The learning rate at `step` (a float64 0-d tensor), as a tensor expression."""
        raise NotImplementedError(f"{type(self).__name__} does not implement lr_at")

    def _assign_lr(self) -> None:
        self.optimizer.lr = self.lr_at(self.step_count.cast(dtypes.float64))
        Tensor.realize(self.optimizer.lr)

    def step(self) -> None:
        """Advance the step count by one and set the optimizer's learning rate to the new step's."""
        self.step_count.assign(self.step_count + 1)
        self.optimizer.lr = self.lr_at(self.step_count.cast(dtypes.float64))
        Tensor.realize(self.step_count, self.optimizer.lr)


def _positive_int(value: Any, name: str, arg: str, allow_zero: bool = False) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < (0 if allow_zero else 1):
        raise ArgumentError(f"{name}: {arg} must be an int >= {0 if allow_zero else 1}, got {value!r}")
    return int(value)


def _cosine(step: Tensor, steps: int, base: float, low: float) -> Tensor:
    """low + (base - low) * (1 + cos(pi * step / steps)) / 2, with step held in [0, steps]."""
    progress = step.clip(0, steps) / steps
    return low + (base - low) * 0.5 * (1.0 + (progress * math.pi).cos())


class LinearLR(LRScheduler):
    """The base learning rate times a factor that goes linearly from `start_factor` to `end_factor` over
    `total_iters` steps and stays there, as torch.optim.lr_scheduler.LinearLR.

    >>> opt = SGD([Tensor([1.0])], lr=1.0)
    >>> sched = LinearLR(opt, start_factor=0.25, total_iters=3)
    >>> lrs = [opt.lr.item()]
    >>> for _ in range(4):
    ...     sched.step()
    ...     lrs.append(opt.lr.item())
    >>> lrs
    [0.25, 0.5, 0.75, 1.0, 1.0]
    """

    def __init__(
        self, optimizer: Optimizer, start_factor: float = 1.0 / 3, end_factor: float = 1.0, total_iters: int = 5
    ):
        start_factor = _number(start_factor, "LinearLR", "start_factor")
        end_factor = _number(end_factor, "LinearLR", "end_factor")
        if not 0 < start_factor <= 1 or not 0 <= end_factor <= 1:
            raise ArgumentError(
                f"LinearLR: start_factor must be in (0, 1] and end_factor in [0, 1], got {start_factor}, {end_factor}"
            )
        self.start_factor, self.end_factor = start_factor, end_factor
        self.total_iters = _positive_int(total_iters, "LinearLR", "total_iters")
        super().__init__(optimizer)

    def lr_at(self, step: Tensor) -> Tensor:
        progress = step.clip(0, self.total_iters) / self.total_iters
        return self.base_lr * (self.start_factor + (self.end_factor - self.start_factor) * progress)


class CosineAnnealingLR(LRScheduler):
    """Half a cosine from the base learning rate down to `eta_min` over `T_max` steps, as
    torch.optim.lr_scheduler.CosineAnnealingLR: eta_min + (base - eta_min) * (1 + cos(pi * t / T_max)) / 2.
    After `T_max` steps it stays at `eta_min` (torch's climbs back up along the cosine).

    >>> opt = SGD([Tensor([1.0])], lr=1.0)
    >>> sched = CosineAnnealingLR(opt, T_max=2)
    >>> lrs = [opt.lr.item()]
    >>> for _ in range(3):
    ...     sched.step()
    ...     lrs.append(round(opt.lr.item(), 6))
    >>> lrs
    [1.0, 0.5, 0.0, 0.0]
    """

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0):
        self.T_max = _positive_int(T_max, "CosineAnnealingLR", "T_max")
        self.eta_min = _at_least_zero(eta_min, "CosineAnnealingLR", "eta_min")
        super().__init__(optimizer)

    def lr_at(self, step: Tensor) -> Tensor:
        return _cosine(step, self.T_max, self.base_lr, self.eta_min)


class WarmupCosineLR(LRScheduler):
    """Linear warmup, then cosine decay: over the first `warmup_steps` steps the learning rate climbs linearly
    from `start_factor` times the base (1 / warmup_steps when None) towards the base, which it reaches at step
    `warmup_steps`; then it follows half a cosine down to `min_lr` at step `total_steps` and stays there. The same
    values as torch's SequentialLR of LinearLR(start_factor, total_iters=warmup_steps) and
    CosineAnnealingLR(T_max=total_steps - warmup_steps, eta_min=min_lr) with the milestone at `warmup_steps`.

    >>> opt = AdamW([Tensor([1.0])], lr=1.0)
    >>> sched = WarmupCosineLR(opt, warmup_steps=2, total_steps=4)
    >>> lrs = [opt.lr.item()]
    >>> for _ in range(5):
    ...     sched.step()
    ...     lrs.append(round(opt.lr.item(), 6))
    >>> lrs
    [0.5, 0.75, 1.0, 0.5, 0.0, 0.0]
    """

    def __init__(
        self,
        optimizer: Optimizer,
        warmup_steps: int,
        total_steps: int,
        min_lr: float = 0.0,
        start_factor: float | None = None,
    ):
        self.warmup_steps = _positive_int(warmup_steps, "WarmupCosineLR", "warmup_steps", allow_zero=True)
        self.total_steps = _positive_int(total_steps, "WarmupCosineLR", "total_steps")
        if self.total_steps <= self.warmup_steps:
            raise ArgumentError(
                f"WarmupCosineLR: total_steps ({total_steps}) must be greater than warmup_steps ({warmup_steps})"
            )
        self.min_lr = _at_least_zero(min_lr, "WarmupCosineLR", "min_lr")
        if start_factor is None:
            start_factor = 1.0 / max(self.warmup_steps, 1)
        self.start_factor = _number(start_factor, "WarmupCosineLR", "start_factor")
        if not 0 < self.start_factor <= 1:
            raise ArgumentError(f"WarmupCosineLR: start_factor must be in (0, 1], got {start_factor}")
        super().__init__(optimizer)

    def lr_at(self, step: Tensor) -> Tensor:
        decay = _cosine(step - self.warmup_steps, self.total_steps - self.warmup_steps, self.base_lr, self.min_lr)
        if not self.warmup_steps:
            return decay
        warm = self.base_lr * (self.start_factor + (1.0 - self.start_factor) * step / self.warmup_steps)
        return (step < self.warmup_steps).where(warm, decay)
