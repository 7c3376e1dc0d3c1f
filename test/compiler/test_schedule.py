"""How many kernels each pattern makes, and that kernels read and write only inside their buffers.

Kernel counts are what fusion promises (see docs/internals.md): elementwise chains fuse into each other and
into reductions; a reduce whose result is broadcast back, a CONTIGUOUS, an assignment and a copy end a kernel.
Inputs are realized before the counter is reset unless a test says otherwise; copies of input data to the device
are not kernels. Every count test also checks the value against numpy, so a schedule that saves kernels by
computing the wrong thing fails.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest

from zeptograd import Tensor, dtypes
from zeptograd.engine.facts import device_facts
from zeptograd.helpers import Context, GlobalCounters
from zeptograd.schedule.kernelize import DeviceFacts, create_schedule
from zeptograd.uop.ops import Ops

DEVICES = ["CPU", "PYTHON"]


def inputs(device: str, *shapes: tuple[int, ...], seed: int = 0) -> list[tuple[np.ndarray, Tensor]]:
    """Realized float32 inputs with their numpy values (at most 64 elements each, for the PYTHON device)."""
    rng = np.random.default_rng(seed)
    out = []
    for shape in shapes:
        a = rng.uniform(-2, 2, size=shape).astype(np.float32)
        out.append((a, Tensor(a, device=device).realize()))
    return out


def kernels(*ts: Tensor) -> int:
    """Kernels launched to realize ts together."""
    GlobalCounters.reset()
    Tensor.realize(*ts)
    return GlobalCounters.kernel_count


def kernels_computing(op: Ops, *ts: Tensor) -> int:
    """How many kernels of the schedule that would realize ts compute `op` (the schedule is built, not run)."""
    items, _ = create_schedule([t.uop for t in ts], [t.device for t in ts], device_facts)
    return sum(1 for item in items if item.ast is not None and any(u.op is op for u in item.ast.toposort()))


def close(t: Tensor, ref: np.ndarray, rtol: float = 1e-5, atol: float = 1e-5) -> None:
    out = t.numpy()
    assert out.shape == np.shape(ref)
    np.testing.assert_allclose(out.astype(np.float64), np.asarray(ref, np.float64), rtol=rtol, atol=atol)


# ---------------------------------------------------------------------------------------------------------------
# fusion


@pytest.mark.parametrize("device", DEVICES)
def test_mul_add_relu_sum_is_one_kernel(device: str):
    (a, ta), (b, tb), (c, tc) = inputs(device, (4, 8), (4, 8), (4, 8))
    out = (ta * tb + tc).maximum(0).sum()
    assert kernels(out) == 1
    w = a.astype(np.float64)
    close(out, np.maximum(w * b + c, 0).sum())


@pytest.mark.parametrize("device", DEVICES)
def test_add_chain_is_one_kernel(device: str):
    (a, ta), (b, tb), (c, tc), (d, td) = inputs(device, (4, 8), (4, 8), (4, 8), (4, 8))
    out = ta + tb + tc + td
    assert kernels(out) == 1
    close(out, a.astype(np.float64) + b + c + d)


@pytest.mark.parametrize("device", DEVICES)
def test_broadcast_and_scalars_fuse(device: str):
    (a, ta), (b, tb) = inputs(device, (4, 1), (1, 8))
    out = (ta * 2 + tb) / 3 - 1
    assert kernels(out) == 1
    close(out, (a.astype(np.float64) * 2 + b) / 3 - 1)


def test_long_elementwise_chain_is_one_kernel():
    (a, ta), (b, tb) = inputs("CPU", (16, 16), (16, 16))
    out, ref = ta, a.astype(np.float64)
    for i in range(40):
        out, ref = (out * tb + i) * 0.5, (ref * b + i) * 0.5
    assert kernels(out) == 1
    close(out, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("device", DEVICES)
def test_shared_elementwise_subexpression_is_one_kernel(device: str):
    # a diamond of cheap elementwise ops is recomputed inline, not split into kernels
    (a, ta), (b, tb) = inputs(device, (4, 8), (4, 8))
    y = ta * tb
    out = (y + 1) * (y - 1)
    assert kernels(out) == 1
    w = a.astype(np.float64) * b
    close(out, (w + 1) * (w - 1))


@pytest.mark.parametrize("device", DEVICES)
def test_movement_ops_fuse(device: str):
    # movement ops become index arithmetic: no kernel of their own
    (a, ta), (b, tb) = inputs(device, (8, 4), (4, 8))
    out = (ta.T + tb).flip(0).reshape(32).sum()
    assert kernels(out) == 1
    close(out, (a.T.astype(np.float64) + b)[::-1].reshape(32).sum())
    out2 = ta.permute(1, 0).reshape(-1).pad(((2, 3),)) * 2 + 1
    assert kernels(out2) == 1
    close(out2, np.pad(a.T.reshape(-1).astype(np.float64), (2, 3)) * 2 + 1)
    out3 = (tb.shrink(((1, 3), (2, 7))) * ta.shrink(((3, 8), (0, 2))).T).sum(axis=1)
    assert kernels(out3) == 1
    close(out3, (b[1:3, 2:7].astype(np.float64) * a[3:8, 0:2].T).sum(axis=1))


@pytest.mark.parametrize("device", DEVICES)
def test_elementwise_after_reduce_fuses(device: str):
    ((a, ta),) = inputs(device, (4, 8))
    out = ta.sum(axis=1) * 2 + 1
    assert kernels(out) == 1
    close(out, a.astype(np.float64).sum(axis=1) * 2 + 1)


@pytest.mark.parametrize("device", DEVICES)
def test_reduce_over_expanded_input_is_one_kernel(device: str):
    (a, ta), (b, tb) = inputs(device, (4, 8), (8, 4))
    out = (ta.reshape(4, 8, 1).expand(4, 8, 4) * tb.reshape(1, 8, 4).expand(4, 8, 4)).sum(axis=1)
    assert kernels(out) == 1
    close(out, a.astype(np.float64) @ b)


@pytest.mark.parametrize("device", DEVICES)
def test_matmul_then_elementwise_is_one_kernel(device: str):
    (a, ta), (b, tb) = inputs(device, (4, 8), (8, 4))
    out = (ta @ tb) + 1
    assert kernels(out) == 1
    close(out, a.astype(np.float64) @ b + 1)
    out2 = ((ta @ tb) * 2).maximum(0)
    assert kernels(out2) == 1
    close(out2, np.maximum((a.astype(np.float64) @ b) * 2, 0))


@pytest.mark.parametrize("device", DEVICES)
def test_softmax_stores_exp2_once(device: str):
    # max (1); exp2, stored once (2); its sum (3); divide (4): the sum and the divide both read exp2, which costs
    # more to recompute than to store and load (STORE_COST), so it is computed in one kernel, not in both
    ((x, tx),) = inputs(device, (4, 8))
    m = tx.max(axis=1, keepdim=True)
    e = (tx - m).exp2()
    out = e / e.sum(axis=1, keepdim=True)
    assert kernels_computing(Ops.EXP2, out) == 1
    assert kernels(out) == 4
    w = x.astype(np.float64)
    ref_e = np.exp2(w - w.max(axis=1, keepdims=True))
    close(out, ref_e / ref_e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out.numpy().sum(axis=1), np.ones(4), rtol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_tensor_softmax_stores_exp_once_and_log_softmax_needs_no_store(device: str):
    ((x, tx),) = inputs(device, (4, 8))
    w = x.astype(np.float64)
    ref_e = np.exp(w - w.max(axis=1, keepdims=True))
    out = tx.softmax(-1)
    assert kernels_computing(Ops.EXP, out) == 1
    assert kernels(out) == 4  # max, exp, sum, divide
    close(out, ref_e / ref_e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)
    # log_softmax reads exp in its sum only: nothing is shared, nothing is stored
    out2 = tx.log_softmax(-1)
    assert kernels(out2) == 3  # max, sum of exp, subtract the log
    close(out2, np.log(ref_e / ref_e.sum(axis=1, keepdims=True)), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_expensive_shared_value_is_stored_cheap_one_recomputed(device: str):
    (a, ta), (b, tb) = inputs(device, (4, 8), (4, 8))
    w = a.astype(np.float64) * b
    cheap = ta * tb + 1  # 2 ops: recomputed by the sum and by the divide
    out = cheap / cheap.sum(axis=1, keepdim=True)
    assert kernels(out) == 2
    close(out, (w + 1) / (w + 1).sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-5)
    costly = (ta * tb).exp()  # exp is a few dozen ops: stored by one kernel, read by the sum and the divide
    out2 = costly / costly.sum(axis=1, keepdim=True)
    assert kernels_computing(Ops.EXP, out2) == 1
    assert kernels(out2) == 3
    close(out2, np.exp(w) / np.exp(w).sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_store_cost_weighs_the_number_of_readers(device: str):
    # 16 cheap ops: recomputed once more (2 kernels read it) costs 16 < 24, recomputed twice more (3 kernels)
    # costs 32 >= 24, which pays for storing it
    (a, ta), (b, tb), (c, tc) = inputs(device, (4, 8), (4, 8), (4, 8))
    ref = a.astype(np.float64)
    for _ in range(8):
        ref = ref * b + c

    def v() -> Tensor:  # built afresh each time: realizing a stored v would make later counts read its buffer
        out = ta
        for _ in range(8):
            out = out * tb + tc
        return out

    with Context(STORE_COST=24):
        two = v() / v().sum(axis=1, keepdim=True)
        assert kernels(two) == 2  # the sum, the divide
        three = (v() - v().max(axis=1, keepdim=True)) / v().sum(axis=1, keepdim=True)
        assert kernels(three) == 4  # v, its max, its sum, the result
        with Context(STORE_COST=0):  # 0 stores every value that two kernels read
            every = v() / v().sum(axis=1, keepdim=True)
            assert kernels(every) == 3
    close(two, ref / ref.sum(axis=1, keepdims=True), rtol=1e-4, atol=1e-5)
    close(every, ref / ref.sum(axis=1, keepdims=True), rtol=1e-4, atol=1e-5)
    close(three, (ref - ref.max(axis=1, keepdims=True)) / ref.sum(axis=1, keepdims=True), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_stored_value_of_an_assigned_buffer_reads_the_old_values(device: str):
    # exp(t) is stored by its own kernel; the assignment that overwrites t must come after every read of it
    ((a, _),) = inputs(device, (4, 8))
    t = Tensor(a, device=device).contiguous().realize()
    e = t.exp()
    s = e.sum(axis=1, keepdim=True)
    t.assign(e / s)
    Tensor.realize(t, s)
    w = np.exp(a.astype(np.float64))
    close(s, w.sum(axis=1, keepdims=True))
    close(t, w / w.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_reduce_broadcast_back_is_two_kernels(device: str):
    ((x, tx),) = inputs(device, (4, 8))
    out = tx - tx.max(axis=1, keepdim=True)
    assert kernels(out) == 2
    close(out, x.astype(np.float64) - x.max(axis=1, keepdims=True))


@pytest.mark.parametrize("device", DEVICES)
def test_contiguous_of_lazy_expression_is_one_kernel(device: str):
    (a, ta), (b, tb) = inputs(device, (4, 8), (4, 8))
    out = (ta * tb + 1).T.contiguous()
    assert kernels(out) == 1
    close(out, (a.astype(np.float64) * b + 1).T)


@pytest.mark.parametrize("device", DEVICES)
def test_contiguous_ends_a_kernel(device: str):
    (a, ta), (b, tb) = inputs(device, (4, 8), (4, 8))
    out = (ta * tb).contiguous() + 1
    assert kernels(out) == 2
    close(out, a.astype(np.float64) * b + 1)


@pytest.mark.parametrize("device", DEVICES)
def test_reshape_of_contiguous_is_a_view_of_its_buffer(device: str):
    # realizing x.contiguous().reshape(...) computes the contiguous value once; the reshape is a view of that
    # buffer, not a second kernel that copies it (Winograd's NCHW output paid a 1 ms copy for it)
    (a, ta), (b, tb) = inputs(device, (2, 4, 8), (2, 4, 8))
    out = (ta * tb).permute(2, 0, 1).contiguous().reshape(8, 8)
    assert kernels(out) == 1
    close(out, (a.astype(np.float64) * b).transpose(2, 0, 1).reshape(8, 8))
    assert out.uop.op is Ops.RESHAPE and out.uop.src[0].op is Ops.BUFFER
    # the view reads as its own tensor afterwards, and a later write to another tensor does not reach it
    close(out.flatten() * 2, 2 * (a.astype(np.float64) * b).transpose(2, 0, 1).reshape(64))
    tb.assign(ta)
    close(out, (a.astype(np.float64) * b).transpose(2, 0, 1).reshape(8, 8))


@pytest.mark.parametrize("device", DEVICES)
def test_a_reshaped_intermediate_is_read_at_its_flat_index(device: str):
    # a kernel that reads x.contiguous().reshape(...) sees a reshape of the buffer's own view (a reshape of a
    # reshape): its index is the flat one, with no division or remainder to undo the buffer's shape (a Winograd
    # matmul that read its input like this took four times as long)
    ((a, ta),) = inputs(device, (4, 6, 2))
    out = ((ta + 1).contiguous().reshape(8, 6) * 2).sum(1)
    assert kernels_computing(Ops.IDIV, out) == 0
    assert kernels_computing(Ops.MOD, out) == 0
    close(out, ((a.astype(np.float64) + 1).reshape(8, 6) * 2).sum(1))


@pytest.mark.parametrize("device", DEVICES)
def test_the_base_of_a_realized_reshape_reads_its_buffer(device: str):
    # y = t.sum(1).reshape(...) keeps the sum's tensor alive as y's base. Realizing y fills one buffer in row-major
    # order, which holds the sum's values too: the base reads that buffer, with no kernel of its own afterwards
    ((a, ta),) = inputs(device, (4, 3, 6))
    s = ta.sum(1)
    y = s.reshape(2, 12)
    assert kernels(y) == 1
    assert kernels(s) == 0
    close(s, a.astype(np.float64).sum(1))
    # the two are still one value: a write through the view reaches the base
    y[0, :5] = 7.0
    want = a.astype(np.float64).sum(1)
    want.reshape(2, 12)[0, :5] = 7.0
    close(s, want)
    close(y, want.reshape(2, 12))


@pytest.mark.parametrize("device", DEVICES)
def test_value_used_twice_is_computed_once(device: str):
    # s feeds two outputs realized together: one kernel for the sum and at most one per consumer, 3 at most.
    # The count is a bound, not an exact number: a scheduler may write p and q from one kernel with two outputs
    # (2 kernels). The count alone cannot tell that apart from inlining the sum into each consumer (also 2), so
    # the values are checked too, and realizing s afterwards costs at most one small kernel.
    ((x, tx),) = inputs(device, (4, 8))
    s = tx.sum()
    p, q = s + 1, s * 2
    n = kernels(p, q)
    assert 1 <= n <= 3, n
    w = x.astype(np.float64).sum()
    close(p, w + 1)
    close(q, w * 2)
    GlobalCounters.reset()
    s.realize()  # its value is known already, or one more small kernel at most
    assert GlobalCounters.kernel_count <= 1
    close(s, w)


@pytest.mark.parametrize("device", DEVICES)
def test_independent_outputs_realized_together(device: str):
    (a, ta), (b, tb) = inputs(device, (4, 8), (4, 8))
    p, q = ta + 1, tb * 2
    assert 1 <= kernels(p, q) <= 2
    close(p, a.astype(np.float64) + 1)
    close(q, b.astype(np.float64) * 2)


# ---------------------------------------------------------------------------------------------------------------
# laziness: nothing runs until a value is needed, and nothing runs twice


@pytest.mark.parametrize("device", DEVICES)
def test_building_ops_launches_nothing(device: str):
    (a, ta), (b, tb) = inputs(device, (4, 8), (4, 8))
    GlobalCounters.reset()
    out = ((ta + tb) * 2).sum(axis=0).reshape(2, 4).T
    _ = out.shape, out.dtype, out.device
    assert GlobalCounters.kernel_count == 0
    close(out, ((a.astype(np.float64) + b) * 2).sum(axis=0).reshape(2, 4).T)


@pytest.mark.parametrize("device", DEVICES)
def test_realizing_a_realized_tensor_launches_nothing(device: str):
    (a, ta), (b, tb) = inputs(device, (4, 8), (4, 8))
    out = (ta + tb).realize()
    GlobalCounters.reset()
    out.realize()
    Tensor.realize(out, ta)
    out.numpy()
    out.tolist()
    assert GlobalCounters.kernel_count == 0
    close(out, a.astype(np.float64) + b)


@pytest.mark.parametrize("device", DEVICES)
def test_numpy_twice_computes_once(device: str):
    ((a, ta),) = inputs(device, (4, 8))
    out = ta * 3
    GlobalCounters.reset()
    first = out.numpy()
    n = GlobalCounters.kernel_count
    second = out.numpy()
    assert n == 1 and GlobalCounters.kernel_count == 1
    np.testing.assert_array_equal(first, second)
    np.testing.assert_array_equal(first, a * 3)


@pytest.mark.parametrize("device", DEVICES)
def test_input_copy_is_not_a_kernel(device: str):
    a = np.arange(32, dtype=np.float32).reshape(4, 8)
    b = np.ones((4, 8), np.float32)
    GlobalCounters.reset()
    out = Tensor(a, device=device) + Tensor(b, device=device)  # inputs never realized by hand
    out.realize()
    assert GlobalCounters.kernel_count == 1
    close(out, a + b)
    GlobalCounters.reset()
    t = Tensor(a, device=device).realize()
    assert GlobalCounters.kernel_count == 0
    close(t, a)


# ---------------------------------------------------------------------------------------------------------------
# bounds: kernels read and write inside their buffers only
#
# Inputs hold distinctive values (1e6 + index): an index that lands in another row, another buffer or padding
# shows up as a wrong value, and an unguarded read of freed or foreign memory as garbage (NaN, huge, zero).
# Guard buffers realized around the computation must come out unchanged: a write past a buffer's end hits them
# (the allocator may place buffers anywhere, so this catches some stray writes, never proves there are none).


def distinct(shape: tuple[int, ...]) -> np.ndarray:
    return (1_000_000 + np.arange(int(np.prod(shape)))).reshape(shape).astype(np.float32)


VIEW_CASES: list[tuple[str, tuple[int, ...], Callable[[Tensor], Tensor], Callable[[np.ndarray], np.ndarray]]] = [
    ("pad", (37, 41), lambda t: t.pad(((3, 5), (7, 2))), lambda a: np.pad(a, ((3, 5), (7, 2)))),
    (
        "pad_value",
        (37, 41),
        lambda t: t.pad(((0, 9), (4, 0)), value=-1.0),
        lambda a: np.pad(a, ((0, 9), (4, 0)), constant_values=-1),
    ),
    ("shrink", (37, 41), lambda t: t.shrink(((5, 30), (1, 40))), lambda a: a[5:30, 1:40]),
    ("shrink_last", (37, 41), lambda t: t.shrink(((36, 37), (40, 41))), lambda a: a[36:, 40:]),
    ("flip", (37, 41), lambda t: t.flip((0, 1)), lambda a: a[::-1, ::-1]),
    ("permute", (37, 41), lambda t: t.T, lambda a: a.T),
    ("expand", (1, 41), lambda t: t.expand(37, 41), lambda a: np.broadcast_to(a, (37, 41))),
    (
        "stride3",
        (1000,),
        lambda t: t.pad(((0, 2),)).reshape(334, 3).shrink((None, (1, 2))).reshape(334),
        lambda a: np.pad(a, (0, 2)).reshape(334, 3)[:, 1],
    ),
    (
        "flip_shrink_pad",
        (37, 41),
        lambda t: t.flip(0).shrink(((2, 35), (3, 39))).pad(((4, 4), (0, 6))),
        lambda a: np.pad(a[::-1][2:35, 3:39], ((4, 4), (0, 6))),
    ),
    (
        "pad_shrink_across_edges",
        (37, 41),
        lambda t: t.pad(((8, 8), (8, 8))).shrink(((3, 50), (6, 55))),
        lambda a: np.pad(a, ((8, 8), (8, 8)))[3:50, 6:55],
    ),
    (
        "permute_reshape_flip",
        (6, 35, 7),
        lambda t: t.permute(2, 0, 1).reshape(42, 35).flip(1).shrink(((1, 41), (0, 34))),
        lambda a: a.transpose(2, 0, 1).reshape(42, 35)[:, ::-1][1:41, 0:34],
    ),
    (
        "reshape_after_shrink",
        (37, 41),
        lambda t: t.shrink(((1, 37), (1, 41))).reshape(40, 36).flip(0),
        lambda a: a[1:37, 1:41].reshape(40, 36)[::-1],
    ),
]


def _assert_no_garbage(out: np.ndarray, ref: np.ndarray, lo: float, hi: float) -> None:
    assert np.all(np.isfinite(out)), "non-finite values: a read outside a buffer"
    in_range = (out == 0) | (out == -1) | ((out >= lo) & (out <= hi))
    assert np.all(in_range), f"values that no input holds: {out[~in_range][:5]}"
    np.testing.assert_array_equal(out, ref)


@pytest.mark.parametrize(("name", "shape", "t_fn", "np_fn"), VIEW_CASES, ids=[v[0] for v in VIEW_CASES])
def test_views_stay_in_bounds(name: str, shape: tuple[int, ...], t_fn: Callable, np_fn: Callable):
    a = distinct(shape)
    guard_before = Tensor(np.full(1024, 7.0, np.float32)).realize()
    t = Tensor(a).realize()
    guard_after = Tensor(np.full(1024, 7.0, np.float32)).realize()
    ref = np.array(np_fn(a))
    lo, hi = float(a.min()), float(a.max())
    _assert_no_garbage(t_fn(t).numpy(), ref, lo, hi)  # the view read out
    _assert_no_garbage((t_fn(t) + 0).numpy(), ref, lo, hi)  # the view inside a compute kernel
    _assert_no_garbage(t_fn(t).contiguous().numpy(), ref, lo, hi)
    expected_sum = ref.astype(np.float64).sum(axis=0)
    np.testing.assert_allclose(t_fn(t).sum(axis=0).numpy(), expected_sum, rtol=1e-5)
    np.testing.assert_array_equal(t_fn(t).max(axis=-1).numpy(), ref.max(axis=-1))
    np.testing.assert_array_equal(guard_before.numpy(), np.full(1024, 7.0, np.float32))
    np.testing.assert_array_equal(guard_after.numpy(), np.full(1024, 7.0, np.float32))
    np.testing.assert_array_equal(t.numpy(), a)  # the input itself is untouched


@pytest.mark.parametrize("device", DEVICES)
def test_small_views_stay_in_bounds(device: str):
    a = distinct((5, 7))
    t = Tensor(a, device=device).realize()
    lo, hi = float(a.min()), float(a.max())
    cases = [
        (t.pad(((1, 2), (3, 0))).shrink(((0, 6), (1, 10))), np.pad(a, ((1, 2), (3, 0)))[0:6, 1:10]),
        (t.flip(1).shrink(((4, 5), (0, 7))), a[4:5, ::-1]),
        (t.T.flip(0).reshape(5, 7), a.T[::-1].reshape(5, 7)),
        (t.shrink(((1, 4), (2, 6))).T.pad(((1, 1), (0, 0))), np.pad(a[1:4, 2:6].T, ((1, 1), (0, 0)))),
    ]
    for view, ref in cases:
        _assert_no_garbage(view.numpy(), np.array(ref), lo, hi)
        _assert_no_garbage((view * 1).numpy(), np.array(ref), lo, hi)


def test_view_entirely_in_padding_reads_no_garbage():
    # the view of x below is all padding: x's buffer must not be read, and b must be read from b's buffer
    x = Tensor(np.arange(1, 9, dtype=np.float32)).realize()
    b = Tensor(distinct((16,))).realize()
    p = x.pad(((4, 4),), value=-2.0)
    view = (p > 0).where(p, -b).shrink(((12, 16),))
    _assert_no_garbage(-view.numpy(), distinct((16,))[12:16], 1_000_000, 1_000_016)
    _assert_no_garbage((p + b).shrink(((0, 4),)).numpy() + 2, distinct((16,))[0:4], 1_000_000, 1_000_016)


def test_writes_stay_in_bounds():
    # outputs with odd sizes (tails for any vectorized or unrolled loop), between guards
    for n in [1, 3, 7, 17, 63, 65, 1023, 1025]:
        guard_before = Tensor(np.full(256, 7.0, np.float32)).realize()
        x = Tensor(np.arange(n, dtype=np.float32)).realize()
        guard_after = Tensor(np.full(256, 7.0, np.float32)).realize()
        out = (x * 2 + 1).realize()
        red = x.reshape(1, n).expand(3, n).sum(axis=1).realize()
        np.testing.assert_array_equal(out.numpy(), np.arange(n, dtype=np.float32) * 2 + 1)
        np.testing.assert_array_equal(red.numpy(), np.full(3, np.arange(n, dtype=np.float64).sum(), np.float32))
        np.testing.assert_array_equal(guard_before.numpy(), np.full(256, 7.0, np.float32))
        np.testing.assert_array_equal(guard_after.numpy(), np.full(256, 7.0, np.float32))
        np.testing.assert_array_equal(x.numpy(), np.arange(n, dtype=np.float32))


def test_matmul_of_views_in_bounds():
    a = distinct((37, 41)) - 1_000_000
    b = distinct((43, 29)) - 1_000_000
    ta, tb = Tensor(a).realize(), Tensor(b).realize()
    va, vb = ta.flip(0).shrink(((2, 35), (1, 40))), tb.T.shrink(((3, 27), (4, 43))).T
    ref = a[::-1][2:35, 1:40].astype(np.float64) @ b.T[3:27, 4:43].T
    np.testing.assert_allclose((va @ vb).numpy(), ref, rtol=1e-6)


def test_a_value_kept_only_for_its_gradient_is_not_computed():
    # x ** 0 is ones whose CUSTOM_GRAD keeps x as an input for the gradient (zeros); the forward pass never reads
    # x, so the reduction behind it is not a kernel
    a = np.random.default_rng(0).random((4, 30)).astype(np.float32)
    ta = Tensor(a).realize()
    out = ta.sum(1, keepdim=True) ** 0 + ta
    (grad,) = out.sum().gradient(ta)  # before out is realized (realizing replaces its graph)
    assert kernels(out) == 1
    close(out, a + 1)
    close(grad, np.ones_like(a))


@pytest.mark.parametrize("device", DEVICES)
def test_masked_gradient_broadcast_into_a_matmul_is_stored_once(device: str, monkeypatch):
    # the weight gradient g.T @ x reads relu's masked gradient broadcast over x's columns: fused, its kernel would
    # recompute the mask for every tile of columns, so it is stored first; a cheap operand (g * 2) still fuses.
    # (Small sizes, for the PYTHON device: the rule's floor on the reduction's size is lifted.)
    from zeptograd.schedule import kernelize

    monkeypatch.setattr(kernelize, "BROADCAST_MIN_WORK", 0)
    (g, tg), (h, th), (x, tx) = inputs(device, (8, 4), (8, 4), (8, 32))
    masked = (th > 0).where(tg, 0.0) + th * tg  # 3 ops, read by the matmul broadcast over 32 columns
    out = masked.T @ tx
    want = (np.where(h > 0, g, 0.0) + h * g).T.astype(np.float64) @ x
    assert kernels(masked.T @ tx) == 2
    close(out, want, rtol=1e-5, atol=1e-5)
    assert kernels((tg * 2).T @ tx) == 1
    close((tg * 2).T @ tx, (g * 2).T.astype(np.float64) @ x)
    # broadcast over fewer outputs than BROADCAST_MIN: recomputing costs less than the store
    small = (th > 0).where(tg, 0.0) + th * tg
    assert kernels(small.T @ tx[:, :4]) == 1
    close(small.T @ tx[:, :4], want[:, :4])


@pytest.mark.parametrize("k, pad", [(3, 1), (3, 0), (1, 0)])
def test_a_cheap_value_a_convolution_reads_through_its_windows_is_stored_first(k: int, pad: int, monkeypatch):
    # relu(conv(x) + b) read by a 3x3 convolution (an ONNX model's folded BatchNorm, then relu): through its padding
    # or its overlapping windows each tap reads the value again, gated, so the kernel would recompute it for every
    # tap and tile of output channels: stored first, though it costs fewer ops than BROADCAST_MIN_COST. A 1x1
    # convolution reads it once per tile of channels, as a matmul: it stays fused there. (Small sizes: the rule's
    # floor on the reduction's size is lifted.)
    from zeptograd.schedule import kernelize

    monkeypatch.setattr(kernelize, "BROADCAST_MIN_WORK", 0)
    (x, tx), (w, tw), (b, tb), (v, tv) = inputs("CPU", (1, 4, 6, 6), (8, 4, 3, 3), (8,), (8, 8, k, k), seed=5)
    hidden = tx.conv2d(tw, tb, padding=1).relu()
    out = hidden.conv2d(tv, padding=pad)
    items, _ = create_schedule([out.uop], ["CPU"], device_facts)
    last = items[-1].ast
    assert any(u.op is Ops.REDUCE for u in last.toposort())
    assert any(u.op is Ops.MAX for u in last.toposort()) == (k == 1)  # the relu recomputed in the last kernel

    def conv(a: np.ndarray, f: np.ndarray, p: int) -> np.ndarray:
        a = np.pad(a.astype(np.float64), ((0, 0), (0, 0), (p, p), (p, p)))
        windows = np.lib.stride_tricks.sliding_window_view(a, f.shape[2:], (2, 3))
        return np.einsum("ncyxij,ocij->noyx", windows, f)

    want = conv(np.maximum(conv(x, w, 1) + b.reshape(1, -1, 1, 1), 0), v, pad)
    close(out, want, rtol=1e-4, atol=1e-4)


def test_a_gather_from_a_large_table_stays_one_kernel():
    # t[idx] is a one-hot sum whose reduction folds away (codegen/closedform.py): its index, normalized by a few
    # ops and broadcast over the table, is not a matmul operand and is not stored first
    rng = np.random.default_rng(3)
    t = rng.standard_normal((1000, 64)).astype(np.float32)
    idx = rng.integers(-1000, 1000, 32).astype(np.int32)
    tt, ti = Tensor(t).realize(), Tensor(idx).realize()
    assert kernels(tt[ti]) == 1
    close(tt[ti], t[idx])


GATHERS = {
    # name: (zeptograd's gather on table t and indices i, numpy's)
    "t[i] rows": (lambda t, i: t[i], lambda t, i: t[i]),
    "t[:, i] columns": (lambda t, i: t[:, i % 64], lambda t, i: t[:, i % 64]),
    "t.flatten()[i]": (lambda t, i: t.flatten()[i], lambda t, i: t.reshape(-1)[i]),
    "gather(0, ...)": (
        lambda t, i: t.gather(0, (i % 64).reshape(-1, 1).expand(-1, 3).cast(dtypes.int32)),
        lambda t, i: np.take_along_axis(t[:, :3], np.repeat((i % 64).reshape(-1, 1), 3, 1), 0),
    ),
    "Embedding": (None, lambda t, i: t[i]),
    # int8 rows summed in int32: the sum of a cast pick is a pick of the cast
    "int8 t[i]": (lambda t, i: t.cast(dtypes.int8)[i], lambda t, i: t.astype(np.int8)[i]),
}


@pytest.mark.parametrize("name", GATHERS)
def test_a_gather_reads_the_picked_element_without_a_loop_over_the_table(name: str):
    # the one-hot sum over the table's rows (`(i == arange(n)).where(t, 0).sum()`) folds to a read at i
    # (codegen/closedform.py): no kernel keeps a reduction over the table; negative indices count from the end
    from zeptograd.codegen.closedform import fold_closed_forms
    from zeptograd.nn import Embedding

    rng = np.random.default_rng(7)
    t = rng.standard_normal((5000, 64)).astype(np.float32)
    idx = rng.integers(-5000, 5000, 40).astype(np.int32)
    idx[:3] = [0, 4999, -1]
    ours, theirs = GATHERS[name]
    if name == "Embedding":
        emb = Embedding(5000, 64)
        emb.weight.assign(Tensor(t)).realize()
        idx = np.abs(idx)
        out = emb(Tensor(idx))
    else:
        out = ours(Tensor(t).realize(), Tensor(idx).realize())
    items, _ = create_schedule([out.uop], ["CPU"], device_facts)
    assert not any(u.op is Ops.REDUCE for item in items for u in fold_closed_forms(item.ast).toposort())
    np.testing.assert_array_equal(out.numpy(), theirs(t, idx))


def _table_grads(name: str, rng: np.random.Generator, cols: int = 50) -> tuple[Tensor, np.ndarray]:
    """(zeptograd's lazy gradient of a gather of (6, cols) rows from a (3000, 8) table, np.add.at's sum of the same
    rows)."""
    from zeptograd.nn import Embedding

    table = rng.standard_normal((3000, 8)).astype(np.float32)
    idx = rng.integers(-3000, 3000, (6, cols))
    idx[0, :6] = [5, 5, 5, -1, 2999, 4000]  # repeats, a negative index, one out of range
    g = rng.standard_normal((6, cols, 8)).astype(np.float32)
    rows = np.where(idx < 0, idx + 3000, idx)
    inside = (rows >= 0) & (rows < 3000)
    want = np.zeros_like(table)
    np.add.at(want, rows[inside], g[inside])
    if name == "Embedding":
        emb = Embedding(3000, 8)
        emb.weight.assign(Tensor(table)).realize()
        np.add.at(want := np.zeros_like(table), np.abs(idx) % 3000, g)
        emb(Tensor((np.abs(idx) % 3000).astype(np.int32))).backward(Tensor(g))
        return emb.weight.grad, want
    t = Tensor(table, requires_grad=True)
    t[Tensor(idx.astype(np.int32))].backward(Tensor(g))
    return t.grad, want


@pytest.mark.parametrize("cols", [50, 3000])
@pytest.mark.parametrize("name", ["Embedding", "t[idx]"])
def test_the_gradient_of_a_gather_is_a_scatter_not_a_loop_over_the_table(name: str, cols: int):
    # dW[r] = sum over b of where(idx[b] == r, g[b], 0) runs as zeros, then one pass over b adding g[b] into row
    # idx[b] (closedform.scatter_form): no kernel keeps a reduction, and the sum's order is b's, so the result is
    # np.add.at's bit for bit (repeated indices, a negative one and one out of range included). 18000 indices are
    # more than a float sum adds in one stage (SPLIT_SUM): the gradient's sum is still one (gradient._sum_to)
    from zeptograd.codegen.closedform import fold_closed_forms, scatters
    from zeptograd.mixin.reduce import SPLIT_SUM

    assert cols < SPLIT_SUM < 6 * 3000
    grad, want = _table_grads(name, np.random.default_rng(9), cols)
    items, _ = create_schedule([grad.uop], ["CPU"], device_facts)
    asts = [fold_closed_forms(item.ast) for item in items if item.ast is not None]
    assert not any(u.op is Ops.REDUCE for ast in asts for u in ast.toposort())
    assert sum(scatters(ast) for ast in asts) == 1
    np.testing.assert_array_equal(grad.numpy(), want)


def test_setitem_through_an_index_tensor_is_a_scatter_not_a_loop_over_the_table():
    # x[idx] = v: for each position, the last b writing it is a maximum over the picks that hit it, a scatter of each
    # b to its position (from the least int32, max's identity); then the picked values are read at that b
    from zeptograd.codegen.closedform import fold_closed_forms, scatters

    rng = np.random.default_rng(12)
    a = rng.standard_normal(5000).astype(np.float32)
    idx = rng.integers(-5000, 5000, 300)
    idx[:4] = [7, 7, -1, 4999]  # a repeated index (the last write wins, as numpy's), a negative one
    v = rng.standard_normal(300).astype(np.float32)
    t = Tensor(a.copy()).realize()
    t[Tensor(idx.astype(np.int32))] = Tensor(v)
    items, _ = create_schedule([t.uop], ["CPU"], device_facts)
    asts = [fold_closed_forms(item.ast) for item in items if item.ast is not None]
    assert not any(u.op is Ops.REDUCE for ast in asts for u in ast.toposort())
    assert sum(scatters(ast) for ast in asts) == 1
    want = a.copy()
    want[idx] = v
    np.testing.assert_array_equal(t.numpy(), want)


def test_a_scatter_runs_its_loops_in_order():
    # two b that pick one row must add one after the other: the scatter takes no plan, and refuses one
    from zeptograd.codegen import get_program
    from zeptograd.codegen.closedform import scatters
    from zeptograd.codegen.opt import Opt, OptError, OptOps, apply_opts
    from zeptograd.runtime.device import Device

    grad, _ = _table_grads("t[idx]", np.random.default_rng(10))
    items, _ = create_schedule([grad.uop], ["CPU"], device_facts)
    (scatter,) = (item.ast for item in items if item.ast is not None and scatters(item.ast))
    with pytest.raises(OptError, match="scatter"):
        apply_opts(scatter, [Opt(OptOps.THREAD, 0, 2)])
    program = get_program(scatter, Device["CPU"].renderer)  # the default plan: none, on one core
    assert program.opts == () and program.chunks == 1


def test_a_device_that_launches_loops_in_parallel_keeps_the_one_hot_sum(monkeypatch):
    # on a GPU-style device the scatter's loops would be work-items racing on a repeated index: no scatter there
    from zeptograd.engine import realize

    def launches_in_parallel(device: str) -> DeviceFacts:
        return device_facts(device)._replace(runs_in_order=False)

    monkeypatch.setattr(realize, "device_facts", launches_in_parallel)
    grad, want = _table_grads("t[idx]", np.random.default_rng(11))
    items, _ = create_schedule([grad.uop], ["CPU"], launches_in_parallel)
    assert any(u.op is Ops.REDUCE for item in items if item.ast is not None for u in item.ast.toposort())
    np.testing.assert_allclose(grad.numpy(), want, rtol=1e-6, atol=1e-6)


SELECTIONS = {
    # name: (zeptograd's selection from x by mask m, numpy's)
    "masked_select": (lambda x, m: x.masked_select(m), lambda a, m: a[m]),
    "masked_select int8": (lambda x, m: x.cast(dtypes.int8).masked_select(m), lambda a, m: a.astype(np.int8)[m]),
    "nonzero": (lambda x, m: m.nonzero(), lambda a, m: np.argwhere(m)),
    "1-d nonzero of a comparison": (
        lambda x, m: (x.flatten() > 0).nonzero(),
        lambda a, m: np.argwhere(a.flatten() > 0),
    ),
    "x[mask]": (lambda x, m: x[m], lambda a, m: a[m]),
    "x[mask] = -x[mask]": (lambda x, m: x.__setitem__(m, -x[m]) or x, lambda a, m: np.where(m, -a, a)),
}


@pytest.mark.parametrize("name", SELECTIONS)
def test_a_selection_by_a_mask_is_a_scatter_not_a_loop_over_the_selected_and_the_mask(name: str):
    # the k-th selected element is the one whose running count of the mask is k: a one-hot sum over the mask's n
    # elements for each of the ~n/2 selected, O(n**2) (10**6 elements: 25 s). Stored on its own it is a scatter of
    # each element to its count (closedform.scatter_form), and no kernel visits more than the running count's
    # blocks do (n x SCAN_BLOCK, the last block padded)
    from zeptograd.codegen.closedform import fold_closed_forms
    from zeptograd.mixin.reduce import SCAN_BLOCK

    rng = np.random.default_rng(13)
    a = rng.standard_normal((100, 200)).astype(np.float32)
    m = rng.random((100, 200)) < 0.5
    m[0, :3] = [True, False, True]
    out = SELECTIONS[name][0](Tensor(a).realize(), Tensor(m).realize())
    items, _ = create_schedule([out.uop], ["CPU"], device_facts)
    asts = [fold_closed_forms(i.ast) for i in items if i.ast is not None]
    assert (
        max(math.prod(u.src[0].arg for u in ast.toposort() if u.op is Ops.RANGE) for ast in asts)
        < 2 * a.size * SCAN_BLOCK
    )
    np.testing.assert_array_equal(out.numpy(), SELECTIONS[name][1](a, m))


@pytest.mark.parametrize("name", ["masked_select", "x[mask]"])
def test_the_gradient_of_a_long_selection_is_a_pick_not_a_loop_over_the_selected(name: str):
    # d x[i] = sum over k of where(pos[i] == k, g[k], 0): one k at most, a read of g at pos[i] when the sum is one
    # stage; over more selected elements than a float sum adds in one stage (SPLIT_SUM) it was two, a loop over
    # (k, i) pairs (2^17 elements: 12 s), and the forward's count was stored, so its scatter was a loop too
    from zeptograd.codegen.closedform import fold_closed_forms
    from zeptograd.mixin.reduce import SCAN_BLOCK, SPLIT_SUM

    rng = np.random.default_rng(15)
    a = rng.standard_normal(1 << 16).astype(np.float32)
    assert (a > 0).sum() > SPLIT_SUM
    x = Tensor(a, requires_grad=True)
    y = x.masked_select(x > 0) if name == "masked_select" else x[x > 0]
    (y * y).sum().backward()
    items, _ = create_schedule([x.grad.uop], ["CPU"], device_facts)
    asts = [fold_closed_forms(i.ast) for i in items if i.ast is not None]
    assert (
        max(math.prod(u.src[0].arg for u in ast.toposort() if u.op is Ops.RANGE) for ast in asts)
        < 2 * a.size * SCAN_BLOCK
    )
    np.testing.assert_array_equal(x.grad.numpy(), np.where(a > 0, 2 * a, 0))


@pytest.mark.parametrize("reduce", ["sum", "mean", "prod", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_is_a_scatter_not_a_loop_over_positions_and_indices(reduce: str, include_self: bool):
    # what each position receives (a sum, a count, a product, a maximum) is a one-hot reduction over the index for
    # every position; stored on its own it runs as a scatter in index order, as torch's CPU scatter_reduce does: bit
    # for bit without self (a product's rounding too), and a maximum or minimum always
    torch = pytest.importorskip("torch")

    from zeptograd.codegen.closedform import fold_closed_forms, scatters

    rng = np.random.default_rng(14)
    n, m = 20000, 3000
    idx = rng.integers(0, m, (n, 2))
    src = rng.standard_normal((n, 2)).astype(np.float32)
    if reduce == "prod":  # about 7 factors a position: near 1, so that a product neither overflows nor vanishes
        src = (1 + src / 8).astype(np.float32)
    base = rng.standard_normal((m, 2)).astype(np.float32)
    out = Tensor(base).scatter_reduce(0, Tensor(idx.astype(np.int32)), Tensor(src), reduce, include_self=include_self)
    items, _ = create_schedule([out.uop], ["CPU"], device_facts)
    asts = [fold_closed_forms(i.ast) for i in items if i.ast is not None]
    assert max(math.prod(u.src[0].arg for u in ast.toposort() if u.op is Ops.RANGE) for ast in asts) <= 2 * n * 2
    assert sum(scatters(ast) for ast in asts) >= 1
    want = torch.tensor(base).scatter_reduce(0, torch.tensor(idx), torch.tensor(src), reduce, include_self=include_self)
    if reduce in ("amax", "amin") or (reduce in ("sum", "prod") and not include_self):
        np.testing.assert_array_equal(out.numpy(), want.numpy())
    else:
        np.testing.assert_allclose(out.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)


def test_a_count_past_a_stored_value_is_not_stored():
    # arange is a count of ones that codegen folds to r + c; read through a buffer (the CONTIGUOUS), what comes
    # after it (a strided reshape into a reduction) cannot stop that fold, so the count is no kernel of its own
    t = (Tensor.arange(1000) * 2).contiguous().reshape(10, 100)[:, ::2].sum(1)
    assert kernels(t) == 2
    np.testing.assert_array_equal(t.numpy(), (np.arange(1000) * 2).reshape(10, 100)[:, ::2].sum(1))


def test_nll_loss_over_many_classes_picks_without_a_loop_over_them():
    # 30000 classes (a language model's vocabulary) is past the two-stage float sum: the pick still folds
    torch = pytest.importorskip("torch")

    from zeptograd.codegen.closedform import fold_closed_forms

    rng = np.random.default_rng(8)
    x = rng.standard_normal((16, 30000)).astype(np.float32)
    y = rng.integers(0, 30000, 16)
    y[0] = -100  # an ignored target picks nothing
    lp = Tensor(x).log_softmax(1).realize()
    out = lp.nll_loss(Tensor(y.astype(np.int32)), reduction="none")
    items, _ = create_schedule([out.uop], ["CPU"], device_facts)
    assert not any(u.op is Ops.REDUCE for item in items for u in fold_closed_forms(item.ast).toposort())
    want = torch.nn.functional.nll_loss(torch.tensor(lp.numpy()), torch.tensor(y), reduction="none")
    np.testing.assert_allclose(out.numpy(), want.numpy(), rtol=1e-6, atol=0)


def test_masked_gradient_of_a_reduction_is_stored_by_that_reduction(monkeypatch):
    # the MLP's case: the relu's input (x @ w1 + b) and the gradient below it (dh = g2 @ w2) are both matmuls; the
    # mask is applied in dh's kernel, on its output, and the weight gradient only loads the masked values (it
    # recomputed the mask for every tile, when the reductions the mask reads were not counted as its inputs)
    from zeptograd.schedule import kernelize

    monkeypatch.setattr(kernelize, "BROADCAST_MIN_WORK", 0)
    (x, tx), (w1, tw1), (b, tb), (g2, tg2), (w2, tw2) = inputs("CPU", (8, 32), (32, 4), (4,), (8, 3), (3, 4))
    pre = tx @ tw1 + tb
    masked = (pre > 0).where(tg2 @ tw2, 0.0)
    out = masked.T @ tx
    items, _ = create_schedule([out.uop], ["CPU"], device_facts)
    assert not any(u.op is Ops.CMPLT for u in items[-1].ast.toposort())
    want_pre = x.astype(np.float64) @ w1 + b
    close(out, np.where(want_pre > 0, g2.astype(np.float64) @ w2, 0.0).T @ x, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_a_normalized_activation_read_by_a_padded_convolution_is_stored_once(activation: str, monkeypatch):
    # conv -> BatchNorm (eval: a square root per channel) -> relu/gelu -> conv: the second convolution reads the
    # activation padded and windowed, through the activation's stated derivative (CUSTOM_GRAD); fused, every one of
    # its output channels would recompute the normalization, so the activation is stored and the convolution loads it
    torch = pytest.importorskip("torch")
    from zeptograd.schedule import kernelize

    monkeypatch.setattr(kernelize, "BROADCAST_MIN_WORK", 0)
    (x, tx), (w1, tw1), (w2, tw2), (var, tvar), (mean, tmean) = inputs(
        "CPU", (2, 3, 6, 6), (8, 3, 3, 3), (16, 8, 3, 3), (8,), (8,)
    )
    var = np.abs(var)
    tvar = Tensor(var).realize()
    h = tx.conv2d(tw1, padding=1)
    normed = (h - tmean.reshape(1, -1, 1, 1)) / (tvar.reshape(1, -1, 1, 1) + 1e-5).sqrt()
    out = getattr(normed, activation)().conv2d(tw2, padding=1)
    items, _ = create_schedule([out.uop], ["CPU"], device_facts)
    assert not any(u.op is Ops.SQRT for u in items[-1].ast.toposort()), "the last convolution recomputes the norm"
    th = torch.nn.functional.conv2d(
        torch.tensor(x, dtype=torch.float64), torch.tensor(w1, dtype=torch.float64), padding=1
    )
    tn = (th - torch.tensor(mean, dtype=torch.float64).reshape(1, -1, 1, 1)) / torch.sqrt(
        torch.tensor(var, dtype=torch.float64).reshape(1, -1, 1, 1) + 1e-5
    )
    act = torch.relu(tn) if activation == "relu" else torch.nn.functional.gelu(tn, approximate="tanh")
    want = torch.nn.functional.conv2d(act, torch.tensor(w2, dtype=torch.float64), padding=1)
    close(out, want.numpy(), rtol=1e-4, atol=1e-4)


def test_a_residual_block_output_read_by_strided_convolutions_is_stored_in_training():
    # a ResNet block's output relu(bn(conv(x)) + x) is read by the next block's strided convolution and its 1x1
    # downsample, and by both of their weight gradients: stored for its many readers, it is still stored when the
    # producers below it are (it was un-stored as cheap, and every convolution recomputed BatchNorm for each
    # output channel). No kernel that sums a product computes a relu (MAX), and the gradients match torch's
    torch = pytest.importorskip("torch")
    from zeptograd import nn

    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 32, 16, 16)).astype(np.float32)
    w1 = (rng.standard_normal((32, 32, 3, 3)) * 0.1).astype(np.float32)
    w2 = (rng.standard_normal((64, 32, 3, 3)) * 0.1).astype(np.float32)
    wd = (rng.standard_normal((64, 32, 1, 1)) * 0.1).astype(np.float32)
    tw1, tw2, twd = (Tensor(w, requires_grad=True) for w in (w1, w2, wd))
    bn = nn.BatchNorm2d(32)
    with Tensor.train():
        h = (bn(Tensor(x).conv2d(tw1, padding=1)) + Tensor(x)).relu()
        loss = (h.conv2d(tw2, stride=2, padding=1) * h.conv2d(twd, stride=2)).sum()
        loss.backward()
        grads = [t.grad for t in (tw1, tw2, twd)]
        items, _ = create_schedule([g.uop for g in grads], ["CPU"] * 3, device_facts)
    for item in items:
        ops = {u.op for u in item.ast.toposort()}
        assert not (Ops.REDUCE in ops and Ops.MAX in ops), "a convolution recomputes the block's output"
    p1, p2, pd = (torch.tensor(w, dtype=torch.float64, requires_grad=True) for w in (w1, w2, wd))
    tx = torch.tensor(x, dtype=torch.float64)
    th = torch.relu(
        torch.nn.functional.batch_norm(torch.nn.functional.conv2d(tx, p1, padding=1), None, None, training=True) + tx
    )
    tloss = (
        torch.nn.functional.conv2d(th, p2, stride=2, padding=1) * torch.nn.functional.conv2d(th, pd, stride=2)
    ).sum()
    tloss.backward()
    for got, want in zip(grads, (p1, p2, pd)):
        np.testing.assert_allclose(got.numpy(), want.grad.numpy(), rtol=1e-3, atol=1e-3)


def _step_kernels(model: str, n_layers: int) -> tuple[int, int]:
    """The kernels of a training step's gradients (forward and backward) of the suite's `model` with `n_layers`
    blocks, and the most nodes any one kernel's AST has."""
    from zeptograd.models.gpt import GPT, GPTConfig
    from zeptograd.models.llama import Llama, LlamaConfig
    from zeptograd.nn.state import get_parameters

    rng = np.random.default_rng(0)
    tokens = Tensor(rng.integers(0, 64, (2, 16)).astype(np.int32))
    targets = Tensor(rng.integers(0, 64, (2, 16)).astype(np.int32))
    if model == "gpt":
        net = GPT(GPTConfig(vocab_size=64, context=16, d_model=32, n_heads=2, n_layers=n_layers))
    else:
        net = Llama(LlamaConfig(vocab_size=64, dim=32, n_layers=n_layers, n_heads=4, n_kv_heads=2, multiple_of=32))
    params = get_parameters(net)
    Tensor.realize(*params)
    loss = net(tokens).sparse_categorical_crossentropy(targets)
    roots = [loss.uop, *(g.uop for g in loss.gradient(*params))]
    items, _ = create_schedule(roots, ["CPU"] * len(roots), device_facts)
    asts = [item.ast for item in items if item.ast is not None]
    return len(asts), max(len(ast.toposort()) for ast in asts)


