"""Device memory. Both devices keep a buffer's bytes in a numpy array (the CPU passes its address to
compiled C; the PYTHON device indexes it), so a copy between them is a numpy copy.

Allocation goes through a pool that reuses freed memory: a fresh 64 MiB array costs more in page faults
than the kernel that fills it. A freed allocation is kept (up to POOL_LIMIT bytes in all) for the next
allocation of the same byte size on the same device. Each BUFFER node of the tensor graph has one Buffer, made
on first use and dropped (its memory back to the pool) when no graph holds the node any more. A Buffer can also
be a window of a larger base Buffer: the memory planner (engine/memory.py) lays a schedule's intermediates out
that way. `GlobalCounters.mem_used` counts the bytes of allocations in use (a window counts nothing: its base
does), `GlobalCounters.mem_peak` the most in use since `GlobalCounters.reset()`. A DISK buffer's memory is a
read-only map of its file (runtime/ops_disk.py): it is not allocated, pooled or counted.

Memory shared with other libraries (DLPack, runtime/dlpack.py): a Buffer lent out is kept alive by what it was lent
through until the borrower lets go, so its allocation reaches the pool only then; a Buffer over borrowed memory
(`Buffer.over`) keeps its lender's array alive and gives nothing to the pool.
"""

from __future__ import annotations

import weakref
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import numpy as np

from zeptograd.dtype import DType, np_dtype
from zeptograd.helpers import GlobalCounters
from zeptograd.runtime.device import DEVICE_MEMORY
from zeptograd.uop.ops import Ops, UOp

POOL_LIMIT = 1 << 30  # bytes of freed memory kept for reuse


ALIGN = 64  # bytes: a cache line, and what vector loads of whole lines want


def aligned_empty(nbytes: int) -> np.ndarray:
    """`nbytes` of fresh memory starting on an ALIGN-byte boundary (numpy's own start only on 16)."""
    raw = np.empty(max(nbytes, 1) + ALIGN, dtype=np.uint8)
    start = -raw.ctypes.data % ALIGN
    return raw[start : start + max(nbytes, 1)]


class _Pool:
    """Freed allocations kept for reuse, by device and byte size, up to `limit` bytes in all (an allocation
    that would go over the limit is dropped: numpy frees it)."""

    def __init__(self, limit: int = POOL_LIMIT) -> None:
        # each kept allocation with its address (numpy's .ctypes.data costs a microsecond)
        self.free: dict[tuple[str, int], list[tuple[np.ndarray, int]]] = defaultdict(list)
        self.held = 0
        self.limit = limit

    def take(self, device: str, nbytes: int) -> np.ndarray:
        """A freed allocation of exactly `nbytes` on `device` if one is kept, else a fresh one."""
        return self.take_addressed(device, nbytes)[0]

    def take_addressed(self, device: str, nbytes: int) -> tuple[np.ndarray, int]:
        """`take`, and the allocation's address."""
        if kept := self.free.get((device, nbytes)):
            self.held -= nbytes
            return kept.pop()
        raw = aligned_empty(nbytes)
        return raw, raw.ctypes.data

    def give(self, device: str, raw: np.ndarray, nbytes: int, address: int | None = None) -> None:
        """Keep `raw` (an allocation of `nbytes` on `device` that nothing uses any more; at `address`, if the
        caller knows it) for the next `take`."""
        if self.held + nbytes <= self.limit:
            self.free[(device, nbytes)].append((raw, raw.ctypes.data if address is None else address))
            self.held += nbytes

    def clear(self) -> None:
        """Drop every kept allocation."""
        self.free.clear()
        self.held = 0


pool = _Pool()


def _allocator(device: str) -> Any:
    """The allocator of a device with memory of its own (the device is opened on first use)."""
    from zeptograd.runtime.device import Device

    return Device[device].allocator


