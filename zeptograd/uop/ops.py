"""The IR: `Ops`, the op vocabulary, and `UOp`, the one node type from the tensor graph to the program.

A UOp is `(op, dtype, src, arg)`: immutable and hash-consed, so building the same node twice returns the
same object and structural equality is identity. Operators on UOps build graphs (symbolic math):

>>> x = UOp.variable("x", 0, 10)
>>> e = (x * 4 + 3) // 4
>>> e.vmin, e.vmax
(0, 10)
>>> e.simplify() is x
True

There is no ASSIGN op: STORE covers memory writes (`STORE(INDEX(ptr, idx), value)`, dtype void) and
assignment (`STORE(target, value)`, dtype of the target); see docs/internals.md.
"""

from __future__ import annotations

import functools
import hashlib
import math
import weakref
from collections.abc import Callable, Iterable, Mapping
from enum import Enum, auto
from typing import Any, TypeAlias

from zeptograd.dtype import ConstType, DType, dtypes, truncate
from zeptograd.helpers import SPEC


class Ops(Enum):
    """Every op of the IR, grouped by the stage that introduces it."""

    # tensor graph: buffers, views, and what ends or crosses kernels
    BUFFER = auto()
    BUFFER_VIEW = auto()
    RESHAPE = auto()
    PERMUTE = auto()
    EXPAND = auto()
    PAD = auto()
    SHRINK = auto()
    FLIP = auto()
    REDUCE_AXIS = auto()
    CONTIGUOUS = auto()
    DETACH = auto()
    CUSTOM_GRAD = auto()  # (value, *inputs): value, with the gradient registered as arg (gradient.py)
    COPY = auto()
    # definitions: kernel arguments, registers, variables, hardware indices
    DEFINE_GLOBAL = auto()
    DEFINE_LOCAL = auto()
    DEFINE_REG = auto()
    DEFINE_VAR = auto()
    SPECIAL = auto()
    # structure and ordering
    SINK = auto()
    GROUP = auto()
    AFTER = auto()
    BARRIER = auto()
    RANGE = auto()
    UNROLL = auto()  # (size,), arg axis: a lane index over [0, size); `expand` makes what depends on it a vector
    END = auto()
    REDUCE = auto()
    IF = auto()
    ENDIF = auto()
    # memory
    INDEX = auto()
    LOAD = auto()
    STORE = auto()
    # values, vectors and types
    CONST = auto()
    VECTORIZE = auto()
    GEP = auto()
    CAST = auto()
    BITCAST = auto()
    # unary ALU
    EXP2 = auto()
    EXP = auto()  # e**x: one op, so that exp's exact range reduction is the compiler's (transcendental.py)
    TANH = auto()  # one op for the same reason: its float32 polynomial and exp are the compiler's
    LOG2 = auto()
    SIN = auto()
    COS = auto()  # sin's reduction and cos's quadrant: one op, so that a cos costs what a sin does to build
    TAN = auto()  # sin's reduction and a tan polynomial (transcendental.py)
    SQRT = auto()
    RECIPROCAL = auto()
    NEG = auto()
    TRUNC = auto()
    # binary ALU
    ADD = auto()
    SUB = auto()
    MUL = auto()
    IDIV = auto()
    FDIV = auto()
    MOD = auto()
    MAX = auto()
    CMPLT = auto()
    CMPNE = auto()
    CMPEQ = auto()
    AND = auto()
    OR = auto()
    XOR = auto()
    SHL = auto()
    SHR = auto()
    # ternary ALU
    WHERE = auto()
    MULACC = auto()
    # tensor cores
    WMMA = auto()

    def __repr__(self) -> str:
        return f"Ops.{self.name}"

    # members are singletons: hash by identity, in C (Enum's own __hash__ is Python code, on every lookup)
    __hash__ = object.__hash__


