"""ONNX ops: signal processing (DFT, STFT, the Blackman/Hamming/Hann windows, MelWeightMatrix).

A DFT is a matmul with a cos and a sin matrix built for the (static) transform length; a complex value is a
trailing axis of 2 (real, imaginary), a real one a trailing axis of 1. Windows and mel filter banks depend only on
their sizes, so they are constants.

>>> import numpy as np
>>> from onnx import TensorProto, helper
>>> from zeptograd.onnx import OnnxRunner
>>> info = helper.make_tensor_value_info
>>> node = helper.make_node("DFT", ["x", "", "axis"], ["y"])
>>> x, y = info("x", TensorProto.FLOAT, [4, 1]), info("y", TensorProto.FLOAT, [4, 2])
>>> graph = helper.make_graph([node], "g", [x], [y],
...                           [helper.make_tensor("axis", TensorProto.INT64, [], [0])])
>>> run = OnnxRunner(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)]))
>>> y = run({"x": np.array([[1], [2], [3], [4]], np.float32)})["y"].numpy()
>>> (np.round(y, 4) + 0.0).tolist()  # numpy.fft.fft([1, 2, 3, 4]) = [10, -2+2j, -2, -2-2j]
[[10.0, 0.0], [-2.0, 2.0], [-2.0, 0.0], [-2.0, -2.0]]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from zeptograd.dtype import DType, dtypes
from zeptograd.onnx.dtypes import onnx_dtype
from zeptograd.onnx.registry import onnx_op
from zeptograd.runtime.device import Device
from zeptograd.tensor import Tensor


def _scalar(value: Any) -> Any:
    while isinstance(value, list):
        if len(value) != 1:
            raise ValueError(f"expected a scalar, got {len(value)} values")
        value = value[0]
    return value


def _const(array: np.ndarray, like: Tensor) -> Tensor:
    """A constant matrix in `like`'s dtype on its device."""
    if like.dtype == dtypes.float64:
        return Tensor(array, dtype=dtypes.float64, device=like.device)
    return Tensor(array.astype(np.float32), device=like.device).cast(like.dtype)


def _wide(x: Tensor) -> DType:
    """The dtype a DFT sums in: float64 where the device has it, since a float32 sum of N terms leaves errors
    of N ulps of the largest term, large against the near-zero bins of a typical spectrum."""
    return dtypes.float64 if dtypes.float64 in Device[x.device].renderer.supported_dtypes() else x.dtype


def _fit(x: Tensor, n: int) -> Tensor:
    """x's last axis cut or zero-padded to n."""
    have = x.shape[-1]
    return x[..., :n] if have >= n else x.pad((0, n - have))


def _dft(x: Tensor, length: int | None, axis: int, inverse: bool, onesided: bool) -> Tensor:
    """The DFT of `x` ([..., 1 or 2], real or complex) along `axis`, as [..., 2] (or [..., 1] for an inverse
    one-sided transform, whose output is real)."""
    if x.ndim < 2 or x.shape[-1] not in (1, 2):
        raise ValueError(f"the input's last axis must be 1 (real) or 2 (complex), got shape {x.shape}")
    axis = axis + x.ndim if axis < 0 else axis
    if not 0 <= axis < x.ndim - 1:
        raise ValueError(f"axis {axis} is out of range for an input of shape {x.shape} (the last axis is complex)")
    out_dtype, x = x.dtype, x.cast(_wide(x))
    re = x[..., 0].movedim(axis, -1)
    im = x[..., 1].movedim(axis, -1) if x.shape[-1] == 2 else None
    n_in = re.shape[-1]
    if length is None:
        length = 2 * (n_in - 1) if inverse and onesided else n_in
    if length <= 0:
        raise ValueError(f"dft_length must be positive, got {length}")
    if inverse and onesided:
        # the real signal of a one-sided (Hermitian) spectrum: bins 1 .. n/2-1 count twice, their mirror images
        bins = length // 2 + 1
        k, m = np.arange(bins)[:, None], np.arange(length)[None, :]
        weight = np.where((k == 0) | (2 * k == length), 1.0, 2.0) / length
        angle = 2 * np.pi * k * m / length
        out = _fit(re, bins) @ _const(weight * np.cos(angle), x)
        if im is not None:
            out = out - _fit(im, bins) @ _const(weight * np.sin(angle), x)
        return out.movedim(-1, axis).unsqueeze(-1).cast(out_dtype)
    bins = length // 2 + 1 if onesided else length
    n, k = np.arange(length)[:, None], np.arange(bins)[None, :]
    angle = 2 * np.pi * n * k / length
    scale = 1.0 / length if inverse else 1.0
    sign = 1.0 if inverse else -1.0
    cos, sin = _const(np.cos(angle) * scale, x), _const(np.sin(angle) * scale * sign, x)
    re = _fit(re, length)
    real, imag = re @ cos, re @ sin
    if im is not None:
        im = _fit(im, length)
        real, imag = real - im @ sin, imag + im @ cos
    return Tensor.stack(real.movedim(-1, axis), imag.movedim(-1, axis), dim=-1).cast(out_dtype)


