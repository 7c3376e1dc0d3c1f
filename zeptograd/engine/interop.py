"""Interop with numpy, PyTorch and any DLPack library: a tensor's memory lent to them, and theirs borrowed, without
copying where the memory can be shared (the Tensor methods in mixin/interop.py call these).

Which memory can be shared: the CPU, LLVM and PYTHON devices keep a buffer's bytes in a numpy array on the host, so
their buffers can be lent and borrowed as they are. The GPU devices' memory is their own: a tensor there is lent only
as a host copy, when the consumer asks for one (`dl_device=(1, 0)`).

Lending (`export`): the tensor is realized first where it is lazy (a lazy view realizes its base). A buffer, or a view
of one made of reshapes, permutes, shrinks and expands, is lent as strides over the buffer's own memory; a flip or a
pad of a buffer has no strides (DLPack consumers such as torch take no negative strides) and is lent as a copy. The
capsule keeps the Buffer object alive until the consumer lets go, so the allocation cannot return to the pool (and
from there to another buffer) while it is read, even after every tensor that used it is gone.

Borrowing (`adopt_array`): a C-contiguous, aligned, writable array becomes the memory of a BUFFER node as it is
(`Buffer.over`). Anything else (other strides, read-only memory, another device's memory, non-native byte order) is
copied, in C order, into a buffer of zeptograd's own. A transposed array is copied too: borrowed, it would be a
permute of the shared buffer, and a zeptograd view that is read is computed into a buffer of its own, after which
it would no longer see the lender's writes.

Writes reach the other side where the memory is shared: an in-place op of the other library is read by zeptograd's
next kernel, and `assign` stores into the same buffer (visible once realized: zeptograd is lazy). The engine does not
know that two BUFFER nodes over the same memory alias each other, so the order of writes between the two libraries
is the program's to keep, as it is between two torch tensors sharing memory. What zeptograd has already computed
from the shared memory (a view that was read, which holds its own copy) does not change when the other library
writes.
"""

from __future__ import annotations

import copy as copy_module
from typing import Any

import numpy as np

from zeptograd.dtype import NARROW, DType, dtypes, np_dtype
from zeptograd.engine import realize as engine
from zeptograd.helpers import JitError
from zeptograd.runtime.buffer import Buffer, adopt, buffer_for
from zeptograd.runtime.dlpack import (
    DEVICE_TYPE_NAMES,
    HOST_DEVICE_TYPES,
    KDL_CPU,
    KDL_CUDA,
    KDL_OPENCL,
    KDL_ROCM,
    KDL_WEBGPU,
    VERSION,
    Lent,
    to_capsule,
)
from zeptograd.tensor import Tensor
from zeptograd.uop.buffers import new_buffer, view_of
from zeptograd.uop.ops import GroupOp, Ops, UOp

# devices whose buffers are host memory that kernels read and write in place (CL maps its buffers: not these)
HOST_DEVICES = ("CPU", "LLVM", "PYTHON")
_DLPACK_DEVICE_TYPE = {"CUDA": KDL_CUDA, "PTX": KDL_CUDA, "TRITON": KDL_CUDA, "CL": KDL_OPENCL, "HIP": KDL_ROCM}
_DLPACK_DEVICE_TYPE["WEBGPU"] = KDL_WEBGPU
# ml_dtypes' types by name (its int4 ... keep a value per byte, as zeptograd does)
_ML_DTYPES = {dt.name: dt for dt in NARROW} | {"float8_e4m3fn": dtypes.fp8e4m3, "float8_e5m2": dtypes.fp8e5m2}
_NUMPY_DTYPES = {np_dtype(dt): dt for dt in dtypes.all if dt not in NARROW}


def _device_text(device: tuple[int, int]) -> str:
    return f"{DEVICE_TYPE_NAMES.get(device[0], f'device type {device[0]}')}:{device[1]}"


def dlpack_device(t: Tensor) -> tuple[int, int]:
    """DLPack's (device type, device id) of the memory `t` lives in (kDLCPU for the host-memory devices).

    >>> dlpack_device(Tensor([1.0]))
    (1, 0)
    """
    if t.device in HOST_DEVICES:
        return (KDL_CPU, 0)
    name, _, index = t.device.partition(":")
    return (_DLPACK_DEVICE_TYPE.get(name, 0), int(index or 0))


def _bottom(u: UOp) -> UOp:
    while u.op in GroupOp.Movement:
        u = u.src[0]
    return u


