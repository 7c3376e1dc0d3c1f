"""The WGSL renderer: the C renderer's walk over the linear program (renderer/cstyle.py), in WGSL's spelling, for
the WEBGPU device.

WGSL is not C, so more of the dialect hooks differ than for OpenCL:

- values are `let alu0: f32 = ...;`, registers `var acc0: array<f32, 4>;`, loops `for (var ridx0: i32 = 0; ...)`;
- each buffer is a storage binding `@group(0) @binding(N) var<storage, read_write> dataN: array<f32>;` (all
  read-write: wgpu refuses one buffer bound both read-only and writable in one dispatch, and the memory planner
  puts several buffers in one arena);
- the kernel is `@compute @workgroup_size(x, y, z) fn name(@builtin(workgroup_id) gid: vec3<u32>, ...)`; `gidxN`
  is the work-group id on axis N and `lidxN` the local invocation id. A launch of more than 65535 work-groups on
  an axis (WebGPU's limit) is flattened: `launch_grid` spreads the groups over x and y and the kernel recovers
  each gidxN from the flat id (the runtime dispatches the same grid);
- local memory is `var<workgroup> tempN: array<f32, size>;` at module scope, BARRIER is `workgroupBarrier()`;
- WHERE and a gated load are `select(no, yes, cond)`, the fused multiply-add `fma`, bit casts `bitcast<T>`.

What WGSL lacks: 64-bit ints and floats, 8- and 16-bit storage, bool storage (`supported_dtypes()`). A bool buffer
is kept as the bytes every device uses (one per element, 0 or 1), seen by the kernel as `array<atomic<u32>>`: a
read takes the element's byte out of its word, a write clears and sets it with atomicAnd / atomicOr (two
work-items may write neighbouring bytes of one word at once). Vectors are not rendered (`max_lanes` is 1).

sin, cos and tan compute with the reductions of a target without 64-bit ints and without a fused multiply-add
(`fused_mulacc = False`: WGSL's fma may round its product, lavapipe's does; codegen/transcendental.py): within
1 ulp of numpy's float64 over the whole float32 range (0.85 measured on lavapipe), tan within 2 (1.02).

WGSL lets a compiler assume fast math, and lavapipe's does. Where its folds would change a result the library
relies on, the renderer writes the IEEE value out (x != x, x - x, division by zero) or passes an operand through
`| opaque_zero`, an identity on its bits that the compiler cannot prove: the constant shifts of (x + c1) - c2,
the sum in (a + b) - a (a two-sum's error term), the inner sum of z + (x*y + u*v) (fused into two fmas, z + u*v
first) and the 0.0 of select (see `_kept_operands`).

>>> WGSLRenderer().const(1.5, dtypes.float32), WGSLRenderer().const(-3, dtypes.int32)
('1.5f', '-3i')
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from zeptograd.dtype import AddrSpace, DType, PtrDType, dtypes
from zeptograd.renderer.cstyle import MATH_FUNCTIONS, CRenderer
from zeptograd.uop.ops import Ops, UOp

WGSL_TYPES: dict[DType, str] = {
    dtypes.bool: "bool",
    dtypes.int32: "i32",
    dtypes.uint32: "u32",
    dtypes.float32: "f32",
}
MAX_GROUPS = 65535  # work-groups per dispatch axis: WebGPU's maxComputeWorkgroupsPerDimension default
_INFIX = {Ops.ADD: "+", Ops.SUB: "-", Ops.MUL: "*", Ops.FDIV: "/", Ops.CMPLT: "<", Ops.CMPNE: "!=", Ops.CMPEQ: "=="}
_INFIX |= {Ops.AND: "&", Ops.OR: "|", Ops.XOR: "^"}

# the remainder as a - (a / b) * b, not `%`: wgpu's OpenGL backend (llvmpipe, where there is no Vulkan driver)
# passes `%` on to GLSL, whose result for a negative operand is undefined (it gave -7 % 7 == 4)
FLOOR_HELPERS = """fn floordiv(a: i32, b: i32) -> i32 {
  let q = a / b;
  return q - select(0i, 1i, (q * b != a) && ((a < 0i) != (b < 0i)));
}
fn floormod(a: i32, b: i32) -> i32 {
  let r = a - (a / b) * b;
  return r + select(0i, b, (r != 0i) && ((r < 0i) != (b < 0i)));
}
"""


def launch_grid(groups: Sequence[int]) -> tuple[int, int, int]:
    """The work-groups to dispatch per axis for `groups` work-groups per launch dimension: as they are when each
    fits WebGPU's 65535, else all of them flattened over x and y (the kernel then recovers its gidxN).

    >>> launch_grid((100, 2, 1)), launch_grid((70000, 1, 1))
    ((100, 2, 1), (65535, 2, 1))
    """
    g = tuple(groups) + (1,) * (3 - len(groups))
    if all(n <= MAX_GROUPS for n in g):
        return g[0], g[1], g[2]
    total = math.prod(g)
    return min(total, MAX_GROUPS), -(-total // MAX_GROUPS), 1


def _sizes(uops: Sequence[UOp], prefix: str) -> list[int]:
    out = [1, 1, 1]
    for u in uops:
        if u.op is Ops.SPECIAL and u.arg.startswith(prefix):
            out[int(u.arg[4:])] = u.src[0].arg
    return out


def _split_index(lvalue: str) -> tuple[str, str]:
    """`data0[expr]` -> ("data0", "expr")."""
    at = lvalue.index("[")
    return lvalue[:at], lvalue[at + 1 : -1]


class WGSLRenderer(CRenderer):
    """Renders a linear program as a WGSL compute shader (see the module docstring)."""

    device = "WEBGPU"
    has_local = True
    has_threads = False
    # invocations in a work-group at most: WebGPU's default limit (maxComputeInvocationsPerWorkgroup)
    max_local_size = 256
    # bytes of workgroup memory a work-group may hold: WebGPU's default limit (maxComputeWorkgroupStorageSize)
    local_memory_bytes = 16 << 10
    paired_gated_stores = False  # an invocation stores its own lanes
    # WGSL has no way to forbid contraction: a driver may fuse a*b+c into an FMA (lavapipe does), so a product
    # and a sum are not always rounded twice as on the other devices (test_backends.py knows)
    may_contract = True
    # WGSL's fma need not be fused (its accuracy is that of a*b + c) and lavapipe's is not: sin reduces without
    # one (codegen/transcendental.py)
    fused_mulacc = False
    # set by the device when its adapter is a CPU (lavapipe): the heuristic then plans as for PoCL
    runs_on_cpu = False

    def supported_dtypes(self) -> frozenset[DType]:
        """bool, int32, uint32 and float32: WGSL has no 64-bit types and no 8- or 16-bit storage.

        >>> sorted(d.name for d in WGSLRenderer().supported_dtypes())
        ['bool', 'float32', 'int32', 'uint32']
        """
        return frozenset(WGSL_TYPES)

    def max_lanes(self, op: Ops, dt: DType) -> int:
        return 1

    def type_name(self, dt: DType) -> str:
        if isinstance(dt, PtrDType):
            return self.type_name(dt.base)
        if dt.count > 1:
            return f"vec{dt.count}<{self.type_name(dt.scalar())}>"
        if dt not in WGSL_TYPES:
            raise NotImplementedError(f"the WGSL renderer has no type for {dt!r}")
        return WGSL_TYPES[dt]

    def const(self, value: object, dt: DType) -> str:
        if dt.count > 1:
            return f"{self.type_name(dt)}({self.const(value, dt.scalar())})"
        if dt is dtypes.bool:
            return "true" if value else "false"
        if dtypes.is_float(dt):
            assert isinstance(value, float)
            if math.isnan(value):
                return "bitcast<f32>(0x7fc00000u)"  # WGSL has no NaN or infinity literal
            if math.isinf(value):
                return f"bitcast<f32>({'0x7f800000u' if value > 0 else '0xff800000u'})"
            return f"{value!r}f"
        assert isinstance(value, int)
        if dt is dtypes.int32 and value == -(2**31):
            return "bitcast<i32>(0x80000000u)"  # 2147483648i is out of range, so its negation is no literal
        return f"{value}{'u' if dtypes.is_unsigned(dt) else 'i'}"

    def param(self, u: UOp, name: str, written: bool) -> str:
        assert isinstance(u.dtype, PtrDType)
        elem = "atomic<u32>" if u.dtype.base is dtypes.bool else self.type_name(u.dtype.base)
        return f"@group(0) @binding({u.arg}) var<storage, read_write> {name}: array<{elem}>;"

    def special(self, u: UOp, params: list[tuple[int, str]]) -> str | None:
        if u.arg[:4] not in ("gidx", "lidx") or not u.arg[4:].isdigit():
            raise NotImplementedError(f"the WGSL renderer has no launch index {u.arg!r} (gidxN and lidxN)")
        axis = "xyz"[int(u.arg[4:])]
        if u.arg[0] == "l":
            return f"let {u.arg}: i32 = i32(lid.{axis});"
        return None  # the work-group ids are declared at the top of the kernel by render()

    def declare(self, dt: DType, name: str, expr: str) -> str:
        return f"let {name}: {self.type_name(dt)} = {expr};"

    def register(self, dt: DType, name: str, size: int) -> str:
        return f"var {name}: array<{self.type_name(dt)}, {size}>;"

    def loop(self, dt: DType, name: str, bound: str) -> str:
        return f"for (var {name}: {self.type_name(dt)} = 0; {name} < {bound}; {name}++) {{"

    def choose(self, cond: str, yes: str, no: str) -> str:
        return f"select({no}, {yes}, {cond})"

    def shuffle(self, a: str, b: str, idxs: Sequence[int]) -> str | None:
        return None  # lanes are gathered one by one

    def vector_literal(self, dt: DType, lanes: list[str]) -> str:
        return f"{self.type_name(dt)}({', '.join(lanes)})"

    def lane(self, vec: str, i: int) -> str:
        return f"{vec}[{i}]"

    def load(self, dt: DType, index: UOp, lvalue: str) -> str:
        if dt is dtypes.bool and _global_bool(index):
            buf, i = _split_index(lvalue)
            return f"(((atomicLoad(&{buf}[({i}) >> 2u]) >> (u32(({i}) & 3i) * 8u)) & 0xffu) != 0u)"
        return lvalue

    def store(self, dt: DType, index: UOp, lvalue: str, value: str) -> str:
        if dt is dtypes.bool and _global_bool(index):
            buf, i = _split_index(lvalue)
            word, shift = f"&{buf}[({i}) >> 2u]", f"(u32(({i}) & 3i) * 8u)"
            return f"atomicAnd({word}, ~(0xffu << {shift})); atomicOr({word}, select(0u, 1u, {value}) << {shift});"
        return f"{lvalue} = {value};"

    def cast(self, u: UOp, x: str) -> str:
        return f"{self.type_name(u.dtype)}({x})"

    def bitcast(self, u: UOp, x: str) -> str:
        return f"bitcast<{self.type_name(u.dtype)}>({x})"

    def other(self, u: UOp, src: list[str], names: dict[UOp, str]) -> str | None:
        if u.op is Ops.DEFINE_LOCAL:
            names[u] = f"temp{u.arg}"
            return None  # declared at module scope by render()
        if u.op is Ops.BARRIER:
            return "workgroupBarrier();"
        if u.op is Ops.DEFINE_VAR:
            raise NotImplementedError("symbolic variables on the WEBGPU device")
        return super().other(u, src, names)

    def head(self, name: str, args: str) -> str:
        return f"fn {name}({args}) {{"

    def prelude(self, vectors: bool, needs_floor: bool, uops: Sequence[UOp]) -> str:
        return FLOOR_HELPERS if needs_floor else ""

    def render(self, name: str, uops: Sequence[UOp]) -> str:
        if any(u.op is Ops.DEFINE_VAR for u in uops):
            raise NotImplementedError("symbolic variables on the WEBGPU device")
        # the C walk puts the bindings where C has parameters: take them out to module scope
        self._uses_opaque = False
        src = super().render(name, uops)
        head_at = src.index(f"fn {name}(")
        args_end = src.index(") {", head_at)
        bindings = src[head_at + len(f"fn {name}(") : args_end]
        bindings = "" if bindings == "void" else bindings.replace(";, ", ";\n")
        body = src[args_end + len(") {") :]
        module = [src[:head_at].rstrip("\n"), bindings]
        for u in uops:
            if u.op is Ops.DEFINE_LOCAL:
                assert isinstance(u.dtype, PtrDType) and u.dtype.addrspace is AddrSpace.LOCAL
                module.append(f"var<workgroup> temp{u.arg}: array<{self.type_name(u.dtype.base)}, {u.dtype.size}>;")
        groups, local = _sizes(uops, "gidx"), _sizes(uops, "lidx")
        grid = launch_grid(groups)
        builtins = "@builtin(workgroup_id) gid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>"
        if self._uses_opaque:
            builtins += ", @builtin(num_workgroups) nwg: vec3<u32>"
        lines = [f"@compute @workgroup_size({local[0]}, {local[1]}, {local[2]})", f"fn {name}({builtins}) {{"]
        if self._uses_opaque:
            lines.append("  let opaque_zero: u32 = select(0u, 1u, nwg.x == 0u);")
        used = [int(u.arg[4:]) for u in uops if u.op is Ops.SPECIAL and u.arg.startswith("gidx")]
        if grid != tuple(groups):
            # flattened launch: the flat work-group id, past the end in the last row of the grid
            lines.append(f"  let flat: i32 = i32(gid.x) + i32(gid.y) * {grid[0]}i;")
            lines.append(f"  if (flat >= {math.prod(groups)}i) {{ return; }}")
            stride = 1
            for n in range(3):
                if n in used:
                    lines.append(f"  let gidx{n}: i32 = (flat / {stride}i) % {groups[n]}i;")
                stride *= groups[n]
        else:
            lines += [f"  let gidx{n}: i32 = i32(gid.{'xyz'[n]});" for n in sorted(used)]
        return "\n".join([*[m for m in module if m], *lines]) + body

    def _opaque(self, x: str) -> str:
        """x (f32) through `| opaque_zero`, an identity on its bits that the optimizer cannot prove (opaque_zero
        is 1 only for a launch of no work-groups, which never runs): it keeps the value's rounding and sign."""
        self._uses_opaque = True
        return f"bitcast<f32>(bitcast<u32>({x}) | opaque_zero)"

    def _alu(self, u: UOp, src: list[str]) -> tuple[str, bool]:
        op, dt = u.op, u.dtype
        operand = u.src[0].dtype if u.src else dt
        if operand is dtypes.bool and op in (Ops.CMPLT, Ops.XOR, Ops.MAX, Ops.NEG):
            logic = {Ops.CMPLT: f"(!{src[0]} && {src[-1]})", Ops.XOR: f"({src[0]} != {src[-1]})"}
            logic |= {Ops.MAX: f"({src[0]} || {src[-1]})", Ops.NEG: f"(!{src[0]})"}
            return logic[op], False
        if op is Ops.CMPNE and dtypes.is_float(operand):
            # WGSL may assume there are no NaNs (naga and lavapipe fold x != x to false, and != is ordered): the
            # NaN test on the bits, and != as the negation of the ordered ==, which is false for a NaN
            if u.src[0] is u.src[1]:
                return _isnan(src[0]), False
            return f"!({src[0]} == {src[1]})", False
        if op is Ops.SUB and dtypes.is_float(dt) and u.src[0] is u.src[1]:
            # x - x is the library's finiteness test (0 for a finite x, NaN for inf and NaN), but lavapipe's
            # optimizer assumes no infinities and folds it to 0: its IEEE value, from the exponent bits
            return _minus_itself(src[0]), False
        if op in (Ops.ADD, Ops.SUB) and dtypes.is_float(dt) and any(kept := _kept_operands(u)):
            # lavapipe's optimizer would rewrite this sum and lose a rounding the library relies on (see
            # _kept_operands): the operands it would look into go through an identity on their bits that it cannot
            # see through
            a, b = (self._opaque(x) if keep else x for keep, x in zip(kept, src))
            return f"({a} {_INFIX[op]} {b})", False
        if op is Ops.WHERE and dtypes.is_float(dt) and any(_is_zero(s) for s in u.src[1:]):
            # the optimizer turns select(-1.0, 0.0, c) into -f32(c), a -0.0 where c is false: the +0.0 opaque
            yes, no = (self._opaque(s) if _is_zero(v) else s for v, s in zip(u.src[1:], src[1:]))
            return f"select({no}, {yes}, {src[0]})", False
        if op in (Ops.FDIV, Ops.RECIPROCAL) and dtypes.is_float(dt):
            a, b = (src[0], src[1]) if op is Ops.FDIV else (self.const(1.0, dt), src[0])
            return _divide(a, b), False
        if op in (Ops.SHL, Ops.SHR):
            return f"({src[0]} {'<<' if op is Ops.SHL else '>>'} u32({src[1]}))", False
        if op in _INFIX:
            return f"({src[0]} {_INFIX[op]} {src[1]})", False
        if op in (Ops.IDIV, Ops.MOD):
            if all(s.vmin >= 0 for s in u.src) or dtypes.is_unsigned(dt):
                return f"({src[0]} {'/' if op is Ops.IDIV else '%'} {src[1]})", False
            return f"{'floordiv' if op is Ops.IDIV else 'floormod'}({src[0]}, {src[1]})", True
        if op is Ops.NEG:
            return f"(-{src[0]})", False
        if op is Ops.MAX and dtypes.is_float(dt):
            a, b = src
            return f"select({b}, {a}, {_isnan(a)} || ({a} > {b}))", False  # NaN wins, as in numpy
        if op is Ops.MAX:
            return f"max({src[0]}, {src[1]})", False
        if op is Ops.WHERE:
            return f"select({src[2]}, {src[1]}, {src[0]})", False
        if op is Ops.MULACC and dtypes.is_float(dt):
            return f"fma({', '.join(src)})", False
        if op is Ops.MULACC:
            return f"(({src[0]} * {src[1]}) + {src[2]})", False
        if op in MATH_FUNCTIONS:
            return f"{MATH_FUNCTIONS[op]}({src[0]})", False
        raise NotImplementedError(f"the WGSL renderer cannot render {op.name}")


