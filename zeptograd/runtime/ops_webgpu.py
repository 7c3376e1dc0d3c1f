"""The WEBGPU device: kernels rendered as WGSL (renderer/wgsl.py), run through wgpu-py (wgpu-native) on the first
adapter it finds: a GPU's Vulkan/Metal/D3D12 driver, or on a machine without one Mesa's lavapipe, Vulkan on the
CPU (`apt-get install mesa-vulkan-drivers`).

Memory is the device's own (`DEVICE_MEMORY` in runtime/device.py), as for CUDA: a Buffer holds an address that
the allocator here gives out. An address is a handle (the wgpu buffer's number, in the high 32 bits) and a byte
offset into that buffer, so the memory planner's windows into an arena (base address + offset) work unchanged;
a kernel binds the wgpu buffer at that offset. Sizes are rounded up to 4 bytes (WebGPU copies and binds whole
32-bit words); copies to and from the host go through the queue (`write_buffer`, `read_buffer`, which waits
for the kernels before it).

Shader modules and pipelines are built once per distinct source and kept for the session. A kernel is
dispatched over its work-groups (`launch_grid`: more than 65535 on an axis are spread over x and y).

>>> webgpu_problem() is None or "wgpu" in webgpu_problem() or "adapter" in webgpu_problem()
True
"""

from __future__ import annotations

import hashlib
import importlib
import itertools
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from zeptograd.codegen import ProgramSpec
from zeptograd.helpers import DEBUG
from zeptograd.renderer.host import HostCPU
from zeptograd.renderer.wgsl import WGSLRenderer, launch_grid
from zeptograd.runtime.buffer import Buffer
from zeptograd.runtime.device import INSTALL_HINTS, DeviceUnavailable
from zeptograd.uop.ops import Ops

_HANDLE = 32  # an address is handle << 32 | offset: a wgpu buffer is at most 2 GiB here


class WebGPUCompileError(RuntimeError):
    """wgpu rejected a generated shader (a renderer bug: the message has wgpu's words and the source)."""


def wgpu_module() -> Any:
    """The `wgpu` module; DeviceUnavailable naming what to install when it is missing."""
    try:
        return importlib.import_module("wgpu")  # untyped: the device uses it as Any
    except ImportError as e:
        raise DeviceUnavailable(INSTALL_HINTS["WEBGPU"]) from e


_adapter: Any = None
_adapter_error: str | None = None


def _request_adapter() -> Any:
    global _adapter, _adapter_error
    if _adapter is not None:
        return _adapter
    if _adapter_error is not None:
        raise DeviceUnavailable(_adapter_error)
    wgpu = wgpu_module()
    try:
        _adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
    except Exception as e:  # wgpu-native raises its own errors (and RuntimeError) when no backend has an adapter
        _adapter = None
        detail = str(e).splitlines()[0] if str(e) else type(e).__name__
        _adapter_error = f"{INSTALL_HINTS['WEBGPU']} (wgpu found no adapter: {detail})"
    if _adapter is None:
        _adapter_error = _adapter_error or f"{INSTALL_HINTS['WEBGPU']} (wgpu found no adapter)"
        raise DeviceUnavailable(_adapter_error)
    return _adapter


def webgpu_problem() -> str | None:
    """Why the WEBGPU device cannot run here (None: it can): wgpu is not installed, or it finds no adapter."""
    try:
        _request_adapter()
    except DeviceUnavailable as e:
        return str(e)
    return None


