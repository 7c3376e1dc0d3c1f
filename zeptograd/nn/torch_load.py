"""`torch_load`: PyTorch's `torch.save` checkpoints read without torch, and without running code from the file.

A checkpoint is a pickle whose tensors refer to storages by key. In the zip format (torch >= 1.6) the pickle is
`<name>/data.pkl` and each storage an uncompressed entry `<name>/data/<key>`; in the legacy format (torch.save with
`_use_new_zipfile_serialization=False`) the file is a run of pickles (magic number, protocol, system info, the
object, the storage keys) followed by each storage's element count and bytes. Either way each storage is a window of
the file on the DISK device (runtime/ops_disk.py), and each tensor a view of it (its storage offset, sizes and
strides), so a tensor's bytes are read only when it is copied to a compute device. The older tar format (torch
before 0.1.10) is not read.

The pickle is read by an unpickler that knows only the globals a checkpoint of tensors and containers needs (torch's
tensor and parameter rebuild functions, its storage classes and dtypes, OrderedDict, set, frozenset, complex, and
the codec protocol 2 writes bytes with); every other global, `os.system` or a model class, is refused before
anything is called.

>>> import os, tempfile
>>> import torch
>>> path = os.path.join(tempfile.mkdtemp(), "m.pt")
>>> base = torch.arange(6.0)
>>> torch.save({"w": base.view(2, 3).t(), "tail": base[4:], "step": 3}, path)
>>> ckpt = torch_load(path)
>>> ckpt["w"].tolist(), ckpt["tail"].tolist(), ckpt["step"]
([[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]], [4.0, 5.0], 3)
"""

from __future__ import annotations

import collections
import os
import pickle
import struct
import tarfile
import zipfile
from collections.abc import Callable
from typing import IO, Any, NamedTuple

import numpy as np

from zeptograd.dtype import DType, dtypes
from zeptograd.engine.disk import disk_window, is_disk
from zeptograd.engine.realize import device_name
from zeptograd.helpers import ArgumentError, existing_file
from zeptograd.tensor import Tensor
from zeptograd.uop.movement import strided_view

__all__ = ["torch_load"]

# torch's dtype names (as pickled: `torch.float32`) and its typed storage classes, with zeptograd's dtypes
_TORCH_DTYPES: dict[str, DType] = {
    "float32": dtypes.float32,
    "float": dtypes.float32,
    "float64": dtypes.float64,
    "double": dtypes.float64,
    "float16": dtypes.float16,
    "half": dtypes.float16,
    "bfloat16": dtypes.bfloat16,
    "float8_e4m3fn": dtypes.fp8e4m3,
    "float8_e5m2": dtypes.fp8e5m2,
    "int64": dtypes.int64,
    "long": dtypes.int64,
    "int32": dtypes.int32,
    "int": dtypes.int32,
    "int16": dtypes.int16,
    "short": dtypes.int16,
    "int8": dtypes.int8,
    "uint8": dtypes.uint8,
    "uint16": dtypes.uint16,
    "uint32": dtypes.uint32,
    "uint64": dtypes.uint64,
    "bool": dtypes.bool,
}
# torch dtypes a checkpoint can name that zeptograd has no dtype for: loading a tensor of one is a clear error
_OTHER_TORCH_DTYPES = frozenset(
    {"complex32", "complex64", "complex128", "cfloat", "cdouble", "chalf", "float8_e4m3fnuz", "float8_e5m2fnuz"}
    | {"float8_e8m0fnu", "qint8", "quint8", "qint32", "quint4x2", "quint2x4", "bits8", "bits16", "uint1", "int1"}
)
_STORAGES: dict[str, str] = {
    "FloatStorage": "float32",
    "DoubleStorage": "float64",
    "HalfStorage": "float16",
    "BFloat16Storage": "bfloat16",
    "LongStorage": "int64",
    "IntStorage": "int32",
    "ShortStorage": "int16",
    "CharStorage": "int8",
    "ByteStorage": "uint8",
    "BoolStorage": "bool",
    "ComplexFloatStorage": "complex64",
    "ComplexDoubleStorage": "complex128",
    "QInt8Storage": "qint8",
    "QUInt8Storage": "quint8",
    "QInt32Storage": "qint32",
}
_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
# the builtins a checkpoint's pickle may name (protocol 2 writes a set as a call of `set`)
_BUILTINS = {"set": set, "frozenset": frozenset, "complex": complex}


class _TorchDtype(NamedTuple):
    """A torch dtype as the pickle names it; `dtype` is None where zeptograd has none."""

    name: str
    dtype: DType | None


class _StorageType(NamedTuple):
    """A storage class from the pickle (`torch.FloatStorage`; `torch.storage.UntypedStorage`: bytes)."""

    dtype: _TorchDtype


