"""Neural-network Tensor ops: convolution, pooling, losses, normalization, attention and initializers.

Everything here is built from the other Tensor ops, so it fuses, runs on every device and has gradients.
Convolution and pooling read sliding windows made by movement ops alone (`_pool`): no window buffer is
materialized, and a plain convolution's forward pass is one kernel (a broadcast multiply and a sum).

>>> x = Tensor.arange(16, dtype="float32").reshape(1, 1, 4, 4)
>>> x.max_pool2d().tolist()
[[[[5.0, 7.0], [13.0, 15.0]]]]
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from zeptograd.dtype import DType, dtypes
from zeptograd.gradient import custom_gradient
from zeptograd.helpers import WINO, ArgumentError
from zeptograd.mixin.args import compute_dtype, int_arg, shape_arg, tensor_dtype
from zeptograd.mixin.reduce import SPLIT_SUM, sum_of_products
from zeptograd.uop.movement import movement_uop, padded_spatially, stored_as
from zeptograd.uop.ops import Ops, UOp
from zeptograd.uop.shape import prod

if TYPE_CHECKING:
    from zeptograd.tensor import Tensor

REDUCTIONS = ("mean", "sum", "none")


# *** argument helpers ***


def _per_dim(value: Any, n: int, op: str, what: str) -> tuple[int, ...]:
    """An int for every one of `n` spatial dims, or one int per dim."""
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise ArgumentError(f"{op}: {what} {tuple(value)} needs {n} entries, one per spatial dim")
        return tuple(int_arg(v, op, what) for v in value)
    return (int_arg(value, op, what),) * n


def _pad_pairs(padding: Any, n: int, op: str) -> list[tuple[int, int]]:
    """(before, after) per spatial dim from tinygrad's padding forms: an int for every side, one int per dim
    (both sides), or PyTorch's flat form of 2*n ints (last dim first: left, right, top, bottom, ...)."""
    if isinstance(padding, (list, tuple)):
        pads = [int_arg(p, op, "padding") for p in padding]
        if len(pads) == n:
            pairs = [(p, p) for p in pads]
        elif len(pads) == 2 * n:
            pairs = [(pads[2 * (n - 1 - i)], pads[2 * (n - 1 - i) + 1]) for i in range(n)]
        else:
            raise ArgumentError(
                f"{op}: padding {tuple(padding)} needs {n} entries (one per spatial dim) or {2 * n} "
                "(PyTorch's flat form)"
            )
    else:
        p = int_arg(padding, op, "padding")
        pairs = [(p, p)] * n
    if any(b < 0 or a < 0 for b, a in pairs):
        raise ArgumentError(f"{op}: padding must be non-negative, got {padding!r}")
    return pairs


def _positive(value: Any, n: int, op: str, what: str) -> tuple[int, ...]:
    """`_per_dim`, each entry positive."""
    values = _per_dim(value, n, op, what)
    if any(v <= 0 for v in values):
        raise ArgumentError(f"{op}: {what} must be positive, got {value!r}")
    return values


def _reduction(reduction: Any, op: str) -> str:
    if reduction not in REDUCTIONS:
        raise ArgumentError(f"{op}: reduction must be one of {', '.join(map(repr, REDUCTIONS))}, got {reduction!r}")
    return reduction


def _reduce_loss(loss: Tensor, reduction: str) -> Tensor:
    return loss.mean() if reduction == "mean" else loss.sum() if reduction == "sum" else loss


def _smoothing(label_smoothing: Any, op: str) -> float:
    if not isinstance(label_smoothing, numbers.Real) or isinstance(label_smoothing, bool):
        raise TypeError(f"{op}: label_smoothing must be a number, got {label_smoothing!r}")
    if not 0.0 <= label_smoothing <= 1.0:
        raise ArgumentError(f"{op}: label_smoothing must be in [0, 1], got {label_smoothing}")
    return float(label_smoothing)


def _need_tensor(t: Any, cls: type, op: str, what: str, optional: bool = False) -> None:
    if t is None and optional:
        return
    if not isinstance(t, cls):
        extra = " or None" if optional else ""
        raise TypeError(f"{op}: {what} must be a Tensor{extra}, got {type(t).__name__}")


def _need_float(t: Tensor, op: str, what: str) -> None:
    if not dtypes.is_float(t.dtype):
        raise TypeError(f"{op}: {what} must have a floating-point dtype, got {t.dtype!r}")


def _need_int(t: Tensor, op: str, what: str) -> None:
    if dtypes.is_bool(t.dtype) or not dtypes.is_int(t.dtype):
        raise TypeError(f"{op}: {what} must hold integer class indices, got dtype {t.dtype!r}")


def _fan_in(shape: tuple[int, ...], op: str) -> int:
    if not shape or any(s <= 0 for s in shape):
        raise ArgumentError(f"{op}: needs a non-empty shape of positive sizes, got {shape}")
    return prod(shape[1:])


def _padded_input(x: Tensor, pads: Sequence[tuple[int, int]]) -> UOp:
    """A convolution's input `x` padded by `pads` on its spatial axes: the PAD node `x.pad` builds, without its
    tensors and checks where no pad is negative (a padding that crops takes `x.pad`'s shrink)."""
    if any(b < 0 or a < 0 for b, a in pads):
        return x.pad(((0, 0), (0, 0), *pads)).uop
    return padded_spatially(x.uop, pads)


