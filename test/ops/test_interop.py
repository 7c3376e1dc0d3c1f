"""Interop with numpy and PyTorch: DLPack both ways (`__dlpack__`, `Tensor.from_dlpack`), `from_numpy`, `from_torch`
and `.torch()`. torch and numpy are the oracles for the values; memory sharing is checked by addresses and by writes
made on one side and read on the other; lifetime by dropping the owner and reusing memory of the same size."""

from __future__ import annotations

import gc
import sys
import weakref

import numpy as np
import pytest

from zeptograd import Device, Tensor, dtypes
from zeptograd.engine.realize import buffer_of_view
from zeptograd.runtime import dlpack

torch = pytest.importorskip("torch")

HOST = [d for d in ("CPU", "PYTHON", "LLVM") if Device.usable(d)]

# every zeptograd dtype with torch's twin
TORCH_DTYPES = {
    dtypes.bool: torch.bool,
    dtypes.int8: torch.int8,
    dtypes.uint8: torch.uint8,
    dtypes.int16: torch.int16,
    dtypes.uint16: torch.uint16,
    dtypes.int32: torch.int32,
    dtypes.uint32: torch.uint32,
    dtypes.int64: torch.int64,
    dtypes.uint64: torch.uint64,
    dtypes.float16: torch.float16,
    dtypes.bfloat16: torch.bfloat16,
    dtypes.float32: torch.float32,
    dtypes.float64: torch.float64,
    dtypes.fp8e4m3: torch.float8_e4m3fn,
    dtypes.fp8e5m2: torch.float8_e5m2,
}
NARROW = (dtypes.bfloat16, dtypes.fp8e4m3, dtypes.fp8e5m2)
# the unsigned ints of each width, to compare bit patterns (torch has no arithmetic on uint16/32/64 or fp8)
BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _values(dt, shape) -> np.ndarray:
    """Values every dtype holds exactly (small ints, and halves for the floats), of `shape`."""
    n = int(np.prod(shape))
    base = np.arange(n) % 7
    if dt is dtypes.bool:
        return (base % 2 == 1).reshape(shape)
    if dtypes.is_float(dt):
        return (base / 2 - 1).astype(np.float32).reshape(shape)
    return base.astype(np.int64).reshape(shape)


def _torch_of(values: np.ndarray, tdt) -> torch.Tensor:
    return torch.from_numpy(values.copy()).to(tdt)


@pytest.fixture(autouse=True)
def _host_default_device(monkeypatch):
    """The tests make their tensors on the default device: a host one, where memory is shared (with DEVICE=CUDA, the
    CPU; the GPU's own case is tested by name)."""
    if Device.DEFAULT not in HOST:
        monkeypatch.setattr(Device, "DEFAULT", "CPU")


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
    if a.dtype == torch.bool:
        return bool(torch.equal(a, b))
    bits = BITS[a.element_size()]
    return bool(torch.equal(a.contiguous().view(bits), b.contiguous().view(bits)))


def _address(t: Tensor) -> int:
    return buffer_of_view(t.uop).address


# *** round trips: every dtype, shapes with no, one and zero elements ***

SHAPES = [(), (1,), (5,), (2, 3), (2, 0, 3), (0,), (2, 3, 4)]


@pytest.mark.parametrize("dt", list(TORCH_DTYPES), ids=lambda d: d.name)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_zeptograd_to_torch_every_dtype(dt, shape):
    values = _values(dt, shape)
    t = Tensor(values, dtype=dt).realize()
    x = torch.from_dlpack(t)
    want = _torch_of(values, TORCH_DTYPES[dt])
    assert x.dtype == want.dtype and tuple(x.shape) == shape
    assert _same_bits(x, want)
    if t.numel():
        assert x.data_ptr() == _address(t)  # lent, not copied


@pytest.mark.parametrize("dt", list(TORCH_DTYPES), ids=lambda d: d.name)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_torch_to_zeptograd_every_dtype(dt, shape):
    values = _values(dt, shape)
    x = _torch_of(values, TORCH_DTYPES[dt])
    t = Tensor.from_dlpack(x)
    assert t.dtype is dt and t.shape == shape
    want = x.float().numpy() if dt in NARROW else x.numpy()
    np.testing.assert_array_equal(t.numpy(), want)
    if x.numel():
        assert _address(t) == x.data_ptr()  # borrowed, not copied


