"""The DISK device in the tensor graph: tensors over a file's memory map (runtime/ops_disk.py), their views, and
copies from them; nothing else.

`Tensor.empty(n, dtype=dtypes.uint8, device="disk:/path/model.bin")` is a tensor over the file's first n bytes;
slicing it (`t[a:b]`), reshaping it and `bitcast` make tensors over other byte ranges of the same mapping, and
`t.to("CPU")` (or any compute device) copies the bytes of that range only: the operating system reads the pages
the copy touches. The DISK device runs no kernels: an op other than a movement view of its tensors, a bitcast or a
copy to another device is an error that says to copy the tensor to a compute device first.

Every DISK buffer is a window of one Buffer per file (`DiskDevice.file_buffer`), at a byte offset. A slice of a
plain view that is contiguous in the file (rows of the outer axis) makes a new window of exactly its bytes; other
views (a slice of an inner axis, a permute, an expand) stay lazy movement ops of their window, and a copy reads
only the bytes from the view's first element to its last, then applies the view on the target device.

>>> import os, tempfile
>>> import numpy as np
>>> from zeptograd import Tensor, dtypes
>>> path = os.path.join(tempfile.mkdtemp(), "w.bin")
>>> np.arange(6, dtype=np.float32).tofile(path)
>>> t = Tensor.empty(24, dtype=dtypes.uint8, device=f"disk:{path}")
>>> t[8:24].bitcast(dtypes.float32).reshape(2, 2).to("CPU").tolist()
[[2.0, 3.0], [4.0, 5.0]]
"""

from __future__ import annotations

import os

import numpy as np

from zeptograd.dtype import DType
from zeptograd.runtime.buffer import Buffer, buffer_for
from zeptograd.runtime.device import Device, is_disk
from zeptograd.uop.buffers import buffer_of, new_buffer, view_of
from zeptograd.uop.movement import strided_view
from zeptograd.uop.ops import GroupOp, Ops, UOp
from zeptograd.uop.shape import prod, strides_for

__all__ = ["is_disk", "disk_window", "disk_view", "disk_bitcast", "disk_copy", "disk_write"]


def disk_window(device: str, offset: int, size: int, dtype: DType) -> UOp:
    """A BUFFER node of `size` elements of `dtype` at byte `offset` of DISK device `device`'s file.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "b.bin")
    >>> _ = open(path, "wb").write(bytes(range(8)))
    >>> from zeptograd.dtype import dtypes
    >>> w = disk_window(Device.canonicalize(f"disk:{path}"), 2, 3, dtypes.uint8)
    >>> buffer_for(w).numpy().tolist()
    [2, 3, 4]
    """
    return _window_in(Device[device].file_buffer(), offset, size, dtype)


def _window_in(root: Buffer, offset: int, size: int, dtype: DType) -> UOp:
    """A BUFFER node of `size` elements of `dtype` at byte `offset` of base buffer `root`."""
    if offset < 0 or offset + size * dtype.itemsize > root.nbytes:
        raise ValueError(
            f"{root.device}: {size} elements of {dtype.name} at byte {offset} do not fit in the file's "
            f"{root.nbytes} bytes"
        )
    u = new_buffer(root.device, size, dtype)
    buffer_for(u).place(root, offset)
    return u


def _root(u: UOp) -> tuple[Buffer, int]:
    """The base buffer that BUFFER node `u` is a window of, and the window's byte offset in it."""
    buf = buffer_for(u)
    return (buf, 0) if buf.base is None else (buf.base, buf.offset)


def _no_kernels(u: UOp, device: str) -> RuntimeError:
    what = "a constant" if u.op is Ops.CONST else u.op.name
    return RuntimeError(
        f"{what} of a tensor on {device}: the DISK device holds a file's bytes and runs no kernels (only views: "
        "slices, reshapes, permutes, bitcasts; and copies to another device). Copy the tensor to a compute device "
        "first: t.to('CPU')"
    )


def disk_view(u: UOp, device: str) -> UOp:
    """`u`, a tensor-graph node on DISK device `device`, as the DISK device holds it: a slice of a plain view that is
    contiguous in the file (rows of the outer axis) becomes a plain view of a new window, exactly its bytes; other
    movement ops stay lazy views (a copy reads the bytes from their first element to their last: `disk_copy`).
    Anything that would compute (an ALU op, a cast, a reduction, an assignment) is an error."""
    if buffer_of(u) is not None:
        return u
    if u.op is Ops.SHRINK and (src := buffer_of(u.src[0])) is not None:
        sizes, strides = u.shape, strides_for(u.src[0].shape)
        if 0 not in sizes and _contiguous(sizes, strides):
            start = sum(b * s for (b, _), s in zip(u.arg, strides))
            root, offset = _root(src)
            return view_of(_window_in(root, offset + start * u.dtype.itemsize, prod(sizes), u.dtype), sizes)
        return u
    node = u
    while node.op in GroupOp.Movement:
        node = node.src[0]
    if node.op is not Ops.BUFFER:
        raise _no_kernels(u if node.op is Ops.CONST else _first_compute(u), device)
    return u


