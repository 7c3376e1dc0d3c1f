"""Float constants read from a buffer once a kernel's structure repeats (engine/constants.py), against numpy."""

from __future__ import annotations

import math

import numpy as np
import pytest

from zeptograd import Tensor, TinyJit
from zeptograd.dtype import dtypes
from zeptograd.engine import realize
from zeptograd.engine.constants import lift_constants
from zeptograd.schedule.kernelize import create_schedule
from zeptograd.uop.ops import Ops, UOp


@pytest.fixture
def compiles(monkeypatch: pytest.MonkeyPatch) -> list[UOp]:
    """The kernel ASTs compiled from here on (fresh caches, so that nothing an earlier test compiled is reused)."""
    monkeypatch.setattr(realize, "_programs", {})
    monkeypatch.setattr(realize, "_lifted", {})
    monkeypatch.setattr(realize, "_baked", {})
    seen: list[UOp] = []
    get_program = realize.get_program

    def counting(ast: UOp, *args, **kwargs):
        seen.append(ast)
        return get_program(ast, *args, **kwargs)

    monkeypatch.setattr(realize, "get_program", counting)
    return seen


def _reads_constants(ast: UOp) -> bool:
    return any(u.op is Ops.DEFINE_GLOBAL and u.arg > 1 for u in ast.toposort())


@pytest.mark.parametrize("device", ["CPU", "LLVM"])
def test_a_loop_over_constants_compiles_two_programs(compiles: list[UOp], device: str):
    if device == "LLVM":
        pytest.importorskip("llvmlite")
    rng = np.random.default_rng(0)
    a = rng.standard_normal(1000).astype(np.float32)
    x = Tensor(a, device=device).realize()
    consts = [0.51, 0.27, 0.1337, 2.5, -3.75, 0.51, 1e-20, 7.5]
    for c in consts:
        out = (x * c + 0.5).exp().numpy()
        np.testing.assert_allclose(out, np.exp(a * np.float32(c) + np.float32(0.5)), rtol=2e-6)
    # the first kernel keeps its constants in its code; the second of the structure reads them from a buffer, and
    # that program serves every later value
    assert len(compiles) == 2
    assert not _reads_constants(compiles[0]) and _reads_constants(compiles[1])


def test_several_kernels_in_one_schedule(compiles: list[UOp]):
    # softmax of a scaled input: several kernels compiled together (compile_schedule), each with the scale
    rng = np.random.default_rng(1)
    a = rng.standard_normal((64, 100)).astype(np.float32)
    x = Tensor(a).realize()
    for c in (0.3, 0.7, 1.9, 0.3, 4.5):
        e = np.exp(a * np.float32(c) - (a * np.float32(c)).max(-1, keepdims=True))
        np.testing.assert_allclose((x * c).softmax(-1).numpy(), e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-7)
    n = len(compiles)
    (x * 2.75).softmax(-1).realize()
    assert len(compiles) == n  # a new value compiles nothing


def test_equal_and_different_constants_in_one_kernel(compiles: list[UOp]):
    # two equal constants are one node, two different ones two: each kernel reads the values it was given
    a = np.linspace(-2, 2, 50, dtype=np.float32)
    x = Tensor(a).realize()
    for c, d in ((0.5, 0.5), (0.5, 0.25), (0.75, 0.75), (0.2, 0.9), (0.9, 0.2)):
        np.testing.assert_array_equal((x * c - d).numpy(), a * np.float32(c) - np.float32(d))


def test_zero_one_inf_and_nan_stay_in_the_code():
    g = UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(4), (), 1).index(UOp.range(4, 0)).load()
    for c in (0.0, -0.0, 1.0, -1.0, math.inf, -math.inf, math.nan):
        assert lift_constants((g * c).sink()) == ((g * c).sink(), ())
    lifted, values = lift_constants((g * 0.75 + 1.0).sink())
    assert values == (0.75,) and any(u.op is Ops.CONST and u.arg == 1.0 for u in lifted.toposort())


def test_integer_and_float64_constants_stay_in_the_code():
    x = Tensor(np.arange(10, dtype=np.int32)).realize()
    y = Tensor(np.arange(10, dtype=np.float64)).realize()
    for t in (x * 3 + 7, y * 0.3):
        (ast,) = [i.ast for i in create_schedule([t.uop], ["CPU"])[0] if i.ast is not None]
        assert lift_constants(ast)[1] == ()


def test_tinyjit_captures_the_constants_of_a_lifted_kernel(compiles: list[UOp]):
    a = np.arange(8, dtype=np.float32)
    x = Tensor(a).realize()
    (x * 0.3).realize()
    (x * 0.6).realize()  # the structure repeats: from here its kernels read their constants

    @TinyJit
    def f(t: Tensor) -> Tensor:
        return (t * 0.9).realize()

    for k in range(4):
        inp = Tensor(a + k).realize()
        np.testing.assert_array_equal(f(inp).numpy(), (a + k) * np.float32(0.9))
