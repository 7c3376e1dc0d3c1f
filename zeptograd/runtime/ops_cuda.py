"""The CUDA device: kernels rendered as CUDA C, compiled by NVRTC, run on an NVIDIA GPU through the driver API.

Both libraries are reached with ctypes, so the device needs no Python package of NVIDIA's:

- **NVRTC** (`libnvrtc.so.13` or `.12`): from the loader path (a CUDA toolkit), else from the pip package
  `nvidia-cuda-nvrtc` (`site-packages/nvidia/cu13/lib` for CUDA 13, `nvidia/cuda_nvrtc/lib` for 12). Half
  kernels include `<cuda_fp16.h>`: from the toolkit that NVRTC came with, else from the pip package
  `nvidia-cuda-runtime` (`nvidia/cu13/include`), else `$CUDA_HOME/include` or `/usr/local/cuda/include`.
- **the driver** (`libcuda.so.1`, installed with the GPU driver): the primary context of GPU 0, memory,
  module loading and launches on the default stream.

A kernel is compiled to a CUBIN for the GPU's own architecture (`sm_90` on an H100/H200), not to PTX: NVRTC
runs ptxas itself, and a CUBIN from a newer CUDA 13.x NVRTC loads on an older 13.x driver (minor version
compatibility), where PTX of a newer ISA version would be refused by the driver's JIT.

Without a GPU, `compile_cuda(src, "sm_90")` still compiles (rendering and NVRTC need no driver): the tests use it
to check that every kernel zeptograd renders is accepted.

>>> if nvrtc_problem() is None:
...     out = compile_cuda('extern "C" __global__ void k(float* a) { a[threadIdx.x] = 1.0f; }', "sm_80")
...     print(out.ptx.count(".entry k"), len(out.cubin) > 0)
... else:
...     print(1, True)
1 True
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import ctypes.util
import functools
import hashlib
import importlib.util
import os
import threading
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from zeptograd.codegen import ProgramSpec
from zeptograd.helpers import DEBUG, cache_dir
from zeptograd.renderer.cuda import CUDARenderer, launch_order
from zeptograd.renderer.ptx import PTXRenderer
from zeptograd.runtime.buffer import Buffer
from zeptograd.runtime.device import INSTALL_HINTS, DeviceUnavailable
from zeptograd.uop.ops import Ops


class CUDAError(RuntimeError):
    """The CUDA driver refused a call (the message has the call and the driver's own words)."""


class CUDACompileError(RuntimeError):
    """NVRTC rejected a generated kernel (a renderer bug: the message has NVRTC's log and the source)."""


def _nvidia_dirs(sub: str) -> list[Path]:
    """`sub` inside each pip-installed NVIDIA package folder (`site-packages/nvidia/cu13/lib`, ...)."""
    spec = importlib.util.find_spec("nvidia")
    roots = [Path(p) for p in (spec.submodule_search_locations or [])] if spec is not None else []
    kinds = ("cu13", "cu12", "cuda_nvrtc", "cuda_runtime")
    return [root / kind / sub for root in roots for kind in kinds if (root / kind / sub).is_dir()]


@dataclass
class _NVRTC:
    lib: ctypes.CDLL
    path: str  # the library's file (where it was found)
    include: list[str]  # folders that hold cuda_fp16.h, the matching toolkit's first

    @property
    def version(self) -> tuple[int, int]:
        major, minor = ctypes.c_int(), ctypes.c_int()
        self.lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
        return major.value, minor.value


_nvrtc: _NVRTC | None = None
_nvrtc_error: str | None = None


def _load_nvrtc() -> _NVRTC:
    global _nvrtc, _nvrtc_error
    if _nvrtc is not None:
        return _nvrtc
    if _nvrtc_error is not None:
        raise DeviceUnavailable(_nvrtc_error)
    # the loader path first: on a machine with a toolkit its NVRTC matches its driver and headers
    candidates: list[tuple[str, Path | None]] = [(name, None) for name in ("libnvrtc.so.13", "libnvrtc.so.12")]
    if (found := ctypes.util.find_library("nvrtc")) is not None:
        candidates.append((found, None))
    for lib_dir in _nvidia_dirs("lib"):
        candidates += [(str(p), lib_dir.parent) for p in sorted(lib_dir.glob("libnvrtc.so.1[0-9]"), reverse=True)]
    for name, package in candidates:
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        include = [package / "include"] if package is not None else []
        cuda_home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
        toolkit = [Path(cuda_home) / "include", Path("/usr/local/cuda/include")]
        rest = [*_nvidia_dirs("include"), *toolkit]
        include += toolkit + rest if package is None else rest
        dirs = [str(d) for d in dict.fromkeys(include) if (d / "cuda_fp16.h").is_file()]
        _declare_nvrtc(lib)
        _nvrtc = _NVRTC(lib, getattr(lib, "_name", name), dirs)
        return _nvrtc
    _nvrtc_error = INSTALL_HINTS["CUDA"] + " (NVRTC, libnvrtc.so, was not found)"
    raise DeviceUnavailable(_nvrtc_error)


def _declare_nvrtc(lib: ctypes.CDLL) -> None:
    # nvrtc.h: every call returns an nvrtcResult (int); nvrtcProgram is an opaque pointer
    p, sz, cp = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p
    sigs: dict[str, list[type]] = {
        "nvrtcVersion": [ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int)],
        "nvrtcCreateProgram": [ctypes.POINTER(p), cp, cp, ctypes.c_int, ctypes.POINTER(cp), ctypes.POINTER(cp)],
        "nvrtcCompileProgram": [p, ctypes.c_int, ctypes.POINTER(cp)],
        "nvrtcGetProgramLogSize": [p, ctypes.POINTER(sz)],
        "nvrtcGetProgramLog": [p, ctypes.c_char_p],
        "nvrtcGetPTXSize": [p, ctypes.POINTER(sz)],
        "nvrtcGetPTX": [p, ctypes.c_char_p],
        "nvrtcGetCUBINSize": [p, ctypes.POINTER(sz)],
        "nvrtcGetCUBIN": [p, ctypes.c_char_p],
        "nvrtcDestroyProgram": [ctypes.POINTER(p)],
    }
    for name, argtypes in sigs.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = argtypes, ctypes.c_int
    lib.nvrtcGetErrorString.argtypes, lib.nvrtcGetErrorString.restype = [ctypes.c_int], ctypes.c_char_p


