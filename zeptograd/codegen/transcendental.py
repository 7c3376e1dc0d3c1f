"""EXP2, EXP, LOG2, SIN, COS, TAN and TANH as plain arithmetic: range reduction, then a polynomial.

A libm call (exp2f, log2f, sinf) cannot be vectorized, and the C library and the PYTHON device compute it
differently. These rules replace each op with ALU ops, CAST and BITCAST only, so every device runs the same
arithmetic (bit for bit; sin's reductions are those its `Target` can run, below) and a vectorizer can widen it.
SQRT stays an op: it is one IEEE-exact instruction everywhere (C's sqrtf vectorizes).

float32 and float64 have their own constants; float16 (and any other narrow float) computes in float32 and
rounds once at the end. Measured against numpy in float64 (long double for float64), the largest errors are
about 1.1 ulp (exp2), 0.8 ulp (log2), 0.9 ulp (sin, cos), 1.3 ulp (tan) in float32 over the whole range,
1.2 / 0.6 / 0.8 / 1.1 ulp in float64; test/ops/test_transcendental.py holds them to 2 ulp.

- `exp2(x)`: x = n + f with n = round(x) (by adding 1.5 * 2**mant: `_round_by_adding`), |f| <= 1/2 exact; 2**f
  by a polynomial, 2**n built from its bits in two halves so that neither leaves the normal range and a denormal
  result rounds once. Special values:
  exp2(nan) = nan, exp2(x >= 128) = inf, exp2(x <= -150) = 0 (float32).
- `log2(x)`: x = 2**e * m with sqrt(1/2) <= m < sqrt(2) (denormals scaled into the normal range first);
  log(m) = log(1+f) = f - f*f/2 + s*(f*f/2 + R(s*s)) with s = f/(2+f) (R is the atanh series); the leading
  part is split so that its product with 1/ln2 is exact, and e is added with an exact two-sum.
- `sin(x)`: x = k*pi/2 + r with |r| <= pi/4, then +-sin(r) or +-cos(r) by the quadrant k mod 4. The common
  case, float32 |x| < 2**20 and float64 |x| < 2**15, reduces with fused multiply-adds (explicit MULACCs):
  k = round(x*2/pi) by adding 1.5 * 2**mant, x - k*p1 exact, the next part by an exact product and Fast2Sum, so
  r is a pair (hi, lo) (`_reduce_fma`). Checked on every float32 below 2**20: at most 0.894 ulp (sin and cos).
  Larger arguments, inf and nan are computed only for the vectors where some lane needs them: a WHERE marked
  RARE, which `lowering.rare_to_branch` turns into a branch on "any lane" (every lane of a vector still takes
  the same instructions, so it vectorizes). There float32 uses `_reduce_payne_hanek_f32` (the mantissa times
  a window of the bits of 2/pi in 64-bit integers: exact for any |x| >= 2**20). float64 uses Cody-Waite while
  |k| < 2**30 (|x| < 1.6e9): k split into a high and a low part and pi/2 into parts short enough that every
  product with either is exact, the differences accumulated with two-sums, so r comes out as a pair (hi, lo)
  exact to far below an ulp of r (`_cody_waite`); beyond, a documented fallback (rounded products, r clamped:
  a value in [-1, 1], not an accurate sine).
- sin on a target that lacks what those need (`Target`, read off the renderer by `target_of` and passed to the
  rewrite as its ctx; without one, the default Target, every device's but WEBGPU's). Where MULACC is not a fused
  multiply-add (WGSL's fma may round its product, lavapipe's does), the common case reduces by Cody-Waite
  (`_reduce_two_sums`: k by the same 1.5 * 2**mant rounding, then `_cody_waite`); no product it adds is
  inexact, so a device that contracts a*b + c on its own computes the same. Where there are no 64-bit integers
  (WGSL), Payne-Hanek multiplies 16-bit limbs in 32-bit integers (`_reduce_payne_hanek_f32_u32`): the same 62
  bits of x*2/pi mod 1 as the 64-bit version, made into floats in exact pieces. On the WEBGPU device
  (lavapipe) sin and cos are within 0.85 ulp over a sweep of the whole float32 range, and the CPU running the
  same reductions agrees bit for bit (with no MULACC on either); checked on every float32 below 2**20: at most
  0.905 ulp there (0.895 on the CPU, whose MULACCs are fused).
- `tan(x)`: the same reductions (one for any Target: `_on_reduction`), then tan(r) or -1/tan(r) by the parity of
  k (`_tan_reduced`). tan(r) = r + r**3 * P(r*r) is a pair (Fast2Sum of r and the polynomial's part); for an
  odd k, 1/t_hi is refined by a Newton step whose residual 1 - t_hi*y is exact (a fused multiply-add, or exact
  products of half-length parts where MULACC is not fused), so the reciprocal rounds about once. Checked on every
  float32 below 2**20: at most 1.27 ulp with the CPU's reductions, 1.17 with those of a target with neither
  (1.21 with no MULACC at all, as on lavapipe); it was sin / cos (two reductions and a division): 2.32.

The polynomials: the float32 ones are fits made for this module (relative-error least squares on Chebyshev
nodes, reweighted towards minimax (Lawson), each coefficient rounded to float32 in turn and the rest refitted
around it); the float64 ones are Taylor series (a float64 fit could not be computed more precisely than the
Taylor coefficients are known), one or two terms longer.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

from zeptograd.codegen.lowering import RARE
from zeptograd.dtype import DType, dtypes
from zeptograd.uop.ops import Ops, UOp
from zeptograd.uop.pattern import PatternMatcher, UPat

if TYPE_CHECKING:
    from zeptograd.renderer import Renderer


@dataclass(frozen=True)
class Target:
    """What a decomposition may assume of the device it compiles for (`target_of` reads it off a renderer).

    >>> target_of(None), target_of(None) == Target()
    (Target(fused_mulacc=True, int64=True), True)
    """

    fused_mulacc: bool = True  # MULACC rounds once (a fused multiply-add): every renderer but WGSL's
    int64: bool = True  # 64-bit integer arithmetic


def target_of(renderer: Renderer | None) -> Target:
    """The `Target` of a renderer: `renderer.fused_mulacc` and whether `supported_dtypes()` has int64. No renderer
    (a rewrite run on its own) is the default Target, the base `Renderer`'s: every compiled device but WEBGPU."""
    if renderer is None:
        return Target()
    return Target(renderer.fused_mulacc, dtypes.int64 in renderer.supported_dtypes())


