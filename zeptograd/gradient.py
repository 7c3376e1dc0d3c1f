"""Autograd: reverse-mode gradients on the tensor graph, as a table of rules.

`pm_gradient` has one rule per tensor-graph op: given `ctx`, the gradient flowing into node `ret`, it returns
the gradient of each of `ret`'s sources (None where none flows: integer sources, comparisons, DETACH).
`compute_gradient` walks the graph from the loss back to the targets and sums what reaches each node.
Gradients are ordinary lazy tensors, so a backward pass fuses and schedules like any other graph.

>>> x = Tensor([1.0, 2.0, 3.0])
>>> (x * x).sum().gradient(x)[0].tolist()
[2.0, 4.0, 6.0]

Every Tensor op is built from these primitives, so every op has a gradient. Composite math (exp, tanh,
erf...) computes its value with bit tricks and polynomial fits that a traced gradient would get wrong or
slowly; such an op wraps its value in `CUSTOM_GRAD(value, *inputs)` whose arg states the derivative
(`y = exp(x)` has gradient `g * y`), and the rule for CUSTOM_GRAD calls it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from zeptograd.dtype import dtypes
from zeptograd.uop.ops import GroupOp, Ops, UOp
from zeptograd.uop.pattern import PatternMatcher, UPat
from zeptograd.uop.shape import inverse_permutation

if TYPE_CHECKING:
    from zeptograd.tensor import Tensor

Grads = tuple["Tensor | None", ...]

# the stated gradients of composite ops, by name: CUSTOM_GRAD's arg is the name (so graphs stay hashable,
# comparable and printable); each takes (grad, out, *inputs) and returns a gradient (or None) per input
CUSTOM_GRADIENTS: dict[str, Callable[..., Grads]] = {}


def custom_gradient(name: str) -> Callable[[Callable[..., Grads]], Callable[..., Grads]]:
    """Register a stated gradient under `name`, for `Tensor._custom_grad(name, *inputs)`."""

    def register(fn: Callable[..., Grads]) -> Callable[..., Grads]:
        if name in CUSTOM_GRADIENTS:
            raise ValueError(f"custom gradient {name!r} is registered twice")
        CUSTOM_GRADIENTS[name] = fn
        return fn

    return register


def _t(u: UOp, like: Tensor) -> Tensor:
    """The tensor-graph node `u` as a Tensor on `like`'s device."""
    return type(like)(u, device=like.device)


def _reduced_axes(ret: UOp) -> tuple[int, ...]:
    return tuple(ret.arg[1])


def _max_grad(ctx: Tensor, ret: UOp) -> Grads:
    """max(a, b): the gradient goes to the larger; a tie splits it in halves (as torch.maximum)."""
    a, b = _t(ret.src[0], ctx), _t(ret.src[1], ctx)
    half = ctx * 0.5
    return (a > b).where(ctx, (a == b).where(half, 0.0)), (b > a).where(ctx, (a == b).where(half, 0.0))


def _reduce_grad(ctx: Tensor, ret: UOp) -> Grads:
    x, out = _t(ret.src[0], ctx), _t(ret, ctx)
    axes = _reduced_axes(ret)
    g = ctx.expand(x.shape)
    if ret.arg[0] is Ops.ADD:
        return (g,)
    if ret.arg[0] is Ops.MAX:
        # the maximum's gradient splits evenly between the elements that tie for it (torch's amax and max())
        hit = x == out.expand(x.shape)
        count = hit.cast(x.dtype).sum(axes, keepdim=True)
        return (hit.where(g / count.expand(x.shape), 0.0),)
    # product: d/dx_i = product of the others, exact when some x are 0 (one zero: only it gets a gradient)
    zero = x == 0
    nonzero_prod = _t(UOp(Ops.REDUCE_AXIS, x.dtype, (zero.where(1.0, x).uop,), ret.arg), ctx).expand(x.shape)
    zeros = zero.cast(x.dtype).sum(axes, keepdim=True).expand(x.shape)
    others = zero.where((zeros == 1).where(nonzero_prod, 0.0), (zeros == 0).where(nonzero_prod / x, 0.0))
    return (g * others,)


def _custom_grad(ctx: Tensor, ret: UOp) -> Grads:
    inputs = tuple(_t(s, ctx) for s in ret.src[1:])
    # the arg is the gradient's name, or (name, *parameters): a convolution's stride, dilation and padding
    name, params = (ret.arg, ()) if isinstance(ret.arg, str) else (ret.arg[0], ret.arg[1:])
    return (None, *CUSTOM_GRADIENTS[name](ctx, _t(ret, ctx), *inputs, *params))


def _copy_grad(ctx: Tensor, ret: UOp) -> Grads:
    from zeptograd.schedule.kernelize import device_of

    return (ctx.to(device_of(ret.src[0]) or ctx.device),)


def _none(ret: UOp) -> Grads:
    return (None,) * len(ret.src)