def _divide(a: str, b: str) -> str:
    """a / b with IEEE's result for b = 0 (WGSL leaves it indeterminate; lavapipe gives 0): NaN for 0/0 and NaN/0,
    else an infinity with the sign of a times the sign of b's zero."""
    special = f"select(0x7f800000u, 0x7fc00000u, {_isnan(a)} || ({a} == 0.0f))"
    signed = f"bitcast<f32>({special} | ((bitcast<u32>({a}) ^ bitcast<u32>({b})) & 0x80000000u))"
    return f"select({a} / {b}, {signed}, {b} == 0.0f)"


def _const_shifted(inner: UOp, outer: UOp) -> bool:
    """`inner` is a float sum or difference with a constant (a*b + c included), and `outer` a constant: (inner +-
    outer) would be reassociated."""
    shifts = inner.op in (Ops.ADD, Ops.SUB) or (inner.op is Ops.MULACC and inner.src[2].op is Ops.CONST)
    return outer.op is Ops.CONST and shifts and any(s.op is Ops.CONST for s in inner.src)


def _kept_operands(u: UOp) -> tuple[bool, bool]:
    """Which operands of the float sum or difference `u` to keep from lavapipe's optimizer, which assumes fast math:
    - (x + c1) - c2 is reassociated into x + (c1 - c2), losing the rounding of x + c1 that the library's
      cancellation tricks rely on (log1p's (1 + x) - 1): the inner sum;
    - (a + b) - a is folded to b, but a two-sum takes it to measure the rounding of a + b: the sum;
    - z + (x*y + u*v) is fused into fma(x, y, fma(u, v, z)): z + u*v is rounded before x*y is added, which loses a
      small term summed first on purpose (sin's r + (r**3 * p + r_lo * (1 - r**2/2))): the inner sum."""
    x, y = u.src
    first = _const_shifted(x, y) or (u.op is Ops.SUB and _addend_of(y, x)) or _sum_of_products(x)
    return first, _const_shifted(y, x) or _sum_of_products(y)


