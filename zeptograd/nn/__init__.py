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

from zeptograd.dtype import DType, dtypes
from zeptograd.helpers import ArgumentError, DTypeError
from zeptograd.mixin.args import int_arg, tensor_dtype
from zeptograd.tensor import Tensor

__all__ = [
    "Linear",
    "Conv1d",
    "Conv2d",
    "ConvTranspose1d",
    "ConvTranspose2d",
    "Conv3d",
    "ConvTranspose3d",
    "BatchNorm",
    "BatchNorm1d",
    "BatchNorm2d",
    "BatchNorm3d",
    "LayerNorm",
    "RMSNorm",
    "GroupNorm",
    "InstanceNorm",
    "InstanceNorm1d",
    "InstanceNorm2d",
    "InstanceNorm3d",
    "LayerNorm2d",
    "LSTMCell",
    "Embedding",
    "Dropout",
    "KVCache",
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
    return Tensor(np.full(shape, value, dtype=np.float32), requires_grad=True)


def _uniform(shape: tuple[int, ...], bound: float) -> Tensor:
    """A parameter drawn uniformly from [-bound, bound), realized into a buffer of its own."""
    return Tensor.uniform(*shape, low=-bound, high=bound).realize().requires_grad_(True)


def _kaiming(shape: tuple[int, ...]) -> Tensor:
    """PyTorch's default weight init for Linear and convolutions: kaiming-uniform with a = sqrt(5), which is
    uniform(+-1/sqrt(fan_in)) with fan_in = prod(shape[1:]) (for a transposed convolution's (in, out/groups,
    *kernel) weight too, as torch computes it)."""
    return Tensor.kaiming_uniform(*shape, a=math.sqrt(5)).realize().requires_grad_(True)


def _factory(layer: str, device: str | None, dtype: Any) -> tuple[str | None, DType | None]:
    """PyTorch's `device=` and `dtype=` layer arguments, checked: parameters are floats."""
    if device is not None and not isinstance(device, str):
        raise TypeError(f"{layer}: device must be a device name, got {device!r}")
    if dtype is None:
        return device, None
    dt = tensor_dtype(dtype, layer)
    if not dtypes.is_float(dt):
        raise DTypeError(f"{layer}: parameters must have a floating-point dtype, got {dt!r}")
    return device, dt


def _placed(t: Tensor | None, device: str | None, dtype: DType | None) -> Tensor | None:
    """A parameter moved to `device` and cast to `dtype` (each when given): a fresh realized buffer, drawn in
    float32 first so a seed gives the same values whatever the dtype."""
    if t is None or ((device is None or t.device == device) and (dtype is None or t.dtype is dtype)):
        return t
    out = t.to(device) if device is not None else t
    out = out.cast(dtype) if dtype is not None else out
    return out.contiguous().realize().requires_grad_(t.requires_grad)


def _place_all(layer: Any, names: Sequence[str], device: str | None, dtype: DType | None) -> None:
    for name in names:
        setattr(layer, name, _placed(getattr(layer, name), device, dtype))


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

    def __init__(
        self, in_features: int, out_features: int, bias: bool = True, device: str | None = None, dtype: Any = None
    ):
        device, dt = _factory("Linear", device, dtype)
        self.in_features = _positive(in_features, "Linear", "in_features")
        self.out_features = _positive(out_features, "Linear", "out_features")
        self.weight = _kaiming((self.out_features, self.in_features))
        bound = 1 / math.sqrt(self.in_features)
        self.bias = _uniform((self.out_features,), bound) if bias else None
        _place_all(self, ("weight", "bias"), device, dt)

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
        device: str | None = None,
        dtype: Any = None,
    ):
        name, nd = type(self).__name__, self.nd
        device, dt = _factory(name, device, dtype)
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
        _place_all(self, ("weight", "bias"), device, dt)

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
        device: str | None = None,
        dtype: Any = None,
    ):
        args = (in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias, padding_mode)
        super().__init__(*args, 0, device, dtype)

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
        device: str | None = None,
        dtype: Any = None,
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
            device,
            dtype,
        )

    def __call__(self, x: Tensor, output_size: Sequence[int] | None = None) -> Tensor:
        """The transposed convolution of `x`; `output_size` (the spatial sizes, or the whole output shape) picks
        one of the sizes a strided convolution maps back from, as PyTorch's: it sets the output padding."""
        x, unbatched = self._input(x)
        out_pad = self.output_padding if output_size is None else self._output_padding(x, output_size)
        out = x.conv_transpose2d(self.weight, self.bias, self.groups, self.stride, self.dilation, self.padding, out_pad)
        return out.squeeze(0) if unbatched else out

    def _output_padding(self, x: Tensor, output_size: Sequence[int]) -> tuple[int, ...]:
        name, nd = type(self).__name__, self.nd
        if not isinstance(output_size, Sequence) or isinstance(output_size, str):
            raise TypeError(f"{name}: output_size must be a sequence of ints, got {output_size!r}")
        sizes = tuple(int_arg(s, name, "output_size") for s in output_size)
        if len(sizes) not in (nd, nd + 1, nd + 2):
            raise ArgumentError(f"{name}: output_size must have {nd} or {nd + 2} elements, got {sizes}")
        sizes = sizes[len(sizes) - nd :]
        padding = (0,) * nd if isinstance(self.padding, str) else self.padding  # never a str when transposed
        smallest = tuple(
            (i - 1) * s - 2 * p + d * (k - 1) + 1
            for i, s, p, d, k in zip(x.shape[2:], self.stride, padding, self.dilation, self.kernel_size)
        )
        pads = tuple(o - m for o, m in zip(sizes, smallest))
        for pad, s, d in zip(pads, self.stride, self.dilation):
            if not 0 <= pad < max(s, d):
                raise ArgumentError(
                    f"{name}: output_size {sizes} is not reachable: each size must be from {smallest} to "
                    f"{tuple(m + max(s, d) - 1 for m, s, d in zip(smallest, self.stride, self.dilation))} for input "
                    f"of shape {x.shape}"
                )
        return pads


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


