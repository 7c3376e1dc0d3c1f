"""Scalar, vector and pointer dtypes, and the promotion rules of the front end.

DTypes are interned: building the same dtype twice returns the same object, so identity is equality and
hashing is cheap (every UOp's hash-consing key holds one).

>>> dtypes.float32.vec(4)
dtypes.float32.vec(4)
>>> dtypes.float32.ptr(12).base is dtypes.float32
True
>>> result_type(dtypes.float16, 2.0)
dtypes.float16
"""

from __future__ import annotations

import builtins
import math
import struct
from enum import Enum
from typing import Any, ClassVar, Final

import numpy as np

ConstType = bool | int | float
"""The Python type of a constant's value."""


class AddrSpace(Enum):
    """Where a pointer points: device memory, memory shared by a work group, or registers."""

    GLOBAL = 1
    LOCAL = 2
    REG = 3

    def __repr__(self) -> str:
        return f"AddrSpace.{self.name}"


class DType:
    """A scalar or vector element type. Vectors are `scalar.vec(n)`; pointers are `PtrDType`."""

    __slots__ = ("priority", "itemsize", "name", "fmt", "count", "_scalar", "__weakref__")
    _interned: ClassVar[dict[tuple, DType]] = {}
    priority: int
    itemsize: int
    name: str
    fmt: str | None
    count: int
    _scalar: DType | None

    def __new__(
        cls, priority: int, itemsize: int, name: str, fmt: str | None, count: int = 1, scalar: DType | None = None
    ) -> DType:
        key = (cls, priority, itemsize, name, fmt, count, scalar)
        if (ret := DType._interned.get(key)) is None:
            ret = object.__new__(cls)
            for field, value in zip(DType.__slots__[:6], (priority, itemsize, name, fmt, count, scalar)):
                object.__setattr__(ret, field, value)
            DType._interned[key] = ret
        return ret

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"DType is immutable (tried to set {name!r})")

    def __reduce__(self) -> tuple:
        return (DType, (self.priority, self.itemsize, self.name, self.fmt, self.count, self._scalar))

    def __repr__(self) -> str:
        if self.count > 1:
            return f"{self.scalar()!r}.vec({self.count})"
        return f"dtypes.{self.name}"

    def __lt__(self, other: DType) -> bool:
        # an order for sorting dtypes deterministically: by priority, then by shape
        return (self.priority, self.itemsize, self.name, self.count) < (
            other.priority,
            other.itemsize,
            other.name,
            other.count,
        )

    @property
    def vcount(self) -> int:
        return self.count

    @property
    def min(self) -> ConstType:
        """The smallest value of this dtype (`dtypes.min`: -inf for floats, as tinygrad).

        >>> dtypes.int32.min, dtypes.uint8.min, dtypes.float32.min
        (-2147483648, 0, -inf)
        """
        return dtypes.min(self)

    @property
    def max(self) -> ConstType:
        """The largest value of this dtype (`dtypes.max`: inf for floats, as tinygrad).

        >>> dtypes.int32.max, dtypes.uint8.max, dtypes.bool.max
        (2147483647, 255, True)
        """
        return dtypes.max(self)

    def scalar(self) -> DType:
        """The element type of a vector dtype (the dtype itself for a scalar)."""
        return self._scalar if self._scalar is not None else self

    def vec(self, count: int) -> DType:
        """The vector of `count` elements of this scalar dtype; `vec(1)` is the scalar itself.

        >>> dtypes.int32.vec(2).count
        2
        """
        if not isinstance(count, int) or count < 1:
            raise ValueError(f"vector width must be a positive int, got {count!r}")
        if self.count != 1:
            raise ValueError(f"cannot make a vector of the vector dtype {self!r}")
        if self is dtypes.void:
            raise ValueError("void has no vector form")
        if count == 1:
            return self
        return DType(self.priority, self.itemsize * count, f"{self.name}x{count}", None, count, self)

    def ptr(self, size: int = -1, addrspace: AddrSpace = AddrSpace.GLOBAL) -> PtrDType:
        """A pointer to this dtype in `addrspace`; `size` is the element count (-1 when unknown).

        >>> dtypes.float32.ptr(12, AddrSpace.REG).addrspace
        AddrSpace.REG
        """
        if not isinstance(size, int) or size < -1:
            raise ValueError(f"pointer size must be an int >= -1, got {size!r}")
        if not isinstance(addrspace, AddrSpace):
            raise TypeError(f"addrspace must be an AddrSpace, got {addrspace!r}")
        return PtrDType(self, addrspace, size)


