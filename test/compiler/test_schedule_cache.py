"""The schedule cache (engine/realize.py): a graph whose structure was realized before, on other buffers, replays
its schedule. Every result is checked against numpy; the cache must hit where only the buffers differ and must not
hit where a constant, a shape, a dtype or the aliasing of buffers differs."""

import ctypes
import subprocess

import numpy as np
import pytest

from zeptograd import Tensor, dtypes
from zeptograd.engine import realize as engine
from zeptograd.runtime.ops_cpu import CCompiler


def _stats() -> tuple[int, int]:
    return engine.schedule_cache_stats["hits"], engine.schedule_cache_stats["misses"]


def _hits_and_misses(fn) -> tuple[int, int]:
    """How many realizes `fn` made that hit and that missed the schedule cache."""
    hits, misses = _stats()
    fn()
    new_hits, new_misses = _stats()
    return new_hits - hits, new_misses - misses


def test_same_structure_on_other_buffers_hits_and_computes_the_new_values():
    rng = np.random.default_rng(0)
    a_np, b_np = rng.standard_normal((3, 5), dtype=np.float32), rng.standard_normal((5,), dtype=np.float32)
    first = ((Tensor(a_np) * Tensor(b_np) + 1).relu().sum(axis=1) + 0.5).numpy()
    np.testing.assert_allclose(first, np.maximum(a_np * b_np + 1, 0).sum(axis=1) + 0.5, rtol=1e-5)
    c_np, d_np = rng.standard_normal((3, 5), dtype=np.float32), rng.standard_normal((5,), dtype=np.float32)
    c, d = Tensor(c_np).realize(), Tensor(d_np).realize()
    out = (c * d + 1).relu().sum(axis=1) + 0.5
    hits, misses = _hits_and_misses(out.realize)
    assert (hits, misses) == (1, 0)
    np.testing.assert_allclose(out.numpy(), np.maximum(c_np * d_np + 1, 0).sum(axis=1) + 0.5, rtol=1e-5)


def test_a_loop_of_small_ops_hits_after_its_first_step():
    x = Tensor(np.zeros(4, dtype=np.float32)).realize()
    x = (x + 1).realize()  # the structure is known from here on (an earlier test may have made it already)

    def steps() -> None:
        nonlocal x
        for _ in range(50):
            x = (x + 1).realize()

    assert _hits_and_misses(steps) == (50, 0)
    np.testing.assert_array_equal(x.numpy(), np.full(4, 51, dtype=np.float32))


@pytest.mark.parametrize("c1, c2", [(2.0, 3.0), (0.0, -0.0), (-0.0, 0.0), (1.0, 1)])
def test_a_different_constant_is_a_different_schedule(c1, c2):
    # 1 / (x*0 + c): the sign of a zero c shows in the result (x*0 is -0.0 for negative x)
    x_np = np.array([1.5, -2.0, 3.0, -0.5], dtype=np.float32)
    x = Tensor(x_np).realize()

    def f(c):
        return 1 / (x * 0 + c) + x * c

    def want(c):
        with np.errstate(divide="ignore"):
            return np.float32(1) / (x_np * np.float32(0) + np.float32(c)) + x_np * np.float32(c)

    key1, key2 = engine._structure([f(c1).uop])[0], engine._structure([f(c2).uop])[0]
    # the same key exactly when the float32 constants have the same bits (1.0 and 1 do; 0.0 and -0.0 do not)
    assert (key1 == key2) is (np.float32(c1).tobytes() == np.float32(c2).tobytes())
    one = f(c1).realize()
    np.testing.assert_array_equal(one.numpy(), want(c1))
    np.testing.assert_array_equal(f(c2).numpy(), want(c2))


def test_a_different_shape_or_dtype_is_a_different_schedule():
    rng = np.random.default_rng(1)
    cases = [
        rng.standard_normal((4, 6), dtype=np.float32),
        rng.standard_normal((6, 4), dtype=np.float32),
        rng.standard_normal((24,), dtype=np.float32),
        rng.standard_normal((4, 6)).astype(np.float64),
        rng.integers(-50, 50, (4, 6)).astype(np.int32),
    ]
    for arr in cases:
        t = Tensor(arr)
        np.testing.assert_allclose((t * 3 - 1).sum(axis=0).numpy(), (arr * 3 - 1).sum(axis=0), rtol=1e-5)
        elementwise = (t * 3 - 1).numpy()
        assert elementwise.dtype == arr.dtype
        np.testing.assert_allclose(elementwise, arr * 3 - 1, rtol=1e-6)


def test_the_same_buffer_twice_is_not_two_buffers():
    a_np = np.arange(6, dtype=np.float32)
    b_np = np.arange(6, dtype=np.float32)[::-1].copy()
    a, b = Tensor(a_np).realize(), Tensor(b_np).realize()
    np.testing.assert_array_equal((a * b + a).numpy(), a_np * b_np + a_np)
    np.testing.assert_array_equal((a * a + a).numpy(), a_np * a_np + a_np)
    c = Tensor(b_np).realize()
    np.testing.assert_array_equal((c * a + c).numpy(), b_np * a_np + b_np)