class Conv3d(_Conv):
    """A 3-D convolution over (N, C, D, H, W) or unbatched (C, D, H, W) inputs, as torch.nn.Conv3d: `weight` is
    (out_channels, in_channels / groups, kd, kh, kw), `bias` (out_channels,).

    >>> Conv3d(2, 4, 3, padding=1)(Tensor.ones(1, 2, 3, 4, 5)).shape
    (1, 4, 3, 4, 5)
    """

    nd = 3


class ConvTranspose3d(_ConvTranspose):
    """The transpose (gradient) of a 3-D convolution, as torch.nn.ConvTranspose3d: `weight` is (in_channels,
    out_channels / groups, kd, kh, kw), `bias` (out_channels,).

    >>> ConvTranspose3d(2, 4, 2, stride=2)(Tensor.ones(1, 2, 2, 3, 1)).shape
    (1, 4, 4, 6, 2)
    """

    nd = 3


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
    when they are read, by the next training call (an assignment to a tensor with one pending lands every
    pending assignment first, in one schedule, so repeated calls never build a growing graph), by
    `Tensor.realize(bn.running_mean, bn.running_var, bn.num_batches_tracked)`, or by an optimizer step given
    them with the parameters.
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
        device: str | None = None,
        dtype: Any = None,
    ):
        name = type(self).__name__
        device, dt = _factory(name, device, dtype)
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
            self.num_batches_tracked = Tensor(np.zeros((), dtype=np.int64), device=device)
        _place_all(self, ("weight", "bias", "running_mean", "running_var"), device, dt)

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
        device: str | None = None,
        dtype: Any = None,
    ):
        name = type(self).__name__
        device, dt = _factory(name, device, dtype)
        self.normalized_shape = _shape(normalized_shape, name, "normalized_shape")
        self.eps = _eps(eps, name)
        self.elementwise_affine = bool(elementwise_affine)
        self.weight = _filled(self.normalized_shape, 1.0) if elementwise_affine else None
        self.bias = _filled(self.normalized_shape, 0.0) if elementwise_affine and bias else None
        _place_all(self, ("weight", "bias"), device, dt)

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

    def __init__(
        self,
        dim: int | Sequence[int],
        eps: float | None = 1e-6,
        elementwise_affine: bool = True,
        device: str | None = None,
        dtype: Any = None,
    ):
        device, dt = _factory("RMSNorm", device, dtype)
        self.normalized_shape = _shape(dim, "RMSNorm", "dim")
        self.eps = None if eps is None else _eps(eps, "RMSNorm")
        self.elementwise_affine = bool(elementwise_affine)
        self.weight = _filled(self.normalized_shape, 1.0) if elementwise_affine else None
        _place_all(self, ("weight",), device, dt)

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

    def __init__(
        self,
        num_groups: int,
        num_channels: int,
        eps: float = 1e-5,
        affine: bool = True,
        device: str | None = None,
        dtype: Any = None,
    ):
        device, dt = _factory("GroupNorm", device, dtype)
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
        _place_all(self, ("weight", "bias"), device, dt)

    def __call__(self, x: Tensor) -> Tensor:
        if isinstance(x, Tensor) and x.ndim < 2:
            raise RuntimeError(f"GroupNorm: expected an (N, C, ...) input, got input of shape {x.shape}")
        _check_features("GroupNorm", x, 1, self.num_channels, "num_channels")
        out = x.reshape(x.shape[0], self.num_groups, -1).layernorm(axis=-1, eps=self.eps).reshape(x.shape)
        shape = (1, self.num_channels) + (1,) * (x.ndim - 2)
        if self.weight is not None:
            out = out * self.weight.reshape(shape)
        return out if self.bias is None else out + self.bias.reshape(shape)


