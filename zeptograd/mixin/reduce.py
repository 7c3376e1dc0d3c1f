"""Reductions over axes: sums, extrema, statistics, scans and sorting.

Everything here is built from the Tensor's primitives: REDUCE_AXIS (ADD, MUL, MAX), elementwise ops and
movement ops. Scans reduce over sliding windows made by pad/reshape/expand/shrink, in blocks so a long axis
costs O(n * block) work, not O(n**2); sorting is a bitonic network of compare-exchange stages.

>>> from zeptograd import Tensor
>>> Tensor([[1, 2], [3, 4]]).sum(axis=1).tolist()
[3, 7]
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from zeptograd.dtype import DType, dtypes
from zeptograd.gradient import custom_gradient
from zeptograd.mixin.args import axis_arg, compute_dtype, tensor_dtype
from zeptograd.uop.movement import movement_uop
from zeptograd.uop.ops import Ops, UOp
from zeptograd.uop.shape import prod

if TYPE_CHECKING:
    from zeptograd.tensor import Tensor

SPLIT_SUM = 1 << 14  # float sums over more elements than this add in two stages (see _float_sum)


def sum_of_products(a: UOp, b: UOp, full: tuple[int, ...], axes: tuple[int, ...]) -> UOp:
    """What `(a * b).sum(axes)` builds for operands of one float dtype whose sum takes one stage: both expanded to
    `full`, multiplied, summed over `axes`, and those axes dropped. conv2d and matmul build their graphs as UOps with
    it (a product built from tensor ops spent most of its Python in their checks and the tensors between them)."""
    prods = movement_uop(a, Ops.EXPAND, full).alu(Ops.MUL, movement_uop(b, Ops.EXPAND, full))
    summed = UOp(Ops.REDUCE_AXIS, prods.dtype, (prods,), (Ops.ADD, axes))
    return movement_uop(summed, Ops.RESHAPE, tuple(n for i, n in enumerate(full) if i not in axes))


def _axis_aligned_split(sizes: tuple[int, ...], n: int) -> int | None:
    """How many of the innermost reduce axes (of `sizes`, their product `n`) a two-stage sum takes whole in its first
    stage: the fewest whose product reaches sqrt(n) while both stages sum at most `SPLIT_SUM` elements; None when no
    such cut between the axes exists (one long axis: the flat index is cut into chunks instead)."""
    inner = 1
    for k in range(1, len(sizes)):
        inner *= sizes[-k]
        if inner * inner >= n:
            return k if inner <= SPLIT_SUM and n // inner <= SPLIT_SUM else None
    return None


SCAN_BLOCK = 64  # scans over longer axes run in blocks of this size, then combine the blocks' totals

Axis = int | Sequence[int] | None


class ValuesIndices(NamedTuple):
    """What PyTorch's cummax, cummin (and max/min with a dim) return: the values and their int32 indices."""

    values: Tensor
    indices: Tensor


def _pick_axis(axis: Any, dim: Any, op: str) -> Any:
    """tinygrad's `axis` or PyTorch's `dim`, not both."""
    if dim is None:
        return axis_arg(axis, op)
    if axis is not None:
        raise TypeError(f"{op}: got both axis={axis!r} and dim={dim!r}; pass one of them")
    return axis_arg(dim, op)


def _scan_axis(axis: Any, dim: Any, op: str) -> Any:
    """A scan's axis: `axis` (tinygrad) or `dim` (PyTorch), 0 when neither is given (tinygrad's default)."""
    picked = _pick_axis(axis, dim, op)
    return 0 if picked is None else picked


def _small_int_acc(dt: DType) -> DType | None:
    """The accumulator of sum/prod/cumsum over bool and integers narrower than 32 bits: int32 (uint32)."""
    if dtypes.is_bool(dt) or (dtypes.is_int(dt) and dt.itemsize < 4):
        return dtypes.uint32 if dtypes.is_unsigned(dt) else dtypes.int32
    return None


def _identity(op: Ops, dt: DType) -> Any:
    """The value that leaves a reduction unchanged: 0 for ADD, 1 for MUL, the dtype's least value for MAX."""
    if op is Ops.ADD:
        return False if dtypes.is_bool(dt) else 0
    if op is Ops.MUL:
        return True if dtypes.is_bool(dt) else 1
    return dtypes.min(dt)


