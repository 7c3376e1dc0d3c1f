"""ONNX ops: indexing, scattering, selection and sorting (Gather*, Scatter*, OneHot, TopK, NonZero, Unique...).

Index tensors are data and stay lazy; ONNX lets an index be negative (counting from the end), which is wrapped
here. NonZero, Compress and Unique have output shapes that depend on the data: they read it back.

>>> import onnx
>>> from onnx import TensorProto, helper
>>> from zeptograd.onnx.runner import OnnxRunner
>>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])
>>> i = helper.make_tensor_value_info("i", TensorProto.INT64, [2])
>>> y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
>>> graph = helper.make_graph([helper.make_node("Gather", ["x", "i"], ["y"])], "g", [x, i], [y])
>>> run = OnnxRunner(helper.make_model(graph))
>>> run({"x": np.array([1.0, 2.0, 3.0], np.float32), "i": np.array([-1, 0])})["y"].tolist()
[3.0, 1.0]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from zeptograd.dtype import dtypes
from zeptograd.onnx.registry import onnx_op
from zeptograd.tensor import Tensor


def _axis(axis: int, rank: int, what: str = "axis") -> int:
    if not -rank <= axis < rank:
        raise ValueError(f"{what} {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def _wrapped(indices: Tensor, size: int) -> Tensor:
    """Indices in [-size, size) as [0, size): a negative one counts from the end."""
    if not dtypes.is_int(indices.dtype) or dtypes.is_bool(indices.dtype):
        raise ValueError(f"indices must be integers, got {indices.dtype}")
    return (indices < 0).where(indices + size, indices)


# *** gathering ***


@onnx_op("Gather")
def gather(data: Tensor, indices: Tensor, *, axis: int = 0) -> Tensor:
    """Gather: data indexed by `indices` on `axis`; out shape data[:axis] + indices + data[axis+1:]."""
    ax = _axis(axis, data.ndim)
    return data[(slice(None),) * ax + (_wrapped(indices, data.shape[ax]),)]


@onnx_op("GatherElements", 11)
def gather_elements(data: Tensor, indices: Tensor, *, axis: int = 0) -> Tensor:
    """GatherElements: out[i][j] = data[indices[i][j]][j] (axis 0; likewise others), out shaped like indices."""
    ax = _axis(axis, data.ndim)
    if indices.ndim != data.ndim:
        raise ValueError(f"indices of shape {indices.shape} must have the rank of data {data.shape}")
    return data.gather(ax, _wrapped(indices, data.shape[ax]))


@onnx_op("GatherND", 11)
def gather_nd(data: Tensor, indices: Tensor, *, batch_dims: int = 0) -> Tensor:
    """GatherND: the slices data[b..., indices[b..., i..., :]] (index tuples on the last axis of indices)."""
    k = indices.shape[-1] if indices.ndim else 0
    b = batch_dims
    if indices.ndim < 1 or not 0 <= b < min(data.ndim, indices.ndim) or b + k > data.ndim:
        raise ValueError(f"cannot gather from shape {data.shape} with indices {indices.shape}, batch_dims={b}")
    if data.shape[:b] != indices.shape[:b]:
        raise ValueError(f"data {data.shape} and indices {indices.shape} differ on the {b} batch axes")
    lead = indices.shape[:-1]
    index: list[Tensor] = []
    for d in range(b):  # the batch axes pair up: each an arange along its own axis of the index tuple grid
        shape = [1] * len(lead)
        shape[d] = lead[d]
        index.append(Tensor.arange(lead[d], dtype=dtypes.int64, device=data.device).reshape(shape))
    for j in range(k):
        index.append(_wrapped(indices[..., j], data.shape[b + j]))
    return data[tuple(index)]


# *** scattering ***

_REDUCTIONS = {"add": "sum", "mul": "prod", "max": "amax", "min": "amin"}


def _scattered(data: Tensor, axis: int, indices: Tensor, updates: Tensor, reduction: str) -> Tensor:
    ax = _axis(axis, data.ndim)
    if indices.shape != updates.shape or indices.ndim != data.ndim:
        raise ValueError(f"indices {indices.shape} and updates {updates.shape} must match, of data's rank {data.ndim}")
    idx = _wrapped(indices, data.shape[ax])
    if reduction == "none":
        return data.scatter(ax, idx, updates)
    if reduction not in _REDUCTIONS:
        raise ValueError(f"reduction={reduction!r} is not supported (none, add, mul, max or min)")
    return data.scatter_reduce(ax, idx, updates, _REDUCTIONS[reduction])


@onnx_op("Scatter", 9)
def scatter(data: Tensor, indices: Tensor, updates: Tensor, *, axis: int = 0) -> Tensor:
    """Scatter: data with out[indices[i][j]][j] = updates[i][j] (axis 0; likewise others)."""
    return _scattered(data, axis, indices, updates, "none")


@onnx_op("ScatterElements", 11)
def scatter_elements(
    data: Tensor, indices: Tensor, updates: Tensor, *, axis: int = 0, reduction: str = "none"
) -> Tensor:
    """ScatterElements: data with updates written (or added, multiplied, maxed, mined) at indices along axis."""
    return _scattered(data, axis, indices, updates, reduction)


@onnx_op("ScatterND", 11)
def scatter_nd(data: Tensor, indices: Tensor, updates: Tensor, *, reduction: str = "none") -> Tensor:
    """ScatterND: data with the slices updates[i...] written (or reduced) at data[indices[i..., :]]."""
    k = indices.shape[-1] if indices.ndim else 0
    if indices.ndim < 1 or k > data.ndim or updates.shape != indices.shape[:-1] + data.shape[k:]:
        raise ValueError(f"cannot scatter updates {updates.shape} into {data.shape} at indices {indices.shape}")
    # the first k axes of data flattened into one: each index tuple becomes one row number
    rows = int(np.prod(data.shape[:k]))
    rest = data.shape[k:]
    row = None
    for j in range(k):
        stride = int(np.prod(data.shape[j + 1 : k]))
        term = _wrapped(indices[..., j], data.shape[j]).cast(dtypes.int64) * stride
        row = term if row is None else row + term
    n = int(np.prod(indices.shape[:-1]))
    width = int(np.prod(rest))
    flat = data.reshape(rows, width)
    if n == 0 or row is None:
        return data if n == 0 else updates.reshape(data.shape)
    idx = row.reshape(n, 1).expand(n, width)
    out = _scattered(flat, 0, idx, updates.reshape(n, width), reduction)
    return out.reshape(data.shape)


@onnx_op("TensorScatter", 24)
def tensor_scatter(
    past_cache: Tensor, update: Tensor, write_indices: Tensor | None = None, *, axis: int = -2, mode: str = "linear"
) -> Tensor:
    """TensorScatter: past_cache with update written along `axis` from write_indices[batch] (wrapping if circular)."""
    ax = _axis(axis, past_cache.ndim)
    if ax == 0:
        raise ValueError("axis must not be the batch axis 0")
    if mode not in ("linear", "circular"):
        raise ValueError(f"mode={mode!r} is not supported (linear or circular)")
    cache_len, seq_len = past_cache.shape[ax], update.shape[ax]
    if (
        update.ndim != past_cache.ndim
        or seq_len > cache_len
        or any(u != c for i, (u, c) in enumerate(zip(update.shape, past_cache.shape, strict=True)) if i != ax)
    ):
        raise ValueError(f"update {update.shape} does not fit past_cache {past_cache.shape} on axis {axis}")
    batch = past_cache.shape[0]
    if write_indices is None:
        start = Tensor.zeros(batch, dtype=dtypes.int64, device=past_cache.device)
    else:
        start = write_indices.cast(dtypes.int64)
    shape = [1] * past_cache.ndim
    shape[ax] = cache_len
    pos = Tensor.arange(cache_len, dtype=dtypes.int64, device=past_cache.device).reshape(shape)
    bshape = [1] * past_cache.ndim
    bshape[0] = batch
    at = pos - start.reshape(bshape)  # the update position each cache position would take, per batch
    if mode == "circular":
        at = (at % cache_len + cache_len) % cache_len
    hit = (at >= 0) & (at < seq_len)
    idx = hit.where(at, 0).expand([cache_len if i == ax else s for i, s in enumerate(past_cache.shape)])
    return hit.where(update.gather(ax, idx), past_cache)


# *** one-hot, selection ***


@onnx_op("OneHot", 9, static=(1,))
def one_hot(indices: Tensor, depth: Any, values: Tensor, *, axis: int = -1) -> Tensor:
    """OneHot: values[1] where the position on the new `axis` is the index (negative: from depth), else values[0]."""
    n = int(np.asarray(depth).reshape(-1)[0])
    ax = _axis(axis, indices.ndim + 1)
    if values.numel() != 2:
        raise ValueError(f"values must hold [off, on], got shape {values.shape}")
    idx = indices if dtypes.is_int(indices.dtype) else indices.cast(dtypes.int64)
    idx = (idx < 0).where(idx + n, idx).cast(dtypes.int64)
    shape = [1] * (indices.ndim + 1)
    shape[ax] = n
    pos = Tensor.arange(n, dtype=dtypes.int64, device=indices.device).reshape(shape)
    off, on = values.reshape(2)[0], values.reshape(2)[1]
    return (idx.unsqueeze(ax) == pos).where(on, off)


@onnx_op("Compress", 9)
def compress(x: Tensor, condition: Tensor, *, axis: int | None = None) -> Tensor:
    """Compress: the slices of x along `axis` (of flattened x if none) where condition is true."""
    data = x.reshape(-1) if axis is None else x
    ax = 0 if axis is None else _axis(axis, x.ndim)
    if condition.ndim != 1:
        raise ValueError(f"condition must be 1-D, got shape {condition.shape}")
    # the output's length is the number of true conditions: data, so the condition is read back
    keep = [i for i, c in enumerate(condition.tolist()) if c and i < data.shape[ax]]
    if not keep:
        return data.shrink(tuple((0, 0) if i == ax else None for i in range(data.ndim)))
    return data[(slice(None),) * ax + (Tensor(keep, dtype=dtypes.int64, device=x.device),)]


@onnx_op("NonZero", 9)
def non_zero(x: Tensor) -> Tensor:
    """NonZero: the (rank, n) int64 coordinates of x's nonzero elements in row-major order."""
    if x.ndim == 0:
        # a scalar counts as one element of a 1-D tensor (numpy's nonzero of an array of rank 0)
        return non_zero(x.reshape(1))
    # n is data: Tensor.nonzero reads the count back
    return x.nonzero().transpose(0, 1).cast(dtypes.int64)


