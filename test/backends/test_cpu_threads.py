"""The CPU devices' thread pool (runtime/cpu_threads.py): every chunk runs once per call, in the C pool and in the
Python fallback, on THREADS cores at most, a slow chunk leaves the others to the other cores, and the pool survives
many calls with varying chunk counts."""

from __future__ import annotations

import ctypes
import threading
import time

import numpy as np
import pytest

from zeptograd import Context, Tensor
from zeptograd.runtime import cpu_threads


def _recorder(nargs: int):
    calls: list[tuple[int, tuple[int, ...], int]] = []
    lock = threading.Lock()

    def record(*args):
        with lock:
            calls.append((args[-1], tuple(args[:-1]), threading.get_ident()))

    proto = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * nargs), ctypes.c_int32)
    return proto(record), calls


@pytest.mark.parametrize("nargs", [1, 3, cpu_threads.MAX_ARGS, cpu_threads.MAX_ARGS + 1])
@pytest.mark.parametrize("chunks", [1, 2, 4, 9])
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_every_chunk_runs_once_with_its_arguments(nargs, chunks, threads):
    fn, calls = _recorder(nargs)
    addresses = [4096 * (k + 1) for k in range(nargs)]
    with Context(THREADS=threads):
        for _ in range(3):
            calls.clear()
            cpu_threads.run(fn, addresses, chunks)
            assert sorted(chunk for chunk, _, _ in calls) == list(range(chunks))
            assert all(args == tuple(addresses) for _, args, _ in calls)
            assert len({ident for _, _, ident in calls}) <= min(chunks, threads)


@pytest.mark.parametrize("nargs", [2, cpu_threads.MAX_ARGS + 1])  # the C pool, and the Python fallback
def test_a_slow_chunk_leaves_the_other_chunks_to_the_other_core(nargs):
    """Chunks are taken, not dealt: while one core is stuck in a slow chunk (as when another process shares its
    core), the other runs every other chunk, where splitting 8 chunks into two halves would leave it 3 of them."""
    calls: list[tuple[int, int]] = []
    lock = threading.Lock()

    def record(*args):
        if args[-1] == 0:
            time.sleep(0.3)  # lets go of the GIL, as a kernel does
        with lock:
            calls.append((args[-1], threading.get_ident()))

    fn = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * nargs), ctypes.c_int32)(record)
    with Context(THREADS=2):
        cpu_threads.run(fn, [4096] * nargs, 8)
    assert sorted(chunk for chunk, _ in calls) == list(range(8))
    assert len({ident for _, ident in calls}) <= 2
    slow = next(ident for chunk, ident in calls if chunk == 0)
    assert [chunk for chunk, ident in calls if ident == slow] == [0]


def test_many_kernels_in_a_row_give_the_single_thread_values():
    # back-to-back threaded kernels (the pool's workers spin between them) agree with one thread, bit for bit
    x = np.random.default_rng(0).standard_normal((256, 1024)).astype(np.float32)
    with Context(THREADS=1):
        want = [(Tensor(x) * k + 1).exp().numpy() for k in range(20)]
    with Context(THREADS=2):
        got = [(Tensor(x) * k + 1).exp().numpy() for k in range(20)]
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)


def test_jobs_from_two_python_threads_at_once_do_not_mix():
    # ctypes lets go of the GIL during a kernel, so two Python threads can launch threaded kernels at the same
    # time: the pool runs one job after the other, and each job's cores all run its own function
    recorders = [_recorder(2) for _ in range(2)]
    errors: list[BaseException] = []

    def work(k: int) -> None:
        fn, calls = recorders[k]
        try:
            for _ in range(200):
                calls.clear()
                cpu_threads.run(fn, [k + 1, 4096], 2)
                assert sorted(core for core, _, _ in calls) == [0, 1]
                assert all(args == (k + 1, 4096) for _, args, _ in calls)
        except BaseException as e:  # reported below, in the test's thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors and not any(t.is_alive() for t in threads)


class _Buf:
    def __init__(self, address: int) -> None:
        self.address = address


def test_launch_list_runs_kernels_in_order_with_their_addresses():
    """A LaunchList (a TinyJit replay's kernels) calls each kernel from C, in order, every core of a threaded one
    once, with the addresses it was given; `set` changes one for the later runs."""
    calls: list[tuple[str, tuple[int, ...], int | None]] = []
    lock = threading.Lock()

    def recorder(name: str, nargs: int, threaded: bool):
        def record(*args):
            with lock:
                calls.append((name, tuple(args[:nargs]), args[nargs] if threaded else None))

        params = [ctypes.c_void_p] * nargs + ([ctypes.c_int32] if threaded else [])
        return ctypes.CFUNCTYPE(None, *params)(record)

    kernels = [("a", 2, 1), ("b", 3, 2), ("c", 1, 1), ("d", cpu_threads.MAX_ARGS, 2)]
    entries = []
    for k, (name, nargs, threads) in enumerate(kernels):
        run = cpu_threads.buffer_runner(recorder(name, nargs, threads > 1), nargs, threads)
        assert cpu_threads.LaunchList.supported(run)
        entries.append((run, [_Buf(4096 * (16 * k + j + 1)) for j in range(nargs)]))
    launches = cpu_threads.LaunchList(entries)
    for _ in range(2):
        calls.clear()
        launches()
        assert [c[0] for c in calls if c[2] in (None, 0)] == ["a", "b", "c", "d"]  # in order
        for name, _, threads in kernels:
            mine = [c for c in calls if c[0] == name]
            want = [b.address for b in entries["abcd".index(name)][1]]
            assert sorted(c[2] or 0 for c in mine) == list(range(threads)) and all(list(c[1]) == want for c in mine)
        entries[1][1][2] = _Buf(8 * 4096)
        launches.set(1, 2, 8 * 4096)
    unsupported = cpu_threads.buffer_runner(recorder("e", cpu_threads.MAX_ARGS + 1, True), cpu_threads.MAX_ARGS + 1, 2)
    assert not cpu_threads.LaunchList.supported(unsupported) and not cpu_threads.LaunchList.supported(lambda b: None)
