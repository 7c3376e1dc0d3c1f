"""ONNX ops: shapes, movement and creation (Constant, Shape, Reshape, Slice, Concat, Pad, Expand, Range...).

Shapes, axes, pads and slice bounds are static inputs (Python values); the data stays a lazy Tensor.

>>> import onnx
>>> from onnx import TensorProto, helper
>>> from zeptograd.onnx.runner import OnnxRunner
>>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
>>> y = helper.make_tensor_value_info("y", TensorProto.INT64, [1])
>>> graph = helper.make_graph([helper.make_node("Shape", ["x"], ["y"], start=-1)], "g", [x], [y])
>>> OnnxRunner(helper.make_model(graph))({"x": np.zeros((2, 3), np.float32)})["y"].tolist()
[3]
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from zeptograd.dtype import NARROW, dtypes, np_dtype
from zeptograd.onnx.dtypes import from_numpy, ml_type, onnx_dtype
from zeptograd.onnx.registry import onnx_op
from zeptograd.tensor import Tensor


def _axis(axis: int, rank: int, what: str = "axis") -> int:
    """`axis` in [-rank, rank) as a non-negative axis, or a ValueError naming it."""
    if not -rank <= axis < rank:
        raise ValueError(f"{what} {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def _ints(value: Any) -> list[int]:
    """A static input (a list, or a scalar for a 0-d tensor) as a flat list of ints."""
    return [int(v) for v in np.asarray(value).reshape(-1).tolist()]


# *** creation ***


@onnx_op("Constant")
def constant(
    *,
    value: Tensor | None = None,
    sparse_value: Any = None,
    value_float: float | None = None,
    value_floats: list[float] | None = None,
    value_int: int | None = None,
    value_ints: list[int] | None = None,
    value_string: str | None = None,
    value_strings: list[str] | None = None,
    ctx: Any,
) -> Tensor:
    """Constant: the one value its attribute holds, as a realized Tensor."""
    device = ctx.runner.device
    if value is not None:
        return value
    if value_float is not None:
        return Tensor(float(value_float), dtype=dtypes.float32, device=device).realize()
    if value_floats is not None:
        return Tensor([float(v) for v in value_floats], dtype=dtypes.float32, device=device).realize()
    if value_int is not None:
        return Tensor(int(value_int), dtype=dtypes.int64, device=device).realize()
    if value_ints is not None:
        return Tensor([int(v) for v in value_ints], dtype=dtypes.int64, device=device).realize()
    if sparse_value is not None:
        return _sparse_constant(sparse_value, ctx)
    if value_string is not None or value_strings is not None:
        raise ctx.error("a string constant is not supported (zeptograd has no string dtype)")
    raise ctx.error("the node has none of the attributes value, value_float(s), value_int(s), sparse_value")


def _sparse_constant(sparse: Any, ctx: Any) -> Tensor:
    """A SparseTensorProto made dense: its values at its indices (linear, or one row of coordinates each)."""
    from onnx import numpy_helper

    dt = onnx_dtype(sparse.values.data_type, f"node {ctx.name!r} (Constant) attribute sparse_value")
    values = numpy_helper.to_array(sparse.values)
    indices = numpy_helper.to_array(sparse.indices).astype(np.int64)
    dense = np.zeros(tuple(sparse.dims), dtype=values.dtype)
    if indices.ndim == 2:
        dense[tuple(indices.T)] = values
    else:
        dense.reshape(-1)[indices] = values
    return from_numpy(dense, dt, ctx.runner.device)


@onnx_op("ConstantOfShape", 9, static=(0,))
def constant_of_shape(shape: Any, *, value: Tensor | None = None, ctx: Any) -> Tensor:
    """ConstantOfShape: a tensor of `shape` filled with the one element of `value` (float32 0 by default)."""
    dims = _ints(shape)
    if value is None:
        return Tensor.full(dims, 0.0, dtype=dtypes.float32, device=ctx.runner.device)
    if value.numel() != 1:
        raise ctx.error(f"value must hold one element, got shape {value.shape}")
    # a constant broadcast: no buffer and no kernel of its own, it folds into whatever reads it
    return value.reshape(*[1] * len(dims)).expand(*dims) if dims else value.reshape(())


@onnx_op("EyeLike", 9)
def eye_like(x: Tensor, *, dtype: int | None = None, k: int = 0) -> Tensor:
    """EyeLike: a 2-D tensor of x's shape with ones on diagonal `k` (column - row = k), zeros elsewhere."""
    if x.ndim != 2:
        raise ValueError(f"EyeLike needs a 2-D input, got shape {x.shape}")
    dt = x.dtype if dtype is None else onnx_dtype(dtype, "EyeLike dtype")
    rows = Tensor.arange(x.shape[0], dtype=dtypes.int64, device=x.device).reshape(-1, 1)
    cols = Tensor.arange(x.shape[1], dtype=dtypes.int64, device=x.device).reshape(1, -1)
    return (cols - rows == k).cast(dt)


