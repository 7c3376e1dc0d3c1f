"""Kernel optimizations as data: an `Opt(op, axis, amount)` rewrites the loops of a kernel AST, and a kernel's
plan is a list of them, applied in order. The applied plan is recorded on the kernel: its SINK carries a
`KernelInfo(name, opts)`.

Axes are numbered in loop order at the time an opt is applied: the output axes (the loops of the END)
first, then the reduce axes (the loops of the REDUCEs). UPCAST and THREAD take an output axis; UNROLL takes a
reduce axis counted from the first reduce axis (`Opt(UNROLL, 0, 4)` unrolls the first one); PADTO and SWAP
take any axis in the full numbering (SWAP: two of one kind).

- `UPCAST(axis, n)`: the output loop `r` over N becomes `r' * n + u` with a loop `r'` over N/n and a lane
  `u` (UNROLL) over n: `expand` turns every value that depends on `u` into a vector of n lanes, so the
  kernel computes a register tile per iteration. `n = 0` upcasts the whole axis.
- `UNROLL(axis, n)`: the same for a reduce axis: the accumulator becomes a vector of n partial results,
  reduced across lanes after the loop.
- `THREAD(axis, n)`: the output loop is split into n contiguous chunks, which the cores take in turn (a call of the
  kernel a chunk): `r = chunk * N/n + r'`
  with `chunk` a SPECIAL index that the runtime sets for each call.
- `SWAP(axis, other)`: exchanges the nesting order of two output loops, or of two reduce loops.
- `PADTO(axis, n)`: the loop runs to the next multiple of n; the extra iterations store nothing and add the
  reduction's identity, so a tile of n divides the axis. Their reads are gated where they could leave the buffer,
  except an output loop's reads inside a reduction that walk it with a stride: those recompute the last real
  iteration (`_gate_reads`).
- `LOCAL(axis, n)` (GPU-style devices): the output loop over N becomes `r' * n + lidx` with `lidx` a SPECIAL,
  the work-item's index in its work-group (n work-items a group along that launch dimension; r' becomes a
  work-group index in codegen/gpudims.py).
- `GROUP(axis, n)` / `GROUPTOP(axis, n)` (GPU-style devices): the reduce loop over N is shared by the n
  work-items of a group: each reduces its part (GROUP: every n-th element from its own, `r' * n + lidx`;
  GROUPTOP: a contiguous run of N/n, `lidx * N/n + r'`) into a partial result, stores it in local memory
  (DEFINE_LOCAL), waits at a BARRIER, and reduces the n partial results; work-item 0 stores the output.
- `TC(axis, amount)` (a device with tensor cores, codegen/tensor_cores.py): a matmul-shaped reduction (a sum over
  products of two operands of the tensor core's input dtype, accumulated in its output dtype) becomes one WMMA a
  step of K per warp. `axis` picks the pair of output axes (m, n) among those that fit, `amount` the device's
  tensor core. The warp's lanes (a warpgroup's 128 for Hopper's wgmma) become the work-item index `lidx0` (so TC
  comes first, before other GPU opts); m and n become loops over blocks of M and N, k a loop over steps of K, and
  each lane's share of an output block a lane index (UNROLL) over its C elements: `expand` makes the WMMA's D one
  vector, and the code after the reduction (a cast, a bias, the store) vector code over it. Each operand's elements
  are the operand read at the positions the tensor core's layout gives (the lane's A elements, its B elements). An
  UPCAST after TC gives each warp several output blocks (one WMMA and accumulator each, sharing the loaded
  fragments); UNROLL and GROUP after TC are refused.

The GPU opts are refused unless the caller says the device has work-groups (`max_local`, the most work-items a
group may have): the CPU refuses them.

An opt that does not fit the kernel raises `OptError` naming the opt, the axis and why; it never gives a
wrong kernel.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from zeptograd.codegen.closedform import scatters
from zeptograd.codegen.tensor_cores import TensorCore
from zeptograd.dtype import AddrSpace, PtrDType, dtypes
from zeptograd.uop.alu import identity_element
from zeptograd.uop.kernel_info import KernelInfo, Opt, OptOps
from zeptograd.uop.ops import Ops, UOp
from zeptograd.uop.rewrite import graph_rewrite
from zeptograd.uop.symbolic import symbolic

if TYPE_CHECKING:
    from zeptograd.renderer import Renderer


class OptError(ValueError):
    """An opt that does not fit the kernel it is applied to."""


def ast_name(ast: UOp) -> str:
    """The name of a kernel AST, optimized or not."""
    arg = ast.arg
    if isinstance(arg, KernelInfo):
        return arg.name
    return arg if isinstance(arg, str) and arg else "kernel"


def applied_opts(ast: UOp) -> tuple[Opt, ...]:
    """The opts recorded on a kernel AST's SINK (none for an unoptimized kernel)."""
    return ast.arg.opts if isinstance(ast.arg, KernelInfo) else ()