@pytest.mark.parametrize("dt", [d for d in TORCH_DTYPES if d not in NARROW], ids=lambda d: d.name)
def test_numpy_both_ways_every_numpy_dtype(dt):
    values = _values(dt, (3, 4)).astype(np.dtype(dt.fmt))
    t = Tensor(values, dtype=dt).realize()
    a = np.from_dlpack(t)
    assert a.dtype == values.dtype
    np.testing.assert_array_equal(a, values)
    assert a.ctypes.data == _address(t)
    back = Tensor.from_dlpack(values)
    assert back.dtype is dt and _address(back) == values.ctypes.data
    np.testing.assert_array_equal(back.numpy(), values)


@pytest.mark.parametrize("host", HOST)  # not "device": DEVICE= runs must keep these
def test_every_host_device_lends_and_borrows(host):
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    t = Tensor.from_dlpack(x, device=host)
    assert t.device == host and _address(t) == x.data_ptr()
    np.testing.assert_array_equal((t * 2).numpy(), x.numpy() * 2)  # the device's kernels read the shared memory
    y = torch.from_dlpack((t + 1).realize())
    np.testing.assert_array_equal(y.numpy(), x.numpy() + 1)


def test_bfloat16_and_fp8_keep_their_bits():
    """Every bit pattern of the narrow floats (NaNs, infinities, subnormals included) crosses unchanged."""
    every16 = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16)
    every8 = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    for tdt, patterns in ((torch.bfloat16, every16), (torch.float8_e4m3fn, every8), (torch.float8_e5m2, every8)):
        back = Tensor.from_torch(patterns.view(tdt).clone()).torch()
        assert back.dtype == tdt and torch.equal(back.view(patterns.dtype), patterns)


# *** sharing: writes on one side are read on the other ***


def test_torch_write_is_read_by_zeptograd():
    t = Tensor([[1.0, 2.0], [3.0, 4.0]]).realize()
    x = torch.from_dlpack(t)
    x.add_(1)
    assert t.tolist() == [[2.0, 3.0], [4.0, 5.0]]
    x[0, 1] = 10.0
    assert (t * 2).tolist() == [[4.0, 20.0], [8.0, 10.0]]


def test_zeptograd_assign_is_read_by_torch():
    t = Tensor([1, 2, 3], dtype="int64").realize()
    x = torch.from_dlpack(t)
    t.assign(t * 10).realize()
    assert x.tolist() == [10, 20, 30]
    t[1:].assign(Tensor([7, 8], dtype="int64")).realize()  # a write through a view lands in the same buffer
    assert x.tolist() == [10, 7, 8] and x.data_ptr() == _address(t)


def test_borrowed_memory_sees_both_sides():
    x = torch.zeros(2, 3)
    t = Tensor.from_torch(x)
    x.add_(1)
    assert t.tolist() == [[1.0] * 3] * 2  # torch's in-place op, read by zeptograd's next kernel
    t.assign(t + Tensor.arange(3).float()).realize()
    assert x.tolist() == [[1.0, 2.0, 3.0]] * 2  # zeptograd's store, read by torch
    rows = torch.arange(12.0).reshape(4, 3)[1:3]  # contiguous, at an offset into its storage
    r = Tensor.from_torch(rows)
    assert _address(r) == rows.data_ptr() and r.tolist() == rows.tolist()
    rows.zero_()
    assert r.tolist() == [[0.0] * 3] * 2
    a = np.zeros(4, dtype=np.int32)
    u = Tensor.from_numpy(a)
    a[2] = 5
    assert (u + 1).tolist() == [1, 1, 6, 1]
    u.assign(Tensor([9, 9, 9, 9])).realize()
    assert a.tolist() == [9, 9, 9, 9]


