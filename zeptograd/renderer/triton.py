"""The Triton renderer: a linear program as a Triton kernel (a `@triton.jit` Python function), compiled by Triton.

Triton programs are written for a block of values, not a thread: one program instance (`tl.program_id`) computes
tensors of values. So a work-group of the linear program is one program instance, and its work-items are the
lanes of a block: `lidx0..2` come from one `tl.arange` over the group (padded to a power of two, as `tl.arange`
needs, with the padding lanes masked off), and every value that depends on them is a block tensor; the rest are
scalars. Then:

- SPECIAL `gidxN` is `tl.program_id(N)`; RANGE is a Python `for` loop (Triton compiles it to a loop), END ends its
  indentation;
- INDEX is pointer arithmetic (`data1 + idx`), LOAD `tl.load(...)` with the gate as `mask` and the fallback as
  `other`, STORE `tl.store(...)` with the mask of the enclosing IFs and the padding;
- IF/ENDIF become masks, not branches (a block's condition differs lane to lane): a store inside gets the IF's
  condition in its mask, and a register written inside keeps its old value where the condition is false;
- DEFINE_REG accumulators are loop-carried variables (`acc0`), started as a block where a block is stored into them;
- constants are typed explicitly (`tl.full`), floats not finite or float64 through their bits;
- division is `tl.div_rn` (Triton's `/` on float32 is approximate), the square root `tl.sqrt_rn`, the fused
  multiply-add `tl.fma`, MAX a `tl.where` that keeps the IR's NaN and signed-zero rules, negation a product by -1
  (Triton's `-x` is `0 - x`, which loses -0.0); integer `//` and `%` truncate in Triton, so the IR's floor
  division is corrected where an operand can be negative; EXP2, LOG2 and SIN are the IR's polynomials.

There is no local memory (no GROUP: `has_shared` is False) and no tensor cores here (`tl.dot` would be Triton's
way to them). The renderer writes source text only; runtime/ops_triton.py compiles it.

>>> from zeptograd import Tensor
>>> from zeptograd.codegen import get_program
>>> from zeptograd.schedule.kernelize import create_schedule
>>> a = Tensor.ones(4).contiguous().realize()
>>> (item,), _ = create_schedule([(a * 2).uop], ["CPU"])
>>> "@triton.jit" in get_program(item.ast, TritonRenderer()).src
True
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence

from zeptograd.dtype import DType, PtrDType, dtypes
from zeptograd.renderer import Renderer
from zeptograd.renderer.cstyle import _INFIX as C_INFIX
from zeptograd.uop.ops import GroupOp, Ops, UOp

TL_TYPES: dict[DType, str] = {
    dtypes.bool: "tl.int1",
    dtypes.int8: "tl.int8",
    dtypes.uint8: "tl.uint8",
    dtypes.int16: "tl.int16",
    dtypes.uint16: "tl.uint16",
    dtypes.int32: "tl.int32",
    dtypes.uint32: "tl.uint32",
    dtypes.int64: "tl.int64",
    dtypes.uint64: "tl.uint64",
    dtypes.float16: "tl.float16",
    dtypes.float32: "tl.float32",
    dtypes.float64: "tl.float64",
}
# the type strings of a kernel's signature for triton.compile (pointers are "*" + the element's)
SIGNATURE_TYPES: dict[DType, str] = {
    dtypes.bool: "i1",
    dtypes.int8: "i8",
    dtypes.uint8: "u8",
    dtypes.int16: "i16",
    dtypes.uint16: "u16",
    dtypes.int32: "i32",
    dtypes.uint32: "u32",
    dtypes.int64: "i64",
    dtypes.uint64: "u64",
    dtypes.float16: "fp16",
    dtypes.float32: "fp32",
    dtypes.float64: "fp64",
}
# the C family's infix operators, less `/` (float division is rounded by tl.div_rn below)
_INFIX = {op: sign for op, sign in C_INFIX.items() if op is not Ops.FDIV}
# a float's bits as the signed int of its width: (float format, int format, int dtype) by item size
_BITS = {2: ("e", "h", dtypes.int16), 4: ("f", "i", dtypes.int32), 8: ("d", "q", dtypes.int64)}


def signature(uops: Sequence[UOp]) -> dict[str, str]:
    """The kernel's parameters and their Triton types, in order: the buffers, then the variables."""
    params = sorted((u for u in uops if u.op is Ops.DEFINE_GLOBAL), key=lambda u: u.arg)
    out = {}
    for u in params:
        assert isinstance(u.dtype, PtrDType)
        out[f"data{u.arg}"] = "*" + SIGNATURE_TYPES[u.dtype.base]
    for u in uops:
        if u.op is Ops.DEFINE_VAR:
            out[u.arg[0]] = SIGNATURE_TYPES[u.dtype]
    return out


