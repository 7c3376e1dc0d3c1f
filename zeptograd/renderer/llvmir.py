"""The LLVM IR renderer: a linear program becomes one LLVM function, as text.

It renders the same linear program the C renderer gets, op by op:
DEFINE_GLOBAL a `ptr noalias` parameter, DEFINE_REG an `alloca` in the entry block, RANGE/END a loop whose
counter is a `phi` (header, body, latch, exit blocks), IF/ENDIF a conditional branch around a block, INDEX a
`getelementptr`, LOAD and STORE `load`/`store` (bools are bytes in memory and `i1` in registers), a gated
LOAD a `select` of the address (a private block of zeros when the gate is off, so nothing outside a buffer is
read) and of the value, CONST a literal, VECTORIZE/GEP `insertelement`/`extractelement`/`shufflevector`,
CAST a conversion instruction, MULACC the `llvm.fma` intrinsic. Vectors are LLVM vector types (`<8 x float>`).
EXP2, LOG2 and SIN arrive as arithmetic (the IR's polynomials), never as libm calls.

Index arithmetic in the IR is floor division and modulo; `sdiv`/`srem` truncate. The two agree when both
operands are known non-negative (the value ranges say so); otherwise the floor is computed from them.

>>> from zeptograd.uop.ops import UOp
>>> print(llvm_const(1.5, dtypes.float32), llvm_const(-1, dtypes.uint8), llvm_const(True, dtypes.bool.vec(2)))
1.5 -1 splat (i1 true)
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence

from zeptograd.dtype import DType, PtrDType, dtypes, truncate
from zeptograd.renderer import Renderer
from zeptograd.renderer.cstyle import MATH_FUNCTIONS, vector_lanes
from zeptograd.renderer.host import HostCPU, take_host
from zeptograd.uop.ops import GroupOp, Ops, UOp

LLVM_TYPES: dict[DType, str] = {
    dtypes.bool: "i1",
    dtypes.int8: "i8",
    dtypes.uint8: "i8",
    dtypes.int16: "i16",
    dtypes.uint16: "i16",
    dtypes.int32: "i32",
    dtypes.uint32: "i32",
    dtypes.int64: "i64",
    dtypes.uint64: "i64",
    dtypes.float16: "half",
    dtypes.float32: "float",
    dtypes.float64: "double",
}

# integer division and modulo stay lane by lane (x86 has no vector divide; LLVM would split it anyway)
_SCALAR_ONLY = frozenset({Ops.IDIV, Ops.MOD})
# a gated LOAD whose gate is off reads this block of zeros instead (room for the widest vector)
ZEROS = "@zeptograd.zeros"
_ZEROS_DEF = f"{ZEROS} = private unnamed_addr constant [128 x i8] zeroinitializer, align 64"


def lltype(dt: DType) -> str:
    """The LLVM type of a value of `dt`: `float`, `<8 x float>`, `i1`; `ptr` for any pointer.

    >>> lltype(dtypes.float32.vec(8)), lltype(dtypes.uint8), lltype(dtypes.float16.ptr())
    ('<8 x float>', 'i8', 'ptr')
    """
    if isinstance(dt, PtrDType):
        return "ptr"
    if dt.count > 1:
        return f"<{dt.count} x {lltype(dt.scalar())}>"
    if dt not in LLVM_TYPES:
        raise NotImplementedError(f"the LLVM renderer has no type for {dt!r}")
    return LLVM_TYPES[dt]


def memtype(dt: DType) -> str:
    """The LLVM type of `dt` in memory: a bool is a byte there.

    >>> memtype(dtypes.bool), memtype(dtypes.bool.vec(4)), memtype(dtypes.int32)
    ('i8', '<4 x i8>', 'i32')
    """
    if dt.scalar() is dtypes.bool:
        return "i8" if dt.count == 1 else f"<{dt.count} x i8>"
    return lltype(dt)


def llvm_const(value: object, dt: DType) -> str:
    """An LLVM literal of `dt` (without its type): a finite float as the shortest decimal that is exactly its
    value, inf and NaN as the hex of their double, ints as signed, a vector as a splat."""
    if dt.count > 1:
        return f"splat ({lltype(dt.scalar())} {llvm_const(value, dt.scalar())})"
    if dt is dtypes.bool:
        return "true" if value else "false"
    if dtypes.is_float(dt):
        x = truncate(float(value), dt)  # type: ignore[arg-type]
        if dt is dtypes.float16:
            return "0xH" + struct.pack(">e", x).hex().upper()
        if math.isfinite(x):
            # Python's shortest repr parses back to exactly this double (and so to this float32): readable
            text = repr(x)
            return text if "." in text else text.replace("e", ".0e")
        return "0x" + struct.pack(">d", x).hex().upper()
    assert isinstance(value, int)
    bits = 8 * dt.itemsize
    v = value & ((1 << bits) - 1)
    return str(v - (1 << bits) if v >= 1 << (bits - 1) else v)


def _zero(dt: DType) -> str:
    return llvm_const(0.0 if dtypes.is_float(dt) else 0, dt)


class LLVMRenderer(Renderer):
    """Renders a linear program as an LLVM IR module holding `define void @name(ptr noalias %data0, ...)`, its
    vectors as wide as the CPU `host`'s (None: the host's, `HostCPU.read()`), the C device's widths: the same
    programs.

    >>> LLVMRenderer(HostCPU(frozenset({"avx2", "fma", "avx512f"}))).max_lanes(Ops.ADD, dtypes.float32)
    16
    """

    device = "LLVM"
    has_threads = True
    runs_on_cpu = True

    def __init__(self, host: HostCPU | None = None) -> None:
        self.host = take_host(self, host)
        self.vector_lanes = vector_lanes(self.host)

    def supported_dtypes(self) -> frozenset[DType]:
        """Every scalar dtype LLVM IR has a type for (all of C's).

        >>> dtypes.float16 in LLVMRenderer().supported_dtypes()
        True
        """
        return frozenset(LLVM_TYPES)

    def max_lanes(self, op: Ops, dt: DType) -> int:
        """How many lanes of `dt` the IR does `op` on at once (1: lane by lane)."""
        if dt is dtypes.bool:
            # bools are stored as bytes; in registers as wide as the int32 vectors (the C renderer's masks)
            return 1 if op in (Ops.LOAD, Ops.STORE, Ops.REDUCE) else self.vector_lanes[dtypes.int32]
        if op in _SCALAR_ONLY:
            return 1
        return self.vector_lanes.get(dt, 1)

    def render(self, name: str, uops: Sequence[UOp]) -> str:
        return _Function(name, uops).text()


_FLOAT_BINARY = {Ops.ADD: "fadd", Ops.SUB: "fsub", Ops.MUL: "fmul", Ops.FDIV: "fdiv"}
_INT_BINARY = {Ops.ADD: "add", Ops.SUB: "sub", Ops.MUL: "mul", Ops.AND: "and", Ops.OR: "or", Ops.XOR: "xor"}
_INT_BINARY[Ops.SHL] = "shl"
_FLOAT_CMP = {Ops.CMPLT: "olt", Ops.CMPNE: "une", Ops.CMPEQ: "oeq"}  # NaN != anything; NaN < x is false


def _suffix(dt: DType) -> str:
    """The type suffix of an overloaded intrinsic: `f32`, `v8f32`."""
    s = {dtypes.float16: "f16", dtypes.float32: "f32", dtypes.float64: "f64"}[dt.scalar()]
    return s if dt.count == 1 else f"v{dt.count}{s}"


class _Function:
    """The state of rendering one function: value names, the block being written, declarations needed."""

    def __init__(self, name: str, uops: Sequence[UOp]):
        self.name, self.uops = name, list(uops)
        self.names: dict[UOp, str] = {}
        self.lines: list[str] = []
        self.allocas: list[str] = []
        self.declares: set[str] = set()
        self.counter = 0
        self.block = "entry"
        self.needs_zeros = False
        # per RANGE: the block the loop is entered from, and its label stem
        self.loops: dict[UOp, tuple[str, str]] = {}

    def fresh(self, prefix: str = "v") -> str:
        self.counter += 1
        return f"%{prefix}{self.counter}"

    def emit(self, line: str) -> None:
        self.lines.append("  " + line)

    def label(self, name: str) -> None:
        self.lines.append(f"{name}:")
        self.block = name

    def bind(self, u: UOp, instr: str) -> str:
        self.names[u] = self.fresh()
        self.emit(f"{self.names[u]} = {instr}")
        return self.names[u]

    def tmp(self, instr: str) -> str:
        name = self.fresh("t")
        self.emit(f"{name} = {instr}")
        return name

    def operand(self, u: UOp) -> str:
        """`type value` of an already rendered UOp."""
        return f"{lltype(u.dtype)} {self.names[u]}"

    def text(self) -> str:
        params: list[tuple[int, str]] = []
        for u in self.uops:
            self.render_uop(u, params)
        args = ", ".join(p for _, p in sorted(params, key=lambda p: p[0]))
        head = [_ZEROS_DEF] if self.needs_zeros else []
        body = [f"define void @{self.name}({args}) nounwind {{", "entry:", *self.allocas, *self.lines, "  ret void"]
        return "\n".join([*head, *sorted(self.declares), *body, "}", ""])

    def render_uop(self, u: UOp, params: list[tuple[int, str]]) -> None:
        op, names = u.op, self.names
        if op is Ops.DEFINE_GLOBAL:
            names[u] = f"%data{u.arg}"
            params.append((u.arg, f"ptr noalias {names[u]}"))
        elif op is Ops.DEFINE_VAR:
            names[u] = f"%{u.arg[0]}"
            params.append((1 << 30, f"{lltype(u.dtype)} {names[u]}"))  # variables after the buffers
        elif op is Ops.SPECIAL:
            names[u] = f"%{u.arg}"
            params.append((1 << 31, f"{lltype(u.dtype)} {names[u]}"))  # the chunk index comes last
        elif op is Ops.DEFINE_REG:
            assert isinstance(u.dtype, PtrDType)
            names[u] = f"%acc{u.arg}"
            self.allocas.append(f"  {names[u]} = alloca [{u.dtype.size} x {memtype(u.dtype.base)}], align 64")
        elif op is Ops.CONST:
            names[u] = llvm_const(u.arg, u.dtype)
        elif op in (Ops.AFTER,):
            names[u] = names[u.src[0]]
        elif op in (Ops.SINK, Ops.GROUP):
            pass
        elif op is Ops.RANGE:
            self.open_loop(u)
        elif op is Ops.END:
            pos = {r: i for i, r in enumerate(self.uops) if r.op is Ops.RANGE}
            for r in sorted(u.src[1:], key=pos.__getitem__, reverse=True):
                self.close_loop(r)
        elif op is Ops.IF:
            stem = self.fresh("if")[1:]
            names[u] = stem
            self.emit(f"br i1 {names[u.src[0]]}, label %{stem}.then, label %{stem}.end")
            self.label(f"{stem}.then")
        elif op is Ops.ENDIF:
            stem = names[u.src[0]]
            self.emit(f"br label %{stem}.end")
            self.label(f"{stem}.end")
        elif op is Ops.INDEX:
            self.render_index(u)
        elif op is Ops.LOAD:
            self.render_load(u)
        elif op is Ops.STORE:
            index, value = u.src[0], u.src[1]
            v = names[value]
            if value.dtype.scalar() is dtypes.bool:
                v = self.tmp(f"zext {lltype(value.dtype)} {v} to {memtype(value.dtype)}")
            align = _align(index, value.dtype)
            self.emit(f"store {memtype(value.dtype)} {v}, ptr {names[index]}, align {align}")
        elif op is Ops.VECTORIZE:
            self.render_vectorize(u)
        elif op is Ops.GEP:
            src = u.src[0]
            if len(u.arg) == 1:
                self.bind(u, f"extractelement {self.operand(src)}, i32 {u.arg[0]}")
            else:
                mask = ", ".join(f"i32 {i}" for i in u.arg)
                self.bind(
                    u, f"shufflevector {self.operand(src)}, {lltype(src.dtype)} poison, <{len(u.arg)} x i32> <{mask}>"
                )
        elif op is Ops.CAST:
            self.render_cast(u)
        elif op is Ops.BITCAST:
            self.bind(u, f"bitcast {self.operand(u.src[0])} to {lltype(u.dtype)}")
        elif op in GroupOp.ALU:
            self.render_alu(u)
        else:
            raise NotImplementedError(f"the LLVM renderer cannot render {op.name}")

    # loops: header (the counter's phi and the test), body, latch (the increment), exit
    def open_loop(self, r: UOp) -> None:
        stem = f"loop{r.arg}" if isinstance(r.arg, int) else self.fresh("loop")[1:]
        stem = f"{stem}.{self.counter}"
        self.counter += 1
        ty, name = lltype(r.dtype), f"%ridx.{stem}"
        self.names[r] = name
        self.loops[r] = (self.block, stem)
        self.emit(f"br label %{stem}")
        self.label(stem)
        self.emit(f"{name} = phi {ty} [0, %{self.loops[r][0]}], [{name}.next, %{stem}.latch]")
        test = self.tmp(f"icmp slt {ty} {name}, {self.names[r.src[0]]}")
        self.emit(f"br i1 {test}, label %{stem}.body, label %{stem}.exit")
        self.label(f"{stem}.body")

    def close_loop(self, r: UOp) -> None:
        _, stem = self.loops[r]
        ty, name = lltype(r.dtype), self.names[r]
        self.emit(f"br label %{stem}.latch")
        self.label(f"{stem}.latch")
        self.emit(f"{name}.next = add nsw {ty} {name}, 1")
        self.emit(f"br label %{stem}")
        self.label(f"{stem}.exit")

    def render_index(self, u: UOp) -> None:
        ptr = u.src[0].dtype
        assert isinstance(ptr, PtrDType)
        # a gated address may lie outside its buffer when the gate is off: no `inbounds` promise then
        inbounds = "" if len(u.src) == 3 else "inbounds "
        self.bind(
            u, f"getelementptr {inbounds}{memtype(ptr.base)}, ptr {self.names[u.src[0]]}, {self.operand(u.src[1])}"
        )

    def render_load(self, u: UOp) -> None:
        index = u.src[0]
        addr, mt, align = self.names[index], memtype(u.dtype), _align(index, u.dtype)
        gated = len(index.src) == 3
        if gated:
            self.needs_zeros = True
            addr = self.tmp(f"select i1 {self.names[index.src[2]]}, ptr {addr}, ptr {ZEROS}")
        value = self.tmp(f"load {mt}, ptr {addr}, align {align}")
        if u.dtype.scalar() is dtypes.bool:
            value = self.tmp(f"icmp ne {mt} {value}, {_zero(dtypes.uint8.vec(u.dtype.count))}")
        if gated:
            self.bind(u, f"select i1 {self.names[index.src[2]]}, {lltype(u.dtype)} {value}, {self.operand(u.src[1])}")
        else:
            self.names[u] = value

    def render_vectorize(self, u: UOp) -> None:
        ty = lltype(u.dtype)
        if all(s.op is Ops.CONST for s in u.src) and len({s.arg for s in u.src}) == 1:
            self.names[u] = llvm_const(u.src[0].arg, u.dtype)
            return
        if all(s.op is Ops.CONST for s in u.src):
            # a vector of constants is a literal, not a chain of insertelements
            scalar = lltype(u.dtype.scalar())
            self.names[u] = "<" + ", ".join(f"{scalar} {self.names[s]}" for s in u.src) + ">"
            return
        acc = "poison"
        for i, s in enumerate(u.src):
            acc = self.tmp(f"insertelement {ty} {acc}, {self.operand(s)}, i32 {i}")
        self.names[u] = acc

    def render_cast(self, u: UOp) -> None:
        src, dst = u.src[0].dtype, u.dtype
        s, d = src.scalar(), dst.scalar()
        x, to = self.operand(u.src[0]), lltype(dst)
        if d is dtypes.bool:
            cmp = "fcmp une" if dtypes.is_float(s) else "icmp ne"  # NaN is true, as in C
            self.bind(u, f"{cmp} {x}, {_zero(src)}")
        elif s is dtypes.bool:
            self.bind(u, f"{'uitofp' if dtypes.is_float(d) else 'zext'} {x} to {to}")
        elif dtypes.is_float(s) and dtypes.is_float(d):
            kind = "fpext" if d.itemsize > s.itemsize else "fptrunc" if d.itemsize < s.itemsize else None
            if kind is None:
                self.names[u] = self.names[u.src[0]]
            elif s is dtypes.float64 and d is dtypes.float16:
                self.names[u] = self.double_to_half(u.src[0], dst.count)
            else:
                self.bind(u, f"{kind} {x} to {to}")
        elif dtypes.is_float(s):
            # out of range is undefined (as in C): 8- and 16-bit ints convert through int32 as x86 does (so -1.0
            # to uint8 is 255, as in C and numpy), the rest directly (cvttps2dq for int32: one instruction per 8
            # lanes); the result is frozen, so an out-of-range lane is some value, not poison spreading on
            wide = d if d.itemsize >= 4 else dtypes.int32
            conv = "fptoui" if d in (dtypes.uint32, dtypes.uint64) else "fptosi"
            wide_t = lltype(wide.vec(dst.count)) if dst.count > 1 else lltype(wide)
            w = self.tmp(f"freeze {wide_t} {self.tmp(f'{conv} {x} to {wide_t}')}")
            if wide.itemsize == d.itemsize:
                self.names[u] = w
            else:
                self.bind(u, f"trunc {wide_t} {w} to {to}")
        elif dtypes.is_float(d):
            self.bind(u, f"{'uitofp' if dtypes.is_unsigned(s) else 'sitofp'} {x} to {to}")
        elif d.itemsize > s.itemsize:
            self.bind(u, f"{'zext' if dtypes.is_unsigned(s) else 'sext'} {x} to {to}")
        elif d.itemsize < s.itemsize:
            self.bind(u, f"trunc {x} to {to}")
        else:
            self.names[u] = self.names[u.src[0]]  # int32 <-> uint32: the same bits

    def double_to_half(self, x: UOp, count: int) -> str:
        """float64 -> float16 rounded once, without the libcall LLVM would make (`__truncdfhf2`, not in every
        process): round to float32 *to odd* (toward zero, the last bit set when inexact), then to half. float32
        has 13 more bits than half, so the odd last bit only stands for "inexact" and the second rounding is
        the correct one."""
        f64, f32, i32 = (t.vec(count) for t in (dtypes.float64, dtypes.float32, dtypes.int32))
        d, f, i, b = lltype(f64), lltype(f32), lltype(i32), lltype(dtypes.bool.vec(count))
        fabs_d, fabs_f = f"@llvm.fabs.{_suffix(f64)}", f"@llvm.fabs.{_suffix(f32)}"
        self.declares |= {f"declare {d} {fabs_d}({d})", f"declare {f} {fabs_f}({f})"}
        val = self.names[x]
        near = self.tmp(f"fptrunc {d} {val} to {f}")
        back = self.tmp(f"fpext {f} {near} to {d}")
        inexact = self.tmp(f"fcmp one {d} {back}, {val}")
        abs_near = self.tmp(f"call {f} {fabs_f}({f} {near})")
        finite = self.tmp(f"fcmp one {f} {abs_near}, {llvm_const(float('inf'), f32)}")
        bits = self.tmp(f"bitcast {f} {near} to {i}")
        low = self.tmp(f"and {i} {bits}, {llvm_const(1, i32)}")
        even = self.tmp(f"icmp eq {i} {low}, {_zero(i32)}")
        fix = self.tmp(f"and {b} {self.tmp(f'and {b} {inexact}, {finite}')}, {even}")
        # the odd neighbour: one step toward zero when rounding went away from zero, else one step away
        abs_back = self.tmp(f"call {d} {fabs_d}({d} {back})")
        abs_val = self.tmp(f"call {d} {fabs_d}({d} {val})")
        away = self.tmp(f"fcmp ogt {d} {abs_back}, {abs_val}")
        step = self.tmp(f"select {b} {away}, {i} {llvm_const(-1, i32)}, {i} {llvm_const(1, i32)}")
        moved = self.tmp(f"add {i} {bits}, {step}")
        odd = self.tmp(f"bitcast {i} {self.tmp(f'select {b} {fix}, {i} {moved}, {i} {bits}')} to {f}")
        return self.tmp(f"fptrunc {f} {odd} to {lltype(dtypes.float16.vec(count))}")

    def render_alu(self, u: UOp) -> None:
        op, dt = u.op, u.dtype
        ty = lltype(dt)
        a = [self.names[s] for s in u.src]
        operand_dt = u.src[0].dtype if op is not Ops.WHERE else u.src[1].dtype
        scalar = operand_dt.scalar()
        is_float, is_bool = dtypes.is_float(scalar), scalar is dtypes.bool
        oty = lltype(operand_dt)
        if op in GroupOp.Comparison:
            if is_float:
                self.bind(u, f"fcmp {_FLOAT_CMP[op]} {oty} {a[0]}, {a[1]}")
            else:
                pred = {Ops.CMPNE: "ne", Ops.CMPEQ: "eq"}.get(op) or (
                    "ult" if dtypes.is_unsigned(scalar) or is_bool else "slt"
                )
                self.bind(u, f"icmp {pred} {oty} {a[0]}, {a[1]}")
        elif op is Ops.WHERE:
            self.bind(u, f"select {self.operand(u.src[0])}, {ty} {a[1]}, {ty} {a[2]}")
        elif is_bool and op in (Ops.ADD, Ops.MUL):
            # on bools + is "or" and * is "and" (numpy's, and C's once the sum is stored as a bool); i1 add wraps
            self.bind(u, f"{'or' if op is Ops.ADD else 'and'} {ty} {a[0]}, {a[1]}")
        elif is_float and op in _FLOAT_BINARY:
            self.bind(u, f"{_FLOAT_BINARY[op]} {ty} {a[0]}, {a[1]}")
        elif op in _INT_BINARY and not is_float:
            self.bind(u, f"{_INT_BINARY[op]} {ty} {a[0]}, {a[1]}")
        elif op is Ops.SHR:
            self.bind(u, f"{'lshr' if dtypes.is_unsigned(scalar) else 'ashr'} {ty} {a[0]}, {a[1]}")
        elif op is Ops.NEG:
            if is_float:
                self.bind(u, f"fneg {ty} {a[0]}")
            elif is_bool:
                self.bind(u, f"xor {ty} {a[0]}, {llvm_const(True, dt)}")
            else:
                self.bind(u, f"sub {ty} {_zero(dt)}, {a[0]}")
        elif op is Ops.MAX:
            if is_float:
                # NaN wins, as in numpy: a when a is NaN or a > b, else b (which is NaN when b is)
                nan = self.tmp(f"fcmp uno {ty} {a[0]}, {a[0]}")
                gt = self.tmp(f"fcmp ogt {ty} {a[0]}, {a[1]}")
                cond = self.tmp(f"or {lltype(dtypes.bool.vec(dt.count))} {nan}, {gt}")
            elif is_bool:
                self.bind(u, f"or {ty} {a[0]}, {a[1]}")
                return
            else:
                cond = self.tmp(f"icmp {'ugt' if dtypes.is_unsigned(scalar) else 'sgt'} {ty} {a[0]}, {a[1]}")
            self.bind(u, f"select {lltype(dtypes.bool.vec(dt.count))} {cond}, {ty} {a[0]}, {ty} {a[1]}")
        elif op in (Ops.IDIV, Ops.MOD):
            self.render_divmod(u, a)
        elif op is Ops.RECIPROCAL:
            self.bind(u, f"fdiv {ty} {llvm_const(1.0, dt)}, {a[0]}")
        elif op is Ops.MULACC and scalar is dtypes.float16:
            # as GCC computes `a * b + c` in _Float16: in float (the product is exact there), rounded once to half
            f = lltype(dtypes.float32.vec(dt.count))
            x, y, z = (self.tmp(f"fpext {ty} {v} to {f}") for v in a)
            total = self.tmp(f"fadd {f} {self.tmp(f'fmul {f} {x}, {y}')}, {z}")
            self.bind(u, f"fptrunc {f} {total} to {ty}")
        elif op is Ops.MULACC and is_float:
            fn = f"@llvm.fma.{_suffix(dt)}"
            self.declares.add(f"declare {ty} {fn}({ty}, {ty}, {ty})")
            self.bind(u, f"call {ty} {fn}({ty} {a[0]}, {ty} {a[1]}, {ty} {a[2]})")
        elif op is Ops.MULACC:
            prod = self.tmp(f"mul {ty} {a[0]}, {a[1]}")
            self.bind(u, f"add {ty} {prod}, {a[2]}")
        elif op in MATH_FUNCTIONS and is_float:
            # SQRT and TRUNC are instructions; EXP2/LOG2/SIN/COS/TAN only reach here if a target kept them (none does)
            fn = f"@llvm.{MATH_FUNCTIONS[op]}.{_suffix(dt)}"
            self.declares.add(f"declare {ty} {fn}({ty})")
            self.bind(u, f"call {ty} {fn}({ty} {a[0]})")
        elif op is Ops.TRUNC:
            self.names[u] = a[0]  # an integer is its own truncation
        else:
            raise NotImplementedError(f"the LLVM renderer cannot render {op.name} on {dt!r}")

    def render_divmod(self, u: UOp, a: list[str]) -> None:
        op, dt, ty = u.op, u.dtype, lltype(u.dtype)
        if dtypes.is_unsigned(dt):
            self.bind(u, f"{'udiv' if op is Ops.IDIV else 'urem'} {ty} {a[0]}, {a[1]}")
            return
        if all(s.vmin >= 0 for s in u.src):
            self.bind(u, f"{'sdiv' if op is Ops.IDIV else 'srem'} {ty} {a[0]}, {a[1]}")
            return
        # floor: the truncated quotient less one (the remainder plus the divisor) when the remainder is nonzero
        # and its sign differs from the divisor's. Narrower ints compute in i64, as C's helper does: there
        # INT32_MIN / -1 does not overflow (and so does not trap)
        narrow = dt.itemsize < 8
        if narrow:
            wide = lltype(dtypes.int64.vec(dt.count))
            a = [self.tmp(f"sext {ty} {x} to {wide}") for x in a]
            ty, dt = wide, dtypes.int64.vec(dt.count)
        q = self.tmp(f"sdiv {ty} {a[0]}, {a[1]}")
        r = self.tmp(f"srem {ty} {a[0]}, {a[1]}")
        zero = _zero(dt)
        nonzero = self.tmp(f"icmp ne {ty} {r}, {zero}")
        r_neg = self.tmp(f"icmp slt {ty} {r}, {zero}")
        b_neg = self.tmp(f"icmp slt {ty} {a[1]}, {zero}")
        differ = self.tmp(f"xor i1 {r_neg}, {b_neg}")
        fix = self.tmp(f"and i1 {nonzero}, {differ}")
        if op is Ops.IDIV:
            one = self.tmp(f"zext i1 {fix} to {ty}")
            out = self.tmp(f"sub {ty} {q}, {one}")
        else:
            add = self.tmp(f"select i1 {fix}, {ty} {a[1]}, {ty} {zero}")
            out = self.tmp(f"add {ty} {r}, {add}")
        if narrow:
            self.bind(u, f"trunc {ty} {out} to {lltype(u.dtype)}")
        else:
            self.names[u] = out


def _align(index: UOp, dt: DType) -> int:
    """The alignment a LOAD or STORE of `dt` through `index` may assume: one element of the pointer's base (a
    vector read through a pointer to scalars may start at any element)."""
    ptr = index.src[0].dtype
    assert isinstance(ptr, PtrDType)
    base = ptr.base
    if base.count > 1:
        return base.scalar().itemsize * base.count if base.scalar() is not dtypes.bool else base.count
    return max(base.itemsize, 1)
