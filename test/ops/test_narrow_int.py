"""The narrow ints (int4, uint4, int2, uint2): a value per byte, computed in int32 and wrapped to the width.

The oracle is ml_dtypes: its conversions (`astype`) from floats and ints and to every other dtype, and its bytes
(`.view(np.uint8)`); arithmetic is checked against numpy's int64 arithmetic wrapped to the width by ml_dtypes.
"""

import warnings

import numpy as np
import pytest

from zeptograd import Tensor, dtypes
from zeptograd.dtype import NARROW_INTS, least_upper_dtype, truncate

ml = pytest.importorskip("ml_dtypes", minversion="0.5")

DEVICES = ["CPU", "PYTHON"]
NARROW = [dtypes.int4, dtypes.uint4, dtypes.int2, dtypes.uint2]
IDS = [dt.name for dt in NARROW]


def _ml(dt):
    return getattr(ml, dt.name)


def _astype(x: np.ndarray, t) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # numpy warns of NaN and out-of-range conversions
        return x.astype(t)


def _every_value(dt) -> np.ndarray:
    fmt = NARROW_INTS[dt]
    return np.arange(fmt.min, fmt.max + 1).astype(_ml(dt))


def _values(t: Tensor, dt) -> np.ndarray:
    """A narrow tensor's values as numpy's int64 (and its dtype checked)."""
    assert t.dtype is dt
    return t.numpy().astype(np.int64)


def _edge_floats() -> np.ndarray:
    """float32 values around every range end and rounding case: a fine grid over the ranges, just inside and
    outside each end, zeros of both signs, infinities, NaN, huge values and random ones."""
    grid = np.arange(-20, 20, 0.125)
    near = np.array([e + d for e in (-8, -4, -2, -1, 0, 1, 2, 3, 4, 7, 8, 15, 16) for d in (-1e-6, 1e-6, -0.5, 0.5)])
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e10, -1e10, 3e38, -3e38, 2.0**31, -(2.0**31), 1e-45])
    rng = np.random.default_rng(0)
    wide = rng.standard_normal(500) * 10.0 ** rng.integers(-3, 12, 500)
    return np.concatenate([grid, near, special, wide]).astype(np.float32)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dt", NARROW, ids=IDS)
def test_cast_from_float32_as_ml_dtypes(device, dt):
    # toward zero, and 0 where that is out of range (NaN and infinity too)
    x = _edge_floats()
    got = _values(Tensor(x, device=device).cast(dt), dt)
    np.testing.assert_array_equal(got, _astype(x, _ml(dt)).astype(np.int64))


