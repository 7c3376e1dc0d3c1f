"""ONNX ops: convolutions, pooling, normalization, softmax, matrix products, dropout and losses.

Convolutions and pools go through Tensor.conv2d / conv_transpose2d / max_pool2d / avg_pool2d (any number of
spatial dims), so an exported CNN gets the compiler's convolution plans; ONNX's padding forms (explicit begin/end
pads, auto_pad, ceil_mode) become an explicit pad in front of them where PyTorch's forms cannot say it.

>>> import numpy as np
>>> from onnx import TensorProto, helper
>>> from zeptograd.onnx.runner import OnnxRunner
>>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4])
>>> y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 2])
>>> node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2], strides=[2])
>>> model = helper.make_model(helper.make_graph([node], "g", [x], [y]))
>>> OnnxRunner(model)({"x": np.array([[[1.0, 3.0, 2.0, 0.0]]], np.float32)})["y"].tolist()
[[[3.0, 2.0]]]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from zeptograd.dtype import dtypes
from zeptograd.onnx.dtypes import onnx_dtype
from zeptograd.onnx.registry import onnx_op
from zeptograd.tensor import Tensor

Pairs = list[tuple[int, int]]

# *** window geometry shared by convolutions and pools ***


def _geometry(
    spatial: Sequence[int],
    kernel: Sequence[int],
    strides: Sequence[int] | None,
    dilations: Sequence[int] | None,
    pads: Sequence[int] | None,
    auto_pad: str,
    ceil_mode: int = 0,
) -> tuple[tuple[int, ...], tuple[int, ...], Pairs, Pairs]:
    """Strides, dilations, the (begin, end) pads per spatial dim, and those pads plus what ceil_mode adds at the
    end (so every output window lies inside the padded input)."""
    n = len(kernel)
    s = tuple(strides) if strides else (1,) * n
    d = tuple(dilations) if dilations else (1,) * n
    if len(s) != n or len(d) != n:
        raise ValueError(f"strides {s} and dilations {d} need one entry per spatial dim of kernel {tuple(kernel)}")
    spans = [di * (k - 1) + 1 for k, di in zip(kernel, d)]
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        pairs = []
        for i, si, span in zip(spatial, s, spans):
            total = max(0, (-(-i // si) - 1) * si + span - i)
            small, big = total // 2, total - total // 2
            pairs.append((small, big) if auto_pad == "SAME_UPPER" else (big, small))
    elif auto_pad == "VALID":
        pairs = [(0, 0)] * n
    elif auto_pad == "NOTSET":
        p = list(pads) if pads else [0] * (2 * n)
        if len(p) != 2 * n:
            raise ValueError(f"pads {p} needs {2 * n} entries (begin and end per spatial dim)")
        pairs = [(p[i], p[i + n]) for i in range(n)]
    else:
        raise ValueError(f"auto_pad must be NOTSET, SAME_UPPER, SAME_LOWER or VALID, got {auto_pad!r}")
    ceil_pairs = []
    for i, si, span, (b, e) in zip(spatial, s, spans, pairs):
        if span > i + b + e:
            raise ValueError(
                f"the kernel {tuple(kernel)} (dilations {d}) is bigger than the padded input {tuple(spatial)}"
            )
        extra = 0
        if ceil_mode:
            o = -(-(i + b + e - span) // si) + 1
            if (o - 1) * si >= i + b:  # the last window must start inside the input or its begin padding
                o -= 1
            extra = max(0, (o - 1) * si + span - (i + b + e))
        ceil_pairs.append((b, e + extra))
    return s, d, pairs, ceil_pairs


def _torch_pads(pairs: Pairs) -> list[int]:
    """(begin, end) per dim -> PyTorch's flat padding (last dim first)."""
    return [p for b, e in reversed(pairs) for p in (b, e)]


def _pad_spatial(x: Tensor, pairs: Pairs, value: Any = 0.0) -> Tensor:
    if all(b == 0 and e == 0 for b, e in pairs):
        return x
    return x.pad([(0, 0)] * (x.ndim - len(pairs)) + list(pairs), value=value)


def _channel_shape(t: Tensor, ndim: int) -> Tensor:
    """A per-channel (C,) tensor shaped to broadcast along axis 1 of an ndim-d (N, C, ...) tensor."""
    return t.reshape(1, -1, *(1,) * (ndim - 2))


# *** convolutions ***


@onnx_op("Conv")
def conv(
    x: Tensor,
    w: Tensor,
    b: Tensor | None = None,
    *,
    auto_pad: str = "NOTSET",
    dilations: list[int] | None = None,
    group: int = 1,
    kernel_shape: list[int] | None = None,
    pads: list[int] | None = None,
    strides: list[int] | None = None,
) -> Tensor:
    """Conv: cross-correlation of X (N, C, *spatial) with W (M, C / group, *kernel), plus B."""
    kernel = w.shape[2:]
    if kernel_shape and tuple(kernel_shape) != kernel:
        raise ValueError(f"kernel_shape {kernel_shape} does not match the weight's {w.shape}")
    s, d, pairs, _ = _geometry(x.shape[2:], kernel, strides, dilations, pads, auto_pad)
    return x.conv2d(w, b, groups=group, stride=s, dilation=d, padding=_torch_pads(pairs))


@onnx_op("ConvTranspose")
def conv_transpose(
    x: Tensor,
    w: Tensor,
    b: Tensor | None = None,
    *,
    auto_pad: str = "NOTSET",
    dilations: list[int] | None = None,
    group: int = 1,
    kernel_shape: list[int] | None = None,
    output_padding: list[int] | None = None,
    output_shape: list[int] | None = None,
    pads: list[int] | None = None,
    strides: list[int] | None = None,
) -> Tensor:
    """ConvTranspose: the transposed convolution of X with W (C, M / group, *kernel), cropped by pads."""
    kernel, spatial = w.shape[2:], x.shape[2:]
    n = len(kernel)
    s = tuple(strides) if strides else (1,) * n
    d = tuple(dilations) if dilations else (1,) * n
    op = tuple(output_padding) if output_padding else (0,) * n
    full = [si * (i - 1) + di * (k - 1) + 1 for i, si, di, k in zip(spatial, s, d, kernel)]
    if output_shape or auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        outs = list(output_shape)[-n:] if output_shape else [i * si for i, si in zip(spatial, s)]
        pairs = []
        for f, o, out in zip(full, op, outs):
            total = f + o - out
            small, big = total // 2, total - total // 2
            pairs.append((small, big) if auto_pad == "SAME_UPPER" else (big, small))
    elif auto_pad in ("NOTSET", "VALID"):
        p = list(pads) if pads and auto_pad == "NOTSET" else [0] * (2 * n)
        pairs = [(p[i], p[i + n]) for i in range(n)]
        outs = [f + o - bb - e for f, o, (bb, e) in zip(full, op, pairs)]
    else:
        raise ValueError(f"auto_pad must be NOTSET, SAME_UPPER, SAME_LOWER or VALID, got {auto_pad!r}")
    if all(bb == e >= 0 for bb, e in pairs) and all(o < max(si, di) for o, si, di in zip(op, s, d)):
        pad_ = [bb for bb, _ in pairs]
        return x.conv_transpose2d(w, b, groups=group, stride=s, dilation=d, padding=pad_, output_padding=op)
    # asymmetric pads, or an output_shape past what output_padding may say: the whole result, cropped or padded
    y = x.conv_transpose2d(w, None, groups=group, stride=s, dilation=d)
    y = y.pad([(0, 0), (0, 0)] + [(-bb, out - (f - bb)) for (bb, _), out, f in zip(pairs, outs, full)])
    return y if b is None else y + _channel_shape(b, y.ndim)


def _int_conv(x: Tensor, x_zp: Tensor | None, w: Tensor, w_zp: Tensor | None, **attrs: Any) -> Tensor:
    """The int32 convolution of (x - x_zero_point) with (w - w_zero_point, per output channel or one)."""
    xi, wi = x.cast(dtypes.int32), w.cast(dtypes.int32)
    if x_zp is not None:
        xi = xi - x_zp.cast(dtypes.int32).reshape(())
    if w_zp is not None:
        zp = w_zp.cast(dtypes.int32)
        wi = wi - (zp.reshape(-1, *(1,) * (w.ndim - 1)) if zp.numel() > 1 else zp.reshape(()))
    s, d, pairs, _ = _geometry(
        x.shape[2:], w.shape[2:], attrs["strides"], attrs["dilations"], attrs["pads"], attrs["auto_pad"]
    )
    return xi.conv2d(wi, groups=attrs["group"], stride=s, dilation=d, padding=_torch_pads(pairs), dtype=dtypes.int32)