class InstanceNorm:
    """Normalize each channel of each sample of an (N, C, ...) input over its spatial axes (mean 0, biased
    variance 1), then scale and shift per channel by `weight` and `bias` (ones and zeros of (num_features,)), as
    tinygrad's InstanceNorm (affine by default). `InstanceNorm1d/2d/3d` are PyTorch's, not affine by default;
    running statistics (`track_running_stats=True`) are not supported.

    >>> InstanceNorm(1)(Tensor([[[1.0, 3.0]]])).numpy().round(4)
    array([[[-1.,  1.]]], dtype=float32)
    """

    affine_default = True

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float = 0.1,
        affine: bool | None = None,
        track_running_stats: bool = False,
        device: str | None = None,
        dtype: Any = None,
    ):
        name = type(self).__name__
        device, dt = _factory(name, device, dtype)
        if track_running_stats:
            raise ArgumentError(f"{name}: track_running_stats=True is not supported (it normalizes by each sample)")
        self.num_features = _positive(num_features, name, "num_features")
        self.eps = _eps(eps, name)
        self.momentum = momentum
        self.affine = self.affine_default if affine is None else bool(affine)
        c = (self.num_features,)
        self.weight = _filled(c, 1.0) if self.affine else None
        self.bias = _filled(c, 0.0) if self.affine else None
        _place_all(self, ("weight", "bias"), device, dt)

    def __call__(self, x: Tensor) -> Tensor:
        name = type(self).__name__
        if isinstance(x, Tensor) and x.ndim < 2:
            raise RuntimeError(f"{name}: expected an (N, C, ...) input, got input of shape {x.shape}")
        _check_features(name, x, 1, self.num_features, "num_features")
        out = x.reshape(x.shape[0], self.num_features, -1).layernorm(axis=-1, eps=self.eps).reshape(x.shape)
        shape = (1, self.num_features) + (1,) * (x.ndim - 2)
        if self.weight is not None:
            out = out * self.weight.reshape(shape)
        return out if self.bias is None else out + self.bias.reshape(shape)