class GroupOp:
    """Sets of ops that rules and checks talk about together."""

    Unary = frozenset(
        {Ops.EXP2, Ops.EXP, Ops.TANH, Ops.LOG2, Ops.SIN, Ops.COS, Ops.TAN, Ops.SQRT, Ops.RECIPROCAL, Ops.NEG, Ops.TRUNC}
    )
    Binary = frozenset(
        {Ops.ADD, Ops.SUB, Ops.MUL, Ops.IDIV, Ops.FDIV, Ops.MOD, Ops.MAX, Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ}
        | {Ops.AND, Ops.OR, Ops.XOR, Ops.SHL, Ops.SHR}
    )
    Ternary = frozenset({Ops.WHERE, Ops.MULACC})
    ALU = Unary | Binary | Ternary
    Commutative = frozenset({Ops.ADD, Ops.MUL, Ops.MAX, Ops.CMPNE, Ops.CMPEQ, Ops.AND, Ops.OR, Ops.XOR})
    Associative = frozenset({Ops.ADD, Ops.MUL, Ops.AND, Ops.OR, Ops.MAX})
    Idempotent = frozenset({Ops.AND, Ops.OR, Ops.MAX})  # x op x -> x
    Comparison = frozenset({Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ})
    FloatOnly = frozenset(
        {Ops.EXP2, Ops.EXP, Ops.TANH, Ops.LOG2, Ops.SIN, Ops.COS, Ops.TAN, Ops.SQRT, Ops.RECIPROCAL, Ops.FDIV}
    )
    IntOnly = frozenset({Ops.IDIV, Ops.MOD, Ops.SHL, Ops.SHR})
    Bitwise = frozenset({Ops.AND, Ops.OR, Ops.XOR, Ops.SHL, Ops.SHR})
    Movement = frozenset({Ops.RESHAPE, Ops.PERMUTE, Ops.EXPAND, Ops.PAD, Ops.SHRINK, Ops.FLIP})
    Buffer = frozenset({Ops.BUFFER, Ops.BUFFER_VIEW})
    Defines = frozenset({Ops.DEFINE_GLOBAL, Ops.DEFINE_LOCAL, Ops.DEFINE_REG, Ops.DEFINE_VAR})
    # what a STORE may assign as a whole (the non-INDEX form of the unified STORE)
    AssignTarget = frozenset({Ops.BUFFER, Ops.DEFINE_GLOBAL, Ops.DEFINE_REG, Ops.DEFINE_VAR})
    All = frozenset(Ops)


ARITY: dict[Ops, int] = {
    **dict.fromkeys(GroupOp.Unary, 1),
    **dict.fromkeys(GroupOp.Binary, 2),
    **dict.fromkeys(GroupOp.Ternary, 3),
}


