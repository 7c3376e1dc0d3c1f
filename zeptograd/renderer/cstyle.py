"""The C renderer: a linear program becomes one C function.

Each op lowers as docs/internals.md says: DEFINE_GLOBAL a `restrict` pointer parameter (const when the kernel only
reads it), DEFINE_REG a local array, RANGE/END a `for` loop, IF/ENDIF an `if` block, INDEX pointer
arithmetic, LOAD a read (a gated one `gate ? *p : fallback`), STORE an assignment, AFTER nothing (an alias
of its source), CONST a literal, CAST a C cast, ALU an operator or a builtin. Values get one named `const`
local each, so the source reads like the program.

Index arithmetic in the IR is floor division and modulo; C divides by truncating. The two agree when both
operands are known non-negative (the value ranges say so, and for loop indices they do); otherwise the
renderer calls a floor helper.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

from zeptograd.dtype import DType, PtrDType, dtypes
from zeptograd.renderer import Renderer
from zeptograd.renderer.host import HostCPU, take_host
from zeptograd.uop.ops import GroupOp, Ops, UOp, is_zero

C_TYPES: dict[DType, str] = {
    dtypes.bool: "bool",
    dtypes.int8: "int8_t",
    dtypes.uint8: "uint8_t",
    dtypes.int16: "int16_t",
    dtypes.uint16: "uint16_t",
    dtypes.int32: "int32_t",
    dtypes.uint32: "uint32_t",
    dtypes.int64: "int64_t",
    dtypes.uint64: "uint64_t",
    dtypes.float16: "_Float16",
    dtypes.float32: "float",
    dtypes.float64: "double",
}

# no headers: parsing <math.h> is a sixth of gcc's time on a small kernel, <stdint.h> and <stdbool.h> another
# tenth. The math functions are gcc/clang builtins (a call to libm's function where they are not inlined);
# INFINITY and NAN are what math.h defines them as; the integer types are the compiler's own (what stdint.h uses)
PRELUDE = """#ifndef ZG_PRELUDE
#define ZG_PRELUDE
typedef __INT8_TYPE__ int8_t;
typedef __INT16_TYPE__ int16_t;
typedef __INT32_TYPE__ int32_t;
typedef __INT64_TYPE__ int64_t;
typedef __UINT8_TYPE__ uint8_t;
typedef __UINT16_TYPE__ uint16_t;
typedef __UINT32_TYPE__ uint32_t;
typedef __UINT64_TYPE__ uint64_t;
#define bool _Bool
#define INFINITY __builtin_inff()
#define NAN __builtin_nanf("")
#if !defined(__clang__) && __GNUC__ < 12
#error "zeptograd's C kernels need gcc 12 or later, or clang (__builtin_shufflevector): set CC"
#endif
#endif
"""

# floor division and modulo for operands of either sign (C's / and % truncate toward zero)
# guarded: several kernels' sources are compiled as one file (runtime/ops_cpu.py)
FLOOR_HELPERS = """#ifndef ZG_FLOOR_HELPERS
#define ZG_FLOOR_HELPERS
static inline int64_t floordiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  return q - ((a % b != 0) & ((a < 0) != (b < 0)));
}
static inline int64_t floormod(int64_t a, int64_t b) {
  int64_t r = a % b;
  return r + (((r != 0) & ((r < 0) != (b < 0))) ? b : 0);
}
#endif
"""

_INFIX = {
    Ops.ADD: "+",
    Ops.SUB: "-",
    Ops.MUL: "*",
    Ops.FDIV: "/",
    Ops.CMPLT: "<",
    Ops.CMPNE: "!=",
    Ops.CMPEQ: "==",
    Ops.AND: "&",
    Ops.OR: "|",
    Ops.XOR: "^",
    Ops.SHL: "<<",
    Ops.SHR: ">>",
}
# the math function of each float op that a target may keep (the C, CUDA and OpenCL name; WGSL and LLVM's
# intrinsics use the same): every target gets the IR's polynomials instead today (codegen/transcendental.py)
MATH_FUNCTIONS = {
    Ops.EXP2: "exp2",
    Ops.EXP: "exp",
    Ops.TANH: "tanh",
    Ops.LOG2: "log2",
    Ops.SIN: "sin",
    Ops.COS: "cos",
    Ops.TAN: "tan",
    Ops.SQRT: "sqrt",
    Ops.TRUNC: "trunc",
}


# a vector of bools is a mask: an int32 lane each, -1 for true and 0 for false (what GCC's vector comparisons
# give), so WHERE is a bitwise select
MASK = dtypes.int32
_VECTOR_ANY = frozenset({Ops.LOAD, Ops.STORE, Ops.VECTORIZE, Ops.GEP, Ops.REDUCE, Ops.CONST, Ops.CAST, Ops.BITCAST})
_VECTOR_ANY |= {Ops.ADD, Ops.SUB, Ops.MUL, Ops.AND, Ops.OR, Ops.XOR, Ops.NEG, Ops.WHERE, Ops.MAX}
_VECTOR_ANY |= GroupOp.Comparison
_VECTOR_FLOAT = frozenset({Ops.FDIV, Ops.RECIPROCAL})
_VECTOR_INT = frozenset({Ops.SHL, Ops.SHR})
# ops on float vectors that need an x86 builtin (and so an x86 CPU with AVX2 and FMA)
_VECTOR_X86 = frozenset({Ops.MULACC, Ops.SQRT, Ops.TRUNC})


# the scalar types the C code holds in GCC vector extension types, as many lanes as the host's vector register holds
VECTOR_SCALARS = (dtypes.float32, dtypes.float64, dtypes.int32, dtypes.uint32, dtypes.int64, dtypes.uint64)


def vector_lanes(host: HostCPU) -> dict[DType, int]:
    """The lanes of each scalar type in one of `host`'s vector registers.

    >>> vector_lanes(HostCPU(frozenset({"avx2", "fma"})))[dtypes.float32]
    8
    """
    return {dt: host.vector_bytes // dt.itemsize for dt in VECTOR_SCALARS}


def masked_loads(host: HostCPU) -> tuple[dict[tuple[DType, int], str], dict[tuple[DType, int], str]]:
    """The masked vector loads of `host` by (scalar, lanes): AVX-512's builtins, and AVX2's (one of the two is empty).

    A lane whose mask is off is not read, and does not fault (a padded row's border). AVX-512's (vmovups zmm{k})
    merge the fallback's lanes in, their mask from a vector of bools (int32 lanes of -1/0) by vpmovd2m (AVX512DQ, VL
    for 256 and 128 bits); AVX2's (vmaskmovps, vpmaskmovd) take the bools as they are (the sign bit of each lane) and
    give zeros, which a select then replaces by the fallback's lanes."""
    avx512: dict[tuple[DType, int], str] = {}
    avx2: dict[tuple[DType, int], str] = {}
    if host.avx512_masked_loads:
        for lanes, bits in ((16, 512), (8, 256), (4, 128)):
            avx512[(dtypes.float32, lanes)] = f"loadups{bits}"
            avx512[(dtypes.int32, lanes)] = f"loaddqusi{bits}"
    elif host.avx2_fma:
        avx2 = {
            (dtypes.float32, 8): "maskloadps256",
            (dtypes.float32, 4): "maskloadps",
            (dtypes.int32, 8): "maskloadd256",
            (dtypes.int32, 4): "maskloadd",
        }
    return avx512, avx2


