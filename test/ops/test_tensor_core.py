"""The core Tensor: construction from Python and numpy data, dtype promotion as PyTorch defines it, and the
PyTorch-habit accessors (size, bool, int, float, clone). torch.result_type and numpy are the oracles."""

from __future__ import annotations

import numpy as np
import pytest

from zeptograd import Context, Tensor, dtypes

torch = pytest.importorskip("torch")

# the dtypes torch and zeptograd both have, with promotion defined between every pair in torch
NAMES = ["bool", "int8", "int16", "int32", "int64", "uint8", "float16", "float32", "float64"]


def torch_tensor(name: str, ndim: int):
    shape = (2,) * ndim
    return torch.ones(shape, dtype=getattr(torch, name))


def zg_tensor(name: str, ndim: int) -> Tensor:
    return Tensor.ones(*(2,) * ndim, dtype=name) if ndim else Tensor(1, dtype=name)


def dtype_name(t) -> str:
    return str(t.dtype).replace("torch.", "").replace("dtypes.", "")


def default_int32(name: str) -> str:
    """torch's default int is int64, tinygrad's (and so ours) int32: where a Python int brings the default, the
    expected dtype is int32."""
    return "int32" if name == "int64" else name


@pytest.mark.parametrize("a", NAMES)
@pytest.mark.parametrize("b", NAMES)
@pytest.mark.parametrize("ndims", [(1, 1), (1, 0), (0, 1), (0, 0)], ids=["dim-dim", "dim-0d", "0d-dim", "0d-0d"])
def test_promotion_matches_torch(a: str, b: str, ndims: tuple[int, int]):
    expected = torch.result_type(torch_tensor(a, ndims[0]), torch_tensor(b, ndims[1]))
    got = (zg_tensor(a, ndims[0]) * zg_tensor(b, ndims[1])).dtype
    assert got.name == str(expected).replace("torch.", ""), f"{a} x {b} ({ndims})"


@pytest.mark.parametrize("a", NAMES)
@pytest.mark.parametrize("scalar", [True, 3, -2, 2.5])
def test_python_scalars_are_weak(a: str, scalar):
    expected = str(torch.result_type(torch_tensor(a, 1), scalar)).replace("torch.", "")
    if a != "int64":
        expected = default_int32(expected)
    assert (zg_tensor(a, 1) * scalar).dtype.name == expected
    assert (scalar * zg_tensor(a, 1)).dtype.name == expected


def test_float16_stays_float16_with_weak_operands():
    x = Tensor([1.0, 2.0], dtype="half")
    assert (x * 2.0).dtype is dtypes.float16
    assert (x * Tensor(2.0)).dtype is dtypes.float16
    assert (x + Tensor(3)).dtype is dtypes.float16
    np.testing.assert_array_equal((x * Tensor(2.0)).numpy(), np.array([2.0, 4.0], np.float16))


@pytest.mark.parametrize(
    "data",
    [
        [],
        [[]],
        5,
        -2.5,
        True,
        [1, 2, 3],
        [[1.5, 2], [3, 4]],
        [[True, False]],
        (1, 2),
        [[[1], [2]], [[3], [4]]],
        np.float64(2.0),
        np.array(3, dtype=np.int16),
        np.arange(6, dtype=np.uint8).reshape(2, 3),
        np.arange(6, dtype=np.float32).reshape(2, 3).T,  # not C-contiguous
        np.zeros((0, 3), np.int64),
    ],
    ids=repr,
)
def test_construction_matches_numpy_and_torch_dtypes(data):
    t = Tensor(data)
    from_numpy = isinstance(data, (np.ndarray, np.generic))
    ref = torch.tensor(np.asarray(data)) if from_numpy else torch.tensor(data)
    expected = dtype_name(ref) if from_numpy else default_int32(dtype_name(ref))
    assert t.shape == tuple(ref.shape)
    assert dtype_name(t) == expected
    out = t.numpy()
    assert out.dtype == np.dtype(expected)
    np.testing.assert_array_equal(out, ref.numpy())


@pytest.mark.parametrize(
    "name,expected",
    [
        ("int", "int32"),
        ("float", "float32"),
        ("half", "float16"),
        ("long", "int64"),
        ("bool", "bool"),
        ("uint8", "uint8"),
        ("double", "float64"),
    ],
)
def test_dtype_names(name: str, expected: str):
    t = Tensor([1, 0, 2], dtype=name)
    assert t.dtype.name == expected
    assert t.numpy().dtype == np.dtype(expected)
    np.testing.assert_array_equal(t.numpy(), np.array([1, 0, 2]).astype(expected))


