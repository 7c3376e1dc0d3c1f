"""Movement ops: reshape, permute, expand, pad, shrink, flip and what is built from them. They move no data:
the scheduler turns them into index arithmetic.

Everything here is made of the six movement primitives (RESHAPE PERMUTE EXPAND PAD SHRINK FLIP); the ops that
join several tensors (cat, stack, the reflect and replicate pads) add a `where` per piece.

>>> Tensor.arange(6).reshape(2, 3).T.tolist()
[[0, 3], [1, 4], [2, 5]]
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from zeptograd.dtype import DType, dtypes, least_upper_dtype
from zeptograd.helpers import ArgumentError
from zeptograd.mixin.args import Scalar, int_arg, shape_arg
from zeptograd.uop.ops import Ops, UOp, is_bound_variable
from zeptograd.uop.shape import prod

if TYPE_CHECKING:
    from zeptograd.tensor import Tensor

PAD_MODES = ("constant", "reflect", "replicate", "circular")


def _int_tuple(x: Any, op: str, what: str) -> tuple[int, ...]:
    """One int or a sequence of ints, as a tuple."""
    if isinstance(x, (list, tuple)):
        return tuple(int_arg(v, op, what) for v in x)
    return (int_arg(x, op, what),)


def symbolic_str(x: Any) -> str:
    """A bound or symbolic expression as its variables' names (`pos+1`), never their values; anything else as str."""
    if not isinstance(x, UOp):
        return str(x)
    return str(x.substitute({u: u.src[0] for u in x.toposort() if is_bound_variable(u)}))


