"""The hand-written plan for a kernel: which opts `opt` applies when no BEAM search is asked for.

The rules, in order (each applied only where its amount divides the axis):

1. Matmul-shaped kernels whose operands are both contiguous along the reduce axis (`x @ w.T` with w stored
   (out, in), as nn.Linear keeps it): a tile of 4 x 4 outputs, each a vector accumulator along the reduce axis
   (UNROLL by one vector), summed across its lanes after the loop: 16 FMAs for 8 vector loads, and no copy of w.T.
2. Other matmul-shaped kernels (a sum over products where one operand, B, does not depend on an output axis `m`
   and the other, A, does not depend on an output axis `n`; `n` contiguous in B, else in the output): a
   register tile of vector accumulators, half the vector registers, so each loaded element is used several
   times from a register:
   - rows of `m` by two vectors of `n` where that divides `n`: 8 x 32 float32 with AVX-512 (16 accumulators of
     16 lanes), 6 x 16 with AVX2 (12 of 8: BLIS's Haswell tile; m padded up to a multiple of 6 where at most a
     sixteenth of it is padding, the padded rows' reads clamped; 1024: 16.0 -> 14.4 ms, 2048: 178 -> 153 ms, the
     kernel alone on the AMD EPYC), else 4 x 16; fewer rows where m is not a multiple of them: its largest divisor
     below (7 for 14);
   - with 32 vector registers, a single reduce axis and B contiguous along `n`: 8 rows by three vectors (8 x 48,
     24 accumulators), `n` padded up to a multiple of them (PADTO) where it is not one and an eighth of it at
     most is padding (a sixteenth where two vectors divide it);
   - else 4 x 2 x one vector, with a third output axis that the first operand ignores (a convolution's output
     rows: half the weight broadcasts of 8 x 8, 118 -> 125 GFLOP/s);
   - else 8 x one vector.
   Tensor.matmul stores a large right operand as panels of two vectors' width, so the lanes of `n` are one
   contiguous read. A large dense conv2d reads a channels-last copy of its weight (and its input in place on the
   CPU device, else a channels-last copy of it): its vectors are output channels (contiguous in the weight,
   `_conv_axes`) whatever the image's width, two of them by 8 (AVX-512) or 4 output columns; with 32 vector
   registers, where the weights of two vectors of channels (over all taps and input channels) overflow L1, four
   vectors by 4 columns where the
   weights of all four fit a quarter of L2 (`_broad_panel`; the columns padded to a multiple of 4 where at most an
   eighth of them is padding), else one vector by up to 14 columns by 2 or 4 output rows (or images: an even output
   axis the weight ignores), up to 28 accumulators (2 x 14, 4 x 7). With AVX2's 16 registers, a convolution whose
   outputs sum 256 products or more takes 6 outputs by two vectors (`_six_positions`: 6 columns, or 2 columns by 3
   output rows, the rows padded up to a multiple of 3). A convolution whose columns give fewer rows
   than the two-vector tile holds takes the rest from its output rows or images (AVX2: 2 columns x 2 rows for 14
   columns, 4 images for 7). When A is contiguous along a reduce axis that
   is not the innermost one (the input channels of a channels-last convolution), SWAP makes it innermost; where A
   is contiguous along none (an NCHW input), the longest reduce axis goes innermost (`_longest_reduce`). When B is
   over 1 MiB, SWAP puts the column tiles outside: one tile of it stays in L2 while the rows of A stream past.
3. A pooling window (every reduce loop at most `WINDOW_MAX` long, the window at most `WINDOW_MAX`^2): its loops
   UNROLLed, then the output row UPCAST to one vector, when every read along the row is contiguous or reads every
   other element (a stride-2 window); each tap is then a vector of the row (a contiguous run or two vector loads
   and a shuffle, see `devectorize`) and the window's max or sum is taken vector by vector (max_pool2d 3x3
   stride 2 pad 1 of (8,64,112,112): 13 -> 4-5 ms).
4. Other reductions: when the reduce axis is contiguous in memory (`x.sum(1)`), UNROLL it by four vectors (four
   accumulators, so the adds of one iteration do not wait on each other). Elementwise kernels (and reductions
   whose output's last axis is the contiguous one, `x.sum(0)`): UPCAST the last output axis to one vector when
   it is contiguous in the output, and a read is contiguous along it too (or reads every other element), or is
   gated by a condition that does not depend on it (a padded copy: one gate check per vector; a channels-last
   padded copy, whose reads are gathered, 1.12 -> 0.68 ms). A transposing copy (rule 4's branch before it) is a
   tile of a vector each way, or half a vector where the output's contiguous axis is not a multiple of one (an
   NCHW output 56 wide: 1.6 -> 0.6 ms), both axes upcast and turned around by two-vector shuffles in
   `devectorize` (4096x4096: 65 -> 20 ms); its loops are then nested as the input lies, the input's largest
   stride outermost (a channels-last copy reads one tile of channel planes at a time, row after row).
5. Threads: a kernel of at least `THREAD_MIN_WORK` element operations splits its outermost output loop
   that divides evenly across `THREADS` cores (in a matmul, the outermost that its biggest operand depends on,
   when that operand is bigger than the output: each core reads half of it); when none does, the outermost
   loop is padded to a multiple of `THREADS` first (PADTO: the extra iterations are gated off). The loop is cut
   into up to `CHUNKS_PER_THREAD` chunks a core (`_chunks`), which the cores take as they finish one.

On a GPU-style device (`renderer.has_local`: CL) there are no threads; instead:

- a matmul-shaped kernel that the device's tensor cores compute (fp16 operands summed in float32 on CUDA and PTX;
  its sizes multiples of the tensor core's) gets TC, then a tile of `TC_TILE` output blocks a warp (the loaded
  fragments shared by its WMMAs) and `TC_WARPS` warps a block; with the warpgroup MMA (an H100's CUDA device) one
  64 x 128 block a warpgroup and `WGMMA_GROUPS` warpgroups a block;
- a matmul-shaped kernel keeps the CPU's register tile (below), not a grouped reduction: each thread's loaded
  values serve several outputs;

- a reduction with few outputs (under `GROUP_MAX_OUTPUTS`) over at least `GROUP_MIN_REDUCE` elements is shared
  by the work-items of a group first (GROUPTOP: each reduces a contiguous run, so the reads of one work-item
  walk memory in order, as a CPU core's do), then the CPU rules above run on what is left;
- a reduction along contiguous memory (the CPU rule's lone UNROLL) also computes 4 rows a work-item (an UPCAST
  applied first, so each vector is one contiguous run of a row);
- an elementwise kernel of 1- or 2-byte values on CUDA and PTX (`packs_narrow_values`) gives each thread 4 bytes of
  them (UPCAST 4 or 2: fp16 a + b 2021 -> 2678 GB/s, uint8 1103 -> 2081 GB/s on an H100);
- the innermost output axis that divides gets `LOCAL_SIZE` work-items a group (16 for such a reduction), or
  fewer: one work-group is one task for PoCL's threads, so groups of one work-item each would cost a task per
  element (the device's own work-group limit caps it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from zeptograd.codegen.opt import (
    Opt,
    OptError,
    OptOps,
    address_stride,
    apply_opt,
    block_stride,
    max_local,
    output_axes,
    reduce_axes,
)
from zeptograd.dtype import PtrDType, dtypes
from zeptograd.helpers import THREADS
from zeptograd.renderer.cstyle import CACHE_BYTES
from zeptograd.uop.ops import Ops, UOp

GROUP_MAX_OUTPUTS = 64  # more outputs than this keep the device busy one work-group per output
GROUP_MIN_REDUCE = 4096  # a shorter reduction costs less than the barrier and the second pass
GROUP_SIZE = 16
GPU_GROUP_MIN_REDUCE = 256  # on a GPU, a shorter row is summed by one thread in less time than a barrier
LOCAL_SIZE = 64
TC_TILE = (2, 8)  # WMMA blocks a warp along m and n: 2 A and 8 B fragments loaded for 16 WMMAs (H100 sweep)
TC_WARPS = (2, 4)  # warps a block along m and n (2 x 2: 300-305 TFLOP/s with the k loop unrolled, 2 x 4: 320)
# a warpgroup MMA (sm_90a) computes a 64 x 128 block itself: one a warpgroup, and 2 warpgroups a block along m, which
# read the same B (an H100, fp16 4096^3, the kernel alone: 349 TFLOP/s; 1 x 1: 330, 1 x 2: 344)
WGMMA_TILE = (1, 1)
WGMMA_GROUPS = (2, 1)
# below this a kernel runs in less time than waking the other cores (runtime/cpu_threads.py) costs
THREAD_MIN_WORK = 1 << 17
# a threaded kernel's chunks: up to this many a core, of at least this many element operations each
CHUNKS_PER_THREAD = 4
CHUNK_MIN_WORK = 1 << 16
SWAP_MIN_BYTES = 1 << 20  # a matmul operand bigger than this does not stay in the caches across row tiles
# a convolution whose weights stay in L2 (`_broad_panel`): a tile of this many vectors of output channels by this
# many output columns (16 accumulators)
BROAD_VECTORS = 4
BROAD_COLUMNS = 4
# 32-bit values in a cache line: a transposing copy's tile stores its rows as whole lines where it can (AVX2: 4 x 16
# instead of 8 x 8; medians of 15 on the AMD EPYC: x.T.contiguous() 1024^2 560 -> 335 us hot, 687 -> 462 cold,
# 4096^2 13.0 -> 6.7 ms cold; bench/ops.py's channels-last copy 773-878 -> 768-783 us cold, 231 -> 248 hot)
LINE_VALUES = 16
# AVX2's 16 vector registers: a tile of this many outputs by two vectors (`_six_positions`); in a convolution, where
# each output sums at least this many products: 32 input channels of a 3x3 kernel (288) and more (over 16 or 24,
# 144 or 216 products, it saves nothing against 4 x 16)
SIX_POSITIONS = 6
SIX_MIN_REDUCE = 256
WINDOW_MAX = 4  # a reduce loop this short (a pooling window's side) is unrolled, when its whole window is small


L1_BYTES = CACHE_BYTES[1]
L2_BYTES = CACHE_BYTES[2]


@dataclass(frozen=True)
class _Read:
    """A global read of the kernel: its address, the loops the address depends on, the bytes of its buffer."""

    address: UOp
    loops: frozenset[UOp]
    nbytes: int
    gate_loops: frozenset[UOp] | None  # the loops its gate depends on; None: not gated


def _loops(x: UOp) -> frozenset[UOp]:
    return frozenset(u for u in x.toposort() if u.op is Ops.RANGE)


def _reads(ast: UOp) -> list[_Read]:
    out = []
    for u in ast.toposort():
        if u.op is Ops.LOAD and u.src[0].src[0].op is Ops.DEFINE_GLOBAL:
            index = u.src[0]
            address, ptr = index.src[1], index.src[0].dtype
            nbytes = ptr.size * ptr.base.itemsize if isinstance(ptr, PtrDType) else 0
            gate = _loops(index.src[2]) if len(index.src) == 3 else None
            out.append(_Read(address, _loops(address), nbytes, gate))
    return out


def _lanes_pay(x: _Read, r: UOp) -> bool:
    """Do vector lanes along loop `r` pay for read `x`: it is contiguous along r, or reads every other element
    along r (two vector loads and a shuffle, see `devectorize`), or its gate ignores r (one check for all the
    lanes)?"""
    return address_stride(x.address, r) in (1, 2) or (x.gate_loops is not None and r not in x.gate_loops)


def _transposed_axis(
    ast: UOp, outs: list[UOp], reads: list[_Read], out_index: UOp, lanes: int
) -> tuple[int, int, int, int, int] | None:
    """(t, its size padded to its side of the tile, that side, the output's side, the read's position in `reads`) for
    a transposing copy of 32-bit values: the output is contiguous along its last axis, the read gathers along it but
    is contiguous along output axis t. The tile holds lanes x lanes values, or half a vector each way where the last
    axis is not a multiple of `lanes`; where the last axis takes whole cache lines (`LINE_VALUES`), its side is a
    line and t's the rest (AVX2: 4 x 16), so each row of the tile is stored as whole lines (t padded by at most a
    quarter; None where there is no such axis)."""
    store = next(u for u in ast.toposort() if u.op is Ops.STORE)
    if store.src[1].dtype.itemsize != 4 or not outs or address_stride(out_index, outs[-1]) != 1:
        return None
    last = outs[-1].src[0].arg
    side = next((w for w in (lanes, lanes // 2) if w >= 4 and last % w == 0), None)
    if side is None:
        return None
    out_side = LINE_VALUES if side < LINE_VALUES and last % LINE_VALUES == 0 else side
    t_side = max(side * side // out_side, 1)
    for i, x in enumerate(reads):
        if address_stride(x.address, outs[-1]) in (0, 1, 2):
            continue
        for t, r in enumerate(outs[:-1]):
            size, padded = r.src[0].arg, -(-r.src[0].arg // t_side) * t_side
            if address_stride(x.address, r) == 1 and size >= t_side and padded * 4 <= size * 5:
                return t, padded, t_side, out_side, i
    return None


def _loops_in_read_order(ast: UOp, opts: list[Opt], read: int) -> UOp:
    """`ast` with its output loops nested as the `read`-th read walks memory: the loop it strides furthest
    outermost, its contiguous one innermost (SWAPs added to `opts`); unchanged where a loop's stride is not a
    constant or is 0. A transposing copy's output tile is whole cache lines either way, so its reads decide: a
    channels-last copy then reads one tile of 16 channel planes at a time, row after row, not all 64 planes
    at once (8x64x56x56 -> padded NHWC, medians of 25: 0.72 -> 0.43 ms with cold caches, 0.22 -> 0.16 hot)."""
    address = _reads(ast)[read].address
    outs = output_axes(ast)
    strides = [address_stride(address, r) for r in outs]
    if any(s is None or s == 0 for s in strides):
        return ast
    for i in range(len(outs)):
        # selection sort by SWAP: the largest remaining stride comes to position i
        j = max(range(i, len(outs)), key=lambda k: (strides[k], -k))
        if j != i:
            ast = _try(ast, opts, Opt(OptOps.SWAP, i, j))
            strides[i], strides[j] = strides[j], strides[i]
    return ast


def _small_window(reds: list[UOp]) -> bool:
    """Is the reduction a small window (a pooling window: 2x2, 3x3), whose loops cost more than their work?"""
    return bool(reds) and all(r.src[0].arg <= WINDOW_MAX for r in reds) and _size_of(reds) <= WINDOW_MAX**2


def _size_of(axes: list[UOp]) -> int:
    return math.prod(r.src[0].arg for r in axes)


def _single_store(ast: UOp) -> UOp | None:
    """The kernel's memory STORE, when it has exactly one."""
    stores = [u for u in ast.toposort() if u.op is Ops.STORE and u.src[0].op is Ops.INDEX]
    return stores[0] if len(stores) == 1 else None