@onnx_op("DFT", 17, static=(1,))
def dft_17(x: Tensor, dft_length: Any = None, *, axis: int = 1, inverse: int = 0, onesided: int = 0) -> Tensor:
    """DFT-17: y[k] = sum_n x[n] exp(-2 pi i k n / N) along `axis` (the inverse has +i and 1/N)."""
    length = None if dft_length is None else int(_scalar(dft_length))
    return _dft(x, length, axis, bool(inverse), bool(onesided))


@onnx_op("DFT", 20, static=(1, 2))
def dft_20(x: Tensor, dft_length: Any = None, axis: Any = None, *, inverse: int = 0, onesided: int = 0) -> Tensor:
    """DFT-20: DFT-17 with the axis an input (by default -2, the last signal axis)."""
    length = None if dft_length is None else int(_scalar(dft_length))
    return _dft(x, length, -2 if axis is None else int(_scalar(axis)), bool(inverse), bool(onesided))


@onnx_op("STFT", 17, static=(1, 3))
def stft(
    signal: Tensor, frame_step: Any, window: Tensor | None = None, frame_length: Any = None, *, onesided: int = 1
) -> Tensor:
    """STFT: the DFT of each windowed frame signal[b, f * step : f * step + frame_length]: [batch, frames, bins, 2]."""
    step = int(_scalar(frame_step))
    if signal.ndim != 3:
        raise ValueError(f"the signal must be [batch, length, 1 or 2], got shape {signal.shape}")
    if frame_length is not None:
        size = int(_scalar(frame_length))
        if window is not None and window.shape != (size,):
            raise ValueError(f"window of shape {window.shape} does not match frame_length {size}")
    else:
        size = window.shape[0] if window is not None else signal.shape[1]
    n_frames = 1 + (signal.shape[1] - size) // step
    if step <= 0 or n_frames <= 0:
        raise ValueError(f"frame_step {step} and frame_length {size} give no frame of a signal of {signal.shape[1]}")
    frames = [signal[:, f * step : f * step + size] for f in range(n_frames)]
    framed = Tensor.stack(*frames, dim=1) if n_frames > 1 else frames[0].unsqueeze(1)
    if window is not None:
        framed = framed * window.reshape(1, 1, size, 1)
    return _dft(framed, size, 2, False, bool(onesided))


def _window(size: Any, periodic: int, output_datatype: int, terms: list[float]) -> Tensor:
    """sum_j terms[j] cos(2 pi j n / N), N = size (periodic) or size - 1 (symmetric)."""
    n = int(_scalar(size))
    span = n if periodic else n - 1
    i = np.arange(n, dtype=np.float64)
    w = sum(c * np.cos(2 * np.pi * j * i / span) for j, c in enumerate(terms)) if span else np.ones(n)
    return Tensor(np.asarray(w, np.float64)).cast(onnx_dtype(output_datatype))


@onnx_op("HannWindow", 17, static=(0,))
def hann_window(size: Any, *, output_datatype: int = 1, periodic: int = 1) -> Tensor:
    """HannWindow: 0.5 - 0.5 cos(2 pi n / N)."""
    return _window(size, periodic, output_datatype, [0.5, -0.5])


@onnx_op("HammingWindow", 17, static=(0,))
def hamming_window(size: Any, *, output_datatype: int = 1, periodic: int = 1) -> Tensor:
    """HammingWindow: 25/46 - 21/46 cos(2 pi n / N)."""
    return _window(size, periodic, output_datatype, [25 / 46, -21 / 46])


@onnx_op("BlackmanWindow", 17, static=(0,))
def blackman_window(size: Any, *, output_datatype: int = 1, periodic: int = 1) -> Tensor:
    """BlackmanWindow: 0.42 - 0.5 cos(2 pi n / N) + 0.08 cos(4 pi n / N)."""
    return _window(size, periodic, output_datatype, [0.42, -0.5, 0.08])


@onnx_op("MelWeightMatrix", 17, static=(0, 1, 2, 3, 4))
def mel_weight_matrix(
    num_mel_bins: Any, dft_length: Any, sample_rate: Any, lower_edge_hertz: Any, upper_edge_hertz: Any, *,
    output_datatype: int = 1
) -> Tensor:  # fmt: skip
    """MelWeightMatrix: [dft_length // 2 + 1, num_mel_bins] triangular filters, evenly spaced on the mel scale
    mel(f) = 2595 log10(1 + f / 700), each peaking at 1 on its centre DFT bin."""
    mels, length, rate = int(_scalar(num_mel_bins)), int(_scalar(dft_length)), _scalar(sample_rate)
    low, high = (2595 * np.log10(1 + _scalar(f) / 700) for f in (lower_edge_hertz, upper_edge_hertz))
    points = np.arange(mels + 2) * (high - low) / (mels + 2) + low
    hertz = 700 * (10 ** (points / 2595) - 1)
    edges = ((length + 1) * hertz // rate).astype(np.int64)  # each mel point's DFT bin
    out = np.zeros((length // 2 + 1, mels))
    for m in range(mels):
        left, centre, right = edges[m], edges[m + 1], edges[m + 2]
        if centre == left:
            out[centre, m] = 1.0
        else:
            out[left : centre + 1, m] = (np.arange(left, centre + 1) - left) / (centre - left)
        if right > centre:
            out[centre:right, m] = (right - np.arange(centre, right)) / (right - centre)
    return Tensor(out).cast(onnx_dtype(output_datatype))