class InstanceNorm1d(InstanceNorm):
    """torch.nn.InstanceNorm1d: `InstanceNorm` over (N, C, L), not affine unless asked."""

    affine_default = False


class InstanceNorm2d(InstanceNorm1d):
    """torch.nn.InstanceNorm2d: `InstanceNorm` over (N, C, H, W), not affine unless asked."""


class InstanceNorm3d(InstanceNorm1d):
    """torch.nn.InstanceNorm3d: `InstanceNorm` over (N, C, D, H, W), not affine unless asked."""


class LayerNorm2d(LayerNorm):
    """A LayerNorm over the channel axis (1) of an (N, C, H, W) input, as tinygrad's LayerNorm2d (ConvNeXt's
    channels-first LayerNorm): `weight` and `bias` are (C,).

    >>> LayerNorm2d(2)(Tensor([[[[1.0]], [[3.0]]]])).numpy().round(4).reshape(-1)
    array([-1.,  1.], dtype=float32)
    """

    def __call__(self, x: Tensor) -> Tensor:
        if not isinstance(x, Tensor) or x.ndim < 2:
            raise RuntimeError(f"LayerNorm2d: expected an (N, C, ...) input, got {getattr(x, 'shape', x)!r}")
        order = (0, *range(2, x.ndim), 1)  # channels last, normalized, then back
        back = (0, x.ndim - 1, *range(1, x.ndim - 1))
        return super().__call__(x.permute(*order)).permute(*back)


class LSTMCell:
    """One step of an LSTM, as torch.nn.LSTMCell: gates i, f, g, o = x @ weight_ih.T + bias_ih + h @ weight_hh.T +
    bias_hh (each hidden_size wide, in that order); c' = sigmoid(f) * c + sigmoid(i) * tanh(g), h' = sigmoid(o) *
    tanh(c'). `weight_ih` is (4 * hidden_size, input_size), `weight_hh` (4 * hidden_size, hidden_size), all
    uniform(+-1/sqrt(hidden_size)). Called with x (N, input_size) or (input_size,) and (h, c) (zeros when None),
    it returns (h', c').

    >>> cell = LSTMCell(3, 2)
    >>> [t.shape for t in cell(Tensor.ones(4, 3))]
    [(4, 2), (4, 2)]
    """

    def __init__(
        self, input_size: int, hidden_size: int, bias: bool = True, device: str | None = None, dtype: Any = None
    ):
        device, dt = _factory("LSTMCell", device, dtype)
        self.input_size = _positive(input_size, "LSTMCell", "input_size")
        self.hidden_size = _positive(hidden_size, "LSTMCell", "hidden_size")
        bound = 1 / math.sqrt(self.hidden_size)
        self.weight_ih = _uniform((4 * self.hidden_size, self.input_size), bound)
        self.weight_hh = _uniform((4 * self.hidden_size, self.hidden_size), bound)
        self.bias_ih = _uniform((4 * self.hidden_size,), bound) if bias else None
        self.bias_hh = _uniform((4 * self.hidden_size,), bound) if bias else None
        _place_all(self, ("weight_ih", "weight_hh", "bias_ih", "bias_hh"), device, dt)

    def __call__(self, x: Tensor, hc: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor]:
        _check_features("LSTMCell", x, -1, self.input_size, "input_size")
        if x.ndim not in (1, 2):
            raise RuntimeError(f"LSTMCell: expected a 1-D or 2-D input, got input of shape {x.shape}")
        batched = x.ndim == 2
        xb = x if batched else x.unsqueeze(0)
        shape = (xb.shape[0], self.hidden_size)
        if hc is None:
            h = Tensor.zeros(*shape, dtype=self.weight_ih.dtype, device=x.device)
            c = Tensor.zeros(*shape, dtype=self.weight_ih.dtype, device=x.device)
        else:
            if not isinstance(hc, (tuple, list)) or len(hc) != 2:
                raise TypeError(f"LSTMCell: hc must be a tuple (h, c) of Tensors, got {type(hc).__name__}")
            h, c = (t if batched else t.unsqueeze(0) for t in hc)
            for what, t in (("h", h), ("c", c)):
                if t.shape != shape:
                    raise RuntimeError(f"LSTMCell: {what} must have shape {shape[1 - batched :]}, got {t.shape}")
        gates = xb.linear(self.weight_ih.T, self.bias_ih) + h.linear(self.weight_hh.T, self.bias_hh)
        i, f, g, o = gates.chunk(4, dim=1)
        c_new = f.sigmoid() * c + i.sigmoid() * g.tanh()
        h_new = o.sigmoid() * c_new.tanh()
        return (h_new, c_new) if batched else (h_new.squeeze(0), c_new.squeeze(0))


