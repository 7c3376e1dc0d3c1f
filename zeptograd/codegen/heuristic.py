"""The hand-written plan for a kernel: which opts `opt` applies when no BEAM search is asked for.

The rules, in order, each applied only where its amount divides the axis (docs/performance.md gives the
measurements behind each):

1. A matmul whose operands are both contiguous along the reduce axis (`x @ w.T`): a 4 x 4 tile of vector
   accumulators along the reduce axis (`_dot_tile`).
2. Other matmuls and convolutions: a register tile of vector accumulators, its shape the vector family's recipe
   (`VectorFamily`, `_register_tile`).
3. A pooling window: its loops unrolled, the output row a vector (`_window_tile`).
4. A reduction along contiguous memory: four vector accumulators (`_row_reduction`).
5. A transposing copy: a tile of a vector each way, its loops nested as the input lies (`_transpose_tile`).
6. Other elementwise kernels: the contiguous output axis a vector (`_elementwise`).
7. A kernel worth waking the cores for: its outer loop split across them in chunks (`_threads`).

A GPU-style device (`Renderer.has_local`) runs the CPU's rules 1-6 in its own vectors around its own
(`_gpu_opts`): tensor cores for a matmul they fit, a reduction with few outputs shared by a work-group, narrow
values packed 4 bytes a thread, and work-groups over the innermost output axis.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from zeptograd.codegen.kernel_shape import (
    Read,
    accumulator_dtype,
    contiguous_reduce,
    conv_axes,
    dot_axes,
    global_reads,
    lanes_pay,
    longest_reduce,
    loops_of,
    matmul_axes,
    narrow_lanes,
    second_row_axis,
    size_of,
    store_index,
    weight_row_axis,
)
from zeptograd.codegen.opt import (
    Opt,
    OptError,
    OptOps,
    address_stride,
    apply_opt,
    max_local,
    output_axes,
    reduce_axes,
)
from zeptograd.dtype import DType, PtrDType, dtypes
from zeptograd.helpers import THREADS
from zeptograd.renderer import Renderer
from zeptograd.uop.ops import Ops, UOp

GROUP_MAX_OUTPUTS = 64  # more outputs than this keep the device busy one work-group per output
GROUP_MIN_REDUCE = 4096  # a shorter reduction costs less than the barrier and the second pass
GROUP_SIZE = 16
GPU_GROUP_MIN_REDUCE = 256  # on a GPU, a shorter row is summed by one thread in less time than a barrier
TC_TILE = (2, 8)  # WMMA blocks a warp along m and n: 2 A and 8 B fragments loaded for 16 WMMAs
TC_WARPS = (2, 4)  # warps a block along m and n
WGMMA_TILE = (1, 1)  # a warpgroup MMA computes a 64 x 128 block itself: one a warpgroup
WGMMA_GROUPS = (2, 1)  # two warpgroups a block along m, reading the same B
CHUNKS_PER_THREAD = 4  # a threaded kernel's chunks: up to this many a core (the cores take them as they finish)
CHUNK_MIN_WORK = 1 << 16  # element operations a chunk at least
SWAP_MIN_BYTES = 1 << 20  # a matmul operand bigger than this does not stay in the caches across row tiles
LINE_VALUES = 16  # 32-bit values in a cache line: a transposing copy stores its rows as whole lines where it can
WINDOW_MAX = 4  # a reduce loop this short (a pooling window's side) is unrolled, when its whole window is small


@dataclass(frozen=True)
class VectorFamily:
    """A kind of vector unit and the register tiles that suit it: how many accumulators a matmul's or a
    convolution's tile holds, and its shapes. `vector_family` picks one for a kernel's accumulator dtype.

    >>> vector_family(None, dtypes.float32, 16).rows
    8
    """

    name: str
    vector_bytes: int
    """The width of a vector register (0: scalar code, planned as `SCALAR_LANES`-lane vectors)."""
    vector_registers: int
    """Vector registers a core has: a tile of accumulators takes at most half of them, or all but the operands'."""
    rows: int
    """Rows of the tile of rows x two vectors: 2 * rows accumulators, half the registers."""
    wide: bool = False
    """A matmul's tile may be three vectors wide (rows x 3 vectors), its columns padded to a multiple of them."""
    six_positions: int = 0
    """A tile of this many outputs by two vectors (12 accumulators of 16 registers); 0: none."""
    six_min_reduce: int = 0
    """A convolution takes the six-output tile only where each output sums this many products or more."""
    panel_tiles: bool = False
    """A convolution whose weight panel of two vectors overflows L1 takes a one-vector or a broad tile instead."""
    narrow_columns: int = 0
    """Columns at most of the one-vector convolution tile (its accumulators at most twice this)."""
    broad_vectors: int = 0
    """Vectors of output channels of the broad convolution tile, whose weight panel stays in L2."""
    broad_columns: int = 0
    """Output columns of the broad convolution tile."""