class _Storage(NamedTuple):
    """A storage of the checkpoint: its element dtype, and where its bytes lie in the file."""

    key: str
    dtype: _TorchDtype
    offset: int  # bytes from the start of the file
    nbytes: int


def _torch_dtype(name: str) -> _TorchDtype:
    return _TorchDtype(name, _TORCH_DTYPES.get(name))


def _as_torch_dtype(dtype: Any) -> _TorchDtype | None:
    """The dtype argument of `_rebuild_tensor_v3` (a zeptograd DType, or a torch dtype zeptograd lacks)."""
    if isinstance(dtype, DType):
        return _TorchDtype(dtype.name, dtype)
    return dtype if isinstance(dtype, _TorchDtype) else None


def _latin1_encode(text: str, encoding: str = "utf-8") -> bytes:
    """`_codecs.encode` as pickle protocol 2 writes bytes (`encode(text, 'latin1')`), for no other codec."""
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise pickle.UnpicklingError(f"torch_load: _codecs.encode is allowed for protocol 2 bytes only ({encoding!r})")
    return text.encode("latin1")


class _Loader:
    """The tensors of one checkpoint: each tensor made from its storage at most once per view (a tied weight is one
    Tensor), on the DISK device of `path`, copied to `device` unless that is None."""

    def __init__(self, path: str, device: str | None, locate: Callable[[str, _TorchDtype, int], _Storage] | None):
        self.path, self.device, self.locate = path, device, locate
        self.disk = device_name(f"disk:{path}")
        self.storages: dict[str, _Storage] = {}
        self.views: dict[tuple, Tensor] = {}

    def storage(self, pid: Any) -> _Storage | None:
        """The storage of persistent id `pid`: ('storage', storage class, key, location, numel[, view metadata])."""
        if not (isinstance(pid, tuple) and len(pid) >= 5 and pid[0] == "storage" and isinstance(pid[1], _StorageType)):
            raise pickle.UnpicklingError(f"torch_load: {self.path} refers to an object it does not hold: {pid!r}")
        dtype, key, numel = pid[1].dtype, str(pid[2]), pid[4]
        view = pid[5] if len(pid) > 5 else None  # a legacy view of a storage: (its key, element offset, size)
        if self.locate is None:  # the legacy format's first pass: only the keys and dtypes are wanted
            self.storages.setdefault(key, _Storage(key, dtype, 0, 0))
            return None
        if key not in self.storages:
            self.storages[key] = self.locate(key, dtype, numel)
        storage = self.storages[key]
        if view is not None:
            _, start, size = view
            item = _itemsize(dtype)
            storage = _Storage(f"{key}[{start}:]", dtype, storage.offset + start * item, size * item)
        return storage

    def tensor(self, storage: _Storage | None, offset: int, size: Any, stride: Any, dtype: _TorchDtype | None) -> Any:
        """The tensor `torch.as_strided(storage, size, stride, offset)` of `dtype` (the storage's by default)."""
        if storage is None:
            return None
        dtype = dtype or storage.dtype
        if dtype.dtype is None:
            raise TypeError(f"torch_load: {self.path} has a tensor of torch.{dtype.name}, which zeptograd cannot hold")
        dt = dtype.dtype
        size, stride = tuple(size), tuple(stride)
        if not all(isinstance(v, int) and v >= 0 for v in (offset, *size, *stride)) or len(size) != len(stride):
            raise ArgumentError(f"torch_load: {self.path}: a tensor of sizes {size}, strides {stride}, offset {offset}")
        key = (storage.key, storage.offset, offset, size, stride, dt)
        if key in self.views:
            return self.views[key]
        extent = 0 if 0 in size else 1 + sum((n - 1) * s for n, s in zip(size, stride))
        start = storage.offset + offset * dt.itemsize
        if (offset + extent) * dt.itemsize > storage.nbytes:
            raise ArgumentError(
                f"torch_load: {self.path}: a {size} tensor at element {offset} of storage {storage.key} reads past "
                f"its {storage.nbytes} bytes"
            )
        window = disk_window(self.disk, start, extent, dt)
        view = strided_view(window, size, stride)
        if view is None:
            # elements shared between rows (as_strided windows): gathered on a compute device
            flat = Tensor(window, device=self.disk).to(self.device or device_name(None))
            index = sum(
                (np.arange(n).reshape([-1 if i == k else 1 for i in range(len(size))]) * s)
                for k, (n, s) in enumerate(zip(size, stride))
            )
            out = flat[Tensor(np.broadcast_to(index, size).astype(np.int64), device=flat.device)]
        else:
            out = Tensor(view, device=self.disk)
            if self.device is not None:
                out = out.to(self.device)
        self.views[key] = out
        return out


