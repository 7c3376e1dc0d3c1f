"""Tensor cores: a warp's matrix multiply-accumulate as one op, WMMA, and the layouts that say which elements of its
three matrices each thread of the warp holds.

WMMA computes `D = A @ B + C` for an M x K block A, a K x N block B and M x N blocks C and D. No thread holds a
whole matrix: lane `l` of the warp's `threads` holds elements `i` of A at `a(l, i)` (row, column), of B at
`b(l, i)` and of C and D at `c(l, i)`. In the IR a lane's WMMA takes its A elements as one vector, its B elements
as another, its C elements as a third, and gives its D elements as a vector like C's.

The TC opt (codegen/opt.py) builds each lane's vectors from these positions. The PYTHON device executes WMMA by
its definition with the same positions: it gathers the warp's vectors into whole matrices, multiplies them and
hands each lane its elements of D. So the opt and the op's meaning are checked against numpy on any machine, and
a GPU checks the positions against the hardware's (the PTX ISA's fragment tables for `mma.m16n8k16` and wgmma's;
no AMD GPU is at hand to check RDNA3's). A tensor core of `threads` 128 is Hopper's warpgroup MMA (`wgmma`): four
warps compute one 64 x N block, and the CUDA renderer's helper passes B to it through shared memory.

>>> tc = tensor_cores("CUDA")[0]
>>> tc, tc.dims, [tc.a(5, i) for i in range(2)]
(TensorCore('mma_m16n8k16_f16_f32'), (16, 8, 16), [(1, 2), (1, 3)])
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from zeptograd.dtype import NARROW_FLOATS, DType, dtypes
from zeptograd.uop.render import PYRENDER_GLOBALS

Position = Callable[[Any, Any], tuple[Any, Any]]  # (lane, element) -> (row, column); ints or index UOps
# a block stored in fragment order, as a reshape and a permute: the block's rows split into axes of these sizes
# (outer first), its columns likewise, and the order of those axes in memory (indices into rows + columns), so
# that lane l's elements are elements l * count .. l * count + count - 1 of the stored block (mma.sync's), or each
# 16 bytes of them the (128 j + l)-th 16 bytes of the block (wgmma's: j = 0, 1, ...)
FragmentOrder = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]


@dataclass(frozen=True, eq=False)
class TensorCore:
    """One matrix multiply-accumulate a warp does as one instruction (see the module docstring)."""

    name: str
    dims: tuple[int, int, int]  # (M, N, K)
    dtype_in: DType  # A and B
    dtype_out: DType  # C and D, the accumulator
    threads: int
    elements: tuple[int, int, int]  # what one lane holds of A, of B, of C (and D)
    a: Position
    b: Position
    c: Position
    # A's and B's blocks in fragment order (a matmul's operands copied so: each lane's fragment is one 16-byte or
    # 8-byte load, schedule/layout.py); None where no such order is given
    a_order: FragmentOrder | None = None
    b_order: FragmentOrder | None = None
    # A and B stored row-major are read as they are, 16 bytes a load, with no copy into fragment order (the wgmma
    # with k renumbered and B's tile N-major)
    reads_row_major: bool = False

    @property
    def warpgroup(self) -> bool:
        """Is this Hopper's warpgroup MMA (`wgmma`: 4 warps, B through shared memory), not one warp's?"""
        return self.threads == 128

    @property
    def operand_dtype(self) -> DType:
        """The dtype of A's and B's lanes in the IR: `dtype_in`, or for bfloat16 its storage bits (narrowfloat.py)."""
        fmt = NARROW_FLOATS.get(self.dtype_in)
        return fmt.storage if fmt is not None else self.dtype_in

    def __repr__(self) -> str:
        return f"TensorCore({self.name!r})"

    def __reduce__(self) -> tuple:
        return (tensor_core, (self.name,))

    def pyrender_arg(self) -> str:
        return f"tensor_core({self.name!r})"

    def execute(self, a: list[Any], b: list[Any], c: list[Any]) -> list[tuple[Any, ...]]:
        """D for a warp: `a[l]`, `b[l]`, `c[l]` are lane l's vectors; the result is each lane's D vector. Products
        are exact and summed in float64 before the one rounding to the output dtype (the hardware sums in at
        least the output's precision; the tests allow for the difference)."""
        m, n, k = self.dims
        if self.dtype_in is dtypes.bfloat16:  # its operands are bits (narrowfloat.py), a float32's high half
            a, b = _bfloat16_values(a), _bfloat16_values(b)
        big_a, big_b, big_c = np.zeros((m, k)), np.zeros((k, n)), np.zeros((m, n))
        for lane in range(self.threads):
            for i in range(self.elements[0]):
                big_a[self.a(lane, i)] = a[lane][i]
            for i in range(self.elements[1]):
                big_b[self.b(lane, i)] = b[lane][i]
            for i in range(self.elements[2]):
                big_c[self.c(lane, i)] = c[lane][i]
        d = (big_a @ big_b + big_c).astype(np.dtype(self.dtype_out.name))
        return [tuple(d[self.c(lane, i)].item() for i in range(self.elements[2])) for lane in range(self.threads)]


# NVIDIA's mma.m16n8k16 with f16 (or bf16) A and B and an f32 accumulator, sm_80 and later: lane l is thread
# (group l // 4, t l % 4). A (row-major 16 x 16): elements 0,1 at row g, columns 2t and 2t+1; 2,3 at row g+8;
# 4..7 the same 8 columns further. B (16 x 8): elements 0,1 at rows 2t, 2t+1 of column g; 2,3 eight rows down.
# C and D (16 x 8): elements 0,1 at row g, columns 2t, 2t+1; 2,3 at row g+8.
def _mma_a(lane: Any, i: Any) -> tuple[Any, Any]:
    return lane // 4 + 8 * ((i // 2) % 2), (lane % 4) * 2 + i % 2 + 8 * (i // 4)


def _mma_b(lane: Any, i: Any) -> tuple[Any, Any]:
    return (lane % 4) * 2 + i % 2 + 8 * (i // 2), lane // 4


def _mma_c(lane: Any, i: Any) -> tuple[Any, Any]:
    return lane // 4 + 8 * (i // 2), (lane % 4) * 2 + i % 2


# In fragment order, A's block (rows h g, columns q t p: row g + 8h, column 2t + p + 8q) is stored g t q h p: lane
# 4g + t, element 4q + 2h + p; B's (rows q t p, columns g) is stored g t q p: lane 4g + t, element 2q + p
MMA_M16N8K16_F16 = TensorCore(
    "mma_m16n8k16_f16_f32",
    (16, 8, 16),
    dtypes.float16,
    dtypes.float32,
    32,
    (8, 4, 4),
    _mma_a,
    _mma_b,
    _mma_c,
    a_order=((2, 8), (2, 4, 2), (1, 3, 2, 0, 4)),
    b_order=((2, 4, 2), (8,), (3, 1, 0, 2)),
)

# the same instruction for bfloat16 A and B (`.bf16`, sm_80 and later): the same fragments, the operands the 16-bit
# patterns that narrowfloat.py keeps bfloat16 values as
MMA_M16N8K16_BF16 = dataclasses.replace(MMA_M16N8K16_F16, name="mma_m16n8k16_bf16_f32", dtype_in=dtypes.bfloat16)


# NVIDIA's warpgroup MMA (`wgmma.mma_async`, sm_90a): the 4 warps of a warpgroup (128 threads, lane 32w + l) compute
# a 64 x N block. A comes from registers: warp w holds rows 16w .. 16w + 15 of each 16 columns of k as mma.m16n8k16
# holds its A (element 8c + j: k chunk c, mma's element j). D likewise: warp w's rows, each 8 columns as mma's C
# (element 4j + e: columns 8j .., mma's element e). B is read from shared memory: the CUDA renderer's helper stores
# lane l's elements 8j .. 8j + 7 as 16-byte row r = 128 j + l of a tile of NVIDIA's core matrices (128 bytes, 8
# rows of 16) without swizzle, in one of two layouts:
# - K-major (the instruction's B as it is): a core matrix is 8 columns of n, each 8 contiguous values of k; the two
#   k halves of a 16-row chunk 128 bytes apart, the next 8 columns 256 bytes on: element (k, n) of the tile at
#   16N (k // 16) + 128 (n // 8) + 64 (k // 8 % 2) + 8 (n % 8) + k % 8. Checked on an H100.
# - N-major (`row_major`: imm-trans-b): a core matrix is 8 rows of k, each 8 contiguous values of n; row r holds k
#   r % 8 of columns 8 (r // 8 % (N / 8)) .., the second 8 of a chunk's 16 k N rows on, the next chunk 2N rows on.
#   The sum runs over k in any order, so the instruction's k (column 16c + 8q + 2t + p of A, for lane 4g + t) stands
#   for the matmul's k = 4C t + 4c + 2q + p (C = K / 16 chunks): a lane's A values of one row are then 4C contiguous
#   values of k, and it reads them from a row-major A as whole 16-byte loads, not as pairs. B's rows are renumbered
#   the same way, so each 16-byte row of the tile is 8 contiguous values of a row-major B's row: `x @ y` reads both
#   operands as they are stored, with no copies into fragment order. Not yet run on a GPU.
def _wgmma_k(chunks: int, c: Any, q: Any, t: Any, p: Any) -> Any:
    """The matmul's k for the instruction's k 16c + 8q + 2t + p of a block of `chunks` 16s of k, renumbered (see
    above; its digits given apart: no division of a sum of the lane's part and the element's, see `_row_digit`)."""
    return 4 * chunks * t + 4 * c + 2 * q + p


def _wgmma_a(k: int, renumbered: bool) -> Position:
    def a(lane: Any, i: Any) -> tuple[Any, Any]:
        row, col = _mma_a(lane % 32, i % 8)  # mma's element i % 8: column 2t + p + 8q of its 16, t = lane % 4
        if renumbered:
            col = _wgmma_k(k // 16, i // 8, i // 4 % 2, lane % 4, i % 2)
        else:
            col = col + 16 * (i // 8)
        return row + 16 * (lane // 32), col

    return a


def _wgmma_c(lane: Any, i: Any) -> tuple[Any, Any]:
    row, col = _mma_c(lane % 32, i % 4)
    return row + 16 * (lane // 32), col + 8 * (i // 4)


def _row_digit(lane: Any, j: int, low: int, size: int) -> Any:
    """Digit `r // low % size` of row `r = 128 j + lane` (powers of two all), written so that no division divides a
    sum of the lane's part and j's: the simplifier then sees which of a lane's elements are neighbours in memory,
    and the devectorizer loads them at once."""
    if low * size <= 128:
        return lane // low % size
    if low >= 128:
        return j // (low // 128) % size
    return lane // low + j % (low * size // 128) * (128 // low)


def _wgmma_b(n: int, k: int, n_major: bool) -> Position:
    # lane l's elements 8j .. 8j + 7 are row 128 j + l of the tile, whose digits are (place value, size) in rows
    if n_major:
        digits = ((1, 8), (8, n // 8), (n, 2), (2 * n, k // 16))  # kl, n8, kh, chunk

        def b_n_major(lane: Any, i: Any) -> tuple[Any, Any]:
            kl, n8, kh, chunk = (_row_digit(lane, i // 8, low, size) for low, size in digits)
            return _wgmma_k(k // 16, chunk, kh, kl // 2, kl % 2), 8 * n8 + i % 8

        return b_n_major
    digits = ((1, 8), (8, 2), (16, n // 8), (2 * n, k // 16))  # nl, kh, n8, chunk

    def b_k_major(lane: Any, i: Any) -> tuple[Any, Any]:
        nl, kh, n8, chunk = (_row_digit(lane, i // 8, low, size) for low, size in digits)
        return 16 * chunk + 8 * kh + i % 8, 8 * n8 + nl

    return b_k_major


def wgmma(n: int, k: int, dtype_in: DType = dtypes.float16, row_major: bool = False) -> TensorCore:
    """The warpgroup MMA computing 64 x `n` blocks over `k` (a multiple of 16: one instruction a 16) from `dtype_in`
    (float16 or bfloat16) into float32, its B tile K-major, or N-major with k renumbered where `row_major` (see the
    comment above).

    >>> tc = wgmma(128, 16)
    >>> tc.name, tc.elements, tc.b(1, 0), tc.c(33, 5)
    ('wgmma_m64n128k16_f16_f32', (8, 16, 64), (0, 1), (16, 11))
    >>> wgmma(128, 16, row_major=True).name
    'wgmma_m64n128k16_f16_f32_rowmajor'
    """
    if n & (n - 1) or not 64 <= n <= 256 or k & (k - 1) or k < 16:
        raise ValueError(f"wgmma: n must be a power of two from 64 to 256 and k one from 16, got n={n}, k={k}")
    return _wgmma(n, k, dtype_in, row_major)


@functools.cache  # one object a shape: WMMA UOps compare their tensor cores by identity
def _wgmma(n: int, k: int, dtype_in: DType, row_major: bool) -> TensorCore:
    kind = "bf16" if dtype_in is dtypes.bfloat16 else "f16"
    a_order: FragmentOrder
    b_order: FragmentOrder
    if row_major:
        # A (rows w h g, columns t c q p) stored c w g t q h p: lane 32w + 4g + t's elements 8c + 4q + 2h + p are the
        # 16 bytes at 128c + lane; B (rows t c q p, columns n8 nl) stored c q n8 t p nl, the shared tile's order
        a_order = ((4, 2, 8), (4, k // 16, 2, 2), (4, 0, 2, 3, 5, 1, 6))
        b_order = ((4, k // 16, 2, 2), (n // 8, 8), (1, 2, 4, 0, 3, 5))
    else:
        # A (rows w h g, columns c q t p) stored c w g t q h p: lane 32w + 4g + t's elements 8c + 4q + 2h + p are the
        # 16 bytes at 128c + lane; B (rows c kh kl, columns n8 nl) stored c n8 kh nl kl, the shared tile's order
        a_order = ((4, 2, 8), (k // 16, 2, 4, 2), (3, 0, 2, 5, 4, 1, 6))
        b_order = ((k // 16, 2, 8), (n // 8, 8), (0, 3, 1, 4, 2))
    # either way a warp's load of 16 bytes a lane from a copy in fragment order reads 512 contiguous bytes, and its
    # stores into the tile fill them
    return TensorCore(
        f"wgmma_m64n{n}k{k}_{kind}_f32" + ("_rowmajor" if row_major else ""),
        (64, n, k),
        dtype_in,
        dtypes.float32,
        128,
        (k // 2, k * n // 128, n // 2),
        _wgmma_a(k, row_major),
        _wgmma_b(n, k, row_major),
        _wgmma_c,
        a_order=a_order,
        b_order=b_order,
        reads_row_major=row_major,
    )


def _bfloat16_values(lanes: list[Any]) -> list[list[float]]:
    """Each lane's bfloat16 bit patterns as the floats they hold (a bfloat16 is the high half of a float32)."""
    bits = np.array(lanes, dtype=np.uint32) << 16
    return bits.view(np.float32).astype(np.float64).tolist()


# AMD's RDNA3 WMMA (gfx11, wave32), v_wmma_f32_16x16x16_f16: lane l holds row l % 16 of A (all 16 of its k) and
# column l % 16 of B, lanes 16..31 the same as lanes 0..15; of C and D (16 x 16) it holds column l % 16, rows
# 2i + l // 16 for its elements i = 0..7
def _rdna3_a(lane: Any, i: Any) -> tuple[Any, Any]:
    return lane % 16, i


def _rdna3_b(lane: Any, i: Any) -> tuple[Any, Any]:
    return i, lane % 16


def _rdna3_c(lane: Any, i: Any) -> tuple[Any, Any]:
    return 2 * i + lane // 16, lane % 16


WMMA_16_16_16_F16_RDNA3 = TensorCore(
    "WMMA_16_16_16_half_float",
    (16, 16, 16),
    dtypes.float16,
    dtypes.float32,
    32,
    (16, 16, 8),
    _rdna3_a,
    _rdna3_b,
    _rdna3_c,
)

# the same WMMA for bfloat16 A and B (v_wmma_f32_16x16x16_bf16, gfx11): the same layout, the operands their bits
WMMA_16_16_16_BF16_RDNA3 = dataclasses.replace(
    WMMA_16_16_16_F16_RDNA3, name="WMMA_16_16_16_bf16_float", dtype_in=dtypes.bfloat16
)

_TENSOR_CORES: dict[str, tuple[TensorCore, ...]] = {
    "CUDA": (MMA_M16N8K16_F16, MMA_M16N8K16_BF16),
    "PTX": (MMA_M16N8K16_F16, MMA_M16N8K16_BF16),
    "HIP": (WMMA_16_16_16_F16_RDNA3, WMMA_16_16_16_BF16_RDNA3),
}


def tensor_core(name: str) -> TensorCore:
    """The tensor core called `name` (how pyrender's source and pickles name one)."""
    if name.startswith("wgmma_"):
        n, k = name.split("m64n")[1].split("_")[0].split("k")
        kind = dtypes.bfloat16 if "_bf16_" in name else dtypes.float16
        return wgmma(int(n), int(k), kind, name.endswith("_rowmajor"))
    return next(tc for tcs in _TENSOR_CORES.values() for tc in tcs if tc.name == name)


PYRENDER_GLOBALS["tensor_core"] = tensor_core


def tensor_cores(device: str) -> tuple[TensorCore, ...]:
    """The tensor cores a device's renderer can use (none for the CPU-side devices)."""
    return _TENSOR_CORES.get(device, ())