SCALAR_LANES = 8  # scalar code (a GPU thread's, or a dtype the target has no vectors of) plans its tile as 8 lanes
AVX512 = VectorFamily(
    "AVX-512", 64, 32, rows=8, wide=True, panel_tiles=True, narrow_columns=14, broad_vectors=4, broad_columns=4
)
AVX2 = VectorFamily("AVX2", 32, 16, rows=4, six_positions=6, six_min_reduce=256)
SCALAR = VectorFamily("scalar", 0, 16, rows=4)
_UNKNOWN = Renderer()  # the facts (caches, threads) of a device nothing is known of: the defaults


def vector_family(renderer: Renderer | None, dt: DType, float_lanes: int | None = None) -> VectorFamily:
    """The tile recipe for accumulators of `dt` on the CPU `renderer`, by the width of its vectors of `dt`
    (`float_lanes`: float32's lanes where given). None: another device's vectors, whose lanes of `dt` other than
    float32 are not known and whose vectors of 32 bytes take no CPU's recipe (a GPU's threads, PoCL's work-items).

    >>> vector_family(None, dtypes.float32).name, vector_family(None, dtypes.float32, 16).name
    ('scalar', 'AVX-512')
    """
    lanes = _lanes(renderer, dt, float_lanes)
    width = (lanes if lanes >= 2 else SCALAR_LANES) * dt.itemsize
    if lanes >= 2 and width >= AVX512.vector_bytes:
        return AVX512
    if renderer is not None and width == AVX2.vector_bytes:
        return AVX2
    return SCALAR


def _lanes(renderer: Renderer | None, dt: DType, float_lanes: int | None) -> int:
    """Lanes of a vector accumulator of `dt` (1: scalar code)."""
    if float_lanes is not None and dt is dtypes.float32:
        return float_lanes
    return renderer.max_lanes(Ops.MULACC, dt) if renderer is not None else 1


def _try(ast: UOp, opts: list[Opt], opt: Opt, max_local: int = 0, tensor_cores: tuple = ()) -> UOp:
    """`ast` with `opt` applied and added to `opts`, or unchanged where the opt does not apply."""
    try:
        new = apply_opt(ast, opt, max_local, tensor_cores)
    except OptError:
        return ast
    opts.append(opt)
    return new


def _divisor(size: int, choices: tuple[int, ...]) -> int | None:
    return next((c for c in choices if size % c == 0 and size >= c), None)


def _axis(ast: UOp, r: UOp) -> int:
    """The position of output loop `r` in `ast`, by its loop number (PADTO remakes the loop)."""
    return next(i for i, x in enumerate(output_axes(ast)) if x.arg == r.arg)


# ---------------------------------------------------------------------------------------------------------------
# rule 2: the register tile of a matmul or a convolution


def _panel_bytes(ast: UOp, reds: list[UOp], width: int) -> int:
    """The bytes of a B panel `width` columns wide over all of the reduce loops `reds`, in the accumulator's dtype."""
    return size_of(reds) * width * accumulator_dtype(ast).itemsize


def _panel_spills(ast: UOp, reds: list[UOp], reads: list[Read], rm: UOp, width: int, l1_bytes: int) -> bool:
    """Does a convolution's weight panel, `width` columns over all the taps and input channels one output tile
    sums, overflow L1? Then it is read again from L2 for every tile, and a narrower tile pays. A matmul (one
    reduce axis) keeps its tile."""
    if len(reds) < 2 or not any(rm not in x.loops for x in reads):
        return False
    return _panel_bytes(ast, reds, width) > l1_bytes


def _broad_panel(ast: UOp, reds: list[UOp], n: int, vector: int, family: VectorFamily, l2_bytes: int) -> bool:
    """Does a convolution whose two-vector weight panel overflows L1 take the family's broad tile instead: n a
    multiple of its vectors, and their panel within a quarter of L2, where it stays while the input streams past?
    Each input value is then broadcast into a register once for several FMAs."""
    width = family.broad_vectors * vector
    return n % width == 0 and _panel_bytes(ast, reds, width) <= l2_bytes // 4