class Buffer:
    """`size` elements of `dtype` on `device`, allocated on first use: memory of its own (from the pool), or,
    after `place`, a window of a larger base buffer (the memory planner puts intermediates there)."""

    def __init__(self, device: str, size: int, dtype: DType):
        self.device, self.size, self.dtype = device, size, dtype
        self.nbytes = size * dtype.itemsize
        self.base: Buffer | None = None
        self.offset = 0  # in bytes, into base
        self._raw: np.ndarray | None = None  # the allocation this buffer owns (None for a view of a base)
        self._array: np.ndarray | None = None
        self.address = 0
        # memory of the device's own (a GPU's), reached through its allocator, not as a numpy array
        self._device_memory = device in DEVICE_MEMORY
        self._owned = False  # device memory: whether this buffer allocated it (a window of a base did not)
        self._disk = device[:5] == "DISK:"  # a file's bytes, mapped (runtime/ops_disk.py)
        # counts the writes into the buffer that zeptograd makes (kernels, copies, copy-ins), so that a value computed
        # from it can tell it is stale (TinyJit's hoisted kernels); `shared`: another library may write its memory
        # (lent to or from it), which no count sees
        self.version = 0
        self.shared = False

    @property
    def allocated(self) -> bool:
        return self._array is not None or self.address != 0

    def allocate(self) -> Buffer:
        """Allocate the buffer's memory if it has none yet (host memory, or the device's own)."""
        if self._device_memory:
            if self.address == 0:
                if self.base is not None:
                    self.address = self.base.allocate().address + self.offset
                else:
                    self._allocator = _allocator(self.device)
                    self.address = self._allocator.alloc(self.nbytes)
                    self._owned = True
                    GlobalCounters.mem_used += self.nbytes
                    if GlobalCounters.mem_used > GlobalCounters.mem_peak:
                        GlobalCounters.mem_peak = GlobalCounters.mem_used
        elif self._array is None:
            self.array()
        return self

    @classmethod
    def over(cls, device: str, dtype: DType, memory: np.ndarray) -> Buffer:
        """A buffer of `device` (one whose memory is host memory) in the C-contiguous numpy array `memory`, not a copy
        of it: memory lent by another library, which the buffer keeps alive (through the array's `.base`) and never
        gives to the pool.

        >>> import numpy as np
        >>> from zeptograd.dtype import dtypes
        >>> memory = np.arange(3, dtype=np.int32)
        >>> buf = Buffer.over("CPU", dtypes.int32, memory)
        >>> memory[0] = 7
        >>> buf.numpy().tolist(), buf.address == memory.ctypes.data
        ([7, 1, 2], True)
        """
        if device in DEVICE_MEMORY:
            raise ValueError(f"Buffer.over: {device} keeps buffers in its own memory, not in host arrays")
        if memory.dtype != np_dtype(dtype) or not memory.flags.c_contiguous:
            raise ValueError(f"Buffer.over: needs a C-contiguous {np_dtype(dtype)} array, got {memory.dtype}")
        buf = cls(device, memory.size, dtype)
        buf._array = memory.reshape(-1)
        buf.address = memory.ctypes.data
        buf.shared = True
        return buf

    def place(self, base: Buffer, offset: int) -> None:
        """Make this buffer bytes `offset .. offset + nbytes` of `base` (before it is allocated)."""
        if self.allocated:
            raise RuntimeError(f"{self!r} is allocated already; it cannot move into another buffer")
        if base.device != self.device or not 0 <= offset <= offset + self.nbytes <= base.nbytes:
            raise ValueError(f"{self!r} does not fit in {base!r} at byte {offset}")
        self.base, self.offset = base, offset

    def as_bytes(self) -> np.ndarray:
        """The buffer's memory as a flat uint8 array (allocating it first)."""
        return self.array().view(np.uint8)

    def array(self) -> np.ndarray:
        """The buffer's memory as a flat numpy array (allocating it first)."""
        if self._device_memory:
            raise RuntimeError(f"{self!r} lives in {self.device} memory, not the host's: .numpy() copies it out")
        if self._array is None:
            if self.base is not None:
                raw = self.base.as_bytes()[self.offset : self.offset + self.nbytes]
                address = raw.ctypes.data
            elif self._disk:
                from zeptograd.runtime.device import Device

                raw = Device[self.device].map(self.nbytes)
                address = raw.ctypes.data
            else:
                raw, address = pool.take_addressed(self.device, self.nbytes)
                self._raw = raw
                GlobalCounters.mem_used += self.nbytes
                if GlobalCounters.mem_used > GlobalCounters.mem_peak:
                    GlobalCounters.mem_peak = GlobalCounters.mem_used
            self._array = raw[: self.nbytes].view(np_dtype(self.dtype))
            self.address = address
        return self._array

    def _writable(self) -> None:
        if self._disk:
            raise RuntimeError(f"{self!r}: the DISK device is read-only (its file is mapped for reading)")

    def copyin(self, data: np.ndarray) -> Buffer:
        self._writable()
        self.version += 1
        if self._device_memory:
            host = np.ascontiguousarray(np.broadcast_to(data.reshape(-1), (self.size,)), dtype=np_dtype(self.dtype))
            _allocator(self.device).copyin(self.allocate().address, host)
            return self
        self.array()[:] = data.reshape(-1)
        return self

    def numpy(self) -> np.ndarray:
        """A copy of the contents."""
        if self._device_memory:
            out = np.empty(self.size, np_dtype(self.dtype))
            _allocator(self.device).copyout(out, self.allocate().address)
            return out
        return self.array().copy()

    def copy_from(self, src: Buffer) -> None:
        """This buffer's contents become `src`'s (same size and dtype; any two devices)."""
        self._writable()
        self.version += 1
        if self._device_memory and src.device == self.device:
            _allocator(self.device).copy(self.allocate().address, src.allocate().address, self.nbytes)
        elif self._device_memory or src._device_memory:
            self.copyin(src.numpy())
        else:
            self.array()[:] = src.array()

    def __del__(self) -> None:
        if self._owned:
            GlobalCounters.mem_used -= self.nbytes
            self._allocator.free(self.address, self.nbytes)  # the allocator that gave it
        if self._raw is not None:
            GlobalCounters.mem_used -= self.nbytes
            pool.give(self.device, self._raw, self.nbytes, self.address)

    def __repr__(self) -> str:
        return f"<Buffer {self.device} {self.size} {self.dtype!r}>"