def _store_index(ast: UOp) -> UOp | None:
    return store.src[0].src[1] if (store := _single_store(ast)) is not None else None


def _narrow_lanes(ast: UOp) -> int:
    """How many of the kernel's stored values make 4 bytes (1 for 4-byte values and wider, or several stores)."""
    store = _single_store(ast)
    if store is None or not output_axes(ast) or not isinstance(ptr := store.src[0].dtype, PtrDType):
        return 1
    return max(1, 4 // ptr.base.itemsize)


def _try(ast: UOp, opts: list[Opt], opt: Opt, max_local: int = 0, tensor_cores: tuple = ()) -> UOp:
    try:
        new = apply_opt(ast, opt, max_local, tensor_cores)
    except OptError:
        return ast
    opts.append(opt)
    return new


def _group(ast: UOp, opts: list[Opt], op: OptOps, sizes: tuple[int, ...], max_local: int) -> UOp:
    """`ast` with its last reduce axis grouped (GROUP or GROUPTOP `op`) by the first of `sizes` that divides it
    and fits the device (the opt added to `opts`), else unchanged."""
    axis = len(reduce_axes(ast)) - 1
    amount = _divisor(reduce_axes(ast)[axis].src[0].arg, sizes)
    return ast if amount is None else _try(ast, opts, Opt(op, axis, amount), max_local)


def _divisor(size: int, choices: tuple[int, ...]) -> int | None:
    return next((c for c in choices if size % c == 0 and size >= c), None)


def _matmul_axes(outs: list[UOp], reads: list[_Read], out_index: UOp) -> tuple[int, int] | None:
    """(m, n): output axes such that one read (B) ignores m and another (A) ignores n. Preferably n is contiguous
    in B (its lanes are one vector load) and in the output (its tile is stored a vector at a time: the weight
    gradient g.T @ x, 256x784, 300 -> 230 us); else n contiguous in B; else n contiguous in the output."""
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
    for m, n in pairs:
        rm, rn = outs[m], outs[n]
        if address_stride(out_index, rn) != 1:
            continue
        ignores_m = any(rm not in x.loops and rn in x.loops for x in reads)
        ignores_n = any(rn not in x.loops and rm in x.loops for x in reads)
        if ignores_m and ignores_n:
            return m, n
    return None


def _conv_axes(outs: list[UOp], reds: list[UOp], reads: list[_Read], vector: int) -> tuple[int, int] | None:
    """(m, n) of a convolution (several reduce axes: the input channels and the taps) whose weight (the read that
    depends on the fewest output axes) is contiguous along an output axis n that holds whole vectors (a weight
    copied channels-last, see `Tensor.conv2d`): its output channels. m is the innermost output axis the weight
    ignores and the input reads (its columns), so each input value is broadcast to a vector of channels, whatever
    the width of the image (56: no whole vectors along it) and however the input lies (NCHW, read in place)."""
    if len(reds) < 2 or len(reads) < 2:
        return None
    # the weight depends on one output axis (its channels), the input on the others (batch, rows, columns)
    weight = min(reads, key=lambda x: (sum(r in x.loops for r in outs), x.nbytes))
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
    """Is `address` contiguous along loop `r`, or within panels of two vectors or one of it (a convolution's weight
    stored in panels by the layout pass)?"""
    if address_stride(address, r) == 1:
        return True
    return any(block_stride(address, r, b) == 1 for b in (2 * vector, vector))


def _dot_axes(outs: list[UOp], reds: list[UOp], reads: list[_Read]) -> tuple[int, int] | None:
    """(m, n) of a matmul whose operands are both contiguous along the last reduce axis and neither along an
    output axis (x @ w.T with w stored (out, in)): A ignores n, B ignores m."""
    if len(outs) < 2 or len(reads) < 2 or any(address_stride(x.address, r) == 1 for x in reads for r in outs):
        return None
    k = reds[-1]
    along_k = [x for x in reads if address_stride(x.address, k) == 1]
    for m in range(len(outs)):
        for n in range(len(outs)):
            rm, rn = outs[m], outs[n]
            a = any(rn not in x.loops and rm in x.loops for x in along_k)
            if m != n and a and any(rm not in x.loops and rn in x.loops for x in along_k):
                return m, n
    return None


def _contiguous_reduce(reds: list[UOp], reads: list[_Read], rn: UOp) -> int | None:
    """The reduce axis along which A (a read that ignores n) is contiguous, when it is not the innermost one."""
    for i, r in enumerate(reds[:-1]):
        if any(rn not in x.loops and address_stride(x.address, r) == 1 for x in reads):
            return i
    return None


def _longest_reduce(reds: list[UOp]) -> int | None:
    """A convolution reading its input in place (NCHW: A contiguous along no reduce axis but the taps'): the
    longest reduce axis, its input channels, when it is not the innermost one. A loop of 64 channels, not of 3
    taps, and the padding's gates, which depend on the taps only, are computed outside it (bench/ops.py's layer,
    its kernel alone, medians of 11: 9.31 -> 8.94 ms)."""
    longest = max(range(len(reds)), key=lambda i: (reds[i].src[0].arg, -i))
    return longest if reds[longest].src[0].arg > reds[-1].src[0].arg else None


def _axis_ignored_by(
    outs: list[UOp],
    rm: UOp,
    rn: UOp,
    ignoring: list[_Read],
    reading: list[_Read] | None = None,
    even: bool = True,
) -> UOp | None:
    """The innermost output axis besides m and n, of even size (any size where not `even`), that every read of
    `ignoring` (at least one) ignores and, when `reading` is given, one of its reads depends on: upcasting it by 2
    uses each value the ignoring operand loads for twice the FMAs. The innermost: its two rows are nearest in
    memory."""
    if not ignoring:
        return None
    for r in reversed(outs):
        if r is rm or r is rn or (even and r.src[0].arg % 2):
            continue
        if all(r not in x.loops for x in ignoring) and (reading is None or any(r in x.loops for x in reading)):
            return r
    return None


def _second_row_axis(outs: list[UOp], reads: list[_Read], rm: UOp, rn: UOp) -> UOp | None:
    """An axis the operand ignoring n (A) ignores too: halves the broadcasts per FMA (a convolution's output rows:
    4 channels x 2 rows x 8 columns)."""
    return _axis_ignored_by(outs, rm, rn, [x for x in reads if rn not in x.loops and rm in x.loops])


def _weight_row_axis(outs: list[UOp], reads: list[_Read], rm: UOp, rn: UOp, even: bool = True) -> UOp | None:
    """An axis B (the operand ignoring m) ignores too and A reads: each vector of B serves twice the FMAs (a
    channels-last convolution's output rows: 2 rows x 14 columns x 16 channels, 28 accumulators, each weight vector
    loaded once for 28 FMAs instead of 14); of even size unless not `even`."""
    b_reads = [x for x in reads if rm not in x.loops and rn in x.loops]
    a_reads = [x for x in reads if rn not in x.loops and rm in x.loops]
    return _axis_ignored_by(outs, rm, rn, b_reads, a_reads, even)


def _avx2_vectors(ast: UOp, vector: int) -> bool:
    """Are the CPU's vectors of the accumulator's dtype 32 bytes (AVX2's, 16 registers; not a GPU's plan, which
    takes the CPU's tile without a renderer)?"""
    red = next(u for u in ast.toposort() if u.op is Ops.REDUCE)
    return vector * red.dtype.itemsize == 32


def _six_positions(
    sizes: list[int], m: int, outs: list[UOp], reads: list[_Read], rm: UOp, rn: UOp
) -> tuple[int, UOp | None, int] | None:
    """(columns, third axis, its rows) of AVX2's convolution tile of `SIX_POSITIONS` outputs by two vectors of
    channels: 12 accumulators, 6 broadcasts and 2 loads for 12 FMAs, against 4 and 2 for 8 in 4 x 2 vectors. The
    columns (m) give 6, or 3 or 2 of them; the rest come from an axis the weight ignores (the output rows), padded
    up to a multiple of its share where at most a sixteenth of it is padding (56 rows: 57, its last tile's third
    row recomputing row 55, see `_gate_reads`). None where neither fits. bench/ops.py's (8,64,56,56) layer on an
    AMD EPYC (Zen 4, AVX2), C harness, one core: 4 x 2 vectors 62.7 / 56.2 / 43.0 GFLOP/s, 2 columns x 3 rows x
    2 vectors 68.8 / 61.2 / 51.5 in three runs; kernels alone, medians of 11-21 alternating runs: that layer
    15.0-15.6 -> 13.6-13.8 ms, 128 output channels 30.4-30.7 -> 27.0-29.6, (4,64,112,112) 30.8 -> 27.6. Only where an
    output sums `SIX_MIN_REDUCE` products or more: over 32 input channels (288 products) the tile was 4-8% slower
    while its outputs were stored a lane at a time ((8,32,56,56): 7.4 -> 7.8 ms, (8,32,112,112) 24.0 -> 26.1); stored
    in pairs, it is faster there too (kernels alone on one core, medians of 31 against 4 x 16: (8,32,56,56) with 64
    filters 13.01 -> 12.10 ms, with 32 6.58 -> 5.99, (8,32,112,112) 53.8 -> 50.1)."""
    if sizes[m] % SIX_POSITIONS == 0:
        return SIX_POSITIONS, None, 1
    cols = _divisor(sizes[m], (3, 2))
    third = _weight_row_axis(outs, reads, rm, rn, even=False) if cols is not None else None
    if cols is None or third is None:
        return None
    by = SIX_POSITIONS // cols
    size = third.src[0].arg
    return (cols, third, by) if -size % by * 16 <= size else None


def _six_tile(ast: UOp, m: int, cols: int, third: UOp | None, by: int) -> tuple[UOp, list[Opt]] | None:
    """`ast` with AVX2's 6-output tile (`_six_positions`) applied, and its opts: `cols` of axis m by `by` of the
    `third` axis, each padded up to a multiple of its share first where it is not one; None where an opt is
    refused (then none of them applies)."""
    plan: list[Opt] = []

    def add(new: UOp, opt: Opt) -> UOp:
        plan.append(opt)
        return apply_opt(new, opt)

    def axis_of(new: UOp, r: UOp) -> int:
        return next(i for i, x in enumerate(output_axes(new)) if x.arg == r.arg)  # by loop number: PADTO remakes it

    try:
        new = ast
        if output_axes(new)[m].src[0].arg % cols:
            new = add(new, Opt(OptOps.PADTO, m, cols))
        if third is not None and third.src[0].arg % by:
            new = add(new, Opt(OptOps.PADTO, axis_of(new, third), by))
        new = add(new, Opt(OptOps.UPCAST, m, cols))
        if third is not None:
            new = add(new, Opt(OptOps.UPCAST, axis_of(new, third), by))
    except OptError:
        return None
    return new, plan


def _wide_tile(
    n: int, vector: int, rows: int, reds: list[UOp], reads: list[_Read], rm: UOp, rn: UOp, an: int | None
) -> int | None:
    """Three vectors of n for a matmul's tile (8 x 48 float32 with AVX-512: 24 accumulators, 8 broadcasts and 3
    loads for 24 FMAs, against 10 loads for 16 in 8 x 32), n padded up to a multiple of them where it is not one:
    the weight gradient of a 784-wide layer, g.T @ x with x (128, 784), 195 -> 160 us. Only with 32 vector
    registers (rows of 8), a single reduce axis (a matmul, not a convolution), and B contiguous along n (not
    stored in panels of two vectors); at most an eighth of n padded, a sixteenth where two vectors divide n."""
    wide = 3 * vector
    if rows != 8 or len(reds) != 1 or not any(rm not in x.loops and address_stride(x.address, rn) == 1 for x in reads):
        return None
    pad = -n % wide
    return wide if n >= wide and pad * (16 if an == 2 * vector else 8) <= n else None


def _panel_spills(ast: UOp, reds: list[UOp], reads: list[_Read], rm: UOp, width: int) -> bool:
    """Does a convolution's B panel, `width` columns over the whole of its reduce loops (all the taps and input
    channels one output tile sums), overflow `L1_BYTES`? Then it is read again from L2 for every tile: with AVX-512
    a 64x64x3x3 weight is 73 KB a panel of 32 output channels, and one vector of 16 (36 KB) in a tile of 14
    columns (14 x 16: 14 accumulators) makes bench/ops.py's convolution 3-4% faster end to end (9.90 -> 9.60 and
    12.23 -> 11.89 ms, medians of 40 calls alternating the plans in one process; its kernel alone 3-13%). A matmul
    (one reduce axis) keeps its tile."""
    if len(reds) < 2 or not any(rm not in x.loops for x in reads):
        return False
    return _panel_bytes(ast, reds, width) > L1_BYTES


def _panel_bytes(ast: UOp, reds: list[UOp], width: int) -> int:
    """The bytes of a B panel `width` columns wide over all of the reduce loops `reds`, in the accumulator's dtype."""
    itemsize = next(u for u in ast.toposort() if u.op is Ops.REDUCE).dtype.itemsize
    return math.prod(r.src[0].arg for r in reds) * width * itemsize


def _broad_panel(ast: UOp, reds: list[UOp], n: int, vector: int) -> bool:
    """Does a convolution whose two-vector weight panel overflows L1 take `BROAD_VECTORS` vectors of output channels
    by `BROAD_COLUMNS` columns instead: n a multiple of them, and their panel (over all its taps and input channels)
    within a quarter of L2, where it stays while the input streams past? Each input value is then broadcast into a
    register once for 4 FMAs, and each weight vector serves 4; in the one-vector tile each FMA reads its broadcast
    operand from memory itself. On an AMD EPYC (Zen 4), bench/ops.py's (8,64,56,56) layer, its kernel alone,
    medians of 41 alternating runs: 10.19 / 10.29 -> 9.04 / 9.08 ms; 4 x 7 columns (28 accumulators, 33 registers
    with the operands) 9.2-9.5. With 128 or 256 input channels (a 288 KiB or 576 KiB panel) the one-vector tile is
    as fast or faster (9.87 vs 10.35, 9.03 vs 9.25 ms)."""
    width = BROAD_VECTORS * vector
    return n % width == 0 and _panel_bytes(ast, reds, width) <= L2_BYTES // 4


def _split_biggest(ast: UOp, reads: list[_Read], outs: list[UOp], threads: int, first: int) -> int:
    """The output loop to split across cores in a matmul: one the biggest operand depends on, when it is bigger than
    the output, so that each core reads half of it (x @ w.T in nn.Linear(784, 256)'s forward: w, 802 KB, split by
    its rows; each core then also reads the half of w it updated in the last SGD step, in its own L2: 197 -> 156
    us, the train step's kernels 507 -> 428 us); else `first`, the outermost loop that divides evenly."""
    store = next(u for u in ast.toposort() if u.op is Ops.STORE and u.src[0].op is Ops.INDEX)
    ptr = store.src[0].src[0].dtype
    out_bytes = ptr.size * ptr.base.itemsize if isinstance(ptr, PtrDType) else 0
    biggest = max(reads, key=lambda x: x.nbytes)
    if biggest.nbytes <= out_bytes:
        return first
    loops = {r.arg for r in biggest.loops}
    return next((i for i, r in enumerate(outs) if r.src[0].arg % threads == 0 and r.arg in loops), first)


def _float_lanes(renderer: Any) -> int:
    """The float32 lanes of the renderer's vectors (8: AVX2's, and where the renderer is not known)."""
    lanes = renderer.max_lanes(Ops.MULACC, dtypes.float32) if renderer is not None else 1
    return lanes if lanes >= 2 else 8


def _register_tile(ast: UOp, renderer: Any, float_lanes: int | None = None) -> tuple[int, int]:
    """(lanes, rows) of a matmul's register tile, two vectors a row: the lanes of a vector of the accumulator's
    dtype (`float_lanes` for float32 where given), and the rows: 8 where a vector is 64 bytes (AVX-512 has 32
    vector registers: 16 accumulators leave room for the loads), else 4 (AVX2's 16 registers)."""
    red = next(u for u in ast.toposort() if u.op is Ops.REDUCE)
    if float_lanes is not None and red.dtype is dtypes.float32:
        lanes = float_lanes
    else:
        lanes = renderer.max_lanes(Ops.MULACC, red.dtype) if renderer is not None else 1
    if lanes < 2:
        return 8, 4  # scalar code (a GPU thread's, or a dtype without vectors): a tile of 4 x 16 values
    return lanes, 8 if lanes * red.dtype.itemsize >= 64 else 4


def hand_coded_opts(ast: UOp, renderer: Any = None, float_lanes: int | None = None) -> list[Opt]:
    """The heuristic plan for kernel `ast` (see the module docstring); `float_lanes`: the float32 lanes of a vector
    where they are not the renderer's (a GPU-style device's plan is the CPU's in its vectors)."""
    opts: list[Opt] = []
    outs, reds = output_axes(ast), reduce_axes(ast)
    reads, out_index = _reads(ast), _store_index(ast)
    if out_index is None or any(r.src[0].op is not Ops.CONST for r in outs + reds):
        return opts
    sizes = [r.src[0].arg for r in outs]
    work = math.prod(sizes) * math.prod(r.src[0].arg for r in reds)
    gpu = max_local(renderer)
    if gpu:
        return _gpu_opts(ast, renderer, gpu)
    lanes = float_lanes or _float_lanes(renderer)
    dot = _dot_axes(outs, reds, reads) if reds else None
    mm = None
    if reds and dot is None:
        vector, rows = _register_tile(ast, renderer, float_lanes)
        mm = _conv_axes(outs, reds, reads, vector) or _matmul_axes(outs, reads, out_index)
    if dot is not None:
        # both operands contiguous along the reduce axis (x @ w.T): a tile of 4 x 4 outputs, each a vector
        # accumulator along the reduce axis, summed across its lanes at the end (128x784 @ 784x256 alone: 175-185
        # us; a copy of w.T into panels, 26 us, and the 8 x 32 tile, 145-155 us, is no faster and one more kernel)
        m, n = dot
        am, an = _divisor(sizes[m], (4, 2)), _divisor(sizes[n], (4, 2))
        if am is not None:
            ast = _try(ast, opts, Opt(OptOps.UPCAST, m, am))
        if an is not None:
            ast = _try(ast, opts, Opt(OptOps.UPCAST, n, an))
        if (k := _divisor(reds[-1].src[0].arg, (lanes, lanes // 2))) is not None:
            ast = _try(ast, opts, Opt(OptOps.UNROLL, len(reds) - 1, k))
    elif mm is not None:
        m, n = mm
        rm, rn = outs[m], outs[n]
        # a register tile of vector accumulators, half the vector registers: rows x 2 vectors (AVX2: 6 x 16 of
        # float32, 3/4 of them; AVX-512, 32 registers: 8 x 32), or 4 x 2 x 1 vector when a third output axis (a
        # convolution's rows) is free for the second factor, else 8 x 1 vector. m first: the lanes of the axis
        # upcast last vary fastest, and n is the one contiguous in memory (vector and rows: `_register_tile`, above)
        an = _divisor(sizes[n], (2 * vector, vector))
        # the tiles for a weight panel that overflows L1 hold up to 28 accumulators: 32 vector registers. AVX2's 16
        # keep 4 x 2 vectors (bench/ops.py's layer, its channels-last kernel alone, medians of 9 alternating runs
        # on an AMD EPYC without AVX-512: 4 x 4 vectors, 4 accumulators spilled to the stack, 18.8 ms; 4 x 2
        # vectors 11.9; 1 vector by 7 columns by 2 rows 12.7)
        narrow = rows == 8 and an == 2 * vector and _panel_spills(ast, reds, reads, rm, 2 * vector)
        broad = narrow and _broad_panel(ast, reds, sizes[n], vector)
        if broad:
            an = BROAD_VECTORS * vector  # a convolution's weights stay in L2: every channel vector of them at once
        elif narrow:
            an = vector  # a convolution's weights for two vectors of channels do not fit L1: one, and more rows
        if (wide := _wide_tile(sizes[n], vector, rows, reds, reads, rm, rn, an)) is not None and sizes[n] % wide:
            planned = len(opts)
            ast = _try(ast, opts, Opt(OptOps.PADTO, n, wide))
            wide = wide if len(opts) > planned else None
        an = wide if wide is not None else an
        third = _second_row_axis(outs, reads, rm, rn) if an == vector else None
        weight_rows = False
        if narrow and not broad and third is None:
            third = _weight_row_axis(outs, reads, rm, rn)
            weight_rows = third is not None
        several = an == 2 * vector or (wide is not None and an == wide)  # vectors of n a row: rows of m for them
        # the most rows that divide m within the budget (7 for 14, not 2: a Winograd convolution's tile columns)
        first = rows if several or third is not None else 2 * rows
        candidates: tuple[int, ...]
        if broad:
            candidates = (BROAD_COLUMNS, 2)
        elif weight_rows:
            # up to 14 columns by two or more rows of the third axis (below): 28 accumulators, and room for the
            # weight vector in 32 registers (bench/ops.py's convolution kernel, medians of 15 alternating runs:
            # 9.30 -> 8.58 ms)
            candidates = tuple(range(2 * rows - 2, 1, -1))
        elif narrow:
            candidates = tuple(range(2 * rows, 1, -1))
        else:
            candidates = (first, 8, *range(rows, 1, -1))
        six = None
        ymm = several and renderer is not None and _avx2_vectors(ast, vector)
        if ymm and (len(reds) == 1 or math.prod(r.src[0].arg for r in reds) >= SIX_MIN_REDUCE):
            six = _six_positions(sizes, m, outs, reads, rm, rn) if len(reds) > 1 else None
            if six is None and -sizes[m] % SIX_POSITIONS * 16 <= sizes[m]:
                # AVX2's tile of 6 rows by two vectors, the rows padded up to a multiple of 6 where at most a
                # sixteenth of them is padding, the padded rows recomputing the last one (`_gate_reads`): a matmul
                # (1024 -> 1026), a convolution's weight gradient (64 output channels: 66; that kernel alone, medians
                # of 9 alternating runs against 4 x 16: bench/ops.py's layer 20.4 -> 17.2 ms, (8,128,28,28) 24.7 ->
                # 19.5, (8,256,14,14) 27.3 -> 21.2, (8,32,112,112) with 64 filters 68.5 -> 56.2)
                six = (SIX_POSITIONS, None, 1)
        if six is not None and (tiled := _six_tile(ast, m, *six)) is not None:
            ast, six_opts = tiled
            opts.extend(six_opts)
            third = None
        else:
            six = None
        if broad and sizes[m] % BROAD_COLUMNS and -sizes[m] % BROAD_COLUMNS * 8 <= sizes[m]:
            # columns padded up to whole tiles (the extra ones gated off): 54 columns as 14 tiles of 4, not 27 of 2
            # (bench/ops.py's layer without padding, its kernel alone, medians of 9: 12.9 -> 9.6 ms)
            ast = _try(ast, opts, Opt(OptOps.PADTO, m, BROAD_COLUMNS))
            sizes = [r.src[0].arg for r in output_axes(ast)]
        am = _divisor(sizes[m], candidates) if six is None else None
        if am is not None:
            ast = _try(ast, opts, Opt(OptOps.UPCAST, m, am))
        short = six is None and several and third is None and (am or 1) * 2 <= rows
        if short:
            # a convolution whose columns give fewer rows than the tile holds (14 columns: 2, 7: none) takes the rest
            # from an axis its weight ignores, its output rows or images (AVX2, kernels alone, medians of 7:
            # (8,256,14,14) 2 columns 21.3 ms, 2 columns x 2 rows 11.9; (8,512,7,7) 1 column 46.2, 4 images 16.9);
            # so does Winograd's matmul over tiles, a single reduce axis (bench/ops.py's layer 4.4-5.2 -> 3.3-4.2
            # ms; (8,128,28,28): 9.6-10.0 -> 3.8-4.4)
            third = _weight_row_axis(outs, reads, rm, rn)
        if third is not None:
            by = 2
            if short:
                by = max(f for f in (4, 2) if third.src[0].arg % f == 0 and (am or 1) * f <= rows)
            elif weight_rows and am is not None:
                # as many rows (or images) as 28 accumulators hold: 2 of 14 columns, 4 of 7 ((8,512,7,7) 3x3: 4 images
                # of 7 columns, 14.35 -> 13.04 and 18.41 -> 15.49 ms in two runs of its kernel, against 2)
                by = max(f for f in (4, 2) if third.src[0].arg % f == 0 and am * f <= 2 * (2 * rows - 2))
            ast = _try(ast, opts, Opt(OptOps.UPCAST, next(i for i, r in enumerate(output_axes(ast)) if r is third), by))
        n = next(i for i, r in enumerate(output_axes(ast)) if r.arg == rn.arg)  # by loop number: PADTO remade it
        if an is not None:
            ast = _try(ast, opts, Opt(OptOps.UPCAST, n, an))
        # when the operand that ignores m (B) is too big for the caches, walk its column tiles in the outer
        # loop instead: one tile of B stays in L2 while the rows of A stream past it (2048: 155 -> 185 GFLOP/s)
        # A's contiguous reduce axis innermost: its reads walk memory in order (a channels-last convolution sums
        # over input channels, contiguous, inside the loops over the taps; 118 -> 171 GFLOP/s with the tile above)
        if (k := _contiguous_reduce(reds, reads, rn)) is not None or (k := _longest_reduce(reds)) is not None:
            base = len(output_axes(ast))
            ast = _try(ast, opts, Opt(OptOps.SWAP, base + k, base + len(reds) - 1))
        b_bytes = max((x.nbytes for x in reads if rm not in x.loops), default=0)
        loops = {r.arg: i for i, r in enumerate(output_axes(ast))}
        if b_bytes > SWAP_MIN_BYTES and rm.arg in loops and rn.arg in loops and loops[rm.arg] < loops[rn.arg]:
            ast = _try(ast, opts, Opt(OptOps.SWAP, loops[rm.arg], loops[rn.arg]))
    elif (
        outs
        and _small_window(reds)
        and address_stride(out_index, outs[-1]) == 1
        and any(outs[-1] in x.loops for x in reads)
        and all(_lanes_pay(x, outs[-1]) for x in reads if outs[-1] in x.loops)
        and (a := _divisor(sizes[-1], (lanes, 8, 4))) is not None
    ):
        # a pooling window: its loops unrolled, then vectors along the output row (reading every element, or
        # every other one: the window's stride); the lanes of the axis split last vary fastest, so each tap of
        # the window is one vector of the row and the window's sum or max is taken vector by vector
        for _ in reds:
            left = [i for i, r in enumerate(reduce_axes(ast)) if r.src[0].arg > 1]
            if not left:
                break
            new = _try(ast, opts, Opt(OptOps.UNROLL, left[0], reduce_axes(ast)[left[0]].src[0].arg))
            if new is ast:
                break
            ast = new
        ast = _try(ast, opts, Opt(OptOps.UPCAST, len(outs) - 1, a))
    elif reds and any(address_stride(x.address, reds[-1]) == 1 for x in reads):
        # a reduction along contiguous memory: vector accumulators over the reduce axis
        if (a := _divisor(reds[-1].src[0].arg, (4 * lanes, 2 * lanes, lanes, 4))) is not None:
            ast = _try(ast, opts, Opt(OptOps.UNROLL, len(reds) - 1, a))
    elif not reds and (tile := _transposed_axis(ast, outs, reads, out_index, lanes)) is not None:
        # a transposing copy (x.T.contiguous(), a convolution's channels-last copy): a tile of lanes x lanes, so
        # each cache line read along the input's contiguous axis t is used whole while it is in L1 (one vector
        # of the output took one element of 16 lines, and a line was gone before its next element was read):
        # 4096^2 .T 65 -> 20 ms, NCHW -> padded NHWC 8x64x56x56 485 -> 310-375 us
        t, padded, t_side, out_side, tile_read = tile
        if padded != sizes[t]:
            ast = _try(ast, opts, Opt(OptOps.PADTO, t, padded))
        ast = _try(ast, opts, Opt(OptOps.UPCAST, t, t_side))
        ast = _try(ast, opts, Opt(OptOps.UPCAST, len(output_axes(ast)) - 1, out_side))
        ast = _loops_in_read_order(ast, opts, tile_read)
    elif outs and address_stride(out_index, outs[-1]) == 1 and any(_lanes_pay(x, outs[-1]) for x in reads):
        # vector loads and stores along the contiguous output axis
        a = _divisor(sizes[-1], (lanes, 8, 4, 2))
        ast = _try(ast, opts, Opt(OptOps.UPCAST, len(outs) - 1, a)) if a is not None else ast
    threads = THREADS.value
    if threads > 1 and work >= THREAD_MIN_WORK and (outs_now := output_axes(ast)):
        even = next((i for i, r in enumerate(outs_now) if r.src[0].arg % threads == 0), None)
        if even is not None and (dot is not None or (mm is not None and len(reds) == 1)):
            even = _split_biggest(ast, reads, outs_now, threads, even)
        if even is None and outs_now[0].src[0].arg >= 2 * threads:
            # no loop divides evenly: pad the outermost one (its gate is the same for every lane of a vector)
            ast = _try(ast, opts, Opt(OptOps.PADTO, 0, threads))
            even = 0
        if even is not None:
            size = output_axes(ast)[even].src[0].arg
            ast = _try(ast, opts, Opt(OptOps.THREAD, even, _chunks(size, threads, work)))
    return opts


def _chunks(size: int, threads: int, work: int) -> int:
    """How many chunks a loop of `size` iterations (a multiple of `threads`) is cut into: up to
    `CHUNKS_PER_THREAD` for each core, as long as a chunk keeps `CHUNK_MIN_WORK` element operations. The cores take
    chunks as they finish them, so a core slowed by another process does less of the work: bench/ops.py's
    convolution kernels (batch 8: 2 -> 8 chunks) 17.3 -> 13.3 ms, medians of 40 calls alternating with the two
    halves' kernels in one process, while one of this machine's two cores ran about a third slower."""
    for per_thread in range(CHUNKS_PER_THREAD, 1, -1):
        chunks = threads * per_thread
        if size % chunks == 0 and work // chunks >= CHUNK_MIN_WORK:
            return chunks
    return threads


def _gpu_opts(ast: UOp, renderer: Any, max_local: int) -> list[Opt]:
    """The plan on a GPU-style device (the module docstring's last rules around the CPU's)."""
    opts: list[Opt] = []
    outs, reds = output_axes(ast), reduce_axes(ast)
    outputs = math.prod(r.src[0].arg for r in outs)
    # a renderer without vector types (CUDA's today) runs on a GPU: neighbouring threads must read neighbouring
    # addresses (coalescing), and lanes a thread only multiply its code (an UNROLL 32 of exp: a 98 KB kernel)
    scalar_only = renderer.max_lanes(Ops.LOAD, dtypes.float32) == 1
    reads = _reads(ast)
    contiguous = bool(reds) and any(address_stride(x.address, reds[-1]) == 1 for x in reads)
    out_index = _store_index(ast)
    matmul = bool(reds) and out_index is not None and _matmul_axes(outs, reads, out_index) is not None
    if matmul and (tc := _tensor_core_opts(ast, renderer, max_local)):
        return tc
    shared = getattr(renderer, "has_shared", True)  # local memory to group a reduction in (not Triton's)
    # a GPU's threads read interleaved (coalesced); a CPU driver's work-items (PoCL, lavapipe) each a contiguous run
    interleave = scalar_only and not getattr(renderer, "runs_on_cpu", False)
    if shared and reds and outputs < GROUP_MAX_OUTPUTS and reds[-1].src[0].arg >= GROUP_MIN_REDUCE:
        # few outputs: a group shares each reduction
        if interleave:
            ast = _group(ast, opts, OptOps.GROUP, (256, 128, 64, 32, 16, 8, 4, 2), max_local)
        else:
            ast = _group(ast, opts, OptOps.GROUPTOP, (GROUP_SIZE, 8, 4, 2), max_local)
    elif shared and interleave and contiguous and not matmul and reds[-1].src[0].arg >= GPU_GROUP_MIN_REDUCE:
        # a row reduced along contiguous memory: a block a row, its threads reading it interleaved (coalesced)
        ast = _group(ast, opts, OptOps.GROUP, (256, 128, 64, 32), max_local)
    grouped = bool(opts)
    # the CPU's plan without threads, from what is left; on a GPU without vectors only a matmul's register tile
    # pays (H200, fp32 a + b on 2^26: 1696 GB/s with 8 lanes a thread, 3465 GB/s with one)
    # vectors as wide as the device's for an elementwise kernel and a matmul's register tile (PoCL, AVX-512, 16
    # lanes: exp 2^22 2.5 -> 0.97 ms; matmul 1024 with the 8 x 32 tile 57 -> 15 ms); row reductions keep 8
    lanes = None if scalar_only or (reds and not matmul) else renderer.max_lanes(Ops.MULACC, dtypes.float32)
    cpu_plan = [
        opt
        for opt in hand_coded_opts(ast, None, lanes)
        if opt.op is not OptOps.THREAD and not (scalar_only and (opt.op is OptOps.UNROLL or not reds))
    ]
    local_size = getattr(renderer, "local_size", LOCAL_SIZE)
    if not grouped and reds and [o.op for o in cpu_plan] == [OptOps.UNROLL] and output_axes(ast):
        # rows reduced along contiguous memory: 4 rows a work-item (independent accumulators), and small groups,
        # whose work-items read rows far apart (PoCL vectorizes across work-items: 4096^2 row sums 15 -> 7 ms).
        # Upcast before the UNROLL: the lanes of the opt applied last vary fastest, so each vector is a
        # contiguous run of one row (vload16); after it a vector gathered 4 rows (PoCL 16 lanes: 2.5 -> 1.4 ms)
        ast = _try(ast, opts, Opt(OptOps.UPCAST, len(output_axes(ast)) - 1, 4), max_local)
        local_size = 16
    for opt in cpu_plan:
        ast = _try(ast, opts, opt, max_local)
    narrow = _narrow_lanes(ast) if getattr(renderer, "packs_narrow_values", False) else 1
    if interleave and not reds and narrow > 1 and output_axes(ast)[-1].src[0].arg % narrow == 0:
        # each thread stores 4 bytes of narrow values (2 halves): fewer threads share the index arithmetic of a
        # gathering copy (an fp16 4096^2 copy into fragment order 57-60 -> 39-42 us on an H100)
        ast = _try(ast, opts, Opt(OptOps.UPCAST, len(output_axes(ast)) - 1, narrow), max_local)
    choices = tuple(n for n in dict.fromkeys((local_size, 128, 64, 32, 16, 8, 4, 2)) if n <= min(max_local, local_size))
    if not grouped:
        for i in reversed(range(len(output_axes(ast)))):
            if (amount := _divisor(output_axes(ast)[i].src[0].arg, choices)) is not None:
                ast = _try(ast, opts, Opt(OptOps.LOCAL, i, amount), max_local)
                break
    return opts


def _tensor_core_opts(ast: UOp, renderer: Any, max_local: int) -> list[Opt]:
    """TC, a tile of WMMA blocks a warp and several warps a block (the module docstring), or [] where TC does not
    fit the kernel."""
    opts: list[Opt] = []
    for i in range(len(getattr(renderer, "tensor_cores", ()))):
        ast = _try(ast, opts, Opt(OptOps.TC, 0, i), max_local, renderer.tensor_cores)
        if opts:
            break
    if not opts:
        return opts
    wmma = next(u for u in ast.toposort() if u.op is Ops.WMMA)
    a_loops, b_loops = _loops(wmma.src[0]), _loops(wmma.src[1])
    tile, warps = (WGMMA_TILE, WGMMA_GROUPS) if wmma.arg.warpgroup else (TC_TILE, TC_WARPS)
    for (upcast, local), side, other in zip(zip(tile, warps), (a_loops, b_loops), (b_loops, a_loops)):
        # the block loop along m (n): the output loop only the A (B) fragments read
        loop = next((r for r in output_axes(ast) if r in side and r not in other), None)
        for op, most in ((OptOps.UPCAST, upcast), (OptOps.LOCAL, local)):
            choices = tuple(1 << i for i in range(most.bit_length() - 1, 0, -1))  # most, most / 2, ..., 2
            axis = next((i for i, r in enumerate(output_axes(ast)) if loop is not None and r.arg == loop.arg), None)
            if axis is not None and (amount := _divisor(output_axes(ast)[axis].src[0].arg, choices)) is not None:
                ast = _try(ast, opts, Opt(op, axis, amount), max_local, renderer.tensor_cores)
    return opts