def _wide_tile(
    n: int, vector: int, family: VectorFamily, reds: list[UOp], reads: list[Read], rm: UOp, rn: UOp, an: int | None
) -> int | None:
    """Three vectors of n for a matmul's tile (more FMAs a load than two), where the family has the registers for
    it, the kernel has one reduce axis, B is contiguous along n (not in panels of two vectors), and at most an
    eighth of n is padding (a sixteenth where two vectors divide n)."""
    wide = 3 * vector
    if not family.wide or len(reds) != 1:
        return None
    if not any(rm not in x.loops and address_stride(x.address, rn) == 1 for x in reads):
        return None
    return wide if n >= wide and -n % wide * (16 if an == 2 * vector else 8) <= n else None


def _six_positions(
    sizes: list[int], m: int, outs: list[UOp], reads: list[Read], rm: UOp, rn: UOp, six: int
) -> tuple[int, UOp | None, int] | None:
    """(columns, third axis, its rows) of a convolution's tile of `six` outputs by two vectors of channels (12
    accumulators: 6 broadcasts and 2 loads for 12 FMAs). The columns (m) give 6, or 3 or 2 of them; the rest
    come from an axis the weight ignores (the output rows), padded up to a multiple of its share where at most a
    sixteenth of it is padding (the padded rows recompute the last one, see `_gate_reads`). None where neither
    fits."""
    if sizes[m] % six == 0:
        return six, None, 1
    cols = _divisor(sizes[m], (3, 2))
    third = weight_row_axis(outs, reads, rm, rn, even=False) if cols is not None else None
    if cols is None or third is None:
        return None
    by = six // cols
    size = third.src[0].arg
    return (cols, third, by) if -size % by * 16 <= size else None


def _six_tile(ast: UOp, m: int, cols: int, third: UOp | None, by: int) -> tuple[UOp, list[Opt]] | None:
    """`ast` with the six-output tile (`_six_positions`) applied, and its opts: `cols` of axis m by `by` of the
    `third` axis, each padded up to a multiple of its share first; None where an opt is refused (then none
    applies)."""
    plan: list[Opt] = []

    def add(new: UOp, opt: Opt) -> UOp:
        plan.append(opt)
        return apply_opt(new, opt)

    try:
        new = ast
        if output_axes(new)[m].src[0].arg % cols:
            new = add(new, Opt(OptOps.PADTO, m, cols))
        if third is not None and third.src[0].arg % by:
            new = add(new, Opt(OptOps.PADTO, _axis(new, third), by))
        new = add(new, Opt(OptOps.UPCAST, m, cols))
        if third is not None:
            new = add(new, Opt(OptOps.UPCAST, _axis(new, third), by))
    except OptError:
        return None
    return new, plan


ODD_ROWS_MIN = 7  # the fewest rows padded by one for the narrow tile: at most a seventh more work


