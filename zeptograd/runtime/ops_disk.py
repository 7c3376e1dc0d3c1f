"""The DISK device: a file's bytes as tensor memory, mapped (`np.memmap`, read-only), never read whole.

A DISK device names its file: `Device["disk:/path/model.bin"]` is the `DiskDevice` of that file. Every DISK buffer
is a window of one Buffer per file (`DiskDevice.file_buffer`), the whole file as uint8, whose memory is the mapping
(`DiskDevice.map`): a window knows its byte offset, so a copy from it is a numpy copy of a slice of the map, and the
operating system reads only the pages the copy touches. The tensor graph's side (windows, views, copies, and the
errors for anything that would compute) is engine/disk.py.

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "w.bin")
>>> _ = open(path, "wb").write(bytes(range(8)))
>>> DiskDevice("DISK:" + path).map(4).tolist()
[0, 1, 2, 3]
"""

from __future__ import annotations

import os
import weakref

import numpy as np

from zeptograd.dtype import dtypes
from zeptograd.runtime.buffer import Buffer


class DiskDevice:
    """The DISK device of one file (`Device["disk:/path"]`): it maps the file; it compiles and runs nothing."""

    def __init__(self, device: str) -> None:
        self.device, self.path = device, device[len("DISK:") :]
        # the Buffer of the whole file, while a tensor uses it (it holds the mapping: a deleted file's space is
        # freed when its last tensor dies), and the file's identity when it was made (a file replaced since is
        # mapped again)
        self._file: weakref.ref[Buffer] | None = None
        self._stamp: tuple[int, ...] = ()

    def _stat(self) -> os.stat_result:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            raise FileNotFoundError(f"{self.device}: no such file: {self.path}") from None
        if not os.path.isfile(self.path):
            raise IsADirectoryError(f"{self.device}: {self.path} is not a file")
        return st

    def file_buffer(self) -> Buffer:
        """The whole file as a Buffer of uint8 (the base of every window into it)."""
        st = self._stat()
        stamp = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        buf = self._file() if self._file is not None else None
        if buf is None or stamp != self._stamp:
            buf = Buffer(self.device, st.st_size, dtypes.uint8)
            self._file, self._stamp = weakref.ref(buf), stamp
        return buf

    def map(self, nbytes: int) -> np.ndarray:
        """The file's first `nbytes` bytes, mapped read-only (nothing is read until an element is)."""
        size = self._stat().st_size
        if nbytes > size:
            raise ValueError(f"{self.device}: the file has {size} bytes, a buffer of {nbytes} bytes does not fit")
        if nbytes == 0:
            return np.zeros(0, np.uint8)  # mmap cannot map nothing
        return np.memmap(self.path, dtype=np.uint8, mode="r", shape=(nbytes,))