@pytest.mark.parametrize("device", ["CPU", "PYTHON"])
def test_construction_on_each_device(device: str):
    t = Tensor([[1, 2], [3, 4]], dtype=dtypes.float32, device=device)
    assert t.device == device
    np.testing.assert_array_equal((t * 2).numpy(), np.array([[2, 4], [6, 8]], np.float32))


def test_default_dtypes():
    assert Tensor.zeros(2).dtype is dtypes.float32
    assert Tensor.arange(3).dtype is dtypes.int32
    assert Tensor.arange(3.0).dtype is dtypes.float32
    assert (Tensor([1, 2]) / 2).dtype is dtypes.float32
    assert Tensor([1, 2]).sum().dtype is dtypes.int32
    assert (Tensor([1, 2]) < 2).dtype is dtypes.bool


@pytest.mark.parametrize(
    "data",
    [
        [np.float32(1), np.float32(2)],
        [np.int64(3), np.int64(-4)],
        [[np.float16(1.5)]],
        range(4),
        [1, True],
        [True, 2.5],
    ],
    ids=repr,
)
def test_sequences_of_numpy_scalars_and_ranges(data):
    ref = torch.tensor(data)
    t = Tensor(data)
    from_numpy = any(isinstance(x, np.generic) for x in np.asarray(data, dtype=object).ravel())
    assert dtype_name(t) == (dtype_name(ref) if from_numpy else default_int32(dtype_name(ref)))
    np.testing.assert_array_equal(t.numpy(), ref.numpy())


def test_sequences_of_tensors():
    t = Tensor([Tensor(1), Tensor(2, device="PYTHON")])
    assert t.dtype is dtypes.int32 and t.tolist() == [1, 2]
    rows = Tensor([Tensor([1.5, 2.0]), Tensor([3.0, 4.0]) * 2])
    np.testing.assert_array_equal(rows.numpy(), np.array([[1.5, 2.0], [6.0, 8.0]], np.float32))


def test_ragged_and_unsupported_data():
    with pytest.raises(ValueError, match="ragged"):
        Tensor([[1, 2], [3]])
    with pytest.raises(TypeError, match="Tensor"):
        Tensor("abc")
    with pytest.raises(TypeError, match="Tensor: no dtype for a Python value of type str"):
        Tensor(["a"])
    with pytest.raises(TypeError, match="Tensor: numpy dtype <U1 has no zeptograd dtype"):
        Tensor(np.array(["x"]))
    with pytest.raises(TypeError, match="unknown dtype name 'flaot'"):
        Tensor([1], dtype="flaot")
    with pytest.raises(TypeError, match="void"):
        Tensor([1.0], dtype="void")


@pytest.mark.parametrize("op", ["zeros", "ones", "empty"])
def test_negative_sizes(op: str):
    with pytest.raises(ValueError, match=rf"{op}: negative size in shape \(2, -1\)"):
        getattr(Tensor, op)(2, -1)
    with pytest.raises(ValueError, match=r"full: negative size"):
        Tensor.full((-3,), 1.0)


def test_size_and_accessors():
    t = Tensor.zeros(2, 3, dtype="half")
    assert t.size() == (2, 3) and t.size(0) == 2 and t.size(-1) == 3
    assert t.element_size() == 2 and t.nbytes() == 12 and t.numel() == 6 and t.ndim == 2
    assert t.is_floating_point() and not Tensor([1]).is_floating_point()
    with pytest.raises(IndexError, match=r"size: axis 2 is out of range .*\(2, 3\)"):
        t.size(2)


def test_bool_int_float_of_one_element():
    assert bool(Tensor([3]) > 2) is True
    assert bool(Tensor(0.0)) is False
    assert int(Tensor([[7]])) == 7
    assert float(Tensor(2.5)) == 2.5
    with pytest.raises(RuntimeError, match=r"bool\(\) of a tensor with 2 elements \(shape \(2,\)\) is ambiguous"):
        bool(Tensor([1, 2]))
    with pytest.raises(RuntimeError, match="float"):
        float(Tensor.zeros(0))


def test_clone_is_independent():
    a = Tensor([1.0, 2.0]).realize()
    b = a.clone()
    a += 1
    c = b.clone()
    b.assign(Tensor([5.0, 6.0]))
    np.testing.assert_array_equal(a.numpy(), [2.0, 3.0])
    np.testing.assert_array_equal(b.numpy(), [5.0, 6.0])
    np.testing.assert_array_equal(c.numpy(), [1.0, 2.0])