def _register_tile(
    ast: UOp,
    opts: list[Opt],
    mm: tuple[int, int],
    reads: list[Read],
    family: VectorFamily,
    vector: int,
    renderer: Renderer,
) -> UOp:
    """Rule 2: a tile of vector accumulators, so each loaded value serves several FMAs from a register. Its shape
    is the family's: rows of m by two vectors of n (half the registers), or three vectors (`_wide_tile`), or six
    outputs by two vectors (`_six_positions`); one vector by more rows of a third axis where the weight panel of
    a convolution overflows L1, or the broad tile where its panel stays in L2 (`_broad_panel`). Then A's
    contiguous reduce axis goes innermost, and B's column tiles outside where B does not stay in the caches."""
    outs, reds = output_axes(ast), reduce_axes(ast)
    sizes = [r.src[0].arg for r in outs]
    m, n = mm
    rm, rn = outs[m], outs[n]
    rows = family.rows
    an = _divisor(sizes[n], (2 * vector, vector))
    spills = _panel_spills(ast, reds, reads, rm, 2 * vector, renderer.l1_bytes)
    narrow = family.panel_tiles and an == 2 * vector and spills
    broad = narrow and _broad_panel(ast, reds, sizes[n], vector, family, renderer.l2_bytes)
    if broad:
        an = family.broad_vectors * vector  # the weights stay in L2: every channel vector of them at once
    elif narrow:
        an = vector  # the weights of two vectors of channels do not fit L1: one, and more rows
    if (wide := _wide_tile(sizes[n], vector, family, reds, reads, rm, rn, an)) is not None and sizes[n] % wide:
        planned = len(opts)
        ast = _try(ast, opts, Opt(OptOps.PADTO, n, wide))
        wide = wide if len(opts) > planned else None
    an = wide if wide is not None else an
    third = second_row_axis(outs, reads, rm, rn) if an == vector else None
    weight_rows = False
    if narrow and not broad and third is None:
        third = weight_row_axis(outs, reads, rm, rn)
        odd = weight_row_axis(outs, reads, rm, rn, even=False) if third is None else None
        if odd is not None and odd.src[0].arg >= ODD_ROWS_MIN:
            # an odd number of rows (a 7 x 7 map's, batch 1): padded by one, so that rows of the tile share each
            # weight vector instead of a single row of columns
            planned = len(opts)
            ast = _try(ast, opts, Opt(OptOps.PADTO, _axis(ast, odd), 2))
            third = output_axes(ast)[_axis(ast, odd)] if len(opts) > planned else None
        weight_rows = third is not None
    several = an == 2 * vector or (wide is not None and an == wide)  # vectors of n a row: rows of m for them
    # the most rows that divide m within the budget (7 for 14, not 2: a Winograd convolution's tile columns)
    candidates: tuple[int, ...]
    if broad:
        candidates = (family.broad_columns, 2)
    elif weight_rows:
        candidates = tuple(range(family.narrow_columns, 1, -1))
    elif narrow:
        candidates = tuple(range(2 * rows, 1, -1))
    else:
        candidates = (rows if several or third is not None else 2 * rows, 8, *range(rows, 1, -1))
    six = None
    if several and family.six_positions and (len(reds) == 1 or size_of(reds) >= family.six_min_reduce):
        six = _six_positions(sizes, m, outs, reads, rm, rn, family.six_positions) if len(reds) > 1 else None
        if six is None and -sizes[m] % family.six_positions * 16 <= sizes[m]:
            six = (family.six_positions, None, 1)  # m padded up to whole tiles, at most a sixteenth of it
    if six is not None and (tiled := _six_tile(ast, m, *six)) is not None:
        ast, six_opts = tiled
        opts.extend(six_opts)
        third = None
    else:
        six = None
    if broad and sizes[m] % family.broad_columns and -sizes[m] % family.broad_columns * 8 <= sizes[m]:
        ast = _try(ast, opts, Opt(OptOps.PADTO, m, family.broad_columns))  # columns padded up to whole tiles
        sizes = [r.src[0].arg for r in output_axes(ast)]
    am = _divisor(sizes[m], candidates) if six is None else None
    if am is not None:
        ast = _try(ast, opts, Opt(OptOps.UPCAST, m, am))
    short = six is None and several and third is None and (am or 1) * 2 <= rows
    if short:
        # the columns give fewer rows than the tile holds: the rest from an axis the weight ignores
        third = weight_row_axis(outs, reads, rm, rn)
    if third is not None:
        by = 2
        if short:
            by = max(f for f in (4, 2) if third.src[0].arg % f == 0 and (am or 1) * f <= rows)
        elif weight_rows and am is not None:
            # as many rows (or images) as the narrow tile's accumulators hold
            by = max(f for f in (4, 2) if third.src[0].arg % f == 0 and am * f <= 2 * family.narrow_columns)
        ast = _try(ast, opts, Opt(OptOps.UPCAST, _axis(ast, third), by))
    if an is not None:
        ast = _try(ast, opts, Opt(OptOps.UPCAST, _axis(ast, rn), an))
    # A's contiguous reduce axis innermost, so its reads walk memory in order
    if (k := contiguous_reduce(reds, reads, rn)) is not None or (k := longest_reduce(reds)) is not None:
        base = len(output_axes(ast))
        ast = _try(ast, opts, Opt(OptOps.SWAP, base + k, base + len(reds) - 1))
    # B too big for the caches: its column tiles in the outer loop, one staying in L2 while the rows of A stream past
    b_bytes = max((x.nbytes for x in reads if rm not in x.loops), default=0)
    loops = {r.arg: i for i, r in enumerate(output_axes(ast))}
    if b_bytes > SWAP_MIN_BYTES and rm.arg in loops and rn.arg in loops and loops[rm.arg] < loops[rn.arg]:
        ast = _try(ast, opts, Opt(OptOps.SWAP, loops[rm.arg], loops[rn.arg]))
    return ast


# ---------------------------------------------------------------------------------------------------------------
# rules 1 and 3-7