def builtin_suffixes(host: HostCPU) -> dict[tuple[DType, int], str]:
    """The suffix of the x86 builtins (fused multiply-add, sqrt, truncation, NaN-propagating max; no header to
    parse) of each float vector width `host` computes in one instruction. The 512-bit forms take a merge source, a
    lane mask (all) and a rounding mode (4: the current one). None without AVX2 and FMA: lane by lane there."""
    if not host.avx2_fma:
        return {}
    suffixes = {(dtypes.float32, 8): "ps256", (dtypes.float32, 4): "ps", (dtypes.float64, 4): "pd256"}
    suffixes[(dtypes.float64, 2)] = "pd"
    if host.avx512:
        suffixes[(dtypes.float32, 16)] = "ps512"
        suffixes[(dtypes.float64, 8)] = "pd512"
    return suffixes


def vector_name(dt: DType) -> str:
    """The C name of a vector type: `float8`, `double4`, `int32x8` (and for a vector of bools, its mask type)."""
    base = C_TYPES[dt.scalar() if dt.scalar() is not dtypes.bool else MASK]
    if base in ("float", "double"):
        return f"{base}{dt.count}"
    return f"{base.removesuffix('_t')}x{dt.count}"


def ctype(dt: DType) -> str:
    if isinstance(dt, PtrDType):
        return ctype(dt.base) + "*"
    if dt.count > 1:
        return vector_name(dt)
    if dt not in C_TYPES:
        raise NotImplementedError(f"the C renderer has no type for {dt!r}")
    return C_TYPES[dt]


