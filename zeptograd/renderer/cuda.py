"""The CUDA C renderer: the C renderer's walk over the linear program, in CUDA C's spelling.

A kernel is `extern "C" __global__ void __launch_bounds__(N) name(float* __restrict__ data0, ...)`: C linkage so
the driver finds it by the program's name, and launch bounds that tell the compiler how many threads a block
has (it budgets registers for that many). What differs from the C device's C:

- types are C++'s own (`signed char`, `long long`, ...; no headers to find), half is `half` from
  `<cuda_fp16.h>` (included only by kernels that use it: it is the one header a kernel needs);
- the math is CUDA's (`exp2f`, `sqrtf`, `fmaf`, ...; NVRTC runs without fast math and with `--fmad=false`,
  so `a * b + c` is rounded twice unless the program asks for the fused multiply-add, as on the CPU);
- bit casts are the `__int_as_float` family, or a union for the pairs that have none;
- the launch indices (codegen/gpudims.py) are `blockIdx` (`gidxN`) and `threadIdx` (`lidxN`), dimensions 0, 1, 2
  as x, y, z; local memory is `__shared__` and BARRIER is `__syncthreads()`.

Vectors are not rendered (every op is one lane: `max_lanes` is 1; float4 loads and stores are still to come),
except a tensor core's fragments: WMMA (the TC opt, codegen/tensor_cores.py) takes a lane's A and B elements as
`zg_half8` and `zg_half4`, its accumulator as `zg_float4` (structs of arrays, so `x.v[i]` is one lane), and is a
call of a helper around the `mma.sync` instruction, written into the kernels that use it. A renderer for sm_90a
(`CUDARenderer("sm_90a")`, the CUDA device's on an H100 or H200) offers the warpgroup MMA first: its helper stores
each lane's B into shared memory and calls `wgmma.mma_async` (`wgmma_helper`).

>>> from zeptograd import Tensor
>>> from zeptograd.codegen import get_program
>>> from zeptograd.schedule.kernelize import create_schedule
>>> a = Tensor.ones(4).contiguous().realize()
>>> (item,), _ = create_schedule([(a * 2).uop], ["CPU"])
>>> 'extern "C" __global__' in get_program(item.ast, CUDARenderer()).src
True
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

from zeptograd.codegen.tensor_cores import MMA_M16N8K16_BF16, MMA_M16N8K16_F16, TensorCore, wgmma
from zeptograd.dtype import DType, PtrDType, dtypes
from zeptograd.helpers import ContextVar
from zeptograd.renderer.cstyle import MATH_FUNCTIONS, CRenderer, render_const
from zeptograd.renderer.host import HostCPU
from zeptograd.uop.ops import Ops, UOp

CUDA_TYPES: dict[DType, str] = {
    dtypes.bool: "bool",
    dtypes.int8: "signed char",
    dtypes.uint8: "unsigned char",
    dtypes.int16: "short",
    dtypes.uint16: "unsigned short",
    dtypes.int32: "int",
    dtypes.uint32: "unsigned int",
    dtypes.int64: "long long",
    dtypes.uint64: "unsigned long long",
    dtypes.float16: "half",
    dtypes.float32: "float",
    dtypes.float64: "double",
}
# what CUDA stores and computes: every dtype above; bfloat16 and fp8 are lowered to their storage bits and float32
# arithmetic before rendering (codegen/narrowfloat.py), as on every device
CUDA_DTYPES: tuple[DType, ...] = tuple(CUDA_TYPES)

PRELUDE = """#define INFINITY __int_as_float(0x7f800000)
#define NAN __int_as_float(0x7fffffff)
template <typename T, typename F> __device__ __forceinline__ T zg_bitcast(F x) {
  union { F a; T b; } u;
  u.a = x;
  return u.b;
}
"""

# floor division and modulo for operands of either sign (C++'s / and % truncate toward zero)
FLOOR_HELPERS = """__device__ __forceinline__ long long floordiv(long long a, long long b) {
  long long q = a / b;
  return q - ((a % b != 0) & ((a < 0) != (b < 0)));
}
__device__ __forceinline__ long long floormod(long long a, long long b) {
  long long r = a % b;
  return r + (((r != 0) & ((r < 0) != (b < 0))) ? b : 0);
}
"""

# the vector types a WMMA's fragments need: (lane dtype, lanes) -> struct name, and the struct's alignment (16 bytes
# at most: a fragment is loaded 16 bytes an instruction). mma.sync's are 8 halves, 4 halves and 4 floats; a wgmma's
# up to 128 halves of B and 128 floats of D
FRAGMENT_BASES = {dtypes.float32: "float", dtypes.float16: "half", dtypes.uint16: "ushort"}  # uint16: bfloat16 bits
FRAGMENT_TYPES: dict[tuple[DType, int], tuple[str, int]] = {
    (dt, count): (f"zg_{name}{count}", min(16, count * dt.itemsize))
    for dt, name in FRAGMENT_BASES.items()
    for count in range(4, 129, 4)
}

# mma.sync for one lane: its A elements packed two 16-bit values to a 32-bit register (the first in the low bits),
# its B elements likewise, its four float accumulators in and out; one helper a tensor core (f16 or bf16 operands)
MMA_HELPER = """__device__ __forceinline__ zg_float4 zg_NAME(A_TYPE a, B_TYPE b, zg_float4 c) {
  const unsigned* x = reinterpret_cast<const unsigned*>(&a);
  const unsigned* y = reinterpret_cast<const unsigned*>(&b);
  asm("mma.sync.aligned.m16n8k16.row.col.f32.TYPE.TYPE.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(c.v[0]), "+f"(c.v[1]), "+f"(c.v[2]), "+f"(c.v[3])
      : "r"(x[0]), "r"(x[1]), "r"(x[2]), "r"(x[3]), "r"(y[0]), "r"(y[1]));
  return c;
}
"""
MMA_TYPES = {dtypes.float16: "f16", dtypes.bfloat16: "bf16"}  # the instruction's name for A's and B's dtype

# wgmma for one lane of a warpgroup (codegen/tensor_cores.py's wgmma): its B elements go into the warpgroup's tile of
# shared memory, which the instruction reads by a descriptor; A (two 16-bit values a register) and the accumulators
# are registers. One asm statement (not volatile: its only effects are its registers and its own tile) stores the
# lane's 16-byte rows, makes the stores visible to the tensor core's reads (fence.proxy.async), waits at the
# warpgroup's own barrier (1 + its index) until the whole tile is stored, issues one wgmma a 16 of k and waits for
# them (the accumulators are the caller's again). The descriptor (PTX ISA, "matrix descriptor"): the tile's address,
# the byte offsets between core matrices adjacent along k and along n (`wgmma_strides`), each over 16, no swizzle;
# the instruction's imm-trans-b says whether the tile is N-major (codegen/tensor_cores.py's two layouts). An H100
# computed the right products with the K-major tile's strides, and wrong ones with the two exchanged (bench/cuda.py
# --wgmma, which checks both layouts). The shape (an H100, fp16 4096^3, the kernel alone, K-major): n 128 and k 32
# with 2 warpgroups a block 349 TFLOP/s; k 16: 251-289, k 64: 223-338 (k 128 with bank conflicts before the rows
# were interleaved: 86)
WGMMA_STAGES = 2  # shared tiles a warpgroup uses in turn (1: a barrier more a step, 314 against 349 TFLOP/s)
WGMMA_SHAPE = (128, 32)  # the n and k of the warpgroup MMA the sm_90a renderer offers
# offer the wgmma that reads row-major operands as they are (no copies into fragment order; not yet run on a GPU:
# bench/cuda.py --wgmma checks and times it), not the K-major one
WGMMA_ROW_MAJOR = ContextVar("WGMMA_ROW_MAJOR", 0)


def wgmma_strides(tc: TensorCore) -> tuple[int, int]:
    """Bytes between core matrices of a 16 x n chunk of the wgmma `tc`'s B tile adjacent along k and along n: K-major
    the second 8 of k 128 bytes on, the next 8 columns 256; N-major the second 8 of k n rows of 16 bytes on, the next
    8 columns the next 128 bytes."""
    return (16 * tc.dims[1], 128) if tc.reads_row_major else (128, 256)


SHARED_LIMIT = 48 * 1024  # bytes of static __shared__ memory a block may declare


def wgmma_shared_bytes(uops: Sequence[UOp]) -> int:
    """The bytes of shared memory one warpgroup's wgmma helpers declare (their B tiles, WGMMA_STAGES of each)."""
    return sum(
        2 * WGMMA_STAGES * tc.dims[1] * tc.dims[2]
        for tc in {u.arg for u in uops if u.op is Ops.WMMA and u.arg.warpgroup}
    )


