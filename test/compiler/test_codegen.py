"""Codegen, renderer and runtime: hand-built kernels run on both devices and are checked against Python;
the linear program has the shape docs/internals.md describes; compiled kernels are cached; DEBUG prints."""

from __future__ import annotations

import gc
import subprocess
import sys

import numpy as np
import pytest

from zeptograd import Context, Device, GlobalCounters, Tensor
from zeptograd.codegen import full_rewrite, get_program
from zeptograd.codegen.lowering import index_dtype_for
from zeptograd.dtype import dtypes
from zeptograd.engine.realize import run_schedule
from zeptograd.runtime.buffer import buffer_for
from zeptograd.runtime.ops_cpu import CCompiler
from zeptograd.schedule.kernelize import ScheduleItem
from zeptograd.uop import Ops, UOp
from zeptograd.uop.buffers import new_buffer
from zeptograd.uop.spec import SpecError

DEVICES = ["CPU", "PYTHON"]


def idx(v: int) -> UOp:
    return UOp.const(dtypes.index, v)


def run_kernel(device: str, body_fn, out_dtype, n_out: int, init: np.ndarray) -> np.ndarray:
    """Build a kernel with `body_fn(out_ptr) -> sink`, run it on a buffer filled with `init`, return it."""
    out = new_buffer(device, n_out, out_dtype)
    buffer_for(out).copyin(init)
    ptr = UOp(Ops.DEFINE_GLOBAL, out_dtype.ptr(n_out), (), 0)
    ast = body_fn(ptr).replace(arg="test_kernel")
    run_schedule([ScheduleItem(ast, (out,))])
    return buffer_for(out).numpy()


@pytest.mark.parametrize("device", DEVICES)
def test_gated_store_becomes_if_store_endif(device: str):
    def body(ptr):
        r = UOp.range(8, 0)
        store = ptr.index(r, r < 5).store(r.cast(dtypes.float32) * 2.0)
        return UOp(Ops.END, dtypes.void, (store, r)).sink()

    got = run_kernel(device, body, dtypes.float32, 8, np.full(8, -1.0, np.float32))
    np.testing.assert_array_equal(got, [0, 2, 4, 6, 8, -1, -1, -1])
    ast = body(UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(8), (), 0)).replace(arg="k")
    program = full_rewrite(ast)
    ops = [u.op for u in program]
    assert ops.index(Ops.IF) < ops.index(Ops.STORE) < ops.index(Ops.ENDIF) < ops.index(Ops.END)
    if device == "CPU":
        assert "if (" in get_program(ast, Device["CPU"].renderer).src


@pytest.mark.parametrize("device", DEVICES)
def test_gates_the_ranges_decide_are_dropped(device: str):
    # store gate r < 8 over r in [0, 8) is always true; load gate r < 5 over [5, 8) is always false
    def body(ptr):
        r = UOp.range(3, 0)
        j = r + 5
        loaded = ptr.index(j, j < 5).load(UOp.const(dtypes.float32, 7.0))
        store = ptr.index(j, j < 8).store(loaded + 1.0)
        return UOp(Ops.END, dtypes.void, (store, r)).sink()

    got = run_kernel(device, body, dtypes.float32, 8, np.zeros(8, np.float32))
    np.testing.assert_array_equal(got, [0, 0, 0, 0, 0, 8, 8, 8])
    program = full_rewrite(body(UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(8), (), 0)).replace(arg="k"))
    ops = [u.op for u in program]
    assert Ops.IF not in ops and Ops.LOAD not in ops
    assert all(len(u.src) == 2 for u in program if u.op is Ops.INDEX)