@onnx_op("Unique", 11)
def unique(x: Tensor, *, axis: int | None = None, sorted: int = 1, ctx: Any) -> tuple[Tensor, ...]:
    """Unique: x's distinct elements (or slices along axis), the first index of each, the inverse and the counts."""
    # every output's shape is a count of distinct values: data, so x is read back and compared in numpy
    array = x.numpy()  # a narrow float as float32, a narrow int as int8 or uint8: exactly its values
    ax = None if axis is None else _axis(axis, x.ndim)
    _, first, inverse, counts = np.unique(array, return_index=True, return_inverse=True, return_counts=True, axis=ax)
    inverse = inverse.reshape(-1)
    if not sorted:
        # in the order of first appearance: renumber the distinct values by their first index
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        first, counts, inverse = first[order], counts[order], rank[inverse]
    dev = x.device
    take = Tensor(first.tolist(), dtype=dtypes.int64, device=dev)
    y = x.reshape(-1)[take] if ax is None else x[(slice(None),) * ax + (take,)]
    outs = (y, take, Tensor(inverse.tolist(), dtype=dtypes.int64, device=dev))
    return (*outs, Tensor(counts.tolist(), dtype=dtypes.int64, device=dev))[: max(ctx.n_outputs, 1)]


# *** sorting ***


