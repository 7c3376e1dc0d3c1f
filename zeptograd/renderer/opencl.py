"""The OpenCL C renderer: the C renderer's dialect for OpenCL devices (renderer/cstyle.py does the work; this
file overrides what OpenCL C spells differently).

- The kernel is `__kernel void name(__global float* restrict data0, ...)`; a buffer of bools is a `uchar`
  buffer (OpenCL forbids `bool` in a kernel argument), read and written as 0 or 1.
- The launch indices are SPECIALs: `gidxN` is `get_group_id(N)`, `lidxN` is `get_local_id(N)` (the launch
  dimensions come from codegen/gpudims.py).
- Local memory is a `__local` array at kernel scope (OpenCL allows it nowhere else), and BARRIER is
  `barrier(CLK_LOCAL_MEM_FENCE)`.
- Vectors are OpenCL's own types (`float4`), built as `(float4)(a, b, c, d)`, read lane by lane as `.s0`, loaded
  and stored with `vloadN` / `vstoreN` (which need no alignment beyond the element's), converted with
  `convert_T` and reinterpreted with `as_T`.
- The fused multiply-add is `fma`. Double needs cl_khr_fp64 (`supported_dtypes()` says whether a device has
  it). Half arithmetic needs cl_khr_fp16, but OpenCL C lets every device store half: without the extension
  float16 is an emulated float (`emulated_floats`, codegen/narrowfloat.py), its buffers read and written as the
  ushort bits of IEEE binary16 and its values computed in float, rounded to half after every op, so it gives the
  values a device with half arithmetic (and numpy) gives.

>>> from zeptograd.dtype import dtypes
>>> OpenCLRenderer(frozenset({"cl_khr_fp64"})).type_name(dtypes.int64)
'long'
"""

from __future__ import annotations

from collections.abc import Sequence

from zeptograd.dtype import AddrSpace, DType, PtrDType, dtypes
from zeptograd.renderer.cstyle import C_TYPES, MATH_FUNCTIONS, CRenderer, render_const
from zeptograd.renderer.host import HostCPU
from zeptograd.uop.ops import GroupOp, Ops, UOp

CL_TYPES: dict[DType, str] = {
    dtypes.bool: "bool",
    dtypes.int8: "char",
    dtypes.uint8: "uchar",
    dtypes.int16: "short",
    dtypes.uint16: "ushort",
    dtypes.int32: "int",
    dtypes.uint32: "uint",
    dtypes.int64: "long",
    dtypes.uint64: "ulong",
    dtypes.float16: "half",
    dtypes.float32: "float",
    dtypes.float64: "double",
}
# the 32-bit types whose arithmetic is rendered on vectors (of 4, 8 or 16 lanes: as wide as the device prefers, 4 at
# least); a vector of bools is a mask of int lanes, -1 for true and 0 for false (what OpenCL's vector comparisons
# give), so WHERE is `select` on it, as in the C renderer
VECTOR_DTYPES = frozenset({dtypes.float32, dtypes.int32, dtypes.uint32})
# ops on vectors whose OpenCL C is an operator or a builtin overloaded for vectors (a mixed kernel, vectors around
# lane-by-lane code, is what PoCL cannot vectorize: exp 2^22 was 5x the CPU device's time)
_VECTOR_OPS = frozenset(
    {Ops.LOAD, Ops.STORE, Ops.VECTORIZE, Ops.GEP, Ops.CONST, Ops.REDUCE, Ops.CAST, Ops.BITCAST, Ops.WHERE}
    | {Ops.ADD, Ops.SUB, Ops.MUL, Ops.MULACC, Ops.MAX, Ops.NEG, Ops.FDIV, Ops.RECIPROCAL, Ops.SQRT, Ops.TRUNC}
    | {Ops.AND, Ops.OR, Ops.XOR, Ops.SHL, Ops.SHR, *GroupOp.Comparison}
)
# vector ops the C renderer's text serves as it is (operators; its mask logic for comparisons of bools)
_VECTOR_INFIX = frozenset(
    {Ops.ADD, Ops.SUB, Ops.MUL, Ops.FDIV, Ops.RECIPROCAL, Ops.NEG, Ops.AND, Ops.OR, Ops.XOR, Ops.SHL, Ops.SHR}
    | GroupOp.Comparison
)