def test_torch_method_shares_memory_and_keeps_dtype():
    t = Tensor([[1.0, 2.0], [3.0, 4.0]], dtype="bfloat16")
    x = t.torch()  # a lazy tensor is realized first
    assert x.dtype == torch.bfloat16 and x.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    x.mul_(2)
    assert t.tolist() == [[2.0, 4.0], [6.0, 8.0]]


def test_round_trip_through_zeptograd_tensor_shares_memory():
    t = Tensor([1.0, 2.0]).realize()
    u = Tensor.from_dlpack(t)
    t.assign(Tensor([5.0, 6.0])).realize()
    assert u.tolist() == [5.0, 6.0]


# *** views and lazy tensors ***


def test_lazy_tensor_is_realized_when_lent():
    a = Tensor([1.0, 2.0, 3.0])
    x = torch.from_dlpack(a * 2 + 1)
    assert x.tolist() == [3.0, 5.0, 7.0]


@pytest.mark.parametrize(
    "view",
    [
        lambda t: t.T,
        lambda t: t[:, 1:],
        lambda t: t[1:2],
        lambda t: t[:, ::2],
        lambda t: t.reshape(4, 3)[1:],
        lambda t: t[0:1].expand(3, 4),
        lambda t: t.T.reshape(2, 2, 3),
    ],
    ids=["T", "shrink", "row", "step", "reshape-shrink", "expand", "permute-reshape"],
)
def test_strided_views_are_lent_with_strides(view):
    t = Tensor.arange(12, dtype="float32").reshape(3, 4).contiguous().realize()
    ref = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    x = torch.from_dlpack(view(t))
    want = view(_Torchish(ref)).t
    assert torch.equal(x, want) and x.stride() == want.stride()
    base = _address(t)
    assert base <= x.data_ptr() < base + 48  # inside t's memory: no copy
    t.assign(t + 100).realize()
    assert torch.equal(x, view(_Torchish(ref + 100)).t)


class _Torchish:
    """A torch tensor spelt as zeptograd's views spell their ops (`.T`, `reshape`, `expand`, slicing)."""

    def __init__(self, t: torch.Tensor) -> None:
        self.t = t

    @property
    def T(self) -> _Torchish:
        return _Torchish(self.t.T)

    def reshape(self, *shape: int) -> _Torchish:
        return _Torchish(self.t.reshape(*shape))

    def expand(self, *shape: int) -> _Torchish:
        return _Torchish(self.t.expand(*shape))

    def __getitem__(self, idx) -> _Torchish:
        return _Torchish(self.t[idx])


def test_view_that_was_read_still_lends_its_base():
    t = Tensor.arange(6, dtype="int32").reshape(2, 3).contiguous().realize()
    v = t.T
    assert v.tolist() == [[0, 3], [1, 4], [2, 5]]  # reading a view computes it into a buffer of its own
    x = torch.from_dlpack(v)
    t.assign(t * 2).realize()
    assert x.tolist() == [[0, 6], [2, 8], [4, 10]]


def test_view_of_lazy_base_realizes_the_base():
    a = Tensor([[1, 2], [3, 4]]) + 1
    x = torch.from_dlpack(a.T)
    assert x.tolist() == [[2, 4], [3, 5]]
    a.assign(a * 10).realize()
    assert x.tolist() == [[20, 40], [30, 50]]  # a's buffer itself was lent


@pytest.mark.parametrize("view", [lambda t: t.flip(0), lambda t: t.pad(((1, 0), (0, 1)))], ids=["flip", "pad"])
def test_flip_and_pad_views_are_lent_as_copies(view):
    t = Tensor.arange(6, dtype="float32").reshape(2, 3).contiguous().realize()
    ref = np.arange(6, dtype=np.float32).reshape(2, 3)
    want = np.flip(ref, 0) if view(t).shape == (2, 3) else np.pad(ref, ((1, 0), (0, 1)))
    x = torch.from_dlpack(view(t))
    np.testing.assert_array_equal(x.numpy(), want)
    t.assign(t + 1).realize()
    np.testing.assert_array_equal(x.numpy(), want)  # a copy: the later write is not in it
    with pytest.raises(BufferError, match="copy=False"):
        view(t).__dlpack__(max_version=(1, 1), copy=False)
    lent = dlpack.Lent(view(t).__dlpack__(max_version=(1, 1)))
    assert lent.flags & dlpack.FLAG_IS_COPIED  # the consumer is told the memory is its own