pm_gradient = PatternMatcher(
    [
        # d(a + b) = da + db
        (UPat(Ops.ADD), lambda ctx: (ctx, ctx), "a+b"),
        # d(a - b) = da - db
        (UPat(Ops.SUB), lambda ctx: (ctx, -ctx), "a-b"),
        # d(a * b) = b da + a db
        (UPat(Ops.MUL, name="ret"), lambda ctx, ret: (ctx * _t(ret.src[1], ctx), ctx * _t(ret.src[0], ctx)), "a*b"),
        # d(a / b) = da / b - (a / b) db / b
        (
            UPat(Ops.FDIV, name="ret"),
            lambda ctx, ret: (ctx / _t(ret.src[1], ctx), -ctx * _t(ret, ctx) / _t(ret.src[1], ctx)),
            "a/b",
        ),
        # d(-x) = -dx
        (UPat(Ops.NEG), lambda ctx: (-ctx,), "-x"),
        # d(1/x) = -dx / x^2
        (UPat(Ops.RECIPROCAL, name="ret"), lambda ctx, ret: (-ctx * _t(ret, ctx) * _t(ret, ctx),), "1/x"),
        # d(sqrt x) = dx / (2 sqrt x)
        (UPat(Ops.SQRT, name="ret"), lambda ctx, ret: (ctx / (_t(ret, ctx) * 2),), "sqrt x"),
        # d(2^x) = 2^x ln2 dx
        (UPat(Ops.EXP2, name="ret"), lambda ctx, ret: (ctx * _t(ret, ctx) * math.log(2),), "2^x"),
        (UPat(Ops.EXP, name="ret"), lambda ctx, ret: (ctx * _t(ret, ctx),), "e^x"),
        # d(tanh x) = (1 - tanh(x)^2) dx
        (UPat(Ops.TANH, name="ret"), lambda ctx, ret: (ctx * (1 - _t(ret, ctx) * _t(ret, ctx)),), "tanh x"),
        # d(log2 x) = dx / (x ln2)
        (UPat(Ops.LOG2, name="ret"), lambda ctx, ret: (ctx / (_t(ret.src[0], ctx) * math.log(2)),), "log2 x"),
        # d(sin x) = cos x dx
        (UPat(Ops.SIN, name="ret"), lambda ctx, ret: (ctx * _t(ret.src[0], ctx).cos(),), "sin x"),
        # d(cos x) = -sin x dx
        (UPat(Ops.COS, name="ret"), lambda ctx, ret: (-ctx * _t(ret.src[0], ctx).sin(),), "cos x"),
        # d(tan x) = (1 + tan(x)^2) dx
        (UPat(Ops.TAN, name="ret"), lambda ctx, ret: (ctx * (1 + _t(ret, ctx) * _t(ret, ctx)),), "tan x"),
        # trunc is a step function: its derivative is 0 wherever it has one
        (UPat(Ops.TRUNC, name="ret"), lambda ctx, ret: (ctx.zeros_like(),), "trunc x"),
        # d(max(a, b)) goes to the larger of a, b, halves on a tie
        (UPat(Ops.MAX, name="ret"), _max_grad, "max(a, b)"),
        # d(c ? a : b) = c ? da : 0, c ? 0 : db
        (
            UPat(Ops.WHERE, name="ret"),
            lambda ctx, ret: (None, _t(ret.src[0], ctx).where(ctx, 0.0), _t(ret.src[0], ctx).where(0.0, ctx)),
            "c ? a : b",
        ),
        # comparisons and integer ops have no gradient
        (UPat(GroupOp.Comparison | GroupOp.Bitwise | {Ops.IDIV, Ops.MOD, Ops.BITCAST}, name="ret"), _none, "none"),
        # a cast passes the gradient back in the source's dtype (none to an integer source)
        (UPat(Ops.CAST, name="ret"), lambda ctx, ret: (ctx.cast(ret.src[0].dtype),), "cast"),
        # movement ops move the gradient back: reshape back, permute by the inverse, sum what was expanded,
        # shrink what was padded, pad what was shrunk, flip again
        (UPat(Ops.RESHAPE, name="ret"), lambda ctx, ret: (ctx.reshape(ret.src[0].shape),), "reshape"),
        (UPat(Ops.PERMUTE, name="ret"), lambda ctx, ret: (ctx.permute(inverse_permutation(ret.arg)),), "permute"),
        (UPat(Ops.EXPAND, name="ret"), lambda ctx, ret: (_sum_to(ctx, ret.src[0].shape),), "expand"),
        (UPat(Ops.PAD, name="ret"), lambda ctx, ret: (_unpad(ctx, ret),), "pad"),
        (UPat(Ops.SHRINK, name="ret"), lambda ctx, ret: (_unshrink(ctx, ret),), "shrink"),
        (UPat(Ops.FLIP, name="ret"), lambda ctx, ret: (ctx.flip([i for i, f in enumerate(ret.arg) if f]),), "flip"),
        (UPat(Ops.REDUCE_AXIS, name="ret"), _reduce_grad, "reduce"),
        # what only orders or places a value passes its gradient through; DETACH stops it
        (UPat(Ops.CONTIGUOUS), lambda ctx: (ctx,), "contiguous"),
        (UPat(Ops.DETACH), lambda: (None,), "detach"),
        (UPat(Ops.COPY, name="ret"), _copy_grad, "copy"),
        # an assignment's value is what later reads see
        (UPat(Ops.STORE), lambda ctx: (None, ctx), "store"),
        (UPat(Ops.CUSTOM_GRAD, name="ret"), _custom_grad, "custom"),
    ]
)


