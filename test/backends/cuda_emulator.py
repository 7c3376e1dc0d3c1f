"""The CUDA C that zeptograd renders, run on the CPU: a stand-in for the CUDA device where there is no GPU.

Each kernel's source is compiled by g++ (C++20) behind a small header that gives CUDA's names a CPU meaning:
`blockIdx`/`threadIdx` are thread-local, `__shared__` arrays are function statics (one block runs at a time),
`__syncthreads()` is a `std::barrier` over the block's threads, half is `_Float16`, and the bit-cast intrinsics
copy bytes. A launch runs the blocks one after another; a kernel without a barrier runs its threads one after
another too, one with a barrier runs them as real threads. Buffers live behind an allocator, as on a GPU, so the
device-memory path of Buffer runs as well.

What it checks: the CUDA C text (types, literals, casts, bit casts, math, shared memory, barriers) and the launch
geometry (`launch_dims`, the axis order) compute what numpy computes. What it cannot: the driver calls, NVRTC's
own reading of the source (test_cuda.py compiles every kernel with NVRTC for that), and the GPU's speed.

The op suite on it, from the repository root:
`DEVICE=CUDA PYTHONPATH=.:test/backends python -m pytest -p cuda_emulator test/ops/test_tensor_*.py`.
"""

from __future__ import annotations

import ctypes
import hashlib
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from zeptograd.codegen import ProgramSpec
from zeptograd.dtype import PtrDType
from zeptograd.renderer.cuda import CUDARenderer
from zeptograd.runtime.ops_cuda import launch_dims
from zeptograd.uop.ops import Ops

# <thread> and <barrier> only for kernels with a barrier: they triple g++'s time on a small kernel
BARRIER_SHIM = r"""
#include <thread>
#include <barrier>
#include <vector>
static std::barrier<>* zg_barrier = nullptr;
#define __syncthreads() zg_barrier->arrive_and_wait()
"""

SHIM = r"""
#include <cmath>
#include <cstring>
#undef INFINITY
#undef NAN
struct zg_dim3 { unsigned x, y, z; };
static thread_local zg_dim3 blockIdx, threadIdx;
static zg_dim3 blockDim, gridDim;
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
template <typename T, typename F> static inline T zg_copy_bits(F x) {
  T out;
  std::memcpy(&out, &x, sizeof(T));
  return out;
}
#define __int_as_float(x) zg_copy_bits<float>((int)(x))
#define __float_as_int(x) zg_copy_bits<int>((float)(x))
#define __uint_as_float(x) zg_copy_bits<float>((unsigned int)(x))
#define __float_as_uint(x) zg_copy_bits<unsigned int>((float)(x))
#define __longlong_as_double(x) zg_copy_bits<double>((long long)(x))
#define __double_as_longlong(x) zg_copy_bits<long long>((double)(x))
#define __short_as_half(x) zg_copy_bits<half>((short)(x))
#define __half_as_short(x) zg_copy_bits<short>((half)(x))
#define __ushort_as_half(x) zg_copy_bits<half>((unsigned short)(x))
#define __half_as_ushort(x) zg_copy_bits<unsigned short>((half)(x))
typedef _Float16 half;
"""

LAUNCHER = r"""
extern "C" void zg_launch(void** args, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz) {
  gridDim = {gx, gy, gz};
  blockDim = {bx, by, bz};
  for (unsigned z = 0; z < gz; z++) for (unsigned y = 0; y < gy; y++) for (unsigned x = 0; x < gx; x++) {
    auto thread = [=](unsigned tx, unsigned ty, unsigned tz) {
      blockIdx = {x, y, z};
      threadIdx = {tx, ty, tz};
      CALL;
    };
    RUN_BLOCK
  }
}
"""
RUN_THREADS = """
    std::barrier<> bar(bx * by * bz);
    zg_barrier = &bar;
    std::vector<std::thread> threads;
    for (unsigned tz = 0; tz < bz; tz++) for (unsigned ty = 0; ty < by; ty++) for (unsigned tx = 0; tx < bx; tx++)
      threads.emplace_back(thread, tx, ty, tz);
    for (auto& t : threads) t.join();
"""
RUN_SEQUENTIAL = """
    for (unsigned tz = 0; tz < bz; tz++) for (unsigned ty = 0; ty < by; ty++) for (unsigned tx = 0; tx < bx; tx++)
      thread(tx, ty, tz);
"""