def _ints(arg: Any) -> bool:
    """Is a movement op's argument plain ints (not symbolic sizes)?"""
    if isinstance(arg, tuple):
        return all(_ints(a) for a in arg)
    return isinstance(arg, int)


def _reshaped(arr: np.ndarray, shape: tuple[int, ...]) -> np.ndarray | None:
    """`arr` in `shape` as a view of the same memory, or None where only a copy has that shape."""
    try:
        return arr.reshape(shape, copy=False)  # raises where strides cannot express the shape
    except ValueError:
        return None
    except TypeError:  # numpy before 2.1 has no copy=: setting the shape of a view raises instead of copying
        view = arr.view()
        try:
            view.shape = shape
        except AttributeError:
            return None
        return view


def _source(t: Tensor) -> UOp:
    """What `t` reads: a view, its base's node moved by the view's ops (a view that was read holds a copy, computed
    then, in its own buffer: lending that would not share the base's memory)."""
    if t._base is None:
        return t.uop
    u = t._base.uop
    for op, arg, _, starts in t._mops:
        u = UOp(op, u.dtype, (u, *starts), arg)
    return u


def _strided(t: Tensor) -> tuple[Buffer, np.ndarray] | None:
    """The Buffer that realized `t` reads and a numpy view of its memory with `t`'s elements, where `t` is that
    buffer seen through reshapes, permutes, shrinks and expands; None where it is not (a flip, a pad, a lazy graph)."""
    chain = []
    u = _source(t)
    while u.op in GroupOp.Movement:
        if len(u.src) > 1:
            return None  # a symbolic slice: where it starts is a variable's value, not a fixed stride
        chain.append(u)
        u = u.src[0]
    if u.op is not Ops.BUFFER:
        return None
    buf = buffer_for(u)
    buf.shared = True  # its memory goes to another library, whose writes into it zeptograd does not see
    arr: np.ndarray | None = buf.array()
    for node in reversed(chain):
        if not _ints(node.arg) or arr is None:
            return None
        if node.op is Ops.RESHAPE:
            arr = _reshaped(arr, node.arg)
        elif node.op is Ops.PERMUTE:
            arr = arr.transpose(node.arg)
        elif node.op is Ops.SHRINK:
            arr = arr[tuple(slice(b, e) for b, e in node.arg)]
        elif node.op is Ops.EXPAND:
            arr = np.broadcast_to(arr, node.arg)
        else:  # FLIP (negative strides) and PAD (elements that are not in memory)
            return None
    return None if arr is None else (buf, arr)


def _realized(t: Tensor) -> None:
    """Compute `t` if it is lazy, so that it reads a buffer: a view by realizing its base (it stays a view)."""
    if t._base is not None:
        t._base.realize()
    elif _bottom(t.uop).op is not Ops.BUFFER:
        t.realize()


def _copied(t: Tensor, device: str) -> tuple[Buffer, np.ndarray]:
    """A copy of `t`'s values in a fresh C-contiguous buffer on `device` (a host device), and its memory."""
    out = Tensor(UOp(Ops.CONTIGUOUS, t.dtype, (t.uop,)), device=t.device)
    if device != t.device:
        out = out.to(device)
    view = _strided(out.realize())
    assert view is not None, "a realized contiguous copy is a buffer"
    return view