def nvrtc_problem() -> str | None:
    """Why NVRTC cannot compile here (None: it can).

    >>> nvrtc_problem() is None or "nvrtc" in nvrtc_problem().lower()
    True
    """
    try:
        _load_nvrtc()
    except DeviceUnavailable as e:
        return str(e)
    return None


@dataclass(frozen=True)
class CompiledCUDA:
    """What NVRTC made of a kernel: its PTX text and, when compiled for a real architecture, its CUBIN."""

    ptx: str
    cubin: bytes
    log: str


_compiled: dict[tuple[str, str, bool], CompiledCUDA] = {}
# --fmad=false: a*b+c is fused only where the program has a MULACC, as on the CPU and LLVM devices
COMPILE_OPTIONS = ("--fmad=false",)
# for compile time, which is most of a new kernel's first call (an NVRTC that lacks one compiles without them):
# --minimal reads none of CUDA's headers that a kernel does not include itself (a rendered kernel uses builtins and
# cuda_fp16.h, which it includes), which saves NVRTC parsing them for every kernel.
FAST_OPTIONS = ("--minimal",)
# --Ofast-compile=mid skips optimizations that cost compile time, about a third of NVRTC's time for a new kernel.
# Only for a kernel's first build (TieredKernel): the kernels it builds can be several times slower (sums and
# copies most), so the fully optimized build replaces it as soon as it is ready
QUICK_OPTIONS = ("--Ofast-compile=mid",)
_NVRTC_INVALID_OPTION = 5