class ReduceMixin:
    """Ops that combine the elements along axes."""

    __slots__ = ()

    # *** argument helpers ***

    def _one_axis(self, axis: Any, op: str) -> int | None:
        """A single axis, normalized (None for a 0-d tensor, which has no axis to move)."""
        if not isinstance(axis, int) or isinstance(axis, bool):
            raise TypeError(f"{op}: expected one int axis, got {axis!r}")
        axes = self._axes(axis, op)
        return axes[0] if axes else None

    def _nonempty(self, axis: Any, op: str) -> None:
        """max, min, argmax... have no identity: reducing over an empty axis is an error, as in PyTorch."""
        axes = self._axes(axis, op)
        if axis is None and self.numel() == 0:
            raise RuntimeError(
                f"{op}: cannot reduce the empty tensor of shape {self.shape} over all axes (the operation has no "
                f"identity); pass an axis"
            )
        for a in axes:
            if self.shape[a] == 0:
                raise IndexError(
                    f"{op}: cannot reduce over axis {a} of size 0 (shape {self.shape}); the operation has no identity"
                )

    def _kept_shape(self, axis: Any, keepdim: bool, op: str) -> tuple[int, ...]:
        axes = self._axes(axis, op)
        return tuple(1 if i in axes else s for i, s in enumerate(self.shape) if keepdim or i not in axes)

    def _count(self, axis: Any, op: str) -> int:
        return prod(self.shape[a] for a in self._axes(axis, op))

    def _pad_last(self, before: int, after: int, value: Any) -> Tensor:
        return self.pad(((0, 0),) * (self.ndim - 1) + ((before, after),), value=value)

    def _shrink_last(self, start: int, end: int) -> Tensor:
        return self.shrink(tuple((0, s) for s in self.shape[:-1]) + ((start, end),))

    # *** sums and products ***

    def sum(self, axis: Axis = None, keepdim: bool = False, dtype: Any = None, *, dim: Axis = None) -> Tensor:
        """The sum over `axis` (all axes when None; `dim` is PyTorch's name for it). Bool and small integers sum in
        int32, float16 adds in float32 and rounds back; `dtype` sums (and returns) in that dtype. An empty axis
        sums to 0.

        >>> Tensor([[1, 2], [3, 4]]).sum(axis=0).tolist(), Tensor([[1, 2], [3, 4]]).sum(dim=1).tolist()
        ([4, 6], [3, 7])
        """
        axis = _pick_axis(axis, dim, "sum")
        if dtype is not None:  # PyTorch's result dtype is exactly `dtype` (a small int wraps as it would there)
            dt = tensor_dtype(dtype, "sum")
            return self.cast(dt).sum(axis, keepdim).cast(dt)
        dt = self.dtype
        if (acc := _small_int_acc(dt)) is not None:
            return self._reduce(Ops.ADD, axis, keepdim, "sum", acc)
        if dtypes.is_float(dt) and dt.itemsize < 4:  # the 16- and 8-bit floats add in float32, rounding once
            return self._float_sum(axis, keepdim, dtypes.float32).cast(dt)
        if dtypes.is_float(dt):
            return self._float_sum(axis, keepdim, dt)
        return self._reduce(Ops.ADD, axis, keepdim, "sum", dt)

    def _pick_sum(self, axis: int | tuple[int, ...], keepdim: bool = False) -> Tensor:
        """The sum over `axis` of a one-hot value (`hit.where(x, 0)`) in one stage whatever its length: the codegen
        reads the picked element directly where the hit compares an index with a counter, or runs the sum as a
        scatter where it compares a loaded position with the output's (codegen/closedform.py); a float sum's two
        stages (for precision) would hide either. A pick has one nonzero element; a scatter's sum adds its hits in
        the axis' order, as torch's scatter_add does."""
        return self._reduce(Ops.ADD, axis, keepdim, "sum", _small_int_acc(self.dtype) or self.dtype)

    def _float_sum(self, axis: Any, keepdim: bool, acc: DType) -> Tensor:
        """A float sum over many elements adds in two stages, sums of about sqrt(n) elements each, then their
        sum: one long chain of float adds loses precision (2**25 ones would sum to 2**24). Over several axes the
        first stage takes whole inner axes where they allow it (`_axis_aligned_split`), else chunks of the
        flattened axes."""
        axes = self._axes(axis, "sum")
        n = prod(self.shape[a] for a in axes)
        if n <= SPLIT_SUM:
            return self._reduce(Ops.ADD, axis, keepdim, "sum", acc)
        kept = [i for i in range(self.ndim) if i not in axes]
        kept_shape = tuple(self.shape[i] for i in kept)
        ordered = sorted(axes)
        if (inner := _axis_aligned_split(tuple(self.shape[a] for a in ordered), n)) is not None:
            # the first stage sums the innermost reduce axes whole: no flat index cut across the axes, whose
            # division and remainder kept the kernel from any tile (bench/ops.py's conv2d layer, its weight gradient
            # over (8, 56, 56) in flat chunks ran over 30x slower than over the rows and columns, then the images)
            partial = self.cast(acc)._reduce(Ops.ADD, tuple(ordered[-inner:]), True, "sum", acc)
            total = partial._reduce(Ops.ADD, tuple(ordered[:-inner]), True, "sum", acc)
            return total if keepdim else total.reshape(kept_shape)
        x = self.cast(acc).permute(*kept, *axes).reshape(*kept_shape, n)
        chunk = 1 << (n.bit_length() // 2)
        padded = -(-n // chunk) * chunk
        if padded != n:
            x = x.pad(((0, 0),) * len(kept) + ((0, padded - n),))
        partial = x.reshape(*kept_shape, padded // chunk, chunk)._reduce(Ops.ADD, -1, False, "sum", acc)
        total = partial._reduce(Ops.ADD, -1, False, "sum", acc)
        return total.reshape(tuple(1 if i in axes else s for i, s in enumerate(self.shape))) if keepdim else total

    def prod(self, axis: Axis = None, keepdim: bool = False, dtype: Any = None, *, dim: Axis = None) -> Tensor:
        """The product over `axis` (all axes when None). int32 stays int32 (bool and small integers multiply in
        int32), float16 multiplies in float32 and rounds back. An empty axis gives 1.

        >>> Tensor([[1, 2], [3, 4]]).prod(axis=1).tolist(), Tensor([]).prod().item()
        ([2, 12], 1.0)
        """
        axis = _pick_axis(axis, dim, "prod")
        if dtype is not None:  # the result dtype is exactly `dtype`, as in PyTorch
            dt = tensor_dtype(dtype, "prod")
            return self.cast(dt).prod(axis, keepdim).cast(dt)
        dt = self.dtype
        if (acc := _small_int_acc(dt)) is not None:
            return self._reduce(Ops.MUL, axis, keepdim, "prod", acc)
        if dt is dtypes.float16:
            return self._reduce(Ops.MUL, axis, keepdim, "prod", dtypes.float32).cast(dt)
        return self._reduce(Ops.MUL, axis, keepdim, "prod", dt)

    # *** extrema ***

    def max(self, axis: Axis = None, keepdim: bool = False, *, dim: Axis = None) -> Tensor:
        """The maximum over `axis` (all axes when None; NaN wins). An empty axis has no maximum: IndexError
        (RuntimeError for an empty tensor reduced over all axes), as in PyTorch.

        >>> Tensor([[1, 5], [3, 4]]).max(axis=1).tolist(), Tensor([1.0, float("nan")]).max().item()
        ([5, 4], nan)
        """
        return self._max(_pick_axis(axis, dim, "max"), keepdim, "max")

    def _max(self, axis: Any, keepdim: bool, op: str) -> Tensor:
        self._nonempty(axis, op)
        return self._reduce(Ops.MAX, axis, keepdim, op, self.dtype)

    def min(self, axis: Axis = None, keepdim: bool = False, *, dim: Axis = None) -> Tensor:
        """The minimum over `axis` (all axes when None; NaN wins), as the maximum of the values in reversed
        order.

        >>> Tensor([[1, 5], [3, 4]], dtype="uint8").min(axis=1).tolist()
        [1, 3]
        """
        return self._order_reversed()._max(_pick_axis(axis, dim, "min"), keepdim, "min")._order_reversed()

    def _order_reversed(self) -> Tensor:
        """An order-reversing bijection of the dtype: -x for floats, `not` for bool, and for integers ~x
        (negation would wrap: -INT_MIN is INT_MIN, and -0 is the smallest unsigned value, not the largest)."""
        dt = self.dtype
        if dtypes.is_float(dt) or dtypes.is_bool(dt):
            return self.neg()
        ones = UOp.const(dt, dtypes.max(dt) if dtypes.is_unsigned(dt) else -1)
        return self._new(self.uop.alu(Ops.XOR, ones))

    def argmax(self, axis: int | None = None, keepdim: bool = False, *, dim: int | None = None) -> Tensor:
        """The int32 index of the maximum along `axis` (over the flattened tensor when None): the first one on
        ties; a NaN counts as the maximum.

        >>> Tensor([[1, 5, 5], [7, 4, 7]]).argmax(axis=1).tolist(), Tensor([[1, 5], [7, 4]]).argmax().item()
        ([1, 0], 2)
        """
        return self._argmax(_pick_axis(axis, dim, "argmax"), keepdim, "argmax")

    def argmin(self, axis: int | None = None, keepdim: bool = False, *, dim: int | None = None) -> Tensor:
        """The int32 index of the minimum along `axis` (over the flattened tensor when None): the first one on
        ties; a NaN counts as the minimum.

        >>> Tensor([[1, 5, 1], [7, 4, 4]]).argmin(axis=1).tolist()
        [0, 1]
        """
        return self._order_reversed()._argmax(_pick_axis(axis, dim, "argmin"), keepdim, "argmin")

    def _argmax(self, axis: int | None, keepdim: bool, op: str) -> Tensor:
        if axis is None:
            self._nonempty(None, op)
            out = self.reshape(-1)._argmax(0, False, op)
            return out.reshape((1,) * self.ndim) if keepdim else out
        ax = self._one_axis(axis, op)
        if ax is None:  # a 0-d tensor: its one element is at index 0
            return self.zeros((), dtype=dtypes.int32, device=self.device)
        self._nonempty(ax, op)
        n = self.shape[ax]
        hit = self == self._reduce(Ops.MAX, ax, True, op, self.dtype)
        if dtypes.is_float(self.dtype):
            hit = hit | (self != self)  # the maximum is NaN when there is one, and NaN == NaN is false
        # n - (the largest of n, n-1, ..., 1 where the maximum is) is the first index of the maximum
        countdown = self.arange(n, 0, -1, dtype=dtypes.int32, device=self.device)
        countdown = countdown.reshape(tuple(n if i == ax else 1 for i in range(self.ndim)))
        first = hit.where(countdown, 0)._reduce(Ops.MAX, ax, keepdim, op, dtypes.int32)
        return n - first

    # *** boolean reductions ***

    def any(self, axis: Axis = None, keepdim: bool = False, *, dim: Axis = None) -> Tensor:
        """Whether any element along `axis` is nonzero (a bool tensor; False over an empty axis).

        >>> Tensor([[0, 0], [0, 3]]).any(axis=1).tolist()
        [False, True]
        """
        x = self if dtypes.is_bool(self.dtype) else self != 0
        return x._reduce(Ops.MAX, _pick_axis(axis, dim, "any"), keepdim, "any", dtypes.bool)

    def all(self, axis: Axis = None, keepdim: bool = False, *, dim: Axis = None) -> Tensor:
        """Whether every element along `axis` is nonzero (a bool tensor; True over an empty axis).

        >>> Tensor([[1, 0], [2, 3]]).all(axis=1).tolist()
        [False, True]
        """
        zero = self.neg() if dtypes.is_bool(self.dtype) else self == 0
        return zero._reduce(Ops.MAX, _pick_axis(axis, dim, "all"), keepdim, "all", dtypes.bool).neg()

    # *** statistics ***

    def _float_acc(self) -> tuple[Tensor, DType]:
        """This tensor in the dtype statistics compute in (float32 for ints, bool and float16), and the dtype
        the result is returned in (float32 for ints and bool)."""
        out = self.dtype if dtypes.is_float(self.dtype) else dtypes.default_float
        return self.cast(compute_dtype(out)), out

    def mean(self, axis: Axis = None, keepdim: bool = False, *, dim: Axis = None) -> Tensor:
        """The mean over `axis` (all axes when None). Integers and bool give float32; float16 sums and divides
        in float32. An empty axis gives NaN.

        >>> Tensor([[1, 2], [3, 5]]).mean(axis=1).tolist()
        [1.5, 4.0]
        """
        axis = _pick_axis(axis, dim, "mean")
        n = self._count(axis, "mean")
        x, out = self._float_acc()
        return (x.sum(axis, keepdim) / n).cast(out)

    def _var(
        self, axis: Any, keepdim: bool, correction: Any, unbiased: bool | None, op: str
    ) -> tuple[Tensor, Tensor, DType]:
        """(variance, mean) in the accumulation dtype, and the dtype to return them in."""
        if unbiased is not None:
            correction = 1 if unbiased else 0
        if isinstance(correction, bool) or not isinstance(correction, numbers.Real):
            raise TypeError(f"{op}: correction must be a number, got {correction!r}")
        n = self._count(axis, op)
        x, out = self._float_acc()
        mean = x.sum(axis, keepdim=True) / n
        diff = x - mean
        var = (diff * diff).sum(axis, keepdim) / max(0, n - correction)  # PyTorch's divisor; 0 gives inf/NaN
        return var, mean if keepdim else mean.reshape(var.shape), out

    def var(
        self,
        axis: Axis = None,
        keepdim: bool = False,
        correction: int | float = 1,
        *,
        dim: Axis = None,
        unbiased: bool | None = None,
    ) -> Tensor:
        """The variance over `axis`: the sum of squared deviations from the mean divided by
        `n - correction` (Bessel's correction by default; `unbiased=False` is `correction=0`).

        >>> Tensor([[1.0, 2.0, 3.0], [2.0, 2.0, 2.0]]).var(axis=1).tolist()
        [1.0, 0.0]
        """
        var, _, out = self._var(_pick_axis(axis, dim, "var"), keepdim, correction, unbiased, "var")
        return var.cast(out)

    def std(
        self,
        axis: Axis = None,
        keepdim: bool = False,
        correction: int | float = 1,
        *,
        dim: Axis = None,
        unbiased: bool | None = None,
    ) -> Tensor:
        """The standard deviation over `axis`: the square root of `var`.

        >>> Tensor([1.0, 3.0]).std(correction=0).item()
        1.0
        """
        var, _, out = self._var(_pick_axis(axis, dim, "std"), keepdim, correction, unbiased, "std")
        return var._norm_sqrt().cast(out)

    def var_mean(
        self,
        axis: Axis = None,
        keepdim: bool = False,
        correction: int | float = 1,
        *,
        dim: Axis = None,
        unbiased: bool | None = None,
    ) -> tuple[Tensor, Tensor]:
        """(var, mean) over `axis`, as PyTorch's torch.var_mean.

        >>> [t.item() for t in Tensor([1.0, 3.0]).var_mean()]
        [2.0, 2.0]
        """
        var, mean, out = self._var(_pick_axis(axis, dim, "var_mean"), keepdim, correction, unbiased, "var_mean")
        return var.cast(out), mean.cast(out)

    def std_mean(
        self,
        axis: Axis = None,
        keepdim: bool = False,
        correction: int | float = 1,
        *,
        dim: Axis = None,
        unbiased: bool | None = None,
    ) -> tuple[Tensor, Tensor]:
        """(std, mean) over `axis`, as PyTorch's torch.std_mean.

        >>> [t.item() for t in Tensor([1.0, 3.0]).std_mean(correction=0)]
        [1.0, 2.0]
        """
        var, mean, out = self._var(_pick_axis(axis, dim, "std_mean"), keepdim, correction, unbiased, "std_mean")
        return var._norm_sqrt().cast(out), mean.cast(out)

    def logsumexp(self, axis: Axis = None, keepdim: bool = False, *, dim: Axis = None) -> Tensor:
        """log(sum(exp(x))) over `axis`, computed as max + log(sum(exp(x - max))) so large values do not
        overflow; a row of -inf gives -inf, an empty axis -inf.

        >>> round(Tensor([1000.0, 1000.0]).logsumexp().item(), 3)
        1000.693
        """
        axis = _pick_axis(axis, dim, "logsumexp")
        x, out = self._float_acc()
        shape = self._kept_shape(axis, keepdim, "logsumexp")
        if self._count(axis, "logsumexp") == 0 or self.numel() == 0:
            return self.full(shape, -math.inf, dtype=out, device=self.device)
        m = _finite_or_zero(x._reduce(Ops.MAX, axis, True, "logsumexp", x.dtype))
        lse = (x - m).exp().sum(axis, keepdim=True).log() + m
        return lse.reshape(shape).cast(out)

    # *** scans ***

    def _scan(self, axis: Any, op: Ops, name: str) -> Tensor:
        """The inclusive scan of `op` (ADD, MUL or MAX) along one axis, in this tensor's dtype."""
        ax = self._one_axis(axis, name)
        if ax is None or self.shape[ax] <= 1:
            return self
        x = self.movedim(ax, -1)
        out = x._scan_last(op, name)
        if op is Ops.ADD:
            out = out._custom_grad("cumsum", x)
        elif op is Ops.MAX and dtypes.is_float(x.dtype):
            out = out._custom_grad("cummax", x)
        return out.movedim(-1, ax)

    def _cummax_source(self, out: Tensor) -> Tensor:
        """For a running maximum `out` of self along the last axis, the position each output value comes from:
        the last one so far that equals it (PyTorch's cummax indices, so ties give their gradient as PyTorch
        does). A position holds the running maximum when its value equals the output there; the source of output
        j is the last such position up to j."""
        n = self.shape[-1]
        if n == 0:
            return self.cast(dtypes.int32)
        at = self.arange(n, dtype=dtypes.int32, device=self.device)._broadcast_to(self.shape)
        hit = self == out
        if dtypes.is_float(self.dtype):
            hit = hit | (self != self)  # after a NaN the running maximum is NaN: each later NaN is its source
        return hit.where(at, 0)._scan_last(Ops.MAX, "cummax")

    def _scan_last(self, op: Ops, name: str) -> Tensor:
        """The scan along the last axis. Up to SCAN_BLOCK elements it reduces a window per output (O(n**2)
        work); a longer axis scans blocks of SCAN_BLOCK, scans the blocks' totals (recursively) and combines
        each block with the total of the blocks before it: O(n * SCAN_BLOCK)."""
        n = self.shape[-1]
        if n <= SCAN_BLOCK:
            return self._window_reduce(op, name)
        lead, ident = self.shape[:-1], _identity(op, self.dtype)
        blocks = -(-n // SCAN_BLOCK)
        x = self._pad_last(0, blocks * SCAN_BLOCK - n, ident).reshape(*lead, blocks, SCAN_BLOCK)
        local = x._window_reduce(op, name)
        totals = local._shrink_last(SCAN_BLOCK - 1, SCAN_BLOCK).reshape(*lead, blocks)
        before = totals._scan_last(op, name)._pad_last(1, 0, ident)._shrink_last(0, blocks)
        before = before.reshape(*lead, blocks, 1)
        if op is Ops.ADD:
            out = local + before
        elif op is Ops.MUL:
            out = local * before
        else:
            out = local.maximum(before)
        return out.reshape(*lead, blocks * SCAN_BLOCK)._shrink_last(0, n)

    def _windows(self, value: Any) -> Tensor:
        """For the last axis of size n: w[..., j, i] = x[..., i + j - (n - 1)] (`value` where that is before
        the start), so w[..., :, i] is the window of the n elements that end at i. Made only of movement ops:
        pad n-1 in front (length L = 2n-1), tile n+1 times, and re-read the tiles with a row length of L+1, so
        each row starts one element later. arange's running count of ones is built on it: a sum of a constant
        through movement ops, which the codegen folds to a closed form (`_prefix_windows` is the scans' window,
        and needs an arange itself)."""
        lead, n = self.shape[:-1], self.shape[-1]
        length = 2 * n - 1
        x = self._pad_last(n - 1, 0, value).reshape(*lead, 1, length).expand(*lead, n + 1, length)
        x = x.reshape(*lead, (n + 1) * length)._shrink_last(0, n * (length + 1))
        return x.reshape(*lead, n, length + 1)._shrink_last(0, n)

    def _prefix_windows(self, value: Any) -> Tensor:
        """For the last axis of size n: w[..., s, i] = x[..., s] where s <= i, else `value`: w[..., :, i] holds the
        elements up to i, in their order (a running reduction's window). Each element is read once for each output,
        with no gate on the read, so the loop over s takes vectors (`_windows`' shifted rows gated the load of every
        lane, and the gated loads made the blocks' kernel about four times slower)."""
        lead, n = self.shape[:-1], self.shape[-1]
        s = self.arange(n, dtype=dtypes.int32, device=self.device).reshape(n, 1)
        upto = s < self.arange(1, n + 1, dtype=dtypes.int32, device=self.device).reshape(1, n)  # s <= i: one compare
        return upto.where(self.reshape(*lead, n, 1), value)

    def _window_reduce(self, op: Ops, name: str) -> Tensor:
        return self._prefix_windows(_identity(op, self.dtype))._reduce(op, -2, False, name, self.dtype)

    def cumsum(self, axis: int | None = None, dtype: DType | str | None = None, *, dim: int | None = None) -> Tensor:
        """The running sum along `axis`. int32 stays int32 (bool and small integers give int32); float16 adds
        in float32 and rounds back.

        >>> Tensor([[1, 2, 3], [4, 5, 6]]).cumsum(axis=1).tolist()
        [[1, 3, 6], [4, 9, 15]]
        """
        axis = _scan_axis(axis, dim, "cumsum")
        x = self.cast(tensor_dtype(dtype, "cumsum")) if dtype is not None else self
        if (acc := _small_int_acc(x.dtype)) is not None:
            return x.cast(acc)._scan(axis, Ops.ADD, "cumsum")
        if x.dtype is dtypes.float16:
            return x.cast(dtypes.float32)._scan(axis, Ops.ADD, "cumsum").cast(x.dtype)
        return x._scan(axis, Ops.ADD, "cumsum")

    def cumprod(self, axis: int | None = None, dtype: DType | str | None = None, *, dim: int | None = None) -> Tensor:
        """The running product along `axis` (dtypes as in `prod`).

        >>> Tensor([1, 2, 3, 4]).cumprod(0).tolist()
        [1, 2, 6, 24]
        """
        axis = _scan_axis(axis, dim, "cumprod")
        x = self.cast(tensor_dtype(dtype, "cumprod")) if dtype is not None else self
        if (acc := _small_int_acc(x.dtype)) is not None:
            return x.cast(acc)._scan(axis, Ops.MUL, "cumprod")
        if x.dtype is dtypes.float16:
            return x.cast(dtypes.float32)._scan(axis, Ops.MUL, "cumprod").cast(x.dtype)
        return x._scan(axis, Ops.MUL, "cumprod")

    def cummax(self, axis: int | None = None, *, dim: int | None = None) -> ValuesIndices:
        """The running maximum along `axis` and where each comes from, as PyTorch's `cummax`: (values, int32
        indices), a named tuple. On ties the index is the last position holding the maximum so far; a NaN
        propagates and its index is the last NaN so far (PyTorch's rule).

        >>> v, i = Tensor([1, 3, 2, 3, 4]).cummax(0)
        >>> v.tolist(), i.tolist()
        ([1, 3, 3, 3, 4], [0, 1, 1, 3, 4])
        """
        axis = _scan_axis(axis, dim, "cummax")
        values = self._scan(axis, Ops.MAX, "cummax")
        return ValuesIndices(values, self._scan_sources(values, axis, "cummax"))

    def cummin(self, axis: int | None = None, *, dim: int | None = None) -> ValuesIndices:
        """The running minimum along `axis` and where each comes from: (values, int32 indices), as PyTorch's
        `cummin` (ties give the last position; NaN propagates).

        >>> v, i = Tensor([3, 1, 2, 1]).cummin(0)
        >>> v.tolist(), i.tolist()
        ([3, 1, 1, 1], [0, 1, 1, 3])
        """
        axis = _scan_axis(axis, dim, "cummin")
        # the running maximum of the values in reversed order; the order bijection keeps ties and NaN in place
        reversed_ = self._order_reversed()
        running = reversed_._scan(axis, Ops.MAX, "cummin")
        return ValuesIndices(running._order_reversed(), reversed_._scan_sources(running, axis, "cummin"))

    def _scan_sources(self, running: Tensor, axis: int, op: str) -> Tensor:
        """The int32 position each value of the running maximum `running` (along `axis`) was read from."""
        ax = self._one_axis(axis, op)
        if ax is None:  # a 0-d tensor: its one element is at index 0
            return self.zeros((), dtype=dtypes.int32, device=self.device)
        x, out = self.detach().movedim(ax, -1), running.detach().movedim(ax, -1)
        return x._cummax_source(out).movedim(-1, ax)

    def logcumsumexp(self, axis: int | None = None, *, dim: int | None = None) -> Tensor:
        """log(cumsum(exp(x))) along `axis`, without overflow: each output subtracts the running maximum of its
        window before exp. Integers give float32; float16 computes in float32.

        >>> [round(v, 3) for v in Tensor([0.0, 0.0, 1000.0]).logcumsumexp(0).tolist()]
        [0.0, 0.693, 1000.0]
        """
        ax = self._one_axis(_scan_axis(axis, dim, "logcumsumexp"), "logcumsumexp")
        x, out = self._float_acc()
        if ax is None or self.shape[ax] == 0:
            return x.cast(out)
        return x.movedim(ax, -1)._logcumsumexp_last().movedim(-1, ax).cast(out)

    def _logcumsumexp_last(self) -> Tensor:
        n = self.shape[-1]
        if n <= SCAN_BLOCK:
            top = _finite_or_zero(self._window_reduce(Ops.MAX, "logcumsumexp"))
            lead = self.shape[:-1]
            w = self._prefix_windows(-math.inf) - top.reshape(*lead, 1, n)
            return w.exp()._reduce(Ops.ADD, -2, False, "logcumsumexp", self.dtype).log() + top
        lead = self.shape[:-1]
        blocks = -(-n // SCAN_BLOCK)
        x = self._pad_last(0, blocks * SCAN_BLOCK - n, -math.inf).reshape(*lead, blocks, SCAN_BLOCK)
        local = x._logcumsumexp_last()
        totals = local._shrink_last(SCAN_BLOCK - 1, SCAN_BLOCK).reshape(*lead, blocks)
        before = totals._logcumsumexp_last()._pad_last(1, 0, -math.inf)._shrink_last(0, blocks)
        out = _logaddexp(local, before.reshape(*lead, blocks, 1))
        return out.reshape(*lead, blocks * SCAN_BLOCK)._shrink_last(0, n)

    # *** sorting ***

    def sort(
        self, dim: int = -1, descending: bool = False, stable: bool = False, *, axis: int | None = None
    ) -> tuple[Tensor, Tensor]:
        """(values, int32 indices) sorted along `dim`. NaN sorts as the largest value (last in ascending order).
        The sort is always stable: equal values keep their order (so `stable=` is accepted and ignored).

        A bitonic sorting network over the axis padded to a power of two: each compare-exchange stage is
        elementwise over a reshaped, flipped view, and each ends the kernel (`contiguous`), so a stage never
        recomputes the ones before it. Ties and the padding are decided by the carried indices.

        >>> v, i = Tensor([3, 1, 2, 1]).sort()
        >>> v.tolist(), i.tolist()
        ([1, 1, 2, 3], [1, 3, 2, 0])
        """
        return self._sort(dim if axis is None else axis, descending, "sort")

    def _sort(self, dim: int, descending: bool, op: str) -> tuple[Tensor, Tensor]:
        ax = self._one_axis(dim, op)
        if ax is None:
            return self, self.zeros((), dtype=dtypes.int32, device=self.device)
        n = self.shape[ax]
        x = self.movedim(ax, -1)
        if n <= 1:
            return self, self.zeros(self.shape, dtype=dtypes.int32, device=self.device)
        size = 1 << (n - 1).bit_length()
        # values and indices travel as one tensor (..., size, 2) of a dtype that holds both exactly, so each
        # stage is one kernel. The network orders (value, index) lexicographically; the keys are arranged so
        # that this is the order we want: NaN becomes +inf with its index moved past (ascending) or before
        # (descending) every real index, and the padding is the last value with an index past all of those.
        carrier = _sort_carrier(self.dtype, size)
        lead = x.shape[:-1]
        values, indices = x.cast(carrier), self.arange(n, dtype=carrier, device=self.device)._broadcast_to(x.shape)
        if dtypes.is_float(carrier):
            nan = values != values
            values = nan.where(math.inf, values)
            indices = nan.where(indices + (-size if descending else size), indices)
            last: Any = -math.inf if descending else math.inf
        else:
            last = dtypes.min(carrier) if descending else dtypes.max(carrier)
        values = values._pad_last(0, size - n, last).reshape(*lead, size, 1)
        indices = indices._pad_last(0, size - n, 2 * size).reshape(*lead, size, 1)
        pairs = _first_of_two(self, 0).where(values, indices)
        block = 2
        while block <= size:
            # a block of 2*half sorted halves: compare i with block_end-1-i (a flip), then half-cleaners
            pairs = _compare_exchange(pairs, block // 2, True, descending)
            half = block // 4
            while half >= 1:
                pairs = _compare_exchange(pairs, half, False, descending)
                half //= 2
            block *= 2
        kept = tuple((0, s) for s in lead) + ((0, n),)
        values = pairs.shrink(kept + ((0, 1),)).reshape(x.shape)
        indices = pairs.shrink(kept + ((1, 2),)).reshape(x.shape)
        if dtypes.is_float(carrier):
            nan = (indices < 0) | (indices >= size)
            values = nan.where(math.nan, values)
            indices = nan.where(indices + (size if descending else -size), indices)
        indices = indices.cast(dtypes.int32)
        values = values.cast(self.dtype)._custom_grad("sort", x, indices)
        return values.movedim(-1, ax), indices.movedim(-1, ax)

    def argsort(self, dim: int = -1, descending: bool = False, stable: bool = False) -> Tensor:
        """The int32 indices that sort the tensor along `dim` (stable; NaN last in ascending order).

        >>> Tensor([3.0, 1.0, 2.0]).argsort().tolist()
        [1, 2, 0]
        """
        return self._sort(dim, descending, "argsort")[1]

    def topk(self, k: int, dim: int = -1, largest: bool = True, sorted: bool = True) -> tuple[Tensor, Tensor]:
        """The `k` largest (`largest=False`: smallest) values along `dim` and their int32 indices, in sorted
        order (always, whatever `sorted` says). Equal values come in index order; NaN counts as the largest.

        >>> v, i = Tensor([1, 5, 3, 4]).topk(2)
        >>> v.tolist(), i.tolist()
        ([5, 4], [1, 3])
        """
        ax = self._one_axis(dim, "topk")
        n = 1 if ax is None else self.shape[ax]
        if not isinstance(k, int) or isinstance(k, bool) or not 0 <= k <= n:
            raise RuntimeError(f"topk: k={k!r} is out of range for dimension {dim} of size {n} (shape {self.shape})")
        values, indices = self._sort(dim, largest, "topk")
        if ax is None:
            return values, indices
        bounds = tuple((0, k) if i == ax else (0, s) for i, s in enumerate(self.shape))
        return values.shrink(bounds), indices.shrink(bounds)


@custom_gradient("cumsum")
def _cumsum_grad_last(g: Tensor, out: Tensor, x: Tensor) -> tuple[Tensor]:
    """The gradient of a running sum along the last axis is the running sum of g from the end."""
    return (g.flip(-1).cumsum(-1).flip(-1),)


@custom_gradient("cummax")
def _cummax_grad_last(g: Tensor, out: Tensor, x: Tensor) -> tuple[Tensor]:
    """Each running maximum (along the last axis) gives its gradient to the one position it was read from: the
    last one that ties, as PyTorch's cummax. (Found here, not passed in, so that the forward graph never holds
    it.)"""
    return (_sort_grad_last(g, out, x, x._cummax_source(out))[0],)


@custom_gradient("sort")
def _sort_grad_last(g: Tensor, out: Tensor, x: Tensor, indices: Tensor) -> tuple[Tensor, None]:
    """Sorted values are x read at `indices` (along the last axis): each gradient goes back where its value
    came from."""
    n = x.shape[-1]
    came_from = indices.unsqueeze(-1) == x.arange(n, device=x.device)
    return came_from.where(g.unsqueeze(-1), 0.0).sum(-2), None


def _finite_or_zero(x: Tensor) -> Tensor:
    """x where it is finite, else 0: the shift that keeps exp(x - shift) from overflowing, and that must not
    be inf (inf - inf is NaN) or NaN."""
    return ((x - x) == 0).where(x, 0.0)


def _logaddexp(a: Tensor, b: Tensor) -> Tensor:
    """log(exp(a) + exp(b)) without overflow; -inf and -inf give -inf."""
    top = _finite_or_zero(a.maximum(b))
    return ((a - top).exp() + (b - top).exp()).log() + top


def _sort_carrier(dt: DType, size: int) -> DType:
    """A dtype that holds every value of `dt` and every index below `size` exactly, in the same order."""
    if dtypes.is_float(dt):  # float32 holds every float16 and the indices (up to 2 * size) below 2**24
        return dtypes.float64 if dt is dtypes.float64 or size > 1 << 22 else dtypes.float32
    if dtypes.is_bool(dt) or dt.itemsize < 4:
        return dtypes.int32
    return dt


def _first_of_two(like: Tensor, trailing: int) -> Tensor:
    """[True, False] on an axis of size 2 followed by `trailing` size-1 axes (for broadcasting): which element
    of a pair is the first."""
    first = like.ones(1, dtype=dtypes.bool, device=like.device).pad(((0, 1),))
    return first.reshape(2, *(1,) * trailing)


def _compare_exchange(pairs: Tensor, half: int, flip: bool, descending: bool) -> Tensor:
    """One stage of the sorting network over (value, index) pairs on the second-to-last axis: it is cut into
    pairs of runs of `half` elements; element t of the first run meets element t of the second (or, when
    `flip`, element half-1-t), and the two are put in order. Every element computes its own result, reading
    itself and its partner."""
    lead, size = pairs.shape[:-2], pairs.shape[-2]
    x = pairs.reshape(*lead, size // (2 * half), 2, half, 2)
    partner = x.flip((-3, -2) if flip else (-3,))
    first = _first_of_two(pairs, 2)
    a, b = first.where(x, partner), first.where(partner, x)  # the first and the second element of each pair
    full = tuple((0, s) for s in x.shape[:-1])
    av, ai = a.shrink(full + ((0, 1),)), a.shrink(full + ((1, 2),))
    bv, bi = b.shrink(full + ((0, 1),)), b.shrink(full + ((1, 2),))
    # keep the pair as it is when the first element sorts strictly before the second (equal pairs may swap)
    keep = ((bv < av) if descending else (av < bv)) | ((av == bv) & (ai < bi))
    return keep.where(x, partner).reshape(*lead, size, 2).contiguous()
