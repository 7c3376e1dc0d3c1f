"""exec_alu, the reference semantics of ALU ops, against numpy on every dtype numpy has."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from zeptograd.dtype import DType, dtypes
from zeptograd.uop import Ops
from zeptograd.uop.alu import exec_alu

INT_DTYPES = [dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16, dtypes.int32, dtypes.uint32, dtypes.int64]
FLOAT_DTYPES = [dtypes.float16, dtypes.float32, dtypes.float64]
NP = {dt: np.dtype(dt.name) for dt in INT_DTYPES + FLOAT_DTYPES}

NP_BINARY = {
    Ops.ADD: np.add,
    Ops.SUB: np.subtract,
    Ops.MUL: np.multiply,
    Ops.FDIV: np.divide,
    Ops.IDIV: np.floor_divide,
    Ops.MOD: np.mod,
    Ops.MAX: np.maximum,
    Ops.CMPLT: np.less,
    Ops.CMPNE: np.not_equal,
    Ops.CMPEQ: np.equal,
    Ops.AND: np.bitwise_and,
    Ops.OR: np.bitwise_or,
    Ops.XOR: np.bitwise_xor,
}


def int_samples(dt: DType) -> list[int]:
    lo, hi = int(dtypes.min(dt)), int(dtypes.max(dt))
    return sorted(v for v in {lo, lo + 1, -7, -1, 0, 1, 2, 3, 7, 100, hi - 1, hi} if lo <= v <= hi)


@pytest.mark.parametrize("dt", INT_DTYPES)
@pytest.mark.parametrize("op", [op for op in NP_BINARY if op is not Ops.FDIV])
def test_int_binary_ops_match_numpy(dt: DType, op: Ops):
    out_dt = dtypes.bool if op in (Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ) else dt
    for a, b in itertools.product(int_samples(dt), repeat=2):
        got = exec_alu(op, out_dt, (a, b))
        if op in (Ops.IDIV, Ops.MOD) and b == 0:
            assert got is None  # undefined: never folded
            continue
        with np.errstate(all="ignore"):
            expected = NP_BINARY[op](np.array(a, NP[dt]), np.array(b, NP[dt]))
        assert got == expected.item(), (op, dt, a, b)


@pytest.mark.parametrize("dt", FLOAT_DTYPES)
@pytest.mark.parametrize("op", [Ops.ADD, Ops.SUB, Ops.MUL, Ops.FDIV, Ops.MAX, Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ])
def test_float_binary_ops_match_numpy(dt: DType, op: Ops):
    samples = [0.0, -0.0, 1.0, -2.5, 3.0e4, 1e-3, 65504.0, math.inf, -math.inf, math.nan]
    samples = [float(np.array(s, NP[dt])) for s in samples]
    out_dt = dtypes.bool if op in (Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ) else dt
    for a, b in itertools.product(samples, repeat=2):
        got = exec_alu(op, out_dt, (a, b))
        with np.errstate(all="ignore"):
            expected = NP_BINARY[op](np.array(a, NP[dt]), np.array(b, NP[dt])).item()
        if isinstance(expected, float) and math.isnan(expected):
            assert math.isnan(got), (op, dt, a, b)
        elif op is Ops.MAX and a == b:
            assert got == expected  # max(0.0, -0.0): IEEE 754 leaves the sign open (numpy differs by dtype)
        else:
            assert got == expected and math.copysign(1, got) == math.copysign(1, expected), (op, dt, a, b, got)


@pytest.mark.parametrize("dt", FLOAT_DTYPES)
@pytest.mark.parametrize(
    ("op", "fn"),
    [
        (Ops.EXP2, np.exp2),
        (Ops.EXP, np.exp),
        (Ops.TANH, np.tanh),
        (Ops.LOG2, np.log2),
        (Ops.SIN, np.sin),
        (Ops.COS, np.cos),
        (Ops.TAN, np.tan),
        (Ops.SQRT, np.sqrt),
        (Ops.RECIPROCAL, np.reciprocal),
        (Ops.NEG, np.negative),
        (Ops.TRUNC, np.trunc),
    ],
)
def test_float_unary_ops_match_numpy(dt: DType, op: Ops, fn):
    samples = [0.0, -0.0, 0.5, -1.5, 2.0, 10.0, 100.0, -100.0, 1e-4, math.inf, -math.inf, math.nan]
    for a in samples:
        a = float(np.array(a, NP[dt]))
        got = exec_alu(op, dt, (a,))
        with np.errstate(all="ignore"):
            expected = fn(np.array(a, np.float64)).astype(NP[dt]).item()
        if math.isnan(expected):
            assert math.isnan(got), (op, dt, a)
        else:
            assert got == expected, (op, dt, a, got, expected)


def test_shifts_and_where():
    assert exec_alu(Ops.SHL, dtypes.uint8, (0b1011_0001, 2)) == 0b1100_0100
    assert exec_alu(Ops.SHR, dtypes.int8, (-128, 3)) == -16  # arithmetic shift, as numpy's right_shift
    assert exec_alu(Ops.SHR, dtypes.int8, (-128, 3)) == np.right_shift(np.int8(-128), np.int8(3))
    assert exec_alu(Ops.SHL, dtypes.int32, (1, 32)) is None and exec_alu(Ops.SHL, dtypes.int32, (1, -1)) is None
    assert (
        exec_alu(Ops.WHERE, dtypes.int32, (True, 1, 2)) == 1 and exec_alu(Ops.WHERE, dtypes.int32, (False, 1, 2)) == 2
    )
    assert exec_alu(Ops.MULACC, dtypes.uint8, (16, 16, 1)) == 1


@pytest.mark.parametrize("dt", [dtypes.float32, dtypes.float64])
def test_fused_multiply_add_that_overflows(dt: DType):
    # a*b + c beyond the largest float: +-inf, as IEEE's fma gives (math.fma is 3.13+; the exact value decides)
    big = float(np.finfo(np.float32 if dt is dtypes.float32 else np.float64).max)
    for a, b, c in ((big, 4.0, -1.0), (-big, 4.0, 1.0), (big, -4.0, -big)):
        want = math.inf if a * b > 0 else -math.inf
        assert exec_alu(Ops.MULACC, dt, (a, b, c)) == want


def test_undefined_and_bad_ops():
    assert exec_alu(Ops.SQRT, dtypes.int32, (4,)) is None
    assert exec_alu(Ops.IDIV, dtypes.float32, (1.0, 2.0)) is None
    assert exec_alu(Ops.FDIV, dtypes.int32, (1, 2)) is None
    with pytest.raises(ValueError, match="not an ALU op"):
        exec_alu(Ops.LOAD, dtypes.int32, (1,))
