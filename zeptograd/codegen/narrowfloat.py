"""Narrow floats (bfloat16, fp8e4m3, fp8e5m2) as bits in memory and float32 in registers; narrow ints (int4, uint4,
int2, uint2) as bytes in memory and int32 in registers.

No target computes in these formats here, so before anything else a kernel is rewritten to: load the bits (an
unsigned int of the same size), widen them to a float32 value, compute in float32, and round to the format's
nearest-even bits after every op whose result is narrow, as PyTorch rounds (fp8e4m3 saturates at its largest
finite value, bfloat16 and fp8e5m2 round to infinity): a fused kernel gives the values the ops give one by one,
so a tensor's values never depend on what it was fused with.

The narrow ints go the same way with int32 for float32: a byte holds the value's low bits (as ml_dtypes keeps it),
an op's int32 result wraps to the width, and a float converts as ml_dtypes converts it (`NarrowInt`).

A renderer may name more floats it cannot compute in (`renderer.emulated_floats`): float16 on an OpenCL device
without cl_khr_fp16 is kept the same way, as IEEE binary16 bits (`FLOAT16_BITS`: round to nearest even, with
denormals, infinities and NaN as IEEE 754 converts them), so it gives the values numpy's float16 ops give.

The rules start where a narrow value is consumed (a store, a cast, a bitcast, a comparison) and widen it there:
`CAST(x: narrow, float32)` (`int32` for a narrow int) is pushed down through x's ops to the loads, which read the
storage bits. Every node the rules build is well typed, so the spec holds at every step.

>>> from zeptograd.dtype import dtypes
>>> from zeptograd.uop.ops import UOp
>>> encode(UOp.const(dtypes.float32, 1.0), NARROW[dtypes.bfloat16]).dtype
dtypes.uint16
>>> from zeptograd.uop.ops import Ops
>>> x = UOp.const(dtypes.float16, 1.0)
>>> kernel = (x + x).cast(dtypes.float32).sink()
>>> adds = lambda sink: sorted({u.dtype.name for u in sink.toposort() if u.op is Ops.ADD})
>>> adds(lower_narrow_floats(kernel)), adds(lower_narrow_floats(kernel, {dtypes.float16}))
(['float16'], ['float32', 'uint32'])
"""

from __future__ import annotations

import functools
import math
import struct
from collections.abc import Iterable, Mapping

from zeptograd.dtype import FLOAT16_BITS, NARROW, DType, NarrowFloat, NarrowInt, PtrDType, dtypes
from zeptograd.uop.ops import GroupOp, Ops, UOp
from zeptograd.uop.pattern import PatternMatcher, UPat
from zeptograd.uop.rewrite import graph_rewrite

U32 = dtypes.uint32
I32 = dtypes.int32
F32 = dtypes.float32
SIGN = 0x80000000
INF_BITS = 0x7F800000
MANTISSA = 0x7FFFFF

# the floats a renderer may ask to emulate (`emulated_floats`), with the format each is kept in
EMULATED_FORMATS: dict[DType, NarrowFloat] = {dtypes.float16: FLOAT16_BITS}
Format = NarrowFloat | NarrowInt
Formats = Mapping[DType, Format]


def _bits(x: float) -> int:
    return struct.unpack("I", struct.pack("f", x))[0]


def _above(a: UOp, bits: int) -> UOp:
    return a.const_like(bits).lt(a)


def _compute(fmt: Format) -> DType:
    """The dtype a format's values are computed in."""
    return I32 if isinstance(fmt, NarrowInt) else F32


def _wrap(x: UOp, fmt: NarrowInt) -> UOp:
    """int32 `x` wrapped to the narrow int's width (its low bits, sign-extended for a signed one)."""
    low = x & fmt.mask
    if not fmt.signed:
        return low
    half = 1 << (fmt.bits - 1)
    return (low ^ half) - half


