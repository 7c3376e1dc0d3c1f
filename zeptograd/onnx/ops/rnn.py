"""ONNX ops: recurrent networks (RNN, LSTM, GRU), unrolled over the sequence into one lazy graph.

The input projection `X @ W'` is one matmul over every time step; each step then adds `H @ R'` and applies the
gates. `sequence_lens` masks the steps past each batch entry's length (its state stops there and its outputs are 0;
the reverse direction starts at each entry's own last step).

>>> import numpy as np
>>> from onnx import TensorProto, helper
>>> from zeptograd.onnx import OnnxRunner
>>> info = helper.make_tensor_value_info
>>> node = helper.make_node("RNN", ["X", "W", "R"], ["Y", "Y_h"], hidden_size=1)
>>> graph = helper.make_graph([node], "g", [info("X", 1, [2, 1, 1]), info("W", 1, [1, 1, 1]), info("R", 1, [1, 1, 1])],
...                           [info("Y", 1, None), info("Y_h", 1, None)])
>>> run = OnnxRunner(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)]))
>>> one = np.ones((1, 1, 1), np.float32)
>>> out = run({"X": np.zeros((2, 1, 1), np.float32), "W": one, "R": one})
>>> out["Y_h"].tolist()
[[[0.0]]]
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from zeptograd.onnx.registry import onnx_op
from zeptograd.tensor import Tensor

# name -> (function of x, alpha, beta; default alpha; default beta), alpha/beta None where the function takes none
_ACTIVATIONS: dict[str, tuple[Callable[[Tensor, float, float], Tensor], float | None, float | None]] = {
    "relu": (lambda x, a, b: x.relu(), None, None),
    "tanh": (lambda x, a, b: x.tanh(), None, None),
    "sigmoid": (lambda x, a, b: x.sigmoid(), None, None),
    "affine": (lambda x, a, b: x * a + b, 1.0, 0.0),
    "leakyrelu": (lambda x, a, b: x.leaky_relu(a), 0.01, None),
    "thresholdedrelu": (lambda x, a, b: (x > a).where(x, 0.0), 1.0, None),
    "scaledtanh": (lambda x, a, b: (x * b).tanh() * a, 1.0, 1.0),
    "hardsigmoid": (lambda x, a, b: (x * a + b).clip(0.0, 1.0), 0.2, 0.5),
    "elu": (lambda x, a, b: x.elu(a), 1.0, None),
    "softsign": (lambda x, a, b: x / (x.abs() + 1.0), None, None),
    "softplus": (lambda x, a, b: x.softplus(), None, None),
}
_GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
_DEFAULT_ACTIVATIONS = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"]}


def _activations(
    kind: str, n_dirs: int, names: list[str] | None, alpha: list[float] | None, beta: list[float] | None,
    clip: float | None
) -> list[list[Callable[[Tensor], Tensor]]]:  # fmt: skip
    """The activation functions per direction; alpha and beta values go, in order, to the functions taking them."""
    per_dir = len(_DEFAULT_ACTIVATIONS[kind])
    names = list(names or _DEFAULT_ACTIVATIONS[kind] * n_dirs)
    if len(names) == per_dir and n_dirs == 2:
        names = names * 2
    if len(names) != per_dir * n_dirs:
        raise ValueError(f"{kind} with {n_dirs} direction(s) takes {per_dir * n_dirs} activations, got {names}")
    alphas, betas = list(alpha or []), list(beta or [])
    fns = []
    for name in names:
        if name.lower() not in _ACTIVATIONS:
            raise NotImplementedError(f"activation {name!r} is not supported (known: {sorted(_ACTIVATIONS)})")
        fn, a, b = _ACTIVATIONS[name.lower()]
        a = alphas.pop(0) if a is not None and alphas else a
        b = betas.pop(0) if b is not None and betas else b
        fns.append(_clipped(fn, a, b, clip))
    return [fns[d * per_dir : (d + 1) * per_dir] for d in range(n_dirs)]


def _clipped(fn: Callable[..., Tensor], a: Any, b: Any, clip: float | None) -> Callable[[Tensor], Tensor]:
    if clip is None:
        return lambda x: fn(x, a, b)
    return lambda x: fn(x.clip(-clip, clip), a, b)


def _time_index(lens: Tensor, seq: int) -> Tensor:
    """idx[t, b] = lens[b] - 1 - t (clamped at 0): step t of a reverse pass over each entry's own length."""
    steps = Tensor.arange(seq, device=lens.device).reshape(seq, 1)
    return (lens.reshape(1, -1).cast(steps.dtype) - 1 - steps).clip(0, None)


