"""Linear algebra and functional ops: matmul, einsum, linear, softmax and friends, interpolation.

>>> from zeptograd import Tensor
>>> (Tensor([[1.0, 2.0]]) @ Tensor([[3.0], [4.0]])).tolist()
[[11.0]]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from zeptograd.dtype import NARROW_FLOATS, DType, dtypes, least_upper_dtype
from zeptograd.gradient import custom_gradient
from zeptograd.helpers import ArgumentError
from zeptograd.mixin.args import compute_dtype, tensor_dtype
from zeptograd.mixin.reduce import SPLIT_SUM, sum_of_products
from zeptograd.uop.movement import movement_uop
from zeptograd.uop.ops import Ops, UOp

if TYPE_CHECKING:
    from zeptograd.tensor import Tensor

_INTERPOLATE_MODES = {"nearest": 0, "nearest-exact": 0, "linear": 1, "bilinear": 2, "trilinear": 3}


def _shapes(operands: Sequence[Any]) -> str:
    return ", ".join(str(o.shape) for o in operands)


def _parse_einsum(formula: str, operands: Sequence[Tensor]) -> tuple[list[list[str]], list[str]]:
    """Each operand's axis labels and the output's, with every '...' axis named by a digit label ('0', '1', ...
    counted from the left of the broadcast ellipsis shape)."""
    where = f"einsum: formula {formula!r} with shapes {_shapes(operands)}"
    text = formula.replace(" ", "")
    if text.count("->") > 1:
        raise ArgumentError(f"{where}: more than one '->'")
    lhs, arrow, rhs = text.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        raise ArgumentError(f"{where}: the formula names {len(terms)} operands, {len(operands)} were given")
    for term in [*terms, rhs]:
        if term.replace("...", "").count(".") or term.count("...") > 1:
            raise ArgumentError(f"{where}: '.' may only appear as one '...' per term, got {term!r}")
        if not all(c.isalpha() and c.isascii() for c in term.replace("...", "")):
            raise ArgumentError(f"{where}: subscripts must be letters, got {term!r}")
    ell_ndims = []
    for k, (term, op) in enumerate(zip(terms, operands)):
        named = len(term.replace("...", ""))
        if ("..." in term and op.ndim < named) or ("..." not in term and op.ndim != named):
            raise ArgumentError(f"{where}: operand {k} has {op.ndim} dimensions but subscripts {term!r}")
        ell_ndims.append(op.ndim - named if "..." in term else 0)
    n_ell = max(ell_ndims, default=0)
    ell_labels = [str(i) for i in range(n_ell)]
    labels = []
    for term, e in zip(terms, ell_ndims):
        before, _, after = term.partition("...")
        labels.append(list(before) + ell_labels[n_ell - e :] + list(after) if "..." in term else list(term))
    if arrow:
        before, _, after = rhs.partition("...")
        out = list(before) + (ell_labels if "..." in rhs else []) + list(after)
        seen = {c for ls in labels for c in ls}
        for c in out:
            if c not in seen:
                raise ArgumentError(f"{where}: output subscript {c!r} appears in no operand")
            if out.count(c) > 1:
                raise ArgumentError(f"{where}: output subscript {c!r} appears more than once")
    else:
        counts: dict[str, int] = {}
        for term in terms:
            for c in term.replace("...", ""):
                counts[c] = counts.get(c, 0) + 1
        out = ell_labels + sorted(c for c, n in counts.items() if n == 1)
    return labels, out


def _direct_product(a: UOp, b: UOp, dt: DType) -> UOp | None:
    """a (..., M, K) @ b (..., K, N) built as UOps, when both have dtype `dt`, a float dtype whose sum of K takes one
    stage, and their batch axes are the same: the graph the tensor ops in `matmul` build (a broadcast multiply and a
    sum over the last axis), without their checks and the tensors between them (a 256 x 256 product spent 0.42 ms of
    Python building it from tensor ops). None where those ops do more (casts, broadcast batch axes, a split sum)."""
    *batch, m, k = a.shape
    n = b.shape[-1]
    if a.dtype is not dt or b.dtype is not dt or dt not in (dtypes.float32, dtypes.float64):
        return None
    if tuple(batch) != b.shape[:-2] or k > SPLIT_SUM:
        return None
    nb = len(batch)
    a3 = movement_uop(a, Ops.RESHAPE, (*batch, m, 1, k))
    b3 = movement_uop(movement_uop(b, Ops.PERMUTE, (*range(nb), nb + 1, nb)), Ops.RESHAPE, (*batch, 1, n, k))
    return sum_of_products(a3, b3, (*batch, m, n, k), (nb + 2,))


class FunctionalMixin:
    """Ops built from elementwise ops, reductions and movement: products, normalizations, resampling."""

    __slots__ = ()

    # *** products ***

    def __matmul__(self, x: Tensor) -> Tensor:
        return self.matmul(x)

    def __rmatmul__(self, x: Tensor) -> Tensor:
        return self.matmul(x, reverse=True)

    def matmul(self, x: Tensor, reverse: bool = False, dtype: DType | str | None = None) -> Tensor:
        """Matrix product, with numpy's rules for 1-D operands and broadcast batch axes: one fused kernel
        (a broadcast multiply and a sum). The result has the operands' promoted dtype (int8 @ int8 is int8);
        `dtype` sets the dtype it accumulates in and returns. `reverse=True` computes `x @ self`.

        >>> (Tensor([[1.0, 2.0]]) @ Tensor([[3.0], [4.0]])).tolist()
        [[11.0]]
        >>> Tensor([1, 2, 3]).dot(Tensor([4, 5, 6])).item()
        32
        """
        if not isinstance(x, type(self)):
            raise TypeError(f"matmul: expected a Tensor, got {type(x).__name__}")
        if reverse:
            return x.matmul(self, dtype=dtype)
        if x.device != self.device:
            raise RuntimeError(f"matmul: tensors on different devices ({self.device} and {x.device})")
        if self.ndim == 0 or x.ndim == 0:
            raise ArgumentError(
                f"matmul: both operands need at least 1 dimension, got shapes {self.shape} and {x.shape}"
            )
        a = self.reshape(1, self.shape[0]) if self.ndim == 1 else self
        b = x.reshape(x.shape[0], 1) if x.ndim == 1 else x
        if a.shape[-1] != b.shape[-2]:
            raise ArgumentError(
                f"matmul: shapes {self.shape} and {x.shape} are not aligned ({a.shape[-1]} != {b.shape[-2]})"
            )
        try:
            self._broadcast_shape("matmul", a.shape[:-2], b.shape[:-2])
        except ValueError:
            raise ArgumentError(
                f"matmul: the batch axes of shapes {self.shape} and {x.shape} cannot be broadcast together"
            ) from None
        dt = tensor_dtype(dtype, "matmul") if dtype is not None else least_upper_dtype(a.dtype, b.dtype)
        if dtype is None and (direct := _direct_product(a.uop, b.uop, dt)) is not None:
            out = type(self)._from_uop(direct, self.device)
        else:
            # bfloat16 and fp8 products are exact in float32 and summed there, as PyTorch and tensor cores compute
            # them; other products keep the operands' dtype (the sum accumulates small ints and float16 wider)
            factor = dtypes.float32 if dt in NARROW_FLOATS else dt
            a3 = a.cast(dt).cast(factor).reshape(*a.shape[:-1], 1, a.shape[-1])
            bt = b.cast(dt).cast(factor).transpose(-1, -2)
            b3 = bt.reshape(*bt.shape[:-2], 1, *bt.shape[-2:])
            out = (a3 * b3).sum(axis=-1).cast(dt)
        if self.ndim == 1:
            out = out.reshape(*out.shape[:-2], out.shape[-1])
        if x.ndim == 1:
            out = out.reshape(out.shape[:-1])
        return out

    def dot(self, x: Tensor, dtype: DType | str | None = None) -> Tensor:
        """The same as `matmul` (tinygrad's name; 1-D operands give the inner product).

        >>> Tensor([1.0, 2.0]).dot(Tensor([[1.0], [1.0]])).tolist()
        [3.0]
        """
        return self.matmul(x, dtype=dtype)

    @staticmethod
    def einsum(formula: str, *operands: Any, dtype: DType | str | None = None) -> Tensor:
        """Einstein summation: `Tensor.einsum("ij,jk->ik", a, b)` is a @ b. Without '->' the output has the
        subscripts that appear once, in alphabetical order; a subscript repeated within one operand takes its
        diagonal; '...' stands for broadcast axes (summed when an explicit output leaves it out, as in PyTorch);
        size-1 axes broadcast against their subscript's size.
        Operands may also be passed as one list. Pairs of operands contract left to right.

        >>> a = Tensor([[1, 2], [3, 4]])
        >>> Tensor.einsum("ij,jk->ik", a, a).tolist(), Tensor.einsum("ii", a).item(), Tensor.einsum("ij->j", a).tolist()
        ([[7, 10], [15, 22]], 5, [4, 6])
        """
        if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
            operands = tuple(operands[0])
        if not isinstance(formula, str):
            raise TypeError(f"einsum: the formula must be a string, got {type(formula).__name__}")
        if not operands:
            raise ArgumentError(f"einsum: formula {formula!r} got no operands")
        cls = type(operands[0])
        for o in operands:
            if not isinstance(o, cls) or not hasattr(o, "uop"):
                raise TypeError(f"einsum: operands must be Tensors, got {type(o).__name__}")
            if o.device != operands[0].device:
                raise RuntimeError(f"einsum: tensors on different devices ({operands[0].device} and {o.device})")
        labels, out_labels = _parse_einsum(formula, operands)
        dt = tensor_dtype(dtype, "einsum") if dtype is not None else least_upper_dtype(*(o.dtype for o in operands))
        where = f"einsum: formula {formula!r} with shapes {_shapes(operands)}"
        terms = []
        for k, (op, ls) in enumerate(zip(operands, labels)):
            t, ls = op.cast(dt), list(ls)
            while len(set(ls)) < len(ls):
                c = next(c for c in ls if ls.count(c) > 1)
                i, j = [n for n, lc in enumerate(ls) if lc == c][:2]
                if t.shape[i] != t.shape[j]:
                    raise ArgumentError(
                        f"{where}: subscript {c!r} repeats in operand {k} over sizes {t.shape[i]} != {t.shape[j]}"
                    )
                t, ls = t.diagonal(0, i, j), [lc for n, lc in enumerate(ls) if n not in (i, j)] + [c]
            terms.append((t, ls))
        sizes: dict[str, int] = {}
        for k, (t, ls) in enumerate(terms):
            for c, s in zip(ls, t.shape):
                if s != 1 and sizes.get(c, 1) not in (1, s):
                    name = "the '...' axes" if c.isdigit() else f"subscript {c!r}"
                    raise ArgumentError(f"{where}: {name} has sizes {sizes[c]} and {s} (in operand {k})")
                sizes[c] = s if s != 1 else sizes.get(c, 1)
        acc: Tensor | None = None
        acc_labels: list[str] = []
        for k, (t, ls) in enumerate(terms):
            later = set(out_labels).union(*(set(lt) for _, lt in terms[k + 1 :]))
            if acc is None:
                acc, acc_labels = t, ls
            else:
                joined = acc_labels + [c for c in ls if c not in acc_labels]
                acc = acc._aligned(acc_labels, joined) * t._aligned(ls, joined)
                acc_labels = joined
            gone = [n for n, c in enumerate(acc_labels) if c not in later]
            if gone:
                acc = acc.sum(axis=tuple(gone))
                acc_labels = [c for c in acc_labels if c in later]
        assert acc is not None
        acc = acc._aligned(acc_labels, out_labels)
        return acc.cast(dt)._broadcast_to(tuple(sizes[c] for c in out_labels))

    def _aligned(self, labels: list[str], order: list[str]) -> Tensor:
        """This tensor's axes (named by `labels`) arranged in `order`, with size-1 axes for the labels it lacks."""
        perm = [labels.index(c) for c in order if c in labels]
        t = self.permute(perm) if perm else self
        return t.reshape(tuple(self.shape[labels.index(c)] if c in labels else 1 for c in order))

    def linear(self, weight: Tensor, bias: Tensor | None = None) -> Tensor:
        """`self @ weight + bias`, with tinygrad's layout: `weight` is (in_features, out_features); a 1-D
        weight multiplies elementwise.

        >>> Tensor([[1.0, 2.0]]).linear(Tensor([[1.0, 0.0], [0.0, 2.0]]), Tensor([0.5, 0.5])).tolist()
        [[1.5, 4.5]]
        """
        if not isinstance(weight, type(self)):
            raise TypeError(f"linear: weight must be a Tensor, got {type(weight).__name__}")
        if bias is not None and not isinstance(bias, type(self)):
            raise TypeError(f"linear: bias must be a Tensor or None, got {type(bias).__name__}")
        x = self * weight if weight.ndim == 1 else self.matmul(weight)
        if bias is not None:
            self._broadcast_shape("linear", x.shape, bias.shape)  # checked here so the error names linear
        return x if bias is None else x + bias

    # *** normalizations ***

    def _softmax_parts(self, axis: Any, dtype: DType | str | None, name: str) -> tuple[Tensor, Tensor, DType]:
        """x - max(x) and the sum of its exp over `axis`, in float32 for 16-bit floats, and the output dtype."""
        x = self.cast(tensor_dtype(dtype, name)) if dtype is not None else self
        out_dt = x.dtype if dtypes.is_float(x.dtype) else dtypes.default_float
        x = x.cast(compute_dtype(x.dtype))
        if not isinstance(axis, int) or isinstance(axis, bool):
            raise TypeError(f"{name}: axis must be an int, got {axis!r}")
        axes = x._axes(axis, name)
        if x.numel() == 0:
            return x, x, out_dt  # nothing to normalize (and an empty axis has no max)
        m = x - x.max(axis=axes, keepdim=True)
        return m, m.exp().sum(axis=axes, keepdim=True), out_dt

    def _softmax(self, axis: Any, dtype: DType | str | None, name: str, log: bool = False) -> Tensor:
        """softmax (or log_softmax) over `axis`, with PyTorch's gradient formula; `name` is the public op's."""
        m, s, out_dt = self._softmax_parts(axis, dtype, name)
        if not m.numel():
            return m.cast(out_dt)
        if log:
            return (m - s.log())._custom_grad("log_softmax", m, s).cast(out_dt)
        return (m.exp() / s)._custom_grad("softmax", m, s).cast(out_dt)

    def softmax(self, axis: int = -1, dtype: DType | str | None = None, dim: int | None = None) -> Tensor:
        """exp(x) / sum(exp(x)) over `axis` (`dim` is PyTorch's name), computed as exp(x - max) so large values
        don't overflow; float16 computes in float32 and returns float16, integers return float32.

        >>> [round(v, 4) for v in Tensor([1.0, 2.0, 3.0]).softmax().tolist()]
        [0.09, 0.2447, 0.6652]
        """
        return self._softmax(axis if dim is None else dim, dtype, "softmax")

    def log_softmax(self, axis: int = -1, dtype: DType | str | None = None, dim: int | None = None) -> Tensor:
        """log(softmax(x)) over `axis`, computed as (x - max) - log(sum(exp(x - max))): finite where softmax
        underflows to 0.

        >>> [round(v, 4) for v in Tensor([1.0, 2.0, 3.0]).log_softmax().tolist()]
        [-2.4076, -1.4076, -0.4076]
        """
        return self._softmax(axis if dim is None else dim, dtype, "log_softmax", log=True)

    def softmin(self, axis: int = -1, dtype: DType | str | None = None, dim: int | None = None) -> Tensor:
        """softmax(-x) over `axis`: the weights favour the smallest values.

        >>> [round(v, 4) for v in Tensor([1.0, 2.0, 3.0]).softmin().tolist()]
        [0.6652, 0.2447, 0.09]
        """
        x = self.cast(tensor_dtype(dtype, "softmin")) if dtype is not None else self
        return (-x._float())._softmax(axis if dim is None else dim, None, "softmin")

    def normalize(self, p: float = 2.0, dim: int | Sequence[int] = 1, eps: float = 1e-12) -> Tensor:
        """x / max(||x||_p, eps), the p-norm taken over `dim` (torch.nn.functional.normalize); `p` may be any
        positive number or inf.

        >>> Tensor([[3.0, 4.0]]).normalize().numpy()
        array([[0.6, 0.8]], dtype=float32)
        """
        if not isinstance(p, (int, float)) or isinstance(p, bool) or not p > 0:
            raise ArgumentError(f"normalize: p must be a positive number or inf, got {p!r}")
        out_dt = self.dtype if dtypes.is_float(self.dtype) else dtypes.default_float
        x = self.cast(compute_dtype(self.dtype))
        axes = x._axes(dim, "normalize")
        mag = x.abs()
        if p == math.inf:
            norm = mag.max(axis=axes, keepdim=True) if x.numel() else mag.sum(axis=axes, keepdim=True)
        elif p == 2:
            norm = (x * x).sum(axis=axes, keepdim=True)._norm_sqrt()  # gradient 0 at a zero norm, as PyTorch
        elif p == 1:
            norm = mag.sum(axis=axes, keepdim=True)
        else:
            # |x|**p and its p-th root as exp2(log2): at 0 they are 0, through a where whose other branch also
            # reads a safe 1 instead of 0 (log2(0) = -inf there would make the gradient 0 * inf = NaN)
            zero = mag == 0
            powered = zero.where(0.0, (zero.where(1.0, mag).log2() * p).exp2())
            summed = powered.sum(axis=axes, keepdim=True)
            empty = summed == 0
            norm = empty.where(0.0, (empty.where(1.0, summed).log2() * (1 / p)).exp2())
        return (x / norm.maximum(eps)).cast(out_dt)

    # *** resampling ***

    def interpolate(self, size: int | Sequence[int], mode: str = "linear", align_corners: bool = False) -> Tensor:
        """Resize the last len(`size`) axes to `size` (tinygrad's form; an int `size` resizes every axis but the
        first two, as in PyTorch). Modes as torch.nn.functional.interpolate: 'nearest' (PyTorch's legacy
        nearest), 'nearest-exact', and 'linear' (with 'bilinear'/'trilinear' for 2/3 axes), each axis
        interpolated in turn. Integers interpolate in float32 and truncate back, except uint8 images in bilinear mode,
        which take PyTorch's fixed-point path and its rounding.

        >>> Tensor([[1.0, 3.0]]).interpolate((4,)).tolist()
        [[1.0, 1.5, 2.5, 3.0]]
        """
        if isinstance(size, int) and not isinstance(size, bool):
            if self.ndim < 3:
                raise ArgumentError(f"interpolate: an int size needs (N, C, ...) input, got shape {self.shape}")
            size = (size,) * (self.ndim - 2)
        if not isinstance(size, (list, tuple)) or not all(isinstance(s, int) and not isinstance(s, bool) for s in size):
            raise TypeError(f"interpolate: size must be an int or a sequence of ints, got {size!r}")
        size = tuple(size)
        if mode not in _INTERPOLATE_MODES:
            raise ArgumentError(f"interpolate: mode {mode!r} is not one of {', '.join(_INTERPOLATE_MODES)}")
        if _INTERPOLATE_MODES[mode] > 1 and len(size) != _INTERPOLATE_MODES[mode]:
            raise ArgumentError(f"interpolate: mode {mode!r} resizes {_INTERPOLATE_MODES[mode]} axes, got size {size}")
        if align_corners and mode.startswith("nearest"):
            raise ArgumentError(f"interpolate: align_corners only applies to linear modes, not {mode!r}")
        if not 0 < len(size) <= self.ndim:
            raise ArgumentError(f"interpolate: size {size} does not fit a tensor of shape {self.shape}")
        spatial = self.shape[self.ndim - len(size) :]
        if any(s <= 0 for s in size) or any(s <= 0 for s in spatial):
            raise ArgumentError(f"interpolate: sizes must be positive, got input shape {self.shape} and size {size}")
        linear = _INTERPOLATE_MODES[mode] > 0
        if linear and self.dtype is dtypes.uint8 and len(size) == 2:
            return self._bilinear_uint8(size, align_corners)
        x = self.cast(compute_dtype(self.dtype)) if linear else self
        for axis in range(self.ndim - len(size), self.ndim):
            n_in, n_out = self.shape[axis], size[axis - self.ndim + len(size)]
            if n_in == n_out:
                continue  # in every mode the source of each output is the same position, with weight 1
            if linear:
                lo, hi, w_hi = _linear_sources(n_in, n_out, align_corners)
                x = x._resample(axis, [(lo, 1.0 - w_hi), (hi, w_hi)])
            else:
                x = x._resample(axis, [(_nearest_sources(n_in, n_out, mode == "nearest-exact"), None)])
        return x.cast(self.dtype)

    def _bilinear_uint8(self, size: tuple[int, ...], align_corners: bool) -> Tensor:
        """PyTorch's bilinear resize of uint8 images: fixed-point weights (as Pillow's resampler), the width first,
        then the height, each pass rounding to uint8."""
        x = self
        for axis in (self.ndim - 1, self.ndim - 2):
            n_in, n_out = self.shape[axis], size[axis - self.ndim + 2]
            if n_in == n_out:
                continue
            taps, bits = _fixed_point_taps(n_in, n_out, align_corners)
            acc = x.cast(dtypes.int32)._resample(axis, taps)
            x = ((acc + (1 << (bits - 1))) >> bits).clip(0, 255).cast(dtypes.uint8)
        return x

    def _resample(self, axis: int, sources: list[tuple[np.ndarray, np.ndarray | None]]) -> Tensor:
        """Output j along `axis` = sum over (index, weight) of weight[j] * self[..., index[j], ...]: a gather
        written as a masked sum over the input axis (only the matching element is non-zero, so it is exact)."""
        n_in, n_out = self.shape[axis], len(sources[0][0])
        rest = self.ndim - axis - 1
        x = self.reshape(*self.shape[: axis + 1], 1, *self.shape[axis + 1 :])
        k = self.arange(n_in, dtype=dtypes.int32, device=self.device).reshape(n_in, 1, *(1,) * rest)
        total = None
        for idx, weight in sources:
            at = self._new_const(idx.astype(np.int32)).reshape(1, n_out, *(1,) * rest)
            if weight is None:
                value = x
            else:
                w = self._new_const(weight.astype(np.float32)).cast(self.dtype)
                value = x * w.reshape(1, n_out, *(1,) * rest)
            term = (k == at).where(value, self.zeros((), dtype=self.dtype, device=self.device))
            total = term if total is None else total + term
        assert total is not None
        return total.sum(axis=axis).cast(self.dtype)

    def _new_const(self, arr: np.ndarray) -> Tensor:
        return type(self)(arr, device=self.device)


def _linear_sources(n_in: int, n_out: int, align_corners: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """PyTorch's linear resampling of one axis, in its float32 arithmetic: each output's two source indices
    and the weight of the second."""
    dst = np.arange(n_out, dtype=np.float64)
    if align_corners:
        scale = np.float32((n_in - 1) / (n_out - 1)) if n_out > 1 else np.float32(0)
        src = (np.float64(scale) * dst).astype(np.float32)
    else:
        scale = np.float32(n_in) / np.float32(n_out)
        src = np.maximum(np.float64(scale) * (dst + 0.5) - 0.5, 0).astype(np.float32)
    lo = src.astype(np.int64)
    lam = np.clip(src - lo.astype(np.float32), 0, 1).astype(np.float32)
    hi = np.where(lo < n_in - 1, lo + 1, lo)
    return lo, hi, lam


def _fixed_point_taps(n_in: int, n_out: int, align_corners: bool) -> tuple[list[tuple[np.ndarray, np.ndarray]], int]:
    """The (source index, integer weight) taps of each output along one axis, and the weights' fraction bits, as
    PyTorch's uint8 bilinear resize computes them: a triangle filter of support 1 around each output's center,
    normalized, then scaled to the most fraction bits that keep the largest weight within int16."""
    if align_corners:
        scale, offset = ((n_in - 1) / (n_out - 1) if n_out > 1 else 0.0), 0.5
    else:
        scale = n_in / n_out
        offset = 0.5 * scale
    rows = []
    for i in range(n_out):
        center = scale * i + offset
        first = max(int(center - 0.5), 0)
        stop = min(int(center + 1.5), n_in)
        w = [max(0.0, 1.0 - abs(j - center + 0.5)) for j in range(first, stop)]
        total = sum(w)
        rows.append((first, [v / total for v in w] if total else w))
    largest = max(max(w, default=0.0) for _, w in rows)
    bits = 0
    while bits < 22 and int(0.5 + largest * (1 << (bits + 1))) < 1 << 15:
        bits += 1
    width = max(len(w) for _, w in rows)
    taps = []
    for k in range(width):
        idx = np.array([min(first + k, n_in - 1) for first, _ in rows], np.int32)
        weight = np.array([int(0.5 + w[k] * (1 << bits)) if k < len(w) else 0 for _, w in rows], np.int32)
        taps.append((idx, weight))
    return taps, bits


def _nearest_sources(n_in: int, n_out: int, exact: bool) -> np.ndarray:
    """PyTorch's nearest source index of each output along one axis ('nearest' or 'nearest-exact')."""
    dst = np.arange(n_out, dtype=np.int64)
    scale = np.float32(n_in) / np.float32(n_out)
    if exact:
        src = np.floor(((dst + 0.5) * np.float64(scale)).astype(np.float32))
    elif n_out == 2 * n_in:
        src = dst >> 1
    else:
        src = np.floor(dst.astype(np.float32) * scale)
    return np.minimum(src.astype(np.int64), n_in - 1)


def _normalized_axes(s: Tensor, x: Tensor) -> tuple[int, ...]:
    """The axes a softmax normalized over: where its sum (kept as size 1) is narrower than the input (an axis
    of size 1 either way sums to itself, so leaving it out changes nothing)."""
    return tuple(i for i, (a, b) in enumerate(zip(s.shape, x.shape)) if a != b)


@custom_gradient("softmax")
def _softmax_grad(g: Tensor, y: Tensor, m: Tensor, s: Tensor) -> tuple[Tensor | None, None]:
    """dx = y * (g - sum(g * y)) over the softmax's axis, as PyTorch computes it (not traced through exp and
    the division: fewer roundings, and the same ones as torch's)."""
    axes = _normalized_axes(s, m)
    return y * (g - (g * y).sum(axis=axes, keepdim=True)), None


@custom_gradient("log_softmax")
def _log_softmax_grad(g: Tensor, y: Tensor, m: Tensor, s: Tensor) -> tuple[Tensor | None, None]:
    """dx = g - exp(y) * sum(g) over the axis, as PyTorch computes it."""
    axes = _normalized_axes(s, m)
    return g - y.exp() * g.sum(axis=axes, keepdim=True), None