class PtrDType(DType):
    """A pointer to `base` in an address space, with a known element count (`size`, -1 when unknown)."""

    __slots__ = ("_base", "addrspace", "size", "v")
    _base: DType
    addrspace: AddrSpace
    size: int
    v: int

    def __new__(cls, base: DType, addrspace: AddrSpace = AddrSpace.GLOBAL, size: int = -1, v: int = 1) -> PtrDType:
        key = (cls, base, addrspace, size, v)
        if (ret := DType._interned.get(key)) is None:
            ret = object.__new__(cls)
            values = (base.priority, 8, base.name, None, v, None, base, addrspace, size, v)
            for field, value in zip(DType.__slots__[:6] + PtrDType.__slots__, values):
                object.__setattr__(ret, field, value)
            DType._interned[key] = ret
        assert isinstance(ret, PtrDType)
        return ret

    def __reduce__(self) -> tuple:
        return (PtrDType, (self._base, self.addrspace, self.size, self.v))

    def __repr__(self) -> str:
        args = [str(self.size)] if self.size != -1 or self.addrspace is not AddrSpace.GLOBAL else []
        if self.addrspace is not AddrSpace.GLOBAL:
            args.append(repr(self.addrspace))
        ret = f"{self._base!r}.ptr({', '.join(args)})"
        return ret if self.v == 1 else f"{ret}.vec({self.v})"

    @property
    def base(self) -> DType:
        """The dtype the pointer points to."""
        return self._base

    def scalar(self) -> PtrDType:
        return self if self.v == 1 else PtrDType(self._base, self.addrspace, self.size)

    def vec(self, count: int) -> PtrDType:
        if not isinstance(count, int) or count < 1:
            raise ValueError(f"vector width must be a positive int, got {count!r}")
        if self.v != 1:
            raise ValueError(f"cannot make a vector of the vector pointer {self!r}")
        return self if count == 1 else PtrDType(self._base, self.addrspace, self.size, count)

    def ptr(self, size: int = -1, addrspace: AddrSpace = AddrSpace.GLOBAL) -> PtrDType:
        raise TypeError(f"cannot make a pointer to the pointer {self!r}")


def _scalar_dtype(priority: int, itemsize: int, name: str, fmt: str | None) -> DType:
    return DType(priority, itemsize, name, fmt)


