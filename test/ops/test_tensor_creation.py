"""Tensor creation: linspace, eye, *_like, tril/triu, meshgrid, and the random numbers (Threefry-2x32).

Oracles: numpy, and torch where numpy has no equivalent (linspace's rounding); the random generator against
the known-answer vectors of Random123 (the Threefry paper's reference code, also JAX's tests)."""

from __future__ import annotations

import numpy as np
import pytest

from zeptograd import Tensor, dtypes

DEVICES = ["CPU", "PYTHON"]
# a random tensor's graph (20 Threefry rounds) is large: its pyrender round trip, and that of every node the
# compiler makes from it, takes seconds per test, so one test checks it on the graph as built and the rest skip it
RANDOM = pytest.mark.no_roundtrip


@pytest.fixture(autouse=True)
def _restore_rng():
    """The random generator's state is class-level: put it back so tests don't leak seeds into each other."""
    from zeptograd.mixin.creation import CreationMixin

    saved = CreationMixin._seed, CreationMixin._rng_counter
    yield
    CreationMixin._seed, CreationMixin._rng_counter = saved


# *** linspace ***


@pytest.mark.parametrize(
    "start,stop,steps", [(0, 1, 5), (-3.5, 2.25, 7), (5, -5, 6), (1, 1, 4), (0, 10, 2), (2, 3, 1), (2, 3, 0)]
)
def test_linspace_matches_torch(start, stop, steps):
    torch = pytest.importorskip("torch")
    want = torch.linspace(start, stop, steps, dtype=torch.float32).numpy()
    got = Tensor.linspace(start, stop, steps)
    assert got.dtype is dtypes.float32 and got.shape == (steps,)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6, atol=1e-6)


def test_linspace_ends_are_exact():
    got = Tensor.linspace(0.1, 0.7, 13).numpy()
    assert got[0] == np.float32(0.1) and got[-1] == np.float32(0.7)


@pytest.mark.parametrize("dtype", ["int32", "float16", "int64"])
def test_linspace_dtypes(dtype):
    torch = pytest.importorskip("torch")
    want = torch.linspace(-7, 10, 9, dtype=getattr(torch, dtype)).numpy()
    got = Tensor.linspace(-7, 10, 9, dtype=dtype)
    assert got.dtype is dtypes.fields()[dtype]
    np.testing.assert_allclose(got.numpy().astype(np.float64), want.astype(np.float64), rtol=1e-3)


def test_linspace_pytorch_end_keyword_and_python_device():
    got = Tensor.linspace(0, end=3, steps=4, device="PYTHON")
    assert got.device == "PYTHON" and got.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_linspace_errors():
    with pytest.raises(ValueError, match="linspace.*non-negative.*-1"):
        Tensor.linspace(0, 1, -1)
    with pytest.raises(TypeError, match="linspace.*steps"):
        Tensor.linspace(0, 1, 2.5)


# *** eye, tril, triu ***


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("n,m", [(3, None), (2, 4), (4, 2), (0, 3), (1, 1), (0, None)])
def test_eye(n, m, device):
    got = Tensor.eye(n, m, device=device)
    assert got.dtype is dtypes.float32 and got.device == device
    np.testing.assert_array_equal(got.numpy(), np.eye(n, m, dtype=np.float32))


@pytest.mark.parametrize("dtype,np_dtype", [("int32", np.int32), ("bool", np.bool_), ("float16", np.float16)])
def test_eye_dtypes(dtype, np_dtype):
    got = Tensor.eye(3, 2, dtype=dtype)
    assert got.numpy().dtype == np_dtype
    np.testing.assert_array_equal(got.numpy(), np.eye(3, 2, dtype=np_dtype))


def test_eye_negative_size():
    with pytest.raises(ValueError, match=r"eye: negative size in shape \(-1, 2\)"):
        Tensor.eye(-1, 2)


@pytest.mark.parametrize("diagonal", [-2, -1, 0, 1, 3])
@pytest.mark.parametrize("shape", [(3, 3), (2, 4), (4, 2), (2, 3, 4)])
def test_tril_triu(shape, diagonal):
    a = np.arange(1, np.prod(shape) + 1, dtype=np.float32).reshape(shape)
    np.testing.assert_array_equal(Tensor(a).tril(diagonal).numpy(), np.tril(a, diagonal))
    np.testing.assert_array_equal(Tensor(a).triu(diagonal).numpy(), np.triu(a, diagonal))


