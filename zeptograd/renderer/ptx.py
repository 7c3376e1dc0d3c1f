"""The PTX renderer: a linear program becomes one PTX kernel (`.entry`), as text the CUDA driver JIT-compiles.

It renders the linear program the CUDA C renderer gets, op by op, for `.target sm_80` (the PTX assembles for
sm_90 too: ptxas takes a newer architecture than the one named):

- registers are virtual and typeless by size: `%p` predicates (bools), `%h` 16 bits, `%r` 32, `%rd` 64; each
  instruction names its own type (`add.s32`, `add.rn.f32`), which PTX allows on bit-typed registers of the same
  size. 8-bit ints live in 16-bit registers, kept sign- (int8) or zero-extended (uint8) after every op that can
  leave the byte, so comparisons, division and conversions see the byte's value;
- DEFINE_GLOBAL is a `.param .u64` read with `ld.param` and made a global address with `cvta.to.global`;
  INDEX is address arithmetic (`mul.wide.s32` + `add.s64`); LOAD and STORE are `ld`/`st` in the pointer's state
  space (`.global`, `.shared` for DEFINE_LOCAL, `.local` for DEFINE_REG, which ptxas turns into registers
  when the indices are constant); a gated LOAD is the fallback moved into the register and a predicated `ld`
  (`@%p ld.global ...`), so nothing outside a buffer is read;
- bools are `.pred` in registers and bytes in memory (`selp` to store, `setp.ne` after a load);
- RANGE/END are a counter, a test at the head and a branch back; IF/ENDIF a predicated branch around a block;
- SPECIAL is `%ctaid`/`%tid` on the axis `launch_order` gives it (the same as the CUDA C renderer's);
  BARRIER is `bar.sync 0`;
- float arithmetic is correctly rounded as in the CUDA C device (NVRTC with precise division and `--fmad=false`):
  `add.rn`/`mul.rn` (the `.rn` stops ptxas from contracting them into an fma), `div.rn`, `sqrt.rn`, `rcp.rn`,
  `fma.rn` only for MULACC; half divides and takes roots in float, where one more rounding to half is exact;
- casts are `cvt` with C's rounding: float -> int truncates (`cvt.rzi`), int -> float and narrowing floats round
  to nearest (`cvt.rn`); float -> 8/16-bit ints convert through int32 as the CPU devices do; bit casts are
  free (registers are typeless).

EXP2, LOG2 and SIN arrive as arithmetic (the IR's polynomials). Vectors are not rendered: `max_lanes` is 1, as
for the CUDA C renderer, so every plan of one applies to the other. The one exception is a tensor core's fragments
(the TC opt): a vector is a list of registers, one a lane (VECTORIZE gathers them, GEP picks one), an accumulator
of four floats is read and written with `ld.local.v4`/`st.local.v4`, and WMMA is `mma.sync.aligned.m16n8k16`
with the A and B halves packed two to a 32-bit register (`mov.b32 %r, {lo, hi}`).

>>> from zeptograd import Tensor
>>> from zeptograd.codegen import get_program
>>> from zeptograd.schedule.kernelize import create_schedule
>>> a = Tensor.ones(4).contiguous().realize()
>>> (item,), _ = create_schedule([(a * 2).uop], ["CPU"])
>>> src = get_program(item.ast, PTXRenderer()).src
>>> ".visible .entry" in src and "mul.rn.f32" in src
True
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence

from zeptograd.codegen.tensor_cores import MMA_M16N8K16_BF16, MMA_M16N8K16_F16
from zeptograd.dtype import AddrSpace, DType, PtrDType, dtypes, truncate
from zeptograd.renderer import Renderer
from zeptograd.renderer.cuda import CUDA_DTYPES, MMA_TYPES, SHARED_LIMIT, launch_order
from zeptograd.uop.ops import GroupOp, Ops, UOp

# PTX ISA 8.0 (CUDA 12.0): read by every CUDA 12 and 13 ptxas and driver, and has all this renderer uses
PTX_VERSION = "8.0"

# the instruction type of each dtype in registers (8-bit ints compute in 16 bits)
REG_TYPES: dict[DType, str] = {
    dtypes.bool: "pred",
    dtypes.int8: "s16",
    dtypes.uint8: "u16",
    dtypes.int16: "s16",
    dtypes.uint16: "u16",
    dtypes.int32: "s32",
    dtypes.uint32: "u32",
    dtypes.int64: "s64",
    dtypes.uint64: "u64",
    dtypes.float16: "f16",
    dtypes.float32: "f32",
    dtypes.float64: "f64",
}
# the type of ld/st in memory: 8-bit loads extend by the dtype's sign; a bool is a byte
MEM_TYPES: dict[DType, str] = {
    dtypes.bool: "u8",
    dtypes.int8: "s8",
    dtypes.uint8: "u8",
    dtypes.int16: "b16",
    dtypes.uint16: "b16",
    dtypes.int32: "b32",
    dtypes.uint32: "b32",
    dtypes.int64: "b64",
    dtypes.uint64: "b64",
    dtypes.float16: "b16",
    dtypes.float32: "b32",
    dtypes.float64: "b64",
}
# the type cvt names for a dtype (8-bit ints as themselves: cvt truncates to and extends from the byte)
CVT_TYPES: dict[DType, str] = {**REG_TYPES, dtypes.int8: "s8", dtypes.uint8: "u8"}
# register prefix by register size in bits (0: predicate)
_PREFIX = {0: "p", 16: "h", 32: "r", 64: "rd"}
_DECL = {0: ".pred", 16: ".b16", 32: ".b32", 64: ".b64"}
_SPACE = {AddrSpace.GLOBAL: "global", AddrSpace.LOCAL: "shared", AddrSpace.REG: "local"}
_SPECIAL_REG = {"g": "%ctaid", "l": "%tid"}
_FLOAT_BINARY = {Ops.ADD: "add.rn", Ops.SUB: "sub.rn", Ops.MUL: "mul.rn"}
_INT_BINARY = {Ops.ADD: "add", Ops.SUB: "sub", Ops.MUL: "mul.lo", Ops.MAX: "max"}
_BITWISE = {Ops.AND: "and", Ops.OR: "or", Ops.XOR: "xor"}
# setp's comparison: NaN != x is true (`neu`, unordered or not equal), NaN < x and NaN == x are false
_FLOAT_CMP = {Ops.CMPLT: "lt", Ops.CMPNE: "neu", Ops.CMPEQ: "eq"}
_INT_CMP = {Ops.CMPLT: "lt", Ops.CMPNE: "ne", Ops.CMPEQ: "eq"}


def reg_bits(dt: DType) -> int:
    """The size of the register that holds a `dt` (0: a predicate).

    >>> reg_bits(dtypes.bool), reg_bits(dtypes.uint8), reg_bits(dtypes.float32), reg_bits(dtypes.int64.ptr())
    (0, 16, 32, 64)
    """
    if isinstance(dt, PtrDType):
        return 64
    if dt is dtypes.bool:
        return 0
    return max(16, 8 * dt.itemsize)


def ptx_const(value: object, dt: DType) -> str:
    """A PTX immediate of `dt`: floats as their bits (`0f3F800000`, `0d...`, half as a 16-bit hex), ints as
    decimal of their bits' signed value, a bool as 1 or 0.

    >>> ptx_const(1.0, dtypes.float32), ptx_const(1.0, dtypes.float16), ptx_const(-1, dtypes.uint8)
    ('0f3F800000', '0x3C00', '255')
    """
    if dt is dtypes.bool:
        return "1" if value else "0"
    if dtypes.is_float(dt):
        x = truncate(float(value), dt)  # type: ignore[arg-type]
        if dt is dtypes.float16:
            return "0x" + struct.pack(">e", x).hex().upper()
        if dt is dtypes.float32:
            return "0f" + struct.pack(">f", x).hex().upper()
        return "0d" + struct.pack(">d", x).hex().upper()
    assert isinstance(value, int)
    bits = 8 * dt.itemsize
    v = value & ((1 << bits) - 1)
    if dtypes.is_unsigned(dt):
        return str(v)
    return str(v - (1 << bits) if v >= 1 << (bits - 1) else v)


class PTXRenderer(Renderer):
    """Renders a linear program as a PTX module with one `.visible .entry` (see the module docstring)."""

    device = "PTX"
    # the same launches, plans and dtypes as the CUDA C renderer: both run on the same GPUs
    has_local = True
    max_local_size = 1024
    local_size = 256
    tensor_cores = (MMA_M16N8K16_F16, MMA_M16N8K16_BF16)
    fragment_load_lanes = 8  # a WMMA operand in one 16-byte load where it is contiguous and aligned
    packs_narrow_values = True
    local_memory_bytes = SHARED_LIMIT

    def __init__(self, arch: str = "sm_80") -> None:
        """`arch`: the GPU's architecture the PTX targets (`.target`)."""
        self.arch = arch

    def supported_dtypes(self) -> frozenset[DType]:
        """The CUDA C renderer's dtypes: every scalar C has, half and double included.

        >>> dtypes.float16 in PTXRenderer().supported_dtypes()
        True
        """
        return frozenset(CUDA_DTYPES)

    def max_lanes(self, op: Ops, dt: DType) -> int:
        """One lane for every op, as for the CUDA C renderer."""
        return 1

    def render(self, name: str, uops: Sequence[UOp]) -> str:
        return _Kernel(name, uops, self.arch).text()