def _int_value(x: UOp, fmt: NarrowInt) -> UOp:
    """The int32 value (wrapped) of `x` (not of this format) converted to the narrow int: an int or bool keeps its
    low bits; a float goes toward zero, and to 0 where that is out of range (NaN too), as ml_dtypes converts."""
    if dtypes.is_float(x.dtype):
        if x.dtype is not dtypes.float64:
            x = _wide(x)  # exact
        # a select before the cast: converting NaN or an out-of-range float to int32 is undefined in C
        inside = x.const_like(fmt.min - 1).lt(x) & x.lt(x.const_like(fmt.max + 1))
        return inside.where(x, x.const_like(0.0)).cast(I32)
    return _wrap(x.cast(I32), fmt)


def encode(x: UOp, fmt: Format) -> UOp:
    """The format's bits (an unsigned int of its width) of the float32 value `x`, rounded to nearest even (of the
    int32 value `x` of a narrow int: its low bits)."""
    if isinstance(fmt, NarrowInt):
        return (x & fmt.mask).cast(fmt.storage)
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
    if fmt.ieee:
        # as IEEE 754 hardware converts it: the top bits of its payload, the quiet bit set, its sign
        quiet_inf = (((1 << fmt.exponent) - 1) << fmt.mantissa) | (1 << (fmt.mantissa - 1))
        nan = ((a & MANTISSA) >> shift) | quiet_inf | sign_bit
    value = _above(a, INF_BITS).where(nan, rounded | sign_bit)
    return value.cast(fmt.storage)


def decode(bits: UOp, fmt: Format) -> UOp:
    """The float32 value of the format's bits `bits` (exact: every narrow value is a float32); a narrow int's int32
    value."""
    if isinstance(fmt, NarrowInt):
        return _wrap(bits.cast(I32), fmt)
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
        if fmt.ieee:
            # a signalling NaN widens quieted, as IEEE 754 hardware widens it (infinity has no payload to mark)
            payload = mag & ((1 << fmt.mantissa) - 1)
            special_bits = special_bits | payload.ne(0).where(UOp.const(U32, 1 << 22), UOp.const(U32, 0))
    magnitude = exponent.eq(0).where(subnormal, special.where(special_bits, normal))
    return (magnitude | sign).bitcast(F32)


def _narrow(dt: DType, fmts: Formats) -> Format | None:
    return None if isinstance(dt, PtrDType) else fmts.get(dt)


def _wide(x: UOp, dt: DType = F32) -> UOp:
    """The float32 (or `dt`) value of `x`: a narrow value widened (the rules below push the CAST down to the loads)."""
    return x if x.dtype is dt else x.cast(dt)


def _odd_float32(x: UOp) -> UOp:
    """float64 `x` as a float32 rounded to odd (toward zero, then the last bit set where that was inexact): a
    format of at most 22 bits rounds this to nearest even exactly as it would round `x` itself, where rounding
    through float32 to nearest would round a tie made by the first rounding a second time."""
    f = x.cast(F32)
    back = f.cast(x.dtype)
    # a rounding away from zero (to infinity too) is stepped back to the float32 below in magnitude; a NaN only
    # gains a payload bit the format drops
    away = x.lt(0).where(back.lt(x), x.lt(back))
    return ((f.bitcast(U32) - away.cast(U32)) | back.ne(x).cast(U32)).bitcast(F32)


def _float32_for(x: UOp, fmt: Format) -> UOp:
    """The float32 that `x` (not of `fmt`) is rounded from to `fmt`: a float64 rounds to an IEEE format once (for a
    narrow int: the int32 value it converts to)."""
    if isinstance(fmt, NarrowInt):
        return _int_value(x, fmt)
    return _odd_float32(x) if fmt.ieee and x.dtype is dtypes.float64 else _wide(x)


def _round(x: UOp, fmt: Format) -> UOp:
    """float32 `x` rounded to the narrow format `fmt`, kept in float32 (int32 `x` wrapped to a narrow int)."""
    return _wrap(x, fmt) if isinstance(fmt, NarrowInt) else decode(encode(x, fmt), fmt)


def _storage_pointer(index: UOp, fmts: Formats) -> UOp:
    """INDEX(DEFINE_GLOBAL narrow*, ...) as the same INDEX into the buffer of storage bits."""
    g = index.src[0]
    ptr = g.dtype
    assert isinstance(ptr, PtrDType)
    bits = PtrDType(fmts[ptr.base].storage, ptr.addrspace, ptr.size)
    return index.replace(dtype=bits, src=(g.replace(dtype=bits), *index.src[1:]))


