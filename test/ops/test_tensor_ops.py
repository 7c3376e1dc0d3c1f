"""Every Tensor op against numpy: odd shapes (size 0 and 1), broadcasting, non-contiguous inputs, every dtype.

numpy is the oracle; no expected value comes from zeptograd itself. References are computed in float64 (or
int64) and cast to the dtype zeptograd must produce, so they are correctly rounded. Float16 inputs are
multiples of 1/8 in [-2, 2]: sums, products and dot products of a few of them are exact in float16, so
float16 results can be compared tightly whatever order the kernel adds in.

The PYTHON device is an interpreter: every test that runs on it keeps its tensors at 64 elements or fewer.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from zeptograd import Device, GlobalCounters, Tensor, dtypes
from zeptograd.dtype import DType

DEVICES = ["CPU", "PYTHON"]
DTYPES = [dtypes.float32, dtypes.float16, dtypes.int32, dtypes.bool]
FLOATS = [dtypes.float32, dtypes.float16]
NP = {
    dtypes.float32: np.float32,
    dtypes.float16: np.float16,
    dtypes.int32: np.int32,
    dtypes.bool: np.bool_,
    dtypes.float64: np.float64,
}
# float16: about 2 ulp (ulp is 2**-10 relative); float32: a few ulp, for ops computed by x * (1/y) or by
# polynomial approximations of exp2/log2/sin
TOL = {dtypes.float32: {"rtol": 1e-5, "atol": 1e-6}, dtypes.float16: {"rtol": 4e-3, "atol": 1e-3}}


# ---------------------------------------------------------------------------------------------------------------
# helpers


def data(shape: tuple[int, ...], dtype: DType, seed: int = 0, kind: str = "any") -> np.ndarray:
    """Deterministic test data. kind: "any", "nonzero" (a divisor) or "positive" (log2/sqrt input)."""
    rng = np.random.default_rng(seed)
    if dtype == dtypes.bool:
        return rng.random(shape) < 0.5
    if dtype == dtypes.int32:
        a = rng.integers(-10, 11, size=shape)
        if kind == "nonzero":
            a = np.where(a == 0, 3, a)
        if kind == "positive":
            a = np.abs(a) + 1
        return a.astype(np.int32)
    if dtype == dtypes.float16:
        a = rng.integers(-16, 17, size=shape) / 8  # exact in float16, and so are small sums and products
    else:
        a = rng.uniform(-2, 2, size=shape)
    if kind == "nonzero":
        a = np.where(np.abs(a) < 0.25, 0.5, a)
    if kind == "positive":
        a = np.abs(a) + 0.125
    return np.asarray(a).astype(NP[dtype])


def check(t: Tensor, expected: Any, dtype: DType, **tol: float) -> None:
    """t has expected's shape, the dtype `dtype`, and expected's values (within tolerance for floats)."""
    expected = np.asarray(expected)
    assert t.dtype == dtype, f"dtype {t.dtype} != {dtype}"
    assert isinstance(t.shape, tuple)
    assert t.shape == expected.shape, f"shape {t.shape} != {expected.shape}"
    out = t.numpy()
    assert isinstance(out, np.ndarray)
    assert out.shape == expected.shape, f"numpy() shape {out.shape} != {expected.shape}"
    assert out.dtype == NP[dtype], f"numpy() dtype {out.dtype} != {NP[dtype]}"
    if dtypes.is_float(dtype):
        with np.errstate(over="ignore"):  # exp2(200) in float64 is inf in float32, as it should be
            want = expected.astype(np.float64).astype(NP[dtype]).astype(np.float64)
        np.testing.assert_allclose(out.astype(np.float64), want, equal_nan=True, **(tol or TOL[dtype]))
    else:
        np.testing.assert_array_equal(out, expected.astype(NP[dtype]))


def tensor(a: np.ndarray, device: str) -> Tensor:
    """A tensor of a's values. 0-d arrays go in as a Python scalar with an explicit dtype, so that tests of other
    ops do not all fail on one constructor bug; test_constructor_numpy_0d checks 0-d numpy input itself."""
    if a.ndim == 0:
        return Tensor(a.item(), dtype={v: k for k, v in NP.items()}[a.dtype.type], device=device)
    return Tensor(a, device=device)


def wide(a: np.ndarray) -> np.ndarray:
    """a in float64 (floats) or int64 (ints); bools stay bool: numpy's bool arithmetic is logical."""
    if a.dtype == np.bool_:
        return a
    return a.astype(np.float64 if a.dtype.kind == "f" else np.int64)


def shape_in(msg: str, shape: tuple[int, ...]) -> bool:
    """The message names this shape: (3, 2), [3, 2], (4,) or [4]."""
    inner = ", ".join(str(s) for s in shape)
    return any(s in msg for s in (f"({inner})" if len(shape) != 1 else f"({inner},)", f"[{inner}]"))


# Non-contiguous inputs of shape (3, 4): each made by a movement op from a base of another shape.
VIEWS: dict[str, tuple[tuple[int, ...], Callable[[np.ndarray], np.ndarray], Callable[[Tensor], Tensor]]] = {
    "contiguous": ((3, 4), lambda a: a, lambda t: t),
    "permute": ((4, 3), lambda a: a.T, lambda t: t.permute(1, 0)),
    "flip": ((3, 4), lambda a: np.flip(a, (0, 1)), lambda t: t.flip((0, 1))),
    "shrink": ((5, 7), lambda a: a[1:4, 2:6], lambda t: t.shrink(((1, 4), (2, 6)))),
    "expand": ((1, 4), lambda a: np.broadcast_to(a, (3, 4)), lambda t: t.expand(3, 4)),
    "pad": ((1, 2), lambda a: np.pad(a, ((1, 1), (1, 1))), lambda t: t.pad(((1, 1), (1, 1)))),
    "permute_flip_shrink": (
        (6, 5),
        lambda a: np.flip(a.T, 0)[1:4, 1:5],
        lambda t: t.permute(1, 0).flip(0).shrink(((1, 4), (1, 5))),
    ),
}


def view_input(view: str, dtype: DType, device: str, seed: int = 0, kind: str = "any") -> tuple[np.ndarray, Tensor]:
    base_shape, np_fn, t_fn = VIEWS[view]
    base = data(base_shape, dtype, seed, kind)
    a = np.array(np_fn(base))
    t = t_fn(Tensor(base, device=device))
    assert a.shape == (3, 4)
    return a, t


# ---------------------------------------------------------------------------------------------------------------
# binary elementwise ops

BINARY: dict[str, tuple[Callable[[Any, Any], Any], Callable[[Any, Any], Any]]] = {
    "add": (operator.add, np.add),
    "sub": (operator.sub, np.subtract),
    "mul": (operator.mul, np.multiply),
    "div": (operator.truediv, np.true_divide),
    "lt": (operator.lt, np.less),
    "gt": (operator.gt, np.greater),
    "le": (operator.le, np.less_equal),
    "ge": (operator.ge, np.greater_equal),
    "eq": (operator.eq, np.equal),
    "ne": (operator.ne, np.not_equal),
    "maximum": (lambda a, b: a.maximum(b), np.maximum),
}
COMPARISONS = {"lt", "gt", "le", "ge", "eq", "ne"}
NOT_FOR_BOOL = {"sub", "div"}  # numpy rejects bool - bool; bool / bool divides by False


def binary_cases() -> list[tuple[str, DType]]:
    return [(op, dt) for op in BINARY for dt in DTYPES if not (dt == dtypes.bool and op in NOT_FOR_BOOL)]


def binary_ref(op: str, a: np.ndarray, b: np.ndarray, dtype: DType) -> tuple[np.ndarray, DType]:
    with np.errstate(all="ignore"):
        r = BINARY[op][1](wide(a), wide(b))
    if op in COMPARISONS:
        return r, dtypes.bool
    if op == "div" and dtype == dtypes.int32:
        return r, dtypes.float32  # int / int is true division, in the default float
    return r, dtype


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(("op", "dtype"), binary_cases())
def test_binary_same_shape(op: str, dtype: DType, device: str):
    a, b = data((3, 4), dtype, 1), data((3, 4), dtype, 2, "nonzero")
    a[0, :2] = b[0, :2]  # equal elements, so == <= >= see both outcomes (b has no zeros: it is a divisor)
    out = BINARY[op][0](Tensor(a, device=device), Tensor(b, device=device))
    assert out.device == device
    check(out, *binary_ref(op, a, b, dtype))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(("op", "dtype"), binary_cases())
def test_binary_broadcast_column_row(op: str, dtype: DType, device: str):
    a, b = data((3, 1), dtype, 3), data((1, 4), dtype, 4, "nonzero")
    out = BINARY[op][0](Tensor(a, device=device), Tensor(b, device=device))
    assert out.shape == (3, 4)
    check(out, *binary_ref(op, a, b, dtype))