def speed_options(quick: bool = False) -> tuple[str, ...]:
    """NVRTC's options for compile time: FAST_OPTIONS, and QUICK_OPTIONS for a quick first build.

    >>> speed_options(quick=True) == (*FAST_OPTIONS, *QUICK_OPTIONS)
    True
    """
    return (*FAST_OPTIONS, *(QUICK_OPTIONS if quick else ()))


def compile_cuda(src: str, arch: str = "sm_90", name: str = "kernel", quick: bool = False) -> CompiledCUDA:
    """Compile CUDA C `src` with NVRTC for `arch` (`sm_80`, `sm_90`: PTX and CUBIN; `compute_90`: PTX only), with
    every optimization or, `quick`, sooner (QUICK_OPTIONS). Needs NVRTC, not a GPU. Raises CUDACompileError with
    NVRTC's log when it rejects the source.

    >>> if nvrtc_problem() is None:
    ...     print(".target sm_90" in compile_cuda('extern "C" __global__ void k() {}', "sm_90").ptx)
    ... else:
    ...     print(True)
    True
    """
    if (hit := _compiled.get((src, arch, quick))) is not None:
        return hit
    nv = _load_nvrtc()
    lib = nv.lib
    # a file name of its own per program: NVRTC's messages and a profiler's source view tell kernels apart
    file = f"{name}_{hashlib.sha256(src.encode()).hexdigest()[:12]}.cu".encode()
    prog = ctypes.c_void_p()
    base = [f"--gpu-architecture={arch}", *COMPILE_OPTIONS, *(f"-I{d}" for d in nv.include)]
    # the compile-time options first, then fewer of them where this NVRTC rejects one
    optional = speed_options(quick)
    for n in range(len(optional), -1, -1):
        options = [*base, *optional[:n]]
        _nvrtc_check(lib, lib.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), file, 0, None, None), "create")
        argv = (ctypes.c_char_p * len(options))(*[o.encode() for o in options])
        status = lib.nvrtcCompileProgram(prog, len(options), argv)
        if status != _NVRTC_INVALID_OPTION or n == 0:
            break
        lib.nvrtcDestroyProgram(ctypes.byref(prog))
    try:
        size = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        log_buf = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetProgramLog(prog, log_buf)
        log = log_buf.value.decode(errors="replace")
        if status != 0:
            err = lib.nvrtcGetErrorString(status).decode()
            raise CUDACompileError(f"NVRTC ({err}) rejected {file.decode()} for {arch}:\n{log}\n--- source ---\n{src}")
        _nvrtc_check(lib, lib.nvrtcGetPTXSize(prog, ctypes.byref(size)), "PTX size")
        ptx_buf = ctypes.create_string_buffer(size.value)
        _nvrtc_check(lib, lib.nvrtcGetPTX(prog, ptx_buf), "PTX")
        cubin = b""
        if arch.startswith("sm_"):
            _nvrtc_check(lib, lib.nvrtcGetCUBINSize(prog, ctypes.byref(size)), "CUBIN size")
            cubin_buf = ctypes.create_string_buffer(size.value)
            _nvrtc_check(lib, lib.nvrtcGetCUBIN(prog, cubin_buf), "CUBIN")
            cubin = cubin_buf.raw[: size.value]
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))
    out = _compiled[(src, arch, quick)] = CompiledCUDA(ptx_buf.value.decode(), cubin, log)
    return out


def _nvrtc_check(lib: ctypes.CDLL, status: int, what: str) -> None:
    if status != 0:
        raise CUDACompileError(f"NVRTC {what}: {lib.nvrtcGetErrorString(status).decode()}")


# cuda.h: CUdevice_attribute values
_CC_MAJOR, _CC_MINOR = 75, 76