@onnx_op("ConvInteger", 10)
def conv_integer(
    x: Tensor,
    w: Tensor,
    x_zero_point: Tensor | None = None,
    w_zero_point: Tensor | None = None,
    *,
    auto_pad: str = "NOTSET",
    dilations: list[int] | None = None,
    group: int = 1,
    kernel_shape: list[int] | None = None,
    pads: list[int] | None = None,
    strides: list[int] | None = None,
) -> Tensor:
    """ConvInteger: int32 Conv of (x - x_zero_point) and (w - w_zero_point)."""
    return _int_conv(
        x,
        x_zero_point,
        w,
        w_zero_point,
        auto_pad=auto_pad,
        dilations=dilations,
        group=group,
        pads=pads,
        strides=strides,
    )


@onnx_op("QLinearConv", 10)
def qlinear_conv(
    x: Tensor,
    x_scale: Tensor,
    x_zero_point: Tensor | None,
    w: Tensor,
    w_scale: Tensor,
    w_zero_point: Tensor | None,
    y_scale: Tensor,
    y_zero_point: Tensor | None = None,
    b: Tensor | None = None,
    *,
    auto_pad: str = "NOTSET",
    dilations: list[int] | None = None,
    group: int = 1,
    kernel_shape: list[int] | None = None,
    pads: list[int] | None = None,
    strides: list[int] | None = None,
) -> Tensor:
    """QLinearConv: saturate(round((conv(x - xz, w - wz) + B) * xs * ws / ys) + yz)."""
    acc = _int_conv(
        x,
        x_zero_point,
        w,
        w_zero_point,
        auto_pad=auto_pad,
        dilations=dilations,
        group=group,
        pads=pads,
        strides=strides,
    )
    if b is not None:
        acc = acc + _channel_shape(b.cast(dtypes.int32), acc.ndim)
    ws = w_scale.cast(dtypes.float32)
    ws = _channel_shape(ws, acc.ndim) if ws.numel() > 1 else ws.reshape(())
    r = acc.cast(dtypes.float32) * (x_scale.cast(dtypes.float32).reshape(()) * ws / y_scale.reshape(()))
    out = x.dtype if y_zero_point is None else y_zero_point.dtype
    if y_zero_point is not None:
        r = r + y_zero_point.cast(dtypes.float32).reshape(())
    lo, hi = (-128, 127) if out is dtypes.int8 else (0, 255)
    return r.clip(lo, hi).round().cast(out)


# *** pooling ***


def _pool_windows(x: Tensor, ceil_pairs: Pairs, value: Any) -> Tensor:
    return _pad_spatial(x, ceil_pairs, value)


def _tap_count(spatial: Sequence[int], kernel, s, d, pairs: Pairs, ceil_pairs: Pairs, with_pad: bool) -> np.ndarray:
    """How many taps of each output window land on the input (and on the asked-for padding, `with_pad`)."""
    counts = None
    for i, k, si, di, (b, e), (_, ce) in zip(spatial, kernel, s, d, pairs, ceil_pairs):
        outs = (i + b + ce - (di * (k - 1) + 1)) // si + 1
        pos = np.arange(outs)[:, None] * si + np.arange(k)[None, :] * di - b
        lo, hi = (-b, i + e) if with_pad else (0, i)
        c = ((pos >= lo) & (pos < hi)).sum(1)
        counts = c if counts is None else np.multiply.outer(counts, c)
    return np.asarray(counts, dtype=np.float64)


def _window_sum(x: Tensor, kernel, s, d, ceil_pairs: Pairs) -> Tensor:
    """The sum over each window of the zero-padded x."""
    return _pool_windows(x, ceil_pairs, 0.0).avg_pool2d(tuple(kernel), stride=s, dilation=d) * math.prod(kernel)


def _pool_attrs(x: Tensor, kernel_shape: list[int] | None, strides, dilations, pads, auto_pad, ceil_mode):
    if not kernel_shape:
        raise ValueError("kernel_shape is required")
    if len(kernel_shape) != x.ndim - 2:
        raise ValueError(f"kernel_shape {kernel_shape} needs one entry per spatial dim of input {x.shape}")
    return _geometry(x.shape[2:], kernel_shape, strides, dilations, pads, auto_pad, ceil_mode)


@onnx_op("AveragePool")
def average_pool(
    x: Tensor,
    *,
    auto_pad: str = "NOTSET",
    ceil_mode: int = 0,
    count_include_pad: int = 0,
    dilations: list[int] | None = None,
    kernel_shape: list[int] | None = None,
    pads: list[int] | None = None,
    strides: list[int] | None = None,
) -> Tensor:
    """AveragePool: the mean over each window (the padding counted when count_include_pad)."""
    s, d, pairs, ceil_pairs = _pool_attrs(x, kernel_shape, strides, dilations, pads, auto_pad, ceil_mode)
    if all(b == e == 0 for b, e in ceil_pairs):
        return x.avg_pool2d(tuple(kernel_shape), stride=s, dilation=d)
    total = _window_sum(x, kernel_shape, s, d, ceil_pairs)
    count = _tap_count(x.shape[2:], kernel_shape, s, d, pairs, ceil_pairs, bool(count_include_pad))
    return total / Tensor(count.astype(np.float32), device=x.device).cast(total.dtype)


@onnx_op("LpPool")
def lp_pool(
    x: Tensor,
    *,
    auto_pad: str = "NOTSET",
    ceil_mode: int = 0,
    dilations: list[int] | None = None,
    kernel_shape: list[int] | None = None,
    p: float = 2,
    pads: list[int] | None = None,
    strides: list[int] | None = None,
) -> Tensor:
    """LpPool: (sum over each window of |x|^p)^(1/p), the padding zeros."""
    s, d, _, ceil_pairs = _pool_attrs(x, kernel_shape, strides, dilations, pads, auto_pad, ceil_mode)
    powered = x * x if p == 2 else x.abs() ** p
    total = _window_sum(powered, kernel_shape, s, d, ceil_pairs)
    return total.sqrt() if p == 2 else total ** (1.0 / p)


