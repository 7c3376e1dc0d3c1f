"""Running a threaded CPU kernel on every core: a pool of threads in C that wait for work by spinning.

A kernel with a THREAD opt takes its chunk index as its last argument; `run(fn, addresses, chunks)` calls it once
per chunk, on `THREADS` cores at most (the calling thread is one). The chunks are not dealt out in advance: each
core takes the next one when it is done with its last (an atomic counter), so a core that another process slows
down does less of the work. On a virtual machine's two cores, one often runs 10-40% slower than the other
(two copies of an FMA loop at once: 138 and 98 GFLOP/s), and a kernel split in two halves waits for the slow
one. The chunks are fixed slices of the output, so the values do not depend on which core ran which, nor on
how many cores there were. Handing a chunk to a Python thread (a ThreadPoolExecutor) costs about
90 us here: the worker sleeps between kernels, and waking a sleeping CPU of a virtual machine is slow. The C pool's
workers spin on a counter for `SPIN_NS` after each chunk before they sleep on a condition variable, so kernels
that follow each other (a training step: 21 kernels in about a millisecond) start on every core at once; a
Python thread pool remains the fallback where the pool's library cannot be built. Every spin (a worker's for the
next kernel, the caller's for the workers' chunks) yields its core now and then (`sched_yield`): when other
processes keep a core busy, the thread it waits for may be queued behind it on the same core.

The pool calls a kernel through a function pointer typed with `void *` parameters: the kernels' parameters are
all pointers (and the int32 chunk index), passed alike by the x86-64 and AArch64 calling conventions.

After `os.fork` the child has none of the parent's threads: `_after_fork` resets the pool there, so the child's
first threaded kernel starts new workers (test_opt.py: a forked child runs threaded kernels).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from zeptograd.helpers import THREADS, cache_dir

MAX_ARGS = 16  # kernel pointer arguments the C pool can pass (more: the Python pool runs the kernel)
SPIN_NS = 500_000  # how long an idle worker spins for the next kernel before it sleeps

_SOURCE = r"""
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <time.h>

#define MAX_WORKERS 63
#define MAX_ARGS %(max_args)d
#define SPIN_NS %(spin_ns)dLL

typedef void (*fn_t)();
static pthread_t workers[MAX_WORKERS];
static uint64_t start_generation[MAX_WORKERS];  /* the generation before a worker's first job */
static int n_workers;
static fn_t job_fn;
static void *job_args[MAX_ARGS];
static int32_t job_nargs, job_chunks, job_workers;
static int32_t next_chunk;    /* the next chunk of the current job that nobody has taken */
static uint64_t generation;   /* bumped for each job: a worker runs the job of each new value */
static int32_t pending;       /* workers that have not finished the current job */
static int32_t sleepers;      /* workers waiting on the condition variable */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static pthread_mutex_t run_mu = PTHREAD_MUTEX_INITIALIZER;  /* one job at a time (kernels run from two threads) */

static inline void relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ volatile("yield");
#endif
}

static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

%(call)s
/* run chunks of the current job until none is left: a core that runs slower (another process on it) takes fewer */
static void take_chunks(void) {
  for (;;) {
    int32_t c = __atomic_fetch_add(&next_chunk, 1, __ATOMIC_ACQ_REL);
    if (c >= job_chunks) return;
    call(job_fn, job_args, job_nargs, c);
  }
}

static void *worker(void *arg) {
  int32_t core = (int32_t)(intptr_t)arg;
  uint64_t seen = start_generation[core - 1];
  for (;;) {
    int64_t start = now_ns();
    int spins = 0;
    while (__atomic_load_n(&generation, __ATOMIC_SEQ_CST) == seen) {
      relax();
      if (++spins < 256) continue;
      spins = 0;
      sched_yield();  /* a thread waiting for this core (the caller's, on a busy machine) gets it */
      if (now_ns() - start < SPIN_NS) continue;
      pthread_mutex_lock(&mu);
      __atomic_add_fetch(&sleepers, 1, __ATOMIC_SEQ_CST);
      while (__atomic_load_n(&generation, __ATOMIC_SEQ_CST) == seen) pthread_cond_wait(&cv, &mu);
      __atomic_sub_fetch(&sleepers, 1, __ATOMIC_SEQ_CST);
      pthread_mutex_unlock(&mu);
    }
    seen = __atomic_load_n(&generation, __ATOMIC_ACQUIRE);
    if (core < job_workers) take_chunks();
    __atomic_sub_fetch(&pending, 1, __ATOMIC_ACQ_REL);
  }
  return 0;
}

