"""The device registry: `Device["CPU"]`, `Device.DEFAULT` (from `$DEVICE`, else CPU), and which devices this
machine can use (`Device.get_available_devices()`).

>>> Device.canonicalize("cpu")
'CPU'
>>> "CPU" in Device.get_available_devices()
True
"""

from __future__ import annotations

import importlib.util
import os
from typing import TYPE_CHECKING, Any

from zeptograd.codegen.tensor_cores import TensorCore, tensor_cores
from zeptograd.dtype import dtypes
from zeptograd.uop.ops import Ops

if TYPE_CHECKING:
    from zeptograd.renderer import Renderer

DEVICES = ("CPU", "PYTHON", "LLVM", "CL", "CUDA", "PTX", "TRITON", "WEBGPU", "HIP")
# the Python package each optional device needs, and what to install when it is missing
REQUIRES = {"LLVM": "llvmlite", "CL": "pyopencl", "WEBGPU": "wgpu"}
INSTALL_HINTS = {
    "LLVM": 'the LLVM device needs llvmlite: pip install -e ".[llvm]" (or pip install llvmlite)',
    "CL": 'the CL device needs pyopencl and an OpenCL driver: pip install -e ".[opencl]" (or "pyopencl[pocl]")',
    "CUDA": 'the CUDA device needs an NVIDIA GPU with its driver (libcuda.so.1) and NVRTC: pip install -e ".[cuda]" '
    "(or pip install nvidia-cuda-nvrtc nvidia-cuda-runtime), or a CUDA toolkit on the loader path",
    "PTX": "the PTX device needs an NVIDIA GPU with its driver (libcuda.so.1, which JIT-compiles the PTX)",
    "TRITON": 'the TRITON device needs Triton (pip install -e ".[triton]") and an NVIDIA GPU with its driver '
    "(libcuda.so.1); without a GPU, runtime/ops_triton.compile_triton still compiles",
    "HIP": "the HIP device renders and compiles AMD GPU kernels only (renderer/hip.py; runtime/ops_hip.compile_hip), "
    "it cannot run them: zeptograd has no AMD GPU runtime yet",
    "WEBGPU": "the WEBGPU device needs wgpu and a GPU driver (or Mesa's lavapipe on the CPU): "
    'pip install -e ".[webgpu]" (or pip install wgpu), and apt-get install mesa-vulkan-drivers without a GPU',
}
# devices whose buffers live in the device's own memory (not host memory): copies go through the device's allocator
DEVICE_MEMORY = ("CUDA", "PTX", "TRITON", "WEBGPU")
# devices that run kernels on the host's CPU on host memory (a copy between them is a host copy)
HOST_COMPILED = ("CPU", "LLVM")


def runs_in_order(device: str) -> bool:
    """Does `device` run a kernel's loops in their order, one iteration after another (no launch grid that makes its
    outer loops parallel work-items)? A scatter's loops must (`closedform.scatter_form`). CPU, LLVM and PYTHON do;
    the GPU-style devices launch their loops as a grid.

    >>> runs_in_order("CPU")
    True
    """
    if device in HOST_COMPILED:
        return True
    renderer: Renderer = Device[device].renderer
    return not renderer.has_local


def cpu_layouts(device: str) -> bool:
    """Do `device`'s kernels run on the host's CPU in vectors, so that layouts made for its caches pay (a
    large matmul's panels of B, a large convolution's padded copy)? CPU and LLVM, and a device whose renderer runs
    on the CPU and has vectors (CL on PoCL; not WEBGPU on lavapipe, whose kernels are scalar).

    >>> cpu_layouts("CPU"), cpu_layouts("PYTHON")
    (True, False)
    """
    if device in HOST_COMPILED:
        return True
    renderer: Renderer = Device[device].renderer
    return renderer.runs_on_cpu and renderer.max_lanes(Ops.LOAD, dtypes.float32) > 1


def padded_reads_in_place(device: str) -> bool:
    """Does a large convolution on `device` read its input where it lies, the padding as gated loads, rather than
    from a padded channels-last copy? The CPU device: a gated load is C's `g ? p[i] : 0.0f`, whose gate (it depends
    on the taps only) gcc computes outside the loop over the input channels, and the copy (0.5-1.2 ms for
    bench/ops.py's layer, 8% of the call) is gone, and small maps gain most. LLVM IR
    selects every gated load's address (in place it was much slower) and PoCL ran it 14% slower: they
    keep the copy. So does a CPU without 64-byte vectors: each gated load is a test and a branch in gcc's code, and
    with AVX2 it feeds 16 lanes of FMAs, not AVX-512's 32 (bench/ops.py's layer on an AMD EPYC without AVX-512, the
    kernels alone, medians of 9 alternating runs: 18.1 ms in place, 15.3 with the copy).

    >>> padded_reads_in_place("LLVM")
    False
    """
    if device != "CPU":
        return False
    renderer: Renderer = Device[device].renderer
    return renderer.max_lanes(Ops.MULACC, dtypes.float32) * 4 >= 64


def device_tensor_cores(device: str) -> tuple[TensorCore, ...]:
    """The tensor cores of `device`'s kernels: an open device's renderer's (an H100's knows its warpgroup MMA), else
    the device kind's.

    >>> device_tensor_cores("CPU")
    ()
    """
    base = device.split(":")[0]
    opened = Device._opened.get(base)
    return tuple((opened.renderer.tensor_cores if opened is not None else ()) or tensor_cores(base))