BROADCAST_SHAPES = [
    ((3, 4), (3, 4)),
    ((3, 1), (1, 4)),
    ((4,), (3, 4)),
    ((3, 4), ()),
    ((), ()),
    ((1,), (1,)),
    ((1, 1, 1), (1,)),
    ((2, 1, 3), (4, 1)),
    ((0, 4), (1, 4)),
    ((2, 0), (2, 1)),
    ((0,), ()),
    ((5, 1, 0), (1, 3, 1)),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(("sa", "sb"), BROADCAST_SHAPES, ids=str)
def test_broadcast_shapes(sa: tuple[int, ...], sb: tuple[int, ...], device: str):
    a, b = data(sa, dtypes.float32, 5), data(sb, dtypes.float32, 6, "nonzero")
    ta, tb = tensor(a, device), tensor(b, device)
    check(ta + tb, a.astype(np.float64) + b, dtypes.float32)
    check(tb * ta, b.astype(np.float64) * a, dtypes.float32)
    check(ta / tb, a.astype(np.float64) / b, dtypes.float32)
    check(ta < tb, a < b, dtypes.bool)
    check(tb.maximum(ta), np.maximum(b, a), dtypes.float32)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("view", list(VIEWS))
@pytest.mark.parametrize("dtype", DTYPES)
def test_binary_noncontiguous_input(view: str, dtype: DType, device: str):
    a, ta = view_input(view, dtype, device, seed=7)
    b = data((3, 4), dtype, 8, "nonzero")
    tb = Tensor(b, device=device)
    ops = ["add", "mul", "lt", "eq", "maximum"] + ([] if dtype == dtypes.bool else ["sub", "div"])
    for op in ops:
        check(BINARY[op][0](ta, tb), *binary_ref(op, a, b, dtype))
        # the view as the second operand too (divisor only when it has no zeros)
        if op != "div":
            check(BINARY[op][0](tb, ta), *binary_ref(op, b, a, dtype))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(("va", "vb"), [("permute", "flip"), ("expand", "shrink"), ("pad", "permute_flip_shrink")])
def test_binary_both_inputs_noncontiguous(va: str, vb: str, device: str):
    a, ta = view_input(va, dtypes.float32, device, seed=9)
    b, tb = view_input(vb, dtypes.float32, device, seed=10)
    check(ta * tb + ta, a.astype(np.float64) * b + a, dtypes.float32)
    check((ta - tb).maximum(tb), np.maximum(a.astype(np.float64) - b, b), dtypes.float32)


MIXED_DTYPES = [
    (dtypes.float16, dtypes.float32, dtypes.float32),
    (dtypes.int32, dtypes.float16, dtypes.float16),
    (dtypes.int32, dtypes.float32, dtypes.float32),
    (dtypes.bool, dtypes.int32, dtypes.int32),
    (dtypes.bool, dtypes.float32, dtypes.float32),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(("da", "db", "want"), MIXED_DTYPES, ids=str)
def test_mixed_dtype_promotion(da: DType, db: DType, want: DType, device: str):
    a, b = data((2, 3), da, 11), data((2, 3), db, 12)
    ta, tb = Tensor(a, device=device), Tensor(b, device=device)
    ref = wide(a).astype(np.float64) + wide(b).astype(np.float64)
    check(ta + tb, ref, want)
    check(tb * ta, wide(b).astype(np.float64) * wide(a).astype(np.float64), want)
    check(ta < tb, wide(a).astype(np.float64) < wide(b).astype(np.float64), dtypes.bool)


# (tensor dtype, scalar, op, dtype of the result): python scalars are weak
SCALAR_CASES: list[tuple[DType, Any, str, DType]] = [
    (dtypes.float16, 2.0, "mul", dtypes.float16),
    (dtypes.float16, 3, "add", dtypes.float16),
    (dtypes.float16, 0.5, "rsub", dtypes.float16),
    (dtypes.float32, 2, "sub", dtypes.float32),
    (dtypes.float32, 1.5, "rsub", dtypes.float32),
    (dtypes.float32, 3.0, "rdiv", dtypes.float32),
    (dtypes.int32, 2.5, "mul", dtypes.float32),
    (dtypes.int32, 3, "add", dtypes.int32),
    (dtypes.int32, 4, "rmul", dtypes.int32),
    (dtypes.int32, 5, "rsub", dtypes.int32),
    (dtypes.int32, 2, "div", dtypes.float32),
    (dtypes.int32, 7, "rdiv", dtypes.float32),
    (dtypes.int32, True, "add", dtypes.int32),
    (dtypes.bool, 1, "add", dtypes.int32),
    (dtypes.bool, 2.5, "mul", dtypes.float32),
    (dtypes.float16, 0.5, "lt", dtypes.bool),
    (dtypes.int32, 2.5, "lt", dtypes.bool),
    (dtypes.int32, 3, "rgt", dtypes.bool),
    (dtypes.float32, 0.25, "eq", dtypes.bool),
    (dtypes.float16, 1.0, "maximum", dtypes.float16),
    (dtypes.int32, 0, "maximum", dtypes.int32),
    (dtypes.float32, -1, "maximum", dtypes.float32),
]
SCALAR_OPS: dict[str, tuple[Callable[[Any, Any], Any], Callable[[Any, Any], Any]]] = {
    "add": (lambda t, s: t + s, lambda a, s: a + s),
    "sub": (lambda t, s: t - s, lambda a, s: a - s),
    "mul": (lambda t, s: t * s, lambda a, s: a * s),
    "div": (lambda t, s: t / s, lambda a, s: a / s),
    "rsub": (lambda t, s: s - t, lambda a, s: s - a),
    "rmul": (lambda t, s: s * t, lambda a, s: s * a),
    "rdiv": (lambda t, s: s / t, lambda a, s: s / a),
    "lt": (lambda t, s: t < s, lambda a, s: a < s),
    "rgt": (lambda t, s: s > t, lambda a, s: s > a),
    "eq": (lambda t, s: t == s, lambda a, s: a == s),
    "maximum": (lambda t, s: t.maximum(s), np.maximum),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(("dtype", "scalar", "op", "want"), SCALAR_CASES, ids=str)
def test_python_scalar_operand(dtype: DType, scalar: Any, op: str, want: DType, device: str):
    a = data((3, 4), dtype, 13, "nonzero" if op == "rdiv" else "any")
    if op == "eq":
        a.flat[::3] = scalar
    t = Tensor(a, device=device)
    with np.errstate(all="ignore"):
        ref = SCALAR_OPS[op][1](wide(a).astype(np.float64) if dtype != dtypes.int32 else wide(a), scalar)
    check(SCALAR_OPS[op][0](t, scalar), ref, want)


@pytest.mark.parametrize("device", DEVICES)
def test_zero_dim_tensor_and_scalar(device: str):
    t = Tensor(2.5, device=device)
    check(t * 2 + 1, np.array(6.0), dtypes.float32)
    check(Tensor([1.0, 2.0, 3.0], device=device) * t, np.array([2.5, 5.0, 7.5]), dtypes.float32)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_binary_special_values(dtype: DType, device: str):
    inf, nan = math.inf, math.nan
    a = np.array([1.0, -1.0, 0.0, inf, -inf, nan, 0.0, inf, 3.0, nan], NP[dtype])
    b = np.array([0.0, 0.0, 0.0, inf, 2.0, 1.0, -inf, -inf, nan, nan], NP[dtype])
    ta, tb = Tensor(a, device=device), Tensor(b, device=device)
    for op in ["add", "sub", "mul", "div", "lt", "gt", "le", "ge", "eq", "ne"]:
        ref, out_dtype = binary_ref(op, a, b, dtype)
        check(BINARY[op][0](ta, tb), ref, out_dtype, rtol=0, atol=0)
    finite = ~np.isnan(a) & ~np.isnan(b)  # max with NaN is not pinned down (C's fmax and numpy's differ)
    check(Tensor(a[finite], device=device).maximum(Tensor(b[finite], device=device)), np.maximum(a, b)[finite], dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_float16_and_float32_round_each_op(dtype: DType, device: str):
    # a fused kernel still rounds every op to the tensor's dtype: (1000 + 0.1) - 1000 is 0 in float16
    # (0.1 is under half an ulp at 1000) and 0.100006 in float32, as numpy computes it op by op
    a, b = np.array([0.1, 0.3], NP[dtype]), np.array([1000.0, 1000.0], NP[dtype])
    ta, tb = Tensor(a, device=device), Tensor(b, device=device)
    check((ta + tb) - tb, (a + b) - b, dtype, rtol=0, atol=0)
    with np.errstate(over="ignore"):  # float16: 0.1 * 1000 * 1000 overflows to inf, and stays inf
        ref = a * b * b / b / b
    check(ta * tb * tb / tb / tb, ref, dtype, rtol=1e-6, atol=0)


@pytest.mark.parametrize("device", DEVICES)
def test_float16_multiply_add_rounds_the_product(device: str):
    # in float16 the product is rounded before the add, as numpy does, not fused into one rounding: the C device
    # fused them where gcc computes _Float16 in float (no FP16 arithmetic: AMD Zen 4), unlike numpy in about a
    # quarter of these (1031 elements: the vector loop and its tail)
    rng = np.random.default_rng(5)
    a, b, c = ((rng.standard_normal(1031) * 8).astype(np.float16) for _ in range(3))
    got = (Tensor(a, device=device) * Tensor(b, device=device) + Tensor(c, device=device)).numpy()
    np.testing.assert_array_equal(got.view(np.uint16), (a * b + c).view(np.uint16))


CPU_LARGE_SHAPES = [((37, 53), (37, 53)), ((37, 1), (1, 53)), ((5, 1, 7), (1, 6, 1)), ((1031,), ()), ((3, 257), (257,))]


@pytest.mark.parametrize(("sa", "sb"), CPU_LARGE_SHAPES, ids=str)
@pytest.mark.parametrize("dtype", [dtypes.float32, dtypes.int32, dtypes.float16])
def test_binary_large_odd_shapes(sa: tuple[int, ...], sb: tuple[int, ...], dtype: DType):
    # sizes that are no multiple of any vector width or unroll factor: every tail is exercised
    a, b = data(sa, dtype, 50), data(sb, dtype, 51, "nonzero")
    ta, tb = tensor(a, "CPU"), tensor(b, "CPU")
    for op in ["add", "sub", "mul", "div", "lt", "eq", "maximum"]:
        check(BINARY[op][0](ta, tb), *binary_ref(op, a, b, dtype))
        check(BINARY[op][0](ta.flip(0), tb), *binary_ref(op, np.flip(a, 0), b, dtype))


def test_unary_large_wide_range():
    rng = np.random.default_rng(52)
    cases: list[tuple[Callable[[Tensor], Tensor], Callable[[np.ndarray], np.ndarray], np.ndarray, float]] = [
        (lambda t: t.exp2(), np.exp2, rng.uniform(-100, 100, 1031), 1e-6),
        (lambda t: t.log2(), np.log2, np.exp(rng.uniform(-60, 60, 1031)), 1e-6),
        (lambda t: t.sqrt(), np.sqrt, np.exp(rng.uniform(-60, 60, 1031)), 0),
        (lambda t: t.reciprocal(), np.reciprocal, rng.uniform(-1e3, 1e3, 1031), 0),
        (lambda t: t.sin(), np.sin, rng.uniform(-100, 100, 1031), 1e-5),
    ]
    for fn, np_fn, values, atol in cases:
        a = values.astype(np.float32)
        check(fn(Tensor(a)), np_fn(a.astype(np.float64)), dtypes.float32, rtol=1e-5, atol=atol)


@pytest.mark.no_roundtrip
def test_deep_graph():
    # a long lazy chain: nothing in the pipeline may recurse once per node
    x, ref = Tensor([1.0, 2.0]), np.array([1.0, 2.0])
    for i in range(1500):
        x, ref = x + (i % 7), ref + (i % 7)
    check(x, ref, dtypes.float32, rtol=0, atol=0)


# ---------------------------------------------------------------------------------------------------------------
# unary ops

UNARY: dict[str, tuple[Callable[[Tensor], Tensor], Callable[[np.ndarray], np.ndarray], str]] = {
    "neg": (lambda t: t.neg(), np.negative, "any"),
    "neg_op": (lambda t: -t, np.negative, "any"),
    "exp2": (lambda t: t.exp2(), np.exp2, "any"),
    "log2": (lambda t: t.log2(), np.log2, "positive"),
    "sqrt": (lambda t: t.sqrt(), np.sqrt, "positive"),
    "reciprocal": (lambda t: t.reciprocal(), np.reciprocal, "nonzero"),
    "sin": (lambda t: t.sin(), np.sin, "any"),
}


def unary_cases() -> list[tuple[str, DType]]:
    cases = [(op, dt) for op in UNARY for dt in FLOATS]
    return cases + [("neg", dtypes.int32), ("neg_op", dtypes.int32)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(("op", "dtype"), unary_cases())
def test_unary(op: str, dtype: DType, device: str):
    fn, np_fn, kind = UNARY[op]
    for shape in [(3, 4), (1,), (), (0, 3), (1, 1, 5)]:
        a = data(shape, dtype, 14, kind)
        check(fn(tensor(a, device)), np_fn(wide(a)), dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("view", list(VIEWS))
@pytest.mark.parametrize(("op", "dtype"), unary_cases())
def test_unary_noncontiguous_input(op: str, dtype: DType, view: str, device: str):
    fn, np_fn, kind = UNARY[op]
    a, t = view_input(view, dtype, device, seed=15, kind=kind)
    with np.errstate(all="ignore"):  # padded zeros: log2(0) = -inf, 1/0 = inf, like numpy
        ref = np_fn(wide(a))
    check(fn(t), ref, dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_unary_special_values(dtype: DType, device: str):
    inf, nan = math.inf, math.nan
    cases: list[tuple[Callable[[Tensor], Tensor], Callable[[np.ndarray], np.ndarray], list[float]]] = [
        (lambda t: t.exp2(), np.exp2, [-inf, -200.0, -1.0, 0.0, 1.0, 3.5, 10.0, 200.0, inf, nan]),
        (lambda t: t.log2(), np.log2, [0.0, 0.5, 1.0, 8.0, 1000.0, inf, -1.0, nan]),
        (lambda t: t.sqrt(), np.sqrt, [0.0, 0.25, 2.0, 4.0, 1000.0, inf, -1.0, nan]),
        (lambda t: t.reciprocal(), np.reciprocal, [0.0, 0.5, 2.0, -4.0, inf, -inf, nan]),
        (lambda t: t.sin(), np.sin, [0.0, math.pi / 2, -math.pi / 2, math.pi, 3.0, -6.0, 100.0, inf, nan]),
    ]
    for fn, np_fn, values in cases:
        a = np.array(values, dtype=NP[dtype])
        with np.errstate(all="ignore"):
            ref = np_fn(a.astype(np.float64))
        tol = {"rtol": 1e-5, "atol": 1e-5} if dtype == dtypes.float32 else {"rtol": 4e-3, "atol": 2e-3}
        check(fn(Tensor(a, device=device)), ref, dtype, **tol)


@pytest.mark.parametrize("device", DEVICES)
def test_unary_chain(device: str):
    a = data((4, 5), dtypes.float32, 16, "positive")
    t = Tensor(a, device=device)
    ref = np.sin(1 / np.sqrt(np.exp2(np.log2(a.astype(np.float64)) * 0.5)))
    check((t.log2() * 0.5).exp2().sqrt().reciprocal().sin(), ref, dtypes.float32)


# ---------------------------------------------------------------------------------------------------------------
# where, cast


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_where_tensors(dtype: DType, device: str):
    c = data((3, 4), dtypes.bool, 17)
    a, b = data((3, 4), dtype, 18), data((3, 4), dtype, 19)
    check(Tensor(c, device=device).where(Tensor(a, device=device), Tensor(b, device=device)), np.where(c, a, b), dtype)


@pytest.mark.parametrize("device", DEVICES)
def test_where_broadcast_and_scalars(device: str):
    c, a = data((3, 1), dtypes.bool, 20), data((1, 4), dtypes.float32, 21)
    tc, ta = Tensor(c, device=device), Tensor(a, device=device)
    check(tc.where(ta, 0.0), np.where(c, a, 0.0), dtypes.float32)
    check(tc.where(-1.5, ta), np.where(c, -1.5, a), dtypes.float32)
    check(tc.where(1, 0), np.where(c, 1, 0), dtypes.int32)
    check(tc.where(1.0, 0), np.where(c, 1.0, 0.0), dtypes.float32)
    check(tc.where(True, False), np.where(c, True, False), dtypes.bool)
    h = data((1, 4), dtypes.float16, 22)
    check(tc.where(Tensor(h, device=device), 0.5), np.where(c, h, 0.5), dtypes.float16)
    i = data((3, 4), dtypes.int32, 23)
    check(tc.where(Tensor(i, device=device), 2.5), np.where(c, i, 2.5), dtypes.float32)


@pytest.mark.parametrize("device", DEVICES)
def test_where_does_not_mix_branches(device: str):
    # the branch not taken never leaks in: not as NaN, not as inf * 0
    c = np.array([True, False, True, False])
    a = np.array([1.0, np.nan, np.inf, -np.inf], np.float32)
    b = np.array([np.nan, 2.0, -np.inf, 3.0], np.float32)
    tc, ta, tb = (Tensor(x, device=device) for x in (c, a, b))
    check(tc.where(ta, tb), np.where(c, a, b), dtypes.float32, rtol=0, atol=0)
    check(tc.where(ta, 0.0), np.where(c, a, 0.0), dtypes.float32, rtol=0, atol=0)
    check((tc == False).where(tb, 5.0), np.where(~c, b, 5.0), dtypes.float32, rtol=0, atol=0)  # noqa: E712


@pytest.mark.parametrize("device", DEVICES)
def test_where_from_comparison_and_views(device: str):
    a = data((4, 5), dtypes.float32, 24)
    t = Tensor(a, device=device)
    check((t > 0).where(t, 0.0), np.where(a > 0, a, 0.0), dtypes.float32)  # relu
    check((t.flip(0) < t).where(t.T.T, t.flip(1)), np.where(a[::-1] < a, a, a[:, ::-1]), dtypes.float32)
    check((t > 0).T.where(1.0, -1.0), np.where(a.T > 0, 1.0, -1.0), dtypes.float32)
    e = np.zeros((0, 5), np.float32)
    check((Tensor(e, device=device) > 0).where(1.0, 2.0), np.zeros((0, 5)), dtypes.float32)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("src", DTYPES)
@pytest.mark.parametrize("dst", DTYPES)
def test_cast(src: DType, dst: DType, device: str):
    if dtypes.is_float(src):
        a = (data((3, 4), dtypes.float16, 25) * 1.875).astype(NP[src])  # fractions, negatives, exact in float16
        a[0, 0], a[1, 1] = 0, -0.5
    else:
        a = data((3, 4), src, 26)
        if src == dtypes.int32:
            a[0, 0] = 0
    out = Tensor(a, device=device).cast(dst)
    check(out, a.astype(NP[dst]), dst)  # float -> int truncates toward zero, like numpy and C
    check(Tensor(a, device=device).T.cast(dst), a.T.astype(NP[dst]), dst)
    check(Tensor(a[:0], device=device).cast(dst), a[:0].astype(NP[dst]), dst)


@pytest.mark.parametrize("device", DEVICES)
def test_cast_in_expression(device: str):
    a = data((3, 4), dtypes.float32, 27)
    t = Tensor(a, device=device)
    check((t * 4).cast(dtypes.int32) + 1, (a * np.float32(4)).astype(np.int32) + 1, dtypes.int32)
    check((t > 0).cast(dtypes.float32).sum(), np.array((a > 0).sum()), dtypes.float32, **SUM_TOL)
    check(t.cast(dtypes.float16) * 2, (a.astype(np.float16) * 2).astype(np.float64), dtypes.float16)


# ---------------------------------------------------------------------------------------------------------------
# reductions

AXES: list[Any] = [None, 0, 1, 2, -1, (0, 2), (0, 1, 2), (-1, -3)]
SUM_TOL = {"rtol": 1e-5, "atol": 1e-5}  # float32 sums of a few dozen values in [-2, 2], in any order


def sum_ref(a: np.ndarray, axis: Any, keepdim: bool, dtype: DType) -> tuple[np.ndarray, DType]:
    r = np.sum(wide(a) if a.dtype != np.bool_ else a.astype(np.int64), axis=axis, keepdims=keepdim)
    return r, (dtypes.int32 if dtype in (dtypes.bool, dtypes.int32) else dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("axis", AXES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["sum", "max"])
def test_sum_and_max(op: str, dtype: DType, axis: Any, device: str):
    a = data((2, 3, 4), dtype, 28 if op == "sum" else 29)
    for keepdim in (False, True):
        out = getattr(Tensor(a, device=device), op)(axis=axis, keepdim=keepdim)
        if op == "sum":
            check(out, *sum_ref(a, axis, keepdim, dtype), **SUM_TOL)
        else:
            check(out, np.max(a, axis=axis, keepdims=keepdim), dtype)


def test_reduce_default_args():
    a = data((3, 4), dtypes.float32, 30)
    check(Tensor(a).sum(), np.sum(a.astype(np.float64)), dtypes.float32, **SUM_TOL)
    check(Tensor(a).max(), np.max(a), dtypes.float32)
    check(Tensor(a).sum(1), np.sum(a.astype(np.float64), 1), dtypes.float32, **SUM_TOL)
    check(Tensor(a).max(0, True), np.max(a, 0, keepdims=True), dtypes.float32)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [dtypes.float32, dtypes.int32, dtypes.bool, dtypes.float16])
@pytest.mark.parametrize("shape", [(0,), (0, 3), (3, 0), (2, 0, 4)], ids=str)
def test_sum_size_zero(shape: tuple[int, ...], dtype: DType, device: str):
    a = np.zeros(shape, NP[dtype])
    axes: list[Any] = [None, *range(len(shape)), tuple(range(len(shape)))]
    for axis in axes:
        for keepdim in (False, True):
            check(Tensor(a, device=device).sum(axis=axis, keepdim=keepdim), *sum_ref(a, axis, keepdim, dtype))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_max_size_zero_kept_axis(dtype: DType, device: str):
    # max over a non-empty axis of a tensor with an empty dimension: an empty result, never a read
    a = np.zeros((0, 3), NP[dtype])
    check(Tensor(a, device=device).max(axis=1), np.zeros((0,), NP[dtype]), dtype)
    check(Tensor(a.T, device=device).max(axis=0, keepdim=True), np.zeros((1, 0), NP[dtype]), dtype)


@pytest.mark.parametrize("device", DEVICES)
def test_reduce_size_one_dims(device: str):
    a = data((1, 4, 1), dtypes.float32, 31)
    t = Tensor(a, device=device)
    for axis in [0, 2, (0, 2), None, 1]:
        check(t.sum(axis=axis), np.sum(a.astype(np.float64), axis=axis), dtypes.float32, **SUM_TOL)
        check(t.max(axis=axis, keepdim=True), np.max(a, axis=axis, keepdims=True), dtypes.float32)
    check(Tensor(5.0, device=device).sum(), np.array(5.0), dtypes.float32)
    check(Tensor(5, device=device).max(), np.array(5), dtypes.int32)


@pytest.mark.parametrize("device", DEVICES)
def test_max_all_negative_and_inf(device: str):
    # the max starts below every value: not 0, not a large finite float, not an int cast of -inf
    f = np.array([[-5.0, -3.0, -7.0], [-np.inf, -1e30, -np.inf]], np.float32)
    check(Tensor(f, device=device).max(axis=1), np.max(f, axis=1), dtypes.float32)
    check(Tensor(np.full((2, 3), -np.inf, np.float32), device=device).max(), np.array(-np.inf), dtypes.float32)
    i = np.array([[-5, -3, -7], [-(2**31), -(2**31) + 1, -(2**31)]], np.int32)
    check(Tensor(i, device=device).max(axis=1), np.max(i, axis=1), dtypes.int32)
    h = np.array([-65504.0, -60000.0, -np.inf], np.float16)
    check(Tensor(h, device=device).max(), np.max(h), dtypes.float16)
    b = np.zeros((2, 3), np.bool_)
    check(Tensor(b, device=device).max(axis=0), np.max(b, axis=0), dtypes.bool)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("view", list(VIEWS))
def test_reduce_noncontiguous_input(view: str, device: str):
    a, t = view_input(view, dtypes.float32, device, seed=32)
    w = a.astype(np.float64)
    for axis in [None, 0, 1]:
        check(t.sum(axis=axis), w.sum(axis=axis), dtypes.float32, **SUM_TOL)
        check(t.max(axis=axis), a.max(axis=axis), dtypes.float32)
    ai, ti = view_input(view, dtypes.int32, device, seed=33)
    check(ti.sum(axis=0), ai.astype(np.int64).sum(axis=0), dtypes.int32)
    check(ti.max(axis=1), ai.max(axis=1), dtypes.int32)


@pytest.mark.parametrize("device", DEVICES)
def test_reduce_of_expressions_and_back(device: str):
    a, b = data((4, 6), dtypes.float32, 34), data((4, 6), dtypes.float32, 35)
    ta, tb = Tensor(a, device=device), Tensor(b, device=device)
    wa, wb = a.astype(np.float64), b.astype(np.float64)
    check((ta * tb + 1).sum(axis=1), (wa * wb + 1).sum(axis=1), dtypes.float32, **SUM_TOL)
    check((ta * tb).maximum(0).sum(), np.maximum(wa * wb, 0).sum(), dtypes.float32, **SUM_TOL)
    check(ta - ta.max(axis=1, keepdim=True), wa - wa.max(axis=1, keepdims=True), dtypes.float32)
    check(ta / ta.sum(axis=0, keepdim=True), wa / wa.sum(axis=0, keepdims=True), dtypes.float32, rtol=1e-4, atol=1e-5)
    check(ta.sum(axis=1).max(), wa.sum(axis=1).max(), dtypes.float32, **SUM_TOL)
    check(ta.max(axis=0).sum() * 2 + ta.sum(), wa.max(axis=0).sum() * 2 + wa.sum(), dtypes.float32, atol=1e-5)
    check((ta > 0).sum(axis=1), (a > 0).sum(axis=1), dtypes.int32)
    check(ta.T.sum(axis=1, keepdim=True).T + tb, wa.sum(axis=0, keepdims=True) + wb, dtypes.float32, **SUM_TOL)


def test_sum_large_float32():
    rng = np.random.default_rng(36)
    a = rng.uniform(0, 1, size=100_000).astype(np.float32)
    check(Tensor(a).sum(), a.astype(np.float64).sum(), dtypes.float32, rtol=1e-4)
    check(Tensor.ones(100_000).sum(), np.array(100_000.0), dtypes.float32, rtol=0, atol=0)
    b = rng.uniform(-1, 1, size=(37, 53)).astype(np.float32)
    for axis in [0, 1, None]:
        check(Tensor(b).sum(axis=axis), b.astype(np.float64).sum(axis=axis), dtypes.float32, rtol=1e-5, atol=1e-4)
        check(Tensor(b).max(axis=axis), b.max(axis=axis), dtypes.float32)


def test_reduce_large_multi_axis():
    rng = np.random.default_rng(53)
    a = rng.integers(-9, 10, (16, 33, 9)).astype(np.float32)
    t = Tensor(a).permute(2, 0, 1)
    p = a.transpose(2, 0, 1)
    for axis in [(0, 2), (1,), (0, 1), (-1, 0), None]:
        check(t.sum(axis=axis), p.astype(np.float64).sum(axis=axis), dtypes.float32, rtol=0, atol=0)
        check(t.max(axis=axis, keepdim=True), p.max(axis=axis, keepdims=True), dtypes.float32, rtol=0, atol=0)
    check(t.flip(1).sum(axis=(0, 2)), p[:, ::-1].astype(np.float64).sum(axis=(0, 2)), dtypes.float32, rtol=0, atol=0)


def test_sum_large_int32_and_bool():
    a = np.arange(10_000, dtype=np.int32)
    check(Tensor(a).sum(), np.array(a.astype(np.int64).sum()), dtypes.int32)
    b = np.arange(10_000) % 3 == 0
    check(Tensor(b).sum(), np.array(b.sum()), dtypes.int32)
    check(Tensor(b.reshape(100, 100)).sum(axis=0), b.reshape(100, 100).sum(axis=0), dtypes.int32)


def test_sum_float16_accumulates_accurately():
    # 4096 * fp16(0.1) = 409.5: a float16 accumulator would stop growing at 256, where 0.1 is under half an ulp
    a = np.full(4096, 0.1, np.float16)
    check(Tensor(a).sum(), np.array(a.astype(np.float64).sum()), dtypes.float16, rtol=2e-3, atol=0)


@pytest.mark.parametrize("device", DEVICES)
def test_sum_of_expanded(device: str):
    a = data((1, 4), dtypes.int32, 37)
    check(Tensor(a, device=device).expand(16, 4).sum(axis=0), a[0].astype(np.int64) * 16, dtypes.int32)
    check(Tensor.ones(1, 1, device=device).expand(8, 8).sum(), np.array(64.0), dtypes.float32)


# ---------------------------------------------------------------------------------------------------------------
# movement ops


def _pad_value(dtype: DType) -> Any:
    return {dtypes.float32: -7.5, dtypes.float16: -7.5, dtypes.int32: -7, dtypes.bool: True}[dtype]


def distinct(shape: tuple[int, ...], dtype: DType) -> np.ndarray:
    """Distinctive values: a misplaced index shows up as a wrong value (float16 holds integers only to 2048)."""
    n = int(np.prod(shape))
    if dtype == dtypes.bool:
        return (np.arange(n) % 3 == 0).reshape(shape)
    base = 1000 if dtype == dtypes.float16 else 1_000_000
    return (base + np.arange(n)).reshape(shape).astype(NP[dtype])


# (name, base shape, on a tensor, on a numpy array, uses the pad value)
MOVEMENT: list[tuple[str, tuple[int, ...], Callable[..., Tensor], Callable[..., np.ndarray]]] = [
    ("reshape", (2, 3, 4), lambda t, v: t.reshape(6, 4), lambda a, v: a.reshape(6, 4)),
    ("reshape_tuple", (2, 3, 4), lambda t, v: t.reshape((4, 6)), lambda a, v: a.reshape(4, 6)),
    ("reshape_minus1", (2, 3, 4), lambda t, v: t.reshape(-1, 2), lambda a, v: a.reshape(-1, 2)),
    ("reshape_flat", (2, 3, 4), lambda t, v: t.reshape(-1), lambda a, v: a.reshape(-1)),
    ("reshape_ones", (3, 4), lambda t, v: t.reshape(1, 3, 1, 4, 1), lambda a, v: a.reshape(1, 3, 1, 4, 1)),
    ("reshape_to_0d", (1,), lambda t, v: t.reshape(()), lambda a, v: a.reshape(())),
    ("reshape_from_0d", (), lambda t, v: t.reshape(1, 1), lambda a, v: a.reshape(1, 1)),
    ("reshape_size0", (0, 3), lambda t, v: t.reshape(3, 0), lambda a, v: a.reshape(3, 0)),
    ("permute", (2, 3, 4), lambda t, v: t.permute(2, 0, 1), lambda a, v: a.transpose(2, 0, 1)),
    ("permute_tuple", (2, 3, 4), lambda t, v: t.permute((1, 2, 0)), lambda a, v: a.transpose(1, 2, 0)),
    ("T", (3, 5), lambda t, v: t.T, lambda a, v: a.T),
    ("transpose", (3, 5), lambda t, v: t.transpose(), lambda a, v: a.T),
    ("transpose_3d", (2, 3, 4), lambda t, v: t.transpose(0, 2), lambda a, v: a.swapaxes(0, 2)),
    ("expand", (1, 4), lambda t, v: t.expand(3, 4), lambda a, v: np.broadcast_to(a, (3, 4))),
    ("expand_tuple", (3, 1), lambda t, v: t.expand((3, 5)), lambda a, v: np.broadcast_to(a, (3, 5))),
    ("expand_minus1", (3, 1), lambda t, v: t.expand(-1, 4), lambda a, v: np.broadcast_to(a, (3, 4))),
    ("expand_new_dims", (4,), lambda t, v: t.expand(2, 3, 4), lambda a, v: np.broadcast_to(a, (2, 3, 4))),
    ("expand_to_0", (1, 3), lambda t, v: t.expand(0, 3), lambda a, v: np.broadcast_to(a, (0, 3))),
    ("pad", (2, 3), lambda t, v: t.pad(((1, 2), (0, 1))), lambda a, v: np.pad(a, ((1, 2), (0, 1)))),
    (
        "pad_value",
        (2, 3),
        lambda t, v: t.pad(((1, 0), (2, 2)), value=v),
        lambda a, v: np.pad(a, ((1, 0), (2, 2)), constant_values=v),
    ),
    ("pad_none", (2, 3), lambda t, v: t.pad((None, (1, 1))), lambda a, v: np.pad(a, ((0, 0), (1, 1)))),
    ("pad_size0", (0, 3), lambda t, v: t.pad(((1, 1), (0, 0))), lambda a, v: np.pad(a, ((1, 1), (0, 0)))),
    ("pad_1d", (5,), lambda t, v: t.pad(((3, 0),)), lambda a, v: np.pad(a, ((3, 0),))),
    ("shrink", (5, 6), lambda t, v: t.shrink(((1, 4), (0, 5))), lambda a, v: a[1:4, 0:5]),
    ("shrink_none", (5, 6), lambda t, v: t.shrink((None, (2, 3))), lambda a, v: a[:, 2:3]),
    ("shrink_odd", (7, 9), lambda t, v: t.shrink(((3, 6), (1, 8))), lambda a, v: a[3:6, 1:8]),
    ("shrink_to_one", (5, 6), lambda t, v: t.shrink(((4, 5), (5, 6))), lambda a, v: a[4:5, 5:6]),
    ("shrink_empty", (4, 5), lambda t, v: t.shrink(((2, 2), None)), lambda a, v: a[2:2]),
    ("flip0", (3, 4), lambda t, v: t.flip(0), lambda a, v: np.flip(a, 0)),
    ("flip_neg", (3, 4), lambda t, v: t.flip(-1), lambda a, v: np.flip(a, -1)),
    ("flip_tuple", (2, 3, 4), lambda t, v: t.flip((0, 2)), lambda a, v: np.flip(a, (0, 2))),
    ("flip_size1", (1, 5), lambda t, v: t.flip(0), lambda a, v: np.flip(a, 0)),
    ("double_flip", (3, 4), lambda t, v: t.flip(0).flip(0), lambda a, v: a),
    # composed
    (
        "reshape_after_permute",
        (2, 3, 4),
        lambda t, v: t.permute(1, 0, 2).reshape(3, 8),
        lambda a, v: a.transpose(1, 0, 2).reshape(3, 8),
    ),
    ("flatten_transposed", (3, 5), lambda t, v: t.T.reshape(-1), lambda a, v: a.T.reshape(-1)),
    (
        "pad_after_flip",
        (2, 3),
        lambda t, v: t.flip(1).pad(((1, 0), (2, 1)), value=v),
        lambda a, v: np.pad(np.flip(a, 1), ((1, 0), (2, 1)), constant_values=v),
    ),
    (
        "flip_after_pad",
        (2, 3),
        lambda t, v: t.pad(((0, 2), (1, 0))).flip((0, 1)),
        lambda a, v: np.flip(np.pad(a, ((0, 2), (1, 0))), (0, 1)),
    ),
    (
        "shrink_after_flip",
        (5, 6),
        lambda t, v: t.flip(0).shrink(((1, 4), (1, 6))),
        lambda a, v: np.flip(a, 0)[1:4, 1:6],
    ),
    (
        "shrink_across_padding",
        (3, 3),
        lambda t, v: t.pad(((2, 2), (2, 2)), value=v).shrink(((1, 6), (0, 4))),
        lambda a, v: np.pad(a, ((2, 2), (2, 2)), constant_values=v)[1:6, 0:4],
    ),
    (
        "pad_after_shrink",
        (5, 6),
        lambda t, v: t.shrink(((1, 4), (2, 5))).pad(((1, 1), (0, 2))),
        lambda a, v: np.pad(a[1:4, 2:5], ((1, 1), (0, 2))),
    ),
    (
        "reshape_after_shrink",
        (4, 6),
        lambda t, v: t.shrink((None, (1, 5))).reshape(2, 8),
        lambda a, v: a[:, 1:5].reshape(2, 8),
    ),
    (
        "reshape_after_expand",
        (1, 4),
        lambda t, v: t.expand(3, 4).reshape(12),
        lambda a, v: np.broadcast_to(a, (3, 4)).reshape(12),
    ),
    (
        "permute_after_expand",
        (3, 1, 4),
        lambda t, v: t.expand(3, 2, 4).permute(2, 0, 1),
        lambda a, v: np.broadcast_to(a, (3, 2, 4)).transpose(2, 0, 1),
    ),
    ("split_after_flip", (12,), lambda t, v: t.flip(0).reshape(3, 4), lambda a, v: np.flip(a, 0).reshape(3, 4)),
    (
        "expand_after_reshape",
        (4,),
        lambda t, v: t.reshape(4, 1).expand(4, 3),
        lambda a, v: np.broadcast_to(a.reshape(4, 1), (4, 3)),
    ),
    (
        "every_third",  # a stride of 3 as pad + reshape + shrink
        (10,),
        lambda t, v: t.pad(((0, 2),)).reshape(4, 3).shrink((None, (0, 1))).reshape(4),
        lambda a, v: a[::3],
    ),
    (
        "everything",
        (3, 4, 5),
        lambda t, v: (
            t.permute(2, 0, 1)
            .flip(1)
            .shrink(((1, 4), None, (1, 4)))
            .pad(((1, 0), None, (0, 2)), value=v)
            .reshape(4, 15)
            .flip(1)
            .T
        ),
        lambda a, v: (
            np.flip(
                np.pad(
                    np.flip(a.transpose(2, 0, 1), 1)[1:4, :, 1:4], ((1, 0), (0, 0), (0, 2)), constant_values=v
                ).reshape(4, 15),
                1,
            ).T
        ),
    ),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("name", "shape", "t_fn", "np_fn"), MOVEMENT, ids=[m[0] for m in MOVEMENT])
def test_movement(name: str, shape: tuple[int, ...], t_fn: Callable, np_fn: Callable, dtype: DType, device: str):
    a, v = distinct(shape, dtype), _pad_value(dtype)
    ref = np.array(np_fn(a, v))
    check(t_fn(Tensor(a, device=device), v), ref, dtype, rtol=0, atol=0)


@pytest.mark.parametrize(("name", "shape", "t_fn", "np_fn"), MOVEMENT, ids=[m[0] for m in MOVEMENT])
def test_movement_then_compute(name: str, shape: tuple[int, ...], t_fn: Callable, np_fn: Callable):
    # the movement op applied to a lazy expression, and the view fed into more compute (one fused kernel)
    a, v = distinct(shape, dtypes.float32) - 1_000_000, -7.5
    t = Tensor(a) * 2 + 1
    ref = np.array(np_fn(a.astype(np.float64) * 2 + 1, v)) * 3 - 1
    check(t_fn(t, v) * 3 - 1, ref, dtypes.float32, rtol=0, atol=0)


@pytest.mark.parametrize("device", DEVICES)
def test_view_entirely_in_padding_with_other_inputs(device: str):
    # a view that lands wholly in one input's padding holds only the pad value; the other inputs of the same
    # kernel must still be read from their own buffers
    x, y = np.array([-8.0, -3.0], np.float32), np.array([3.0, 4.0], np.float32)
    tx, ty = Tensor(x, device=device), Tensor(y, device=device)
    check(tx.pad(((0, 2),)).shrink(((2, 4),)) + ty, y, dtypes.float32, rtol=0, atol=0)
    check(ty + tx.pad(((0, 2),), value=1.0).shrink(((2, 4),)), y + 1, dtypes.float32, rtol=0, atol=0)
    five = Tensor(np.full(4, 5.0, np.float32), device=device)
    p = Tensor(np.array([1.0, 2.0], np.float32), device=device).pad(((1, 1),), value=-2.0)  # [-2, 1, 2, -2]
    check((p + five).shrink(((3, 4),)), np.array([3.0]), dtypes.float32, rtol=0, atol=0)
    check((p > 0).where(p, -five).shrink(((3, 4),)), np.array([-5.0]), dtypes.float32, rtol=0, atol=0)
    e = Tensor(np.array([[5.0, 6.0]], np.float32), device=device).shrink(((1, 1), None))  # shape (0, 2)
    z = Tensor(np.array([[10.0, 20.0]], np.float32), device=device)
    check(e.pad(((1, 0), None), value=1.0) + z, np.array([[11.0, 21.0]]), dtypes.float32, rtol=0, atol=0)


@pytest.mark.parametrize("device", DEVICES)
def test_movement_does_not_change_source(device: str):
    a = distinct((3, 4), dtypes.float32)
    t = Tensor(a, device=device)
    views = [t.T, t.flip(0), t.reshape(12), t.pad(((1, 1), (1, 1))), t.shrink(((1, 2), None)), t.expand(2, 3, 4)]
    for view in views:
        view.realize()
    check(t, a, dtypes.float32, rtol=0, atol=0)
    check(views[1], np.flip(a, 0), dtypes.float32, rtol=0, atol=0)


# random programs: chains of movement ops, elementwise ops and reductions, against the same chain in numpy.
# Values are small integers in float32, so every sum is exact and results compare with ==.


def _factor_shape(rng: np.random.Generator, n: int) -> tuple[int, ...]:
    """A random shape with n elements: n's prime factors grouped at random, with some 1s."""
    if n == 0:
        return (0, int(rng.integers(1, 4)))
    factors, m, p = [], n, 2
    while m > 1:
        while m % p == 0:
            factors.append(p)
            m //= p
        p += 1
    dims = [1] * int(rng.integers(1, 4))
    for f in factors:
        dims[int(rng.integers(0, len(dims)))] *= f
    if rng.random() < 0.3:
        dims.insert(int(rng.integers(0, len(dims) + 1)), 1)
    return tuple(dims)


def _random_step(rng: np.random.Generator, t: Tensor, a: np.ndarray, max_numel: int) -> tuple[str, Tensor, np.ndarray]:
    kind = str(rng.choice(["reshape", "permute", "expand", "pad", "shrink", "flip", "ew", "ew", "reduce"]))
    nd = a.ndim
    if kind == "reshape":
        shape = _factor_shape(rng, a.size) if a.size else (a.size,)
        return f"reshape{shape}", t.reshape(shape), a.reshape(shape)
    if kind == "permute" and nd > 1:
        order = tuple(int(i) for i in rng.permutation(nd))
        return f"permute{order}", t.permute(order), a.transpose(order)
    if kind == "expand" and 1 in a.shape:
        new = tuple(int(rng.integers(2, 4)) if s == 1 and rng.random() < 0.7 else s for s in a.shape)
        if int(np.prod(new)) <= max_numel:
            return f"expand{new}", t.expand(new), np.broadcast_to(a, new)
    if kind == "pad" and nd > 0:
        pads = tuple((int(rng.integers(0, 3)), int(rng.integers(0, 3))) for _ in range(nd))
        value = float(rng.integers(-3, 4))
        new = tuple(s + b + e for s, (b, e) in zip(a.shape, pads))
        if int(np.prod(new)) <= max_numel:
            return f"pad({pads}, value={value})", t.pad(pads, value=value), np.pad(a, pads, constant_values=value)
    if kind == "shrink" and nd > 0:
        arg = []
        for s in a.shape:
            lo = int(rng.integers(0, s + 1)) if s else 0
            hi = int(rng.integers(lo, s + 1)) if rng.random() < 0.9 or lo == s else lo
            arg.append((lo, max(hi, min(lo + 1, s))))
        return f"shrink{tuple(arg)}", t.shrink(tuple(arg)), a[tuple(slice(lo, hi) for lo, hi in arg)]
    if kind == "flip" and nd > 0:
        axes = tuple(int(i) for i in range(nd) if rng.random() < 0.5) or (int(rng.integers(0, nd)),)
        return f"flip{axes}", t.flip(axes), np.flip(a, axes)
    if kind == "reduce" and nd > 0:
        axis = int(rng.integers(-nd, nd))
        keepdim = bool(rng.random() < 0.5)
        if a.shape[axis] > 0 and rng.random() < 0.5:
            return f"max({axis}, {keepdim})", t.max(axis=axis, keepdim=keepdim), a.max(axis=axis, keepdims=keepdim)
        return f"sum({axis}, {keepdim})", t.sum(axis=axis, keepdim=keepdim), a.sum(axis=axis, keepdims=keepdim)
    # elementwise with a fresh operand of the same shape, or with itself through another view
    b = rng.integers(-3, 4, size=a.shape).astype(np.float32)
    which = int(rng.integers(0, 4))
    if which == 0:
        return "ew(*2 - b)", t * 2 - Tensor(b, device=t.device), a * 2 - b
    if which == 1:
        return "ew(max(b))", t.maximum(Tensor(b, device=t.device)), np.maximum(a, b)
    if which == 2:
        return "ew(where(>0, x, -b))", (t > 0).where(t, -Tensor(b, device=t.device)), np.where(a > 0, a, -b)
    flipped = t.flip(0) if nd else t
    return "ew(x + flip0(x))", t + flipped, a + (np.flip(a, 0) if nd else a)


def run_random_programs(seed: int, count: int, device: str, max_numel: int) -> None:
    rng = np.random.default_rng(seed)
    for i in range(count):
        shape = tuple(int(s) for s in rng.integers(1, 5, size=int(rng.integers(1, 4))))
        a = rng.integers(-9, 10, size=shape).astype(np.float32)
        t, steps = Tensor(a, device=device), [f"Tensor(shape={shape})"]
        for _ in range(int(rng.integers(3, 9))):
            step, t, a = _random_step(rng, t, a, max_numel)
            steps.append(step)
        out = t.numpy()
        assert out.shape == a.shape and np.array_equal(out, a), f"program {seed}/{i} on {device}: {'.'.join(steps)}"


@pytest.mark.no_roundtrip
@pytest.mark.parametrize("seed", range(8))
def test_random_programs_cpu(seed: int):
    run_random_programs(1000 + seed, 40, "CPU", 4096)


@pytest.mark.no_roundtrip
@pytest.mark.parametrize("seed", range(4))
def test_random_programs_python(seed: int):
    run_random_programs(2000 + seed, 15, "PYTHON", 64)


# ---------------------------------------------------------------------------------------------------------------
# matmul

MATMUL_SHAPES = [
    ((3, 4), (4, 5)),
    ((1, 4), (4, 1)),
    ((1, 1), (1, 1)),
    ((4,), (4, 5)),
    ((3, 4), (4,)),
    ((4,), (4,)),
    ((2, 3, 4), (4, 5)),
    ((3, 4), (2, 4, 5)),
    ((2, 3, 4), (2, 4, 2)),
    ((2, 1, 3, 4), (3, 4, 2)),
    ((4,), (2, 4, 3)),
    ((3, 0), (0, 4)),
    ((0, 4), (4, 5)),
    ((3, 4), (4, 0)),
    ((0,), (0,)),
]


def matmul_ref(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.matmul(wide(a), wide(b))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [dtypes.float32, dtypes.float16, dtypes.int32])
@pytest.mark.parametrize(("sa", "sb"), MATMUL_SHAPES, ids=str)
def test_matmul(sa: tuple[int, ...], sb: tuple[int, ...], dtype: DType, device: str):
    a, b = data(sa, dtype, 38), data(sb, dtype, 39)
    ta, tb = Tensor(a, device=device), Tensor(b, device=device)
    tol = {"rtol": 1e-5, "atol": 1e-5} if dtype == dtypes.float32 else {}
    check(ta @ tb, matmul_ref(a, b), dtype, **tol)
    check(ta.matmul(tb), matmul_ref(a, b), dtype, **tol)


@pytest.mark.parametrize("device", DEVICES)
def test_matmul_noncontiguous(device: str):
    a, b = data((4, 3), dtypes.float32, 40), data((5, 4), dtypes.float32, 41)
    ta, tb = Tensor(a, device=device), Tensor(b, device=device)
    wa, wb = a.astype(np.float64), b.astype(np.float64)
    tol = {"rtol": 1e-5, "atol": 1e-5}
    check(ta.T @ tb.T, wa.T @ wb.T, dtypes.float32, **tol)
    check(ta.flip(0).T @ tb.flip(1).T, np.flip(wa, 0).T @ np.flip(wb, 1).T, dtypes.float32, **tol)
    check(ta.shrink(((1, 4), None)) @ tb.shrink(((0, 3), (1, 4))), wa[1:4] @ wb[0:3, 1:4], dtypes.float32, **tol)
    check(
        Tensor(a[:1], device=device).expand(5, 3) @ ta.T, np.broadcast_to(wa[:1], (5, 3)) @ wa.T, dtypes.float32, **tol
    )
    check(ta @ ta.T, wa @ wa.T, dtypes.float32, **tol)  # both operands read the same buffer
    pa = np.pad(wa, ((0, 0), (1, 1)))
    check(ta.pad(((0, 0), (1, 1))) @ Tensor(pa.T.astype(np.float32), device=device), pa @ pa.T, dtypes.float32, **tol)


@pytest.mark.parametrize("device", DEVICES)
def test_matmul_then_elementwise_and_chain(device: str):
    a, b, c = data((3, 4), dtypes.float32, 42), data((4, 5), dtypes.float32, 43), data((5, 2), dtypes.float32, 44)
    ta, tb, tc = (Tensor(x, device=device) for x in (a, b, c))
    wa, wb, wc = (x.astype(np.float64) for x in (a, b, c))
    tol = {"rtol": 1e-5, "atol": 1e-5}
    check((ta @ tb + 1).maximum(0), np.maximum(wa @ wb + 1, 0), dtypes.float32, **tol)
    check((ta @ tb) @ tc, wa @ wb @ wc, dtypes.float32, **tol)
    check((ta @ tb).sum(axis=0), (wa @ wb).sum(axis=0), dtypes.float32, **tol)


def test_matmul_large():
    rng = np.random.default_rng(45)
    a = rng.uniform(-1, 1, (65, 130)).astype(np.float32)
    b = rng.uniform(-1, 1, (130, 33)).astype(np.float32)
    check(Tensor(a) @ Tensor(b), a.astype(np.float64) @ b, dtypes.float32, rtol=1e-4, atol=1e-4)
    c = rng.integers(-5, 6, (64, 64)).astype(np.int32)
    check(Tensor(c) @ Tensor(c).T, c.astype(np.int64) @ c.T, dtypes.int32)
    # float16 dot products of length 4096: like sum, they must not accumulate in float16 (which stalls at 256)
    h = np.full((2, 4096), 0.1, np.float16)
    ref = h.astype(np.float64) @ h.T.astype(np.float64)
    check(Tensor(h) @ Tensor(h).T, ref, dtypes.float16, rtol=2e-3, atol=0)


# ---------------------------------------------------------------------------------------------------------------
# constructors


@pytest.mark.parametrize("device", DEVICES)
def test_constructor_dtypes_from_python(device: str):
    cases: list[tuple[Any, DType, np.ndarray]] = [
        ([1, 2], dtypes.int32, np.array([1, 2])),
        ([1.0], dtypes.float32, np.array([1.0])),
        ([True, False], dtypes.bool, np.array([True, False])),
        ([1, 2.5], dtypes.float32, np.array([1.0, 2.5])),
        ([[1, 2], [3, 4]], dtypes.int32, np.array([[1, 2], [3, 4]])),
        ([[[1.5]], [[-2.0]]], dtypes.float32, np.array([[[1.5]], [[-2.0]]])),
        (3, dtypes.int32, np.array(3)),
        (2.5, dtypes.float32, np.array(2.5)),
        (True, dtypes.bool, np.array(True)),
        ([], dtypes.float32, np.zeros((0,))),
    ]
    for value, dtype, ref in cases:
        t = Tensor(value, device=device)
        assert t.device == device
        check(t, ref, dtype, rtol=0, atol=0)


@pytest.mark.parametrize("device", DEVICES)
def test_constructor_explicit_dtype(device: str):
    check(Tensor([1, 2], dtype=dtypes.float32, device=device), np.array([1.0, 2.0]), dtypes.float32)
    check(Tensor([1, 0, 2], dtype=dtypes.bool, device=device), np.array([True, False, True]), dtypes.bool)
    check(Tensor(3.0, dtype=dtypes.float16, device=device), np.array(3.0), dtypes.float16)
    check(Tensor([1.5, -2.5], dtype=dtypes.float16, device=device), np.array([1.5, -2.5]), dtypes.float16)
    a = np.array([0.5, 1.25], np.float32)
    check(Tensor(a, dtype=dtypes.float16, device=device), a, dtypes.float16)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("np_dtype", [np.float32, np.float16, np.int32, np.bool_])
def test_constructor_numpy_keeps_dtype(np_dtype: Any, device: str):
    a = (np.arange(6).reshape(2, 3) * 3 - 6).astype(np_dtype)  # one zero: one False
    t = Tensor(a, device=device)
    want = {np.float32: dtypes.float32, np.float16: dtypes.float16, np.int32: dtypes.int32, np.bool_: dtypes.bool}
    check(t, a, want[np_dtype], rtol=0, atol=0)
    # a non-contiguous numpy array is read by value, not by its memory layout
    check(Tensor(a.T, device=device), a.T, want[np_dtype], rtol=0, atol=0)
    check(Tensor(a[:, ::2], device=device), a[:, ::2], want[np_dtype], rtol=0, atol=0)


@pytest.mark.parametrize("device", DEVICES)
def test_constructor_numpy_0d(device: str):
    for a, dtype in [
        (np.array(1.5, np.float32), dtypes.float32),
        (np.array(7, np.int32), dtypes.int32),
        (np.array(True), dtypes.bool),
        (np.array(0.25, np.float16), dtypes.float16),
    ]:
        check(Tensor(a, device=device), a, dtype, rtol=0, atol=0)
        check(Tensor(a, device=device) + Tensor(a, device=device), wide(a) + wide(a), dtype, rtol=0, atol=0)
    check(Tensor(np.float32(2.5), device=device), np.array(2.5), dtypes.float32, rtol=0, atol=0)


def test_constructor_numpy_float64():
    a = np.array([[0.1, -2.0], [1e10, 3.25]])
    t = Tensor(a)
    assert t.dtype in (dtypes.float64, dtypes.float32)
    assert t.shape == (2, 2)
    np.testing.assert_allclose(t.numpy(), a.astype(NP[t.dtype]), rtol=0, atol=0)
    np.testing.assert_allclose((t * 2).numpy(), (a * 2).astype(NP[t.dtype]), rtol=1e-7)


def test_constructor_copies_numpy_input():
    a = np.array([1.0, 2.0, 3.0], np.float32)
    t = Tensor(a)
    t.realize()
    a[0] = 100.0
    check(t, [1.0, 2.0, 3.0], dtypes.float32, rtol=0, atol=0)


@pytest.mark.parametrize("device", DEVICES)
def test_zeros_ones_full_empty(device: str):
    kw = {"device": device}
    check(Tensor.zeros(2, 3, **kw), np.zeros((2, 3)), dtypes.float32)
    check(Tensor.zeros((2, 3), **kw), np.zeros((2, 3)), dtypes.float32)
    check(Tensor.zeros(0, 3, **kw), np.zeros((0, 3)), dtypes.float32)
    check(Tensor.zeros(4, dtype=dtypes.int32, **kw), np.zeros(4), dtypes.int32)
    check(Tensor.ones(2, 3, **kw), np.ones((2, 3)), dtypes.float32)
    check(Tensor.ones((1,), dtype=dtypes.bool, **kw), np.ones(1, bool), dtypes.bool)
    check(Tensor.ones(3, dtype=dtypes.float16, **kw), np.ones(3), dtypes.float16)
    check(Tensor.ones((), **kw), np.ones(()), dtypes.float32)
    check(Tensor.full((2, 3), 5.0, **kw), np.full((2, 3), 5.0), dtypes.float32)
    check(Tensor.full((2, 3), 7, **kw), np.full((2, 3), 7), dtypes.int32)
    check(Tensor.full((2,), True, **kw), np.full(2, True), dtypes.bool)
    check(Tensor.full((), -2.5, **kw), np.array(-2.5), dtypes.float32)
    check(Tensor.full((2, 2), 1.5, dtype=dtypes.float16, **kw), np.full((2, 2), 1.5), dtypes.float16)
    check(Tensor.full((0, 2), 1.5, **kw), np.zeros((0, 2)), dtypes.float32)
    for t in (Tensor.empty(2, 3, **kw), Tensor.empty((2, 3), **kw)):
        assert t.shape == (2, 3) and t.dtype == dtypes.float32 and t.device == device
        assert t.realize().numpy().shape == (2, 3)
    e = Tensor.empty(4, dtype=dtypes.int32, **kw)
    assert e.dtype == dtypes.int32 and e.numpy().dtype == np.int32
    for t in (Tensor.zeros(2, **kw), Tensor.ones(2, **kw), Tensor.full((2,), 1.0, **kw)):
        assert t.device == device


@pytest.mark.parametrize("device", DEVICES)
def test_arange(device: str):
    kw = {"device": device}
    check(Tensor.arange(5, **kw), np.arange(5), dtypes.int32)
    check(Tensor.arange(2, 8, **kw), np.arange(2, 8), dtypes.int32)
    check(Tensor.arange(2, 9, 2, **kw), np.arange(2, 9, 2), dtypes.int32)
    check(Tensor.arange(5, 0, -1, **kw), np.arange(5, 0, -1), dtypes.int32)
    check(Tensor.arange(10, 0, -3, **kw), np.arange(10, 0, -3), dtypes.int32)
    check(Tensor.arange(0, 1, 0.25, **kw), np.arange(0, 1, 0.25), dtypes.float32)
    check(Tensor.arange(1.5, **kw), np.arange(1.5), dtypes.float32)
    check(Tensor.arange(3, dtype=dtypes.float32, **kw), np.arange(3.0), dtypes.float32)
    check(Tensor.arange(0, **kw), np.arange(0), dtypes.int32)
    check(Tensor.arange(10, 3, **kw), np.arange(10, 3), dtypes.int32)
    check(Tensor.arange(1, **kw), np.arange(1), dtypes.int32)
    check(Tensor.arange(6, **kw).reshape(2, 3) * 2, np.arange(6).reshape(2, 3) * 2, dtypes.int32)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "args, dtype",
    [((-1.0, 1.0, 0.1), None), ((0.0, 10.0, 0.3), "float64"), ((7,), "float16"), ((3, 1000, 7), "int64")],
)
def test_arange_bits_as_numpy(device: str, args: tuple, dtype: str | None):
    # start + i * step computed as numpy computes it (float64, then rounded once), so the bits agree
    want = np.arange(*args).astype(dtype or np.float32)
    got = Tensor.arange(*args, dtype=dtype, device=device)
    np.testing.assert_array_equal(got.numpy(), want)
    assert got.numpy().dtype == want.dtype


def test_arange_is_one_elementwise_kernel():
    # a kernel, not numpy on the host: one launch doing O(n) work (the running count of ones that makes the
    # index is a reduction the codegen folds to its closed form, not an n * n loop)
    GlobalCounters.reset()
    t = Tensor.arange(3, 40003, 4).realize()
    assert GlobalCounters.kernel_count == 1 and GlobalCounters.global_ops <= 4 * 10_000
    np.testing.assert_array_equal(t.numpy(), np.arange(3, 40003, 4))


def test_arange_large():
    check(Tensor.arange(100_000), np.arange(100_000), dtypes.int32)
    check(Tensor.arange(-50, 50, 0.5), np.arange(-50, 50, 0.5), dtypes.float32, rtol=0, atol=1e-6)


# ---------------------------------------------------------------------------------------------------------------
# item, tolist, properties, devices, realize


@pytest.mark.parametrize("device", DEVICES)
def test_item(device: str):
    v = Tensor(3.5, device=device).item()
    assert v == 3.5 and isinstance(v, float)
    v = Tensor([[7]], device=device).item()
    assert v == 7 and isinstance(v, int)
    v = Tensor(True, device=device).item()
    assert v is True
    v = (Tensor([1.0, 2.0, 3.0], device=device).sum()).item()
    assert v == 6.0 and isinstance(v, float)
    v = Tensor([1.5], dtype=dtypes.float16, device=device).item()
    assert v == 1.5 and isinstance(v, float)
    v = (Tensor([4, 5], device=device) > 4).max().item()
    assert v is True


@pytest.mark.parametrize("device", DEVICES)
def test_tolist(device: str):
    assert Tensor([[1, 2], [3, 4]], device=device).tolist() == [[1, 2], [3, 4]]
    assert Tensor([[1, 2], [3, 4]], device=device).T.tolist() == [[1, 3], [2, 4]]
    assert Tensor([0.5, -1.25], device=device).tolist() == [0.5, -1.25]
    assert Tensor([True, False], device=device).tolist() == [True, False]
    assert Tensor(2.0, device=device).tolist() == 2.0
    assert Tensor.zeros(0, 2, device=device).tolist() == []
    a = data((2, 3), dtypes.float32, 46)
    assert Tensor(a, device=device).tolist() == a.tolist()
    out = Tensor([1, 2], device=device).tolist()
    assert all(type(x) is int for x in out)


@pytest.mark.parametrize("device", DEVICES)
def test_shape_dtype_device(device: str):
    t = Tensor.ones(2, 3, 4, device=device)
    assert t.shape == (2, 3, 4) and type(t.shape) is tuple
    assert all(type(s) is int for s in t.shape)
    assert t.dtype is dtypes.float32
    assert t.device == device
    assert t.sum(axis=1).shape == (2, 4)
    assert t.permute(2, 0, 1).shape == (4, 2, 3)
    assert (t < 1).dtype is dtypes.bool
    assert (t + 1).device == device


def test_default_device_is_cpu():
    if Device.DEFAULT != "CPU":
        pytest.skip(f"DEVICE={Device.DEFAULT} makes that the default")
    assert Tensor([1, 2]).device == "CPU"
    assert Tensor.zeros(2).device == "CPU"
    assert Tensor.arange(3).device == "CPU"


@pytest.mark.parametrize("dtype", DTYPES)
def test_to_python_and_back(dtype: DType):
    a = data((3, 4), dtype, 47)
    t = Tensor(a)
    p = t.to("PYTHON")
    assert p.device == "PYTHON" and p.dtype == dtype and p.shape == (3, 4)
    check(p, a, dtype, rtol=0, atol=0)
    back = p.to("CPU")
    assert back.device == "CPU"
    check(back, a, dtype, rtol=0, atol=0)
    assert t.device == Device.DEFAULT  # .to returns a new tensor
    # a lazy expression moves too, and compute continues on the new device
    lazy = (t.T + t.T) if dtype != dtypes.bool else t.T
    ref = (wide(a).T + wide(a).T) if dtype != dtypes.bool else a.T
    moved = lazy.to("PYTHON")
    check(moved, ref, dtype, rtol=0, atol=0)
    if dtype != dtypes.bool:
        check(moved * 2, ref * 2, dtype, rtol=0, atol=0)
    check(Tensor(a, device="PYTHON").to("CPU").flip(0), np.flip(a, 0), dtype, rtol=0, atol=0)


@pytest.mark.parametrize("device", DEVICES)
def test_realize_returns_self_and_many(device: str):
    a = Tensor([1.0, 2.0], device=device)
    b = a * 2
    assert b.realize() is b
    c, d = a + 1, a - 1
    Tensor.realize(c, d)
    check(c, [2.0, 3.0], dtypes.float32, rtol=0, atol=0)
    check(d, [0.0, 1.0], dtypes.float32, rtol=0, atol=0)
    check(b, [2.0, 4.0], dtypes.float32, rtol=0, atol=0)


def test_realize_of_a_non_tensor_names_the_argument():
    # a parameter without a gradient (p.grad is None) passed along with the others
    a = Tensor([1.0, 2.0]) * 2
    with pytest.raises(TypeError, match="realize: argument 2 must be a Tensor, got NoneType"):
        Tensor.realize(a, a + 1, None)


@pytest.mark.parametrize("device", DEVICES)
def test_contiguous(device: str):
    a = distinct((3, 4), dtypes.float32)
    t = Tensor(a, device=device)
    check(t.T.contiguous(), a.T, dtypes.float32, rtol=0, atol=0)
    check((t * 2).flip(1).contiguous() + 1, np.flip(a.astype(np.float64) * 2, 1) + 1, dtypes.float32, rtol=0, atol=0)
    check(t.contiguous(), a, dtypes.float32, rtol=0, atol=0)
    check(t.contiguous().contiguous().T, a.T, dtypes.float32, rtol=0, atol=0)


# ---------------------------------------------------------------------------------------------------------------
# errors: a clear ValueError / RuntimeError / IndexError / TypeError naming what went wrong, never an AssertionError


def test_broadcast_error_names_shapes():
    with pytest.raises((ValueError, RuntimeError)) as e:
        (Tensor.ones(3, 2) + Tensor.ones(4)).realize()
    msg = str(e.value)
    assert shape_in(msg, (3, 2)) and shape_in(msg, (4,)), msg
    assert re.search(r"broadcast|add|\+", msg, re.IGNORECASE), msg
    with pytest.raises((ValueError, RuntimeError)) as e:
        (Tensor.ones(2, 3) < Tensor.ones(3, 2)).realize()
    assert shape_in(str(e.value), (2, 3)) and shape_in(str(e.value), (3, 2)), str(e.value)
    with pytest.raises((ValueError, RuntimeError)) as e:
        Tensor.ones(2, 1).where(Tensor.ones(3), Tensor.ones(4)).realize()
    assert shape_in(str(e.value), (3,)) or shape_in(str(e.value), (4,)), str(e.value)


def test_matmul_error_names_shapes():
    with pytest.raises((ValueError, RuntimeError)) as e:
        (Tensor.ones(3, 4) @ Tensor.ones(5, 6)).realize()
    msg = str(e.value)
    assert shape_in(msg, (3, 4)) and shape_in(msg, (5, 6)), msg
    assert re.search(r"matmul|dot|@|multipl", msg, re.IGNORECASE), msg
    with pytest.raises((ValueError, RuntimeError)) as e:
        (Tensor.ones(4) @ Tensor.ones(3)).realize()
    assert shape_in(str(e.value), (4,)) and shape_in(str(e.value), (3,)), str(e.value)
    with pytest.raises((ValueError, RuntimeError)) as e:
        (Tensor.ones(2, 3, 4) @ Tensor.ones(3, 4, 5)).realize()  # batch dims 2 and 3 do not broadcast
    assert shape_in(str(e.value), (2, 3, 4)) and shape_in(str(e.value), (3, 4, 5)), str(e.value)
    with pytest.raises((ValueError, RuntimeError)):
        (Tensor(1.0) @ Tensor(2.0)).realize()


def test_reshape_error_names_shapes():
    with pytest.raises((ValueError, RuntimeError), match="(?i)reshape") as e:
        Tensor.ones(2, 3).reshape(4, 2)
    assert shape_in(str(e.value), (2, 3)) and shape_in(str(e.value), (4, 2)), str(e.value)
    with pytest.raises((ValueError, RuntimeError), match="(?i)reshape") as e:
        Tensor.ones(2, 3).reshape(4, -1)
    assert shape_in(str(e.value), (2, 3)), str(e.value)
    with pytest.raises((ValueError, RuntimeError), match="(?i)reshape"):
        Tensor.ones(2, 3).reshape(-1, -1)


def test_pad_error_names_shape():
    with pytest.raises((ValueError, RuntimeError), match="(?i)pad") as e:
        Tensor.ones(2, 3).pad(((1, 1), (1, 1), (1, 1)))
    assert shape_in(str(e.value), (2, 3)), str(e.value)


def test_expand_error_names_shapes():
    with pytest.raises((ValueError, RuntimeError)) as e:
        Tensor.ones(2, 3).expand(4, 3)
    assert shape_in(str(e.value), (2, 3)) and shape_in(str(e.value), (4, 3)), str(e.value)


@pytest.mark.parametrize(
    ("fn", "axis"),
    [
        (lambda t: t.sum(axis=5), "5"),
        (lambda t: t.max(axis=-3), "-3"),
        (lambda t: t.sum(axis=(0, 7)), "7"),
        (lambda t: t.max(axis=2, keepdim=True), "2"),
        (lambda t: t.flip(4), "4"),
    ],
)
def test_axis_out_of_range(fn: Callable[[Tensor], Tensor], axis: str):
    with pytest.raises(IndexError) as e:
        fn(Tensor.ones(2, 3)).realize()
    assert axis in str(e.value), str(e.value)


def test_errors_are_not_assertions():
    bad: list[Callable[[], Any]] = [
        lambda: Tensor.ones(3, 2) + Tensor.ones(4),
        lambda: Tensor.ones(3, 4) @ Tensor.ones(5, 6),
        lambda: Tensor.ones(2, 3).reshape(7),
        lambda: Tensor.ones(2, 3).pad(((1, 1),) * 3),
        lambda: Tensor.ones(2, 3).sum(axis=2),
        lambda: Tensor.ones(2, 3).expand(4, 3),
    ]
    for fn in bad:
        with pytest.raises(Exception) as e:
            fn()
        assert not isinstance(e.value, AssertionError), repr(e.value)


# *** zero-size inputs through many ops, against torch ***

ZERO_SIZE_OPS: dict[str, tuple[Callable, Callable]] = {
    "clone": (lambda t: t.clone(), lambda t: t.clone()),
    "exp": (lambda t: t.exp(), lambda t: t.exp()),
    "sum0": (lambda t: t.sum(0), lambda t: t.sum(0)),
    "sum": (lambda t: t.sum(), lambda t: t.sum()),
    "mean0": (lambda t: t.mean(0), lambda t: t.mean(0)),
    "prod0": (lambda t: t.prod(0), lambda t: t.prod(0)),
    "max-1": (lambda t: t.max(-1), lambda t: t.amax(-1)),
    "max0": (lambda t: t.max(0), lambda t: t.amax(0)),  # an empty axis: both raise IndexError
    "argmax-1": (lambda t: t.argmax(-1), lambda t: t.argmax(-1)),
    "any0": (lambda t: t.any(0), lambda t: t.any(0)),
    "all0": (lambda t: t.all(0), lambda t: t.all(0)),
    "logsumexp0": (lambda t: t.logsumexp(0), lambda t: t.logsumexp(0)),
    "softmax0": (lambda t: t.softmax(0), lambda t: t.softmax(0)),
    "cumsum0": (lambda t: t.cumsum(0), lambda t: t.cumsum(0)),
    "cummax0": (lambda t: t.cummax(0).indices, lambda t: t.cummax(0).indices),
    "sort0": (lambda t: t.sort(0)[0], lambda t: t.sort(0)[0]),
    "pad": (lambda t: t.pad(((1, 1),) + ((0, 0),) * (t.ndim - 1)), lambda t: TF.pad(t, (0, 0) * (t.ndim - 1) + (1, 1))),
    "flip": (lambda t: t.flip(0), lambda t: t.flip(0)),
    "matmul": (lambda t: t @ Tensor.ones(3, 2), lambda t: t @ torch.ones(3, 2)),
    "gram": (lambda t: t.transpose(-1, -2) @ t, lambda t: t.transpose(-1, -2) @ t),
    "cat": (lambda t: t.cat(t, dim=0), lambda t: torch.cat([t, t], 0)),
    "stack": (lambda t: t.stack(t), lambda t: torch.stack([t, t])),
    "repeat": (lambda t: t.repeat(*(2,) * t.ndim), lambda t: t.repeat(*(2,) * t.ndim)),
    "where": (lambda t: (t > 0).where(t, 1.0), lambda t: torch.where(t > 0, t, 1.0)),
    "getitem": (lambda t: t[..., 1:], lambda t: t[..., 1:]),
    "nonzero": (lambda t: t.nonzero(), lambda t: t.nonzero()),
    "unfold": (lambda t: t.unfold(-1, 2, 1), lambda t: t.unfold(-1, 2, 1)),
    "roll": (lambda t: t.roll(1, 0), lambda t: t.roll(1, 0)),
    "layernorm": (lambda t: t.layernorm(), lambda t: TF.layer_norm(t, t.shape[-1:])),
    "isclose": (lambda t: t.isclose(t), lambda t: t.isclose(t)),
    "einsum": (lambda t: Tensor.einsum("...j->...", t), lambda t: torch.einsum("...j->...", t)),
}
try:  # the references; this file's other tests run without torch
    import torch

    TF = torch.nn.functional
except ImportError:
    torch = TF = None


@pytest.mark.parametrize("shape", [(0, 3), (2, 0, 3)])
@pytest.mark.parametrize("name", list(ZERO_SIZE_OPS))
def test_zero_size_inputs_match_torch(name: str, shape: tuple[int, ...]):
    if torch is None:
        pytest.skip("torch is not installed")
    ours, theirs = ZERO_SIZE_OPS[name]
    a = np.zeros(shape, np.float32)
    try:
        want = theirs(torch.tensor(a)).numpy()
    except Exception as e:  # torch refuses: so must we, with the same class
        with pytest.raises(type(e)):
            ours(Tensor(a)).numpy()
        return
    got = ours(Tensor(a)).numpy()
    assert got.shape == want.shape
    np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64))
