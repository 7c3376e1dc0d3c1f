"""DLPack: the C structs through which tensor libraries lend each other memory without copying (dmlc/dlpack's
dlpack.h, written here in ctypes), and the PyCapsules that carry them between Python objects.

A producer's `__dlpack__` returns a capsule named "dltensor_versioned" (a DLManagedTensorVersioned, DLPack 1.x) or
"dltensor" (the legacy DLManagedTensor, for a consumer that asks for no version). The struct describes the memory
(address, shape, strides in elements, dtype code and bits, device) and carries a deleter. The consumer renames the
capsule "used_dltensor_versioned" / "used_dltensor", so that collecting the capsule does nothing more, and calls the
deleter once it no longer reads the memory; a capsule nobody consumed calls the deleter itself when it is collected.

`to_capsule` lends a numpy view of host memory and keeps an object alive (the zeptograd Buffer that owns the memory)
until the deleter runs; `Lent(capsule)` consumes a capsule: its numpy view of the memory calls
the producer's deleter when the last array over it dies.

>>> import numpy as np
>>> from zeptograd.dtype import dtypes
>>> memory = np.arange(6, dtype=np.float32)
>>> lent = Lent(to_capsule(memory.reshape(2, 3), dtypes.float32, keep=memory, versioned=True))
>>> lent.dtype, lent.shape, lent.array().tolist()
(dtypes.float32, (2, 3), [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]])
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from zeptograd.dtype import NARROW_INTS, DType, dtypes, np_dtype

# DLDeviceType: the devices zeptograd names in messages, and those whose memory the host's CPU reads directly
KDL_CPU, KDL_CUDA, KDL_CUDA_HOST, KDL_OPENCL, KDL_ROCM, KDL_ROCM_HOST, KDL_WEBGPU = 1, 2, 3, 4, 10, 11, 15
DEVICE_TYPE_NAMES = {
    1: "CPU",
    2: "CUDA",
    3: "CUDAHost",
    4: "OpenCL",
    7: "Vulkan",
    8: "Metal",
    9: "VPI",
    10: "ROCm",
    11: "ROCmHost",
    12: "ExtDev",
    13: "CUDAManaged",
    14: "OneAPI",
    15: "WebGPU",
    16: "Hexagon",
    17: "MAIA",
    18: "Trn",
}
HOST_DEVICE_TYPES = (KDL_CPU, KDL_CUDA_HOST, KDL_ROCM_HOST)  # pinned host memory is host memory

# the version of the structs written here: 1.1 added the fp8 type codes
VERSION = (1, 1)
FLAG_READ_ONLY = 1 << 0
FLAG_IS_COPIED = 1 << 1

# DLDataTypeCode
_INT, _UINT, _FLOAT, _BFLOAT, _BOOL, _FP8_E4M3FN, _FP8_E5M2 = 0, 1, 2, 4, 6, 10, 12
CODE_NAMES = {
    0: "int",
    1: "uint",
    2: "float",
    3: "opaque handle",
    4: "bfloat",
    5: "complex",
    6: "bool",
    7: "float8_e3m4",
    8: "float8_e4m3",
    9: "float8_e4m3b11fnuz",
    10: "float8_e4m3fn",
    11: "float8_e4m3fnuz",
    12: "float8_e5m2",
    13: "float8_e5m2fnuz",
    14: "float8_e8m0fnu",
    15: "float6_e2m3fn",
    16: "float6_e3m2fn",
    17: "float4_e2m1fn",
}
# zeptograd's fp8e4m3 is the finite e4m3 (no infinities, one NaN): DLPack's (and torch's) float8_e4m3fn
DTYPE_CODES: dict[DType, tuple[int, int]] = {
    dtypes.bool: (_BOOL, 8),
    # not the narrow ints: DLPack's 4-bit ints are packed two to a byte, zeptograd's take a byte each
    **{dt: (_INT, 8 * dt.itemsize) for dt in dtypes.sints if dt not in NARROW_INTS},
    **{dt: (_UINT, 8 * dt.itemsize) for dt in dtypes.uints if dt not in NARROW_INTS},
    dtypes.float16: (_FLOAT, 16),
    dtypes.float32: (_FLOAT, 32),
    dtypes.float64: (_FLOAT, 64),
    dtypes.bfloat16: (_BFLOAT, 16),
    dtypes.fp8e4m3: (_FP8_E4M3FN, 8),
    dtypes.fp8e5m2: (_FP8_E5M2, 8),
}
_DTYPE_OF_CODE = {code: dt for dt, code in DTYPE_CODES.items()}


def dtype_of_code(code: int, bits: int, lanes: int) -> DType:
    """The zeptograd dtype of DLPack's (code, bits, lanes); a TypeError naming the DLPack type when there is none.

    >>> dtype_of_code(4, 16, 1)
    dtypes.bfloat16
    """
    if lanes == 1 and (dt := _DTYPE_OF_CODE.get((code, bits))) is not None:
        return dt
    kind = CODE_NAMES.get(code, f"type code {code}")
    lanes_text = f" x{lanes} lanes" if lanes != 1 else ""
    raise TypeError(f"DLPack dtype {kind}{bits}{lanes_text} (code {code}, {bits} bits) has no zeptograd dtype")


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


# void (*deleter)(DLManagedTensor[Versioned]* self): the struct's address as a plain pointer
DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("version", DLPackVersion),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", DELETER),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", DLTensor),
    ]


# capsule names: module constants, because a capsule keeps the pointer to its name, not a copy
NAME = b"dltensor"
NAME_VERSIONED = b"dltensor_versioned"
USED_NAME = b"used_dltensor"
USED_NAME_VERSIONED = b"used_dltensor_versioned"

_api = ctypes.pythonapi
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_api.PyCapsule_SetName.restype = ctypes.c_int
_api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
# the same two with the capsule as a Python object (the destructor above gets a bare pointer to a dying capsule)
_capsule_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(("PyCapsule_IsValid", _api))
_capsule_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(("PyCapsule_GetPointer", _api))

# what each lent struct keeps alive (the struct itself, its shape and strides, the memory's owner), by the struct's
# address, until its deleter runs: the memory cannot go back to an allocator while a consumer reads it
_lent: dict[int, tuple[Any, ...]] = {}


@DELETER
def _deleter(address: int | None) -> None:
    # called by the consumer (torch calls it from C++, possibly on another thread: a ctypes callback takes the GIL)
    if address is not None:
        _lent.pop(address, None)


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _capsule_destructor(capsule: int | None) -> None:
    # a capsule still under its first name was never consumed: nobody else will call the deleter
    for name in (NAME_VERSIONED, NAME):
        if capsule is not None and _api.PyCapsule_IsValid(capsule, name):
            _lent.pop(_api.PyCapsule_GetPointer(capsule, name), None)


def lent_count() -> int:
    """How many structs this process has lent that no consumer has released yet (for tests of their lifetime)."""
    return len(_lent)


def to_capsule(
    view: np.ndarray,
    dtype: DType,
    keep: Any,
    versioned: bool,
    copied: bool = False,
    device: tuple[int, int] = (KDL_CPU, 0),
) -> Any:
    """A DLPack capsule lending the host memory numpy array `view` sees (elements of `dtype`, stored as
    `np_dtype(dtype)`; any strides that are whole elements), which keeps `keep` (the memory's owner) alive until the
    consumer calls the deleter. `versioned`: a DLManagedTensorVersioned capsule (DLPack 1.x), else the legacy one;
    `copied` sets the versioned struct's IS_COPIED flag (the memory is the consumer's alone)."""
    if dtype not in DTYPE_CODES:
        raise TypeError(
            f"DLPack cannot lend {dtype.name} tensors: it has no such dtype (its int4 is packed two to a byte)"
        )
    if view.dtype != np_dtype(dtype):
        raise TypeError(f"to_capsule: a view of {view.dtype} cannot hold {dtype!r} (stored as {np_dtype(dtype)})")
    item = view.itemsize
    if any(s % item for s in view.strides):
        raise ValueError(f"to_capsule: strides {view.strides} (bytes) are not whole {item}-byte elements")
    ndim = view.ndim
    shape = (ctypes.c_int64 * max(ndim, 1))(*view.shape)
    strides = (ctypes.c_int64 * max(ndim, 1))(*(s // item for s in view.strides))
    managed: DLManagedTensor | DLManagedTensorVersioned
    if versioned:
        managed = DLManagedTensorVersioned()
        managed.version = DLPackVersion(*VERSION)
        managed.flags = FLAG_IS_COPIED if copied else 0
    else:
        managed = DLManagedTensor()
    managed.manager_ctx = None
    managed.deleter = _deleter
    tensor = managed.dl_tensor
    tensor.data = view.ctypes.data
    tensor.device = DLDevice(*device)
    tensor.ndim = ndim
    code, bits = DTYPE_CODES[dtype]
    tensor.dtype = DLDataType(code, bits, 1)
    tensor.shape = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64)) if ndim else None
    tensor.strides = ctypes.cast(strides, ctypes.POINTER(ctypes.c_int64)) if ndim else None
    tensor.byte_offset = 0
    address = ctypes.addressof(managed)
    _lent[address] = (managed, shape, strides, view, keep)
    try:
        return _api.PyCapsule_New(address, NAME_VERSIONED if versioned else NAME, _capsule_destructor)
    except BaseException:
        _lent.pop(address, None)
        raise


class Lent:
    """Memory another library lent through a DLPack capsule, consumed (the capsule renamed): its dtype, shape,
    strides (in elements), device and flags, and `array()`, a numpy view of it. The producer's deleter runs when this
    object dies, which the views' `.base` delays until the last of them is gone."""

    def __init__(self, capsule: Any) -> None:
        self._deleter: Any = None
        if _capsule_is_valid(capsule, NAME_VERSIONED):
            pointer = _capsule_pointer(capsule, NAME_VERSIONED)
            managed: Any = DLManagedTensorVersioned.from_address(pointer)
            used = USED_NAME_VERSIONED
        elif _capsule_is_valid(capsule, NAME):
            pointer = _capsule_pointer(capsule, NAME)
            managed = DLManagedTensor.from_address(pointer)
            used = USED_NAME
        else:
            kind = type(capsule).__name__
            raise BufferError(
                f"from_dlpack: __dlpack__ returned a {kind} that is not an unused 'dltensor' or 'dltensor_versioned' "
                "capsule (a capsule can be consumed only once)"
            )
        _api.PyCapsule_SetName(capsule, used)  # ours now: collecting the capsule must not call the deleter
        self._pointer, self._deleter = pointer, managed.deleter
        self.versioned = used is USED_NAME_VERSIONED
        self.flags = managed.flags if self.versioned else 0
        if self.versioned and managed.version.major > VERSION[0]:
            version = f"{managed.version.major}.{managed.version.minor}"
            raise BufferError(f"from_dlpack: the producer lent a DLPack {version} tensor; zeptograd reads 1.x")
        t = managed.dl_tensor
        self.device = (int(t.device.device_type), int(t.device.device_id))
        self.ndim = int(t.ndim)
        self.code, self.bits, self.lanes = int(t.dtype.code), int(t.dtype.bits), int(t.dtype.lanes)
        self.shape = tuple(int(t.shape[i]) for i in range(self.ndim))
        if self.ndim and t.strides:
            self.strides = tuple(int(t.strides[i]) for i in range(self.ndim))
        else:  # no strides (allowed before DLPack 1.2): C order
            self.strides = tuple(int(np.prod(self.shape[i + 1 :])) for i in range(self.ndim))
        self.address = (t.data or 0) + int(t.byte_offset)
        self.read_only = bool(self.flags & FLAG_READ_ONLY)

    @property
    def dtype(self) -> DType:
        """The zeptograd dtype of the lent elements (a TypeError naming the DLPack type when there is none)."""
        return dtype_of_code(self.code, self.bits, self.lanes)

    @property
    def __array_interface__(self) -> dict[str, Any]:
        storage = np_dtype(self.dtype)
        return {
            "version": 3,
            "shape": self.shape,
            "typestr": storage.str,
            "data": (self.address, self.read_only),
            "strides": tuple(s * storage.itemsize for s in self.strides),
        }

    def array(self) -> np.ndarray:
        """A numpy view of the lent memory (bfloat16 and fp8 as the unsigned ints holding their bits), read-only where
        the producer said so. It keeps this object, and so the memory, alive."""
        if 0 in self.shape:  # nothing to read: the pointer may be NULL
            return np.empty(self.shape, np_dtype(self.dtype))
        return np.asarray(self)

    def __del__(self) -> None:
        if self._deleter:
            deleter, self._deleter = self._deleter, None
            deleter(self._pointer)