def const_bits(value: float, fmt: Format) -> int:
    """The format's bits of `value`, one of its values (a narrow CONST is rounded to its dtype when it is made).

    >>> hex(const_bits(-1.5, FLOAT16_BITS)), hex(const_bits(2.0**-24, FLOAT16_BITS))
    ('0xbe00', '0x1')
    >>> const_bits(-1, NARROW[dtypes.int4])
    15
    """
    if isinstance(fmt, NarrowInt):
        return int(value) & fmt.mask
    width = 8 * fmt.storage.itemsize
    sign = 1 << (width - 1) if math.copysign(1.0, value) < 0 else 0
    inf = ((1 << fmt.exponent) - 1) << fmt.mantissa
    if math.isnan(value):  # the quiet pattern (all ones for a format without infinity)
        return (1 << (width - 1)) - 1 if fmt.finite else inf | 1 << (fmt.mantissa - 1)
    if math.isinf(value):
        return sign | inf
    m, e = math.frexp(abs(value))  # |value| = m * 2**e, 1/2 <= m < 1
    if value == 0 or e - 1 < 1 - fmt.bias:  # zero or subnormal: a multiple of the least subnormal
        return sign | int(abs(value) * 2.0 ** (fmt.bias - 1 + fmt.mantissa))
    return sign | (e - 1 + fmt.bias) << fmt.mantissa | int((2 * m - 1) * 2**fmt.mantissa)


def _storage_load(ld: UOp, fmts: Formats) -> UOp:
    """LOAD(p: narrow*, ...) as the LOAD of the storage bits: a gated load's fallback value becomes its bits."""
    fmt = fmts[ld.dtype]

    def bits(s: UOp) -> UOp:
        if s.dtype is not ld.dtype:
            return s
        return UOp.const(fmt.storage, const_bits(s.arg, fmt)) if s.op is Ops.CONST else _bits_of(s, fmts)

    return ld.replace(dtype=fmt.storage, src=(_storage_pointer(ld.src[0], fmts), *map(bits, ld.src[1:])))


def _pointee(u: UOp, fmts: Formats) -> Format | None:
    return fmts.get(u.dtype.base) if isinstance(u.dtype, PtrDType) else None


def _widen(x: UOp, fmts: Formats) -> UOp:
    """CAST(x: narrow, float32) with the cast pushed into x: float32 arithmetic, rounded where x's op rounds (for a
    narrow int: CAST(x, int32), int32 arithmetic wrapped to the width)."""
    fmt = fmts[x.dtype]
    wide_dt = _compute(fmt)
    if x.op is Ops.CONST:
        return UOp.const(wide_dt, x.arg)
    if x.op is Ops.LOAD:
        return decode(_storage_load(x, fmts), fmt)
    if x.op is Ops.BITCAST:
        return decode(x.src[0].bitcast(fmt.storage), fmt)
    if x.op is Ops.CAST:
        return _round(_float32_for(x.src[0], fmt), fmt)
    if x.op is Ops.WHERE:
        return x.replace(dtype=wide_dt, src=(x.src[0], _wide(x.src[1], wide_dt), _wide(x.src[2], wide_dt)))
    if x.op is Ops.REDUCE:
        return _round(x.replace(dtype=wide_dt, src=(_wide(x.src[0], wide_dt), *x.src[1:])), fmt)
    wide = x.replace(dtype=wide_dt, src=tuple(_wide(s, wide_dt) for s in x.src))
    # a choice is exact, and so is a float's sign flip (an int's wraps: -(-8) is -8 in int4)
    exact = x.op is Ops.MAX or (x.op is Ops.NEG and wide_dt is F32)
    return wide if exact else _round(wide, fmt)


def _bits_of(x: UOp, fmts: Formats) -> UOp:
    """The storage bits of the narrow value x: as loaded or bitcast when it comes straight from memory or from
    another dtype's bits (every bit pattern kept, NaN payloads too), else encoded from its float32 value."""
    fmt = fmts[x.dtype]
    if x.op is Ops.LOAD:
        return _storage_load(x, fmts)
    if x.op is Ops.BITCAST:
        return x.src[0].bitcast(fmt.storage)
    return encode(_wide(x, _compute(fmt)), fmt)