def output_axes(ast: UOp) -> list[UOp]:
    """The output loops of a kernel AST, in loop order."""
    loops = [r for u in ast.src if u.op is Ops.END for r in u.src[1:]]
    return sorted(dict.fromkeys(loops), key=lambda r: r.arg)


def reduce_axes(ast: UOp) -> list[UOp]:
    """The reduce loops of a kernel AST, in loop order."""
    loops = [r for u in ast.toposort() if u.op is Ops.REDUCE for r in u.src[1:] if r.op is Ops.RANGE]
    return sorted(dict.fromkeys(loops), key=lambda r: r.arg)


def _size(r: UOp) -> int:
    if r.src[0].op is not Ops.CONST:
        raise OptError(f"loop {r.arg} has a symbolic size: only constant loops are optimized")
    return r.src[0].arg


def _next_axis(ast: UOp) -> int:
    ids = [u.arg for u in ast.toposort() if u.op in (Ops.RANGE, Ops.UNROLL)]
    return max(ids, default=-1) + 1


def _rebuild(ast: UOp, old: UOp, expr: UOp, loops: tuple[UOp, ...], lanes: tuple[UOp, ...] = ()) -> UOp:
    """`ast` with the loop `old` replaced: reads of its index become `expr`; in the END or REDUCE that closes it,
    it becomes `loops` (the loops that now run in its place) and, for a REDUCE, also `lanes` (unrolled lanes
    it now reduces over)."""
    done: dict[UOp, UOp] = {old: expr}
    for u in ast.toposort():
        if u is old:
            continue
        if u.op in (Ops.END, Ops.REDUCE) and any(s is old for s in u.src[1:]):
            ranges: list[UOp] = []
            for r in u.src[1:]:
                ranges.extend((*loops, *(lanes if u.op is Ops.REDUCE else ())) if r is old else (done[r],))
            value = done[u.src[0]]
            if u.op is Ops.END and not any(r.op is Ops.RANGE for r in ranges):
                done[u] = value  # the last loop is gone: the store runs once
            else:
                done[u] = u.replace(src=(value, *ranges))
            continue
        src = tuple(done[s] for s in u.src)
        done[u] = u if all(a is b for a, b in zip(src, u.src)) else u.replace(src=src)
    return done[ast]


def _index(value: int) -> UOp:
    return UOp.const(dtypes.index, value)