def _reorder(x: Tensor, idx: Tensor) -> Tensor:
    """x[idx[t, b], b, ...] for a [seq, batch, ...] x."""
    return x.gather(0, idx.reshape(*idx.shape, *([1] * (x.ndim - 2))).expand(x.shape))


def _recurrent(
    kind: str, X: Tensor, W: Tensor, R: Tensor, B: Tensor | None, lens: Tensor | None, h0: Tensor | None,
    c0: Tensor | None, P: Tensor | None, *, hidden_size: int | None, direction: str, layout: int,
    activations: list[str] | None, activation_alpha: list[float] | None, activation_beta: list[float] | None,
    clip: float | None, linear_before_reset: int = 0, input_forget: int = 0,
) -> tuple[Tensor, ...]:  # fmt: skip
    """The shared unrolled recurrence of RNN, GRU and LSTM; returns Y, Y_h (and Y_c for LSTM)."""
    if direction not in ("forward", "reverse", "bidirectional"):
        raise ValueError(f"direction={direction!r} is not one of forward, reverse, bidirectional")
    if layout:
        X = X.transpose(0, 1)
        h0 = None if h0 is None else h0.transpose(0, 1)
        c0 = None if c0 is None else c0.transpose(0, 1)
    seq, batch = X.shape[0], X.shape[1]
    n_dirs, hidden = W.shape[0], R.shape[-1]
    if hidden_size is not None and hidden_size != hidden:
        raise ValueError(f"hidden_size={hidden_size} but R has shape {R.shape}")
    if n_dirs != (2 if direction == "bidirectional" else 1):
        raise ValueError(f"direction={direction!r} but W has {n_dirs} direction(s)")
    gh = _GATES[kind] * hidden
    fns = _activations(kind, n_dirs, activations, activation_alpha, activation_beta, clip)
    idx = None if lens is None else _time_index(lens, seq)
    ys, hs, cs = [], [], []
    for d in range(n_dirs):
        reverse = direction == "reverse" or d == 1
        xp = X @ W[d].transpose(0, 1)
        if B is not None:
            xp = xp + B[d, :gh]
        rb = None if B is None else B[d, gh:]
        if reverse:
            xp = xp.flip(0) if idx is None else _reorder(xp, idx)
        h = Tensor.zeros(batch, hidden, dtype=X.dtype, device=X.device) if h0 is None else h0[d]
        c = Tensor.zeros(batch, hidden, dtype=X.dtype, device=X.device) if c0 is None else c0[d]
        rt = R[d].transpose(0, 1)
        steps = []
        for t in range(seq):
            if kind == "RNN":
                h_new, c_new = _rnn_step(xp[t], h, rt, rb, fns[d]), c
            elif kind == "GRU":
                h_new, c_new = _gru_step(xp[t], h, rt, rb, fns[d], hidden, linear_before_reset), c
            else:
                p = None if P is None else P[d]
                h_new, c_new = _lstm_step(xp[t], h, c, rt, rb, p, fns[d], hidden, input_forget)
            if lens is None:
                h, c, y = h_new, c_new, h_new
            else:
                valid = (lens.reshape(batch, 1) > t).expand(batch, hidden)
                h, c, y = valid.where(h_new, h), valid.where(c_new, c), valid.where(h_new, 0.0)
            steps.append(y)
        y = Tensor.stack(*steps, dim=0) if seq > 1 else steps[0].unsqueeze(0)
        if reverse:
            y = y.flip(0) if idx is None else _reorder(y, idx) * (_valid(lens, seq) if lens is not None else 1)
        ys.append(y)
        hs.append(h)
        cs.append(c)
    Y = Tensor.stack(*ys, dim=1) if n_dirs > 1 else ys[0].unsqueeze(1)
    Y_h = Tensor.stack(*hs, dim=0) if n_dirs > 1 else hs[0].unsqueeze(0)
    Y_c = Tensor.stack(*cs, dim=0) if n_dirs > 1 else cs[0].unsqueeze(0)
    if layout:
        Y, Y_h, Y_c = Y.permute(2, 0, 1, 3), Y_h.transpose(0, 1), Y_c.transpose(0, 1)
    return (Y, Y_h, Y_c) if kind == "LSTM" else (Y, Y_h)