@pytest.mark.parametrize("device", DEVICES)
def test_tril_triu_noncontiguous_dtypes_and_devices(device):
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    t = Tensor(a, device=device)
    np.testing.assert_array_equal(t.T.tril().numpy(), np.tril(a.T))  # a transposed input
    np.testing.assert_array_equal(t.flip(1).triu(-1).numpy(), np.triu(a[:, ::-1], -1))
    b = a % 3 == 0
    got = Tensor(b, device=device).triu(1)
    assert got.dtype is dtypes.bool and got.device == device
    np.testing.assert_array_equal(got.numpy(), np.triu(b, 1))
    h = Tensor(a.astype(np.float16), device=device).tril()
    assert h.dtype is dtypes.float16
    np.testing.assert_array_equal(h.numpy(), np.tril(a.astype(np.float16)))


@pytest.mark.parametrize("shape", [(0, 3), (3, 0), (2, 0, 0), (1, 1), (0, 2, 2)])
def test_tril_triu_size_zero_and_one(shape):
    a = np.ones(shape, np.float32)
    np.testing.assert_array_equal(Tensor(a).tril().numpy(), np.tril(a))
    np.testing.assert_array_equal(Tensor(a).triu(1).numpy(), np.triu(a, 1))


def test_tril_errors():
    with pytest.raises(ValueError, match=r"tril: .*at least 2 dimensions.*\(3,\)"):
        Tensor([1, 2, 3]).tril()
    with pytest.raises(ValueError, match=r"triu: .*\(\)"):
        Tensor(1.0).triu()


# *** meshgrid ***


@pytest.mark.parametrize("indexing", ["ij", "xy"])
@pytest.mark.parametrize("sizes", [(2, 3), (3,), (2, 1, 4), (0, 3), (1, 1)])
def test_meshgrid(sizes, indexing):
    arrays = [np.arange(s, dtype=np.float32) + 10 * k for k, s in enumerate(sizes)]
    want = np.meshgrid(*arrays, indexing=indexing)
    got = Tensor.meshgrid(*[Tensor(a) for a in arrays], indexing=indexing)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_array_equal(g.numpy(), w)


def test_meshgrid_method_list_form_dtypes_and_python_device():
    a, b = Tensor([1, 2], device="PYTHON"), Tensor([True, False, True], device="PYTHON")
    x, y = a.meshgrid(b)
    assert x.dtype is dtypes.int32 and y.dtype is dtypes.bool and x.device == "PYTHON"
    np.testing.assert_array_equal(y.numpy(), np.meshgrid([1, 2], [True, False, True], indexing="ij")[1])
    x2, y2 = Tensor.meshgrid([Tensor([1.0, 2.0]), Tensor([3.0])], indexing="xy")
    assert x2.shape == (1, 2) and y2.tolist() == [[3.0, 3.0]]
    (only,) = Tensor.meshgrid(Tensor(5))  # a 0-d tensor counts as one element, as in PyTorch
    assert only.tolist() == [5]


def test_meshgrid_errors():
    with pytest.raises(ValueError, match=r"meshgrid: .*0-d or 1-d.*\(2, 2\)"):
        Tensor.meshgrid(Tensor([1, 2]), Tensor.ones(2, 2))
    with pytest.raises(ValueError, match="meshgrid: indexing.*'ji'"):
        Tensor.meshgrid(Tensor([1, 2]), indexing="ji")


# *** *_like ***


@pytest.mark.parametrize("device", DEVICES)
def test_like_ops_keep_shape_dtype_device(device):
    x = Tensor(np.arange(6, dtype=np.int32).reshape(2, 3), device=device).T  # non-contiguous source
    for t, value in [(x.zeros_like(), 0), (x.ones_like(), 1), (x.full_like(7), 7)]:
        assert t.shape == (3, 2) and t.dtype is dtypes.int32 and t.device == device
        np.testing.assert_array_equal(t.numpy(), np.full((3, 2), value, np.int32))
    e = x.empty_like()
    assert (e.shape, e.dtype, e.device) == ((3, 2), dtypes.int32, device)