/* fn(args..., chunk) for chunk in [0, chunks), on `threads` cores (the caller's and threads - 1 workers), each
   taking the next chunk when it is done with one: 0 when done, -1 when it cannot (the caller runs it another way) */
int32_t zg_run(fn_t fn, void **args, int32_t nargs, int32_t chunks, int32_t threads) {
  if (nargs < 1 || nargs > MAX_ARGS || chunks < 1 || threads < 1 || threads - 1 > MAX_WORKERS) return -1;
  if (threads > chunks) threads = chunks;
  pthread_mutex_lock(&run_mu);
  while (n_workers < threads - 1) {
    start_generation[n_workers] = __atomic_load_n(&generation, __ATOMIC_SEQ_CST);
    if (pthread_create(&workers[n_workers], 0, worker, (void *)(intptr_t)(n_workers + 1)) != 0) {
      pthread_mutex_unlock(&run_mu);
      return -1;
    }
    pthread_detach(workers[n_workers]);
    n_workers++;
  }
  job_fn = fn;
  for (int32_t i = 0; i < nargs; i++) job_args[i] = args[i];
  job_nargs = nargs;
  job_chunks = chunks;
  job_workers = threads;
  __atomic_store_n(&next_chunk, 0, __ATOMIC_SEQ_CST);
  __atomic_store_n(&pending, n_workers, __ATOMIC_SEQ_CST);
  __atomic_add_fetch(&generation, 1, __ATOMIC_SEQ_CST);
  if (__atomic_load_n(&sleepers, __ATOMIC_SEQ_CST) > 0) {
    pthread_mutex_lock(&mu);
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
  }
  take_chunks();
  for (int spins = 1; __atomic_load_n(&pending, __ATOMIC_ACQUIRE) > 0; spins++) {
    relax();
    if (spins %% 256 == 0) sched_yield();  /* a worker waiting for this core runs its chunk */
  }
  pthread_mutex_unlock(&run_mu);
  return 0;
}

typedef struct {
  fn_t fn;
  void **args;
  int32_t nargs;
  int32_t chunks; /* 1: the kernel has no chunk parameter */
  int32_t threads;
} zg_launch_t;

/* launches[0..n) in order (a replayed capture: one call from Python, not one a kernel); returns how many ran: the
   caller runs the one that could not, and goes on from there */
int32_t zg_run_list(const zg_launch_t *launches, int32_t n) {
  for (int32_t i = 0; i < n; i++) {
    const zg_launch_t *l = &launches[i];
    if (l->chunks > 1) {
      if (zg_run(l->fn, l->args, l->nargs, l->chunks, l->threads) != 0) return i;
    } else {
      if (l->nargs < 1 || l->nargs > MAX_ARGS) return i;
      call_plain(l->fn, l->args, l->nargs);
    }
  }
  return n;
}

/* in a forked child: no workers exist, and the lock may have been held by one of the parent's */
void zg_after_fork(void) {
  n_workers = 0;
  sleepers = 0;
  pending = 0;
  pthread_mutex_init(&mu, 0);
  pthread_cond_init(&cv, 0);
  pthread_mutex_init(&run_mu, 0);
}
"""


def _call_source() -> str:
    """`call(f, a, n, chunk)`: f(a[0], ..., a[n-1], chunk) through a function pointer of n pointer parameters; and
    `call_plain(f, a, n)`: the same without the chunk index (a kernel that is not split into chunks)."""
    out = []
    for name, chunked in (("call", True), ("call_plain", False)):
        cases = []
        for n in range(1, MAX_ARGS + 1):
            params = ", ".join(["void *"] * n + (["int32_t"] if chunked else []))
            args = ", ".join([f"a[{k}]" for k in range(n)] + (["chunk"] if chunked else []))
            cases.append(f"    case {n}: ((void (*)({params}))f)({args}); break;")
        body = "\n".join(cases)
        extra = ", int32_t chunk" if chunked else ""
        out.append(f"static void {name}(fn_t f, void **a, int32_t n{extra}) {{\n  switch (n) {{\n{body}\n  }}\n}}\n")
    return "".join(out)


def source() -> str:
    """The pool's C source."""
    return _SOURCE % {"max_args": MAX_ARGS, "spin_ns": SPIN_NS, "call": _call_source()}


