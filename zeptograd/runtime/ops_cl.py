"""The CL device: OpenCL C kernels built and launched through pyopencl, on the first device of the first OpenCL
platform (PoCL's CPU device where it is installed by `pip install "pyopencl[pocl]"`).

Memory: a buffer's bytes stay in the host allocation every device uses (runtime/buffer.py), and the OpenCL buffer
wraps it (`CL_MEM_USE_HOST_PTR`). On a device that shares host memory (PoCL's CPU device, an integrated GPU) the
kernel works on those bytes in place, so a copy to or from another device, `.numpy()` and the memory planner's
windows into an arena are host copies and views, as on the CPU device. Each launch waits for its kernel to
finish: the host may read the bytes as soon as `run` returns. A device that does not share host memory is
refused at start (it would need explicit copies, not written yet).

Programs are built once per distinct source (a hash of it) and kept for the session; PoCL keeps its own disk
cache of built kernels. A kernel is launched over the global and local sizes its SPECIAL indices ask for
(codegen/gpudims.py).
"""

from __future__ import annotations

import hashlib
import os
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from zeptograd.codegen import ProgramSpec
from zeptograd.renderer.host import HostCPU
from zeptograd.renderer.opencl import OpenCLRenderer
from zeptograd.runtime.buffer import Buffer
from zeptograd.runtime.device import INSTALL_HINTS, DeviceUnavailable
from zeptograd.uop.ops import Ops

# OpenCL allows float division and sqrt 2.5-3 ulp off unless asked: rounded correctly, as on the CPU and the
# PYTHON reference
BUILD_OPTIONS = ["-cl-fp32-correctly-rounded-divide-sqrt"]


class CLCompileError(RuntimeError):
    """The OpenCL compiler rejected a generated kernel (a renderer bug: the message has the source)."""


def pyopencl() -> Any:
    """The `pyopencl` module; DeviceUnavailable naming what to install when it is missing."""
    # PoCL's worker threads each pinned to a core (read when PoCL starts, at the first platform query): unpinned,
    # two of them shared a core after other work (the CPU device's pool, numpy) and a 4096^2 row sum took 2.3-3.3
    # ms for 4-5 launches before it came down to 1.4; pinned, 1.7 in the same sequence, as the CPU device's 1.6
    os.environ.setdefault("POCL_AFFINITY", "1")
    try:
        import pyopencl as cl
    except ImportError as e:
        raise DeviceUnavailable(INSTALL_HINTS["CL"]) from e
    return cl


def pocl_kernel_attributes(device: Any, host: HostCPU) -> str:
    """The attribute that lets PoCL inline its builtins into our kernels on this CPU ("" where none is needed).

    PoCL compiles a kernel for the host CPU as its LLVM names it and links builtins (vloadN, select, fma, trunc)
    built for a generic CPU of the same class. LLVM inlines a call only where the caller has every target feature
    of the callee: LLVM 14 takes this Xeon for a Rocket Lake, which lacks the CLWB of PoCL's AVX-512 builtins, so
    every builtin stayed a call (exp 2^22, 16 lanes: 3.9 ms; inlined 1.0). Where the `host` CPU PoCL runs on has
    CLWB, the kernel says so.
    """
    pocl_cpu = "Portable Computing Language" in device.platform.name and device.type & pyopencl().device_type.CPU
    return '__attribute__((target("clwb")))' if pocl_cpu and "clwb" in host.flags else ""


