"""dtypes: interning, vectors, pointers, value ranges, constants, and promotion against PyTorch's."""

from __future__ import annotations

import itertools
import pickle

import numpy as np
import pytest

from zeptograd.dtype import AddrSpace, DType, PtrDType, dtypes, least_upper_dtype, result_type, to_dtype, truncate

NUMPY = {
    dtypes.bool: np.bool_,
    dtypes.int8: np.int8,
    dtypes.uint8: np.uint8,
    dtypes.int16: np.int16,
    dtypes.uint16: np.uint16,
    dtypes.int32: np.int32,
    dtypes.uint32: np.uint32,
    dtypes.int64: np.int64,
    dtypes.uint64: np.uint64,
    dtypes.float16: np.float16,
    dtypes.float32: np.float32,
    dtypes.float64: np.float64,
}


def test_interned_and_immutable():
    assert dtypes.float32.vec(4) is dtypes.float32.vec(4)
    assert dtypes.float32.ptr(12) is dtypes.float.ptr(12)
    assert dtypes.float32.ptr(12) is not dtypes.float32.ptr(12, AddrSpace.LOCAL)
    assert pickle.loads(pickle.dumps(dtypes.int8.vec(2))) is dtypes.int8.vec(2)
    assert pickle.loads(pickle.dumps(dtypes.half.ptr(3, AddrSpace.REG))) is dtypes.half.ptr(3, AddrSpace.REG)
    with pytest.raises(AttributeError):
        dtypes.float32.itemsize = 8  # type: ignore[misc]


def test_aliases():
    assert dtypes.float is dtypes.float32 and dtypes.half is dtypes.float16 and dtypes.double is dtypes.float64
    assert dtypes.int is dtypes.int32 and dtypes.long is dtypes.int64 and dtypes.uchar is dtypes.uint8
    assert dtypes.default_float is dtypes.float32 and dtypes.default_int is dtypes.int32


@pytest.mark.parametrize("dt", list(NUMPY))
def test_itemsize_and_bounds_match_numpy(dt: DType):
    np_dt = np.dtype(NUMPY[dt])
    assert dt.itemsize == np_dt.itemsize
    if dt is dtypes.bool:
        assert (dtypes.min(dt), dtypes.max(dt)) == (False, True)
    elif dtypes.is_int(dt):
        info = np.iinfo(np_dt)
        assert (dtypes.min(dt), dtypes.max(dt)) == (int(info.min), int(info.max))
    else:
        assert dtypes.min(dt) == -float("inf") and dtypes.max(dt) == float("inf")


def test_vectors():
    v = dtypes.float32.vec(4)
    assert v.count == 4 and v.itemsize == 16 and v.scalar() is dtypes.float32
    assert dtypes.float32.vec(1) is dtypes.float32
    assert repr(v) == "dtypes.float32.vec(4)"
    assert dtypes.index.vec(4).scalar() is dtypes.index
    with pytest.raises(ValueError, match="vector"):
        v.vec(2)
    with pytest.raises(ValueError, match="positive"):
        dtypes.float32.vec(0)
    with pytest.raises(ValueError, match="void"):
        dtypes.void.vec(2)


def test_pointers():
    p = dtypes.float32.ptr(12)
    assert isinstance(p, PtrDType) and p.base is dtypes.float32 and p.size == 12 and p.addrspace is AddrSpace.GLOBAL
    assert repr(p) == "dtypes.float32.ptr(12)"
    assert repr(dtypes.float32.ptr()) == "dtypes.float32.ptr()"
    r = dtypes.int32.ptr(8, AddrSpace.REG)
    assert repr(r) == "dtypes.int32.ptr(8, AddrSpace.REG)"
    assert p.vec(4).scalar() is p and p.vec(4).v == 4
    with pytest.raises(TypeError, match="pointer to the pointer"):
        p.ptr()
    with pytest.raises(ValueError, match="size"):
        dtypes.float32.ptr(-2)
    with pytest.raises(TypeError, match="AddrSpace"):
        dtypes.float32.ptr(4, "local")  # type: ignore[arg-type]


def test_to_dtype():
    assert (
        to_dtype("int") is dtypes.int32 and to_dtype("float16") is dtypes.half and to_dtype(dtypes.bool) is dtypes.bool
    )
    with pytest.raises(TypeError, match="unknown dtype name 'complex'"):
        to_dtype("complex")
    with pytest.raises(TypeError, match="DType or a dtype name"):
        to_dtype(3)  # type: ignore[arg-type]