class _Pool:
    """The C pool's library, built on first use (and cached on disk like the kernels), or None where it cannot
    be built (then `run` falls back to Python threads)."""

    def __init__(self) -> None:
        self.lib: Any = None
        self.tried = False
        self.lock = threading.Lock()

    def load(self) -> Any:
        with self.lock:
            if not self.tried:
                self.tried = True
                self.lib = _build()
            return self.lib


def _build() -> Any:
    from zeptograd.runtime.ops_cpu import build_library  # ops_cpu runs its kernels with this module

    cc = os.environ.get("CC", "cc")
    flags = ("-O2", "-shared", "-fPIC", "-pthread")
    src = source()
    key = hashlib.sha256("\0".join([src, cc, *flags]).encode()).hexdigest()[:32]
    path = cache_dir() / f"threads_{key}.so"
    if not path.exists() and build_library([cc, *flags, "-x", "c", "-", "-o", "<library>"], src, path) is not None:
        return None
    lib = ctypes.CDLL(str(path))
    lib.zg_run.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32, ctypes.c_int32, ctypes.c_int32]
    lib.zg_run.restype = ctypes.c_int32
    lib.zg_run_list.argtypes = [ctypes.c_void_p, ctypes.c_int32]
    lib.zg_run_list.restype = ctypes.c_int32
    lib.zg_after_fork.argtypes = []
    lib.zg_after_fork.restype = None
    return lib


_pool = _Pool()
_python_pools: dict[int, ThreadPoolExecutor] = {}


def _after_fork() -> None:
    _python_pools.clear()
    if _pool.lib is not None:
        _pool.lib.zg_after_fork()


# a forked child has none of its parent's threads: it makes its own
os.register_at_fork(after_in_child=_after_fork)


def _python_pool(workers: int) -> ThreadPoolExecutor:
    if workers not in _python_pools:
        _python_pools[workers] = ThreadPoolExecutor(workers, thread_name_prefix="zeptograd-core")
    return _python_pools[workers]


def _threads(chunks: int) -> int:
    """How many cores run a kernel of `chunks` chunks: THREADS at most."""
    return max(1, min(chunks, THREADS.value))


def runner(fn: Any, nargs: int, chunks: int) -> Callable[[Sequence[int]], None]:
    """A function of the kernel's buffer addresses that calls kernel `fn` (a ctypes function of `nargs` pointers
    and the chunk index) once per chunk in [0, chunks), on up to THREADS cores in parallel, and returns when every
    call has returned. What does not change between calls (the pool, the function's address) is looked up here,
    once.

    >>> hits = []
    >>> runner(lambda *a: hits.append(a[-1]), 1, 1)([0]) or hits
    [0]
    """
    threads = _threads(chunks)
    lib = _pool.load() if isinstance(fn, ctypes._CFuncPtr) and nargs <= MAX_ARGS else None  # type: ignore[attr-defined]
    if lib is not None:
        address, array, zg_run = ctypes.cast(fn, ctypes.c_void_p).value, ctypes.c_void_p * nargs, lib.zg_run

        def run_in_pool(addresses: Sequence[int]) -> None:
            if zg_run(address, array(*addresses), nargs, chunks, threads) != 0:
                _run_python(fn, addresses, chunks, threads)

        return run_in_pool
    return lambda addresses: _run_python(fn, addresses, chunks, threads)