def _contiguous(sizes: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """Do `sizes` seen with `strides` lie in C order without gaps (axes of size 1 aside)?"""
    kept = [(n, s) for n, s in zip(sizes, strides) if n != 1]
    return all(s == c for (_, s), c in zip(kept, strides_for(tuple(n for n, _ in kept))))


def _first_compute(u: UOp) -> UOp:
    """The topmost node of `u`'s chain of movement ops that is not one (the op that would compute)."""
    while u.op in GroupOp.Movement:
        u = u.src[0]
    return u


def disk_bitcast(u: UOp, dtype: DType, device: str) -> UOp:
    """Plain view `u` of a DISK window read as `dtype`: a window of the same bytes (the last axis scales by the
    ratio of the item sizes, as torch's `view(dtype)`)."""
    if (src := buffer_of(u)) is None:
        raise RuntimeError(
            f"bitcast of a view of a tensor on {device}: the DISK device bitcasts whole windows of the file only "
            "(slices of the outer axis); copy the tensor to a compute device first: t.to('CPU')"
        )
    nbytes = prod(u.shape) * u.dtype.itemsize
    shape = u.shape
    if dtype.itemsize != u.dtype.itemsize:
        last = shape[-1] * u.dtype.itemsize if shape else 0
        if not shape or last % dtype.itemsize:
            raise ValueError(
                f"bitcast from {u.dtype!r} to {dtype!r}: the last axis of shape {shape} is {last} bytes, not a "
                f"multiple of {dtype.itemsize}"
            )
        shape = (*shape[:-1], last // dtype.itemsize)
    root, offset = _root(src)
    return view_of(_window_in(root, offset, nbytes // dtype.itemsize, dtype), shape)


def _strided(u: UOp) -> tuple[UOp, int, tuple[int, ...], tuple[int, ...]] | None:
    """Movement chain `u` over a BUFFER as that buffer, an element offset, sizes and strides (`as_strided`'s terms),
    or None where a flip or a pad is in the chain, or a reshape that does not keep the view's strides."""
    chain = []
    while u.op is not Ops.BUFFER:
        chain.append(u)
        u = u.src[0]
    offset, sizes = 0, u.shape
    strides: tuple[int, ...] = (1,)
    for m in reversed(chain):
        if m.op is Ops.SHRINK:
            offset += sum(b * s for (b, _), s in zip(m.arg, strides))
            sizes = tuple(e - b for b, e in m.arg)
        elif m.op is Ops.PERMUTE:
            sizes, strides = tuple(sizes[i] for i in m.arg), tuple(strides[i] for i in m.arg)
        elif m.op is Ops.EXPAND:
            strides = tuple(0 if n != new else s for n, new, s in zip(sizes, m.arg, strides))
            sizes = m.arg
        elif m.op is Ops.RESHAPE and (reshaped := _reshaped_strides(sizes, strides, m.arg)) is not None:
            sizes, strides = m.arg, reshaped
        else:
            return None
    return u, offset, sizes, strides


def _reshaped_strides(
    sizes: tuple[int, ...], strides: tuple[int, ...], shape: tuple[int, ...]
) -> tuple[int, ...] | None:
    """The strides of a view (`sizes`, `strides`) reshaped to `shape` without moving an element: when it is contiguous,
    or the reshape only adds or drops axes of size 1; else None."""
    if prod(sizes) == 0 or _contiguous(sizes, strides):
        return strides_for(shape)
    kept = [(n, s) for n, s in zip(sizes, strides) if n != 1]
    if [n for n, _ in kept] != [n for n in shape if n != 1]:
        return None
    it = iter(s for _, s in kept)
    return tuple(0 if n == 1 else next(it) for n in shape)


def disk_copy(u: UOp, device: str) -> UOp:
    """A copy of DISK node `u` on compute device `device`: the window of the file from the view's first element to
    its last is copied (only those bytes are read), then seen through movement ops there. A view that no strides
    describe (a flip, a pad) copies its whole window and applies its movement ops on the device."""
    if buffer_of(u) is not None:
        return UOp(Ops.COPY, u.dtype, (u,), device)
    if (strided := _strided(u)) is not None:
        buf, offset, sizes, strides = strided
        extent = 0 if 0 in sizes else 1 + sum((n - 1) * s for n, s in zip(sizes, strides))
        root, start = _root(buf)
        window = _window_in(root, start + offset * u.dtype.itemsize, extent, u.dtype)
        view = strided_view(UOp(Ops.COPY, u.dtype, (window,), device), sizes, strides)
        if view is not None:
            return view
    base = u
    while base.op is not Ops.BUFFER:
        base = base.src[0]
    return u.substitute({base: UOp(Ops.COPY, base.dtype, (base,), device)})


def disk_write(device: str, data: np.ndarray) -> None:
    """Make DISK device `device`'s file hold exactly `data`'s bytes (C order, little-endian): written to a new file
    that then replaces it, so a tensor that maps the old file keeps reading the old bytes (a file rewritten in place
    under a mapping could lose the pages the mapping reads).

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "out.bin")
    >>> disk_write("DISK:" + path, np.array([1, 2], np.uint16))
    >>> open(path, "rb").read()
    b'\\x01\\x00\\x02\\x00'
    """
    path = device[len("DISK:") :]
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "wb") as f:
            f.write(np.ascontiguousarray(data).astype(data.dtype.newbyteorder("<"), copy=False).tobytes())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
