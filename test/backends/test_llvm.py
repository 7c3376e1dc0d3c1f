"""The LLVM device: a representative suite run on it against numpy (every op family, each dtype it supports,
a fused kernel, reductions, assignment, a matmul, a training step), the IR it renders, and the error when
llvmlite is missing. The whole op suite runs on it with `DEVICE=LLVM pytest test/ops/test_tensor_*.py`."""

from __future__ import annotations

import numpy as np
import pytest

from zeptograd import Device, GlobalCounters, Tensor, dtypes
from zeptograd.dtype import DType
from zeptograd.helpers import Context

llvmlite = pytest.importorskip("llvmlite", reason="the LLVM device needs llvmlite (pip install -e '.[llvm]')")

RNG = np.random.default_rng(13)
NP = {
    dtypes.float32: np.float32,
    dtypes.float16: np.float16,
    dtypes.float64: np.float64,
    dtypes.int32: np.int32,
    dtypes.bool: np.bool_,
}


def llvm(a: np.ndarray) -> Tensor:
    return Tensor(a, device="LLVM")


def data(shape: tuple[int, ...], dtype: DType, low: float = -3, high: float = 3) -> np.ndarray:
    if dtype is dtypes.bool:
        return RNG.random(shape) < 0.5
    if dtypes.is_float(dtype):
        return RNG.uniform(low, high, shape).astype(NP[dtype])
    return RNG.integers(int(low) * 10, int(high) * 10, shape).astype(NP[dtype])


def close(t: Tensor, want: np.ndarray, rtol: float = 1e-6, atol: float = 1e-6) -> None:
    assert t.device == "LLVM"
    got = t.numpy()
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol)


@pytest.fixture
def on_llvm():
    """Tensors made without a device (a layer's parameters) go to LLVM."""
    old = Device.DEFAULT
    Device.DEFAULT = "LLVM"
    try:
        yield
    finally:
        Device.DEFAULT = old


def test_llvm_is_listed_and_used():
    assert "LLVM" in Device.get_available_devices()
    assert Device["LLVM"].renderer.device == "LLVM"
    t = llvm(np.ones(3, np.float32)) + 1
    assert t.device == "LLVM" and t.tolist() == [2.0, 2.0, 2.0]


BINARY = {
    "add": (lambda a, b: a + b, lambda a, b: a + b),
    "sub": (lambda a, b: a - b, lambda a, b: a - b),
    "mul": (lambda a, b: a * b, lambda a, b: a * b),
    "maximum": (lambda a, b: a.maximum(b), np.maximum),
    "minimum": (lambda a, b: a.minimum(b), np.minimum),
    "lt": (lambda a, b: a < b, lambda a, b: a < b),
    "eq": (lambda a, b: a == b, lambda a, b: a == b),
    "ne": (lambda a, b: a != b, lambda a, b: a != b),
}


@pytest.mark.parametrize("dtype", [dtypes.float32, dtypes.float16, dtypes.float64, dtypes.int32])
@pytest.mark.parametrize("op", list(BINARY))
def test_binary(op: str, dtype: DType):
    t_fn, np_fn = BINARY[op]
    a, b = data((7, 33), dtype), data((7, 33), dtype)
    want = np_fn(a, b)
    close(t_fn(llvm(a), llvm(b)), want, rtol=1e-3 if dtype is dtypes.float16 else 1e-6)


@pytest.mark.parametrize("op", ["and", "or", "xor", "lt", "ne", "eq", "maximum", "where"])
def test_bool(op: str):
    a, b, c = data((5, 19), dtypes.bool), data((5, 19), dtypes.bool), data((5, 19), dtypes.bool)
    ta, tb, tc = llvm(a), llvm(b), llvm(c)
    got, want = {
        "and": (ta & tb, a & b),
        "or": (ta | tb, a | b),
        "xor": (ta ^ tb, a ^ b),
        "lt": (ta < tb, a < b),
        "ne": (ta != tb, a != b),
        "eq": (ta == tb, a == b),
        "maximum": (ta.maximum(tb), np.maximum(a, b)),
        "where": (ta.where(tb, tc), np.where(a, b, c)),
    }[op]
    close(got, want)
    close(ta.logical_not(), ~a)