class MathMixin:
    """Operators that build graphs. UOp builds nodes with them, UPat builds patterns with the same
    spelling, so a rule reads like the algebra it matches (`UPat.var("x") + 0`)."""

    __slots__ = ()

    def alu(self, op: Ops, *src: Any) -> Any:
        raise NotImplementedError

    def const_like(self, b: ConstType) -> Any:
        raise NotImplementedError

    def _operand(self, x: Any) -> Any:
        return x if isinstance(x, MathMixin) else self.const_like(x)

    def _binop(self, op: Ops, x: Any, reverse: bool = False) -> Any:
        x = self._operand(x)
        return x.alu(op, self) if reverse else self.alu(op, x)

    def _kind(self) -> str:
        """'bool', 'float', 'index' or 'int': what the operators below need to know of the dtype (a
        pattern does not know it, and is written for index math)."""
        return "index"

    def _is_bool(self) -> bool:
        return self._kind() == "bool"

    def __add__(self, x: Any) -> Any:
        return self._binop(Ops.ADD, x)

    def __radd__(self, x: Any) -> Any:
        return self._binop(Ops.ADD, x, reverse=True)

    def __mul__(self, x: Any) -> Any:
        return self._binop(Ops.MUL, x)

    def __rmul__(self, x: Any) -> Any:
        return self._binop(Ops.MUL, x, reverse=True)

    def neg(self) -> Any:
        """`-x`, written `x * -1` so that sums and products are the only arithmetic the rules see."""
        return self.logical_not() if self._is_bool() else self * -1

    def __neg__(self) -> Any:
        return self.neg()

    def __sub__(self, x: Any) -> Any:
        return self + (-self._operand(x))

    def __rsub__(self, x: Any) -> Any:
        return self._operand(x) + (-self)

    def __floordiv__(self, x: Any) -> Any:
        return self._binop(Ops.IDIV, x)

    def __rfloordiv__(self, x: Any) -> Any:
        return self._binop(Ops.IDIV, x, reverse=True)

    def __mod__(self, x: Any) -> Any:
        return self._binop(Ops.MOD, x)

    def __rmod__(self, x: Any) -> Any:
        return self._binop(Ops.MOD, x, reverse=True)

    def __and__(self, x: Any) -> Any:
        return self._binop(Ops.AND, x)

    def __rand__(self, x: Any) -> Any:
        return self._binop(Ops.AND, x, reverse=True)

    def __or__(self, x: Any) -> Any:
        return self._binop(Ops.OR, x)

    def __ror__(self, x: Any) -> Any:
        return self._binop(Ops.OR, x, reverse=True)

    def __xor__(self, x: Any) -> Any:
        return self._binop(Ops.XOR, x)

    def __rxor__(self, x: Any) -> Any:
        return self._binop(Ops.XOR, x, reverse=True)

    def __lshift__(self, x: Any) -> Any:
        return self._binop(Ops.SHL, x)

    def __rlshift__(self, x: Any) -> Any:
        return self._binop(Ops.SHL, x, reverse=True)

    def __rshift__(self, x: Any) -> Any:
        return self._binop(Ops.SHR, x)

    def __rrshift__(self, x: Any) -> Any:
        return self._binop(Ops.SHR, x, reverse=True)

    def __lt__(self, x: Any) -> Any:
        return self._binop(Ops.CMPLT, x)

    def __gt__(self, x: Any) -> Any:
        return self._binop(Ops.CMPLT, x, reverse=True)

    def __le__(self, x: Any) -> Any:
        if self._kind() == "float":
            return self._binop(Ops.CMPLT, x) | self._binop(Ops.CMPEQ, x)  # NaN <= y is False
        return self._binop(Ops.CMPLT, x, reverse=True).logical_not()  # a <= b is not (b < a)

    def __ge__(self, x: Any) -> Any:
        if self._kind() == "float":
            return self._binop(Ops.CMPLT, x, reverse=True) | self._binop(Ops.CMPEQ, x)
        return self._binop(Ops.CMPLT, x).logical_not()

    def lt(self, x: Any) -> Any:
        return self._binop(Ops.CMPLT, x)

    def ne(self, x: Any) -> Any:
        """`self != x` as a graph node (CMPNE)."""
        return self._binop(Ops.CMPNE, x)

    def eq(self, x: Any) -> Any:
        """`self == x` as a graph node (CMPEQ)."""
        return self._binop(Ops.CMPEQ, x)

    def logical_not(self) -> Any:
        """`not x` for a bool, written `x != True`."""
        return self.ne(True)

    def maximum(self, x: Any) -> Any:
        return self._binop(Ops.MAX, x)

    def minimum(self, x: Any) -> Any:
        if self._kind() in ("index", "float"):
            # min(a, b) = -max(-a, -b) keeps MAX the only min/max op the rules need to know
            return -((-self).maximum(-self._operand(x)))
        return self.lt(x).where(self, x)  # fixed-width ints wrap: -INT_MIN is INT_MIN, so no negation here

    def where(self, x: Any, y: Any) -> Any:
        """`x if self else y`, elementwise (WHERE); Python scalars take the dtype of the other branch."""
        if isinstance(x, MathMixin):
            y = x._operand(y)
        elif isinstance(y, MathMixin):
            x = y._operand(x)
        elif isinstance(x, bool) and isinstance(y, bool):
            x, y = self.const_like(x), self.const_like(y)  # the condition is a bool: so are the branches
        else:
            raise TypeError("where needs a branch that is a graph node to take its dtype from, got two Python values")
        return self.alu(Ops.WHERE, x, y)

    def exp2(self) -> Any:
        return self.alu(Ops.EXP2)

    def log2(self) -> Any:
        return self.alu(Ops.LOG2)

    def sin(self) -> Any:
        return self.alu(Ops.SIN)

    def cos(self) -> Any:
        return self.alu(Ops.COS)

    def tan(self) -> Any:
        return self.alu(Ops.TAN)

    def sqrt(self) -> Any:
        return self.alu(Ops.SQRT)

    def reciprocal(self) -> Any:
        return self.alu(Ops.RECIPROCAL)

    def trunc(self) -> Any:
        return self.alu(Ops.TRUNC)


sint: TypeAlias = "int | UOp"
"""A size or index that is either known (`int`) or symbolic (`UOp`)."""


# hash-consing: ((id(op), dtype, arg key), ids of the sources) -> a weak reference to the live node. A plain dict of
# weak references (not a WeakValueDictionary, whose get and set cost a few times more): building nodes is the hot
# path of every tensor op
_interned: dict[tuple, _InternRef] = {}