@RANDOM
def test_like_ops_overrides():
    x = Tensor.zeros(2, 0)
    t = x.ones_like(dtype="float16", device="PYTHON")
    assert (t.shape, t.dtype, t.device) == ((2, 0), dtypes.float16, "PYTHON")
    f = Tensor([1, 2]).full_like(2.5, dtype=dtypes.float32)
    assert f.tolist() == [2.5, 2.5]
    assert Tensor([True]).zeros_like().tolist() == [False]
    assert Tensor.zeros(3).empty_like(dtype="int8").dtype is dtypes.int8
    r = Tensor([[1, 2]]).rand_like(dtype="float32")
    assert r.shape == (1, 2) and r.dtype is dtypes.float32
    n = Tensor.zeros(3, dtype="float16").randn_like()
    assert n.dtype is dtypes.float16 and n.shape == (3,)


@RANDOM
def test_rand_like_of_an_int_tensor_needs_a_float_dtype():
    with pytest.raises(TypeError, match=r"rand_like: .*int32"):
        Tensor([1, 2]).rand_like()


# *** Threefry-2x32 ***

# Random123's known answers for threefry2x32 with 20 rounds: (counter words, key words) -> output words
KAT = [
    ((0x00000000, 0x00000000), (0x00000000, 0x00000000), (0x6B200159, 0x99BA4EFE)),
    ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
    ((0x243F6A88, 0x85A308D3), (0x13198A2E, 0x03707344), (0xC4923A9C, 0x483DF7A0)),
]


@RANDOM
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("counter,key,want", KAT)
def test_threefry_known_answers(counter, key, want, device):
    x0 = Tensor([counter[0]], dtype=dtypes.uint32, device=device)
    x1 = Tensor([counter[1]], dtype=dtypes.uint32, device=device)
    y0, y1 = Tensor._threefry2x32(x0, x1, key)
    assert y0.dtype is dtypes.uint32
    assert (int(y0.item()), int(y1.item())) == want


def test_random_graphs_round_trip():
    Tensor.manual_seed(9)
    for t in (Tensor.rand(2), Tensor.randn(2), Tensor.randint(2), Tensor.rand(2, dtype="float16")):
        assert t.shape == (2,)


def _draws(device: str) -> list[np.ndarray]:
    Tensor.manual_seed(1234)
    return [
        Tensor.rand(3, 5, device=device).numpy(),
        Tensor.randint(7, low=-3, high=4, device=device).numpy(),
        Tensor.uniform(2, 3, low=-1.0, high=3.0, device=device).numpy(),
        Tensor.rand(4, dtype="float16", device=device).numpy(),
        Tensor.randn(2, 5, device=device).numpy(),
        Tensor.normal(6, mean=2.0, std=0.5, device=device).numpy(),
    ]


@RANDOM
def test_same_seed_same_numbers_on_cpu_and_python():
    cpu, python = _draws("CPU"), _draws("PYTHON")
    for c, p in zip(cpu[:4], python[:4]):  # integer bit manipulations and exact float scaling: bit for bit
        assert c.dtype == p.dtype
        np.testing.assert_array_equal(c, p)
    for c, p in zip(cpu[4:], python[4:]):  # log, sqrt and sin come from two math libraries: a few ulp apart
        np.testing.assert_allclose(c, p, rtol=1e-6, atol=1e-6)


@RANDOM
def test_seed_reproduces_and_each_call_draws_fresh_numbers():
    Tensor.manual_seed(7)
    a, b = Tensor.rand(8).numpy(), Tensor.rand(8).numpy()
    assert not np.array_equal(a, b)
    Tensor.manual_seed(7)
    np.testing.assert_array_equal(Tensor.rand(8).numpy(), a)
    np.testing.assert_array_equal(Tensor.rand(8).numpy(), b)
    Tensor.manual_seed(8)
    assert not np.array_equal(Tensor.rand(8).numpy(), a)
    Tensor.manual_seed(7)
    lazy = Tensor.rand(8)  # the numbers are fixed when the op is built, not when it runs
    np.testing.assert_array_equal(Tensor.rand(8).numpy(), b)
    np.testing.assert_array_equal(lazy.numpy(), a)


@RANDOM
def test_manual_seed_takes_large_and_negative_seeds():
    Tensor.manual_seed(2**40 + 3)
    a = Tensor.rand(4).numpy()
    Tensor.manual_seed(3)
    assert not np.array_equal(Tensor.rand(4).numpy(), a)
    Tensor.manual_seed(-1)
    assert Tensor.rand(2).shape == (2,)
    with pytest.raises(TypeError, match="manual_seed"):
        Tensor.manual_seed(1.5)


# *** distributions ***