def _transposed_kernel(w: Tensor, groups: int) -> Tensor:
    """The kernel (A, B / groups, *k) of a convolution as the one of its transpose, (B, A / groups, *k): flipped,
    its two channel axes swapped within each group."""
    a, b, kernel = w.shape[0], w.shape[1], w.shape[2:]
    w = w.reshape(groups, a // groups, b, *kernel).transpose(1, 2).flip(*range(3, 3 + len(kernel)))
    return w.reshape(groups * b, a // groups, *kernel)


def _spread(x: Tensor, stride: tuple[int, ...]) -> Tensor:
    """`x`'s spatial elements `stride` apart, zeros between them (the input of a transposed convolution)."""
    if all(s == 1 for s in stride):
        return x
    lead, spatial, n = x.shape[:2], x.shape[2:], len(stride)
    x = x.reshape(*lead, *(v for i in spatial for v in (i, 1)))
    x = x.pad(((0, 0), (0, 0), *((0, 0) if j % 2 == 0 else (0, stride[j // 2] - 1) for j in range(2 * n))))
    x = x.reshape(*lead, *(i * s for i, s in zip(spatial, stride)))
    return x.shrink(((0, lead[0]), (0, lead[1]), *((0, (i - 1) * s + 1) for i, s in zip(spatial, stride))))


def _input_gradient(
    g: Tensor,
    w: Tensor,
    spatial: tuple[int, ...],
    groups: int,
    stride: tuple[int, ...],
    dilation: tuple[int, ...],
    pads: tuple[tuple[int, int], ...],
) -> Tensor:
    """The gradient, with respect to an input of spatial shape `spatial`, of a convolution with kernel `w` (padding
    `pads` >= 0) whose output has gradient `g`: the transposed convolution of g. g spread out by the stride,
    convolved with the kernel flipped and its channels swapped within each group, the padding taken back off (and
    the rows the stride skipped at the end put back); traced through the windows, it was a product per tap (9x the
    input for 3x3) and a sum of the shifted taps, several times slower, most of all for a depthwise convolution."""
    n, kernel = len(stride), w.shape[2:]
    rest = [(i + b + a - d * (k - 1) - 1) % s for i, (b, a), d, k, s in zip(spatial, pads, dilation, kernel, stride)]
    conv_pads = [(d * (k - 1) - b, d * (k - 1) - a + r) for (b, a), d, k, r in zip(pads, dilation, kernel, rest)]
    flipped = _transposed_kernel(w, groups)
    # stored: the ops above the convolution (a reflect pad's backward) read it by regions, and would each recompute it
    return _spread(g, stride)._conv(flipped, None, groups, (1,) * n, dilation, conv_pads, None, "conv2d").contiguous()


def _weight_gradient(
    x: Tensor,
    g: Tensor,
    kernel: tuple[int, ...],
    groups: int,
    stride: tuple[int, ...],
    dilation: tuple[int, ...],
    pads: tuple[tuple[int, int], ...],
) -> Tensor:
    """The gradient, with respect to its kernel of spatial shape `kernel`, of a convolution of `x` (padding
    `pads` >= 0) whose output has gradient `g`: each tap's window of the padded input times g, summed over the
    images and positions, within each group. Marked as the convolution's weight gradient (`CUSTOM_GRAD`
    "conv_weight"): the scheduler's layout pass gives it the input's layout that pays (schedule/layout.py)."""
    n = len(stride)
    cout, cin_g = g.shape[1], x.shape[1] // groups
    windows = _windows(_padded_input(x, pads), kernel, stride, dilation)
    xw = type(x)._from_uop(windows, x.device)  # (N, Cin, *out, *kernel), as the forward read them
    bs, out = xw.shape[0], xw.shape[2 : 2 + n]
    products = xw.reshape(bs, groups, 1, cin_g, *out, *kernel) * g.reshape(
        bs, groups, cout // groups, 1, *out, *(1,) * n
    )
    dw = products.sum((0, *range(4, 4 + n))).reshape(cout, cin_g, *kernel)
    return dw._custom_grad("conv_weight", x, g, params=(groups, stride, dilation, pads))


@custom_gradient("conv")
def _conv_grad(
    g: Tensor,
    y: Tensor,
    x: Tensor,
    w: Tensor,
    groups: int,
    stride: tuple[int, ...],
    dilation: tuple[int, ...],
    pads: tuple[tuple[int, int], ...],
) -> tuple[Tensor, Tensor]:
    """The gradients of a convolution (padding `pads` >= 0) with respect to its input and its kernel."""
    # g in a buffer of its own: both gradients read each of its elements once for every tap and channel, and their
    # kernels tile reads of memory; a lazy g (a loss's broadcast ones, the mask of a ReLU above) was recomputed at
    # every read and left the kernels untiled, an order of magnitude slower
    g = g.contiguous()
    dx = _input_gradient(g, w, x.shape[2:], groups, stride, dilation, pads)
    return dx, _weight_gradient(x, g, w.shape[2:], groups, stride, dilation, pads)


@custom_gradient("conv_weight")
def _conv_weight_grad(
    h: Tensor,
    dw: Tensor,
    x: Tensor,
    g: Tensor,
    groups: int,
    stride: tuple[int, ...],
    dilation: tuple[int, ...],
    pads: tuple[tuple[int, int], ...],
) -> tuple[Tensor, Tensor]:
    """The gradients of a convolution's weight gradient dw(x, g) (a second derivative). Since <h, dw(x, g)> is
    <g, conv(x, h)>, they are those of the convolution of x with kernel h: for x its input gradient at g, and for g
    the convolution itself."""
    dx = _input_gradient(g, h, x.shape[2:], groups, stride, dilation, pads)
    return dx, x._conv(h, None, groups, stride, dilation, list(pads), None, "conv2d")


@custom_gradient("conv_transpose")
def _conv_transpose_grad(
    g: Tensor,
    y: Tensor,
    x: Tensor,
    w: Tensor,
    groups: int,
    stride: tuple[int, ...],
    dilation: tuple[int, ...],
    pads: tuple[tuple[int, int], ...],
) -> tuple[Tensor, Tensor]:
    """The gradients of a transposed convolution y = conv_transpose(x, w) (padding `pads`). It is the adjoint of
    conv2d(., w) with the same stride, dilation and padding: <g, conv_transpose(x, w)> = <conv2d(g, w), x>. So the
    input's gradient is conv2d(g, w), its rows past x's (output_padding beyond the stride) cut off, and the kernel's
    is conv2d's weight gradient with g as the input and x as the output's gradient (zeros past x's rows). Through
    the spread input instead, both computed every position of the stride's grid and kept one in stride**n."""
    g = g.contiguous()
    dx = g._conv(w, None, groups, stride, dilation, list(pads), None, "conv_transpose2d")
    out = dx.shape[2:]
    dx = dx.shrink(((0, dx.shape[0]), (0, dx.shape[1]), *((0, i) for i in x.shape[2:])))
    xo = x.pad(((0, 0), (0, 0), *((0, o - i) for o, i in zip(out, x.shape[2:])))) if out != x.shape[2:] else x
    return dx, _weight_gradient(g, xo, w.shape[2:], groups, stride, dilation, pads)


# Winograd F(4x4, 3x3) (Lavin and Gray, "Fast Algorithms for Convolutional Neural Networks", 2015), points 0, +-1,
# +-2 and infinity: a 6x6 tile d of the input gives the 4x4 outputs AT ((G g GT) * (BT d B)) A of the 3x3 filter g
WINO_TILE = 4
_WINO_BT = (
    (4, 0, -5, 0, 1, 0),
    (0, -4, -4, 1, 1, 0),
    (0, 4, -4, -1, 1, 0),
    (0, -2, -1, 2, 1, 0),
    (0, 2, -1, -2, 1, 0),
    (0, 4, 0, -5, 0, 1),
)
_WINO_G = (
    (1 / 4, 0, 0),
    (-1 / 6, -1 / 6, -1 / 6),
    (-1 / 6, 1 / 6, -1 / 6),
    (1 / 24, 1 / 12, 1 / 6),
    (1 / 24, -1 / 12, 1 / 6),
    (0, 0, 1),
)
_WINO_AT = ((1, 1, 1, 1, 1, 0), (0, 1, -1, 2, -2, 0), (0, 1, 1, 4, 4, 0), (0, 1, -1, 8, -8, 1))
_wino_matrices: dict[tuple[str, type], tuple[Tensor, Tensor, Tensor, Tensor]] = {}


def _kron(m: tuple[tuple[float, ...], ...]) -> list[list[float]]:
    """The Kronecker product of a matrix with itself: a transform applied along both axes of a tile at once."""
    return [[a * b for a in ra for b in rb] for ra in m for rb in m]


def _wino_eligible(x: Tensor, w: Tensor, groups: int, stride: tuple, dilation: tuple, dtype: Any, op: str) -> bool:
    """Does WINO=1 compute this convolution as Winograd F(4x4, 3x3): 2-D, a 3x3 kernel, stride and dilation 1,
    no groups, float32 throughout?"""
    f32 = dtypes.float32
    return (
        bool(WINO.value)
        and w.shape[2:] == (3, 3)
        and stride == (1, 1)
        and dilation == (1, 1)
        and groups == 1
        and x.dtype is f32
        and w.dtype is f32
        and (dtype is None or tensor_dtype(dtype, op) is f32)
    )


def _winograd(x: Tensor, w: Tensor, pads: list[tuple[int, int]]) -> Tensor:
    """conv2d of x (N, C, H, W) with a 3x3 w (K, C, 3, 3) as Winograd F(4x4, 3x3): the padded input cut into
    overlapping 6x6 tiles 4 apart, each transformed (BT d B, two sums over 6), one matmul over the input channels
    for each of the 36 transformed positions (a quarter of the direct sum's multiplies), and each tile's 4x4
    outputs taken back (AT m A). Channels-last in between, so every kernel reads and writes vectors of channels; the
    last one writes NCHW."""
    m, a = WINO_TILE, WINO_TILE + 2
    key = (x.device, type(x))
    if key not in _wino_matrices:
        # BT, the filter transform G g GT as one 36 x 9 matrix (kron), the output transform AT m A as 16 x 36; kept
        # realized, in the shapes they broadcast in below
        bt, gk, atk = (
            type(x)(rows, dtype=dtypes.float32, device=x.device).realize()
            for rows in (list(_WINO_BT), _kron(_WINO_G), _kron(_WINO_AT))
        )
        _wino_matrices[key] = (
            bt.reshape(a, a, 1, 1, 1, 1, 1),  # BT[p', p] against (p, q, ...)
            bt.reshape(1, a, a, 1, 1, 1, 1),  # BT[q', q] against (p', 1, q, ...)
            gk.reshape(a * a, 9, 1, 1),
            atk.reshape(m, m, a, a, 1, 1, 1, 1),
        )
    bt_rows, bt_cols, gk, atk = _wino_matrices[key]
    n, c = x.shape[:2]
    k = w.shape[0]
    xp = x.pad(((0, 0), (0, 0), *pads))
    ho, wo = xp.shape[2] - 2, xp.shape[3] - 2
    th, tw = -(-ho // m), -(-wo // m)
    if (th * m, tw * m) != (ho, wo):  # whole tiles: the last ones read zeros past the edge, their extra outputs cut
        xp = xp.pad(((0, 0), (0, 0), (0, th * m - ho), (0, tw * m - wo)))
    tiles = _channels_last(xp)._pool((a, a), (m, m), (1, 1))  # (N, C, th, tw, 6, 6)
    d = tiles.permute(4, 5, 0, 2, 3, 1)  # (p, q, N, th, tw, C)
    rows = (bt_rows * d).sum(1, keepdim=True)  # BT d: (p', 1, q, N, th, tw, C)
    v = (bt_cols * rows).sum(2)  # BT d B: (p', q', N, th, tw, C)
    g = w.permute(2, 3, 1, 0).reshape(1, 9, c, k)  # (1, 3*3, C, K)
    u = (gk * g).sum(1).reshape(a, a, 1, 1, 1, c, k)  # G g GT: (p', q', C, K)
    prods = (v.reshape(a, a, n, th, tw, c, 1) * u).sum(5)  # each position's matmul: (p', q', N, th, tw, K)
    y = (atk * prods.reshape(1, 1, a, a, n, th, tw, k)).sum((2, 3))  # (i, j, N, th, tw, K)
    # the output transform writes NCHW itself, (N, K, th, i, tw, j), and the result is a view of that buffer: a
    # channels-last output and a copy into NCHW cost a kernel and a pass over the output more
    y = y.permute(2, 5, 3, 0, 4, 1).contiguous().reshape(n, k, th * m, tw * m)
    return y[:, :, :ho, :wo]


def _channels_last(t: Tensor) -> Tensor:
    """`t` (N, C, *spatial) read from a channels-last copy: the same values, stored as (N, *spatial, C)."""
    n = t.ndim - 2
    return type(t)._from_uop(stored_as(t.uop, (0, *range(2, 2 + n), 1)), t.device)


def _fit_axis(u: UOp, axis: int, size: int) -> UOp:
    """Axis `axis` of `u` cut or zero-padded at its end to `size` elements."""
    n = u.shape[axis]
    if size <= n:
        return movement_uop(u, Ops.SHRINK, tuple((0, size) if i == axis else (0, m) for i, m in enumerate(u.shape)))
    return movement_uop(u, Ops.PAD, tuple((0, size - n) if i == axis else (0, 0) for i in range(len(u.shape))))


def _window_axis(u: UOp, axis: int, k: int, s: int) -> UOp:
    """Axis `axis` of `u` (of size n) replaced by two, (out, k): windows of k taps that do not overlap (k <= s, no
    dilation), rows of s elements, each window the first k of its row."""
    shape = u.shape
    o = (shape[axis] - k) // s + 1
    before, after = shape[:axis], shape[axis + 1 :]
    u = movement_uop(_fit_axis(u, axis, o * s), Ops.RESHAPE, (*before, o, s, *after))
    return _fit_axis(u, axis + 1, k)


def _windows(u: UOp, kernel: tuple[int, ...], stride: tuple[int, ...], dilation: tuple[int, ...]) -> UOp:
    """The sliding windows of `u` over its last len(kernel) axes (see `NNMixin._pool`): (*lead, *out, *kernel)."""
    if any(d > 1 or k > s for k, s, d in zip(kernel, stride, dilation)):
        return _overlapping_windows(u, kernel, stride, dilation)
    n = len(kernel)
    nl = len(u.shape) - n
    for axis, (k, s) in enumerate(zip(kernel, stride)):
        u = _window_axis(u, nl + 2 * axis, k, s)
    # the axes are now (*lead, o1, k1, o2, k2, ...): windows first, taps last
    order = (*range(nl), *(nl + 2 * i for i in range(n)), *(nl + 2 * i + 1 for i in range(n)))
    return movement_uop(u, Ops.PERMUTE, order)


def _overlapping_windows(u: UOp, kernel: tuple[int, ...], stride: tuple[int, ...], dilation: tuple[int, ...]) -> UOp:
    """`_windows` where some axis's windows overlap (or are dilated), built on all the axes at once, each movement op
    acting on every axis (7 UOps for a 3x3 convolution's two axes, not 15: the Python of building, scheduling and
    freeing the graph is per node). It holds for windows that do not overlap too; where none do (a 2x2 stride-2
    pool), `_window_axis`'s rows need no copies."""
    shape = u.shape
    nl = len(shape) - len(kernel)
    lead, sizes = shape[:nl], shape[nl:]
    outs = [(i - d * (k - 1) - 1) // s + 1 for i, k, s, d in zip(sizes, kernel, stride, dilation)]
    # k copies of each axis end to end, padded by k * d and read as k rows of n + d elements: row j starts j * d
    # into its own copy, and its columns 0, s, 2s... are tap j of each window (every window that exists has
    # (o - 1) * s + j * d < n: it never reads past its copy)
    u = movement_uop(u, Ops.RESHAPE, (*lead, *(v for i in sizes for v in (1, i))))
    u = movement_uop(u, Ops.EXPAND, (*lead, *(v for i, k in zip(sizes, kernel) for v in (k, i))))
    u = movement_uop(u, Ops.RESHAPE, (*lead, *(k * i for i, k in zip(sizes, kernel))))
    u = movement_uop(u, Ops.PAD, (*((0, 0),) * nl, *((0, k * d) for k, d in zip(kernel, dilation))))
    rows = [(k, i + d) for i, k, d in zip(sizes, kernel, dilation)]
    u = movement_uop(u, Ops.RESHAPE, (*lead, *(v for row in rows for v in row)))
    # each row cut (or zero-padded) to o * s columns
    spans = [o * s for o, s in zip(outs, stride)]
    if any(span > width for span, (_, width) in zip(spans, rows)):
        pads = ((0, max(span - width, 0)) for span, (_, width) in zip(spans, rows))
        u = movement_uop(u, Ops.PAD, (*((0, 0),) * nl, *(p for pad in pads for p in ((0, 0), pad))))
    u = movement_uop(
        u, Ops.SHRINK, (*((0, i) for i in lead), *(b for (k, _), span in zip(rows, spans) for b in ((0, k), (0, span))))
    )
    if any(s > 1 for s in stride):
        # every s-th column: rows of s, the first of each
        u = movement_uop(u, Ops.RESHAPE, (*lead, *(v for k, o, s in zip(kernel, outs, stride) for v in (k, o, s))))
        u = movement_uop(
            u,
            Ops.SHRINK,
            (*((0, i) for i in lead), *(b for k, o in zip(kernel, outs) for b in ((0, k), (0, o), (0, 1)))),
        )
        u = movement_uop(u, Ops.RESHAPE, (*lead, *(v for k, o in zip(kernel, outs) for v in (k, o))))
    # the axes are (*lead, k1, o1, k2, o2, ...): windows first, taps last
    n = len(kernel)
    order = (*range(nl), *(nl + 2 * i + 1 for i in range(n)), *(nl + 2 * i for i in range(n)))
    return movement_uop(u, Ops.PERMUTE, order)


class NNMixin:
    """Tensor methods for neural networks."""

    __slots__ = ()

    # *** sliding windows ***

    def _pool(self, kernel: tuple[int, ...], stride: tuple[int, ...], dilation: tuple[int, ...]) -> Tensor:
        """The sliding windows over the last len(kernel) axes, as movement ops: shape (*lead, *out, *kernel),
        element [..., o, j] = self[..., o * stride + j * dilation] per axis. The caller has checked that each
        dilated kernel fits its (already padded) axis. The movement ops are built as UOps, with no checks and no
        tensor between them (a convolution's windows took 0.45 ms of Python as a dozen tensor ops). Windows that
        overlap read a zero-padded copy of the axis, so they are a new value, not a view that writes reach self."""
        u = _windows(self.uop, kernel, stride, dilation)
        if any(node.op is Ops.PAD for node in u.toposort(gate=lambda node: node is not self.uop)):
            return type(self)._from_uop(u, self.device)
        return self._new(u)

    # *** convolution ***

    def conv2d(
        self,
        weight: Tensor,
        bias: Tensor | None = None,
        groups: int = 1,
        stride: int | Sequence[int] = 1,
        dilation: int | Sequence[int] = 1,
        padding: int | str | Sequence[int] = 0,
        dtype: DType | str | None = None,
    ) -> Tensor:
        """Convolution (cross-correlation, as torch.nn.functional.conv*d) over any number of spatial dims:
        input (N, Cin, *spatial) (or unbatched (Cin, *spatial)), weight (Cout, Cin / groups, *kernel), bias
        (Cout,). `stride`, `dilation` and `padding` are an int or one per spatial dim; `padding` may also be
        PyTorch's flat form (2 per dim, last dim first) or 'valid' / 'same' (stride 1). `dtype` is the dtype
        it accumulates in and returns. One kernel: a broadcast multiply and a sum over sliding windows.

        >>> x = Tensor.arange(9, dtype="float32").reshape(1, 1, 3, 3)
        >>> x.conv2d(Tensor.ones(1, 1, 2, 2)).tolist()
        [[[[8.0, 12.0], [20.0, 24.0]]]]
        >>> Tensor([[[1.0, 2.0, 3.0]]]).conv2d(Tensor([[[1.0, -1.0]]]), padding=1).tolist()
        [[[-1.0, -1.0, -1.0, 3.0]]]
        """
        op = "conv2d"
        x, w, unbatched = self._conv_args(weight, bias, groups, op)
        n = w.ndim - 2
        kernel = w.shape[2:]
        stride_ = _positive(stride, n, op, "stride")
        dilation_ = _positive(dilation, n, op, "dilation")
        if isinstance(padding, str):
            if padding == "valid":
                pads = [(0, 0)] * n
            elif padding == "same":
                if any(s != 1 for s in stride_):
                    raise ArgumentError(f"{op}: padding='same' needs stride 1, got stride {stride_}")
                # the extra element of an odd total goes after, as in PyTorch
                pads = [(d * (k - 1) // 2, d * (k - 1) - d * (k - 1) // 2) for k, d in zip(kernel, dilation_)]
            else:
                raise ArgumentError(f"{op}: padding string must be 'valid' or 'same', got {padding!r}")
        else:
            pads = _pad_pairs(padding, n, op)
        out = x._conv(w, bias, groups, stride_, dilation_, pads, dtype, op)
        return out.reshape(out.shape[1:]) if unbatched else out

    def _conv_args(self, weight: Any, bias: Any, groups: Any, op: str) -> tuple[Tensor, Tensor, bool]:
        """Checks a convolution's tensors and groups (the layout is conv2d's: weight (Cout, Cin / groups, *k));
        returns the batched input, the weight, and whether the input was unbatched."""
        _need_tensor(weight, type(self), op, "weight")
        _need_tensor(bias, type(self), op, "bias", optional=True)
        groups = int_arg(groups, op, "groups")
        if groups <= 0:
            raise ArgumentError(f"{op}: groups must be positive, got {groups}")
        if weight.ndim < 3:
            raise ArgumentError(
                f"{op}: weight must be (out_channels, in_channels / groups, *kernel) with at least 1 spatial dim, "
                f"got shape {weight.shape}"
            )
        if self.ndim not in (weight.ndim, weight.ndim - 1):
            raise ArgumentError(
                f"{op}: a weight of shape {weight.shape} needs a {weight.ndim}-d input (N, C, *spatial) or a "
                f"{weight.ndim - 1}-d unbatched one, got shape {self.shape}"
            )
        unbatched = self.ndim == weight.ndim - 1
        x = self.reshape(1, *self.shape) if unbatched else self
        for t in (weight, bias):
            if t is not None and t.device != self.device:
                raise RuntimeError(f"{op}: tensors on different devices ({self.device} and {t.device})")
        return x, weight, unbatched

    def _conv(
        self,
        weight: Tensor,
        bias: Tensor | None,
        groups: int,
        stride: tuple[int, ...],
        dilation: tuple[int, ...],
        pads: list[tuple[int, int]],
        dtype: DType | str | None,
        op: str,
    ) -> Tensor:
        """The convolution of a batched input with conv2d's weight layout; pads may be negative (they crop:
        conv_transpose2d uses that)."""
        bs, cin = self.shape[:2]
        cout, cin_g = weight.shape[:2]
        kernel = weight.shape[2:]
        if cout % groups:
            raise ArgumentError(
                f"{op}: out channels {cout} (weight shape {weight.shape}) must divide by groups {groups}"
            )
        if cin != cin_g * groups:
            raise ArgumentError(
                f"{op}: input has {cin} channels (shape {self.shape}), the weight of shape {weight.shape} with "
                f"groups={groups} expects {cin_g * groups} (weight.shape[1] * groups)"
            )
        if bias is not None and bias.shape != (cout,):
            raise ArgumentError(
                f"{op}: bias must have shape ({cout},) for weight shape {weight.shape}, got {bias.shape}"
            )
        spatial = self.shape[2:]
        padded = tuple(i + b + a for i, (b, a) in zip(spatial, pads))
        for i, k, d in zip(padded, kernel, dilation):
            if d * (k - 1) + 1 > i:
                raise ArgumentError(
                    f"{op}: the kernel {kernel} (dilation {dilation}) is bigger than the padded input {padded} "
                    f"(input shape {self.shape})"
                )
        n = len(kernel)
        if _wino_eligible(self, weight, groups, stride, dilation, dtype, op):
            y = _winograd(self, weight, pads)
            return y if bias is None else y + bias.reshape(1, cout, 1, 1)
        # the graph is built as UOps, with no tensor op (and its checks) between them: the conv2d of bench/ops.py
        # took 0.6 ms of Python as tensor ops (and 90 us for its input's pad alone)
        # (N, G, 1, Cin/G, *out, *k) times (1, G, Cout/G, Cin/G, 1.., *k), summed over Cin/G and the taps; the
        # scheduler's layout pass decides which copies the operands are read from (schedule/layout.py)
        wshape = (1, groups, cout // groups, cin_g, *(1,) * n, *kernel)
        wu = movement_uop(weight.uop, Ops.RESHAPE, wshape)
        u = _windows(_padded_input(self, pads), kernel, stride, dilation)  # (N, Cin, *out, *kernel)
        out = u.shape[2 : 2 + n]
        u = movement_uop(u, Ops.RESHAPE, (bs, groups, 1, cin_g, *out, *kernel))
        axes = (3, *range(4 + n, 4 + 2 * n))
        dt = self.dtype
        if (
            dtype is None
            and weight.dtype is dt
            and dt in (dtypes.float32, dtypes.float64)
            and cin_g * prod(kernel) <= SPLIT_SUM
        ):
            # what (x * w).sum(axes) builds for one float dtype and a sum short enough for one stage
            summed = sum_of_products(u, wu, (bs, groups, cout // groups, cin_g, *out, *kernel), axes)
            y = type(self)._from_uop(movement_uop(summed, Ops.RESHAPE, (bs, cout, *out)), self.device)
        else:
            xt, wt = type(self)._from_uop(u, self.device), type(self)._from_uop(wu, self.device)
            acc = tensor_dtype(dtype, op) if dtype is not None else None
            y = (xt * wt).sum(axes, dtype=acc).reshape(bs, cout, *out)
        if all(b >= 0 and a >= 0 for b, a in pads) and y.dtype is dt and weight.dtype is dt:
            # the input's gradient as a transposed convolution (`_conv_grad`), not traced through the windows
            y = y._custom_grad("conv", self, weight, params=(groups, stride, dilation, tuple(pads)))
        return y if bias is None else y + bias.reshape(1, cout, *(1,) * n)

    def conv_transpose2d(
        self,
        weight: Tensor,
        bias: Tensor | None = None,
        groups: int = 1,
        stride: int | Sequence[int] = 1,
        dilation: int | Sequence[int] = 1,
        padding: int | Sequence[int] = 0,
        output_padding: int | Sequence[int] = 0,
    ) -> Tensor:
        """Transposed convolution (the gradient of conv2d with respect to its input), any number of spatial
        dims, as torch.nn.functional.conv_transpose*d: input (N, Cin, *spatial), weight (Cin, Cout / groups,
        *kernel). Each output size is (i - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1.

        >>> Tensor([[[1.0, 2.0]]]).conv_transpose2d(Tensor([[[1.0, 10.0]]]), stride=2).tolist()
        [[[1.0, 10.0, 2.0, 20.0]]]
        """
        op = "conv_transpose2d"
        x, w, unbatched = self._conv_args(weight, bias, groups, op)
        n = w.ndim - 2
        kernel = w.shape[2:]
        stride_ = _positive(stride, n, op, "stride")
        dilation_ = _positive(dilation, n, op, "dilation")
        pads = _pad_pairs(padding, n, op)
        if any(b != a for b, a in pads):
            raise ArgumentError(f"{op}: padding must be the same on both sides of a dim, got {padding!r}")
        out_pad = _per_dim(output_padding, n, op, "output_padding")
        for o, s, d in zip(out_pad, stride_, dilation_):
            if not 0 <= o < max(s, d):
                raise ArgumentError(
                    f"{op}: output_padding {out_pad} must be non-negative and smaller than stride {stride_} "
                    f"or dilation {dilation_}"
                )
        cin = w.shape[0]
        if cin % groups:
            raise ArgumentError(f"{op}: in channels {cin} (weight shape {w.shape}) must divide by groups {groups}")
        if x.shape[1] != cin:
            raise ArgumentError(
                f"{op}: input has {x.shape[1]} channels (shape {self.shape}), the weight of shape {w.shape} "
                f"expects {cin} (weight.shape[0])"
            )
        spatial = x.shape[2:]
        sizes = [
            (i - 1) * s - 2 * p + d * (k - 1) + o + 1
            for i, s, (p, _), d, k, o in zip(spatial, stride_, pads, dilation_, kernel, out_pad)
        ]
        if any(i <= 0 for i in spatial) or any(s <= 0 for s in sizes):
            raise ArgumentError(f"{op}: input shape {x.shape} with weight {w.shape} gives output size {tuple(sizes)}")
        # a transposed conv is a conv of the input spread out by the stride (stride - 1 zeros between elements),
        # with the kernel flipped and its in/out channels swapped within each group
        conv_pads = [
            (d * (k - 1) - p, d * (k - 1) - p + o) for k, d, (p, _), o in zip(kernel, dilation_, pads, out_pad)
        ]
        out = _spread(x, stride_)._conv(
            _transposed_kernel(w, groups), None, groups, (1,) * n, dilation_, conv_pads, None, op
        )
        if out.dtype is x.dtype and w.dtype is x.dtype:
            # its gradients are a strided convolution's, not the spread input's (3/4 zeros with stride 2)
            out = out._custom_grad("conv_transpose", x, w, params=(groups, stride_, dilation_, tuple(pads)))
        if bias is not None:
            out = out + bias.reshape(1, -1, *(1,) * n)
        return out.reshape(out.shape[1:]) if unbatched else out

    # *** pooling ***

    def _pool_args(
        self, kernel_size: Any, stride: Any, dilation: Any, padding: Any, ceil_mode: bool, op: str
    ) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], list[tuple[int, int]], list[tuple[int, int]]]:
        """Kernel, stride, dilation, the padding asked for, and that padding plus what ceil_mode adds after."""
        if isinstance(kernel_size, (list, tuple)):
            if not kernel_size:
                raise ArgumentError(f"{op}: kernel_size must not be empty")
            kernel = tuple(int_arg(k, op, "kernel_size") for k in kernel_size)
        else:
            kernel = (int_arg(kernel_size, op, "kernel_size"),) * 2
        n = len(kernel)
        _positive(kernel, n, op, "kernel_size")
        if self.ndim < n:
            raise ArgumentError(
                f"{op}: a {n}-d kernel {kernel} needs an input with at least {n} dims, got {self.shape}"
            )
        stride_ = kernel if stride is None else _positive(stride, n, op, "stride")
        dilation_ = _positive(dilation, n, op, "dilation")
        pads = _pad_pairs(padding, n, op)
        for (b, a), k in zip(pads, kernel):
            # as PyTorch: a window never lies wholly in the padding
            if b > k // 2 or a > k // 2:
                raise ArgumentError(f"{op}: padding {padding!r} must be at most half the kernel size {kernel}")
        spatial = self.shape[self.ndim - n :]
        ceil_pads = []
        for i, k, s, d, (b, a) in zip(spatial, kernel, stride_, dilation_, pads):
            span = d * (k - 1) + 1
            if span > i + b + a:
                raise ArgumentError(
                    f"{op}: the kernel {kernel} (dilation {dilation_}) is bigger than the padded input "
                    f"(input shape {self.shape}, padding {padding!r})"
                )
            extra = 0
            if ceil_mode:
                o = -(-(i + b + a - span) // s) + 1
                if (o - 1) * s >= i + b:  # as PyTorch: the last window must start inside the input or the left pad
                    o -= 1
                extra = max(0, (o - 1) * s + span - (i + b + a))
            ceil_pads.append((b, a + extra))
        return kernel, stride_, dilation_, pads, ceil_pads

    def _padded_windows(self, pads: list[tuple[int, int]], value: Any, kernel, stride, dilation) -> Tensor:
        lead = ((0, 0),) * (self.ndim - len(kernel))
        return self.pad((*lead, *pads), value=value)._pool(kernel, stride, dilation)

    def max_pool2d(
        self,
        kernel_size: int | Sequence[int] = (2, 2),
        stride: int | Sequence[int] | None = None,
        dilation: int | Sequence[int] = 1,
        padding: int | Sequence[int] = 0,
        ceil_mode: bool = False,
        return_indices: bool = False,
    ) -> Any:
        """The maximum over windows of the last len(kernel_size) axes (an int kernel_size is 2-d), as
        torch.nn.functional.max_pool*d: stride defaults to the kernel size, padding (at most half the kernel)
        is -inf, `ceil_mode` keeps a last partial window. The gradient goes to each window's maximum.
        `return_indices=True` returns (values, int32 indices) as PyTorch: each index is the position of the
        maximum in its flattened spatial plane (the first maximum in the window; the last NaN when there is one).

        >>> Tensor([[[1.0, 3.0, 2.0, 5.0, 4.0]]]).max_pool2d((2,), ceil_mode=True).tolist()
        [[[3.0, 5.0, 4.0]]]
        >>> Tensor([[[1.0, 3.0, 5.0, 2.0]]]).max_pool2d((2,), return_indices=True)[1].tolist()
        [[[1, 2]]]
        """
        op = "max_pool2d"
        kernel, stride_, dilation_, _, ceil_pads = self._pool_args(
            kernel_size, stride, dilation, padding, ceil_mode, op
        )
        low = -math.inf if dtypes.is_float(self.dtype) else dtypes.min(self.dtype)
        windows = self._padded_windows(ceil_pads, low, kernel, stride_, dilation_)
        values = windows.max(tuple(range(-len(kernel), 0)))
        if not return_indices:
            return values
        return values, windows.detach()._window_argmax(
            values.detach(), self.shape, kernel, stride_, dilation_, ceil_pads
        )

    def _window_argmax(
        self,
        values: Tensor,
        in_shape: tuple[int, ...],
        kernel: tuple[int, ...],
        stride: tuple[int, ...],
        dilation: tuple[int, ...],
        pads: list[tuple[int, int]],
    ) -> Tensor:
        """For windows (*lead, *out, *kernel) of an input of shape `in_shape` and their maxima `values`, the
        int32 position of each maximum in the flattened spatial input, chosen as PyTorch's CPU loop does: taps in
        the padding never count; the first tap equal to the maximum wins, unless the window has a NaN, when the
        last NaN does."""
        n = len(kernel)
        spatial, outs = in_shape[len(in_shape) - n :], values.shape[values.ndim - n :]
        lead = values.shape[: values.ndim - n]
        # per spatial axis: the input position of tap j of window o, o * stride + j * dilation - pad_before,
        # as a (*out, *kernel) grid; `flat` is the position in the flattened plane, `inside` whether it is real
        terms, oks = [], []
        for a, (size, o, k, s, d, (b, _)) in enumerate(zip(spatial, outs, kernel, stride, dilation, pads)):
            shape_o = tuple(o if i == a else 1 for i in range(n)) + (1,) * n
            shape_k = (1,) * n + tuple(k if i == a else 1 for i in range(n))
            pos = self.arange(o, dtype=dtypes.int32, device=self.device).reshape(shape_o) * s + (
                self.arange(k, dtype=dtypes.int32, device=self.device).reshape(shape_k) * d - b
            )
            oks.append((pos >= 0) & (pos < size))
            terms.append(pos * prod(spatial[a + 1 :]))
        flat, inside = terms[0], oks[0]
        for term, ok in zip(terms[1:], oks[1:]):
            flat, inside = flat + term, inside & ok
        taps = prod(kernel)
        grid = (*outs, taps)
        flat, inside = flat.reshape(grid), inside.reshape(grid)
        w = self.reshape(*lead, *outs, taps)
        hit = inside & (w == values.unsqueeze(-1))
        if dtypes.is_float(self.dtype):
            nan = inside & (w != w)
            # the last NaN: the largest tap number among the NaN taps; else the first maximum
            last_nan = nan.where(self.arange(1, taps + 1, dtype=dtypes.int32, device=self.device), 0).max(-1)
        countdown = self.arange(taps, 0, -1, dtype=dtypes.int32, device=self.device)
        tap = taps - hit.where(countdown, 0).max(-1)
        if dtypes.is_float(self.dtype):
            tap = (last_nan > 0).where(last_nan - 1, tap)
        pick = tap.unsqueeze(-1) == self.arange(taps, dtype=dtypes.int32, device=self.device)
        return pick.where(flat, 0).sum(-1).cast(dtypes.int32)

    def max_unpool2d(
        self,
        indices: Tensor,
        kernel_size: int | Sequence[int] = (2, 2),
        stride: int | Sequence[int] | None = None,
        padding: int | Sequence[int] = 0,
        output_size: Sequence[int] | None = None,
    ) -> Tensor:
        """The inverse of `max_pool2d(return_indices=True)`, as torch.nn.functional.max_unpool*d: zeros of the
        pooled input's spatial size, with each value written at its index in the flattened spatial plane (where
        two values share an index, the later one wins, as PyTorch's CPU loop). The spatial size is (in - 1) *
        stride - 2 * padding + kernel per axis, or `output_size` (its last dims, each within a stride of that).

        >>> x = Tensor([[[1.0, 3.0, 5.0, 2.0]]])
        >>> v, i = x.max_pool2d((2,), return_indices=True)
        >>> v.max_unpool2d(i, (2,)).tolist()
        [[[0.0, 3.0, 5.0, 0.0]]]
        """
        op = "max_unpool2d"
        _need_tensor(indices, type(self), op, "indices")
        _need_int(indices, op, "indices")
        if indices.shape != self.shape:
            raise ArgumentError(f"{op}: indices must have the input's shape {self.shape}, got {indices.shape}")
        if isinstance(kernel_size, (list, tuple)):
            kernel = tuple(int_arg(k, op, "kernel_size") for k in kernel_size)
        else:
            kernel = (int_arg(kernel_size, op, "kernel_size"),) * 2
        n = len(kernel)
        if n == 0 or self.ndim < n:
            raise ArgumentError(
                f"{op}: a {n}-d kernel {kernel} needs an input with at least {n} dims, got {self.shape}"
            )
        _positive(kernel, n, op, "kernel_size")
        stride_ = kernel if stride is None else _positive(stride, n, op, "stride")
        pads = _pad_pairs(padding, n, op)
        lead, spatial = self.shape[: self.ndim - n], self.shape[self.ndim - n :]
        default = tuple((i - 1) * s - b - a + k for i, s, (b, a), k in zip(spatial, stride_, pads, kernel))
        out = default if output_size is None else shape_arg((output_size,), op)[-n:]
        # as PyTorch: another output size must still be one the pooling could have come from
        if len(out) != n or any(not d - s < o < d + s for o, d, s in zip(out, default, stride_)):
            raise ArgumentError(
                f"{op}: output_size {tuple(out)} must have {n} sizes, each within a stride {stride_} of {default}"
            )
        total, m = prod(out), prod(spatial)
        x = self.reshape(*lead, m)
        idx = indices.cast(dtypes.int64 if indices.dtype.itemsize > 4 else dtypes.int32).reshape(*lead, m)
        eq = idx.unsqueeze(-1) == self.arange(total, dtype=dtypes.int32, device=self.device)  # (*lead, m, total)
        # where an index repeats, the later input position wins
        order = self.arange(m, dtype=dtypes.int32, device=self.device).reshape(m, 1)
        winner = eq.where(order, -1).max(-2, keepdim=True)
        placed = (eq & (order == winner)).where(x.unsqueeze(-1), 0).sum(-2).cast(self.dtype)
        # PyTorch's gradient reads the output's gradient at each index, for every input (a repeated one too)
        return placed._custom_grad("max_unpool", x, idx).reshape(*lead, *out)

    def avg_pool2d(
        self,
        kernel_size: int | Sequence[int] = (2, 2),
        stride: int | Sequence[int] | None = None,
        dilation: int | Sequence[int] = 1,
        padding: int | Sequence[int] = 0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
    ) -> Tensor:
        """The mean over windows of the last len(kernel_size) axes (an int kernel_size is 2-d), as
        torch.nn.functional.avg_pool*d: the zero padding counts in the divisor when `count_include_pad`; the
        part of a `ceil_mode` window past the padding never counts.

        >>> Tensor([[[1.0, 3.0, 2.0, 5.0, 4.0]]]).avg_pool2d((2,), ceil_mode=True).tolist()
        [[[2.0, 3.5, 4.0]]]
        """
        op = "avg_pool2d"
        kernel, stride_, dilation_, pads, ceil_pads = self._pool_args(
            kernel_size, stride, dilation, padding, ceil_mode, op
        )
        axes = tuple(range(-len(kernel), 0))
        x = self._float()
        total = x._padded_windows(ceil_pads, 0.0, kernel, stride_, dilation_).sum(axes)
        if count_include_pad and ceil_pads == pads:
            return total / prod(kernel)
        # each window's divisor is the number of its taps on the input (and on the asked-for padding when that
        # counts), never those on the ceil_mode extra: the same windowed sum over ones
        spatial = self.shape[self.ndim - len(kernel) :]
        if count_include_pad:
            counted = self.ones(*(i + b + a for i, (b, a) in zip(spatial, pads)), device=self.device)
            extra = [(0, ca - a) for (_, a), (_, ca) in zip(pads, ceil_pads)]
        else:
            counted, extra = self.ones(*spatial, device=self.device), ceil_pads
        count = counted.cast(total.dtype)._padded_windows(extra, 0.0, kernel, stride_, dilation_).sum(axes)
        return total / count

    # *** losses ***

    def _class_targets(self, Y: Any, cdim: int, op: str) -> Tensor:
        """Checks integer class targets `Y` for logits of this shape with classes on axis `cdim`."""
        _need_tensor(Y, type(self), op, "Y")
        _need_int(Y, op, "Y")
        want = self.shape[:cdim] + self.shape[cdim + 1 :]
        if Y.shape != want:
            raise ArgumentError(f"{op}: Y has shape {Y.shape}, expected {want} for input of shape {self.shape}")
        if Y.device != self.device:
            raise RuntimeError(f"{op}: tensors on different devices ({self.device} and {Y.device})")
        return Y

    def _class_mask(self, Y: Tensor, cdim: int) -> Tensor:
        """A bool tensor of self's shape: True where the index along `cdim` is Y's class (out-of-range classes,
        such as an ignore_index, match nothing)."""
        n = self.shape[cdim]
        classes = self.arange(n, dtype=dtypes.int32, device=self.device).reshape(n, *(1,) * (self.ndim - cdim - 1))
        return Y.cast(dtypes.int64 if Y.dtype.itemsize > 4 else dtypes.int32).unsqueeze(cdim) == classes

    def cross_entropy(
        self,
        Y: Tensor,
        reduction: str = "mean",
        label_smoothing: float = 0.0,
        ignore_index: int = -100,
        weight: Tensor | None = None,
    ) -> Tensor:
        """Cross entropy of logits (N, C) or (N, C, d1, ...) (or unbatched (C,)) against integer class indices
        Y (N, d1, ...) or class probabilities of the logits' shape, as torch.nn.functional.cross_entropy:
        log_softmax over the class axis, with `label_smoothing` mixing in the uniform distribution. Index
        targets equal to `ignore_index` add nothing and do not count in the mean. `weight` (C,) scales each
        class's term; with index targets 'mean' then divides by the summed weights of the counted targets.

        >>> round(Tensor([[2.0, 0.0, 0.0]]).cross_entropy(Tensor([0])).item(), 4)
        0.2395
        >>> round(Tensor([[2.0, 0.0], [0.0, 2.0]]).cross_entropy(Tensor([0, 0]), weight=Tensor([1.0, 3.0])).item(), 4)
        1.1269
        """
        op = "cross_entropy"
        _reduction(reduction, op)
        eps = _smoothing(label_smoothing, op)
        _need_float(self, op, "input")
        if self.ndim == 0:
            raise ArgumentError(f"{op}: input must be (C,) or (N, C, ...), got a 0-d tensor")
        _need_tensor(Y, type(self), op, "Y")
        cdim = 1 if self.ndim >= 2 else 0
        n = self.shape[cdim]
        logp = self.log_softmax(cdim)
        w = None if weight is None else self._class_weight(weight, cdim, op).cast(logp.dtype)
        if dtypes.is_float(Y.dtype):
            if Y.shape != self.shape:
                raise ArgumentError(
                    f"{op}: probability targets Y must have the input's shape {self.shape}, got {Y.shape}"
                )
            probs = Y.cast(logp.dtype)
            if eps:
                probs = probs * (1 - eps) + eps / n
            terms = logp * probs if w is None else logp * probs * w
            return _reduce_loss(-terms.sum(cdim), reduction)
        return logp._index_loss(self._class_targets(Y, cdim, op), cdim, eps, ignore_index, reduction, w)

    def _class_weight(self, weight: Any, cdim: int, op: str) -> Tensor:
        """A per-class weight (C,), shaped to broadcast along the class axis `cdim` of this tensor."""
        _need_tensor(weight, type(self), op, "weight")
        n = self.shape[cdim]
        if weight.shape != (n,):
            raise ArgumentError(
                f"{op}: weight must have shape ({n},) for input of shape {self.shape}, got {weight.shape}"
            )
        _need_float(weight, op, "weight")
        return weight.reshape(n, *(1,) * (self.ndim - cdim - 1))

    def _index_loss(
        self, Y: Tensor, cdim: int, eps: float, ignore_index: int, reduction: str, weight: Tensor | None = None
    ) -> Tensor:
        """The cross entropy of log-probabilities `self` at the integer classes Y (class axis `cdim`), smoothed by
        `eps`; targets equal to `ignore_index` add nothing and do not count in the mean. `weight` (shaped to
        broadcast on `cdim`) scales each class: the target's term by its class's weight, the smoothing term
        class by class, and the mean divides by the summed weights of the targets (PyTorch's definition)."""
        mask = self._class_mask(Y, cdim)
        keep = ignore_index != Y
        if weight is None:
            loss = -mask.where(self, 0.0).sum(cdim)
            if eps:
                loss = loss * (1 - eps) - self.mean(cdim) * eps
            loss = keep.where(loss, 0.0)
            if reduction == "mean":
                return loss.sum() / keep.sum().cast(loss.dtype)
            return _reduce_loss(loss, reduction)
        target_w = keep.where(mask.where(weight, 0.0).sum(cdim), 0.0)
        loss = -mask.where(self, 0.0).sum(cdim) * target_w
        if eps:
            smooth = -(self * weight).sum(cdim)
            loss = loss * (1 - eps) + keep.where(smooth, 0.0) * (eps / self.shape[cdim])
        if reduction == "mean":
            return loss.sum() / target_w.sum()
        return _reduce_loss(loss, reduction)

    def sparse_categorical_crossentropy(
        self, Y: Tensor, ignore_index: int = -1, label_smoothing: float = 0.0, reduction: str = "mean"
    ) -> Tensor:
        """tinygrad's cross entropy of logits (..., C) (classes last) against integer classes Y (...):
        entries equal to `ignore_index` add nothing and do not count in the mean.

        >>> round(Tensor([[2.0, 0.0, 0.0], [0.0, 0.0, 0.0]]).sparse_categorical_crossentropy(Tensor([0, -1])).item(), 4)
        0.2395
        """
        op = "sparse_categorical_crossentropy"
        _reduction(reduction, op)
        eps = _smoothing(label_smoothing, op)
        _need_float(self, op, "input")
        if self.ndim == 0:
            raise ArgumentError(f"{op}: input must have a class axis (..., C), got a 0-d tensor")
        Y = self._class_targets(Y, self.ndim - 1, op)
        return self.log_softmax(-1)._index_loss(Y, self.ndim - 1, eps, ignore_index, reduction)

    def nll_loss(
        self, Y: Tensor, weight: Tensor | None = None, ignore_index: int | None = None, reduction: str = "mean"
    ) -> Tensor:
        """Negative log likelihood of log-probabilities (N, C) or (N, C, d1, ...) (or unbatched (C,)) at the
        integer classes Y, as torch.nn.functional.nll_loss: `weight` (C,) scales each class, and 'mean' divides
        by the summed weights of the targets that are not `ignore_index`.

        >>> Tensor([[-0.5, -1.0], [-2.0, -0.1]]).nll_loss(Tensor([1, 0])).item()
        1.5
        """
        op = "nll_loss"
        _reduction(reduction, op)
        _need_float(self, op, "input")
        if self.ndim == 0:
            raise ArgumentError(f"{op}: input must be (C,) or (N, C, ...), got a 0-d tensor")
        cdim = 1 if self.ndim >= 2 else 0
        Y = self._class_targets(Y, cdim, op)
        mask = self._class_mask(Y, cdim)
        _need_tensor(weight, type(self), op, "weight", optional=True)
        if weight is None:
            w = mask.where(1.0, 0.0)._pick_sum(cdim).cast(self.dtype)  # 1 for a class in range
        else:
            if weight.shape != (self.shape[cdim],):
                raise ArgumentError(
                    f"{op}: weight must have shape ({self.shape[cdim]},) for input of shape {self.shape}, "
                    f"got {weight.shape}"
                )
            shaped = weight.cast(self.dtype).reshape(self.shape[cdim], *(1,) * (self.ndim - cdim - 1))
            w = mask.where(shaped, 0.0)._pick_sum(cdim)
        if ignore_index is not None:
            w = (ignore_index != Y).where(w, 0.0)
        loss = -mask.where(self, 0.0)._pick_sum(cdim) * w
        if reduction == "mean":
            return loss.sum() / w.sum()
        return _reduce_loss(loss, reduction)

    def _binary_target(self, Y: Any, op: str) -> Tensor:
        _need_float(self, op, "input")
        _need_tensor(Y, type(self), op, "Y")
        if Y.shape != self.shape:
            raise ArgumentError(f"{op}: Y has shape {Y.shape}, the input {self.shape}; they must match")
        if Y.device != self.device:
            raise RuntimeError(f"{op}: tensors on different devices ({self.device} and {Y.device})")
        return Y.cast(self.dtype)

    def binary_crossentropy(self, Y: Tensor, reduction: str = "mean") -> Tensor:
        """Binary cross entropy of probabilities against targets Y in [0, 1] of the same shape:
        -(Y log p + (1 - Y) log(1 - p)), each log clamped at -100 as PyTorch does.

        >>> round(Tensor([0.8, 0.4]).binary_crossentropy(Tensor([1.0, 0.0])).item(), 4)
        0.367
        """
        op = "binary_crossentropy"
        _reduction(reduction, op)
        Y = self._binary_target(Y, op)
        loss = -(Y * self.log().maximum(-100.0) + (1 - Y) * (1 - self).log().maximum(-100.0))
        return _reduce_loss(loss, reduction)

    def binary_crossentropy_logits(
        self, Y: Tensor, reduction: str = "mean", pos_weight: Tensor | None = None
    ) -> Tensor:
        """Binary cross entropy of logits (sigmoid inside, computed with logsigmoid so large logits stay
        finite); `pos_weight` scales the positive term (broadcast along the last axis), as
        torch.nn.functional.binary_cross_entropy_with_logits.

        >>> round(Tensor([2.0, -1.0]).binary_crossentropy_logits(Tensor([1.0, 0.0])).item(), 4)
        0.2201
        """
        op = "binary_crossentropy_logits"
        _reduction(reduction, op)
        Y = self._binary_target(Y, op)
        pos = Y * self.logsigmoid()
        if pos_weight is not None:
            _need_tensor(pos_weight, type(self), op, "pos_weight")
            try:
                self._broadcast_shape(op, pos_weight.shape, self.shape)
            except ValueError:
                raise ArgumentError(
                    f"{op}: pos_weight of shape {pos_weight.shape} does not broadcast to the input's {self.shape}"
                ) from None
            pos = pos * pos_weight.cast(self.dtype)
        return _reduce_loss(-(pos + (1 - Y) * (-self).logsigmoid()), reduction)

    # *** normalization ***

    def _norm_input(self, op: str) -> tuple[Tensor, DType]:
        """The input in the dtype the statistics are computed in, and the dtype of the result."""
        out = self.dtype if dtypes.is_float(self.dtype) else dtypes.default_float
        return self.cast(compute_dtype(out)), out

    def layernorm(self, axis: int | Sequence[int] = -1, eps: float = 1e-5) -> Tensor:
        """(x - mean) / sqrt(var + eps) over `axis` (biased variance; no affine part: nn.LayerNorm adds it).

        >>> Tensor([[1.0, 3.0, 5.0]]).layernorm().numpy().round(4)
        array([[-1.2247,  0.    ,  1.2247]], dtype=float32)
        """
        x, out = self._norm_input("layernorm")
        axes = self._axes(axis, "layernorm")
        y = x - x.mean(axes, keepdim=True)
        return (y * ((y * y).mean(axes, keepdim=True) + eps).rsqrt()).cast(out)

    def rms_norm(self, axis: int | Sequence[int] = -1, eps: float = 1e-6) -> Tensor:
        """x / sqrt(mean(x^2) + eps) over `axis` (no affine part: nn.RMSNorm adds it).

        >>> Tensor([[3.0, 4.0]]).rms_norm(eps=0.0).numpy().round(4)
        array([[0.8485, 1.1314]], dtype=float32)
        """
        x, out = self._norm_input("rms_norm")
        axes = self._axes(axis, "rms_norm")
        return (x * ((x * x).mean(axes, keepdim=True) + eps).rsqrt()).cast(out)

    def batchnorm(
        self,
        weight: Tensor | None,
        bias: Tensor | None,
        mean: Tensor,
        invstd: Tensor,
        axis: int | Sequence[int] = 1,
    ) -> Tensor:
        """(x - mean) * invstd * weight + bias, with each of them (shape: the sizes of `axis`) broadcast along
        `axis` (tinygrad's batchnorm; weight and bias may be None).

        >>> x = Tensor([[1.0, 10.0], [3.0, 30.0]])
        >>> x.batchnorm(None, None, Tensor([2.0, 20.0]), Tensor([1.0, 0.1])).tolist()
        [[-1.0, -1.0], [1.0, 1.0]]
        """
        op = "batchnorm"
        axes = self._axes(axis, op)
        want = tuple(self.shape[a] for a in axes)
        shape = tuple(s if i in axes else 1 for i, s in enumerate(self.shape))
        parts = []
        for name, t in (("weight", weight), ("bias", bias), ("mean", mean), ("invstd", invstd)):
            _need_tensor(t, type(self), op, name, optional=name in ("weight", "bias"))
            if t is not None and t.shape != want:
                raise ArgumentError(
                    f"{op}: {name} must have shape {want} (axis {axis} of input shape {self.shape}), got {t.shape}"
                )
            parts.append(None if t is None else t.reshape(shape))
        w, b, m, inv = parts
        x = (self - m) * inv
        if w is not None:
            x = x * w
        return x if b is None else x + b

    # *** attention ***

    def scaled_dot_product_attention(
        self,
        key: Tensor,
        value: Tensor,
        attn_mask: Tensor | None = None,
        dropout_p: float = 0.0,
        is_causal: bool = False,
        scale: float | None = None,
        enable_gqa: bool = False,
    ) -> Tensor:
        """softmax(q @ k^T * scale + mask) @ v over the last two axes (query (..., L, E), key (..., S, E),
        value (..., S, Ev)), as torch.nn.functional.scaled_dot_product_attention: scale defaults to 1/sqrt(E);
        a bool `attn_mask` keeps where True, a float one is added; `is_causal` keeps j <= i; dropout applies
        in training mode. With `enable_gqa`, key/value heads (axis -3) are shared by groups of query heads.

        >>> q = Tensor([[1.0, 0.0]])
        >>> q.scaled_dot_product_attention(Tensor([[1.0, 0.0], [0.0, 1.0]]), Tensor([[1.0], [3.0]])).numpy().round(4)
        array([[1.6605]], dtype=float32)
        """
        op = "scaled_dot_product_attention"
        for name, t in (("key", key), ("value", value)):
            _need_tensor(t, type(self), op, name)
        _need_tensor(attn_mask, type(self), op, "attn_mask", optional=True)
        if min(self.ndim, key.ndim, value.ndim) < 2:
            raise ArgumentError(
                f"{op}: query, key and value need at least 2 dims, got {self.shape}, {key.shape}, {value.shape}"
            )
        if key.shape[-1] != self.shape[-1] or key.shape[-2] != value.shape[-2]:
            raise ArgumentError(
                f"{op}: query {self.shape}, key {key.shape} and value {value.shape} do not fit (..., L, E), "
                "(..., S, E), (..., S, Ev)"
            )
        if enable_gqa and key.ndim >= 3 and self.ndim >= 3 and key.shape[-3] != self.shape[-3]:
            heads, kv_heads = self.shape[-3], key.shape[-3]
            if heads % kv_heads or value.shape[-3] != kv_heads:
                raise ArgumentError(f"{op}: {heads} query heads cannot share {kv_heads} key/value heads")
            key = key.repeat_interleave(heads // kv_heads, dim=-3)
            value = value.repeat_interleave(heads // kv_heads, dim=-3)
        if not isinstance(dropout_p, (int, float)) or isinstance(dropout_p, bool) or not 0 <= dropout_p <= 1:
            raise ArgumentError(f"{op}: dropout_p must be in [0, 1], got {dropout_p!r}")
        calc = compute_dtype(self.dtype) if dtypes.is_float(self.dtype) else dtypes.default_float
        s = 1 / math.sqrt(self.shape[-1]) if scale is None else scale
        qk = self.cast(calc).matmul(key.cast(calc).transpose(-1, -2)) * s
        L, S = qk.shape[-2:]
        if is_causal:
            if attn_mask is not None:
                raise RuntimeError(f"{op}: pass attn_mask or is_causal=True, not both")
            attn_mask = self.ones(L, S, dtype=dtypes.bool, device=self.device).tril()
        if attn_mask is not None:
            try:
                self._broadcast_shape(op, attn_mask.shape, qk.shape)
            except ValueError:
                raise ArgumentError(
                    f"{op}: attn_mask of shape {attn_mask.shape} does not broadcast to the scores' {qk.shape}"
                ) from None
            if dtypes.is_bool(attn_mask.dtype):
                qk = attn_mask.where(qk, -math.inf)
            else:
                qk = qk + attn_mask.cast(calc)
        out_dt = self.dtype if dtypes.is_float(self.dtype) else dtypes.default_float
        weights = qk.softmax(-1).cast(out_dt).dropout(dropout_p)
        return weights @ value.cast(out_dt)

    # *** initializers ***

    @classmethod
    def kaiming_uniform(cls, *shape: Any, a: float = 0.01, **kwargs: Any) -> Tensor:
        """Uniform in [-bound, bound], bound = sqrt(6 / ((1 + a^2) * fan_in)), fan_in = prod(shape[1:]) (He
        initialization for leaky_relu with slope `a`). kwargs: dtype, device.

        >>> Tensor.manual_seed(0); w = Tensor.kaiming_uniform(4, 6)
        >>> w.shape, bool((w.abs() <= 1.0).all())
        ((4, 6), True)
        """
        sizes = shape_arg(shape, "kaiming_uniform")
        bound = math.sqrt(3.0) * math.sqrt(2.0 / (1 + a**2)) / math.sqrt(_fan_in(sizes, "kaiming_uniform"))
        return cls.uniform(*sizes, low=-bound, high=bound, **kwargs)

    @classmethod
    def kaiming_normal(cls, *shape: Any, a: float = 0.01, **kwargs: Any) -> Tensor:
        """Normal with mean 0 and std sqrt(2 / ((1 + a^2) * fan_in)), fan_in = prod(shape[1:]).

        >>> Tensor.manual_seed(0); Tensor.kaiming_normal(3, 2, dtype="float16").dtype
        dtypes.float16
        """
        sizes = shape_arg(shape, "kaiming_normal")
        std = math.sqrt(2.0 / (1 + a**2)) / math.sqrt(_fan_in(sizes, "kaiming_normal"))
        return cls.normal(*sizes, mean=0.0, std=std, **kwargs)

    @classmethod
    def glorot_uniform(cls, *shape: Any, **kwargs: Any) -> Tensor:
        """Uniform in [-bound, bound], bound = sqrt(6 / (shape[0] + prod(shape[1:]))) (Xavier/Glorot).

        >>> Tensor.manual_seed(0); bool((Tensor.glorot_uniform(2, 4).abs() <= 1.0).all())
        True
        """
        sizes = shape_arg(shape, "glorot_uniform")
        fan_in = _fan_in(sizes, "glorot_uniform")
        bound = math.sqrt(6 / (sizes[0] + fan_in))
        return cls.uniform(*sizes, low=-bound, high=bound, **kwargs)

    @classmethod
    def scaled_uniform(cls, *shape: Any, **kwargs: Any) -> Tensor:
        """Uniform in [-1, 1) scaled by 1 / sqrt(numel) (tinygrad's scaled_uniform).

        >>> Tensor.manual_seed(0); bool((Tensor.scaled_uniform(4, 4).abs() <= 0.25).all())
        True
        """
        sizes = shape_arg(shape, "scaled_uniform")
        _fan_in(sizes, "scaled_uniform")
        return cls.uniform(*sizes, low=-1.0, high=1.0, **kwargs) * prod(sizes) ** -0.5

    @classmethod
    def randperm(cls, n: int, device: str | None = None, dtype: DType | str = dtypes.int32) -> Tensor:
        """A random permutation of 0, ..., n - 1 (the order that sorts n uniform random numbers).

        >>> Tensor.manual_seed(0); sorted(Tensor.randperm(5).tolist())
        [0, 1, 2, 3, 4]
        """
        n = int_arg(n, "randperm", "n")
        if n < 0:
            raise ArgumentError(f"randperm: n must be non-negative, got {n}")
        dt = tensor_dtype(dtype, "randperm")
        if dtypes.is_bool(dt) or (not dtypes.is_int(dt) and not dtypes.is_float(dt)):
            raise TypeError(f"randperm: dtype must be an integer or float dtype, got {dt!r}")
        return cls.rand(n, device=device).argsort().cast(dt)


@custom_gradient("max_unpool")
def _max_unpool_grad(g: Tensor, out: Tensor, x: Tensor, indices: Tensor) -> tuple[Tensor, None]:
    """For a flat unpooling (*lead, m) -> (*lead, total): each input's gradient is the output's gradient at its
    index, PyTorch's rule (a repeated index gives every input that wrote there the gradient)."""
    return (g.gather(-1, indices), None)
