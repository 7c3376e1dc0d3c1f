"""Movement ops beyond the primitives (view flatten squeeze cat stack repeat split roll unfold diag pad modes ...)
against numpy, and torch where numpy has no equivalent.

numpy (or torch) is the oracle; no expected value comes from zeptograd itself. Movement ops move values and
never compute them, so every comparison is exact. The PYTHON device is an interpreter: the tests that run on it
keep their tensors at 64 elements or fewer.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from zeptograd import GlobalCounters, Tensor, dtypes
from zeptograd.dtype import DType
from zeptograd.uop.ops import Ops

DEVICES = ["CPU", "PYTHON"]
DTYPES = [dtypes.float32, dtypes.float16, dtypes.int32, dtypes.bool]
NP = {
    dtypes.float32: np.float32,
    dtypes.float16: np.float16,
    dtypes.int32: np.int32,
    dtypes.bool: np.bool_,
    dtypes.int8: np.int8,
    dtypes.uint8: np.uint8,
    dtypes.int16: np.int16,
    dtypes.float64: np.float64,
}


def distinct(shape: tuple[int, ...], dtype: DType) -> np.ndarray:
    """Values that tell positions apart (bool: a pattern that is not periodic in small sizes)."""
    n = int(np.prod(shape))
    if dtype == dtypes.bool:
        return (np.arange(n) % 3 == 1).reshape(shape)
    base = -(n // 2) if dtype == dtypes.int32 else 1
    return (base + np.arange(n)).reshape(shape).astype(NP[dtype])


def check(t: Tensor, ref: np.ndarray, dtype: DType) -> None:
    ref = np.asarray(ref)
    assert t.dtype == dtype, (t.dtype, dtype)
    assert t.shape == ref.shape, (t.shape, ref.shape)
    got = t.numpy()
    assert got.shape == ref.shape
    np.testing.assert_array_equal(got, ref.astype(NP[dtype]))


def np_unfold(a: np.ndarray, dim: int, size: int, step: int) -> np.ndarray:
    """torch.Tensor.unfold in numpy: axis `dim` becomes the window count, a new last axis the window."""
    k = (a.shape[dim] - size) // step + 1
    idx = np.arange(k)[:, None] * step + np.arange(size)[None, :]
    return np.moveaxis(np.take(a, idx, axis=dim), dim % a.ndim + 1, -1)


NP_MODE = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}

# (name, input shape, on a tensor, on a numpy array)
CASES: list[tuple[str, tuple[int, ...], Callable[[Tensor], Tensor], Callable[[np.ndarray], np.ndarray]]] = [
    # view / flatten / unflatten
    ("view_varargs", (2, 3, 4), lambda t: t.view(6, 4), lambda a: a.reshape(6, 4)),
    ("view_tuple", (2, 3, 4), lambda t: t.view((4, -1)), lambda a: a.reshape(4, -1)),
    ("view_size0", (0, 3), lambda t: t.view(3, 0, 1), lambda a: a.reshape(3, 0, 1)),
    ("reshape_none", (2, 3, 4), lambda t: t.reshape(None, -1), lambda a: a.reshape(2, 12)),
    ("reshape_none_tuple", (2, 3, 4), lambda t: t.reshape((None, None, 2, 2)), lambda a: a.reshape(2, 3, 2, 2)),
    ("reshape_none_middle", (2, 3, 4), lambda t: t.reshape(4, None, 2), lambda a: a.reshape(4, 3, 2)),
    ("view_none", (2, 3, 4), lambda t: t.view(None, 12), lambda a: a.reshape(2, 12)),
    ("reshape_as", (2, 3), lambda t: t.reshape_as(Tensor.zeros(3, 2)), lambda a: a.reshape(3, 2)),
    ("view_as", (2, 3), lambda t: t.view_as(Tensor.zeros(6)), lambda a: a.reshape(6)),
    ("flatten", (2, 3, 4), lambda t: t.flatten(), lambda a: a.reshape(-1)),
    ("flatten_1", (2, 3, 4), lambda t: t.flatten(1), lambda a: a.reshape(2, 12)),
    ("flatten_0_1", (2, 3, 4), lambda t: t.flatten(0, 1), lambda a: a.reshape(6, 4)),
    ("flatten_neg", (2, 3, 4, 1), lambda t: t.flatten(-3, -2), lambda a: a.reshape(2, 12, 1)),
    ("flatten_one_axis", (2, 3), lambda t: t.flatten(1, 1), lambda a: a),
    ("flatten_0d", (), lambda t: t.flatten(), lambda a: a.reshape(1)),
    ("flatten_size0", (2, 0, 3), lambda t: t.flatten(1), lambda a: a.reshape(2, 0)),
    ("unflatten", (2, 12), lambda t: t.unflatten(1, (3, 4)), lambda a: a.reshape(2, 3, 4)),
    ("unflatten_infer", (2, 12), lambda t: t.unflatten(-1, (-1, 6)), lambda a: a.reshape(2, 2, 6)),
    ("unflatten_list", (6, 2), lambda t: t.unflatten(0, [3, 1, 2]), lambda a: a.reshape(3, 1, 2, 2)),
    ("unflatten_size0", (2, 0), lambda t: t.unflatten(1, (0, 5)), lambda a: a.reshape(2, 0, 5)),
    # squeeze / unsqueeze
    ("squeeze_all", (1, 3, 1, 2), lambda t: t.squeeze(), lambda a: np.squeeze(a)),
    ("squeeze_dim", (1, 3, 1, 2), lambda t: t.squeeze(2), lambda a: np.squeeze(a, 2)),
    ("squeeze_neg", (1, 3, 1), lambda t: t.squeeze(-1), lambda a: a.reshape(1, 3)),
    ("squeeze_not_one", (1, 3, 1), lambda t: t.squeeze(1), lambda a: a),
    ("squeeze_tuple", (1, 3, 1, 2), lambda t: t.squeeze((0, 2)), lambda a: a.reshape(3, 2)),
    ("squeeze_tuple_mixed", (1, 3, 1, 2), lambda t: t.squeeze((1, -2)), lambda a: a.reshape(1, 3, 2)),
    ("squeeze_0d", (), lambda t: t.squeeze(0), lambda a: a),
    ("squeeze_0d_none", (), lambda t: t.squeeze(), lambda a: a),
    ("squeeze_size0", (0, 1), lambda t: t.squeeze(), lambda a: a.reshape(0)),
    ("unsqueeze0", (2, 3), lambda t: t.unsqueeze(0), lambda a: a[None]),
    ("unsqueeze_mid", (2, 3), lambda t: t.unsqueeze(1), lambda a: a[:, None]),
    ("unsqueeze_last", (2, 3), lambda t: t.unsqueeze(-1), lambda a: a[..., None]),
    ("unsqueeze_neg", (2, 3), lambda t: t.unsqueeze(-3), lambda a: a[None]),
    ("unsqueeze_0d", (), lambda t: t.unsqueeze(-1), lambda a: a.reshape(1)),
    # transpose / swapaxes / movedim / T / permute
    ("transpose_neg", (2, 3, 4), lambda t: t.transpose(-1, 0), lambda a: a.swapaxes(-1, 0)),
    ("transpose_neg2", (2, 3, 4), lambda t: t.transpose(-2, -1), lambda a: a.swapaxes(-2, -1)),
    ("transpose_same", (2, 3), lambda t: t.transpose(1, 1), lambda a: a),
    ("transpose_0d", (), lambda t: t.transpose(0, -1), lambda a: a),
    ("transpose_1d", (4,), lambda t: t.transpose(0, -1), lambda a: a),
    ("T_1d", (4,), lambda t: t.T, lambda a: a.T),
    ("T_0d", (), lambda t: t.T, lambda a: a),
    ("T_3d", (2, 3, 4), lambda t: t.T, lambda a: a.T),
    ("swapaxes", (2, 3, 4), lambda t: t.swapaxes(0, 1), lambda a: a.swapaxes(0, 1)),
    ("permute_neg", (2, 3, 4), lambda t: t.permute(-1, 0, -2), lambda a: a.transpose(2, 0, 1)),
    ("permute_list", (2, 3, 4), lambda t: t.permute([1, 2, 0]), lambda a: a.transpose(1, 2, 0)),
    ("permute_0d", (), lambda t: t.permute(), lambda a: a),
    ("movedim", (2, 3, 4), lambda t: t.movedim(0, -1), lambda a: np.moveaxis(a, 0, -1)),
    ("movedim_tuple", (2, 3, 4), lambda t: t.movedim((0, 1), (2, 0)), lambda a: np.moveaxis(a, (0, 1), (2, 0))),
    ("moveaxis", (2, 3, 4), lambda t: t.moveaxis([2], [0]), lambda a: np.moveaxis(a, 2, 0)),
    # expand / narrow / flip
    ("expand_minus1", (3, 1), lambda t: t.expand(2, -1, 4), lambda a: np.broadcast_to(a, (2, 3, 4))),
    ("expand_same", (3, 1), lambda t: t.expand(3, 1), lambda a: a),
    ("expand_size0", (0, 1), lambda t: t.expand(0, 4), lambda a: np.broadcast_to(a, (0, 4))),
    ("expand_0d", (), lambda t: t.expand(2, 3), lambda a: np.broadcast_to(a, (2, 3))),
    ("expand_as", (3, 1), lambda t: t.expand_as(Tensor.zeros(3, 2)), lambda a: np.broadcast_to(a, (3, 2))),
    ("narrow", (4, 5), lambda t: t.narrow(1, 1, 3), lambda a: a[:, 1:4]),
    ("narrow_neg", (4, 5), lambda t: t.narrow(0, -2, 2), lambda a: a[2:4]),
    ("narrow_empty", (4, 5), lambda t: t.narrow(-1, 5, 0), lambda a: a[:, 5:5]),
    ("flip_varargs", (2, 3, 4), lambda t: t.flip(0, 2), lambda a: np.flip(a, (0, 2))),
    ("flip_dims_kw", (2, 3, 4), lambda t: t.flip(dims=(1, -1)), lambda a: np.flip(a, (1, 2))),
    # repeat / tile / repeat_interleave
    ("repeat", (2, 3), lambda t: t.repeat(2, 2), lambda a: np.tile(a, (2, 2))),
    ("repeat_more", (2, 3), lambda t: t.repeat(2, 1, 3), lambda a: np.tile(a, (2, 1, 3))),
    ("repeat_tuple", (3,), lambda t: t.repeat((3,)), lambda a: np.tile(a, 3)),
    ("repeat_ones", (2, 3), lambda t: t.repeat(1, 1), lambda a: a),
    ("repeat_zero", (2, 3), lambda t: t.repeat(0, 2), lambda a: np.tile(a, (0, 2))),
    ("repeat_0d", (), lambda t: t.repeat(3), lambda a: np.tile(a, 3)),
    ("repeat_size0", (0, 2), lambda t: t.repeat(2, 2), lambda a: np.tile(a, (2, 2))),
    ("tile_fewer", (2, 3), lambda t: t.tile(2), lambda a: np.tile(a, 2)),
    ("tile_more", (2, 3), lambda t: t.tile((2, 1, 1)), lambda a: np.tile(a, (2, 1, 1))),
    ("ri_flat", (2, 3), lambda t: t.repeat_interleave(2), lambda a: np.repeat(a, 2)),
    ("ri_last", (2, 3), lambda t: t.repeat_interleave(3, dim=-1), lambda a: np.repeat(a, 3, axis=-1)),
    ("ri_first", (2, 3), lambda t: t.repeat_interleave(2, 0), lambda a: np.repeat(a, 2, axis=0)),
    ("ri_mid", (2, 3, 2), lambda t: t.repeat_interleave(2, 1), lambda a: np.repeat(a, 2, axis=1)),
    ("ri_zero", (2, 3), lambda t: t.repeat_interleave(0, dim=1), lambda a: np.repeat(a, 0, axis=1)),
    ("ri_one", (2, 3), lambda t: t.repeat_interleave(1, dim=1), lambda a: a),
    ("ri_0d", (), lambda t: t.repeat_interleave(3), lambda a: np.repeat(a, 3)),
    ("ri_size0", (0, 3), lambda t: t.repeat_interleave(2, dim=0), lambda a: np.repeat(a, 2, axis=0)),
    # roll
    ("roll_flat", (2, 3), lambda t: t.roll(2), lambda a: np.roll(a, 2)),
    ("roll_dim", (2, 3), lambda t: t.roll(-4, 1), lambda a: np.roll(a, -4, 1)),
    ("roll_tuple", (2, 3, 4), lambda t: t.roll((1, -1), (0, 2)), lambda a: np.roll(a, (1, -1), (0, 2))),
    ("roll_big", (5,), lambda t: t.roll(12, 0), lambda a: np.roll(a, 12, 0)),
    ("roll_full_turn", (3, 4), lambda t: t.roll(4, 1), lambda a: a),
    ("roll_same_dim_twice", (5,), lambda t: t.roll((1, 2), (0, 0)), lambda a: np.roll(a, 3)),
    ("roll_size0", (0, 3), lambda t: t.roll(1, 0), lambda a: a),
    ("roll_size1", (1, 3), lambda t: t.roll(5, 0), lambda a: a),
    ("roll_0d", (), lambda t: t.roll(3), lambda a: a),
    # unfold
    ("unfold", (7,), lambda t: t.unfold(0, 3, 2), lambda a: np_unfold(a, 0, 3, 2)),
    ("unfold_step1", (7,), lambda t: t.unfold(0, 3, 1), lambda a: np_unfold(a, 0, 3, 1)),
    ("unfold_gaps", (7,), lambda t: t.unfold(0, 2, 3), lambda a: np_unfold(a, 0, 2, 3)),
    ("unfold_tiles", (6,), lambda t: t.unfold(0, 2, 2), lambda a: a.reshape(3, 2)),
    ("unfold_whole", (6,), lambda t: t.unfold(0, 6, 1), lambda a: a.reshape(1, 6)),
    ("unfold_big_step", (5,), lambda t: t.unfold(0, 1, 10), lambda a: a[:1].reshape(1, 1)),
    ("unfold_2d_rows", (3, 4), lambda t: t.unfold(0, 2, 1), lambda a: np_unfold(a, 0, 2, 1)),
    ("unfold_3d_mid", (2, 5, 3), lambda t: t.unfold(-2, 3, 1), lambda a: np_unfold(a, 1, 3, 1)),
    ("unfold_3d_gaps", (2, 3, 7), lambda t: t.unfold(2, 2, 3), lambda a: np_unfold(a, 2, 2, 3)),
    ("unfold_size0_window", (4,), lambda t: t.unfold(0, 0, 1), lambda a: np.zeros((5, 0), a.dtype)),
    ("unfold_size0_axis", (0, 2), lambda t: t.unfold(0, 0, 2), lambda a: np.zeros((1, 2, 0), a.dtype)),
    ("unfold_0d", (), lambda t: t.unfold(0, 1, 1), lambda a: a.reshape(1)),
    # diag / diagonal
    ("diag_1d", (3,), lambda t: t.diag(), lambda a: np.diag(a)),
    ("diag_1d_above", (3,), lambda t: t.diag(1), lambda a: np.diag(a, 1)),
    ("diag_1d_below", (3,), lambda t: t.diag(-2), lambda a: np.diag(a, -2)),
    ("diag_1d_one", (1,), lambda t: t.diag(), lambda a: np.diag(a)),
    ("diag_1d_empty", (0,), lambda t: t.diag(1), lambda a: np.diag(a, 1)),
    ("diag_2d", (3, 4), lambda t: t.diag(), lambda a: np.diag(a)),
    ("diag_2d_above", (3, 4), lambda t: t.diag(2), lambda a: np.diag(a, 2)),
    ("diag_2d_below", (3, 4), lambda t: t.diag(-1), lambda a: np.diag(a, -1)),
    ("diag_2d_outside", (3, 4), lambda t: t.diag(5), lambda a: np.diag(a, 5)),
    ("diagonal", (3, 4), lambda t: t.diagonal(), lambda a: np.diagonal(a)),
    ("diagonal_3d", (2, 3, 4), lambda t: t.diagonal(1, 0, 2), lambda a: np.diagonal(a, 1, 0, 2)),
    ("diagonal_swapped", (2, 3, 4), lambda t: t.diagonal(-1, 2, 0), lambda a: np.diagonal(a, -1, 2, 0)),
    ("diagonal_neg_dims", (2, 3, 4), lambda t: t.diagonal(0, -1, -2), lambda a: np.diagonal(a, 0, -1, -2)),
    ("diagonal_empty", (2, 3, 4), lambda t: t.diagonal(7, 1, 2), lambda a: np.diagonal(a, 7, 1, 2)),
    ("diagonal_1x1", (1, 1), lambda t: t.diagonal(), lambda a: np.diagonal(a)),
    # pad: constant, both padding forms, cropping
    ("pad_flat", (2, 3), lambda t: t.pad((1, 2)), lambda a: np.pad(a, ((0, 0), (1, 2)))),
    ("pad_flat_2axes", (2, 3), lambda t: t.pad((1, 0, 0, 2)), lambda a: np.pad(a, ((0, 2), (1, 0)))),
    ("pad_pairs", (2, 3), lambda t: t.pad(((1, 0), None)), lambda a: np.pad(a, ((1, 0), (0, 0)))),
    ("pad_empty_flat", (2, 3), lambda t: t.pad(()), lambda a: a),
    ("pad_crop", (4, 5), lambda t: t.pad((-1, 2, 0, -3)), lambda a: np.pad(a[:1, 1:], ((0, 0), (0, 2)))),
    ("pad_crop_all", (4, 5), lambda t: t.pad((-2, -3)), lambda a: a[:, 2:2]),
    ("pad_0d", (), lambda t: t.pad(()), lambda a: a),
    # pad: reflect / replicate / circular (numpy's reflect / edge / wrap)
    ("reflect_1d", (5,), lambda t: t.pad((2, 3), mode="reflect"), lambda a: np.pad(a, (2, 3), "reflect")),
    ("reflect_max", (4,), lambda t: t.pad((3, 3), mode="reflect"), lambda a: np.pad(a, (3, 3), "reflect")),
    (
        "reflect_2d",
        (3, 4),
        lambda t: t.pad(((1, 2), (2, 0)), mode="reflect"),
        lambda a: np.pad(a, ((1, 2), (2, 0)), "reflect"),
    ),
    ("replicate_1d", (3,), lambda t: t.pad((2, 4), mode="replicate"), lambda a: np.pad(a, (2, 4), "edge")),
    (
        "replicate_2d_size1",
        (1, 4),
        lambda t: t.pad((0, 1, 3, 2), mode="replicate"),
        lambda a: np.pad(a, ((3, 2), (0, 1)), "edge"),
    ),
    ("circular_1d", (4,), lambda t: t.pad((3, 1), mode="circular"), lambda a: np.pad(a, (3, 1), "wrap")),
    ("circular_full", (3,), lambda t: t.pad((3, 3), mode="circular"), lambda a: np.pad(a, (3, 3), "wrap")),
    (
        "circular_3d",
        (2, 3, 4),
        lambda t: t.pad((1, 2, 2, 0), mode="circular"),
        lambda a: np.pad(a, ((0, 0), (2, 0), (1, 2)), "wrap"),
    ),
    ("mode_no_pad", (2, 3), lambda t: t.pad((0, 0), mode="reflect"), lambda a: a),
]
CASE_IDS = [c[0] for c in CASES]


def _input(a: np.ndarray, dtype: DType, device: str, view: str = "contiguous") -> Tensor:
    """A tensor holding `a`: contiguous, or the same values behind a flip or a transpose (non-contiguous)."""
    if view == "flipped" and a.ndim:
        return Tensor(np.flip(a, 0).copy(), dtype=dtype, device=device).flip(0)
    if view == "transposed" and a.ndim > 1:
        return Tensor(a.T.copy(), dtype=dtype, device=device).T
    return Tensor(a, dtype=dtype, device=device)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("name", "shape", "t_fn", "np_fn"), CASES, ids=CASE_IDS)
def test_movement_cpu(name: str, shape: tuple[int, ...], t_fn: Callable, np_fn: Callable, dtype: DType):
    a = distinct(shape, dtype)
    check(t_fn(_input(a, dtype, "CPU")), np_fn(a), dtype)


@pytest.mark.parametrize("dtype", [dtypes.float32, dtypes.bool])
@pytest.mark.parametrize(("name", "shape", "t_fn", "np_fn"), CASES, ids=CASE_IDS)
def test_movement_python(name: str, shape: tuple[int, ...], t_fn: Callable, np_fn: Callable, dtype: DType):
    a = distinct(shape, dtype)
    check(t_fn(_input(a, dtype, "PYTHON")), np_fn(a), dtype)


@pytest.mark.parametrize("view", ["flipped", "transposed"])
@pytest.mark.parametrize(("name", "shape", "t_fn", "np_fn"), CASES, ids=CASE_IDS)
def test_movement_noncontiguous(name: str, shape: tuple[int, ...], t_fn: Callable, np_fn: Callable, view: str):
    a = distinct(shape, dtypes.int32)
    check(t_fn(_input(a, dtypes.int32, "CPU", view)), np_fn(a), dtypes.int32)


@pytest.mark.parametrize(("name", "shape", "t_fn", "np_fn"), CASES, ids=CASE_IDS)
def test_movement_of_expression_then_compute(name: str, shape: tuple[int, ...], t_fn: Callable, np_fn: Callable):
    # the op applied to a lazy expression, and its result fed into more compute (fused where possible)
    a = distinct(shape, dtypes.float32)
    ref = np.asarray(np_fn(a.astype(np.float64) * 2 + 1)) * 3 - 1
    check(t_fn(Tensor(a) * 2 + 1) * 3 - 1, ref, dtypes.float32)


@pytest.mark.parametrize("device", DEVICES)
def test_view_dtype_is_bitcast(device: str):
    a = np.array([1.0, -2.5, 0.0], np.float32)
    check(Tensor(a, device=device).view(dtypes.int32), a.view(np.int32), dtypes.int32)
    check(Tensor(a, device=device).T.view("int32").view(3, 1), a.view(np.int32).reshape(3, 1), dtypes.int32)


# ---------------------------------------------------------------------------------------------------------------
# pad: values, -0.0, negative padding against torch


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_pad_constant_value(dtype: DType, device: str):
    a = distinct((2, 3), dtype)
    value = {dtypes.float32: -7.5, dtypes.float16: 0.25, dtypes.int32: -7, dtypes.bool: True}[dtype]
    t = Tensor(a, device=device)
    check(t.pad((1, 0, 2, 1), value=value), np.pad(a, ((2, 1), (1, 0)), constant_values=value), dtype)
    check(t.pad(((0, 1), None), "constant", value), np.pad(a, ((0, 1), (0, 0)), constant_values=value), dtype)
    check(t.pad((-1, 1), value=value), np.pad(a[:, 1:], ((0, 0), (0, 1)), constant_values=value), dtype)


def test_pad_value_keeps_dtype():
    # a Python value is cast to the tensor's dtype (as torch does), never promotes it
    check(Tensor([1, 2], dtype=dtypes.int32).pad((1, 1), value=3.0), np.array([3, 1, 2, 3]), dtypes.int32)
    check(Tensor([1, 2], dtype=dtypes.float16).pad((0, 1), value=2.5), np.array([1, 2, 2.5]), dtypes.float16)
    check(Tensor([True]).pad((1, 0), value=1), np.array([True, True]), dtypes.bool)


@pytest.mark.parametrize("device", DEVICES)
def test_pad_negative_zero(device: str):
    out = Tensor([1.0], device=device).pad((1, 1), value=-0.0).numpy()
    assert np.array_equal(np.signbit(out), [True, False, True]), out
    out = Tensor([-0.0, 2.0], device=device).pad((1, 0), mode="replicate").numpy()
    assert np.array_equal(np.signbit(out), [True, True, False]), out


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("padding", [(-1, 2), (2, -3), (-1, -1, 2, 1), (1, 1, -2, 1), (3, -3)])
def test_pad_negative_against_torch(mode: str, padding: tuple[int, ...]):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    a = distinct((1, 3, 4), dtypes.float32)
    pairs = [(padding[i], padding[i + 1]) for i in range(0, len(padding), 2)]
    sizes = [4, 3][: len(pairs)]
    # torch's circular pad crops first, then wraps; its 3-d path does not check a wrap past the cropped axis
    # (it reads uninitialized memory), so that case is checked here to raise, as its 2-d path does
    wraps = any(max(b, a) > s + min(b, 0) + min(a, 0) for (b, a), s in zip(pairs, sizes))
    try:
        if mode == "circular" and wraps:
            raise RuntimeError("wraps around more than once")
        ref = F.pad(torch.tensor(a), padding, mode=mode).numpy()
    except RuntimeError:
        with pytest.raises((ValueError, RuntimeError), match="pad"):
            Tensor(a).pad(padding, mode=mode).realize()
        return
    check(Tensor(a).pad(padding, mode=mode), ref, dtypes.float32)


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
@pytest.mark.parametrize("shape", [(2, 3, 4), (1, 2, 5, 3)])
def test_pad_modes_against_torch(mode: str, shape: tuple[int, ...]):
    torch = pytest.importorskip("torch")
    a = distinct(shape, dtypes.float32)
    padding = (2, 1, 0, 2)
    ref = torch.nn.functional.pad(torch.tensor(a), padding, mode=mode).numpy()
    check(Tensor(a).pad(padding, mode=mode), ref, dtypes.float32)


def test_pad_mode_of_noncontiguous_then_reduce():
    a = distinct((3, 4), dtypes.float32)
    t = Tensor(a.T.copy()).T.flip(1)
    ref = np.pad(np.flip(a, 1), ((2, 1), (3, 2)), "reflect")
    check(t.pad(((2, 1), (3, 2)), mode="reflect"), ref, dtypes.float32)
    check(t.pad((1, 1, 1, 1), mode="circular").sum(axis=0), np.pad(np.flip(a, 1), 1, "wrap").sum(0), dtypes.float32)


# ---------------------------------------------------------------------------------------------------------------
# cat and stack


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("shapes", "dim"),
    [
        ([(2, 3), (1, 3)], 0),
        ([(2, 3), (2, 1), (2, 2)], 1),
        ([(2, 3), (2, 1), (2, 2)], -1),
        ([(2, 0), (2, 3), (2, 0)], 1),
        ([(0, 3), (0, 3)], 0),
        ([(1, 2, 2), (1, 2, 2)], -2),
        ([(4,)], 0),
    ],
)
def test_cat(shapes: list[tuple[int, ...]], dim: int, dtype: DType, device: str):
    arrays = [
        distinct(s, dtype) if dtype == dtypes.bool else distinct(s, dtype) + i * 100 for i, s in enumerate(shapes)
    ]
    tensors = [Tensor(a, device=device) for a in arrays]
    ref = np.concatenate(arrays, axis=dim)
    check(tensors[0].cat(*tensors[1:], dim=dim), ref, dtype)
    check(Tensor.cat(*tensors, dim=dim), ref, dtype)
    check(Tensor.cat(tensors, dim=dim), ref, dtype)


@pytest.mark.parametrize("device", DEVICES)
def test_cat_noncontiguous_and_lazy_inputs(device: str):
    a, b = distinct((3, 4), dtypes.float32), distinct((4, 2), dtypes.float32)
    ta, tb = Tensor(a, device=device), Tensor(b, device=device)
    ref = np.concatenate([np.flip(a, 0), b.T * 2, a[1:2]], axis=0)
    check(ta.flip(0).cat(tb.T * 2, ta.shrink(((1, 2), None))), ref, dtypes.float32)
    ref = np.concatenate([a.T, b], axis=1)
    check(Tensor.cat(ta.T, tb, dim=1), ref, dtypes.float32)


@pytest.mark.parametrize("device", DEVICES)
def test_cat_composes_with_reductions(device: str):
    a, b = distinct((2, 3), dtypes.float32), distinct((4, 3), dtypes.float32) - 10
    ta, tb = Tensor(a, device=device), Tensor(b, device=device)
    both = np.concatenate([a, b])
    check(ta.cat(tb).sum(), both.sum(), dtypes.float32)
    check(ta.cat(tb).max(axis=0), both.max(0), dtypes.float32)
    check((ta.cat(tb, tb) * 2 + 1).sum(axis=1), (np.concatenate([a, b, b]) * 2 + 1).sum(1), dtypes.float32)
    check(ta.stack(ta * 3).sum(axis=0), a * 4, dtypes.float32)
    ai = distinct((3,), dtypes.int32)
    check(Tensor(ai, device=device).cat(Tensor(ai, device=device)).sum(), np.int32(2 * ai.sum()), dtypes.int32)
    check(Tensor([True, False], device=device).cat(Tensor([True], device=device)).sum(), np.int32(2), dtypes.int32)


def test_cat_one_kernel():
    a, b = Tensor(distinct((3, 4), dtypes.float32)).realize(), Tensor(distinct((2, 4), dtypes.float32)).realize()
    GlobalCounters.reset()
    out = (a.cat(b) * 2).sum().item()
    assert out == float((np.concatenate([a.numpy(), b.numpy()]) * 2).sum())
    assert GlobalCounters.kernel_count == 1


def test_cat_keeps_negative_zero():
    out = Tensor([-0.0]).cat(Tensor([-0.0, 1.0]), Tensor([-0.0])).numpy()
    assert np.array_equal(np.signbit(out), [True, True, False, True]), out


def test_cat_skips_empty_1d_as_torch():
    # torch.cat skips a 1-d tensor of size 0 whatever the other shapes (but still promotes its dtype)
    a = distinct((2, 3), dtypes.int32)
    check(Tensor.zeros(0, dtype=dtypes.float16).cat(Tensor(a)), a, dtypes.float16)
    check(Tensor(a).cat(Tensor.zeros(0), dim=1), a, dtypes.float32)
    check(Tensor.zeros(0).cat(Tensor.zeros(0)), np.zeros(0), dtypes.float32)


@pytest.mark.parametrize(
    ("da", "db"),
    [
        (dtypes.int32, dtypes.float16),
        (dtypes.bool, dtypes.int32),
        (dtypes.float16, dtypes.float32),
        (dtypes.int8, dtypes.uint8),
        (dtypes.bool, dtypes.bool),
        (dtypes.int32, dtypes.int32),
        (dtypes.uint8, dtypes.bool),
    ],
)
def test_cat_stack_promote_as_torch(da: DType, db: DType):
    torch = pytest.importorskip("torch")
    a = np.array([1, 0, 1]).astype(NP[da])
    b = np.array([0, 1, 1]).astype(NP[db])
    ref = torch.cat([torch.tensor(a), torch.tensor(b)])
    want = {v: k for k, v in NP.items()}[ref.numpy().dtype.type]
    check(Tensor(a).cat(Tensor(b)), ref.numpy(), want)
    check(Tensor(a).stack(Tensor(b), dim=1), torch.stack([torch.tensor(a), torch.tensor(b)], 1).numpy(), want)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("shape", "n", "dim"), [((2, 3), 3, 0), ((2, 3), 2, 1), ((2, 3), 2, -1), ((0, 2), 2, 1)])
def test_stack(shape: tuple[int, ...], n: int, dim: int, dtype: DType, device: str):
    arrays = [np.flip(distinct(shape, dtype), -1) if i % 2 else distinct(shape, dtype) for i in range(n)]
    tensors = [Tensor(a, device=device) for a in arrays]
    ref = np.stack(arrays, axis=dim)
    check(tensors[0].stack(*tensors[1:], dim=dim), ref, dtype)
    check(Tensor.stack(tensors, dim=dim), ref, dtype)


@pytest.mark.parametrize("device", DEVICES)
def test_stack_scalars_and_views(device: str):
    check(Tensor.stack(Tensor(1, device=device), Tensor(2.5, device=device)), np.array([1, 2.5]), dtypes.float32)
    a = distinct((2, 3), dtypes.int32)
    t = Tensor(a, device=device)
    check(t.T.stack(t.T.flip(0), dim=1), np.stack([a.T, np.flip(a.T, 0)], axis=1), dtypes.int32)


# ---------------------------------------------------------------------------------------------------------------
# split and chunk (torch's rules) and ops that give tuples


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    ("shape", "sizes", "dim"),
    [
        ((5, 2), 2, 0),
        ((5, 2), 5, 0),
        ((5, 2), 7, 0),
        ((2, 6), 3, -1),
        ((2, 6), [1, 0, 5], 1),
        ((2, 6), (6,), 1),
        ((0, 2), 2, 0),
        ((0, 2), 0, 0),
        ((0, 2), [0, 0], 0),
    ],
)
def test_split_against_torch(shape: tuple[int, ...], sizes: Any, dim: int, device: str):
    torch = pytest.importorskip("torch")
    a = distinct(shape, dtypes.int32)
    refs = torch.tensor(a).split(list(sizes) if isinstance(sizes, tuple) else sizes, dim)
    got = Tensor(a, device=device).split(sizes, dim)
    assert isinstance(got, tuple) and len(got) == len(refs)
    for g, r in zip(got, refs):
        check(g, r.numpy(), dtypes.int32)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    ("shape", "chunks", "dim"),
    [((5,), 3, 0), ((6,), 4, 0), ((6,), 3, 0), ((2, 5), 2, 1), ((2, 5), 9, -1), ((0, 3), 3, 0), ((3, 1), 2, 1)],
)
def test_chunk_against_torch(shape: tuple[int, ...], chunks: int, dim: int, device: str):
    torch = pytest.importorskip("torch")
    a = distinct(shape, dtypes.float32)
    refs = torch.tensor(a).chunk(chunks, dim)
    got = Tensor(a, device=device).chunk(chunks, dim)
    assert isinstance(got, tuple) and len(got) == len(refs)
    for g, r in zip(got, refs):
        check(g, r.numpy(), dtypes.float32)


def test_split_pieces_compose():
    a = distinct((6, 4), dtypes.float32)
    x, y, z = Tensor(a).split([1, 2, 3])
    check(z.cat(x, y) + 1, np.concatenate([a[3:], a[:1], a[1:3]]) + 1, dtypes.float32)
    check(Tensor(a).chunk(2, dim=1)[1].sum(axis=1), a[:, 2:].sum(1), dtypes.float32)


@pytest.mark.parametrize(
    ("shape", "dim", "size", "step"),
    [((7,), 0, 3, 2), ((9, 2), 0, 4, 3), ((2, 8), 1, 3, 5), ((4, 4), -1, 4, 1), ((3,), 0, 0, 2), ((0,), 0, 0, 1)],
)
def test_unfold_against_torch(shape: tuple[int, ...], dim: int, size: int, step: int):
    torch = pytest.importorskip("torch")
    a = distinct(shape, dtypes.float32)
    check(Tensor(a).unfold(dim, size, step), torch.tensor(a).unfold(dim, size, step).numpy(), dtypes.float32)


def test_unfold_moving_sum():
    a = distinct((3, 10), dtypes.float32)
    ref = np_unfold(a, 1, 4, 2).sum(-1)
    check(Tensor(a).unfold(1, 4, 2).sum(axis=-1), ref, dtypes.float32)
    check((Tensor(a) * 2).unfold(1, 3, 1).max(axis=-1), np_unfold(a * 2, 1, 3, 1).max(-1), dtypes.float32)


def test_roll_and_repeat_interleave_against_torch():
    torch = pytest.importorskip("torch")
    a = distinct((3, 4), dtypes.int32)
    ta = torch.tensor(a)
    check(Tensor(a).roll((2, -5), (1, 0)), ta.roll((2, -5), (1, 0)).numpy(), dtypes.int32)
    check(Tensor(a).roll(-7), ta.roll(-7).numpy(), dtypes.int32)
    check(Tensor(a).repeat_interleave(3, dim=0), ta.repeat_interleave(3, dim=0).numpy(), dtypes.int32)
    check(Tensor(a).repeat(2, 1, 2), ta.repeat(2, 1, 2).numpy(), dtypes.int32)
    check(Tensor(a).diagonal(1), ta.diagonal(1).numpy(), dtypes.int32)
    check(Tensor(a[0]).diag(-1), ta[0].diag(-1).numpy(), dtypes.int32)


# ---------------------------------------------------------------------------------------------------------------
# the graphs: these ops are views (movement ops only), not a where/cat of slices


def _ops(t: Tensor) -> set[Ops]:
    return {u.op for u in t.uop.toposort()}


@pytest.mark.parametrize(
    "fn",
    [
        lambda t: t.unfold(0, 3, 1),
        lambda t: t.unfold(1, 2, 2),
        lambda t: t.unfold(0, 2, 3),
        lambda t: t.repeat_interleave(3, dim=1),
        lambda t: t.repeat_interleave(2),
        lambda t: t.repeat(2, 3),
        lambda t: t.roll((1, 2), (0, 1)),
        lambda t: t.diagonal(),
        lambda t: t.flatten().diag(),
        lambda t: t.pad((1, 2, 3, 0), mode="circular"),
        lambda t: t.split(2, 1)[1],
        lambda t: t.chunk(2)[0],
        lambda t: t.movedim(0, 1).squeeze().unsqueeze(0).flatten(),
    ],
)
def test_views_are_movement_only(fn: Callable[[Tensor], Tensor]):
    movement = {Ops.RESHAPE, Ops.PERMUTE, Ops.EXPAND, Ops.PAD, Ops.SHRINK, Ops.FLIP, Ops.BUFFER}
    t = Tensor(distinct((4, 5), dtypes.float32)).realize()
    extra = _ops(fn(t)) - movement - _ops(t)
    assert not extra, extra


def test_cat_graph_is_one_where_per_piece():
    pieces = [Tensor(distinct((2, 3), dtypes.float32)).realize() for _ in range(5)]
    out = Tensor.cat(*pieces, dim=1)
    wheres = [u for u in out.uop.toposort() if u.op is Ops.WHERE]
    assert len(wheres) == 4
    assert not {Ops.ADD, Ops.MUL} & _ops(out)


# ---------------------------------------------------------------------------------------------------------------
# errors: the PyTorch class, and a message naming the op and the offending shape / dim


def _shape_in(msg: str, shape: tuple[int, ...]) -> bool:
    return str(shape) in msg or str(list(shape)) in msg


ERRORS: list[tuple[str, Callable[[], Any], type[BaseException] | tuple, str, tuple[int, ...] | None]] = [
    ("view_bad_size", lambda: Tensor.ones(2, 3).view(4, 2), ValueError, "reshape", (2, 3)),
    ("flatten_dim", lambda: Tensor.ones(2, 3).flatten(2), IndexError, "flatten.*2", (2, 3)),
    ("flatten_order", lambda: Tensor.ones(2, 3, 4).flatten(2, 1), ValueError, "flatten", (2, 3, 4)),
    ("unflatten_sizes", lambda: Tensor.ones(2, 3).unflatten(1, (2, 2)), ValueError, "unflatten.*3", (2, 3)),
    ("unflatten_empty", lambda: Tensor.ones(2, 3).unflatten(1, ()), ValueError, "unflatten", (2, 3)),
    ("unflatten_infer", lambda: Tensor.ones(2, 3).unflatten(1, (-1, 2)), ValueError, "unflatten", (2, 3)),
    ("unflatten_two_infer", lambda: Tensor.ones(2, 4).unflatten(1, (-1, -1)), ValueError, "unflatten", None),
    ("squeeze_dim", lambda: Tensor.ones(1, 3).squeeze(2), IndexError, "squeeze.*2", (1, 3)),
    ("squeeze_repeat", lambda: Tensor.ones(1, 3, 1).squeeze((0, 0)), ValueError, "squeeze", (1, 3, 1)),
    ("squeeze_0d", lambda: Tensor(1.0).squeeze(1), IndexError, "squeeze.*1", None),
    ("unsqueeze_dim", lambda: Tensor.ones(2, 3).unsqueeze(3), IndexError, "unsqueeze.*3", (2, 3)),
    ("unsqueeze_neg", lambda: Tensor.ones(2, 3).unsqueeze(-4), IndexError, "unsqueeze.*-4", (2, 3)),
    ("transpose_dim", lambda: Tensor.ones(2, 3).transpose(0, 2), IndexError, "transpose.*2", (2, 3)),
    ("transpose_neg", lambda: Tensor.ones(2, 3).transpose(-3, 0), IndexError, "transpose.*-3", (2, 3)),
    ("transpose_1d_default", lambda: Tensor.ones(3).transpose(), IndexError, "transpose.*1", (3,)),
    ("transpose_0d", lambda: Tensor(1.0).transpose(1, 0), IndexError, "transpose.*1", None),
    ("permute_repeat", lambda: Tensor.ones(2, 3).permute(0, 0), ValueError, "permute", (2, 3)),
    ("permute_range", lambda: Tensor.ones(2, 3).permute(0, 2), IndexError, "permute.*2", (2, 3)),
    ("permute_count", lambda: Tensor.ones(2, 3).permute(0), ValueError, "permute", (2, 3)),
    ("permute_neg_range", lambda: Tensor.ones(2, 3).permute(-3, 0), IndexError, "permute.*-3", (2, 3)),
    ("movedim_count", lambda: Tensor.ones(2, 3).movedim((0, 1), 0), ValueError, "movedim", None),
    ("movedim_repeat", lambda: Tensor.ones(2, 3).movedim((0, 1), (1, 1)), ValueError, "movedim", (2, 3)),
    ("expand_new_minus1", lambda: Tensor.ones(1, 3).expand(-1, -1, 3), ValueError, "expand.*-1", None),
    ("expand_negative", lambda: Tensor.ones(1, 3).expand(-2, 3), ValueError, "expand.*-2", (1, 3)),
    ("expand_mismatch", lambda: Tensor.ones(2, 3).expand(2, 4), ValueError, "expand", (2, 3)),
    ("expand_fewer", lambda: Tensor.ones(2, 3).expand(3), ValueError, "expand", (2, 3)),
    ("narrow_long", lambda: Tensor.ones(2, 3).narrow(1, 2, 2), ValueError, "narrow", (2, 3)),
    ("narrow_start", lambda: Tensor.ones(2, 3).narrow(1, 4, 0), IndexError, "narrow.*4", (2, 3)),
    ("cat_shapes", lambda: Tensor.ones(2, 3).cat(Tensor.ones(2, 4)), ValueError, "cat.*dim 0", (2, 4)),
    ("cat_ndim", lambda: Tensor.ones(2, 3).cat(Tensor.ones(2, 3, 1)), ValueError, "cat", (2, 3, 1)),
    ("cat_dim", lambda: Tensor.ones(2, 3).cat(Tensor.ones(2, 3), dim=2), IndexError, "cat.*2", (2, 3)),
    ("cat_0d", lambda: Tensor(1.0).cat(Tensor(2.0)), ValueError, "cat.*0-d", None),
    ("cat_not_tensor", lambda: Tensor.ones(2).cat([1.0, 2.0]), TypeError, "cat", None),
    ("cat_empty", lambda: Tensor.cat([]), ValueError, "cat", None),
    ("cat_devices", lambda: Tensor.ones(2).cat(Tensor.ones(2, device="PYTHON")), RuntimeError, "cat.*PYTHON", None),
    ("stack_shapes", lambda: Tensor.ones(2, 3).stack(Tensor.ones(2, 4)), ValueError, "stack", (2, 4)),
    ("stack_dim", lambda: Tensor.ones(2, 3).stack(Tensor.ones(2, 3), dim=3), IndexError, "stack.*3", (2, 3)),
    ("repeat_fewer", lambda: Tensor.ones(2, 3).repeat(2), ValueError, "repeat", (2, 3)),
    ("repeat_negative", lambda: Tensor.ones(2, 3).repeat(-1, 2), ValueError, "repeat.*-1", None),
    ("ri_negative", lambda: Tensor.ones(2, 3).repeat_interleave(-1), ValueError, "repeat_interleave.*-1", None),
    ("ri_dim", lambda: Tensor.ones(2, 3).repeat_interleave(2, dim=2), IndexError, "repeat_interleave.*2", (2, 3)),
    ("ri_tensor", lambda: Tensor.ones(2).repeat_interleave(Tensor([1, 2])), TypeError, "repeat_interleave", None),
    ("split_sum", lambda: Tensor.ones(2, 3).split([1, 1], 1), ValueError, "split.*3", (2, 3)),
    ("split_negative", lambda: Tensor.ones(2, 3).split([4, -1], 1), ValueError, "split.*-1", None),
    ("split_zero", lambda: Tensor.ones(2, 3).split(0, 1), ValueError, "split.*0", (2, 3)),
    ("split_0d", lambda: Tensor(1.0).split(1), ValueError, "split.*0-d", None),
    ("split_dim", lambda: Tensor.ones(2, 3).split(1, 2), IndexError, "split.*2", (2, 3)),
    ("chunk_zero", lambda: Tensor.ones(2, 3).chunk(0), ValueError, "chunk.*0", None),
    ("chunk_0d", lambda: Tensor(1.0).chunk(1), ValueError, "chunk.*0-d", None),
    ("roll_align", lambda: Tensor.ones(2, 3).roll((1, 2), 0), ValueError, "roll", None),
    ("roll_flat_many", lambda: Tensor.ones(2, 3).roll((1, 2)), ValueError, "roll", None),
    ("roll_dim", lambda: Tensor.ones(2, 3).roll(1, 2), IndexError, "roll.*2", (2, 3)),
    ("roll_0d_dim", lambda: Tensor(1.0).roll(1, 0), IndexError, "roll", None),
    ("unfold_size", lambda: Tensor.ones(2, 3).unfold(1, 4, 1), ValueError, "unfold.*4", (2, 3)),
    ("unfold_step", lambda: Tensor.ones(2, 3).unfold(1, 2, 0), ValueError, "unfold.*step", None),
    ("unfold_dim", lambda: Tensor.ones(2, 3).unfold(2, 1, 1), IndexError, "unfold.*2", (2, 3)),
    ("diag_3d", lambda: Tensor.ones(2, 2, 2).diag(), ValueError, "diag", (2, 2, 2)),
    ("diag_0d", lambda: Tensor(1.0).diag(), ValueError, "diag", ()),
    ("diagonal_same", lambda: Tensor.ones(2, 3).diagonal(0, 1, -1), ValueError, "diagonal", (2, 3)),
    ("diagonal_1d", lambda: Tensor.ones(3).diagonal(), ValueError, "diagonal", (3,)),
    ("diagonal_dim", lambda: Tensor.ones(2, 3).diagonal(0, 0, 2), IndexError, "diagonal.*2", (2, 3)),
    ("pad_mode", lambda: Tensor.ones(2, 3).pad((1, 1), mode="wrap"), NotImplementedError, "pad.*wrap", None),
    ("pad_odd", lambda: Tensor.ones(2, 3).pad((1, 1, 1)), ValueError, "pad.*even", None),
    ("pad_too_many", lambda: Tensor.ones(2, 3).pad((1,) * 6), ValueError, "pad", (2, 3)),
    ("pad_pairs", lambda: Tensor.ones(2, 3).pad(((1, 1),)), ValueError, "pad", (2, 3)),
    ("pad_pair_type", lambda: Tensor.ones(2, 3).pad(((1, 1, 1), None)), TypeError, "pad", None),
    ("pad_crop_too_much", lambda: Tensor.ones(2, 3).pad((-4, 2)), ValueError, "pad.*-4", (2, 3)),
    ("reflect_too_big", lambda: Tensor.ones(2, 3).pad((3, 0), mode="reflect"), ValueError, "pad.*reflect.*3", (2, 3)),
    ("reflect_size1", lambda: Tensor.ones(2, 1).pad((1, 1), mode="reflect"), ValueError, "pad.*reflect", (2, 1)),
    ("circular_wrap", lambda: Tensor.ones(2, 3).pad((4, 0), mode="circular"), ValueError, "pad.*circular", (2, 3)),
    ("replicate_empty", lambda: Tensor.ones(2, 0).pad((1, 0), mode="replicate"), ValueError, "pad.*replic", (2, 0)),
    ("mode_value", lambda: Tensor.ones(2, 3).pad((1, 1), mode="reflect", value=1.0), ValueError, "pad.*value", None),
]


@pytest.mark.parametrize(("name", "fn", "exc", "pattern", "shape"), ERRORS, ids=[e[0] for e in ERRORS])
def test_errors(name: str, fn: Callable[[], Any], exc: Any, pattern: str, shape: tuple[int, ...] | None):
    with pytest.raises(exc) as e:
        fn()
    msg = str(e.value)
    assert not isinstance(e.value, AssertionError), repr(e.value)
    assert re.search(pattern, msg), msg
    if shape is not None:
        assert _shape_in(msg, shape), msg


# *** robustness: bad arguments fail at the public call, naming the op ***


@pytest.mark.parametrize("op", ["reshape_as", "view_as", "expand_as"])
@pytest.mark.parametrize("other", [None, "a", [1.0, 2.0]])
def test_as_ops_need_a_tensor(op: str, other: Any) -> None:
    with pytest.raises(TypeError, match=rf"{op}: expected a Tensor, got {type(other).__name__}"):
        getattr(Tensor.ones(2, 3), op)(other)


def test_shrink_bounds_must_be_int_pairs() -> None:
    x = Tensor.ones(2, 3)
    with pytest.raises(TypeError, match=r"shrink: a bound must be an int, got 0.5"):
        x.shrink(((0.5, 1), (0, 3)))
    with pytest.raises(ValueError, match=r"shrink: each entry of \(\(0, 1, 2\), \(0, 3\)\) must be a \(start, end\)"):
        x.shrink(((0, 1, 2), (0, 3)))


def test_pad_value_must_be_a_number() -> None:
    with pytest.raises(TypeError, match=r"pad: value must be a number, got 'a'"):
        Tensor.ones(2, 3).pad((1, 1), value="a")
    assert Tensor([1, 2]).pad((1, 1), value=np.int64(7)).tolist() == [7, 1, 2, 7]


def test_flip_axis_of_wrong_type() -> None:
    with pytest.raises(TypeError, match=r"flip: axis must be an int or a sequence of ints, got 1.5"):
        Tensor.ones(2, 3).flip(1.5)


@pytest.mark.parametrize("shapes", [[(0, 3), (2, 3)], [(0,), (2, 3)], [(2, 3), (0, 3), (1, 3)], [(0, 3), (0, 3)]])
def test_cat_gives_empty_inputs_a_gradient(shapes):
    # torch gives every input of cat a gradient of its own shape, an empty one for an empty input
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(10)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    xs = [Tensor(a) for a in arrays]
    for x in xs:
        x.requires_grad = True
    out = Tensor.cat(*xs)
    (out * out).sum().backward()
    txs = [torch.from_numpy(a).requires_grad_() for a in arrays]
    tout = torch.cat(txs)
    (tout * tout).sum().backward()
    np.testing.assert_array_equal(out.numpy(), tout.detach().numpy())
    for x, tx in zip(xs, txs):
        assert x.grad is not None and x.grad.shape == tuple(tx.grad.shape)
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy())


def test_stack_gives_empty_inputs_a_gradient():
    torch = pytest.importorskip("torch")
    xs = [Tensor(np.zeros((0, 3), np.float32)) for _ in range(2)]
    for x in xs:
        x.requires_grad = True
    Tensor.stack(*xs, dim=1).sum().backward()
    assert all(x.grad is not None and x.grad.shape == (0, 3) for x in xs)
    txs = [torch.zeros(0, 3, requires_grad=True) for _ in range(2)]
    torch.stack(txs, dim=1).sum().backward()
    assert all(tuple(t.grad.shape) == (0, 3) for t in txs)


def test_shrink_to_and_pad_to():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(Tensor(a).shrink_to(2, None).numpy(), a[:2])
    np.testing.assert_array_equal(Tensor(a).shrink_to((1, 3)).numpy(), a[:1, :3])
    np.testing.assert_array_equal(Tensor(a).pad_to(4, 6).numpy(), np.pad(a, ((0, 1), (0, 2))))
    np.testing.assert_array_equal(Tensor(a).pad_to(None, 5).numpy(), np.pad(a, ((0, 0), (0, 1))))
    with pytest.raises(ValueError, match=r"shrink_to: cannot shrink shape \(3, 4\) to \(4, 4\)"):
        Tensor(a).shrink_to(4, 4)
    with pytest.raises(ValueError, match=r"pad_to: cannot pad shape \(3, 4\) to \(3, 2\)"):
        Tensor(a).pad_to(3, 2)
    with pytest.raises(ValueError, match=r"pad_to: \(3,\) has 1 sizes"):
        Tensor(a).pad_to(3)