def _top_k(x: Tensor, k: int, axis: int, largest: int) -> tuple[Tensor, Tensor]:
    ax = _axis(axis, x.ndim)
    if not 0 <= k <= x.shape[ax]:
        raise ValueError(f"k={k} is out of range for axis {axis} of shape {x.shape}")
    values, indices = x.topk(k, dim=ax, largest=bool(largest))
    return values, indices.cast(dtypes.int64)


@onnx_op("TopK", 1)
def top_k_v1(x: Tensor, *, k: int, axis: int = -1) -> tuple[Tensor, Tensor]:
    """TopK-1: the `k` largest values along axis and their int64 indices (ties: the smaller index first)."""
    return _top_k(x, k, axis, 1)


@onnx_op("TopK", 10, static=(1,))
def top_k(x: Tensor, k: Any, *, axis: int = -1, largest: int = 1, sorted: int = 1) -> tuple[Tensor, Tensor]:
    """TopK: the K largest (or smallest) values along axis, sorted, and their int64 indices (ties: smaller index)."""
    return _top_k(x, int(np.asarray(k).reshape(-1)[0]), axis, largest)


@onnx_op("ReverseSequence", 10)
def reverse_sequence(x: Tensor, sequence_lens: Tensor, *, batch_axis: int = 1, time_axis: int = 0) -> Tensor:
    """ReverseSequence: for each batch b the first sequence_lens[b] steps along time_axis reversed, the rest kept."""
    if x.ndim < 2 or {batch_axis, time_axis} != {0, 1}:
        raise ValueError(f"batch_axis {batch_axis} and time_axis {time_axis} must be 0 and 1 (shape {x.shape})")
    steps = x.shape[time_axis]
    tshape, bshape = [1] * x.ndim, [1] * x.ndim
    tshape[time_axis], bshape[batch_axis] = steps, x.shape[batch_axis]
    t = Tensor.arange(steps, dtype=dtypes.int64, device=x.device).reshape(tshape)
    n = sequence_lens.cast(dtypes.int64).reshape(bshape)
    src = (t < n).where(n - 1 - t, t)
    return x.gather(time_axis, src.expand(x.shape))


