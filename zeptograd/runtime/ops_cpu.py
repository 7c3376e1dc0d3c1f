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
import re
import subprocess
import tempfile
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from zeptograd.codegen import ProgramSpec
from zeptograd.helpers import cache_dir
from zeptograd.renderer.cstyle import CRenderer
from zeptograd.renderer.host import HostCPU
from zeptograd.runtime import cpu_threads
from zeptograd.runtime.buffer import Buffer

# -ffp-contract=off: the compiler may not fuse a*b+c into an FMA on its own (the IR says where a MULACC
# goes), so CPU results agree bit for bit with the PYTHON device's.
# -nostdlib ... -lm -lgcc: a kernel needs no C runtime start files and no libc of its own (the process has one): not
# linking them takes a fifth off gcc's time for a small kernel; libm has the math functions gcc does not inline, and
# the static libgcc its helpers (half-precision conversions)
CFLAGS = ("-O2", "-march=native", "-fno-math-errno", "-ffp-contract=off", "-shared", "-fPIC", "-nostdlib")
LIBS = ("-lm", "-lgcc")
# the kernels of one schedule are compiled as one file into one library (each function renamed to a name of its own):
# one gcc run costs little more than a kernel's, against one run per kernel. More than this many go to several
# gcc runs in parallel threads (one a core)
KERNELS_PER_RUN = 4


def host_flags(host: HostCPU) -> tuple[str, ...]:
    """The compiler flags a CPU's features call for beyond -march=native.

    With AVX512-FP16, gcc 12 stores a float16 picked by a condition (`g ? x : 0`) with a zero-masked `vmovsh`,
    which the assembler rejects: the kernels use F16C's conversions instead (as on every other x86 CPU).

    >>> host_flags(HostCPU(frozenset({"avx2", "avx512f", "avx512_fp16"}))), host_flags(HostCPU(frozenset({"avx2"})))
    (('-mno-avx512fp16',), ())
    """
    return ("-mno-avx512fp16",) if "avx512_fp16" in host.flags else ()


class CompileError(RuntimeError):
    """The C compiler rejected a generated kernel (a compiler bug: the message has the source)."""