def export(
    t: Tensor,
    stream: Any = None,
    max_version: tuple[int, int] | None = None,
    dl_device: tuple[int, int] | None = None,
    copy: bool | None = None,
) -> Any:
    """`t.__dlpack__(...)`: a DLPack capsule lending `t`'s memory (see the module's docstring for when it is a copy).
    `stream` is not used: host memory has no streams, and a realize has finished its kernels when it returns."""
    if engine.capturing is not None:
        raise JitError(
            "TinyJit: the function lent a tensor through DLPack while its kernels were captured; a replay would not "
            "lend it again. Return the tensor instead."
        )
    if copy is not None and not isinstance(copy, bool):
        raise TypeError(f"__dlpack__: copy must be True, False or None, got {copy!r}")
    versioned = max_version is not None and int(max_version[0]) >= 1
    here = dlpack_device(t)
    want = here if dl_device is None else (int(dl_device[0]), int(dl_device[1]))
    host = t.device in HOST_DEVICES
    if want != here and not (want == (KDL_CPU, 0) and not host):
        raise BufferError(f"__dlpack__: the tensor is on {t.device}; it cannot be lent on {_device_text(want)}")
    if not host:
        if want != (KDL_CPU, 0):
            raise BufferError(
                f"__dlpack__: the tensor is on {t.device}, whose memory is its own, not the host's; zeptograd lends "
                "host memory (CPU, LLVM, PYTHON devices): copy it with .to('CPU') first, or ask for a host copy with "
                "dl_device=(1, 0)"
            )
        if copy is False:
            raise BufferError(f"__dlpack__: copy=False, but the tensor is on {t.device}: lending it on the host copies")
        buf, view = _copied(t, "CPU")
        return to_capsule(view, t.dtype, keep=buf, versioned=versioned, copied=True)
    if copy:
        buf, view = _copied(t, t.device)
        return to_capsule(view, t.dtype, keep=buf, versioned=versioned, copied=True)
    _realized(t)
    strided = _strided(t)
    copied = strided is None
    if strided is None:
        if copy is False:
            raise BufferError(
                f"__dlpack__: copy=False, but the {t.shape} tensor is a view (a flip or a pad) that strides over its "
                "buffer cannot express: it needs a copy"
            )
        strided = _copied(t, t.device)
    buf, view = strided
    return to_capsule(view, t.dtype, keep=buf, versioned=versioned, copied=copied)


def _target(device: str | None, op: str) -> str:
    try:
        return engine.device_name(device)
    except (TypeError, ValueError) as e:
        raise type(e)(f"{op}: {e}") from None


def _from_bits(bits: np.ndarray, dt: DType, device: str) -> Tensor:
    """A tensor of `dt` in a fresh buffer holding a copy of `bits` (elements stored as `np_dtype(dt)`, any strides)."""
    node = new_buffer(device, bits.size, dt)
    buffer_for(node).copyin(np.ascontiguousarray(bits))
    return Tensor(view_of(node, bits.shape), device=device)


def adopt_array(arr: np.ndarray, dt: DType, device: str | None, copy: bool | None, op: str) -> Tensor:
    """A tensor of `dt` (stored as `arr.dtype`, which is `np_dtype(dt)` or its other byte order) with `arr`'s values:
    over `arr`'s memory where it can be shared (see the module's docstring), else a copy. `arr`'s `.base` chain keeps
    the lender's memory alive, and the tensor keeps `arr`. `copy`: True always copies, False raises a BufferError
    where a copy is needed. `device` None: the default device if its memory is the host's, else the CPU."""
    target = _target(device, op)
    home = target if target in HOST_DEVICES else "CPU"
    reason = None
    if copy:
        reason = "copy=True"
    elif not arr.dtype.isnative:
        reason = "its bytes are in the other byte order"
    elif not arr.flags.writeable:
        reason = "it is read-only"
    elif not arr.flags.aligned:
        reason = f"its address is not a multiple of its {arr.itemsize}-byte elements"
    elif not arr.flags.c_contiguous:
        reason = f"its strides {arr.strides} (bytes) are not C-contiguous"
    if arr.size == 0:
        out = _from_bits(np.empty(arr.shape, np_dtype(dt)), dt, home)  # no memory to share
    elif reason is not None:
        if copy is False:
            raise BufferError(f"{op}: copy=False, but the memory cannot be shared: {reason}")
        out = _from_bits(arr.astype(np_dtype(dt)), dt, home)  # astype copies, into native byte order, in C order
    else:
        node = new_buffer(home, arr.size, dt)
        adopt(node, Buffer.over(home, dt, arr))
        out = Tensor(view_of(node, arr.shape), device=home)
    if target != home:
        if copy is False:
            raise BufferError(f"{op}: copy=False, but {target}'s memory is its own: the values must be copied there")
        out = out.to(target).realize()
    return out


def _lend(obj: Any, on_host: bool, op: str) -> Any:
    """`obj.__dlpack__(...)`: asking for DLPack 1.x, and for a host copy where the memory is not on the host."""
    kwargs: dict[str, Any] = {"stream": None, "max_version": VERSION}
    if not on_host:
        kwargs["dl_device"] = (KDL_CPU, 0)
    try:
        return obj.__dlpack__(**kwargs)
    except TypeError:
        if not on_host:  # a producer from before DLPack 1.0 cannot copy to the host
            raise BufferError(f"{op}: the memory is not on the host, and its producer cannot copy it there") from None
    try:
        return obj.__dlpack__(stream=None)
    except TypeError:
        return obj.__dlpack__()