def wgmma_helper(tc: TensorCore, groups: int) -> str:
    """The CUDA C helper of a wgmma tensor core for blocks of `groups` warpgroups (see WGMMA_STAGES' comment).
    With WGMMA_STAGES = 2 each warpgroup has two tiles, used in turn (the kernel's `zg_stage` says which): the
    wgmma that read a tile was waited for by every warp before the barrier after the other tile's stores, so the
    first barrier goes."""
    stages = WGMMA_STAGES
    _, n, k = tc.dims
    a_count, b_count, c_count = tc.elements
    a_type, b_type = (FRAGMENT_TYPES[(tc.operand_dtype, count)][0] for count in (a_count, b_count))
    c_type = FRAGMENT_TYPES[(dtypes.float32, c_count)][0]
    tile = k * n  # 16-bit values in a warpgroup's tile
    k_stride, n_stride = wgmma_strides(tc)
    transposed = int(tc.reads_row_major)  # imm-trans-b: an N-major tile
    a_regs, b_regs = a_count // 2, b_count // 2
    first_a, first_b = c_count, c_count + a_regs
    at, desc, bar = first_b + b_regs, first_b + b_regs + 1, first_b + b_regs + 2
    accumulators = ", ".join(f"%{i}" for i in range(c_count))
    lines = ["{", ".reg .pred p;", "setp.ne.b32 p, 1, 0;"] + ([f"bar.sync %{bar}, 128;"] if stages == 1 else [])
    for i in range(0, b_regs, 4):  # each 16 bytes of the lane's, 2048 bytes (the warpgroup's 16 bytes) apart
        values = ", ".join(f"%{first_b + j}" for j in range(i, i + 4))
        lines.append(f"st.shared.v4.b32 [%{at}+{512 * i}], {{{values}}};")
    lines += ["fence.proxy.async.shared::cta;", f"bar.sync %{bar}, 128;", "wgmma.fence.sync.aligned;", ".reg .b64 d;"]
    kind = MMA_TYPES[tc.dtype_in]
    for chunk in range(k // 16):
        a = ", ".join(f"%{first_a + 4 * chunk + j}" for j in range(4))
        lines.append(f"add.s64 d, %{desc}, {chunk * 32 * n // 16};")  # the chunk's 16 x n tile, 32n bytes on
        instruction = f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{kind}.{kind}"
        lines.append(f"{instruction} {{{accumulators}}}, {{{a}}}, d, p, 1, 1, {transposed};")
    lines += ["wgmma.commit_group.sync.aligned;", "wgmma.wait_group.sync.aligned 0;", "}"]
    asm = "\n      ".join(f'"{line}\\n"' for line in lines)
    outputs = ", ".join(f'"+f"(c.v[{i}])' for i in range(c_count))
    inputs = ", ".join([f'"r"(x[{i}])' for i in range(a_regs)] + [f'"r"(y[{i}])' for i in range(b_regs)])
    return f"""__device__ __forceinline__ {c_type} zg_{tc.name}({a_type} a, {b_type} b, {c_type} c, unsigned& stage) {{
  __shared__ __align__(128) unsigned short tiles[{groups * stages * tile}];
  const unsigned thread = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
  const unsigned base = (unsigned)__cvta_generic_to_shared(tiles + ((thread / 128) * {stages} + stage) * {tile});
  stage = (stage + 1) % {stages};
  const unsigned at = base + (thread % 128) * 16;
  const unsigned long long desc = (unsigned long long)((base & 0x3FFFF) >> 4) | ({k_stride >> 4}ull << 16) |
    ({n_stride >> 4}ull << 32);
  const unsigned* x = reinterpret_cast<const unsigned*>(&a);
  const unsigned* y = reinterpret_cast<const unsigned*>(&b);
  asm(
      {asm}
      : {outputs}
      : {inputs}, "r"(at), "l"(desc), "r"(thread / 128 + 1));
  return c;
}}
"""


def mma_helper(tc: TensorCore) -> str:
    """The CUDA C helper of an mma.sync tensor core (MMA_HELPER for its name and operand types)."""
    lanes = tc.operand_dtype
    a, b = FRAGMENT_TYPES[(lanes, tc.elements[0])][0], FRAGMENT_TYPES[(lanes, tc.elements[1])][0]
    text = MMA_HELPER.replace("A_TYPE", a).replace("B_TYPE", b)
    return text.replace("NAME", tc.name).replace("TYPE", MMA_TYPES[tc.dtype_in])


# A tensor-core kernel with at most TC_MAX_WMMAS WMMAs a warp (a tile of 2 x 8 blocks) fits in 128 registers a
# thread: asking for TC_THREADS_PER_SM threads an SM (4 blocks of 128, `__launch_bounds__`'s second argument) keeps
# 16 warps' loads in flight instead of the 12 that 129 registers leave room for (the kernel waits on memory, not on
# the tensor cores), which makes a large fp16 matmul's kernel about 40% faster. With more WMMAs the cap spills and
# the kernel runs at half its speed, so those kernels get no minimum
TC_MAX_WMMAS = 16
TC_THREADS_PER_SM = 512
# a tensor-core kernel's k loop is unrolled by nvcc this many times: the next steps' fragment loads are issued while
# this step's WMMAs run, so the tensor cores wait less on memory
TC_UNROLL = 4


def min_blocks(uops: Sequence[UOp], threads: int) -> int:
    """Blocks an SM should hold at once for a kernel of `threads` threads a block (0: no minimum asked): for a
    tensor-core kernel of at most TC_MAX_WMMAS WMMAs, TC_THREADS_PER_SM threads' worth.

    >>> min_blocks([], 128)
    0
    """
    wmmas = sum(1 for u in uops if u.op is Ops.WMMA and not u.arg.warpgroup)  # mma.sync's
    return TC_THREADS_PER_SM // threads if 0 < wmmas <= TC_MAX_WMMAS and threads < TC_THREADS_PER_SM else 0


# CUDA's limits per axis x, y, z: blocks in the grid, threads in a block
GRID_LIMITS = (2**31 - 1, 65535, 65535)
BLOCK_LIMITS = (1024, 1024, 64)


def launch_order(uops: Sequence[UOp]) -> tuple[int, ...]:
    """Which CUDA axis (0, 1, 2: x, y, z) runs each launch dimension of a program (its gidxN / lidxN): dimension n
    on axis n, unless that is over CUDA's limits (more than 65535 blocks on y or z, more than 64 threads on z);
    then the first order, in itertools' order, that fits. The renderer and the runtime both use it.

    >>> from zeptograd.uop.ops import UOp
    >>> g = lambda n, size: UOp(Ops.SPECIAL, dtypes.index, (UOp.const(dtypes.index, size),), f"gidx{n}")
    >>> launch_order([g(0, 5), g(1, 70000)]), launch_order([g(0, 70000), g(1, 5)])
    ((1, 0, 2), (0, 1, 2))
    """
    groups, local = [1, 1, 1], [1, 1, 1]
    for u in uops:
        if u.op is Ops.SPECIAL and u.arg[:4] in ("gidx", "lidx"):
            (groups if u.arg[0] == "g" else local)[int(u.arg[4:])] = u.src[0].arg
    for order in itertools.permutations(range(3)):
        if all(groups[n] <= GRID_LIMITS[order[n]] and local[n] <= BLOCK_LIMITS[order[n]] for n in range(3)):
            return order
    raise ValueError(f"a launch of {groups} blocks of {local} threads fits no order of CUDA's axes")


# the intrinsics that reinterpret bits, by (from, to); other pairs go through zg_bitcast's union
_BITCASTS = {
    (dtypes.int32, dtypes.float32): "__int_as_float",
    (dtypes.float32, dtypes.int32): "__float_as_int",
    (dtypes.uint32, dtypes.float32): "__uint_as_float",
    (dtypes.float32, dtypes.uint32): "__float_as_uint",
    (dtypes.int64, dtypes.float64): "__longlong_as_double",
    (dtypes.float64, dtypes.int64): "__double_as_longlong",
    (dtypes.int16, dtypes.float16): "__short_as_half",
    (dtypes.float16, dtypes.int16): "__half_as_short",
    (dtypes.uint16, dtypes.float16): "__ushort_as_half",
    (dtypes.float16, dtypes.uint16): "__half_as_ushort",
}


class CUDARenderer(CRenderer):
    """Renders a linear program as a CUDA C kernel (see the module docstring)."""

    device = "CUDA"
    has_local = True  # launched over blocks of threads: codegen/gpudims.py makes the launch indices
    has_threads = False
    runs_on_cpu = False
    max_local_size = 1024  # threads in a block at most, on every GPU since compute capability 2.0
    local_size = 256  # threads a block the heuristic aims for: 8 warps, several blocks resident on each SM
    fragment_load_lanes = 8  # a WMMA operand in 16-byte loads where they are contiguous and aligned
    _tensor_cores = False  # the program being rendered has WMMAs (its loops get TC_UNROLL)
    _warpgroups = False  # ... and they are warpgroup MMAs (a zg_stage counter for their shared tiles)
    packs_narrow_values = True  # the heuristic gives an elementwise kernel's threads 4 bytes of 1- or 2-byte values
    paired_gated_stores = False  # a thread stores its own lanes
    local_memory_bytes = SHARED_LIMIT

    def __init__(self, arch: str = "sm_80") -> None:
        """`arch`: the GPU's architecture the kernels are compiled for: mma.sync tensor cores from sm_80, and on
        sm_90a (an H100's or H200's own) the warpgroup MMA first (WGMMA_SHAPE), which the heuristic then picks."""
        super().__init__(HostCPU())  # no CPU runs the kernels: none of a host's vector widths or builtins
        self.arch = arch
        mma = (MMA_M16N8K16_F16, MMA_M16N8K16_BF16)
        self.tensor_cores: tuple[TensorCore, ...] = mma
        if arch == "sm_90a":
            row_major = bool(WGMMA_ROW_MAJOR)
            wgmmas = tuple(wgmma(*WGMMA_SHAPE, dt, row_major) for dt in (dtypes.float16, dtypes.bfloat16))
            self.tensor_cores = (*wgmmas, *mma)

    def supported_dtypes(self) -> frozenset[DType]:
        """Every scalar dtype C has, half and double included (every GPU from sm_53 on has both).

        >>> dtypes.float16 in CUDARenderer().supported_dtypes()
        True
        """
        return frozenset(CUDA_DTYPES)

    def max_lanes(self, op: Ops, dt: DType) -> int:
        """One lane for every op: the renderer writes no vector types yet."""
        return 1

    def type_name(self, dt: DType) -> str:
        if isinstance(dt, PtrDType):
            return self.type_name(dt.base) + "*"
        if dt.count > 1 and (dt.scalar(), dt.count) in FRAGMENT_TYPES:
            return FRAGMENT_TYPES[(dt.scalar(), dt.count)][0]
        if dt.count > 1 or dt not in CUDA_TYPES:
            raise NotImplementedError(f"the CUDA renderer has no type for {dt!r}")
        return CUDA_TYPES[dt]

    def shuffle(self, a: str, b: str, idxs: Sequence[int]) -> str | None:
        return None  # lanes are gathered one by one

    def vector_literal(self, dt: DType, lanes: list[str]) -> str:
        return f"{self.type_name(dt)}{{{{{', '.join(lanes)}}}}}"

    def lane(self, vec: str, i: int) -> str:
        return f"{vec}.v[{i}]"

    def load(self, dt: DType, index: UOp, lvalue: str) -> str:
        ptr = index.src[0].dtype
        if dt.count > 1 and isinstance(ptr, PtrDType) and ptr.base.count == 1:
            # a whole fragment from a buffer of scalars (devectorizer.fragment: aligned to its size, as the struct is)
            return f"(*reinterpret_cast<const {self.type_name(dt)}*>(&{lvalue}))"
        return lvalue

    def store(self, dt: DType, index: UOp, lvalue: str, value: str) -> str:
        return f"{lvalue} = {value};"

    def const(self, value: object, dt: DType) -> str:
        if dt.count > 1:
            return self.vector_literal(dt, [self.const(value, dt.scalar())] * dt.count)
        if dt is dtypes.float16:
            return f"((half)({render_const(value, dtypes.float32)}))"
        if dtypes.is_int(dt) and dt.itemsize < 4:
            assert isinstance(value, int)
            return f"(({self.type_name(dt)})({value}))"
        return render_const(value, dt)

    def param(self, u: UOp, name: str, written: bool) -> str:
        assert isinstance(u.dtype, PtrDType)
        return f"{'' if written else 'const '}{self.type_name(u.dtype.base)}* __restrict__ {name}"

    def special(self, u: UOp, params: list[tuple[int, str]]) -> str | None:
        kind = {"g": "blockIdx", "l": "threadIdx"}.get(u.arg[0])
        if kind is None or u.arg[:4] not in ("gidx", "lidx") or u.arg[4:] not in ("0", "1", "2"):
            raise NotImplementedError(f"the CUDA renderer has no launch index {u.arg!r} (gidxN and lidxN)")
        t = self.type_name(u.dtype)
        return f"const {t} {u.arg} = ({t}){kind}.{'xyz'[self._order[int(u.arg[4:])]]};"

    def bitcast(self, u: UOp, x: str) -> str:
        src, dst = u.src[0].dtype, u.dtype
        if (fn := _BITCASTS.get((src, dst))) is not None:
            return f"{fn}({x})"
        return f"zg_bitcast<{self.type_name(dst)}, {self.type_name(src)}>({x})"

    def other(self, u: UOp, src: list[str], names: dict[UOp, str]) -> str | None:
        if u.op is Ops.DEFINE_LOCAL:
            assert isinstance(u.dtype, PtrDType)
            names[u] = f"temp{u.arg}"
            return f"__shared__ {self.type_name(u.dtype.base)} {names[u]}[{u.dtype.size}];"
        if u.op is Ops.BARRIER:
            return "__syncthreads();"
        if u.op is Ops.WMMA:
            names[u] = f"wmma{sum(1 for x in names if x.op is Ops.WMMA)}"
            args = [*src, "zg_stage"] if u.arg.warpgroup else src  # a wgmma's shared tile in turn
            return self.declare(u.dtype, names[u], f"{self.wmma_helper(u.arg)}({', '.join(args)})")
        return super().other(u, src, names)

    def wmma_helper(self, tc: TensorCore) -> str:
        """The name of the helper function a WMMA of tensor core `tc` calls (written into the prelude)."""
        return f"zg_{tc.name}"

    def render(self, name: str, uops: Sequence[UOp]) -> str:
        # the launch bounds: the threads of one block, the product of the lidx sizes
        self._order = launch_order(uops)
        self._block = math.prod(u.src[0].arg for u in uops if u.op is Ops.SPECIAL and u.arg.startswith("lidx"))
        self._min_blocks = min_blocks(uops, self._block)
        self._tensor_cores = any(u.op is Ops.WMMA for u in uops)
        self._warpgroups = any(u.op is Ops.WMMA and u.arg.warpgroup for u in uops)
        if self._warpgroups and (shared := self._block // 128 * wgmma_shared_bytes(uops)) > self.local_memory_bytes:
            raise ValueError(
                f"{name}: its warpgroup MMAs need {shared} bytes of shared memory a block, more than the "
                f"{self.local_memory_bytes} a kernel may declare (fewer warpgroups a block, or a smaller k)"
            )
        return super().render(name, uops)

    def loop(self, dt: DType, name: str, bound: str) -> str:
        head = super().loop(dt, name, bound)
        return f"#pragma unroll {TC_UNROLL}\n{head}" if self._tensor_cores else head

    def head(self, name: str, args: str) -> str:
        bounds = f"{self._block}, {self._min_blocks}" if self._min_blocks else f"{self._block}"
        head = f'extern "C" __global__ void __launch_bounds__({bounds}) {name}({args}) {{'
        return head + "\n  unsigned zg_stage = 0;" if self._warpgroups else head

    def prelude(self, vectors: bool, needs_floor: bool, uops: Sequence[UOp]) -> str:
        used = {u.dtype.scalar() for u in uops} | {u.dtype.base.scalar() for u in uops if isinstance(u.dtype, PtrDType)}
        half = "#include <cuda_fp16.h>\n" if dtypes.float16 in used else ""
        fragments = sorted({(u.dtype.scalar(), u.dtype.count) for u in uops if u.dtype.count > 1}, key=str)
        structs = "".join(
            f"struct __align__({FRAGMENT_TYPES[f][1]}) {FRAGMENT_TYPES[f][0]} {{ {CUDA_TYPES[f[0]]} v[{f[1]}]; }};\n"
            for f in fragments
            if f in FRAGMENT_TYPES
        )
        tcs = dict.fromkeys(u.arg for u in uops if u.op is Ops.WMMA)
        mma = "".join(wgmma_helper(tc, self._block // 128) if tc.warpgroup else mma_helper(tc) for tc in tcs)
        return half + PRELUDE + structs + mma + (FLOOR_HELPERS if needs_floor else "")

    def _alu(self, u: UOp, src: list[str]) -> tuple[str, bool]:
        op, dt = u.op, u.dtype
        if op is Ops.MULACC and dt in (dtypes.float32, dtypes.float64):
            return f"{'fmaf' if dt is dtypes.float32 else 'fma'}({', '.join(src)})", False
        if op in MATH_FUNCTIONS:
            fn = MATH_FUNCTIONS[op]
            if dt is dtypes.float64:
                return f"{fn}({src[0]})", False
            if dt is dtypes.float32:
                return f"{fn}f({src[0]})", False
            return f"(({self.type_name(dt)})({fn}f((float)({src[0]}))))", False  # half computes in float, as on the CPU
        return super()._alu(u, src)