# *** embedding and dropout ***


class Embedding:
    """A lookup table: row `i` of `weight` (vocab_size, embed_size), drawn from normal(0, 1) as in
    torch.nn.Embedding, for each index `i` of an int tensor of any shape (the output adds an axis of
    embed_size). Gradients flow to the rows looked up. An index out of range gives a row of zeros (tensor
    values are not checked). With `padding_idx` (negative counts from the end), that row starts as zeros
    and gets no gradient, as in PyTorch.

    >>> emb = Embedding(5, 3, padding_idx=0)
    >>> emb(Tensor([[0, 4], [2, 2]])).shape, emb.weight[0].tolist()
    ((2, 2, 3), [0.0, 0.0, 0.0])
    """

    def __init__(
        self,
        vocab_size: int,
        embed_size: int,
        padding_idx: int | None = None,
        device: str | None = None,
        dtype: Any = None,
    ):
        device, dt = _factory("Embedding", device, dtype)
        self.vocab_sz = self.num_embeddings = _positive(vocab_size, "Embedding", "vocab_size")
        self.embed_sz = self.embedding_dim = _positive(embed_size, "Embedding", "embed_size")
        self.padding_idx: int | None = None
        if padding_idx is not None:
            p = int_arg(padding_idx, "Embedding", "padding_idx")
            if not -self.vocab_sz <= p < self.vocab_sz:
                raise ArgumentError(f"Embedding: padding_idx must be within num_embeddings ({self.vocab_sz}), got {p}")
            self.padding_idx = p % self.vocab_sz
        weight = np.asarray(Tensor.normal(self.vocab_sz, self.embed_sz).numpy())
        if self.padding_idx is not None:
            weight = weight.copy()
            weight[self.padding_idx] = 0.0
        self.weight = Tensor(weight, device=device, dtype=dt, requires_grad=True)

    def __call__(self, idx: Tensor) -> Tensor:
        if not isinstance(idx, Tensor):
            raise TypeError(f"Embedding: the indices must be a Tensor, got {type(idx).__name__}")
        if not dtypes.is_int(idx.dtype):
            raise TypeError(f"Embedding: the indices must be an integer tensor, got dtype {idx.dtype!r}")
        # a one-hot match against every row, summed over the rows: a gather whose gradient is a scatter-add
        rows = Tensor.arange(self.vocab_sz, dtype=idx.dtype, device=idx.device).reshape(self.vocab_sz, 1)
        hit = idx.reshape(*idx.shape, 1, 1) == rows
        weight = self.weight
        if self.padding_idx is not None:  # the padding row reads the same values but passes no gradient back
            pad = Tensor.arange(self.vocab_sz, device=weight.device).reshape(self.vocab_sz, 1) == self.padding_idx
            weight = pad.where(weight.detach(), weight)
        return hit.where(weight, 0.0)._pick_sum(-2)


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


from zeptograd.nn.kv_cache import KVCache  # noqa: E402 (it builds on the layers above)