def _round4(n: int) -> int:
    return max(4, -(-n // 4) * 4)


class WebGPUAllocator:
    """wgpu buffers by address (handle << 32 | offset), with a cache of freed ones by size (creating a buffer
    costs more than a small kernel)."""

    def __init__(self, device: Any, usage: int) -> None:
        self.device, self.usage = device, usage
        self.buffers: dict[int, Any] = {}
        self.handles = itertools.count(1)
        self.free_list: dict[int, list[int]] = defaultdict(list)

    def alloc(self, nbytes: int) -> int:
        """The address of `nbytes` (rounded up to a word) of device memory."""
        size = _round4(nbytes)
        if kept := self.free_list.get(size):
            return kept.pop()
        handle = next(self.handles)
        self.buffers[handle] = self.device.create_buffer(size=size, usage=self.usage)
        return handle << _HANDLE

    def free(self, address: int, nbytes: int) -> None:
        self.free_list[_round4(nbytes)].append(address)

    def resolve(self, address: int) -> tuple[Any, int]:
        """(the wgpu buffer, the byte offset in it) of an address."""
        return self.buffers[address >> _HANDLE], address & ((1 << _HANDLE) - 1)

    def copyin(self, address: int, host: np.ndarray) -> None:
        """Host -> device (the queue copies `host` before it returns)."""
        buf, offset = self.resolve(address)
        raw = np.ascontiguousarray(host).view(np.uint8).reshape(-1)
        if raw.nbytes % 4:  # the queue writes whole words: the padding lands in the allocation's slack
            raw = np.concatenate([raw, np.zeros(4 - raw.nbytes % 4, np.uint8)])
        if raw.nbytes:
            self.device.queue.write_buffer(buf, offset, raw)

    def copyout(self, host: np.ndarray, address: int) -> None:
        """Device -> host; waits for the kernels before it."""
        if host.nbytes == 0:
            return
        buf, offset = self.resolve(address)
        data = self.device.queue.read_buffer(buf, offset, _round4(host.nbytes))
        host.reshape(-1).view(np.uint8)[:] = np.frombuffer(data, np.uint8)[: host.nbytes]

    def copy(self, dst: int, src: int, nbytes: int) -> None:
        """Device -> device, ordered after the kernels before it."""
        if nbytes == 0:
            return
        (d, do), (s, so) = self.resolve(dst), self.resolve(src)
        encoder = self.device.create_command_encoder()
        encoder.copy_buffer_to_buffer(s, so, d, do, min(_round4(nbytes), s.size - so, d.size - do))
        self.device.queue.submit([encoder.finish()])


class WebGPUDevice:
    """Runs kernels rendered as WGSL on the first wgpu adapter (lavapipe on the CPU here)."""

    name = "WEBGPU"

    def __init__(self) -> None:
        self.wgpu = wgpu = wgpu_module()
        adapter = _request_adapter()
        self.adapter_name = f"{adapter.info.get('device', '?')} ({adapter.info.get('backend_type', '?')})"
        # the adapter's own limits, not WebGPU's defaults: bigger buffers, all the storage bindings it has
        wanted = ("max-storage-buffer-binding-size", "max-buffer-size", "max-storage-buffers-per-shader-stage")
        limits = {k: adapter.limits[k] for k in wanted if k in adapter.limits}
        self.device = adapter.request_device_sync(required_limits=limits)
        self.offset_alignment = int(adapter.limits.get("min-storage-buffer-offset-alignment", 256))
        usage = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST
        self.allocator = WebGPUAllocator(self.device, usage)
        on_cpu = adapter.info.get("adapter_type") == "CPU"
        # a CPU adapter (lavapipe) runs the shaders on the host's CPU: its caches and registers apply
        self.renderer = WGSLRenderer(HostCPU.read() if on_cpu else HostCPU())
        # a CPU adapter (lavapipe) runs a work-group's invocations on one core: plans for a CPU, not a GPU
        self.renderer.runs_on_cpu = on_cpu
        self._pipelines: dict[str, Any] = {}
        self._fence: int | None = None  # a word of device memory that synchronize() reads

    def pipeline(self, src: str, name: str) -> Any:
        """The compute pipeline of WGSL `src` with entry point `name` (built once per source)."""
        key = hashlib.sha256(src.encode()).hexdigest()
        if (hit := self._pipelines.get(key)) is None:
            try:
                module = self.device.create_shader_module(code=src)
                hit = self.device.create_compute_pipeline(
                    layout="auto", compute={"module": module, "entry_point": name}
                )
            except Exception as e:  # wgpu's validation errors: a shader the renderer got wrong
                raise WebGPUCompileError(f"wgpu rejected the kernel {name}:\n{e}\n--- source ---\n{src}") from e
            self._pipelines[key] = hit
        return hit

    def runner(self, program: ProgramSpec) -> Callable[[Sequence[Buffer]], None]:
        pipeline = self.pipeline(program.src, program.name)
        used = sorted(u.arg for u in program.uops if u.op is Ops.DEFINE_GLOBAL)
        groups = [g // max(n, 1) for g, n in zip(program.launch_global or (1,), program.launch_local or (1,))]
        grid = launch_grid(groups)
        if 0 in grid:
            return lambda bufs: None
        layout = pipeline.get_bind_group_layout(0)
        device, allocator, align = self.device, self.allocator, self.offset_alignment

        def run(bufs: Sequence[Buffer]) -> None:
            entries = []
            for i in used:
                wbuf, offset = allocator.resolve(bufs[i].allocate().address)
                if offset % align:
                    raise RuntimeError(f"{program.name}: buffer {i} at byte {offset}, not a multiple of {align}")
                size = min(_round4(bufs[i].nbytes), wbuf.size - offset)
                entries.append({"binding": i, "resource": {"buffer": wbuf, "offset": offset, "size": size}})
            group = device.create_bind_group(layout=layout, entries=entries)
            encoder = device.create_command_encoder()
            compute = encoder.begin_compute_pass()
            compute.set_pipeline(pipeline)
            compute.set_bind_group(0, group)
            compute.dispatch_workgroups(*grid)
            compute.end()
            device.queue.submit([encoder.finish()])
            if DEBUG.value >= 2:  # DEBUG=2 prints each kernel's time: wait for it (submissions are asynchronous)
                self.synchronize()

        return run

    def synchronize(self) -> None:
        """Wait for every kernel submitted so far: a read waits for the queue (wgpu-py 0.32's
        on_submitted_work_done_sync fails on a callback signature mismatch with its wgpu-native)."""
        if self._fence is None:
            self._fence = self.allocator.alloc(4)
        self.allocator.copyout(np.empty(1, np.uint32), self._fence)
