"""Neural-network layers (zeptograd.nn), optimizers (zeptograd.nn.optim) and model state (zeptograd.nn.state).

A layer is a plain Python object: its parameters are Tensor attributes (`weight`, `bias`, and BatchNorm's
`running_mean`, `running_var`, `num_batches_tracked`) and calling it runs the forward pass, as in tinygrad.
Constructor arguments, parameter names, shapes and default initializations are PyTorch's, so a torch
`state_dict` maps onto a model 1:1 by name and shape (`zeptograd.nn.state.load_state_dict`).

>>> from zeptograd import nn
>>> layer = nn.Linear(3, 2)
>>> layer(Tensor.ones(4, 3)).shape, layer.weight.shape, layer.bias.shape
((4, 2), (2, 3), (2,))

Every parameter is a realized buffer of its own (a lazy init would be a shared, hash-consed graph node:
two `Tensor.ones(8)` are one node and would mix their gradients). Training mode (`Tensor.training`,
`with Tensor.train():`) switches Dropout on and makes BatchNorm use and record batch statistics.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from zeptograd.dtype import dtypes
from zeptograd.helpers import ArgumentError
from zeptograd.mixin.args import int_arg
from zeptograd.tensor import Tensor

__all__ = [
    "Linear",
    "Conv1d",
    "Conv2d",
    "ConvTranspose1d",
    "ConvTranspose2d",
    "BatchNorm",
    "BatchNorm1d",
    "BatchNorm2d",
    "BatchNorm3d",
    "LayerNorm",
    "RMSNorm",
    "GroupNorm",
    "Embedding",
    "Dropout",
]

# *** argument checks and parameter creation ***


def _positive(value: Any, layer: str, name: str) -> int:
    v = int_arg(value, layer, name)
    if v <= 0:
        raise ArgumentError(f"{layer}: {name} must be positive, got {v}")
    return v


def _ints(value: Any, n: int, layer: str, name: str, low: int) -> tuple[int, ...]:
    """An int (repeated n times) or a sequence of n ints, each at least `low`."""
    values = (value,) * n if isinstance(value, (int, np.integer)) and not isinstance(value, bool) else value
    if not isinstance(values, Sequence) or isinstance(values, str) or len(values) != n:
        raise ArgumentError(f"{layer}: {name} must be an int or a sequence of {n} ints, got {value!r}")
    out = tuple(int_arg(v, layer, name) for v in values)
    if any(v < low for v in out):
        raise ArgumentError(f"{layer}: {name} must be {'positive' if low == 1 else 'non-negative'}, got {value!r}")
    return out


def _shape(value: Any, layer: str, name: str) -> tuple[int, ...]:
    """A normalized shape: an int or a non-empty sequence of positive ints."""
    values = (value,) if isinstance(value, (int, np.integer)) and not isinstance(value, bool) else value
    if not isinstance(values, Sequence) or isinstance(values, str) or not values:
        raise ArgumentError(f"{layer}: {name} must be an int or a non-empty sequence of ints, got {value!r}")
    return tuple(_positive(v, layer, name) for v in values)


def _eps(value: Any, layer: str) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not value >= 0:
        raise ArgumentError(f"{layer}: eps must be a non-negative number, got {value!r}")
    return float(value)


def _filled(shape: tuple[int, ...], value: float) -> Tensor:
    """A parameter filled with `value`, in a buffer of its own (made on the host: no kernel, no shared node)."""
    return Tensor(np.full(shape, value, dtype=np.float32))


def _uniform(shape: tuple[int, ...], bound: float) -> Tensor:
    """A parameter drawn uniformly from [-bound, bound), realized into a buffer of its own."""
    return Tensor.uniform(*shape, low=-bound, high=bound).realize()


def _kaiming(shape: tuple[int, ...]) -> Tensor:
    """PyTorch's default weight init for Linear and convolutions: kaiming-uniform with a = sqrt(5), which is
    uniform(+-1/sqrt(fan_in)) with fan_in = prod(shape[1:]) (for a transposed convolution's (in, out/groups,
    *kernel) weight too, as torch computes it)."""
    return Tensor.kaiming_uniform(*shape, a=math.sqrt(5)).realize()


def _check_features(layer: str, x: Tensor, axis: int, size: int, what: str) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"{layer}: the input must be a Tensor, got {type(x).__name__}")
    if x.ndim < (-axis if axis < 0 else axis + 1):
        raise RuntimeError(f"{layer}: the input of shape {x.shape} has too few dimensions (needs axis {axis})")
    if x.shape[axis] != size:
        raise RuntimeError(f"{layer}: expected {what}={size} on axis {axis} of the input, got input of shape {x.shape}")


# *** Linear ***


class Linear:
    """`x @ weight.T + bias` over the last axis of `x`, as torch.nn.Linear: `weight` is (out_features,
    in_features) and `bias` (out_features,), both uniform(+-1/sqrt(in_features)) at first.

    >>> layer = Linear(3, 2, bias=False)
    >>> layer(Tensor.zeros(5, 3)).shape, layer.bias is None
    ((5, 2), True)
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True):
        self.in_features = _positive(in_features, "Linear", "in_features")
        self.out_features = _positive(out_features, "Linear", "out_features")
        self.weight = _kaiming((self.out_features, self.in_features))
        bound = 1 / math.sqrt(self.in_features)
        self.bias = _uniform((self.out_features,), bound) if bias else None

    def __call__(self, x: Tensor) -> Tensor:
        _check_features("Linear", x, -1, self.in_features, "in_features")
        # Tensor.linear takes tinygrad's (in, out) weight: the transpose is a view, no copy
        return x.linear(self.weight.T, self.bias)