def block_size(uops: Sequence[UOp]) -> tuple[int, int]:
    """(work-items a group, the power of two its block is padded to)."""
    items = math.prod(u.src[0].arg for u in uops if u.op is Ops.SPECIAL and u.arg.startswith("lidx"))
    return items, 1 << max(items - 1, 0).bit_length()


class TritonRenderer(Renderer):
    """Renders a linear program as a Triton kernel (see the module docstring)."""

    device = "TRITON"
    has_local = True  # launched as a grid of program instances, each a block of work-items
    has_shared = False  # no local memory: GROUP is refused
    max_local_size = 1024
    local_size = 256
    tensor_cores = ()

    def supported_dtypes(self) -> frozenset[DType]:
        """The scalar dtypes Triton computes and stores: every one the CUDA renderer has.

        >>> dtypes.float64 in TritonRenderer().supported_dtypes()
        True
        """
        return frozenset(TL_TYPES)

    def max_lanes(self, op: Ops, dt: DType) -> int:
        """One lane: a work-item is one lane of the program's block already."""
        return 1

    def render(self, name: str, uops: Sequence[UOp]) -> str:
        return _Kernel(name, uops).text()


class _Kernel:
    """The state of rendering one Triton kernel."""

    def __init__(self, name: str, uops: Sequence[UOp]):
        self.name, self.uops = name, list(uops)
        self.names: dict[UOp, str] = {}
        self.lines: list[str] = []
        self.depth = 1
        self.count = 0
        self.masks: list[str] = []  # the conditions of the IFs around the current line
        self.started: set[str] = set()  # registers given a first value
        self.items, self.block = block_size(uops)
        self.blocky = self._blocky()

    def _blocky(self) -> set[UOp]:
        """The values that are blocks: those that depend on a work-item index, and the registers a block is stored
        into (their loads then too), up to a fixed point."""
        blocky: set[UOp] = set()
        stores = [u for u in self.uops if u.op is Ops.STORE and self._reg(u.src[0]) is not None]
        changed = True
        while changed:
            changed = False
            for u in self.uops:
                if u.op is Ops.SPECIAL:
                    is_block = u.arg.startswith("lidx")
                elif u.op is Ops.DEFINE_REG:
                    is_block = any(st.src[1] in blocky and self._reg(st.src[0]) is u for st in stores)
                else:
                    is_block = any(s in blocky for s in u.src)
                if is_block and u not in blocky:
                    blocky.add(u)
                    changed = True
        return blocky

    @staticmethod
    def _reg(index: UOp) -> UOp | None:
        """The DEFINE_REG an INDEX reads or writes (through AFTERs), or None for memory."""
        base = index.src[0]
        while base.op is Ops.AFTER:
            base = base.src[0]
        return base if base.op is Ops.DEFINE_REG else None

    def emit(self, line: str) -> None:
        self.lines.append("    " * self.depth + line)

    def bind(self, u: UOp, expr: str, prefix: str = "x") -> None:
        self.names[u] = f"{prefix}{self.count}"
        self.count += 1
        self.emit(f"{self.names[u]} = {expr}")

    def const(self, value: object, dt: DType) -> str:
        t = TL_TYPES[dt]
        if dt is dtypes.bool:
            return "tl.full([], 1, tl.int1)" if value else "tl.full([], 0, tl.int1)"
        if dtypes.is_float(dt):
            assert isinstance(value, float | int)
            if dt is dtypes.float64 or not math.isfinite(value) or (math.copysign(1.0, value) < 0 and value == 0):
                # through the bits: Triton reads a Python float literal as a float32 constant, and -0.0 as 0 - 0.0
                float_fmt, int_fmt, int_dt = _BITS[dt.itemsize]
                bits = struct.unpack(int_fmt, struct.pack(float_fmt, value))[0]
                return f"tl.full([], {bits}, {TL_TYPES[int_dt]}).to({t}, bitcast=True)"
            # a Python float literal is a float32 constant in Triton (exact: the IR's float32 values are)
            return repr(float(value)) if dt is dtypes.float32 else f"tl.full([], {float(value)!r}, {t})"
        assert isinstance(value, int)
        if dtypes.is_unsigned(dt) and value >= 1 << (8 * dt.itemsize - 1):
            # past the signed range: Triton takes such a literal as no type of this width; through the signed bits
            signed = {1: dtypes.int8, 2: dtypes.int16, 4: dtypes.int32, 8: dtypes.int64}[dt.itemsize]
            bits = value - (1 << (8 * dt.itemsize))
            return f"tl.full([], {bits}, {TL_TYPES[signed]}).to({t}, bitcast=True)"
        return str(value) if dt in (dtypes.int32, dtypes.index) else f"tl.full([], {value}, {t})"

    def mask(self, gate: str | None = None) -> str | None:
        parts = [*self.masks, *([gate] if gate else []), *(["active"] if self.block != self.items else [])]
        return " & ".join(f"({p})" for p in parts) if parts else None

    def text(self) -> str:
        for u in self.uops:
            self.render_uop(u)
        params = ", ".join(signature(self.uops))
        head = ["import triton", "import triton.language as tl", ""]
        head += ["", "@triton.jit", f"def {self.name}({params}):"]
        body = []
        if self.items > 1 or any(u.op is Ops.SPECIAL and u.arg.startswith("lidx") for u in self.uops):
            body.append(f"    lanes = tl.arange(0, {self.block})")
            if self.block != self.items:
                body.append(f"    active = lanes < {self.items}")
        return "\n".join([*head, *body, *self.lines, "    return", ""])

    def render_uop(self, u: UOp) -> None:
        op, names = u.op, self.names
        src = [names.get(s, "") for s in u.src]
        if op is Ops.DEFINE_GLOBAL:
            names[u] = f"data{u.arg}"
        elif op is Ops.DEFINE_VAR:
            names[u] = u.arg[0]
        elif op is Ops.DEFINE_REG:
            assert isinstance(u.dtype, PtrDType)
            if u.dtype.size != 1:
                raise NotImplementedError("the Triton renderer keeps registers of one element (the GPU plans' own)")
            names[u] = f"acc{u.arg}"
        elif op is Ops.CONST:
            names[u] = self.const(u.arg, u.dtype)
        elif op is Ops.SPECIAL:
            self.render_special(u)
        elif op is Ops.AFTER:
            names[u] = src[0]
        elif op in (Ops.SINK, Ops.GROUP):
            pass
        elif op is Ops.RANGE:
            names[u] = f"ridx{u.arg}"
            bound = str(u.src[0].arg) if u.src[0].op is Ops.CONST else src[0]
            self.emit(f"for {names[u]} in range(0, {bound}):")
            self.depth += 1
        elif op is Ops.END:
            self.depth -= len(u.src) - 1
        elif op is Ops.IF:
            names[u] = src[0]
            self.masks.append(src[0])
        elif op is Ops.ENDIF:
            self.masks.pop()
        elif op is Ops.INDEX:
            if self._reg(u) is not None:
                if u.src[1].op is not Ops.CONST or u.src[1].arg != 0:
                    raise NotImplementedError("a register read at a computed index")
                names[u] = src[0]
            else:
                names[u] = f"{src[0]} + {src[1]}"
                if len(u.src) == 3:
                    names[u] += f"@{src[2]}"  # the gate rides along for the LOAD (split off there)
        elif op is Ops.LOAD:
            self.render_load(u, src)
        elif op is Ops.STORE:
            self.render_store(u, src)
        elif op is Ops.CAST:
            self.render_cast(u, src[0])
        elif op is Ops.BITCAST:
            self.bind(u, f"tl.cast({src[0]}, {TL_TYPES[u.dtype]}, bitcast=True)")
        elif op in GroupOp.ALU:
            self.bind(u, self.alu(u, src))
        else:
            raise NotImplementedError(f"the Triton renderer cannot render {op.name}")

    def render_special(self, u: UOp) -> None:
        kind, dim = u.arg[:4], u.arg[4:]
        if kind not in ("gidx", "lidx") or dim not in ("0", "1", "2"):
            raise NotImplementedError(f"the Triton renderer has no launch index {u.arg!r} (gidxN and lidxN)")
        if kind == "gidx":
            self.bind(u, f"tl.program_id({dim})", "gidx")
            return
        # lidx0 varies fastest in the group's flat order, as a GPU numbers its threads
        inner = math.prod(
            s.src[0].arg for s in self.uops if s.op is Ops.SPECIAL and s.arg[:4] == "lidx" and s.arg[4:] < dim
        )
        self.bind(u, f"(lanes // {inner}) % {u.src[0].arg}", "lidx")

    def render_load(self, u: UOp, src: list[str]) -> None:
        index = u.src[0]
        if self._reg(index) is not None:
            self.names[u] = src[0]
            return
        address = self.names[index].split("@")[0]
        gate = self.names[index.src[2]] if len(index.src) == 3 else None
        if gate is not None and index.src[2] in self.blocky and index.src[1] not in self.blocky:
            # one address for every work-item, a gate of their own: Triton loads a block only through a block of
            # pointers (a scalar pointer with a block mask is an error)
            address = f"{address} + tl.full([{self.block}], 0, tl.int32)"
        mask = self.mask(gate)
        if mask is None:
            self.bind(u, f"tl.load({address})")
        else:
            other = src[1] if len(u.src) > 1 else self.const(0, u.dtype)
            self.bind(u, f"tl.load({address}, mask={mask}, other={other})")

    def render_store(self, u: UOp, src: list[str]) -> None:
        index, value = u.src[:2]  # a third source is the IF a gated store sits in (its mask is in self.masks)
        if (reg := self._reg(index)) is not None:
            name = self.names[reg]
            val, t = src[1], TL_TYPES[value.dtype]
            shape = f"[{self.block}]" if reg in self.blocky else "[]"
            if value.op is Ops.CONST and dtypes.is_float(value.dtype) and math.isfinite(value.arg):
                val = f"tl.full({shape}, {value.arg!r}, {t})"  # a typed tensor: the loop carries one type
            elif value.op is Ops.CONST and not dtypes.is_float(value.dtype):
                val = f"tl.full({shape}, {int(value.arg)}, {t})"
            elif reg in self.blocky and value not in self.blocky:
                val = f"{val} + tl.full([{self.block}], 0, {t})"  # a block from the start
            if self.masks and name in self.started:
                val = f"tl.where({' & '.join(f'({m})' for m in self.masks)}, {val}, {name})"
            self.started.add(name)
            self.emit(f"{name} = {val}")
            return
        address = self.names[index].split("@")[0]
        mask = self.mask()
        self.emit(f"tl.store({address}, {src[1]}" + (f", mask={mask})" if mask else ")"))

    def render_cast(self, u: UOp, x: str) -> None:
        if u.dtype is dtypes.bool:
            self.bind(u, f"({x} != 0)")
        else:
            self.bind(u, f"tl.cast({x}, {TL_TYPES[u.dtype]})")

    def alu(self, u: UOp, s: list[str]) -> str:
        op, dt = u.op, u.dtype
        if op in _INFIX:
            return f"({s[0]} {_INFIX[op]} {s[1]})"
        if op is Ops.NEG and dtypes.is_float(dt):
            return f"({s[0]} * {self.const(-1.0, dt)})"  # Triton's unary minus is 0 - x: -0.0 would come out +0.0
        if op is Ops.NEG:
            return f"({s[0]} == 0)" if dt is dtypes.bool else f"(-{s[0]})"
        if op is Ops.MULACC and dt is dtypes.float16:
            return f"(({s[0]} * {s[1]}) + {s[2]})"  # half rounds the product, as the C-style renderers' half does
        if op in (Ops.FDIV, Ops.RECIPROCAL, Ops.SQRT, Ops.TRUNC) and dt is dtypes.float16:
            # Triton's rounded division, square root, floor and ceil take float32 and float64: half computes in
            # float32 and rounds once more (exact: float32 has more than twice half's digits)
            wide = UOp(op, dtypes.float32, tuple(x.cast(dtypes.float32) for x in u.src))
            return f"tl.cast({self.alu(wide, [f'tl.cast({x}, tl.float32)' for x in s])}, tl.float16)"
        if op is Ops.FDIV:  # correctly rounded: div_rn for float32 (its `/` is approximate), `/` for float64
            return f"({s[0]} / {s[1]})" if dt is dtypes.float64 else f"tl.div_rn({s[0]}, {s[1]})"
        if op is Ops.RECIPROCAL:
            one = self.const(1.0, dt)
            return f"({one} / {s[0]})" if dt is dtypes.float64 else f"tl.div_rn({one}, {s[0]})"
        if op is Ops.SQRT:
            return f"tl.sqrt({s[0]})" if dt is dtypes.float64 else f"tl.sqrt_rn({s[0]})"
        if op is Ops.TRUNC:
            return f"tl.where({s[0]} < 0, tl.ceil({s[0]}), tl.floor({s[0]}))"  # toward zero, exact
        if op is Ops.MULACC:
            return f"tl.fma({s[0]}, {s[1]}, {s[2]})"
        if op is Ops.WHERE:
            return f"tl.where({s[0]}, {s[1]}, {s[2]})"
        if op is Ops.MAX:
            if dtypes.is_float(dt):
                # a where NaN or greater, else b: the IR's MAX exactly (the sign of max(-0.0, 0.0) included)
                return f"tl.where(({s[0]} != {s[0]}) | ({s[0]} > {s[1]}), {s[0]}, {s[1]})"
            return f"tl.maximum({s[0]}, {s[1]})"
        if op in (Ops.IDIV, Ops.MOD):
            a, b = s
            if all(x.vmin >= 0 for x in u.src) or dtypes.is_unsigned(dt):
                return f"({a} {'//' if op is Ops.IDIV else '%'} {b})"
            # Triton's // and % truncate toward zero; the IR's round toward minus infinity
            off = f"((({a} % {b}) != 0) & (({a} < 0) != ({b} < 0)))"
            if op is Ops.IDIV:
                return f"({a} // {b} - {off}.to({TL_TYPES[dt]}))"
            return f"({a} % {b} + tl.where({off}, {b}, 0).to({TL_TYPES[dt]}))"
        raise NotImplementedError(f"the Triton renderer cannot render {op.name}")
