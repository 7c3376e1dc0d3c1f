"""The CPU device: C source compiled by the system C compiler into a shared library, loaded with ctypes.

The compiler is `$CC` (default `cc`) with `-O2 -march=native -ffp-contract=off`. Compiled libraries are cached on disk
(`$ZEPTOGRAD_CACHE_DIR`, default `~/.cache/zeptograd`) and in memory, keyed by a hash of the source, the
compiler and its flags. The key is the file name, so two different kernels never share a library path:
the dynamic loader hands back the library already loaded from a path, even if the file has changed.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from zeptograd.codegen import ProgramSpec
from zeptograd.renderer.cstyle import CRenderer
from zeptograd.runtime.buffer import Buffer

# -ffp-contract=off: the compiler may not fuse a*b+c into an FMA on its own (the IR says where a MULACC
# goes), so CPU results agree bit for bit with the PYTHON device's
CFLAGS = ("-O2", "-march=native", "-fno-math-errno", "-ffp-contract=off", "-shared", "-fPIC")


class CompileError(RuntimeError):
    """The C compiler rejected a generated kernel (a compiler bug: the message has the source)."""


def cache_dir() -> Path:
    return Path(os.environ.get("ZEPTOGRAD_CACHE_DIR") or Path.home() / ".cache" / "zeptograd")


class CCompiler:
    """Compiles C source to a shared library, once per distinct (source, compiler, flags)."""

    def __init__(self) -> None:
        self.cc = os.environ.get("CC", "cc")
        self.flags = CFLAGS
        self._loaded: dict[str, ctypes.CDLL] = {}

    def key(self, src: str) -> str:
        return hashlib.sha256("\0".join([src, self.cc, *self.flags]).encode()).hexdigest()[:32]

    def library(self, src: str) -> ctypes.CDLL:
        key = self.key(src)
        if (lib := self._loaded.get(key)) is not None:
            return lib
        path = cache_dir() / f"kernel_{key}.so"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(suffix=".so", dir=path.parent)
            os.close(fd)
            try:
                cmd = [self.cc, *self.flags, "-x", "c", "-", "-o", tmp, "-lm"]
                proc = subprocess.run(cmd, input=src.encode(), capture_output=True)
                if proc.returncode != 0:
                    raise CompileError(f"{' '.join(cmd)} failed:\n{proc.stderr.decode()}\n--- source ---\n{src}")
                os.replace(tmp, path)  # atomic: a concurrent process sees no file or a whole one
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)
        lib = self._loaded[key] = ctypes.CDLL(str(path))
        return lib


class CPUDevice:
    """Runs kernels as compiled C on this machine's CPU."""

    name = "CPU"

    def __init__(self) -> None:
        self.renderer = CRenderer()
        self.compiler = CCompiler()

    def runner(self, program: ProgramSpec) -> Callable[[Sequence[Buffer]], None]:
        fn = self.compiler.library(program.src)[program.name]
        n_args = sum(1 for u in program.uops if u.op.name == "DEFINE_GLOBAL")
        threads = program.threads
        fn.argtypes = [ctypes.c_void_p] * n_args + ([ctypes.c_int32] if threads > 1 else [])
        fn.restype = None
        if threads == 1:

            def run(bufs: Sequence[Buffer]) -> None:
                fn(*[b.address for b in bufs])

            return run

        def run_threads(bufs: Sequence[Buffer]) -> None:
            # ctypes lets go of the GIL during the call: the other cores run their chunks while this one runs
            # chunk 0
            args = [b.address for b in bufs]
            others = [_pool(threads - 1).submit(fn, *args, core) for core in range(1, threads)]
            fn(*args, 0)
            for f in others:
                f.result()

        return run_threads


_pools: dict[int, ThreadPoolExecutor] = {}
# a forked child has none of its parent's threads: it makes its own pool
os.register_at_fork(after_in_child=_pools.clear)


def _pool(workers: int) -> ThreadPoolExecutor:
    """A pool of `workers` threads that run kernel chunks, made once and kept."""
    if workers not in _pools:
        _pools[workers] = ThreadPoolExecutor(workers, thread_name_prefix="zeptograd-core")
    return _pools[workers]
