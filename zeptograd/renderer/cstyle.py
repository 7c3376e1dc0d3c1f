"""The C renderer: a linear program becomes one C function.

Each op lowers as seed 003 says: DEFINE_GLOBAL a `restrict` pointer parameter (const when the kernel only
reads it), DEFINE_REG a local array, RANGE/END a `for` loop, IF/ENDIF an `if` block, INDEX pointer
arithmetic, LOAD a read (a gated one `gate ? *p : fallback`), STORE an assignment, AFTER nothing (an alias
of its source), CONST a literal, CAST a C cast, ALU an operator or a builtin. Values get one named `const`
local each, so the source reads like the program.

Index arithmetic in the IR is floor division and modulo; C divides by truncating. The two agree when both
operands are known non-negative (the value ranges say so, and for loop indices they do); otherwise the
renderer calls a floor helper.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from zeptograd.dtype import DType, PtrDType, dtypes
from zeptograd.uop.ops import GroupOp, Ops, UOp

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

PRELUDE = """#include <math.h>
#include <stdbool.h>
#include <stdint.h>
"""

# floor division and modulo for operands of either sign (C's / and % truncate toward zero)
FLOOR_HELPERS = """static inline int64_t floordiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  return q - ((a % b != 0) & ((a < 0) != (b < 0)));
}
static inline int64_t floormod(int64_t a, int64_t b) {
  int64_t r = a % b;
  return r + (((r != 0) & ((r < 0) != (b < 0))) ? b : 0);
}
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
# the C math function of each float op, by the dtype it computes in
_MATH = {Ops.EXP2: "exp2", Ops.LOG2: "log2", Ops.SIN: "sin", Ops.SQRT: "sqrt", Ops.TRUNC: "trunc"}


def ctype(dt: DType) -> str:
    if isinstance(dt, PtrDType):
        return ctype(dt.base) + "*"
    if dt not in C_TYPES:
        raise NotImplementedError(f"the C renderer has no type for {dt!r}")
    return C_TYPES[dt]


def render_const(value: object, dt: DType) -> str:
    """A C literal of `dt`: `1.5f`, `INFINITY`, `7`, `-2147483648` written so it has the right type."""
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
    fn = _MATH[op]
    if dt is dtypes.float64:
        return f"{fn}({x})"
    if dt is dtypes.float32:
        return f"{fn}f({x})"
    return f"(({ctype(dt)}){fn}f((float)({x})))"  # half precision computes in float


class CRenderer:
    """Renders a linear program as a C function `void name(T* restrict data0, ...)`."""

    device = "CPU"

    def render(self, name: str, uops: Sequence[UOp]) -> str:
        names: dict[UOp, str] = {}
        params: list[tuple[int, str]] = []  # (position, declaration): arguments in DEFINE_GLOBAL order
        lines: list[str] = []
        counters: dict[str, int] = {}
        depth = 1
        written = {u.src[0].src[0] for u in uops if u.op is Ops.STORE and u.src[0].op is Ops.INDEX}
        needs_floor = False

        def fresh(prefix: str) -> str:
            counters[prefix] = counters.get(prefix, 0) + 1
            return f"{prefix}{counters[prefix] - 1}"

        def emit(line: str) -> None:
            lines.append("  " * depth + line)

        def bind(u: UOp, prefix: str, expr: str) -> None:
            names[u] = fresh(prefix)
            emit(f"const {ctype(u.dtype)} {names[u]} = {expr};")

        for u in uops:
            op, src = u.op, [names.get(s, "") for s in u.src]
            if op is Ops.DEFINE_GLOBAL:
                names[u] = f"data{u.arg}"
                assert isinstance(u.dtype, PtrDType)
                const = "" if u in written else "const "
                params.append((u.arg, f"{const}{ctype(u.dtype.base)}* restrict {names[u]}"))
            elif op is Ops.DEFINE_VAR:
                names[u] = u.arg[0]
                params.append((1 << 30, f"const {ctype(u.dtype)} {names[u]}"))  # variables after the buffers
            elif op is Ops.DEFINE_REG:
                assert isinstance(u.dtype, PtrDType)
                names[u] = f"acc{u.arg}"
                emit(f"{ctype(u.dtype.base)} {names[u]}[{u.dtype.size}];")
            elif op is Ops.CONST:
                names[u] = render_const(u.arg, u.dtype)
            elif op is Ops.RANGE:
                names[u] = f"ridx{u.arg}"
                emit(f"for ({ctype(u.dtype)} {names[u]} = 0; {names[u]} < {src[0]}; {names[u]}++) {{")
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
                names[u] = f"{src[0]}[{src[1]}]"  # an lvalue; LOAD and STORE use it as it is
            elif op is Ops.LOAD:
                index = u.src[0]
                expr = f"({names[index.src[2]]} ? {src[0]} : {src[1]})" if len(index.src) == 3 else src[0]
                bind(u, "val", expr)
            elif op is Ops.STORE:
                emit(f"{src[0]} = {src[1]};")
            elif op is Ops.CAST:
                bind(u, "cast", f"({ctype(u.dtype)})({src[0]})")
            elif op is Ops.BITCAST:
                pun = f"union {{ {ctype(u.src[0].dtype)} a; {ctype(u.dtype)} b; }}"
                bind(u, "cast", f"(({pun}){{.a = {src[0]}}}).b")
            elif op in GroupOp.ALU:
                expr, floor = self._alu(u, src)
                needs_floor |= floor
                bind(u, "alu", expr)
            elif op in (Ops.SINK, Ops.GROUP):
                pass
            else:
                raise NotImplementedError(f"the C renderer cannot render {op.name}")
        args = ", ".join(text for _, text in sorted(params, key=lambda p: p[0])) or "void"
        head = f"void {name}({args}) {{"
        prelude = PRELUDE + (FLOOR_HELPERS if needs_floor else "")
        return "\n".join([prelude, head, *lines, "}", ""])

    def _alu(self, u: UOp, src: list[str]) -> tuple[str, bool]:
        op, dt = u.op, u.dtype
        if op in _INFIX:
            return f"({src[0]} {_INFIX[op]} {src[1]})", False
        if op in (Ops.IDIV, Ops.MOD):
            if all(s.vmin >= 0 for s in u.src) or dtypes.is_unsigned(dt):
                return f"({src[0]} {'/' if op is Ops.IDIV else '%'} {src[1]})", False
            fn = "floordiv" if op is Ops.IDIV else "floormod"
            return f"(({ctype(dt)}){fn}({src[0]}, {src[1]}))", True
        if op is Ops.NEG:
            return (f"(!{src[0]})" if dt is dtypes.bool else f"(-{src[0]})"), False
        if op is Ops.MAX:
            a, b = src
            if dtypes.is_float(dt):
                return f"((({a} != {a}) || ({a} > {b})) ? {a} : {b})", False  # NaN wins, as in numpy
            return f"(({a} > {b}) ? {a} : {b})", False
        if op is Ops.WHERE:
            return f"({src[0]} ? {src[1]} : {src[2]})", False
        if op is Ops.MULACC:
            return f"(({src[0]} * {src[1]}) + {src[2]})", False
        if op is Ops.RECIPROCAL:
            return f"(({ctype(dt)})1 / {src[0]})", False
        if op in _MATH:
            return _float_math(op, dt, src[0]), False
        raise NotImplementedError(f"the C renderer cannot render {op.name}")