@pytest.mark.parametrize("model", ["gpt", "llama"])
def test_no_kernel_of_a_transformer_step_grows_with_its_depth(model):
    """No kernel of a training step is larger with 8 blocks than with 1: nothing of an earlier block is recomputed in
    a later one's kernels."""
    one, eight = _step_kernels(model, 1), _step_kernels(model, 8)
    assert eight[1] <= one[1], (one, eight)


def test_a_gpt_step_adds_the_same_kernels_with_each_block():
    """Past the first block (which reads the embeddings), every block adds the same number of kernels to a GPT's
    training step: 2, 4 and 8 blocks lie on one line."""
    counts = {n: _step_kernels("gpt", n)[0] for n in (2, 4, 8)}
    per_block = (counts[4] - counts[2]) // 2
    assert per_block > 0 and counts == {n: counts[2] + (n - 2) * per_block for n in (2, 4, 8)}, counts


def _pairs_rotated(y: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Each pair (y[..., 2i], y[..., 2i + 1]) rotated: both outputs of a pair read both of its inputs."""
    pairs = y.reshape(*y.shape[:-1], y.shape[-1] // 2, 2)
    re, im = pairs[..., 0], pairs[..., 1]
    return Tensor.stack(re * cos - im * sin, re * sin + im * cos, dim=-1).reshape(y.shape)


def test_matmul_read_as_pairs_is_stored_once():
    # fused, each output of a pair would compute both dot products of the pair: every dot product twice
    (x, xt), (w, wt), (c, ct), (s, st) = inputs("CPU", (3, 64), (128, 64), (64,), (64,))
    out = _pairs_rotated(xt @ wt.T, ct, st)
    assert kernels_computing(Ops.REDUCE, out) == 1
    assert kernels(out) == 2  # the product, then the rotation reading it
    y = (x @ w.T).reshape(3, 64, 2)
    ref = np.stack([y[..., 0] * c - y[..., 1] * s, y[..., 0] * s + y[..., 1] * c], axis=-1).reshape(3, 128)
    close(out, ref, rtol=1e-4, atol=1e-4)


def test_matmul_split_into_parts_stays_fused():
    # q, k and v windows of one product each read their own part: every dot product once, so nothing is stored
    (x, xt), (w, wt) = inputs("CPU", (4, 32), (96, 32))
    q, k, v = (xt @ wt.T).split(32, dim=-1)
    out = q * k + v
    assert kernels(out) == 1
    y = x @ w.T
    close(out, y[:, :32] * y[:, 32:64] + y[:, 64:], rtol=1e-4, atol=1e-4)