def _problem(base: str) -> str | None:
    """What keeps a device that needs more than a Python package from running here (None: nothing)."""
    if base == "CUDA":
        # no Python package: the driver and NVRTC libraries, and a GPU, are what it needs
        from zeptograd.runtime.ops_cuda import cuda_problem

        return cuda_problem()
    if base == "PTX":
        # the driver alone: it JIT-compiles PTX, so no NVRTC is needed
        from zeptograd.runtime.ops_cuda import driver_problem

        problem = driver_problem()
        return None if problem is None else problem.replace(INSTALL_HINTS["CUDA"], INSTALL_HINTS["PTX"])
    if base == "TRITON":
        from zeptograd.runtime.ops_triton import triton_device_problem

        return triton_device_problem()
    # WEBGPU: the package, then an adapter: wgpu without a driver (no GPU, no lavapipe) finds none
    from zeptograd.runtime.ops_webgpu import webgpu_problem

    return webgpu_problem()


def is_disk(device: str) -> bool:
    """Is canonical device name `device` a DISK device (a file's bytes, mapped into memory; runtime/ops_disk.py)?

    >>> is_disk("DISK:/tmp/w.bin"), is_disk("CPU")
    (True, False)
    """
    return device[:5] == "DISK:"


def disk_name(name: str) -> str:
    """The canonical name of DISK device `name` ("disk:path", any case): 'DISK:' and the absolute path of its file."""
    path = name.partition(":")[2]
    if not path:
        raise ValueError(f"the DISK device needs a file: 'disk:/path/to/file', got {name!r}")
    return "DISK:" + os.path.abspath(path)


class DeviceUnavailable(RuntimeError):
    """A device whose package is missing on this host (the message says what to install)."""


class _Device:
    def __init__(self) -> None:
        self._opened: dict[str, Any] = {}
        self._usable: dict[str, bool] = {}
        self._problems: dict[str, str] = {}  # why a device is not usable, where more is known than its hint
        # not checked here: a DEVICE whose package is missing fails at its first use, not at import
        self.DEFAULT: str = self._name(os.environ.get("DEVICE") or "CPU")

    def _name(self, name: str) -> str:
        if not isinstance(name, str):
            raise TypeError(f"a device is named by a string, got {type(name).__name__}: {name!r}")
        base = name.split(":")[0].upper()
        if base not in DEVICES and base != "DISK":
            raise ValueError(f"unknown device {name!r}; the devices are {', '.join(DEVICES)} and DISK:<file>")
        return base

    def canonicalize(self, name: str | None) -> str:
        """The registry's name for a device (`'cpu'` and `'CPU:0'` are `'CPU'`); None is the default.
        A device whose package is missing raises DeviceUnavailable naming what to install. A DISK device names
        its file, which it keeps: `'disk:x.bin'` is `'DISK:'` and the file's absolute path.

        >>> Device.canonicalize("disk:/tmp/w.bin")
        'DISK:/tmp/w.bin'
        """
        if name is None:
            return self.DEFAULT
        base = self._name(name)
        if base == "DISK":
            return disk_name(name)
        if not self.usable(base):
            raise DeviceUnavailable(self._problems.get(base) or INSTALL_HINTS[base])
        return base

    def usable(self, name: str) -> bool:
        """Whether device `name` can run here (its optional package is installed).

        >>> Device.usable("PYTHON")
        True
        """
        base = self._name(name)
        if base not in self._usable:
            if base == "HIP":
                self._usable[base] = False  # compile-only (INSTALL_HINTS says so)
            elif base in ("CUDA", "PTX", "TRITON", "WEBGPU"):
                if (problem := _problem(base)) is not None:
                    self._problems[base] = problem
                self._usable[base] = problem is None
            else:
                self._usable[base] = base not in REQUIRES or importlib.util.find_spec(REQUIRES[base]) is not None
        return self._usable[base]

    def get_available_devices(self) -> list[str]:
        """The devices this host can use, in registry order: `['CPU', 'PYTHON', 'LLVM', 'CL']` with llvmlite
        and pyopencl, 'CUDA' where there is an NVIDIA GPU, 'WEBGPU' where wgpu finds an adapter."""
        return [d for d in DEVICES if self.usable(d)]

    def __getitem__(self, name: str) -> Any:
        name = self.canonicalize(name)
        if name not in self._opened:
            if name == "CPU":
                from zeptograd.runtime.ops_cpu import CPUDevice

                self._opened[name] = CPUDevice()
            elif name == "CUDA":
                from zeptograd.runtime.ops_cuda import CUDADevice

                self._opened[name] = CUDADevice()
            elif name == "PTX":
                from zeptograd.runtime.ops_cuda import PTXDevice

                self._opened[name] = PTXDevice()
            elif name == "TRITON":
                from zeptograd.runtime.ops_triton import TritonDevice

                self._opened[name] = TritonDevice()
            elif name == "LLVM":
                from zeptograd.runtime.ops_llvm import LLVMDevice

                self._opened[name] = LLVMDevice()
            elif name == "CL":
                from zeptograd.runtime.ops_cl import CLDevice

                self._opened[name] = CLDevice()
            elif is_disk(name):
                from zeptograd.runtime.ops_disk import DiskDevice

                self._opened[name] = DiskDevice(name)
            elif name == "WEBGPU":
                from zeptograd.runtime.ops_webgpu import WebGPUDevice

                self._opened[name] = WebGPUDevice()
            else:
                from zeptograd.runtime.ops_python import PythonDevice

                self._opened[name] = PythonDevice()
        return self._opened[name]

    def __setattr__(self, key: str, value: Any) -> None:
        if key == "DEFAULT":
            value = self.canonicalize(value) if hasattr(self, "DEFAULT") else value
            if is_disk(value):
                raise ValueError(
                    f"{value} cannot be the default device: the DISK device holds a file and runs no kernels"
                )
        object.__setattr__(self, key, value)


Device = _Device()