class _Driver:
    """The CUDA driver API through ctypes, with the primary context of one GPU current on this thread."""

    def __init__(self, ordinal: int = 0) -> None:
        try:
            self.lib = lib = ctypes.CDLL("libcuda.so.1")
        except OSError as e:
            raise DeviceUnavailable(INSTALL_HINTS["CUDA"] + " (the driver library libcuda.so.1 was not found)") from e
        u64p, vp = ctypes.POINTER(ctypes.c_uint64), ctypes.c_void_p
        ip, ui = ctypes.POINTER(ctypes.c_int), ctypes.c_uint
        # the _v2 entry points take 64-bit device pointers and sizes (the unsuffixed names are the 32-bit ABI)
        sigs: dict[str, list[type]] = {
            "cuInit": [ui],
            "cuDeviceGetCount": [ip],
            "cuDeviceGet": [ip, ctypes.c_int],
            "cuDeviceGetAttribute": [ip, ctypes.c_int, ctypes.c_int],
            "cuDeviceGetName": [ctypes.c_char_p, ctypes.c_int, ctypes.c_int],
            "cuDevicePrimaryCtxRetain": [ctypes.POINTER(vp), ctypes.c_int],
            "cuCtxSetCurrent": [vp],
            "cuCtxSynchronize": [],
            "cuMemAlloc_v2": [u64p, ctypes.c_size_t],
            "cuMemFree_v2": [ctypes.c_uint64],
            "cuMemcpyHtoD_v2": [ctypes.c_uint64, vp, ctypes.c_size_t],
            "cuMemcpyDtoH_v2": [vp, ctypes.c_uint64, ctypes.c_size_t],
            "cuMemcpyDtoD_v2": [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_size_t],
            "cuModuleLoadData": [ctypes.POINTER(vp), vp],
            "cuModuleLoadDataEx": [ctypes.POINTER(vp), vp, ui, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(vp)],
            "cuModuleGetFunction": [ctypes.POINTER(vp), vp, ctypes.c_char_p],
            "cuLaunchKernel": [vp, ui, ui, ui, ui, ui, ui, ui, vp, ctypes.POINTER(vp), ctypes.POINTER(vp)],
        }
        for name, argtypes in sigs.items():
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = argtypes, ctypes.c_int
        lib.cuGetErrorString.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
        lib.cuGetErrorString.restype = ctypes.c_int
        self.check(lib.cuInit(0), "cuInit")
        count = ctypes.c_int()
        self.check(lib.cuDeviceGetCount(ctypes.byref(count)), "cuDeviceGetCount")
        if count.value <= ordinal:
            raise DeviceUnavailable(f"CUDA: the driver sees {count.value} GPUs, so there is no GPU {ordinal}")
        dev = ctypes.c_int()
        self.check(lib.cuDeviceGet(ctypes.byref(dev), ordinal), "cuDeviceGet")
        self.device = dev.value
        major, minor = ctypes.c_int(), ctypes.c_int()
        self.check(lib.cuDeviceGetAttribute(ctypes.byref(major), _CC_MAJOR, self.device), "compute capability")
        self.check(lib.cuDeviceGetAttribute(ctypes.byref(minor), _CC_MINOR, self.device), "compute capability")
        self.arch = f"sm_{major.value}{minor.value}"
        name_buf = ctypes.create_string_buffer(256)
        self.check(lib.cuDeviceGetName(name_buf, 256, self.device), "cuDeviceGetName")
        self.name = name_buf.value.decode()
        self.context = ctypes.c_void_p()
        self.check(lib.cuDevicePrimaryCtxRetain(ctypes.byref(self.context), self.device), "cuDevicePrimaryCtxRetain")
        self.current()

    def current(self) -> None:
        """Make this GPU's context current on the calling thread (a context is current per thread)."""
        self.check(self.lib.cuCtxSetCurrent(self.context), "cuCtxSetCurrent")

    def check(self, status: int, call: str) -> None:
        if status != 0:
            text = ctypes.c_char_p()
            self.lib.cuGetErrorString(status, ctypes.byref(text))
            raise CUDAError(f"{call} failed: CUDA error {status} ({(text.value or b'unknown').decode()})")