class CCompiler:
    """Compiles C kernels to shared libraries, once per distinct (source, compiler, flags).

    A kernel compiled with others has its function exported as `zg_<key>`, its key a hash of source, compiler and
    flags, so kernels with the same name in their source can share a library (alone, it keeps its name). Kernels
    are found on disk by key: `kernel_<key>.so` is the library (or a link to the library of the batch it was
    compiled in)."""

    def __init__(self) -> None:
        self.cc = os.environ.get("CC", "cc")
        self.flags = CFLAGS + host_flags(HostCPU.read())
        self._loaded: dict[str, ctypes.CDLL] = {}

    def key(self, src: str) -> str:
        return hashlib.sha256("\0".join(["zg-v2", src, self.cc, *self.flags, *LIBS]).encode()).hexdigest()[:32]

    def library(self, src: str) -> ctypes.CDLL:
        """The library of one kernel's source (compiled or loaded on first use)."""
        return self.libraries([src])[0]

    def function(self, src: str, name: str) -> Any:
        """The C function `name` of a kernel's source."""
        return self.functions([(src, name)])[0]

    def functions(self, kernels: Sequence[tuple[str, str]]) -> list[Any]:
        """The C function of each `(source, name)`, compiling all that no cache holds in as few gcc runs as
        possible."""
        libs = self.libraries([src for src, _ in kernels])
        return [_symbol(lib, f"zg_{self.key(src)}", name) for lib, (src, name) in zip(libs, kernels)]

    def libraries(self, srcs: Sequence[str]) -> list[ctypes.CDLL]:
        keys = [self.key(src) for src in srcs]
        todo: dict[str, str] = {}
        for key, src in zip(keys, srcs):
            if key not in self._loaded:
                path = cache_dir() / f"kernel_{key}.so"
                if path.exists():
                    self._loaded[key] = ctypes.CDLL(str(path))
                else:
                    todo[key] = src
        if todo:
            batches = _split(list(todo.items()), max(1, min(os.cpu_count() or 1, -(-len(todo) // KERNELS_PER_RUN))))
            if len(batches) == 1:
                self._compile(batches[0])
            else:
                with ThreadPoolExecutor(len(batches), thread_name_prefix="zeptograd-cc") as pool:
                    list(pool.map(self._compile, batches))  # gcc runs in its own process: threads overlap fine
        return [self._loaded[key] for key in keys]

    def _compile(self, kernels: list[tuple[str, str]]) -> None:
        """Compile `(key, source)` kernels into one library, link each kernel's name to it, and load it."""
        directory = cache_dir()
        directory.mkdir(parents=True, exist_ok=True)
        keys = [key for key, _ in kernels]
        if len(kernels) == 1:
            parts = [kernels[0][1]]  # alone, a kernel keeps its own name
        else:
            # each kernel's function gets the name zg_<key> (a macro around its source); typedefs may repeat in C11
            parts = [
                f"#define {_function_name(src)} zg_{key}\n{src}\n#undef {_function_name(src)}\n" for key, src in kernels
            ]
        name = keys[0] if len(keys) == 1 else "batch_" + hashlib.sha256("".join(keys).encode()).hexdigest()[:32]
        path = directory / f"kernel_{name}.so"
        cmd = [self.cc, *self.flags, "-x", "c", "-", "-o", "<library>", *LIBS]
        error = build_library(cmd, "".join(parts), path)
        if error is not None:
            if len(kernels) > 1:  # find the kernel that fails, for an error that shows its source alone
                for kernel in kernels:
                    self._compile([kernel])
            raise CompileError(f"{' '.join(cmd)} failed:\n{error}\n--- source ---\n{''.join(parts)}")
        if len(keys) > 1:
            for key in keys:
                _link(directory / f"kernel_{key}.so", path.name)
        lib = ctypes.CDLL(str(path))
        for key in keys:
            self._loaded[key] = lib


def build_library(cmd: list[str], src: str, path: Path) -> str | None:
    """Run compiler command `cmd` (its output file written `<library>`) on C source `src` and put the library at
    `path`, atomically (a concurrent process sees no file or a whole one); the compiler's errors on failure."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=path.parent)
    os.close(fd)
    try:
        proc = subprocess.run([tmp if a == "<library>" else a for a in cmd], input=src.encode(), capture_output=True)
        if proc.returncode != 0:
            return proc.stderr.decode()
        os.replace(tmp, path)
        return None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _symbol(lib: ctypes.CDLL, renamed: str, name: str) -> Any:
    """A kernel's function in `lib`: renamed when it was compiled with others, under its own name when alone."""
    try:
        return lib[renamed]
    except AttributeError:
        return lib[name]


def _function_name(src: str) -> str:
    """The name of the kernel function a rendered source defines (`void NAME(...) {`)."""
    match = re.search(r"^void (\w+)\(", src, re.MULTILINE)
    if match is None:
        raise CompileError(f"no kernel function in the source:\n{src}")
    return match.group(1)


def _split(items: list, n: int) -> list[list]:
    """`items` in `n` runs of nearly equal length."""
    return [items[i::n] for i in range(n)]


def _link(link: Path, target: str) -> None:
    """A symbolic link `link` -> `target` (a name in the same folder), replacing atomically whatever was there."""
    tmp = link.with_name(f"{link.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    os.symlink(target, tmp)
    os.replace(tmp, link)


class CPUDevice:
    """Runs kernels as compiled C on the host's CPU."""

    name = "CPU"
    variables = True  # kernels take symbolic variables' values as arguments

    def __init__(self) -> None:
        self.renderer = CRenderer(HostCPU.read())
        self.compiler = CCompiler()

    def runner(self, program: ProgramSpec) -> Callable[[Sequence[Buffer]], None]:
        return self.runners([program])[0]

    def runners(self, programs: Sequence[ProgramSpec]) -> list[Callable[[Sequence[Buffer]], None]]:
        """The runner of each program, their kernels compiled together (see CCompiler.functions)."""
        fns = self.compiler.functions([(p.src, p.name) for p in programs])
        return [_runner(program, fn) for program, fn in zip(programs, fns)]


def _runner(program: ProgramSpec, fn: Any) -> Callable[[Sequence[Buffer]], None]:
    # the buffers' addresses, then the variables' values (runtime.buffer.VariableValue), each one machine word
    n_args = sum(1 for u in program.uops if u.op.name == "DEFINE_GLOBAL") + len(program.variables)
    chunks = program.chunks
    fn.argtypes = [ctypes.c_void_p] * n_args + ([ctypes.c_int32] if chunks > 1 else [])
    fn.restype = None
    return cpu_threads.buffer_runner(fn, n_args, chunks)
