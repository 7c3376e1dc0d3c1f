"""Device memory. Both devices keep a buffer's bytes in a numpy array (the CPU passes its address to
compiled C; the PYTHON device indexes it), so a copy between them is a numpy copy.

Allocation goes through a pool that reuses freed memory: a fresh 64 MiB array costs more in page faults
than the kernel that fills it. Each BUFFER node of the tensor graph has one Buffer, made on first use and
dropped (its memory back to the pool) when no graph holds the node any more.
"""

from __future__ import annotations

import weakref
from collections import defaultdict

import numpy as np

from zeptograd.dtype import DType
from zeptograd.helpers import GlobalCounters
from zeptograd.uop.ops import Ops, UOp

POOL_LIMIT = 1 << 30  # bytes of freed memory kept for reuse


class _Pool:
    def __init__(self) -> None:
        self.free: dict[int, list[np.ndarray]] = defaultdict(list)
        self.held = 0

    def take(self, nbytes: int) -> np.ndarray:
        if self.free[nbytes]:
            self.held -= nbytes
            return self.free[nbytes].pop()
        return np.empty(max(nbytes, 1), dtype=np.uint8)

    def give(self, raw: np.ndarray, nbytes: int) -> None:
        if self.held + nbytes <= POOL_LIMIT:
            self.free[nbytes].append(raw)
            self.held += nbytes


pool = _Pool()


def np_dtype(dt: DType) -> np.dtype:
    """The numpy dtype that stores `dt`."""
    if dt.fmt is None:
        raise TypeError(f"{dt!r} has no numpy equivalent and cannot be stored on this device yet")
    return np.dtype(dt.fmt)


class Buffer:
    """`size` elements of `dtype` on `device`, allocated on first use."""

    def __init__(self, device: str, size: int, dtype: DType):
        self.device, self.size, self.dtype = device, size, dtype
        self.nbytes = size * dtype.itemsize
        self._raw: np.ndarray | None = None
        self._array: np.ndarray | None = None
        self.address = 0

    @property
    def allocated(self) -> bool:
        return self._raw is not None

    def array(self) -> np.ndarray:
        """The buffer's memory as a flat numpy array (allocating it first)."""
        if self._array is None:
            self._raw = pool.take(self.nbytes)
            self._array = self._raw[: self.nbytes].view(np_dtype(self.dtype))
            self.address = self._raw.ctypes.data
            GlobalCounters.mem_used += self.nbytes
        return self._array

    def copyin(self, data: np.ndarray) -> Buffer:
        self.array()[:] = data.reshape(-1)
        return self

    def numpy(self) -> np.ndarray:
        """A copy of the contents."""
        return self.array().copy()

    def __del__(self) -> None:
        if self._raw is not None:
            GlobalCounters.mem_used -= self.nbytes
            pool.give(self._raw, self.nbytes)

    def __repr__(self) -> str:
        return f"<Buffer {self.device} {self.size} {self.dtype!r}>"


# by id: UOps compare with == by building a CMPEQ, so they cannot be WeakKeyDictionary keys; the finalizer
# drops the entry when the node dies, before its id can be reused
_buffers: dict[int, Buffer] = {}


def buffer_for(u: UOp) -> Buffer:
    """The Buffer of a BUFFER node (made on first use; it lives as long as the node)."""
    if u.op is not Ops.BUFFER:
        raise ValueError(f"buffer_for takes a BUFFER node, got {u.op.name}")
    if (buf := _buffers.get(id(u))) is None:
        _, device, size = u.arg
        buf = _buffers[id(u)] = Buffer(device, size, u.dtype)
        weakref.finalize(u, _buffers.pop, id(u), None)
    return buf