class HostAllocator:
    """Device memory stood in for by host memory, behind the interface of CUDAAllocator."""

    def __init__(self) -> None:
        self.live: dict[int, np.ndarray] = {}

    def alloc(self, nbytes: int) -> int:
        raw = np.zeros(max(nbytes, 1), np.uint8)
        self.live[raw.ctypes.data] = raw
        return raw.ctypes.data

    def free(self, address: int, nbytes: int) -> None:
        del self.live[address]

    def copyin(self, address: int, host: np.ndarray) -> None:
        ctypes.memmove(address, host.ctypes.data, host.nbytes)

    def copyout(self, host: np.ndarray, address: int) -> None:
        ctypes.memmove(host.ctypes.data, address, host.nbytes)

    def copy(self, dst: int, src: int, nbytes: int) -> None:
        ctypes.memmove(dst, src, nbytes)


class EmulatedCUDA:
    """A device named CUDA that renders CUDA C and runs it on the CPU (see the module docstring)."""

    name = "CUDA"

    def __init__(self) -> None:
        self.renderer = CUDARenderer()
        # a WMMA is one warp's collective, and the emulator runs a block's threads one after another: no TC here
        # (test_wmma.py checks the tensor-core kernels on the PYTHON device's interpreter instead)
        self.renderer.tensor_cores = ()
        self.allocator = HostAllocator()
        self.dir = Path(tempfile.mkdtemp(prefix="zeptograd-cuda-emulator-"))
        self.launches = 0
        self._libs: list[Any] = []

    def _library(self, program: ProgramSpec) -> Any:
        params = [u for u in program.uops if u.op is Ops.DEFINE_GLOBAL]
        types = []
        for u in sorted(params, key=lambda u: u.arg):
            assert isinstance(u.dtype, PtrDType)
            types.append(self.renderer.type_name(u.dtype.base))
        call = f"{program.name}({', '.join(f'({t}*)args[{i}]' for i, t in enumerate(types))})"
        barrier = "__syncthreads" in program.src
        src = program.src.replace("#include <cuda_fp16.h>\n", "")
        launcher = LAUNCHER.replace("CALL", call).replace("RUN_BLOCK", RUN_THREADS if barrier else RUN_SEQUENTIAL)
        text = (BARRIER_SHIM if barrier else "") + SHIM + src + launcher
        key = hashlib.sha256(text.encode()).hexdigest()[:16]
        cpp, so = self.dir / f"{key}.cpp", self.dir / f"{key}.so"
        if not so.exists():
            cpp.write_text(text)
            cmd = ["g++", "-std=c++20", "-O1", "-shared", "-fPIC", "-pthread", "-w", str(cpp), "-o", str(so)]
            run = subprocess.run(cmd, capture_output=True, text=True)
            if run.returncode != 0:
                raise RuntimeError(f"g++ rejected the emulated kernel:\n{run.stderr}\n{text}")
        lib = ctypes.CDLL(str(so))
        self._libs.append(lib)
        return lib.zg_launch

    def runner(self, program: ProgramSpec) -> Callable[[Sequence[Any]], None]:
        fn = self._library(program)
        grid, block = launch_dims(program)
        used = sorted(u.arg for u in program.uops if u.op is Ops.DEFINE_GLOBAL)  # as the CUDA device passes them

        def run(bufs: Sequence[Any]) -> None:
            args = (ctypes.c_void_p * max(len(used), 1))(*[bufs[i].address for i in used])
            fn(args, *grid, *block)
            self.launches += 1

        return run

    def synchronize(self) -> None:
        pass


def install() -> EmulatedCUDA:
    """Register the emulator as this process's CUDA device (for a machine without a GPU)."""
    from zeptograd.runtime.device import Device

    dev = EmulatedCUDA()
    Device._opened["CUDA"], Device._usable["CUDA"] = dev, True
    return dev


def pytest_configure(config: Any) -> None:
    """As a pytest plugin: the op suite on the emulated CUDA device, without a GPU (slow: g++ per kernel),

    DEVICE=CUDA PYTHONPATH=.:test/backends python -m pytest -p cuda_emulator -n 2 test/ops/test_tensor_*.py
    """
    install()
