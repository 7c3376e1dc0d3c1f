"""Check a zeptograd model against the same model in torch, with the weights copied in.

A model of the suite and its torch twin name their parameters alike (torch's `state_dict()` keys are the
zeptograd model's `get_state_dict()` keys), so one copy sets both to the same weights. `check_against_torch` then
compares, within float32 tolerance:

- the forward output on the same input,
- every parameter's gradient of the same loss,
- the losses of `steps` optimizer steps (SGD with momentum or Adam), each step on the same batch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from zeptograd import Tensor
from zeptograd.nn import optim
from zeptograd.nn.state import get_parameters, get_state_dict, load_state_dict

torch = pytest.importorskip("torch")


def cross_entropy(logits: Any, labels: Any) -> Any:
    """Mean cross entropy of (..., classes) logits against integer labels, in either library."""
    if isinstance(logits, Tensor):
        return logits.flatten(0, -2).cross_entropy(labels.flatten())
    return torch.nn.functional.cross_entropy(logits.flatten(0, -2), labels.flatten().long())


def mse(output: Any, target: Any) -> Any:
    """Mean squared error, in either library."""
    return ((output - target) ** 2).mean()


def copy_weights(model: Any, twin: Any) -> None:
    """Load torch module `twin`'s parameters and buffers into `model` under the same names (strict: the key sets
    must be equal)."""
    state = {k: v.detach().cpu().numpy() for k, v in twin.state_dict().items()}
    load_state_dict(model, state)


def _torch_input(x: Any) -> Any:
    if isinstance(x, np.ndarray):
        return torch.from_numpy(x.copy())
    return x


def _zepto_input(x: Any) -> Any:
    if isinstance(x, np.ndarray):
        return Tensor(x)
    return x


def check_against_torch(
    model: Any,
    twin: Any,
    inputs: tuple[np.ndarray, ...],
    loss: Callable[[Any, Any], Any],
    targets: np.ndarray,
    *,
    steps: int = 5,
    optimizer: str = "sgd",
    lr: float = 1e-2,
    rtol: float = 2e-3,
    atol: float = 2e-4,
    grad_atol: float | None = None,
) -> None:
    """Assert that `model` (zeptograd) and `twin` (torch) agree on the forward output, every parameter's gradient
    and `steps` optimizer steps' losses. `loss(output, targets)` is called with each library's tensors
    (`cross_entropy` and `mse` here take either). The weights are copied from `twin` first."""
    copy_weights(model, twin)
    twin.train()
    names = [k for k, _ in twin.named_parameters()]
    zstate = get_state_dict(model)
    zparams = [zstate[k] for k in names]
    assert set(get_parameters(model)) >= set(zparams)

    t_in = tuple(_torch_input(x) for x in inputs)
    z_in = tuple(_zepto_input(x) for x in inputs)
    t_targets, z_targets = _torch_input(targets), _zepto_input(targets)

    # forward and gradients
    for p in zparams:
        p.requires_grad = True
    with Tensor.train():
        out = model(*z_in)
        t_out = twin(*t_in)
        z_loss = loss(out, z_targets)
        t_loss = loss(t_out, t_targets)
        z_loss.backward()  # before the output is read: a realized tensor is a buffer, with no graph to differentiate
        t_loss.backward()
        np.testing.assert_allclose(out.numpy(), t_out.detach().numpy(), rtol=rtol, atol=atol, err_msg="forward")
        for name, zp, (_, tp) in zip(names, zparams, twin.named_parameters()):
            assert zp.grad is not None, f"no gradient for {name}"
            scale = float(np.abs(tp.grad.numpy()).max()) or 1.0
            np.testing.assert_allclose(
                zp.grad.numpy(),
                tp.grad.numpy(),
                rtol=rtol,
                atol=grad_atol if grad_atol is not None else max(atol, 1e-3 * scale),
                err_msg=f"gradient of {name}",
            )

    # optimizer steps from the same weights
    copy_weights(model, twin)
    for p in zparams:
        p.grad = None
    twin.zero_grad()
    if optimizer == "adam":
        z_opt: Any = optim.Adam(zparams, lr=lr)
        t_opt: Any = torch.optim.Adam(twin.parameters(), lr=lr)
    else:
        z_opt = optim.SGD(zparams, lr=lr, momentum=0.9)
        t_opt = torch.optim.SGD(twin.parameters(), lr=lr, momentum=0.9)
    z_losses, t_losses = [], []
    with Tensor.train():
        for _ in range(steps):
            z_opt.zero_grad()
            zl = loss(model(*z_in), z_targets)
            zl.backward()
            z_opt.step()
            z_losses.append(zl.item())
            t_opt.zero_grad()
            tl = loss(twin(*t_in), t_targets)
            tl.backward()
            t_opt.step()
            t_losses.append(tl.item())
    np.testing.assert_allclose(z_losses, t_losses, rtol=max(rtol, 1e-3), atol=atol, err_msg="losses over the steps")
