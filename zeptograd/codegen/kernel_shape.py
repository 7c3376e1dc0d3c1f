"""The shape of a kernel as the heuristic sees it: its global reads, and which of its axes play a matmul's m and n
or a convolution's columns and output channels (`codegen/heuristic.py` plans the kernel from these).

>>> from zeptograd import Tensor
>>> from zeptograd.schedule.kernelize import create_schedule
>>> (item,), _ = create_schedule([(Tensor.empty(4, 8) @ Tensor.empty(8, 16)).uop], ["CPU"])
>>> sorted(r.nbytes for r in global_reads(item.ast))
[128, 512]
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from zeptograd.codegen.opt import address_stride, block_stride, output_axes
from zeptograd.dtype import DType, PtrDType
from zeptograd.uop.ops import Ops, UOp


@dataclass(frozen=True)
class Read:
    """A global read of the kernel: its address, the loops the address depends on, the bytes of its buffer."""

    address: UOp
    loops: frozenset[UOp]
    nbytes: int
    gate_loops: frozenset[UOp] | None  # the loops its gate depends on; None: not gated


def loops_of(x: UOp) -> frozenset[UOp]:
    """The loops (RANGEs) `x` depends on."""
    return frozenset(u for u in x.toposort() if u.op is Ops.RANGE)


def global_reads(ast: UOp) -> list[Read]:
    """The kernel's reads of global memory, in graph order."""
    out = []
    for u in ast.toposort():
        if u.op is Ops.LOAD and u.src[0].src[0].op is Ops.DEFINE_GLOBAL:
            index = u.src[0]
            address, ptr = index.src[1], index.src[0].dtype
            nbytes = ptr.size * ptr.base.itemsize if isinstance(ptr, PtrDType) else 0
            gate = loops_of(index.src[2]) if len(index.src) == 3 else None
            out.append(Read(address, loops_of(address), nbytes, gate))
    return out


def size_of(axes: list[UOp]) -> int:
    """The iterations of the loops `axes` nested."""
    return math.prod(r.src[0].arg for r in axes)


def accumulator_dtype(ast: UOp) -> DType:
    """The dtype the kernel's reduction accumulates in."""
    return next(u for u in ast.toposort() if u.op is Ops.REDUCE).dtype


def single_store(ast: UOp) -> UOp | None:
    """The kernel's memory STORE, when it has exactly one."""
    stores = [u for u in ast.toposort() if u.op is Ops.STORE and u.src[0].op is Ops.INDEX]
    return stores[0] if len(stores) == 1 else None


def store_index(ast: UOp) -> UOp | None:
    """The address of the kernel's memory STORE, when it has exactly one."""
    return store.src[0].src[1] if (store := single_store(ast)) is not None else None


def lanes_pay(x: Read, r: UOp) -> bool:
    """Do vector lanes along loop `r` pay for read `x`: it is contiguous along r, or reads every other element
    (two vector loads and a shuffle, see `devectorize`), or its gate ignores r (one check for all the lanes)?"""
    return address_stride(x.address, r) in (1, 2) or (x.gate_loops is not None and r not in x.gate_loops)


def matmul_axes(outs: list[UOp], reads: list[Read], out_index: UOp, by_output: bool = True) -> tuple[int, int] | None:
    """(m, n): output axes such that one read (B) ignores m and another (A) ignores n. Preferably n is contiguous
    in B (its lanes are one vector load) and in the output (its tile is stored a vector at a time); else n
    contiguous in B; else (where `by_output`) n contiguous in the output."""
    if len(outs) < 2 or len(reads) < 2:
        return None
    pairs = [(m, n) for n in range(len(outs)) for m in range(len(outs) - 1, -1, -1) if m != n]
    for in_output in (True, False):
        for m, n in pairs:
            rm, rn = outs[m], outs[n]
            if in_output and address_stride(out_index, rn) != 1:
                continue
            b_contiguous = any(rm not in x.loops and address_stride(x.address, rn) == 1 for x in reads)
            if b_contiguous and any(rn not in x.loops and rm in x.loops for x in reads):
                return m, n
    if not by_output:
        return None
    for m, n in pairs:
        rm, rn = outs[m], outs[n]
        if address_stride(out_index, rn) != 1:
            continue
        ignores_m = any(rm not in x.loops and rn in x.loops for x in reads)
        ignores_n = any(rn not in x.loops and rm in x.loops for x in reads)
        if ignores_m and ignores_n:
            return m, n
    return None