def test_sizes_accept_numpy_integers_but_not_floats_or_bools():
    assert Tensor.zeros(np.int64(2), np.int32(3)).shape == (2, 3)
    assert Tensor.arange(6).reshape(np.int64(2), -1).shape == (2, 3)
    with pytest.raises(TypeError, match=r"zeros: sizes must be ints, got \(2.0,\)"):
        Tensor.zeros(2.0)
    with pytest.raises(TypeError, match="ones: sizes must be ints"):
        Tensor.ones(True)


def test_python_ints_keep_their_values():
    # numpy and torch hold 2**40; an inferred int32 widens to int64, an int32 asked for is an error, as in torch
    for t in (Tensor([2**40, -3]), Tensor(2**40), Tensor.full((2,), -(2**40))):
        assert t.dtype is dtypes.int64
    np.testing.assert_array_equal(Tensor([2**40, -3]).numpy(), np.array([2**40, -3], np.int64))
    assert Tensor([-(2**31), 2**31 - 1]).dtype is dtypes.int32
    with pytest.raises(RuntimeError, match="Tensor: value 1099511627776 cannot be converted to int32 without overflow"):
        Tensor([2**40], dtype="int32")
    with pytest.raises(RuntimeError, match="Tensor: value 300 cannot be converted to uint8"):
        Tensor([1, 300], dtype="uint8")
    with pytest.raises(RuntimeError, match="full: value -1 cannot be converted to uint32"):
        Tensor.full((2,), -1, dtype="uint32")
    with pytest.raises(RuntimeError, match="Tensor: "):
        Tensor([2**70])


def test_numpy_scalars_are_weak_operands():
    x = Tensor([1.0, 2.0], dtype="half")
    assert (x + np.float32(1)).dtype is dtypes.float16
    assert (Tensor([1, 2]) * np.int64(3)).dtype is dtypes.int32
    np.testing.assert_array_equal((Tensor([1, 2]) * np.int64(3)).numpy(), [3, 6])


def test_errors_name_the_call():
    with pytest.raises(ValueError, match="Tensor: unknown device 'bogus'"):
        Tensor([1], device="bogus")
    with pytest.raises(ValueError, match="to: unknown device 'bogus'"):
        Tensor([1]).to("bogus")
    with pytest.raises(TypeError, match="arange: no dtype for a Python value of type str"):
        Tensor.arange("a")
    with pytest.raises(TypeError, match="full: no dtype for a Python value of type NoneType"):
        Tensor.full((2,), None)
    with pytest.raises(TypeError, match="assign: cannot make a tensor from str"):
        Tensor([1]).realize().assign("s")
    with pytest.raises(TypeError, match="size: axis must be an int or a sequence of ints, got 1.5"):
        Tensor.zeros(2, 3).size(1.5)


# *** training mode: one switch ***


def test_training_mode_is_one_switch():
    from zeptograd.helpers import TRAINING

    assert Tensor.training is False
    with Context(TRAINING=1):
        assert Tensor.training is True
        with Tensor.train(False):
            assert Tensor.training is False and TRAINING.value == 0
        assert Tensor.training is True
    assert Tensor.training is False
    Tensor.training = True
    try:
        assert TRAINING.value == 1
    finally:
        Tensor.training = False
    assert TRAINING.value == 0

    @Tensor.train()
    def in_training() -> bool:
        return Tensor.training

    assert in_training() is True and Tensor.training is False


def test_dropout_drops_under_the_training_flag():
    x = Tensor.ones(1000)
    assert x.dropout(0.5) is x
    with Context(TRAINING=1):
        kept = (x.dropout(0.5).numpy() != 0).mean()
    assert 0.4 < kept < 0.6


@pytest.mark.parametrize(
    "src, dst",
    [("float32", "uint16"), ("float32", "int8"), ("float32", "float64"), ("float64", "int16"), ("int8", "float32")]
    + [("uint16", "float16"), ("float16", "uint8"), ("int64", "int32"), ("uint8", "int64"), ("bfloat16", "uint8")],
)
def test_bitcast_between_sizes_scales_the_last_axis(src, dst):
    # the oracle: numpy's view of the same bytes (little-endian), as torch's Tensor.view(dtype)
    raw = np.random.default_rng(11).integers(0, 256, (3, 16), dtype=np.uint8)
    if src == "bfloat16":
        t, want = Tensor(raw).bitcast("uint16").bitcast("bfloat16"), raw.view(dst)
    else:
        t, want = Tensor(raw.view(src)), raw.view(dst)
    got = t.bitcast(dst)
    assert got.shape == want.shape and got.dtype is getattr(dtypes, dst)
    np.testing.assert_array_equal(got.numpy().view(np.uint8), want.view(np.uint8))