# ---------------------------------------------------------------------------------------------------------------
# constants


def _pi(bits: int) -> Fraction:
    """pi to `bits` bits, by Machin's formula pi = 16 atan(1/5) - 4 atan(1/239) in integer arithmetic."""
    one = 1 << (bits + 16)

    def atan_inv(n: int) -> int:
        total, term, k, sign = 0, one // n, 1, 1
        while term:
            total += sign * (term // k)
            term //= n * n
            k += 2
            sign = -sign
        return total

    return Fraction(16 * atan_inv(5) - 4 * atan_inv(239), one)


PI = _pi(400)


def _parts(value: Fraction, bits: int, count: int, mant: int) -> tuple[float, ...]:
    """`value` as a sum of `count` floats: all but the last with `bits` significant bits (so that their products
    with a short integer are exact), the last rounded to `mant` bits (and then to a float)."""
    out = []
    for _ in range(count - 1):
        e = math.floor(math.log2(value)) - bits + 1
        head = Fraction(math.floor(value / Fraction(2) ** e)) * Fraction(2) ** e  # truncated: the rest stays > 0
        out.append(float(head))
        value -= head
    return (*out, _round_to(value, mant))


def _round_to(value: Fraction | float, bits: int) -> float:
    """`value` rounded to `bits` significant bits."""
    e = math.floor(math.log2(abs(float(value)))) - bits + 1
    return float(Fraction(round(Fraction(value) / Fraction(2) ** e)) * Fraction(2) ** e)


class _Format:
    """What the decompositions need to know of a float dtype."""

    def __init__(self, dt: DType, bits: DType, mant: int, bias: int, k_bits: int, k_split: int, parts: int, k_fma: int):
        self.dt, self.bits, self.mant, self.bias = dt, bits, mant, bias
        self.k_bits, self.k_split = k_bits, k_split  # sin: |k| < 2**k_bits, split at 2**k_split
        digits = mant + 1
        # pi/2 in parts of (digits - larger half of k) bits: k_hi * part and k_lo * part are exact
        self.half_pi = _parts(PI / 2, digits - max(k_split, k_bits - k_split), parts, digits)
        self.two_over_pi = float(2 / PI)
        # sin's common case: pi/2 in four parts of full precision, taken off with fused multiply-adds
        self.k_fma = k_fma
        self.half_pi_fma = _parts(PI / 2, digits, 4, digits)
        # 1/ln2 as a head of digits - digits//2 bits and a tail: the head times digits//2 bits is exact
        self.inv_ln2_hi = _round_to(_INV_LN2, digits - digits // 2)
        self.inv_ln2_lo = float(_INV_LN2 - Fraction(self.inv_ln2_hi))


def _ln2(bits: int) -> Fraction:
    """ln 2 to `bits` bits: ln 2 = 2 atanh(1/3) = 2 * sum 1/((2k+1) 3**(2k+1)), in integer arithmetic."""
    one = 1 << (bits + 16)
    total, power, k = 0, one // 3, 0
    while power:
        total += power // (2 * k + 1)
        power //= 9
        k += 1
    return Fraction(2 * total, one)


_INV_LN2 = 1 / _ln2(200)

F32 = _Format(dtypes.float32, dtypes.int32, mant=23, bias=127, k_bits=20, k_split=10, parts=5, k_fma=20)
F64 = _Format(dtypes.float64, dtypes.int64, mant=52, bias=1023, k_bits=30, k_split=15, parts=4, k_fma=15)
FORMATS = {dtypes.float32: F32, dtypes.float64: F64}

# 2**f = 1 + f*(c1 + f*(c2 + ...)) on |f| <= 1/2
_EXP2 = {
    # fit (see the module docstring): relative error 3e-9
    dtypes.float32: (
        0.6931471824645996,
        0.24022647738456726,
        0.05550359562039375,
        0.00961849931627512,
        0.0013390970416367054,
        0.00015329309098888189,
    ),
    # Taylor: (ln2)**k / k!, to k = 14 (truncation 4e-18)
    dtypes.float64: tuple(float(_ln2(200) ** k / math.factorial(k)) for k in range(1, 15)),
}
# sin(r) = r + r**3 * (s1 + r*r*(s2 + ...)) on |r| <= pi/4; float32 fits on |r| <= 0.89, as k = round(x*2/pi)
# rounded in float32 can be 1/16 off for |x| near 1.6e6
_SIN = {
    dtypes.float32: (-0.1666664034128189, 0.008331364020705223, -0.00019419309683144093),  # fit: 1.1e-8
    dtypes.float64: tuple((-1) ** k / math.factorial(2 * k + 1) for k in range(1, 9)),  # Taylor to r**17
}
# cos(r) = 1 - r*r/2 + r**4 * (c1 + r*r*(c2 + ...)) on |r| <= pi/4 (float32: 0.89)
_COS = {
    dtypes.float32: (0.04166662320494652, -0.001388632575981319, 2.433100962662138e-05),  # fit: 4.5e-10
    dtypes.float64: tuple((-1) ** k / math.factorial(2 * k) for k in range(2, 10)),  # Taylor to r**18
}


def _tan_taylor(n: int) -> tuple[float, ...]:
    """The first n coefficients of P in tan(r) = r + r**3 * P(r*r), exact: tan' = 1 + tan**2 gives the Taylor
    coefficients of tan = sum a_k r**k from a_0 = 0, a_1 = 1 by (k+1) a_(k+1) = sum_(i+j=k) a_i a_j (k >= 1)."""
    a = [Fraction(0), Fraction(1)]
    for k in range(1, 2 * n + 2):
        a.append(sum((a[i] * a[k - i] for i in range(k + 1)), Fraction(0)) / (k + 1))
    return tuple(float(a[2 * j + 3]) for j in range(n))


# tan(r) = r + r**3 * (t1 + r*r*(t2 + ...)) on |r| <= pi/4 (float32: 0.89, as for sin)
_TAN = {
    # fit (see the module docstring): relative error 1.3e-9
    dtypes.float32: (
        0.33333316445350647,
        0.13334013521671295,
        0.053875453770160675,
        0.022474873811006546,
        0.006714122835546732,
        0.007918739691376686,
        -0.003336726687848568,
        0.003081014845520258,
    ),
    dtypes.float64: _tan_taylor(28),  # Taylor to r**57: truncation 3e-18 at pi/4
}

# log(1+f) = f - f*f/2 + s*(f*f/2 + z*(a1 + z*(a2 + ...))), s = f/(2+f), z = s*s: the atanh series 2/(2k+1)
_LOG = {dt: tuple(2 / (2 * k + 1) for k in range(1, n + 1)) for dt, n in ((dtypes.float32, 4), (dtypes.float64, 10))}


# ---------------------------------------------------------------------------------------------------------------
# helpers on UOps (any float dtype, scalar or vector)


def _sub(a: UOp, b: UOp | float) -> UOp:
    return a.alu(Ops.SUB, b)


def _int_like(x: UOp, fmt: _Format) -> DType:
    return fmt.bits.vec(x.dtype.count)


def _floor(x: UOp) -> UOp:
    t = x.trunc()
    return (x < t).where(_sub(t, 1.0), t)


def _poly(x: UOp, coeffs: tuple[float, ...]) -> UOp:
    """coeffs[0] + coeffs[1]*x + ... by Horner's rule."""
    acc = x.const_like(coeffs[-1])
    for c in reversed(coeffs[:-1]):
        acc = acc * x + c
    return acc


def _two_sum(a: UOp, b: UOp) -> tuple[UOp, UOp]:
    """(s, e) with s = a + b rounded and s + e = a + b exactly (Knuth's TwoSum: no condition on a and b)."""
    s = a + b
    bb = _sub(s, a)
    return s, _sub(a, _sub(s, bb)) + _sub(b, bb)


def _pow2(n: UOp, fmt: _Format, dt: DType) -> UOp:
    """2**n for an integer n in the normal exponent range, from its bits."""
    return ((n + fmt.bias) << fmt.mant).bitcast(dt)


# ---------------------------------------------------------------------------------------------------------------
# the decompositions


def _round_by_adding(y: UOp, fmt: _Format) -> tuple[UOp, UOp]:
    """(n, n as an integer) for the integer n nearest y (|y| < 2**(mant - 1)): y + 1.5 * 2**mant rounds to an integer,
    which sits in the sum's low mantissa bits; the sum's bits minus the constant's are n. Four ops where a floor
    (truncation, a compare and a select) and a float-to-int conversion took seven; a NaN y gives some integer,
    and NaN stays NaN in the polynomial it scales."""
    magic = y.const_like(1.5 * 2.0**fmt.mant)
    t = y + magic
    it = _int_like(y, fmt)
    return _sub(t, magic), _sub(t.bitcast(it), magic.bitcast(it))


def _scale(p: UOp, n: UOp, fmt: _Format) -> UOp:
    """p * 2**n for an integer n from the clamped range of exp or exp2, by two powers of two that are each normal
    (2**n alone can overflow where p * 2**n does not): the second product overflows to inf or rounds into the
    denormals, once."""
    half = n >> 1
    return p * _pow2(half, fmt, p.dtype) * _pow2(_sub(n, half), fmt, p.dtype)


def xexp2(x: UOp) -> UOp:
    """2**x for a float32 or float64 x."""
    fmt = FORMATS[x.dtype.scalar()]
    lo, hi = -(fmt.bias + fmt.mant + 2), fmt.bias + 2  # 2**lo rounds to 0, 2**hi is inf
    xc = (x < lo).where(x.const_like(lo), (x.const_like(hi) < x).where(x.const_like(hi), x))  # NaN stays NaN
    n, ni = _round_by_adding(xc, fmt)
    f = _sub(xc, n)  # exact: n is the integer nearest xc
    p = f * _poly(f, _EXP2[fmt.dt]) + 1.0
    return _scale(p, ni, fmt)


# ln2 = LN2_HI + LN2_LO, LN2_HI with 16 significant bits: n * LN2_HI is exact for every n exp needs (|n| < 2**11)
LN2_HI = 45426 / 65536
LN2_LO = float(_ln2(200) - Fraction(LN2_HI))
# beyond these, e**x rounds to 0 or overflows to inf (clamping keeps n small; NaN passes through)
_EXP_RANGE = {dtypes.float32: (-110.0, 100.0), dtypes.float64: (-760.0, 720.0)}


def _exp_reduced(x: UOp, n: UOp) -> UOp:
    """e**(x - n*ln2) for an integer n nearest x/ln2: r = x - n*ln2 exactly (Cody-Waite: n*LN2_HI is exact), then
    2**(r/ln2) by the exp2 polynomial (|r/ln2| <= 1/2; the product's rounding costs under half an ulp)."""
    r = _sub(_sub(x, n * LN2_HI), n * LN2_LO)
    f = r * float(_INV_LN2)
    return f * _poly(f, _EXP2[x.dtype.scalar()]) + 1.0


def xexp(x: UOp) -> UOp:
    """e**x for a float32 or float64 x: x = n*ln2 + r with n = round(x/ln2) and r exact (Cody-Waite: n*LN2_HI is
    exact), then 2**(r/ln2) by the exp2 polynomial (|r/ln2| <= 1/2; the product's rounding costs under half an
    ulp) times 2**n from its bits, in two halves as in exp2."""
    fmt = FORMATS[x.dtype.scalar()]
    lo, hi = _EXP_RANGE[fmt.dt]
    xc = (x < lo).where(x.const_like(lo), (x.const_like(hi) < x).where(x.const_like(hi), x))  # NaN stays NaN
    n, ni = _round_by_adding(xc * float(_INV_LN2), fmt)
    return _scale(_exp_reduced(xc, n), ni, fmt)


def exp_small_f32(y: UOp) -> UOp:
    """e**y for float32 y in [-80, 80] (NaN stays NaN): `xexp` without its clamps, and with 2**n in one factor
    (normal for every n this range gives). Within 2 ulp."""
    n, n_int = _round_by_adding(y * float(_INV_LN2), F32)
    return _exp_reduced(y, n) * _pow2(n_int, F32, y.dtype)


# tanh(a) = a + a**3 * P(a*a) for 0 <= a < TANH_SMALL: a fit made for this file (relative-error least squares on
# Chebyshev nodes, reweighted towards minimax; relative error 1.6e-10, 0.78 ulp in float32 arithmetic)
TANH_SMALL = 0.625
_TANH_POLY = (
    -0.3333333134651184,
    0.1333320587873459,
    -0.053946785628795624,
    0.021700797602534294,
    -0.008177590556442738,
    0.0021431089844554663,
)


def xtanh(x: UOp, target: Target = Target()) -> UOp:
    """tanh of a float32 x: the polynomial below TANH_SMALL, 1 - 2/(e**2a + 1) above (no cancellation there:
    the result is over 1/2; e**2a = inf gives 1), with the sign bit of x (tanh(-0.0) is -0.0). About 1.4 ulp."""
    it = dtypes.int32.vec(x.dtype.count)
    bits = x.bitcast(it)
    a = (bits & 0x7FFFFFFF).bitcast(x.dtype)  # |x|; NaN stays NaN
    z = a * a
    small = a + a * z * _poly(z, _TANH_POLY)
    clamped = a.minimum(10.0)  # tanh(10) is 1.0
    e2a = _exp_twice(clamped) if target.fused_mulacc else exp_small_f32(clamped * 2.0)
    big = 1.0 - 2.0 * (e2a + 1.0).alu(Ops.RECIPROCAL)
    t = (a < TANH_SMALL).where(small, big)
    return (t.bitcast(it) | (bits & -(1 << 31))).bitcast(x.dtype)


# 2/ln2 as a head of 12 bits and a tail: their sum is 2/ln2 to 36 bits
_TWO_OVER_LN2_HI = _round_to(2 * _INV_LN2, 12)
_TWO_OVER_LN2_LO = float(2 * _INV_LN2 - Fraction(_TWO_OVER_LN2_HI))


def _exp_twice(a: UOp) -> UOp:
    """e**(2a) for float32 a in [0, 10], where MULACC is fused: 2a/ln2 = n + f with n rounded by an addition
    (`_round_by_adding`) and f by two fused multiply-adds (a*hi - n exact before its one rounding), no Cody-Waite
    reduction: 4 multiplies fewer than `exp_small_f32(2a)`. f's roundings cost e**2a about half an ulp, which
    tanh's 1 - 2/(e**2a + 1) shrinks by 0.6 or more, and the multiplies saved make tanh about 15% faster."""
    n, n_int = _round_by_adding(a * _TWO_OVER_LN2_HI, F32)
    f = a.alu(Ops.MULACC, a.const_like(_TWO_OVER_LN2_LO), a.alu(Ops.MULACC, a.const_like(_TWO_OVER_LN2_HI), -n))
    return (f * _poly(f, _EXP2[dtypes.float32]) + 1.0) * _pow2(n_int, F32, a.dtype)


def xlog2(x: UOp) -> UOp:
    """log2(x) for a float32 or float64 x."""
    fmt = FORMATS[x.dtype.scalar()]
    dt, it = x.dtype, _int_like(x, fmt)
    digits = fmt.mant + 1
    # denormals: scale into the normal range (exact), and take the scale off the exponent
    denormal = x < 2.0 ** (1 - fmt.bias)
    xs = denormal.where(x * 2.0**digits, x)
    bits = xs.bitcast(it)
    exponent = _sub(bits >> fmt.mant, fmt.bias)
    m = ((bits & ((1 << fmt.mant) - 1)) | (fmt.bias << fmt.mant)).bitcast(dt)  # in [1, 2)
    big = x.const_like(math.sqrt(2)) < m
    m = big.where(m * 0.5, m)
    exponent = exponent + big.cast(it) - denormal.cast(it) * digits
    f = _sub(m, 1.0)  # exact (Sterbenz)
    s = f.alu(Ops.FDIV, f + 2.0)
    z = s * s
    hfsq = f * f * 0.5
    r = z * _poly(z, _LOG[fmt.dt])
    # log(1+f) = hi + lo, hi = f - hfsq with its low half of the bits cleared (so hi * inv_ln2_hi is exact)
    keep = -(1 << (fmt.mant + 1 - digits // 2))  # a mask of the sign, the exponent and the high mantissa bits
    hi = (_sub(f, hfsq).bitcast(it) & keep).bitcast(dt)
    lo = _sub(_sub(f, hi), hfsq) + s * (hfsq + r)
    val_hi = hi * fmt.inv_ln2_hi
    val_lo = (lo + hi) * fmt.inv_ln2_lo + lo * fmt.inv_ln2_hi
    # exponent + val_hi, exact (|exponent| >= 1 > |val_hi|, or exponent is 0): Fast2Sum
    ef = exponent.cast(dt)
    w = ef + val_hi
    val_lo = val_lo + (_sub(ef, w) + val_hi)
    y = val_lo + w
    y = (x == math.inf).where(x, y)
    y = ((x < 0.0) | (x != x)).where(x.const_like(math.nan), y)
    return (x == 0.0).where(x.const_like(-math.inf), y)


def _nearest_k(x: UOp, fmt: _Format, fused: bool) -> tuple[UOp, UOp]:
    """(k, q): k = round(x*2/pi) as a float and q = k mod 4 as an int, for |x*2/pi| < 2**(mant-1), by adding
    1.5 * 2**mant (the sum rounds to an integer, whose low bits are q). `fused`: x*2/pi + 1.5 * 2**mant as one
    MULACC (rounded once); else a product and a sum, as a target without a fused multiply-add computes them
    (k only has to be near x*2/pi there)."""
    magic = 1.5 * 2.0**fmt.mant
    if fused:
        shifted = x.alu(Ops.MULACC, x.const_like(fmt.two_over_pi), x.const_like(magic))
    else:
        shifted = x * fmt.two_over_pi + magic
    return _sub(shifted, magic), shifted.bitcast(_int_like(x, fmt)) & 3


def _reduce_fma(x: UOp, fmt: _Format) -> tuple[UOp, UOp, UOp]:
    """(q, r_hi, r_lo) with x = k*pi/2 + r_hi + r_lo, q = k mod 4 (an int), |r| <= pi/4 (a little more where
    x*2/pi rounds), for |x| < 2**k_fma, with fused multiply-adds (explicit MULACCs: no device rounds their
    products). k and q from `_nearest_k`. With pi/2 = p1 + p2 + p3 + p4 (full-precision parts):
    - x - k*p1 is exact: a multiple of p1's last bit (or of x's, for |x| < 1), below 1;
    - k*p2 = ph + pl exactly (pl from an FMA), and (x - k*p1) - ph = r_hi + e exactly by Fast2Sum: x - k*p1 is
      a multiple of ph's last bit, which is all Fast2Sum needs;
    - r_lo = e - pl - k*p3 - k*p4, whose roundings are far below an ulp of r_hi."""
    k, q = _nearest_k(x, fmt, fused=True)
    p1, p2, p3, p4 = fmt.half_pi_fma
    r1 = k.alu(Ops.MULACC, k.const_like(-p1), x)
    ph = k * p2
    pl = k.alu(Ops.MULACC, k.const_like(p2), -ph)
    r_hi = _sub(r1, ph)
    e = _sub(_sub(r1, r_hi), ph)
    r_lo = k.alu(Ops.MULACC, k.const_like(-p4), k.alu(Ops.MULACC, k.const_like(-p3), _sub(e, pl)))
    return q, r_hi, r_lo


def _quadrant(k: UOp, fmt: _Format) -> UOp:
    """k mod 4 as an int, for any float k: k - 4*trunc(k/4) is exact (a float beyond 2**55 is a multiple of 8)."""
    return _sub(k, (k * 0.25).trunc() * 4.0).cast(fmt.bits.vec(k.dtype.count)) & 3


def _cody_waite(x: UOp, k: UOp, fmt: _Format) -> tuple[UOp, UOp]:
    """(r_hi, r_lo) = x - k*pi/2 for an integer k (a float), |k| < 2**k_bits, with no fused multiply-add. k is
    split into k_hi (a multiple of 2**k_split) and k_lo (|k_lo| < 2**k_split), and every part of pi/2 has few
    enough bits that k_hi * part and k_lo * part are exact; the sum of the products is taken from x with
    two-sums, whose errors are kept in r_lo. No product is rounded, so a device that contracts a*b+c into a
    fused multiply-add (or not) computes the same."""
    scale = 2.0**fmt.k_split
    k_hi = (k * (1 / scale)).trunc() * scale  # k_lo has the sign of k: the first differences stay exact
    k_lo = _sub(k, k_hi)
    p = fmt.half_pi
    # the first two differences are exact: each is a multiple of the last bit of x or of p[0] (the finer), and
    # below 2**(mant+1) times it
    s = _sub(_sub(x, k_hi * p[0]), k_lo * p[0])
    err = x.const_like(0.0)
    for part in p[1:-1]:
        for kk in (k_hi, k_lo):
            s, e = _two_sum(s, kk * -part)
            err = err + e
    s, e = _two_sum(s, k * -p[-1])
    err = err + e
    r_hi = s + err
    r_lo = _sub(err, _sub(r_hi, s))  # Fast2Sum: |err| is below an ulp of s
    return r_hi, r_lo


def _reduce_cody_waite(x: UOp, fmt: _Format) -> tuple[UOp, UOp, UOp]:
    """(q, r_hi, r_lo) with x = k*pi/2 + r_hi + r_lo, q = k mod 4 (an int), |r| <= pi/4 (a little more where
    x*2/pi rounds), for |k| < 2**k_bits (`_cody_waite`); beyond, a fallback (float64 only)."""
    k_any = _floor(x * fmt.two_over_pi + 0.5)
    inside = x.const_like(-(2.0**fmt.k_bits)) < k_any
    inside = inside & (k_any < 2.0**fmt.k_bits)  # NaN and inf: False
    k = inside.where(k_any, x.const_like(0.0))
    r_hi, r_lo = _cody_waite(x, k, fmt)
    # beyond 2**k_bits (float64 only; float32 has Payne-Hanek there), a documented fallback: the same parts with
    # rounded products, r clamped to the reduced range. Not accurate, but a sine of something near x, in [-1, 1]
    p = fmt.half_pi
    finite = _sub(x, x) == 0.0
    k_far = finite.where(k_any, x.const_like(0.0))
    r_far = x
    for part in p:
        r_far = _sub(r_far, k_far * part)
    r_far = (r_far < -1.0).where(r_far.const_like(-1.0), (r_far > 1.0).where(r_far.const_like(1.0), r_far))
    q = _quadrant(inside.where(k, k_far), fmt)
    return q, inside.where(r_hi, r_far), inside.where(r_lo, x.const_like(0.0))


def _reduce_two_sums(x: UOp, fmt: _Format) -> tuple[UOp, UOp, UOp]:
    """`_reduce_fma`'s (q, r_hi, r_lo) for |x| < 2**k_fma without a fused multiply-add: k and q from
    `_nearest_k`, then `_cody_waite`. Other lanes get garbage, never used."""
    k, q = _nearest_k(x, fmt, fused=False)
    return q, *_cody_waite(x, k, fmt)


# Payne-Hanek for float32: the bits of 2/pi, after 5 zero bits (so that a window may start before its first
# bit), in 32-bit words; a window of 96 bits starting at bit E - 152 + _PH_PAD (E the biased exponent of x,
# |x| >= 2**20: bits of 2/pi before the window only add multiples of 4 to x*2/pi)
_PH_PAD = 5
_PH_LAST = 254 - 152 + _PH_PAD  # the window of the largest exponent
_TWO_OVER_PI_WORDS = tuple(int(2 / PI / 2**_PH_PAD * 2 ** (32 * (i + 1))) & 0xFFFFFFFF for i in range(7))
# pi/2 as a 12-bit head, a 12-bit next part (their sum is pi/2 to 24 bits) and a float32 tail
_PH_HALF_PI = _parts(PI / 2, 12, 3, 24)


def _split12(x: UOp) -> tuple[UOp, UOp]:
    """x (float32) as a + b, each with at most 12 significant bits (their products with 12-bit numbers are
    exact)."""
    it = dtypes.int32.vec(x.dtype.count)
    a = (x.bitcast(it) & -4096).bitcast(x.dtype)
    return a, _sub(x, a)


def _ph_window(x: UOp) -> tuple[UOp, UOp, UOp]:
    """(mantissa, word, offset) for Payne-Hanek: the 24-bit mantissa of |x| (int32), and where the window of
    |x| starts in the padded 2/pi: `word` of `_TWO_OVER_PI_WORDS` (0 to 3) and `offset` bits into it."""
    bits = x.bitcast(dtypes.int32.vec(x.dtype.count)) & 0x7FFFFFFF
    mant = (bits & 0x7FFFFF) | 0x800000
    start = _sub(bits >> 23, 152 - _PH_PAD)
    start = (start < 0).where(start.const_like(0), (start > _PH_LAST).where(start.const_like(_PH_LAST), start))
    return mant, start >> 5, start & 31


def _signed(x: UOp, q: UOp, r_hi: UOp, r_lo: UOp) -> tuple[UOp, UOp, UOp]:
    """The reduction of x from that of |x|: for a negative x, k and r change sign (q becomes -q mod 4)."""
    negative = x < 0.0
    q = negative.where(_sub(q.const_like(4), q) & 3, q)
    return q, negative.where(-r_hi, r_hi), negative.where(-r_lo, r_lo)


def _reduce_payne_hanek_f32(x: UOp) -> tuple[UOp, UOp, UOp]:
    """(q, r_hi, r_lo) with x = k*pi/2 + r_hi + r_lo, q = k mod 4 (int32), |r| <= pi/4, for float32 |x| >= 2**20
    (any size: the product of x's 24-bit mantissa and a 96-bit window of the bits of 2/pi, in 64-bit
    integers, gives x*2/pi mod 4 to 62 bits; the bits of 2/pi before the window only add multiples of 4)."""
    count = x.dtype.count
    i32, u64, i64 = dtypes.int32.vec(count), dtypes.uint64.vec(count), dtypes.int64.vec(count)
    mant32, word, offset32 = _ph_window(x)
    mant, offset = mant32.cast(u64), offset32.cast(u64)
    words = _TWO_OVER_PI_WORDS

    def window(i: int) -> UOp:
        # bits start + 32*i .. start + 32*i + 31 of the padded 2/pi: two words chosen by `word`, shifted
        pairs = [UOp.const(u64, (words[w + i] << 32) | words[w + i + 1]) for w in range(4)]
        pair = (word == 0).where(pairs[0], (word == 1).where(pairs[1], (word == 2).where(pairs[2], pairs[3])))
        return (pair << offset) >> 32

    top, mid, low = (mant * window(i) for i in range(3))
    low32 = (1 << 32) - 1
    t1 = (low >> 32) + (mid & low32)
    t2 = (t1 >> 32) + (mid >> 32) + top
    q = ((t2 >> 30) & 3).cast(i32)
    frac = (((t2 & ((1 << 30) - 1)) << 32) | (t1 & low32)).bitcast(i64)  # (x*2/pi mod 1) * 2**62
    up = frac > (1 << 61) - 1  # the fraction is at least 1/2: round k up, the fraction becomes negative
    q = (up.where(q + 1, q)) & 3
    frac = up.where(_sub(frac, 1 << 62), frac)
    # frac * 2**-62 as a float32 pair: the top 32 bits rounded, then the exact rest (each cast rounds once)
    head = (frac >> 30).cast(x.dtype)
    rest = _sub(frac, head.cast(i64) * (1 << 30)).cast(x.dtype)
    f_hi, f_lo = head * 2.0**-32, rest * 2.0**-62
    # (f_hi + f_lo) * pi/2 as r_hi + r_lo: Dekker's exact product of f_hi and pi/2's 24-bit head
    p_a, p_b, p_c = _PH_HALF_PI
    f_a, f_b = _split12(f_hi)
    r_hi = f_hi * (p_a + p_b)
    err = _sub(f_a * p_a, r_hi) + f_a * p_b + f_b * p_a + f_b * p_b
    r_lo = err + (f_hi * p_c + f_lo * (p_a + p_b))
    return _signed(x, q, r_hi, r_lo)


def _reduce_payne_hanek_f32_u32(x: UOp) -> tuple[UOp, UOp, UOp]:
    """`_reduce_payne_hanek_f32` in 32-bit integers, for a target without 64-bit ones. The same window of 2/pi
    as six 16-bit limbs, times the mantissa as two limbs (16 and 8 bits), column by column: a product of two
    limbs fits in 32 bits, a column (at most four halves of products and a carry) in 19, and the carries are
    propagated up. The columns from 2**96 on (multiples of 4 in x*2/pi) are left out; the 64 bits below them and
    above 2**32 are the 64-bit version's t2 and t1, so q and the 62-bit fraction are the same. The fraction then
    becomes three exact floats (24, 24 and 14 bits), summed by a two-sum; its product with pi/2 is taken from
    exact partial products and a two-sum: no rounded product is subtracted from another (Dekker's product
    does), so a device that contracts a*b+c into a fused multiply-add computes the same."""
    count = x.dtype.count
    i32, u32 = dtypes.int32.vec(count), dtypes.uint32.vec(count)
    mant32, word, offset32 = _ph_window(x)
    mant, offset = mant32.cast(u32), offset32.cast(u32)
    words = _TWO_OVER_PI_WORDS

    def word_at(j: int) -> UOp:
        # word `word + j` of the padded 2/pi
        w = [UOp.const(u32, words[n + j]) for n in range(4)]
        return (word == 0).where(w[0], (word == 1).where(w[1], (word == 2).where(w[2], w[3])))

    chosen = [word_at(j) for j in range(4)]
    # window word i: bits start + 32*i .. start + 32*i + 31, the second shift in two steps, neither of them by
    # 32 bits (undefined in C; WGSL takes the amount mod 32)
    window = [(chosen[i] << offset) | ((chosen[i + 1] >> 1) >> _sub(offset.const_like(31), offset)) for i in range(3)]
    limbs = [half for w in window for half in (w >> 16, w & 0xFFFF)]  # limb j weighs 2**(16 * (5 - j))
    columns: list[list[UOp]] = [[] for _ in range(6)]  # column c weighs 2**(16 * c)
    for j, limb in enumerate(limbs):
        for m, up_by in ((mant & 0xFFFF, 0), (mant >> 16, 1)):
            c = 5 - j + up_by
            if c > 5:
                continue
            product = m * limb
            columns[c].append(product & 0xFFFF)
            if c < 5:
                columns[c + 1].append(product >> 16)
    digits: list[UOp] = []
    carry: UOp | None = None
    for column in columns:
        total = column[0]
        for term in column[1:] + ([carry] if carry is not None else []):
            total = total + term
        digits.append(total & 0xFFFF)
        carry = total >> 16
    d2, d3, d4, d5 = digits[2:]  # bits 32 .. 95 of the product; x*2/pi mod 4 is the product times 2**-94
    up = (d5 >> 13) & 1  # the fraction is at least 1/2: round k up, the fraction becomes negative
    q = ((d5 >> 14) + up).cast(i32) & 3
    dt = x.dtype
    # the fraction (bits 32 .. 93) in pieces of 24, 24 and 14 bits, each exact as a float; minus 1 if rounded up
    # (exact: the piece is at least 1/2 then)
    f2 = _sub((((d5 & 0x3FFF) << 10) | (d4 >> 6)).cast(dt) * 2.0**-24, up.cast(dt))
    f1 = (((d4 & 0x3F) << 18) | (d3 << 2) | (d2 >> 14)).cast(dt) * 2.0**-48
    f0 = (d2 & 0x3FFF).cast(dt) * 2.0**-62
    f_hi, e = _two_sum(f2, f1)
    f_lo = e + f0
    # (f_a + f_b + f_lo) * (p_a + p_b + p_c): the products of 12-bit parts are exact, the rest 2**-24 smaller
    p_a, p_b, p_c = _PH_HALF_PI
    f_a, f_b = _split12(f_hi)
    r_hi, e = _two_sum(f_a * p_a, f_a * p_b + f_b * p_a)
    r_lo = e + (f_b * p_b + f_hi * p_c + f_lo * (p_a + p_b))
    return _signed(x, q, r_hi, r_lo)


def _sin_reduced(q: UOp, r: UOp, r_lo: UOp, quadrant: int) -> UOp:
    """sin(k*pi/2 + r + r_lo + quadrant*pi/2) from q = k mod 4 and the reduced argument (r, r_lo)."""
    fmt = FORMATS[r.dtype.scalar()]
    z = r * r
    # sin(r + r_lo) = sin(r) + r_lo*cos(r), cos(r) ~ 1 - z/2 at this size
    sin_r = r + (r * z * _poly(z, _SIN[fmt.dt]) + r_lo * (1.0 - z * 0.5))
    # cos(r + r_lo) = cos(r) - r_lo*sin(r); 1 - z/2 rounded, its rounding error added back
    hz = z * 0.5
    w = 1.0 - hz
    cos_r = w + ((_sub(_sub(r.const_like(1.0), w), hz)) + _sub(z * z * _poly(z, _COS[fmt.dt]), r * r_lo))
    q = q + quadrant if quadrant else q
    value = ((q & 1) == 0).where(sin_r, cos_r)  # quadrants 0 and 2: +-sin(r), 1 and 3: +-cos(r)
    return ((q & 2) == 0).where(value, -value)


def _split_half(x: UOp, fmt: _Format) -> tuple[UOp, UOp]:
    """x as a + b: a the leading digits//2 significant bits of x (the others cleared), b = x - a (exact). a*a and
    a*b are exact products; b*b is too in float32 (12 bits each), and in float64 rounds far below its use here."""
    digits = fmt.mant + 1
    a = (x.bitcast(_int_like(x, fmt)) & -(1 << (digits - digits // 2))).bitcast(x.dtype)
    return a, _sub(x, a)


def _tan_reduced(q: UOp, r: UOp, r_lo: UOp, fused: bool) -> UOp:
    """tan(k*pi/2 + r + r_lo) from q = k mod 4 and the reduced argument: tan(r) for an even k, -1/tan(r) for an
    odd one (tan has period pi). tan(r) is a pair t_hi + t_lo (Fast2Sum of r and the polynomial's part), so t_hi
    is tan(r) rounded once. 1/(t_hi + t_lo) is y0 = 1/t_hi refined by one Newton step, y0 + y0*(e - t_lo*y0) with
    the residual e = 1 - t_hi*y0 computed exactly (a fused multiply-add; where MULACC is not fused, `fused`
    False, from exact products of half-length parts), so that it too rounds about once, whatever the accuracy
    of the device's division."""
    fmt = FORMATS[r.dtype.scalar()]
    z = r * r
    part = r * z * _poly(z, _TAN[fmt.dt])  # tan(r) - r: at most 0.39 |r|
    # tan(r + r_lo) = tan(r) + r_lo*(1 + tan(r)**2) (not 1 + r*r: r_lo is half an ulp of r, that is 0.25 ulp)
    t0 = r + part
    tail = part + r_lo * (t0 * t0 + 1.0)
    t_hi = r + tail
    t_lo = _sub(tail, _sub(t_hi, r))  # Fast2Sum: |tail| < |r|
    y0 = t_hi.alu(Ops.RECIPROCAL)
    if fused:
        e = t_hi.alu(Ops.MULACC, -y0, y0.const_like(1.0))
    else:
        # 1 - t_a*y_a is exact (Sterbenz), the other products are exact and small: e to far more than it needs
        t_a, t_b = _split_half(t_hi, fmt)
        y_a, y_b = _split_half(y0, fmt)
        e = _sub(_sub(_sub(_sub(y0.const_like(1.0), t_a * y_a), t_a * y_b), t_b * y_a), t_b * y_b)
    cot = y0 + y0 * _sub(e, t_lo * y0)
    return ((q & 1) == 0).where(t_hi, -cot)


def _rarely(cond: UOp, rare: UOp, common: UOp) -> UOp:
    """where(cond, rare, common), where cond is rarely true: `rare` is only computed when some lane needs it."""
    return UOp(Ops.WHERE, common.dtype, (cond, rare, common), RARE)


def _on_reduction(x: UOp, target: Target, evaluate: Callable[[UOp, UOp, UOp], UOp]) -> UOp:
    """evaluate(q, r_hi, r_lo) for x = k*pi/2 + r_hi + r_lo, q = k mod 4, with the reductions `target` can run
    (one reduction whatever the function: sin, cos and tan share it); nan for inf and nan."""
    fmt = FORMATS[x.dtype.scalar()]
    # float32: Payne-Hanek (any size; in 32-bit integers where there are no 64-bit ones); float64: Cody-Waite
    # with a split k, a fallback beyond 1.6e9
    if fmt is F32:
        far = _reduce_payne_hanek_f32(x) if target.int64 else _reduce_payne_hanek_f32_u32(x)
    else:
        far = _reduce_cody_waite(x, fmt)
    ret = evaluate(*far)
    ret = (x.alu(Ops.SUB, x) != 0.0).where(x.const_like(math.nan), ret)  # inf - inf and nan - nan are nan
    # the common case, |x| < 2**k_fma, reduces with fused multiply-adds, or exact products and two-sums
    # where MULACC is not fused; larger arguments (and nan, inf) take the branch
    bound = 2.0**fmt.k_fma
    common = x * x < bound * bound
    near = _reduce_fma(x, fmt) if target.fused_mulacc else _reduce_two_sums(x, fmt)
    return _rarely(common.logical_not(), ret, evaluate(*near))


def _itself_where_tiny(x: UOp, ret: UOp) -> UOp:
    """x where sin(x) and tan(x) round to x (x**3/3 is below half an ulp of x), else ret: keeps the sign of 0 and
    the denormals exact."""
    tiny = 2.0 ** (-(FORMATS[x.dtype.scalar()].mant + 3) // 2)
    return (x * x < tiny * tiny).where(x, ret)


def xsin(x: UOp, quadrant: int = 0, target: Target = Target()) -> UOp:
    """sin(x + quadrant*pi/2) for a float32 or float64 x: sin for quadrant 0, cos for quadrant 1, with the
    reductions `target` can run."""
    ret = _on_reduction(x, target, lambda q, r, r_lo: _sin_reduced(q, r, r_lo, quadrant))
    return _itself_where_tiny(x, ret) if quadrant == 0 else ret


def xtan(x: UOp, target: Target = Target()) -> UOp:
    """tan of a float32 or float64 x: sin's reduction (`target`'s), then the tan polynomial (`_tan_reduced`)."""
    ret = _on_reduction(x, target, lambda q, r, r_lo: _tan_reduced(q, r, r_lo, target.fused_mulacc))
    return _itself_where_tiny(x, ret)


def _in_wide_float(fn: Callable[[UOp], UOp]) -> Callable[[UOp], UOp]:
    """`fn` on float32 and float64 as they are; narrower floats compute in float32 and round once."""

    def wrapper(x: UOp) -> UOp:
        scalar = x.dtype.scalar()
        if scalar in FORMATS:
            return fn(x)
        wide = dtypes.float32.vec(x.dtype.count)
        return fn(x.cast(wide)).cast(x.dtype)

    return wrapper


def _in_float32(fn: Callable[[UOp], UOp]) -> Callable[[UOp], UOp]:
    """`fn`, written for float32, on any float: others compute in float32 and round once (float64 loses its
    precision: Tensor.tanh builds float64 from other ops instead)."""

    def wrapper(x: UOp) -> UOp:
        if x.dtype.scalar() is dtypes.float32:
            return fn(x)
        return fn(x.cast(dtypes.float32.vec(x.dtype.count))).cast(x.dtype)

    return wrapper


def _sin(x: UOp, ctx: Target | None) -> UOp:
    """xsin for the rewrite's Target (its ctx; none: the default)."""
    return _in_wide_float(lambda v: xsin(v, target=ctx or Target()))(x)


def _cos(x: UOp, ctx: Target | None) -> UOp:
    """cos: xsin with the quadrant one further, for the rewrite's Target."""
    return _in_wide_float(lambda v: xsin(v, quadrant=1, target=ctx or Target()))(x)


def _tanh(x: UOp, ctx: Target | None) -> UOp:
    """xtanh for the rewrite's Target."""
    return _in_float32(lambda v: xtanh(v, target=ctx or Target()))(x)


def _tan(x: UOp, ctx: Target | None) -> UOp:
    """xtan for the rewrite's Target."""
    return _in_wide_float(lambda v: xtan(v, target=ctx or Target()))(x)


# the rewrite's ctx is the Target of the device compiled for (`target_of(renderer)`); SIN, COS, TAN and TANH need it
decompositions = PatternMatcher(
    [
        # EXP2(x) -> 2**round(x) (from bits) * 2**f (polynomial)
        (UPat(Ops.EXP2, src=(UPat.var("x"),)), _in_wide_float(xexp2), "exp2 -> bits * polynomial"),
        # EXP(x) -> 2**n (from bits) * 2**(r/ln2) (polynomial), x = n*ln2 + r
        (UPat(Ops.EXP, src=(UPat.var("x"),)), _in_wide_float(xexp), "exp -> bits * polynomial"),
        # TANH(x) -> odd polynomial near 0, 1 - 2/(e**2|x| + 1) beyond, with the sign of x (float32)
        (UPat(Ops.TANH, src=(UPat.var("x"),)), _tanh, "tanh -> polynomial or exp"),
        # LOG2(x) -> exponent (from bits) + log2(mantissa) (atanh series)
        (UPat(Ops.LOG2, src=(UPat.var("x"),)), _in_wide_float(xlog2), "log2 -> exponent + polynomial"),
        # SIN(x) -> +-sin(r) or +-cos(r), x = k*pi/2 + r
        (UPat(Ops.SIN, src=(UPat.var("x"),)), _sin, "sin -> reduction + polynomial"),
        # COS(x) -> SIN's code with the quadrant k + 1
        (UPat(Ops.COS, src=(UPat.var("x"),)), _cos, "cos -> reduction + polynomial"),
        # TAN(x) -> tan(r) or -1/tan(r) by the parity of k, x = k*pi/2 + r
        (UPat(Ops.TAN, src=(UPat.var("x"),)), _tan, "tan -> reduction + polynomial"),
    ]
)