class dtypes:
    """The dtype namespace: `dtypes.float32`, its aliases (`dtypes.float`, `dtypes.half`, ...) and queries."""

    void: Final = _scalar_dtype(-1, 0, "void", None)
    index: Final = _scalar_dtype(-1, 8, "index", None)
    bool: Final = _scalar_dtype(0, 1, "bool", "?")
    # the narrow ints: one value per byte (as ml_dtypes keeps them), computed in int32 and wrapped to their width
    int2: Final = _scalar_dtype(1, 1, "int2", None)
    uint2: Final = _scalar_dtype(2, 1, "uint2", None)
    int4: Final = _scalar_dtype(3, 1, "int4", None)
    uint4: Final = _scalar_dtype(4, 1, "uint4", None)
    int8: Final = _scalar_dtype(5, 1, "int8", "b")
    uint8: Final = _scalar_dtype(6, 1, "uint8", "B")
    int16: Final = _scalar_dtype(7, 2, "int16", "h")
    uint16: Final = _scalar_dtype(8, 2, "uint16", "H")
    int32: Final = _scalar_dtype(9, 4, "int32", "i")
    uint32: Final = _scalar_dtype(10, 4, "uint32", "I")
    int64: Final = _scalar_dtype(11, 8, "int64", "q")
    uint64: Final = _scalar_dtype(12, 8, "uint64", "Q")
    fp8e4m3: Final = _scalar_dtype(13, 1, "fp8e4m3", None)
    fp8e5m2: Final = _scalar_dtype(14, 1, "fp8e5m2", None)
    float16: Final = _scalar_dtype(15, 2, "float16", "e")
    bfloat16: Final = _scalar_dtype(16, 2, "bfloat16", None)
    float32: Final = _scalar_dtype(17, 4, "float32", "f")
    float64: Final = _scalar_dtype(18, 8, "float64", "d")

    # aliases, as numpy/PyTorch/tinygrad spell them
    half: Final = float16
    float: Final = float32
    double: Final = float64
    char: Final = int8
    uchar: Final = uint8
    short: Final = int16
    ushort: Final = uint16
    int: Final = int32
    uint: Final = uint32
    long: Final = int64
    ulong: Final = uint64
    float8_e4m3fn: Final = fp8e4m3
    float8_e5m2: Final = fp8e5m2

    default_float: ClassVar[DType] = float32
    default_int: ClassVar[DType] = int32

    floats: Final = (fp8e4m3, fp8e5m2, float16, bfloat16, float32, float64)
    uints: Final = (uint2, uint4, uint8, uint16, uint32, uint64)
    sints: Final = (int2, int4, int8, int16, int32, int64)
    ints: Final = uints + sints
    all: Final = (bool,) + ints + floats

    @staticmethod
    def is_float(dt: DType) -> builtins.bool:
        """True for the float dtypes (fp8e4m3, fp8e5m2, float16, bfloat16, float32, float64) and their vectors."""
        return (dt._scalar or dt) in _FLOAT_SET

    @staticmethod
    def is_int(dt: DType) -> builtins.bool:
        """True for the signed and unsigned integers, their vectors, and `index`."""
        return (dt._scalar or dt) in _INT_SET

    @staticmethod
    def is_unsigned(dt: DType) -> builtins.bool:
        return (dt._scalar or dt) in _UINT_SET

    @staticmethod
    def is_bool(dt: DType) -> builtins.bool:
        return (dt._scalar or dt) is dtypes.bool

    @staticmethod
    def min(dt: DType) -> ConstType:
        """The smallest value of a scalar dtype (-inf for floats, and for `index`, which is unbounded)."""
        dt = dt.scalar()
        if dt is dtypes.bool:
            return False
        if dt is dtypes.index:
            return -math.inf
        if dtypes.is_unsigned(dt):
            return 0
        if dtypes.is_int(dt):
            return -(2 ** (bit_width(dt) - 1))
        return -math.inf

    @staticmethod
    def max(dt: DType) -> ConstType:
        """The largest value of a scalar dtype."""
        dt = dt.scalar()
        if dt is dtypes.bool:
            return True
        if dt is dtypes.index:
            return math.inf
        if dtypes.is_unsigned(dt):
            return 2 ** bit_width(dt) - 1
        if dtypes.is_int(dt):
            return 2 ** (bit_width(dt) - 1) - 1
        return math.inf

    @staticmethod
    def from_py(x: Any) -> DType:
        """The dtype a Python value gets on its own: bool, `default_int` or `default_float`.

        >>> dtypes.from_py(3), dtypes.from_py(3.0), dtypes.from_py([True, 2])
        (dtypes.int32, dtypes.float32, dtypes.int32)
        """
        if isinstance(x, bool):
            return dtypes.bool
        if isinstance(x, int):
            return dtypes.default_int
        if isinstance(x, float):
            return dtypes.default_float
        if isinstance(x, (list, tuple)):
            if len(x) == 0:
                return dtypes.default_float
            return least_upper_dtype(*(dtypes.from_py(v) for v in x))
        raise TypeError(f"no dtype for a Python value of type {type(x).__name__}: {x!r}")

    @staticmethod
    def as_const(value: Any, dt: DType) -> Any:
        """`value` as a constant of `dt`: wrapped to the integer width, rounded to the float precision.

        >>> dtypes.as_const(300, dtypes.uint8), dtypes.as_const(0.1, dtypes.float16)
        (44, 0.0999755859375)
        """
        return truncate(value, dt)

    @staticmethod
    def fields() -> dict[str, DType]:
        """Every dtype name (aliases included) and its dtype."""
        return {k: v for k, v in vars(dtypes).items() if isinstance(v, DType) and not k.startswith("default")}


# sets for the hot is_* queries (the node-building and rewrite paths ask them constantly)
_FLOAT_SET = frozenset(dtypes.floats)
_INT_SET = frozenset((*dtypes.ints, dtypes.index))
_UINT_SET = frozenset(dtypes.uints)