def _movement_free(u: UOp) -> UOp:
    while u.op in (Ops.EXPAND, Ops.RESHAPE, Ops.PERMUTE):
        u = u.src[0]
    return u


def _index_pick(g: Tensor) -> bool:
    """Is `g` `where(a == b, v, 0)` with a and b integers (up to movement ops): an index compared with a position,
    the gradient of a gather or of a selection? Its sum over what was expanded is a pick or a scatter, which the
    codegen runs as a read or as one pass over the index (closedform.py) only when the sum is one stage."""
    u = g.uop
    if u.op is not Ops.WHERE or not dtypes.is_float(u.dtype) or u.dtype.itemsize < 4:
        return False
    cond, zero = _movement_free(u.src[0]), _movement_free(u.src[2])
    if cond.op is not Ops.CMPEQ or zero.op is not Ops.CONST or zero.arg != 0:
        return False
    return all(dtypes.is_int(x.dtype) and not dtypes.is_bool(x.dtype) for x in cond.src)


def _sum_to(g: Tensor, shape: tuple[int, ...]) -> Tensor:
    """The gradient `g` of an expand summed back to the expanded value's `shape`. A float sum of many elements adds
    in two stages, for precision; the gradient of a gather (or of a selection) sums an index pick, in one stage,
    so that it is a scatter (one pass over the picks, not one over the table per pick) in index order, as torch's
    index_add adds."""
    lead = g.ndim - len(shape)
    axes = (*range(lead), *(lead + i for i, (s, n) in enumerate(zip(shape, g.shape[lead:])) if s != n))
    if not axes:
        return g
    if _index_pick(g):
        return g._pick_sum(axes, keepdim=True).reshape(shape)
    return g.sum(axes, keepdim=True).reshape(shape)


def _unpad(g: Tensor, ret: UOp) -> Tensor:
    bounds = tuple((b, b + s) for (b, _), s in zip(ret.arg, ret.src[0].shape))
    if len(ret.src) > 1:  # symbolic starts: the shrink back starts that much later
        return g._new(UOp(Ops.SHRINK, g.dtype, (g.uop, *ret.src[1:]), bounds))
    return g.shrink(bounds)


def _unshrink(g: Tensor, ret: UOp) -> Tensor:
    pads = tuple((b, s - e) for (b, e), s in zip(ret.arg, ret.src[0].shape))
    if len(ret.src) > 1:  # symbolic starts: the pad back takes them too (more before, as much less after)
        return g._new(UOp(Ops.PAD, g.dtype, (g.uop, *ret.src[1:]), pads))
    return g.pad(pads)


def _on_path(root: UOp, targets: set[UOp]) -> tuple[list[UOp], set[UOp]]:
    """The graph of `root` (not entering DETACH), and the nodes in it from which some target is reachable."""
    order = root.toposort(gate=lambda u: u.op is not Ops.DETACH)
    reaches: set[UOp] = set()
    for u in order:
        if u in targets or any(s in reaches for s in u.src):
            reaches.add(u)
    return order, reaches


def compute_gradient(root: UOp, seed: Tensor, targets: list[UOp]) -> dict[UOp, Tensor]:
    """The gradient of graph `root` (scaled by `seed`, of root's shape) with respect to each target that lies in
    root's graph; a target that is in the graph but that no gradient reaches (through floor, say) gets zeros."""
    order, reaches = _on_path(root, set(targets))
    grads: dict[UOp, Tensor] = {root: seed}
    for u in reversed(order):
        if u not in grads or not any(s in reaches for s in u.src):
            continue
        local = pm_gradient.rewrite(u, ctx=grads[u])
        if local is None:
            raise RuntimeError(f"gradient: no gradient rule for {u.op.name}")
        for s, g in zip(u.src, local):
            if g is None or s not in reaches or not dtypes.is_float(s.dtype):
                continue
            if g.dtype is not s.dtype:
                g = g.cast(s.dtype)
            grads[s] = grads[s] + g if s in grads else g
    seen = set(order)
    zeros = {t: type(seed).zeros(t.shape, dtype=t.dtype, device=seed.device) for t in targets if t not in grads}
    return {t: grads[t] if t in grads else zeros[t] for t in targets if t in seen}