# by id: UOps compare with == by building a CMPEQ, so they cannot be WeakKeyDictionary keys. Each entry holds a weak
# reference to its node whose callback drops the entry when the node dies, before its id can be reused (a weakref
# callback costs a tenth of a weakref.finalize, and a buffer is made at every realize)
_buffers: dict[int, tuple[Buffer, weakref.ref]] = {}


def _dropper(key: int) -> Callable[[weakref.ref], None]:
    def drop(ref: weakref.ref) -> None:
        entry = _buffers.get(key)
        if entry is not None and entry[1] is ref:
            del _buffers[key]

    return drop


def adopt(u: UOp, buf: Buffer) -> None:
    """Make `buf` the Buffer of BUFFER node `u` (which has none yet): memory made elsewhere, as `Buffer.over`'s."""
    if u.op is not Ops.BUFFER or (u.arg[1], u.arg[2], u.dtype) != (buf.device, buf.size, buf.dtype):
        raise ValueError(f"adopt: {buf!r} cannot be the buffer of {u.op.name} {u.arg} {u.dtype!r}")
    if (entry := _buffers.get(id(u))) is not None and entry[1]() is u:
        raise ValueError(f"adopt: BUFFER {u.arg} has a Buffer already")
    _buffers[id(u)] = (buf, weakref.ref(u, _dropper(id(u))))


def buffer_for(u: UOp) -> Buffer:
    """The Buffer of a BUFFER node (made on first use; it lives as long as the node)."""
    if (entry := _buffers.get(id(u))) is not None and entry[1]() is u:
        return entry[0]
    if u.op is not Ops.BUFFER:
        raise ValueError(f"buffer_for takes a BUFFER node, got {u.op.name}")
    _, device, size = u.arg
    buf = Buffer(device, size, u.dtype)
    _buffers[id(u)] = (buf, weakref.ref(u, _dropper(id(u))))
    return buf


class VariableValue:
    """The value of a symbolic variable, passed to a kernel after its buffers. A kernel's arguments are passed by
    `.address`; a variable's is its value (the C and LLVM kernels declare it an integer parameter, which the x86-64
    and AArch64 calling conventions pass in the same registers as a pointer)."""

    __slots__ = ("variable", "value")

    def __init__(self, variable: UOp, value: int) -> None:
        self.variable, self.value = variable, value

    @property
    def address(self) -> int:
        return self.value