# *** convolutions ***

_PAD_MODES = {"zeros": "constant", "reflect": "reflect", "replicate": "replicate", "circular": "circular"}


class _ConvNd:
    """Shared by the convolutions: argument checks, parameters and the input check."""

    nd = 0
    transposed = False

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | Sequence[int],
        stride: int | Sequence[int],
        padding: int | Sequence[int] | str,
        dilation: int | Sequence[int],
        groups: int,
        bias: bool,
        padding_mode: str,
        output_padding: int | Sequence[int] = 0,
    ):
        name, nd = type(self).__name__, self.nd
        self.in_channels = _positive(in_channels, name, "in_channels")
        self.out_channels = _positive(out_channels, name, "out_channels")
        self.kernel_size = _ints(kernel_size, nd, name, "kernel_size", 1)
        self.stride = _ints(stride, nd, name, "stride", 1)
        self.dilation = _ints(dilation, nd, name, "dilation", 1)
        self.groups = _positive(groups, name, "groups")
        for what, channels in (("in_channels", self.in_channels), ("out_channels", self.out_channels)):
            if channels % self.groups:
                raise ArgumentError(f"{name}: {what} ({channels}) must be divisible by groups ({self.groups})")
        if padding_mode not in _PAD_MODES or (self.transposed and padding_mode != "zeros"):
            allowed = "'zeros'" if self.transposed else ", ".join(repr(m) for m in _PAD_MODES)
            raise ArgumentError(f"{name}: padding_mode must be one of {allowed}, got {padding_mode!r}")
        self.padding_mode = padding_mode
        if isinstance(padding, str):
            if self.transposed or padding not in ("same", "valid"):
                allowed = (
                    "an int or a sequence of ints"
                    if self.transposed
                    else "an int, a sequence of ints, 'same' or 'valid'"
                )
                raise ArgumentError(f"{name}: padding must be {allowed}, got {padding!r}")
            if padding == "same" and any(s != 1 for s in self.stride):
                raise ArgumentError(f"{name}: padding='same' is not supported for strided convolutions")
        self.padding: tuple[int, ...] | str = (
            padding if isinstance(padding, str) else _ints(padding, nd, name, "padding", 0)
        )
        self.output_padding = _ints(output_padding, nd, name, "output_padding", 0)
        for op, s, d in zip(self.output_padding, self.stride, self.dilation):
            if op >= s and op >= d:
                raise ArgumentError(
                    f"{name}: output_padding {self.output_padding} must be smaller than either stride "
                    f"{self.stride} or dilation {self.dilation}"
                )
        if self.transposed:
            shape = (self.in_channels, self.out_channels // self.groups, *self.kernel_size)
        else:
            shape = (self.out_channels, self.in_channels // self.groups, *self.kernel_size)
        self.weight = _kaiming(shape)
        bound = 1 / math.sqrt(math.prod(shape[1:]))
        self.bias = _uniform((self.out_channels,), bound) if bias else None

    def _input(self, x: Tensor) -> tuple[Tensor, bool]:
        """The input as a batch (an unbatched (C, *spatial) input gets a batch axis), and whether it had none."""
        name, nd = type(self).__name__, self.nd
        if not isinstance(x, Tensor):
            raise TypeError(f"{name}: the input must be a Tensor, got {type(x).__name__}")
        if x.ndim not in (nd + 1, nd + 2):
            raise RuntimeError(
                f"{name}: expected a {nd + 1}-D (unbatched) or {nd + 2}-D (batched) input, got input of shape {x.shape}"
            )
        if x.shape[-nd - 1] != self.in_channels:
            raise RuntimeError(
                f"{name}: expected input with {self.in_channels} channels (weight of shape {self.weight.shape}, "
                f"groups={self.groups}), got input of shape {x.shape}"
            )
        return (x.unsqueeze(0), True) if x.ndim == nd + 1 else (x, False)

    def _padded(self, x: Tensor) -> tuple[Tensor, tuple[int, ...] | str]:
        """The input and the padding left for conv2d: a padding mode other than zeros pads the input here (as
        torch does), with 'same' putting the odd element of a total on the right."""
        if self.padding_mode == "zeros" or self.padding == "valid":
            return x, self.padding
        if self.padding == "same":
            total = [d * (k - 1) for d, k in zip(self.dilation, self.kernel_size)]
            pairs = [(t // 2, t - t // 2) for t in total]
        else:
            pairs = [(p, p) for p in self.padding]
        return x.pad((None, None, *pairs), mode=_PAD_MODES[self.padding_mode]), 0


class _Conv(_ConvNd):
    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | Sequence[int],
        stride: int | Sequence[int] = 1,
        padding: int | Sequence[int] | str = 0,
        dilation: int | Sequence[int] = 1,
        groups: int = 1,
        bias: bool = True,
        padding_mode: str = "zeros",
    ):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias, padding_mode)

    def __call__(self, x: Tensor) -> Tensor:
        x, unbatched = self._input(x)
        x, padding = self._padded(x)
        out = x.conv2d(self.weight, self.bias, self.groups, self.stride, self.dilation, padding)
        return out.squeeze(0) if unbatched else out


class Conv1d(_Conv):
    """A 1-D convolution over (N, C, L) or unbatched (C, L) inputs, as torch.nn.Conv1d: `weight` is
    (out_channels, in_channels / groups, kernel_size), `bias` (out_channels,), both uniform(+-1/sqrt(fan_in)).
    `padding` is ints, 'same' or 'valid'; `padding_mode` 'zeros', 'reflect', 'replicate' or 'circular'.

    >>> Conv1d(2, 4, 3, padding=1)(Tensor.ones(1, 2, 5)).shape
    (1, 4, 5)
    """

    nd = 1


class Conv2d(_Conv):
    """A 2-D convolution over (N, C, H, W) or unbatched (C, H, W) inputs, as torch.nn.Conv2d: `weight` is
    (out_channels, in_channels / groups, kh, kw), `bias` (out_channels,), both uniform(+-1/sqrt(fan_in)).
    `padding` is ints, 'same' or 'valid'; `padding_mode` 'zeros', 'reflect', 'replicate' or 'circular'.

    >>> Conv2d(2, 4, (3, 2), stride=2)(Tensor.ones(1, 2, 5, 5)).shape
    (1, 4, 2, 2)
    """

    nd = 2


class _ConvTranspose(_ConvNd):
    transposed = True

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | Sequence[int],
        stride: int | Sequence[int] = 1,
        padding: int | Sequence[int] = 0,
        output_padding: int | Sequence[int] = 0,
        groups: int = 1,
        bias: bool = True,
        dilation: int | Sequence[int] = 1,
        padding_mode: str = "zeros",
    ):
        super().__init__(
            in_channels,
            out_channels,
            kernel_size,
            stride,
            padding,
            dilation,
            groups,
            bias,
            padding_mode,
            output_padding,
        )

    def __call__(self, x: Tensor) -> Tensor:
        x, unbatched = self._input(x)
        out = x.conv_transpose2d(
            self.weight, self.bias, self.groups, self.stride, self.dilation, self.padding, self.output_padding
        )
        return out.squeeze(0) if unbatched else out


class ConvTranspose1d(_ConvTranspose):
    """The transpose (gradient) of a 1-D convolution, as torch.nn.ConvTranspose1d: `weight` is (in_channels,
    out_channels / groups, kernel_size), `bias` (out_channels,).

    >>> ConvTranspose1d(2, 4, 3, stride=2)(Tensor.ones(1, 2, 5)).shape
    (1, 4, 11)
    """

    nd = 1


class ConvTranspose2d(_ConvTranspose):
    """The transpose (gradient) of a 2-D convolution, as torch.nn.ConvTranspose2d: `weight` is (in_channels,
    out_channels / groups, kh, kw), `bias` (out_channels,).

    >>> ConvTranspose2d(2, 4, 3, stride=2, padding=1, output_padding=1)(Tensor.ones(1, 2, 3, 3)).shape
    (1, 4, 6, 6)
    """

    nd = 2


# *** normalization ***


class BatchNorm:
    """Batch normalization over axis 1 of an (N, C) or (N, C, ...) input, as torch.nn.BatchNorm1d/2d/3d
    (`BatchNorm1d`, `BatchNorm2d` and `BatchNorm3d` are this class).

    In training mode (`Tensor.training`) it normalizes with the batch's mean and biased variance, and
    updates `running_mean` and `running_var` (with the unbiased variance, as torch) by
    `(1 - momentum) * running + momentum * batch` (momentum None: the cumulative average) and adds one to
    `num_batches_tracked`. In eval mode it normalizes with the running statistics. Without
    `track_running_stats` there are none (the attributes are None) and it always uses the batch's.

    The updates are assignments, lazy like every op: they land when the running statistics are realized:
    when they are read, by the next training call (an assignment realizes a pending one on the same
    tensor first, so repeated calls never build a growing graph), by `Tensor.realize(bn.running_mean,
    bn.running_var, bn.num_batches_tracked)`, or by an optimizer step given them with the parameters.
    Realizing them with the training step's tensors reuses the batch statistics the step computed.

    >>> bn = BatchNorm(2)
    >>> with Tensor.train():
    ...     y = bn(Tensor([[1.0, 2.0], [3.0, 6.0]]))
    >>> y.numpy().round(3).tolist(), bn.running_mean.numpy(), bn.num_batches_tracked.item()
    ([[-1.0, -1.0], [1.0, 1.0]], array([0.2, 0.4], dtype=float32), 1)
    """

    def __init__(
        self,
        sz: int,
        eps: float = 1e-5,
        affine: bool = True,
        track_running_stats: bool = True,
        momentum: float | None = 0.1,
    ):
        name = type(self).__name__
        self.num_features = _positive(sz, name, "num_features")
        self.eps = _eps(eps, name)
        if momentum is not None and (
            not isinstance(momentum, (int, float)) or isinstance(momentum, bool) or not 0 <= momentum <= 1
        ):
            raise ArgumentError(f"{name}: momentum must be None or a number between 0 and 1, got {momentum!r}")
        self.momentum = momentum
        self.affine, self.track_running_stats = bool(affine), bool(track_running_stats)
        c = (self.num_features,)
        self.weight: Tensor | None = _filled(c, 1.0) if affine else None
        self.bias: Tensor | None = _filled(c, 0.0) if affine else None
        self.running_mean: Tensor | None = None
        self.running_var: Tensor | None = None
        self.num_batches_tracked: Tensor | None = None
        if track_running_stats:
            # buffers, not parameters: backward() leaves their .grad alone
            self.running_mean = _filled(c, 0.0).requires_grad_(False)
            self.running_var = _filled(c, 1.0).requires_grad_(False)
            self.num_batches_tracked = Tensor(np.zeros((), dtype=np.int64))

    def __call__(self, x: Tensor) -> Tensor:
        name = type(self).__name__
        if not isinstance(x, Tensor):
            raise TypeError(f"{name}: the input must be a Tensor, got {type(x).__name__}")
        if x.ndim < 2:
            raise ArgumentError(f"{name}: expected an (N, C) or (N, C, ...) input, got input of shape {x.shape}")
        _check_features(name, x, 1, self.num_features, "num_features")
        axes = (0, *range(2, x.ndim))
        shape = (1, self.num_features) + (1,) * (x.ndim - 2)
        if Tensor.training or self.running_mean is None or self.running_var is None:
            n = x.numel() // self.num_features
            if n <= 1:
                raise ArgumentError(
                    f"{name}: expected more than 1 value per channel when training, got input of shape {x.shape}"
                )
            mean = x.mean(axis=axes)
            var = (x - mean.reshape(shape)).square().mean(axis=axes)
            if Tensor.training and self.running_mean is not None:
                self._update(mean.detach(), var.detach(), n)
        else:
            mean, var = self.running_mean, self.running_var
        return x.batchnorm(self.weight, self.bias, mean, (var + self.eps).rsqrt())

    def _update(self, mean: Tensor, var: Tensor, n: int) -> None:
        assert self.running_mean is not None and self.running_var is not None and self.num_batches_tracked is not None
        dt = self.running_mean.dtype
        if self.momentum is None:  # the cumulative average over the batches seen, as torch
            m: Tensor | float = (self.num_batches_tracked + 1).cast(dt).reciprocal()
        else:
            m = self.momentum
        self.running_mean.assign(self.running_mean * (1 - m) + mean.cast(dt) * m)
        self.running_var.assign(self.running_var * (1 - m) + var.cast(dt) * (m * n / (n - 1)))
        self.num_batches_tracked.assign(self.num_batches_tracked + 1)


BatchNorm1d = BatchNorm2d = BatchNorm3d = BatchNorm


def _check_normalized(x: Tensor, normalized_shape: tuple[int, ...], layer: str) -> int:
    """Check that x ends in `normalized_shape`; return how many axes that is."""
    k = len(normalized_shape)
    if not isinstance(x, Tensor):
        raise TypeError(f"{layer}: the input must be a Tensor, got {type(x).__name__}")
    if x.shape[x.ndim - k :] != normalized_shape or x.ndim < k:
        raise RuntimeError(
            f"{layer}: normalized_shape={normalized_shape} expects an input of shape (*, "
            f"{', '.join(map(str, normalized_shape))}), got input of shape {x.shape}"
        )
    return k


class LayerNorm:
    """Normalize over the last `len(normalized_shape)` axes (mean 0, variance 1, biased) then scale by
    `weight` and shift by `bias` (ones and zeros of `normalized_shape` at first), as torch.nn.LayerNorm.

    >>> LayerNorm(2)(Tensor([[1.0, 3.0]])).numpy().round(4)
    array([[-1.,  1.]], dtype=float32)
    """

    def __init__(
        self,
        normalized_shape: int | Sequence[int],
        eps: float = 1e-5,
        elementwise_affine: bool = True,
        bias: bool = True,
    ):
        self.normalized_shape = _shape(normalized_shape, "LayerNorm", "normalized_shape")
        self.eps = _eps(eps, "LayerNorm")
        self.elementwise_affine = bool(elementwise_affine)
        self.weight = _filled(self.normalized_shape, 1.0) if elementwise_affine else None
        self.bias = _filled(self.normalized_shape, 0.0) if elementwise_affine and bias else None

    def __call__(self, x: Tensor) -> Tensor:
        k = _check_normalized(x, self.normalized_shape, "LayerNorm")
        out = x.layernorm(axis=tuple(range(-k, 0)), eps=self.eps)
        if self.weight is not None:
            out = out * self.weight
        return out if self.bias is None else out + self.bias


# the gap from 1.0 to the next float (torch.finfo(dtype).eps): RMSNorm's eps when it is None
_MACHINE_EPS = {
    dtypes.fp8e4m3: 2.0**-3,
    dtypes.fp8e5m2: 2.0**-2,
    dtypes.float16: 2.0**-10,
    dtypes.bfloat16: 2.0**-7,
    dtypes.float32: 2.0**-23,
    dtypes.float64: 2.0**-52,
}


class RMSNorm:
    """`x / sqrt(mean(x**2) + eps) * weight` over the last `len(dim)` axes (`dim` an int or a shape; `weight`
    ones of it at first), as torch.nn.RMSNorm; `eps=None` is the machine epsilon of the input's dtype (torch's).

    >>> RMSNorm(2, eps=0.0)(Tensor([[3.0, 4.0]])).numpy().round(4)
    array([[0.8485, 1.1314]], dtype=float32)
    """

    def __init__(self, dim: int | Sequence[int], eps: float | None = 1e-6, elementwise_affine: bool = True):
        self.normalized_shape = _shape(dim, "RMSNorm", "dim")
        self.eps = None if eps is None else _eps(eps, "RMSNorm")
        self.elementwise_affine = bool(elementwise_affine)
        self.weight = _filled(self.normalized_shape, 1.0) if elementwise_affine else None

    def __call__(self, x: Tensor) -> Tensor:
        k = _check_normalized(x, self.normalized_shape, "RMSNorm")
        eps = self.eps if self.eps is not None else _MACHINE_EPS[x._float().dtype]
        out = x.rms_norm(axis=tuple(range(-k, 0)), eps=eps)
        return out if self.weight is None else out * self.weight


class GroupNorm:
    """Split the channels (axis 1) of an (N, C, ...) input into `num_groups` groups and normalize each group
    of each sample (mean 0, biased variance 1), then scale and shift per channel by `weight` and `bias`
    (ones and zeros of (num_channels,) at first), as torch.nn.GroupNorm.

    >>> GroupNorm(1, 2)(Tensor([[[1.0], [3.0]]])).numpy().round(4)
    array([[[-1.],
            [ 1.]]], dtype=float32)
    """

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True):
        self.num_groups = _positive(num_groups, "GroupNorm", "num_groups")
        self.num_channels = _positive(num_channels, "GroupNorm", "num_channels")
        if self.num_channels % self.num_groups:
            raise ArgumentError(
                f"GroupNorm: num_channels ({self.num_channels}) must be divisible by num_groups ({self.num_groups})"
            )
        self.eps = _eps(eps, "GroupNorm")
        self.affine = bool(affine)
        self.weight = _filled((self.num_channels,), 1.0) if affine else None
        self.bias = _filled((self.num_channels,), 0.0) if affine else None

    def __call__(self, x: Tensor) -> Tensor:
        if isinstance(x, Tensor) and x.ndim < 2:
            raise RuntimeError(f"GroupNorm: expected an (N, C, ...) input, got input of shape {x.shape}")
        _check_features("GroupNorm", x, 1, self.num_channels, "num_channels")
        out = x.reshape(x.shape[0], self.num_groups, -1).layernorm(axis=-1, eps=self.eps).reshape(x.shape)
        shape = (1, self.num_channels) + (1,) * (x.ndim - 2)
        if self.weight is not None:
            out = out * self.weight.reshape(shape)
        return out if self.bias is None else out + self.bias.reshape(shape)