@pytest.mark.parametrize("device", DEVICES)
def test_floor_division_of_negative_values(device: str):
    # (i - 4) // 3 and (i - 4) % 3 with i in [0, 9): the operands go negative, so C's / and % are not enough
    def body(ptr):
        r = UOp.range(9, 0)
        v = r - 4
        s1 = ptr.index(r).store((v // 3).cast(dtypes.int32))
        s2 = ptr.index(r + 9).store((v % 3).cast(dtypes.int32))
        return UOp(Ops.END, dtypes.void, (UOp(Ops.GROUP, dtypes.void, (s1, s2)), r)).sink()

    got = run_kernel(device, body, dtypes.int32, 18, np.zeros(18, np.int32))
    expected = [(i - 4) // 3 for i in range(9)] + [(i - 4) % 3 for i in range(9)]
    assert got.tolist() == expected


def test_sum_lowers_to_a_register_accumulator():
    x = Tensor(np.arange(12, dtype=np.float32).reshape(3, 4)).realize()
    from zeptograd.schedule.kernelize import create_schedule

    items, _ = create_schedule([x.sum(axis=1).uop], ["CPU"])
    (item,) = items
    assert any(u.op is Ops.REDUCE for u in item.ast.toposort())
    program = full_rewrite(item.ast)
    ops = [u.op for u in program]
    assert Ops.REDUCE not in ops and Ops.DEFINE_REG in ops and Ops.AFTER in ops
    assert ops.count(Ops.RANGE) == ops.count(Ops.END) == 2
    with Context(NOOPT=1):  # the plain scalar kernel; optimized kernels are tested in test_opt.py
        src = get_program(item.ast, Device["CPU"].renderer).src
    assert "float acc0[1];" in src and "for (int32_t ridx0 = 0; ridx0 < 3; ridx0++) {" in src


def test_stage_specs_are_checked_at_the_boundaries():
    ptr = UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(4), (), 0)
    bad = UOp(Ops.RESHAPE, dtypes.float32, (ptr.index(idx(0)).load(),), (1,))  # a movement op in a kernel
    with Context(SPEC=1), pytest.raises(SpecError, match="kernel AST"):
        full_rewrite(ptr.index(idx(0)).store(bad).sink())


def test_index_dtype_is_committed_from_the_ranges():
    assert index_dtype_for((UOp.range(1 << 20, 0) * 1024).sink()) is dtypes.int32
    assert index_dtype_for((UOp.range(1 << 22, 0) * 1024).sink()) is dtypes.int64


def test_compiled_kernels_are_cached_on_disk(tmp_path, monkeypatch):
    monkeypatch.setenv("ZEPTOGRAD_CACHE_DIR", str(tmp_path))
    src = "void k(float* restrict data0) { data0[0] = 42.0f; }\n"
    first = CCompiler()
    first.library(src)
    files = list(tmp_path.glob("kernel_*.so"))
    assert len(files) == 1 and first.key(src) in files[0].name
    # a second compiler (a new process, say) loads it from disk: a broken CC proves nothing is recompiled
    monkeypatch.setenv("CC", "/nonexistent/cc")
    second = CCompiler()
    second.cc = first.cc  # the same key as the first one's: only the file on disk can satisfy it
    monkeypatch.setattr("subprocess.run", lambda *a, **k: pytest.fail("recompiled a cached kernel"))
    assert second.library(src)["k"] is not None
    # a different source gets a different file
    monkeypatch.undo()
    monkeypatch.setenv("ZEPTOGRAD_CACHE_DIR", str(tmp_path))
    CCompiler().library(src.replace("42.0f", "43.0f"))
    assert len(list(tmp_path.glob("kernel_*.so"))) == 2


def test_debug_levels_print_kernels(capfd):
    a = Tensor(np.arange(6, dtype=np.float32)).realize()
    with Context(DEBUG=2):
        (a * 3.5 + 17.25).realize()
    line = capfd.readouterr().out
    assert "E_6" in line and "GFLOP/s" in line and "GB/s" in line and " us " in line
    with Context(DEBUG=5):
        (a * 4.5).maximum(18.25).realize()  # a kernel of a structure not compiled before (engine/constants.py)
    out = capfd.readouterr().out
    assert "void E_6(float* restrict data0, const float* restrict data1)" in out
    assert "RANGE" in out and "DEFINE_GLOBAL" in out  # the linear program's listing


def test_device_from_environment():
    code = "from zeptograd import Tensor; t = Tensor([1.0, 2.0]) * 2; print(t.device, t.tolist())"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env={"DEVICE": "PYTHON"}
    ).stdout
    assert out.strip() == "PYTHON [2.0, 4.0]"


def test_default_device_switch():
    saved = Device.DEFAULT
    try:
        Device.DEFAULT = "python"
        assert Tensor([1.0]).device == "PYTHON"
    finally:
        Device.DEFAULT = saved
    with pytest.raises(ValueError, match="unknown device 'GPU9'"):
        Tensor([1.0], device="GPU9")


def test_copy_between_devices_is_not_a_kernel():
    a = Tensor(np.arange(5, dtype=np.float32)).realize()
    GlobalCounters.reset()
    b = a.to("PYTHON").realize()
    assert GlobalCounters.kernel_count == 0 and b.device == "PYTHON"
    assert (b * 2).to("CPU").tolist() == [0.0, 2.0, 4.0, 6.0, 8.0]


@pytest.mark.no_roundtrip  # the round-trip check records (and so keeps alive) every node a test builds
def test_intermediate_buffers_are_freed():
    x = Tensor(np.random.default_rng(0).standard_normal((64, 64), dtype=np.float32)).realize()
    gc.collect()
    before = GlobalCounters.mem_used
    m = x.max(axis=1, keepdim=True)
    e = (x - m).exp2()
    out = (e / e.sum(axis=1, keepdim=True)).realize()
    del m, e
    gc.collect()
    # only the result stays: the max and the sum were intermediate buffers of the schedule
    assert GlobalCounters.mem_used - before == out.numel() * 4


def test_python_device_checks_every_access():
    # the reference device is also a bounds checker: an index outside the buffer raises, a negative one too
    def body(ptr):
        r = UOp.range(4, 0)
        return UOp(Ops.END, dtypes.void, (ptr.index(r - 1).store(UOp.const(dtypes.float32, 1.0)), r)).sink()

    with pytest.raises(IndexError, match="element -1 of a buffer of 4"):
        run_kernel("PYTHON", body, dtypes.float32, 4, np.zeros(4, np.float32))


def test_reads_wholly_in_padding_keep_the_other_buffers_in_place():
    # the padded read folds away with its buffer; the remaining arguments must be renumbered
    a = Tensor(np.array([-8.0, -3.0], np.float32))
    b = Tensor(np.array([3.0, 4.0], np.float32))
    assert (a.pad(((0, 2),)).shrink(((2, 4),)) + b).tolist() == [3.0, 4.0]


def test_unsupported_dtype_is_refused_at_the_call():
    with pytest.raises(TypeError, match="cast: there are no dtypes.void tensors"):
        Tensor([1.0]).cast("void")
    with pytest.raises(TypeError, match="full: there are no dtypes.index tensors"):
        Tensor.full((2,), 1.0, dtype="index")


@pytest.mark.parametrize("form", ["k < r + y", "r + y < k"])
def test_closed_form_count_matches_brute_force(form: str) -> None:
    # sum over r in [0, n) of where(cond, v, 0) folds to v * count: evaluated at every i, against counting by hand
    from zeptograd.codegen.closedform import fold_closed_forms

    rng = np.random.default_rng(5)
    for _ in range(20):
        n, size = int(rng.integers(1, 9)), int(rng.integers(1, 7))
        k, shift = int(rng.integers(-12, 13)), int(rng.integers(-6, 7))
        i, r = UOp.range(size, 0), UOp.range(n, 1)
        y = i + shift
        cond = UOp.const(dtypes.index, k).lt(r + y) if form == "k < r + y" else (r + y).lt(k)
        total = UOp(Ops.REDUCE, dtypes.int32, (cond.where(UOp.const(dtypes.int32, 3), 0), r), Ops.ADD)
        folded = fold_closed_forms(total)
        assert not any(u.op is Ops.REDUCE for u in folded.toposort())
        for iv in range(size):
            got = folded.substitute({i: UOp.const(dtypes.index, iv)}).simplify()
            hits = [rv for rv in range(n) if (k < rv + iv + shift if form == "k < r + y" else rv + iv + shift < k)]
            assert got.op is Ops.CONST and got.arg == 3 * len(hits), (n, k, shift, iv)


PICK_FORMS = {
    # how the counter r compares with the index e: f(r) == e, f one-to-one in r (f as a UOp, then as a number)
    "r + c == e": (lambda r, c: r + c, lambda rv, c: rv + c),
    "e == r - c": (lambda r, c: r - c, lambda rv, c: rv - c),
    "int32(r + 1) - 1 + c == e (an arange's closed form)": (
        lambda r, c: (r + 1).cast(dtypes.int32) - 1 + c.cast(dtypes.int32),
        lambda rv, c: rv + c,
    ),
}


@pytest.mark.parametrize("form", PICK_FORMS)
def test_one_hot_pick_matches_brute_force(form: str) -> None:
    # sum over r in [0, n) of where(f(r) == e, v(r), 0) folds to where(f^-1(e) in [0, n), v(f^-1(e)), 0): evaluated
    # at every i (e in and out of [0, n)), against summing by hand
    from zeptograd.codegen.closedform import fold_closed_forms

    rng = np.random.default_rng(6)
    f_uop, f_num = PICK_FORMS[form]
    for _ in range(20):
        n, size = int(rng.integers(2, 9)), int(rng.integers(1, 7))  # a loop of 1 is no loop: r is 0
        c, shift, scale = int(rng.integers(-4, 5)), int(rng.integers(-10, 10)), int(rng.integers(1, 4))
        i, r = UOp.range(size, 0), UOp.range(n, 1)
        f = f_uop(r, UOp.const(dtypes.index, c))
        e = i * scale + shift
        e = e.cast(f.dtype) if e.dtype is not f.dtype else e
        cond = e.eq(f) if form.startswith("e ==") else f.eq(e)
        v = (r * 10 + i + 1).cast(dtypes.int32)
        total = UOp(Ops.REDUCE, dtypes.int32, (cond.where(v, UOp.const(dtypes.int32, 0)), r), Ops.ADD)
        folded = fold_closed_forms(total)
        assert not any(u.op is Ops.REDUCE for u in folded.toposort())
        for iv in range(size):
            got = folded.substitute({i: UOp.const(dtypes.index, iv)}).simplify()
            want = sum(rv * 10 + iv + 1 for rv in range(n) if f_num(rv, c) == iv * scale + shift)
            assert got.op is Ops.CONST and got.arg == want, (form, n, c, shift, scale, iv)


def test_a_sum_that_is_not_a_pick_keeps_its_loop() -> None:
    # the counter compared with something that depends on it, or through a step (2r), is not one-to-one solvable
    from zeptograd.codegen.closedform import fold_closed_forms

    i, r = UOp.range(4, 0), UOp.range(8, 1)
    v = (r + 1).cast(dtypes.int32)
    for cond in ((r * 2).eq(i), (r + i).eq(r), r.eq(i).logical_not()):
        total = UOp(Ops.REDUCE, dtypes.int32, (cond.where(v, UOp.const(dtypes.int32, 0)), r), Ops.ADD)
        assert any(u.op is Ops.REDUCE for u in fold_closed_forms(total).toposort())


def test_op_count_of_a_kernel_counts_each_op_once_per_iteration_of_its_loops():
    """The flops a kernel reports (DEBUG=2's GFLOP/s, GlobalCounters.global_ops): each REDUCE once per iteration of
    its loops, and an op after a reduction once per output, not once per iteration of the reduction's loops too
    (two sums multiplied counted 64 * 128 * 128 multiplies and no adds)."""
    from zeptograd.codegen import estimate_cost
    from zeptograd.schedule.kernelize import create_schedule

    a, b = (Tensor(np.ones((64, 128), np.float32)).realize() for _ in range(2))
    for t, want in (((a.sum(1) * b.sum(1)), 2 * 64 * 128 + 64), (a @ b.T, 2 * 64 * 64 * 128)):
        (item,), _ = create_schedule([t.uop], ["CPU"])
        assert estimate_cost(item.ast)[0] == want


# *** GPU-style launches with more output axes than launch dimensions (codegen/gpudims.py) ***


def _gpu_copy(shape: tuple[int, ...], perm: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray, list[UOp]]:
    """A permuted copy planned and rendered for the CUDA renderer, run by the PYTHON device's GPU-style
    interpreter: (what it wrote, numpy's transpose, the linear program)."""
    from zeptograd.renderer.cuda import CUDARenderer
    from zeptograd.runtime.ops_python import PythonProgram
    from zeptograd.schedule.kernelize import create_schedule

    x = np.random.default_rng(7).standard_normal(shape).astype(np.float32)
    out = Tensor(x, device="CPU").permute(*perm).contiguous()
    (item,), _ = create_schedule([out.uop], ["CPU"])
    program = get_program(item.ast, CUDARenderer())
    bufs = [buffer_for(b).allocate() for b in item.bufs]
    PythonProgram(program.uops)(bufs)
    return bufs[0].array().reshape(out.shape), x.transpose(perm), list(program.uops)


@pytest.mark.parametrize(
    "shape, perm",
    [((2, 3, 4, 5, 6), (4, 2, 0, 3, 1)), ((4, 4, 2, 2, 2, 2, 8), (0, 3, 2, 5, 4, 1, 6)), ((3, 5, 7, 2), (3, 1, 0, 2))],
    ids=str,
)
def test_outer_axes_share_the_last_launch_dimension(shape, perm) -> None:
    got, want, uops = _gpu_copy(shape, perm)
    np.testing.assert_array_equal(got, want)
    # no loop inside a work-item: every element has a work-item of its own
    assert not any(u.op is Ops.RANGE for u in uops)
    specials = [u for u in uops if u.op is Ops.SPECIAL]
    assert {u.arg for u in specials if u.arg.startswith("gidx")} == {"gidx0", "gidx1", "gidx2"}
    assert np.prod([u.src[0].arg for u in specials]) == np.prod(shape)


def test_axes_past_the_dimension_limit_stay_loops(monkeypatch: pytest.MonkeyPatch) -> None:
    from zeptograd.codegen import gpudims

    monkeypatch.setattr(gpudims, "MERGED_MAX", 12)  # (CUDA's y and z take 65535 groups)
    got, want, uops = _gpu_copy((5, 3, 4, 2, 2, 3), (1, 0, 3, 2, 5, 4))
    np.testing.assert_array_equal(got, want)
    gidx2 = next(u for u in uops if u.op is Ops.SPECIAL and u.arg == "gidx2")
    assert gidx2.src[0].arg <= 12 and sum(u.op is Ops.RANGE for u in uops) >= 1


@pytest.mark.parametrize("zero_fallback", [True, False])
@pytest.mark.parametrize("scalar, lanes", [(dtypes.float32, 8), (dtypes.float32, 4), (dtypes.int32, 8)])
def test_a_masked_vector_load_reads_the_gated_lanes_and_the_fallback_elsewhere(scalar, lanes, zero_fallback):
    """The C of a LOAD gated lane by lane (AVX-512's vmovups with a mask, AVX2's vmaskmovps / vpmaskmovd and a
    select), compiled and run: each lane whose gate is true holds the element it addresses, every other lane the
    fallback's; numpy's where is the oracle. The vector starts one element before a row, as a padded row's does."""
    import ctypes

    from zeptograd.renderer.cstyle import PRELUDE, ctype, vector_typedefs

    dt, renderer = scalar.vec(lanes), Device["CPU"].renderer
    if not renderer.masked_load(dt):
        pytest.skip(f"no masked loads of {dt} on this CPU")
    np_dt = np.float32 if scalar is dtypes.float32 else np.int32
    gates = np.array([0, 1, 1, 0, 1, 1, 1, 0][:lanes], np.int32) * -1  # bools as C vectors hold them: -1 or 0
    data = np.arange(1, lanes + 2).astype(np_dt)
    fallback = np.zeros(lanes, np_dt) if zero_fallback else np.arange(100, 100 + lanes).astype(np_dt)
    vec, mask = ctype(dt), ctype(dtypes.int32.vec(lanes))
    load = renderer._masked_load(dt, "data[-1]", "fallback", "gate", zero_fallback)
    src = (
        PRELUDE
        + vector_typedefs(renderer.host.vector_bytes)
        + "void masked(void* out, const void* in, const void* fb, const void* g) {\n"
        + f"  const {ctype(scalar)}* data = (const {ctype(scalar)}*)in + 1;\n"
        + f"  const {vec} fallback = *(const {vec}_u*)fb;\n  const {mask} gate = *(const {mask}_u*)g;\n"
        + f"  *({vec}_u*)out = {load};\n}}\n"
    )
    out = np.zeros(lanes, np_dt)
    CCompiler().function(src, "masked")(*(ctypes.c_void_p(a.ctypes.data) for a in (out, data, fallback, gates)))
    np.testing.assert_array_equal(out, np.where(gates != 0, data[:lanes], fallback))