def import_dlpack(obj: Any, device: str | None = None, copy: bool | None = None, op: str = "from_dlpack") -> Tensor:
    """`Tensor.from_dlpack(obj)`: a tensor over the memory of DLPack producer `obj` (see `adopt_array`)."""
    if isinstance(obj, Tensor):
        out = obj.clone() if copy else copy_module.copy(obj)  # the engine sees the sharing (a view of obj)
        return out if device is None else out.to(_target(device, op))
    if type(obj).__name__ == "PyCapsule":  # a bare capsule (the protocol before __dlpack__)
        capsule, on_host = obj, True
    elif hasattr(obj, "__dlpack__"):
        lender = obj.__dlpack_device__() if hasattr(obj, "__dlpack_device__") else (KDL_CPU, 0)
        on_host = int(lender[0]) in HOST_DEVICE_TYPES
        if not on_host and copy is False:
            raise BufferError(f"{op}: copy=False, but the memory is on {_device_text(lender)}: it must be copied")
        try:
            capsule = _lend(obj, on_host, op)
        except (BufferError, NotImplementedError, RuntimeError, ValueError) as e:
            if on_host:
                raise
            raise BufferError(
                f"{op}: the memory is on {_device_text(lender)} and its producer would not copy it to the host ({e}); "
                "move it to the CPU first (torch: .cpu())"
            ) from None
    else:
        raise TypeError(f"{op}: a {type(obj).__name__} is not a DLPack producer (it has no __dlpack__ method)")
    lent = Lent(capsule)  # consumed: its deleter runs when `lent` and every array over its memory are gone
    if lent.device[0] not in HOST_DEVICE_TYPES:
        raise BufferError(f"{op}: the memory is on {_device_text(lent.device)}, not the host; copy it to the CPU first")
    try:
        dt = lent.dtype
    except TypeError as e:
        raise TypeError(f"{op}: {e}") from None
    return adopt_array(lent.array(), dt, device, copy, op)


def import_numpy(a: np.ndarray, device: str | None = None, copy: bool | None = None) -> Tensor:
    """`Tensor.from_numpy(a)`: a tensor over `a`'s memory where it can be shared (see `adopt_array`); bfloat16 and fp8
    arrays of ml_dtypes keep their dtype."""
    if not isinstance(a, np.ndarray):
        raise TypeError(f"from_numpy: expected a numpy ndarray, got {type(a).__name__}")
    if (dt := _ML_DTYPES.get(a.dtype.name)) is not None:
        bits = a.view(np_dtype(dt))
    elif (dt := _NUMPY_DTYPES.get(a.dtype.newbyteorder("="))) is not None:
        bits = a
    else:
        raise TypeError(f"from_numpy: numpy dtype {a.dtype} has no zeptograd dtype")
    return adopt_array(bits, dt, device, copy, "from_numpy")


def _torch(op: str) -> Any:
    try:
        import torch
    except ImportError:
        raise ImportError(f"{op} needs PyTorch, which is not installed: pip install torch") from None
    return torch


def import_torch(t: Any, device: str | None = None, copy: bool | None = None) -> Tensor:
    """`Tensor.from_torch(t)`: a tensor over torch tensor `t`'s memory where it can be shared (a contiguous CPU
    tensor); other strides are copied in C order, and a tensor on another torch device is copied to the host first."""
    torch = _torch("from_torch")
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"from_torch: expected a torch.Tensor, got {type(t).__name__}")
    if t.layout is not torch.strided:
        raise TypeError(f"from_torch: a {t.layout} tensor has no strided memory to share; call .to_dense() first")
    t = t.detach().resolve_conj().resolve_neg()  # torch lends only tensors without autograd or lazy conj/neg bits
    if t.device.type != "cpu":
        if copy is False:
            raise BufferError(f"from_torch: copy=False, but the tensor is on {t.device}: it must be copied to the host")
        t = t.cpu()
    return import_dlpack(t, device, copy, "from_torch")


def to_torch(t: Tensor) -> Any:
    """`t.torch()`: a torch CPU tensor sharing `t`'s memory (through DLPack), or a host copy of a tensor on a GPU
    device."""
    torch = _torch("torch")
    return torch.from_dlpack(t if t.device in HOST_DEVICES else t.to("CPU"))