def _dot_tile(ast: UOp, opts: list[Opt], dot: tuple[int, int], lanes: int) -> UOp:
    """Rule 1: both operands contiguous along the reduce axis (x @ w.T): a tile of 4 x 4 outputs, each a vector
    accumulator along the reduce axis summed across its lanes at the end: 16 FMAs for 8 vector loads, and no copy
    of w.T."""
    sizes, reds = [r.src[0].arg for r in output_axes(ast)], reduce_axes(ast)
    m, n = dot
    if (am := _divisor(sizes[m], (4, 2))) is not None:
        ast = _try(ast, opts, Opt(OptOps.UPCAST, m, am))
    if (an := _divisor(sizes[n], (4, 2))) is not None:
        ast = _try(ast, opts, Opt(OptOps.UPCAST, n, an))
    if (k := _divisor(reds[-1].src[0].arg, (lanes, lanes // 2))) is not None:
        ast = _try(ast, opts, Opt(OptOps.UNROLL, len(reds) - 1, k))
    return ast


def _small_window(reds: list[UOp]) -> bool:
    """Is the reduction a small window (a pooling window: 2x2, 3x3), whose loops cost more than their work?"""
    return bool(reds) and all(r.src[0].arg <= WINDOW_MAX for r in reds) and size_of(reds) <= WINDOW_MAX**2


def _window_vector(ast: UOp, reads: list[Read], out_index: UOp, lanes: int) -> int | None:
    """The vector of a pooling window's output row, where the kernel is one whose reads along the row pay for
    lanes (`lanes_pay`)."""
    outs, reds = output_axes(ast), reduce_axes(ast)
    if not outs or not _small_window(reds) or address_stride(out_index, outs[-1]) != 1:
        return None
    if not any(outs[-1] in x.loops for x in reads) or not all(
        lanes_pay(x, outs[-1]) for x in reads if outs[-1] in x.loops
    ):
        return None
    return _divisor(outs[-1].src[0].arg, (lanes, 8, 4))


def _window_tile(ast: UOp, opts: list[Opt], vector: int) -> UOp:
    """Rule 3: a pooling window's loops unrolled, then its output row a vector: each tap of the window is one
    vector of the row (the lanes of the axis split last vary fastest), and its max or sum is taken vector by
    vector."""
    outs = len(output_axes(ast))
    for _ in reduce_axes(ast):
        left = [i for i, r in enumerate(reduce_axes(ast)) if r.src[0].arg > 1]
        if (
            not left
            or (new := _try(ast, opts, Opt(OptOps.UNROLL, left[0], reduce_axes(ast)[left[0]].src[0].arg))) is ast
        ):
            break
        ast = new
    return _try(ast, opts, Opt(OptOps.UPCAST, outs - 1, vector))


def _sibling_sums(ast: UOp) -> list[int]:
    """The reduce axes (positions in `reduce_axes`) that are each the one loop of a reduction of their own, where
    the kernel has two or more such: sums side by side (`silu(x @ w1) * (x @ w3)`), not one sum over several axes."""
    own = {u.src[1] for u in ast.toposort() if u.op is Ops.REDUCE and len(u.src) == 2 and u.src[1].op is Ops.RANGE}
    reds = reduce_axes(ast)
    if len(own) < 2 or len(own) != len(reds):
        return []
    return [i for i, r in enumerate(reds) if r in own]  # (a set's `in` compares by identity: UOps hash by it)


def _row_reduction(ast: UOp, opts: list[Opt], lanes: int) -> UOp:
    """Rule 4: a reduction along contiguous memory (`x.sum(1)`): UNROLL by four vectors, four accumulators so the
    adds of one iteration do not wait on each other. Sums side by side in one kernel are each unrolled so (the
    last first: unrolling an axis leaves the positions of those before it as they were)."""
    reds = reduce_axes(ast)
    for axis in reversed(_sibling_sums(ast) or [len(reds) - 1]):
        if (a := _divisor(reds[axis].src[0].arg, (4 * lanes, 2 * lanes, lanes, 4))) is not None:
            ast = _try(ast, opts, Opt(OptOps.UNROLL, axis, a))
    return ast


def _transposed_axis(
    ast: UOp, outs: list[UOp], reads: list[Read], out_index: UOp, lanes: int
) -> tuple[int, int, int, int, int] | None:
    """(t, its size padded to its side of the tile, that side, the output's side, the read's position in `reads`)
    for a transposing copy of 32-bit values: the output is contiguous along its last axis, a read gathers along
    it but is contiguous along output axis t. The tile holds lanes x lanes values, or half a vector each way where
    the last axis is not a multiple of `lanes`; where the last axis takes whole cache lines, its side is a line and
    t's the rest, so each row of the tile is stored as whole lines (t padded by at most a quarter). A t shorter than
    its side (the rows of a 14- or 7-wide map copied channels-last) takes a half or a quarter of it, 4 at least."""
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
            if address_stride(x.address, r) != 1:
                continue
            # an axis shorter than the tile's side (a 14- or 7-wide map's rows) takes a side half as long or less
            size = r.src[0].arg
            for side_t in (t_side, t_side // 2, t_side // 4):
                padded = -(-size // side_t) * side_t
                if side_t >= 4 and padded * 4 <= size * 5:
                    return t, padded, side_t, out_side, i
    return None


def _transpose_tile(ast: UOp, opts: list[Opt], tile: tuple[int, int, int, int, int]) -> UOp:
    """Rule 5: a transposing copy (x.T.contiguous(), a channels-last copy) as a tile upcast both ways and turned
    around by shuffles in `devectorize`, so each cache line read along the input's contiguous axis is used whole
    while it is in L1; its loops then nested as the input lies (`_loops_in_read_order`)."""
    t, padded, t_side, out_side, tile_read = tile
    if padded != output_axes(ast)[t].src[0].arg:
        ast = _try(ast, opts, Opt(OptOps.PADTO, t, padded))
    ast = _try(ast, opts, Opt(OptOps.UPCAST, t, t_side))
    ast = _try(ast, opts, Opt(OptOps.UPCAST, len(output_axes(ast)) - 1, out_side))
    return _loops_in_read_order(ast, opts, tile_read)


def _loops_in_read_order(ast: UOp, opts: list[Opt], read: int) -> UOp:
    """`ast` with its output loops nested as the `read`-th read walks memory: the loop it strides furthest
    outermost (SWAPs added to `opts`), so a channels-last copy reads one tile of channel planes at a time, row
    after row; unchanged where a loop's stride is not a constant or is 0."""
    address = global_reads(ast)[read].address
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


def _elementwise(ast: UOp, opts: list[Opt], lanes: int) -> UOp:
    """Rule 6: vector loads and stores along the output's contiguous axis (and a reduction's whose output's last
    axis is the contiguous one, `x.sum(0)`)."""
    outs = output_axes(ast)
    if (a := _divisor(outs[-1].src[0].arg, (lanes, 8, 4, 2))) is not None:
        ast = _try(ast, opts, Opt(OptOps.UPCAST, len(outs) - 1, a))
    return ast


def _threads(ast: UOp, opts: list[Opt], reads: list[Read], work: int, matmul: bool, renderer: Renderer) -> UOp:
    """Rule 7: a kernel of at least `Renderer.thread_min_work` element operations splits across the cores its
    outermost output loop that divides evenly (in a matmul, one its biggest operand depends on: `_split_biggest`),
    else its outermost loop padded to a multiple of them, in chunks (`_chunks`)."""
    threads = THREADS.value
    if threads <= 1 or work < renderer.thread_min_work or not (outs := output_axes(ast)):
        return ast
    even = next((i for i, r in enumerate(outs) if r.src[0].arg % threads == 0), None)
    if even is not None and matmul:
        even = _split_biggest(ast, reads, outs, threads, even)
    if even is None and outs[0].src[0].arg >= 2 * threads:
        # no loop divides evenly: pad the outermost one (its gate is the same for every lane of a vector)
        ast = _try(ast, opts, Opt(OptOps.PADTO, 0, threads))
        even = 0
    if even is not None:
        size = output_axes(ast)[even].src[0].arg
        ast = _try(ast, opts, Opt(OptOps.THREAD, even, _chunks(size, threads, work)))
    return ast


def _split_biggest(ast: UOp, reads: list[Read], outs: list[UOp], threads: int, first: int) -> int:
    """The output loop of a matmul to split across cores: one its biggest operand depends on, when that is bigger
    than the output, so each core reads (and, in a train step, updated) its own part of it; else `first`."""
    store = next(u for u in ast.toposort() if u.op is Ops.STORE and u.src[0].op is Ops.INDEX)
    ptr = store.src[0].src[0].dtype
    out_bytes = ptr.size * ptr.base.itemsize if isinstance(ptr, PtrDType) else 0
    biggest = max(reads, key=lambda x: x.nbytes)
    if biggest.nbytes <= out_bytes:
        return first
    loops = {r.arg for r in biggest.loops}
    return next((i for i, r in enumerate(outs) if r.src[0].arg % threads == 0 and r.arg in loops), first)


def _chunks(size: int, threads: int, work: int) -> int:
    """How many chunks a loop of `size` iterations (a multiple of `threads`) is cut into: up to
    `CHUNKS_PER_THREAD` a core, each of `CHUNK_MIN_WORK` element operations at least. The cores take chunks as
    they finish one, so a core slowed by another process does less of the work."""
    for per_thread in range(CHUNKS_PER_THREAD, 1, -1):
        chunks = threads * per_thread
        if size % chunks == 0 and work // chunks >= CHUNK_MIN_WORK:
            return chunks
    return threads


# ---------------------------------------------------------------------------------------------------------------
# the plans


def hand_coded_opts(ast: UOp, renderer: Renderer | None = None, float_lanes: int | None = None) -> list[Opt]:
    """The heuristic plan for kernel `ast` on `renderer` (see the module docstring); `float_lanes`: the float32
    lanes of a vector where they are not the renderer's. None: a device nothing is known of, whose plan is in
    8-lane vectors without a vector family's recipe (`vector_family`), its facts `Renderer`'s defaults."""
    if gpu := max_local(renderer):
        assert renderer is not None
        return _gpu_opts(ast, renderer, gpu)
    return _cpu_opts(ast, renderer, float_lanes, renderer if renderer is not None else _UNKNOWN)


def _cpu_opts(ast: UOp, vectors: Renderer | None, float_lanes: int | None, renderer: Renderer) -> list[Opt]:
    """Rules 1-7 for `renderer`, in the vectors of `vectors` (None: 8 lanes, or `float_lanes` of float32)."""
    opts: list[Opt] = []
    outs, reds = output_axes(ast), reduce_axes(ast)
    reads, out_index = global_reads(ast), store_index(ast)
    if out_index is None or any(r.src[0].op is not Ops.CONST for r in outs + reds):
        return opts
    sizes = [r.src[0].arg for r in outs]
    work = math.prod(sizes) * size_of(reds)
    lanes = float_lanes or _float_lanes(vectors)
    dot = dot_axes(outs, reds, reads) if reds else None
    mm = None
    if reds and dot is None:
        family = vector_family(vectors, accumulator_dtype(ast), float_lanes)
        vector = _lanes(vectors, accumulator_dtype(ast), float_lanes)
        vector = vector if vector >= 2 else SCALAR_LANES
        # a 1x1 convolution (one reduce axis) into NCHW: its channels-last weight is contiguous along the output
        # channels, which are not contiguous in the output, so before n is taken where only the output is
        mm = (
            conv_axes(outs, reds, reads, vector)
            or matmul_axes(outs, reads, out_index, by_output=False)
            or conv_axes(outs, reds, reads, vector, min_reduces=1)
            or matmul_axes(outs, reads, out_index)
        )
    if dot is not None:
        ast = _dot_tile(ast, opts, dot, lanes)
    elif mm is not None:
        ast = _register_tile(ast, opts, mm, reads, family, vector, renderer)
    elif (window := _window_vector(ast, reads, out_index, lanes)) is not None:
        ast = _window_tile(ast, opts, window)
    elif reds and any(address_stride(x.address, reds[-1]) == 1 for x in reads):
        ast = _row_reduction(ast, opts, lanes)
    elif not reds and (tile := _transposed_axis(ast, outs, reads, out_index, lanes)) is not None:
        ast = _transpose_tile(ast, opts, tile)
    elif outs and address_stride(out_index, outs[-1]) == 1 and any(lanes_pay(x, outs[-1]) for x in reads):
        ast = _elementwise(ast, opts, lanes)
    _threads(ast, opts, reads, work, dot is not None or (mm is not None and len(reds) == 1), renderer)
    return opts


def _float_lanes(renderer: Renderer | None) -> int:
    """The float32 lanes of the renderer's vectors (8 where it has none or is not known)."""
    lanes = renderer.max_lanes(Ops.MULACC, dtypes.float32) if renderer is not None else 1
    return lanes if lanes >= 2 else SCALAR_LANES


def _gpu_opts(ast: UOp, renderer: Renderer, max_local: int) -> list[Opt]:
    """The plan on a GPU-style device: tensor cores, or a work-group sharing a reduction with few outputs, then
    the CPU's rules in the device's vectors, narrow values packed, and work-groups over an output axis."""
    opts: list[Opt] = []
    outs, reds = output_axes(ast), reduce_axes(ast)
    outputs = size_of(outs)
    # without vector types (CUDA's) the code runs on a GPU: neighbouring threads must read neighbouring addresses
    # (coalescing), and lanes a thread only multiply its code
    scalar_only = renderer.max_lanes(Ops.LOAD, dtypes.float32) == 1
    reads = global_reads(ast)
    contiguous = bool(reds) and any(address_stride(x.address, reds[-1]) == 1 for x in reads)
    out_index = store_index(ast)
    matmul = bool(reds) and out_index is not None and matmul_axes(outs, reads, out_index) is not None
    if matmul and (tc := _tensor_core_opts(ast, renderer, max_local)):
        return tc
    # a GPU's threads read interleaved (coalesced); a CPU driver's work-items (PoCL, lavapipe) each a contiguous run
    interleave = scalar_only and not renderer.runs_on_cpu
    if renderer.has_shared and reds and outputs < GROUP_MAX_OUTPUTS and reds[-1].src[0].arg >= GROUP_MIN_REDUCE:
        # few outputs: a group shares each reduction
        if interleave:
            ast = _group(ast, opts, OptOps.GROUP, (256, 128, 64, 32, 16, 8, 4, 2), max_local)
        else:
            ast = _group(ast, opts, OptOps.GROUPTOP, (GROUP_SIZE, 8, 4, 2), max_local)
    elif (
        renderer.has_shared and interleave and contiguous and not matmul and reds[-1].src[0].arg >= GPU_GROUP_MIN_REDUCE
    ):
        # a row reduced along contiguous memory: a block a row, its threads reading it interleaved (coalesced)
        ast = _group(ast, opts, OptOps.GROUP, (256, 128, 64, 32), max_local)
    grouped = bool(opts)
    # the CPU's plan without threads, in vectors as wide as the device's for an elementwise kernel and a matmul's
    # register tile (row reductions keep 8); on a GPU without vectors only a matmul's register tile pays
    lanes = None if scalar_only or (reds and not matmul) else renderer.max_lanes(Ops.MULACC, dtypes.float32)
    cpu_plan = [
        opt
        for opt in _cpu_opts(ast, None, lanes, renderer)
        if opt.op is not OptOps.THREAD and not (scalar_only and (opt.op is OptOps.UNROLL or not reds))
    ]
    local_size = renderer.local_size
    if not grouped and reds and [o.op for o in cpu_plan] == [OptOps.UNROLL] and output_axes(ast):
        # rows reduced along contiguous memory: 4 rows a work-item (independent accumulators), in small groups;
        # upcast before the UNROLL, so each vector is a contiguous run of one row
        ast = _try(ast, opts, Opt(OptOps.UPCAST, len(output_axes(ast)) - 1, 4), max_local)
        local_size = 16
    for opt in cpu_plan:
        ast = _try(ast, opts, opt, max_local)
    narrow = narrow_lanes(ast) if renderer.packs_narrow_values else 1
    if interleave and not reds and narrow > 1 and output_axes(ast)[-1].src[0].arg % narrow == 0:
        # each thread stores 4 bytes of narrow values: fewer threads share the index arithmetic
        ast = _try(ast, opts, Opt(OptOps.UPCAST, len(output_axes(ast)) - 1, narrow), max_local)
    # work-groups of `local_size` work-items or fewer: a PoCL work-group is one task for its threads, so groups
    # of one work-item would cost a task an element
    choices = tuple(n for n in dict.fromkeys((local_size, 128, 64, 32, 16, 8, 4, 2)) if n <= min(max_local, local_size))
    if not grouped:
        for i in reversed(range(len(output_axes(ast)))):
            if (amount := _divisor(output_axes(ast)[i].src[0].arg, choices)) is not None:
                ast = _try(ast, opts, Opt(OptOps.LOCAL, i, amount), max_local)
                break
    return opts


def _group(ast: UOp, opts: list[Opt], op: OptOps, sizes: tuple[int, ...], max_local: int) -> UOp:
    """`ast` with its last reduce axis grouped (GROUP or GROUPTOP `op`) by the first of `sizes` that divides it
    and fits the device (the opt added to `opts`), else unchanged."""
    axis = len(reduce_axes(ast)) - 1
    amount = _divisor(reduce_axes(ast)[axis].src[0].arg, sizes)
    return ast if amount is None else _try(ast, opts, Opt(op, axis, amount), max_local)


def _tensor_core_opts(ast: UOp, renderer: Renderer, max_local: int) -> list[Opt]:
    """TC, then a tile of `TC_TILE` MMA blocks a warp (the loaded fragments shared by its MMAs) and `TC_WARPS`
    warps a block (a warpgroup MMA: `WGMMA_TILE`, `WGMMA_GROUPS`); [] where TC does not fit the kernel."""
    opts: list[Opt] = []
    for i in range(len(renderer.tensor_cores)):
        ast = _try(ast, opts, Opt(OptOps.TC, 0, i), max_local, renderer.tensor_cores)
        if opts:
            break
    if not opts:
        return opts
    wmma = next(u for u in ast.toposort() if u.op is Ops.WMMA)
    a_loops, b_loops = loops_of(wmma.src[0]), loops_of(wmma.src[1])
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