# *** embedding and dropout ***


class Embedding:
    """A lookup table: row `i` of `weight` (vocab_size, embed_size), drawn from normal(0, 1) as in
    torch.nn.Embedding, for each index `i` of an int tensor of any shape (the output adds an axis of
    embed_size). Gradients flow to the rows looked up. An index out of range gives a row of zeros (tensor
    values are not checked).

    >>> emb = Embedding(5, 3)
    >>> emb(Tensor([[0, 4], [2, 2]])).shape
    (2, 2, 3)
    """

    def __init__(self, vocab_size: int, embed_size: int):
        self.vocab_sz = self.num_embeddings = _positive(vocab_size, "Embedding", "vocab_size")
        self.embed_sz = self.embedding_dim = _positive(embed_size, "Embedding", "embed_size")
        self.weight = Tensor.normal(self.vocab_sz, self.embed_sz).realize()

    def __call__(self, idx: Tensor) -> Tensor:
        if not isinstance(idx, Tensor):
            raise TypeError(f"Embedding: the indices must be a Tensor, got {type(idx).__name__}")
        if not dtypes.is_int(idx.dtype):
            raise TypeError(f"Embedding: the indices must be an integer tensor, got dtype {idx.dtype!r}")
        # a one-hot match against every row, summed over the rows: a gather whose gradient is a scatter-add
        rows = Tensor.arange(self.vocab_sz, dtype=idx.dtype, device=idx.device).reshape(self.vocab_sz, 1)
        hit = idx.reshape(*idx.shape, 1, 1) == rows
        return hit.where(self.weight, 0.0).sum(axis=-2)


class Dropout:
    """While `Tensor.training` is True, zero each element with probability `p` and scale the others by
    1 / (1 - p); in eval mode the input itself, as torch.nn.Dropout.

    >>> x = Tensor.ones(4)
    >>> Dropout(0.5)(x) is x
    True
    """

    def __init__(self, p: float = 0.5):
        if not isinstance(p, (int, float)) or isinstance(p, bool) or not 0 <= p <= 1:
            raise ArgumentError(f"Dropout: probability has to be between 0 and 1, got {p!r}")
        self.p = float(p)

    def __call__(self, x: Tensor) -> Tensor:
        if not isinstance(x, Tensor):
            raise TypeError(f"Dropout: the input must be a Tensor, got {type(x).__name__}")
        return x.dropout(self.p)