@functools.cache
def _compute_shape() -> Callable[[UOp], tuple[int, ...]]:
    # uop/shape.py imports this module: import it on first use, once (an import statement costs on every call)
    from zeptograd.uop.shape import compute_shape

    return compute_shape


class _InternRef(weakref.ref):
    """The weak reference `_interned` holds to a node, with the node's key: one callback serves every node (a
    closure a node cost twice as much to make and to run)."""

    __slots__ = ("key",)
    key: tuple


def _forget(ref: _InternRef) -> None:
    # the entry may already hold a newer node built with the same key after this one died
    if _interned.get(ref.key) is ref:
        del _interned[ref.key]


# leaf_bits' width: a Python int of 1024 bits ANDs in about 50 ns, and a graph reading a few hundred buffers (a
# model's weights) still leaves most bits clear
LEAF_BITS = 1024


class UOp(MathMixin):
    """One node of the IR. Build nodes with `UOp(op, dtype, src, arg)` or the helpers below.

    >>> a = UOp.const(dtypes.index, 3)
    >>> a is UOp(Ops.CONST, dtypes.index, (), 3)
    True
    """

    __slots__ = ("op", "dtype", "src", "arg", "_local", "_vrange", "_okey", "_shape", "_leaves", "__weakref__")
    op: Ops
    dtype: DType
    src: tuple[UOp, ...]
    arg: Any
    _vrange: tuple[Any, Any] | None
    _okey: tuple | None
    _local: tuple  # (id(op), dtype, the arg as hash-consing sees it): the node's own part of its key
    _shape: tuple[int, ...] | None
    _leaves: int | None

    def __new__(cls, op: Ops, dtype: DType = dtypes.void, src: tuple[UOp, ...] = (), arg: Any = None) -> UOp:
        if type(op) is not Ops:
            raise TypeError(f"unknown op {op!r}: a UOp's op must be a member of Ops")
        if type(src) is not tuple:
            if not isinstance(src, (list, tuple)):
                raise TypeError(f"UOp({op!r}): src must be a tuple of UOps, got {type(src).__name__}")
            src = tuple(src)
        # the arg as part of the key: 1, 1.0 and True are equal in Python, and so are 0.0 and -0.0, but as args they
        # are different constants
        t = type(arg)
        if t is float:
            akey: Any = (t, arg, math.copysign(1.0, arg))
        elif t is int or t is bool:
            akey = (t, arg)
        else:
            akey = arg
        local = (id(op), dtype, akey)  # the node's own part of its key (UOp._local; the schedule cache keys by it)
        key = (local, tuple(map(id, src)))
        try:
            ref = _interned.get(key)
        except TypeError:
            raise TypeError(f"UOp({op!r}): arg must be hashable, got {type(arg).__name__}: {arg!r}") from None
        # a hit needs no checks: the key holds the ids of live sources, so it was checked when it was built
        if ref is not None and (ret := ref()) is not None:
            return ret
        if not isinstance(dtype, DType):
            raise TypeError(f"UOp({op!r}): dtype must be a DType, got {type(dtype).__name__}: {dtype!r}")
        for i, s in enumerate(src):
            if type(s) is not UOp:
                raise TypeError(f"UOp({op!r}): src[{i}] must be a UOp, got {type(s).__name__}: {s!r}")
        if (arity := ARITY.get(op)) is not None and len(src) != arity:
            raise ValueError(f"UOp({op!r}) takes {arity} source(s), got {len(src)}")
        ret = object.__new__(cls)
        # the slots' own setters (UOp.__setattr__ refuses): 0.3 us a node less than object.__setattr__
        _set_op(ret, op)
        _set_dtype(ret, dtype)
        _set_src(ret, src)
        _set_arg(ret, arg)
        _set_local(ret, local)
        _set_vrange(ret, None)
        _set_okey(ret, None)
        _set_shape(ret, None)
        _set_leaves(ret, None)
        if SPEC.value:
            from zeptograd.uop.spec import check_on_build

            check_on_build(ret)
        ref = _InternRef(ret, _forget)
        ref.key = key
        _interned[key] = ref
        return ret

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"UOp is immutable (tried to set {name!r}); use replace()")

    def __reduce__(self) -> tuple:
        return (UOp, (self.op, self.dtype, self.src, self.arg))

    # identity is structural equality (hash-consing), so UOps hash by identity and == can build CMPEQ
    __hash__ = object.__hash__

    def __eq__(self, x: Any) -> UOp:  # type: ignore[override]
        return self.eq(x)

    def __ne__(self, x: Any) -> UOp:  # type: ignore[override]
        return self.ne(x)

    def __bool__(self) -> bool:
        v = self.simplify()
        if v.op is Ops.CONST:
            return bool(v.arg)
        if (dtypes.is_int(v.dtype) or dtypes.is_bool(v.dtype)) and v.vmin == v.vmax:
            return bool(v.vmin)
        raise TypeError(
            f"the truth value of the symbolic {self!r} is not known; compare UOps with `is`, or check .vmin/.vmax"
        )

    # *** construction helpers ***

    @staticmethod
    def const(dtype: DType, value: ConstType) -> UOp:
        """A constant of `dtype` (a vector dtype broadcasts the value), wrapped or rounded to the dtype.

        >>> UOp.const(dtypes.uint8, 257).arg
        1
        """
        if not isinstance(value, (bool, int, float)):
            raise TypeError(f"a constant must be a bool, int or float, got {type(value).__name__}: {value!r}")
        if isinstance(value, float) and not isinstance(value, bool) and not dtypes.is_float(dtype):
            if not value.is_integer():
                raise TypeError(f"the float {value!r} is not a constant of the integer dtype {dtype!r}")
            value = int(value)
        return UOp(Ops.CONST, dtype, (), truncate(value, dtype))

    def const_like(self, b: ConstType) -> UOp:
        return UOp.const(self.dtype, b)

    def _kind(self) -> str:
        dt = self.dtype
        if dtypes.is_bool(dt):
            return "bool"
        if dtypes.is_float(dt):
            return "float"
        return "index" if dt.scalar() is dtypes.index else "int"

    @staticmethod
    def variable(name: str, min_val: int, max_val: int, dtype: DType = dtypes.index) -> UOp:
        """A symbolic integer in [min_val, max_val] (DEFINE_VAR).

        >>> UOp.variable("n", 1, 8).vmax
        8
        """
        if not isinstance(name, str) or not name:
            raise TypeError(f"a variable's name must be a non-empty str, got {name!r}")
        for bound in (min_val, max_val):
            if not isinstance(bound, int) or isinstance(bound, bool):
                raise TypeError(f"variable {name!r}: bounds must be ints, got {bound!r}")
        if min_val > max_val:
            raise ValueError(f"variable {name!r}: min {min_val} is greater than max {max_val}")
        return UOp(Ops.DEFINE_VAR, dtype, (), (name, min_val, max_val))

    def bind(self, value: int) -> UOp:
        """This variable bound to `value`: `STORE(DEFINE_VAR, CONST)`, an assignment of the variable. Shapes and
        kernels see the variable (its range, never the value); the value is passed when a kernel runs.

        >>> n = UOp.variable("n", 1, 8).bind(3)
        >>> n.unbind()[1], n.vmax
        (3, 8)
        """
        if self.op is not Ops.DEFINE_VAR:
            raise TypeError(f"bind: only a variable (DEFINE_VAR) can be bound, not a {self.op.name}")
        name, lo, hi = self.arg
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"bind: variable {name!r} takes an int, got {value!r}")
        if not lo <= value <= hi:
            raise ValueError(f"bind: {value} is outside the range [{lo}, {hi}] of variable {name!r}")
        return UOp(Ops.STORE, self.dtype, (self, UOp.const(self.dtype, value)))

    def unbind(self) -> tuple[UOp, int]:
        """(the variable, its value) of a bound variable.

        >>> v = UOp.variable("n", 0, 4)
        >>> v.bind(2).unbind() == (v, 2)
        True
        """
        if not is_bound_variable(self):
            raise TypeError(f"unbind: {self.op.name} is not a bound variable (made by Variable(...).bind(value))")
        return self.src[0], self.src[1].arg

    @staticmethod
    def range(end: sint, axis: int, dtype: DType = dtypes.index) -> UOp:
        """A loop index over [0, end) (RANGE); `axis` tells loops apart."""
        end_uop = end if isinstance(end, UOp) else UOp.const(dtype, end)
        return UOp(Ops.RANGE, dtype, (end_uop,), axis)

    def alu(self, op: Ops, *src: Any) -> UOp:
        """`op` applied to self and `src`; the operands must have self's dtype (no implicit promotion)."""
        operands = (self,) + tuple(s if isinstance(s, UOp) else self.const_like(s) for s in src)
        if op is Ops.WHERE:
            if operands[1].dtype is not operands[2].dtype:
                raise TypeError(f"WHERE branches differ in dtype: {operands[1].dtype!r} and {operands[2].dtype!r}")
            return UOp(op, operands[1].dtype, operands)
        for o in operands[1:]:
            if o.dtype is not self.dtype:
                raise TypeError(f"{op.name} of {self.dtype!r} and {o.dtype!r}: cast one operand first")
        out = dtypes.bool.vec(self.dtype.count) if op in GroupOp.Comparison else self.dtype
        return UOp(op, out, operands)

    def cast(self, dtype: DType) -> UOp:
        """The value converted to `dtype` (CAST); a cast to its own dtype is the value itself."""
        return self if dtype is self.dtype else UOp(Ops.CAST, dtype, (self,))

    def bitcast(self, dtype: DType) -> UOp:
        """The same bits read as `dtype` (BITCAST); the sizes must match."""
        if dtype.itemsize != self.dtype.itemsize:
            sizes = f"{self.dtype.itemsize} != {dtype.itemsize} bytes"
            raise ValueError(f"bitcast from {self.dtype!r} to {dtype!r}: the sizes differ ({sizes})")
        return self if dtype is self.dtype else UOp(Ops.BITCAST, dtype, (self,))

    def sink(self, *srcs: UOp) -> UOp:
        return UOp(Ops.SINK, dtypes.void, (self,) + srcs)

    def index(self, idx: UOp, gate: UOp | None = None) -> UOp:
        """The address `self[idx]` (INDEX), optionally gated; its dtype is self's pointer dtype."""
        return UOp(Ops.INDEX, self.dtype, (self, idx) if gate is None else (self, idx, gate))

    def load(self, *src: UOp, dtype: DType | None = None) -> UOp:
        """A read through this address (LOAD); a gated INDEX's load takes its fallback value in `src`."""
        base = dtype if dtype is not None else getattr(self.dtype, "base", self.dtype)
        return UOp(Ops.LOAD, base, (self,) + src)

    def store(self, value: UOp) -> UOp:
        """The unified STORE: through an INDEX a memory write (dtype void); to a BUFFER, DEFINE_GLOBAL,
        DEFINE_REG or DEFINE_VAR an assignment of the whole target (dtype of the target).

        >>> acc = UOp(Ops.DEFINE_VAR, dtypes.int32, (), ("acc", 0, 9))
        >>> acc.store(acc.const_like(1)).dtype
        dtypes.int32
        """
        if not isinstance(value, UOp):
            raise TypeError(f"STORE value must be a UOp, got {type(value).__name__}")
        if self.op is Ops.INDEX:
            return UOp(Ops.STORE, dtypes.void, (self, value))
        if self.op in GroupOp.AssignTarget:
            return UOp(Ops.STORE, self.dtype, (self, value))
        raise ValueError(
            f"cannot STORE to a {self.op.name}: the target must be an INDEX (a memory write) or a "
            "BUFFER, DEFINE_GLOBAL, DEFINE_REG or DEFINE_VAR (an assignment)"
        )

    def gep(self, lane: int) -> UOp:
        """Lane `lane` of a vector (GEP); a scalar is its own only lane."""
        return self if self.dtype.count == 1 else UOp(Ops.GEP, self.dtype.scalar(), (self,), (lane,))

    def after(self, *deps: UOp) -> UOp:
        """This value, ordered after `deps` (AFTER)."""
        return UOp(Ops.AFTER, self.dtype, (self,) + deps)

    # *** graph operations ***

    def toposort(self, gate: Callable[[UOp], bool] | None = None) -> list[UOp]:
        """Every node of the graph, each after its sources; iterative, so depth is unbounded.
        `gate(node)` False stops the walk at that node (it is neither listed nor entered)."""
        seen: set[UOp] = set()
        order: list[UOp] = []
        stack: list[tuple[UOp, bool]] = [(self, False)]
        while stack:
            node, expanded = stack.pop()
            if expanded:
                order.append(node)
                continue
            if node in seen:
                continue
            if gate is not None and not gate(node):
                continue
            seen.add(node)
            stack.append((node, True))
            for s in reversed(node.src):
                if s not in seen:
                    stack.append((s, False))
        return order

    def leaf_bits(self) -> int:
        """The BUFFER nodes of this node's graph as a set of bits, each buffer one of LEAF_BITS bits (several may
        share one): a graph that holds another holds every bit of the other's, so a graph whose bits miss one of
        a node's cannot hold that node (realize skips the lazy tensors that cannot hold what it computed). A graph
        with no buffer has none. Computed once a node.

        >>> b = UOp(Ops.BUFFER, dtypes.float32, (), (0, "CPU", 4))
        >>> (b + b).leaf_bits() == b.leaf_bits() != 0, UOp.const(dtypes.float32, 1.0).leaf_bits()
        (True, 0)
        """
        if self._leaves is None:
            for node in self.toposort(gate=lambda n: n._leaves is None):
                if node.op is Ops.BUFFER:
                    _set_leaves(node, 1 << (hash(node) % LEAF_BITS))
                else:
                    bits = 0
                    for s in node.src:
                        bits |= s._leaves  # type: ignore[operator]  # sources come first in the toposort
                    _set_leaves(node, bits)
        assert self._leaves is not None
        return self._leaves

    def replace(self, **fields: Any) -> UOp:
        """A node like this one with some of op, dtype, src, arg changed."""
        unknown = set(fields) - {"op", "dtype", "src", "arg"}
        if unknown:
            raise TypeError(f"replace() got unknown field(s) {sorted(unknown)}; the fields are op, dtype, src, arg")
        op, dtype = fields.get("op", self.op), fields.get("dtype", self.dtype)
        return UOp(op, dtype, fields.get("src", self.src), fields.get("arg", self.arg))

    def substitute(self, mapping: Mapping[UOp, UOp], cache: dict[UOp, UOp] | None = None) -> UOp:
        """The graph with every occurrence of a key of `mapping` replaced by its value (not re-entered).
        `cache` carries the rebuilt nodes from one call to the next, when several graphs that share
        subgraphs get the same mapping.

        >>> x, y = UOp.variable("x", 0, 3), UOp.variable("y", 0, 3)
        >>> (x + 1).substitute({x: y}) is y + 1
        True
        """
        done: dict[UOp, UOp] = {} if cache is None else cache
        for node in self.toposort(gate=lambda n: n not in mapping and n not in done):
            new_src = tuple(mapping[s] if s in mapping else done.get(s, s) for s in node.src)
            same = all(a is b for a, b in zip(new_src, node.src))
            done[node] = node if same else node.replace(src=new_src)
        return mapping[self] if self in mapping else done[self]

    def simplify(self) -> UOp:
        """The expression rewritten by the symbolic rules (constant folding, identities, div/mod folding)."""
        from zeptograd.uop.rewrite import graph_rewrite
        from zeptograd.uop.symbolic import symbolic

        return graph_rewrite(self, symbolic, name="simplify")

    # *** value ranges ***

    @property
    def vmin(self) -> Any:
        """The smallest value this node can take (exact for constants, an interval bound otherwise)."""
        return self._min_max[0]

    @property
    def vmax(self) -> Any:
        """The largest value this node can take."""
        return self._min_max[1]

    @property
    def _min_max(self) -> tuple[Any, Any]:
        if self._vrange is None:
            from zeptograd.uop.ranges import compute_range

            if all(s._vrange is not None for s in self.src):
                object.__setattr__(self, "_vrange", compute_range(self))  # the common case: no walk needed
            else:
                for node in self.toposort(gate=lambda n: n._vrange is None):
                    object.__setattr__(node, "_vrange", compute_range(node))
        assert self._vrange is not None
        return self._vrange

    # *** tensor-graph shapes ***

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape of a tensor-graph node, from its op, arg and sources (see `uop/shape.py`).

        >>> buf = UOp(Ops.BUFFER, dtypes.float32, (), (0, "CPU", 6))
        >>> buf.shape, UOp(Ops.RESHAPE, dtypes.float32, (buf,), (2, 3)).shape
        ((6,), (2, 3))
        """
        if (shape := self._shape) is not None:
            return shape
        compute_shape = _compute_shape()
        for s in self.src:
            if s._shape is None:
                # a source built without its shape (a node made with UOp(...), then viewed): one level needs no walk
                if any(t._shape is None for t in s.src):
                    for node in self.toposort(gate=lambda n: n._shape is None):
                        _set_shape(node, compute_shape(node))
                    assert self._shape is not None
                    return self._shape
                _set_shape(s, compute_shape(s))
        shape = compute_shape(self)
        _set_shape(self, shape)
        return shape

    # *** an order for canonical forms ***

    @property
    def order_key(self) -> tuple:
        """A deterministic sort key: op, then arg, then a structural digest (never object identity)."""
        if self._okey is None:
            for node in self.toposort(gate=lambda n: n._okey is None):
                # blake2b, not hash(): str hashes change from process to process, and so would the order
                h = hashlib.blake2b(f"{node.op.value}|{node.dtype!r}|{node.arg!r}".encode(), digest_size=8)
                for s in node.src:
                    h.update(s.order_key[2])
                object.__setattr__(node, "_okey", (node.op.value, repr(node.arg), h.digest()))
        assert self._okey is not None
        return self._okey

    # *** printing ***

    def render(self) -> str:
        """A readable listing of the graph, one node a line, sources by line number."""
        from zeptograd.uop.render import render_listing

        return render_listing(self)

    def pyrender(self) -> str:
        """Python source that rebuilds this graph: `eval` of it returns this very (hash-consed) node."""
        from zeptograd.uop.render import pyrender

        return pyrender(self)

    def __repr__(self) -> str:
        from zeptograd.uop.render import short_repr

        return short_repr(self)

    def __str__(self) -> str:
        from zeptograd.uop.render import render_expr

        return render_expr(self)


_set_op, _set_dtype, _set_src, _set_arg, _set_local, _set_vrange, _set_okey, _set_shape, _set_leaves = (
    UOp.__dict__[name].__set__
    for name in ("op", "dtype", "src", "arg", "_local", "_vrange", "_okey", "_shape", "_leaves")
)


def is_zero(u: UOp) -> bool:
    """Is `u` the constant 0 in every lane (a CONST, or a VECTORIZE of them)?

    >>> is_zero(UOp.const(dtypes.float32, 0.0)), is_zero(UOp.const(dtypes.int32, 1))
    (True, False)
    """
    if u.op is Ops.VECTORIZE:
        return all(is_zero(s) for s in u.src)
    return u.op is Ops.CONST and u.arg == 0


def smax(*args: sint) -> sint:
    """`max` over ints and UOps (a MAX node when any is symbolic)."""
    vals = list(args[0]) if len(args) == 1 and isinstance(args[0], Iterable) else list(args)
    if all(isinstance(v, int) for v in vals):
        return max(vals)
    ret = next(v for v in vals if isinstance(v, UOp))
    for v in vals:
        if v is not ret:
            ret = ret.maximum(v)
    return ret


def smin(*args: sint) -> sint:
    """`min` over ints and UOps (a MAX of negations when any is symbolic)."""
    vals = list(args[0]) if len(args) == 1 and isinstance(args[0], Iterable) else list(args)
    if all(isinstance(v, int) for v in vals):
        return min(vals)
    ret = next(v for v in vals if isinstance(v, UOp))
    for v in vals:
        if v is not ret:
            ret = ret.minimum(v)
    return ret


def is_bound_variable(u: UOp) -> bool:
    """Whether `u` is a variable bound to a value (`STORE(DEFINE_VAR, CONST)`, made by `UOp.bind`)."""
    return u.op is Ops.STORE and u.src[0].op is Ops.DEFINE_VAR and u.src[1].op is Ops.CONST


def Variable(name: str, min_val: int, max_val: int) -> UOp:
    """A symbolic integer named `name` in [min_val, max_val]: bound to a value (`.bind(n)`), it stands in slices
    (`cache[v:v + 1]`, a constant length from a symbolic start) and as a scalar (`Tensor(v)`). Every kernel that
    uses it is compiled once for the whole range and takes the value when it runs, the schedule is cached by the
    range, and a TinyJit capture given a bound variable as an argument replays for any value.

    >>> from zeptograd import Tensor
    >>> pos = Variable("pos", 0, 3)
    >>> x = Tensor([10, 11, 12, 13])
    >>> [x[pos.bind(i) : pos.bind(i) + 1].item() for i in range(4)]
    [10, 11, 12, 13]
    """
    return UOp.variable(name, min_val, max_val)