def render_const(value: object, dt: DType) -> str:
    """A C literal of `dt`: `1.5f`, `INFINITY`, `7`, `-2147483648` written so it has the right type."""
    if dt.count > 1:
        lane = ("-1" if value else "0") if dt.scalar() is dtypes.bool else render_const(value, dt.scalar())
        return f"(({vector_name(dt)}){{{', '.join([lane] * dt.count)}}})"
    if dt is dtypes.bool:
        return "1" if value else "0"
    if dtypes.is_float(dt):
        assert isinstance(value, float)
        if math.isnan(value):
            text = "NAN"
        elif math.isinf(value):
            text = "INFINITY" if value > 0 else "(-INFINITY)"
        else:
            text = repr(value) + ("f" if dt is not dtypes.float64 else "")
            if dt is dtypes.float64 and "e" not in text and "." not in text:
                text += ".0"
        return text if dt in (dtypes.float32, dtypes.float64) else f"(({ctype(dt)}){text})"
    assert isinstance(value, int)
    if value == dtypes.min(dt) and value < 0:
        return f"({value + 1}{'ll' if dt.itemsize == 8 else ''}-1)"  # -2147483648 is not a literal in C
    suffix = ("u" if dtypes.is_unsigned(dt) else "") + ("ll" if dt.itemsize == 8 else "")
    return f"{value}{suffix}" if dt.itemsize >= 4 else f"(({ctype(dt)}){value})"


def _float_math(op: Ops, dt: DType, x: str) -> str:
    fn = "__builtin_" + MATH_FUNCTIONS[op]
    if dt is dtypes.float64:
        return f"{fn}({x})"
    if dt is dtypes.float32:
        return f"{fn}f({x})"
    return f"(({ctype(dt)}){fn}f((float)({x})))"  # half precision computes in float