def _itemsize(dtype: _TorchDtype) -> int:
    if dtype.dtype is None:
        sizes = {"complex32": 4, "complex64": 8, "complex128": 16, "cfloat": 8, "cdouble": 16, "chalf": 4, "qint32": 4}
        return sizes.get(dtype.name, 1)
    return dtype.dtype.itemsize


_TENSOR_TYPE = object()  # `torch.Tensor` as `_rebuild_from_type_v2` names the type to rebuild


def _rebuild_from_type(func: Any, new_type: Any, args: Any, state: Any) -> Any:
    """`torch._tensor._rebuild_from_type_v2`: `func(*args)`, a tensor of an allowed rebuild function, whose type must
    be torch.Tensor (a subclass is a global the unpickler refuses); its attributes (`state`) are dropped."""
    if new_type is not _TENSOR_TYPE or not callable(func) or not isinstance(args, tuple):
        raise pickle.UnpicklingError(f"torch_load: a tensor rebuilt as {new_type!r}: only torch.Tensor is loaded")
    return func(*args)


class _Unpickler(pickle.Unpickler):
    """An unpickler that builds checkpoints' tensors with `loader` and refuses every global it does not know."""

    def __init__(self, file: IO[bytes], loader: _Loader):
        super().__init__(file)
        self.loader = loader

    def find_class(self, module: str, name: str) -> Any:
        loader = self.loader
        if module in ("torch._utils", "torch._tensor"):
            if name == "_rebuild_tensor":
                return lambda storage, offset, size, stride: loader.tensor(storage, offset, size, stride, None)
            if name == "_rebuild_tensor_v2":
                return lambda storage, offset, size, stride, *_: loader.tensor(storage, offset, size, stride, None)
            if name == "_rebuild_tensor_v3":
                return lambda storage, offset, size, stride, _grad, _hooks, dtype, *_: loader.tensor(
                    storage, offset, size, stride, _as_torch_dtype(dtype)
                )
            if name in ("_rebuild_parameter", "_rebuild_parameter_with_state"):
                return lambda data, *_: data
            if name == "_rebuild_from_type_v2":  # a tensor with Python attributes: the tensor, without them
                return _rebuild_from_type
        if module == "torch":
            if name in _STORAGES:
                return _StorageType(_torch_dtype(_STORAGES[name]))
            if name in ("UntypedStorage", "ByteStorage"):
                return _StorageType(_torch_dtype("uint8"))
            if name in _TORCH_DTYPES:
                return _TORCH_DTYPES[name]  # a dtype as a value of the checkpoint: zeptograd's
            if name in _OTHER_TORCH_DTYPES:
                return _torch_dtype(name)
            if name == "Size":
                return tuple
            if name == "Tensor":
                return _TENSOR_TYPE
        if (module, name) == ("torch.storage", "UntypedStorage"):
            return _StorageType(_torch_dtype("uint8"))
        if (module, name) == ("collections", "OrderedDict"):
            return collections.OrderedDict
        if module in ("builtins", "__builtin__") and name in _BUILTINS:
            return _BUILTINS[name]
        if (module, name) == ("_codecs", "encode"):
            return _latin1_encode
        raise pickle.UnpicklingError(
            f"torch_load: refusing to load global '{module}.{name}' from {loader.path}: only tensors and containers "
            "can be loaded (save a model's state_dict(), not the model)"
        )

    def persistent_load(self, pid: Any) -> Any:
        return self.loader.storage(pid)