def _valid(lens: Tensor, seq: int) -> Tensor:
    """1 where step t is within entry b's length, else 0: a [seq, batch, 1] mask."""
    steps = Tensor.arange(seq, device=lens.device).reshape(seq, 1, 1)
    return (lens.reshape(1, -1, 1).cast(steps.dtype) > steps).cast(lens.dtype)


def _rnn_step(x: Tensor, h: Tensor, rt: Tensor, rb: Tensor | None, f: list[Any]) -> Tensor:
    """RNN: H = f(x W' + H R' + Wb + Rb)."""
    gates = x + h @ rt
    return f[0](gates if rb is None else gates + rb)


def _gru_step(x: Tensor, h: Tensor, rt: Tensor, rb: Tensor | None, f: list[Any], n: int, lbr: int) -> Tensor:
    """GRU: z, r = f(...); h~ = g(x Wh' + (r * H) Rh' + Rbh) (or r * (H Rh' + Rbh)); H = (1 - z) h~ + z H."""
    hr = h @ rt[:, : 2 * n]
    if rb is not None:
        hr = hr + rb[: 2 * n]
    z = f[0](x[:, :n] + hr[:, :n])
    r = f[0](x[:, n : 2 * n] + hr[:, n:])
    rbh = 0.0 if rb is None else rb[2 * n :]
    if lbr:
        cand = f[1](x[:, 2 * n :] + r * (h @ rt[:, 2 * n :] + rbh))
    else:
        cand = f[1](x[:, 2 * n :] + (r * h) @ rt[:, 2 * n :] + rbh)
    return (1.0 - z) * cand + z * h


def _lstm_step(
    x: Tensor, h: Tensor, c: Tensor, rt: Tensor, rb: Tensor | None, p: Tensor | None, f: list[Any], n: int,
    input_forget: int
) -> tuple[Tensor, Tensor]:  # fmt: skip
    """LSTM (gates i, o, f, c): C = f * C + i * g(c~); H = o * h(C), peepholes P on i, o, f."""
    g = x + h @ rt
    if rb is not None:
        g = g + rb
    gi, go, gf, gc = g[:, :n], g[:, n : 2 * n], g[:, 2 * n : 3 * n], g[:, 3 * n :]
    if p is not None:
        gi, gf = gi + p[:n] * c, gf + p[2 * n :] * c
    i = f[0](gi)
    forget = 1.0 - i if input_forget else f[0](gf)
    c_new = forget * c + i * f[1](gc)
    o = f[0](go if p is None else go + p[n : 2 * n] * c_new)
    return o * f[2](c_new), c_new


@onnx_op("RNN", 14)
def rnn(
    X: Tensor, W: Tensor, R: Tensor, B: Tensor | None = None, sequence_lens: Tensor | None = None,
    initial_h: Tensor | None = None, *, activation_alpha: list[float] | None = None,
    activation_beta: list[float] | None = None, activations: list[str] | None = None, clip: float | None = None,
    direction: str = "forward", hidden_size: int | None = None, layout: int = 0
) -> tuple[Tensor, ...]:  # fmt: skip
    """RNN: H_t = f(X_t W' + H_{t-1} R' + Wb + Rb); outputs Y (every H_t) and Y_h (the last)."""
    return _recurrent(
        "RNN", X, W, R, B, sequence_lens, initial_h, None, None, hidden_size=hidden_size, direction=direction,
        layout=layout, activations=activations, activation_alpha=activation_alpha, activation_beta=activation_beta,
        clip=clip,
    )  # fmt: skip