def to_dtype(x: Any) -> DType:
    """A DType from a DType, a name (`'float32'`, `'float'`, `'int'`, `'half'`), a numpy dtype or scalar type
    (`np.float64`, `np.dtype('int16')`) or a torch dtype (`torch.int64`), so code written for any of the three
    can pass its own spelling.

    >>> to_dtype("int"), to_dtype(np.float64), to_dtype(np.dtype("uint8"))
    (dtypes.int32, dtypes.float64, dtypes.uint8)
    """
    if isinstance(x, DType):
        return x
    if isinstance(x, str):
        if (dt := dtypes.fields().get(x)) is None:
            raise TypeError(f"unknown dtype name {x!r}")
        return dt
    # a torch dtype prints as 'torch.float32'; checked by module name so torch is never imported here
    if type(x).__module__ == "torch" and type(x).__name__ == "dtype":
        name = str(x).removeprefix("torch.")
        if (dt := dtypes.fields().get(name)) is not None:
            return dt
        raise TypeError(f"no zeptograd dtype for {x!r}")
    if isinstance(x, np.dtype) or (isinstance(x, type) and issubclass(x, np.generic)):
        if (dt := dtypes.fields().get(np.dtype(x).name)) is not None:
            return dt
        raise TypeError(f"no zeptograd dtype for the numpy dtype {np.dtype(x)!r}")
    raise TypeError(f"expected a DType or a dtype name, got {type(x).__name__}: {x!r}")


# The promotion lattice (the same as tinygrad's, PyTorch-compatible where PyTorch defines a result):
# each dtype lists the dtypes it promotes to directly.
# The narrow ints sit below int8 and uint8 the same way (int4 + uint4 is int8, as in ml_dtypes; uint2 + uint4 is
# uint4, where ml_dtypes never promotes to a narrow int and says uint8).
_PROMO_PARENTS: dict[DType, tuple[DType, ...]] = {
    dtypes.bool: (dtypes.int2, dtypes.uint2),
    dtypes.int2: (dtypes.int4,),
    dtypes.uint2: (dtypes.int4, dtypes.uint4),
    dtypes.int4: (dtypes.int8,),
    dtypes.uint4: (dtypes.int8, dtypes.uint8),
    dtypes.int8: (dtypes.int16,),
    dtypes.int16: (dtypes.int32,),
    dtypes.int32: (dtypes.int64,),
    dtypes.int64: (dtypes.fp8e4m3, dtypes.fp8e5m2),
    dtypes.uint8: (dtypes.int16, dtypes.uint16),
    dtypes.uint16: (dtypes.int32, dtypes.uint32),
    dtypes.uint32: (dtypes.int64, dtypes.uint64),
    dtypes.uint64: (dtypes.fp8e4m3, dtypes.fp8e5m2),
    dtypes.fp8e4m3: (dtypes.float16, dtypes.bfloat16),
    dtypes.fp8e5m2: (dtypes.float16, dtypes.bfloat16),
    dtypes.float16: (dtypes.float32,),
    dtypes.bfloat16: (dtypes.float32,),
    dtypes.float32: (dtypes.float64,),
    dtypes.float64: (),
}


def _promotes_to(dt: DType) -> set[DType]:
    ret, todo = {dt}, [dt]
    while todo:
        for parent in _PROMO_PARENTS[todo.pop()]:
            if parent not in ret:
                ret.add(parent)
                todo.append(parent)
    return ret


def least_upper_dtype(*dts: DType) -> DType:
    """The smallest dtype every one of `dts` promotes to.

    >>> least_upper_dtype(dtypes.int8, dtypes.uint8), least_upper_dtype(dtypes.float16, dtypes.bfloat16)
    (dtypes.int16, dtypes.float32)
    """
    if not dts:
        raise ValueError("least_upper_dtype needs at least one dtype")
    for dt in dts:
        if not isinstance(dt, DType) or dt not in _PROMO_PARENTS:
            raise TypeError(f"cannot promote {dt!r}: only the scalar tensor dtypes take part in promotion")
    common = set.intersection(*(_promotes_to(dt) for dt in dts))
    return min(common, key=lambda d: d.priority)


def category(dt: DType) -> int:
    """The kind of a dtype, PyTorch's type categories in order: 0 bool, 1 integer, 2 float.

    >>> category(dtypes.bool), category(dtypes.uint8), category(dtypes.float16)
    (0, 1, 2)
    """
    return 2 if dtypes.is_float(dt) else 1 if dtypes.is_int(dt) else 0


