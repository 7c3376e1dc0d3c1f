"""The TRITON device: kernels rendered as Triton programs (renderer/triton.py), compiled by Triton's own compiler
to a CUBIN, and run on an NVIDIA GPU through the CUDA device's driver, memory and copies.

`compile_triton(src, name, signature, "sm_90")` needs Triton (`pip install -e ".[triton]"`), not a GPU: Triton
compiles for a named target (`GPUTarget("cuda", 90, 32)`), which is how the tests check every kernel without one.
Triton needs the kernel as a function in a Python file (its JIT reads the source), so the rendered text is
written to a file of its own in the cache folder and imported. The compiled kernel takes the rendered
parameters and then Triton's own scratch pointers, which are passed as null (these kernels ask for no scratch).

>>> triton_problem() is None or "triton" in triton_problem()
True
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib.util
import os
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from zeptograd.codegen import ProgramSpec
from zeptograd.helpers import DEBUG, cache_dir
from zeptograd.renderer.triton import TritonRenderer, block_size, signature
from zeptograd.runtime.buffer import Buffer
from zeptograd.runtime.device import INSTALL_HINTS
from zeptograd.runtime.ops_cuda import CUDAAllocator, CUDADevice, CUDAError, TieredKernel, _Driver, driver_problem
from zeptograd.uop.ops import Ops


class TritonCompileError(RuntimeError):
    """Triton rejected a generated kernel (a renderer bug: the message has Triton's error and the source)."""


@dataclass(frozen=True)
class TritonKernel:
    """What Triton made of a kernel: its CUBIN, entry name, threads, shared memory and extra parameters."""

    cubin: bytes
    name: str
    num_warps: int
    shared: int
    extra_params: int  # Triton's scratch pointers after the rendered parameters
    ptx: str


def triton_problem() -> str | None:
    """Why Triton kernels cannot be compiled here (None: they can)."""
    return None if importlib.util.find_spec("triton") is not None else INSTALL_HINTS["TRITON"]


def num_warps(uops: Sequence[Any]) -> int:
    """Warps for a kernel: one per 32 lanes of its block, from 1 to 8."""
    return max(1, min(8, block_size(uops)[1] // 32))


def compile_triton(src: str, name: str, sig: dict[str, str], arch: str = "sm_90", warps: int = 4) -> TritonKernel:
    """Compile the Triton program `src` (its kernel `name`, parameters `sig`) for NVIDIA `arch` (`sm_80`, `sm_90`)."""
    if (problem := triton_problem()) is not None:
        raise RuntimeError(problem)
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    key = hashlib.sha256(src.encode()).hexdigest()[:24]
    folder = cache_dir() / "triton"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"zg_{name}_{key}.py"
    if not path.exists():
        # a temporary file of this process's own: with one name for all, a second writer truncates the file a first
        # one has just renamed into place, and a third process imports it half written (a kernel without its
        # stores: seen on a GPU with 16 test workers)
        tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(src)
        tmp.replace(path)
    spec = importlib.util.spec_from_file_location(f"zg_triton_{key}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    try:
        compiled = triton.compile(
            ASTSource(fn=getattr(module, name), signature=sig, constexprs={}),
            target=GPUTarget("cuda", int(arch[3:]), 32),
            # no contraction of a * b + c into one fused multiply-add: the IR says where an FMA goes (MULACC), as
            # on every other device
            options={"num_warps": warps, "enable_fp_fusion": False},
        )
    except Exception as e:
        raise TritonCompileError(
            f"Triton rejected {name} for {arch}: {type(e).__name__}: {e}\n--- source ---\n{src}"
        ) from e
    ptx = compiled.asm["ptx"]
    entry = re.search(r"\.entry \w+\(([^)]*)\)", ptx)
    params = entry.group(1).count(".param") if entry else len(sig)
    meta = compiled.metadata
    return TritonKernel(compiled.asm["cubin"], meta.name, meta.num_warps, meta.shared, params - len(sig), ptx)


class TritonDevice(CUDADevice):
    """Runs Triton kernels on GPU 0 (see the module docstring).

    >>> TritonDevice.name
    'TRITON'
    """

    name = "TRITON"

    def __init__(self) -> None:
        self.driver = _Driver()
        self.arch = self.driver.arch
        self.renderer = TritonRenderer()  # type: ignore[assignment]
        self.allocator = CUDAAllocator(self.driver)
        self._functions = {}
        self._modules = []
        self._kernels: dict[str, TritonKernel] = {}

    def kernel(self, program: ProgramSpec) -> tuple[str, TritonKernel]:
        """`program` compiled for this GPU (once per source and parameter types), and the key it is kept under.
        The types are part of the key: a Triton program's text has none, so `x * x` reads the same for float16 and
        float32 buffers, and the kernel compiled for one would garble the other."""
        sig = signature(program.uops)
        key = f"{sig}\n{program.src}"
        if (kernel := self._kernels.get(key)) is None:
            kernel = compile_triton(program.src, program.name, sig, self.arch, num_warps(program.uops))
            self._kernels[key] = kernel
        return key, kernel

    def runner(self, program: ProgramSpec) -> Callable[[Sequence[Buffer]], None]:
        key, kernel = self.kernel(program)
        if (loaded := self._functions.get((key, program.name))) is None:
            loaded = self._functions[(key, program.name)] = TieredKernel(self._load(kernel.cubin, kernel.name))
        fn = loaded.fn  # Triton's own build only: nothing pending
        used = sorted(u.arg for u in program.uops if u.op is Ops.DEFINE_GLOBAL)
        total = tuple(program.launch_global) + (1,) * (3 - len(program.launch_global))
        local = tuple(program.launch_local) + (1,) * (3 - len(program.launch_local))
        grid = [t // max(n, 1) for t, n in zip(total, local)]  # program ids: one per work-group, dimension N on N
        if grid[1] > 65535 or grid[2] > 65535:
            raise CUDAError(f"{program.name}: {grid} program instances: over CUDA's 65535 on y or z")
        threads, lib, check, name = 32 * kernel.num_warps, self.driver.lib, self.driver.check, program.name
        extra = kernel.extra_params
        if 0 in grid:
            return lambda bufs: None

        def run(bufs: Sequence[Buffer]) -> None:
            values = [ctypes.c_uint64(bufs[i].address) for i in used] + [ctypes.c_uint64(0) for _ in range(extra)]
            params = (ctypes.c_void_p * max(len(values), 1))(*[ctypes.addressof(v) for v in values])
            check(lib.cuLaunchKernel(fn, *grid, threads, 1, 1, kernel.shared, None, params, None), f"launch {name}")
            if DEBUG.value >= 2:
                check(lib.cuCtxSynchronize(), f"run {name}")

        return run


def triton_device_problem() -> str | None:
    """Why the TRITON device cannot run here (None: it can): no Triton, or no NVIDIA GPU."""
    return triton_problem() or driver_problem()