@onnx_op("Range", 11)
def range_(start: Tensor, limit: Tensor, delta: Tensor, *, stash_type: int = 1, ctx: Any) -> Tensor:
    """Range: start + i * delta for i in [0, max(ceil((limit - start) / delta), 0))."""
    # the length is the value of the inputs and the output keeps start's dtype: they are read here (not as static
    # inputs, which would lose the dtype), three scalars; the values are then known, so they are built on the host
    lo, hi, step = (_scalar(ctx.static(v), v) for v in (start, limit, delta))
    if step == 0:
        raise ctx.error("delta must not be 0")
    dt = start.dtype
    # numpy's arange in float64 (or int64): max(ceil((limit - start) / delta), 0) values, then rounded once to dt
    values = np.arange(lo, hi, step, dtype=np.float64 if dtypes.is_float(dt) else np.int64)
    if dt in NARROW:
        return from_numpy(values.astype(ml_type(dt)), dt, start.device)
    return from_numpy(values.astype(np_dtype(dt)), dt, start.device)


def _scalar(value: Any, t: Tensor) -> float | int:
    """A one-element input's value as a float (a float tensor) or an int."""
    v = np.asarray(value).reshape(-1)
    if v.size != 1:
        raise ValueError(f"needs a scalar, got shape {t.shape}")
    return float(v[0]) if dtypes.is_float(t.dtype) else int(v[0])


# *** shapes ***


@onnx_op("Shape")
def shape(data: Tensor, *, start: int = 0, end: int | None = None) -> Tensor:
    """Shape: data's shape[start:end] (clamped, negative counting from the end) as int64."""
    return Tensor(list(data.shape[start:end]), dtype=dtypes.int64, device=data.device)


@onnx_op("Size")
def size(data: Tensor) -> Tensor:
    """Size: the number of elements of data as an int64 scalar."""
    return Tensor(data.numel(), dtype=dtypes.int64, device=data.device)


@onnx_op("Identity")
def identity(x: Any) -> Any:
    """Identity(x) = x (a tensor, a sequence or an optional)."""
    return x