def torch_load(path: str | os.PathLike, device: str | None = None) -> Any:
    """The object a PyTorch checkpoint holds (a state dict, or nested dicts, lists and tuples of tensors and Python
    values), its tensors as zeptograd Tensors with torch's dtypes (bfloat16 and fp8 too) and values: a view keeps
    its storage offset, sizes and strides (a transposed tensor, two tensors of one storage). The tensors are realized
    on `device` (the default device if None), or, with `device="disk"`, left as views of the file on the DISK
    device, read only when copied (`t.to("CPU")`; `load_state_dict` copies them). Reads the zip format and the
    legacy one; never runs code from the file (an unknown global is a pickle.UnpicklingError naming it). Two tensors
    that view one storage share no memory once loaded (each holds its own values); one view named twice is one
    Tensor. A view whose rows overlap (an `as_strided` window, which movement ops cannot express) is gathered on a
    compute device: `device`, or the default device with device="disk".

    >>> import os, tempfile
    >>> import torch
    >>> path = os.path.join(tempfile.mkdtemp(), "sd.pt")
    >>> torch.save(torch.nn.Linear(2, 3).state_dict(), path)
    >>> {k: (v.shape, v.dtype) for k, v in torch_load(path).items()}
    {'weight': ((3, 2), dtypes.float32), 'bias': ((3,), dtypes.float32)}
    """
    path = existing_file(path, "torch_load", "checkpoint")
    lazy = isinstance(device, str) and device.upper() == "DISK"
    target = None if lazy else device_name(device)
    if target is not None and is_disk(target):
        raise ValueError(f"torch_load: device {device!r}: the tensors are views of their own file with device='disk'")
    try:
        if zipfile.is_zipfile(path):
            loader, result = _load_zip(path, target)
        elif tarfile.is_tarfile(path):
            raise ArgumentError(f"torch_load: {path} is a tar file: the tar format of torch before 0.1.10 is not read")
        else:
            loader, result = _load_legacy(path, target)
    except (EOFError, zipfile.BadZipFile, struct.error, pickle.UnpicklingError) as e:
        if isinstance(e, pickle.UnpicklingError) and str(e).startswith("torch_load:"):
            raise
        raise ArgumentError(f"torch_load: {path} is not a PyTorch checkpoint ({type(e).__name__}: {e})") from None
    if target is not None and loader.views:
        Tensor.realize(*loader.views.values())
    return result


def _load_zip(path: str, device: str | None) -> tuple[_Loader, Any]:
    with zipfile.ZipFile(path) as zf, open(path, "rb") as raw:
        infos = {zi.filename: zi for zi in zf.infolist()}
        pickles = sorted((n for n in infos if n == "data.pkl" or n.endswith("/data.pkl")), key=len)
        if not pickles:
            raise ArgumentError(f"torch_load: {path} is a zip file without a data.pkl: not a PyTorch checkpoint")
        prefix = pickles[0][: -len("data.pkl")]
        if prefix + "byteorder" in infos and zf.read(prefix + "byteorder").strip() != b"little":
            raise ArgumentError(f"torch_load: {path} was saved on a big-endian machine, which torch_load does not read")

        def locate(key: str, dtype: _TorchDtype, numel: int) -> _Storage:
            zi = infos.get(f"{prefix}data/{key}")
            if zi is None:
                raise ArgumentError(f"torch_load: {path} has no entry for storage {key}")
            if zi.compress_type != zipfile.ZIP_STORED:
                raise ArgumentError(f"torch_load: storage {key} of {path} is compressed (torch stores them raw)")
            raw.seek(zi.header_offset)
            local = raw.read(30)
            if local[:4] != b"PK\x03\x04":
                raise ArgumentError(f"torch_load: {path}: a bad zip entry header for storage {key}")
            name_len, extra_len = struct.unpack("<HH", local[26:30])
            return _Storage(key, dtype, zi.header_offset + 30 + name_len + extra_len, zi.file_size)

        loader = _Loader(path, device, locate)
        with zf.open(pickles[0]) as f:
            return loader, _Unpickler(f, loader).load()


def _load_legacy(path: str, device: str | None) -> tuple[_Loader, Any]:
    """The legacy format: the object's pickle is read twice, first for its storages' keys (their bytes come after
    it, in the order of the key list that follows), then for its tensors."""
    with open(path, "rb") as f:
        scan = _Loader(path, device, None)
        magic = _Unpickler(f, scan).load()
        if magic != _LEGACY_MAGIC:
            raise ArgumentError(f"torch_load: {path} is neither a zip nor a legacy PyTorch checkpoint")
        _Unpickler(f, scan).load()  # the protocol version
        _Unpickler(f, scan).load()  # the system info (endianness, type sizes)
        start = f.tell()
        _Unpickler(f, scan).load()
        keys = _Unpickler(f, scan).load()
        located: dict[str, _Storage] = {}
        offset = f.tell()
        size = os.path.getsize(path)
        for key in keys:
            key = str(key)
            if key not in scan.storages:
                raise ArgumentError(f"torch_load: {path} lists storage {key}, which its object does not use")
            f.seek(offset)
            (numel,) = struct.unpack("<q", f.read(8))
            nbytes = numel * _itemsize(scan.storages[key].dtype)
            if offset + 8 + nbytes > size:
                raise ArgumentError(f"torch_load: {path} is truncated (storage {key})")
            located[key] = _Storage(key, scan.storages[key].dtype, offset + 8, nbytes)
            offset += 8 + nbytes

        def locate(key: str, dtype: _TorchDtype, numel: int) -> _Storage:
            if key not in located:
                raise ArgumentError(f"torch_load: {path} has no bytes for storage {key}")
            return located[key]

        loader = _Loader(path, device, locate)
        f.seek(start)
        return loader, _Unpickler(f, loader).load()