def buffer_runner(fn: Any, nargs: int, chunks: int) -> Callable[[Sequence[Any]], None]:
    """The runner of a compiled kernel `fn` of `nargs` buffer addresses (and the chunk index when `chunks` > 1):
    a function of the buffers. It carries `c_kernel = (fn, nargs, chunks)`, so that a `LaunchList` can call the
    kernel from C."""
    if chunks == 1:

        def run(bufs: Sequence[Any]) -> None:
            fn(*[b.address for b in bufs])

    else:
        run_chunks = runner(fn, nargs, chunks)

        def run(bufs: Sequence[Any]) -> None:
            run_chunks([b.address for b in bufs])

    run.c_kernel = (fn, nargs, chunks)  # type: ignore[attr-defined]
    return run


class _Launch(ctypes.Structure):
    _fields_ = [
        ("fn", ctypes.c_void_p),
        ("args", ctypes.POINTER(ctypes.c_void_p)),
        ("nargs", ctypes.c_int32),
        ("chunks", ctypes.c_int32),
        ("threads", ctypes.c_int32),
    ]


class LaunchList:
    """Kernels (`buffer_runner`s, each with its buffers) run in order by one call into the pool's library: a
    replayed TinyJit capture pays one ctypes call, not one a kernel (about 2 us each). `set(k, j, address)`
    changes the address of argument j of kernel k for later runs.

    >>> LaunchList.supported(lambda bufs: None)
    False
    """

    def __init__(self, entries: Sequence[tuple[Callable[..., None], Sequence[Any]]]) -> None:
        self.lib = _pool.load()
        self.fns = [run.c_kernel[0] for run, _ in entries]  # type: ignore[attr-defined]
        self.chunks = [run.c_kernel[2] for run, _ in entries]  # type: ignore[attr-defined]
        self.args = [(ctypes.c_void_p * len(bufs))(*[b.address for b in bufs]) for _, bufs in entries]
        self.launches = (_Launch * len(entries))(
            *[
                _Launch(
                    ctypes.cast(fn, ctypes.c_void_p).value,
                    ctypes.cast(args, ctypes.POINTER(ctypes.c_void_p)),
                    len(args),
                    c,
                    _threads(c),
                )
                for fn, args, c in zip(self.fns, self.args, self.chunks)
            ]
        )
        self.size = ctypes.sizeof(_Launch)

    @staticmethod
    def supported(run: Any) -> bool:
        """Can a LaunchList call this runner's kernel (a C function the pool's library can call, when it builds)?"""
        launch = getattr(run, "c_kernel", None)
        return (
            launch is not None
            and isinstance(launch[0], ctypes._CFuncPtr)  # type: ignore[attr-defined]
            and 1 <= launch[1] <= MAX_ARGS
            and _pool.load() is not None
        )

    def set(self, k: int, j: int, address: int) -> None:
        self.args[k][j] = address

    def __call__(self) -> None:
        n, done = len(self.fns), 0
        base = ctypes.addressof(self.launches)
        while done < n:
            done += self.lib.zg_run_list(base + done * self.size, n - done)
            if done < n:  # the pool could not start a worker: this kernel through Python threads, then the rest
                fn, args, chunks = self.fns[done], self.args[done], self.chunks[done]
                if chunks > 1:
                    _run_python(fn, list(args), chunks, _threads(chunks))
                else:
                    fn(*args)
                done += 1


def run(fn: Any, addresses: Sequence[int], chunks: int) -> None:
    """`runner(fn, len(addresses), chunks)(addresses)`, for one call."""
    runner(fn, len(addresses), chunks)(addresses)


def _run_python(fn: Any, addresses: Sequence[int], chunks: int, threads: int) -> None:
    # ctypes lets go of the GIL during the call, so the threads run chunks in parallel; each takes the next chunk
    # from one shared iterator (its next() holds the GIL: no chunk is taken twice)
    todo = iter(range(chunks))

    def take() -> None:
        for chunk in todo:
            fn(*addresses, chunk)

    pool = _python_pool(max(1, threads - 1))
    others = [pool.submit(take) for _ in range(threads - 1)]
    take()
    for f in others:
        f.result()