def _split(ast: UOp, r: UOp, amount: int, reduce: bool, axis_id: int) -> UOp:
    """r over N -> r' * amount + lane, with r' over N/amount and lane an UNROLL over amount."""
    size = _size(r)
    lane = UOp(Ops.UNROLL, dtypes.index, (_index(amount),), axis_id)
    if size == amount:
        return _rebuild(ast, r, lane, (), (lane,) if reduce else ())
    outer = UOp.range(size // amount, r.arg)
    return _rebuild(ast, r, outer * amount + lane, (outer,), (lane,) if reduce else ())


def _thread(ast: UOp, r: UOp, amount: int) -> UOp:
    size = _size(r)
    chunk = UOp(Ops.SPECIAL, dtypes.index, (_index(amount),), "chunk")
    if size == amount:
        return _rebuild(ast, r, chunk, ())
    inner = UOp.range(size // amount, r.arg)
    return _rebuild(ast, r, chunk * (size // amount) + inner, (inner,))


def _in_bounds(index: UOp) -> bool:
    """Does INDEX(buffer, i) stay inside its buffer for every value the loops can give i?"""
    buf = index.src[0].dtype
    return isinstance(buf, PtrDType) and index.src[1].vmin >= 0 and index.src[1].vmax < buf.size


def address_stride(idx: UOp, r: UOp) -> int | None:
    """How far the address `idx` moves when loop `r` counts up by one (None when it is not a constant)."""
    if r not in set(idx.toposort()):
        return 0
    step = (idx.substitute({r: r + 1}) - idx).simplify()
    return step.arg if step.op is Ops.CONST else None


def block_stride(idx: UOp, r: UOp, block: int) -> int | None:
    """How far the address `idx` moves when loop `r` counts up by one inside an aligned block of `block` of its
    iterations (None when that is not a constant, or `block` does not divide the loop): 1 for a layout stored in
    panels, contiguous within each (Tensor.matmul's B, a convolution's weight), where `address_stride` sees the jump
    from one panel to the next.

    >>> r = UOp.range(32, 0)
    >>> address_stride(r // 16 * 100 + r % 16, r), block_stride(r // 16 * 100 + r % 16, r, 16)
    (None, 1)
    """
    if r.src[0].op is not Ops.CONST or r.src[0].arg % block:
        return None
    # fresh loops for the blocks and the iterations inside one (axis ids no kernel uses)
    outer, inner = UOp.range(r.src[0].arg // block, -1), UOp.range(block, -2)
    return address_stride(idx.substitute({r: outer * block + inner}).simplify(), inner)


def _gate_reads(ast: UOp, loop: UOp, valid: UOp, size: int | None = None) -> UOp:
    """Every global write whose address depends on `loop` gated by `valid` as well, and every such read that could
    leave its buffer. A read that stays inside needs no gate: the padded iterations' values are never stored
    (their stores are gated) and never reduced (a padded reduce iteration adds the identity instead).

    Padding an output loop of `size` iterations (`size` given), a read inside a reduction whose address does not
    walk `loop` contiguously reads at `min(loop, size - 1)` instead: a padded iteration recomputes the last real
    one, and its store is gated. A gate there would be tested at every step of the reduction (gcc: a test and a
    branch a load); the clamp is computed once an output. A read contiguous along `loop` keeps its gate: where the
    loop becomes vector lanes, the gate is a masked vector load, and a clamp would break the lanes' run of
    addresses. (bench/ops.py's convolution on AVX2, its rows padded 56 -> 57 for a tile of 3 rows: gated, the
    tile's third row of broadcasts tested a load each; clamped, none.)"""
    stored = {u.src[0] for u in ast.toposort() if u.op is Ops.STORE}
    reduced = {s for u in ast.toposort() if u.op is Ops.REDUCE for s in u.src[1:]}
    clamp = {loop: loop.minimum(size - 1)} if size is not None else {}
    done: dict[UOp, UOp] = {}
    for u in ast.toposort():
        src = tuple(done[s] for s in u.src)
        new = u if all(a is b for a, b in zip(src, u.src)) else u.replace(src=src)
        if u.op is Ops.INDEX and u not in stored and _in_bounds(new):
            pass
        elif (
            clamp
            and u.op is Ops.INDEX
            and u not in stored
            and u.src[0].op is Ops.DEFINE_GLOBAL
            and reduced & set(new.src[1].toposort())
            and address_stride(new.src[1], loop) != 1
        ):
            new = new.replace(src=(new.src[0], *(s.substitute(clamp) for s in new.src[1:])))
        elif u.op is Ops.INDEX and u.src[0].op is Ops.DEFINE_GLOBAL and loop in set(u.src[1].toposort()):
            gate = valid if len(new.src) == 2 else new.src[2] & valid
            new = new.src[0].index(new.src[1], gate)
        elif u.op is Ops.LOAD and len(new.src) == 1 and len(new.src[0].src) == 3:
            new = new.replace(src=(new.src[0], UOp.const(new.dtype, 0)))
        done[u] = new
    return done[ast]


def _padto(ast: UOp, r: UOp, amount: int, reduce: bool) -> UOp:
    size = _size(r)
    padded = -(-size // amount) * amount
    if padded == size:
        return ast
    bigger = UOp.range(padded, r.arg)
    valid = bigger < size
    ast = _rebuild(ast, r, bigger, (bigger,))
    if reduce:
        # the padded iterations add the reduction's identity
        replace = {}
        for u in ast.toposort():
            if u.op is Ops.REDUCE and any(s is bigger for s in u.src[1:]):
                replace[u] = u.replace(src=(valid.where(u.src[0], identity_element(u.arg, u.dtype)), *u.src[1:]))
        ast = ast.substitute(replace)
        return _gate_reads(ast, bigger, valid)
    return _gate_reads(ast, bigger, valid, size)


def _fail(opt: Opt, why: str) -> OptError:
    return OptError(f"{opt}: {why}")


def _local_ids(ast: UOp) -> list[UOp]:
    return [u for u in ast.toposort() if u.op is Ops.SPECIAL and u.arg.startswith("lidx")]


def _local(ast: UOp, r: UOp, amount: int) -> UOp:
    """r over N -> r' * amount + lidx, with lidx a work-item's index in its group."""
    size = _size(r)
    lidx = UOp(Ops.SPECIAL, dtypes.index, (_index(amount),), f"lidx{len(_local_ids(ast))}")
    if size == amount:
        return _rebuild(ast, r, lidx, ())
    outer = UOp.range(size // amount, r.arg)
    return _rebuild(ast, r, outer * amount + lidx, (outer,))


def _group(ast: UOp, opt: Opt, r: UOp, amount: int) -> UOp:
    """The reduction over r shared by `amount` work-items: partial results through local memory (module docstring)."""
    size = _size(r)
    reductions = [u for u in ast.toposort() if u.op is Ops.REDUCE and any(s is r for s in u.src[1:])]
    if len(reductions) != 1:
        raise _fail(opt, f"the axis is reduced by {len(reductions)} reductions; GROUP shares exactly one")
    red = reductions[0]
    if len(output_axes(ast)) > 3:
        # the output loops become the 3 work-group dimensions; a loop left around local memory would need a barrier
        raise _fail(opt, "GROUP needs at most 3 output axes (one a work-group dimension)")
    lidx = UOp(Ops.SPECIAL, dtypes.index, (_index(amount),), f"lidx{len(_local_ids(ast))}")
    loops: tuple[UOp, ...] = ()
    if size == amount:
        expr = lidx
    else:
        outer = UOp.range(size // amount, r.arg)
        loops = (outer,)
        expr = lidx * (size // amount) + outer if opt.op is OptOps.GROUPTOP else outer * amount + lidx
    value = red.src[0].substitute({r: expr})
    kept = tuple(s for s in red.src[1:] if s is not r) + loops
    if any(u.op is Ops.UNROLL and all(u is not k for k in kept) for u in value.toposort()):
        raise _fail(opt, "the reduced value has upcast output lanes; GROUP before UPCAST")
    partial = UOp(Ops.REDUCE, red.dtype, (value, *kept), red.arg) if kept else value
    ids = [u.arg for u in ast.toposort() if u.op is Ops.DEFINE_LOCAL]
    # the group's other work-items (LOCAL axes) reduce other outputs: each its own row of `amount` partial results
    row: UOp = _index(0)
    rows = 1
    for other in _local_ids(ast):
        row = row * other.src[0].arg + other
        rows *= other.src[0].arg
    local = UOp(Ops.DEFINE_LOCAL, red.dtype.ptr(amount * rows, AddrSpace.LOCAL), (), max(ids, default=-1) + 1)
    barrier = UOp(Ops.BARRIER, dtypes.void, (local.index(row * amount + lidx).store(partial),))
    across = UOp.range(amount, _next_axis(ast))
    final = UOp(Ops.REDUCE, red.dtype, (local.after(barrier).index(row * amount + across).load(), across), red.arg)
    ast = ast.substitute({red: final})
    # every work-item of the group has the result; the first stores it
    first = lidx.eq(0)
    gated: dict[UOp, UOp] = {}
    for u in ast.toposort():
        if u.op is Ops.STORE and u.src[0].op is Ops.INDEX and u.src[0].src[0].op is Ops.DEFINE_GLOBAL:
            index = u.src[0]
            gate = first if len(index.src) == 2 else index.src[2] & first
            gated[index] = index.src[0].index(index.src[1], gate)
    return ast.substitute(gated)


def _bfloat16_bits(u: UOp) -> UOp | None:
    """x where `u` is bfloat16 bits x widened to float32 (narrowfloat.py: `bitcast(cast(x, uint32) << 16)`)."""
    if u.op is not Ops.BITCAST or u.dtype is not dtypes.float32 or u.src[0].op is not Ops.SHL:
        return None
    wide, shift = u.src[0].src
    if shift.op is not Ops.CONST or shift.arg != 16 or wide.op is not Ops.CAST:
        return None
    return wide.src[0] if wide.src[0].dtype is dtypes.uint16 else None


def _operands(value: UOp, tc: TensorCore) -> tuple[UOp, UOp] | None:
    """The two factors of a reduced product that a tensor core computes: `cast(x * y)` or `cast(x) * cast(y)` with
    x and y of its input dtype, the product in its output dtype; for bfloat16, the product of x's and y's bits
    widened to float32."""
    if value.dtype is not tc.dtype_out:
        return None
    if tc.dtype_in is dtypes.bfloat16:
        if value.op is not Ops.MUL:
            return None
        x, y = (_bfloat16_bits(s) for s in value.src)
        return (x, y) if x is not None and y is not None else None
    if value.op is Ops.CAST and value.src[0].op is Ops.MUL:
        x, y = value.src[0].src
        return (x, y) if x.dtype is tc.dtype_in and y.dtype is tc.dtype_in else None
    if value.op is Ops.MUL and all(s.op is Ops.CAST and s.src[0].dtype is tc.dtype_in for s in value.src):
        return value.src[0].src[0], value.src[1].src[0]
    return None


def _tensor_core(ast: UOp, opt: Opt, tcs: tuple[TensorCore, ...], max_local: int) -> UOp:
    """The kernel's matmul-shaped reduction as WMMA steps (see TC in the module docstring)."""
    if not 0 <= opt.amount < len(tcs):
        raise _fail(opt, f"the device has {len(tcs)} tensor cores, no number {opt.amount}")
    tc = tcs[opt.amount]
    if max_local < tc.threads:
        raise _fail(opt, f"a warp of {tc.threads} threads needs work-groups of that many")
    if any(u.op in (Ops.UNROLL, Ops.SPECIAL, Ops.DEFINE_LOCAL) for u in ast.toposort()):
        raise _fail(opt, "TC comes first: the kernel has upcast, unrolled or work-group axes already")
    reductions = [u for u in ast.toposort() if u.op is Ops.REDUCE]
    if len(reductions) != 1 or reductions[0].arg is not Ops.ADD:
        raise _fail(opt, "TC needs a kernel with one sum (REDUCE ADD)")
    red = reductions[0]
    operands = _operands(red.src[0], tc)
    if operands is None:
        what = f"{tc.dtype_in!r} inputs summed in {tc.dtype_out!r}"
        raise _fail(opt, f"the reduction is not a sum of products of two operands of {what}")
    k = max(red.src[1:], key=lambda r: r.arg)  # the innermost reduce loop
    outs = output_axes(ast)
    # (A, B, m, n): m an output axis only A reads, n one only B reads; either factor may be A. The pairs whose n is
    # the innermost output axis first: a lane's C elements are then neighbours in the output
    pairs = []
    for x, y in (operands, operands[::-1]):
        x_loops, y_loops = set(x.toposort()), set(y.toposort())
        if k in x_loops and k in y_loops:
            pairs += [(x, y, m, n) for m in outs if m in x_loops - y_loops for n in outs if n in y_loops - x_loops]
    pairs.sort(key=lambda p: p[3] is not outs[-1])
    if not pairs:
        raise _fail(opt, "the kernel is not matmul-shaped (an output axis only A reads, one only B reads, k both)")
    if not 0 <= opt.axis < len(pairs):
        raise _fail(opt, f"axis {opt.axis} out of range: the kernel has {len(pairs)} (m, n) pairs")
    x, y, m, n = pairs[opt.axis]
    (bm, bn, bk), sizes = tc.dims, (_size(m), _size(n), _size(k))
    if sizes[0] % bm or sizes[1] % bn or sizes[2] % bk:
        raise _fail(opt, f"M, N, K = {sizes} are not multiples of the tensor core's {tc.dims} (pad with PADTO first)")
    lane = UOp(Ops.SPECIAL, dtypes.index, (_index(tc.threads),), "lidx0")
    element = UOp(Ops.UNROLL, dtypes.index, (_index(tc.elements[2]),), _next_axis(ast))

    def block(r: UOp, size: int, width: int) -> tuple[UOp, tuple[UOp, ...]]:
        """The loop over blocks of `width` along r (none when one block covers it) and where a block starts."""
        if size == width:
            return _index(0), ()
        outer = UOp.range(size // width, r.arg)
        return outer * width, (outer,)

    (m0, m_loop), (n0, n_loop), (k0, k_loop) = block(m, sizes[0], bm), block(n, sizes[1], bn), block(k, sizes[2], bk)
    a_lanes, b_lanes = [], []
    for i in range(tc.elements[0]):
        row, col = tc.a(lane, i)
        a_lanes.append(x.substitute({m: m0 + row, k: k0 + col}))
    for i in range(tc.elements[1]):
        row, col = tc.b(lane, i)
        b_lanes.append(y.substitute({k: k0 + row, n: n0 + col}))
    a = UOp(Ops.VECTORIZE, tc.operand_dtype.vec(len(a_lanes)), tuple(a_lanes))
    b = UOp(Ops.VECTORIZE, tc.operand_dtype.vec(len(b_lanes)), tuple(b_lanes))
    wmma = UOp(Ops.WMMA, tc.dtype_out, (a, b, UOp.const(tc.dtype_out, 0), element), tc)
    kept = tuple(s for s in red.src[1:] if s is not k) + k_loop
    ast = ast.substitute({red: UOp(Ops.REDUCE, red.dtype, (wmma, *kept), Ops.ADD) if kept else wmma})
    row, col = tc.c(lane, element)
    ast = _rebuild(ast, m, m0 + row, m_loop)
    return _rebuild(ast, n, n0 + col, n_loop)


def apply_opt(ast: UOp, opt: Opt, max_local: int = 0, tensor_cores: tuple[TensorCore, ...] = ()) -> UOp:
    """`ast` with one more opt applied (its SINK records it); raises OptError when the opt does not fit. `max_local`:
    the most work-items a work-group may have on the device (0: no work-groups, the GPU opts are refused);
    `tensor_cores`: the device's (codegen/tensor_cores.py; none: TC is refused)."""
    if not isinstance(opt, Opt):
        raise TypeError(f"an opt is an Opt(op, axis, amount), got {opt!r}")
    outs, reds = output_axes(ast), reduce_axes(ast)
    if opt.op is OptOps.TC:
        if not tensor_cores:
            raise _fail(opt, "the device has no tensor cores")
        new = graph_rewrite(_tensor_core(ast, opt, tensor_cores, max_local), symbolic, name="simplify after opt")
        return new.replace(arg=KernelInfo(ast_name(ast), applied_opts(ast) + (opt,)))
    if opt.op in (OptOps.UNROLL, OptOps.GROUP, OptOps.GROUPTOP) and any(u.op is Ops.WMMA for u in ast.toposort()):
        raise _fail(opt, f"{opt.op.name} after TC: the tensor core sums along k itself")
    gpu = opt.op in (OptOps.LOCAL, OptOps.GROUP, OptOps.GROUPTOP)
    if gpu and max_local <= 0:
        raise _fail(opt, f"{opt.op.name} needs a GPU-style device; the CPU does not have it")
    if opt.op in (OptOps.UPCAST, OptOps.THREAD, OptOps.LOCAL) and any(u.op is Ops.DEFINE_LOCAL for u in ast.toposort()):
        raise _fail(opt, f"{opt.op.name} after GROUP: the partial results in local memory have one lane a work-item")
    if opt.op is OptOps.THREAD and max_local > 0:
        raise _fail(opt, "THREAD splits a kernel across CPU cores; a GPU-style device has work-groups (LOCAL)")
    full = opt.op in (OptOps.PADTO, OptOps.SWAP)
    grouped = opt.op in (OptOps.UNROLL, OptOps.GROUP, OptOps.GROUPTOP)
    axes = reds if grouped else outs + reds if full else outs
    kind = "reduce" if grouped else "" if full else "output"
    if not isinstance(opt.axis, int) or not 0 <= opt.axis < len(axes):
        raise _fail(opt, f"axis {opt.axis} out of range: the kernel has {len(axes)} {kind} axes".replace("  ", " "))
    r = axes[opt.axis]
    size = _size(r)
    if opt.op is OptOps.SWAP:
        kind_axes = outs if opt.axis < len(outs) else reds
        first = 0 if opt.axis < len(outs) else len(outs)
        if not first <= opt.amount < first + len(kind_axes) or opt.amount == opt.axis:
            what = "output" if first == 0 else "reduce"
            raise _fail(opt, f"SWAP needs another {what} axis, got {opt.amount} ({what} axes: {first}..)")
        other = (outs + reds)[opt.amount]
        loops_of = [{s.arg for s in u.src[1:]} for u in ast.toposort() if u.op is Ops.REDUCE]
        if first and not any(r.arg in loops and other.arg in loops for loops in loops_of):
            # two reductions' loops: each REDUCE's loops nest inside its own, so neither can move into the other
            raise _fail(opt, f"SWAP of reduce axes {opt.axis} and {opt.amount}: they belong to different reductions")
        a, b = r.replace(arg=-1 - r.arg), other.replace(arg=-1 - other.arg)
        new = ast.substitute({r: a, other: b})
        new = new.substitute({a: a.replace(arg=other.arg), b: b.replace(arg=r.arg)})
    else:
        amount = size if opt.amount == 0 and opt.op in (OptOps.UPCAST, OptOps.UNROLL) else opt.amount
        if not isinstance(amount, int) or amount < 1:
            raise _fail(opt, f"the amount must be a positive int, got {opt.amount!r}")
        if opt.op is OptOps.PADTO:
            new = _padto(ast, r, amount, opt.axis >= len(outs))
        else:
            if size % amount != 0:
                raise _fail(opt, f"{amount} does not divide the axis size {size} (pad it first with PADTO)")
            if gpu:
                ids = _local_ids(ast)
                if len(ids) >= 3:
                    raise _fail(opt, "the kernel has 3 work-group dimensions already")
                if math.prod(u.src[0].arg for u in ids) * amount > max_local:
                    raise _fail(opt, f"a work-group of more than {max_local} work-items")
            if opt.op is OptOps.LOCAL:
                new = _local(ast, r, amount)
            elif gpu:
                new = _group(ast, opt, r, amount)
            elif opt.op is OptOps.THREAD:
                if any(u.op is Ops.SPECIAL for u in ast.toposort()):
                    raise _fail(opt, "the kernel is split across threads already")
                new = _thread(ast, r, amount)
            else:
                if amount > 256:
                    raise _fail(opt, f"{amount} lanes is too many for registers (at most 256)")
                new = _split(ast, r, amount, opt.op is OptOps.UNROLL, _next_axis(ast))
    new = graph_rewrite(new, symbolic, name="simplify after opt")
    info = KernelInfo(ast_name(ast), applied_opts(ast) + (opt,))
    return new.replace(arg=info)


def max_local(renderer: Renderer | None) -> int:
    """The most work-items a work-group may have on `renderer`'s device (0: no work-groups, a CPU; None, no device,
    has none either).

    >>> from zeptograd.renderer.opencl import OpenCLRenderer
    >>> max_local(OpenCLRenderer()), max_local(None)
    (256, 0)
    """
    if renderer is None:
        return 0
    return renderer.max_local_size if renderer.has_local else 0


def apply_opts(
    ast: UOp, opts: list[Opt] | tuple[Opt, ...], max_local: int = 0, tensor_cores: tuple[TensorCore, ...] = ()
) -> UOp:
    """`ast` with `opts` applied in order; the SINK records them (`max_local`, `tensor_cores`: see apply_opt).

    >>> from zeptograd.schedule.kernelize import create_schedule
    >>> (item,), _ = create_schedule([(Tensor.ones(4, 8).contiguous().realize() * 2).uop], ["CPU"])
    >>> apply_opts(item.ast, [Opt(OptOps.UPCAST, 1, 8)]).arg
    KernelInfo('E_4_8', (Opt(OptOps.UPCAST, 1, 8),))
    """
    if opts and scatters(ast):
        raise OptError(f"{opts[0]}: a scatter (a store through a loaded index) runs its loops in order, with no plan")
    for opt in opts:
        ast = apply_opt(ast, opt, max_local, tensor_cores)
    return ast
