"""Specs: what is legal at each stage boundary, written as PatternMatchers.

A spec rule returns True for a legal node, or a string that says what is wrong with it; a node no rule
accepts is not legal at that stage. `verify(root, spec, stage)` checks a whole graph and raises SpecError.
The three stages are the tensor graph (`tensor_spec`), the kernel AST (`kernel_spec`) and the linear
program (`program_spec`). All three share the unified STORE rule (docs/internals.md):

>>> buf = UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(4), (), 0)
>>> idx = buf.index(UOp.const(dtypes.index, 1))
>>> verify(idx.store(UOp.const(dtypes.float32, 2.0)), kernel_spec, "kernel AST")
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from zeptograd.dtype import AddrSpace, DType, PtrDType, dtypes
from zeptograd.uop.ops import ARITY, GroupOp, Ops, UOp
from zeptograd.uop.pattern import PatternMatcher, UPat
from zeptograd.uop.render import short_repr

Verdict = bool | str


class SpecError(ValueError):
    """A graph has a node that is not legal at the stage it is checked at."""


def _dtypes(u: UOp) -> str:
    return ", ".join(repr(s.dtype) for s in u.src)


# *** rules every stage shares ***


def check_store(st: UOp) -> Verdict:
    """The unified STORE: `STORE(INDEX(...), value)` writes memory and has dtype void;
    `STORE(target, value)` with a BUFFER, DEFINE_GLOBAL, DEFINE_REG or DEFINE_VAR target assigns the
    whole target and has the target's dtype. Nothing else is a STORE."""
    if len(st.src) < 2:
        return f"STORE takes (target, value), got {len(st.src)} source(s)"
    target, value = st.src[0], st.src[1]
    if target.op is Ops.INDEX:
        if st.dtype is not dtypes.void:
            return f"a STORE through an INDEX writes memory and has dtype void, not {st.dtype!r}"
        base = target.dtype.base if isinstance(target.dtype, PtrDType) else target.dtype
        if value.dtype.scalar() is not base.scalar():
            return f"STORE of a {value.dtype!r} value through a pointer to {base!r}"
        return True
    if target.op in GroupOp.AssignTarget:
        if st.dtype is not target.dtype:
            return f"a STORE that assigns a {target.op.name} has the target's dtype {target.dtype!r}, not {st.dtype!r}"
        element = target.dtype.base if isinstance(target.dtype, PtrDType) else target.dtype
        if value.dtype is not target.dtype and value.dtype is not element:
            return f"STORE of a {value.dtype!r} value to a {target.op.name} of {target.dtype!r}"
        return True
    return (
        f"a STORE target must be an INDEX (a memory write, dtype void) or a BUFFER, DEFINE_GLOBAL, DEFINE_REG "
        f"or DEFINE_VAR (an assignment, dtype of the target), not a {target.op.name}"
    )


def check_alu(a: UOp) -> Verdict:
    """ALU ops take sources of one dtype; comparisons give bool; WHERE selects on a bool."""
    if len(a.src) != ARITY[a.op]:
        return f"{a.op.name} takes {ARITY[a.op]} sources, got {len(a.src)}"
    if a.op is Ops.WHERE:
        cond, x, y = a.src
        if cond.dtype.scalar() is not dtypes.bool:
            return f"WHERE's condition must be bool, got {cond.dtype!r}"
        if not (x.dtype is y.dtype is a.dtype):
            return f"WHERE's branches and result must share a dtype, got {_dtypes(a)} -> {a.dtype!r}"
        return True
    operand = a.src[0].dtype
    if any(s.dtype is not operand for s in a.src):
        return f"{a.op.name} of mixed dtypes ({_dtypes(a)})"
    if a.op in GroupOp.Comparison:
        if a.dtype is not dtypes.bool.vec(operand.count):
            return f"{a.op.name} gives bool, not {a.dtype!r}"
        return True
    if a.dtype is not operand:
        return f"{a.op.name} of {operand!r} must have dtype {operand!r}, not {a.dtype!r}"
    if a.op in GroupOp.FloatOnly and not dtypes.is_float(a.dtype):
        return f"{a.op.name} is defined on floats, not {a.dtype!r}"
    if a.op in GroupOp.IntOnly and not dtypes.is_int(a.dtype):
        return f"{a.op.name} is defined on integers, not {a.dtype!r}"
    if a.op in GroupOp.Bitwise and dtypes.is_float(a.dtype):
        return f"{a.op.name} is not defined on floats"
    return True