def _sum_of_products(s: UOp) -> bool:
    """`s` is x*y + u*v (or minus), fused or not."""
    if s.op is Ops.MULACC:
        return s.src[2].op in (Ops.MUL, Ops.MULACC)
    return s.op in (Ops.ADD, Ops.SUB) and all(x.op in (Ops.MUL, Ops.MULACC) for x in s.src)


def _addend_of(a: UOp, s: UOp) -> bool:
    """`s` is a float sum with `a` as an addend: a + b, a - b or x*y + a."""
    addends = {Ops.ADD: s.src, Ops.SUB: s.src[:1], Ops.MULACC: s.src[2:]}.get(s.op, ())
    return any(x is a for x in addends)


def _is_zero(u: UOp) -> bool:
    """`u` is the constant +0.0."""
    return u.op is Ops.CONST and u.arg == 0.0 and math.copysign(1.0, u.arg) > 0


def _minus_itself(x: str) -> str:
    """x - x as IEEE gives it: +0 for a finite x, NaN for an infinity or a NaN (exponent all ones)."""
    return f"select(0.0f, bitcast<f32>(0x7fc00000u), (bitcast<u32>({x}) & 0x7f800000u) == 0x7f800000u)"


def _isnan(x: str) -> str:
    """x is a NaN: its exponent all ones and its mantissa not zero."""
    return f"((bitcast<u32>({x}) & 0x7fffffffu) > 0x7f800000u)"


def _global_bool(index: UOp) -> bool:
    """Whether `index` points into a global buffer of bools (kept as bytes in atomic words)."""
    ptr = index.src[0].dtype
    return isinstance(ptr, PtrDType) and ptr.addrspace is AddrSpace.GLOBAL