def conv_axes(
    outs: list[UOp], reds: list[UOp], reads: list[Read], vector: int, min_reduces: int = 2
) -> tuple[int, int] | None:
    """(m, n) of a convolution (several reduce axes; `min_reduces` 1: a 1x1 convolution, whose only one is its
    input channels) whose weight (the read depending on the fewest output axes) is contiguous along an output axis
    n of whole vectors, its output channels (a weight copied channels-last). m is the innermost output axis the
    weight ignores and the input reads (its columns): each input value is broadcast to a vector of channels,
    whatever the image's width and however the input lies. A read that no output axis indexes (a per-channel bias
    or scale of the input, fused into the kernel) is the same for every output: it is neither operand."""
    operands = [x for x in reads if any(r in x.loops for r in outs)]
    if len(reds) < min_reduces or len(operands) < 2:
        return None
    weight = min(operands, key=lambda x: (sum(r in x.loops for r in outs), x.nbytes))
    n = next((i for i, r in enumerate(outs) if _contiguous_in_panels(weight.address, r, vector)), None)
    if n is None or outs[n].src[0].arg % vector:
        return None
    rn = outs[n]
    for m in range(len(outs) - 1, -1, -1):
        rm = outs[m]
        if m != n and rm not in weight.loops and any(rn not in x.loops and rm in x.loops for x in reads):
            return m, n
    return None


def _contiguous_in_panels(address: UOp, r: UOp, vector: int) -> bool:
    """Is `address` contiguous along loop `r`, or within panels of two vectors or one (a weight the layout pass
    stored in panels)?"""
    if address_stride(address, r) == 1:
        return True
    return any(block_stride(address, r, b) == 1 for b in (2 * vector, vector))


def dot_axes(outs: list[UOp], reds: list[UOp], reads: list[Read]) -> tuple[int, int] | None:
    """(m, n) of a matmul whose operands are both contiguous along the last reduce axis and neither along an
    output axis (x @ w.T with w stored (out, in)): A ignores n, B ignores m."""
    if len(outs) < 2 or len(reads) < 2 or any(address_stride(x.address, r) == 1 for x in reads for r in outs):
        return None
    along_k = [x for x in reads if address_stride(x.address, reds[-1]) == 1]
    for m in range(len(outs)):
        for n in range(len(outs)):
            rm, rn = outs[m], outs[n]
            a = any(rn not in x.loops and rm in x.loops for x in along_k)
            if m != n and a and any(rm not in x.loops and rn in x.loops for x in along_k):
                return m, n
    return None


def _axis_ignored_by(
    outs: list[UOp], rm: UOp, rn: UOp, ignoring: list[Read], reading: list[Read] | None = None, even: bool = True
) -> UOp | None:
    """The innermost output axis besides m and n (of even size where `even`) that every read of `ignoring` (at
    least one) ignores and, where `reading` is given, one of its reads depends on: upcasting it uses each value
    the ignoring operand loads for more FMAs. The innermost: its rows are nearest in memory."""
    if not ignoring:
        return None
    for r in reversed(outs):
        if r is rm or r is rn or (even and r.src[0].arg % 2):
            continue
        if all(r not in x.loops for x in ignoring) and (reading is None or any(r in x.loops for x in reading)):
            return r
    return None


def second_row_axis(outs: list[UOp], reads: list[Read], rm: UOp, rn: UOp) -> UOp | None:
    """An axis that A (the operand ignoring n) ignores too, a convolution's output rows: it halves the broadcasts
    an FMA."""
    return _axis_ignored_by(outs, rm, rn, [x for x in reads if rn not in x.loops and rm in x.loops])


def weight_row_axis(outs: list[UOp], reads: list[Read], rm: UOp, rn: UOp, even: bool = True) -> UOp | None:
    """An axis that B (the operand ignoring m, a weight) ignores too and A reads, a convolution's output rows or
    images: each vector of B loaded serves more FMAs; of even size unless not `even`."""
    b_reads = [x for x in reads if rm not in x.loops and rn in x.loops]
    a_reads = [x for x in reads if rn not in x.loops and rm in x.loops]
    return _axis_ignored_by(outs, rm, rn, b_reads, a_reads, even)


def contiguous_reduce(reds: list[UOp], reads: list[Read], rn: UOp) -> int | None:
    """The reduce axis along which A (a read that ignores n) is contiguous, when it is not the innermost one."""
    for i, r in enumerate(reds[:-1]):
        if any(rn not in x.loops and address_stride(x.address, r) == 1 for x in reads):
            return i
    return None


def longest_reduce(reds: list[UOp]) -> int | None:
    """The longest reduce axis when it is not the innermost one: a convolution reading its NCHW input in place
    loops over its input channels inside the taps, so the padding's gates are computed outside that loop."""
    longest = max(range(len(reds)), key=lambda i: (reds[i].src[0].arg, -i))
    return longest if reds[longest].src[0].arg > reds[-1].src[0].arg else None


def narrow_lanes(ast: UOp) -> int:
    """How many of the kernel's stored values make 4 bytes (1 for 4-byte values and wider, or several stores)."""
    store = single_store(ast)
    if store is None or not output_axes(ast) or not isinstance(ptr := store.src[0].dtype, PtrDType):
        return 1
    return max(1, 4 // ptr.base.itemsize)