def _cast_from_narrow(ctx: Formats, c: UOp, x: UOp) -> UOp | None:
    if x.dtype not in ctx or _narrow(c.dtype, ctx) is not None:
        return None  # narrow -> narrow: widened (and rounded) where its consumer widens it
    wide_dt = _compute(ctx[x.dtype])
    return _widen(x, ctx) if c.dtype is wide_dt else _wide(x, wide_dt).cast(c.dtype)


def _bitcast_from_narrow(ctx: Formats, b: UOp, x: UOp) -> UOp | None:
    return _bits_of(x, ctx).bitcast(b.dtype) if x.dtype in ctx else None


def _compare_wide(ctx: Formats, cmp: UOp) -> UOp | None:
    if not all(s.dtype in ctx for s in cmp.src):
        return None
    return cmp.replace(src=tuple(_wide(s, _compute(ctx[s.dtype])) for s in cmp.src))


def _store(ctx: Formats, st: UOp) -> UOp | None:
    if (fmt := _pointee(st.src[0], ctx)) is None:
        return None
    value = st.src[1]
    bits = _bits_of(value, ctx) if value.dtype in ctx else encode(_float32_for(value, fmt), fmt)
    return st.replace(src=(_storage_pointer(st.src[0], ctx), bits, *st.src[2:]))


# every dtype that may be narrow; the rules leave one alone unless the pass's formats (its ctx) name it
NARROW_DTYPES = tuple(NARROW) + tuple(EMULATED_FORMATS)

narrow_floats = PatternMatcher(
    [
        # STORE(p: narrow*, x) -> STORE(p as bits*, bits of x)
        (UPat(Ops.STORE, src=(UPat(Ops.INDEX), UPat()), allow_any_len=True, name="st"), _store, "narrow store"),
        # CAST(x: narrow, float32) -> x's op in float32, rounded; CAST(x: narrow, t) -> CAST(float32(x), t)
        (UPat(Ops.CAST, src=(UPat(dtype=NARROW_DTYPES, name="x"),), name="c"), _cast_from_narrow, "widen narrow"),
        # BITCAST(x: narrow, t) -> BITCAST(bits of x, t)
        (
            UPat(Ops.BITCAST, src=(UPat(dtype=NARROW_DTYPES, name="x"),), name="b"),
            _bitcast_from_narrow,
            "bitcast narrow -> bitcast its bits",
        ),
        # a < b on narrow values -> float32(a) < float32(b)
        (
            UPat(GroupOp.Comparison, src=(UPat(dtype=NARROW_DTYPES), UPat(dtype=NARROW_DTYPES)), name="cmp"),
            _compare_wide,
            "compare narrow -> compare float32",
        ),
    ]
)


@functools.cache
def formats_for(emulated: frozenset[DType] = frozenset()) -> Formats:
    """The narrow formats of a kernel for a renderer that emulates the floats `emulated` (its `emulated_floats`)
    besides bfloat16, fp8 and the narrow ints.

    >>> sorted(d.name for d in formats_for(frozenset({dtypes.float16})))
    ['bfloat16', 'float16', 'fp8e4m3', 'fp8e5m2', 'int2', 'int4', 'uint2', 'uint4']
    """
    return {**NARROW, **{dt: EMULATED_FORMATS[dt] for dt in emulated}}


def lower_narrow_floats(sink: UOp, emulated: Iterable[DType] = ()) -> UOp:
    """The kernel with every narrow float (bfloat16, fp8 and the `emulated` floats of its renderer) as storage
    bits in memory and float32 values, and every narrow int as bytes and int32 values (no-op without them)."""
    fmts = formats_for(frozenset(emulated))
    if not any(_narrow(u.dtype, fmts) is not None or _pointee(u, fmts) is not None for u in sink.toposort()):
        return sink
    return graph_rewrite(sink, narrow_floats, ctx=fmts, name="narrow floats")
