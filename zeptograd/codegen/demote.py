"""float32 math where the Tensor ops compute through float64, for a device without float64 (WEBGPU).

Some float32 Tensor ops compute in float64 inside a kernel (mixin/elementwise.py): `pow` (exp2(y * log2|x|)),
`//`, `%`, `fmod` and `div(rounding_mode=...)` (the remainder in float64, where its products are exact). Their
inputs and outputs are float32, so on a device that lacks float64 the float64 part is computed in float32: every
float64 value that does not come from a float64 buffer becomes float32, the casts into and out of it vanish, and
the sign-bit test of a float64 (a bitcast to int64) becomes the same test on the float32's bits.

Accuracy (test/backends/test_webgpu.py and the op suite check each against numpy): `pow` within 2**-22 * (1 + |log2
result|) relative (the exponent y*log2|x| is rounded to float32, so large results lose bits); `fmod` and `%`
within two float32 ulp of |a| of the exact remainder, modulo |b|: the reduction's product q*b is rounded (lavapipe
does not fuse `fma` either), so fmod(1, 0.1f) = 0.09999999 comes out 0; `//` exact except where the quotient is
within 2**-22 relative of an integer (1 // 0.1f is 10, numpy's 9); `div(rounding_mode=)` is the float32 quotient
rounded once (within 1 ulp before the rounding).
A kernel that reads or writes float64 memory is left alone (the device refuses it).

>>> from zeptograd.uop.ops import UOp
>>> x = UOp(Ops.CAST, dtypes.float64, (UOp.const(dtypes.float32, 2.0),)) * 3.0
>>> demote_float64(UOp.sink(x)).src[0].dtype
dtypes.float32
"""

from __future__ import annotations

from zeptograd.dtype import PtrDType, dtypes
from zeptograd.uop.ops import GroupOp, Ops, UOp

F32, F64 = dtypes.float32, dtypes.float64


# a float64's sign-bit masks and the float32's that do the same (abs, copysign, negation by bits)
_SIGN_MASKS = {2**63 - 1: 2**31 - 1, -(2**63): -(2**31)}
_INT64 = (dtypes.int64, dtypes.uint64)


def _demoted(u: UOp, src: tuple[UOp, ...]) -> UOp:
    """The float32 form of node `u` whose sources are already demoted to `src`. One node at a time, parents after
    children, each built with its final dtype (a rewrite would build float64 nodes of float32 operands first,
    which the spec refuses)."""
    op, dt = u.op, u.dtype
    if op is Ops.CAST and dt is F64 and src[0].dtype is not F64:
        # CAST(x: f32, f64) -> x; CAST(x: int, f64) -> CAST(x, f32)
        return src[0] if src[0].dtype is F32 else src[0].cast(F32)
    if op is Ops.CAST and dt is F32 and src[0].dtype is F32:
        return src[0]  # CAST(x: f32, f32) -> x (the cast back from float64)
    if op is Ops.CONST and dt is F64:
        return UOp.const(F32, u.arg)  # CONST c: f64 -> CONST c: f32 (rounded)
    if op in GroupOp.ALU and dt is F64 and all(s.dtype is not F64 for s in src):
        return UOp(op, F32, src, u.arg)  # op(...): f64 -> op(...): f32
    if op is Ops.BITCAST and dt in _INT64 and src[0].dtype is F32:
        # BITCAST(x: f32, int64) -> CAST(BITCAST(x, int32), int64): the same sign, all _signbit asks of it
        return src[0].bitcast(dtypes.int32).cast(dt)
    if op is Ops.BITCAST and dt is F64 and src[0].op in (Ops.AND, Ops.OR, Ops.XOR):
        # BITCAST(CAST(y: i32, i64) & sign mask, f64) -> BITCAST(y & the 32-bit mask, f32) (| and ^ alike)
        wide, mask = src[0].src
        narrow_sign = wide.op is Ops.CAST and wide.src[0].dtype is dtypes.int32
        if narrow_sign and mask.op is Ops.CONST and mask.arg in _SIGN_MASKS:
            narrow = UOp.const(dtypes.int32, _SIGN_MASKS[mask.arg])
            return UOp(src[0].op, dtypes.int32, (wide.src[0], narrow)).bitcast(F32)
    if op is Ops.CMPLT and src[0].op is Ops.CAST and src[0].dtype is dtypes.int64 and src[1].op is Ops.CONST:
        # CAST(y: i32, i64) < c -> y < c, for c within int32 (widening keeps the order)
        y = src[0].src[0]
        if y.dtype is dtypes.int32 and -(2**31) <= src[1].arg < 2**31:
            return y.lt(UOp.const(dtypes.int32, src[1].arg))
    return u if all(a is b for a, b in zip(src, u.src)) else u.replace(src=src)


def demote_float64(sink: UOp) -> UOp:
    """`sink` with its float64 arithmetic in float32 (a no-op for a kernel without float64 values)."""
    nodes = sink.toposort()
    if not any(u.dtype is F64 for u in nodes):
        return sink
    if any(isinstance(u.dtype, PtrDType) and u.dtype.base.scalar() is F64 for u in nodes):
        return sink  # float64 memory: the device refuses the kernel
    done: dict[UOp, UOp] = {}
    for u in nodes:
        done[u] = _demoted(u, tuple(done[s] for s in u.src))
    return done[sink]