def check_const(c: UOp) -> Verdict:
    if c.src:
        return "CONST has no sources"
    scalar = c.dtype.scalar()
    if scalar is dtypes.bool:
        ok = isinstance(c.arg, bool)
    elif dtypes.is_int(scalar):
        ok = isinstance(c.arg, int) and not isinstance(c.arg, bool)
    elif dtypes.is_float(scalar):
        ok = isinstance(c.arg, float)
    else:
        return f"no CONST of {c.dtype!r}"
    return True if ok else f"CONST of {c.dtype!r} holds a {type(c.arg).__name__}: {c.arg!r}"


def check_define_var(v: UOp) -> Verdict:
    arg = v.arg
    if not (isinstance(arg, tuple) and len(arg) == 3 and isinstance(arg[0], str)):
        return f"DEFINE_VAR's arg is (name, min, max), got {arg!r}"
    if not dtypes.is_int(v.dtype) or v.dtype.count != 1:
        return f"DEFINE_VAR is an integer scalar, not {v.dtype!r}"
    return True if arg[1] <= arg[2] else f"DEFINE_VAR {arg[0]!r} has min {arg[1]} > max {arg[2]}"


def check_cast(c: UOp) -> Verdict:
    if len(c.src) != 1:
        return "CAST takes one source"
    return True


def check_bitcast(c: UOp) -> Verdict:
    if len(c.src) != 1:
        return "BITCAST takes one source"
    if c.dtype.itemsize != c.src[0].dtype.itemsize:
        return f"BITCAST from {c.src[0].dtype!r} to {c.dtype!r} changes the size"
    return True


def check_vectorize(v: UOp) -> Verdict:
    if len(v.src) < 2 or any(s.dtype is not v.src[0].dtype for s in v.src):
        return f"VECTORIZE packs two or more scalars of one dtype, got ({_dtypes(v)})"
    return True if v.dtype is v.src[0].dtype.vec(len(v.src)) else f"VECTORIZE of {len(v.src)} gives {v.dtype!r}"


def check_gep(g: UOp) -> Verdict:
    if len(g.src) != 1 or not isinstance(g.arg, tuple) or not g.arg:
        return "GEP takes one vector and a tuple of lane numbers"
    count = g.src[0].dtype.count
    if not all(isinstance(i, int) and 0 <= i < count for i in g.arg):
        return f"GEP lanes {g.arg} out of range for {g.src[0].dtype!r}"
    if g.dtype is not g.src[0].dtype.scalar().vec(len(g.arg)):
        return f"GEP of {len(g.arg)} lane(s) gives {g.dtype!r}"
    return True