class CRenderer(Renderer):
    """Renders a linear program as a C function `void name(T* restrict data0, ...)` for the CPU `host` (None: this
    machine's, `HostCPU.read()`): its vector width, x86 builtins and masked loads, and the register and cache sizes
    the planner reads.

    >>> avx2 = CRenderer(HostCPU(frozenset({"avx2", "fma"})))
    >>> avx2.max_lanes(Ops.MULACC, dtypes.float32), avx2.vector_registers, avx2.masked_load(dtypes.float32.vec(8))
    (8, 16, True)
    """

    device = "CPU"
    has_local = False  # the C device runs a kernel as a loop nest a core: no work-groups (its GPU dialects have them)
    has_threads = True
    runs_on_cpu = True
    # gcc keeps a convolution tile's accumulators in registers when a gated STORE's neighbouring lanes are stored in
    # pairs; the GPU dialects store a lane a thread (False there)
    paired_gated_stores = True

    def __init__(self, host: HostCPU | None = None) -> None:
        self.host = take_host(self, host)
        self.vector_lanes = vector_lanes(self.host)
        self.builtin_suffixes = builtin_suffixes(self.host)
        self.avx512_loads, self.avx2_loads = masked_loads(self.host)

    def max_lanes(self, op: Ops, dt: DType) -> int:
        """How many lanes of `dt` the C code does `op` on at once (1: lane by lane)."""
        if dt is dtypes.bool:
            # bools are stored as bytes
            return 1 if op in (Ops.LOAD, Ops.STORE, Ops.REDUCE) else self.vector_lanes[MASK]
        lanes = self.vector_lanes.get(dt, 1)
        if op in _VECTOR_ANY or (op in _VECTOR_FLOAT and dtypes.is_float(dt)):
            return lanes if op is not Ops.MAX or not dtypes.is_float(dt) or self.host.avx2_fma else 1
        if op in _VECTOR_INT and not dtypes.is_float(dt):
            return lanes
        if op in _VECTOR_X86 and dtypes.is_float(dt) and self.host.avx2_fma:
            return lanes
        return 1

    def masked_load(self, dt: DType) -> bool:
        """Can the C code read vector `dt` under a gate per lane (AVX-512's or AVX2's masked loads; the CPU device
        only)?"""
        key = (dt.scalar(), dt.count)
        return self.device == "CPU" and (key in self.avx512_loads or key in self.avx2_loads)

    def supported_dtypes(self) -> frozenset[DType]:
        """The scalar dtypes this renderer's device computes and stores (the C device: every one C has).

        >>> dtypes.float64 in CRenderer().supported_dtypes()
        True
        """
        return frozenset(C_TYPES)

    # the dialect's pieces: a subclass (renderer/opencl.py) overrides these, render() stays one
    def type_name(self, dt: DType) -> str:
        return ctype(dt)

    def const(self, value: object, dt: DType) -> str:
        return render_const(value, dt)

    def param(self, u: UOp, name: str, written: bool) -> str:
        """The declaration of a DEFINE_GLOBAL's parameter."""
        assert isinstance(u.dtype, PtrDType)
        return f"{'' if written else 'const '}{self.type_name(u.dtype.base)}* restrict {name}"

    def special(self, u: UOp, params: list[tuple[int, str]]) -> str | None:
        """A SPECIAL index: the C device's chunk index is the last parameter (None: no line of code)."""
        params.append((1 << 31, f"const {self.type_name(u.dtype)} {u.arg}"))  # the chunk index comes last
        return None

    def vector_literal(self, dt: DType, lanes: list[str]) -> str:
        return f"({self.type_name(dt)}){{{', '.join(lanes)}}}"

    def index(self, base: str, idx: str) -> str:
        """The lvalue of element `idx` of pointer `base` (what INDEX names; LOAD and STORE use it)."""
        return f"{base}[{idx}]"

    def lane(self, vec: str, i: int) -> str:
        return f"{vec}[{i}]"

    def swizzle(self, dt: DType, vec: str, idxs: Sequence[int]) -> str:
        """A vector of `dt` made of lanes `idxs` of `vec` (a GEP of several lanes)."""
        return self.vector_literal(dt, [self.lane(vec, i) for i in idxs])

    def shuffle(self, a: str, b: str, idxs: Sequence[int]) -> str | None:
        """A vector of lanes `idxs` of two vectors of one type, `a` then `b` (lane i of b is count + i), as one
        shuffle, or None where the dialect has none (the lanes are then gathered one by one). GCC (12 and later)
        and clang's `__builtin_shufflevector` becomes one or two permutes: gcc made the lane-by-lane vector of a
        convolution tile's transposed stores (`(float16){v[0], w[0], ..}`) as scalar extracts and inserts."""
        return f"__builtin_shufflevector({a}, {b}, {', '.join(map(str, idxs))})"

    def load(self, dt: DType, index: UOp, lvalue: str) -> str:
        return _vector_access(dt, index, lvalue, "const ")

    def store(self, dt: DType, index: UOp, lvalue: str, value: str) -> str:
        return f"{_vector_access(dt, index, lvalue, '')} = {value};"

    def cast(self, u: UOp, x: str) -> str:
        if u.dtype.count > 1:
            return _vector_cast(u.src[0].dtype, u.dtype, x)
        return f"({self.type_name(u.dtype)})({x})"

    def bitcast(self, u: UOp, x: str) -> str:
        if u.dtype.count > 1:
            return f"({self.type_name(u.dtype)})({x})"  # GCC: a cast between vectors keeps the bits
        pun = f"union {{ {self.type_name(u.src[0].dtype)} a; {self.type_name(u.dtype)} b; }}"
        return f"(({pun}){{.a = {x}}}).b"

    def other(self, u: UOp, src: list[str], names: dict[UOp, str]) -> str | None:
        """The line of an op only a dialect has (DEFINE_LOCAL, BARRIER); the C device has none."""
        raise NotImplementedError(f"the C renderer cannot render {u.op.name}")

    def head(self, name: str, args: str) -> str:
        return f"void {name}({args}) {{"

    def declare(self, dt: DType, name: str, expr: str) -> str:
        """The line that binds a value to a new name (WGSL spells it `let name: T = expr;`)."""
        return f"const {self.type_name(dt)} {name} = {expr};"

    def register(self, dt: DType, name: str, size: int) -> str:
        """The declaration of a DEFINE_REG array of `size` elements of `dt`."""
        return f"{self.type_name(dt)} {name}[{size}];"

    def loop(self, dt: DType, name: str, bound: str) -> str:
        """The opening line of a RANGE's loop, `name` from 0 to `bound`."""
        return f"for ({self.type_name(dt)} {name} = 0; {name} < {bound}; {name}++) {{"

    def choose(self, cond: str, yes: str, no: str) -> str:
        """`cond ? yes : no` (a gated load's fallback, WHERE)."""
        return f"({cond} ? {yes} : {no})"

    def prelude(self, vectors: bool, needs_floor: bool, uops: Sequence[UOp]) -> str:
        typedefs = vector_typedefs(self.host.vector_bytes) if vectors else ""
        return PRELUDE + typedefs + (FLOOR_HELPERS if needs_floor else "")

    def render(self, name: str, uops: Sequence[UOp]) -> str:
        names: dict[UOp, str] = {}
        params: list[tuple[int, str]] = []  # (position, declaration): arguments in DEFINE_GLOBAL order
        lines: list[str] = []
        counters: dict[str, int] = {}
        depth = 1
        written = {u.src[0].src[0] for u in uops if u.op is Ops.STORE and u.src[0].op is Ops.INDEX}
        needs_floor = False
        vectors = any(u.dtype.count > 1 or (isinstance(u.dtype, PtrDType) and u.dtype.base.count > 1) for u in uops)

        def fresh(prefix: str) -> str:
            counters[prefix] = counters.get(prefix, 0) + 1
            return f"{prefix}{counters[prefix] - 1}"

        def emit(text: str) -> None:
            lines.extend("  " * depth + line for line in text.split("\n"))

        uses: dict[UOp, int] = {}
        for u in uops:
            for s in u.src:
                uses[s] = uses.get(s, 0) + 1

        def bind(u: UOp, prefix: str, expr: str) -> None:
            names[u] = fresh(prefix)
            emit(self.declare(u.dtype, names[u], expr))

        for u in uops:
            op, src = u.op, [names.get(s, "") for s in u.src]
            if op is Ops.DEFINE_GLOBAL:
                names[u] = f"data{u.arg}"
                params.append((u.arg, self.param(u, names[u], u in written)))
            elif op is Ops.DEFINE_VAR:
                names[u] = u.arg[0]
                params.append((1 << 30, f"const {self.type_name(u.dtype)} {names[u]}"))  # variables after the buffers
            elif op is Ops.DEFINE_REG:
                assert isinstance(u.dtype, PtrDType)
                names[u] = f"acc{u.arg}"
                emit(self.register(u.dtype.base, names[u], u.dtype.size))
            elif op is Ops.CONST:
                names[u] = self.const(u.arg, u.dtype)
            elif op is Ops.SPECIAL:
                names[u] = u.arg
                if (line := self.special(u, params)) is not None:
                    emit(line)
            elif op is Ops.VECTORIZE and u.dtype.scalar() is dtypes.bool:
                bind(u, "vec", self.vector_literal(u.dtype, [f"-({self.type_name(MASK)})({x})" for x in src]))
            elif op is Ops.VECTORIZE:
                shuffled = self._shuffled(u, names)
                bind(u, "vec", shuffled if shuffled is not None else self.vector_literal(u.dtype, src))
            elif op is Ops.GEP and u.dtype is dtypes.bool:
                bind(u, "lane", f"({self.lane(src[0], u.arg[0])} != 0)")
            elif op is Ops.GEP:
                if len(u.arg) == 1:
                    bind(u, "lane", self.lane(src[0], u.arg[0]))
                else:
                    lanes = [_lane_source(u.src[0], i) for i in u.arg]
                    shuffled = self.shuffle(names[lanes[0][0]], names[lanes[0][0]], [i for _, i in lanes])
                    bind(u, "vec", shuffled if shuffled is not None else self.swizzle(u.dtype, src[0], u.arg))
            elif op is Ops.RANGE:
                names[u] = f"ridx{u.arg}"
                emit(self.loop(u.dtype, names[u], src[0]))
                depth += 1
            elif op in (Ops.END, Ops.ENDIF):
                for _ in range(len(u.src) - 1 if op is Ops.END else 1):
                    depth -= 1
                    emit("}")
            elif op is Ops.IF:
                emit(f"if ({src[0]}) {{")
                depth += 1
            elif op is Ops.AFTER:
                names[u] = src[0]
            elif op is Ops.INDEX:
                names[u] = self.index(src[0], src[1])  # an lvalue; LOAD and STORE use it as it is
            elif op is Ops.LOAD:
                index = u.src[0]
                addr = self.load(u.dtype, index, src[0])
                if len(index.src) == 3 and index.src[2].dtype.count > 1:
                    expr = self._masked_load(u.dtype, src[0], src[1], names[index.src[2]], is_zero(u.src[1]))
                else:
                    expr = self.choose(names[index.src[2]], addr, src[1]) if len(index.src) == 3 else addr
                if u.dtype.count > 1 and uses[u] > 1 and self.host.avx2_fma and self.device == "CPU":
                    # a vector read by several FMAs: keep it in a register (GCC would fold the load into every
                    # FMA, and a 4x16 tile would then wait on 12 loads for 8 FMAs instead of 6)
                    names[u] = fresh("val")
                    emit(f"{ctype(u.dtype)} {names[u]} = {expr};")
                    emit(f'__asm__("" : "+v"({names[u]}));')
                else:
                    bind(u, "val", expr)
            elif op is Ops.STORE:
                emit(self.store(u.src[1].dtype, u.src[0], src[0], src[1]))
            elif op is Ops.CAST:
                bind(u, "cast", self.cast(u, src[0]))
            elif op is Ops.BITCAST:
                bind(u, "cast", self.bitcast(u, src[0]))
            elif op in GroupOp.ALU:
                expr, floor = self._alu(u, src)
                needs_floor |= floor
                bind(u, "alu", expr)
            elif op in (Ops.SINK, Ops.GROUP):
                pass
            elif (line := self.other(u, src, names)) is not None:
                emit(line)
        args = ", ".join(text for _, text in sorted(params, key=lambda p: p[0])) or "void"
        prelude = self.prelude(vectors, needs_floor, uops)
        return "\n".join([prelude, self.head(name, args), *lines, "}", ""])

    def _masked_load(self, dt: DType, lvalue: str, alt: str, gate: str, alt_is_zero: bool) -> str:
        """A vector of `dt` read at element `lvalue` where the lanes of the bool vector `gate` are true, `alt`'s
        lanes elsewhere (`masked_load` says which `dt` have it)."""
        if (avx2 := self.avx2_loads.get((dt.scalar(), dt.count))) is not None:
            loaded = f"__builtin_ia32_{avx2}((const {ctype(dt)}*)&{lvalue}, {gate})"
            return loaded if alt_is_zero else _select(dt, gate, loaded, alt)  # (AVX2 zeroes the lanes it does not read)
        name, scalar = self.avx512_loads[(dt.scalar(), dt.count)], C_TYPES[dt.scalar()]
        bits = name[-3:].lstrip("us")
        mask = f"__builtin_ia32_cvtd2mask{bits}({gate})"
        return f"__builtin_ia32_{name}_mask((const {scalar}*)&{lvalue}, {alt}, {mask})"

    def _shuffled(self, u: UOp, names: dict[UOp, str]) -> str | None:
        """VECTORIZE `u` as one shuffle, when each of its lanes is a lane of one of two vectors of one type."""
        if u.dtype.count < 2 or any(s.op is not Ops.GEP or len(s.arg) != 1 for s in u.src):
            return None
        lanes = [_lane_source(s.src[0], s.arg[0]) for s in u.src]
        position = {v: i for i, v in enumerate(dict.fromkeys(v for v, _ in lanes))}
        vectors = list(position)
        if len(vectors) > 2 or len({v.dtype for v in vectors}) != 1 or vectors[0].dtype.count < 2:
            return None
        count = vectors[0].dtype.count
        idxs = [position[v] * count + i for v, i in lanes]
        return self.shuffle(names[vectors[0]], names[vectors[-1]], idxs)

    def _alu(self, u: UOp, src: list[str]) -> tuple[str, bool]:
        op, dt = u.op, u.dtype
        if dt.count > 1 or (u.src and u.src[-1].dtype.count > 1):
            vector = _vector_alu(u, src, self.builtin_suffixes.get((dt.scalar(), dt.count)))
            if vector is not None:
                return vector, False
        if op in _INFIX:
            return f"({src[0]} {_INFIX[op]} {src[1]})", False
        if op in (Ops.IDIV, Ops.MOD):
            if all(s.vmin >= 0 for s in u.src) or dtypes.is_unsigned(dt):
                return f"({src[0]} {'/' if op is Ops.IDIV else '%'} {src[1]})", False
            fn = "floordiv" if op is Ops.IDIV else "floormod"
            return f"(({self.type_name(dt)}){fn}({src[0]}, {src[1]}))", True
        if op is Ops.NEG:
            return (f"(!{src[0]})" if dt is dtypes.bool else f"(-{src[0]})"), False
        lanewise = (Ops.MULACC, Ops.SQRT, Ops.TRUNC) + ((Ops.MAX,) if dtypes.is_float(dt) else ())
        if op in lanewise and dt.count > 1 and (dt.scalar(), dt.count) not in self.builtin_suffixes:
            # no instruction for this width: lane by lane
            lanes = [
                self._alu(UOp(op, dt.scalar(), tuple(s.gep(i) for s in u.src)), [self.lane(x, i) for x in src])[0]
                for i in range(dt.count)
            ]
            return self.vector_literal(dt, lanes), False
        if op is Ops.MAX and dt.count > 1 and self.builtin_suffixes[(dt.scalar(), dt.count)].endswith("512"):
            # NaN wins, as in numpy: a lane of `a` where a is NaN or greater, else b (two compares into k-masks)
            a, b = src[0], src[1]
            return _select(dt, f"(({a} != {a}) | ({a} > {b}))", a, b), False
        if op is Ops.MAX and dt.count > 1:
            # NaN wins, as in numpy: maxps gives its second operand when either is NaN, so a NaN in `a` is put back
            sfx = self.builtin_suffixes[(dt.scalar(), dt.count)]
            a, b = src
            nan_a = f"__builtin_ia32_cmp{sfx}({a}, {a}, 3)"
            return f"__builtin_ia32_blendv{sfx}(__builtin_ia32_max{sfx}({a}, {b}), {a}, {nan_a})", False
        if op is Ops.MAX:
            a, b = src
            if dtypes.is_float(dt):
                return f"((({a} != {a}) || ({a} > {b})) ? {a} : {b})", False  # NaN wins, as in numpy
            return f"(({a} > {b}) ? {a} : {b})", False
        if op is Ops.WHERE:
            return f"({src[0]} ? {src[1]} : {src[2]})", False
        if op is Ops.MULACC and dt.count > 1 and (fma := self.builtin_suffixes.get((dt.scalar(), dt.count))):
            return f"__builtin_ia32_vfmadd{fma}{_mask_args(fma)}({', '.join(src)}{_mask_args(fma, True)})", False
        if op is Ops.MULACC and dt in (dtypes.float32, dtypes.float64):
            return f"__builtin_fma{'f' if dt is dtypes.float32 else ''}({', '.join(src)})", False
        if op is Ops.MULACC:
            return f"(({src[0]} * {src[1]}) + {src[2]})", False
        if op is Ops.RECIPROCAL:
            return f"({self.const(1.0, dt)} / {src[0]})", False
        if op in MATH_FUNCTIONS:
            return _float_math(op, dt, src[0]), False
        raise NotImplementedError(f"the C renderer cannot render {op.name}")