FLOOR_HELPERS = """inline long floordiv(long a, long b) {
  long q = a / b;
  return q - ((a % b != 0) & ((a < 0) != (b < 0)));
}
inline long floormod(long a, long b) {
  long r = a % b;
  return r + (((r != 0) & ((r < 0) != (b < 0))) ? b : 0);
}
"""


class OpenCLRenderer(CRenderer):
    """Renders a linear program as an OpenCL C kernel for a device with the OpenCL `extensions` given."""

    device = "CL"
    has_local = True
    has_threads = False
    runs_on_cpu = False  # the device sets it: a CPU driver (PoCL) gets the CPU's layouts
    paired_gated_stores = False  # a work-item stores its own lanes
    # work-items of a work-group at most: OpenCL guarantees at least 256 on a GPU; PoCL's CPU device takes 4096
    max_local_size = 256
    # bytes of __local memory a work-group may hold: OpenCL's guaranteed least (the device sets its own)
    local_memory_bytes = 32 << 10

    def __init__(
        self,
        extensions: frozenset[str] = frozenset(),
        lanes: int = 4,
        kernel_attributes: str = "",
        host: HostCPU | None = None,
    ) -> None:
        """`extensions`: the device's OpenCL extensions; `lanes`: the width of its vectors (4, 8 or 16);
        `kernel_attributes`: written before `__kernel`; `host`: the CPU a CPU driver (PoCL) runs the kernels on, whose
        register and cache sizes the planner reads (None: the host's)."""
        if lanes not in (4, 8, 16):
            raise ValueError(f"OpenCL vectors of 4, 8 or 16 lanes, got {lanes}")
        super().__init__(host)
        self.extensions = extensions
        self.lanes = lanes
        # written before `__kernel` (PoCL on x86: the target features its builtins need to be inlined)
        self.kernel_attributes = kernel_attributes
        # without cl_khr_fp16 a kernel may hold half only in memory: float16 is computed in float
        self.emulated_floats = frozenset() if "cl_khr_fp16" in extensions else frozenset({dtypes.float16})

    def supported_dtypes(self) -> frozenset[DType]:
        """Every C dtype but double without cl_khr_fp64. Half is always there: computed in half with cl_khr_fp16,
        else stored as its bits and computed in float, rounded to half per op (`emulated_floats`).

        >>> dtypes.float64 in OpenCLRenderer(frozenset()).supported_dtypes()
        False
        >>> dtypes.float16 in OpenCLRenderer(frozenset()).supported_dtypes(), OpenCLRenderer().emulated_floats
        (True, frozenset({dtypes.float16}))
        """
        out = set(C_TYPES)
        if "cl_khr_fp64" not in self.extensions:
            out.discard(dtypes.float64)
        return frozenset(out)

    def max_lanes(self, op: Ops, dt: DType) -> int:
        """Vectors of `lanes` for the arithmetic of 32-bit types and their masks (bools are stored as bytes: read
        and written lane by lane); everything else lane by lane (PoCL vectorizes across work-items on its own)."""
        if dt is dtypes.bool:
            return 1 if op in (Ops.LOAD, Ops.STORE, Ops.REDUCE) else self.lanes
        if op in _VECTOR_OPS and dt in VECTOR_DTYPES:
            return self.lanes
        return 1

    def type_name(self, dt: DType) -> str:
        if isinstance(dt, PtrDType):
            return self.type_name(dt.base) + "*"
        if dt.count > 1:
            scalar = dt.scalar() if dt.scalar() is not dtypes.bool else dtypes.int32
            return f"{CL_TYPES[scalar]}{dt.count}"
        if dt not in CL_TYPES:
            raise NotImplementedError(f"the OpenCL renderer has no type for {dt!r}")
        return CL_TYPES[dt]

    def const(self, value: object, dt: DType) -> str:
        if dt.count > 1 and dt.scalar() is dtypes.bool:
            return f"(({self.type_name(dt)})({'-1' if value else '0'}))"  # a mask: true is -1
        if dt.count > 1:
            return f"(({self.type_name(dt)})({self.const(value, dt.scalar())}))"
        if dt is not dtypes.bool and dt.itemsize < 4:
            # C's small-type literal is a cast of an int or float literal: the same with OpenCL's type names
            wide = dtypes.float32 if dtypes.is_float(dt) else dtypes.int32
            return f"(({self.type_name(dt)}){render_const(value, wide)})"
        text = render_const(value, dt)
        if dt.itemsize == 8 and not dtypes.is_float(dt):
            text = text.replace("ll", "l")  # OpenCL's long is 64 bits; it has no long long
        return text

    def param(self, u: UOp, name: str, written: bool) -> str:
        assert isinstance(u.dtype, PtrDType)
        base = "uchar" if u.dtype.base is dtypes.bool else self.type_name(u.dtype.base)
        return f"__global {'' if written else 'const '}{base}* restrict {name}"

    def special(self, u: UOp, params: list[tuple[int, str]]) -> str | None:
        fn = {"g": "get_group_id", "l": "get_local_id"}.get(u.arg[0])
        if fn is None or not u.arg[-1].isdigit():
            raise NotImplementedError(f"the OpenCL renderer has no launch index {u.arg!r} (gidxN and lidxN)")
        return f"const {self.type_name(u.dtype)} {u.arg} = {fn}({u.arg[-1]});"

    def shuffle(self, a: str, b: str, idxs: Sequence[int]) -> str | None:
        return None  # lanes are gathered one by one

    def vector_literal(self, dt: DType, lanes: list[str]) -> str:
        return f"({self.type_name(dt)})({', '.join(lanes)})"

    def lane(self, vec: str, i: int) -> str:
        return f"{vec}.s{i:x}"

    def swizzle(self, dt: DType, vec: str, idxs: Sequence[int]) -> str:
        if len(idxs) in (2, 3, 4, 8, 16):
            return f"{vec}.s{''.join(f'{i:x}' for i in idxs)}"  # a swizzle: OpenCL's vector sizes only
        return super().swizzle(dt, vec, idxs)

    def load(self, dt: DType, index: UOp, lvalue: str) -> str:
        if dt.count > 1 and _scalar_pointer(index):
            return f"vload{dt.count}(0, &{lvalue})"
        if index.src[0].dtype.base is dtypes.bool and dt is dtypes.bool:  # type: ignore[attr-defined]
            return f"({lvalue} != 0)"
        return lvalue

    def store(self, dt: DType, index: UOp, lvalue: str, value: str) -> str:
        if dt.count > 1 and _scalar_pointer(index):
            return f"vstore{dt.count}({value}, 0, &{lvalue});"
        return f"{lvalue} = {value};"

    def cast(self, u: UOp, x: str) -> str:
        src = u.src[0].dtype
        if u.dtype.count > 1 and u.dtype.scalar() is dtypes.bool:
            return f"({x} != {self.const(0.0 if dtypes.is_float(src) else 0, src)})"  # a comparison gives the mask
        if u.dtype.count > 1 and src.scalar() is dtypes.bool:
            return f"convert_{self.type_name(u.dtype)}(-({x}))"  # a true lane is -1: 1 after negation
        if dtypes.is_float(src.scalar()) and dtypes.is_unsigned(u.dtype.scalar()):
            # a float to an unsigned int through the signed int of its size (int for the narrower ones): C leaves a
            # negative float to unsigned undefined (LLVM gave 0 for -1.5 -> uchar on PoCL), int to unsigned wraps,
            # numpy's answer (and the CPU device's, whose x86 conversion goes through an int)
            signed = dtypes.int64 if u.dtype.itemsize == 8 else dtypes.int32
            x = self.cast(UOp(Ops.CAST, signed.vec(u.dtype.count), (u.src[0],)), x)
        if u.dtype.count > 1:
            return f"convert_{self.type_name(u.dtype)}({x})"
        return f"({self.type_name(u.dtype)})({x})"

    def bitcast(self, u: UOp, x: str) -> str:
        return f"as_{self.type_name(u.dtype)}({x})"

    def other(self, u: UOp, src: list[str], names: dict[UOp, str]) -> str | None:
        if u.op is Ops.DEFINE_LOCAL:
            assert isinstance(u.dtype, PtrDType)
            names[u] = f"temp{u.arg}"
            return None  # declared at kernel scope by render()
        if u.op is Ops.BARRIER:
            return "barrier(CLK_LOCAL_MEM_FENCE);"
        return super().other(u, src, names)

    def head(self, name: str, args: str) -> str:
        prefix = f"{self.kernel_attributes} " if self.kernel_attributes else ""
        return f"{prefix}__kernel void {name}({args}) {{"

    def prelude(self, vectors: bool, needs_floor: bool, uops: Sequence[UOp]) -> str:
        used = {u.dtype.scalar() for u in uops} | {u.dtype.base.scalar() for u in uops if isinstance(u.dtype, PtrDType)}
        # OpenCL C may contract a*b+c into an FMA on its own: off, the IR says where a MULACC goes (as on the CPU)
        lines = ["#pragma OPENCL FP_CONTRACT OFF"]
        if dtypes.float16 in used:
            lines.append("#pragma OPENCL EXTENSION cl_khr_fp16 : enable")
        if dtypes.float64 in used:
            lines.append("#pragma OPENCL EXTENSION cl_khr_fp64 : enable")
        return "\n".join(lines) + "\n" + (FLOOR_HELPERS if needs_floor else "")

    def render(self, name: str, uops: Sequence[UOp]) -> str:
        src = super().render(name, uops)
        # __local arrays only at kernel scope: declared right after the kernel's opening line
        locals_ = [u for u in uops if u.op is Ops.DEFINE_LOCAL]
        if not locals_:
            return src
        decls = []
        for u in locals_:
            assert isinstance(u.dtype, PtrDType) and u.dtype.addrspace is AddrSpace.LOCAL
            decls.append(f"  __local {self.type_name(u.dtype.base)} temp{u.arg}[{u.dtype.size}];")
        head = f"__kernel void {name}("
        at = src.index("{", src.index(head)) + 1
        return src[:at] + "\n" + "\n".join(decls) + src[at:]

    def _alu(self, u: UOp, src: list[str]) -> tuple[str, bool]:
        op, dt = u.op, u.dtype
        if op is Ops.MULACC and dtypes.is_float(dt) and dt.scalar() is not dtypes.float16:
            return f"fma({', '.join(src)})", False
        if op in MATH_FUNCTIONS and dtypes.is_float(dt):
            return f"{MATH_FUNCTIONS[op]}({src[0]})", False
        if op is Ops.MAX and dt.scalar() is dtypes.bool:
            return super()._alu(u, src)  # masks: the C renderer's logic
        if op is Ops.MAX and dt.count == 1:
            a, b = src
            if dtypes.is_float(dt):
                return f"((isnan({a}) || ({a} > {b})) ? {a} : {b})", False  # NaN wins, as in numpy
            return f"(({a} > {b}) ? {a} : {b})", False
        if op is Ops.MAX and dtypes.is_float(dt):
            a, b = src  # select(x, y, c): y where c, lane by lane; NaN wins, as in numpy
            return f"select(select({b}, {a}, {a} > {b}), {a}, isnan({a}))", False
        if op is Ops.MAX:
            return f"max({src[0]}, {src[1]})", False
        if op is Ops.WHERE and dt.count > 1:
            return f"select({src[2]}, {src[1]}, {src[0]})", False  # the mask's lanes are as wide as the values'
        if dt.count > 1 and op not in _VECTOR_INFIX:
            # the rest of the vector ops (accumulators the devectorizer leaves whole): lane by lane
            lanes = [
                self._alu(UOp(op, dt.scalar(), tuple(s.gep(i) for s in u.src)), [self.lane(x, i) for x in src])[0]
                for i in range(dt.count)
            ]
            return self.vector_literal(dt, lanes), False
        return super()._alu(u, src)


def _scalar_pointer(index: UOp) -> bool:
    ptr = index.src[0].dtype
    return isinstance(ptr, PtrDType) and ptr.base.count == 1