class CUDAAllocator:
    """GPU memory with a cache of freed allocations by size (cuMemAlloc synchronizes the GPU; reuse does not)."""

    def __init__(self, driver: _Driver, limit: int = 4 << 30) -> None:
        self.driver, self.limit, self.held = driver, limit, 0
        self.free_list: dict[int, list[int]] = defaultdict(list)

    def alloc(self, nbytes: int) -> int:
        """The device address of `nbytes` of GPU memory."""
        nbytes = max(nbytes, 1)
        if kept := self.free_list.get(nbytes):
            self.held -= nbytes
            return kept.pop()
        ptr = ctypes.c_uint64()
        status = self.driver.lib.cuMemAlloc_v2(ctypes.byref(ptr), nbytes)
        if status != 0 and self.held:  # out of memory: give the cached allocations back and try once more
            self.release()
            status = self.driver.lib.cuMemAlloc_v2(ctypes.byref(ptr), nbytes)
        self.driver.check(status, f"cuMemAlloc({nbytes})")
        return ptr.value

    def free(self, address: int, nbytes: int) -> None:
        nbytes = max(nbytes, 1)
        if self.held + nbytes <= self.limit:
            self.free_list[nbytes].append(address)
            self.held += nbytes
        else:
            self.driver.check(self.driver.lib.cuMemFree_v2(address), "cuMemFree")

    def release(self) -> None:
        """Free every cached allocation."""
        for ptrs in self.free_list.values():
            for ptr in ptrs:
                self.driver.check(self.driver.lib.cuMemFree_v2(ptr), "cuMemFree")
        self.free_list.clear()
        self.held = 0

    def copyin(self, address: int, host: np.ndarray) -> None:
        """Host -> GPU (synchronous: `host` may be reused as soon as it returns)."""
        assert host.flags.c_contiguous
        self.driver.check(self.driver.lib.cuMemcpyHtoD_v2(address, host.ctypes.data, host.nbytes), "cuMemcpyHtoD")

    def copyout(self, host: np.ndarray, address: int) -> None:
        """GPU -> host; waits for the kernels before it on the default stream."""
        assert host.flags.c_contiguous
        self.driver.check(self.driver.lib.cuMemcpyDtoH_v2(host.ctypes.data, address, host.nbytes), "cuMemcpyDtoH")

    def copy(self, dst: int, src: int, nbytes: int) -> None:
        """GPU -> GPU, ordered after the kernels before it."""
        self.driver.check(self.driver.lib.cuMemcpyDtoD_v2(dst, src, nbytes), "cuMemcpyDtoD")


def launch_dims(program: ProgramSpec) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """(blocks, threads per block) per axis x, y, z of a program's launch (codegen/gpudims.py gives the work-items
    in all and per work-group, as OpenCL counts them; CUDA counts blocks), each launch dimension on the axis that
    `launch_order` gives it.

    >>> from zeptograd.codegen import ProgramSpec
    >>> launch_dims(ProgramSpec("k", (), "", (), 0, 0, launch_global=(1024, 3, 1), launch_local=(64, 1, 1)))
    ((16, 3, 1), (64, 1, 1))
    """
    total = tuple(program.launch_global) + (1,) * (3 - len(program.launch_global))
    local = tuple(program.launch_local) + (1,) * (3 - len(program.launch_local))
    grid, block = [1, 1, 1], [1, 1, 1]
    try:
        order = launch_order(program.uops)
    except ValueError as e:
        raise CUDAError(f"{program.name}: {e}") from e
    for n, axis in enumerate(order):  # the axes the renderer put each launch dimension on
        grid[axis], block[axis] = total[n] // max(local[n], 1), local[n]
    return (grid[0], grid[1], grid[2]), (block[0], block[1], block[2])


# the builds with every optimization, one at a time (NVRTC releases the GIL: the program goes on meanwhile)
_background = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="zg-nvrtc")


def _compile_to_cache(src: str, arch: str, name: str, path: Path) -> bytes:
    """The CUBIN of `src` with every optimization, written to the disk cache at `path` as well."""
    cubin = compile_cuda(src, arch, name).cubin
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_bytes(cubin)
        tmp.replace(path)  # atomic: a concurrent reader sees the whole file or none
    except OSError:
        pass  # a read-only cache folder only costs the next run a compile
    return cubin


def wait_for_compiles() -> None:
    """Wait until every background build (TieredKernel) has finished: a benchmark times the optimized kernels."""
    _background.submit(lambda: None).result()  # one worker: the builds submitted before are done