def _reshaped(data: Tensor, shape: list[int], allowzero: int) -> Tensor:
    given = list(shape)
    if not allowzero:
        if any(s == 0 and i >= data.ndim for i, s in enumerate(shape)):
            raise ValueError(f"shape {given} copies an axis (0) that data of shape {data.shape} lacks")
        shape = [data.shape[i] if s == 0 else s for i, s in enumerate(shape)]
    if shape.count(-1) > 1 or any(s < -1 for s in shape):
        raise ValueError(f"shape {given} has more than one -1 or a negative size")
    if -1 in shape:
        known = math.prod(s for s in shape if s != -1)
        if known == 0 or data.numel() % known:
            raise ValueError(f"cannot reshape data of shape {data.shape} to {given}")
        shape = [data.numel() // known if s == -1 else s for s in shape]
    if math.prod(shape) != data.numel():
        raise ValueError(f"cannot reshape data of shape {data.shape} to {given}")
    return data.reshape(shape)


@onnx_op("Reshape", 1)
def reshape_v1(data: Tensor, *, shape: list[int], consumed_inputs: list[int] | None = None) -> Tensor:
    """Reshape-1: to the `shape` attribute (0 copies the input's size, -1 is inferred)."""
    return _reshaped(data, list(shape), 0)


@onnx_op("Reshape", 5, static=(1,))
def reshape(data: Tensor, shape: Any, *, allowzero: int = 0) -> Tensor:
    """Reshape: 0 in `shape` copies the input's size there (unless `allowzero`), -1 is inferred."""
    return _reshaped(data, _ints(shape), allowzero)


@onnx_op("Flatten")
def flatten(x: Tensor, *, axis: int = 1) -> Tensor:
    """Flatten: to 2-D (prod(shape[:axis]), prod(shape[axis:]))."""
    if not -x.ndim <= axis <= x.ndim:
        raise ValueError(f"axis {axis} is out of range for rank {x.ndim}")
    axis = axis + x.ndim if axis < 0 else axis
    return x.reshape(math.prod(x.shape[:axis]), math.prod(x.shape[axis:]))


@onnx_op("Transpose")
def transpose(x: Tensor, *, perm: list[int] | None = None) -> Tensor:
    """Transpose: the axes in order `perm` (reversed by default)."""
    order = list(range(x.ndim))[::-1] if perm is None else [_axis(p, x.ndim, "perm axis") for p in perm]
    if sorted(order) != list(range(x.ndim)):
        raise ValueError(f"perm {perm} is not a permutation of the {x.ndim} axes")
    return x.permute(order)


def _squeezed(x: Tensor, axes: list[int] | None) -> Tensor:
    if axes is None:
        return x.reshape([s for s in x.shape if s != 1])
    drop = {_axis(a, x.ndim) for a in axes}
    if bad := [a for a in sorted(drop) if x.shape[a] != 1]:
        raise ValueError(f"cannot squeeze axes {bad} of shape {x.shape}: their size is not 1")
    return x.reshape([s for i, s in enumerate(x.shape) if i not in drop])


@onnx_op("Squeeze", 1)
def squeeze_v1(x: Tensor, *, axes: list[int] | None = None) -> Tensor:
    """Squeeze-1: size-1 axes removed (those of `axes`, or all)."""
    return _squeezed(x, axes)


@onnx_op("Squeeze", 13, static=(1,))
def squeeze(x: Tensor, axes: Any = None) -> Tensor:
    """Squeeze: size-1 axes removed (those of the `axes` input, or all)."""
    return _squeezed(x, None if axes is None else _ints(axes))


def _unsqueezed(x: Tensor, axes: list[int]) -> Tensor:
    rank = x.ndim + len(axes)
    new = {_axis(a, rank) for a in axes}
    if len(new) != len(axes):
        raise ValueError(f"axes {axes} repeat an axis")
    sizes = iter(x.shape)
    return x.reshape([1 if i in new else next(sizes) for i in range(rank)])


@onnx_op("Unsqueeze", 1)
def unsqueeze_v1(x: Tensor, *, axes: list[int]) -> Tensor:
    """Unsqueeze-1: size-1 axes inserted at `axes` (counted in the output)."""
    return _unsqueezed(x, list(axes))


@onnx_op("Unsqueeze", 13, static=(1,))
def unsqueeze(x: Tensor, axes: Any) -> Tensor:
    """Unsqueeze: size-1 axes inserted at the `axes` input (counted in the output)."""
    return _unsqueezed(x, _ints(axes))


@onnx_op("Expand", 8, static=(1,))
def expand(x: Tensor, shape: Any) -> Tensor:
    """Expand: x broadcast with `shape` both ways (numpy's rules; a 1 in shape keeps x's size)."""
    dims = _ints(shape)
    rank = max(x.ndim, len(dims))
    a = [1] * (rank - x.ndim) + list(x.shape)
    b = [1] * (rank - len(dims)) + dims
    out = []
    for i, (p, q) in enumerate(zip(a, b, strict=True)):
        if p != q and 1 not in (p, q):
            raise ValueError(f"cannot broadcast shape {x.shape} with {dims} (axis {i}: {p} vs {q})")
        out.append(q if p == 1 else p)
    return x.reshape(a).expand(out)


# *** joining and cutting ***


@onnx_op("Concat", 1)
def concat_v1(*inputs: Tensor, axis: int = 1) -> Tensor:
    """Concat-1: the inputs joined along `axis` (1 by default)."""
    return concat(*inputs, axis=axis)


@onnx_op("Concat", 4)
def concat(*inputs: Tensor, axis: int) -> Tensor:
    """Concat: the inputs joined along `axis`."""
    if not inputs:
        raise ValueError("Concat needs at least one input")
    first = inputs[0]
    ax = _axis(axis, first.ndim)
    for t in inputs[1:]:
        if t.dtype != first.dtype:
            raise ValueError(f"inputs of dtypes {first.dtype} and {t.dtype} differ")
        if t.ndim != first.ndim or any(s != u for i, (s, u) in enumerate(zip(t.shape, first.shape)) if i != ax):
            raise ValueError(f"cannot concatenate shapes {first.shape} and {t.shape} along axis {axis}")
    parts = [t for t in inputs if t.shape[ax] > 0]
    if not parts:
        return first
    return parts[0] if len(parts) == 1 else parts[0].cat(*parts[1:], dim=ax)


def _split(x: Tensor, axis: int, sizes: list[int]) -> tuple[Tensor, ...]:
    ax = _axis(axis, x.ndim)
    if sum(sizes) != x.shape[ax] or any(s < 0 for s in sizes):
        raise ValueError(f"split sizes {sizes} do not add up to {x.shape[ax]} (axis {axis} of shape {x.shape})")
    out, at = [], 0
    for s in sizes:
        out.append(x.shrink(tuple((at, at + s) if i == ax else None for i in range(x.ndim))))
        at += s
    return tuple(out)


def _equal_parts(x: Tensor, axis: int, n: int) -> list[int]:
    dim = x.shape[_axis(axis, x.ndim)]
    if n <= 0 or dim % n:
        raise ValueError(f"cannot split axis {axis} of size {dim} into {n} equal parts")
    return [dim // n] * n


@onnx_op("Split", 1, static=(1,))
def split_v1(x: Tensor, split_input: Any = None, *, axis: int = 0, split: list[int] | None = None, ctx: Any) -> Any:
    """Split-1: pieces along `axis` of sizes `split` (an input or an attribute), else equal ones."""
    sizes = _ints(split_input) if split_input is not None else split
    return _split(x, axis, list(sizes) if sizes else _equal_parts(x, axis, ctx.n_outputs))


@onnx_op("Split", 2)
def split_v2(x: Tensor, *, axis: int = 0, split: list[int] | None = None, ctx: Any) -> Any:
    """Split-2: pieces along `axis` of sizes `split`, else equal ones (one per output)."""
    return _split(x, axis, list(split) if split else _equal_parts(x, axis, ctx.n_outputs))


@onnx_op("Split", 13, static=(1,))
def split_v13(x: Tensor, split: Any = None, *, axis: int = 0, ctx: Any) -> Any:
    """Split-13: pieces along `axis` of the sizes in the `split` input, else equal ones (one per output)."""
    return _split(x, axis, _ints(split) if split is not None else _equal_parts(x, axis, ctx.n_outputs))


@onnx_op("Split", 18, static=(1,))
def split_v18(x: Tensor, split: Any = None, *, axis: int = 0, num_outputs: int | None = None, ctx: Any) -> Any:
    """Split-18: the sizes in `split`, or `num_outputs` pieces of ceil(size / num_outputs) (the last smaller)."""
    if split is not None:
        if num_outputs is not None:
            raise ctx.error("give either the split input or num_outputs, not both")
        return _split(x, axis, _ints(split))
    if num_outputs is None:
        raise ctx.error("needs the split input or the num_outputs attribute")
    if num_outputs != ctx.n_outputs:
        raise ctx.error(f"num_outputs={num_outputs} but the node has {ctx.n_outputs} outputs")
    dim = x.shape[_axis(axis, x.ndim)]
    if num_outputs > dim:
        raise ctx.error(f"cannot split axis {axis} of size {dim} into {num_outputs} non-empty parts")
    piece = -(-dim // num_outputs)
    sizes = [min(piece, dim - i * piece) for i in range(num_outputs)]
    return _split(x, axis, sizes)


def _sliced(
    data: Tensor, starts: list[int], ends: list[int], axes: list[int] | None, steps: list[int] | None
) -> Tensor:
    if len(starts) != len(ends):
        raise ValueError(f"starts {starts} and ends {ends} differ in length")
    axes = list(range(len(starts))) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    if not len(axes) == len(steps) == len(starts):
        raise ValueError(f"starts, ends, axes {axes} and steps {steps} differ in length")
    index: list[slice] = [slice(None)] * data.ndim
    seen = set()
    for start, end, axis, step in zip(starts, ends, axes, steps, strict=True):
        ax = _axis(axis, data.ndim)
        if ax in seen:
            raise ValueError(f"axes {axes} repeat axis {ax}")
        seen.add(ax)
        dim = data.shape[ax]
        if step == 0:
            raise ValueError(f"step 0 on axis {axis}")
        start = start + dim if start < 0 else start
        end = end + dim if end < 0 else end
        if step > 0:
            start, end = min(max(start, 0), dim), min(max(end, 0), dim)
            index[ax] = slice(start, end, step)
        elif dim == 0:
            index[ax] = slice(0, 0)
        else:
            start, end = min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)
            # end -1 means "through index 0", which a Python slice spells None
            index[ax] = slice(start, None if end < 0 else end, step)
    return data[tuple(index)]


@onnx_op("Slice", 1)
def slice_v1(data: Tensor, *, starts: list[int], ends: list[int], axes: list[int] | None = None) -> Tensor:
    """Slice-1: data[starts:ends] on `axes` (all leading axes by default), bounds clamped."""
    return _sliced(data, list(starts), list(ends), None if axes is None else list(axes), None)


@onnx_op("Slice", 10, static=(1, 2, 3, 4))
def slice_(data: Tensor, starts: Any, ends: Any, axes: Any = None, steps: Any = None) -> Tensor:
    """Slice: data[starts:ends:steps] on `axes`, bounds clamped (negative steps walk backwards)."""
    return _sliced(
        data, _ints(starts), _ints(ends), None if axes is None else _ints(axes), None if steps is None else _ints(steps)
    )


@onnx_op("Tile", 1, static=(1, 2))
def tile_v1(x: Tensor, tiles: Any, axis: Any) -> Tensor:
    """Tile-1: x repeated `tiles` times along `axis`."""
    repeats = [1] * x.ndim
    repeats[_axis(_ints(axis)[0], x.ndim)] = _ints(tiles)[0]
    return x.repeat(repeats)


@onnx_op("Tile", 6, static=(1,))
def tile(x: Tensor, repeats: Any) -> Tensor:
    """Tile: x repeated repeats[i] times along axis i."""
    reps = _ints(repeats)
    if len(reps) != x.ndim or any(r < 0 for r in reps):
        raise ValueError(f"repeats {reps} must be one non-negative count per axis of shape {x.shape}")
    if x.ndim == 0:
        return x
    return x.repeat(reps)


# *** padding and cropping ***

_PAD_MODES = {"constant": "constant", "reflect": "reflect", "edge": "replicate", "wrap": "circular"}


def _padded(data: Tensor, pads: list[int], mode: str, value: Any, axes: list[int] | None = None) -> Tensor:
    """Pad `data` by pads = [begin of each axis..., end of each axis...] on `axes`; negative pads crop."""
    if mode not in _PAD_MODES:
        raise ValueError(f"mode={mode!r} is not supported (one of {', '.join(_PAD_MODES)})")
    axes = list(range(data.ndim)) if axes is None else [_axis(a, data.ndim) for a in axes]
    if len(pads) != 2 * len(axes):
        raise ValueError(f"pads {pads} must hold 2 values per axis of {axes}")
    pairs = [(0, 0)] * data.ndim
    for i, a in enumerate(axes):
        pairs[a] = (pads[i], pads[len(axes) + i])
    for (b, e), s in zip(pairs, data.shape, strict=True):
        if -min(b, 0) - min(e, 0) > s:
            raise ValueError(f"pads {pads} crop more than shape {data.shape} has")
    # the crops first (every mode reads the cropped tensor), then the padding
    x = data.shrink(tuple((-min(b, 0), s + min(e, 0)) for (b, e), s in zip(pairs, data.shape, strict=True)))
    grow = tuple((max(b, 0), max(e, 0)) for b, e in pairs)
    if all(g == (0, 0) for g in grow):
        return x
    if mode != "constant":
        if any(s == 0 for (b, e), s in zip(grow, x.shape, strict=True) if b or e):
            raise ValueError(f"mode={mode!r} cannot pad an empty axis (shape {x.shape})")
        for ax, ((b, e), n) in enumerate(zip(grow, x.shape, strict=True)):
            # Tensor.pad reflects or wraps once: a wider pad reads through a host-built index instead
            limit = n - 1 if mode == "reflect" else n if mode == "wrap" else None
            if limit is not None and max(b, e) > limit:
                source = Tensor(_pad_source(n, b, e, mode), dtype=dtypes.int64, device=x.device)
                x = x[(slice(None),) * ax + (source,)]
                grow = tuple((0, 0) if i == ax else g for i, g in enumerate(grow))
        return x.pad(grow, mode=_PAD_MODES[mode]) if any(g != (0, 0) for g in grow) else x
    if isinstance(value, Tensor):
        inside = Tensor.ones(x.shape, dtype=dtypes.bool, device=x.device).pad(grow, value=False)
        return inside.where(x.pad(grow), value.reshape(()).cast(x.dtype))
    return x.pad(grow, value=value)


def _pad_source(n: int, before: int, after: int, mode: str) -> list[int]:
    """The source position of each position of an axis of size n padded by (before, after) in `mode` (numpy's
    np.pad: a reflection repeats with period 2(n - 1), a wrap with period n)."""
    out = []
    for i in range(-before, n + after):
        if mode == "wrap":
            out.append(i % n)
        elif n == 1:
            out.append(0)
        else:
            j = i % (2 * (n - 1))
            out.append(j if j < n else 2 * (n - 1) - j)
    return out


@onnx_op("Pad", 1)
def pad_v1(data: Tensor, *, paddings: list[int], mode: str = "constant", value: float = 0.0) -> Tensor:
    """Pad-1: `paddings` (begins then ends) with `value`, or reflected/edge values."""
    return _padded(data, list(paddings), mode, value)


@onnx_op("Pad", 2)
def pad_v2(data: Tensor, *, pads: list[int], mode: str = "constant", value: float = 0.0) -> Tensor:
    """Pad-2: `pads` (begins then ends) with `value`, or reflected/edge values."""
    return _padded(data, list(pads), mode, value)


@onnx_op("Pad", 11, static=(1, 3))
def pad(
    data: Tensor, pads: Any, constant_value: Tensor | None = None, axes: Any = None, *, mode: str = "constant"
) -> Tensor:
    """Pad: `pads` (begins then ends, on `axes`) with constant_value (0 default), or reflect/edge/wrap values."""
    value: Any = 0 if constant_value is None or constant_value.numel() == 0 else constant_value
    return _padded(data, _ints(pads), mode, value, None if axes is None else _ints(axes))


@onnx_op("CenterCropPad", 18, static=(1,))
def center_crop_pad(x: Tensor, shape: Any, *, axes: list[int] | None = None) -> Tensor:
    """CenterCropPad: each axis of `axes` cropped or zero-padded about its center to `shape` (odd extra at the end)."""
    sizes = _ints(shape)
    axes = list(range(x.ndim)) if axes is None else [_axis(a, x.ndim) for a in axes]
    if len(sizes) != len(axes):
        raise ValueError(f"shape {sizes} must have one size per axis of {axes}")
    pairs = [(0, 0)] * x.ndim
    for a, s in zip(axes, sizes, strict=True):
        d = s - x.shape[a]  # > 0 pads, < 0 crops; an odd one puts the extra element at the end
        half = int(math.copysign(abs(d) // 2, d))
        pairs[a] = (half, d - half)
    pads = [b for b, _ in pairs] + [e for _, e in pairs]
    return _padded(x, pads, "constant", 0)


# *** blocks and triangles ***


@onnx_op("DepthToSpace", 1)
def depth_to_space(x: Tensor, *, blocksize: int, mode: str = "DCR") -> Tensor:
    """DepthToSpace: (N, C*b*b, H, W) -> (N, C, H*b, W*b), the depth read as (b, b, C) (DCR) or (C, b, b) (CRD)."""
    if x.ndim != 4 or x.shape[1] % (blocksize * blocksize):
        raise ValueError(f"needs a 4-D input with channels divisible by {blocksize}^2, got shape {x.shape}")
    n, c, h, w = x.shape
    b, c2 = blocksize, c // (blocksize * blocksize)
    if mode == "DCR":
        y = x.reshape(n, b, b, c2, h, w).permute(0, 3, 4, 1, 5, 2)
    elif mode == "CRD":
        y = x.reshape(n, c2, b, b, h, w).permute(0, 1, 4, 2, 5, 3)
    else:
        raise ValueError(f"mode={mode!r} is not supported (DCR or CRD)")
    return y.reshape(n, c2, h * b, w * b)


@onnx_op("SpaceToDepth", 1)
def space_to_depth(x: Tensor, *, blocksize: int, mode: str = "DCR") -> Tensor:
    """SpaceToDepth: (N, C, H*b, W*b) -> (N, C*b*b, H, W), the depth laid out as (b, b, C) (DCR) or (C, b, b) (CRD)."""
    if x.ndim != 4 or x.shape[2] % blocksize or x.shape[3] % blocksize:
        raise ValueError(f"needs a 4-D input with height and width divisible by {blocksize}, got shape {x.shape}")
    n, c, h, w = x.shape
    b = blocksize
    y = x.reshape(n, c, h // b, b, w // b, b)
    if mode == "DCR":
        y = y.permute(0, 3, 5, 1, 2, 4)
    elif mode == "CRD":
        y = y.permute(0, 1, 3, 5, 2, 4)
    else:
        raise ValueError(f"mode={mode!r} is not supported (DCR or CRD)")
    return y.reshape(n, c * b * b, h // b, w // b)


@onnx_op("Trilu", 14, static=(1,))
def trilu(x: Tensor, k: Any = None, *, upper: int = 1) -> Tensor:
    """Trilu: the upper (column - row >= k) or lower (column - row <= k) triangle of the last two axes."""
    if x.ndim < 2:
        raise ValueError(f"needs at least 2 axes, got shape {x.shape}")
    diagonal = 0 if k is None else _ints(k)[0]
    rows = Tensor.arange(x.shape[-2], dtype=dtypes.int64, device=x.device).reshape(-1, 1)
    cols = Tensor.arange(x.shape[-1], dtype=dtypes.int64, device=x.device).reshape(1, -1)
    keep = (cols - rows >= diagonal) if upper else (cols - rows <= diagonal)
    return keep.where(x, Tensor.zeros((), dtype=x.dtype, device=x.device))


# *** resizing ***


def _upsampled(x: Tensor, scales: list[float], mode: str) -> Tensor:
    if len(scales) != x.ndim or any(s < 1 for s in scales):
        raise ValueError(f"scales {scales} must be one value >= 1 per axis of shape {x.shape}")
    if mode not in ("nearest", "linear", "bilinear"):
        raise ValueError(f"mode={mode!r} is not supported (nearest or linear)")
    out = x
    for ax, s in enumerate(scales):
        if s == 1:
            continue
        n_in, n_out = x.shape[ax], math.floor(x.shape[ax] * s)
        at = Tensor.arange(n_out, dtype=dtypes.float32, device=x.device) / s  # the source coordinate (asymmetric)
        shape = [1] * x.ndim
        shape[ax] = n_out
        if mode == "nearest":
            idx = at.floor().cast(dtypes.int64).minimum(n_in - 1).reshape(shape)
            out = out.gather(ax, idx.expand([n_out if i == ax else d for i, d in enumerate(out.shape)]))
            continue
        lo = at.floor()
        frac = (at - lo).reshape(shape)
        i0 = lo.cast(dtypes.int64).minimum(n_in - 1).reshape(shape)
        i1 = (i0 + 1).minimum(n_in - 1)
        full = [n_out if i == ax else d for i, d in enumerate(out.shape)]
        a, b = out.gather(ax, i0.expand(full)), out.gather(ax, i1.expand(full))
        out = (a.cast(dtypes.float32) * (1 - frac) + b.cast(dtypes.float32) * frac).cast(x.dtype)
    return out


@onnx_op("Upsample", 1)
def upsample_v1(x: Tensor, *, height_scale: float, width_scale: float, mode: str = "nearest") -> Tensor:
    """Upsample-1: the last two axes (of a 4-D input) scaled up by height_scale and width_scale."""
    return _upsampled(x, [1.0] * (x.ndim - 2) + [height_scale, width_scale], mode)


@onnx_op("Upsample", 7)
def upsample_v7(x: Tensor, *, scales: list[float], mode: str = "nearest") -> Tensor:
    """Upsample-7: every axis scaled up by `scales` (nearest: floor(o / scale); linear: asymmetric)."""
    return _upsampled(x, list(scales), mode)


@onnx_op("Upsample", 9, static=(1,))
def upsample(x: Tensor, scales: Any, *, mode: str = "nearest") -> Tensor:
    """Upsample-9: every axis scaled up by the `scales` input (nearest: floor(o / scale); linear: asymmetric)."""
    return _upsampled(x, [float(s) for s in np.asarray(scales).reshape(-1)], mode)