# *** determinant ***


@onnx_op("Det", 11)
def det(x: Tensor) -> Tensor:
    """Det: the determinant of each square matrix on the last two axes (LU with partial pivoting)."""
    if x.ndim < 2 or x.shape[-1] != x.shape[-2] or not dtypes.is_float(x.dtype):
        raise ValueError(f"needs float square matrices on the last two axes, got {x.dtype} {x.shape}")
    n = x.shape[-1]
    lead = x.shape[:-2]
    a = x.cast(dtypes.float64) if x.dtype != dtypes.float64 else x
    result = Tensor.ones(lead, dtype=a.dtype, device=x.device)
    r = Tensor.arange(n, dtype=dtypes.int64, device=x.device)
    for k in range(n):
        # the row of the largest magnitude in column k (from row k on) becomes the pivot: swapped into row k
        below = (r >= k).where(a[..., :, k].abs(), -1.0)
        p = below.argmax(-1).cast(dtypes.int64).reshape(*lead, 1)
        rows = (r == k).where(p, (r == p).where(k, r))
        a = a.gather(-2, rows.reshape(*lead, n, 1).expand(*lead, n, n))
        pivot = a[..., k, k]
        result = result * (p.reshape(lead) != k).where(-1.0, 1.0) * pivot
        safe = (pivot == 0).where(1.0, pivot)
        factor = (r > k).where(a[..., :, k] / safe.reshape(*lead, 1), 0.0)
        a = (a - factor.reshape(*lead, n, 1) * a[..., k : k + 1, :]).contiguous()
    return result.cast(x.dtype)
