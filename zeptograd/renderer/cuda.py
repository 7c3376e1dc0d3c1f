"""The CUDA C renderer: the C renderer's walk over the linear program, in CUDA C's spelling.

A kernel is `extern "C" __global__ void __launch_bounds__(N) name(float* __restrict__ data0, ...)`: C linkage so
the driver finds it by the program's name, and launch bounds that tell the compiler how many threads a block
has (it budgets registers for that many). What differs from the C device's C:

- types are C++'s own (`signed char`, `long long`, ...; no headers to find), half is `half` from
  `<cuda_fp16.h>` (included only by kernels that use it: it is the one header a kernel needs);
- the math is CUDA's (`exp2f`, `sqrtf`, `fmaf`, ...; NVRTC runs without fast math and with `--fmad=false`,
  so `a * b + c` is rounded twice unless the program asks for the fused multiply-add, as on the CPU);
- bit casts are the `__int_as_float` family, or a union for the pairs that have none;
- the core index of a THREAD opt (`SPECIAL("core")`) is the thread's global id,
  `blockIdx.x * blockDim.x + threadIdx.x`, and the threads past the end of the split axis return at once
  (the runtime launches whole blocks of `BLOCK` threads).

Vectors are not rendered (every op is one lane: `max_lanes` is 1); float4 loads come with the GPU launch
machinery.

>>> from zeptograd import Tensor
>>> from zeptograd.codegen import get_program
>>> from zeptograd.schedule.kernelize import create_schedule
>>> a = Tensor.ones(4).contiguous().realize()
>>> (item,), _ = create_schedule([(a * 2).uop], ["CPU"])
>>> 'extern "C" __global__' in get_program(item.ast, CUDARenderer()).src
True
"""

from __future__ import annotations

from zeptograd.dtype import DType, PtrDType, dtypes
from zeptograd.renderer.cstyle import CRenderer, render_const
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

_MATH = {Ops.EXP2: "exp2", Ops.LOG2: "log2", Ops.SIN: "sin", Ops.SQRT: "sqrt", Ops.TRUNC: "trunc"}
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
    restrict = "__restrict__"
    BLOCK = 256  # threads per block of a kernel split by a THREAD opt (its launch bounds)
    thread_per_output = True  # the heuristic's plan: a thread per output index (codegen/heuristic.py)

    def max_lanes(self, op: Ops, dt: DType) -> int:
        """One lane for every op: the renderer writes no vector types yet."""
        return 1

    def type_of(self, dt: DType) -> str:
        if isinstance(dt, PtrDType):
            return self.type_of(dt.base) + "*"
        if dt.count > 1 or dt not in CUDA_TYPES:
            raise NotImplementedError(f"the CUDA renderer has no type for {dt!r}")
        return CUDA_TYPES[dt]

    def const(self, value: object, dt: DType) -> str:
        if dt is dtypes.float16:
            return f"((half)({render_const(value, dtypes.float32)}))"
        if dtypes.is_int(dt) and dt.itemsize < 4:
            assert isinstance(value, int)
            return f"(({self.type_of(dt)})({value}))"
        return render_const(value, dt)

    def math(self, op: Ops, dt: DType, x: str) -> str:
        fn = _MATH[op]
        if dt is dtypes.float64:
            return f"{fn}({x})"
        if dt is dtypes.float32:
            return f"{fn}f({x})"
        return f"(({self.type_of(dt)})({fn}f((float)({x}))))"  # half computes in float, as on the CPU

    def special(self, u: UOp) -> tuple[str | None, list[str]]:
        if u.arg != "core":
            raise NotImplementedError(f"the CUDA renderer has no thread index {u.arg!r}")
        t, n = self.type_of(u.dtype), u.src[0].arg
        # the launch is whole blocks: the threads past the last chunk have nothing to do
        return None, [
            f"const {t} {u.arg} = ({t})blockIdx.x * ({t})blockDim.x + ({t})threadIdx.x;",
            f"if ({u.arg} >= {n}) return;",
        ]

    def bitcast(self, src: DType, dst: DType, x: str) -> str:
        if (fn := _BITCASTS.get((src, dst))) is not None:
            return f"{fn}({x})"
        return f"zg_bitcast<{self.type_of(dst)}, {self.type_of(src)}>({x})"

    def kernel(self, name: str, args: str, body: list[str], needs_floor: bool, vectors: bool) -> str:
        source = "\n".join(body)
        threads = self.BLOCK if "threadIdx.x" in source else 1
        head = f'extern "C" __global__ void __launch_bounds__({threads}) {name}({args}) {{'
        half = "#include <cuda_fp16.h>\n" if "half" in args or "half" in source else ""
        prelude = half + PRELUDE + (FLOOR_HELPERS if needs_floor else "")
        return "\n".join([prelude, head, *body, "}", ""])

    def _alu(self, u: UOp, src: list[str]) -> tuple[str, bool]:
        if u.op is Ops.MULACC and u.dtype in (dtypes.float32, dtypes.float64):
            return f"{'fmaf' if u.dtype is dtypes.float32 else 'fma'}({', '.join(src)})", False
        return super()._alu(u, src)