class TieredKernel:
    """A loaded kernel, `fn`, built in two tiers: a new kernel's first launch waits on NVRTC, so it gets a quick
    build (QUICK_OPTIONS, which cuts a first call by about a quarter) while the build with every
    optimization compiles in the background (`pending`); the first launch after that one is ready loads it and
    launches it from then on. Both compute the same thing: the options change how hard NVRTC optimizes, not what
    the IR says (no FMA it did not ask for in either).

    >>> TieredKernel("fn").current()
    'fn'
    """

    __slots__ = ("fn", "pending", "load")

    def __init__(self, fn: Any, pending: concurrent.futures.Future | None = None, load: Callable | None = None):
        self.fn, self.pending, self.load = fn, pending, load

    def current(self) -> Any:
        """The function to launch now: the optimized build once it is ready (a failed build raises here)."""
        if self.pending is not None and self.pending.done():
            assert self.load is not None
            self.fn, self.pending = self.load(self.pending.result()), None
        return self.fn


class CUDADevice:
    """Runs kernels rendered as CUDA C on GPU 0, compiled by NVRTC for its architecture."""

    name = "CUDA"

    def __init__(self) -> None:
        _load_nvrtc()  # a missing compiler is found before the GPU is touched
        self.driver = _Driver()
        # an H100's or H200's kernels are built for sm_90a, the arch-specific target that has the warpgroup MMA
        self.arch = "sm_90a" if self.driver.arch == "sm_90" else self.driver.arch
        self.renderer: CUDARenderer | PTXRenderer = CUDARenderer(self.arch)
        self.allocator = CUDAAllocator(self.driver)
        self._functions: dict[tuple[str, str], TieredKernel] = {}
        self._modules: list[ctypes.c_void_p] = []  # kept loaded for the session (their functions are cached)

    def function(self, src: str, name: str) -> TieredKernel:
        """The kernel `name` of CUDA C `src`, loaded (once per source): the CUBIN a run before compiled, from the
        disk cache (keyed by the source, the arch and the NVRTC that compiles it); else a quick build now and the
        one with every optimization in the background (TieredKernel), which is written to the cache."""
        if (kernel := self._functions.get((src, name))) is not None:
            return kernel
        nv = _load_nvrtc()
        options = (*COMPILE_OPTIONS, *speed_options())
        key = hashlib.sha256(f"{nv.path} {nv.version} {self.arch} {options}\n{src}".encode()).hexdigest()
        path = cache_dir() / f"cuda-{key}.cubin"
        load = functools.partial(self._load, name=name)
        try:
            kernel = TieredKernel(load(path.read_bytes()))
        except OSError:
            if QUICK_OPTIONS:
                full = _background.submit(_compile_to_cache, src, self.arch, name, path)
                kernel = TieredKernel(load(compile_cuda(src, self.arch, name, quick=True).cubin), full, load)
            else:
                kernel = TieredKernel(load(_compile_to_cache(src, self.arch, name, path)))
        self._functions[(src, name)] = kernel
        return kernel

    def _load(self, cubin: bytes, name: str) -> ctypes.c_void_p:
        module, fn = ctypes.c_void_p(), ctypes.c_void_p()
        self.driver.check(self.driver.lib.cuModuleLoadData(ctypes.byref(module), cubin), "cuModuleLoadData")
        self.driver.check(self.driver.lib.cuModuleGetFunction(ctypes.byref(fn), module, name.encode()), name)
        self._modules.append(module)
        return fn

    def runner(self, program: ProgramSpec) -> Callable[[Sequence[Buffer]], None]:
        kernel = self.function(program.src, program.name)
        # the kernel's parameters are the buffers it uses, in DEFINE_GLOBAL order: a buffer of the schedule item that
        # the kernel no longer reads has no parameter
        used = sorted(u.arg for u in program.uops if u.op is Ops.DEFINE_GLOBAL)
        (gx, gy, gz), (bx, by, bz) = launch_dims(program)
        lib, check, name = self.driver.lib, self.driver.check, program.name

        if 0 in (gx, gy, gz, bx, by, bz):  # nothing to compute (a launch of zero blocks is an error in CUDA)
            return lambda bufs: None

        def run(bufs: Sequence[Buffer]) -> None:
            # cuLaunchKernel takes a pointer to each argument's value; it copies them before returning
            values = [ctypes.c_uint64(bufs[i].address) for i in used]
            params = (ctypes.c_void_p * max(len(used), 1))(*[ctypes.addressof(v) for v in values])
            check(lib.cuLaunchKernel(kernel.current(), gx, gy, gz, bx, by, bz, 0, None, params, None), f"launch {name}")
            if DEBUG.value >= 2:  # DEBUG=2 prints each kernel's time: wait for it (launches are asynchronous)
                check(lib.cuCtxSynchronize(), f"run {name}")

        return run

    def synchronize(self) -> None:
        """Wait for every kernel launched so far (launches are asynchronous; copies to the host wait anyway)."""
        self.driver.check(self.driver.lib.cuCtxSynchronize(), "cuCtxSynchronize")


