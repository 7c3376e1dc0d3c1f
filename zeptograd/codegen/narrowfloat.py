"""Narrow floats (bfloat16, fp8e4m3, fp8e5m2) as bits in memory and float32 in registers.

No target computes in these formats here, so before anything else a kernel is rewritten to: load the bits (an
unsigned int of the same size), widen them to a float32 value, compute in float32, and round to the format's
nearest-even bits after every op whose result is narrow, as PyTorch rounds (fp8e4m3 saturates at its largest
finite value, bfloat16 and fp8e5m2 round to infinity): a fused kernel gives the values the ops give one by one,
so a tensor's values never depend on what it was fused with.

The rules start where a narrow value is consumed (a store, a cast, a bitcast, a comparison) and widen it there:
`CAST(x: narrow, float32)` is pushed down through x's ops to the loads, which read the storage bits. Every node
the rules build is well typed, so the spec holds at every step.

>>> from zeptograd.dtype import dtypes
>>> from zeptograd.uop.ops import UOp
>>> encode(UOp.const(dtypes.float32, 1.0), NARROW_FLOATS[dtypes.bfloat16]).dtype
dtypes.uint16
"""

from __future__ import annotations

import struct

from zeptograd.dtype import NARROW_FLOATS, DType, NarrowFloat, PtrDType, dtypes
from zeptograd.uop.ops import GroupOp, Ops, UOp
from zeptograd.uop.pattern import PatternMatcher, UPat
from zeptograd.uop.rewrite import graph_rewrite

U32 = dtypes.uint32
F32 = dtypes.float32
SIGN = 0x80000000
INF_BITS = 0x7F800000


def _bits(x: float) -> int:
    return struct.unpack("I", struct.pack("f", x))[0]


def _above(a: UOp, bits: int) -> UOp:
    return a.const_like(bits).lt(a)


def encode(x: UOp, fmt: NarrowFloat) -> UOp:
    """The format's bits (an unsigned int of its width) of the float32 value `x`, rounded to nearest even."""
    width = 8 * fmt.storage.itemsize
    shift = 23 - fmt.mantissa  # float32 mantissa bits the format drops
    u = x.bitcast(U32)
    sign = u & SIGN
    a = u & (SIGN - 1)
    # normal range: rebias the exponent, add just under half a unit of the last kept bit (plus the kept bit:
    # ties go to even), and drop the low bits; a carry out of the mantissa correctly bumps the exponent
    rebias = ((fmt.bias - 127) << 23) & 0xFFFFFFFF
    odd = (a >> shift) & 1
    rounded = (a + (rebias + (1 << (shift - 1)) - 1) + odd) >> shift
    if fmt.exponent < 8:
        # below the format's normal range: adding 2**k (k puts the format's subnormal unit at float32's last bit)
        # rounds to nearest even in float32 arithmetic, leaving the subnormal's bits in the low mantissa
        magic = 127 + shift - (fmt.bias - 1)
        subnormal = (a.bitcast(F32) + 2.0 ** (magic - 127)).bitcast(U32) - (magic << 23)
        rounded = a.lt((128 - fmt.bias) << 23).where(subnormal, rounded)
    if fmt.finite:
        # beyond the largest finite value (infinity too): saturate to it
        rounded = _above(a, _bits(fmt.max)).where((1 << (width - 1)) - 2, rounded)
    elif fmt.exponent < 8:
        # from 2**(top exponent + 1) on, the rebiased exponent overflows its field: infinity
        top = (1 << fmt.exponent) - 2 - fmt.bias
        rounded = a.lt((top + 128) << 23).where(rounded, ((1 << fmt.exponent) - 1) << fmt.mantissa)
    sign_bit = sign >> (32 - width)
    # NaN stays NaN: the quiet pattern, with the sign for fp8 (bfloat16's is dropped, as PyTorch's is)
    nan = 0x7FC0 if fmt.exponent == 8 else ((1 << (width - 1)) - 1) | sign_bit
    value = _above(a, INF_BITS).where(nan, rounded | sign_bit)
    return value.cast(fmt.storage)


def decode(bits: UOp, fmt: NarrowFloat) -> UOp:
    """The float32 value of the format's bits `bits` (exact: every narrow value is a float32)."""
    width = 8 * fmt.storage.itemsize
    shift = 23 - fmt.mantissa
    w = bits.cast(U32)
    if fmt.exponent == 8:  # bfloat16 is float32's top half
        return (w << 16).bitcast(F32)
    sign = (w >> (width - 1)) << 31
    mag = w & ((1 << (width - 1)) - 1)
    exponent = mag >> fmt.mantissa
    normal = (mag << shift) + ((127 - fmt.bias) << 23)
    subnormal = (mag.cast(F32) * 2.0 ** (1 - fmt.bias - fmt.mantissa)).bitcast(U32)
    if fmt.finite:
        special = mag.eq((1 << (width - 1)) - 1)  # the all-ones pattern: NaN
        special_bits = UOp.const(U32, 0x7FC00000)
    else:
        special = exponent.eq((1 << fmt.exponent) - 1)  # infinity (no mantissa) or NaN
        special_bits = (mag << shift) | INF_BITS
    magnitude = exponent.eq(0).where(subnormal, special.where(special_bits, normal))
    return (magnitude | sign).bitcast(F32)