def test_clone_keeps_the_gradient_and_deepcopy_copies():
    import copy

    x = Tensor([1.0, 2.0])
    x.requires_grad = True
    (x * x).sum().backward()
    c = x.clone()
    assert c.grad is not None and c.grad.tolist() == [2.0, 4.0]  # tinygrad's clone keeps .grad
    d = copy.deepcopy(x + 1)
    assert d.tolist() == [2.0, 3.0]
    x.assign(Tensor([5.0, 5.0])).realize()
    assert d.tolist() == [2.0, 3.0] and c.tolist() == [1.0, 2.0]  # copies of their own


def test_shallow_copy_shares_memory_as_torch():
    # copy.copy bypassed __init__: the copy of a tensor with a pending assignment was never updated by the realize
    # that ran the assignment, and reading it failed inside realize (an AssertionError)
    import copy

    w, tw = Tensor([1.0, 2.0]).realize(), torch.tensor([1.0, 2.0])
    w.assign(w + 1)
    tw.add_(1)
    c, tc = copy.copy(w), copy.copy(tw)
    w.realize()
    assert c.tolist() == tc.tolist() and w.tolist() == tw.tolist()  # the assignment ran once
    v, tv = w[1:], tw[1:]
    cv, tcv = copy.copy(v), copy.copy(tv)
    w.assign(w * 10)
    tw.mul_(10)
    assert cv.tolist() == tcv.tolist()  # a copy of a view is a view of the same base
    cv.assign(Tensor([7.0]))
    tcv.copy_(torch.tensor([7.0]))
    assert w.tolist() == tw.tolist() and v.tolist() == tv.tolist() and c.tolist() == tc.tolist()
    p, tp = Tensor([1.0], requires_grad=True), torch.tensor([1.0], requires_grad=True)
    (p * 2).sum().backward()
    (tp * 2).sum().backward()
    cp, tcp = copy.copy(p), copy.copy(tp)
    assert cp.requires_grad == tcp.requires_grad and (cp.grad is None) == (tcp.grad is None)


def test_pickle_is_a_copy_of_the_values_as_torch():
    # a tensor pickled its graph, which names this process's buffers: a pending assignment ran again on unpickling
    # (into the original's memory), and in another process the buffers do not exist
    import pickle

    w, tw = Tensor([1.0, 2.0]).realize(), torch.tensor([1.0, 2.0])
    w.assign(w + 1)
    tw.add_(1)
    u, tu = pickle.loads(pickle.dumps(w)), pickle.loads(pickle.dumps(tw))
    assert u.tolist() == tu.tolist() and w.tolist() == tw.tolist()  # the assignment ran once
    u.assign(u * 0).realize()
    tu.mul_(0)
    assert w.tolist() == tw.tolist() and u.tolist() == tu.tolist()  # memory of its own
    lazy = Tensor(np.arange(6, dtype=np.float32).reshape(2, 3)).T * 2
    got = pickle.loads(pickle.dumps(lazy))
    np.testing.assert_array_equal(got.numpy(), np.arange(6, dtype=np.float32).reshape(2, 3).T * 2)
    b = pickle.loads(pickle.dumps(Tensor([1.5, -2.25], dtype="bfloat16", requires_grad=True)))
    tb = pickle.loads(pickle.dumps(torch.tensor([1.5, -2.25], dtype=torch.bfloat16, requires_grad=True)))
    assert b.dtype is dtypes.bfloat16 and b.tolist() == tb.tolist() and b.requires_grad == tb.requires_grad


def test_gradients_accumulate_across_backward_calls():
    torch = pytest.importorskip("torch")
    x = Tensor([1.0, 2.0])
    x.requires_grad = True
    (x * 2).sum().backward()
    (x * x).sum().backward()
    tx = torch.tensor([1.0, 2.0], requires_grad=True)
    (tx * 2).sum().backward()
    (tx * tx).sum().backward()
    assert x.grad.tolist() == tx.grad.tolist()