@pytest.mark.parametrize("dt", [d for d in NUMPY if dtypes.is_int(d)])
def test_truncate_wraps_like_numpy(dt: DType):
    for v in (0, 1, -1, 127, 128, -129, 255, 256, 2**31, -(2**31) - 1, 2**63, 2**64 + 5, -(2**63) - 7):
        assert truncate(v, dt) == int(np.array(v & (2**64 - 1), dtype=np.uint64).astype(NUMPY[dt]))


@pytest.mark.parametrize("dt", [dtypes.float16, dtypes.float32])
def test_truncate_rounds_like_numpy(dt: DType):
    rng = np.random.default_rng(0)
    for v in np.concatenate([rng.standard_normal(200) * 10.0 ** rng.integers(-8, 8, 200), [1e40, -1e40, 65520.0]]):
        with np.errstate(over="ignore"):
            expected = float(np.array(v, dtype=np.float64).astype(NUMPY[dt]))
        assert truncate(float(v), dt) == expected


def test_truncate_bfloat16_against_torch():
    torch = pytest.importorskip("torch")
    values = [0.1, -3.14159, 1e30, 65504.0, 1.0 + 2**-8, 1.0 + 3 * 2**-9, 3e38, -1e-30]
    for v in values:
        assert truncate(v, dtypes.bfloat16) == torch.tensor(v, dtype=torch.float64).to(torch.bfloat16).item()


def test_truncate_errors():
    with pytest.raises(ValueError, match="inf"):
        truncate(float("inf"), dtypes.int32)
    with pytest.raises(TypeError, match="void"):
        truncate(1, dtypes.void)


def test_from_py():
    assert dtypes.from_py(True) is dtypes.bool and dtypes.from_py(3) is dtypes.int32
    assert dtypes.from_py(3.5) is dtypes.float32 and dtypes.from_py([1, 2.0]) is dtypes.float32
    assert dtypes.from_py([[True], [False]]) is dtypes.bool
    with pytest.raises(TypeError, match="str"):
        dtypes.from_py("x")


TORCH_PROMOTABLE = [d for d in NUMPY if d not in (dtypes.uint16, dtypes.uint32, dtypes.uint64)] + [dtypes.bfloat16]


def _torch_dtype(torch, dt: DType):
    return getattr(torch, {"bool": "bool", "bfloat16": "bfloat16"}.get(dt.name, dt.name))


def test_least_upper_dtype_matches_torch():
    torch = pytest.importorskip("torch")
    for a, b in itertools.product(TORCH_PROMOTABLE, repeat=2):
        expected = torch.promote_types(_torch_dtype(torch, a), _torch_dtype(torch, b))
        assert least_upper_dtype(a, b) is to_dtype(str(expected).removeprefix("torch.")), (a, b)


def test_least_upper_dtype_unsigned_lattice():
    # beyond what torch promotes: the lattice keeps unsigned + signed in the next wider signed type
    assert least_upper_dtype(dtypes.uint16, dtypes.int16) is dtypes.int32
    assert least_upper_dtype(dtypes.uint32, dtypes.int32) is dtypes.int64
    assert least_upper_dtype(dtypes.uint32, dtypes.uint8) is dtypes.uint32
    with pytest.raises(TypeError, match="promot"):
        least_upper_dtype(dtypes.index, dtypes.int32)
    with pytest.raises(ValueError):
        least_upper_dtype()


def test_result_type_weak_scalars_match_torch():
    torch = pytest.importorskip("torch")
    for dt in TORCH_PROMOTABLE:
        t = torch.zeros(1, dtype=_torch_dtype(torch, dt))
        for scalar in (True, 3, 2.5):
            expected = to_dtype(str(torch.result_type(t, scalar)).removeprefix("torch."))
            if expected is dtypes.int64 and dt is not dtypes.int64:
                expected = dtypes.default_int  # torch's default int is int64, ours (tinygrad's) is int32
            assert result_type(dt, scalar) is expected, (dt, scalar)


def test_result_type_scalars_only_and_errors():
    assert (
        result_type(1, 2) is dtypes.int32 and result_type(1, 2.0) is dtypes.float32 and result_type(True) is dtypes.bool
    )
    assert result_type(dtypes.float16, dtypes.int64, 1.0) is dtypes.float16
    with pytest.raises(TypeError, match="str"):
        result_type(dtypes.float32, "1")  # type: ignore[arg-type]