@pytest.mark.no_roundtrip
def test_rand_statistics():
    Tensor.manual_seed(0)
    x = Tensor.rand(100_000).numpy()
    assert x.dtype == np.float32 and x.min() >= 0 and x.max() < 1
    assert abs(x.mean() - 0.5) < 0.01 and abs(x.std() - (1 / 12) ** 0.5) < 0.01
    hist, _ = np.histogram(x, bins=10, range=(0, 1))
    assert np.all(np.abs(hist - 10_000) < 500)
    assert len(np.unique(x)) > 99_000  # 23 random bits: few collisions


@pytest.mark.no_roundtrip
def test_randn_statistics():
    Tensor.manual_seed(0)
    x = Tensor.randn(100_000).numpy()
    assert x.dtype == np.float32 and np.isfinite(x).all()
    assert abs(x.mean()) < 0.02 and abs(x.std() - 1) < 0.02
    assert abs(np.mean(np.abs(x) < 1) - 0.6827) < 0.01  # the share within one standard deviation
    assert abs(np.mean(x**3)) < 0.05 and abs(np.mean(x**4) - 3) < 0.1  # skew 0, kurtosis 3


@pytest.mark.no_roundtrip
def test_normal_and_uniform_statistics():
    Tensor.manual_seed(1)
    n = Tensor.normal(100_000, mean=-3.0, std=2.0).numpy()
    assert abs(n.mean() + 3) < 0.04 and abs(n.std() - 2) < 0.04
    u = Tensor.uniform(100_000, low=-2.0, high=6.0).numpy()
    assert u.min() >= -2 and u.max() < 6
    assert abs(u.mean() - 2) < 0.05 and abs(u.std() - 8 / 12**0.5) < 0.05


@pytest.mark.no_roundtrip
def test_randint_covers_its_range():
    Tensor.manual_seed(2)
    x = Tensor.randint(100_000, low=-5, high=6)
    assert x.dtype is dtypes.int32
    counts = np.bincount(x.numpy() + 5, minlength=11)
    assert len(counts) == 11 and np.all(np.abs(counts - 100_000 / 11) < 400)
    wide = Tensor.randint(1000, low=-(2**31), high=2**31 - 1).numpy()
    assert wide.min() < -(2**30) and wide.max() > 2**30  # the whole int32 range


@RANDOM
@pytest.mark.parametrize("dtype", ["int8", "uint8", "int64"])
def test_randint_dtypes(dtype):
    Tensor.manual_seed(3)
    x = Tensor.randint(2, 3, low=1, high=4, dtype=dtype)
    assert x.dtype is dtypes.fields()[dtype] and x.shape == (2, 3)
    assert set(x.numpy().ravel().tolist()) <= {1, 2, 3}


@RANDOM
@pytest.mark.parametrize("dtype,np_dtype", [("float16", np.float16), ("float64", np.float64)])
def test_rand_float_dtypes_stay_below_one(dtype, np_dtype):
    Tensor.manual_seed(4)
    x = Tensor.rand(20_000, dtype=dtype).numpy()
    assert x.dtype == np_dtype and x.min() >= 0 and x.max() < 1 and abs(x.mean() - 0.5) < 0.02
    n = Tensor.randn(64, dtype=dtype).numpy()
    assert n.dtype == np_dtype and np.isfinite(n).all()


@RANDOM
@pytest.mark.parametrize("shape", [(0,), (2, 0, 3), (1,), ()])
def test_random_size_zero_and_one(shape):
    for t in (Tensor.rand(shape), Tensor.randn(shape), Tensor.randint(shape), Tensor.uniform(shape)):
        assert t.shape == shape and t.numpy().shape == shape


@RANDOM
@pytest.mark.parametrize("shape", [(2, 4, 2, 2, 2), (3, 2, 2, 2, 2, 2)])
def test_random_values_do_not_depend_on_the_shape(shape):
    # the same stream, drawn flat or in many axes; the many-axis kernel has two counters that each skip a loop the
    # other needs, which the linearizer must nest (it once stopped with a LinearizeError)
    Tensor.manual_seed(0)
    many = Tensor.kaiming_uniform(*shape, a=5**0.5).numpy()
    Tensor.manual_seed(0)
    flat = Tensor.kaiming_uniform(shape[0], shape[1], int(np.prod(shape[2:])), a=5**0.5).numpy()
    np.testing.assert_array_equal(many.ravel(), flat.ravel())