def check_wmma(w: UOp) -> Verdict:
    """WMMA(a, b, c[, element]) with a tensor core (codegen/tensor_cores.py) as arg: a lane's A and B elements as
    vectors of the input dtype, its C elements (before `expand`: one, with the lane index `element`)."""
    tc = w.arg
    if not all(hasattr(tc, f) for f in ("operand_dtype", "dtype_out", "elements")) or len(w.src) not in (3, 4):
        return "WMMA takes (a, b, c) or (a, b, c, element) and a tensor core"
    a, b, c = w.src[:3]
    lanes = tc.operand_dtype
    if a.dtype is not lanes.vec(tc.elements[0]) or b.dtype is not lanes.vec(tc.elements[1]):
        return f"WMMA of {tc!r} takes {tc.elements[0]} and {tc.elements[1]} lanes of {lanes!r}"
    if len(w.src) == 4:
        element = w.src[3]
        if element.op is not Ops.UNROLL or element.src[0].arg != tc.elements[2]:
            return f"WMMA's fourth source is its lane index over {tc.elements[2]} C elements"
        return True if w.dtype is tc.dtype_out and c.dtype is tc.dtype_out else "WMMA's C and D are the output dtype"
    if w.dtype is not tc.dtype_out.vec(tc.elements[2]) or c.dtype is not w.dtype:
        return f"WMMA of {tc!r} takes and gives {tc.elements[2]} lanes of {tc.dtype_out!r}"
    return True


shared_spec = PatternMatcher(
    [
        (UPat(Ops.STORE, name="st"), check_store, "unified STORE"),
        (UPat(GroupOp.ALU, name="a"), check_alu, "ALU dtypes"),
        (UPat(Ops.CONST, name="c"), check_const, "CONST"),
        (UPat(Ops.DEFINE_VAR, name="v"), check_define_var, "DEFINE_VAR"),
        (UPat(Ops.CAST, name="c"), check_cast, "CAST"),
        (UPat(Ops.BITCAST, name="c"), check_bitcast, "BITCAST"),
        (UPat(Ops.SINK, dtypes.void), lambda: True, "SINK"),
        (UPat(Ops.GROUP, dtypes.void), lambda: True, "GROUP"),
        (UPat(Ops.AFTER, name="a"), lambda a: a.dtype is a.src[0].dtype or "AFTER has the dtype of its first source"),
    ]
)


# *** the tensor graph ***


def check_buffer(b: UOp) -> Verdict:
    return True if not isinstance(b.dtype, PtrDType) else "a BUFFER's dtype is its element type, not a pointer"


def check_movement(m: UOp) -> Verdict:
    if not m.src or m.dtype is not m.src[0].dtype:
        return f"{m.op.name} keeps its source's dtype"
    return True if isinstance(m.arg, tuple) else f"{m.op.name}'s arg is a tuple, got {m.arg!r}"


def check_reduce_axis(r: UOp) -> Verdict:
    if not (isinstance(r.arg, tuple) and len(r.arg) == 2 and r.arg[0] in (Ops.ADD, Ops.MUL, Ops.MAX)):
        return f"REDUCE_AXIS's arg is (ADD|MUL|MAX, axes), got {r.arg!r}"
    return True if r.dtype is r.src[0].dtype else "REDUCE_AXIS keeps its source's dtype"


def _same_as_source(u: UOp) -> Verdict:
    return True if len(u.src) >= 1 and u.dtype is u.src[0].dtype else f"{u.op.name} keeps its source's dtype"


def check_custom_grad(u: UOp) -> Verdict:
    named = isinstance(u.arg, str) or (isinstance(u.arg, tuple) and len(u.arg) >= 1 and isinstance(u.arg[0], str))
    if not named:
        return f"CUSTOM_GRAD's arg is the name of its gradient (or the name and its parameters), got {u.arg!r}"
    return _same_as_source(u)


tensor_spec = shared_spec + PatternMatcher(
    [
        (UPat(Ops.BUFFER, name="b"), check_buffer, "BUFFER"),
        (UPat(Ops.BUFFER_VIEW, name="u"), _same_as_source, "BUFFER_VIEW"),
        (UPat(GroupOp.Movement, name="m"), check_movement, "movement op"),
        (UPat(Ops.REDUCE_AXIS, name="r"), check_reduce_axis, "REDUCE_AXIS"),
        (UPat((Ops.CONTIGUOUS, Ops.DETACH, Ops.COPY), name="u"), _same_as_source, "CONTIGUOUS/DETACH/COPY"),
        (UPat(Ops.CUSTOM_GRAD, name="u"), check_custom_grad, "CUSTOM_GRAD"),
    ]
)


