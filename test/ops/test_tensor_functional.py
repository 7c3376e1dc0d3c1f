"""Functional ops: matmul/dot, einsum, linear, softmax/log_softmax/softmin, normalize, interpolate.

Oracles: numpy (matmul, einsum, linear) and torch (the softmax family, normalize, interpolate, and einsum's
broadcasting of size-1 subscripts, which numpy does not do)."""

from __future__ import annotations

import numpy as np
import pytest

from zeptograd import Tensor, dtypes

DEVICES = ["CPU", "PYTHON"]


def _rand(rng: np.random.Generator, shape: tuple[int, ...], dtype=np.float32) -> np.ndarray:
    if np.issubdtype(dtype, np.integer):
        return rng.integers(-5, 6, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


# *** matmul, dot ***

MATMUL_SHAPES = [
    ((2, 3), (3, 4)),
    ((3,), (3,)),
    ((3,), (3, 2)),
    ((2, 3), (3,)),
    ((2, 1, 2, 3), (4, 3, 2)),  # broadcast batch axes
    ((0, 3), (3, 4)),
    ((2, 0), (0, 3)),  # an empty contraction is zeros
    ((1, 1), (1, 1)),
    ((2, 3, 4), (4,)),
]


@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES)
def test_matmul_shapes(sa, sb):
    rng = np.random.default_rng(0)
    a, b = _rand(rng, sa), _rand(rng, sb)
    got = Tensor(a) @ Tensor(b)
    assert got.shape == np.matmul(a, b).shape and got.dtype is dtypes.float32
    np.testing.assert_allclose(got.numpy(), a @ b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_matmul_noncontiguous_and_dot(device):
    rng = np.random.default_rng(1)
    a, b = _rand(rng, (3, 2)), _rand(rng, (4, 3))
    ta, tb = Tensor(a, device=device), Tensor(b, device=device)
    np.testing.assert_allclose((ta.T @ tb.T).numpy(), a.T @ b.T, rtol=1e-5, atol=1e-6)  # transposed inputs
    np.testing.assert_allclose(ta.flip(0).T.dot(tb.flip(1).T).numpy(), a[::-1].T @ b[:, ::-1].T, rtol=1e-5, atol=1e-6)
    shrunk = ta.shrink(((1, 3), None))
    np.testing.assert_allclose(shrunk.T.matmul(shrunk).numpy(), a[1:].T @ a[1:], rtol=1e-5, atol=1e-6)
    assert (ta.T @ tb.T).device == device


@pytest.mark.parametrize(
    "sa,sb,dtype",
    [
        ((5, 7), (7, 3), "float32"),
        ((2, 4, 6), (2, 6, 5), "float64"),  # batched
        ((3,), (3, 4), "float32"),  # a 1-d operand
        ((64, 64), (64, 512), "float32"),  # large enough that the CPU stores b as panels
        ((2, 1, 2, 3), (4, 3, 2), "float32"),  # broadcast batch axes: the tensor ops
        ((4, 5), (5, 3), "float16"),  # summed in float32: the tensor ops
        ((2, 1 << 15), (1 << 15, 2), "float32"),  # a sum in two stages: the tensor ops
    ],
)
def test_matmul_graph_built_as_uops_is_the_tensor_ops_graph(sa, sb, dtype):
    # a @ b builds its graph from UOps directly when both operands have one float dtype that sums in one stage and
    # their batch axes match; an explicit `dtype` takes the tensor ops (a broadcast multiply and a sum), which must
    # build the very same nodes (hash-consing makes them one object)
    rng = np.random.default_rng(5)
    a = Tensor(_rand(rng, sa, np.float64)).cast(dtype)
    b = Tensor(_rand(rng, sb, np.float64)).cast(dtype)
    direct = a @ b
    assert direct.uop is a.matmul(b, dtype=dtype).uop
    want = a.numpy().astype(np.float64) @ b.numpy().astype(np.float64)
    np.testing.assert_allclose(direct.numpy().astype(np.float64), want, rtol=2e-3, atol=2e-3)


def test_matmul_builds_its_graph_without_tensor_ops(monkeypatch):
    rng = np.random.default_rng(6)
    a, b = Tensor(_rand(rng, (3, 4))), Tensor(_rand(rng, (4, 2)))
    monkeypatch.setattr(Tensor, "sum", lambda *a, **k: pytest.fail("the UOp path called Tensor.sum"))
    np.testing.assert_allclose((a @ b).numpy(), a.numpy() @ b.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "dtype,np_dtype", [("float16", np.float16), ("int32", np.int32), ("int8", np.int8), ("uint8", np.uint8)]
)
def test_matmul_dtypes(dtype, np_dtype):
    rng = np.random.default_rng(2)
    a = rng.integers(0, 40, (3, 5)).astype(np_dtype)
    b = rng.integers(0, 40, (5, 2)).astype(np_dtype)
    got = Tensor(a) @ Tensor(b)
    assert got.dtype is dtypes.fields()[dtype]  # the operands' dtype (int8 @ int8 wraps, as in numpy and torch)
    np.testing.assert_allclose(got.numpy().astype(np.float64), (a @ b).astype(np.float64), rtol=1e-3)


def test_matmul_promotes_and_accumulates_in_dtype():
    a = Tensor([[1, 2]], dtype="int8")
    b = Tensor([[0.5], [0.25]])
    assert (a @ b).dtype is dtypes.float32 and (a @ b).tolist() == [[1.0]]
    big = Tensor([[100, 100]], dtype="int8")
    assert big.matmul(Tensor([[1], [1]], dtype="int8"), dtype="int32").tolist() == [[200]]
    assert Tensor([[1.0, 2.0]]).matmul(Tensor([[3.0], [4.0]]), reverse=True).tolist() == [[3.0, 6.0], [4.0, 8.0]]


def test_matmul_errors():
    with pytest.raises(ValueError, match=r"matmul: shapes \(2, 3\) and \(4, 5\) are not aligned"):
        Tensor.ones(2, 3) @ Tensor.ones(4, 5)
    with pytest.raises(ValueError, match=r"matmul: .*at least 1 dimension.*\(\)"):
        Tensor(1.0) @ Tensor.ones(2)
    with pytest.raises(ValueError, match=r"matmul: the batch axes of shapes \(2, 2, 3\) and \(3, 3, 4\)"):
        Tensor.ones(2, 2, 3) @ Tensor.ones(3, 3, 4)
    with pytest.raises(TypeError, match="matmul: expected a Tensor"):
        Tensor.ones(2).matmul([1.0, 2.0])


# *** einsum ***

EINSUM_CASES = [
    ("ij,jk->ik", [(2, 3), (3, 4)]),
    ("ij,jk", [(2, 3), (3, 4)]),
    ("ij->ji", [(2, 3)]),
    ("ij->", [(2, 3)]),
    ("ii->i", [(3, 3)]),
    ("ii", [(3, 3)]),
    ("iij->ji", [(2, 2, 3)]),
    ("bii->b", [(2, 3, 3)]),
    ("iii->i", [(3, 3, 3)]),
    ("bij,bjk->bik", [(2, 2, 3), (2, 3, 4)]),
    ("i,j->ij", [(2,), (3,)]),
    ("ij,ij->", [(2, 3), (2, 3)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
    ("ijk,ikj->i", [(2, 3, 3), (2, 3, 3)]),
    ("ba,ab", [(2, 3), (3, 2)]),
    ("Ab,bA->", [(2, 3), (3, 2)]),
    ("ab,Ab", [(2, 3), (4, 3)]),  # implicit output in ASCII order: upper case first
    ("...ij,...jk->...ik", [(2, 1, 2, 3), (4, 3, 2)]),
    ("...i,...i", [(2, 3), (3,)]),
    ("i...->...", [(3, 2)]),
    # an ellipsis anywhere in a term: in the middle, at the end, in the output, implicit output
    ("i...j,j->i...", [(2, 3, 4, 5), (5,)]),
    ("a...b,b...c->a...c", [(2, 3, 3), (3, 3, 4)]),
    ("i...j->ji...", [(2, 3, 4, 5)]),
    ("i...", [(2, 3, 4)]),
    ("i...j,j...->i...", [(2, 3, 4), (4, 3)]),
    ("i...i->...", [(3, 2, 3)]),
    ("...,...->...", [(2, 3), (3,)]),
    ("ij,jk", [(0, 3), (3, 4)]),
    ("ij,jk", [(2, 0), (0, 4)]),
    ("i,i", [(1,), (1,)]),
]


@pytest.mark.parametrize("formula,shapes", EINSUM_CASES)
def test_einsum_matches_numpy(formula, shapes):
    rng = np.random.default_rng(3)
    ops = [_rand(rng, s) for s in shapes]
    want = np.einsum(formula, *ops)
    got = Tensor.einsum(formula, *[Tensor(o) for o in ops])
    assert got.shape == want.shape and got.dtype is dtypes.float32
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "formula,shapes",
    [("ij,jk->ik", [(2, 1), (3, 4)]), ("...ij->ij", [(2, 3, 4)]), ("bi,bi->b", [(1, 3), (4, 1)])],
)
def test_einsum_broadcasting_matches_torch(formula, shapes):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    ops = [_rand(rng, s) for s in shapes]
    want = torch.einsum(formula, *[torch.tensor(o) for o in ops]).numpy()
    got = Tensor.einsum(formula, *[Tensor(o) for o in ops])
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_einsum_noncontiguous_list_form_and_devices(device):
    rng = np.random.default_rng(5)
    a, b = _rand(rng, (3, 2)), _rand(rng, (4, 3))
    ta, tb = Tensor(a, device=device), Tensor(b, device=device)
    got = Tensor.einsum("ij,jk->ik", [ta.T, tb.T])
    assert got.device == device
    np.testing.assert_allclose(got.numpy(), a.T @ b.T, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(Tensor.einsum("ii", tb.shrink(((0, 3), None)).flip(0)).numpy(), np.trace(b[:3][::-1]))


@pytest.mark.parametrize("dtype,np_dtype", [("int32", np.int32), ("float16", np.float16)])
def test_einsum_dtypes(dtype, np_dtype):
    rng = np.random.default_rng(6)
    a, b = rng.integers(-4, 5, (2, 3)).astype(np_dtype), rng.integers(-4, 5, (3, 3)).astype(np_dtype)
    got = Tensor.einsum("ij,jk->ik", Tensor(a), Tensor(b))
    assert got.dtype is dtypes.fields()[dtype]
    np.testing.assert_array_equal(got.numpy(), np.einsum("ij,jk->ik", a, b))
    assert Tensor.einsum("ij->", Tensor(a), dtype="float32").dtype is dtypes.float32


def test_einsum_errors():
    a, b = Tensor.ones(2, 3), Tensor.ones(4, 5)
    with pytest.raises(ValueError, match=r"einsum: formula 'ij,jk->ik' with shapes \(2, 3\), \(4, 5\).*'j'.*3 and 4"):
        Tensor.einsum("ij,jk->ik", a, b)
    with pytest.raises(ValueError, match=r"einsum: formula 'ij,jk' .*names 2 operands, 1 were given"):
        Tensor.einsum("ij,jk", a)
    with pytest.raises(ValueError, match=r"einsum: formula 'ijk' with shapes \(2, 3\): operand 0 has 2 dimensions"):
        Tensor.einsum("ijk", a)
    with pytest.raises(ValueError, match=r"einsum: .*output subscript 'z' appears in no operand"):
        Tensor.einsum("ij->z", a)
    with pytest.raises(ValueError, match=r"einsum: .*output subscript 'i' appears more than once"):
        Tensor.einsum("ij->ii", a)
    with pytest.raises(ValueError, match=r"einsum: .*subscript 'i' repeats in operand 0 over sizes 2 != 3"):
        Tensor.einsum("ii", a)
    with pytest.raises(ValueError, match=r"einsum: .*subscripts must be letters, got 'i1'"):
        Tensor.einsum("i1", a)
    with pytest.raises(ValueError, match=r"einsum: formula 'ij' got no operands"):
        Tensor.einsum("ij")
    with pytest.raises(TypeError, match="einsum: operands must be Tensors"):
        Tensor.einsum("ij,jk", a, np.ones((3, 4)))


# *** linear ***


@pytest.mark.parametrize("device", DEVICES)
def test_linear(device):
    rng = np.random.default_rng(7)
    x, w, b = _rand(rng, (2, 3, 4)), _rand(rng, (4, 5)), _rand(rng, (5,))
    tx, tw, tb = Tensor(x, device=device), Tensor(w, device=device), Tensor(b, device=device)
    np.testing.assert_allclose(tx.linear(tw, tb).numpy(), x @ w + b, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(tx.linear(tw).numpy(), x @ w, rtol=1e-5, atol=1e-5)
    w1 = _rand(rng, (4,))
    np.testing.assert_allclose(tx.linear(Tensor(w1, device=device)).numpy(), x * w1, rtol=1e-6)  # elementwise
    np.testing.assert_allclose(tx.transpose(0, 1).linear(tw, tb).numpy(), x.transpose(1, 0, 2) @ w + b, rtol=1e-5)


def test_linear_shape_error():
    with pytest.raises(ValueError, match=r"matmul: shapes \(2, 3\) and \(4, 5\)"):
        Tensor.ones(2, 3).linear(Tensor.ones(4, 5))


# *** softmax, log_softmax, softmin ***


def _softmax_input() -> np.ndarray:
    rng = np.random.default_rng(8)
    x = rng.standard_normal((3, 5)).astype(np.float32) * 20
    x[1] += 1e4  # a row of large values: exp would overflow without the max subtracted
    x[0, 2] = -np.inf  # a -inf entry: weight 0
    x[2, 0] = 80.0
    return x


@pytest.mark.parametrize("fn", ["softmax", "log_softmax", "softmin"])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_softmax_family_matches_torch(fn, axis):
    torch = pytest.importorskip("torch")
    x = _softmax_input()
    want = getattr(torch.nn.functional, fn)(torch.tensor(x), dim=axis).numpy()
    got = getattr(Tensor(x), fn)(axis)
    assert got.dtype is dtypes.float32
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_softmax_noncontiguous_and_devices(device):
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(9).standard_normal((4, 3)).astype(np.float32)
    t = Tensor(x, device=device)
    np.testing.assert_allclose(t.T.softmax(dim=1).numpy(), torch.tensor(x.T).softmax(1).numpy(), rtol=1e-5)
    want = torch.tensor(x[::-1].copy()).log_softmax(0).numpy()
    np.testing.assert_allclose(t.flip(0).log_softmax(0).numpy(), want, rtol=1e-5, atol=1e-6)
    assert t.softmax().device == device


def test_softmax_float16_computes_in_float32():
    torch = pytest.importorskip("torch")
    x = _softmax_input()[1:].astype(np.float16)
    x64 = x.astype(np.float64)
    exact = x64 - x64.max(1, keepdims=True)
    exact = exact - np.log(np.exp(exact).sum(1, keepdims=True))  # log_softmax of the float16 values, exactly
    for fn, want in (("softmax", np.exp(exact)), ("log_softmax", exact)):
        got = getattr(Tensor(x), fn)(1)
        assert got.dtype is dtypes.float16 and getattr(torch.tensor(x), fn)(1).dtype == torch.float16
        # only the final rounding to float16 (PyTorch's CPU kernel rounds in between and is less exact here)
        np.testing.assert_allclose(got.numpy().astype(np.float64), want, rtol=1e-3, atol=1e-6)


def test_softmax_dtypes_and_dtype_argument():
    torch = pytest.importorskip("torch")
    got = Tensor([[1, 2, 3]]).softmax()  # integers promote to float32
    assert got.dtype is dtypes.float32
    np.testing.assert_allclose(got.numpy(), torch.tensor([[1.0, 2.0, 3.0]]).softmax(-1).numpy(), rtol=1e-6)
    h = Tensor([1.0, 2.0]).softmax(dtype="float16")
    want = torch.tensor([1.0, 2.0]).softmax(0, dtype=torch.float16)
    assert h.dtype is dtypes.float16
    np.testing.assert_allclose(h.numpy(), want.numpy(), rtol=1e-3)
    assert Tensor([1.0, 2.0]).log_softmax(dtype="float64").dtype is dtypes.float64


@pytest.mark.parametrize("shape,axis", [((0, 3), 0), ((2, 0), 1), ((2, 0), 0), ((1, 4), 0), ((3, 1), 1), ((), 0)])
def test_softmax_size_zero_and_one(shape, axis):
    torch = pytest.importorskip("torch")
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    for fn in ("softmax", "log_softmax"):
        want = getattr(torch.tensor(x), fn)(axis).numpy()
        got = getattr(Tensor(x), fn)(axis)
        assert got.shape == want.shape
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)


def test_softmax_all_masked_row_is_nan_like_torch():
    row = Tensor([[-np.inf, -np.inf], [0.0, -np.inf]]).softmax(1).numpy()
    assert np.isnan(row[0]).all() and row[1].tolist() == [1.0, 0.0]


def test_softmax_errors():
    with pytest.raises(IndexError, match=r"softmax: axis 2 is out of range .*\(2, 3\)"):
        Tensor.ones(2, 3).softmax(2)
    with pytest.raises(IndexError, match=r"log_softmax: axis -3"):
        Tensor.ones(2, 3).log_softmax(-3)
    with pytest.raises(TypeError, match=r"softmax: axis must be an int"):
        Tensor.ones(2, 3).softmax((0, 1))


# *** normalize ***


@pytest.mark.parametrize("p", [2, 1, 3, 0.5, float("inf")])
@pytest.mark.parametrize("dim", [1, 0, -1, (0, 1)])
def test_normalize_matches_torch(p, dim):
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(10).standard_normal((3, 4)).astype(np.float32)
    x[1] = 0  # a zero row: divided by eps, stays zero
    want = torch.nn.functional.normalize(torch.tensor(x), p=p, dim=dim).numpy()
    np.testing.assert_allclose(Tensor(x).normalize(p, dim).numpy(), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_normalize_noncontiguous_dtypes_and_eps(device):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    x = np.random.default_rng(11).standard_normal((2, 3, 4)).astype(np.float32)
    t = Tensor(x, device=device)
    want = F.normalize(torch.tensor(x).permute(2, 0, 1), dim=1).numpy()
    np.testing.assert_allclose(t.permute(2, 0, 1).normalize().numpy(), want, rtol=1e-5, atol=1e-6)
    want = F.normalize(torch.tensor(x), dim=2, eps=10.0).numpy()
    np.testing.assert_allclose(t.normalize(dim=2, eps=10.0).numpy(), want, rtol=1e-6)
    h = Tensor(x.astype(np.float16), device=device).normalize(dim=0)
    assert h.dtype is dtypes.float16
    want16 = F.normalize(torch.tensor(x.astype(np.float16)), dim=0).numpy()
    np.testing.assert_allclose(h.numpy().astype(np.float32), want16.astype(np.float32), rtol=2e-3, atol=1e-3)
    assert Tensor([[3, 4]], device=device).normalize().dtype is dtypes.float32


def test_normalize_size_zero_and_errors():
    assert Tensor.zeros(0, 3).normalize().shape == (0, 3)
    assert Tensor.zeros(2, 0).normalize(p=float("inf")).shape == (2, 0)
    with pytest.raises(IndexError, match=r"normalize: axis 1 is out of range .*\(3,\)"):
        Tensor.ones(3).normalize()
    with pytest.raises(ValueError, match=r"normalize: p must be a positive number.*-1"):
        Tensor.ones(2, 2).normalize(p=-1)


# *** interpolate ***


@pytest.mark.parametrize("mode", ["nearest", "nearest-exact", "linear"])
@pytest.mark.parametrize("size", [1, 3, 7, 10, 14, 23])
def test_interpolate_1d_matches_torch(mode, size):
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(12).standard_normal((2, 3, 7)).astype(np.float32)
    for align in [False, True] if mode == "linear" else [None]:
        want = torch.nn.functional.interpolate(torch.tensor(x), size=size, mode=mode, align_corners=align).numpy()
        got = Tensor(x).interpolate((size,), mode=mode, align_corners=bool(align))
        assert got.shape == want.shape and got.dtype is dtypes.float32
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "mode,torch_mode", [("nearest", "nearest"), ("nearest-exact", "nearest-exact"), ("linear", "bilinear")]
)
@pytest.mark.parametrize("size", [(3, 4), (10, 12), (7, 3), (1, 1)])
def test_interpolate_2d_matches_torch(mode, torch_mode, size):
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(13).standard_normal((1, 2, 5, 6)).astype(np.float32)
    for align in [False, True] if mode == "linear" else [None]:
        want = torch.nn.functional.interpolate(torch.tensor(x), size=size, mode=torch_mode, align_corners=align)
        got = Tensor(x).interpolate(size, mode=mode, align_corners=bool(align))
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("align", [False, True])
def test_interpolate_3d_trilinear_and_torch_mode_names(align):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    x = np.random.default_rng(14).standard_normal((1, 1, 3, 4, 5)).astype(np.float32)
    want = F.interpolate(torch.tensor(x), size=(6, 2, 7), mode="trilinear", align_corners=align).numpy()
    np.testing.assert_allclose(
        Tensor(x).interpolate((6, 2, 7), mode="trilinear", align_corners=align).numpy(), want, rtol=1e-5, atol=1e-6
    )
    want = F.interpolate(torch.tensor(x[0]), size=8, mode="bilinear", align_corners=align).numpy()
    got = Tensor(x[0]).interpolate(8, mode="bilinear", align_corners=align)  # an int size: every axis past (N, C)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_interpolate_noncontiguous_dtypes_and_devices(device):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    rng = np.random.default_rng(15)
    x = rng.standard_normal((1, 4, 3)).astype(np.float32)
    t = Tensor(x, device=device)
    want = F.interpolate(torch.tensor(x).transpose(1, 2), size=6, mode="linear").numpy()
    got = t.transpose(1, 2).interpolate((6,))
    assert got.device == device
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)
    u = rng.integers(0, 200, (1, 2, 5)).astype(np.uint8)  # nearest gathers any dtype exactly
    got_u = Tensor(u, device=device).interpolate((8,), mode="nearest")
    assert got_u.dtype is dtypes.uint8
    np.testing.assert_array_equal(got_u.numpy(), F.interpolate(torch.tensor(u), size=8, mode="nearest").numpy())
    h = x.astype(np.float16)
    got_h = Tensor(h, device=device).interpolate((5,))
    assert got_h.dtype is dtypes.float16
    want_h = F.interpolate(torch.tensor(h), size=5, mode="linear").numpy()
    np.testing.assert_allclose(got_h.numpy().astype(np.float32), want_h.astype(np.float32), rtol=1e-3, atol=1e-3)
    b = Tensor([[True, False, True]], device=device).interpolate((6,), mode="nearest")
    assert b.dtype is dtypes.bool and b.tolist() == [[True, True, False, False, True, True]]
    i = Tensor([[0, 10]], device=device).interpolate((4,))  # integers interpolate in float and truncate back
    assert i.dtype is dtypes.int32 and i.tolist() == [[0, 2, 7, 10]]


def test_interpolate_same_size_and_leading_axes_untouched():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(Tensor(x).interpolate((4,)).numpy(), x)
    np.testing.assert_array_equal(Tensor(x).interpolate((3, 4), mode="nearest").numpy(), x)
    assert Tensor.zeros(0, 2, 3).interpolate((5,)).shape == (0, 2, 5)  # an empty batch


def test_interpolate_errors():
    x = Tensor.ones(1, 2, 3)
    with pytest.raises(ValueError, match=r"interpolate: mode 'bicubic' is not one of"):
        x.interpolate((4,), mode="bicubic")
    with pytest.raises(
        ValueError, match=r"interpolate: size \(2, 2, 2, 2\) does not fit a tensor of shape \(1, 2, 3\)"
    ):
        x.interpolate((2, 2, 2, 2))
    with pytest.raises(ValueError, match=r"interpolate: sizes must be positive.*\(1, 2, 3\).*\(0,\)"):
        x.interpolate((0,))
    with pytest.raises(ValueError, match=r"interpolate: align_corners only applies to linear modes"):
        x.interpolate((4,), mode="nearest", align_corners=True)
    with pytest.raises(ValueError, match=r"interpolate: mode 'bilinear' resizes 2 axes, got size \(4,\)"):
        x.interpolate((4,), mode="bilinear")
    with pytest.raises(TypeError, match=r"interpolate: size must be an int or a sequence of ints"):
        x.interpolate((2.5,))


# *** robustness: bad arguments fail at the public call, naming the op ***


@pytest.mark.parametrize("weight", [None, "a", [1.0, 2.0, 3.0]])
def test_linear_weight_must_be_a_tensor(weight) -> None:
    with pytest.raises(TypeError, match=rf"linear: weight must be a Tensor, got {type(weight).__name__}"):
        Tensor.ones(2, 3).linear(weight)


def test_linear_bias_errors_name_linear() -> None:
    x = Tensor.ones(2, 3)
    with pytest.raises(TypeError, match=r"linear: bias must be a Tensor or None, got str"):
        x.linear(Tensor.ones(3, 4), "a")
    with pytest.raises(ValueError, match=r"linear: shapes \(2, 4\) and \(5,\) cannot be broadcast"):
        x.linear(Tensor.ones(3, 4), Tensor.ones(5))


def test_softmin_errors_name_softmin() -> None:
    with pytest.raises(IndexError, match=r"softmin: axis 2 is out of range .*\(2, 3\)"):
        Tensor.ones(2, 3).softmin(2)
    with pytest.raises(TypeError, match=r"softmin: axis must be an int, got 1.5"):
        Tensor.ones(2, 3).softmin(dim=1.5)


def test_normalize_dim_of_wrong_type() -> None:
    with pytest.raises(TypeError, match=r"normalize: axis must be an int or a sequence of ints, got 1.5"):
        Tensor.ones(2, 3).normalize(dim=1.5)


def test_dtype_names_name_the_op() -> None:
    with pytest.raises(TypeError, match=r"softmax: unknown dtype name 'bogus'"):
        Tensor.ones(2, 3).softmax(1, dtype="bogus")
    with pytest.raises(TypeError, match=r"matmul: unknown dtype name 'bogus'"):
        Tensor.ones(2, 3).matmul(Tensor.ones(3, 2), dtype="bogus")


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("shape, size", [((1, 2, 5, 7), (9, 4)), ((2, 3, 8, 3), (3, 11)), ((1, 1, 4, 4), (4, 9))])
def test_bilinear_uint8_rounds_as_torch(shape, size, align_corners):
    # torch resizes uint8 images in fixed point (a width pass, then a height pass, each rounding to uint8):
    # a float interpolation truncated or rounded back differs from it by 1 in many pixels
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(7).integers(0, 256, shape).astype(np.uint8)
    got = Tensor(x).interpolate(size, mode="bilinear", align_corners=align_corners)
    want = torch.nn.functional.interpolate(torch.from_numpy(x), size=size, mode="bilinear", align_corners=align_corners)
    assert got.dtype is dtypes.uint8
    np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize("shape, axis", [((16, 10), -1), ((4, 7, 5), 1), ((3, 1, 6), 1)])
def test_softmax_gradients_as_torch(shape, axis):
    # softmax's gradient is PyTorch's formula y * (g - sum(g * y)), not traced through exp and the division
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(8)
    a, g = _rand(rng, shape), _rand(rng, shape)
    x = Tensor(a)
    x.requires_grad = True
    (x.softmax(axis) * Tensor(g)).sum().backward()
    tx = torch.from_numpy(a).requires_grad_()
    (torch.softmax(tx, axis) * torch.from_numpy(g)).sum().backward()
    # the exact gradient, in float64: y * (g - s) with s = sum(g * y) cancels, so an ulp of s (the order it is
    # added in: NOOPT's scalar loop, the vector lanes, torch's) moves the result by up to 1.2e-7 near y = 1.
    # Both zeptograd and torch stay within 1e-7 of it, so they differ by up to twice that
    a64, g64 = a.astype(np.float64), g.astype(np.float64)
    y = np.exp(a64 - a64.max(axis, keepdims=True))
    y /= y.sum(axis, keepdims=True)
    exact = y * (g64 - (g64 * y).sum(axis, keepdims=True))
    np.testing.assert_allclose(x.grad.numpy(), exact, rtol=0, atol=1e-7)
    np.testing.assert_allclose(tx.grad.numpy(), exact, rtol=0, atol=1e-7)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=0, atol=2e-7)


@pytest.mark.parametrize("shape, axis", [((16, 10), -1), ((4, 7, 5), 1)])
def test_log_softmax_gradient_as_torch(shape, axis):
    # g - exp(y) * sum(g): as accurate as torch's own against the float64 gradient (both within a few float32
    # ulps of the largest term, exp(y) * sum(g); 1e-7 absolute is finer than float32 holds once |sum(g)| > 1)
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(9)
    a, g = _rand(rng, shape), _rand(rng, shape)
    x = Tensor(a)
    x.requires_grad = True
    (x.log_softmax(axis) * Tensor(g)).sum().backward()
    exact = torch.from_numpy(a).double().requires_grad_()
    (torch.log_softmax(exact, axis) * torch.from_numpy(g).double()).sum().backward()
    scale = np.abs(g.astype(np.float64).sum(axis=axis, keepdims=True)).max() + np.abs(g).max()
    np.testing.assert_allclose(x.grad.numpy(), exact.grad.numpy(), rtol=0, atol=4 * scale * 2.0**-24)