@onnx_op("GRU", 14)
def gru(
    X: Tensor, W: Tensor, R: Tensor, B: Tensor | None = None, sequence_lens: Tensor | None = None,
    initial_h: Tensor | None = None, *, activation_alpha: list[float] | None = None,
    activation_beta: list[float] | None = None, activations: list[str] | None = None, clip: float | None = None,
    direction: str = "forward", hidden_size: int | None = None, layout: int = 0, linear_before_reset: int = 0
) -> tuple[Tensor, ...]:  # fmt: skip
    """GRU: z, r gates and candidate h~ (gates z, r, h in W, R, B); H_t = (1 - z) h~ + z H_{t-1}."""
    return _recurrent(
        "GRU", X, W, R, B, sequence_lens, initial_h, None, None, hidden_size=hidden_size, direction=direction,
        layout=layout, activations=activations, activation_alpha=activation_alpha, activation_beta=activation_beta,
        clip=clip, linear_before_reset=linear_before_reset,
    )  # fmt: skip


@onnx_op("LSTM", 14)
def lstm(
    X: Tensor, W: Tensor, R: Tensor, B: Tensor | None = None, sequence_lens: Tensor | None = None,
    initial_h: Tensor | None = None, initial_c: Tensor | None = None, P: Tensor | None = None, *,
    activation_alpha: list[float] | None = None, activation_beta: list[float] | None = None,
    activations: list[str] | None = None, clip: float | None = None, direction: str = "forward",
    hidden_size: int | None = None, input_forget: int = 0, layout: int = 0
) -> tuple[Tensor, ...]:  # fmt: skip
    """LSTM: gates i, o, f and cell c~ (in that order in W, R, B); C_t = f C_{t-1} + i c~, H_t = o h(C_t)."""
    return _recurrent(
        "LSTM", X, W, R, B, sequence_lens, initial_h, initial_c, P, hidden_size=hidden_size, direction=direction,
        layout=layout, activations=activations, activation_alpha=activation_alpha, activation_beta=activation_beta,
        clip=clip, input_forget=input_forget,
    )  # fmt: skip


def _variant(fn: Callable[..., Any], without: tuple[str, ...], output_sequence: bool = False) -> Callable[..., Any]:
    """`fn` for an older opset: its attributes less `without`, plus opsets 1-6's `output_sequence` (Y is always
    computed, so it changes nothing). The runner reads the attribute names from the signature."""
    sig = inspect.signature(fn)
    params = [p for p in sig.parameters.values() if p.name not in without]
    if output_sequence:
        params.append(inspect.Parameter("output_sequence", inspect.Parameter.KEYWORD_ONLY, default=0))

    def older(*args: Any, output_sequence: int = 0, **attrs: Any) -> Any:
        return fn(*args, **attrs)

    older.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
    older.__doc__ = f"{fn.__name__} for opsets without {', '.join(without) or 'nothing'}."
    return older


onnx_op("RNN", 7)(_variant(rnn, ("layout",)))
onnx_op("RNN", 1)(_variant(rnn, ("layout",), output_sequence=True))
onnx_op("GRU", 7)(_variant(gru, ("layout",)))
onnx_op("GRU", 3)(_variant(gru, ("layout",), output_sequence=True))
onnx_op("GRU", 1)(_variant(gru, ("layout", "linear_before_reset"), output_sequence=True))
onnx_op("LSTM", 7)(_variant(lstm, ("layout",)))
onnx_op("LSTM", 1)(_variant(lstm, ("layout",), output_sequence=True))
