"""The error of every public op's bad-input paths has PyTorch's exception class (the oracle: torch itself, called
the same way), so code written for PyTorch catches it. zeptograd's shape and argument errors are both
RuntimeError (as torch raises) and ValueError (as numpy and Python code expect); an op a dtype lacks raises
NotImplementedError (a RuntimeError, as torch) that is a TypeError too. Not checked here: the values of an
index tensor (out of range reads 0, as in tinygrad; see docs/api.md)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from zeptograd import Tensor, dtypes

torch = pytest.importorskip("torch")
F = torch.nn.functional

A = np.arange(12, dtype=np.float32).reshape(3, 4)
IDX = np.arange(12, dtype=np.int32).reshape(3, 4)


def z(a: np.ndarray = A) -> Tensor:
    return Tensor(a)


def t(a: np.ndarray = A) -> torch.Tensor:
    return torch.tensor(a)


# (name, zeptograd call, torch call): both must raise, zeptograd's error an instance of torch's class
CASES: list[tuple[str, Callable, Callable]] = [
    # shapes
    ("matmul shapes", lambda: z() @ z(), lambda: t() @ t()),
    ("matmul 0-d", lambda: z() @ Tensor(2.0), lambda: t() @ torch.tensor(2.0)),
    ("add broadcast", lambda: z() + Tensor(np.ones((2, 4), np.float32)), lambda: t() + torch.ones(2, 4)),
    ("reshape size", lambda: z().reshape(5, 3), lambda: t().reshape(5, 3)),
    ("reshape two -1", lambda: z().reshape(-1, -1), lambda: t().reshape(-1, -1)),
    ("view size", lambda: z().view(7), lambda: t().view(7)),
    ("expand", lambda: z().expand(3, 5), lambda: t().expand(3, 5)),
    ("expand fewer dims", lambda: z().expand(4), lambda: t().expand(4)),
    ("permute repeated", lambda: z().permute(0, 0), lambda: t().permute(0, 0)),
    ("permute too few", lambda: z().permute(0), lambda: t().permute(0)),
    ("flip repeated", lambda: z().flip(0, 0), lambda: t().flip(0, 0)),
    ("diagonal same dims", lambda: z().diagonal(dim1=0, dim2=0), lambda: t().diagonal(dim1=0, dim2=0)),
    ("cat shapes", lambda: z().cat(Tensor(np.ones((2, 3), np.float32))), lambda: torch.cat([t(), torch.ones(2, 3)])),
    ("stack shapes", lambda: Tensor.stack(z(), z().T), lambda: torch.stack([t(), t().T])),
    ("stack tensor dim", lambda: Tensor.stack(z(), z(), dim=Tensor(0)), lambda: torch.stack([t(), t()], dim=t())),
    ("split sizes", lambda: z().split([1, 1], 0), lambda: t().split([1, 1], 0)),
    ("chunk zero", lambda: z().chunk(0), lambda: t().chunk(0)),
    ("repeat too few", lambda: z().repeat(2), lambda: t().repeat(2)),
    ("roll lengths", lambda: z().roll((1, 2), (0,)), lambda: t().roll((1, 2), (0,))),
    ("unfold too big", lambda: z().unfold(0, 5, 1), lambda: t().unfold(0, 5, 1)),
    ("unfold step", lambda: z().unfold(0, 2, 0), lambda: t().unfold(0, 2, 0)),
    ("narrow", lambda: z().narrow(0, 2, 5), lambda: t().narrow(0, 2, 5)),
    ("squeeze dim", lambda: z().squeeze(5), lambda: t().squeeze(5)),
    ("pad negative past", lambda: z().pad((-3, -3)), lambda: F.pad(t(), (-3, -3))),
    ("pad odd flat", lambda: z().pad((1,)), lambda: F.pad(t(), (1,))),
    (
        "gather dims",
        lambda: z().gather(0, Tensor(IDX[:, :1].reshape(3))),
        lambda: t().gather(0, t(IDX[:, :1].reshape(3)).long()),
    ),
    ("einsum sizes", lambda: Tensor.einsum("ij,jk->ik", z(), z()), lambda: torch.einsum("ij,jk->ik", t(), t())),
    ("einsum operands", lambda: Tensor.einsum("ij,jk->ik", z()), lambda: torch.einsum("ij,jk->ik", t())),
    # dims out of range: IndexError in torch
    ("sum dim", lambda: z().sum(2), lambda: t().sum(2)),
    ("max dim", lambda: z().max(-3), lambda: t().max(-3)),
    ("softmax dim", lambda: z().softmax(3), lambda: t().softmax(3)),
    ("transpose dim", lambda: z().transpose(0, 2), lambda: t().transpose(0, 2)),
    ("unsqueeze dim", lambda: z().unsqueeze(4), lambda: t().unsqueeze(4)),
    ("flatten dims", lambda: z().flatten(1, 0), lambda: t().flatten(1, 0)),
    ("cumsum dim", lambda: z().cumsum(2), lambda: t().cumsum(2)),
    ("argmax dim", lambda: z().argmax(2), lambda: t().argmax(2)),
    # indexing
    ("index out of range", lambda: z()[3], lambda: t()[3]),
    ("too many indices", lambda: z()[0, 0, 0], lambda: t()[0, 0, 0]),
    # arguments
    ("div rounding_mode", lambda: z().div(z(), rounding_mode="up"), lambda: t().div(t(), rounding_mode="up")),
    (
        "scatter reduce",
        lambda: z().scatter(0, Tensor(IDX[:1] % 3), 1.0, reduce="max"),
        lambda: t().scatter(0, t(IDX[:1] % 3).long(), 1.0, reduce="max"),
    ),
    (
        "scatter index beyond src",
        lambda: z().scatter(0, Tensor(IDX % 3), Tensor(np.ones((2, 2), np.float32))),
        lambda: t().scatter(0, t(IDX % 3).long(), torch.ones(2, 2)),
    ),
    ("one_hot negative", lambda: Tensor([1, 2]).one_hot(-2), lambda: F.one_hot(torch.tensor([1, 2]), -2)),
    ("linspace steps", lambda: Tensor.linspace(0, 1, -1), lambda: torch.linspace(0, 1, -1)),
    ("arange step zero", lambda: Tensor.arange(0, 5, 0), lambda: torch.arange(0, 5, 0)),
    ("full negative", lambda: Tensor.zeros(-1, 2), lambda: torch.zeros(-1, 2)),
    ("randint bounds", lambda: Tensor.randint(3, low=5, high=2), lambda: torch.randint(5, 2, (3,))),
    ("int pow negative", lambda: Tensor([2, 3]) ** -1, lambda: torch.tensor([2, 3]) ** -1),
    # dtypes: RuntimeError in torch
    ("shift float", lambda: z() << 1, lambda: t() << 1),
    ("bitwise float", lambda: z() & z(), lambda: t() & t()),
    ("xor float", lambda: z() ^ 1, lambda: t() ^ 1),
    ("invert float", lambda: ~z(), lambda: ~t()),
    # nn
    (
        "conv kernel too big",
        lambda: z(A.reshape(1, 1, 3, 4)).conv2d(z(np.ones((1, 1, 5, 5), np.float32))),
        lambda: F.conv2d(t(A.reshape(1, 1, 3, 4)), torch.ones(1, 1, 5, 5)),
    ),
    (
        "conv channels",
        lambda: z(A.reshape(1, 1, 3, 4)).conv2d(z(np.ones((1, 2, 2, 2), np.float32))),
        lambda: F.conv2d(t(A.reshape(1, 1, 3, 4)), torch.ones(1, 2, 2, 2)),
    ),
    ("linear shapes", lambda: z().linear(z(A[:3, :3])), lambda: F.linear(t(), t(A[:3, :3]))),
    (
        "cross_entropy target shape",
        lambda: z().cross_entropy(Tensor([0, 1])),
        lambda: F.cross_entropy(t(), torch.tensor([0, 1])),
    ),
    (
        "max_pool kernel too big",
        lambda: z(A.reshape(1, 1, 3, 4)).max_pool2d(5),
        lambda: F.max_pool2d(t(A.reshape(1, 1, 3, 4)), 5),
    ),
]


def _raised(fn: Callable) -> BaseException | None:
    try:
        fn()
    except Exception as e:
        return e
    return None


@pytest.mark.parametrize("name,zfn,tfn", CASES, ids=[c[0] for c in CASES])
def test_error_class_matches_torch(name: str, zfn: Callable, tfn: Callable):
    expect = _raised(tfn)
    assert expect is not None, f"{name}: torch accepts it (a bad case)"
    got = _raised(zfn)
    assert got is not None, f"{name}: zeptograd accepts what torch refuses ({type(expect).__name__}: {expect})"
    assert isinstance(got, type(expect)), f"{name}: {type(got).__name__} ({got}), torch: {type(expect).__name__}"


def test_shape_errors_are_value_errors_too():
    """Code written for numpy (or for zeptograd before) catches ValueError: it still can."""
    with pytest.raises(ValueError):
        z() @ z()
    with pytest.raises(TypeError):
        z() << 1
    assert dtypes.float32  # the module imports