def result_type(*args: DType | ConstType) -> DType:
    """The dtype of an op over tensors of these dtypes and Python scalars, which are weak.

    A Python scalar changes the result only when it is of a higher kind (bool < int < float) than every
    dtype given; it then brings the default dtype of its kind, as in PyTorch.

    >>> result_type(dtypes.float16, 2.0), result_type(dtypes.int8, 1000), result_type(dtypes.int32, 0.5)
    (dtypes.float16, dtypes.int8, dtypes.float32)
    """
    strong = [a for a in args if isinstance(a, DType)]
    weak = [a for a in args if not isinstance(a, DType)]
    for w in weak:
        if not isinstance(w, (bool, int, float)):
            raise TypeError(f"result_type takes DTypes and Python scalars, got {type(w).__name__}: {w!r}")
    if not strong:
        return least_upper_dtype(*(dtypes.from_py(w) for w in weak)) if weak else dtypes.default_float
    ret = least_upper_dtype(*strong)
    weak_category = max((category(dtypes.from_py(w)) for w in weak), default=0)
    if weak_category > category(ret):
        ret = dtypes.default_float if weak_category == 2 else dtypes.default_int
    return ret


class NarrowFloat:
    """A float format with no arithmetic of its own: stored as the bits of an unsigned int, computed in float32
    (bfloat16 and the fp8 formats). `finite` formats (fp8e4m3, PyTorch's float8_e4m3fn) have no infinity: the
    all-ones pattern is NaN, and a value beyond the largest finite one (infinity too) saturates to it, as PyTorch
    converts; the others round it to infinity. `ieee` formats (float16 on a device without half arithmetic) convert
    as IEEE 754 hardware and numpy do, not through float32 as PyTorch converts to bfloat16: a float64 rounds once,
    and a NaN keeps the top bits of its payload, quieted."""

    def __init__(self, storage: DType, exponent: int, mantissa: int, finite: bool, ieee: bool = False):
        self.storage, self.exponent, self.mantissa, self.finite = storage, exponent, mantissa, finite
        self.ieee = ieee
        self.bias = (1 << (exponent - 1)) - 1
        top = (1 << exponent) - 1 - self.bias  # the largest exponent: the top field is NaN/inf unless finite
        self.max = (2.0 - 2.0 ** (1 - mantissa)) * 2.0**top if finite else (2.0 - 2.0**-mantissa) * 2.0 ** (top - 1)


NARROW_FLOATS: dict[DType, NarrowFloat] = {
    dtypes.bfloat16: NarrowFloat(dtypes.uint16, 8, 7, finite=False),
    dtypes.fp8e4m3: NarrowFloat(dtypes.uint8, 4, 3, finite=True),
    dtypes.fp8e5m2: NarrowFloat(dtypes.uint8, 5, 2, finite=False),
}
"""The dtypes stored as bits and computed in float32, with their formats.

>>> NARROW_FLOATS[dtypes.fp8e4m3].max, NARROW_FLOATS[dtypes.fp8e5m2].max, NARROW_FLOATS[dtypes.bfloat16].storage
(448.0, 57344.0, dtypes.uint16)
"""

FLOAT16_BITS = NarrowFloat(dtypes.uint16, 5, 10, finite=False, ieee=True)
"""IEEE binary16 as a narrow float: how float16 is kept on a device that stores half but cannot compute in it
(OpenCL without cl_khr_fp16; a renderer names such dtypes in `emulated_floats`).

>>> FLOAT16_BITS.max, FLOAT16_BITS.bias
(65504.0, 15)
"""


class NarrowInt:
    """An integer narrower than a byte, kept one value per byte as ml_dtypes keeps it: the byte holds the value's
    `bits` low bits (two's complement for a signed one) and zeros above them. Its arithmetic is int32's, wrapped to
    the width after every op. A float converts as ml_dtypes converts it: toward zero, and to 0 where that is out of
    range (NaN and infinity too), which is one of the answers ONNX leaves open; an int keeps its low bits."""

    def __init__(self, bits: int, signed: bool):
        self.storage, self.bits, self.signed = dtypes.uint8, bits, signed
        self.mask = (1 << bits) - 1
        self.min = -(1 << (bits - 1)) if signed else 0
        self.max = (1 << (bits - 1)) - 1 if signed else self.mask