def test_copy_true_lends_a_copy():
    t = Tensor([1.0, 2.0]).realize()
    x = torch.from_dlpack(t, copy=True)
    assert x.data_ptr() != _address(t) and x.tolist() == [1.0, 2.0]
    t.assign(Tensor([3.0, 4.0])).realize()
    assert x.tolist() == [1.0, 2.0]


# *** sources that are copied ***


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.arange(12.0).reshape(3, 4).T,
        lambda: torch.arange(24.0).reshape(2, 3, 4).permute(2, 0, 1),
        lambda: torch.arange(20.0)[::3],
        lambda: torch.arange(12.0).reshape(3, 4)[:, 1:3],
        lambda: torch.arange(4.0).reshape(4, 1).expand(4, 5),
    ],
    ids=["T", "permute", "step", "columns", "expand"],
)
def test_non_contiguous_torch_source_is_copied_with_its_meaning(make):
    x = make()
    t = Tensor.from_torch(x)
    np.testing.assert_array_equal(t.numpy(), x.numpy())
    before = x.numpy().copy()
    if 0 not in x.stride():  # torch writes to the original (an expanded view cannot be written to)
        x.add_(1)
        np.testing.assert_array_equal(t.numpy(), before)  # a copy: the write is not in it
    with pytest.raises(BufferError, match="cannot be shared"):
        Tensor.from_torch(make(), copy=False)


def test_negative_strides_from_numpy_are_copied():
    a = np.arange(10, dtype=np.int16)[::-2]
    t = Tensor.from_dlpack(a)
    assert t.tolist() == a.tolist()
    u = Tensor.from_numpy(a)
    assert u.tolist() == a.tolist()


def test_read_only_numpy_array_is_copied():
    a = np.arange(4, dtype=np.float32)
    a.flags.writeable = False
    t = Tensor.from_numpy(a)
    assert t.tolist() == [0.0, 1.0, 2.0, 3.0] and _address(t) != a.ctypes.data
    t.assign(Tensor([9.0, 9.0, 9.0, 9.0])).realize()
    assert a.tolist() == [0.0, 1.0, 2.0, 3.0]
    b = Tensor.from_dlpack(a)  # numpy lends it with DLPack's read-only flag
    assert b.tolist() == [0.0, 1.0, 2.0, 3.0] and _address(b) != a.ctypes.data


def test_from_numpy_shares_and_converts():
    a = np.arange(6, dtype=np.float64).reshape(2, 3)
    t = Tensor.from_numpy(a)
    assert t.dtype is dtypes.float64 and t.shape == (2, 3) and _address(t) == a.ctypes.data
    big = np.arange(3, dtype=">i4")  # the other byte order: copied, values kept
    assert Tensor.from_numpy(big).tolist() == [0, 1, 2]
    raw = np.zeros(17, dtype=np.uint8)
    unaligned = raw[1:].view(np.float32)  # writable, but its address is odd: the C kernels read aligned floats
    unaligned[:] = [1.0, 2.0, 3.0, 4.0]
    assert not unaligned.flags.aligned
    u = Tensor.from_numpy(unaligned)
    assert u.tolist() == [1.0, 2.0, 3.0, 4.0] and _address(u) != unaligned.ctypes.data
    with pytest.raises(BufferError, match="not a multiple of its 4-byte elements"):
        Tensor.from_numpy(unaligned, copy=False)
    ml_dtypes = pytest.importorskip("ml_dtypes")
    h = np.array([1.5, -2.0, 3.25], dtype=ml_dtypes.bfloat16)
    u = Tensor.from_numpy(h)
    assert u.dtype is dtypes.bfloat16 and u.tolist() == [1.5, -2.0, 3.25] and _address(u) == h.ctypes.data
    e = np.array([0.5, 448.0], dtype=ml_dtypes.float8_e4m3fn)
    assert Tensor.from_numpy(e).dtype is dtypes.fp8e4m3 and Tensor.from_numpy(e).tolist() == [0.5, 448.0]
    assert Tensor.from_numpy(np.array([True, False])).tolist() == [True, False]