def _narrow(dt: DType) -> NarrowFloat | None:
    return None if isinstance(dt, PtrDType) else NARROW_FLOATS.get(dt)


def _wide(x: UOp) -> UOp:
    """The float32 value of `x`: a narrow value widened (the rules below push the CAST down to the loads)."""
    return x if x.dtype is F32 else x.cast(F32)


def _round(x: UOp, dt: DType) -> UOp:
    """float32 `x` rounded to the narrow dtype `dt`, kept in float32."""
    fmt = NARROW_FLOATS[dt]
    return decode(encode(x, fmt), fmt)


def _storage_pointer(index: UOp) -> UOp:
    """INDEX(DEFINE_GLOBAL narrow*, ...) as the same INDEX into the buffer of storage bits."""
    g = index.src[0]
    ptr = g.dtype
    assert isinstance(ptr, PtrDType)
    bits = PtrDType(NARROW_FLOATS[ptr.base].storage, ptr.addrspace, ptr.size)
    return index.replace(dtype=bits, src=(g.replace(dtype=bits), *index.src[1:]))


def _pointee(u: UOp) -> NarrowFloat | None:
    return NARROW_FLOATS.get(u.dtype.base) if isinstance(u.dtype, PtrDType) else None


def _widen(x: UOp) -> UOp:
    """CAST(x: narrow, float32) with the cast pushed into x: float32 arithmetic, rounded where x's op rounds."""
    dt = x.dtype
    if x.op is Ops.CONST:
        return UOp.const(F32, x.arg)
    if x.op is Ops.LOAD:
        bits = x.replace(dtype=NARROW_FLOATS[dt].storage, src=(_storage_pointer(x.src[0]), *x.src[1:]))
        return decode(bits, NARROW_FLOATS[dt])
    if x.op is Ops.BITCAST:
        return decode(x.src[0].bitcast(NARROW_FLOATS[dt].storage), NARROW_FLOATS[dt])
    if x.op is Ops.CAST:
        return _round(_wide(x.src[0]), dt)
    if x.op is Ops.WHERE:
        return x.replace(dtype=F32, src=(x.src[0], _wide(x.src[1]), _wide(x.src[2])))
    if x.op is Ops.REDUCE:
        return _round(x.replace(dtype=F32, src=(_wide(x.src[0]), *x.src[1:])), dt)
    wide = x.replace(dtype=F32, src=tuple(_wide(s) for s in x.src))
    return wide if x.op in (Ops.MAX, Ops.NEG) else _round(wide, dt)  # a choice or a sign flip is exact


def _bits_of(x: UOp) -> UOp:
    """The storage bits of the narrow value x: as loaded or bitcast when it comes straight from memory or from
    another dtype's bits (every bit pattern kept, NaN payloads too), else encoded from its float32 value."""
    fmt = NARROW_FLOATS[x.dtype]
    if x.op is Ops.LOAD:
        return x.replace(dtype=fmt.storage, src=(_storage_pointer(x.src[0]), *x.src[1:]))
    if x.op is Ops.BITCAST:
        return x.src[0].bitcast(fmt.storage)
    return encode(_wide(x), fmt)


def _cast_from_narrow(c: UOp, x: UOp) -> UOp | None:
    if _narrow(c.dtype) is not None:
        return None  # narrow -> narrow: widened (and rounded) where its consumer widens it
    return _widen(x) if c.dtype is F32 else _wide(x).cast(c.dtype)


def _store(st: UOp) -> UOp | None:
    if (fmt := _pointee(st.src[0])) is None:
        return None
    value = st.src[1]
    bits = _bits_of(value) if value.dtype in NARROW_FLOATS else encode(_wide(value), fmt)
    return st.replace(src=(_storage_pointer(st.src[0]), bits, *st.src[2:]))


NARROW = tuple(NARROW_FLOATS)

narrow_floats = PatternMatcher(
    [
        # STORE(p: narrow*, x) -> STORE(p as bits*, bits of x)
        (UPat(Ops.STORE, src=(UPat(Ops.INDEX), UPat()), allow_any_len=True, name="st"), _store, "narrow store"),
        # CAST(x: narrow, float32) -> x's op in float32, rounded; CAST(x: narrow, t) -> CAST(float32(x), t)
        (UPat(Ops.CAST, src=(UPat(dtype=NARROW, name="x"),), name="c"), _cast_from_narrow, "widen narrow"),
        # BITCAST(x: narrow, t) -> BITCAST(bits of x, t)
        (
            UPat(Ops.BITCAST, src=(UPat(dtype=NARROW, name="x"),), name="b"),
            lambda b, x: _bits_of(x).bitcast(b.dtype),
            "bitcast narrow -> bitcast its bits",
        ),
        # a < b on narrow values -> float32(a) < float32(b)
        (
            UPat(GroupOp.Comparison, src=(UPat(dtype=NARROW), UPat(dtype=NARROW)), name="cmp"),
            lambda cmp: cmp.replace(src=tuple(_wide(s) for s in cmp.src)),
            "compare narrow -> compare float32",
        ),
    ]
)


def lower_narrow_floats(sink: UOp) -> UOp:
    """The kernel with every narrow float as storage bits in memory and float32 values (no-op without them)."""
    if not any(_narrow(u.dtype) is not None or _pointee(u) is not None for u in sink.toposort()):
        return sink
    return graph_rewrite(sink, narrow_floats, name="narrow floats")