class CLDevice:
    """Runs kernels rendered as OpenCL C on the first OpenCL device (PoCL on the CPU here). `without` names
    extensions to render as if the device lacked them (`CLDevice(frozenset({"cl_khr_fp16"}))`: half emulated),
    so that what a device without them runs can be tested on one that has them."""

    name = "CL"

    def __init__(self, without: frozenset[str] = frozenset()) -> None:
        cl = self.cl = pyopencl()
        platforms = cl.get_platforms()
        if not platforms or not platforms[0].get_devices():
            raise DeviceUnavailable(f"no OpenCL device found; {INSTALL_HINTS['CL']}")
        self.device = platforms[0].get_devices()[0]
        if not self.device.host_unified_memory:
            raise DeviceUnavailable(f"{self.device.name}: the CL device runs only where OpenCL shares host memory")
        self.context = cl.Context([self.device])
        self.queue = cl.CommandQueue(self.context)
        # vectors as wide as the device prefers for float (PoCL with AVX-512: 16; a GPU that says 1 still gets 4,
        # for its wide loads): on PoCL here 16 lanes took relu(a*b+c) from 0.50 to 0.80 of the CPU device's speed
        preferred = self.device.preferred_vector_width_float
        lanes = 16 if preferred >= 16 and self._builds_for_avx512() else 8 if preferred >= 8 else 4
        extensions = frozenset(self.device.extensions.split()) - without
        on_cpu = bool(self.device.type & cl.device_type.CPU)
        # a CPU driver (PoCL) runs the kernels on the host's CPU: its facts (caches, registers, CLWB) apply
        host = HostCPU.read() if on_cpu else HostCPU()
        self.renderer = OpenCLRenderer(extensions, lanes, pocl_kernel_attributes(self.device, host), host)
        self.renderer.max_local_size = min(OpenCLRenderer.max_local_size, self.device.max_work_group_size)
        self.renderer.local_memory_bytes = int(self.device.local_mem_size)
        # a CPU driver (PoCL) runs work-groups on the host's cores: the CPU's layouts for its caches pay there too
        # (B in panels keeps a large matmul's reads in cache)
        self.renderer.runs_on_cpu = on_cpu
        self._kernels: dict[tuple[str, str], Any] = {}

    def _builds_for_avx512(self) -> bool:
        """Does the driver compile 16-float vectors for AVX-512 (not only a CPU device that has it)? PoCL names the
        host CPU as its LLVM knows it: an AMD Zen 4 (AVX-512) it took for a Zen 3 (none), though it preferred 16
        lanes, and float16 kernels that call its builtins crashed (clang: "without 'avx512f' enabled changes the
        ABI"). A kernel that passes a float16 to a builtin is built once to see whether the compiler says so."""
        if not self.device.type & self.cl.device_type.CPU:
            return True
        program = self.cl.Program(self.context, "__kernel void k(__global float16* a) { a[0] = exp(a[0]); }")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # pyopencl's CompilerWarning: the log is read below
            program.build(options=BUILD_OPTIONS)
        log = program.get_build_info(self.device, self.cl.program_build_info.LOG)
        return "without 'avx512f' enabled" not in log

    def kernel(self, src: str, name: str) -> Any:
        """The kernel `name` of OpenCL source `src`, built on first use."""
        key = (hashlib.sha256(src.encode()).hexdigest(), name)
        if (hit := self._kernels.get(key)) is None:
            try:
                built = self.cl.Program(self.context, src).build(options=BUILD_OPTIONS)
            except self.cl.RuntimeError as e:
                raise CLCompileError(f"OpenCL rejected the kernel {name}:\n{e}\n--- source ---\n{src}") from e
            hit = self._kernels[key] = self.cl.Kernel(built, name)
        return hit

    def cl_buffer(self, buf: Buffer) -> Any:
        """The OpenCL buffer over `buf`'s host bytes (made once per Buffer, kept on it)."""
        mem = getattr(buf, "_cl_mem", None)
        if mem is None:
            raw = buf.as_bytes()
            if raw.nbytes == 0:
                raw = np.zeros(1, np.uint8)  # OpenCL has no empty buffer; nothing reads it
            flags = self.cl.mem_flags.READ_WRITE | self.cl.mem_flags.USE_HOST_PTR
            mem = self.cl.Buffer(self.context, flags, hostbuf=raw)
            buf._cl_mem = mem  # type: ignore[attr-defined]
        return mem

    def runner(self, program: ProgramSpec) -> Callable[[Sequence[Buffer]], None]:
        kernel = self.kernel(program.src, program.name)
        global_size, local_size = program.launch_global, program.launch_local
        queue = self.queue
        variables = [u for u in program.uops if u.op is Ops.DEFINE_VAR]
        if variables:
            raise NotImplementedError("symbolic variables on the CL device")

        # a kernel's parameters are the buffers it uses, in DEFINE_GLOBAL order (one the kernel no longer reads is
        # not a parameter; the CPU's C ignores it as an extra argument, OpenCL refuses it)
        used = sorted(u.arg for u in program.uops if u.op is Ops.DEFINE_GLOBAL)

        def run(bufs: Sequence[Buffer]) -> None:
            for position, i in enumerate(used):
                kernel.set_arg(position, self.cl_buffer(bufs[i]))
            self.cl.enqueue_nd_range_kernel(queue, kernel, global_size, local_size)
            queue.finish()  # the host reads the bytes next

        return run