def test_from_torch_detaches_and_resolves():
    w = torch.ones(3, requires_grad=True)
    t = Tensor.from_torch(w)
    assert t.tolist() == [1.0, 1.0, 1.0] and _address(t) == w.data_ptr()
    n = torch.arange(3.0).neg()  # a plain tensor: torch's lazy negation bit
    assert Tensor.from_torch(torch.arange(3.0)._neg_view()).tolist() == n.tolist()


# *** lifetime ***


@pytest.mark.no_roundtrip  # its recording keeps every node, so every buffer, alive
def test_lent_memory_outlives_the_tensor():
    n = 4096
    t = Tensor.arange(n, dtype="float32").contiguous().realize()
    x = torch.from_dlpack(t)
    address = _address(t)
    del t
    gc.collect()
    others = [Tensor.full((n,), float(i), dtype="float32").contiguous().realize() for i in range(20)]
    assert all(_address(o) != address for o in others)  # the pool does not hand the lent memory out
    assert torch.equal(x, torch.arange(n, dtype=torch.float32))
    before = dlpack.lent_count()
    del x
    gc.collect()  # the consumer lets go
    assert dlpack.lent_count() == before - 1


@pytest.mark.no_roundtrip  # its recording keeps every node, so every buffer, alive
def test_lent_memory_returns_to_the_pool_after_the_consumer():
    n = 1000  # a byte size no other test allocates, so the pool's list for it is this test's own
    from zeptograd.runtime.buffer import pool

    t = Tensor.arange(n, dtype="float64").contiguous().realize()
    address, device = _address(t), t.device
    buffer = weakref.ref(buffer_of_view(t.uop))
    x = torch.from_dlpack(t)
    del t
    gc.collect()
    assert buffer() is not None and address not in [a for _, a in pool.free.get((device, 8 * n), [])]
    del x
    gc.collect()
    assert buffer() is None and address in [a for _, a in pool.free.get((device, 8 * n), [])]


@pytest.mark.no_roundtrip  # its recording keeps every node, so every buffer, alive
def test_borrowed_memory_outlives_the_lender():
    x = torch.arange(2048, dtype=torch.int32)
    t = Tensor.from_torch(x)
    del x
    gc.collect()
    others = [torch.full((2048,), i, dtype=torch.int32) for i in range(20)]  # reuse of freed memory would show
    assert t.tolist() == list(range(2048)) and len(others) == 20
    a = np.arange(100, dtype=np.int64)
    u = Tensor.from_dlpack(a)
    del a
    gc.collect()
    junk = [np.full(100, -1, dtype=np.int64) for _ in range(20)]
    assert u.tolist() == list(range(100)) and len(junk) == 20


@pytest.mark.no_roundtrip  # its recording keeps every node, so every buffer, alive
def test_unconsumed_capsule_releases_on_collection():
    t = Tensor([1.0]).realize()
    before = dlpack.lent_count()
    capsule = t.__dlpack__(max_version=(1, 1))
    assert dlpack.lent_count() == before + 1 and "dltensor_versioned" in repr(capsule)
    del capsule
    gc.collect()
    assert dlpack.lent_count() == before

    def dropped_while_raising() -> None:
        capsule = t.__dlpack__(max_version=(1, 1))  # noqa: F841 (collected as the exception unwinds this frame)
        raise KeyError("the program's own error")

    with pytest.raises(KeyError, match="the program's own error"):  # the capsule's destructor keeps it intact
        dropped_while_raising()
    gc.collect()
    assert dlpack.lent_count() == before


@pytest.mark.no_roundtrip  # its recording keeps every node, so every buffer, alive
def test_legacy_and_versioned_capsules():
    t = Tensor([[1, 2, 3]]).realize()
    legacy = t.__dlpack__()
    assert '"dltensor"' in repr(legacy)
    x = torch.from_dlpack(legacy)  # torch takes a bare legacy capsule
    assert x.tolist() == [[1, 2, 3]] and '"used_dltensor"' in repr(legacy)
    versioned = t.__dlpack__(max_version=(1, 0))
    u = Tensor.from_dlpack(versioned)
    assert u.tolist() == [[1, 2, 3]] and '"used_dltensor_versioned"' in repr(versioned)
    with pytest.raises(BufferError, match="consumed only once"):
        Tensor.from_dlpack(versioned)
    before = dlpack.lent_count()
    del x, u
    gc.collect()
    assert dlpack.lent_count() == before - 2  # both consumers called the deleter