# *** the kernel AST and the linear program ***


def _pointer(addrspace: AddrSpace) -> Callable[[UOp], Verdict]:
    def check(d: UOp) -> Verdict:
        if not isinstance(d.dtype, PtrDType) or d.dtype.addrspace is not addrspace:
            return f"{d.op.name} is a pointer in the {addrspace.name} address space, not {d.dtype!r}"
        return True if not d.src else f"{d.op.name} has no sources"

    return check


def check_range(r: UOp) -> Verdict:
    if len(r.src) != 1 or r.dtype is not r.src[0].dtype or not dtypes.is_int(r.dtype):
        return "RANGE counts an integer from 0 to its one source, in the source's dtype"
    return True


def check_index(x: UOp) -> Verdict:
    if len(x.src) not in (2, 3):
        return f"INDEX takes (pointer, index[, gate]), got {len(x.src)} sources"
    ptr, idx = x.src[0], x.src[1]
    if not isinstance(ptr.dtype, PtrDType):
        return f"INDEX needs a pointer, got {ptr.dtype!r}"
    if not dtypes.is_int(idx.dtype.scalar()):
        return f"INDEX's index must be an integer, got {idx.dtype!r}"
    if len(x.src) == 3 and x.src[2].dtype.scalar() is not dtypes.bool:
        return f"INDEX's gate must be bool, got {x.src[2].dtype!r}"
    return True if x.dtype is ptr.dtype else "INDEX has its pointer's dtype"


def check_load(ld: UOp) -> Verdict:
    index = ld.src[0] if ld.src else None
    if index is None or index.op is not Ops.INDEX:
        return "LOAD reads through an INDEX"
    gated = len(index.src) == 3
    if gated and len(ld.src) < 2:
        return "a gated LOAD carries its fallback value (the value where the gate is false)"
    if gated and ld.src[1].dtype is not ld.dtype:
        return f"a gated LOAD's fallback has its dtype {ld.dtype!r}, not {ld.src[1].dtype!r}"
    base: DType = index.dtype.base if isinstance(index.dtype, PtrDType) else index.dtype
    return True if ld.dtype.scalar() is base.scalar() else f"LOAD through a pointer to {base!r} gives {ld.dtype!r}"


def check_reduce(r: UOp) -> Verdict:
    if r.arg not in (Ops.ADD, Ops.MUL, Ops.MAX):
        return f"REDUCE's arg is ADD, MUL or MAX, got {r.arg!r}"
    if not r.src or any(s.op not in (Ops.RANGE, Ops.UNROLL) for s in r.src[1:]):
        return "REDUCE takes a value and the RANGEs (and UNROLL lanes) it reduces over"
    return True if r.dtype is r.src[0].dtype else "REDUCE keeps its value's dtype"


def check_end(e: UOp) -> Verdict:
    if len(e.src) < 2 or any(s.op is not Ops.RANGE for s in e.src[1:]):
        return "END takes what the loop computes and the RANGEs it closes"
    return True


def check_unroll(u: UOp) -> Verdict:
    if len(u.src) != 1 or u.src[0].op is not Ops.CONST or u.dtype is not dtypes.index or not isinstance(u.arg, int):
        return "UNROLL is an index lane over [0, n): one CONST source n, an int axis as arg"
    return True


def check_special(s: UOp) -> Verdict:
    if len(s.src) != 1 or not isinstance(s.arg, str) or not dtypes.is_int(s.dtype):
        return "SPECIAL is an integer hardware index named by its arg, with its size as the source"
    return True


def check_if(i: UOp) -> Verdict:
    if not i.src or i.src[0].dtype is not dtypes.bool or i.src[0].dtype.count != 1:
        return "IF takes a scalar bool condition"
    return True