def test_random_errors():
    with pytest.raises(ValueError, match=r"rand: negative size in shape \(2, -1\)"):
        Tensor.rand(2, -1)
    with pytest.raises(ValueError, match=r"randn: negative size in shape \(-3,\)"):
        Tensor.randn(-3)
    with pytest.raises(ValueError, match=r"randint: negative size"):
        Tensor.randint(-1)
    with pytest.raises(TypeError, match=r"rand: .*float dtype.*int32"):
        Tensor.rand(2, dtype="int32")
    with pytest.raises(TypeError, match=r"randint: .*integer dtype.*float32"):
        Tensor.randint(2, dtype="float32")
    with pytest.raises(ValueError, match=r"randint: low must be less than high.*low=3.*high=3"):
        Tensor.randint(2, low=3, high=3)
    with pytest.raises(ValueError, match=r"randint: \[0, 300\) does not fit dtypes.uint8"):
        Tensor.randint(2, low=0, high=300, dtype="uint8")
    with pytest.raises(TypeError, match="rand: sizes must be ints"):
        Tensor.rand(2.0)


# *** dropout ***


def test_dropout_is_a_no_op_unless_training():
    x = Tensor.ones(10)
    assert Tensor.training is False
    assert x.dropout(0.5) is x


@pytest.mark.no_roundtrip
@Tensor.train()
def test_dropout_in_training():
    Tensor.manual_seed(5)
    x = Tensor.full((200, 100), 3.0)
    y = x.dropout(0.25).numpy()
    kept = y != 0
    assert abs(kept.mean() - 0.75) < 0.01
    np.testing.assert_allclose(y[kept], 3.0 / 0.75, rtol=1e-6)
    assert x.dropout(0.0) is x
    np.testing.assert_array_equal(x.dropout(1.0).numpy(), np.zeros((200, 100), np.float32))


@RANDOM
@pytest.mark.parametrize("device", DEVICES)
@Tensor.train()
def test_dropout_dtypes_and_devices(device):
    Tensor.manual_seed(6)
    h = Tensor(np.arange(1, 17, dtype=np.float16), device=device).dropout(0.5)
    assert h.dtype is dtypes.float16 and h.device == device
    got = h.numpy()
    kept = got != 0
    np.testing.assert_array_equal(got[kept], np.arange(1, 17, dtype=np.float16)[kept] * 2)
    assert Tensor.arange(4, device=device).dropout(0.5).dtype is dtypes.float32  # ints scale into floats


def test_dropout_errors():
    with pytest.raises(ValueError, match=r"dropout: .*between 0 and 1.*1.5"):
        Tensor.ones(2).dropout(1.5)


# *** from_blob, requires_grad= ***


@pytest.mark.parametrize("np_dtype", [np.float32, np.int16, np.uint8, np.float64, np.bool_, np.int64])
def test_from_blob_copies_the_memory(np_dtype):
    a = (np.arange(12).reshape(3, 4) % 5).astype(np_dtype)
    name = np.dtype(np_dtype).name
    t = Tensor.from_blob(a.ctypes.data, (3, 4), dtype=name)
    assert t.dtype.name == name and t.shape == (3, 4)
    np.testing.assert_array_equal(t.numpy(), a)
    a[0, 0] = 1 - a[0, 0]  # a copy: later writes to the memory are not seen
    assert t.numpy()[0, 0] != a[0, 0]


def test_from_blob_defaults_and_errors():
    import ctypes

    from zeptograd.helpers import ArgumentError

    raw = (ctypes.c_float * 4)(1.0, 2.5, -3.0, 4.0)
    t = Tensor.from_blob(ctypes.addressof(raw), 4, device="PYTHON")
    assert t.dtype is dtypes.float32 and t.device == "PYTHON" and t.tolist() == [1.0, 2.5, -3.0, 4.0]
    assert Tensor.from_blob(0, (0, 3)).shape == (0, 3)
    with pytest.raises(ArgumentError, match="NULL"):
        Tensor.from_blob(0, (2,))
    with pytest.raises(TypeError, match="ptr"):
        Tensor.from_blob(raw, (4,))


def test_tensor_requires_grad_argument():
    assert Tensor([1.0], requires_grad=True).requires_grad is True
    assert Tensor([1.0], requires_grad=False).requires_grad is False and Tensor([1.0]).requires_grad is None
    with pytest.raises(TypeError, match="requires_grad"):
        Tensor([1.0], requires_grad="yes")