class MovementMixin:
    """Ops that change which element sits where, never the values."""

    __slots__ = ()

    # *** helpers ***

    def _shape_of(self, other: Any, op: str) -> tuple[int, ...]:
        """The shape of `other`, which must be a Tensor (reshape_as, view_as, expand_as)."""
        if not isinstance(other, type(self)):
            raise TypeError(f"{op}: expected a Tensor, got {type(other).__name__}")
        return other.shape

    def _movement_dim(self, dim: Any, op: str, ndim: int | None = None) -> int:
        """`dim` normalized to [0, ndim) (ndim defaults to self.ndim). As in PyTorch, a 0-d tensor takes dims 0
        and -1 (they name the tensor itself; 0 is returned)."""
        n = self.ndim if ndim is None else ndim
        d = dim if type(dim) is int else int_arg(dim, op, "dim")
        lo, hi = -max(n, 1), max(n, 1) - 1
        if not lo <= d <= hi:
            raise IndexError(f"{op}: dim {d} is out of range [{lo}, {hi}] for a tensor of shape {self.shape}")
        return d % n if n else 0

    def _movement_dims(self, dims: Any, op: str) -> tuple[int, ...]:
        """One dim or a sequence of dims, normalized, in the given order; a repeated dim is an error."""
        out = tuple(self._movement_dim(d, op) for d in (dims if isinstance(dims, (list, tuple)) else (dims,)))
        if len(set(out)) != len(out):
            raise ArgumentError(f"{op}: dims {dims} repeat an axis (shape {self.shape})")
        return out

    def _shrink_dim(self, dim: int, start: int, end: int) -> Tensor:
        return self.shrink(tuple((start, end) if i == dim else None for i in range(self.ndim)))

    def _pad_dim(self, dim: int, before: int, after: int) -> Tensor:
        return self._pad_view(tuple((before, after) if i == dim else (0, 0) for i in range(self.ndim)))

    def _pad_view(self, pairs: tuple[tuple[int, int], ...]) -> Tensor:
        """Zero padding (pairs not negative) that stays a view of self: the slicing and window ops use it where the
        padding is cut away again, so what they return can be written through."""
        if all(p == (0, 0) for p in pairs):
            return self
        return self._new(UOp(Ops.PAD, self.dtype, (self.uop,), tuple(pairs)))

    def _tile_dim(self, dim: int, times: int) -> Tensor:
        """The tensor repeated `times` times along `dim` (a reshape, an expand and a reshape: no copies)."""
        s = self.shape
        x = self.reshape(s[:dim] + (1,) + s[dim:]).expand(s[:dim] + (times,) + s[dim:])
        return x.reshape(s[:dim] + (times * s[dim],) + s[dim + 1 :])

    def _const_of(self, value: Scalar) -> Scalar:
        """`value` as a Python scalar of this tensor's kind, so it stays weak and keeps the dtype (an int
        tensor padded with 1.5 gets 1, truncated as a cast would)."""
        if dtypes.is_bool(self.dtype):
            return bool(value)
        if dtypes.is_int(self.dtype):
            return int(value)
        return float(value)

    # *** reshaping ***

    def reshape(self, *shape: Any) -> Tensor:
        """The same values in a new shape (one size may be -1: inferred; None keeps the size of the axis at that
        position, as in tinygrad).

        >>> Tensor.arange(6).reshape(2, -1).shape, Tensor.ones(2, 3, 4).reshape(None, -1).shape
        ((2, 3), (2, 12))
        """
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        if any(s is None for s in shape):
            if len(shape) > self.ndim and any(s is None for s in shape[self.ndim :]):
                raise ArgumentError(f"reshape: None keeps an existing axis's size, but {self.shape} has no axis there")
            shape = tuple(self.shape[i] if s is None else s for i, s in enumerate(shape))
        new = list(shape_arg(shape, "reshape"))
        if new.count(-1) > 1:
            raise ArgumentError(f"reshape: only one size may be -1, got {tuple(new)}")
        if any(s < -1 for s in new):
            raise ArgumentError(f"reshape: negative size in {tuple(new)}")
        if -1 in new:
            known = prod(s for s in new if s != -1)
            if known == 0 or self.numel() % known:
                raise ArgumentError(f"reshape: cannot reshape a tensor of shape {self.shape} into {tuple(new)}")
            new[new.index(-1)] = self.numel() // known
        target = tuple(new)
        if prod(target) != self.numel():
            raise ArgumentError(
                f"reshape: cannot reshape a tensor of shape {self.shape} ({self.numel()} elements) into {target}"
            )
        return self if target == self.shape else self._new(UOp(Ops.RESHAPE, self.dtype, (self.uop,), target))

    def view(self, *shape: Any) -> Tensor:
        """`reshape` under PyTorch's name; `view(dtype)` reinterprets the bits instead (as `bitcast`).

        >>> Tensor.arange(6).view(3, 2).shape, Tensor.arange(6).view((-1,)).shape
        ((3, 2), (6,))
        """
        if len(shape) == 1 and isinstance(shape[0], (DType, str)):
            return self.bitcast(shape[0])
        return self.reshape(*shape)

    def reshape_as(self, other: Tensor) -> Tensor:
        """This tensor in `other`'s shape.

        >>> Tensor.arange(4).reshape_as(Tensor.zeros(2, 2)).tolist()
        [[0, 1], [2, 3]]
        """
        return self.reshape(self._shape_of(other, "reshape_as"))

    def view_as(self, other: Tensor) -> Tensor:
        """`reshape_as` under PyTorch's other name.

        >>> Tensor.arange(4).view_as(Tensor.zeros(4, 1)).shape
        (4, 1)
        """
        return self.reshape(self._shape_of(other, "view_as"))

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Tensor:
        """Axes `start_dim..end_dim` (inclusive) merged into one; a 0-d tensor becomes 1-d.

        >>> Tensor.zeros(2, 3, 4).flatten(1).shape, Tensor.zeros(2, 3, 4).flatten(0, 1).shape
        ((2, 12), (6, 4))
        """
        start, end = self._movement_dim(start_dim, "flatten"), self._movement_dim(end_dim, "flatten")
        if not self.ndim:
            return self.reshape(1)
        if start > end:
            raise ArgumentError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim} (shape {self.shape})")
        s = self.shape
        return self.reshape(s[:start] + (prod(s[start : end + 1]),) + s[end + 1 :])

    def unflatten(self, dim: int, sizes: Sequence[int]) -> Tensor:
        """Axis `dim` split into axes of `sizes` (one may be -1: inferred).

        >>> Tensor.zeros(2, 12).unflatten(1, (3, -1)).shape
        (2, 3, 4)
        """
        d = self._movement_dim(dim, "unflatten")
        if not self.ndim:
            raise ArgumentError("unflatten: a 0-d tensor has no axis to split")
        if not isinstance(sizes, (list, tuple)):
            raise TypeError(f"unflatten: sizes must be a sequence of ints, got {sizes!r}")
        sizes = shape_arg((tuple(sizes),), "unflatten")
        n = self.shape[d]
        if not sizes:
            raise ArgumentError(f"unflatten: sizes must be non-empty (shape {self.shape}, dim {dim})")
        if sizes.count(-1) > 1 or any(s < -1 for s in sizes):
            raise ArgumentError(f"unflatten: sizes {sizes} have a negative size or more than one -1")
        known = prod(s for s in sizes if s != -1)
        if -1 in sizes:
            if known == 0 or n % known:
                raise ArgumentError(f"unflatten: cannot split axis {dim} of size {n} (shape {self.shape}) into {sizes}")
            sizes = tuple(n // known if s == -1 else s for s in sizes)
        elif known != n:
            raise ArgumentError(
                f"unflatten: sizes {sizes} do not multiply up to the size {n} of dim {dim} (shape {self.shape})"
            )
        return self.reshape(self.shape[:d] + sizes + self.shape[d + 1 :])

    def squeeze(self, dim: int | Sequence[int] | None = None) -> Tensor:
        """Size-1 axes removed: all of them, or those of `dim` (an axis of another size stays, as in PyTorch).

        >>> Tensor.zeros(1, 3, 1).squeeze().shape, Tensor.zeros(1, 3, 1).squeeze(0).shape
        ((3,), (3, 1))
        """
        if dim is None:
            return self.reshape(tuple(s for s in self.shape if s != 1))
        dims = self._movement_dims(dim, "squeeze")
        if not self.ndim:
            return self
        return self.reshape(tuple(s for i, s in enumerate(self.shape) if not (i in dims and s == 1)))

    def unsqueeze(self, dim: int) -> Tensor:
        """A size-1 axis inserted at `dim` (counted in the result: -1 appends one).

        >>> Tensor.zeros(2, 3).unsqueeze(1).shape, Tensor.zeros(2, 3).unsqueeze(-1).shape
        ((2, 1, 3), (2, 3, 1))
        """
        d = int_arg(dim, "unsqueeze", "dim")
        if not -self.ndim - 1 <= d <= self.ndim:
            raise IndexError(
                f"unsqueeze: dim {d} is out of range [{-self.ndim - 1}, {self.ndim}] for a tensor of shape {self.shape}"
            )
        d %= self.ndim + 1
        return self.reshape(self.shape[:d] + (1,) + self.shape[d:])

    # *** reordering axes ***

    def permute(self, *order: Any) -> Tensor:
        """The axes in a new order.

        >>> Tensor.zeros(2, 3, 4).permute(2, 0, 1).shape
        (4, 2, 3)
        """
        axes = shape_arg(order, "permute")
        ndim = self.ndim
        if len(axes) != ndim:
            raise ArgumentError(f"permute: {axes} names {len(axes)} axes, the tensor of shape {self.shape} has {ndim}")
        norm = tuple([self._movement_dim(a, "permute", ndim) for a in axes])
        if len(set(norm)) != len(norm):
            raise ArgumentError(f"permute: {axes} repeats an axis (shape {self.shape})")
        if norm == tuple(range(ndim)):
            return self
        return self._new(UOp(Ops.PERMUTE, self.dtype, (self.uop,), norm))

    def transpose(self, dim0: int = 1, dim1: int = 0) -> Tensor:
        """Axes `dim0` and `dim1` swapped (the defaults transpose a matrix).

        >>> Tensor.zeros(2, 3, 4).transpose(0, -1).shape
        (4, 3, 2)
        """
        a, b = self._movement_dim(dim0, "transpose"), self._movement_dim(dim1, "transpose")
        if not self.ndim:
            return self
        order = list(range(self.ndim))
        order[a], order[b] = order[b], order[a]
        return self.permute(order)

    def swapaxes(self, axis0: int, axis1: int) -> Tensor:
        """`transpose` under numpy's and PyTorch's other name.

        >>> Tensor.zeros(2, 3).swapaxes(0, 1).shape
        (3, 2)
        """
        return self.transpose(axis0, axis1)

    @property
    def T(self) -> Tensor:
        """The axes reversed (a matrix transposed; 0-d and 1-d tensors are unchanged).

        >>> Tensor([[1, 2]]).T.tolist()
        [[1], [2]]
        """
        return self.permute(tuple(reversed(range(self.ndim))))

    def movedim(self, source: int | Sequence[int], destination: int | Sequence[int]) -> Tensor:
        """Axes `source` moved to positions `destination`; the other axes keep their order.

        >>> Tensor.zeros(2, 3, 4).movedim(0, -1).shape, Tensor.zeros(2, 3, 4).movedim((0, 1), (2, 0)).shape
        ((3, 4, 2), (3, 4, 2))
        """
        src, dst = self._movement_dims(source, "movedim"), self._movement_dims(destination, "movedim")
        if len(src) != len(dst):
            raise ArgumentError(
                f"movedim: source {source} and destination {destination} name different numbers of dims"
            )
        if not self.ndim:
            return self
        order: list[int | None] = [None] * self.ndim
        for s, d in zip(src, dst):
            order[d] = s
        rest = iter(i for i in range(self.ndim) if i not in src)
        return self.permute(tuple(next(rest) if o is None else o for o in order))

    def moveaxis(self, source: int | Sequence[int], destination: int | Sequence[int]) -> Tensor:
        """`movedim` under numpy's name.

        >>> Tensor.zeros(2, 3, 4).moveaxis(-1, 0).shape
        (4, 2, 3)
        """
        return self.movedim(source, destination)

    def flip(
        self, axis: int | Sequence[int] | None = None, *args: int, dims: int | Sequence[int] | None = None
    ) -> Tensor:
        """The values in reverse order along `axis` (one axis, several as varargs or a sequence; PyTorch's
        `dims=` also works).

        >>> Tensor([1, 2, 3]).flip(0).tolist(), Tensor([[1, 2], [3, 4]]).flip(0, 1).tolist()
        ([3, 2, 1], [[4, 3], [2, 1]])
        """
        if axis is None:
            if dims is None:
                raise TypeError("flip: the axes to flip are missing (axis or dims)")
            axis = dims
        axes = self._axes((axis, *args) if args else axis, "flip")
        if not axes:
            return self
        return self._new(UOp(Ops.FLIP, self.dtype, (self.uop,), tuple(i in axes for i in range(self.ndim))))

    # *** broadcasting ***

    def expand(self, *shape: Any) -> Tensor:
        """The tensor broadcast to `shape` (size-1 axes repeat; -1 keeps an existing axis).

        >>> Tensor([[1], [2]]).expand(2, 3).tolist()
        [[1, 1, 1], [2, 2, 2]]
        """
        new = shape_arg(shape, "expand")
        if len(new) < self.ndim:
            raise ArgumentError(f"expand: cannot expand shape {self.shape} to fewer dimensions {new}")
        lead = len(new) - self.ndim
        target = []
        for i, n in enumerate(new):
            old = self.shape[i - lead] if i >= lead else None
            if n == -1:
                if old is None:
                    raise ArgumentError(f"expand: size -1 is not allowed for the new leading axis {i} in {new}")
                n = old
            elif n < 0:
                raise ArgumentError(f"expand: negative size {n} in {new} (tensor of shape {self.shape})")
            elif old is not None and old not in (1, n):
                raise ArgumentError(
                    f"expand: cannot expand shape {self.shape} to {new}: axis {i} has size {old}, neither 1 nor {n}"
                )
            target.append(n)
        return self._broadcast_to(tuple(target))

    def expand_as(self, other: Tensor) -> Tensor:
        """This tensor broadcast to `other`'s shape.

        >>> Tensor([1, 2]).expand_as(Tensor.zeros(2, 2)).tolist()
        [[1, 2], [1, 2]]
        """
        return self.expand(self._shape_of(other, "expand_as"))

    # *** slicing and padding ***

    def shrink(self, arg: Sequence[tuple[int, int] | None]) -> Tensor:
        """The slice [start, end) of each axis (None keeps an axis whole).

        >>> Tensor([1, 2, 3, 4]).shrink(((1, 3),)).tolist()
        [2, 3]
        """
        if len(arg) != self.ndim:
            raise ArgumentError(f"shrink: {tuple(arg)} has {len(arg)} entries for shape {self.shape}")
        if any(a is not None and any(isinstance(x, UOp) for x in a) for a in arg):
            return self._shrink_symbolic(arg)
        bounds = tuple((0, s) if a is None else _int_tuple(a, "shrink", "a bound") for a, s in zip(arg, self.shape))
        if any(len(b) != 2 for b in bounds):
            raise ArgumentError(f"shrink: each entry of {tuple(arg)} must be a (start, end) pair or None")
        for (b, e), s in zip(bounds, self.shape):
            if not 0 <= b <= e <= s:
                raise ArgumentError(f"shrink: bounds {tuple(arg)} are outside shape {self.shape}")
        if all(b == 0 and e == s for (b, e), s in zip(bounds, self.shape)):
            return self
        return self._new(UOp(Ops.SHRINK, self.dtype, (self.uop,), bounds))

    def _shrink_symbolic(self, arg: Sequence[Any]) -> Tensor:
        """A shrink whose starts are symbolic (expressions of a bound Variable) and whose sizes are constants: the
        SHRINK takes each axis's symbolic start as a source after the tensor (0 where the start is an int)."""

        sizes, starts = [], []
        for axis, (a, s) in enumerate(zip(arg, self.shape)):
            b, e = (0, s) if a is None else a
            for x in (b, e):
                if not isinstance(x, UOp):
                    int_arg(x, "shrink", "a bound")
            b_u = b if isinstance(b, UOp) else UOp.const(dtypes.index, int(b))
            e_u = e if isinstance(e, UOp) else UOp.const(dtypes.index, int(e))
            if b_u.dtype is not dtypes.index or e_u.dtype is not dtypes.index:
                raise TypeError(f"shrink: a symbolic bound is an expression of a Variable, got {b!r}, {e!r}")
            size = (e_u - b_u).simplify()
            if size.op is not Ops.CONST:
                raise NotImplementedError(
                    f"shrink: axis {axis} would have the symbolic size {symbolic_str(e)} - {symbolic_str(b)}: shapes "
                    "are constants, so a symbolic slice takes a constant length from a symbolic start (x[v:v + n])"
                )
            lo, hi = b_u.vmin, e_u.vmax
            if size.arg < 0 or lo < 0 or hi > s:
                raise IndexError(
                    f"shrink: the slice [{symbolic_str(b)}, {symbolic_str(e)}) of axis {axis} (size {s}) reaches "
                    f"[{lo}, {hi}) over its variables' ranges: every value in a Variable's range must give a slice "
                    "inside the axis"
                )
            sizes.append((0, int(size.arg)))
            starts.append(b_u.simplify())
        return self._new(UOp(Ops.SHRINK, self.dtype, (self.uop, *starts), tuple(sizes)))

    def _target_shape(self, shape: tuple, op: str) -> tuple[int, ...]:
        """A shape given as varargs or one sequence, one size per axis, None keeping that axis's size."""
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        if len(shape) != self.ndim:
            raise ArgumentError(f"{op}: {shape} has {len(shape)} sizes for the {self.ndim} axes of shape {self.shape}")
        return shape_arg(tuple(s if n is None else n for n, s in zip(shape, self.shape)), op)

    def shrink_to(self, *shape: Any) -> Tensor:
        """The first `shape[i]` elements of each axis (None keeps an axis), as tinygrad's `shrink_to`.

        >>> Tensor.ones(3, 4).shrink_to(2, None).shape
        (2, 4)
        """
        target = self._target_shape(shape, "shrink_to")
        if any(not 0 <= n <= s for n, s in zip(target, self.shape)):
            raise ArgumentError(f"shrink_to: cannot shrink shape {self.shape} to {target} (a size would grow)")
        return self.shrink(tuple((0, n) for n in target))

    def pad_to(self, *shape: Any) -> Tensor:
        """Each axis padded with zeros at its end to `shape[i]` elements (None keeps an axis), as tinygrad's
        `pad_to`.

        >>> Tensor([1, 2]).pad_to(4).tolist()
        [1, 2, 0, 0]
        """
        target = self._target_shape(shape, "pad_to")
        if any(n < s for n, s in zip(target, self.shape)):
            raise ArgumentError(f"pad_to: cannot pad shape {self.shape} to {target} (a size would shrink)")
        return self.pad(tuple((0, n - s) for n, s in zip(target, self.shape)))

    def narrow(self, dim: int, start: int, length: int) -> Tensor:
        """`length` elements of axis `dim` from `start` on (a negative start counts from the end).

        >>> Tensor([1, 2, 3, 4]).narrow(0, 1, 2).tolist()
        [2, 3]
        """
        d = self._movement_dim(dim, "narrow")
        if not self.ndim:
            raise ArgumentError("narrow: a 0-d tensor has no axis to narrow")
        n, start, length = self.shape[d], int_arg(start, "narrow", "start"), int_arg(length, "narrow", "length")
        if not -n <= start <= n:
            raise IndexError(f"narrow: start {start} is out of range for dim {dim} of shape {self.shape}")
        if start < 0:
            start += n
        if length < 0 or start + length > n:
            raise ArgumentError(f"narrow: start {start} + length {length} does not fit dim {dim} of shape {self.shape}")
        return self._shrink_dim(d, start, start + length)

    def _pad_pairs(self, padding: Sequence[Any]) -> list[tuple[int, int]]:
        """(before, after) per axis from PyTorch's flat form (last axis first) or the per-axis form."""
        if isinstance(padding, int) or not isinstance(padding, (list, tuple)):
            raise TypeError(f"pad: padding must be a sequence, got {padding!r}")
        if all(isinstance(p, int) and not isinstance(p, bool) for p in padding):
            if len(padding) % 2:
                raise ArgumentError(f"pad: flat padding {tuple(padding)} must have an even number of entries")
            if len(padding) // 2 > self.ndim:
                raise ArgumentError(f"pad: flat padding {tuple(padding)} pads more axes than shape {self.shape} has")
            pairs = [(0, 0)] * self.ndim
            for i in range(len(padding) // 2):
                pairs[self.ndim - 1 - i] = (padding[2 * i], padding[2 * i + 1])
            return pairs
        if len(padding) != self.ndim:
            raise ArgumentError(f"pad: padding {tuple(padding)} has {len(padding)} entries for shape {self.shape}")
        out = []
        for p in padding:
            if p is None:
                out.append((0, 0))
                continue
            if not isinstance(p, (list, tuple)) or len(p) != 2:
                raise TypeError(f"pad: padding must be pairs of ints or None, got {tuple(padding)}")
            out.append((int_arg(p[0], "pad", "a padding"), int_arg(p[1], "pad", "a padding")))
        return out

    def pad(self, padding: Sequence[Any], mode: str = "constant", value: Scalar = 0.0) -> Tensor:
        """Pad each axis: `padding` is ((before, after) or None) per axis, or PyTorch's flat form
        (last_before, last_after, second_last_before, ...). Negative sizes crop. `mode` is 'constant' (with
        `value`), 'reflect' (mirrored, without the edge), 'replicate' (the edge repeated) or 'circular'
        (wrapped around), as `torch.nn.functional.pad`.

        >>> Tensor([1, 2]).pad(((1, 2),)).tolist()
        [0, 1, 2, 0, 0]
        >>> x = Tensor([1, 2, 3])
        >>> x.pad((2, 1), mode="reflect").tolist(), x.pad((2, 1), mode="circular").tolist()
        ([3, 2, 1, 2, 3, 2], [2, 3, 1, 2, 3, 1])
        """
        # F.pad copies in PyTorch: writing to the result must not reach self (nothing to pad returns self, which
        # costs no copy kernel where a convolution pads by 0)
        out = self._padded(padding, mode, value)
        return out if out is self else out._not_a_view()

    def _padded(self, padding: Sequence[Any], mode: str, value: Scalar) -> Tensor:
        if mode not in PAD_MODES:
            raise NotImplementedError(f"pad: mode {mode!r} is not supported (one of {', '.join(PAD_MODES)})")
        pairs = self._pad_pairs(padding)
        value = 0.0 if value is None else value  # torch's F.pad takes value=None for zero
        if not isinstance(value, numbers.Real):
            raise TypeError(f"pad: value must be a number, got {value!r}")
        if mode != "constant":
            if value != 0:
                raise ArgumentError(f"pad: mode {mode!r} takes no value (got {value!r})")
            x = self
            for d, (b, a) in enumerate(pairs):
                x = x._pad_mode_dim(d, b, a, mode, pairs)
            return x
        for (b, a), s in zip(pairs, self.shape):
            if -min(b, 0) - min(a, 0) > s:
                raise ArgumentError(f"pad: padding {tuple(padding)} crops more than shape {self.shape} has")
        if any(b < 0 or a < 0 for b, a in pairs):
            shrunk = self.shrink(tuple((-min(b, 0), s + min(a, 0)) for (b, a), s in zip(pairs, self.shape)))
            return shrunk._padded(tuple((max(b, 0), max(a, 0)) for b, a in pairs), mode, value)
        if all(p == (0, 0) for p in pairs):
            return self
        out = self._new(UOp(Ops.PAD, self.dtype, (self.uop,), tuple(pairs)))
        if value == 0 and not (dtypes.is_float(self.dtype) and math.copysign(1.0, value) < 0):
            return out  # PAD fills with (positive) zeros
        inside = self.ones(self.shape, dtype=dtypes.bool, device=self.device).pad(tuple(pairs))
        return inside.where(out, self._const_of(value))

    def _pad_mode_dim(self, d: int, b: int, a: int, mode: str, pairs: list[tuple[int, int]]) -> Tensor:
        """One axis of a reflect, replicate or circular pad, as torch.nn.functional.pad does it: reflect and
        replicate extend from the whole axis, then crop; circular crops, then wraps what is left."""
        if b == 0 and a == 0:
            return self
        n = self.shape[d]
        if mode == "circular":
            lo, hi = max(-b, 0), n - max(-a, 0)
            m = hi - lo
            if m < 0 or b > m or a > m:
                raise ArgumentError(
                    f"pad: circular padding {pairs[d]} of dim {d} wraps around more than once (shape {self.shape})"
                )
            x = self._shrink_dim(d, lo, hi)
            if b <= 0 and a <= 0:
                return x
            # three copies side by side, and the window that starts b before the middle one
            return x._tile_dim(d, 3)._shrink_dim(d, m - max(b, 0), 2 * m + max(a, 0))
        if mode == "reflect" and (b >= n or a >= n):
            raise ArgumentError(
                f"pad: reflect padding {pairs[d]} of dim {d} must be less than its size {n} (shape {self.shape})"
            )
        if mode == "replicate" and n == 0 and (b > 0 or a > 0):
            raise ArgumentError(
                f"pad: replicate padding {pairs[d]} of dim {d} needs a non-empty axis (shape {self.shape})"
            )
        pieces: list[Tensor] = []
        if b > 0:
            if mode == "reflect":
                pieces.append(self._shrink_dim(d, 1, b + 1).flip(d))
            else:
                edge = self._shrink_dim(d, 0, 1)
                pieces.append(edge.expand(tuple(b if i == d else s for i, s in enumerate(edge.shape))))
        pieces.append(self)
        if a > 0:
            if mode == "reflect":
                pieces.append(self._shrink_dim(d, n - 1 - a, n - 1).flip(d))
            else:
                edge = self._shrink_dim(d, n - 1, n)
                pieces.append(edge.expand(tuple(a if i == d else s for i, s in enumerate(edge.shape))))
        x = pieces[0].cat(*pieces[1:], dim=d) if len(pieces) > 1 else self
        total = x.shape[d]
        lo, hi = max(-b, 0), total - max(-a, 0)
        if lo > hi:
            raise ArgumentError(f"pad: padding {pairs[d]} of dim {d} crops more than shape {self.shape} has")
        return x._shrink_dim(d, lo, hi)

    # *** joining and splitting ***

    @staticmethod
    def _tensor_args(first_arg: Any, args: tuple, op: str) -> list[Tensor]:
        """The tensors of `a.cat(b, c)`, `Tensor.cat(a, b)` and `Tensor.cat([a, b])`."""
        first = list(first_arg) if isinstance(first_arg, (list, tuple)) else [first_arg]
        tensors = first + [t for arg in args for t in (arg if isinstance(arg, (list, tuple)) else (arg,))]
        if not tensors:
            raise ArgumentError(f"{op}: expected a non-empty list of tensors")
        for i, t in enumerate(tensors):
            if not isinstance(t, MovementMixin):
                raise TypeError(f"{op}: argument {i} is a {type(t).__name__}, not a Tensor")
            if t.device != tensors[0].device:
                raise RuntimeError(f"{op}: tensors on different devices ({tensors[0].device} and {t.device})")
        return tensors

    def cat(self, *args: Tensor, dim: int = 0) -> Tensor:
        """This tensor and `args` joined along `dim`; all other sizes must match. Dtypes promote as in
        PyTorch. `a.cat(b, c)`, `Tensor.cat(a, b, c)` and `Tensor.cat([a, b, c])` all work; a 1-d tensor of
        size 0 is skipped, as torch.cat does.

        >>> Tensor([[1, 2]]).cat(Tensor([[3, 4]]), dim=1).tolist(), Tensor.cat(Tensor([1]), Tensor([2.5])).tolist()
        ([[1, 2, 3, 4]], [1.0, 2.5])
        """
        tensors = MovementMixin._tensor_args(self, args, "cat")
        dt = least_upper_dtype(*(t.dtype for t in tensors))
        for i, t in enumerate(tensors):
            if not t.ndim:
                raise ArgumentError(
                    f"cat: a 0-d tensor (argument {i}) cannot be concatenated; unsqueeze it or use stack"
                )
        joined = [t for t in tensors if t.shape != (0,)] or tensors[:1]
        ref = joined[0]
        d = ref._movement_dim(dim, "cat")
        for t in joined:
            if t.ndim != ref.ndim or any(a != b for i, (a, b) in enumerate(zip(t.shape, ref.shape)) if i != d):
                raise ArgumentError(
                    f"cat: sizes must match except in dim {dim}: got shapes " + ", ".join(str(t.shape) for t in tensors)
                )
        joined = [t.cast(dt) for t in joined]
        # the empty pieces contribute no values, but torch gives them an (empty) gradient: they stay in the graph
        empty = [t for t in tensors if t.numel() == 0 and dtypes.is_float(t.dtype)]
        if len(joined) == 1 and not empty:
            return joined[0]._not_a_view()  # a copy in PyTorch, even of one tensor
        total = sum(t.shape[d] for t in joined)
        out: Tensor | None = None
        offset = total
        # from the last piece to the first: each piece, padded to the full size, wins where it lies (a where
        # per piece, not a sum of padded pieces: a sum would turn -0.0 into 0.0 and does not exist for bool)
        for t in reversed(joined):
            size = t.shape[d]
            offset -= size
            if size == 0:
                continue
            padded = t._pad_dim(d, offset, total - offset - size)
            if out is None:
                out = padded
            else:
                inside = t.ones(t.shape, dtype=dtypes.bool, device=t.device)._pad_dim(d, offset, total - offset - size)
                out = inside.where(padded, out)
        out = out if out is not None else joined[0]._pad_dim(d, 0, total - joined[0].shape[d])
        for t in empty:  # as the branch a where never takes
            out = out.ones((), dtype=dtypes.bool, device=out.device).where(out, t.sum().cast(out.dtype))
        return out._not_a_view()

    def stack(self, *args: Tensor, dim: int = 0) -> Tensor:
        """This tensor and `args` (all of one shape) joined along a new axis `dim`. Dtypes promote as in PyTorch.

        >>> Tensor([1, 2]).stack(Tensor([3, 4])).tolist(), Tensor.stack(Tensor([1, 2]), Tensor([3, 4]), dim=1).tolist()
        ([[1, 2], [3, 4]], [[1, 3], [2, 4]])
        """
        tensors = MovementMixin._tensor_args(self, args, "stack")
        for i, t in enumerate(tensors):
            if t.shape != tensors[0].shape:
                raise ArgumentError(
                    f"stack: all tensors must have one shape, got {tensors[0].shape} (argument 0) and {t.shape} "
                    f"(argument {i})"
                )
        ref = tensors[0]
        d = int_arg(dim, "stack", "dim")
        if not -ref.ndim - 1 <= d <= ref.ndim:
            raise IndexError(f"stack: dim {d} is out of range [{-ref.ndim - 1}, {ref.ndim}] for shape {ref.shape}")
        d %= ref.ndim + 1
        expanded = [t.unsqueeze(d) for t in tensors]
        return expanded[0].cat(*expanded[1:], dim=d)

    def split(self, sizes: int | Sequence[int], dim: int = 0) -> tuple[Tensor, ...]:
        """Pieces along `dim`: of `sizes` each (the last one may be smaller) or of the listed sizes, which must
        add up to the axis.

        >>> [t.tolist() for t in Tensor.arange(5).split(2)], [t.tolist() for t in Tensor.arange(5).split([1, 4])]
        ([[0, 1], [2, 3], [4]], [[0], [1, 2, 3, 4]])
        """
        if not self.ndim:
            raise ArgumentError("split: a 0-d tensor cannot be split")
        d = self._movement_dim(dim, "split")
        n = self.shape[d]
        if isinstance(sizes, (list, tuple)):
            parts = [int_arg(s, "split", "a size") for s in sizes]
            if any(s < 0 for s in parts):
                raise ArgumentError(f"split: sizes {tuple(parts)} must not be negative")
            if sum(parts) != n:
                raise ArgumentError(
                    f"split: sizes {tuple(parts)} add up to {sum(parts)}, not to the size {n} of dim {dim} "
                    f"(shape {self.shape})"
                )
        else:
            size = int_arg(sizes, "split", "the split size")
            if size < 0 or (size == 0 and n):
                raise ArgumentError(f"split: split size {size} must be positive for dim {dim} of shape {self.shape}")
            parts = [min(size, n - i) for i in range(0, n, size)] if n else [0]
        out, start = [], 0
        for p in parts:
            out.append(self._shrink_dim(d, start, start + p))
            start += p
        return tuple(out)

    def chunk(self, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
        """At most `chunks` pieces along `dim`, each of ceil(size / chunks) (the last may be smaller; fewer
        pieces when they run out), as torch.chunk.

        >>> [t.tolist() for t in Tensor.arange(5).chunk(3)]
        [[0, 1], [2, 3], [4]]
        """
        chunks = int_arg(chunks, "chunk", "chunks")
        if chunks <= 0:
            raise ArgumentError(f"chunk: chunks must be greater than 0, got {chunks}")
        if not self.ndim:
            raise ArgumentError("chunk: a 0-d tensor cannot be chunked")
        d = self._movement_dim(dim, "chunk")
        n = self.shape[d]
        return self.split(-(-n // chunks) if n else [0] * chunks, dim=d)

    # *** repeating ***

    def repeat(self, *repeats: Any) -> Tensor:
        """The tensor tiled `repeats[i]` times along axis i, as torch.Tensor.repeat (more repeats than axes add
        leading axes). A reshape, an expand and a reshape: no copies.

        >>> Tensor([1, 2]).repeat(2).tolist(), Tensor([1, 2]).repeat(2, 1).tolist()
        ([1, 2, 1, 2], [[1, 2], [1, 2]])
        """
        reps = shape_arg(repeats, "repeat")
        if len(reps) < self.ndim:
            raise ArgumentError(
                f"repeat: {len(reps)} repeats {reps} for a tensor of shape {self.shape}; need {self.ndim}"
            )
        if any(r < 0 for r in reps):
            raise ArgumentError(f"repeat: repeats {reps} must not be negative")
        base = (1,) * (len(reps) - self.ndim) + self.shape
        # each axis s gets a size-1 axis in front of it, which expands to the repeat count
        x = self.reshape(tuple(v for s in base for v in (1, s)))
        x = x.expand(tuple(v for r, s in zip(reps, base) for v in (r, s)))
        return x.reshape(tuple(r * s for r, s in zip(reps, base)))._not_a_view()  # a copy in PyTorch

    def tile(self, *dims: Any) -> Tensor:
        """`repeat` as torch.tile: fewer repeats than axes repeat the last axes.

        >>> Tensor([[1, 2]]).tile(2).tolist()
        [[1, 2, 1, 2]]
        """
        reps = shape_arg(dims, "tile")
        return self.repeat((1,) * (self.ndim - len(reps)) + reps)

    def repeat_interleave(self, repeats: int, dim: int | None = None) -> Tensor:
        """Each element repeated `repeats` times in place along `dim` (the flattened tensor when None).

        >>> Tensor([1, 2]).repeat_interleave(2).tolist(), Tensor([[1, 2]]).repeat_interleave(2, dim=0).tolist()
        ([1, 1, 2, 2], [[1, 2], [1, 2]])
        """
        if isinstance(repeats, MovementMixin):
            raise TypeError("repeat_interleave: repeats must be an int (tensor repeats give a data-dependent shape)")
        r = int_arg(repeats, "repeat_interleave", "repeats")
        if r < 0:
            raise ArgumentError(f"repeat_interleave: repeats must not be negative, got {r}")
        x, d = (self.flatten(), 0) if dim is None else (self, self._movement_dim(dim, "repeat_interleave"))
        if not x.ndim:
            x = x.reshape(1)
        s = x.shape
        x = x.reshape(s[: d + 1] + (1,) + s[d + 1 :]).expand(s[: d + 1] + (r,) + s[d + 1 :])
        return x.reshape(s[:d] + (s[d] * r,) + s[d + 1 :])._not_a_view()  # a copy in PyTorch

    def roll(self, shifts: int | Sequence[int], dims: int | Sequence[int] | None = None) -> Tensor:
        """The values shifted by `shifts` along `dims`, wrapping around (the flattened tensor when dims is None).

        >>> Tensor([1, 2, 3, 4]).roll(1).tolist(), Tensor([[1, 2], [3, 4]]).roll((1, 1), (0, 1)).tolist()
        ([4, 1, 2, 3], [[4, 3], [2, 1]])
        """
        sh = _int_tuple(shifts, "roll", "a shift")
        if dims is None:
            if len(sh) != 1:
                raise ArgumentError(f"roll: shifts {sh} need as many dims, got none")
            return self.flatten().roll(sh[0], 0).reshape(self.shape)
        ds = _int_tuple(dims, "roll", "a dim")
        if len(sh) != len(ds):
            raise ArgumentError(f"roll: shifts {sh} and dims {ds} must have the same length")
        x = self
        for s, d in zip(sh, ds):
            d = x._movement_dim(d, "roll")
            if not x.ndim:
                raise IndexError(f"roll: dim {d} given, but the tensor has no dimensions")
            n = x.shape[d]
            if n == 0 or s % n == 0:
                continue
            # two copies side by side, and the window that starts s before the second one
            x = x._tile_dim(d, 2)._shrink_dim(d, n - s % n, 2 * n - s % n)
        return x._not_a_view() if x is not self else x  # a copy in PyTorch

    # *** windows and diagonals ***

    def unfold(self, dim: int, size: int, step: int) -> Tensor:
        """Windows of `size` elements every `step` along `dim`, as torch.Tensor.unfold: that axis
        becomes the window count and a new last axis of length `size` holds the windows.

        >>> Tensor.arange(5).unfold(0, 2, 1).tolist()
        [[0, 1], [1, 2], [2, 3], [3, 4]]
        """
        d = self._movement_dim(dim, "unfold")
        size, step = int_arg(size, "unfold", "size"), int_arg(step, "unfold", "step")
        n = self.shape[d] if self.ndim else 1
        if step <= 0:
            raise ArgumentError(f"unfold: step must be positive, got {step}")
        if not 0 <= size <= n:
            raise ArgumentError(f"unfold: size {size} does not fit dim {dim} of size {n} (shape {self.shape})")
        if not self.ndim:
            return self.reshape(1)._shrink_dim(0, 0, size)
        k = (n - size) // step + 1
        x = self.movedim(d, -1)
        lead = x.shape[:-1]
        if size <= step:
            # windows that do not overlap: rows of `step` elements, each cut to its first `size`
            if k * step <= n:
                x = x._shrink_dim(x.ndim - 1, 0, k * step)
            else:
                x = x._pad_dim(x.ndim - 1, 0, k * step - n)
            x = x.reshape(lead + (k, step))
        else:
            # overlapping windows: k copies of the axis end to end, read with a row length of n + step, so row i
            # starts i * step further into its copy than row i - 1 did
            x = x.reshape(lead + (1, n)).expand(lead + (k, n)).reshape(lead + (k * n,))
            x = x._pad_dim(len(lead), 0, k * step).reshape(lead + (k, n + step))
        x = x._shrink_dim(x.ndim - 1, 0, size)
        return x.movedim(-2, d)

    def diagonal(self, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
        """The diagonal of the matrices over axes `dim1` and `dim2` (above the main one for offset > 0),
        as a last axis, as torch.diagonal.

        >>> Tensor([[1, 2], [3, 4]]).diagonal().tolist(), Tensor([[1, 2], [3, 4]]).diagonal(1).tolist()
        ([1, 4], [2])
        """
        if self.ndim < 2:
            raise ArgumentError(f"diagonal: needs a tensor of 2 or more dimensions, got shape {self.shape}")
        a, b = self._movement_dim(dim1, "diagonal"), self._movement_dim(dim2, "diagonal")
        if a == b:
            raise ArgumentError(f"diagonal: dim1 {dim1} and dim2 {dim2} are the same axis (shape {self.shape})")
        off = int_arg(offset, "diagonal", "offset")
        x = self.permute(*(i for i in range(self.ndim) if i not in (a, b)), a, b)
        lead, (r, c) = x.shape[:-2], x.shape[-2:]
        m = max(0, min(r, c - off) if off >= 0 else min(r + off, c))
        r0, c0 = (0, off) if off >= 0 else (-off, 0)
        nd = x.ndim
        x = x.shrink(((None,) * (nd - 2)) + ((min(r0, r), min(r0 + m, r)), (min(c0, c), min(c0 + m, c))))
        # the diagonal of an m x m matrix: flattened and read with a row length of m + 1, it is the first column
        x = x.reshape(lead + (m * m,))._pad_dim(nd - 2, 0, m).reshape(lead + (m, m + 1))
        return x._shrink_dim(nd - 1, 0, 1).reshape(lead + (m,))

    def diag(self, diagonal: int = 0) -> Tensor:
        """A 1-d tensor as the `diagonal`-th diagonal of a square matrix of zeros, or the `diagonal`-th
        diagonal of a 2-d tensor, as torch.diag.

        >>> Tensor([1, 2]).diag().tolist(), Tensor([[1, 2], [3, 4]]).diag().tolist()
        ([[1, 0], [0, 2]], [1, 4])
        """
        k = int_arg(diagonal, "diag", "diagonal")
        if self.ndim == 2:
            return self.diagonal(k)
        if self.ndim != 1:
            raise ArgumentError(f"diag: needs a 1-d or 2-d tensor, got shape {self.shape}")
        n = self.shape[0]
        # n rows of (x_i, n zeros) read back with a row length of n: x_i lands at column i of row i
        x = self.reshape(n, 1)._pad_dim(1, 0, n).reshape(n * (n + 1))._shrink_dim(0, 0, n * n).reshape(n, n)
        return x.pad(((0, k), (k, 0)) if k >= 0 else ((-k, 0), (0, -k)))