class _Kernel:
    """The state of rendering one kernel: register names, labels, declarations."""

    def __init__(self, name: str, uops: Sequence[UOp], arch: str):
        self.name, self.uops, self.arch = name, list(uops), arch
        self.names: dict[UOp, str] = {}
        self.counts = dict.fromkeys(_PREFIX, 0)
        self.consts: list[str] = []  # constants, moved into registers before the body
        self.lines: list[str] = []
        self.decls: list[str] = []  # .shared and .local arrays
        self.params: list[tuple[int, str]] = []
        self.labels = 0
        self.loops: dict[UOp, str] = {}
        self.order = launch_order(uops)
        self.vectors: dict[UOp, list[str]] = {}  # a tensor core fragment: one register a lane
        self.block = math.prod(u.src[0].arg for u in uops if u.op is Ops.SPECIAL and u.arg.startswith("lidx"))

    def reg(self, bits: int) -> str:
        n = self.counts[bits]
        self.counts[bits] += 1
        return f"%{_PREFIX[bits]}{n}"

    def new(self, u: UOp) -> str:
        self.names[u] = self.reg(reg_bits(u.dtype))
        return self.names[u]

    def emit(self, line: str) -> None:
        self.lines.append("\t" + line)

    def label(self) -> str:
        self.labels += 1
        return f"$L{self.labels}"

    def text(self) -> str:
        for u in self.uops:
            self.render_uop(u)
        params = ",\n".join(f"\t{p}" for _, p in sorted(self.params, key=lambda p: p[0]))
        regs = [f"\t.reg {_DECL[bits]} %{_PREFIX[bits]}<{n}>;" for bits, n in self.counts.items() if n]
        # maxntid: the threads of a block, as CUDA C's __launch_bounds__ (registers are budgeted for that many). No
        # .minnctapersm as CUDA C's tensor-core kernels ask (renderer/cuda.py's min_blocks): this PTX takes 226
        # registers for the tile CUDA C's takes 129 in, and capped at 128 it spills
        head = [
            f".version {PTX_VERSION}",
            f".target {self.arch}",
            ".address_size 64",
            "",
            f".visible .entry {self.name}(",
            params,
            f") .maxntid {self.block}, 1, 1",
            "{",
        ]
        return "\n".join([*head, *regs, *self.decls, *self.consts, *self.lines, "\tret;", "}", ""])

    def render_uop(self, u: UOp) -> None:
        op, names = u.op, self.names
        if u.dtype.count > 1 or (op is Ops.STORE and u.src[1].dtype.count > 1):
            self.render_fragment(u)
            return
        if (
            isinstance(u.dtype, PtrDType)
            and u.dtype.base.count > 1
            and op not in (Ops.DEFINE_REG, Ops.INDEX, Ops.AFTER)
        ):
            raise NotImplementedError(f"the PTX renderer renders no vectors ({op.name} of {u.dtype!r})")
        if op is Ops.GEP and u.src[0] in self.vectors:
            names[u] = self.vectors[u.src[0]][u.arg[0]]
            return
        if op is Ops.DEFINE_GLOBAL:
            self.params.append((u.arg, f".param .u64 data{u.arg}"))
            ptr = self.new(u)
            self.consts += [f"\tld.param.u64 {ptr}, [data{u.arg}];", f"\tcvta.to.global.u64 {ptr}, {ptr};"]
        elif op is Ops.DEFINE_VAR:
            name = u.arg[0]
            self.params.append((1 << 30, f".param .{CVT_TYPES[u.dtype]} {name}"))  # variables after the buffers
            self.consts.append(f"\tld.param.{CVT_TYPES[u.dtype]} {self.new(u)}, [{name}];")
        elif op in (Ops.DEFINE_REG, Ops.DEFINE_LOCAL):
            assert isinstance(u.dtype, PtrDType)
            array = f"{'acc' if op is Ops.DEFINE_REG else 'temp'}{u.arg}"
            space = _SPACE[u.dtype.addrspace]
            nbytes = max(u.dtype.size * max(u.dtype.base.itemsize, 1), 1)
            self.decls.append(f"\t.{space} .align 16 .b8 {array}[{nbytes}];")
            self.consts.append(f"\tmov.u64 {self.new(u)}, {array};")
        elif op is Ops.CONST:
            # every constant in a register, set once at the top: ptxas folds them back into immediates
            bits = reg_bits(u.dtype)
            kind = "pred" if bits == 0 else f"b{bits}"
            self.consts.append(f"\tmov.{kind} {self.new(u)}, {ptx_const(u.arg, u.dtype)};")
        elif op is Ops.SPECIAL:
            self.render_special(u)
        elif op is Ops.AFTER:
            names[u] = names[u.src[0]]
        elif op in (Ops.SINK, Ops.GROUP):
            pass
        elif op is Ops.RANGE:
            head, counter = self.label(), self.new(u)
            self.loops[u] = head
            ty = REG_TYPES[u.dtype]
            done = self.reg(0)
            self.emit(f"mov.b{reg_bits(u.dtype)} {counter}, 0;")
            self.lines.append(f"{head}:")
            self.emit(f"setp.ge.{ty} {done}, {counter}, {names[u.src[0]]};")
            self.emit(f"@{done} bra {head}_exit;")
        elif op is Ops.END:
            pos = {r: i for i, r in enumerate(self.uops) if r.op is Ops.RANGE}
            for r in sorted(u.src[1:], key=pos.__getitem__, reverse=True):
                head = self.loops[r]
                self.emit(f"add.{REG_TYPES[r.dtype]} {names[r]}, {names[r]}, 1;")
                self.emit(f"bra {head};")
                self.lines.append(f"{head}_exit:")
        elif op is Ops.IF:
            end = self.label()
            names[u] = end
            self.emit(f"@!{names[u.src[0]]} bra {end};")
        elif op is Ops.ENDIF:
            self.lines.append(f"{names[u.src[0]]}:")
        elif op is Ops.BARRIER:
            self.emit("bar.sync 0;")
        elif op is Ops.INDEX:
            self.render_index(u)
        elif op is Ops.LOAD:
            self.render_load(u)
        elif op is Ops.STORE:
            self.render_store(u)
        elif op is Ops.CAST:
            self.render_cast(u)
        elif op is Ops.BITCAST and u.dtype in (dtypes.int8, dtypes.uint8):
            # the byte's bits, extended by the new sign in the 16-bit register
            self.emit(f"cvt.{CVT_TYPES[u.dtype]}.{CVT_TYPES[u.src[0].dtype]} {self.new(u)}, {names[u.src[0]]};")
        elif op is Ops.BITCAST:
            names[u] = names[u.src[0]]  # the registers have no type: the same bits are the new value
        elif op in GroupOp.ALU:
            self.render_alu(u)
        else:
            raise NotImplementedError(f"the PTX renderer cannot render {op.name}")

    def render_fragment(self, u: UOp) -> None:
        """A vector value of a tensor core's (see the module docstring): its lanes' registers."""
        value = u.src[1].dtype if u.op is Ops.STORE else u.dtype
        op, lanes, bits = u.op, value.count, reg_bits(value.scalar())
        if op is Ops.VECTORIZE:
            self.vectors[u] = [self.names[s] for s in u.src]
        elif op is Ops.CONST:
            reg = self.reg(bits)
            self.consts.append(f"\tmov.b{bits} {reg}, {ptx_const(u.arg, u.dtype.scalar())};")
            self.vectors[u] = [reg] * lanes
        elif op in (Ops.LOAD, Ops.STORE) and self._space(u.src[0]) == "local" and lanes == 4 and bits == 32:
            addr = self.names[u.src[0]]
            if op is Ops.LOAD:
                self.vectors[u] = [self.reg(bits) for _ in range(lanes)]
                self.emit(f"ld.local.v4.b32 {{{', '.join(self.vectors[u])}}}, [{addr}];")
            else:
                self.emit(f"st.local.v4.b32 [{addr}], {{{', '.join(self.vectors[u.src[1]])}}};")
        elif op is Ops.LOAD and bits == 16 and lanes in (2, 4, 8):
            # a fragment in one aligned load (devectorizer.fragment): pairs of halves in 32-bit registers, unpacked
            # (ptxas keeps them packed for the mma that reads them)
            words = [self.reg(32) for _ in range(lanes // 2)]
            vec = f".v{lanes // 2}" if lanes > 2 else ""
            dest = f"{{{', '.join(words)}}}" if lanes > 2 else words[0]
            self.emit(f"ld.{self._space(u.src[0])}{vec}.b32 {dest}, [{self.names[u.src[0]]}];")
            self.vectors[u] = [self.reg(16) for _ in range(lanes)]
            for pair, lo, hi in zip(words, self.vectors[u][0::2], self.vectors[u][1::2]):
                self.emit(f"mov.b32 {{{lo}, {hi}}}, {pair};")
        elif op is Ops.WMMA and u.arg in (MMA_M16N8K16_F16, MMA_M16N8K16_BF16):
            a, b, c = (self.vectors[s] for s in u.src)
            packed = []
            for regs in (a, b):
                pairs = []
                for lo, hi in zip(regs[0::2], regs[1::2]):
                    pairs.append(self.reg(32))
                    self.emit(f"mov.b32 {pairs[-1]}, {{{lo}, {hi}}};")
                packed.append(", ".join(pairs))
            self.vectors[u] = [self.reg(32) for _ in range(4)]
            d, kind = ", ".join(self.vectors[u]), MMA_TYPES[u.arg.dtype_in]
            self.emit(
                f"mma.sync.aligned.m16n8k16.row.col.f32.{kind}.{kind}.f32 {{{d}}}, {{{packed[0]}}}, {{{packed[1]}}}, "
                f"{{{', '.join(c)}}};"
            )
        else:
            raise NotImplementedError(
                f"the PTX renderer renders no vectors but a tensor core's ({op.name} of {u.dtype!r})"
            )

    def render_special(self, u: UOp) -> None:
        kind = _SPECIAL_REG.get(u.arg[0])
        if kind is None or u.arg[:4] not in ("gidx", "lidx") or u.arg[4:] not in ("0", "1", "2"):
            raise NotImplementedError(f"the PTX renderer has no launch index {u.arg!r} (gidxN and lidxN)")
        axis = "xyz"[self.order[int(u.arg[4:])]]
        if reg_bits(u.dtype) == 32:
            self.emit(f"mov.u32 {self.new(u)}, {kind}.{axis};")
        else:
            tmp = self.reg(32)
            self.emit(f"mov.u32 {tmp}, {kind}.{axis};")
            self.emit(f"cvt.u64.u32 {self.new(u)}, {tmp};")

    def render_index(self, u: UOp) -> None:
        ptr_dt = u.src[0].dtype
        assert isinstance(ptr_dt, PtrDType)
        size = max(ptr_dt.base.itemsize, 1)
        base, idx = self.names[u.src[0]], self.names[u.src[1]]
        offset, addr = self.reg(64), self.new(u)
        if reg_bits(u.src[1].dtype) == 32:
            self.emit(f"mul.wide.{REG_TYPES[u.src[1].dtype]} {offset}, {idx}, {size};")
        else:
            self.emit(f"mul.lo.s64 {offset}, {idx}, {size};")
        self.emit(f"add.s64 {addr}, {base}, {offset};")

    def _space(self, index: UOp) -> str:
        ptr_dt = index.src[0].dtype
        assert isinstance(ptr_dt, PtrDType)
        return _SPACE[ptr_dt.addrspace]

    def render_load(self, u: UOp) -> None:
        index = u.src[0]
        space, mem = self._space(index), MEM_TYPES[u.dtype]
        addr = self.names[index]
        gate = f"@{self.names[index.src[2]]} " if len(index.src) == 3 else ""
        if u.dtype is dtypes.bool:
            byte = self.reg(16)
            if gate:  # the fallback's byte, replaced by the load when the gate is on
                self.emit(f"selp.u16 {byte}, 1, 0, {self.names[u.src[1]]};")
            self.emit(f"{gate}ld.{space}.{mem} {byte}, [{addr}];")
            self.emit(f"setp.ne.u16 {self.new(u)}, {byte}, 0;")
            return
        dst = self.new(u)
        if gate:
            self.emit(f"mov.b{reg_bits(u.dtype)} {dst}, {self.names[u.src[1]]};")
        self.emit(f"{gate}ld.{space}.{mem} {dst}, [{addr}];")

    def render_store(self, u: UOp) -> None:
        index, value = u.src[0], u.src[1]
        assert index.op is Ops.INDEX, "the linear program stores through INDEX only"
        space, mem = self._space(index), MEM_TYPES[value.dtype]
        v = self.names[value]
        if value.dtype is dtypes.bool:
            v = self.reg(16)
            self.emit(f"selp.u16 {v}, 1, 0, {self.names[value]};")
        gate = f"@{self.names[index.src[2]]} " if len(index.src) == 3 else ""
        self.emit(f"{gate}st.{space}.{mem} [{self.names[index]}], {v};")

    def normalize(self, u: UOp) -> None:
        """Bring an 8-bit int back into its byte (sign- or zero-extended in its 16-bit register)."""
        if u.dtype in (dtypes.int8, dtypes.uint8):
            x = self.names[u]
            self.emit(f"cvt.{CVT_TYPES[u.dtype]}.{REG_TYPES[u.dtype]} {x}, {x};")

    def render_cast(self, u: UOp) -> None:
        s, d = u.src[0].dtype, u.dtype
        x = self.names[u.src[0]]
        if s is d:
            self.names[u] = x
        elif d is dtypes.bool:
            # nonzero is true; NaN too (`neu`), as in C
            zero = ptx_const(0.0 if dtypes.is_float(s) else 0, s)
            if s is dtypes.float16:
                zero_reg = self.reg(16)
                self.emit(f"mov.b16 {zero_reg}, {zero};")
                zero = zero_reg
            self.emit(f"setp.{'neu' if dtypes.is_float(s) else 'ne'}.{REG_TYPES[s]} {self.new(u)}, {x}, {zero};")
        elif s is dtypes.bool:
            one, zero = ptx_const(1.0 if dtypes.is_float(d) else 1, d), ptx_const(0.0 if dtypes.is_float(d) else 0, d)
            self.emit(f"selp.b{reg_bits(d)} {self.new(u)}, {one}, {zero}, {x};")
        elif dtypes.is_float(s) and dtypes.is_float(d):
            rnd = ".rn" if d.itemsize < s.itemsize else ""  # widening is exact
            self.emit(f"cvt{rnd}.{REG_TYPES[d]}.{REG_TYPES[s]} {self.new(u)}, {x};")
        elif dtypes.is_float(s):
            if d.itemsize >= 4:
                self.emit(f"cvt.rzi.{REG_TYPES[d]}.{REG_TYPES[s]} {self.new(u)}, {x};")
            else:
                # through int32, then truncated to the narrow int, as on the CPU (-1.0 to uint8 is 255); cvt to a
                # narrow int directly would saturate
                wide = self.reg(32)
                self.emit(f"cvt.rzi.s32.{REG_TYPES[s]} {wide}, {x};")
                self.emit(f"cvt.{CVT_TYPES[d]}.s32 {self.new(u)}, {wide};")
        elif dtypes.is_float(d):
            self.emit(f"cvt.rn.{REG_TYPES[d]}.{REG_TYPES[s]} {self.new(u)}, {x};")
        elif reg_bits(s) == reg_bits(d) and d not in (dtypes.int8, dtypes.uint8):
            self.names[u] = x  # the same bits, read with the other sign
        else:
            # C's conversion: truncated to the destination, extended by the source's sign when widening
            self.emit(f"cvt.{CVT_TYPES[d]}.{CVT_TYPES[s]} {self.new(u)}, {x};")

    def render_alu(self, u: UOp) -> None:
        op, dt = u.op, u.dtype
        operand = u.src[1].dtype if op is Ops.WHERE else u.src[0].dtype
        a = [self.names[s] for s in u.src]
        is_float, is_bool = dtypes.is_float(operand), operand is dtypes.bool
        ty = REG_TYPES[operand]
        if op in GroupOp.Comparison:
            self.render_compare(u, a)
        elif op is Ops.WHERE:
            if dt is dtypes.bool:
                # (c and x) or (not c and y): selp has no predicate form
                t, f = self.reg(0), self.reg(0)
                self.emit(f"and.pred {t}, {a[0]}, {a[1]};")
                self.emit(f"not.pred {f}, {a[0]};")
                self.emit(f"and.pred {f}, {f}, {a[2]};")
                self.emit(f"or.pred {self.new(u)}, {t}, {f};")
            else:
                self.emit(f"selp.b{reg_bits(dt)} {self.new(u)}, {a[1]}, {a[2]}, {a[0]};")
        elif is_bool:
            self.render_bool(u, a)
        elif is_float and op in _FLOAT_BINARY:
            self.emit(f"{_FLOAT_BINARY[op]}.{ty} {self.new(u)}, {a[0]}, {a[1]};")
        elif op in _INT_BINARY and not is_float:
            self.emit(f"{_INT_BINARY[op]}.{ty} {self.new(u)}, {a[0]}, {a[1]};")
            self.normalize(u)
        elif op in _BITWISE:
            self.emit(f"{_BITWISE[op]}.b{reg_bits(dt)} {self.new(u)}, {a[0]}, {a[1]};")
        elif op in (Ops.SHL, Ops.SHR):
            amount = a[1]
            if reg_bits(u.src[1].dtype) != 32:  # the shift amount is a 32-bit register
                amount = self.reg(32)
                self.emit(f"cvt.u32.{REG_TYPES[u.src[1].dtype]} {amount}, {a[1]};")
            kind = f"shl.b{reg_bits(dt)}" if op is Ops.SHL else f"shr.{ty}"
            self.emit(f"{kind} {self.new(u)}, {a[0]}, {amount};")
            self.normalize(u)
        elif op is Ops.NEG:
            self.emit(
                f"neg.{ty if is_float or not dtypes.is_unsigned(dt) else ty.replace('u', 's')} {self.new(u)}, {a[0]};"
            )
            self.normalize(u)
        elif op is Ops.MAX:
            # NaN wins, as in numpy: a when a is NaN or a > b, else b (NaN when b is)
            nan, gt = self.reg(0), self.reg(0)
            self.emit(f"setp.nan.{ty} {nan}, {a[0]}, {a[0]};")
            self.emit(f"setp.gt.{ty} {gt}, {a[0]}, {a[1]};")
            self.emit(f"or.pred {nan}, {nan}, {gt};")
            self.emit(f"selp.b{reg_bits(dt)} {self.new(u)}, {a[0]}, {a[1]}, {nan};")
        elif op in (Ops.IDIV, Ops.MOD):
            self.render_divmod(u, a)
        elif op in (Ops.FDIV, Ops.RECIPROCAL, Ops.SQRT) and dt is dtypes.float16:
            # half has no division or root: in float, where rounding once more to half is still exact
            wide = [self.reg(32) for _ in a]
            for w, x in zip(wide, a, strict=True):
                self.emit(f"cvt.f32.f16 {w}, {x};")
            out = self.reg(32)
            self.emit(self._float_op(op, "f32", out, wide))
            self.emit(f"cvt.rn.f16.f32 {self.new(u)}, {out};")
        elif op in (Ops.FDIV, Ops.RECIPROCAL, Ops.SQRT):
            self.emit(self._float_op(op, ty, self.new(u), a))
        elif op is Ops.MULACC:
            kind = "fma.rn" if is_float else "mad.lo"
            self.emit(f"{kind}.{ty} {self.new(u)}, {a[0]}, {a[1]}, {a[2]};")
            self.normalize(u)
        elif op is Ops.TRUNC:
            if is_float:
                self.emit(f"cvt.rzi.{ty}.{ty} {self.new(u)}, {a[0]};")
            else:
                self.names[u] = a[0]  # an integer is its own truncation
        else:
            raise NotImplementedError(f"the PTX renderer cannot render {op.name} on {dt!r}")

    @staticmethod
    def _float_op(op: Ops, ty: str, dst: str, a: list[str]) -> str:
        if op is Ops.FDIV:
            return f"div.rn.{ty} {dst}, {a[0]}, {a[1]};"
        if op is Ops.RECIPROCAL:
            return f"rcp.rn.{ty} {dst}, {a[0]};"
        return f"sqrt.rn.{ty} {dst}, {a[0]};"

    def render_compare(self, u: UOp, a: list[str]) -> None:
        op, operand = u.op, u.src[0].dtype
        if operand is dtypes.bool:
            dst = self.new(u)
            if op is Ops.CMPNE:
                self.emit(f"xor.pred {dst}, {a[0]}, {a[1]};")
            elif op is Ops.CMPEQ:
                self.emit(f"xor.pred {dst}, {a[0]}, {a[1]};")
                self.emit(f"not.pred {dst}, {dst};")
            else:  # false < true only
                self.emit(f"not.pred {dst}, {a[0]};")
                self.emit(f"and.pred {dst}, {dst}, {a[1]};")
            return
        cmp = (_FLOAT_CMP if dtypes.is_float(operand) else _INT_CMP)[op]
        self.emit(f"setp.{cmp}.{REG_TYPES[operand]} {self.new(u)}, {a[0]}, {a[1]};")

    def render_bool(self, u: UOp, a: list[str]) -> None:
        op, dst = u.op, None
        # on bools + is "or" and * is "and" (numpy's); max is "or"
        kind = {Ops.ADD: "or", Ops.MAX: "or", Ops.OR: "or", Ops.MUL: "and", Ops.AND: "and", Ops.XOR: "xor"}.get(op)
        if kind is not None:
            dst = self.new(u)
            self.emit(f"{kind}.pred {dst}, {a[0]}, {a[1]};")
        elif op is Ops.NEG:
            self.emit(f"not.pred {self.new(u)}, {a[0]};")
        else:
            raise NotImplementedError(f"the PTX renderer cannot render {op.name} on bool")

    def render_divmod(self, u: UOp, a: list[str]) -> None:
        op, dt = u.op, u.dtype
        ty, bits = REG_TYPES[dt], reg_bits(dt)
        name = "div" if op is Ops.IDIV else "rem"
        if dtypes.is_unsigned(dt) or all(s.vmin >= 0 for s in u.src):
            self.emit(f"{name}.{ty} {self.new(u)}, {a[0]}, {a[1]};")
            self.normalize(u)
            return
        # floor: the truncated quotient less one (the remainder plus the divisor) when the remainder is nonzero
        # and its sign differs from the divisor's
        q, r = self.reg(bits), self.reg(bits)
        self.emit(f"div.{ty} {q}, {a[0]}, {a[1]};")
        self.emit(f"rem.{ty} {r}, {a[0]}, {a[1]};")
        nonzero, r_neg, b_neg = self.reg(0), self.reg(0), self.reg(0)
        self.emit(f"setp.ne.{ty} {nonzero}, {r}, 0;")
        self.emit(f"setp.lt.{ty} {r_neg}, {r}, 0;")
        self.emit(f"setp.lt.{ty} {b_neg}, {a[1]}, 0;")
        self.emit(f"xor.pred {r_neg}, {r_neg}, {b_neg};")
        self.emit(f"and.pred {nonzero}, {nonzero}, {r_neg};")
        dst = self.new(u)
        if op is Ops.IDIV:
            one = self.reg(bits)
            self.emit(f"selp.{ty} {one}, 1, 0, {nonzero};")
            self.emit(f"sub.{ty} {dst}, {q}, {one};")
        else:
            add = self.reg(bits)
            self.emit(f"selp.{ty} {add}, {a[1]}, 0, {nonzero};")
            self.emit(f"add.{ty} {dst}, {r}, {add};")
        self.normalize(u)