# cuda.h: CUjit_option values for the JIT's error log
_JIT_ERROR_LOG_BUFFER, _JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 5, 6


class PTXDevice(CUDADevice):
    """Runs kernels rendered as PTX (renderer/ptx.py) on GPU 0: the driver JIT-compiles the PTX text when it is
    loaded (cuModuleLoadDataEx), so this device needs the GPU driver only, not NVRTC. Memory, copies and launches
    are the CUDA device's. The PTX names `.target sm_80` (or the GPU's own arch when that is older) and ISA 8.0,
    which every CUDA 12 and 13 driver reads.

    >>> PTXDevice.name
    'PTX'
    """

    name = "PTX"

    def __init__(self) -> None:
        self.driver = _Driver()
        self.arch = self.driver.arch
        self.renderer = PTXRenderer(self.arch if int(self.arch[3:]) < 80 else "sm_80")
        self.allocator = CUDAAllocator(self.driver)
        self._functions = {}
        self._modules = []

    def function(self, src: str, name: str) -> TieredKernel:
        """The kernel `name` of PTX `src`, JIT-compiled by the driver and loaded (once per source)."""
        if (kernel := self._functions.get((src, name))) is not None:
            return kernel
        module, fn = ctypes.c_void_p(), ctypes.c_void_p()
        log = ctypes.create_string_buffer(16384)
        options = (ctypes.c_int * 2)(_JIT_ERROR_LOG_BUFFER, _JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
        values = (ctypes.c_void_p * 2)(ctypes.cast(log, ctypes.c_void_p), ctypes.c_void_p(len(log)))
        image = ctypes.create_string_buffer(src.encode())  # PTX is loaded as NUL-terminated text
        status = self.driver.lib.cuModuleLoadDataEx(ctypes.byref(module), image, 2, options, values)
        if status != 0:
            text = log.value.decode(errors="replace")
            try:
                self.driver.check(status, "cuModuleLoadDataEx")
            except CUDAError as e:
                raise CUDACompileError(f"the driver's JIT rejected the PTX of {name}: {e}\n{text}\n{src}") from e
        self.driver.check(self.driver.lib.cuModuleGetFunction(ctypes.byref(fn), module, name.encode()), name)
        self._modules.append(module)
        kernel = self._functions[(src, name)] = TieredKernel(fn)
        return kernel


def driver_problem() -> str | None:
    """Why no kernel can run on an NVIDIA GPU here (None: one can): no driver library, or no GPU."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return INSTALL_HINTS["CUDA"] + " (the driver library libcuda.so.1 was not found: no NVIDIA driver)"
    count = ctypes.c_int()
    if lib.cuInit(0) != 0 or lib.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value == 0:
        return INSTALL_HINTS["CUDA"] + " (the NVIDIA driver is installed but sees no GPU)"
    return None


def cuda_problem() -> str | None:
    """Why the CUDA device cannot run here (None: it can): no NVRTC, no driver library, or no GPU."""
    if (problem := nvrtc_problem()) is not None:
        return problem
    return driver_problem()