@pytest.mark.parametrize("src", [np.float16, np.float64], ids=["float16", "float64"])
@pytest.mark.parametrize("dt", NARROW, ids=IDS)
def test_cast_from_other_floats(dt, src):
    x = _astype(_edge_floats(), src)
    got = _values(Tensor(x).cast(dt), dt)
    np.testing.assert_array_equal(got, _astype(x, _ml(dt)).astype(np.int64))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("src", [np.int8, np.uint8, np.int32, np.int64, np.bool_], ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("dt", NARROW, ids=IDS)
def test_cast_from_ints_keeps_the_low_bits(device, dt, src):
    wide = np.concatenate([np.arange(-300, 300), [2**31 - 1, -(2**31), 2**40 + 5, -(2**40) - 3]])
    x = wide.astype(src) if src is not np.int8 else np.arange(-128, 128).astype(np.int8)
    got = _values(Tensor(x, device=device).cast(dt), dt)
    np.testing.assert_array_equal(got, x.astype(_ml(dt)).astype(np.int64))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dst", ["float32", "float16", "float64", "int8", "uint8", "int32", "int64", "bool"])
@pytest.mark.parametrize("dt", NARROW, ids=IDS)
def test_every_value_casts_to_every_dtype(device, dt, dst):
    a = _every_value(dt)
    got = Tensor(a, device=device).cast(dst).numpy()
    want = a.astype(np.dtype(dst))
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dt", NARROW, ids=IDS)
@pytest.mark.parametrize("other", [*NARROW, dtypes.fp8e4m3, dtypes.fp8e5m2, dtypes.bfloat16], ids=lambda d: d.name)
def test_casts_between_narrow_dtypes(dt, other):
    other_ml = getattr(ml, {"fp8e4m3": "float8_e4m3fn", "fp8e5m2": "float8_e5m2"}.get(other.name, other.name))
    a = _every_value(dt)
    got = Tensor(a).cast(other).cast(dtypes.float32).numpy()
    np.testing.assert_array_equal(got, a.astype(other_ml).astype(np.float32))
    # and back, from every value of the other narrow int or a grid of the float's values
    b = _every_value(other) if other in NARROW_INTS else np.arange(-20, 20, 0.25).astype(other_ml)
    got = _values(Tensor(b).cast(dt), dt)
    np.testing.assert_array_equal(got, _astype(b, _ml(dt)).astype(np.int64))


@pytest.mark.parametrize("dt", NARROW, ids=IDS)
def test_stored_bytes_are_ml_dtypes(dt):
    # a byte holds the low bits and zeros above them, as ml_dtypes keeps its arrays
    x = np.arange(-300, 300)
    t = Tensor(x).cast(dt)
    np.testing.assert_array_equal(t.bitcast(dtypes.uint8).numpy(), x.astype(_ml(dt)).view(np.uint8))
    # and every byte reads as its low bits
    got = _values(Tensor(np.arange(256).astype(np.uint8)).bitcast(dt), dt)
    want = (np.arange(256) & NARROW_INTS[dt].mask).astype(np.uint8).view(_ml(dt)).astype(np.int64)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dt", NARROW, ids=IDS)
def test_ml_dtypes_arrays_round_trip(dt):
    a = np.tile(_every_value(dt), 3).reshape(3, -1)
    t = Tensor(a)
    assert t.dtype is dt and t.shape == a.shape
    np.testing.assert_array_equal(t.numpy().astype(_ml(dt)).view(np.uint8), a.view(np.uint8))
    shared = Tensor.from_numpy(a)
    assert shared.dtype is dt
    np.testing.assert_array_equal(shared.numpy(), a.astype(np.int64))
    assert t.numpy().dtype == (np.int8 if NARROW_INTS[dt].signed else np.uint8)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dt", NARROW, ids=IDS)
def test_arithmetic_wraps_to_the_width(device, dt):
    v = _every_value(dt).astype(np.int64)
    x, y = (a.reshape(-1) for a in np.meshgrid(v, v))
    tx, ty = Tensor(x.astype(_ml(dt)), device=device), Tensor(y.astype(_ml(dt)), device=device)

    def wrapped(values: np.ndarray) -> np.ndarray:
        return values.astype(_ml(dt)).astype(np.int64)

    np.testing.assert_array_equal(_values(tx + ty, dt), wrapped(x + y))
    np.testing.assert_array_equal(_values(tx - ty, dt), wrapped(x - y))
    np.testing.assert_array_equal(_values(tx * ty, dt), wrapped(x * y))
    np.testing.assert_array_equal(_values(-tx, dt), wrapped(-x))
    np.testing.assert_array_equal(_values(tx.maximum(ty), dt), np.maximum(x, y))
    np.testing.assert_array_equal(_values((tx < ty).where(tx, ty), dt), np.where(x < y, x, y))
    np.testing.assert_array_equal((tx == ty).numpy(), x == y)
    np.testing.assert_array_equal(_values(tx ^ ty, dt), wrapped(x ^ y))


@pytest.mark.parametrize("dt", NARROW, ids=IDS)
def test_reductions(dt):
    a = np.tile(_every_value(dt), 5)
    t = Tensor(a)
    assert t.sum().item() == int(a.astype(np.int64).sum())  # summed wider, as small ints are
    assert t.max().item() == NARROW_INTS[dt].max and t.min().item() == NARROW_INTS[dt].min


@pytest.mark.parametrize("dt", NARROW, ids=IDS)
def test_constants_fold_as_kernels_compute(dt):
    # a constant cast is folded on the host; it must give what a kernel gives
    for v in (-9.5, -8.0, -2.5, -1.0, 0.7, 1.5, 3.9, 7.5, 8.0, 15.5, 16.0, float("nan"), float("inf")):
        want = int(_astype(np.array([v], np.float32), _ml(dt)).astype(np.int64)[0])
        assert Tensor.full((2,), v).cast(dt).tolist() == [want, want], v
        assert Tensor(np.full(2, v, np.float32)).cast(dt).tolist() == [want, want], v
    for v in (9, -9, 300, -129):
        assert truncate(v, dt) == int(np.array([v]).astype(_ml(dt)).astype(np.int64)[0])


def test_bounds_and_promotion():
    for dt in NARROW:
        info = ml.iinfo(_ml(dt))
        assert (dt.min, dt.max, dt.itemsize) == (int(info.min), int(info.max), 1)
    # ml_dtypes' promotions where it has one among these
    for a, b in [(dtypes.int4, dtypes.uint4), (dtypes.int4, dtypes.int8), (dtypes.uint4, dtypes.uint8)]:
        assert least_upper_dtype(a, b).name == np.result_type(_ml(a), getattr(ml, b.name, np.dtype(b.name))).name
    assert least_upper_dtype(dtypes.bool, dtypes.int4) is dtypes.int4
    assert least_upper_dtype(dtypes.uint2, dtypes.uint4) is dtypes.uint4  # a lattice: the narrower fits the wider
    assert least_upper_dtype(dtypes.int2, dtypes.uint8) is dtypes.int16
    assert (Tensor([1], dtype="int4") + Tensor([1], dtype="uint4")).dtype is dtypes.int8


def test_out_of_range_data_and_dlpack_are_clear_errors():
    with pytest.raises(RuntimeError, match="value 8 cannot be converted to int4"):
        Tensor([1, 8], dtype="int4")
    with pytest.raises(TypeError, match="DLPack cannot lend int4"):
        np.from_dlpack(Tensor([1, 2], dtype="int4"))


RENDERERS = [
    ("zeptograd.renderer.cstyle", "CRenderer"),
    ("zeptograd.renderer.cuda", "CUDARenderer"),
    ("zeptograd.renderer.hip", "HIPRenderer"),
    ("zeptograd.renderer.llvmir", "LLVMRenderer"),
    ("zeptograd.renderer.opencl", "OpenCLRenderer"),
    ("zeptograd.renderer.ptx", "PTXRenderer"),
    ("zeptograd.renderer.triton", "TritonRenderer"),
    ("zeptograd.renderer.wgsl", "WGSLRenderer"),
]


@pytest.mark.parametrize("module, name", RENDERERS, ids=[n for _, n in RENDERERS])
def test_every_renderer_renders_narrow_ints_or_names_them(module, name):
    import importlib

    from zeptograd.codegen import UnsupportedDType, get_program
    from zeptograd.engine.facts import device_facts
    from zeptograd.schedule.kernelize import create_schedule

    renderer = getattr(importlib.import_module(module), name)()
    a = Tensor(np.arange(-8, 8, dtype=np.int8)).cast("int4").realize()
    out = (a * a + a).cast(dtypes.float32) + Tensor(np.linspace(-9, 9, 16, dtype=np.float32)).cast("uint4")
    (item,), _ = create_schedule([out.uop], ["CPU"], device_facts)
    if dtypes.uint8 not in renderer.supported_dtypes():
        with pytest.raises(UnsupportedDType, match="does not support dtypes.int4"):
            get_program(item.ast, renderer)
        return
    program = get_program(item.ast, renderer)  # lowered before rendering: no renderer sees a narrow int
    assert program.src