def test_int32_arithmetic_division_and_bits():
    a = data((9, 17), dtypes.int32)
    b = data((9, 17), dtypes.int32)
    b[b == 0] = 3
    ta, tb = llvm(a), llvm(b)
    close(ta // tb, a // b)  # floor division, negative operands included
    close(ta % tb, a % b)
    close(ta & tb, a & b)
    close(ta | tb, a | b)
    close(ta ^ tb, a ^ b)
    close(ta << 3, a << 3)
    close(ta >> 2, a >> 2)
    close(-ta, -a)
    close(ta.abs(), np.abs(a))
    # x // 0 is 0 (numpy's answer) and INT32_MIN // -1 wraps: neither traps
    z = np.array([5, -5, -(2**31)], np.int32)
    d = np.array([0, 0, -1], np.int32)
    assert (llvm(z) // llvm(d)).tolist() == [0, 0, -(2**31)]


@pytest.mark.parametrize("dtype", [dtypes.float32, dtypes.float16, dtypes.float64])
def test_unary_and_transcendentals(dtype: DType):
    x = data((4, 50), dtype, 0.1, 4.0)
    wide = x.astype(np.float64)
    rtol = 2e-3 if dtype is dtypes.float16 else 1e-5
    for name, ref in [("exp", np.exp), ("log", np.log), ("sqrt", np.sqrt), ("sin", np.sin), ("cos", np.cos)]:
        close(getattr(llvm(x), name)(), ref(wide).astype(NP[dtype]), rtol=rtol, atol=rtol)
    close(llvm(x).reciprocal(), (1 / wide).astype(NP[dtype]), rtol=rtol)
    close((-llvm(x)).relu(), np.zeros_like(x))
    close(llvm(x * 3 - 6).trunc(), np.trunc(x * 3 - 6))


def test_sin_far_from_zero_takes_the_rare_branch():
    # |x| >= 1600 lanes go through the longer reductions (a branch on "any lane"); the rest through the short one
    x = np.concatenate([RNG.uniform(-10, 10, 40), RNG.uniform(1e4, 1e7, 24)]).astype(np.float32)
    close(llvm(x).sin(), np.sin(x.astype(np.float64)).astype(np.float32), rtol=1e-5, atol=1e-6)


def test_special_values():
    nan, inf = float("nan"), float("inf")
    a = np.array([nan, 1.0, -inf, 0.0, inf, -1.0, nan, 2.0], np.float32)
    b = np.array([1.0, nan, 3.0, -0.0, -inf, -2.0, nan, 2.0], np.float32)
    got = llvm(a).maximum(llvm(b)).numpy()
    np.testing.assert_array_equal(got, np.maximum(a, b))  # NaN wins, as in numpy
    assert (llvm(a) != llvm(a)).tolist() == (a != a).tolist()
    assert (llvm(a) < llvm(b)).tolist() == (a < b).tolist()
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal((llvm(a) / llvm(b)).numpy(), a / b)


@pytest.mark.parametrize(
    ("src", "dst"),
    [
        (dtypes.float32, dtypes.int32),
        (dtypes.int32, dtypes.float32),
        (dtypes.float32, dtypes.float16),
        (dtypes.float16, dtypes.float64),
        (dtypes.float64, dtypes.float32),
        (dtypes.float32, dtypes.bool),
        (dtypes.bool, dtypes.float32),
        (dtypes.int32, dtypes.bool),
        (dtypes.bool, dtypes.int32),
        (dtypes.int32, dtypes.float64),
    ],
)
def test_casts(src: DType, dst: DType):
    a = data((3, 21), src)
    if src is dtypes.float32:
        a[0, :3] = [0.0, -0.0, float("nan")] if dst is dtypes.bool else [0.0, -0.5, 2.5]
    close(llvm(a).cast(dst), a.astype(NP[dst]))


def test_bitcast():
    a = data((40,), dtypes.float32)
    close(llvm(a).bitcast(dtypes.int32), a.view(np.int32))


@pytest.mark.parametrize("dtype", [dtypes.float32, dtypes.float64, dtypes.int32, dtypes.float16])
def test_reductions(dtype: DType):
    a = data((13, 70), dtype, -2, 2)
    rtol = 1e-2 if dtype is dtypes.float16 else 1e-5
    wide = a.astype(np.float64)
    close(llvm(a).sum(axis=1), wide.sum(axis=1).astype(NP[dtype]), rtol, 1e-3)  # int32 sums stay int32
    close(llvm(a).max(axis=0), a.max(axis=0))
    close(llvm(a).min(), np.array(a.min()))
    if dtypes.is_float(dtype):
        close(llvm(a).mean(), np.array(wide.mean(), NP[dtype]), rtol, 1e-3)


def test_bool_reductions():
    a = data((6, 33), dtypes.bool)
    close(llvm(a).any(axis=1), a.any(axis=1))
    close(llvm(a).all(axis=0), a.all(axis=0))


def test_fused_kernel_is_one_launch():
    a, b, c = data((64, 65), dtypes.float32), data((64, 65), dtypes.float32), data((65,), dtypes.float32)
    ta, tb, tc = llvm(a).realize(), llvm(b).realize(), llvm(c).realize()
    GlobalCounters.reset()
    out = ((ta * tb + tc).relu() * 2 - 1).sum(axis=1)
    got = out.numpy()
    assert GlobalCounters.kernel_count == 1
    np.testing.assert_allclose(got, (np.maximum(a * b + c, 0) * 2 - 1).sum(axis=1), rtol=1e-4, atol=1e-4)


def test_softmax_and_movement():
    x = data((8, 100), dtypes.float32)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    close(llvm(x).softmax(axis=1), e / e.sum(axis=1, keepdims=True), rtol=1e-5)
    t = llvm(x)
    close(t.T.flip(0)[2:50:3].pad(((1, 2), (0, 1))), np.pad(np.flip(x.T, 0)[2:50:3], ((1, 2), (0, 1))))
    close(t.reshape(4, 2, 100).permute(2, 0, 1).expand(100, 4, 2)[::7], x.reshape(4, 2, 100).transpose(2, 0, 1)[::7])


@pytest.mark.parametrize("shape", [(3, 5, 4), (64, 48, 80), (130, 200, 96)])
def test_matmul(shape: tuple[int, int, int]):
    m, k, n = shape
    a, b = data((m, k), dtypes.float32, -1, 1), data((k, n), dtypes.float32, -1, 1)
    close(llvm(a) @ llvm(b), (a.astype(np.float64) @ b).astype(np.float32), rtol=1e-4, atol=1e-4)


def test_conv2d():
    torch = pytest.importorskip("torch")
    x, w = data((2, 3, 12, 12), dtypes.float32), data((8, 3, 3, 3), dtypes.float32)
    want = torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(w), padding=1).numpy()
    close(llvm(x).conv2d(llvm(w), padding=1), want, rtol=1e-4, atol=1e-4)


def test_large_kernel_split_across_threads_matches_numpy():
    a = data((512, 1024), dtypes.float32)
    with Context(THREADS=2):
        close((llvm(a) * 2 + 1).exp2(), np.exp2(a.astype(np.float64) * 2 + 1).astype(np.float32), rtol=1e-5)
        close(llvm(a).sum(axis=1), a.astype(np.float64).sum(axis=1).astype(np.float32), rtol=1e-4, atol=1e-3)


def test_debug4_prints_the_llvm_ir(capsys):
    a = data((16,), dtypes.float32)
    with Context(DEBUG=4):
        out = (llvm(a) * 3.5 + 1).numpy()
    text = capsys.readouterr().out
    assert "define void @" in text and "@llvm.fma" in text  # x*y+z is a fused multiply-add
    # one rounding of the exact a * 3.5 + 1 (float32's a * 3.5 + 1 rounds twice: 1e-6 off where it cancels)
    np.testing.assert_allclose(out, a.astype(np.float64) * 3.5 + 1, rtol=1e-7)


def test_gated_loads_read_no_memory_outside_a_buffer():
    # padding gates the reads: a select between the element and a block of zeros, never a read past the end
    a = data((3, 3), dtypes.float32)
    close(llvm(a).pad(((5, 5), (9, 9)), value=2.0), np.pad(a, ((5, 5), (9, 9)), constant_values=2.0))


def test_float64_to_float16_rounds_once():
    """float64 -> float16 has no x86 instruction and LLVM calls `__truncdfhf2`, which this process may not have
    (it crashed): the renderer rounds to float32 to odd, then to half. Doubles just off the half midpoints are
    where rounding twice would differ."""
    rng = np.random.default_rng(1)
    h = rng.integers(0, 0x7BFF, 4000).astype(np.uint16).view(np.float16)
    lo, hi = h.astype(np.float64), np.nextafter(h, np.float16(np.inf)).astype(np.float64)
    mid = (lo + hi) / 2
    x = np.concatenate(
        [mid, np.nextafter(mid, 0), np.nextafter(mid, 1e9), -mid, [np.inf, -np.inf, 1e300, 5e-324, -0.0]]
    )
    x = np.concatenate([x, [np.nan]])
    with np.errstate(over="ignore"):
        want = x.astype(np.float16)
    got = llvm(x).cast(dtypes.float16).numpy()
    np.testing.assert_array_equal(got, want)
    assert np.array_equal(np.signbit(got), np.signbit(want))


def test_bool_add_and_mul_are_or_and_and():
    """i1 `add` wraps (True + True would be False): on bools ADD renders as `or` and MUL as `and`, as numpy."""
    a = np.array([True, True, False, False] * 3)
    b = np.array([True, False, True, False] * 3)
    close(llvm(a) + llvm(b), a + b)
    close(llvm(a) * llvm(b), a * b)
