"""Indexing: __getitem__, __setitem__, gather, scatter, masks and one_hot.

Basic indexing (ints, slices, None, Ellipsis) is pure movement: flip, shrink, reshape, and for slice steps a
pad + reshape + shrink that keeps every `step`-th element; it copies nothing. Integer-tensor (advanced) indexing
and gather compare the indices with an `arange` and keep the matching element with a masked sum
(`mask.where(x, 0).sum(axis)`: a where, so an inf or nan elsewhere in `x` does not leak into the result). The
scatters place values the same way. Every op stays lazy, except where the output's shape depends on the data
(a bool-mask index, `masked_select`/`nonzero` without `size=`, `one_hot()` without `num_classes`).

>>> from zeptograd import Tensor
>>> x = Tensor.arange(12).reshape(3, 4)
>>> x[1:, ::-2].tolist(), x[[0, 2], 1].tolist()
([[7, 5], [11, 9]], [1, 9])
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from zeptograd.dtype import dtypes
from zeptograd.helpers import ArgumentError
from zeptograd.mixin.movement import symbolic_str
from zeptograd.uop.ops import Ops, UOp
from zeptograd.uop.shape import inverse_permutation

if TYPE_CHECKING:
    from zeptograd.tensor import Tensor

_SCATTER_REDUCES = ("sum", "prod", "mean", "amax", "amin")


@dataclass(frozen=True)
class _Basic:
    """The movement ops of a basic index, per input axis: flip, then shrink to `bounds`, then keep every
    `strides`-th element (`counts` of them), then reshape to `out_shape` (ints dropped, Nones added)."""

    flips: tuple[int, ...]
    bounds: tuple[tuple[int, int], ...]
    strides: tuple[int, ...]
    counts: tuple[int, ...]
    out_shape: tuple[int, ...]

    def _split(self, kept: bool) -> tuple[int, ...]:
        """The shape with each strided axis split in (count, stride), or (count, 1) once shrunk (`kept`)."""
        out: list[int] = []
        for (b, e), st, n in zip(self.bounds, self.strides, self.counts):
            out.extend(((n, 1) if kept else (n, st)) if st > 1 else (e - b,))
        return tuple(out)

    def _padded_lengths(self) -> tuple[int, ...]:
        """Each axis after the shrink, strided ones padded to count * stride."""
        return tuple(n * st if st > 1 else e - b for (b, e), st, n in zip(self.bounds, self.strides, self.counts))

    def _per_split_axis(self, plain: Any, count: Any, step: Any) -> tuple[Any, ...]:
        """One entry per axis of the split shape: `plain` for an unstrided axis, `count` and `step(stride)` for
        the two halves of a strided one."""
        out: list[Any] = []
        for st in self.strides:
            out.extend((count, step(st)) if st > 1 else (plain,))
        return tuple(out)

    def apply(self, x: Tensor) -> Tensor:
        if self.flips:
            x = x.flip(self.flips)
        x = x.shrink(self.bounds)
        if any(st > 1 for st in self.strides):
            # keep every stride-th element: pad to count * stride, split (count, stride), keep stride index 0
            x = x._pad_view(tuple((0, p - (e - b)) for (b, e), p in zip(self.bounds, self._padded_lengths())))
            x = x.reshape(self._split(kept=False))
            x = x.shrink(self._per_split_axis(None, None, lambda st: (0, 1)))
        return x.reshape(self.out_shape)

    def place(self, v: Tensor, shape: tuple[int, ...]) -> Tensor:
        """The inverse of `apply`: `v` (of `out_shape`) put back where it came from in a tensor of `shape`,
        zeros (False) everywhere else. Movement ops only."""
        if any(st > 1 for st in self.strides):
            v = v.reshape(self._split(kept=True))
            v = v.pad(self._per_split_axis((0, 0), (0, 0), lambda st: (0, st - 1)))
            v = v.reshape(self._padded_lengths())
            v = v.shrink(tuple((0, e - b) for b, e in self.bounds))
        else:
            v = v.reshape(tuple(e - b for b, e in self.bounds))
        v = v.pad(tuple((b, s - e) for (b, e), s in zip(self.bounds, shape)))
        return v.flip(self.flips) if self.flips else v


@dataclass(frozen=True)
class _Advanced:
    """Integer-tensor indices over some axes of the basic view: `axes` (in the view), their index tensors
    (wrapped, broadcast to `bshape`), and where the broadcast axes land in the result (`insert_at`: the position
    among the view's other axes, or 0 when numpy puts them first)."""

    axes: tuple[int, ...]
    indices: tuple[Tensor, ...]
    bshape: tuple[int, ...]
    insert_at: int


def _index_dtype(t: Tensor, op: str) -> Tensor:
    """An integer index tensor in a dtype where comparing with `arange(size)` and adding `size` cannot
    overflow: small integers widen to int32, uint32 to int64."""
    dt = t.dtype
    if dtypes.is_bool(dt) or not dtypes.is_int(dt):
        raise TypeError(f"{op}: index tensors must have an integer dtype, got {dt!r}")
    if dt.itemsize < 4 or dt is dtypes.int32:
        return t.cast(dtypes.int32)
    if dt is dtypes.uint32:
        return t.cast(dtypes.int64)
    return t


def _is_int(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def _check_slice(s: slice, op: str) -> slice:
    if isinstance(s.start, UOp) or isinstance(s.stop, UOp):
        # a symbolic slice (bounds that are expressions of a bound Variable): its length must be a constant
        if s.step not in (None, 1):
            raise IndexError(f"{op}: a slice with symbolic bounds takes step 1, got {s}")
        for v in (s.start, s.stop):
            if v is not None and not isinstance(v, UOp) and not _is_int(v):
                raise TypeError(f"{op}: slice bounds must be ints, Variable expressions or None, got {s}")
        return s
    parts = []
    for v in (s.start, s.stop, s.step):
        if v is not None and not _is_int(v):
            raise TypeError(f"{op}: slice bounds and steps must be ints or None, got {s}")
        parts.append(None if v is None else int(v))
    if parts[2] == 0:
        raise ArgumentError(f"{op}: slice step cannot be zero")
    return slice(*parts)


class IndexingMixin:
    """Indexing: __getitem__, __setitem__, gather, scatter, masks and one_hot."""

    __slots__ = ()

    # *** parsing an index ***

    def _index_items(self, index: Any, op: str) -> list[tuple[str, Any]]:
        """The index as a list of (kind, value), one per item, Ellipsis expanded and full slices added for the
        axes not named; kinds: "int", "slice", "none", "tensor" (an integer index tensor, any shape) and "mask"
        (a bool tensor over as many axes as it has dims)."""
        items = index if isinstance(index, tuple) else (index,)
        parsed: list[tuple[str, Any]] = []
        for it in items:
            if it is None:
                parsed.append(("none", None))
            elif it is Ellipsis:
                parsed.append(("ellipsis", None))
            elif isinstance(it, (bool, np.bool_)):
                raise TypeError(f"{op}: a bool scalar is not a supported index (use None to add an axis)")
            elif _is_int(it):
                parsed.append(("int", int(it)))
            elif isinstance(it, slice):
                parsed.append(("slice", _check_slice(it, op)))
            elif isinstance(it, type(self)):
                if it.device != self.device:
                    raise RuntimeError(f"{op}: the index tensor is on {it.device}, the tensor on {self.device}")
                if dtypes.is_bool(it.dtype):
                    parsed.append(("mask", it))
                else:
                    parsed.append(("tensor", _index_dtype(it, op)))
            elif isinstance(it, (list, tuple, np.ndarray)):
                try:
                    arr = np.asarray(it)
                except ValueError:
                    raise IndexError(f"{op}: the index {it!r} is a ragged sequence") from None
                if arr.dtype == np.bool_:
                    parsed.append(("mask", type(self)(arr, device=self.device)))
                elif arr.dtype.kind in "iu" or (arr.size == 0 and arr.dtype.kind == "f"):
                    parsed.append(("array", arr.astype(np.int64)))
                else:
                    raise TypeError(f"{op}: index sequences must hold ints or bools, got {it!r}")
            else:
                raise TypeError(f"{op}: unsupported index type {type(it).__name__}")
        if sum(k == "ellipsis" for k, _ in parsed) > 1:
            raise IndexError(f"{op}: an index can only have a single ellipsis ('...')")
        used = sum(v.ndim if k == "mask" else 1 for k, v in parsed if k not in ("none", "ellipsis"))
        if used > self.ndim:
            raise IndexError(f"{op}: too many indices for a tensor of {self.ndim} dimensions (shape {self.shape})")
        fill = [("slice", slice(None))] * (self.ndim - used)
        if any(k == "ellipsis" for k, _ in parsed):
            at = next(i for i, (k, _) in enumerate(parsed) if k == "ellipsis")
            return parsed[:at] + fill + parsed[at + 1 :]
        return parsed + fill

    def _mask_items(self, items: list[tuple[str, Any]], op: str) -> list[tuple[str, Any]]:
        """Bool masks replaced by the integer indices of their true elements (realizes: the count is data)."""
        out: list[tuple[str, Any]] = []
        axis = 0
        for kind, v in items:
            if kind == "mask":
                if v.ndim == 0:
                    raise IndexError(f"{op}: a 0-d bool index is not supported")
                want = self.shape[axis : axis + v.ndim]
                if v.shape != want:
                    raise IndexError(
                        f"{op}: the bool index of shape {v.shape} does not match the indexed axes {axis}.."
                        f"{axis + v.ndim - 1} of shape {self.shape}"
                    )
                coords = v.nonzero()
                n = coords.shape[0]
                out.extend(("tensor", coords.shrink(((0, n), (j, j + 1))).reshape(n)) for j in range(v.ndim))
                axis += v.ndim
            else:
                out.append((kind, v))
                axis += kind != "none"
        return out

    def _plan(self, index: Any, op: str) -> tuple[_Basic, _Advanced | None, tuple[int, ...]]:
        """Split an index into its basic part (movement ops on self) and its advanced part (integer tensors
        over axes of the basic view); also the result's shape."""
        items = self._mask_items(self._index_items(index, op), op)
        has_adv = any(k in ("tensor", "array") for k, _ in items)
        flips: list[int] = []
        bounds, strides, counts, out_shape = [], [], [], []
        adv_axes: list[int] = []  # in the basic view
        adv_idx: list[Tensor] = []
        adv_pos: list[int] = []  # positions in `items` of the advanced items (ints count when arrays are present)
        axis = 0
        for pos, (kind, v) in enumerate(items):
            if kind == "none":
                out_shape.append(1)
                continue
            size = self.shape[axis]
            if kind == "int":
                if not -size <= v < size:
                    raise IndexError(f"{op}: index {v} is out of bounds for axis {axis} with size {size}")
                v %= size
                bounds.append((v, v + 1))
                strides.append(1)
                counts.append(1)
                if has_adv:
                    adv_pos.append(pos)
            elif kind == "slice" and (isinstance(v.start, UOp) or isinstance(v.stop, UOp)):
                # symbolic bounds: no negative indices and no clamping (shrink checks every value in range fits)
                start = 0 if v.start is None else v.start
                stop = size if v.stop is None else v.stop
                n = (stop - start).simplify() if isinstance(stop - start, UOp) else stop - start
                if not isinstance(n, int):
                    n = n.arg if n.op is Ops.CONST else -1
                    if n < 0:
                        raise NotImplementedError(
                            f"{op}: the slice [{'' if v.start is None else symbolic_str(v.start)}:"
                            f"{symbolic_str(v.stop)}] "
                            f"of axis {axis} has a symbolic length: shapes are constants, so a "
                            "symbolic slice takes a constant length from a symbolic start (x[v:v + n])"
                        )
                bounds.append((start, stop))
                strides.append(1)
                counts.append(n)
                out_shape.append(n)
            elif kind == "slice":
                start, stop, step = v.indices(size)
                n = len(range(start, stop, step))
                if n <= 1:
                    bounds.append((start, start + 1) if n else (0, 0))
                    strides.append(1)
                else:
                    if step < 0:
                        flips.append(axis)
                        start, step = size - 1 - start, -step
                    bounds.append((start, min(size, start + n * step)))
                    strides.append(step)
                counts.append(n)
                out_shape.append(n)
            else:
                if kind == "array":
                    bad = (v < -size) | (v >= size)
                    if bad.any():
                        raise IndexError(
                            f"{op}: index {int(v[bad].flat[0])} is out of bounds for axis {axis} with size {size}"
                        )
                    dt = dtypes.int64 if size > 2**31 - 1 else dtypes.int32
                    idx = type(self)(np.where(v < 0, v + size, v), dtype=dt, device=self.device)
                else:
                    # negative indices wrap once (like torch); what is still out of range matches nothing
                    idx = (v < 0).where(v + size, v) if not dtypes.is_unsigned(v.dtype) else v
                bounds.append((0, size))
                strides.append(1)
                counts.append(size)
                adv_axes.append(len(out_shape))
                adv_idx.append(idx)
                adv_pos.append(pos)
                out_shape.append(size)
            axis += 1
        basic = _Basic(tuple(flips), tuple(bounds), tuple(strides), tuple(counts), tuple(out_shape))
        if not adv_idx:
            return basic, None, basic.out_shape
        try:
            bshape = self._broadcast_shape(op, *(t.shape for t in adv_idx))
        except ValueError:
            shapes = " ".join(str(t.shape) for t in adv_idx)
            raise IndexError(f"{op}: the index tensors of shapes {shapes} cannot be broadcast together") from None
        adjacent = adv_pos == list(range(adv_pos[0], adv_pos[-1] + 1))
        # numpy's rule: advanced indices next to each other put their axes where they are, else first
        insert_at = sum(1 for k, _ in items[: adv_pos[0]] if k in ("slice", "none")) if adjacent else 0
        adv = _Advanced(tuple(adv_axes), tuple(t._broadcast_to(bshape) for t in adv_idx), bshape, insert_at)
        others = tuple(s for i, s in enumerate(out_shape) if i not in adv_axes)
        return basic, adv, others[:insert_at] + bshape + others[insert_at:]

    def _linear_index(self, adv: _Advanced, view_shape: tuple[int, ...]) -> tuple[Tensor, int]:
        """The advanced indices as one flat position into the indexed axes (row-major), -1 where any index is
        out of range (a single index is returned as it is: out of range, it equals no position either); and the
        number of positions."""
        sizes = [view_shape[a] for a in adv.axes]
        total = math.prod(sizes)
        dt = dtypes.int64 if total > 2**31 - 1 else dtypes.int32
        if len(adv.indices) == 1 and adv.indices[0].dtype.itemsize <= dt.itemsize:
            # one index is the position itself: a value out of range equals no position, so it needs no -1 (a wider
            # index is checked first: cast to 32 bits, 2**32 + 3 would be 3)
            return adv.indices[0].cast(dt), total
        lin: Tensor | None = None
        valid: Tensor | None = None
        stride = total
        for idx, size in zip(adv.indices, sizes):
            stride //= max(size, 1)
            ok = (idx >= 0) & (idx < size)
            term = ok.where(idx, 0).cast(dt) * stride
            lin = term if lin is None else lin + term
            valid = ok if valid is None else valid & ok
        assert lin is not None and valid is not None
        return valid.where(lin, -1), total

    # *** getitem / setitem ***

    def __getitem__(self, index: Any) -> Tensor:
        """numpy/PyTorch indexing. Ints (negative count from the end), slices (any step, bounds clamped as in
        Python), None, Ellipsis: movement ops only, no copy. Lists and integer tensors: advanced indexing with
        numpy's rules (the index arrays broadcast together; their axes replace the indexed axes when the
        advanced indices are next to each other, else they go first; an int next to an array counts as
        advanced, as in numpy: `x[0, :, idx]` has the index axes first, where PyTorch keeps them in place). A bool
        tensor (or list) selects its true elements: the count is data, so it realizes the mask.

        Index tensors are data: a negative index wraps once, like torch, and one still out of range gives 0
        (as in tinygrad), never an error or an out-of-bounds read. Out-of-range Python ints and lists raise
        IndexError.

        >>> x = Tensor.arange(6).reshape(2, 3)
        >>> x[-1].tolist(), x[:, ::2].tolist(), x[None, 0, 1:].shape
        ([3, 4, 5], [[0, 2], [3, 5]], (1, 2))
        >>> x[Tensor([1, 0]), Tensor([2, -3])].tolist()
        [5, 0]
        """
        op = "__getitem__"
        if isinstance(index, type(self)) and dtypes.is_bool(index.dtype) and index.ndim and index.shape == self.shape:
            # a mask over every axis selects elements: the values themselves are scattered to their running count,
            # without their coordinates and a gather, which saves a kernel and the coordinates' memory
            return self.masked_select(index)
        basic, adv, _ = self._plan(index, op)
        view = basic.apply(self)
        if adv is None:
            return view
        lin, total = self._linear_index(adv, view.shape)
        others = [i for i in range(view.ndim) if i not in adv.axes]
        oshape = tuple(view.shape[i] for i in others)
        nb = len(adv.bshape)
        x = view.permute(*others, *adv.axes).reshape(*oshape, *((1,) * nb), total)
        hit = lin.reshape(*adv.bshape, 1) == self.arange(total, dtype=lin.dtype, device=self.device)
        out = hit.reshape(*((1,) * len(oshape)), *adv.bshape, total).where(x, 0)._pick_sum(-1).cast(self.dtype)
        no, k = len(oshape), adv.insert_at
        order = (*range(k), *range(no, no + nb), *range(k, no))
        return out.permute(*order)

    def __iter__(self) -> Iterator[Tensor]:
        """The tensor's rows (`self[0]`, `self[1]`, ...), as in PyTorch; a 0-d tensor has none to iterate.

        >>> [r.tolist() for r in Tensor([[1, 2], [3, 4]])]
        [[1, 2], [3, 4]]
        """
        # without this, Python iterates through __getitem__ until an IndexError, which makes a 0-d tensor
        # look like an empty sequence
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        for i in range(self.shape[0]):
            yield self[i]

    def __contains__(self, element: Any) -> bool:
        """`element in t`: whether any element of t equals `element` (a scalar or a tensor that broadcasts);
        it computes the answer now.

        >>> 3 in Tensor([[1, 2], [3, 4]]), 5 in Tensor([1, 2])
        (True, False)
        """
        if not isinstance(element, (type(self), numbers.Number)):
            raise TypeError(f"__contains__: expected a scalar or a Tensor, got {type(element).__name__}")
        return bool((self == element).any())

    def __setitem__(self, index: Any, value: Any) -> None:
        """`t[index] = value`: one STORE into t's buffer, or its base's when t is a view (a basic index writes
        the view `t[index]`, others `t.assign(mask.where(placed_value, t))`). Any index
        `__getitem__` takes; `value` is a scalar or a tensor that broadcasts to `t[index].shape`, cast to t's
        dtype. Where integer indices repeat, the last write wins. A bool-mask index with a value that does not
        depend on the mask's count is a lazy where; otherwise the mask is realized to find its true elements.

        >>> t = Tensor.zeros(2, 4).realize()
        >>> t[0, 1::2] = 7
        >>> t[1, [0, 0, 3]] = Tensor([1.0, 2.0, 3.0])
        >>> t.tolist()
        [[0.0, 7.0, 0.0, 7.0], [2.0, 0.0, 0.0, 3.0]]
        """
        op = "__setitem__"
        if not isinstance(value, (type(self), numbers.Number, list, tuple, np.ndarray)):
            raise TypeError(f"{op}: cannot assign a value of type {type(value).__name__} to a tensor")
        v = value if isinstance(value, type(self)) else type(self)(value, device=self.device)
        if v.device != self.device:
            raise RuntimeError(f"{op}: the value is on {v.device}, the tensor on {self.device}")
        v = v.cast(self.dtype)
        # the STORE's target is memory (a view's base's); realizing it first lets the value read that buffer
        (self if self._base is None else self._base).realize()
        mask = index if isinstance(index, type(self)) and dtypes.is_bool(index.dtype) else None
        if mask is not None and mask.ndim and mask.shape == self.shape[: mask.ndim]:
            rest = self.shape[mask.ndim :]
            vs = _strip_leading_ones(v.shape, len(rest))
            if len(vs) <= len(rest) and _broadcastable(vs, rest):
                m = mask.reshape(*mask.shape, *((1,) * len(rest)))
                self.assign(m.where(v.reshape(vs)._broadcast_to(rest), self)._broadcast_to(self.shape))
                return
        basic, adv, out_shape = self._plan(index, op)
        vs = _strip_leading_ones(v.shape, len(out_shape))
        if not _broadcastable(vs, out_shape):
            raise ArgumentError(f"{op}: cannot broadcast a value of shape {v.shape} to the indexed shape {out_shape}")
        v = v.reshape(vs)._broadcast_to(out_shape)
        if adv is None:
            # the indexed view itself is written (through to the base): only its elements need be writable
            basic.apply(self).assign(v)
            return
        vshape = basic.out_shape
        lin, total = self._linear_index(adv, vshape)
        others = [i for i in range(len(vshape)) if i not in adv.axes]
        oshape = tuple(vshape[i] for i in others)
        nb, no, k = len(adv.bshape), len(oshape), adv.insert_at
        nbe = math.prod(adv.bshape)
        if nbe == 0:
            return  # no index: nothing is written
        # v's axes: others[:k], b..., others[k:] -> others..., b (flattened)
        vo = v.permute(*range(k), *range(k + nb, no + nb), *range(k, k + nb)).reshape(*oshape, nbe, 1)
        lin = lin.reshape(nbe, 1)
        b = self.arange(nbe, dtype=lin.dtype, device=self.device).reshape(nbe, 1)
        eq = lin == self.arange(total, dtype=lin.dtype, device=self.device).reshape(1, total)
        # the last b that writes each position (repeated indices: last wins), the least int where none does: that
        # is max's identity, so the kernel is a scatter of each b to its position (closedform.scatter_form)
        winner = eq.where(b, dtypes.min(lin.dtype)).max(0)
        pick = b == winner.reshape(1, total)
        placed = pick.reshape(*((1,) * no), nbe, total).where(vo, 0)._pick_sum(-2).cast(self.dtype)
        hit = (winner >= 0)._broadcast_to((*oshape, total))
        sizes = tuple(vshape[a] for a in adv.axes)
        inv = inverse_permutation((*others, *adv.axes))
        placed = placed.reshape(*oshape, *sizes).permute(*inv)
        hit = hit.reshape(*oshape, *sizes).permute(*inv)
        self.assign(basic.place(hit, self.shape).where(basic.place(placed, self.shape), self))

    # *** gather / scatter ***

    def _gather_args(self, dim: int, index: Any, op: str) -> tuple[int, Tensor]:
        if not isinstance(index, type(self)):
            raise TypeError(f"{op}: index must be a Tensor, got {type(index).__name__}")
        if index.device != self.device:
            raise RuntimeError(f"{op}: the index is on {index.device}, the tensor on {self.device}")
        if not isinstance(dim, int) or isinstance(dim, bool):
            raise TypeError(f"{op}: dim must be an int, got {dim!r}")
        nd = max(self.ndim, 1)
        if not -nd <= dim < nd:
            raise IndexError(f"{op}: dim {dim} is out of range for a tensor of {self.ndim} dimensions")
        if index.ndim != self.ndim:
            raise RuntimeError(
                f"{op}: the index has {index.ndim} dimensions (shape {index.shape}), the tensor {self.ndim} "
                f"(shape {self.shape}); they must match"
            )
        dim %= nd
        for d in range(self.ndim):
            if d != dim and index.shape[d] > self.shape[d]:
                raise RuntimeError(
                    f"{op}: the index of shape {index.shape} is larger than the tensor of shape {self.shape} on dim {d}"
                )
        return dim, _index_dtype(index, op)

    def _scatter_hits(self, dim: int, index: Tensor) -> Tensor:
        """eq[..., i, p, ...] = (index[..., i, ...] == p), with p (a position on `dim` of self) right after
        the index's axis `dim`."""
        n = self.shape[dim]
        ar = self.arange(n, dtype=index.dtype, device=self.device)
        ar = ar.reshape(*((1,) * (dim + 1)), n, *((1,) * (index.ndim - dim - 1)))
        return index.reshape(*index.shape[: dim + 1], 1, *index.shape[dim + 1 :]) == ar

    def gather(self, dim: int, index: Tensor) -> Tensor:
        """`out[i][j][k] = self[index[i][j][k]][j][k]` for dim 0 (and likewise for other dims), as torch.gather:
        `index` has self's number of dimensions and is no larger than self on the other axes. An index out
        of range (negative ones too) gives 0.

        >>> Tensor([[1, 2], [3, 4]]).gather(1, Tensor([[0, 0], [1, 0]])).tolist()
        [[1, 1], [4, 3]]
        """
        if self.ndim == 0:
            self._gather_args(dim, index, "gather")
            return self.reshape(1).gather(0, index.reshape(1)).reshape(())
        dim, idx = self._gather_args(dim, index, "gather")
        x = self.shrink(tuple(None if d == dim else (0, idx.shape[d]) for d in range(self.ndim)))
        x = x.reshape(*x.shape[:dim], 1, *x.shape[dim:])
        return self._scatter_hits(dim, idx).where(x, 0)._pick_sum(dim + 1).cast(self.dtype)

    def _scatter_src(self, dim: int, index: Tensor, src: Any, op: str) -> Tensor:
        """src (a tensor or scalar) cut to index's shape, cast to self's dtype, with a size-1 axis after dim."""
        if isinstance(src, type(self)):
            if src.device != self.device:
                raise RuntimeError(f"{op}: src is on {src.device}, the tensor on {self.device}")
            if src.ndim != index.ndim or any(i > s for i, s in zip(index.shape, src.shape)):
                raise RuntimeError(f"{op}: the index of shape {index.shape} is larger than src of shape {src.shape}")
            s = src.shrink(tuple((0, i) for i in index.shape)).cast(self.dtype)
        elif isinstance(src, (bool, int, float)):
            s = self.full(index.shape, src, dtype=self.dtype, device=self.device)
        else:
            raise TypeError(f"{op}: src must be a Tensor or a scalar, got {type(src).__name__}")
        return s.reshape(*s.shape[: dim + 1], 1, *s.shape[dim + 1 :])

    def _scatter_prep(self, dim: int, index: Any, src: Any, op: str) -> tuple[int, Tensor, Tensor, Tensor]:
        if self.ndim == 0:
            raise IndexError(f"{op}: cannot scatter into a 0-d tensor")
        dim, idx = self._gather_args(dim, index, op)
        return dim, idx, self._scatter_hits(dim, idx), self._scatter_src(dim, idx, src, op)

    def _pad_to_self(self, dim: int, t: Tensor, value: Any = 0) -> Tensor:
        """A tensor over (index's extent on the other axes, self's on dim) padded out to self's shape."""
        return t.pad(tuple((0, s - e) for s, e in zip(self.shape, t.shape)), value=value)

    def scatter(
        self,
        dim: int,
        index: Tensor,
        src: Tensor | float | int | bool | None = None,
        reduce: str | None = None,
        *,
        value: float | int | bool | None = None,
    ) -> Tensor:
        """torch.scatter: a copy of self with `out[index[i][j][k]][j][k] = src[i][j][k]` for dim 0 (likewise
        for other dims); `src` a tensor (at least as large as index) or a scalar (torch's `value=` works too).
        Where an index repeats, the last write wins (torch leaves it unspecified). `reduce="add"` or
        `"multiply"` combines the values with self's instead. An index out of range writes nothing.

        >>> Tensor.zeros(2, 3).scatter(1, Tensor([[2, 0], [1, 1]]), Tensor([[1.0, 2.0], [3.0, 4.0]])).tolist()
        [[2.0, 0.0, 1.0], [0.0, 4.0, 0.0]]
        """
        if (src is None) == (value is None):
            raise TypeError("scatter: give exactly one of src and value")
        src = value if src is None else src
        if reduce not in (None, "add", "multiply"):
            raise ArgumentError(f"scatter: reduce must be None, 'add' or 'multiply', got {reduce!r}")
        if reduce is not None:
            return self.scatter_reduce(dim, index, src, {"add": "sum", "multiply": "prod"}[reduce])
        dim, idx, eq, s = self._scatter_prep(dim, index, src, "scatter")
        n = idx.shape[dim]
        if n == 0:
            return self._fresh()
        i = self.arange(n, dtype=dtypes.int32, device=self.device)
        i = i.reshape(*((1,) * dim), n, *((1,) * (self.ndim - dim)))
        winner = eq.where(i, dtypes.min(dtypes.int32)).max(dim, keepdim=True)  # the last i writing each position
        pick = eq & (i == winner)
        placed = pick.where(s, 0)._pick_sum(dim).cast(self.dtype)
        hit = winner.reshape(*winner.shape[:dim], *winner.shape[dim + 1 :]) >= 0
        return self._pad_to_self(dim, hit).where(self._pad_to_self(dim, placed), self)

    def scatter_reduce(
        self, dim: int, index: Tensor, src: Tensor | float | int | bool, reduce: str, include_self: bool = True
    ) -> Tensor:
        """torch.scatter_reduce: the values of `src` that `index` sends to each position of self, combined by
        `reduce` ("sum", "prod", "mean", "amax", "amin"), together with self's value when `include_self`.
        Positions nothing is sent to keep self's value. Integer "mean" rounds down, as torch does.

        >>> x = Tensor([1.0, 2.0, 3.0])
        >>> x.scatter_reduce(0, Tensor([0, 0, 2]), Tensor([5.0, 6.0, 7.0]), "amax").tolist()
        [6.0, 2.0, 7.0]
        """
        op = "scatter_reduce"
        if reduce not in _SCATTER_REDUCES:
            raise ArgumentError(f"{op}: reduce must be one of {', '.join(_SCATTER_REDUCES)}, got {reduce!r}")
        dim, idx, eq, s = self._scatter_prep(dim, index, src, op)
        dt = self.dtype
        count = _scattered_sum(eq.where(1, 0), dim)  # how many values go to each position (int32)
        hit = self._pad_to_self(dim, count > 0)
        if reduce in ("sum", "mean"):
            total = self._pad_to_self(dim, _scattered_sum(eq.where(s, 0), dim).cast(dt))
            if reduce == "sum":
                return (self + total if include_self else hit.where(total, self)).cast(dt)
            cnt = self._pad_to_self(dim, count) + int(include_self)
            num = self + total if include_self else total
            if dtypes.is_float(dt):
                mean = (num / cnt.maximum(1)).cast(dt)
            else:
                mean = _floor_div(num.cast(dtypes.int64 if dt.itemsize == 8 else dtypes.int32), cnt.maximum(1)).cast(dt)
            return hit.where(mean, self)
        if reduce == "prod":
            total = self._pad_to_self(dim, eq.where(s, 1).prod(dim).contiguous().cast(dt), 1)
            return (self * total).cast(dt) if include_self else hit.where(total, self)
        if idx.shape[dim] == 0:
            return self._fresh()
        # with self, a position nothing is sent to is max(self, least) = self (a NaN stays): no count is needed
        if reduce == "amax":
            m = self._pad_to_self(dim, eq.where(s, dtypes.min(dt)).max(dim).contiguous(), dtypes.min(dt))
            return self.maximum(m) if include_self else hit.where(m, self)
        # the least value as the maximum of the values in reversed order (Tensor.min), its one-hot pick a maximum's
        m = eq.where(s._order_reversed(), dtypes.min(dt)).max(dim).contiguous()._order_reversed()
        m = self._pad_to_self(dim, m, dtypes.max(dt))
        return self.minimum(m) if include_self else hit.where(m, self)

    def _fresh(self) -> Tensor:
        """self's value as a new graph node (so assigning to the result cannot write self's buffer)."""
        return self.full(self.shape, True, dtype=dtypes.bool, device=self.device).where(self, self)

    # *** masks ***

    def masked_fill(self, mask: Tensor, value: Tensor | float | int | bool) -> Tensor:
        """`value` where `mask` is true, self elsewhere (mask broadcasts with self); value is cast to self's dtype.

        >>> Tensor([1.0, 2.0, 3.0]).masked_fill(Tensor([True, False, True]), 0.0).tolist()
        [0.0, 2.0, 0.0]
        """
        if not isinstance(mask, type(self)) or not dtypes.is_bool(mask.dtype):
            got = mask.dtype if isinstance(mask, type(self)) else type(mask).__name__
            raise TypeError(f"masked_fill: mask must be a bool tensor, got {got!r}")
        if isinstance(value, type(self)):
            if value.ndim:
                raise RuntimeError(f"masked_fill: value must be a scalar or a 0-d tensor, got shape {value.shape}")
            v = value.cast(self.dtype)
        elif isinstance(value, numbers.Number):
            v = type(self)(value, device=self.device).cast(self.dtype)
        else:
            raise TypeError(f"masked_fill: value must be a scalar or a 0-d tensor, got {type(value).__name__}")
        self._broadcast_shape("masked_fill", self.shape, mask.shape)  # checked here so the error names masked_fill
        return mask.where(v, self)

    def _select_positions(self, op: str, size: int | None) -> tuple[Tensor, Tensor, Tensor, int]:
        """For self's flattened bool values: `sel[k, i]` (element i is the k-th true one), the true count, the
        flat positions i as a (1, n) int32 tensor, and the number of rows (size, or the count realized)."""
        m = self.reshape(self.numel())
        n = self.numel()
        count = m.sum()
        if size is None:
            size = int(count.item())  # the output's length is data: realize it
        elif not _is_int(size) or size < 0:
            raise ArgumentError(f"{op}: size must be a non-negative int, got {size!r}")
        pos = m.cast(dtypes.int32).cumsum(0) - 1
        pos = m.where(pos, -1).reshape(1, n)
        k = self.arange(size, dtype=dtypes.int32, device=self.device).reshape(size, 1)
        i = self.arange(n, dtype=dtypes.int32, device=self.device).reshape(1, n)
        return pos == k, count, i, size

    def masked_select(self, mask: Tensor, size: int | None = None, fill_value: Any = 0) -> Tensor:
        """The elements of self where `mask` (broadcast with self) is true, as a 1-D tensor in row-major
        order. Without `size` the count is data: the mask is realized to get it. With `size` the result has
        that length (true elements past it are dropped, missing ones are `fill_value`) and nothing realizes.

        >>> x = Tensor([[1, 2], [3, 4]])
        >>> x.masked_select(x > 1).tolist(), x.masked_select(x > 2, size=3, fill_value=-1).tolist()
        ([2, 3, 4], [3, 4, -1])
        """
        op = "masked_select"
        if not isinstance(mask, type(self)) or not dtypes.is_bool(mask.dtype):
            got = mask.dtype if isinstance(mask, type(self)) else type(mask).__name__
            raise TypeError(f"{op}: mask must be a bool tensor, got {got!r}")
        shape = self._broadcast_shape(op, self.shape, mask.shape)
        x, m = self._broadcast_to(shape), mask._broadcast_to(shape)
        sel, count, _, size = m._select_positions(op, size)
        out = _scattered_sum(sel.where(x.reshape(1, x.numel()), 0), 1).cast(self.dtype)
        if not isinstance(fill_value, (bool, int, float)) or fill_value != 0:
            k = self.arange(size, dtype=dtypes.int32, device=self.device)
            out = (k < count).where(out, type(self)(fill_value, device=self.device).cast(self.dtype))
        return out

    def nonzero(
        self, size: int | None = None, fill_value: int | Sequence[int] = 0, *, as_tuple: bool = False
    ) -> Tensor | tuple[Tensor, ...]:
        """The coordinates of the nonzero elements as an (n, ndim) int32 tensor, in row-major order, like
        torch.nonzero (`as_tuple=True`: one 1-D tensor per axis instead, like numpy's nonzero). Without `size` n
        is data: realizes the count. With `size` (as in jax.numpy.nonzero) n is `size`: extra nonzeros are
        dropped, missing rows are `fill_value` (an int, or one per axis); lazy.

        >>> Tensor([[0, 3], [5, 0]]).nonzero().tolist()
        [[0, 1], [1, 0]]
        >>> Tensor([0.0, 2.0]).nonzero(size=2, fill_value=-1).tolist()
        [[1], [-1]]
        """
        op = "nonzero"
        m = self if dtypes.is_bool(self.dtype) else self != 0
        sel, count, i, size = m._select_positions(op, size)
        if isinstance(fill_value, (list, tuple)):
            if len(fill_value) != self.ndim:
                raise ArgumentError(f"{op}: fill_value has {len(fill_value)} entries for {self.ndim} dimensions")
            fill: Any = type(self)(list(fill_value), dtype=dtypes.int32, device=self.device).reshape(1, self.ndim)
        elif _is_int(fill_value):
            fill = int(fill_value)
        else:
            raise TypeError(f"{op}: fill_value must be an int or a sequence of ints, got {fill_value!r}")
        if self.ndim == 0:
            if as_tuple:  # torch: a 0-d tensor counts as a 1-element vector here
                return (self.zeros(size, dtype=dtypes.int32, device=self.device),)
            return self.zeros(size, 0, dtype=dtypes.int32, device=self.device)
        flat = _scattered_sum(sel.where(i, 0), 1).reshape(size, 1)  # the flat position of each selected element
        # one column an axis, its stride and size constants (a division by a constant is a multiply, and by 1 none:
        # as tensors they were loads, and two integer divisions an element); never 0, an empty tensor has no
        # nonzeros (every row is fill_value), and IDIV/MOD by 0 traps
        cols = [
            _floor_mod(_floor_div(flat, max(math.prod(self.shape[d + 1 :]), 1)), max(n, 1))
            for d, n in enumerate(self.shape)
        ]
        coords = cols[0].cat(*cols[1:], dim=1) if len(cols) > 1 else cols[0]
        k = self.arange(size, dtype=dtypes.int32, device=self.device).reshape(size, 1)
        out = (k < count).where(coords, fill)._broadcast_to((size, self.ndim)).cast(dtypes.int32)
        if as_tuple:
            return tuple(out.shrink(((0, size), (d, d + 1))).reshape(size) for d in range(self.ndim))
        return out

    def one_hot(self, num_classes: int = -1) -> Tensor:
        """An int32 tensor with a new last axis of `num_classes`: 1 at each value's position, 0 elsewhere. With
        num_classes=-1 it is the maximum value + 1 (data: realizes the maximum). A value out of range gives a
        row of zeros.

        >>> Tensor([0, 2]).one_hot(3).tolist()
        [[1, 0, 0], [0, 0, 1]]
        """
        if dtypes.is_bool(self.dtype) or not dtypes.is_int(self.dtype):
            raise TypeError(f"one_hot: the tensor must have an integer dtype, got {self.dtype!r}")
        if not _is_int(num_classes) or num_classes < -1:
            raise ArgumentError(f"one_hot: num_classes must be -1 or a non-negative int, got {num_classes!r}")
        if num_classes == -1:
            if self.numel() == 0:
                raise ArgumentError(f"one_hot: cannot infer num_classes from an empty tensor (shape {self.shape})")
            num_classes = int(self.max().item()) + 1
        idx = _index_dtype(self, "one_hot")
        ar = self.arange(num_classes, dtype=idx.dtype, device=self.device)
        return (idx.reshape(*self.shape, 1) == ar).cast(dtypes.int32)


def _strip_leading_ones(shape: tuple[int, ...], ndim: int) -> tuple[int, ...]:
    while len(shape) > ndim and shape[0] == 1:
        shape = shape[1:]
    return shape


def _broadcastable(src: tuple[int, ...], dst: tuple[int, ...]) -> bool:
    if len(src) > len(dst):
        return False
    return all(s in (1, d) for s, d in zip(src, dst[len(dst) - len(src) :]))


def _floor_div(a: Tensor, b: Tensor) -> Tensor:
    return a._binary(Ops.IDIV, b, "floor_divide")


def _floor_mod(a: Tensor, b: Tensor) -> Tensor:
    return a._binary(Ops.MOD, b, "remainder")


def _scattered_sum(hits: Tensor, axis: int) -> Tensor:
    """The sum over `axis` of `hits` = `where(pos == p, v, 0)`, pos a loaded position and p the output's: one stage,
    in the summed axis' order (torch's scatter_add on the CPU adds in index order too), and stored on its own. The
    scheduler runs such a sum as a scatter (`out[pos] += v`, O(len(pos))) only when it is its kernel's whole value;
    fused with what uses it, it would loop over every (p, pos) pair.

    >>> hits = Tensor([[1, 0, 1], [0, 0, 0]]) == 1
    >>> _scattered_sum(hits.where(Tensor([[5, 6, 7]]), 0), 1).tolist()
    [12, 0]
    """
    return hits._pick_sum(axis).contiguous()