def test_one_node_read_twice_is_not_two_equal_nodes():
    """(a - b) * (b - a) multiplies two SUB nodes; (a - b) * (a - b) multiplies one SUB node by itself. Their ops,
    dtypes and leaves' shapes are the same: the key tells them apart by the positions of each node's sources, so the
    second misses the cache instead of replaying the first's schedule."""
    rng = np.random.default_rng(3)
    a_np, b_np = rng.standard_normal(7, dtype=np.float32), rng.standard_normal(7, dtype=np.float32)
    a, b = Tensor(a_np).realize(), Tensor(b_np).realize()
    np.testing.assert_array_equal(((a - b) * (b - a)).numpy(), (a_np - b_np) * (b_np - a_np))
    c_np, d_np = rng.standard_normal(7, dtype=np.float32), rng.standard_normal(7, dtype=np.float32)
    c, d = Tensor(c_np).realize(), Tensor(d_np).realize()
    out = (c - d) * (c - d)
    hits, misses = _hits_and_misses(out.realize)
    assert (hits, misses) == (0, 1)
    np.testing.assert_array_equal(out.numpy(), (c_np - d_np) * (c_np - d_np))


def test_assigning_a_transpose_of_another_buffer_then_of_itself():
    # t.assign(u.T) writes in place; t.assign(t.T) reads t where it writes and needs a scratch buffer first: a
    # cache that took the second for the first would clobber values it has yet to read
    rng = np.random.default_rng(2)
    t_np, u_np = rng.standard_normal((5, 5), dtype=np.float32), rng.standard_normal((5, 5), dtype=np.float32)
    t, u = Tensor(t_np).realize(), Tensor(u_np).realize()
    t.assign(u.T + 1).realize()
    np.testing.assert_array_equal(t.numpy(), u_np.T + 1)
    s_np = rng.standard_normal((5, 5), dtype=np.float32)
    s = Tensor(s_np).realize()
    s.assign(s.T + 1).realize()
    np.testing.assert_array_equal(s.numpy(), s_np.T + 1)
    # and the aliased structure again, on another buffer, hits its own schedule
    r_np = rng.standard_normal((5, 5), dtype=np.float32)
    r = Tensor(r_np).realize()
    hits, misses = _hits_and_misses(lambda: r.assign(r.T + 1).realize())
    assert (hits, misses) == (1, 0)
    np.testing.assert_array_equal(r.numpy(), r_np.T + 1)


def test_stale_reads_still_see_the_old_values_on_a_cache_hit():
    for step in range(3):  # the second and third steps replay the first one's schedule
        p_np = np.full(3, float(step), dtype=np.float32)
        p = Tensor(p_np).realize()
        old = p * 2  # a read made before the assignment
        p.assign(p + 10).realize()
        np.testing.assert_array_equal(p.numpy(), p_np + 10)
        np.testing.assert_array_equal(old.numpy(), p_np * 2)


def test_reused_dtype_keeps_its_bool_result():
    x = Tensor([1.0, -1.0, 2.0])
    for _ in range(3):
        got = (x > 0).realize()
        assert got.dtype is dtypes.bool
        np.testing.assert_array_equal(got.numpy(), np.array([True, False, True]))


def test_new_kernels_of_one_schedule_compile_in_one_compiler_run(tmp_path, monkeypatch):
    monkeypatch.setenv("ZEPTOGRAD_CACHE_DIR", str(tmp_path))
    calls = []
    real_run = subprocess.run

    def counting_run(*args, **kwargs):
        calls.append(args[0])
        return real_run(*args, **kwargs)

    monkeypatch.setattr(subprocess, "run", counting_run)
    x_np = np.linspace(-3, 3, 1237, dtype=np.float32)  # a size no other test uses: new kernels
    x = Tensor(x_np)
    y = (x * 1.25 - 0.375).relu()
    out = (y.sum() + y * 3.5).realize()  # a reduction broadcast back: two kernels
    want = np.maximum(x_np * np.float32(1.25) - np.float32(0.375), 0)
    np.testing.assert_allclose(out.numpy(), want.sum() + want * np.float32(3.5), rtol=1e-5)
    compiles = [c for c in calls if c and c[0] == CCompiler().cc]
    assert len(compiles) == 1, compiles


def test_kernels_with_the_same_name_share_a_library(tmp_path, monkeypatch):
    monkeypatch.setenv("ZEPTOGRAD_CACHE_DIR", str(tmp_path))
    srcs = [f"void k(float* restrict data0) {{ data0[0] = {v}f; }}\n" for v in ("1.5", "2.5", "3.5")]
    fns = CCompiler().functions([(src, "k") for src in srcs])
    for fn, want in zip(fns, (1.5, 2.5, 3.5)):
        fn.argtypes = [ctypes.c_void_p]
        out = np.zeros(1, dtype=np.float32)
        fn(out.ctypes.data)
        assert out[0] == want