kernel_spec = shared_spec + PatternMatcher(
    [
        (UPat(Ops.DEFINE_GLOBAL, name="d"), _pointer(AddrSpace.GLOBAL), "DEFINE_GLOBAL"),
        (UPat(Ops.DEFINE_LOCAL, name="d"), _pointer(AddrSpace.LOCAL), "DEFINE_LOCAL"),
        # the work-items of a group wait for each other's local-memory writes (a GROUP opt)
        (UPat(Ops.BARRIER, dtypes.void), lambda: True, "BARRIER"),
        (UPat(Ops.DEFINE_REG, name="d"), _pointer(AddrSpace.REG), "DEFINE_REG"),
        (UPat(Ops.RANGE, name="r"), check_range, "RANGE"),
        (UPat(Ops.SPECIAL, name="s"), check_special, "SPECIAL"),
        (UPat(Ops.UNROLL, name="u"), check_unroll, "UNROLL"),
        (UPat(Ops.INDEX, name="x"), check_index, "INDEX"),
        (UPat(Ops.LOAD, name="ld"), check_load, "LOAD"),
        (UPat(Ops.REDUCE, name="r"), check_reduce, "REDUCE"),
        (UPat(Ops.END, name="e"), check_end, "END"),
        (UPat(Ops.VECTORIZE, name="v"), check_vectorize, "VECTORIZE"),
        (UPat(Ops.GEP, name="g"), check_gep, "GEP"),
        (UPat(Ops.WMMA, name="w"), check_wmma, "WMMA"),
        # a conditional block: made by the codegen passes (a rare WHERE, a gated STORE)
        (UPat(Ops.IF, dtypes.void, name="i"), check_if, "IF"),
        (UPat(Ops.ENDIF, dtypes.void, src=(UPat(Ops.IF), UPat(Ops.STORE))), lambda: True, "ENDIF"),
    ]
)


def check_linear_store(st: UOp) -> Verdict | None:
    """In the linear program a gated STORE has been lowered to IF/STORE/ENDIF."""
    if st.src and st.src[0].op is Ops.INDEX and len(st.src[0].src) == 3:
        return "a gated STORE must be lowered to IF/STORE/ENDIF before the program is linear"
    return None  # the shared unified STORE rule decides


program_spec = (
    PatternMatcher(
        [
            (UPat(Ops.STORE, name="st"), check_linear_store, "no gated STORE"),
            (UPat(Ops.REDUCE), lambda: "REDUCE is lowered to a DEFINE_REG accumulator before the program is linear"),
            (UPat(Ops.BARRIER, dtypes.void), lambda: True, "BARRIER"),
        ]
    )
    + kernel_spec
)


def _rejection(node: UOp, verdict: Verdict | None, stage: str) -> SpecError:
    if isinstance(verdict, str):
        reason = verdict
    elif verdict is None:
        reason = f"{node.op.name} is not legal in the {stage}"
    else:
        reason = f"malformed {node.op.name} (dtype {node.dtype!r}, sources {_dtypes(node)})"
    return SpecError(f"{stage}: {reason}\n  at {short_repr(node)}")


def verify(root: UOp | Sequence[UOp], spec: PatternMatcher, stage: str) -> None:
    """Raise SpecError at the first node of `root` (a graph, or a linear program as a list) that `spec`
    does not accept, saying why."""
    nodes = root.toposort() if isinstance(root, UOp) else list(root)
    for node in nodes:
        if (verdict := spec.rewrite(node)) is not True:
            raise _rejection(node, verdict, stage)


def check_on_build(u: UOp) -> None:
    """With SPEC=1 every new UOp is checked as it is built, against the rules every stage shares (a STORE's
    form, ALU dtypes, constants, casts): a malformed node fails where it is made, not passes later. A node
    those rules do not cover is left to the stage specs."""
    if (verdict := shared_spec.rewrite(u)) not in (None, True):
        raise _rejection(u, verdict, "built")