def test_dlpack_device():
    assert Tensor([1]).__dlpack_device__() == (1, 0)
    assert Tensor([1], device="PYTHON").__dlpack_device__() == (1, 0)


# *** errors ***


def test_unsupported_dtypes_name_the_dlpack_type():
    with pytest.raises(TypeError, match=r"from_torch: DLPack dtype complex64"):
        Tensor.from_torch(torch.zeros(2, dtype=torch.complex64))
    with pytest.raises(TypeError, match=r"float8_e4m3fnuz"):
        Tensor.from_dlpack(torch.zeros(2, dtype=torch.float8_e4m3fnuz))
    with pytest.raises(TypeError, match="from_numpy: numpy dtype complex128 has no zeptograd dtype"):
        Tensor.from_numpy(np.zeros(2, dtype=np.complex128))
    with pytest.raises(TypeError, match="from_numpy: expected a numpy ndarray"):
        Tensor.from_numpy([1, 2])


def test_non_producers_and_bad_requests():
    with pytest.raises(TypeError, match="not a DLPack producer"):
        Tensor.from_dlpack([1, 2, 3])
    with pytest.raises(TypeError, match="from_torch: expected a torch.Tensor"):
        Tensor.from_torch(np.zeros(2))
    with pytest.raises(TypeError, match="from_torch: a torch.sparse_coo tensor"):
        Tensor.from_torch(torch.eye(2).to_sparse())
    t = Tensor([1.0]).realize()
    with pytest.raises(BufferError, match="cannot be lent on CUDA:0"):
        t.__dlpack__(dl_device=(2, 0))


class _GpuProducer:
    """A DLPack producer whose memory is on a CUDA device and which cannot copy it to the host."""

    def __dlpack_device__(self) -> tuple[int, int]:
        return (2, 0)

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        raise BufferError("no host copy")


def test_memory_on_a_gpu_is_a_clear_error():
    with pytest.raises(BufferError, match=r"on CUDA:0 and its producer would not copy it to the host"):
        Tensor.from_dlpack(_GpuProducer())
    with pytest.raises(BufferError, match="copy=False"):
        Tensor.from_dlpack(_GpuProducer(), copy=False)


@pytest.mark.skipif(not Device.usable("CUDA"), reason="needs the CUDA device (an NVIDIA GPU)")
def test_gpu_tensor_is_lent_only_as_a_host_copy():
    t = Tensor([1.0, 2.0], device="CUDA").realize()
    assert t.__dlpack_device__() == (2, 0)
    with pytest.raises(BufferError, match="whose memory is its own"):
        t.__dlpack__(max_version=(1, 1))
    assert np.from_dlpack(t, device="cpu").tolist() == [1.0, 2.0]
    assert t.torch().tolist() == [1.0, 2.0]
    assert Tensor.from_torch(torch.tensor([3.0, 4.0]), device="CUDA").tolist() == [3.0, 4.0]


def test_missing_torch_is_a_clear_import_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    with pytest.raises(ImportError, match="from_torch needs PyTorch"):
        Tensor.from_torch(object())
    with pytest.raises(ImportError, match="torch needs PyTorch"):
        Tensor([1.0]).torch()


def test_lending_inside_a_jit_capture_is_an_error():
    from zeptograd import TinyJit
    from zeptograd.helpers import JitError

    @TinyJit
    def step(x: Tensor) -> Tensor:
        y = (x + 1).realize()
        np.from_dlpack(y)  # Python work on the values: a replay would not redo it
        return y

    step(Tensor([1.0]))  # the first call runs as it is
    with pytest.raises(JitError, match="DLPack"):
        step(Tensor([2.0]))  # the second is captured