def _lane_source(v: UOp, i: int) -> tuple[UOp, int]:
    """Lane `i` of vector `v` as a lane of the vector it was taken from, through GEPs of several lanes (a tile's
    half-vectors): a shuffle then reads the whole vector, not a copy of its half."""
    while v.op is Ops.GEP and len(v.arg) > 1:
        v, i = v.src[0], v.arg[i]
    return v, i


def _typedefs(dt: DType) -> str:
    """A vector type, and its unaligned twin for loads and stores at any element address."""
    scalar = dt.scalar() if dt.scalar() is not dtypes.bool else MASK
    base, size, name = C_TYPES[scalar], scalar.itemsize * dt.count, vector_name(dt)
    return (
        f"typedef {base} {name} __attribute__((vector_size({size})));\n"
        f"typedef {base} {name}_u __attribute__((vector_size({size}), aligned({scalar.itemsize})));\n"
    )


@functools.cache
def vector_typedefs(vector_bytes: int) -> str:
    """Every vector type a kernel may name where a vector register holds `vector_bytes` (masks and bitwise selects
    use int vectors the program never holds)."""
    lanes = {dt: vector_bytes // dt.itemsize for dt in VECTOR_SCALARS}
    return "".join(_typedefs(dt.vec(n)) for dt, most in lanes.items() for n in (2, 4, 8, 16) if n <= most)


def _vector_access(dt: DType, index: UOp, lvalue: str, const: str) -> str:
    """A vector of `dt` read or written at a scalar pointer's element `lvalue`; anything else as it is."""
    ptr = index.src[0].dtype
    if dt.count > 1 and isinstance(ptr, PtrDType) and ptr.base.count == 1:
        return f"(*({const}{vector_name(dt)}_u*)&{lvalue})"
    return lvalue


def _select(dt: DType, mask: str, a: str, b: str) -> str:
    """Vector `dt` with `a`'s lanes where `mask` (int lanes of `dt`'s size, -1/0) is set, `b`'s elsewhere: a bitwise
    select, which gcc makes one blend."""
    it = ctype(_int_of(dt))
    return f"(({ctype(dt)})((({it}){a} & {mask}) | (({it}){b} & ~{mask})))"


def _int_of(dt: DType) -> DType:
    """The int vector with `dt`'s lanes and lane size (what a bitwise select of `dt` computes in)."""
    if dt.scalar() is dtypes.bool:
        return MASK.vec(dt.count)
    return {1: dtypes.int8, 2: dtypes.int16, 4: dtypes.int32, 8: dtypes.int64}[dt.scalar().itemsize].vec(dt.count)


def _mask_for(mask: str, dt: DType) -> str:
    """A mask (int32 lanes) widened or narrowed to the lane size of `dt`."""
    if _int_of(dt).scalar() is MASK:
        return mask
    return f"__builtin_convertvector({mask}, {ctype(_int_of(dt))})"


def _vector_cast(src: DType, dst: DType, x: str) -> str:
    if dst.scalar() is dtypes.bool:
        zero = render_const(0.0 if dtypes.is_float(src) else 0, src)
        return _as_mask(f"({x} != {zero})", src)
    if src.scalar() is dtypes.bool:
        return f"__builtin_convertvector(-({x}), {ctype(dst)})"  # a true lane is -1: 1 after negation
    return f"__builtin_convertvector({x}, {ctype(dst)})"


def _as_mask(cmp: str, operand: DType) -> str:
    """A GCC vector comparison (lanes of the operands' size) as a mask of int32 lanes."""
    if operand.scalar().itemsize == MASK.itemsize:
        return cmp
    return f"__builtin_convertvector({cmp}, {ctype(MASK.vec(operand.count))})"


def _vector_alu(u: UOp, src: list[str], sfx: str | None) -> str | None:
    """The C of an ALU op on vectors where it differs from the scalar form (None: the same text serves); `sfx` is
    the suffix of the x86 builtins for the vector's width (None: it has none)."""
    op, dt = u.op, u.dtype
    if u.src[0].dtype.scalar() is dtypes.bool and op in (*GroupOp.Comparison, Ops.MAX):
        # masks: true is -1, so the integer order is backwards; say it in logic instead
        a, b = src[0], src[1]
        logic = {Ops.CMPLT: f"(~{a} & {b})", Ops.CMPNE: f"({a} ^ {b})", Ops.CMPEQ: f"(~({a} ^ {b}))"}
        return logic.get(op, f"({a} | {b})")
    if op in GroupOp.Comparison:
        return _as_mask(f"({src[0]} {_INFIX[op]} {src[1]})", u.src[0].dtype)
    if op is Ops.NEG and dt.scalar() is dtypes.bool:
        return f"(~{src[0]})"
    if op is Ops.WHERE:
        return _select(dt, _mask_for(src[0], dt), src[1], src[2])
    if op is Ops.MAX and not dtypes.is_float(dt):
        return _select(dt, f"({src[0]} > {src[1]})", src[0], src[1])
    if sfx is None or op not in (Ops.SQRT, Ops.TRUNC):
        return None
    if op is Ops.SQRT:
        merge = f", {src[0]}" if sfx.endswith("512") else ""
        return f"__builtin_ia32_sqrt{sfx}{_mask_args(sfx)}({src[0]}{merge}{_mask_args(sfx, True)})"
    # round toward zero, no precision exception (0x0B): vroundps/vrndscaleps keep -0.0, infinities and NaN
    if sfx.endswith("512"):
        return f"__builtin_ia32_rndscale{sfx[:2]}_mask({src[0]}, 0x0B, {src[0]}{_mask_args(sfx, True)})"
    return f"__builtin_ia32_round{sfx}({src[0]}, 0x0B)"


def _mask_args(sfx: str, args: bool = False) -> str:
    """What a 512-bit builtin adds: `_mask` to its name, and (args) every lane and the current rounding mode."""
    if not sfx.endswith("512"):
        return ""
    return ", -1, 4" if args else "_mask"
