"""The HIP renderer: AMD's HIP C as a dialect of the CUDA renderer, lowered as docs/internals.md's contract says.

What differs from CUDA C (everything else, the walk over the linear program included, is the C-style family's):

- the kernel is `extern "C" __attribute__((global)) void __attribute__((amdgpu_flat_work_group_size(1, N)))`, and
  nothing is included: every device function a kernel calls is declared in its prelude (no ROCm headers needed);
- SPECIAL is `__ockl_get_group_id(dim)` (`gidxN`) and `__ockl_get_local_id(dim)` (`lidxN`), dimension N on axis N
  (AMD's grid has no 65535 limit on y and z);
- INDEX is `(base+idx)` and a LOAD `(*(base+idx))`; a gated LOAD is `(gate ? *(base+idx) : fallback)`, a gated
  STORE `if (gate) { ... }` (codegen's IF/STORE/ENDIF), a STORE `*(base+idx) = value;`;
- bit casts are `__builtin_bit_cast(T, (S)(x))`; half is `_Float16`;
- the transcendentals and the square root are ROCm's device library, `__ocml_exp2_f32` and friends (`_f16`,
  `_f64` by dtype), the fused multiply-add `__ocml_fma_f32`; `renderer.native_transcendentals` keeps EXP2, LOG2,
  SIN, COS, TAN, EXP and TANH as ops for it;
- local memory is `__attribute__((shared))`, BARRIER a workgroup fence, `__builtin_amdgcn_s_barrier()` and a fence;
- a vector (a tensor core's fragments) is a clang `ext_vector_type`, built by `make_half16(...)`-style helpers and
  read lane by lane with `[i]`; WMMA is a call of the `__WMMA_16_16_16_half_float` helper around RDNA3's
  `__builtin_amdgcn_wmma_f32_16x16x16_f16_w32` (wave32: gfx11), or of `__WMMA_16_16_16_bf16_float` around the
  `_bf16_w32` one for bfloat16 operands (their bits, `ushort16`).

There is no AMD GPU to run it: `runtime/ops_hip.py` compiles it with clang for gfx1100 and gfx90a (the tests), and
its semantics are those of the linear program, which runs on the PYTHON device and on CUDA.

>>> from zeptograd import Tensor
>>> from zeptograd.codegen import get_program
>>> from zeptograd.schedule.kernelize import create_schedule
>>> a = Tensor.ones(4).contiguous().realize()
>>> (item,), _ = create_schedule([(a * 2).uop], ["CPU"])
>>> "__ockl_get_local_id(0)" in get_program(item.ast, HIPRenderer()).src
True
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from zeptograd.codegen.tensor_cores import WMMA_16_16_16_BF16_RDNA3, WMMA_16_16_16_F16_RDNA3, TensorCore
from zeptograd.dtype import DType, PtrDType, dtypes
from zeptograd.renderer.cstyle import MATH_FUNCTIONS
from zeptograd.renderer.cuda import CUDA_TYPES, CUDARenderer
from zeptograd.renderer.cuda import FLOOR_HELPERS as CUDA_FLOOR_HELPERS
from zeptograd.uop.ops import Ops, UOp

HIP_TYPES: dict[DType, str] = {**CUDA_TYPES, dtypes.float16: "_Float16"}
# a vector type is its scalar's short name and its lanes (`half16`, `ushort16`, `float8`)
VECTOR_NAMES: dict[DType, str] = {dtypes.float16: "half", dtypes.uint16: "ushort"}

# what each float width is called in ROCm's device library (ocml) names
_OCML_WIDTH = {dtypes.float16: "f16", dtypes.float32: "f32", dtypes.float64: "f64"}

PRELUDE = """#define INFINITY __builtin_inff()
#define NAN __builtin_nanf("")
extern "C" __attribute__((device, const)) unsigned long __ockl_get_local_id(unsigned int);
extern "C" __attribute__((device, const)) unsigned long __ockl_get_group_id(unsigned int);
"""

BARRIER = (
    '__builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup"); __builtin_amdgcn_s_barrier(); '
    '__builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");'
)

# CUDA's floor division helpers, as plain device functions (HIP without its headers has no __forceinline__)
FLOOR_HELPERS = CUDA_FLOOR_HELPERS.replace("__device__ __forceinline__", "__attribute__((device)) static inline")


class HIPRenderer(CUDARenderer):
    """Renders a linear program as a HIP C kernel for AMD GPUs (see the module docstring)."""

    device = "HIP"
    max_local_size = 1024
    local_size = 256
    fragment_load_lanes = 1  # fragments are gathered lane by lane (no vector loads rendered yet)
    native_transcendentals = True  # ocml's exp2, log2, sin, cos, tan, exp, tanh

    # bytes of LDS a work-group may hold
    local_memory_bytes = 64 << 10

    def __init__(self, arch: str = "gfx1100") -> None:
        """`arch`: the AMD GPU's architecture: RDNA3's WMMA tensor cores on gfx11."""
        super().__init__(arch)
        # RDNA3's WMMA (gfx11, wave32), fp16 and bfloat16; CDNA's MFMA (gfx90a) is not rendered yet
        rdna3 = (WMMA_16_16_16_F16_RDNA3, WMMA_16_16_16_BF16_RDNA3)
        self.tensor_cores = rdna3 if arch.startswith("gfx11") else ()

    def type_name(self, dt: DType) -> str:
        if isinstance(dt, PtrDType):
            return self.type_name(dt.base) + "*"
        if dt.count > 1:
            return f"{VECTOR_NAMES.get(dt.scalar(), HIP_TYPES[dt.scalar()])}{dt.count}"
        if dt not in HIP_TYPES:
            raise NotImplementedError(f"the HIP renderer has no type for {dt!r}")
        return HIP_TYPES[dt]

    def vector_literal(self, dt: DType, lanes: list[str]) -> str:
        return f"make_{self.type_name(dt)}({', '.join(lanes)})"

    def lane(self, vec: str, i: int) -> str:
        return f"{vec}[{i}]"

    def index(self, base: str, idx: str) -> str:
        return f"*({base}+{idx})"

    def load(self, dt: DType, index: UOp, lvalue: str) -> str:
        return f"({lvalue})"

    def const(self, value: object, dt: DType) -> str:
        if dt is dtypes.float16:
            return f"(_Float16)({super().const(value, dtypes.float32)})"
        return super().const(value, dt)

    def param(self, u: UOp, name: str, written: bool) -> str:
        assert isinstance(u.dtype, PtrDType)
        return f"{'' if written else 'const '}{self.type_name(u.dtype.base)}* __restrict__ {name}"

    def special(self, u: UOp, params: list[tuple[int, str]]) -> str | None:
        kind = {"g": "__ockl_get_group_id", "l": "__ockl_get_local_id"}.get(u.arg[0])
        if kind is None or u.arg[:4] not in ("gidx", "lidx") or u.arg[4:] not in ("0", "1", "2"):
            raise NotImplementedError(f"the HIP renderer has no launch index {u.arg!r} (gidxN and lidxN)")
        t = self.type_name(u.dtype)
        return f"const {t} {u.arg} = ({t}){kind}({u.arg[4:]});"

    def bitcast(self, u: UOp, x: str) -> str:
        return f"__builtin_bit_cast({self.type_name(u.dtype)}, ({self.type_name(u.src[0].dtype)})({x}))"

    def other(self, u: UOp, src: list[str], names: dict[UOp, str]) -> str | None:
        if u.op is Ops.DEFINE_LOCAL:
            assert isinstance(u.dtype, PtrDType)
            names[u] = f"temp{u.arg}"
            return f"__attribute__((shared)) {self.type_name(u.dtype.base)} {names[u]}[{u.dtype.size}];"
        if u.op is Ops.BARRIER:
            return BARRIER
        return super().other(u, src, names)

    def wmma_helper(self, tc: TensorCore) -> str:
        return f"__{tc.name}"  # the contract's spelling: __WMMA_16_16_16_half_float

    def render(self, name: str, uops: Sequence[UOp]) -> str:
        self._order = (0, 1, 2)
        self._block = math.prod(u.src[0].arg for u in uops if u.op is Ops.SPECIAL and u.arg.startswith("lidx"))
        return super(CUDARenderer, self).render(name, uops)

    def head(self, name: str, args: str) -> str:
        bounds = f"__attribute__((amdgpu_flat_work_group_size(1, {self._block})))"
        return f'extern "C" __attribute__((global)) void {bounds} {name}({args}) {{'

    def prelude(self, vectors: bool, needs_floor: bool, uops: Sequence[UOp]) -> str:
        lines = [PRELUDE]
        called = {call for u in uops if (call := self._ocml(u.op, u.dtype)) is not None}
        for fn, arity, dt in sorted(called, key=lambda f: f[0]):
            t = self.type_name(dt)
            lines.append(f'extern "C" __attribute__((device, const)) {t} {fn}({", ".join([t] * arity)});\n')
        for dt in sorted({u.dtype for u in uops if u.dtype.count > 1}, key=repr):
            t, scalar = self.type_name(dt), self.type_name(dt.scalar())
            args = ", ".join(f"{scalar} x{i}" for i in range(dt.count))
            lanes = ", ".join(f"x{i}" for i in range(dt.count))
            lines.append(f"typedef {scalar} {t} __attribute__((ext_vector_type({dt.count})));\n")
            lines.append(f"__attribute__((device)) static inline {t} make_{t}({args}) {{ return {{{lanes}}}; }}\n")
        for tc in dict.fromkeys(u.arg for u in uops if u.op is Ops.WMMA):
            lines.append(WMMA_HELPERS[tc.name])
        if needs_floor:
            lines.append(FLOOR_HELPERS)
        return "".join(lines)

    @staticmethod
    def _ocml(op: Ops, dt: DType) -> tuple[str, int, DType] | None:
        """The ocml function an op of `dt` calls: (name, arguments, dtype), or None."""
        if dt not in _OCML_WIDTH:
            return None
        if op is Ops.MULACC:
            return f"__ocml_fma_{_OCML_WIDTH[dt]}", 3, dt
        if op in MATH_FUNCTIONS:
            return f"__ocml_{MATH_FUNCTIONS[op]}_{_OCML_WIDTH[dt]}", 1, dt
        return None

    def _alu(self, u: UOp, src: list[str]) -> tuple[str, bool]:
        if (fn := self._ocml(u.op, u.dtype)) is not None:
            return f"{fn[0]}({', '.join(src)})", False
        if u.op in MATH_FUNCTIONS or u.op is Ops.MULACC:
            return super(CUDARenderer, self)._alu(u, src)
        return super()._alu(u, src)


# RDNA3's WMMA for one lane of a wave32: 16 values of A, 16 of B, 8 floats of C (the layout: tensor_cores.py); a
# bfloat16 operand is its 16-bit patterns (narrowfloat.py), which the builtin takes as shorts
WMMA_HALF = """__attribute__((device)) static inline float8 __WMMA_16_16_16_half_float(half16 a, half16 b, float8 c) {
  return __builtin_amdgcn_wmma_f32_16x16x16_f16_w32(a, b, c);
}
"""
WMMA_BF16 = (
    "__attribute__((device)) static inline float8 __WMMA_16_16_16_bf16_float(ushort16 a, ushort16 b, float8 c) {\n"
    "  typedef short bits16 __attribute__((ext_vector_type(16)));\n"
    "  return __builtin_amdgcn_wmma_f32_16x16x16_bf16_w32(__builtin_bit_cast(bits16, a), "
    "__builtin_bit_cast(bits16, b), c);\n"
    "}\n"
)
WMMA_HELPERS = {WMMA_16_16_16_F16_RDNA3.name: WMMA_HALF, WMMA_16_16_16_BF16_RDNA3.name: WMMA_BF16}
