"""float32 math where the Tensor ops compute through float64, for a device without float64 (WEBGPU).

Some float32 Tensor ops compute in float64 inside a kernel (mixin/elementwise.py): `pow` (exp2(y * log2|x|)),
`//`, `%`, `fmod` and `div(rounding_mode=...)` (the remainder in float64, where its products are exact). Their
inputs and outputs are float32, so on a device that lacks float64 the float64 part is computed in float32: every
float64 value that does not come from a float64 buffer becomes float32, the casts into and out of it vanish, and
the sign-bit test of a float64 (a bitcast to int64) becomes the same test on the float32's bits.

Accuracy (test/test_webgpu.py checks each against numpy): `pow` within 2**-22 * (1 + |log2 result|) relative
(the exponent y*log2|x| is rounded to float32, so large results lose bits); `fmod` and `%` exact while the quotient
|a/b| < 2**23, beyond within one float32 ulp of |a| (the reduction's product q*b is rounded); `//` exact while
|a/b| < 2**23; `div(rounding_mode=)` is the float32 quotient rounded once (within 1 ulp before the rounding).
A kernel that reads or writes float64 memory is left alone (the device refuses it).

>>> from zeptograd.uop.ops import UOp
>>> x = UOp(Ops.CAST, dtypes.float64, (UOp.const(dtypes.float32, 2.0),)) * 3.0
>>> demote_float64(UOp.sink(x)).src[0].dtype
dtypes.float32
"""

from __future__ import annotations

from zeptograd.dtype import PtrDType, dtypes
from zeptograd.uop.ops import GroupOp, Ops, UOp
from zeptograd.uop.pattern import PatternMatcher, UPat
from zeptograd.uop.rewrite import graph_rewrite

F32, F64 = dtypes.float32, dtypes.float64


def _cast_to_wide(c: UOp, x: UOp) -> UOp | None:
    if x.dtype is F64:
        return None  # a float64 load stays (the device refuses it)
    return x if x.dtype is F32 else x.cast(F32)


def _wide_alu(u: UOp) -> UOp | None:
    if any(s.dtype is F64 for s in u.src):
        return None  # its operands are not demoted (float64 memory)
    return UOp(u.op, F32, u.src, u.arg)


def _sign_bits(b: UOp, x: UOp) -> UOp | None:
    # the float64's bits only serve a sign test (_signbit): the float32's bits, sign-extended, have the same sign
    return x.bitcast(dtypes.int32).cast(b.dtype) if x.dtype is F32 else None


# a float64's sign-bit masks and the float32's that do the same (abs, copysign, negation by bits)
_SIGN_MASKS = {2**63 - 1: 2**31 - 1, -(2**63): -(2**31)}


def _sign_mask(b: UOp, y: UOp, c: UOp, op: UOp) -> UOp | None:
    if y.dtype is not dtypes.int32 or c.arg not in _SIGN_MASKS:
        return None
    return UOp(op.op, dtypes.int32, (y, UOp.const(dtypes.int32, _SIGN_MASKS[c.arg]))).bitcast(F32)


demote_rules = PatternMatcher(
    [
        # CAST(x: f32, f64) -> x; CAST(x: int, f64) -> CAST(x, f32)
        (UPat(Ops.CAST, F64, (UPat.var("x"),), name="c"), _cast_to_wide),
        # CAST(x: f32, f32) -> x (what the cast back from float64 became)
        (UPat(Ops.CAST, F32, (UPat.var("x", F32),)), lambda x: x),
        # CONST c: f64 -> CONST c: f32 (rounded)
        (UPat(Ops.CONST, F64, name="c"), lambda c: UOp.const(F32, c.arg)),
        # op(...): f64 on f32 operands -> op(...): f32
        (UPat(GroupOp.ALU, F64, name="u"), _wide_alu),
        # BITCAST(x: f32, int64) -> CAST(BITCAST(x, int32), int64): the same sign
        (UPat(Ops.BITCAST, (dtypes.int64, dtypes.uint64), (UPat.var("x"),), name="b"), _sign_bits),
        # BITCAST(CAST(y: i32, i64) & sign mask, f64) -> BITCAST(y & its 32-bit mask, f32) (and | ^ alike)
        (
            UPat(
                Ops.BITCAST,
                F64,
                (
                    UPat(
                        (Ops.AND, Ops.OR, Ops.XOR),
                        dtypes.int64,
                        [UPat(Ops.CAST, dtypes.int64, (UPat.var("y"),)), UPat.cvar("c")],
                        name="op",
                    ),
                ),
                name="b",
            ),
            _sign_mask,
        ),
        # CAST(y: i32, i64) < c -> y < c, for c within int32 (widening keeps the order)
        (
            UPat(Ops.CMPLT, src=(UPat(Ops.CAST, dtypes.int64, (UPat.var("y", dtypes.int32),)), UPat.cvar("c"))),
            lambda y, c: y.lt(UOp.const(dtypes.int32, c.arg)) if -(2**31) <= c.arg < 2**31 else None,
        ),
    ]
)


def demote_float64(sink: UOp) -> UOp:
    """`sink` with its float64 arithmetic in float32 (a no-op for a kernel without float64 values)."""
    nodes = sink.toposort()
    if not any(u.dtype is F64 for u in nodes):
        return sink
    if any(isinstance(u.dtype, PtrDType) and u.dtype.base.scalar() is F64 for u in nodes):
        return sink  # float64 memory: the device refuses the kernel
    return graph_rewrite(sink, demote_rules, name="float64 -> float32")