NARROW_INTS: dict[DType, NarrowInt] = {
    dtypes.int2: NarrowInt(2, signed=True),
    dtypes.uint2: NarrowInt(2, signed=False),
    dtypes.int4: NarrowInt(4, signed=True),
    dtypes.uint4: NarrowInt(4, signed=False),
}
"""The ints narrower than a byte, with their widths.

>>> NARROW_INTS[dtypes.int4].min, NARROW_INTS[dtypes.int4].max, NARROW_INTS[dtypes.uint2].max
(-8, 7, 3)
"""

NARROW: dict[DType, NarrowFloat | NarrowInt] = {**NARROW_FLOATS, **NARROW_INTS}
"""Every dtype numpy has no type for: stored as the bits of an unsigned int and computed in a wider dtype."""


def bit_width(dt: DType) -> int:
    """The bits of a scalar int dtype's values (4 for int4, whose values take a byte each).

    >>> bit_width(dtypes.int4), bit_width(dtypes.uint16)
    (4, 16)
    """
    fmt = NARROW_INTS.get(dt.scalar())
    return fmt.bits if fmt is not None else 8 * dt.scalar().itemsize


def _round_narrow(x: float, fmt: NarrowFloat) -> float:
    # as PyTorch converts: to float32 first, then round-to-nearest-even to the format's precision and range
    x = _round_float(x, "f")
    if math.isnan(x):
        return x
    if math.isinf(x):
        return math.copysign(fmt.max, x) if fmt.finite else x
    _, e = math.frexp(abs(x))  # |x| = m * 2**e with 0.5 <= m < 1
    ulp = 2.0 ** (max(e, 2 - fmt.bias) - 1 - fmt.mantissa)  # below the normal range, the subnormal spacing
    q = round(abs(x) / ulp) * ulp  # exact quotient, and round() is half-to-even
    if q > fmt.max:
        q = fmt.max if fmt.finite else math.inf
    return math.copysign(q, x)


def _round_float(x: float, fmt: str) -> float:
    try:
        return struct.unpack(fmt, struct.pack(fmt, x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)


def truncate(value: Any, dt: DType) -> Any:
    """`value` as the scalar `dt` holds it: integers wrap to their width, floats round to their precision.

    >>> truncate(2**31, dtypes.int32), truncate(1e40, dtypes.float32), truncate(9, dtypes.int4)
    (-2147483648, inf, -7)
    """
    dt = dt.scalar()
    if isinstance(value, bool) or dt is dtypes.bool:
        return bool(value) if dt is dtypes.bool else truncate(int(value), dt)
    if dtypes.is_float(dt):
        value = float(value)
        if math.isnan(value):
            return math.nan  # one NaN object, so equal constants intern to one node
        if dt is dtypes.float64:
            return value
        if (fmt := NARROW_FLOATS.get(dt)) is not None:
            return _round_narrow(value, fmt)
        return _round_float(value, dt.fmt or "f")
    if dt is dtypes.index:
        return int(value)
    if dtypes.is_int(dt):
        if isinstance(value, float):
            if not math.isfinite(value):
                raise ValueError(f"cannot convert {value} to {dt!r}")
            value = int(value)  # C semantics: toward zero
            if (narrow := NARROW_INTS.get(dt)) is not None and not narrow.min <= value <= narrow.max:
                return 0  # out of range: ml_dtypes' 0
        bits = bit_width(dt)
        value = int(value) & ((1 << bits) - 1)
        if not dtypes.is_unsigned(dt) and value >= 1 << (bits - 1):
            value -= 1 << bits
        return value
    raise TypeError(f"{dt!r} holds no values")


_np_dtypes: dict[DType, np.dtype] = {}


def np_dtype(dt: DType) -> np.dtype:
    """The numpy dtype that stores `dt` (for bfloat16, fp8 and the narrow ints: the unsigned int that holds their
    bits).

    >>> np_dtype(dtypes.float16), np_dtype(dtypes.bfloat16), np_dtype(dtypes.int4)
    (dtype('float16'), dtype('uint16'), dtype('uint8'))
    """
    if (ret := _np_dtypes.get(dt)) is None:
        stored = fmt.storage if (fmt := NARROW.get(dt)) is not None else dt
        if stored.fmt is None:
            raise TypeError(f"{dt!r} has no numpy equivalent and cannot be stored on this device yet")
        ret = _np_dtypes[dt] = np.dtype(stored.fmt)
    return ret