def _max_pool(x: Tensor, kernel: list[int], s, d, pairs: Pairs, ceil_pairs: Pairs, indices: bool, order: int):
    low = -math.inf if dtypes.is_float(x.dtype) else dtypes.min(x.dtype)
    if all(b == e and 2 * b <= k for (b, e), k in zip(ceil_pairs, kernel)):
        padded, pool_pad = x, [b for b, _ in ceil_pairs]
    else:  # PyTorch's padding is symmetric and at most half the kernel: pad in front instead
        padded, pool_pad = _pad_spatial(x, ceil_pairs, low), [0] * len(kernel)
    if not indices:
        return padded.max_pool2d(tuple(kernel), stride=s, dilation=d, padding=pool_pad)
    values, flat = padded.max_pool2d(tuple(kernel), stride=s, dilation=d, padding=pool_pad, return_indices=True)
    # the index in the (padded) plane -> per-axis input coordinates -> ONNX's index over the whole tensor
    spatial, n = x.shape[2:], len(kernel)
    plane = [i + (b + e if not any(pool_pad) else 0) for i, (b, e) in zip(spatial, ceil_pairs)]
    flat = flat.cast(dtypes.int64)
    out = None
    for a in range(n):
        inner = math.prod(plane[a + 1 :])
        coord = (flat // inner) % plane[a] - (ceil_pairs[a][0] if not any(pool_pad) else 0)
        mul = math.prod(spatial[a + 1 :]) if order == 0 else math.prod(spatial[:a])
        term = coord * mul
        out = term if out is None else out + term
    base = Tensor.arange(x.shape[0] * x.shape[1], dtype=dtypes.int64, device=x.device) * math.prod(spatial)
    return values, out + base.reshape(x.shape[0], x.shape[1], *(1,) * n)


@onnx_op("MaxPool")
def max_pool(
    x: Tensor,
    *,
    auto_pad: str = "NOTSET",
    ceil_mode: int = 0,
    dilations: list[int] | None = None,
    kernel_shape: list[int] | None = None,
    pads: list[int] | None = None,
    storage_order: int = 0,
    strides: list[int] | None = None,
    ctx: Any,
) -> Any:
    """MaxPool: the maximum over each window; Indices: its position in the flattened input (row or column major)."""
    s, d, pairs, ceil_pairs = _pool_attrs(x, kernel_shape, strides, dilations, pads, auto_pad, ceil_mode)
    return _max_pool(x, kernel_shape, s, d, pairs, ceil_pairs, ctx.n_outputs > 1, storage_order)


@onnx_op("MaxUnpool", 9, static=(2,))
def max_unpool(
    x: Tensor,
    indices: Tensor,
    output_shape: list[int] | None = None,
    *,
    kernel_shape: list[int] | None = None,
    pads: list[int] | None = None,
    strides: list[int] | None = None,
) -> Tensor:
    """MaxUnpool: zeros with each value of X written at its index (MaxPool's Indices) in the flattened output."""
    n = x.ndim - 2
    if not kernel_shape or len(kernel_shape) != n:
        raise ValueError(f"kernel_shape {kernel_shape} needs one entry per spatial dim of input {x.shape}")
    s = tuple(strides) if strides else (1,) * n
    p = list(pads) if pads else [0] * (2 * n)
    default = [(i - 1) * si + k - p[a] - p[a + n] for a, (i, si, k) in enumerate(zip(x.shape[2:], s, kernel_shape))]
    out = list(output_shape)[-n:] if output_shape else default
    # an index is into the default output's plane (where MaxPool took it from): its coordinates carry over to a
    # larger output_shape unchanged
    planes = Tensor.arange(x.shape[0] * x.shape[1], dtype=dtypes.int64, device=x.device) * math.prod(default)
    local = indices.cast(dtypes.int64) - planes.reshape(x.shape[0], x.shape[1], *(1,) * n)
    if out != default:
        flat = None
        for a in range(n):
            coord = (local // math.prod(default[a + 1 :])) % default[a]
            term = coord * math.prod(out[a + 1 :])
            flat = term if flat is None else flat + term
        local = flat
    total, m = math.prod(out), math.prod(x.shape[2:])
    flat_x, flat_i = x.reshape(*x.shape[:2], m), local.reshape(*x.shape[:2], m)
    hit = flat_i.unsqueeze(-1) == Tensor.arange(total, dtype=dtypes.int64, device=x.device)
    placed = hit.where(flat_x.unsqueeze(-1), 0).sum(-2).cast(x.dtype)
    return placed.reshape(*x.shape[:2], *out)


@onnx_op("GlobalAveragePool")
def global_average_pool(x: Tensor) -> Tensor:
    """GlobalAveragePool: the mean over all spatial dims, kept as size 1."""
    return x.mean(tuple(range(2, x.ndim)), keepdim=True)


@onnx_op("GlobalMaxPool")
def global_max_pool(x: Tensor) -> Tensor:
    """GlobalMaxPool: the maximum over all spatial dims, kept as size 1."""
    return x.max(tuple(range(2, x.ndim)), keepdim=True)


@onnx_op("GlobalLpPool")
def global_lp_pool(x: Tensor, *, p: float = 2) -> Tensor:
    """GlobalLpPool: (sum over all spatial dims of |x|^p)^(1/p)."""
    return (x.abs() ** p).sum(tuple(range(2, x.ndim)), keepdim=True) ** (1.0 / p)


# *** normalization ***


@onnx_op("BatchNormalization")
def batch_normalization(
    x: Tensor,
    scale: Tensor,
    b: Tensor,
    mean: Tensor,
    var: Tensor,
    *,
    consumed_inputs: list[int] | None = None,
    epsilon: float = 1e-5,
    is_test: int = 0,
    momentum: float = 0.9,
    spatial: int = 1,
    ctx: Any,
) -> Any:
    """BatchNormalization (inference): (x - mean) / sqrt(var + epsilon) * scale + B, per channel."""
    if ctx.n_outputs > 1:
        raise ValueError("the training outputs (mean, var, saved_mean, saved_var) before opset 14 are not supported")
    if scale.ndim > 1:  # spatial=0: one statistic per activation (C, *spatial)
        return (x - mean) / (var + epsilon).sqrt() * scale + b
    return x.batchnorm(scale, b, mean, (var + epsilon).rsqrt())


@onnx_op("BatchNormalization", 14)
def batch_normalization_14(
    x: Tensor,
    scale: Tensor,
    b: Tensor,
    mean: Tensor,
    var: Tensor,
    *,
    epsilon: float = 1e-5,
    momentum: float = 0.9,
    training_mode: int = 0,
) -> Any:
    """BatchNormalization: with training_mode, normalized by the batch's statistics, and the running statistics
    moved toward them (running * momentum + batch * (1 - momentum))."""
    if not training_mode:
        return x.batchnorm(scale, b, mean, (var + epsilon).rsqrt())
    axes = (0, *range(2, x.ndim))
    bm, bv = x.mean(axes), x.var(axes, correction=0)
    y = x.batchnorm(scale, b, bm, (bv + epsilon).rsqrt())
    return y, mean * momentum + bm * (1 - momentum), var * momentum + bv * (1 - momentum)


def _stash(x: Tensor, stash_type: int) -> Tensor:
    return x.cast(onnx_dtype(stash_type, "stash_type"))


@onnx_op("LayerNormalization", 17)
def layer_normalization(
    x: Tensor,
    scale: Tensor,
    b: Tensor | None = None,
    *,
    axis: int = -1,
    epsilon: float = 1e-5,
    stash_type: int = 1,
    ctx: Any,
) -> Any:
    """LayerNormalization: (x - mean) / sqrt(var + epsilon) * scale + B over the axes from `axis` on; also the
    mean and 1 / std (kept dims)."""
    axes = tuple(range(axis % x.ndim, x.ndim))
    xs = _stash(x, stash_type)
    y = xs.layernorm(axes, epsilon).cast(x.dtype) * scale
    if b is not None:
        y = y + b
    if ctx.n_outputs == 1:
        return y
    m = xs.mean(axes, keepdim=True)
    inv = (((xs - m) * (xs - m)).mean(axes, keepdim=True) + epsilon).rsqrt()
    return y, m.cast(x.dtype), inv.cast(x.dtype)


@onnx_op("RMSNormalization", 23)
def rms_normalization(
    x: Tensor, scale: Tensor, *, axis: int = -1, epsilon: float = 1e-5, stash_type: int = 1
) -> Tensor:
    """RMSNormalization: x / sqrt(mean(x^2) + epsilon) * scale over the axes from `axis` on."""
    axes = tuple(range(axis % x.ndim, x.ndim))
    return _stash(x, stash_type).rms_norm(axes, epsilon).cast(x.dtype) * scale


def _group_norm(x: Tensor, groups: int, epsilon: float, stash_type: int) -> Tensor:
    n, c = x.shape[:2]
    if groups <= 0 or c % groups:
        raise ValueError(f"num_groups {groups} must divide the {c} channels of input {x.shape}")
    g = _stash(x, stash_type).reshape(n, groups, -1).layernorm(-1, epsilon)
    return g.reshape(x.shape).cast(x.dtype)


@onnx_op("GroupNormalization", 18)
def group_normalization_18(x: Tensor, scale: Tensor, bias: Tensor, *, epsilon: float = 1e-5, num_groups: int = 0):
    """GroupNormalization-18: normalized over each group of channels, then scale and bias per group."""
    y = _group_norm(x, num_groups, epsilon, 1)
    per = x.shape[1] // num_groups
    sc, bi = scale.repeat_interleave(per), bias.repeat_interleave(per)
    return y * _channel_shape(sc, x.ndim) + _channel_shape(bi, x.ndim)


@onnx_op("GroupNormalization", 21)
def group_normalization(
    x: Tensor, scale: Tensor, bias: Tensor, *, epsilon: float = 1e-5, num_groups: int = 0, stash_type: int = 1
) -> Tensor:
    """GroupNormalization: normalized over each group of channels, then scale and bias per channel."""
    y = _group_norm(x, num_groups, epsilon, stash_type)
    return y * _channel_shape(scale, x.ndim) + _channel_shape(bias, x.ndim)


@onnx_op("InstanceNormalization")
def instance_normalization(
    x: Tensor, scale: Tensor, b: Tensor, *, consumed_inputs: list[int] | None = None, epsilon: float = 1e-5
) -> Tensor:
    """InstanceNormalization: normalized over the spatial dims of each (sample, channel), then scale + B."""
    y = x.layernorm(tuple(range(2, x.ndim)), epsilon)
    return y * _channel_shape(scale, x.ndim) + _channel_shape(b, x.ndim)


@onnx_op("LRN")
def lrn(x: Tensor, *, alpha: float = 1e-4, beta: float = 0.75, bias: float = 1.0, size: int = 0) -> Tensor:
    """LRN: x / (bias + alpha / size * sum of x^2 over `size` neighbouring channels)^beta."""
    if size <= 0:
        raise ValueError(f"size must be positive, got {size}")
    c = x.shape[1]
    lo = (size - 1) // 2
    sq = (x * x).pad([(0, 0), (lo, size - 1 - lo)] + [(0, 0)] * (x.ndim - 2))
    total = sq[:, 0:c]
    for k in range(1, size):
        total = total + sq[:, k : k + c]
    return x / (bias + alpha / size * total) ** beta


@onnx_op("LpNormalization")
def lp_normalization(x: Tensor, *, axis: int = -1, p: int = 2) -> Tensor:
    """LpNormalization: x / ||x||_p along `axis` (0 where the norm is 0)."""
    if p == 1:
        norm = x.abs().sum(axis, keepdim=True)
    elif p == 2:
        norm = (x * x).sum(axis, keepdim=True).sqrt()
    else:
        raise ValueError(f"p must be 1 or 2, got {p}")
    return (norm == 0).where(0.0, x / norm).cast(x.dtype)


@onnx_op("MeanVarianceNormalization")
def mean_variance_normalization(x: Tensor, *, axes: list[int] | None = None) -> Tensor:
    """MeanVarianceNormalization: (x - mean) / sqrt(var) over `axes` (0, 2, 3 by default)."""
    ax = tuple(a % x.ndim for a in (axes if axes is not None else [0, 2, 3]))
    y = x - x.mean(ax, keepdim=True)
    return y / ((y * y).mean(ax, keepdim=True).sqrt() + 1e-9)


# *** softmax and friends ***


def _coerced(x: Tensor, axis: int, fn: Any) -> Tensor:
    """Before opset 13: x as 2-d (the dims before `axis`, the rest), `fn` over axis 1, back to x's shape."""
    a = axis % x.ndim if x.ndim else 0
    flat = x.reshape(math.prod(x.shape[:a]), math.prod(x.shape[a:]))
    return fn(flat, 1).reshape(x.shape)


def _hardmax(x: Tensor, axis: int) -> Tensor:
    first = x.argmax(axis, keepdim=True)
    positions = Tensor.arange(x.shape[axis], device=x.device).reshape(
        *(x.shape[axis] if i == axis % x.ndim else 1 for i in range(x.ndim))
    )
    return (positions == first).cast(x.dtype)


@onnx_op("Softmax")
def softmax_1(x: Tensor, *, axis: int = 1) -> Tensor:
    """Softmax (before opset 13): over all the dims from `axis` on, as one."""
    return _coerced(x, axis, lambda t, a: t.softmax(a))


@onnx_op("Softmax", 13)
def softmax(x: Tensor, *, axis: int = -1) -> Tensor:
    """Softmax: exp(x) / sum(exp(x)) along `axis`."""
    return x.softmax(axis)


@onnx_op("LogSoftmax")
def log_softmax_1(x: Tensor, *, axis: int = 1) -> Tensor:
    """LogSoftmax (before opset 13): over all the dims from `axis` on, as one."""
    return _coerced(x, axis, lambda t, a: t.log_softmax(a))


@onnx_op("LogSoftmax", 13)
def log_softmax(x: Tensor, *, axis: int = -1) -> Tensor:
    """LogSoftmax: x - log(sum(exp(x))) along `axis`."""
    return x.log_softmax(axis)


@onnx_op("Hardmax")
def hardmax_1(x: Tensor, *, axis: int = 1) -> Tensor:
    """Hardmax (before opset 13): 1 at the first maximum over all the dims from `axis` on, as one."""
    return _coerced(x, axis, _hardmax)


@onnx_op("Hardmax", 13)
def hardmax(x: Tensor, *, axis: int = -1) -> Tensor:
    """Hardmax: 1 at the first maximum along `axis`, 0 elsewhere."""
    return _hardmax(x, axis)


# *** matrix products ***


@onnx_op("Gemm")
def gemm(
    a: Tensor,
    b: Tensor,
    c: Tensor | None = None,
    *,
    alpha: float = 1.0,
    beta: float = 1.0,
    broadcast: int = 0,
    transA: int = 0,
    transB: int = 0,
) -> Tensor:
    """Gemm: alpha * A' @ B' + beta * C (A', B' transposed by transA, transB; C broadcast)."""
    y = (a.T if transA else a) @ (b.T if transB else b)
    if alpha != 1.0:
        y = (y * alpha).cast(a.dtype)
    if c is not None:
        y = y + (c if beta == 1.0 else (c * beta).cast(c.dtype))
    return y


@onnx_op("MatMul")
def matmul(a: Tensor, b: Tensor) -> Tensor:
    """MatMul: numpy.matmul (batched, 1-d operands promoted and dropped)."""
    return a @ b


@onnx_op("Einsum", 12)
def einsum(*operands: Tensor, equation: str = "") -> Tensor:
    """Einsum: Einstein summation over the operands as `equation` says."""
    return Tensor.einsum(equation.replace(" ", ""), *operands)


# *** dropout ***


@onnx_op("Dropout")
def dropout_1(
    x: Tensor, *, consumed_inputs: list[int] | None = None, is_test: int = 0, ratio: float = 0.5, ctx: Any
) -> Any:
    """Dropout (before opset 12): the identity at inference; the mask is all ones (bool from opset 10)."""
    if ctx.n_outputs == 1:
        return x
    mask = Tensor.ones(*x.shape, dtype=dtypes.bool if ctx.opset >= 10 else x.dtype, device=x.device)
    return x, mask


@onnx_op("Dropout", 12, static=(1, 2))
def dropout(
    x: Tensor, ratio: float | None = None, training_mode: bool | None = None, *, seed: int | None = None, ctx: Any
) -> Any:
    """Dropout: the identity unless training_mode, where each element is zeroed with probability `ratio` and the
    rest scaled by 1 / (1 - ratio); the mask says which were kept."""
    r = 0.5 if ratio is None else float(ratio)
    if not training_mode or r == 0:
        mask = Tensor.ones(*x.shape, dtype=dtypes.bool, device=x.device)
    else:
        # `seed` is accepted, but the mask comes from zeptograd's generator (Tensor.manual_seed seeds it)
        mask = Tensor.rand(*x.shape, device=x.device) >= r
        x = mask.where(x / (1 - r), 0).cast(x.dtype)
    return x if ctx.n_outputs == 1 else (x, mask)


# *** losses ***


def _nll(logp: Tensor, target: Tensor, weight: Tensor | None, ignore_index: int | None, reduction: str) -> Tensor:
    """-logp[n, target[n, ...], ...] * weight[target], ignored targets 0; mean divides by the weights' sum."""
    if logp.ndim < 2:
        raise ValueError(f"input must be (N, C, ...), got {logp.shape}")
    c = logp.shape[1]
    classes = Tensor.arange(c, dtype=target.dtype, device=logp.device).reshape(1, c, *(1,) * (logp.ndim - 2))
    hit = target.unsqueeze(1) == classes
    loss = -hit.where(logp, 0).sum(1)
    w = None
    if weight is not None:
        # an out-of-range target takes the nearest class's weight (it is ignored, or the model is wrong)
        clipped = target.clip(0, c - 1).unsqueeze(1) == classes
        w = clipped.where(weight.reshape(1, c, *(1,) * (logp.ndim - 2)), 0).sum(1)
    if ignore_index is not None:
        keep = target != ignore_index
        w = keep.cast(logp.dtype) if w is None else keep.where(w, 0)
    if w is not None:
        loss = loss * w
    if reduction == "none":
        return loss.cast(logp.dtype)
    if reduction == "sum":
        return loss.sum().cast(logp.dtype)
    if reduction != "mean":
        raise ValueError(f"reduction must be 'none', 'sum' or 'mean', got {reduction!r}")
    return (loss.sum() / w.sum() if w is not None else loss.mean()).cast(logp.dtype)


@onnx_op("NegativeLogLikelihoodLoss", 12)
def negative_log_likelihood_loss(
    x: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    *,
    ignore_index: int | None = None,
    reduction: str = "mean",
) -> Tensor:
    """NegativeLogLikelihoodLoss: -x[n, target[n, ...], ...] * weight[target], reduced."""
    return _nll(x, target, weight, ignore_index, reduction)


@onnx_op("SoftmaxCrossEntropyLoss", 12)
def softmax_cross_entropy_loss(
    scores: Tensor,
    labels: Tensor,
    weight: Tensor | None = None,
    *,
    ignore_index: int | None = None,
    reduction: str = "mean",
    ctx: Any,
) -> Any:
    """SoftmaxCrossEntropyLoss: NegativeLogLikelihoodLoss of log_softmax(scores) over axis 1; also log_prob."""
    logp = scores.log_softmax(1)
    loss = _nll(logp, labels, weight, ignore_index, reduction)
    return loss if ctx.n_outputs == 1 else (loss, logp)


# *** resizing ***


def _source_positions(mode: str, out: int, size: int, scale: float, roi: tuple[float, float] | None) -> np.ndarray:
    """Where each output position along an axis samples the input (coordinate_transformation_mode)."""
    y = np.arange(out, dtype=np.float64)
    width = scale * size  # the output size before rounding down
    if mode == "align_corners":
        return np.zeros(out) if width == 1 else y * (size - 1) / (width - 1)
    if mode == "asymmetric":
        return y / scale
    if mode == "tf_crop_and_resize":
        lo, hi = roi if roi is not None else (0.0, 1.0)
        x = np.full(out, (hi - lo) * (size - 1) / 2) if width == 1 else y * (hi - lo) * (size - 1) / (width - 1)
        return x + lo * (size - 1)
    if mode == "pytorch_half_pixel":
        return np.full(out, -0.5) if width == 1 else (y + 0.5) / scale - 0.5
    if mode == "half_pixel":
        return (y + 0.5) / scale - 0.5
    if mode == "half_pixel_symmetric":
        # the sampled region's center stays the input's center when the output size was rounded down
        offset = size / 2 * (1 - out / width)
        return offset + (y + 0.5) / scale - 0.5
    raise ValueError(f"coordinate_transformation_mode {mode!r} is not supported")


def _tap_weights(kind: str, ratio: np.ndarray, scale: float, cubic_a: float, nearest: str, antialias: bool):
    """Each output position's weights on its neighbouring inputs; `ratio` is its distance past the input to its
    left, in (0, 1] (1 on an input)."""
    if kind == "nearest":
        on = ratio == 1.0
        if nearest == "round_prefer_floor":
            right = ratio > 0.5
        elif nearest == "round_prefer_ceil":
            right = ratio >= 0.5
        elif nearest == "floor":
            right = np.zeros_like(ratio, dtype=bool)
        elif nearest == "ceil":
            right = np.ones_like(ratio, dtype=bool)
        else:
            raise ValueError(f"nearest_mode {nearest!r} is not supported")
        right = right | on
        return np.stack([~right, right], 1).astype(np.float64)
    if kind == "linear":
        if not antialias or scale >= 1:
            return np.stack([1 - ratio, ratio], 1)
        start = math.floor(-1 / scale) + 1
        taps = (np.arange(start, 2 - start)[None, :] - ratio[:, None]) * scale
        w = np.clip(1 - np.abs(taps), 0, 1)
        return w / w.sum(1, keepdims=True)
    if kind == "cubic":
        a = cubic_a

        def kernel(t: np.ndarray) -> np.ndarray:
            t = np.abs(t)
            near = ((a + 2) * t - (a + 3)) * t * t + 1
            far = ((a * t - 5 * a) * t + 8 * a) * t - 4 * a
            return np.where(t <= 1, near, np.where(t < 2, far, 0.0))

        if not antialias or scale >= 1:
            return kernel(np.stack([ratio + 1, ratio, 1 - ratio, 2 - ratio], 1))
        start = math.floor(-2 / scale) + 1
        w = kernel((np.arange(start, 2 - start)[None, :] - ratio[:, None]) * scale)
        return w / w.sum(1, keepdims=True)
    raise ValueError(f"mode {kind!r} is not supported")


def _resize_axis(x: Tensor, axis: int, out: int, scale: float, roi: tuple[float, float] | None, **how: Any) -> Tensor:
    """x resized along one axis: a gather where every output copies one input, else a weighted sum of inputs."""
    size = x.shape[axis]
    pos = _source_positions(how["coordinate_transformation_mode"], out, size, scale, roi)
    whole = np.floor(pos)
    ratio = np.where(pos == whole, 1.0, pos - whole)
    w = _tap_weights(how["mode"], ratio, scale, how["cubic_coeff_a"], how["nearest_mode"], how["antialias"])
    n = w.shape[1]
    # the n inputs nearest pos (the left one on a tie), as positions that may lie outside the input
    half = math.ceil(n / 2)
    shifted = pos + half
    left = np.floor(shifted)
    frac = shifted - left
    if n % 2 == 0:
        first = np.where(frac == 0, -(n // 2), -(n // 2) + 1)
    else:
        first = np.where(frac <= 0.5, -((n - 1) // 2), -((n - 1) // 2) + 1)
    idx = (left + first).astype(np.int64)[:, None] + np.arange(n)[None, :] - half
    if how["exclude_outside"]:
        w = np.where((idx < 0) | (idx >= size), 0.0, w)
        total = w.sum(1, keepdims=True)
        w = w / np.where(total == 0, 1.0, total)
    idx = np.clip(idx, 0, size - 1)
    lead = (slice(None),) * axis
    if np.all((w == 0) | (w == 1)) and np.all(w.sum(1) == 1):
        y = x[(*lead, Tensor(idx[w == 1].astype(np.int32), device=x.device))]
    else:
        dense = np.zeros((out, size))
        np.add.at(dense, (np.repeat(np.arange(out), n), idx.reshape(-1)), w.reshape(-1))
        calc = x.dtype if dtypes.is_float(x.dtype) else dtypes.float32
        m = Tensor(dense.astype(np.float32), device=x.device).cast(calc)
        y = (x.cast(calc).transpose(axis, -1) @ m.T).transpose(axis, -1)
        if not dtypes.is_float(x.dtype):
            y = y.round().clip(dtypes.min(x.dtype), dtypes.max(x.dtype)).cast(x.dtype)
    if how["coordinate_transformation_mode"] == "tf_crop_and_resize":
        outside = (pos < 0) | (pos > size - 1)
        if outside.any():
            shape = [out if i == axis else 1 for i in range(x.ndim)]
            mask = Tensor(outside.reshape(shape), device=x.device)
            y = mask.where(how["extrapolation_value"], y).cast(y.dtype)
    return y


def _resize(
    x: Tensor,
    roi: list[float] | None,
    scales: list[float] | None,
    sizes: list[int] | None,
    axes: list[int] | None,
    keep_aspect_ratio_policy: str,
    **how: Any,
) -> Tensor:
    """Resize along `axes` (all by default) to `sizes`, or by `scales` (the size rounded down)."""
    r = x.ndim
    axes = list(range(r)) if axes is None else [a % r for a in axes]
    roi = list(roi) if roi else None
    scales, sizes = (list(scales) if scales else None), (list(sizes) if sizes else None)
    if (scales is None) == (sizes is None):
        raise ValueError("exactly one of scales and sizes must be given")
    given = scales if scales is not None else sizes
    if len(given) != len(axes):
        raise ValueError(f"scales/sizes {given} need one entry per resized axis {axes}")
    if how["antialias"] and how["mode"] == "nearest":
        raise ValueError("antialias is not supported with mode='nearest'")
    if sizes is not None:
        factors = [s / x.shape[a] for s, a in zip(sizes, axes)]
        if keep_aspect_ratio_policy in ("not_larger", "not_smaller"):
            f = min(factors) if keep_aspect_ratio_policy == "not_larger" else max(factors)
            factors = [f] * len(axes)
            sizes = [int(f * x.shape[a] + 0.5) for a in axes]
        elif keep_aspect_ratio_policy != "stretch":
            raise ValueError(f"keep_aspect_ratio_policy {keep_aspect_ratio_policy!r} is not supported")
    else:
        factors = [float(s) for s in scales]
        sizes = [int(f * x.shape[a]) for f, a in zip(factors, axes)]
    if roi is not None and len(roi) == 2 * len(axes) and len(axes) != r:
        full = [0.0] * r + [1.0] * r
        for i, a in enumerate(axes):
            full[a], full[a + r] = roi[i], roi[len(axes) + i]
        roi = full
    if roi is not None and len(roi) != 2 * r:
        raise ValueError(f"roi {roi} needs 2 entries per axis of input {x.shape}")
    y = x
    for a, out, f in zip(axes, sizes, factors):
        span = None if roi is None else (roi[a], roi[a + r])
        trivial = span is None or (math.isclose(span[0], 0.0) and math.isclose(span[1], 1.0))
        if math.isclose(f, 1.0) and out == y.shape[a] and trivial:
            continue
        y = _resize_axis(y, a, out, f, span, **how)
    return y


@onnx_op("Resize", 10, static=(1,))
def resize_10(x: Tensor, scales: list[float], *, mode: str = "nearest") -> Tensor:
    """Resize-10: by `scales` (sizes rounded down), sampling at output / scale (nearest: rounded down)."""
    return _resize(
        x,
        None,
        scales,
        None,
        None,
        "stretch",
        mode=mode,
        coordinate_transformation_mode="asymmetric",
        cubic_coeff_a=-0.75,
        exclude_outside=0,
        extrapolation_value=0.0,
        nearest_mode="floor",
        antialias=0,
    )


@onnx_op("Resize", 11, static=(1, 2, 3))
def resize_11(
    x: Tensor,
    roi: list[float] | None = None,
    scales: list[float] | None = None,
    sizes: list[int] | None = None,
    *,
    coordinate_transformation_mode: str = "half_pixel",
    cubic_coeff_a: float = -0.75,
    exclude_outside: int = 0,
    extrapolation_value: float = 0.0,
    mode: str = "nearest",
    nearest_mode: str = "round_prefer_floor",
) -> Tensor:
    """Resize: nearest/linear/cubic resampling to `sizes` or by `scales`, as coordinate_transformation_mode maps
    output positions to input ones."""
    return _resize(
        x,
        roi,
        scales,
        sizes,
        None,
        "stretch",
        mode=mode,
        coordinate_transformation_mode=coordinate_transformation_mode,
        cubic_coeff_a=cubic_coeff_a,
        exclude_outside=exclude_outside,
        extrapolation_value=extrapolation_value,
        nearest_mode=nearest_mode,
        antialias=0,
    )


@onnx_op("Resize", 18, static=(1, 2, 3))
def resize_18(
    x: Tensor,
    roi: list[float] | None = None,
    scales: list[float] | None = None,
    sizes: list[int] | None = None,
    *,
    antialias: int = 0,
    axes: list[int] | None = None,
    coordinate_transformation_mode: str = "half_pixel",
    cubic_coeff_a: float = -0.75,
    exclude_outside: int = 0,
    extrapolation_value: float = 0.0,
    keep_aspect_ratio_policy: str = "stretch",
    mode: str = "nearest",
    nearest_mode: str = "round_prefer_floor",
) -> Tensor:
    """Resize-18: Resize-11 plus antialias (a widened filter when shrinking), axes and keep_aspect_ratio_policy."""
    return _resize(
        x,
        roi,
        scales,
        sizes,
        axes,
        keep_aspect_ratio_policy,
        mode=mode,
        coordinate_transformation_mode=coordinate_transformation_mode,
        cubic_coeff_a=cubic_coeff_a,
        exclude_outside=exclude_outside,
        extrapolation_value=extrapolation_value,
        nearest_mode=nearest_mode,
        antialias=antialias,
    )


# *** sampling grids ***


def _reflect(v: Tensor, lo: float, hi: float) -> Tensor:
    """v reflected off the borders lo and hi until it lies between them."""
    span = hi - lo
    below, above = lo - v, v - hi
    out = v
    for dist, near, far, side in ((below, lo, hi, v < lo), (above, hi, lo, v > hi)):
        n = (dist / span).trunc()
        r = dist - n * span
        sign = 1.0 if near == lo else -1.0
        even = (n - (n / 2).floor() * 2) == 0
        out = side.where(even.where(near + sign * r, far - sign * r), out)
    return out


def _cubic(t: Tensor) -> list[Tensor]:
    """Keys' cubic weights (a = -0.75) of the taps at -1, 0, 1, 2 for a sample t past tap 0."""
    a = -0.75

    def near(u: Tensor) -> Tensor:
        return ((a + 2) * u - (a + 3)) * u * u + 1

    def far(u: Tensor) -> Tensor:
        return ((a * u - 5 * a) * u + 8 * a) * u - 4 * a

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


@onnx_op("GridSample", 16)
def grid_sample(
    x: Tensor, grid: Tensor, *, align_corners: int = 0, mode: str = "bilinear", padding_mode: str = "zeros"
) -> Tensor:
    """GridSample: X (N, C, *D) sampled at the normalized points of grid (N, *out, len(D)), in [-1, 1] per axis."""
    kind = {"bilinear": "linear", "bicubic": "cubic"}.get(mode, mode)
    if kind not in ("nearest", "linear", "cubic"):
        raise ValueError(f"mode {mode!r} is not supported")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(f"padding_mode {padding_mode!r} is not supported")
    dims, n = x.shape[2:], x.ndim - 2
    if grid.ndim != n + 2 or grid.shape[-1] != n or grid.shape[0] != x.shape[0]:
        raise ValueError(f"grid {grid.shape} must be (N, *out, {n}) for input {x.shape}")
    N, C, outs = x.shape[0], x.shape[1], grid.shape[1:-1]
    g = grid.cast(dtypes.float32)
    coords = []
    for i, size in enumerate(dims):  # the grid's last axis lists x (the last dim) first
        v = g[..., n - 1 - i]
        v = (v + 1) / 2 * (size - 1) if align_corners else ((v + 1) * size - 1) / 2
        if kind == "nearest":
            v = v.round()
        lo, hi = (0.0, size - 1.0) if align_corners else (-0.5, size - 0.5)
        if padding_mode == "border":
            v = v.clip(0, size - 1)
        elif padding_mode == "reflection":
            v = _reflect(v, lo, hi)
        coords.append((v, lo, hi))
    taps = []  # per axis: (integer position, weight) of each tap
    for v, _, _ in coords:
        if kind == "nearest":
            taps.append([(v, None)])
            continue
        base = v.floor()
        t = v - base
        if kind == "linear":
            taps.append([(base, 1 - t), (base + 1, t)])
        else:
            taps.append(list(zip([base - 1, base, base + 1, base + 2], _cubic(t))))
    flat_x = x.reshape(N, C, math.prod(dims))
    calc = x.dtype if dtypes.is_float(x.dtype) else dtypes.float32
    out = None
    for combo in _product(taps):
        flat, ok, weight = None, None, None
        for a, ((pos, w), (_, lo, hi)) in enumerate(zip(combo, coords)):
            size = dims[a]
            if padding_mode == "border":
                pos = pos.clip(0, size - 1)
            elif padding_mode == "reflection":
                pos = _reflect(pos, lo, hi).trunc().clip(0, size - 1)
            inside = (pos >= 0) & (pos <= size - 1)
            term = pos.clip(0, size - 1).cast(dtypes.int32) * math.prod(dims[a + 1 :])
            flat = term if flat is None else flat + term
            ok = inside if ok is None else ok & inside
            if w is not None:
                weight = w if weight is None else weight * w
        idx = flat.reshape(N, 1, -1).expand(N, C, math.prod(outs))
        vals = flat_x.gather(2, idx).reshape(N, C, *outs).cast(calc)
        vals = ok.unsqueeze(1).where(vals, 0.0)
        part = vals if weight is None else vals * weight.unsqueeze(1).cast(calc)
        out = part if out is None else out + part
    return out.cast(x.dtype)


def _product(lists: list[list[Any]]) -> list[tuple[Any, ...]]:
    combos: list[tuple[Any, ...]] = [()]
    for options in lists:
        combos = [c + (o,) for c in combos for o in options]
    return combos


@onnx_op("AffineGrid", 20, static=(1,))
def affine_grid(theta: Tensor, size: list[int], *, align_corners: int = 0) -> Tensor:
    """AffineGrid: theta (N, n, n + 1) applied to every normalized output position (x first), (N, *size, n)."""
    spatial = list(size[2:])
    n = len(spatial)
    if theta.ndim != 3 or theta.shape[1:] != (n, n + 1):
        raise ValueError(f"theta {theta.shape} must be (N, {n}, {n + 1}) for size {size}")
    axes = []
    for length in spatial:
        if align_corners:
            a = np.linspace(-1, 1, length) if length > 1 else np.array([-1.0])
        else:
            a = (np.arange(length) * 2 + 1) / length - 1
        axes.append(a)
    mesh = np.meshgrid(*axes, indexing="ij")
    points = np.stack([m.reshape(-1) for m in reversed(mesh)] + [np.ones(math.prod(spatial))], 1)
    base = Tensor(points.astype(np.float32), device=theta.device).cast(theta.dtype)
    out = base @ theta.transpose(1, 2)  # (N, P, n)
    return out.reshape(theta.shape[0], *spatial, n)


@onnx_op("Col2Im", 18, static=(1, 2))
def col2im(
    x: Tensor,
    image_shape: list[int],
    block_shape: list[int],
    *,
    dilations: list[int] | None = None,
    pads: list[int] | None = None,
    strides: list[int] | None = None,
) -> Tensor:
    """Col2Im: the columns (N, C * prod(block), L) of sliding blocks summed back into images (N, C, *image)."""
    n = len(image_shape)
    s = list(strides) if strides else [1] * n
    d = list(dilations) if dilations else [1] * n
    p = list(pads) if pads else [0] * (2 * n)
    taps = math.prod(block_shape)
    N, cols, L = x.shape
    if cols % taps:
        raise ValueError(f"input {x.shape}: dim 1 must divide by the block size {taps}")
    padded = [i + p[a] + p[a + n] for a, i in enumerate(image_shape)]
    blocks = [(pi - (di * (k - 1) + 1)) // si + 1 for pi, di, k, si in zip(padded, d, block_shape, s)]
    if math.prod(blocks) != L:
        raise ValueError(f"input {x.shape}: dim 2 must be the number of blocks {blocks}, {math.prod(blocks)}")
    c = cols // taps
    per_tap = x.reshape(N, c, taps, *blocks)
    out = None
    for t, offsets in enumerate(np.ndindex(*block_shape)):
        v = per_tap[:, :, t]
        for a, (o, si) in enumerate(zip(blocks, s)):
            if si > 1:  # the block values si apart: si - 1 zeros after each, the trailing ones dropped
                ax = 2 + a
                v = v.unsqueeze(ax + 1).pad([(0, 0)] * (ax + 1) + [(0, si - 1)] + [(0, 0)] * (v.ndim - ax - 1))
                v = v.reshape(*v.shape[:ax], o * si, *v.shape[ax + 2 :]).shrink_to(
                    *v.shape[:ax], (o - 1) * si + 1, *v.shape[ax + 2 :]
                )
        placement = [(0, 0), (0, 0)]
        for a, (j, di, pi) in enumerate(zip(offsets, d, padded)):
            start = j * di
            placement.append((start, pi - start - v.shape[2 + a]))
        v = v.pad(placement)
        out = v if out is None else out + v
    return out.pad([(0, 0), (0, 0)] + [(-p[a], -p[a + n]) for a in range(n)])


# *** boxes ***


def _suppresses(a: np.ndarray, b: np.ndarray, center: int, threshold: float) -> bool:
    """Whether box b overlaps box a by an intersection over union above threshold."""
    if center:
        ax0, ax1, ay0, ay1 = a[0] - a[2] / 2, a[0] + a[2] / 2, a[1] - a[3] / 2, a[1] + a[3] / 2
        bx0, bx1, by0, by1 = b[0] - b[2] / 2, b[0] + b[2] / 2, b[1] - b[3] / 2, b[1] + b[3] / 2
    else:  # corners (y1, x1, y2, x2) in either order
        ay0, ay1, ax0, ax1 = min(a[0], a[2]), max(a[0], a[2]), min(a[1], a[3]), max(a[1], a[3])
        by0, by1, bx0, bx1 = min(b[0], b[2]), max(b[0], b[2]), min(b[1], b[3]), max(b[1], b[3])
    iw, ih = min(ax1, bx1) - max(ax0, bx0), min(ay1, by1) - max(ay0, by0)
    if iw <= 0 or ih <= 0:
        return False
    inter = iw * ih
    area_a, area_b = (ax1 - ax0) * (ay1 - ay0), (bx1 - bx0) * (by1 - by0)
    union = area_a + area_b - inter
    if area_a <= 0 or area_b <= 0 or union <= 0:
        return False
    return inter / union > threshold


@onnx_op("NonMaxSuppression", 10, static=(0, 1, 2, 3, 4))
def non_max_suppression(
    boxes: list[Any],
    scores: list[Any],
    max_output_boxes_per_class: Any = None,
    iou_threshold: Any = None,
    score_threshold: Any = None,
    *,
    center_point_box: int = 0,
    ctx: Any,
) -> Tensor:
    """NonMaxSuppression: per batch and class, the boxes by falling score, each kept unless a kept one overlaps it
    by more than iou_threshold; (batch, class, box) int64 rows. Its output's size depends on the values, so the
    boxes and scores are read as values."""

    def scalar(v: Any, default: Any) -> Any:
        v = np.asarray(v if v is not None else [], dtype=np.float64).reshape(-1)
        return v[0] if v.size else default

    limit = max(int(scalar(max_output_boxes_per_class, 0)), 0)
    iou = float(scalar(iou_threshold, 0.0))
    floor = scalar(score_threshold, None)
    b, sc = np.asarray(boxes, np.float64), np.asarray(scores, np.float64)
    picked = []
    for n in range(sc.shape[0]):
        for c in range(sc.shape[1]):
            s = sc[n, c]
            order = [i for i in np.argsort(-s, kind="stable") if floor is None or s[i] > floor]
            kept: list[int] = []
            for i in order:
                if len(kept) >= limit:
                    break
                if not any(_suppresses(b[n, k], b[n, i], center_point_box, iou) for k in kept):
                    kept.append(i)
            picked += [(n, c, i) for i in kept]
    out = np.array(picked, dtype=np.int64).reshape(-1, 3)
    return Tensor(out, device=ctx.runner.device)


def _roi_samples(
    roi: np.ndarray, height: int, width: int, oh: int, ow: int, ratio: int, scale: float, half_pixel: bool
) -> tuple[np.ndarray, np.ndarray]:
    """For one region: per output bin and sample point, the 4 neighbouring pixels (flat) and bilinear weights,
    (oh * ow, samples, 4) each; a sample off the image has weights 0."""
    shift = 0.5 if half_pixel else 0.0
    x0, y0, x1, y1 = (float(v) * scale - shift for v in roi[:4])
    rw, rh = x1 - x0, y1 - y0
    if not half_pixel:
        rw, rh = max(rw, 1.0), max(rh, 1.0)
    bh, bw = rh / oh, rw / ow
    gh = ratio if ratio > 0 else math.ceil(rh / oh)
    gw = ratio if ratio > 0 else math.ceil(rw / ow)
    pos = np.zeros((oh * ow, gh * gw, 4), np.int64)
    wts = np.zeros((oh * ow, gh * gw, 4))
    for b, (ph, pw) in enumerate(np.ndindex(oh, ow)):
        for s, (iy, ix) in enumerate(np.ndindex(gh, gw)):
            y = y0 + ph * bh + (iy + 0.5) * bh / gh
            x = x0 + pw * bw + (ix + 0.5) * bw / gw
            if y < -1.0 or y > height or x < -1.0 or x > width:
                continue
            y, x = max(y, 0.0), max(x, 0.0)
            ylo, xlo = int(y), int(x)
            if ylo >= height - 1:
                ylo = yhi = height - 1
                y = float(ylo)
            else:
                yhi = ylo + 1
            if xlo >= width - 1:
                xlo = xhi = width - 1
                x = float(xlo)
            else:
                xhi = xlo + 1
            ly, lx = y - ylo, x - xlo
            pos[b, s] = (ylo * width + xlo, ylo * width + xhi, yhi * width + xlo, yhi * width + xhi)
            wts[b, s] = ((1 - ly) * (1 - lx), (1 - ly) * lx, ly * (1 - lx), ly * lx)
    return pos, wts


def _roi_align(
    x: Tensor,
    rois: list[Any],
    batch_indices: list[int],
    mode: str,
    oh: int,
    ow: int,
    ratio: int,
    scale: float,
    half_pixel: bool,
) -> Tensor:
    if mode not in ("avg", "max"):
        raise ValueError(f"mode must be 'avg' or 'max', got {mode!r}")
    n, c, h, w = x.shape
    boxes = np.asarray(rois, np.float64).reshape(-1, 4)
    batch = np.asarray(batch_indices, np.int64).reshape(-1)
    per_roi = [_roi_samples(r, h, w, oh, ow, ratio, scale, half_pixel) for r in boxes]
    r_count = len(per_roi)
    if r_count == 0:
        return Tensor.zeros(0, c, oh, ow, dtype=x.dtype, device=x.device)
    most = max(p.shape[1] for p, _ in per_roi)
    pos = np.zeros((r_count, oh * ow, most, 4), np.int64)
    wts = np.zeros((r_count, oh * ow, most, 4))
    real = np.zeros((r_count, 1, oh * ow, most), bool)
    for i, (p, wt) in enumerate(per_roi):
        pos[i, :, : p.shape[1]], wts[i, :, : p.shape[1]], real[i, :, :, : p.shape[1]] = p, wt, True
    count = np.array([max(p.shape[1], 1) for p, _ in per_roi], np.float64).reshape(-1, 1, 1)
    # each region's image: the batch entries gathered, flattened (R, C, H * W)
    images = x.reshape(n, c, h * w)[Tensor(batch.astype(np.int32), device=x.device)]
    idx = Tensor(pos.reshape(r_count, 1, -1).astype(np.int32), device=x.device).expand(r_count, c, oh * ow * most * 4)
    vals = images.gather(2, idx).reshape(r_count, c, oh * ow, most, 4)
    weighted = vals * Tensor(wts.astype(np.float32), device=x.device).cast(x.dtype).unsqueeze(1)
    if mode == "avg":
        out = weighted.sum((-1, -2)) / Tensor(count.astype(np.float32), device=x.device).cast(x.dtype)
    else:
        best = weighted.max(-1)
        out = Tensor(real, device=x.device).where(best, -math.inf).max(-1)
    return out.reshape(r_count, c, oh, ow).cast(x.dtype)


@onnx_op("RoiAlign", 10, static=(1, 2))
def roi_align_10(
    x: Tensor,
    rois: list[Any],
    batch_indices: list[int],
    *,
    mode: str = "avg",
    output_height: int = 1,
    output_width: int = 1,
    sampling_ratio: int = 0,
    spatial_scale: float = 1.0,
) -> Tensor:
    """RoiAlign-10: each region of X averaged (or maxed) over bilinear samples into output bins (no half-pixel
    shift). The regions decide how many samples there are, so they are read as values."""
    return _roi_align(x, rois, batch_indices, mode, output_height, output_width, sampling_ratio, spatial_scale, False)


@onnx_op("RoiAlign", 16, static=(1, 2))
def roi_align(
    x: Tensor,
    rois: list[Any],
    batch_indices: list[int],
    *,
    coordinate_transformation_mode: str = "half_pixel",
    mode: str = "avg",
    output_height: int = 1,
    output_width: int = 1,
    sampling_ratio: int = 0,
    spatial_scale: float = 1.0,
) -> Tensor:
    """RoiAlign: each region of X averaged (or maxed) over bilinear samples into output bins."""
    if coordinate_transformation_mode not in ("half_pixel", "output_half_pixel"):
        raise ValueError(f"coordinate_transformation_mode {coordinate_transformation_mode!r} is not supported")
    half = coordinate_transformation_mode == "half_pixel"
    return _roi_align(x, rois, batch_indices, mode, output_height, output_width, sampling_ratio, spatial_scale, half)


@onnx_op("DeformConv", 19)
def deform_conv(
    x: Tensor,
    w: Tensor,
    offset: Tensor,
    b: Tensor | None = None,
    mask: Tensor | None = None,
    *,
    dilations: list[int] | None = None,
    group: int = 1,
    kernel_shape: list[int] | None = None,
    offset_group: int = 1,
    pads: list[int] | None = None,
    strides: list[int] | None = None,
) -> Tensor:
    """DeformConv: Conv whose every tap reads X bilinearly (zeros outside) at its position plus a learned offset,
    scaled by mask."""
    if x.ndim != 4:
        raise ValueError(f"only 2-d DeformConv is supported, got input {x.shape}")
    n, c, h, wd = x.shape
    m, kh, kw = w.shape[0], *w.shape[2:]
    if c != w.shape[1] * group or m % group or c % offset_group:
        raise ValueError(f"input {x.shape}, weight {w.shape}, group {group}, offset_group {offset_group} do not fit")
    sh, sw = strides or (1, 1)
    dh, dw = dilations or (1, 1)
    p = pads or [0, 0, 0, 0]
    oh, ow = offset.shape[2:]
    k, g = kh * kw, offset_group
    off = offset.reshape(n, g, kh, kw, 2, oh, ow).cast(dtypes.float32)
    # each tap's sampling position: the window's start, the tap, and its offset
    rows = (Tensor.arange(oh, device=x.device) * sh - p[0]).reshape(1, 1, 1, 1, oh, 1) + (
        Tensor.arange(kh, device=x.device) * dh
    ).reshape(1, 1, kh, 1, 1, 1)
    cols = (Tensor.arange(ow, device=x.device) * sw - p[1]).reshape(1, 1, 1, 1, 1, ow) + (
        Tensor.arange(kw, device=x.device) * dw
    ).reshape(1, 1, 1, kw, 1, 1)
    y, xx = rows + off[:, :, :, :, 0], cols + off[:, :, :, :, 1]
    y0, x0 = y.floor(), xx.floor()
    ty, tx = y - y0, xx - x0
    flat_x = x.reshape(n, g, c // g, h * wd)
    sampled = None
    for yy, wy in ((y0, 1 - ty), (y0 + 1, ty)):
        for xc, wx in ((x0, 1 - tx), (x0 + 1, tx)):
            ok = (yy >= 0) & (yy <= h - 1) & (xc >= 0) & (xc <= wd - 1)
            idx = (yy.clip(0, h - 1) * wd + xc.clip(0, wd - 1)).cast(dtypes.int32).reshape(n, g, 1, -1)
            vals = flat_x.gather(3, idx.expand(n, g, c // g, k * oh * ow)).reshape(n, g, c // g, kh, kw, oh, ow)
            weight = ok.where(wy * wx, 0.0).cast(x.dtype).unsqueeze(2)
            part = vals * weight
            sampled = part if sampled is None else sampled + part
    if mask is not None:
        sampled = sampled * mask.reshape(n, g, 1, kh, kw, oh, ow)
    columns = sampled.reshape(n, group, c // group, k, oh * ow)
    kernel = w.reshape(group, m // group, c // group, k)
    out = Tensor.einsum("ngckp,gmck->ngmp", columns, kernel).reshape(n, m, oh, ow)
    return out if b is None else out + _channel_shape(b, 4)
